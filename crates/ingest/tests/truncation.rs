//! Captures cut at many offsets, gzip round trips and chunking invariance, on
//! real lab captures (one legacy pcap, one two-interface pcapng).

mod common;

use common::{read_bytes, shared_or_skip, Dribble, OwnedFrame, ReadAll};
use flate2::write::GzEncoder;
use pcapsleuth_ingest::{CaptureReader, IngestError, WarningKind};
use std::io::Write;
use std::path::Path;

const PCAP: &str = "lab/syn-retransmit.pcap";
const PCAPNG: &str = "lab/probe-timer-200ms.pcapng";

/// One record of a capture as found by an independent scan of the container.
#[derive(Debug, Clone, Copy)]
struct Rec {
    start: usize,
    end: usize,
    /// Wireshark numbers it as a frame.
    numbered: bool,
}

/// Scan record boundaries without the reader: file header length and the
/// records. Legacy pcap: 24-byte header, 16-byte record headers. pcapng:
/// block total length at offset 4 (SHB byte order from its BOM).
fn scan(b: &[u8]) -> (usize, Vec<Rec>) {
    let u32_at = |off: usize, be: bool| {
        let a: [u8; 4] = b[off..off + 4].try_into().unwrap();
        if be {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    };
    let mut recs = Vec::new();
    if b[..4] == [0x0a, 0x0d, 0x0d, 0x0a] {
        let mut off = 0;
        let mut be = false;
        let mut header = 0;
        while off < b.len() {
            if b[off..off + 4] == [0x0a, 0x0d, 0x0d, 0x0a] {
                be = b[off + 8..off + 12] == [0x1a, 0x2b, 0x3c, 0x4d];
            }
            let ty = u32_at(off, be);
            let len = u32_at(off + 4, be) as usize;
            if off == 0 {
                header = len;
            } else {
                recs.push(Rec {
                    start: off,
                    end: off + len,
                    numbered: matches!(ty, 2 | 3 | 6 | 9 | 0xBAD | 0x4000_0BAD),
                });
            }
            off += len;
        }
        (header, recs)
    } else {
        let be = b[..4] == [0xa1, 0xb2, 0xc3, 0xd4] || b[..4] == [0xa1, 0xb2, 0x3c, 0x4d];
        let mut off = 24;
        while off < b.len() {
            let caplen = u32_at(off + 8, be) as usize;
            recs.push(Rec {
                start: off,
                end: off + 16 + caplen,
                numbered: true,
            });
            off += 16 + caplen;
        }
        (24, recs)
    }
}

fn load(rel: &str) -> Option<Vec<u8>> {
    let shared = shared_or_skip("truncation tests")?;
    Some(std::fs::read(shared.join(rel)).expect("lab capture readable"))
}

/// Cut offsets: every boundary ± 3 bytes within `window` bytes of either end,
/// plus a stride across the whole file.
fn cuts(len: usize, recs: &[Rec], header: usize, window: usize, stride: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..header + 3).collect();
    for r in recs {
        if r.start < window || r.start + window > len {
            for d in 0..=6 {
                v.push((r.start + d).saturating_sub(3));
            }
        }
    }
    v.extend((0..len).step_by(stride));
    v.push(len);
    v.retain(|&c| c <= len);
    v.sort_unstable();
    v.dedup();
    v
}

fn check_cuts(rel: &str, window: usize, stride: usize) {
    let Some(full) = load(rel) else { return };
    let reference = read_bytes(full.clone()).expect("full capture reads");
    assert!(
        reference.warnings.is_empty(),
        "{rel}: clean file gave warnings {:?}",
        reference.warnings
    );
    let (header, recs) = scan(&full);
    assert_eq!(
        recs.last().map(|r| r.end),
        Some(full.len()),
        "{rel}: scan does not tile the file"
    );
    let numbered_total = recs.iter().filter(|r| r.numbered).count() as u64;
    assert_eq!(
        reference.frame_count, numbered_total,
        "{rel}: frame count vs block scan"
    );
    assert!(
        reference.frames.len() > 20,
        "{rel}: too few frames for a meaningful test"
    );
    let offsets = cuts(full.len(), &recs, header, window, stride);
    assert!(
        offsets.len() > 200,
        "{rel}: only {} cut offsets",
        offsets.len()
    );
    for &cut in &offsets {
        let result = read_bytes(full[..cut].to_vec());
        if cut < header {
            // Inside the file header: an error naming the problem, never a panic.
            match result {
                Err(IngestError::NotACapture { .. }) => {
                    assert!(cut < 4, "{rel}@{cut}: NotACapture after the magic")
                }
                Err(IngestError::Malformed { offset, .. }) => assert_eq!(offset, 0, "{rel}@{cut}"),
                other => panic!("{rel}@{cut}: header cut gave {other:?}"),
            }
            continue;
        }
        let r: ReadAll = result.unwrap_or_else(|e| panic!("{rel}@{cut}: {e}"));
        let complete: Vec<&Rec> = recs.iter().filter(|r| r.end <= cut).collect();
        let numbered = complete.iter().filter(|r| r.numbered).count() as u64;
        let want: Vec<&OwnedFrame> = reference
            .frames
            .iter()
            .take_while(|f| f.number <= numbered)
            .collect();
        let got: Vec<&OwnedFrame> = r.frames.iter().collect();
        assert_eq!(got, want, "{rel}@{cut}: frames before the cut differ");
        assert_eq!(r.frame_count, numbered, "{rel}@{cut}: frame count");
        match recs.iter().find(|x| x.start < cut && cut < x.end) {
            None => assert!(
                r.warnings.is_empty(),
                "{rel}@{cut}: clean boundary gave {:?}",
                r.warnings
            ),
            Some(cut_rec) => {
                assert_eq!(r.warnings.len(), 1, "{rel}@{cut}: {:?}", r.warnings);
                let w = &r.warnings[0];
                assert_eq!(w.kind, WarningKind::TruncatedRecord, "{rel}@{cut}");
                assert_eq!(
                    w.offset, cut_rec.start as u64,
                    "{rel}@{cut}: warning offset"
                );
                // The frame number is known once the block type is (pcapng: 4 bytes).
                let type_known =
                    full.starts_with(&[0xd4, 0xc3, 0xb2, 0xa1]) || cut - cut_rec.start >= 4;
                let want_frame = (cut_rec.numbered && type_known).then_some(numbered + 1);
                assert_eq!(
                    w.frame.map(u64::from),
                    want_frame,
                    "{rel}@{cut}: warning frame"
                );
            }
        }
    }
}

