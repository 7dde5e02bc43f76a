//! Writing capture files in tests: legacy pcap ([`Pcap`]) and pcapng
//! ([`Pcapng`]), byte for byte as the format specifications lay them out.
//!
//! This is the one writer the tests use, both for hand-built edge cases of
//! the readers and for fixtures built inside a test. It writes exactly what
//! it is told (no validation), so a test can also build files that are wrong
//! on purpose (a packet for an undeclared interface, an odd record).
//!
//! Formats (all lengths in bytes, timestamps as the file stores them):
//! - legacy pcap (tcpdump.org `pcap-savefile(5)`, draft-ietf-opsawg-pcap):
//!   24-byte file header, version 2.4; µs (magic `0xa1b2c3d4`), ns
//!   (`0xa1b2_3c4d`) or Kuznetzov's "modified" format (`0xa1b2_cd34`, µs,
//!   24-byte record headers); either byte order.
//! - pcapng (draft-ietf-opsawg-pcapng): sections (SHB, version 1.0, section
//!   length -1), interface description blocks with `if_name`, `if_tsresol`,
//!   `if_tsoffset`, enhanced / simple packet blocks, interface statistics
//!   blocks and raw blocks of any type; either byte order.
//!
//! ```
//! use pcapsleuth_testkit::capture::{Interface, Pcap, Pcapng};
//! let pcap = Pcap::new(1).nanoseconds().packet(1_500_000_000, &[0u8; 14]).bytes();
//! assert_eq!(pcap.len(), 24 + 16 + 14);
//! let mut ng = Pcapng::little_endian();
//! ng.interface(&Interface::new(1).name("eth0").tsresol(9));
//! ng.epb(0, 1_500_000_000, &[0u8; 14], 14);
//! assert_eq!(&ng.bytes()[..4], &[0x0a, 0x0d, 0x0d, 0x0a]);
//! ```

use std::io;
use std::path::Path;

/// Legacy pcap magic, microsecond timestamps.
pub const PCAP_MAGIC_MICROSECONDS: u32 = 0xa1b2_c3d4;
/// Legacy pcap magic, nanosecond timestamps.
pub const PCAP_MAGIC_NANOSECONDS: u32 = 0xa1b2_3c4d;
/// Kuznetzov's "modified" pcap magic (µs, 24-byte record headers).
pub const PCAP_MAGIC_MODIFIED: u32 = 0xa1b2_cd34;

/// pcapng block types (draft-ietf-opsawg-pcapng §11.1).
pub mod block_type {
    /// Section header block.
    pub const SHB: u32 = 0x0A0D_0D0A;
    /// Interface description block.
    pub const IDB: u32 = 0x0000_0001;
    /// Simple packet block.
    pub const SPB: u32 = 0x0000_0003;
    /// Interface statistics block.
    pub const ISB: u32 = 0x0000_0005;
    /// Enhanced packet block.
    pub const EPB: u32 = 0x0000_0006;
    /// Custom block that may be copied.
    pub const CUSTOM: u32 = 0x0000_0BAD;
}

/// pcapng byte-order magic (in the SHB).
pub const PCAPNG_BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;

/// Write `value` in the chosen byte order.
fn put_u16(out: &mut Vec<u8>, big_endian: bool, value: u16) {
    out.extend_from_slice(&if big_endian {
        value.to_be_bytes()
    } else {
        value.to_le_bytes()
    });
}

/// Write `value` in the chosen byte order.
fn put_u32(out: &mut Vec<u8>, big_endian: bool, value: u32) {
    out.extend_from_slice(&if big_endian {
        value.to_be_bytes()
    } else {
        value.to_le_bytes()
    });
}

/// Write `value` in the chosen byte order.
fn put_u64(out: &mut Vec<u8>, big_endian: bool, value: u64) {
    out.extend_from_slice(&if big_endian {
        value.to_be_bytes()
    } else {
        value.to_le_bytes()
    });
}

/// Timestamp resolution and record layout of a legacy pcap file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PcapFormat {
    /// Standard format, µs fractions (magic `0xa1b2c3d4`).
    Microseconds,
    /// Standard format, ns fractions (magic `0xa1b23c4d`).
    Nanoseconds,
    /// Kuznetzov's patched format (magic `0xa1b2cd34`, µs): each record header
    /// is followed by ifindex (u32), protocol (u16), packet type (u8) and one
    /// pad byte; see [`Pcap::modified_packet`].
    Modified,
}

