//! Bytes → temp file → `pcapsleuth_analyze::analyze_path` (ingest, decode,
//! flow table, every detector). `analyze` has no reader entry point, so the
//! input goes through a per-process temp file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pcapsleuth_analyze::{analyze_path, AnalyzeOptions};

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("pcapsleuth-fuzz-pipeline-{}.pcap", std::process::id()));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let opts = AnalyzeOptions { with_flows: true, ..AnalyzeOptions::default() };
    std::hint::black_box(analyze_path(&path, &opts));
});
