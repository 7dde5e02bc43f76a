//! A per-direction ledger of unacknowledged data segments and every
//! transmission of each, for detectors that reason about *which sizes* of
//! segment get through (`mss-blackhole`) and *how* a stuck segment is re-sent
//! (`missing-zero-window`), plus the RTO-backoff test both use.
//!
//! The ledger is small bookkeeping on top of the flow table's
//! [`SegmentEvent`]s, not a second TCP state machine: it remembers data
//! segments above the peer's cumulative ACK (capped at [`MAX_RECORDS`]) and
//! forgets them once acknowledged, so memory is O(bytes in flight).
//!
//! A segment is identified by (relative sequence, payload length). When a later
//! transmission covers the same bytes with a different geometry (Linux
//! `tcp_mtu_probing` re-segmenting at `tcp_base_mss`, or
//! `tcp_retrans_try_collapse` merging), the older record is marked
//! *superseded*: its eventual acknowledgement proves nothing about its own size.

use pcapsleuth_core::{FrameNo, Timestamp};
use pcapsleuth_flow::SegmentEvent;
use std::collections::VecDeque;

/// Most unacknowledged records kept per direction; beyond it new segments are
/// not recorded (the oldest, the ones that get stuck, are kept).
pub const MAX_RECORDS: usize = 1024;

/// Most records kept while the peer has never acknowledged anything (a
/// one-sided capture would otherwise fill the ledger of every flow).
pub const MAX_RECORDS_UNACKED_PEER: usize = 64;

/// Queue capacity (records) above which an emptied queue is freed.
const SHRINK_ABOVE: usize = 16;

/// Most transmissions remembered per record (the count goes on).
pub const MAX_TX: usize = 32;

/// One transmission of a segment: its frame and capture time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tx {
    /// Wireshark frame number.
    pub frame: FrameNo,
    /// Capture timestamp (ns since the Unix epoch).
    pub ts: Timestamp,
}

/// What a record holds beyond its first transmission, on the heap: only a
/// record re-sent or superseded (the rare cases) pays for it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct More {
    /// All remembered transmissions (first included) once there are two or
    /// more, else empty.
    txs: Vec<Tx>,
    /// Transmissions seen (may exceed `txs.len()`).
    tx_count: u32,
    /// The first transmission covering these bytes with another geometry.
    superseded_by: Option<Tx>,
}

/// A data segment and its transmissions (40 bytes; a segment sent once and
/// never superseded, the common case, owns no heap allocation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentRecord {
    /// Relative sequence number of its first byte (bytes).
    pub rel_seq: i64,
    /// TCP payload length (bytes).
    pub payload_len: u32,
    /// IP datagram length (bytes) of its last transmission.
    pub ip_len: u32,
    first: Tx,
    more: Option<Box<More>>,
}

impl SegmentRecord {
    fn new(rel_seq: i64, payload_len: u32, ip_len: u32, first: Tx) -> Self {
        SegmentRecord {
            rel_seq,
            payload_len,
            ip_len,
            first,
            more: None,
        }
    }
    fn more(&mut self) -> &mut More {
        self.more.get_or_insert_with(|| {
            Box::new(More {
                txs: Vec::new(),
                tx_count: 1,
                superseded_by: None,
            })
        })
    }
    /// Count one more transmission, remembering it while fewer than [`MAX_TX`] are.
    fn push_tx(&mut self, tx: Tx) {
        let first = self.first;
        let m = self.more();
        m.tx_count = m.tx_count.saturating_add(1);
        if m.txs.is_empty() {
            m.txs.push(first);
        }
        if m.txs.len() < MAX_TX {
            m.txs.push(tx);
        }
    }
    /// Transmissions in capture order (the first may be a retransmission when
    /// the original was not captured); at most [`MAX_TX`].
    pub fn txs(&self) -> &[Tx] {
        match &self.more {
            Some(m) if !m.txs.is_empty() => &m.txs,
            _ => std::slice::from_ref(&self.first),
        }
    }
    /// Number of transmissions seen (may exceed `txs().len()`).
    pub fn tx_count(&self) -> u32 {
        self.more.as_ref().map_or(1, |m| m.tx_count)
    }
    /// The first later transmission that covered these bytes with another
    /// geometry, if any.
    pub fn superseded_by(&self) -> Option<Tx> {
        self.more.as_ref().and_then(|m| m.superseded_by)
    }
    /// A later transmission covered these bytes with another geometry.
    pub fn superseded(&self) -> bool {
        self.superseded_by().is_some()
    }
    /// Retransmissions seen (transmissions − 1).
    pub fn retransmissions(&self) -> u32 {
        self.tx_count().saturating_sub(1)
    }
    /// Relative sequence number just past its last byte.
    pub fn end(&self) -> i64 {
        self.rel_seq + i64::from(self.payload_len)
    }
    /// Gaps between successive remembered transmissions, ns (clamped at 0 for
    /// frames out of timestamp order).
    pub fn gaps_ns(&self) -> Vec<i64> {
        self.txs()
            .windows(2)
            .map(|w| w[1].ts.0.saturating_sub(w[0].ts.0).max(0))
            .collect()
    }
    /// Ledger order: by first byte, then by length.
    fn key(&self) -> (i64, u32) {
        (self.rel_seq, self.payload_len)
    }
}

