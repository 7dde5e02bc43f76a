//! The decision: which packets entered on one port and should have left on
//! another but never did ([`diagnose`]), as plain data ([`Diagnosis`]).

use crate::cluster::Cluster;
use crate::index::{nat_of, Expect, FollowUp, Index};
use crate::record::{Port, Record};
use pcapsleuth_core::{Endpoint, FlowRef, FrameNo, Severity, StreamRef};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

/// A service's crossings must come from at least this many client endpoints
/// before a packet of a conversation that never crossed is expected to
/// cross too: one conversation is not a service (a NAT reply port is not).
pub const MIN_SERVICE_SOURCES: usize = 2;
/// A SYN whose retries the egress port would have shown: 3 s after it (the
/// 1 s + 2 s of the Linux SYN ladder, `TCP_TIMEOUT_INIT`, RFC 6298 §2).
pub const SYN_LADDER_WAIT_NS: i64 = 3_000_000_000;

/// What the detector knows of one port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// Display name: the pcapng `if_name`, `ifindex N` inside `-i any`.
    pub name: String,
    /// First frame captured on it, ns since the Unix epoch.
    pub first_ts: i64,
    /// Last frame captured on it (latest timestamp), ns.
    pub last_ts: i64,
    /// Frames captured on it.
    pub frames: u64,
    /// Packets the capture itself dropped on its interface (pcapng
    /// `isb_ifdrop`), when recorded.
    pub if_drops: Option<u64>,
}

/// Why the packet was expected on the egress port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Basis {
    /// Other packets of the same conversation (same 5-tuple on the ingress
    /// port) crossed to the egress port.
    Conversation,
    /// The conversation never crossed, but packets of at least
    /// [`MIN_SERVICE_SOURCES`] clients to the same service (protocol,
    /// address, port) entered on the same port and crossed.
    Service,
}

/// Which addresses the crossing rewrote (compared between the ingress and
/// egress copies of the same packets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NatKind {
    /// None: a plain routed (or bridged) hop.
    None,
    /// Source rewritten (SNAT / MASQUERADE).
    Snat,
    /// Destination rewritten (DNAT, e.g. a Kubernetes ClusterIP).
    Dnat,
    /// Both.
    SnatDnat,
}

/// The shape of a loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    /// A connection's SYN lost after SNAT: the conntrack insertion race of
    /// seed 002 (`nf_conntrack` `insert_failed`).
    SynAfterSnat,
    /// A SYN lost on its way to a DNAT'd service.
    SynToDnatService,
    /// A SYN lost on a hop without NAT.
    Syn,
    /// A UDP datagram lost on its way to a DNAT'd service (DNS to a
    /// ClusterIP: the DNAT race of seed 002).
    UdpToDnatService,
    /// A UDP datagram lost after SNAT.
    UdpAfterSnat,
    /// A UDP datagram lost on a hop without NAT.
    Udp,
    /// A TCP segment of an established connection (data, FIN).
    TcpSegment,
    /// A TCP packet TCP does not retransmit (pure ACK, RST).
    TcpControl,
    /// A packet from the server side back to the client (a reply).
    Reply,
}

