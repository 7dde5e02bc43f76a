//! CI renderers of `pcapsleuth check`: JUnit XML (GitLab, Jenkins, Azure
//! DevOps and GitHub test reporters) and GitHub Actions workflow commands.
//!
//! Both apply the `check` gate ([`CheckGate`]): a finding fails when its
//! severity is at or above the threshold (`--fail-on`), and with
//! `--fail-on-quality` a capture whose capture-quality verdict reaches it
//! fails; a capture that could not be read (or was read only in part,
//! unless allowed) is an error.

use crate::check::CheckGate;
use crate::common::flow;
use crate::model::{CaptureReport, Report, TOOL_VERSION};
use crate::text::quality_reasons;
use pcapsleuth_core::{Finding, Severity};
use std::fmt::Write as _;

/// Why `c` fails `gate` on its capture quality: `(verdict, reasons)`.
fn quality_failure(c: &CaptureReport, gate: &CheckGate) -> Option<(&'static str, String)> {
    let v = gate.failing_quality(c)?;
    let reasons = c.capture_quality.as_ref().map(quality_reasons)?;
    Some((v.as_str(), reasons))
}

/// Escape text for an XML 1.0 attribute value or text node; characters XML
/// 1.0 cannot carry (C0 controls but tab, CR, LF) become U+FFFD.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(ch),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// The body of a JUnit `<failure>` and of a GitHub annotation: the finding's
/// facts, one per line (flow, streams, filters, remedy).
fn finding_details(f: &Finding) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", f.summary);
    if let Some(fl) = &f.flow {
        let _ = writeln!(s, "flow: {}", flow(fl));
    }
    if !f.wireshark_filter.is_empty() {
        let _ = writeln!(s, "wireshark filter: {}", f.wireshark_filter);
    }
    if let Some(sf) = &f.stream_filter {
        let _ = writeln!(s, "stream filter: {sf}");
    }
    if !f.remedy.is_empty() {
        let _ = writeln!(s, "remedy: {}", f.remedy);
    }
    s
}

