//! Capture quality before diagnosis: the [`QualityTracker`] the pipeline
//! feeds with every frame and flow event, and the conversion of its
//! [`CaptureQuality`] to the report's `capture_quality`.
//!
//! What it measures (the types and verdict rules are in
//! [`pcapsleuth_detect::quality`]):
//! - **capture loss against network loss**, per TCP flow and direction: the
//!   highest sequence byte captured and the gaps below it (a segment starting
//!   past the highest byte, Wireshark's `tcp.analysis.lost_segment`). A gap
//!   that a later segment fills was lost before the capture point and
//!   retransmitted (network loss); bytes the peer acknowledges that no frame
//!   carried — a gap or bytes past the highest captured one, Wireshark's
//!   `tcp.analysis.ack_lost_segment` — reached the receiver, so the capture
//!   lost them. At most [`MAX_GAPS`] gaps per direction are tracked; a jump
//!   past what the peer's window allowed, or after a silence of the
//!   direction in the capture what 100 Gbit/s carries in that time
//!   (`DirState::sender_jump_bound`), and anyway past [`MAX_GAP_BYTES`], is
//!   taken for a new sequence space, not a gap;
//! - **duplicates**: the flow table's duplicate sightings, split by whether the
//!   first sighting was at the same place (interface, `-i any` interface index
//!   and direction, link-layer source address);
//! - **snaplen**: frames with `caplen < len` whose decoding stopped for lack of
//!   bytes (headers hidden) or did not (payload only);
//! - **one-sided flows**: TCP flows captured in one direction only, whose
//!   captured side acknowledges bytes of the other (its ACK number moves, or
//!   it ACKs after its SYN): the other direction existed and was not captured.
//!   A SYN that is never answered is not one-sided;
//! - **timestamps going backwards**, per interface in file order, and across
//!   interfaces (a frame older than the previous frame of the file, captured
//!   on another interface);
//! - **interface drop counters** from pcapng Interface Statistics Blocks
//!   ([`pcapsleuth_ingest::InterfaceStats`]).

use pcapsleuth_core::consts::ip_protocol;
use pcapsleuth_core::opt::OptTimestamp;
use pcapsleuth_core::{Direction, FrameNo, InterfaceId, StreamId, Timestamp};
use pcapsleuth_decode::{Decoded, IcmpKind, StopReason, Transport};
use pcapsleuth_detect::quality::{
    CaptureQuality, FlowQuality, InterfaceQuality, QualityReason, QualityVerdict,
    BACKWARDS_TOLERANCE_NS,
};
use pcapsleuth_flow::{FlowEvent, PacketFlowInfo, SegmentEvent};
use pcapsleuth_ingest::{Frame, InterfaceInfo};
use pcapsleuth_report::{
    CaptureQualityReport, FlowQualityReport, InterfaceQualityReport, QualityReasonReport,
    QualityVerdictReport,
};
use std::collections::VecDeque;

/// Sequence gaps tracked per flow direction; further gaps are not tracked
/// (their bytes, if acknowledged, are then not counted as capture loss).
pub const MAX_GAPS: usize = 16;

/// A sequence jump larger than this (1 GiB, the largest RFC 7323 window) is
/// not a gap but another sequence space (port reuse, a corrupt segment).
pub const MAX_GAP_BYTES: i64 = 1 << 30;

/// An ICMP/ICMPv6 error, which quotes the packet it is about.
fn is_icmp_error(kind: IcmpKind) -> bool {
    matches!(
        kind,
        IcmpKind::FragNeeded
            | IcmpKind::PacketTooBig
            | IcmpKind::DestUnreachable
            | IcmpKind::TimeExceeded
    )
}

/// Frames remembered to find the interface of a duplicate's first sighting
/// (the flow table's duplicate window is milliseconds).
const RECENT_FRAMES: usize = 1 << 16;

/// Interface ids past this are not tracked (ids come from the file).
const MAX_INTERFACES: usize = 1 << 16;

/// One direction of a flow, as far as the capture shows it.
#[derive(Debug, Default)]
struct DirState {
    /// Segments (not duplicate sightings) captured in this direction.
    packets: u64,
    /// `max_end` is meaningful (a segment was seen).
    known: bool,
    /// Relative sequence number just past the highest byte seen (or
    /// acknowledged by the peer).
    max_end: i64,
    /// Sequence ranges `[start, end)` below `max_end` never captured.
    gaps: Vec<(i64, i64)>,
    /// Raw ACK number of the first ACK this direction sent.
    first_ack: Option<u32>,
    /// This direction's ACK number moved: it acknowledged the peer's bytes.
    ack_moved: bool,
    /// This direction sent a SYN.
    syn: bool,
    /// This direction sent an ACK after its SYN (so it saw a SYN/ACK).
    ack_after_syn: bool,
    /// The first segment seen was empty and not a SYN: it may have been a
    /// keep-alive (sequence number SND.NXT − 1, RFC 9293 §3.8.4), so an ACK
    /// one byte past it is no capture loss.
    maybe_keepalive: bool,
    /// Largest receive window this direction advertised, bytes (scaled when
    /// the scale is known, else the raw field times [`UNKNOWN_SCALE`]).
    max_window: u64,
    /// Capture time of this direction's latest segment; none before the
    /// first one (or when only a compacted SYN was seen).
    last_ts: OptTimestamp,
}

/// Multiplier for a raw window whose scale is unknown (handshake not
/// captured): 2^8, the Windows default shift (Linux uses 7; RFC 7323 §2.3
/// allows up to 14).
const UNKNOWN_SCALE: u64 = 1 << 8;

/// Smallest window bound: 65535 bytes, the largest unscaled window.
const MIN_WINDOW_BOUND: u64 = 65_535;

/// Fastest one TCP connection is taken to send while the capture saw none
/// of its segments, in bytes per 2 ns: 25, i.e. 12.5 bytes/ns = 100 Gbit/s
/// (a 100 GbE port). Bounds [`DirState::sender_jump_bound`].
const MAX_RATE_BYTES_PER_2NS: i64 = 25;

