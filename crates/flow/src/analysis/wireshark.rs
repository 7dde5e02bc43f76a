//! A port of Wireshark 4.0's TCP sequence analysis
//! (`tcp_analyze_sequence_number` and the conversation-level steps of
//! `dissect_tcp` around it, `epan/dissectors/packet-tcp.c`, v4.0.17).
//!
//! The state is kept exactly as Wireshark keeps it — raw 32-bit sequence
//! numbers compared with its `GT_SEQ`/`LT_SEQ`/`LE_SEQ` serial macros, a raw
//! `nextseq`/`lastack`/`maxseqtobeacked` of 0 meaning "unset", the unscaled
//! window field, `u32` wrapping arithmetic, `guint64` time deltas — because
//! the point of this module is to print what tshark prints, quirks included.
//! Nothing here compares two raw `u32` sequence numbers with `<`: ordering goes
//! through [`SeqNum::diff`] (RFC 1982 serial arithmetic, as the C macros do).
//!
//! Preferences reproduced (tshark 4.0 defaults): `tcp.analyze_sequence_numbers`
//! on, `tcp.relative_sequence_numbers` on (display only; the analysis works on
//! raw numbers), `tcp.track_bytes_in_flight` on with the payload-based method
//! (`tcp.bif_seq_based` off), `tcp.fastrt_precedence` on (fast retransmission
//! is tested before out-of-order), `tcp.default_window_scaling` "not known"
//! (-1), no reassembly of out-of-order segments, no MPTCP.

use pcapsleuth_core::{FrameNo, SeqNum};
use std::collections::VecDeque;

/// `TCP_A_RETRANSMISSION`.
pub(crate) const A_RETRANSMISSION: u16 = 0x0001;
/// `TCP_A_LOST_PACKET`.
pub(crate) const A_LOST_PACKET: u16 = 0x0002;
/// `TCP_A_ACK_LOST_PACKET`.
pub(crate) const A_ACK_LOST_PACKET: u16 = 0x0004;
/// `TCP_A_KEEP_ALIVE`.
pub(crate) const A_KEEP_ALIVE: u16 = 0x0008;
/// `TCP_A_DUPLICATE_ACK`.
pub(crate) const A_DUPLICATE_ACK: u16 = 0x0010;
/// `TCP_A_ZERO_WINDOW`.
pub(crate) const A_ZERO_WINDOW: u16 = 0x0020;
/// `TCP_A_ZERO_WINDOW_PROBE`.
pub(crate) const A_ZERO_WINDOW_PROBE: u16 = 0x0040;
/// `TCP_A_ZERO_WINDOW_PROBE_ACK`.
pub(crate) const A_ZERO_WINDOW_PROBE_ACK: u16 = 0x0080;
/// `TCP_A_KEEP_ALIVE_ACK`.
pub(crate) const A_KEEP_ALIVE_ACK: u16 = 0x0100;
/// `TCP_A_OUT_OF_ORDER`.
pub(crate) const A_OUT_OF_ORDER: u16 = 0x0200;
/// `TCP_A_FAST_RETRANSMISSION`.
pub(crate) const A_FAST_RETRANSMISSION: u16 = 0x0400;
/// `TCP_A_WINDOW_UPDATE`.
pub(crate) const A_WINDOW_UPDATE: u16 = 0x0800;
/// `TCP_A_WINDOW_FULL`.
pub(crate) const A_WINDOW_FULL: u16 = 0x1000;
/// `TCP_A_REUSED_PORTS`.
pub(crate) const A_REUSED_PORTS: u16 = 0x2000;
/// `TCP_A_SPURIOUS_RETRANSMISSION`.
pub(crate) const A_SPURIOUS_RETRANSMISSION: u16 = 0x4000;

const TH_FIN: u16 = 0x001;
const TH_SYN: u16 = 0x002;
const TH_RST: u16 = 0x004;
const TH_ACK: u16 = 0x010;

