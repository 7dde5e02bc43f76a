#![doc = include_str!("../README.md")]

mod render;

pub use pcapsleuth_detect::{Peer, Role};
pub use render::render;

use pcapsleuth_core::{Direction, FlowRef, FrameNo, StreamId, Timestamp};
use pcapsleuth_decode::IcmpKind;
use pcapsleuth_detect::retx::{backoff_doublings, ns_to_ms, DirLedger, Outcome, Retired};
use pcapsleuth_detect::timer::next_backoff_ns;
use pcapsleuth_detect::{Detector, DetectorInfo, Finding, FinishContext, FlowEvent, Severity};
use pcapsleuth_flow::SegmentEvent;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

/// Detector id (the truth files use it).
pub const ID: &str = "mss-blackhole";

/// Alias under which the detector is also documented.
pub const ALIAS: &str = "pmtu-blackhole";

/// Fewest retransmissions of the same oversized segment.
pub const MIN_RETRANSMISSIONS: u32 = 3;

/// The path MTU assumed when nothing larger is proven to pass: the IPv6 minimum
/// link MTU (RFC 8200 §5), the conventional safe tunnel MTU (seed 004 uses MSS 1280).
pub const SAFE_PATH_MTU: u32 = 1280;

/// Smallest datagram every IPv4 path must carry (RFC 791 / RFC 1122 §3.3.3), bytes.
pub const MIN_MTU_V4: u32 = 576;

/// Smallest link MTU IPv6 allows (RFC 8200 §5), bytes.
pub const MIN_MTU_V6: u32 = 1280;

const MAX_CITE: usize = 24;

/// Why the capture shows that small packets pass in the failing direction
/// (signature point 2 of the README), strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmallPacketsPass {
    /// Smaller data segments were acknowledged in that direction.
    DataAcked,
    /// No data acknowledged, but the peer kept sending after the first loss.
    PeerKeptSending,
    /// Only the handshake passed ("ssh connects, scp stalls").
    HandshakeOnly,
}

/// The `evidence` object of an `mss-blackhole` finding: keys, order and units
/// of the JSON report (see the crate README, section Evidence).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MssBlackholeEvidence {
    /// The side whose large segments vanish.
    pub sender: Peer,
    /// Largest TCP payload acknowledged in that direction (bytes).
    pub largest_acked_segment: u32,
    /// IP datagram length of the largest segment acknowledged (bytes).
    pub largest_acked_ip_bytes: u32,
    /// TCP payload of the smallest segment that kept failing (bytes).
    pub smallest_unacked_segment: u32,
    /// IP datagram length of the smallest segment that kept failing (bytes).
    pub smallest_unacked_ip_bytes: u32,
    /// Re-sends of the stuck segment (count).
    pub retransmissions: u32,
    /// Segments that kept failing at their own size (count).
    pub failing_segments: usize,
    /// Gaps between the transmissions of the stuck segment (ms).
    pub rto_ladder_ms: Vec<f64>,
    /// Always false in a finding (with ICMP, PMTUD works: `frag-needed`).
    pub icmp_seen: bool,
    /// Largest IP datagram proven to pass, this flow or another between the
    /// same hosts in the same direction (bytes).
    pub path_mtu_lower_bound_bytes: u32,
    /// Smallest failing IP datagram − 1 (bytes).
    pub path_mtu_upper_bound_bytes: u32,
    /// The path MTU assumed for the recommendation (bytes).
    pub path_mtu_bound_bytes: u32,
    /// `path_mtu_bound_bytes` − 40 (IPv4) or − 60 (IPv6): the MSS to clamp to (bytes).
    pub recommended_mss: u32,
    /// The sender re-sent the stuck bytes in smaller segments that passed.
    pub sender_recovered_by_mtu_probing: bool,
    /// First transmission of the stuck segment → its first smaller re-send
    /// when the sender recovered, else → its last transmission (ms).
    pub stall_ms: f64,
    /// Only when the stuck segment was still unacknowledged when the capture
    /// ended before its next retransmission was due (censored at the
    /// capture's edge): its last transmission → the end of the capture (ms).
    /// Omitted otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_at_capture_end_ms: Option<f64>,
    /// With `open_at_capture_end_ms`: the nominal wait before that next
    /// retransmission, double the last gap (RFC 6298 §5.5, at most
    /// `TCP_RTO_MAX` 120 s) (ms). Omitted otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_retransmission_due_ms: Option<f64>,
}

