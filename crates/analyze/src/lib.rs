//! The pipeline: ingest → decode → flow state → detectors, producing a
//! [`CaptureReport`]. [`analyze_many`] runs captures in parallel with rayon and
//! returns them in input order, so output never depends on the thread count.

pub mod dump;
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

fn empty_report(path: &Path) -> CaptureReport {
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
    }
}

fn run(mut reader: CaptureReader, opts: &AnalyzeOptions, report: &mut CaptureReport) {
    report.format = Some(match reader.format() {
        pcapsleuth_ingest::CaptureFormat::Pcap => "pcap".to_string(),
        pcapsleuth_ingest::CaptureFormat::Pcapng => "pcapng".to_string(),
    });
    let mut decoder = Decoder::new();
    let mut flows = FlowTable::new(opts.flow_config);
    let mut detectors = all_detectors();
    let mut ctx = FinishContext::default();
    let mut events: Vec<FlowEvent> = Vec::with_capacity(16);
    let mut first = true;
    loop {
        let frame = match reader.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                report.error = Some(e.to_string());
                break;
            }
        };
        if first {
            report.first_ts_ns = frame.ts.0;
            first = false;
        }
        report.last_ts_ns = frame.ts.0;
        report.packets = frame.number;
        let meta = PacketMeta { frame: frame.number, ts: frame.ts, interface: frame.interface };
        let decoded = decoder.decode_frame(frame.linktype.0, frame.data, Some(frame.orig_len));
        events.clear();
        let info = flows.on_packet(&meta, &decoded, &mut events);
        for ev in &events {
            if let FlowEvent::FlowStarted(s) = ev {
                ctx.streams.insert(s.stream, (s.client, s.server));
            }
            for d in detectors.iter_mut() {
                d.on_flow_event(ev);
            }
        }
        let pkt = PacketContext { meta, decoded: &decoded, flow: info };
        for d in detectors.iter_mut() {
            d.on_packet(&pkt);
        }
    }
    events.clear();
    flows.finish(&mut events);
    for ev in &events {
        for d in detectors.iter_mut() {
            d.on_flow_event(ev);
        }
    }
    for d in detectors.iter_mut() {
        report.findings.extend(d.finish(&ctx));
    }
    sort_findings(&mut report.findings);
    report.tcp_streams = flows.stream_count();
    report.interfaces = reader
        .interfaces()
        .iter()
        .map(|i| InterfaceReport { id: i.id, name: i.name.clone(), linktype: i.linktype.name() })
        .collect();
    report.warnings = reader.warnings().to_vec();
    if opts.with_flows {
        report.flows = flows.summaries();
    }
}