/// `TCP_MAX_UNACKED_SEGMENTS` (packet-tcp.h): most unacked segments kept per direction.
const MAX_UNACKED_SEGMENTS: usize = 10_000;
/// SACK blocks kept for bytes-in-flight: `MAX_TCP_SACK_RANGES` is 4 but the
/// option parser stores a block only while its 1-based count is `< 4`.
const MAX_SACK_KEPT: usize = 3;

/// Largest span (first `seq` to last `nextseq`, bytes) of a list kept as
/// sorted: 2^29, so together with [`SORTED_ACK_REACH`] every serial
/// difference taken in the fast paths stays below 2^31 and orders linearly.
const SORTED_MAX_SPAN: u32 = 1 << 29;
/// How far (bytes) an ACK may lie outside a sorted list's span for the
/// front-only ACK walk; farther ACKs take the full walk.
const SORTED_ACK_REACH: i32 = 1 << 29;

/// `GT_SEQ(x, y)`: `(gint32)(y - x) < 0`.
fn gt_seq(x: u32, y: u32) -> bool {
    SeqNum(y).diff(SeqNum(x)) < 0
}
/// `LT_SEQ(x, y)`: `(gint32)(x - y) < 0`.
fn lt_seq(x: u32, y: u32) -> bool {
    SeqNum(x).diff(SeqNum(y)) < 0
}
/// `LE_SEQ(x, y)`: `(gint32)(x - y) <= 0` (true at distance 2^31, unlike RFC 1982).
fn le_seq(x: u32, y: u32) -> bool {
    SeqNum(x).diff(SeqNum(y)) <= 0
}

/// One segment as the analysis sees it (raw header values).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawSeg {
    pub frame: FrameNo,
    /// Capture time, ns.
    pub ts: i64,
    /// 0 or 1: index of the sending side.
    pub dir: usize,
    pub seq: u32,
    pub ack: u32,
    /// `th_flags & TH_MASK`.
    pub flags: u16,
    /// Raw (unscaled) window field.
    pub window: u16,
    /// `th_seglen`: payload bytes (IP length minus headers).
    pub seglen: u32,
    /// Window-scale option shift, as sent.
    pub wscale: Option<u8>,
    /// SACK blocks `(left, right)`, raw.
    pub sack: [(u32, u32); 4],
    /// Number of valid SACK blocks.
    pub sack_len: u8,
    /// This SYN opened a new conversation because it reused the ports of an
    /// older one with another ISN (sets `TCP_A_REUSED_PORTS`).
    pub new_stream_on_syn: bool,
    /// Our correction: classify an empty segment at SND.UNA−1 sent while the
    /// peer advertises a zero window as a zero-window probe (Linux
    /// `tcp_xmit_probe_skb`), not a keep-alive.
    pub linux_zwp: bool,
}

/// `struct tcp_acked`: what the analysis found for one frame.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Ta {
    /// `TCP_A_*` bits.
    pub flags: u16,
    /// `dupack_num`.
    pub dupack_num: u32,
    /// `dupack_frame`: the last non-duplicate ACK this one repeats.
    pub dupack_frame: FrameNo,
    /// `frame_acked`: the segment this ACK exactly acknowledges.
    pub frame_acked: FrameNo,
    /// `ts`: time since `frame_acked`, ns (`tcp.analysis.ack_rtt` when non-zero).
    pub ack_rtt_ns: i64,
    /// `bytes_in_flight` (printed when non-zero).
    pub bytes_in_flight: u32,
    /// `rto_ts`: for a retransmission, time since the eldest unacked segment, ns.
    pub rto_ns: i64,
    /// `rto_frame`.
    pub rto_frame: FrameNo,
}

#[derive(Debug, Clone, Copy)]
struct Unacked {
    frame: FrameNo,
    seq: u32,
    nextseq: u32,
    ts: i64,
}

