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
use std::collections::BTreeMap;

/// Most unacknowledged records kept per direction; beyond it new segments are
/// not recorded (the oldest, the ones that get stuck, are kept).
pub const MAX_RECORDS: usize = 1024;

/// Most records kept while the peer has never acknowledged anything (a
/// one-sided capture would otherwise fill the ledger of every flow).
pub const MAX_RECORDS_UNACKED_PEER: usize = 64;

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

/// A data segment and its transmissions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentRecord {
    /// Relative sequence number of its first byte (bytes).
    pub rel_seq: i64,
    /// TCP payload length (bytes).
    pub payload_len: u32,
    /// IP datagram length (bytes) of its last transmission.
    pub ip_len: u32,
    /// Transmissions in capture order (the first may be a retransmission when
    /// the original was not captured); at most [`MAX_TX`].
    pub txs: Vec<Tx>,
    /// Number of transmissions seen (may exceed `txs.len()`).
    pub tx_count: u32,
    /// A later transmission covered these bytes with another geometry.
    pub superseded: bool,
    /// The first such transmission, if any.
    pub superseded_by: Option<Tx>,
}

impl SegmentRecord {
    /// Retransmissions seen (transmissions − 1).
    pub fn retransmissions(&self) -> u32 {
        self.tx_count.saturating_sub(1)
    }
    /// Relative sequence number just past its last byte.
    pub fn end(&self) -> i64 {
        self.rel_seq + i64::from(self.payload_len)
    }
    /// Gaps between successive remembered transmissions, ns (clamped at 0 for
    /// frames out of timestamp order).
    pub fn gaps_ns(&self) -> Vec<i64> {
        self.txs
            .windows(2)
            .map(|w| w[1].ts.0.saturating_sub(w[0].ts.0).max(0))
            .collect()
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
#[derive(Debug, Clone, Default)]
pub struct DirLedger {
    unacked: BTreeMap<(i64, u32), SegmentRecord>,
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
        if self.unacked.contains_key(&key) {
            let rec = self.unacked.get_mut(&key)?;
            rec.tx_count = rec.tx_count.saturating_add(1);
            rec.ip_len = seg.ip_len;
            if rec.txs.len() < MAX_TX {
                rec.txs.push(tx);
            }
            return Some(rec);
        }
        // Mark overlapping records of another geometry as superseded. Records
        // rarely overlap, so walk back from the new end and stop at the first
        // record that ends at or before the new start.
        for (_, rec) in self.unacked.range_mut(..(e, 0)).rev() {
            if rec.end() <= s {
                break;
            }
            if !rec.superseded {
                rec.superseded = true;
                rec.superseded_by = Some(tx);
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
        self.unacked.insert(
            key,
            SegmentRecord {
                rel_seq: s,
                payload_len: seg.payload_len,
                ip_len: seg.ip_len,
                txs: vec![tx],
                tx_count: 1,
                superseded: false,
                superseded_by: None,
            },
        );
        None
    }

    /// Record a cumulative ACK from the peer (relative, in this direction's
    /// sequence space). Fully covered records leave the ledger.
    pub fn on_ack(&mut self, rel_ack: i64, frame: FrameNo, ts: Timestamp) {
        if self.highest_ack.is_some_and(|a| rel_ack <= a) {
            return;
        }
        self.highest_ack = Some(rel_ack);
        let done: Vec<(i64, u32)> = self
            .unacked
            .range(..(rel_ack, 0))
            .filter(|(_, r)| r.end() <= rel_ack)
            .map(|(k, _)| *k)
            .collect();
        for k in done {
            if let Some(rec) = self.unacked.remove(&k) {
                if !rec.superseded {
                    self.acked_segments += 1;
                    self.largest_acked_payload = self.largest_acked_payload.max(rec.payload_len);
                    self.largest_acked_ip = self.largest_acked_ip.max(rec.ip_len);
                }
                if rec.retransmissions() >= self.retire_threshold {
                    self.retired.push(Retired {
                        record: rec,
                        outcome: Outcome::Acked { frame, ts },
                    });
                }
            }
        }
    }

    /// The unacknowledged record starting exactly at `rel_seq` with the largest length, if any.
    pub fn record_at(&self, rel_seq: i64) -> Option<&SegmentRecord> {
        self.unacked
            .range((rel_seq, 0)..=(rel_seq, u32::MAX))
            .next_back()
            .map(|(_, r)| r)
    }

    /// End of capture: retire every remaining record at the threshold.
    pub fn finish(&mut self) {
        let left = std::mem::take(&mut self.unacked);
        for (_, rec) in left {
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

    #[test]
    fn ttl() {
        assert!(is_initial_ttl(64));
        assert!(!is_initial_ttl(62));
    }
}
