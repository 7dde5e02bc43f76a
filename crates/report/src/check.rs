//! `pcapsleuth check`: one summary line per capture.

use crate::model::CaptureReport;
use crate::wire::{QualityReasonReport, QualityVerdictReport};
use pcapsleuth_core::Severity;

/// The `pcapsleuth check` line for one capture, and whether it fails
/// `threshold` (a finding at or above it). A read error does not hide the
/// findings made before it: the line says `ERROR: …` and still counts them;
/// a capture read only in part ([`CaptureReport::incomplete`]) says
/// `INCOMPLETE: read N frames, then stopped at byte B (frame F): why`. A
/// capture read in full but analysed only in part (a flow-table cap or a
/// detector's memory bound reached: the `flow_cap`, `unacked_segment_cap`
/// and `detector_limit` warnings) says `analysed in part` with how many of
/// each; that alone does not fail the gate. A capture whose
/// [`CaptureReport::capture_quality`] verdict is not `trustworthy` says
/// `capture quality VERDICT: reasons` (as `analyze` does; a read stopped
/// early is already said by `INCOMPLETE`), so that findings, or their
/// absence, are not taken at face value; that alone does not fail the gate
/// either.
pub fn render_check_line(c: &CaptureReport, threshold: Severity) -> (String, bool) {
    let count = |s: Severity| c.findings.iter().filter(|f| f.severity == s).count();
    let failing: Vec<&str> = {
        let mut ids: Vec<&str> = c
            .findings
            .iter()
            .filter(|f| f.severity >= threshold)
            .map(|f| f.detector.as_str())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    };
    let mut counts = format!(
        "{} finding{} ({} error, {} warning, {} info)",
        c.findings.len(),
        if c.findings.len() == 1 { "" } else { "s" },
        count(Severity::Error),
        count(Severity::Warning),
        count(Severity::Info)
    );
    counts.push_str(&analysed_in_part(c));
    counts.push_str(&quality_note(c));
    // A read error does not discard what was analysed before it: the line
    // says ERROR (exit 2 wins) but still counts and names the findings.
    let verdict = match (&c.error, failing.is_empty()) {
        (Some(e), _) => format!("ERROR: {e}; {counts}"),
        (None, _) if c.incomplete.is_some() => {
            let w = c.incomplete.as_ref().map_or(String::new(), |w| {
                let frame = w.frame.map(|f| format!(" (frame {f})")).unwrap_or_default();
                format!(" at byte {}{frame}: {}", w.offset, w.message)
            });
            format!(
                "INCOMPLETE: read {} frame{}, then stopped{w}; {counts}",
                c.packets,
                if c.packets == 1 { "" } else { "s" }
            )
        }
        (None, true) => format!("ok: {counts}"),
        (None, false) => format!("FAIL: {counts}"),
    };
    if failing.is_empty() {
        (format!("{}: {verdict}", c.path), false)
    } else {
        (
            format!(
                "{}: {verdict}; at or above {}: {}",
                c.path,
                threshold.as_str(),
                failing.join(", ")
            ),
            true,
        )
    }
}

/// `"; capture quality not_trustworthy: 606780 B acknowledged but never
/// captured in 1 flow (captured 3537793 B)"` when the capture's verdict is
/// not trustworthy for a reason other than the read stopping early, else
/// empty.
fn quality_note(c: &CaptureReport) -> String {
    let Some(q) = c
        .capture_quality
        .as_ref()
        .filter(|q| q.verdict != QualityVerdictReport::Trustworthy)
    else {
        return String::new();
    };
    let reasons: Vec<String> = q
        .reasons
        .iter()
        .filter(|r| !matches!(r, QualityReasonReport::ReadIncomplete { .. }))
        .map(QualityReasonReport::describe)
        .collect();
    if reasons.is_empty() {
        return String::new();
    }
    format!(
        "; capture quality {}: {}",
        q.verdict.as_str(),
        reasons.join("; ")
    )
}

