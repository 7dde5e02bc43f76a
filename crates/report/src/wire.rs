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
use serde::{Deserialize, Serialize};

/// WARNING: a fact about the capture file that did not stop reading.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Not about the file (since 1.2): the flow table's live-stream cap
    /// (`--max-flows`) was hit and the least recently active streams were
    /// retired early (`offset` 0, `frame` null; the message says how many).
    FlowCap,
    /// Not about the file (since 1.2): a detector reached one of its
    /// capture-wide memory bounds and did not examine the rest of the
    /// capture for that concern (`offset` 0, `frame` the frame where it
    /// reached it; the message names the detector, the bound and how many
    /// times it refused something after it, and what that costs its
    /// findings: for most, that they say nothing about what was refused).
    DetectorLimit,
}

impl WarningKindReport {
    /// Whether the warning is about a record of the file (its `offset` means
    /// something), rather than about the analysis.
    pub fn is_about_a_record(self) -> bool {
        !matches!(
            self,
            WarningKindReport::UnackedSegmentCap
                | WarningKindReport::FlowCap
                | WarningKindReport::DetectorLimit
        )
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
            frame: w.frame.map(u64::from),
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
    /// What the capture lost, cut or doubled of this flow (contract 1.1).
    /// Omitted when the flow has nothing to report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture_quality: Option<FlowQualityReport>,
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
            frame: s.frame.get(),
            interface: s.interface.get(),
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
            tcp_stream: f.tcp_stream.get(),
            client: f.client.to_string(),
            client_port: f.client_port,
            server: f.server.to_string(),
            server_port: f.server_port,
            packets: f.packets,
            bytes: f.bytes,
            packets_c2s: f.packets_c2s,
            packets_s2c: f.packets_s2c,
            payload_bytes_c2s: f.payload_bytes_c2s,
            payload_bytes_s2c: f.payload_bytes_s2c,
            first_frame: f.first_frame.get(),
            last_frame: f.last_frame.get(),
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
            longest_stall_frames: f.longest_stall_frames.map(|p| p.map(u64::from)),
            mss: f.mss,
            window_scale: f.window_scale,
            unacked_capped: f.unacked_capped,
            stalls: Vec::new(),
            stalls_dropped: 0,
            time_lost_by_cause: Vec::new(),
            stall_summary: None,
            capture_quality: None,
        }
    }
}

/// `verdict` of a [`CaptureQualityReport`] and of each of its reasons
/// (JSON: snake_case strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QualityVerdictReport {
    /// Nothing found that would make a diagnosis doubtful.
    Trustworthy,
    /// Findings hold, but a finding about loss, timing or a missing
    /// direction may be the capture's doing (the reasons say which).
    UseWithCare,
    /// Loss and timing findings are more likely the capture's than the
    /// network's.
    NotTrustworthy,
}

impl QualityVerdictReport {
    /// `"trustworthy"` / `"use_with_care"` / `"not_trustworthy"`, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            QualityVerdictReport::Trustworthy => "trustworthy",
            QualityVerdictReport::UseWithCare => "use_with_care",
            QualityVerdictReport::NotTrustworthy => "not_trustworthy",
        }
    }
}

