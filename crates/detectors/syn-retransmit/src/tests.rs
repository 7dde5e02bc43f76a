//! Table tests over synthesized flow events.

use super::*;
use pcapsleuth_core::Timestamp;
use pcapsleuth_decode::TcpFlags;
use pcapsleuth_detect::synth::{at, evidence as ev, segment, C2S, S2C, T0};
use pcapsleuth_flow::FlowStarted;

const SYN: u16 = TcpFlags::SYN;
const SYNACK: u16 = TcpFlags::SYN | TcpFlags::ACK;
const ACK: u16 = TcpFlags::ACK;
const RSTACK: u16 = TcpFlags::RST | TcpFlags::ACK;
const CISN: u32 = u32::MAX - 3;
const SISN: u32 = 0xffff_fff0;

/// Builds the event stream of a capture, one connection at a time.
struct Cap {
    events: Vec<FlowEvent>,
    frame: u64,
}

impl Cap {
    fn new() -> Self {
        Cap {
            events: Vec::new(),
            frame: 0,
        }
    }
    fn flow(&mut self, stream: u64, cport: u16, server: &str, sport: u16) {
        self.frame += 1;
        self.events.push(FlowEvent::FlowStarted(FlowStarted {
            stream,
            client: Endpoint {
                addr: "192.0.2.10".parse().unwrap(),
                port: cport,
            },
            server: Endpoint {
                addr: server.parse().unwrap(),
                port: sport,
            },
            frame: self.frame,
            ts: Timestamp(T0),
        }));
        self.frame -= 1;
    }
    #[allow(clippy::too_many_arguments)] // a test builder: one argument per header field
    /// One segment; `dup` marks another sighting of frame `dup`. Returns its frame number.
    fn seg(
        &mut self,
        stream: u64,
        dir: Direction,
        ms: f64,
        flags: u16,
        seq: u32,
        ack: u32,
        dup: Option<u64>,
    ) -> u64 {
        self.frame += 1;
        self.events.push(FlowEvent::Segment(SegmentEvent {
            stream,
            flags: TcpFlags(flags),
            ack: SeqNum(ack),
            rel_seq: 0,
            rel_ack: None,
            ip_len: 60,
            window_raw: 64240,
            window_bytes: None,
            mss: Some(1460),
            window_scale: Some(7),
            duplicate_of: dup,
            snd_una: 0,
            snd_nxt: 1,
            ..segment(dir, self.frame, at(ms), seq, 0, 0)
        }));
        self.frame
    }
    /// A handshake whose client SYNs leave at `syn_ms` and that is answered at `answer_ms` (None: never).
    fn connect(
        &mut self,
        stream: u64,
        cport: u16,
        syn_ms: &[f64],
        answer_ms: Option<f64>,
    ) -> Vec<u64> {
        self.flow(stream, cport, "198.51.100.10", 8080);
        // Every connection has its own ISN (the first one crosses the 2^32 wrap).
        let isn = CISN.wrapping_add((stream as u32).wrapping_mul(7_919_000));
        let mut frames = Vec::new();
        for &t in syn_ms {
            frames.push(self.seg(stream, C2S, t, SYN, isn, 0, None));
        }
        if let Some(t) = answer_ms {
            frames.push(self.seg(stream, S2C, t, SYNACK, SISN, isn.wrapping_add(1), None));
            self.seg(
                stream,
                C2S,
                t + 0.1,
                ACK,
                isn.wrapping_add(1),
                SISN.wrapping_add(1),
                None,
            );
        }
        frames
    }
    /// Sets the IPv4 ID of the last segment pushed.
    fn ip_id(&mut self, id: u32) {
        if let Some(FlowEvent::Segment(s)) = self.events.last_mut() {
            s.ip_id = Some(id);
        }
    }
    fn run(&self) -> Vec<Finding> {
        let mut d = SynRetransmit::default();
        let mut ctx = FinishContext::default();
        for e in &self.events {
            if let FlowEvent::FlowStarted(f) = e {
                ctx.streams.insert(f.stream, (f.client, f.server));
            }
            d.on_flow_event(e);
        }
        d.finish(&ctx)
    }
}

