//! Table tests of the mss-blackhole detector on synthesized flow events shaped
//! like seed 004 / the lab's mss-blackhole.pcap (upload through a 1400-byte
//! link whose frag-needed is dropped). They assert the diagnosis; the last
//! tests check the rendered finding.

use pcapsleuth_core::FrameNo;
use pcapsleuth_core::{Direction, Endpoint};
use pcapsleuth_core::{InterfaceId, StreamId};
use pcapsleuth_decode::IcmpKind;
use pcapsleuth_detect::synth::*;
use pcapsleuth_detect::{Detector, Severity};
use pcapsleuth_flow::{FlowEvent, IcmpErrorEvent};
use pcapsleuth_mss_blackhole::{render, Diagnosis, MssBlackhole, SmallPacketsPass};

/// Feed every event of `s` to a fresh detector and return its diagnoses.
fn diagnose(s: &Script) -> Vec<Diagnosis> {
    let mut d = MssBlackhole::default();
    for ev in &s.events {
        d.on_flow_event(ev);
    }
    d.diagnose(&s.ctx())
}

const LADDER: &[f64] = &[214.0, 416.0, 832.0, 1664.0, 3520.0];

/// Client sends 100 bytes (acked), then 12 full-size segments; seq 101 is
/// re-sent along `gaps`; the server sends 17-byte heartbeats every second.
fn upload(s: &mut Script, gaps: &[f64]) -> (u64, Vec<u64>) {
    s.seg(C2S, 0.0, 1, 100, 1, 64512);
    s.seg(S2C, 0.1, 1, 0, 101, 65536);
    let orig = s.seg(C2S, 300.0, 101, 1448, 1, 64512);
    for k in 1..12 {
        s.seg(C2S, 300.0 + 0.01 * k as f64, 101 + 1448 * k, 1448, 1, 64512);
    }
    let mut t = 300.0;
    let mut hb = 1i64;
    let mut next_hb = 1000.0;
    let mut retx = Vec::new();
    for g in gaps {
        t += g;
        while next_hb < t {
            s.seg(S2C, next_hb, hb, 17, 101, 65536);
            hb += 17;
            next_hb += 1000.0;
        }
        retx.push(s.seg(C2S, t, 101, 1448, hb, 64512));
        s.last_mut().analysis.retransmission = true;
    }
    (orig, retx)
}

#[test]
fn full_size_segments_lost_small_ones_acked_is_a_black_hole() {
    let mut s = Script::new();
    let (orig, retx) = upload(&mut s, LADDER);
    let d = diagnose(&s);
    assert_eq!(d.len(), 1, "{d:#?}");
    let d = &d[0];
    assert_eq!(d.severity, Severity::Error);
    assert_eq!(d.data_dir, Direction::ClientToServer);
    assert_eq!(d.small_packets, SmallPacketsPass::DataAcked);
    assert!(!d.ipv6);
    assert_eq!(d.stuck_segment_bytes, 1448);
    assert_eq!(d.receiver.to_string(), "server 198.51.100.10:80");
    assert!(
        d.frames.contains(&FrameNo(orig)) && retx.iter().all(|r| d.frames.contains(&FrameNo(*r))),
        "{:?}",
        d.frames
    );
    assert_eq!(d.start_ns, at(300.0).0);
    assert_eq!(d.end_ns, at(300.0 + 6646.0).0);
    let e = &d.evidence;
    assert_eq!(e.sender.to_string(), "client 192.0.2.10:40000");
    assert_eq!(e.largest_acked_segment, 100);
    assert_eq!(e.largest_acked_ip_bytes, 152);
    assert_eq!(e.smallest_unacked_segment, 1448);
    assert_eq!(e.smallest_unacked_ip_bytes, 1500);
    assert_eq!(e.retransmissions, 5);
    assert!(!e.icmp_seen);
    assert_eq!(e.path_mtu_lower_bound_bytes, 152);
    assert_eq!(e.path_mtu_upper_bound_bytes, 1499);
    assert_eq!(e.path_mtu_bound_bytes, 1280);
    assert_eq!(e.recommended_mss, 1240);
    assert!(!e.sender_recovered_by_mtu_probing);
    assert_eq!(e.rto_ladder_ms, [214.0, 416.0, 832.0, 1664.0, 3520.0]);
    assert!((e.stall_ms - 6646.0).abs() < 0.01, "{}", e.stall_ms);
}

