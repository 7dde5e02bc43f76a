//! Per-endpoint TCP sender state in the Zeek observer model: one [`Side`] per
//! direction of a stream, in 64-bit relative sequence space.
//!
//! Relative offsets use Wireshark's base (`base_seq` in `dissect_tcp`,
//! `epan/dissectors/packet-tcp.c`): the ISN when the SYN was seen (SYN = 0,
//! first data byte = 1), else first sequence − 1 (the first segment seen has
//! relative sequence 1), else the peer's first ACK − 1. The 32-bit values are
//! unwrapped with [`SeqUnwrapper`] so they never wrap.

use pcapsleuth_core::opt::{OptI64, OptTimestamp, OptU64};
use pcapsleuth_core::seq::SeqUnwrapper;
use pcapsleuth_core::{FrameNo, SeqNum, Timestamp};
use std::collections::VecDeque;

/// Transmissions remembered per endpoint for ICMP quote matching (most recent first wins).
pub(crate) const RECENT_RING: usize = 32;

/// One captured transmission, or one unacknowledged range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TxSeg {
    /// Relative sequence of its first byte (the SYN counts as one byte).
    pub rel_seq: i64,
    /// Sequence space it occupies in bytes (payload + SYN + FIN).
    pub seq_len: u32,
    /// Payload bytes.
    pub payload_len: u32,
    /// IP datagram length, bytes.
    pub ip_len: u32,
    /// Frame of the first transmission.
    pub first_frame: FrameNo,
    /// Time of the first transmission.
    pub first_ts: Timestamp,
    /// Frame of the latest transmission.
    pub last_frame: FrameNo,
    /// Time of the latest transmission.
    pub last_ts: Timestamp,
    /// Times sent (1 = never retransmitted: usable for Karn's rule RTT).
    pub tx_count: u32,
}

/// One captured transmission as the recent ring keeps it (40 bytes; a
/// [`TxSeg`] is 56): what an ICMP quote is matched against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sent {
    /// Relative sequence of its first byte (the SYN counts as one byte).
    pub rel_seq: i64,
    /// Its frame.
    pub frame: FrameNo,
    /// Its capture time.
    pub ts: Timestamp,
    /// Sequence space it occupies in bytes (payload + SYN + FIN).
    pub seq_len: u32,
    /// Payload bytes.
    pub payload_len: u32,
    /// IP datagram length, bytes.
    pub ip_len: u32,
}

impl Sent {
    /// Whether relative sequence `q` falls inside it (a zero-length
    /// segment contains only its own sequence number).
    fn contains(&self, q: i64) -> bool {
        q >= self.rel_seq && q < self.rel_seq + i64::from(self.seq_len.max(1))
    }

    /// The latest transmission of `t`.
    fn latest_of(t: &TxSeg) -> Sent {
        Sent {
            rel_seq: t.rel_seq,
            frame: t.last_frame,
            ts: t.last_ts,
            seq_len: t.seq_len,
            payload_len: t.payload_len,
            ip_len: t.ip_len,
        }
    }
}

impl TxSeg {
    pub(crate) fn end(&self) -> i64 {
        self.rel_seq + i64::from(self.seq_len)
    }
    /// Whether relative sequence `q` falls inside this segment (a zero-length
    /// segment contains only its own sequence number).
    pub(crate) fn contains(&self, q: i64) -> bool {
        q >= self.rel_seq && q < self.rel_seq + i64::from(self.seq_len.max(1))
    }
}

/// Zeek endpoint states (`TCP_ENDPOINT_*` in Zeek's TCP analyzer), used for `conn_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ZeekState {
    /// Nothing sent.
    #[default]
    Inactive,
    /// SYN sent.
    SynSent,
    /// SYN/ACK sent.
    SynAckSent,
    /// Traffic without a SYN (capture started mid-stream).
    Partial,
    /// Handshake completed.
    Established,
    /// FIN sent.
    Closed,
    /// RST sent.
    Reset,
}

