//! Issue 12: the CLI habits, CI integrations and data-tool outputs, end to
//! end: `--only`/`--exclude`/`--min-severity`, `-q`, `--color`,
//! completions and man page, `check --format json|junit|github`, `-o` on
//! every command, `--shard`, `report merge`, the version in every report,
//! grouped text, Parquet read back by pyarrow, and the README's CI examples.

use pcapsleuth_testkit::{in_ci, repo_root};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pcapsleuth"));
    c.current_dir(repo_root())
        .env_remove("NO_COLOR")
        .env_remove("CI_NODE_INDEX")
        .env_remove("CI_NODE_TOTAL");
    c
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

fn scratch(name: &str) -> pcapsleuth_testkit::Scratch {
    pcapsleuth_testkit::scratch(&format!("ci-{name}"))
}

const SYN_DROPS: &str = "fixtures/captures/syn-drops.pcap";
const MSS: &str = "fixtures/captures/mss-blackhole.pcap";
const FIXTURES: &str = "fixtures/captures";

/// Run a Python helper; `None` (SKIP) when Python or its packages are
/// missing, except under CI, where that fails.
fn python(script: &Path, args: &[&Path]) -> Option<String> {
    let out = match Command::new("python3").arg(script).args(args).output() {
        Ok(o) => o,
        Err(e) => {
            assert!(!in_ci(), "python3 is required in CI: {e}");
            println!("SKIP: no python3");
            return None;
        }
    };
    if out.status.code() == Some(77) {
        assert!(
            !in_ci(),
            "python packages are required in CI: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        println!("SKIP: {}", String::from_utf8_lossy(&out.stderr).trim());
        return None;
    }
    assert!(
        out.status.success(),
        "{} failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).unwrap())
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).expect("JSON on stdout")
}

fn detectors(v: &Value) -> Vec<String> {
    v["captures"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["findings"].as_array().unwrap().iter())
        .map(|f| f["detector"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn only_exclude_min_severity_take_ids_and_aliases() {
    let all = json(&run(&["analyze", "--format", "json", FIXTURES]));
    let n_all = detectors(&all).len();
    // `pmtu-blackhole` is an alias of mss-blackhole.
    let only = json(&run(&[
        "analyze",
        "--format",
        "json",
        "--only",
        "pmtu-blackhole",
        FIXTURES,
    ]));
    let d = detectors(&only);
    assert!(!d.is_empty());
    assert!(d.iter().all(|x| x == "mss-blackhole"), "{d:?}");
    let excl = json(&run(&[
        "analyze",
        "--format",
        "json",
        "--exclude",
        "syn-retransmit,pmtu-blackhole",
        FIXTURES,
    ]));
    let d = detectors(&excl);
    assert!(d
        .iter()
        .all(|x| x != "syn-retransmit" && x != "mss-blackhole"));
    assert!(d.len() < n_all);
    let min = json(&run(&[
        "analyze",
        "--format",
        "json",
        "--min-severity",
        "error",
        FIXTURES,
    ]));
    for c in min["captures"].as_array().unwrap() {
        for f in c["findings"].as_array().unwrap() {
            assert_eq!(f["severity"], "error");
        }
    }
    // check judges only what is selected: syn-drops has warnings, no error.
    assert_eq!(run(&["check", SYN_DROPS]).status.code(), Some(1));
    assert_eq!(
        run(&["check", "--exclude", "syn-retransmit", SYN_DROPS])
            .status
            .code(),
        Some(0)
    );
    let o = run(&["analyze", "--only", "no-such-detector", SYN_DROPS]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown detector 'no-such-detector'"));
}

#[test]
fn quiet_and_color() {
    let o = run(&["-q", "check", FIXTURES]);
    let s = stdout(&o);
    assert!(!s.is_empty());
    assert!(s.lines().all(|l| !l.contains(": ok:")), "{s}");
    assert!(run(&["check", FIXTURES]).stdout.len() > o.stdout.len());
    let always = stdout(&run(&["analyze", "--color", "always", SYN_DROPS]));
    assert!(always.contains("\x1b["));
    let never = stdout(&run(&["analyze", "--color", "never", SYN_DROPS]));
    assert!(!never.contains("\x1b["));
    // Into a pipe, auto means no colour.
    assert!(!stdout(&run(&["analyze", SYN_DROPS])).contains("\x1b["));
}

#[test]
fn completions_man_and_help_examples() {
    let bash = stdout(&run(&["completions", "bash"]));
    assert!(bash.contains("pcapsleuth") && bash.contains("--min-severity"));
    let zsh = stdout(&run(&["completions", "zsh"]));
    assert!(zsh.starts_with("#compdef pcapsleuth"));
    let man = stdout(&run(&["man"]));
    assert!(
        man.contains(".TH pcapsleuth"),
        "{}",
        &man[..200.min(man.len())]
    );
    let check = stdout(&run(&["man", "check"]));
    assert!(check.contains("pcapsleuth\\-check") && check.contains("fail\\-on"));
    assert_eq!(run(&["man", "nope"]).status.code(), Some(2));
    for sub in [
        "analyze",
        "check",
        "flows",
        "annotate",
        "explain",
        "streams",
        "completions",
        "man",
    ] {
        let help = stdout(&run(&[sub, "--help"]));
        assert!(help.contains("Example"), "{sub} --help has no example");
    }
    let help = stdout(&run(&["report", "merge", "--help"]));
    assert!(help.contains("Examples:"));
}

#[test]
fn output_file_for_every_command() {
    let d = scratch("out");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["analyze", SYN_DROPS], "a.txt"),
        (vec!["check", SYN_DROPS], "c.txt"),
        (vec!["flows", SYN_DROPS], "f.txt"),
        (vec!["explain", "syn-retransmit"], "e.txt"),
        (vec!["streams", SYN_DROPS], "s.txt"),
        (vec!["completions", "fish"], "p.fish"),
        (vec!["man"], "pcapsleuth.1"),
    ];
    for (args, name) in cases {
        let out = d.join(name);
        let mut a: Vec<&str> = args.clone();
        let o_s = out.to_str().unwrap();
        a.extend(["-o", o_s]);
        let o = run(&a);
        assert!(
            o.status.code().unwrap() <= 1,
            "{a:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(o.stdout.is_empty(), "{a:?} wrote to stdout");
        assert!(
            std::fs::metadata(&out).unwrap().len() > 0,
            "{a:?} wrote nothing"
        );
    }
    // Never over an input.
    let cap = d.join("x.pcap");
    std::fs::copy(repo_root().join(SYN_DROPS), &cap).unwrap();
    let c = cap.to_str().unwrap();
    assert_eq!(run(&["check", "-o", c, c]).status.code(), Some(2));
    assert_eq!(run(&["streams", "-o", c, c]).status.code(), Some(2));
    assert_eq!(
        std::fs::read(&cap).unwrap(),
        std::fs::read(repo_root().join(SYN_DROPS)).unwrap()
    );
}

#[test]
fn version_in_every_report() {
    let v = env!("CARGO_PKG_VERSION");
    let j = json(&run(&["analyze", "--format", "json", SYN_DROPS]));
    assert_eq!(j["pcapsleuth_version"], v);
    let f = json(&run(&["flows", "--format", "json", SYN_DROPS]));
    assert_eq!(f["pcapsleuth_version"], v);
    let md = stdout(&run(&["analyze", "--format", "markdown", SYN_DROPS]));
    assert!(md.ends_with(&format!("_Generated by pcapsleuth {v}._\n")));
    let x = stdout(&run(&["check", "--format", "junit", SYN_DROPS]));
    assert!(x.contains(&format!("name=\"pcapsleuth_version\" value=\"{v}\"")));
}

#[test]
fn community_id_on_findings_and_flows() {
    let j = json(&run(&["analyze", "--format", "json", MSS]));
    let f = &j["captures"][0]["findings"][0];
    let id = f["community_id"]
        .as_str()
        .expect("TCP finding has a community_id");
    assert!(id.starts_with("1:") && id.len() == 30, "{id}");
    let flows = json(&run(&["flows", "--format", "json", MSS]));
    let stream = f["tcp_stream"].as_u64().unwrap();
    let flow = flows["captures"][0]["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["tcp_stream"].as_u64() == Some(stream))
        .unwrap();
    assert_eq!(
        flow["community_id"].as_str(),
        Some(id),
        "finding and flow agree"
    );
}

#[test]
fn junit_validates_against_the_xsd_and_reads_in_junitparser() {
    let d = scratch("junit");
    let x = d.join("junit.xml");
    let o = run(&[
        "check",
        "--format",
        "junit",
        "-o",
        x.to_str().unwrap(),
        FIXTURES,
    ]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "fixtures have warnings: exit as check"
    );
    let text = std::fs::read_to_string(&x).unwrap();
    let captures = std::fs::read_dir(repo_root().join(FIXTURES))
        .unwrap()
        .filter(|e| {
            let n = e.as_ref().unwrap().file_name();
            let n = n.to_string_lossy();
            n.ends_with(".pcap") || n.ends_with(".pcapng")
        })
        .count();
    assert_eq!(
        text.matches("<testcase ").count(),
        captures,
        "one test case per capture"
    );
    // Failures per finding at or above --fail-on: error only.
    let e = d.join("junit-error.xml");
    run(&[
        "check",
        "--format",
        "junit",
        "--fail-on",
        "error",
        "-o",
        e.to_str().unwrap(),
        FIXTURES,
    ]);
    let errors_only = std::fs::read_to_string(&e).unwrap();
    assert!(errors_only.matches("<failure ").count() < text.matches("<failure ").count());
    assert!(
        text.contains("stream filter: tcp.stream eq"),
        "failures carry the filters"
    );
    let script = repo_root().join("crates/cli/tests/junit/validate_junit.py");
    let Some(out) = python(&script, &[&x, &e]) else {
        return;
    };
    let parsed: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(parsed[0]["tests"], captures);
    let j = json(&run(&["analyze", "--format", "json", FIXTURES]));
    let warn_or_worse: usize = j["captures"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["findings"].as_array().unwrap().iter())
        .filter(|f| f["severity"] != "info")
        .count();
    let failures: usize = parsed[0]["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["failures"].as_array().unwrap().len())
        .sum();
    assert_eq!(
        failures, warn_or_worse,
        "one failure per finding at or above warning"
    );
}

#[test]
fn github_annotations() {
    let o = run(&["check", "--format", "github", SYN_DROPS]);
    assert_eq!(o.status.code(), Some(1));
    let s = stdout(&o);
    let lines: Vec<&str> = s.lines().collect();
    assert!(lines[0].starts_with(
        "::warning file=fixtures/captures/syn-drops.pcap,title=syn-retransmit (warning)::"
    ));
    assert!(lines.iter().all(|l| l.starts_with("::")));
    assert!(
        lines[0].contains("%0Aremedy: "),
        "multi-line message escaped"
    );
    assert!(lines
        .last()
        .unwrap()
        .starts_with("::notice title=pcapsleuth "));
}

#[test]
fn shards_partition_and_merge_back_to_the_whole() {
    let d = scratch("shard");
    let whole = json(&run(&["analyze", "--format", "json", FIXTURES]));
    let mut parts = Vec::new();
    for k in 1..=3 {
        let p = d.join(format!("shard-{k}.json"));
        let o = bin()
            .args([
                "check",
                "--shard",
                "ci",
                "--format",
                "json",
                "-o",
                p.to_str().unwrap(),
                FIXTURES,
            ])
            .env("CI_NODE_INDEX", k.to_string())
            .env("CI_NODE_TOTAL", "3")
            .output()
            .unwrap();
        assert!(o.status.code().unwrap() <= 1);
        parts.push(p);
    }
    let explicit = json(&run(&[
        "analyze", "--format", "json", "--shard", "2/3", FIXTURES,
    ]));
    let shard2: Value = serde_json::from_str(&std::fs::read_to_string(&parts[1]).unwrap()).unwrap();
    assert_eq!(
        explicit["captures"], shard2["captures"],
        "--shard ci = --shard K/N"
    );
    let mut args = vec!["report", "merge"];
    args.extend(parts.iter().map(|p| p.to_str().unwrap()));
    let merged = json(&run(&args));
    let by_path = |v: &Value| {
        let mut c: Vec<Value> = v["captures"].as_array().unwrap().clone();
        c.sort_by_key(|x| x["path"].as_str().unwrap().to_string());
        c
    };
    assert_eq!(
        by_path(&merged),
        by_path(&whole),
        "every capture exactly once, unchanged"
    );
    // Any format, and --fail-on as check's gate.
    let mut a = args.clone();
    a.extend(["--format", "junit", "--fail-on", "warning"]);
    let o = run(&a);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).starts_with("<?xml"));
    let mut a = args.clone();
    a.extend(["--format", "markdown"]);
    assert!(stdout(&run(&a)).starts_with("# pcapsleuth report"));
    assert_eq!(
        run(&["report", "merge", SYN_DROPS]).status.code(),
        Some(2),
        "not JSON"
    );
    assert_eq!(
        run(&["analyze", "--merge", "--shard", "1/2", FIXTURES])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        run(&["analyze", "--shard", "3/2", FIXTURES]).status.code(),
        Some(2)
    );
}

#[test]
fn repeated_findings_are_grouped_in_text() {
    // Three connections of one client to one unreachable service.
    let j = json(&run(&["analyze", "--format", "json", SYN_DROPS]));
    let n = j["captures"][0]["findings"].as_array().unwrap().len();
    let text = stdout(&run(&["analyze", SYN_DROPS]));
    let single_lines = text.lines().filter(|l| l.starts_with("warning ")).count();
    assert!(single_lines < n, "{text}");
    assert!(
        text.contains(" findings from 192.0.2.10 to 198.51.100.10:8080, e.g.: "),
        "{text}"
    );
    assert!(text.contains("        remedy: "));
}

#[test]
fn parquet_reads_back_with_pyarrow() {
    let d = scratch("parquet");
    let f = d.join("findings.parquet");
    let g = d.join("flows.parquet");
    assert_eq!(
        run(&[
            "analyze",
            "--format",
            "parquet",
            "-o",
            f.to_str().unwrap(),
            MSS,
            SYN_DROPS
        ])
        .status
        .code(),
        Some(0)
    );
    assert_eq!(
        run(&[
            "flows",
            "--format",
            "parquet",
            "-o",
            g.to_str().unwrap(),
            MSS
        ])
        .status
        .code(),
        Some(0)
    );
    assert_eq!(&std::fs::read(&f).unwrap()[..4], b"PAR1");
    let script = repo_root().join("crates/cli/tests/parquet_readback.py");
    let Some(out) = python(&script, &[&f, &g]) else {
        return;
    };
    let back: Value = serde_json::from_str(&out).unwrap();
    let j = json(&run(&["analyze", "--format", "json", MSS, SYN_DROPS]));
    let want: Vec<Value> = j["captures"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["findings"].as_array().unwrap().iter())
        .map(|f| {
            serde_json::json!([
                f["detector"],
                f["severity"],
                f["community_id"],
                f["tcp_stream"],
                f["frames"][0]
            ])
        })
        .collect();
    assert_eq!(back["findings"].as_array().unwrap(), &want);
    let flows = json(&run(&["flows", "--format", "json", MSS]));
    let want: Vec<Value> = flows["captures"][0]["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| serde_json::json!([f["tcp_stream"], f["community_id"], f["state"], f["packets"]]))
        .collect();
    assert_eq!(back["flows"].as_array().unwrap(), &want);
}

/// The `pcapsleuth` commands of the README's "Using `check` in CI" section,
/// as written (`captures/` = a copy of two fixtures, GitLab's shard
/// variables set): each must run (exit 0 or 1, never a usage error) and
/// write what it says.
#[test]
fn readme_ci_examples_run() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let start = readme.find("### Using `check` in CI").expect("CI section");
    let end = readme[start..]
        .find("\n## ")
        .map_or(readme.len(), |e| start + e);
    let section = &readme[start..end];
    let cmds: Vec<String> = section
        .lines()
        .map(str::trim)
        .map(|l| l.trim_start_matches("- ").trim_start_matches("run: "))
        .filter(|l| l.starts_with("pcapsleuth "))
        .map(|l| {
            l.split(" || ")
                .next()
                .unwrap()
                .split(" #")
                .next()
                .unwrap()
                .trim()
                .to_string()
        })
        .collect();
    assert!(cmds.len() >= 6, "{cmds:?}");
    let d = scratch("readme");
    std::fs::create_dir_all(d.join("captures")).unwrap();
    for f in [SYN_DROPS, MSS] {
        let p = repo_root().join(f);
        std::fs::copy(&p, d.join("captures").join(p.file_name().unwrap())).unwrap();
    }
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_pcapsleuth"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for node in ["1", "2"] {
        for c in &cmds {
            let o = Command::new("sh")
                .arg("-c")
                .arg(c)
                .current_dir(&d)
                .env("PATH", &path)
                .env("CI_NODE_INDEX", node)
                .env("CI_NODE_TOTAL", "2")
                .output()
                .unwrap();
            assert!(
                matches!(o.status.code(), Some(0 | 1)),
                "{c}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    }
    for f in [
        "pcapsleuth-report.md",
        "pcapsleuth-junit.xml",
        "junit-1.xml",
        "junit-2.xml",
        "shard-1.json",
        "shard-2.json",
    ] {
        assert!(d.join(f).exists(), "{f} not written by the README commands");
    }
    let script = repo_root().join("crates/cli/tests/junit/validate_junit.py");
    let _ = python(
        &script,
        &[&d.join("pcapsleuth-junit.xml"), &d.join("junit-1.xml")],
    );
}