/// How a retired record left the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A cumulative ACK covered it.
    Acked {
        /// Frame of that ACK.
        frame: FrameNo,
        /// Its timestamp.
        ts: Timestamp,
    },
    /// Still unacknowledged when the capture ended.
    CaptureEnd,
}

/// A record that was retransmitted at least the ledger's threshold, with how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retired {
    /// The record.
    pub record: SegmentRecord,
    /// How it ended.
    pub outcome: Outcome,
}

/// Ledger of one direction's data (the sender's segments and the peer's ACKs).
///
/// The unacknowledged records sit in one queue ordered by (relative
/// sequence, payload length): a sender sends in order, so a new segment is
/// appended and a cumulative ACK pops from the front; a segment out of order
/// is placed by binary search. No heap allocation per segment sent once.
#[derive(Debug, Clone, Default)]
pub struct DirLedger {
    unacked: VecDeque<SegmentRecord>,
    retire_threshold: u32,
    retired: Vec<Retired>,
    /// Largest payload (bytes) of a segment acknowledged without being superseded.
    pub largest_acked_payload: u32,
    /// Largest IP datagram (bytes) of such a segment.
    pub largest_acked_ip: u32,
    /// Number of segments acknowledged (not superseded).
    pub acked_segments: u64,
    /// Highest relative ACK the peer sent (bytes), if any.
    pub highest_ack: Option<i64>,
    /// Set when [`MAX_RECORDS`] was reached and segments went unrecorded.
    pub capped: bool,
}

impl DirLedger {
    /// A ledger that retires (reports) records retransmitted at least `retire_threshold` times.
    pub fn new(retire_threshold: u32) -> Self {
        DirLedger {
            retire_threshold,
            ..Default::default()
        }
    }

    /// Index of the first record whose key is not below `key`.
    fn lower_bound(&self, key: (i64, u32)) -> usize {
        // In-order sending: the new key is usually past the last record.
        match self.unacked.back() {
            None => 0,
            Some(b) if b.key() < key => self.unacked.len(),
            Some(_) => self.unacked.partition_point(|r| r.key() < key),
        }
    }

    /// Record a data segment of this direction. Pure ACKs, duplicate sightings
    /// and data already acknowledged are ignored. Returns the record when this
    /// transmission was a retransmission of the same bytes with the same length.
    pub fn on_data(&mut self, seg: &SegmentEvent) -> Option<&SegmentRecord> {
        if seg.payload_len == 0 || seg.duplicate_of.is_some() || seg.flags.syn() || seg.flags.rst()
        {
            return None;
        }
        let s = seg.rel_seq;
        let e = s + i64::from(seg.payload_len);
        if self.highest_ack.is_some_and(|a| e <= a) {
            return None;
        }
        let key = (s, seg.payload_len);
        let tx = Tx {
            frame: seg.frame,
            ts: seg.ts,
        };
        let at = self.lower_bound(key);
        if self.unacked.get(at).is_some_and(|r| r.key() == key) {
            let rec = self.unacked.get_mut(at)?;
            rec.ip_len = seg.ip_len;
            rec.push_tx(tx);
            return Some(rec);
        }
        // Mark overlapping records of another geometry as superseded. Records
        // rarely overlap, so walk back from the new end and stop at the first
        // record that ends at or before the new start.
        let below_end = if self.unacked.back().is_some_and(|b| b.key() < (e, 0)) {
            self.unacked.len()
        } else {
            self.unacked.partition_point(|r| r.key() < (e, 0))
        };
        for rec in self.unacked.range_mut(..below_end).rev() {
            if rec.end() <= s {
                break;
            }
            if !rec.superseded() {
                rec.more().superseded_by = Some(tx);
            }
        }
        let cap = if self.highest_ack.is_some() {
            MAX_RECORDS
        } else {
            MAX_RECORDS_UNACKED_PEER
        };
        if self.unacked.len() >= cap {
            self.capped = true;
            return None;
        }
        let rec = SegmentRecord::new(s, seg.payload_len, seg.ip_len, tx);
        if at == self.unacked.len() {
            pcapsleuth_core::grow::push_back(&mut self.unacked, rec);
        } else {
            pcapsleuth_core::grow::insert(&mut self.unacked, at, rec);
        }
        None
    }

