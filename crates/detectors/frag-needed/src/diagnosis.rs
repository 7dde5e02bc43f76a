//! The decision: groups of ICMP messages → [`Diagnosis`] values (plain data,
//! no prose; [`crate::render`] writes the words).

use crate::group::Group;
use crate::recurrence::{BurstEvidence, Recurrence};
use crate::{encapsulation_guess, FragNeeded, Icmp, ETHERNET_MTU, IMMEDIATE_NS, STALL_NS};
use pcapsleuth_core::time::ns_to_ms;
use pcapsleuth_core::{Direction, Endpoint, FrameNo, Protocol, Severity, StreamId};
use pcapsleuth_detect::{FinishContext, FlowRef};
use serde::Serialize;
use std::collections::BTreeSet;
use std::net::IpAddr;

/// What the sender did with the quoted bytes after the first ICMP of a group
/// (JSON: lowercase).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SenderNext {
    /// Re-sent within [`IMMEDIATE_NS`] (10 ms).
    Immediate,
    /// Re-sent later than that.
    Delayed,
    /// Never re-sent in this capture.
    Never,
    /// No TCP flow to follow (non-TCP quote, or no quoted sequence).
    Unknown,
}

/// Which story a finding tells; decides the summary and the remedy.
/// Checked in declaration order (the first that holds wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The host refused its own packet (local route MTU below the socket's MSS).
    SelfAddressed,
    /// The quoted datagram exceeds the MTU but everything the sender was seen
    /// to send fits it: built after the capture point (LRO/GRO) or forged.
    QuotedNotCaptured,
    /// A router's ICMP, and the sender waited ≥ [`STALL_NS`] (150 ms).
    SenderStalled,
    /// A router's ICMP answered promptly (or not followable): PMTU discovery
    /// working as designed.
    PmtuDiscovery,
}

/// The `evidence` object of a `frag-needed` finding. Field order is the JSON
/// key order; see the crate README, section "Evidence".
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FragNeededEvidence {
    /// The MTU the ICMP announced, bytes (0 when absent).
    pub mtu: u32,
    /// ICMP messages in the group.
    pub count: usize,
    /// Any message of the group is self-addressed (see [`Verdict::SelfAddressed`]).
    pub self_addressed: bool,
    /// Source address of the first ICMP.
    pub icmp_source: IpAddr,
    /// Destination address of the first ICMP.
    pub icmp_destination: IpAddr,
    /// Raw TCP sequence number of the first quoted segment.
    pub quoted_seq: Option<u32>,
    /// That sequence relative to the sender's ISN, bytes.
    pub quoted_rel_seq: Option<i64>,
    /// Largest quoted IP datagram length, bytes.
    pub quoted_size_bytes: u32,
    /// Largest IP datagram captured in the quoted direction, bytes.
    pub largest_captured_bytes: Option<u32>,
    /// See [`Verdict::QuotedNotCaptured`].
    pub quoted_not_captured: bool,
    /// Quoted size − MTU, or 1500 − MTU when the quote is not larger, bytes.
    pub mtu_deficit_bytes: u32,
    /// [`encapsulation_guess`] of the MTU.
    pub encapsulation_guess: &'static str,
    /// What the sender did next.
    pub sender_next: SenderNext,
    /// First ICMP → the sender's next segment carrying the quoted sequence, ms.
    pub sender_delay_ms: Option<f64>,
    /// Frame of that segment.
    pub sender_next_frame: Option<FrameNo>,
    /// Direction of the quoted segment within its TCP stream.
    pub quoted_direction: Option<Direction>,
    /// Interval between bursts of ICMPs for the same destination and MTU
    /// after the host's learned path MTU expired (median, s with ms
    /// precision), or null when frag-needed did not recur.
    pub recurrence_s: Option<f64>,
    /// Recurring route only: this burst's position among `bursts`, from 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<usize>,
    /// Recurring route only: every burst of the route (quoted source,
    /// destination, MTU).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bursts: Vec<BurstEvidence>,
    /// Recurring route only: first self-addressed ICMP of the burst → its
    /// sender's next segment carrying the refused sequence, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub self_addressed_delay_ms: Option<f64>,
    /// Recurring route only: frame of that segment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub self_addressed_next_frame: Option<FrameNo>,
    /// Only when the finding has more distinct frames than it cites
    /// ([`crate::FRAMES_CITED_HEAD`] + [`crate::FRAMES_CITED_TAIL`]): how
    /// many (ICMP frames, quoted segments captured, the sender's next
    /// segment); `frames` then cites the first 100 and the last 10.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frames_total: Option<usize>,
    /// Only on a flood finding: its messages each quote a flow the capture
    /// does not hold, beyond the first [`crate::UNPLACED_GROUPS_CAP`] such
    /// flows (reported one by one); `count` says how many were folded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flood: Option<FloodEvidence>,
}

