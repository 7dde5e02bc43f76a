//! The words: a [`Diagnosis`] → a [`Finding`] (summary, remedy, evidence).

use crate::{
    encapsulation_guess, Diagnosis, FloodEvidence, SenderNext, Verdict, FLOOD_SOURCES_CAP, ID,
    MTU_EXPIRES_S,
};
use pcapsleuth_core::ip_protocol;
use pcapsleuth_core::{Endpoint, StreamRef};
use pcapsleuth_detect::Finding;
use std::net::IpAddr;

/// Render one diagnosis as a finding.
pub fn render(d: &Diagnosis) -> Finding {
    let mut b = Finding::builder(ID, d.severity)
        .summary(summary(d))
        .flow(d.flow.clone())
        .frames(d.frames.clone())
        .span(d.start_ns, d.end_ns)
        .remedy(remedy(d))
        .evidence(&d.evidence);
    if let Some(s) = d.stream {
        b = b.tcp_stream(s);
    }
    for s in &d.other_streams {
        b = b.stream(StreamRef::tcp(*s));
    }
    b.build()
}

/// One sentence: which ICMP, from whom, for what flow, what MTU, what the
/// sender did, and the recurrence.
fn summary(d: &Diagnosis) -> String {
    let e = &d.evidence;
    if let Some(b) = e.burst {
        return burst_summary(d, b);
    }
    if let Some(f) = &e.flood {
        return flood_summary(d, f);
    }
    let mtu = e.mtu;
    let what = if e.icmp_source.is_ipv4() {
        "ICMP fragmentation-needed"
    } else {
        "ICMPv6 Packet Too Big"
    };
    let times = match e.count {
        1 => String::new(),
        n => format!(" ({n} messages)"),
    };
    let flow_txt = quoted_flow(d);
    let reaction_txt = reaction(d);
    match d.verdict {
        Verdict::SelfAddressed => format!(
            "Self-addressed {what}{times} from {} to itself, MTU {mtu}: the host's own route MTU ({mtu}) is below what the socket of {flow_txt} still uses{reaction_txt}.",
            e.icmp_source
        ),
        Verdict::QuotedNotCaptured => format!(
            "{what}{times} from {} for {flow_txt}: path MTU {mtu} bytes, quoting a {}-byte datagram the sender was never seen to send (its largest captured datagram is {} bytes, within the MTU): a device on the path coalesced segments (LRO/GRO) and could not forward the result, or the ICMP is forged (RFC 5927){reaction_txt}.",
            e.icmp_source,
            e.quoted_size_bytes,
            e.largest_captured_bytes.unwrap_or(0)
        ),
        Verdict::SenderStalled | Verdict::PmtuDiscovery => {
            let deficit = e.mtu_deficit_bytes;
            let unit = if deficit == 1 { "byte" } else { "bytes" };
            let size_txt = if e.quoted_size_bytes > mtu {
                format!(
                    "{deficit} {unit} short of the {}-byte datagram",
                    e.quoted_size_bytes
                )
            } else {
                format!("{deficit} {unit} below 1500")
            };
            format!(
                "{what}{times} from {} for {flow_txt}: path MTU {mtu} bytes, {size_txt} (encapsulation guess: {}){reaction_txt}.",
                e.icmp_source, e.encapsulation_guess
            )
        }
    }
}

/// A flood finding: the messages beyond the flows reported one by one.
fn flood_summary(d: &Diagnosis, f: &FloodEvidence) -> String {
    let e = &d.evidence;
    let what = if e.icmp_source.is_ipv4() {
        "ICMP fragmentation-needed"
    } else {
        "ICMPv6 Packet Too Big"
    };
    let unit = if e.count == 1 { "message" } else { "messages" };
    let from = if f.other_sources {
        format!(
            "from ICMP sources beyond the first {FLOOD_SOURCES_CAP} (the first from {}, MTU {})",
            e.icmp_source, e.mtu
        )
    } else {
        format!("from {}, MTU {}", e.icmp_source, e.mtu)
    };
    let own = if e.self_addressed {
        " Some are self-addressed: a host refused its own datagrams."
    } else {
        ""
    };
    format!(
        "{what} flood: {} more {unit} {from}, each quoting a flow this capture does not hold, beyond the {} such flows reported one by one (the first folded here quotes {}).{own}",
        e.count,
        f.reported_apart,
        quoted_flow(d)
    )
}

/// What the sender did after the first ICMP, as a clause (`; the sender …`).
fn reaction(d: &Diagnosis) -> String {
    let e = &d.evidence;
    match (e.sender_next, e.sender_delay_ms) {
        (SenderNext::Immediate, Some(ms)) => {
            format!("; the sender re-sent the bytes {ms:.3} ms later")
        }
        (SenderNext::Delayed, Some(ms)) => {
            format!("; the sender re-sent the bytes only {ms:.1} ms later")
        }
        (SenderNext::Never, _) => {
            "; the sender never re-sent the quoted bytes in this capture".to_string()
        }
        _ => String::new(),
    }
}