/// The state of one sending endpoint.
#[derive(Debug, Clone, Default)]
pub(crate) struct Side {
    /// Relative-sequence base (Wireshark `base_seq`).
    pub base: Option<SeqUnwrapper>,
    /// ISN, if this side's SYN was captured.
    pub isn: Option<SeqNum>,
    /// Any segment sent by this side was processed.
    pub seen: bool,
    /// SND.UNA: highest relative ACK received from the peer (bytes).
    pub snd_una: i64,
    /// SND.NXT: highest relative seq + length sent (SYN/FIN count 1).
    pub snd_nxt: i64,
    /// A SYN (or SYN/ACK) was sent.
    pub syn_sent: bool,
    /// The SYN was the latest thing pending (not yet acked).
    pub syn_acked: bool,
    /// A FIN was sent.
    pub fin_sent: bool,
    /// Relative sequence of the FIN, if sent.
    pub fin_rel: OptI64,
    /// An RST was sent.
    pub rst_sent: bool,
    /// Window scale shift offered in this side's SYN (`None` = SYN without option or not seen).
    pub wscale_offered: Option<u8>,
    /// MSS offered, bytes.
    pub mss: Option<u16>,
    /// SACK-permitted or SACK blocks seen from this side.
    pub sack_seen: bool,
    /// Timestamps option seen from this side.
    pub ts_seen: bool,
    /// Last advertised raw window (non-RST segments), if any.
    pub window_raw: Option<u16>,
    /// Last advertised window in bytes (scaled), if the scale is known.
    pub window_bytes: OptU64,
    /// Start of the current zero-window episode.
    pub zw_since: OptTimestamp,
    /// Unacknowledged ranges, oldest first (capped).
    pub unacked: VecDeque<TxSeg>,
    /// The unacked list hit its cap at least once.
    pub unacked_capped: bool,
    /// Ring of the most recent transmissions (newest last).
    pub recent: VecDeque<Sent>,
    /// Zeek endpoint state.
    pub zeek: ZeekState,
    /// Sent something other than SYN/RST (ACK, data or FIN): used for RSTOS0.
    pub sent_non_syn: bool,
    /// Time of the latest SYN sent by this side (for handshake RTT).
    pub last_syn_ts: OptTimestamp,
}

impl Side {
    /// Take `old`'s buffers, emptied, in place of this fresh side's.
    pub(crate) fn reuse_buffers(&mut self, old: Side) {
        self.unacked = pcapsleuth_core::grow::emptied(old.unacked);
        self.recent = pcapsleuth_core::grow::emptied(old.recent);
    }