impl DirState {
    /// The most this direction could have had in flight unseen: the bytes
    /// its peer's receive window allowed (`peer_window`, see
    /// [`DirState::max_window`]), at least [`MIN_WINDOW_BOUND`]. A larger
    /// jump is not loss but another sequence space or a challenge ACK
    /// (RFC 5961 §4: an ACK answering a SYN in a stale connection).
    fn jump_bound(peer_window: u64) -> i64 {
        i64::try_from(peer_window.max(MIN_WINDOW_BOUND))
            .unwrap_or(MAX_GAP_BYTES)
            .min(MAX_GAP_BYTES)
    }

    /// The largest forward jump of this direction's sequence numbers at
    /// `now_ns` that is still a gap: [`DirState::jump_bound`], or what
    /// [`MAX_RATE_BYTES_PER_2NS`] carries in the time since this direction's
    /// previous captured segment, whichever is larger, at most
    /// [`MAX_GAP_BYTES`].
    ///
    /// The window bound alone holds only while the capture sees the peer's
    /// ACKs. When the capture itself stops seeing the flow (the kernel ring
    /// of `tcpdump` or `dumpcap` overflows: a slow writer, or a capture
    /// process that stops reading, as `fixtures/scripts/capture-loss.sh`
    /// does with SIGSTOP), the receiver keeps acknowledging and the window
    /// keeps sliding, so the sender's sequence
    /// numbers resume far past the window: 1,143,248 bytes after 95 ms with
    /// a 64 KB window at frame 1822 of `fixtures/captures/capture-loss.pcap`
    /// (the sender's tcpdump stopped for 240 ms), 750,032 bytes after 63 ms
    /// at frame 1821 of `capture-loss-server.pcap` (the receiver's, 200 ms).
    /// Segments of another sequence space within one flow (two capture
    /// points either side of a sequence-randomising firewall) come
    /// microseconds apart, so their jumps stay bounded by the window. Known
    /// limit: a flow silent for a second that goes on in a new sequence
    /// space without a captured SYN is taken for capture loss (up to
    /// [`MAX_GAP_BYTES`]) once the peer acknowledges the new space.
    fn sender_jump_bound(&self, peer_window: u64, now_ns: i64) -> i64 {
        let window = Self::jump_bound(peer_window);
        let Some(last) = self.last_ts.get() else {
            return window;
        };
        let by_rate = now_ns
            .saturating_sub(last.0)
            .max(0)
            .saturating_mul(MAX_RATE_BYTES_PER_2NS)
            / 2;
        window.max(by_rate.min(MAX_GAP_BYTES))
    }
}

/// Where a frame was captured, as far as the frame tells: the interface;
/// inside a Linux `-i any` capture (SLL/SLL2) the kernel interface index and
/// the packet type (in or out); and the link-layer source address (a routed
/// packet captured on both sides of the router changes it). Two sightings
/// of one packet at the same place are a doubled capture (a mirror port
/// copying both directions of a switch); at different places, several
/// capture points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Place {
    interface: InterfaceId,
    ifindex: Option<u32>,
    pkttype: Option<u8>,
    src_mac: Option<[u8; 6]>,
}

/// One TCP flow.
#[derive(Debug, Default)]
struct FlowState {
    /// Client → server, server → client.
    dirs: [DirState; 2],
    /// Its facts, allocated when one is not zero (most flows are clean);
    /// `stream` and `one_sided` are set by [`FlowState::conclude`].
    quality: Option<Box<FlowQuality>>,
}

/// The facts of a flow, allocated on first use.
fn quality_mut(q: &mut Option<Box<FlowQuality>>) -> &mut FlowQuality {
    q.get_or_insert_with(Box::default)
}

impl FlowState {
    /// The state after one plain SYN (see [`Slot::Syn`]) in direction
    /// index `d` advertising `window` bytes: what [`track_sender`] leaves.
    fn after_syn(d: usize, window: u64) -> FlowState {
        let mut f = FlowState::default();
        if let Some(me) = f.dirs.get_mut(d) {
            me.packets = 1;
            me.syn = true;
            me.known = true;
            me.max_end = 1;
            me.max_window = window;
        }
        f
    }

    /// The facts at the end of flow `stream`: `one_sided` decided from its
    /// directions.
    fn conclude(&self, stream: StreamId) -> FlowQuality {
        let [c, s] = &self.dirs;
        let mut q = self.quality.as_deref().copied().unwrap_or_default();
        q.stream = stream;
        q.one_sided = match (c.packets, s.packets) {
            (n, 0) if n > 0 && acknowledges_peer(c) => Some(Direction::ClientToServer),
            (0, n) if n > 0 && acknowledges_peer(s) => Some(Direction::ServerToClient),
            _ => None,
        };
        q
    }
}

/// Where the tracker keeps one TCP flow: 4 bytes, and a flow of one SYN
/// holds nothing else (a SYN scan's million streams cost 4 MB here).
///
/// A flow the flow table retires ([`FlowEvent::FlowEnded`]) keeps its
/// state: when the conversation comes back under the same `tcp.stream` (a
/// merged capture years apart, a SYN re-sent after a reset), its sequence
/// coverage and one-sidedness go on from what was seen, as if it had never
/// been retired (starting afresh calls its first ACKs capture loss and a
/// flow seen both ways one-sided: `reasm_crash_anon.pcapng`,
/// `real-traffic-merged-ethernet.pcap`).
///
/// Packed in a `u32` ([`FlowSlot::get`] unpacks it): 0 for no segment yet,
/// [`FlowSlot::SYN`] with the direction index in bit 16 and the raw window
/// in the low 16 bits ([`FlowSlot::UNSCALED`]: times [`UNKNOWN_SCALE`]), or
/// [`FlowSlot::FULL`] with an index into [`QualityTracker::states`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct FlowSlot(u32);

/// A [`FlowSlot`] unpacked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// No segment yet: clean.
    Empty,
    /// One plain SYN (no ACK, RST or FIN, no payload, relative sequence 0,
    /// not another sighting) in direction index `dir`, advertising `window`
    /// bytes ([`FlowState::after_syn`]).
    Syn { dir: usize, window: u64 },
    /// Any other flow: its index in [`QualityTracker::states`].
    Full(usize),
}

