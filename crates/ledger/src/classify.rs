//! The attribution rules: given what a direction was waiting for and the
//! segment that ended the wait, pick one [`StallCause`] and its evidence.
//! Every rule is listed, with its source, in the crate README.

use crate::cause::{StallCause, TimerKind};
use crate::model::StallEvidence;
use crate::state::{is_probe, Mark, Provisional, StreamState, Vantage, WaitKind};
use pcapsleuth_core::timer::{matches_coarse_timer, matches_timer, timer_window, SLOW_TICK_NS};
use pcapsleuth_core::Direction;
use pcapsleuth_flow::SegmentEvent;

const MS: i64 = 1_000_000;
/// Linux `TCP_RTO_MIN` (`include/net/tcp.h`): HZ/5, 200 ms.
pub const TCP_RTO_MIN_NS: i64 = 200 * MS;
/// Linux `TCP_RTO_MAX` (`include/net/tcp.h`): 120 s, the cap of every
/// RTO, SYN and probe0 backoff.
pub const TCP_RTO_MAX_NS: i64 = 120_000 * MS;
/// Initial SYN retransmission timeout: RFC 6298 §2.1 / Linux `TCP_TIMEOUT_INIT`, 1 s.
pub const TCP_TIMEOUT_INIT_NS: i64 = 1_000 * MS;
/// Initial SYN timeout of Windows and pre-RFC 6298 stacks (RFC 1122 §4.2.3.1), 3 s.
pub const LEGACY_TIMEOUT_INIT_NS: i64 = 3_000 * MS;
/// Linux `TCP_DELACK_MIN` (`include/net/tcp.h`): HZ/25, 40 ms.
pub const TCP_DELACK_MIN_NS: i64 = 40 * MS;
/// Delayed-ACK timeout of other stacks (Windows `TcpAckFrequency` default,
/// BSD `tcp_delacktime`), and Linux `TCP_DELACK_MAX`: 200 ms.
pub const DELACK_OTHER_NS: i64 = 200 * MS;
/// How soon after the releasing ACK a Nagle-held segment leaves (the sender
/// answers the ACK in its softirq: microseconds at the sender, one path
/// delay at another vantage point), ns.
pub const NAGLE_FOLLOW_NS: i64 = 5 * MS;
/// Smallest IP datagram every path carries (RFC 791 / RFC 1122 §3.3.3: 576
/// bytes): a black hole is only inferred for larger segments.
pub const MIN_PATH_MTU: u32 = 576;

/// What to do with a wait.
#[derive(Debug, Clone)]
pub(crate) enum Decision {
    /// Record it: the direction of the late bytes, the cause, the evidence.
    Entry(Direction, StallCause, StallEvidence),
    /// Record only from `Mark` on (the wait before it was idle): the
    /// direction, the cause, the evidence.
    Since(Mark, Direction, StallCause, StallEvidence),
    /// A pure ACK ended it: decide on the next segment.
    Provisional(Provisional),
    /// Nobody waited (an idle connection).
    Skip,
}

fn ev(rule: &'static str) -> StallEvidence {
    StallEvidence {
        rule,
        ..StallEvidence::default()
    }
}

fn ms(ns: i64) -> f64 {
    crate::ms(ns)
}

/// Classify the wait of `d` (of `kind`, since `start`) that `seg` ended.
pub(crate) fn classify(
    st: &StreamState,
    d: Direction,
    kind: WaitKind,
    start: Mark,
    seg: &SegmentEvent,
) -> Decision {
    match kind {
        WaitKind::Syn => syn(st, d, start, seg),
        WaitKind::ZeroWindow => zero_window(st, d, start, seg),
        WaitKind::Outstanding => outstanding(st, d, start, seg),
        WaitKind::Answer => answer(st, d, start, seg),
    }
}

/// The SYN ladder's nominal delay for retransmission `step` (1-based) after
/// a previous gap of `prev_ns`: Linux `tcp_syn_linear_timeouts` (1 s steps),
/// RFC 6298 §5.5 doubling from 1 s, or the 3 s of older stacks (with the
/// BSD slow-timer tick). Returns (expected, matched).
pub fn syn_expected(step: u32, prev_ns: i64, observed_ns: i64) -> (i64, bool) {
    let exp = |base: i64| base.saturating_mul(1i64 << step.saturating_sub(1).min(20));
    let mut cands = vec![exp(TCP_TIMEOUT_INIT_NS), TCP_TIMEOUT_INIT_NS];
    if prev_ns > 0 {
        cands.push(prev_ns.saturating_mul(2));
        cands.push(prev_ns);
    }
    cands.push(exp(LEGACY_TIMEOUT_INIT_NS));
    for c in &cands {
        if matches_timer(observed_ns, *c) || matches_coarse_timer(observed_ns, *c, SLOW_TICK_NS) {
            return (*c, true);
        }
    }
    (cands[0], false)
}

