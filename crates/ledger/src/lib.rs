#![doc = include_str!("../README.md")]

mod cause;
mod classify;
mod model;
mod rollup;
mod state;

pub use cause::{CauseSet, StallCause, TimerKind};
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
use std::collections::VecDeque;

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
    /// The streams whose ledger [`LedgerReport::streams`] lists: those with
    /// at least one stall of one of these causes. Every stream counts in the
    /// roll-ups (per cause, per service) whatever this says. Default
    /// [`CauseSet::ALL`]; a run that reports findings but no flows keeps only
    /// the causes its detectors read, so a SYN scan's million one-SYN waits
    /// cost no per-stream ledger.
    pub keep_streams: CauseSet,
    /// Record each stream the ledger concludes before the end of the
    /// capture, for [`StallLedger::drain_concluded`] (whoever sets it must
    /// drain: the record is 16 bytes per stream until then). Default off.
    pub notify_concluded: bool,
}

impl Default for LedgerConfig {
    fn default() -> Self {
        LedgerConfig {
            min_stall_ns: 30_000_000,
            max_entries_per_stream: 256,
            keep_streams: CauseSet::ALL,
            notify_concluded: false,
        }
    }
}

/// Where the ledger keeps one stream (indexed by `tcp.stream`).
///
/// Most streams of a scan or a flood are one SYN and nothing else: such a
/// stream is held in the 32 bytes of [`Slot::Syn`] (exactly what a
/// [`StreamState`] would hold after that SYN; an IPv6 client in an 18-byte
/// entry of [`Clients6`], [`Slot::Syn6`]) until a second segment comes.
#[derive(Debug, Default)]
enum Slot {
    /// Never seen (or retired so long ago that it was forgotten).
    #[default]
    Vacant,
    /// Announced by `FlowStarted`, no segment yet; `server` is the service
    /// index of the rollup.
    Started { client: Endpoint, server: u32 },
    /// One plain SYN client → server (no ACK, RST, FIN or payload, relative
    /// sequence 0, frame below 2^32) from an IPv4 client `addr`:`port`.
    Syn {
        syn: LoneSyn,
        addr: [u8; 4],
        port: u16,
    },
    /// [`Slot::Syn`] from any other client (IPv6): `client` indexes
    /// [`StallLedger::clients6`].
    Syn6 { syn: LoneSyn, client: u32 },
    /// Any other live stream.
    Full(Box<StreamState>),
    /// Retired by the ledger (reset, or both FINs acknowledged): its late
    /// segments — a re-sent RST, a last ACK — are ignored.
    Retired,
    /// Retired by the flow table ([`FlowEvent::FlowEnded`]) and concluded:
    /// a later segment of the same `tcp.stream` starts a new state.
    Ended { client: Endpoint, server: u32 },
}

/// What a stream that saw one plain SYN holds besides its client
/// ([`Slot::Syn`], [`Slot::Syn6`]). `bits`: [`SYN_HAS_MSS`],
/// [`SYN_WINDOW_KNOWN`], [`SYN_ENDED`].
#[derive(Debug, Clone, Copy)]
struct LoneSyn {
    ts: Timestamp,
    frame: u32,
    /// Service index of the rollup.
    server: u32,
    mss: u16,
    window_raw: u16,
    bits: u8,
}

impl Slot {
    /// The lone SYN held, for [`Slot::Syn`] and [`Slot::Syn6`].
    fn lone_syn(&self) -> Option<LoneSyn> {
        match self {
            Slot::Syn { syn, .. } | Slot::Syn6 { syn, .. } => Some(*syn),
            _ => None,
        }
    }

    /// The client of the lone SYN held ([`Slot::Syn6`]'s from `c6`).
    fn lone_syn_client(&self, c6: &Clients6) -> Option<Endpoint> {
        match self {
            Slot::Syn { addr, port, .. } => Some(Endpoint {
                addr: std::net::IpAddr::V4((*addr).into()),
                port: *port,
            }),
            Slot::Syn6 { client, .. } => c6.get(*client),
            _ => None,
        }
    }

