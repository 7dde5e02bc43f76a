//! Retirement of streams from the flow table ([`FlowEvent::FlowEnded`]):
//! closed then quiet, idle, evicted at the cap (least recently active
//! first); an ended closed stream keeps its exact state for stray packets
//! until `closed_keep_ns`; a late packet revives a retired stream with its
//! `tcp.stream` and continues its summary; nothing is retired by `finish`;
//! and the memory of an idle one-SYN stream is bounded.

use pcapsleuth_core::{Endpoint, FrameNo, InterfaceId, SeqNum, StreamId, Timestamp};
use pcapsleuth_decode::{
    Decoded, IpHeader, IpVersion, QuotedPacket, TcpFlags, TcpOptions, TcpSegment, Transport,
};
use pcapsleuth_flow::{
    ConnState, FlowConfig, FlowEndReason, FlowEnded, FlowEvent, FlowTable, PacketFlowInfo,
    PacketMeta,
};
use std::net::{IpAddr, Ipv4Addr};

mod common;

const S: u16 = TcpFlags::SYN;
const AK: u16 = TcpFlags::ACK;
const R: u16 = TcpFlags::RST;
const SERVER: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 10));
const SEC: i64 = 1_000_000_000;
const T0: i64 = 1_700_000_000 * SEC;

struct H {
    table: FlowTable,
    frame: u64,
    /// IP ID of the next packets (default: the frame number).
    ip_id: Option<u32>,
    events: Vec<FlowEvent>,
}

impl H {
    fn new(cfg: FlowConfig) -> H {
        H {
            table: FlowTable::new(cfg),
            frame: 0,
            ip_id: None,
            events: Vec::new(),
        }
    }

    /// Feed one segment of client `c` (10.0.0.c:40000 ↔ SERVER:80) at
    /// `T0 + t_ns`; returns its `tcp.stream`. Events in `self.events`.
    #[allow(clippy::too_many_arguments)]
    fn send(
        &mut self,
        c: u8,
        from_client: bool,
        t_ns: i64,
        seq: u32,
        ack: u32,
        flags: u16,
        len: u32,
    ) -> Option<u64> {
        self.frame += 1;
        let client = IpAddr::V4(Ipv4Addr::new(10, 0, 0, c));
        let (src, dst, sp, dp) = if from_client {
            (client, SERVER, 40000, 80)
        } else {
            (SERVER, client, 80, 40000)
        };
        let syn = flags & S != 0;
        let d = Decoded {
            ip: Some(IpHeader {
                version: IpVersion::V4,
                src,
                dst,
                ttl: 64,
                ip_id: Some(self.ip_id.unwrap_or(self.frame as u32)),
                total_len: 40 + len,
                header_len: 20,
                protocol: 6,
                dont_fragment: true,
                fragment: None,
            }),
            transport: Transport::Tcp(TcpSegment {
                src_port: sp,
                dst_port: dp,
                seq: SeqNum(seq),
                ack: SeqNum(ack),
                flags: TcpFlags(flags),
                window: 1000,
                urgent: 0,
                header_len: 20,
                payload_len: len,
                payload: &[],
                options: TcpOptions {
                    mss: syn.then_some(1460),
                    window_scale: syn.then_some(7),
                    ..TcpOptions::default()
                },
            }),
            ..Decoded::default()
        };
        self.feed(t_ns, &d).stream.map(StreamId::get)
    }

    /// Feed `d` as the current frame at `T0 + t_ns`, its events replacing the last ones.
    fn feed(&mut self, t_ns: i64, d: &Decoded<'_>) -> PacketFlowInfo {
        let meta = PacketMeta {
            frame: FrameNo(self.frame),
            ts: Timestamp(T0 + t_ns),
            interface: InterfaceId(0),
        };
        self.events.clear();
        self.table.on_packet(&meta, d, &mut self.events)
    }

