//! A minimal little-endian pcapng block writer: Section Header, Interface
//! Description, Enhanced Packet and Custom blocks with options, as specified in
//! draft-ietf-opsawg-pcapng (§4.1 SHB, §4.2 IDB, §4.3 EPB, §4.8 custom block,
//! §3.5 options). Every IDB carries `if_tsresol = 9`, so EPB timestamps are
//! integer nanoseconds since the Unix epoch.

use std::io::{self, Write};

/// Block type of the Section Header Block.
pub const SHB: u32 = 0x0A0D_0D0A;
/// Block type of the Interface Description Block.
pub const IDB: u32 = 0x0000_0001;
/// Block type of the Enhanced Packet Block.
pub const EPB: u32 = 0x0000_0006;
/// Block type of a (copyable) Custom Block.
pub const CUSTOM: u32 = 0x0000_0BAD;

/// `opt_endofopt`.
const OPT_END: u16 = 0;
/// `opt_comment` (UTF-8, any block).
const OPT_COMMENT: u16 = 1;
/// `shb_userappl`.
const SHB_USERAPPL: u16 = 4;
/// `if_name`.
const IF_NAME: u16 = 2;
/// `if_tsresol`.
const IF_TSRESOL: u16 = 9;
/// `if_tsoffset`.
const IF_TSOFFSET: u16 = 14;

/// Longest option value in bytes (the option length field is 16 bits; kept a
/// multiple of 4 below the limit).
pub const MAX_OPTION_BYTES: usize = 65_532;

/// One interface to describe.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Idb {
    /// LINKTYPE_* number (must fit 16 bits; larger values are truncated by the format).
    pub linktype: u32,
    /// Snapshot length in bytes (0 = unlimited).
    pub snaplen: u32,
    /// `if_name`, if any.
    pub name: Option<String>,
    /// Other options of the input's IDB to copy (code, little-endian value);
    /// `if_name`, `if_tsresol` and `if_tsoffset` in it are ignored.
    pub options: Vec<(u16, Vec<u8>)>,
}

/// Writes pcapng blocks to `W`. Call [`NgWriter::section_header`] first.
pub struct NgWriter<W: Write> {
    out: W,
    block: Vec<u8>,
}

/// Append one option (code, length, value padded to 4 bytes) to `b`. Values
/// longer than [`MAX_OPTION_BYTES`] are cut at a UTF-8 boundary when `text`.
fn push_option(b: &mut Vec<u8>, code: u16, value: &[u8], text: bool) {
    let mut v = value;
    if v.len() > MAX_OPTION_BYTES {
        let mut cut = MAX_OPTION_BYTES;
        if text {
            while cut > 0 && v.get(cut).is_some_and(|c| (c & 0xC0) == 0x80) {
                cut -= 1;
            }
        }
        v = v.get(..cut).unwrap_or_default();
    }
    b.extend_from_slice(&code.to_le_bytes());
    b.extend_from_slice(&(v.len() as u16).to_le_bytes());
    b.extend_from_slice(v);
    pad4(b);
}

/// Pad `b` with zeros to a multiple of 4 bytes.
fn pad4(b: &mut Vec<u8>) {
    let pad = (4 - b.len() % 4) % 4;
    b.resize(b.len() + pad, 0);
}

impl<W: Write> NgWriter<W> {
    /// A writer over `out`.
    pub fn new(out: W) -> Self {
        NgWriter {
            out,
            block: Vec::with_capacity(4096),
        }
    }

    /// Frame the body in `self.block` as a block of `block_type` and write it.
    fn emit(&mut self, block_type: u32, body_and_options: &[u8]) -> io::Result<()> {
        let total = 12usize
            .checked_add(body_and_options.len())
            .ok_or_else(|| io::Error::other("block too large"))?;
        let total =
            u32::try_from(total).map_err(|_| io::Error::other("block larger than 4 GiB"))?;
        self.out.write_all(&block_type.to_le_bytes())?;
        self.out.write_all(&total.to_le_bytes())?;
        self.out.write_all(body_and_options)?;
        self.out.write_all(&total.to_le_bytes())
    }

