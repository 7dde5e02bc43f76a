//! Table tests over synthesized flow events. They assert the diagnosis
//! ([`Diagnosis`] and its evidence struct); the `render_*` tests at the end
//! check the prose and the evidence JSON.

use super::*;
use pcapsleuth_core::{FrameNo, InterfaceId};
use pcapsleuth_core::{SeqNum, Timestamp};
use pcapsleuth_decode::TcpFlags;
use pcapsleuth_detect::synth::{at, segment, C2S, S2C, T0};
use pcapsleuth_detect::Severity;
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
            stream: StreamId(stream),
            client: Endpoint {
                addr: "192.0.2.10".parse().unwrap(),
                port: cport,
            },
            server: Endpoint {
                addr: server.parse().unwrap(),
                port: sport,
            },
            frame: FrameNo(self.frame),
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
            stream: StreamId(stream),
            flags: TcpFlags(flags),
            ack: SeqNum(ack),
            rel_seq: 0,
            rel_ack: None,
            ip_len: 60,
            window_raw: 64240,
            window_bytes: None,
            mss: Some(1460),
            window_scale: Some(7),
            duplicate_of: dup.map(FrameNo),
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
    /// The detector fed with every event, and the finish context.
    fn feed(&self) -> (SynRetransmit, FinishContext) {
        let mut d = SynRetransmit::default();
        let mut ctx = FinishContext::default();
        for e in &self.events {
            if let FlowEvent::FlowStarted(f) = e {
                ctx.streams.insert(f.stream, (f.client, f.server));
            }
            d.on_flow_event(e);
        }
        (d, ctx)
    }
    /// The diagnoses at the end of the capture.
    fn diagnose(&self) -> Vec<Diagnosis> {
        let (d, ctx) = self.feed();
        d.diagnose(&ctx)
    }
    /// The findings at the end of the capture (through `Detector::finish`).
    fn run(&self) -> Vec<Finding> {
        let (mut d, ctx) = self.feed();
        d.finish(&ctx)
    }
}

/// Nanoseconds in a millisecond, for gap tables.
const MS: i64 = 1_000_000;

#[test]
fn one_retry_then_connected_is_a_warning_with_delay_and_ladder() {
    let mut c = Cap::new();
    let frames = c.connect(0, 41001, &[0.0, 1016.801], Some(1016.886));
    let out = c.diagnose();
    assert_eq!(out.len(), 1, "{out:?}");
    let d = &out[0];
    assert_eq!(d.severity, Severity::Warning);
    assert_eq!(d.outcome, Outcome::Connected);
    assert_eq!(d.info_reason, None);
    assert_eq!(d.stream, 0);
    assert!(
        frames.iter().all(|fr| d.frames.contains(&FrameNo(*fr))),
        "{:?} ⊄ {:?}",
        frames,
        d.frames
    );
    assert_eq!(d.delay_ns, at(1016.886).0 - at(0.0).0);
    assert_eq!(d.gaps_ns, vec![at(1016.801).0 - at(0.0).0]);
    assert_eq!(d.start_ns, at(0.0).0);
    assert_eq!(d.end_ns, at(1016.986).0);
    let e = &d.evidence;
    assert_eq!(e.delay_ms, 1016.886);
    assert_eq!(e.syn_count, 2);
    assert!(e.connected);
    assert_eq!(e.gaps_ms, vec![1016.801]);
    assert_eq!(e.rto_ms, Some(1016.801));
    assert!(e.ladder.contains("1 s initial RTO"), "{}", e.ladder);
    assert_eq!(d.ladder_short, "1 s initial RTO, Linux / RFC 6298");
    assert_eq!(e.service, "198.51.100.10:8080");
    assert_eq!(d.client, "192.0.2.10:41001");
    assert_eq!(d.flow.as_ref().map(|r| r.client_port), Some(41001));
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
    assert!(c.diagnose().is_empty());
}

#[test]
fn refused_connection_is_not_flagged_but_refused_after_retries_is() {
    let mut c = Cap::new();
    c.flow(0, 40005, "198.51.100.10", 8081);
    c.seg(0, C2S, 0.0, SYN, CISN, 0, None);
    c.seg(0, S2C, 0.05, RSTACK, 0, CISN.wrapping_add(1), None);
    assert!(c.diagnose().is_empty());

    c.flow(1, 40006, "198.51.100.10", 8081);
    c.seg(1, C2S, 10.0, SYN, 7, 0, None);
    c.seg(1, C2S, 1022.0, SYN, 7, 0, None);
    let rst = c.seg(1, S2C, 1022.1, RSTACK, 0, 8, None);
    let out = c.diagnose();
    assert_eq!(out.len(), 1);
    let d = &out[0];
    assert_eq!(d.severity, Severity::Warning);
    assert_eq!(d.outcome, Outcome::Refused);
    assert!(d.evidence.refused);
    assert!(!d.evidence.connected);
    assert!(d.frames.contains(&FrameNo(rst)));
    assert_eq!(d.evidence.delay_ms, 1012.1);
}

