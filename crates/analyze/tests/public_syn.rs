//! Issue 2 acceptance on the public corpus: every SYN retransmission tshark
//! shows in a `syn-retrans` row of `../shared/captures/INDEX.md` gets a
//! `syn-retransmit` finding, and SYNs merely captured twice do not.
//!
//! Per capture, one tshark pass lists every SYN and SYN/ACK (`frame.number`,
//! `frame.time_epoch`, `tcp.stream`, `tcp.seq_raw`, `ip.id`,
//! `frame.interface_id`, `vlan.id`, `tcp.flags.ack`). Per `tcp.stream` and
//! initial sequence number (ISN), successive SYNs are grouped into *sends*: a
//! SYN less than [`RETRY_GAP_NS`] (100 ms, the detector's own
//! `MIN_RETRY_GAP_NS`: RFC 6298 and every known stack wait ≥ 200 ms) after the
//! previous one is another sighting of the same send. Each stream is one kind:
//! - `a`: a SYN re-sent (two sends with one ISN, gap ≥ 100 ms) — must have a
//!   `syn-retransmit` finding with that `tcp_stream` whose `frames` include the
//!   first SYN and the first sighting of every later send;
//! - `c`: no SYN re-sent but the SYN/ACK was (same ISN, gap ≥ 100 ms) —
//!   reported only (the detector flags it only when it delayed the handshake);
//! - `f`: SYNs repeated 1–100 ms apart only (raw-socket tools, TFO test
//!   generators) — reported only;
//! - `r`: the SYN re-sent only after the server answered it with RST (Windows
//!   retries a refused connect() twice, ~0.5 s apart) — reported only: the
//!   detector deliberately stops at the RST (see the doc);
//! - `b`: the same SYN seen again < 1 ms later only (two taps / VLANs; not a
//!   retransmission) — must NOT get a `syn-retransmit` finding.
//!
//! For `a`, SYN sends after the server's first RST are not required in the
//! finding (kind `r` behaviour); the sends before it are.
//!
//! Known, justified disagreements are in [`ALLOWED`] (mirrored in
//! `docs/public-syn-retransmit.md`). Prints a table per capture and fails
//! listing every failing stream. At least [`MIN_ROWS`] rows must be checked.
//! Without tshark or `../shared` it prints SKIP (fails under CI).
//!
//! The second test snapshots the full JSON report of six hand-checked captures
//! (see `docs/public-syn-retransmit.md`), with `path` relative to
//! `../shared/captures`.

use pcapsleuth_analyze::{analyze_path, AnalyzeOptions};
use pcapsleuth_core::Finding;
use pcapsleuth_testkit::{in_ci, shared_dir, tshark, tshark_lines};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Two SYNs (or SYN/ACKs) with one ISN at least this far apart (ns) are two sends.
const RETRY_GAP_NS: i64 = 100_000_000;
/// Repeats closer than this (ns) are the same packet seen twice (two taps/VLANs).
const DUP_GAP_NS: i64 = 1_000_000;
/// The INDEX lists about 90 `syn-retrans` rows; at least this many must be checked.
const MIN_ROWS: usize = 85;
/// Detector id under test.
const DETECTOR: &str = "syn-retransmit";

/// Known, justified disagreements: (capture path under `captures/`, tcp.stream, reason).
/// Each must still occur (a stale entry fails the test).
const ALLOWED: &[(&str, u64, &str)] = &[
    (
        "ntop__nDPI/tests/cfgs/default/pcap/tls_heur__vmess-tcp.pcapng",
        3,
        "tshark stream split: Wireshark's SOCKS dissector creates a conversation (id 2) no packet \
         uses, so tshark's stream 3 is our stream 2 (docs/tcp-stream-differences.md); our finding \
         on stream 2 cites frames 21, 23, 24",
    ),
    (
        "zeek__zeek/testing/btest/Traces/vlan-collisions.pcap",
        0,
        "synthetic trace: one SYN (IP ID 0xdf8e) copied untagged, on VLAN 42 and on QinQ 10/20 \
         at 50 ms offsets (frames 1, 2, 6); the same packet, not a retransmission",
    ),
];