    /// The [`Clients6`] entry a [`Slot::Syn6`] holds.
    fn clients6_entry(&self) -> Option<u32> {
        match self {
            Slot::Syn6 { client, .. } => Some(*client),
            _ => None,
        }
    }

    /// The `bits` of the lone SYN held.
    fn lone_syn_bits_mut(&mut self) -> Option<&mut u8> {
        match self {
            Slot::Syn { syn, .. } | Slot::Syn6 { syn, .. } => Some(&mut syn.bits),
            _ => None,
        }
    }
}

/// [`Slot::Syn`]: the SYN carried an MSS option.
const SYN_HAS_MSS: u8 = 1;
/// [`Slot::Syn`]: the SYN's window in bytes was known (it is the raw field).
const SYN_WINDOW_KNOWN: u8 = 2;
/// [`Slot::Syn`]: the flow table retired the stream ([`FlowEvent::FlowEnded`])
/// while its SYN wait was open, so the wait closes at [`StallLedger::finish`];
/// otherwise the slot is [`Slot::Ended`] (a later segment starts a new
/// state). Kept in the slot's 32 bytes instead of a whole parked
/// [`StreamState`] (≈ 660 bytes): a SYN scan evicted by the flow cap.
const SYN_ENDED: u8 = 4;

/// Whether `slot` is a [`Slot::Syn`] retired by the flow table ([`SYN_ENDED`]).
fn is_ended_syn(slot: &Slot) -> bool {
    slot.lone_syn().is_some_and(|syn| syn.bits & SYN_ENDED != 0)
}

/// The IPv6 clients of [`Slot::Syn6`] slots, 18 bytes each in one table
/// (a box per slot took 48, 64 with malloc's header: 128 MB for a SYN scan
/// from 2 million IPv6 sources). Released entries are reused.
#[derive(Debug, Default)]
struct Clients6 {
    entries: Vec<([u8; 16], u16)>,
    free: Vec<u32>,
}

impl Clients6 {
    /// Keep IPv6 `client`; `None` for an IPv4 one, or past 2^32 entries.
    fn add(&mut self, client: Endpoint) -> Option<u32> {
        let std::net::IpAddr::V6(a) = client.addr else {
            return None;
        };
        let e = (a.octets(), client.port);
        if let Some(i) = self.free.pop() {
            if let Some(slot) = self.entries.get_mut(i as usize) {
                *slot = e;
                return Some(i);
            }
        }
        let i = u32::try_from(self.entries.len()).ok()?;
        self.entries.push(e);
        Some(i)
    }

    fn get(&self, i: u32) -> Option<Endpoint> {
        self.entries.get(i as usize).map(|&(a, port)| Endpoint {
            addr: std::net::IpAddr::V6(a.into()),
            port,
        })
    }

    /// Entry `i` is no longer named by any slot.
    fn release(&mut self, i: u32) {
        self.free.push(i);
    }

    fn heap_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<([u8; 16], u16)>()
            + self.free.capacity() * std::mem::size_of::<u32>()
    }
}

/// The stall ledger: feed it every [`FlowEvent`] in frame order
/// ([`StallLedger::on_event`]), then [`StallLedger::finish`].
///
/// State is kept for live streams only: a stream is retired at its reset or
/// when both FINs are acknowledged (its id is remembered, for at most
/// [`MAX_RETIRED`] streams, so its late segments are ignored), or when the
/// flow table retires it ([`FlowEvent::FlowEnded`]: its waits are concluded
/// as at the end of the capture, and only the entries are kept). Each stream
/// holds at most [`LedgerConfig::max_entries_per_stream`] entries; a stream
/// that only ever sent one SYN costs 32 bytes (50 with an IPv6 client).
#[derive(Debug, Default)]
pub struct StallLedger {
    cfg: LedgerConfig,
    /// Per `tcp.stream` (ids are dense, assigned in order by the flow table).
    slots: Vec<Slot>,
    /// The IPv6 clients of [`Slot::Syn6`] slots.
    clients6: Clients6,
    /// Streams retired by the ledger, oldest first, at most [`MAX_RETIRED`].
    retired_order: VecDeque<StreamId>,
    /// Streams retired by the flow table whose open waits end at the
    /// capture's end (a zero window, a wait not yet past its timer): closed
    /// in [`StallLedger::finish`].
    open_at_end: Vec<StreamState>,
    rollup: Rollup,
    last: Option<Mark>,
    /// Streams concluded since the last [`StallLedger::drain_concluded`],
    /// with the index of their kept ledger, if kept
    /// ([`LedgerConfig::notify_concluded`]).
    concluded: Vec<(StreamId, Option<usize>)>,
}

