//! Capture-wide memory bounds of detectors, and saying when one was reached.
//!
//! Most detector state lives per stream and goes when the flow table retires
//! the stream ([`crate::FlowEvent::FlowEnded`]). A few detectors keep
//! something per *event* of the whole capture until its end (every packet
//! of a multi-interface capture, every host address), because their
//! diagnosis compares events far apart; others keep a window that moves
//! through the capture (DNS lookups in progress, the values of live streams
//! the stall ledger may name: [`crate::LedgerFrames`]), which a burst can
//! fill ([`Bound::with_scope`] "at a time"). Their memory is bounded by a cap; past it
//! they do not examine the rest of the capture. That must not be silent: a
//! report that says nothing about the last hour of a capture has to say that
//! it did not look. A detector counts what it could not keep in a [`Bound`]
//! and returns the bounds it reached from [`crate::Detector::limits`]; the
//! report turns each into a `detector_limit` warning.

use pcapsleuth_core::FrameNo;

/// One capture-wide cap of a detector and what went past it.
///
/// `what` names the unit kept, in the plural ("DNS messages"); `limit` is
/// the cap in those units. [`Bound::refuse`] counts one refusal and
/// remembers the frame of the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// The unit counted, plural ("DNS messages", "packets").
    pub what: &'static str,
    /// Items kept at most.
    pub limit: u64,
    /// Times something was not kept because the cap was reached (an item
    /// refused twice, such as an address seen again, counts twice).
    pub refused: u64,
    /// Frame of the first item not kept (`None` while `refused` is 0).
    pub first_frame: Option<FrameNo>,
    /// What the refusals cost the findings, for the report's message
    /// ([`Bound::DEFAULT_EFFECT`] unless [`Bound::with_effect`] says otherwise).
    pub effect: &'static str,
    /// Over what the cap holds, for the report's message: "per capture"
    /// ([`Bound::DEFAULT_SCOPE`]) unless [`Bound::with_scope`] says otherwise
    /// ("at a time", for a window that moves through the capture).
    pub scope: &'static str,
}

impl Bound {
    /// What refusing costs when nothing else is said: the findings cannot
    /// cover what was not kept.
    pub const DEFAULT_EFFECT: &'static str = "its findings say nothing about what it refused";

    /// Over what a cap holds when nothing else is said.
    pub const DEFAULT_SCOPE: &'static str = "per capture";

    /// A cap of `limit` items of `what`, none refused yet.
    pub const fn new(what: &'static str, limit: u64) -> Bound {
        Bound {
            what,
            limit,
            refused: 0,
            first_frame: None,
            effect: Bound::DEFAULT_EFFECT,
            scope: Bound::DEFAULT_SCOPE,
        }
    }

    /// The same cap, held over `scope` instead of the whole capture ("at a
    /// time").
    pub const fn with_scope(self, scope: &'static str) -> Bound {
        Bound { scope, ..self }
    }

    /// The same cap, with what refusing costs the findings said in
    /// `effect` (a clause: "a later diagnosis has no flow_silent_ms").
    pub const fn with_effect(self, effect: &'static str) -> Bound {
        Bound { effect, ..self }
    }

    /// Count one item of frame `frame` that was not kept.
    pub fn refuse(&mut self, frame: FrameNo) {
        self.refused = self.refused.saturating_add(1);
        if self.first_frame.is_none() {
            self.first_frame = Some(frame);
        }
    }

    /// The cap was reached and something was not kept.
    pub fn reached(&self) -> bool {
        self.refused > 0
    }

    /// `Some(self)` when [`Bound::reached`]: what a detector's
    /// [`crate::Detector::limits`] collects.
    pub fn if_reached(&self) -> Option<Bound> {
        self.reached().then_some(*self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_refusals_and_keeps_the_first_frame() {
        let mut b = Bound::new("DNS messages", 2);
        assert!(!b.reached());
        assert_eq!(b.if_reached(), None);
        b.refuse(FrameNo(7));
        b.refuse(FrameNo(9));
        assert!(b.reached());
        assert_eq!(
            b.if_reached(),
            Some(Bound {
                what: "DNS messages",
                limit: 2,
                refused: 2,
                first_frame: Some(FrameNo(7)),
                effect: Bound::DEFAULT_EFFECT,
                scope: Bound::DEFAULT_SCOPE,
            })
        );
    }
}
