//! Prose for a missing-zero-window [`Diagnosis`]: summary, remedy, and the finding.

use crate::{Diagnosis, Proof, ID};
use pcapsleuth_detect::Finding;

/// A duration in ms for prose: whole ms from 10 ms up, else one decimal.
fn fmt_ms(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The one-sentence summary of `d`.
pub fn summary(d: &Diagnosis) -> String {
    let e = &d.evidence;
    let rrole = e.receiver.role.as_str();
    let raddr = e.receiver.address();
    let srole = e.sender.role.as_str();
    let ladder = &e.rto_ladder_ms;
    let ladder_txt = match (ladder.first(), ladder.last()) {
        (Some(a), Some(b)) if ladder.len() > 1 => {
            format!("{} … {} ms", fmt_ms(*a), fmt_ms(*b))
        }
        (Some(a), _) => format!("{} ms", fmt_ms(*a)),
        _ => String::new(),
    };
    let how = match d.proof {
        Proof::DuplicateAcks => format!(
            "answering {} of them with duplicate ACKs that keep the window open",
            e.receiver_answers_open_window
        ),
        Proof::CapturedAtReceiver => {
            "the capture, taken at the receiver's end, shows them arriving unanswered".to_string()
        }
        Proof::CapturedOnReceiverLink => "the capture, taken on the receiver's link (its packets carry an initial TTL), shows them arriving unanswered".to_string(),
    };
    let mut out = format!(
        "The {rrole} {raddr} stopped acknowledging at relative seq {} while still advertising a {}-byte window and never sent a zero window; the {srole} re-sent the {}-byte segment {} times with exponential backoff ({ladder_txt}), {how}: the receiver is dropping data behind an open window (seed 003).",
        e.stuck_ack, e.window_at_drop_bytes, e.segment_bytes, e.retransmissions
    );
    if let (Some(after), Some(next)) = (e.open_at_capture_end_ms, e.next_retransmission_due_ms) {
        out.push_str(&format!(
            " The capture ended {} ms after the last re-send, before the next was due (~{} ms): how the episode ended is not in the capture.",
            fmt_ms(after),
            fmt_ms(next)
        ));
    }
    out
}

/// What to do about `d`.
pub fn remedy(d: &Diagnosis) -> String {
    format!(
        "On {}: run Linux >= 6.5 with net.ipv4.tcp_shrink_window=1 so the receiver advertises a zero window instead of dropping data; meanwhile lower net.ipv4.tcp_rmem max or make the application read faster so the buffer limit is not reached.",
        d.evidence.receiver.address()
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