/// The evidence of one lost packet (JSON keys in declaration order).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CrossInterfaceLossEvidence {
    /// `tcp-syn`, `tcp-synack`, `tcp-segment`, `tcp-control` or `udp-datagram`.
    pub packet: &'static str,
    /// The shape ([`Shape`]).
    pub shape: Shape,
    /// Why it was expected on the egress port ([`Basis`]).
    pub basis: Basis,
    /// The port it entered on (the copy closest to the egress).
    pub ingress_interface: String,
    /// The port it should have left on.
    pub egress_interface: String,
    /// Every port it was seen on (under `-i any` a container packet is seen
    /// on its veth and on the bridge).
    pub seen_on: Vec<String>,
    /// Its frames (every copy; none on the egress port).
    pub lost_frames: Vec<FrameNo>,
    /// The conversation as seen on the ingress port, `addr:port -> addr:port`.
    pub inner_flow: String,
    /// The same conversation on the egress port (after NAT), when one of its
    /// packets crossed.
    pub outer_flow: Option<String>,
    /// What the crossing rewrites ([`NatKind`]).
    pub nat: NatKind,
    /// SNAT changed the source port too (`--random-fully`, a port clash).
    pub source_port_rewritten: Option<bool>,
    /// IPv4 identification of the lost packet.
    pub ip_id: Option<u32>,
    /// Raw TCP sequence number.
    pub tcp_seq: Option<u32>,
    /// TCP TSval (the sender's clock; a retransmission carries a later one).
    pub tcp_tsval: Option<u32>,
    /// For a SYN: which SYN of the connection (1 = the first).
    pub syn_number: Option<u32>,
    /// Frames of the next transmission of the same bytes (TCP) or the next
    /// datagram of the conversation (UDP: same bytes, else same length, else any).
    pub retransmission_frames: Vec<FrameNo>,
    /// That transmission crossed.
    pub retransmission_crossed: Option<bool>,
    /// Ingress frame of the first later transmission that crossed.
    pub crossed_inner_frame: Option<FrameNo>,
    /// Its egress frame.
    pub crossed_outer_frame: Option<FrameNo>,
    /// What the loss cost: from the lost packet to the transmission that
    /// crossed, ms.
    pub delay_ms: Option<f64>,
    /// Packets that crossed this interface pair in this direction.
    pub pair_crossed_packets: u64,
    /// Packets lost on this interface pair in this direction.
    pub pair_lost_packets: u64,
    /// The service: `proto addr:port` (the conversation's server side, inner).
    pub service: String,
    /// Client endpoints seen talking to the service.
    pub service_conversations: u64,
    /// Of those, conversations with a lost packet.
    pub service_conversations_hit: u64,
    /// Lost packets to or from the service.
    pub service_lost_packets: u64,
    /// Lost packets of this shape in the capture.
    pub shape_lost_packets: u64,
}

/// One lost packet, decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnosis {
    /// Severity: error for a connection that never came up, warning for a
    /// loss that cost a retransmission (or a datagram), info for a packet
    /// TCP never retransmits or when the egress capture dropped packets.
    pub severity: Severity,
    /// The conversation on the ingress side (client → server).
    pub flow: FlowRef,
    /// Its `tcp.stream` / `udp.stream`.
    pub inner_stream: Option<StreamRef>,
    /// The conversation after the crossing, when known.
    pub outer_stream: Option<StreamRef>,
    /// Every cited frame.
    pub frames: Vec<FrameNo>,
    /// Time of the lost packet, ns.
    pub start_ns: i64,
    /// Time of the transmission that crossed (else the lost packet), ns.
    pub end_ns: i64,
    /// The loss happened on the way back (server → client).
    pub reply: bool,
    /// The egress capture recorded drops of its own: the packet may have
    /// been lost by the capture, not by the host.
    pub egress_capture_drops: bool,
    /// The connection never came up: every SYN lost while the egress port
    /// captured for [`SYN_LADDER_WAIT_NS`] afterwards.
    pub never_crossed: bool,
    /// The evidence.
    pub evidence: CrossInterfaceLossEvidence,
}

/// Every lost packet of the capture. `records` are the TCP/UDP packets,
/// `ports` every port frames were captured on. Nothing is reported unless
/// at least two ports captured frames.
pub fn diagnose(records: &[Record], ports: &BTreeMap<Port, PortInfo>) -> Vec<Diagnosis> {
    if ports.len() < 2 {
        return Vec::new();
    }
    let ix = Index::new(records, ports);
    let mut out = Vec::new();
    for c in &ix.clusters {
        if c.crossed() || c.sent_only || c.forwarded {
            continue;
        }
        let Some(rep_i) = c.in_rep() else { continue };
        let rep = ix.rec(rep_i);
        // A router drops TTL ≤ 1 by design (RFC 791 §3.2: traceroute
        // probes); broadcast and multicast are not forwarded one to one.
        if rep.ttl <= 1 || !unicast(rep.dst.addr) {
            continue;
        }
        let Some(e) = ix.expect(c) else { continue };
        if !ix.capturing(e.egress, rep.ts) || ix.crossed_otherwise(rep, &e) {
            continue;
        }
        // A data segment is only expected from its own conversation's crossings.
        if e.basis == Basis::Service && rep.tcp.is_some_and(|t| !t.is_syn()) {
            continue;
        }
        let f = ix.follow_up(c);
        out.push(build(&ix, c, &e, &f));
    }
    aggregate(&ix, &mut out);
    out
}

/// A unicast destination (not broadcast, multicast or unspecified).
fn unicast(a: IpAddr) -> bool {
    match a {
        IpAddr::V4(v) => !(v.is_broadcast() || v.is_multicast() || v.is_unspecified()),
        IpAddr::V6(v) => !(v.is_multicast() || v.is_unspecified()),
    }
}

