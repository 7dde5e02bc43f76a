#![doc = include_str!("../README.md")]
//!
//! # Code layout
//! [`WindowRetraction`] follows every TCP direction's right window edge and
//! the data sent towards it (this file); [`WindowRetraction::diagnose`] turns
//! each direction that retracted into a plain-data [`Diagnosis`]
//! (`diagnose.rs`), and [`render()`] writes its summary, remedy and evidence
//! (`render.rs`).

mod diagnose;
mod render;

pub use diagnose::{Diagnosis, DroppedSegment, RetractionEvidence, WindowRetractionEvidence};
pub use render::render;

use pcapsleuth_core::{Direction, FrameNo, StreamId, Timestamp};
use pcapsleuth_detect::{
    Detector, DetectorInfo, Finding, FinishContext, FlowEvent, StreamMap, StreamSlots,
};
use pcapsleuth_flow::SegmentEvent;
use std::collections::VecDeque;

/// Detector id.
pub const ID: &str = "window-retraction";

/// Retractions listed in the evidence per direction (`count` keeps the total).
pub const MAX_LISTED: usize = 32;

/// Dropped segments listed (and cited) per direction (`dropped_segments`
/// keeps the total).
pub const MAX_DROPS_LISTED: usize = 16;

/// Slack added to the handshake RTT (ns): data the sender put on the wire up
/// to one RTT plus this after the retraction left the receiver was sent before
/// the sender could know of it. Window probes come later: Linux arms the
/// probe0 timer for at least `TCP_RTO_MIN` (200 ms) after the zero window
/// reaches the sender (`tcp_check_probe_timer`).
pub const INFLIGHT_SLACK_NS: i64 = 50_000_000;

/// A re-send of dropped data comes at least half a handshake RTT, and at
/// least this long (ns), after the first transmission: the sender must learn
/// of the loss (RTO, duplicate ACKs). A copy captured sooner is a duplicate
/// made by the capture or the network, not a re-send.
pub const MIN_RESEND_GAP_NS: i64 = 1_000_000;

/// Sender segments remembered per direction (only those not yet acknowledged
/// are kept): the data in flight when a retraction happens.
const SENT_RING: usize = 256;
/// Retractions followed at once per direction for dropped data.
const MAX_WATCHES: usize = 16;
/// Transmissions into one retracted space remembered.
const MAX_RANGES: usize = 64;

/// One advertisement of the receiver: a segment's ACK and scaled window.
#[derive(Debug, Clone, Copy)]
struct Adv {
    frame: FrameNo,
    ts: Timestamp,
    /// Relative ACK, bytes.
    ack: i64,
    /// Scaled window, bytes.
    window: u64,
    /// Raw window field.
    raw: u16,
}

impl Adv {
    /// The right window edge: ACK + scaled window (relative sequence, bytes).
    fn edge(&self) -> i64 {
        self.ack
            .saturating_add(i64::try_from(self.window).unwrap_or(i64::MAX))
    }
}

/// New bytes the sender put on the wire (one first transmission).
#[derive(Debug, Clone, Copy)]
struct Sent {
    frame: FrameNo,
    ts: Timestamp,
    /// First new byte (relative sequence).
    seq: i64,
    /// One past the last byte (relative sequence).
    end: i64,
}

/// Bytes sent into a retracted space: `[seq, end)` clipped to it.
#[derive(Debug, Clone, Copy)]
struct Range {
    frame: FrameNo,
    ts: Timestamp,
    seq: i64,
    end: i64,
    dropped: bool,
}

/// A retraction followed for data sent into it and later re-sent.
#[derive(Debug, Clone)]
struct Watch {
    /// Index of its entry in `DirState::listed`, when listed.
    listed: Option<usize>,
    new_edge: i64,
    prev_edge: i64,
    /// Data captured up to this instant was sent before the sender knew.
    horizon: Timestamp,
    ranges: Vec<Range>,
}

