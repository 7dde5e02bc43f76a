//! Per-segment TCP analysis: Wireshark 4.0's `tcp.analysis.*` classifier and
//! our corrected verdict.
//!
//! One [`StreamAnalyzer`] per `tcp.stream` is fed every TCP segment of that
//! stream in frame order ([`StreamAnalyzer::on_segment`]). It runs two copies
//! of a line-by-line port of Wireshark 4.0.17's `tcp_analyze_sequence_number`
//! (`epan/dissectors/packet-tcp.c`, with the conversation-level steps of
//! `dissect_tcp` around it: base sequence numbers, SYN/ACK port reuse,
//! window-scale bookkeeping, SACK blocks for bytes in flight, first RTT):
//!
//! - the **Wireshark** copy sees every segment and reproduces what `tshark`
//!   4.0 prints, quirks included (a raw `nextseq` of 0 counts as unset; the
//!   window scale is unknown (-1) until a SYN is seen, so "window full" is
//!   never reported for flows whose handshake was not captured; out-of-order
//!   means "not advancing and within the first handshake RTT, or 3 ms, of the
//!   highest segment"; keep-alive is any 0/1-byte segment at `nextseq − 1`);
//! - **our** copy differs in exactly two ways:
//!   1. a duplicate sighting (the flow table sets
//!      [`SegmentInput::duplicate_of`]: the same packet seen again on another
//!      interface or captured twice — Wireshark issue 19463) is not a
//!      retransmission, duplicate ACK or anything else: it gets the flags of
//!      the original sighting and does not advance any state;
//!   2. an empty segment with `seq = SND.UNA − 1` sent while the peer
//!      advertises a zero window is a zero-window probe (Linux
//!      `tcp_send_probe0` → `tcp_write_wakeup` → `tcp_xmit_probe_skb`), not a
//!      keep-alive, so its answer is a zero-window-probe ACK.
//!
//! Besides the flags it measures, for our verdict: the time since the first
//! transmission of re-sent bytes, ACK RTT samples under Karn's rule, and
//! Wireshark's bytes-in-flight.

mod history;
mod wireshark;

#[cfg(test)]
mod tests;

use crate::SegmentAnalysis;
use history::{Sent, TxHistory};
use pcapsleuth_core::{Direction, FrameNo, Timestamp};
use std::collections::VecDeque;
use wireshark::{Machine, RawSeg, Ta};

/// How many recent verdicts a stream keeps so a duplicate sighting can copy
/// its original's flags (the flow table's duplicate window is milliseconds).
const RECENT_VERDICTS: usize = 256;

/// Recent verdicts kept by a [`StreamAnalyzer::compact`]ed (finished) stream;
/// equals the number of sightings the flow table keeps after a close.
pub const CLOSED_RECENT_VERDICTS: usize = 4;

/// One TCP segment handed to a [`StreamAnalyzer`], in frame order.
#[derive(Debug, Clone, Copy)]
pub struct SegmentInput<'a> {
    /// Wireshark frame number.
    pub frame: FrameNo,
    /// Capture timestamp, ns since the Unix epoch.
    pub ts: Timestamp,
    /// Direction of travel; must be consistent for the whole stream (which
    /// side is "client" does not matter to the analysis).
    pub dir: Direction,
    /// The decoded segment. `payload_len` must be Wireshark's `tcp.len`
    /// (IP payload length minus the TCP header length).
    pub seg: &'a pcapsleuth_decode::TcpSegment<'a>,
    /// Set by the flow table when this packet is another sighting of an
    /// earlier frame (same packet on another interface, or captured twice).
    pub duplicate_of: Option<FrameNo>,
    /// Set by the flow table when this pure SYN opened a new `tcp.stream`
    /// because it reused the ports of an older stream with another ISN
    /// (Wireshark `dissect_tcp`, `TCP_A_REUSED_PORTS`). See
    /// [`StreamAnalyzer::syn_opens_new_stream`] for Wireshark's rule.
    pub new_stream_on_syn: bool,
}

