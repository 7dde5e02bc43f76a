#![doc = include_str!("../README.md")]
//!
//! # Code layout
//! The detector folds each ICMP message into its group's aggregate
//! ([`FragNeeded`]; memory per group, not per message) and keeps the first
//! [`ROUTE_DETAIL_CAP`] messages of each route in full for the recurrence;
//! [`FragNeeded::diagnose`] turns the groups into plain-data [`Diagnosis`]
//! values at the end of the capture, and [`render`] writes each one's
//! summary, remedy and evidence.

mod diagnosis;
mod group;
mod recurrence;
mod render;

pub use diagnosis::{Diagnosis, FloodEvidence, FragNeededEvidence, SenderNext, Verdict};
pub use recurrence::{BurstEvidence, UNMATCHED_SENT_BEFORE_NS};
pub use render::render;

use diagnosis::GroupKey;
use group::Group;
use pcapsleuth_core::{Direction, Endpoint, FrameNo, SeqNum, StreamId, Timestamp};
use pcapsleuth_decode::IcmpKind;
use pcapsleuth_detect::followup::{FollowUp, WatchId};
use pcapsleuth_detect::{Detector, DetectorInfo, Finding, FinishContext, FlowEvent};
use recurrence::RouteKey;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// Detector id.
pub const ID: &str = "frag-needed";

/// A sender reaction within this many ns of the ICMP is "immediate".
pub const IMMEDIATE_NS: i64 = 10_000_000;
/// A sender wait at least this long (ns) after a router's ICMP makes the finding a warning.
pub const STALL_NS: i64 = 150_000_000;
/// Linux's default route MTU cache lifetime, s (`net.ipv4.route.mtu_expires`,
/// `net.ipv6.route.mtu_expires`); only quoted in prose: recurrence is measured,
/// whatever the lifetime.
pub const MTU_EXPIRES_S: i64 = 600;
/// The MTU of an Ethernet path without encapsulation, bytes: the reference for
/// `mtu_deficit_bytes` when the quoted datagram is not larger than the MTU.
pub const ETHERNET_MTU: u32 = 1500;
/// A finding cites at most this many of its lowest frame numbers, plus the
/// last [`FRAMES_CITED_TAIL`]; `frames_total` then says how many there were
/// (issue 11: one finding of a 1 M-message flood cited 1,000,008 frames).
pub const FRAMES_CITED_HEAD: usize = 100;
/// A finding over the bound cites this many of its highest frame numbers
/// after the first [`FRAMES_CITED_HEAD`].
pub const FRAMES_CITED_TAIL: usize = 10;
/// Messages of one route (quoted source, quoted destination, MTU) kept in
/// full for measuring a recurrence. A route with more is a flood, not a
/// recurrence: its detail is dropped and it is reported per group, so memory
/// stays O(groups + routes × this bound) whatever the number of messages.
pub const ROUTE_DETAIL_CAP: usize = 4096;

/// Groups of quotes the flow table could not place (flows this capture does
/// not hold) reported one finding each. Beyond it, a message that would
/// start another such group (and route) is folded into its ICMP source's
/// flood finding instead: a router refusing the datagrams of a million flows
/// is one finding, not a million, and memory stays bounded (issue 11:
/// `icmp1m_rand` of `../shared/bench/gen-scale.py`, 1 M frag-needed each
/// quoting its own flow, gave 1 M findings, 1.7 GB of JSON and 4.8 GiB).
pub const UNPLACED_GROUPS_CAP: usize = 1024;
/// ICMP sources (each with its MTU) given a flood finding of their own;
/// messages of further sources share one flood finding.
pub const FLOOD_SOURCES_CAP: usize = 64;

/// Guess what encapsulation explains an MTU below 1500 (bytes). Overheads:
/// IPIP 20 bytes (RFC 2003), GRE 24 (RFC 2784 over IPv4), VXLAN 50 (RFC 7348),
/// WireGuard 60/80 (IPv4/IPv6 outer), PPPoE 8 (RFC 2516), IPsec ESP ≈ 62–100
/// depending on cipher (RFC 4303).
pub fn encapsulation_guess(mtu: u32) -> &'static str {
    match mtu {
        1480 => "IPIP / IPVS tunnel mode (20 bytes)",
        1476 => "GRE (24 bytes)",
        1450 => "VXLAN (50 bytes)",
        1420 | 1440 => "WireGuard (60/80 bytes)",
        1492 => "PPPoE (8 bytes)",
        1400..=1438 => "IPsec ESP (likely)",
        1280 => "IPv6 minimum MTU (1280)",
        _ => "unknown",
    }
}