#[test]
fn never_answered_is_an_error_with_classic_ladder() {
    let mut c = Cap::new();
    c.connect(0, 43001, &[0.0, 1030.0, 3046.0, 7302.0], None);
    let out = c.diagnose();
    assert_eq!(out.len(), 1);
    let d = &out[0];
    assert_eq!(d.severity, Severity::Error);
    assert_eq!(d.outcome, Outcome::NeverAnswered);
    assert_eq!(d.synacks, None);
    let e = &d.evidence;
    assert!(!e.connected);
    assert!(!e.refused);
    assert_eq!(e.syn_count, 4);
    assert_eq!(e.delay_ms, 7302.0);
    assert_eq!(e.gaps_ms, vec![1030.0, 2016.0, 4256.0]);
    assert!(e.ladder.starts_with("Linux classic"), "{}", e.ladder);
    assert_eq!(d.ladder_short, "Linux classic backoff");
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
    let out = c.diagnose();
    assert_eq!(out.len(), 1);
    let d = &out[0];
    assert!(d.frames.contains(&FrameNo(retx)));
    assert_eq!(d.evidence.synack_retransmits, 1);
    assert_eq!(d.evidence.delay_ms, 1011.005);
    assert_eq!(d.synacks.map(|s| s.count), Some(2));
}

#[test]
fn new_isn_on_same_ports_is_a_new_attempt() {
    let mut c = Cap::new();
    c.flow(0, 40010, "198.51.100.10", 8080);
    c.seg(0, C2S, 0.0, SYN, 100, 0, None);
    c.seg(0, S2C, 0.05, RSTACK, 0, 101, None);
    c.seg(0, C2S, 1000.0, SYN, 900_000, 0, None);
    c.seg(0, S2C, 1000.05, SYNACK, SISN, 900_001, None);
    assert!(c.diagnose().is_empty());
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
    let out = c.diagnose();
    assert_eq!(out.len(), 2, "{out:?}");
    for d in &out {
        assert_eq!(d.shape, ServiceShape::ConntrackRace, "{d:?}");
        assert!(d.evidence.conntrack_race_shape);
        assert!(d.evidence.burst_drop_shape);
        assert_eq!(d.evidence.service_connections, 10);
        assert_eq!(d.evidence.service_delayed, 2);
        assert!(!d.evidence.dropped_between_capture_points);
    }
    // A majority delayed is not the race shape.
    let mut c = Cap::new();
    for i in 0..4u64 {
        c.connect(i, 30000 + i as u16, &[0.0, 1010.0], Some(1010.1));
    }
    c.connect(4, 31000, &[0.0], Some(0.05));
    let out = c.diagnose();
    assert_eq!(out.len(), 4);
    assert!(out
        .iter()
        .all(|d| !d.evidence.conntrack_race_shape && d.shape == ServiceShape::None));
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
    let out = c.diagnose();
    assert_eq!(out.len(), 1, "{out:?}");
    let d = &out[0];
    assert_eq!(d.stream, 8);
    assert_eq!(d.isn, 1424677299);
    let e = &d.evidence;
    assert_eq!(e.syn_count, 2);
    assert_eq!(e.duplicate_sightings, 2);
    assert_eq!(e.same_isn_streams, vec![9]);
    assert!(e.dropped_between_capture_points);
    assert_eq!(
        d.nat_view,
        Some(NatView {
            stream: StreamId(9),
            client: "192.0.2.10:10011".to_string()
        })
    );
    assert!(d.frames.contains(&FrameNo(nat)));
    // The span is this stream's own events, not the NAT view's.
    assert_eq!((d.start_ns, d.end_ns), (at(100.0).0, at(1098.1).0));
    // 9 connections (the NAT view counts once), 1 delayed by ~1 s: the race shape.
    assert_eq!(e.service_connections, 9);
    assert_eq!(e.service_delayed, 1);
    assert!(e.conntrack_race_shape);
    assert_eq!(d.shape, ServiceShape::ConntrackRace);
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
    let out = c.diagnose();
    assert_eq!(out.len(), 1);
    let d = &out[0];
    assert_eq!(d.severity, Severity::Warning);
    assert_eq!(d.outcome, Outcome::Connected);
    assert!(d.evidence.connected);
    assert_eq!(d.evidence.delay_ms, 1012.3);
    assert!(d.synack_not_captured);
    assert!(d.frames.contains(&FrameNo(ack)));
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
    assert!(c.diagnose().is_empty());
}

