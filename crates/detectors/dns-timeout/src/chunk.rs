//! The capture's DNS messages concluded a chunk at a time: memory follows the
//! lookups in progress (and the lookups that lost time), not the capture.
//!
//! Every [`CHUNK_MESSAGES`] messages, the messages held are put in time order
//! and grouped into lookups ([`crate::lookup`]). A lookup whose last
//! transmission is more than [`SETTLE_NS`] older than the newest message
//! held is *settled*: no later message can join it (a re-send or an answer
//! comes within [`MAX_RETRY_GAP_NS`] of a transmission), nor a later
//! lookup be linked to it, nor change what its diagnosis reads of the
//! lookups around it (its A/AAAA sibling, first sent within
//! [`PAIR_WINDOW_NS`] of its transmissions; its TCP fallback, within
//! [`TCP_FALLBACK_WINDOW_NS`] of an answer). Settled lookups are concluded
//! (`Concluded::conclude` in `diagnose.rs`: counted, and kept whole only if they may have
//! lost time); the messages of the others are held for the next chunk,
//! with those of settled lookups that an unsettled one may still name as
//! its neighbour (concluded once, held as context).
//!
//! The result is the one pass over all messages would give (the table test
//! `chunks_conclude_as_one_pass_would` checks it), with two exceptions
//! that only a capture far above [`CHUNK_MESSAGES`] can meet:
//! - when the lookups in progress hold more than half of a chunk's messages
//!   (more than half a chunk within [`SETTLE_NS`]: a busy resolver, or one
//!   client re-sending one query id without pause), the oldest of them are
//!   concluded early so the next chunk has room, answered ones first: a
//!   later transmission of their query starts a lookup of its own. For an
//!   answered lookup that costs at most an info finding (a re-send after
//!   the answer read as a new query, answered at once); an unanswered one
//!   concluded early counts in [`Chunker::early`] (a `detector_limit`
//!   warning), as its re-send would no longer be seen as one;
//! - a message written to the file more than [`REORDER_NS`] after later
//!   ones (capture time) may miss the lookup it belongs to.

use crate::diagnose::{Concluded, Diagnosis, PAIR_WINDOW_NS, TCP_FALLBACK_WINDOW_NS};
use crate::lookup::{self, Lookup, MAX_RETRY_GAP_NS};
use crate::Msg;
use foldhash::{HashMap, HashSet};
use pcapsleuth_core::FrameNo;
use pcapsleuth_detect::Bound;
use std::net::IpAddr;

/// Messages held before a chunk is concluded. About 100 bytes each, and the
/// lookups built from them about as much again while the chunk is
/// concluded.
pub const CHUNK_MESSAGES: usize = 1 << 18;

/// How far (capture time, ns) a message may be written after later ones and
/// still find its lookup: multi-interface pcapng writes each interface's
/// buffer in turn (dumpcap's read timeout is of the order of a second).
pub const REORDER_NS: i64 = 5_000_000_000;

/// A lookup whose last transmission is this much older (ns) than the newest
/// message held is settled: [`MAX_RETRY_GAP_NS`] for a re-send or an
/// answer, [`TCP_FALLBACK_WINDOW_NS`] after that answer for the TCP query a
/// truncation asks for, and [`REORDER_NS`].
pub const SETTLE_NS: i64 = MAX_RETRY_GAP_NS + TCP_FALLBACK_WINDOW_NS + REORDER_NS;

/// A lookup's identity ([`Lookup::identity`]).
type Identity = (i64, u64);

/// DNS messages in, concluded lookups out (see the module documentation).
#[derive(Debug, Clone)]
pub struct Chunker {
    /// Held messages: the unsettled lookups' and the context's, in time
    /// order, then the new ones in frame order.
    msgs: Vec<Msg>,
    /// Conclude when this many messages are held.
    chunk: usize,
    /// Settled lookups held as context, already concluded.
    context: HashSet<Identity>,
    concluded: Concluded,
    /// Lookups concluded before they settled, and the frame of the first.
    pub early: Bound,
    /// Names with a per-name total at most ([`crate::diagnose::MAX_NAME_TALLIES`]).
    name_cap: usize,
}

impl Default for Chunker {
    fn default() -> Self {
        Chunker::with_chunk(CHUNK_MESSAGES)
    }
}

/// Where a lookup of the chunk goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Concluded now; its messages are dropped.
    Conclude,
    /// Concluded now, its messages held as context for an unsettled lookup.
    ConcludeAndHold,
    /// Held whole for the next chunk.
    Hold,
    /// Concluded in an earlier chunk, held as context: dropped now.
    Drop,
    /// Concluded in an earlier chunk, still context: held again.
    HoldAgain,
}

