//! What the reader loop asks of a container format: classify the record at
//! the read position ([`Layout::step`]). Shared helpers and limits live here.

use crate::legacy::{self, LegacyParams};
use crate::pcapng::{self, PcapngSection};
use crate::{InterfaceInfo, LinkType, WarningKind};
use pcapsleuth_core::{linktype, InterfaceId};

/// Largest record (bytes) the reader will buffer. A length field beyond this
/// is treated as corruption ([`WarningKind::MalformedRecord`]) rather than
/// allocated.
pub(crate) const MAX_RECORD: usize = 256 * 1024 * 1024;

/// Wireshark's default maximum packet size (`WTAP_MAX_PACKET_SIZE_STANDARD`,
/// wiretap/wtap.h), in bytes.
const WTAP_MAX_PACKET_SIZE_STANDARD: u32 = 262_144;

/// Largest captured length (bytes) Wireshark 4.0 accepts for a link type
/// (`wtap_max_snaplen_for_encap`, wiretap/wtap.c). A bigger record is
/// reported as corrupt there and ends the file, so we do the same to keep
/// `frame.number` parity.
pub(crate) fn max_caplen(linktype: u32) -> u32 {
    match u16::try_from(linktype) {
        Ok(linktype::DBUS | linktype::USBPCAP) => 128 * 1024 * 1024,
        Ok(linktype::EBHSCR) => 8 * 1024 * 1024,
        _ => WTAP_MAX_PACKET_SIZE_STANDARD,
    }
}

/// Read a `u32` at `off` with the given byte order; `None` if out of range.
pub(crate) fn read_u32(buf: &[u8], off: usize, big_endian: bool) -> Option<u32> {
    let bytes: [u8; 4] = buf.get(off..off.checked_add(4)?)?.try_into().ok()?;
    Some(if big_endian {
        u32::from_be_bytes(bytes)
    } else {
        u32::from_le_bytes(bytes)
    })
}

/// Read a `u16` at `off` with the given byte order; `None` if out of range.
pub(crate) fn read_u16(buf: &[u8], off: usize, big_endian: bool) -> Option<u16> {
    let bytes: [u8; 2] = buf.get(off..off.checked_add(2)?)?.try_into().ok()?;
    Some(if big_endian {
        u16::from_be_bytes(bytes)
    } else {
        u16::from_le_bytes(bytes)
    })
}

/// A packet found by [`Layout::step`]; offsets are relative to the record start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PacketRef {
    /// ns since the epoch.
    pub ts: i64,
    pub interface: InterfaceId,
    pub linktype: LinkType,
    /// Bytes on the wire.
    pub orig_len: u32,
    /// Offset of the packet bytes from the record start.
    pub data_off: usize,
    /// Captured bytes.
    pub data_len: usize,
}

/// What the format layer made of the bytes at the read position.
#[derive(Debug)]
pub(crate) enum Step {
    /// The file header (`len` bytes) was parsed.
    Header(usize),
    /// A packet record of `len` bytes.
    Packet(usize, PacketRef),
    /// A record of `len` bytes that Wireshark numbers as a frame but which
    /// carries no packet (pcapng custom, systemd journal and sysdig blocks).
    NonPacketFrame(usize),
    /// A record of `len` bytes with no frame (IDB, NRB, ISB, SHB, unknown…).
    Skip(usize),
    /// At least `bytes` bytes from the record start are needed; `frame` says
    /// whether the record would have been numbered as a frame.
    Need { bytes: usize, frame: bool },
    /// The record is corrupt; reading stops.
    Bad {
        kind: WarningKind,
        message: String,
        frame: bool,
    },
}

/// A [`Step::Bad`] of kind [`WarningKind::MalformedRecord`].
pub(crate) fn malformed(message: String, frame: bool) -> Step {
    Step::Bad {
        kind: WarningKind::MalformedRecord,
        message,
        frame,
    }
}

/// The container format and where we are in it.
#[derive(Debug, Clone)]
pub(crate) enum Layout {
    /// Before the legacy pcap file header.
    LegacyHeader,
    /// Legacy pcap records.
    Legacy(LegacyParams),
    /// Before the first pcapng SHB.
    PcapngHeader,
    /// pcapng blocks.
    Pcapng(PcapngSection),
}

impl Layout {
    /// Still parsing the file header (problems are then fatal errors).
    pub(crate) fn in_header(&self) -> bool {
        matches!(self, Layout::LegacyHeader | Layout::PcapngHeader)
    }

    /// Classify the record at the start of `input` (`eof`: no more bytes will
    /// follow), registering the interfaces it describes and pushing non-fatal
    /// notes.
    pub(crate) fn step(
        &mut self,
        input: &[u8],
        eof: bool,
        interfaces: &mut Vec<InterfaceInfo>,
        notes: &mut Vec<String>,
    ) -> Step {
        match self {
            Layout::LegacyHeader => match legacy::header(input, eof) {
                Ok((params, snaplen, len)) => {
                    interfaces.push(InterfaceInfo {
                        id: InterfaceId(0),
                        name: None,
                        linktype: params.linktype,
                        snaplen,
                        stats: None,
                    });
                    *self = Layout::Legacy(params);
                    Step::Header(len)
                }
                Err(step) => step,
            },
            Layout::Legacy(params) => legacy::record(params, input),
            Layout::PcapngHeader => {
                let mut section = PcapngSection::default();
                match pcapng::shb(&mut section, interfaces, input) {
                    Step::Skip(n) => {
                        *self = Layout::Pcapng(section);
                        Step::Header(n)
                    }
                    other => other,
                }
            }
            Layout::Pcapng(section) => pcapng::block(section, interfaces, notes, input),
        }
    }
}
