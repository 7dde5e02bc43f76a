//! Per-stream bookkeeping: what each side sent, what the peer acknowledged,
//! the advertised windows, the timer ladders in progress, and where each
//! direction's current wait began. Small and bounded per stream.

use crate::model::{StallEntry, StallEvidence};
use crate::StallCause;
use pcapsleuth_core::opt::{OptI64, OptTimestamp, OptU64};
use pcapsleuth_core::{Direction, Endpoint, FrameNo, StreamId, Timestamp};
use pcapsleuth_flow::SegmentEvent;
use std::collections::VecDeque;

/// Most unacknowledged data segments remembered per side (for the sizes of
/// acknowledged segments and the time of each segment's last transmission).
pub(crate) const MAX_RECENT: usize = 128;

/// Where the capture was taken, judged from the handshake (RFC 9293 §3.5):
/// at the client the SYN → SYN/ACK gap is the whole round trip and the
/// client's ACK follows at once; at the server the reverse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Vantage {
    Unknown,
    Client,
    Server,
    Middle,
}

/// A frame and its time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    pub frame: FrameNo,
    pub ts: Timestamp,
}

/// An ICMP frag-needed / Packet Too Big quoting this side's packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FragNote {
    pub at: Mark,
    pub self_addressed: bool,
}

/// One unacknowledged data segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegRec {
    pub seq: i64,
    pub end: i64,
    pub ip_len: u32,
    pub first_tx: Timestamp,
    pub last_tx: Timestamp,
}

/// One side of a stream (its own segments, and the ACKs / windows the peer sent about them).
#[derive(Debug, Clone, Default)]
pub(crate) struct Side {
    pub seen: bool,
    pub sent_data: bool,
    pub syn_count: u32,
    pub syn_last: OptTimestamp,
    pub syn_prev_gap_ns: i64,
    /// SND.NXT (relative, SYN and FIN count one).
    pub nxt: OptI64,
    /// Highest relative ACK the peer sent for this side's bytes.
    pub acked: OptI64,
    pub fin_sent: bool,
    pub rst_sent: bool,
    pub max_payload: u32,
    pub mss: Option<u16>,
    /// The window this side last advertised (bytes, scaled when known).
    pub window: OptU64,
    /// This side last advertised a raw window of 0.
    pub window_zero: bool,
    pub recent: VecDeque<SegRec>,
    pub largest_acked_ip: u32,
    /// Timer ladders and rare notes, allocated at their first use (most
    /// sides never retransmit, probe, close their window or get an ICMP).
    pub lad: Option<Box<Ladders>>,
    pub min_rtt_ns: OptI64,
    /// Start of this direction's current wait (its last progress).
    pub wait: Option<Mark>,
    pub last_seen: OptTimestamp,
}

/// A side's timer ladders (RTO, zero-window probes) and rare notes (its
/// zero window, an ICMP frag-needed about it): boxed in [`Side::lad`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ladders {
    /// RTO ladder in progress: the sequence re-sent, its step, the previous gap (ns).
    pub rto_seq: Option<i64>,
    pub rto_step: u32,
    pub rto_prev_gap_ns: i64,
    /// The cause given to the current retransmission episode.
    pub episode: Option<StallCause>,
    /// Index (in the stream's entries) of the episode's first RTO entry.
    pub episode_idx: Option<usize>,
    /// Zero-window probes in the current episode and the last one's time.
    pub probe_step: u32,
    pub probe_last: Option<Timestamp>,
    pub probe_prev_gap_ns: i64,
    /// The peer answered a retransmission with a non-advancing ACK and an open window.
    pub dupack_open: bool,
    /// Where this side last advertised a zero window (after an open one).
    pub zero_mark: Option<Mark>,
    pub frag: Option<FragNote>,
}

/// [`Ladders`] of a side that has none.
const NO_LADDERS: Ladders = Ladders {
    rto_seq: None,
    rto_step: 0,
    rto_prev_gap_ns: 0,
    episode: None,
    episode_idx: None,
    probe_step: 0,
    probe_last: None,
    probe_prev_gap_ns: 0,
    dupack_open: false,
    zero_mark: None,
    frag: None,
};

impl Side {
    /// This side's ladders (all empty when never allocated).
    pub fn lad(&self) -> &Ladders {
        self.lad.as_deref().unwrap_or(&NO_LADDERS)
    }

