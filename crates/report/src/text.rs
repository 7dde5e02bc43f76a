//! Plain-text renderers for terminals (`--format text`, the default).

use crate::common::{
    endpoint, evidence_value, flow, merged_from, plural, severity_counts, source_frames,
};
use crate::group::{group_findings, Group};
use crate::model::{CaptureReport, Report};
use crate::time::{format_duration_s, format_ts_utc};
use crate::wire::{CaptureQualityReport, FlowReport, QualityReasonReport, QualityVerdictReport};
use pcapsleuth_core::{Finding, Severity};
use pcapsleuth_ledger::{human_duration, sum_cause_times};
use std::fmt::Write as _;

/// Options for [`render_text`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TextOptions {
    /// Emit ANSI SGR colour escapes (the CLI sets this only when stdout is a
    /// terminal and `NO_COLOR` is unset).
    pub color: bool,
}

/// ANSI styling that collapses to nothing when colour is off.
struct Style {
    on: bool,
}

impl Style {
    fn paint(&self, code: &str, s: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    fn severity(&self, sev: Severity) -> String {
        let label = format!("{:<7}", sev.as_str());
        let code = match sev {
            Severity::Error => "1;31",
            Severity::Warning => "33",
            Severity::Info => "36",
        };
        self.paint(code, &label)
    }
}

/// Render the report for a terminal.
///
/// Layout, per capture in report order:
///
/// ```text
/// == <path> (<format>, <span start> .. <span end>, <duration>)
///    merged from <file> (<format>, <n> frames), <file> (…)
/// <severity> <detector> tcp.stream <N> <client:port -> server:port> <summary>
///         <wireshark_filter>
///         frames: <file>#<frame>, <file>#<first>-<last>, …
///         <stream_filter>
///         remedy: <remedy>
/// <severity> <detector>  <n> findings from <client> to <n> services, e.g.: <first summary>
///         remedy: <remedy>
///         tcp.stream <N>  <client:port -> server:port>  <wireshark_filter>
///         …
/// capture warning: <kind> at byte <offset> (frame <n>): <message>
/// error: <error>
/// -- <packets> packets, <n> TCP streams, <n> findings (<e> error, <w> warning, <i> info)
/// ```
///
/// The flow is left out of a finding's line when its summary already names
/// both endpoints. Repeated findings of one detector on one service or
/// peer (at least [`crate::group::MIN_GROUP`]) are one group: a line with
/// the first member's summary, the remedy, and one line per member.
///
/// The `merged from` and `frames:` lines appear only for a merged set
/// (`--merge`): they name the files and, for each cited frame (in the order
/// of the filter), the file and that file's own frame number (runs of
/// consecutive frames of one file as `first-last`).
///
/// A blank line separates captures. Output is deterministic (no clock, no locale).
pub fn render_text(report: &Report, opts: &TextOptions) -> String {
    let mut out = String::new();
    for (i, c) in report.captures.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&render_capture_text(c, opts));
    }
    out
}

/// Text for one capture (a block of [`render_text`]), so a caller can print
/// captures as they finish.
pub fn render_capture_text(c: &CaptureReport, opts: &TextOptions) -> String {
    let st = Style { on: opts.color };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}",
        st.paint("1", &format!("== {}{}", c.path, header_facts(c)))
    );
    if let Some(m) = merged_from(c) {
        let _ = writeln!(out, "   merged from {m}");
    }
    for g in group_findings(&c.findings) {
        match g.peer {
            Some(_) => group_lines(&mut out, c, &g, &st),
            None => {
                if let Some(f) = g.members.first().and_then(|&i| c.findings.get(i)) {
                    finding_lines(&mut out, f, &st);
                }
            }
        }
    }
    for w in &c.warnings {
        let kind = serde_json::to_value(w.kind)
            .map(|v| evidence_value(&v))
            .unwrap_or_default();
        let frame = w.frame.map(|f| format!(" (frame {f})")).unwrap_or_default();
        let at = if w.kind.is_about_a_record() {
            format!(" at byte {}", w.offset)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{} {kind}{at}{frame}: {}",
            st.paint("33", "capture warning:"),
            w.message
        );
    }
    if let Some(e) = &c.error {
        let _ = writeln!(out, "{} {e}", st.paint("1;31", "error:"));
    }
    if let Some(q) = c
        .capture_quality
        .as_ref()
        .filter(|q| q.verdict != QualityVerdictReport::Trustworthy)
    {
        let _ = writeln!(
            out,
            "{} {}: {}",
            st.paint("33", "capture quality:"),
            q.verdict.as_str(),
            quality_reasons(q)
        );
    }
    let [e, w, i] = severity_counts(&c.findings);
    let _ = writeln!(
        out,
        "-- {}, {}, {} ({e} error, {w} warning, {i} info)",
        plural(c.packets, "packet"),
        plural(c.tcp_streams, "TCP stream"),
        plural(c.findings.len() as u64, "finding"),
    );
    out
}

