//! Inline SVG charts: finding timeline, time–sequence (Stevens) graph and
//! connection-setup delay histogram. All text goes through [`esc`]; all
//! drawing is bounded in size whatever the capture (segments are merged per
//! pixel column).

use crate::series::{FlowSeries, MarkerKind};
use pcapsleuth_core::{Direction, Finding, FrameNo, Severity};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Escape text for HTML/SVG element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Colour of a data segment.
pub const C_DATA: &str = "#1f5fbf";
/// Colour of a retransmitted segment.
pub const C_RETX: &str = "#d62728";
/// Colour of the cumulative ACK line.
pub const C_ACK: &str = "#2ca02c";
/// Colour of the receive-window right edge.
pub const C_WIN: &str = "#c98a00";
/// Colour of ICMP error markers.
pub const C_ICMP: &str = "#8e44ad";
/// Colour of cited-frame labels.
pub const C_CITE: &str = "#e8590c";

/// Which series a [`stevens`] graph actually drew, so the legend lists
/// only those.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drawn {
    /// Data segments of the plotted direction.
    pub data: bool,
    /// Retransmitted segments.
    pub retx: bool,
    /// SYN/FIN/RST marks.
    pub flags: bool,
    /// The peer's cumulative ACK line.
    pub ack: bool,
    /// The receive-window right edge.
    pub win: bool,
    /// ICMP error markers.
    pub icmp: bool,
    /// Stall bands.
    pub stall: bool,
    /// The finding's time span band.
    pub span: bool,
    /// Cited-frame labels.
    pub cite: bool,
}

impl Drawn {
    /// Either graph drew it.
    pub fn merge(self, o: Drawn) -> Drawn {
        Drawn {
            data: self.data || o.data,
            retx: self.retx || o.retx,
            flags: self.flags || o.flags,
            ack: self.ack || o.ack,
            win: self.win || o.win,
            icmp: self.icmp || o.icmp,
            stall: self.stall || o.stall,
            span: self.span || o.span,
            cite: self.cite || o.cite,
        }
    }

    /// The legend (`<p class="legend">`) of the drawn series only; empty
    /// when nothing was drawn.
    pub fn legend(&self) -> String {
        let mut items: Vec<String> = Vec::new();
        let mut bar = |on: bool, colour: &str, text: &str| {
            if on {
                items.push(format!(
                    r#"<span data-series="{}"><i style="background:{colour}"></i>{}</span>"#,
                    esc(text.split(' ').next().unwrap_or(text)),
                    esc(text)
                ));
            }
        };
        bar(self.data, C_DATA, "data segment (seq…seq+len)");
        bar(self.retx, C_RETX, "retransmission");
        bar(self.ack, C_ACK, "peer's cumulative ACK");
        bar(self.win, C_WIN, "receive-window right edge (ACK + window)");
        bar(self.icmp, C_ICMP, "ICMP error");
        bar(self.stall, "#ced4da", "stall");
        bar(self.span, "#fff3bf", "finding span");
        if self.flags {
            items.push(format!(
                r#"<span data-series="flags"><b style="color:{C_DATA}">□</b> SYN / FIN / RST</span>"#
            ));
        }
        if self.cite {
            items.push(format!(
                r#"<span data-series="cite" style="color:{C_CITE}"><b>#N</b> cited frame</span>"#
            ));
        }
        if items.is_empty() {
            return String::new();
        }
        format!("<p class=\"legend\">{}</p>", items.concat())
    }
}

/// Severity colour.
pub fn severity_colour(s: Severity) -> &'static str {
    match s {
        Severity::Error => "#c92a2a",
        Severity::Warning => "#e67700",
        Severity::Info => "#1971c2",
    }
}

/// "Nice" tick values covering `lo..=hi`, about `target` of them (1-2-5 steps).
pub fn nice_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo || target == 0 {
        return vec![lo];
    }
    let step = nice_step((hi - lo) / target as f64);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + step * 1e-9 && out.len() < 50 {
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

/// Smallest 1-2-5 × 10^k at least `raw` (and > 0).
pub fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * mag >= raw {
            return m * mag;
        }
    }
    10.0 * mag
}

