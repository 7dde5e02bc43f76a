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
use pcapsleuth_detect::{Detector, DetectorInfo, Finding, FinishContext, FlowEvent, StreamMap};
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

/// Most ACK → next-segment pairs remembered per capture (bounded memory).
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
#[derive(Debug, Default)]
pub struct DelayedAckStall {
    last: StreamMap<StreamId, Last>,
    /// ACK frame → the stream's next segment.
    followers: StreamMap<FrameNo, Follower>,
}

impl DelayedAckStall {
    fn on_segment(&mut self, s: &SegmentEvent) {
        if s.duplicate_of.is_some() {
            return;
        }
        let prev = self.last.get(&s.stream).copied();
        if let Some(p) = prev {
            if p.ack_after_silence && self.followers.len() < MAX_REMEMBERED {
                self.followers.insert(
                    p.frame,
                    Follower {
                        dir: s.dir,
                        frame: s.frame,
                        payload_len: s.payload_len,
                    },
                );
            }
        }
        let f = s.flags;
        let pure_ack = s.payload_len == 0 && !f.syn() && !f.fin() && !f.rst();
        let silence = prev.map_or(0, |p| s.ts.0.saturating_sub(p.ts.0));
        self.last.insert(
            s.stream,
            Last {
                frame: s.frame,
                ts: s.ts,
                ack_after_silence: pure_ack && silence >= SILENCE_NS,
            },
        );
        // A reset or a FIN ends nothing we need; keep the map small for
        // streams that closed.
        if f.rst() {
            self.last.remove(&s.stream);
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

    fn on_flow_event(&mut self, event: &FlowEvent) {
        if let FlowEvent::Segment(s) = event {
            self.on_segment(s);
        }
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        self.diagnose(ctx).iter().map(render).collect()
    }
}

#[cfg(test)]
mod tests;