#[test]
fn one_retry_then_connected_is_a_warning_with_delay_and_ladder() {
    let mut c = Cap::new();
    let frames = c.connect(0, 41001, &[0.0, 1016.801], Some(1016.886));
    let out = c.run();
    assert_eq!(out.len(), 1, "{out:?}");
    let f = &out[0];
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.detector, ID);
    assert_eq!(f.tcp_stream, Some(0));
    assert!(
        frames.iter().all(|fr| f.frames.contains(fr)),
        "{:?} ⊄ {:?}",
        frames,
        f.frames
    );
    assert_eq!(ev(f, "delay_ms"), &json!(1016.886));
    assert_eq!(ev(f, "syn_count"), &json!(2));
    assert_eq!(ev(f, "connected"), &json!(true));
    assert_eq!(ev(f, "gaps_ms"), &json!([1016.801]));
    assert_eq!(ev(f, "rto_ms"), &json!(1016.801));
    assert!(
        ev(f, "ladder")
            .as_str()
            .unwrap()
            .contains("1 s initial RTO"),
        "{}",
        ev(f, "ladder")
    );
    assert_eq!(f.flow.as_ref().map(|r| r.client_port), Some(41001));
    assert!(f.summary.contains("1016.9 ms late"), "{}", f.summary);
}

#[test]
fn ladders_are_told_apart() {
    let s = 1_000_000_000i64;
    assert!(ladder_for(&[1_019_705_000, 2_016_064_000])
        .0
        .starts_with("Linux classic"));
    assert!(ladder_for(&[1_030_000_000, 2_016_000_000, 4_255_985_000])
        .0
        .starts_with("Linux classic"));
    assert!(ladder_for(&[s + 20_000_000, s + 12_000_000, s + 9_000_000])
        .0
        .starts_with("Linux tcp_syn_linear_timeouts"));
    assert!(ladder_for(&[3 * s + 10_000_000])
        .0
        .starts_with("3 s initial RTO (Windows"));
    assert!(ladder_for(&[3 * s, 6 * s, 12 * s])
        .0
        .starts_with("3 s initial RTO doubling"));
    assert_eq!(ladder_for(&[1_500_000_000]).0, "unrecognised");
    assert_eq!(ladder_for(&[]).0, "none");
}

#[test]
fn duplicate_sightings_are_not_retransmissions() {
    let mut c = Cap::new();
    c.flow(0, 40001, "198.51.100.10", 8080);
    let first = c.seg(0, C2S, 0.0, SYN, CISN, 0, None);
    c.seg(0, C2S, 0.0, SYN, CISN, 0, Some(first));
    let sa = c.seg(0, S2C, 0.05, SYNACK, SISN, CISN.wrapping_add(1), None);
    c.seg(0, S2C, 0.05, SYNACK, SISN, CISN.wrapping_add(1), Some(sa));
    c.seg(
        0,
        C2S,
        0.1,
        ACK,
        CISN.wrapping_add(1),
        SISN.wrapping_add(1),
        None,
    );
    assert!(c.run().is_empty());
}

#[test]
fn refused_connection_is_not_flagged_but_refused_after_retries_is() {
    let mut c = Cap::new();
    c.flow(0, 40005, "198.51.100.10", 8081);
    c.seg(0, C2S, 0.0, SYN, CISN, 0, None);
    c.seg(0, S2C, 0.05, RSTACK, 0, CISN.wrapping_add(1), None);
    assert!(c.run().is_empty());

    c.flow(1, 40006, "198.51.100.10", 8081);
    c.seg(1, C2S, 10.0, SYN, 7, 0, None);
    c.seg(1, C2S, 1022.0, SYN, 7, 0, None);
    c.seg(1, S2C, 1022.1, RSTACK, 0, 8, None);
    let out = c.run();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].severity, Severity::Warning);
    assert_eq!(ev(&out[0], "refused"), &json!(true));
}

#[test]
fn never_answered_is_an_error_with_classic_ladder() {
    let mut c = Cap::new();
    c.connect(0, 43001, &[0.0, 1030.0, 3046.0, 7302.0], None);
    let out = c.run();
    assert_eq!(out.len(), 1);
    let f = &out[0];
    assert_eq!(f.severity, Severity::Error);
    assert_eq!(ev(f, "connected"), &json!(false));
    assert_eq!(ev(f, "syn_count"), &json!(4));
    assert_eq!(ev(f, "delay_ms"), &json!(7302.0));
    assert!(ev(f, "ladder")
        .as_str()
        .unwrap()
        .starts_with("Linux classic"));
}