    /// Record a cumulative ACK from the peer (relative, in this direction's
    /// sequence space). Fully covered records leave the ledger, in ledger order.
    pub fn on_ack(&mut self, rel_ack: i64, frame: FrameNo, ts: Timestamp) {
        if self.highest_ack.is_some_and(|a| rel_ack <= a) {
            return;
        }
        self.highest_ack = Some(rel_ack);
        let outcome = Outcome::Acked { frame, ts };
        // Common case: the acknowledged records are a prefix.
        while self
            .unacked
            .front()
            .is_some_and(|r| r.rel_seq < rel_ack && r.end() <= rel_ack)
        {
            if let Some(rec) = self.unacked.pop_front() {
                self.acked(rec, outcome);
            }
        }
        // A record straddling the ACK (partly acknowledged) may hide fully
        // acknowledged ones behind it (keys below `(rel_ack, 0)`).
        if self.unacked.front().is_some_and(|r| r.rel_seq < rel_ack) {
            let n = self.unacked.partition_point(|r| r.key() < (rel_ack, 0));
            let mut i = 0;
            let mut left = n;
            while left > 0 {
                left -= 1;
                if self.unacked.get(i).is_some_and(|r| r.end() <= rel_ack) {
                    if let Some(rec) = self.unacked.remove(i) {
                        self.acked(rec, outcome);
                    }
                } else {
                    i += 1;
                }
            }
        }
        // After a burst, give the queue's memory back (an idle stream holds none).
        if self.unacked.is_empty() && self.unacked.capacity() > SHRINK_ABOVE {
            self.unacked = VecDeque::new();
        }
    }

    #[inline]
    fn acked(&mut self, rec: SegmentRecord, outcome: Outcome) {
        if !rec.superseded() {
            self.acked_segments += 1;
            self.largest_acked_payload = self.largest_acked_payload.max(rec.payload_len);
            self.largest_acked_ip = self.largest_acked_ip.max(rec.ip_len);
        }
        if rec.retransmissions() >= self.retire_threshold {
            self.retired.push(Retired {
                record: rec,
                outcome,
            });
        }
    }

    /// The unacknowledged record starting exactly at `rel_seq` with the largest length, if any.
    pub fn record_at(&self, rel_seq: i64) -> Option<&SegmentRecord> {
        let end = self
            .unacked
            .partition_point(|r| r.key() <= (rel_seq, u32::MAX));
        end.checked_sub(1)
            .and_then(|i| self.unacked.get(i))
            .filter(|r| r.rel_seq == rel_seq)
    }

    /// Unacknowledged records held (at most [`MAX_RECORDS`]).
    pub fn unacked_len(&self) -> usize {
        self.unacked.len()
    }

    /// End of capture (or of the stream): retire every remaining record at
    /// the threshold and free the queue.
    pub fn finish(&mut self) {
        let left = std::mem::take(&mut self.unacked);
        for rec in left {
            if rec.retransmissions() >= self.retire_threshold {
                self.retired.push(Retired {
                    record: rec,
                    outcome: Outcome::CaptureEnd,
                });
            }
        }
    }

    /// Take the records retired so far.
    pub fn take_retired(&mut self) -> Vec<Retired> {
        std::mem::take(&mut self.retired)
    }
}

/// Number of successive gaps that roughly double the one before (ratio 1.5 to
/// 2.7): the signature of retransmission-timeout backoff (RFC 6298 §5.5; Linux
/// `tcp_retransmit_timer` doubles `icsk_rto`, rounded up by the timer wheel,
/// see [`crate::timer`]). Gaps are in ns; non-positive gaps never count.
pub fn backoff_doublings(gaps_ns: &[i64]) -> usize {
    gaps_ns
        .windows(2)
        .filter(|w| {
            let (a, b) = (w[0], w[1]);
            a > 0
                && b > 0
                && b.saturating_mul(2) >= a.saturating_mul(3)
                && b.saturating_mul(10) <= a.saturating_mul(27)
        })
        .count()
}

