//! Markdown renderer: a ticket-ready report that renders cleanly on GitHub and
//! GitLab (CommonMark + GFM tables only; no HTML).

use crate::common::{evidence_value, flow, merged_from, severity_counts, source_frames};
use crate::model::{CaptureReport, Report};
use crate::time::{format_duration_s, format_ts_utc};
use pcapsleuth_core::Finding;
use std::fmt::Write as _;

/// Escape text for a GFM table cell or running text: backslash-escape the
/// characters that would start markup (`\ ` * _ [ ] < |`) and fold newlines
/// into spaces (a table row must stay on one line). `>` is left alone: it only
/// means something at the start of a line, and text never starts a line here.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '|' => {
                out.push('\\');
                out.push(ch);
            }
            '\n' | '\r' => out.push(' '),
            _ => out.push(ch),
        }
    }
    out
}

/// A code span that survives backticks in its content (CommonMark §6.1: use a
/// longer backtick run than any inside, padded with spaces). Not for table
/// cells: use [`cell_code`] there.
fn code(s: &str) -> String {
    let s = s.replace(['\n', '\r'], " ");
    let mut longest = 0;
    let mut run = 0;
    for ch in s.chars() {
        if ch == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    if longest == 0 && !s.is_empty() {
        return format!("`{s}`");
    }
    let fence = "`".repeat(longest + 1);
    format!("{fence} {s} {fence}")
}

/// A code span inside a GFM table cell: pipes are escaped (GFM §4.10 removes the
/// backslash before the code span is parsed).
fn cell_code(s: &str) -> String {
    code(&s.replace('|', "\\|"))
}

/// Prose from a detector (summary, remedy): text escaped as by [`esc`], but
/// balanced back-quoted spans (`` `ip route ...` ``) kept as code spans. With
/// an odd number of backticks everything is escaped. `in_cell` escapes pipes
/// inside code spans too.
fn prose(s: &str, in_cell: bool) -> String {
    let parts: Vec<&str> = s.split('`').collect();
    if parts.len() < 3 || parts.len() & 1 == 0 {
        return esc(s);
    }
    let mut out = String::new();
    for (i, part) in parts.iter().enumerate() {
        if i % 2 == 0 {
            out.push_str(&esc(part));
        } else if part.is_empty() {
            out.push_str("\\`\\`");
        } else if in_cell {
            out.push_str(&cell_code(part));
        } else {
            out.push_str(&code(part));
        }
    }
    out
}

/// Render the report as Markdown.
///
/// Structure: `# pcapsleuth report`, then per capture a `##` heading with a
/// facts table (file, for a merged set the files merged, format, interfaces,
/// span as UTC ISO-8601, packets, TCP streams), warnings and errors as a list, a findings table ordered by
/// severity (error first, then report order), and a `####` section per finding
/// (same numbering) with its summary, evidence table, remedy, frames (for a
/// merged set also as `file#frame`) and display filters in code spans.
pub fn render_markdown(report: &Report) -> String {
    let mut out = String::from("# pcapsleuth report\n");
    for c in &report.captures {
        out.push('\n');
        capture(&mut out, c);
    }
    out
}

fn capture(out: &mut String, c: &CaptureReport) {
    let _ = writeln!(out, "## {}\n", code(&c.path));
    out.push_str("| Fact | Value |\n|---|---|\n");
    let _ = writeln!(out, "| File | {} |", cell_code(&c.path));
    if let Some(m) = merged_from(c) {
        let _ = writeln!(out, "| Merged from | {} |", cell_code(&m));
    }
    let _ = writeln!(
        out,
        "| Format | {} |",
        c.format
            .as_deref()
            .map(esc)
            .unwrap_or_else(|| "unreadable".to_string())
    );
    let ifaces = if c.interfaces.is_empty() {
        "-".to_string()
    } else {
        c.interfaces
            .iter()
            .map(|i| match &i.name {
                Some(n) => format!("{}: {} ({})", i.id, esc(n), esc(&i.linktype)),
                None => format!("{}: {}", i.id, esc(&i.linktype)),
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let _ = writeln!(out, "| Interfaces | {ifaces} |");
    if c.packets > 0 {
        let _ = writeln!(
            out,
            "| Span | {} → {} ({}) |",
            format_ts_utc(c.first_ts_ns),
            format_ts_utc(c.last_ts_ns),
            format_duration_s(c.last_ts_ns.saturating_sub(c.first_ts_ns))
        );
    } else {
        out.push_str("| Span | - |\n");
    }
    let _ = writeln!(out, "| Packets | {} |", c.packets);
    let _ = writeln!(out, "| TCP streams | {} |", c.tcp_streams);
    let [e, w, i] = severity_counts(&c.findings);
    let _ = writeln!(out, "| Findings | {e} error, {w} warning, {i} info |");

    if c.error.is_some() || !c.warnings.is_empty() {
        out.push('\n');
        if let Some(err) = &c.error {
            let _ = writeln!(out, "- **Error:** {}", esc(err));
        }
        for wa in &c.warnings {
            let kind = serde_json::to_value(wa.kind)
                .map(|v| evidence_value(&v))
                .unwrap_or_default();
            let frame = wa.frame.map(|f| format!(", frame {f}")).unwrap_or_default();
            let at = if wa.kind.is_about_a_record() {
                format!(" at byte {}", wa.offset)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "- **Warning:** {}{at}{frame}: {}",
                code(&kind),
                esc(&wa.message)
            );
        }
    }

    out.push('\n');
    if c.findings.is_empty() {
        out.push_str("No findings.\n");
        return;
    }
    // Severity-descending, stable within a severity (report order).
    let mut order: Vec<&Finding> = c.findings.iter().collect();
    order.sort_by_key(|f| std::cmp::Reverse(f.severity));

    out.push_str("### Findings\n\n");
    out.push_str(
        "| # | Severity | Detector | tcp.stream | Flow | Summary |\n|---:|---|---|---:|---|---|\n",
    );
    for (n, f) in order.iter().enumerate() {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            n + 1,
            f.severity.as_str(),
            cell_code(&f.detector),
            f.tcp_stream
                .map(|s| s.to_string())
                .unwrap_or_else(|| "-".to_string()),
            f.flow
                .as_ref()
                .map(|fl| cell_code(&flow(fl)))
                .unwrap_or_else(|| "-".to_string()),
            prose(&f.summary, true)
        );
    }
    for (n, f) in order.iter().enumerate() {
        out.push('\n');
        finding(out, n + 1, f);
    }
}

fn finding(out: &mut String, n: usize, f: &Finding) {
    let stream = f
        .tcp_stream
        .map(|s| format!(" · tcp.stream {s}"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "#### {n}. {} · {}{stream}\n",
        f.severity.as_str(),
        esc(&f.detector)
    );
    let _ = writeln!(out, "{}\n", prose(&f.summary, false));
    if !f.evidence.is_empty() {
        out.push_str("| Evidence | Value |\n|---|---|\n");
        for (k, v) in &f.evidence {
            let value = match v {
                serde_json::Value::Array(_) | serde_json::Value::Object(_) => {
                    cell_code(&v.to_string())
                }
                other => esc(&evidence_value(other)),
            };
            let _ = writeln!(out, "| {} | {value} |", cell_code(k));
        }
        out.push('\n');
    }
    if !f.remedy.is_empty() {
        let _ = writeln!(out, "**Remedy:** {}\n", prose(&f.remedy, false));
    }
    if let Some(fl) = &f.flow {
        let _ = writeln!(out, "- Flow: {}", code(&flow(fl)));
    }
    let _ = writeln!(
        out,
        "- Time: {} → {} ({})",
        format_ts_utc(f.start_ts_ns),
        format_ts_utc(f.end_ts_ns),
        format_duration_s(f.end_ts_ns.saturating_sub(f.start_ts_ns))
    );
    if !f.frames.is_empty() {
        let frames = f
            .frames
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(out, "- Frames: {}", code(&frames));
    }
    if let Some(sf) = source_frames(f) {
        let _ = writeln!(out, "- Source frames (file#frame): {}", code(&sf));
    }
    if !f.wireshark_filter.is_empty() {
        let _ = writeln!(out, "- Wireshark filter: {}", code(&f.wireshark_filter));
    }
    if let Some(sf) = &f.stream_filter {
        let _ = writeln!(out, "- Stream filter: {}", code(sf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(esc("a|b*c_d\ne"), "a\\|b\\*c\\_d e");
        assert_eq!(
            prose("run `ip link | grep mtu` now_", false),
            "run `ip link | grep mtu` now\\_"
        );
        assert_eq!(prose("run `a|b`", true), "run `a\\|b`");
        assert_eq!(prose("odd ` tick", false), "odd \\` tick");
        assert_eq!(code("tcp.stream eq 1"), "`tcp.stream eq 1`");
        assert_eq!(code("a`b"), "`` a`b ``");
        assert_eq!(code("x|y"), "`x|y`");
        assert_eq!(cell_code("a || b"), "`a \\|\\| b`");
    }
}