/// Tick label: integers without decimals, others with up to 3.
fn fmt_num(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        let i = v.round() as i64;
        // Thousands separators for byte counts.
        let s = i.unsigned_abs().to_string();
        let mut o = String::new();
        for (k, ch) in s.chars().enumerate() {
            if k > 0 && matches!((s.len() - k) % 3, 0) {
                o.push('\u{202f}');
            }
            o.push(ch);
        }
        if i < 0 {
            format!("-{o}")
        } else {
            o
        }
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// A linear mapping from data to pixels.
#[derive(Clone, Copy)]
struct Scale {
    d0: f64,
    d1: f64,
    p0: f64,
    p1: f64,
}

impl Scale {
    fn new(d0: f64, d1: f64, p0: f64, p1: f64) -> Scale {
        let d1 = if d1 > d0 { d1 } else { d0 + 1.0 };
        Scale { d0, d1, p0, p1 }
    }
    fn at(&self, v: f64) -> f64 {
        self.p0 + (v - self.d0) / (self.d1 - self.d0) * (self.p1 - self.p0)
    }
}

/// Time unit for an axis spanning `span_ms`: (divisor from ms, unit name).
fn time_unit(span_ms: f64) -> (f64, &'static str) {
    if span_ms >= 20_000.0 {
        (1000.0, "s")
    } else {
        (1.0, "ms")
    }
}

/// Draw axes with ticks and labels into `o`.
#[allow(clippy::too_many_arguments)]
fn axes(
    o: &mut String,
    x: Scale,
    y: Scale,
    xdiv: f64,
    xlabel: &str,
    ylabel: &str,
    ylabel_x: f64,
    y_integer: bool,
) {
    let (l, r) = (x.p0, x.p1);
    let (b, t) = (y.p0, y.p1);
    let _ = write!(o, r##"<g class="axis" font-size="11" fill="#333">"##);
    let _ = write!(
        o,
        r##"<line x1="{l}" y1="{b}" x2="{r}" y2="{b}" stroke="#555"/>"##
    );
    let _ = write!(
        o,
        r##"<line x1="{l}" y1="{b}" x2="{l}" y2="{t}" stroke="#555"/>"##
    );
    for v in nice_ticks(x.d0 / xdiv, x.d1 / xdiv, 8) {
        let px = x.at(v * xdiv);
        let _ = write!(
            o,
            r##"<line x1="{px:.1}" y1="{b}" x2="{px:.1}" y2="{t}" stroke="#eee"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            b + 14.0,
            esc(&fmt_num(v))
        );
    }
    for v in nice_ticks(y.d0, y.d1, 6) {
        if y_integer && v.fract() != 0.0 {
            continue;
        }
        let py = y.at(v);
        let _ = write!(
            o,
            r##"<line x1="{l}" y1="{py:.1}" x2="{r}" y2="{py:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            l - 4.0,
            py + 4.0,
            esc(&fmt_num(v))
        );
    }
    let _ = write!(
        o,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12">{}</text>"##,
        (l + r) / 2.0,
        b + 32.0,
        esc(xlabel)
    );
    let _ = write!(
        o,
        r##"<text transform="translate({ylabel_x:.1},{:.1}) rotate(-90)" text-anchor="middle" font-size="12">{}</text>"##,
        (b + t) / 2.0,
        esc(ylabel)
    );
    o.push_str("</g>");
}

/// Timeline of a capture's findings: x = time since the first frame, one row
/// per detector, one marker per finding spanning `start_ts_ns..end_ts_ns`,
/// each linking to `#{anchor_prefix}{index}`. Overlapping findings of one
/// detector are stacked in lanes (at most [`MAX_LANES`]) so each stays
/// visible and clickable; each marker is numbered like its finding card.
pub fn timeline(
    findings: &[Finding],
    first_ts_ns: i64,
    last_ts_ns: i64,
    anchor_prefix: &str,
) -> String {
    let mut detectors: Vec<&str> = findings.iter().map(|f| f.detector.as_str()).collect();
    detectors.sort_unstable();
    detectors.dedup();
    let (w, left, right, top, lane_h) = (800.0, 150.0, 16.0, 10.0, 18.0);
    let t0 = findings
        .iter()
        .map(|f| f.start_ts_ns)
        .chain([first_ts_ns])
        .min()
        .unwrap_or(0);
    let t1 = findings
        .iter()
        .map(|f| f.end_ts_ns)
        .chain([last_ts_ns])
        .max()
        .unwrap_or(0);
    let span_ms = (t1.saturating_sub(t0)) as f64 / 1e6;
    let (div, unit) = time_unit(span_ms);
    let x = Scale::new(0.0, span_ms.max(1.0), left, w - right);
    // Lane assignment per detector, greedy by start time.
    let mut placed: Vec<(usize, usize, usize, f64, f64)> = Vec::new(); // finding, row, lane, xs, xe
    let mut lanes_per_row = vec![1usize; detectors.len()];
    for (ri, d) in detectors.iter().enumerate() {
        let mut idx: Vec<usize> = (0..findings.len())
            .filter(|&i| findings.get(i).is_some_and(|f| f.detector == *d))
            .collect();
        idx.sort_by_key(|&i| findings.get(i).map_or(0, |f| f.start_ts_ns));
        let mut lane_end: Vec<f64> = Vec::new();
        for i in idx {
            let Some(f) = findings.get(i) else { continue };
            let xs = x.at(f.start_ts_ns.saturating_sub(t0) as f64 / 1e6);
            let xe = x
                .at(f.end_ts_ns.saturating_sub(t0) as f64 / 1e6)
                .max(xs + 4.0);
            // The number label (11 px, about 6.5 px per digit) goes right
            // of the marker, or left of it when it would leave the chart;
            // the lane is taken from the label's start to the marker's end
            // or the label's end, so labels and markers never overlap.
            let lw = label_width(i + 1);
            let left_label = xe + 4.0 + lw > w - 2.0;
            let (occ0, occ1) = if left_label {
                (xs - 4.0 - lw, xe)
            } else {
                (xs, xe + 4.0 + lw)
            };
            let lane = match lane_end.iter().position(|&e| e + 4.0 <= occ0) {
                Some(l) => l,
                None if lane_end.len() < MAX_LANES => {
                    lane_end.push(f64::NEG_INFINITY);
                    lane_end.len() - 1
                }
                None => MAX_LANES - 1,
            };
            if let Some(e) = lane_end.get_mut(lane) {
                *e = e.max(occ1);
            }
            placed.push((i, ri, lane, xs, xe));
        }
        if let Some(n) = lanes_per_row.get_mut(ri) {
            *n = lane_end.len().max(1);
        }
    }
    let mut row_top = Vec::with_capacity(detectors.len());
    let mut yy = top;
    for n in &lanes_per_row {
        row_top.push(yy);
        yy += lane_h * *n as f64 + 10.0;
    }
    let bottom = yy;
    let h = bottom + 46.0;
    let mut o = String::new();
    let _ = write!(
        o,
        r##"<svg class="timeline" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" role="img" aria-label="finding timeline">"##
    );
    let _ = write!(
        o,
        r##"<g font-size="11" fill="#333"><line x1="{left}" y1="{bottom}" x2="{:.1}" y2="{bottom}" stroke="#555"/>"##,
        w - right
    );
    for v in nice_ticks(0.0, span_ms.max(1.0) / div, 10) {
        let px = x.at(v * div);
        let _ = write!(
            o,
            r##"<line x1="{px:.1}" y1="{top}" x2="{px:.1}" y2="{bottom}" stroke="#eee"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            bottom + 14.0,
            esc(&fmt_num(v))
        );
    }
    let _ = write!(
        o,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12">time since first frame ({unit})</text></g>"##,
        (left + w - right) / 2.0,
        bottom + 34.0
    );
    for (ri, d) in detectors.iter().enumerate() {
        let rt = row_top.get(ri).copied().unwrap_or(top);
        let rh = lane_h * lanes_per_row.get(ri).copied().unwrap_or(1) as f64 + 10.0;
        let _ = write!(
            o,
            r##"<rect x="{left}" y="{rt:.1}" width="{:.1}" height="{rh:.1}" fill="{}"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="12" fill="#222">{}</text>"##,
            w - right - left,
            if ri % 2 == 0 { "#f8f9fa" } else { "#ffffff" },
            left - 8.0,
            rt + rh / 2.0 + 4.0,
            esc(d)
        );
    }
    for (i, ri, lane, xs, xe) in placed {
        let Some(f) = findings.get(i) else { continue };
        let y0 = row_top.get(ri).copied().unwrap_or(top) + 5.0 + lane_h * lane as f64;
        let title = format!(
            "#{} {}: {} (frames {})",
            i + 1,
            f.detector,
            f.summary,
            frames_text(&f.frames, 12)
        );
        let _ = write!(
            o,
            r##"<a href="#{}{}"><title>{}</title><rect x="{:.1}" y="{y0:.1}" width="{:.1}" height="{:.1}" rx="2" fill="{}" fill-opacity="0.85" stroke="#222" stroke-width="0.5"/><text x="{:.1}" y="{:.1}" font-size="11" fill="#222">{}</text></a>"##,
            esc(anchor_prefix),
            i,
            esc(&title),
            xs - 2.0,
            xe - xs + 4.0,
            lane_h - 4.0,
            severity_colour(f.severity),
            if xe + 4.0 + label_width(i + 1) > w - 2.0 {
                xs - 4.0 - label_width(i + 1)
            } else {
                xe + 4.0
            },
            y0 + lane_h - 6.0,
            i + 1
        );
    }
    o.push_str("</svg>");
    o
}

/// Width in px of a timeline marker's number label (11 px digits).
fn label_width(n: usize) -> f64 {
    n.to_string().len() as f64 * 6.5
}

/// Most lanes stacked in one timeline row; further overlapping findings
/// share the last lane.
pub const MAX_LANES: usize = 12;

/// Up to `max` frame numbers, comma-separated, with an ellipsis beyond.
pub fn frames_text(frames: &[u64], max: usize) -> String {
    let mut s: Vec<String> = frames.iter().take(max).map(u64::to_string).collect();
    if frames.len() > max {
        s.push(format!("… ({} in all)", frames.len()));
    }
    s.join(", ")
}

/// The direction whose data the graph plots: the sender named by the
/// evidence (`"sender": "client …"`/`"server …"`), else the direction of
/// most cited data segments, else the direction with most payload bytes.
pub fn sending_direction(f: &Finding, s: &FlowSeries) -> Direction {
    if let Some(sender) = f.evidence.get("sender").and_then(|v| v.as_str()) {
        if sender.starts_with("client") {
            return Direction::ClientToServer;
        }
        if sender.starts_with("server") {
            return Direction::ServerToClient;
        }
    }
    let mut cited = [0u64; 2];
    let mut bytes = [0u64; 2];
    for p in &s.points {
        let i = p.dir.index();
        if p.len > 0 {
            if let Some(b) = bytes.get_mut(i) {
                *b += u64::from(p.len);
            }
            if f.frames.binary_search(&p.frame.get()).is_ok() {
                if let Some(c) = cited.get_mut(i) {
                    *c += 1;
                }
            }
        }
    }
    let pick = if cited != [0, 0] { cited } else { bytes };
    if pick[1] > pick[0] {
        Direction::ServerToClient
    } else {
        Direction::ClientToServer
    }
}

/// Time–sequence (Stevens) graph of `s` for finding `f`, with `uid` making
/// element ids unique within the page.
///
/// x = time since the flow's first segment (ms, or s beyond 20 s); y =
/// relative sequence number of the sending direction (bytes). Data segments
/// are vertical bars `seq..seq+len`, retransmissions in red; the peer's
/// cumulative ACK is a green step line and the receive-window right edge
/// (ACK + scaled window) a dashed amber one, as in tcptrace / Wireshark's
/// "Stevens" and "tcptrace" graphs. ICMP errors are purple vertical lines,
/// stalls grey bands, the finding's time span a pale yellow band, and each
/// cited frame is labelled `#N`. With `window` (ns since the epoch, start and
/// end) only that time range is drawn (a zoom on the finding).
pub fn stevens(f: &Finding, s: &FlowSeries, uid: &str, window: Option<(i64, i64)>) -> String {
    stevens_drawn(f, s, uid, window).0
}

/// [`stevens`], also saying which series were drawn (for the legend).
pub fn stevens_drawn(
    f: &Finding,
    s: &FlowSeries,
    uid: &str,
    window: Option<(i64, i64)>,
) -> (String, Drawn) {
    let g = Plot::new(f, s, window);
    let mut o = String::new();
    let mut d = Drawn::default();
    stevens_frame(&mut o, &g, s, uid);
    let _ = write!(o, r##"<g clip-path="url(#clip-{uid})">"##);
    stevens_span(&mut o, &g, f, &mut d);
    // Text labels placed so far (x0, x1, baseline y), kept clear by the
    // cited-frame labels.
    let mut labels: Vec<(f64, f64, f64)> = Vec::new();
    stevens_stalls(&mut o, &g, s, &mut d, &mut labels);
    stevens_icmp(&mut o, &g, s, &mut d, &mut labels);
    let note = stevens_ack_window(&mut o, &g, s, &mut d);
    stevens_segments(&mut o, &g, s, &mut d);
    o.push_str("</g>");
    // Outside the clipped group, above the plot's top right corner.
    o.push_str(&note);
    stevens_citations(&mut o, &g, f, s, &mut d, labels);
    if s.capped {
        let _ = write!(
            o,
            r##"<text x="{:.1}" y="16" font-size="11" fill="#c92a2a" text-anchor="end">series capped: later segments not drawn</text>"##,
            g.w - g.right
        );
    }
    o.push_str("</svg>");
    (o, d)
}

/// Geometry shared by the parts of a [`stevens`] graph.
#[derive(Clone, Copy)]
struct Plot {
    /// Direction whose data is plotted.
    dir: Direction,
    /// The other direction (ACKs, window).
    peer: Direction,
    /// Width and height, px.
    w: f64,
    h: f64,
    /// Margins, px.
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    /// Time (ms since `t0`) to x.
    x: Scale,
    /// Relative sequence number (bytes) to y.
    y: Scale,
    /// Earliest time of the series, ns since the epoch.
    t0: i64,
    /// Time unit divisor (from ms) and name for the x axis.
    div: f64,
    unit: &'static str,
    /// The zoom window, ns since the epoch.
    window: Option<(i64, i64)>,
}

impl Plot {
    /// Scales for `s`: x spans the series (or `window`), y the plotted
    /// sequence numbers and ACKs.
    fn new(f: &Finding, s: &FlowSeries, window: Option<(i64, i64)>) -> Plot {
        let dir = sending_direction(f, s);
        let peer = dir.reverse();
        let (w, h) = (800.0f64, 400.0f64);
        let (left, right, top, bottom) = (74.0, 16.0, 30.0, 50.0);
        let (t0, t1) = time_range(f, s);
        let ms = |ts: i64| ts.saturating_sub(t0) as f64 / 1e6;
        let span_ms = ms(t1).max(1.0);
        let (div, unit) =
            time_unit(window.map_or(span_ms, |(a, b)| b.saturating_sub(a) as f64 / 1e6));
        let (y_min, y_top) = seq_range(s, dir, window);
        let x = match window {
            Some((a, b)) => Scale::new(ms(a), ms(b).max(ms(a) + 0.001), left, w - right),
            None => Scale::new(0.0, span_ms * 1.01, left, w - right),
        };
        let y = Scale::new(y_min as f64, y_top, h - bottom, top);
        Plot {
            dir,
            peer,
            w,
            h,
            left,
            right,
            top,
            bottom,
            x,
            y,
            t0,
            div,
            unit,
            window,
        }
    }
}

/// First and last time of the series (stall ends included), ns; the
/// finding's span when the series is empty.
fn time_range(f: &Finding, s: &FlowSeries) -> (i64, i64) {
    let t0 = s
        .points
        .iter()
        .map(|p| p.ts_ns)
        .chain(s.markers.iter().map(|m| m.ts_ns))
        .min()
        .unwrap_or(f.start_ts_ns);
    let mut t1 = s
        .points
        .iter()
        .map(|p| p.ts_ns)
        .chain(s.markers.iter().map(|m| m.ts_ns))
        .max()
        .unwrap_or(f.end_ts_ns);
    for m in &s.markers {
        if let MarkerKind::Stall { end_ts_ns, .. } = m.kind {
            t1 = t1.max(end_ts_ns);
        }
    }
    (t0, t1)
}

/// The y range (bytes): lowest value and top of the plot. Data and ACKs
/// count; the window edge may run off the top (clipped).
fn seq_range(s: &FlowSeries, dir: Direction, window: Option<(i64, i64)>) -> (i64, f64) {
    let in_window = |ts: i64| window.is_none_or(|(a, b)| ts >= a && ts <= b);
    let any_in = s.points.iter().any(|p| in_window(p.ts_ns));
    let mut y_max: i64 = 1;
    let mut y_min: i64 = i64::MAX;
    for p in s.points.iter().filter(|p| !any_in || in_window(p.ts_ns)) {
        if p.dir == dir {
            y_max = y_max.max(p.rel_seq.saturating_add(i64::from(p.len)));
            y_min = y_min.min(p.rel_seq);
        } else if let Some(a) = p.rel_ack {
            y_max = y_max.max(a);
            y_min = y_min.min(a);
        }
    }
    if y_min == i64::MAX || (window.is_none() && y_min > 0) {
        y_min = 0;
    }
    if window.is_some() {
        // Leave room below the lowest plotted value.
        y_min = y_min.saturating_sub((y_max - y_min) / 20 + 1).max(0);
    }
    let y_top = y_max as f64 + (y_max - y_min) as f64 * 0.08 + 1.0;
    (y_min, y_top)
}

/// The `<svg>` element, clip path, title line and axes.
fn stevens_frame(o: &mut String, g: &Plot, s: &FlowSeries, uid: &str) {
    let Plot {
        dir,
        w,
        h,
        left,
        right,
        top,
        bottom,
        x,
        y,
        window,
        ..
    } = *g;
    let (div, unit) = (g.div, g.unit);
    let clip = format!("clip-{uid}");
    let _ = write!(
        o,
        r##"<svg class="stevens" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" role="img" aria-label="time-sequence graph of tcp.stream {}">"##,
        s.stream
    );
    let _ = write!(
        o,
        r##"<defs><clipPath id="{clip}"><rect x="{left}" y="{top}" width="{:.1}" height="{:.1}"/></clipPath></defs>"##,
        w - right - left,
        h - bottom - top
    );
    let sender = match dir {
        Direction::ClientToServer => format!("{} → {}", s.client, s.server),
        Direction::ServerToClient => format!("{} → {}", s.server, s.client),
    };
    let _ = write!(
        o,
        r##"<text x="{left}" y="14" font-size="12" fill="#222">{}tcp.stream {} · data {} · ACK/window from the peer</text>"##,
        if window.is_some() {
            "zoom on the finding · "
        } else {
            ""
        },
        s.stream,
        esc(&sender)
    );
    axes(
        o,
        x,
        y,
        div,
        &format!("time since first segment of the flow ({unit})"),
        "relative sequence number (bytes)",
        18.0,
        false,
    );
}

/// The finding's time span, a pale band.
fn stevens_span(o: &mut String, g: &Plot, f: &Finding, d: &mut Drawn) {
    let Plot {
        h,
        top,
        bottom,
        x,
        t0,
        ..
    } = *g;
    let ms = |ts: i64| ts.saturating_sub(t0) as f64 / 1e6;
    // Finding span.
    let fx0 = x.at(ms(f.start_ts_ns));
    let fx1 = x.at(ms(f.end_ts_ns)).max(fx0 + 2.0);
    // Outside the plot (a zoom elsewhere): not drawn.
    let (lo, hi) = (x.p0.min(x.p1), x.p0.max(x.p1));
    if fx1 < lo || fx0 > hi {
        return;
    }
    d.span = true;
    let _ = write!(
        o,
        r##"<rect x="{fx0:.1}" y="{top}" width="{:.1}" height="{:.1}" fill="#fff3bf" fill-opacity="0.7"><title>finding span</title></rect>"##,
        fx1 - fx0,
        h - bottom - top
    );
}

/// Stalls as grey bands.
fn stevens_stalls(
    o: &mut String,
    g: &Plot,
    s: &FlowSeries,
    d: &mut Drawn,
    labels: &mut Vec<(f64, f64, f64)>,
) {
    let Plot {
        h,
        top,
        bottom,
        x,
        t0,
        ..
    } = *g;
    let ms = |ts: i64| ts.saturating_sub(t0) as f64 / 1e6;
    // Stalls: consecutive stalls separated by less than 3 px (e.g. a flow
    // that only trickles small segments) are drawn as one band.
    let mut bands: Vec<(f64, f64, FrameNo, FrameNo, f64, usize)> = Vec::new(); // x0, x1, first frame, last frame, total ms, count
    for m in &s.markers {
        if let MarkerKind::Stall {
            end_ts_ns,
            end_frame,
            ..
        } = m.kind
        {
            let mx = x.at(ms(m.ts_ns));
            let ex = x.at(ms(end_ts_ns)).max(mx + 1.0);
            let dur = end_ts_ns.saturating_sub(m.ts_ns) as f64 / 1e6;
            match bands.last_mut() {
                Some(b) if mx <= b.1 + 3.0 => {
                    b.1 = b.1.max(ex);
                    b.3 = end_frame;
                    b.4 += dur;
                    b.5 += 1;
                }
                _ => bands.push((mx, ex, m.frame, end_frame, dur, 1)),
            }
        }
    }
    let (lo, hi) = (x.p0.min(x.p1), x.p0.max(x.p1));
    for (x0, x1, f0, f1, total, n) in &bands {
        if *x1 < lo || *x0 > hi {
            continue;
        }
        d.stall = true;
        let t = if *n == 1 {
            format!("stall {total:.0} ms, frames {f0}–{f1}")
        } else {
            format!("{n} consecutive stalls, {total:.0} ms in all, frames {f0}–{f1}")
        };
        let _ = write!(
            o,
            r##"<rect x="{x0:.1}" y="{top}" width="{:.1}" height="{:.1}" fill="#868e96" fill-opacity="0.18"><title>{}</title></rect>"##,
            x1 - x0,
            h - bottom - top,
            esc(&t)
        );
        // Label only bands wide enough for their text (about 5.5 px per character at 10 px).
        if x1 - x0 >= 50.0 {
            let label = if *n == 1 {
                format!("stall {total:.0} ms")
            } else {
                format!("{n} stalls, {total:.0} ms")
            };
            if x1 - x0 < label.chars().count() as f64 * 6.0 + 8.0 {
                continue;
            }
            labels.push((
                x0 + 3.0,
                x0 + 3.0 + label.chars().count() as f64 * 6.0,
                top + 10.0,
            ));
            let _ = write!(
                o,
                r##"<text x="{:.1}" y="{:.1}" font-size="11" fill="#495057">{}</text>"##,
                x0 + 3.0,
                top + 10.0,
                esc(&label)
            );
        }
    }
}

/// ICMP errors as dashed vertical lines.
fn stevens_icmp(
    o: &mut String,
    g: &Plot,
    s: &FlowSeries,
    d: &mut Drawn,
    labels: &mut Vec<(f64, f64, f64)>,
) {
    let Plot {
        h,
        top,
        bottom,
        x,
        t0,
        ..
    } = *g;
    let ms = |ts: i64| ts.saturating_sub(t0) as f64 / 1e6;
    // ICMP markers (labels thinned so they do not overlap).
    let mut last_label = f64::NEG_INFINITY;
    for m in &s.markers {
        let mx = x.at(ms(m.ts_ns));
        match m.kind {
            MarkerKind::Stall { .. } => {}
            MarkerKind::Icmp {
                mtu,
                quoted_ip_len,
                too_big,
            } => {
                if mx < x.p0.min(x.p1) || mx > x.p0.max(x.p1) {
                    continue;
                }
                d.icmp = true;
                let what = if too_big {
                    "ICMP too big"
                } else {
                    "ICMP error"
                };
                let mtu_t = mtu.map(|m| format!(" mtu {m}")).unwrap_or_default();
                let t = format!(
                    "{what}{mtu_t} (frame {}), quoting a {quoted_ip_len}-byte packet",
                    m.frame
                );
                let _ = write!(
                    o,
                    r##"<line x1="{mx:.1}" y1="{top}" x2="{mx:.1}" y2="{:.1}" stroke="{C_ICMP}" stroke-width="1.5" stroke-dasharray="5 3"><title>{}</title></line>"##,
                    h - bottom,
                    esc(&t)
                );
                if mx - last_label >= 150.0 {
                    last_label = mx;
                    let n = format!("{what}{mtu_t} #{}", m.frame).chars().count();
                    labels.push((mx + 3.0, mx + 3.0 + n as f64 * 6.0, top + 22.0));
                    let _ = write!(
                        o,
                        r##"<text x="{:.1}" y="{:.1}" font-size="11" fill="{C_ICMP}" stroke="#fff" stroke-width="3" paint-order="stroke">{} #{}</text>"##,
                        mx + 3.0,
                        top + 22.0,
                        esc(&format!("{what}{mtu_t}")),
                        m.frame
                    );
                }
            }
        }
    }
}

/// The peer's cumulative ACK and receive-window edge.
/// Returns the note (SVG text) to draw above the plot when the window edge
/// runs above it, empty otherwise.
fn stevens_ack_window(o: &mut String, g: &Plot, s: &FlowSeries, d: &mut Drawn) -> String {
    let Plot {
        peer,
        w,
        h,
        right,
        top,
        bottom,
        left,
        x,
        y,
        t0,
        window,
        ..
    } = *g;
    let in_window = |ts: i64| window.is_none_or(|(a, b)| ts >= a && ts <= b);
    let ms = |ts: i64| ts.saturating_sub(t0) as f64 / 1e6;
    // ACK line and window edge: step lines from the peer's segments, one
    // vertex per pixel column (the last value in that column).
    let mut ack_cols: BTreeMap<i64, (f64, f64, Option<f64>)> = BTreeMap::new();
    // Lines stay inside the plot: x clamped to the plot (a zoom keeps the
    // last value before it), y clamped to the plot's height.
    for p in s.points.iter().filter(|p| p.dir == peer) {
        let Some(a) = p.rel_ack else { continue };
        let px = x.at(ms(p.ts_ns)).clamp(left, w - right);
        if !in_window(p.ts_ns) && window.is_some_and(|(_, b)| p.ts_ns > b) {
            continue;
        }
        let edge = p
            .window_bytes
            .and_then(|wb| i64::try_from(wb).ok())
            .map(|wb| y.at(a.saturating_add(wb) as f64));
        let clamp_y = |v: f64| v.clamp(top, h - bottom);
        ack_cols.insert(
            px.round() as i64,
            (px, clamp_y(y.at(a as f64)), edge.map(clamp_y)),
        );
    }
    let step_path = |pts: &mut dyn Iterator<Item = (f64, f64)>| -> String {
        let mut d = String::new();
        for (i, (px, py)) in pts.enumerate() {
            if i == 0 {
                let _ = write!(d, "M{px:.1} {py:.1}");
            } else {
                let _ = write!(d, "H{px:.1}V{py:.1}");
            }
        }
        d
    };
    let win_above = s.points.iter().filter(|p| p.dir == peer).any(|p| {
        let (Some(a), Some(wb)) = (p.rel_ack, p.window_bytes) else {
            return false;
        };
        in_window(p.ts_ns)
            && y.at(a.saturating_add(i64::try_from(wb).unwrap_or(i64::MAX)) as f64) < top
    });
    let mut note = String::new();
    if win_above {
        let max_edge = s
            .points
            .iter()
            .filter(|p| p.dir == peer)
            .filter_map(|p| {
                Some(
                    p.rel_ack?
                        .saturating_add(i64::try_from(p.window_bytes?).ok()?),
                )
            })
            .max()
            .unwrap_or(0);
        let _ = write!(
            note,
            r##"<text class="win-note" x="{:.1}" y="{:.1}" font-size="11" fill="{C_WIN}" text-anchor="end">receive-window edge partly above the plot (up to {} bytes)</text>"##,
            w - right - 4.0,
            top - 4.0,
            esc(&fmt_num(max_edge as f64))
        );
    }
    let win_d = step_path(
        &mut ack_cols
            .values()
            .filter_map(|(px, _, e)| e.map(|e| (*px, e))),
    );
    if !win_d.is_empty() {
        d.win = true;
        let _ = write!(
            o,
            r##"<path d="{win_d}H{:.1}" fill="none" stroke="{C_WIN}" stroke-width="1.5" stroke-dasharray="6 3"/>"##,
            w - right
        );
    }
    let ack_d = step_path(&mut ack_cols.values().map(|(px, py, _)| (*px, *py)));
    if !ack_d.is_empty() {
        d.ack = true;
        let _ = write!(
            o,
            r##"<path d="{ack_d}H{:.1}" fill="none" stroke="{C_ACK}" stroke-width="1.5"/>"##,
            w - right
        );
    }
    note
}

/// Data segments (and SYN/FIN/RST marks) of the plotted direction.
fn stevens_segments(o: &mut String, g: &Plot, s: &FlowSeries, d: &mut Drawn) {
    let Plot {
        dir,
        x,
        y,
        t0,
        window,
        ..
    } = *g;
    let in_window = |ts: i64| window.is_none_or(|(a, b)| ts >= a && ts <= b);
    let ms = |ts: i64| ts.saturating_sub(t0) as f64 / 1e6;
    // Data segments merged per (pixel column, retransmitted).
    let mut cols: BTreeMap<(i64, bool), (f64, f64, f64)> = BTreeMap::new();
    let mut flags_drawn = 0usize;
    for p in s
        .points
        .iter()
        .filter(|p| p.dir == dir && in_window(p.ts_ns))
    {
        let px = x.at(ms(p.ts_ns));
        if p.len == 0 {
            if (p.syn || p.fin || p.rst) && flags_drawn < 400 {
                flags_drawn += 1;
                d.flags = true;
                let py = y.at(p.rel_seq as f64);
                let colour = if p.retransmission { C_RETX } else { C_DATA };
                let name = if p.syn {
                    "SYN"
                } else if p.rst {
                    "RST"
                } else {
                    "FIN"
                };
                let _ = write!(
                    o,
                    r##"<rect x="{:.1}" y="{:.1}" width="6" height="6" fill="none" stroke="{colour}" stroke-width="1.5"><title>{name} frame {}{}</title></rect>"##,
                    px - 3.0,
                    py - 3.0,
                    p.frame,
                    if p.retransmission {
                        " (retransmission)"
                    } else {
                        ""
                    }
                );
            }
            continue;
        }
        let lo = y.at(p.rel_seq as f64);
        let hi = y.at(p.rel_seq.saturating_add(i64::from(p.len)) as f64);
        let e = cols
            .entry((px.round() as i64, p.retransmission))
            .or_insert((px, lo, hi));
        e.1 = e.1.max(lo);
        e.2 = e.2.min(hi);
    }
    for ((_, retx), (px, lo, hi)) in &cols {
        if *retx {
            d.retx = true;
        } else {
            d.data = true;
        }
        let colour = if *retx { C_RETX } else { C_DATA };
        let width = if *retx { 2.5 } else { 1.6 };
        // At least 2 px tall so one small segment is visible.
        let hi = hi.min(lo - 2.0);
        let _ = write!(
            o,
            r##"<line x1="{px:.1}" y1="{lo:.1}" x2="{px:.1}" y2="{hi:.1}" stroke="{colour}" stroke-width="{width}"/>"##
        );
        if *retx {
            let _ = write!(
                o,
                r##"<circle cx="{px:.1}" cy="{hi:.1}" r="2.2" fill="{C_RETX}"/>"##
            );
        }
    }
}

/// Cited frames, labelled `#N` (at most 60): each label is placed right of
/// its point (left of it near the right edge), else on the other side, else
/// moved up or down in 12 px steps, so that it overlaps no other label and
/// no cited point's circle; a label with no free place is left out (the
/// circle and its tooltip remain). Labels have a white halo so they stay
/// readable over lines.
fn stevens_citations(
    o: &mut String,
    g: &Plot,
    f: &Finding,
    s: &FlowSeries,
    d: &mut Drawn,
    labels: Vec<(f64, f64, f64)>,
) {
    let Plot {
        dir,
        w,
        h,
        right,
        left,
        top,
        bottom,
        x,
        y,
        t0,
        window,
        ..
    } = *g;
    let ms = |ts: i64| ts.saturating_sub(t0) as f64 / 1e6;
    let in_window = |ts: i64| window.is_none_or(|(a, b)| ts >= a && ts <= b);
    let mut points: Vec<(f64, f64, &crate::series::SeriesPoint)> = Vec::new();
    for p in &s.points {
        if points.len() >= 60 {
            break;
        }
        if f.frames.binary_search(&p.frame.get()).is_err() || !in_window(p.ts_ns) {
            continue;
        }
        let py = if p.dir == dir {
            y.at(p.rel_seq.saturating_add(i64::from(p.len)) as f64)
        } else if let Some(a) = p.rel_ack {
            y.at(a as f64)
        } else {
            continue;
        };
        points.push((x.at(ms(p.ts_ns)), py.clamp(top, h - bottom), p));
    }
    let mut placed = labels; // x0, x1, baseline y
    let (y_min, y_max) = (top + 11.0, h - bottom - 3.0);
    for &(px, py, p) in &points {
        let label = format!("#{}", p.frame);
        // Approximate width of the bold 11 px label (6.8 px per character).
        let lw = label.chars().count() as f64 * 6.8 + 2.0;
        let free = |lx0: f64, ly: f64| {
            let lx1 = lx0 + lw;
            let (ty, by) = (ly - 10.0, ly + 2.0);
            lx0 >= left
                && lx1 <= w - right
                && !placed
                    .iter()
                    .any(|(a0, a1, ay)| lx0 < *a1 && *a0 < lx1 && (ay - ly).abs() < 12.0)
                && !points.iter().any(|(cx, cy, _)| {
                    *cx + 3.5 > lx0 && *cx - 3.5 < lx1 && *cy + 3.5 > ty && *cy - 3.5 < by
                })
        };
        let right_x = px + 5.0;
        let left_x = px - 5.0 - lw;
        let sides = if px > w - right - 45.0 {
            [left_x, right_x]
        } else {
            [right_x, left_x]
        };
        let start = (py - 5.0).clamp(y_min, y_max);
        let mut spot = None;
        'search: for k in 0..24 {
            // 0, -12, +12, -24, +24, …
            let dy = 12.0 * f64::from((k + 1) / 2) * if k % 2 == 1 { -1.0 } else { 1.0 };
            let ly = start + dy;
            if !(y_min..=y_max).contains(&ly) {
                continue;
            }
            for lx in sides {
                if free(lx, ly) {
                    spot = Some((lx, ly));
                    break 'search;
                }
            }
        }
        let what = if p.dir == dir {
            format!("{} bytes at seq {}", p.len, p.rel_seq)
        } else {
            format!("ACK {}", p.rel_ack.unwrap_or(0))
        };
        let circle = format!(
            r##"<title>frame {}: {}</title><circle cx="{px:.1}" cy="{py:.1}" r="3.5" fill="none" stroke="{C_CITE}" stroke-width="1.5"/>"##,
            p.frame,
            esc(&what)
        );
        let Some((lx, ly)) = spot else {
            let _ = write!(o, r##"<g class="cite">{circle}</g>"##);
            continue;
        };
        placed.push((lx, lx + lw, ly));
        d.cite = true;
        let _ = write!(
            o,
            r##"<g class="cite">{circle}<text x="{lx:.1}" y="{ly:.1}" font-size="11" font-weight="bold" fill="{C_CITE}" stroke="#fff" stroke-width="3" paint-order="stroke">#{}</text></g>"##,
            p.frame
        );
    }
}

/// Histogram of connection-setup delays (ms) with about 12 bins.
pub fn histogram(delays_ms: &[f64], title: &str) -> String {
    let (w, h) = (640.0f64, 240.0f64);
    let (left, right, top, bottom) = (56.0, 16.0, 24.0, 46.0);
    let max = delays_ms
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let bw = nice_step((max / 12.0).max(1.0));
    let nb = ((max / bw).floor() as usize + 1).clamp(1, 200);
    let mut counts = vec![0u64; nb];
    for v in delays_ms
        .iter()
        .copied()
        .filter(|v| v.is_finite() && *v >= 0.0)
    {
        let i = ((v / bw).floor() as usize).min(nb - 1);
        if let Some(c) = counts.get_mut(i) {
            *c += 1;
        }
    }
    let cmax = counts.iter().copied().max().unwrap_or(1).max(1);
    let x = Scale::new(0.0, bw * nb as f64, left, w - right);
    let y = Scale::new(0.0, cmax as f64 * 1.15, h - bottom, top);
    let mut o = String::new();
    let _ = write!(
        o,
        r##"<svg class="histogram" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" role="img" aria-label="connection-setup delay histogram">"##
    );
    let _ = write!(
        o,
        r##"<text x="{left}" y="15" font-size="12" fill="#222">{}</text>"##,
        esc(title)
    );
    axes(
        &mut o,
        x,
        y,
        1.0,
        "connection-setup delay (ms)",
        "connections",
        14.0,
        true,
    );
    for (i, c) in counts.iter().enumerate() {
        if *c == 0 {
            continue;
        }
        let x0 = x.at(i as f64 * bw);
        let x1 = x.at((i + 1) as f64 * bw);
        let yt = y.at(*c as f64);
        let _ = write!(
            o,
            r##"<rect x="{:.1}" y="{yt:.1}" width="{:.1}" height="{:.1}" fill="{C_DATA}"><title>{} connection{} delayed {}–{} ms</title></rect><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{c}</text>"##,
            x0 + 1.0,
            (x1 - x0 - 2.0).max(1.0),
            (h - bottom) - yt,
            c,
            if *c == 1 { "" } else { "s" },
            fmt_num(i as f64 * bw),
            fmt_num((i + 1) as f64 * bw),
            (x0 + x1) / 2.0,
            yt - 3.0
        );
    }
    o.push_str("</svg>");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(
            esc(r#"<a href="x">&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn ticks_are_nice() {
        assert_eq!(
            nice_ticks(0.0, 10.0, 5),
            vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        );
        assert_eq!(nice_step(0.3), 0.5);
        assert_eq!(nice_step(700.0), 1000.0);
        assert_eq!(fmt_num(1234567.0), "1\u{202f}234\u{202f}567");
        assert_eq!(fmt_num(0.25), "0.25");
    }

    #[test]
    fn histogram_bins_counts() {
        let svg = histogram(&[1009.0, 1011.0, 3030.0, 7302.0], "svc");
        // 4 values: bin width 1000 ms; bins 1000-2000 (2), 3000-4000 (1), 7000-8000 (1).
        let t = |n: &str, a: f64, b: f64| format!("{n} delayed {}–{} ms", fmt_num(a), fmt_num(b));
        assert!(svg.contains(&t("2 connections", 1000.0, 2000.0)), "{svg}");
        assert!(svg.contains(&t("1 connection", 3000.0, 4000.0)), "{svg}");
        assert!(svg.contains(&t("1 connection", 7000.0, 8000.0)), "{svg}");
        assert!(!svg.contains(">0.5<"), "integer count ticks only");
        assert!(svg.ends_with("</svg>"));
    }
}
