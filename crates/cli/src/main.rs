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
//! 2 an input could not be read (the others are still reported), `check` read
//! a capture only in part (unless `--allow-incomplete`), or a usage error. A closed stdout (broken pipe, e.g. `| head`) counts as success.
//!
//! This is the only crate that uses clap; library crates never see its types.

mod inputs;

use clap::{Parser, Subcommand, ValueEnum};
use pcapsleuth_analyze::{analyze_path, AnalyzeOptions, RunOptions};
use pcapsleuth_core::Severity;
use pcapsleuth_report::{
    render_capture_jsonl, render_capture_text, render_check_line, render_detector_list,
    render_explain, render_flows_json, render_flows_text, render_json, render_markdown,
    CaptureReport, DetectorDoc, Report, TextOptions, SCHEMA_VERSION,
};
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
    after_help = "Exit status: 0 ok; 1 `check` found a finding at or above --fail-on; 2 an input could not be read (for `check`, also read only in part, unless --allow-incomplete), or a usage error."
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
        /// Do not fail (exit 2) on a capture read only in part (a record cut
        /// short or malformed: the line still says INCOMPLETE).
        #[arg(long)]
        allow_incomplete: bool,
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
        /// Write the table to FILE instead of stdout (never over an input).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
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
            allow_incomplete,
            merge,
            threads,
            inputs,
        } => cmd_check(fail_on, allow_incomplete, merge, threads, &inputs),
        Cmd::Flows {
            format,
            output,
            merge,
            threads,
            inputs,
        } => cmd_flows(format, output.as_deref(), merge, threads, &inputs),
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

/// Refuse `-` (standard input) given more than once: stdin can be read only
/// once (`--merge - -` would read it twice).
fn check_stdin_once(inputs: &[PathBuf]) -> Result<(), i32> {
    let n = inputs.iter().filter(|i| i.as_os_str() == "-").count();
    if n > 1 {
        eprintln!(
            "pcapsleuth: `-` (standard input) given {n} times: standard input can be read only once; save the captures to files"
        );
        return Err(EXIT_INPUT);
    }
    Ok(())
}

/// Refuse to write the report to `output` when it is one of the inputs
/// (`analyze -o X X` would truncate the capture before reading it), as
/// `annotate` does.
fn check_not_an_input(output: Option<&Path>, inputs: &[PathBuf]) -> Result<(), i32> {
    let Some(out) = output else {
        return Ok(());
    };
    if let Some(i) = inputs.iter().find(|i| inputs::same_file(i, out)) {
        eprintln!(
            "pcapsleuth: refusing to write the report over the input capture {} (-o {}): choose another output file",
            i.display(),
            out.display()
        );
        return Err(EXIT_INPUT);
    }
    Ok(())
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

/// A progress bar on stderr while several captures are analysed, only
/// when stderr is a terminal.
fn progress_bar(captures: usize) -> Option<indicatif::ProgressBar> {
    (captures > 1 && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(captures as u64),
            indicatif::ProgressDrawTarget::stderr(),
        );
        if let Ok(style) =
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} captures {wide_msg}")
        {
            bar.set_style(style);
        }
        bar
    })
}

