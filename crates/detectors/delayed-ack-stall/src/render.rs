//! The words: a [`Diagnosis`] → a [`Finding`] (summary, remedy, evidence).

use crate::{Diagnosis, ID};
use pcapsleuth_core::Direction;
use pcapsleuth_detect::Finding;

/// What to change (the README's "Remedy", short).
pub const REMEDY: &str = "Write each request in one call (one buffer, or writev()/sendmsg() with all pieces), or set TCP_NODELAY on the sending socket (TCP_CORK / MSG_MORE also send the pieces together); on a Linux receiver TCP_QUICKACK (re-armed after each read) or `ip route ... quickack 1` stops it delaying the ACK.";

/// Render one diagnosis as a finding.
pub fn render(d: &Diagnosis) -> Finding {
    Finding::builder(ID, d.severity)
        .summary(summary(d))
        .flow(d.flow.clone())
        .tcp_stream(d.stream)
        .frames(d.frames.clone())
        .span(d.start_ns, d.end_ns)
        .remedy(REMEDY)
        .evidence(&d.evidence)
        .build()
}

/// One sentence: who waited, how often, how long, for which timer.
fn summary(d: &Diagnosis) -> String {
    let e = &d.evidence;
    let (role, who, peer) = match &d.flow {
        Some(f) if d.dir == Direction::ClientToServer => (
            "client",
            ep(&f.client, f.client_port),
            ep(&f.server, f.server_port),
        ),
        Some(f) => (
            "server",
            ep(&f.server, f.server_port),
            ep(&f.client, f.client_port),
        ),
        None => (
            "sender",
            format!("of tcp.stream {}", d.stream),
            "its peer".to_string(),
        ),
    };
    let timer = e.delayed_ack_timer_ms.map_or_else(
        || "the peer's delayed ACK".to_string(),
        |t| format!("the peer's {t:.0} ms delayed ACK"),
    );
    let times = if e.stalls == 1 {
        "once".to_string()
    } else {
        format!("{} times", e.stalls)
    };
    format!(
        "The {role} {who} wrote to {peer} in small pieces and Nagle held a piece until {timer} {times} (median {:.1} ms, max {:.1} ms, {:.1} ms in all): send each request in one write or set TCP_NODELAY.",
        e.median_ms, e.max_ms, e.stalled_ms
    )
}

/// `addr:port`, IPv6 (an address with a colon) in brackets.
fn ep(addr: &str, port: u16) -> String {
    if addr.contains(':') {
        format!("[{addr}]:{port}")
    } else {
        format!("{addr}:{port}")
    }
}
