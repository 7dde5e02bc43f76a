//! Duplicate-sighting matching: is this packet one already captured elsewhere?
//!
//! A multi-interface capture (`dumpcap -i veth -i br0`, `tcpdump -i any`,
//! lo + eth0) holds one packet once per interface it crossed. Wireshark 4.0
//! flags the second copy as a retransmission (Wireshark issue 19463); we
//! recognise it as the same packet and cite the frame of the first sighting.
//!
//! **Frame order is not time order.** dumpcap without immediate mode writes
//! each interface's libpcap buffer in turn, so a burst of 64 and more frames
//! from one interface precedes the other interface's copies, whose timestamps
//! are *earlier* (`fixtures/captures/two-interfaces.pcapng`). A ring of the
//! last 16 segments per stream missed those. This table instead:
//! - keys each packet by a [`DupSig`]: its direction and its public
//!   [`PacketFingerprint`] (IP ID, raw seq/ack, flags, payload length, raw
//!   window, TCP timestamps, first SACK block, a hash of the first 32 captured
//!   payload bytes; `fingerprint.rs`). An entry keeps a 64-bit identity hash
//!   of it ([`DupSig::identity`]; two different packets of one stream within
//!   the window have equal identities with probability 2⁻⁶⁴) and the index of
//!   its place in the stream's place list, 40 bytes in all, and the table
//!   scans a dense column of 32-bit folds of the identities first;
//! - matches in either time direction: `|Δts| ≤ FlowConfig::duplicate_window_ns`;
//! - expires entries by timestamp, not by count: per stream it tracks the
//!   latest timestamp seen at each [`SightKey`] place (timestamps from one
//!   place are monotonic in any capture tool). Once two places are known, an
//!   entry older than every place's latest timestamp by more than the window
//!   can never match again and is dropped. While only one place is known the
//!   horizon is [`SINGLE_PLACE_HORIZON_NS`] (the other place's block may not
//!   have been written yet);
//! - is hard-capped at [`MAX_ENTRIES`] per stream (oldest inserted evicted),
//!   so memory is O(active flows).
//!
//! The first sighting in **file** order updates flow state; later ones get
//! `duplicate_of` = its frame (Wireshark cites by frame number).

use crate::{L4Fingerprint, PacketFingerprint, SegmentAnalysis};
use pcapsleuth_core::{Direction, FrameNo, InterfaceId, Timestamp};
use std::collections::VecDeque;

/// Most fingerprints remembered per open stream (oldest inserted evicted).
/// Each entry holds its first sighting's verdict, which a later sighting
/// copies (the table's analyzers keep no verdict ring of their own:
/// `StreamAnalyzer::without_recent_verdicts`).
pub(crate) const MAX_ENTRIES: usize = 256;

/// Fingerprints a finished stream keeps for good (the closing FIN/ACK or RST
/// is the packet most often seen again).
pub(crate) const CLOSED_ENTRIES: usize = 4;

/// Most not-yet-matched fingerprints a finished stream keeps in addition, for
/// [`SINGLE_PLACE_HORIZON_NS`] of capture time after its close (see
/// [`SweepQueue`]): the other interface's block of copies may still follow in
/// file order (dumpcap writes blocks of 64 and more frames).
pub(crate) const CLOSED_PENDING_ENTRIES: usize = MAX_ENTRIES;

/// Expiry horizon while a stream has been seen at one place only, ns. The copy
/// from a second place can trail by a whole capture-buffer flush in file order
/// (dumpcap's libpcap read timeout is of the order of 250 ms–1 s); entries
/// this much older than the place's latest timestamp are dropped.
pub(crate) const SINGLE_PLACE_HORIZON_NS: i64 = 1_000_000_000;

/// Places tracked per stream for timestamp expiry; beyond this, expiry falls
/// back to the single-place horizon.
const MAX_PLACES: usize = 4;

/// What makes two captured packets of one stream "the same packet"
/// (duplicate sightings): the direction plus the packet's
/// [`PacketFingerprint`] (which leaves addresses and ports out; within one
/// stream they are equal anyway).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct DupSig {
    pub(crate) dir: Direction,
    pub(crate) fp: PacketFingerprint,
}