/// Burst `b` (from 1) of a route whose frag-needed recurred.
fn burst_summary(d: &Diagnosis, b: usize) -> String {
    let e = &d.evidence;
    let what = if e.icmp_source.is_ipv4() {
        "ICMP fragmentation-needed"
    } else {
        "ICMPv6 Packet Too Big"
    };
    let n = e.bursts.len();
    let entry = e.bursts.get(b.saturating_sub(1));
    let own = entry.map_or(0, |x| x.self_addressed);
    let routed = entry.map_or(e.count, |x| x.icmps).saturating_sub(own);
    let flow_txt = quoted_flow(d);
    let mut parts: Vec<String> = Vec::new();
    if routed > 0 {
        let unit = if routed == 1 { "message" } else { "messages" };
        parts.push(format!(
            "{routed} {unit} from {} for {flow_txt}{}",
            e.icmp_source,
            reaction(d).replacen("; ", ", ", 1)
        ));
    }
    if own > 0 {
        let whom = if routed > 0 {
            "a socket still using the old MSS".to_string()
        } else {
            flow_txt
        };
        let wait = e
            .self_addressed_delay_ms
            .map(|ms| format!(", whose data left only {ms:.1} ms later"))
            .unwrap_or_default();
        parts.push(format!(
            "{own} self-addressed by {} for {whom}{wait}",
            d.quoted_src.addr
        ));
    }
    let period = e.recurrence_s.unwrap_or(0.0);
    format!(
        "{what} burst {b} of {n} for {} -> {} (MTU {}): {}. It recurs every {period} s: the host's learned path MTU expires (net.ipv4.route.mtu_expires, Linux default {MTU_EXPIRES_S} s) and its next full-size datagram is refused again.",
        d.quoted_src.addr,
        d.quoted_dst.addr,
        e.mtu,
        parts.join("; ")
    )
}

/// The quoted flow as text: `TCP 192.0.2.10:48001 -> 198.51.100.1:9001`;
/// addresses only for protocols without ports (`[addr]:0` would mislead).
fn quoted_flow(d: &Diagnosis) -> String {
    let proto = match d.quoted_protocol {
        ip_protocol::TCP => "TCP",
        ip_protocol::UDP => "UDP",
        ip_protocol::ICMP => "ICMP",
        ip_protocol::ICMPV6 => "ICMPv6",
        _ => "IP",
    };
    if matches!(d.quoted_protocol, ip_protocol::TCP | ip_protocol::UDP) {
        format!("{proto} {} -> {}", sock(d.quoted_src), sock(d.quoted_dst))
    } else {
        format!("{proto} {} -> {}", d.quoted_src.addr, d.quoted_dst.addr)
    }
}

/// What to change, by verdict (and the recurrence).
fn remedy(d: &Diagnosis) -> String {
    let base = verdict_remedy(d);
    if d.evidence.burst.is_some() {
        format!("{base} A fixed MTU also ends the recurrence; a longer net.ipv4.route.mtu_expires only spaces it out.")
    } else {
        base
    }
}

/// What to change, by verdict.
fn verdict_remedy(d: &Diagnosis) -> String {
    let mtu = d.evidence.mtu;
    match d.verdict {
        Verdict::SelfAddressed => format!(
            "Set the route or interface MTU to {mtu} on this host (e.g. `ip route change <dst> ... mtu {mtu}`) or clamp the MSS at the tunnel endpoint, so sockets never build segments larger than the path ({}).",
            encapsulation_guess(mtu)
        ),
        Verdict::QuotedNotCaptured => "Find the device that coalesces segments before forwarding (disable LRO/GRO on routers, bridges and hypervisor switches: `ethtool -K <dev> lro off gro off`), or, if the ICMP is forged, filter it; lowering this sender's MTU does not help, its packets already fit.".to_string(),
        Verdict::SenderStalled => format!("Lower the MTU/MSS towards this destination to {mtu} (route MTU or `TCPMSS --clamp-mss-to-pmtu` on the tunnel endpoint) so the sender never waits for PMTU discovery."),
        Verdict::PmtuDiscovery => format!("PMTU discovery worked; to avoid the extra round trip, clamp the MSS (`TCPMSS --clamp-mss-to-pmtu`) or set MTU {mtu} on hosts behind the {} link.", encapsulation_guess(mtu)),
    }
}

/// `addr:port`, IPv6 in brackets.
fn sock(e: Endpoint) -> String {
    match e.addr {
        IpAddr::V4(a) => format!("{a}:{}", e.port),
        IpAddr::V6(a) => format!("[{a}]:{}", e.port),
    }
}
