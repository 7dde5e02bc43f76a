//! Structure of the HTML report, as looked at in headless Chromium
//! (`scripts/render-html-screenshot.sh`): each assertion guards one fix of
//! issue 12 item 6 and fails without it.

use pcapsleuth_analyze::{analyze_path, AnalyzeOptions};
use pcapsleuth_core::Finding;
use pcapsleuth_html::{render_html, series_for_report, svg, MIN_HISTOGRAM_CONNECTIONS};
use pcapsleuth_report::{Report, SCHEMA_VERSION};
use pcapsleuth_testkit::fixtures_dir;

fn report_of(names: &[&str]) -> Report {
    Report {
        schema_version: SCHEMA_VERSION,
        captures: names
            .iter()
            .map(|n| {
                let p = fixtures_dir().join(n);
                assert!(p.is_file(), "{} missing", p.display());
                analyze_path(&p, &AnalyzeOptions::default())
            })
            .collect(),
    }
}

fn html_of(names: &[&str]) -> (Report, String) {
    let r = report_of(names);
    let html = render_html(&r, &series_for_report(&r));
    (r, html)
}

/// The `<svg class="{class}" …>…</svg>` elements of `html`.
fn svgs<'h>(html: &'h str, class: &str) -> Vec<&'h str> {
    let open = format!("<svg class=\"{class}\"");
    html.match_indices(&open)
        .map(|(i, _)| {
            let rest = &html[i..];
            &rest[..rest.find("</svg>").map_or(rest.len(), |e| e + 6)]
        })
        .collect()
}

/// Value of attribute `name` in the tag starting at `tag`.
fn attr(tag: &str, name: &str) -> Option<f64> {
    let key = format!(" {name}=\"");
    let i = tag.find(&key)? + key.len();
    let end = tag[i..].find('"')? + i;
    tag[i..end].parse().ok()
}

#[test]
fn syn_retransmit_findings_get_a_syn_ladder_with_the_expected_ladder() {
    let (r, html) = html_of(&["syn-drops.pcap"]);
    let syn: Vec<&Finding> = r.captures[0]
        .findings
        .iter()
        .filter(|f| f.detector == "syn-retransmit")
        .collect();
    assert!(!syn.is_empty());
    let ladders = svgs(&html, "syn-ladder");
    assert_eq!(ladders.len(), syn.len(), "one SYN ladder per finding");
    // No time-sequence graph for them any more (it was mostly empty).
    assert_eq!(svgs(&html, "stevens").len(), 0);
    for (f, l) in syn.iter().zip(&ladders) {
        let n = f.evidence["syn_count"].as_u64().unwrap() as usize;
        assert_eq!(l.matches("class=\"attempt\"").count(), n, "observed SYNs");
        assert_eq!(l.matches("class=\"expected\"").count(), n, "expected rungs");
        // The first SYN's frame is labelled.
        assert!(l.contains(&format!("#{} +0 ms", f.frames[0])), "{l}");
    }
    assert!(html.contains("data-series=\"expected\""));
}

#[test]
fn legends_list_only_drawn_series() {
    // mss-blackhole: a black hole, no ICMP error in the flow.
    let (_, html) = html_of(&["mss-blackhole.pcap"]);
    let graphs = svgs(&html, "stevens");
    assert!(!graphs.is_empty());
    assert!(!graphs.iter().any(|g| g.contains(svg::C_ICMP)));
    assert!(html.contains("<p class=\"legend\">"));
    assert!(
        !html.contains("data-series=\"ICMP\""),
        "ICMP in the legend, none drawn"
    );
    assert!(html.contains("data-series=\"retransmission\""));
    // frag-needed: the ICMP errors are drawn, and listed.
    let (_, html) = html_of(&["self-frag-needed.pcapng"]);
    assert!(svgs(&html, "stevens")
        .iter()
        .any(|g| g.contains(svg::C_ICMP)));
    assert!(html.contains("data-series=\"ICMP\""));
}