#[test]
fn ipv6_recommendation_subtracts_60() {
    let mut s = Script::new();
    s.v6 = true;
    upload(&mut s, LADDER);
    let d = diagnose(&s);
    assert_eq!(d.len(), 1);
    assert!(d[0].ipv6);
    assert_eq!(d[0].evidence.smallest_unacked_ip_bytes, 1520);
    assert_eq!(d[0].evidence.recommended_mss, 1220);
}

#[test]
fn frag_needed_quoting_the_flow_means_no_black_hole() {
    let mut s = Script::new();
    upload(&mut s, LADDER);
    let (c, sv) = s.endpoints();
    s.push(FlowEvent::IcmpError(IcmpErrorEvent {
        frame: FrameNo(s.frame + 1),
        ts: at(400.0),
        interface: InterfaceId(0),
        kind: IcmpKind::FragNeeded,
        icmp_type: 3,
        code: 4,
        mtu: Some(1400),
        icmp_src: "192.0.2.1".parse().unwrap(),
        icmp_dst: c.addr,
        quoted_src: c,
        quoted_dst: Endpoint {
            addr: sv.addr,
            port: sv.port,
        },
        quoted_proto: 6,
        quoted_ports: true,
        quoted_ip_id: None,
        quoted_ip_len: 1500,
        quoted_seq: None,
        stream: Some(StreamId(0)),
        udp_stream: None,
        quoted_dir: Some(C2S),
        quoted_rel_seq: Some(101),
        matched: None,
    }));
    assert!(diagnose(&s).is_empty());
}

#[test]
fn sender_recovery_by_mtu_probing_is_a_warning() {
    let mut s = Script::new();
    upload(&mut s, LADDER);
    // tcp_mtu_probing: the stuck bytes go again as 1012-byte segments, which pass.
    let mut seq = 101;
    let mut t = 7000.0;
    let first_small = s.frame + 1;
    while seq < 101 + 1448 * 12 {
        s.seg(C2S, t, seq, 1012, 1, 64512);
        seq += 1012;
        s.seg(S2C, t + 0.1, 1, 0, seq, 65536);
        t += 1.0;
    }
    let d = diagnose(&s);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].severity, Severity::Warning);
    assert!(d[0].evidence.sender_recovered_by_mtu_probing);
    assert_eq!(d[0].evidence.largest_acked_segment, 1012);
    assert!(
        d[0].frames.contains(&FrameNo(first_small)),
        "first reduced-size re-send cited: {:?}",
        d[0].frames
    );
    let f = render(&d[0]);
    assert!(f.summary.contains("tcp_mtu_probing"), "{}", f.summary);
}

#[test]
fn look_alikes_are_not_flagged() {
    // Full-size segments did get through before: loss, not a size limit.
    let mut s = Script::new();
    s.seg(C2S, 0.0, 1, 1448, 1, 64512);
    s.seg(S2C, 0.1, 1, 0, 1449, 65536);
    let mut t = 100.0;
    s.seg(C2S, t, 1449, 1448, 1, 64512);
    for (k, g) in LADDER.iter().enumerate() {
        t += g;
        s.seg(C2S, t, 1449, 1448, 1 + 17 * k as i64, 64512);
        s.seg(S2C, t + 1.0, 1 + 17 * k as i64, 17, 1449, 65536);
    }
    assert!(diagnose(&s).is_empty(), "same size acked earlier");

    // Small segments (below the 576-byte IPv4 minimum datagram) cannot be an MTU problem.
    let mut s = Script::new();
    s.seg(C2S, 0.0, 1, 10, 1, 64512);
    s.seg(S2C, 0.1, 1, 0, 11, 65536);
    let mut t = 100.0;
    s.seg(C2S, t, 11, 300, 1, 64512);
    for (k, g) in LADDER.iter().enumerate() {
        t += g;
        s.seg(C2S, t, 11, 300, 1, 64512);
        s.seg(S2C, t + 1.0, 1 + 17 * k as i64, 17, 11, 65536);
    }
    assert!(diagnose(&s).is_empty(), "300-byte segments");

    // Interactive flow of 100-byte writes, all acked.
    let mut s = Script::new();
    for k in 0..40 {
        s.seg(C2S, 200.0 * k as f64, 1 + 100 * k, 100, 1, 64512);
        s.seg(S2C, 200.0 * k as f64 + 0.1, 1, 0, 101 + 100 * k, 65536);
    }
    assert!(diagnose(&s).is_empty(), "interactive");

    // Retransmissions without backoff (fast retransmit storm) are not this.
    let mut s = Script::new();
    upload(&mut s, &[20.0, 20.0, 20.0, 20.0]);
    assert!(diagnose(&s).is_empty(), "no backoff");

    // Nothing proves small packets pass: no data acked, peer silent.
    let mut s = Script::new();
    let mut t = 0.0;
    s.seg(C2S, t, 1, 1448, 1, 64512);
    for g in LADDER {
        t += g;
        s.seg(C2S, t, 1, 1448, 1, 64512);
    }
    assert!(diagnose(&s).is_empty(), "dead peer");
}

