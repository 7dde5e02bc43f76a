//! Stalls: a direction with unacknowledged data (or a pending SYN, or a
//! zero peer window) while the whole stream stays silent for at least
//! [`FlowConfig::stall_threshold_ns`]. Emitted as [`FlowEvent::Stall`] when
//! the next segment of the stream ends the silence, or at capture end.

use super::stream::Stream;
use super::{FlowConfig, PacketMeta};
use crate::{FlowEvent, StallEnd, StallEvent};
use pcapsleuth_core::{Direction, FrameNo, Timestamp};
use pcapsleuth_decode::TcpSegment;

/// What a direction has pending: (payload bytes, SYN pending), if anything:
/// unacknowledged data, a SYN awaiting its ACK, or a peer window of zero.
/// Data counts only once the peer has been heard from (a one-way capture
/// shows no ACKs at all, which is not a stall).
pub(super) fn pending(st: &Stream, dir: Direction) -> Option<(u64, bool)> {
    let side = &st.sides[dir.index()];
    let peer = &st.sides[dir.reverse().index()];
    if side.rst_sent || peer.rst_sent {
        return None;
    }
    let syn = side.syn_pending();
    // Blocked by a zero window counts as pending too (the sender may have
    // nothing unacknowledged while the receiver's buffer is full).
    let blocked = peer.window_raw == Some(0);
    if syn || (peer.seen && (side.outstanding() > 0 || blocked)) {
        Some((side.pending_bytes(), syn))
    } else {
        None
    }
}

/// The end of a silence: the frame and time that ended it and what it was.
#[derive(Debug, Clone, Copy)]
struct StallStop {
    frame: FrameNo,
    ts: Timestamp,
    ended_by: StallEnd,
}

fn emit_stall(
    st: &mut Stream,
    dir: Direction,
    (pending_bytes, pending_syn): (u64, bool),
    stop: StallStop,
    out: &mut Vec<FlowEvent>,
) {
    let Some(start_ts) = st.last_ts else { return };
    let dur = stop.ts.0.saturating_sub(start_ts.0);
    if dur > st.acc.longest_stall_ns {
        st.acc.longest_stall_ns = dur;
        st.acc.longest_stall_frames = Some([st.last_frame, stop.frame]);
    }
    out.push(FlowEvent::Stall(StallEvent {
        stream: st.id,
        dir,
        start_frame: st.last_frame,
        start_ts,
        end_frame: stop.frame,
        end_ts: stop.ts,
        pending_bytes,
        pending_syn,
        ended_by: stop.ended_by,
    }));
}

/// End of capture at `end_frame`/`end_ts`: emit the stalls still open on `st`
/// (ended by [`StallEnd::CaptureEnd`]).
pub(super) fn finish_stream(
    st: &mut Stream,
    cfg: &FlowConfig,
    end_frame: FrameNo,
    end_ts: Timestamp,
    out: &mut Vec<FlowEvent>,
) {
    if st.closed {
        return;
    }
    let Some(last) = st.last_ts else { return };
    if end_ts.0.saturating_sub(last.0) < cfg.stall_threshold_ns {
        return;
    }
    for dir in [Direction::ClientToServer, Direction::ServerToClient] {
        if let Some(p) = pending(st, dir) {
            let stop = StallStop {
                frame: end_frame,
                ts: end_ts,
                ended_by: StallEnd::CaptureEnd,
            };
            emit_stall(st, dir, p, stop, out);
        }
    }
}

/// Emit the stalls that the segment `seg` (sent in `sdir`) ends.
pub(super) fn check_stall(
    st: &mut Stream,
    cfg: &FlowConfig,
    sdir: Direction,
    meta: &PacketMeta,
    seg: &TcpSegment<'_>,
    (rel_seq, rel_ack): (i64, Option<i64>),
    out: &mut Vec<FlowEvent>,
) {
    if st.closed {
        return;
    }
    let Some(last) = st.last_ts else { return };
    if meta.ts.0.saturating_sub(last.0) < cfg.stall_threshold_ns {
        return;
    }
    for d in [Direction::ClientToServer, Direction::ServerToClient] {
        let Some(p) = pending(st, d) else {
            continue;
        };
        let stop = StallStop {
            frame: meta.frame,
            ts: meta.ts,
            ended_by: classify_end(st, d, sdir, seg, rel_seq, rel_ack),
        };
        emit_stall(st, d, p, stop, out);
    }
}

/// What the segment that broke the silence did, from the stalled direction `d`'s view.
fn classify_end(
    st: &Stream,
    d: Direction,
    sdir: Direction,
    seg: &TcpSegment<'_>,
    rel_seq: i64,
    rel_ack: Option<i64>,
) -> StallEnd {
    let f = seg.flags;
    if f.rst() {
        return StallEnd::Rst;
    }
    let side = &st.sides[d.index()];
    let peer = &st.sides[d.reverse().index()];
    let payload = seg.payload_len;
    if sdir == d {
        if f.syn() && side.syn_pending() {
            return StallEnd::Retransmission;
        }
        if payload > 0 && rel_seq < side.snd_nxt {
            return StallEnd::Retransmission;
        }
        if f.fin()
            && side
                .fin_rel
                .get()
                .is_some_and(|fr| rel_seq + i64::from(payload) <= fr)
        {
            return StallEnd::Retransmission;
        }
        // Zero-window probe: small segment into a closed window, or Linux's
        // empty probe at SND.UNA − 1 (`tcp_xmit_probe_skb`, net/ipv4/tcp_output.c).
        if (peer.window_raw == Some(0) && payload <= 1 && !f.fin())
            || (payload == 0 && !f.syn() && !f.fin() && rel_seq == side.snd_una - 1)
        {
            return StallEnd::Probe;
        }
        if f.fin() {
            return StallEnd::Fin;
        }
        if payload > 0 {
            return StallEnd::NewData;
        }
        StallEnd::Ack
    } else {
        if f.fin() {
            return StallEnd::Fin;
        }
        if rel_ack.is_some_and(|a| a > side.snd_una) {
            return StallEnd::Ack;
        }
        if payload > 0 {
            return StallEnd::NewData;
        }
        StallEnd::Ack
    }
}
