#![doc = include_str!("../README.md")]

mod cause;
mod classify;
mod model;
mod rollup;
mod state;

pub use cause::{StallCause, TimerKind};
pub use classify::{
    syn_expected, DELACK_OTHER_NS, LEGACY_TIMEOUT_INIT_NS, MIN_PATH_MTU, NAGLE_FOLLOW_NS,
    TCP_DELACK_MIN_NS, TCP_RTO_MAX_NS, TCP_RTO_MIN_NS, TCP_TIMEOUT_INIT_NS,
};
pub use model::{CauseTime, LedgerReport, ServiceLedger, StallEntry, StallEvidence, StreamLedger};

use classify::{classify, resolve, Decision};
use pcapsleuth_core::timer::timer_window;
use pcapsleuth_core::{Direction, Endpoint, FrameNo, StreamId, Timestamp};
use pcapsleuth_decode::IcmpKind;
use pcapsleuth_flow::{FlowEvent, IcmpErrorEvent, SegmentEvent};
use rollup::Rollup;
use state::{entry, FragNote, Mark, StreamState, WaitKind};
use std::collections::{HashMap, HashSet, VecDeque};

/// Most retired stream ids remembered (see [`StallLedger`]).
pub const MAX_RETIRED: usize = 65_536;

/// Add up per-cause rows (of several streams, say): one row per cause in
/// [`StallCause::ALL`] order, durations rounded to the µs. The capture's
/// `time_lost_by_cause` is this sum over its streams.
pub fn sum_cause_times<'a>(rows: impl IntoIterator<Item = &'a CauseTime>) -> Vec<CauseTime> {
    let mut acc = [(0u64, 0.0f64); StallCause::ALL.len()];
    for r in rows {
        let slot = &mut acc[r.cause.index()];
        slot.0 += r.stalls;
        slot.1 += r.duration_ms;
    }
    StallCause::ALL
        .iter()
        .zip(acc.iter())
        .filter(|(_, (n, _))| *n > 0)
        .map(|(c, (n, t))| CauseTime {
            cause: *c,
            stalls: *n,
            duration_ms: (t * 1000.0).round() / 1000.0,
        })
        .collect()
}

/// A duration for people: "4.2 s" from one second on, else "41 ms".
pub fn human_duration(ns: i64) -> String {
    rollup::human(ns)
}

/// ns → ms with three decimals.
pub(crate) fn ms(ns: i64) -> f64 {
    pcapsleuth_core::time::ns_to_ms(ns)
}

/// Tuning of the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerConfig {
    /// Shortest wait recorded, ns (a flow's wait must also exceed twice its
    /// round trip). 30 ms: below Linux's 40 ms delayed ACK, above the
    /// scheduling noise of a loaded host.
    pub min_stall_ns: i64,
    /// Most entries kept per stream; later ones only count in the roll-ups.
    pub max_entries_per_stream: usize,
}

impl Default for LedgerConfig {
    fn default() -> Self {
        LedgerConfig {
            min_stall_ns: 30_000_000,
            max_entries_per_stream: 256,
        }
    }
}

/// The stall ledger: feed it every [`FlowEvent`] in frame order
/// ([`StallLedger::on_event`]), then [`StallLedger::finish`].
///
/// State is kept for active streams only (a stream is retired at its reset
/// or when both FINs are acknowledged, and only its id is remembered, for at
/// most [`MAX_RETIRED`] streams), with at most
/// [`LedgerConfig::max_entries_per_stream`] entries each.
#[derive(Debug, Default)]
pub struct StallLedger {
    cfg: LedgerConfig,
    active: HashMap<StreamId, StreamState>,
    /// Recently retired streams (their late segments — a re-sent RST, a
    /// last ACK — are ignored), at most [`MAX_RETIRED`], oldest forgotten first.
    retired: HashSet<StreamId>,
    retired_order: VecDeque<StreamId>,
    rollup: Rollup,
    last: Option<Mark>,
}

impl StallLedger {
    /// A ledger with the default configuration.
    pub fn new() -> Self {
        Self::with_config(LedgerConfig::default())
    }

    /// A ledger with `cfg`.
    pub fn with_config(cfg: LedgerConfig) -> Self {
        StallLedger {
            cfg,
            ..Default::default()
        }
    }

    /// Streams whose state is held now (the active ones).
    pub fn active_streams(&self) -> usize {
        self.active.len()
    }

