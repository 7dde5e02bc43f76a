//! `stage-run STAGE FILE`: run one pipeline stage over FILE and print what it
//! counted, so `/usr/bin/time -f '%e %M' stage-run STAGE FILE` gives the wall
//! time and peak RSS of each stage alone (where time and memory go).
//!
//! Stages, each including the ones before it:
//! `ingest` (records), `decode`, `flow` (`FlowTable`: `tcp.stream` and
//! `tcp.analysis`), `quality` (the pipeline without detectors: adds capture
//! quality), `ledger` (adds the stall ledger), `analyze` (every detector).

use pcapsleuth_analyze::{analyze_path, observe_path, AnalyzeOptions, LedgerObserver};
use pcapsleuth_decode::Decoder;
use pcapsleuth_flow::{FlowConfig, FlowTable, PacketMeta};
use pcapsleuth_ingest::{CaptureReader, IngestError};
use std::path::Path;
use std::process::ExitCode;

fn run(stage: &str, path: &Path) -> Result<String, IngestError> {
    Ok(match stage {
        "ingest" | "decode" | "flow" => {
            let mut r = CaptureReader::open(path)?;
            let mut d = Decoder::new();
            let mut flows = FlowTable::new(FlowConfig::default());
            let mut events = Vec::with_capacity(16);
            let (mut frames, mut ip) = (0u64, 0u64);
            while let Some(f) = r.next_frame()? {
                frames += 1;
                if stage == "ingest" {
                    continue;
                }
                let decoded = d.decode_frame(f.linktype.0, f.data, Some(f.orig_len));
                ip += u64::from(decoded.ip.is_some());
                if stage == "flow" {
                    let meta = PacketMeta {
                        frame: f.number,
                        ts: f.ts,
                        interface: f.interface,
                    };
                    events.clear();
                    flows.on_packet(&meta, &decoded, &mut events);
                }
            }
            events.clear();
            flows.finish(&mut events);
            format!(
                "{frames} frames, {ip} IP, {} tcp.stream",
                flows.stream_count()
            )
        }
        "quality" => {
            let (out, _) = observe_path(path, Vec::new(), &mut ())?;
            format!("{} tcp.stream", out.tcp_streams)
        }
        "ledger" => {
            let mut ledger = LedgerObserver::new(true);
            let (out, _) = observe_path(path, Vec::new(), &mut ledger)?;
            let n = ledger.finish().map_or(0, |l| l.streams.len());
            format!("{} tcp.stream, {n} ledger streams", out.tcp_streams)
        }
        "analyze" => {
            let r = analyze_path(path, &AnalyzeOptions::default());
            format!("{} packets, {} findings", r.packets, r.findings.len())
        }
        _ => return Ok(String::new()),
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [stage, file] = args.as_slice() else {
        eprintln!("usage: stage-run ingest|decode|flow|quality|ledger|analyze FILE");
        return ExitCode::from(2);
    };
    match run(stage, Path::new(file)) {
        Ok(s) if s.is_empty() => {
            eprintln!("stage-run: unknown stage {stage}");
            ExitCode::from(2)
        }
        Ok(s) => {
            println!("{stage}: {s}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("stage-run: {e}");
            ExitCode::FAILURE
        }
    }
}
