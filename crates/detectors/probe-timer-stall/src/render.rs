//! The words: a [`Diagnosis`] → a [`Finding`] (summary, remedy, evidence).

use crate::{Diagnosis, TriggerKind, ID};
use pcapsleuth_core::Direction;
use pcapsleuth_detect::Finding;

/// Render one diagnosis as a finding.
pub fn render(d: &Diagnosis) -> Finding {
    Finding::builder(ID, d.severity)
        .summary(summary(d))
        .flow(d.flow.clone())
        .tcp_stream(d.stream)
        .frames(d.frames.clone())
        .span(d.start_ns, d.end_ns)
        .remedy(remedy(d.evidence.trigger))
        .evidence(&d.evidence)
        .build()
}

/// One sentence: how many bytes of which sender waited how long after what,
/// and the timer that released them.
fn summary(d: &Diagnosis) -> String {
    let e = &d.evidence;
    let who = d
        .flow
        .as_ref()
        .map(|f| {
            let (a, ap, b, bp) = if d.dir == Direction::ClientToServer {
                (&f.client, f.client_port, &f.server, f.server_port)
            } else {
                (&f.server, f.server_port, &f.client, f.client_port)
            };
            format!("{} -> {}", ep(a, ap), ep(b, bp))
        })
        .unwrap_or_else(|| format!("tcp.stream {}", d.stream));
    let timer_txt = e.timer.map_or("no known timer", |t| t.label());
    let mtu = d.mtu.map_or("?".to_string(), |m| m.to_string());
    let cause = match e.trigger {
        TriggerKind::SelfAddressedFragNeeded => {
            format!("after the host's own frag-needed (MTU {mtu}) refused them")
        }
        TriggerKind::FragNeeded => format!("after a frag-needed (MTU {mtu})"),
        TriggerKind::ZeroWindow => "after the receiver's zero window re-opened".to_string(),
        TriggerKind::SmallWindow => {
            "behind a receive window smaller than the segment (the probe0 timer then sent exactly the window)".to_string()
        }
        TriggerKind::FarSide => {
            "while the peer's RTO re-sent its request (the answer was held by the sender's probe0 timer and cut below its MSS; seen from the far side, no ICMP here)".to_string()
        }
    };
    format!(
        "{} bytes of {who} left only {:.1} ms {cause}, when a timer fired ({timer_txt}): the application waited for the TCP probe/retransmission timer.",
        e.bytes_waited, e.gap_ms
    )
}

/// What to change, by trigger.
fn remedy(trigger: TriggerKind) -> &'static str {
    match trigger {
        TriggerKind::SelfAddressedFragNeeded | TriggerKind::FragNeeded => "Make the MTU consistent for this destination: set the route/interface MTU on the host (e.g. `ip route change <dst> ... mtu <mtu>`) or clamp the MSS at the tunnel endpoint, so segments built with the old MSS are never refused.",
        TriggerKind::FarSide => "The answer was cut below its MSS after a wait of one probe0 period: look for a path-MTU drop on the sender's side (its own frag-needed, seed 000) and make the route MTU consistent there (`ip route change <dst> ... mtu <mtu>`, or clamp the MSS at the tunnel endpoint).",
        TriggerKind::SmallWindow => "The receiver's window stayed below one segment (it reads in small chunks or its buffer is small): larger receive buffers or reads avoid the probe-timer wait; the sender's silly-window avoidance (RFC 1122 4.2.3.4) waits for the probe timer rather than send a small segment.",
        TriggerKind::ZeroWindow => "Find why the sender missed the window re-opening (window update lost, or re-opened by less than one MSS: the receiver reads in small chunks); larger receive buffers or reads avoid the probe-timer wait.",
    }
}

/// `addr:port`, IPv6 (an address with a colon) in brackets.
fn ep(addr: &str, port: u16) -> String {
    if addr.contains(':') {
        format!("[{addr}]:{port}")
    } else {
        format!("{addr}:{port}")
    }
}