impl FlowSlot {
    const SYN: u32 = 1 << 17;
    const UNSCALED: u32 = 1 << 18;
    const FULL: u32 = 1 << 31;

    fn get(self) -> Slot {
        let v = self.0;
        if v & Self::FULL != 0 {
            Slot::Full((v & !Self::FULL) as usize)
        } else if v & Self::SYN != 0 {
            let raw = u64::from(v & 0xffff);
            Slot::Syn {
                dir: ((v >> 16) & 1) as usize,
                window: if v & Self::UNSCALED != 0 {
                    raw * UNKNOWN_SCALE
                } else {
                    raw
                },
            }
        } else {
            Slot::Empty
        }
    }

    /// A plain SYN in direction index `dir` advertising `raw_window` bytes
    /// (`unscaled`: times [`UNKNOWN_SCALE`]).
    fn syn(dir: usize, raw_window: u16, unscaled: bool) -> FlowSlot {
        FlowSlot(
            Self::SYN
                | (u32::from(dir == 1) << 16)
                | u32::from(raw_window)
                | if unscaled { Self::UNSCALED } else { 0 },
        )
    }

    /// The full state at index `i`, if the index fits (below 2^31).
    fn full(i: usize) -> Option<FlowSlot> {
        u32::try_from(i)
            .ok()
            .filter(|i| i & Self::FULL == 0)
            .map(|i| FlowSlot(i | Self::FULL))
    }
}

/// One interface.
#[derive(Debug, Clone, Copy, Default)]
struct IfaceState {
    frames: u64,
    last_ts: Option<Timestamp>,
    backwards: u64,
    max_back_ns: i64,
}

/// Gathers the capture-quality facts of one capture as the pipeline runs.
#[derive(Debug, Default)]
pub struct QualityTracker {
    /// Per `tcp.stream` (dense ids).
    flows: Vec<FlowSlot>,
    /// The full states [`FlowSlot`]s point to, in the order they were made
    /// (never removed: see [`FlowSlot`]).
    states: Vec<FlowState>,
    ifaces: Vec<IfaceState>,
    /// Previous frame of the file: interface and timestamp.
    prev: Option<(InterfaceId, Timestamp)>,
    /// (frame, capture place) of the last [`RECENT_FRAMES`] frames
    /// (48 bytes each).
    recent: VecDeque<(FrameNo, Place)>,
    /// Capture place of the frame being handled.
    current: Place,
    q: CaptureQuality,
}

fn dir_index(d: Direction) -> usize {
    match d {
        Direction::ClientToServer => 0,
        Direction::ServerToClient => 1,
    }
}

/// Remove `[start, end)` from `gaps`; returns the bytes removed. In place:
/// at most one gap is split, and at most [`MAX_GAPS`] are kept.
fn fill(gaps: &mut Vec<(i64, i64)>, start: i64, end: i64) -> u64 {
    if start >= end || gaps.is_empty() {
        return 0;
    }
    let mut removed = 0i64;
    let mut out = [(0i64, 0i64); MAX_GAPS + 1];
    let mut n = 0;
    let mut keep = |g: (i64, i64)| {
        if let Some(slot) = out.get_mut(n) {
            *slot = g;
            n += 1;
        }
    };
    for &(a, b) in gaps.iter() {
        let (lo, hi) = (a.max(start), b.min(end));
        if lo >= hi {
            keep((a, b));
            continue;
        }
        removed += hi - lo;
        if a < lo {
            keep((a, lo));
        }
        if hi < b {
            keep((hi, b));
        }
    }
    gaps.clear();
    gaps.extend(out.iter().take(n.min(MAX_GAPS)).copied());
    u64::try_from(removed).unwrap_or(0)
}

impl QualityTracker {
    /// A tracker with nothing seen.
    pub fn new() -> QualityTracker {
        QualityTracker::default()
    }

    /// One frame: its decoding, its flow verdict and the flow events the
    /// flow table emitted for it.
    pub fn on_frame(
        &mut self,
        frame: &Frame<'_>,
        decoded: &Decoded<'_>,
        info: &PacketFlowInfo,
        events: &[FlowEvent],
    ) {
        self.q.frames += 1;
        self.current = Place {
            interface: frame.interface,
            ifindex: decoded.link.sll_ifindex,
            pkttype: decoded.link.sll_pkttype,
            src_mac: decoded.link.src_mac,
        };
        self.note_time(frame.interface, frame.ts);
        if (frame.data.len() as u64) < u64::from(frame.orig_len) {
            let header = decoded
                .stop
                .is_some_and(|s| s.reason == StopReason::Truncated);
            if header {
                self.q.header_truncated_frames += 1;
            } else {
                self.q.payload_truncated_frames += 1;
                if let (Some(stream), Transport::Tcp(_)) = (info.stream, &decoded.transport) {
                    if let Some(f) = self.flow_mut(stream) {
                        quality_mut(&mut f.quality).payload_truncated_frames += 1;
                    }
                }
            }
        }
        self.note_unreadable_payload(frame, decoded);
        self.on_events(events);
        if self.recent.len() == RECENT_FRAMES {
            self.recent.pop_front();
        }
        self.recent.push_back((frame.number, self.current));
    }

    /// The flow events of one frame.
    fn on_events(&mut self, events: &[FlowEvent]) {
        for ev in events {
            match ev {
                FlowEvent::FlowStarted(s) => {
                    self.slot_mut(s.stream);
                }
                FlowEvent::Segment(s) => self.on_segment(s),
                // Kept: see [`FlowSlot`].
                FlowEvent::FlowEnded(_) => {}
                _ => {}
            }
        }
    }