fn syn(st: &StreamState, d: Direction, start: Mark, seg: &SegmentEvent) -> Decision {
    let f = seg.flags;
    let side = st.side(d);
    if f.rst() {
        return Decision::Entry(
            d,
            StallCause::Unknown,
            ev("reset while the SYN was pending"),
        );
    }
    if !f.syn() {
        // The handshake's last ACK (or data) answering the SYN/ACK: one
        // round trip seen from the responder's side, the path, not a stall.
        return Decision::Skip;
    }
    // A SYN (or SYN/ACK) re-sent by its own sender, or a SYN/ACK from a peer
    // that had already sent one.
    let sender = st.side(seg.dir);
    let (dir, step, since) = if seg.dir == d || sender.syn_count > 0 {
        (seg.dir, sender.syn_count, sender.syn_last)
    } else {
        // The first SYN/ACK seen, late: the server re-sent it (its first copy lost
        // before the capture point) when the gap fits the SYN ladder.
        (seg.dir, 1, side.syn_last)
    };
    let observed = since
        .get()
        .map_or(seg.ts.0.saturating_sub(start.ts.0), |t| {
            seg.ts.0.saturating_sub(t.0)
        });
    let prev = if seg.dir == d {
        side.syn_prev_gap_ns
    } else {
        0
    };
    let (expected, matched) = syn_expected(step.max(1), prev, observed);
    if seg.dir != d && sender.syn_count == 0 && !matched {
        // The first SYN/ACK, off the SYN ladder: the round trip itself.
        return Decision::Skip;
    }
    let rule = if seg.dir == d {
        "SYN re-sent by its retransmission timer"
    } else {
        "SYN/ACK re-sent by the responder's retransmission timer"
    };
    Decision::Entry(
        dir,
        StallCause::SynTimeout,
        StallEvidence {
            timer: Some(TimerKind::SynRto),
            step: Some(step.max(1)),
            expected_ms: Some(ms(expected)),
            observed_ms: Some(ms(observed)),
            matches_timer: Some(matched),
            ..ev(rule)
        },
    )
}

/// The probe0 ladder: the first probe after one RTO (≥ `TCP_RTO_MIN` + RTT),
/// each next one after twice the previous gap (`tcp_probe_timer`,
/// `tcp_probe0_when`).
fn probe_evidence(
    st: &StreamState,
    d: Direction,
    start: Mark,
    seg: &SegmentEvent,
) -> StallEvidence {
    let side = st.side(d);
    let peer = st.side(d.reverse());
    let step = side.lad().probe_step.saturating_add(1);
    let since = side
        .lad()
        .probe_last
        .or(peer.lad().zero_mark.map(|m| m.ts))
        .unwrap_or(start.ts);
    let observed = seg.ts.0.saturating_sub(since.0);
    let (expected, matched) = if step > 1 && side.lad().probe_prev_gap_ns > 0 {
        let e = side.lad().probe_prev_gap_ns.saturating_mul(2);
        (e, matches_timer(observed, e))
    } else {
        rto_first(st, observed)
    };
    StallEvidence {
        timer: Some(TimerKind::Probe0),
        step: Some(step),
        expected_ms: Some(ms(expected)),
        observed_ms: Some(ms(observed)),
        matches_timer: Some(matched),
        trigger_frame: peer.lad().zero_mark.map(|m| m.frame),
        window_bytes: peer.window.get(),
        ..ev("zero-window probe sent by the probe0 timer")
    }
}

/// First RTO: `TCP_RTO_MIN` + RTT (RFC 6298 §2.3 with Linux's floor); a
/// timer never fires early, so anything from the window's low edge on matches.
fn rto_first(st: &StreamState, observed: i64) -> (i64, bool) {
    let e = TCP_RTO_MIN_NS.saturating_add(st.rtt_ns().unwrap_or(0));
    (e, observed >= timer_window(TCP_RTO_MIN_NS).0)
}