/// Per (`tcp.stream`, direction of the receiver's segments): the hot state
/// every segment touches; what retractions add lives in [`Retracted`], from
/// the direction's first retraction.
#[derive(Debug, Clone, Default)]
struct DirState {
    /// The receiver's last advertisement (latest ACK seen).
    last: Option<Adv>,
    /// Bytes per window unit (2^shift), from a non-zero scaled window.
    factor: Option<u64>,
    /// Highest relative sequence + 1 the sender has sent.
    snd_nxt: Option<i64>,
    ring: VecDeque<Sent>,
    rx: Option<Box<Retracted>>,
}

/// The retractions of one direction and the data sent into them.
#[derive(Debug, Clone, Default)]
struct Retracted {
    listed: Vec<RetractionEvidence>,
    count: u64,
    max_retracted: u64,
    below_unit: u64,
    to_zero: u64,
    sent_into: u64,
    watches: VecDeque<Watch>,
    drops: Vec<DroppedSegment>,
    dropped_segments: u64,
    dropped_bytes: u64,
    /// Earliest and latest timestamp of the cited frames (ns).
    span: Option<(i64, i64)>,
}

impl Retracted {
    fn widen(&mut self, ts: Timestamp) {
        self.span = Some(match self.span {
            None => (ts.0, ts.0),
            Some((a, b)) => (a.min(ts.0), b.max(ts.0)),
        });
    }

    /// `cur` moved the right edge left of `prev`'s; `ring` holds the data in flight.
    fn retracted(
        &mut self,
        factor: Option<u64>,
        ring: &VecDeque<Sent>,
        (prev, cur): (Adv, Adv),
        inflight_ns: i64,
    ) {
        let (prev_edge, new_edge) = (prev.edge(), cur.edge());
        let bytes = u64::try_from(prev_edge.saturating_sub(new_edge)).unwrap_or(0);
        let below = factor.map(|f| bytes < f);
        self.count += 1;
        self.max_retracted = self.max_retracted.max(bytes);
        self.below_unit += u64::from(below == Some(true));
        self.to_zero += u64::from(cur.window == 0);
        let mut ranges = Vec::new();
        let mut sent_into = 0u64;
        for s in ring {
            if let Some(r) = clip(s.frame, s.ts, s.seq, s.end, new_edge, prev_edge) {
                sent_into += span_len(r.seq, r.end);
                if ranges.len() < MAX_RANGES {
                    ranges.push(r);
                }
            }
        }
        self.sent_into += sent_into;
        let listed = (self.listed.len() < MAX_LISTED).then(|| {
            self.listed.push(RetractionEvidence {
                frame: cur.frame,
                prev_frame: prev.frame,
                prev_right_edge: prev_edge,
                new_right_edge: new_edge,
                retracted_bytes: bytes,
                ack: cur.ack,
                window_bytes: cur.window,
                window_field: cur.raw,
                prev_ack: prev.ack,
                prev_window_bytes: prev.window,
                to_zero_window: cur.window == 0,
                below_scale_unit: below,
                sent_into_bytes: sent_into,
                dropped_bytes: 0,
            });
            self.widen(prev.ts);
            self.widen(cur.ts);
            self.listed.len() - 1
        });
        if self.watches.len() >= MAX_WATCHES {
            self.watches.pop_front();
        }
        self.watches.push_back(Watch {
            listed,
            new_edge,
            prev_edge,
            horizon: Timestamp(cur.ts.0.saturating_add(inflight_ns)),
            ranges,
        });
    }

    /// New bytes `[new_seq, end)` of `seg` may land in a watched retracted space.
    fn new_data(&mut self, seg: &SegmentEvent, new_seq: i64, end: i64) {
        let mut added = 0u64;
        for w in self.watches.iter_mut().filter(|w| seg.ts <= w.horizon) {
            if let Some(r) = clip(seg.frame, seg.ts, new_seq, end, w.new_edge, w.prev_edge) {
                let n = span_len(r.seq, r.end);
                added += n;
                if let Some(e) = w.listed.and_then(|i| self.listed.get_mut(i)) {
                    e.sent_into_bytes += n;
                }
                if w.ranges.len() < MAX_RANGES {
                    w.ranges.push(r);
                }
            }
        }
        self.sent_into += added;
    }