    /// Consume one flow event (in frame order).
    pub fn on_event(&mut self, ev: &FlowEvent) {
        match ev {
            FlowEvent::FlowStarted(s) => {
                self.note_time(s.frame, s.ts);
                self.rollup.connection(s.server);
                self.active
                    .entry(s.stream)
                    .or_insert_with(|| StreamState::new(s.stream, s.client, s.server));
            }
            FlowEvent::Segment(seg) => {
                self.note_time(seg.frame, seg.ts);
                self.on_segment(seg);
            }
            FlowEvent::IcmpError(e) => {
                self.note_time(e.frame, e.ts);
                self.on_icmp(e);
            }
            // Waits are found from the segments themselves (the flow table's
            // stalls need the whole stream silent for 150 ms, which hides
            // 40 ms delayed ACKs and waits split by the peer's heartbeats);
            // windows are read from the segments.
            FlowEvent::Stall(_) | FlowEvent::WindowChange(_) | FlowEvent::Datagram(_) => {}
        }
    }

    fn note_time(&mut self, frame: FrameNo, ts: Timestamp) {
        if self.last.is_none_or(|m| ts >= m.ts) {
            self.last = Some(Mark { frame, ts });
        }
    }

    fn on_icmp(&mut self, e: &IcmpErrorEvent) {
        if !matches!(e.kind, IcmpKind::FragNeeded | IcmpKind::PacketTooBig) || !e.quotes_tcp() {
            return;
        }
        let (Some(stream), Some(dir)) = (e.stream, e.quoted_dir) else {
            return;
        };
        if let Some(st) = self.active.get_mut(&stream) {
            st.sides[dir.index()].frag = Some(FragNote {
                at: Mark {
                    frame: e.frame,
                    ts: e.ts,
                },
                self_addressed: e.icmp_src == e.icmp_dst,
            });
        }
    }

    fn on_segment(&mut self, seg: &SegmentEvent) {
        if seg.duplicate_of.is_some() || self.retired.contains(&seg.stream) {
            return;
        }
        let max = self.cfg.max_entries_per_stream;
        let cfg = self.cfg;
        let st = self.active.entry(seg.stream).or_insert_with(|| {
            let unknown = Endpoint {
                addr: std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
                port: 0,
            };
            StreamState::new(seg.stream, unknown, unknown)
        });
        if let Some(p) = st.pending.take() {
            if let Some((dir, cause, evd)) = resolve(st, &p, Some(seg)) {
                let e = entry(st, dir, cause, (p.start, p.end), evd);
                rollup::push(&mut st.out, e, max);
            }
        }
        if let Some(c) = st.rto_check.take() {
            check_crossed_rto(st, c, seg);
        }
        let thr = threshold(&cfg, st);
        let now = Mark {
            frame: seg.frame,
            ts: seg.ts,
        };
        let mut progressed = [false; 2];
        for d in [Direction::ClientToServer, Direction::ServerToClient] {
            if !st.is_progress(d, seg) {
                continue;
            }
            progressed[d.index()] = true;
            let (Some(start), Some(kind)) = (st.side(d).wait, st.wait_kind(d)) else {
                continue;
            };
            if seg.ts.0.saturating_sub(start.ts.0) < thr {
                continue;
            }
            let dec = classify(st, d, kind, start, seg);
            record(st, d, kind, start, now, seg, dec, max);
        }
        st.apply(seg);
        for d in [Direction::ClientToServer, Direction::ServerToClient] {
            let w = &mut st.sides[d.index()].wait;
            // A frame out of timestamp order (multi-interface pcapng) never
            // moves a wait's start back in time.
            let later = w.is_none_or(|m| now.ts >= m.ts);
            if (progressed[d.index()] || w.is_none()) && later {
                *w = Some(now);
            }
        }
        let done = seg.flags.rst()
            || st
                .sides
                .iter()
                .all(|s| s.fin_sent && s.outstanding() == 0 && s.acked.is_some());
        if done && st.pending.is_none() {
            if let Some(st) = self.active.remove(&seg.stream) {
                if self.retired_order.len() >= MAX_RETIRED {
                    if let Some(old) = self.retired_order.pop_front() {
                        self.retired.remove(&old);
                    }
                }
                self.retired.insert(st.id);
                self.retired_order.push_back(st.id);
                self.rollup.stream(st);
            }
        }
    }

