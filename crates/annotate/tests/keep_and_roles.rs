//! `annotate` keeps what the input already carried (section, packet comments,
//! EPB flags), writes a per-frame role comment, and reports a truncated
//! input. tshark checks need tshark (skipped locally without it, required
//! under CI via `shared_with_tshark` / `in_ci`).

use pcapsleuth_analyze::{analyze_path, AnalyzeOptions};
use pcapsleuth_annotate::{annotate, options};
use pcapsleuth_ingest::CaptureReader;
use pcapsleuth_testkit::capture::{Interface, Pcapng};
use pcapsleuth_testkit::{in_ci, repo_root, shared_with_tshark, tshark, tshark_lines};
use std::path::Path;

/// `frame.number<TAB>frame.comment` of every commented frame.
fn comments(file: &Path) -> Vec<String> {
    tshark_lines(
        file,
        &[
            "-Y",
            "frame.comment",
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "frame.comment",
        ],
    )
}

fn have_tshark() -> bool {
    if tshark().is_some() {
        return true;
    }
    assert!(!in_ci(), "tshark is required under CI");
    println!("SKIP: tshark not installed");
    false
}

#[test]
fn existing_packet_and_section_comments_survive() {
    let dir = pcapsleuth_testkit::scratch("annotate-keep");
    let Some(shared) = shared_with_tshark() else {
        return;
    };
    let input = shared.join("captures/ntop__nDPI/tests/cfgs/default/pcap/rtp.pcapng");
    if !input.is_file() {
        assert!(!in_ci(), "{} missing", input.display());
        return;
    }
    let before = comments(&input);
    assert!(
        before.len() >= 2,
        "rtp.pcapng has packet comments: {before:?}"
    );
    let report = analyze_path(&input, &AnalyzeOptions::default());
    let out = dir.join("rtp.annotated.pcapng");
    let st = annotate(&input, &report, &out).expect("annotate");
    assert!(st.kept_options_packets >= 2);
    let after = comments(&out);
    for line in &before {
        let (n, text) = line.split_once('\t').unwrap();
        let kept = after
            .iter()
            .find(|l| l.split('\t').next() == Some(n))
            .unwrap_or_else(|| panic!("frame {n} lost its comment: {after:?}"));
        assert!(kept.contains(text), "frame {n}: {kept} lacks {text}");
    }
    // The section comment survives (capinfos prints it; our SHB parser too).
    let shb_in = CaptureReader::open(&input).unwrap().header_blocks()[0].clone();
    let shb_out = CaptureReader::open(&out).unwrap().header_blocks()[0].clone();
    let c_in: Vec<_> = options::section_options(&shb_in)
        .into_iter()
        .filter(|(c, _)| *c == options::OPT_COMMENT)
        .collect();
    let c_out: Vec<_> = options::section_options(&shb_out)
        .into_iter()
        .filter(|(c, _)| *c == options::OPT_COMMENT)
        .collect();
    assert!(!c_in.is_empty());
    assert_eq!(c_in, c_out, "section comments");
    let _ = std::fs::remove_file(&out);
}

/// A TCP SYN over Ethernet/IPv4 from 10.0.0.1:1000 to 10.0.0.2:80.
fn syn_frame() -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x08, 0x00]);
    let ip = [
        0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    f.extend_from_slice(&ip);
    let tcp = [
        0x03, 0xe8, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
    ];
    f.extend_from_slice(&tcp);
    f
}

fn flagged_capture(big_endian: bool) -> Vec<u8> {
    let mut ng = Pcapng::with_byte_order(big_endian);
    ng.interface(&Interface::new(1).name("eth0"));
    let data = syn_frame();
    let w32 = |v: u32| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut body = Vec::new();
    for v in [0, 0, 1_000_000, data.len() as u32, data.len() as u32] {
        body.extend_from_slice(&w32(v));
    }
    body.extend_from_slice(&data);
    while body.len() % 4 != 0 {
        body.push(0);
    }
    body.extend(ng.option(1, b"seen by the user"));
    body.extend(ng.option(2, &w32(0x0000_0002))); // outbound
    body.extend(ng.option(0, &[]));
    ng.block(6, &body);
    ng.epb(0, 2_000_000, &data, data.len() as u32);
    ng.into_bytes()
}

#[test]
fn epb_flags_and_comment_survive_in_both_byte_orders() {
    let dir = pcapsleuth_testkit::scratch("annotate-keep");
    for be in [false, true] {
        let input = dir.join(format!("flags-{be}.pcapng"));
        std::fs::write(&input, flagged_capture(be)).unwrap();
        let report = analyze_path(&input, &AnalyzeOptions::default());
        let out = dir.join(format!("flags-{be}.out.pcapng"));
        let st = annotate(&input, &report, &out).expect("annotate");
        assert_eq!(st.kept_options_packets, 1);
        let mut r = CaptureReader::open(&out).unwrap();
        let _ = r.next_frame().unwrap().unwrap();
        let opts = options::packet_options(r.record_bytes());
        // The input's own options first, in order; the analysis's comment
        // (the two SYNs make a syn-retransmit finding) after them.
        assert_eq!(
            opts.get(..2),
            Some(&[(1, b"seen by the user".to_vec()), (2, vec![2, 0, 0, 0])][..]),
            "big_endian={be}"
        );
        if have_tshark() {
            let args = ["-T", "fields", "-e", "frame.packet_flags_direction"];
            let flags = tshark_lines(&out, &args);
            // Direction 2 = outbound (pcapng spec §4.3.1, epb_flags bits 0-1).
            assert_eq!(flags.first().map(|s| s.trim()), Some("0x00000002"));
            assert_eq!(
                flags,
                tshark_lines(&input, &args),
                "as tshark read the input"
            );
        }
    }
}

