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
//! - [`staged`]: one capture on several threads (reader; decoder and flow
//!   table; ledger and detectors), for when there are fewer captures than
//!   threads ([`AnalyzeOptions::capture_threads`]);
//! - [`registry`]: the detectors, found by id or alias ([`find_detector`]).

pub mod dump;
pub mod ledger;
pub mod merge;
pub mod pipeline;
pub mod quality;
pub mod registry;
pub mod runner;
pub mod staged;

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
pub use pipeline::{
    drive, observe_path, DetectorLimit, FlowDetail, PacketObserver, Pipeline, PipelineOutput,
};
pub use registry::{all_detectors, detector_infos, find_detector};
pub use runner::{analyze_inputs, RunError, RunOptions};
pub use staged::StagedPipeline;

/// Options for one analysis run.
#[derive(Debug, Clone, Default)]
pub struct AnalyzeOptions {
    /// Fill [`CaptureReport::flows`] with per-flow summaries and their
    /// stall ledger ([`LedgerObserver`]).
    pub with_flows: bool,
    /// Flow-table limits.
    pub flow_config: FlowConfig,
    /// Threads for one capture (or one merged set): 0 or 1 runs the
    /// single-threaded pipeline; n ≥ 2 runs the staged one ([`staged`]): the
    /// calling thread reads, one thread decodes and runs the flow table, and
    /// n − 1 threads run the ledger and the detectors (the reader is light,
    /// so n threads keep about n cores busy). The report does not depend on
    /// it. [`analyze_inputs`] sets it from the thread count
    /// when there are fewer inputs than threads.
    pub capture_threads: usize,
}

