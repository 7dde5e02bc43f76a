//! The flow table. (Skeleton: to be implemented.)

use crate::{FlowEvent, FlowSummary};
use pcapsleuth_core::{Direction, FrameNo, InterfaceId, StreamId, Timestamp};
use pcapsleuth_decode::Decoded;

/// Where and when a packet was captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketMeta {
    /// Wireshark frame number.
    pub frame: FrameNo,
    /// Timestamp, ns since the Unix epoch.
    pub ts: Timestamp,
    /// Capture interface.
    pub interface: InterfaceId,
}

/// What the flow table decided about one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacketFlowInfo {
    /// `tcp.stream` of the packet (for ICMP errors: of the quoted TCP flow, as Wireshark shows it).
    pub stream: Option<StreamId>,
    /// Direction within that stream.
    pub dir: Option<Direction>,
}

/// Limits and thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowConfig {
    /// Most unacknowledged segments remembered per endpoint.
    pub max_unacked_segments: usize,
    /// Most duplicate sightings listed per flow.
    pub max_sightings: usize,
    /// Shortest silence reported as a stall, ns.
    pub stall_threshold_ns: i64,
    /// Window within which two identical packets are one packet seen twice, ns.
    pub duplicate_window_ns: i64,
}

impl Default for FlowConfig {
    fn default() -> Self {
        FlowConfig { max_unacked_segments: 4096, max_sightings: 1024, stall_threshold_ns: 150_000_000, duplicate_window_ns: 10_000_000 }
    }
}

/// All TCP flows of one capture.
#[derive(Debug, Default)]
pub struct FlowTable {
    config: FlowConfig,
}

impl FlowTable {
    /// An empty table.
    pub fn new(config: FlowConfig) -> Self {
        FlowTable { config }
    }

    /// Process one packet (in frame order); append resulting events to `out`.
    pub fn on_packet(&mut self, meta: &PacketMeta, pkt: &Decoded<'_>, out: &mut Vec<FlowEvent>) -> PacketFlowInfo {
        let _ = (meta, pkt, out, &self.config);
        PacketFlowInfo::default()
    }

    /// End of capture: close open stalls (with [`crate::StallEnd::CaptureEnd`]).
    pub fn finish(&mut self, out: &mut Vec<FlowEvent>) {
        let _ = out;
    }

    /// Number of streams assigned so far.
    pub fn stream_count(&self) -> u64 {
        0
    }

    /// Per-flow summaries in `tcp.stream` order.
    pub fn summaries(&self) -> Vec<FlowSummary> {
        Vec::new()
    }
}
