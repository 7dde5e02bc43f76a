#![doc = include_str!("../README.md")]
//!
//! # Code layout
//! The stalls come from the stall ledger ([`pcapsleuth_ledger`], handed over
//! in [`FinishContext::ledger`]); this file only remembers which segment
//! followed each pure ACK that ended a silence (the ledger's entry ends at
//! the ACK; the held piece is the stream's next segment).
//! [`DelayedAckStall::diagnose`] groups the ledger's `nagle_delayed_ack`
//! entries per connection and direction into plain-data [`Diagnosis`] values
//! (`diagnose.rs`), and [`render()`] writes the summary, remedy and evidence
//! (`render.rs`).

mod diagnose;
mod render;

pub use diagnose::{DelayedAckStallEvidence, Diagnosis, HeldRequest};
pub use render::render;

use pcapsleuth_core::{Direction, FrameNo, StreamId, Timestamp};
use pcapsleuth_detect::{
    Bound, Detector, DetectorInfo, Finding, FinishContext, FlowEvent, LedgerFrames, StallEntry,
    StreamMap,
};
use pcapsleuth_flow::SegmentEvent;

/// Detector id.
pub const ID: &str = "delayed-ack-stall";

/// Stalls matching a delayed-ACK timer on one connection direction from
/// which the finding is a warning: the pattern recurs (fewer, or stalls off
/// every delayed-ACK timer, are info). 3: two could be coincidence on an
/// interactive session (ssh, telnet keystrokes), the lab's request pattern
/// gives 19 of 20.
pub const MIN_RECURRING: usize = 3;

/// Stalls listed in the evidence and cited per direction (`stalls` keeps the total).
pub const MAX_LISTED: usize = 32;

/// A pure ACK ending a silence of the stream at least this long (ns) may be
/// a delayed ACK: the segment after it is remembered. 20 ms: below the
/// ledger's 30 ms shortest stall, so every ACK that ends one is kept.
pub const SILENCE_NS: i64 = 20_000_000;

/// Most ACK → next-segment pairs held at once: those of live streams, and
/// those the ledger's Nagle entries name (a safety bound: the pairs of a
/// stream the ledger named none of go when it ends, [`LedgerFrames`]).
pub const MAX_REMEMBERED: usize = 1 << 20;

/// The stream's last non-duplicate segment.
#[derive(Debug, Clone, Copy)]
struct Last {
    frame: FrameNo,
    ts: Timestamp,
    /// A pure ACK (no payload, SYN, FIN or RST) that came after a silence of
    /// at least [`SILENCE_NS`].
    ack_after_silence: bool,
}

/// The segment that followed a pure ACK: the held piece when the ACK was
/// the delayed one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Follower {
    /// Its sender.
    pub dir: Direction,
    /// Its frame.
    pub frame: FrameNo,
    /// Its payload, bytes.
    pub payload_len: u32,
}

/// The `delayed-ack-stall` detector.
///
/// Memory: nothing for a stream that sent only SYNs (no pure ACK can end a
/// Nagle wait right after them: the held request's first piece would have to
/// come before the SYN); one 24-byte map entry per stream past the SYN until
/// its RST or [`FlowEvent::FlowEnded`]; the ACK → follower pairs of live
/// streams, and of ended ones those the ledger's Nagle entries name (the
/// rest go once the ledger has concluded the stream and the flow table has
/// ended it: [`Detector::on_ledger_concluded`]), capped at
/// [`MAX_REMEMBERED`] at a time.
#[derive(Debug)]
pub struct DelayedAckStall {
    last: StreamMap<StreamId, Last>,
    /// ACK frame → the stream's next segment, until the ledger's entries
    /// have named the ones they need ([`LedgerFrames`]).
    followers: LedgerFrames<Follower>,
    /// [`MAX_REMEMBERED`], and the pairs not remembered past it.
    bound: Bound,
}

impl Default for DelayedAckStall {
    fn default() -> Self {
        DelayedAckStall::with_max_remembered(MAX_REMEMBERED)
    }
}