/// The six hand-checked captures snapshotted by [`public_syn_snapshots`].
const SNAPSHOTS: &[(&str, &str)] = &[
    // Linux classic backoff 1, 2, 4, 8 s, two connections, inside a tunnel.
    (
        "linux_ladder_bug_5437_02",
        "OISF__suricata-verify/tests/bug-5437-02/input.pcap",
    ),
    // Windows / 3 s initial RTO: 2.91 s (coarse 500 ms tick) then 6.01 s.
    (
        "windows_ladder_ssl_version_negated",
        "OISF__suricata-verify/tests/ssl_version_negated/input.pcap",
    ),
    // Linux >= 6.5 linear SYN timeouts: 1.03, 1.0, 1.0, 1.0, 1.0, 2.01 s.
    (
        "linear_http_espn_fail",
        "chrissanders__packets/http_espn_fail.pcapng",
    ),
    // Duplicates only (the same SYN on two taps, 0.0 s gaps): no syn-retransmit finding.
    (
        "duplicates_only_arkime_mongo",
        "arkime__arkime/tests/pcap/mongo.pcap",
    ),
    // Raw IP link type: SYN re-sent after 1.0 s and the SYN/ACK re-sent.
    (
        "raw_ip_bug_5881_01",
        "OISF__suricata-verify/tests/bug-5881-01/input.pcap",
    ),
    // Linux cooked capture (SLL), IPv6, 1.02 + 1.02 s; tshark numbers this stream 3, we 2.
    (
        "sll_tls_heur_vmess",
        "ntop__nDPI/tests/cfgs/default/pcap/tls_heur__vmess-tcp.pcapng",
    ),
];

#[derive(Debug, Clone)]
struct Syn {
    frame: u64,
    ts_ns: i64,
    stream: u64,
    isn: u32,
    ack: bool,
    rst: bool,
    sport: u16,
}

/// Parse tshark's `frame.time_epoch` ("1234.567890123") into ns.
fn epoch_ns(s: &str) -> Option<i64> {
    let (secs, frac) = s.split_once('.').unwrap_or((s, ""));
    let secs: i64 = secs.parse().ok()?;
    let mut f = frac.chars().take(9).collect::<String>();
    while f.len() < 9 {
        f.push('0');
    }
    Some(secs * 1_000_000_000 + f.parse::<i64>().ok()?)
}

fn tshark_syns(file: &Path) -> Vec<Syn> {
    let args = [
        "-Y",
        "tcp.flags.syn==1 || tcp.flags.reset==1",
        "-T",
        "fields",
        "-e",
        "frame.number",
        "-e",
        "frame.time_epoch",
        "-e",
        "tcp.stream",
        "-e",
        "tcp.seq_raw",
        "-e",
        "ip.id",
        "-e",
        "frame.interface_id",
        "-e",
        "vlan.id",
        "-e",
        "tcp.flags.ack",
        "-e",
        "tcp.flags.reset",
        "-e",
        "tcp.srcport",
    ];
    tshark_lines(file, &args)
        .iter()
        .filter_map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            // Tunnelled frames may carry several TCP headers: take the first.
            let first = |i: usize| c.get(i).map(|s| s.split(',').next().unwrap_or(""));
            Some(Syn {
                frame: first(0)?.parse().ok()?,
                ts_ns: epoch_ns(first(1)?)?,
                stream: first(2)?.parse().ok()?,
                isn: first(3)?.parse().ok()?,
                ack: matches!(first(7)?, "1" | "True" | "true"),
                rst: matches!(first(8)?, "1" | "True" | "true"),
                sport: first(9)?.parse().ok()?,
            })
        })
        .collect()
}

/// The sends of one (stream, ISN, SYN or SYN/ACK) group: each send's sightings' frames.
fn sends(group: &[&Syn]) -> (Vec<Vec<u64>>, bool, bool) {
    let mut out: Vec<Vec<u64>> = Vec::new();
    let mut dup = false;
    let mut fast = false;
    let mut last_send_ts: Option<i64> = None;
    for s in group {
        match (last_send_ts, out.last_mut()) {
            (Some(t), Some(cur)) if s.ts_ns - t < RETRY_GAP_NS => {
                if s.ts_ns - t < DUP_GAP_NS {
                    dup = true;
                } else {
                    fast = true;
                }
                cur.push(s.frame);
            }
            _ => {
                out.push(vec![s.frame]);
                last_send_ts = Some(s.ts_ns);
            }
        }
    }
    (out, dup, fast)
}

#[derive(Debug, Default)]
struct StreamView {
    /// First-sighting frames of each SYN send before the server's first RST,
    /// per ISN with ≥ 2 such sends.
    resent: Vec<Vec<u64>>,
    /// SYN sends after the server answered the SYN with RST (same ISN).
    after_rst: usize,
    synack_resent: bool,
    dup_only: bool,
    fast: bool,
    gaps: Vec<String>,
}

/// Kinds counted per capture: a, b, c, f, r (see the module doc).
#[derive(Debug, Default)]
struct Row {
    path: String,
    a: usize,
    b: usize,
    c: usize,
    f: usize,
    r: usize,
    findings: usize,
    /// Findings on streams where tshark shows no SYN or SYN/ACK re-sent (kinds b, f or none).
    extra: Vec<String>,
    failures: Vec<String>,
    allowed: Vec<(u64, String)>,
    error: Option<String>,
}

