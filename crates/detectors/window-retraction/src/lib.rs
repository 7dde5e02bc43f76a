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
use pcapsleuth_detect::{Detector, DetectorInfo, Finding, FinishContext, FlowEvent, StreamMap};
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

/// Per (`tcp.stream`, direction of the receiver's segments).
#[derive(Debug, Clone, Default)]
struct DirState {
    /// The receiver's last advertisement (latest ACK seen).
    last: Option<Adv>,
    /// Bytes per window unit (2^shift), from a non-zero scaled window.
    factor: Option<u64>,
    listed: Vec<RetractionEvidence>,
    count: u64,
    max_retracted: u64,
    below_unit: u64,
    to_zero: u64,
    sent_into: u64,
    /// Highest relative sequence + 1 the sender has sent.
    snd_nxt: Option<i64>,
    ring: VecDeque<Sent>,
    watches: VecDeque<Watch>,
    drops: Vec<DroppedSegment>,
    dropped_segments: u64,
    dropped_bytes: u64,
    /// Earliest and latest timestamp of the cited frames (ns).
    span: Option<(i64, i64)>,
}

impl DirState {
    fn widen(&mut self, ts: Timestamp) {
        self.span = Some(match self.span {
            None => (ts.0, ts.0),
            Some((a, b)) => (a.min(ts.0), b.max(ts.0)),
        });
    }

    /// `cur` moved the right edge left of `prev`'s.
    fn retracted(&mut self, prev: Adv, cur: Adv, inflight_ns: i64) {
        let (prev_edge, new_edge) = (prev.edge(), cur.edge());
        let bytes = u64::try_from(prev_edge.saturating_sub(new_edge)).unwrap_or(0);
        let below = self.factor.map(|f| bytes < f);
        self.count += 1;
        self.max_retracted = self.max_retracted.max(bytes);
        self.below_unit += u64::from(below == Some(true));
        self.to_zero += u64::from(cur.window == 0);
        let mut ranges = Vec::new();
        let mut sent_into = 0u64;
        for s in &self.ring {
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

    /// A data segment of the sender: new bytes may land in a retracted
    /// space; re-sent bytes that were sent into one and never acknowledged
    /// were dropped by the receiver.
    fn sender_data(&mut self, seg: &SegmentEvent, min_gap_ns: i64) {
        let (seq, end) = (seg.rel_seq, seg.rel_seq + i64::from(seg.payload_len));
        let acked = self.last.map_or(i64::MIN, |a| a.ack);
        if let Some(n) = self.snd_nxt.filter(|n| seq < *n) {
            self.resent(seg, seq, end.min(n), acked, min_gap_ns);
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
        self.ring.push_back(Sent {
            frame: seg.frame,
            ts: seg.ts,
            seq: new_seq,
            end,
        });
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

    /// The receiver acknowledged up to `ack` at `ts`: forget acknowledged
    /// data and retractions whose space is acknowledged and whose in-flight
    /// horizon has passed.
    fn acknowledged(&mut self, ack: i64, ts: Timestamp) {
        self.ring.retain(|s| s.end > ack);
        self.watches
            .retain(|w| !(ack >= w.prev_edge && ts > w.horizon));
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

/// The `window-retraction` detector.
#[derive(Debug, Default)]
pub struct WindowRetraction {
    dirs: StreamMap<(StreamId, usize), DirState>,
    hs: StreamMap<StreamId, Handshake>,
}

impl WindowRetraction {
    fn on_segment(&mut self, seg: &SegmentEvent) {
        if seg.duplicate_of.is_some() || seg.flags.rst() {
            return;
        }
        if self.handshake(seg) {
            return;
        }
        let rtt = self.hs.get(&seg.stream).and_then(|h| h.rtt_ns).unwrap_or(0);
        let inflight = rtt.saturating_add(INFLIGHT_SLACK_NS);
        if seg.payload_len > 0 {
            let key = (seg.stream, seg.dir.reverse().index());
            let min_gap = (rtt / 2).max(MIN_RESEND_GAP_NS);
            self.dirs.entry(key).or_default().sender_data(seg, min_gap);
        }
        let (Some(ack), Some(window)) = (seg.rel_ack, seg.window_bytes) else {
            // No ACK, or the window scale is unknown (handshake not
            // captured): the right edge cannot be placed. Not guessed.
            return;
        };
        if !seg.flags.ack() {
            return;
        }
        let st = self.dirs.entry((seg.stream, seg.dir.index())).or_default();
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
        let h = self.hs.entry(seg.stream).or_default();
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
        if let FlowEvent::Segment(seg) = event {
            self.on_segment(seg);
        }
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        self.diagnose(ctx).iter().map(render).collect()
    }
}

#[cfg(test)]
mod tests;
