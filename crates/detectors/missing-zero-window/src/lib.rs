#![doc = include_str!("../README.md")]

mod render;

pub use pcapsleuth_detect::{Peer, Role};
pub use render::render;

use pcapsleuth_core::{Direction, FlowRef, FrameNo, StreamId, Timestamp};
use pcapsleuth_detect::retx::{backoff_doublings, is_initial_ttl, ns_to_ms, DirLedger, Tx};
use pcapsleuth_detect::timer::next_backoff_ns;
use pcapsleuth_detect::{
    Detector, DetectorInfo, Finding, FinishContext, FlowEvent, PacketContext, Severity, StreamSlots,
};
use pcapsleuth_flow::SegmentEvent;
use serde::Serialize;
use std::collections::{BTreeSet, VecDeque};

/// Detector id.
pub const ID: &str = "missing-zero-window";

/// Fewest retransmissions of the stuck segment (seed 003: the sender backs off
/// until it times out, typically 15 retries).
pub const MIN_RETRANSMISSIONS: u32 = 3;

/// Bytes the receiver must have acknowledged before the drop, at least
/// (a receive buffer at `tcp_rmem` max holds megabytes).
pub const MIN_ACKED_BYTES: u64 = 65_536;

/// ... and at least this many times the window it advertised at the drop.
pub const BUSY_WINDOWS: u64 = 4;

/// Alternatively, data segments the receiver must have acknowledged (small
/// segments fill a receive buffer by their per-packet overhead).
pub const MIN_ACKED_SEGMENTS: u64 = 1000;

/// Receiver segments remembered per direction to find the last ACK before the drop.
const RING: usize = 64;
/// Ring capacity (entries) above which a ring cut to its newest entry is reallocated.
const RING_SHRINK_ABOVE: usize = 8;
/// Frames cited per kind.
const MAX_CITE: usize = 16;

#[derive(Debug, Clone, Copy)]
struct RcvSeg {
    frame: FrameNo,
    ts: Timestamp,
    /// Advertised window (bytes, or raw when the scale is unknown); the
    /// flow table caps the shift at 14, so it fits (65,535 << 14 < 2^32).
    window: u32,
    raw: u16,
}

#[derive(Debug, Clone, Default)]
struct Episode {
    stuck_seq: i64,
    len: u32,
    orig: Option<Tx>,
    retx: Vec<Tx>,
    retx_count: u32,
    last_ack_before: Option<RcvSeg>,
    zero_seen: bool,
    windows: BTreeSet<u64>,
    answered: Vec<FrameNo>,
    answered_count: u64,
    awaiting: bool,
    acked_at: Option<(FrameNo, Timestamp)>,
}

#[derive(Debug, Clone, Default)]
struct DirState {
    ledger: DirLedger,
    ring: VecDeque<RcvSeg>,
    ep: Option<Box<Episode>>,
    scale_known: bool,
}

impl DirState {
    fn new() -> Self {
        DirState {
            ledger: DirLedger::new(u32::MAX),
            ..Default::default()
        }
    }
}

/// A stream that carried data: one state per direction of data
/// ([`Direction::index`]), created by the direction's first data segment.
type Stream = [Option<DirState>; 2];

/// A qualified episode waiting for `finish` (which has the endpoint names).
#[derive(Debug, Clone)]
struct Hit {
    stream: StreamId,
    dir: Direction,
    ep: Box<Episode>,
    largest_acked_payload: u32,
    scale_known: bool,
}

/// Highest TTL / hop limit seen per direction of a stream ([`Direction::index`]).
type Ttls = [Option<u8>; 2];

/// The `missing-zero-window` detector.
///
/// Memory: a stream costs a 2-byte TTL slot per direction
/// ([`StreamSlots`]); one that carries data also a boxed per-direction
/// ledger until its [`FlowEvent::FlowEnded`], when its episodes are
/// concluded and only qualified ones (and, for them, the TTLs) are kept.
#[derive(Debug, Default)]
pub struct MissingZeroWindow {
    streams: pcapsleuth_detect::StreamMap<StreamId, Box<Stream>>,
    ttl: StreamSlots<Ttls>,
    hits: Vec<Hit>,
}

