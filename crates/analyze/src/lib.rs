//! The pipeline: ingest → decode → flow state → detectors, producing a
//! [`CaptureReport`]. [`analyze_many`] runs captures in parallel with rayon and
//! returns them in input order, so output never depends on the thread count.

pub mod dump;
pub mod merge;
pub mod registry;

use pcapsleuth_core::finding::sort_findings;
use pcapsleuth_decode::Decoder;
use pcapsleuth_detect::{FinishContext, PacketContext};
use pcapsleuth_flow::{FlowConfig, FlowEvent, FlowTable, PacketMeta};
use pcapsleuth_ingest::CaptureReader;
use pcapsleuth_report::{CaptureReport, InterfaceReport};
use std::path::{Path, PathBuf};

pub use dump::dump_streams;
pub use dump::{dump_analysis, AnalysisRow};
pub use merge::analyze_merged;
pub use registry::{all_detectors, detector_infos};

/// Options for one analysis run.
#[derive(Debug, Clone, Default)]
pub struct AnalyzeOptions {
    /// Fill [`CaptureReport::flows`] with per-flow summaries.
    pub with_flows: bool,
    /// Flow-table limits.
    pub flow_config: FlowConfig,
}

/// Analyse one capture. Never fails: an unreadable file gives a report with
/// `error` set and whatever was analysed before the error.
pub fn analyze_path(path: &Path, opts: &AnalyzeOptions) -> CaptureReport {
    let reader = if path == Path::new("-") {
        CaptureReader::from_reader(path, Box::new(std::io::stdin()))
    } else {
        CaptureReader::open(path)
    };
    let mut report = empty_report(path);
    match reader {
        Ok(reader) => run(reader, opts, &mut report),
        Err(e) => report.error = Some(e.to_string()),
    }
    report
}

/// Analyse many captures in parallel (rayon's current pool); results in input order.
pub fn analyze_many(paths: &[PathBuf], opts: &AnalyzeOptions) -> Vec<CaptureReport> {
    use rayon::prelude::*;
    paths.par_iter().map(|p| analyze_path(p, opts)).collect()
}

pub(crate) fn empty_report(path: &Path) -> CaptureReport {
    CaptureReport {
        path: path.display().to_string(),
        format: None,
        packets: 0,
        first_ts_ns: 0,
        last_ts_ns: 0,
        interfaces: Vec::new(),
        tcp_streams: 0,
        warnings: Vec::new(),
        error: None,
        findings: Vec::new(),
        flows: Vec::new(),
        sources: Vec::new(),
    }
}

fn run(mut reader: CaptureReader, opts: &AnalyzeOptions, report: &mut CaptureReport) {
    report.format = Some(format_name(reader.format()));
    let mut pipe = Pipeline::new(opts);
    loop {
        let frame = match reader.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                report.error = Some(e.to_string());
                break;
            }
        };
        pipe.push(report, &frame);
    }
    pipe.finish(opts, report);
    // Wireshark numbers some non-packet pcapng blocks (custom, journal) as
    // frames; the reader counts them, so the total is right even when the
    // file ends with one.
    report.packets = reader.frame_count();
    report.interfaces = reader.interfaces().iter().map(interface_report).collect();
    report.warnings = reader.warnings().to_vec();
}

/// `"pcap"` / `"pcapng"`, as in [`CaptureReport::format`].
pub(crate) fn format_name(f: pcapsleuth_ingest::CaptureFormat) -> String {
    match f {
        pcapsleuth_ingest::CaptureFormat::Pcap => "pcap".to_string(),
        pcapsleuth_ingest::CaptureFormat::Pcapng => "pcapng".to_string(),
    }
}

/// The report entry of one interface.
pub(crate) fn interface_report(i: &pcapsleuth_ingest::InterfaceInfo) -> InterfaceReport {
    InterfaceReport {
        id: i.id,
        name: i.name.clone(),
        linktype: i.linktype.name(),
    }
}

/// The per-frame pipeline (decode → flow table → detectors), fed one frame at
/// a time in capture order, so a single file ([`analyze_path`]) and a merged
/// set ([`merge::analyze_merged`]) share it.
pub(crate) struct Pipeline {
    decoder: Decoder,
    flows: FlowTable,
    detectors: Vec<Box<dyn pcapsleuth_detect::Detector>>,
    ctx: FinishContext,
    events: Vec<FlowEvent>,
    first: bool,
}

impl Pipeline {
    pub(crate) fn new(opts: &AnalyzeOptions) -> Pipeline {
        Pipeline {
            decoder: Decoder::new(),
            flows: FlowTable::new(opts.flow_config),
            detectors: all_detectors(),
            ctx: FinishContext::default(),
            events: Vec::with_capacity(16),
            first: true,
        }
    }

    /// Feed one frame; updates `packets`, `first_ts_ns` and `last_ts_ns`.
    pub(crate) fn push(
        &mut self,
        report: &mut CaptureReport,
        frame: &pcapsleuth_ingest::Frame<'_>,
    ) {
        if self.first {
            report.first_ts_ns = frame.ts.0;
            self.first = false;
        }
        report.last_ts_ns = frame.ts.0;
        report.packets = frame.number;
        let meta = PacketMeta {
            frame: frame.number,
            ts: frame.ts,
            interface: frame.interface,
        };
        let decoded = self
            .decoder
            .decode_frame(frame.linktype.0, frame.data, Some(frame.orig_len));
        self.events.clear();
        let info = self.flows.on_packet(&meta, &decoded, &mut self.events);
        for ev in &self.events {
            if let FlowEvent::FlowStarted(s) = ev {
                self.ctx.streams.insert(s.stream, (s.client, s.server));
            }
            for d in self.detectors.iter_mut() {
                d.on_flow_event(ev);
            }
        }
        let pkt = PacketContext {
            meta,
            decoded: &decoded,
            flow: info,
        };
        for d in self.detectors.iter_mut() {
            d.on_packet(&pkt);
        }
    }

    /// End of input: flush flows and detectors; fills `findings` (sorted),
    /// `tcp_streams` and, with [`AnalyzeOptions::with_flows`], `flows`.
    pub(crate) fn finish(mut self, opts: &AnalyzeOptions, report: &mut CaptureReport) {
        self.events.clear();
        self.flows.finish(&mut self.events);
        for ev in &self.events {
            for d in self.detectors.iter_mut() {
                d.on_flow_event(ev);
            }
        }
        for d in self.detectors.iter_mut() {
            report.findings.extend(d.finish(&self.ctx));
        }
        sort_findings(&mut report.findings);
        report.tcp_streams = self.flows.stream_count();
        if opts.with_flows {
            report.flows = self.flows.summaries();
        }
    }
}
