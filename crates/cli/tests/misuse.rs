//! Bad input and misuse, each tried as a user would (issue 11, items 4–5):
//! an output naming an input, standard input given twice, captures read only
//! in part (corrupt block, `head -c`, gzip cut on a record boundary), read
//! errors part way, `--merge` out of file descriptors, and a SYN still
//! unanswered when the capture ended.

use pcapsleuth_testkit::repo_root;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pcapsleuth"));
    c.current_dir(repo_root()).env("NO_COLOR", "1");
    c
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A scratch directory unique to this test.
fn scratch(name: &str) -> pcapsleuth_testkit::Scratch {
    pcapsleuth_testkit::scratch(&format!("misuse-{name}"))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(repo_root().join("fixtures/captures").join(name)).unwrap()
}

/// The first `n` bytes of fixture `name`, as `head -c n` writes them.
fn head_c(dir: &Path, name: &str, n: usize) -> PathBuf {
    let p = dir.join(format!("head-{n}-{name}"));
    std::fs::write(&p, &fixture(name)[..n]).unwrap();
    p
}

/// Byte offset just past the first `records` packet records of a legacy pcap.
fn pcap_records_end(d: &[u8], records: usize) -> usize {
    let mut off = 24;
    for _ in 0..records {
        let len = u32::from_le_bytes(d[off + 8..off + 12].try_into().unwrap()) as usize;
        off += 16 + len;
    }
    off
}

