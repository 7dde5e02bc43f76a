//! Table tests of the zero-window detector on synthesized flow events: they
//! assert the diagnosis; two tests check the rendered finding.

use pcapsleuth_core::Direction;
use pcapsleuth_core::FrameNo;
use pcapsleuth_detect::synth::*;
use pcapsleuth_detect::{Detector, Severity};
use pcapsleuth_zero_window::{render, Diagnosis, Role, ZeroWindow};

/// Feed every event of `s` to a fresh detector and return its diagnoses.
fn diagnose(s: &Script) -> Vec<Diagnosis> {
    let mut d = ZeroWindow::default();
    for ev in &s.events {
        d.on_flow_event(ev);
    }
    d.diagnose(&s.ctx())
}

/// Server receives data; it closes its window, the client probes with Linux
/// probes (seq = SND.UNA-1) at 200, 400, 800 ms, the window reopens.
fn persist_episode(s: &mut Script) -> (u64, Vec<u64>, u64) {
    s.seg(C2S, 0.0, 1, 1000, 1, 65536);
    s.seg(S2C, 0.1, 1, 0, 1001, 11574);
    let zw = s.seg(S2C, 1.0, 1, 0, 1001, 0);
    // New data already in flight when the window closed: not a probe.
    s.seg(C2S, 1.01, 1001, 100, 1, 65536);
    let mut probes = Vec::new();
    let mut t = 1.0;
    for gap in [200.0, 400.0, 800.0] {
        t += gap;
        let p = s.seg(C2S, t, 1000, 0, 1, 65536);
        s.last_mut().snd_una = 1001;
        s.last_mut().analysis.zero_window_probe = true;
        probes.push(p);
        s.seg(S2C, t + 0.05, 1, 0, 1001, 0);
    }
    let reopen = s.seg(S2C, t + 900.0, 1, 0, 1001, 35014);
    s.seg(C2S, t + 900.05, 1001, 1000, 1, 65536);
    (zw, probes, reopen)
}

#[test]
fn persist_episode_is_one_diagnosis_citing_window0_probes_and_reopen() {
    let mut s = Script::new();
    let (zw, probes, reopen) = persist_episode(&mut s);
    let d = diagnose(&s);
    assert_eq!(d.len(), 1, "{d:#?}");
    let d = &d[0];
    assert_eq!(d.severity, Severity::Info);
    assert_eq!(d.stream, 0);
    assert_eq!(d.receiver_dir, Direction::ServerToClient);
    for fr in [zw, reopen].iter().chain(probes.iter()) {
        assert!(
            d.frames.contains(&FrameNo(*fr)),
            "frame {fr} not cited: {:?}",
            d.frames
        );
    }
    assert_eq!(d.start_ns, at(1.0).0);
    assert_eq!(d.end_ns, at(2301.0).0);
    assert_eq!(d.total_ns, 2_300_000_000);
    let e = &d.evidence;
    assert_eq!(e.receiver.role, Role::Server);
    assert_eq!(e.receiver.to_string(), "server 198.51.100.10:80");
    assert_eq!(e.sender.to_string(), "client 192.0.2.10:40000");
    assert_eq!(e.episodes, 1);
    assert_eq!(e.probes, 3);
    assert_eq!(e.probes_answered, 3);
    assert_eq!(e.data_retransmissions_into_zero_window, 0);
    assert_eq!(e.probe_gaps_ms, [200.0, 400.0, 800.0]);
    assert_eq!(e.windows_advertised, [11574, 35014]);
    assert!(e.window_scale_known);
    assert!(!e.still_closed_at_capture_end);
    assert!((e.duration_ms - 2300.0).abs() < 0.01, "{}", e.duration_ms);
    assert_eq!(e.longest_episode_ms, e.duration_ms);
    assert_eq!(e.episode_durations_ms, [e.duration_ms]);
}

#[test]
fn sub_millisecond_blip_without_probe_is_not_reported() {
    let mut s = Script::new();
    s.seg(C2S, 0.0, 1, 1000, 1, 65536);
    s.seg(S2C, 0.1, 1, 0, 1001, 0);
    s.seg(S2C, 0.5, 1, 0, 1001, 8192);
    assert!(diagnose(&s).is_empty());
}

#[test]
fn episodes_group_per_direction_and_open_one_is_flagged_as_still_closed() {
    let mut s = Script::new();
    persist_episode(&mut s);
    // A second episode that never reopens, and a window-0 RST that must be ignored.
    s.seg(S2C, 5000.0, 1, 0, 2001, 0);
    let p = s.seg(C2S, 5210.0, 2000, 0, 1, 65536);
    s.last_mut().snd_una = 2001;
    s.seg(S2C, 6000.0, 1, 0, 2001, 0);
    s.last_mut().flags.0 |= pcapsleuth_decode::TcpFlags::RST;
    let d = diagnose(&s);
    assert_eq!(d.len(), 1);
    let e = &d[0].evidence;
    assert_eq!(e.episodes, 2);
    assert_eq!(e.probes, 4);
    assert!(e.still_closed_at_capture_end);
    assert_eq!(e.episode_durations_ms.len(), 2);
    assert!(d[0].frames.contains(&FrameNo(p)));
    assert!(
        !d[0].frames.contains(&FrameNo(s.frame)),
        "the RST is not part of the episode"
    );
}

