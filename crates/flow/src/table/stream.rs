//! One `tcp.stream` record: both endpoint states, the `tcp.analysis`
//! analyzer, summary counters and duplicate-sighting fingerprints.

use super::compact::{Facts, Retired, SideFacts};
use super::PacketMeta;
use crate::analysis::StreamAnalyzer;
use crate::endpoint::Side;
use crate::sightings::SightingTable;
use crate::summary::SummaryAcc;
use crate::{FlowSummary, Sighting};
use pcapsleuth_core::{Direction, Endpoint, FrameNo, SeqNum, StreamId, Timestamp};

/// One `tcp.stream`.
#[derive(Debug)]
pub(super) struct Stream {
    pub(super) id: StreamId,
    pub(super) client: Endpoint,
    pub(super) server: Endpoint,
    /// Wireshark's `base_seq` per direction (stream-id decisions only).
    pub(super) ws_base: [Option<SeqNum>; 2],
    pub(super) sides: [Side; 2],
    /// Window-scale option of the first SYN / SYN-ACK seen (`Some(None)` = seen without option).
    pub(super) syn_wscale: Option<Option<u8>>,
    pub(super) synack_wscale: Option<Option<u8>>,
    pub(super) shifts: [Option<u8>; 2],
    /// The bare SYN came from the server side (or the SYN/ACK from the client side).
    pub(super) roles_swapped: bool,
    pub(super) analyzer: StreamAnalyzer,
    pub(super) acc: SummaryAcc,
    /// Latest timestamp of a segment of this stream (either direction).
    pub(super) last_ts: Option<Timestamp>,
    pub(super) last_frame: FrameNo,
    /// First sightings for duplicate detection (`sightings.rs`).
    pub(super) dups: SightingTable,
    /// RST seen, both FINs acked, or replaced by a newer stream: no stalls, buffers freed.
    pub(super) closed: bool,
    /// Closed, quiet and announced ended ([`crate::FlowEnded`]), its full
    /// state kept for stray packets ([`super::FlowConfig::closed_keep_ns`]).
    pub(super) ended: bool,
    /// The retired record this stream continues (a late packet revived it):
    /// its summary is the retired one's continued by this one's.
    pub(super) revived: Option<Box<Retired>>,
}

impl Stream {
    pub(super) fn new(
        id: StreamId,
        client: Endpoint,
        server: Endpoint,
        meta: &PacketMeta,
    ) -> Stream {
        Stream {
            id,
            client,
            server,
            ws_base: [None; 2],
            sides: [Side::default(), Side::default()],
            syn_wscale: None,
            synack_wscale: None,
            shifts: [None; 2],
            roles_swapped: false,
            analyzer: StreamAnalyzer::without_recent_verdicts(),
            acc: SummaryAcc {
                first_frame: meta.frame,
                last_frame: meta.frame,
                first_ts: meta.ts,
                last_ts: meta.ts,
                ..SummaryAcc::default()
            },
            last_ts: None,
            last_frame: meta.frame,
            dups: SightingTable::default(),
            closed: false,
            ended: false,
            revived: None,
        }
    }

    /// [`Stream::new`] in a box, made from `spare` when there is one: the
    /// spare record's buffers are kept, emptied, so a stream of one packet
    /// (a SYN scan's: made, compacted to its packet's record, the record
    /// given back) costs no allocation but its compact record.
    pub(super) fn boxed(
        id: StreamId,
        client: Endpoint,
        server: Endpoint,
        meta: &PacketMeta,
        spare: &mut Option<Box<Stream>>,
    ) -> Box<Stream> {
        let fresh = Stream::new(id, client, server, meta);
        match spare.take() {
            Some(mut b) => {
                let old = std::mem::replace(b.as_mut(), fresh);
                b.reuse_buffers(old);
                b
            }
            None => Box::new(fresh),
        }
    }

    /// Take `old`'s buffers, emptied, in place of this fresh stream's empty
    /// ones (everything else stays as [`Stream::new`] made it).
    fn reuse_buffers(&mut self, old: Stream) {
        let Stream {
            sides,
            analyzer,
            dups,
            acc,
            ..
        } = old;
        for (mine, theirs) in self.sides.iter_mut().zip(sides) {
            mine.reuse_buffers(theirs);
        }
        self.analyzer.reuse_buffers(analyzer);
        self.dups.reuse_buffers(dups);
        let mut sightings = acc.sightings;
        sightings.clear();
        self.acc.sightings = sightings;
    }