/// `Some(index)` of a stream id in the slot table.
fn slot_index(id: StreamId) -> Option<usize> {
    usize::try_from(id.get()).ok()
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

    /// Streams whose state is held now: announced or with segments, and not
    /// retired (by the ledger or by [`FlowEvent::FlowEnded`]). Retired
    /// streams that still wait for the capture's end to close a wait are
    /// not counted (see [`StallLedger::waiting_for_end`]).
    pub fn active_streams(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| {
                matches!(
                    s,
                    Slot::Started { .. } | Slot::Syn { .. } | Slot::Syn6 { .. } | Slot::Full(_)
                ) && !is_ended_syn(s)
            })
            .count()
    }

    /// Retired streams kept whole until [`StallLedger::finish`] because a
    /// wait of theirs ends only with the capture (a zero window still
    /// closed, a retransmission timer not yet due when they were retired).
    pub fn waiting_for_end(&self) -> usize {
        self.open_at_end.len() + self.slots.iter().filter(|s| is_ended_syn(s)).count()
    }

    /// Heap bytes held for streams now (the slot table and the states
    /// behind it, without the entries' evidence): for memory tests.
    pub fn state_bytes(&self) -> usize {
        let boxed = |st: &StreamState| {
            std::mem::size_of::<StreamState>()
                + st.sides
                    .iter()
                    .map(|s| {
                        s.recent.capacity() * std::mem::size_of::<state::SegRec>()
                            + s.lad
                                .as_ref()
                                .map_or(0, |_| std::mem::size_of::<state::Ladders>())
                    })
                    .sum::<usize>()
                + st.out.as_ref().map_or(0, |o| {
                    std::mem::size_of::<state::StreamOut>()
                        + o.entries.capacity() * std::mem::size_of::<StallEntry>()
                })
        };
        self.slots.capacity() * std::mem::size_of::<Slot>()
            + self
                .slots
                .iter()
                .map(|s| match s {
                    Slot::Full(st) => boxed(st),
                    _ => 0,
                })
                .sum::<usize>()
            + self.clients6.heap_bytes()
            + self.open_at_end.iter().map(boxed).sum::<usize>()
    }

    /// The slot of `id`, the table grown to hold it
    /// ([`pcapsleuth_core::dense::slot_mut`]: by a quarter at least).
    fn slot_mut(&mut self, id: StreamId) -> Option<&mut Slot> {
        pcapsleuth_core::dense::slot_mut(&mut self.slots, slot_index(id)?, Slot::default)
    }

    /// Consume one flow event (in frame order).
    pub fn on_event(&mut self, ev: &FlowEvent) {
        match ev {
            FlowEvent::FlowStarted(s) => {
                self.note_time(s.frame, s.ts);
                let server = self.rollup.connection(s.server);
                self.reopen_ended_syn(s.stream);
                if let Some(slot) = self.slot_mut(s.stream) {
                    if matches!(slot, Slot::Vacant | Slot::Ended { .. }) {
                        *slot = Slot::Started {
                            client: s.client,
                            server,
                        };
                    }
                }
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
            FlowEvent::FlowEnded(e) => self.on_flow_ended(e.stream),
        }
    }

    fn note_time(&mut self, frame: FrameNo, ts: Timestamp) {
        if self.last.is_none_or(|m| ts >= m.ts) {
            self.last = Some(Mark { frame, ts });
        }
    }

    /// The full state of a live stream, made from its compact slot if need be.
    fn state_mut(&mut self, id: StreamId) -> Option<&mut StreamState> {
        let i = slot_index(id)?;
        let slot = self.slots.get_mut(i)?;
        let full = match *slot {
            Slot::Full(_) => None,
            Slot::Started { client, server } => {
                Some(StreamState::new(id, client, self.rollup.server(server)?))
            }
            Slot::Syn { .. } | Slot::Syn6 { .. } if is_ended_syn(slot) => return None,
            Slot::Syn { .. } | Slot::Syn6 { .. } => {
                Some(syn_state(id, slot, &self.rollup, &self.clients6)?)
            }
            Slot::Vacant | Slot::Retired | Slot::Ended { .. } => return None,
        };
        if let Some(st) = full {
            if let Some(c) = slot.clients6_entry() {
                self.clients6.release(c);
            }
            *slot = Slot::Full(Box::new(st));
        }
        match slot {
            Slot::Full(st) => Some(st),
            _ => None,
        }
    }

    fn on_icmp(&mut self, e: &IcmpErrorEvent) {
        if !matches!(e.kind, IcmpKind::FragNeeded | IcmpKind::PacketTooBig) || !e.quotes_tcp() {
            return;
        }
        let (Some(stream), Some(dir)) = (e.stream, e.quoted_dir) else {
            return;
        };
        if let Some(st) = self.state_mut(stream) {
            st.sides[dir.index()].lad_mut().frag = Some(FragNote {
                at: Mark {
                    frame: e.frame,
                    ts: e.ts,
                },
                self_addressed: e.icmp_src == e.icmp_dst,
            });
        }
    }

    fn on_segment(&mut self, seg: &SegmentEvent) {
        if seg.duplicate_of.is_some() {
            return;
        }
        self.reopen_ended_syn(seg.stream);
        let Some(i) = slot_index(seg.stream) else {
            return;
        };
        let Some(slot) = pcapsleuth_core::dense::slot_mut(&mut self.slots, i, Slot::default) else {
            return;
        };
        match *slot {
            Slot::Retired => return,
            Slot::Started { client, server } | Slot::Ended { client, server } => {
                if let Some(syn) = compact_syn(seg, client, server, &mut self.clients6) {
                    *slot = syn;
                    return;
                }
            }
            _ => {}
        }
        let unknown = Endpoint {
            addr: std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            port: 0,
        };
        if self.state_mut(seg.stream).is_none() {
            // A stream never announced (or forgotten after its retirement),
            // or one the flow table retired and sees again.
            let rollup = &self.rollup;
            if let Some(slot) = slot_index(seg.stream).and_then(|i| self.slots.get_mut(i)) {
                let st = match *slot {
                    Slot::Ended { client, server } => StreamState::new(
                        seg.stream,
                        client,
                        rollup.server(server).unwrap_or(unknown),
                    ),
                    _ => StreamState::new(seg.stream, unknown, unknown),
                };
                if let Some(c) = slot.clients6_entry() {
                    self.clients6.release(c);
                }
                *slot = Slot::Full(Box::new(st));
            }
        }
        let cfg = self.cfg;
        let Some(st) = self.state_mut(seg.stream) else {
            return;
        };
        let done = segment(&cfg, st, seg);
        if done {
            self.retire(seg.stream);
        }
    }

    /// The ledger retires stream `id` (reset, or both FINs acknowledged).
    fn retire(&mut self, id: StreamId) {
        let Some(slot) = slot_index(id).and_then(|i| self.slots.get_mut(i)) else {
            return;
        };
        let Slot::Full(st) = std::mem::replace(slot, Slot::Retired) else {
            return;
        };
        if self.retired_order.len() >= MAX_RETIRED {
            if let Some(old) = self.retired_order.pop_front() {
                if let Some(s) = slot_index(old).and_then(|i| self.slots.get_mut(i)) {
                    if matches!(s, Slot::Retired) {
                        *s = Slot::Vacant;
                    }
                }
            }
        }
        self.retired_order.push_back(id);
        let kept = self.rollup.stream(*st, self.cfg.keep_streams);
        self.note_concluded(id, kept);
    }

    /// Stream `id` is concluded (its entries final, the kept ledger's index
    /// `kept` if kept): recorded when [`LedgerConfig::notify_concluded`].
    fn note_concluded(&mut self, id: StreamId, kept: Option<usize>) {
        if self.cfg.notify_concluded {
            self.concluded.push((id, kept));
        }
    }

    /// Hand each stream concluded since the last call to `f`, with its
    /// entries (empty when the ledger keeps none of them: no stall, or no
    /// stall of a cause in [`LedgerConfig::keep_streams`]): they are final,
    /// and the same [`LedgerReport::streams`] lists at the end. A stream is
    /// concluded when the ledger retires it (a reset, both FINs
    /// acknowledged) and when the flow table retires it
    /// ([`FlowEvent::FlowEnded`]), unless a wait of it closes only at the
    /// capture's end; it may be concluded twice (retired, then ended).
    /// Nothing is recorded unless [`LedgerConfig::notify_concluded`].
    pub fn drain_concluded(&mut self, mut f: impl FnMut(StreamId, &[StallEntry])) {
        if self.concluded.is_empty() {
            return;
        }
        for (id, kept) in self.concluded.drain(..) {
            let entries = kept
                .and_then(|i| self.rollup.kept(i))
                .map_or(&[][..], |l| l.stalls.as_slice());
            f(id, entries);
        }
    }

    /// The flow table retired `id`: conclude its waits as the end of the
    /// capture would (a wait whose close depends on where the capture ends
    /// keeps the stream until [`StallLedger::finish`]) and drop its state.
    fn on_flow_ended(&mut self, id: StreamId) {
        let Some(slot) = slot_index(id).and_then(|i| self.slots.get_mut(i)) else {
            return;
        };
        let (st, syn) = match std::mem::take(slot) {
            Slot::Started { client, server } | Slot::Ended { client, server } => {
                *slot = Slot::Ended { client, server };
                self.note_concluded(id, None);
                return;
            }
            s @ (Slot::Vacant | Slot::Retired) => {
                *slot = s;
                self.note_concluded(id, None);
                return;
            }
            s @ (Slot::Syn { .. } | Slot::Syn6 { .. }) if is_ended_syn(&s) => {
                *slot = s;
                return;
            }
            s @ (Slot::Syn { .. } | Slot::Syn6 { .. }) => {
                match syn_state(id, &s, &self.rollup, &self.clients6) {
                    Some(st) => (st, Some(s)),
                    None => {
                        // Unreadable (no such service or client): dropped.
                        if let Some(c) = s.clients6_entry() {
                            self.clients6.release(c);
                        }
                        return;
                    }
                }
            }
            Slot::Full(st) => (*st, None),
        };
        if let Some(server) = self.rollup.service_of(&st.server) {
            *slot = Slot::Ended {
                client: st.client,
                server,
            };
        }
        let Some(parked) = self.conclude(st) else {
            if let Some(c) = syn.and_then(|s| s.clients6_entry()) {
                self.clients6.release(c);
            }
            return;
        };
        let slot = slot_index(id).and_then(|i| self.slots.get_mut(i));
        match (syn, slot) {
            // A lone SYN still waiting: its compact slot says all the parked
            // state would (`syn_state`), in 32 bytes.
            (Some(mut syn), Some(slot @ Slot::Ended { .. })) => {
                if let Some(bits) = syn.lone_syn_bits_mut() {
                    *bits |= SYN_ENDED;
                }
                *slot = syn;
            }
            (syn, _) => {
                if let Some(c) = syn.and_then(|s| s.clients6_entry()) {
                    self.clients6.release(c);
                }
                self.open_at_end.push(parked)
            }
        }
    }

    /// A segment or a new start of stream `id`, whose lone SYN the flow
    /// table retired with its wait open ([`SYN_ENDED`]): that life is
    /// concluded now as [`StallLedger::on_flow_ended`] would have (parked
    /// until the end if the capture end still decides it), and the slot
    /// becomes [`Slot::Ended`].
    fn reopen_ended_syn(&mut self, id: StreamId) {
        let Some(slot) = slot_index(id).and_then(|i| self.slots.get_mut(i)) else {
            return;
        };
        if !is_ended_syn(slot) {
            return;
        }
        let old = std::mem::take(slot);
        let st = syn_state(id, &old, &self.rollup, &self.clients6);
        if let (Some(syn), Some(client)) = (old.lone_syn(), old.lone_syn_client(&self.clients6)) {
            if st.is_some() {
                *slot = Slot::Ended {
                    client,
                    server: syn.server,
                };
            }
        }
        if let Some(c) = old.clients6_entry() {
            self.clients6.release(c);
        }
        let Some(st) = st else {
            return;
        };
        if let Some(parked) = self.conclude(st) {
            self.open_at_end.push(parked);
        }
    }

    /// Close what `st` still waits for, now if the end of the capture cannot
    /// change it; otherwise return it, ready to be parked until
    /// [`StallLedger::finish`] (its recent segments dropped).
    fn conclude(&mut self, mut st: StreamState) -> Option<StreamState> {
        let max = self.cfg.max_entries_per_stream;
        settle(&mut st, None, max);
        st.rto_check = None;
        let thr = threshold(&self.cfg, &st);
        let never = Mark {
            frame: FrameNo(u64::MAX),
            ts: Timestamp(i64::MAX),
        };
        let now = self.last.map(|end| open_entries(&st, end, thr));
        match now {
            // The capture going on cannot change these entries.
            Some(now) if now == open_entries(&st, never, thr) => {
                for e in now.into_iter().flatten() {
                    rollup::push(&mut st, e, max);
                }
                let id = st.id;
                let kept = self.rollup.stream(st, self.cfg.keep_streams);
                self.note_concluded(id, kept);
                None
            }
            _ => {
                park(&mut st);
                Some(st)
            }
        }
    }

    /// End of input: close the waits still open (SYNs unanswered, zero
    /// windows, retransmission ladders) at the last frame, and build the report.
    pub fn finish(mut self) -> LedgerReport {
        let max = self.cfg.max_entries_per_stream;
        let slots = std::mem::take(&mut self.slots);
        if let (Some(end), true) = (
            self.last,
            self.cfg.keep_streams.contains(StallCause::SynTimeout),
        ) {
            // A lone SYN that waited past the threshold is one ledger each
            // (a SYN scan's): room for them at once, not by doubling.
            let syns = slots
                .iter()
                .filter(|s| {
                    s.lone_syn().is_some_and(|syn| {
                        end.ts.0.saturating_sub(syn.ts.0) >= self.cfg.min_stall_ns
                    })
                })
                .count();
            self.rollup.reserve_streams(syns);
        }
        let mut states = std::mem::take(&mut self.open_at_end);
        for st in states.drain(..) {
            self.close_at_end(st);
        }
        for (i, slot) in slots.into_iter().enumerate() {
            let id = StreamId(i as u64);
            let mut st = match slot {
                Slot::Full(st) => *st,
                s @ (Slot::Syn { .. } | Slot::Syn6 { .. }) => {
                    match syn_state(id, &s, &self.rollup, &self.clients6) {
                        // Parked by `on_flow_ended`: as `open_at_end` above.
                        Some(mut st) if is_ended_syn(&s) => {
                            settle(&mut st, None, max);
                            st.rto_check = None;
                            park(&mut st);
                            self.close_at_end(st);
                            continue;
                        }
                        Some(st) => st,
                        None => continue,
                    }
                }
                _ => continue,
            };
            settle(&mut st, None, max);
            self.close_at_end(st);
        }
        self.rollup.report(self.cfg.min_stall_ns)
    }

    /// Close `st`'s open waits at the capture's last frame and roll it up.
    fn close_at_end(&mut self, mut st: StreamState) {
        if let Some(end) = self.last {
            let thr = threshold(&self.cfg, &st);
            for e in open_entries(&st, end, thr).into_iter().flatten() {
                rollup::push(&mut st, e, self.cfg.max_entries_per_stream);
            }
        }
        self.rollup.stream(st, self.cfg.keep_streams);
    }
}

