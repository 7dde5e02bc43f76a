//! Table tests of the missing-zero-window detector on synthesized flow events
//! shaped like seed 003 (sender 1448 B every 1 ms, receiver at tcp_rmem max).
//! They assert the diagnosis; the last tests check the rendered finding.

use pcapsleuth_core::Direction;
use pcapsleuth_core::FrameNo;
use pcapsleuth_detect::synth::*;
use pcapsleuth_detect::Severity;
use pcapsleuth_detect::{Detector, DetectorInfo, Finding, FinishContext, FlowEvent, PacketContext};
use pcapsleuth_missing_zero_window::{render, Diagnosis, MissingZeroWindow, Proof, Role};

/// Runs the detector under [`Script::run`] (which also feeds the packets
/// carrying TTLs) and keeps its diagnoses instead of rendering them.
#[derive(Default)]
struct Diagnoser {
    inner: MissingZeroWindow,
    out: Vec<Diagnosis>,
    /// Live streams right after a `FlowEnded`, if one came.
    after_end: Option<usize>,
}

impl Detector for Diagnoser {
    fn info(&self) -> DetectorInfo {
        self.inner.info()
    }
    fn on_flow_event(&mut self, event: &FlowEvent) {
        self.inner.on_flow_event(event);
        if matches!(event, FlowEvent::FlowEnded(_)) {
            self.after_end = Some(self.inner.active_streams());
        }
    }
    fn on_packet(&mut self, pkt: &PacketContext<'_>) {
        self.inner.on_packet(pkt);
    }
    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        self.out = self.inner.diagnose(ctx);
        Vec::new()
    }
}

/// The diagnoses of a fresh detector fed `s`.
fn diagnose(s: &Script) -> Vec<Diagnosis> {
    let mut d = Diagnoser::default();
    s.run(&mut d);
    d.out
}

#[derive(Clone, Copy)]
struct Case {
    /// Segments acknowledged before the drop.
    bulk: i64,
    /// Payload of the bulk segments.
    bulk_len: u32,
    /// Gaps (ms) between transmissions of the stuck segment.
    gaps: &'static [f64],
    /// Receiver answers each retransmission: None = silent, Some(w) = dup ACK with window w.
    answer: Option<u64>,
    ttl: Option<[u8; 2]>,
}

const LADDER: &[f64] = &[300.0, 400.0, 800.0, 1600.0, 3200.0];

/// Returns (script, last ACK before the drop, first retransmission frames).
fn build(c: Case) -> (Script, u64, Vec<u64>) {
    let mut s = Script::new();
    s.ttl = c.ttl;
    let mut t = 0.0;
    let mut seq = 1i64;
    let mut last_ack = 0;
    for _ in 0..c.bulk {
        s.seg(S2C, t, seq, c.bulk_len, 1, 65280);
        seq += i64::from(c.bulk_len);
        last_ack = s.seg(C2S, t + 0.3, 1, 0, seq, 32768);
        t += 1.0;
    }
    let stuck = seq;
    s.seg(S2C, t, stuck, 1448, 1, 65280);
    for k in 1..5 {
        s.seg(S2C, t + k as f64, stuck + 1448 * k, 1448, 1, 65280);
    }
    let mut retx = Vec::new();
    for g in c.gaps {
        t += g;
        retx.push(s.seg(S2C, t, stuck, 1448, 1, 65280));
        s.last_mut().analysis.retransmission = true;
        if let Some(w) = c.answer {
            s.seg(C2S, t + 0.2, 1, 0, stuck, w);
        }
    }
    (s, last_ack, retx)
}

fn base() -> Case {
    Case {
        bulk: 200,
        bulk_len: 1448,
        gaps: LADDER,
        answer: None,
        ttl: Some([64, 64]),
    }
}

#[test]
fn silent_drop_seen_on_the_receivers_link_is_an_error() {
    let (s, last_ack, retx) = build(base());
    let d = diagnose(&s);
    assert_eq!(d.len(), 1, "{d:#?}");
    let d = &d[0];
    assert_eq!(d.severity, Severity::Error);
    assert_eq!(d.data_dir, Direction::ServerToClient);
    assert_eq!(d.proof, Proof::CapturedOnReceiverLink);
    assert!(
        d.frames.contains(&FrameNo(last_ack)),
        "last ACK before the drop cited"
    );
    assert!(
        retx.iter().all(|r| d.frames.contains(&FrameNo(*r))),
        "every retransmission cited"
    );
    let e = &d.evidence;
    assert_eq!(e.receiver.role, Role::Client);
    assert_eq!(e.receiver.to_string(), "client 192.0.2.10:40000");
    assert_eq!(e.sender.to_string(), "server 198.51.100.10:80");
    assert_eq!(e.stuck_ack, 1 + 200 * 1448);
    assert_eq!(e.segment_bytes, 1448);
    assert_eq!(e.retransmissions, 5);
    assert_eq!(e.windows_advertised, [32768]);
    assert_eq!(e.window_at_drop_bytes, 32768);
    assert!(e.capture_on_receiver_link);
    assert!(!e.capture_at_receiver);
    assert_eq!(e.receiver_answers_open_window, 0);
    assert_eq!(e.rto_ladder_ms, [300.0, 400.0, 800.0, 1600.0, 3200.0]);
    assert_eq!(e.backoff_doublings, 3);
    assert!((e.duration_ms - 6300.0).abs() < 0.01, "{}", e.duration_ms);
    assert_eq!(e.largest_acked_payload, 1448);
    assert!(!e.acknowledged_later);
    assert!(!e.zero_window_seen);
    assert_eq!(d.start_ns, at(199.3).0);
}

