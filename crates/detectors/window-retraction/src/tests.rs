//! Table tests over synthesized flow events: they assert diagnoses; the last
//! few check the rendered prose and JSON.

use super::*;
use pcapsleuth_core::Severity;
use pcapsleuth_decode::TcpFlags;
use pcapsleuth_detect::synth::{Script, C2S, S2C};

/// A script with a captured handshake (RTT 1 ms at the capture point):
/// client SYN, server SYN-ACK, client ACK (frames 1–3).
fn handshake() -> Script {
    let mut s = Script::new();
    s.seg(C2S, 0.0, 0, 0, 0, 64240);
    s.last_mut().flags = TcpFlags(TcpFlags::SYN);
    s.last_mut().rel_ack = None;
    s.seg(S2C, 0.5, 0, 0, 1, 65152);
    s.last_mut().flags = TcpFlags(TcpFlags::SYN | TcpFlags::ACK);
    s.seg(C2S, 1.0, 1, 0, 1, 64256);
    s
}

/// The server's ACK of the client's data: `ack` relative, `window` bytes
/// (raw field = window / 128: scale unit 128 bytes).
fn ack(s: &mut Script, t_ms: f64, ack: i64, window: u64) -> FrameNo {
    FrameNo(s.seg(S2C, t_ms, 1, 0, ack, window))
}

/// Client data `[seq, seq + len)`.
fn data(s: &mut Script, t_ms: f64, seq: i64, len: u32) -> FrameNo {
    FrameNo(s.seg(C2S, t_ms, seq, len, 1, 64256))
}

fn run(s: &Script) -> Vec<Diagnosis> {
    let mut d = WindowRetraction::default();
    for ev in &s.events {
        d.on_flow_event(ev);
    }
    d.diagnose(&s.ctx())
}

/// Every retraction recorded, reported or not (the state before `diagnose`).
fn recorded(s: &Script) -> Vec<RetractionEvidence> {
    let mut d = WindowRetraction::default();
    for ev in &s.events {
        d.on_flow_event(ev);
    }
    let mut keys: Vec<_> = d.streams.keys().copied().collect();
    keys.sort_unstable();
    keys.iter()
        .flat_map(|k| {
            d.streams[k]
                .dirs
                .iter()
                .flat_map(|st| st.rx.iter().flat_map(|rx| rx.listed.clone()))
        })
        .collect()
}

#[test]
fn rounding_below_one_scale_unit_is_listed_and_told_apart() {
    let mut s = handshake();
    data(&mut s, 2.0, 1, 1000);
    let a = ack(&mut s, 3.0, 1001, 64000); // edge 65001
    data(&mut s, 4.0, 1001, 1000);
    let b = ack(&mut s, 5.0, 2001, 62976); // edge 64977: 24 bytes left
    data(&mut s, 6.0, 2001, 1000);
    let c = ack(&mut s, 7.0, 3001, 0); // edge 3001: onto zero
    let out = run(&s);
    assert_eq!(out.len(), 1);
    let d = &out[0];
    assert_eq!(d.severity, Severity::Info);
    assert_eq!(d.receiver_dir, S2C);
    let e = &d.evidence;
    assert_eq!(e.window_scale_factor, Some(128));
    assert_eq!(
        (e.count, e.below_scale_unit_count, e.to_zero_window_count),
        (2, 1, 1)
    );
    let r = &e.retractions[0];
    assert_eq!((r.prev_frame, r.frame), (a, b));
    assert_eq!((r.prev_right_edge, r.new_right_edge), (65001, 64977));
    assert_eq!(r.retracted_bytes, 24);
    assert_eq!(r.below_scale_unit, Some(true));
    assert_eq!(r.window_field, 492);
    assert_eq!(r.sent_into_bytes, 0);
    assert_eq!(e.retractions[1].frame, c);
    assert_eq!(e.retractions[1].below_scale_unit, Some(false));
    assert_eq!(e.receiver, "server 198.51.100.10:80");
    assert_eq!(e.sender, "client 192.0.2.10:40000");
    assert!([a, b, c].iter().all(|f| d.frames.contains(f)));
}

