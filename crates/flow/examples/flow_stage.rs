//! `flow_stage decode|flow|trace FILE`: time the flow table alone (`trace`
//! also prints every stall and `FlowEnded` event).
//!
//! Reads FILE with `pcapsleuth-ingest`, decodes every frame and (stage
//! `flow`) drives a [`FlowTable`] over it, then builds the summaries as the
//! pipeline does at the end. Prints the wall time of the loop, the table's
//! [`FlowTable::approx_heap_bytes`] before `finish` and the peak RSS
//! (`VmHWM`). The flow stage's own cost is `flow` minus `decode`.
//! Run: `cargo run --release -p pcapsleuth-flow --example flow_stage -- flow FILE`.

use pcapsleuth_decode::Decoder;
use pcapsleuth_flow::{FlowConfig, FlowTable, PacketMeta};
use pcapsleuth_ingest::CaptureReader;
use std::time::Instant;

/// Peak resident set size, KiB (`VmHWM` of `/proc/self/status`).
fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [stage, file] = args.as_slice() else {
        eprintln!("usage: flow_stage decode|flow FILE");
        std::process::exit(2);
    };
    let t0 = Instant::now();
    let mut r = match CaptureReader::open(std::path::Path::new(file)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let mut d = Decoder::new();
    let mut flows = FlowTable::new(FlowConfig::default());
    let mut events = Vec::with_capacity(16);
    let mut frames = 0u64;
    let mut n_events = 0usize;
    while let Ok(Some(f)) = r.next_frame() {
        frames += 1;
        let decoded = d.decode_frame(f.linktype.0, f.data, Some(f.orig_len));
        if stage == "flow" || stage == "trace" {
            let meta = PacketMeta {
                frame: f.number,
                ts: f.ts,
                interface: f.interface,
            };
            events.clear();
            flows.on_packet(&meta, &decoded, &mut events);
            n_events += events.len();
            if stage == "trace" {
                for e in &events {
                    if matches!(
                        e,
                        pcapsleuth_flow::FlowEvent::Stall(_)
                            | pcapsleuth_flow::FlowEvent::FlowEnded(_)
                    ) {
                        println!("{}: {e:?}", f.number.get());
                    }
                }
            }
        }
    }
    let t_loop = t0.elapsed();
    let heap = flows.approx_heap_bytes();
    events.clear();
    flows.finish(&mut events);
    let sums = flows.summaries();
    let streams = flows.stream_count();
    println!(
        "{stage}: {frames} frames, {streams} tcp.stream, {n_events} events; loop {:.3} s, total {:.3} s; \
         approx_heap_bytes {heap} ({} B/stream); {} summaries; peak RSS {:?} KiB",
        t_loop.as_secs_f64(),
        t0.elapsed().as_secs_f64(),
        heap / (streams.max(1) as usize),
        sums.len(),
        peak_rss_kib()
    );
}
