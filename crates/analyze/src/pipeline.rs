//! The one pipeline driver: frames → decoded packets → flow events →
//! detectors.
//!
//! Every consumer that needs decoded packets or flow events goes through
//! [`Pipeline`], so they all see the same decode (wire length passed to the
//! decoder, same link-type handling) and the same `tcp.stream` numbering:
//! the analysis of one file ([`crate::analyze_path`]) and of a merged set
//! ([`crate::analyze_merged`]), the Wireshark parity dumps ([`crate::dump`]),
//! and the HTML report's per-flow series (`pcapsleuth_html::collect_series`).
//! A caller that wants to see each packet plugs in a [`PacketObserver`];
//! one that needs no detectors builds the pipeline with
//! [`Pipeline::with_detectors`] and an empty list.

use crate::quality::QualityTracker;
use crate::registry::all_detectors;
use pcapsleuth_core::finding::sort_findings;
use pcapsleuth_core::{Finding, FrameNo, InterfaceId, Timestamp};
use pcapsleuth_decode::Decoder;
use pcapsleuth_detect::{
    CaptureSpan, Detector, FinishContext, InterfaceContext, PacketContext, StreamEndpoints,
};
use pcapsleuth_flow::{FlowConfig, FlowEvent, FlowSummary, FlowTable, PacketMeta};
use pcapsleuth_ingest::{CaptureReader, Frame, IngestError, InterfaceInfo};
use pcapsleuth_ledger::{CauseSet, LedgerConfig, StallLedger};

/// Sees every packet as the pipeline handles it, after the detectors did.
/// Both methods default to doing nothing.
pub trait PacketObserver {
    /// One frame: its decoded layers and flow verdict (`pkt`), and the flow
    /// events the flow table emitted for it, in order.
    fn packet(&mut self, _pkt: &PacketContext<'_>, _events: &[FlowEvent]) {}
    /// End of input: the events the flow table emitted when it was flushed
    /// (stalls still open at the end of the capture…), in order, in one or
    /// more consecutive slices (one call per slice; none without events).
    fn finish(&mut self, _events: &[FlowEvent]) {}
}

/// The observer that observes nothing.
impl PacketObserver for () {}

/// What frames showed about one interface.
#[derive(Debug, Clone, Copy)]
struct InterfaceSeen {
    linktype: u32,
    first: Timestamp,
    last: Timestamp,
    frames: u64,
}

/// How much of every stream the pipeline keeps for after the capture.
///
/// Memory at the end of a capture is O(streams) for what is kept here: a
/// SYN scan of 2 million one-SYN streams holds 2 million summaries and stall
/// ledgers with [`FlowDetail::Full`], and none with
/// [`FlowDetail::FindingsOnly`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlowDetail {
    /// Every stream's summary ([`PipelineOutput::flows`]) and stall ledger
    /// (`ledger.streams`): for `pcapsleuth flows`, HTML and Markdown.
    #[default]
    Full,
    /// Findings only: no per-flow summaries, and the stall ledger lists only
    /// streams that stalled with a cause a detector reads
    /// ([`Detector::ledger_causes`]); its roll-ups still count every stream.
    FindingsOnly,
}

/// What the pipeline produced at the end of the input.
#[derive(Debug, Default)]
pub struct PipelineOutput {
    /// Every detector's findings, sorted ([`sort_findings`]).
    pub findings: Vec<Finding>,
    /// `tcp.stream` ids assigned (streams are `0..tcp_streams`).
    pub tcp_streams: u64,
    /// Per-flow summaries, one per `tcp.stream` in stream order; empty
    /// with [`FlowDetail::FindingsOnly`].
    pub flows: Vec<FlowSummary>,
    /// The `tcp.stream`s whose unacknowledged-segment list hit its cap
    /// ([`FlowConfig::max_unacked_segments`]), ascending.
    pub unacked_capped: Vec<pcapsleuth_core::StreamId>,
    /// First and last frame timestamps, `None` without frames.
    pub span: Option<CaptureSpan>,
    /// Frame number of the last frame pushed (0 without frames).
    pub last_frame: FrameNo,
    /// What the capture itself lost, cut, doubled or reordered
    /// ([`crate::quality`]).
    pub quality: pcapsleuth_detect::quality::CaptureQuality,
    /// What the flow table retired, evicted and held at most
    /// ([`pcapsleuth_flow::FlowTableStats`]); `evicted > 0` means the
    /// [`FlowConfig::max_flows`] cap was hit and the report says so.
    pub flow_stats: pcapsleuth_flow::FlowTableStats,
    /// The stall ledger of the capture (run when the pipeline has detectors;
    /// the detectors saw it in [`FinishContext::ledger`]).
    pub ledger: Option<pcapsleuth_ledger::LedgerReport>,
    /// The capture-wide memory bounds the detectors reached (in detector
    /// order): parts of the capture a detector did not examine; the report
    /// gives each a `detector_limit` warning.
    pub detector_limits: Vec<DetectorLimit>,
}