#[test]
fn rounding_alone_is_recorded_but_not_reported() {
    let mut s = handshake();
    ack(&mut s, 3.0, 1001, 64000);
    ack(&mut s, 5.0, 2001, 62976);
    assert_eq!(recorded(&s).len(), 1);
    assert!(run(&s).is_empty());
}

/// (previous ack, previous window, new ack, new window, retracted bytes or
/// None, below one unit, onto zero).
type EdgeCase = (i64, u64, i64, u64, Option<u64>, bool, bool);

#[test]
fn table_of_edge_moves() {
    // (previous ack, previous window, new ack, new window) → retracted bytes
    // (None: not a retraction), below one 128-byte unit, onto zero.
    let cases: &[EdgeCase] = &[
        (1001, 8192, 1001, 8192, None, false, false), // same edge
        (1001, 8192, 2001, 7296, None, false, false), // edge kept: 9193 → 9297
        (1001, 8192, 9193, 0, None, false, false),    // zero window at the old edge
        (1001, 8192, 5001, 0, Some(4192), false, true), // onto zero, 4192 bytes back
        (1001, 8192, 1101, 8064, Some(28), true, false), // 28 bytes: rounding
        (1001, 8192, 1001, 4096, Some(4096), false, false), // window halved, ACK still
        (1001, 8192, 1129, 7936, Some(128), false, false), // exactly one unit
    ];
    for &(pa, pw, na, nw, want, below, zero) in cases {
        let mut s = handshake();
        ack(&mut s, 2.0, pa, pw);
        ack(&mut s, 3.0, na, nw);
        let got = recorded(&s);
        let case = (pa, pw, na, nw);
        match want {
            None => assert!(got.is_empty(), "{case:?}: {got:?}"),
            Some(bytes) => {
                assert_eq!(got.len(), 1, "{case:?}");
                let r = &got[0];
                assert_eq!(r.retracted_bytes, bytes, "{case:?}");
                assert_eq!(r.below_scale_unit, Some(below), "{case:?}");
                assert_eq!(r.to_zero_window, zero, "{case:?}");
                assert_eq!(run(&s).len(), usize::from(!below), "{case:?}");
            }
        }
    }
}

#[test]
fn zero_window_retraction_with_nothing_sent_beyond_is_info() {
    // window-retraction.pcap frame 179: ack 114393 window 0, previous edge
    // 107153 + 8192 = 115345; the sender had stopped at 114393.
    let mut s = handshake();
    ack(&mut s, 2.0, 107_153, 8192);
    data(&mut s, 3.0, 107_153, 7240);
    let z = ack(&mut s, 4.0, 114_393, 0);
    let out = run(&s);
    assert_eq!(out.len(), 1);
    let e = &out[0].evidence;
    assert_eq!(out[0].severity, Severity::Info);
    assert_eq!(e.retractions[0].frame, z);
    assert_eq!(e.retractions[0].retracted_bytes, 952);
    assert_eq!(e.retractions[0].below_scale_unit, Some(false));
    assert_eq!(e.to_zero_window_count, 1);
    assert_eq!(e.sent_into_retracted_bytes, 0);
    assert_eq!(e.dropped_segments, 0);
}

