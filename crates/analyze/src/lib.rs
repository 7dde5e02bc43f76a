//! The pipeline: ingest → decode → flow state → detectors, producing a
//! [`CaptureReport`].
//!
//! - [`pipeline`]: the one driver ([`Pipeline`]) every consumer of decoded
//!   packets and flow events uses (analysis, `--merge`, the parity dumps, the
//!   HTML graphs), with a [`PacketObserver`] hook per packet;
//! - [`analyze_path`] / [`analyze_merged`]: one capture or a merged set to a
//!   [`CaptureReport`];
//! - [`runner`]: the ordered parallel runner ([`analyze_inputs`]) — reports
//!   in input order, byte-identical whatever the thread count;
//! - [`registry`]: the detectors, found by id or alias ([`find_detector`]).

pub mod dump;
pub mod ledger;
pub mod merge;
pub mod pipeline;
pub mod quality;
pub mod registry;
pub mod runner;

use pcapsleuth_flow::FlowConfig;
use pcapsleuth_ingest::CaptureReader;
use pcapsleuth_report::{
    CaptureReport, FlowReport, InterfaceReport, WarningKindReport, WarningReport,
};
use std::path::{Path, PathBuf};

pub use dump::{dump_analysis, AnalysisRow};
pub use dump::{dump_streams, each_stream};
pub use ledger::LedgerObserver;
pub use merge::analyze_merged;
pub use pcapsleuth_detect::{
    CaptureSpan, DetectorInfo, FinishContext, InterfaceContext, PacketContext,
};
pub use pipeline::{drive, observe_path, PacketObserver, Pipeline, PipelineOutput};
pub use registry::{all_detectors, detector_infos, find_detector};
pub use runner::{analyze_inputs, RunError, RunOptions};

/// Options for one analysis run.
#[derive(Debug, Clone, Default)]
pub struct AnalyzeOptions {
    /// Fill [`CaptureReport::flows`] with per-flow summaries and their
    /// stall ledger ([`LedgerObserver`]).
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
        incomplete: None,
        capture_quality: None,
        findings: Vec::new(),
        flows: Vec::new(),
        sources: Vec::new(),
    }
}

fn run(mut reader: CaptureReader, opts: &AnalyzeOptions, report: &mut CaptureReport) {
    report.format = Some(format_name(reader.format()));
    let mut pipe = Pipeline::new(opts.flow_config);
    let mut ledger = LedgerObserver::new(opts.with_flows);
    report.error = drive(&mut reader, &mut pipe, &mut ledger).map(|e| e.to_string());
    let out = pipe.finish(reader.interfaces(), &mut ledger);
    let out_caps = unacked_capped_streams(&out.flows);
    fill_report(report, out, opts, ledger.finish());
    // Wireshark numbers some non-packet pcapng blocks (custom, journal) as
    // frames; the reader counts them, so the total is right even when the
    // file ends with one.
    report.packets = reader.frame_count().get();
    report.interfaces = reader.interfaces().iter().map(interface_report).collect();
    report.warnings = reader.warnings().iter().map(WarningReport::from).collect();
    if report.error.is_none() {
        report.incomplete = reader.stop_warning().map(WarningReport::from);
    }
    report.warnings.extend(unacked_cap_warning(&out_caps, opts));
    note_read_incomplete(report);
}

/// When reading stopped early (`error` or `incomplete`), say so in the
/// capture quality too ([`pcapsleuth_detect::quality::QualityReason::ReadIncomplete`]).
pub(crate) fn note_read_incomplete(report: &mut CaptureReport) {
    if report.error.is_none() && report.incomplete.is_none() {
        return;
    }
    if let Some(q) = &mut report.capture_quality {
        let reason = pcapsleuth_report::QualityReasonReport::ReadIncomplete {
            verdict: pcapsleuth_report::QualityVerdictReport::UseWithCare,
            frames: report.packets,
        };
        q.reasons.push(reason);
        q.reasons.sort_by_key(|r| std::cmp::Reverse(r.verdict()));
        q.verdict = q
            .verdict
            .max(pcapsleuth_report::QualityVerdictReport::UseWithCare);
    }
}

/// The capture warning `analyze` gives when the unacknowledged-segment cap
/// ([`FlowConfig::max_unacked_segments`]) was hit in some flows (`flows`
/// shows it per flow as `unacked_capped`): their retransmission and loss
/// analysis is incomplete. `capped` are those flows' `tcp.stream`s.
pub(crate) fn unacked_cap_warning(capped: &[u64], opts: &AnalyzeOptions) -> Option<WarningReport> {
    const SHOWN: usize = 10;
    capped.first()?;
    let mut list: Vec<String> = capped.iter().take(SHOWN).map(u64::to_string).collect();
    if capped.len() > SHOWN {
        list.push(format!("… {} more", capped.len() - SHOWN));
    }
    Some(WarningReport {
        kind: WarningKindReport::UnackedSegmentCap,
        offset: 0,
        frame: None,
        message: format!(
            "the unacknowledged-segment cap ({} per direction) was hit in {} flow{} (tcp.stream {}): segments past the cap were not tracked, so retransmission and loss analysis of {} is incomplete",
            opts.flow_config.max_unacked_segments,
            capped.len(),
            if capped.len() == 1 { "" } else { "s" },
            list.join(", "),
            if capped.len() == 1 { "that flow" } else { "those flows" },
        ),
    })
}

/// The `tcp.stream`s of the flows whose unacknowledged-segment list hit its cap.
pub(crate) fn unacked_capped_streams(flows: &[pcapsleuth_flow::FlowSummary]) -> Vec<u64> {
    flows
        .iter()
        .filter(|f| f.unacked_capped)
        .map(|f| f.tcp_stream.get())
        .collect()
}

/// Copy the pipeline's output into the report: span, frame count (the last
/// frame number; callers that know better overwrite it), findings,
/// `tcp_streams` and, with [`AnalyzeOptions::with_flows`], `flows` with
/// their stall ledger (`ledger`, from a [`LedgerObserver`]).
pub(crate) fn fill_report(
    report: &mut CaptureReport,
    out: PipelineOutput,
    opts: &AnalyzeOptions,
    ledger: Option<pcapsleuth_ledger::LedgerReport>,
) {
    if let Some(span) = out.span {
        report.first_ts_ns = span.first.0;
        report.last_ts_ns = span.last.0;
    }
    report.packets = out.last_frame.get();
    report.findings = out.findings;
    report.tcp_streams = out.tcp_streams;
    report.capture_quality = Some(quality::capture_report(&out.quality));
    if opts.with_flows {
        report.flows = out.flows.iter().map(FlowReport::from).collect();
        for f in &mut report.flows {
            f.capture_quality = out
                .quality
                .flow(pcapsleuth_core::StreamId(f.tcp_stream))
                .map(quality::flow_report);
        }
        if let Some(l) = ledger {
            ledger::attach(&mut report.flows, l);
        }
    }
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
        id: i.id.get(),
        name: i.name.clone(),
        linktype: i.linktype.name(),
    }
}
