//! The prose: a [`Diagnosis`] written as a [`Finding`]. Nothing is decided here.

use crate::collect::{Family, Measure};
use crate::diagnose::{Diagnosis, MeasureComparison};
use crate::pair::PairedBy;
use crate::stats::{FamilyStats, Verdict};
use crate::ID;
use pcapsleuth_core::{FlowRef, Protocol};
use pcapsleuth_detect::Finding;

/// The finding of one diagnosis: flow = the slow family's client → peer as
/// ICMP/ICMPv6 with ports 0 (a host-level finding), hosts = the slow host's
/// addresses.
pub fn render(d: &Diagnosis) -> Finding {
    let protocol = match d.evidence.slow_family {
        Family::Ipv4 => Protocol::Icmp,
        Family::Ipv6 => Protocol::Icmpv6,
    };
    Finding::builder(ID, d.severity)
        .summary(summary(d))
        .flow(Some(FlowRef {
            protocol,
            client: d.flow.0.to_string(),
            client_port: 0,
            server: d.flow.1.to_string(),
            server_port: 0,
        }))
        .hosts(d.hosts.clone())
        .frames(d.frames.clone())
        .span(d.start_ns, d.end_ns)
        .remedy(remedy(d))
        .evidence(&d.evidence)
        .build()
}

fn measure_name(m: Measure) -> &'static str {
    match m {
        Measure::IcmpEchoRtt => "ICMP echo response time",
        Measure::TcpHandshakeRtt => "TCP handshake RTT",
        Measure::TcpRequestResponse => "TCP request→response time",
        Measure::SendPath => "send path (ping's send stamp → capture)",
    }
}

fn stats_of(c: &MeasureComparison, f: Family) -> Option<&FamilyStats> {
    match f {
        Family::Ipv4 => c.ipv4.as_ref(),
        Family::Ipv6 => c.ipv6.as_ref(),
    }
}

/// "median 6.361 ms (p90 7.439, 60 samples) against 0.027 ms (p90 0.030, 60)".
fn versus(c: &MeasureComparison, slow: Family) -> String {
    let (Some(s), Some(f)) = (stats_of(c, slow), stats_of(c, slow.other())) else {
        return String::new();
    };
    format!(
        "{} median {:.3} ms (p90 {:.3}, {} samples) against {:.3} ms over {} (p90 {:.3}, {})",
        measure_name(c.measure),
        s.median_ms,
        s.p90_ms,
        s.count,
        f.median_ms,
        slow.other().name(),
        f.p90_ms,
        f.count
    )
}

fn paired_text(by: &[PairedBy]) -> String {
    let parts: Vec<&str> = by
        .iter()
        .map(|p| match p {
            PairedBy::Mac => "the same MAC address on the link",
            PairedBy::Dns => "one DNS name",
            PairedBy::OnlySender => "being the only sender in each family",
            PairedBy::Service => "one service reached on both families",
        })
        .collect();
    parts.join(" and ")
}

fn host_text(v4: Option<&String>, v6: Option<&String>) -> String {
    match (v4, v6) {
        (Some(a), Some(b)) => format!("{b} / {a}"),
        (Some(a), None) | (None, Some(a)) => a.clone(),
        (None, None) => "?".into(),
    }
}

/// The one-paragraph summary.
pub fn summary(d: &Diagnosis) -> String {
    let ev = &d.evidence;
    let slow = ev.slow_family;
    let client = host_text(ev.client_ipv4.as_ref(), ev.client_ipv6.as_ref());
    let peer = host_text(ev.peer_ipv4.as_ref(), ev.peer_ipv6.as_ref());
    let flagged: Vec<String> = ev
        .measures
        .iter()
        .filter(|m| {
            m.verdict
                == match slow {
                    Family::Ipv4 => Verdict::Ipv4Slower,
                    Family::Ipv6 => Verdict::Ipv6Slower,
                }
        })
        .map(|m| versus(m, slow))
        .collect();
    let mut s = if ev.peer_ipv4.is_some() || ev.peer_ipv6.is_some() {
        format!(
            "{} is consistently slower between {client} and {peer} (the client's two addresses tied by {}; the peer's by {}): {}.",
            slow.name(),
            paired_text(&ev.client_paired_by),
            paired_text(&ev.peer_paired_by),
            flagged.join("; ")
        )
    } else {
        format!(
            "{} is consistently slower in the send path of {client} (its two addresses tied by {}): {}.",
            slow.name(),
            paired_text(&ev.client_paired_by),
            flagged.join("; ")
        )
    };
    s.push(' ');
    s.push_str(&where_text(d));
    s
}

/// Where the time went.
fn where_text(d: &Diagnosis) -> String {
    let ev = &d.evidence;
    let slow = ev.slow_family.name();
    let wire_normal = ev
        .measures
        .iter()
        .filter(|m| m.measure.on_wire())
        .any(|m| m.verdict == Verdict::NoDifference);
    let mut parts = Vec::new();
    if ev.slow_in_send_path {
        let vantage = if ev.sender_on_link == Some(true) {
            "the requests still carry their initial hop limit (captured on the sender or its link), so "
        } else {
            ""
        };
        let wire = if ev.slow_on_wire {
            ""
        } else if wire_normal {
            " while the request→reply gap on the wire is normal in both families"
        } else {
            ""
        };
        parts.push(format!(
            "The {slow} echo requests left the sender milliseconds after ping stamped them{wire}: {vantage}the time was spent inside the sender's own kernel before the packet reached the wire, in sendto() (IPv6 source-address selection scores every local address, rule 6 looking up the label of each: seed 001, thousands of addresses cost milliseconds)."
        ));
    }
    if ev.slow_on_wire {
        parts.push(match ev.peer_on_link {
            Some(true) => format!(
                "On the wire the peer is on the captured link (its packets carry an initial TTL/hop limit), so the extra time is added inside the peer host to its {slow} answers (a queue, filter or delayer in its {slow} path), not by the link."
            ),
            _ => format!(
                "On the wire the extra time lies beyond the capture point: the peer's {slow} answers or the {slow} path to it."
            ),
        });
    }
    parts.join(" ")
}

/// What to change.
pub fn remedy(d: &Diagnosis) -> String {
    let ev = &d.evidence;
    let mut r = Vec::new();
    if ev.slow_in_send_path {
        r.push("On the sender, limit IPv6 source-address selection to the outgoing interface's own addresses: `sysctl -w net.ipv6.conf.<if>.use_oif_addrs_only=1` (the seed's fix), or bind the socket to a source address; keep fewer IPv6 addresses (thousands on `lo` make every unbound sendto() score them all). Confirm with `perf` or `funccount ipv6_addr_label`.".to_string());
    }
    if ev.slow_on_wire {
        r.push(format!(
            "Find what delays {0} on the peer or its path: its {0} filter/queue rules (ip6tables/nftables NFQUEUE, tc qdiscs), a slower {0} route or tunnel; compare `ping -4` and `ping -6` from both ends. Clients with Happy Eyeballs (RFC 8305) only hide a slow {0} path partly.",
            ev.slow_family.name()
        ));
    }
    r.join(" ")
}
