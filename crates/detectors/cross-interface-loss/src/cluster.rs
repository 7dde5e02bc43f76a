//! Copies of one packet ([`Cluster`]) and whether it crossed between two
//! ports (a routed hop, or an SLL2 bridged hop).

use crate::record::{Port, Record, SubPort};
use pcapsleuth_core::{Endpoint, Protocol};
use std::cmp::Reverse;
use std::collections::HashMap;

/// Largest time between two copies of one packet with a strong fingerprint
/// (non-zero IPv4 ID), ns: 50 ms, as the lab's matching rule
/// (`../shared/lab-incoming/*.truth.json` `matching`). A Linux
/// retransmission is at least `TCP_RTO_MIN` (200 ms) later and carries a new
/// IP ID, so it is never a copy.
pub const COPY_WINDOW_NS: i64 = 50_000_000;
/// The same for a weak fingerprint (IPv6 without Fragment header, IPv4 ID
/// 0), ns: 10 ms, as the flow table's duplicate window. Its identity is the
/// L4 part alone, which a fast application retry may repeat.
pub const WEAK_COPY_WINDOW_NS: i64 = 10_000_000;

/// A directional conversation key: protocol, sender, receiver.
pub type ConvKey = (Protocol, Endpoint, Endpoint);

/// The conversation key of a record.
pub fn conv_key(r: &Record) -> ConvKey {
    (r.proto, r.src, r.dst)
}

/// Every copy of one packet, grouped by fingerprint and time.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    /// Copies on the ingress side (highest TTL, not `PACKET_OUTGOING`),
    /// record indices in time order.
    pub ingress: Vec<usize>,
    /// Copies on the egress side of a crossing (empty when it did not cross).
    pub egress: Vec<usize>,
    /// Every copy was `PACKET_OUTGOING`: the host sent it (or its ingress
    /// copy was not captured). Never a loss candidate.
    pub sent_only: bool,
    /// A copy with a lower TTL exists, also on an ingress port (routed back
    /// out of the interface it came in on, e.g. DNAT to a local pod): it was
    /// forwarded, so it is not lost even when it did not cross.
    pub forwarded: bool,
}

impl Cluster {
    /// It crossed between two ports.
    pub fn crossed(&self) -> bool {
        !self.egress.is_empty()
    }
    /// The ingress copy closest to the egress (the latest one: under
    /// `tcpdump -i any`, the bridge rather than the bridge port).
    pub fn in_rep(&self) -> Option<usize> {
        self.ingress.last().copied()
    }
    /// The first egress copy.
    pub fn out_rep(&self) -> Option<usize> {
        self.egress.first().copied()
    }
}

/// The hop order of a copy: higher TTL first (each router decrements it,
/// RFC 791 §3.2, RFC 8200 §3), then received before sent.
fn level(r: &Record) -> (Reverse<u8>, bool) {
    (Reverse(r.ttl), r.outgoing)
}

/// Whether `e` is a copy of the packet after it crossed from `i`'s port:
/// another port, and either a decremented TTL (a routed hop, NAT included)
/// or, under SLL2 (`-i any`), received on one interface and sent on another
/// (a bridged hop). Two copies with the same TTL and direction are the same
/// side (a bridge port and its bridge, both "incoming"), not a crossing.
fn crosses(i: &Record, e: &Record) -> bool {
    if i.port == e.port {
        return false;
    }
    if e.ttl < i.ttl {
        return true;
    }
    e.ttl == i.ttl
        && e.outgoing
        && !i.outgoing
        && matches!(
            (i.port.sub, e.port.sub),
            (SubPort::Ifindex(_), SubPort::Ifindex(_))
        )
}

/// Group the records into packets: equal fingerprint, copies at most
/// [`COPY_WINDOW_NS`] ([`WEAK_COPY_WINDOW_NS`]) apart in capture time.
pub fn clusters(records: &[Record]) -> Vec<Cluster> {
    let mut order: Vec<usize> = (0..records.len()).collect();
    order.sort_by_key(|&i| {
        let r = &records[i];
        (r.fp, r.ts, r.frame)
    });
    let mut out = Vec::new();
    let mut group: Vec<usize> = Vec::new();
    for &i in &order {
        if let Some(&last) = group.last() {
            let (a, b) = (&records[last], &records[i]);
            let window = if b.strong {
                COPY_WINDOW_NS
            } else {
                WEAK_COPY_WINDOW_NS
            };
            if a.fp != b.fp || b.ts.saturating_sub(a.ts) > window {
                out.push(classify(records, std::mem::take(&mut group)));
            }
        }
        group.push(i);
    }
    if !group.is_empty() {
        out.push(classify(records, group));
    }
    out
}

/// Split one packet's copies into ingress and egress.
fn classify(records: &[Record], mut copies: Vec<usize>) -> Cluster {
    copies.sort_by_key(|&i| (level(&records[i]), records[i].ts, records[i].frame));
    let Some(&first) = copies.first() else {
        return Cluster::default();
    };
    let top = level(&records[first]);
    let ingress: Vec<usize> = copies
        .iter()
        .copied()
        .filter(|&i| level(&records[i]) == top)
        .collect();
    let sent_only = records[first].outgoing;
    let forwarded = copies.iter().any(|&i| records[i].ttl < records[first].ttl);
    let in_ports: Vec<Port> = ingress.iter().map(|&i| records[i].port).collect();
    let mut egress: Vec<usize> = Vec::new();
    let mut egress_level = None;
    for &i in &copies {
        let r = &records[i];
        if in_ports.contains(&r.port) || !crosses(&records[first], r) {
            continue;
        }
        match egress_level {
            None => {
                egress_level = Some(level(r));
                egress.push(i);
            }
            Some(l) if l == level(r) => egress.push(i),
            Some(_) => {}
        }
    }
    let mut ingress = ingress;
    ingress.sort_by_key(|&i| (records[i].ts, records[i].frame));
    egress.sort_by_key(|&i| (records[i].ts, records[i].frame));
    Cluster {
        ingress,
        egress,
        sent_only,
        forwarded,
    }
}

/// Clusters per directional conversation (by their ingress copy), in time order.
pub fn by_conversation(records: &[Record], clusters: &[Cluster]) -> HashMap<ConvKey, Vec<usize>> {
    let mut map: HashMap<ConvKey, Vec<usize>> = HashMap::new();
    for (ci, c) in clusters.iter().enumerate() {
        if let Some(r) = c.in_rep() {
            map.entry(conv_key(&records[r])).or_default().push(ci);
        }
    }
    for list in map.values_mut() {
        list.sort_by_key(|&ci| {
            clusters[ci]
                .in_rep()
                .map(|r| (records[r].ts, records[r].frame))
        });
    }
    map
}
