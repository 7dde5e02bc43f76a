//! What the decisions consult: the packets' copies, the crossings per
//! conversation and per service, and the ports' capture spans.

use crate::cluster::{by_conversation, clusters, conv_key, Cluster, ConvKey, COPY_WINDOW_NS};
use crate::diagnose::{Basis, NatKind, PortInfo, MIN_SERVICE_SOURCES};
use crate::record::{Port, Record};
use pcapsleuth_core::{Endpoint, FrameNo, Protocol};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

/// A retransmission (or an application's retry) is looked for at most this
/// long after the lost packet, ns: 130 s, past the 127 s a Linux SYN ladder
/// takes with the default `tcp_syn_retries` = 6.
pub const FOLLOW_UP_HORIZON_NS: i64 = 130_000_000_000;
/// Crossed packets of the conversation examined on each side of the lost
/// one when looking for one that crossed from the same ports.
const NEAREST_SCAN: usize = 64;

/// A service's crossings from one ingress port.
#[derive(Debug, Clone)]
struct ServiceCross {
    egress: Port,
    outer_dst: Endpoint,
    outer_src: Option<IpAddr>,
    sources: BTreeSet<Endpoint>,
}

/// One directional conversation's packets.
#[derive(Debug, Clone, Default)]
pub struct ConvInfo {
    /// Its clusters, in (time, frame) order of their ingress copy.
    pub clusters: Vec<usize>,
    /// (time, frame) of each, for binary search.
    pub keys: Vec<(i64, FrameNo)>,
    /// Positions (into `clusters`) of those that crossed.
    pub crossed: Vec<usize>,
    /// It contains a SYN without ACK.
    pub has_syn: bool,
}

/// Why and where a packet was expected to cross.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    pub basis: Basis,
    pub egress: Port,
    /// Inner → outer (src, dst), from a crossed packet of the conversation.
    pub outer: Option<(Endpoint, Endpoint)>,
    /// Where a copy would be on the egress port: `outer`, or for a service
    /// without SNAT the source with the service's translated destination.
    pub probe: Option<(Endpoint, Endpoint)>,
    pub nat: NatKind,
    pub port_rewritten: Option<bool>,
    /// The crossed packet (cluster) that taught the mapping.
    pub example: Option<usize>,
}

/// What the conversation did after the loss (cluster indices).
#[derive(Debug, Clone, Copy, Default)]
pub struct FollowUp {
    pub retx: Option<usize>,
    pub crossed: Option<usize>,
    /// SYNs of the same connection before this one.
    pub syns_before: Option<u32>,
}

/// The NAT between an inner and an outer (src, dst) pair, and whether the
/// source port changed.
pub fn nat_of(inner: (Endpoint, Endpoint), outer: (Endpoint, Endpoint)) -> (NatKind, Option<bool>) {
    let kind = nat_kind(inner.0 != outer.0, inner.1 != outer.1);
    (kind, Some(inner.0.port != outer.0.port))
}

fn nat_kind(snat: bool, dnat: bool) -> NatKind {
    match (snat, dnat) {
        (false, false) => NatKind::None,
        (true, false) => NatKind::Snat,
        (false, true) => NatKind::Dnat,
        (true, true) => NatKind::SnatDnat,
    }
}

/// Everything the decisions consult.
pub struct Index<'a> {
    pub records: &'a [Record],
    pub clusters: Vec<Cluster>,
    pub conv: HashMap<ConvKey, ConvInfo>,
    services: HashMap<(Port, Protocol, Endpoint), ServiceCross>,
    /// TCP records with payload and UDP records per (port, sender,
    /// receiver), in time order.
    data: HashMap<(Port, Endpoint, Endpoint), Vec<usize>>,
    pub ports: &'a BTreeMap<Port, PortInfo>,
}

