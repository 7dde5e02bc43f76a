//! The flow table: takes packets in frame order and drives, per `tcp.stream`,
//! the concerns in its submodules:
//! - `stream_ids`: Wireshark-exact `tcp.stream` ids and `base_seq` rules;
//! - `sightings.rs` (crate level): one packet seen twice (duplicate sightings);
//! - `state`: endpoint state updates (SND.UNA/SND.NXT, windows, handshake);
//! - `stalls`: silences with data outstanding;
//! - `icmp`: ICMP/ICMPv6 errors matched to the flow they quote;
//! - `stream`: the per-stream record and its summary.

mod compact;
mod icmp;
pub(crate) mod index;
mod lru;
mod retire;
mod stalls;
mod state;
mod stream;
mod stream_ids;

use crate::analysis::{SegmentInput, SegmentVerdict};
use crate::sightings::{DupSig, FirstSighting, SightKey, SweepQueue};
use crate::{FlowEvent, FlowSummary, PacketFingerprint, SegmentEvent, Sighting};
use compact::{First, Retired};
use index::ConvIndex;
use pcapsleuth_core::{
    Direction, Endpoint, FlowKey, FrameNo, InterfaceId, SeqNum, StreamId, Timestamp,
};
use pcapsleuth_decode::{Decoded, IpHeader, TcpSegment, Transport};
use stream::Stream;

/// Where and when a packet was captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketMeta {
    /// Wireshark frame number.
    pub frame: FrameNo,
    /// Timestamp, ns since the Unix epoch.
    pub ts: Timestamp,
    /// Capture interface.
    pub interface: InterfaceId,
}

/// What the flow table decided about one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacketFlowInfo {
    /// `tcp.stream` of the packet (for ICMP errors: of the quoted TCP flow, as Wireshark shows it).
    pub stream: Option<StreamId>,
    /// Direction within that stream.
    pub dir: Option<Direction>,
    /// `udp.stream` of the packet (innermost UDP header; for ICMP errors: of
    /// the quoted UDP header, as Wireshark shows it). See [`crate::udp`].
    pub udp_stream: Option<StreamId>,
    /// Direction within that UDP conversation.
    pub udp_dir: Option<Direction>,
    /// `udp.stream` of the outer UDP header of a UDP tunnel
    /// ([`pcapsleuth_decode::Decoded::outer_udp`]): Wireshark numbers it
    /// before the inner headers and prints it first (`udp.stream` "outer,inner").
    pub outer_udp_stream: Option<StreamId>,
}

/// Limits and thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowConfig {
    /// Most unacknowledged segments remembered per endpoint.
    pub max_unacked_segments: usize,
    /// Most duplicate sightings listed per flow.
    pub max_sightings: usize,
    /// Shortest silence reported as a stall, ns.
    pub stall_threshold_ns: i64,
    /// Window within which two identical packets are one packet seen twice, ns.
    pub duplicate_window_ns: i64,
    /// Most live `tcp.stream`s held at once; beyond it the least recently
    /// active one is retired ([`crate::FlowEndReason::Evicted`]) and the
    /// report says how many were. `usize::MAX`: no cap.
    pub max_flows: usize,
    /// Capture time a closed stream (RST, or both FINs acknowledged) stays
    /// live before it ends ([`crate::FlowEnded`] with
    /// [`crate::FlowEndReason::Closed`]: consumers conclude it and drop their
    /// state), ns. Default 5 s: Zeek's `tcp_close_delay` and
    /// `tcp_reset_delay`, after which Zeek flushes a closed connection. A
    /// packet after it revives the stream for consumers (fresh consumer
    /// state, no second `FlowStarted`); the table's own state is still exact
    /// until [`FlowConfig::closed_keep_ns`].
    pub closed_quiet_ns: i64,
    /// Capture time since its last packet that the table keeps an ended
    /// closed stream's full state, ns, so a stray packet (a FIN or data
    /// retransmission, a late ACK or RST) gets the same `tcp.analysis`
    /// flags, sequence bookkeeping and duplicate sightings as Wireshark gives
    /// it; then only the summary and the tombstone are kept, and a later
    /// packet restarts the table's state too. Default 120 s: Linux
    /// `TCP_RTO_MAX`, the longest a peer's retransmission can trail the
    /// close (and twice Linux's `TCP_TIMEWAIT_LEN`, 60 s, during which the
    /// 4-tuple is not reused). At or below `closed_quiet_ns`: the state goes
    /// when the stream ends. Streams kept this way count against
    /// [`FlowConfig::max_flows`] and are the first to go at the cap.
    pub closed_keep_ns: i64,
    /// Capture time without a packet after which an open stream is retired,
    /// ns. Default 1 h: far above Linux `TCP_RTO_MAX` (120 s), so no pending
    /// RTO/probe0 timer is cut short, and below the first keep-alive probe
    /// (`tcp_keepalive_time`, 7,200 s). Real captures have open connections
    /// idle for 10 minutes (a Kafka consumer in `../shared/captures`).
    pub idle_timeout_ns: i64,
}

