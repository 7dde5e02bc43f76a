//! Streaming capture ingestion (the only crate that touches `pcap-parser`).
//!
//! [`CaptureReader`] reads legacy pcap (µs and ns magic, both byte orders) and
//! pcapng (several sections, several interfaces each with its own link type,
//! `if_tsresol`, `if_tsoffset`, `if_name`; EPB, SPB and obsolete PB) from any
//! [`std::io::Read`] with a bounded buffer, transparently gunzipping (flate2)
//! when the input starts with the gzip magic. Memory does not grow with file
//! size.
//!
//! Frames carry Wireshark's `frame.number` (1-based, file order across
//! interfaces) and integer-nanosecond timestamps. A capture cut off mid-record
//! ends the stream cleanly with a [`CaptureWarning`] of kind
//! [`WarningKind::TruncatedRecord`] naming the byte offset; everything before
//! the cut has already been delivered.
//!
//! Parity with tshark 4.0 (checked on the whole shared corpus by
//! `tests/tshark_frames.rs`):
//! - `frame.number` also counts pcapng records that are not packets (custom
//!   blocks 0xBAD/0x40000BAD, systemd journal export, sysdig events). They
//!   advance the number but are not returned, so returned numbers may skip;
//!   [`CaptureReader::frame_count`] is the total.
//! - Legacy pcap variants sharing a magic (SS990417, Nokia, SS991029,
//!   SS990915) are told apart from the first two record headers as
//!   Wireshark's `libpcap_try` does; pre-2.3 files have `caplen`/`len` swapped.
//! - Records larger than Wireshark's per-link-type maximum (262144 bytes for
//!   most) or with inconsistent pcapng block lengths end the stream with a
//!   [`WarningKind::MalformedRecord`] warning, as they end tshark's reading.
//!
//! Deliberate differences: interface ids are unique across pcapng sections
//! (tshark 4.0 prints the section-local id); simple packet blocks, which carry
//! no timestamp, get the previous packet's; timestamps beyond the `i64`
//! nanosecond range (year 2262) saturate; link-layer pseudo-headers (SunATM,
//! …) stay in [`Frame::data`], where Wireshark strips them from `frame.len`.

mod discover;
mod format;
mod legacy;
mod pcapng;
mod reader;

pub use discover::{capture_files_under, is_capture_file_name};
pub use pcapng::{ng_timestamp_ns, tsresol_units};
pub use reader::CaptureReader;

use pcapsleuth_core::{FrameNo, InterfaceId, Timestamp};
use serde::Serialize;
use std::path::PathBuf;

/// Container format of a capture file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CaptureFormat {
    /// Legacy libpcap format.
    Pcap,
    /// pcapng.
    Pcapng,
}

/// A link-layer header type (LINKTYPE_* number from tcpdump.org).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LinkType(pub u32);

impl LinkType {
    /// BSD loopback (`DLT_NULL`, 4-byte host-order AF).
    pub const NULL: LinkType = LinkType(0);
    /// Ethernet II / 802.3.
    pub const ETHERNET: LinkType = LinkType(1);
    /// Raw IP (DLT_RAW on most platforms).
    pub const RAW: LinkType = LinkType(101);
    /// OpenBSD loopback (4-byte network-order AF).
    pub const LOOP: LinkType = LinkType(108);
    /// Linux cooked capture v1.
    pub const LINUX_SLL: LinkType = LinkType(113);
    /// Raw IPv4.
    pub const IPV4: LinkType = LinkType(228);
    /// Raw IPv6.
    pub const IPV6: LinkType = LinkType(229);
    /// Linux cooked capture v2 (carries the interface index).
    pub const LINUX_SLL2: LinkType = LinkType(276);

    /// Upper-case name as used in the JSON report (`"ETHERNET"`, `"LINUX_SLL2"`,
    /// …), or `"LINKTYPE_<n>"` for types without a name here.
    pub fn name(self) -> String {
        let known = match self.0 {
            0 => "NULL",
            1 => "ETHERNET",
            101 => "RAW",
            108 => "LOOP",
            113 => "LINUX_SLL",
            127 => "IEEE802_11_RADIOTAP",
            105 => "IEEE802_11",
            192 => "PPI",
            228 => "IPV4",
            229 => "IPV6",
            239 => "NFLOG",
            276 => "LINUX_SLL2",
            9 => "PPP",
            50 => "PPP_HDLC",
            12 | 14 => "RAW",
            // Further types met in the shared corpus (names per tcpdump.org linktypes).
            6 => "IEEE802_5",
            10 => "FDDI",
            104 => "C_HDLC",
            107 => "FRELAY",
            117 => "PFLOG",
            123 => "SUNATM",
            147..=162 => return format!("USER{}", self.0 - 147),
            187 => "BLUETOOTH_HCI_H4",
            189 => "USB_LINUX",
            195 => "IEEE802_15_4_WITHFCS",
            220 => "USB_LINUX_MMAPPED",
            226 => "IPNET",
            227 => "CAN_SOCKETCAN",
            231 => "DBUS",
            242 => "IPOIB",
            249 => "USBPCAP",
            252 => "WIRESHARK_UPPER_PDU",
            253 => "NETLINK",
            258 => "PKTAP",
            271 => "VSOCK",
            274 => "ETHERNET_MPACKET",
            279 => "EBHSCR",
            281 => "DSA_TAG_BRCM",
            _ => return format!("LINKTYPE_{}", self.0),
        };
        known.to_string()
    }
}