#[test]
fn lost_synack_counts_server_retransmission_and_delay_to_acked_synack() {
    // Lab syn-44001: SYN, SYN after 1011 ms, SYN/ACK, ACK, SYN/ACK again.
    let mut c = Cap::new();
    c.flow(0, 44001, "198.51.100.10", 8080);
    c.seg(0, C2S, 0.0, SYN, CISN, 0, None);
    let retx = c.seg(0, C2S, 1010.916, SYN, CISN, 0, None);
    c.seg(0, S2C, 1011.005, SYNACK, SISN, CISN.wrapping_add(1), None);
    c.seg(
        0,
        C2S,
        1011.05,
        ACK,
        CISN.wrapping_add(1),
        SISN.wrapping_add(1),
        None,
    );
    c.seg(0, S2C, 1011.077, SYNACK, SISN, CISN.wrapping_add(1), None);
    let out = c.run();
    assert_eq!(out.len(), 1);
    assert!(out[0].frames.contains(&retx));
    assert_eq!(ev(&out[0], "synack_retransmits"), &json!(1));
    assert_eq!(ev(&out[0], "delay_ms"), &json!(1011.005));
}

#[test]
fn new_isn_on_same_ports_is_a_new_attempt() {
    let mut c = Cap::new();
    c.flow(0, 40010, "198.51.100.10", 8080);
    c.seg(0, C2S, 0.0, SYN, 100, 0, None);
    c.seg(0, S2C, 0.05, RSTACK, 0, 101, None);
    c.seg(0, C2S, 1000.0, SYN, 900_000, 0, None);
    c.seg(0, S2C, 1000.05, SYNACK, SISN, 900_001, None);
    assert!(c.run().is_empty());
}

#[test]
fn conntrack_race_shape_on_a_minority_delayed_by_one_or_three_seconds() {
    let mut c = Cap::new();
    for i in 0..8u64 {
        let t = i as f64 * 10.0;
        c.connect(i, 30000 + i as u16, &[t], Some(t + 0.05));
    }
    c.connect(8, 31000, &[100.0, 1110.0], Some(1110.1));
    c.connect(9, 31001, &[200.0, 1210.0, 3215.0], Some(3215.1));
    let out = c.run();
    assert_eq!(out.len(), 2, "{out:?}");
    for f in &out {
        assert_eq!(ev(f, "conntrack_race_shape"), &json!(true), "{f:?}");
        assert_eq!(ev(f, "service_connections"), &json!(10));
        assert_eq!(ev(f, "service_delayed"), &json!(2));
        assert!(f.summary.contains("conntrack"), "{}", f.summary);
        assert!(f.remedy.contains("--random-fully"));
    }
    // A majority delayed is not the race shape.
    let mut c = Cap::new();
    for i in 0..4u64 {
        c.connect(i, 30000 + i as u16, &[0.0, 1010.0], Some(1010.1));
    }
    c.connect(4, 31000, &[0.0], Some(0.05));
    let out = c.run();
    assert_eq!(out.len(), 4);
    assert!(out
        .iter()
        .all(|f| ev(f, "conntrack_race_shape") == &json!(false)));
}

#[test]
fn seed_002_views_before_and_after_snat_are_one_connection() {
    // Container view (veth + cni0 duplicates) and the eth0 view after SNAT to a new port.
    let mut c = Cap::new();
    for i in 0..8u64 {
        let t = i as f64 * 10.0;
        c.connect(i, 30000 + i as u16, &[t], Some(t + 0.05));
    }
    c.flow(8, 38050, "198.51.100.10", 8080);
    let s1 = c.seg(8, C2S, 100.0, SYN, 1424677299, 0, None);
    c.seg(8, C2S, 100.0, SYN, 1424677299, 0, Some(s1));
    let s2 = c.seg(8, C2S, 1097.872, SYN, 1424677299, 0, None);
    c.seg(8, C2S, 1097.872, SYN, 1424677299, 0, Some(s2));
    c.flow(9, 10011, "198.51.100.10", 8080);
    let nat = c.seg(9, C2S, 1097.924, SYN, 1424677299, 0, None);
    c.seg(9, S2C, 1097.983, SYNACK, SISN, 1424677300, None);
    c.seg(8, S2C, 1097.998, SYNACK, SISN, 1424677300, None);
    c.seg(8, C2S, 1098.1, ACK, 1424677300, SISN.wrapping_add(1), None);
    let out = c.run();
    assert_eq!(out.len(), 1, "{out:?}");
    let f = &out[0];
    assert_eq!(f.tcp_stream, Some(8));
    assert_eq!(ev(f, "syn_count"), &json!(2));
    assert_eq!(ev(f, "duplicate_sightings"), &json!(2));
    assert_eq!(ev(f, "same_isn_streams"), &json!([9]));
    assert_eq!(ev(f, "dropped_between_capture_points"), &json!(true));
    assert!(f.frames.contains(&nat));
    // 9 connections (the NAT view counts once), 1 delayed by ~1 s: the race shape.
    assert_eq!(ev(f, "service_connections"), &json!(9));
    assert_eq!(ev(f, "conntrack_race_shape"), &json!(true));
    assert!(
        f.summary.contains("dropped inside this host"),
        "{}",
        f.summary
    );
}