/// Render the report as JUnit XML: one `<testsuite name="pcapsleuth check">`
/// with one `<testcase>` per capture (`name` and `file` = its path,
/// `classname="pcapsleuth"`), one `<failure type="DETECTOR"
/// message="SEVERITY: SUMMARY">` per finding at or above `threshold` (the
/// body: summary, flow, Wireshark filter, stream filter, remedy), and an
/// `<error>` when the capture could not be read (or, unless
/// `allow_incomplete`, was read only in part), and with
/// [`CheckGate::fail_on_quality`] a `<failure type="capture_quality"
/// message="VERDICT: reasons">` for a capture whose verdict reaches it.
/// Findings below the threshold
/// are listed in `<system-out>`. No times or host names: the output is
/// deterministic. Valid against Jenkins' `junit-10.xsd`.
pub fn render_junit(report: &Report, gate: &CheckGate, allow_incomplete: bool) -> String {
    let threshold = gate.fail_on;
    let mut cases = String::new();
    let (mut failures, mut errors) = (0usize, 0usize);
    for c in &report.captures {
        let path = xml_escape(&c.path);
        let _ = writeln!(
            cases,
            "    <testcase name=\"{path}\" classname=\"pcapsleuth\" file=\"{path}\">"
        );
        let fails = gate.failing(c);
        let bad_quality = quality_failure(c, gate);
        if !fails.is_empty() || bad_quality.is_some() {
            failures += 1;
        }
        if let Some((verdict, reasons)) = &bad_quality {
            let _ = writeln!(
                cases,
                "      <failure type=\"capture_quality\" message=\"{}\"/>",
                xml_escape(&format!("{verdict}: {reasons}"))
            );
        }
        for f in &fails {
            let _ = writeln!(
                cases,
                "      <failure type=\"{}\" message=\"{}\">{}</failure>",
                xml_escape(&f.detector),
                xml_escape(&format!("{}: {}", f.severity.as_str(), f.summary)),
                xml_escape(&finding_details(f))
            );
        }
        let read_problem = match (&c.error, &c.incomplete) {
            (Some(e), _) => Some(("read_error", e.clone())),
            (None, Some(w)) if !allow_incomplete => Some((
                "read_incomplete",
                format!(
                    "read only in part: stopped at byte {} after {} frames: {}",
                    w.offset, c.packets, w.message
                ),
            )),
            _ => None,
        };
        if let Some((kind, msg)) = read_problem {
            errors += 1;
            let _ = writeln!(
                cases,
                "      <error type=\"{kind}\" message=\"{}\"/>",
                xml_escape(&msg)
            );
        }
        let below: Vec<&Finding> = c
            .findings
            .iter()
            .filter(|f| f.severity < threshold)
            .collect();
        if !below.is_empty() {
            let mut s = String::new();
            for f in below {
                let _ = writeln!(s, "{} {}: {}", f.severity.as_str(), f.detector, f.summary);
            }
            let _ = writeln!(cases, "      <system-out>{}</system-out>", xml_escape(&s));
        }
        let _ = writeln!(cases, "    </testcase>");
    }
    let n = report.captures.len();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"pcapsleuth\" tests=\"{n}\" failures=\"{failures}\" errors=\"{errors}\">"
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"pcapsleuth check\" tests=\"{n}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"0\">"
    );
    let _ = writeln!(out, "    <properties>");
    let _ = writeln!(
        out,
        "      <property name=\"pcapsleuth_version\" value=\"{}\"/>",
        xml_escape(TOOL_VERSION)
    );
    let _ = writeln!(
        out,
        "      <property name=\"fail_on\" value=\"{}\"/>",
        threshold.as_str()
    );
    if let Some(q) = gate.fail_on_quality {
        let _ = writeln!(
            out,
            "      <property name=\"fail_on_quality\" value=\"{}\"/>",
            q.as_str()
        );
    }
    let _ = writeln!(out, "    </properties>");
    out.push_str(&cases);
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// Escape the message of a GitHub workflow command (`%`, CR, LF).
fn gh_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escape a property of a GitHub workflow command (also `:` and `,`).
fn gh_property(s: &str) -> String {
    gh_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// Render GitHub Actions workflow commands
/// (<https://docs.github.com/actions/reference/workflow-commands-for-github-actions>):
/// one `::error file=PATH,title=DETECTOR (SEVERITY)::DETAILS` per finding at
/// or above `threshold` (`::error` for findings of severity error, `::warning`
/// for warning, `::notice` for info), one `::error` per capture that could not
/// be read (or read only in part, unless `allow_incomplete`), with
/// [`CheckGate::fail_on_quality`] one `::error` per capture whose
/// capture-quality verdict reaches it, and a last
/// `::notice` line with the totals. DETAILS are those of a JUnit failure,
/// newlines escaped as `%0A`.
pub fn render_github(report: &Report, gate: &CheckGate, allow_incomplete: bool) -> String {
    let threshold = gate.fail_on;
    let mut out = String::new();
    let (mut shown, mut failed) = (0usize, 0usize);
    for c in &report.captures {
        let file = gh_property(&c.path);
        let fails = gate.failing(c);
        let bad_quality = quality_failure(c, gate);
        if !fails.is_empty() || bad_quality.is_some() {
            failed += 1;
        }
        if let Some((verdict, reasons)) = &bad_quality {
            let _ = writeln!(
                out,
                "::error file={file},title={}::{}",
                gh_property(&format!("pcapsleuth: capture quality {verdict}")),
                gh_data(reasons)
            );
        }
        for f in fails {
            shown += 1;
            let level = match f.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
                Severity::Info => "notice",
            };
            let title = gh_property(&format!("{} ({})", f.detector, f.severity.as_str()));
            let body = gh_data(finding_details(f).trim_end());
            let _ = writeln!(out, "::{level} file={file},title={title}::{body}");
        }
        if let Some(e) = &c.error {
            let _ = writeln!(
                out,
                "::error file={file},title=pcapsleuth: unreadable capture::{}",
                gh_data(e)
            );
        } else if let (Some(w), false) = (&c.incomplete, allow_incomplete) {
            let _ = writeln!(
                out,
                "::error file={file},title=pcapsleuth: capture read only in part::{}",
                gh_data(&w.message)
            );
        }
    }
    let _ = writeln!(
        out,
        "::notice title=pcapsleuth {}::{} of {} captures fail the gate (findings at or above {}) ({} findings shown)",
        gh_property(TOOL_VERSION),
        failed,
        report.captures.len(),
        threshold.as_str(),
        shown
    );
    out
}