/// One capture interface (one IDB of a pcapng, or the single implicit
/// interface of a legacy pcap).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceInfo {
    /// Interface index as used in [`Frame::interface`].
    pub id: InterfaceId,
    /// `if_name` option, if present.
    pub name: Option<String>,
    /// Link type of this interface.
    pub linktype: LinkType,
    /// Snapshot length in bytes (0 = unlimited).
    pub snaplen: u32,
    /// Capture statistics from the pcapng Interface Statistics Blocks of
    /// this interface read so far (`None` without one; always `None` for
    /// legacy pcap). Counters are cumulative from the start of the capture,
    /// so each counter is the one of the last ISB that carries it (an ISB
    /// without a counter does not erase an earlier one).
    pub stats: Option<InterfaceStats>,
}

/// Capture statistics of one interface: the options of a pcapng Interface
/// Statistics Block (draft-ietf-opsawg-pcapng §4.6; option codes 2–8 as
/// Wireshark's `wiretap/pcapng.c`). Each counter is `None` when the block
/// does not carry it. Packet counts are packets, not bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InterfaceStats {
    /// Timestamp of the block itself, ns since the Unix epoch (interface's
    /// `if_tsresol`/`if_tsoffset` applied).
    pub ts: Timestamp,
    /// `isb_starttime` (option 2): when the capture started, ns.
    pub start_ts: Option<Timestamp>,
    /// `isb_endtime` (option 3): when the capture ended, ns.
    pub end_ts: Option<Timestamp>,
    /// `isb_ifrecv` (option 4): packets received from the interface.
    pub if_recv: Option<u64>,
    /// `isb_ifdrop` (option 5): packets dropped by the interface (lack of
    /// resources, e.g. the kernel capture buffer: libpcap's `ps_drop`).
    pub if_drop: Option<u64>,
    /// `isb_filteraccept` (option 6): packets accepted by the capture filter.
    pub filter_accept: Option<u64>,
    /// `isb_osdrop` (option 7): packets dropped by the operating system.
    pub os_drop: Option<u64>,
    /// `isb_usrdeliv` (option 8): packets delivered to the capturing program.
    pub usr_deliv: Option<u64>,
}

/// One packet record.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// Wireshark `frame.number`.
    pub number: FrameNo,
    /// Capture timestamp, ns since the Unix epoch (with `if_tsoffset` applied).
    pub ts: Timestamp,
    /// Interface the frame was captured on.
    pub interface: InterfaceId,
    /// Link type of that interface.
    pub linktype: LinkType,
    /// Length on the wire in bytes (`frame.len`).
    pub orig_len: u32,
    /// Captured bytes (`frame.cap_len` == `data.len()`).
    pub data: &'a [u8],
}

/// What kind of problem a [`CaptureWarning`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    /// The file ends in the middle of a record (e.g. tcpdump was killed).
    TruncatedRecord,
    /// A record is malformed (bad length, unknown interface…); reading stopped or skipped it.
    MalformedRecord,
    /// A packet refers to an interface with no description block.
    UnknownInterface,
}

/// A fact about the capture file itself, reported rather than raised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CaptureWarning {
    /// What happened.
    pub kind: WarningKind,
    /// Byte offset of the record concerned, from the start of the (decompressed) file.
    pub offset: u64,
    /// Frame number the record would have had, if known.
    pub frame: Option<FrameNo>,
    /// Human-readable detail.
    pub message: String,
}

/// Fatal ingestion errors. Each names the file; none loses frames already returned.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// File concerned (`-` for stdin).
        path: PathBuf,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The input does not start with a pcap, pcapng or gzip magic number.
    #[error("{path}: not a pcap or pcapng capture (first bytes {magic})")]
    NotACapture {
        /// File concerned.
        path: PathBuf,
        /// Hex of the first bytes read.
        magic: String,
    },
    /// The header of the capture is malformed beyond recovery.
    #[error("{path}: malformed capture at byte offset {offset}: {message}")]
    Malformed {
        /// File concerned.
        path: PathBuf,
        /// Byte offset of the problem.
        offset: u64,
        /// What is wrong.
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::LinkType;

    #[test]
    fn linktype_names() {
        assert_eq!(LinkType::ETHERNET.name(), "ETHERNET");
        assert_eq!(LinkType::LINUX_SLL2.name(), "LINUX_SLL2");
        assert_eq!(LinkType(274).name(), "ETHERNET_MPACKET");
        assert_eq!(LinkType(150).name(), "USER3");
        assert_eq!(LinkType(9999).name(), "LINKTYPE_9999");
    }
}