fn ep(e: Endpoint) -> String {
    match e.addr {
        IpAddr::V4(a) => format!("{a}:{}", e.port),
        IpAddr::V6(a) => format!("[{a}]:{}", e.port),
    }
}

fn flow_str(src: Endpoint, dst: Endpoint) -> String {
    format!("{} -> {}", ep(src), ep(dst))
}

fn shape_of(rep: &Record, nat: NatKind, reply: bool) -> (Shape, &'static str) {
    match rep.tcp {
        Some(t) if t.is_syn() => (
            match nat {
                NatKind::Snat | NatKind::SnatDnat => Shape::SynAfterSnat,
                NatKind::Dnat => Shape::SynToDnatService,
                NatKind::None => Shape::Syn,
            },
            "tcp-syn",
        ),
        Some(t) if reply && t.flags & 0x012 == 0x012 => (Shape::Reply, "tcp-synack"),
        Some(_) if reply => (Shape::Reply, "tcp-segment"),
        Some(t) if t.is_reliable() => (Shape::TcpSegment, "tcp-segment"),
        Some(_) => (Shape::TcpControl, "tcp-control"),
        None if reply => (Shape::Reply, "udp-datagram"),
        None => (
            match nat {
                NatKind::Dnat | NatKind::SnatDnat => Shape::UdpToDnatService,
                NatKind::Snat => Shape::UdpAfterSnat,
                NatKind::None => Shape::Udp,
            },
            "udp-datagram",
        ),
    }
}

fn cluster_frames(ix: &Index<'_>, c: &Cluster) -> Vec<FrameNo> {
    c.ingress
        .iter()
        .chain(&c.egress)
        .map(|&i| ix.rec(i).frame)
        .collect()
}

fn build(ix: &Index<'_>, c: &Cluster, e: &Expect, f: &FollowUp) -> Diagnosis {
    let rep = ix.rec(c.in_rep().unwrap_or_default());
    let is_client = ix.sender_is_client(rep);
    let reply = !is_client;
    let (shape, packet) = shape_of(rep, e.nat, reply);
    let name = |p: Port| {
        ix.ports
            .get(&p)
            .map_or_else(String::new, |i| i.name.clone())
    };
    let mut seen_on: Vec<String> = c.ingress.iter().map(|&i| name(ix.rec(i).port)).collect();
    seen_on.sort();
    seen_on.dedup();
    let lost_frames: Vec<FrameNo> = c.ingress.iter().map(|&i| ix.rec(i).frame).collect();
    let crossed = f.crossed.map(|ci| &ix.clusters[ci]);
    let crossed_in = crossed.and_then(Cluster::in_rep).map(|i| ix.rec(i));
    let crossed_out = crossed.and_then(Cluster::out_rep).map(|i| ix.rec(i));
    // The mapping: from the crossed retransmission, else from the conversation.
    let (outer, nat, port_rewritten) = match crossed_out {
        Some(o) => {
            let (n, p) = nat_of((rep.src, rep.dst), (o.src, o.dst));
            (Some((o.src, o.dst)), n, p)
        }
        None => (e.outer, e.nat, e.port_rewritten),
    };
    let outer_stream = crossed_out
        .or_else(|| {
            e.example
                .and_then(|ci| ix.clusters[ci].out_rep())
                .map(|i| ix.rec(i))
        })
        .and_then(|r| r.stream);
    let mut frames = lost_frames.clone();
    for ci in [f.retx, f.crossed].into_iter().flatten() {
        frames.extend(cluster_frames(ix, &ix.clusters[ci]));
    }
    let retx = f.retx.map(|ci| &ix.clusters[ci]);
    let delay_ns = crossed_in.map(|r| r.ts.saturating_sub(rep.ts));
    let egress_info = ix.ports.get(&e.egress);
    let egress_capture_drops = egress_info.and_then(|p| p.if_drops).is_some_and(|d| d > 0);
    let never_crossed = rep.tcp.is_some_and(|t| t.is_syn())
        && f.crossed.is_none()
        && egress_info.is_some_and(|p| p.last_ts >= rep.ts.saturating_add(SYN_LADDER_WAIT_NS));
    let severity = if egress_capture_drops || rep.tcp.is_some_and(|t| !t.is_reliable()) {
        Severity::Info
    } else if never_crossed {
        Severity::Error
    } else {
        Severity::Warning
    };
    let (client, server) = if is_client {
        (rep.src, rep.dst)
    } else {
        (rep.dst, rep.src)
    };
    let evidence = CrossInterfaceLossEvidence {
        packet,
        shape,
        basis: e.basis,
        ingress_interface: name(rep.port),
        egress_interface: name(e.egress),
        seen_on,
        lost_frames,
        inner_flow: flow_str(rep.src, rep.dst),
        outer_flow: outer.map(|(s, d)| flow_str(s, d)),
        nat,
        source_port_rewritten: if nat == NatKind::Snat || nat == NatKind::SnatDnat {
            port_rewritten
        } else {
            None
        },
        ip_id: rep.ip_id,
        tcp_seq: rep.tcp.map(|t| t.seq),
        tcp_tsval: rep.tcp.and_then(|t| t.tsval),
        syn_number: f.syns_before.map(|n| n + 1),
        retransmission_frames: retx.map(|r| cluster_frames(ix, r)).unwrap_or_default(),
        retransmission_crossed: retx.map(Cluster::crossed),
        crossed_inner_frame: crossed_in.map(|r| r.frame),
        crossed_outer_frame: crossed_out.map(|r| r.frame),
        delay_ms: delay_ns.map(|ns| (ns as f64 / 1e3).round() / 1e3),
        pair_crossed_packets: 0,
        pair_lost_packets: 0,
        service: format!("{} {}", rep.proto.as_str(), ep(server)),
        service_conversations: 0,
        service_conversations_hit: 0,
        service_lost_packets: 0,
        shape_lost_packets: 0,
    };
    Diagnosis {
        severity,
        flow: FlowRef {
            protocol: rep.proto,
            client: client.addr.to_string(),
            client_port: client.port,
            server: server.addr.to_string(),
            server_port: server.port,
        },
        inner_stream: rep.stream,
        outer_stream: outer_stream.filter(|s| Some(*s) != rep.stream),
        frames,
        start_ns: rep.ts,
        end_ns: crossed_in.map_or(rep.ts, |r| r.ts.max(rep.ts)),
        reply,
        egress_capture_drops,
        never_crossed,
        evidence,
    }
}