/// A legacy pcap file being built: header parameters (set by value, before
/// any record) plus the records appended so far (by `&mut`).
/// [`Pcap::bytes`] gives the file.
#[derive(Debug, Clone)]
pub struct Pcap {
    format: PcapFormat,
    big_endian: bool,
    snaplen: u32,
    linktype: u32,
    records: Vec<u8>,
}

impl Pcap {
    /// Little-endian, µs, snaplen 65535, link type `linktype` (a LINKTYPE_*
    /// number; the upper bits may carry FCS information), no records.
    pub fn new(linktype: u32) -> Self {
        Pcap {
            format: PcapFormat::Microseconds,
            big_endian: false,
            snaplen: 65_535,
            linktype,
            records: Vec::new(),
        }
    }

    /// Nanosecond timestamps (magic `0xa1b23c4d`). Set before adding records.
    pub fn nanoseconds(mut self) -> Self {
        self.format = PcapFormat::Nanoseconds;
        self
    }

    /// Kuznetzov's "modified" format; add records with
    /// [`Pcap::modified_packet`]. Set before adding records.
    pub fn modified(mut self) -> Self {
        self.format = PcapFormat::Modified;
        self
    }

    /// Big-endian ("swapped" on little-endian hosts). Set before adding records.
    pub fn big_endian(mut self) -> Self {
        self.big_endian = true;
        self
    }

    /// The header's snaplen in bytes (default 65535). Not enforced.
    pub fn snaplen(mut self, snaplen: u32) -> Self {
        self.snaplen = snaplen;
        self
    }

    /// Append a record whose captured bytes are the whole packet
    /// (`orig_len == data.len()`); `ts_ns` is ns since the epoch.
    pub fn packet(&mut self, ts_ns: i64, data: &[u8]) -> &mut Self {
        let orig_len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        self.cut_packet(ts_ns, data, orig_len)
    }

    /// Append a record of `data` captured from a packet of `orig_len` bytes
    /// on the wire (`orig_len` may be larger, as after a snaplen cut, or
    /// anything a test needs).
    pub fn cut_packet(&mut self, ts_ns: i64, data: &[u8], orig_len: u32) -> &mut Self {
        self.push_record_header(ts_ns, data.len(), orig_len);
        self.records.extend_from_slice(data);
        self
    }

    /// Append a record in the "modified" layout (see
    /// [`PcapFormat::Modified`]): the standard record header, then
    /// `ifindex`, `protocol` (an ethertype), `packet_type` and a pad byte.
    pub fn modified_packet(
        &mut self,
        ts_ns: i64,
        data: &[u8],
        ifindex: u32,
        protocol: u16,
        packet_type: u8,
    ) -> &mut Self {
        let orig_len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        self.push_record_header(ts_ns, data.len(), orig_len);
        put_u32(&mut self.records, self.big_endian, ifindex);
        put_u16(&mut self.records, self.big_endian, protocol);
        self.records.extend_from_slice(&[packet_type, 0]);
        self.records.extend_from_slice(data);
        self
    }

    /// The 16-byte standard part of a record header.
    fn push_record_header(&mut self, ts_ns: i64, caplen: usize, orig_len: u32) {
        let secs = ts_ns.div_euclid(1_000_000_000);
        let nanos = ts_ns.rem_euclid(1_000_000_000);
        let frac = match self.format {
            PcapFormat::Nanoseconds => nanos,
            PcapFormat::Microseconds | PcapFormat::Modified => nanos / 1_000,
        };
        let big_endian = self.big_endian;
        put_u32(&mut self.records, big_endian, secs as u32);
        put_u32(&mut self.records, big_endian, frac as u32);
        put_u32(
            &mut self.records,
            big_endian,
            u32::try_from(caplen).unwrap_or(u32::MAX),
        );
        put_u32(&mut self.records, big_endian, orig_len);
    }

