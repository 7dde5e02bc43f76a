//! pcapng Interface Statistics Blocks: per-interface drop counters.
//!
//! Real files: the gopacket `test202.pcapng` twins (both byte orders, two
//! sections) carry ISBs with `isb_ifdrop` 10 and 1 and `isb_osdrop` 42
//! (values checked by reading the blocks by hand); the lab captures carry
//! dumpcap's ISBs with `isb_ifdrop` 0. Options the corpus lacks
//! (`isb_starttime`/`isb_endtime`, an ISB for an unknown interface, a
//! truncated option) use minimal files built with the test kit's writer.

mod common;

use common::shared_or_skip;
use pcapsleuth_core::Timestamp;
use pcapsleuth_ingest::{CaptureReader, InterfaceStats};
use pcapsleuth_testkit::capture::{block_type, Interface, Pcapng};
use std::path::Path;

fn stats_of(reader: CaptureReader) -> Vec<Option<InterfaceStats>> {
    let mut r = reader;
    while let Ok(Some(_)) = r.next_frame() {}
    r.interfaces().iter().map(|i| i.stats).collect()
}

fn stats_of_bytes(bytes: Vec<u8>) -> Vec<Option<InterfaceStats>> {
    stats_of(
        CaptureReader::from_reader(Path::new("mem"), Box::new(std::io::Cursor::new(bytes)))
            .expect("capture"),
    )
}

#[test]
fn gopacket_test202_drop_counters_both_byte_orders() {
    for order in ["le", "be"] {
        let rel = format!("captures/google__gopacket/pcapgo/tests/{order}/test202.pcapng");
        let Some(shared) = shared_or_skip(&rel) else {
            return;
        };
        let path = shared.join(&rel);
        let stats = stats_of(CaptureReader::open(&path).expect("open"));
        // Sections 0 and 1 have 2 and 3 interfaces: global ids 2 and 3 are
        // section 1's interfaces 0 and 1 of the writer.
        assert_eq!(stats.len(), 5, "{order}");
        assert_eq!(stats[0], None, "{order}");
        let s2 = stats[2].expect("interface 2 has an ISB");
        assert_eq!(
            (s2.if_drop, s2.filter_accept, s2.os_drop),
            (Some(10), Some(42), None),
            "{order}"
        );
        assert_eq!(
            s2.start_ts,
            Some(Timestamp(1_340_954_905_298_858_000)),
            "{order}"
        );
        assert_eq!(
            s2.end_ts,
            Some(Timestamp(1_340_954_905_299_858_000)),
            "{order}"
        );
        let s0 = stats[3].expect("interface 3 has an ISB");
        assert_eq!(s0.if_recv, Some(100), "{order}");
        assert_eq!(s0.if_drop, Some(1), "{order}");
        assert_eq!(s0.filter_accept, Some(9), "{order}");
        assert_eq!(s0.os_drop, Some(42), "{order}");
        assert_eq!(s0.usr_deliv, Some(6), "{order}");
    }
}

#[test]
fn dumpcap_isb_with_no_drops() {
    let Some(shared) = shared_or_skip("lab/icmp-frag-needed.pcapng") else {
        return;
    };
    let path = shared.join("lab/icmp-frag-needed.pcapng");
    let stats = stats_of(CaptureReader::open(&path).expect("open"));
    assert_eq!(stats.len(), 2);
    for s in &stats {
        let s = s.expect("dumpcap writes an ISB per interface");
        assert_eq!(s.if_drop, Some(0));
        assert!(s.if_recv.is_some());
        assert!(s.start_ts.is_some() && s.end_ts.is_some());
    }
}

fn u64_bytes(v: u64, big_endian: bool) -> [u8; 8] {
    if big_endian {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    }
}

fn u32_bytes(v: u32, big_endian: bool) -> [u8; 4] {
    if big_endian {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    }
}

/// An ISB body: interface, timestamp (µs), then `options` (already encoded).
fn isb_body(
    w: &Pcapng,
    big_endian: bool,
    iface: u32,
    ts: u64,
    options: &[(u16, Vec<u8>)],
) -> Vec<u8> {
    let mut body = u32_bytes(iface, big_endian).to_vec();
    body.extend(u32_bytes((ts >> 32) as u32, big_endian));
    body.extend(u32_bytes(ts as u32, big_endian));
    for (code, value) in options {
        body.extend(w.option(*code, value));
    }
    body.extend(w.option(0, &[]));
    body
}