/// A loopback capture: 6 prompt connections to 127.0.0.1:7000 and one whose
/// first SYN is dropped (the listen-queue shape).
fn loopback_burst() -> Cap {
    let mut c = Cap::new();
    let lo = |c: &mut Cap, stream: u64, port: u16, syns: &[f64], ans: f64| {
        c.frame += 1;
        c.events.push(FlowEvent::FlowStarted(FlowStarted {
            stream: StreamId(stream),
            client: Endpoint {
                addr: "127.0.0.1".parse().unwrap(),
                port,
            },
            server: Endpoint {
                addr: "127.0.0.1".parse().unwrap(),
                port: 7000,
            },
            frame: FrameNo(c.frame),
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
    c
}

#[test]
fn loopback_burst_is_a_listen_queue_shape_not_conntrack() {
    let out = loopback_burst().diagnose();
    assert_eq!(out.len(), 1);
    let d = &out[0];
    assert!(!d.evidence.conntrack_race_shape);
    assert!(d.evidence.burst_drop_shape);
    assert_eq!(d.shape, ServiceShape::ListenQueue);
    assert_eq!(d.evidence.service_connections, 7);
    assert_eq!(d.evidence.service_delayed, 1);
}

// ---- Fixes from the public-corpus review (docs/corpus-findings.md) ----

#[test]
fn single_gap_is_one_gap_and_several_gaps_span_the_delay() {
    // ssh2.pcapng: "sent 2 times over 8001.6 ms 8002 ms apart" read badly
    // (the prose side is `render_summary_tells_span_only_for_several_gaps`).
    let mut c = Cap::new();
    c.connect(0, 43100, &[0.0, 1016.0], None);
    let out = c.diagnose();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].gaps_ns, vec![1016 * MS]);
    assert_eq!(out[0].delay_ns, 1016 * MS);
    let mut c = Cap::new();
    c.connect(0, 43101, &[0.0, 1016.0, 3032.0], None);
    let out = c.diagnose();
    assert_eq!(out[0].gaps_ns, vec![1016 * MS, 2016 * MS]);
    assert_eq!(out[0].delay_ns, 3032 * MS);
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
    let out = c.diagnose();
    assert_eq!(out.len(), 1, "{out:?}");
    let d = &out[0];
    assert_eq!(d.evidence.syn_count, 2);
    assert_eq!(d.evidence.syns_after_synack, 1);
    assert!(d.evidence.connected);
    assert_eq!(d.severity, Severity::Warning);
    assert!(d.frames.contains(&FrameNo(retx)));
    assert!(d.synack_lost_before_client);
    let synacks = d.synacks.expect("SYN/ACKs captured");
    assert_eq!(synacks.first_frame, sa);
    assert_eq!(synacks.first_after_syn_ns, at(41.8).0 - at(0.0).0);
    // The client learnt of the answer only with its handshake ACK.
    assert_eq!(d.evidence.delay_ms, 1043.5);
}

#[test]
fn synack_resent_but_never_acknowledged_is_not_a_connection() {
    // nDPI gnutella.pcap stream 0: SYN, SYN/ACK, then SYN/ACK re-sent for a
    // minute and a RST; the client never sent the handshake ACK.
    let mut c = Cap::new();
    c.flow(0, 50190, "198.51.100.10", 29545);
    c.seg(0, C2S, 0.0, SYN, CISN, 0, None);
    let sa = c.seg(0, S2C, 48.9, SYNACK, SISN, CISN.wrapping_add(1), None);
    c.seg(0, S2C, 7385.7, SYNACK, SISN, CISN.wrapping_add(1), None);
    c.seg(0, S2C, 21370.9, SYNACK, SISN, CISN.wrapping_add(1), None);
    let out = c.diagnose();
    assert_eq!(out.len(), 1, "{out:?}");
    let d = &out[0];
    assert!(!d.evidence.connected);
    assert!(d.evidence.synack_unacknowledged);
    assert_eq!(d.outcome, Outcome::SynackUnacknowledged);
    assert_eq!(d.severity, Severity::Error);
    assert!(!d.synack_lost_before_client);
    assert_eq!(
        d.synacks,
        Some(SynackTimes {
            first_frame: FrameNo(sa),
            first_after_syn_ns: at(48.9).0 - at(0.0).0,
            count: 3,
            span_ns: at(21370.9).0 - at(48.9).0,
        })
    );
    // Only SYN/ACKs were re-sent: the gaps are theirs.
    assert_eq!(d.evidence.syn_count, 1);
    assert_eq!(d.evidence.synack_retransmits, 2);
    assert_eq!(d.gaps_ns.len(), 2);
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
    let out = c.diagnose();
    assert_eq!(out.len(), 1);
    let d = &out[0];
    assert!(!d.evidence.conntrack_race_shape);
    assert!(!d.evidence.burst_drop_shape);
    assert_eq!(d.shape, ServiceShape::None);
    assert_eq!(d.evidence.service_connections, 13);
    assert_eq!(d.evidence.service_delayed, 1);
}

#[test]
fn three_second_ladder_first_retry_may_come_one_slow_tick_early() {
    // (gaps ms, expected ladder prefix): public-corpus Windows XP / BSD gaps.
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
        let g: Vec<i64> = gaps.iter().map(|x| x * MS).collect();
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
    let out = c.diagnose();
    assert_eq!(out.len(), 6);
    for d in &out {
        assert_eq!(d.severity, Severity::Info, "{d:?}");
        assert_eq!(d.info_reason, Some(InfoReason::Sweep));
        assert_eq!(d.outcome, Outcome::NeverAnswered);
        assert_eq!(d.evidence.client_failed_services, 6);
    }
    // Fewer services (ssh2.pcapng: 2 unreachable servers) stay errors.
    let mut c = Cap::new();
    c.connect(0, 43001, &[0.0, 1030.0, 3046.0], None);
    c.connect(1, 43002, &[0.0, 1030.0, 3046.0], None);
    let out = c.diagnose();
    assert_eq!(out.len(), 2);
    assert!(out
        .iter()
        .all(|d| d.severity == Severity::Error && d.info_reason.is_none()));
    // Both go to one service: one failed service for this client.
    assert!(out.iter().all(|d| d.evidence.client_failed_services == 1));
}

#[test]
fn sub_200ms_syn_retries_are_a_tool_not_a_kernel_timer() {
    // activeosfingerprinting.pcapng: nmap repeats probes every ~175 ms.
    let mut c = Cap::new();
    c.connect(0, 53951, &[0.0, 175.0, 350.0, 525.0], None);
    let out = c.diagnose();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].severity, Severity::Info);
    assert_eq!(out[0].info_reason, Some(InfoReason::RawSocketTool));
    // The same retries answered in the end are an ordinary delayed setup.
    let mut c = Cap::new();
    c.connect(0, 53951, &[0.0, 175.0, 350.0], Some(400.0));
    let out = c.diagnose();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].severity, Severity::Warning);
    assert_eq!(out[0].info_reason, None);
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
    let out = c.diagnose();
    assert_eq!(out.len(), 1);
    let d = &out[0];
    assert!(d.evidence.connected);
    assert!(!d.evidence.synack_unacknowledged);
    assert_eq!(d.outcome, Outcome::Connected);
    assert_eq!(d.severity, Severity::Warning);
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
    let out = c.diagnose();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].evidence.delay_ms, 2067.0);
    assert_eq!(out[0].delay_ns, 2067 * MS);
    assert_eq!(out[0].outcome, Outcome::Connected);
}

