//! The ledger on real captures: ingest → decode → flow → ledger over every
//! capture of `fixtures/captures`, `../shared/lab` and `../shared/lab-incoming`.
//!
//! - acceptance (issue 10): for every TCP connection a truth file lists under
//!   `events` (a connection a detector flags), the ledger names a cause other
//!   than `unknown` for at least 95 % of its stall time;
//! - snapshots of the ledger of a few fixtures (SYN ladder, RTO backoff /
//!   path MTU, zero window + probe0, probe0 after a self-addressed
//!   frag-needed, Nagle × delayed ACK);
//! - the public corpus's `unknown` share (`#[ignore]`: run with `--ignored`,
//!   it feeds `docs/stall-ledger-corpus.md`).
use pcapsleuth_core::StreamId;

mod common;

use common::{lab_and_fixtures, ledger_of};
use pcapsleuth_ledger::{LedgerReport, StallCause, StreamLedger};
use serde_json::Value;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// A truth file's flow: (src, sport, dst, dport), TCP only.
fn truth_flows(capture: &Path) -> Vec<(IpAddr, u16, IpAddr, u16)> {
    let truth = PathBuf::from(format!("{}.truth.json", capture.display()));
    let Ok(text) = std::fs::read_to_string(&truth) else {
        return Vec::new();
    };
    let v: Value = serde_json::from_str(&text).expect("truth file is JSON");
    let mut out = Vec::new();
    for ev in v["events"].as_array().into_iter().flatten() {
        let f = &ev["flow"];
        if f["proto"].as_str().is_some_and(|p| p != "tcp") {
            continue;
        }
        let parse = || -> Option<(IpAddr, u16, IpAddr, u16)> {
            Some((
                f["src"].as_str()?.parse().ok()?,
                u16::try_from(f["sport"].as_u64()?).ok()?,
                f["dst"].as_str()?.parse().ok()?,
                u16::try_from(f["dport"].as_u64()?).ok()?,
            ))
        };
        if let Some(t) = parse() {
            if !out.contains(&t) {
                out.push(t);
            }
        }
    }
    out
}

/// Ledgers of the streams on `flow` (either orientation; a 5-tuple may be reused).
fn streams_on(r: &LedgerReport, (a, ap, b, bp): (IpAddr, u16, IpAddr, u16)) -> Vec<&StreamLedger> {
    r.streams
        .iter()
        .filter(|s| {
            let (c, sv) = (s.client, s.server);
            (c.addr == a && c.port == ap && sv.addr == b && sv.port == bp)
                || (c.addr == b && c.port == bp && sv.addr == a && sv.port == ap)
        })
        .collect()
}

fn unknown_ms(s: &StreamLedger) -> f64 {
    s.time_lost_by_cause
        .iter()
        .filter(|c| c.cause == StallCause::Unknown)
        .map(|c| c.duration_ms)
        .sum()
}

fn total_ms(s: &StreamLedger) -> f64 {
    s.time_lost_by_cause.iter().map(|c| c.duration_ms).sum()
}

#[test]
fn flagged_connections_have_named_causes() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for cap in lab_and_fixtures() {
        let report = ledger_of(&cap).expect("capture opens");
        let name = cap
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        for flow in truth_flows(&cap) {
            let (mut total, mut unknown) = (0.0, 0.0);
            for s in streams_on(&report, flow) {
                total += total_ms(s);
                unknown += unknown_ms(s);
            }
            let named = if total > 0.0 {
                100.0 * (1.0 - unknown / total)
            } else {
                100.0
            };
            println!(
                "{name:<40} {}:{} -> {}:{}  stall {total:>10.3} ms  named {named:>6.2} %",
                flow.0, flow.1, flow.2, flow.3
            );
            checked += 1;
            if named < 95.0 {
                failures.push(format!(
                    "{name} {flow:?}: {named:.2} % named of {total:.3} ms"
                ));
            }
        }
    }
    println!("{checked} flagged connections checked");
    assert!(
        failures.is_empty(),
        "below 95 % named:\n{}",
        failures.join("\n")
    );
}

fn fixture(name: &str) -> PathBuf {
    pcapsleuth_testkit::fixtures_dir().join(name)
}