#[test]
fn half_duplex_capture_without_synack_is_connected_not_never_answered() {
    let mut c = Cap::new();
    c.flow(0, 40100, "198.51.100.10", 22);
    c.seg(0, C2S, 0.0, SYN, CISN, 0, None);
    c.seg(0, C2S, 1012.0, SYN, CISN, 0, None);
    let ack = c.seg(
        0,
        C2S,
        1012.3,
        ACK,
        CISN.wrapping_add(1),
        SISN.wrapping_add(1),
        None,
    );
    let out = c.run();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].severity, Severity::Warning);
    assert_eq!(ev(&out[0], "connected"), &json!(true));
    assert_eq!(ev(&out[0], "delay_ms"), &json!(1012.3));
    assert!(out[0].frames.contains(&ack));
}

#[test]
fn repeats_sooner_than_a_timer_are_sightings_not_retries() {
    let mut c = Cap::new();
    c.flow(0, 40200, "198.51.100.10", 80);
    c.seg(0, C2S, 0.0, SYN, CISN, 0, None);
    c.seg(0, C2S, 0.0, SYN, CISN, 0, None); // same packet twice, not marked by the flow table
    c.seg(0, S2C, 0.1, SYNACK, SISN, CISN.wrapping_add(1), None);
    c.seg(0, S2C, 0.1, SYNACK, SISN, CISN.wrapping_add(1), None);
    c.seg(
        0,
        C2S,
        0.2,
        ACK,
        CISN.wrapping_add(1),
        SISN.wrapping_add(1),
        None,
    );
    assert!(c.run().is_empty());
}

#[test]
fn loopback_burst_is_a_listen_queue_shape_not_conntrack() {
    let mut c = Cap::new();
    let lo = |c: &mut Cap, stream: u64, port: u16, syns: &[f64], ans: f64| {
        c.frame += 1;
        c.events.push(FlowEvent::FlowStarted(FlowStarted {
            stream,
            client: Endpoint {
                addr: "127.0.0.1".parse().unwrap(),
                port,
            },
            server: Endpoint {
                addr: "127.0.0.1".parse().unwrap(),
                port: 7000,
            },
            frame: c.frame,
            ts: Timestamp(T0),
        }));
        c.frame -= 1;
        let isn = 1000 + stream as u32 * 100_000;
        for &t in syns {
            c.seg(stream, C2S, t, SYN, isn, 0, None);
        }
        c.seg(stream, S2C, ans, SYNACK, SISN, isn + 1, None);
    };
    for i in 0..6u64 {
        lo(&mut c, i, 30000 + i as u16, &[i as f64], i as f64 + 0.05);
    }
    lo(&mut c, 6, 31000, &[10.0, 1074.0], 1074.1);
    let out = c.run();
    assert_eq!(out.len(), 1);
    assert_eq!(ev(&out[0], "conntrack_race_shape"), &json!(false));
    assert_eq!(ev(&out[0], "burst_drop_shape"), &json!(true));
    assert!(
        out[0].summary.contains("listen queue"),
        "{}",
        out[0].summary
    );
}

// ---- Fixes from the public-corpus review (docs/corpus-findings.md) ----

#[test]
fn single_gap_summary_does_not_repeat_the_span() {
    // ssh2.pcapng: "sent 2 times over 8001.6 ms 8002 ms apart" read badly.
    let mut c = Cap::new();
    c.connect(0, 43100, &[0.0, 1016.0], None);
    let out = c.run();
    assert_eq!(out.len(), 1);
    let s = &out[0].summary;
    assert!(s.contains("sent 2 times 1016 ms apart"), "{s}");
    assert!(!s.contains(" over "), "{s}");
    // Several gaps keep the total span.
    let mut c = Cap::new();
    c.connect(0, 43101, &[0.0, 1016.0, 3032.0], None);
    let s = &c.run()[0].summary;
    assert!(s.contains("over 3032.0 ms at gaps of 1016, 2016 ms"), "{s}");
}

