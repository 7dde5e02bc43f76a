//! Timestamp resolution, byte order and multi-section handling.
//!
//! Real captures cover legacy µs/ns in both byte orders (checked per frame
//! against tshark in `tshark_frames.rs`) and pcapng in both byte orders
//! (the gopacket be/le twins below). The corpus has no pcapng with an
//! `if_tsresol` other than 10^-6 / 10^-9, no `if_tsoffset`, and no
//! byte-swapped "modified" pcap, so those cases use minimal files built with
//! the test kit's writer ([`pcapsleuth_testkit::capture`]).

mod common;

use common::{read_bytes, read_path, shared_or_skip, OwnedFrame};
use pcapsleuth_ingest::{ng_timestamp_ns, tsresol_units, WarningKind};
use pcapsleuth_testkit::capture::{block_type, Interface, Pcap, Pcapng};

#[test]
fn tsresol_table() {
    let cases: &[(u8, Option<u64>)] = &[
        (0, Some(1)),
        (3, Some(1_000)),
        (6, Some(1_000_000)),
        (9, Some(1_000_000_000)),
        (19, Some(10_000_000_000_000_000_000)),
        (20, None),
        (0x80, Some(1)),
        (0x80 | 10, Some(1024)),
        (0x80 | 20, Some(1 << 20)),
        (0x80 | 63, Some(1 << 63)),
        (0x80 | 64, None),
    ];
    for &(r, want) in cases {
        assert_eq!(tsresol_units(r), want, "if_tsresol {r:#04x}");
    }
}

#[test]
fn timestamp_conversion_table() {
    let cases: &[(u64, u64, i64, i64)] = &[
        // pcapng spec ISB example: 2012-06-29 07:28:25.298858 UTC in µs.
        (
            0x0004_c397_64ca_47aa,
            1_000_000,
            0,
            1_340_954_905_298_858_000,
        ),
        (1_234_567_891, 1_000_000_000, 0, 1_234_567_891),
        (1_500, 1_000, 0, 1_500_000_000),
        (1_500, 1_000, 1_000_000_000, 1_000_000_001_500_000_000),
        (1_500, 1_000, -2, -500_000_000),
        // 2^-20 s units: 5.5 s.
        ((5 << 20) | (1 << 19), 1 << 20, 0, 5_500_000_000),
        // 2^-30 s units: fractions truncate toward zero (Wireshark).
        (3, 1 << 30, 0, 2),
        ((1 << 30) + 1, 1 << 30, 7, 8_000_000_000),
        // Picoseconds (10^-12): no overflow in the fraction.
        (
            1_000_000_000_123_456,
            1_000_000_000_000,
            0,
            1_000_000_000_123,
        ),
        // Saturation instead of wrap-around.
        (u64::MAX, 1, 0, i64::MAX),
        (0, 1, i64::MIN, i64::MIN),
    ];
    for &(ts, units, off, want) in cases {
        assert_eq!(
            ng_timestamp_ns(ts, units, off),
            want,
            "ts {ts} units {units} offset {off}"
        );
    }
}

fn frame(
    number: u64,
    ts: i64,
    interface: u32,
    linktype: u32,
    data: &[u8],
    orig_len: u32,
) -> OwnedFrame {
    OwnedFrame {
        number,
        ts,
        interface,
        linktype,
        orig_len,
        data: data.to_vec(),
    }
}

/// Two sections, three interfaces with 2^-20 / 10^-3 / default resolutions
/// and positive / negative `if_tsoffset`, EPB, SPB and a custom block.
fn hand_built(be: bool) -> Vec<u8> {
    let mut w = Pcapng::with_byte_order(be);
    w.interface(
        &Interface::new(1)
            .tsresol(0x80 | 20)
            .tsoffset_s(1_600_000_000)
            .name("veth-a"),
    );
    w.interface(&Interface::new(101).snaplen(4).tsresol(3).tsoffset_s(-5));
    w.epb(1, 12_345, &[0x45, 1, 2, 3, 4, 5], 60); // snaplen 4 is not enforced on EPB
    w.epb(0, (3 << 20) | (1 << 18), &[0xaa; 14], 14);
    w.block(block_type::CUSTOM, &[0, 0, 0x7e, 0xd9, b'x', b'y']); // custom block: numbered, not returned
    w.spb(64, &[0xbb; 20]); // interface 0 of the section, caplen = min(orig, block)
    w.section();
    w.interface(&Interface::new(113).name("any"));
    w.epb(0, 1_700_000_000_000_001, &[0xcc; 3], 3);
    w.into_bytes()
}