    /// Bytes `[seq, end)` sent again: those sent into a retracted space,
    /// not acknowledged since and first sent at least `min_gap_ns` earlier
    /// were dropped (a copy captured at the same moment, as a tap duplicating
    /// packets makes, is not a re-send).
    fn resent(&mut self, seg: &SegmentEvent, seq: i64, end: i64, acked: i64, min_gap_ns: i64) {
        // (original frame, its timestamp, first and one-past-last dropped
        // byte): once per original, its bytes the hull of its parts in the
        // spaces of several retractions.
        let mut found: Vec<(FrameNo, Timestamp, i64, i64)> = Vec::new();
        for w in self.watches.iter_mut() {
            let mut in_watch = 0u64;
            let old = |r: &&mut Range| seg.ts.0.saturating_sub(r.ts.0) >= min_gap_ns;
            for r in w
                .ranges
                .iter_mut()
                .filter(|r| !r.dropped && r.end > acked)
                .filter(old)
            {
                if seq.max(r.seq) < end.min(r.end) {
                    r.dropped = true;
                    let lo = r.seq.max(acked);
                    in_watch += span_len(lo, r.end);
                    match found.iter_mut().find(|f| f.0 == r.frame) {
                        Some(f) => (f.2, f.3) = (f.2.min(lo), f.3.max(r.end)),
                        None => found.push((r.frame, r.ts, lo, r.end)),
                    }
                }
            }
            if let Some(e) = w.listed.and_then(|i| self.listed.get_mut(i)) {
                e.dropped_bytes += in_watch;
            }
        }
        if found.is_empty() {
            return;
        }
        self.widen(seg.ts);
        for (frame, ts, lo, hi) in found {
            let bytes = span_len(lo, hi);
            self.widen(ts);
            self.dropped_segments += 1;
            self.dropped_bytes += bytes;
            if self.drops.len() < MAX_DROPS_LISTED {
                self.drops.push(DroppedSegment {
                    original_frame: frame,
                    retransmission_frame: seg.frame,
                    bytes,
                });
            }
        }
    }
}

impl DirState {
    /// A data segment of the sender: new bytes may land in a retracted
    /// space; re-sent bytes that were sent into one and never acknowledged
    /// were dropped by the receiver.
    fn sender_data(&mut self, seg: &SegmentEvent, min_gap_ns: i64) {
        let (seq, end) = (seg.rel_seq, seg.rel_seq + i64::from(seg.payload_len));
        let acked = self.last.map_or(i64::MIN, |a| a.ack);
        if let Some(n) = self.snd_nxt.filter(|n| seq < *n) {
            if let Some(rx) = self.rx.as_mut() {
                rx.resent(seg, seq, end.min(n), acked, min_gap_ns);
            }
        }
        let new_seq = self.snd_nxt.map_or(seq, |n| seq.max(n));
        if end <= new_seq {
            return;
        }
        self.snd_nxt = Some(end);
        if self.last.is_none() {
            // No placed advertisement from the receiver yet (none seen, or
            // its window scale is unknown): nothing can retract, keep nothing.
            return;
        }
        if self.ring.len() >= SENT_RING {
            self.ring.pop_front();
        }
        pcapsleuth_core::grow::push_back(
            &mut self.ring,
            Sent {
                frame: seg.frame,
                ts: seg.ts,
                seq: new_seq,
                end,
            },
        );
        if let Some(rx) = self.rx.as_mut() {
            rx.new_data(seg, new_seq, end);
        }
    }

    /// `cur` moved the right edge left of `prev`'s.
    fn retracted(&mut self, prev: Adv, cur: Adv, inflight_ns: i64) {
        let rx = self.rx.get_or_insert_with(Box::default);
        rx.retracted(self.factor, &self.ring, (prev, cur), inflight_ns);
    }

    /// The receiver acknowledged up to `ack` at `ts`: forget acknowledged
    /// data and retractions whose space is acknowledged and whose in-flight
    /// horizon has passed.
    fn acknowledged(&mut self, ack: i64, ts: Timestamp) {
        // The ring holds first transmissions in sending order: their ends
        // strictly increase, so the acknowledged ones are a prefix.
        while self.ring.front().is_some_and(|s| s.end <= ack) {
            self.ring.pop_front();
        }
        if let Some(rx) = self.rx.as_mut().filter(|rx| !rx.watches.is_empty()) {
            rx.watches
                .retain(|w| !(ack >= w.prev_edge && ts > w.horizon));
        }
    }