/// Numbers of an SVG path `d` as (command, value) pairs for M/H/V/L paths.
fn path_points(d: &str) -> Vec<(char, f64)> {
    let mut out = Vec::new();
    let mut cmd = 'M';
    let mut num = String::new();
    let flush = |num: &mut String, cmd: char, out: &mut Vec<(char, f64)>| {
        if let Ok(v) = num.parse::<f64>() {
            out.push((cmd, v));
        }
        num.clear();
    };
    for c in d.chars() {
        if c.is_ascii_alphabetic() {
            flush(&mut num, cmd, &mut out);
            cmd = c;
        } else if c == ' ' || c == ',' {
            flush(&mut num, cmd, &mut out);
        } else {
            num.push(c);
        }
    }
    flush(&mut num, cmd, &mut out);
    out
}

#[test]
fn window_line_stays_inside_the_plot() {
    for name in [
        "mss-blackhole.pcap",
        "zero-window.pcap",
        "self-frag-needed.pcapng",
    ] {
        let (_, html) = html_of(&[name]);
        for g in svgs(&html, "stevens") {
            // The clip rectangle is the plot area.
            let clip = &g[g.find("<clipPath").unwrap()..];
            let rect = &clip[clip.find("<rect").unwrap()..];
            let (x0, y0) = (attr(rect, "x").unwrap(), attr(rect, "y").unwrap());
            let (x1, y1) = (
                x0 + attr(rect, "width").unwrap(),
                y0 + attr(rect, "height").unwrap(),
            );
            let stroke = format!("stroke=\"{}\"", svg::C_WIN);
            for (i, _) in g.match_indices("<path d=\"") {
                let tag = &g[i..i + g[i..].find('>').unwrap()];
                if !tag.contains(&stroke) {
                    continue;
                }
                let d = &tag[9..tag[9..].find('"').unwrap() + 9];
                let mut xy = 0;
                for (c, v) in path_points(d) {
                    let is_x = match c {
                        'H' => true,
                        'V' => false,
                        _ => {
                            xy += 1;
                            xy % 2 == 1
                        }
                    };
                    if is_x {
                        assert!(
                            v >= x0 - 0.1 && v <= x1 + 0.1,
                            "{name}: x {v} outside {x0}..{x1}"
                        );
                    } else {
                        assert!(
                            v >= y0 - 0.1 && v <= y1 + 0.1,
                            "{name}: y {v} outside {y0}..{y1}"
                        );
                    }
                }
            }
        }
    }
}

/// Boxes (x0, x1, y_top, y_bottom) of the cited-frame labels of one graph,
/// estimated as the renderer does (6.8 px per bold 11 px character).
fn label_boxes(g: &str) -> Vec<(f64, f64, f64, f64)> {
    let mut out = Vec::new();
    for (i, _) in g.match_indices("<g class=\"cite\">") {
        let part = &g[i..i + g[i..].find("</g>").unwrap()];
        let Some(t) = part.find("<text") else {
            continue;
        };
        let tag = &part[t..];
        let (x, y) = (attr(tag, "x").unwrap(), attr(tag, "y").unwrap());
        let text = &tag[tag.find('>').unwrap() + 1..tag.find("</text>").unwrap()];
        let w = text.chars().count() as f64 * 6.8;
        let x0 = if tag.contains("text-anchor=\"end\"") {
            x - w
        } else {
            x
        };
        out.push((x0, x0 + w, y - 9.0, y + 2.0));
    }
    out
}

#[test]
fn frame_labels_do_not_overlap() {
    for name in [
        "mss-blackhole.pcap",
        "zero-window.pcap",
        "self-frag-needed.pcapng",
    ] {
        let (_, html) = html_of(&[name]);
        for g in svgs(&html, "stevens") {
            let b = label_boxes(g);
            for (i, a) in b.iter().enumerate() {
                for c in &b[i + 1..] {
                    let overlap =
                        a.0 < c.1 - 1.0 && c.0 < a.1 - 1.0 && a.2 < c.3 - 1.0 && c.2 < a.3 - 1.0;
                    assert!(!overlap, "{name}: labels overlap: {a:?} {c:?}");
                }
            }
        }
    }
}

