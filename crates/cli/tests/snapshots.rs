//! Golden output of `pcapsleuth analyze` in every format, for each committed
//! fixture (`fixtures/captures/`) and each lab capture (`../shared/lab`).
//!
//! Paths in the output are relative (the binary runs from the repository root
//! for fixtures and from the shared directory for lab captures), so snapshots do
//! not depend on where the checkout lives. JSON snapshots are also validated
//! against `docs/report.schema.json` by `crates/report/tests/schema.rs`.
//!
//! After an intended change (a detector's wording, a new fixture), regenerate
//! with `INSTA_UPDATE=always cargo test -p pcapsleuth --test snapshots` and
//! review the diff before committing.

use pcapsleuth_testkit::{captures_under, fixtures_dir, in_ci, repo_root, shared_dir};
use std::path::Path;
use std::process::Command;

const FORMATS: [(&str, &str); 4] = [
    ("text", "txt"),
    ("json", "json"),
    ("jsonl", "jsonl"),
    ("markdown", "md"),
];

/// Run `analyze` on `rel` (relative to `cwd`) in every format and snapshot it.
fn snapshot_all(prefix: &str, cwd: &Path, rel: &str) {
    let name = Path::new(rel)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(rel)
        .to_string();
    for (format, ext) in FORMATS {
        let o = Command::new(env!("CARGO_BIN_EXE_pcapsleuth"))
            .current_dir(cwd)
            .args(["analyze", "--format", format, "--threads", "2", rel])
            .output()
            .expect("binary runs");
        assert_eq!(
            o.status.code(),
            Some(0),
            "{rel} --format {format}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let out = String::from_utf8(o.stdout).expect("utf-8");
        assert!(
            !out.contains("/work/"),
            "absolute path leaked into {rel} {format}"
        );
        insta::assert_snapshot!(format!("{prefix}-{name}.{ext}"), out);
    }
}

#[test]
fn fixtures() {
    let root = repo_root();
    let files = captures_under(&fixtures_dir());
    assert!(!files.is_empty(), "no fixtures under fixtures/captures");
    for f in files {
        let rel = f
            .strip_prefix(&root)
            .expect("fixture under the repo")
            .to_string_lossy()
            .replace('\\', "/");
        snapshot_all("fixture", &root, &rel);
    }
}

#[test]
fn lab() {
    let Some(shared) = shared_dir() else {
        assert!(!in_ci(), "../shared is required in CI");
        println!("SKIP: ../shared not present");
        return;
    };
    let files = captures_under(&shared.join("lab"));
    if files.is_empty() {
        assert!(!in_ci(), "../shared/lab has no captures");
        println!("SKIP: ../shared/lab has no captures");
        return;
    }
    for f in files {
        let rel = f
            .strip_prefix(&shared)
            .expect("under shared")
            .to_string_lossy()
            .replace('\\', "/");
        snapshot_all("lab", &shared, &rel);
    }
}