/// The `flood` object of a flood finding (see [`crate::UNPLACED_GROUPS_CAP`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FloodEvidence {
    /// Quoted flows reported in findings of their own before the fold began.
    pub reported_apart: usize,
    /// The finding folds the messages of every ICMP source beyond the first
    /// [`crate::FLOOD_SOURCES_CAP`] (its `icmp_source` and `mtu` are those
    /// of its first message), not one source's.
    pub other_sources: bool,
}

/// One group of ICMP messages, diagnosed.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnosis {
    /// Warning when self-addressed or the sender stalled, else info.
    pub severity: Severity,
    /// Which story the finding tells.
    pub verdict: Verdict,
    /// `tcp.stream` of the quoted flow, when the flow table placed it (for a
    /// burst: the first ICMP's).
    pub stream: Option<StreamId>,
    /// Other `tcp.stream`s quoted by the ICMPs of a burst (ascending).
    pub other_streams: Vec<StreamId>,
    /// The flow: the TCP stream's, else the quoted endpoints with the quoted
    /// protocol (`None` for protocols other than TCP, UDP, ICMP, ICMPv6).
    pub flow: Option<FlowRef>,
    /// Quoted packet's source (port 0 when it has none).
    pub quoted_src: Endpoint,
    /// Quoted packet's destination (port 0 when it has none).
    pub quoted_dst: Endpoint,
    /// Quoted packet's IP protocol number.
    pub quoted_protocol: u8,
    /// ICMP frames, the quoted segments matched in the capture and the
    /// sender's next segment; ascending, deduplicated; at most the first
    /// [`crate::FRAMES_CITED_HEAD`] and the last [`crate::FRAMES_CITED_TAIL`].
    pub frames: Vec<FrameNo>,
    /// How many distinct frames there are in all (≥ `frames.len()`).
    pub frames_total: usize,
    /// Earliest ICMP (or reaction) timestamp, ns since the Unix epoch.
    pub start_ns: i64,
    /// Latest ICMP (or reaction) timestamp, ns since the Unix epoch.
    pub end_ns: i64,
    /// The evidence object.
    pub evidence: FragNeededEvidence,
}

/// Grouping key: TCP stream (with its quoted direction index), else the
/// quoted addresses and protocol; plus the MTU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum GroupKey {
    Tcp(StreamId, u8, u32),
    Other(IpAddr, IpAddr, u8, u32),
}