impl DupSig {
    /// 64-bit identity of the signature: every field of the direction and
    /// the fingerprint (with which options are present) goes through a
    /// multiply-rotate step, then the splitmix64 finaliser spreads every bit
    /// over the whole word. Equal signatures give equal identities; for
    /// different ones an equal identity has probability about 2⁻⁶⁴.
    pub(crate) fn identity(&self) -> u64 {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut h: u64 = 0x243f_6a88_85a3_08d3;
        let mut step = |w: u64| h = (h ^ w).wrapping_mul(K).rotate_left(29);
        let fp = &self.fp;
        // Which optional fields are present, the transport and the direction.
        let mut tag = u64::from(self.dir.index() as u8);
        tag |= u64::from(fp.ip_id.is_some()) << 1;
        step(u64::from(fp.ip_id.unwrap_or(0)) << 32);
        match &fp.l4 {
            L4Fingerprint::Tcp(t) => {
                tag |= u64::from(t.timestamps.is_some()) << 2;
                tag |= u64::from(t.sack0.is_some()) << 3;
                step(u64::from(t.seq.0) << 32 | u64::from(t.ack.0));
                step(
                    u64::from(t.flags) << 48 | u64::from(t.window) << 32 | u64::from(t.payload_len),
                );
                let (a, b) = t.timestamps.unwrap_or((0, 0));
                step(u64::from(a) << 32 | u64::from(b));
                let (l, r) = t.sack0.map_or((0, 0), |(l, r)| (l.0, r.0));
                step(u64::from(l) << 32 | u64::from(r));
                step(t.payload_hash);
            }
            L4Fingerprint::Udp(u) => {
                tag |= 1 << 4;
                step(u64::from(u.payload_len));
                step(u.payload_hash);
            }
        }
        step(tag);
        // splitmix64's finaliser.
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^ (h >> 31)
    }
}

/// The 32-bit fold of an identity scanned before the full comparison (a
/// column of `u32` compares four at a time with SSE2; an equal value only
/// makes the 64-bit comparison run).
fn fold(id: u64) -> u32 {
    (id ^ (id >> 32)) as u32
}

/// Where a packet was seen: capture interface, VLAN tags, Linux cooked-capture
/// interface index and packet type. Two sightings of one packet differ here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SightKey {
    pub(crate) interface: InterfaceId,
    pub(crate) vlans: [u16; 2],
    pub(crate) vlan_count: u8,
    pub(crate) sll_ifindex: Option<u32>,
    pub(crate) sll_pkttype: Option<u8>,
}

/// The first sighting of a packet, as a stream's table keeps it (40 bytes).
#[derive(Debug, Clone, Copy)]
struct DupEntry {
    /// [`DupSig::identity`] of the packet.
    id: u64,
    frame: FrameNo,
    ts: Timestamp,
    /// Our verdict on the first sighting, copied to later sightings (the
    /// table's analyzers keep none).
    analysis: crate::packed::PackedAnalysis,
    /// Bytes in flight computed for the first sighting (0 = none; saturated
    /// at `u32::MAX`, far above any real flight size: the scaled window
    /// is at most 2^30 bytes, RFC 7323 §2.3).
    bytes_in_flight: u32,
    /// Index of the place it was seen at in [`SightingTable::places`].
    place: u8,
    /// Another sighting already matched this entry.
    matched: bool,
}

/// The first sighting a packet duplicates ([`SightingTable::observe`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FirstSighting {
    pub(crate) frame: FrameNo,
    pub(crate) ts: Timestamp,
    /// The capture interface it was seen on.
    pub(crate) interface: InterfaceId,
    analysis: crate::packed::PackedAnalysis,
    bytes_in_flight: u32,
}