fn zero_window(st: &StreamState, d: Direction, start: Mark, seg: &SegmentEvent) -> Decision {
    let peer = st.side(d.reverse());
    if seg.dir == d && is_probe(seg) {
        return Decision::Entry(d, StallCause::Probe0, probe_evidence(st, d, start, seg));
    }
    let rule = if seg.dir == d && seg.payload_len > 0 {
        "data re-sent into the receiver's zero window"
    } else {
        "receiver advertised a zero window"
    };
    Decision::Entry(
        d,
        StallCause::ReceiverZeroWindow,
        StallEvidence {
            trigger_frame: peer.lad().zero_mark.map(|m| m.frame),
            window_bytes: Some(0),
            segment_bytes: Some(seg.payload_len),
            ..ev(rule)
        },
    )
}

/// Application time of the side sending `answer_dir`: the capture host's
/// own when the handshake puts the capture point at that side.
pub(crate) fn app_cause(st: &StreamState, answer_dir: Direction) -> StallCause {
    let own = matches!(
        (st.vantage(), answer_dir),
        (Vantage::Client, Direction::ClientToServer) | (Vantage::Server, Direction::ServerToClient)
    );
    if own {
        StallCause::OwnApplication
    } else {
        StallCause::PeerApplication
    }
}

fn capture_gap(seg: &SegmentEvent) -> bool {
    seg.analysis.ack_lost_segment || seg.wireshark.ack_lost_segment
}

fn outstanding(st: &StreamState, d: Direction, start: Mark, seg: &SegmentEvent) -> Decision {
    let f = seg.flags;
    let side = st.side(d);
    if capture_gap(seg) {
        return Decision::Entry(
            d,
            StallCause::CaptureGap,
            ev("ACK of bytes the capture never saw"),
        );
    }
    if f.rst() {
        let cause = side.lad().episode.unwrap_or(StallCause::Unknown);
        return Decision::Entry(d, cause, ev("reset while data was outstanding"));
    }
    if seg.dir == d {
        let nxt = side.nxt.get().unwrap_or(0);
        if is_probe(seg) {
            return Decision::Entry(d, StallCause::Probe0, probe_evidence(st, d, start, seg));
        }
        if (seg.payload_len > 0 || f.fin()) && seg.rel_seq < nxt {
            return retransmission(st, d, start, seg);
        }
        if let Some(dec) = new_data_probe(st, d, start, seg) {
            return dec;
        }
        return Decision::Entry(
            d,
            app_cause(st, d),
            ev("the sender wrote more after this wait; nothing was re-sent"),
        );
    }
    // The peer's segment.
    let acks_more = seg
        .rel_ack
        .is_some_and(|a| f.ack() && side.acked.get().is_none_or(|x| a > x));
    if !acks_more {
        let cause = side.lad().episode.unwrap_or(StallCause::Unknown);
        return Decision::Entry(
            d,
            cause,
            ev("the peer's window changed, nothing acknowledged"),
        );
    }
    if let Some(cause) = side.lad().episode {
        return Decision::Entry(d, cause, ev("acknowledgement of re-sent bytes"));
    }
    let peer = st.side(seg.dir);
    if let Some(dec) = new_data_probe(st, seg.dir, start, seg) {
        return dec;
    }
    if seg.payload_len > 0 && seg.rel_seq < peer.nxt.get().unwrap_or(0) {
        let cause = peer.lad().episode.unwrap_or(StallCause::DataRto);
        return Decision::Entry(
            d,
            cause,
            ev("acknowledged only by the peer's retransmission"),
        );
    }
    if seg.payload_len > 0 || f.fin() {
        if !st.is_response(seg.dir) {
            // The initiator's next request acknowledges the last answer: idle.
            return Decision::Skip;
        }
        return Decision::Entry(
            seg.dir,
            app_cause(st, seg.dir),
            ev("request acknowledged by the answer"),
        );
    }
    Decision::Provisional(Provisional {
        dir: d,
        start,
        end: Mark {
            frame: seg.frame,
            ts: seg.ts,
        },
        small: side.outstanding() < i64::from(side.mss.unwrap_or(536)),
        nxt: side.nxt.get().unwrap_or(0),
        window: st.side(d.reverse()).window.get(),
    })
}

