//! `pcapsleuth`: offline pcap forensics that names why TCP connections stalled.
//!
//! Subcommands: `analyze` (report findings in text, JSON, JSON Lines,
//! Markdown or self-contained HTML), `check` (CI gate: exit status from finding severities), `flows`
//! (per-flow table; all three take `--merge` to analyse all inputs as one
//! capture set, numbered as `mergecap` would number the merged file), `annotate` (a pcapng copy of one capture with a packet
//! comment on every cited frame, for Wireshark), `explain` (what a detector
//! looks for) and `streams` (frame → `tcp.stream`, for comparison with tshark).
//!
//! Exit status: 0 success; 1 `check` found a finding at or above `--fail-on`;
//! 2 an input could not be read (the others are still reported), or a usage
//! error. A closed stdout (broken pipe, e.g. `| head`) counts as success.
//!
//! This is the only crate that uses clap; library crates never see its types.

mod inputs;

use clap::{Parser, Subcommand, ValueEnum};
use pcapsleuth_analyze::{analyze_merged, analyze_path, AnalyzeOptions};
use pcapsleuth_core::Severity;
use pcapsleuth_report::{
    render_capture_jsonl, render_capture_text, render_flows_json, render_flows_text, render_json,
    render_markdown, CaptureReport, Report, TextOptions, SCHEMA_VERSION,
};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

/// Exit status: success.
const EXIT_OK: i32 = 0;
/// Exit status: `check` found a finding at or above the threshold.
const EXIT_FINDINGS: i32 = 1;
/// Exit status: an input could not be read, or output could not be written.
const EXIT_INPUT: i32 = 2;

#[derive(Parser)]
#[command(
    name = "pcapsleuth",
    version,
    about = "Names why TCP connections stalled in a packet capture",
    after_help = "Exit status: 0 ok; 1 `check` found a finding at or above --fail-on; 2 an input could not be read."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// Output formats of `analyze`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// Human-readable, one line per finding.
    Text,
    /// One pretty-printed JSON document (schema_version 1).
    Json,
    /// One JSON object per finding per line, streamed as captures finish.
    Jsonl,
    /// Ticket-ready Markdown.
    Markdown,
    /// One self-contained HTML file (inline CSS and SVG graphs, no script, no
    /// external links). Needs -o FILE when stdout is a terminal; otherwise it
    /// is written to stdout (e.g. `> report.html`).
    Html,
}

/// Output formats of `flows`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FlowsFormat {
    /// Aligned table.
    Text,
    /// JSON document.
    Json,
}

/// `--fail-on` thresholds.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Threshold {
    /// Any finding fails.
    Info,
    /// Warnings and errors fail.
    Warning,
    /// Only errors fail.
    Error,
}