/// Per-stream first sightings, bounded by [`MAX_ENTRIES`] and expired by
/// timestamp (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct SightingTable {
    /// [`fold`] of each entry's identity, parallel to `entries` (dense scan).
    quick: VecDeque<u32>,
    entries: VecDeque<DupEntry>,
    /// Every place the stream was seen at (at most [`MAX_PLACE_INDEX`] + 1;
    /// entries name theirs by index) with the latest timestamp seen there.
    places: Vec<(SightKey, Timestamp)>,
    /// More places were seen than [`MAX_PLACES`] (timestamp expiry falls
    /// back to the single-place horizon) or than the list holds.
    places_overflow: bool,
    /// [`SightingTable::close`] kept pending entries; not yet handed to a [`SweepQueue`].
    sweep_wanted: bool,
    /// Prefilter over `quick` ([`FILTER_BITS`] bits): a clear bit means no
    /// entry has a hash with those low bits, so the scan is skipped. Bits of
    /// dropped entries stay set until the next rebuild (a false "maybe" only
    /// costs the scan). Built once [`FILTER_FROM`] entries are held.
    filter: Option<Box<[u64; FILTER_BITS / 64]>>,
    /// Entries remembered since the filter was last rebuilt.
    since_rebuild: usize,
    /// Capture time (ns) from which the next [`SightingTable::observe`]
    /// expires entries ([`EXPIRE_STEP_NS`]).
    next_expire_ns: i64,
}

/// Capture time between two expiry passes of one stream's table, ns.
/// Expiry reads the ring's oldest entry, a cold cache line on a long ring:
/// on every segment it was 2 % of the time on `tcp-heavy`. An entry left up
/// to this much longer matches nothing [`SightingTable::observe`] would not
/// match (it checks `|Δts| ≤ window` itself) and costs only its memory;
/// the ring stays bounded by [`MAX_ENTRIES`].
const EXPIRE_STEP_NS: i64 = 10_000_000;

/// Bits of the per-stream prefilter (256 bytes).
const FILTER_BITS: usize = 2048;
/// Entries from which a stream gets its prefilter (below, the dense scan is
/// as cheap).
const FILTER_FROM: usize = 64;
/// Insertions between two rebuilds of the prefilter from the live entries.
const FILTER_REBUILD: usize = 2 * MAX_ENTRIES;

/// Word and bit of the prefilter for hash `q`.
fn filter_bit(q: u32) -> (usize, u64) {
    let i = q as usize % FILTER_BITS;
    (i / 64, 1u64 << (i % 64))
}

/// Highest place index an entry can hold: a stream seen at more places
/// remembers no first sighting from the further ones (256 interface, VLAN
/// and cooked-capture combinations for one connection do not occur).
const MAX_PLACE_INDEX: usize = u8::MAX as usize;

impl FirstSighting {
    /// Our verdict on the first sighting.
    pub(crate) fn analysis(&self) -> SegmentAnalysis {
        self.analysis.unpack()
    }

    /// Bytes in flight computed for the first sighting.
    pub(crate) fn bytes_in_flight(&self) -> Option<u64> {
        (self.bytes_in_flight != 0).then_some(u64::from(self.bytes_in_flight))
    }
}

impl SightingTable {
    /// Take `old`'s fingerprint buffers, emptied, in place of this fresh
    /// table's (its prefilter is not kept: a fresh table has none).
    pub(crate) fn reuse_buffers(&mut self, old: SightingTable) {
        self.quick = pcapsleuth_core::grow::emptied(old.quick);
        self.entries = pcapsleuth_core::grow::emptied(old.entries);
        let mut places = old.places;
        places.clear();
        self.places = places;
    }

