#![doc = include_str!("../README.md")]
//!
//! # Code layout
//! The detector records triggers and the segments that follow them
//! ([`ProbeTimerStall`]); [`ProbeTimerStall::diagnose`] clusters the triggers
//! and finds each burst's carrier at the end of the capture (plain-data
//! [`Diagnosis`] values), then adds the stall ledger's probe0 waits that no
//! trigger explains (`from_ledger.rs`: small window, seen from the peer), and
//! [`render`] writes the summary, remedy and evidence.

mod diagnosis;
mod from_ledger;
mod render;

pub use diagnosis::{Diagnosis, KernelTimer, ProbeTimerStallEvidence, TriggerKind};
pub use render::render;

use pcapsleuth_core::{Direction, FrameNo, StreamId, Timestamp};
use pcapsleuth_decode::IcmpKind;
use pcapsleuth_detect::followup::{FollowUp, SegRec};
use pcapsleuth_detect::{Detector, DetectorInfo, Finding, FinishContext, FlowEvent};
use pcapsleuth_flow::{SegmentEvent, StallEvent};

/// Detector id.
pub const ID: &str = "probe-timer-stall";

/// Shortest trigger → carrier gap reported, ns (a 200 ms timer seen early, with margin).
pub const MIN_GAP_NS: i64 = 150_000_000;
/// Longest trigger → carrier gap attributed to the trigger, ns.
pub const MAX_GAP_NS: i64 = 60_000_000_000;
/// Segments remembered per trigger to find the carrier and check the silence.
const SEGS_PER_TRIGGER: usize = 64;
/// Triggers of one sender at most this far apart (ns) form one burst.
pub const BURST_NS: i64 = 50_000_000;
/// Window after the carrier in which released bytes count as waiting, ns.
pub const RELEASE_NS: i64 = 10_000_000;

/// One trigger: an ICMP frag-needed / PTB quoting the flow, or a zero-window
/// re-opening the sender did not act on.
#[derive(Debug, Clone)]
struct Trigger {
    kind: TriggerKind,
    stream: StreamId,
    /// Direction of the sender whose bytes wait.
    dir: Direction,
    frame: FrameNo,
    ts: Timestamp,
    /// Relative sequence of the first waiting byte.
    offset: i64,
    /// MTU announced by the ICMP, bytes.
    mtu: Option<u32>,
    /// Data segments of the sender later than the trigger (by timestamp).
    segs: Vec<SegRec>,
}

#[derive(Debug, Clone, Copy, Default)]
struct ZeroWindowState {
    /// Frame/ts of the zero-window advertisement that started the episode.
    start: Option<(FrameNo, Timestamp)>,
    /// The sender probed during the episode.
    probed: bool,
}

/// The `probe-timer-stall` detector.
#[derive(Debug, Default)]
pub struct ProbeTimerStall {
    triggers: Vec<Trigger>,
    open: pcapsleuth_detect::StreamMap<(StreamId, Direction), Vec<usize>>,
    follow: FollowUp,
    snd: pcapsleuth_detect::StreamMap<(StreamId, Direction), (i64, i64)>,
    zero: pcapsleuth_detect::StreamMap<(StreamId, Direction), ZeroWindowState>,
    stalls: Vec<StallEvent>,
}

impl ProbeTimerStall {
    fn add_trigger(&mut self, mut t: Trigger) {
        // Look back for out-of-order frames already seen (later timestamps, earlier frame numbers).
        t.segs = self
            .follow
            .history(t.stream, t.dir)
            .filter(|r| r.ts.0 > t.ts.0)
            .copied()
            .collect();
        let key = (t.stream, t.dir);
        self.open.entry(key).or_default().push(self.triggers.len());
        self.triggers.push(t);
    }