    /// Per-interface and cross-interface timestamp order.
    fn note_time(&mut self, interface: InterfaceId, ts: Timestamp) {
        if let Some((prev_if, prev_ts)) = self.prev {
            if prev_if != interface && ts < prev_ts {
                self.q.backwards_across_interfaces += 1;
                let back = prev_ts.0.saturating_sub(ts.0);
                self.q.max_backwards_across_ns = self.q.max_backwards_across_ns.max(back);
            }
        }
        self.prev = Some((interface, ts));
        let idx = interface.index();
        if idx >= MAX_INTERFACES {
            return;
        }
        if self.ifaces.len() <= idx {
            self.ifaces.resize(idx + 1, IfaceState::default());
        }
        if let Some(s) = self.ifaces.get_mut(idx) {
            s.frames += 1;
            if let Some(last) = s.last_ts {
                if ts < last {
                    s.backwards += 1;
                    s.max_back_ns = s.max_back_ns.max(last.0.saturating_sub(ts.0));
                }
            }
            s.last_ts = Some(ts);
        }
    }

    /// The slot of `stream`, the table grown to hold it (stream ids are
    /// dense; [`pcapsleuth_core::dense::slot_mut`]: by a quarter at least).
    fn slot_mut(&mut self, stream: StreamId) -> Option<&mut FlowSlot> {
        let idx = usize::try_from(stream.get()).ok()?;
        pcapsleuth_core::dense::slot_mut(&mut self.flows, idx, FlowSlot::default)
    }

    /// The full state of `stream` (made from its compact slot if need be).
    fn flow_mut(&mut self, stream: StreamId) -> Option<&mut FlowState> {
        let next = self.states.len();
        let slot = self.slot_mut(stream)?;
        let made = match slot.get() {
            Slot::Full(i) => return self.states.get_mut(i),
            Slot::Empty => FlowState::default(),
            Slot::Syn { dir, window } => FlowState::after_syn(dir, window),
        };
        *slot = FlowSlot::full(next)?;
        if self.states.len() == self.states.capacity() {
            // By a quarter: O(1) per flow, at most a fifth unused.
            self.states.reserve_exact((self.states.len() / 4).max(4));
        }
        self.states.push(made);
        self.states.last_mut()
    }

    /// Flows whose state is held now (one SYN or more seen).
    pub fn active_flows(&self) -> usize {
        self.flows.iter().filter(|f| f.get() != Slot::Empty).count()
    }

    /// Heap bytes held for flows (the slot table and the states behind it).
    pub fn flow_bytes(&self) -> usize {
        self.flows.capacity() * std::mem::size_of::<FlowSlot>()
            + self.states.capacity() * std::mem::size_of::<FlowState>()
            + self
                .states
                .iter()
                .map(|f| {
                    f.quality
                        .as_ref()
                        .map_or(0, |_| std::mem::size_of::<FlowQuality>())
                        + f.dirs
                            .iter()
                            .map(|d| d.gaps.capacity() * std::mem::size_of::<(i64, i64)>())
                            .sum::<usize>()
                })
                .sum::<usize>()
    }

    /// The capture place of an earlier frame, if still remembered.
    fn place_of(&self, frame: FrameNo) -> Option<Place> {
        let i = self.recent.partition_point(|&(n, _)| n < frame);
        self.recent
            .get(i)
            .filter(|&&(n, _)| n == frame)
            .map(|&(_, place)| place)
    }

    /// Count the DNS messages and ICMP errors of a frame, and those that
    /// snaplen cut before what the detectors read of them.
    fn note_unreadable_payload(&mut self, frame: &Frame<'_>, decoded: &Decoded<'_>) {
        let frame_cut = (frame.data.len() as u64) < u64::from(frame.orig_len);
        match &decoded.transport {
            Transport::Udp(u)
                if u.src_port == pcapsleuth_decode::dns::DNS_PORT
                    || u.dst_port == pcapsleuth_decode::dns::DNS_PORT =>
            {
                self.q.dns_frames += 1;
                let cut = (u.payload.len() as u64) < u64::from(u.payload_len);
                // What the DNS detectors read: the header and the first
                // question (`pcapsleuth_decode::dns::parse`).
                if cut
                    && pcapsleuth_decode::dns::parse(u.payload).is_none_or(|m| m.question.is_none())
                {
                    self.q.dns_truncated_frames += 1;
                }
            }
            Transport::Icmp(m) if is_icmp_error(m.kind) => {
                self.q.icmp_errors += 1;
                // What the ICMP detectors read: the quoted IP header and the
                // quoted ports (RFC 792 and RFC 4443 make the sender quote at
                // least its first 8 bytes of transport).
                let unreadable = m.quoted.as_ref().is_none_or(|q| {
                    matches!(q.ip.protocol, ip_protocol::TCP | ip_protocol::UDP)
                        && q.src_port.is_none()
                });
                if frame_cut && unreadable {
                    self.q.icmp_quote_truncated += 1;
                }
            }
            _ => {}
        }
    }

    fn on_segment(&mut self, s: &SegmentEvent) {
        if let Some(orig) = s.duplicate_of {
            // Unknown first sighting: same interface unless several were seen.
            let same = self
                .place_of(orig)
                .map_or(self.ifaces.len() <= 1, |p| p == self.current);
            if let Some(f) = self.flow_mut(s.stream) {
                let q = quality_mut(&mut f.quality);
                if same {
                    q.duplicates_same_interface += 1;
                } else {
                    q.duplicates_other_interface += 1;
                }
            }
            if same {
                self.q.duplicates_same_interface += 1;
            } else {
                self.q.duplicates_other_interface += 1;
            }
            return;
        }
        self.q.captured_payload_bytes += u64::from(s.payload_len);
        if let Some(slot) = self.slot_mut(s.stream) {
            if slot.get() == Slot::Empty {
                if let Some(syn) = plain_syn(s) {
                    *slot = syn;
                    return;
                }
            }
        }
        let Some(f) = self.flow_mut(s.stream) else {
            return;
        };
        let d = dir_index(s.dir);
        let window = s
            .window_bytes
            .unwrap_or(u64::from(s.window_raw) * UNKNOWN_SCALE);
        let [c, srv] = &mut f.dirs;
        let (me, peer) = if d == 0 { (c, srv) } else { (srv, c) };
        me.max_window = me.max_window.max(window);
        track_sender(me, peer.max_window, &mut f.quality, s);
        // The ACK speaks of the peer's sequence space.
        if s.flags.ack() && !s.flags.rst() {
            if let Some(ack) = s.rel_ack {
                let lost = acked_unseen(peer, ack, me.max_window);
                if lost > 0 {
                    let q = quality_mut(&mut f.quality);
                    q.capture_lost_bytes += lost;
                    q.capture_loss_acks += 1;
                    q.first_capture_loss_frame.get_or_insert(s.frame.get());
                }
            }
        }
    }