impl Chunker {
    /// A chunker that concludes every `chunk` messages (at least 2).
    pub fn with_chunk(chunk: usize) -> Self {
        Chunker {
            msgs: Vec::new(),
            chunk: chunk.max(2),
            context: HashSet::default(),
            concluded: Concluded::default(),
            early: Bound::new(
                "DNS messages of lookups in progress",
                (chunk.max(2) / 2) as u64,
            )
            .with_scope("at a time")
            .with_effect(
                "it concluded that many unanswered lookups before their re-send could come (and answered ones early too), and read a later re-send of any of them as a lookup of its own",
            ),
            name_cap: crate::diagnose::MAX_NAME_TALLIES,
        }
    }

    /// The same chunker with at most `cap` names given a per-name total
    /// (tests; [`crate::diagnose::MAX_NAME_TALLIES`] by default).
    pub fn with_name_cap(self, cap: usize) -> Self {
        Chunker {
            name_cap: cap,
            ..self
        }
    }

    /// Messages held now.
    pub fn held(&self) -> usize {
        self.msgs.len()
    }

    /// Lookups kept whole for the diagnosis so far (those that may have
    /// lost time).
    pub fn candidates(&self) -> usize {
        self.concluded.candidates()
    }

    /// One more DNS message (any order; a chunk is concluded when full:
    /// then `true`).
    pub fn push(&mut self, m: Msg) -> bool {
        self.msgs.push(m);
        if self.msgs.len() >= self.chunk {
            self.conclude_settled();
            return true;
        }
        false
    }

    /// Set `live[id]` for every name id the messages held and the
    /// concluded lookups kept name.
    pub fn mark_names(&self, live: &mut [bool]) {
        for m in &self.msgs {
            if let Some(l) = live.get_mut(m.name as usize) {
                *l = true;
            }
        }
        self.concluded.mark_names(live);
    }

    /// Concluded lookups whose name got no per-name total
    /// ([`crate::diagnose::MAX_NAME_TALLIES`]).
    pub fn untallied(&self) -> &Bound {
        self.concluded.untallied()
    }

    /// Conclude everything and diagnose; `capture_end_ns`: the last frame's time.
    pub fn diagnose(mut self, names: &[String], capture_end_ns: i64) -> Vec<Diagnosis> {
        let mut msgs = std::mem::take(&mut self.msgs);
        lookup::sort(&mut msgs);
        let (lookups, _) = lookup::build_sorted(&msgs);
        let context = &self.context;
        let fresh = (0..lookups.len()).filter(|&i| {
            lookups
                .get(i)
                .and_then(Lookup::identity)
                .is_none_or(|id| !context.contains(&id))
        });
        self.concluded.conclude(&lookups, fresh, usize::MAX);
        self.concluded.diagnose(names, capture_end_ns)
    }

