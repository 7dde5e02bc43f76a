//! Duplicate sightings on a real two-interface capture are not retransmissions.
//!
//! `fixtures/captures/two-interfaces.pcapng` (made by `fixtures/scripts/two-interfaces.sh`)
//! holds every packet twice: dumpcap on a bridge port (`r1c`, interface 0) and on the bridge
//! itself (`br0`, interface 1), microseconds apart. The server's iptables dropped every 10th
//! large segment, so a few real retransmissions exist as well. Wireshark 4.0 flags many of the
//! second sightings as `tcp.analysis.retransmission` (Wireshark issue 19463).
//!
//! The oracle is computed from tshark at test time: a packet's identity is every header field
//! the kernel wrote (stream, raw seq/ack, flags, length, IP ID, window, TS val/ecr, SACK, TCP
//! checksum); each identity occurs once per interface. A real retransmission is an identity
//! whose sequence range (or SYN/FIN) an earlier identity of the same direction already
//! carried. Without tshark the test prints SKIP (and fails under CI).
//!
//! dumpcap writes each interface's buffer block in turn, so frame order is not time order
//! (interface 1's copy of a whole burst can precede interface 0's in the file).

use pcapsleuth_core::{FrameNo, InterfaceId};
use pcapsleuth_decode::Decoder;
use pcapsleuth_flow::{FlowConfig, FlowEvent, FlowSummary, FlowTable, PacketMeta, SegmentEvent};
use pcapsleuth_ingest::CaptureReader;
use pcapsleuth_testkit::{fixtures_dir, in_ci, tshark, tshark_lines};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

const FIELDS: &[&str] = &[
    "frame.number",
    "frame.interface_id",
    "tcp.stream",
    "tcp.srcport",
    "tcp.seq_raw",
    "tcp.ack_raw",
    "tcp.flags",
    "tcp.len",
    "ip.id",
    "tcp.window_size_value",
    "tcp.options.timestamp.tsval",
    "tcp.options.timestamp.tsecr",
    "tcp.options.sack_le",
    "tcp.options.sack_re",
    "tcp.checksum",
    "tcp.analysis.retransmission",
];

/// One frame as tshark sees it.
#[derive(Debug, Clone)]
struct Row {
    frame: u64,
    interface: u32,
    stream: u32,
    srcport: u16,
    seq_raw: u64,
    /// Sequence space used: payload + SYN + FIN.
    seq_len: u64,
    identity: String,
    ws_retrans: bool,
}

/// What tshark says about the capture.
struct Oracle {
    rows: BTreeMap<u64, Row>,
    /// Unordered pairs of sightings of one packet.
    pairs: Vec<[u64; 2]>,
    /// Frames Wireshark flags `tcp.analysis.retransmission`.
    ws_retrans: BTreeSet<u64>,
}

fn capture() -> Option<PathBuf> {
    let p = fixtures_dir().join("two-interfaces.pcapng");
    if tshark().is_none() {
        assert!(!in_ci(), "tshark is required in CI");
        println!("SKIP: tshark not installed");
        return None;
    }
    assert!(p.is_file(), "{} missing", p.display());
    Some(p)
}