    /// Write the Section Header Block (version 1.0, section length unknown)
    /// with `shb_userappl` = `app`, after the input's options `kept`
    /// (comments, `shb_hardware`, `shb_os`; its own `shb_userappl` is
    /// dropped: the option may appear once).
    ///
    /// # Errors
    /// I/O errors of the underlying writer.
    pub fn section_header(&mut self, app: &str, kept: &[(u16, Vec<u8>)]) -> io::Result<()> {
        let mut b = std::mem::take(&mut self.block);
        b.clear();
        b.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&(-1i64).to_le_bytes());
        for (code, v) in kept.iter().filter(|(c, _)| *c != SHB_USERAPPL) {
            push_option(&mut b, *code, v, *code == OPT_COMMENT);
        }
        push_option(&mut b, SHB_USERAPPL, app.as_bytes(), true);
        push_option(&mut b, OPT_END, &[], false);
        let r = self.emit(SHB, &b);
        self.block = b;
        r
    }

    /// Write an Interface Description Block with `if_tsresol = 9` (ns).
    ///
    /// # Errors
    /// I/O errors of the underlying writer.
    pub fn interface(&mut self, idb: &Idb) -> io::Result<()> {
        let mut b = std::mem::take(&mut self.block);
        b.clear();
        b.extend_from_slice(&(idb.linktype as u16).to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&idb.snaplen.to_le_bytes());
        if let Some(name) = &idb.name {
            push_option(&mut b, IF_NAME, name.as_bytes(), true);
        }
        for (code, v) in &idb.options {
            if ![IF_NAME, IF_TSRESOL, IF_TSOFFSET].contains(code) {
                push_option(&mut b, *code, v, *code == OPT_COMMENT);
            }
        }
        push_option(&mut b, IF_TSRESOL, &[9], false);
        push_option(&mut b, OPT_END, &[], false);
        let r = self.emit(IDB, &b);
        self.block = b;
        r
    }

    /// Write an Enhanced Packet Block: interface `if_id`, timestamp `ts_ns`
    /// (ns since the epoch, in the IDB's `if_tsresol = 9` units), wire length
    /// `orig_len` bytes, captured `data`, the input's own options `kept`
    /// (its comments, `epb_flags`, …, in their order), then one
    /// `opt_comment` per entry of `comments`.
    ///
    /// # Errors
    /// I/O errors of the underlying writer; a packet over 4 GiB.
    pub fn packet(
        &mut self,
        if_id: u32,
        ts_ns: u64,
        orig_len: u32,
        data: &[u8],
        kept: &[(u16, Vec<u8>)],
        comments: &[String],
    ) -> io::Result<()> {
        let mut b = std::mem::take(&mut self.block);
        b.clear();
        let caplen =
            u32::try_from(data.len()).map_err(|_| io::Error::other("packet larger than 4 GiB"))?;
        b.extend_from_slice(&if_id.to_le_bytes());
        b.extend_from_slice(&((ts_ns >> 32) as u32).to_le_bytes());
        b.extend_from_slice(&(ts_ns as u32).to_le_bytes());
        b.extend_from_slice(&caplen.to_le_bytes());
        b.extend_from_slice(&orig_len.to_le_bytes());
        b.extend_from_slice(data);
        pad4(&mut b);
        if !comments.is_empty() || !kept.is_empty() {
            for (code, v) in kept {
                push_option(&mut b, *code, v, *code == OPT_COMMENT);
            }
            for c in comments {
                push_option(&mut b, OPT_COMMENT, c.as_bytes(), true);
            }
            push_option(&mut b, OPT_END, &[], false);
        }
        let r = self.emit(EPB, &b);
        self.block = b;
        r
    }

    /// Write a placeholder Custom Block (PEN 0) standing for a non-packet
    /// record of the input that Wireshark numbered as a frame.
    ///
    /// # Errors
    /// I/O errors of the underlying writer.
    pub fn placeholder(&mut self) -> io::Result<()> {
        let mut b = std::mem::take(&mut self.block);
        b.clear();
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(b"pcapsleuth: non-packet record not copied");
        pad4(&mut b);
        let r = self.emit(CUSTOM, &b);
        self.block = b;
        r
    }

    /// Flush and return the underlying writer.
    ///
    /// # Errors
    /// I/O errors of the flush.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u32_at(b: &[u8], off: usize) -> u32 {
        u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
    }

    #[test]
    fn epb_layout_and_padding() {
        let mut w = NgWriter::new(Vec::new());
        w.packet(1, 0x1_0000_0002, 60, &[1, 2, 3], &[], &["ab".to_string()])
            .unwrap();
        let b = w.finish().unwrap();
        // 12 framing + 20 header + 4 data (3 padded) + 8 comment + 4 end.
        assert_eq!(b.len(), 48);
        assert_eq!(u32_at(&b, 0), EPB);
        assert_eq!(u32_at(&b, 4), 48);
        assert_eq!(u32_at(&b, 44), 48);
        assert_eq!(u32_at(&b, 8), 1);
        assert_eq!(u32_at(&b, 12), 1, "ts high");
        assert_eq!(u32_at(&b, 16), 2, "ts low");
        assert_eq!(u32_at(&b, 20), 3, "caplen");
        assert_eq!(u32_at(&b, 24), 60, "orig_len");
        assert_eq!(&b[28..32], &[1, 2, 3, 0]);
        assert_eq!(&b[32..36], &[1, 0, 2, 0]);
        assert_eq!(&b[36..38], b"ab");
        assert_eq!(&b[40..44], &[0, 0, 0, 0]);
    }

    #[test]
    fn idb_has_ns_resolution() {
        let mut w = NgWriter::new(Vec::new());
        w.interface(&Idb {
            linktype: 276,
            snaplen: 262_144,
            name: Some("eth0".into()),
            options: Vec::new(),
        })
        .unwrap();
        let b = w.finish().unwrap();
        assert_eq!(b.len() % 4, 0);
        assert_eq!(u32_at(&b, 0), IDB);
        assert_eq!(u16::from_le_bytes([b[8], b[9]]), 276);
        assert_eq!(u32_at(&b, 12), 262_144);
        // if_name option then if_tsresol = 9.
        assert_eq!(&b[16..24], &[2, 0, 4, 0, b'e', b't', b'h', b'0']);
        assert_eq!(&b[24..29], &[9, 0, 1, 0, 9]);
    }

    #[test]
    fn long_comment_is_cut_on_char_boundary() {
        let mut b = Vec::new();
        let s = "é".repeat(40_000); // 80 000 bytes
        push_option(&mut b, OPT_COMMENT, s.as_bytes(), true);
        let len = u16::from_le_bytes([b[2], b[3]]) as usize;
        assert!(len <= MAX_OPTION_BYTES);
        assert!(std::str::from_utf8(&b[4..4 + len]).is_ok());
        assert_eq!(b.len() % 4, 0);
    }
}
