//! Build the HTML report of one or more captures:
//! `cargo run -p pcapsleuth-html --example html_report -- CAPTURE... -o OUT.html`.

use pcapsleuth_analyze::{analyze_path, AnalyzeOptions};
use pcapsleuth_html::{render_html, series_for_report};
use pcapsleuth_report::{Report, SCHEMA_VERSION};
use std::path::PathBuf;

fn main() {
    let mut inputs: Vec<PathBuf> = Vec::new();
    let mut out: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "-o" {
            out = args.next().map(PathBuf::from);
        } else {
            inputs.push(PathBuf::from(a));
        }
    }
    let Some(out) = out else {
        eprintln!("usage: html_report CAPTURE... -o OUT.html");
        std::process::exit(2);
    };
    // With the flows (and their stall ledgers), so the page shows the time
    // lost by cause.
    let opts = AnalyzeOptions {
        with_flows: true,
        ..AnalyzeOptions::default()
    };
    let report = Report {
        schema_version: SCHEMA_VERSION,
        captures: inputs.iter().map(|p| analyze_path(p, &opts)).collect(),
    };
    let series = series_for_report(&report);
    let html = render_html(&report, &series);
    if let Err(e) = std::fs::write(&out, html) {
        eprintln!("{}: {e}", out.display());
        std::process::exit(1);
    }
}