/// New data from `d` that a probe timer released: exactly the (small)
/// window the peer offered (`tcp_write_wakeup` sends `min(window, mss)`),
/// or after a frag-needed for `d`'s packet (seed 000).
fn new_data_probe(
    st: &StreamState,
    d: Direction,
    start: Mark,
    seg: &SegmentEvent,
) -> Option<Decision> {
    if seg.payload_len == 0 {
        return None;
    }
    let side = st.side(d);
    let peer = st.side(d.reverse());
    let observed = seg.ts.0.saturating_sub(start.ts.0);
    let (expected, matched) = rto_first(st, observed);
    if let Some(fr) = side
        .lad()
        .frag
        .filter(|fr| fr.at.ts.0 >= start.ts.0.saturating_sub(5 * MS) && fr.at.ts.0 <= seg.ts.0)
    {
        let since = seg.ts.0.saturating_sub(fr.at.ts.0);
        let (_, m2) = rto_first(st, since);
        let (cause, rule) = if m2 {
            let r = if fr.self_addressed {
                "data held after a self-addressed frag-needed until the probe0 timer (tcp_write_wakeup)"
            } else {
                "data held after frag-needed until the probe0 timer (tcp_write_wakeup)"
            };
            (StallCause::Probe0, r)
        } else {
            (
                StallCause::PathMtu,
                "frag-needed for this direction during the wait",
            )
        };
        // The bytes were written when the frag-needed was made (it quotes
        // them); the silence before was idle.
        let from = if fr.at.ts > start.ts { fr.at } else { start };
        return Some(Decision::Since(
            from,
            d,
            cause,
            StallEvidence {
                timer: m2.then_some(TimerKind::Probe0),
                expected_ms: Some(ms(expected)),
                observed_ms: Some(ms(since)),
                matches_timer: Some(m2),
                trigger_frame: Some(fr.at.frame),
                segment_bytes: Some(seg.payload_len),
                ..ev(rule)
            },
        ));
    }
    let w = peer.window.get()?;
    let small = w > 0 && u64::from(seg.payload_len) == w && seg.payload_len < side.max_payload;
    (small && matched).then(|| {
        Decision::Entry(
            d,
            StallCause::Probe0,
            StallEvidence {
                timer: Some(TimerKind::Probe0),
                expected_ms: Some(ms(expected)),
                observed_ms: Some(ms(observed)),
                matches_timer: Some(matched),
                window_bytes: Some(w),
                segment_bytes: Some(seg.payload_len),
                ..ev("window smaller than the segment: the probe0 timer sent exactly the window")
            },
        )
    })
}

/// A retransmission ended the wait: tail-loss probe or RTO step, refined by
/// what the path and the receiver showed.
fn retransmission(st: &StreamState, d: Direction, start: Mark, seg: &SegmentEvent) -> Decision {
    let side = st.side(d);
    let peer = st.side(d.reverse());
    let acked = side.acked.get().unwrap_or(0);
    let nxt = side.nxt.get().unwrap_or(0);
    let end = seg.rel_seq + i64::from(seg.payload_len);
    let rec = side.last_tx_of(seg.rel_seq);
    let observed = rec.map_or(seg.ts.0.saturating_sub(start.ts.0), |r| {
        seg.ts.0.saturating_sub(r.last_tx.0)
    });
    if side.lad().rto_step == 0 && seg.rel_seq > acked && end >= nxt && seg.payload_len > 0 {
        let rtt = st.rtt_ns().unwrap_or(0);
        // One segment out: PTO + TCP_RTO_MIN; else PTO + TCP_TIMEOUT_MIN (2 jiffies).
        let extra = if side.recent.len() <= 1 {
            TCP_RTO_MIN_NS
        } else {
            2 * 4 * MS
        };
        let expected = rtt.saturating_mul(2).saturating_add(extra);
        return Decision::Entry(
            d,
            StallCause::TailLossProbe,
            StallEvidence {
                timer: Some(TimerKind::Tlp),
                step: Some(1),
                expected_ms: Some(ms(expected)),
                observed_ms: Some(ms(observed)),
                matches_timer: Some(observed <= timer_window(expected).1),
                segment_bytes: Some(seg.payload_len),
                ..ev("last segment re-sent by the tail-loss probe")
            },
        );
    }
    let step = if side.lad().rto_seq == Some(seg.rel_seq) {
        side.lad().rto_step.saturating_add(1)
    } else {
        1
    };
    let (expected, matched) = if step > 1 && side.lad().rto_prev_gap_ns > 0 {
        let e = side.lad().rto_prev_gap_ns.saturating_mul(2);
        (e, matches_timer(observed, e))
    } else {
        rto_first(st, observed)
    };
    let mut e = StallEvidence {
        timer: Some(TimerKind::Rto),
        step: Some(step),
        expected_ms: Some(ms(expected)),
        observed_ms: Some(ms(observed)),
        matches_timer: Some(matched),
        window_bytes: peer.window.get(),
        segment_bytes: Some(seg.payload_len),
        ..ev("data re-sent by the retransmission timer")
    };
    let first_tx = rec.map_or(start.ts, |r| r.first_tx);
    if let Some(fr) = side
        .lad()
        .frag
        .filter(|fr| fr.at.ts.0 >= first_tx.0.saturating_sub(5 * MS))
    {
        e.trigger_frame = Some(fr.at.frame);
        e.rule = "frag-needed for these bytes, re-sent by the retransmission timer";
        return Decision::Entry(d, StallCause::PathMtu, e);
    }
    let receiver_here = st.captured_at_receiver(d);
    let open = peer
        .window
        .get()
        .is_some_and(|w| w >= u64::from(seg.payload_len))
        && !peer.window_zero;
    let size_passed = side.largest_acked_ip >= seg.ip_len;
    if open && size_passed && (side.lad().dupack_open || (receiver_here && step > 1)) {
        e.rule = "re-sent bytes reached the receiver, which kept its window open and did not acknowledge them";
        return Decision::Entry(d, StallCause::MissingZeroWindow, e);
    }
    let peer_heard = peer.last_seen.get().is_some_and(|t| t.0 > first_tx.0);
    if seg.ip_len > side.largest_acked_ip.max(MIN_PATH_MTU) && peer_heard && step > 1 {
        e.rule =
            "large segment re-sent while the peer is heard and smaller segments pass (black hole)";
        return Decision::Entry(d, StallCause::PathMtu, e);
    }
    Decision::Entry(d, StallCause::DataRto, e)
}