fn dir_of(i: usize) -> Direction {
    if i == 0 {
        Direction::ClientToServer
    } else {
        Direction::ServerToClient
    }
}

impl MissingZeroWindow {
    /// Streams with live state (carried data, not ended).
    pub fn active_streams(&self) -> usize {
        self.streams.len()
    }

    /// Heap bytes held for live streams (by capacity: map slots, boxes,
    /// receiver rings, the TTL slots), excluding qualified episodes kept.
    pub fn state_bytes(&self) -> usize {
        let slot = std::mem::size_of::<(StreamId, Box<Stream>)>() + 1;
        let rings: usize = self
            .streams
            .values()
            .flat_map(|s| s.iter().flatten())
            .map(|d| d.ring.capacity() * std::mem::size_of::<RcvSeg>())
            .sum();
        self.streams.capacity() * slot
            + self.streams.len() * std::mem::size_of::<Stream>()
            + rings
            + self.ttl.span() * std::mem::size_of::<Ttls>()
    }

    fn on_segment(&mut self, seg: &SegmentEvent) {
        if seg.duplicate_of.is_some() {
            return;
        }
        let sends_data = seg.payload_len > 0 && !seg.flags.syn() && !seg.flags.rst();
        let st = if sends_data {
            self.streams.entry(seg.stream).or_default()
        } else {
            match self.streams.get_mut(&seg.stream) {
                Some(st) => st,
                None => return,
            }
        };
        // 1. As data sender.
        if sends_data {
            let d = st[seg.dir.index()].get_or_insert_with(DirState::new);
            as_sender(d, seg, &mut self.hits);
        }
        // 2. As receiver of the other direction's data.
        let Some(rel_ack) = seg.rel_ack else { return };
        if !seg.flags.ack() || seg.flags.rst() {
            return;
        }
        if let Some(d) = st[seg.dir.reverse().index()].as_mut() {
            as_receiver(d, seg, rel_ack, &mut self.hits);
        }
    }

    /// The stream left the flow table: conclude its open episodes, drop its
    /// state, and its TTLs unless an episode of it qualified.
    fn on_flow_ended(&mut self, stream: StreamId) {
        if let Some(st) = self.streams.remove(&stream) {
            for (i, d) in st.into_iter().enumerate() {
                if let Some(mut d) = d {
                    if let Some(ep) = d.ep.take() {
                        conclude(&mut self.hits, stream, dir_of(i), ep, &d);
                    }
                }
            }
        }
        if !self.hits.iter().any(|h| h.stream == stream) {
            self.ttl.clear(stream);
        }
    }
}

/// A data segment of `d`'s sender: a re-send at the receiver's ACK starts or
/// continues an episode.
fn as_sender(d: &mut DirState, seg: &SegmentEvent, hits: &mut Vec<Hit>) {
    let una = d.ledger.highest_ack;
    let Some(rec) = d.ledger.on_data(seg) else {
        return;
    };
    if una != Some(rec.rel_seq) {
        return;
    }
    let tx = Tx {
        frame: seg.frame,
        ts: seg.ts,
    };
    let same = d.ep.as_ref().is_some_and(|e| e.stuck_seq == rec.rel_seq);
    if !same {
        let orig = (rec.tx_count() > 1)
            .then(|| rec.txs().first().copied())
            .flatten();
        let before_frame = orig.map(|o| o.frame).unwrap_or(seg.frame);
        let mut ep = Episode {
            stuck_seq: rec.rel_seq,
            len: rec.payload_len,
            orig,
            ..Default::default()
        };
        // Retransmissions before this one (same bytes) count too.
        for t in rec.txs().iter().skip(1) {
            if t.frame != seg.frame {
                ep.retx.push(*t);
                ep.retx_count += 1;
            }
        }
        if let Some(old) = d.ep.take() {
            conclude(hits, seg.stream, seg.dir, old, d);
        }
        ep.last_ack_before = d
            .ring
            .iter()
            .rev()
            .find(|r| r.frame < before_frame)
            .copied();
        d.ep = Some(Box::new(ep));
    }
    if let Some(ep) = d.ep.as_mut() {
        ep.retx_count += 1;
        if ep.retx.len() < 32 {
            ep.retx.push(tx);
        }
        ep.awaiting = true;
    }
}