#[test]
fn analyze_and_flows_refuse_to_write_over_an_input() {
    let d = scratch("overwrite");
    let x = d.join("x.pcap");
    let original = fixture("syn-drops.pcap");
    std::fs::write(&x, &original).unwrap();
    // Also through another name for the same file.
    let alias = d.join("alias.pcap");
    std::os::unix::fs::symlink(&x, &alias).unwrap();
    for args in [
        vec!["analyze", "-o", s(&x), s(&x)],
        vec!["analyze", "--format", "html", "-o", s(&x), s(&x)],
        vec!["analyze", "--format", "json", "-o", s(&alias), s(&x)],
        vec!["analyze", "-o", s(&x), s(&d)],
        vec!["flows", "-o", s(&x), s(&x)],
        vec!["flows", "--format", "json", "-o", s(&x), "--merge", s(&x)],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        assert!(
            stderr(&o).contains("refusing to write the report over the input"),
            "{o:?}"
        );
        assert_eq!(
            std::fs::read(&x).unwrap(),
            original,
            "{args:?} touched the input"
        );
    }
    // A new file is fine, and flows -o writes the table there.
    let out = d.join("flows.txt");
    let o = run(&["flows", "-o", s(&out), s(&x)]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(std::fs::metadata(&out).unwrap().len() > 0);
}

#[test]
fn standard_input_given_twice_is_a_usage_error() {
    for args in [
        vec!["analyze", "--merge", "-", "-"],
        vec!["analyze", "-", "-"],
        vec!["check", "--merge", "-", "-"],
        vec!["flows", "--merge", "-", "-"],
    ] {
        let mut child = bin()
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Refused before reading: the write may fail with a closed pipe.
        let _ = child
            .stdin
            .take()
            .unwrap()
            .write_all(&fixture("syn-drops.pcap"));
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        assert!(
            stderr(&o).contains("standard input can be read only once"),
            "{o:?}"
        );
        assert!(o.stdout.is_empty(), "{o:?}");
    }
}

#[test]
fn text_mode_reports_unreadable_inputs_on_stderr_too() {
    let o = run(&["analyze", "does/not/exist.pcap"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("does/not/exist.pcap"), "{o:?}");
    let o = run(&["flows", "does/not/exist.pcap"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("does/not/exist.pcap"), "{o:?}");
}

#[test]
fn check_fails_on_a_capture_read_only_in_part() {
    let d = scratch("partial");
    // One corrupt pcapng block length: reading stops after 20 frames.
    let mut b = fixture("self-frag-needed.pcapng");
    let (mut off, mut epbs) = (0usize, 0);
    loop {
        let t = u32::from_le_bytes(b[off..off + 4].try_into().unwrap());
        let len = u32::from_le_bytes(b[off + 4..off + 8].try_into().unwrap());
        epbs += usize::from(t == 6);
        if epbs == 21 {
            b[off + 4..off + 8].copy_from_slice(&(len + 3).to_le_bytes());
            break;
        }
        off += len as usize;
    }
    let corrupt = d.join("corrupt.pcapng");
    std::fs::write(&corrupt, &b).unwrap();
    let o = run(&["check", s(&corrupt)]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let line = stdout(&o);
    assert!(
        line.contains(&format!(
            "INCOMPLETE: read 20 frames, then stopped at byte {off} (frame 21)"
        )),
        "{line}"
    );
    assert!(!line.contains(": ok:"), "{line}");

    // `head -c 3000` of a capture.
    let cut = head_c(&d, "self-frag-needed.pcapng", 3000);
    let o = run(&["check", s(&cut)]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(stdout(&o).contains("INCOMPLETE: read 18 frames"), "{o:?}");
    // The gate can be told to accept it; the line still says INCOMPLETE.
    let o = run(&["check", "--allow-incomplete", s(&cut)]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(stdout(&o).contains("INCOMPLETE"), "{o:?}");

    // JSON and JSONL say so too.
    let o = run(&["analyze", "--format", "json", s(&cut)]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["captures"][0]["incomplete"]["kind"], "truncated_record");
    assert_eq!(v["captures"][0]["incomplete"]["frame"], 19);
    let o = run(&[
        "analyze",
        "--format",
        "jsonl",
        s(&cut),
        "does/not/exist.pcap",
    ]);
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let records: Vec<&str> = lines.iter().filter_map(|l| l["record"].as_str()).collect();
    assert_eq!(
        records,
        ["capture_incomplete", "capture_error"],
        "{lines:?}"
    );
    assert_eq!(lines.last().unwrap()["path"], "does/not/exist.pcap");
    // A complete capture has no such record.
    let o = run(&[
        "analyze",
        "--format",
        "jsonl",
        "fixtures/captures/syn-drops.pcap",
    ]);
    assert!(!stdout(&o).contains("\"record\""), "{o:?}");
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn gzip_cut_on_a_record_boundary_is_incomplete() {
    let d = scratch("gzip");
    let raw = fixture("syn-drops.pcap");
    let end = pcap_records_end(&raw, 20);
    // Compressed up to a record boundary and flushed, but never finished:
    // no final deflate block, no gzip trailer (a copy interrupted mid-way).
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(&raw[..end]).unwrap();
    enc.flush().unwrap();
    let gz = enc.get_ref().clone();
    let p = d.join("cut.pcap.gz");
    std::fs::write(&p, &gz).unwrap();
    let o = run(&["check", s(&p)]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let line = stdout(&o);
    assert!(line.contains("INCOMPLETE: read 20 frames"), "{line}");
    assert!(line.contains("gzip"), "{line}");
    let o = run(&["analyze", s(&p)]);
    assert!(
        stdout(&o).contains("capture warning: truncated_record"),
        "{o:?}"
    );
    // The whole stream, properly finished, is complete.
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(&raw).unwrap();
    let full = d.join("full.pcap.gz");
    std::fs::write(&full, enc.finish().unwrap()).unwrap();
    let o = run(&["check", "--fail-on", "error", s(&full)]);
    assert!(!stdout(&o).contains("INCOMPLETE"), "{o:?}");
}

#[test]
fn streams_prints_what_it_read_before_a_read_error() {
    let d = scratch("streams");
    let raw = fixture("syn-drops.pcap");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(&raw).unwrap();
    let mut gz = enc.finish().unwrap();
    // Corrupt the gzip trailer's CRC-32: every record inflates, then the
    // stream fails its checksum.
    let n = gz.len();
    gz[n - 8] ^= 0xff;
    let p = d.join("badcrc.pcap.gz");
    std::fs::write(&p, &gz).unwrap();
    let o = run(&["streams", s(&p)]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let good = run(&["streams", "fixtures/captures/syn-drops.pcap"]);
    assert!(!stdout(&good).is_empty());
    assert_eq!(stdout(&o), stdout(&good), "rows before the error are shown");
    assert!(stderr(&o).contains("error"), "{o:?}");
}

#[test]
fn merge_out_of_file_descriptors_fails_loudly_instead_of_covering_a_subset() {
    let d = scratch("fds");
    let src = repo_root().join("fixtures/captures/syn-drops.pcap");
    let mut files = Vec::new();
    for i in 0..80 {
        let f = d.join(format!("f{i:03}.pcap"));
        std::os::unix::fs::symlink(&src, &f).unwrap();
        files.push(f.display().to_string());
    }
    let cmd = format!(
        "ulimit -n 40 && exec {} check --merge {}",
        env!("CARGO_BIN_EXE_pcapsleuth"),
        files.join(" ")
    );
    let o = Command::new("sh").arg("-c").arg(&cmd).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let out = stdout(&o);
    assert!(
        out.contains("could not be opened for lack of file descriptors"),
        "{out}"
    );
    assert!(out.contains("nothing was analysed"), "{out}");
    assert!(out.contains("0 findings"), "{out}");
}

#[test]
fn syn_unanswered_at_the_end_of_a_cut_capture_does_not_fail_the_error_gate() {
    // `head -c 5000 fixtures/captures/syn-drops.pcap`: three connections sent
    // their second SYN shortly before the capture ends; their next retry was
    // not yet due, so they are censored (info), not "never answered" (error).
    let d = scratch("censored");
    let cut = head_c(&d, "syn-drops.pcap", 5000);
    let o = run(&["check", "--fail-on", "error", "--allow-incomplete", s(&cut)]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let o = run(&["analyze", "--format", "json", s(&cut)]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let syn: Vec<&serde_json::Value> = v["captures"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["detector"] == "syn-retransmit")
        .collect();
    let censored: Vec<_> = syn
        .iter()
        .filter(|f| f["evidence"]["capture_end_after_last_syn_ms"].is_number())
        .collect();
    assert_eq!(censored.len(), 3, "{syn:?}");
    for f in censored {
        assert_eq!(f["severity"], "info");
        assert_eq!(f["evidence"]["next_retry_due_ms"], 2000.0);
        assert!(f["summary"]
            .as_str()
            .unwrap()
            .contains("still unanswered when the capture ended"));
    }
    // The full capture concludes them (they connected after more retries).
    let o = run(&[
        "analyze",
        "--format",
        "json",
        "fixtures/captures/syn-drops.pcap",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for f in v["captures"][0]["findings"].as_array().unwrap() {
        if [42001, 43001, 45001].contains(&f["flow"]["client_port"].as_u64().unwrap_or(0)) {
            assert_eq!(f["severity"], "warning", "{f}");
        }
    }
}