#[test]
fn data_sent_into_the_retracted_space_and_resent_is_a_dropped_warning() {
    let mut s = handshake();
    ack(&mut s, 2.0, 1001, 8192); // edge 9193
    data(&mut s, 3.0, 1001, 4000);
    let orig = data(&mut s, 3.1, 5001, 4000); // up to 9001, in the old window
    let z = ack(&mut s, 4.0, 5001, 0); // edge 5001: 4192 bytes back
    let retx = data(&mut s, 300.0, 5001, 4000); // re-sent: it was dropped
    ack(&mut s, 301.0, 9001, 8192);
    let out = run(&s);
    assert_eq!(out.len(), 1);
    let d = &out[0];
    assert_eq!(d.severity, Severity::Warning);
    let e = &d.evidence;
    assert_eq!(e.sent_into_retracted_bytes, 4000);
    assert_eq!((e.dropped_segments, e.dropped_bytes), (1, 4000));
    assert_eq!(
        e.dropped,
        vec![DroppedSegment {
            original_frame: orig,
            retransmission_frame: retx,
            bytes: 4000
        }]
    );
    assert_eq!(e.retractions[0].frame, z);
    assert_eq!(e.retractions[0].dropped_bytes, 4000);
    assert!(d.frames.contains(&orig) && d.frames.contains(&retx));
}

#[test]
fn a_segment_in_two_retracted_spaces_is_one_drop() {
    let mut s = handshake();
    ack(&mut s, 2.0, 1001, 8192); // edge 9193
    let orig = data(&mut s, 3.0, 5001, 4000); // 5001..9001 (1001..5001 lost)
    ack(&mut s, 4.0, 1001, 6144); // edge 7145
    ack(&mut s, 5.0, 1001, 2048); // edge 3049
    data(&mut s, 300.0, 5001, 4000);
    let out = run(&s);
    let e = &out[0].evidence;
    assert_eq!(e.count, 2);
    assert_eq!((e.dropped_segments, e.dropped_bytes), (1, 4000));
    assert_eq!(e.dropped[0].original_frame, orig);
    assert_eq!(e.retractions[0].dropped_bytes, 1856);
    assert_eq!(e.retractions[1].dropped_bytes, 2144);
}

#[test]
fn data_in_flight_after_the_retraction_counts_and_acknowledged_is_not_dropped() {
    let mut s = handshake();
    ack(&mut s, 2.0, 1001, 8192); // edge 9193
    data(&mut s, 3.0, 1001, 4000);
    ack(&mut s, 4.0, 5001, 0); // edge 5001
    data(&mut s, 4.5, 5001, 1000); // in flight: sent before the sender knew
    data(&mut s, 400.0, 6001, 1000); // long after: not counted
    ack(&mut s, 401.0, 7001, 8192);
    let out = run(&s);
    let e = &out[0].evidence;
    assert_eq!(out[0].severity, Severity::Info);
    assert_eq!(e.sent_into_retracted_bytes, 1000);
    assert_eq!(e.dropped_segments, 0);
}

#[test]
fn a_copy_captured_with_the_original_is_not_a_re_send() {
    // A tap duplicating packets (one copy with a rewritten ACK, so not
    // recognised as the same packet): same timestamp as the original.
    let mut s = handshake();
    ack(&mut s, 2.0, 1001, 8192);
    data(&mut s, 3.0, 1001, 4000);
    data(&mut s, 3.1, 5001, 4000);
    ack(&mut s, 3.1, 5001, 256);
    data(&mut s, 3.1, 5001, 4000);
    let out = run(&s);
    assert_eq!(out[0].evidence.sent_into_retracted_bytes, 3744);
    assert_eq!(out[0].evidence.dropped_segments, 0);
    assert_eq!(out[0].severity, Severity::Info);
}

#[test]
fn window_probes_long_after_a_zero_window_are_not_drops() {
    // A 1-byte probe of new data (BSD/Windows style), re-sent: sent after the
    // sender knew of the zero window, so not data dropped by the retraction.
    let mut s = handshake();
    ack(&mut s, 2.0, 1001, 8192);
    data(&mut s, 3.0, 1001, 4000);
    ack(&mut s, 4.0, 5001, 0);
    data(&mut s, 250.0, 5001, 1);
    ack(&mut s, 250.5, 5001, 0);
    data(&mut s, 700.0, 5001, 1);
    let out = run(&s);
    assert_eq!(out[0].severity, Severity::Info);
    assert_eq!(out[0].evidence.dropped_segments, 0);
    assert_eq!(out[0].evidence.sent_into_retracted_bytes, 0);
}