    /// End of input: the capture's quality, with its verdict. `interfaces`
    /// are the interfaces the input described (their ISB statistics).
    pub fn finish(mut self, interfaces: &[InterfaceInfo]) -> CaptureQuality {
        let mut q = std::mem::take(&mut self.q);
        q.tcp_flows = self.flows.len() as u64;
        for (i, slot) in self.flows.iter().enumerate() {
            let fq = match slot.get() {
                Slot::Full(j) => match self.states.get(j) {
                    Some(f) => f.conclude(StreamId(i as u64)),
                    None => continue,
                },
                // Clean: no segment, or one SYN.
                Slot::Empty | Slot::Syn { .. } => continue,
            };
            if fq.one_sided.is_some() {
                q.one_sided_flows += 1;
            }
            if fq.capture_lost_bytes > 0 {
                q.capture_loss_flows += 1;
                q.capture_lost_bytes += fq.capture_lost_bytes;
            }
            q.gap_bytes_filled_late += fq.gap_bytes_filled_late;
            if !fq.is_clean() {
                q.flows.push(fq);
            }
        }
        q.interfaces = self.interface_qualities(interfaces);
        q.reasons = reasons(&q);
        q.conclude();
        q
    }

    /// Every described interface and every one frames named, in id order.
    fn interface_qualities(&self, interfaces: &[InterfaceInfo]) -> Vec<InterfaceQuality> {
        let mut out: Vec<InterfaceQuality> = interfaces
            .iter()
            .map(|i| {
                let seen = self.ifaces.get(i.id.index()).copied().unwrap_or_default();
                let stats = i.stats.unwrap_or_default();
                InterfaceQuality {
                    id: i.id,
                    frames: seen.frames,
                    if_drop: stats.if_drop,
                    os_drop: stats.os_drop,
                    if_recv: stats.if_recv,
                    stats_start_ns: stats.start_ts.map(|t| t.0),
                    stats_end_ns: stats.end_ts.map(|t| t.0),
                    backwards_frames: seen.backwards,
                    max_backwards_ns: seen.max_back_ns,
                }
            })
            .collect();
        for (id, seen) in self.ifaces.iter().enumerate() {
            let Ok(id) = InterfaceId::try_from(id) else {
                continue;
            };
            if seen.frames == 0 || interfaces.iter().any(|i| i.id == id) {
                continue;
            }
            out.push(InterfaceQuality {
                id,
                frames: seen.frames,
                backwards_frames: seen.backwards,
                max_backwards_ns: seen.max_back_ns,
                ..InterfaceQuality::default()
            });
        }
        out.sort_by_key(|i| i.id);
        out
    }
}

/// The compact slot of `s` as a flow's first segment, when it is a plain
/// SYN (see [`Slot::Syn`]).
fn plain_syn(s: &SegmentEvent) -> Option<FlowSlot> {
    let f = s.flags;
    if !f.syn() || f.ack() || f.rst() || f.fin() || s.payload_len != 0 || s.rel_seq != 0 {
        return None;
    }
    // A SYN's window is never scaled (RFC 7323 §2.2), so it fits 16 bits;
    // with no known scale it is the raw field times UNKNOWN_SCALE, as on any
    // segment. Anything else is kept in full (the same state, made by
    // `track_sender`).
    let (window, unscaled) = match s.window_bytes {
        None => (s.window_raw, true),
        Some(w) => (u16::try_from(w).ok()?, false),
    };
    Some(FlowSlot::syn(dir_index(s.dir), window, unscaled))
}

/// Update the sender's sequence coverage with segment `s`: a segment past
/// the highest captured byte opens a gap; one below it fills gaps (network
/// loss, retransmitted). RSTs carry no data of the flow and are skipped.
fn track_sender(
    st: &mut DirState,
    peer_window: u64,
    fq: &mut Option<Box<FlowQuality>>,
    s: &SegmentEvent,
) {
    st.packets += 1;
    if s.flags.syn() {
        st.syn = true;
    }
    if s.flags.ack() && !s.flags.rst() {
        if st.syn && !s.flags.syn() {
            st.ack_after_syn = true;
        }
        match st.first_ack {
            None => st.first_ack = Some(s.ack.0),
            Some(a) if a != s.ack.0 => st.ack_moved = true,
            Some(_) => {}
        }
    }
    let bound = st.sender_jump_bound(peer_window, s.ts.0);
    st.last_ts = OptTimestamp::some(s.ts);
    if s.flags.rst() {
        return;
    }
    let len = i64::from(s.payload_len) + i64::from(s.flags.syn()) + i64::from(s.flags.fin());
    let (start, end) = (s.rel_seq, s.rel_seq + len);
    if !st.known {
        st.known = true;
        st.max_end = end;
        st.maybe_keepalive = len == 0;
        return;
    }
    if len > 0 {
        st.maybe_keepalive = false;
    }
    if start > st.max_end {
        if start - st.max_end <= bound {
            if st.gaps.len() < MAX_GAPS {
                st.gaps.push((st.max_end, start));
            }
        } else {
            // Another sequence space: forget the old one.
            st.gaps.clear();
        }
        st.max_end = end;
        return;
    }
    if len > 0 {
        let filled = fill(&mut st.gaps, start, end.min(st.max_end));
        if filled > 0 {
            quality_mut(fq).gap_bytes_filled_late += filled;
        }
        st.max_end = st.max_end.max(end);
    }
}

