//! Per-frame dumps of the flow table's verdicts: the hooks the Wireshark
//! parity tests compare against tshark (`tcp.stream`, `tcp.analysis.*`).

use crate::pipeline::{observe_path, PacketObserver};
use pcapsleuth_core::{FrameNo, StreamId};
use pcapsleuth_detect::PacketContext;
use pcapsleuth_flow::{FlowEvent, PacketFlowInfo};
use pcapsleuth_ingest::IngestError;
use std::path::Path;

/// Adapts a closure to [`PacketObserver`].
struct Each<F>(F);

impl<F: FnMut(FrameNo, PacketFlowInfo, &[FlowEvent])> PacketObserver for Each<F> {
    fn packet(&mut self, pkt: &PacketContext<'_>, events: &[FlowEvent]) {
        (self.0)(pkt.meta.frame, pkt.flow, events);
    }
}

/// Feed every frame of `path` through the pipeline (no detectors, default
/// flow configuration), calling `visit(frame number, the packet's flow info,
/// the events it emitted)`.
///
/// # Errors
/// When the file cannot be opened or a frame cannot be read.
fn each_packet(
    path: &Path,
    visit: impl FnMut(FrameNo, PacketFlowInfo, &[FlowEvent]),
) -> Result<(), IngestError> {
    match observe_path(path, Vec::new(), &mut Each(visit))? {
        (_, Some(e)) => Err(e),
        (_, None) => Ok(()),
    }
}

/// For every frame of a capture, its `tcp.stream` (if any): the comparison
/// hook for Wireshark parity tests and `pcapsleuth streams`.
///
/// # Errors
/// When the file cannot be opened or a frame cannot be read.
pub fn dump_streams(path: &Path) -> Result<Vec<(FrameNo, Option<StreamId>)>, IngestError> {
    let mut out = Vec::new();
    each_stream(path, |frame, stream| out.push((frame, stream)))?;
    Ok(out)
}

/// [`dump_streams`] streamed: `visit(frame number, tcp.stream)` for every
/// frame as it is read, so a caller can show what was read before a read
/// error (returned after the last frame read).
///
/// # Errors
/// When the file cannot be opened or a frame cannot be read (`visit` has
/// then seen every frame before it).
pub fn each_stream(
    path: &Path,
    mut visit: impl FnMut(FrameNo, Option<StreamId>),
) -> Result<(), IngestError> {
    each_packet(path, |frame, info, _| visit(frame, info.stream))
}

/// The conversation ids of one frame, as [`dump_stream_ids`] reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamIds {
    /// Wireshark `frame.number`.
    pub frame: pcapsleuth_core::FrameNo,
    /// `tcp.stream` (innermost TCP header, or the TCP header an ICMP error quotes).
    pub tcp: Option<pcapsleuth_core::StreamId>,
    /// `udp.stream` (innermost UDP header, or the UDP header an ICMP error quotes).
    pub udp: Option<pcapsleuth_core::StreamId>,
    /// `udp.stream` of a UDP tunnel's outer header, which tshark prints
    /// before `udp` ("outer,inner"; `PacketFlowInfo::outer_udp_stream`).
    pub outer_udp: Option<pcapsleuth_core::StreamId>,
}

/// For every frame of a capture, its `tcp.stream` and `udp.stream` (if any):
/// the comparison hook for the tshark stream parity test.
///
/// # Errors
/// When the file cannot be opened or a frame cannot be read.
pub fn dump_stream_ids(path: &Path) -> Result<Vec<StreamIds>, IngestError> {
    let mut out = Vec::new();
    each_packet(path, |frame, info, _| {
        out.push(StreamIds {
            frame,
            tcp: info.stream,
            udp: info.udp_stream,
            outer_udp: info.outer_udp_stream,
        });
    })?;
    Ok(out)
}

/// One TCP segment's classification, as [`dump_analysis`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnalysisRow {
    /// Wireshark `frame.number`.
    pub frame: pcapsleuth_core::FrameNo,
    /// `tcp.stream`.
    pub stream: pcapsleuth_core::StreamId,
    /// What tshark 4.0 prints (`tcp.analysis.*`).
    pub wireshark: pcapsleuth_flow::SegmentAnalysis,
    /// Our corrected verdict.
    pub analysis: pcapsleuth_flow::SegmentAnalysis,
    /// Set when the flow table judged this packet another sighting of that frame.
    pub duplicate_of: Option<pcapsleuth_core::FrameNo>,
}

/// For every TCP segment of a capture (frame order), the flow table's
/// Wireshark-compatible and corrected `tcp.analysis.*` verdicts: the
/// comparison hook for the tshark analysis parity test.
///
/// # Errors
/// When the file cannot be opened or a frame cannot be read.
pub fn dump_analysis(path: &Path) -> Result<Vec<AnalysisRow>, IngestError> {
    let mut out = Vec::new();
    each_packet(path, |_, _, events| {
        out.extend(events.iter().filter_map(|ev| match ev {
            FlowEvent::Segment(s) => Some(AnalysisRow {
                frame: s.frame,
                stream: s.stream,
                wireshark: s.wireshark,
                analysis: s.analysis,
                duplicate_of: s.duplicate_of,
            }),
            _ => None,
        }));
    })?;
    Ok(out)
}