    /// Heap bytes held (unacked list and transmission ring, by capacity).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.unacked.capacity() * std::mem::size_of::<TxSeg>()
            + self.recent.capacity() * std::mem::size_of::<Sent>()
    }

    /// Set the relative base (Wireshark `base_seq`) and reset SND.UNA/SND.NXT
    /// to `start` (0 when the base is the ISN of a captured SYN, else 1).
    pub(crate) fn set_base(&mut self, base: SeqNum, start: i64) {
        self.base = Some(SeqUnwrapper::new(base));
        self.snd_una = start;
        self.snd_nxt = start;
        self.unacked.clear();
        self.recent.clear();
    }

    /// Relative offset of `s` in this side's space, moving the unwrapper.
    pub(crate) fn rel(&mut self, s: SeqNum) -> Option<i64> {
        self.base.as_mut().map(|u| u.unwrap(s))
    }

    /// Relative offset of `s` without moving the unwrapper.
    pub(crate) fn peek(&self, s: SeqNum) -> Option<i64> {
        self.base.as_ref().map(|u| u.peek(s))
    }

    /// Pending sequence space (bytes incl. SYN/FIN) sent but not acknowledged.
    pub(crate) fn outstanding(&self) -> i64 {
        (self.snd_nxt - self.snd_una).max(0)
    }

    /// A SYN (or SYN/ACK) of this side awaits its ACK.
    pub(crate) fn syn_pending(&self) -> bool {
        self.syn_sent && !self.syn_acked && !self.rst_sent
    }

    /// Payload bytes outstanding (SYN and FIN not counted).
    pub(crate) fn pending_bytes(&self) -> u64 {
        let mut n = self.outstanding();
        if self.syn_pending() {
            n -= 1;
        }
        if let Some(f) = self.fin_rel.get() {
            if f >= self.snd_una {
                n -= 1;
            }
        }
        n.max(0) as u64
    }

    /// Record a transmission `[rel_seq, rel_seq + seq_len)`; returns true when
    /// it re-sent bytes already sent (below SND.NXT).
    pub(crate) fn on_transmit(&mut self, tx: TxSeg, cap: usize) -> bool {
        if tx.seq_len == 0 {
            return false;
        }
        let end = tx.end();
        let resent = tx.rel_seq < self.snd_nxt;
        if resent {
            for u in self.unacked.iter_mut() {
                if u.rel_seq < end && tx.rel_seq < u.end() {
                    u.last_frame = tx.last_frame;
                    u.last_ts = tx.last_ts;
                    u.tx_count = u.tx_count.saturating_add(1);
                }
            }
        }
        if end > self.snd_nxt {
            if self.unacked.len() >= cap {
                self.unacked_capped = true;
            } else {
                pcapsleuth_core::grow::push_back(&mut self.unacked, tx);
            }
            self.snd_nxt = end;
        }
        if self.recent.len() >= RECENT_RING {
            self.recent.pop_front();
        }
        pcapsleuth_core::grow::push_back(&mut self.recent, Sent::latest_of(&tx));
        resent
    }

    /// The peer acknowledged up to `rel_ack` (this side's space). Returns a
    /// Karn's-rule RTT sample (ns) from the newest fully acked segment sent once.
    pub(crate) fn on_acked(&mut self, rel_ack: i64, ts: Timestamp) -> Option<i64> {
        if rel_ack <= self.snd_una {
            return None;
        }
        self.snd_una = rel_ack;
        if self.snd_nxt < rel_ack {
            self.snd_nxt = rel_ack;
        }
        if self.syn_sent && rel_ack >= 1 {
            self.syn_acked = true;
        }
        let mut sample = None;
        while let Some(front) = self.unacked.front() {
            if front.end() > rel_ack {
                break;
            }
            if front.tx_count == 1 {
                sample = Some(ts.0.saturating_sub(front.last_ts.0));
            } else {
                sample = None;
            }
            self.unacked.pop_front();
        }
        // Everything acknowledged: free the buffer (an idle open stream then
        // holds none; the next transmission allocates 1 entry, `pcapsleuth_core::grow`).
        if self.unacked.is_empty() && self.unacked.capacity() > 0 {
            self.unacked = VecDeque::new();
        }
        sample.filter(|s| *s >= 0)
    }

    /// The most recent captured transmission containing relative sequence
    /// `q`: from the recent ring, else the latest transmission of an
    /// unacknowledged range.
    pub(crate) fn find_tx(&self, q: i64) -> Option<Sent> {
        if let Some(t) = self.recent.iter().rev().find(|t| t.contains(q)) {
            return Some(*t);
        }
        self.unacked
            .iter()
            .rev()
            .find(|t| t.contains(q))
            .map(Sent::latest_of)
    }

    /// Drop the per-segment buffers (stream closed or replaced).
    pub(crate) fn free_buffers(&mut self) {
        self.unacked = VecDeque::new();
        self.recent = VecDeque::new();
    }
}