/// `tcp_flow_t` plus its `tcp_analyze_seq_flow_info_t`.
#[derive(Debug, Clone)]
struct Flow {
    base_seq_set: bool,
    base_seq: u32,
    /// -1 unknown, -2 no scaling, else the shift.
    win_scale: i16,
    /// Last raw window; `G_MAXUINT32` until a segment is seen.
    window: u32,
    is_first_ack: bool,
    valid_bif: bool,
    lastsegmentflags: u16,
    /// Unacked segments, oldest first (Wireshark's list is newest first).
    segments: VecDeque<Unacked>,
    /// Every entry of `segments` starts at or after the previous one's end
    /// and the whole list spans less than [`SORTED_MAX_SPAN`] bytes, so the
    /// ACK walk and bytes in flight can work on its ends only (our speed-up;
    /// the verdicts are those of the full walk). Reset when the list empties.
    sorted: bool,
    lastack: u32,
    lastacktime: i64,
    lastnondupack: FrameNo,
    /// `guint32`; -1 is stored as `u32::MAX` as in C.
    dupacknum: u32,
    nextseq: u32,
    maxseqtobeacked: u32,
    nextseqframe: FrameNo,
    nextseqtime: i64,
    num_sack_ranges: usize,
    sack: [(u32, u32); MAX_SACK_KEPT],
}

impl Default for Flow {
    fn default() -> Self {
        Flow {
            base_seq_set: false,
            base_seq: 0,
            win_scale: -1,
            window: u32::MAX,
            is_first_ack: false,
            valid_bif: true,
            lastsegmentflags: 0,
            segments: VecDeque::new(),
            sorted: true,
            lastack: 0,
            lastacktime: 0,
            lastnondupack: FrameNo(0),
            dupacknum: 0,
            nextseq: 0,
            maxseqtobeacked: 0,
            nextseqframe: FrameNo(0),
            nextseqtime: 0,
            num_sack_ranges: 0,
            sack: [(0, 0); MAX_SACK_KEPT],
        }
    }
}

/// Per-conversation state (`struct tcp_analysis`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Machine {
    flows: [Flow; 2],
    /// Time of the most recent pure SYN, ns (0 = none, as `nstime_is_zero`).
    ts_mru_syn: i64,
    /// `ts_first_rtt`, ns (0 = none).
    ts_first_rtt: i64,
    /// Tests: never use the sorted-list fast paths (reference behaviour).
    #[cfg(test)]
    exact_walk: bool,
}

impl Machine {
    /// Take `old`'s unacked lists, emptied, in place of this fresh machine's
    /// (see `Stream::reuse_buffers`).
    pub(crate) fn reuse_buffers(&mut self, old: Machine) {
        for (f, o) in self.flows.iter_mut().zip(old.flows) {
            f.segments = pcapsleuth_core::grow::emptied(o.segments);
        }
    }
}

/// Whether `ack` lies within [`SORTED_ACK_REACH`] of a sorted list's span,
/// measured from its first `seq`.
fn ack_in_reach(list: &VecDeque<Unacked>, ack: u32) -> bool {
    let Some(front) = list.front() else {
        return false;
    };
    let x = ack.wrapping_sub(front.seq) as i32;
    x >= -SORTED_ACK_REACH && x <= SORTED_MAX_SPAN as i32 + SORTED_ACK_REACH
}

/// `guint64` delta of two capture times as packet-tcp.c computes it: negative
/// spans wrap to huge values and so never pass a `< threshold` test.
fn delta_u64(now: i64, then: i64) -> u64 {
    now.wrapping_sub(then) as u64
}

