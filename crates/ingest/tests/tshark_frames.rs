//! Wireshark parity: frame numbering on every capture of the shared corpus,
//! and per-frame timestamp / interface / length on the lab captures, against
//! tshark 4.0 (the oracle for `frame.number`).

mod common;

use common::{read_path, shared_or_skip, ReadAll};
use pcapsleuth_ingest::WarningKind;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Files tshark 4.0 refuses to open, with the reason, and what we do instead.
const TSHARK_CANNOT_READ: &[(&str, &str, Expect)] = &[
    (
        "the-tcpdump-group__libpcap/tests/filter/brcm-tag-stp.pcap",
        "tshark 4.0: 'pcap: network type 281 unknown or unsupported' (LINKTYPE_DSA_TAG_BRCM); the container is fine",
        Expect::Frames(4),
    ),
    (
        "the-tcpdump-group__libpcap/tests/pcap-invalid-version-1.pcap",
        "'pcap: major version 1 unsupported'; we refuse it the same way",
        Expect::Error,
    ),
    (
        "the-tcpdump-group__libpcap/tests/pcapng-invalid-vers-1.pcapng",
        "'pcapng: unknown SHB version 0.1'; we refuse it the same way",
        Expect::Error,
    ),
    (
        "the-tcpdump-group__libpcap/tests/pcapng-invalid-vers-2.pcapng",
        "'pcapng: unknown SHB version 1.1'; we refuse it the same way",
        Expect::Error,
    ),
    (
        "the-tcpdump-group__libpcap/tests/shb-option-too-long.pcapng",
        "'pcapng: Not enough data to handle option of length 12336' in the SHB; we refuse it too",
        Expect::Error,
    ),
];

#[derive(Debug, Clone, Copy)]
enum Expect {
    Frames(u64),
    Error,
}

/// The 78 MB merge file: tshark needs minutes for it, so by default its count
/// is checked against the tshark 4.0 count recorded in `captures/INDEX.md`
/// (row 372, "185059 pkts"); set `PCAPSLEUTH_SLOW_TESTS=1` to run tshark on it.
const BENCH: &str = "derived__bench/real-traffic-merged-ethernet.pcap";
const BENCH_FRAMES: u64 = 185_059;

struct Tshark {
    lines: Vec<String>,
    stderr: String,
}

fn tshark(file: &Path, fields: &[&str]) -> Tshark {
    let mut cmd = Command::new("tshark");
    cmd.arg("-n").arg("-r").arg(file).arg("-T").arg("fields");
    for f in fields {
        cmd.arg("-e").arg(f);
    }
    let out = cmd.output().expect("tshark runs");
    Tshark {
        lines: String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Run `f` over `items` on two threads; collect the failure messages.
fn par_check<T: Sync>(items: &[T], f: impl Fn(&T) -> Vec<String> + Sync) -> Vec<String> {
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let fails = f(item);
                failures.lock().unwrap().extend(fails);
            });
        }
    });
    let mut v = failures.into_inner().unwrap();
    v.sort();
    v
}

fn rel(shared: &Path, p: &Path) -> String {
    let base = shared.join("captures");
    let r = p
        .strip_prefix(&base)
        .or_else(|_| p.strip_prefix(shared))
        .unwrap_or(p);
    r.to_string_lossy().replace('\\', "/")
}

fn has_warning(r: &ReadAll, kinds: &[WarningKind]) -> bool {
    r.warnings.iter().any(|w| kinds.contains(&w.kind))
}

