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
use pcapsleuth_detect::{
    Bound, Detector, DetectorInfo, Finding, FinishContext, FlowEvent, LedgerFrames, StallEntry,
};
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
/// Most flow silences held at once (the stall table, about 32 bytes an
/// entry): each gives a diagnosis its `flow_silent_ms`; past it a diagnosis
/// whose carrier ended a later silence has none, and the report says so (a
/// `detector_limit` warning). The table holds the silences of live streams
/// and, of ended ones, those before a carrier its diagnoses or the ledger's
/// probe0 entries name ([`LedgerFrames`]: the rest go once the ledger has
/// concluded the stream and the flow table has ended it), so this is a
/// safety bound.
pub const MAX_STALLS: usize = 1_000_000;

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

/// SND.UNA and SND.NXT (relative, bytes) of one direction's sender after
/// its last segment; `i64::MIN` in both before any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Snd(i64, i64);

impl Default for Snd {
    fn default() -> Self {
        Snd(i64::MIN, i64::MIN)
    }
}

impl Snd {
    fn get(self) -> Option<(i64, i64)> {
        (self != Snd::default()).then_some((self.0, self.1))
    }
}

/// Everything kept for one stream past its SYN (or quoted by an ICMP
/// error): 40 bytes inline; zero windows and triggers in [`Cold`].
#[derive(Debug, Default)]
struct Stream {
    /// Per direction of the sender ([`Direction::index`]).
    snd: [Snd; 2],
    cold: Option<Box<Cold>>,
}

/// What a stream keeps from its first zero window or trigger on.
#[derive(Debug, Default)]
struct Cold {
    /// Zero-window episode of the peer, per data sender direction.
    zero: [ZeroWindowState; 2],
    triggers: Vec<Trigger>,
    /// Triggers (indices into `triggers`) still collecting segments, per direction.
    open: [Vec<usize>; 2],
}

/// The `probe-timer-stall` detector.
///
/// Memory: nothing per stream that sent only SYNs; a per-stream entry past
/// the SYN (40 bytes inline; its zero windows and triggers boxed) until its
/// [`FlowEvent::FlowEnded`], when its triggers are
/// diagnosed and only the diagnoses are kept. Capture-wide: the follow-up
/// history ([`FollowUp`], fixed size) and one entry per stall with data
/// pending of a live stream, and of an ended one per stall its diagnoses or
/// the ledger's probe0 entries may name, at most [`MAX_STALLS`].
#[derive(Debug)]
pub struct ProbeTimerStall {
    streams: pcapsleuth_detect::StreamMap<StreamId, Stream>,
    follow: FollowUp,
    /// (stream, last frame of the silence) → silence (ns), of the first
    /// stall with data (or not just a SYN) pending ending there.
    stalls: LedgerFrames<i64>,
    /// Burst diagnoses of ended streams, with their order key (stream,
    /// direction, first trigger's time and frame); `flow` and
    /// `flow_silent_ms` are filled in at the end.
    ended: Vec<((StreamId, usize, Timestamp, FrameNo), Diagnosis)>,
    /// [`MAX_STALLS`], and the silences not kept past it.
    stalls_bound: Bound,
}

impl Default for ProbeTimerStall {
    fn default() -> Self {
        ProbeTimerStall::with_max_stalls(MAX_STALLS)
    }
}

impl ProbeTimerStall {
    /// A detector keeping at most `max` flow silences (default
    /// [`MAX_STALLS`]); [`Detector::limits`] says how many more there were.
    pub fn with_max_stalls(max: usize) -> Self {
        ProbeTimerStall {
            streams: Default::default(),
            follow: FollowUp::default(),
            stalls: Default::default(),
            ended: Vec::new(),
            stalls_bound: Bound::new("flow silences (for flow_silent_ms)", max as u64)
                .with_scope("at a time")
                .with_effect(
                    "a diagnosis whose carrier ended a refused silence has flow_silent_ms null; no finding is lost",
                ),
        }
    }

    /// Streams with live state (past the SYN, not ended).
    pub fn active_streams(&self) -> usize {
        self.streams.len()
    }

    /// Heap bytes held for live streams (by capacity: map slots, boxes,
    /// triggers and their segments), excluding the capture-wide history,
    /// stalls and the diagnoses of ended streams.
    pub fn state_bytes(&self) -> usize {
        let slot = std::mem::size_of::<(StreamId, Stream)>() + 1;
        let per = |c: &Cold| {
            std::mem::size_of::<Cold>()
                + c.triggers.capacity() * std::mem::size_of::<Trigger>()
                + c.triggers
                    .iter()
                    .map(|t| t.segs.capacity() * std::mem::size_of::<SegRec>())
                    .sum::<usize>()
                + c.open.iter().map(|o| o.capacity() * 8).sum::<usize>()
        };
        self.streams.capacity() * slot
            + self
                .streams
                .values()
                .filter_map(|s| s.cold.as_deref())
                .map(per)
                .sum::<usize>()
    }

    fn add_trigger(&mut self, mut t: Trigger) {
        // Look back for out-of-order frames already seen (later timestamps, earlier frame numbers).
        t.segs = self
            .follow
            .history(t.stream, t.dir)
            .filter(|r| r.ts.0 > t.ts.0)
            .collect();
        let c = self
            .streams
            .entry(t.stream)
            .or_default()
            .cold
            .get_or_insert_with(Box::default);
        c.open[t.dir.index()].push(c.triggers.len());
        c.triggers.push(t);
    }

