//! Ground truth: every `../shared/lab/*.truth.json` and `fixtures/captures/*.truth.json`,
//! and those `../shared/lab-incoming/*.truth.json` whose every event names a
//! registered detector (by id or alias): the others wait for their detector.
//!
//! For each capture beside a truth file, run the whole pipeline
//! ([`pcapsleuth_analyze::analyze_path`]) and check:
//! - each `events` entry: a finding of detector `pathology` (an alias such as
//!   `pmtu-blackhole` resolved through [`pcapsleuth_analyze::detector_infos`])
//!   on that flow (endpoints in either orientation; a flow without ports is a
//!   host pair, matched by the finding's flow addresses or its `hosts`) whose
//!   `frames` include every `must_cite` frame;
//! - each `collateral_resends` entry of an event (dns-timeout): its `query`
//!   and `resend` frames are never called a loss (never in the
//!   `unanswered_frames` evidence of a finding of that detector);
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

/// A truth flow: `src`/`sport` opened it. Host-level events (ICMP, or
/// `dual-stack-latency`'s host pairs) have no ports.
#[derive(Debug, Clone)]
struct TruthFlow {
    src: IpAddr,
    sport: Option<u16>,
    dst: IpAddr,
    dport: Option<u16>,
}

impl TruthFlow {
    fn parse(v: &Value) -> Option<TruthFlow> {
        let port = |k: &str| match v.get(k) {
            None | Some(Value::Null) => Some(None),
            Some(p) => p.as_u64().and_then(|p| u16::try_from(p).ok()).map(Some),
        };
        let (sport, dport) = (port("sport")?, port("dport")?);
        if sport.is_some() != dport.is_some() {
            return None;
        }
        Some(TruthFlow {
            src: v.get("src")?.as_str()?.parse().ok()?,
            sport,
            dst: v.get("dst")?.as_str()?.parse().ok()?,
            dport,
        })
    }
    fn show(&self) -> String {
        match (self.sport, self.dport) {
            (Some(sp), Some(dp)) => format!("{}:{} -> {}:{}", self.src, sp, self.dst, dp),
            _ => format!("{} <-> {}", self.src, self.dst),
        }
    }
    /// Whether a finding's flow names these endpoints, in either orientation;
    /// without ports, whether its flow or its `hosts` name both addresses.
    fn matches(&self, f: &Finding) -> bool {
        let addrs = f.flow.as_ref().and_then(|r| {
            Some((
                r.client.parse::<IpAddr>().ok()?,
                r.client_port,
                r.server.parse::<IpAddr>().ok()?,
                r.server_port,
            ))
        });
        match (self.sport, self.dport) {
            (Some(sp), Some(dp)) => addrs.is_some_and(|(c, cp, s, spt)| {
                (c == self.src && cp == sp && s == self.dst && spt == dp)
                    || (c == self.dst && cp == dp && s == self.src && spt == sp)
            }),
            _ => {
                let by_flow = addrs.is_some_and(|(c, _, s, _)| {
                    (c == self.src && s == self.dst) || (c == self.dst && s == self.src)
                });
                let hosts: Vec<IpAddr> = f.hosts.iter().filter_map(|h| h.parse().ok()).collect();
                by_flow || (hosts.contains(&self.src) && hosts.contains(&self.dst))
            }
        }
    }
}

/// The registered detector id for `id` (an id or an alias), else `id`.
fn canonical_detector(id: &str) -> String {
    pcapsleuth_analyze::detector_infos()
        .into_iter()
        .find(|i| i.id == id || i.aliases.contains(&id))
        .map_or_else(|| id.to_string(), |i| i.id.to_string())
}

/// Whether `id` is a registered detector id or alias.
fn registered(id: &str) -> bool {
    pcapsleuth_analyze::find_detector(id).is_some()
}

/// `../shared/lab-incoming` truth files that are scored: every event's
/// `pathology` (or, without events, the file's `pathology`) is registered.
/// Files listed in [`PENDING`] name a registered detector for a feature it
/// does not have yet.
fn incoming_truth(dir: &Path) -> Vec<(PathBuf, PathBuf)> {
    truth_files(dir)
        .into_iter()
        .filter(|(cap, truth)| {
            let name = cap.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if PENDING.iter().any(|(p, _)| *p == name) {
                return false;
            }
            let Ok(v) = std::fs::read_to_string(truth)
                .map_err(|e| e.to_string())
                .and_then(|s| serde_json::from_str::<Value>(&s).map_err(|e| e.to_string()))
            else {
                return true; // reported as unparseable below
            };
            let events: Vec<&str> = v
                .get("events")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|e| e.get("pathology").and_then(Value::as_str))
                .collect();
            if events.is_empty() {
                v.get("pathology")
                    .and_then(Value::as_str)
                    .is_some_and(registered)
            } else {
                events.iter().all(|p| registered(p))
            }
        })
        .collect()
}

/// lab-incoming captures whose events name a registered detector for a
/// feature still to be built (not scored yet), with the reason.
const PENDING: &[(&str, &str)] = &[];

struct Row {
    capture: String,
    check: String,
    pass: bool,
    detail: String,
}

fn describe(f: &Finding) -> String {
    format!(
        "{}/{} tcp.stream {:?} udp.stream {:?} frames {:?}",
        f.detector,
        f.severity.as_str(),
        f.tcp_stream,
        f.udp_stream,
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
            canonical_detector(e.get("pathology").and_then(Value::as_str).unwrap_or("?"));
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
        check_collateral(&name, &id, &pathology, e, findings, rows);
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
            Some(Value::String(s)) => Some(vec![canonical_detector(s)]),
            Some(Value::Array(a)) => Some(
                a.iter()
                    .filter_map(Value::as_str)
                    .map(canonical_detector)
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

/// Every `collateral_resends` frame (`query`, `resend`) of event `e`: no
/// finding of `pathology` lists it in its `unanswered_frames` evidence.
fn check_collateral(
    name: &str,
    id: &str,
    pathology: &str,
    e: &Value,
    findings: &[Finding],
    rows: &mut Vec<Row>,
) {
    for c in e
        .get("collateral_resends")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let frames: Vec<u64> = ["query", "resend"]
            .iter()
            .filter_map(|k| c.get(*k).and_then(Value::as_u64))
            .collect();
        let bad: Vec<String> = findings
            .iter()
            .filter(|f| f.detector == pathology)
            .filter(|f| {
                f.evidence
                    .get("unanswered_frames")
                    .and_then(Value::as_array)
                    .is_some_and(|u| {
                        u.iter()
                            .filter_map(Value::as_u64)
                            .any(|x| frames.contains(&x))
                    })
            })
            .map(describe)
            .collect();
        rows.push(Row {
            capture: name.to_string(),
            check: format!("{id}: collateral {frames:?} not called a loss"),
            pass: bad.is_empty(),
            detail: bad.join("; "),
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
            let incoming = incoming_truth(&shared.join("lab-incoming"));
            println!(
                "lab-incoming: {} truth file(s) scored; pending: {}",
                incoming.len(),
                PENDING
                    .iter()
                    .map(|(f, why)| format!("{f} ({why})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            pairs.extend(incoming);
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
