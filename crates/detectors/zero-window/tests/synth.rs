//! Table tests of the zero-window detector on synthesized flow events.

use pcapsleuth_detect::synth::*;
use pcapsleuth_detect::Severity;
use pcapsleuth_zero_window::ZeroWindow;

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
fn persist_episode_is_one_info_finding_citing_window0_probes_and_reopen() {
    let mut s = Script::new();
    let (zw, probes, reopen) = persist_episode(&mut s);
    let f = s.run(&mut ZeroWindow::default());
    assert_eq!(f.len(), 1, "{f:#?}");
    let f = &f[0];
    assert_eq!(f.severity, Severity::Info);
    assert_eq!(f.detector, "zero-window");
    for fr in [zw, reopen].iter().chain(probes.iter()) {
        assert!(
            f.frames.contains(fr),
            "frame {fr} not cited: {:?}",
            f.frames
        );
    }
    let ev = &f.evidence;
    assert_eq!(ev["receiver"], "server 198.51.100.10:80");
    assert_eq!(ev["episodes"], 1);
    assert_eq!(ev["probes"], 3);
    assert_eq!(ev["probes_answered"], 3);
    assert_eq!(
        ev["probe_gaps_ms"],
        serde_json::json!([200.0, 400.0, 800.0])
    );
    assert_eq!(ev["windows_advertised"], serde_json::json!([11574, 35014]));
    assert_eq!(ev["still_closed_at_capture_end"], false);
    let d = ev["duration_ms"].as_f64().unwrap();
    assert!((d - 2300.0).abs() < 0.01, "{d}");
    assert!(
        f.summary.contains("server 198.51.100.10:80") && f.summary.contains("200, 400, 800"),
        "{}",
        f.summary
    );
    assert!(!f.remedy.is_empty());
}

#[test]
fn sub_millisecond_blip_without_probe_is_not_reported() {
    let mut s = Script::new();
    s.seg(C2S, 0.0, 1, 1000, 1, 65536);
    s.seg(S2C, 0.1, 1, 0, 1001, 0);
    s.seg(S2C, 0.5, 1, 0, 1001, 8192);
    assert!(s.run(&mut ZeroWindow::default()).is_empty());
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
    let f = s.run(&mut ZeroWindow::default());
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].evidence["episodes"], 2);
    assert_eq!(f[0].evidence["probes"], 4);
    assert_eq!(f[0].evidence["still_closed_at_capture_end"], true);
    assert!(f[0].frames.contains(&p));
    assert!(
        !f[0].frames.contains(&s.frame),
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
    let f = s.run(&mut ZeroWindow::default());
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].evidence["receiver"], "client 192.0.2.10:40000");
    assert_eq!(f[0].evidence["sender"], "server 198.51.100.10:80");
}