#[test]
fn pcap_cut_anywhere() {
    check_cuts(PCAP, usize::MAX / 4, 7);
}

#[test]
fn pcapng_cut_anywhere() {
    check_cuts(PCAPNG, 48 * 1024, 1021);
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn via_dribble(bytes: Vec<u8>) -> ReadAll {
    let r = CaptureReader::from_reader(
        Path::new("dribble"),
        Box::new(Dribble {
            inner: std::io::Cursor::new(bytes),
            n: 0,
        }),
    )
    .expect("opens");
    common::drain(r).expect("reads")
}

#[test]
fn gzip_and_chunking_give_identical_frames() {
    for rel in [PCAP, PCAPNG] {
        let Some(full) = load(rel) else { return };
        let reference = read_bytes(full.clone()).unwrap();
        assert!(!reference.frames.is_empty());
        let gz = gzip(&full);
        assert_eq!(gz[..2], [0x1f, 0x8b]);
        let unz = read_bytes(gz.clone()).unwrap();
        assert_eq!(unz.frames, reference.frames, "{rel}: gzip round trip");
        assert!(unz.warnings.is_empty());
        let dribbled = via_dribble(full.clone());
        assert_eq!(dribbled.frames, reference.frames, "{rel}: 1-7 byte reads");
        assert_eq!(dribbled.frame_count, reference.frame_count);
        let both = via_dribble(gz.clone());
        assert_eq!(
            both.frames, reference.frames,
            "{rel}: gzip through 1-7 byte reads"
        );
        // A gzip stream cut in the middle: a prefix of the frames, no error, no panic.
        let cut_gz = read_bytes(gz[..gz.len() / 2].to_vec()).expect("truncated gzip still opens");
        assert!(
            !cut_gz.frames.is_empty() && cut_gz.frames.len() < reference.frames.len(),
            "{rel}"
        );
        assert_eq!(cut_gz.frames[..], reference.frames[..cut_gz.frames.len()]);
        assert!(cut_gz.warnings.len() <= 1);
    }
}

#[test]
fn not_a_capture_names_file_and_magic() {
    let r = CaptureReader::from_reader(
        Path::new("notes.txt"),
        Box::new(std::io::Cursor::new(b"hello world".to_vec())),
    );
    let Err(e) = r else {
        panic!("text accepted as a capture")
    };
    assert!(matches!(e, IngestError::NotACapture { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("notes.txt") && msg.contains("68 65 6c 6c"),
        "{msg}"
    );
    let empty = CaptureReader::from_reader(Path::new("empty.pcap"), Box::new(std::io::empty()));
    assert!(matches!(empty, Err(IngestError::NotACapture { .. })));
    // gzip of garbage: still NotACapture (magic of the decompressed stream).
    let gz = gzip(b"garbage!");
    let r = CaptureReader::from_reader(Path::new("g.gz"), Box::new(std::io::Cursor::new(gz)));
    assert!(matches!(r, Err(IngestError::NotACapture { .. })));
}

/// Read every frame of `bytes`; returns (frames, the stop warning's kind and message).
fn stop_of(bytes: Vec<u8>) -> (u64, Option<(WarningKind, String)>) {
    let mut r = CaptureReader::from_reader(Path::new("t"), Box::new(std::io::Cursor::new(bytes)))
        .expect("opens");
    let mut n = 0;
    while r.next_frame().expect("reads").is_some() {
        n += 1;
    }
    (n, r.stop_warning().map(|w| (w.kind, w.message.clone())))
}

#[test]
fn gzip_cut_on_a_record_boundary_stops_with_a_warning() {
    let raw = std::fs::read(pcapsleuth_testkit::fixtures_dir().join("syn-drops.pcap")).unwrap();
    let (_, recs) = scan(&raw);
    let end = recs[19].end;
    // Compressed up to a record boundary, flushed but never finished: no
    // final deflate block, no gzip trailer (a copy interrupted mid-way).
    let mut e = GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(&raw[..end]).unwrap();
    e.flush().unwrap();
    let (frames, stop) = stop_of(e.get_ref().clone());
    assert_eq!(frames, 20);
    let (kind, message) = stop.expect("an incomplete gzip stream is not a complete read");
    assert_eq!(kind, WarningKind::TruncatedRecord);
    assert!(message.contains("gzip"), "{message}");
    // The same bytes finished properly: complete, nothing to say.
    assert_eq!(stop_of(gzip(&raw[..end])), (20, None));
    // A plain file cut inside a record stops there; one cut on a boundary is
    // indistinguishable from a complete file.
    let (frames, stop) = stop_of(raw[..end + 10].to_vec());
    assert_eq!(
        (frames, stop.map(|s| s.0)),
        (20, Some(WarningKind::TruncatedRecord))
    );
    assert_eq!(stop_of(raw[..end].to_vec()), (20, None));
}
