//! Ground truth: every `../shared/lab/*.truth.json` and `fixtures/captures/*.truth.json`.
//!
//! For each capture beside a truth file, run the whole pipeline
//! ([`pcapsleuth_analyze::analyze_path`]) and check:
//! - each `events` entry: a finding of detector `pathology` (`pmtu-blackhole`
//!   is an alias of `mss-blackhole`) on that flow (endpoints in either
//!   orientation) whose `frames` include every `must_cite` frame;
//! - each `not_flagged` flow: no finding of severity warning or error on it
//!   (only from the detectors named in `not_flagged_for`, when present);
//! - `ambiguous` entries are ignored.
//!
//! Prints a table (capture, check, PASS/FAIL, detail) and fails listing every
//! failing check. Without `../shared` it prints SKIP for the lab part (fails in CI).

use pcapsleuth_analyze::{analyze_many, AnalyzeOptions};
use pcapsleuth_core::{Finding, Severity};
use serde_json::Value;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// A truth flow: `src`/`sport` opened it.
#[derive(Debug, Clone)]
struct TruthFlow {
    src: IpAddr,
    sport: u16,
    dst: IpAddr,
    dport: u16,
}

impl TruthFlow {
    fn parse(v: &Value) -> Option<TruthFlow> {
        Some(TruthFlow {
            src: v.get("src")?.as_str()?.parse().ok()?,
            sport: u16::try_from(v.get("sport")?.as_u64()?).ok()?,
            dst: v.get("dst")?.as_str()?.parse().ok()?,
            dport: u16::try_from(v.get("dport")?.as_u64()?).ok()?,
        })
    }
    fn show(&self) -> String {
        format!("{}:{} -> {}:{}", self.src, self.sport, self.dst, self.dport)
    }
    /// Whether a finding's flow names these endpoints, in either orientation.
    fn matches(&self, f: &Finding) -> bool {
        let Some(r) = &f.flow else { return false };
        let (Ok(c), Ok(s)) = (r.client.parse::<IpAddr>(), r.server.parse::<IpAddr>()) else {
            return false;
        };
        (c == self.src
            && r.client_port == self.sport
            && s == self.dst
            && r.server_port == self.dport)
            || (c == self.dst
                && r.client_port == self.dport
                && s == self.src
                && r.server_port == self.sport)
    }
}

fn canonical_detector(id: &str) -> &str {
    if id == "pmtu-blackhole" {
        "mss-blackhole"
    } else {
        id
    }
}

struct Row {
    capture: String,
    check: String,
    pass: bool,
    detail: String,
}

fn describe(f: &Finding) -> String {
    format!(
        "{}/{} stream {:?} frames {:?}",
        f.detector,
        f.severity.as_str(),
        f.tcp_stream,
        f.frames
    )
}

fn check_capture(
    capture: &Path,
    truth: &Value,
    findings: &[Finding],
    error: Option<&str>,
    rows: &mut Vec<Row>,
) {
    let name = capture
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    if let Some(e) = error {
        rows.push(Row {
            capture: name.clone(),
            check: "read capture".into(),
            pass: false,
            detail: e.to_string(),
        });
    }
    for (i, e) in truth
        .get("events")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let pathology =
            canonical_detector(e.get("pathology").and_then(Value::as_str).unwrap_or("?"))
                .to_string();
        let id = e
            .get("id")
            .and_then(Value::as_str)
            .map_or_else(|| format!("event[{i}]"), str::to_string);
        let Some(flow) = e.get("flow").and_then(TruthFlow::parse) else {
            rows.push(Row {
                capture: name.clone(),
                check: format!("{id}: {pathology}"),
                pass: false,
                detail: "truth flow unparseable".into(),
            });
            continue;
        };
        let must: Vec<u64> = e
            .get("must_cite")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_u64)
            .collect();
        let check = format!("{id}: {pathology} on {} cites {:?}", flow.show(), must);
        let on_flow: Vec<&Finding> = findings.iter().filter(|f| flow.matches(f)).collect();
        let candidates: Vec<&&Finding> =
            on_flow.iter().filter(|f| f.detector == pathology).collect();
        let full = candidates
            .iter()
            .any(|f| must.iter().all(|m| f.frames.contains(m)));
        let detail = if full {
            String::new()
        } else if candidates.is_empty() {
            let others: Vec<String> = on_flow.iter().map(|f| describe(f)).collect();
            format!(
                "no {pathology} finding on this flow; findings on it: [{}]",
                others.join("; ")
            )
        } else {
            let best = candidates
                .iter()
                .max_by_key(|f| must.iter().filter(|m| f.frames.contains(m)).count());
            let missing: Vec<u64> = best
                .map(|f| {
                    must.iter()
                        .copied()
                        .filter(|m| !f.frames.contains(m))
                        .collect()
                })
                .unwrap_or_default();
            format!(
                "{pathology} finding(s) lack must_cite frames {missing:?}: {}",
                best.map(|f| describe(f)).unwrap_or_default()
            )
        };
        rows.push(Row {
            capture: name.clone(),
            check,
            pass: full,
            detail,
        });
    }
    for (i, n) in truth
        .get("not_flagged")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let Some(flow) = n.get("flow").and_then(TruthFlow::parse) else {
            rows.push(Row {
                capture: name.clone(),
                check: format!("not_flagged[{i}]"),
                pass: false,
                detail: "truth flow unparseable".into(),
            });
            continue;
        };
        let only: Option<Vec<String>> = match n.get("not_flagged_for") {
            Some(Value::String(s)) => Some(vec![canonical_detector(s).to_string()]),
            Some(Value::Array(a)) => Some(
                a.iter()
                    .filter_map(Value::as_str)
                    .map(|s| canonical_detector(s).to_string())
                    .collect(),
            ),
            _ => None,
        };
        let scope = only
            .as_ref()
            .map_or("any detector".to_string(), |o| o.join(","));
        let bad: Vec<&Finding> = findings
            .iter()
            .filter(|f| flow.matches(f) && f.severity >= Severity::Warning)
            .filter(|f| match &only {
                None => true,
                Some(o) => o.iter().any(|d| d == &f.detector),
            })
            .collect();
        let detail = bad
            .iter()
            .map(|f| format!("unexpected {}: {}", describe(f), f.summary))
            .collect::<Vec<_>>()
            .join(" | ");
        rows.push(Row {
            capture: name.clone(),
            check: format!("not flagged ({scope}) {}", flow.show()),
            pass: bad.is_empty(),
            detail,
        });
    }
}

