//! The staged pipeline: one capture on several threads, output identical to
//! the single-threaded [`crate::Pipeline`].
//!
//! Three stages, each seeing the frames in capture order:
//!
//! 1. the calling thread reads frames and appends each to a batch: its bytes
//!    (copied into one reused buffer) and where and when it was captured;
//!    full batches (1024 frames or 512 KiB of frame bytes) go to stage 2;
//! 2. one thread decodes the frames, runs the flow table and the
//!    capture-quality tracker, and adds each frame's flow verdict
//!    ([`PacketFlowInfo`]) and flow events (plain `Copy` values) to the
//!    batch, which then goes, behind an [`Arc`], to every stage-3 worker;
//! 3. each worker owns a fixed subset of the detectors (the first one also
//!    the stall ledger) and its own [`Decoder`]: it decodes every frame of
//!    the batch again (the decoder's only state, IP reassembly, evolves
//!    exactly as stage 2's since it sees the same frames in the same order)
//!    and delivers the frame's events, then the packet, to its consumers in
//!    the order [`crate::Pipeline::push`] does.
//!
//! Each detector and the ledger thus see the same calls in the same order as
//! single-threaded, and a detector reads nothing but its own state and, at
//! finish, the [`FinishContext`](pcapsleuth_detect::FinishContext), so the
//! findings are the same. The flow table's end-of-input events, the finish
//! calls and the sorting of the findings run on the calling thread once the
//! other stages are done, exactly as single-threaded.
//!
//! Memory: the channels between stages hold 4 batches each, so a slow stage
//! holds the earlier ones back instead of letting memory grow. The worker
//! that drops a batch last sends it back to stage 1, which reuses it: no
//! batch buffer is allocated in the steady state.
//!
//! Failure: a stage only blocks sending to the next stage, which fails as
//! soon as that stage is gone (a panic drops its receiver), or receiving,
//! which ends when the previous stage drops its sender (at the end of the
//! input, or when it panics). A panic in stage 2 or 3 is re-raised on the
//! calling thread at the end of the input: nothing hangs.

use crate::pipeline::{conclude, Consumers, FlowDetail, Front, PipelineOutput};
use pcapsleuth_decode::Decoder;
use pcapsleuth_detect::{Detector, PacketContext};
use pcapsleuth_flow::{FlowConfig, FlowEvent, PacketFlowInfo, PacketMeta};
use pcapsleuth_ingest::{Frame, InterfaceInfo, LinkType};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Most frames in one batch.
const BATCH_FRAMES: usize = 1024;
/// A batch is sent once its frame bytes reach this size (bytes).
const BATCH_BYTES: usize = 1 << 19;
/// Batches queued between two stages before the earlier one waits.
const CHANNEL_DEPTH: usize = 4;

/// One frame of a batch.
#[derive(Debug, Clone, Copy)]
struct Rec {
    meta: PacketMeta,
    linktype: LinkType,
    /// `frame.len`, bytes.
    orig_len: u32,
    /// End of the frame's bytes in [`Batch::bytes`] (it starts where the
    /// previous frame's end).
    bytes_end: usize,
    /// End of the frame's events in [`Batch::events`] (set by stage 2).
    events_end: usize,
    /// The flow verdict (set by stage 2).
    info: PacketFlowInfo,
}

/// Frames handed from stage to stage.
#[derive(Debug, Default)]
struct Batch {
    bytes: Vec<u8>,
    events: Vec<FlowEvent>,
    frames: Vec<Rec>,
}

impl Batch {
    fn clear(&mut self) {
        self.bytes.clear();
        self.events.clear();
        self.frames.clear();
    }

    fn is_full(&self) -> bool {
        self.frames.len() >= BATCH_FRAMES || self.bytes.len() >= BATCH_BYTES
    }

    /// Frame `rec` (whose bytes start at `start`).
    fn frame(&self, rec: &Rec, start: usize) -> Frame<'_> {
        Frame {
            number: rec.meta.frame,
            ts: rec.meta.ts,
            interface: rec.meta.interface,
            linktype: rec.linktype,
            orig_len: rec.orig_len,
            data: self.bytes.get(start..rec.bytes_end).unwrap_or(&[]),
        }
    }
}