#[test]
fn flows_table_lists_each_flow_once() {
    let (r, html) = html_of(&["cross-interface-loss.pcapng"]);
    let table = &html[html
        .find("<table class=\"list flows\">")
        .expect("flows table")..];
    let table = &table[..table.find("</table>").unwrap()];
    let mut flows: Vec<(String, String, u16, String, u16, Option<u64>)> = r.captures[0]
        .findings
        .iter()
        .filter_map(|f| {
            let fl = f.flow.as_ref()?;
            Some((
                fl.protocol.as_str().to_string(),
                fl.client.clone(),
                fl.client_port,
                fl.server.clone(),
                fl.server_port,
                f.tcp_stream.or(f.udp_stream),
            ))
        })
        .collect();
    flows.sort();
    flows.dedup();
    assert_eq!(
        table.matches("<tr>").count(),
        flows.len() + 1,
        "header + one row per flow"
    );
    // Every finding is linked from it.
    for i in 0..r.captures[0].findings.len() {
        assert!(table.contains(&format!("href=\"#f-0-{i}\"")), "finding {i}");
    }
}

#[test]
fn multi_capture_reports_get_a_summary_and_contents() {
    let names = ["syn-drops.pcap", "mss-blackhole.pcap"];
    let (_, html) = html_of(&names);
    let table = &html[html.find("id=\"contents\"").expect("contents")..];
    let table = &table[..table.find("</table>").unwrap()];
    for ci in 0..names.len() {
        assert!(table.contains(&format!("href=\"#capture-{ci}\"")));
        assert!(html.contains(&format!("<section id=\"capture-{ci}\">")));
    }
    assert!(table.contains("syn-retransmit ×"));
    let (_, one) = html_of(&["syn-drops.pcap"]);
    assert!(
        !one.contains("id=\"contents\""),
        "no contents for one capture"
    );
}

#[test]
fn histograms_only_for_services_with_enough_connections() {
    // Three delayed connections per service: listed, not drawn.
    let (r, html) = html_of(&["cross-interface-loss.pcapng"]);
    let syn = r.captures[0]
        .findings
        .iter()
        .filter(|f| f.detector == "syn-retransmit")
        .count();
    assert!(syn > 0 && syn < 2 * MIN_HISTOGRAM_CONNECTIONS);
    assert_eq!(svgs(&html, "histogram").len(), 0);
    assert!(html.contains("<ul class=\"few-delays\">"));
    // syn-drops: 7 and 5 delayed connections: two histograms.
    let (_, html) = html_of(&["syn-drops.pcap"]);
    assert_eq!(svgs(&html, "histogram").len(), 2);
}

#[test]
fn cross_interface_loss_gets_a_path_picture() {
    let (r, html) = html_of(&["cross-interface-loss.pcapng"]);
    let cil: Vec<&Finding> = r.captures[0]
        .findings
        .iter()
        .filter(|f| f.detector == "cross-interface-loss")
        .collect();
    assert!(!cil.is_empty());
    let pics = svgs(&html, "loss-path");
    assert_eq!(pics.len(), cil.len());
    for (f, p) in cil.iter().zip(&pics) {
        for k in ["ingress_interface", "egress_interface"] {
            let name = f.evidence[k].as_str().unwrap();
            assert!(p.contains(&format!(">{name}</text>")), "{k} {name}");
        }
        assert!(p.contains("class=\"lost\""));
        let lost = f.evidence["lost_frames"][0].as_u64().unwrap();
        assert!(p.contains(&format!("#{lost}")));
    }
}

#[test]
fn readable_at_800_px() {
    let (_, html) = html_of(&[
        "syn-drops.pcap",
        "mss-blackhole.pcap",
        "self-frag-needed.pcapng",
    ]);
    // No SVG wider than 800 user units (scaled down at most a little at
    // 800 px), no SVG text under 11 px.
    for (i, _) in html.match_indices("<svg ") {
        let tag = &html[i..i + html[i..].find('>').unwrap()];
        assert!(attr(tag, "width").unwrap() <= 800.0, "{tag}");
    }
    for (i, _) in html.match_indices("font-size=\"") {
        let v: f64 = html[i + 11..i + 11 + html[i + 11..].find('"').unwrap()]
            .parse()
            .unwrap();
        assert!(v >= 11.0, "font-size {v}");
    }
    assert!(html.contains("@media (max-width:840px)"));
    // Long paths wrap.
    assert!(html.contains("h1,h2,h3,p,table.facts td{overflow-wrap:anywhere}"));
}

