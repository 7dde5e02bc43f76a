//! `pcapsleuth check`: one summary line per capture.

use crate::model::CaptureReport;
use crate::wire::{QualityReasonReport, QualityVerdictReport};
use pcapsleuth_core::Severity;

/// What fails `pcapsleuth check` (and its JUnit and GitHub forms): a
/// finding of severity `fail_on` or above; with `fail_on_quality`, a
/// capture whose [`CaptureReport::capture_quality`] verdict is that one or
/// worse (`--fail-on-quality`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckGate {
    /// Lowest finding severity that fails (`--fail-on`).
    pub fail_on: Severity,
    /// Capture-quality verdict from which a capture fails, if any
    /// (`--fail-on-quality`; `None`: the verdict never fails).
    pub fail_on_quality: Option<QualityVerdictReport>,
}

impl CheckGate {
    /// The gate of `--fail-on SEVERITY` alone.
    pub fn findings(fail_on: Severity) -> CheckGate {
        CheckGate {
            fail_on,
            fail_on_quality: None,
        }
    }

    /// The findings of `c` at or above [`CheckGate::fail_on`].
    pub fn failing<'a>(&self, c: &'a CaptureReport) -> Vec<&'a pcapsleuth_core::Finding> {
        c.findings
            .iter()
            .filter(|f| f.severity >= self.fail_on)
            .collect()
    }

    /// The verdict of `c` when it fails [`CheckGate::fail_on_quality`].
    pub fn failing_quality(&self, c: &CaptureReport) -> Option<QualityVerdictReport> {
        let at = self.fail_on_quality?;
        c.capture_quality
            .as_ref()
            .map(|q| q.verdict)
            .filter(|v| *v >= at && *v != QualityVerdictReport::Trustworthy)
    }
}

/// The `pcapsleuth check` line for one capture, and whether it fails `gate`
/// (a finding at or above its severity, or with `--fail-on-quality` a
/// verdict at or below its trust). A read error does not hide the
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
/// absence, are not taken at face value; that fails the gate only with
/// [`CheckGate::fail_on_quality`].
pub fn render_check_line(c: &CaptureReport, gate: &CheckGate) -> (String, bool) {
    let count = |s: Severity| c.findings.iter().filter(|f| f.severity == s).count();
    let failing: Vec<&str> = {
        let mut ids: Vec<&str> = gate
            .failing(c)
            .iter()
            .map(|f| f.detector.as_str())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    };
    let bad_quality = gate.failing_quality(c);
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
    let fails = !failing.is_empty() || bad_quality.is_some();
    // A read error does not discard what was analysed before it: the line
    // says ERROR (exit 2 wins) but still counts and names the findings.
    let verdict = match (&c.error, fails) {
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
        (None, false) => format!("ok: {counts}"),
        (None, true) => format!("FAIL: {counts}"),
    };
    let mut line = format!("{}: {verdict}", c.path);
    if !failing.is_empty() {
        line.push_str(&format!(
            "; at or above {}: {}",
            gate.fail_on.as_str(),
            failing.join(", ")
        ));
    }
    if let (Some(v), Some(at)) = (bad_quality, gate.fail_on_quality) {
        line.push_str(&format!(
            "; capture quality {} fails --fail-on-quality {}",
            v.as_str(),
            at.as_str().replace('_', "-")
        ));
    }
    (line, fails)
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
            render_check_line(&c, &CheckGate::findings(Severity::Info)),
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
        assert!(render_check_line(&c, &CheckGate::findings(Severity::Warning)).1);
        assert!(render_check_line(&c, &CheckGate::findings(Severity::Info)).1);
        assert!(!render_check_line(&c, &CheckGate::findings(Severity::Error)).1);
        assert_eq!(
            render_check_line(&c, &CheckGate::findings(Severity::Warning)).0,
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
            render_check_line(&c, &CheckGate::findings(Severity::Error)),
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
            render_check_line(&c, &CheckGate::findings(Severity::Error)),
            (
                "a.pcap: ok: 1 finding (0 error, 1 warning, 0 info); capture quality not_trustworthy: 606780 B acknowledged but never captured in 1 flow (captured 3537793 B)"
                    .into(),
                false
            )
        );
        // With --fail-on-quality, a verdict at or past it fails the gate.
        let gate = |q| CheckGate {
            fail_on: Severity::Error,
            fail_on_quality: Some(q),
        };
        assert_eq!(
            render_check_line(&c, &gate(QualityVerdictReport::UseWithCare)),
            (
                "a.pcap: FAIL: 1 finding (0 error, 1 warning, 0 info); capture quality not_trustworthy: 606780 B acknowledged but never captured in 1 flow (captured 3537793 B); capture quality not_trustworthy fails --fail-on-quality use-with-care"
                    .into(),
                true
            )
        );
        assert!(render_check_line(&c, &gate(QualityVerdictReport::NotTrustworthy)).1);
        if let Some(q) = c.capture_quality.as_mut() {
            q.verdict = QualityVerdictReport::UseWithCare;
        }
        assert!(!render_check_line(&c, &gate(QualityVerdictReport::NotTrustworthy)).1);
        assert!(render_check_line(&c, &gate(QualityVerdictReport::UseWithCare)).1);
        c.capture_quality = None;
        assert!(!render_check_line(&c, &gate(QualityVerdictReport::UseWithCare)).1);
        c.incomplete = Some(crate::WarningReport {
            kind: crate::WarningKindReport::TruncatedRecord,
            offset: 2980,
            frame: Some(4),
            message: "capture cut short".into(),
        });
        assert_eq!(
            render_check_line(&c, &CheckGate::findings(Severity::Error)),
            (
                "a.pcap: INCOMPLETE: read 3 frames, then stopped at byte 2980 (frame 4): capture cut short; 1 finding (0 error, 1 warning, 0 info)"
                    .into(),
                false
            )
        );
        c.error = Some("boom".into());
        assert_eq!(
            render_check_line(&c, &CheckGate::findings(Severity::Info)),
            (
                "a.pcap: ERROR: boom; 1 finding (0 error, 1 warning, 0 info); at or above info: zero-window"
                    .into(),
                true
            )
        );
    }
}