#[test]
fn frame_counts_match_tshark_on_whole_corpus() {
    let Some(shared) = shared_or_skip("frame counts vs tshark") else {
        return;
    };
    if pcapsleuth_testkit::tshark().is_none() {
        assert!(!pcapsleuth_testkit::in_ci(), "tshark missing under CI");
        println!("SKIP: tshark not installed");
        return;
    }
    // ../shared/lab is compared frame by frame (count included) in
    // `per_frame_fields_match_tshark`; running tshark on it twice would only
    // cost time.
    let files = pcapsleuth_testkit::captures_under(&shared.join("captures"));
    assert!(
        files.len() > 100,
        "only {} captures under {}: corpus moved?",
        files.len(),
        shared.display()
    );
    let slow = std::env::var_os("PCAPSLEUTH_SLOW_TESTS").is_some();
    let checked = AtomicUsize::new(0);
    let failures = par_check(&files, |path: &PathBuf| {
        let name = rel(&shared, path);
        let ours = read_path(path);
        if name == BENCH && !slow {
            return match ours {
                Ok(r) if r.frame_count == BENCH_FRAMES && r.warnings.is_empty() => vec![],
                Ok(r) => vec![format!(
                    "{name}: {} frames (want {BENCH_FRAMES}), warnings {:?}",
                    r.frame_count, r.warnings
                )],
                Err(e) => vec![format!("{name}: {e}")],
            };
        }
        let t = tshark(path, &["frame.number"]);
        checked.fetch_add(1, Ordering::Relaxed);
        if let Some((_, why, expect)) = TSHARK_CANNOT_READ.iter().find(|(n, _, _)| *n == name) {
            assert!(
                t.lines.is_empty(),
                "{name} is listed as unreadable by tshark ({why}) but tshark read it"
            );
            return match (expect, ours) {
                (Expect::Error, Err(_)) => vec![],
                (Expect::Frames(n), Ok(r)) if r.frame_count == *n => vec![],
                (e, o) => vec![format!(
                    "{name}: expected {e:?}, got {:?}",
                    o.map(|r| r.frame_count)
                )],
            };
        }
        let want = t.lines.len() as u64;
        let r = match ours {
            Ok(r) => r,
            Err(e) => return vec![format!("{name}: tshark reads {want} frames, we fail: {e}")],
        };
        let mut fails = Vec::new();
        if r.frame_count != want {
            fails.push(format!(
                "{name}: tshark {want} frames, ours {} ({:?})",
                r.frame_count, r.warnings
            ));
        }
        // Returned packets are numbered 1.., increasing, within the count.
        if !r.frames.windows(2).all(|w| w[0].number < w[1].number)
            || r.frames.last().is_some_and(|f| f.number > want)
        {
            fails.push(format!(
                "{name}: frame numbers not increasing within 1..={want}"
            ));
        }
        // tshark's complaint about the file and our warning must agree.
        let cut = t.stderr.contains("cut short in the middle of a packet");
        let damaged = t.stderr.contains("damaged or corrupt");
        if cut != has_warning(&r, &[WarningKind::TruncatedRecord]) {
            fails.push(format!(
                "{name}: tshark cut-short={cut}, our warnings {:?}",
                r.warnings
            ));
        }
        if damaged
            != has_warning(
                &r,
                &[WarningKind::MalformedRecord, WarningKind::UnknownInterface],
            )
        {
            fails.push(format!(
                "{name}: tshark damaged={damaged}, our warnings {:?}",
                r.warnings
            ));
        }
        fails
    });
    println!(
        "compared {} files with tshark",
        checked.load(Ordering::Relaxed)
    );
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Parse tshark's `frame.time_epoch` ("secs.nnnnnnnnn") into ns.
fn epoch_ns(s: &str) -> Option<i64> {
    if s.is_empty() {
        return None;
    }
    let (secs, frac) = s.split_once('.')?;
    if frac.len() != 9 {
        return None;
    }
    Some(secs.parse::<i64>().ok()? * 1_000_000_000 + frac.parse::<i64>().ok()?)
}

/// Corpus files checked frame by frame besides the lab captures: one per
/// container variant (byte order, resolution, modified format, gzip,
/// multi-interface pcapng).
const FORMAT_SAMPLES: &[&str] = &[
    "seladb__PcapPlusPlus/Tests/Pcap++Test/PcapExamples/microsecs_big_endian.pcap",
    "seladb__PcapPlusPlus/Tests/Pcap++Test/PcapExamples/nanosecs_big_endian.pcap",
    "the-tcpdump-group__tcpdump/tests/tcp-handshake-nano.pcap",
    "rusticata__pcap-parser/assets/modified-format.pcap",
    "wanduow__libtrace/test/traces/sll.pcap.gz",
    "google__gopacket/pcapgo/tests/be/test005.pcapng",
    "google__gopacket/pcapgo/tests/le/test100.pcapng",
    "zeek__zeek/testing/btest/Traces/pcapng-multi-interface.pcapng",
    "ntop__nDPI/tests/cfgs/default/pcap/dtls.pcap",
];

#[test]
fn per_frame_fields_match_tshark() {
    let Some(shared) = shared_or_skip("per-frame fields vs tshark") else {
        return;
    };
    if pcapsleuth_testkit::tshark().is_none() {
        assert!(!pcapsleuth_testkit::in_ci(), "tshark missing under CI");
        println!("SKIP: tshark not installed");
        return;
    }
    let mut files = pcapsleuth_testkit::captures_under(&shared.join("lab"));
    assert!(files.len() >= 5, "lab captures missing");
    for f in FORMAT_SAMPLES {
        let p = shared.join("captures").join(f);
        assert!(p.is_file(), "{} missing", p.display());
        files.push(p);
    }
    assert!(
        files
            .iter()
            .any(|f| f.extension().is_some_and(|e| e == "pcapng")),
        "no pcapng among the lab files"
    );
    let fields = [
        "frame.number",
        "frame.time_epoch",
        "frame.interface_id",
        "frame.len",
        "frame.cap_len",
        "frame.interface_name",
    ];
    let failures = par_check(&files, |path: &PathBuf| {
        let name = rel(&shared, path);
        let t = tshark(path, &fields);
        let r = match read_path(path) {
            Ok(r) => r,
            Err(e) => return vec![format!("{name}: {e}")],
        };
        let mut fails = Vec::new();
        if t.lines.len() != r.frames.len() || r.frame_count != r.frames.len() as u64 {
            fails.push(format!(
                "{name}: tshark {} frames, ours {} ({} numbered)",
                t.lines.len(),
                r.frames.len(),
                r.frame_count
            ));
        }
        for (line, f) in t.lines.iter().zip(&r.frames) {
            let c: Vec<&str> = line.split('\t').collect();
            let [num, time, iface, len, caplen, ifname] = c[..] else {
                fails.push(format!("{name}: odd tshark line {line:?}"));
                break;
            };
            let iface: u32 = if iface.is_empty() {
                0
            } else {
                iface.parse().unwrap()
            };
            // SPBs carry no timestamp (tshark prints none; we repeat the previous one).
            let ts = if time.is_empty() { None } else { Some(f.ts) };
            let want = (
                num.parse::<u64>().unwrap(),
                epoch_ns(time),
                iface,
                len.parse::<u32>().unwrap(),
                caplen.parse::<usize>().unwrap(),
            );
            let got = (f.number, ts, f.interface, f.orig_len, f.data.len());
            if want != got {
                fails.push(format!(
                    "{name}: frame {num}: tshark {want:?}, ours {got:?}"
                ));
            }
            // tshark shows "unknown" for an IDB without if_name.
            if !ifname.is_empty() && ifname != "unknown" {
                let ours = r
                    .interface_names
                    .get(f.interface as usize)
                    .cloned()
                    .flatten();
                if ours.as_deref() != Some(ifname) {
                    fails.push(format!(
                        "{name}: frame {num}: interface name {ifname:?}, ours {ours:?}"
                    ));
                }
            }
            if fails.len() > 5 {
                break;
            }
        }
        fails
    });
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
