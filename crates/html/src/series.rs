//! Per-flow time series for the time–sequence graphs.
//!
//! [`collect_series`] is a **rendering aid**: the report layer reads the
//! capture a second time (ingest → decode → flow table, no detectors) and
//! keeps, for the few `tcp.stream`s that have findings, the per-segment facts
//! a Stevens graph needs. The pass runs the analysis pipeline itself
//! ([`pcapsleuth_analyze::Pipeline`], without detectors), so the graphs see
//! exactly the decode and stream numbering the findings came from. The JSON
//! report deliberately does not carry
//! per-packet data (it would grow with the capture), and the first pass does
//! not know yet which streams will have findings, so buffering their segments
//! there would mean buffering every flow. A second streaming pass costs one
//! more read of the file and memory bounded by [`MAX_POINTS_PER_FLOW`] per
//! selected flow. Stream ids are stable between passes because the same
//! deterministic flow table numbers them.

use pcapsleuth_analyze::{observe_path, PacketContext, PacketObserver};
use pcapsleuth_core::{Direction, FrameNo, StreamId};
use pcapsleuth_decode::IcmpKind;
use pcapsleuth_flow::{FlowEvent, StallEnd};
use pcapsleuth_ingest::IngestError;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Most segment points recorded per flow; later segments are dropped and
/// [`FlowSeries::capped`] is set. Markers (ICMP errors, stalls) are capped at
/// [`MAX_MARKERS_PER_FLOW`].
pub const MAX_POINTS_PER_FLOW: usize = 20_000;
/// Most ICMP/stall markers recorded per flow.
pub const MAX_MARKERS_PER_FLOW: usize = 2_000;

/// One TCP segment of a flow, as the graph needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeriesPoint {
    /// Capture time, ns since the Unix epoch.
    pub ts_ns: i64,
    /// Direction of travel.
    pub dir: Direction,
    /// Relative sequence number, bytes (SYN = 0, first data byte = 1).
    pub rel_seq: i64,
    /// Payload length, bytes.
    pub len: u32,
    /// Relative acknowledgement number in the peer's sequence space, bytes (ACK set and peer base known).
    pub rel_ack: Option<i64>,
    /// Advertised receive window after scaling, bytes (`None` when the scale is unknown).
    pub window_bytes: Option<u64>,
    /// Wireshark frame number.
    pub frame: FrameNo,
    /// Our retransmission verdict (`tcp.analysis.retransmission`, minus duplicate sightings).
    pub retransmission: bool,
    /// SYN flag set.
    pub syn: bool,
    /// FIN flag set.
    pub fin: bool,
    /// RST flag set.
    pub rst: bool,
}

/// What a [`FlowMarker`] marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerKind {
    /// An ICMP/ICMPv6 error quoting this flow; `mtu` in bytes when it carries one.
    Icmp {
        /// Next-hop MTU / Packet Too Big MTU, bytes.
        mtu: Option<u32>,
        /// Quoted IP datagram length, bytes.
        quoted_ip_len: u32,
        /// Frag-needed / Packet Too Big (true) or another error.
        too_big: bool,
    },
    /// A silence with data (or a SYN) outstanding, from `ts_ns` to `end_ts_ns`.
    Stall {
        /// End of the stall, ns since the epoch.
        end_ts_ns: i64,
        /// Frame that ended it.
        end_frame: FrameNo,
        /// Unacknowledged bytes during the stall.
        pending_bytes: u64,
        /// The capture ended while stalled.
        open: bool,
    },
}

/// An ICMP error or stall on a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowMarker {
    /// What it is.
    pub kind: MarkerKind,
    /// Time (start time for a stall), ns since the epoch.
    pub ts_ns: i64,
    /// Frame (the ICMP frame, or the last frame before the stall).
    pub frame: FrameNo,
    /// Direction concerned (quoted packet's direction, or the stalled sender), if known.
    pub dir: Option<Direction>,
}

/// The recorded series of one `tcp.stream`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSeries {
    /// Capture path, as `path.display()` (matches [`pcapsleuth_report::CaptureReport::path`]).
    pub capture: String,
    /// `tcp.stream`.
    pub stream: StreamId,
    /// Client endpoint text (`addr:port`, IPv6 in brackets).
    pub client: String,
    /// Server endpoint text.
    pub server: String,
    /// Segments in frame order (at most [`MAX_POINTS_PER_FLOW`]).
    pub points: Vec<SeriesPoint>,
    /// ICMP errors and stalls in frame order.
    pub markers: Vec<FlowMarker>,
    /// True when segments or markers were dropped at the caps.
    pub capped: bool,
}