impl FragNeeded {
    /// Diagnose every group of ICMP messages seen so far: one [`Diagnosis`]
    /// per group (in group-key order), except that the ICMPs of a route whose
    /// frag-needed recurred give one [`Diagnosis`] per burst (after the
    /// groups, in route then burst order); then one per flood (by ICMP
    /// source and MTU, the sources beyond [`crate::FLOOD_SOURCES_CAP`] first).
    pub fn diagnose(&self, ctx: &FinishContext) -> Vec<Diagnosis> {
        let recurring = self.recurrences();
        // A group lies within one route (its quoted addresses and MTU): the
        // groups of a recurring route are reported per burst instead.
        let mut out: Vec<Diagnosis> = self
            .groups
            .iter()
            .filter(|(_, g)| !recurring.contains_key(&g.first.route()))
            .filter_map(|(key, g)| {
                let (stream, dir) = match *key {
                    GroupKey::Tcp(s, d, _) => (Some(s), Some(dir_of(d))),
                    GroupKey::Other(..) => (None, None),
                };
                self.diagnose_group(g.clone(), stream, dir, ctx)
            })
            .collect();
        for (route, rec) in &recurring {
            let Some(detail) = self.routes.get(route) else {
                continue;
            };
            for (k, burst) in rec.bursts.iter().enumerate() {
                let list: Vec<&Icmp> = burst.iter().filter_map(|&n| detail.icmps.get(n)).collect();
                out.extend(self.diagnose_burst(rec, k, &list, ctx));
            }
        }
        for (key, g) in &self.floods {
            out.extend(self.diagnose_flood(g.clone(), key.is_none(), ctx));
        }
        out
    }

    /// A flood: messages quoting flows the capture does not hold, folded
    /// beyond [`crate::UNPLACED_GROUPS_CAP`]. Named after no flow (each
    /// message quotes its own); the first message's quote is in the prose.
    fn diagnose_flood(
        &self,
        g: Group,
        other_sources: bool,
        ctx: &FinishContext,
    ) -> Option<Diagnosis> {
        let mut d = self.diagnose_group(g, None, None, ctx)?;
        d.flow = None;
        d.evidence.flood = Some(FloodEvidence {
            reported_apart: crate::UNPLACED_GROUPS_CAP,
            other_sources,
        });
        Some(d)
    }

    /// Burst `k` of a recurring route: the ICMPs of every stream of the
    /// route in that burst (`list`), named after the first ICMP's stream.
    fn diagnose_burst(
        &self,
        rec: &Recurrence,
        k: usize,
        list: &[&Icmp],
        ctx: &FinishContext,
    ) -> Option<Diagnosis> {
        let mut g = Group::of(list)?;
        let (stream, dir) = (g.first.stream, g.first.quoted_dir);
        let own = list
            .iter()
            .find(|i| i.self_addressed())
            .and_then(|i| Some((*i, self.follow.result(i.watch?)?)));
        if let Some((_, r)) = own {
            g.frames.add_segment(r.frame);
        }
        let mut d = self.diagnose_group(g, stream, dir, ctx)?;
        let streams: BTreeSet<StreamId> = list.iter().filter_map(|i| i.stream).collect();
        d.other_streams = streams
            .into_iter()
            .filter(|s| Some(*s) != d.stream)
            .collect();
        if let Some((i, r)) = own {
            d.evidence.self_addressed_delay_ms = Some(ns_to_ms(r.ts.0.saturating_sub(i.ts.0)));
            d.evidence.self_addressed_next_frame = Some(r.frame);
            d.start_ns = d.start_ns.min(r.ts.0);
            d.end_ns = d.end_ns.max(r.ts.0);
        }
        d.evidence.recurrence_s = Some(rec.period_s);
        d.evidence.burst = Some(k + 1);
        d.evidence.bursts = rec.listed.clone();
        Some(d)
    }