    /// End of input: close the waits still open (SYNs unanswered, zero
    /// windows, retransmission ladders) at the last frame, and build the report.
    pub fn finish(mut self) -> LedgerReport {
        let max = self.cfg.max_entries_per_stream;
        let mut streams: Vec<StreamState> = self.active.drain().map(|(_, s)| s).collect();
        streams.sort_by_key(|s| s.id);
        for mut st in streams {
            if let Some(p) = st.pending.take() {
                if let Some((dir, cause, evd)) = resolve(&st, &p, None) {
                    let e = entry(&st, dir, cause, (p.start, p.end), evd);
                    rollup::push(&mut st.out, e, max);
                }
            }
            if let Some(end) = self.last {
                let thr = threshold(&self.cfg, &st);
                close_open(&mut st, end, thr, max);
            }
            self.rollup.stream(st);
        }
        self.rollup.report(self.cfg.min_stall_ns)
    }
}

/// Shortest wait recorded on `st`: the configured minimum or twice the
/// flow's round trip (a wait of one round trip is the path, not a stall).
fn threshold(cfg: &LedgerConfig, st: &StreamState) -> i64 {
    cfg.min_stall_ns
        .max(st.rtt_ns().unwrap_or(0).saturating_mul(2))
}

/// Record a classified wait, and note the retransmission ladder it belongs to.
#[allow(clippy::too_many_arguments)]
fn record(
    st: &mut StreamState,
    d: Direction,
    _kind: WaitKind,
    start: Mark,
    now: Mark,
    seg: &SegmentEvent,
    dec: Decision,
    max: usize,
) {
    match dec {
        Decision::Skip => {}
        Decision::Provisional(p) => st.pending = Some(p),
        Decision::Since(from, dir, cause, evd) => {
            let e = entry(st, dir, cause, (from, now), evd);
            rollup::push(&mut st.out, e, max);
        }
        Decision::Entry(dir, cause, evd) => {
            if seg.dir == d && matches!(evd.timer, Some(TimerKind::Rto) | Some(TimerKind::Tlp)) {
                let s = &mut st.sides[d.index()];
                if evd.timer == Some(TimerKind::Rto) {
                    s.rto_seq = Some(seg.rel_seq);
                    s.rto_step = evd.step.unwrap_or(1);
                    s.rto_prev_gap_ns = evd.observed_ms.map_or(0, |m| (m * 1e6) as i64);
                }
                s.episode = Some(cause);
                let idx = st.out.entries.len();
                let first = *s.episode_idx.get_or_insert(idx);
                if cause == StallCause::DataRto && evd.step == Some(1) && idx < max {
                    st.rto_check = Some(state::RtoCheck {
                        idx,
                        dir: d,
                        at: now,
                        nxt: st.sides[d.index()].nxt.unwrap_or(0),
                    });
                }
                if matches!(cause, StallCause::PathMtu | StallCause::MissingZeroWindow) {
                    relabel_episode(&mut st.out, d, first, cause);
                }
            }
            let e = entry(st, dir, cause, (start, now), evd);
            rollup::push(&mut st.out, e, max);
        }
    }
}

/// The peer's answer crossed `d`'s first RTO retransmission: it comes
/// within max(RTT, 5 ms) of it, carries new data of at least 536 bytes but
/// 40 under the peer's MSS and
/// acknowledges everything `d` had sent (the original arrived: the RTO was
/// spurious). Both sides then waited ≈ one RTO, the peer for its own timer:
/// its probe0 timer after a path-MTU drop cut its answer (`tcp_write_wakeup`
/// re-segments below the MSS; seed 000 seen from the far side, where no
/// ICMP is visible). With a frag-needed for the peer's bytes it is certain.
fn check_crossed_rto(st: &mut StreamState, c: state::RtoCheck, seg: &SegmentEvent) {
    let peer = st.side(c.dir.reverse());
    let window = st.rtt_ns().unwrap_or(0).max(5_000_000);
    let crossed = seg.dir == c.dir.reverse()
        && seg.ts.0.saturating_sub(c.at.ts.0) <= window
        && seg.payload_len > 0
        && seg.rel_seq >= peer.nxt.unwrap_or(0)
        && seg.rel_ack.is_some_and(|a| a >= c.nxt);
    // Cut to a smaller path MTU: at least RFC 879's default 536-byte
    // segment (a short answer is just an answer) and 40 bytes under the MSS.
    let below_mss = seg.payload_len >= 536
        && peer
            .mss
            .is_some_and(|m| seg.payload_len + 40 <= u32::from(m));
    let frag = peer.frag.is_some();
    if !(crossed && (below_mss || frag)) {
        return;
    }
    let Some(e) = st.out.entries.get_mut(c.idx) else {
        return;
    };
    if e.cause != StallCause::DataRto {
        return;
    }
    let dur = e.end_ns.saturating_sub(e.start_ns);
    let old = &mut st.out.by_cause[StallCause::DataRto.index()];
    old.0 = old.0.saturating_sub(1);
    old.1 = old.1.saturating_sub(dur);
    let new = &mut st.out.by_cause[StallCause::Probe0.index()];
    new.0 += 1;
    new.1 = new.1.saturating_add(dur);
    e.cause = StallCause::Probe0;
    e.evidence.trigger_frame = Some(seg.frame);
    e.evidence.segment_bytes = Some(seg.payload_len);
    e.evidence.rule = "re-sent by the RTO as the peer's answer, held as long by its probe0 timer and cut below its MSS (path MTU), crossed it";
    let s = &mut st.sides[c.dir.index()];
    s.episode = Some(StallCause::Probe0);
}