/// What a stage-3 worker gets once every thread has started.
type Setup3 = (Consumers, Receiver<Arc<Batch>>);
/// What the stage-2 thread gets once every thread has started.
type Setup2 = (Front, Receiver<Batch>, Vec<SyncSender<Arc<Batch>>>);

/// One capture on several threads (see the module documentation); the same
/// output as [`crate::Pipeline`] without an observer.
pub struct StagedPipeline {
    batch: Batch,
    to_stage2: Option<SyncSender<Batch>>,
    recycled: Receiver<Batch>,
    stage2: JoinHandle<Option<Front>>,
    stage3: Vec<JoinHandle<Option<Consumers>>>,
}

impl StagedPipeline {
    /// A staged pipeline running `detectors` with `workers` (at least 1)
    /// stage-3 threads sharing them (the ledger and the first detectors go
    /// to the first, and so on round-robin), plus the stage-2 thread; the
    /// calling thread is stage 1; `detail` says what is kept of every stream
    /// for after the capture. `None` when a thread cannot be started.
    pub fn start(
        flow_config: FlowConfig,
        detectors: Vec<Box<dyn Detector>>,
        workers: usize,
        detail: FlowDetail,
    ) -> Option<StagedPipeline> {
        let parts = split(Consumers::new(detectors, detail), workers);
        let (recycle_tx, recycled) = channel::<Batch>();
        let mut setups3: Vec<Sender<Setup3>> = Vec::with_capacity(parts.len());
        let mut stage3 = Vec::with_capacity(parts.len());
        for i in 0..parts.len() {
            let (setup_tx, setup_rx) = channel::<Setup3>();
            let recycle = recycle_tx.clone();
            let h = std::thread::Builder::new()
                .name(format!("pcapsleuth-detect-{i}"))
                .spawn(move || detect_stage(setup_rx, recycle))
                .ok()?;
            setups3.push(setup_tx);
            stage3.push(h);
        }
        drop(recycle_tx);
        let (setup2_tx, setup2_rx) = channel::<Setup2>();
        // On failure the threads started so far end when their setup
        // senders go.
        let stage2 = std::thread::Builder::new()
            .name("pcapsleuth-flow".to_string())
            .spawn(move || flow_stage(setup2_rx))
            .ok()?;
        let mut to_stage3 = Vec::with_capacity(parts.len());
        for (part, setup) in parts.into_iter().zip(setups3) {
            let (tx, rx) = sync_channel::<Arc<Batch>>(CHANNEL_DEPTH);
            // The worker is alive and waiting for exactly this message.
            let _ = setup.send((part, rx));
            to_stage3.push(tx);
        }
        let (tx, rx) = sync_channel::<Batch>(CHANNEL_DEPTH);
        let _ = setup2_tx.send((Front::new(flow_config, detail), rx, to_stage3));
        Some(StagedPipeline {
            batch: Batch::default(),
            to_stage2: Some(tx),
            recycled,
            stage2,
            stage3,
        })
    }

    /// Feed one frame (copied); the batch goes to stage 2 when full.
    pub fn push(&mut self, frame: &Frame<'_>) {
        let b = &mut self.batch;
        b.bytes.extend_from_slice(frame.data);
        b.frames.push(Rec {
            meta: PacketMeta {
                frame: frame.number,
                ts: frame.ts,
                interface: frame.interface,
            },
            linktype: frame.linktype,
            orig_len: frame.orig_len,
            bytes_end: b.bytes.len(),
            events_end: 0,
            info: PacketFlowInfo::default(),
        });
        if b.is_full() {
            self.send();
        }
    }

    /// Hand the current batch to stage 2 and take an empty one.
    fn send(&mut self) {
        let mut next = self.recycled.try_recv().unwrap_or_default();
        next.clear();
        let full = std::mem::replace(&mut self.batch, next);
        // When stage 2 is gone (it panicked), `finish` re-raises its panic.
        if let Some(tx) = &self.to_stage2 {
            if tx.send(full).is_err() {
                self.to_stage2 = None;
            }
        }
    }