    fn on_segment(&mut self, s: &SegmentEvent) {
        self.follow.on_segment(s);
        if s.duplicate_of.is_some() {
            return;
        }
        let st = match self.streams.get_mut(&s.stream) {
            Some(st) => st,
            // A stream's SYNs: nothing to keep yet (no zero window, no
            // trigger can wait on them; an ICMP quoting a SYN-only stream
            // finds no SND.UNA, as for a stream never seen).
            None if s.flags.syn() && s.payload_len == 0 => return,
            None => self.streams.entry(s.stream).or_default(),
        };
        let di = s.dir.index();
        st.snd[di] = Snd(s.snd_una, s.snd_nxt);
        let Some(c) = st.cold.as_deref_mut() else {
            return;
        };
        // A sender probing into a zero window advertised by its peer.
        let z = &mut c.zero[di];
        if z.start.is_some()
            && (s.analysis.zero_window_probe
                || s.wireshark.zero_window_probe
                || s.analysis.keep_alive
                || s.payload_len > 0)
        {
            z.probed = true;
        }
        if s.payload_len == 0 || c.open[di].is_empty() {
            return;
        }
        let rec = SegRec::from_event(s);
        let triggers = &mut c.triggers;
        c.open[di].retain(|&i| {
            let Some(t) = triggers.get_mut(i) else {
                return false;
            };
            if rec.ts.0 > t.ts.0 {
                t.segs.push(rec);
            }
            t.segs.len() < SEGS_PER_TRIGGER && rec.ts.0 <= t.ts.0.saturating_add(MAX_GAP_NS)
        });
    }

    fn on_window(&mut self, w: &pcapsleuth_flow::WindowChangeEvent) {
        // The advertiser is the segment's sender; the data sender is the other direction.
        let sender = w.dir.reverse();
        let zero_now = w.new_bytes == Some(0) || (w.new_bytes.is_none() && w.raw == 0);
        let st = match self.streams.get_mut(&w.stream) {
            Some(st) => st,
            None if !zero_now => return,
            None => self.streams.entry(w.stream).or_default(),
        };
        let snd = st.snd[sender.index()];
        let c = match st.cold.as_deref_mut() {
            Some(c) => c,
            None if !zero_now => return,
            None => st.cold.get_or_insert_with(Box::default),
        };
        let z = &mut c.zero[sender.index()];
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
        let offset = snd.get().map_or(0, |(_, nxt)| nxt);
        self.add_trigger(Trigger {
            kind: TriggerKind::ZeroWindow,
            stream: w.stream,
            dir: sender,
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
            .streams
            .get(&stream)
            .and_then(|st| st.snd[dir.index()].get())
            .is_some_and(|(una, _)| offset < una)
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

    fn on_stall(&mut self, s: &StallEvent) {
        if self.stalls.len() as u64 >= self.stalls_bound.limit
            && !self.stalls.contains(s.stream, s.end_frame)
        {
            self.stalls_bound.refuse(s.end_frame);
            return;
        }
        self.stalls.insert(
            s.stream,
            s.end_frame,
            s.end_ts.0.saturating_sub(s.start_ts.0),
        );
    }

    /// The stream left the flow table: diagnose its triggers now (keeping
    /// the silences before their carriers), drop its state.
    fn on_flow_ended(&mut self, stream: StreamId) {
        self.follow.end_stream(stream);
        if let Some(c) = self.streams.remove(&stream).and_then(|st| st.cold) {
            let out = diagnosis::diagnose_stream(&c.triggers);
            let carriers: Vec<FrameNo> =
                out.iter().map(|(_, d)| d.evidence.carrier_frame).collect();
            self.stalls.keep(stream, &carriers);
            self.ended.extend(out);
        }
        self.stalls.flow_ended(stream);
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

    /// The ledger's `Probe0` waits (`from_ledger`/`diagnose`).
    fn ledger_causes(&self) -> pcapsleuth_ledger::CauseSet {
        pcapsleuth_ledger::CauseSet::of(&[pcapsleuth_ledger::StallCause::Probe0])
    }

    /// Keep the silences before the frames the stream's probe0 entries may
    /// cite as carriers (`from_ledger`); the others go once it has ended.
    fn on_ledger_concluded(&mut self, stream: StreamId, entries: &[StallEntry]) {
        let named: Vec<FrameNo> = entries
            .iter()
            .filter(|e| e.cause == pcapsleuth_ledger::StallCause::Probe0)
            .flat_map(|e| [Some(e.end_frame), e.evidence.trigger_frame])
            .flatten()
            .collect();
        self.stalls.keep(stream, &named);
        self.stalls.ledger_concluded(stream);
    }

    fn on_flow_event(&mut self, event: &FlowEvent) {
        match event {
            FlowEvent::Segment(s) => self.on_segment(s),
            FlowEvent::IcmpError(e) => self.on_icmp(e),
            FlowEvent::WindowChange(w) => self.on_window(w),
            // Stalls with data (or not just a SYN) pending; the carrier's stall is evidence.
            FlowEvent::Stall(s) if s.pending_bytes > 0 || !s.pending_syn => self.on_stall(s),
            FlowEvent::FlowEnded(e) => self.on_flow_ended(e.stream),
            _ => {}
        }
    }

    /// [`MAX_STALLS`], when more flow silences than that were seen.
    fn limits(&self) -> Vec<Bound> {
        self.stalls_bound.if_reached().into_iter().collect()
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        self.diagnose(ctx).iter().map(render).collect()
    }
}

#[cfg(test)]
mod tests;