    fn on_segment(&mut self, s: &SegmentEvent) {
        self.follow.on_segment(s);
        if s.duplicate_of.is_some() {
            return;
        }
        self.snd.insert((s.stream, s.dir), (s.snd_una, s.snd_nxt));
        // A sender probing into a zero window advertised by its peer.
        if let Some(z) = self.zero.get_mut(&(s.stream, s.dir)) {
            if z.start.is_some()
                && (s.analysis.zero_window_probe
                    || s.wireshark.zero_window_probe
                    || s.analysis.keep_alive
                    || s.payload_len > 0)
            {
                z.probed = true;
            }
        }
        if s.payload_len == 0 {
            return;
        }
        let rec = SegRec::from_event(s);
        if let Some(ids) = self.open.get_mut(&(s.stream, s.dir)) {
            ids.retain(|&i| {
                let Some(t) = self.triggers.get_mut(i) else {
                    return false;
                };
                if rec.ts.0 > t.ts.0 {
                    t.segs.push(rec);
                }
                t.segs.len() < SEGS_PER_TRIGGER && rec.ts.0 <= t.ts.0.saturating_add(MAX_GAP_NS)
            });
            if ids.is_empty() {
                self.open.remove(&(s.stream, s.dir));
            }
        }
    }

    fn on_window(&mut self, w: &pcapsleuth_flow::WindowChangeEvent) {
        // The advertiser is the segment's sender; the data sender is the other direction.
        let sender = (w.stream, w.dir.reverse());
        let zero_now = w.new_bytes == Some(0) || (w.new_bytes.is_none() && w.raw == 0);
        let z = self.zero.entry(sender).or_default();
        if zero_now {
            if z.start.is_none() {
                *z = ZeroWindowState {
                    start: Some((w.frame, w.ts)),
                    probed: false,
                };
            }
            return;
        }
        let Some(_) = z.start else { return };
        let probed = z.probed;
        *z = ZeroWindowState::default();
        if !probed {
            return;
        }
        let offset = self.snd.get(&sender).map_or(0, |&(_, nxt)| nxt);
        self.add_trigger(Trigger {
            kind: TriggerKind::ZeroWindow,
            stream: w.stream,
            dir: sender.1,
            frame: w.frame,
            ts: w.ts,
            offset,
            mtu: None,
            segs: Vec::new(),
        });
    }

    fn on_icmp(&mut self, e: &pcapsleuth_flow::IcmpErrorEvent) {
        if !matches!(e.kind, IcmpKind::FragNeeded | IcmpKind::PacketTooBig) {
            return;
        }
        let (Some(stream), Some(dir), Some(offset)) = (e.stream, e.quoted_dir, e.quoted_rel_seq)
        else {
            return;
        };
        // Stale quote: those bytes were already acknowledged.
        if self
            .snd
            .get(&(stream, dir))
            .is_some_and(|&(una, _)| offset < una)
        {
            return;
        }
        let self_addr = e.icmp_src == e.icmp_dst || e.icmp_src == e.quoted_src.addr;
        self.add_trigger(Trigger {
            kind: if self_addr {
                TriggerKind::SelfAddressedFragNeeded
            } else {
                TriggerKind::FragNeeded
            },
            stream,
            dir,
            frame: e.frame,
            ts: e.ts,
            offset,
            mtu: e.mtu,
            segs: Vec::new(),
        });
    }
}

impl Detector for ProbeTimerStall {
    fn info(&self) -> DetectorInfo {
        DetectorInfo {
            id: ID,
            aliases: &[],
            title: "Data held back until a ~200 ms TCP timer fired",
            explain: include_str!("../README.md"),
        }
    }

    fn on_flow_event(&mut self, event: &FlowEvent) {
        match event {
            FlowEvent::Segment(s) => self.on_segment(s),
            FlowEvent::IcmpError(e) => self.on_icmp(e),
            FlowEvent::WindowChange(w) => self.on_window(w),
            // Stalls with data (or not just a SYN) pending; the carrier's stall is evidence.
            FlowEvent::Stall(s) if s.pending_bytes > 0 || !s.pending_syn => {
                self.stalls.push(*s);
            }
            _ => {}
        }
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        self.diagnose(ctx).iter().map(render).collect()
    }
}

#[cfg(test)]
mod tests;