/// The peer acknowledged up to `ack` (relative, exclusive) with a receive
/// window of at most `acker_window` bytes: the bytes below it the capture
/// never saw, which it now counts as seen. An ACK further past the highest
/// captured byte than the window allows ([`DirState::jump_bound`]) is
/// ignored; one byte past a first segment that may have been a keep-alive
/// is no loss.
///
/// Unlike a sender's jump ([`DirState::sender_jump_bound`]), an ACK's gets
/// no allowance for the time the sender was silent in the capture: an ACK
/// alone far past the window is more often bogus (a crafted capture's, a
/// sequence-translating middlebox's) than the only trace of bytes the
/// capture missed. With the time allowance, `arkime`'s
/// `tcp_handshake_synthetic.pcap` (ACKs of 0.5 and 1 MB one millisecond
/// after a SYN/ACK) became 1.9 MB of capture loss; the capture losses of
/// `fixtures/captures/capture-loss*.pcap` are found without it, from the
/// data that resumes past the window.
fn acked_unseen(peer: &mut DirState, ack: i64, acker_window: u64) -> u64 {
    if !peer.known {
        return 0;
    }
    if peer.maybe_keepalive && ack == peer.max_end + 1 {
        peer.maybe_keepalive = false;
        peer.max_end = ack;
        return 0;
    }
    let mut lost = fill(&mut peer.gaps, i64::MIN, ack);
    if ack > peer.max_end && ack - peer.max_end <= DirState::jump_bound(acker_window) {
        lost += u64::try_from(ack - peer.max_end).unwrap_or(0);
        peer.max_end = ack;
    }
    lost
}

/// The direction acknowledged bytes of its peer: its ACK number moved, or it
/// acknowledged after its own SYN (it received a SYN/ACK).
fn acknowledges_peer(d: &DirState) -> bool {
    d.ack_moved || d.ack_after_syn
}

/// The reasons of a capture's facts, in variant order (see
/// [`QualityReason::verdict`] for what each implies).
pub fn reasons(q: &CaptureQuality) -> Vec<QualityReason> {
    let mut out = Vec::new();
    for i in &q.interfaces {
        if let Some(dropped) = i.dropped().filter(|&d| d > 0) {
            out.push(QualityReason::InterfaceDrops {
                interface: i.id,
                dropped,
                captured: i.frames,
            });
        }
    }
    if q.capture_lost_bytes > 0 {
        out.push(QualityReason::CaptureLoss {
            flows: q.capture_loss_flows,
            bytes: q.capture_lost_bytes,
            captured_bytes: q.captured_payload_bytes,
        });
    }
    if q.header_truncated_frames > 0 {
        out.push(QualityReason::HeadersTruncated {
            frames: q.header_truncated_frames,
            of_frames: q.frames,
        });
    }
    if q.dns_truncated_frames > 0 {
        out.push(QualityReason::DnsTruncated {
            frames: q.dns_truncated_frames,
            of_frames: q.dns_frames,
        });
    }
    if q.icmp_quote_truncated > 0 {
        out.push(QualityReason::IcmpQuoteTruncated {
            frames: q.icmp_quote_truncated,
            of_frames: q.icmp_errors,
        });
    }
    if q.one_sided_flows > 0 {
        out.push(QualityReason::OneSidedFlows {
            flows: q.one_sided_flows,
            of_flows: q.tcp_flows,
        });
    }
    for i in &q.interfaces {
        if i.max_backwards_ns > BACKWARDS_TOLERANCE_NS {
            out.push(QualityReason::TimestampsBackwards {
                interface: i.id,
                frames: i.backwards_frames,
                max_back_ns: i.max_backwards_ns,
            });
        }
    }
    if q.duplicates_same_interface > 0 {
        out.push(QualityReason::SameInterfaceDuplicates {
            frames: q.duplicates_same_interface,
        });
    }
    out
}

fn verdict_report(v: QualityVerdict) -> QualityVerdictReport {
    match v {
        QualityVerdict::Trustworthy => QualityVerdictReport::Trustworthy,
        QualityVerdict::UseWithCare => QualityVerdictReport::UseWithCare,
        QualityVerdict::NotTrustworthy => QualityVerdictReport::NotTrustworthy,
    }
}

fn reason_report(r: &QualityReason) -> QualityReasonReport {
    let verdict = verdict_report(r.verdict());
    match *r {
        QualityReason::InterfaceDrops {
            interface,
            dropped,
            captured,
        } => QualityReasonReport::InterfaceDrops {
            verdict,
            interface: interface.get(),
            dropped,
            captured,
        },
        QualityReason::CaptureLoss {
            flows,
            bytes,
            captured_bytes,
        } => QualityReasonReport::CaptureLoss {
            verdict,
            flows,
            bytes,
            captured_bytes,
        },
        QualityReason::HeadersTruncated { frames, of_frames } => {
            QualityReasonReport::HeadersTruncated {
                verdict,
                frames,
                of_frames,
            }
        }
        QualityReason::DnsTruncated { frames, of_frames } => QualityReasonReport::DnsTruncated {
            verdict,
            frames,
            of_frames,
        },
        QualityReason::IcmpQuoteTruncated { frames, of_frames } => {
            QualityReasonReport::IcmpQuoteTruncated {
                verdict,
                frames,
                of_frames,
            }
        }
        QualityReason::OneSidedFlows { flows, of_flows } => QualityReasonReport::OneSidedFlows {
            verdict,
            flows,
            of_flows,
        },
        QualityReason::TimestampsBackwards {
            interface,
            frames,
            max_back_ns,
        } => QualityReasonReport::TimestampsBackwards {
            verdict,
            interface: interface.get(),
            frames,
            max_back_ns,
        },
        QualityReason::SameInterfaceDuplicates { frames } => {
            QualityReasonReport::SameInterfaceDuplicates { verdict, frames }
        }
        QualityReason::ReadIncomplete { frames } => {
            QualityReasonReport::ReadIncomplete { verdict, frames }
        }
    }
}