#[test]
fn duplicate_acks_with_open_window_are_enough_without_vantage() {
    let (s, _, _) = build(Case {
        answer: Some(32768),
        ttl: Some([61, 58]),
        ..base()
    });
    let d = diagnose(&s);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].proof, Proof::DuplicateAcks);
    assert_eq!(d[0].evidence.receiver_answers_open_window, 5);
    assert!(!d[0].evidence.capture_on_receiver_link);
    assert_eq!(d[0].evidence.receiver_ttl, Some(61));
    assert_eq!(d[0].evidence.sender_ttl, Some(58));
    assert_eq!(d[0].severity, Severity::Error);
}

/// Each case must stay silent, with the reason.
#[test]
fn look_alikes_are_not_flagged() {
    let table: &[(&str, Case)] = &[
        (
            "unanswered and seen from afar (dead peer looks the same)",
            Case {
                ttl: Some([62, 64]),
                ..base()
            },
        ),
        (
            "unanswered, seen at the receiver end but with zero window answers",
            Case {
                ttl: Some([64, 62]),
                answer: Some(0),
                ..base()
            },
        ),
        (
            "no TTL known, unanswered",
            Case {
                ttl: None,
                ..base()
            },
        ),
        (
            "receiver answers with window 0: ordinary zero-window (kernel >= 6.5)",
            Case {
                answer: Some(0),
                ..base()
            },
        ),
        (
            "single fast retransmission ~20 ms later (iptables-simulated loss)",
            Case {
                gaps: &[20.0],
                ..base()
            },
        ),
        (
            "retransmissions without backoff",
            Case {
                gaps: &[200.0, 200.0, 200.0, 200.0],
                ..base()
            },
        ),
        (
            "only small segments ever acked: MSS black hole, not this",
            Case {
                bulk_len: 100,
                bulk: 2000,
                answer: Some(32768),
                ..base()
            },
        ),
        (
            "too little data taken in to fill a receive buffer",
            Case {
                bulk: 10,
                answer: Some(32768),
                ..base()
            },
        ),
    ];
    for (why, c) in table {
        let (s, _, _) = build(*c);
        let d = diagnose(&s);
        assert!(d.is_empty(), "{why}: {d:#?}");
    }
}

#[test]
fn window_smaller_than_the_segment_is_not_an_open_window() {
    let mut c = base();
    c.answer = Some(1024);
    let (mut s, _, _) = build(c);
    // Make the last ACK before the drop advertise less than a segment.
    for ev in s.events.iter_mut() {
        if let pcapsleuth_flow::FlowEvent::Segment(seg) = ev {
            if seg.dir == C2S {
                seg.window_bytes = Some(1024);
                seg.window_raw = 8;
            }
        }
    }
    assert!(diagnose(&s).is_empty());
}

#[test]
fn vantage_at_the_receivers_end_is_reported() {
    // Receiver (client) packets unrouted, sender's decremented: captured at the receiver.
    let (s, _, _) = build(Case {
        ttl: Some([64, 62]),
        ..base()
    });
    let d = diagnose(&s);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].proof, Proof::CapturedAtReceiver);
    assert!(d[0].evidence.capture_at_receiver);
    assert_eq!(d[0].evidence.receiver_ttl, Some(64));
    assert_eq!(d[0].evidence.sender_ttl, Some(62));
}

#[test]
fn tiny_writes_fill_the_buffer_by_count() {
    // Seed 003's "reader never reads": 4-byte writes, thousands acknowledged.
    let mut s = Script::new();
    let mut seq = 1i64;
    let mut t = 0.0;
    for _ in 0..1200 {
        s.seg(S2C, t, seq, 4, 1, 65280);
        seq += 4;
        s.seg(C2S, t + 0.2, 1, 0, seq, 65536);
        t += 1.0;
    }
    s.seg(S2C, t, seq, 4, 1, 65280);
    for g in LADDER {
        t += g;
        s.seg(S2C, t, seq, 4, 1, 65280);
        s.seg(C2S, t + 0.2, 1, 0, seq, 65536);
    }
    let d = diagnose(&s);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].evidence.segment_bytes, 4);
    assert_eq!(d[0].proof, Proof::DuplicateAcks);
}

