//! The ledger's output: entries and roll-ups, serde-serialisable.

use crate::cause::{StallCause, TimerKind};
use pcapsleuth_core::{Direction, Endpoint, FrameNo, StreamId};
use serde::Serialize;

/// What the packets show about one stall (every field optional except the note).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StallEvidence {
    /// The timer whose expiry ended the wait, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timer: Option<TimerKind>,
    /// Step on the timer's ladder: 1 for the first retransmission / probe,
    /// 2 for the next, … (backoff doubles, RFC 6298 §5.5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    /// The nominal delay the rule expected, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_ms: Option<f64>,
    /// The delay observed for that timer (since the transmission that armed
    /// it, which may precede the stall's start), ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_ms: Option<f64>,
    /// Whether `observed_ms` falls in the timer window of `expected_ms`
    /// (`pcapsleuth_core::timer::matches_timer`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matches_timer: Option<bool>,
    /// A frame that explains the stall (the ICMP error, the zero-window ACK…).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trigger_frame: Option<FrameNo>,
    /// The receive window the peer advertised when the wait began, bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_bytes: Option<u64>,
    /// Payload of the segment that ended the wait, bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segment_bytes: Option<u32>,
    /// The rule that fired, one fixed sentence.
    pub rule: &'static str,
}

/// One interval in which one side of a connection waited.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StallEntry {
    /// `tcp.stream`.
    pub tcp_stream: StreamId,
    /// Direction of the bytes that were late (the SYN, the data, the answer).
    pub dir: Direction,
    /// The one cause.
    pub cause: StallCause,
    /// Last frame before the wait.
    pub start_frame: FrameNo,
    /// First frame after it.
    pub end_frame: FrameNo,
    /// Start, ns since the Unix epoch.
    pub start_ns: i64,
    /// End, ns since the Unix epoch.
    pub end_ns: i64,
    /// `end_ns − start_ns`, ms (three decimals).
    pub duration_ms: f64,
    /// The wait was still open when the capture ended.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub open_at_capture_end: bool,
    /// Why this cause.
    pub evidence: StallEvidence,
}

/// Time lost to one cause.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CauseTime {
    /// The cause.
    pub cause: StallCause,
    /// Number of stalls.
    pub stalls: u64,
    /// Their summed duration, ms.
    pub duration_ms: f64,
}

/// The ledger of one `tcp.stream`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamLedger {
    /// `tcp.stream`.
    pub tcp_stream: StreamId,
    /// The side that opened the connection (else the first sender).
    pub client: Endpoint,
    /// The other side.
    pub server: Endpoint,
    /// First segment, ns since the Unix epoch.
    pub first_ns: i64,
    /// Last segment, ns since the Unix epoch.
    pub last_ns: i64,
    /// `last_ns − first_ns`, ms.
    pub duration_ms: f64,
    /// Union of the stall intervals (directions may overlap), ms.
    pub stall_ms: f64,
    /// Per cause, in [`StallCause::ALL`] order, only causes that occurred.
    pub time_lost_by_cause: Vec<CauseTime>,
    /// "4.2 s of 4.5 s lost to 3 SYN retransmission timeouts".
    pub summary: String,
    /// The stalls, in end-time order (at most `MAX_ENTRIES_PER_STREAM`).
    pub stalls: Vec<StallEntry>,
    /// Stalls beyond the cap, counted in the roll-ups only.
    #[serde(skip_serializing_if = "is_zero")]
    pub stalls_dropped: u64,
}

/// Time lost per service (server address and port).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServiceLedger {
    /// The server endpoint.
    pub server: Endpoint,
    /// Connections to it.
    pub connections: u64,
    /// Connections with at least one stall.
    pub stalled_connections: u64,
    /// Summed stall time, ms.
    pub stall_ms: f64,
    /// Per cause.
    pub time_lost_by_cause: Vec<CauseTime>,
}

/// The ledger of one capture.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LedgerReport {
    /// Shortest wait recorded, ms (each flow also needs twice its RTT).
    pub stall_threshold_ms: f64,
    /// Summed stall time of every stream, ms.
    pub total_stall_ms: f64,
    /// The latency budget: per cause, in [`StallCause::ALL`] order.
    pub time_lost_by_cause: Vec<CauseTime>,
    /// Per service, by descending stall time.
    pub services: Vec<ServiceLedger>,
    /// Streams with at least one stall, in stream order.
    pub streams: Vec<StreamLedger>,
}

impl LedgerReport {
    /// Summed duration of `cause` over the capture, ms.
    pub fn cause_ms(&self, cause: StallCause) -> f64 {
        self.time_lost_by_cause
            .iter()
            .filter(|c| c.cause == cause)
            .map(|c| c.duration_ms)
            .sum()
    }

    /// The ledger of `tcp_stream`, if it stalled.
    pub fn stream(&self, tcp_stream: StreamId) -> Option<&StreamLedger> {
        self.streams.iter().find(|s| s.tcp_stream == tcp_stream)
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}
