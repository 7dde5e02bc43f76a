//! Prose for an mss-blackhole [`Diagnosis`]: summary, remedy, and the finding.

use crate::{Diagnosis, SmallPacketsPass, ID};
use pcapsleuth_detect::Finding;

/// A duration in ms for prose: whole ms from 10 ms up, else one decimal.
fn fmt_ms(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The ICMP error that never came back: `ICMPv6 Packet Too Big` or `ICMP
/// fragmentation-needed`.
pub fn icmp_name(d: &Diagnosis) -> &'static str {
    if d.ipv6 {
        "ICMPv6 Packet Too Big"
    } else {
        "ICMP fragmentation-needed"
    }
}

/// The one-sentence summary of `d`.
pub fn summary(d: &Diagnosis) -> String {
    let e = &d.evidence;
    let role = e.sender.role.as_str();
    let saddr = e.sender.address();
    let daddr = d.receiver.address();
    let smallest_ip = e.smallest_unacked_ip_bytes;
    let lower = e.path_mtu_lower_bound_bytes;
    let ladder = &e.rto_ladder_ms;
    let ladder_txt = match (ladder.first(), ladder.last()) {
        (Some(a), Some(b)) if ladder.len() > 1 => {
            format!("{} … {} ms", fmt_ms(*a), fmt_ms(*b))
        }
        (Some(a), _) => format!("{} ms", fmt_ms(*a)),
        _ => String::new(),
    };
    let small = match d.small_packets {
        SmallPacketsPass::DataAcked => format!(
            "while {}-byte segments were acknowledged",
            e.largest_acked_segment
        ),
        SmallPacketsPass::PeerKeptSending => {
            "while the peer's small packets kept flowing".to_string()
        }
        SmallPacketsPass::HandshakeOnly => {
            "although the handshake's small packets passed".to_string()
        }
    };
    let icmp_name = icmp_name(d);
    let tail = if e.sender_recovered_by_mtu_probing {
        format!(
            ": a path-MTU black hole between {lower} and {smallest_ip} bytes, which the sender escaped by shrinking its segments (tcp_mtu_probing)"
        )
    } else {
        format!(": a path-MTU black hole between {lower} and {smallest_ip} bytes")
    };
    let mut out = format!(
        "{}-byte segments ({smallest_ip}-byte IP packets) from the {role} {saddr} to {daddr} were re-sent {} times with exponential backoff ({ladder_txt}) and never acknowledged at that size, {small}, and no {icmp_name} came back{tail}.",
        d.stuck_segment_bytes, e.retransmissions
    );
    if let (Some(after), Some(next)) = (e.open_at_capture_end_ms, e.next_retransmission_due_ms) {
        out.push_str(&format!(
            " The capture ended {} ms after the last re-send, before the next was due (~{} ms): whether the sender recovered later is not in the capture.",
            fmt_ms(after),
            fmt_ms(next)
        ));
    }
    out
}

/// What to do about `d`.
pub fn remedy(d: &Diagnosis) -> String {
    format!(
        "Clamp the MSS where the tunnel or smaller-MTU link starts (iptables -t mangle -A FORWARD -p tcp --tcp-flags SYN,RST SYN -j TCPMSS --set-mss {}, or --clamp-mss-to-pmtu) or lower that interface's MTU; better, let {} through. net.ipv4.tcp_mtu_probing=1 lets Linux senders recover by themselves.",
        d.evidence.recommended_mss,
        icmp_name(d)
    )
}

/// The finding reporting `d`.
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