#[test]
fn capture_that_began_mid_ladder_names_the_ladder_and_the_missed_syns() {
    // ssh2.pcapng streams 1-3 / ocs.pcap stream 0: two SYNs 8 s apart, the
    // first within half a second of the capture's start: rung 4 of the
    // classic ladder (1+2+4 s of SYNs happened before the capture began).
    let mut c = Cap::new();
    c.connect(0, 57361, &[450.0, 8451.6], None);
    let out = c.diagnose();
    assert_eq!(out.len(), 1);
    let l = &out[0].evidence.ladder;
    assert!(
        l.starts_with("Linux classic") && l.contains("joined at retry 3"),
        "{l}"
    );
    let short = &out[0].ladder_short;
    assert!(
        short.contains("capture began ~7 s after the first SYN"),
        "{short}"
    );
    // The same gap long after the capture began is no ladder we know.
    let mut c = Cap::new();
    c.connect(0, 40000, &[0.0], Some(0.1));
    c.connect(1, 57361, &[60_000.0, 68_001.6], None);
    let out = c.diagnose();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].evidence.ladder, "unrecognised");
    assert_eq!(out[0].ladder_short, "an unrecognised retry schedule");
    // Direct table: (gaps ms, ms since capture start, expected prefix or None).
    let table: &[(&[i64], i64, Option<&str>)] = &[
        (&[8002], 450, Some("Linux classic")),
        (&[6009, 12020], 100, Some("3 s initial RTO doubling")),
        (&[5500], 100, None),
        (&[], 0, None),
    ];
    for (gaps, since, want) in table {
        let g: Vec<i64> = gaps.iter().map(|x| x * MS).collect();
        let got = ladder_joined(&g, since * MS).map(|x| x.0);
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
    let gaps_ms = [
        1030.0, 1001.0, 1004.0, 1002.0, 1004.0, 2014.0, 4061.0, 8034.0, 16039.0, 32216.0,
    ];
    let espn: Vec<i64> = gaps_ms.iter().map(|&g| g as i64 * MS).collect();
    let (label, short) = ladder_for(&espn);
    assert!(label.starts_with("XNU/macOS tcp_syn_backoff"), "{label}");
    assert!(!label.contains("Linux tcp_syn_linear"), "{label}");
    assert_eq!(short, "XNU/macOS tcp_syn_backoff");
    // 8 SYNs (0..5, 7, 11 s): already more than a default Linux sends.
    let eight: Vec<i64> = [1000, 1000, 1000, 1000, 1000, 2000, 4000]
        .iter()
        .map(|&g| g * MS)
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
    assert!(ladder_for(&[MS * 1000, MS * 2000, MS * 4000, MS * 8000])
        .0
        .starts_with("Linux classic"));
    assert!(ladder_for(&[MS * 2950, MS * 6000])
        .0
        .starts_with("3 s initial RTO"));
    // A capture joining the XNU ladder late counts the missed SYNs too:
    // 4 missed + 7 captured = 11 SYNs.
    let late = &espn[4..];
    let (label, _) = ladder_joined(late, 0).expect("joined ladder");
    assert!(label.starts_with("XNU/macOS"), "{label}");
    // Through the detector: the ladder names macOS.
    let mut c = Cap::new();
    let mut t = 0.0;
    let mut syns = vec![t];
    for g in gaps_ms {
        t += g;
        syns.push(t);
    }
    c.connect(0, 64862, &syns, None);
    let out = c.diagnose();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].ladder_short, "XNU/macOS tcp_syn_backoff");
    assert_eq!(out[0].evidence.syn_count, 11);
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
    let out = c.diagnose();
    assert_eq!(out.len(), 1, "{out:?}");
    let d = &out[0];
    assert_eq!(d.evidence.syn_count, 2);
    assert_eq!(d.evidence.synack_retransmits, 1);
    assert_eq!(d.evidence.duplicate_sightings, 0);
    assert_eq!(d.evidence.syns_after_synack, 1);
    assert!(d.evidence.connected);
    assert_eq!(d.severity, Severity::Warning);

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
    assert!(c.diagnose().is_empty());

    // The same non-zero IP ID is no proof of a copy: chrissanders
    // `nowebaccess3.pcapng` stream 0 re-sends its SYN after 1 s with ID 0x178a
    // (and a copy of the first 5 ms later).
    let mut c = Cap::new();
    c.flow(0, 50000, "198.51.100.10", 80);
    for ms in [0.0, 5.0, 1002.1] {
        c.seg(0, C2S, ms, SYN, CISN, 0, None);
        c.ip_id(0x178a);
    }
    let out = c.diagnose();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].evidence.syn_count, 2);
    assert_eq!(out[0].evidence.duplicate_sightings, 1);

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
    assert!(c.diagnose().is_empty());

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
        let out = c.diagnose();
        assert_eq!(out.len(), 1, "{id:?}");
        assert_eq!(out[0].evidence.syn_count, 2, "{id:?}");
        assert_eq!(out[0].evidence.duplicate_sightings, 1, "{id:?}");
    }
}

