//! Every report `pcapsleuth` writes for real input validates against the
//! published contract, `docs/report.schema.json`: `analyze --format json` and
//! `flows --format json` over every capture of `../shared/captures`,
//! `../shared/lab`, `../shared/lab-incoming` and `fixtures/captures`.
//!
//! The snapshot schema test (`crates/report/tests/schema.rs`) covers the
//! committed snapshots; this one covers what the whole corpus makes the
//! detectors emit (it found `flow.protocol: "icmpv6"`, which schema 1.0 did not
//! allow). Needs `../shared` (skips locally without it, fails under `CI`).

use pcapsleuth_testkit::{captures_under, fixtures_dir, in_ci, repo_root, shared_dir};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Command;

fn schema() -> Value {
    let text = std::fs::read_to_string(repo_root().join("docs/report.schema.json"))
        .expect("docs/report.schema.json");
    serde_json::from_str(&text).expect("schema is JSON")
}

fn validator(def: Option<&str>) -> jsonschema::Validator {
    let mut s = schema();
    if let Some(d) = def {
        s = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$defs": s["$defs"].clone(),
            "$ref": format!("#/$defs/{d}"),
        });
    }
    jsonschema::draft202012::new(&s).expect("schema compiles")
}

fn inputs() -> Option<Vec<PathBuf>> {
    let Some(shared) = shared_dir() else {
        assert!(!in_ci(), "../shared is required in CI");
        println!("SKIP: ../shared not found");
        return None;
    };
    let mut files = Vec::new();
    for sub in ["captures", "lab", "lab-incoming"] {
        files.extend(captures_under(&shared.join(sub)));
    }
    files.extend(captures_under(&fixtures_dir()));
    assert!(
        files.len() > 370,
        "corpus has only {} captures",
        files.len()
    );
    Some(files)
}

/// Run `pcapsleuth <cmd> --format json` over all inputs at once and check the
/// document against `def` (None: the schema's root, the analyze report).
fn validate(cmd: &str, def: Option<&str>) {
    let Some(files) = inputs() else { return };
    let out = Command::new(env!("CARGO_BIN_EXE_pcapsleuth"))
        .arg(cmd)
        .args(["--format", "json"])
        .args(&files)
        .output()
        .expect("binary runs");
    // 2 is expected: a few corpus files are unreadable on purpose; their
    // reports carry `error` and must validate too.
    assert!(
        matches!(out.status.code(), Some(0 | 2)),
        "{cmd} exited {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("output is JSON");
    let captures = doc["captures"].as_array().expect("captures array");
    assert_eq!(captures.len(), files.len(), "one entry per input");
    let v = validator(def);
    let errors: Vec<String> = v
        .iter_errors(&doc)
        .take(20)
        .map(|e| {
            let i = e.instance_path.to_string();
            let capture = i
                .split('/')
                .nth(2)
                .and_then(|n| n.parse::<usize>().ok())
                .and_then(|n| captures[n]["path"].as_str())
                .unwrap_or("?")
                .to_string();
            format!("{capture}: {e} at {i}")
        })
        .collect();
    assert!(
        errors.is_empty(),
        "{cmd} --format json does not match docs/report.schema.json:\n{}",
        errors.join("\n")
    );
}

#[test]
fn analyze_json_of_every_capture_validates() {
    validate("analyze", None);
}

#[test]
fn flows_json_of_every_capture_validates() {
    validate("flows", Some("flows_document"));
}