    /// This side's ladders, allocated on first use.
    pub fn lad_mut(&mut self) -> &mut Ladders {
        self.lad.get_or_insert_with(|| Box::new(NO_LADDERS))
    }

    /// A SYN (or SYN/ACK) sent and not yet acknowledged.
    pub fn syn_pending(&self) -> bool {
        self.syn_count > 0 && self.acked.get().is_none_or(|a| a < 1) && !self.rst_sent
    }

    /// Bytes sent and not acknowledged (0 when the peer never acknowledged).
    pub fn outstanding(&self) -> i64 {
        match (self.nxt.get(), self.acked.get()) {
            (Some(n), Some(a)) => (n - a).max(0),
            _ => 0,
        }
    }

    /// Time of the last transmission of the segment starting at `seq`.
    pub fn last_tx_of(&self, seq: i64) -> Option<&SegRec> {
        // `recent` is ordered by sequence, one record per sequence (`note_tx`).
        let i = self.recent.binary_search_by_key(&seq, |r| r.seq).ok()?;
        self.recent.get(i)
    }
}

/// What a direction was waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaitKind {
    /// Its SYN / SYN-ACK unacknowledged.
    Syn,
    /// The peer advertised a zero window.
    ZeroWindow,
    /// Data (or a FIN) unacknowledged.
    Outstanding,
    /// Its data all acknowledged, and the peer has not answered yet.
    Answer,
}

/// A wait ended by a pure ACK: decided on the next segment (Nagle, delayed
/// ACK or the peer's application).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Provisional {
    pub dir: Direction,
    pub start: Mark,
    pub end: Mark,
    /// Bytes outstanding were less than one MSS (a Nagle-held write is possible).
    pub small: bool,
    /// The sender's SND.NXT when the ACK came.
    pub nxt: i64,
    pub window: Option<u64>,
}

/// Output accumulated for one stream.
#[derive(Debug, Clone, Default)]
pub(crate) struct StreamOut {
    pub entries: Vec<StallEntry>,
    pub dropped: u64,
    /// Per cause: (stalls, ns).
    pub by_cause: [(u64, i64); StallCause::ALL.len()],
}

/// One stream.
#[derive(Debug, Clone)]
pub(crate) struct StreamState {
    pub id: StreamId,
    pub client: Endpoint,
    pub server: Endpoint,
    pub first_ts: OptTimestamp,
    pub last_ts: OptTimestamp,
    pub sides: [Side; 2],
    pub last_data_dir: Option<Direction>,
    /// Direction of the stream's first data: its sender is the initiator,
    /// the other side the responder (whose late data is application time).
    pub first_data_dir: Option<Direction>,
    pub hs_syn: OptTimestamp,
    pub hs_synack: OptTimestamp,
    pub hs_ack: OptTimestamp,
    pub pending: Option<Provisional>,
    /// A first RTO step just recorded: if the peer's answer crosses it, the
    /// peer was held by its own timer (see `lib.rs`, `check_crossed_rto`).
    pub rto_check: Option<RtoCheck>,
    /// Allocated at the stream's first entry (most streams never stall).
    pub out: Option<Box<StreamOut>>,
}

/// A first-step RTO entry to re-examine on the peer's next segment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RtoCheck {
    /// Index of the entry in the stream's entries.
    pub idx: usize,
    /// Direction of the re-sent bytes.
    pub dir: Direction,
    /// The retransmission.
    pub at: Mark,
    /// SND.NXT of `dir` then (the peer's answer must acknowledge it all).
    pub nxt: i64,
}

impl StreamState {
    pub fn new(id: StreamId, client: Endpoint, server: Endpoint) -> Self {
        StreamState {
            id,
            client,
            server,
            first_ts: OptTimestamp::NONE,
            last_ts: OptTimestamp::NONE,
            sides: [Side::default(), Side::default()],
            last_data_dir: None,
            first_data_dir: None,
            hs_syn: OptTimestamp::NONE,
            hs_synack: OptTimestamp::NONE,
            hs_ack: OptTimestamp::NONE,
            pending: None,
            rto_check: None,
            out: None,
        }
    }

