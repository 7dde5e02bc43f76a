//! The prose: a [`Diagnosis`] written as a [`Finding`] (summary, remedy,
//! evidence). Nothing is decided here.

use crate::{Diagnosis, InfoReason, Outcome, ServiceShape, ID};
use pcapsleuth_core::time::ns_to_ms;
use pcapsleuth_detect::Finding;

/// The finding of one diagnosed connection.
pub fn render(d: &Diagnosis) -> Finding {
    Finding::builder(ID, d.severity)
        .summary(summary(d))
        .flow(d.flow.clone())
        .tcp_stream(d.stream)
        .frames(d.frames.clone())
        .span(d.start_ns, d.end_ns)
        .remedy(remedy(d))
        .evidence(&d.evidence)
        .build()
}

/// The one-paragraph summary: how the handshake ended, then what the rest of
/// the capture adds (lost SYN/ACK, NAT view, service shape, sweep or tool).
pub fn summary(d: &Diagnosis) -> String {
    let ev = &d.evidence;
    let service = &ev.service;
    let mut summary = outcome_sentence(d);
    if d.synack_lost_before_client {
        if let Some(sa) = &d.synacks {
            summary.push_str(&format!(
                " A SYN/ACK (frame {}) was captured {} ms after the first SYN, yet the client sent its SYN again: that SYN/ACK was lost between the capture point and the client.",
                sa.first_frame,
                fmt_ms(sa.first_after_syn_ns)
            ));
        }
    }
    if let Some(v) = &d.nat_view {
        summary.push_str(&format!(
            " The same SYN (ISN {}) appears as {} (tcp.stream {}) only from the retry on: the first SYN was dropped inside this host, between the capture points (NAT/conntrack).",
            d.isn, v.client, v.stream
        ));
    }
    if d.synack_not_captured {
        summary
            .push_str(" (The SYN/ACK is not in this capture; the client's ACK shows it arrived.)");
    }
    let (svc_delayed, svc_conn) = (ev.service_delayed, ev.service_connections);
    match d.shape {
        ServiceShape::ConntrackRace => summary.push_str(&format!(
            " {svc_delayed} of {svc_conn} connections to {service} were delayed by ~1 s or ~3 s while the rest connected at once: the shape of the SNAT/conntrack insert race (seed 002), or of a full listen queue on the server."
        )),
        ServiceShape::ListenQueue => summary.push_str(&format!(
            " {svc_delayed} of {svc_conn} connections to {service} were delayed by ~1 s or ~3 s while the rest connected at once; on this host-local path (no NAT) that is the shape of a full listen queue."
        )),
        ServiceShape::None => {}
    }
    match d.info_reason {
        Some(InfoReason::Sweep) => summary.push_str(&format!(
            " This client failed to reach {} different services in this capture (a port or address sweep, e.g. a scanner or a peer-to-peer client trying stale peers): one unreachable target among many is expected, not an outage.",
            ev.client_failed_services
        )),
        Some(InfoReason::RawSocketTool) => summary.push_str(
            " The SYNs repeat faster than any kernel SYN timer (< 200 ms): a raw-socket tool such as a scanner, not a stalled application.",
        ),
        None => {}
    }
    summary
}