impl Threshold {
    fn severity(self) -> Severity {
        match self {
            Threshold::Info => Severity::Info,
            Threshold::Warning => Severity::Warning,
            Threshold::Error => Severity::Error,
        }
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Analyse captures and report findings.
    Analyze {
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Write the report to FILE instead of stdout (required for
        /// `--format html` when stdout is a terminal).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Treat all inputs as ONE capture set (e.g. per-interface captures of
        /// one incident): frames interleaved by time exactly as `mergecap`
        /// does, so frame numbers are those of `mergecap -w merged.pcapng
        /// INPUT...`; cited frames are also shown as file#frame.
        #[arg(long)]
        merge: bool,
        /// Worker threads (default: one per CPU). Output does not depend on it.
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
        /// Capture files, directories (searched recursively for *.pcap, *.pcapng,
        /// *.cap, optionally .gz) or `-` for stdin.
        #[arg(required = true, value_name = "INPUT")]
        inputs: Vec<PathBuf>,
    },
    /// One summary line per capture; exit 1 if a finding reaches --fail-on.
    Check {
        /// Lowest severity that fails the check.
        #[arg(long, value_enum, default_value_t = Threshold::Warning)]
        fail_on: Threshold,
        /// Treat all inputs as ONE capture set (e.g. per-interface captures of
        /// one incident): frames interleaved by time exactly as `mergecap`
        /// does, so frame numbers are those of `mergecap -w merged.pcapng
        /// INPUT...`; cited frames are also shown as file#frame.
        #[arg(long)]
        merge: bool,
        /// Worker threads (default: one per CPU).
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
        /// Capture files, directories or `-`.
        #[arg(required = true, value_name = "INPUT")]
        inputs: Vec<PathBuf>,
    },
    /// Per-flow summary (Zeek conn_state, retransmissions, stalls, RTT).
    Flows {
        /// Output format.
        #[arg(long, value_enum, default_value_t = FlowsFormat::Text)]
        format: FlowsFormat,
        /// Treat all inputs as ONE capture set, as `analyze --merge` does: one
        /// entry whose flows span the files. Frame numbers in the summaries
        /// (first/last frame, stall frames, sightings) are merged numbers,
        /// i.e. those of `mergecap -w merged.pcapng INPUT...`.
        #[arg(long)]
        merge: bool,
        /// Worker threads (default: one per CPU).
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
        /// Capture files, directories or `-`.
        #[arg(required = true, value_name = "INPUT")]
        inputs: Vec<PathBuf>,
    },
    /// Write a pcapng copy of INPUT with a packet comment on every frame a
    /// finding cites (filter `frame.comment` in Wireshark).
    #[command(
        after_help = "Frame numbers, bytes and nanosecond timestamps are preserved. INPUT is read twice (analysis, then copy), so it must be a file: `-` (stdin) is refused. Exit status: 0 written; 2 INPUT could not be read or OUT could not be written."
    )]
    Annotate {
        /// Output pcapng file (must not be INPUT).
        #[arg(short, long, value_name = "OUT.pcapng")]
        output: PathBuf,
        /// Capture file (pcap or pcapng, optionally .gz).
        #[arg(value_name = "INPUT")]
        input: PathBuf,
    },
    /// Explain what a detector looks for (or list detectors).
    Explain {
        /// Detector id, e.g. syn-retransmit.
        detector: Option<String>,
    },
    /// Debug: frame number and tcp.stream per line (as `tshark -T fields -e frame.number -e tcp.stream`).
    Streams {
        /// Capture file.
        input: PathBuf,
    },
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Analyze {
            format,
            output,
            merge,
            threads,
            inputs,
        } => cmd_analyze(format, output.as_deref(), merge, threads, &inputs),
        Cmd::Check {
            fail_on,
            merge,
            threads,
            inputs,
        } => cmd_check(fail_on, merge, threads, &inputs),
        Cmd::Flows {
            format,
            merge,
            threads,
            inputs,
        } => cmd_flows(format, merge, threads, &inputs),
        Cmd::Annotate { output, input } => cmd_annotate(&input, &output),
        Cmd::Explain { detector } => cmd_explain(detector.as_deref()),
        Cmd::Streams { input } => cmd_streams(&input),
    };
    std::process::exit(code);
}

/// Where output goes; write errors end the process (broken pipe = success).
struct Out {
    w: Box<dyn Write>,
}

impl Out {
    fn open(path: Option<&Path>) -> Result<Out, i32> {
        match path {
            None => Ok(Out {
                w: Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
            }),
            Some(p) => match std::fs::File::create(p) {
                Ok(f) => Ok(Out {
                    w: Box::new(std::io::BufWriter::new(f)),
                }),
                Err(e) => {
                    eprintln!("pcapsleuth: cannot create {}: {e}", p.display());
                    Err(EXIT_INPUT)
                }
            },
        }
    }

    /// Write and flush (so streamed output appears as soon as it is ready).
    fn put(&mut self, s: &str) {
        if let Err(e) = self.w.write_all(s.as_bytes()).and_then(|()| self.w.flush()) {
            exit_on_write_error(e);
        }
    }
}

fn exit_on_write_error(e: std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(EXIT_OK);
    }
    eprintln!("pcapsleuth: write error: {e}");
    std::process::exit(EXIT_INPUT);
}

