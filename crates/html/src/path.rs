//! The path picture of a `cross-interface-loss` finding: the interface the
//! packet entered on, the host (and its NAT, if any), the interface it should
//! have left on; the lost packet stops inside the host, the retransmission
//! that crossed goes through. Drawn from the evidence only (see the
//! detector's README `## Evidence`): `ingress_interface`,
//! `egress_interface`, `nat`, `inner_flow`, `outer_flow`, `lost_frames`,
//! `crossed_inner_frame`, `crossed_outer_frame`, `delay_ms`, `packet`.

use crate::svg::{esc, C_ACK, C_RETX};
use pcapsleuth_core::Finding;
use std::fmt::Write as _;

fn ev_str<'f>(f: &'f Finding, k: &str) -> Option<&'f str> {
    f.evidence.get(k).and_then(|v| v.as_str())
}
fn ev_u64(f: &Finding, k: &str) -> Option<u64> {
    f.evidence.get(k).and_then(|v| v.as_u64())
}
fn frames_of(f: &Finding, k: &str) -> String {
    f.evidence
        .get(k)
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_u64())
                .map(|n| format!("#{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// One labelled box.
fn node(o: &mut String, x: f64, y: f64, w: f64, h: f64, title: &str, sub: &str) {
    let _ = write!(
        o,
        r##"<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="6" fill="#f1f3f5" stroke="#495057"/><text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="13" font-weight="bold" fill="#212529">{}</text><text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12" fill="#495057">{}</text>"##,
        x + w / 2.0,
        y + h / 2.0 - 3.0,
        esc(title),
        x + w / 2.0,
        y + h / 2.0 + 14.0,
        esc(sub)
    );
}

/// The path SVG (as HTML) of a `cross-interface-loss` finding; `None` when
/// the evidence lacks the interfaces.
pub fn loss_path(f: &Finding, uid: &str) -> Option<String> {
    let ingress = ev_str(f, "ingress_interface")?;
    let egress = ev_str(f, "egress_interface")?;
    let nat = ev_str(f, "nat").unwrap_or("none");
    let packet = ev_str(f, "packet").unwrap_or("packet");
    let (w, h) = (800.0f64, 250.0f64);
    let mut o = String::new();
    let _ = write!(
        o,
        r##"<svg class="loss-path" id="path-{uid}" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" role="img" aria-label="path of the lost packet"><defs><marker id="arr-{uid}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0 0L10 5L0 10z" fill="context-stroke"/></marker></defs>"##
    );
    let _ = write!(
        o,
        r##"<text x="16" y="18" font-size="13" fill="#222">Path through this host: {} → {} → {}</text>"##,
        esc(ingress),
        if nat == "none" { "forwarding" } else { "NAT" },
        esc(egress)
    );
    let crossed = (
        ev_u64(f, "crossed_inner_frame"),
        ev_u64(f, "crossed_outer_frame"),
    );
    node(&mut o, 16.0, 40.0, 150.0, 110.0, ingress, "entered here");
    let host_sub = if nat == "none" {
        "no NAT".to_string()
    } else {
        format!("NAT: {nat}")
    };
    node(&mut o, 320.0, 40.0, 160.0, 110.0, "this host", &host_sub);
    node(
        &mut o,
        634.0,
        40.0,
        150.0,
        110.0,
        egress,
        "should leave here",
    );
    // Lost packet: into the host, then stopped before the egress.
    let lost = frames_of(f, "lost_frames");
    let _ = write!(
        o,
        r##"<g class="lost"><line x1="166" y1="75" x2="318" y2="75" stroke="{C_RETX}" stroke-width="2.5" marker-end="url(#arr-{uid})"/><line x1="480" y1="75" x2="575" y2="75" stroke="{C_RETX}" stroke-width="2.5" stroke-dasharray="6 4"/><path d="M585 65l20 20M605 65l-20 20" stroke="{C_RETX}" stroke-width="3"/><text x="172" y="68" font-size="12" fill="{C_RETX}">lost {} {}</text><text x="486" y="68" font-size="12" fill="{C_RETX}">never left</text></g>"##,
        esc(packet),
        esc(&lost)
    );
    // The retransmission that crossed.
    if let (Some(a), Some(b)) = crossed {
        let delay = f
            .evidence
            .get("delay_ms")
            .and_then(|v| v.as_f64())
            .map(|d| format!(", +{d:.0} ms"))
            .unwrap_or_default();
        let _ = write!(
            o,
            r##"<g class="crossed"><line x1="166" y1="120" x2="318" y2="120" stroke="{C_ACK}" stroke-width="2.5"/><line x1="480" y1="120" x2="632" y2="120" stroke="{C_ACK}" stroke-width="2.5" marker-end="url(#arr-{uid})"/><text x="172" y="113" font-size="12" fill="{C_ACK}">retransmission #{a}</text><text x="486" y="113" font-size="12" fill="{C_ACK}">left as #{b}{}</text></g>"##,
            esc(&delay)
        );
    }
    let inner = ev_str(f, "inner_flow").unwrap_or("");
    let _ = write!(
        o,
        r##"<text x="16" y="178" font-size="12" fill="#212529">on {}: {}</text>"##,
        esc(ingress),
        esc(inner)
    );
    if let Some(outer) = ev_str(f, "outer_flow") {
        let _ = write!(
            o,
            r##"<text x="16" y="198" font-size="12" fill="#212529">on {}: {}{}</text>"##,
            esc(egress),
            esc(outer),
            if outer != inner {
                " (rewritten by NAT)"
            } else {
                ""
            }
        );
    }
    let pair = (
        ev_u64(f, "pair_lost_packets"),
        ev_u64(f, "pair_crossed_packets"),
    );
    if let (Some(l), Some(c)) = pair {
        let _ = write!(
            o,
            r##"<text x="16" y="222" font-size="12" fill="#495057">{} → {}: {l} packet(s) lost, {c} crossed</text>"##,
            esc(ingress),
            esc(egress)
        );
    }
    o.push_str("</svg>");
    Some(o)
}
