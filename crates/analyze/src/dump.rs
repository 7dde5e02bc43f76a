//! Per-frame dumps of the flow table's verdicts: the hooks the Wireshark
//! parity tests compare against tshark (`tcp.stream`, `tcp.analysis.*`).

use pcapsleuth_decode::Decoder;
use pcapsleuth_flow::{FlowConfig, FlowTable, PacketMeta};
use pcapsleuth_ingest::CaptureReader;
use std::path::Path;

/// For every frame of a capture, its `tcp.stream` (if any): the comparison
/// hook for Wireshark parity tests and `pcapsleuth streams`.
///
/// # Errors
/// When the file cannot be opened; frames before a later error are returned.
pub fn dump_streams(
    path: &Path,
) -> Result<Vec<(u64, Option<u64>)>, pcapsleuth_ingest::IngestError> {
    let mut reader = CaptureReader::open(path)?;
    let mut decoder = Decoder::new();
    let mut flows = FlowTable::new(FlowConfig::default());
    let mut events = Vec::new();
    let mut out = Vec::new();
    while let Some(frame) = reader.next_frame()? {
        let meta = PacketMeta {
            frame: frame.number,
            ts: frame.ts,
            interface: frame.interface,
        };
        let decoded = decoder.decode_frame(frame.linktype.0, frame.data, Some(frame.orig_len));
        events.clear();
        let info = flows.on_packet(&meta, &decoded, &mut events);
        out.push((frame.number, info.stream));
    }
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
/// When the file cannot be opened; segments before a later error are returned.
pub fn dump_analysis(path: &Path) -> Result<Vec<AnalysisRow>, pcapsleuth_ingest::IngestError> {
    let mut reader = CaptureReader::open(path)?;
    let mut decoder = Decoder::new();
    let mut flows = FlowTable::new(FlowConfig::default());
    let mut events = Vec::new();
    let mut out = Vec::new();
    while let Some(frame) = reader.next_frame()? {
        let meta = PacketMeta {
            frame: frame.number,
            ts: frame.ts,
            interface: frame.interface,
        };
        let decoded = decoder.decode_frame(frame.linktype.0, frame.data, Some(frame.orig_len));
        events.clear();
        flows.on_packet(&meta, &decoded, &mut events);
        for ev in &events {
            if let pcapsleuth_flow::FlowEvent::Segment(s) = ev {
                out.push(AnalysisRow {
                    frame: s.frame,
                    stream: s.stream,
                    wireshark: s.wireshark,
                    analysis: s.analysis,
                    duplicate_of: s.duplicate_of,
                });
            }
        }
    }
    Ok(out)
}