#[test]
fn each_cited_frame_says_its_role() {
    let dir = pcapsleuth_testkit::scratch("annotate-keep");
    if !have_tshark() {
        return;
    }
    let input = repo_root().join("fixtures/captures/syn-drops.pcap");
    let report = analyze_path(&input, &AnalyzeOptions::default());
    let out = dir.join("syn-drops.annotated.pcapng");
    annotate(&input, &report, &out).expect("annotate");
    let c = comments(&out);
    let line = |n: u64| {
        c.iter()
            .find(|l| l.split('\t').next() == Some(&n.to_string()))
            .cloned()
            .unwrap_or_default()
    };
    // The first finding: SYN 11, its retry 42 after 1006 ms, SYN-ACK 43.
    assert!(
        line(11).contains("syn-retransmit: SYN 1 of 2, first attempt. Connection"),
        "{}",
        line(11)
    );
    assert!(
        line(42).contains("syn-retransmit: SYN retry 2 of 2, +1006 ms"),
        "{}",
        line(42)
    );
    assert!(
        line(43).contains("SYN-ACK, +1006 ms after the first SYN"),
        "{}",
        line(43)
    );
    // Only the first frame carries the summary.
    assert!(!line(42).contains("Connection"), "{}", line(42));
    let _ = std::fs::remove_file(&out);
}

#[test]
fn frag_needed_and_dns_roles() {
    let dir = pcapsleuth_testkit::scratch("annotate-keep");
    if !have_tshark() {
        return;
    }
    let root = repo_root().join("fixtures/captures");
    let input = root.join("self-frag-needed.pcapng");
    let report = analyze_path(&input, &AnalyzeOptions::default());
    let out = dir.join("self-frag.annotated.pcapng");
    annotate(&input, &report, &out).expect("annotate");
    let all = comments(&out).join("\n");
    assert!(all.contains("Packet Too Big, MTU 1400 (2 of 10)"), "{all}");
    assert!(all.contains("frag-needed, MTU 1400 (1 of 10)"), "{all}");

    let input = root.join("dns-timeout-any.pcapng");
    let report = analyze_path(&input, &AnalyzeOptions::default());
    let out = dir.join("dns.annotated.pcapng");
    annotate(&input, &report, &out).expect("annotate");
    let all = comments(&out).join("\n");
    assert!(
        all.contains("dns-timeout: DNS AAAA query re-sent after 2002 ms"),
        "{all}"
    );
    assert!(all.contains("never answered"), "{all}");
}

#[test]
fn truncated_input_is_reported() {
    let dir = pcapsleuth_testkit::scratch("annotate-keep");
    let input = repo_root().join("fixtures/captures/syn-drops.pcap");
    let bytes = std::fs::read(&input).unwrap();
    let cut = dir.join("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() - 30]).unwrap();
    let report = analyze_path(&cut, &AnalyzeOptions::default());
    let out = dir.join("cut.annotated.pcapng");
    let st = annotate(&cut, &report, &out).expect("annotate");
    let why = st.stopped.clone().expect("truncation reported");
    assert!(why.contains("cut short"), "{why}");
    let line = st.summary(&out, 0);
    assert!(line.contains("warning: the input is truncated"), "{line}");
    // A whole file reports nothing.
    let st = annotate(
        &input,
        &analyze_path(&input, &AnalyzeOptions::default()),
        &out,
    )
    .unwrap();
    assert_eq!(st.stopped, None);
    let _ = std::fs::remove_file(&out);
}

#[test]
fn cross_interface_loss_roles_name_the_interfaces() {
    let dir = pcapsleuth_testkit::scratch("annotate-keep");
    if !have_tshark() {
        return;
    }
    let input = repo_root().join("fixtures/captures/cross-interface-loss.pcapng");
    let report = analyze_path(&input, &AnalyzeOptions::default());
    let out = dir.join("cil.annotated.pcapng");
    annotate(&input, &report, &out).expect("annotate");
    let c = comments(&out);
    // Frame 44: the lost first SYN; 45 its retransmission on r1c; 65 on r1s.
    let line = |n: &str| {
        c.iter()
            .find(|l| l.split('\t').next() == Some(n))
            .cloned()
            .unwrap_or_default()
    };
    assert!(
        line("44").contains("cross-interface-loss: lost between r1c and r1s"),
        "{}",
        line("44")
    );
    assert!(
        line("44").contains("syn-retransmit: SYN 1 of 2"),
        "{}",
        line("44")
    );
    assert!(
        line("45").contains("retransmission entered on r1c, loss cost 1027 ms"),
        "{}",
        line("45")
    );
    assert!(
        line("65").contains("retransmission left on r1s"),
        "{}",
        line("65")
    );
    let _ = std::fs::remove_file(&out);
}