/// The first sentence: how the handshake ended, with the retries and ladder.
fn outcome_sentence(d: &Diagnosis) -> String {
    let ev = &d.evidence;
    let (client, service, ladder_short) = (&d.client, &ev.service, &d.ladder_short);
    let what = if ev.syn_count > 1 {
        format!("the SYN was sent {} times", ev.syn_count)
    } else {
        format!("the SYN/ACK was sent {} times", ev.synack_retransmits + 1)
    };
    // "over X ms" only says something when there are several gaps.
    let span = if d.gaps_ns.len() > 1 {
        format!(" over {:.1} ms", ns_to_ms(d.delay_ns))
    } else {
        String::new()
    };
    let gaps = fmt_gaps(&d.gaps_ns);
    match d.outcome {
        Outcome::SynackUnacknowledged => {
            let (first_sa, count, sa_span) = d
                .synacks
                .map_or((0, 0, 0), |s| (s.first_after_syn_ns, s.count, s.span_ns));
            format!(
                "Connection {client} -> {service} never completed its handshake: the server answered {} ms after the SYN and sent its SYN/ACK {count} times over {:.1} ms, but the client never acknowledged it (the SYN/ACK was dropped between the capture point and the client, e.g. by a host firewall, or the client had given up).",
                fmt_ms(first_sa),
                ns_to_ms(sa_span)
            )
        }
        Outcome::Connected => format!(
            "Connection {client} -> {service} was set up {:.1} ms late: {what} {gaps} ({ladder_short}), so the first SYN or its SYN/ACK was lost.",
            ns_to_ms(d.delay_ns)
        ),
        Outcome::Refused => format!(
            "Connection {client} -> {service} was refused (RST) only after {what}{span} {gaps} ({ladder_short})."
        ),
        Outcome::StillUnanswered => format!(
            "Connection {client} -> {service} was still unanswered when the capture ended {} ms after the last SYN: {what}{span} {gaps} ({ladder_short}), and the next retry (due about {:.0} ms after the last SYN) was not yet due, so the capture cannot tell whether it would have been answered.",
            fmt_ms(ev.capture_end_after_last_syn_ms.map_or(0, |m| (m * 1e6) as i64)),
            ev.next_retry_due_ms.unwrap_or(0.0)
        ),
        Outcome::NeverAnswered => format!(
            "Connection {client} -> {service} was never answered: {what}{span} {gaps} ({ladder_short}) and no SYN/ACK was captured."
        ),
    }
}

/// What to do, by how the handshake ended and the service shape.
pub fn remedy(d: &Diagnosis) -> &'static str {
    match (d.outcome, d.shape) {
        (Outcome::StillUnanswered, _) => "Capture for longer (past the SYN retries, e.g. 2 minutes for Linux's 127 s give-up) to see whether the connection is answered; if it is not, check that the server is reachable and listening and that no firewall silently drops the SYN.",
        (Outcome::SynackUnacknowledged, _) => "Capture on the client host itself (after its firewall) to see whether the SYN/ACK arrives; check host firewall / conntrack rules dropping the SYN/ACK (iptables INPUT counters, `conntrack -S` invalid), and whether the application abandoned the connect() before the answer.",
        (_, ServiceShape::ConntrackRace) => "Make SNAT port allocation fully random (`iptables -t nat ... -j MASQUERADE --random-fully`, NF_NAT_RANGE_PROTO_RANDOM_FULLY) or run a kernel with conntrack clash resolution; confirm with `conntrack -S` insert_failed counting the lost SYNs. If instead the server's `nstat TcpExtListenOverflows` grows, raise its listen backlog (net.core.somaxconn, listen()).",
        (_, ServiceShape::ListenQueue) => "Raise the server's listen backlog (listen() argument, net.core.somaxconn, net.ipv4.tcp_max_syn_backlog) or accept faster; confirm with `nstat TcpExtListenOverflows` / `TcpExtListenDrops`.",
        (Outcome::Connected | Outcome::Refused, ServiceShape::None) => "Find where the SYN or SYN/ACK is dropped: capture on both sides of NAT/firewalls, check `conntrack -S` (insert_failed), SYN-flood protection and listen-queue overflows (`nstat TcpExtListenOverflows`).",
        (Outcome::NeverAnswered, ServiceShape::None) => "Check that the server is reachable and listening and that no firewall silently drops the SYN (capture on the server side and on each hop).",
    }
}

/// A duration in ms: one decimal, or three below 1 ms (so it never reads "0.0").
fn fmt_ms(ns: i64) -> String {
    if ns.abs() < 1_000_000 {
        format!("{:.3}", ns_to_ms(ns))
    } else {
        format!("{:.1}", ns_to_ms(ns))
    }
}

/// Gaps (ns) as "N ms apart" or "at gaps of a, b ms".
fn fmt_gaps(gaps: &[i64]) -> String {
    let parts: Vec<String> = gaps
        .iter()
        .map(|&g| format!("{:.0}", ns_to_ms(g)))
        .collect();
    match parts.as_slice() {
        [one] => format!("{one} ms apart"),
        _ => format!("at gaps of {} ms", parts.join(", ")),
    }
}