    /// An ICMP frag-needed (MTU 1400) from a router to client `c` at
    /// `T0 + t_ns`, quoting its SYN-sized segment to SERVER:80 at `seq`.
    fn icmp(&mut self, c: u8, t_ns: i64, seq: u32) {
        self.frame += 1;
        let client = IpAddr::V4(Ipv4Addr::new(10, 0, 0, c));
        let quoted_ip = IpHeader {
            version: IpVersion::V4,
            src: client,
            dst: SERVER,
            ttl: 63,
            ip_id: Some(1),
            total_len: 1500,
            header_len: 20,
            protocol: 6,
            dont_fragment: true,
            fragment: None,
        };
        let m = common::frag_needed_1400(QuotedPacket {
            ip: quoted_ip,
            src_port: Some(40000),
            dst_port: Some(80),
            tcp_seq: Some(SeqNum(seq)),
            tcp_ack: None,
            tcp_flags: Some(TcpFlags(S)),
            transport_bytes: 20,
        });
        let d = Decoded {
            ip: Some(IpHeader {
                src: IpAddr::V4(Ipv4Addr::new(203, 0, 113, 1)),
                dst: client,
                protocol: 1,
                total_len: 576,
                ip_id: Some(7),
                ..quoted_ip
            }),
            transport: Transport::Icmp(m),
            ..Decoded::default()
        };
        self.feed(t_ns, &d);
    }

    fn ended(&self) -> Vec<FlowEnded> {
        self.events
            .iter()
            .filter_map(|e| match e {
                FlowEvent::FlowEnded(x) => Some(*x),
                _ => None,
            })
            .collect()
    }

    fn segment(&self) -> Option<pcapsleuth_flow::SegmentEvent> {
        self.events.iter().find_map(|e| match e {
            FlowEvent::Segment(s) => Some(*s),
            _ => None,
        })
    }

    fn started(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, FlowEvent::FlowStarted(_)))
            .count()
    }
}

fn cfg() -> FlowConfig {
    FlowConfig {
        closed_quiet_ns: 10 * SEC,
        idle_timeout_ns: 600 * SEC,
        ..FlowConfig::default()
    }
}

#[test]
fn closed_stream_is_retired_after_the_quiet_time() {
    let mut h = H::new(cfg());
    h.send(1, true, 0, 100, 0, S, 0);
    h.send(1, false, 1_000, 500, 101, S | AK, 0);
    h.send(1, true, 2_000, 101, 501, AK, 0);
    h.send(1, true, 3_000, 101, 501, R | AK, 0);
    // Another stream's packet exactly 10 s later: not yet.
    h.send(2, true, 3_000 + 10 * SEC, 7, 0, S, 0);
    assert!(h.ended().is_empty());
    // One nanosecond more: retired, before this packet's own events.
    h.send(3, true, 3_001 + 10 * SEC, 9, 0, S, 0);
    let ended = h.ended();
    assert_eq!(
        ended,
        vec![FlowEnded {
            stream: StreamId(0),
            last_frame: FrameNo(4),
            last_ts: Timestamp(T0 + 3_000),
            reason: FlowEndReason::Closed,
            client: Endpoint {
                addr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
                port: 40000,
            },
            server: Endpoint {
                addr: SERVER,
                port: 80,
            },
        }]
    );
    assert!(matches!(h.events.first(), Some(FlowEvent::FlowEnded(_))));
    let st = h.table.stats();
    assert_eq!((st.live, st.peak_live, st.retired_closed), (2, 2, 1));
    // The summary of the retired stream is unchanged.
    let sums = h.table.summaries();
    assert_eq!(sums.len(), 3);
    assert_eq!(sums[0].packets, 4);
    assert_eq!(sums[0].state, ConnState::RSTO);
    assert_eq!(sums[0].handshake_rtt_ms, Some(0.002));
}