    /// The state of a stream whose only segment so far is a plain SYN
    /// client → server (no ACK, RST, FIN or payload, relative sequence 0,
    /// window `window` bytes, MSS option `mss`) at `at`: what [`Self::new`]
    /// followed by [`Self::apply`] of that SYN holds, with both directions'
    /// waits starting at it (as `StallLedger` sets them).
    pub fn after_syn(
        id: StreamId,
        (client, server): (Endpoint, Endpoint),
        at: Mark,
        mss: Option<u16>,
        window: Option<u64>,
    ) -> Self {
        let mut st = StreamState::new(id, client, server);
        st.first_ts = Some(at.ts).into();
        st.last_ts = Some(at.ts).into();
        st.hs_syn = Some(at.ts).into();
        let s = &mut st.sides[Direction::ClientToServer.index()];
        s.seen = true;
        s.last_seen = Some(at.ts).into();
        s.syn_count = 1;
        s.syn_last = Some(at.ts).into();
        s.mss = mss;
        s.nxt = Some(1).into();
        s.window = window.into();
        for side in st.sides.iter_mut() {
            side.wait = Some(at);
        }
        st
    }

    /// The stream's output, allocated on first use.
    pub fn out_mut(&mut self) -> &mut StreamOut {
        self.out.get_or_insert_with(Box::default)
    }

    pub fn side(&self, d: Direction) -> &Side {
        &self.sides[d.index()]
    }

    /// Handshake round trip seen at the capture point, ns (SYN → SYN/ACK → ACK).
    pub fn handshake_rtt_ns(&self) -> Option<i64> {
        let (a, b) = self.handshake_halves()?;
        Some(a.saturating_add(b))
    }

    fn handshake_halves(&self) -> Option<(i64, i64)> {
        let (s, sa, a) = (
            self.hs_syn.get()?,
            self.hs_synack.get()?,
            self.hs_ack.get()?,
        );
        let x = sa.0.saturating_sub(s.0);
        let y = a.0.saturating_sub(sa.0);
        (x >= 0 && y >= 0).then_some((x, y))
    }

    /// Round trip estimate, ns: the handshake, else the larger of the two
    /// sides' smallest ACK RTTs.
    pub fn rtt_ns(&self) -> Option<i64> {
        self.handshake_rtt_ns().or_else(|| {
            let a = self.sides[0].min_rtt_ns;
            let b = self.sides[1].min_rtt_ns;
            a.get().max(b.get())
        })
    }

    /// Whether `d` is the responder's direction (the side that did not send
    /// the stream's first data): only its late data is application time;
    /// the initiator's next request after an answer is idle time.
    pub fn is_response(&self, d: Direction) -> bool {
        self.first_data_dir.is_some_and(|f| f != d)
    }

    /// Whether the capture point is at the receiver of `d`'s data: the
    /// handshake says so ([`Vantage`]), or the receiver's ACKs follow `d`'s
    /// data in under a quarter of the handshake round trip (the ACK delay is
    /// then the receiver's own, not the path's).
    pub fn captured_at_receiver(&self, d: Direction) -> bool {
        let by_handshake = matches!(
            (self.vantage(), d),
            (Vantage::Server, Direction::ClientToServer)
                | (Vantage::Client, Direction::ServerToClient)
        );
        let by_ack = match (self.side(d).min_rtt_ns.get(), self.handshake_rtt_ns()) {
            (Some(a), Some(h)) => h > 0 && a.saturating_mul(4) < h,
            _ => false,
        };
        by_handshake || by_ack
    }

    /// Where the capture was taken (see [`Vantage`]).
    pub fn vantage(&self) -> Vantage {
        match self.handshake_halves() {
            Some((x, y)) if x > 4 * y => Vantage::Client,
            Some((x, y)) if y > 4 * x => Vantage::Server,
            Some(_) => Vantage::Middle,
            None => Vantage::Unknown,
        }
    }

    /// The wait `d` is in, judged from the state before the current segment.
    pub fn wait_kind(&self, d: Direction) -> Option<WaitKind> {
        let side = self.side(d);
        let peer = self.side(d.reverse());
        if side.rst_sent || peer.rst_sent {
            return None;
        }
        if side.syn_pending() {
            return Some(WaitKind::Syn);
        }
        if peer.window_zero && side.sent_data {
            return Some(WaitKind::ZeroWindow);
        }
        if side.outstanding() > 0 {
            return Some(WaitKind::Outstanding);
        }
        if self.last_data_dir == Some(d) && !side.fin_sent && !peer.fin_sent {
            return Some(WaitKind::Answer);
        }
        None
    }