    /// End of input: as [`crate::Pipeline::finish`] once every stage is
    /// done. A panic of stage 2 or 3 is resumed here.
    pub fn finish(mut self, interfaces: &[InterfaceInfo]) -> PipelineOutput {
        if !self.batch.frames.is_empty() {
            self.send();
        }
        self.to_stage2 = None;
        let front = join(self.stage2);
        let mut parts = Vec::with_capacity(self.stage3.len());
        for h in self.stage3 {
            parts.extend(join(h));
        }
        let consumers = rejoin(parts);
        match front {
            Some(front) => conclude(front, consumers, interfaces, &mut ()),
            // Only when `start` failed, which returned no pipeline.
            None => PipelineOutput::default(),
        }
    }
}

/// Wait for a stage's thread; its panic is resumed here.
fn join<T>(h: JoinHandle<Option<T>>) -> Option<T> {
    match h.join() {
        Ok(v) => v,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// `consumers` over `workers` (at least 1, at most one per detector) parts:
/// the ledger on the first with the detectors that read it (they hear from
/// it as it concludes streams: [`Detector::on_ledger_concluded`]), the other
/// detectors round-robin starting at the second.
fn split(consumers: Consumers, workers: usize) -> Vec<Consumers> {
    let n = workers.clamp(1, consumers.detectors.len().max(1));
    let mut parts: Vec<Consumers> = (0..n).map(|_| Consumers::none()).collect();
    let Consumers { detectors, ledger } = consumers;
    if let Some(p) = parts.first_mut() {
        p.ledger = ledger;
    }
    for (k, d) in detectors.into_iter().enumerate() {
        let part = if d.1.ledger_causes().is_empty() {
            (k + 1) % n
        } else {
            0
        };
        if let Some(p) = parts.get_mut(part) {
            p.detectors.push(d);
        }
    }
    parts
}

/// The consumers of every part, detectors back in their original order.
fn rejoin(parts: Vec<Consumers>) -> Consumers {
    let mut all = Consumers::none();
    for p in parts {
        all.detectors.extend(p.detectors);
        if p.ledger.is_some() {
            all.ledger = p.ledger;
        }
    }
    all.detectors.sort_by_key(|(i, _)| *i);
    all
}

/// Stage 2: decode, flow table and capture quality for every batch, then
/// hand it to every stage-3 worker.
fn flow_stage(setup: Receiver<Setup2>) -> Option<Front> {
    let (mut front, batches, mut workers) = setup.recv().ok()?;
    for mut batch in batches {
        let Batch {
            bytes,
            events,
            frames,
        } = &mut batch;
        let mut start = 0;
        for rec in frames.iter_mut() {
            let frame = Frame {
                number: rec.meta.frame,
                ts: rec.meta.ts,
                interface: rec.meta.interface,
                linktype: rec.linktype,
                orig_len: rec.orig_len,
                data: bytes.get(start..rec.bytes_end).unwrap_or(&[]),
            };
            start = rec.bytes_end;
            rec.info = front.step(&frame, events, |pkt, _| pkt.flow);
            rec.events_end = events.len();
        }
        let batch = Arc::new(batch);
        // A worker that is gone (it panicked) fails the send; `finish`
        // re-raises its panic.
        workers.retain(|tx| tx.send(Arc::clone(&batch)).is_ok());
    }
    Some(front)
}

/// Stage 3: wait for its part, then feed it every batch.
fn detect_stage(setup: Receiver<Setup3>, recycle: Sender<Batch>) -> Option<Consumers> {
    let (mut part, batches) = setup.recv().ok()?;
    let mut decoder = Decoder::new();
    for batch in batches {
        feed(&mut part, &mut decoder, &batch);
        if let Some(b) = Arc::into_inner(batch) {
            // Stage 1 may be gone already; the batch is then just freed.
            let _ = recycle.send(b);
        }
    }
    Some(part)
}

/// Decode every frame of `batch` again and deliver its events and the
/// packet to `consumers`.
fn feed(consumers: &mut Consumers, decoder: &mut Decoder, batch: &Batch) {
    let (mut bytes_at, mut events_at) = (0, 0);
    for rec in &batch.frames {
        let frame = batch.frame(rec, bytes_at);
        let events = batch.events.get(events_at..rec.events_end).unwrap_or(&[]);
        bytes_at = rec.bytes_end;
        events_at = rec.events_end;
        let decoded = decoder.decode_frame(frame.linktype.0, frame.data, Some(frame.orig_len));
        let pkt = PacketContext {
            meta: rec.meta,
            decoded: &decoded,
            flow: rec.info,
        };
        consumers.packet(&pkt, events);
    }
}