fn classify(pkts: &[Syn]) -> BTreeMap<u64, StreamView> {
    let mut groups: BTreeMap<(u64, bool, u32), Vec<&Syn>> = BTreeMap::new();
    // The SYN sender's port per stream (first bare SYN), to tell the server's RST.
    let mut client_port: BTreeMap<u64, u16> = BTreeMap::new();
    for s in pkts.iter().filter(|s| !s.rst) {
        if !s.ack {
            client_port.entry(s.stream).or_insert(s.sport);
        }
    }
    let mut first_rst: BTreeMap<u64, u64> = BTreeMap::new();
    for s in pkts {
        if s.rst {
            if client_port.get(&s.stream).is_some_and(|&p| p != s.sport) {
                first_rst.entry(s.stream).or_insert(s.frame);
            }
        } else {
            groups.entry((s.stream, s.ack, s.isn)).or_default().push(s);
        }
    }
    let mut out: BTreeMap<u64, StreamView> = BTreeMap::new();
    for ((stream, ack, _), mut g) in groups {
        g.sort_by_key(|s| (s.ts_ns, s.frame));
        let v = out.entry(stream).or_default();
        let (sends, dup, fast) = sends(&g);
        if g.len() > 1 && !ack {
            let ts: Vec<i64> = g.iter().map(|s| s.ts_ns).collect();
            v.gaps.push(
                ts.windows(2)
                    .map(|w| format!("{:.2}", (w[1] - w[0]) as f64 / 1e9))
                    .collect::<Vec<_>>()
                    .join("+"),
            );
        }
        if ack {
            v.synack_resent |= sends.len() > 1;
        } else {
            let firsts: Vec<u64> = sends.iter().filter_map(|s| s.first().copied()).collect();
            let rst = first_rst.get(&stream).copied().unwrap_or(u64::MAX);
            let (before, after): (Vec<u64>, Vec<u64>) = firsts.iter().partition(|&&f| f < rst);
            if before.len() > 1 {
                v.resent.push(before);
            }
            v.after_rst += after.len();
            v.dup_only |= dup;
            v.fast |= fast;
        }
    }
    out
}

/// Streams whose SYN was re-sent after the server's RST: not asserted (see docs).
const RETRY_AFTER_RST: &str =
    "SYN re-sent with the same ISN after the server answered it with RST \
(Windows connect() retries a refused connection twice, ~0.5 s apart, new IP ID each): the detector \
treats the RST as a refusal at once and ignores later SYNs";

fn check(shared: &Path, rel: &str) -> Row {
    let file = shared.join("captures").join(rel);
    let mut row = Row {
        path: rel.to_string(),
        ..Row::default()
    };
    let report = analyze_path(&file, &AnalyzeOptions::default());
    if let Some(e) = &report.error {
        row.error = Some(e.clone());
    }
    let findings: Vec<&Finding> = report
        .findings
        .iter()
        .filter(|f| f.detector == DETECTOR)
        .collect();
    row.findings = findings.len();
    let views = classify(&tshark_syns(&file));
    for f in &findings {
        let v = f.tcp_stream.and_then(|s| views.get(&s));
        if !v.is_some_and(|v| !v.resent.is_empty() || v.after_rst > 0 || v.synack_resent) {
            row.extra.push(format!(
                "stream {:?} frames {:?}: {}",
                f.tcp_stream, f.frames, f.summary
            ));
        }
    }
    for (stream, v) in &views {
        let ours: Vec<&&Finding> = findings
            .iter()
            .filter(|f| f.tcp_stream == Some(*stream))
            .collect();
        let allowed = ALLOWED.iter().find(|(p, s, _)| *p == rel && s == stream);
        let mut fail = |msg: String| match allowed {
            Some((_, _, why)) => row
                .allowed
                .push((*stream, format!("{msg} (allowed: {why})"))),
            None => row.failures.push(format!("{rel} stream {stream}: {msg}")),
        };
        if !v.resent.is_empty() {
            row.a += 1;
            for want in &v.resent {
                let ok = ours
                    .iter()
                    .any(|f| want.iter().all(|fr| f.frames.contains(fr)));
                if !ok {
                    let got: Vec<&Vec<u64>> = ours.iter().map(|f| &f.frames).collect();
                    fail(format!(
                        "SYN re-sent (frames {want:?}, gaps s {}) but no finding cites them (ours: {got:?})",
                        v.gaps.join(" ; ")
                    ));
                }
            }
        } else if v.after_rst > 0 {
            row.r += 1;
        } else if v.synack_resent {
            row.c += 1;
        } else if v.fast {
            row.f += 1;
        } else if v.dup_only {
            row.b += 1;
            if !ours.is_empty() {
                let frames: Vec<&Vec<u64>> = ours.iter().map(|f| &f.frames).collect();
                fail(format!(
                    "same SYN captured twice only (gaps s {}) yet flagged: {frames:?}",
                    v.gaps.join(" ; ")
                ));
            }
        }
    }
    row
}

