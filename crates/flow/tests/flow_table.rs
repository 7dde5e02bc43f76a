//! FlowTable behaviour on hand-built decoded packets: stream ids, window
//! scaling, stalls, duplicate sightings, ICMP matching, summaries.

use pcapsleuth_core::InterfaceId;
use pcapsleuth_core::{Direction, SeqNum, Timestamp};
use pcapsleuth_core::{FrameNo, StreamId};
use pcapsleuth_decode::{
    Decoded, IcmpKind, IcmpMessage, IpHeader, IpVersion, QuotedPacket, TcpFlags, TcpOptions,
    TcpSegment, Transport,
};
use pcapsleuth_flow::{
    ConnState, FlowConfig, FlowEvent, FlowTable, PacketFlowInfo, PacketMeta, StallEnd,
};
use std::net::IpAddr;

mod common;

const A: &str = "192.0.2.1";
const B: &str = "198.51.100.2";
const S: u16 = TcpFlags::SYN;
const AK: u16 = TcpFlags::ACK;
const F: u16 = TcpFlags::FIN;
const R: u16 = TcpFlags::RST;

fn ip(src: &str, dst: &str, total_len: u32, id: u32) -> IpHeader {
    IpHeader {
        version: IpVersion::V4,
        src: src.parse::<IpAddr>().unwrap(),
        dst: dst.parse::<IpAddr>().unwrap(),
        ttl: 64,
        ip_id: Some(id),
        total_len,
        header_len: 20,
        protocol: 6,
        dont_fragment: true,
        fragment: None,
    }
}

/// One segment to feed.
#[derive(Clone, Copy)]
struct Seg {
    from_a: bool,
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u16,
    len: u32,
    win: u16,
    wscale: Option<u8>,
    ip_id: u32,
}

fn seg(from_a: bool, seq: u32, ack: u32, flags: u16, len: u32) -> Seg {
    Seg {
        from_a,
        sport: 40000,
        dport: 80,
        seq,
        ack,
        flags,
        len,
        win: 1000,
        wscale: None,
        ip_id: 0,
    }
}

struct Harness {
    table: FlowTable,
    frame: u64,
    events: Vec<FlowEvent>,
    shift: u32,
    iface: u32,
}

impl Harness {
    fn new() -> Self {
        Harness {
            table: FlowTable::new(FlowConfig::default()),
            frame: 0,
            events: Vec::new(),
            shift: 0,
            iface: 0,
        }
    }

    fn feed(&mut self, ts_ms: i64, s: Seg) -> PacketFlowInfo {
        self.frame += 1;
        let (src, dst, sp, dp) = if s.from_a {
            (A, B, s.sport, s.dport)
        } else {
            (B, A, s.dport, s.sport)
        };
        let payload = [0u8; 0];
        let tcp = TcpSegment {
            src_port: sp,
            dst_port: dp,
            seq: SeqNum(s.seq.wrapping_add(self.shift)),
            ack: SeqNum(s.ack.wrapping_add(self.shift)),
            flags: TcpFlags(s.flags),
            window: s.win,
            urgent: 0,
            header_len: 20,
            payload_len: s.len,
            payload: &payload,
            options: TcpOptions {
                window_scale: s.wscale,
                mss: (s.flags & S != 0).then_some(1460),
                ..TcpOptions::default()
            },
        };
        let d = Decoded {
            ip: Some(ip(src, dst, 40 + s.len, s.ip_id)),
            transport: Transport::Tcp(tcp),
            ..Decoded::default()
        };
        self.feed_decoded(ts_ms * 1_000_000, &d)
    }

    fn feed_decoded(&mut self, ts_ns: i64, d: &Decoded<'_>) -> PacketFlowInfo {
        let meta = PacketMeta {
            frame: FrameNo(self.frame),
            ts: Timestamp(ts_ns),
            interface: InterfaceId(self.iface),
        };
        self.table.on_packet(&meta, d, &mut self.events)
    }