// ---- Rendering: the prose and the evidence JSON ----

#[test]
fn render_connected_finding_and_its_evidence_json() {
    let mut c = Cap::new();
    c.connect(0, 41001, &[0.0, 1016.801], Some(1016.886));
    let out = c.run();
    assert_eq!(out.len(), 1, "{out:?}");
    let f = &out[0];
    assert_eq!(f.detector, ID);
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.tcp_stream, Some(0));
    assert_eq!(f.stream_filter.as_deref(), Some("tcp.stream eq 0"));
    assert_eq!(f.frames, vec![1, 2, 3, 4]); // SYN, SYN, SYN/ACK, handshake ACK
    assert_eq!(f.flow.as_ref().map(|r| r.client_port), Some(41001));
    assert_eq!(
        f.summary,
        "Connection 192.0.2.10:41001 -> 198.51.100.10:8080 was set up 1016.9 ms late: the SYN was sent 2 times 1017 ms apart (1 s initial RTO, Linux / RFC 6298), so the first SYN or its SYN/ACK was lost."
    );
    assert!(f
        .remedy
        .starts_with("Find where the SYN or SYN/ACK is dropped"));
    // Keys, order and values of the evidence object are the report contract.
    assert_eq!(
        serde_json::to_string(&f.evidence).unwrap(),
        concat!(
            r#"{"delay_ms":1016.886,"syn_count":2,"synack_retransmits":0,"gaps_ms":[1016.801],"#,
            r#""rto_ms":1016.801,"ladder":"Linux / RFC 6298 1 s initial RTO (classic or linear: too few retries to tell)","#,
            r#""connected":true,"synack_unacknowledged":false,"syns_after_synack":0,"client_failed_services":0,"#,
            r#""refused":false,"duplicate_sightings":0,"service":"198.51.100.10:8080","service_connections":1,"#,
            r#""service_delayed":1,"conntrack_race_shape":false,"burst_drop_shape":false,"same_isn_streams":[],"#,
            r#""dropped_between_capture_points":false}"#
        )
    );
    // An unknown first RTO stays in the object as null.
    let mut d = c.diagnose().remove(0);
    d.evidence.rto_ms = None;
    let f = render::render(&d);
    assert_eq!(f.evidence.get("rto_ms"), Some(&serde_json::Value::Null));
    assert_eq!(f.evidence.len(), 19);
}