    /// The 24-byte file header alone.
    pub fn header(&self) -> Vec<u8> {
        let magic = match self.format {
            PcapFormat::Microseconds => PCAP_MAGIC_MICROSECONDS,
            PcapFormat::Nanoseconds => PCAP_MAGIC_NANOSECONDS,
            PcapFormat::Modified => PCAP_MAGIC_MODIFIED,
        };
        let mut out = Vec::with_capacity(24);
        put_u32(&mut out, self.big_endian, magic);
        put_u16(&mut out, self.big_endian, 2);
        put_u16(&mut out, self.big_endian, 4);
        // thiszone (i32) and sigfigs: always 0.
        out.extend_from_slice(&[0; 8]);
        put_u32(&mut out, self.big_endian, self.snaplen);
        put_u32(&mut out, self.big_endian, self.linktype);
        out
    }

    /// The whole file: header, then the records in the order added.
    pub fn bytes(&self) -> Vec<u8> {
        let mut out = self.header();
        out.extend_from_slice(&self.records);
        out
    }

    /// Write the file to `path`.
    ///
    /// # Errors
    /// I/O errors creating or writing the file.
    pub fn write(&self, path: &Path) -> io::Result<()> {
        std::fs::write(path, self.bytes())
    }
}

/// An interface description block's fields and options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// LINKTYPE_* number.
    pub linktype: u16,
    /// Snaplen in bytes (0 = none).
    pub snaplen: u32,
    /// `if_name` option (code 2).
    pub name: Option<String>,
    /// `if_tsresol` option (code 9): 10^-n s, or 2^-n s with the top bit set;
    /// absent = µs.
    pub tsresol: Option<u8>,
    /// `if_tsoffset` option (code 14): seconds added to every timestamp.
    pub tsoffset_s: Option<i64>,
}

impl Interface {
    /// An interface of link type `linktype` with snaplen 0 and no options.
    pub fn new(linktype: u16) -> Self {
        Interface {
            linktype,
            snaplen: 0,
            name: None,
            tsresol: None,
            tsoffset_s: None,
        }
    }

    /// Set the snaplen (bytes).
    pub fn snaplen(mut self, snaplen: u32) -> Self {
        self.snaplen = snaplen;
        self
    }

    /// Set `if_name`.
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }

    /// Set `if_tsresol` (e.g. 9 for ns, `0x80 | 20` for 2^-20 s).
    pub fn tsresol(mut self, tsresol: u8) -> Self {
        self.tsresol = Some(tsresol);
        self
    }

    /// Set `if_tsoffset` in seconds.
    pub fn tsoffset_s(mut self, offset_s: i64) -> Self {
        self.tsoffset_s = Some(offset_s);
        self
    }
}

/// A pcapng file being built, block by block, in one byte order. Blocks are
/// appended in call order; nothing is written implicitly except by
/// [`Pcapng::little_endian`] / [`Pcapng::big_endian`], which start with a
/// section header block.
#[derive(Debug, Clone)]
pub struct Pcapng {
    big_endian: bool,
    out: Vec<u8>,
}

impl Pcapng {
    /// A little-endian file that starts with a section header block.
    pub fn little_endian() -> Self {
        Self::with_byte_order(false)
    }

    /// A big-endian file that starts with a section header block.
    pub fn big_endian() -> Self {
        Self::with_byte_order(true)
    }

    /// A file in the given byte order that starts with a section header block.
    pub fn with_byte_order(big_endian: bool) -> Self {
        let mut ng = Pcapng {
            big_endian,
            out: Vec::new(),
        };
        ng.section();
        ng
    }

    /// Bytes written so far (the offset the next block will start at).
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// True when nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// The file so far.
    pub fn bytes(&self) -> Vec<u8> {
        self.out.clone()
    }

    /// The file, consuming the writer.
    pub fn into_bytes(self) -> Vec<u8> {
        self.out
    }

    /// Write the file to `path`.
    ///
    /// # Errors
    /// I/O errors creating or writing the file.
    pub fn write(&self, path: &Path) -> io::Result<()> {
        std::fs::write(path, &self.out)
    }

    fn u16(&self, value: u16) -> Vec<u8> {
        let mut out = Vec::with_capacity(2);
        put_u16(&mut out, self.big_endian, value);
        out
    }

    fn u32(&self, value: u32) -> Vec<u8> {
        let mut out = Vec::with_capacity(4);
        put_u32(&mut out, self.big_endian, value);
        out
    }

    fn u64(&self, value: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(8);
        put_u64(&mut out, self.big_endian, value);
        out
    }