    /// Heap bytes by capacity.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.quick.capacity() * std::mem::size_of::<u32>()
            + self.entries.capacity() * std::mem::size_of::<DupEntry>()
            + self.places.capacity() * std::mem::size_of::<(SightKey, Timestamp)>()
            + self.filter.as_ref().map_or(0, |_| FILTER_BITS / 8)
    }

    /// Number of remembered first sightings.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Match a packet against earlier first sightings, or remember it as a
    /// first sighting. Returns the first sighting it duplicates.
    ///
    /// A match needs an equal fingerprint, `|Δts| ≤ window_ns` (either time
    /// direction), and a different place or the same non-zero IP ID. Two
    /// identical IP-ID-0 packets at one place are two packets (a SYN/ACK
    /// re-sent by the server's timer and again for a retransmitted SYN, 72 µs
    /// apart in `lab/syn-retransmit.pcap`). Real retransmissions differ in IP
    /// ID (or TS value) or come tens of ms later, beyond the 10 ms window.
    pub(crate) fn observe(
        &mut self,
        sig: DupSig,
        key: SightKey,
        frame: FrameNo,
        ts: Timestamp,
        window_ns: i64,
    ) -> Option<FirstSighting> {
        let window = window_ns.max(0);
        let place = self.note_place(key, ts);
        // Also when time went back by more than a step (interleaved
        // interface blocks): the next pass is then due at once.
        if ts.0 >= self.next_expire_ns
            || ts.0 < self.next_expire_ns.saturating_sub(2 * EXPIRE_STEP_NS)
        {
            self.expire(window);
            self.next_expire_ns = ts.0.saturating_add(EXPIRE_STEP_NS);
        }
        let id = sig.identity();
        let q = fold(id);
        // Newest first; the dense `quick` column is scanned alone and only
        // its equal values look at the full entry. Most packets match no
        // entry: a branch-free pass over the column settles that first.
        let mut hit = None;
        let (qa, qb) = self.quick.as_slices();
        let maybe = match &self.filter {
            Some(f) => {
                let (w, b) = filter_bit(q);
                f[w] & b != 0
            }
            None => true,
        };
        if !maybe || (!contains_quick(qa, q) && !contains_quick(qb, q)) {
            self.remember(id, place, frame, ts);
            return None;
        }
        let candidates = qb
            .iter()
            .enumerate()
            .rev()
            .map(|(i, v)| (i + qa.len(), v))
            .chain(qa.iter().enumerate().rev());
        for (i, _) in candidates.filter(|(_, v)| **v == q) {
            if let Some(e) = self.entries.get_mut(i) {
                if e.id == id
                    && ts.0.abs_diff(e.ts.0) <= window as u64
                    && (sig.fp.strong() || Some(e.place) != place)
                {
                    e.matched = true;
                    hit = Some(*e);
                    break;
                }
            }
        }
        match hit {
            Some(e) => Some(FirstSighting {
                frame: e.frame,
                ts: e.ts,
                interface: self
                    .places
                    .get(usize::from(e.place))
                    .map_or(InterfaceId(0), |p| p.0.interface),
                analysis: e.analysis,
                bytes_in_flight: e.bytes_in_flight,
            }),
            None => {
                self.remember(id, place, frame, ts);
                None
            }
        }
    }

    /// Remember a first sighting (identity `id`, seen at place index
    /// `place`; none when the place list is full: not remembered), evicting
    /// the oldest inserted entry at [`MAX_ENTRIES`].
    fn remember(&mut self, id: u64, place: Option<u8>, frame: FrameNo, ts: Timestamp) {
        let Some(place) = place else { return };
        let q = fold(id);
        if self.entries.len() >= MAX_ENTRIES {
            self.quick.pop_front();
            self.entries.pop_front();
        }
        pcapsleuth_core::grow::push_back(&mut self.quick, q);
        self.since_rebuild += 1;
        // Every held hash must stay in the filter while there is one.
        match self.filter.as_mut() {
            Some(f) if self.since_rebuild < FILTER_REBUILD => {
                let (w, b) = filter_bit(q);
                f[w] |= b;
            }
            Some(_) => self.rebuild_filter(),
            None if self.quick.len() >= FILTER_FROM => self.rebuild_filter(),
            None => {}
        }
        pcapsleuth_core::grow::push_back(
            &mut self.entries,
            DupEntry {
                id,
                frame,
                ts,
                analysis: crate::packed::PackedAnalysis::default(),
                bytes_in_flight: 0,
                place,
                matched: false,
            },
        );
    }

    /// Build the prefilter from the hashes held.
    fn rebuild_filter(&mut self) {
        let f = self
            .filter
            .get_or_insert_with(|| Box::new([0; FILTER_BITS / 64]));
        f.fill(0);
        for &q in &self.quick {
            let (w, b) = filter_bit(q);
            f[w] |= b;
        }
        self.since_rebuild = 0;
    }

    /// Record the verdict of the first sighting `frame` (just observed).
    pub(crate) fn set_verdict(
        &mut self,
        frame: FrameNo,
        analysis: SegmentAnalysis,
        bytes_in_flight: Option<u64>,
    ) {
        if let Some(e) = self.entries.back_mut().filter(|e| e.frame == frame) {
            e.analysis = crate::packed::PackedAnalysis::pack(&analysis);
            e.bytes_in_flight = bytes_in_flight.map_or(0, |b| u32::try_from(b).unwrap_or(u32::MAX));
        }
    }

    /// Note that the stream was seen at `key` at `ts`; returns the place's
    /// index in [`SightingTable::places`] (none once the list is full).
    fn note_place(&mut self, key: SightKey, ts: Timestamp) -> Option<u8> {
        if let Some(i) = self.places.iter().position(|p| p.0 == key) {
            if let Some(p) = self.places.get_mut(i) {
                if ts > p.1 {
                    p.1 = ts;
                }
            }
            return u8::try_from(i).ok();
        }
        if self.places.len() >= MAX_PLACES {
            self.places_overflow = true;
        }
        if self.places.len() > MAX_PLACE_INDEX {
            return None;
        }
        // Usually one place per stream: no room for four up front.
        self.places.reserve_exact(1);
        self.places.push((key, ts));
        u8::try_from(self.places.len() - 1).ok()
    }

    /// Drop entries (from the oldest inserted) that no future packet can match.
    fn expire(&mut self, window: i64) {
        let watermark = if self.places.len() >= 2 && !self.places_overflow {
            self.places
                .iter()
                .map(|p| p.1 .0)
                .min()
                .map(|t| t.saturating_sub(window))
        } else {
            // The first MAX_PLACES places only: expiry follows those.
            self.places
                .iter()
                .take(MAX_PLACES)
                .map(|p| p.1 .0)
                .max()
                .map(|t| t.saturating_sub(window.max(SINGLE_PLACE_HORIZON_NS)))
        };
        let Some(w) = watermark else { return };
        while self.entries.front().is_some_and(|e| e.ts.0 < w) {
            self.entries.pop_front();
            self.quick.pop_front();
        }
    }

    /// Shrink for a finished stream: keep the newest [`CLOSED_ENTRIES`] and up
    /// to [`CLOSED_PENDING_ENTRIES`] newest entries not matched yet (their
    /// copies may follow in another interface's block). When more than
    /// [`CLOSED_ENTRIES`] remain, [`SightingTable::take_sweep_wanted`] returns
    /// their number once: the caller then queues the stream in a [`SweepQueue`] so
    /// [`SightingTable::sweep`] drops the extra later.
    pub(crate) fn close(&mut self) {
        let n = self.entries.len();
        let keep_newest = n.saturating_sub(CLOSED_ENTRIES);
        // Of the older entries, only the newest CLOSED_PENDING_ENTRIES
        // unmatched ones stay: skip the oldest unmatched beyond that.
        let unmatched_old = self
            .entries
            .iter()
            .take(keep_newest)
            .filter(|e| !e.matched)
            .count();
        let mut skip = unmatched_old.saturating_sub(CLOSED_PENDING_ENTRIES);
        let mut i = 0;
        // In place (a late segment of a closed stream closes it again).
        self.entries.retain(|e| {
            let keep = if i >= keep_newest {
                true
            } else if e.matched {
                false
            } else if skip > 0 {
                skip -= 1;
                false
            } else {
                true
            };
            i += 1;
            keep
        });
        self.quick.clear();
        self.quick.extend(self.entries.iter().map(|e| fold(e.id)));
        if self.entries.capacity() > self.entries.len() {
            self.entries.shrink_to_fit();
            self.quick.shrink_to_fit();
        }
        self.places.shrink_to_fit();
        self.filter = None;
        self.since_rebuild = 0;
        self.sweep_wanted = self.entries.len() > CLOSED_ENTRIES;
    }

    /// When the last [`SightingTable::close`] kept pending entries that need a
    /// later [`SightingTable::sweep`]: the number of entries held (once per close).
    pub(crate) fn take_sweep_wanted(&mut self) -> Option<usize> {
        std::mem::take(&mut self.sweep_wanted).then_some(self.entries.len())
    }

    /// Cut a finished stream down to its newest [`CLOSED_ENTRIES`] for good.
    pub(crate) fn sweep(&mut self) {
        let extra = self.entries.len().saturating_sub(CLOSED_ENTRIES);
        self.quick.drain(..extra);
        self.entries.drain(..extra);
        self.quick.shrink_to_fit();
        self.entries.shrink_to_fit();
        // The entries kept name their places by index.
        self.places.shrink_to_fit();
        self.filter = None;
    }
}

