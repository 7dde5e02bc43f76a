//! The latency budget of a capture: time lost to stalls by cause (the stall
//! ledger's `time_lost_by_cause`, summed over the capture's flows) as one
//! stacked bar. Drawn only when the report carries flows with a ledger
//! (`pcapsleuth flows`, or a report analysed with
//! `AnalyzeOptions::with_flows`).

use crate::svg::esc;
use pcapsleuth_ledger::{sum_cause_times, CauseTime};
use pcapsleuth_report::CaptureReport;
use std::fmt::Write as _;

/// One colour per cause, by [`pcapsleuth_ledger::StallCause::index`]
/// (13 causes; `unknown` last, grey).
const CAUSE_COLOURS: [&str; 13] = [
    "#1f5fbf", "#d62728", "#e67700", "#8e44ad", "#2ca02c", "#c98a00", "#17becf", "#e377c2",
    "#7f7f00", "#8c564b", "#5c7cfa", "#20c997", "#adb5bd",
];

/// Time lost by cause over the capture's flows, largest first, causes with
/// no time left out.
pub fn time_lost(c: &CaptureReport) -> Vec<CauseTime> {
    let mut v: Vec<CauseTime> =
        sum_cause_times(c.flows.iter().flat_map(|f| f.time_lost_by_cause.iter()))
            .into_iter()
            .filter(|ct| ct.duration_ms > 0.0)
            .collect();
    v.sort_by(|a, b| b.duration_ms.total_cmp(&a.duration_ms));
    v
}

/// `1.234 s` / `56 ms`.
fn dur(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.3} s", ms / 1000.0)
    } else {
        format!("{ms:.0} ms")
    }
}

/// The stacked bar (SVG, and its legend listing exactly the causes drawn),
/// or `None` when no flow stalled.
pub fn stacked_bar(c: &CaptureReport) -> Option<String> {
    let causes = time_lost(c);
    let total: f64 = causes.iter().map(|ct| ct.duration_ms).sum();
    if causes.is_empty() || total <= 0.0 {
        return None;
    }
    let flows = c
        .flows
        .iter()
        .filter(|f| !f.time_lost_by_cause.is_empty())
        .count();
    let (w, h, left, right) = (800.0f64, 64.0f64, 16.0f64, 16.0f64);
    let mut o = String::new();
    let _ = write!(
        o,
        r##"<svg class="time-lost" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" role="img" aria-label="time lost by cause"><text x="{left}" y="16" font-size="13" fill="#222">{} lost to stalls in {flows} flow(s), by cause</text>"##,
        esc(&dur(total))
    );
    let mut x = left;
    let span = w - left - right;
    for ct in &causes {
        let cw = (ct.duration_ms / total * span).max(1.0);
        let colour = CAUSE_COLOURS
            .get(ct.cause.index())
            .copied()
            .unwrap_or("#adb5bd");
        let _ = write!(
            o,
            r##"<rect class="cause" x="{x:.1}" y="26" width="{cw:.1}" height="26" fill="{colour}"><title>{}: {} stall(s), {}</title></rect>"##,
            esc(ct.cause.label()),
            ct.stalls,
            esc(&dur(ct.duration_ms))
        );
        if cw > 60.0 {
            let _ = write!(
                o,
                r##"<text x="{:.1}" y="44" font-size="12" fill="#fff">{}</text>"##,
                x + 5.0,
                esc(&format!("{:.0} %", ct.duration_ms / total * 100.0))
            );
        }
        x += cw;
    }
    o.push_str("</svg>\n<p class=\"legend time-lost\">");
    for ct in &causes {
        let colour = CAUSE_COLOURS
            .get(ct.cause.index())
            .copied()
            .unwrap_or("#adb5bd");
        let _ = write!(
            o,
            r#"<span><i style="background:{colour}"></i>{}: {} ({} stall{})</span>"#,
            esc(ct.cause.label()),
            esc(&dur(ct.duration_ms)),
            ct.stalls,
            if ct.stalls == 1 { "" } else { "s" }
        );
    }
    o.push_str("</p>");
    Some(o)
}