    /// A block of type `block_type` around `body` (padded to 4 bytes): type,
    /// total length, body, total length. Use it for block types without a
    /// helper (custom blocks, name resolution…).
    pub fn block(&mut self, block_type: u32, body: &[u8]) -> &mut Self {
        let mut body = body.to_vec();
        while !body.len().is_multiple_of(4) {
            body.push(0);
        }
        let total_len = u32::try_from(body.len() + 12).unwrap_or(u32::MAX);
        let (type_bytes, len_bytes) = (self.u32(block_type), self.u32(total_len));
        self.out.extend_from_slice(&type_bytes);
        self.out.extend_from_slice(&len_bytes);
        self.out.extend_from_slice(&body);
        self.out.extend_from_slice(&len_bytes);
        self
    }

    /// One option (code, length, value padded to 4 bytes).
    pub fn option(&self, code: u16, value: &[u8]) -> Vec<u8> {
        let mut out = self.u16(code);
        out.extend_from_slice(&self.u16(u16::try_from(value.len()).unwrap_or(u16::MAX)));
        out.extend_from_slice(value);
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
        out
    }

    /// A section header block (version 1.0, section length -1): starts a new
    /// section, whose interfaces are numbered from 0 again.
    pub fn section(&mut self) -> &mut Self {
        let mut body = self.u32(PCAPNG_BYTE_ORDER_MAGIC);
        body.extend_from_slice(&self.u16(1));
        body.extend_from_slice(&self.u16(0));
        body.extend_from_slice(&[0xff; 8]);
        self.block(block_type::SHB, &body)
    }

    /// An interface description block; options in the order `if_name`,
    /// `if_tsresol`, `if_tsoffset`, then `opt_endofopt`.
    pub fn interface(&mut self, interface: &Interface) -> &mut Self {
        let mut body = self.u16(interface.linktype);
        body.extend_from_slice(&[0, 0]);
        body.extend_from_slice(&self.u32(interface.snaplen));
        if let Some(name) = &interface.name {
            body.extend(self.option(2, name.as_bytes()));
        }
        if let Some(tsresol) = interface.tsresol {
            body.extend(self.option(9, &[tsresol]));
        }
        if let Some(offset_s) = interface.tsoffset_s {
            let value = if self.big_endian {
                offset_s.to_be_bytes()
            } else {
                offset_s.to_le_bytes()
            };
            body.extend(self.option(14, &value));
        }
        body.extend(self.option(0, &[]));
        self.block(block_type::IDB, &body)
    }

    /// An enhanced packet block on section-local interface `interface` at
    /// `ts` (in the interface's `if_tsresol` units), with the captured bytes
    /// `data` of a packet of `orig_len` bytes on the wire.
    pub fn epb(&mut self, interface: u32, ts: u64, data: &[u8], orig_len: u32) -> &mut Self {
        let mut body = self.u32(interface);
        body.extend_from_slice(&self.u32((ts >> 32) as u32));
        body.extend_from_slice(&self.u32(ts as u32));
        body.extend_from_slice(&self.u32(u32::try_from(data.len()).unwrap_or(u32::MAX)));
        body.extend_from_slice(&self.u32(orig_len));
        body.extend_from_slice(data);
        self.block(block_type::EPB, &body)
    }

    /// A simple packet block (interface 0 of the section, no timestamp) of a
    /// packet of `orig_len` bytes on the wire.
    pub fn spb(&mut self, orig_len: u32, data: &[u8]) -> &mut Self {
        let mut body = self.u32(orig_len);
        body.extend_from_slice(data);
        self.block(block_type::SPB, &body)
    }

    /// An interface statistics block for `interface` at `ts` (interface
    /// units) with the `isb_ifrecv` (code 4) and `isb_ifdrop` (code 5)
    /// packet counters when given.
    pub fn isb(
        &mut self,
        interface: u32,
        ts: u64,
        if_recv: Option<u64>,
        if_drop: Option<u64>,
    ) -> &mut Self {
        let mut body = self.u32(interface);
        body.extend_from_slice(&self.u32((ts >> 32) as u32));
        body.extend_from_slice(&self.u32(ts as u32));
        if let Some(received) = if_recv {
            body.extend(self.option(4, &self.u64(received)));
        }
        if let Some(dropped) = if_drop {
            body.extend(self.option(5, &self.u64(dropped)));
        }
        if if_recv.is_some() || if_drop.is_some() {
            body.extend(self.option(0, &[]));
        }
        self.block(block_type::ISB, &body)
    }
}