/// The report's `capture_quality` of a capture.
pub fn capture_report(q: &CaptureQuality) -> CaptureQualityReport {
    CaptureQualityReport {
        verdict: verdict_report(q.verdict),
        reasons: q.reasons.iter().map(reason_report).collect(),
        frames: q.frames,
        tcp_flows: q.tcp_flows,
        duplicates_same_interface: q.duplicates_same_interface,
        duplicates_other_interface: q.duplicates_other_interface,
        capture_lost_bytes: q.capture_lost_bytes,
        capture_loss_flows: q.capture_loss_flows,
        captured_payload_bytes: q.captured_payload_bytes,
        gap_bytes_filled_late: q.gap_bytes_filled_late,
        payload_truncated_frames: q.payload_truncated_frames,
        header_truncated_frames: q.header_truncated_frames,
        one_sided_flows: q.one_sided_flows,
        backwards_across_interfaces: q.backwards_across_interfaces,
        max_backwards_across_ns: q.max_backwards_across_ns,
        interfaces: q
            .interfaces
            .iter()
            .map(|i| InterfaceQualityReport {
                id: i.id.get(),
                frames: i.frames,
                if_drop: i.if_drop,
                os_drop: i.os_drop,
                if_recv: i.if_recv,
                stats_start_ns: i.stats_start_ns,
                stats_end_ns: i.stats_end_ns,
                backwards_frames: i.backwards_frames,
                max_backwards_ns: i.max_backwards_ns,
            })
            .collect(),
    }
}