impl Machine {
    /// Heap bytes held (unacked-segment lists, by capacity).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.flows
            .iter()
            .map(|f| f.segments.capacity() * std::mem::size_of::<Unacked>())
            .sum()
    }

    /// Release spare capacity of the unacked-segment lists (contents kept, so
    /// late segments are still classified exactly as Wireshark does).
    pub(crate) fn shrink(&mut self) {
        for f in self.flows.iter_mut() {
            f.segments.shrink_to_fit();
        }
    }

    /// Whether our Linux zero-window-probe rule (`RawSeg::linux_zwp`) may
    /// classify `s` differently: it is empty and the peer's last window is
    /// zero (a superset of the rule's condition in
    /// `analyze_sequence_number`; nothing before that check in
    /// [`Machine::on_segment`] changes the peer's window).
    pub(crate) fn linux_zwp_possible(&self, s: &RawSeg) -> bool {
        s.seglen == 0 && self.flows[(s.dir & 1) ^ 1].window == 0
    }

    /// Whether a pure SYN from `dir` with sequence `seq` makes Wireshark open a
    /// new conversation (`dissect_tcp`: SYN without ACK whose seq differs from
    /// the base_seq already recorded for that side).
    pub(crate) fn syn_opens_new_conversation(&self, dir: usize, flags: u16, seq: u32) -> bool {
        let f = &self.flows[dir & 1];
        flags & (TH_SYN | TH_ACK) == TH_SYN && f.base_seq_set && seq != f.base_seq
    }

    /// Whether a raw window scale is known for `dir` (not -1).
    pub(crate) fn window_scale(&self, dir: usize) -> i16 {
        self.flows[dir & 1].win_scale
    }

    /// Analyse one segment: the steps of `dissect_tcp` around
    /// `tcp_analyze_sequence_number`, in the same order.
    pub(crate) fn on_segment(&mut self, s: &RawSeg) -> Ta {
        let d = s.dir & 1;
        let r = d ^ 1;
        let mut ta = Ta::default();
        if s.new_stream_on_syn {
            ta.flags |= A_REUSED_PORTS;
        }
        // SYN on a conversation whose base_seq is known.
        if s.flags & (TH_SYN | TH_ACK) == TH_SYN {
            let f = &mut self.flows[d];
            if f.base_seq_set && s.seq == f.base_seq {
                // issue 17616: restore nextseq (a RST may have moved it).
                f.nextseq = f.maxseqtobeacked;
            }
            // (seq != base_seq: the flow table opened a new stream; a fresh
            // analyzer never has base_seq set.)
        }
        if s.flags & (TH_SYN | TH_ACK) == (TH_SYN | TH_ACK) {
            let f = &mut self.flows[d];
            if f.base_seq_set && s.seq != f.base_seq {
                // issue 16944
                f.base_seq = s.seq;
                ta.flags |= A_REUSED_PORTS;
            }
        }
        self.flows[d].num_sack_ranges = 0;

        // Base sequence numbers.
        {
            let f = &mut self.flows[d];
            if !f.base_seq_set {
                f.base_seq = if s.flags & TH_SYN != 0 {
                    s.seq
                } else {
                    s.seq.wrapping_sub(1)
                };
                f.base_seq_set = true;
            }
            let rv = &mut self.flows[r];
            if !rv.base_seq_set && s.flags & TH_ACK != 0 {
                rv.base_seq = s.ack.wrapping_sub(1);
                rv.base_seq_set = true;
            }
        }

        self.analyze_sequence_number(s, &mut ta);

        // After the analysis, in dissect_tcp order.
        if s.flags & TH_SYN != 0 {
            if s.flags & TH_ACK == 0 {
                self.ts_mru_syn = s.ts;
            }
            self.flows[d].is_first_ack = true;
        }
        if s.flags & (TH_SYN | TH_ACK) == TH_ACK {
            if self.ts_mru_syn != 0 && self.ts_first_rtt == 0 {
                self.ts_first_rtt = s.ts.wrapping_sub(self.ts_mru_syn);
            }
            self.flows[d].is_first_ack = false;
        }
        // Options (dissected after the analysis).
        if let Some(ws) = s.wscale {
            self.flows[d].win_scale = i16::from(ws.min(14));
        }
        let nsack = usize::from(s.sack_len).min(MAX_SACK_KEPT);
        if nsack > 0 {
            let f = &mut self.flows[d];
            f.num_sack_ranges = nsack;
            f.sack[..nsack].copy_from_slice(&s.sack[..nsack]);
        }
        if s.flags & TH_SYN != 0 {
            self.verify_window_scaling(d, s.flags & TH_ACK != 0);
        }
        ta
    }

    /// `verify_tcp_window_scaling`.
    fn verify_window_scaling(&mut self, d: usize, is_synack: bool) {
        let r = d ^ 1;
        if self.flows[d].win_scale == -1 {
            self.flows[d].win_scale = -2;
            self.flows[r].win_scale = -2;
        } else if is_synack && self.flows[r].win_scale == -2 {
            self.flows[d].win_scale = -2;
        }
    }

    /// `tcp_analyze_sequence_number`, line by line.
    fn analyze_sequence_number(&mut self, s: &RawSeg, ta: &mut Ta) {
        let d = s.dir & 1;
        let r = d ^ 1;
        let (seq, ack, seglen, flags) = (s.seq, s.ack, s.seglen, s.flags);
        let window = u32::from(s.window);
        let [f0, f1] = &mut self.flows;
        let (fwd, rev) = if d == 0 { (f0, f1) } else { (f1, f0) };
        let _ = r;

        if flags & TH_ACK != 0 {
            rev.valid_bif = true;
        }

        'finished_fwd: {
            // ZERO WINDOW PROBE (Wireshark 4.0: one byte at nextseq into a zero window).
            if seglen == 1 && seq == fwd.nextseq && rev.window == 0 {
                ta.flags |= A_ZERO_WINDOW_PROBE;
                break 'finished_fwd;
            }
            // Ours: Linux probe, empty, seq = SND.UNA-1, peer window zero.
            if s.linux_zwp
                && seglen == 0
                && rev.window == 0
                && seq == rev.lastack.wrapping_sub(1)
                && flags & (TH_SYN | TH_FIN | TH_RST) == 0
            {
                ta.flags |= A_ZERO_WINDOW_PROBE;
                break 'finished_fwd;
            }
            // ZERO WINDOW
            if window == 0 && flags & (TH_RST | TH_FIN | TH_SYN) == 0 {
                ta.flags |= A_ZERO_WINDOW;
            }
            // LOST PACKET
            if fwd.nextseq != 0 && gt_seq(seq, fwd.nextseq) && flags & TH_RST == 0 {
                ta.flags |= A_LOST_PACKET;
                fwd.valid_bif = false;
            }
            // KEEP ALIVE
            if seglen <= 1
                && seq == fwd.nextseq.wrapping_sub(1)
                && flags & (TH_SYN | TH_FIN | TH_RST) == 0
            {
                ta.flags |= A_KEEP_ALIVE;
            }
            // WINDOW UPDATE
            if seglen == 0
                && window != 0
                && window != fwd.window
                && seq == fwd.nextseq
                && ack == fwd.lastack
                && flags & (TH_SYN | TH_FIN | TH_RST) == 0
            {
                ta.flags |= A_WINDOW_UPDATE;
            }
            // WINDOW FULL
            if seglen > 0 && rev.win_scale != -1 && flags & (TH_SYN | TH_FIN | TH_RST) == 0 {
                let shift = if rev.is_first_ack || rev.win_scale == -2 {
                    0
                } else {
                    rev.win_scale as u32
                };
                let edge = rev.lastack.wrapping_add(rev.window.wrapping_shl(shift));
                if seq.wrapping_add(seglen) == edge {
                    ta.flags |= A_WINDOW_FULL;
                }
            }
            let repeats = seglen == 0
                && seq == fwd.nextseq
                && ack == fwd.lastack
                && window == fwd.window
                && flags & (TH_SYN | TH_FIN | TH_RST) == 0;
            // KEEP ALIVE ACK
            if repeats && window != 0 && rev.lastsegmentflags & A_KEEP_ALIVE != 0 {
                ta.flags |= A_KEEP_ALIVE_ACK;
                break 'finished_fwd;
            }
            // ZERO WINDOW PROBE ACK
            if repeats && window == 0 && rev.lastsegmentflags & A_ZERO_WINDOW_PROBE != 0 {
                ta.flags |= A_ZERO_WINDOW_PROBE_ACK;
                break 'finished_fwd;
            }
            // DUPLICATE ACK
            if repeats && window != 0 {
                fwd.dupacknum = if fwd.dupacknum == u32::MAX {
                    1
                } else {
                    fwd.dupacknum.wrapping_add(1)
                };
                ta.flags |= A_DUPLICATE_ACK;
                ta.dupack_num = fwd.dupacknum;
                ta.dupack_frame = fwd.lastnondupack;
            }
        }
        // finished_fwd:
        if ack != fwd.lastack {
            fwd.lastnondupack = s.frame;
            fwd.dupacknum = 0;
        }

        // ACKED LOST PACKET
        if rev.maxseqtobeacked != 0 && gt_seq(ack, rev.maxseqtobeacked) && flags & TH_ACK != 0 {
            if lt_seq(rev.maxseqtobeacked, rev.nextseq) {
                rev.maxseqtobeacked = rev.nextseq;
                ta.flags |= A_ACK_LOST_PACKET;
            } else {
                if rev.dupacknum == 0 {
                    ta.flags |= A_ACK_LOST_PACKET;
                }
                rev.dupacknum = u32::MAX; // -1
            }
        }

        // RETRANSMISSION / FAST RETRANSMISSION / OUT-OF-ORDER
        'finished_checking: {
            if !(seglen > 0 || flags & (TH_SYN | TH_FIN) != 0) {
                break 'finished_checking;
            }
            let mut seq_not_advanced = fwd.nextseq != 0 && lt_seq(seq, fwd.nextseq);
            if ta.flags & A_KEEP_ALIVE != 0 {
                break 'finished_checking;
            }
            if seglen > 1 && fwd.nextseq.wrapping_sub(1) == seq {
                seq_not_advanced = false;
            }
            // Spurious: all of it already acked by the peer.
            if seglen > 0 && rev.lastack != 0 && le_seq(seq.wrapping_add(seglen), rev.lastack) {
                ta.flags |= A_SPURIOUS_RETRANSMISSION;
                break 'finished_checking;
            }
            // Fast retransmission (tcp_fastrt_precedence: tested first).
            let t = delta_u64(s.ts, rev.lastacktime);
            if seq_not_advanced && rev.dupacknum >= 2 && rev.lastack == seq && t < 20_000_000 {
                ta.flags |= A_FAST_RETRANSMISSION;
                break 'finished_checking;
            }
            // Out of order: within the first RTT (or 3 ms) of the highest segment.
            let t = delta_u64(s.ts, fwd.nextseqtime);
            let ooo_thres: u64 = if self.ts_first_rtt == 0 {
                3_000_000
            } else {
                self.ts_first_rtt as u64
            };
            let syn_fin = u32::from(flags & (TH_SYN | TH_FIN) != 0);
            if seq_not_advanced
                && t < ooo_thres
                && fwd.nextseq != seq.wrapping_add(seglen).wrapping_add(syn_fin)
            {
                ta.flags |= A_OUT_OF_ORDER;
                break 'finished_checking;
            }
            if seq_not_advanced {
                ta.flags |= A_RETRANSMISSION;
                ta.rto_ns = s.ts.saturating_sub(fwd.nextseqtime);
                ta.rto_frame = fwd.nextseqframe;
                if let Some(eldest) = fwd.segments.front() {
                    ta.rto_ns = s.ts.saturating_sub(eldest.ts);
                    ta.rto_frame = eldest.frame;
                }
            }
        }

        // finished_checking_retransmission_type:
        let mut nextseq = seq.wrapping_add(seglen);
        if (seglen != 0 || flags & (TH_SYN | TH_FIN) != 0)
            && fwd.segments.len() < MAX_UNACKED_SEGMENTS
        {
            if flags & (TH_SYN | TH_FIN) != 0 {
                nextseq = nextseq.wrapping_add(1);
            }
            if fwd.sorted {
                if let (Some(front), Some(back)) = (fwd.segments.front(), fwd.segments.back()) {
                    // Starts at or after the previous end, and the list stays short.
                    let after = seq.wrapping_sub(back.nextseq) as i32 >= 0;
                    let span = nextseq.wrapping_sub(front.seq);
                    fwd.sorted = after && span < SORTED_MAX_SPAN;
                }
            }
            pcapsleuth_core::grow::push_back(
                &mut fwd.segments,
                Unacked {
                    frame: s.frame,
                    seq,
                    nextseq,
                    ts: s.ts,
                },
            );
            #[cfg(test)]
            if self.exact_walk {
                fwd.sorted = false;
            }
        }
        let zwp = ta.flags & A_ZERO_WINDOW_PROBE != 0;
        if (gt_seq(nextseq, fwd.nextseq) || fwd.nextseq == 0) && !zwp {
            fwd.nextseq = nextseq;
            fwd.nextseqframe = s.frame;
            fwd.nextseqtime = s.ts;
        }
        if (seq == fwd.maxseqtobeacked || fwd.maxseqtobeacked == 0) && !zwp {
            fwd.maxseqtobeacked = fwd.nextseq;
        }
        fwd.window = window;
        fwd.lastack = ack;
        fwd.lastacktime = s.ts;
        fwd.lastsegmentflags = ta.flags;

        // Remove what this ACKs from the reverse list (runs for every segment,
        // ACK flag or not, as in 4.0). Wireshark walks newest to oldest and the
        // last exact match wins, i.e. the oldest.
        let mut acked: Option<(FrameNo, i64)> = None;
        if rev.sorted && !rev.segments.is_empty() && ack_in_reach(&rev.segments, ack) {
            // Sorted list, ACK within reach: every serial comparison below
            // orders linearly, so the full walk removes a prefix (entries
            // ending at or before `ack`), trims the entry `ack` falls inside,
            // and leaves the rest alone. `nextseq` strictly increases, so at
            // most one entry ends exactly at `ack`.
            while let Some(u) = rev.segments.front_mut() {
                let dn = ack.wrapping_sub(u.nextseq) as i32;
                if dn >= 0 {
                    if dn == 0 && acked.is_none() {
                        acked = Some((u.frame, u.ts));
                    }
                    rev.segments.pop_front();
                    continue;
                }
                if (ack.wrapping_sub(u.seq) as i32) > 0 {
                    u.seq = ack;
                }
                break;
            }
        } else {
            rev.segments.retain_mut(|u| {
                if ack == u.nextseq {
                    if acked.is_none() {
                        acked = Some((u.frame, u.ts));
                    }
                    return false;
                }
                if gt_seq(ack, u.seq) && le_seq(ack, u.nextseq) {
                    u.seq = ack;
                    return true;
                }
                gt_seq(u.nextseq, ack)
            });
            // An ACK out of reach may trim entries to odd spans.
            rev.sorted = false;
        }
        if rev.segments.is_empty() {
            rev.sorted = true;
            // Everything acknowledged: free the buffer (an idle open stream
            // then holds none; the next segment allocates 1 entry, `pcapsleuth_core::grow`).
            if rev.segments.capacity() > 0 {
                rev.segments = VecDeque::new();
            }
        }
        if let Some((frame, ts)) = acked {
            ta.frame_acked = frame;
            ta.ack_rtt_ns = s.ts.wrapping_sub(ts);
        }

        // Bytes in flight (payload-based method).
        if seglen != 0 && fwd.valid_bif {
            if let Some(newest) = fwd.segments.back() {
                let base = fwd.base_seq;
                let front = fwd.segments.front().unwrap_or(newest);
                let lo = front.seq.wrapping_sub(base);
                let span = newest.nextseq.wrapping_sub(front.seq);
                let (mut first, mut last) = (lo, newest.nextseq.wrapping_sub(base));
                // Sorted and not wrapping past base_seq: offsets increase
                // along the list, so its ends are the minimum and maximum.
                let ends_suffice = fwd.sorted && lo.checked_add(span).is_some();
                if !ends_suffice {
                    first = newest.seq.wrapping_sub(base);
                    last = newest.nextseq.wrapping_sub(base);
                    for u in &fwd.segments {
                        // Offsets from base_seq, compared unsigned as in C.
                        let n = u.nextseq.wrapping_sub(base);
                        let b = u.seq.wrapping_sub(base);
                        if n > last {
                            last = n;
                        }
                        if b < first {
                            first = b;
                        }
                    }
                }
                let mut in_flight = last.wrapping_sub(first);
                if rev.num_sack_ranges > 0 {
                    let delivered = rev.sack[..rev.num_sack_ranges]
                        .iter()
                        .fold(0u32, |acc, &(l, rr)| acc.wrapping_add(rr.wrapping_sub(l)));
                    in_flight = in_flight.wrapping_sub(delivered);
                }
                if in_flight > 0 && in_flight < 2_000_000_000 {
                    ta.bytes_in_flight = in_flight;
                    if flags & (TH_SYN | TH_FIN) != 0 {
                        ta.bytes_in_flight -= 1;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod fast_path_tests {
    use super::*;

    /// xorshift64: deterministic pseudo-random stream.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// Feed one pseudo-random conversation (in-order data, losses,
    /// retransmissions, partial and stale ACKs, wild ACKs, SACK, sequence
    /// wrap) to a machine with the sorted-list fast paths and to one without;
    /// every verdict must be identical.
    fn run(seed: u64, isn: u32) -> usize {
        let mut fast = Machine::default();
        let mut slow = Machine {
            exact_walk: true,
            ..Machine::default()
        };
        let mut rng = seed;
        let mut snd = isn;
        let mut acked = isn;
        let mut differing_bif = 0usize;
        for frame in 1..4000u64 {
            let r = next(&mut rng);
            let ts = frame as i64 * 1_000_000;
            let mut seg = RawSeg {
                frame: FrameNo(frame),
                ts,
                dir: 0,
                seq: snd,
                ack: 7,
                flags: TH_ACK,
                window: 100,
                seglen: 0,
                wscale: None,
                sack: [(0, 0); 4],
                sack_len: 0,
                new_stream_on_syn: false,
                linux_zwp: false,
            };
            match r % 10 {
                0..=4 => {
                    let len = 1 + (r >> 8) as u32 % 1460;
                    seg.seglen = len;
                    if r >> 40 & 7 == 0 {
                        // lost: skip ahead, nothing sent for this range
                        snd = snd.wrapping_add(len);
                        seg.seq = snd;
                    }
                    snd = snd.wrapping_add(len);
                }
                5 => {
                    // retransmission of something between acked and snd
                    let span = snd.wrapping_sub(acked).max(1);
                    seg.seq = acked.wrapping_add((r >> 8) as u32 % span);
                    seg.seglen = 1 + (r >> 32) as u32 % 1460;
                }
                6..=8 => {
                    seg.dir = 1;
                    seg.seq = 7;
                    let span = snd.wrapping_sub(acked).max(1);
                    acked = acked.wrapping_add((r >> 8) as u32 % span.saturating_add(1));
                    seg.ack = if r >> 50 & 15 == 0 { isn } else { acked };
                    if r >> 45 & 3 == 0 {
                        seg.sack = [(acked.wrapping_add(10), acked.wrapping_add(500)); 4];
                        seg.sack_len = 1;
                    }
                }
                _ => {
                    seg.dir = 1;
                    seg.seq = 7;
                    seg.ack = (r >> 16) as u32; // wild ACK
                }
            }
            let a = fast.on_segment(&seg);
            let b = slow.on_segment(&seg);
            assert_eq!(a, b, "seed {seed} isn {isn} frame {frame} seg {seg:?}");
            differing_bif += usize::from(a.bytes_in_flight != 0);
        }
        differing_bif
    }

    #[test]
    fn fast_paths_match_full_walk() {
        let mut with_bif = 0;
        for (i, isn) in [0u32, 1_000, u32::MAX - 50_000, 1 << 31].iter().enumerate() {
            for seed in 1..6u64 {
                with_bif += run(seed * 7919 + i as u64, *isn);
            }
        }
        // The comparison covered real bytes-in-flight values.
        assert!(with_bif > 1000, "{with_bif}");
    }
}