    /// Whether `seg` is progress for direction `d`: `d` sent something that
    /// is not a pure ACK, or the peer acknowledged more of `d`'s bytes,
    /// opened or closed its window, answered `d`'s SYN, reset, or answered
    /// `d`'s acknowledged request.
    pub fn is_progress(&self, d: Direction, seg: &SegmentEvent) -> bool {
        let f = seg.flags;
        if seg.dir == d {
            return f.syn() || f.fin() || f.rst() || seg.payload_len > 0 || is_probe(seg);
        }
        let side = self.side(d);
        let peer = self.side(d.reverse());
        let ack_adv = f.ack()
            && seg.rel_ack.is_some_and(|a| {
                side.acked.get().is_none_or(|x| a > x) && side.nxt.get().is_some()
            });
        let win_flip = (seg.window_raw == 0) != peer.window_zero;
        let answer = (seg.payload_len > 0 || f.fin())
            && side.outstanding() == 0
            && self.last_data_dir == Some(d);
        ack_adv || win_flip || f.rst() || (f.syn() && side.syn_pending()) || answer
    }

    /// Apply `seg` to the state (after the waits it ends were classified).
    pub fn apply(&mut self, seg: &SegmentEvent) {
        if self.first_ts.get().is_none() {
            self.first_ts = OptTimestamp::some(seg.ts);
        }
        self.last_ts = Some(self.last_ts.get().map_or(seg.ts, |t| t.max(seg.ts))).into();
        self.note_handshake(seg);
        let d = seg.dir;
        self.apply_peer_ack(d.reverse(), seg);
        let peer_zero = self.sides[d.reverse().index()].lad().zero_mark;
        let s = &mut self.sides[d.index()];
        s.seen = true;
        s.last_seen = Some(seg.ts).into();
        let f = seg.flags;
        if f.syn() {
            if let Some(prev) = s.syn_last.get() {
                s.syn_prev_gap_ns = seg.ts.0.saturating_sub(prev.0);
            }
            s.syn_count += 1;
            s.syn_last = Some(seg.ts).into();
            s.mss = seg.mss.or(s.mss);
        }
        if f.rst() {
            s.rst_sent = true;
        }
        if f.fin() {
            s.fin_sent = true;
        }
        let end =
            seg.rel_seq + i64::from(seg.payload_len) + i64::from(f.syn()) + i64::from(f.fin());
        s.nxt = Some(s.nxt.get().map_or(end, |n| n.max(end))).into();
        if seg.payload_len > 0 {
            s.sent_data = true;
            s.max_payload = s.max_payload.max(seg.payload_len);
            self.last_data_dir = Some(d);
            self.first_data_dir.get_or_insert(d);
            note_tx(s, seg);
        }
        if is_probe(seg) {
            let l = s.lad_mut();
            let since = l.probe_last.or(peer_zero.map(|m| m.ts));
            if let Some(prev) = since {
                l.probe_prev_gap_ns = seg.ts.0.saturating_sub(prev.0);
            }
            l.probe_step += 1;
            l.probe_last = Some(seg.ts);
        }
        // The window this side advertises.
        s.window = seg.window_bytes.or(s.window.get()).into();
        let zero = seg.window_raw == 0 && !f.syn() && !f.rst();
        if zero && !s.window_zero {
            s.lad_mut().zero_mark = Some(Mark {
                frame: seg.frame,
                ts: seg.ts,
            });
        }
        s.window_zero = zero;
        if !zero {
            // The peer's probe ladder ends when this side opens its window.
            if let Some(p) = self.sides[d.reverse().index()].lad.as_deref_mut() {
                p.probe_step = 0;
                p.probe_last = None;
            }
        }
    }

    fn note_handshake(&mut self, seg: &SegmentEvent) {
        let f = seg.flags;
        match seg.dir {
            Direction::ClientToServer if f.syn() && !f.ack() && self.hs_synack.get().is_none() => {
                self.hs_syn = Some(seg.ts).into()
            }
            Direction::ServerToClient if f.syn() && f.ack() && self.hs_synack.get().is_none() => {
                self.hs_synack = Some(seg.ts).into()
            }
            Direction::ClientToServer
                if !f.syn()
                    && f.ack()
                    && self.hs_synack.get().is_some()
                    && self.hs_ack.get().is_none() =>
            {
                self.hs_ack = Some(seg.ts).into()
            }
            _ => {}
        }
    }