/// Why [`collect_series`] failed.
#[derive(Debug, thiserror::Error)]
pub enum SeriesError {
    /// The capture could not be opened or read.
    #[error(transparent)]
    Ingest(#[from] IngestError),
}

fn endpoint_text(e: &pcapsleuth_core::Endpoint) -> String {
    match e.addr {
        std::net::IpAddr::V6(a) => format!("[{a}]:{}", e.port),
        std::net::IpAddr::V4(a) => format!("{a}:{}", e.port),
    }
}

/// Second pass over `path` recording the series of the given `tcp.stream`s
/// (see the module documentation for why). Returns one [`FlowSeries`] per
/// requested stream that exists in the capture, in ascending stream order.
/// Uses the default [`pcapsleuth_flow::FlowConfig`] (stall threshold 150 ms), as the analysis does.
///
/// # Errors
/// [`SeriesError::Ingest`] when the file cannot be opened or its header is
/// unreadable. A read error later on ends the pass and keeps what was read.
pub fn collect_series(path: &Path, streams: &[u64]) -> Result<Vec<FlowSeries>, SeriesError> {
    let wanted: BTreeSet<StreamId> = streams.iter().copied().map(StreamId).collect();
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let mut rec = Recorder {
        wanted,
        out: BTreeMap::new(),
        capture: path.display().to_string(),
    };
    // A read error ends the pass; what was read is kept.
    let _ = observe_path(path, Vec::new(), &mut rec)?;
    let mut out: Vec<FlowSeries> = rec.out.into_values().collect();
    for fs in &mut out {
        // Stalls are reported when they close; put markers in time order.
        fs.markers.sort_by_key(|m| (m.ts_ns, m.frame));
    }
    Ok(out)
}

/// Records the events of the wanted streams as the pipeline emits them.
struct Recorder {
    wanted: BTreeSet<StreamId>,
    out: BTreeMap<StreamId, FlowSeries>,
    capture: String,
}

impl PacketObserver for Recorder {
    fn packet(&mut self, _pkt: &PacketContext<'_>, events: &[FlowEvent]) {
        for ev in events {
            record(ev, &self.wanted, &mut self.out, &self.capture);
        }
    }

    fn finish(&mut self, events: &[FlowEvent]) {
        for ev in events {
            record(ev, &self.wanted, &mut self.out, &self.capture);
        }
    }
}

fn record(
    ev: &FlowEvent,
    wanted: &BTreeSet<StreamId>,
    out: &mut BTreeMap<StreamId, FlowSeries>,
    capture: &str,
) {
    match ev {
        FlowEvent::FlowStarted(s) if wanted.contains(&s.stream) => {
            out.entry(s.stream).or_insert_with(|| FlowSeries {
                capture: capture.to_string(),
                stream: s.stream,
                client: endpoint_text(&s.client),
                server: endpoint_text(&s.server),
                points: Vec::new(),
                markers: Vec::new(),
                capped: false,
            });
        }
        FlowEvent::Segment(s) => {
            let Some(fs) = out.get_mut(&s.stream) else {
                return;
            };
            if s.duplicate_of.is_some() {
                // Another sighting of a packet already plotted.
                return;
            }
            if fs.points.len() >= MAX_POINTS_PER_FLOW {
                fs.capped = true;
                return;
            }
            fs.points.push(SeriesPoint {
                ts_ns: s.ts.0,
                dir: s.dir,
                rel_seq: s.rel_seq,
                len: s.payload_len,
                rel_ack: if s.flags.ack() { s.rel_ack } else { None },
                window_bytes: s.window_bytes,
                frame: s.frame,
                retransmission: s.analysis.retransmission,
                syn: s.flags.syn(),
                fin: s.flags.fin(),
                rst: s.flags.rst(),
            });
        }
        FlowEvent::Stall(st) => {
            let Some(fs) = out.get_mut(&st.stream) else {
                return;
            };
            if fs.markers.len() >= MAX_MARKERS_PER_FLOW {
                fs.capped = true;
                return;
            }
            fs.markers.push(FlowMarker {
                kind: MarkerKind::Stall {
                    end_ts_ns: st.end_ts.0,
                    end_frame: st.end_frame,
                    pending_bytes: st.pending_bytes,
                    open: st.ended_by == StallEnd::CaptureEnd,
                },
                ts_ns: st.start_ts.0,
                frame: st.start_frame,
                dir: Some(st.dir),
            });
        }
        FlowEvent::IcmpError(ic) => {
            let Some(stream) = ic.stream else { return };
            let Some(fs) = out.get_mut(&stream) else {
                return;
            };
            if fs.markers.len() >= MAX_MARKERS_PER_FLOW {
                fs.capped = true;
                return;
            }
            fs.markers.push(FlowMarker {
                kind: MarkerKind::Icmp {
                    mtu: ic.mtu,
                    quoted_ip_len: ic.quoted_ip_len,
                    too_big: matches!(ic.kind, IcmpKind::FragNeeded | IcmpKind::PacketTooBig),
                },
                ts_ns: ic.ts.0,
                frame: ic.frame,
                dir: ic.quoted_dir,
            });
        }
        _ => {}
    }
}