/// The reasons of a capture-quality verdict, `; `-separated, worst first.
pub(crate) fn quality_reasons(q: &CaptureQualityReport) -> String {
    q.reasons
        .iter()
        .map(QualityReasonReport::describe)
        .collect::<Vec<_>>()
        .join("; ")
}

/// ` (pcap, 2024-…Z .. 2024-…Z, 3.000 s)` or ` (unreadable)`.
fn header_facts(c: &CaptureReport) -> String {
    match &c.format {
        None => " (unreadable)".to_string(),
        Some(fmt) if c.packets == 0 => format!(" ({fmt}, no packets)"),
        Some(fmt) => format!(
            " ({fmt}, {} .. {}, {})",
            format_ts_utc(c.first_ts_ns),
            format_ts_utc(c.last_ts_ns),
            format_duration_s(c.last_ts_ns.saturating_sub(c.first_ts_ns))
        ),
    }
}

/// One finding: its line, filters, the files of its frames (merged set)
/// and its remedy.
fn finding_lines(out: &mut String, f: &Finding, st: &Style) {
    let _ = writeln!(out, "{}", finding_line(f, st));
    if !f.wireshark_filter.is_empty() {
        let _ = writeln!(out, "        {}", st.paint("2", &f.wireshark_filter));
    }
    if let Some(sf) = source_frames(f) {
        let _ = writeln!(out, "        {}", st.paint("2", &format!("frames: {sf}")));
    }
    if let Some(sf) = &f.stream_filter {
        let _ = writeln!(out, "        {}", st.paint("2", sf));
    }
    remedy_line(out, f, st);
}

fn remedy_line(out: &mut String, f: &Finding, st: &Style) {
    if !f.remedy.is_empty() {
        let _ = writeln!(out, "        {} {}", st.paint("32", "remedy:"), f.remedy);
    }
}

/// A group of repeated findings ([`group_findings`]): one line with the
/// count, the peer and the first member's summary, the remedy, then one
/// line per member (stream, flow, frames).
fn group_lines(out: &mut String, c: &CaptureReport, g: &Group, st: &Style) {
    let members: Vec<&Finding> = g
        .members
        .iter()
        .filter_map(|&i| c.findings.get(i))
        .collect();
    let Some(first) = members.first() else {
        return;
    };
    let flows: Vec<_> = members.iter().filter_map(|f| f.flow.as_ref()).collect();
    let mut services: Vec<String> = flows
        .iter()
        .map(|f| endpoint(&f.server, f.server_port))
        .collect();
    services.sort_unstable();
    services.dedup();
    let mut clients: Vec<&str> = flows.iter().map(|f| f.client.as_str()).collect();
    clients.sort_unstable();
    clients.dedup();
    let from = match clients.as_slice() {
        [one] => format!("from {one}"),
        many => format!("from {} clients", many.len()),
    };
    let to = match services.as_slice() {
        [one] => format!("to {one}"),
        many => format!("to {} services", many.len()),
    };
    let _ = writeln!(
        out,
        "{} {}  {} findings {from} {to}, e.g.: {}",
        st.severity(first.severity),
        first.detector,
        members.len(),
        first.summary
    );
    remedy_line(out, first, st);
    for f in &members {
        let mut line = String::new();
        if let Some(s) = f.tcp_stream {
            let _ = write!(line, "tcp.stream {s}  ");
        } else if let Some(s) = f.udp_stream {
            let _ = write!(line, "udp.stream {s}  ");
        }
        if let Some(fl) = &f.flow {
            let _ = write!(line, "{}  ", flow(fl));
        }
        line.push_str(&f.wireshark_filter);
        if let Some(sf) = source_frames(f) {
            let _ = write!(line, "  frames: {sf}");
        }
        let _ = writeln!(out, "        {}", st.paint("2", line.trim_end()));
    }
}

fn finding_line(f: &Finding, st: &Style) -> String {
    let mut line = format!("{} {}", st.severity(f.severity), f.detector);
    if let Some(s) = f.tcp_stream {
        let _ = write!(line, "  tcp.stream {s}");
    } else if let Some(s) = f.udp_stream {
        let _ = write!(line, "  udp.stream {s}");
    }
    // The flow once per line: not again when the summary names it.
    if let Some(fl) = &f.flow {
        let client = endpoint(&fl.client, fl.client_port);
        let server = endpoint(&fl.server, fl.server_port);
        if !(f.summary.contains(&client) && f.summary.contains(&server)) {
            let _ = write!(line, "  {}", flow(fl));
        }
    }
    let _ = write!(line, "  {}", f.summary);
    line
}

