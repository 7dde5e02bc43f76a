//! Round trip: annotate real lab captures with a hand-built report, then check
//! with tshark that exactly the cited frames carry comments and that every
//! frame's length, timestamp and interface are unchanged, and with our reader
//! that every packet's bytes are unchanged.

use pcapsleuth_analyze::{analyze_path, AnalyzeOptions};
use pcapsleuth_annotate::annotate;
use pcapsleuth_core::{Finding, Severity};
use pcapsleuth_ingest::CaptureReader;
use pcapsleuth_report::CaptureReport;
use pcapsleuth_testkit::{in_ci, shared_dir, tshark, tshark_lines};
use std::path::{Path, PathBuf};

fn finding(detector: &str, summary: &str, frames: Vec<u64>) -> Finding {
    Finding::builder(detector, Severity::Warning)
        .summary(summary)
        .tcp_stream(0u64)
        .frames(frames)
        .build()
}

/// A report for `path` whose findings are exactly `findings` (the analysis
/// only supplies the capture facts; detector output is discarded).
fn report(path: &Path, findings: Vec<Finding>) -> CaptureReport {
    let mut r = analyze_path(path, &AnalyzeOptions::default());
    r.findings = findings;
    r
}

/// Inputs present, or `None` after printing SKIP (panics under CI).
fn prerequisites(name: &str) -> Option<PathBuf> {
    let skip = |why: String| {
        assert!(!in_ci(), "{why} (required under CI)");
        println!("SKIP: {why}");
    };
    if tshark().is_none() {
        skip("tshark not installed".into());
        return None;
    }
    let Some(shared) = shared_dir() else {
        skip("../shared not present".into());
        return None;
    };
    let p = shared.join("lab").join(name);
    if !p.is_file() {
        skip(format!("{} missing", p.display()));
        return None;
    }
    Some(p)
}

/// Per-frame `number len cap_len time_epoch interface_id` as tshark prints
/// them; a legacy pcap has no interface id, which is interface 0.
fn frame_facts(file: &Path) -> Vec<String> {
    let fields = [
        "frame.number",
        "frame.len",
        "frame.cap_len",
        "frame.time_epoch",
        "frame.interface_id",
    ];
    let mut args = vec!["-T", "fields"];
    for f in &fields {
        args.push("-e");
        args.push(f);
    }
    tshark_lines(file, &args)
        .into_iter()
        .map(|l| {
            let mut cols: Vec<String> = l.split('\t').map(str::to_string).collect();
            if cols.get(4).is_none_or(|c| c.is_empty()) {
                cols.resize(5, String::new());
                cols[4] = "0".into();
            }
            cols.join("\t")
        })
        .collect()
}

fn check(name: &str, cited_a: Vec<u64>, cited_b: Vec<u64>, expect_ifaces: u64) {
    let Some(input) = prerequisites(name) else {
        return;
    };
    let a = finding(
        "probe-timer-stall",
        "first <finding>, with a\nline break",
        cited_a.clone(),
    );
    let b = finding("syn-retransmit", "second finding", cited_b.clone());
    let rep = report(&input, vec![a.clone(), b.clone()]);
    let dir = pcapsleuth_testkit::scratch("annotate");
    let out = dir.join(format!("{name}.annotated.pcapng"));
    let stats = annotate(&input, &rep, &out).expect("annotate");

    let mut cited: Vec<u64> = cited_a.iter().chain(&cited_b).copied().collect();
    cited.sort_unstable();
    cited.dedup();
    let both: Vec<u64> = cited_a
        .iter()
        .filter(|f| cited_b.contains(f))
        .copied()
        .collect();
    assert!(!both.is_empty(), "test wants a frame cited twice");
    assert_eq!(stats.annotated_packets, cited.len() as u64);
    assert_eq!(stats.comments, (cited_a.len() + cited_b.len()) as u64);
    assert_eq!(stats.missing_frames, 0);
    assert_eq!(stats.interfaces, expect_ifaces);

    // Exactly the cited frames carry comments.
    let commented: Vec<u64> = tshark_lines(
        &out,
        &["-Y", "frame.comment", "-T", "fields", "-e", "frame.number"],
    )
    .iter()
    .map(|l| l.trim().parse().expect("frame number"))
    .collect();
    assert_eq!(commented, cited, "{name}: commented frames");

    // A frame cited by both findings carries both comments: its role in
    // the first (not that finding's first frame: no summary), and in the
    // second, whose first frame it is (with the summary).
    let text_of = |n: u64| {
        let filter = format!("frame.number == {n}");
        tshark_lines(
            &out,
            &["-Y", &filter, "-T", "fields", "-e", "frame.comment"],
        )
        .join("\n")
    };
    let text = text_of(both[0]);
    let pos = cited_a.iter().position(|&f| f == both[0]).unwrap() + 1;
    // Its place in the first finding (with what the frame is, when TCP).
    let role_a = format!("cited frame {pos} of {}", cited_a.len());
    assert!(
        text.contains("pcapsleuth probe-timer-stall: "),
        "{name}: {text}"
    );
    assert!(text.contains(&role_a), "{name}: {text}");
    assert!(!text.contains("first <finding>"), "{name}: {text}");
    assert!(
        text.contains("pcapsleuth syn-retransmit: "),
        "{name}: {text}"
    );
    assert!(text.contains("second finding"), "{name}: {text}");
    let first = text_of(cited_a[0]);
    for want in [
        "pcapsleuth probe-timer-stall: ".to_string(),
        format!("cited frame 1 of {}", cited_a.len()),
        ". first <finding>, with a line break".to_string(),
    ] {
        assert!(first.contains(&want), "{name}: {first}");
    }

    // Lengths, timestamps (ns) and interfaces unchanged, frame by frame.
    let before = frame_facts(&input);
    let after = frame_facts(&out);
    assert!(!before.is_empty());
    assert_eq!(before.len(), after.len(), "{name}: frame count");
    for (x, y) in before.iter().zip(&after) {
        assert_eq!(x, y, "{name}: frame facts differ");
    }
    assert_eq!(stats.packets, before.len() as u64);

    // Bytes unchanged (our reader on both).
    let mut r1 = CaptureReader::open(&input).unwrap();
    let mut r2 = CaptureReader::open(&out).unwrap();
    let mut n = 0;
    loop {
        let f1 = r1
            .next_frame()
            .unwrap()
            .map(|f| (f.number, f.ts, f.interface, f.orig_len, f.data.to_vec()));
        let f2 = r2
            .next_frame()
            .unwrap()
            .map(|f| (f.number, f.ts, f.interface, f.orig_len, f.data.to_vec()));
        assert_eq!(f1, f2, "{name}: frame {n} differs");
        if f1.is_none() {
            break;
        }
        n += 1;
    }
    assert_eq!(n, before.len());
    let names_in: Vec<_> = r1
        .interfaces()
        .iter()
        .map(|i| (i.linktype, i.snaplen, i.name.clone()))
        .collect();
    let names_out: Vec<_> = r2
        .interfaces()
        .iter()
        .map(|i| (i.linktype, i.snaplen, i.name.clone()))
        .collect();
    assert_eq!(names_in, names_out, "{name}: interfaces");
    let _ = std::fs::remove_file(&out);
}

#[test]
fn pcapng_two_interfaces() {
    check(
        "probe-timer-200ms.pcapng",
        vec![1, 2, 300, 634],
        vec![2, 17],
        2,
    );
}

#[test]
fn legacy_pcap() {
    check("syn-retransmit.pcap", vec![14, 30, 31], vec![31, 128], 1);
}