#[test]
fn syn_resent_after_a_captured_synack_is_a_retry_and_names_the_lost_synack() {
    // bug-5881-01 / tls_port_80: SYN, SYN/ACK, SYN again 1 s later, SYN/ACK, ACK.
    let mut c = Cap::new();
    c.flow(0, 64731, "198.51.100.10", 443);
    c.seg(0, C2S, 0.0, SYN, CISN, 0, None);
    let sa = c.seg(0, S2C, 41.8, SYNACK, SISN, CISN.wrapping_add(1), None);
    let retx = c.seg(0, C2S, 997.7, SYN, CISN, 0, None);
    c.seg(0, S2C, 1038.3, SYNACK, SISN, CISN.wrapping_add(1), None);
    c.seg(
        0,
        C2S,
        1043.5,
        ACK,
        CISN.wrapping_add(1),
        SISN.wrapping_add(1),
        None,
    );
    let out = c.run();
    assert_eq!(out.len(), 1, "{out:?}");
    let f = &out[0];
    assert_eq!(ev(f, "syn_count"), &json!(2));
    assert_eq!(ev(f, "syns_after_synack"), &json!(1));
    assert_eq!(ev(f, "connected"), &json!(true));
    assert_eq!(f.severity, Severity::Warning);
    assert!(f.frames.contains(&retx));
    assert!(
        f.summary
            .contains(&format!("SYN/ACK (frame {sa}) was captured")),
        "{}",
        f.summary
    );
}

#[test]
fn synack_resent_but_never_acknowledged_is_not_a_connection() {
    // nDPI gnutella.pcap stream 0: SYN, SYN/ACK, then SYN/ACK re-sent for a
    // minute and a RST; the client never sent the handshake ACK.
    let mut c = Cap::new();
    c.flow(0, 50190, "198.51.100.10", 29545);
    c.seg(0, C2S, 0.0, SYN, CISN, 0, None);
    c.seg(0, S2C, 48.9, SYNACK, SISN, CISN.wrapping_add(1), None);
    c.seg(0, S2C, 7385.7, SYNACK, SISN, CISN.wrapping_add(1), None);
    c.seg(0, S2C, 21370.9, SYNACK, SISN, CISN.wrapping_add(1), None);
    let out = c.run();
    assert_eq!(out.len(), 1, "{out:?}");
    let f = &out[0];
    assert_eq!(ev(f, "connected"), &json!(false));
    assert_eq!(ev(f, "synack_unacknowledged"), &json!(true));
    assert_eq!(f.severity, Severity::Error);
    assert!(
        f.summary.contains("never completed its handshake"),
        "{}",
        f.summary
    );
    assert!(!f.summary.contains("set up"), "{}", f.summary);
}

#[test]
fn single_delayed_connection_among_many_is_not_a_race_shape() {
    // opera-vpn.pcapng: 1 of 62 connections delayed by 1 s is one lost SYN.
    let mut c = Cap::new();
    for i in 0..12u64 {
        let t = i as f64 * 10.0;
        c.connect(i, 30000 + i as u16, &[t], Some(t + 0.05));
    }
    c.connect(12, 31000, &[200.0, 1201.0], Some(1201.1));
    let out = c.run();
    assert_eq!(out.len(), 1);
    assert_eq!(ev(&out[0], "conntrack_race_shape"), &json!(false));
    assert_eq!(ev(&out[0], "burst_drop_shape"), &json!(false));
    assert!(!out[0].summary.contains("conntrack"), "{}", out[0].summary);
}

#[test]
fn three_second_ladder_first_retry_may_come_one_slow_tick_early() {
    // (gaps ms, expected ladder prefix): public-corpus Windows XP / BSD gaps.
    let ms = 1_000_000i64;
    let table: &[(&[i64], &str)] = &[
        (&[2919, 6009], "3 s initial RTO (Windows"), // sip.pcap
        (&[2905, 6015], "3 s initial RTO (Windows"), // modbus.pcap
        (&[2916, 6000, 12017], "3 s initial RTO doubling"), // gnutella.pcap
        (&[3010], "3 s initial RTO (Windows"),
        (&[2400, 6000], "unrecognised"), // more than one tick early
        (&[3000, 5500], "unrecognised"), // later retries are not early
        (&[1016, 2016], "Linux classic"),
    ];
    for (gaps, want) in table {
        let g: Vec<i64> = gaps.iter().map(|x| x * ms).collect();
        let got = ladder_for(&g).0;
        assert!(got.starts_with(want), "{gaps:?}: {got}");
    }
}