/// Whether `q` occurs in `column`: compares 16 values at a time without
/// early exit inside a block, which the compiler turns into straight-line
/// (vectorisable) code; the per-packet scan of up to [`MAX_ENTRIES`] hashes.
fn contains_quick(column: &[u32], q: u32) -> bool {
    let mut blocks = column.chunks_exact(16);
    for b in &mut blocks {
        if b.iter().fold(false, |acc, v| acc | (*v == q)) {
            return true;
        }
    }
    blocks.remainder().contains(&q)
}

/// Most fingerprints held by finished streams awaiting a sweep (all streams
/// together); beyond this the oldest closed stream is swept early. 65 536 ×
/// 132 bytes (entry plus its quick hash) = 8.25 MiB at most.
pub(crate) const MAX_PENDING_TOTAL: usize = 65_536;

/// Finished streams still holding pending sightings, in close order, with the
/// close timestamp. Each is swept ([`SightingTable::sweep`]) once the capture's
/// latest timestamp is [`SINGLE_PLACE_HORIZON_NS`] past its close or more than
/// they hold more than [`MAX_PENDING_TOTAL`] entries in all, which bounds the
/// extra memory.
#[derive(Debug, Default)]
pub(crate) struct SweepQueue {
    /// (stream index, close timestamp, entries held).
    queue: VecDeque<(usize, Timestamp, usize)>,
    /// Sum of entries held by queued streams.
    total: usize,
}

