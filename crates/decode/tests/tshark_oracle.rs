//! Real captures against tshark: every frame's TCP ports / raw sequence
//! number / flags / payload length and ICMP MTU must equal what tshark 4.0
//! shows (`tcp.srcport`, `tcp.dstport`, `tcp.seq_raw`, `tcp.flags`,
//! `tcp.len`, `icmp.mtu`, `icmpv6.mtu`). For ICMP errors tshark shows the
//! quoted TCP header's ports and flags, which are compared with
//! [`QuotedPacket`](pcapsleuth_decode::QuotedPacket).

mod common;

use pcapsleuth_decode::{Decoder, IpVersion, Transport};
use pcapsleuth_testkit::{in_ci, shared_dir, tshark, tshark_lines};
use std::path::{Path, PathBuf};

#[derive(Debug, Default)]
struct Outcome {
    frames: usize,
    tcp: usize,
    icmp_mtu: usize,
    addrs: usize,
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
        "-T",
        "fields",
        "-e",
        "frame.number",
        "-e",
        "tcp.srcport",
        "-e",
        "tcp.dstport",
        "-e",
        "tcp.seq_raw",
        "-e",
        "tcp.flags",
        "-e",
        "tcp.len",
        "-e",
        "icmp.mtu",
        "-e",
        "icmpv6.mtu",
        "-e",
        "ip.src",
        "-e",
        "ip.dst",
        "-e",
        "ipv6.src",
        "-e",
        "ipv6.dst",
    ];
    let lines = tshark_lines(path, &args);
    let mut out = Outcome {
        frames: frames.len(),
        ..Outcome::default()
    };
    if lines.len() != frames.len() {
        out.mismatches.push(format!(
            "tshark saw {} frames, reader {}",
            lines.len(),
            frames.len()
        ));
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
                    q.tcp_flags
                        .map(|s| s.0.into())
                        .filter(|_| !get(4).is_empty()),
                    None,
                ],
                _ => [None; 5],
            },
            _ => [None; 5],
        };
        let theirs = [
            num(get(1)),
            num(get(2)),
            num(get(3)),
            num(get(4)).map(|v| v & 0x1FF),
            num(get(5)),
        ];
        let theirs = if matches!(d.transport, Transport::Icmp(_)) {
            [theirs[0], theirs[1], theirs[2], theirs[3], None]
        } else {
            theirs
        };
        if matches!(d.transport, Transport::Tcp(_)) {
            out.tcp += 1;
        }
        if ours != theirs {
            out.mismatches.push(format!(
                "frame {}: ours {:?} tshark {:?} (stop {:?})",
                i + 1,
                ours,
                theirs,
                d.stop
            ));
        }
        let our_mtu = match d.transport {
            Transport::Icmp(m) => m.mtu.map(u64::from),
            _ => None,
        };
        // Innermost addresses (the quoted header's for ICMP errors): the last
        // value of ip.src/ipv6.src, which tshark lists outermost first.
        let inner = match d.transport {
            Transport::Icmp(m) => m.quoted.map(|q| q.ip).or(d.ip),
            _ => d.ip,
        };
        if let Some(h) = inner {
            let (sk, dk) = if h.version == IpVersion::V4 {
                (8, 9)
            } else {
                (10, 11)
            };
            let theirs = (last(get(sk)).unwrap_or(""), last(get(dk)).unwrap_or(""));
            if (h.src.to_string(), h.dst.to_string())
                != (theirs.0.to_string(), theirs.1.to_string())
            {
                out.mismatches.push(format!(
                    "frame {}: addresses ours {}>{} tshark {:?}",
                    i + 1,
                    h.src,
                    h.dst,
                    theirs
                ));
            } else {
                out.addrs += 1;
            }
        }
        let their_mtu = num(get(6)).or(num(get(7)));
        if their_mtu.is_some() {
            out.icmp_mtu += 1;
        }
        if our_mtu != their_mtu {
            out.mismatches.push(format!(
                "frame {}: mtu ours {:?} tshark {:?}",
                i + 1,
                our_mtu,
                their_mtu
            ));
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
        println!(
            "{}: {} frames, {} TCP, {} ICMP MTU, {} address pairs, {} mismatches",
            f.display(),
            o.frames,
            o.tcp,
            o.icmp_mtu,
            o.addrs,
            o.mismatches.len()
        );
        tcp += o.tcp;
        mtu += o.icmp_mtu;
        for m in o.mismatches.iter().take(5) {
            bad.push(format!("{}: {m}", f.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "mismatches against tshark:\n{}",
        bad.join("\n")
    );
    (tcp, mtu)
}

#[test]
fn lab_captures_match_tshark() {
    let Some(dir) = oracle_env("lab captures") else {
        return;
    };
    let files: Vec<PathBuf> = pcapsleuth_testkit::captures_under(&dir.join("lab"));
    assert!(
        files.len() >= 10,
        "expected the lab captures, found {}",
        files.len()
    );
    let (tcp, mtu) = check_files(&files);
    assert!(tcp > 10_000, "only {tcp} TCP frames compared");
    assert!(mtu >= 4, "only {mtu} ICMP MTUs compared");
}

/// Public captures covering each encapsulation (paths under
/// `../shared/captures`), all of which match tshark frame for frame.
const TUNNEL_CORPUS: &[&str] = &[
    "FoxIO-LLC__ja4/pcap/gre-sample.pcap",                // GRE
    "FoxIO-LLC__ja4/pcap/tcpdump-geneve.pcap",            // Geneve
    "OISF__suricata-verify/tests/bug-5437-02/input.pcap", // GRE + ERSPAN
    "OISF__suricata-verify/tests/vxlan-decoder-03/vxlan.pcap", // VXLAN
    "ntop__nDPI/tests/cfgs/default/pcap/6in4tunnel.pcap", // 6in4, ICMPv6 PTB
    "zeek__zeek/testing/btest/Traces/tunnels/gre-aruba.pcap", // VLAN + Aruba GRE + 802.11
    "zeek__zeek/testing/btest/Traces/pppoe-over-qinq.pcap", // QinQ + PPPoE
    "zeek__zeek/testing/btest/Traces/erspan.pcap",        // ERSPAN + IPv4 fragments
    "zeek__zeek/testing/btest/Traces/tunnels/gtp/gtp1_gn_normal_incl_fragmentation.pcap", // GTP-U + fragments
    "zeek__zeek/testing/btest/Traces/nflog-http.pcap",                                    // NFLOG
    "zeek__zeek/testing/btest/Traces/vlan-qinqinq.pcap", // three VLAN tags
    "OISF__suricata-verify/tests/decode-sll2-01/input.pcap", // SLL2
    "the-tcpdump-group__tcpdump/tests/pptp.pcap",        // PPTP enhanced GRE, big-endian pcap
    "the-tcpdump-group__tcpdump/tests/ipoib.pcap",       // IPoIB
    "OISF__suricata-verify/tests/defrag/bug-6887-defrag-ppp-ipv6-tcp/frag-ppp-ipv6-tcp.pcap", // PPP + IPv6 fragments
    "ntop__nDPI/tests/cfgs/default/pcap/psiphon3.pcap", // raw IP
    "OISF__suricata-verify/tests/bug-3616-smtp/input.pcap", // ICMP frag-needed MTU 1492
    "seladb__PcapPlusPlus/Tests/Packet++Test/PacketExamples/CiscoHDLC.pcap", // Cisco HDLC
    "ntop__nDPI/tests/cfgs/default/pcap/capwap_data.pcapng", // CAPWAP + 802.11
];

#[test]
fn tunnel_corpus_matches_tshark() {
    let Some(dir) = oracle_env("tunnel corpus") else {
        return;
    };
    let root = dir.join("captures");
    let files: Vec<PathBuf> = TUNNEL_CORPUS
        .iter()
        .map(|p| root.join(p))
        .filter(|p| p.is_file())
        .collect();
    if files.len() < TUNNEL_CORPUS.len() {
        assert!(
            !in_ci(),
            "tunnel corpus incomplete under CI: {} of {}",
            files.len(),
            TUNNEL_CORPUS.len()
        );
        println!(
            "SKIP: tunnel corpus incomplete ({} of {} files)",
            files.len(),
            TUNNEL_CORPUS.len()
        );
        return;
    }
    let (tcp, mtu) = check_files(&files);
    assert!(tcp > 3_000, "only {tcp} TCP frames compared");
    assert!(mtu >= 5, "only {mtu} ICMP MTUs compared");
}

/// Exploration helper: `DECODE_ORACLE_FILES=a.pcap:b.pcapng cargo test -p
/// pcapsleuth-decode --test tshark_oracle -- --ignored --nocapture`.
#[test]
#[ignore]
fn listed_files_match_tshark() {
    let Ok(list) = std::env::var("DECODE_ORACLE_FILES") else {
        return;
    };
    let files: Vec<PathBuf> = list.split(':').map(PathBuf::from).collect();
    check_files(&files);
}

/// Throughput probe: `DECODE_BENCH_FILE=x.pcap cargo test --release -p
/// pcapsleuth-decode --test tshark_oracle throughput -- --ignored --nocapture`.
#[test]
#[ignore]
fn throughput() {
    let Ok(path) = std::env::var("DECODE_BENCH_FILE") else {
        return;
    };
    let frames = common::read_frames(Path::new(&path)).expect("readable capture");
    let bytes: usize = frames.iter().map(|f| f.1.len()).sum();
    let mut dec = Decoder::new();
    let t0 = std::time::Instant::now();
    let mut tcp = 0usize;
    for _ in 0..5 {
        for (lt, data, wire) in &frames {
            if matches!(
                dec.decode_frame(*lt, data, Some(*wire)).transport,
                Transport::Tcp(_)
            ) {
                tcp += 1;
            }
        }
    }
    let dt = t0.elapsed().as_secs_f64();
    let n = frames.len() * 5;
    println!(
        "{n} frames ({tcp} TCP), {:.1} M frames/s, {:.0} MB/s",
        n as f64 / dt / 1e6,
        (bytes * 5) as f64 / dt / 1e6
    );
}