/// The classifier's answer for one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SegmentVerdict {
    /// What tshark 4.0 prints (`tcp.analysis.*`).
    pub wireshark: SegmentAnalysis,
    /// Our corrected verdict (duplicate sightings, Linux zero-window probes).
    pub analysis: SegmentAnalysis,
    /// For a retransmission in our verdict: time since the first transmission
    /// of the earliest re-sent byte, ns (`None` when those bytes were not seen
    /// before or were forgotten — at most 4096 first transmissions are kept
    /// per direction, of which the 8 newest fully acknowledged ones).
    pub since_first_tx_ns: Option<i64>,
    /// ACK RTT, ns: this ACK newly and exactly acknowledges the end of a
    /// segment sent only once (Karn's rule, RFC 6298 §3); measured from that
    /// segment's capture time.
    pub ack_rtt_ns: Option<i64>,
    /// Bytes in flight after this segment, as Wireshark's
    /// `tcp.analysis.bytes_in_flight` (payload-based method), computed on our
    /// state (equal to Wireshark's unless duplicate sightings precede it).
    pub bytes_in_flight: Option<u64>,
    /// For a duplicate ACK (our verdict): the last non-duplicate ACK frame it
    /// repeats (`tcp.analysis.duplicate_ack_frame`).
    pub dup_ack_frame: Option<FrameNo>,
    /// Wireshark's `tcp.analysis.duplicate_ack_frame`.
    pub wireshark_dup_ack_frame: Option<FrameNo>,
    /// Wireshark's `tcp.analysis.ack_rtt`, ns (no Karn's rule: the oldest
    /// transmission whose end equals the ACK).
    pub wireshark_ack_rtt_ns: Option<i64>,
    /// Wireshark's `tcp.analysis.bytes_in_flight`.
    pub wireshark_bytes_in_flight: Option<u64>,
}

/// Per-`tcp.stream` analysis state. One per stream, fed every segment of it
/// in frame order. Memory: at most 10 000 unacked segments per direction per
/// copy (Wireshark's `TCP_MAX_UNACKED_SEGMENTS`) plus 4096 transmission
/// records and 256 recent verdicts.
#[derive(Debug, Clone, Default)]
pub struct StreamAnalyzer {
    ws: Machine,
    /// Our copy, once it differs from `ws`; `None` while it would be equal
    /// (fed the same segments, it holds the same state and gives the same
    /// answers). Forked from `ws` just before the first segment our copy
    /// treats differently ([`StreamAnalyzer::ours_may_differ`]), so most
    /// streams keep one machine (about 270 bytes inline and its unacked
    /// lists less, and half the classification work).
    ours: Option<Box<Machine>>,
    /// First transmissions (our since-first-transmission and Karn RTT),
    /// allocated at the first segment; dropped for good once the stream is
    /// finished ([`StreamAnalyzer::compact`]).
    history: Option<Box<TxHistory>>,
    /// [`StreamAnalyzer::compact`] ran: no history any more.
    compacted: bool,
    recent: VecDeque<RecentVerdict>,
    /// The caller puts a first sighting's verdict on its later sightings
    /// itself ([`StreamAnalyzer::without_recent_verdicts`]): `recent` stays
    /// empty.
    no_recent: bool,
    /// The next segment is the SYN that opened this stream by reusing ports.
    pending_reused_ports: bool,
}

/// Our verdict on one recent segment, copied to its later sightings
/// (24 bytes).
#[derive(Debug, Clone, Copy)]
struct RecentVerdict {
    frame: FrameNo,
    analysis: crate::packed::PackedAnalysis,
    /// [`SegmentVerdict::bytes_in_flight`], 0 = `None` (lossless: it comes
    /// from Wireshark's `guint32`, `None` when 0; see `nonzero`).
    bytes_in_flight: u32,
}

fn dir_index(d: Direction) -> usize {
    d.index()
}