/// One direction of a flow whose large segments vanish: plain data, rendered
/// into a [`Finding`] by [`render()`].
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnosis {
    /// [`Severity::Warning`] when the sender recovered by MTU probing, else
    /// [`Severity::Error`].
    pub severity: Severity,
    /// The `tcp.stream`.
    pub stream: StreamId,
    /// The flow (client → server) as the flow table saw it.
    pub flow: Option<FlowRef>,
    /// Direction of the vanishing segments.
    pub data_dir: Direction,
    /// The receiving end (the segments' destination).
    pub receiver: Peer,
    /// The flow is IPv6 (ICMPv6 Packet Too Big rather than ICMP frag-needed).
    pub ipv6: bool,
    /// TCP payload of the stuck segment, the one re-sent most (bytes).
    pub stuck_segment_bytes: u32,
    /// Why small packets are known to pass.
    pub small_packets: SmallPacketsPass,
    /// Transmissions of the stuck segment, first transmissions of the other
    /// failing segments, the first smaller re-send and the covering ACK (unsorted).
    pub frames: Vec<FrameNo>,
    /// First transmission of the stuck segment, ns since the Unix epoch.
    pub start_ns: i64,
    /// The ACK covering it, else its last transmission, ns since the Unix epoch.
    pub end_ns: i64,
    /// The evidence object.
    pub evidence: MssBlackholeEvidence,
}

fn dir_of(i: usize) -> Direction {
    if i == 0 {
        Direction::ClientToServer
    } else {
        Direction::ServerToClient
    }
}

fn all_gaps(r: &Retired) -> Vec<i64> {
    r.record.gaps_ns()
}

/// Segments that kept failing at their own size, with backoff: unacknowledged
/// at the end, or acknowledged only after being superseded by smaller re-sends.
fn failing_segments(retired: &[Retired]) -> Vec<&Retired> {
    retired
        .iter()
        .filter(|r| {
            let unacked_at_size = match r.outcome {
                Outcome::CaptureEnd => true,
                Outcome::Acked { .. } => r.record.superseded(),
            };
            unacked_at_size && backoff_doublings(&all_gaps(r)) >= 2
        })
        .collect()
}

/// Path-MTU bounds `(lower, upper, bound)` in bytes from the largest datagram
/// acknowledged on this flow, on any flow between the same hosts (`cross`),
/// and the smallest failing datagram.
fn path_mtu_bounds(largest_acked_ip: u32, cross: u32, smallest_ip: u32) -> (u32, u32, u32) {
    let upper = smallest_ip.saturating_sub(1);
    let lower = largest_acked_ip.max(cross.min(upper));
    let bound = if upper >= SAFE_PATH_MTU {
        lower.max(SAFE_PATH_MTU)
    } else {
        lower
    };
    (lower, upper, bound)
}

/// Frames proving the black hole (see [`Diagnosis::frames`]).
fn cited_frames(main: &Retired, failing: &[&Retired]) -> Vec<FrameNo> {
    let mut frames: Vec<FrameNo> = main.record.txs().iter().map(|t| t.frame).collect();
    for r in failing {
        if frames.len() >= MAX_CITE {
            break;
        }
        if let Some(t) = r.record.txs().first() {
            frames.push(t.frame);
        }
    }
    if let Some(t) = main.record.superseded_by() {
        frames.push(t.frame); // first smaller re-send (tcp_mtu_probing)
    }
    if let Outcome::Acked { frame, .. } = main.outcome {
        frames.push(frame);
    }
    frames
}

#[derive(Debug, Clone, Default)]
struct DirState {
    ledger: DirLedger,
    /// Timestamp (ns) of the peer's last segment on this flow.
    peer_last_ts: Option<i64>,
}

/// Per direction of data ([`Direction::index`]) of a stream past its SYN.
type Stream = [Option<DirState>; 2];