#[test]
fn unknown_window_scale_is_not_guessed() {
    // No handshake: the flow table gives no scaled window.
    let mut s = Script::new();
    for (t, a, w) in [(1.0, 1001, 8192u64), (2.0, 5001, 0)] {
        ack(&mut s, t, a, w);
        s.last_mut().window_bytes = None;
    }
    assert!(run(&s).is_empty());
}

#[test]
fn an_older_ack_captured_late_is_not_a_retraction() {
    let mut s = handshake();
    ack(&mut s, 2.0, 5001, 8192);
    ack(&mut s, 2.1, 1001, 8192); // reordered: ACK went back
    ack(&mut s, 2.2, 6001, 7296); // edge 13297 ≥ 13193
    assert!(run(&s).is_empty());
}

#[test]
fn syn_rst_and_duplicate_sightings_are_not_advertisements() {
    let mut s = handshake();
    ack(&mut s, 2.0, 1001, 8192);
    ack(&mut s, 2.1, 1001, 0);
    s.last_mut().flags = TcpFlags(TcpFlags::RST | TcpFlags::ACK);
    ack(&mut s, 2.2, 1001, 128);
    s.last_mut().duplicate_of = Some(FrameNo(4));
    assert!(run(&s).is_empty());
}

#[test]
fn every_retraction_is_listed_and_counted() {
    let mut s = handshake();
    let mut a = 1001;
    ack(&mut s, 2.0, a, 8192);
    for i in 0u32..40 {
        a += 100;
        ack(&mut s, 3.0 + f64::from(i), a, 8064 - 128 * u64::from(i % 2));
        ack(&mut s, 3.5 + f64::from(i), a, 8192);
    }
    let out = run(&s);
    let e = &out[0].evidence;
    assert!(e.count > MAX_LISTED as u64, "{}", e.count);
    assert_eq!(e.retractions.len(), MAX_LISTED);
}

// ---- Rendering ----

#[test]
fn render_info_names_the_kinds_and_missing_zero_window() {
    let mut s = handshake();
    ack(&mut s, 2.0, 107_153, 8192);
    ack(&mut s, 3.0, 114_393, 0);
    ack(&mut s, 4.0, 114_393, 65280);
    ack(&mut s, 5.0, 114_493, 65152); // 28 bytes: rounding
    let f = render(&run(&s)[0]);
    assert_eq!(f.detector, ID);
    assert_eq!(f.severity, Severity::Info);
    assert!(f.summary.contains("2 times"), "{}", f.summary);
    assert!(f.summary.contains("1 onto a zero window"), "{}", f.summary);
    assert!(
        f.summary.contains("128-byte window-scale unit"),
        "{}",
        f.summary
    );
    assert!(f.summary.contains("missing-zero-window"), "{}", f.summary);
    assert!(f.remedy.starts_with("Nothing to fix"), "{}", f.remedy);
    assert_eq!(f.tcp_stream, Some(0));
}

#[test]
fn evidence_json_keys_in_order() {
    let mut s = handshake();
    ack(&mut s, 2.0, 1001, 8192);
    ack(&mut s, 3.0, 5001, 0);
    let f = render(&run(&s)[0]);
    let json = serde_json::to_string(&f.evidence).unwrap();
    assert_eq!(
        json,
        concat!(
            r#"{"receiver":"server 198.51.100.10:80","sender":"client 192.0.2.10:40000","#,
            r#""window_scale_factor":128,"count":1,"max_retracted_bytes":4192,"#,
            r#""below_scale_unit_count":0,"to_zero_window_count":1,"#,
            r#""sent_into_retracted_bytes":0,"dropped_segments":0,"dropped_bytes":0,"#,
            r#""dropped":[],"retractions":[{"frame":5,"prev_frame":4,"#,
            r#""prev_right_edge":9193,"new_right_edge":5001,"retracted_bytes":4192,"#,
            r#""ack":5001,"window_bytes":0,"window_field":0,"prev_ack":1001,"#,
            r#""prev_window_bytes":8192,"to_zero_window":true,"below_scale_unit":false,"#,
            r#""sent_into_bytes":0,"dropped_bytes":0}]}"#
        )
    );
}