fn oracle(p: &Path) -> Oracle {
    let mut args = vec![
        "-2",
        "-T",
        "fields",
        "-E",
        "separator=\t",
        "-E",
        "occurrence=a",
    ];
    for f in FIELDS {
        args.push("-e");
        args.push(f);
    }
    let mut rows = BTreeMap::new();
    let mut by_id: HashMap<String, Vec<u64>> = HashMap::new();
    for line in tshark_lines(p, &args) {
        let c: Vec<&str> = line.split('\t').collect();
        assert_eq!(c.len(), FIELDS.len(), "tshark line {line:?}");
        if c[2].is_empty() {
            continue; // not TCP
        }
        let flags = u16::from_str_radix(c[6].trim_start_matches("0x"), 16).expect("tcp.flags");
        let r = Row {
            frame: c[0].parse().expect("frame.number"),
            interface: c[1].parse().expect("interface_id"),
            stream: c[2].parse().expect("tcp.stream"),
            srcport: c[3].parse().expect("srcport"),
            seq_raw: c[4].parse().expect("seq_raw"),
            seq_len: c[7].parse::<u64>().expect("tcp.len")
                + u64::from(flags & 0x02 != 0)
                + u64::from(flags & 0x01 != 0),
            identity: c[2..15].join("|"),
            ws_retrans: !c[15].is_empty(),
        };
        by_id.entry(r.identity.clone()).or_default().push(r.frame);
        rows.insert(r.frame, r);
    }
    let mut pairs = Vec::new();
    for (id, frames) in &by_id {
        assert_eq!(frames.len(), 2, "identity {id} seen {frames:?}");
        let ifs: BTreeSet<u32> = frames.iter().map(|f| rows[f].interface).collect();
        assert_eq!(
            ifs.len(),
            2,
            "identity {id}: both sightings on one interface"
        );
        pairs.push([frames[0].min(frames[1]), frames[0].max(frames[1])]);
    }
    pairs.sort_unstable();
    let ws_retrans = rows
        .values()
        .filter(|r| r.ws_retrans)
        .map(|r| r.frame)
        .collect();
    Oracle {
        rows,
        pairs,
        ws_retrans,
    }
}

/// Frames of real retransmissions (both sightings), given the order in which the
/// first sightings are processed. No sequence wrap in this capture (checked: raw values
/// compared as u64 within one short transfer).
fn real_retransmissions(o: &Oracle, order: &[u64]) -> BTreeSet<u64> {
    let partner: HashMap<u64, u64> = o
        .pairs
        .iter()
        .flat_map(|&[a, b]| [(a, b), (b, a)])
        .collect();
    let mut done = BTreeSet::new();
    let mut high: HashMap<(u32, u16), u64> = HashMap::new();
    let mut real = BTreeSet::new();
    for f in order {
        let Some(r) = o.rows.get(f) else { continue };
        if !done.insert(r.identity.clone()) || r.seq_len == 0 {
            continue;
        }
        let k = (r.stream, r.srcport);
        if let Some(&h) = high.get(&k) {
            assert!(h - r.seq_raw.min(h) < 1 << 30, "sequence wrap in fixture");
            if r.seq_raw < h {
                real.insert(*f);
                real.insert(partner[f]);
            }
        }
        let e = high.entry(k).or_insert(0);
        *e = (*e).max(r.seq_raw + r.seq_len);
    }
    real
}

/// Owned copy of one frame.
struct OwnedFrame {
    number: u64,
    ts: pcapsleuth_core::Timestamp,
    interface: u32,
    linktype: u32,
    data: Vec<u8>,
}

fn load(p: &Path) -> Vec<OwnedFrame> {
    let mut reader = CaptureReader::open(p).expect("fixture opens");
    let mut out = Vec::new();
    while let Some(f) = reader.next_frame().expect("fixture reads") {
        out.push(OwnedFrame {
            number: f.number.get(),
            ts: f.ts,
            interface: f.interface.get(),
            linktype: f.linktype.0,
            data: f.data.to_vec(),
        });
    }
    out
}

/// Feed `frames` in the given order; segment events by frame, and the summaries.
fn run(frames: &[&OwnedFrame]) -> (BTreeMap<u64, SegmentEvent>, Vec<FlowSummary>) {
    let mut dec = Decoder::new();
    let mut table = FlowTable::new(FlowConfig::default());
    let mut events = Vec::new();
    let mut segs = BTreeMap::new();
    for f in frames {
        let meta = PacketMeta {
            frame: FrameNo(f.number),
            ts: f.ts,
            interface: InterfaceId(f.interface),
        };
        let d = dec.decode(f.linktype, &f.data);
        events.clear();
        table.on_packet(&meta, &d, &mut events);
        for e in &events {
            if let FlowEvent::Segment(s) = e {
                segs.insert(s.frame.get(), *s);
            }
        }
    }
    events.clear();
    table.finish(&mut events);
    (segs, table.summaries())
}