/// A detector's capture-wide memory bound that was reached
/// ([`pcapsleuth_detect::Detector::limits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DetectorLimit {
    /// The detector's id.
    pub detector: &'static str,
    /// The bound and what went past it.
    pub bound: pcapsleuth_detect::Bound,
}

/// The per-frame pipeline (decode → flow table → detectors), fed one frame at
/// a time in capture order, on the calling thread. (One capture on several
/// threads, without per-packet observers: [`crate::staged::StagedPipeline`].)
pub struct Pipeline {
    front: Front,
    consumers: Consumers,
    /// The current frame's flow events.
    events: Vec<FlowEvent>,
}

/// Everything that must see the frames in order and that the detectors
/// depend on (decode, flow table), plus the capture-wide bookkeeping.
pub(crate) struct Front {
    decoder: Decoder,
    flows: FlowTable,
    /// Client and server of every `tcp.stream`.
    streams: StreamEndpoints,
    span: Option<CaptureSpan>,
    last_frame: FrameNo,
    /// Indexed by interface id.
    seen: Vec<Option<InterfaceSeen>>,
    quality: QualityTracker,
    detail: FlowDetail,
}

/// The consumers of flow events and packets: the detectors (with their
/// position in the registry list) and the stall ledger.
pub(crate) struct Consumers {
    /// Detectors with their index in the list the pipeline was built with.
    pub(crate) detectors: Vec<(usize, Box<dyn Detector>)>,
    /// One stall ledger per capture; `None` without detectors.
    pub(crate) ledger: Option<Box<StallLedger>>,
}

impl Consumers {
    /// `detectors` in this order, and a stall ledger when there are any
    /// (keeping per-stream ledgers as `detail` says).
    pub(crate) fn new(detectors: Vec<Box<dyn Detector>>, detail: FlowDetail) -> Consumers {
        let keep_streams = match detail {
            FlowDetail::Full => CauseSet::ALL,
            FlowDetail::FindingsOnly => detectors
                .iter()
                .fold(CauseSet::EMPTY, |acc, d| acc.union(d.ledger_causes())),
        };
        let cfg = LedgerConfig {
            keep_streams,
            notify_concluded: detectors.iter().any(|d| !d.ledger_causes().is_empty()),
            ..LedgerConfig::default()
        };
        let ledger = (!detectors.is_empty()).then(|| Box::new(StallLedger::with_config(cfg)));
        Consumers {
            detectors: detectors.into_iter().enumerate().collect(),
            ledger,
        }
    }

    /// No detector, no ledger.
    pub(crate) fn none() -> Consumers {
        Consumers {
            detectors: Vec::new(),
            ledger: None,
        }
    }

    /// One flow event, to every detector then the ledger; then the streams
    /// the ledger concluded with it to the detectors that read the ledger
    /// ([`Detector::on_ledger_concluded`]).
    pub(crate) fn event(&mut self, ev: &FlowEvent) {
        for (_, d) in self.detectors.iter_mut() {
            d.on_flow_event(ev);
        }
        if let Some(l) = &mut self.ledger {
            l.on_event(ev);
            let detectors = &mut self.detectors;
            l.drain_concluded(|stream, entries| {
                for (_, d) in detectors.iter_mut() {
                    if !d.ledger_causes().is_empty() {
                        d.on_ledger_concluded(stream, entries);
                    }
                }
            });
        }
    }

    /// One packet: its flow events, then the packet, as [`Pipeline::push`]
    /// delivers them.
    pub(crate) fn packet(&mut self, pkt: &PacketContext<'_>, events: &[FlowEvent]) {
        for ev in events {
            self.event(ev);
        }
        for (_, d) in self.detectors.iter_mut() {
            d.on_packet(pkt);
        }
    }
}

impl Front {
    pub(crate) fn new(flow_config: FlowConfig, detail: FlowDetail) -> Front {
        Front {
            detail,
            decoder: Decoder::new(),
            flows: FlowTable::new(flow_config),
            streams: StreamEndpoints::default(),
            span: None,
            last_frame: FrameNo(0),
            seen: Vec::new(),
            quality: QualityTracker::new(),
        }
    }