    /// The stream ended: keep what the diagnosis reads (the window unit and
    /// the retractions), free the in-flight ring and the watches (no later
    /// segment can land in them).
    fn conclude(self) -> DirState {
        DirState {
            factor: self.factor,
            rx: self.rx.map(|mut rx| {
                rx.watches = VecDeque::new();
                rx
            }),
            ..DirState::default()
        }
    }
}

/// `[seq, end)` clipped to the retracted space `(new_edge, prev_edge]`, i.e.
/// sequence numbers `new_edge ..= prev_edge - 1` (bytes at or beyond the new
/// right edge and below the old one).
fn clip(
    frame: FrameNo,
    ts: Timestamp,
    seq: i64,
    end: i64,
    new_edge: i64,
    prev_edge: i64,
) -> Option<Range> {
    let (a, b) = (seq.max(new_edge), end.min(prev_edge));
    (a < b).then_some(Range {
        frame,
        ts,
        seq: a,
        end: b,
        dropped: false,
    })
}

fn span_len(a: i64, b: i64) -> u64 {
    u64::try_from(b.saturating_sub(a)).unwrap_or(0)
}

/// Handshake timing of one stream (the RTT bounds what was in flight).
#[derive(Debug, Clone, Copy, Default)]
struct Handshake {
    syn: Option<Timestamp>,
    synack: bool,
    /// First SYN → the client's first non-SYN segment after the SYN-ACK: one
    /// full round trip at any capture point (ns).
    rtt_ns: Option<i64>,
}

/// Timestamp (ns) of the first SYN of a stream that has sent nothing else
/// yet; `i64::MIN` for none (the [`StreamSlots`] default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FirstSyn(i64);

impl Default for FirstSyn {
    fn default() -> Self {
        FirstSyn(i64::MIN)
    }
}

/// Everything kept for one stream past its first SYN.
#[derive(Debug, Default)]
struct Stream {
    hs: Handshake,
    /// Per direction of the receiver's segments ([`Direction::index`]).
    dirs: [DirState; 2],
}

/// The `window-retraction` detector.
///
/// Memory: a stream that only sent SYNs costs one 8-byte [`StreamSlots`]
/// slot (its first SYN's time); a stream past the SYN one boxed `Stream`
/// until its [`FlowEvent::FlowEnded`], after which only its reported
/// directions' evidence is kept.
#[derive(Debug, Default)]
pub struct WindowRetraction {
    streams: StreamMap<StreamId, Box<Stream>>,
    syn: StreamSlots<FirstSyn>,
    /// Reported directions of streams that ended, in the order they ended.
    ended: Vec<((StreamId, usize), DirState)>,
}

impl WindowRetraction {
    /// Streams with live state (past their first SYN, not ended): the
    /// detector's memory is O(this) plus the findings kept.
    pub fn active_streams(&self) -> usize {
        self.streams.len()
    }

    /// Heap bytes held for live streams (by capacity: the map's slots, each
    /// stream's box and queues, the first-SYN slots), excluding findings kept.
    pub fn state_bytes(&self) -> usize {
        let slot = std::mem::size_of::<(StreamId, Box<Stream>)>() + 1;
        let per_stream = |s: &Stream| {
            std::mem::size_of::<Stream>()
                + s.dirs
                    .iter()
                    .map(|d| {
                        d.ring.capacity() * std::mem::size_of::<Sent>()
                            + d.rx.as_ref().map_or(0, |rx| {
                                std::mem::size_of::<Retracted>()
                                    + rx.watches.capacity() * std::mem::size_of::<Watch>()
                            })
                    })
                    .sum::<usize>()
        };
        self.streams.capacity() * slot
            + self.streams.values().map(|s| per_stream(s)).sum::<usize>()
            + self.syn.span() * std::mem::size_of::<FirstSyn>()
    }