/// One reason of a [`CaptureQualityReport`] (JSON: an object whose `kind`
/// names the variant in snake_case, then `verdict`, then the counts; new
/// kinds may be added).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum QualityReasonReport {
    /// The capture dropped packets on an interface (pcapng ISB `isb_ifdrop`
    /// + `isb_osdrop`).
    InterfaceDrops {
        /// What this reason alone makes of the capture.
        verdict: QualityVerdictReport,
        /// Interface id.
        interface: u32,
        /// Packets dropped.
        dropped: u64,
        /// Frames captured on the interface.
        captured: u64,
    },
    /// Bytes acknowledged by the receiver that no captured frame carried.
    CaptureLoss {
        /// What this reason alone makes of the capture.
        verdict: QualityVerdictReport,
        /// Flows with such bytes.
        flows: u64,
        /// Bytes acknowledged, never captured.
        bytes: u64,
        /// TCP payload bytes captured.
        captured_bytes: u64,
    },
    /// snaplen cut frames inside a header.
    HeadersTruncated {
        /// What this reason alone makes of the capture.
        verdict: QualityVerdictReport,
        /// Frames cut inside a header.
        frames: u64,
        /// All frames.
        of_frames: u64,
    },
    /// snaplen cut DNS messages (UDP port 53) before the end of their first
    /// question: the DNS detectors could not read them.
    DnsTruncated {
        /// What this reason alone makes of the capture.
        verdict: QualityVerdictReport,
        /// DNS messages cut before the end of their first question.
        frames: u64,
        /// All DNS messages.
        of_frames: u64,
    },
    /// snaplen cut ICMP errors inside their quote, before the quoted
    /// ports: which flow they are about is unknown.
    IcmpQuoteTruncated {
        /// What this reason alone makes of the capture.
        verdict: QualityVerdictReport,
        /// ICMP errors whose quote was cut before its ports.
        frames: u64,
        /// All ICMP errors.
        of_frames: u64,
    },
    /// TCP flows captured in one direction only, whose captured side
    /// acknowledges the other's bytes.
    OneSidedFlows {
        /// What this reason alone makes of the capture.
        verdict: QualityVerdictReport,
        /// One-sided flows.
        flows: u64,
        /// All TCP flows.
        of_flows: u64,
    },
    /// Timestamps going backwards on one interface.
    TimestampsBackwards {
        /// What this reason alone makes of the capture.
        verdict: QualityVerdictReport,
        /// Interface id.
        interface: u32,
        /// Frames older than the previous frame on the interface.
        frames: u64,
        /// Largest step back, ns.
        max_back_ns: i64,
    },
    /// The same packet captured twice on the same interface.
    SameInterfaceDuplicates {
        /// What this reason alone makes of the capture.
        verdict: QualityVerdictReport,
        /// Frames that were another sighting on the same interface.
        frames: u64,
    },
    /// Reading stopped before the end of the input (`incomplete` or `error`).
    ReadIncomplete {
        /// What this reason alone makes of the capture.
        verdict: QualityVerdictReport,
        /// Frames read.
        frames: u64,
    },
}

impl QualityReasonReport {
    /// The reason's `verdict`.
    pub fn verdict(&self) -> QualityVerdictReport {
        match *self {
            QualityReasonReport::InterfaceDrops { verdict, .. }
            | QualityReasonReport::CaptureLoss { verdict, .. }
            | QualityReasonReport::HeadersTruncated { verdict, .. }
            | QualityReasonReport::DnsTruncated { verdict, .. }
            | QualityReasonReport::IcmpQuoteTruncated { verdict, .. }
            | QualityReasonReport::OneSidedFlows { verdict, .. }
            | QualityReasonReport::TimestampsBackwards { verdict, .. }
            | QualityReasonReport::SameInterfaceDuplicates { verdict, .. }
            | QualityReasonReport::ReadIncomplete { verdict, .. } => verdict,
        }
    }

    /// A short phrase for the text and Markdown reports ("capture lost
    /// 1448 B in 2 flows").
    pub fn describe(&self) -> String {
        let plural = |n: u64| if n == 1 { "" } else { "s" };
        match *self {
            QualityReasonReport::InterfaceDrops {
                interface,
                dropped,
                captured,
                ..
            } => format!(
                "interface {interface} dropped {dropped} packet{} (captured {captured})",
                plural(dropped)
            ),
            QualityReasonReport::CaptureLoss {
                flows,
                bytes,
                captured_bytes,
                ..
            } => format!(
                "{bytes} B acknowledged but never captured in {flows} flow{} (captured {captured_bytes} B)",
                plural(flows)
            ),
            QualityReasonReport::HeadersTruncated {
                frames, of_frames, ..
            } => format!("snaplen cut headers of {frames} of {of_frames} frames"),
            QualityReasonReport::DnsTruncated {
                frames, of_frames, ..
            } => format!(
                "snaplen cut {frames} of {of_frames} DNS messages before their question (their lookups are not examined)"
            ),
            QualityReasonReport::IcmpQuoteTruncated {
                frames, of_frames, ..
            } => format!(
                "snaplen cut the quoted packet of {frames} of {of_frames} ICMP errors before its ports (their flows are not known)"
            ),
            QualityReasonReport::OneSidedFlows {
                flows, of_flows, ..
            } => format!("{flows} of {of_flows} TCP flows captured one way only"),
            QualityReasonReport::TimestampsBackwards {
                interface,
                frames,
                max_back_ns,
                ..
            } => format!(
                "timestamps went backwards {frames} time{} on interface {interface} (up to {})",
                plural(frames),
                crate::time::format_duration_s(max_back_ns)
            ),
            QualityReasonReport::SameInterfaceDuplicates { frames, .. } => format!(
                "{frames} frame{} captured twice on the same interface",
                plural(frames)
            ),
            QualityReasonReport::ReadIncomplete { frames, .. } => {
                format!("reading stopped early, after {frames} frames")
            }
        }
    }
}