#[test]
fn render_summary_tells_span_only_for_several_gaps() {
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
fn render_names_each_diagnosis_in_the_summary_and_remedy() {
    // Diagnosed captures of the tests above, and the prose their findings carry.
    let mut race = Cap::new();
    for i in 0..8u64 {
        let t = i as f64 * 10.0;
        race.connect(i, 30000 + i as u16, &[t], Some(t + 0.05));
    }
    race.connect(8, 31000, &[100.0, 1110.0], Some(1110.1));
    race.connect(9, 31001, &[200.0, 1210.0, 3215.0], Some(3215.1));
    let mut unacked = Cap::new();
    unacked.flow(0, 50190, "198.51.100.10", 29545);
    unacked.seg(0, C2S, 0.0, SYN, CISN, 0, None);
    for t in [48.9, 7385.7, 21370.9] {
        unacked.seg(0, S2C, t, SYNACK, SISN, CISN.wrapping_add(1), None);
    }
    let mut lost_synack = Cap::new();
    lost_synack.flow(0, 64731, "198.51.100.10", 443);
    lost_synack.seg(0, C2S, 0.0, SYN, CISN, 0, None);
    lost_synack.seg(0, S2C, 41.8, SYNACK, SISN, CISN.wrapping_add(1), None);
    lost_synack.seg(0, C2S, 997.7, SYN, CISN, 0, None);
    let mut sweep = Cap::new();
    for i in 0..6u64 {
        sweep.flow(i, 3685 + i as u16, &format!("203.0.113.{}", i + 1), 6346);
        for t in [0.0, 2916.0, 8916.0] {
            sweep.seg(i, C2S, t, SYN, 1000 + i as u32, 0, None);
        }
    }
    let mut tool = Cap::new();
    tool.connect(0, 53951, &[0.0, 175.0, 350.0, 525.0], None);
    let mut mid_ladder = Cap::new();
    mid_ladder.connect(0, 57361, &[450.0, 8451.6], None);
    let mut refused = Cap::new();
    refused.flow(0, 40006, "198.51.100.10", 8081);
    refused.seg(0, C2S, 10.0, SYN, 7, 0, None);
    refused.seg(0, C2S, 1022.0, SYN, 7, 0, None);
    refused.seg(0, S2C, 1022.1, RSTACK, 0, 8, None);
    // (name, capture, in the summary, not in the summary, in the remedy)
    type Case = (
        &'static str,
        Cap,
        &'static [&'static str],
        &'static [&'static str],
        &'static str,
    );
    let table: Vec<Case> = vec![
        (
            "race",
            race,
            &[
                "2 of 10 connections to 198.51.100.10:8080",
                "conntrack insert race",
            ],
            &["listen queue;"],
            "--random-fully",
        ),
        (
            "loopback",
            loopback_burst(),
            &["on this host-local path (no NAT) that is the shape of a full listen queue"],
            &["conntrack"],
            "Raise the server's listen backlog",
        ),
        (
            "unacked",
            unacked,
            &[
                "never completed its handshake",
                "sent its SYN/ACK 3 times over 21322.0 ms",
            ],
            &["set up"],
            "Capture on the client host itself",
        ),
        (
            "lost synack",
            lost_synack,
            &["A SYN/ACK (frame 2) was captured 41.8 ms after the first SYN"],
            &[],
            "Find where the SYN",
        ),
        (
            "sweep",
            sweep,
            &["failed to reach 6 different services", "sweep"],
            &[],
            "Check that the server is reachable",
        ),
        (
            "tool",
            tool,
            &["raw-socket tool"],
            &["sweep"],
            "Check that the server is reachable",
        ),
        (
            "mid-ladder",
            mid_ladder,
            &[
                "was never answered",
                "the capture began ~7 s after the first SYN",
            ],
            &[],
            "Check that the server is reachable",
        ),
        (
            "refused",
            refused,
            &["was refused (RST) only after the SYN was sent 2 times 1012 ms apart"],
            &[],
            "Find where the SYN",
        ),
    ];
    for (name, cap, has, lacks, remedy) in table {
        let out = cap.run();
        assert!(!out.is_empty(), "{name}");
        for f in &out {
            for want in has {
                assert!(
                    f.summary.contains(want),
                    "{name}: {want:?} not in {}",
                    f.summary
                );
            }
            for not in lacks {
                assert!(!f.summary.contains(not), "{name}: {not:?} in {}", f.summary);
            }
            assert!(f.remedy.contains(remedy), "{name}: {}", f.remedy);
        }
    }
}

#[test]
fn render_tells_the_nat_view_and_the_missing_synack() {
    let mut c = Cap::new();
    for i in 0..8u64 {
        let t = i as f64 * 10.0;
        c.connect(i, 30000 + i as u16, &[t], Some(t + 0.05));
    }
    c.flow(8, 38050, "198.51.100.10", 8080);
    c.seg(8, C2S, 100.0, SYN, 1424677299, 0, None);
    c.seg(8, C2S, 1097.872, SYN, 1424677299, 0, None);
    c.flow(9, 10011, "198.51.100.10", 8080);
    c.seg(9, C2S, 1097.924, SYN, 1424677299, 0, None);
    c.seg(8, C2S, 1098.1, ACK, 1424677300, SISN.wrapping_add(1), None);
    let out = c.run();
    assert_eq!(out.len(), 1, "{out:?}");
    let s = &out[0].summary;
    assert!(
        s.contains("The same SYN (ISN 1424677299) appears as 192.0.2.10:10011 (tcp.stream 9) only from the retry on"),
        "{s}"
    );
    assert!(
        s.contains("(The SYN/ACK is not in this capture; the client's ACK shows it arrived.)"),
        "{s}"
    );
    // The finding keeps naming its own stream only (no `streams` array).
    assert_eq!(out[0].tcp_stream, Some(8));
    assert!(out[0].streams.is_empty());
}