fn syn_rows(shared: &Path) -> Vec<String> {
    let index =
        std::fs::read_to_string(shared.join("captures").join("INDEX.md")).unwrap_or_default();
    index
        .lines()
        .filter(|l| l.starts_with("| "))
        .filter_map(|l| {
            let cols: Vec<&str> = l.split('|').map(str::trim).collect();
            // cols[0] is empty (leading '|'), cols[len-1] empty (trailing '|').
            let tags = cols.get(cols.len().checked_sub(2)?)?;
            if !tags.split(',').any(|t| t.trim() == "syn-retrans") {
                return None;
            }
            Some(cols.get(2)?.trim_matches('`').to_string())
        })
        .collect()
}

fn oracles() -> Option<PathBuf> {
    let missing = match (shared_dir(), tshark()) {
        (Some(s), Some(_)) if s.join("captures").join("INDEX.md").is_file() => return Some(s),
        (None, _) => "../shared absent",
        (Some(_), None) => "tshark not installed",
        _ => "../shared/captures/INDEX.md absent",
    };
    assert!(!in_ci(), "CI: {missing}");
    println!("SKIP: {missing}");
    None
}

#[test]
fn public_syn_retransmits_are_found() {
    let Some(shared) = oracles() else { return };
    let rows = syn_rows(&shared);
    let queue = Mutex::new(rows.iter().enumerate());
    let results = Mutex::new(Vec::<(usize, Row)>::new());
    std::thread::scope(|sc| {
        for _ in 0..2 {
            sc.spawn(|| loop {
                let next = queue.lock().expect("queue").next();
                let Some((i, rel)) = next else { break };
                let row = check(&shared, rel);
                results.lock().expect("results").push((i, row));
            });
        }
    });
    let mut results = results.into_inner().expect("results");
    results.sort_by_key(|(i, _)| *i);
    println!(
        "{:<90} {:>3} {:>3} {:>3} {:>3} {:>3} {:>4}  ok",
        "capture", "a", "b", "c", "f", "r", "find"
    );
    let (mut ta, mut tb, mut tc, mut tf, mut tr, mut tfind, mut checked) = (0, 0, 0, 0, 0, 0, 0);
    let mut failures = Vec::new();
    let mut used_allowed = Vec::new();
    for (_, r) in &results {
        let ok = if !r.failures.is_empty() {
            "FAIL"
        } else if !r.allowed.is_empty() {
            "ok*"
        } else {
            "ok"
        };
        println!(
            "{:<90} {:>3} {:>3} {:>3} {:>3} {:>3} {:>4}  {ok}",
            r.path, r.a, r.b, r.c, r.f, r.r, r.findings
        );
        for x in &r.extra {
            println!("    extra finding (tshark shows no SYN or SYN/ACK re-sent there): {x}");
        }
        for (s, why) in &r.allowed {
            println!("    stream {s}: {why}");
            used_allowed.push((r.path.clone(), *s));
        }
        if let Some(e) = &r.error {
            println!("    read error: {e}");
        }
        ta += r.a;
        tb += r.b;
        tc += r.c;
        tf += r.f;
        tr += r.r;
        tfind += r.findings;
        if r.a + r.b + r.c + r.f + r.r > 0 {
            checked += 1;
        }
        failures.extend(r.failures.iter().cloned());
    }
    println!("r = {RETRY_AFTER_RST} (not asserted)");
    println!(
        "TOTAL rows {} (with SYN repeats {checked}): a {ta}, b {tb}, c {tc}, f {tf}, r {tr}; syn-retransmit findings {tfind}; failing streams {}",
        results.len(),
        failures.len()
    );
    for (p, s, _) in ALLOWED {
        if !used_allowed.iter().any(|(up, us)| up == p && us == s) {
            failures.push(format!(
                "stale ALLOWED entry {p} stream {s}: it agrees now, remove it"
            ));
        }
    }
    assert!(
        checked >= MIN_ROWS,
        "only {checked} syn-retrans rows had SYN repeats (want >= {MIN_ROWS})"
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn public_syn_snapshots() {
    let Some(shared) = oracles() else { return };
    for (name, rel) in SNAPSHOTS {
        let mut report = analyze_path(
            &shared.join("captures").join(rel),
            &AnalyzeOptions::default(),
        );
        report.path = (*rel).to_string();
        let json = serde_json::to_string_pretty(&report).expect("report serialises");
        insta::assert_snapshot!(*name, json);
    }
}
