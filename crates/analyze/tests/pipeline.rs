//! The pipeline driver and the ordered runner: what detectors get at finish
//! (interfaces, capture span, stream ends), and output independent of the
//! thread count.

use pcapsleuth_analyze::{analyze_inputs, analyze_path, AnalyzeOptions, Pipeline, RunOptions};
use pcapsleuth_detect::{Detector, DetectorInfo, Finding, FinishContext, InterfaceContext};
use pcapsleuth_flow::FlowConfig;
use pcapsleuth_ingest::CaptureReader;
use pcapsleuth_report::{render_json, Report, SCHEMA_VERSION};
use pcapsleuth_testkit::fixtures_dir;
use std::sync::{Arc, Mutex};

/// What the probe saw at finish.
#[derive(Debug, Default)]
struct Seen {
    interfaces: Vec<InterfaceContext>,
    span: Option<(i64, i64)>,
    extent: Option<(i64, i64)>,
    /// Client address and server port of streams 0, 1, … (`flow_ref`).
    refs: Vec<(String, u16)>,
}

/// A detector that records its [`FinishContext`] and finds nothing.
struct Probe(Arc<Mutex<Seen>>);

impl Detector for Probe {
    fn info(&self) -> DetectorInfo {
        DetectorInfo {
            id: "probe",
            aliases: &[],
            title: "test probe",
            explain: "",
        }
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        let mut seen = self.0.lock().unwrap();
        seen.interfaces = ctx.interfaces.clone();
        seen.span = ctx.span.map(|s| (s.first.0, s.last.0));
        seen.extent = ctx.span.map(|s| (s.earliest.0, s.latest.0));
        seen.refs = (0..)
            .map_while(|i| ctx.flow_ref(pcapsleuth_core::StreamId(i)))
            .map(|r| (r.client, r.server_port))
            .collect();
        Vec::new()
    }
}

#[test]
fn finish_context_has_interfaces_span_and_flows() {
    let path = fixtures_dir().join("two-interfaces.pcapng");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut reader = CaptureReader::open(&path).expect("fixture opens");
    let mut pipe = Pipeline::with_detectors(
        FlowConfig::default(),
        vec![Box::new(Probe(Arc::clone(&seen)))],
    );
    assert!(pcapsleuth_analyze::drive(&mut reader, &mut pipe, &mut ()).is_none());
    let out = pipe.finish(reader.interfaces(), &mut ());
    let report = analyze_path(&path, &AnalyzeOptions::default());
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.span,
        Some((report.first_ts_ns, report.last_ts_ns)),
        "span = the report's"
    );
    // Every stream's ends, as the flow summaries (kept with
    // `with_detectors`: FlowDetail::Full) name them.
    assert_eq!(seen.refs.len() as u64, report.tcp_streams);
    assert_eq!(out.tcp_streams, report.tcp_streams);
    assert_eq!(out.flows.len(), seen.refs.len());
    assert!(!seen.refs.is_empty());
    for (f, (client, port)) in out.flows.iter().zip(&seen.refs) {
        assert_eq!((&f.client.to_string(), f.server_port), (client, *port));
    }
    assert_eq!(seen.interfaces.len(), report.interfaces.len());
    assert!(seen.interfaces.len() >= 2, "{:?}", seen.interfaces);
    let frames: u64 = seen.interfaces.iter().map(|i| i.frames).sum();
    assert_eq!(frames, report.packets);
    for (ctx, rep) in seen.interfaces.iter().zip(&report.interfaces) {
        assert_eq!(ctx.id, rep.id);
        assert_eq!(ctx.name, rep.name);
        if ctx.frames > 0 {
            let (first, last) = (ctx.first_ts.unwrap().0, ctx.last_ts.unwrap().0);
            assert!(first <= last);
            let (earliest, latest) = seen.extent.unwrap();
            assert!(first >= earliest && last <= latest);
        }
    }
}

/// Reports come in input order and the JSON is byte-identical whatever the
/// number of worker threads.
#[test]
fn runner_output_does_not_depend_on_threads() {
    let dir = fixtures_dir();
    let mut paths = pcapsleuth_testkit::captures_under(&dir);
    paths.reverse();
    paths.push(dir.join("no-such-file.pcap"));
    let render = |threads: usize| {
        let mut captures = Vec::new();
        let run = RunOptions {
            merge: false,
            threads: Some(threads),
        };
        analyze_inputs(
            &paths,
            &AnalyzeOptions::default(),
            run,
            |_| {},
            |c| captures.push(c),
        )
        .expect("pool starts");
        let order: Vec<String> = captures.iter().map(|c| c.path.clone()).collect();
        let expected: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(order, expected);
        render_json(&Report {
            schema_version: SCHEMA_VERSION,
            captures,
        })
    };
    let one = render(1);
    assert_eq!(one, render(3));
    // With `merge`, one report for the whole set.
    let mut n = 0;
    let run = RunOptions {
        merge: true,
        threads: None,
    };
    analyze_inputs(
        &paths[..2],
        &AnalyzeOptions::default(),
        run,
        |_| {},
        |c| {
            n += 1;
            assert_eq!(c.sources.len(), 2);
        },
    )
    .unwrap();
    assert_eq!(n, 1);
}