#[allow(dead_code)]
fn causes(r: &LedgerReport, stream: u64) -> Vec<StallCause> {
    r.stream(StreamId(stream))
        .map_or_else(Vec::new, |s| s.stalls.iter().map(|e| e.cause).collect())
}

#[test]
fn snapshot_syn_drops() {
    let r = ledger_of(&fixture("syn-drops.pcap")).expect("fixture opens");
    // 192.0.2.10:43001: SYN re-sent after 1, 2 and 4 s (steps 1-3).
    let s = r
        .streams
        .iter()
        .find(|s| s.client.port == 43001)
        .expect("stream 43001");
    let steps: Vec<_> = s
        .stalls
        .iter()
        .map(|e| (e.cause, e.evidence.step, e.evidence.expected_ms))
        .collect();
    assert_eq!(
        steps,
        [
            (StallCause::SynTimeout, Some(1), Some(1000.0)),
            (StallCause::SynTimeout, Some(2), Some(2000.0)),
            (StallCause::SynTimeout, Some(3), Some(4000.0)),
        ]
    );
    assert_eq!(
        s.summary,
        "7.1 s of 7.1 s lost to 3 SYN retransmission timeouts"
    );
    insta::assert_json_snapshot!("syn-drops", r);
}

#[test]
fn snapshot_mss_blackhole() {
    let r = ledger_of(&fixture("mss-blackhole.pcap")).expect("fixture opens");
    let s = r
        .streams
        .iter()
        .find(|s| s.client.port == 45001)
        .expect("stream 45001");
    let rto: Vec<_> = s
        .stalls
        .iter()
        .filter(|e| e.evidence.step.is_some())
        .collect();
    assert!(rto.len() >= 5, "{rto:#?}");
    assert!(rto.iter().all(|e| e.cause == StallCause::PathMtu));
    assert!(r.cause_ms(StallCause::PathMtu) > 20_000.0);
    insta::assert_json_snapshot!("mss-blackhole", r);
}

#[test]
fn snapshot_zero_window() {
    let r = ledger_of(&fixture("zero-window.pcap")).expect("fixture opens");
    assert!(r.cause_ms(StallCause::Probe0) > 0.0);
    assert!(r.cause_ms(StallCause::ReceiverZeroWindow) > 0.0);
    insta::assert_json_snapshot!("zero-window", r);
}

#[test]
fn snapshot_self_frag_needed() {
    let r = ledger_of(&fixture("self-frag-needed.pcapng")).expect("fixture opens");
    let probe: Vec<_> = r
        .streams
        .iter()
        .flat_map(|s| s.stalls.iter())
        .filter(|e| e.cause == StallCause::Probe0)
        .collect();
    assert!(!probe.is_empty(), "{r:#?}");
    assert!(probe.iter().all(|e| e.evidence.trigger_frame.is_some()));
    insta::assert_json_snapshot!("self-frag-needed", r);
}

#[test]
fn snapshot_delayed_ack_stall() {
    let Some(shared) = pcapsleuth_testkit::shared_dir() else {
        assert!(!pcapsleuth_testkit::in_ci(), "../shared is required in CI");
        println!("SKIP: ../shared not found");
        return;
    };
    let r = ledger_of(&shared.join("lab-incoming/delayed-ack-stall.pcap")).expect("capture opens");
    let nagle: Vec<_> = r
        .streams
        .iter()
        .flat_map(|s| s.stalls.iter())
        .filter(|e| e.cause == StallCause::NagleDelayedAck)
        .collect();
    // 19 of 20 requests wait 40.9-47.0 ms for the server's delayed ACK.
    assert_eq!(nagle.len(), 19, "{r:#?}");
    assert!(nagle.iter().all(|e| (40.0..48.0).contains(&e.duration_ms)));
    assert!(nagle.iter().all(|e| e.evidence.expected_ms == Some(40.0)));
    // The TCP_NODELAY flow has none.
    let streams: std::collections::BTreeSet<_> = nagle.iter().map(|e| e.tcp_stream).collect();
    assert_eq!(streams.len(), 1);
    insta::assert_json_snapshot!("delayed-ack-stall", r);
}