#[test]
fn hand_built_pcapng_both_byte_orders() {
    let t0 = 1_600_000_003_250_000_000; // 3.25 s after the 1.6e9 s offset
    let want = vec![
        frame(1, 7_345_000_000, 1, 101, &[0x45, 1, 2, 3, 4, 5], 60),
        frame(2, t0, 0, 1, &[0xaa; 14], 14),
        frame(4, t0, 0, 1, &[0xbb; 20], 64),
        frame(5, 1_700_000_000_000_001_000, 2, 113, &[0xcc; 3], 3),
    ];
    for be in [false, true] {
        let r = read_bytes(hand_built(be)).unwrap_or_else(|e| panic!("be={be}: {e}"));
        assert_eq!(r.frames, want, "be={be}");
        assert_eq!(
            r.frame_count, 5,
            "be={be}: the custom block is frame 3 of 5"
        );
        assert!(r.warnings.is_empty(), "be={be}: {:?}", r.warnings);
        assert_eq!(
            r.interface_names,
            vec![Some("veth-a".to_string()), None, Some("any".to_string())]
        );
    }
}

#[test]
fn unknown_interface_stops_with_warning() {
    let mut w = Pcapng::little_endian();
    w.interface(&Interface::new(1));
    w.epb(0, 1, &[1; 14], 14);
    let bad_at = w.len() as u64;
    w.epb(3, 2, &[2; 14], 14);
    w.epb(0, 3, &[3; 14], 14);
    let r = read_bytes(w.into_bytes()).unwrap();
    assert_eq!(r.frames.len(), 1);
    assert_eq!(r.warnings.len(), 1);
    assert_eq!(r.warnings[0].kind, WarningKind::UnknownInterface);
    assert_eq!(
        (r.warnings[0].offset, r.warnings[0].frame.map(u64::from)),
        (bad_at, Some(2))
    );
}

#[test]
fn byte_swapped_modified_pcap() {
    // Magic a1 b2 cd 34 (big-endian Kuznetzov format): 24-byte record headers.
    let mut f = Pcap::new(1).modified().big_endian();
    for (i, len) in [(0u8, 60usize), (1, 42)] {
        let ts_ns = (1_000 + i64::from(i)) * 1_000_000_000 + 250_000_000;
        // ifindex 2, protocol IPv4, pkt_type 0 (to us).
        f.modified_packet(ts_ns, &vec![i; len], 2, 0x0800, 0);
    }
    let r = read_bytes(f.bytes()).unwrap();
    let got: Vec<(u64, i64, usize)> = r
        .frames
        .iter()
        .map(|f| (f.number, f.ts, f.data.len()))
        .collect();
    assert_eq!(
        got,
        vec![(1, 1_000_250_000_000, 60), (2, 1_001_250_000_000, 42)]
    );
    assert!(r.warnings.is_empty());
}

/// The gopacket and pcap-parser test suites ship the same pcapng files in
/// both byte orders: every frame must come out identical.
#[test]
fn real_pcapng_byte_order_twins_are_identical() {
    let Some(shared) = shared_or_skip("byte-order twins") else {
        return;
    };
    let c = shared.join("captures");
    let mut pairs = Vec::new();
    for n in [
        "test005", "test006", "test009", "test010", "test016", "test100", "test202",
    ] {
        let d = c.join("google__gopacket/pcapgo/tests");
        pairs.push((
            d.join(format!("le/{n}.pcapng")),
            d.join(format!("be/{n}.pcapng")),
        ));
    }
    for n in ["test001", "test016", "test017"] {
        let d = c.join("rusticata__pcap-parser/assets");
        pairs.push((
            d.join(format!("{n}-le.pcapng")),
            d.join(format!("{n}-be.pcapng")),
        ));
    }
    // Legacy: the same SIP capture little-endian (suricata-verify) and big-endian (nDPI).
    pairs.push((
        c.join("OISF__suricata-verify/tests/sip-method/sip.pcap"),
        c.join("ntop__nDPI/tests/cfgs/default/pcap/fuzz-2006-06-26-2594.pcap"),
    ));
    for (le, be) in &pairs {
        let a = read_path(le).unwrap_or_else(|e| panic!("{e}"));
        let b = read_path(be).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.frame_count, b.frame_count, "{}", le.display());
        assert!(a.frame_count > 0, "{}", le.display());
        let key = |r: &common::ReadAll| {
            r.frames
                .iter()
                .map(|f| (f.number, f.ts, f.interface, f.orig_len, f.data.len()))
                .collect::<Vec<_>>()
        };
        assert_eq!(key(&a), key(&b), "{} vs {}", le.display(), be.display());
        if !le.ends_with("sip.pcap") {
            assert_eq!(a.frames, b.frames, "{}", le.display());
        }
    }
}