    fn on_segment(&mut self, seg: &SegmentEvent) {
        if seg.duplicate_of.is_some() || seg.flags.rst() {
            return;
        }
        let st = match self.streams.get_mut(&seg.stream) {
            Some(st) => st,
            None if seg.flags.syn() && !seg.flags.ack() => {
                // Only SYNs so far: remember the first one's time, nothing else.
                let slot = self.syn.get_mut(seg.stream);
                if slot.0 == i64::MIN {
                    *slot = FirstSyn(seg.ts.0);
                }
                return;
            }
            None => {
                let syn = self.syn.get(seg.stream).map(|f| Timestamp(f.0));
                self.syn.clear(seg.stream);
                let st = Box::new(Stream {
                    hs: Handshake {
                        syn,
                        ..Handshake::default()
                    },
                    ..Stream::default()
                });
                self.streams.entry(seg.stream).or_insert(st)
            }
        };
        st.on_segment(seg);
    }

    /// The stream left the flow table: keep its reported directions, drop the rest.
    fn on_flow_ended(&mut self, stream: StreamId) {
        self.syn.clear(stream);
        let Some(st) = self.streams.remove(&stream) else {
            return;
        };
        let Stream { dirs, .. } = *st;
        for (i, d) in dirs.into_iter().enumerate() {
            if diagnose::reported(&d) {
                self.ended.push(((stream, i), d.conclude()));
            }
        }
    }
}

impl Stream {
    fn on_segment(&mut self, seg: &SegmentEvent) {
        if self.handshake(seg) {
            return;
        }
        let rtt = self.hs.rtt_ns.unwrap_or(0);
        let inflight = rtt.saturating_add(INFLIGHT_SLACK_NS);
        if seg.payload_len > 0 {
            let min_gap = (rtt / 2).max(MIN_RESEND_GAP_NS);
            self.dirs[seg.dir.reverse().index()].sender_data(seg, min_gap);
        }
        let (Some(ack), Some(window)) = (seg.rel_ack, seg.window_bytes) else {
            // No ACK, or the window scale is unknown (handshake not
            // captured): the right edge cannot be placed. Not guessed.
            return;
        };
        if !seg.flags.ack() {
            return;
        }
        let st = &mut self.dirs[seg.dir.index()];
        if seg.window_raw > 0 {
            st.factor = Some(window / u64::from(seg.window_raw));
        }
        let cur = Adv {
            frame: seg.frame,
            ts: seg.ts,
            ack,
            window,
            raw: seg.window_raw,
        };
        if let Some(prev) = st.last {
            if ack < prev.ack {
                // An older ACK captured late (reordering before the capture
                // point): not the receiver's latest word.
                return;
            }
            if cur.edge() < prev.edge() {
                st.retracted(prev, cur, inflight);
            }
        }
        st.last = Some(cur);
        st.acknowledged(ack, seg.ts);
    }

    /// Track the handshake; true for SYN segments (their window is never
    /// scaled, RFC 7323 section 2.2: not an advertisement to compare).
    fn handshake(&mut self, seg: &SegmentEvent) -> bool {
        let h = &mut self.hs;
        if seg.flags.syn() {
            if seg.flags.ack() {
                h.synack = true;
            } else if h.syn.is_none() {
                h.syn = Some(seg.ts);
            }
            return true;
        }
        if h.rtt_ns.is_none() && h.synack && seg.dir == Direction::ClientToServer {
            if let Some(s) = h.syn {
                h.rtt_ns = Some(seg.ts.0.saturating_sub(s.0).max(0));
            }
        }
        false
    }
}

impl Detector for WindowRetraction {
    fn info(&self) -> DetectorInfo {
        DetectorInfo {
            id: ID,
            aliases: &[],
            title: "Receive window retracted (right edge moved left)",
            explain: include_str!("../README.md"),
        }
    }

    fn on_flow_event(&mut self, event: &FlowEvent) {
        match event {
            FlowEvent::Segment(seg) => self.on_segment(seg),
            FlowEvent::FlowEnded(e) => self.on_flow_ended(e.stream),
            _ => {}
        }
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        self.diagnose(ctx).iter().map(render).collect()
    }
}

#[cfg(test)]
mod tests;
