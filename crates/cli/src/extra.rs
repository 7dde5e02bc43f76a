//! `completions`, `man` and `report merge`.

use crate::opts::{color_for, FindingFilter};
use crate::{Out, Threshold, EXIT_FINDINGS, EXIT_INPUT, EXIT_OK};
use clap::{CommandFactory, ValueEnum};
use pcapsleuth_report::{
    merge_reports, parse_report, render_github, render_json, render_jsonl, render_junit,
    render_markdown, render_text, CheckGate, QualityVerdictReport, TextOptions,
};
use std::path::{Path, PathBuf};

/// `completions SHELL`: the completion script, generated from the clap
/// definition (clap_complete).
pub fn cmd_completions(shell: clap_complete::Shell, output: Option<&Path>) -> i32 {
    let mut cmd = crate::Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "pcapsleuth", &mut buf);
    write_bytes(output, &buf)
}

/// `man [SUBCOMMAND]`: the roff man page `pcapsleuth(1)`, or
/// `pcapsleuth-SUBCOMMAND(1)`, generated from the clap definition
/// (clap_mangen).
pub fn cmd_man(subcommand: Option<&str>, output: Option<&Path>) -> i32 {
    let root = crate::Cli::command();
    let cmd = match subcommand {
        None => root,
        Some(name) => match root.find_subcommand(name) {
            Some(sub) => sub
                .clone()
                // A one-off leak: clap's `Str` takes `&'static str` only
                // (without its `string` feature).
                .name(&*Box::leak(format!("pcapsleuth-{name}").into_boxed_str()))
                .version(pcapsleuth_report::TOOL_VERSION),
            None => {
                let names: Vec<&str> = root.get_subcommands().map(|s| s.get_name()).collect();
                eprintln!(
                    "pcapsleuth: no subcommand '{name}' (known: {})",
                    names.join(", ")
                );
                return EXIT_INPUT;
            }
        },
    };
    let mut buf = Vec::new();
    if let Err(e) = clap_mangen::Man::new(cmd).render(&mut buf) {
        eprintln!("pcapsleuth: cannot render the man page: {e}");
        return EXIT_INPUT;
    }
    write_bytes(output, &buf)
}

fn write_bytes(output: Option<&Path>, bytes: &[u8]) -> i32 {
    match Out::open(output) {
        Ok(mut out) => {
            out.put_bytes(bytes);
            EXIT_OK
        }
        Err(code) => code,
    }
}

/// Output formats of `report merge`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MergeFormat {
    /// As `analyze --format text`.
    Text,
    /// One JSON report (the analyze contract).
    Json,
    /// JSON Lines, one finding per line.
    Jsonl,
    /// Markdown.
    Markdown,
    /// Self-contained HTML (without per-flow graphs: the captures are not re-read).
    Html,
    /// JUnit XML, as `check --format junit`.
    Junit,
    /// GitHub workflow commands, as `check --format github`.
    Github,
    /// Findings as Apache Parquet (needs -o FILE or a redirected stdout).
    Parquet,
}

/// Arguments of `report merge`.
pub struct MergeArgs<'a> {
    pub format: MergeFormat,
    pub fail_on: Option<Threshold>,
    /// `--fail-on-quality`: the verdict from which a capture fails.
    pub fail_on_quality: Option<QualityVerdictReport>,
    pub output: Option<&'a Path>,
    pub filter: FindingFilter,
    pub inputs: &'a [PathBuf],
}

/// `report merge`: several JSON reports (from `analyze`/`check --format
/// json`, e.g. one per CI shard) into one report, captures in argument
/// order. Exit 2 if a report cannot be read; with `--fail-on`, 1 if a
/// finding reaches it; with `--fail-on-quality`, 1 if a capture's
/// capture-quality verdict does.
pub fn cmd_merge(a: MergeArgs<'_>) -> i32 {
    let mut reports = Vec::new();
    for p in a.inputs {
        let text = if p.as_os_str() == "-" {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map(|_| s)
        } else {
            std::fs::read_to_string(p)
        };
        match text
            .map_err(|e| e.to_string())
            .and_then(|t| parse_report(&t))
        {
            Ok(r) => reports.push(r),
            Err(e) => {
                eprintln!("pcapsleuth: {}: {e}", p.display());
                return EXIT_INPUT;
            }
        }
    }
    let mut report = merge_reports(reports);
    for c in &mut report.captures {
        a.filter.apply(c);
    }
    if a.format == MergeFormat::Parquet || a.format == MergeFormat::Html {
        if let Err(code) = crate::check_binary_target(a.output, "merged report") {
            return code;
        }
    }
    let threshold = a.fail_on.unwrap_or(Threshold::Warning).severity();
    let gate = CheckGate {
        fail_on: threshold,
        fail_on_quality: a.fail_on_quality,
    };
    let mut out = match Out::open(a.output) {
        Ok(o) => o,
        Err(code) => return code,
    };
    match a.format {
        MergeFormat::Text => out.put(&render_text(
            &report,
            &TextOptions {
                color: color_for(a.output),
            },
        )),
        MergeFormat::Json => out.put(&render_json(&report)),
        MergeFormat::Jsonl => out.put(&render_jsonl(&report)),
        MergeFormat::Markdown => out.put(&render_markdown(&report)),
        MergeFormat::Html => out.put(&pcapsleuth_html::render_html(&report, &[])),
        MergeFormat::Junit => out.put(&render_junit(&report, &gate, false)),
        MergeFormat::Github => out.put(&render_github(&report, &gate, false)),
        MergeFormat::Parquet => {
            if let Err(code) = crate::put_parquet(&mut out, &report, false) {
                return code;
            }
        }
    }
    let fails = (a.fail_on.is_some()
        && report.captures.iter().any(|c| !gate.failing(c).is_empty()))
        || report
            .captures
            .iter()
            .any(|c| gate.failing_quality(c).is_some());
    if fails {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    }
}
