//! The streaming reader.
//!
//! Design: one byte buffer (`buf[start..end]` holds unread input, `base` is the
//! file offset of `buf[0]`) and one loop ([`CaptureReader::advance`]) that asks
//! the format layer ([`Layout::step`]) to classify the next record. The layer
//! either consumes a whole record or says how many bytes it needs; the loop
//! then refills, compacting and growing the buffer only up to the size of that
//! one record (capped at [`MAX_RECORD`]). A packet's bytes are returned as a
//! slice of the buffer, so the hot path does not allocate.

use crate::format::{Layout, PacketRef, Step, MAX_RECORD};
use crate::pcapng::block;
use crate::{
    legacy, CaptureFormat, CaptureWarning, Frame, IngestError, InterfaceInfo, WarningKind,
};
use pcapsleuth_core::{FrameNo, Timestamp};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Initial buffer size in bytes. The buffer grows only when one record is
/// larger than this.
const INITIAL_BUF: usize = 256 * 1024;

/// Streaming reader over one capture file. Use it as a lending iterator:
///
/// ```no_run
/// # use pcapsleuth_ingest::CaptureReader;
/// let mut r = CaptureReader::open("x.pcap".as_ref()).unwrap();
/// while let Some(frame) = r.next_frame().unwrap() {
///     let _ = frame.number;
/// }
/// for w in r.warnings() { eprintln!("{}", w.message); }
/// ```
///
/// Frame numbering follows Wireshark 4.0's `frame.number`: besides packet
/// records (legacy records, pcapng EPB/SPB/PB), pcapng custom blocks
/// (0xBAD, 0x40000BAD), systemd journal export blocks and sysdig event
/// blocks are numbered too. Those non-packet records advance the number but
/// are **not** returned by [`CaptureReader::next_frame`], so frame numbers
/// may skip; [`CaptureReader::frame_count`] gives the total.
///
/// Interface ids are unique across the file: the n-th interface description
/// block of the file (counting across pcapng sections) is interface `n-1`.
/// (tshark 4.0 prints the section-local id in `frame.interface_id`; the two
/// agree for single-section files.)
///
/// pcapng simple packet blocks carry no timestamp; they get the timestamp of
/// the previous packet of the file (0 if none).
pub struct CaptureReader {
    path: PathBuf,
    src: Box<dyn Read + Send>,
    buf: Vec<u8>,
    /// Unread input is `buf[start..end]`.
    start: usize,
    end: usize,
    /// File offset (decompressed) of `buf[0]`.
    base: u64,
    eof: bool,
    done: bool,
    layout: Layout,
    frame_no: FrameNo,
    interfaces: Vec<InterfaceInfo>,
    warnings: Vec<crate::CaptureWarning>,
    /// Non-fatal notes from the format layer, turned into warnings.
    notes: Vec<String>,
    format: CaptureFormat,
    /// The gzip stream ended before its end (no trailer): the file was cut.
    gzip_cut: bool,
    /// Index in `warnings` of the warning that ended reading before the end
    /// of the input.
    stopped: Option<usize>,
    /// `buf[record.0..record.0 + record.1]` is the record of the packet last
    /// returned by `next_frame` (valid until the next call).
    record: (usize, usize),
    /// Raw pcapng section header and interface description blocks, in file
    /// order (see [`CaptureReader::header_blocks`]).
    header_blocks: Vec<Vec<u8>>,
}

impl CaptureReader {
    /// Open a file (`-` means stdin). Detects gzip, pcap and pcapng by magic.
    ///
    /// # Errors
    /// [`IngestError::Io`] if it cannot be opened, [`IngestError::NotACapture`]
    /// if the magic is wrong, [`IngestError::Malformed`] if the header is unreadable.
    pub fn open(path: &Path) -> Result<CaptureReader, IngestError> {
        if path == Path::new("-") {
            return Self::from_reader(path, Box::new(std::io::stdin()));
        }
        let f = std::fs::File::open(path).map_err(|source| IngestError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_reader(path, Box::new(f))
    }

    /// Read a capture from any reader; `path` is only used in messages.
    /// Input starting with the gzip magic (`1f 8b`) is decompressed on the fly
    /// (concatenated gzip members are read as one stream).
    ///
    /// # Errors
    /// As [`CaptureReader::open`].
    pub fn from_reader(
        path: &Path,
        mut inner: Box<dyn Read + Send>,
    ) -> Result<CaptureReader, IngestError> {
        let io_err = |source| IngestError::Io {
            path: path.to_path_buf(),
            source,
        };
        // Sniff the gzip magic on the raw stream.
        let mut head = [0u8; 2];
        let mut got = 0;
        while got < head.len() {
            match inner.read(&mut head[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(e)),
            }
        }
        let head = head.get(..got).unwrap_or_default().to_vec();
        let gzip = head == [0x1f, 0x8b];
        let raw: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(head).chain(inner));
        let src: Box<dyn Read + Send> = if gzip {
            Box::new(flate2::read::MultiGzDecoder::new(raw))
        } else {
            raw
        };
        let mut r = CaptureReader {
            path: path.to_path_buf(),
            src,
            buf: Vec::new(),
            start: 0,
            end: 0,
            base: 0,
            eof: false,
            done: false,
            layout: Layout::LegacyHeader,
            frame_no: FrameNo(0),
            interfaces: Vec::new(),
            warnings: Vec::new(),
            notes: Vec::new(),
            format: CaptureFormat::Pcap,
            gzip_cut: false,
            stopped: None,
            record: (0, 0),
            header_blocks: Vec::new(),
        };
        r.fill(4)?;
        let magic = r.buf.get(r.start..r.end.min(4)).unwrap_or_default();
        let le = magic.try_into().map(u32::from_le_bytes).unwrap_or(0);
        match le {
            block::SHB => {
                r.layout = Layout::PcapngHeader;
                r.format = CaptureFormat::Pcapng;
            }
            x if legacy::is_magic(x) => {}
            _ => {
                let shown: Vec<String> = magic.iter().map(|b| format!("{b:02x}")).collect();
                let mut shown = if shown.is_empty() {
                    "(empty file)".to_string()
                } else {
                    shown.join(" ")
                };
                if gzip {
                    shown.push_str(" after gunzip");
                }
                return Err(IngestError::NotACapture {
                    path: path.to_path_buf(),
                    magic: shown,
                });
            }
        }
        // Parse the file header (legacy header or first SHB) eagerly.
        r.advance()?;
        Ok(r)
    }