/// One ICMP frag-needed / PTB message, as collected.
#[derive(Debug, Clone)]
struct Icmp {
    frame: FrameNo,
    ts: Timestamp,
    mtu: Option<u32>,
    icmp_src: IpAddr,
    icmp_dst: IpAddr,
    quoted_src: Endpoint,
    quoted_dst: Endpoint,
    quoted_proto: u8,
    quoted_ip_len: u32,
    quoted_seq: Option<SeqNum>,
    quoted_rel_seq: Option<i64>,
    stream: Option<StreamId>,
    quoted_dir: Option<Direction>,
    matched_frame: Option<FrameNo>,
    matched_ts: Option<Timestamp>,
    matched_ip_len: Option<u32>,
    watch: Option<WatchId>,
}

impl Icmp {
    /// The host refused its own packet: the ICMP goes from the host to itself,
    /// or comes from the quoted packet's own source.
    fn self_addressed(&self) -> bool {
        self.icmp_src == self.icmp_dst || self.icmp_src == self.quoted_src.addr
    }

    /// The route MTU cache entry this message teaches.
    fn route(&self) -> RouteKey {
        (
            self.quoted_src.addr,
            self.quoted_dst.addr,
            self.mtu.unwrap_or(0),
        )
    }

    /// The group this message belongs to.
    fn group_key(&self) -> GroupKey {
        let mtu = self.mtu.unwrap_or(0);
        match self.stream {
            Some(s) => GroupKey::Tcp(s, self.quoted_dir.map_or(0, |d| d.index() as u8), mtu),
            None => GroupKey::Other(
                self.quoted_src.addr,
                self.quoted_dst.addr,
                self.quoted_proto,
                mtu,
            ),
        }
    }
}

/// The messages of one route kept in full (for the recurrence), until the
/// route has more than [`ROUTE_DETAIL_CAP`]. A route of one message keeps
/// none: that message is its group's `first` (a group lies within a route),
/// copied here when the second arrives.
#[derive(Debug, Clone, Default)]
struct RouteDetail {
    /// Messages of the route so far.
    count: usize,
    /// While `count == 1`: the group of the route's only message.
    only_group: Option<GroupKey>,
    /// Every message when `count` is 2 to [`ROUTE_DETAIL_CAP`], else empty.
    icmps: Vec<Icmp>,
    /// More than [`ROUTE_DETAIL_CAP`] messages: `icmps` was dropped.
    flood: bool,
}

/// The `frag-needed` detector.
#[derive(Debug, Default)]
pub struct FragNeeded {
    /// Every group's aggregate (one per group, whatever its message count).
    groups: BTreeMap<GroupKey, Group>,
    /// Per route: its messages in full, up to [`ROUTE_DETAIL_CAP`].
    routes: BTreeMap<RouteKey, RouteDetail>,
    /// Follow-up watches started (one per message kept in full, or that
    /// became its group's first).
    watches_started: usize,
    follow: FollowUp,
    /// Groups with [`GroupKey::Other`] (quotes the flow table could not place).
    unplaced_groups: usize,
    /// Messages beyond [`UNPLACED_GROUPS_CAP`], folded per (ICMP source,
    /// MTU); `None`: the sources beyond [`FLOOD_SOURCES_CAP`].
    floods: BTreeMap<Option<(IpAddr, u32)>, Group>,
    /// Largest IP datagram (bytes) captured per `tcp.stream` (dense ids)
    /// and direction index: 4 bytes a stream. [`u16::MAX`] stands for
    /// 65,535 bytes or more (an IPv6 jumbogram), which is not compared.
    largest_sent: Vec<[u16; 2]>,
}

impl FragNeeded {
    /// Remember that `stream` sent an IP datagram of `ip_len` bytes in `dir`.
    fn note_sent(&mut self, stream: StreamId, dir: Direction, ip_len: u32) {
        let Ok(i) = usize::try_from(stream.get()) else {
            return;
        };
        // Grown by a quarter at least ([`pcapsleuth_core::dense::slot_mut`]).
        if let Some(m) = pcapsleuth_core::dense::slot_mut(&mut self.largest_sent, i, || [0; 2])
            .and_then(|e| e.get_mut(dir.index()))
        {
            *m = (*m).max(u16::try_from(ip_len).unwrap_or(u16::MAX));
        }
    }

    /// The largest IP datagram (bytes) `stream` sent in `dir`, if it sent
    /// one below 65,535 bytes.
    pub(crate) fn largest_sent(&self, stream: StreamId, dir: Direction) -> Option<u32> {
        let i = usize::try_from(stream.get()).ok()?;
        self.largest_sent
            .get(i)
            .and_then(|e| e.get(dir.index()))
            .copied()
            .filter(|&m| m > 0 && m < u16::MAX)
            .map(u32::from)
    }

    /// Heap bytes of the per-stream table.
    #[cfg(test)]
    fn stream_bytes(&self) -> usize {
        self.largest_sent.capacity() * std::mem::size_of::<[u16; 2]>()
    }

