//! Bytes → temp file → `pcapsleuth_analyze::analyze_path` (ingest, decode,
//! flow table, every detector, `finish()`, the stall ledger via
//! `with_flows`) → text and JSONL rendering. `analyze` has no reader entry
//! point, so the input goes through a per-process temp file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pcapsleuth_analyze::{analyze_path, AnalyzeOptions};
use pcapsleuth_report::{render_capture_jsonl, render_capture_text, TextOptions};

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!(
        "pcapsleuth-fuzz-pipeline-{}.pcap",
        std::process::id()
    ));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let opts = AnalyzeOptions {
        with_flows: true,
        ..AnalyzeOptions::default()
    };
    let report = analyze_path(&path, &opts);
    std::hint::black_box(render_capture_text(&report, &TextOptions::default()));
    std::hint::black_box(render_capture_jsonl(&report));
});
