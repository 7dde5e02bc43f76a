//! The staged pipeline (one capture on several threads) gives exactly the
//! single-threaded output: findings, flows, their stall ledger, capture
//! quality, warnings and read errors, on every fixture and lab capture, on a
//! capture cut mid-record and on a merged set; its workers really run on
//! other threads; and a panicking detector ends the run instead of hanging it.

use pcapsleuth_analyze::{
    analyze_merged, analyze_path, AnalyzeOptions, FlowDetail, Pipeline, StagedPipeline,
};
use pcapsleuth_detect::{Detector, DetectorInfo, Finding, FinishContext, PacketContext};
use pcapsleuth_flow::{FlowConfig, FlowEvent};
use pcapsleuth_ingest::CaptureReader;
use pcapsleuth_report::{render_json, CaptureReport, Report, SCHEMA_VERSION};
use pcapsleuth_testkit::{captures_under, fixtures_dir, shared_dir};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

fn json(captures: Vec<CaptureReport>) -> String {
    render_json(&Report {
        schema_version: SCHEMA_VERSION,
        captures,
    })
}

fn opts(threads: usize) -> AnalyzeOptions {
    AnalyzeOptions {
        with_flows: true,
        capture_threads: threads,
        ..AnalyzeOptions::default()
    }
}

/// Every fixture and lab capture, and a copy of the largest cut in the
/// middle of a record (a read that ends early), written in a scratch
/// directory of the caller's own (tests run in parallel), removed when the
/// returned guard is dropped.
fn corpus() -> (pcapsleuth_testkit::Scratch, Vec<PathBuf>) {
    let mut paths = captures_under(&fixtures_dir());
    if let Some(shared) = shared_dir() {
        paths.extend(captures_under(&shared.join("lab")));
        paths.extend(captures_under(&shared.join("lab-incoming")));
    }
    let largest = paths
        .iter()
        .max_by_key(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .cloned()
        .expect("fixture captures exist");
    let bytes = std::fs::read(&largest).expect("read capture");
    let dir = pcapsleuth_testkit::scratch("staged-cut");
    let cut = dir.join(format!(
        "cut.{}",
        largest
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("pcap")
    ));
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3 + 7]).expect("write cut capture");
    paths.push(cut);
    (dir, paths)
}

#[test]
fn staged_output_is_byte_identical_to_single_thread() {
    let (_dir, paths) = corpus();
    let run = |threads: usize| -> Vec<CaptureReport> {
        paths
            .iter()
            .map(|p| analyze_path(p, &opts(threads)))
            .collect()
    };
    let single = run(1);
    // The comparison means something: findings, flows with stalls, a read
    // that ended early, and captures long enough for many batches.
    assert!(single.iter().any(|c| !c.findings.is_empty()));
    assert!(single
        .iter()
        .any(|c| c.flows.iter().any(|f| !f.stalls.is_empty())));
    assert!(single
        .iter()
        .any(|c| c.error.is_some() || c.incomplete.is_some()));
    assert!(
        single.iter().any(|c| c.packets > 4_096),
        "a capture of several batches"
    );
    let single = json(single);
    // 2: one detector worker; 3 and 16: the detectors split over workers.
    for threads in [2, 3, 16] {
        let staged = json(run(threads));
        assert!(
            staged == single,
            "--threads {threads} differs from 1 thread (first byte {:?})",
            staged.bytes().zip(single.bytes()).position(|(a, b)| a != b)
        );
    }
}

#[test]
fn staged_merge_is_byte_identical() {
    let dir = fixtures_dir();
    let paths = [
        dir.join("cross-interface-loss.pcapng"),
        dir.join("zero-window.pcap"),
    ];
    let one = json(vec![analyze_merged(&paths, &opts(1))]);
    let two = json(vec![analyze_merged(&paths, &opts(2))]);
    assert_eq!(one, two);
}

/// Records on which threads it saw packets and how many, and panics on
/// frame `panic_at` when set.
struct Probe {
    seen: Arc<Mutex<(Vec<ThreadId>, u64, u64)>>,
    panic_at: Option<u64>,
}

