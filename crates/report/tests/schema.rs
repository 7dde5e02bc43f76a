//! Validate JSON output against the hand-maintained `docs/report.schema.json`:
//! every JSON / JSONL / flows-JSON snapshot of this crate and of the CLI, plus
//! a freshly rendered sample. The schema is strict (no unknown keys), so a field
//! added to the model without updating the schema (and the crate docs) fails.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn schema() -> Value {
    let text = std::fs::read_to_string(root().join("docs/report.schema.json"))
        .expect("docs/report.schema.json");
    serde_json::from_str(&text).expect("schema is JSON")
}

/// A validator for `#/$defs/<def>` (or the root when `def` is None).
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

fn check(v: &jsonschema::Validator, doc: &Value, what: &str) {
    let errors: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} does not match docs/report.schema.json:\n{}",
        errors.join("\n")
    );
}

/// The body of an insta `.snap` file (after the `---` header).
fn snap_body(text: &str) -> &str {
    let rest = text.strip_prefix("---\n").unwrap_or(text);
    match rest.find("\n---\n") {
        Some(i) => &rest[i + 5..],
        None => rest,
    }
}

fn snapshots() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in [
        "crates/report/tests/snapshots",
        "crates/cli/tests/snapshots",
    ] {
        let Ok(rd) = std::fs::read_dir(root().join(dir)) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "snap") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn schema_rejects_drift() {
    let v = validator(None);
    let good = json!({"schema_version": 1, "captures": []});
    check(&v, &good, "empty report");
    assert!(!v.is_valid(&json!({"schema_version": 2, "captures": []})));
    assert!(!v.is_valid(&json!({"schema_version": 1, "captures": [], "extra": 1})));
    let line = validator(Some("finding_line"));
    assert!(!line.is_valid(&json!({"path": "x"})));
}

#[test]
fn every_json_snapshot_matches_the_schema() {
    let report = validator(None);
    let line = validator(Some("finding_line"));
    let status = validator(Some("capture_status_line"));
    let limited = validator(Some("capture_limits_line"));
    let flows = validator(Some("flows_document"));
    let mut checked = 0;
    for p in snapshots() {
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let text = std::fs::read_to_string(&p).unwrap();
        let body = snap_body(&text);
        if name.ends_with(".flows.json.snap") {
            check(&flows, &serde_json::from_str(body).unwrap(), &name);
        } else if name.ends_with(".json.snap") {
            check(&report, &serde_json::from_str(body).unwrap(), &name);
        } else if name.ends_with(".jsonl.snap") {
            for (i, l) in body.lines().filter(|l| !l.trim().is_empty()).enumerate() {
                let doc: Value = serde_json::from_str(l).unwrap();
                // A capture analysed in part has a limits line; one read in
                // part or not at all ends with a status line.
                let v = match doc.get("record").and_then(Value::as_str) {
                    Some("capture_limited") => &limited,
                    Some(_) => &status,
                    None => &line,
                };
                check(v, &doc, &format!("{name} line {}", i + 1));
            }
        } else {
            continue;
        }
        checked += 1;
    }
    // At least the report crate's own sample snapshots exist.
    assert!(checked >= 3, "only {checked} JSON snapshots found");
}

#[test]
fn incomplete_captures_and_their_jsonl_status_lines_match_the_schema() {
    use pcapsleuth_report::{
        capture_limits_line, capture_status_line, render_capture_jsonl, render_json, CaptureReport,
        Report, WarningKindReport, WarningReport, SCHEMA_VERSION,
    };
    let cut = WarningReport {
        kind: WarningKindReport::TruncatedRecord,
        offset: 2872,
        frame: Some(19),
        message: "capture cut short".into(),
    };
    let cap = WarningReport {
        kind: WarningKindReport::UnackedSegmentCap,
        offset: 0,
        frame: None,
        message: "cap hit".into(),
    };
    // The analysis warnings of contract 1.2.
    let flow_cap = WarningReport {
        kind: WarningKindReport::FlowCap,
        offset: 0,
        frame: None,
        message: "flow cap hit".into(),
    };
    let limit = WarningReport {
        kind: WarningKindReport::DetectorLimit,
        offset: 0,
        frame: Some(7),
        message: "dns-timeout keeps at most 4 DNS messages".into(),
    };
    let mut c = CaptureReport {
        path: "cut.pcapng".into(),
        format: Some("pcapng".into()),
        packets: 18,
        first_ts_ns: 0,
        last_ts_ns: 0,
        interfaces: vec![],
        tcp_streams: 0,
        warnings: vec![cut.clone(), cap, flow_cap, limit],
        error: None,
        incomplete: Some(cut),
        capture_quality: None,
        findings: vec![],
        flows: vec![],
        sources: vec![],
    };
    let report = Report {
        schema_version: SCHEMA_VERSION,
        captures: vec![c.clone()],
    };
    let doc: Value = serde_json::from_str(&render_json(&report)).unwrap();
    check(&validator(None), &doc, "incomplete capture");
    let status = validator(Some("capture_status_line"));
    let line = capture_status_line(&c).expect("a status line");
    check(
        &status,
        &serde_json::from_str(&line).unwrap(),
        "capture_incomplete",
    );
    assert!(!validator(Some("finding_line")).is_valid(&serde_json::from_str(&line).unwrap()));
    // The analysis bounds (not the cut record) make one limits line, before
    // the status line.
    let limited = validator(Some("capture_limits_line"));
    let line = capture_limits_line(&c).expect("a limits line");
    let doc: Value = serde_json::from_str(&line).unwrap();
    check(&limited, &doc, "capture_limited");
    assert!(!status.is_valid(&doc));
    let kinds: Vec<&str> = doc["limits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["unacked_segment_cap", "flow_cap", "detector_limit"]);
    assert_eq!(doc["limits"][2]["frame"], 7);
    let records: Vec<String> = render_capture_jsonl(&c)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["record"].to_string())
        .collect();
    assert_eq!(records, ["\"capture_limited\"", "\"capture_incomplete\""]);
    c.incomplete = None;
    c.error = Some("gone".into());
    let line = capture_status_line(&c).expect("a status line");
    check(
        &status,
        &serde_json::from_str(&line).unwrap(),
        "capture_error",
    );
    c.error = None;
    assert_eq!(capture_status_line(&c), None);
    // Only the cut-record warning left: no limits line either.
    c.warnings.retain(|w| w.kind.is_about_a_record());
    assert_eq!(capture_limits_line(&c), None);
    assert_eq!(render_capture_jsonl(&c), "");
}
