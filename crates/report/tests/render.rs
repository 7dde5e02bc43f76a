//! Renderer tests on a hand-made report (independent of the detectors): every
//! format is snapshotted, and the structural promises (JSONL line shape, order,
//! determinism, colour off by default) are asserted directly.

use pcapsleuth_core::{Evidence, Finding, FlowRef, Severity};
use pcapsleuth_report::*;
use serde_json::{json, Value};

const T0: i64 = 1_700_000_000_123_456_789;

fn flow(client: &str, cp: u16, server: &str, sp: u16) -> Option<FlowRef> {
    Some(FlowRef {
        protocol: pcapsleuth_core::Protocol::Tcp,
        client: client.into(),
        client_port: cp,
        server: server.into(),
        server_port: sp,
    })
}

fn ev(v: Value) -> Evidence {
    match v {
        Value::Object(m) => m,
        _ => Evidence::new(),
    }
}

fn sample() -> Report {
    let f1 = Finding::new(
        "syn-retransmit",
        Severity::Warning,
        "SYN to 10.0.0.2:80 was retransmitted 2 times; the connection took 3.001 s to establish."
            .into(),
        flow("10.0.0.1", 40000, "10.0.0.2", 80),
        Some(0),
        vec![3, 1, 2],
        T0,
        T0 + 3_001_000_000,
        "Find what drops SYNs to this server (firewall, full accept queue).".into(),
        ev(json!({"retransmissions": 2, "delay_ms": 3001, "rto_ms": [1000, 2000]})),
    );
    let f2 = Finding::new(
        "mss-blackhole",
        Severity::Error,
        "Segments larger than 1400 bytes never arrive: a path MTU | black hole.".into(),
        flow("2001:db8::1", 51000, "2001:db8::2", 443),
        Some(1),
        vec![10, 12],
        T0 + 10_000_000_000,
        T0 + 14_000_000_000,
        "Clamp the MSS on the tunnel (`iptables ... --clamp-mss-to-pmtu`).".into(),
        ev(json!({"largest_delivered_bytes": 1400, "mtu": null, "note": "a_b*c"})),
    );
    let f3 = Finding::new(
        "zero-window",
        Severity::Info,
        "Receiver advertised a zero window for 200 ms.".into(),
        None,
        None,
        vec![20],
        T0 + 20_000_000_000,
        T0 + 20_200_000_000,
        String::new(),
        Evidence::new(),
    );
    let mut findings = vec![f2, f3, f1];
    pcapsleuth_core::finding::sort_findings(&mut findings);
    let good = CaptureReport {
        path: "fixtures/captures/sample.pcapng".into(),
        format: Some("pcapng".into()),
        packets: 21,
        first_ts_ns: T0,
        last_ts_ns: T0 + 20_200_000_000,
        interfaces: vec![
            InterfaceReport {
                id: 0,
                name: Some("eth0".into()),
                linktype: "ETHERNET".into(),
            },
            InterfaceReport {
                id: 1,
                name: None,
                linktype: "LINUX_SLL2".into(),
            },
        ],
        tcp_streams: 2,
        warnings: vec![WarningReport {
            kind: WarningKindReport::TruncatedRecord,
            offset: 4242,
            frame: Some(22),
            message: "record header claims 1514 bytes, 100 left".into(),
        }],
        error: None,
        incomplete: None,
        capture_quality: None,
        findings,
        flows: vec![],
        sources: Vec::new(),
    };
    let bad = CaptureReport {
        path: "notes.txt".into(),
        format: None,
        packets: 0,
        first_ts_ns: 0,
        last_ts_ns: 0,
        interfaces: vec![],
        tcp_streams: 0,
        warnings: vec![],
        error: Some("notes.txt: not a pcap or pcapng capture (first bytes 68656c6c)".into()),
        incomplete: None,
        capture_quality: None,
        findings: vec![],
        flows: vec![],
        sources: Vec::new(),
    };
    Report {
        schema_version: SCHEMA_VERSION,
        captures: vec![good, bad],
    }
}

fn summary(stream: u64, client: &str, state: ConnStateReport) -> FlowReport {
    FlowReport {
        tcp_stream: stream,
        client: client.into(),
        client_port: 40000 + stream as u16,
        server: "10.0.0.2".into(),
        server_port: 80,
        packets: 10,
        bytes: 4321,
        packets_c2s: 6,
        packets_s2c: 4,
        payload_bytes_c2s: 100,
        payload_bytes_s2c: 3000,
        first_frame: 1,
        last_frame: 10,
        duration_ms: 1234.5,
        state,
        retransmissions: RetransmissionsReport {
            total: 2,
            rto: 1,
            fast: 1,
            spurious: 0,
        },
        duplicate_sightings: 0,
        sightings: vec![],
        sightings_capped: false,
        zero_window_ms: 0.0,
        zero_window_episodes: 0,
        handshake_rtt_ms: Some(0.25),
        rtt_ms: Some(RttReport {
            min: 0.2,
            avg: 0.3,
            max: 0.5,
        }),
        longest_stall_ms: 1000.0,
        longest_stall_frames: Some([3, 4]),
        mss: [Some(1460), None],
        window_scale: [Some(7), Some(7)],
        unacked_capped: false,
        stalls: Vec::new(),
        stalls_dropped: 0,
        time_lost_by_cause: Vec::new(),
        stall_summary: None,
        capture_quality: None,
    }
}