fn raw_seg(input: &SegmentInput<'_>, new_stream_on_syn: bool, linux_zwp: bool) -> RawSeg {
    let s = input.seg;
    let mut sack = [(0u32, 0u32); 4];
    let blocks = s.options.sack.as_slice();
    for (dst, (l, r)) in sack.iter_mut().zip(blocks.iter()) {
        *dst = (l.0, r.0);
    }
    RawSeg {
        frame: input.frame,
        ts: input.ts.as_ns(),
        dir: dir_index(input.dir),
        seq: s.seq.0,
        ack: s.ack.0,
        flags: s.flags.0 & 0x0fff,
        window: s.window,
        seglen: s.payload_len,
        wscale: s.options.window_scale,
        sack,
        sack_len: blocks.len().min(4) as u8,
        new_stream_on_syn,
        linux_zwp,
    }
}

/// Convert Wireshark's `tcp_acked` flags to the public boolean form.
/// Fast and spurious retransmissions also carry `retransmission`, as tshark's
/// expert items do.
fn to_analysis(ta: &Ta) -> SegmentAnalysis {
    use wireshark::*;
    let f = ta.flags;
    let has = |b: u16| f & b != 0;
    SegmentAnalysis {
        retransmission: has(A_RETRANSMISSION | A_FAST_RETRANSMISSION | A_SPURIOUS_RETRANSMISSION),
        fast_retransmission: has(A_FAST_RETRANSMISSION),
        spurious_retransmission: has(A_SPURIOUS_RETRANSMISSION),
        out_of_order: has(A_OUT_OF_ORDER),
        lost_segment: has(A_LOST_PACKET),
        ack_lost_segment: has(A_ACK_LOST_PACKET),
        duplicate_ack: has(A_DUPLICATE_ACK),
        duplicate_ack_num: if has(A_DUPLICATE_ACK) {
            ta.dupack_num
        } else {
            0
        },
        zero_window: has(A_ZERO_WINDOW),
        zero_window_probe: has(A_ZERO_WINDOW_PROBE),
        zero_window_probe_ack: has(A_ZERO_WINDOW_PROBE_ACK),
        keep_alive: has(A_KEEP_ALIVE),
        keep_alive_ack: has(A_KEEP_ALIVE_ACK),
        window_full: has(A_WINDOW_FULL),
        window_update: has(A_WINDOW_UPDATE),
        reused_ports: has(A_REUSED_PORTS),
    }
}

fn nonzero(v: u32) -> Option<u64> {
    (v != 0).then_some(u64::from(v))
}

impl StreamAnalyzer {
    /// A fresh analyzer for a new stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fresh analyzer for a caller that keeps each first sighting's verdict
    /// itself and copies it to later sightings (the flow table keeps it with
    /// the sighting's fingerprint, `sightings.rs`): it keeps no ring of
    /// recent verdicts (up to [`RECENT_VERDICTS`] × 24 bytes and a push per
    /// segment), and a segment with [`SegmentInput::duplicate_of`] set gets
    /// the default `analysis` and no `bytes_in_flight` for the caller to fill.
    pub(crate) fn without_recent_verdicts() -> Self {
        StreamAnalyzer {
            no_recent: true,
            ..Self::default()
        }
    }

    /// Take the buffers of `old` (a stream record being replaced), emptied,
    /// in place of this fresh analyzer's: the same state, no allocation for
    /// the next stream's first segments. The transmission history box is
    /// set up front (a fresh analyzer makes it at its first segment).
    pub(crate) fn reuse_buffers(&mut self, old: StreamAnalyzer) {
        self.ws.reuse_buffers(old.ws);
        self.recent = pcapsleuth_core::grow::emptied(old.recent);
        if let (None, false, Some(mut h)) = (&self.history, self.compacted, old.history) {
            h.reset();
            self.history = Some(h);
        }
    }