/// Colour only when stdout is a terminal and `NO_COLOR` is unset or empty
/// (<https://no-color.org>).
fn use_color() -> bool {
    std::io::stdout().is_terminal()
        && !matches!(std::env::var_os("NO_COLOR"), Some(v) if !v.is_empty())
}

/// Expand inputs; report directories without captures on stderr.
fn expand_inputs(inputs: &[PathBuf]) -> (Vec<PathBuf>, bool) {
    let (paths, empty) = inputs::expand(inputs);
    for d in &empty {
        eprintln!(
            "pcapsleuth: {}: no capture files (*.pcap, *.pcapng, *.cap[.gz]) found",
            d.display()
        );
    }
    (paths, !empty.is_empty())
}

/// Analyse `paths` on a pool of `threads` workers and hand each report to
/// `emit` in input order, as soon as it and all before it are done.
fn analyze_ordered(
    paths: &[PathBuf],
    opts: &AnalyzeOptions,
    threads: Option<usize>,
    mut emit: impl FnMut(CaptureReport),
) -> Result<(), i32> {
    use rayon::prelude::*;
    let pool = match rayon::ThreadPoolBuilder::new()
        .num_threads(threads.unwrap_or(0))
        .build()
    {
        Ok(p) => p,
        Err(e) => {
            eprintln!("pcapsleuth: cannot start worker threads: {e}");
            return Err(EXIT_INPUT);
        }
    };
    let bar = (paths.len() > 1 && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(paths.len() as u64),
            indicatif::ProgressDrawTarget::stderr(),
        );
        if let Ok(style) =
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} captures {wide_msg}")
        {
            bar.set_style(style);
        }
        bar
    });
    let (tx, rx) = std::sync::mpsc::channel::<(usize, CaptureReport)>();
    std::thread::scope(|s| {
        s.spawn(move || {
            pool.install(|| {
                paths
                    .par_iter()
                    .enumerate()
                    .for_each_with(tx, |tx, (i, p)| {
                        let _ = tx.send((i, analyze_path(p, opts)));
                    });
            });
        });
        let mut pending = BTreeMap::new();
        let mut next = 0usize;
        for (i, report) in rx {
            if let Some(b) = &bar {
                b.set_message(report.path.clone());
                b.inc(1);
            }
            pending.insert(i, report);
            while let Some(r) = pending.remove(&next) {
                emit(r);
                next += 1;
            }
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(())
}

/// With `merge`, analyse all `paths` as one merged set and hand its single
/// report to `emit` (nothing when there is no path); otherwise as
/// [`analyze_ordered`].
fn analyze_inputs(
    paths: &[PathBuf],
    opts: &AnalyzeOptions,
    merge: bool,
    threads: Option<usize>,
    mut emit: impl FnMut(CaptureReport),
) -> Result<(), i32> {
    if !merge {
        return analyze_ordered(paths, opts, threads, emit);
    }
    if !paths.is_empty() {
        emit(analyze_merged(paths, opts));
    }
    Ok(())
}

fn cmd_analyze(
    format: Format,
    output: Option<&Path>,
    merge: bool,
    threads: Option<usize>,
    inputs: &[PathBuf],
) -> i32 {
    if format == Format::Html && output.is_none() && std::io::stdout().is_terminal() {
        eprintln!("pcapsleuth: --format html needs -o FILE (or redirect stdout to a file)");
        return EXIT_INPUT;
    }
    let (paths, mut failed) = expand_inputs(inputs);
    let mut out = match Out::open(output) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let color = output.is_none() && use_color();
    let text_opts = TextOptions { color };
    let mut captures = Vec::new();
    let mut first = true;
    let res = analyze_inputs(&paths, &AnalyzeOptions::default(), merge, threads, |c| {
        if let Some(e) = &c.error {
            failed = true;
            if format != Format::Text || output.is_some() {
                eprintln!("pcapsleuth: error: {e}");
            }
        }
        match format {
            Format::Jsonl => out.put(&render_capture_jsonl(&c)),
            Format::Text => {
                if !first {
                    out.put("\n");
                }
                out.put(&render_capture_text(&c, &text_opts));
            }
            Format::Json | Format::Markdown | Format::Html => captures.push(c),
        }
        first = false;
    });
    if let Err(code) = res {
        return code;
    }
    let report = Report {
        schema_version: SCHEMA_VERSION,
        captures,
    };
    match format {
        Format::Json => out.put(&render_json(&report)),
        Format::Markdown => out.put(&render_markdown(&report)),
        Format::Html => {
            // Re-reads each capture for the per-flow graphs (not stdin, not
            // merged sets: those findings are rendered without graphs).
            let series = pcapsleuth_html::series_for_report(&report);
            out.put(&pcapsleuth_html::render_html(&report, &series));
        }
        Format::Text | Format::Jsonl => {}
    }
    if failed {
        EXIT_INPUT
    } else {
        EXIT_OK
    }
}

/// `annotate`: analyse `input`, then write `output` (pcapng) with one packet
/// comment per citing finding on every cited frame. Summary on stderr.
fn cmd_annotate(input: &Path, output: &Path) -> i32 {
    if input == Path::new("-") {
        eprintln!(
            "pcapsleuth: annotate cannot read standard input: the capture is read twice \
             (analysis, then copy); save it to a file first"
        );
        return EXIT_INPUT;
    }
    let report = analyze_path(input, &AnalyzeOptions::default());
    if let Some(e) = &report.error {
        eprintln!("pcapsleuth: error: {e}");
        return EXIT_INPUT;
    }
    match pcapsleuth_annotate::annotate(input, &report, output) {
        Ok(st) => {
            let mut line = format!(
                "pcapsleuth: wrote {}: {} frame{}, {} annotated frame{}, {} comment{} from {} finding{}",
                output.display(),
                st.packets + st.placeholders,
                plural(st.packets + st.placeholders),
                st.annotated_packets,
                plural(st.annotated_packets),
                st.comments,
                plural(st.comments),
                report.findings.len(),
                plural(report.findings.len() as u64),
            );
            if st.placeholders > 0 {
                line.push_str(&format!(
                    "; {} non-packet record{} kept as placeholders",
                    st.placeholders,
                    plural(st.placeholders)
                ));
            }
            if st.missing_frames > 0 {
                line.push_str(&format!(
                    "; {} cited frame{} not in the input",
                    st.missing_frames,
                    plural(st.missing_frames)
                ));
            }
            if st.clamped_timestamps > 0 {
                line.push_str(&format!(
                    "; {} pre-1970 timestamp{} written as 0",
                    st.clamped_timestamps,
                    plural(st.clamped_timestamps)
                ));
            }
            eprintln!("{line}");
            EXIT_OK
        }
        Err(e) => {
            eprintln!("pcapsleuth: error: {e}");
            EXIT_INPUT
        }
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The `check` line for one capture, and whether it fails the threshold.
fn check_line(c: &CaptureReport, threshold: Severity) -> (String, bool) {
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
    let counts = format!(
        "{} finding{} ({} error, {} warning, {} info)",
        c.findings.len(),
        if c.findings.len() == 1 { "" } else { "s" },
        count(Severity::Error),
        count(Severity::Warning),
        count(Severity::Info)
    );
    // A read error does not discard what was analysed before it: the line
    // says ERROR (exit 2 wins) but still counts and names the findings.
    let verdict = match (&c.error, failing.is_empty()) {
        (Some(e), _) => format!("ERROR: {e}; {counts}"),
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

fn cmd_check(fail_on: Threshold, merge: bool, threads: Option<usize>, inputs: &[PathBuf]) -> i32 {
    let (paths, mut unreadable) = expand_inputs(inputs);
    let threshold = fail_on.severity();
    let mut out = match Out::open(None) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let mut failed = false;
    let res = analyze_inputs(&paths, &AnalyzeOptions::default(), merge, threads, |c| {
        let (line, fails) = check_line(&c, threshold);
        unreadable |= c.error.is_some();
        failed |= fails;
        out.put(&line);
        out.put("\n");
    });
    if let Err(code) = res {
        return code;
    }
    if unreadable {
        EXIT_INPUT
    } else if failed {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    }
}

fn cmd_flows(format: FlowsFormat, merge: bool, threads: Option<usize>, inputs: &[PathBuf]) -> i32 {
    let (paths, mut failed) = expand_inputs(inputs);
    let opts = AnalyzeOptions {
        with_flows: true,
        ..AnalyzeOptions::default()
    };
    let mut captures = Vec::new();
    let res = analyze_inputs(&paths, &opts, merge, threads, |c| {
        if let Some(e) = &c.error {
            failed = true;
            if format == FlowsFormat::Json {
                eprintln!("pcapsleuth: error: {e}");
            }
        }
        captures.push(c);
    });
    if let Err(code) = res {
        return code;
    }
    let report = Report {
        schema_version: SCHEMA_VERSION,
        captures,
    };
    let mut out = match Out::open(None) {
        Ok(o) => o,
        Err(code) => return code,
    };
    out.put(&match format {
        FlowsFormat::Text => with_sources_text(&render_flows_text(&report), &report),
        FlowsFormat::Json => with_sources_json(render_flows_json(&report), &report),
    });
    if failed {
        EXIT_INPUT
    } else {
        EXIT_OK
    }
}

/// The files of a merged set as `analyze` text shows them after its header:
/// `a.pcap (pcap, 12 frames), b.pcap (unreadable)`; `None` for one file.
fn merged_from(c: &CaptureReport) -> Option<String> {
    if c.sources.is_empty() {
        return None;
    }
    Some(
        c.sources
            .iter()
            .map(|s| match &s.format {
                Some(fmt) => format!(
                    "{} ({fmt}, {} frame{})",
                    s.path,
                    s.packets,
                    plural(s.packets)
                ),
                None => format!("{} (unreadable)", s.path),
            })
            .collect::<Vec<_>>()
            .join(", "),
    )
}

/// `flows` text with a `   merged from …` line (as in `analyze` text) after
/// the `== <path>` header of each merged capture. `text` is
/// [`render_flows_text`] of `report`, whose blocks each start with `== `.
fn with_sources_text(text: &str, report: &Report) -> String {
    let mut merged = report.captures.iter().map(merged_from);
    let mut out = String::with_capacity(text.len() + 128);
    for line in text.split_inclusive('\n') {
        out.push_str(line);
        if line.starts_with("== ") {
            if let Some(Some(m)) = merged.next() {
                out.push_str("   merged from ");
                out.push_str(&m);
                out.push('\n');
            }
        }
    }
    out
}

/// `flows` JSON with each merged capture's `sources` (as in `analyze` JSON)
/// added before its `flows`. `json` is [`render_flows_json`] of `report`;
/// it is returned unchanged when no capture is merged.
fn with_sources_json(json: String, report: &Report) -> String {
    if report.captures.iter().all(|c| c.sources.is_empty()) {
        return json;
    }
    let Ok(mut doc) = serde_json::from_str::<serde_json::Value>(&json) else {
        return json;
    };
    let Some(caps) = doc.get_mut("captures").and_then(|v| v.as_array_mut()) else {
        return json;
    };
    for (v, c) in caps.iter_mut().zip(&report.captures) {
        if c.sources.is_empty() {
            continue;
        }
        let (Some(obj), Ok(sources)) = (v.as_object_mut(), serde_json::to_value(&c.sources)) else {
            continue;
        };
        let flows = obj.remove("flows");
        obj.insert("sources".to_string(), sources);
        if let Some(f) = flows {
            obj.insert("flows".to_string(), f);
        }
    }
    match serde_json::to_string_pretty(&doc) {
        Ok(mut s) => {
            s.push('\n');
            s
        }
        Err(_) => json,
    }
}

fn detector_list() -> String {
    let infos = pcapsleuth_analyze::detector_infos();
    let width = infos.iter().map(|i| i.id.len()).max().unwrap_or(0);
    infos
        .iter()
        .map(|i| format!("  {:<width$}  {}\n", i.id, i.title))
        .collect()
}

fn cmd_explain(detector: Option<&str>) -> i32 {
    let mut out = match Out::open(None) {
        Ok(o) => o,
        Err(code) => return code,
    };
    match detector {
        None => {
            out.put("Detectors (pcapsleuth explain <ID> for details):\n");
            out.put(&detector_list());
            EXIT_OK
        }
        Some(id) => match pcapsleuth_analyze::detector_infos()
            .into_iter()
            .find(|i| i.id == id)
        {
            Some(info) => {
                out.put(&format!("{}: {}\n\n", info.id, info.title));
                out.put(&wrap(info.explain.trim_end(), 80));
                EXIT_OK
            }
            None => {
                eprint!(
                    "pcapsleuth: unknown detector '{id}'. Known detectors:\n{}",
                    detector_list()
                );
                EXIT_INPUT
            }
        },
    }
}

/// Word-wrap each line of `text` to `width` columns (lines starting with
/// whitespace, e.g. indented examples, are kept as they are). Ends with `\n`.
fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with(char::is_whitespace) || line.chars().count() <= width {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let mut col = 0;
        for word in line.split(' ').filter(|w| !w.is_empty()) {
            let n = word.chars().count();
            if col > 0 && col + 1 + n > width {
                out.push('\n');
                col = 0;
            } else if col > 0 {
                out.push(' ');
                col += 1;
            }
            out.push_str(word);
            col += n;
        }
        out.push('\n');
    }
    out
}

fn cmd_streams(input: &Path) -> i32 {
    let mut out = match Out::open(None) {
        Ok(o) => o,
        Err(code) => return code,
    };
    match pcapsleuth_analyze::dump_streams(input) {
        Ok(rows) => {
            let mut buf = String::new();
            for (frame, stream) in rows {
                buf.push_str(&frame.to_string());
                buf.push('\t');
                if let Some(s) = stream {
                    buf.push_str(&s.to_string());
                }
                buf.push('\n');
                if buf.len() > 64 * 1024 {
                    out.put(&buf);
                    buf.clear();
                }
            }
            out.put(&buf);
            EXIT_OK
        }
        Err(e) => {
            eprintln!("pcapsleuth: error: {e}");
            EXIT_INPUT
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_valid() {
        Cli::command().debug_assert();
    }

    #[test]
    fn wrapping() {
        assert_eq!(wrap("aaa bbb ccc", 7), "aaa bbb\nccc\n");
        assert_eq!(
            wrap("short\n  indented line that is long", 8),
            "short\n  indented line that is long\n"
        );
        assert_eq!(
            wrap("averyveryverylongword x", 5),
            "averyveryverylongword\nx\n"
        );
    }

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
            findings: vec![],
            flows: vec![],
            sources: vec![],
        };
        assert_eq!(
            check_line(&c, Severity::Info),
            (
                "a.pcap: ok: 0 findings (0 error, 0 warning, 0 info)".into(),
                false
            )
        );
        c.findings.push(pcapsleuth_core::Finding::new(
            "zero-window",
            Severity::Warning,
            "s".into(),
            None,
            None,
            vec![1],
            0,
            0,
            String::new(),
            Default::default(),
        ));
        assert!(check_line(&c, Severity::Warning).1);
        assert!(check_line(&c, Severity::Info).1);
        assert!(!check_line(&c, Severity::Error).1);
        assert_eq!(
            check_line(&c, Severity::Warning).0,
            "a.pcap: FAIL: 1 finding (0 error, 1 warning, 0 info); at or above warning: zero-window"
        );
        c.error = Some("boom".into());
        assert_eq!(
            check_line(&c, Severity::Info),
            (
                "a.pcap: ERROR: boom; 1 finding (0 error, 1 warning, 0 info); at or above info: zero-window"
                    .into(),
                true
            )
        );
    }
}
