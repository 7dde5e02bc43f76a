//! Transmission history in 64-bit relative sequence space, for the values
//! Wireshark does not give exactly: time since the *first* transmission of
//! re-sent bytes, and ACK RTT samples under Karn's rule (RFC 6298 §3: no RTT
//! sample from a segment that was retransmitted).

use pcapsleuth_core::seq::SeqUnwrapper;
use pcapsleuth_core::{FrameNo, SeqNum};
use std::collections::VecDeque;

/// Most first-transmission records kept per direction (oldest dropped first).
const MAX_RECORDS: usize = 4096;

/// Fully acknowledged records kept per direction (the newest ones): enough
/// for the time since the first transmission of a spurious retransmission
/// of recently acknowledged bytes; older ones are dropped as ACKs arrive, so
/// a bulk stream keeps O(bytes in flight) records, not [`MAX_RECORDS`].
/// Karn RTT samples never need them (a later ACK is above them).
const ACKED_KEPT: usize = 8;

#[derive(Debug, Clone, Copy)]
struct TxRecord {
    /// First byte, relative (SYN and FIN count as one byte each).
    start: i64,
    /// One past the last byte.
    end: i64,
    /// When these bytes were first sent, ns.
    first_ts: i64,
    /// Frame of that first transmission.
    frame: FrameNo,
    /// Some of these bytes were sent more than once.
    retransmitted: bool,
}

/// What one direction has sent.
#[derive(Debug, Clone, Default)]
struct DirHistory {
    unwrap: Option<SeqUnwrapper>,
    /// First transmissions, sorted by `start`, not overlapping.
    records: VecDeque<TxRecord>,
    /// Highest `end` sent so far.
    high: i64,
    /// Highest cumulative ACK received from the peer, relative.
    snd_una: Option<i64>,
}

/// Both directions of one stream.
#[derive(Debug, Clone, Default)]
pub(crate) struct TxHistory {
    dirs: [DirHistory; 2],
}

/// A segment sent by `dir`: its sequence span.
pub(crate) struct Sent {
    pub dir: usize,
    pub seq: SeqNum,
    /// Sequence space used: payload + SYN + FIN, bytes.
    pub span: u32,
    pub ts: i64,
    pub frame: FrameNo,
}