#[test]
fn rendered_finding_carries_the_diagnosis() {
    let (s, _, _) = build(base());
    let d = diagnose(&s);
    let f = render(&d[0]);
    assert_eq!(f.detector, "missing-zero-window");
    assert_eq!(f.severity, Severity::Error);
    assert_eq!(f.tcp_stream, Some(0));
    assert_eq!((f.start_ts_ns, f.end_ts_ns), (d[0].start_ns, d[0].end_ns));
    let keys: Vec<&str> = f.evidence.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "receiver",
            "sender",
            "stuck_ack",
            "segment_bytes",
            "windows_advertised",
            "window_at_drop_bytes",
            "window_scale_known",
            "retransmissions",
            "rto_ladder_ms",
            "backoff_doublings",
            "duration_ms",
            "receiver_answers_open_window",
            "capture_at_receiver",
            "capture_on_receiver_link",
            "sender_ttl",
            "receiver_ttl",
            "largest_acked_payload",
            "acknowledged_later",
            "zero_window_seen"
        ]
    );
    assert_eq!(f.evidence["receiver"], "client 192.0.2.10:40000");
    assert_eq!(
        f.evidence["rto_ladder_ms"],
        serde_json::json!([300.0, 400.0, 800.0, 1600.0, 3200.0])
    );
    assert!(
        f.summary.contains("32768-byte window")
            && f.summary.contains("5 times")
            && f.summary.contains("300 … 3200 ms")
            && f.summary.contains("receiver's link"),
        "{}",
        f.summary
    );
    assert!(f.remedy.starts_with("On 192.0.2.10:40000:"), "{}", f.remedy);
}

#[test]
fn unknown_ttls_are_null_in_the_evidence() {
    let (s, _, _) = build(Case {
        answer: Some(32768),
        ttl: None,
        ..base()
    });
    let d = diagnose(&s);
    assert_eq!(d[0].evidence.sender_ttl, None);
    let f = render(&d[0]);
    assert!(f.evidence["sender_ttl"].is_null() && f.evidence["receiver_ttl"].is_null());
    assert_eq!(s.run(&mut MissingZeroWindow::default()), vec![f]);
}

/// A capture that ended at `end_ms`.
fn ended_at(s: &Script, end_ms: f64) -> FinishContext {
    let mut ctx = s.ctx();
    ctx.span = Some(pcapsleuth_detect::CaptureSpan {
        first: at(0.0),
        last: at(end_ms),
        earliest: at(0.0),
        latest: at(end_ms),
    });
    ctx
}

#[test]
fn episode_still_open_when_the_capture_ended_before_the_next_resend_is_censored() {
    let (s, _, _) = build(Case {
        answer: Some(32768),
        ..base()
    });
    let mut d = MissingZeroWindow::default();
    for ev in &s.events {
        d.on_flow_event(ev);
    }
    // Last re-send at 200 + 6300 ms; the next is due ~6400 ms later.
    let last_ms = 200.0 + LADDER.iter().sum::<f64>();
    let out = d.diagnose(&ended_at(&s, last_ms + 1000.5));
    assert_eq!(out.len(), 1, "{out:#?}");
    let e = &out[0].evidence;
    assert_eq!(e.open_at_capture_end_ms, Some(1000.5));
    assert_eq!(e.next_retransmission_due_ms, Some(6400.0));
    // The pathology is established by the ladder: still an error.
    assert_eq!(out[0].severity, Severity::Error);
    assert!(render(&out[0])
        .summary
        .contains("The capture ended 1000 ms after the last re-send"));

    // The capture ran past the next re-send: concluded, nothing added.
    let mut d = MissingZeroWindow::default();
    for ev in &s.events {
        d.on_flow_event(ev);
    }
    let out = d.diagnose(&ended_at(&s, last_ms + 20_000.0));
    assert_eq!(out[0].evidence.open_at_capture_end_ms, None);
    let json = serde_json::to_value(&out[0].evidence).unwrap();
    assert!(json.get("open_at_capture_end_ms").is_none());
}

#[test]
fn flow_ended_keeps_every_diagnosis_and_drops_the_state() {
    let unacked = Case {
        answer: Some(32768),
        ttl: None,
        ..base()
    };
    for c in [base(), unacked] {
        let (s, _, _) = build(c);
        let without = diagnose(&s);
        assert_eq!(without.len(), 1);
        let (mut ended, _, _) = build(c);
        ended.end_flow();
        let mut d = Diagnoser::default();
        ended.run(&mut d);
        assert_eq!(d.after_end, Some(0));
        assert_eq!(d.out, without);
    }
}

#[test]
fn a_stream_without_data_keeps_no_state() {
    let mut d = MissingZeroWindow::default();
    for i in 0..10_000u64 {
        for ev in syn_only(i, i + 1, at(i as f64)) {
            d.on_flow_event(&ev);
        }
    }
    assert_eq!(d.active_streams(), 0);
    assert_eq!(d.state_bytes(), 0);
    // Handshake and pure ACKs only: still nothing.
    let mut s = Script::new();
    s.seg(C2S, 0.0, 1, 0, 1, 65280);
    s.seg(S2C, 1.0, 1, 0, 1, 65280);
    for ev in &s.events {
        d.on_flow_event(ev);
    }
    assert_eq!(d.active_streams(), 0);
}
