//! `tcp.stream` parity with tshark 4.0 over every capture in `../shared/captures`
//! and `../shared/lab`: frame-for-frame equality of
//! `tshark -n -r F -T fields -e frame.number -e tcp.stream` with
//! [`pcapsleuth_analyze::dump_streams`].
//!
//! Deliberate differences are listed in [`ALLOWED`] with their exact mismatch
//! counts and explained in `docs/tcp-stream-differences.md`; any other mismatch
//! fails. Multi-valued `tcp.stream` (several TCP layers in one frame, e.g. an
//! ICMP error quoting TCP inside a tunnel) is compared on its last (innermost) value.
//!
//! Set `PCAPSLEUTH_TSHARK_CACHE=DIR` to reuse tshark outputs stored as
//! `DIR/<path relative to shared, '/' → '_'>.tsv` (developer speed-up only).

use pcapsleuth_testkit::{captures_under, in_ci, shared_dir, tshark};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Captures with known, documented differences: (path relative to shared/, mismatching frames).
const ALLOWED: &[(&str, usize)] = &[];

/// The 78 MB time-ordered merge is checked on its first frames only (runtime).
const BENCH: &str = "captures/derived__bench/real-traffic-merged-ethernet.pcap";
const BENCH_FRAMES: u64 = 20_000;

#[derive(Debug)]
struct Outcome {
    rel: String,
    frames: usize,
    streams: u64,
    mismatches: usize,
    first: Option<String>,
}

fn tshark_streams(shared: &Path, rel: &str, limit: Option<u64>) -> Vec<(u64, Option<u64>)> {
    let text = match std::env::var("PCAPSLEUTH_TSHARK_CACHE") {
        Ok(dir) if limit.is_none() => {
            let p = Path::new(&dir).join(format!("{}.tsv", rel.replace('/', "_")));
            std::fs::read_to_string(p).ok()
        }
        _ => None,
    };
    let text = text.unwrap_or_else(|| {
        let mut cmd = Command::new("tshark");
        cmd.arg("-n").arg("-r").arg(shared.join(rel));
        if let Some(n) = limit {
            cmd.arg("-c").arg(n.to_string());
        }
        cmd.args(["-T", "fields", "-e", "frame.number", "-e", "tcp.stream"]);
        let out = cmd.output().expect("tshark runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    });
    text.lines()
        .filter_map(|l| {
            let mut it = l.split('\t');
            let frame = it.next()?.trim().parse::<u64>().ok()?;
            let stream = it.next().and_then(|s| s.split(',').next_back()).and_then(|s| s.trim().parse::<u64>().ok());
            Some((frame, stream))
        })
        .collect()
}

fn compare(shared: &Path, path: &Path) -> Outcome {
    let rel = path.strip_prefix(shared).unwrap_or(path).to_string_lossy().replace('\\', "/");
    let limit = (rel == BENCH).then_some(BENCH_FRAMES);
    let theirs = tshark_streams(shared, &rel, limit);
    let mut ours = pcapsleuth_analyze::dump_streams(path).unwrap_or_default();
    if let Some(n) = limit {
        ours.truncate(n as usize);
    }
    let mut mismatches = 0;
    let mut first = None;
    let n = theirs.len().max(ours.len());
    for i in 0..n {
        let t = theirs.get(i);
        let o = ours.get(i);
        if t != o {
            mismatches += 1;
            if first.is_none() {
                first = Some(format!("frame {}: tshark {:?} ours {:?}", i + 1, t.map(|x| x.1), o.map(|x| x.1)));
            }
        }
    }
    let streams = theirs.iter().filter_map(|x| x.1).max().map_or(0, |m| m + 1);
    Outcome { rel, frames: theirs.len(), streams, mismatches, first }
}

#[test]
fn tcp_stream_matches_tshark() {
    let Some(shared) = shared_dir() else {
        assert!(!in_ci(), "../shared is required in CI");
        println!("SKIP: ../shared not found");
        return;
    };
    if tshark().is_none() {
        assert!(!in_ci(), "tshark is required in CI");
        println!("SKIP: tshark not installed");
        return;
    }
    let mut files = captures_under(&shared.join("captures"));
    files.extend(captures_under(&shared.join("lab")));
    assert!(files.len() > 100, "corpus has only {} captures", files.len());
    // Biggest first so the long ones overlap with the many small ones.
    files.sort_by_key(|p| std::cmp::Reverse(std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)));

    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Outcome>> = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 4);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(p) = files.get(i) else { break };
                let o = compare(&shared, p);
                results.lock().unwrap_or_else(|e| e.into_inner()).push(o);
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by(|a, b| a.rel.cmp(&b.rel));

    println!("{:>7} {:>6} {:>6} {:>8}  capture", "frames", "strms", "mism", "allowed");
    let mut failures = Vec::new();
    let (mut total_frames, mut total_mism) = (0, 0);
    for o in &results {
        let allowed = ALLOWED.iter().find(|(p, _)| *p == o.rel).map(|(_, n)| *n);
        total_frames += o.frames;
        total_mism += o.mismatches;
        if o.mismatches > 0 || allowed.is_some() {
            println!(
                "{:>7} {:>6} {:>6} {:>8}  {}  {}",
                o.frames,
                o.streams,
                o.mismatches,
                allowed.map_or("-".to_string(), |n| n.to_string()),
                o.rel,
                o.first.as_deref().unwrap_or("")
            );
        }
        if o.mismatches != allowed.unwrap_or(0) {
            failures.push(format!("{}: {} mismatches (allowed {:?}); first {:?}", o.rel, o.mismatches, allowed, o.first));
        }
    }
    println!(
        "{} captures, {} frames compared, {} mismatching frames, {} captures identical",
        results.len(),
        total_frames,
        total_mism,
        results.iter().filter(|o| o.mismatches == 0).count()
    );
    for (p, _) in ALLOWED {
        assert!(results.iter().any(|o| o.rel == *p), "allowlisted capture {p} not in corpus");
    }
    assert!(failures.is_empty(), "tcp.stream differs from tshark:\n{}", failures.join("\n"));
}