fn answer(st: &StreamState, d: Direction, start: Mark, seg: &SegmentEvent) -> Decision {
    let f = seg.flags;
    if f.rst() {
        return Decision::Skip;
    }
    if capture_gap(seg) {
        return Decision::Entry(
            seg.dir,
            StallCause::CaptureGap,
            ev("ACK of bytes the capture never saw"),
        );
    }
    if let Some(dec) = new_data_probe(st, seg.dir, start, seg) {
        return dec;
    }
    let answerer = st.side(seg.dir);
    if seg.dir == d || seg.rel_seq < answerer.nxt.get().unwrap_or(0) || answerer.outstanding() > 0 {
        // The requester sent again without an answer (idle: nobody waited),
        // or the other side re-sent its own bytes (its own wait, not an answer).
        return Decision::Skip;
    }
    if (seg.payload_len > 0 || f.fin()) && st.is_response(seg.dir) {
        return Decision::Entry(
            seg.dir,
            app_cause(st, seg.dir),
            ev("request acknowledged, answer not yet sent"),
        );
    }
    Decision::Skip
}

/// Decide a [`Provisional`] wait now that `next` (the stream's next segment,
/// `None` at the end) is known: `None` when the ACK released nothing and no
/// answer followed (nobody waited for it).
pub(crate) fn resolve(
    st: &StreamState,
    p: &Provisional,
    next: Option<&SegmentEvent>,
) -> Option<(Direction, StallCause, StallEvidence)> {
    let observed = p.end.ts.0.saturating_sub(p.start.ts.0);
    let (expected, matched) = if matches_timer(observed, TCP_DELACK_MIN_NS) {
        (TCP_DELACK_MIN_NS, true)
    } else if matches_timer(observed, DELACK_OTHER_NS) {
        (DELACK_OTHER_NS, true)
    } else {
        (TCP_DELACK_MIN_NS, false)
    };
    let delack = StallEvidence {
        timer: Some(TimerKind::DelayedAck),
        expected_ms: Some(ms(expected)),
        observed_ms: Some(ms(observed)),
        matches_timer: Some(matched),
        trigger_frame: Some(p.end.frame),
        window_bytes: p.window,
        ..ev("")
    };
    if let Some(n) = next {
        let follows = n.dir == p.dir
            && n.payload_len > 0
            && n.rel_seq >= p.nxt
            && n.ts.0.saturating_sub(p.end.ts.0) <= NAGLE_FOLLOW_NS;
        if follows && p.small {
            let e = StallEvidence {
                segment_bytes: Some(n.payload_len),
                ..StallEvidence {
                    rule: "small segment held by Nagle until the peer's delayed ACK",
                    ..delack
                }
            };
            return Some((p.dir, StallCause::NagleDelayedAck, e));
        }
        if follows && matched {
            let e = StallEvidence {
                rule: "the sender waited for the peer's delayed ACK to send more",
                ..delack
            };
            return Some((p.dir, StallCause::DelayedAck, e));
        }
        if n.dir != p.dir && (n.payload_len > 0 || n.flags.fin()) && st.is_response(n.dir) {
            return Some((
                n.dir,
                app_cause(st, n.dir),
                ev("request acknowledged alone; the answer came later"),
            ));
        }
    }
    // The ACK released nothing and no answer followed: nobody waited for it.
    None
}
