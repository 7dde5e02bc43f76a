//! `udp.stream` numbering and datagram events on raw frames (decoded by
//! `pcapsleuth-decode`), following Wireshark 4.0.17: the expectations below
//! are what `tshark -T fields -e udp.stream` prints for the same frames.

use pcapsleuth_core::{Direction, Endpoint, Timestamp};
use pcapsleuth_core::{FrameNo, InterfaceId, StreamId};
use pcapsleuth_decode::{Decoder, Transport};
use pcapsleuth_flow::{FlowConfig, FlowEvent, FlowTable, PacketFlowInfo, PacketMeta};
use std::net::{IpAddr, Ipv4Addr};

const A: [u8; 4] = [10, 0, 0, 1];
const B: [u8; 4] = [10, 0, 0, 2];
const C: [u8; 4] = [10, 0, 0, 3];

fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, id: u16, payload: &[u8]) -> Vec<u8> {
    let total = u16::try_from(20 + payload.len()).unwrap_or(u16::MAX);
    let mut h = vec![0x45, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&id.to_be_bytes());
    h.extend_from_slice(&[0, 0, 64, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(payload);
    h
}

fn udp(sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    let len = u16::try_from(8 + data.len()).unwrap_or(u16::MAX);
    let mut u = Vec::new();
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&len.to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(data);
    u
}

/// ICMP port unreachable from `from` to `to` quoting the first
/// `20 + quoted_udp_bytes` bytes of `orig` (an IPv4 datagram).
fn port_unreachable(from: [u8; 4], to: [u8; 4], orig: &[u8], quoted_udp_bytes: usize) -> Vec<u8> {
    let mut icmp = vec![3, 3, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&orig[..(20 + quoted_udp_bytes).min(orig.len())]);
    ipv4(from, to, 1, 0, &icmp)
}

struct Run {
    decoder: Decoder,
    table: FlowTable,
    frame: u64,
    events: Vec<FlowEvent>,
}

impl Run {
    fn new() -> Self {
        Run {
            decoder: Decoder::new(),
            table: FlowTable::new(FlowConfig::default()),
            frame: 0,
            events: Vec::new(),
        }
    }

    /// Feed one raw IPv4 packet (link type RAW = 101); returns the flow info
    /// and the captured UDP payload the decoder exposes.
    fn feed(&mut self, packet: &[u8]) -> (PacketFlowInfo, Vec<u8>) {
        self.frame += 1;
        let meta = PacketMeta {
            frame: FrameNo(self.frame),
            ts: Timestamp(i64::try_from(self.frame).unwrap_or(0) * 1_000_000),
            interface: InterfaceId(0),
        };
        let d = self.decoder.decode(101, packet);
        let payload = match d.transport {
            Transport::Udp(u) => u.payload.to_vec(),
            _ => Vec::new(),
        };
        let info = self.table.on_packet(&meta, &d, &mut self.events);
        (info, payload)
    }

    fn datagrams(&self) -> Vec<pcapsleuth_flow::DatagramEvent> {
        self.events
            .iter()
            .filter_map(|e| match e {
                FlowEvent::Datagram(d) => Some(*d),
                _ => None,
            })
            .collect()
    }
}

fn ep(a: [u8; 4], port: u16) -> Endpoint {
    Endpoint {
        addr: IpAddr::V4(Ipv4Addr::from(a)),
        port,
    }
}

#[test]
fn both_directions_share_a_stream_in_first_seen_order() {
    let mut r = Run::new();
    let (q, payload) = r.feed(&ipv4(A, B, 17, 7, &udp(5353, 53, b"query")));
    assert_eq!(
        (q.udp_stream, q.udp_dir),
        (Some(StreamId(0)), Some(Direction::ClientToServer))
    );
    assert_eq!(q.stream, None, "no tcp.stream on UDP");
    assert_eq!(payload, b"query");
    let (other, _) = r.feed(&ipv4(C, B, 17, 8, &udp(5353, 53, b"q2")));
    assert_eq!(other.udp_stream, Some(StreamId(1)));
    let (resp, _) = r.feed(&ipv4(B, A, 17, 9, &udp(53, 5353, b"answer")));
    assert_eq!(
        (resp.udp_stream, resp.udp_dir),
        (Some(StreamId(0)), Some(Direction::ServerToClient))
    );

    let d = r.datagrams();
    assert_eq!(d.len(), 3);
    assert_eq!(
        (d[0].stream, d[0].frame, d[0].first_in_stream),
        (StreamId(0), FrameNo(1), true)
    );
    assert_eq!((d[0].src, d[0].dst), (ep(A, 5353), ep(B, 53)));
    assert_eq!(
        (d[0].payload_len, d[0].captured_len, d[0].ip_len),
        (5, 5, 33)
    );
    assert_eq!(d[0].ip_id, Some(7));
    assert_eq!(
        (d[2].stream, d[2].dir, d[2].first_in_stream),
        (StreamId(0), Direction::ServerToClient, false)
    );
    assert_eq!(r.table.udp().len(), 2);
    assert_eq!(
        r.table.udp().get(StreamId(0)).map(|c| (c.client, c.server)),
        Some((ep(A, 5353), ep(B, 53)))
    );
}

#[test]
fn port_zero_is_an_ordinary_port() {
    let mut r = Run::new();
    assert_eq!(
        r.feed(&ipv4(A, B, 17, 1, &udp(0, 0, b"x"))).0.udp_stream,
        Some(StreamId(0))
    );
    assert_eq!(
        r.feed(&ipv4(B, A, 17, 2, &udp(0, 0, b"y"))).0.udp_stream,
        Some(StreamId(0))
    );
    assert_eq!(
        r.feed(&ipv4(B, A, 17, 3, &udp(0, 1, b"z"))).0.udp_stream,
        Some(StreamId(1))
    );
}

/// tshark: a quote of 6 UDP bytes gets no `udp.stream` and creates nothing;
/// a quote of all 8 creates the quoted conversation (the next new pair gets the next id).
#[test]
fn icmp_quotes_take_part_only_with_the_whole_header() {
    let mut r = Run::new();
    assert_eq!(
        r.feed(&ipv4(A, B, 17, 1, &udp(1000, 2000, b"a")))
            .0
            .udp_stream,
        Some(StreamId(0))
    );
    let orig = ipv4(A, C, 17, 2, &udp(1111, 2222, b"xx"));
    let (short, _) = r.feed(&port_unreachable(C, A, &orig, 6));
    assert_eq!(short.udp_stream, None);
    assert_eq!(
        r.feed(&ipv4(A, B, 17, 3, &udp(1001, 2001, b"a")))
            .0
            .udp_stream,
        Some(StreamId(1))
    );
    let (whole, _) = r.feed(&port_unreachable(C, A, &orig, 8));
    assert_eq!(
        (whole.udp_stream, whole.udp_dir),
        (Some(StreamId(2)), Some(Direction::ClientToServer))
    );
    assert_eq!(
        r.feed(&ipv4(C, A, 17, 4, &udp(2222, 1111, b"r")))
            .0
            .udp_stream,
        Some(StreamId(2))
    );
    assert_eq!(
        r.feed(&ipv4(A, B, 17, 5, &udp(1002, 2002, b"a")))
            .0
            .udp_stream,
        Some(StreamId(3))
    );
    // Quotes are not datagrams: four datagrams, no event for the ICMP frames.
    assert_eq!(r.datagrams().len(), 4);
    // The quote made the conversation: its client is the quoted source.
    assert_eq!(
        r.table.udp().get(StreamId(2)).map(|c| (c.client, c.server)),
        Some((ep(A, 1111), ep(C, 2222)))
    );
    assert_eq!(
        r.datagrams()
            .iter()
            .find(|d| d.stream == StreamId(2))
            .map(|d| (d.frame, d.dir, d.first_in_stream)),
        Some((FrameNo(5), Direction::ServerToClient, false))
    );
}

/// `ipv4` with a chosen flags/fragment-offset word.
fn ipv4_frag(
    src: [u8; 4],
    dst: [u8; 4],
    id: u16,
    flags_fragment: u16,
    total: u16,
    payload: &[u8],
) -> Vec<u8> {
    let mut h = ipv4(src, dst, 17, id, payload);
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[6..8].copy_from_slice(&flags_fragment.to_be_bytes());
    h
}

/// A VXLAN frame (outer A:50000 -> B:4789) carrying Ethernet + `inner` (IPv4).
fn vxlan(outer_sport: u16, inner: &[u8]) -> Vec<u8> {
    let mut eth = vec![0u8; 12];
    eth.extend_from_slice(&0x0800u16.to_be_bytes());
    eth.extend_from_slice(inner);
    let mut payload = vec![0x08, 0, 0, 0, 0, 0, 0x2A, 0];
    payload.extend_from_slice(&eth);
    ipv4(A, B, 17, 1, &udp(outer_sport, 4789, &payload))
}

/// tshark on VXLAN: `udp.stream` "outer,inner"; the outer conversation is
/// numbered first, also for an inner TCP segment (one value, the outer's).
#[test]
fn a_udp_tunnel_numbers_its_outer_conversation_first() {
    let mut r = Run::new();
    let (f1, payload) = r.feed(&vxlan(50000, &ipv4(C, A, 17, 2, &udp(53, 5353, b"in"))));
    assert_eq!(
        (f1.outer_udp_stream, f1.udp_stream),
        (Some(StreamId(0)), Some(StreamId(1)))
    );
    assert_eq!(payload, b"in", "the inner datagram is the transport");
    let (f2, _) = r.feed(&vxlan(50000, &ipv4(C, B, 17, 3, &udp(53, 5353, b"in2"))));
    assert_eq!(
        (f2.outer_udp_stream, f2.udp_stream),
        (Some(StreamId(0)), Some(StreamId(2)))
    );
    let mut tcp = vec![0u8; 20];
    tcp[0..2].copy_from_slice(&1000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
    tcp[12] = 0x50;
    tcp[13] = 0x02;
    let (f3, _) = r.feed(&vxlan(50001, &ipv4(C, B, 6, 4, &tcp)));
    assert_eq!(
        (f3.outer_udp_stream, f3.udp_stream, f3.stream),
        (Some(StreamId(3)), None, Some(StreamId(0)))
    );
    // One event per frame, for the inner datagram only.
    let d = r.datagrams();
    assert_eq!(d.iter().map(|d| d.stream).collect::<Vec<_>>(), [1, 2]);
    // The outer conversations are keyed by the outer pair.
    assert_eq!(
        r.table.udp().get(StreamId(0)).map(|c| (c.client, c.server)),
        Some((ep(A, 50000), ep(B, 4789)))
    );
    assert_eq!(
        r.table.udp().get(StreamId(3)).map(|c| c.client),
        Some(ep(A, 50001))
    );
}

/// tshark: a UDP Length field below 8 gets no `udp.stream` (IPv4 Length 0 included).
#[test]
fn a_length_field_below_8_gets_no_stream() {
    let mut r = Run::new();
    for bad in [0u16, 7] {
        let mut p = ipv4(A, B, 17, 1, &udp(1000, 2000, b"abcd"));
        p[24..26].copy_from_slice(&bad.to_be_bytes());
        let (info, _) = r.feed(&p);
        assert_eq!(info.udp_stream, None, "length {bad}");
    }
    assert_eq!(
        r.feed(&ipv4(A, B, 17, 2, &udp(1000, 2000, b"ok")))
            .0
            .udp_stream,
        Some(StreamId(0))
    );
    assert_eq!(r.datagrams().len(), 1);
}

/// tshark (badpackets.pcap): a first fragment shorter than its IP length field
/// is not reassembled but its UDP header gets a `udp.stream`; no datagram event.
#[test]
fn an_unreassembled_first_fragment_gets_a_stream() {
    let mut r = Run::new();
    let dgram = udp(53, 40000, &[0x55; 200]);
    let (info, payload) = r.feed(&ipv4_frag(B, A, 9, 0x2000, 1500, &dgram));
    assert_eq!(info.udp_stream, Some(StreamId(0)));
    assert!(payload.is_empty(), "the transport stays empty");
    assert!(r.datagrams().is_empty());
    assert_eq!(
        r.feed(&ipv4(A, B, 17, 2, &udp(40000, 53, b"q")))
            .0
            .udp_stream,
        Some(StreamId(0))
    );
    // A later fragment alone gets nothing.
    assert_eq!(
        r.feed(&ipv4_frag(B, A, 10, 0x2000 | 100, 1500, &[0x55; 100]))
            .0
            .udp_stream,
        None
    );
}
