//! Serializable report types: the JSON wire format.

use crate::wire::{CaptureQualityReport, FlowReport, WarningReport};
use pcapsleuth_core::Finding;
use serde::{Deserialize, Serialize};

/// Current JSON schema version.
pub const SCHEMA_VERSION: u32 = 1;

/// The version of pcapsleuth that renders a report (the workspace version):
/// `pcapsleuth_version` in JSON (since 1.1), the footer of Markdown and HTML.
pub const TOOL_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The whole report: one entry per input capture, in input order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// Always [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// One per input, in input order.
    pub captures: Vec<CaptureReport>,
}

/// One capture interface.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InterfaceReport {
    /// Interface id (IDB index).
    pub id: u32,
    /// `if_name`, if recorded.
    pub name: Option<String>,
    /// Link type name (`"ETHERNET"`, `"LINUX_SLL2"`…).
    pub linktype: String,
}

/// Results for one capture file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaptureReport {
    /// Path as given on the command line.
    pub path: String,
    /// `"pcap"` or `"pcapng"`; `null` when the file could not be read at all.
    pub format: Option<String>,
    /// Packet records read (highest frame number).
    pub packets: u64,
    /// Timestamp of the first frame, ns since the Unix epoch (0 if none).
    pub first_ts_ns: i64,
    /// Timestamp of the last frame, ns (0 if none).
    pub last_ts_ns: i64,
    /// Interfaces.
    pub interfaces: Vec<InterfaceReport>,
    /// TCP streams (`tcp.stream` ids assigned).
    pub tcp_streams: u64,
    /// Facts about the file (truncation…).
    pub warnings: Vec<WarningReport>,
    /// Fatal error that stopped reading this file, if any (findings before it are kept).
    pub error: Option<String>,
    /// Only when reading stopped before the end of the input without an
    /// `error` — a record cut short (also a gzip stream without its end) or
    /// malformed — so the frames after it were not analysed: the warning
    /// (also in `warnings`) saying what and where. Omitted for a complete read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<WarningReport>,
    /// What the capture itself lost, cut, doubled or reordered, and the
    /// verdict (contract 1.1); `null` when the file could not be read at
    /// all (as `format`).
    pub capture_quality: Option<CaptureQualityReport>,
    /// Findings, sorted by first frame then detector. Each is serialised
    /// with its `community_id` (since 1.1) appended when it has one.
    #[serde(serialize_with = "crate::json::serialize_findings")]
    pub findings: Vec<Finding>,
    /// Per-flow summaries (only filled for `pcapsleuth flows`; omitted from `analyze` JSON).
    /// Not read back by `report merge` (an `analyze` report has none).
    #[serde(default, skip_deserializing, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowReport>,
    /// Only for a merged capture set (`--merge`): the files merged, in input
    /// order. Empty (and omitted from JSON) for a single capture.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceReport>,
}

/// One input file of a merged capture set (`analyze --merge`).
///
/// Frames of the set are interleaved by timestamp exactly as
/// `mergecap -w merged.pcapng <files…>` does, so the set's frame numbers are
/// those of that mergecap output; each file's interfaces get ids after those
/// of the files before it (as with `mergecap -I none`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SourceReport {
    /// Path as given on the command line.
    pub path: String,
    /// `"pcap"` or `"pcapng"`; `null` when the file could not be read at all.
    pub format: Option<String>,
    /// Frames (Wireshark `frame.number`s) of this file.
    pub packets: u64,
    /// This file's interfaces, with their ids **in the merged set**.
    pub interfaces: Vec<InterfaceReport>,
    /// Facts about this file; `offset` and `frame` refer to this file.
    pub warnings: Vec<WarningReport>,
    /// Fatal error that stopped reading this file, if any.
    pub error: Option<String>,
    /// As [`CaptureReport::incomplete`], for this file (`offset` and `frame`
    /// relative to it). Omitted for a complete read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<WarningReport>,
}