/// All assertions for one processing order. Returns the failures (empty = pass).
fn check(order_name: &str, o: &Oracle, frames: &[&OwnedFrame]) -> Vec<String> {
    let order: Vec<u64> = frames.iter().map(|f| f.number).collect();
    let pos: HashMap<u64, usize> = order.iter().enumerate().map(|(i, f)| (*f, i)).collect();
    let ts: HashMap<u64, i64> = frames.iter().map(|f| (f.number, f.ts.0)).collect();
    let real = real_retransmissions(o, &order);
    let (segs, sums) = run(frames);
    let mut fail = Vec::new();
    let mut per_stream: BTreeMap<u32, u64> = BTreeMap::new();
    let mut real_seen = 0;
    for &[a, b] in &o.pairs {
        let (first, second) = if pos[&a] < pos[&b] { (a, b) } else { (b, a) };
        *per_stream.entry(o.rows[&a].stream).or_default() += 1;
        let (Some(e1), Some(e2)) = (segs.get(&first), segs.get(&second)) else {
            fail.push(format!("no segment event for {first} or {second}"));
            continue;
        };
        if e1.duplicate_of.is_some() {
            fail.push(format!(
                "frame {first}: first sighting marked duplicate_of {:?}",
                e1.duplicate_of
            ));
        }
        if e2.duplicate_of != Some(FrameNo(first)) {
            fail.push(format!(
                "frame {second}: duplicate_of {:?}, expected Some({first})",
                e2.duplicate_of
            ));
        }
        // A second sighting carries its first sighting's classification (documented in
        // `analysis/mod.rs`): a retransmission only when the packet really was one.
        if e2.analysis != e1.analysis {
            fail.push(format!(
                "frame {second}: classification differs from frame {first}"
            ));
        }
        if e2.analysis.retransmission != real.contains(&first) {
            fail.push(format!(
                "frame {second}: second sighting of {first} retransmission = {}",
                e2.analysis.retransmission
            ));
        }
        if real.contains(&first) {
            real_seen += 1;
            if !e1.analysis.retransmission {
                fail.push(format!("frame {first}: real retransmission not flagged"));
            }
        } else if e1.analysis.retransmission {
            fail.push(format!("frame {first}: not a retransmission but flagged"));
        }
    }
    if real_seen == 0 {
        fail.push("no real retransmission in the fixture".into());
    }
    for (stream, n) in &per_stream {
        let Some(s) = sums.iter().find(|s| s.tcp_stream == u64::from(*stream)) else {
            fail.push(format!("no summary for stream {stream}"));
            continue;
        };
        if s.duplicate_sightings != *n {
            fail.push(format!(
                "stream {stream}: duplicate_sightings {} expected {n}",
                s.duplicate_sightings
            ));
        }
        let reals = o
            .pairs
            .iter()
            .filter(|p| o.rows[&p[0]].stream == *stream && real.contains(&p[0]))
            .count() as u64;
        if s.retransmissions.total != reals {
            fail.push(format!(
                "stream {stream}: retransmissions.total {} expected {reals}",
                s.retransmissions.total
            ));
        }
        let listed: BTreeSet<(u64, u32, i64)> = s
            .sightings
            .iter()
            .map(|x| (x.frame.get(), x.interface.get(), x.ts_ns))
            .collect();
        let ifs: BTreeSet<u32> = listed.iter().map(|x| x.1).collect();
        if !s.sightings_capped && ifs != BTreeSet::from([0, 1]) {
            fail.push(format!("stream {stream}: sightings on interfaces {ifs:?}"));
        }
        for p in o.pairs.iter().filter(|p| o.rows[&p[0]].stream == *stream) {
            for f in p {
                let want = (*f, o.rows[f].interface, ts[f]);
                if !listed.contains(&want) {
                    fail.push(format!("stream {stream}: sighting {want:?} not listed"));
                }
            }
        }
        if s.sightings.len() != listed.len() {
            fail.push(format!("stream {stream}: sightings listed twice"));
        }
    }
    println!(
        "{order_name}: {} frames, {} duplicate pairs {per_stream:?}, {} real retransmission \
         packets, {} failures",
        order.len(),
        o.pairs.len(),
        real_seen,
        fail.len()
    );
    for f in fail.iter().take(20) {
        println!("  {f}");
    }
    fail
}