/// A direction of an ended stream with segments that kept failing: what the
/// diagnosis needs (its ledger finished, the failing records apart).
#[derive(Debug, Clone)]
struct Ended {
    key: (StreamId, usize),
    st: DirState,
    failing: Vec<Retired>,
}

/// The `mss-blackhole` detector.
///
/// Memory: nothing for a stream that sent only SYNs; a boxed pair of
/// ledgers once a segment carries an ACK or data, until the stream's
/// [`FlowEvent::FlowEnded`]; then its directions with failing segments (and
/// the largest datagram acknowledged per direction, 16 bytes, for the path
/// bounds of other flows between the same hosts) are kept.
#[derive(Debug, Default)]
pub struct MssBlackhole {
    streams: pcapsleuth_detect::StreamMap<StreamId, Box<Stream>>,
    ended: Vec<Ended>,
    /// Largest IP datagram acknowledged (bytes, > 0) per direction of ended streams.
    ended_acked_ip: Vec<(StreamId, usize, u32)>,
    icmp_streams: pcapsleuth_detect::StreamSet<StreamId>,
    icmp_pairs: HashSet<(IpAddr, IpAddr)>,
}

impl MssBlackhole {
    fn new_dir() -> DirState {
        DirState {
            ledger: DirLedger::new(MIN_RETRANSMISSIONS),
            peer_last_ts: None,
        }
    }

    /// Streams with live state (past the SYN, not ended).
    pub fn active_streams(&self) -> usize {
        self.streams.len()
    }

    /// Heap bytes held for live streams (by capacity: map slots, boxes,
    /// segment queues), excluding what ended streams left for the diagnosis.
    pub fn state_bytes(&self) -> usize {
        let slot = std::mem::size_of::<(StreamId, Box<Stream>)>() + 1;
        let queues: usize = self
            .streams
            .values()
            .flat_map(|s| s.iter().flatten())
            .map(|d| {
                d.ledger.unacked_len()
                    * std::mem::size_of::<pcapsleuth_detect::retx::SegmentRecord>()
            })
            .sum();
        self.streams.capacity() * slot + self.streams.len() * std::mem::size_of::<Stream>() + queues
    }

    fn on_segment(&mut self, seg: &SegmentEvent) {
        if seg.duplicate_of.is_some() {
            return;
        }
        let data = seg.payload_len > 0 && !seg.flags.syn() && !seg.flags.rst();
        let ack = seg.flags.ack();
        let st = if data || ack {
            self.streams.entry(seg.stream).or_default()
        } else {
            match self.streams.get_mut(&seg.stream) {
                Some(st) => st,
                None => return,
            }
        };
        if data {
            st[seg.dir.index()]
                .get_or_insert_with(Self::new_dir)
                .ledger
                .on_data(seg);
        }
        let peer = &mut st[seg.dir.reverse().index()];
        // Every ACK counts (the SYN/ACK acknowledging the SYN proves the handshake passed).
        if ack || peer.is_some() {
            let p = peer.get_or_insert_with(Self::new_dir);
            p.peer_last_ts = Some(seg.ts.0);
            if ack && !seg.flags.rst() {
                if let Some(a) = seg.rel_ack {
                    p.ledger.on_ack(a, seg.frame, seg.ts);
                }
            }
        }
    }

    /// The stream left the flow table: finish its ledgers, keep what the
    /// diagnosis and the path bounds of other flows need, drop the rest.
    fn on_flow_ended(&mut self, stream: StreamId) {
        let Some(st) = self.streams.remove(&stream) else {
            return;
        };
        for (di, d) in st.into_iter().enumerate() {
            let Some(mut d) = d else { continue };
            d.ledger.finish();
            if d.ledger.largest_acked_ip > 0 {
                self.ended_acked_ip
                    .push((stream, di, d.ledger.largest_acked_ip));
            }
            let retired = d.ledger.take_retired();
            let failing: Vec<Retired> = failing_segments(&retired).into_iter().cloned().collect();
            if !failing.is_empty() {
                self.ended.push(Ended {
                    key: (stream, di),
                    st: d,
                    failing,
                });
            }
        }
    }