    /// Record one frag-needed / PTB. The flow table emits this event once for
    /// every ICMP error, whatever it quotes (`stream` only for a quoted TCP
    /// segment it placed), so nothing else needs reading or de-duplicating.
    fn on_icmp_event(&mut self, e: &pcapsleuth_flow::IcmpErrorEvent) {
        if !matches!(e.kind, IcmpKind::FragNeeded | IcmpKind::PacketTooBig) {
            return;
        }
        let mut icmp = Icmp {
            frame: e.frame,
            ts: e.ts,
            mtu: e.mtu,
            icmp_src: e.icmp_src,
            icmp_dst: e.icmp_dst,
            quoted_src: e.quoted_src,
            quoted_dst: e.quoted_dst,
            quoted_proto: e.quoted_proto,
            quoted_ip_len: e.quoted_ip_len,
            quoted_seq: e.quoted_seq,
            quoted_rel_seq: e.quoted_rel_seq,
            stream: e.stream,
            quoted_dir: e.quoted_dir,
            matched_frame: e.matched.map(|m| m.frame),
            matched_ts: e.matched.map(|m| m.ts),
            matched_ip_len: e.matched.map(|m| m.ip_len),
            watch: None,
        };
        let key = icmp.group_key();
        if matches!(key, GroupKey::Other(..))
            && self.unplaced_groups >= UNPLACED_GROUPS_CAP
            && !self.groups.contains_key(&key)
            && !self.routes.contains_key(&icmp.route())
        {
            self.fold_into_flood(&icmp);
            return;
        }
        let route = self.routes.entry(icmp.route()).or_default();
        route.count += 1;
        if route.count == 1 {
            route.only_group = Some(key);
        } else if let Some(g) = route.only_group.take().and_then(|k| self.groups.get(&k)) {
            route.icmps.push(g.first.clone());
        }
        if !route.flood && route.count > ROUTE_DETAIL_CAP {
            route.flood = true;
            route.icmps = Vec::new();
        }
        let group = self.groups.get(&key);
        let becomes_first = group.is_none_or(|g| g.precedes_first(&icmp));
        // Only a message kept in full or its group's new first needs to know
        // what the sender did next: a flood starts no watch per message.
        if !route.flood || becomes_first {
            if let (Some(s), Some(d), Some(q)) = (e.stream, e.quoted_dir, e.quoted_rel_seq) {
                icmp.watch = Some(self.follow.watch(s, d, q, e.ts));
                self.watches_started += 1;
            }
        }
        if !route.flood && route.count > 1 {
            route.icmps.push(icmp.clone());
        }
        match self.groups.get_mut(&key) {
            Some(g) => {
                if becomes_first {
                    g.first = icmp.clone();
                }
                g.add(&icmp);
            }
            None => {
                if matches!(key, GroupKey::Other(..)) {
                    self.unplaced_groups += 1;
                }
                self.groups.insert(key, Group::new(&icmp));
            }
        }
    }

    /// Fold a message quoting a flow the capture does not hold, beyond
    /// [`UNPLACED_GROUPS_CAP`] such groups, into its source's flood.
    fn fold_into_flood(&mut self, icmp: &Icmp) {
        let own = Some((icmp.icmp_src, icmp.mtu.unwrap_or(0)));
        let key = if self.floods.len() < FLOOD_SOURCES_CAP || self.floods.contains_key(&own) {
            own
        } else {
            None
        };
        match self.floods.get_mut(&key) {
            Some(g) => {
                if g.precedes_first(icmp) {
                    g.first = icmp.clone();
                }
                g.add(icmp);
            }
            None => {
                self.floods.insert(key, Group::new(icmp));
            }
        }
    }

    /// Entries retained: (groups and floods, routes, messages kept in full,
    /// follow-up watches started). Bounded by the groups and routes, not the messages.
    #[cfg(test)]
    fn retained(&self) -> (usize, usize, usize, usize) {
        let detail = self.routes.values().map(|r| r.icmps.len()).sum();
        (
            self.groups.len() + self.floods.len(),
            self.routes.len(),
            detail,
            self.watches_started,
        )
    }
}

impl Detector for FragNeeded {
    fn info(&self) -> DetectorInfo {
        DetectorInfo {
            id: ID,
            aliases: &[],
            title: "ICMP fragmentation needed / Packet Too Big",
            explain: include_str!("../README.md"),
        }
    }

    fn on_flow_event(&mut self, event: &FlowEvent) {
        match event {
            FlowEvent::Segment(s) => {
                self.follow.on_segment(s);
                self.note_sent(s.stream, s.dir, s.ip_len);
            }
            FlowEvent::IcmpError(e) => self.on_icmp_event(e),
            // Its watches close as they stand (its sizes stay: a message
            // about it may still be diagnosed).
            FlowEvent::FlowEnded(e) => self.follow.end_stream(e.stream),
            _ => {}
        }
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        self.diagnose(ctx).iter().map(render).collect()
    }
}

#[cfg(test)]
mod tests;