impl SweepQueue {
    /// Queue stream index `idx`, closed at `ts`, holding `entries` fingerprints.
    pub(crate) fn push(&mut self, idx: usize, ts: Timestamp, entries: usize) {
        self.queue.push_back((idx, ts, entries));
        self.total = self.total.saturating_add(entries);
    }

    /// Pop the next stream index due for a sweep at capture time `now`.
    pub(crate) fn pop_due(&mut self, now: Timestamp) -> Option<usize> {
        let &(idx, ts, n) = self.queue.front()?;
        if now.0.saturating_sub(ts.0) > SINGLE_PLACE_HORIZON_NS || self.total > MAX_PENDING_TOTAL {
            self.queue.pop_front();
            self.total = self.total.saturating_sub(n);
            Some(idx)
        } else {
            None
        }
    }

    /// Heap bytes by capacity.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.queue.capacity() * std::mem::size_of::<(usize, Timestamp, usize)>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{L4Fingerprint, TcpFingerprint};
    use pcapsleuth_core::SeqNum;

    fn sig(seq: u32, ip_id: u32) -> DupSig {
        DupSig {
            dir: Direction::ClientToServer,
            fp: PacketFingerprint {
                ip_id: Some(ip_id),
                l4: L4Fingerprint::Tcp(TcpFingerprint {
                    seq: SeqNum(seq),
                    ack: SeqNum(1),
                    flags: 0x10,
                    window: 500,
                    payload_len: 100,
                    timestamps: None,
                    sack0: None,
                    payload_hash: 7,
                }),
            },
        }
    }

    fn place(interface: u32) -> SightKey {
        SightKey {
            interface: InterfaceId(interface),
            vlans: [0; 2],
            vlan_count: 0,
            sll_ifindex: None,
            sll_pkttype: None,
        }
    }

    const W: i64 = 10_000_000;

    #[test]
    fn copies_written_a_block_later_with_earlier_timestamps_match() {
        let mut t = SightingTable::default();
        // Interface 0 writes 100 segments 1 ms apart (100 ms in all) ...
        for i in 0..100u32 {
            let ts = Timestamp(i64::from(i) * 1_000_000 + 50_000);
            assert!(t
                .observe(
                    sig(i * 100, i + 1),
                    place(0),
                    FrameNo(u64::from(i) + 1),
                    ts,
                    W
                )
                .is_none());
        }
        // ... then interface 1 its copies, each 50 µs earlier.
        for i in 0..100u32 {
            let ts = Timestamp(i64::from(i) * 1_000_000);
            let hit = t.observe(
                sig(i * 100, i + 1),
                place(1),
                FrameNo(u64::from(i) + 101),
                ts,
                W,
            );
            assert_eq!(
                hit.map(|e| e.frame.get()),
                Some(u64::from(i) + 1),
                "copy {i}"
            );
        }
        // Both places now advanced to ~99 ms: everything older than 89 ms
        // expires, on the first packet an expiry step (10 ms, one entry per
        // ms here) after the last pass.
        t.observe(
            sig(99_999, 0),
            place(0),
            FrameNo(300),
            Timestamp(99_100_000),
            W,
        );
        let step = (EXPIRE_STEP_NS / 1_000_000) as usize;
        assert!(t.len() <= 12 + step, "{} entries left", t.len());
        t.observe(
            sig(99_998, 0),
            place(1),
            FrameNo(301),
            Timestamp(99_100_000 + EXPIRE_STEP_NS),
            W,
        );
        assert!(t.len() <= 12, "{} entries left", t.len());
    }

