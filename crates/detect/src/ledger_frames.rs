//! Values a detector keeps per frame until the stall ledger's entries can
//! name them, and no longer.
//!
//! Some detectors read the stall ledger ([`crate::FinishContext::ledger`])
//! and look up, for each entry, something they saw at one of its frames:
//! `probe-timer-stall` how long the flow was silent before the entry's
//! carrier segment, `delayed-ack-stall` which segment followed the ACK that
//! ended the wait. Until the ledger concludes a stream they cannot know which
//! frames its entries will name, so they keep a value for every candidate
//! frame. [`LedgerFrames`] keeps those values per stream and, once the ledger
//! has concluded the stream ([`crate::Detector::on_ledger_concluded`]) *and*
//! the flow table has ended it ([`crate::FlowEvent::FlowEnded`]), drops every
//! value nobody asked to keep ([`LedgerFrames::keep`]). Memory is then
//! O(values of live streams + values named), not O(candidate frames of the
//! capture). A stream whose ledger is concluded only at the end of the
//! capture (a wait still open) keeps its values until then.

use crate::StreamMap;
use pcapsleuth_core::{FrameNo, StreamId};
use std::collections::BTreeMap;

/// One value and whether [`LedgerFrames::keep`] asked for it.
#[derive(Debug, Clone, Copy)]
struct Held<V> {
    value: V,
    kept: bool,
}

/// [`LedgerFrames`]: the flow table ended the stream.
const FLOW_ENDED: u8 = 1;
/// [`LedgerFrames`]: the ledger concluded the stream.
const LEDGER_DONE: u8 = 2;

/// Per-frame values of type `V`, by stream, dropped when the stream is over
/// for both the flow table and the ledger (see the module documentation).
/// The first value inserted for a frame stays. Memory: one ordered-map
/// entry per value (the stream and frame, the value, a flag), and a byte
/// per stream with values that one of its two ends has reached.
#[derive(Debug, Clone)]
pub struct LedgerFrames<V> {
    values: BTreeMap<(StreamId, FrameNo), Held<V>>,
    /// Streams with values that saw one end ([`FLOW_ENDED`],
    /// [`LEDGER_DONE`]) and wait for the other.
    ends: StreamMap<StreamId, u8>,
}

impl<V> Default for LedgerFrames<V> {
    fn default() -> Self {
        LedgerFrames {
            values: BTreeMap::new(),
            ends: StreamMap::default(),
        }
    }
}

impl<V: Copy> LedgerFrames<V> {
    /// Values held (pending and kept).
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// No value held.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Whether `stream` has a value at `frame`.
    pub fn contains(&self, stream: StreamId, frame: FrameNo) -> bool {
        self.values.contains_key(&(stream, frame))
    }

    /// The value of `stream` at `frame`.
    pub fn get(&self, stream: StreamId, frame: FrameNo) -> Option<V> {
        self.values.get(&(stream, frame)).map(|h| h.value)
    }

    /// Hold `value` for `stream` at `frame` unless one is held there already
    /// (the first stays); `true` when inserted.
    pub fn insert(&mut self, stream: StreamId, frame: FrameNo, value: V) -> bool {
        use std::collections::btree_map::Entry;
        match self.values.entry((stream, frame)) {
            Entry::Occupied(_) => false,
            Entry::Vacant(v) => {
                v.insert(Held { value, kept: false });
                true
            }
        }
    }

    /// Keep the values of `stream` at `frames` for good (they survive the
    /// stream's end).
    pub fn keep(&mut self, stream: StreamId, frames: &[FrameNo]) {
        for f in frames {
            if let Some(h) = self.values.get_mut(&(stream, *f)) {
                h.kept = true;
            }
        }
    }

    /// The flow table ended `stream`.
    pub fn flow_ended(&mut self, stream: StreamId) {
        self.end(stream, FLOW_ENDED);
    }

    /// The ledger concluded `stream` (after [`LedgerFrames::keep`] of what
    /// its entries name).
    pub fn ledger_concluded(&mut self, stream: StreamId) {
        self.end(stream, LEDGER_DONE);
    }

    /// The values of `stream`, in frame order.
    fn of(
        &self,
        stream: StreamId,
    ) -> std::collections::btree_map::Range<'_, (StreamId, FrameNo), Held<V>> {
        self.values
            .range((stream, FrameNo(0))..=(stream, FrameNo(u64::MAX)))
    }

    /// One end of `stream` reached: once both are, drop its values not kept.
    fn end(&mut self, stream: StreamId, end: u8) {
        if !self.of(stream).any(|(_, h)| !h.kept) {
            self.ends.remove(&stream);
            return;
        }
        let seen = self.ends.entry(stream).or_default();
        *seen |= end;
        if *seen != FLOW_ENDED | LEDGER_DONE {
            return;
        }
        self.ends.remove(&stream);
        let gone: Vec<(StreamId, FrameNo)> = self
            .of(stream)
            .filter(|(_, h)| !h.kept)
            .map(|(k, _)| *k)
            .collect();
        for k in gone {
            self.values.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: StreamId = StreamId(3);

    fn f(n: u64) -> FrameNo {
        FrameNo(n)
    }

    #[test]
    fn values_go_when_both_ends_are_seen_except_those_kept() {
        for ledger_first in [false, true] {
            let mut t: LedgerFrames<i64> = LedgerFrames::default();
            assert!(t.insert(S, f(10), 1));
            assert!(!t.insert(S, f(10), 2), "the first value stays");
            assert!(t.insert(S, f(20), 3));
            assert!(t.insert(StreamId(4), f(30), 4));
            t.keep(S, &[f(20)]);
            if ledger_first {
                t.ledger_concluded(S);
                // A later value of the same stream waits for the flow's end.
                assert!(t.insert(S, f(40), 5));
                assert_eq!(t.len(), 4);
                t.flow_ended(S);
            } else {
                t.flow_ended(S);
                assert_eq!(t.len(), 3, "not before the ledger concluded");
                t.ledger_concluded(S);
            }
            assert_eq!(t.get(S, f(10)), None);
            assert_eq!(t.get(S, f(40)), None);
            assert_eq!(t.get(S, f(20)), Some(3), "kept");
            assert_eq!(t.get(StreamId(4), f(30)), Some(4), "another stream");
            assert_eq!(t.len(), 2);
            // Revived after its end: a new life, dropped at its next end.
            assert!(t.insert(S, f(50), 6));
            t.flow_ended(S);
            t.ledger_concluded(S);
            assert_eq!(t.get(S, f(50)), None);
            assert_eq!(t.get(S, f(20)), Some(3));
        }
    }

    #[test]
    fn ends_of_a_stream_without_values_change_nothing() {
        let mut t: LedgerFrames<u8> = LedgerFrames::default();
        t.ledger_concluded(S);
        t.flow_ended(S);
        assert!(t.is_empty());
        // Values after both signals start a new life.
        assert!(t.insert(S, f(1), 1));
        t.flow_ended(S);
        assert_eq!(t.len(), 1, "waits for the ledger");
        t.ledger_concluded(S);
        assert!(t.is_empty());
    }
}