fn truth_files(dir: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if let Some(cap) = name.strip_suffix(".truth.json") {
            out.push((dir.join(cap), p.clone()));
        }
    }
    out.sort();
    out
}

#[test]
fn ground_truth() {
    let mut pairs = Vec::new();
    match pcapsleuth_testkit::shared_dir() {
        Some(shared) => {
            let lab = truth_files(&shared.join("lab"));
            // ../shared/lab holds 10 truth files; losing them must not pass quietly.
            assert!(lab.len() >= 10, "only {} lab truth files found", lab.len());
            pairs.extend(lab);
        }
        None => {
            assert!(
                !pcapsleuth_testkit::in_ci(),
                "../shared is absent but CI is set"
            );
            println!("SKIP: ../shared absent: lab truth not checked");
        }
    }
    let fixtures = truth_files(&pcapsleuth_testkit::fixtures_dir());
    assert!(
        fixtures.len() >= 9,
        "only {} fixture truth files found",
        fixtures.len()
    );
    pairs.extend(fixtures);
    if pairs.is_empty() {
        println!("SKIP: no truth files found");
        return;
    }
    let mut rows = Vec::new();
    let present: Vec<&(PathBuf, PathBuf)> = pairs
        .iter()
        .filter(|(cap, _)| {
            let ok = cap.is_file();
            if !ok {
                rows.push(Row {
                    capture: cap.display().to_string(),
                    check: "capture exists".into(),
                    pass: false,
                    detail: "truth file without capture".into(),
                });
            }
            ok
        })
        .collect();
    let paths: Vec<PathBuf> = present.iter().map(|(c, _)| c.clone()).collect();
    let reports = analyze_many(&paths, &AnalyzeOptions::default());
    for ((cap, truth_path), report) in present.iter().zip(&reports) {
        let truth: Value = match std::fs::read_to_string(truth_path)
            .map_err(|e| e.to_string())
            .and_then(|s| serde_json::from_str(&s).map_err(|e| e.to_string()))
        {
            Ok(v) => v,
            Err(e) => {
                rows.push(Row {
                    capture: truth_path.display().to_string(),
                    check: "parse truth".into(),
                    pass: false,
                    detail: e,
                });
                continue;
            }
        };
        check_capture(
            cap,
            &truth,
            &report.findings,
            report.error.as_deref(),
            &mut rows,
        );
    }
    let w_cap = rows
        .iter()
        .map(|r| r.capture.len())
        .max()
        .unwrap_or(7)
        .max(7);
    let w_chk = rows
        .iter()
        .map(|r| r.check.len())
        .max()
        .unwrap_or(5)
        .clamp(5, 90);
    println!(
        "{:<w_cap$}  {:<w_chk$}  {:<4}  detail",
        "capture", "check", "ok"
    );
    for r in &rows {
        println!(
            "{:<w_cap$}  {:<w_chk$}  {:<4}  {}",
            r.capture,
            r.check,
            if r.pass { "PASS" } else { "FAIL" },
            r.detail
        );
    }
    let failed: Vec<String> = rows
        .iter()
        .filter(|r| !r.pass)
        .map(|r| format!("{} | {} | {}", r.capture, r.check, r.detail))
        .collect();
    println!(
        "{} checks, {} passed, {} failed",
        rows.len(),
        rows.len() - failed.len(),
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "{} ground-truth check(s) failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}
