//! `pcapsleuth` command line. (Skeleton.)

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "pcapsleuth", version, about = "Names why TCP connections stalled in a capture")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Analyse captures and report findings.
    Analyze {
        /// Capture files.
        inputs: Vec<PathBuf>,
    },
}

fn main() {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Analyze { inputs } => {
            let reports = pcapsleuth_analyze::analyze_many(&inputs, &Default::default());
            let report = pcapsleuth_report::Report { schema_version: pcapsleuth_report::SCHEMA_VERSION, captures: reports };
            println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
        }
    }
}