/// Stream 0 (client 1): handshake, 100 bytes from the client that the
/// server acknowledges, then the client's RST at 5 µs.
fn reset_after_data(h: &mut H) {
    h.send(1, true, 0, 100, 0, S, 0);
    h.send(1, false, 1_000, 500, 101, S | AK, 0);
    h.send(1, true, 2_000, 101, 501, AK, 0);
    h.send(1, true, 3_000, 101, 501, AK, 100);
    h.send(1, false, 4_000, 501, 201, AK, 0);
    h.send(1, true, 5_000, 201, 501, R | AK, 0);
}

#[test]
fn an_ended_closed_stream_keeps_its_exact_state_for_stray_packets_until_closed_keep() {
    let mut h = H::new(FlowConfig {
        closed_keep_ns: 100 * SEC,
        ..cfg()
    });
    reset_after_data(&mut h);
    // Quiet for 10 s: ended for consumers (FlowEnded), no longer live.
    h.send(2, true, 5_001 + 10 * SEC, 7, 0, S, 0);
    assert_eq!(h.ended().len(), 1);
    assert_eq!(h.ended()[0].reason, FlowEndReason::Closed);
    assert_eq!(
        (h.table.stats().live, h.table.stats().retired_closed),
        (1, 1)
    );
    // A stray copy of the data segment 20 s later: the kept state knows
    // those bytes were sent, so it is a retransmission, as Wireshark says
    // (a fresh state would take it for new data).
    let id = h.send(1, true, 20 * SEC, 101, 501, AK, 100);
    assert_eq!(id, Some(0));
    assert_eq!(h.started(), 0, "no second FlowStarted");
    let seg = h.segment().expect("segment event");
    assert!(seg.wireshark.retransmission, "{:?}", seg.wireshark);
    assert_eq!(seg.rel_seq, 1);
    let st = h.table.stats();
    assert_eq!((st.live, st.revived), (2, 1));
    // Quiet again: ended again.
    h.send(2, true, 31 * SEC, 7, 0, AK, 0);
    assert_eq!(h.ended().len(), 1);
    assert_eq!(h.ended()[0].stream, StreamId(0));
    assert_eq!(h.ended()[0].last_frame, FrameNo(8));
    // 100 s after its last packet the state goes, with no event; the
    // summary is the same before and after.
    let before = h.table.summaries()[0].clone();
    h.send(2, true, 119 * SEC, 7, 0, AK, 0);
    assert!(h.ended().is_empty());
    let kept = h.table.approx_heap_bytes();
    h.send(2, true, 120 * SEC + 1, 7, 0, AK, 0);
    assert!(h.ended().is_empty(), "already ended: compacted silently");
    let compacted = h.table.approx_heap_bytes();
    assert!(compacted + 500 < kept, "{kept} -> {compacted} bytes");
    assert_eq!(h.table.summaries()[0], before);
    // Later still: a revived stream with fresh state (the old behaviour).
    h.send(1, true, 121 * SEC, 101, 501, AK, 100);
    let seg = h.segment().expect("segment event");
    assert!(!seg.wireshark.retransmission);
    assert_eq!(h.table.stats().revived, 2);
}

#[test]
fn at_the_cap_ended_streams_kept_for_stray_packets_go_first_and_silently() {
    let mut h = H::new(FlowConfig {
        max_flows: 2,
        ..cfg()
    });
    reset_after_data(&mut h);
    h.send(2, true, 6_000, 7, 0, S, 0);
    h.send(2, true, 5_001 + 10 * SEC, 7, 0, AK, 0);
    assert_eq!(h.ended().len(), 1, "stream 0 ended");
    // A third stream fits: one live plus one kept is at the cap, and the
    // kept one is compacted without an event or an eviction.
    h.send(3, true, 11 * SEC, 9, 0, S, 0);
    assert!(h.ended().is_empty());
    let st = h.table.stats();
    assert_eq!((st.live, st.evicted), (2, 0));
    // So a stray copy of stream 0's data finds only its tombstone (fresh
    // state: not a retransmission), and reviving it evicts the least
    // recently active live stream.
    h.send(1, true, 12 * SEC, 101, 501, AK, 100);
    let seg = h.segment().expect("segment event");
    assert!(!seg.wireshark.retransmission, "stream 0 was compacted");
    assert_eq!(h.ended().len(), 1);
    assert_eq!(h.ended()[0].reason, FlowEndReason::Evicted);
    assert_eq!(h.ended()[0].stream, StreamId(1));
}