    /// End of capture: one [`Diagnosis`] per flow direction with a path-MTU
    /// black hole, in (`tcp.stream`, direction) order. Consumes the detector's state.
    pub fn diagnose(&mut self, ctx: &FinishContext) -> Vec<Diagnosis> {
        let mut all = std::mem::take(&mut self.ended);
        let mut live: Vec<(StreamId, Box<Stream>)> =
            std::mem::take(&mut self.streams).into_iter().collect();
        live.sort_unstable_by_key(|(k, _)| *k);
        let mut acked_ip = std::mem::take(&mut self.ended_acked_ip);
        for (stream, st) in live {
            for (di, d) in st.into_iter().enumerate() {
                let Some(mut d) = d else { continue };
                d.ledger.finish();
                acked_ip.push((stream, di, d.ledger.largest_acked_ip));
                let failing = d.ledger.take_retired();
                all.push(Ended {
                    key: (stream, di),
                    st: d,
                    failing,
                });
            }
        }
        // Largest IP datagram acknowledged per (src addr, dst addr), across flows.
        let mut pair_lower: HashMap<(IpAddr, IpAddr), u32> = HashMap::new();
        for (stream, di, ip) in acked_ip {
            if let Some((c, s)) = ctx.streams.get(&stream) {
                let (src, dst) = if di == 0 {
                    (c.addr, s.addr)
                } else {
                    (s.addr, c.addr)
                };
                let e = pair_lower.entry((src, dst)).or_insert(0);
                *e = (*e).max(ip);
            }
        }
        // (stream, direction) order; an ended stream's direction before the
        // live state of a stream that later reused its id (stable sort).
        all.sort_by_key(|e| e.key);
        all.into_iter()
            .filter_map(|e| {
                let (stream, di) = e.key;
                self.diagnose_direction(ctx, &pair_lower, stream, dir_of(di), &e.st, &e.failing)
            })
            .collect()
    }