/// An ACK of the receiver of `d`'s data.
fn as_receiver(d: &mut DirState, seg: &SegmentEvent, rel_ack: i64, hits: &mut Vec<Hit>) {
    let (window, known) = match seg.window_bytes {
        Some(b) => (b, true),
        None => (u64::from(seg.window_raw), false),
    };
    d.scale_known |= known;
    let r = RcvSeg {
        frame: seg.frame,
        ts: seg.ts,
        window: u32::try_from(window).unwrap_or(u32::MAX),
        raw: seg.window_raw,
    };
    if d.ring.len() >= RING {
        d.ring.pop_front();
    }
    pcapsleuth_core::grow::push_back(&mut d.ring, r);
    d.ledger.on_ack(rel_ack, seg.frame, seg.ts);
    if d.ledger.unacked_len() == 0 && d.ring.len() > 1 {
        // Nothing in flight: an episode can only start at a segment sent
        // from now on, and the newest ACK is the last one before it.
        if d.ring.capacity() > RING_SHRINK_ABOVE {
            d.ring = VecDeque::from([r]);
        } else {
            d.ring.drain(..d.ring.len() - 1);
        }
    }
    let Some(ep) = d.ep.as_mut() else { return };
    if rel_ack > ep.stuck_seq {
        ep.acked_at = Some((seg.frame, seg.ts));
        if let Some(ep) = d.ep.take() {
            conclude(hits, seg.stream, seg.dir.reverse(), ep, d);
        }
        return;
    }
    if seg.window_raw == 0 {
        ep.zero_seen = true;
    } else if ep.windows.len() < 8 {
        ep.windows.insert(window);
    }
    if rel_ack == ep.stuck_seq && seg.window_raw > 0 && ep.awaiting {
        ep.awaiting = false;
        ep.answered_count += 1;
        if ep.answered.len() < MAX_CITE {
            ep.answered.push(seg.frame);
        }
    }
}

/// Keep an ended episode of `d`'s direction if it has the signature.
fn conclude(hits: &mut Vec<Hit>, stream: StreamId, dir: Direction, ep: Box<Episode>, d: &DirState) {
    let (largest, n, sk) = (
        d.ledger.largest_acked_payload,
        d.ledger.acked_segments,
        d.scale_known,
    );
    if qualifies(&ep, largest, n, sk) {
        hits.push(Hit {
            stream,
            dir,
            ep,
            largest_acked_payload: largest,
            scale_known: sk,
        });
    }
}

/// An ended episode has the signature (all but the vantage test, which
/// needs the TTLs seen up to the end).
fn qualifies(
    ep: &Episode,
    largest_acked_payload: u32,
    acked_segments: u64,
    scale_known: bool,
) -> bool {
    if ep.retx_count < MIN_RETRANSMISSIONS || ep.zero_seen {
        return false;
    }
    let gaps = ladder_gaps(ep);
    if backoff_doublings(&gaps) < 2 {
        return false;
    }
    // The window must have been open for this segment.
    let Some(before) = ep.last_ack_before else {
        return false;
    };
    if before.raw == 0 || (scale_known && before.window < ep.len) {
        return false;
    }
    // The path must carry segments of this size (else: mss-blackhole).
    if largest_acked_payload < ep.len {
        return false;
    }
    // A receive buffer only fills after the receiver has taken in far more
    // than its window (seed 003: megabytes queued behind a 32 KB window).
    // Tiny segments fill it by count instead (skb truesize; seed 003's
    // "reader never reads" case with 4-byte writes).
    let min_bytes = (u64::from(before.window).saturating_mul(BUSY_WINDOWS)).max(MIN_ACKED_BYTES);
    let busy_bytes = ep.stuck_seq >= 0 && (ep.stuck_seq as u64) >= min_bytes;
    busy_bytes || acked_segments >= MIN_ACKED_SEGMENTS
}

