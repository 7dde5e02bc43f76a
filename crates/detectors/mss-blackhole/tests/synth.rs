//! Table tests of the mss-blackhole detector on synthesized flow events shaped
//! like seed 004 / the lab's mss-blackhole.pcap (upload through a 1400-byte
//! link whose frag-needed is dropped).

use pcapsleuth_core::Endpoint;
use pcapsleuth_decode::IcmpKind;
use pcapsleuth_detect::synth::*;
use pcapsleuth_detect::Severity;
use pcapsleuth_flow::{FlowEvent, IcmpErrorEvent};
use pcapsleuth_mss_blackhole::MssBlackhole;

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
    let f = s.run(&mut MssBlackhole::default());
    assert_eq!(f.len(), 1, "{f:#?}");
    let f = &f[0];
    assert_eq!(f.severity, Severity::Error);
    assert!(
        f.frames.contains(&orig) && retx.iter().all(|r| f.frames.contains(r)),
        "{:?}",
        f.frames
    );
    let e = &f.evidence;
    assert_eq!(e["largest_acked_segment"], 100);
    assert_eq!(e["largest_acked_ip_bytes"], 152);
    assert_eq!(e["smallest_unacked_segment"], 1448);
    assert_eq!(e["smallest_unacked_ip_bytes"], 1500);
    assert_eq!(e["retransmissions"], 5);
    assert_eq!(e["icmp_seen"], false);
    assert_eq!(e["path_mtu_upper_bound_bytes"], 1499);
    assert_eq!(e["path_mtu_bound_bytes"], 1280);
    assert_eq!(e["recommended_mss"], 1240);
    assert_eq!(e["sender_recovered_by_mtu_probing"], false);
    assert_eq!(
        e["rto_ladder_ms"],
        serde_json::json!([214.0, 416.0, 832.0, 1664.0, 3520.0])
    );
    assert!(
        f.summary.contains("1500-byte IP") && f.summary.contains("client 192.0.2.10:40000"),
        "{}",
        f.summary
    );
    assert!(f.remedy.contains("--set-mss 1240"), "{}", f.remedy);
}

#[test]
fn ipv6_recommendation_subtracts_60() {
    let mut s = Script::new();
    s.v6 = true;
    upload(&mut s, LADDER);
    let f = s.run(&mut MssBlackhole::default());
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].evidence["smallest_unacked_ip_bytes"], 1520);
    assert_eq!(f[0].evidence["recommended_mss"], 1220);
    assert!(f[0].summary.contains("ICMPv6 Packet Too Big"));
}

#[test]
fn frag_needed_quoting_the_flow_means_no_black_hole() {
    let mut s = Script::new();
    upload(&mut s, LADDER);
    let (c, sv) = s.endpoints();
    s.push(FlowEvent::IcmpError(IcmpErrorEvent {
        frame: s.frame + 1,
        ts: at(400.0),
        interface: 0,
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
        quoted_ip_len: 1500,
        quoted_seq: None,
        stream: Some(0),
        quoted_dir: Some(C2S),
        quoted_rel_seq: Some(101),
        matched: None,
    }));
    assert!(s.run(&mut MssBlackhole::default()).is_empty());
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
    let f = s.run(&mut MssBlackhole::default());
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].severity, Severity::Warning);
    assert_eq!(f[0].evidence["sender_recovered_by_mtu_probing"], true);
    assert_eq!(f[0].evidence["largest_acked_segment"], 1012);
    assert!(f[0].summary.contains("tcp_mtu_probing"));
    assert!(
        f[0].frames.contains(&first_small),
        "first reduced-size re-send cited: {:?}",
        f[0].frames
    );
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
    assert!(
        s.run(&mut MssBlackhole::default()).is_empty(),
        "same size acked earlier"
    );

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
    assert!(
        s.run(&mut MssBlackhole::default()).is_empty(),
        "300-byte segments"
    );

    // Interactive flow of 100-byte writes, all acked.
    let mut s = Script::new();
    for k in 0..40 {
        s.seg(C2S, 200.0 * k as f64, 1 + 100 * k, 100, 1, 64512);
        s.seg(S2C, 200.0 * k as f64 + 0.1, 1, 0, 101 + 100 * k, 65536);
    }
    assert!(
        s.run(&mut MssBlackhole::default()).is_empty(),
        "interactive"
    );

    // Retransmissions without backoff (fast retransmit storm) are not this.
    let mut s = Script::new();
    upload(&mut s, &[20.0, 20.0, 20.0, 20.0]);
    assert!(s.run(&mut MssBlackhole::default()).is_empty(), "no backoff");

    // Nothing proves small packets pass: no data acked, peer silent.
    let mut s = Script::new();
    let mut t = 0.0;
    s.seg(C2S, t, 1, 1448, 1, 64512);
    for g in LADDER {
        t += g;
        s.seg(C2S, t, 1, 1448, 1, 64512);
    }
    assert!(s.run(&mut MssBlackhole::default()).is_empty(), "dead peer");
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
    let f = s.run(&mut MssBlackhole::default());
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(f[0].frames.contains(&orig));
    assert!(f[0].summary.contains("handshake"), "{}", f[0].summary);
}
