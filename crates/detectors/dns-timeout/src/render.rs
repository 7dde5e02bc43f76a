//! The prose: a [`Diagnosis`] written as a [`Finding`]. Nothing is decided here.

use crate::diagnose::{Diagnosis, Shape};
use crate::ID;
use pcapsleuth_detect::Finding;

/// The finding of one diagnosed lookup.
pub fn render(d: &Diagnosis) -> Finding {
    let mut b = Finding::builder(ID, d.severity)
        .summary(summary(d))
        .flow(Some(d.flow.clone()));
    for s in &d.streams {
        b = b.stream(*s);
    }
    b.frames(d.frames.clone())
        .span(d.start_ns, d.end_ns)
        .remedy(remedy(d))
        .evidence(&d.evidence)
        .build()
}

/// A duration in ms: one decimal.
fn fmt_ms(v: f64) -> String {
    format!("{v:.1}")
}

fn gaps_text(gaps: &[f64]) -> String {
    let parts: Vec<String> = gaps.iter().map(|g| format!("{g:.0}")).collect();
    match parts.as_slice() {
        [one] => format!("after {one} ms"),
        _ => format!("at gaps of {} ms", parts.join(", ")),
    }
}

/// The one-paragraph summary.
pub fn summary(d: &Diagnosis) -> String {
    let ev = &d.evidence;
    let what = format!(
        "The {} query for {} (id 0x{:04x}) from {} to {}",
        ev.qtype, ev.qname, ev.dns_id, ev.client, ev.resolver
    );
    let sib = ev.sibling_qtype.as_deref().unwrap_or("other");
    let mut s = match d.shape {
        Shape::PairResent => format!(
            "{what} got no answer while its {sib} sibling on the same socket was answered; after the {} ms timeout ({}) both were re-sent, one after the other{} (glibc single-request mode): the lookup took {} ms longer. The {sib} re-send ({}) is collateral, not a second loss.",
            fmt_ms(ev.timeout_ms),
            ev.ladder_short,
            if ev.same_socket { "" } else { ", from a new socket" },
            fmt_ms(ev.time_lost_ms),
            frames_text(&ev.collateral_resend_frames)
        ),
        Shape::Resent => format!(
            "{what} got no answer and was re-sent{} {} ({}): the lookup took {} ms longer.",
            if ev.new_id_resends > 0 {
                " with a new id and socket"
            } else {
                ""
            },
            gaps_text(&ev.gaps_ms),
            ev.ladder_short,
            fmt_ms(ev.time_lost_ms)
        ),
        Shape::UnansweredNotResent => format!(
            "{what} was never answered and never re-sent, while its {sib} sibling{} was answered: the lookup waited the full timeout (~{} ms, from {}) and returned without {} records; the unanswered query is the only trace of the loss.",
            if ev.sibling_other_socket {
                " (sent from another socket: options single-request-reopen)"
            } else {
                ""
            },
            fmt_ms(ev.timeout_ms),
            ev.timeout_source,
            ev.qtype
        ),
        Shape::NeverAnswered if ev.transmissions > 1 => format!(
            "{what} was sent {} times ({}, {}) and never answered: the lookup failed.",
            ev.transmissions,
            gaps_text(&ev.gaps_ms),
            ev.ladder_short
        ),
        Shape::NeverAnswered => format!(
            "{what} was never answered and never re-sent although the capture went on: the lookup waited its timeout (~{} ms, from {}) and failed or gave up on this type.",
            fmt_ms(ev.timeout_ms),
            ev.timeout_source
        ),
        Shape::ResentAfterAnswer => format!(
            "{what} was re-sent {} although an answer was captured: the answer was lost between the capture point and the client, or the client re-sent it with a lost query of its own that this capture does not show.",
            gaps_text(&ev.gaps_ms)
        ),
        Shape::SiblingLostBeforeCapture => format!(
            "{what} was answered, yet re-sent {} together with the first sighting of its {sib} sibling ({}): glibc repeats the pair when the other query timed out, so the first {sib} query was lost before this capture point (between the client and here, e.g. dropped after DNAT by the conntrack insert race of seed 002); the lookup took {} ms longer.",
            gaps_text(&ev.gaps_ms),
            frames_text(&ev.sibling_frames),
            fmt_ms(ev.time_lost_ms)
        ),
        Shape::Censored => format!(
            "{what} was still unanswered when the capture ended {} ms after the query (before its timeout ran out: not called lost).",
            fmt_ms(ev.capture_end_after_query_ms.unwrap_or(0.0))
        ),
    };
    if ev.truncated_tcp_fallback {
        s.push_str(" Its answer was truncated (TC) and the client asked again over TCP at once (a clean fallback).");
    }
    if ev.other_sightings > 0 {
        s.push_str(&format!(
            " The query was seen {} more time(s) (other interfaces, before/after NAT, or `-i any`: counted once).",
            ev.other_sightings
        ));
    }
    if ev.resolver_answers == 0 {
        s.push_str(" No answer from this resolver was captured at all: the capture may hold one direction only.");
    } else if d.shape != Shape::Censored && ev.resolver_lookups_delayed > 0 {
        s.push_str(&format!(
            " Lookups to {}: {} of {} delayed, {} ms lost in all; {}: {} of {} delayed, {} ms lost.",
            ev.resolver,
            ev.resolver_lookups_delayed,
            ev.resolver_lookups,
            fmt_ms(ev.resolver_time_lost_ms),
            ev.qname,
            ev.name_lookups_delayed,
            ev.name_lookups,
            fmt_ms(ev.name_time_lost_ms)
        ));
        if ev.burst_loss_shape {
            s.push_str(" A minority of lookups lost a query while the rest were answered at once: the shape of the conntrack insert race on a DNAT'd DNS service (seed 002).");
        }
    }
    s
}