fn ladder_gaps(ep: &Episode) -> Vec<i64> {
    let mut ts: Vec<i64> = Vec::with_capacity(ep.retx.len() + 1);
    if let Some(o) = ep.orig {
        ts.push(o.ts.0);
    }
    ts.extend(ep.retx.iter().map(|t| t.ts.0));
    ts.windows(2)
        .map(|w| w[1].saturating_sub(w[0]).max(0))
        .collect()
}

/// How the capture proves that the receiver got the retransmissions it did
/// not acknowledge (signature point 5 of the README).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proof {
    /// The receiver answered retransmissions with duplicate ACKs at the stuck
    /// sequence and an open window (seed 003's production trace).
    DuplicateAcks,
    /// Unanswered, but the receiver's TTL is initial and the sender's
    /// decremented: the capture was taken at the receiver's end.
    CapturedAtReceiver,
    /// Unanswered, but the receiver's TTL is initial: the capture was taken on
    /// the receiver's link (the lab's kernel-6.1 capture).
    CapturedOnReceiverLink,
}

/// The `evidence` object of a `missing-zero-window` finding: keys, order and
/// units of the JSON report (see the crate README, section Evidence).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MissingZeroWindowEvidence {
    /// The side that stopped acknowledging.
    pub receiver: Peer,
    /// The side re-sending.
    pub sender: Peer,
    /// Relative sequence (bytes) where the receiver's cumulative ACK stopped.
    pub stuck_ack: i64,
    /// Payload of the stuck segment (bytes).
    pub segment_bytes: u32,
    /// The receiver's distinct windows from its last ACK before the drop
    /// through the episode, sorted (bytes; raw values when the scale is unknown).
    pub windows_advertised: Vec<u64>,
    /// Window of the receiver's last ACK before the drop (bytes).
    pub window_at_drop_bytes: u64,
    /// The handshake was captured: windows are scaled bytes.
    pub window_scale_known: bool,
    /// Re-sends of the stuck segment (count).
    pub retransmissions: u32,
    /// Gaps between successive transmissions of the stuck segment (ms).
    pub rto_ladder_ms: Vec<f64>,
    /// Gaps that roughly doubled the previous one (count).
    pub backoff_doublings: usize,
    /// Original transmission → the ACK that ended the episode, else → the
    /// last retransmission (ms).
    pub duration_ms: f64,
    /// Duplicate ACKs at `stuck_ack` with a non-zero window answering a
    /// retransmission (count).
    pub receiver_answers_open_window: u64,
    /// Receiver TTL initial, sender's decremented: captured at the receiver's end.
    pub capture_at_receiver: bool,
    /// Receiver TTL initial: captured on the receiver's link.
    pub capture_on_receiver_link: bool,
    /// Highest TTL / hop limit of the sender's packets, if seen.
    pub sender_ttl: Option<u8>,
    /// Highest TTL / hop limit of the receiver's packets, if seen.
    pub receiver_ttl: Option<u8>,
    /// Largest segment acknowledged in that direction (bytes, TCP payload).
    pub largest_acked_payload: u32,
    /// The receiver's ACK eventually passed `stuck_ack`.
    pub acknowledged_later: bool,
    /// Always false: with a zero window this is `zero-window`.
    pub zero_window_seen: bool,
    /// Only when the stuck segment was still unacknowledged when the capture
    /// ended before its next retransmission was due (censored at the
    /// capture's edge): its last retransmission → the end of the capture
    /// (ms). Omitted otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_at_capture_end_ms: Option<f64>,
    /// With `open_at_capture_end_ms`: the nominal wait before that next
    /// retransmission, double the last gap (RFC 6298 §5.5, at most
    /// `TCP_RTO_MAX` 120 s) (ms). Omitted otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_retransmission_due_ms: Option<f64>,
}