#[test]
fn client_side_zero_window_names_the_client() {
    let mut s = Script::new();
    s.seg(S2C, 0.0, 1, 1000, 1, 65536);
    s.seg(C2S, 0.1, 1, 0, 1001, 0);
    s.seg(S2C, 300.0, 1000, 0, 1, 65536);
    s.last_mut().snd_una = 1001;
    s.seg(C2S, 400.0, 1, 0, 1001, 4096);
    let d = diagnose(&s);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].receiver_dir, Direction::ClientToServer);
    assert_eq!(
        d[0].evidence.receiver.to_string(),
        "client 192.0.2.10:40000"
    );
    assert_eq!(d[0].evidence.sender.to_string(), "server 198.51.100.10:80");
    assert_eq!(d[0].evidence.probes, 1);
}

#[test]
fn unknown_endpoints_are_a_question_mark() {
    let mut s = Script::new();
    persist_episode(&mut s);
    let mut zw = ZeroWindow::default();
    for ev in &s.events {
        zw.on_flow_event(ev);
    }
    let d = zw.diagnose(&pcapsleuth_detect::FinishContext::default());
    assert_eq!(d[0].evidence.receiver.to_string(), "server ?");
}

#[test]
fn rendered_finding_carries_the_diagnosis() {
    let mut s = Script::new();
    persist_episode(&mut s);
    let d = diagnose(&s);
    let f = render(&d[0]);
    assert_eq!(f.detector, "zero-window");
    assert_eq!(f.severity, Severity::Info);
    assert_eq!(f.tcp_stream, Some(0));
    assert_eq!(f.start_ts_ns, d[0].start_ns);
    assert_eq!(
        f.evidence,
        *serde_json::to_value(&d[0].evidence)
            .unwrap()
            .as_object()
            .unwrap()
    );
    let keys: Vec<&str> = f.evidence.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "receiver",
            "sender",
            "episodes",
            "duration_ms",
            "longest_episode_ms",
            "episode_durations_ms",
            "windows_advertised",
            "window_scale_known",
            "probes",
            "probes_answered",
            "data_retransmissions_into_zero_window",
            "probe_gaps_ms",
            "still_closed_at_capture_end"
        ]
    );
    assert_eq!(f.evidence["receiver"], "server 198.51.100.10:80");
    assert!(
        f.summary.contains("server 198.51.100.10:80") && f.summary.contains("200, 400, 800"),
        "{}",
        f.summary
    );
    assert!(f.remedy.contains("198.51.100.10:80"), "{}", f.remedy);
}

#[test]
fn finish_renders_every_diagnosis() {
    let mut s = Script::new();
    persist_episode(&mut s);
    let f = s.run(&mut ZeroWindow::default());
    assert_eq!(f.len(), 1);
    assert_eq!(f[0], render(&diagnose(&s)[0]));
}

/// Diagnoses of `s` and the live streams right after its `FlowEnded`.
fn diagnose_ended(s: &Script) -> (Vec<Diagnosis>, usize) {
    let mut d = ZeroWindow::default();
    let mut live = usize::MAX;
    for ev in &s.events {
        d.on_flow_event(ev);
        if matches!(ev, pcapsleuth_flow::FlowEvent::FlowEnded(_)) {
            live = d.active_streams();
        }
    }
    (d.diagnose(&s.ctx()), live)
}

#[test]
fn flow_ended_keeps_the_diagnosis_and_drops_the_stream() {
    // A closed-and-reopened episode, and one still closed at the end.
    let reopened = || {
        let mut s = Script::new();
        persist_episode(&mut s);
        s
    };
    let still_closed = || {
        let mut s = reopened();
        s.seg(S2C, 5000.0, 1, 0, 2001, 0);
        s.seg(C2S, 5200.0, 2000, 0, 1, 65536);
        s.last_mut().snd_una = 2001;
        s.last_mut().analysis.zero_window_probe = true;
        s
    };
    for s in [reopened(), still_closed()] {
        let without = diagnose(&s);
        assert_eq!(without.len(), 1);
        let mut e = Script::new();
        e.events = s.events.clone();
        e.frame = s.frame;
        e.end_flow();
        let (with, live) = diagnose_ended(&e);
        assert_eq!(live, 0);
        assert_eq!(with, without);
    }
    assert!(
        diagnose(&still_closed())[0]
            .evidence
            .still_closed_at_capture_end
    );
}

#[test]
fn one_syn_streams_keep_no_state() {
    let mut d = ZeroWindow::default();
    for i in 0..10_000u64 {
        for ev in syn_only(i, i + 1, at(i as f64)) {
            d.on_flow_event(&ev);
        }
    }
    assert_eq!((d.active_streams(), d.state_bytes()), (0, 0));
}
