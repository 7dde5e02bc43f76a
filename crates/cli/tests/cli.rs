//! End-to-end tests of the `pcapsleuth` binary: exit codes, input expansion,
//! ordering/determinism across thread counts, stdin, and output formats.

use pcapsleuth_testkit::capture::Pcap;
use pcapsleuth_testkit::{fixtures_dir, in_ci, repo_root, shared_dir, tshark};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pcapsleuth"));
    c.current_dir(repo_root()).env_remove("NO_COLOR");
    c
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

/// A committed fixture with findings (relative to the repo root).
const SYN_DROPS: &str = "fixtures/captures/syn-drops.pcap";

/// A scratch directory unique to this test.
fn scratch(name: &str) -> pcapsleuth_testkit::Scratch {
    pcapsleuth_testkit::scratch(&format!("cli-{name}"))
}

/// A valid pcap with a header and no packets (no findings).
fn empty_pcap(dir: &Path) -> PathBuf {
    let p = dir.join("empty.pcap");
    Pcap::new(1).write(&p).unwrap();
    p
}

fn not_a_capture(dir: &Path) -> PathBuf {
    let p = dir.join("notes.txt");
    std::fs::write(&p, b"hello, this is not a capture\n").unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn check_exit_0_when_nothing_reaches_threshold() {
    let d = scratch("check0");
    let e = empty_pcap(&d);
    let o = run(&["check", s(&e)]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(
        stdout(&o),
        format!(
            "{}: ok: 0 findings (0 error, 0 warning, 0 info)\n",
            e.display()
        )
    );
}

/// `fixtures/captures/capture-loss.pcap` (tcpdump stopped reading for
/// 240 ms: not trustworthy, no finding): `check` says the verdict and, only
/// with `--fail-on-quality`, fails on it, in every format.
#[test]
fn check_fails_on_capture_quality_only_when_asked() {
    const LOSS: &str = "fixtures/captures/capture-loss.pcap";
    let o = run(&["check", LOSS]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let out = stdout(&o);
    assert!(out.starts_with(&format!("{LOSS}: ok: 0 findings")), "{out}");
    assert!(
        out.contains("capture quality not_trustworthy: 1143248 B acknowledged"),
        "{out}"
    );

    for at in ["not-trustworthy", "use-with-care"] {
        let o = run(&["check", "--fail-on-quality", at, LOSS]);
        assert_eq!(o.status.code(), Some(1), "{at}: {o:?}");
        let out = stdout(&o);
        assert!(
            out.starts_with(&format!("{LOSS}: FAIL: 0 findings")),
            "{out}"
        );
        assert!(
            out.trim_end().ends_with(&format!(
                "capture quality not_trustworthy fails --fail-on-quality {at}"
            )),
            "{out}"
        );
    }
    // A trustworthy capture passes the quality gate.
    let o = run(&[
        "check",
        "--fail-on-quality",
        "use-with-care",
        "fixtures/captures/two-interfaces.pcapng",
    ]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");

    let o = run(&[
        "check",
        "--fail-on-quality",
        "not-trustworthy",
        "--format",
        "junit",
        LOSS,
    ]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let xml = stdout(&o);
    assert!(xml.contains("failures=\"1\" errors=\"0\""), "{xml}");
    assert!(
        xml.contains("<failure type=\"capture_quality\" message=\"not_trustworthy: 1143248 B"),
        "{xml}"
    );
    assert!(
        xml.contains("<property name=\"fail_on_quality\" value=\"not_trustworthy\"/>"),
        "{xml}"
    );

    let o = run(&[
        "check",
        "--fail-on-quality",
        "not-trustworthy",
        "--format",
        "github",
        LOSS,
    ]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let gh = stdout(&o);
    assert!(
        gh.starts_with(&format!(
            "::error file={LOSS},title=pcapsleuth%3A capture quality not_trustworthy::1143248 B"
        )),
        "{gh}"
    );
    // Without the option the same capture makes no annotation but the totals.
    let o = run(&["check", "--format", "github", LOSS]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(stdout(&o).lines().count(), 1, "{}", stdout(&o));

    // The same gate when CI shards are merged.
    let d = scratch("quality-gate-merge");
    let shard = d.join("shard.json");
    let o = run(&["check", "--format", "json", "-o", s(&shard), LOSS]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let o = run(&["report", "merge", "--format", "junit", s(&shard)]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(!stdout(&o).contains("capture_quality"), "{}", stdout(&o));
    let o = run(&[
        "report",
        "merge",
        "--format",
        "junit",
        "--fail-on-quality",
        "not-trustworthy",
        s(&shard),
    ]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(
        stdout(&o).contains("<failure type=\"capture_quality\""),
        "{}",
        stdout(&o)
    );
}

#[test]
fn check_exit_1_when_a_finding_reaches_threshold() {
    let o = run(&["check", SYN_DROPS]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let out = stdout(&o);
    assert!(out.starts_with(&format!("{SYN_DROPS}: FAIL: ")), "{out}");
    assert!(out.contains("syn-retransmit"), "{out}");
    assert_eq!(out.lines().count(), 1);
}

#[test]
fn check_threshold_follows_fail_on() {
    // Whatever the fixture's severities, the exit code must agree with them.
    let json = run(&["analyze", "--format", "json", SYN_DROPS]);
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    let sevs: Vec<String> = v["captures"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["severity"].as_str().unwrap().to_string())
        .collect();
    assert!(!sevs.is_empty());
    for (level, rank) in [("info", 0), ("warning", 1), ("error", 2)] {
        let reaches = sevs.iter().any(|s| {
            let r = match s.as_str() {
                "info" => 0,
                "warning" => 1,
                _ => 2,
            };
            r >= rank
        });
        let o = run(&["check", "--fail-on", level, SYN_DROPS]);
        assert_eq!(
            o.status.code(),
            Some(if reaches { 1 } else { 0 }),
            "--fail-on {level}: {o:?}"
        );
    }
}

#[test]
fn check_exit_2_for_unreadable_input_after_reporting_the_others() {
    let d = scratch("check2");
    let bad = not_a_capture(&d);
    let o = run(&["check", s(&bad), SYN_DROPS]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[0].starts_with(&format!("{}: ERROR: ", bad.display())),
        "{out}"
    );
    assert!(lines[0].contains("not a pcap"), "{out}");
    assert!(lines[1].starts_with(&format!("{SYN_DROPS}: FAIL")), "{out}");
    // A missing file is an unreadable input too.
    let o = run(&["check", "does/not/exist.pcap"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(run(&["analyze"]).status.code(), Some(2));
    assert_eq!(
        run(&["check", "--fail-on", "fatal", SYN_DROPS])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(run(&["frobnicate"]).status.code(), Some(2));
}

#[test]
fn analyze_bad_and_good_reports_good_with_exit_2() {
    let d = scratch("badgood");
    let bad = not_a_capture(&d);
    let o = run(&["analyze", "--format", "json", s(&bad), SYN_DROPS]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let caps = v["captures"].as_array().unwrap();
    assert_eq!(caps.len(), 2);
    assert_eq!(caps[0]["path"], s(&bad));
    assert!(caps[0]["error"].as_str().unwrap().contains("not a pcap"));
    assert_eq!(caps[0]["format"], Value::Null);
    assert_eq!(caps[1]["path"], SYN_DROPS);
    assert_eq!(caps[1]["error"], Value::Null);
    assert!(!caps[1]["findings"].as_array().unwrap().is_empty());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a pcap"));
    // Text shows the error inline and still reports the good capture.
    let o = run(&["analyze", s(&bad), SYN_DROPS]);
    assert_eq!(o.status.code(), Some(2));
    let out = stdout(&o);
    assert!(
        out.contains("error: ") && out.contains(&format!("== {SYN_DROPS} (pcap")),
        "{out}"
    );
}

#[test]
fn analyze_directory_is_recursive_sorted_and_skips_non_captures() {
    let d = scratch("dir");
    std::fs::create_dir_all(d.join("b/nested")).unwrap();
    std::fs::copy(repo_root().join(SYN_DROPS), d.join("b/nested/z.pcap")).unwrap();
    std::fs::copy(repo_root().join(SYN_DROPS), d.join("a.cap")).unwrap();
    empty_pcap(&d.join("b"));
    not_a_capture(&d); // notes.txt: not a capture name, so not picked up
    let o = run(&["analyze", "--format", "json", s(&d)]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let paths: Vec<String> = v["captures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            c["path"]
                .as_str()
                .unwrap()
                .strip_prefix(s(&d))
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(paths, ["/a.cap", "/b/empty.pcap", "/b/nested/z.pcap"]);
    // Same capture, same findings.
    assert_eq!(v["captures"][0]["findings"], v["captures"][2]["findings"]);
    // A directory without captures is an input error.
    let e = scratch("emptydir");
    let o = run(&["analyze", s(&e)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no capture files"));
}

fn many_inputs() -> Vec<String> {
    let mut v = vec!["fixtures/captures".to_string()];
    match shared_dir() {
        Some(sh) => v.push(sh.join("lab").display().to_string()),
        None => assert!(!in_ci(), "../shared is absent but CI is set"),
    }
    v
}

#[test]
fn output_is_identical_for_any_thread_count() {
    let inputs = many_inputs();
    for fmt in ["json", "jsonl", "text", "markdown"] {
        let mut outs = Vec::new();
        for threads in ["1", "4"] {
            let mut args = vec!["analyze", "--format", fmt, "--threads", threads];
            args.extend(inputs.iter().map(String::as_str));
            let o = run(&args);
            assert_eq!(o.status.code(), Some(0), "{o:?}");
            outs.push(o.stdout);
        }
        assert!(!outs[0].is_empty());
        assert!(
            outs[0] == outs[1],
            "--threads 1 and 4 differ for --format {fmt}"
        );
    }
}

#[test]
fn jsonl_lines_parse_and_follow_capture_order() {
    let inputs = many_inputs();
    let mut args = vec!["analyze", "--format", "jsonl"];
    args.extend(inputs.iter().map(String::as_str));
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let json = {
        let mut a = vec!["analyze", "--format", "json"];
        a.extend(inputs.iter().map(String::as_str));
        serde_json::from_slice::<Value>(&run(&a).stdout).unwrap()
    };
    // Expected: every finding of every capture, in order, with its path first.
    let mut expected = Vec::new();
    for c in json["captures"].as_array().unwrap() {
        for f in c["findings"].as_array().unwrap() {
            let mut obj = serde_json::Map::new();
            obj.insert("path".into(), c["path"].clone());
            obj.extend(f.as_object().unwrap().clone());
            expected.push(Value::Object(obj));
        }
    }
    let out = stdout(&o);
    let got: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert!(!got.is_empty());
    assert_eq!(got, expected);
    for l in out.lines() {
        assert!(l.starts_with("{\"path\":"), "{l}");
    }
}

/// A capture analysed only in part (here: `--max-flows 1` on a capture of
/// 31 interleaved connections) says so in JSON Lines too: one
/// `capture_limited` record after its findings, carrying the same `flow_cap`
/// warning as the JSON report; a capture under every bound has none.
#[test]
fn jsonl_says_when_a_capture_was_analysed_in_part() {
    let capture = "fixtures/captures/syn-drops.pcap";
    let o = run(&["analyze", "--format", "jsonl", "--max-flows", "1", capture]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let lines: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = lines.last().expect("lines");
    assert_eq!(last["record"], "capture_limited", "{lines:?}");
    assert_eq!(last["path"], capture);
    assert!(lines[..lines.len() - 1]
        .iter()
        .all(|l| l.get("record").is_none()));
    let json: Value = serde_json::from_slice(
        &run(&["analyze", "--format", "json", "--max-flows", "1", capture]).stdout,
    )
    .unwrap();
    let flow_caps: Vec<&Value> = json["captures"][0]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["kind"] == "flow_cap")
        .collect();
    assert_eq!(flow_caps.len(), 1);
    assert_eq!(last["limits"].as_array().unwrap(), &[flow_caps[0].clone()]);
    let o = run(&["analyze", "--format", "jsonl", capture]);
    assert!(!stdout(&o).contains("\"record\""), "{o:?}");
}

#[test]
fn stdin_is_read_with_dash() {
    let mut child = bin()
        .args(["analyze", "--format", "json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let data = std::fs::read(repo_root().join(SYN_DROPS)).unwrap();
    child.stdin.take().unwrap().write_all(&data).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let file: Value =
        serde_json::from_slice(&run(&["analyze", "--format", "json", SYN_DROPS]).stdout).unwrap();
    assert_eq!(v["captures"][0]["path"], "-");
    assert_eq!(
        v["captures"][0]["findings"],
        file["captures"][0]["findings"]
    );
}

#[test]
fn output_file_and_no_colour_when_piped() {
    let d = scratch("out");
    let f = d.join("report.md");
    let o = run(&["analyze", "--format", "markdown", "-o", s(&f), SYN_DROPS]);
    assert_eq!(o.status.code(), Some(0));
    assert!(o.stdout.is_empty());
    let md = std::fs::read_to_string(&f).unwrap();
    assert!(md.starts_with("# pcapsleuth report\n"));
    assert!(md.contains("### Findings"));
    let o = run(&["analyze", SYN_DROPS]);
    assert!(
        !o.stdout.contains(&0x1b),
        "no ANSI escapes when stdout is not a terminal"
    );
    let o = run(&["analyze", "-o", "/nonexistent-dir/x.txt", SYN_DROPS]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn broken_pipe_is_success() {
    let inputs = many_inputs();
    let mut args = vec!["analyze", "--format", "json", "--threads", "1"];
    args.extend(inputs.iter().map(String::as_str));
    let mut child = bin()
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // reader goes away before anything is written
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked"));
}

#[test]
fn explain_lists_and_explains() {
    let o = run(&["explain"]);
    assert_eq!(o.status.code(), Some(0));
    let list = stdout(&o);
    assert!(list.contains("syn-retransmit"), "{list}");
    let o = run(&["explain", "syn-retransmit"]);
    assert_eq!(o.status.code(), Some(0));
    let text = stdout(&o);
    assert!(text.starts_with("syn-retransmit: "), "{text}");
    assert!(
        text.lines().count() > 2,
        "explain text is more than a title: {text}"
    );
    let o = run(&["explain", "no-such-detector"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("unknown detector 'no-such-detector'") && err.contains("mss-blackhole"),
        "{err}"
    );
}

/// An alias explains its detector (`pmtu-blackhole` is `mss-blackhole`), with
/// the README's sections as readable text, not Markdown markup.
#[test]
fn explain_accepts_aliases() {
    let o = run(&["explain", "pmtu-blackhole"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = stdout(&o);
    assert!(text.starts_with("mss-blackhole: "), "{text}");
    assert!(text.contains("pmtu-blackhole"), "{text}");
    assert!(
        !text.lines().any(|l| l.starts_with('#')),
        "headings are rendered, not printed as Markdown: {text}"
    );
    assert!(
        // The first line is `id: title`, as long as the title.
        text.lines()
            .skip(1)
            .all(|l| l.chars().count() <= 80 || l.starts_with("    ") || !l.trim().contains(' ')),
        "prose is wrapped to 80 columns: {text}"
    );
    let direct = stdout(&run(&["explain", "mss-blackhole"]));
    assert_eq!(text, direct);
    let list = stdout(&run(&["explain"]));
    assert!(list.contains("pmtu-blackhole"), "{list}");
}

#[test]
fn flows_json_has_one_row_per_stream() {
    let o = run(&["flows", "--format", "json", SYN_DROPS]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema_version"], 1);
    let flows = v["captures"][0]["flows"].as_array().unwrap();
    let a: Value =
        serde_json::from_slice(&run(&["analyze", "--format", "json", SYN_DROPS]).stdout).unwrap();
    assert_eq!(
        flows.len() as u64,
        a["captures"][0]["tcp_streams"].as_u64().unwrap()
    );
    for (i, f) in flows.iter().enumerate() {
        assert_eq!(f["tcp_stream"], i as u64);
    }
    let o = run(&["flows", SYN_DROPS]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains(&format!("-- {} flows", flows.len())));
}

#[test]
fn streams_matches_tshark_layout() {
    let file = fixtures_dir().join("syn-drops.pcap");
    let o = run(&["streams", s(&file)]);
    assert_eq!(o.status.code(), Some(0));
    let ours = stdout(&o);
    assert!(ours.lines().all(|l| l.split('\t').count() == 2), "{ours}");
    if tshark().is_none() {
        assert!(!in_ci(), "tshark is required in CI");
        println!("SKIP: tshark not installed");
        return;
    }
    let t = Command::new("tshark")
        .args([
            "-n",
            "-r",
            s(&file),
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "tcp.stream",
        ])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(ours, String::from_utf8_lossy(&t.stdout));
    assert_eq!(
        run(&["streams", "does/not/exist.pcap"]).status.code(),
        Some(2)
    );
}

/// Issue 10 item 2: the per-service roll-up of the stall ledger in `flows`
/// JSON is the sum of its connections' own ledgers, and the SYN-drop fixture's
/// services lost their time to SYN retransmission timeouts.
#[test]
fn flows_json_rolls_time_lost_up_per_service() {
    let f = fixtures_dir().join("syn-drops.pcap");
    let o = run(&["flows", "--format", "json", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let doc: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let cap = &doc["captures"][0];
    let services = cap["time_lost_by_service"]
        .as_array()
        .expect("roll-up present");
    assert!(!services.is_empty());
    for s in services {
        let (server, port) = (
            s["server"].as_str().unwrap(),
            s["server_port"].as_u64().unwrap(),
        );
        let flows: Vec<&Value> = cap["flows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["server"] == server && f["server_port"] == port)
            .collect();
        assert_eq!(s["connections"].as_u64(), Some(flows.len() as u64));
        let own: f64 = flows
            .iter()
            .flat_map(|f| {
                f["time_lost_by_cause"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .map(|c| c["duration_ms"].as_f64().unwrap())
            .sum();
        let rolled = s["duration_ms"].as_f64().unwrap();
        assert!(
            (own - rolled).abs() < 0.01,
            "{server}:{port}: {own} vs {rolled}"
        );
    }
    let top = &services[0];
    assert_eq!(top["time_lost_by_cause"][0]["cause"], "syn_timeout");
    let ms: Vec<f64> = services
        .iter()
        .map(|s| s["duration_ms"].as_f64().unwrap())
        .collect();
    assert!(
        ms.windows(2).all(|w| w[0] >= w[1]),
        "by descending time lost"
    );
}
