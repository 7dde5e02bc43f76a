//! Wire types of the JSON contract for facts that other crates compute: a
//! capture warning (from `pcapsleuth_ingest::CaptureWarning`) and a flow row
//! (from `pcapsleuth_flow::FlowSummary`).
//!
//! The report owns these types and converts from the internal ones with
//! [`From`], so a change to an internal struct (a new field, a renamed one)
//! does not change the JSON: the conversion stops compiling or simply does not
//! carry the new field until it is added here, to `docs/report.schema.json`
//! and to `CHANGELOG.md`. Field order is the JSON key order.

use pcapsleuth_flow::{ConnState, FlowSummary, RetransmissionCounts, RttStats, Sighting};
use pcapsleuth_ingest::{CaptureWarning, WarningKind};
use pcapsleuth_ledger::{CauseTime, StallEntry};
use serde::Serialize;

/// WARNING: a fact about the capture file that did not stop reading.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WarningReport {
    /// What happened.
    pub kind: WarningKindReport,
    /// Byte offset of the record concerned, from the start of the
    /// decompressed file.
    pub offset: u64,
    /// The frame number the record would have had, if known.
    pub frame: Option<u64>,
    /// Human-readable detail.
    pub message: String,
}

/// `kind` of a [`WarningReport`] (JSON: snake_case strings; new kinds may be
/// added).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningKindReport {
    /// The file ends in the middle of a record.
    TruncatedRecord,
    /// A record is malformed; reading stopped or skipped it.
    MalformedRecord,
    /// A packet refers to an interface with no description block.
    UnknownInterface,
    /// Not about the file: the flow table's unacknowledged-segment cap was
    /// hit in some flows (`offset` 0, `frame` null; the message names them),
    /// so their retransmission and loss analysis is incomplete.
    UnackedSegmentCap,
}

impl WarningKindReport {
    /// Whether the warning is about a record of the file (its `offset` means
    /// something), rather than about the analysis.
    pub fn is_about_a_record(self) -> bool {
        !matches!(self, WarningKindReport::UnackedSegmentCap)
    }
}

impl From<WarningKind> for WarningKindReport {
    fn from(k: WarningKind) -> Self {
        match k {
            WarningKind::TruncatedRecord => WarningKindReport::TruncatedRecord,
            WarningKind::MalformedRecord => WarningKindReport::MalformedRecord,
            WarningKind::UnknownInterface => WarningKindReport::UnknownInterface,
        }
    }
}

impl From<&CaptureWarning> for WarningReport {
    fn from(w: &CaptureWarning) -> Self {
        WarningReport {
            kind: w.kind.into(),
            offset: w.offset,
            frame: w.frame,
            message: w.message.clone(),
        }
    }
}