fn flows_sample() -> Report {
    let mut r = sample();
    r.captures[0].flows = vec![
        summary(0, "10.0.0.1", ConnStateReport::SF),
        summary(1, "2001:db8::1", ConnStateReport::S0),
    ];
    r.captures[0].flows[1].handshake_rtt_ms = None;
    r
}

#[test]
fn json_is_pretty_with_trailing_newline_and_contract_keys() {
    let s = render_json(&sample());
    assert!(s.ends_with("}\n"));
    let v: Value = serde_json::from_str(&s).unwrap();
    assert_eq!(v["schema_version"], 1);
    let c = &v["captures"][0];
    assert!(c.get("flows").is_none(), "flows omitted from analyze JSON");
    let keys: Vec<&str> = c["findings"][0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "detector",
            "severity",
            "summary",
            "flow",
            "tcp_stream",
            "frames",
            "start_ts_ns",
            "end_ts_ns",
            "wireshark_filter",
            "stream_filter",
            "remedy",
            "evidence",
            "community_id"
        ]
    );
    assert_eq!(v["pcapsleuth_version"], pcapsleuth_report::TOOL_VERSION);
    assert_eq!(c["findings"][0]["frames"], json!([1, 2, 3]));
    assert_eq!(v["captures"][1]["format"], Value::Null);
    insta::assert_snapshot!("sample.json", s);
}

#[test]
fn jsonl_has_one_finding_per_line_with_path_first() {
    let r = sample();
    let s = render_jsonl(&r);
    let lines: Vec<&str> = s.lines().collect();
    // Three findings, then the status line of the unreadable second capture.
    assert_eq!(lines.len(), 4);
    assert!(s.ends_with('\n'));
    let status: Value = serde_json::from_str(lines[3]).unwrap();
    assert_eq!(status["path"], "notes.txt");
    assert_eq!(status["record"], "capture_error");
    assert_eq!(status["packets"], 0);
    assert!(status["error"].as_str().unwrap().contains("not a pcap"));
    let mut detectors = Vec::new();
    for l in &lines[..3] {
        let v: Value = serde_json::from_str(l).unwrap();
        let obj = v.as_object().unwrap();
        assert_eq!(obj.keys().next().map(String::as_str), Some("path"));
        assert_eq!(obj["path"], "fixtures/captures/sample.pcapng");
        // 13 finding fields, and community_id for a TCP or UDP flow.
        assert_eq!(
            obj.len(),
            13 + usize::from(obj.contains_key("community_id"))
        );
        detectors.push(obj["detector"].as_str().unwrap().to_string());
    }
    assert_eq!(
        detectors,
        ["syn-retransmit", "mss-blackhole", "zero-window"]
    );
    assert_eq!(
        render_capture_jsonl(&r.captures[1]),
        format!("{}\n", lines[3])
    );
    assert_eq!(render_capture_jsonl(&r.captures[0]).lines().count(), 3);
    insta::assert_snapshot!("sample.jsonl", s);
}

#[test]
fn text_layout() {
    let r = sample();
    let s = render_text(&r, &TextOptions::default());
    assert!(!s.contains('\x1b'), "no colour unless asked");
    assert!(s.contains("[2001:db8::1]:51000 -> [2001:db8::2]:443"));
    assert!(s.contains("-- 21 packets, 2 TCP streams, 3 findings (1 error, 1 warning, 1 info)"));
    assert!(s.contains("error: notes.txt: not a pcap"));
    assert!(s.contains("capture warning: truncated_record at byte 4242 (frame 22)"));
    insta::assert_snapshot!("sample.txt", s);
    let colored = render_text(&r, &TextOptions { color: true });
    assert!(colored.contains("\x1b[1;31merror  \x1b[0m"));
    // Stripping escapes gives back the plain text.
    let mut stripped = String::new();
    let mut chars = colored.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for d in chars.by_ref() {
                if d == 'm' {
                    break;
                }
            }
        } else {
            stripped.push(c);
        }
    }
    assert_eq!(stripped, s);
}