    /// Heap bytes owned by this stream (by capacity), not counting `size_of::<Stream>()`.
    pub(super) fn heap_bytes(&self) -> usize {
        self.sides.iter().map(Side::heap_bytes).sum::<usize>()
            + self.analyzer.heap_bytes()
            + self.dups.heap_bytes()
            + self.acc.sightings.capacity() * std::mem::size_of::<Sighting>()
            + self
                .revived
                .as_ref()
                .map_or(0, |r| std::mem::size_of::<Retired>() + r.heap_bytes())
    }

    pub(super) fn close(&mut self) {
        self.closed = true;
        for s in self.sides.iter_mut() {
            s.free_buffers();
        }
        // Keep the newest sightings (the closing FIN/ACK or RST is often seen again on
        // another interface) and, on multi-interface streams, those whose copies may
        // still follow in file order; free the rest.
        self.dups.close();
    }

    /// Advertised window in bytes of a segment sent in direction index `d`
    /// with raw window field `raw`: unscaled on a SYN, scaled by the
    /// direction's RFC 7323 shift otherwise, `None` when the shift is unknown.
    pub(super) fn window_bytes(&self, d: usize, syn: bool, raw: u16) -> Option<u64> {
        if syn {
            Some(u64::from(raw))
        } else {
            self.shifts[d].map(|sh| u64::from(raw) << sh)
        }
    }

    /// Whether either side's unacknowledged-segment list hit its cap (in
    /// this life or the retired one it continues).
    pub(super) fn unacked_capped(&self) -> bool {
        self.sides.iter().any(|x| x.unacked_capped)
            || self.revived.as_ref().is_some_and(|r| r.unacked_capped())
    }

    /// The summary facts of this stream (continuing the retired record it
    /// revived, if any; `max_sightings` caps the joined sightings list).
    pub(super) fn facts(&self, max_sightings: usize) -> Facts {
        let mut acc = self.acc.clone();
        for side in &self.sides {
            if let Some(since) = side.zw_since.get() {
                acc.zero_window_ns = acc
                    .zero_window_ns
                    .saturating_add(acc.last_ts.0.saturating_sub(since.0).max(0));
            }
        }
        let side = |x: &Side| SideFacts {
            zeek: x.zeek,
            syn_sent: x.syn_sent,
            isn_seen: x.isn.is_some(),
            sent_non_syn: x.sent_non_syn,
            mss: x.mss,
            wscale_offered: x.wscale_offered,
            unacked_capped: x.unacked_capped,
        };
        let own = Facts {
            acc,
            sides: [side(&self.sides[0]), side(&self.sides[1])],
        };
        match &self.revived {
            Some(old) => old.facts.merged(own, max_sightings),
            None => own,
        }
    }

    /// The `pcapsleuth flows` row of this stream.
    pub(super) fn summary(&self, max_sightings: usize) -> FlowSummary {
        self.facts(max_sightings)
            .summary(self.id, self.client, self.server)
    }

    /// Retire this stream: its summary facts and tombstone.
    pub(super) fn retired(&self, max_sightings: usize) -> Retired {
        let open = !self.closed && self.last_ts.is_some();
        let pending = |d| {
            if open {
                super::stalls::pending(self, d)
            } else {
                None
            }
        };
        Retired {
            client: self.client,
            server: self.server,
            ws_base: self.ws_base,
            facts: self.facts(max_sightings),
            last_frame: self.last_frame,
            last_ts: self.last_ts.unwrap_or(self.acc.last_ts),
            pending: [
                pending(Direction::ClientToServer),
                pending(Direction::ServerToClient),
            ],
        }
    }

    /// A fresh record for a late packet of retired stream `id`: Wireshark's
    /// `base_seq`s and the Zeek states continue, the rest starts over.
    pub(super) fn revive(id: StreamId, old: Retired, meta: &PacketMeta) -> Stream {
        let mut st = Stream::new(id, old.client, old.server, meta);
        st.ws_base = old.ws_base;
        for (side, f) in st.sides.iter_mut().zip(old.facts.sides.iter()) {
            side.zeek = f.zeek;
            side.sent_non_syn = f.sent_non_syn;
        }
        st.revived = Some(Box::new(old));
        st
    }
}

/// The sender's and the receiver's state for a segment travelling in `d`.
pub(super) fn both_mut(sides: &mut [Side; 2], d: Direction) -> (&mut Side, &mut Side) {
    let [c, s] = sides;
    match d {
        Direction::ClientToServer => (c, s),
        Direction::ServerToClient => (s, c),
    }
}
