//! The HTML report of committed fixtures is self-contained, well-formed enough
//! (every `<svg>` closed), escapes text, and labels the cited frames.

use pcapsleuth_analyze::{analyze_path, AnalyzeOptions};
use pcapsleuth_core::{Evidence, Finding, Severity};
use pcapsleuth_html::{collect_series, render_html, series_for_report, MarkerKind};
use pcapsleuth_report::{Report, SCHEMA_VERSION};
use pcapsleuth_testkit::fixtures_dir;

fn report_of(name: &str) -> Report {
    let p = fixtures_dir().join(name);
    assert!(p.is_file(), "{} missing", p.display());
    Report {
        schema_version: SCHEMA_VERSION,
        captures: vec![analyze_path(&p, &AnalyzeOptions::default())],
    }
}

/// No external resource, no script, balanced `<svg>` elements.
fn assert_self_contained(html: &str) {
    let lower = html.to_ascii_lowercase();
    for bad in [
        "src=\"http",
        "href=\"http",
        "src='http",
        "href='http",
        "url(http",
        "@import",
        "<script",
        "<link",
        "//fonts.",
    ] {
        assert!(
            !lower.contains(bad),
            "external reference {bad:?} in the HTML"
        );
    }
    assert!(
        !lower.contains("http://") && !lower.contains("https://"),
        "URL in the HTML"
    );
    let mut depth = 0i32;
    let mut rest = html;
    let mut opened = 0;
    while let Some(i) = rest
        .find("<svg")
        .into_iter()
        .chain(rest.find("</svg>"))
        .min()
    {
        if rest[i..].starts_with("</svg>") {
            depth -= 1;
            rest = &rest[i + 6..];
        } else {
            depth += 1;
            opened += 1;
            rest = &rest[i + 4..];
        }
        assert!((0..=1).contains(&depth), "svg nesting broken");
    }
    assert_eq!(depth, 0, "unclosed <svg>");
    assert!(opened > 0);
    assert!(html.trim_end().ends_with("</html>"));
}

#[test]
fn mss_blackhole_report_is_self_contained_and_labels_cited_frames() {
    let report = report_of("mss-blackhole.pcap");
    let cap = &report.captures[0];
    let tcp_findings: Vec<&Finding> = cap
        .findings
        .iter()
        .filter(|f| f.tcp_stream.is_some())
        .collect();
    assert!(!tcp_findings.is_empty(), "fixture should give TCP findings");
    let series = series_for_report(&report);
    let html = render_html(&report, &series);
    assert_self_contained(&html);
    assert_eq!(
        html.matches("<svg class=\"stevens\"").count(),
        tcp_findings.len(),
        "one Stevens graph per TCP finding"
    );
    assert_eq!(html.matches("<svg class=\"timeline\"").count(), 1);
    for f in &tcp_findings {
        for n in &f.frames {
            assert!(
                html.contains(&format!(">#{n}</text>")),
                "cited frame {n} not labelled in a graph"
            );
        }
        assert!(html.contains(&f.wireshark_filter), "filter shown");
    }
    // Retransmissions drawn in their colour.
    assert!(html.contains(pcapsleuth_html::svg::C_RETX));
    assert!(
        html.len() < 2_000_000,
        "report too large: {} bytes",
        html.len()
    );
}

#[test]
fn series_of_mss_blackhole_marks_retransmissions_and_stalls() {
    let p = fixtures_dir().join("mss-blackhole.pcap");
    let report = report_of("mss-blackhole.pcap");
    let f = report.captures[0]
        .findings
        .iter()
        .find(|f| f.detector == "mss-blackhole")
        .expect("mss-blackhole finding");
    let stream = f.tcp_stream.expect("tcp finding");
    let series = collect_series(&p, &[stream]).expect("reads");
    assert_eq!(series.len(), 1);
    let s = &series[0];
    assert_eq!(s.stream, stream);
    assert!(!s.capped);
    // The first cited frame is the original transmission, the rest its retransmissions.
    let (first, rest) = f.frames.split_first().expect("frames");
    let pt = |n: u64| {
        s.points
            .iter()
            .find(|p| p.frame == n)
            .unwrap_or_else(|| panic!("frame {n} not in series"))
    };
    assert!(!pt(*first).retransmission);
    for n in rest {
        let p = pt(*n);
        assert!(p.retransmission, "frame {n} should be a retransmission");
        assert_eq!(p.rel_seq, pt(*first).rel_seq);
        assert!(p.len > 1000);
    }
    assert!(
        s.markers
            .iter()
            .any(|m| matches!(m.kind, MarkerKind::Stall { .. })),
        "stalls recorded"
    );
    // Points are in frame order.
    assert!(s.points.windows(2).all(|w| w[0].frame < w[1].frame));
    // Asking for nothing reads nothing.
    assert!(collect_series(&p, &[]).unwrap().is_empty());
}

#[test]
fn syn_drops_has_a_delay_histogram_per_service() {
    let report = report_of("syn-drops.pcap");
    let syn: Vec<&Finding> = report.captures[0]
        .findings
        .iter()
        .filter(|f| f.detector == "syn-retransmit")
        .collect();
    assert!(
        !syn.is_empty(),
        "fixture should give syn-retransmit findings"
    );
    let html = render_html(&report, &series_for_report(&report));
    assert_self_contained(&html);
    assert!(html.contains("<svg class=\"histogram\""));
    // Every delayed connection is counted in exactly one bar.
    let counted: u64 = html
        .match_indices("<title>")
        .filter_map(|(i, _)| {
            let t = &html[i + 7..];
            let (n, rest) = t.split_once(' ')?;
            rest.starts_with("connection")
                .then(|| n.parse::<u64>().expect("count"))
        })
        .sum();
    assert_eq!(counted, syn.len() as u64);
}

#[test]
fn text_is_escaped_and_graphs_are_optional() {
    let mut report = report_of("mss-blackhole.pcap");
    let evil = "<script>alert(\"x\")</script> & 'q'";
    report.captures[0].path = evil.to_string();
    let t0 = report.captures[0].first_ts_ns;
    report.captures[0].findings.push(Finding::new(
        "x<y",
        Severity::Info,
        evil.to_string(),
        None,
        None,
        vec![1],
        t0,
        t0,
        evil.to_string(),
        Evidence::new(),
    ));
    let html = render_html(&report, &[]);
    assert_self_contained(&html);
    assert!(!html.contains("<script"));
    assert!(html.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;q&#39;"));
    assert!(html.contains("x&lt;y"));
    assert_eq!(
        html.matches("<svg class=\"stevens\"").count(),
        0,
        "no series, no graphs"
    );
}