    /// A fresh analyzer for a stream opened by a SYN that reused the ports of
    /// an older stream with another ISN ([`Self::syn_opens_new_stream`]): its
    /// first segment gets Wireshark's `tcp.analysis.reused_ports`
    /// (`TCP_A_REUSED_PORTS`, set in `dissect_tcp`).
    pub fn new_after_port_reuse() -> Self {
        StreamAnalyzer {
            pending_reused_ports: true,
            ..Self::default()
        }
    }

    /// Wireshark's rule for opening a new conversation (`tcp.stream`) on a
    /// SYN (`dissect_tcp`, 4.0): a SYN without ACK from `dir` whose sequence
    /// number differs from the base sequence number already recorded for that
    /// side. The flow table should then start a new stream and feed the SYN
    /// to a fresh analyzer with [`SegmentInput::new_stream_on_syn`] set
    /// (or create it with [`Self::new_after_port_reuse`]).
    pub fn syn_opens_new_stream(
        &self,
        dir: Direction,
        seg: &pcapsleuth_decode::TcpSegment<'_>,
    ) -> bool {
        self.ws
            .syn_opens_new_conversation(dir_index(dir), seg.flags.0, seg.seq.0)
    }

    /// The window scale shift Wireshark applies to segments sent by `dir`:
    /// `None` while unknown (no SYN seen), `Some(0)` when the handshake showed
    /// that scaling is not used, else the shift from the option (capped at 14).
    pub fn window_scale(&self, dir: Direction) -> Option<u8> {
        match self.ws.window_scale(dir_index(dir)) {
            -1 => None,
            s if s < 0 => Some(0),
            s => Some(s.min(14) as u8),
        }
    }

    /// Heap bytes held by this analyzer (by capacity): both Wireshark
    /// machines' unacked lists, the transmission history and recent verdicts.
    pub fn heap_bytes(&self) -> usize {
        self.ws.heap_bytes()
            + self
                .ours
                .as_ref()
                .map_or(0, |m| std::mem::size_of::<Machine>() + m.heap_bytes())
            + self
                .history
                .as_ref()
                .map_or(0, |h| std::mem::size_of::<TxHistory>() + h.heap_bytes())
            + self.recent.capacity() * std::mem::size_of::<RecentVerdict>()
    }

    /// Shrink to what late segments of a finished stream need (called by the
    /// flow table once the stream is closed: RST, both FINs acknowledged, or
    /// replaced by a new stream on reused ports).
    ///
    /// Kept: both Wireshark machines in full (a stray late segment gets the
    /// same `tcp.analysis.*` flags tshark prints; their unacked lists are
    /// normally empty after a close and are only shrunk to fit) and the newest
    /// [`CLOSED_RECENT_VERDICTS`] verdicts (the flow table's duplicate ring
    /// keeps as many sightings after a close). Dropped: the transmission
    /// history, so segments after this point get no `since_first_tx_ns` and
    /// no Karn RTT sample (`ack_rtt_ns`); Wireshark's own `ack_rtt` is kept.
    /// Idempotent and cheap when already compact.
    pub fn compact(&mut self) {
        self.history = None;
        self.compacted = true;
        if self.recent.len() > CLOSED_RECENT_VERDICTS {
            self.recent
                .drain(..self.recent.len() - CLOSED_RECENT_VERDICTS);
        }
        if self.recent.capacity() > self.recent.len().max(CLOSED_RECENT_VERDICTS) {
            self.recent.shrink_to_fit();
        }
        self.ws.shrink();
        if let Some(m) = self.ours.as_mut() {
            m.shrink();
        }
    }

    /// Whether our copy of the Wireshark machine would treat this segment
    /// differently from Wireshark's (checked on `ws`, equal to ours while
    /// `ours` is `None`): a duplicate sighting (our copy skips it), or an
    /// empty segment while the peer advertises a zero window (our Linux
    /// zero-window-probe rule may apply; `Machine::linux_zwp_possible`).
    fn ours_may_differ(&self, input: &SegmentInput<'_>, seg: &RawSeg) -> bool {
        input.duplicate_of.is_some() || self.ws.linux_zwp_possible(seg)
    }