#[test]
fn upload_right_after_the_handshake_is_flagged() {
    // "ssh connects, scp stalls": only the handshake passed, the peer stays silent.
    let mut s = Script::new();
    s.seg(S2C, 0.0, 0, 0, 1, 65536); // SYN/ACK acknowledging the client's SYN
    let mut t = 1.0;
    let orig = s.seg(C2S, t, 1, 1448, 1, 64512);
    for g in LADDER {
        t += g;
        s.seg(C2S, t, 1, 1448, 1, 64512);
    }
    let d = diagnose(&s);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert!(d[0].frames.contains(&FrameNo(orig)));
    assert_eq!(d[0].small_packets, SmallPacketsPass::HandshakeOnly);
}

#[test]
fn peer_heartbeats_prove_small_packets_pass() {
    // No data acknowledged, but the server keeps sending small segments.
    let mut s = Script::new();
    s.seg(S2C, 0.0, 0, 0, 1, 65536);
    let mut t = 1.0;
    s.seg(C2S, t, 1, 1448, 1, 64512);
    for (k, g) in LADDER.iter().enumerate() {
        t += g;
        s.seg(S2C, t - 1.0, 1 + 17 * k as i64, 17, 1, 65536);
        s.seg(C2S, t, 1, 1448, 1, 64512);
    }
    let d = diagnose(&s);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].small_packets, SmallPacketsPass::PeerKeptSending);
}

#[test]
fn rendered_finding_carries_the_diagnosis() {
    let mut s = Script::new();
    upload(&mut s, LADDER);
    let d = diagnose(&s);
    let f = render(&d[0]);
    assert_eq!(f.detector, "mss-blackhole");
    assert_eq!(f.severity, Severity::Error);
    assert_eq!(f.tcp_stream, Some(0));
    let keys: Vec<&str> = f.evidence.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "sender",
            "largest_acked_segment",
            "largest_acked_ip_bytes",
            "smallest_unacked_segment",
            "smallest_unacked_ip_bytes",
            "retransmissions",
            "failing_segments",
            "rto_ladder_ms",
            "icmp_seen",
            "path_mtu_lower_bound_bytes",
            "path_mtu_upper_bound_bytes",
            "path_mtu_bound_bytes",
            "recommended_mss",
            "sender_recovered_by_mtu_probing",
            "stall_ms"
        ]
    );
    assert_eq!(f.evidence["sender"], "client 192.0.2.10:40000");
    assert!(
        f.summary.contains("1500-byte IP")
            && f.summary.contains("client 192.0.2.10:40000")
            && f.summary.contains("214 … 3520 ms"),
        "{}",
        f.summary
    );
    assert!(f.remedy.contains("--set-mss 1240"), "{}", f.remedy);
    assert_eq!(s.run(&mut MssBlackhole::default()), vec![f]);
}

#[test]
fn ipv6_prose_names_packet_too_big() {
    let mut s = Script::new();
    s.v6 = true;
    upload(&mut s, LADDER);
    let f = render(&diagnose(&s)[0]);
    assert!(f.summary.contains("ICMPv6 Packet Too Big"), "{}", f.summary);
    assert!(f.remedy.contains("--set-mss 1220"), "{}", f.remedy);
}

#[test]
fn alias_is_advertised() {
    let info = MssBlackhole::default().info();
    assert_eq!(info.aliases, ["pmtu-blackhole"]);
    assert!(info.explain.contains("pmtu-blackhole"));
    assert!(info.explain.starts_with("# mss-blackhole: "));
}

