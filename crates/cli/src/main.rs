//! `pcapsleuth`: offline pcap forensics that names why TCP connections stalled.
//!
//! Subcommands: `analyze` (report findings in text, JSON, JSON Lines,
//! Markdown or self-contained HTML), `check` (CI gate: exit status from finding severities), `flows`
//! (per-flow table; all three take `--merge` to analyse all inputs as one
//! capture set, numbered as `mergecap` would number the merged file), `annotate` (a pcapng copy of one capture with a packet
//! comment on every cited frame, for Wireshark), `explain` (what a detector
//! looks for) and `streams` (frame → `tcp.stream`, for comparison with tshark),
//! `report merge` (several JSON reports into one, e.g. from CI shards),
//! `completions` and `man` (generated from this clap definition).
//!
//! Exit status: 0 success; 1 `check` found a finding at or above `--fail-on`;
//! 2 an input could not be read (the others are still reported), `check` read
//! a capture only in part (unless `--allow-incomplete`), or a usage error. A closed stdout (broken pipe, e.g. `| head`) counts as success.
//!
//! This is the only crate that uses clap; library crates never see its types.

mod extra;
mod inputs;
mod opts;

use clap::{Parser, Subcommand, ValueEnum};
use opts::{color_for, parse_shard, ui, ColorWhen, Filters, FindingFilter, Shard};
use pcapsleuth_analyze::{analyze_path, AnalyzeOptions, RunOptions};
use pcapsleuth_core::Severity;
use pcapsleuth_report::{
    render_capture_jsonl, render_capture_text, render_check_line, render_detector_list,
    render_explain, render_flows_text, render_github, render_junit, render_markdown,
    write_flows_json, write_json, CaptureReport, CheckGate, DetectorDoc, QualityVerdictReport,
    Report, TextOptions, SCHEMA_VERSION,
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
    /// Colour the text output: auto (stdout is a terminal and NO_COLOR is
    /// unset), always, never.
    #[arg(long, value_enum, global = true, default_value_t = ColorWhen::Auto, value_name = "WHEN")]
    color: ColorWhen,
    /// Quiet: no progress bar, no notes on stderr (errors are still
    /// printed); `check` prints only the captures that fail.
    #[arg(short, long, global = true)]
    quiet: bool,
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
    /// Findings as an Apache Parquet table (one row per finding, with its
    /// Community ID), for DuckDB, Spark or pandas. Needs -o FILE when stdout
    /// is a terminal.
    Parquet,
}

/// Output formats of `check`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CheckFormat {
    /// One summary line per capture.
    Text,
    /// The `analyze --format json` report (input of `report merge`).
    Json,
    /// JUnit XML: a test case per capture, a failure per finding at or
    /// above --fail-on (GitLab, Jenkins, Azure DevOps, GitHub test reporters).
    Junit,
    /// GitHub Actions workflow commands (`::error file=…::…` annotations).
    Github,
}

/// Output formats of `flows`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FlowsFormat {
    /// Aligned table.
    Text,
    /// JSON document.
    Json,
    /// Apache Parquet table, one row per flow (with its Community ID). Needs
    /// -o FILE when stdout is a terminal.
    Parquet,
}

/// `--fail-on` thresholds.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Threshold {
    /// Any finding fails.
    Info,
    /// Warnings and errors fail.
    Warning,
    /// Only errors fail.
    Error,
}

/// `--fail-on-quality`: the capture-quality verdict from which `check` fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum QualityThreshold {
    /// Fail captures judged "use with care" or "not trustworthy".
    UseWithCare,
    /// Fail captures judged "not trustworthy".
    NotTrustworthy,
}

impl QualityThreshold {
    pub(crate) fn verdict(self) -> QualityVerdictReport {
        match self {
            QualityThreshold::UseWithCare => QualityVerdictReport::UseWithCare,
            QualityThreshold::NotTrustworthy => QualityVerdictReport::NotTrustworthy,
        }
    }
}