#[test]
fn markdown_layout() {
    let s = render_markdown(&sample());
    assert!(s.starts_with("# pcapsleuth report\n"));
    // Severity order in the findings table: error first.
    let e = s
        .find("| 1 | error | `mss-blackhole`")
        .expect("error first");
    let w = s
        .find("| 2 | warning | `syn-retransmit`")
        .expect("warning second");
    assert!(e < w);
    assert!(s.contains(
        "| Span | 2023-11-14T22:13:20.123456789Z → 2023-11-14T22:13:40.323456789Z (20.200 s) |"
    ));
    // A pipe in a summary must not break the table row.
    assert!(s.contains("path MTU \\| black hole"));
    assert!(s.contains("- Wireshark filter: `frame.number in {1,2,3}`"));
    // Every table row has the same number of unescaped pipes as its header.
    for block in s.split("\n\n") {
        let rows: Vec<&str> = block.lines().filter(|l| l.starts_with('|')).collect();
        if let Some(head) = rows.first() {
            let count = |l: &str| l.replace("\\|", "").matches('|').count();
            for r in &rows {
                assert_eq!(count(r), count(head), "row {r:?} in block {block:?}");
            }
        }
    }
    insta::assert_snapshot!("sample.md", s);
}

#[test]
fn flows_renderers() {
    let r = flows_sample();
    let j = render_flows_json(&r);
    let v: Value = serde_json::from_str(&j).unwrap();
    assert_eq!(v["captures"][0]["flows"][1]["tcp_stream"], 1);
    assert_eq!(v["captures"][1]["flows"], json!([]));
    assert!(v["captures"][1]["error"].is_string());
    assert!(v["captures"][0].get("findings").is_none());
    insta::assert_snapshot!("sample.flows.json", j);
    let t = render_flows_text(&r);
    assert!(t.contains("-- 2 flows"));
    assert!(t.contains("[2001:db8::1]:40001"));
    insta::assert_snapshot!("sample.flows.txt", t);
}

#[test]
fn rendering_is_deterministic() {
    let r = sample();
    assert_eq!(render_json(&r), render_json(&sample()));
    assert_eq!(render_markdown(&r), render_markdown(&sample()));
    assert_eq!(
        render_text(&r, &TextOptions::default()),
        render_text(&sample(), &TextOptions::default())
    );
}

#[test]
fn written_json_is_the_rendered_json_byte_for_byte() {
    // The CLI writes JSON as it serialises it (`write_json`,
    // `write_flows_json`); the bytes must be those of the rendered string,
    // whose snapshots pin the format.
    for r in [sample(), flows_sample(), merged_sample()] {
        let mut w = Vec::new();
        write_json(&r, &mut w).unwrap();
        assert_eq!(String::from_utf8(w).unwrap(), render_json(&r));
        let mut w = Vec::new();
        write_flows_json(&r, &mut w).unwrap();
        assert_eq!(String::from_utf8(w).unwrap(), render_flows_json(&r));
    }
    // A failing writer is an error, not a panic or a silent success.
    struct Full;
    impl std::io::Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::StorageFull.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let e = write_json(&sample(), Full).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::StorageFull);
}

#[test]
fn empty_report_renders() {
    let r = Report {
        schema_version: SCHEMA_VERSION,
        captures: vec![],
    };
    assert_eq!(
        render_json(&r),
        format!(
            "{{\n  \"schema_version\": 1,\n  \"pcapsleuth_version\": \"{}\",\n  \"captures\": []\n}}\n",
            pcapsleuth_report::TOOL_VERSION
        )
    );
    assert_eq!(render_jsonl(&r), "");
    assert_eq!(render_text(&r, &TextOptions::default()), "");
    assert_eq!(
        render_markdown(&r),
        format!(
            "# pcapsleuth report\n\n---\n\n_Generated by pcapsleuth {}._\n",
            pcapsleuth_report::TOOL_VERSION
        )
    );
}