/// Whether the last `n` gaps form an exponential backoff ladder: at least two
/// doublings among them and no gap shorter than the one before by more than
/// 10 % (timer-wheel rounding; RFC 6298 §5.5).
pub fn is_backoff_ladder(gaps_ns: &[i64]) -> bool {
    let monotone = gaps_ns
        .windows(2)
        .all(|w| w[1].saturating_mul(10) >= w[0].saturating_mul(9));
    monotone && backoff_doublings(gaps_ns) >= 2
}

/// ns → ms with three decimals, for evidence (one definition, in core).
pub use pcapsleuth_core::time::ns_to_ms;

/// Whether a TTL / hop limit is an unrouted initial value (64 Linux/macOS,
/// 128 Windows, 255 network gear, 32 old Windows): a packet still carrying
/// one was captured on its sender's own link.
pub fn is_initial_ttl(ttl: u8) -> bool {
    matches!(ttl, 32 | 64 | 128 | 255)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doublings_table() {
        let ms = |v: &[i64]| v.iter().map(|x| x * 1_000_000).collect::<Vec<_>>();
        assert_eq!(backoff_doublings(&ms(&[214, 416, 832, 1664, 3520])), 4);
        assert_eq!(backoff_doublings(&ms(&[333, 427, 828, 1664])), 2);
        assert_eq!(backoff_doublings(&ms(&[20, 20, 20])), 0);
        assert_eq!(backoff_doublings(&ms(&[200, 1000])), 0);
        assert!(is_backoff_ladder(&ms(&[214, 416, 832])));
        assert!(!is_backoff_ladder(&ms(&[214, 416, 100, 200])));
        assert!(!is_backoff_ladder(&ms(&[20, 21, 20])));
    }

    /// The ledger as it was with a `BTreeMap` (one node per segment): the
    /// reference the queue must match, record for record.
    struct RefRec {
        rel_seq: i64,
        payload_len: u32,
        tx_count: u32,
        superseded: bool,
    }

    impl RefRec {
        fn end(&self) -> i64 {
            self.rel_seq + i64::from(self.payload_len)
        }
    }

    #[derive(Default)]
    struct Reference {
        unacked: std::collections::BTreeMap<(i64, u32), (RefRec, u32)>,
        highest: Option<i64>,
        retired: Vec<(i64, u32, u32, bool)>,
    }

    impl Reference {
        fn data(&mut self, s: i64, len: u32, _tx: Tx) {
            let e = s + i64::from(len);
            if self.highest.is_some_and(|a| e <= a) {
                return;
            }
            if let Some((r, n)) = self.unacked.get_mut(&(s, len)) {
                *n += 1;
                r.tx_count += 1;
                return;
            }
            for (_, (r, _)) in self.unacked.range_mut(..(e, 0)).rev() {
                if r.end() <= s {
                    break;
                }
                r.superseded = true;
            }
            let cap = if self.highest.is_some() {
                MAX_RECORDS
            } else {
                MAX_RECORDS_UNACKED_PEER
            };
            if self.unacked.len() < cap {
                let rec = RefRec {
                    rel_seq: s,
                    payload_len: len,
                    tx_count: 1,
                    superseded: false,
                };
                self.unacked.insert((s, len), (rec, 0));
            }
        }
        fn ack(&mut self, a: i64) {
            if self.highest.is_some_and(|h| a <= h) {
                return;
            }
            self.highest = Some(a);
            let done: Vec<(i64, u32)> = self
                .unacked
                .range(..(a, 0))
                .filter(|(_, (r, _))| r.end() <= a)
                .map(|(k, _)| *k)
                .collect();
            for k in done {
                if let Some((r, _)) = self.unacked.remove(&k) {
                    self.retired
                        .push((r.rel_seq, r.payload_len, r.tx_count, r.superseded));
                }
            }
        }
    }

    #[test]
    fn queue_matches_the_ordered_map_on_reordered_resegmented_traffic() {
        use crate::synth::{segment, C2S};
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |m: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        let mut l = DirLedger::new(0);
        let mut r = Reference::default();
        let mut nxt: i64 = 1;
        let mut acked: i64 = 1;
        for frame in 1..20_000u64 {
            let ts = Timestamp(frame as i64 * 1000);
            match next(10) {
                0..=4 => {
                    let len = [100u32, 536, 1448, 2896][next(4) as usize];
                    let seg = segment(C2S, frame, ts, 7, nxt, len);
                    l.on_data(&seg);
                    r.data(
                        nxt,
                        len,
                        Tx {
                            frame: FrameNo(frame),
                            ts,
                        },
                    );
                    nxt += i64::from(len);
                }
                5..=6 => {
                    // A re-send of older bytes, maybe with another geometry.
                    let back = next(6000) as i64;
                    let s = (nxt - back).max(acked);
                    let len = [100u32, 536, 1448][next(3) as usize];
                    let seg = segment(C2S, frame, ts, 7, s, len);
                    l.on_data(&seg);
                    r.data(
                        s,
                        len,
                        Tx {
                            frame: FrameNo(frame),
                            ts,
                        },
                    );
                }
                _ => {
                    let a = acked + next(4000) as i64;
                    acked = a.min(nxt).max(acked);
                    l.on_ack(acked, FrameNo(frame), ts);
                    r.ack(acked);
                }
            }
            let got: Vec<(i64, u32, u32, bool)> = l
                .unacked
                .iter()
                .map(|x| (x.rel_seq, x.payload_len, x.tx_count(), x.superseded()))
                .collect();
            let want: Vec<(i64, u32, u32, bool)> = r
                .unacked
                .values()
                .map(|(x, _)| (x.rel_seq, x.payload_len, x.tx_count, x.superseded))
                .collect();
            assert_eq!(got, want, "frame {frame}");
        }
        let got: Vec<(i64, u32, u32, bool)> = l
            .take_retired()
            .iter()
            .map(|x| {
                (
                    x.record.rel_seq,
                    x.record.payload_len,
                    x.record.tx_count(),
                    x.record.superseded(),
                )
            })
            .collect();
        assert_eq!(got, r.retired);
        assert!(got.len() > 1000);
    }

    #[test]
    fn a_segment_sent_once_keeps_its_transmission_inline() {
        use crate::synth::{segment, C2S};
        assert!(std::mem::size_of::<SegmentRecord>() <= 40);
        let mut l = DirLedger::new(0);
        let first = segment(C2S, 1, Timestamp(5), 7, 1, 100);
        assert!(l.on_data(&first).is_none());
        let rec = l.record_at(1).cloned();
        let rec = rec
            .as_ref()
            .map(|r| (r.more.is_none(), r.txs().len(), r.tx_count()));
        assert_eq!(rec, Some((true, 1, 1)));
        let again = segment(C2S, 2, Timestamp(9), 7, 1, 100);
        let got = l
            .on_data(&again)
            .map(|r| (r.txs().to_vec(), r.tx_count(), r.superseded()));
        let want = vec![
            Tx {
                frame: FrameNo(1),
                ts: Timestamp(5),
            },
            Tx {
                frame: FrameNo(2),
                ts: Timestamp(9),
            },
        ];
        assert_eq!(got, Some((want, 2, false)));
        // A re-send of other geometry supersedes it; the first keeps its txs.
        let smaller = segment(C2S, 3, Timestamp(12), 7, 1, 50);
        assert!(l.on_data(&smaller).is_none());
        let sup = l.record_at(1).map(|r| r.rel_seq);
        assert_eq!(sup, Some(1));
        assert_eq!(l.unacked_len(), 2);
    }

    #[test]
    fn an_emptied_queue_gives_its_memory_back() {
        use crate::synth::{segment, C2S};
        let mut l = DirLedger::new(0);
        l.on_ack(1, FrameNo(0), Timestamp(0));
        for i in 0..100u64 {
            let seg = segment(C2S, i + 1, Timestamp(i as i64), 7, 1 + 100 * i as i64, 100);
            l.on_data(&seg);
        }
        assert!(l.unacked.capacity() >= 100);
        l.on_ack(5001, FrameNo(200), Timestamp(200));
        assert_eq!(l.unacked_len(), 50);
        assert!(l.unacked.capacity() >= 100);
        l.on_ack(10_001, FrameNo(201), Timestamp(201));
        assert_eq!(l.unacked.capacity(), 0);
        assert_eq!(l.acked_segments, 100);
    }

    #[test]
    fn ttl() {
        assert!(is_initial_ttl(64));
        assert!(!is_initial_ttl(62));
    }
}