impl Default for FlowConfig {
    fn default() -> Self {
        FlowConfig {
            max_unacked_segments: 4096,
            max_sightings: 1024,
            stall_threshold_ns: 150_000_000,
            duplicate_window_ns: 10_000_000,
            max_flows: 1_000_000,
            closed_quiet_ns: 5_000_000_000,
            closed_keep_ns: 120_000_000_000,
            idle_timeout_ns: 3_600_000_000_000,
        }
    }
}

/// Counters of the flow table's stream lifecycle, for the report
/// ([`FlowTable::stats`]). A stream is *live* from its first packet until it
/// is retired ([`crate::FlowEnded`]); a late packet of a retired stream
/// revives it (same `tcp.stream`, live again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowTableStats {
    /// Live streams now.
    pub live: u64,
    /// Most live streams at any time.
    pub peak_live: u64,
    /// Streams retired closed and quiet ([`crate::FlowEndReason::Closed`]).
    pub retired_closed: u64,
    /// Streams retired idle ([`crate::FlowEndReason::Idle`]).
    pub retired_idle: u64,
    /// Streams evicted because [`FlowConfig::max_flows`] live streams were
    /// held ([`crate::FlowEndReason::Evicted`]); non-zero means the cap was hit.
    pub evicted: u64,
    /// Retired streams revived by a late packet.
    pub revived: u64,
}

/// One `tcp.stream` in the table, in one of three forms (`compact.rs`).
#[derive(Debug)]
enum Slot {
    /// Full state (live, revived, or ended and kept: `Stream::ended`).
    Full(Box<Stream>),
    /// At most one packet seen (live or retired): replayed on demand.
    First(First),
    /// Retired: summary facts and tombstone.
    Retired(Box<Retired>),
}

impl Slot {
    fn ends(&self) -> (Endpoint, Endpoint) {
        match self {
            Slot::Full(s) => (s.client, s.server),
            Slot::First(f) => f.ends(),
            Slot::Retired(r) => (r.client, r.server),
        }
    }

    /// Whether this record belongs to the address/port pair `key`.
    fn holds(&self, key: &FlowKey) -> bool {
        let (c, s) = self.ends();
        (c == key.lo && s == key.hi) || (c == key.hi && s == key.lo)
    }

    fn dir_of(&self, src: Endpoint) -> Direction {
        if src == self.ends().0 {
            Direction::ClientToServer
        } else {
            Direction::ServerToClient
        }
    }

    /// Wireshark's `base_seq` per direction.
    fn ws_base(&self) -> [Option<SeqNum>; 2] {
        match self {
            Slot::Full(s) => s.ws_base,
            Slot::First(f) => f.ws_base(),
            Slot::Retired(r) => r.ws_base,
        }
    }

    /// Live (not retired, not ended).
    fn live(&self) -> bool {
        match self {
            Slot::Full(s) => !s.ended,
            Slot::First(f) => !f.retired(),
            Slot::Retired(_) => false,
        }
    }

