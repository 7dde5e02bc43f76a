//! A packet captured before and after SNAT (MASQUERADE): the copies have
//! other addresses and ports, so they land in two `tcp.stream`s, but the same
//! IP ID, seq/ack, TSval and payload. The public [`PacketFingerprint`] on
//! every segment event and a [`FingerprintIndex`] pair them; a retransmission
//! (new IP ID and TSval) and an unrelated flow do not match.

use pcapsleuth_core::FrameNo;
use pcapsleuth_core::InterfaceId;
use pcapsleuth_core::{Direction, SeqNum, StreamRef, Timestamp};
use pcapsleuth_decode::{
    Decoded, IpHeader, IpVersion, TcpFlags, TcpOptions, TcpSegment, Transport,
};
use pcapsleuth_flow::{
    FingerprintIndex, FlowConfig, FlowEvent, FlowTable, L4Fingerprint, PacketFingerprint,
    PacketMeta, SegmentEvent,
};
use std::net::IpAddr;

/// The client behind the NAT box, the NAT box's public address, the server.
const LAN: &str = "10.0.0.2";
const WAN: &str = "198.51.100.1";
const SRV: &str = "203.0.113.5";

/// One side of the NAT: addresses, client port, TTL, capture interface.
#[derive(Clone, Copy)]
struct Side {
    client: &'static str,
    cport: u16,
    ttl: u8,
    iface: u32,
}

const INSIDE: Side = Side {
    client: LAN,
    cport: 40000,
    ttl: 64,
    iface: 0,
};
/// MASQUERADE rewrote the source address and port; the router decremented TTL.
const OUTSIDE: Side = Side {
    client: WAN,
    cport: 61000,
    ttl: 63,
    iface: 1,
};

struct Pkt {
    to_server: bool,
    ip_id: u32,
    seq: u32,
    ack: u32,
    flags: u16,
    tsval: u32,
    payload: &'static [u8],
}

fn decoded<'a>(side: Side, p: &Pkt, payload: &'a [u8]) -> Decoded<'a> {
    let (src, dst, sp, dp) = if p.to_server {
        (side.client, SRV, side.cport, 443)
    } else {
        (SRV, side.client, 443, side.cport)
    };
    let len = payload.len() as u32;
    Decoded {
        ip: Some(IpHeader {
            version: IpVersion::V4,
            src: src.parse::<IpAddr>().unwrap(),
            dst: dst.parse::<IpAddr>().unwrap(),
            ttl: if p.to_server {
                side.ttl
            } else {
                128 - side.ttl
            },
            ip_id: Some(p.ip_id),
            total_len: 52 + len,
            header_len: 20,
            protocol: 6,
            dont_fragment: true,
            fragment: None,
        }),
        transport: Transport::Tcp(TcpSegment {
            src_port: sp,
            dst_port: dp,
            seq: SeqNum(p.seq),
            ack: SeqNum(p.ack),
            flags: TcpFlags(p.flags),
            window: 502,
            urgent: 0,
            header_len: 32,
            payload_len: len,
            payload,
            options: TcpOptions {
                timestamps: Some((p.tsval, 7)),
                ..TcpOptions::default()
            },
        }),
        ..Decoded::default()
    }
}

const AK: u16 = TcpFlags::ACK;
const PSH: u16 = TcpFlags::PSH;

/// The segments of one connection (after the handshake), as both sides see them.
fn script() -> Vec<Pkt> {
    vec![
        Pkt {
            to_server: true,
            ip_id: 0x1f40,
            seq: 1001,
            ack: 9001,
            flags: AK | PSH,
            tsval: 500,
            payload: b"GET / HTTP/1.1\r\nHost: example\r\n\r\n",
        },
        Pkt {
            to_server: false,
            ip_id: 0x7a10,
            seq: 9001,
            ack: 1034,
            flags: AK | PSH,
            tsval: 800,
            payload: b"HTTP/1.1 200 OK\r\n\r\n",
        },
        // The request re-sent: same bytes, new IP ID and TSval — another packet.
        Pkt {
            to_server: true,
            ip_id: 0x1f41,
            seq: 1001,
            ack: 9001,
            flags: AK | PSH,
            tsval: 700,
            payload: b"GET / HTTP/1.1\r\nHost: example\r\n\r\n",
        },
    ]
}