#[test]
fn client_sweeping_many_services_gets_info_not_error() {
    // gnutella.pcap: one client, hundreds of peers never answering.
    let mut c = Cap::new();
    for i in 0..6u64 {
        let server = format!("203.0.113.{}", i + 1);
        c.flow(i, 3685 + i as u16, &server, 6346);
        let isn = 1000 + i as u32 * 1_000_000;
        for t in [0.0, 2916.0, 8916.0] {
            c.seg(i, C2S, t + i as f64, SYN, isn, 0, None);
        }
    }
    let out = c.run();
    assert_eq!(out.len(), 6);
    for f in &out {
        assert_eq!(f.severity, Severity::Info, "{}", f.summary);
        assert_eq!(ev(f, "client_failed_services"), &json!(6));
        assert!(f.summary.contains("sweep"), "{}", f.summary);
    }
    // Fewer services (ssh2.pcapng: 2 unreachable servers) stay errors.
    let mut c = Cap::new();
    c.connect(0, 43001, &[0.0, 1030.0, 3046.0], None);
    c.connect(1, 43002, &[0.0, 1030.0, 3046.0], None);
    let out = c.run();
    assert!(out.iter().all(|f| f.severity == Severity::Error));
}

#[test]
fn sub_200ms_syn_retries_are_a_tool_not_a_kernel_timer() {
    // activeosfingerprinting.pcapng: nmap repeats probes every ~175 ms.
    let mut c = Cap::new();
    c.connect(0, 53951, &[0.0, 175.0, 350.0, 525.0], None);
    let out = c.run();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].severity, Severity::Info);
    assert!(
        out[0].summary.contains("raw-socket tool"),
        "{}",
        out[0].summary
    );
}

#[test]
fn handshake_ack_may_acknowledge_either_of_two_synack_isns() {
    // KakaoTalk_talk.pcap stream 3: two SYN/ACKs with different ISNs 0.7 ms
    // apart; the client acknowledges the first. That is a completed handshake.
    let mut c = Cap::new();
    c.flow(0, 48489, "198.51.100.10", 80);
    c.seg(0, C2S, 0.0, SYN, CISN, 0, None);
    c.seg(0, C2S, 1010.0, SYN, CISN, 0, None);
    c.seg(0, S2C, 1040.0, SYNACK, SISN, CISN.wrapping_add(1), None);
    c.seg(0, S2C, 1040.7, SYNACK, 77_000, CISN.wrapping_add(1), None);
    c.seg(
        0,
        C2S,
        1048.0,
        ACK,
        CISN.wrapping_add(1),
        SISN.wrapping_add(1),
        None,
    );
    let out = c.run();
    assert_eq!(out.len(), 1);
    assert_eq!(ev(&out[0], "connected"), &json!(true));
    assert_eq!(ev(&out[0], "synack_unacknowledged"), &json!(false));
    assert_eq!(out[0].severity, Severity::Warning);
}

#[test]
fn delay_runs_to_the_handshake_ack_when_the_syn_was_resent_after_a_synack() {
    // heuristic_tcp_ack_payload.pcap stream 5: SYN/ACK at 9.8 ms, SYN again at
    // 2065 ms, ACK at 2067 ms: the client waited 2067 ms, not 9.8 ms.
    let mut c = Cap::new();
    c.flow(0, 6946, "198.51.100.10", 443);
    c.seg(0, C2S, 0.0, SYN, CISN, 0, None);
    c.seg(0, S2C, 9.8, SYNACK, SISN, CISN.wrapping_add(1), None);
    c.seg(0, C2S, 2065.2, SYN, CISN, 0, None);
    c.seg(
        0,
        C2S,
        2067.0,
        ACK,
        CISN.wrapping_add(1),
        SISN.wrapping_add(1),
        None,
    );
    let out = c.run();
    assert_eq!(out.len(), 1);
    assert_eq!(ev(&out[0], "delay_ms"), &json!(2067.0));
    assert!(
        out[0].summary.contains("2067.0 ms late"),
        "{}",
        out[0].summary
    );
}

#[test]
fn capture_that_began_mid_ladder_names_the_ladder_and_the_missed_syns() {
    // ssh2.pcapng streams 1-3 / ocs.pcap stream 0: two SYNs 8 s apart, the
    // first within half a second of the capture's start: rung 4 of the
    // classic ladder (1+2+4 s of SYNs happened before the capture began).
    let mut c = Cap::new();
    c.connect(0, 57361, &[450.0, 8451.6], None);
    let out = c.run();
    assert_eq!(out.len(), 1);
    let l = ev(&out[0], "ladder").as_str().unwrap().to_string();
    assert!(
        l.starts_with("Linux classic") && l.contains("joined at retry 3"),
        "{l}"
    );
    assert!(
        out[0]
            .summary
            .contains("capture began ~7 s after the first SYN"),
        "{}",
        out[0].summary
    );
    // The same gap long after the capture began is no ladder we know.
    let mut c = Cap::new();
    c.connect(0, 40000, &[0.0], Some(0.1));
    c.connect(1, 57361, &[60_000.0, 68_001.6], None);
    let out = c.run();
    assert_eq!(out.len(), 1);
    assert_eq!(ev(&out[0], "ladder"), &json!("unrecognised"));
    // Direct table: (gaps ms, ms since capture start, expected prefix or None).
    let ms = 1_000_000i64;
    let table: &[(&[i64], i64, Option<&str>)] = &[
        (&[8002], 450, Some("Linux classic")),
        (&[6009, 12020], 100, Some("3 s initial RTO doubling")),
        (&[5500], 100, None),
        (&[], 0, None),
    ];
    for (gaps, since, want) in table {
        let g: Vec<i64> = gaps.iter().map(|x| x * ms).collect();
        let got = ladder_joined(&g, since * ms).map(|x| x.0);
        match want {
            Some(w) => assert!(
                got.as_deref().is_some_and(|x| x.starts_with(w)),
                "{gaps:?}: {got:?}"
            ),
            None => assert!(got.is_none(), "{gaps:?}: {got:?}"),
        }
    }
}