impl AnalyzeOptions {
    /// What the pipeline keeps of every stream: everything for a report with
    /// flows, else only what the findings need.
    pub fn flow_detail(&self) -> FlowDetail {
        if self.with_flows {
            FlowDetail::Full
        } else {
            FlowDetail::FindingsOnly
        }
    }
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
    let mut pipe = Driver::new(opts);
    let error = loop {
        match reader.next_frame() {
            Ok(Some(frame)) => pipe.push(&frame),
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    report.error = error.map(|e| e.to_string());
    let out = pipe.finish(reader.interfaces());
    let out_caps: Vec<u64> = out.unacked_capped.iter().map(|s| s.get()).collect();
    let flow_cap = flow_cap_warning(&out.flow_stats, opts);
    let limits = detector_limit_warnings(&out.detector_limits);
    fill_report(report, out, opts);
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
    report.warnings.extend(flow_cap);
    report.warnings.extend(limits);
    note_read_incomplete(report);
}

/// The pipeline of one analysis: single-threaded, or staged when
/// [`AnalyzeOptions::capture_threads`] is 2 or more (and its threads start).
pub(crate) enum Driver {
    /// Everything on the calling thread.
    Plain(Box<Pipeline>),
    /// One capture on several threads.
    Staged(Box<staged::StagedPipeline>),
}

impl Driver {
    /// Every registered detector, on the threads `opts` asks for.
    pub(crate) fn new(opts: &AnalyzeOptions) -> Driver {
        if opts.capture_threads >= 2 {
            let workers = opts.capture_threads - 1;
            if let Some(s) = staged::StagedPipeline::start(
                opts.flow_config,
                all_detectors(),
                workers,
                opts.flow_detail(),
            ) {
                return Driver::Staged(Box::new(s));
            }
        }
        Driver::Plain(Box::new(Pipeline::new(
            opts.flow_config,
            opts.flow_detail(),
        )))
    }

    /// One frame, in capture order.
    pub(crate) fn push(&mut self, frame: &pcapsleuth_ingest::Frame<'_>) {
        match self {
            Driver::Plain(p) => p.push(frame, &mut ()),
            Driver::Staged(s) => s.push(frame),
        }
    }

    /// End of input (`interfaces`: those the input described).
    pub(crate) fn finish(self, interfaces: &[pcapsleuth_ingest::InterfaceInfo]) -> PipelineOutput {
        match self {
            Driver::Plain(p) => p.finish(interfaces, &mut ()),
            Driver::Staged(s) => s.finish(interfaces),
        }
    }
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

/// The warning that the flow table's live-stream cap
/// ([`FlowConfig::max_flows`], `--max-flows`) was hit: the least recently
/// active streams were retired early, so a condition of theirs that was
/// still developing (a SYN retry not yet due, a zero window still closed)
/// is concluded from what was seen until then. Never an abort.
pub(crate) fn flow_cap_warning(
    stats: &pcapsleuth_flow::FlowTableStats,
    opts: &AnalyzeOptions,
) -> Option<WarningReport> {
    (stats.evicted > 0).then(|| WarningReport {
        kind: WarningKindReport::FlowCap,
        offset: 0,
        frame: None,
        message: format!(
            "the flow cap ({} live TCP streams, --max-flows) was hit: {} stream{} retired early, least recently active first (peak {} live); findings about them are drawn from what was seen before",
            opts.flow_config.max_flows,
            stats.evicted,
            if stats.evicted == 1 { " was" } else { "s were" },
            stats.peak_live,
        ),
    })
}

/// One `detector_limit` warning per capture-wide detector bound that was
/// reached ([`PipelineOutput::detector_limits`]): the detector did not
/// examine the capture from `frame` on for that concern, and says so.
pub(crate) fn detector_limit_warnings(limits: &[DetectorLimit]) -> Vec<WarningReport> {
    limits
        .iter()
        .map(|l| {
            let b = &l.bound;
            let at = b
                .first_frame
                .map(|f| format!(" at frame {}", f.get()))
                .unwrap_or_default();
            WarningReport {
                kind: WarningKindReport::DetectorLimit,
                offset: 0,
                frame: b.first_frame.map(|f| f.get()),
                message: format!(
                    "{} keeps at most {} {} {} (its memory bound); it reached it{} and from there on refused {} more, so {}",
                    l.detector,
                    b.limit,
                    b.what,
                    b.scope,
                    at,
                    b.refused,
                    b.effect,
                ),
            }
        })
        .collect()
}

/// Copy the pipeline's output into the report: span, frame count (the last
/// frame number; callers that know better overwrite it), findings,
/// `tcp_streams` and, with [`AnalyzeOptions::with_flows`], `flows` with
/// their stall ledger (the pipeline's, [`PipelineOutput::ledger`]: the same
/// one a [`LedgerObserver`] would build, since it sees the same events).
pub(crate) fn fill_report(report: &mut CaptureReport, out: PipelineOutput, opts: &AnalyzeOptions) {
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
        if let Some(l) = out.ledger {
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

#[cfg(test)]
mod tests {
    use super::*;
    use pcapsleuth_core::FrameNo;
    use pcapsleuth_detect::Bound;

    /// One `detector_limit` warning per bound reached: not about a record
    /// (offset 0), `frame` the first frame not examined, the message naming
    /// the detector, the bound, the count and the frame.
    #[test]
    fn detector_limits_become_warnings() {
        let mut bound = Bound::new("recorded packets", 2_000_000);
        bound.refuse(FrameNo(1_234_567));
        bound.refuse(FrameNo(1_234_570));
        let mut window = Bound::new("DNS messages of lookups in progress", 131_072)
            .with_scope("at a time")
            .with_effect("it concluded that many lookups early");
        window.refuse(FrameNo(99));
        let w = detector_limit_warnings(&[
            DetectorLimit {
                detector: "cross-interface-loss",
                bound,
            },
            DetectorLimit {
                detector: "dns-timeout",
                bound: window,
            },
        ]);
        assert_eq!(w.len(), 2);
        assert_eq!(
            w[1].message,
            "dns-timeout keeps at most 131072 DNS messages of lookups in progress at a time (its memory bound); it reached it at frame 99 and from there on refused 1 more, so it concluded that many lookups early"
        );
        assert_eq!(w[0].kind, WarningKindReport::DetectorLimit);
        assert!(!w[0].kind.is_about_a_record());
        assert_eq!((w[0].offset, w[0].frame), (0, Some(1_234_567)));
        assert_eq!(
            w[0].message,
            "cross-interface-loss keeps at most 2000000 recorded packets per capture (its memory bound); it reached it at frame 1234567 and from there on refused 2 more, so its findings say nothing about what it refused"
        );
        assert_eq!(
            serde_json::to_value(w[0].kind).expect("serialises"),
            serde_json::json!("detector_limit")
        );
        assert!(detector_limit_warnings(&[]).is_empty());
    }
}
