//! The prose: a [`Diagnosis`] written as a [`Finding`] (summary, remedy,
//! evidence). Nothing is decided here.

use crate::{Basis, Diagnosis, Shape, ID};
use pcapsleuth_detect::Finding;

/// The finding of one lost packet.
pub fn render(d: &Diagnosis) -> Finding {
    let mut b = Finding::builder(ID, d.severity)
        .summary(summary(d))
        .flow(Some(d.flow.clone()))
        .frames(d.frames.clone())
        .span(d.start_ns, d.end_ns)
        .remedy(remedy(d))
        .evidence(&d.evidence);
    for s in [d.inner_stream, d.outer_stream].into_iter().flatten() {
        b = b.stream(s);
    }
    b.build()
}

use pcapsleuth_core::FrameNo;

fn frames_list(frames: &[FrameNo]) -> String {
    let v: Vec<String> = frames.iter().map(FrameNo::to_string).collect();
    match v.len() {
        1 => format!("frame {}", v[0]),
        _ => format!("frames {}", v.join(", ")),
    }
}

fn what(d: &Diagnosis) -> &'static str {
    match d.evidence.packet {
        "tcp-syn" => "The SYN",
        "tcp-synack" => "The SYN/ACK",
        "tcp-segment" => "The TCP segment",
        "tcp-control" => "The TCP packet",
        _ => "The UDP datagram",
    }
}

/// The summary: the lost packet and its path, what followed, the pattern.
pub fn summary(d: &Diagnosis) -> String {
    let ev = &d.evidence;
    let seen = if ev.seen_on.len() > 1 {
        format!(", seen on {}", ev.seen_on.join(" and "))
    } else {
        String::new()
    };
    let mut s = format!(
        "{} {} ({}{seen}) entered this host on {} and never left on {}, although {} was capturing",
        what(d),
        ev.inner_flow,
        frames_list(&ev.lost_frames),
        ev.ingress_interface,
        ev.egress_interface,
        ev.egress_interface,
    );
    match (ev.basis, &ev.outer_flow) {
        (Basis::Conversation, Some(o)) => s.push_str(&format!(
            " and other packets of this conversation crossed as {o}: it was dropped inside the host."
        )),
        _ => s.push_str(&format!(
            " and other clients' packets to {} crossed there: it was dropped inside the host.",
            ev.service
        )),
    }
    match ev.syn_number {
        Some(1) => s.push_str(" It was the connection's first SYN."),
        Some(n) => s.push_str(&format!(" It was the connection's SYN number {n}.")),
        None => {}
    }
    match (ev.crossed_inner_frame, ev.crossed_outer_frame, ev.delay_ms) {
        (Some(i), Some(o), Some(ms)) => s.push_str(&format!(
            " The transmission that crossed (frame {i}; frame {o} on {}) came {ms:.1} ms later{}.",
            ev.egress_interface,
            match ev.retransmission_crossed {
                Some(false) => ", after a retry that was lost too",
                _ => "",
            }
        )),
        _ if d.never_crossed => s.push_str(
            " No SYN of this connection ever crossed: it never came up while the other side was capturing.",
        ),
        _ if ev.packet == "tcp-control" => {
            s.push_str(" TCP does not retransmit such a packet; the loss cost nothing measurable.")
        }
        _ => s.push_str(" Nothing of it crossed later in the capture."),
    }
    s.push_str(&format!(
        " On {} → {}: {} lost, {} crossed; {} of {} conversations with {} lost a packet.",
        ev.ingress_interface,
        ev.egress_interface,
        ev.pair_lost_packets,
        ev.pair_crossed_packets,
        ev.service_conversations_hit,
        ev.service_conversations,
        ev.service
    ));
    s.push_str(shape_sentence(ev.shape));
    if d.egress_capture_drops {
        s.push_str(" The egress capture recorded drops of its own: this copy may have been lost by the capture.");
    }
    s
}

fn shape_sentence(shape: Shape) -> &'static str {
    match shape {
        Shape::SynAfterSnat => " A new connection's SYN lost where the host applies SNAT is the shape of the conntrack insertion race (seed 002): two connections got the same SNAT tuple and the second one's conntrack entry failed to insert (`conntrack -S` insert_failed).",
        Shape::UdpToDnatService => " Single UDP datagrams lost on their way to a DNAT'd service (a Kubernetes ClusterIP, a DNS service IP) are the DNAT flavour of the same race (seed 002): parallel queries from one socket (glibc's A and AAAA) race to insert their conntrack entries and one is dropped; the resolver then waits its timeout (glibc: 5 s).",
        Shape::SynToDnatService => " A SYN lost on its way to a DNAT'd service: the DNAT flavour of the conntrack insertion race (seed 002), or a filter rule on the forward path.",
        Shape::UdpAfterSnat => " A UDP datagram lost after SNAT: the conntrack insertion race (seed 002) also hits the first datagram of a UDP conversation.",
        Shape::Reply => " The packet was on its way back to the client, through the reverse NAT mapping.",
        Shape::Syn | Shape::Udp | Shape::TcpSegment | Shape::TcpControl => "",
    }
}

/// What to do, per shape.
pub fn remedy(d: &Diagnosis) -> String {
    let race = "Read `conntrack -S` on this host while it happens: a rising insert_failed (or clash_resolve/drop) is the conntrack insertion race. Linux 5.0 resolves most clashes (commits ed07d9a021df \"nf_conntrack: resolve clash for matching conntracks\", 4e35c1cb9460 \"nf_nat: skip nat clash resolution for same-origin entries\") and 5.9 lets clashing UDP entries insert (6a757c07e51f); upgrade older nodes.";
    let find = "If the counters stay at 0, find the drop point between the two interfaces: iptables/nft rule counters (`iptables -vnL`, `nft list ruleset`), `perf trace -e skb:kfree_skb` or dropwatch (the drop reason), rp_filter, conntrack INVALID drops.";
    match d.evidence.shape {
        Shape::SynAfterSnat | Shape::UdpAfterSnat => format!(
            "{race} Randomise SNAT ports fully (`-j MASQUERADE --random-fully`, nftables `masquerade fully-random`), spread connections over more SNAT addresses, or avoid SNAT (routable pod addresses). {find}"
        ),
        Shape::UdpToDnatService | Shape::SynToDnatService => format!(
            "{race} For DNS: avoid the DNAT on the node (Kubernetes NodeLocal DNSCache), or keep the resolver from sending its two queries in parallel from one socket (glibc `options single-request-reopen` sends them from two sockets; `use-vc` moves DNS to TCP). {find}"
        ),
        _ => find.to_string(),
    }
}