#[test]
fn linear_ladder_with_more_syns_than_default_linux_is_xnu() {
    // chrissanders `http_espn_fail.pcapng` stream 2 (Mac OS X 10.10): 11 SYNs at
    // XNU tcp_syn_backoff gaps. Real Linux 6.18 (tcp_syn_linear_timeouts=4,
    // fixtures/syn-drops.pcap) has the same shape but sends at most 7 SYNs.
    let ms = 1_000_000i64;
    let espn: Vec<i64> = [1030, 1001, 1004, 1002, 1004, 2014, 4061, 8034, 16039, 32216]
        .iter()
        .map(|&g| g * ms)
        .collect();
    let (label, short) = ladder_for(&espn);
    assert!(label.starts_with("XNU/macOS tcp_syn_backoff"), "{label}");
    assert!(!label.contains("Linux tcp_syn_linear"), "{label}");
    assert_eq!(short, "XNU/macOS tcp_syn_backoff");
    // 8 SYNs (0..5, 7, 11 s): already more than a default Linux sends.
    let eight: Vec<i64> = [1000, 1000, 1000, 1000, 1000, 2000, 4000]
        .iter()
        .map(|&g| g * ms)
        .collect();
    assert!(ladder_for(&eight).0.starts_with("XNU/macOS"));
    // 7 SYNs at 0, 1, 2, 3, 4, 5, 7 s: Linux default or macOS.
    let seven = &eight[..6];
    let (label, short) = ladder_for(seven);
    assert!(
        label.starts_with("Linux tcp_syn_linear_timeouts") && label.contains("XNU/macOS"),
        "{label}"
    );
    assert!(
        short.contains("Linux") && short.contains("XNU/macOS"),
        "{short}"
    );
    // The Linux classic and 3 s / Windows names are untouched.
    assert!(ladder_for(&[ms * 1000, ms * 2000, ms * 4000, ms * 8000])
        .0
        .starts_with("Linux classic"));
    assert!(ladder_for(&[ms * 2950, ms * 6000])
        .0
        .starts_with("3 s initial RTO"));
    // A capture joining the XNU ladder late counts the missed SYNs too:
    // 4 missed + 7 captured = 11 SYNs.
    let late = &espn[4..];
    let (label, _) = ladder_joined(late, 0).expect("joined ladder");
    assert!(label.starts_with("XNU/macOS"), "{label}");
    // Through the detector: the summary names macOS.
    let mut c = Cap::new();
    let mut t = 0.0;
    let mut syns = vec![t];
    for g in [
        1030.0, 1001.0, 1004.0, 1002.0, 1004.0, 2014.0, 4061.0, 8034.0, 16039.0, 32216.0,
    ] {
        t += g;
        syns.push(t);
    }
    c.connect(0, 64862, &syns, None);
    let out = c.run();
    assert_eq!(out.len(), 1);
    assert!(
        out[0].summary.contains("(XNU/macOS tcp_syn_backoff)"),
        "{}",
        out[0].summary
    );
    assert_eq!(ev(&out[0], "syn_count"), &json!(11));
}

