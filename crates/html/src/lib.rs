//! A self-contained HTML report: `pcapsleuth analyze --format html -o report.html`.
//!
//! [`render_html`] produces **one** HTML file with inline CSS and inline SVG
//! and nothing else: no script, no external style sheet, font, image or
//! link, so it opens offline and can be mailed as is. Per capture it shows:
//!
//! - for a multi-capture report, a summary table first that is also the
//!   contents (one row per capture, linking to its section);
//! - the capture facts (format, packets, time span, interfaces, warnings);
//! - a table of the flows with findings (protocol, endpoints, stream,
//!   findings, detectors), each finding linked;
//! - when the report carries flows with a stall ledger, the time lost to
//!   stalls by cause as one stacked bar ([`budget::stacked_bar`]);
//! - a timeline of the findings (x = time since the first frame, one row per
//!   detector, each marker links to its finding);
//! - per finding its summary, remedy, evidence and display filters, and for a
//!   TCP finding a time–sequence ("Stevens") graph of its flow
//!   ([`svg::stevens`]), with the cited frames labelled by number and a
//!   legend of the series actually drawn; a `syn-retransmit` finding gets
//!   its SYN ladder instead ([`ladder::syn_ladder`]: attempts against time,
//!   with the expected retry schedule), a `cross-interface-loss` finding a
//!   picture of the path through the host ([`path::loss_path`]);
//! - per service (server `ip:port`) with at least
//!   [`MIN_HISTOGRAM_CONNECTIONS`] delayed connections a histogram of their
//!   connection-setup delays (evidence `delay_ms`); fewer are listed.
//!
//! The page is laid out to stay readable from 800 px wide: graphs are 800
//! user units wide with text of 11 px and up, long paths and filters wrap.
//!
//! The graphs need per-segment data which the [`Report`] deliberately does not
//! carry; [`collect_series`] (or [`series_for_report`]) re-reads each capture
//! for the streams with findings — see [`series`] for why. Passing no series
//! renders the report without graphs.
//!
//! All text from the capture or the report is escaped ([`svg::esc`]).

pub mod budget;
pub mod ladder;
pub mod path;
pub mod series;
pub mod svg;

pub use series::{collect_series, FlowMarker, FlowSeries, MarkerKind, SeriesError, SeriesPoint};

use pcapsleuth_core::Finding;
use pcapsleuth_report::{format_duration_s, format_ts_utc, CaptureReport, Report};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use svg::esc;

