//! Structure-aware pcapng: the input is a list of block descriptions (see
//! [`build`]) turned into a well-formed pcapng file (block lengths, padding
//! and byte order right), so mutations reach option parsing, multiple
//! sections of either byte order, many IDBs (`if_tsresol`, `if_tsoffset`),
//! EPB/PB/SPB/ISB and unknown blocks instead of dying in the framing. The
//! file then goes through `CaptureReader` (same invariants as `ingest`) and
//! the whole pipeline (`analyze_path`: every detector, `finish()`, ledger,
//! text and JSONL rendering).
//!
//! Seeds are real pcapng files converted by `fuzz/scripts/pcapng_to_ops.py`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pcapsleuth_analyze::{analyze_path, AnalyzeOptions};
use pcapsleuth_ingest::CaptureReader;
use pcapsleuth_report::{render_capture_jsonl, render_capture_text, TextOptions};
use std::path::Path;

/// Reads little-endian fields from the fuzz input; past the end it yields zeros.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.0.len());
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        head
    }
    fn u8(&mut self) -> u8 {
        self.bytes(1).first().copied().unwrap_or(0)
    }
    fn u16(&mut self) -> u16 {
        u16::from(self.u8()) | u16::from(self.u8()) << 8
    }
    fn u32(&mut self) -> u32 {
        u32::from(self.u16()) | u32::from(self.u16()) << 16
    }
    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }
    /// A length-prefixed (u16) byte string.
    fn data(&mut self) -> &'a [u8] {
        let n = usize::from(self.u16());
        self.bytes(n)
    }
}

/// Writes fields in the current section's byte order.
struct Out {
    buf: Vec<u8>,
    be: bool,
}

impl Out {
    fn u16(&mut self, v: u16) {
        let b = if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.buf.extend_from_slice(&b);
    }
    fn u32(&mut self, v: u32) {
        let b = if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.buf.extend_from_slice(&b);
    }
    fn u64(&mut self, v: u64) {
        let b = if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.buf.extend_from_slice(&b);
    }
    fn padded(&mut self, d: &[u8]) {
        self.buf.extend_from_slice(d);
        self.buf.resize(self.buf.len() + (4 - d.len() % 4) % 4, 0);
    }
    /// Options: count (u8), then per option code (u16), value (u8 length +
    /// bytes). The converter emits `opt_endofopt` explicitly when the file has it.
    fn options(&mut self, inp: &mut Input<'_>) {
        for _ in 0..inp.u8() {
            let code = inp.u16();
            let n = usize::from(inp.u8());
            let v = inp.bytes(n);
            self.u16(code);
            self.u16(v.len() as u16);
            self.padded(v);
        }
    }
    /// Start a block; returns the offset of its length field.
    fn begin(&mut self, block_type: u32) -> usize {
        self.u32(block_type);
        let at = self.buf.len();
        self.u32(0);
        at
    }
    /// Patch the leading length and append the trailing one.
    fn end(&mut self, at: usize) {
        let len = (self.buf.len() - at + 8) as u32;
        let b = if self.be {
            len.to_be_bytes()
        } else {
            len.to_le_bytes()
        };
        self.buf[at..at + 4].copy_from_slice(&b);
        self.u32(len);
    }
    fn shb(&mut self, inp: &mut Input<'_>) {
        let flags = inp.u8();
        self.be = flags & 1 != 0;
        let at = self.begin(0x0A0D_0D0A);
        self.u32(0x1A2B_3C4D);
        let (major, minor) = if flags & 2 != 0 {
            (inp.u16(), inp.u16())
        } else {
            (1, 0)
        };
        self.u16(major);
        self.u16(minor);
        let section_len = if flags & 4 != 0 { inp.u64() } else { u64::MAX };
        self.u64(section_len);
        self.options(inp);
        self.end(at);
    }
}

/// Block kinds (first byte of each block description, modulo 8):
/// 0 SHB (flags: bit0 big-endian, bit1 explicit version u16 u16, bit2
/// explicit section length u64), 1 IDB (linktype u16, snaplen u32), 2 EPB
/// (flags, interface u32, ts high u32, ts low u32, orig_len u32, [caplen u32
/// if flags bit0], data), 3 SPB (orig_len u32, data), 4 ISB (interface u32,
/// ts high u32, ts low u32), 5 obsolete PB (interface u16, drops u16, ts high
/// u32, ts low u32, orig_len u32, data), 6 other block (type u32, body data),
/// 7 raw bytes (data). IDB, EPB, ISB, PB and SHB are followed by options.
fn build(data: &[u8]) -> Vec<u8> {
    let mut inp = Input(data);
    let mut out = Out {
        buf: Vec::with_capacity(data.len() * 2),
        be: false,
    };
    if data.first().is_none_or(|k| k % 8 != 0) {
        out.shb(&mut Input(&[0, 0]));
    }
    while !inp.0.is_empty() {
        match inp.u8() % 8 {
            0 => out.shb(&mut inp),
            1 => {
                let at = out.begin(1);
                out.u16(inp.u16());
                out.u16(0);
                out.u32(inp.u32());
                out.options(&mut inp);
                out.end(at);
            }
            2 => {
                let flags = inp.u8();
                let at = out.begin(6);
                for _ in 0..3 {
                    out.u32(inp.u32());
                }
                let orig_len = inp.u32();
                let caplen = (flags & 1 != 0).then(|| inp.u32());
                let d = inp.data();
                out.u32(caplen.unwrap_or(d.len() as u32));
                out.u32(orig_len);
                out.padded(d);
                out.options(&mut inp);
                out.end(at);
            }
            3 => {
                let at = out.begin(3);
                out.u32(inp.u32());
                out.padded(inp.data());
                out.end(at);
            }
            4 => {
                let at = out.begin(5);
                for _ in 0..3 {
                    out.u32(inp.u32());
                }
                out.options(&mut inp);
                out.end(at);
            }
            5 => {
                let at = out.begin(2);
                out.u16(inp.u16());
                out.u16(inp.u16());
                out.u32(inp.u32());
                out.u32(inp.u32());
                let orig_len = inp.u32();
                let d = inp.data();
                out.u32(d.len() as u32);
                out.u32(orig_len);
                out.padded(d);
                out.options(&mut inp);
                out.end(at);
            }
            6 => {
                let at = out.begin(inp.u32());
                out.padded(inp.data());
                out.end(at);
            }
            _ => out.buf.extend_from_slice(inp.data()),
        }
    }
    out.buf
}

fuzz_target!(|data: &[u8]| {
    let file = build(data);
    if let Ok(mut r) = CaptureReader::from_reader(
        Path::new("fuzz"),
        Box::new(std::io::Cursor::new(file.clone())),
    ) {
        let mut last = 0;
        while let Ok(Some(f)) = r.next_frame() {
            assert!(f.number.get() > last);
            assert!(f.data.len() <= 128 * 1024 * 1024);
            last = f.number.get();
        }
        assert!(r.frame_count().get() >= last);
        std::hint::black_box((r.interfaces(), r.warnings(), r.stop_warning()));
    }
    let path = std::env::temp_dir().join(format!(
        "pcapsleuth-fuzz-pcapng-{}.pcapng",
        std::process::id()
    ));
    if std::fs::write(&path, &file).is_err() {
        return;
    }
    let opts = AnalyzeOptions {
        with_flows: true,
        ..AnalyzeOptions::default()
    };
    let report = analyze_path(&path, &opts);
    std::hint::black_box(render_capture_text(&report, &TextOptions::default()));
    std::hint::black_box(render_capture_jsonl(&report));
});