#[test]
fn open_stream_is_retired_when_idle_and_capture_time_is_the_maximum_seen() {
    let mut h = H::new(cfg());
    h.send(1, true, 0, 100, 0, S, 0);
    h.send(2, true, 601 * SEC, 7, 0, S, 0);
    assert_eq!(h.ended().len(), 1);
    assert_eq!(h.ended()[0].reason, FlowEndReason::Idle);
    assert_eq!(h.ended()[0].stream, StreamId(0));
    // A timestamp going backwards does not move the capture clock back:
    // stream 1 (active at 601 s) is still live after a packet at 1 s.
    h.send(3, true, SEC, 9, 0, S, 0);
    assert!(h.ended().is_empty());
    assert_eq!(h.table.stats().retired_idle, 1);
    assert_eq!(h.table.stats().live, 2);
}

#[test]
fn at_the_cap_the_least_recently_active_stream_is_evicted() {
    let mut h = H::new(FlowConfig {
        max_flows: 3,
        ..cfg()
    });
    for c in 1..=3 {
        h.send(c, true, i64::from(c) * 1_000, 100, 0, S, 0);
    }
    // Stream 0 (client 1) is active again: stream 1 is now the oldest.
    h.send(1, false, 5_000, 500, 101, S | AK, 0);
    h.send(4, true, 6_000, 100, 0, S, 0);
    let ended = h.ended();
    assert_eq!(ended.len(), 1);
    assert_eq!(
        (ended[0].stream, ended[0].reason, ended[0].last_frame),
        (StreamId(1), FlowEndReason::Evicted, FrameNo(2))
    );
    // FlowEnded comes before the new stream's FlowStarted.
    assert!(matches!(h.events.first(), Some(FlowEvent::FlowEnded(_))));
    assert_eq!(h.started(), 1);
    let st = h.table.stats();
    assert_eq!((st.live, st.peak_live, st.evicted), (3, 3, 1));
    assert_eq!(h.table.stream_count(), 4);
}

#[test]
fn a_late_packet_revives_the_stream_with_its_id_and_continues_its_summary() {
    let mut h = H::new(cfg());
    h.send(1, true, 0, 100, 0, S, 0);
    h.send(1, false, 1_000, 500, 101, S | AK, 0);
    h.send(1, true, 2_000, 101, 501, AK, 0);
    h.send(1, true, 3_000, 101, 501, AK, 100);
    h.send(1, false, 4_000, 501, 201, AK, 0);
    // Idle for more than 600 s: retired by another stream's packet.
    h.send(2, true, 700 * SEC, 7, 0, S, 0);
    assert_eq!(h.ended().len(), 1);
    let before = h.table.summaries()[0].clone();
    // A late data segment of stream 0: same id, no FlowStarted.
    let id = h.send(1, true, 701 * SEC, 201, 501, AK, 50);
    assert_eq!(id, Some(0));
    assert_eq!(h.started(), 0);
    assert_eq!(h.table.stats().revived, 1);
    assert_eq!(h.table.stats().live, 2);
    let after = h.table.summaries()[0].clone();
    assert_eq!(after.first_frame, before.first_frame);
    assert_eq!(after.last_frame, FrameNo(7));
    assert_eq!(after.packets, before.packets + 1);
    assert_eq!(after.payload_bytes_c2s, 150);
    assert_eq!(after.handshake_rtt_ms, before.handshake_rtt_ms);
    assert_eq!(after.state, ConnState::S1);
    // A new SYN with another ISN on the same ports after retirement: a new
    // `tcp.stream` (Wireshark's port-reuse rule, from the tombstone).
    h.send(2, true, 1400 * SEC, 1, 0, S, 0);
    assert_eq!(h.ended().len(), 2, "both streams idle");
    let id = h.send(1, true, 1400 * SEC + 1, 9_999, 0, S, 0);
    assert_eq!(id, Some(3));
    let seg = h.events.iter().find_map(|e| match e {
        FlowEvent::Segment(s) => Some(*s),
        _ => None,
    });
    assert!(seg.is_some_and(|s| s.wireshark.reused_ports));
}

