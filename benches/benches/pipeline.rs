//! Throughput of each pipeline stage, in bytes of capture per second:
//! (a) ingest only, (b) ingest + decode, (c) ingest + decode + `FlowTable`
//! (`tcp.stream`, `tcp.analysis`), (c2) the pipeline without detectors (adds
//! capture-quality tracking and interface bookkeeping), (c3) c2 plus the stall
//! ledger, (d) full `analyze_path` (every detector and the ledger) on one
//! thread, (e) the same on the staged pipeline with 2 threads
//! (`AnalyzeOptions::capture_threads`: the calling thread reads; one thread
//! decodes and runs the flow table and capture quality; one runs the ledger
//! and the detectors). The detectors' own cost is d − c3; on 2 idle cores e
//! is bounded by its slowest stage and by half of d's work. Captures: a
//! generated ~64 MiB capture of 2000 interleaved TCP connections (in the temp
//! dir), the real 78 MB merge file of the shared corpus when it is present,
//! and the file named by `PCAPSLEUTH_BENCH_FILE` when set (e.g. the 1 GB
//! `tcp-heavy.pcap` of `../shared/bench/make-tcp-heavy.sh`; slow: minutes per
//! stage).
//!
//! Quick run: `cargo bench -p pcapsleuth-benches -- --quick`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use pcapsleuth_analyze::{analyze_path, observe_path, AnalyzeOptions, LedgerObserver};
use pcapsleuth_decode::Decoder;
use pcapsleuth_flow::{FlowConfig, FlowTable, PacketMeta};
use pcapsleuth_ingest::CaptureReader;
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

fn ingest(path: &Path) -> usize {
    let mut r = CaptureReader::open(path).expect("bench capture opens");
    let mut n = 0;
    while let Some(f) = r.next_frame().expect("reads") {
        n += f.data.len();
    }
    n
}

fn ingest_decode(path: &Path) -> usize {
    let mut r = CaptureReader::open(path).expect("bench capture opens");
    let mut d = Decoder::new();
    let mut n = 0;
    while let Some(f) = r.next_frame().expect("reads") {
        let decoded = d.decode(f.linktype.0, f.data);
        n += usize::from(black_box(&decoded).ip.is_some());
    }
    n
}

fn ingest_decode_flow(path: &Path) -> u64 {
    let mut r = CaptureReader::open(path).expect("bench capture opens");
    let mut d = Decoder::new();
    let mut flows = FlowTable::new(FlowConfig::default());
    let mut events = Vec::with_capacity(16);
    while let Some(f) = r.next_frame().expect("reads") {
        let meta = PacketMeta {
            frame: f.number,
            ts: f.ts,
            interface: f.interface,
        };
        let decoded = d.decode(f.linktype.0, f.data);
        events.clear();
        black_box(flows.on_packet(&meta, &decoded, &mut events));
    }
    events.clear();
    flows.finish(&mut events);
    flows.stream_count()
}

/// The pipeline without detectors: decode, flow table, capture quality.
fn pipeline_no_detectors(path: &Path) -> u64 {
    let (out, _) = observe_path(path, Vec::new(), &mut ()).expect("bench capture opens");
    out.tcp_streams
}

/// The pipeline without detectors, feeding the stall ledger.
fn pipeline_ledger(path: &Path) -> usize {
    let mut ledger = LedgerObserver::new(true);
    let _ = observe_path(path, Vec::new(), &mut ledger).expect("bench capture opens");
    ledger.finish().map_or(0, |l| l.streams.len())
}

/// Every stage on `path`, in a group named `name`.
fn bench_file(c: &mut Criterion, name: &str, path: &Path, bytes: u64) {
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Bytes(bytes));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(10));
    g.bench_function("a_ingest", |b| b.iter(|| black_box(ingest(path))));
    g.bench_function("b_ingest_decode", |b| {
        b.iter(|| black_box(ingest_decode(path)))
    });
    g.bench_function("c_ingest_decode_flow", |b| {
        b.iter(|| black_box(ingest_decode_flow(path)))
    });
    g.bench_function("c2_pipeline_quality", |b| {
        b.iter(|| black_box(pipeline_no_detectors(path)))
    });
    g.bench_function("c3_pipeline_quality_ledger", |b| {
        b.iter(|| black_box(pipeline_ledger(path)))
    });
    g.bench_function("d_analyze", |b| {
        b.iter(|| black_box(analyze_path(path, &AnalyzeOptions::default())))
    });
    let staged = AnalyzeOptions {
        capture_threads: 2,
        ..AnalyzeOptions::default()
    };
    g.bench_function("e_analyze_staged_2_threads", |b| {
        b.iter(|| black_box(analyze_path(path, &staged)))
    });
    g.finish();
}

fn stages(c: &mut Criterion) {
    let (path, stats) =
        pcapsleuth_benches::synthetic_capture().expect("synthetic capture written to the temp dir");
    eprintln!(
        "synthetic capture {}: {} bytes, {} packets, {} connections",
        path.display(),
        stats.bytes,
        stats.packets,
        stats.connections
    );
    bench_file(c, "synthetic", &path, stats.bytes);

    let real = pcapsleuth_testkit::shared_dir()
        .map(|d| d.join("captures/derived__bench/real-traffic-merged-ethernet.pcap"));
    if let Some(real) = real.filter(|p| p.is_file()) {
        let bytes = std::fs::metadata(&real).map(|m| m.len()).unwrap_or(0);
        bench_file(c, "real-merged", &real, bytes);
    }
    if let Some(file) = std::env::var_os("PCAPSLEUTH_BENCH_FILE").map(std::path::PathBuf::from) {
        let bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
        bench_file(c, "file", &file, bytes);
    }
    let _ = std::fs::remove_file(&path);
}

criterion_group!(benches, stages);
criterion_main!(benches);