/// Fill the per-pair, per-service and per-shape counts.
fn aggregate(ix: &Index<'_>, out: &mut [Diagnosis]) {
    if out.is_empty() {
        return;
    }
    let mut pair_crossed: HashMap<(String, String), u64> = HashMap::new();
    for c in ix.clusters.iter().filter(|c| c.crossed()) {
        let (Some(i), Some(o)) = (c.in_rep(), c.out_rep()) else {
            continue;
        };
        let name = |p: Port| {
            ix.ports
                .get(&p)
                .map_or_else(String::new, |i| i.name.clone())
        };
        *pair_crossed
            .entry((name(ix.rec(i).port), name(ix.rec(o).port)))
            .or_default() += 1;
    }
    let mut service_clients: HashMap<String, BTreeSet<Endpoint>> = HashMap::new();
    for (proto, src, dst) in ix.conv.keys() {
        let svc = format!("{} {}", proto.as_str(), ep(*dst));
        service_clients.entry(svc).or_default().insert(*src);
    }
    let mut pair_lost: HashMap<(String, String), u64> = HashMap::new();
    let mut svc_lost: HashMap<String, u64> = HashMap::new();
    let mut svc_hit: HashMap<String, BTreeSet<(String, u16)>> = HashMap::new();
    let mut shape_lost: HashMap<Shape, u64> = HashMap::new();
    for d in out.iter() {
        let ev = &d.evidence;
        *pair_lost
            .entry((ev.ingress_interface.clone(), ev.egress_interface.clone()))
            .or_default() += 1;
        *svc_lost.entry(ev.service.clone()).or_default() += 1;
        svc_hit
            .entry(ev.service.clone())
            .or_default()
            .insert((d.flow.client.clone(), d.flow.client_port));
        *shape_lost.entry(ev.shape).or_default() += 1;
    }
    for d in out.iter_mut() {
        let ev = &mut d.evidence;
        let pair = (ev.ingress_interface.clone(), ev.egress_interface.clone());
        ev.pair_crossed_packets = pair_crossed.get(&pair).copied().unwrap_or(0);
        ev.pair_lost_packets = pair_lost.get(&pair).copied().unwrap_or(0);
        ev.service_conversations = service_clients
            .get(&ev.service)
            .map_or(0, |s| s.len() as u64);
        ev.service_conversations_hit = svc_hit.get(&ev.service).map_or(0, |s| s.len() as u64);
        ev.service_lost_packets = svc_lost.get(&ev.service).copied().unwrap_or(0);
        ev.shape_lost_packets = shape_lost.get(&ev.shape).copied().unwrap_or(0);
    }
}
