//! `analyze --merge` / `check --merge`: several files as one capture set.
//!
//! Two committed fixtures that do not overlap in time are merged in reverse
//! time order, so the merged numbering is not the input order: every frame of
//! the later-given but earlier-captured `syn-drops.pcap` comes first.

use pcapsleuth_testkit::{in_ci, repo_root, tshark};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const ZW: &str = "fixtures/captures/zero-window.pcap";
const SD: &str = "fixtures/captures/syn-drops.pcap";

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pcapsleuth"))
        .current_dir(repo_root())
        .env_remove("NO_COLOR")
        .args(args)
        .output()
        .expect("binary runs")
}

fn json(args: &[&str]) -> Value {
    let o = run(args);
    assert!(o.status.code().is_some_and(|c| c <= 1), "{o:?}");
    serde_json::from_slice(&o.stdout).expect("JSON output")
}

/// (detector, severity, flow, [(file, frame)]) of one analysis.
fn identities(c: &Value, merged: bool, single_path: &str) -> Vec<String> {
    let mut v: Vec<String> = c["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            let cited: Vec<(String, u64)> = if merged {
                f["source_frames"]
                    .as_array()
                    .expect("source_frames on a merged finding")
                    .iter()
                    .map(|s| {
                        (
                            s["file"].as_str().unwrap().to_string(),
                            s["frame"].as_u64().unwrap(),
                        )
                    })
                    .collect()
            } else {
                assert!(
                    f.get("source_frames").is_none(),
                    "single capture has no source_frames"
                );
                f["frames"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| (single_path.to_string(), n.as_u64().unwrap()))
                    .collect()
            };
            format!(
                "{} {} {} {:?}",
                f["detector"], f["severity"], f["flow"], cited
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn merge_json_maps_every_cited_frame_to_its_file() {
    let m = json(&["analyze", "--format", "json", "--merge", ZW, SD]);
    let caps = m["captures"].as_array().unwrap();
    assert_eq!(caps.len(), 1, "one merged capture");
    let c = &caps[0];
    assert_eq!(c["path"], format!("{ZW}+{SD}"));
    assert_eq!(c["format"], "pcapng");
    let zw = json(&["analyze", "--format", "json", ZW]);
    let sd = json(&["analyze", "--format", "json", SD]);
    let (zw, sd) = (&zw["captures"][0], &sd["captures"][0]);
    let (nz, ns) = (
        zw["packets"].as_u64().unwrap(),
        sd["packets"].as_u64().unwrap(),
    );
    assert_eq!(c["packets"].as_u64().unwrap(), nz + ns);
    assert_eq!(c["sources"][0]["path"], ZW);
    assert_eq!(c["sources"][0]["packets"], nz);
    assert_eq!(c["sources"][1]["path"], SD);
    assert_eq!(c["sources"][1]["packets"], ns);
    // syn-drops was captured first: its frames are 1..=ns, zero-window's follow.
    assert_eq!(c["first_ts_ns"], sd["first_ts_ns"]);
    assert_eq!(c["last_ts_ns"], zw["last_ts_ns"]);
    // The same findings as each file alone, cited as (file, frame).
    let mut expected = identities(zw, false, ZW);
    expected.extend(identities(sd, false, SD));
    expected.sort();
    assert!(expected.len() >= 2, "{expected:?}");
    assert_eq!(identities(c, true, ""), expected);
    // Merged frame numbers: syn-drops frames unchanged, zero-window's shifted by ns.
    for f in c["findings"].as_array().unwrap() {
        let frames = f["frames"].as_array().unwrap();
        let sf = f["source_frames"].as_array().unwrap();
        assert_eq!(frames.len(), sf.len());
        for (n, s) in frames.iter().zip(sf) {
            let shift = if s["file"] == ZW { ns } else { 0 };
            assert_eq!(
                n.as_u64().unwrap(),
                s["frame"].as_u64().unwrap() + shift,
                "{f}"
            );
        }
    }
    // JSON Lines carries source_frames too.
    let o = run(&["analyze", "--format", "jsonl", "--merge", ZW, SD]);
    let first: Value = serde_json::from_str(
        std::str::from_utf8(&o.stdout)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(first["path"], format!("{ZW}+{SD}"));
    assert!(first["source_frames"]
        .as_array()
        .is_some_and(|a| !a.is_empty()));
}

#[test]
fn merge_text_and_check() {
    let o = run(&["analyze", "--merge", ZW, SD]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let text = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with(&format!("== {ZW}+{SD} (pcapng, ")),
        "{text}"
    );
    assert!(
        lines[1].starts_with(&format!("   merged from {ZW} (pcap, ")),
        "{text}"
    );
    assert!(text.contains(&format!("        frames: {SD}#")), "{text}");
    assert!(text.contains(&format!("        frames: {ZW}#")), "{text}");
    assert_eq!(text.matches("\n== ").count(), 0, "one capture block");

    let o = run(&["check", "--merge", ZW, SD]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.starts_with(&format!("{ZW}+{SD}: FAIL: ")), "{out}");

    // An unreadable member: still one report, exit 2, error names the file.
    let o = run(&["check", "--merge", SD, "does/not/exist.pcap"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(
        out.contains("does/not/exist.pcap") && out.contains("ERROR"),
        "{out}"
    );
}

/// The merged numbering is mergecap's: each finding's `frames`, looked up in
/// `mergecap -w m.pcapng ZW SD` (one tshark pass per file), have the times and
/// lengths of its `source_frames` in their files.
#[test]
fn frames_match_mergecap_output() {
    let mergecap = Command::new("mergecap")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success());
    if tshark().is_none() || !mergecap {
        assert!(!in_ci(), "tshark/mergecap required in CI");
        println!("SKIP: tshark or mergecap not installed");
        return;
    }
    let d = pcapsleuth_testkit::scratch("cli-merge");
    let merged = d.join("m.pcapng");
    let root = repo_root();
    let st = Command::new("mergecap")
        .arg("-w")
        .arg(&merged)
        .arg(root.join(ZW))
        .arg(root.join(SD))
        .stderr(Stdio::null())
        .status();
    assert!(st.is_ok_and(|s| s.success()));
    let fields = |file: &PathBuf, filter: &str| -> Vec<String> {
        let o = Command::new("tshark")
            .arg("-n")
            .arg("-r")
            .arg(file)
            .args([
                "-Y",
                filter,
                "-T",
                "fields",
                "-e",
                "frame.time_epoch",
                "-e",
                "frame.len",
            ])
            .stderr(Stdio::null())
            .output()
            .expect("tshark");
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    };
    // Every frame of each source, once: frame.number → "time\tlen".
    let table = |p: &str| -> std::collections::HashMap<u64, String> {
        fields(&root.join(p), "frame")
            .into_iter()
            .enumerate()
            .map(|(i, l)| (i as u64 + 1, l))
            .collect()
    };
    let (tz, tsd) = (table(ZW), table(SD));
    let tm: std::collections::HashMap<u64, String> = fields(&merged, "frame")
        .into_iter()
        .enumerate()
        .map(|(i, l)| (i as u64 + 1, l))
        .collect();
    assert_eq!(tm.len(), tz.len() + tsd.len());
    let m = json(&["analyze", "--format", "json", "--merge", ZW, SD]);
    let mut checked = 0;
    for f in m["captures"][0]["findings"].as_array().unwrap() {
        let got: Vec<String> = f["frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| tm.get(&n.as_u64().unwrap()).cloned().unwrap_or_default())
            .collect();
        let want: Vec<String> = f["source_frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let t = if s["file"] == ZW { &tz } else { &tsd };
                t.get(&s["frame"].as_u64().unwrap())
                    .cloned()
                    .unwrap_or_default()
            })
            .collect();
        assert_eq!(got, want, "{f}");
        checked += 1;
    }
    assert!(checked >= 2);
}

const MB: &str = "fixtures/captures/mss-blackhole.pcap";

/// (client, server, state, packets) of every flow of one `flows` capture, sorted.
fn flow_keys(c: &Value) -> Vec<String> {
    let mut v: Vec<String> = c["flows"]
        .as_array()
        .expect("flows")
        .iter()
        .map(|f| {
            format!(
                "{}:{} {}:{} {} {}",
                f["client"],
                f["client_port"],
                f["server"],
                f["server_port"],
                f["state"],
                f["packets"]
            )
        })
        .collect();
    v.sort();
    v
}

/// `flows --merge` gives one entry with the flows of both files, unchanged.
#[test]
fn flows_merge_json_and_text() {
    let m = json(&["flows", "--format", "json", "--merge", MB, SD]);
    let caps = m["captures"].as_array().unwrap();
    assert_eq!(caps.len(), 1, "one merged capture: {m}");
    let c = &caps[0];
    assert_eq!(c["path"], format!("{MB}+{SD}"));
    assert_eq!(c["sources"][0]["path"], MB);
    assert_eq!(c["sources"][1]["path"], SD);
    let mb = json(&["flows", "--format", "json", MB]);
    let sd = json(&["flows", "--format", "json", SD]);
    assert!(mb["captures"][0].get("sources").is_none());
    let mut expected = flow_keys(&mb["captures"][0]);
    let n_mb = expected.len();
    expected.extend(flow_keys(&sd["captures"][0]));
    expected.sort();
    assert!(n_mb >= 1 && expected.len() > n_mb, "{expected:?}");
    assert_eq!(flow_keys(c), expected);
    // Merged (mergecap) frame numbers: syn-drops was captured first, so its
    // flows keep their frame numbers and mss-blackhole's are shifted by the
    // number of syn-drops frames.
    let ns = c["sources"][1]["packets"].as_u64().unwrap();
    assert!(ns > 0);
    let tuple = |f: &Value| {
        format!(
            "{}:{} {}:{}",
            f["client"], f["client_port"], f["server"], f["server_port"]
        )
    };
    let mut checked = 0;
    for (single, shift) in [(&mb, ns), (&sd, 0)] {
        for f in single["captures"][0]["flows"].as_array().unwrap() {
            let m: Vec<&Value> = c["flows"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|g| tuple(g) == tuple(f))
                .collect();
            assert_eq!(m.len(), 1, "{}", tuple(f));
            for k in ["first_frame", "last_frame"] {
                assert_eq!(
                    m[0][k].as_u64().unwrap(),
                    f[k].as_u64().unwrap() + shift,
                    "{k} of {}",
                    tuple(f)
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, expected.len());

    let o = run(&["flows", "--merge", MB, SD]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let text = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("== {MB}+{SD}"), "{text}");
    assert!(
        lines[1].starts_with(&format!("   merged from {MB} (pcap, ")),
        "{text}"
    );
    assert!(lines[1].contains(&format!(", {SD} (pcap, ")), "{text}");
    assert_eq!(text.matches("== ").count(), 1, "one capture block: {text}");
    assert_eq!(
        lines.last().copied(),
        Some(format!("-- {} flows", expected.len()).as_str()),
        "{text}"
    );
    // Without --merge: two blocks, no merged-from line.
    let o = run(&["flows", MB, SD]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert_eq!(text.matches("== ").count(), 2, "{text}");
    assert!(!text.contains("merged from"), "{text}");
}