impl Threshold {
    pub(crate) fn severity(self) -> Severity {
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
    #[command(after_help = "Examples:
  pcapsleuth analyze capture.pcapng
  pcapsleuth analyze --format markdown -o ticket.md captures/
  pcapsleuth analyze --only syn-retransmit,pmtu-blackhole --min-severity warning big.pcap
  pcapsleuth analyze --format parquet -o findings.parquet captures/
  pcapsleuth analyze --merge eth0.pcapng wlan0.pcapng")]
    Analyze {
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        #[command(flatten)]
        filters: Filters,
        /// Analyse only shard K of N of the inputs (K/N, 1-based; `ci`:
        /// GitLab's CI_NODE_INDEX/CI_NODE_TOTAL). Input i goes to shard
        /// (i mod N)+1, in the expanded input order.
        #[arg(long, value_name = "K/N", value_parser = parse_shard)]
        shard: Option<Shard>,
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
        /// Most TCP streams held live at once (default 1,000,000). Past it the
        /// least recently active stream is retired early and the report warns
        /// (`flow_cap`); memory stays bounded instead of the process aborting.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        max_flows: Option<u64>,
        /// Worker threads (default: one per CPU). Output does not depend on it.
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
        /// Capture files, directories (searched recursively for *.pcap, *.pcapng,
        /// *.cap, optionally .gz) or `-` for stdin.
        #[arg(required = true, value_name = "INPUT")]
        inputs: Vec<PathBuf>,
    },
    /// One summary line per capture; exit 1 if a finding reaches --fail-on.
    #[command(after_help = "Examples:
  pcapsleuth check captures/
  pcapsleuth check --fail-on error --format junit -o junit.xml captures/
  pcapsleuth check --fail-on-quality not-trustworthy captures/   # also fail captures that lost packets themselves
  pcapsleuth check --format github captures/            # annotations in a GitHub workflow
  pcapsleuth check --shard ci --format json -o shard.json captures/   # GitLab parallel: N
  pcapsleuth report merge --format junit -o junit.xml shard-*.json")]
    Check {
        /// Lowest severity that fails the check.
        #[arg(long, value_enum, default_value_t = Threshold::Warning)]
        fail_on: Threshold,
        /// Also fail (exit 1) a capture whose capture-quality verdict is this
        /// or worse: the capture itself lost, cut or doubled enough that its
        /// findings, or their absence, cannot be taken at face value.
        #[arg(long, value_enum, value_name = "VERDICT")]
        fail_on_quality: Option<QualityThreshold>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = CheckFormat::Text)]
        format: CheckFormat,
        /// Write the result to FILE instead of stdout (never over an input).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        #[command(flatten)]
        filters: Filters,
        /// Check only shard K of N of the inputs (K/N, 1-based; `ci`:
        /// GitLab's CI_NODE_INDEX/CI_NODE_TOTAL).
        #[arg(long, value_name = "K/N", value_parser = parse_shard)]
        shard: Option<Shard>,
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
        /// Most TCP streams held live at once (default 1,000,000). Past it the
        /// least recently active stream is retired early and the report warns
        /// (`flow_cap`); memory stays bounded instead of the process aborting.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        max_flows: Option<u64>,
        /// Worker threads (default: one per CPU).
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
        /// Capture files, directories or `-`.
        #[arg(required = true, value_name = "INPUT")]
        inputs: Vec<PathBuf>,
    },
    /// Per-flow summary (Zeek conn_state, retransmissions, stalls, RTT).
    #[command(after_help = "Examples:
  pcapsleuth flows capture.pcapng
  pcapsleuth flows --format json -o flows.json capture.pcapng
  pcapsleuth flows --format parquet -o flows.parquet captures/")]
    Flows {
        /// Output format.
        #[arg(long, value_enum, default_value_t = FlowsFormat::Text)]
        format: FlowsFormat,
        /// Only shard K of N of the inputs (K/N, 1-based; `ci`: GitLab's
        /// CI_NODE_INDEX/CI_NODE_TOTAL).
        #[arg(long, value_name = "K/N", value_parser = parse_shard)]
        shard: Option<Shard>,
        /// Write the table to FILE instead of stdout (never over an input).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Treat all inputs as ONE capture set, as `analyze --merge` does: one
        /// entry whose flows span the files. Frame numbers in the summaries
        /// (first/last frame, stall frames, sightings) are merged numbers,
        /// i.e. those of `mergecap -w merged.pcapng INPUT...`.
        #[arg(long)]
        merge: bool,
        /// Most TCP streams held live at once (default 1,000,000). Past it the
        /// least recently active stream is retired early and the report warns
        /// (`flow_cap`); memory stays bounded instead of the process aborting.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        max_flows: Option<u64>,
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
        after_help = "Frame numbers, bytes and nanosecond timestamps are preserved. INPUT is read twice (analysis, then copy), so it must be a file: `-` (stdin) is refused. Exit status: 0 written; 2 INPUT could not be read or OUT could not be written.

Example:
  pcapsleuth annotate -o annotated.pcapng capture.pcap && wireshark annotated.pcapng"
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
    #[command(after_help = "Examples:
  pcapsleuth explain
  pcapsleuth explain pmtu-blackhole")]
    Explain {
        /// Detector id or alias, e.g. syn-retransmit.
        detector: Option<String>,
        /// Write to FILE instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Debug: frame number and tcp.stream per line (as `tshark -T fields -e frame.number -e tcp.stream`).
    #[command(after_help = "Example:
  diff <(pcapsleuth streams c.pcap) <(tshark -r c.pcap -T fields -e frame.number -e tcp.stream)")]
    Streams {
        /// Capture file.
        input: PathBuf,
        /// Write to FILE instead of stdout (never over the input).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Work on JSON reports (`report merge`).
    Report {
        #[command(subcommand)]
        cmd: ReportCmd,
    },
    /// Print a shell completion script (generated from the clap definition).
    #[command(after_help = "Examples:
  pcapsleuth completions bash > /etc/bash_completion.d/pcapsleuth
  pcapsleuth completions zsh -o ~/.zfunc/_pcapsleuth")]
    Completions {
        /// Shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
        /// Write to FILE instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Print the man page (roff), generated from the clap definition.
    #[command(after_help = "Examples:
  pcapsleuth man | man -l -
  pcapsleuth man -o pcapsleuth.1; pcapsleuth man check -o pcapsleuth-check.1")]
    Man {
        /// A subcommand's page (pcapsleuth-SUBCOMMAND(1)) instead of pcapsleuth(1).
        subcommand: Option<String>,
        /// Write to FILE instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum ReportCmd {
    /// Merge JSON reports (`analyze`/`check --format json`, e.g. one per CI
    /// shard) into one report in any format; captures in argument order.
    #[command(
        after_help = "Exit status: 0 ok; 1 with --fail-on, a finding reaches it (with --fail-on-quality, a capture's verdict does); 2 a report could not be read.

Examples:
  pcapsleuth report merge -o all.json shard-1.json shard-2.json
  pcapsleuth report merge --format junit --fail-on warning -o junit.xml shard-*.json"
    )]
    Merge {
        /// Output format.
        #[arg(long, value_enum, default_value_t = extra::MergeFormat::Json)]
        format: extra::MergeFormat,
        /// Exit 1 when a finding is at or above this severity (also the
        /// failure threshold of junit and github output; default warning).
        #[arg(long, value_enum)]
        fail_on: Option<Threshold>,
        /// Exit 1 when a capture's capture-quality verdict is this or worse
        /// (also a failure in junit and github output), as in `check`.
        #[arg(long, value_enum, value_name = "VERDICT")]
        fail_on_quality: Option<QualityThreshold>,
        /// Write the report to FILE instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        #[command(flatten)]
        filters: Filters,
        /// JSON reports (`-` for stdin).
        #[arg(required = true, value_name = "REPORT.json")]
        inputs: Vec<PathBuf>,
    },
}

fn main() {
    let cli = Cli::parse();
    opts::set_ui(opts::Ui {
        color: cli.color,
        quiet: cli.quiet,
    });
    let code = match cli.cmd {
        Cmd::Analyze {
            format,
            filters,
            shard,
            output,
            merge,
            threads,
            max_flows,
            inputs,
        } => match filters.resolve() {
            Ok(filter) => {
                let run = Batch {
                    filter,
                    shard,
                    merge,
                    threads,
                    max_flows,
                };
                cmd_analyze(format, output.as_deref(), &run, &inputs)
            }
            Err(code) => code,
        },
        Cmd::Check {
            fail_on,
            fail_on_quality,
            format,
            output,
            filters,
            shard,
            allow_incomplete,
            merge,
            threads,
            max_flows,
            inputs,
        } => match filters.resolve() {
            Ok(filter) => {
                let run = Batch {
                    filter,
                    shard,
                    merge,
                    threads,
                    max_flows,
                };
                let gate = Gate {
                    fail_on,
                    fail_on_quality,
                    allow_incomplete,
                    format,
                };
                cmd_check(&gate, output.as_deref(), &run, &inputs)
            }
            Err(code) => code,
        },
        Cmd::Flows {
            format,
            shard,
            output,
            merge,
            threads,
            max_flows,
            inputs,
        } => {
            let run = Batch {
                filter: FindingFilter::default(),
                shard,
                merge,
                threads,
                max_flows,
            };
            cmd_flows(format, output.as_deref(), &run, &inputs)
        }
        Cmd::Annotate { output, input } => cmd_annotate(&input, &output),
        Cmd::Explain { detector, output } => cmd_explain(detector.as_deref(), output.as_deref()),
        Cmd::Streams { input, output } => cmd_streams(&input, output.as_deref()),
        Cmd::Report {
            cmd:
                ReportCmd::Merge {
                    format,
                    fail_on,
                    fail_on_quality,
                    output,
                    filters,
                    inputs,
                },
        } => match filters.resolve() {
            Ok(filter) => extra::cmd_merge(extra::MergeArgs {
                format,
                fail_on,
                fail_on_quality: fail_on_quality.map(QualityThreshold::verdict),
                output: output.as_deref(),
                filter,
                inputs: &inputs,
            }),
            Err(code) => code,
        },
        Cmd::Completions { shell, output } => extra::cmd_completions(shell, output.as_deref()),
        Cmd::Man { subcommand, output } => extra::cmd_man(subcommand.as_deref(), output.as_deref()),
    };
    std::process::exit(code);
}

/// How a batch of inputs is analysed: finding filter, shard, `--merge`,
/// threads.
struct Batch {
    filter: FindingFilter,
    shard: Option<Shard>,
    merge: bool,
    threads: Option<usize>,
    /// `--max-flows`: the flow table's live-stream cap, if not the default.
    max_flows: Option<u64>,
}

/// `check`'s gate and output format.
struct Gate {
    fail_on: Threshold,
    fail_on_quality: Option<QualityThreshold>,
    allow_incomplete: bool,
    format: CheckFormat,
}

impl Gate {
    /// The report crate's form of the gate.
    fn check_gate(&self) -> CheckGate {
        CheckGate {
            fail_on: self.fail_on.severity(),
            fail_on_quality: self.fail_on_quality.map(QualityThreshold::verdict),
        }
    }
}

/// Refuse to write a binary format (Parquet, HTML) to a terminal.
fn check_binary_target(output: Option<&Path>, what: &str) -> Result<(), i32> {
    if output.is_none() && std::io::stdout().is_terminal() {
        eprintln!("pcapsleuth: the {what} needs -o FILE (or redirect stdout to a file)");
        return Err(EXIT_INPUT);
    }
    Ok(())
}

/// Write the findings (or, with `flows`, the flows) of `report` as Parquet.
fn put_parquet(out: &mut Out, report: &Report, flows: bool) -> Result<(), i32> {
    let mut buf = Vec::new();
    let res = if flows {
        pcapsleuth_parquet_out::write_flows(report, &mut buf)
    } else {
        pcapsleuth_parquet_out::write_findings(report, &mut buf)
    };
    match res {
        Ok(()) => {
            out.put_bytes(&buf);
            Ok(())
        }
        Err(e) => {
            eprintln!("pcapsleuth: {e}");
            Err(EXIT_INPUT)
        }
    }
}

/// Expand the inputs and keep those of the shard (refused with `--merge`:
/// a merged set is one capture).
fn batch_paths(inputs: &[PathBuf], run: &Batch) -> Result<(Vec<PathBuf>, bool), i32> {
    let (paths, failed) = expand_inputs(inputs);
    match run.shard {
        Some(_) if run.merge => {
            eprintln!(
                "pcapsleuth: --shard cannot be combined with --merge (a merged set is one capture)"
            );
            Err(EXIT_INPUT)
        }
        Some(s) => Ok((s.select(paths), failed)),
        None => Ok((paths, failed)),
    }
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
        self.put_bytes(s.as_bytes());
    }

    /// Write what `render` writes as it renders it (a report too large to
    /// hold twice in memory), then flush.
    fn put_with(&mut self, render: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) {
        if let Err(e) = render(&mut self.w).and_then(|()| self.w.flush()) {
            exit_on_write_error(e);
        }
    }

    /// [`Out::put`] for bytes (Parquet, man pages).
    fn put_bytes(&mut self, b: &[u8]) {
        if let Err(e) = self.w.write_all(b).and_then(|()| self.w.flush()) {
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
/// when stderr is a terminal and not `--quiet`.
fn progress_bar(captures: usize) -> Option<indicatif::ProgressBar> {
    (captures > 1 && !ui().quiet && std::io::stderr().is_terminal()).then(|| {
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

/// [`pcapsleuth_analyze::analyze_inputs`] with a progress bar: each report,
/// its findings filtered, goes to `emit` in input order (one merged report
/// with `merge`). `emit` runs with the bar hidden ([`indicatif::ProgressBar::suspend`]),
/// so what it prints on the terminal never mixes with a stale bar line.
fn analyze_inputs(
    paths: &[PathBuf],
    opts: &AnalyzeOptions,
    run: &Batch,
    mut emit: impl FnMut(CaptureReport),
) -> Result<(), i32> {
    let (merge, threads) = (run.merge, run.threads);
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
    let emit_filtered = |mut c: CaptureReport| {
        run.filter.apply(&mut c);
        match &bar {
            Some(b) => b.suspend(|| emit(c)),
            None => emit(c),
        }
    };
    let mut opts = opts.clone();
    if let Some(n) = run.max_flows {
        opts.flow_config.max_flows = usize::try_from(n).unwrap_or(usize::MAX);
    }
    let run = RunOptions { merge, threads };
    let res = pcapsleuth_analyze::analyze_inputs(paths, &opts, run, done, emit_filtered);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    res.map_err(|e| {
        eprintln!("pcapsleuth: {e}");
        EXIT_INPUT
    })
}

fn cmd_analyze(format: Format, output: Option<&Path>, run: &Batch, inputs: &[PathBuf]) -> i32 {
    let binary = match format {
        Format::Html => Some("--format html"),
        Format::Parquet => Some("--format parquet"),
        _ => None,
    };
    if let Some(what) = binary {
        if let Err(code) = check_binary_target(output, what) {
            return code;
        }
    }
    if let Err(code) = check_stdin_once(inputs) {
        return code;
    }
    let (paths, mut failed) = match batch_paths(inputs, run) {
        Ok(p) => p,
        Err(code) => return code,
    };
    if let Err(code) = check_not_an_input(output, &paths) {
        return code;
    }
    let mut out = match Out::open(output) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let color = color_for(output);
    let text_opts = TextOptions { color };
    let mut captures = Vec::new();
    let mut first = true;
    // The HTML and Markdown reports show the time lost to stalls from the
    // flows' stall ledger.
    let opts = AnalyzeOptions {
        with_flows: matches!(format, Format::Html | Format::Markdown),
        ..AnalyzeOptions::default()
    };
    let res = analyze_inputs(&paths, &opts, run, |c| {
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
            Format::Json | Format::Markdown | Format::Html | Format::Parquet => captures.push(c),
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
        Format::Json => out.put_with(|w| write_json(&report, w)),
        Format::Markdown => out.put(&render_markdown(&report)),
        Format::Html => {
            // Re-reads each capture for the per-flow graphs (not stdin, not
            // merged sets: those findings are rendered without graphs).
            let series = pcapsleuth_html::series_for_report(&report);
            out.put(&pcapsleuth_html::render_html(&report, &series));
        }
        Format::Parquet => {
            if let Err(code) = put_parquet(&mut out, &report, false) {
                return code;
            }
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
    if let (Some(w), false) = (&c.incomplete, ui().quiet) {
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

fn cmd_check(gate: &Gate, output: Option<&Path>, run: &Batch, inputs: &[PathBuf]) -> i32 {
    if let Err(code) = check_stdin_once(inputs) {
        return code;
    }
    let (paths, mut unreadable) = match batch_paths(inputs, run) {
        Ok(p) => p,
        Err(code) => return code,
    };
    if let Err(code) = check_not_an_input(output, &paths) {
        return code;
    }
    let check_gate = gate.check_gate();
    let mut out = match Out::open(output) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let mut failed = false;
    let mut captures = Vec::new();
    let res = analyze_inputs(&paths, &AnalyzeOptions::default(), run, |c| {
        let (line, fails) = render_check_line(&c, &check_gate);
        // A capture read only in part fails the gate like an unreadable one.
        let bad = c.error.is_some() || (c.incomplete.is_some() && !gate.allow_incomplete);
        unreadable |= bad;
        failed |= fails;
        match gate.format {
            CheckFormat::Text if !ui().quiet || fails || bad => {
                out.put(&line);
                out.put("\n");
            }
            CheckFormat::Text => {}
            CheckFormat::Json | CheckFormat::Junit | CheckFormat::Github => captures.push(c),
        }
    });
    if let Err(code) = res {
        return code;
    }
    let report = Report {
        schema_version: SCHEMA_VERSION,
        captures,
    };
    match gate.format {
        CheckFormat::Text => {}
        CheckFormat::Json => out.put_with(|w| write_json(&report, w)),
        CheckFormat::Junit => out.put(&render_junit(&report, &check_gate, gate.allow_incomplete)),
        CheckFormat::Github => out.put(&render_github(&report, &check_gate, gate.allow_incomplete)),
    }
    if unreadable {
        EXIT_INPUT
    } else if failed {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    }
}

fn cmd_flows(format: FlowsFormat, output: Option<&Path>, run: &Batch, inputs: &[PathBuf]) -> i32 {
    if format == FlowsFormat::Parquet {
        if let Err(code) = check_binary_target(output, "--format parquet") {
            return code;
        }
    }
    if let Err(code) = check_stdin_once(inputs) {
        return code;
    }
    let (paths, mut failed) = match batch_paths(inputs, run) {
        Ok(p) => p,
        Err(code) => return code,
    };
    if let Err(code) = check_not_an_input(output, &paths) {
        return code;
    }
    let opts = AnalyzeOptions {
        with_flows: true,
        ..AnalyzeOptions::default()
    };
    let mut captures = Vec::new();
    let res = analyze_inputs(&paths, &opts, run, |c| {
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
    match format {
        FlowsFormat::Text => out.put(&render_flows_text(&report)),
        FlowsFormat::Json => out.put_with(|w| write_flows_json(&report, w)),
        FlowsFormat::Parquet => {
            if let Err(code) = put_parquet(&mut out, &report, true) {
                return code;
            }
        }
    }
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
fn cmd_explain(detector: Option<&str>, output: Option<&Path>) -> i32 {
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
    match Out::open(output) {
        Ok(mut out) => {
            out.put(&text);
            EXIT_OK
        }
        Err(code) => code,
    }
}

fn cmd_streams(input: &Path, output: Option<&Path>) -> i32 {
    if let Err(code) = check_not_an_input(output, &[input.to_path_buf()]) {
        return code;
    }
    let mut out = match Out::open(output) {
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
