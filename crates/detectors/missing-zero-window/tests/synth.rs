//! Table tests of the missing-zero-window detector on synthesized flow events
//! shaped like seed 003 (sender 1448 B every 1 ms, receiver at tcp_rmem max).

use pcapsleuth_detect::synth::*;
use pcapsleuth_detect::Severity;
use pcapsleuth_missing_zero_window::MissingZeroWindow;

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
    let f = s.run(&mut MissingZeroWindow::default());
    assert_eq!(f.len(), 1, "{f:#?}");
    let f = &f[0];
    assert_eq!(f.severity, Severity::Error);
    assert!(
        f.frames.contains(&last_ack),
        "last ACK before the drop cited"
    );
    assert!(
        retx.iter().all(|r| f.frames.contains(r)),
        "every retransmission cited"
    );
    assert_eq!(f.evidence["receiver"], "client 192.0.2.10:40000");
    assert_eq!(f.evidence["stuck_ack"], 1 + 200 * 1448);
    assert_eq!(f.evidence["retransmissions"], 5);
    assert_eq!(f.evidence["windows_advertised"], serde_json::json!([32768]));
    assert_eq!(f.evidence["capture_on_receiver_link"], true);
    assert_eq!(
        f.evidence["rto_ladder_ms"],
        serde_json::json!([300.0, 400.0, 800.0, 1600.0, 3200.0])
    );
    assert!(
        f.summary.contains("32768-byte window") && f.summary.contains("5 times"),
        "{}",
        f.summary
    );
}

#[test]
fn duplicate_acks_with_open_window_are_enough_without_vantage() {
    let (s, _, _) = build(Case {
        answer: Some(32768),
        ttl: Some([61, 58]),
        ..base()
    });
    let f = s.run(&mut MissingZeroWindow::default());
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].evidence["receiver_answers_open_window"], 5);
    assert_eq!(f[0].severity, Severity::Error);
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
        let f = s.run(&mut MissingZeroWindow::default());
        assert!(f.is_empty(), "{why}: {f:#?}");
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
    assert!(s.run(&mut MissingZeroWindow::default()).is_empty());
}

#[test]
fn vantage_at_the_receivers_end_is_reported() {
    // Receiver (client) packets unrouted, sender's decremented: captured at the receiver.
    let (s, _, _) = build(Case {
        ttl: Some([64, 62]),
        ..base()
    });
    let f = s.run(&mut MissingZeroWindow::default());
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].evidence["capture_at_receiver"], true);
    assert_eq!(f[0].evidence["receiver_ttl"], 64);
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
    let f = s.run(&mut MissingZeroWindow::default());
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].evidence["segment_bytes"], 4);
}
