//! Per-frame dumps of the flow table's verdicts: the hooks the Wireshark
//! parity tests compare against tshark (`tcp.stream`, `tcp.analysis.*`).

use pcapsleuth_decode::Decoder;
use pcapsleuth_flow::{FlowConfig, FlowEvent, FlowTable, PacketFlowInfo, PacketMeta};
use pcapsleuth_ingest::{CaptureReader, IngestError};
use std::path::Path;

/// Feed every frame of `path` through the decoder and a default [`FlowTable`],
/// calling `visit(frame number, the packet's flow info, the events it emitted)`.
///
/// # Errors
/// When the file cannot be opened or a frame cannot be read.
fn each_packet(
    path: &Path,
    mut visit: impl FnMut(u64, PacketFlowInfo, &[FlowEvent]),
) -> Result<(), IngestError> {
    let mut reader = CaptureReader::open(path)?;
    let mut decoder = Decoder::new();
    let mut flows = FlowTable::new(FlowConfig::default());
    let mut events = Vec::new();
    while let Some(frame) = reader.next_frame()? {
        let meta = PacketMeta {
            frame: frame.number,
            ts: frame.ts,
            interface: frame.interface,
        };
        let decoded = decoder.decode_frame(frame.linktype.0, frame.data, Some(frame.orig_len));
        events.clear();
        let info = flows.on_packet(&meta, &decoded, &mut events);
        visit(frame.number, info, &events);
    }
    Ok(())
}

/// For every frame of a capture, its `tcp.stream` (if any): the comparison
/// hook for Wireshark parity tests and `pcapsleuth streams`.
///
/// # Errors
/// When the file cannot be opened or a frame cannot be read.
pub fn dump_streams(path: &Path) -> Result<Vec<(u64, Option<u64>)>, IngestError> {
    let mut out = Vec::new();
    each_packet(path, |frame, info, _| out.push((frame, info.stream)))?;
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