    fn full_mut(&mut self) -> Option<&mut Stream> {
        match self {
            Slot::Full(s) => Some(s),
            _ => None,
        }
    }
}

/// All TCP flows of one capture.
#[derive(Debug, Default)]
pub struct FlowTable {
    config: FlowConfig,
    /// Latest stream (index into `slots`) per unordered address/port pair.
    index: ConvIndex,
    /// The last index lookup, `(key, stream index)`: consecutive packets
    /// mostly belong to one conversation, so this skips the lookup.
    /// Always equal to the index's entry for `key` (`new_stream` refreshes it).
    last_conv: Option<(FlowKey, usize)>,
    /// Every `tcp.stream`, indexed by id.
    slots: Vec<Slot>,
    /// Live streams by last activity (retirement).
    lru: lru::Lru,
    stats: FlowTableStats,
    /// Ended streams whose full state is still kept (the ended list).
    ended_kept: u64,
    /// Events of replayed packets (`compact::replay`), discarded.
    scratch: Vec<FlowEvent>,
    /// A stream record given back once its stream was compacted
    /// ([`Slot::First`]) or its replay used: the next stream made takes its
    /// buffers ([`Stream::boxed`]).
    spare: Option<Box<Stream>>,
    last_frame: FrameNo,
    last_ts: Option<Timestamp>,
    finished: bool,
    /// Finished streams whose sighting tables still hold pending entries.
    sweep: SweepQueue,
    /// UDP conversations (`udp.stream`).
    udp: crate::udp::UdpTable,
}

/// Match a segment against the stream's first sightings (`sightings.rs`):
/// one packet seen twice has the same fingerprint within the window, at
/// another place or with the same non-zero IP ID, in either time direction.
/// Returns the first sighting it duplicates.
fn observe_sighting(
    st: &mut Stream,
    cfg: &FlowConfig,
    sight: SightKey,
    dir: Direction,
    meta: &PacketMeta,
    fp: PacketFingerprint,
) -> Option<FirstSighting> {
    let sig = DupSig { dir, fp };
    st.dups
        .observe(sig, sight, meta.frame, meta.ts, cfg.duplicate_window_ns)
}

/// Relative sequence and acknowledgement numbers of a segment travelling in
/// `dir`; a later sighting only peeks (it must not move the bases).
fn relative_numbers(
    st: &mut Stream,
    dir: Direction,
    seg: &TcpSegment<'_>,
    sighting: bool,
) -> (i64, Option<i64>) {
    let d = dir.index();
    let r = dir.reverse().index();
    if sighting {
        (
            st.sides[d].peek(seg.seq).unwrap_or(0),
            if seg.flags.ack() {
                st.sides[r].peek(seg.ack)
            } else {
                None
            },
        )
    } else {
        (
            st.sides[d].rel(seg.seq).unwrap_or(0),
            if seg.flags.ack() {
                st.sides[r].rel(seg.ack)
            } else {
                None
            },
        )
    }
}