    /// Decode `frame`, run the flow table and the quality tracker, append
    /// the flow events it produced to `events`, and hand the packet and
    /// those events to `then` (the decoded packet stays where it was
    /// decoded: no copy of it per packet); returns what `then` returns.
    pub(crate) fn step<R>(
        &mut self,
        frame: &Frame<'_>,
        events: &mut Vec<FlowEvent>,
        then: impl FnOnce(&PacketContext<'_>, &[FlowEvent]) -> R,
    ) -> R {
        self.note_frame(frame);
        let meta = PacketMeta {
            frame: frame.number,
            ts: frame.ts,
            interface: frame.interface,
        };
        let decoded = self
            .decoder
            .decode_frame(frame.linktype.0, frame.data, Some(frame.orig_len));
        let start = events.len();
        let info = self.flows.on_packet(&meta, &decoded, events);
        let events = events.get(start..).unwrap_or(&[]);
        for ev in events {
            if let FlowEvent::FlowStarted(s) = ev {
                self.streams.insert(s.stream, (s.client, s.server));
            }
        }
        self.quality.on_frame(frame, &decoded, &info, events);
        let pkt = PacketContext {
            meta,
            decoded: &decoded,
            flow: info,
        };
        then(&pkt, events)
    }
    /// Capture span, last frame number and per-interface facts.
    fn note_frame(&mut self, frame: &Frame<'_>) {
        self.last_frame = frame.number;
        match &mut self.span {
            Some(span) => {
                span.last = frame.ts;
                span.earliest = span.earliest.min(frame.ts);
                span.latest = span.latest.max(frame.ts);
            }
            None => {
                self.span = Some(CaptureSpan {
                    first: frame.ts,
                    last: frame.ts,
                    earliest: frame.ts,
                    latest: frame.ts,
                })
            }
        }
        let idx = frame.interface.index();
        if self.seen.len() <= idx {
            // Interface ids come from the file; a hostile one must not make
            // us allocate gigabytes: ids past 65535 are not tracked.
            if idx > usize::from(u16::MAX) {
                return;
            }
            self.seen.resize(idx + 1, None);
        }
        if let Some(slot) = self.seen.get_mut(idx) {
            match slot {
                Some(s) => {
                    s.last = frame.ts;
                    s.frames += 1;
                }
                None => {
                    *slot = Some(InterfaceSeen {
                        linktype: frame.linktype.0,
                        first: frame.ts,
                        last: frame.ts,
                        frames: 1,
                    })
                }
            }
        }
    }

    /// The interfaces for the detectors: every described one (`described`,
    /// e.g. [`CaptureReader::interfaces`]) and every one frames named without
    /// a description, in id order.
    fn interface_contexts(&self, described: &[InterfaceInfo]) -> Vec<InterfaceContext> {
        let mut out: Vec<InterfaceContext> = described
            .iter()
            .map(|i| {
                let seen = self.seen.get(i.id.index()).copied().flatten();
                InterfaceContext {
                    id: i.id,
                    name: i.name.clone(),
                    linktype: i.linktype.0,
                    first_ts: seen.map(|s| s.first),
                    last_ts: seen.map(|s| s.last),
                    frames: seen.map_or(0, |s| s.frames),
                    if_drops: i.stats.and_then(|s| match (s.if_drop, s.os_drop) {
                        (None, None) => None,
                        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
                    }),
                }
            })
            .collect();
        for (id, seen) in self.seen.iter().enumerate() {
            let (Some(s), Ok(id)) = (seen, InterfaceId::try_from(id)) else {
                continue;
            };
            if described.iter().any(|i| i.id == id) {
                continue;
            }
            out.push(InterfaceContext {
                id,
                name: None,
                linktype: s.linktype,
                first_ts: Some(s.first),
                last_ts: Some(s.last),
                frames: s.frames,
                if_drops: None,
            });
        }
        out.sort_by_key(|i| i.id);
        out
    }
}

impl Pipeline {
    /// A pipeline running every registered detector, keeping what `detail` says.
    pub fn new(flow_config: FlowConfig, detail: FlowDetail) -> Pipeline {
        Pipeline::with_detail(flow_config, all_detectors(), detail)
    }

    /// A pipeline running `detectors` (none: decode and flow events only),
    /// keeping every stream's summary and ledger ([`FlowDetail::Full`]).
    pub fn with_detectors(flow_config: FlowConfig, detectors: Vec<Box<dyn Detector>>) -> Pipeline {
        Pipeline::with_detail(flow_config, detectors, FlowDetail::Full)
    }