/// FLOW: one row of `pcapsleuth flows` (one `tcp.stream`). Durations are
/// floating-point milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowReport {
    /// `tcp.stream`.
    pub tcp_stream: u64,
    /// Client address (sent the first SYN, else the first packet seen).
    pub client: String,
    /// Client port.
    pub client_port: u16,
    /// Server address.
    pub server: String,
    /// Server port.
    pub server_port: u16,
    /// Packets both ways.
    pub packets: u64,
    /// IP bytes both ways.
    pub bytes: u64,
    /// Packets client → server.
    pub packets_c2s: u64,
    /// Packets server → client.
    pub packets_s2c: u64,
    /// TCP payload bytes client → server.
    pub payload_bytes_c2s: u64,
    /// TCP payload bytes server → client.
    pub payload_bytes_s2c: u64,
    /// First frame of the flow.
    pub first_frame: u64,
    /// Last frame of the flow.
    pub last_frame: u64,
    /// First to last packet, ms.
    pub duration_ms: f64,
    /// Zeek `conn_state`.
    pub state: ConnStateReport,
    /// Retransmissions by kind (our verdict).
    pub retransmissions: RetransmissionsReport,
    /// Packets that were other sightings of an already-seen packet.
    pub duplicate_sightings: u64,
    /// Per-interface sightings of duplicated packets (capped).
    pub sightings: Vec<SightingReport>,
    /// True if `sightings` hit its cap.
    pub sightings_capped: bool,
    /// Total time either side advertised a zero window, ms.
    pub zero_window_ms: f64,
    /// Zero-window episodes.
    pub zero_window_episodes: u64,
    /// SYN → SYN/ACK → ACK round trip at the capture point, ms.
    pub handshake_rtt_ms: Option<f64>,
    /// ACK RTT statistics (Karn's rule), ms.
    pub rtt_ms: Option<RttReport>,
    /// Longest stall, ms (0 when none).
    pub longest_stall_ms: f64,
    /// Frames bounding the longest stall, `[start, end]`.
    pub longest_stall_frames: Option<[u64; 2]>,
    /// MSS offered by client / server, bytes.
    pub mss: [Option<u16>; 2],
    /// Window scale (shift count) offered by client / server.
    pub window_scale: [Option<u8>; 2],
    /// True if the unacknowledged-segment list of either side hit its cap.
    pub unacked_capped: bool,
    /// The stall ledger of this flow (`pcapsleuth_ledger`, its README is the
    /// specification): every wait of either side longer than the ledger's
    /// threshold, each with one cause from a closed vocabulary and its
    /// evidence (timer, ladder step, expected and observed delay), in
    /// end-time order. Omitted when the flow never stalled (contract 1.1).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stalls: Vec<StallEntry>,
    /// Stalls of this flow beyond the ledger's per-flow cap: counted in
    /// `time_lost_by_cause` only. Omitted when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub stalls_dropped: u64,
    /// Time this flow lost per cause (ms, count), in the ledger's cause
    /// order. Omitted when the flow never stalled.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub time_lost_by_cause: Vec<CauseTime>,
    /// One sentence: "4.2 s of 4.5 s lost to 3 SYN retransmission
    /// timeouts". Omitted when the flow never stalled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stall_summary: Option<String>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// Zeek `conn_state` of a [`FlowReport`] (JSON: the Zeek code, e.g. `"SF"`).
#[allow(clippy::upper_case_acronyms)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ConnStateReport {
    /// Connection attempt seen, no reply.
    S0,
    /// Established, not terminated.
    S1,
    /// Normal establishment and termination.
    SF,
    /// Connection attempt rejected.
    REJ,
    /// Established, originator aborted (RST).
    RSTO,
    /// Established, responder aborted.
    RSTR,
    /// Originator sent SYN then RST, no SYN/ACK.
    RSTOS0,
    /// Responder sent SYN/ACK then RST, no SYN seen.
    RSTRH,
    /// Originator sent SYN then FIN, no SYN/ACK.
    SH,
    /// Responder sent SYN/ACK then FIN, no SYN seen.
    SHR,
    /// Established, originator closed, no reply FIN.
    S2,
    /// Established, responder closed, no originator FIN.
    S3,
    /// No SYN seen, just midstream traffic.
    OTH,
}

impl ConnStateReport {
    /// The Zeek code (`"SF"`), as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnStateReport::S0 => "S0",
            ConnStateReport::S1 => "S1",
            ConnStateReport::SF => "SF",
            ConnStateReport::REJ => "REJ",
            ConnStateReport::RSTO => "RSTO",
            ConnStateReport::RSTR => "RSTR",
            ConnStateReport::RSTOS0 => "RSTOS0",
            ConnStateReport::RSTRH => "RSTRH",
            ConnStateReport::SH => "SH",
            ConnStateReport::SHR => "SHR",
            ConnStateReport::S2 => "S2",
            ConnStateReport::S3 => "S3",
            ConnStateReport::OTH => "OTH",
        }
    }
}