impl DelayedAckStall {
    /// A detector remembering at most `max` ACK → follower pairs (default
    /// [`MAX_REMEMBERED`]); later ones are not, so a Nagle wait they end is
    /// not reported, and [`Detector::limits`] says how many, from which frame.
    pub fn with_max_remembered(max: usize) -> Self {
        DelayedAckStall {
            last: StreamMap::default(),
            followers: LedgerFrames::default(),
            bound: Bound::new("ACK-then-segment pairs after a silence", max as u64)
                .with_scope("at a time"),
        }
    }

    /// Streams with live state (past the SYN, not reset or ended).
    pub fn active_streams(&self) -> usize {
        self.last.len()
    }

    /// Heap bytes of the per-stream map (by capacity), excluding the
    /// capture-wide follower pairs.
    pub fn state_bytes(&self) -> usize {
        self.last.capacity() * (std::mem::size_of::<(StreamId, Last)>() + 1)
    }

    fn on_segment(&mut self, s: &SegmentEvent) {
        use std::collections::hash_map::Entry;
        if s.duplicate_of.is_some() {
            return;
        }
        let f = s.flags;
        let pure_ack = s.payload_len == 0 && !f.syn() && !f.fin() && !f.rst();
        match self.last.entry(s.stream) {
            Entry::Occupied(mut o) => {
                let p = *o.get();
                if p.ack_after_silence && self.followers.len() as u64 >= self.bound.limit {
                    self.bound.refuse(p.frame);
                } else if p.ack_after_silence {
                    self.followers.insert(
                        s.stream,
                        p.frame,
                        Follower {
                            dir: s.dir,
                            frame: s.frame,
                            payload_len: s.payload_len,
                        },
                    );
                }
                if f.rst() {
                    // A reset ends nothing we need; keep the map small for
                    // streams that closed.
                    o.remove();
                    return;
                }
                let silence = s.ts.0.saturating_sub(p.ts.0);
                *o.get_mut() = Last {
                    frame: s.frame,
                    ts: s.ts,
                    ack_after_silence: pure_ack && silence >= SILENCE_NS,
                };
            }
            // A stream's first segments: a pure SYN (or SYN/ACK) is not kept
            // (see the type's doc), a reset leaves nothing.
            Entry::Vacant(_) if f.rst() || (f.syn() && s.payload_len == 0) => {}
            Entry::Vacant(v) => {
                v.insert(Last {
                    frame: s.frame,
                    ts: s.ts,
                    ack_after_silence: false,
                });
            }
        }
    }
}

impl Detector for DelayedAckStall {
    fn info(&self) -> DetectorInfo {
        DetectorInfo {
            id: ID,
            aliases: &[],
            title: "A request's second write held by Nagle until the peer's delayed ACK",
            explain: include_str!("../README.md"),
        }
    }

    /// The ledger's `NagleDelayedAck` waits (`from_ledger`/`diagnose`).
    fn ledger_causes(&self) -> pcapsleuth_ledger::CauseSet {
        pcapsleuth_ledger::CauseSet::of(&[pcapsleuth_ledger::StallCause::NagleDelayedAck])
    }

    fn on_flow_event(&mut self, event: &FlowEvent) {
        match event {
            FlowEvent::Segment(s) => self.on_segment(s),
            FlowEvent::FlowEnded(e) => {
                self.last.remove(&e.stream);
                self.followers.flow_ended(e.stream);
            }
            _ => {}
        }
    }

    /// Keep the followers of the ACKs that end the stream's Nagle waits;
    /// the others go once the stream has ended.
    fn on_ledger_concluded(&mut self, stream: StreamId, entries: &[StallEntry]) {
        let named: Vec<FrameNo> = entries
            .iter()
            .filter(|e| e.cause == pcapsleuth_ledger::StallCause::NagleDelayedAck)
            .map(|e| e.end_frame)
            .collect();
        self.followers.keep(stream, &named);
        self.followers.ledger_concluded(stream);
    }

    /// [`MAX_REMEMBERED`], when more pairs than that were seen.
    fn limits(&self) -> Vec<Bound> {
        self.bound.if_reached().into_iter().collect()
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        self.diagnose(ctx).iter().map(render).collect()
    }
}

#[cfg(test)]
mod tests;