/// The finish context of a capture whose interface 0 stopped at `if0_end_ms`
/// while the capture as a whole ran to `end_ms`.
fn ended(ctx: &mut FinishContext, if0_end_ms: f64, end_ms: f64) {
    ctx.span = Some(pcapsleuth_detect::CaptureSpan {
        first: at(0.0),
        last: at(end_ms),
        earliest: at(0.0),
        latest: at(end_ms),
    });
    ctx.interfaces = vec![pcapsleuth_detect::InterfaceContext {
        id: InterfaceId(0),
        name: None,
        linktype: 1,
        first_ts: Some(at(0.0)),
        last_ts: Some(at(if0_end_ms)),
        frames: 2,
        if_drops: None,
    }];
}

#[test]
fn syn_unanswered_when_the_capture_ended_before_the_next_retry_is_censored_info() {
    // `head -c 5000 fixtures/captures/syn-drops.pcap`: two SYNs 1020 ms
    // apart, the capture ends ~100 ms later, long before the 2 s retry.
    let mut c = Cap::new();
    c.connect(0, 42001, &[0.0, 1020.0], None);
    let (d, mut ctx) = c.feed();
    ended(&mut ctx, 1120.0, 1120.0);
    let out = d.diagnose(&ctx);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].severity, Severity::Info);
    assert_eq!(out[0].outcome, Outcome::StillUnanswered);
    assert_eq!(out[0].evidence.capture_end_after_last_syn_ms, Some(100.0));
    assert_eq!(out[0].evidence.next_retry_due_ms, Some(2000.0));
    let f = render::render(&out[0]);
    assert!(
        f.summary
            .contains("still unanswered when the capture ended 100.0 ms after the last SYN"),
        "{}",
        f.summary
    );

    // The interface the SYNs were seen on stopped early while another went
    // on: its own end counts.
    ended(&mut ctx, 1120.0, 60_000.0);
    let out = d.diagnose(&ctx);
    assert_eq!(out[0].outcome, Outcome::StillUnanswered);

    // The retry was overdue (the capture ran 3 s past the last SYN): concluded.
    ended(&mut ctx, 4020.0, 4020.0);
    let out = d.diagnose(&ctx);
    assert_eq!(out[0].severity, Severity::Error);
    assert_eq!(out[0].outcome, Outcome::NeverAnswered);
    assert_eq!(out[0].evidence.capture_end_after_last_syn_ms, None);
    let json = serde_json::to_value(&out[0].evidence).unwrap();
    assert!(json.get("capture_end_after_last_syn_ms").is_none());
}

#[test]
fn joined_ladder_next_retry_is_its_next_rung() {
    // ja4 `ssh2.pcapng`: SYNs 8002 ms apart, the capture began ~7 s after the
    // first SYN (classic backoff joined at retry 3): the next retry is 16 s
    // away, so a capture ending 250 ms after the last SYN is censored.
    assert_eq!(ladder::next_wait_ns(&[8_002 * MS], 100 * MS), 16_000 * MS);
    // Too few rungs to tell classic (2 s next) from linear (1 s next): the longest.
    assert_eq!(ladder::next_wait_ns(&[1_020 * MS], 0), 2_000 * MS);
    // Unrecognised: the last gap.
    assert_eq!(ladder::next_wait_ns(&[1_500 * MS], 60_000 * MS), 1_500 * MS);
    assert_eq!(ladder::next_wait_ns(&[], 0), 1_000 * MS);
}

/// A capture with a delayed connection (stream 0), its NAT view showing
/// only the retry (stream 8, one SYN), one-SYN attempts of the same client
/// to six other services (streams 1–6) and an answered one (stream 7).
fn mixed_capture() -> Cap {
    let mut c = Cap::new();
    c.connect(0, 41000, &[0.0, 1016.801], Some(1016.886));
    for s in 1..=6u64 {
        c.flow(s, 41000 + s as u16, "203.0.113.7", 9000 + s as u16);
        let isn = 77 + s as u32;
        c.seg(s, C2S, 10.0 * s as f64, SYN, isn, 0, None);
    }
    c.connect(7, 41007, &[100.0], Some(100.2));
    c.flow(8, 45000, "198.51.100.10", 8080);
    c.seg(8, C2S, 1016.85, SYN, CISN, 0, None);
    c
}