    /// Conclude the settled lookups of the messages held; hold the rest.
    fn conclude_settled(&mut self) {
        let mut msgs = std::mem::take(&mut self.msgs);
        lookup::sort(&mut msgs);
        let Some(newest) = msgs.iter().map(|m| m.ts).max() else {
            return;
        };
        let (lookups, owner) = lookup::build_sorted(&msgs);
        let settled_before = newest.saturating_sub(SETTLE_NS);
        let settled: Vec<bool> = lookups
            .iter()
            .map(|l| l.last().is_some_and(|t| t.ts < settled_before))
            .collect();
        let mut per_lookup = vec![0usize; lookups.len()];
        for o in owner.iter().flatten() {
            if let Some(n) = per_lookup.get_mut(*o) {
                *n += 1;
            }
        }
        let mut fates = self.fates(&lookups, &settled);
        // Progress: hold at most half of the chunk, concluding the oldest
        // unsettled lookups early if need be.
        let held = |fates: &[Fate]| {
            fates
                .iter()
                .zip(&per_lookup)
                .filter(|(f, _)| matches!(f, Fate::Hold | Fate::HoldAgain | Fate::ConcludeAndHold))
                .map(|(_, n)| n)
                .sum::<usize>()
        };
        let mut now_held = held(&fates);
        // Answered lookups first (oldest first): concluding one early only
        // makes a later re-send of its query a lookup of its own; then the
        // unanswered ones, whose re-send would then look like a new query
        // (counted in `early`).
        for answered_pass in [true, false] {
            for (i, f) in fates.iter_mut().enumerate() {
                if now_held * 2 <= self.chunk {
                    break;
                }
                let Some(l) = lookups.get(i) else { continue };
                let answered = l.last().is_some_and(|t| t.answer.is_some());
                if *f != Fate::Hold || answered != answered_pass {
                    continue;
                }
                *f = Fate::Conclude;
                now_held = now_held.saturating_sub(per_lookup.get(i).copied().unwrap_or(0));
                if !answered {
                    self.early.refuse(FrameNo(l.first().map_or(0, |t| t.frame)));
                }
            }
        }
        // Still too much: the context goes too (only neighbours of lookups
        // already concluded early are missed).
        for (i, f) in fates.iter_mut().enumerate() {
            if now_held * 2 <= self.chunk {
                break;
            }
            let dropped = match *f {
                Fate::ConcludeAndHold => Fate::Conclude,
                Fate::HoldAgain => Fate::Drop,
                _ => continue,
            };
            *f = dropped;
            now_held = now_held.saturating_sub(per_lookup.get(i).copied().unwrap_or(0));
        }
        // Answers that matched nothing: held for a query written late, if
        // there is room.
        let recent = newest.saturating_sub(REORDER_NS);
        let unclaimed = msgs
            .iter()
            .zip(&owner)
            .filter(|(m, o)| o.is_none() && m.ts >= recent)
            .count();
        let unclaimed_from = if (now_held + unclaimed) * 2 <= self.chunk {
            recent
        } else {
            i64::MAX
        };
        self.concluded.conclude(
            &lookups,
            (0..lookups.len())
                .filter(|&i| matches!(fates.get(i), Some(Fate::Conclude | Fate::ConcludeAndHold))),
            self.name_cap,
        );
        let mut context = HashSet::default();
        for (l, f) in lookups.iter().zip(&fates) {
            if matches!(f, Fate::ConcludeAndHold | Fate::HoldAgain) {
                context.extend(l.identity());
            }
        }
        self.context = context;
        self.msgs = msgs
            .into_iter()
            .zip(owner)
            .filter(|(m, o)| match o {
                Some(i) => matches!(
                    fates.get(*i),
                    Some(Fate::Hold | Fate::HoldAgain | Fate::ConcludeAndHold)
                ),
                // An answer that matched nothing: a query written late may
                // still claim it.
                None => m.ts >= unclaimed_from,
            })
            .map(|(m, _)| m)
            .collect();
    }

    /// Each lookup's fate before the progress rule: settled ones are
    /// concluded (unless an earlier chunk did), and held as context when an
    /// unsettled lookup of the same client and name may name them (an
    /// A/AAAA sibling first sent within [`PAIR_WINDOW_NS`] of its first or
    /// second transmission; a TCP query with its id after its start).
    fn fates(&self, lookups: &[Lookup], settled: &[bool]) -> Vec<Fate> {
        // Of the unsettled lookups, per client and name: the times of their
        // first two transmissions (sorted), and per id the earliest start.
        let mut times: HashMap<(IpAddr, u32), Vec<i64>> = HashMap::default();
        let mut starts: HashMap<(IpAddr, u32, u16), i64> = HashMap::default();
        for (l, _) in lookups.iter().zip(settled).filter(|(_, s)| !**s) {
            let list = times.entry((l.client_ip, l.name)).or_default();
            list.extend(l.txs.iter().take(2).map(|t| t.ts));
            if let Some(f) = l.first() {
                let e = starts.entry((l.client_ip, l.name, l.id)).or_insert(f.ts);
                *e = (*e).min(f.ts);
            }
        }
        for list in times.values_mut() {
            list.sort_unstable();
        }
        let window = PAIR_WINDOW_NS.unsigned_abs();
        lookups
            .iter()
            .zip(settled)
            .map(|(x, &settled)| {
                let done = x.identity().is_some_and(|id| self.context.contains(&id));
                if !settled && !done {
                    return Fate::Hold;
                }
                let Some(first) = x.first() else {
                    return if done { Fate::Drop } else { Fate::Conclude };
                };
                let needed = if x.tcp {
                    starts
                        .get(&(x.client_ip, x.name, x.id))
                        .is_some_and(|&t| t <= first.ts)
                } else {
                    times.get(&(x.client_ip, x.name)).is_some_and(|list| {
                        let lo = first.ts.saturating_sub_unsigned(window);
                        list.get(list.partition_point(|&t| t < lo))
                            .is_some_and(|&t| t.abs_diff(first.ts) <= window)
                    })
                };
                match (done, needed) {
                    (false, false) => Fate::Conclude,
                    (false, true) => Fate::ConcludeAndHold,
                    (true, false) => Fate::Drop,
                    (true, true) => Fate::HoldAgain,
                }
            })
            .collect()
    }
}