    /// `seg` (sent by the peer of `d`) acknowledges `d`'s bytes.
    fn apply_peer_ack(&mut self, d: Direction, seg: &SegmentEvent) {
        let s = &mut self.sides[d.index()];
        let Some(a) = seg.rel_ack.filter(|_| seg.flags.ack()) else {
            return;
        };
        if let Some(rtt) = seg.ack_rtt_ns.filter(|r| *r > 0) {
            s.min_rtt_ns = Some(s.min_rtt_ns.get().map_or(rtt, |m| m.min(rtt))).into();
        }
        let advanced = s.acked.get().is_none_or(|x| a > x);
        if advanced {
            s.acked = Some(a).into();
            while let Some(r) = s.recent.front() {
                if r.end > a {
                    break;
                }
                if r.first_tx == r.last_tx {
                    s.largest_acked_ip = s.largest_acked_ip.max(r.ip_len);
                }
                s.recent.pop_front();
            }
            if let Some(l) = s.lad.as_deref_mut() {
                l.rto_seq = None;
                l.rto_step = 0;
                l.episode = None;
                l.episode_idx = None;
                l.dupack_open = false;
            }
        } else if s.lad().rto_step > 0
            && seg.payload_len == 0
            && seg.window_raw > 0
            && s.outstanding() > 0
        {
            s.lad_mut().dupack_open = true;
        }
    }
}

/// A zero-window probe or keep-alive (our verdict: Linux probes carry seq = SND.UNA − 1).
pub(crate) fn is_probe(seg: &SegmentEvent) -> bool {
    seg.analysis.zero_window_probe || seg.analysis.keep_alive
}

fn note_tx(s: &mut Side, seg: &SegmentEvent) {
    let seq = seg.rel_seq;
    let end = seq + i64::from(seg.payload_len);
    // Ordered by sequence, one record per sequence: a binary search (a
    // linear scan of 128 records per data segment was most of the ledger's time).
    let found = match s.recent.back() {
        // New data past every record: the usual case, no search.
        Some(last) if last.seq < seq => Err(s.recent.len()),
        _ => s.recent.binary_search_by_key(&seq, |r| r.seq),
    };
    if let Some(r) = found.ok().and_then(|i| s.recent.get_mut(i)) {
        r.last_tx = seg.ts;
        r.ip_len = seg.ip_len;
        r.end = r.end.max(end);
        return;
    }
    if s.acked.get().is_some_and(|a| end <= a) {
        return;
    }
    if s.recent.len() >= MAX_RECENT {
        s.recent.pop_front();
    }
    let rec = SegRec {
        seq,
        end,
        ip_len: seg.ip_len,
        first_tx: seg.ts,
        last_tx: seg.ts,
    };
    // Keep the deque ordered by sequence (retransmissions of other geometry
    // are rare); a short exchange has one segment unacknowledged at a time,
    // so the deque starts at one slot (`pcapsleuth_core::grow`).
    let pos = s
        .recent
        .iter()
        .rposition(|r| r.seq < seq)
        .map_or(0, |p| p + 1);
    pcapsleuth_core::grow::insert(&mut s.recent, pos, rec);
}

/// Longest wait a timer-driven cause may explain, ns: twice Linux
/// `TCP_RTO_MAX` (120 s, `include/net/tcp.h`), the cap of every RTO, SYN and
/// probe0 backoff. Longer waits in captures are clock jumps (crafted or
/// merged files) or idle peers, not timers.
pub(crate) const TIMER_CEILING_NS: i64 = 2 * crate::TCP_RTO_MAX_NS;

/// A finished entry for stream `st` (a timer-driven cause over
/// [`TIMER_CEILING_NS`] becomes `unknown`).
pub(crate) fn entry(
    st: &StreamState,
    dir: Direction,
    cause: StallCause,
    (start, end): (Mark, Mark),
    evidence: StallEvidence,
) -> StallEntry {
    let dur = end.ts.0.saturating_sub(start.ts.0);
    let (cause, evidence) = if cause.is_timer_driven() && dur > TIMER_CEILING_NS {
        let e = StallEvidence {
            rule: "wait longer than any TCP timer can last (2 × TCP_RTO_MAX): a clock jump or an idle peer",
            ..evidence
        };
        (StallCause::Unknown, e)
    } else {
        (cause, evidence)
    };
    StallEntry {
        tcp_stream: st.id,
        dir,
        cause,
        start_frame: start.frame,
        end_frame: end.frame,
        start_ns: start.ts.0,
        end_ns: end.ts.0,
        duration_ms: crate::ms(dur),
        open_at_capture_end: false,
        evidence,
    }
}
