//! The SYN ladder of a `syn-retransmit` finding: every SYN attempt against
//! time since the first, with the retry schedule the detector named (its
//! `ladder` evidence) drawn as the expected ladder, and the SYN-ACK (or RST)
//! that ended it. A time–sequence graph says little here: a handshake has no
//! data, so it was a mostly empty plot.
//!
//! The observed times come from the evidence (`gaps_ms`: the gaps between
//! successive SYNs, ms; `delay_ms`: first SYN to the handshake's end, ms);
//! the frame numbers of the SYNs from the flow's series when there is one.

use crate::series::FlowSeries;
use crate::svg::{esc, nice_ticks, C_ACK, C_CITE, C_DATA, C_RETX};
use pcapsleuth_core::{Direction, Finding};
use std::fmt::Write as _;

/// Colour of the expected ladder.
pub const C_EXPECTED: &str = "#868e96";

/// Nominal SYN gaps (s) of the schedule named by the `ladder` evidence, and
/// its name for the legend. Schedules as in the syn-retransmit detector
/// (`crates/detectors/syn-retransmit/src/ladder.rs`): Linux classic doubling
/// from `TCP_TIMEOUT_INIT` 1 s (RFC 6298), Linux `tcp_syn_linear_timeouts`
/// / XNU `tcp_syn_backoff` (1 s ×5 then doubling), Windows 3 s then 6 s,
/// RFC 1122 3 s doubling. Unnamed schedules are drawn against Linux's
/// default.
pub fn expected_gaps(ladder: &str) -> (&'static [f64], &'static str) {
    const CLASSIC: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
    const LINEAR: &[f64] = &[1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
    if ladder.contains("linear timeouts")
        || ladder.contains("tcp_syn_linear_timeouts (")
        || ladder.starts_with("XNU")
    {
        (
            LINEAR,
            "expected: 1 s ×5 then doubling (Linux linear / XNU)",
        )
    } else if ladder.starts_with("Windows") {
        (&[3.0, 6.0], "expected: Windows 3 s, 6 s")
    } else if ladder.starts_with("3 s") {
        (
            &[3.0, 6.0, 12.0, 24.0, 48.0, 96.0],
            "expected: 3 s doubling (RFC 1122)",
        )
    } else {
        (CLASSIC, "expected: Linux 1 s doubling (RFC 6298)")
    }
}

fn ev_f64(f: &Finding, k: &str) -> Option<f64> {
    f.evidence.get(k).and_then(|v| v.as_f64())
}

/// Frames of the client's SYNs in the series, one per attempt (sightings
/// less than 1 ms apart are one attempt seen twice).
fn syn_frames(s: Option<&FlowSeries>) -> Vec<u64> {
    let mut out: Vec<(u64, i64)> = Vec::new();
    for p in s.map(|s| s.points.as_slice()).unwrap_or_default() {
        if p.dir == Direction::ClientToServer && p.syn {
            if out.last().is_some_and(|(_, t)| p.ts_ns - t < 1_000_000) {
                continue;
            }
            out.push((p.frame.get(), p.ts_ns));
        }
    }
    out.into_iter().map(|(f, _)| f).collect()
}

/// The SYN ladder SVG of a `syn-retransmit` finding (`None` when the
/// evidence has no SYN gaps), with its legend, as HTML.
pub fn syn_ladder(f: &Finding, s: Option<&FlowSeries>, uid: &str) -> Option<String> {
    let gaps: Vec<f64> = f
        .evidence
        .get("gaps_ms")?
        .as_array()?
        .iter()
        .filter_map(|v| v.as_f64())
        .collect();
    if gaps.is_empty() {
        return None;
    }
    let mut observed = vec![0.0f64];
    for g in &gaps {
        let last = observed.last().copied().unwrap_or(0.0);
        observed.push(last + g);
    }
    let ladder = f
        .evidence
        .get("ladder")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    let (nominal, name) = expected_gaps(ladder);
    let mut expected = vec![0.0f64];
    for g in nominal.iter().take(observed.len() - 1) {
        let last = expected.last().copied().unwrap_or(0.0);
        expected.push(last + g * 1000.0);
    }
    let refused = f.evidence.get("refused").and_then(|v| v.as_bool()) == Some(true);
    let connected = f.evidence.get("connected").and_then(|v| v.as_bool()) == Some(true);
    let end = ev_f64(f, "delay_ms").filter(|_| connected || refused);
    let frames = syn_frames(s);
    let n = observed.len();
    let t_max = observed
        .iter()
        .chain(&expected)
        .copied()
        .chain(end)
        .fold(1.0f64, f64::max);
    let g = Geo {
        w: 800.0,
        row: 40.0,
        left: 96.0,
        right: 24.0,
        top: 40.0,
        span: t_max * 1.12,
        n,
    };
    let (w, left, right, top) = (g.w, g.left, g.right, g.top);
    let h = g.base() + 52.0;
    let xs = |ms: f64| g.xs(ms);
    let ys = |k: usize| g.ys(k);
    let base = g.base();
    let mut o = String::new();
    let _ = write!(
        o,
        r##"<svg class="syn-ladder" id="ladder-{uid}" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" role="img" aria-label="SYN ladder"><text x="{left}" y="18" font-size="13" fill="#222">SYN attempts against time since the first SYN{}</text>"##,
        s.map(|s| format!(" · tcp.stream {}", s.stream))
            .unwrap_or_default()
    );
    ladder_axes(&mut o, &g);
    // Expected ladder: dashed grey steps and hollow diamonds.
    // The sender waits on row k from attempt k to attempt k+1, then steps
    // down a row: `M x0 y0 H x1 V y1 H x2 V y2 …`.
    let steps = |times: &[f64]| {
        let mut d = String::new();
        for (k, t) in times.iter().enumerate() {
            let (px, py) = (xs(*t), ys(k));
            if k == 0 {
                let _ = write!(d, "M{px:.1} {py:.1}");
            } else {
                let _ = write!(d, "H{px:.1}V{py:.1}");
            }
        }
        d
    };
    let d = steps(&expected);
    for (k, t) in expected.iter().enumerate() {
        let (px, py) = (xs(*t), ys(k));
        let _ = write!(
            o,
            r##"<path class="expected" d="M{px:.1} {:.1}l9 9l-9 9l-9 -9z" fill="#fff" stroke="{C_EXPECTED}" stroke-width="1.5"><title>expected attempt {} at {t:.0} ms</title></path>"##,
            py - 9.0,
            k + 1
        );
    }
    let _ = write!(
        o,
        r##"<path d="{d}" fill="none" stroke="{C_EXPECTED}" stroke-width="1.5" stroke-dasharray="6 4"/>"##
    );
    // Observed attempts: solid steps and filled dots, labelled.
    let d = steps(&observed);
    let _ = write!(
        o,
        r##"<path d="{d}" fill="none" stroke="{C_DATA}" stroke-width="1.5"/>"##
    );
    for (k, t) in observed.iter().enumerate() {
        let (px, py) = (xs(*t), ys(k));
        let colour = if k == 0 { C_DATA } else { C_RETX };
        let frame = frames.get(k).map(|f| format!("#{f} ")).unwrap_or_default();
        let label = format!("{frame}+{t:.0} ms");
        // Labels to the right of the dot, or to its left near the right edge.
        let (lx, anchor) = if px > w - right - 110.0 {
            (px - 9.0, "end")
        } else {
            (px + 9.0, "start")
        };
        let _ = write!(
            o,
            r##"<circle class="attempt" cx="{px:.1}" cy="{py:.1}" r="5" fill="{colour}"><title>SYN attempt {} at +{t:.1} ms</title></circle><text x="{lx:.1}" y="{:.1}" font-size="12" font-weight="bold" fill="{C_CITE}" text-anchor="{anchor}">{}</text>"##,
            k + 1,
            py - 9.0,
            esc(&label)
        );
    }
    if let Some(e) = end {
        let px = xs(e);
        let what = if refused { "RST" } else { "SYN-ACK" };
        let _ = write!(
            o,
            r##"<line x1="{px:.1}" y1="{:.1}" x2="{px:.1}" y2="{base}" stroke="{C_ACK}" stroke-width="2"><title>{what} at +{e:.1} ms</title></line><text x="{:.1}" y="{:.1}" font-size="12" fill="{C_ACK}" text-anchor="end">{what} +{e:.0} ms</text>"##,
            top - 10.0,
            px - 4.0,
            top - 6.0
        );
    }
    o.push_str("</svg>");
    let _ = write!(
        o,
        r##"<p class="legend"><span data-series="observed"><i style="background:{C_DATA}"></i>SYN sent (first, then <b style="color:{C_RETX}">retries</b>)</span><span data-series="expected"><i style="background:{C_EXPECTED}"></i>{}</span>{}</p>"##,
        esc(name),
        if end.is_some() {
            format!(
                r##"<span data-series="end"><i style="background:{C_ACK}"></i>{}</span>"##,
                if refused { "RST" } else { "SYN-ACK" }
            )
        } else {
            String::new()
        }
    );
    Some(o)
}

/// Geometry of a SYN ladder: px, and the time span drawn (ms).
struct Geo {
    w: f64,
    row: f64,
    left: f64,
    right: f64,
    top: f64,
    span: f64,
    /// Rows (SYN attempts).
    n: usize,
}

impl Geo {
    fn xs(&self, ms: f64) -> f64 {
        self.left + ms / self.span * (self.w - self.left - self.right)
    }
    fn ys(&self, k: usize) -> f64 {
        self.top + self.row * (k as f64 + 0.5)
    }
    /// y of the time axis.
    fn base(&self) -> f64 {
        self.top + self.row * self.n as f64 + 8.0
    }
}

/// Time axis with ticks, and one labelled row per attempt.
fn ladder_axes(o: &mut String, g: &Geo) {
    let (left, right, top, w) = (g.left, g.right, g.top, g.w);
    let base = g.base();
    let (div, unit) = if g.span >= 20_000.0 {
        (1000.0, "s")
    } else {
        (1.0, "ms")
    };
    let _ = write!(
        o,
        r##"<g font-size="12" fill="#333"><line x1="{left}" y1="{base}" x2="{:.1}" y2="{base}" stroke="#555"/>"##,
        w - right
    );
    for v in nice_ticks(0.0, g.span / div, 8) {
        let px = g.xs(v * div);
        let _ = write!(
            o,
            r##"<line x1="{px:.1}" y1="{top}" x2="{px:.1}" y2="{base}" stroke="#eee"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{v}</text>"##,
            base + 15.0
        );
    }
    let _ = write!(
        o,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">time since the first SYN ({unit})</text>"##,
        (left + w - right) / 2.0,
        base + 34.0
    );
    for k in 0..g.n {
        let label = if k == 0 {
            "SYN 1".to_string()
        } else {
            format!("retry {}", k + 1)
        };
        let _ = write!(
            o,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end">{label}</text>"##,
            left - 14.0,
            g.ys(k) + 4.0
        );
    }
    o.push_str("</g>");
}