/// "frame 6" / "frames 6, 17".
fn frames_text(frames: &[u64]) -> String {
    let list = frames
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if frames.len() == 1 {
        format!("frame {list}")
    } else {
        format!("frames {list}")
    }
}

/// What to do, per shape.
pub fn remedy(d: &Diagnosis) -> &'static str {
    match d.shape {
        Shape::PairResent => "The parallel A and AAAA queries of one socket race in conntrack when the DNS service address is DNATed (seed 002: one of them is dropped as insert_failed). Add `options single-request-reopen` (glibc; Kubernetes pod dnsConfig) or `use-vc`, run a node-local DNS cache so queries are not DNATed, or a kernel with the UDP conntrack clash resolution; confirm with `conntrack -S` (insert_failed). `options timeout:1 attempts:3` shortens each wait.",
        Shape::UnansweredNotResent => "With `single-request-reopen` glibc never re-sends the lost query: the lookup waits the whole timeout and returns without that record type. Find where the query dies (capture on both sides of the NAT, `conntrack -S` insert_failed / drop, resolver rate limits); `options timeout:1 attempts:3` bounds the wait, a node-local DNS cache avoids the DNAT.",
        Shape::Resent => "Find where the query or its answer is lost: capture on both sides of any NAT and at the resolver, check `conntrack -S` (insert_failed), firewalls and the resolver's load or rate limiting. `options timeout:1 attempts:3` (glibc) shortens each wait; a second nameserver or a local cache hides single losses.",
        Shape::NeverAnswered => "Check that the resolver is reachable and serving: firewall rules for UDP/53, the service behind the address, the `nameserver` lines of /etc/resolv.conf; list a second nameserver.",
        Shape::ResentAfterAnswer => "Capture on the client itself to see whether the answer arrives (host firewall, conntrack dropping the reply); if its sibling query was lost before the capture point, the sibling explains the re-send.",
        Shape::SiblingLostBeforeCapture => "Capture where the client's queries enter (its own interface, the container's veth) to see the lost query; behind a DNAT'd DNS service, the parallel A/AAAA queries of one socket race in conntrack (seed 002): `options single-request-reopen`, a node-local DNS cache or a kernel with the UDP clash resolution; confirm with `conntrack -S` (insert_failed).",
        Shape::Censored => "Nothing to change: capture for longer than the resolver timeout to see whether the query was answered.",
    }
}