/// Feed `script` seen inside (interface 0) then outside (interface 1), each
/// copy 200 µs after the original; returns the segment events.
fn capture() -> Vec<SegmentEvent> {
    let mut table = FlowTable::new(FlowConfig::default());
    let mut events = Vec::new();
    let mut frame = 0;
    for (i, p) in script().iter().enumerate() {
        let t0 = 1_000_000_000 + i as i64 * 50_000_000;
        let (first, second) = if p.to_server {
            (INSIDE, OUTSIDE)
        } else {
            (OUTSIDE, INSIDE)
        };
        for (k, side) in [first, second].into_iter().enumerate() {
            frame += 1;
            let meta = PacketMeta {
                frame: FrameNo(frame),
                ts: Timestamp(t0 + k as i64 * 200_000),
                interface: InterfaceId(side.iface),
            };
            table.on_packet(&meta, &decoded(side, p, p.payload), &mut events);
        }
    }
    events
        .into_iter()
        .filter_map(|e| match e {
            FlowEvent::Segment(s) => Some(s),
            _ => None,
        })
        .collect()
}

#[test]
fn nat_rewritten_copy_is_found_in_the_other_stream() {
    let segs = capture();
    assert_eq!(segs.len(), 6);
    // The inside and outside copies are two conversations for Wireshark.
    assert_eq!(segs[0].stream, 0);
    assert_eq!(segs[1].stream, 1);
    assert_eq!(segs[0].duplicate_of, None, "not a same-stream duplicate");
    assert_eq!(segs[1].duplicate_of, None);
    // ... but one packet.
    assert_eq!(segs[0].fingerprint, segs[1].fingerprint);
    assert!(segs[0].fingerprint.strong());
    match segs[0].fingerprint.l4 {
        L4Fingerprint::Tcp(t) => {
            assert_eq!(t.seq, SeqNum(1001));
            assert_eq!(t.timestamps, Some((500, 7)));
        }
        L4Fingerprint::Udp(_) => panic!("TCP segment fingerprinted as UDP"),
    }

    let mut index = FingerprintIndex::default();
    let found: Vec<_> = segs.iter().map(|s| index.observe_segment(s)).collect();
    // Frame 2 (outside, stream 1) is frame 1 (inside, stream 0).
    assert!(found[0].is_empty());
    assert_eq!(found[1].len(), 1);
    let orig = found[1][0];
    assert_eq!(orig.frame, 1);
    assert_eq!(orig.interface, 0);
    assert_eq!(orig.stream, StreamRef::tcp(0u64));
    assert_eq!(orig.dir, Direction::ClientToServer);
    // The response, seen outside first: frame 4 inside is frame 3 outside.
    assert!(found[2].is_empty());
    assert_eq!(found[3].iter().map(|s| s.frame).collect::<Vec<_>>(), [3]);
    // The retransmission is a new packet (new IP ID, TSval); its outside copy matches it only.
    assert!(found[4].is_empty());
    assert_eq!(found[5].iter().map(|s| s.frame).collect::<Vec<_>>(), [5]);
    assert_ne!(segs[0].fingerprint, segs[4].fingerprint);
    assert_eq!(index.len(), 6);
}

#[test]
fn a_middlebox_that_randomises_sequence_numbers_breaks_the_match() {
    let segs = capture();
    let mut shifted = segs[1];
    if let L4Fingerprint::Tcp(t) = &mut shifted.fingerprint.l4 {
        t.seq = t.seq.add(0x1234_5678);
    }
    let mut index = FingerprintIndex::default();
    index.observe_segment(&segs[0]);
    assert!(index.observe_segment(&shifted).is_empty());
}

#[test]
fn without_ip_id_a_match_needs_the_time_window() {
    let segs = capture();
    let mut index = FingerprintIndex::default();
    let weak = |s: &SegmentEvent, ts: i64| SegmentEvent {
        fingerprint: PacketFingerprint {
            ip_id: None,
            ..s.fingerprint
        },
        ts: Timestamp(ts),
        ..*s
    };
    index.observe_segment(&weak(&segs[0], 1_000_000_000));
    // 5 ms later on the other side: the same packet.
    assert_eq!(
        index.observe_segment(&weak(&segs[1], 1_005_000_000)).len(),
        1
    );
    // 30 ms later: beyond the 10 ms window, another packet.
    assert!(index
        .observe_segment(&weak(&segs[1], 1_030_000_000))
        .is_empty());
}