/// Close the wait `st`'s last segment left pending, classified by `seg`
/// (the segment that ended it) or, without one, as the end of the stream's
/// segments; its entry goes to the stream's output (at most `max` kept).
fn settle(st: &mut StreamState, seg: Option<&SegmentEvent>, max: usize) {
    if let Some(p) = st.pending.take() {
        if let Some((dir, cause, evd)) = resolve(st, &p, seg) {
            let e = entry(st, dir, cause, (p.start, p.end), evd);
            rollup::push(st, e, max);
        }
    }
}

/// What a stream parked until the capture's end drops: its recent segments
/// (the end's classification does not read them).
fn park(st: &mut StreamState) {
    for s in st.sides.iter_mut() {
        s.recent = VecDeque::new();
    }
}

/// The compact slot of `seg` when it is the first segment of a stream
/// announced with `client` and service `server`, and a plain SYN (see
/// [`Slot::Syn`]); `None` otherwise.
fn compact_syn(
    seg: &SegmentEvent,
    client: Endpoint,
    server: u32,
    c6: &mut Clients6,
) -> Option<Slot> {
    let f = seg.flags;
    let plain = f.syn() && !f.ack() && !f.rst() && !f.fin();
    let window_known = match seg.window_bytes {
        None => false,
        Some(w) if w == u64::from(seg.window_raw) => true,
        Some(_) => return None,
    };
    if !plain
        || seg.dir != Direction::ClientToServer
        || seg.payload_len != 0
        || seg.rel_seq != 0
        || state::is_probe(seg)
    {
        return None;
    }
    let syn = LoneSyn {
        ts: seg.ts,
        frame: u32::try_from(seg.frame.get()).ok()?,
        server,
        mss: seg.mss.unwrap_or(0),
        window_raw: seg.window_raw,
        bits: (u8::from(seg.mss.is_some()) * SYN_HAS_MSS)
            | (u8::from(window_known) * SYN_WINDOW_KNOWN),
    };
    Some(match client.addr {
        std::net::IpAddr::V4(a) => Slot::Syn {
            syn,
            addr: a.octets(),
            port: client.port,
        },
        std::net::IpAddr::V6(_) => Slot::Syn6 {
            syn,
            client: c6.add(client)?,
        },
    })
}