#[test]
fn time_lost_by_cause_is_a_stacked_bar_when_flows_carry_a_ledger() {
    let p = fixtures_dir().join("mss-blackhole.pcap");
    let opts = AnalyzeOptions {
        with_flows: true,
        ..AnalyzeOptions::default()
    };
    let r = Report {
        schema_version: SCHEMA_VERSION,
        captures: vec![analyze_path(&p, &opts)],
    };
    let html = render_html(&r, &[]);
    let bars = svgs(&html, "time-lost");
    assert_eq!(bars.len(), 1, "one stacked bar");
    let causes = pcapsleuth_html::budget::time_lost(&r.captures[0]);
    assert!(!causes.is_empty());
    assert_eq!(
        bars[0].matches("<rect class=\"cause\"").count(),
        causes.len()
    );
    let legend = &html[html.find("<p class=\"legend time-lost\">").unwrap()..];
    let legend = &legend[..legend.find("</p>").unwrap()];
    assert_eq!(
        legend.matches("<span>").count(),
        causes.len(),
        "legend = drawn causes"
    );
    // Without the ledger (plain `analyze`), no bar.
    let (_, plain) = html_of(&["mss-blackhole.pcap"]);
    assert!(svgs(&plain, "time-lost").is_empty());
}

#[test]
fn timeline_labels_stay_inside_and_do_not_overlap_markers() {
    for name in ["syn-drops.pcap", "cross-interface-loss.pcapng"] {
        let (_, html) = html_of(&[name]);
        let tl = svgs(&html, "timeline")[0];
        let w = attr(tl, "width").unwrap();
        let mut rects = Vec::new();
        let mut labels = Vec::new();
        for (i, _) in tl.match_indices("<a href=") {
            let a = &tl[i..i + tl[i..].find("</a>").unwrap()];
            let r = &a[a.find("<rect").unwrap()..];
            let (x, y) = (attr(r, "x").unwrap(), attr(r, "y").unwrap());
            rects.push((
                x,
                x + attr(r, "width").unwrap(),
                y,
                y + attr(r, "height").unwrap(),
            ));
            let t = &a[a.find("<text").unwrap()..];
            let (tx, ty) = (attr(t, "x").unwrap(), attr(t, "y").unwrap());
            let n = &t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()];
            labels.push((tx, tx + n.len() as f64 * 6.5, ty - 9.0, ty + 2.0));
        }
        let hit = |a: &(f64, f64, f64, f64), b: &(f64, f64, f64, f64)| {
            a.0 < b.1 - 0.5 && b.0 < a.1 - 0.5 && a.2 < b.3 - 0.5 && b.2 < a.3 - 0.5
        };
        for (i, l) in labels.iter().enumerate() {
            assert!(l.0 >= 0.0 && l.1 <= w, "{name}: label {l:?} outside 0..{w}");
            for r in &rects {
                assert!(!hit(l, r), "{name}: label {l:?} on marker {r:?}");
            }
            for m in &labels[i + 1..] {
                assert!(!hit(l, m), "{name}: labels {l:?} {m:?}");
            }
        }
    }
}

#[test]
fn zoom_stays_inside_the_flow() {
    // In the lab's probe-timer-200ms.pcapng a 0.1 ms frag-needed finding
    // comes 0.4 s into its flow: the zoom used to begin before the first
    // segment (an axis from -0.5 s).
    let Some(shared) = pcapsleuth_testkit::shared_dir() else {
        println!("SKIP: ../shared not present");
        return;
    };
    let p = shared.join("lab/probe-timer-200ms.pcapng");
    let r = Report {
        schema_version: SCHEMA_VERSION,
        captures: vec![analyze_path(&p, &AnalyzeOptions::default())],
    };
    let html = render_html(&r, &series_for_report(&r));
    let zooms: Vec<&str> = svgs(&html, "stevens")
        .into_iter()
        .filter(|g| g.contains("zoom on the finding"))
        .collect();
    assert!(!zooms.is_empty());
    for z in zooms {
        assert!(!z.contains(">-"), "negative tick label in a zoom");
    }
}

#[test]
fn the_report_names_the_tool_version() {
    let (_, html) = html_of(&["zero-window.pcap"]);
    let want = format!(
        "Generated by pcapsleuth {}",
        pcapsleuth_report::TOOL_VERSION
    );
    assert!(html.contains(&want), "no version line in the HTML report");
}