/// A later step showed what the whole retransmission episode of `d` was:
/// its earlier plain RTO entries (from index `first`) take that cause.
fn relabel_episode(out: &mut state::StreamOut, d: Direction, first: usize, cause: StallCause) {
    for e in out.entries.iter_mut().skip(first) {
        if e.dir == d && e.cause == StallCause::DataRto && e.evidence.timer == Some(TimerKind::Rto)
        {
            let dur = e.end_ns.saturating_sub(e.start_ns);
            out.by_cause[StallCause::DataRto.index()].0 -= 1;
            out.by_cause[StallCause::DataRto.index()].1 = out.by_cause[StallCause::DataRto.index()]
                .1
                .saturating_sub(dur);
            out.by_cause[cause.index()].0 += 1;
            out.by_cause[cause.index()].1 = out.by_cause[cause.index()].1.saturating_add(dur);
            e.cause = cause;
        }
    }
}

/// Waits still open at the end of the capture: only those a timer or the
/// receiver was holding (a SYN unanswered, a zero window, a retransmission
/// ladder); anything else is an idle connection or a capture cut short.
fn close_open(st: &mut StreamState, end: Mark, thr: i64, max: usize) {
    for d in [Direction::ClientToServer, Direction::ServerToClient] {
        let (Some(start), Some(kind)) = (st.side(d).wait, st.wait_kind(d)) else {
            continue;
        };
        if end.ts.0.saturating_sub(start.ts.0) < thr {
            continue;
        }
        let side = st.side(d);
        let (cause, rule, next_step) = match kind {
            WaitKind::Syn => (
                StallCause::SynTimeout,
                "SYN still unanswered at capture end",
                Some(
                    side.syn_prev_gap_ns
                        .saturating_mul(2)
                        .max(TCP_TIMEOUT_INIT_NS),
                ),
            ),
            WaitKind::ZeroWindow => (
                StallCause::ReceiverZeroWindow,
                "zero window still closed at capture end",
                None,
            ),
            WaitKind::Outstanding => match side.episode {
                Some(c) => (
                    c,
                    "retransmission ladder still open at capture end",
                    Some(side.rto_prev_gap_ns.saturating_mul(2).max(TCP_RTO_MIN_NS)),
                ),
                None => continue,
            },
            WaitKind::Answer => continue,
        };
        // A ladder waits at most its next step (capped at TCP_RTO_MAX): past
        // it the stack gave up (or the capture missed the retransmission).
        let cap = next_step.map(|n| timer_window(n.min(TCP_RTO_MAX_NS)).1);
        let (stop, rule) = match cap {
            Some(c) if end.ts.0.saturating_sub(start.ts.0) > c => (
                Mark {
                    frame: start.frame,
                    ts: Timestamp(start.ts.0.saturating_add(c)),
                },
                "the ladder's next step expired with nothing captured (the stack gave up)",
            ),
            _ => (end, rule),
        };
        let evd = StallEvidence {
            rule,
            expected_ms: next_step.map(ms),
            ..StallEvidence::default()
        };
        let mut e = entry(st, d, cause, (start, stop), evd);
        e.open_at_capture_end = true;
        rollup::push(&mut st.out, e, max);
    }
}