impl<'a> Index<'a> {
    /// Build every index over `records`.
    pub fn new(records: &'a [Record], ports: &'a BTreeMap<Port, PortInfo>) -> Index<'a> {
        let clusters = clusters(records);
        let mut conv = HashMap::new();
        for (key, list) in by_conversation(records, &clusters) {
            let mut info = ConvInfo::default();
            for ci in list {
                let c: &Cluster = &clusters[ci];
                let Some(r) = c.in_rep().map(|i| &records[i]) else {
                    continue;
                };
                info.keys.push((r.ts, r.frame));
                info.has_syn |= r.tcp.is_some_and(|t| t.is_syn());
                if c.crossed() {
                    info.crossed.push(info.clusters.len());
                }
                info.clusters.push(ci);
            }
            conv.insert(key, info);
        }
        let mut data: HashMap<(Port, Endpoint, Endpoint), Vec<usize>> = HashMap::new();
        for (i, r) in records.iter().enumerate() {
            if r.tcp.is_none_or(|t| t.payload_len > 0) {
                data.entry((r.port, r.src, r.dst)).or_default().push(i);
            }
        }
        for list in data.values_mut() {
            list.sort_by_key(|&i| records[i].ts);
        }
        let services = services(records, &clusters);
        Index {
            records,
            clusters,
            conv,
            services,
            data,
            ports,
        }
    }

    /// Record `i`.
    pub fn rec(&self, i: usize) -> &Record {
        &self.records[i]
    }

    fn ingress_ports(&self, c: &Cluster) -> Vec<Port> {
        c.ingress.iter().map(|&i| self.rec(i).port).collect()
    }

    /// Where (and why) the packet of uncrossed cluster `c` should have gone.
    pub fn expect(&self, c: &Cluster) -> Option<Expect> {
        let rep = self.rec(c.in_rep()?);
        let ports = self.ingress_ports(c);
        if let Some(ci) = self.conv.get(&conv_key(rep)).and_then(|info| {
            let same_side = |pos: &&usize| {
                self.ingress_ports(&self.clusters[info.clusters[**pos]])
                    .iter()
                    .any(|p| ports.contains(p))
            };
            let p = info
                .crossed
                .partition_point(|&pos| info.keys[pos] <= (rep.ts, rep.frame));
            let after = info.crossed[p..].iter().take(NEAREST_SCAN).find(same_side);
            let before = || {
                info.crossed[..p]
                    .iter()
                    .rev()
                    .take(NEAREST_SCAN)
                    .find(same_side)
            };
            after.or_else(before).map(|&pos| info.clusters[pos])
        }) {
            let out = self.rec(self.clusters[ci].out_rep()?);
            let (nat, port_rewritten) = nat_of((rep.src, rep.dst), (out.src, out.dst));
            return Some(Expect {
                basis: Basis::Conversation,
                egress: out.port,
                outer: Some((out.src, out.dst)),
                probe: Some((out.src, out.dst)),
                nat,
                port_rewritten,
                example: Some(ci),
            });
        }
        // An answer of this conversation came back: it got through some
        // other way (another uplink under ECMP or policy routing, a local
        // redirect), not lost.
        if self.conv.contains_key(&(rep.proto, rep.dst, rep.src)) {
            return None;
        }
        let s = ports
            .iter()
            .filter_map(|p| self.services.get(&(*p, rep.proto, rep.dst)))
            .find(|s| s.sources.len() >= MIN_SERVICE_SOURCES)?;
        let snat = s.outer_src.is_none_or(|a| a != rep.src.addr);
        Some(Expect {
            basis: Basis::Service,
            egress: s.egress,
            outer: None,
            probe: (!snat).then_some((rep.src, s.outer_dst)),
            nat: nat_kind(snat, s.outer_dst != rep.dst),
            port_rewritten: None,
            example: None,
        })
    }

    /// The egress port was capturing when the packet should have crossed:
    /// frames on it before the packet and at least the copy window after it.
    pub fn capturing(&self, egress: Port, ts: i64) -> bool {
        self.ports
            .get(&egress)
            .is_some_and(|p| p.first_ts <= ts && p.last_ts >= ts.saturating_add(COPY_WINDOW_NS))
    }

    /// A copy of the packet crossed although its fingerprint differs: a
    /// TCP segment whose bytes crossed in other segments (GSO/TSO split it,
    /// GRO merged it, or the two captures' snap lengths cut the payload
    /// hash differently), or a UDP datagram of the same length and IPv4 ID,
    /// on the conversation's outer 5-tuple within the copy window.
    pub fn crossed_otherwise(&self, rep: &Record, e: &Expect) -> bool {
        let Some((osrc, odst)) = e.probe else {
            return false;
        };
        let overlaps = |a: u32, alen: u32, b: u32, blen: u32| {
            // [a, a+alen) and [b, b+blen) intersect (RFC 1982 arithmetic).
            b.wrapping_sub(a) < alen || a.wrapping_sub(b) < blen
        };
        let same = |o: &Record| match (rep.tcp, o.tcp) {
            (Some(t), Some(ot)) => {
                t.payload_len > 0
                    && ot.payload_len > 0
                    && overlaps(t.seq, t.payload_len, ot.seq, ot.payload_len)
            }
            (None, None) => rep.strong && o.ip_id == rep.ip_id && o.udp_len == rep.udp_len,
            _ => false,
        };
        let list = self
            .data
            .get(&(e.egress, osrc, odst))
            .map_or(&[][..], Vec::as_slice);
        let from =
            list.partition_point(|&i| self.rec(i).ts < rep.ts.saturating_sub(COPY_WINDOW_NS));
        list[from..]
            .iter()
            .map(|&i| self.rec(i))
            .take_while(|o| o.ts <= rep.ts.saturating_add(COPY_WINDOW_NS))
            .any(same)
    }

    /// The client side of the conversation `rep` belongs to is its sender:
    /// the sender of a SYN without ACK, else the first sender seen.
    pub fn sender_is_client(&self, rep: &Record) -> bool {
        let fwd = self.conv.get(&(rep.proto, rep.src, rep.dst));
        let rev = self.conv.get(&(rep.proto, rep.dst, rep.src));
        let first = |i: &ConvInfo| i.keys.first().map_or(i64::MAX, |k| k.0);
        match (fwd, rev) {
            (_, None) => true,
            (None, Some(_)) => false,
            (Some(f), Some(r)) => match (f.has_syn, r.has_syn) {
                (true, false) => true,
                (false, true) => false,
                _ => first(f) <= first(r),
            },
        }
    }

    /// The retransmission of the lost packet and the first one that crossed.
    pub fn follow_up(&self, c: &Cluster) -> FollowUp {
        let mut f = FollowUp::default();
        let Some(rep) = c.in_rep().map(|i| self.rec(i)) else {
            return f;
        };
        let Some(info) = self.conv.get(&conv_key(rep)) else {
            return f;
        };
        let key = (rep.ts, rep.frame);
        let here = info.keys.partition_point(|k| *k < key);
        let after = info.keys.partition_point(|k| *k <= key);
        let horizon = rep.ts.saturating_add(FOLLOW_UP_HORIZON_NS);
        let later: Vec<usize> = info.clusters[after..]
            .iter()
            .zip(&info.keys[after..])
            .take_while(|(_, k)| k.0 <= horizon)
            .map(|(ci, _)| *ci)
            .collect();
        let crossed = |ci: &usize| self.clusters[*ci].crossed();
        if let Some(t) = rep.tcp {
            if !t.is_reliable() {
                return f;
            }
            let same = |ci: &usize| {
                self.clusters[*ci]
                    .in_rep()
                    .and_then(|i| self.rec(i).tcp)
                    .is_some_and(|o| {
                        o.seq == t.seq
                            && o.flags & 0x003 == t.flags & 0x003
                            && (o.payload_len > 0) == (t.payload_len > 0)
                    })
            };
            if t.is_syn() {
                let earliest = rep.ts.saturating_sub(FOLLOW_UP_HORIZON_NS);
                let n = info.clusters[..here]
                    .iter()
                    .zip(&info.keys[..here])
                    .rev()
                    .take_while(|(_, k)| k.0 >= earliest)
                    .filter(|(ci, _)| same(ci))
                    .count();
                f.syns_before = u32::try_from(n).ok();
            }
            f.retx = later.iter().copied().find(same);
            f.crossed = later.iter().copied().find(|ci| same(ci) && crossed(ci));
            return f;
        }
        let class = |ci: &usize| {
            self.clusters[*ci].in_rep().map_or(3, |i| {
                let o = self.rec(i);
                if o.l4_hash == rep.l4_hash {
                    0
                } else if o.udp_len == rep.udp_len {
                    1
                } else {
                    2
                }
            })
        };
        let best = later.iter().map(class).min();
        f.retx = best.and_then(|b| later.iter().copied().find(|ci| class(ci) == b));
        f.crossed = best
            .and_then(|b| {
                later
                    .iter()
                    .copied()
                    .find(|ci| class(ci) == b && crossed(ci))
            })
            .or_else(|| later.iter().copied().find(crossed));
        f
    }
}

/// Crossings per (ingress port, protocol, destination): the services.
fn services(
    records: &[Record],
    clusters: &[Cluster],
) -> HashMap<(Port, Protocol, Endpoint), ServiceCross> {
    let mut services: HashMap<(Port, Protocol, Endpoint), ServiceCross> = HashMap::new();
    for c in clusters.iter().filter(|c| c.crossed()) {
        let (Some(o), Some(rep)) = (c.out_rep(), c.in_rep()) else {
            continue;
        };
        let (r, out) = (&records[rep], &records[o]);
        for &i in &c.ingress {
            let s = services
                .entry((records[i].port, r.proto, r.dst))
                .or_insert_with(|| ServiceCross {
                    egress: out.port,
                    outer_dst: out.dst,
                    outer_src: Some(out.src.addr),
                    sources: BTreeSet::new(),
                });
            if s.outer_src != Some(out.src.addr) {
                s.outer_src = None;
            }
            if s.sources.len() < 64 {
                s.sources.insert(r.src);
            }
        }
    }
    services
}