impl Detector for Probe {
    fn info(&self) -> DetectorInfo {
        DetectorInfo {
            id: "probe",
            aliases: &[],
            title: "test probe",
            explain: "",
        }
    }

    fn on_flow_event(&mut self, _event: &FlowEvent) {
        self.seen.lock().unwrap().2 += 1;
    }

    fn on_packet(&mut self, pkt: &PacketContext<'_>) {
        if self.panic_at == Some(pkt.meta.frame.get()) {
            panic!("probe panics on frame {}", pkt.meta.frame.get());
        }
        let mut seen = self.seen.lock().unwrap();
        let id = std::thread::current().id();
        if !seen.0.contains(&id) {
            seen.0.push(id);
        }
        seen.1 += 1;
    }

    fn finish(&mut self, _ctx: &FinishContext) -> Vec<Finding> {
        Vec::new()
    }
}

/// Runs a probe over the largest fixture with `threads`; returns what it saw
/// and the number of frames.
fn probe_run(threads: usize, panic_at: Option<u64>) -> ((Vec<ThreadId>, u64, u64), u64) {
    let path = fixtures_dir().join("cross-interface-loss.pcapng");
    let seen = Arc::new(Mutex::new((Vec::new(), 0, 0)));
    let probe = Probe {
        seen: Arc::clone(&seen),
        panic_at,
    };
    let mut reader = CaptureReader::open(&path).expect("fixture opens");
    let detectors: Vec<Box<dyn Detector>> = vec![Box::new(probe)];
    if threads < 2 {
        let mut pipe = Pipeline::with_detectors(FlowConfig::default(), detectors);
        assert!(pcapsleuth_analyze::drive(&mut reader, &mut pipe, &mut ()).is_none());
        let _ = pipe.finish(reader.interfaces(), &mut ());
    } else {
        let mut pipe = StagedPipeline::start(
            FlowConfig::default(),
            detectors,
            threads - 1,
            FlowDetail::Full,
        )
        .expect("threads start");
        while let Some(frame) = reader.next_frame().expect("fixture reads") {
            pipe.push(&frame);
        }
        let _ = pipe.finish(reader.interfaces());
    }
    let frames = reader.frame_count().get();
    let seen = seen.lock().unwrap().clone();
    (seen, frames)
}

#[test]
fn staged_detectors_run_on_a_worker_thread_and_see_everything() {
    let ((threads1, packets1, events1), frames) = probe_run(1, None);
    let ((threads2, packets2, events2), _) = probe_run(2, None);
    let me = std::thread::current().id();
    assert_eq!(threads1, vec![me]);
    assert_eq!(threads2.len(), 1);
    assert_ne!(threads2[0], me, "the detector ran on a worker thread");
    assert!(frames > 0);
    assert_eq!((packets1, packets2), (frames, frames));
    assert!(events1 > 0);
    assert_eq!(events1, events2);
}

#[test]
fn a_panicking_detector_ends_a_staged_run_with_that_panic() {
    let r = std::panic::catch_unwind(|| probe_run(2, Some(3)));
    let msg = r.expect_err("the worker's panic reaches the caller");
    let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("probe panics on frame 3"), "{msg}");
}

/// A report without flows (`analyze`: `FlowDetail::FindingsOnly`, no flow
/// summaries, the ledger keeping only the streams the detectors read) has
/// the same findings, warnings and capture quality as one with flows, on one
/// thread or several.
#[test]
fn findings_do_not_depend_on_the_flow_detail_kept() {
    let (_dir, paths) = corpus();
    for threads in [1, 2] {
        for path in &paths {
            let lean = AnalyzeOptions {
                with_flows: false,
                ..opts(threads)
            };
            let got = analyze_path(path, &lean);
            let mut want = analyze_path(path, &opts(threads));
            assert!(got.flows.is_empty());
            want.flows.clear();
            assert_eq!(
                json(vec![got]),
                json(vec![want]),
                "{} with {threads} thread(s)",
                path.display()
            );
        }
    }
}