/// `"; analysed in part: 2 detector_limit warnings, 1 flow_cap warning"`
/// when the report has warnings about the analysis (not about a record of
/// the file), else empty. Kinds in the order they first appear.
fn analysed_in_part(c: &CaptureReport) -> String {
    let mut kinds: Vec<(String, usize)> = Vec::new();
    for w in c.warnings.iter().filter(|w| !w.kind.is_about_a_record()) {
        let name = serde_json::to_value(w.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        match kinds.iter_mut().find(|(k, _)| *k == name) {
            Some((_, n)) => *n += 1,
            None => kinds.push((name, 1)),
        }
    }
    if kinds.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = kinds
        .iter()
        .map(|(k, n)| format!("{n} {k} warning{}", if *n == 1 { "" } else { "s" }))
        .collect();
    format!("; analysed in part: {}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_line_thresholds() {
        let mut c = CaptureReport {
            path: "a.pcap".into(),
            format: Some("pcap".into()),
            packets: 3,
            first_ts_ns: 0,
            last_ts_ns: 0,
            interfaces: vec![],
            tcp_streams: 1,
            warnings: vec![],
            error: None,
            incomplete: None,
            capture_quality: None,
            findings: vec![],
            flows: vec![],
            sources: vec![],
        };
        assert_eq!(
            render_check_line(&c, Severity::Info),
            (
                "a.pcap: ok: 0 findings (0 error, 0 warning, 0 info)".into(),
                false
            )
        );
        c.findings.push(
            pcapsleuth_core::Finding::builder("zero-window", Severity::Warning)
                .summary("s")
                .frames(vec![1u64])
                .build(),
        );
        assert!(render_check_line(&c, Severity::Warning).1);
        assert!(render_check_line(&c, Severity::Info).1);
        assert!(!render_check_line(&c, Severity::Error).1);
        assert_eq!(
            render_check_line(&c, Severity::Warning).0,
            "a.pcap: FAIL: 1 finding (0 error, 1 warning, 0 info); at or above warning: zero-window"
        );
        // Read in full, analysed in part: said, does not fail by itself.
        let limit = |kind| crate::WarningReport {
            kind,
            offset: 0,
            frame: Some(9),
            message: "m".into(),
        };
        c.warnings = vec![
            limit(crate::WarningKindReport::DetectorLimit),
            limit(crate::WarningKindReport::MalformedRecord),
            limit(crate::WarningKindReport::FlowCap),
            limit(crate::WarningKindReport::DetectorLimit),
        ];
        assert_eq!(
            render_check_line(&c, Severity::Error),
            (
                "a.pcap: ok: 1 finding (0 error, 1 warning, 0 info); analysed in part: 2 detector_limit warnings, 1 flow_cap warning"
                    .into(),
                false
            )
        );
        c.warnings.clear();
        // A verdict other than trustworthy is said; it does not fail by itself.
        c.capture_quality = Some(crate::CaptureQualityReport {
            verdict: QualityVerdictReport::NotTrustworthy,
            reasons: vec![
                QualityReasonReport::CaptureLoss {
                    verdict: QualityVerdictReport::NotTrustworthy,
                    flows: 1,
                    bytes: 606_780,
                    captured_bytes: 3_537_793,
                },
                QualityReasonReport::ReadIncomplete {
                    verdict: QualityVerdictReport::UseWithCare,
                    frames: 3,
                },
            ],
            frames: 3,
            tcp_flows: 1,
            duplicates_same_interface: 0,
            duplicates_other_interface: 0,
            capture_lost_bytes: 606_780,
            capture_loss_flows: 1,
            captured_payload_bytes: 3_537_793,
            gap_bytes_filled_late: 0,
            payload_truncated_frames: 0,
            header_truncated_frames: 0,
            one_sided_flows: 0,
            backwards_across_interfaces: 0,
            max_backwards_across_ns: 0,
            interfaces: vec![],
        });
        assert_eq!(
            render_check_line(&c, Severity::Error),
            (
                "a.pcap: ok: 1 finding (0 error, 1 warning, 0 info); capture quality not_trustworthy: 606780 B acknowledged but never captured in 1 flow (captured 3537793 B)"
                    .into(),
                false
            )
        );
        c.capture_quality = None;
        c.incomplete = Some(crate::WarningReport {
            kind: crate::WarningKindReport::TruncatedRecord,
            offset: 2980,
            frame: Some(4),
            message: "capture cut short".into(),
        });
        assert_eq!(
            render_check_line(&c, Severity::Error),
            (
                "a.pcap: INCOMPLETE: read 3 frames, then stopped at byte 2980 (frame 4): capture cut short; 1 finding (0 error, 1 warning, 0 info)"
                    .into(),
                false
            )
        );
        c.error = Some("boom".into());
        assert_eq!(
            render_check_line(&c, Severity::Info),
            (
                "a.pcap: ERROR: boom; 1 finding (0 error, 1 warning, 0 info); at or above info: zero-window"
                    .into(),
                true
            )
        );
    }
}