/// `events` with the `FlowEnded` of every stream after its last event.
fn with_flow_ends(events: &[FlowEvent]) -> Vec<FlowEvent> {
    let stream_of = |e: &FlowEvent| match e {
        FlowEvent::FlowStarted(f) => Some(f.stream),
        FlowEvent::Segment(s) => Some(s.stream),
        _ => None,
    };
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        out.push(*e);
        if let Some(s) = stream_of(e) {
            if !events[i + 1..].iter().any(|l| stream_of(l) == Some(s)) {
                out.push(pcapsleuth_detect::synth::flow_ended(s, 0, at(0.0)));
            }
        }
    }
    out
}

#[test]
fn flow_ended_changes_no_diagnosis() {
    let c = mixed_capture();
    let want = c.diagnose();
    assert_eq!(want.len(), 1, "{want:?}");
    assert_eq!(want[0].evidence.client_failed_services, 7);
    assert_eq!(want[0].evidence.same_isn_streams, vec![StreamId(8)]);
    let (d, ctx) = c.feed();
    assert_eq!(d.live_streams(), 9);
    let ended = Cap {
        events: with_flow_ends(&c.events),
        frame: c.frame,
    };
    let (d2, _) = ended.feed();
    assert_eq!(
        format!("{:?}", d2.diagnose(&ctx)),
        format!("{:?}", d.diagnose(&ctx))
    );
}

#[test]
fn a_syn_re_sent_after_flow_ended_is_still_a_retry() {
    // suricata-verify tls-subjectaltname stream 1: SYN, a bare ACK, the
    // client's RST (the flow table retires the stream 10 s later), the
    // same SYN 13 s on, answered.
    let mut c = Cap::new();
    c.flow(0, 59622, "198.51.100.10", 443);
    c.seg(0, C2S, 0.0, SYN, CISN, 0, None);
    c.seg(0, S2C, 18.0, ACK, SISN, CISN.wrapping_add(1), None);
    c.seg(0, C2S, 18.4, TcpFlags::RST, CISN.wrapping_add(1), 0, None);
    c.events.push(pcapsleuth_detect::synth::flow_ended(
        StreamId(0),
        3,
        at(18.4),
    ));
    c.seg(0, C2S, 13098.3, SYN, CISN, 0, None);
    c.seg(0, S2C, 13116.4, SYNACK, SISN, CISN.wrapping_add(1), None);
    c.seg(
        0,
        C2S,
        13116.6,
        ACK,
        CISN.wrapping_add(1),
        SISN.wrapping_add(1),
        None,
    );
    let out = c.diagnose();
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].evidence.syn_count, 2);
    assert!(out[0].evidence.connected);
}

#[test]
fn a_one_syn_stream_costs_24_bytes() {
    let mut d = SynRetransmit::default();
    let n = 10_000u64;
    for i in 0..n {
        for e in pcapsleuth_detect::synth::syn_only(i, i + 1, at(i as f64)) {
            d.on_flow_event(&e);
        }
    }
    assert_eq!(d.live_streams(), n as usize);
    let per = d.state_bytes() as f64 / n as f64;
    println!("syn-retransmit: {per:.1} bytes per one-SYN stream");
    assert!(per <= 24.0 * 1.25, "{per}");
}

#[test]
fn a_handshake_completed_at_once_costs_96_bytes() {
    let mut c = Cap::new();
    let n = 2_000u64;
    for i in 0..n {
        c.connect(i, 20000 + i as u16, &[i as f64], Some(i as f64 + 0.05));
    }
    let (d, ctx) = c.feed();
    assert_eq!(d.live_streams(), n as usize);
    assert_eq!((d.done.len(), d.attempts.len()), (n as usize, 0));
    let per = d.state_bytes() as f64 / n as f64;
    println!("syn-retransmit: {per:.1} bytes per completed handshake");
    // A 24-byte slot and a 72-byte `Done`, tables grown by a quarter at most.
    assert!(per <= 96.0 * 1.25, "{per}");
    // Each is still a connection of its service at the end.
    let all = d.attempts_for(&ctx);
    assert_eq!(all.len(), n as usize);
    assert!(all.iter().all(|a| a.connected() && a.synacks.len() == 1));
}

#[test]
fn a_synack_resent_after_a_compact_handshake_expands_it() {
    let mut c = Cap::new();
    c.connect(0, 40000, &[0.0], Some(0.05));
    c.connect(1, 40001, &[10.0], Some(10.05));
    c.seg(0, S2C, 1000.0, SYNACK, SISN, CISN.wrapping_add(1), None);
    let (d, ctx) = c.feed();
    assert_eq!((d.done.len(), d.attempts.len()), (2, 1));
    let all = d.attempts_for(&ctx);
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].stream, StreamId(0));
    assert_eq!((all[0].synacks.len(), all[0].synack_retransmits), (2, 1));
    assert_eq!(all[0].synack_retx_pre_ack, 0);
    assert_eq!((all[1].synacks.len(), all[1].synack_retransmits), (1, 0));
}