    /// ICMP frag-needed from a router to A quoting an A→B segment with `bytes` TCP bytes.
    fn icmp(&mut self, ts_ms: i64, seq: u32, flags: u16, bytes: u32, sport: u16) -> PacketFlowInfo {
        self.frame += 1;
        let q = QuotedPacket {
            ip: ip(A, B, 1500, 0),
            src_port: Some(sport),
            dst_port: Some(80),
            tcp_seq: (bytes >= 8).then_some(SeqNum(seq.wrapping_add(self.shift))),
            tcp_ack: None,
            tcp_flags: (bytes >= 14).then_some(TcpFlags(flags)),
            transport_bytes: bytes,
        };
        let m = common::frag_needed_1400(q);
        let mut h = ip("203.0.113.9", A, 576, 0);
        h.protocol = 1;
        let d = Decoded {
            ip: Some(h),
            transport: Transport::Icmp(m),
            ..Decoded::default()
        };
        self.feed_decoded(ts_ms * 1_000_000, &d)
    }
}

fn handshake(h: &mut Harness, t0: i64) {
    h.feed(
        t0,
        Seg {
            wscale: Some(7),
            ..seg(true, 100, 0, S, 0)
        },
    );
    h.feed(
        t0 + 1,
        Seg {
            wscale: Some(8),
            ..seg(false, 5000, 101, S | AK, 0)
        },
    );
    h.feed(t0 + 2, seg(true, 101, 5001, AK, 0));
}