/// Every capture of the lab and fixtures goes through without panicking and
/// with consistent roll-ups.
#[test]
fn rollups_are_consistent() {
    for cap in lab_and_fixtures() {
        let r = ledger_of(&cap).expect("capture opens");
        let by_cause: f64 = r.time_lost_by_cause.iter().map(|c| c.duration_ms).sum();
        assert!(
            (by_cause - r.total_stall_ms).abs() < 1.0,
            "{}",
            cap.display()
        );
        for s in &r.streams {
            assert!(
                s.stall_ms <= total_ms(s) + 0.01,
                "{} stream {}",
                cap.display(),
                s.tcp_stream
            );
            for e in &s.stalls {
                assert!(e.end_ns >= e.start_ns);
                assert!(e.duration_ms >= 0.0);
            }
        }
    }
}

/// Seconds per cause over a set of ledgers, with an entry filter.
struct Budget {
    by: [f64; StallCause::ALL.len()],
    entries: usize,
}

impl Budget {
    fn new() -> Self {
        Budget {
            by: [0.0; StallCause::ALL.len()],
            entries: 0,
        }
    }
    fn add(&mut self, r: &LedgerReport, keep: impl Fn(&pcapsleuth_ledger::StallEntry) -> bool) {
        for e in r.streams.iter().flat_map(|s| s.stalls.iter()) {
            if keep(e) {
                self.by[e.cause.index()] += e.duration_ms;
                self.entries += 1;
            }
        }
    }
    fn print(&self, title: &str) {
        let total: f64 = self.by.iter().sum();
        println!(
            "\n{title}: {} stalls, {:.1} s",
            self.entries,
            total / 1000.0
        );
        println!("| cause | s | share |\n|---|---:|---:|");
        for (c, ms) in StallCause::ALL.iter().zip(self.by.iter()) {
            let name = serde_json::to_value(c).unwrap();
            let share = 100.0 * ms / total.max(1e-9);
            println!(
                "| `{}` | {:.1} | {share:.2} % |",
                name.as_str().unwrap_or(""),
                ms / 1000.0
            );
        }
    }
}

/// The public corpus's `unknown` share, for `docs/stall-ledger-corpus.md`:
/// `cargo test -p pcapsleuth-ledger --test pipeline -- --ignored --nocapture corpus`.
/// Three views: every stall; stalls up to one hour (longer ones are clock
/// jumps of crafted files); and those of real captures only (without
/// `derived__bench`, whose merged file replays flows hours apart).
#[test]
#[ignore]
fn corpus_unknown_share() {
    const HOUR_MS: f64 = 3_600_000.0;
    let Some(shared) = pcapsleuth_testkit::shared_dir() else {
        println!("SKIP: ../shared not found");
        return;
    };
    let files = pcapsleuth_testkit::captures_under(&shared.join("captures"));
    let reports = pcapsleuth_testkit::par_map(&files, 2, |p| ledger_of(p));
    let (mut all, mut sane, mut real) = (Budget::new(), Budget::new(), Budget::new());
    let (mut opened, mut stalled, mut streams) = (0usize, 0usize, 0usize);
    let mut worst: Vec<(f64, String)> = Vec::new();
    for (p, r) in files.iter().zip(reports.iter()) {
        let Some(r) = r else { continue };
        let name = p.strip_prefix(&shared).unwrap_or(p).display().to_string();
        opened += 1;
        stalled += usize::from(!r.streams.is_empty());
        streams += r.streams.len();
        all.add(r, |_| true);
        sane.add(r, |e| e.duration_ms <= HOUR_MS);
        if !name.contains("derived__bench") {
            real.add(r, |e| e.duration_ms <= HOUR_MS);
        }
        let mut u = Budget::new();
        u.add(r, |e| {
            e.cause == StallCause::Unknown && e.duration_ms <= HOUR_MS
        });
        let u = u.by.iter().sum::<f64>();
        if u > 0.0 {
            worst.push((u, name));
        }
    }
    worst.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!(
        "{} files, {opened} opened, {stalled} with stalls, {streams} stalled streams",
        files.len()
    );
    all.print("every stall");
    sane.print("stalls up to one hour");
    real.print("stalls up to one hour, without derived__bench");
    println!();
    for (u, p) in worst.iter().take(12) {
        println!("unknown (up to one hour) {:.1} s  {p}", u / 1000.0);
    }
}