#[test]
fn resend_with_a_new_ip_id_is_a_retransmission_however_soon() {
    // nDPI `webex.pcap` stream 24: SYN 461 (ID 0x7cc0), SYN/ACK 462 at +14.4 ms
    // (ID 0x01f3), SYN 488 at +78.7 ms (ID 0x7cc1), SYN/ACK 489 at +86 ms
    // (ID 0x01fc), handshake ACK at +134 ms. tshark flags 488 and 489.
    let mut c = Cap::new();
    c.flow(24, 50000, "198.51.100.10", 443);
    c.seg(24, C2S, 0.0, SYN, CISN, 0, None);
    c.ip_id(0x7cc0);
    c.seg(24, S2C, 14.4, SYNACK, SISN, CISN.wrapping_add(1), None);
    c.ip_id(0x01f3);
    c.seg(24, C2S, 78.7, SYN, CISN, 0, None);
    c.ip_id(0x7cc1);
    c.seg(24, S2C, 85.9, SYNACK, SISN, CISN.wrapping_add(1), None);
    c.ip_id(0x01fc);
    c.seg(
        24,
        C2S,
        134.0,
        ACK,
        CISN.wrapping_add(1),
        SISN.wrapping_add(1),
        None,
    );
    c.ip_id(0x7cc2);
    let out = c.run();
    assert_eq!(out.len(), 1, "{out:?}");
    let f = &out[0];
    assert_eq!(ev(f, "syn_count"), &json!(2));
    assert_eq!(ev(f, "synack_retransmits"), &json!(1));
    assert_eq!(ev(f, "duplicate_sightings"), &json!(0));
    assert_eq!(ev(f, "syns_after_synack"), &json!(1));
    assert_eq!(ev(f, "connected"), &json!(true));
    assert_eq!(f.severity, Severity::Warning);

    // The same repeats with the same non-zero IP ID are copies, even at 78.7 ms.
    let mut c = Cap::new();
    c.flow(0, 50000, "198.51.100.10", 443);
    c.seg(0, C2S, 0.0, SYN, CISN, 0, None);
    c.ip_id(0x0062);
    c.seg(0, C2S, 78.7, SYN, CISN, 0, None);
    c.ip_id(0x0062);
    c.seg(0, S2C, 90.0, SYNACK, SISN, CISN.wrapping_add(1), None);
    c.seg(
        0,
        C2S,
        91.0,
        ACK,
        CISN.wrapping_add(1),
        SISN.wrapping_add(1),
        None,
    );
    assert!(c.run().is_empty());

    // The same non-zero IP ID is no proof of a copy: chrissanders
    // `nowebaccess3.pcapng` stream 0 re-sends its SYN after 1 s with ID 0x178a
    // (and a copy of the first 5 ms later).
    let mut c = Cap::new();
    c.flow(0, 50000, "198.51.100.10", 80);
    for ms in [0.0, 5.0, 1002.1] {
        c.seg(0, C2S, ms, SYN, CISN, 0, None);
        c.ip_id(0x178a);
    }
    let out = c.run();
    assert_eq!(out.len(), 1);
    assert_eq!(ev(&out[0], "syn_count"), &json!(2));
    assert_eq!(ev(&out[0], "duplicate_sightings"), &json!(1));

    // Within 1 ms a new IP ID does not make a re-send (zeek
    // `gtp6_gtp_0x32.pcap`: one SYN 1 µs apart, re-encapsulated, IDs
    // 0xa141 / 0xa142).
    let mut c = Cap::new();
    c.flow(0, 50000, "198.51.100.10", 5228);
    c.seg(0, C2S, 0.0, SYN, CISN, 0, None);
    c.ip_id(0xa141);
    c.seg(0, C2S, 0.001, SYN, CISN, 0, None);
    c.ip_id(0xa142);
    c.seg(0, S2C, 32.2, SYNACK, SISN, CISN.wrapping_add(1), None);
    c.seg(
        0,
        C2S,
        33.0,
        ACK,
        CISN.wrapping_add(1),
        SISN.wrapping_add(1),
        None,
    );
    assert!(c.run().is_empty());

    // IP ID 0 (Linux DF SYNs) and IPv6 fall back to the time rule: copies
    // under 100 ms, a retry at 1 s.
    for id in [Some(0u32), None] {
        let mut c = Cap::new();
        c.flow(0, 50000, "198.51.100.10", 443);
        for ms in [0.0, 0.5, 1000.0] {
            c.seg(0, C2S, ms, SYN, CISN, 0, None);
            if let Some(id) = id {
                c.ip_id(id);
            }
        }
        c.seg(0, S2C, 1010.0, SYNACK, SISN, CISN.wrapping_add(1), None);
        c.seg(
            0,
            C2S,
            1011.0,
            ACK,
            CISN.wrapping_add(1),
            SISN.wrapping_add(1),
            None,
        );
        let out = c.run();
        assert_eq!(out.len(), 1, "{id:?}");
        assert_eq!(ev(&out[0], "syn_count"), &json!(2), "{id:?}");
        assert_eq!(ev(&out[0], "duplicate_sightings"), &json!(1), "{id:?}");
    }
}
