//! The real-kernel captures of `../shared/lab-incoming` (seed 002): every
//! cross-interface loss of their truth files is found with exactly its
//! frames, its NAT mapping and its retransmission, nothing else is; and
//! `--merge` of per-interface files finds the same losses.

use pcapsleuth_analyze::{analyze_merged, analyze_path, AnalyzeOptions};
use pcapsleuth_core::Finding;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const CAPTURES: [&str; 3] = [
    "nat-drop.pcapng",
    "nat-drop.any.pcap",
    "dns-timeout.node.pcapng",
];

fn incoming() -> Option<PathBuf> {
    let Some(shared) = pcapsleuth_testkit::shared_dir() else {
        assert!(!pcapsleuth_testkit::in_ci(), "../shared is required in CI");
        println!("SKIP: ../shared not found");
        return None;
    };
    Some(shared.join("lab-incoming"))
}

fn losses(findings: &[Finding]) -> Vec<&Finding> {
    findings
        .iter()
        .filter(|f| f.detector == pcapsleuth_cross_interface_loss::ID)
        .collect()
}

fn endpoint(addr: &str, port: u64) -> String {
    if addr.contains(':') {
        format!("[{addr}]:{port}")
    } else {
        format!("{addr}:{port}")
    }
}

/// `src:sport -> dst:dport` of a truth flow, and the reverse.
fn flow_texts(v: &Value) -> Option<(String, String)> {
    let a = endpoint(v.get("src")?.as_str()?, v.get("sport")?.as_u64()?);
    let b = endpoint(v.get("dst")?.as_str()?, v.get("dport")?.as_u64()?);
    Some((format!("{a} -> {b}"), format!("{b} -> {a}")))
}

fn flow_text(v: &Value) -> Option<String> {
    flow_texts(v).map(|t| t.0)
}

fn frames(v: &Value) -> Vec<u64> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .collect()
}

/// Check one capture against its truth file; returns the number of losses.
fn check(cap: &Path) -> usize {
    let truth: Value = serde_json::from_str(
        &std::fs::read_to_string(cap.with_file_name(format!(
            "{}.truth.json",
            cap.file_name().unwrap().to_string_lossy()
        )))
        .unwrap(),
    )
    .unwrap();
    let report = analyze_path(cap, &AnalyzeOptions::default());
    let found = losses(&report.findings);
    let events: Vec<&Value> = truth["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["pathology"] == "cross-interface-loss")
        .collect();
    assert_eq!(
        found.len(),
        events.len(),
        "{}: one finding per lost packet",
        cap.display()
    );
    for e in &events {
        let must = frames(&e["must_cite"]);
        let (inner, reverse) = flow_texts(&e["flow"]).unwrap();
        let f = found
            .iter()
            .find(|f| frames(&f.evidence["lost_frames"]) == must)
            .unwrap_or_else(|| panic!("{}: no finding with lost_frames {must:?}", e["id"]));
        let named = f.evidence["inner_flow"].as_str().unwrap_or("");
        assert!(named == inner || named == reverse, "{}: {named}", e["id"]);
        assert!(
            f.severity >= pcapsleuth_core::Severity::Warning,
            "{}",
            e["id"]
        );
        // The NAT mapping, when the truth names one.
        if let Some(up) = flow_text(&e["flow_uplink"]) {
            assert_eq!(f.evidence["outer_flow"], up.as_str(), "{}", e["id"]);
        }
        if let Some(crossed) = e["retransmission"]["crossed"].as_bool() {
            assert_eq!(f.evidence["retransmission_crossed"], crossed, "{}", e["id"]);
        }
        if let Some(n) = e["syn_number_in_connection"].as_u64() {
            assert_eq!(f.evidence["syn_number"], n, "{}", e["id"]);
            assert_eq!(f.evidence["shape"], "syn-after-snat", "{}", e["id"]);
        }
        // The retransmission's copies on the inner side are cited.
        let retx = frames(&e["key_frames"]["retransmission_inner"]);
        let rf = frames(&f.evidence["retransmission_frames"]);
        assert!(
            retx.iter().all(|r| rf.contains(r)),
            "{}: {rf:?} ⊉ {retx:?}",
            e["id"]
        );
    }
    found.len()
}

#[test]
fn lab_incoming_losses_are_found_exactly() {
    let Some(dir) = incoming() else { return };
    let n: usize = CAPTURES.iter().map(|c| check(&dir.join(c))).sum();
    assert_eq!(n, 13 + 13 + 4);
}

/// Our own real-kernel fixtures (router, plain veths, IPv4 and IPv6, policy-routing
/// blackhole drops, the reply direction, a connection that never came up), as a
/// pcapng of both interfaces and as `dumpcap -i any` (SLL v1).
#[test]
fn fixtures_losses_are_found_exactly() {
    let dir = pcapsleuth_testkit::fixtures_dir();
    for cap in [
        "cross-interface-loss.pcapng",
        "cross-interface-loss-any.pcapng",
    ] {
        assert_eq!(check(&dir.join(cap)), 11, "{cap}");
        let report = analyze_path(&dir.join(cap), &AnalyzeOptions::default());
        let found = losses(&report.findings);
        let shapes: BTreeSet<(String, String)> = found
            .iter()
            .map(|f| {
                (
                    f.evidence["shape"].as_str().unwrap_or("").to_string(),
                    f.severity.as_str().to_string(),
                )
            })
            .collect();
        let want: BTreeSet<(String, String)> = [
            ("syn", "warning"),
            ("syn", "error"),
            ("reply", "warning"),
            ("udp", "warning"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(shapes, want, "{cap}");
    }
}

/// The losses of a report as (inner flow, IP ID) pairs.
fn identities(findings: &[Finding]) -> BTreeSet<(String, u64)> {
    losses(findings)
        .iter()
        .map(|f| {
            (
                f.evidence["inner_flow"].as_str().unwrap_or("").to_string(),
                f.evidence["ip_id"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

#[test]
fn merge_of_per_interface_files_finds_the_same_losses() {
    let Some(dir) = incoming() else { return };
    if pcapsleuth_testkit::tshark().is_none() {
        assert!(!pcapsleuth_testkit::in_ci(), "tshark is required in CI");
        println!("SKIP: tshark not installed");
        return;
    }
    let tmp = pcapsleuth_testkit::scratch("xil-merge");
    for cap in ["nat-drop.pcapng", "dns-timeout.node.pcapng"] {
        let src = dir.join(cap);
        let parts: Vec<PathBuf> = (0..2)
            .map(|i| {
                let out = tmp.join(format!("{i}-{cap}"));
                let ok = Command::new("tshark")
                    .arg("-r")
                    .arg(&src)
                    .args(["-Y", &format!("frame.interface_id=={i}"), "-w"])
                    .arg(&out)
                    .status()
                    .unwrap()
                    .success();
                assert!(ok, "tshark split of {cap}");
                out
            })
            .collect();
        let whole = analyze_path(&src, &AnalyzeOptions::default());
        let merged = analyze_merged(&parts, &AnalyzeOptions::default());
        assert!(!identities(&whole.findings).is_empty());
        assert_eq!(
            identities(&whole.findings),
            identities(&merged.findings),
            "{cap}"
        );
        // Each file alone is a single-interface capture: nothing to report.
        for p in &parts {
            assert!(losses(&analyze_path(p, &AnalyzeOptions::default()).findings).is_empty());
        }
    }
}
