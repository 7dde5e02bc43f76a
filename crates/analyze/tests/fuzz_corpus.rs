//! Replays the kept fuzz corpora (`fuzz/corpus/{pipeline,ingest}`, inputs
//! libFuzzer kept for the coverage they add; `fuzz/README.md`) through the
//! whole analysis, single-threaded and staged, in every `cargo test`: no
//! input may panic, and both pipelines must give the same report. Fuzz
//! crashes found later go to `fuzz/regressions/<target>/` and are replayed
//! here too.

use pcapsleuth_analyze::{analyze_path, AnalyzeOptions};
use pcapsleuth_report::{render_json, Report, SCHEMA_VERSION};
use std::path::{Path, PathBuf};

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_none_or(|e| e != "md"))
        .collect();
    out.sort();
    out
}

fn report(path: &Path, threads: usize) -> String {
    let opts = AnalyzeOptions {
        with_flows: true,
        capture_threads: threads,
        ..AnalyzeOptions::default()
    };
    let mut c = analyze_path(path, &opts);
    // The path is the only thing allowed to differ between runs of one file.
    c.path = String::new();
    render_json(&Report {
        schema_version: SCHEMA_VERSION,
        captures: vec![c],
    })
}

#[test]
fn kept_fuzz_inputs_analyse_without_panic_and_identically_when_staged() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut files = Vec::new();
    for dir in [
        "corpus/pipeline",
        "corpus/ingest",
        "regressions/pipeline",
        "regressions/ingest",
    ] {
        files.extend(inputs(&root.join(dir)));
    }
    assert!(
        files.len() >= 100,
        "the kept fuzz corpus is missing ({} files under {})",
        files.len(),
        root.display()
    );
    let mut read_something = 0;
    for f in &files {
        let plain = report(f, 1);
        let staged = report(f, 2);
        assert_eq!(plain, staged, "{}: staged report differs", f.display());
        if plain.contains("\"packets\": ") && !plain.contains("\"packets\": 0,") {
            read_something += 1;
        }
    }
    // The corpus is made of (cut) real captures and of mutants that the
    // readers reject (about half of the ingest corpus): a third at least must
    // yield frames, or the replay tests nothing but the format rejection.
    assert!(
        read_something * 3 > files.len(),
        "only {read_something} of {} kept inputs yielded a frame",
        files.len()
    );
}
