//! `--merge`: the input is split on [`SEP`] into 2 or 3 captures (missing
//! pieces are empty files), each written to a per-process temp file, and the
//! set goes through `pcapsleuth_analyze::analyze_merged` (merge reader, every
//! detector, `finish()`, ledger, text and JSONL rendering).
//!
//! Invariant: every frame a finding cites maps back to (file, frame), i.e.
//! `source_frames` has one entry per `frames` entry.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pcapsleuth_analyze::{analyze_merged, AnalyzeOptions};
use pcapsleuth_report::{render_capture_jsonl, render_capture_text, TextOptions};

/// Separator between the captures of one input (seeds use it too).
const SEP: &[u8] = b"\xffPCAPSLEUTH-MERGE\xff";

fn split(data: &[u8]) -> Vec<&[u8]> {
    let mut pieces = Vec::new();
    let mut rest = data;
    while pieces.len() < 2 {
        match rest.windows(SEP.len()).position(|w| w == SEP) {
            Some(i) => {
                pieces.push(&rest[..i]);
                rest = &rest[i + SEP.len()..];
            }
            None => break,
        }
    }
    pieces.push(rest);
    pieces
}

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let mut pieces = split(rest);
    let count = 2 + usize::from(n & 1);
    pieces.resize(count.max(pieces.len()), &[]);
    let pid = std::process::id();
    let mut paths = Vec::new();
    for (i, p) in pieces.iter().enumerate() {
        let path = std::env::temp_dir().join(format!("pcapsleuth-fuzz-merge-{pid}-{i}.pcap"));
        if std::fs::write(&path, p).is_err() {
            return;
        }
        paths.push(path);
    }
    let opts = AnalyzeOptions {
        with_flows: true,
        ..AnalyzeOptions::default()
    };
    let report = analyze_merged(&paths, &opts);
    for f in &report.findings {
        assert_eq!(f.source_frames.len(), f.frames.len(), "finding {f:?}");
    }
    std::hint::black_box(render_capture_text(&report, &TextOptions::default()));
    std::hint::black_box(render_capture_jsonl(&report));
});