/// The full state of stream `id` held in a [`Slot::Syn`] or
/// [`Slot::Syn6`] (`None` for another slot).
fn syn_state(id: StreamId, slot: &Slot, rollup: &Rollup, c6: &Clients6) -> Option<StreamState> {
    let LoneSyn {
        ts,
        frame,
        server,
        mss,
        window_raw,
        bits,
    } = slot.lone_syn()?;
    let client = slot.lone_syn_client(c6)?;
    let server = rollup.server(server)?;
    let mss = (bits & SYN_HAS_MSS != 0).then_some(mss);
    let window = (bits & SYN_WINDOW_KNOWN != 0).then_some(u64::from(window_raw));
    Some(StreamState::after_syn(
        id,
        (client, server),
        Mark {
            frame: FrameNo(u64::from(frame)),
            ts,
        },
        mss,
        window,
    ))
}

/// Fold one segment of a live stream into its state: close (and classify)
/// the waits it ends, apply it, start the next waits. True when the stream
/// is done (reset, or both FINs acknowledged, nothing left to decide).
fn segment(cfg: &LedgerConfig, st: &mut StreamState, seg: &SegmentEvent) -> bool {
    let max = cfg.max_entries_per_stream;
    settle(st, Some(seg), max);
    if let Some(c) = st.rto_check.take() {
        check_crossed_rto(st, c, seg);
    }
    let thr = threshold(cfg, st);
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
            .all(|s| s.fin_sent && s.outstanding() == 0 && s.acked.get().is_some());
    done && st.pending.is_none()
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
            rollup::push(st, e, max);
        }
        Decision::Entry(dir, cause, evd) => {
            if seg.dir == d && matches!(evd.timer, Some(TimerKind::Rto) | Some(TimerKind::Tlp)) {
                let s = st.sides[d.index()].lad_mut();
                if evd.timer == Some(TimerKind::Rto) {
                    s.rto_seq = Some(seg.rel_seq);
                    s.rto_step = evd.step.unwrap_or(1);
                    s.rto_prev_gap_ns = evd.observed_ms.map_or(0, |m| (m * 1e6) as i64);
                }
                s.episode = Some(cause);
                let idx = st.out.as_ref().map_or(0, |o| o.entries.len());
                let first = *s.episode_idx.get_or_insert(idx);
                if cause == StallCause::DataRto && evd.step == Some(1) && idx < max {
                    st.rto_check = Some(state::RtoCheck {
                        idx,
                        dir: d,
                        at: now,
                        nxt: st.sides[d.index()].nxt.get().unwrap_or(0),
                    });
                }
                if matches!(cause, StallCause::PathMtu | StallCause::MissingZeroWindow) {
                    relabel_episode(st.out_mut(), d, first, cause);
                }
            }
            let e = entry(st, dir, cause, (start, now), evd);
            rollup::push(st, e, max);
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
        && seg.rel_seq >= peer.nxt.get().unwrap_or(0)
        && seg.rel_ack.is_some_and(|a| a >= c.nxt);
    // Cut to a smaller path MTU: at least RFC 879's default 536-byte
    // segment (a short answer is just an answer) and 40 bytes under the MSS.
    let below_mss = seg.payload_len >= 536
        && peer
            .mss
            .is_some_and(|m| seg.payload_len + 40 <= u32::from(m));
    let frag = peer.lad().frag.is_some();
    if !(crossed && (below_mss || frag)) {
        return;
    }
    let Some(out) = st.out.as_deref_mut() else {
        return;
    };
    let Some(e) = out.entries.get_mut(c.idx) else {
        return;
    };
    if e.cause != StallCause::DataRto {
        return;
    }
    let dur = e.end_ns.saturating_sub(e.start_ns);
    let old = &mut out.by_cause[StallCause::DataRto.index()];
    old.0 = old.0.saturating_sub(1);
    old.1 = old.1.saturating_sub(dur);
    let new = &mut out.by_cause[StallCause::Probe0.index()];
    new.0 += 1;
    new.1 = new.1.saturating_add(dur);
    e.cause = StallCause::Probe0;
    e.evidence.trigger_frame = Some(seg.frame);
    e.evidence.segment_bytes = Some(seg.payload_len);
    e.evidence.rule = "re-sent by the RTO as the peer's answer, held as long by its probe0 timer and cut below its MSS (path MTU), crossed it";
    st.sides[c.dir.index()].lad_mut().episode = Some(StallCause::Probe0);
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
/// The entries when the capture ends at `end`, client → server first.
fn open_entries(st: &StreamState, end: Mark, thr: i64) -> [Option<StallEntry>; 2] {
    let mut out = [None, None];
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
            WaitKind::Outstanding => match side.lad().episode {
                Some(c) => (
                    c,
                    "retransmission ladder still open at capture end",
                    Some(
                        side.lad()
                            .rto_prev_gap_ns
                            .saturating_mul(2)
                            .max(TCP_RTO_MIN_NS),
                    ),
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
        out[d.index()] = Some(e);
    }
    out
}

#[cfg(test)]
mod size_tests {
    use super::{Clients6, Slot};
    use pcapsleuth_core::Endpoint;

    /// A SYN scan's streams are all slots: they must not grow silently.
    #[test]
    fn a_slot_is_32_bytes_and_an_ipv6_client_18() {
        assert_eq!(std::mem::size_of::<Slot>(), 32);
        assert_eq!(std::mem::size_of::<([u8; 16], u16)>(), 18);
    }

    /// IPv6 clients round-trip, IPv4 ones are refused, and a released
    /// entry is the next one reused.
    #[test]
    fn ipv6_clients_are_kept_and_released_entries_reused() {
        let ep = |s: &str, port| Endpoint {
            addr: s.parse().unwrap(),
            port,
        };
        let mut c = Clients6::default();
        assert_eq!(c.add(ep("192.0.2.1", 1)), None);
        let a = c.add(ep("2001:db8::1", 443)).unwrap();
        let b = c.add(ep("2001:db8::2", 80)).unwrap();
        assert_ne!(a, b);
        assert_eq!(c.get(b), Some(ep("2001:db8::2", 80)));
        c.release(a);
        let d = c.add(ep("2001:db8::3", 22)).unwrap();
        assert_eq!(d, a);
        assert_eq!(c.get(d), Some(ep("2001:db8::3", 22)));
        assert_eq!(c.get(b), Some(ep("2001:db8::2", 80)));
        assert_eq!(c.entries.len(), 2);
    }
}
