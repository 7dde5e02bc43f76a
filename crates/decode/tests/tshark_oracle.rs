//! Real captures against tshark: every frame's TCP ports / raw sequence
//! number / flags / payload length and ICMP MTU must equal what tshark 4.0
//! shows (`tcp.srcport`, `tcp.dstport`, `tcp.seq_raw`, `tcp.flags`,
//! `tcp.len`, `icmp.mtu`, `icmpv6.mtu`). For ICMP errors tshark shows the
//! quoted TCP header's ports and flags, which are compared with
//! [`QuotedPacket`](pcapsleuth_decode::QuotedPacket).

mod common;

use pcapsleuth_decode::{Decoder, Transport};
use pcapsleuth_testkit::{in_ci, shared_dir, tshark, tshark_lines};
use std::path::{Path, PathBuf};

#[derive(Debug, Default)]
struct Outcome {
    frames: usize,
    tcp: usize,
    icmp_mtu: usize,
    mismatches: Vec<String>,
}

fn last(field: &str) -> Option<&str> {
    field.rsplit(',').next().filter(|s| !s.is_empty())
}

fn num(field: &str) -> Option<u64> {
    let v = last(field)?;
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

fn compare(path: &Path) -> Option<Outcome> {
    let frames = common::read_frames(path)?;
    let args = [
        "-T", "fields", "-e", "frame.number", "-e", "tcp.srcport", "-e", "tcp.dstport", "-e", "tcp.seq_raw", "-e",
        "tcp.flags", "-e", "tcp.len", "-e", "icmp.mtu", "-e", "icmpv6.mtu",
    ];
    let lines = tshark_lines(path, &args);
    let mut out = Outcome { frames: frames.len(), ..Outcome::default() };
    if lines.len() != frames.len() {
        out.mismatches.push(format!("tshark saw {} frames, reader {}", lines.len(), frames.len()));
        return Some(out);
    }
    let mut dec = Decoder::new();
    for (i, ((lt, data, wire), line)) in frames.iter().zip(&lines).enumerate() {
        let f: Vec<&str> = line.split('\t').collect();
        let get = |k: usize| f.get(k).copied().unwrap_or("");
        let d = dec.decode_frame(*lt, data, Some(*wire));
        // (src, dst, seq, flags, len)
        let ours: [Option<u64>; 5] = match d.transport {
            Transport::Tcp(t) => [
                Some(t.src_port.into()),
                Some(t.dst_port.into()),
                Some(t.seq.0.into()),
                Some(t.flags.0.into()),
                Some(t.payload_len.into()),
            ],
            Transport::Icmp(m) => match m.quoted {
                Some(q) if q.ip.protocol == 6 => [
                    q.src_port.map(u64::from),
                    q.dst_port.map(u64::from),
                    q.tcp_seq.map(|s| s.0.into()).filter(|_| !get(3).is_empty()),
                    q.tcp_flags.map(|s| s.0.into()).filter(|_| !get(4).is_empty()),
                    None,
                ],
                _ => [None; 5],
            },
            _ => [None; 5],
        };
        let theirs = [num(get(1)), num(get(2)), num(get(3)), num(get(4)).map(|v| v & 0x1FF), num(get(5))];
        let theirs = if matches!(d.transport, Transport::Icmp(_)) { [theirs[0], theirs[1], theirs[2], theirs[3], None] } else { theirs };
        if matches!(d.transport, Transport::Tcp(_)) {
            out.tcp += 1;
        }
        if ours != theirs {
            out.mismatches.push(format!("frame {}: ours {:?} tshark {:?} (stop {:?})", i + 1, ours, theirs, d.stop));
        }
        let our_mtu = match d.transport {
            Transport::Icmp(m) => m.mtu.map(u64::from),
            _ => None,
        };
        let their_mtu = num(get(6)).or(num(get(7)));
        if their_mtu.is_some() {
            out.icmp_mtu += 1;
        }
        if our_mtu != their_mtu {
            out.mismatches.push(format!("frame {}: mtu ours {:?} tshark {:?}", i + 1, our_mtu, their_mtu));
        }
    }
    Some(out)
}

/// The shared folder and tshark, or `None` after printing SKIP (panics under CI).
fn oracle_env(what: &str) -> Option<PathBuf> {
    let (Some(dir), Some(_)) = (shared_dir(), tshark()) else {
        assert!(!in_ci(), "{what}: ../shared or tshark missing under CI");
        println!("SKIP: {what}: ../shared or tshark not available");
        return None;
    };
    Some(dir)
}

fn check_files(files: &[PathBuf]) -> (usize, usize) {
    let (mut tcp, mut mtu) = (0, 0);
    let mut bad = Vec::new();
    for f in files {
        let Some(o) = compare(f) else {
            bad.push(format!("{}: unreadable", f.display()));
            continue;
        };
        println!("{}: {} frames, {} TCP, {} ICMP MTU, {} mismatches", f.display(), o.frames, o.tcp, o.icmp_mtu, o.mismatches.len());
        tcp += o.tcp;
        mtu += o.icmp_mtu;
        for m in o.mismatches.iter().take(5) {
            bad.push(format!("{}: {m}", f.display()));
        }
    }
    assert!(bad.is_empty(), "mismatches against tshark:\n{}", bad.join("\n"));
    (tcp, mtu)
}

#[test]
fn lab_captures_match_tshark() {
    let Some(dir) = oracle_env("lab captures") else { return };
    let files: Vec<PathBuf> = pcapsleuth_testkit::captures_under(&dir.join("lab"));
    assert!(files.len() >= 10, "expected the lab captures, found {}", files.len());
    let (tcp, mtu) = check_files(&files);
    assert!(tcp > 10_000, "only {tcp} TCP frames compared");
    assert!(mtu >= 4, "only {mtu} ICMP MTUs compared");
}

/// Exploration helper: `DECODE_ORACLE_FILES=a.pcap:b.pcapng cargo test -p
/// pcapsleuth-decode --test tshark_oracle -- --ignored --nocapture`.
#[test]
#[ignore]
fn listed_files_match_tshark() {
    let Ok(list) = std::env::var("DECODE_ORACLE_FILES") else { return };
    let files: Vec<PathBuf> = list.split(':').map(PathBuf::from).collect();
    check_files(&files);
}