impl From<ConnState> for ConnStateReport {
    fn from(s: ConnState) -> Self {
        match s {
            ConnState::S0 => ConnStateReport::S0,
            ConnState::S1 => ConnStateReport::S1,
            ConnState::SF => ConnStateReport::SF,
            ConnState::REJ => ConnStateReport::REJ,
            ConnState::RSTO => ConnStateReport::RSTO,
            ConnState::RSTR => ConnStateReport::RSTR,
            ConnState::RSTOS0 => ConnStateReport::RSTOS0,
            ConnState::RSTRH => ConnStateReport::RSTRH,
            ConnState::SH => ConnStateReport::SH,
            ConnState::SHR => ConnStateReport::SHR,
            ConnState::S2 => ConnStateReport::S2,
            ConnState::S3 => ConnStateReport::S3,
            ConnState::OTH => ConnStateReport::OTH,
        }
    }
}

/// `retransmissions` of a [`FlowReport`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct RetransmissionsReport {
    /// All retransmissions.
    pub total: u64,
    /// Timeout-driven (not fast, not spurious).
    pub rto: u64,
    /// Fast retransmissions.
    pub fast: u64,
    /// Spurious retransmissions.
    pub spurious: u64,
}

impl From<&RetransmissionCounts> for RetransmissionsReport {
    fn from(r: &RetransmissionCounts) -> Self {
        RetransmissionsReport {
            total: r.total,
            rto: r.rto,
            fast: r.fast,
            spurious: r.spurious,
        }
    }
}

/// One sighting of a duplicated packet (`sightings` of a [`FlowReport`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SightingReport {
    /// Frame number.
    pub frame: u64,
    /// Interface id.
    pub interface: u32,
    /// Timestamp, ns since the Unix epoch.
    pub ts_ns: i64,
}

impl From<&Sighting> for SightingReport {
    fn from(s: &Sighting) -> Self {
        SightingReport {
            frame: s.frame,
            interface: s.interface,
            ts_ns: s.ts_ns,
        }
    }
}

/// `rtt_ms` of a [`FlowReport`], ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RttReport {
    /// Minimum, ms.
    pub min: f64,
    /// Mean, ms.
    pub avg: f64,
    /// Maximum, ms.
    pub max: f64,
}

impl From<&RttStats> for RttReport {
    fn from(r: &RttStats) -> Self {
        RttReport {
            min: r.min,
            avg: r.avg,
            max: r.max,
        }
    }
}

impl From<&FlowSummary> for FlowReport {
    fn from(f: &FlowSummary) -> Self {
        FlowReport {
            tcp_stream: f.tcp_stream,
            client: f.client.clone(),
            client_port: f.client_port,
            server: f.server.clone(),
            server_port: f.server_port,
            packets: f.packets,
            bytes: f.bytes,
            packets_c2s: f.packets_c2s,
            packets_s2c: f.packets_s2c,
            payload_bytes_c2s: f.payload_bytes_c2s,
            payload_bytes_s2c: f.payload_bytes_s2c,
            first_frame: f.first_frame,
            last_frame: f.last_frame,
            duration_ms: f.duration_ms,
            state: f.state.into(),
            retransmissions: (&f.retransmissions).into(),
            duplicate_sightings: f.duplicate_sightings,
            sightings: f.sightings.iter().map(SightingReport::from).collect(),
            sightings_capped: f.sightings_capped,
            zero_window_ms: f.zero_window_ms,
            zero_window_episodes: f.zero_window_episodes,
            handshake_rtt_ms: f.handshake_rtt_ms,
            rtt_ms: f.rtt_ms.as_ref().map(RttReport::from),
            longest_stall_ms: f.longest_stall_ms,
            longest_stall_frames: f.longest_stall_frames,
            mss: f.mss,
            window_scale: f.window_scale,
            unacked_capped: f.unacked_capped,
            stalls: Vec::new(),
            stalls_dropped: 0,
            time_lost_by_cause: Vec::new(),
            stall_summary: None,
        }
    }
}