/// The oracle agrees with the committed truth file and with Wireshark's behaviour.
#[test]
fn oracle_matches_truth_file() {
    let Some(p) = capture() else { return };
    let o = oracle(&p);
    let truth = std::fs::read_to_string(fixtures_dir().join("two-interfaces.pcapng.truth.json"))
        .expect("truth file");
    let n = o.pairs.len();
    assert!(n >= 100, "only {n} duplicate pairs");
    assert_eq!(o.rows.len(), 2 * n, "every TCP frame is one of a pair");
    assert!(
        truth.contains(&format!("\"duplicate_sightings\": {n},")),
        "truth file disagrees: {n} pairs"
    );
    // Real retransmissions by time order, both sightings.
    let frames = load(&p);
    let mut sorted: Vec<&OwnedFrame> = frames.iter().collect();
    sorted.sort_by_key(|f| (f.ts, f.number));
    let order: Vec<u64> = sorted.iter().map(|f| f.number).collect();
    let real = real_retransmissions(&o, &order);
    assert!(real.len() >= 4, "real retransmissions {real:?}");
    // Wireshark 4.0 flags far more frames than the real retransmissions (issue 19463).
    let false_ws: Vec<u64> = o.ws_retrans.difference(&real).copied().collect();
    println!(
        "{n} pairs; real retransmission frames {real:?}; Wireshark flags {} frames as \
         retransmission, {} of them are not real retransmissions",
        o.ws_retrans.len(),
        false_ws.len()
    );
    assert!(
        truth.contains(&format!(
            "\"wireshark_retransmission_frames\": {},",
            o.ws_retrans.len()
        )),
        "truth file disagrees on Wireshark's retransmission count"
    );
    assert!(
        false_ws.len() > 10,
        "Wireshark false positives: {false_ws:?}"
    );
}

/// Time order (what `reordercap` gives): each second sighting follows its first within
/// a few frames.
#[test]
fn duplicate_sightings_in_time_order() {
    let Some(p) = capture() else { return };
    let o = oracle(&p);
    let frames = load(&p);
    let mut sorted: Vec<&OwnedFrame> = frames.iter().collect();
    sorted.sort_by_key(|f| (f.ts, f.number));
    let fail = check("time order", &o, &sorted);
    assert!(
        fail.is_empty(),
        "{} failures, first: {:?}",
        fail.len(),
        fail.first()
    );
}

/// File order, as dumpcap wrote it: a burst's sightings on one interface come as a block
/// of up to 64 frames before the other interface's block, and the later block's
/// timestamps are earlier. The flow table matches sightings by fingerprint within
/// `duplicate_window_ns` in either time direction (`crates/flow/src/sightings.rs`).
#[test]
fn duplicate_sightings_in_file_order() {
    let Some(p) = capture() else { return };
    let o = oracle(&p);
    let frames = load(&p);
    let in_file: Vec<&OwnedFrame> = frames.iter().collect();
    let fail = check("file order", &o, &in_file);
    assert!(
        fail.is_empty(),
        "{} failures, first: {:?}",
        fail.len(),
        fail.first()
    );
}