/// A script with a retraction into which data was sent and re-sent (a
/// dropped warning) plus a rounding-only direction.
fn dropped_script() -> Script {
    let mut s = handshake();
    data(&mut s, 2.0, 1, 1000);
    ack(&mut s, 3.0, 1001, 64000); // edge 65001
    data(&mut s, 4.0, 1001, 30000);
    ack(&mut s, 5.0, 1001, 0); // retract onto zero: 30000 bytes in flight dropped
    data(&mut s, 400.0, 1001, 1000); // re-send
    ack(&mut s, 401.0, 2001, 64000);
    s
}

fn run_with_end(s: &Script) -> (Vec<Diagnosis>, usize) {
    let mut d = WindowRetraction::default();
    let mut live_after_end = usize::MAX;
    for ev in &s.events {
        d.on_flow_event(ev);
        if matches!(ev, FlowEvent::FlowEnded(_)) {
            live_after_end = d.active_streams();
        }
    }
    (d.diagnose(&s.ctx()), live_after_end)
}

#[test]
fn flow_ended_drops_the_stream_and_keeps_its_diagnosis() {
    let s = dropped_script();
    let without = run(&s);
    assert_eq!(without.len(), 1);
    assert_eq!(without[0].severity, Severity::Warning);
    let mut ended = dropped_script();
    ended.end_flow();
    let (with, live) = run_with_end(&ended);
    assert_eq!(live, 0);
    assert_eq!(with, without);
    // A retired stream's id used again starts from fresh state; the
    // concluded diagnosis stays, and the new state is diagnosed after it.
    let mut again = dropped_script();
    again.end_flow();
    let n = again.events.len();
    again
        .events
        .extend(dropped_script().events[3..].iter().copied());
    let (twice, _) = run_with_end(&again);
    assert!(n < again.events.len());
    assert_eq!(twice.len(), 2);
    assert_eq!(twice[0], without[0]);
}

#[test]
fn flow_ended_of_an_unreported_stream_keeps_nothing() {
    let mut s = handshake();
    data(&mut s, 2.0, 1, 1000);
    ack(&mut s, 3.0, 1001, 64000);
    s.end_flow();
    let (out, live) = run_with_end(&s);
    assert!(out.is_empty());
    assert_eq!(live, 0);
}

#[test]
fn a_one_syn_stream_costs_one_slot() {
    let mut d = WindowRetraction::default();
    for i in 0..10_000u64 {
        for ev in
            pcapsleuth_detect::synth::syn_only(i, i + 1, pcapsleuth_detect::synth::at(i as f64))
        {
            d.on_flow_event(&ev);
        }
    }
    assert_eq!(d.active_streams(), 0);
    assert!(d.state_bytes() <= 10_000 * 8 * 2, "{}", d.state_bytes());
    // The first SYN's time still gives the handshake RTT.
    let mut s = handshake();
    data(&mut s, 2.0, 1, 1000);
    let a = run(&s);
    let mut d = WindowRetraction::default();
    for ev in &s.events {
        d.on_flow_event(ev);
    }
    assert_eq!(d.streams[&StreamId(0)].hs.rtt_ns, Some(1_000_000));
    assert!(a.is_empty());
    for i in 0..10_000u64 {
        d.on_flow_event(&pcapsleuth_detect::synth::flow_ended(
            StreamId(i),
            1,
            pcapsleuth_detect::synth::at(0.0),
        ));
    }
    assert_eq!((d.active_streams(), d.syn.span()), (0, 0));
}