/// One receiver dropping data behind an open window: plain data, rendered
/// into a [`Finding`] by [`render()`].
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnosis {
    /// Always [`Severity::Error`].
    pub severity: Severity,
    /// The `tcp.stream`.
    pub stream: StreamId,
    /// The flow (client → server) as the flow table saw it.
    pub flow: Option<FlowRef>,
    /// Direction of the stuck data (sender → receiver).
    pub data_dir: Direction,
    /// How the capture proves the receiver got the retransmissions.
    pub proof: Proof,
    /// Last ACK before the drop, original transmission, retransmissions,
    /// answering duplicate ACKs and the ending ACK (unsorted).
    pub frames: Vec<FrameNo>,
    /// The receiver's last ACK before the drop (else the first transmission),
    /// ns since the Unix epoch.
    pub start_ns: i64,
    /// The ACK that ended the episode, else the last retransmission, ns since
    /// the Unix epoch.
    pub end_ns: i64,
    /// The evidence object.
    pub evidence: MissingZeroWindowEvidence,
}

impl MissingZeroWindow {
    /// End of capture: one [`Diagnosis`] per qualified episode, in the order
    /// the episodes ended (those still open at the end in (`tcp.stream`,
    /// direction) order). Consumes the detector's state.
    pub fn diagnose(&mut self, ctx: &FinishContext) -> Vec<Diagnosis> {
        let mut keys: Vec<StreamId> = self.streams.keys().copied().collect();
        keys.sort_unstable();
        for k in keys {
            if let Some(st) = self.streams.remove(&k) {
                for (i, d) in st.into_iter().enumerate() {
                    if let Some(mut d) = d {
                        if let Some(ep) = d.ep.take() {
                            conclude(&mut self.hits, k, dir_of(i), ep, &d);
                        }
                    }
                }
            }
        }
        std::mem::take(&mut self.hits)
            .into_iter()
            .filter_map(|h| self.diagnose_hit(ctx, h))
            .collect()
    }