    /// The diagnosis of one flow direction, if it has the signature.
    fn diagnose_direction(
        &self,
        ctx: &FinishContext,
        pair_lower: &HashMap<(IpAddr, IpAddr), u32>,
        stream: StreamId,
        dir: Direction,
        st: &DirState,
        retired: &[Retired],
    ) -> Option<Diagnosis> {
        let failing = failing_segments(retired);
        let main = failing
            .iter()
            .max_by_key(|r| (r.record.tx_count(), std::cmp::Reverse(r.record.rel_seq)))?;
        let smallest_ip = failing.iter().map(|r| r.record.ip_len).min().unwrap_or(0);
        let smallest_payload = failing
            .iter()
            .map(|r| r.record.payload_len)
            .min()
            .unwrap_or(0);
        let ends = ctx.streams.get(&stream);
        let v6 = ends.is_some_and(|(c, _)| c.addr.is_ipv6());
        // Every IPv4 path carries 576-byte datagrams (RFC 791, RFC 1122
        // 3.3.3) and every IPv6 path 1280 (RFC 8200 section 5): smaller losses are not an MTU limit.
        if smallest_ip <= if v6 { MIN_MTU_V6 } else { MIN_MTU_V4 } {
            return None;
        }
        let l = &st.ledger;
        if l.largest_acked_ip >= smallest_ip || l.largest_acked_payload >= smallest_payload {
            return None; // that size got through: loss, not a size limit
        }
        let first_fail_ts = main
            .record
            .txs()
            .first()
            .map(|t| t.ts.0)
            .unwrap_or(i64::MAX);
        // Small packets pass: smaller data was acknowledged, the peer kept
        // sending after the first loss, or at least the handshake completed.
        let small_packets = if l.acked_segments > 0 {
            SmallPacketsPass::DataAcked
        } else if st.peer_last_ts.is_some_and(|t| t > first_fail_ts) {
            SmallPacketsPass::PeerKeptSending
        } else if l.highest_ack.is_some() {
            SmallPacketsPass::HandshakeOnly
        } else {
            return None;
        };
        let sender = Peer::sender_of(ctx, stream, dir);
        let receiver = Peer::sender_of(ctx, stream, dir.reverse());
        let pair = sender
            .endpoint
            .zip(receiver.endpoint)
            .map(|(s, d)| (s.addr, d.addr));
        let icmp_seen = self.icmp_streams.contains(&stream)
            || pair.is_some_and(|p| self.icmp_pairs.contains(&p));
        if icmp_seen {
            return None; // PMTUD works: frag-needed covers it
        }
        let recovered = failing
            .iter()
            .any(|r| r.record.superseded() && matches!(r.outcome, Outcome::Acked { .. }));
        let cross = pair.and_then(|p| pair_lower.get(&p).copied()).unwrap_or(0);
        let (lower, upper, bound) = path_mtu_bounds(l.largest_acked_ip, cross, smallest_ip);
        let overhead = if v6 { 60 } else { 40 };
        let start_ns = main.record.txs().first().map(|t| t.ts.0).unwrap_or(0);
        let last_tx_ns = main.record.txs().last().map(|t| t.ts.0).unwrap_or(start_ns);
        let end_ns = match main.outcome {
            Outcome::Acked { ts, .. } => ts.0,
            Outcome::CaptureEnd => last_tx_ns,
        };
        let stall_end = main.record.superseded_by().map_or(last_tx_ns, |t| t.ts.0);
        // Still stuck when the capture ended, before the next re-send was
        // due: whether the sender would still recover is not in the capture.
        let open = match main.outcome {
            Outcome::CaptureEnd if !recovered => {
                let next = next_backoff_ns(all_gaps(main).last().copied().unwrap_or(0));
                ctx.open_at_end(None, Timestamp(last_tx_ns), next)
                    .map(|after| (after, next))
            }
            _ => None,
        };
        let evidence = MssBlackholeEvidence {
            sender,
            largest_acked_segment: l.largest_acked_payload,
            largest_acked_ip_bytes: l.largest_acked_ip,
            smallest_unacked_segment: smallest_payload,
            smallest_unacked_ip_bytes: smallest_ip,
            retransmissions: main.record.retransmissions(),
            failing_segments: failing.len(),
            rto_ladder_ms: all_gaps(main).iter().map(|g| ns_to_ms(*g)).collect(),
            icmp_seen: false,
            path_mtu_lower_bound_bytes: lower,
            path_mtu_upper_bound_bytes: upper,
            path_mtu_bound_bytes: bound,
            recommended_mss: bound.saturating_sub(overhead),
            sender_recovered_by_mtu_probing: recovered,
            stall_ms: ns_to_ms(stall_end.saturating_sub(start_ns).max(0)),
            open_at_capture_end_ms: open.map(|(after, _)| ns_to_ms(after)),
            next_retransmission_due_ms: open.map(|(_, next)| ns_to_ms(next)),
        };
        Some(Diagnosis {
            severity: if recovered {
                Severity::Warning
            } else {
                Severity::Error
            },
            stream,
            flow: ctx.flow_ref(stream),
            data_dir: dir,
            receiver,
            ipv6: v6,
            stuck_segment_bytes: main.record.payload_len,
            small_packets,
            frames: cited_frames(main, &failing),
            start_ns,
            end_ns,
            evidence,
        })
    }
}

impl Detector for MssBlackhole {
    fn info(&self) -> DetectorInfo {
        DetectorInfo {
            id: ID,
            aliases: &[ALIAS],
            title: "Path-MTU black hole: large segments vanish, small ones pass (pmtu-blackhole)",
            explain: include_str!("../README.md"),
        }
    }

    fn on_flow_event(&mut self, event: &FlowEvent) {
        match event {
            FlowEvent::Segment(seg) => self.on_segment(seg),
            FlowEvent::FlowEnded(e) => self.on_flow_ended(e.stream),
            FlowEvent::IcmpError(ic)
                if ic.quotes_tcp()
                    && matches!(ic.kind, IcmpKind::FragNeeded | IcmpKind::PacketTooBig) =>
            {
                if let Some(s) = ic.stream {
                    self.icmp_streams.insert(s);
                }
                self.icmp_pairs
                    .insert((ic.quoted_src.addr, ic.quoted_dst.addr));
            }
            _ => {}
        }
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        self.diagnose(ctx).iter().map(render).collect()
    }
}