/// Format an optional ms value with three decimals, `-` when absent.
fn ms(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.3}"),
        _ => "-".to_string(),
    }
}

/// Render `pcapsleuth flows` as an aligned table per capture.
///
/// Columns: `stream`, `client`, `server`, `state` (Zeek `conn_state`), `pkts`
/// (both ways), `bytes` (IP bytes both ways), `dur_ms`, `rexmit` (all
/// retransmissions, our verdict), `zwin_ms` (time at zero window),
/// `hs_rtt_ms` (handshake RTT), `stall_ms` (longest stall). Each capture starts
/// with `== <path>` (for a merged set followed by `   merged from …`, as in
/// [`render_capture_text`]) and ends with a `-- <n> flows` line; unreadable
/// captures show `error:`. When the stall ledger found stalls, a
/// `time lost to stalls: …` line (the capture's latency budget by cause)
/// precedes the last line.
pub fn render_flows_text(report: &Report) -> String {
    let mut out = String::new();
    for (i, c) in report.captures.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "== {}", c.path);
        if let Some(m) = merged_from(c) {
            let _ = writeln!(out, "   merged from {m}");
        }
        if !c.flows.is_empty() {
            out.push_str(&flows_table(&c.flows));
        }
        if let Some(e) = &c.error {
            let _ = writeln!(out, "error: {e}");
        }
        if let Some(line) = time_lost_line(&c.flows) {
            let _ = writeln!(out, "{line}");
        }
        let _ = writeln!(out, "-- {}", plural(c.flows.len() as u64, "flow"));
    }
    out
}

/// The stall ledger's summary of a capture, when any flow stalled:
/// `time lost to stalls: 22.0 s in 2 flows: 12 path MTU stalls (22.0 s)`,
/// causes by descending time.
fn time_lost_line(flows: &[FlowReport]) -> Option<String> {
    let mut causes = sum_cause_times(flows.iter().flat_map(|f| f.time_lost_by_cause.iter()));
    if causes.is_empty() {
        return None;
    }
    causes.sort_by(|a, b| b.duration_ms.total_cmp(&a.duration_ms));
    let ns = |ms: f64| (ms * 1e6).round() as i64;
    let total: f64 = causes.iter().map(|c| c.duration_ms).sum();
    let stalled = flows
        .iter()
        .filter(|f| !f.time_lost_by_cause.is_empty())
        .count();
    let parts: Vec<String> = causes
        .iter()
        .map(|c| {
            let s = if c.stalls == 1 { "" } else { "s" };
            let d = human_duration(ns(c.duration_ms));
            format!("{} {}{s} ({d})", c.stalls, c.cause.label())
        })
        .collect();
    Some(format!(
        "time lost to stalls: {} in {}: {}",
        human_duration(ns(total)),
        plural(stalled as u64, "flow"),
        parts.join(", ")
    ))
}

fn flows_table(flows: &[FlowReport]) -> String {
    const HEAD: [&str; 11] = [
        "stream",
        "client",
        "server",
        "state",
        "pkts",
        "bytes",
        "dur_ms",
        "rexmit",
        "zwin_ms",
        "hs_rtt_ms",
        "stall_ms",
    ];
    let rows: Vec<[String; 11]> = flows
        .iter()
        .map(|f| {
            let state = f.state.as_str().to_string();
            [
                f.tcp_stream.to_string(),
                endpoint(&f.client, f.client_port),
                endpoint(&f.server, f.server_port),
                state,
                f.packets.to_string(),
                f.bytes.to_string(),
                ms(Some(f.duration_ms)),
                f.retransmissions.total.to_string(),
                ms(Some(f.zero_window_ms)),
                ms(f.handshake_rtt_ms),
                ms(Some(f.longest_stall_ms)),
            ]
        })
        .collect();
    let mut width = HEAD.map(str::len);
    for r in &rows {
        for (w, cell) in width.iter_mut().zip(r.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    // Text columns (client, server, state) left-aligned; numbers right-aligned.
    let left = |i: usize| (1..=3).contains(&i);
    let mut out = String::new();
    let mut push_row = |cells: &[String]| {
        let mut line = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let w = width[i];
            if left(i) {
                let _ = write!(line, "{cell:<w$}");
            } else {
                let _ = write!(line, "{cell:>w$}");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    };
    push_row(&HEAD.map(str::to_string));
    for r in &rows {
        push_row(r);
    }
    out
}