    /// The diagnosis of one qualified episode, or `None` when the capture does
    /// not prove the receiver got the retransmissions.
    fn diagnose_hit(&self, ctx: &FinishContext, h: Hit) -> Option<Diagnosis> {
        let ep = &h.ep;
        let ttls = self.ttl.get(h.stream).copied().unwrap_or_default();
        let rttl = ttls[h.dir.reverse().index()];
        let sttl = ttls[h.dir.index()];
        // The receiver's packets still carry an initial TTL: the capture
        // point is on the receiver's own link, so retransmissions seen here
        // reached it. If the sender's are decremented, the capture is at the receiver's end.
        let on_receiver_link = rttl.is_some_and(is_initial_ttl);
        let at_receiver = on_receiver_link && sttl.is_some_and(|t| !is_initial_ttl(t));
        let proof = if ep.answered_count > 0 {
            Proof::DuplicateAcks
        } else if at_receiver {
            Proof::CapturedAtReceiver
        } else if on_receiver_link {
            Proof::CapturedOnReceiverLink
        } else {
            // Unanswered and seen from afar: a dead peer or path looks the same.
            return None;
        };
        let gaps = ladder_gaps(ep);
        let before = ep.last_ack_before;
        let mut windows: BTreeSet<u64> = ep.windows.clone();
        if let Some(b) = before {
            windows.insert(u64::from(b.window));
        }
        let start = ep.orig.or(ep.retx.first().copied());
        let end_ts = ep.acked_at.map(|a| a.1).or(ep.retx.last().map(|t| t.ts));
        let dur_ns = match (start, end_ts) {
            (Some(s), Some(e)) => e.0.saturating_sub(s.ts.0).max(0),
            _ => 0,
        };
        let start_ns = before
            .map(|b| b.ts.0)
            .or(start.map(|s| s.ts.0))
            .unwrap_or(0);
        // Still unacknowledged when the capture ended, before the next
        // re-send was due: how the episode ended is not in the capture.
        let open = match (ep.acked_at, ep.retx.last()) {
            (None, Some(last)) => {
                let next = next_backoff_ns(gaps.last().copied().unwrap_or(0));
                ctx.open_at_end(None, last.ts, next)
                    .map(|after| (after, next))
            }
            _ => None,
        };
        let evidence = MissingZeroWindowEvidence {
            receiver: Peer::sender_of(ctx, h.stream, h.dir.reverse()),
            sender: Peer::sender_of(ctx, h.stream, h.dir),
            stuck_ack: ep.stuck_seq,
            segment_bytes: ep.len,
            windows_advertised: windows.into_iter().collect(),
            window_at_drop_bytes: before.map_or(0, |b| u64::from(b.window)),
            window_scale_known: h.scale_known,
            retransmissions: ep.retx_count,
            rto_ladder_ms: gaps.iter().map(|g| ns_to_ms(*g)).collect(),
            backoff_doublings: backoff_doublings(&gaps),
            duration_ms: ns_to_ms(dur_ns),
            receiver_answers_open_window: ep.answered_count,
            capture_at_receiver: at_receiver,
            capture_on_receiver_link: on_receiver_link,
            sender_ttl: sttl,
            receiver_ttl: rttl,
            largest_acked_payload: h.largest_acked_payload,
            acknowledged_later: ep.acked_at.is_some(),
            zero_window_seen: false,
            open_at_capture_end_ms: open.map(|(after, _)| ns_to_ms(after)),
            next_retransmission_due_ms: open.map(|(_, next)| ns_to_ms(next)),
        };
        Some(Diagnosis {
            severity: Severity::Error,
            stream: h.stream,
            flow: ctx.flow_ref(h.stream),
            data_dir: h.dir,
            proof,
            frames: cited_frames(ep),
            start_ns,
            end_ns: end_ts.map(|t| t.0).unwrap_or(start_ns),
            evidence,
        })
    }
}

/// Frames proving an episode: the last ACK before the drop, the original
/// transmission, up to 16 retransmissions, the answering duplicate ACKs and
/// the ACK that ended it.
fn cited_frames(ep: &Episode) -> Vec<FrameNo> {
    let mut frames: Vec<FrameNo> = Vec::new();
    if let Some(b) = ep.last_ack_before {
        frames.push(b.frame);
    }
    if let Some(o) = ep.orig {
        frames.push(o.frame);
    }
    frames.extend(ep.retx.iter().take(MAX_CITE).map(|t| t.frame));
    frames.extend(ep.answered.iter().copied());
    if let Some(a) = ep.acked_at {
        frames.push(a.0);
    }
    frames
}

impl Detector for MissingZeroWindow {
    fn info(&self) -> DetectorInfo {
        DetectorInfo {
            id: ID,
            aliases: &[],
            title: "Receiver drops data behind an open window (missing zero window)",
            explain: include_str!("../README.md"),
        }
    }

    fn on_flow_event(&mut self, event: &FlowEvent) {
        match event {
            FlowEvent::Segment(seg) => self.on_segment(seg),
            FlowEvent::FlowEnded(e) => self.on_flow_ended(e.stream),
            _ => {}
        }
    }

    fn on_packet(&mut self, pkt: &PacketContext<'_>) {
        if let (Some(stream), Some(dir), Some(ip)) = (pkt.flow.stream, pkt.flow.dir, pkt.decoded.ip)
        {
            if matches!(pkt.decoded.transport, pcapsleuth_decode::Transport::Tcp(_)) {
                let e = &mut self.ttl.get_mut(stream)[dir.index()];
                *e = Some(e.map_or(ip.ttl, |t| t.max(ip.ttl)));
            }
        }
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        self.diagnose(ctx).iter().map(render).collect()
    }
}