#[test]
fn stream_ids_follow_wireshark_rules() {
    let mut h = Harness::new();
    handshake(&mut h, 0);
    assert_eq!(
        h.feed(3, seg(true, 101, 5001, AK | F, 0)).stream,
        Some(StreamId(0))
    );
    assert_eq!(
        h.feed(4, seg(false, 5001, 102, AK | R, 0)).stream,
        Some(StreamId(0)),
        "RST does not start a stream"
    );
    // Same-ISN SYN after close: a retransmission, same stream.
    assert_eq!(h.feed(5, seg(true, 100, 0, S, 0)).stream, Some(StreamId(0)));
    // Bare SYN with a new ISN on the same ports: new stream.
    let i = h.feed(6, seg(true, 9000, 0, S, 0));
    assert_eq!(i.stream, Some(StreamId(1)));
    assert_eq!(i.dir, Some(Direction::ClientToServer));
    // Its SYN/ACK stays on it.
    assert_eq!(
        h.feed(7, seg(false, 7000, 9001, S | AK, 0)).stream,
        Some(StreamId(1))
    );
    // Another port pair.
    assert_eq!(
        h.feed(
            8,
            Seg {
                sport: 40001,
                ..seg(true, 1, 0, S, 0)
            }
        )
        .stream,
        Some(StreamId(2))
    );
    // Mid-stream start, then a SYN/ACK with a new seq from the same side: still the same stream.
    assert_eq!(
        h.feed(
            9,
            Seg {
                sport: 40002,
                ..seg(false, 77, 55, AK, 10)
            }
        )
        .stream,
        Some(StreamId(3))
    );
    assert_eq!(
        h.feed(
            10,
            Seg {
                sport: 40002,
                ..seg(false, 1234, 55, S | AK, 0)
            }
        )
        .stream,
        Some(StreamId(3))
    );
    // ... but a bare SYN from the client, whose base came from the ACK (55 - 1), with another seq: new.
    assert_eq!(
        h.feed(
            11,
            Seg {
                sport: 40002,
                ..seg(true, 999, 0, S, 0)
            }
        )
        .stream,
        Some(StreamId(4))
    );
    assert_eq!(h.table.stream_count(), 5);
    let started: Vec<u64> = h
        .events
        .iter()
        .filter_map(|e| {
            if let FlowEvent::FlowStarted(s) = e {
                Some(s.stream.get())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(started, vec![0, 1, 2, 3, 4]);
}

#[test]
fn icmp_quotes_take_part_only_with_16_bytes() {
    let mut h = Harness::new();
    handshake(&mut h, 0);
    h.feed(10, seg(true, 101, 5001, AK, 1000));
    h.feed(11, seg(true, 1101, 5001, AK, 1000));
    // 8 quoted bytes: tshark shows no tcp.stream, but the event still finds the flow.
    h.events.clear();
    let i = h.icmp(12, 1500, AK, 8, 40000);
    assert_eq!(i.stream, None);
    let FlowEvent::IcmpError(ev) = h.events[0] else {
        panic!("{:?}", h.events)
    };
    assert_eq!(ev.stream, Some(StreamId(0)));
    assert_eq!(ev.quoted_rel_seq, Some(1400));
    let m = ev.matched.expect("quoted seq inside the second segment");
    assert_eq!(
        (m.frame, m.rel_seq, m.payload_len),
        (FrameNo(5), 1001, 1000)
    );
    // 20 quoted bytes: the stream is shown.
    assert_eq!(h.icmp(13, 101, AK, 20, 40000).stream, Some(StreamId(0)));
    // Unknown flow quoted with 20 bytes: Wireshark creates a conversation (new id).
    h.events.clear();
    assert_eq!(h.icmp(14, 1, S, 20, 41000).stream, Some(StreamId(1)));
    assert!(matches!(h.events[0], FlowEvent::FlowStarted(_)));
    // A quoted bare SYN with a new ISN for an established flow starts a new stream.
    assert_eq!(h.icmp(15, 424242, S, 20, 40000).stream, Some(StreamId(2)));
}

/// An ICMPv4 error (type 3 / code 3 port unreachable, or `kind` as given)
/// from B to A quoting `q`.
fn icmp_error(h: &mut Harness, ts_ms: i64, q: QuotedPacket, kind: IcmpKind) -> PacketFlowInfo {
    h.frame += 1;
    let m = IcmpMessage {
        version: IpVersion::V4,
        icmp_type: 3,
        code: if kind == IcmpKind::FragNeeded { 4 } else { 3 },
        kind,
        mtu: (kind == IcmpKind::FragNeeded).then_some(1400),
        quoted: Some(q),
        echo: None,
    };
    let mut hdr = ip(B, A, 576, 0);
    hdr.protocol = 1;
    let d = Decoded {
        ip: Some(hdr),
        transport: Transport::Icmp(m),
        ..Decoded::default()
    };
    h.feed_decoded(ts_ms * 1_000_000, &d)
}

fn quote(protocol: u8, ports: Option<(u16, u16)>, transport_bytes: u32) -> QuotedPacket {
    let mut qip = ip(A, B, 1500, 0x4242);
    qip.protocol = protocol;
    QuotedPacket {
        ip: qip,
        src_port: ports.map(|p| p.0),
        dst_port: ports.map(|p| p.1),
        tcp_seq: None,
        tcp_ack: None,
        tcp_flags: None,
        transport_bytes,
    }
}

#[test]
fn every_icmp_error_quoting_a_packet_is_reported_once() {
    let mut h = Harness::new();
    handshake(&mut h, 0);
    h.events.clear();
    // UDP, ICMP echo, ESP, and a TCP quote cut before the ports: one event each,
    // matched to no tcp.stream.
    let cases = [
        (17, Some((5353, 53)), 8, IcmpKind::DestUnreachable),
        (1, None, 8, IcmpKind::FragNeeded),
        (50, None, 8, IcmpKind::FragNeeded),
        (6, None, 2, IcmpKind::FragNeeded),
    ];
    for (i, &(proto, ports, bytes, kind)) in cases.iter().enumerate() {
        let info = icmp_error(&mut h, 10 + i as i64, quote(proto, ports, bytes), kind);
        assert_eq!(info.stream, None);
    }
    let evs: Vec<_> = h
        .events
        .iter()
        .filter_map(|e| match e {
            FlowEvent::IcmpError(ev) => Some(*ev),
            _ => None,
        })
        .collect();
    assert_eq!(evs.len(), cases.len(), "{:?}", h.events);
    for (ev, &(proto, ports, _, kind)) in evs.iter().zip(&cases) {
        assert_eq!(ev.quoted_proto, proto);
        assert_eq!(ev.quoted_ports, ports.is_some());
        assert_eq!(ev.kind, kind);
        assert!(!ev.quotes_tcp());
        assert_eq!(
            (ev.stream, ev.quoted_rel_seq, ev.matched),
            (None, None, None)
        );
        assert_eq!(ev.quoted_ip_id, Some(0x4242));
        assert_eq!(ev.quoted_ip_len, 1500);
        assert_eq!(ev.quoted_src.port, ports.map_or(0, |p| p.0));
        assert_eq!(ev.quoted_dst.addr, B.parse::<IpAddr>().unwrap());
    }
    // A TCP quote with ports is still matched to its stream.
    h.events.clear();
    let i = h.icmp(20, 101, AK, 20, 40000);
    assert_eq!(i.stream, Some(StreamId(0)));
    let FlowEvent::IcmpError(ev) = h.events[0] else {
        panic!("{:?}", h.events)
    };
    assert!(ev.quotes_tcp());
    assert_eq!(ev.quoted_proto, 6);
    assert_eq!(ev.stream, Some(StreamId(0)));
}

#[test]
fn window_scaling_needs_both_handshake_options() {
    let mut h = Harness::new();
    handshake(&mut h, 0);
    h.events.clear();
    h.feed(
        3,
        Seg {
            win: 100,
            ..seg(true, 101, 5001, AK, 0)
        },
    );
    h.feed(
        4,
        Seg {
            win: 100,
            ..seg(false, 5001, 101, AK, 0)
        },
    );
    let segs: Vec<_> = h
        .events
        .iter()
        .filter_map(|e| {
            if let FlowEvent::Segment(s) = e {
                Some(*s)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(segs[0].window_bytes, Some(100 << 7));
    assert_eq!(segs[1].window_bytes, Some(100 << 8));
    let wc: Vec<_> = h
        .events
        .iter()
        .filter_map(|e| {
            if let FlowEvent::WindowChange(w) = e {
                Some(*w)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(wc.len(), 2, "{wc:?}");
    assert_eq!(wc[0].old_bytes, Some(1000 << 7));
    assert_eq!(wc[0].new_bytes, Some(100 << 7));

    // SYN/ACK without the option: no scaling either way.
    let mut h = Harness::new();
    h.feed(
        0,
        Seg {
            wscale: Some(7),
            ..seg(true, 100, 0, S, 0)
        },
    );
    h.feed(1, seg(false, 5000, 101, S | AK, 0));
    h.events.clear();
    h.feed(
        2,
        Seg {
            win: 100,
            ..seg(true, 101, 5001, AK, 0)
        },
    );
    let FlowEvent::Segment(s) = h.events[0] else {
        panic!()
    };
    assert_eq!(s.window_bytes, Some(100));

    // Handshake not captured: unknown.
    let mut h = Harness::new();
    h.feed(
        0,
        Seg {
            win: 100,
            ..seg(true, 100, 200, AK, 10)
        },
    );
    let FlowEvent::Segment(s) = h.events[1] else {
        panic!()
    };
    assert_eq!(s.window_bytes, None);
    assert_eq!(s.rel_seq, 1, "first segment seen has relative seq 1");
    assert_eq!(s.rel_ack, Some(1));
}

fn stalls(h: &Harness) -> Vec<pcapsleuth_flow::StallEvent> {
    h.events
        .iter()
        .filter_map(|e| {
            if let FlowEvent::Stall(s) = e {
                Some(*s)
            } else {
                None
            }
        })
        .collect()
}

#[test]
fn stall_detection_and_classification() {
    let mut h = Harness::new();
    handshake(&mut h, 0);
    h.feed(10, seg(true, 101, 5001, AK, 500)); // frame 4
    h.feed(100, seg(true, 101, 5001, AK, 500)); // 90 ms: below threshold
    assert!(stalls(&h).is_empty());
    h.feed(400, seg(true, 101, 5001, AK, 500)); // frame 6: 300 ms silence, retransmission
    let st = stalls(&h);
    assert_eq!(st.len(), 1);
    assert_eq!(
        (st[0].start_frame, st[0].end_frame),
        (FrameNo(5), FrameNo(6))
    );
    assert_eq!(st[0].pending_bytes, 500);
    assert_eq!(st[0].ended_by, StallEnd::Retransmission);
    assert_eq!(st[0].dir, Direction::ClientToServer);
    // ACK arrives after 200 ms: the stall ends by Ack.
    h.feed(600, seg(false, 5001, 601, AK, 0));
    let st = stalls(&h);
    assert_eq!(st.len(), 2);
    assert_eq!(st[1].ended_by, StallEnd::Ack);
    // Nothing outstanding: silence is no stall.
    h.feed(2000, seg(true, 601, 5001, AK, 0));
    assert_eq!(stalls(&h).len(), 2);
    // Open at capture end.
    h.feed(2001, seg(true, 601, 5001, AK, 100));
    h.feed(
        3000,
        Seg {
            sport: 50000,
            ..seg(true, 1, 0, S, 0)
        },
    );
    h.table.finish(&mut h.events);
    let st = stalls(&h);
    assert_eq!(st.len(), 3, "{st:?}");
    assert_eq!(st[2].ended_by, StallEnd::CaptureEnd);
    assert_eq!(st[2].pending_bytes, 100);
    let sum = &h.table.summaries()[0];
    assert_eq!(sum.longest_stall_ms, 999.0);
    assert_eq!(sum.state, ConnState::S1);
}

#[test]
fn pending_syn_stall() {
    let mut h = Harness::new();
    h.feed(0, seg(true, 100, 0, S, 0));
    h.feed(1000, seg(true, 100, 0, S, 0));
    let st = stalls(&h);
    assert_eq!(st.len(), 1);
    assert!(st[0].pending_syn);
    assert_eq!(st[0].ended_by, StallEnd::Retransmission);
    assert_eq!(h.table.summaries()[0].state, ConnState::S0);
}

#[test]
fn duplicate_sightings_do_not_update_state_twice() {
    let mut h = Harness::new();
    handshake(&mut h, 0);
    h.feed(
        10,
        Seg {
            ip_id: 7,
            ..seg(true, 101, 5001, AK, 100)
        },
    );
    h.feed(
        10,
        Seg {
            ip_id: 7,
            ..seg(true, 101, 5001, AK, 100)
        },
    ); // same packet, second interface
    h.feed(
        11,
        Seg {
            ip_id: 8,
            ..seg(true, 101, 5001, AK, 100)
        },
    ); // a real retransmission (new IP ID)
    let segs: Vec<_> = h
        .events
        .iter()
        .filter_map(|e| {
            if let FlowEvent::Segment(s) = e {
                Some(*s)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(segs[4].duplicate_of, Some(FrameNo(4)));
    assert_eq!(segs[4].snd_nxt, 101, "relative: SYN is 0, 100 bytes from 1");
    assert_eq!(segs[5].duplicate_of, None);
    let sum = &h.table.summaries()[0];
    assert_eq!(sum.duplicate_sightings, 1);
    assert_eq!(sum.payload_bytes_c2s, 200);
    assert_eq!(
        sum.sightings.iter().map(|s| s.frame).collect::<Vec<_>>(),
        vec![4, 5]
    );
}

#[test]
fn summary_of_a_clean_connection() {
    let mut h = Harness::new();
    handshake(&mut h, 0);
    h.feed(10, seg(true, 101, 5001, AK, 100));
    h.feed(20, seg(false, 5001, 201, AK, 300));
    h.feed(30, seg(true, 201, 5301, AK | F, 0));
    h.feed(31, seg(false, 5301, 202, AK | F, 0));
    h.feed(32, seg(true, 202, 5302, AK, 0));
    h.table.finish(&mut h.events);
    let s = &h.table.summaries()[0];
    assert_eq!(s.state, ConnState::SF);
    assert_eq!((s.packets_c2s, s.packets_s2c), (5, 3));
    assert_eq!((s.payload_bytes_c2s, s.payload_bytes_s2c), (100, 300));
    assert_eq!(s.handshake_rtt_ms, Some(2.0));
    assert_eq!(s.mss, [Some(1460), Some(1460)]);
    assert_eq!(s.window_scale, [Some(7), Some(8)]);
    assert_eq!(
        (s.client.to_string().as_str(), s.client_port, s.server_port),
        (A, 40000, 80)
    );
    assert!(s.rtt_ms.is_some());
    assert_eq!(s.first_frame, 1);
    assert_eq!(s.last_frame, 8);
    assert!(stalls(&h).is_empty());
}

#[test]
fn zero_window_time() {
    let mut h = Harness::new();
    handshake(&mut h, 0);
    h.feed(10, seg(true, 101, 5001, AK, 100));
    h.feed(
        20,
        Seg {
            win: 0,
            ..seg(false, 5001, 201, AK, 0)
        },
    );
    h.feed(
        520,
        Seg {
            win: 500,
            ..seg(false, 5001, 201, AK, 0)
        },
    );
    let s = &h.table.summaries()[0];
    assert_eq!(s.zero_window_episodes, 1);
    assert_eq!(s.zero_window_ms, 500.0);
}

#[test]
fn sequence_wrap_is_invisible() {
    let run = |shift: u32| {
        let mut h = Harness::new();
        h.shift = shift;
        handshake(&mut h, 0);
        h.feed(10, seg(true, 101, 5001, AK, 1000));
        h.feed(400, seg(true, 101, 5001, AK, 1000));
        h.feed(401, seg(false, 5001, 1101, AK, 0));
        h.feed(402, seg(true, 1101, 5001, AK, 1000));
        h.icmp(403, 1500, AK, 20, 40000);
        h.table.finish(&mut h.events);
        h.events
            .iter()
            .map(|e| match e {
                FlowEvent::Segment(s) => format!(
                    "{} {} {:?} {} {} {:?}",
                    s.frame, s.rel_seq, s.rel_ack, s.snd_una, s.snd_nxt, s.window_bytes
                ),
                FlowEvent::IcmpError(i) => format!(
                    "{:?} {:?} {:?}",
                    i.stream,
                    i.quoted_rel_seq,
                    i.matched.map(|m| m.frame)
                ),
                other => format!("{other:?}"),
            })
            .collect::<Vec<_>>()
    };
    let base = run(0);
    for shift in [
        u32::MAX - 100 - 500,
        u32::MAX - 5000 - 1000,
        0x8000_0000,
        u32::MAX,
    ] {
        assert_eq!(run(shift), base, "shift {shift}");
    }
}

#[test]
fn identical_packets_without_ip_id_need_two_places() {
    let mut h = Harness::new();
    h.feed(0, seg(true, 100, 0, S, 0));
    // Two real SYN/ACKs (IP ID 0) 1 ms apart on one interface: two packets.
    h.feed(1, seg(false, 5000, 101, S | AK, 0));
    h.feed(2, seg(false, 5000, 101, S | AK, 0));
    // The same SYN/ACK seen on a second interface: one packet seen twice.
    h.iface = 1;
    h.feed(2, seg(false, 5000, 101, S | AK, 0));
    // Beyond the 10 ms window: a new packet.
    h.feed(20, seg(false, 5000, 101, S | AK, 0));
    let dups: Vec<_> = h
        .events
        .iter()
        .filter_map(|e| {
            if let FlowEvent::Segment(s) = e {
                Some(s.duplicate_of)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(dups, vec![None, None, None, Some(FrameNo(3)), None]);
}

#[test]
fn zero_window_blocks_count_as_stalls() {
    let mut h = Harness::new();
    handshake(&mut h, 0);
    h.feed(10, seg(true, 101, 5001, AK, 100));
    h.feed(
        11,
        Seg {
            win: 0,
            ..seg(false, 5001, 201, AK, 0)
        },
    ); // all acked, window closed
    h.feed(300, seg(true, 200, 5001, AK, 0)); // Linux probe: seq = SND.UNA - 1
    let st = stalls(&h);
    assert_eq!(st.len(), 1, "{st:?}");
    assert_eq!(st[0].ended_by, StallEnd::Probe);
    assert_eq!(st[0].pending_bytes, 0);
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Arbitrary segment and ICMP sequences (wild timestamps, flags, sequence
        /// numbers, ports) never panic and keep ids dense.
        #[test]
        fn arbitrary_input_never_panics(
            pkts in proptest::collection::vec(
                (any::<bool>(), 0u16..3, any::<u32>(), any::<u32>(), 0u16..0x200, 0u32..3000, any::<u16>(), any::<i64>(), any::<bool>(), 0u32..40),
                1..80,
            )
        ) {
            let mut h = Harness::new();
            for (from_a, port, seq, ack, flags, len, win, ts, icmp, qbytes) in pkts {
                if icmp {
                    h.icmp(ts / 1_000_000, seq, flags, qbytes, 40000 + port);
                } else {
                    let s = Seg { sport: 40000 + port, win, ..seg(from_a, seq, ack, flags, len) };
                    h.feed(ts / 1_000_000, s);
                }
            }
            h.table.finish(&mut h.events);
            let n = h.table.stream_count();
            let sums = h.table.summaries();
            prop_assert_eq!(sums.len() as u64, n);
            for (i, s) in sums.iter().enumerate() {
                prop_assert_eq!(s.tcp_stream, i as u64);
            }
        }
    }
}
