//! The lab captures of `../shared/lab-incoming` (Ethernet) rewritten as a
//! `tcpdump -i any` capture (SLL2: the MAC is the SLL2 link-layer address,
//! not an Ethernet header) and as raw IP (no MAC at all): every event is
//! still found with its `must_cite` frames, and the controls stay clean.
//! Prints SKIP without `../shared`.

use pcapsleuth_core::FrameNo;
use pcapsleuth_core::InterfaceId;
use pcapsleuth_core::{Severity, Timestamp};
use pcapsleuth_decode::Decoder;
use pcapsleuth_detect::{PacketContext, PacketFlowInfo, PacketMeta};
use pcapsleuth_dual_stack_latency::{diagnose, Collector, Diagnosis, Family};
use serde_json::Value;
use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Link {
    Ethernet,
    Sll2,
    RawIp,
}

/// (timestamp ns, frame) of a classic little-endian pcap (µs or ns).
fn read_pcap(path: &Path) -> Vec<(i64, Vec<u8>)> {
    let b = std::fs::read(path).expect("read capture");
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let scale = match u32_at(0) {
        0xa1b2_c3d4 => 1_000,
        0xa1b2_3c4d => 1,
        m => panic!("not a little-endian pcap: {m:#x}"),
    };
    assert_eq!(u32_at(20), 1, "Ethernet captures only");
    let mut out = Vec::new();
    let mut off = 24;
    while off + 16 <= b.len() {
        let ts = i64::from(u32_at(off)) * 1_000_000_000 + i64::from(u32_at(off + 4)) * scale;
        let len = u32_at(off + 8) as usize;
        out.push((ts, b[off + 16..off + 16 + len].to_vec()));
        off += 16 + len;
    }
    out
}

/// The Ethernet frame `f` as `link` (linktype, bytes).
fn convert(f: &[u8], link: Link, own_mac: &[u8]) -> (u32, Vec<u8>) {
    match link {
        Link::Ethernet => (1, f.to_vec()),
        Link::RawIp => (101, f[14..].to_vec()),
        Link::Sll2 => {
            let src = &f[6..12];
            let pkttype = if src == own_mac { 4 } else { 0 };
            let header = [
                &f[12..14],
                &[0, 0],
                &3u32.to_be_bytes(),
                &1u16.to_be_bytes(),
                &[pkttype, 6],
                src,
                &[0, 0],
            ]
            .concat();
            (276, [&header[..], &f[14..]].concat())
        }
    }
}

fn run(path: &Path, link: Link) -> Vec<Diagnosis> {
    let frames = read_pcap(path);
    // The capture host is the source of frame 1 (an echo request of A).
    let own_mac = frames[0].1[6..12].to_vec();
    let mut c = Collector::default();
    let mut dec = Decoder::new();
    for (i, (ts, f)) in frames.iter().enumerate() {
        let (linktype, bytes) = convert(f, link, &own_mac);
        let decoded = dec.decode_frame(linktype, &bytes, None);
        c.on_packet(&PacketContext {
            meta: PacketMeta {
                frame: FrameNo(i as u64 + 1),
                ts: Timestamp(*ts),
                interface: InterfaceId(0),
            },
            decoded: &decoded,
            flow: PacketFlowInfo::default(),
        });
    }
    diagnose(&c)
}

fn truth(path: &Path) -> Value {
    let t = std::fs::read_to_string(format!("{}.truth.json", path.display())).expect("truth");
    serde_json::from_str(&t).expect("truth json")
}

#[test]
fn lab_events_on_every_link_type() {
    let Some(shared) = pcapsleuth_testkit::shared_dir() else {
        println!("SKIP: ../shared absent");
        return;
    };
    let dir = shared.join("lab-incoming");
    for name in ["dual-stack-latency.pcap", "dual-stack-saddr.pcap"] {
        let path = dir.join(name);
        if !path.is_file() {
            println!("SKIP: {name} absent");
            continue;
        }
        let t = truth(&path);
        let event = &t["events"][0];
        let must: Vec<u64> = event["must_cite"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_u64)
            .collect();
        for link in [Link::Ethernet, Link::Sll2, Link::RawIp] {
            let ds = run(&path, link);
            assert_eq!(ds.len(), 1, "{name} {link:?}: {ds:?}");
            let d = &ds[0];
            assert_eq!(d.evidence.slow_family, Family::Ipv6, "{name} {link:?}");
            let (src, dst) = (d.flow.0.to_string(), d.flow.1.to_string());
            assert_eq!(
                src,
                event["flow"]["src"].as_str().unwrap(),
                "{name} {link:?}"
            );
            assert_eq!(
                dst,
                event["flow"]["dst"].as_str().unwrap(),
                "{name} {link:?}"
            );
            let missing: Vec<u64> = must
                .iter()
                .copied()
                .filter(|m| !d.frames.contains(m))
                .collect();
            assert!(missing.is_empty(), "{name} {link:?}: missing {missing:?}");
            let send_path = name.contains("saddr");
            assert_eq!(d.evidence.slow_in_send_path, send_path, "{name} {link:?}");
            assert_eq!(d.evidence.slow_on_wire, !send_path, "{name} {link:?}");
            // Without a MAC the peer of the wire case is tied only by the one
            // service and peer it reached in each family: info.
            let want = if link == Link::RawIp && !send_path {
                Severity::Info
            } else {
                Severity::Warning
            };
            assert_eq!(d.severity, want, "{name} {link:?}");
        }
    }
    for name in [
        "dual-stack-latency-control.pcap",
        "dual-stack-saddr-control.pcap",
    ] {
        let path = dir.join(name);
        if !path.is_file() {
            continue;
        }
        for link in [Link::Ethernet, Link::Sll2, Link::RawIp] {
            assert!(run(&path, link).is_empty(), "{name} {link:?}");
        }
    }
}