#[test]
fn finish_retires_nothing_and_one_syn_streams_stay_small() {
    const N: u32 = 20_000;
    // One SYN each from distinct clients, 1 µs apart.
    let mut table = FlowTable::new(cfg());
    let mut events = Vec::new();
    for i in 0..N {
        let src = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | i));
        let d = Decoded {
            ip: Some(IpHeader {
                version: IpVersion::V4,
                src,
                dst: SERVER,
                ttl: 64,
                ip_id: Some(i),
                total_len: 60,
                header_len: 20,
                protocol: 6,
                dont_fragment: true,
                fragment: None,
            }),
            transport: Transport::Tcp(TcpSegment {
                src_port: 1024 + (i % 60_000) as u16,
                dst_port: 80,
                seq: SeqNum(i.wrapping_mul(2_654_435_761)),
                ack: SeqNum(0),
                flags: TcpFlags(S),
                window: 64240,
                urgent: 0,
                header_len: 40,
                payload_len: 0,
                payload: &[],
                options: TcpOptions {
                    mss: Some(1460),
                    window_scale: Some(7),
                    sack_permitted: true,
                    timestamps: Some((i, 0)),
                    ..TcpOptions::default()
                },
            }),
            ..Decoded::default()
        };
        let meta = PacketMeta {
            frame: FrameNo(u64::from(i) + 1),
            ts: Timestamp(T0 + i64::from(i) * 1_000),
            interface: InterfaceId(0),
        };
        table.on_packet(&meta, &d, &mut events);
    }
    let per = table.approx_heap_bytes() / N as usize;
    println!("{N} one-SYN streams: {per} B/stream");
    // 72-byte IPv4 record + 16-byte slot + 16-byte activity link + 8-byte
    // index bucket, the vectors at up to twice their length (measured 137 at
    // 20 k; 177 with the 104-byte record of any ends).
    assert!(per <= 145, "{per} bytes per one-SYN stream");
    // A last frame (not IP) 160 ms after the first SYN ends the capture.
    let meta = PacketMeta {
        frame: FrameNo(u64::from(N) + 1),
        ts: Timestamp(T0 + 160_000_000),
        interface: InterfaceId(0),
    };
    table.on_packet(&meta, &Decoded::default(), &mut events);
    events.clear();
    table.finish(&mut events);
    assert!(!events.iter().any(|e| matches!(e, FlowEvent::FlowEnded(_))));
    // The SYNs of the first 10 ms waited 150 ms (the stall threshold) or
    // more until the capture end; the later ones less.
    let stalls = events
        .iter()
        .filter(|e| matches!(e, FlowEvent::Stall(_)))
        .count();
    assert_eq!(stalls, 10_001, "capture-end stalls");
    let sums = table.summaries();
    assert_eq!(sums.len(), N as usize);
    assert_eq!(sums[7].state, ConnState::S0);
    assert_eq!(sums[7].mss, [Some(1460), None]);
    assert_eq!(sums[7].bytes, 60);
    assert!(sums[0].longest_stall_ms > 0.0);
    assert_eq!(table.stats().live, u64::from(N));
}

/// Every stream's row is materialised at the end (2 M streams × this):
/// addresses are `IpAddr`, not heap strings.
#[test]
fn summary_row_stays_compact() {
    let n = std::mem::size_of::<pcapsleuth_flow::FlowSummary>();
    assert!(n <= 296, "FlowSummary is {n} bytes");
}

