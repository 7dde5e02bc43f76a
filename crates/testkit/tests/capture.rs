//! The capture writer's files read back through the ingest reader with the
//! timestamps, lengths, interfaces and bytes that were written.

use pcapsleuth_ingest::CaptureReader;
use pcapsleuth_testkit::capture::{block_type, Interface, Pcap, Pcapng};
use std::path::Path;

/// (ts ns, interface, linktype, orig_len, data) of every frame, the interface
/// names, and the warnings' count.
type Frames = Vec<(i64, u32, u32, u32, Vec<u8>)>;

fn read(bytes: Vec<u8>) -> (Frames, Vec<Option<String>>, usize) {
    let mut reader =
        CaptureReader::from_reader(Path::new("mem"), Box::new(std::io::Cursor::new(bytes)))
            .expect("a capture");
    let mut frames = Vec::new();
    while let Some(f) = reader.next_frame().expect("readable") {
        frames.push((
            f.ts.0,
            f.interface.get(),
            f.linktype.0,
            f.orig_len,
            f.data.to_vec(),
        ));
    }
    let names = reader.interfaces().iter().map(|i| i.name.clone()).collect();
    (frames, names, reader.warnings().len())
}

#[test]
fn pcap_all_resolutions_and_byte_orders() {
    for nanoseconds in [false, true] {
        for big_endian in [false, true] {
            let mut file = Pcap::new(101).snaplen(4096);
            if nanoseconds {
                file = file.nanoseconds();
            }
            if big_endian {
                file = file.big_endian();
            }
            file.packet(1_700_000_000_123_456_789, &[0x45, 0, 0, 20])
                .cut_packet(1_700_000_001_000_000_000, &[0x60; 8], 1500);
            let (frames, _, warnings) = read(file.bytes());
            let first_ts = if nanoseconds {
                1_700_000_000_123_456_789
            } else {
                1_700_000_000_123_456_000
            };
            let what = format!("ns={nanoseconds} be={big_endian}");
            assert_eq!(warnings, 0, "{what}");
            assert_eq!(
                frames,
                vec![
                    (first_ts, 0, 101, 4, vec![0x45, 0, 0, 20]),
                    (1_700_000_001_000_000_000, 0, 101, 1500, vec![0x60; 8]),
                ],
                "{what}"
            );
        }
    }
}

#[test]
fn empty_pcap_is_a_header_only() {
    let bytes = Pcap::new(1).bytes();
    assert_eq!(bytes.len(), 24);
    assert_eq!(&bytes[..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
    assert_eq!(read(bytes).0, vec![]);
}

#[test]
fn pcapng_interfaces_resolutions_sections_both_byte_orders() {
    for big_endian in [false, true] {
        let mut w = Pcapng::with_byte_order(big_endian);
        w.interface(&Interface::new(1).name("eth0").tsresol(9));
        w.interface(&Interface::new(113).name("any").tsresol(3).tsoffset_s(10));
        w.epb(0, 15_000_000_007, &[1; 14], 60);
        w.epb(1, 2_500, &[2; 20], 20);
        w.isb(0, 16_000_000_000, Some(2), Some(1));
        w.block(block_type::CUSTOM, &[0, 0, 0x7e, 0xd9]);
        w.section();
        w.interface(&Interface::new(1));
        w.spb(3, &[3; 3]);
        w.epb(0, 5_000_000, &[4; 4], 4);
        let (frames, names, warnings) = read(w.into_bytes());
        assert_eq!(warnings, 0, "be={big_endian}");
        assert_eq!(
            frames,
            vec![
                (15_000_000_007, 0, 1, 60, vec![1; 14]),
                (12_500_000_000, 1, 113, 20, vec![2; 20]),
                // An SPB has no timestamp: the previous packet's is kept.
                (12_500_000_000, 2, 1, 3, vec![3; 3]),
                (5_000_000_000, 2, 1, 4, vec![4; 4]),
            ],
            "be={big_endian}"
        );
        assert_eq!(
            names,
            vec![Some("eth0".to_string()), Some("any".to_string()), None]
        );
    }
}

#[test]
fn pcapng_len_is_the_next_block_offset() {
    let mut w = Pcapng::little_endian();
    // SHB: 12 framing + 16 body bytes.
    assert_eq!(w.len(), 28);
    w.interface(&Interface::new(1));
    // IDB: 12 framing + 8 body + 4 end-of-options bytes.
    assert_eq!(w.len(), 28 + 24);
    w.epb(0, 0, &[0; 5], 5);
    // EPB: 12 framing + 20 fields + 5 data bytes padded to 8.
    assert_eq!(w.len(), 28 + 24 + 40);
}