/// [`pcapsleuth_analyze::analyze_inputs`] with a progress bar: each report
/// goes to `emit` in input order (one merged report with `merge`).
fn analyze_inputs(
    paths: &[PathBuf],
    opts: &AnalyzeOptions,
    merge: bool,
    threads: Option<usize>,
    emit: impl FnMut(CaptureReport),
) -> Result<(), i32> {
    let bar = if merge {
        None
    } else {
        progress_bar(paths.len())
    };
    let done = |r: &CaptureReport| {
        if let Some(b) = &bar {
            b.set_message(r.path.clone());
            b.inc(1);
        }
    };
    let run = RunOptions { merge, threads };
    let res = pcapsleuth_analyze::analyze_inputs(paths, opts, run, done, emit);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    res.map_err(|e| {
        eprintln!("pcapsleuth: {e}");
        EXIT_INPUT
    })
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
    if let Err(code) = check_stdin_once(inputs) {
        return code;
    }
    let (paths, mut failed) = expand_inputs(inputs);
    if let Err(code) = check_not_an_input(output, &paths) {
        return code;
    }
    let mut out = match Out::open(output) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let color = output.is_none() && use_color();
    let text_opts = TextOptions { color };
    let mut captures = Vec::new();
    let mut first = true;
    let res = analyze_inputs(&paths, &AnalyzeOptions::default(), merge, threads, |c| {
        // Also on stderr in text mode: `analyze missing.pcap > r.txt` must
        // not be silent on the terminal.
        failed |= report_read_problems(&c);
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

/// Say on stderr when a capture could not be read (`error`), or only in part
/// (`incomplete`); returns whether it could not be read at all.
fn report_read_problems(c: &CaptureReport) -> bool {
    if let Some(e) = &c.error {
        eprintln!("pcapsleuth: error: {e}");
        return true;
    }
    if let Some(w) = &c.incomplete {
        eprintln!(
            "pcapsleuth: warning: {}: read only in part ({} frames): {}",
            c.path, c.packets, w.message
        );
    }
    false
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
            eprintln!(
                "pcapsleuth: {}",
                st.summary(output, report.findings.len() as u64)
            );
            EXIT_OK
        }
        Err(e) => {
            eprintln!("pcapsleuth: error: {e}");
            EXIT_INPUT
        }
    }
}

fn cmd_check(
    fail_on: Threshold,
    allow_incomplete: bool,
    merge: bool,
    threads: Option<usize>,
    inputs: &[PathBuf],
) -> i32 {
    if let Err(code) = check_stdin_once(inputs) {
        return code;
    }
    let (paths, mut unreadable) = expand_inputs(inputs);
    let threshold = fail_on.severity();
    let mut out = match Out::open(None) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let mut failed = false;
    let res = analyze_inputs(&paths, &AnalyzeOptions::default(), merge, threads, |c| {
        let (line, fails) = render_check_line(&c, threshold);
        // A capture read only in part fails the gate like an unreadable one.
        unreadable |= c.error.is_some() || (c.incomplete.is_some() && !allow_incomplete);
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

fn cmd_flows(
    format: FlowsFormat,
    output: Option<&Path>,
    merge: bool,
    threads: Option<usize>,
    inputs: &[PathBuf],
) -> i32 {
    if let Err(code) = check_stdin_once(inputs) {
        return code;
    }
    let (paths, mut failed) = expand_inputs(inputs);
    if let Err(code) = check_not_an_input(output, &paths) {
        return code;
    }
    let opts = AnalyzeOptions {
        with_flows: true,
        ..AnalyzeOptions::default()
    };
    let mut captures = Vec::new();
    let res = analyze_inputs(&paths, &opts, merge, threads, |c| {
        failed |= report_read_problems(&c);
        captures.push(c);
    });
    if let Err(code) = res {
        return code;
    }
    let report = Report {
        schema_version: SCHEMA_VERSION,
        captures,
    };
    let mut out = match Out::open(output) {
        Ok(o) => o,
        Err(code) => return code,
    };
    out.put(&match format {
        FlowsFormat::Text => render_flows_text(&report),
        FlowsFormat::Json => render_flows_json(&report),
    });
    if failed {
        EXIT_INPUT
    } else {
        EXIT_OK
    }
}

/// A detector's documentation as the report renders it.
fn doc_of(i: &pcapsleuth_analyze::DetectorInfo) -> DetectorDoc<'_> {
    DetectorDoc {
        id: i.id,
        aliases: i.aliases,
        title: i.title,
        markdown: i.explain,
    }
}

/// `explain`: the detector list, or one detector's README (by id or alias).
fn cmd_explain(detector: Option<&str>) -> i32 {
    let infos = pcapsleuth_analyze::detector_infos();
    let docs: Vec<DetectorDoc<'_>> = infos.iter().map(doc_of).collect();
    let text = match detector {
        None => format!(
            "Detectors (pcapsleuth explain <ID> for details):\n{}",
            render_detector_list(&docs)
        ),
        Some(name) => match pcapsleuth_analyze::find_detector(name) {
            Some(info) => render_explain(&doc_of(&info)),
            None => {
                eprint!(
                    "pcapsleuth: unknown detector '{name}'. Known detectors:\n{}",
                    render_detector_list(&docs)
                );
                return EXIT_INPUT;
            }
        },
    };
    match Out::open(None) {
        Ok(mut out) => {
            out.put(&text);
            EXIT_OK
        }
        Err(code) => code,
    }
}

fn cmd_streams(input: &Path) -> i32 {
    let mut out = match Out::open(None) {
        Ok(o) => o,
        Err(code) => return code,
    };
    // Rows are written as they are read, so a read error part way still
    // shows every frame before it (then the error on stderr).
    let mut buf = String::new();
    let res = pcapsleuth_analyze::each_stream(input, |frame, stream| {
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
    });
    out.put(&buf);
    match res {
        Ok(()) => EXIT_OK,
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
}