    /// The diagnosis of the ICMPs folded in `g`, reported on `stream` with
    /// quoted direction `dir` (both `None` for a quote the flow table could not
    /// place). `recurrence_s` is left null.
    fn diagnose_group(
        &self,
        mut g: Group,
        stream: Option<StreamId>,
        dir: Option<Direction>,
        ctx: &FinishContext,
    ) -> Option<Diagnosis> {
        let first = &g.first;
        let mtu = first.mtu.unwrap_or(0);
        let self_addressed = g.self_addressed;
        let quoted_size = g.quoted_size;
        let deficit = if quoted_size > mtu {
            quoted_size - mtu
        } else {
            ETHERNET_MTU.saturating_sub(mtu)
        };
        let reaction = first.watch.and_then(|w| self.follow.result(w));
        let (sender_next, delay_ns) = match (first.watch, reaction) {
            (None, _) => (SenderNext::Unknown, None),
            (Some(_), None) => (SenderNext::Never, None),
            (Some(_), Some(r)) => {
                let d = r.ts.0.saturating_sub(first.ts.0);
                let next = if d <= IMMEDIATE_NS {
                    SenderNext::Immediate
                } else {
                    SenderNext::Delayed
                };
                (next, Some(d))
            }
        };
        let stalled = delay_ns.is_some_and(|d| d >= STALL_NS);

        let mut start_ns = g.start_ns;
        let mut end_ns = g.end_ns;
        if let Some(r) = reaction {
            start_ns = start_ns.min(r.ts.0);
            end_ns = end_ns.max(r.ts.0);
        }

        // The quoted datagram is bigger than anything the sender was seen to
        // send, and what it sent fits the MTU: the oversize datagram was built
        // after the capture point (segments coalesced by LRO/GRO on a
        // forwarding device) or the ICMP is forged (RFC 5927 section 3).
        let largest_captured = match (stream, dir) {
            (Some(s), Some(d)) => self.largest_sent(s, d),
            _ => None,
        };
        let quoted_not_captured = largest_captured
            .is_some_and(|l| l > 0 && quoted_size > l && l <= mtu && quoted_size > mtu);

        let verdict = if self_addressed {
            Verdict::SelfAddressed
        } else if quoted_not_captured {
            Verdict::QuotedNotCaptured
        } else if stalled {
            Verdict::SenderStalled
        } else {
            Verdict::PmtuDiscovery
        };
        let severity = if self_addressed || stalled {
            Severity::Warning
        } else {
            Severity::Info
        };
        let flow = match stream {
            Some(s) => ctx.flow_ref(s),
            None => Protocol::from_ip_protocol(first.quoted_proto).map(|protocol| FlowRef {
                protocol,
                client: first.quoted_src.addr.to_string(),
                client_port: first.quoted_src.port,
                server: first.quoted_dst.addr.to_string(),
                server_port: first.quoted_dst.port,
            }),
        };
        let (quoted_src, quoted_dst, quoted_protocol) =
            (first.quoted_src, first.quoted_dst, first.quoted_proto);
        let evidence = FragNeededEvidence {
            mtu,
            count: g.count,
            self_addressed,
            icmp_source: first.icmp_src,
            icmp_destination: first.icmp_dst,
            quoted_seq: first.quoted_seq.map(|s| s.0),
            quoted_rel_seq: first.quoted_rel_seq,
            quoted_size_bytes: quoted_size,
            largest_captured_bytes: largest_captured,
            quoted_not_captured,
            mtu_deficit_bytes: deficit,
            encapsulation_guess: encapsulation_guess(mtu),
            sender_next,
            sender_delay_ms: delay_ns.map(ns_to_ms),
            sender_next_frame: reaction.map(|r| r.frame),
            quoted_direction: dir,
            recurrence_s: None,
            burst: None,
            bursts: Vec::new(),
            self_addressed_delay_ms: None,
            self_addressed_next_frame: None,
            frames_total: None,
            flood: None,
        };
        if let Some(r) = reaction {
            g.frames.add_segment(r.frame);
        }
        let frames = g.frames.cited();
        let frames_total = g.frames.total();
        let mut evidence = evidence;
        if frames_total > frames.len() {
            evidence.frames_total = Some(frames_total);
        }
        Some(Diagnosis {
            severity,
            verdict,
            stream,
            other_streams: Vec::new(),
            flow,
            quoted_src,
            quoted_dst,
            quoted_protocol,
            frames,
            frames_total,
            start_ns,
            end_ns,
            evidence,
        })
    }
}

/// The direction whose index is `d` (0: client → server).
fn dir_of(d: u8) -> Direction {
    if d == 0 {
        Direction::ClientToServer
    } else {
        Direction::ServerToClient
    }
}