/// One interface of a [`CaptureQualityReport`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceQualityReport {
    /// Interface id.
    pub id: u32,
    /// Frames captured on it.
    pub frames: u64,
    /// pcapng ISB `isb_ifdrop` (packets), `null` when not recorded.
    pub if_drop: Option<u64>,
    /// pcapng ISB `isb_osdrop` (packets), `null` when not recorded.
    pub os_drop: Option<u64>,
    /// pcapng ISB `isb_ifrecv` (packets), `null` when not recorded.
    pub if_recv: Option<u64>,
    /// pcapng ISB `isb_starttime`, ns since the Unix epoch.
    pub stats_start_ns: Option<i64>,
    /// pcapng ISB `isb_endtime`, ns since the Unix epoch.
    pub stats_end_ns: Option<i64>,
    /// Frames older than the previous frame on this interface.
    pub backwards_frames: u64,
    /// Largest such step back, ns.
    pub max_backwards_ns: i64,
}

/// CAPTURE_QUALITY: what the capture itself lost, cut, doubled or reordered,
/// and the verdict (contract 1.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureQualityReport {
    /// The worst verdict of `reasons` (`trustworthy` without reasons).
    pub verdict: QualityVerdictReport,
    /// Why, worst first.
    pub reasons: Vec<QualityReasonReport>,
    /// Frames analysed.
    pub frames: u64,
    /// TCP flows.
    pub tcp_flows: u64,
    /// Frames that were another sighting on the same interface.
    pub duplicates_same_interface: u64,
    /// Frames that were another sighting on another interface.
    pub duplicates_other_interface: u64,
    /// Bytes acknowledged but never captured (capture loss), all flows.
    pub capture_lost_bytes: u64,
    /// Flows with capture loss.
    pub capture_loss_flows: u64,
    /// TCP payload bytes captured (duplicate sightings not counted).
    pub captured_payload_bytes: u64,
    /// Sequence-gap bytes a later segment filled (network loss or
    /// reordering before the capture point).
    pub gap_bytes_filled_late: u64,
    /// Frames cut by snaplen in their payload only (not a reason).
    pub payload_truncated_frames: u64,
    /// Frames cut by snaplen inside a header.
    pub header_truncated_frames: u64,
    /// TCP flows captured one way only.
    pub one_sided_flows: u64,
    /// Frames older than the previous frame of the file when that one was
    /// captured on another interface (not a reason).
    pub backwards_across_interfaces: u64,
    /// Largest such step back, ns.
    pub max_backwards_across_ns: i64,
    /// Every interface, in id order.
    pub interfaces: Vec<InterfaceQualityReport>,
}

/// `capture_quality` of a [`FlowReport`]: present only when the flow has
/// something to report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FlowQualityReport {
    /// Bytes the peer acknowledged that no captured frame carried.
    pub capture_lost_bytes: u64,
    /// ACKs that revealed such bytes.
    pub capture_loss_acks: u64,
    /// Frame of the first such ACK.
    pub first_capture_loss_frame: Option<u64>,
    /// Sequence-gap bytes a later segment filled.
    pub gap_bytes_filled_late: u64,
    /// `"client_to_server"` / `"server_to_client"`: the only direction
    /// captured, when the flow is one-sided; `null` otherwise.
    pub one_sided: Option<&'static str>,
    /// Frames that were another sighting on the same interface.
    pub duplicates_same_interface: u64,
    /// Frames that were another sighting on another interface.
    pub duplicates_other_interface: u64,
    /// Frames cut by snaplen in their payload only.
    pub payload_truncated_frames: u64,
}