    /// Classify one segment (in frame order) and update the stream state.
    ///
    /// A pure SYN whose TCP header does not parse (options flagged malformed,
    /// no payload, nothing captured after the header — typically a header
    /// longer than the IP payload) gets no flags and changes no state:
    /// Wireshark skips the analysis when the reported length is below the
    /// header length (`dissect_tcp`, "Short segment") and its option dissector
    /// throws before anything is printed. Heuristic: the segment does not say
    /// how long the IP payload was, so other malformed-option segments (whose
    /// headers usually fit) are analysed normally.
    pub fn on_segment(&mut self, input: &SegmentInput<'_>) -> SegmentVerdict {
        let s = input.seg;
        if s.options.malformed
            && s.payload_len == 0
            && s.payload.is_empty()
            && s.flags.syn()
            && !s.flags.ack()
        {
            self.pending_reused_ports = false;
            return SegmentVerdict::default();
        }
        let reused = std::mem::take(&mut self.pending_reused_ports) || input.new_stream_on_syn;
        let ws_seg = raw_seg(input, reused, false);
        if self.ours.is_none() && self.ours_may_differ(input, &ws_seg) {
            self.ours = Some(Box::new(self.ws.clone()));
        }
        let ws_ta = self.ws.on_segment(&ws_seg);
        let wireshark = to_analysis(&ws_ta);
        let mut v = SegmentVerdict {
            wireshark,
            wireshark_dup_ack_frame: (ws_ta.flags & wireshark::A_DUPLICATE_ACK != 0)
                .then_some(ws_ta.dupack_frame),
            wireshark_ack_rtt_ns: (ws_ta.frame_acked != FrameNo(0) && ws_ta.ack_rtt_ns != 0)
                .then_some(ws_ta.ack_rtt_ns),
            wireshark_bytes_in_flight: nonzero(ws_ta.bytes_in_flight),
            ..SegmentVerdict::default()
        };

        if let Some(orig) = input.duplicate_of {
            // One packet seen twice: same classification, no state change.
            if let Some(r) = self.recent.iter().rev().find(|r| r.frame == orig) {
                v.analysis = r.analysis.unpack();
                v.bytes_in_flight = nonzero(r.bytes_in_flight);
            }
            return v;
        }

        let ours_ta = match self.ours.as_mut() {
            Some(m) => m.on_segment(&raw_seg(input, reused, true)),
            // Same state, same segment: same answer.
            None => ws_ta,
        };
        v.analysis = to_analysis(&ours_ta);
        let bytes_in_flight = ours_ta.bytes_in_flight;
        v.bytes_in_flight = nonzero(bytes_in_flight);
        v.dup_ack_frame = v.analysis.duplicate_ack.then_some(ours_ta.dupack_frame);

        let d = dir_index(input.dir);
        let ts = input.ts.as_ns();
        let span = s
            .payload_len
            .saturating_add(u32::from(s.flags.syn()))
            .saturating_add(u32::from(s.flags.fin()));
        if !self.compacted && self.history.is_none() {
            self.history = Some(Box::default());
        }
        if let Some(history) = self.history.as_mut() {
            let since = history.on_sent(&Sent {
                dir: d,
                seq: s.seq,
                span,
                ts,
                frame: input.frame,
            });
            if v.analysis.retransmission {
                v.since_first_tx_ns = since;
            }
            if s.flags.ack() {
                v.ack_rtt_ns = history.on_ack(d, s.ack, ts).map(|(rtt, _)| rtt);
            }
        }

        if self.no_recent {
            return v;
        }
        if self.recent.len() >= RECENT_VERDICTS {
            self.recent.pop_front();
        }
        pcapsleuth_core::grow::push_back(
            &mut self.recent,
            RecentVerdict {
                frame: input.frame,
                analysis: crate::packed::PackedAnalysis::pack(&v.analysis),
                bytes_in_flight,
            },
        );
        v
    }
}