    /// Make at least `need` bytes available at `buf[start..]` (`need` ≤
    /// [`MAX_RECORD`]), compacting and growing the buffer as data arrives:
    /// the buffer doubles only when it is full, so a bogus huge length field
    /// in a small file costs no more memory than the file. Returns `false` if
    /// the input ended first.
    fn fill(&mut self, need: usize) -> Result<bool, IngestError> {
        if self.end - self.start >= need {
            return Ok(true);
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.base += self.start as u64;
            self.end -= self.start;
            self.start = 0;
        }
        while self.end < need {
            if self.eof {
                return Ok(false);
            }
            if self.end == self.buf.len() {
                let size = (self.buf.len() * 2).clamp(INITIAL_BUF, need.max(INITIAL_BUF));
                self.buf.resize(size, 0);
            }
            let spare = self.buf.get_mut(self.end..).unwrap_or_default();
            let spare_len = spare.len();
            match self.src.read(spare) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n.min(spare_len),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // A gzip stream cut short: the capture inside is truncated.
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    self.eof = true;
                    self.gzip_cut = true;
                }
                Err(source) => {
                    return Err(IngestError::Io {
                        path: self.path.clone(),
                        source,
                    })
                }
            }
        }
        Ok(true)
    }

    /// [`Self::warn`] for the problem that ends reading here.
    fn stop(&mut self, kind: WarningKind, offset: u64, frame: Option<FrameNo>, message: String) {
        self.done = true;
        self.stopped = Some(self.warnings.len());
        self.warn(kind, offset, frame, message);
    }

    fn warn(&mut self, kind: WarningKind, offset: u64, frame: Option<FrameNo>, message: String) {
        self.warnings.push(CaptureWarning {
            kind,
            offset,
            frame,
            message,
        });
    }

    /// The read loop: consume records until a packet, the end, or a fatal
    /// problem. Header problems are errors; later ones end the stream with a
    /// warning.
    fn advance(&mut self) -> Result<Option<PacketRef>, IngestError> {
        loop {
            if self.done {
                return Ok(None);
            }
            let offset = self.base + self.start as u64;
            let avail = self.buf.get(self.start..self.end).unwrap_or_default();
            let in_header = self.layout.in_header();
            let step = self
                .layout
                .step(avail, self.eof, &mut self.interfaces, &mut self.notes);
            let avail_len = avail.len();
            for note in std::mem::take(&mut self.notes) {
                self.warn(WarningKind::MalformedRecord, offset, None, note);
            }
            let next = self.frame_no.next();
            if let Step::Header(len) | Step::Skip(len) = step {
                self.keep_header_block(len);
            }
            match step {
                Step::Header(len) => {
                    self.start += len;
                    return Ok(None);
                }
                Step::Packet(len, mut p) => {
                    self.record = (self.start, len);
                    p.data_off += self.start;
                    self.start += len;
                    self.frame_no = next;
                    return Ok(Some(p));
                }
                Step::NonPacketFrame(len) => {
                    self.start += len;
                    self.frame_no = next;
                }
                Step::Skip(len) if len > 0 => self.start += len,
                Step::Skip(_) => {
                    self.stop(
                        WarningKind::MalformedRecord,
                        offset,
                        None,
                        "internal: empty record".to_string(),
                    );
                }
                Step::Need { bytes, frame } => {
                    if bytes <= avail_len || bytes > MAX_RECORD {
                        // Guard against spinning: a parser asking for bytes it
                        // already has, or for an absurd amount, is corruption.
                        let message =
                            format!("record needs {bytes} bytes, which is not a plausible length");
                        if in_header {
                            return Err(self.malformed(offset, message));
                        }
                        self.stop(
                            WarningKind::MalformedRecord,
                            offset,
                            frame.then_some(next),
                            message,
                        );
                    } else if !self.eof {
                        // Refill and look again (at EOF the step may decide
                        // differently, e.g. legacy variant detection).
                        self.fill(bytes)?;
                    } else {
                        self.done = true;
                        if self.start == self.end {
                            if self.gzip_cut {
                                // Cut on a record boundary: no record is
                                // short, but the gzip stream is.
                                self.stop(
                                    WarningKind::TruncatedRecord,
                                    offset,
                                    None,
                                    format!("capture cut short: the gzip stream ends before its end (incomplete gzip member, no trailer) after {offset} bytes of capture; the rest of the capture is missing"),
                                );
                            }
                            return Ok(None);
                        }
                        let have = self.end - self.start;
                        let message = format!(
                            "capture cut short: record at byte {offset} needs {bytes} bytes, only {have} present"
                        );
                        if in_header {
                            return Err(self.malformed(offset, message));
                        }
                        self.stop(
                            WarningKind::TruncatedRecord,
                            offset,
                            frame.then_some(next),
                            message,
                        );
                    }
                }
                Step::Bad {
                    kind,
                    message,
                    frame,
                } => {
                    if in_header {
                        return Err(self.malformed(offset, message));
                    }
                    self.stop(kind, offset, frame.then_some(next), message);
                }
            }
        }
    }

    /// Keep a copy of the pcapng SHB or IDB of `len` bytes at the read
    /// position (for [`CaptureReader::header_blocks`]).
    fn keep_header_block(&mut self, len: usize) {
        if self.format != CaptureFormat::Pcapng {
            return;
        }
        let Some(b) = self.buf.get(self.start..self.start.saturating_add(len)) else {
            return;
        };
        // SHB type is byte-order neutral; IDB type 1 reads as 1 in either order.
        let shb = b.get(..4) == Some(&block::SHB.to_le_bytes()[..]);
        let idb = matches!(b.get(..4), Some([1, 0, 0, 0] | [0, 0, 0, 1]));
        if shb || idb {
            self.header_blocks.push(b.to_vec());
        }
    }

    fn malformed(&self, offset: u64, message: String) -> IngestError {
        IngestError::Malformed {
            path: self.path.clone(),
            offset,
            message,
        }
    }

    /// The next packet record, `Ok(None)` at the end of the capture (including
    /// a truncated end, which adds a warning).
    ///
    /// # Errors
    /// Only I/O errors of the underlying reader.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, IngestError> {
        let Some(p) = self.advance()? else {
            return Ok(None);
        };
        let data = self
            .buf
            .get(p.data_off..p.data_off + p.data_len)
            .unwrap_or_default();
        Ok(Some(Frame {
            number: self.frame_no,
            ts: Timestamp(p.ts),
            interface: p.interface,
            linktype: p.linktype,
            orig_len: p.orig_len,
            data,
        }))
    }

    /// Number of records numbered as frames so far (Wireshark's `frame.number`
    /// of the last one); after the end, the capture's frame count.
    pub fn frame_count(&self) -> FrameNo {
        self.frame_no
    }

    /// Interfaces described so far (all of them once the stream has ended).
    pub fn interfaces(&self) -> &[InterfaceInfo] {
        &self.interfaces
    }

    /// Facts about the file recorded while reading (truncation, bad records).
    pub fn warnings(&self) -> &[CaptureWarning] {
        &self.warnings
    }

    /// The warning (in [`Self::warnings`]) of the problem that ended reading
    /// before the end of the input — a record cut short (also a gzip stream
    /// without its end) or malformed — so the frames after it were not read.
    /// `None` while reading, and after a complete read.
    pub fn stop_warning(&self) -> Option<&CaptureWarning> {
        self.stopped.and_then(|i| self.warnings.get(i))
    }

    /// The raw bytes of the record of the frame last returned by
    /// [`Self::next_frame`], in the file's byte order: for pcapng the whole
    /// block (type, length, body with its options, trailing length), for
    /// legacy pcap the record header and data. Empty before the first frame.
    /// Lets a writer copy options (`opt_comment`, `epb_flags`, …) that the
    /// [`Frame`] does not model (used by `pcapsleuth annotate`).
    pub fn record_bytes(&self) -> &[u8] {
        self.buf
            .get(self.record.0..self.record.0.saturating_add(self.record.1))
            .unwrap_or_default()
    }

    /// Copies of the pcapng Section Header and Interface Description Blocks
    /// read so far, whole and in file order (SHB type `0x0A0D0D0A`, IDB type
    /// 1, each in its section's byte order). Empty for legacy pcap. Lets a
    /// writer keep section comments and interface options.
    pub fn header_blocks(&self) -> &[Vec<u8>] {
        &self.header_blocks
    }

    /// pcap or pcapng.
    pub fn format(&self) -> CaptureFormat {
        self.format
    }

    /// The path given at open.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
