//! The words: a [`Diagnosis`] → a [`Finding`] (summary, remedy, evidence).

use crate::{Diagnosis, ID};
use pcapsleuth_detect::Finding;

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

fn plural(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

/// One sentence (two with a drop): who retracted, how often, by how much,
/// what kind, what happened to data in flight, and the relation to
/// `missing-zero-window`.
pub fn summary(d: &Diagnosis) -> String {
    let e = &d.evidence;
    let mut kinds: Vec<String> = Vec::new();
    if e.to_zero_window_count > 0 {
        kinds.push(format!("{} onto a zero window", e.to_zero_window_count));
    }
    if e.below_scale_unit_count > 0 {
        let unit = e.window_scale_factor.unwrap_or(1);
        kinds.push(format!(
            "{} by less than one {unit}-byte window-scale unit: rounding, window >> wscale",
            e.below_scale_unit_count
        ));
    }
    let kinds = if kinds.is_empty() {
        String::new()
    } else {
        format!(" ({})", kinds.join("; "))
    };
    let sender_role = e.sender.split(' ').next().unwrap_or("sender");
    let inflight = if e.dropped_segments > 0 {
        format!(
            "; the {sender_role} had already sent {} bytes into the retracted space and had to re-send {} ({} bytes dropped by the receiver)",
            e.sent_into_retracted_bytes,
            plural(e.dropped_segments, "segment", "segments"),
            e.dropped_bytes
        )
    } else if e.sent_into_retracted_bytes > 0 {
        format!(
            "; the {sender_role} had already sent {} bytes into the retracted space, none of them re-sent",
            e.sent_into_retracted_bytes
        )
    } else {
        format!("; the {sender_role} had sent nothing into the retracted space")
    };
    format!(
        "The {} retracted its receive window {}: the right edge (ACK + scaled window) moved left by up to {} bytes{kinds}{inflight}. A receiver at its buffer limit shrinking the window (RFC 7323 section 2.4, Linux net.ipv4.tcp_shrink_window=1) is the fix for seed 003's missing zero window, where it drops data behind an open window instead (detector missing-zero-window).",
        e.receiver,
        plural(e.count, "time", "times"),
        e.max_retracted_bytes
    )
}

/// What to do about `d`.
pub fn remedy(d: &Diagnosis) -> String {
    let e = &d.evidence;
    if e.dropped_segments > 0 {
        format!(
            "The {} dropped data it had already let the sender send; the sender recovered by retransmission (RFC 9293 section 3.8.6: a sender must cope with a shrinking window). Make the application read faster or raise net.ipv4.tcp_rmem max on the receiver so its buffer limit is not reached; keep tcp_shrink_window=1 (without it the receiver drops data behind an open window: missing-zero-window).",
            e.receiver
        )
    } else {
        "Nothing to fix: RFC 7323 section 2.4 allows a retracted window and senders must handle it (RFC 9293 section 3.8.6). If the window keeps closing, the receiving application reads too slowly for its buffer (net.ipv4.tcp_rmem): make it read faster or raise the limit.".to_string()
    }
}