impl TxHistory {
    /// Back to [`TxHistory::default`], keeping the records' allocations.
    pub(crate) fn reset(&mut self) {
        let old = std::mem::take(self);
        for (d, o) in self.dirs.iter_mut().zip(old.dirs) {
            d.records = pcapsleuth_core::grow::emptied(o.records);
        }
    }
    /// Heap bytes held (first-transmission records, by capacity).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.dirs
            .iter()
            .map(|d| d.records.capacity() * std::mem::size_of::<TxRecord>())
            .sum()
    }

    /// Record a transmission; returns the time since the first transmission
    /// of the earliest re-sent byte (ns) when some of its bytes were sent before.
    pub(crate) fn on_sent(&mut self, s: &Sent) -> Option<i64> {
        let h = &mut self.dirs[s.dir & 1];
        let unwrap = h.unwrap.get_or_insert_with(|| SeqUnwrapper::new(s.seq));
        let start = unwrap.unwrap(s.seq);
        if s.span == 0 {
            return None;
        }
        let end = start + i64::from(s.span);
        let mut since = None;
        if h.records.is_empty() {
            h.high = start;
        }
        if start < h.high {
            // Some bytes re-sent: mark every record they overlap.
            let resent_end = end.min(h.high);
            let mut i = h.records.partition_point(|r| r.end <= start);
            let mut first: Option<i64> = None;
            while let Some(r) = h.records.get_mut(i) {
                if r.start >= resent_end {
                    break;
                }
                r.retransmitted = true;
                first = Some(first.map_or(r.first_ts, |f: i64| f.min(r.first_ts)));
                i += 1;
            }
            since = first.map(|f| s.ts.saturating_sub(f));
        }
        if end > h.high {
            let new_start = start.max(h.high);
            pcapsleuth_core::grow::push_back(
                &mut h.records,
                TxRecord {
                    start: new_start,
                    end,
                    first_ts: s.ts,
                    frame: s.frame,
                    retransmitted: new_start != start,
                },
            );
            h.high = end;
            if h.records.len() > MAX_RECORDS {
                h.records.pop_front();
            }
        }
        since
    }

    /// An ACK sent by `dir` acknowledging `ack` in the peer's space. Returns
    /// `(rtt_ns, frame)` when it newly and exactly acknowledges the end of a
    /// segment that was sent only once (Karn's rule).
    pub(crate) fn on_ack(&mut self, dir: usize, ack: SeqNum, ts: i64) -> Option<(i64, FrameNo)> {
        let h = &mut self.dirs[(dir & 1) ^ 1];
        let a = h.unwrap.as_ref()?.peek(ack);
        if h.snd_una.is_some_and(|u| a <= u) {
            return None;
        }
        h.snd_una = Some(a);
        let i = h.records.partition_point(|r| r.end < a);
        let sample = h
            .records
            .get(i)
            .filter(|r| r.end == a && !r.retransmitted)
            .map(|r| (ts.saturating_sub(r.first_ts), r.frame));
        let acked = i + usize::from(h.records.get(i).is_some_and(|r| r.end == a));
        if acked > ACKED_KEPT {
            h.records.drain(..acked - ACKED_KEPT);
        }
        sample
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(dir: usize, seq: u32, span: u32, ts: i64, frame: u64) -> Sent {
        Sent {
            dir,
            seq: SeqNum(seq),
            span,
            ts,
            frame: FrameNo(frame),
        }
    }

    /// A bulk transfer acknowledged as it goes keeps a handful of records,
    /// still gives every Karn RTT sample, and still times a spurious
    /// retransmission of recently acknowledged bytes from their first
    /// transmission.
    #[test]
    fn acknowledged_records_are_dropped_but_the_newest_few() {
        let mut h = TxHistory::default();
        let isn = u32::MAX - 5_000; // the sequence space wraps mid-transfer
        let mut samples = 0;
        for k in 0..10_000u32 {
            let ts = i64::from(k) * 1_000;
            let seq = isn.wrapping_add(k * 1_000);
            assert_eq!(h.on_sent(&sent(0, seq, 1_000, ts, u64::from(k))), None);
            let ack = seq.wrapping_add(1_000);
            let rtt = h.on_ack(1, SeqNum(ack), ts + 300);
            assert_eq!(rtt, Some((300, FrameNo(u64::from(k)))));
            samples += 1;
            assert!(h.dirs[0].records.len() <= ACKED_KEPT, "segment {k}");
        }
        assert_eq!(samples, 10_000);
        assert!(h.heap_bytes() <= 2 * ACKED_KEPT * std::mem::size_of::<TxRecord>());
        // The last segment, re-sent after its ACK (the ACK was lost on the
        // way back): timed from its first transmission.
        let last = isn.wrapping_add(9_999 * 1_000);
        let since = h.on_sent(&sent(0, last, 1_000, 10_000_000_000, 20_000));
        assert_eq!(since, Some(10_000_000_000 - 9_999_000));
    }

    /// Unacknowledged records are never dropped for being old: a
    /// retransmission of the first of many bytes in flight is timed.
    #[test]
    fn unacknowledged_records_are_kept() {
        let mut h = TxHistory::default();
        for k in 0..100u32 {
            h.on_sent(&sent(0, 1 + k * 100, 100, i64::from(k), u64::from(k)));
        }
        // Only the first 20 acknowledged.
        assert_eq!(h.on_ack(1, SeqNum(2_001), 500), Some((481, FrameNo(19))));
        assert_eq!(h.dirs[0].records.len(), 80 + ACKED_KEPT);
        assert_eq!(
            h.on_sent(&sent(0, 2_001, 100, 1_000, 200)),
            Some(1_000 - 20)
        );
    }
}