    #[test]
    fn retransmissions_are_not_sightings() {
        let mut t = SightingTable::default();
        assert!(t
            .observe(sig(1, 5), place(0), FrameNo(1), Timestamp(0), W)
            .is_none());
        // Same bytes re-sent with a new IP ID, same place, 200 µs later.
        assert!(t
            .observe(sig(1, 6), place(0), FrameNo(2), Timestamp(200_000), W)
            .is_none());
        // Same IP ID as frame 1 but 30 ms later at another place: beyond the window.
        assert!(t
            .observe(sig(1, 5), place(1), FrameNo(3), Timestamp(30_000_000), W)
            .is_none());
        // IP ID 0 twice at one place: two packets.
        assert!(t
            .observe(sig(9, 0), place(0), FrameNo(4), Timestamp(30_000_000), W)
            .is_none());
        assert!(t
            .observe(sig(9, 0), place(0), FrameNo(5), Timestamp(30_000_072), W)
            .is_none());
        // IP ID 0 at another place: one packet seen twice.
        let hit = t.observe(sig(9, 0), place(1), FrameNo(6), Timestamp(30_000_010), W);
        assert_eq!(hit.map(|e| e.frame.get()), Some(5));
    }

    #[test]
    fn size_is_capped_and_single_place_expires_after_horizon() {
        let mut t = SightingTable::default();
        for i in 0..1000u32 {
            t.observe(
                sig(i, i + 1),
                place(0),
                FrameNo(u64::from(i)),
                Timestamp(i64::from(i)),
                W,
            );
        }
        assert_eq!(t.len(), MAX_ENTRIES);
        t.observe(
            sig(5000, 1),
            place(0),
            FrameNo(2000),
            Timestamp(SINGLE_PLACE_HORIZON_NS + 2000),
            W,
        );
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn close_keeps_unmatched_entries_until_swept() {
        let mut t = SightingTable::default();
        t.observe(sig(0, 1), place(1), FrameNo(1), Timestamp(0), W);
        for i in 1..100u32 {
            t.observe(
                sig(i, i + 1),
                place(0),
                FrameNo(u64::from(i) + 1),
                Timestamp(1000),
                W,
            );
        }
        t.close();
        assert_eq!(t.take_sweep_wanted(), Some(100));
        assert_eq!(t.take_sweep_wanted(), None);
        assert_eq!(t.len(), 100);
        let hit = t.observe(sig(50, 51), place(1), FrameNo(500), Timestamp(999), W);
        assert_eq!(hit.map(|e| e.frame.get()), Some(51));
        // Matched entries are not kept again; the sweep leaves the newest 4.
        t.close();
        assert_eq!(t.len(), 99);
        t.sweep();
        assert_eq!(t.len(), CLOSED_ENTRIES);

        let mut q = SweepQueue::default();
        q.push(7, Timestamp(0), 10);
        assert_eq!(q.pop_due(Timestamp(SINGLE_PLACE_HORIZON_NS)), None);
        assert_eq!(q.pop_due(Timestamp(SINGLE_PLACE_HORIZON_NS + 1)), Some(7));
        assert_eq!(q.pop_due(Timestamp(i64::MAX)), None);
        for i in 0..=(MAX_PENDING_TOTAL / 100) {
            q.push(i, Timestamp(0), 100);
        }
        assert_eq!(q.pop_due(Timestamp(0)), Some(0));
        assert_eq!(q.pop_due(Timestamp(0)), None);
    }

    #[test]
    fn an_entry_is_40_bytes() {
        assert_eq!(std::mem::size_of::<DupEntry>(), 40);
    }

    #[test]
    fn identities_tell_every_field_apart() {
        let base = sig(1, 5);
        let tcp = |f: &dyn Fn(&mut TcpFingerprint)| {
            let mut s = base;
            if let L4Fingerprint::Tcp(t) = &mut s.fp.l4 {
                f(t);
            }
            s
        };
        let variants = [
            base,
            DupSig {
                dir: Direction::ServerToClient,
                ..base
            },
            DupSig {
                fp: PacketFingerprint {
                    ip_id: None,
                    ..base.fp
                },
                ..base
            },
            DupSig {
                fp: PacketFingerprint {
                    ip_id: Some(0),
                    ..base.fp
                },
                ..base
            },
            tcp(&|t| t.seq = SeqNum(2)),
            tcp(&|t| t.ack = SeqNum(2)),
            tcp(&|t| t.flags = 0x18),
            tcp(&|t| t.window = 501),
            tcp(&|t| t.payload_len = 101),
            tcp(&|t| t.timestamps = Some((0, 0))),
            tcp(&|t| t.timestamps = Some((0, 1))),
            tcp(&|t| t.sack0 = Some((SeqNum(0), SeqNum(0)))),
            tcp(&|t| t.sack0 = Some((SeqNum(0), SeqNum(1)))),
            tcp(&|t| t.payload_hash = 8),
            DupSig {
                fp: PacketFingerprint {
                    l4: L4Fingerprint::Udp(crate::UdpFingerprint {
                        payload_len: 100,
                        payload_hash: 7,
                    }),
                    ..base.fp
                },
                ..base
            },
        ];
        let ids: Vec<u64> = variants.iter().map(DupSig::identity).collect();
        for (i, a) in ids.iter().enumerate() {
            for (j, b) in ids.iter().enumerate().skip(i + 1) {
                assert_ne!(a, b, "variants {i} and {j}");
            }
        }
        assert_eq!(base.identity(), sig(1, 5).identity());
        // A bulk transfer's segments (seq and IP ID counting up, ACKs
        // alternating): no two identities and no two folds of neighbours equal.
        let mut seen = std::collections::HashSet::new();
        for i in 0..200_000u32 {
            let s = tcp(&|t| {
                t.seq = SeqNum(i.wrapping_mul(1448));
                t.ack = SeqNum(i / 2);
            });
            assert!(seen.insert(s.identity()), "segment {i}");
        }
    }

    #[test]
    fn a_match_names_the_interface_of_its_first_sighting() {
        let mut t = SightingTable::default();
        // Six places (more than the four expiry follows), a weak fingerprint
        // (IP ID 0) each time: only another place makes a match.
        for p in 0..6u32 {
            t.observe(
                sig(100 + p, 1),
                place(10 + p),
                FrameNo(u64::from(p) + 1),
                Timestamp(0),
                W,
            );
        }
        assert!(t
            .observe(sig(7, 0), place(15), FrameNo(10), Timestamp(1), W)
            .is_none());
        assert!(t
            .observe(sig(7, 0), place(15), FrameNo(11), Timestamp(2), W)
            .is_none());
        let hit = t.observe(sig(7, 0), place(13), FrameNo(12), Timestamp(3), W);
        assert_eq!(
            hit.map(|e| (e.frame.get(), e.interface)),
            Some((11, InterfaceId(15)))
        );
        // A strong fingerprint matches at its own place too.
        let hit = t.observe(sig(104, 1), place(14), FrameNo(13), Timestamp(4), W);
        assert_eq!(
            hit.map(|e| (e.frame.get(), e.interface)),
            Some((5, InterfaceId(14)))
        );
    }

    #[test]
    fn a_stream_at_more_places_than_the_list_holds_forgets_the_further_ones() {
        let mut t = SightingTable::default();
        for p in 0..=(MAX_PLACE_INDEX as u32 + 10) {
            t.observe(
                sig(p, p + 1),
                place(p),
                FrameNo(u64::from(p)),
                Timestamp(0),
                W,
            );
        }
        assert_eq!(t.places.len(), MAX_PLACE_INDEX + 1);
        // The 256th place's packet is remembered, the 257th's is not.
        let last = MAX_PLACE_INDEX as u32;
        assert!(t
            .observe(
                sig(last, last + 1),
                place(1),
                FrameNo(9000),
                Timestamp(1),
                W
            )
            .is_some());
        assert!(t
            .observe(
                sig(last + 1, last + 2),
                place(1),
                FrameNo(9001),
                Timestamp(1),
                W
            )
            .is_none());
    }
}