    /// A pipeline running `detectors`, keeping what `detail` says.
    pub fn with_detail(
        flow_config: FlowConfig,
        detectors: Vec<Box<dyn Detector>>,
        detail: FlowDetail,
    ) -> Pipeline {
        Pipeline {
            front: Front::new(flow_config, detail),
            consumers: Consumers::new(detectors, detail),
            events: Vec::with_capacity(16),
        }
    }

    /// Feed one frame: decode it, update the flow table, hand the events and
    /// then the packet to every detector, then to `observer`.
    pub fn push(&mut self, frame: &Frame<'_>, observer: &mut impl PacketObserver) {
        self.events.clear();
        let consumers = &mut self.consumers;
        self.front.step(frame, &mut self.events, |pkt, events| {
            consumers.packet(pkt, events);
            observer.packet(pkt, events);
        });
    }

    /// End of input: flush the flow table (its events go to the detectors,
    /// then to `observer`), then collect every detector's findings with a
    /// [`FinishContext`] built from what the pipeline saw. `interfaces` are
    /// the interfaces the input described (ids as in the frames).
    pub fn finish(
        self,
        interfaces: &[InterfaceInfo],
        observer: &mut impl PacketObserver,
    ) -> PipelineOutput {
        conclude(self.front, self.consumers, interfaces, observer)
    }
}

/// End-of-capture flow events handed on per slice of about this many
/// (a capture ending with millions of open streams has one stall each).
const FINISH_CHUNK: usize = 1024;

/// End of input for `front` and `consumers` (which have seen every frame):
/// see [`Pipeline::finish`].
pub(crate) fn conclude(
    mut front: Front,
    mut consumers: Consumers,
    interfaces: &[InterfaceInfo],
    observer: &mut impl PacketObserver,
) -> PipelineOutput {
    front.flows.finish_chunked(FINISH_CHUNK, |events| {
        for ev in events {
            consumers.event(ev);
        }
        observer.finish(events);
    });
    let quality = std::mem::take(&mut front.quality).finish(interfaces);
    let flows = match front.detail {
        FlowDetail::Full => front.flows.summaries(),
        FlowDetail::FindingsOnly => Vec::new(),
    };
    let unacked_capped = front.flows.unacked_capped_streams();
    let tcp_streams = front.flows.stream_count();
    let flow_stats = front.flows.stats();
    // The table's per-stream state is no longer needed: free it before the
    // ledger and the detectors build their reports.
    front.flows = FlowTable::default();
    let ctx = FinishContext {
        interfaces: front.interface_contexts(interfaces),
        span: front.span,
        streams: std::mem::take(&mut front.streams),
        quality,
        ledger: consumers.ledger.take().map(|l| l.finish()),
    };
    let mut findings = Vec::new();
    let mut detector_limits = Vec::new();
    for (_, d) in consumers.detectors.iter_mut() {
        let id = d.info().id;
        detector_limits.extend(d.limits().into_iter().map(|bound| DetectorLimit {
            detector: id,
            bound,
        }));
        findings.extend(d.finish(&ctx));
    }
    sort_findings(&mut findings);
    PipelineOutput {
        findings,
        tcp_streams,
        flow_stats,
        flows,
        unacked_capped,
        span: front.span,
        last_frame: front.last_frame,
        quality: ctx.quality,
        ledger: ctx.ledger,
        detector_limits,
    }
}

/// Feed every frame of `reader` through `pipe` until the end or the first
/// read error, which is returned (the frames before it have been pushed).
pub fn drive(
    reader: &mut CaptureReader,
    pipe: &mut Pipeline,
    observer: &mut impl PacketObserver,
) -> Option<IngestError> {
    loop {
        match reader.next_frame() {
            Ok(Some(frame)) => pipe.push(&frame, observer),
            Ok(None) => return None,
            Err(e) => return Some(e),
        }
    }
}

/// Open `path` and run it through a pipeline with the default flow
/// configuration and `detectors` (often none), calling `observer` for every
/// packet; returns the output and the read error that ended the input early,
/// if any.
///
/// # Errors
/// When the file cannot be opened or is not a capture.
pub fn observe_path(
    path: &std::path::Path,
    detectors: Vec<Box<dyn Detector>>,
    observer: &mut impl PacketObserver,
) -> Result<(PipelineOutput, Option<IngestError>), IngestError> {
    let mut reader = CaptureReader::open(path)?;
    let mut pipe = Pipeline::with_detectors(FlowConfig::default(), detectors);
    let err = drive(&mut reader, &mut pipe, observer);
    Ok((pipe.finish(reader.interfaces(), observer), err))
}