/// A stream made after one-packet streams takes the buffers of their
/// records (`Stream::boxed`: a SYN scan allocates only its compact records).
/// It must analyse exactly as a stream made fresh: the same events, the same
/// summary, with data, a retransmission and a close that fill every buffer.
/// The last scan SYN has the connection's SYN's fingerprint (IP ID, ISN,
/// options) 0.1 ms before it: a fingerprint left in the reused buffers
/// would make the connection's SYN a duplicate sighting.
#[test]
fn a_stream_made_from_a_one_packet_streams_buffers_analyses_as_a_fresh_one() {
    const MS: i64 = 1_000_000;
    const P: u16 = TcpFlags::PSH;
    const F: u16 = TcpFlags::FIN;
    // `icmp`: after the scan, an ICMP error quotes the last scan SYN, so its
    // stream is replayed from its one-packet record and that record given
    // back: the connection then takes the replayed record's buffers.
    let run = |scan: bool, icmp: bool| {
        let mut h = H::new(cfg());
        if scan {
            // Three one-SYN streams, each compacted and its record given back.
            for c in 1..=2u8 {
                h.send(c, true, i64::from(c) * MS, 1000, 0, S, 0);
            }
            h.ip_id = Some(4242);
            h.send(3, true, 9_900_000, 5000, 0, S, 0);
            if icmp {
                let before_icmp = h.table.approx_heap_bytes();
                h.ip_id = None;
                h.icmp(3, 9_950_000, 5000);
                let quote = h.events.iter().find_map(|e| match e {
                    FlowEvent::IcmpError(q) => Some(q.stream),
                    _ => None,
                });
                assert_eq!(quote, Some(Some(StreamId(2))), "{:#?}", h.events);
                // The replay took the spare record (the last SYN's, given
                // back when it was compacted) and gave it back: the table
                // holds as much as before, not one full record less.
                assert_eq!(h.table.approx_heap_bytes(), before_icmp);
                h.ip_id = Some(4242);
            }
        } else {
            // The same frame numbers as after the scan (and the ICMP error).
            h.frame = if icmp { 4 } else { 3 };
            h.ip_id = Some(4242);
        }
        let id = if scan { 3 } else { 0 };
        let mut seen = Vec::new();
        let steps: [(bool, i64, u32, u32, u16, u32); 9] = [
            (true, 10, 5000, 0, S, 0),
            (false, 11, 9000, 5001, S | AK, 0),
            (true, 12, 5001, 9001, AK, 0),
            (true, 13, 5001, 9001, AK | P, 100),
            (true, 14, 5101, 9001, AK | P, 100),
            (false, 15, 9001, 5101, AK, 0),
            // The second segment again, past the RTO: a retransmission.
            (true, 400, 5101, 9001, AK | P, 100),
            (false, 401, 9001, 5201, AK | F, 0),
            (true, 402, 5201, 9002, AK | F, 0),
        ];
        for (from_client, t, seq, ack, flags, len) in steps {
            h.send(9, from_client, t * MS, seq, ack, flags, len);
            h.ip_id = None;
            let mine = format!("StreamId({id})");
            for e in &h.events {
                let e = format!("{e:?}");
                if e.contains(&mine) {
                    seen.push(e.replace(&mine, "StreamId(X)"));
                }
            }
        }
        let mut row = h.table.summaries().pop().expect("the connection's row");
        assert_eq!(row.tcp_stream, StreamId(id));
        row.tcp_stream = StreamId(0);
        (seen, row)
    };
    for icmp in [false, true] {
        let (fresh_events, fresh_row) = run(false, icmp);
        assert!(
            fresh_events
                .iter()
                .any(|e| e.contains("retransmission: true")),
            "{fresh_events:#?}"
        );
        let (reused_events, reused_row) = run(true, icmp);
        assert_eq!(reused_events, fresh_events, "icmp: {icmp}");
        assert_eq!(reused_row, fresh_row, "icmp: {icmp}");
    }
}