#[test]
fn black_hole_still_open_when_the_capture_ended_before_the_next_resend_is_censored() {
    let mut s = Script::new();
    upload(&mut s, LADDER);
    let last_ms = 300.0 + LADDER.iter().sum::<f64>();
    let ended = |end_ms: f64| {
        let mut d = MssBlackhole::default();
        for ev in &s.events {
            d.on_flow_event(ev);
        }
        let mut ctx = s.ctx();
        ctx.span = Some(pcapsleuth_detect::CaptureSpan {
            first: at(0.0),
            last: at(end_ms),
            earliest: at(0.0),
            latest: at(end_ms),
        });
        d.diagnose(&ctx)
    };
    // The lab's mss-blackhole.pcap: the capture stops ~4.4 s after the last
    // re-send, the next (double the 3520 ms gap) was not yet due.
    let out = ended(last_ms + 4437.0);
    assert_eq!(out.len(), 1, "{out:#?}");
    assert_eq!(out[0].evidence.open_at_capture_end_ms, Some(4437.0));
    assert_eq!(out[0].evidence.next_retransmission_due_ms, Some(7040.0));
    assert_eq!(out[0].severity, Severity::Error);
    assert!(render(&out[0]).summary.contains(
        "The capture ended 4437 ms after the last re-send, before the next was due (~7040 ms)"
    ));
    // Overdue: nothing added.
    let out = ended(last_ms + 60_000.0);
    assert_eq!(out[0].evidence.open_at_capture_end_ms, None);
}

/// The diagnoses of `s` with `end` pushed after its events, and the live
/// streams right after the first `FlowEnded`.
fn diagnose_ended(s: &Script, ctx: &pcapsleuth_detect::FinishContext) -> (Vec<Diagnosis>, usize) {
    let mut d = MssBlackhole::default();
    let mut live = usize::MAX;
    for ev in &s.events {
        d.on_flow_event(ev);
        if matches!(ev, FlowEvent::FlowEnded(_)) && live == usize::MAX {
            live = d.active_streams();
        }
    }
    (d.diagnose(ctx), live)
}

#[test]
fn flow_ended_keeps_the_diagnosis_and_drops_the_ledgers() {
    fn stuck() -> Script {
        let mut s = Script::new();
        upload(&mut s, LADDER);
        s
    }
    fn recovered() -> Script {
        let mut s = stuck();
        let mut seq = 101;
        let mut t = 7000.0;
        while seq < 101 + 1448 * 12 {
            s.seg(C2S, t, seq, 1012, 1, 64512);
            seq += 1012;
            s.seg(S2C, t + 0.1, 1, 0, seq, 65536);
            t += 1.0;
        }
        s
    }
    for make in [stuck as fn() -> Script, recovered] {
        let without = diagnose(&make());
        assert_eq!(without.len(), 1);
        let mut s = make();
        s.end_flow();
        let (with, live) = diagnose_ended(&s, &s.ctx());
        assert_eq!(live, 0);
        assert_eq!(with, without);
    }
}

#[test]
fn an_ended_flow_between_the_same_hosts_still_bounds_the_path() {
    // Stream 1 (same hosts, other port) carried 1400-byte datagrams, then ended.
    let mut s = Script::new();
    for k in 0..3i64 {
        s.seg(C2S, 0.0 + k as f64, 1 + 1348 * k, 1348, 1, 64512);
        s.seg(S2C, 0.5 + k as f64, 1, 0, 1 + 1348 * (k + 1), 65536);
    }
    for ev in s.events.iter_mut() {
        if let FlowEvent::Segment(seg) = ev {
            seg.stream = StreamId(1);
        }
    }
    let mut with_end = Script::new();
    with_end.events = s.events.clone();
    with_end.events.push(flow_ended(StreamId(1), 6, at(5.5)));
    let mut main = Script::new();
    upload(&mut main, LADDER);
    s.events.extend(main.events.iter().copied());
    with_end.events.extend(main.events.iter().copied());
    let mut ctx = main.ctx();
    let (c, sv) = main.endpoints();
    ctx.streams
        .insert(StreamId(1), (Endpoint { port: 40001, ..c }, sv));
    let (without, _) = diagnose_ended(&s, &ctx);
    let (with, live) = diagnose_ended(&with_end, &ctx);
    assert_eq!(live, 0);
    assert_eq!(without.len(), 1);
    assert_eq!(without[0].evidence.path_mtu_lower_bound_bytes, 1400);
    assert_eq!(with, without);
}

#[test]
fn a_one_syn_stream_keeps_no_state() {
    let mut d = MssBlackhole::default();
    for i in 0..10_000u64 {
        for ev in syn_only(i, i + 1, at(i as f64)) {
            d.on_flow_event(&ev);
        }
    }
    assert_eq!((d.active_streams(), d.state_bytes()), (0, 0));
}
