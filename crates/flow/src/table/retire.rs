//! Retirement: a live stream leaves the table ([`FlowEvent::FlowEnded`])
//! when it is closed (RST, both FINs acknowledged, or replaced) and quiet for
//! [`FlowConfig::closed_quiet_ns`](super::FlowConfig::closed_quiet_ns), idle
//! for [`FlowConfig::idle_timeout_ns`](super::FlowConfig::idle_timeout_ns),
//! or the least recently active one when a new stream would exceed
//! [`FlowConfig::max_flows`](super::FlowConfig::max_flows). Times are capture
//! time: the largest timestamp seen so far (captures may step back a little).
//! A closed stream that ends keeps its full state on the ended list for
//! [`FlowConfig::closed_keep_ns`](super::FlowConfig::closed_keep_ns), so a
//! stray packet is analysed exactly; only then is it compacted (no event).
//! The activity lists (`lru.rs`) make each check O(1) per packet plus O(1)
//! per retirement. A late packet of an ended or retired stream revives it
//! with the same `tcp.stream` ([`FlowTable::ensure_full`]).

use super::compact::{self, First};
use super::lru::{CLOSED, ENDED, OPEN};
use super::stream::Stream;
use super::{FlowTable, PacketMeta, Slot};
use crate::{FlowEndReason, FlowEnded, FlowEvent};
use pcapsleuth_core::StreamId;

impl FlowTable {
    /// Retire every stream whose quiet or idle time has passed at the
    /// current capture clock (called before each packet's own events).
    pub(super) fn retire_due(&mut self, out: &mut Vec<FlowEvent>) {
        let now = self.clock();
        let quiet = self.config.closed_quiet_ns;
        while let Some((i, act)) = self.lru.front(CLOSED) {
            if now.saturating_sub(act) <= quiet {
                break;
            }
            self.retire(i, FlowEndReason::Closed, out);
        }
        let keep = self.config.closed_keep_ns;
        while let Some((i, act)) = self.lru.front(ENDED) {
            if now.saturating_sub(act) <= keep {
                break;
            }
            self.compact_ended(i);
        }
        let idle = self.config.idle_timeout_ns;
        while let Some((i, act)) = self.lru.front(OPEN) {
            if now.saturating_sub(act) <= idle {
                break;
            }
            self.retire(i, FlowEndReason::Idle, out);
        }
    }

    /// Make room for one more live stream under
    /// [`super::FlowConfig::max_flows`] full records (at least one live
    /// stream is allowed): compact the oldest ended streams kept for stray
    /// packets first (no event: they already ended), then evict the least
    /// recently active live ones.
    pub(super) fn make_room(&mut self, out: &mut Vec<FlowEvent>) {
        let cap = self.config.max_flows.max(1) as u64;
        while self.stats.live + self.ended_kept >= cap {
            if let Some((i, _)) = self.lru.front(ENDED) {
                self.compact_ended(i);
                continue;
            }
            let Some(i) = self.lru.oldest() else { break };
            self.retire(i, FlowEndReason::Evicted, out);
        }
    }

    /// Drop the full state of ended stream `idx`, keeping its summary and
    /// tombstone (as a stream retired at once would have).
    fn compact_ended(&mut self, idx: usize) {
        self.lru.remove(idx);
        let cap = self.config.max_sightings;
        let Some(slot) = self.slots.get_mut(idx) else {
            return;
        };
        if let Slot::Full(st) = slot {
            if st.ended {
                self.ended_kept = self.ended_kept.saturating_sub(1);
                *slot = Slot::Retired(Box::new(st.retired(cap)));
            }
        }
    }

    /// Count a stream that became live (new or revived) at index `idx`.
    pub(super) fn went_live(&mut self, idx: usize) {
        self.stats.live += 1;
        self.stats.peak_live = self.stats.peak_live.max(self.stats.live);
        self.lru.touch(idx, OPEN, self.clock());
    }

    /// Retire live stream `idx`: keep its compact form, emit `FlowEnded`.
    fn retire(&mut self, idx: usize, reason: FlowEndReason, out: &mut Vec<FlowEvent>) {
        self.lru.remove(idx);
        let cap = self.config.max_sightings;
        let Some(slot) = self.slots.get_mut(idx) else {
            return;
        };
        let keep = reason == FlowEndReason::Closed
            && self.config.closed_keep_ns > self.config.closed_quiet_ns;
        let (client, server) = slot.ends();
        let (last_frame, last_ts) = match slot {
            Slot::Full(st) if keep => {
                // Ended for consumers; the state stays for stray packets.
                st.ended = true;
                self.ended_kept += 1;
                self.lru.move_to(idx, ENDED);
                (st.last_frame, st.last_ts.unwrap_or(st.acc.last_ts))
            }
            Slot::Full(st) => {
                let r = st.retired(cap);
                let last = (r.last_frame, r.last_ts);
                *slot = Slot::Retired(Box::new(r));
                last
            }
            Slot::First(f) if !f.retired() => {
                f.retire();
                f.last()
            }
            _ => return,
        };
        self.stats.live = self.stats.live.saturating_sub(1);
        match reason {
            FlowEndReason::Closed => self.stats.retired_closed += 1,
            FlowEndReason::Idle => self.stats.retired_idle += 1,
            FlowEndReason::Evicted => self.stats.evicted += 1,
        }
        out.push(FlowEvent::FlowEnded(FlowEnded {
            stream: StreamId(idx as u64),
            last_frame,
            last_ts,
            reason,
            client,
            server,
        }));
    }

    /// Give stream `idx` its full state for a packet: replay a one-packet
    /// record, revive an ended stream (its kept state) or a retired one
    /// (fresh state continuing its summary); live again, which may evict
    /// another stream.
    pub(super) fn ensure_full(&mut self, idx: usize, meta: &PacketMeta, out: &mut Vec<FlowEvent>) {
        let id = StreamId(idx as u64);
        let cfg = self.config;
        let Some(slot) = self.slots.get_mut(idx) else {
            return;
        };
        let was_live = slot.live();
        match slot {
            Slot::Full(st) if st.ended => {
                // A stray packet of an ended stream: live again, exact state.
                st.ended = false;
                self.ended_kept = self.ended_kept.saturating_sub(1);
                self.lru.remove(idx);
            }
            Slot::Full(_) => return,
            Slot::First(f) => {
                let mut scratch = std::mem::take(&mut self.scratch);
                let st = compact::replay(f, id, &cfg, &mut scratch, &mut self.spare);
                self.scratch = scratch;
                *slot = Slot::Full(st);
            }
            Slot::Retired(r) => {
                // Rare (a late packet after retirement): cloning is fine.
                let old = r.as_ref().clone();
                *slot = Slot::Full(Box::new(Stream::revive(id, old, meta)));
            }
        }
        if !was_live {
            self.stats.revived += 1;
            self.make_room(out);
            self.went_live(idx);
        }
    }

    /// Compact stream `idx` if an ICMP error's quote just created it and it
    /// is still empty (`compact::First::of_quote`).
    pub(super) fn compact_quote_created(&mut self, idx: usize, meta: &PacketMeta) {
        let Some(slot) = self.slots.get_mut(idx) else {
            return;
        };
        if let Slot::Full(st) = slot {
            if let Some(rec) = First::of_quote(st, meta) {
                *slot = Slot::First(rec);
            }
        }
    }
}