/// The `capture_quality` of one flow row (`None` when it has nothing to say).
pub fn flow_report(f: &FlowQuality) -> FlowQualityReport {
    FlowQualityReport {
        capture_lost_bytes: f.capture_lost_bytes,
        capture_loss_acks: f.capture_loss_acks,
        first_capture_loss_frame: f.first_capture_loss_frame,
        gap_bytes_filled_late: f.gap_bytes_filled_late,
        one_sided: f.one_sided.map(|d| match d {
            Direction::ClientToServer => "client_to_server",
            Direction::ServerToClient => "server_to_client",
        }),
        duplicates_same_interface: f.duplicates_same_interface,
        duplicates_other_interface: f.duplicates_other_interface,
        payload_truncated_frames: f.payload_truncated_frames,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcapsleuth_core::{Endpoint, InterfaceId, SeqNum};
    use pcapsleuth_decode::TcpFlags;
    use pcapsleuth_flow::{
        FlowEndReason, FlowEnded, FlowStarted, L4Fingerprint, PacketFingerprint, SegmentAnalysis,
        TcpFingerprint,
    };
    use std::net::{IpAddr, Ipv4Addr};

    /// The sender's jump bound: the peer's window (at least 65,535 bytes)
    /// right after a segment, what 100 Gbit/s carries in the silence since
    /// the direction's previous segment otherwise, never past
    /// `MAX_GAP_BYTES`; without a previous segment, the window alone.
    #[test]
    fn sender_jump_bound_grows_with_the_silence() {
        let at = |last: Option<i64>| DirState {
            last_ts: last.map_or(OptTimestamp::NONE, |t| OptTimestamp::some(Timestamp(t))),
            ..DirState::default()
        };
        let cases: &[(Option<i64>, u64, i64, i64)] = &[
            // (previous segment ns, peer window, now ns, bound)
            (None, 0, 1_000_000_000, 65_535),
            (None, 1 << 20, 1_000_000_000, 1 << 20),
            (Some(0), 65_536, 1_000, 65_536),
            // 95 ms at 12.5 bytes/ns: fixtures/captures/capture-loss.pcap's
            // 1,143,248-byte jump fits.
            (Some(0), 65_536, 95_000_000, 1_073_741_824),
            (Some(0), 65_536, 63_000_000, 787_500_000),
            (Some(0), 65_536, 10_000_000_000, MAX_GAP_BYTES),
            // A timestamp going backwards is no silence.
            (Some(5_000), 65_536, 1_000, 65_536),
            (Some(i64::MIN + 1), 0, i64::MAX, MAX_GAP_BYTES),
        ];
        for &(last, window, now, want) in cases {
            assert_eq!(
                at(last).sender_jump_bound(window, now),
                want,
                "{last:?} {window} {now}"
            );
        }
    }

    fn ep(last: u8, port: u16) -> Endpoint {
        Endpoint {
            addr: IpAddr::V4(Ipv4Addr::new(192, 0, 2, last)),
            port,
        }
    }

    fn started(stream: u64) -> FlowEvent {
        FlowEvent::FlowStarted(FlowStarted {
            stream: StreamId(stream),
            client: ep(1, 40000),
            server: ep(2, 80),
            frame: FrameNo(1),
            ts: Timestamp(0),
        })
    }

    fn ended(stream: u64) -> FlowEvent {
        FlowEvent::FlowEnded(FlowEnded {
            stream: StreamId(stream),
            last_frame: FrameNo(1),
            last_ts: Timestamp(0),
            reason: FlowEndReason::Idle,
            client: pcapsleuth_core::Endpoint {
                addr: std::net::IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1)),
                port: 40000,
            },
            server: pcapsleuth_core::Endpoint {
                addr: std::net::IpAddr::V4(std::net::Ipv4Addr::new(198, 51, 100, 1)),
                port: 80,
            },
        })
    }

    /// A segment of `stream`: relative seq `seq`, `len` bytes, `flags`, relative ACK `ack`.
    fn seg(stream: u64, dir: Direction, seq: i64, len: u32, flags: u16, ack: i64) -> FlowEvent {
        FlowEvent::Segment(SegmentEvent {
            stream: StreamId(stream),
            dir,
            frame: FrameNo(1),
            ts: Timestamp(0),
            interface: InterfaceId(0),
            flags: TcpFlags(flags),
            seq: SeqNum(1000).add(seq as u32),
            ack: SeqNum(5000).add(ack as u32),
            rel_seq: seq,
            rel_ack: Some(ack),
            payload_len: len,
            ip_len: len + 52,
            ip_id: None,
            window_raw: 500,
            window_bytes: Some(64000),
            mss: None,
            window_scale: None,
            sack_blocks: 0,
            wireshark: SegmentAnalysis::default(),
            analysis: SegmentAnalysis::default(),
            duplicate_of: None,
            snd_una: 0,
            snd_nxt: seq + i64::from(len),
            since_first_tx_ns: None,
            ack_rtt_ns: None,
            bytes_in_flight: None,
            fingerprint: PacketFingerprint {
                ip_id: None,
                l4: L4Fingerprint::Tcp(TcpFingerprint {
                    seq: SeqNum(1000),
                    ack: SeqNum(0),
                    flags,
                    window: 500,
                    payload_len: len,
                    timestamps: None,
                    sack0: None,
                    payload_hash: 0,
                }),
            },
        })
    }

    const C2S: Direction = Direction::ClientToServer;
    const S2C: Direction = Direction::ServerToClient;
    const SYN: u16 = TcpFlags::SYN;
    const ACK: u16 = TcpFlags::ACK;

    /// Stream `n`'s events: 0 lost bytes to the capture, 1 was captured one
    /// way only, 2 is one SYN, 3 a clean exchange.
    fn flows() -> Vec<Vec<FlowEvent>> {
        vec![
            vec![
                started(0),
                seg(0, C2S, 0, 0, SYN, 0),
                seg(0, S2C, 0, 0, SYN | ACK, 1),
                seg(0, C2S, 1, 100, ACK, 1),
                seg(0, C2S, 201, 100, ACK, 1),
                seg(0, S2C, 1, 0, ACK, 301),
            ],
            vec![
                started(1),
                seg(1, S2C, 1, 0, ACK, 10),
                seg(1, S2C, 1, 0, ACK, 20),
            ],
            vec![started(2), seg(2, C2S, 0, 0, SYN, 0)],
            vec![
                started(3),
                seg(3, C2S, 0, 0, SYN, 0),
                seg(3, S2C, 0, 0, SYN | ACK, 1),
                seg(3, C2S, 1, 0, ACK, 1),
            ],
        ]
    }

    #[test]
    fn flow_ended_and_a_return_change_nothing() {
        let all = flows();
        // Each flow ends, and the first comes back (same tcp.stream) later.
        let back = [seg(0, C2S, 301, 100, ACK, 1), seg(0, S2C, 1, 0, ACK, 401)];
        let run = |end: bool| {
            let mut t = QualityTracker::new();
            for (i, f) in all.iter().enumerate() {
                t.on_events(f);
                if end {
                    t.on_events(&[ended(i as u64)]);
                }
            }
            t.on_events(&back);
            format!("{:?}", t.finish(&[]))
        };
        let want = run(false);
        assert!(want.contains("capture_lost_bytes: 100"), "{want}");
        assert!(want.contains("one_sided_flows: 1"), "{want}");
        assert_eq!(run(true), want);
    }

    #[test]
    fn a_one_syn_flow_costs_4_bytes() {
        let mut t = QualityTracker::new();
        let n = 10_000u64;
        for i in 0..n {
            t.on_events(&[started(i), seg(i, C2S, 0, 0, SYN, 0)]);
        }
        assert_eq!(t.active_flows(), n as usize);
        let per = t.flow_bytes() as f64 / n as f64;
        println!("quality: {per:.1} bytes per one-SYN flow");
        assert!(per <= 4.0 * 1.25, "{per}");
        // Seen again, the SYN's flow is what a full state would have made.
        t.on_events(&[seg(0, S2C, 0, 0, SYN | ACK, 1)]);
        assert_eq!(t.finish(&[]).one_sided_flows, 0);
    }

    #[test]
    fn a_clean_open_exchange_costs_under_160_bytes() {
        const FIN: u16 = TcpFlags::FIN;
        let mut t = QualityTracker::new();
        let n = 2_000u64;
        for i in 0..n {
            t.on_events(&[
                started(i),
                seg(i, C2S, 0, 0, SYN, 0),
                seg(i, S2C, 0, 0, SYN | ACK, 1),
                seg(i, C2S, 1, 0, ACK, 1),
                seg(i, C2S, 1, 100, ACK, 1),
                seg(i, S2C, 1, 0, ACK, 101),
                seg(i, C2S, 101, 100, ACK, 1),
                seg(i, S2C, 1, 0, ACK, 201),
                seg(i, C2S, 201, 0, FIN | ACK, 1),
                seg(i, S2C, 1, 0, FIN | ACK, 202),
            ]);
        }
        assert_eq!(t.active_flows(), n as usize);
        let per = t.flow_bytes() as f64 / n as f64;
        println!("quality: {per:.1} bytes per clean open flow");
        // A 4-byte slot and both directions' state; no
        // facts allocated.
        assert!(per <= 160.0, "{per}");
        let q = t.finish(&[]);
        assert!(q.flows.is_empty(), "{:?}", q.flows);
        assert_eq!(q.tcp_flows, n);
    }

    #[test]
    fn flow_slots_unpack_to_what_was_packed() {
        let table = [
            (FlowSlot::default(), Slot::Empty),
            (FlowSlot::syn(0, 0, false), Slot::Syn { dir: 0, window: 0 }),
            (
                FlowSlot::syn(1, 65_535, false),
                Slot::Syn {
                    dir: 1,
                    window: 65_535,
                },
            ),
            (
                FlowSlot::syn(1, 64_240, true),
                Slot::Syn {
                    dir: 1,
                    window: 64_240 * UNKNOWN_SCALE,
                },
            ),
            (FlowSlot::full(0).unwrap(), Slot::Full(0)),
            (
                FlowSlot::full((1 << 31) - 1).unwrap(),
                Slot::Full((1 << 31) - 1),
            ),
        ];
        for (packed, want) in table {
            assert_eq!(packed.get(), want, "{packed:?}");
        }
        assert_eq!(FlowSlot::full(1 << 31), None);
        assert_eq!(std::mem::size_of::<FlowSlot>(), 4);
    }

    #[test]
    fn fill_splits_one_gap_and_keeps_the_cap() {
        let mut g = vec![(0, 10), (20, 30)];
        assert_eq!(fill(&mut g, 5, 25), 10);
        assert_eq!(g, [(0, 5), (25, 30)]);
        let mut g: Vec<(i64, i64)> = (0..MAX_GAPS as i64).map(|i| (i * 10, i * 10 + 5)).collect();
        assert_eq!(fill(&mut g, 1, 2), 1);
        assert_eq!(g.len(), MAX_GAPS);
        assert_eq!(g[0], (0, 1));
        assert_eq!(g[1], (2, 5));
    }
}
