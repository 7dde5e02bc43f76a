//! Endpoint state updates: what one (non-duplicate) segment changes in the
//! sender's and receiver's state — handshake options and window scaling
//! (RFC 7323 §2.2), Zeek connection-state transitions, transmissions and
//! acknowledgements (SND.UNA/SND.NXT, RFC 9293 §3.3.1), FIN/RST, the
//! advertised window and zero-window episodes, the handshake RTT and the
//! stream's close.

use super::stream::{both_mut, Stream};
use super::{FlowConfig, PacketMeta};
use crate::endpoint::{window_shifts, Side, TxSeg};
use crate::summary::zeek_transition;
use crate::WindowChangeEvent;
use pcapsleuth_core::Direction;
use pcapsleuth_decode::{IpHeader, TcpSegment};

/// Record the window-scale options of the handshake and derive both
/// directions' shifts (by role: SYN sender, SYN/ACK sender).
fn note_handshake_options(st: &mut Stream, dir: Direction, seg: &TcpSegment<'_>) {
    let f = seg.flags;
    if !f.syn() {
        return;
    }
    let opt = seg.options.window_scale;
    if f.ack() {
        if st.synack_wscale.is_none() {
            st.synack_wscale = Some(opt);
        }
    } else if st.syn_wscale.is_none() {
        st.syn_wscale = Some(opt);
    }
    // Shifts are computed by role (SYN sender, SYN/ACK sender), then mapped to directions.
    if (dir == Direction::ServerToClient) != f.ack() {
        st.roles_swapped = true;
    }
    let [a, b] = window_shifts(st.syn_wscale, st.synack_wscale);
    st.shifts = if st.roles_swapped { [b, a] } else { [a, b] };
}

/// Options and flags the sender showed (ISN, MSS, SACK, timestamps, Zeek state).
fn note_sender_flags(side: &mut Side, peer: &mut Side, meta: &PacketMeta, seg: &TcpSegment<'_>) {
    let f = seg.flags;
    side.seen = true;
    if f.syn() {
        if !f.ack() || side.isn.is_none() {
            side.isn = Some(seg.seq);
        }
        side.syn_sent = true;
        side.last_syn_ts = Some(meta.ts).into();
        if seg.options.mss.is_some() {
            side.mss = seg.options.mss;
        }
        side.wscale_offered = seg.options.window_scale;
    }
    if seg.options.sack_permitted || seg.options.sack.len > 0 {
        side.sack_seen = true;
    }
    if seg.options.timestamps.is_some() {
        side.ts_seen = true;
    }
    if !f.syn() && !f.rst() {
        side.sent_non_syn = true;
    }
    zeek_transition(
        &mut side.zeek,
        &mut peer.zeek,
        f.syn(),
        f.ack(),
        f.fin(),
        f.rst(),
    );
}

/// Record the transmission (and FIN/RST) in the sender's state.
fn note_transmit(
    side: &mut Side,
    cfg: &FlowConfig,
    meta: &PacketMeta,
    ip: &IpHeader,
    seg: &TcpSegment<'_>,
    rel_seq: i64,
) {
    let f = seg.flags;
    let seq_len = seg
        .payload_len
        .saturating_add(u32::from(f.syn()))
        .saturating_add(u32::from(f.fin()));
    let tx = TxSeg {
        rel_seq,
        seq_len,
        payload_len: seg.payload_len,
        ip_len: ip.total_len,
        first_frame: meta.frame,
        first_ts: meta.ts,
        last_frame: meta.frame,
        last_ts: meta.ts,
        tx_count: 1,
    };
    side.on_transmit(tx, cfg.max_unacked_segments);
    if f.fin() {
        let fr = rel_seq + i64::from(seg.payload_len);
        side.fin_sent = true;
        if side.fin_rel.get().is_none_or(|x| fr > x) {
            side.fin_rel = Some(fr).into();
        }
    }
    if f.rst() {
        side.rst_sent = true;
    }
}

/// The sender's advertised window (RST windows carry no meaning): returns the
/// change event, if it changed, and counts zero-window episodes.
fn note_window(
    st: &mut Stream,
    dir: Direction,
    meta: &PacketMeta,
    seg: &TcpSegment<'_>,
) -> Option<WindowChangeEvent> {
    let f = seg.flags;
    if f.rst() {
        return None;
    }
    let bytes = st.window_bytes(dir.index(), f.syn(), seg.window);
    let mut event = None;
    let (side, _) = both_mut(&mut st.sides, dir);
    if let Some(old_raw) = side.window_raw {
        let changed = match (side.window_bytes.get(), bytes) {
            (Some(a), Some(b)) => a != b,
            (None, None) => old_raw != seg.window,
            _ => true,
        };
        if changed {
            event = Some(WindowChangeEvent {
                stream: st.id,
                dir,
                frame: meta.frame,
                ts: meta.ts,
                old_bytes: side.window_bytes.get(),
                new_bytes: bytes,
                raw: seg.window,
            });
        }
    }
    side.window_raw = Some(seg.window);
    side.window_bytes = bytes.into();
    if !f.syn() {
        if seg.window == 0 {
            if side.zw_since.get().is_none() {
                side.zw_since = Some(meta.ts).into();
                st.acc.zero_window_episodes += 1;
            }
        } else if let Some(since) = side.zw_since.take() {
            st.acc.zero_window_ns = st
                .acc
                .zero_window_ns
                .saturating_add(meta.ts.0.saturating_sub(since.0).max(0));
        }
    }
    event
}

/// Apply one (non-duplicate) segment to the sender's and receiver's state.
/// Returns our Karn's-rule RTT sample for its ACK, if any, and the window
/// change it advertised, if any.
pub(super) fn update_state(
    st: &mut Stream,
    cfg: &FlowConfig,
    dir: Direction,
    meta: &PacketMeta,
    ip: &IpHeader,
    seg: &TcpSegment<'_>,
    (rel_seq, rel_ack): (i64, Option<i64>),
) -> (Option<i64>, Option<WindowChangeEvent>) {
    let f = seg.flags;
    note_handshake_options(st, dir, seg);
    let handshake_done = st.sides[0].syn_sent && st.sides[1].syn_sent;
    let client_syn_ts = st.sides[0].last_syn_ts;
    let (side, peer) = both_mut(&mut st.sides, dir);
    note_sender_flags(side, peer, meta, seg);
    note_transmit(side, cfg, meta, ip, seg, rel_seq);
    let own_rtt = rel_ack.and_then(|a| peer.on_acked(a, meta.ts));
    let window_event = note_window(st, dir, meta, seg);

    // Handshake RTT: client SYN → SYN/ACK → first client ACK after it.
    if dir == Direction::ClientToServer
        && f.ack()
        && !f.syn()
        && handshake_done
        && st.acc.handshake_rtt_ns.is_none()
    {
        if let Some(t0) = client_syn_ts.get() {
            st.acc.handshake_rtt_ns = Some(meta.ts.0.saturating_sub(t0.0));
        }
    }

    // Closed: RST, or both FINs acknowledged. A late segment on a closed
    // stream refilled the buffers just freed: free them again.
    let [c, s] = &st.sides;
    let fin_acked = |x: &Side| x.fin_rel.get().is_some_and(|fr| x.snd_una > fr);
    if st.closed || f.rst() || (fin_acked(c) && fin_acked(s)) {
        st.close();
    }
    (own_rtt, window_event)
}
