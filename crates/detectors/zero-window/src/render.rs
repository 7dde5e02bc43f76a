//! Prose for a zero-window [`Diagnosis`]: summary, remedy, and the finding.

use crate::{Diagnosis, ID};
use pcapsleuth_detect::Finding;

/// A duration for prose: whole ms from 10 ms up, else one decimal.
fn fmt_ms(ns: i64) -> String {
    let v = ns as f64 / 1e6;
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
    let times = if e.episodes == 1 {
        "once".to_string()
    } else {
        format!("{} times", e.episodes)
    };
    let gaps_txt = if e.probe_gaps_ms.is_empty() {
        String::new()
    } else {
        let g: Vec<String> = e
            .probe_gaps_ms
            .iter()
            .map(|g| fmt_ms((g * 1e6) as i64))
            .collect();
        format!(" (gaps {} ms)", g.join(", "))
    };
    let ending = if e.still_closed_at_capture_end {
        "; the window was still closed when the capture ended"
    } else if e.probes > 0 {
        " until the window reopened"
    } else {
        ""
    };
    let probe_txt = match (e.probes, e.data_retransmissions_into_zero_window) {
        (0, _) => format!("; the {srole} did not need to probe"),
        (p, 0) => format!(" and the {srole} sent {p} zero-window probe(s){gaps_txt}"),
        (p, r) => format!(
            " and the {srole} probed it {p} time(s){gaps_txt}, {r} of them by re-sending data into the closed window"
        ),
    };
    format!(
        "The {rrole} {raddr} advertised a zero receive window {times} ({} ms in all, longest {} ms){probe_txt}{ending}: ordinary flow control, its application read slower than data arrived.",
        fmt_ms(d.total_ns),
        fmt_ms(d.longest_ns)
    )
}

/// What to do about `d`.
pub fn remedy(d: &Diagnosis) -> String {
    format!(
        "Nothing to fix in TCP: find out why the application on {} stops reading its socket (blocked thread, slow disk, back-pressure downstream), or give it a larger receive buffer.",
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