/// Window scale shifts in effect for [client, server], per RFC 7323 §2.2:
/// scaling applies only when both SYN and SYN/ACK carried the option; a
/// handshake segment seen without it means no scaling (shift 0); otherwise unknown.
/// Shifts above 14 are treated as 14 (RFC 7323 §2.3).
pub(crate) fn window_shifts(
    syn: Option<Option<u8>>,
    synack: Option<Option<u8>>,
) -> [Option<u8>; 2] {
    match (syn, synack) {
        (Some(None), _) | (_, Some(None)) => [Some(0), Some(0)],
        (Some(Some(c)), Some(Some(s))) => [Some(c.min(14)), Some(s.min(14))],
        // SYN/ACK carries the option only if the SYN did (RFC 7323 §1.3):
        // the server's own shift is known, the client's is not.
        (None, Some(Some(s))) => [None, Some(s.min(14))],
        _ => [None, None],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tx(rel: i64, len: u32, frame: u64, ts: i64) -> TxSeg {
        TxSeg {
            rel_seq: rel,
            seq_len: len,
            payload_len: len,
            ip_len: len + 40,
            first_frame: FrameNo(frame),
            first_ts: Timestamp(ts),
            last_frame: FrameNo(frame),
            last_ts: Timestamp(ts),
            tx_count: 1,
        }
    }

    #[test]
    fn shifts_table() {
        assert_eq!(window_shifts(None, None), [None, None]);
        assert_eq!(window_shifts(Some(Some(7)), None), [None, None]);
        assert_eq!(
            window_shifts(Some(Some(7)), Some(Some(9))),
            [Some(7), Some(9)]
        );
        assert_eq!(window_shifts(Some(Some(7)), Some(None)), [Some(0), Some(0)]);
        assert_eq!(window_shifts(Some(None), Some(Some(9))), [Some(0), Some(0)]);
        assert_eq!(window_shifts(Some(None), None), [Some(0), Some(0)]);
        assert_eq!(window_shifts(None, Some(Some(20))), [None, Some(14)]);
    }

    #[test]
    fn unacked_and_karn() {
        let mut s = Side::default();
        s.set_base(SeqNum(1000), 1);
        assert!(!s.on_transmit(tx(1, 100, 1, 0), 2));
        assert!(!s.on_transmit(tx(101, 100, 2, 10), 2));
        assert!(!s.on_transmit(tx(201, 100, 3, 20), 2));
        assert!(s.unacked_capped);
        assert_eq!(s.snd_nxt, 301);
        assert_eq!(s.outstanding(), 300);
        // retransmission of the first segment: Karn excludes it
        assert!(s.on_transmit(tx(1, 100, 4, 30), 2));
        assert_eq!(s.on_acked(101, Timestamp(40)), None);
        assert_eq!(s.on_acked(201, Timestamp(50)), Some(40));
        assert_eq!(s.find_tx(150).map(|t| t.frame.get()), Some(2));
        assert_eq!(s.find_tx(50).map(|t| t.frame.get()), Some(4));
        assert_eq!(s.find_tx(400), None);
        assert_eq!(s.on_acked(150, Timestamp(60)), None, "old ack ignored");
        // Only the ring's newest 32 are kept: an older transmission is
        // found through its unacknowledged range, at its latest frame.
        let mut r = Side::default();
        for i in 0..40u32 {
            let rel = 1 + i64::from(i) * 100;
            r.on_transmit(tx(rel, 100, u64::from(i) + 1, i64::from(i)), 64);
        }
        assert_eq!(r.recent.len(), RECENT_RING);
        let t = r.find_tx(150).expect("unacknowledged");
        assert_eq!(
            (t.frame.get(), t.ts.0, t.rel_seq, t.ip_len),
            (2, 1, 101, 140)
        );
        let t = r.find_tx(3950).expect("in the ring");
        assert_eq!((t.frame.get(), t.rel_seq, t.seq_len), (40, 3901, 100));
        assert_eq!(std::mem::size_of::<Sent>(), 40);
    }
}