/// A merged set (`--merge`): two files, one finding citing a frame of each.
fn merged_sample() -> Report {
    let mut f = Finding::new(
        "frag-needed",
        Severity::Warning,
        "Router 10.0.0.254 said the path MTU is 1400.".into(),
        flow("10.0.0.1", 40000, "10.0.0.2", 80),
        Some(0),
        vec![3, 5, 6, 7, 8, 10],
        T0,
        T0 + 1_000,
        String::new(),
        Evidence::new(),
    );
    f.source_frames = vec![
        pcapsleuth_core::finding::SourceFrame {
            file: "eth0.pcap".into(),
            frame: 2,
        },
        pcapsleuth_core::finding::SourceFrame {
            file: "lo.pcap".into(),
            frame: 1,
        },
        pcapsleuth_core::finding::SourceFrame {
            file: "lo.pcap".into(),
            frame: 2,
        },
        pcapsleuth_core::finding::SourceFrame {
            file: "lo.pcap".into(),
            frame: 3,
        },
        pcapsleuth_core::finding::SourceFrame {
            file: "eth0.pcap".into(),
            frame: 3,
        },
        pcapsleuth_core::finding::SourceFrame {
            file: "eth0.pcap".into(),
            frame: 5,
        },
    ];
    let iface = |id, name: &str| InterfaceReport {
        id,
        name: Some(name.into()),
        linktype: "ETHERNET".into(),
    };
    Report {
        schema_version: SCHEMA_VERSION,
        captures: vec![CaptureReport {
            path: "eth0.pcap+lo.pcap".into(),
            format: Some("pcapng".into()),
            packets: 10,
            first_ts_ns: T0,
            last_ts_ns: T0 + 1_000,
            interfaces: vec![iface(0, "eth0"), iface(1, "lo")],
            tcp_streams: 1,
            warnings: vec![],
            error: None,
            incomplete: None,
            capture_quality: None,
            findings: vec![f],
            flows: vec![],
            sources: vec![
                SourceReport {
                    path: "eth0.pcap".into(),
                    format: Some("pcap".into()),
                    packets: 6,
                    interfaces: vec![iface(0, "eth0")],
                    warnings: vec![],
                    error: None,
                    incomplete: None,
                },
                SourceReport {
                    path: "lo.pcap".into(),
                    format: Some("pcapng".into()),
                    packets: 4,
                    interfaces: vec![iface(1, "lo")],
                    warnings: vec![],
                    error: None,
                    incomplete: None,
                },
            ],
        }],
    }
}

#[test]
fn merged_set_cites_file_and_frame() {
    let r = merged_sample();
    let text = render_text(&r, &TextOptions::default());
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("== eth0.pcap+lo.pcap (pcapng, "),
        "{text}"
    );
    assert_eq!(
        lines[1],
        "   merged from eth0.pcap (pcap, 6 frames), lo.pcap (pcapng, 4 frames)"
    );
    assert_eq!(lines[3], "        frame.number in {3,5,6,7,8,10}");
    assert_eq!(
        lines[4],
        "        frames: eth0.pcap#2, lo.pcap#1-3, eth0.pcap#3, eth0.pcap#5"
    );
    let md = render_markdown(&r);
    assert!(
        md.contains("| Merged from | `eth0.pcap (pcap, 6 frames), lo.pcap (pcapng, 4 frames)` |"),
        "{md}"
    );
    assert!(
        md.contains(
            "- Source frames (file#frame): `eth0.pcap#2, lo.pcap#1-3, eth0.pcap#3, eth0.pcap#5`\n"
        ),
        "{md}"
    );
    let v: Value = serde_json::from_str(&render_json(&r)).unwrap();
    let c = &v["captures"][0];
    assert_eq!(c["sources"][1]["interfaces"][0]["id"], 1);
    assert_eq!(
        c["findings"][0]["source_frames"],
        json!([
            {"file": "eth0.pcap", "frame": 2}, {"file": "lo.pcap", "frame": 1}, {"file": "lo.pcap", "frame": 2},
            {"file": "lo.pcap", "frame": 3}, {"file": "eth0.pcap", "frame": 3}, {"file": "eth0.pcap", "frame": 5}
        ])
    );
    let line: Value = serde_json::from_str(render_jsonl(&r).lines().next().unwrap()).unwrap();
    assert_eq!(line["source_frames"][1]["frame"], 1);
    // The new keys are in docs/report.schema.json (strict: unknown keys fail).
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/report.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::draft202012::new(&schema).expect("schema compiles");
    assert!(
        validator.is_valid(&v),
        "merged sample does not match the schema"
    );
    let mut bad = v.clone();
    bad["captures"][0]["sources"][0]["extra"] = json!(1);
    assert!(!validator.is_valid(&bad));
    // A single capture has neither key.
    let single = render_json(&sample());
    assert!(!single.contains("source_frames") && !single.contains("\"sources\""));
}

/// `flows` output of a merged set names its files like `analyze` does: a
/// `merged from` line under the header, and `sources` before `flows` in JSON.
#[test]
fn merged_set_flows_name_their_sources() {
    let mut r = merged_sample();
    r.captures[0].flows = vec![summary(0, "10.0.0.1", ConnStateReport::SF)];
    let text = render_flows_text(&r);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "== eth0.pcap+lo.pcap");
    assert_eq!(
        lines[1],
        "   merged from eth0.pcap (pcap, 6 frames), lo.pcap (pcapng, 4 frames)"
    );
    assert!(lines[2].starts_with("stream"), "{text}");
    let json = render_flows_json(&r);
    let keys: Vec<String> = serde_json::from_str::<Value>(&json).unwrap()["captures"][0]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys, ["path", "sources", "flows"]);
    // A single capture has no `sources` and no `merged from` line.
    let mut single = sample();
    single.captures.truncate(1);
    assert!(!render_flows_json(&single).contains("\"sources\""));
    assert!(!render_flows_text(&single).contains("merged from"));
}