/// Update the stream's summary counters with one segment.
fn count_segment(
    st: &mut Stream,
    cfg: &FlowConfig,
    dir: Direction,
    meta: &PacketMeta,
    (ip, seg): (&IpHeader, &TcpSegment<'_>),
    dup: Option<&FirstSighting>,
    (verdict, own_rtt): (&SegmentVerdict, Option<i64>),
) {
    let d = dir.index();
    let acc = &mut st.acc;
    acc.packets[d] += 1;
    acc.bytes += u64::from(ip.total_len);
    acc.last_frame = meta.frame;
    if meta.ts > acc.last_ts {
        acc.last_ts = meta.ts;
    }
    if let Some(first) = dup {
        let a = Sighting {
            frame: first.frame,
            interface: first.interface,
            ts_ns: first.ts.0,
        };
        let b = Sighting {
            frame: meta.frame,
            interface: meta.interface,
            ts_ns: meta.ts.0,
        };
        acc.add_sighting(a, b, cfg.max_sightings);
    } else {
        acc.payload[d] += u64::from(seg.payload_len);
        acc.count_retrans(&verdict.analysis);
        if let Some(rtt) = verdict.ack_rtt_ns.or(own_rtt) {
            acc.rtt.add(rtt);
        }
    }
    st.last_frame = meta.frame;
    if st.last_ts.is_none_or(|t| meta.ts > t) {
        st.last_ts = Some(meta.ts);
    }
}

/// The [`SegmentEvent`] of a segment, after the stream state was updated.
fn segment_event(
    st: &Stream,
    dir: Direction,
    meta: &PacketMeta,
    (ip, seg): (&IpHeader, &TcpSegment<'_>),
    (rel_seq, rel_ack): (i64, Option<i64>),
    verdict: &SegmentVerdict,
    (duplicate_of, fingerprint): (Option<FrameNo>, PacketFingerprint),
) -> SegmentEvent {
    let d = dir.index();
    let side = &st.sides[d];
    let flags = seg.flags;
    SegmentEvent {
        stream: st.id,
        dir,
        frame: meta.frame,
        ts: meta.ts,
        interface: meta.interface,
        flags,
        seq: seg.seq,
        ack: seg.ack,
        rel_seq,
        rel_ack,
        payload_len: seg.payload_len,
        ip_len: ip.total_len,
        ip_id: ip.ip_id,
        window_raw: seg.window,
        window_bytes: st.window_bytes(d, flags.syn(), seg.window),
        mss: seg.options.mss,
        window_scale: seg.options.window_scale,
        sack_blocks: seg.options.sack.len,
        wireshark: verdict.wireshark,
        analysis: verdict.analysis,
        duplicate_of,
        snd_una: side.snd_una,
        snd_nxt: side.snd_nxt,
        since_first_tx_ns: verdict.since_first_tx_ns,
        ack_rtt_ns: verdict.ack_rtt_ns,
        bytes_in_flight: verdict.bytes_in_flight,
        fingerprint,
    }
}

/// One TCP segment on its way through a stream record.
struct SegIn<'a> {
    meta: &'a PacketMeta,
    sight: SightKey,
    dir: Direction,
    ip: &'a IpHeader,
    seg: &'a TcpSegment<'a>,
    /// A bare SYN with a new ISN opened this stream on reused ports.
    reused: bool,
}

/// Apply one TCP segment (after `stream_ids::note_bases`) to its stream:
/// duplicate sightings, stalls, endpoint state, the `tcp.analysis`
/// verdict, summary counters; emits its events. Returns the number of
/// sightings to queue for a later sweep, when the stream just closed with
/// pending ones.
fn process_segment(
    st: &mut Stream,
    cfg: &FlowConfig,
    s: &SegIn<'_>,
    out: &mut Vec<FlowEvent>,
) -> Option<usize> {
    let (meta, dir, ip, seg) = (s.meta, s.dir, s.ip, s.seg);
    let fingerprint = PacketFingerprint::tcp(ip, seg);
    let dup = observe_sighting(st, cfg, s.sight, dir, meta, fingerprint);
    let duplicate_of = dup.map(|e| e.frame);
    let rel = relative_numbers(st, dir, seg, dup.is_some());

    let mut own_rtt = None;
    let mut window_event = None;
    if dup.is_none() {
        // Stalls end with this segment.
        stalls::check_stall(st, cfg, dir, meta, seg, rel, out);
        (own_rtt, window_event) = state::update_state(st, cfg, dir, meta, ip, seg, rel);
    }

    let mut verdict = st.analyzer.on_segment(&SegmentInput {
        frame: meta.frame,
        ts: meta.ts,
        dir,
        seg,
        duplicate_of,
        new_stream_on_syn: s.reused,
    });
    if st.closed {
        // After the verdict, so the closing ACK still gets its RTT sample.
        st.analyzer.compact();
    }
    // A later sighting copies its first sighting's verdict (kept with the
    // fingerprint: the analyzer's own ring is cut when a stream finishes).
    if let Some(e) = dup {
        verdict.analysis = e.analysis();
        verdict.bytes_in_flight = e.bytes_in_flight();
    } else {
        st.dups
            .set_verdict(meta.frame, verdict.analysis, verdict.bytes_in_flight);
    }
    let sweep_wanted = st.dups.take_sweep_wanted();

    count_segment(
        st,
        cfg,
        dir,
        meta,
        (ip, seg),
        dup.as_ref(),
        (&verdict, own_rtt),
    );
    out.push(FlowEvent::Segment(segment_event(
        st,
        dir,
        meta,
        (ip, seg),
        rel,
        &verdict,
        (duplicate_of, fingerprint),
    )));
    if let Some(w) = window_event {
        out.push(FlowEvent::WindowChange(w));
    }
    sweep_wanted
}

impl FlowTable {
    /// An empty table.
    pub fn new(config: FlowConfig) -> Self {
        FlowTable {
            config,
            ..FlowTable::default()
        }
    }

    /// Process one packet (in frame order); append resulting events to `out`.
    ///
    /// Handles TCP segments (innermost header of tunnelled packets) and
    /// ICMP/ICMPv6 errors that quote a packet (one [`FlowEvent::IcmpError`]
    /// each, whatever the quoted protocol; a `tcp.stream` only for quoted
    /// TCP); UDP datagrams, a UDP tunnel's outer header and the UDP header of
    /// an unreassembled first fragment get their `udp.stream` ([`crate::udp`]);
    /// everything else returns an empty [`PacketFlowInfo`]. Never panics.
    pub fn on_packet(
        &mut self,
        meta: &PacketMeta,
        pkt: &Decoded<'_>,
        out: &mut Vec<FlowEvent>,
    ) -> PacketFlowInfo {
        self.last_frame = meta.frame;
        if self.last_ts.is_none_or(|t| meta.ts > t) {
            self.last_ts = Some(meta.ts);
        }
        self.retire_due(out);
        while let Some(i) = self.sweep.pop_due(self.last_ts.unwrap_or(meta.ts)) {
            if let Some(s) = self.slots.get_mut(i).and_then(Slot::full_mut) {
                s.dups.sweep();
            }
        }
        // A UDP tunnel's outer conversation is numbered before the inner headers.
        let outer_udp_stream = crate::udp::on_outer(&mut self.udp, pkt);
        let info = self.on_transport(meta, pkt, out);
        PacketFlowInfo {
            outer_udp_stream,
            ..info
        }
    }

    /// [`FlowTable::on_packet`] for the innermost transport.
    fn on_transport(
        &mut self,
        meta: &PacketMeta,
        pkt: &Decoded<'_>,
        out: &mut Vec<FlowEvent>,
    ) -> PacketFlowInfo {
        let Some(ip) = pkt.ip else {
            return PacketFlowInfo::default();
        };
        match &pkt.transport {
            Transport::Tcp(seg) => {
                let key = SightKey {
                    interface: meta.interface,
                    vlans: pkt.link.vlans,
                    vlan_count: pkt.link.vlan_count,
                    sll_ifindex: pkt.link.sll_ifindex,
                    sll_pkttype: pkt.link.sll_pkttype,
                };
                self.on_tcp(meta, key, &ip, seg, out)
            }
            Transport::Udp(d) => crate::udp::on_datagram(&mut self.udp, meta, &ip, d, out),
            Transport::Icmp(m) => match m.quoted {
                Some(q) => {
                    let udp = crate::udp::on_quote(&mut self.udp, &q);
                    PacketFlowInfo {
                        udp_stream: udp.udp_stream,
                        udp_dir: udp.udp_dir,
                        ..self.on_icmp(meta, &ip, m, &q, udp, out)
                    }
                }
                None => PacketFlowInfo::default(),
            },
            Transport::None => crate::udp::on_first_fragment(&mut self.udp, pkt),
            _ => PacketFlowInfo::default(),
        }
    }

    fn on_tcp(
        &mut self,
        meta: &PacketMeta,
        sight: SightKey,
        ip: &IpHeader,
        seg: &TcpSegment<'_>,
        out: &mut Vec<FlowEvent>,
    ) -> PacketFlowInfo {
        let src = Endpoint {
            addr: ip.src,
            port: seg.src_port,
        };
        let dst = Endpoint {
            addr: ip.dst,
            port: seg.dst_port,
        };
        let (idx, dir, reused) = self.lookup(src, dst, seg.flags, seg.seq, meta, out);
        self.ensure_full(idx, meta, out);
        let cfg = self.config;
        let s = SegIn {
            meta,
            sight,
            dir,
            ip,
            seg,
            reused,
        };
        let Some(st) = self.slots.get_mut(idx).and_then(Slot::full_mut) else {
            return PacketFlowInfo::default();
        };
        stream_ids::note_bases(st, dir, ip, seg);
        let sweep_wanted = process_segment(st, &cfg, &s, out);
        let list = if st.closed { lru::CLOSED } else { lru::OPEN };
        let id = st.id;
        if let Some(rec) = First::of_packet(st, &s) {
            if let Slot::Full(old) = std::mem::replace(&mut self.slots[idx], Slot::First(rec)) {
                self.spare = Some(old);
            }
        }
        if let Some(n) = sweep_wanted {
            self.sweep.push(idx, meta.ts, n);
        }
        self.lru.touch(idx, list, self.clock());
        PacketFlowInfo {
            stream: Some(id),
            dir: Some(dir),
            ..PacketFlowInfo::default()
        }
    }

    /// The capture clock: the largest timestamp seen so far, ns.
    fn clock(&self) -> i64 {
        self.last_ts.map_or(0, |t| t.0)
    }

    /// End of capture: close open stalls (with [`crate::StallEnd::CaptureEnd`]).
    /// A stall is open when a direction still had unacknowledged data (or a
    /// SYN, or a zero window) and the stream was silent for at least the stall
    /// threshold until the last timestamp of the capture; this includes
    /// streams retired idle or evicted with something pending (their silence
    /// lasted until the capture end). Emits no [`FlowEvent::FlowEnded`].
    /// Calling it twice emits nothing more.
    pub fn finish(&mut self, out: &mut Vec<FlowEvent>) {
        self.finish_into(out, |_| {});
    }

    /// As [`FlowTable::finish`], but hands the events to `deliver` in order,
    /// in slices of about `chunk` events (at least one each), instead of
    /// collecting them all: the end of a capture with millions of open
    /// streams needs no buffer of one event per stream.
    pub fn finish_chunked(&mut self, chunk: usize, mut deliver: impl FnMut(&[FlowEvent])) {
        let mut buf = Vec::new();
        self.finish_into(&mut buf, |b| {
            if b.len() >= chunk {
                deliver(b);
                b.clear();
            }
        });
        if !buf.is_empty() {
            deliver(&buf);
        }
    }

    /// The body of [`FlowTable::finish`]: events go to `out`, and `flush`
    /// sees `out` after every stream.
    fn finish_into(
        &mut self,
        out: &mut Vec<FlowEvent>,
        mut flush: impl FnMut(&mut Vec<FlowEvent>),
    ) {
        if self.finished {
            return;
        }
        self.finished = true;
        let Some(end_ts) = self.last_ts else { return };
        let cfg = self.config;
        let end_frame = self.last_frame;
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut spare = self.spare.take();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            match slot {
                Slot::Full(st) => stalls::finish_stream(st, &cfg, end_frame, end_ts, out),
                // Retired or not: a one-packet stream's state is exact.
                Slot::First(f) if !f.replaced() => {
                    if end_ts.0.saturating_sub(f.last().1 .0) >= cfg.stall_threshold_ns {
                        let id = StreamId(i as u64);
                        let mut st = compact::replay(f, id, &cfg, &mut scratch, &mut spare);
                        stalls::finish_stream(&mut st, &cfg, end_frame, end_ts, out);
                        spare = Some(st);
                    }
                }
                Slot::Retired(r) => {
                    let id = StreamId(i as u64);
                    let end = (end_frame, end_ts);
                    out.extend(
                        r.end_stalls(id, end, cfg.stall_threshold_ns)
                            .map(FlowEvent::Stall),
                    );
                }
                Slot::First(_) => {}
            }
            flush(out);
        }
        self.scratch = scratch;
        self.spare = spare;
    }

    /// Approximate memory held by the table, bytes: the inline size of every
    /// stream record plus the capacity of every heap buffer it owns, plus the
    /// conversation index, the slot vector, the activity lists (by
    /// capacity) and the spare record kept for the next stream
    /// (`Stream::boxed`). Deterministic (no allocator or RSS noise), for
    /// memory-bound tests; excludes allocator overhead and the UDP table.
    pub fn approx_heap_bytes(&self) -> usize {
        let records: usize = self
            .slots
            .iter()
            .map(|s| match s {
                Slot::Full(st) => std::mem::size_of::<Stream>() + st.heap_bytes(),
                Slot::First(f) => f.record_bytes(),
                Slot::Retired(r) => std::mem::size_of::<Retired>() + r.heap_bytes(),
            })
            .sum();
        self.index.heap_bytes()
            + self.slots.capacity() * std::mem::size_of::<Slot>()
            + self.lru.heap_bytes()
            + self.sweep.heap_bytes()
            + records
            + self
                .spare
                .as_ref()
                .map_or(0, |st| std::mem::size_of::<Stream>() + st.heap_bytes())
    }

    /// Number of streams assigned so far (live and retired).
    pub fn stream_count(&self) -> u64 {
        self.slots.len() as u64
    }

    /// Lifecycle counters: live, peak live, retired by reason, evicted.
    pub fn stats(&self) -> FlowTableStats {
        self.stats
    }

    /// The UDP conversations (`udp.stream`) seen so far; `udp().len()` is
    /// the number of UDP streams.
    pub fn udp(&self) -> &crate::udp::UdpTable {
        &self.udp
    }

    /// The streams whose unacknowledged-segment list hit its cap
    /// ([`FlowConfig::max_unacked_segments`]) on either side, ascending
    /// (the [`FlowSummary::unacked_capped`] rows, without building summaries).
    pub fn unacked_capped_streams(&self) -> Vec<StreamId> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, slot)| match slot {
                Slot::Full(s) => s.unacked_capped(),
                Slot::First(_) => false,
                Slot::Retired(r) => r.unacked_capped(),
            })
            .map(|(i, _)| StreamId(i as u64))
            .collect()
    }

    /// Per-flow summaries of every stream, live and retired, in `tcp.stream`
    /// order. After [`FlowTable::finish`] they include the stalls the
    /// capture end closed.
    pub fn summaries(&self) -> Vec<FlowSummary> {
        let cfg = &self.config;
        let cap = cfg.max_sightings;
        let end = self
            .last_ts
            .filter(|_| self.finished)
            .map(|t| (self.last_frame, t));
        let mut scratch = Vec::new();
        let mut spare = None;
        self.slots
            .iter()
            .enumerate()
            .map(|(i, slot)| {
                let id = StreamId(i as u64);
                match slot {
                    Slot::Full(st) => st.summary(cap),
                    Slot::First(f) => {
                        let mut st = compact::replay(f, id, cfg, &mut scratch, &mut spare);
                        if let Some((end_frame, end_ts)) = end {
                            stalls::finish_stream(&mut st, cfg, end_frame, end_ts, &mut scratch);
                            scratch.clear();
                        }
                        let row = st.summary(cap);
                        spare = Some(st);
                        row
                    }
                    Slot::Retired(r) => r.summary(id, end, cfg.stall_threshold_ns),
                }
            })
            .collect()
    }
}