#[test]
fn all_isb_options_both_byte_orders_last_value_wins() {
    for be in [false, true] {
        let mut w = Pcapng::with_byte_order(be);
        w.interface(&Interface::new(1).name("eth0"));
        w.interface(&Interface::new(1).name("eth1").tsresol(9));
        w.epb(0, 1_000_000, &[0; 14], 14);
        let ts_opt = |t: u64| {
            let mut v = u32_bytes((t >> 32) as u32, be).to_vec();
            v.extend(u32_bytes(t as u32, be));
            v
        };
        let first = isb_body(
            &w,
            be,
            0,
            2_000_000,
            &[
                (2, ts_opt(500_000)),
                (3, ts_opt(2_000_000)),
                (4, u64_bytes(10, be).to_vec()),
                (5, u64_bytes(3, be).to_vec()),
                (7, u64_bytes(4, be).to_vec()),
            ],
        );
        w.block(block_type::ISB, &first);
        // Later: osdrop grows, ifdrop absent (keeps 3); an empty ISB after it.
        let second = isb_body(&w, be, 0, 3_000_000, &[(7, u64_bytes(9, be).to_vec())]);
        w.block(block_type::ISB, &second);
        let empty = isb_body(&w, be, 0, 4_000_000, &[]);
        w.block(block_type::ISB, &empty);
        // ISB on the ns interface; and one naming an interface that does not exist.
        let ns = isb_body(&w, be, 1, 7_000_000_000, &[(5, u64_bytes(0, be).to_vec())]);
        w.block(block_type::ISB, &ns);
        let unknown = isb_body(&w, be, 9, 1, &[(5, u64_bytes(77, be).to_vec())]);
        w.block(block_type::ISB, &unknown);
        w.epb(0, 5_000_000, &[0; 14], 14);
        let stats = stats_of_bytes(w.into_bytes());
        let s0 = stats[0].expect("eth0 stats");
        assert_eq!(s0.ts, Timestamp(4_000_000_000), "be={be}");
        assert_eq!(s0.start_ts, Some(Timestamp(500_000_000)), "be={be}");
        assert_eq!(s0.end_ts, Some(Timestamp(2_000_000_000)), "be={be}");
        assert_eq!(s0.if_recv, Some(10), "be={be}");
        assert_eq!(s0.if_drop, Some(3), "be={be}");
        assert_eq!(s0.os_drop, Some(9), "be={be}");
        assert_eq!(s0.filter_accept, None, "be={be}");
        let s1 = stats[1].expect("eth1 stats");
        assert_eq!(s1.ts, Timestamp(7_000_000_000), "be={be}");
        assert_eq!(s1.if_drop, Some(0), "be={be}");
    }
}

#[test]
fn malformed_isb_options_are_ignored_without_ending_the_file() {
    let mut w = Pcapng::little_endian();
    w.interface(&Interface::new(1));
    // Option length 200 runs past the block: the walk stops; counters
    // before it are kept. A counter of the wrong size is ignored.
    let mut body = isb_body(&w, false, 0, 1, &[(5, vec![1, 2, 3])]);
    body.truncate(12);
    body.extend(w.option(7, &u64_bytes(5, false)));
    body.extend([5, 0, 200, 0]);
    w.block(block_type::ISB, &body);
    // Too short to hold the interface id and timestamp.
    w.block(block_type::ISB, &[0, 0, 0, 0]);
    w.epb(0, 1, &[0; 14], 14);
    let mut r = CaptureReader::from_reader(
        Path::new("mem"),
        Box::new(std::io::Cursor::new(w.into_bytes())),
    )
    .expect("capture");
    let mut frames = 0;
    while let Ok(Some(_)) = r.next_frame() {
        frames += 1;
    }
    assert_eq!(frames, 1);
    assert!(r.warnings().is_empty());
    let s = r.interfaces()[0].stats.expect("stats");
    assert_eq!(s.os_drop, Some(5));
    assert_eq!(s.if_drop, None);
}

/// dumpcap writes ISB times in µs although the interfaces of this fixture
/// are in ns: the reader takes the reading near the packets.
#[test]
fn dumpcap_isb_times_in_microseconds_on_a_nanosecond_interface() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/captures/two-interfaces.pcapng");
    let mut r = CaptureReader::open(&path).expect("fixture");
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    while let Ok(Some(f)) = r.next_frame() {
        first = first.min(f.ts.0);
        last = last.max(f.ts.0);
    }
    for i in r.interfaces() {
        let s = i.stats.expect("dumpcap ISB");
        let (start, end) = (s.start_ts.expect("start").0, s.end_ts.expect("end").0);
        assert!(
            start <= first && end >= last,
            "{start} {end} vs {first} {last}"
        );
        assert!(
            last - start < 60_000_000_000,
            "start within a minute of the frames"
        );
        assert_eq!(s.if_drop, Some(0));
        assert_eq!(s.if_recv, Some(131));
    }
}