/// Streams (`tcp.stream`) cited by a capture's findings, ascending, deduplicated.
pub fn finding_streams(c: &CaptureReport) -> Vec<u64> {
    let mut v: Vec<u64> = c.findings.iter().filter_map(|f| f.tcp_stream).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// [`collect_series`] for every capture of `report` that has TCP findings and
/// can be re-read. Skipped (their findings are rendered without graphs):
/// stdin (`-`), captures that cannot be re-read, and merged capture sets
/// (`sources` non-empty), whose stream ids belong to the merged set.
pub fn series_for_report(report: &Report) -> Vec<FlowSeries> {
    let mut out = Vec::new();
    for c in &report.captures {
        let streams = finding_streams(c);
        if streams.is_empty() || c.path == "-" || !c.sources.is_empty() {
            continue;
        }
        if let Ok(s) = collect_series(Path::new(&c.path), &streams) {
            out.extend(s);
        }
    }
    out
}

/// Fewest delayed connections of one service for which a delay histogram is
/// drawn; a histogram of fewer bars says nothing a list does not.
pub const MIN_HISTOGRAM_CONNECTIONS: usize = 5;

const CSS: &str = r#"
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;padding:0 16px;max-width:1000px;color:#212529;background:#fff;line-height:1.45;font-size:15px}
h1,h2,h3,p,table.facts td{overflow-wrap:anywhere}
h1{font-size:1.5em;margin:0 0 .3em} h2{font-size:1.25em;border-bottom:2px solid #dee2e6;padding-bottom:.2em;margin-top:1.6em}
table.list{border-collapse:collapse;margin:.5em 0;font-size:.92em} table.list th{white-space:nowrap} table.list td.ep{white-space:nowrap}
@media (max-width:840px){table.list td.ep{white-space:normal}} table.list td,table.list th{border:1px solid #dee2e6;padding:3px 6px;text-align:left;vertical-align:top}
table.list th{background:#f1f3f5;font-weight:600} table.list td.n{text-align:right;white-space:nowrap}
@media (max-width:840px){body{margin:12px auto;padding:0 10px;font-size:14px} .finding{padding:8px 10px}}
h3{font-size:1.05em;margin:.2em 0}
table.facts{border-collapse:collapse;margin:.5em 0} table.facts td,table.facts th{border:1px solid #dee2e6;padding:3px 8px;text-align:left;vertical-align:top}
table.facts th{background:#f1f3f5;font-weight:600}
.finding{border:1px solid #ced4da;border-left:6px solid #868e96;border-radius:4px;padding:10px 14px;margin:14px 0}
.finding.error{border-left-color:#c92a2a} .finding.warning{border-left-color:#e67700} .finding.info{border-left-color:#1971c2}
.sev{display:inline-block;color:#fff;border-radius:3px;padding:0 6px;font-size:.85em;font-weight:600;text-transform:uppercase}
.sev.error{background:#c92a2a} .sev.warning{background:#e67700} .sev.info{background:#1971c2}
code{background:#f1f3f5;padding:1px 4px;border-radius:3px;font-size:.92em;overflow-wrap:anywhere}
.remedy{background:#ebfbee;border:1px solid #b2f2bb;padding:6px 10px;border-radius:4px}
.legend span{display:inline-block;margin-right:14px;font-size:.9em;white-space:nowrap}
.legend i{display:inline-block;width:18px;height:4px;vertical-align:middle;margin-right:4px}
.muted{color:#868e96} svg{max-width:100%;height:auto;display:block;margin:6px 0}
details summary{cursor:pointer;color:#495057}
"#;

/// Render the whole report as one self-contained HTML document (UTF-8).
/// `series` are the per-flow series of the findings' streams (from
/// [`collect_series`] / [`series_for_report`]), matched to findings by
/// capture path and `tcp.stream`; findings without a series get no graph.
pub fn render_html(report: &Report, series: &[FlowSeries]) -> String {
    let mut o = String::with_capacity(64 * 1024);
    o.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    o.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let title = match report.captures.as_slice() {
        [one] => format!("pcapsleuth report: {}", one.path),
        many => format!("pcapsleuth report: {} captures", many.len()),
    };
    let _ = writeln!(o, "<title>{}</title>", esc(&title));
    let _ = writeln!(o, "<style>{CSS}</style>\n</head>\n<body>");
    let _ = writeln!(o, "<h1>{}</h1>", esc(&title));
    let total: usize = report.captures.iter().map(|c| c.findings.len()).sum();
    let _ = writeln!(
        o,
        "<p class=\"muted\">Generated by pcapsleuth {} · schema_version {} · {} capture(s) · {} finding(s). Frame numbers are Wireshark's <code>frame.number</code>; stream ids its <code>tcp.stream</code> and <code>udp.stream</code>.</p>",
        esc(pcapsleuth_report::TOOL_VERSION),
        report.schema_version,
        report.captures.len(),
        total
    );
    if report.captures.len() > 1 {
        render_summary(&mut o, report);
    }
    for (ci, c) in report.captures.iter().enumerate() {
        render_capture(&mut o, ci, c, series);
    }
    o.push_str("</body>\n</html>\n");
    o
}

/// The summary table of a multi-capture report, which is also its contents:
/// one row per capture (linked to its section) with packets, duration and
/// findings per severity and detector.
fn render_summary(o: &mut String, report: &Report) {
    o.push_str("<h2 id=\"contents\">Summary and contents</h2>\n<table class=\"list summary\"><tr><th>#</th><th>capture</th><th>packets</th><th>duration</th><th>errors</th><th>warnings</th><th>info</th><th>detectors</th></tr>\n");
    for (ci, c) in report.captures.iter().enumerate() {
        let by = |sev: &str| {
            c.findings
                .iter()
                .filter(|f| f.severity.as_str() == sev)
                .count()
        };
        let mut dets: BTreeMap<&str, usize> = BTreeMap::new();
        for f in &c.findings {
            *dets.entry(f.detector.as_str()).or_default() += 1;
        }
        let dets: Vec<String> = dets.iter().map(|(d, n)| format!("{d} ×{n}")).collect();
        let duration = if c.packets > 0 {
            format_duration_s(c.last_ts_ns.saturating_sub(c.first_ts_ns))
        } else {
            "–".to_string()
        };
        let status = c
            .error
            .as_ref()
            .map(|e| format!(" <span class=\"muted\">({})</span>", esc(e)))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "<tr><td class=\"n\">{}</td><td class=\"ep\"><a href=\"#capture-{ci}\">{}</a>{status}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            ci + 1,
            esc(&c.path),
            c.packets,
            esc(&duration),
            by("error"),
            by("warning"),
            by("info"),
            esc(&dets.join(", "))
        );
    }
    o.push_str("</table>\n");
}

/// One row of the flows table: a conversation cited by findings.
struct FlowRow<'a> {
    protocol: &'a str,
    client: String,
    server: String,
    stream: Option<u64>,
    findings: Vec<(usize, &'a Finding)>,
}

fn endpoint(a: &str, p: u16) -> String {
    if a.contains(':') {
        format!("[{a}]:{p}")
    } else {
        format!("{a}:{p}")
    }
}

/// `s` escaped, with a line-break opportunity (`<wbr>`) after every `:` so
/// an IPv6 endpoint wraps between groups, not inside one.
fn wrap_colons(s: &str) -> String {
    esc(s).replace(':', ":<wbr>")
}

/// The table of the flows (conversations) the capture's findings name, in
/// order of first citation, with the findings linked.
fn render_flows(o: &mut String, ci: usize, c: &CaptureReport) {
    let mut rows: Vec<FlowRow<'_>> = Vec::new();
    for (fi, f) in c.findings.iter().enumerate() {
        let Some(fl) = &f.flow else { continue };
        let stream = f.tcp_stream.or(f.udp_stream);
        let proto = fl.protocol.as_str();
        // ICMP has no ports: the address alone.
        let ported = matches!(proto, "tcp" | "udp");
        let (client, server) = if ported {
            (
                endpoint(&fl.client, fl.client_port),
                endpoint(&fl.server, fl.server_port),
            )
        } else {
            (fl.client.clone(), fl.server.clone())
        };
        match rows.iter_mut().find(|r| {
            r.protocol == proto && r.client == client && r.server == server && r.stream == stream
        }) {
            Some(r) => r.findings.push((fi, f)),
            None => rows.push(FlowRow {
                protocol: proto,
                client,
                server,
                stream,
                findings: vec![(fi, f)],
            }),
        }
    }
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "<h3>Flows with findings ({})</h3>\n<table class=\"list flows\"><tr><th>protocol</th><th>client</th><th>server</th><th>stream</th><th>findings</th><th>detectors</th></tr>",
        rows.len()
    );
    for r in &rows {
        let links: Vec<String> = r
            .findings
            .iter()
            .map(|(fi, _)| format!("<a href=\"#f-{ci}-{fi}\">#{}</a>", fi + 1))
            .collect();
        let mut dets: Vec<&str> = Vec::new();
        for (_, f) in &r.findings {
            if !dets.contains(&f.detector.as_str()) {
                dets.push(f.detector.as_str());
            }
        }
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td class=\"ep\">{}</td><td class=\"ep\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
            esc(r.protocol),
            wrap_colons(&r.client),
            wrap_colons(&r.server),
            r.stream.map(|s| s.to_string()).unwrap_or_default(),
            links.join(" "),
            esc(&dets.join(", "))
        );
    }
    o.push_str("</table>\n");
}

fn render_capture(o: &mut String, ci: usize, c: &CaptureReport, series: &[FlowSeries]) {
    let _ = writeln!(
        o,
        "<section id=\"capture-{ci}\">\n<h2>{}</h2>",
        esc(&c.path)
    );
    o.push_str("<table class=\"facts\">");
    let row = |o: &mut String, k: &str, v: &str| {
        let _ = write!(o, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
    };
    row(o, "format", c.format.as_deref().unwrap_or("unreadable"));
    row(o, "packets", &c.packets.to_string());
    if c.packets > 0 {
        row(o, "first frame", &format_ts_utc(c.first_ts_ns));
        row(o, "last frame", &format_ts_utc(c.last_ts_ns));
        row(
            o,
            "duration",
            &format_duration_s(c.last_ts_ns.saturating_sub(c.first_ts_ns)),
        );
    }
    let ifaces: Vec<String> = c
        .interfaces
        .iter()
        .map(|i| {
            format!(
                "{}: {} ({})",
                i.id,
                i.name.as_deref().unwrap_or("unnamed"),
                i.linktype
            )
        })
        .collect();
    row(o, "interfaces", &ifaces.join("; "));
    row(o, "TCP streams", &c.tcp_streams.to_string());
    row(o, "findings", &c.findings.len().to_string());
    for w in &c.warnings {
        row(
            o,
            "warning",
            &format!("{} (byte offset {})", w.message, w.offset),
        );
    }
    if let Some(e) = &c.error {
        row(o, "error", e);
    }
    o.push_str("</table>\n");
    if let Some(bar) = budget::stacked_bar(c) {
        o.push_str("<h3>Time lost to stalls, by cause</h3>\n");
        o.push_str(&bar);
        o.push('\n');
    }
    if c.findings.is_empty() {
        o.push_str("<p>No findings.</p>\n</section>\n");
        return;
    }
    let prefix = format!("f-{ci}-");
    o.push_str("<h3>Timeline of findings</h3>\n");
    o.push_str(&svg::timeline(
        &c.findings,
        c.first_ts_ns,
        c.last_ts_ns,
        &prefix,
    ));
    o.push('\n');
    render_flows(o, ci, c);
    render_histograms(o, c);
    for (fi, f) in c.findings.iter().enumerate() {
        let s = f.tcp_stream.and_then(|st| {
            series
                .iter()
                .find(|s| s.stream == st && s.capture == c.path)
        });
        render_finding(o, ci, fi, f, s);
    }
    o.push_str("</section>\n");
}

/// Per service (evidence `service`, else the flow's server `ip:port`) the
/// `delay_ms` of its `syn-retransmit` findings.
fn syn_delays_by_service(c: &CaptureReport) -> BTreeMap<String, (Vec<f64>, Option<u64>)> {
    let mut m: BTreeMap<String, (Vec<f64>, Option<u64>)> = BTreeMap::new();
    for f in c.findings.iter().filter(|f| f.detector == "syn-retransmit") {
        let Some(d) = f.evidence.get("delay_ms").and_then(|v| v.as_f64()) else {
            continue;
        };
        let service = f
            .evidence
            .get("service")
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .or_else(|| {
                f.flow.as_ref().map(|fl| {
                    if fl.server.contains(':') {
                        format!("[{}]:{}", fl.server, fl.server_port)
                    } else {
                        format!("{}:{}", fl.server, fl.server_port)
                    }
                })
            });
        let Some(service) = service else { continue };
        let e = m.entry(service).or_default();
        e.0.push(d);
        if let Some(n) = f
            .evidence
            .get("service_connections")
            .and_then(|v| v.as_u64())
        {
            e.1 = Some(n);
        }
    }
    m
}

fn render_histograms(o: &mut String, c: &CaptureReport) {
    let by = syn_delays_by_service(c);
    if by.is_empty() {
        return;
    }
    o.push_str("<h3>Connection-setup delays per service (syn-retransmit)</h3>\n");
    let mut few: Vec<String> = Vec::new();
    for (service, (delays, total)) in &by {
        let of = total
            .map(|t| format!(" of {t} connections seen"))
            .unwrap_or_default();
        let title = format!("{service}: {} delayed connection(s){of}", delays.len());
        if delays.len() < MIN_HISTOGRAM_CONNECTIONS {
            let list: Vec<String> = delays.iter().map(|d| format!("{d:.0} ms")).collect();
            few.push(format!("{title}: {}", list.join(", ")));
            continue;
        }
        o.push_str(&svg::histogram(delays, &title));
        o.push('\n');
    }
    if !few.is_empty() {
        o.push_str("<ul class=\"few-delays\">");
        for f in &few {
            let _ = write!(o, "<li>{}</li>", esc(f));
        }
        o.push_str("</ul>\n");
    }
}

/// A time window around the finding (ns) when it covers less than a quarter
/// of its flow's duration, so the cited frames get a readable close-up:
/// the finding's span padded by half its length, 3 % of the flow or 1 ms,
/// whichever is largest, on each side, kept inside the flow's time range.
fn zoom_window(f: &Finding, s: &FlowSeries) -> Option<(i64, i64)> {
    let first = s.points.first()?.ts_ns;
    let last = s.points.last()?.ts_ns;
    let flow_span = last.saturating_sub(first);
    let span = f.end_ts_ns.saturating_sub(f.start_ts_ns).max(0);
    if flow_span <= 0 || span.saturating_mul(4) >= flow_span {
        return None;
    }
    let pad = (span / 2).max(flow_span / 33).max(1_000_000);
    // Inside the flow: no empty time before its first or after its last
    // segment (the axis would start below 0).
    let start = f.start_ts_ns.saturating_sub(pad).max(first);
    let end = f.end_ts_ns.saturating_add(pad).min(last).max(start + 1);
    Some((start, end))
}

fn render_finding(o: &mut String, ci: usize, fi: usize, f: &Finding, s: Option<&FlowSeries>) {
    let sev = f.severity.as_str();
    let _ = writeln!(o, "<div class=\"finding {sev}\" id=\"f-{ci}-{fi}\">");
    let _ = writeln!(
        o,
        "<h3><span class=\"sev {sev}\">{sev}</span> #{} {}{}</h3>",
        fi + 1,
        esc(&f.detector),
        f.tcp_stream
            .map(|s| format!(" · tcp.stream {s}"))
            .unwrap_or_default()
    );
    let _ = writeln!(o, "<p>{}</p>", esc(&f.summary));
    o.push_str("<table class=\"facts\">");
    if let Some(fl) = &f.flow {
        let ep = |a: &str, p: u16| {
            if a.contains(':') {
                format!("[{a}]:{p}")
            } else {
                format!("{a}:{p}")
            }
        };
        let _ = write!(
            o,
            "<tr><th>flow</th><td>{} {} → {}</td></tr>",
            esc(fl.protocol.as_str()),
            esc(&ep(&fl.client, fl.client_port)),
            esc(&ep(&fl.server, fl.server_port))
        );
    }
    let _ = write!(
        o,
        "<tr><th>time</th><td>{} – {} ({})</td></tr>",
        esc(&format_ts_utc(f.start_ts_ns)),
        esc(&format_ts_utc(f.end_ts_ns)),
        esc(&format_duration_s(
            f.end_ts_ns.saturating_sub(f.start_ts_ns)
        ))
    );
    let _ = write!(
        o,
        "<tr><th>frames</th><td>{}</td></tr>",
        esc(&svg::frames_text(&f.frames, 200))
    );
    let _ = write!(
        o,
        "<tr><th>Wireshark filter</th><td><code>{}</code></td></tr>",
        esc(&f.wireshark_filter)
    );
    if let Some(sf) = &f.stream_filter {
        let _ = write!(
            o,
            "<tr><th>stream filter</th><td><code>{}</code></td></tr>",
            esc(sf)
        );
    }
    o.push_str("</table>\n");
    if !f.remedy.is_empty() {
        let _ = writeln!(
            o,
            "<p class=\"remedy\"><b>Remedy:</b> {}</p>",
            esc(&f.remedy)
        );
    }
    let uid = format!("{ci}-{fi}");
    if f.detector == "cross-interface-loss" {
        if let Some(p) = path::loss_path(f, &uid) {
            o.push_str(&p);
            o.push('\n');
        }
    }
    let ladder = (f.detector == "syn-retransmit")
        .then(|| ladder::syn_ladder(f, s, &uid))
        .flatten();
    let packet = f.evidence.get("packet").and_then(|v| v.as_str());
    // A lost handshake packet has no data to plot: the path says it all.
    let no_stevens = f.detector == "cross-interface-loss" && packet != Some("tcp-segment");
    if let Some(l) = ladder {
        o.push_str(&l);
        o.push('\n');
    } else if let (Some(s), false) = (s, no_stevens) {
        let (g, mut drawn) = svg::stevens_drawn(f, s, &uid, None);
        o.push_str(&g);
        o.push('\n');
        if let Some(win) = zoom_window(f, s) {
            let (g, d) = svg::stevens_drawn(f, s, &format!("{uid}-zoom"), Some(win));
            drawn = drawn.merge(d);
            o.push_str(&g);
            o.push('\n');
        }
        let _ = writeln!(o, "{}", drawn.legend());
    } else if f.tcp_stream.is_some() && s.is_none() && !no_stevens {
        o.push_str("<p class=\"muted\">No time–sequence graph: the capture was not re-read for this report.</p>\n");
    }
    if !f.evidence.is_empty() {
        o.push_str("<details><summary>Evidence</summary><table class=\"facts\">");
        for (k, v) in &f.evidence {
            let val = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let _ = write!(o, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(&val));
        }
        o.push_str("</table></details>\n");
    }
    o.push_str("</div>\n");
}
