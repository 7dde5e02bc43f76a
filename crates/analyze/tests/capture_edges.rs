//! What the report says about the capture itself: the unacknowledged-segment
//! cap, and captures read only in part (also in a merged set).

use pcapsleuth_analyze::{analyze_merged, analyze_path, AnalyzeOptions};
use pcapsleuth_flow::FlowConfig;
use pcapsleuth_report::WarningKindReport;
use pcapsleuth_testkit::fixtures_dir;

#[test]
fn analyze_warns_when_the_unacked_segment_cap_is_hit() {
    let path = fixtures_dir().join("zero-window.pcap");
    let full = analyze_path(&path, &AnalyzeOptions::default());
    assert!(
        full.warnings
            .iter()
            .all(|w| w.kind != WarningKindReport::UnackedSegmentCap),
        "{:?}",
        full.warnings
    );
    let opts = AnalyzeOptions {
        flow_config: FlowConfig {
            max_unacked_segments: 2,
            ..FlowConfig::default()
        },
        ..AnalyzeOptions::default()
    };
    let capped = analyze_path(&path, &opts);
    let w: Vec<_> = capped
        .warnings
        .iter()
        .filter(|w| w.kind == WarningKindReport::UnackedSegmentCap)
        .collect();
    assert_eq!(w.len(), 1, "{:?}", capped.warnings);
    assert!(
        w[0].message
            .contains("cap (2 per direction) was hit in 3 flows (tcp.stream 0, 1, 2)"),
        "{}",
        w[0].message
    );
    assert_eq!((w[0].offset, w[0].frame), (0, None));
    // Not a read problem.
    assert!(capped.incomplete.is_none() && capped.error.is_none());
}

#[test]
fn a_capture_read_only_in_part_says_what_and_where() {
    let src = fixtures_dir().join("syn-drops.pcap");
    let dir = pcapsleuth_testkit::scratch("edges");
    let cut = dir.join("cut.pcap");
    std::fs::write(&cut, &std::fs::read(&src).unwrap()[..5000]).unwrap();
    let r = analyze_path(&cut, &AnalyzeOptions::default());
    let inc = r.incomplete.as_ref().expect("incomplete");
    assert_eq!(inc.kind, WarningKindReport::TruncatedRecord);
    assert_eq!((inc.offset, inc.frame), (4924, Some(55)));
    assert_eq!(r.packets, 54);
    assert!(r.error.is_none());
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["incomplete"]["offset"], 4924);
    // A complete capture has no `incomplete` key at all.
    let whole = analyze_path(&src, &AnalyzeOptions::default());
    assert!(whole.incomplete.is_none());
    assert!(serde_json::to_value(&whole)
        .unwrap()
        .get("incomplete")
        .is_none());
    // In a merged set: the file's own entry and the set say so.
    let m = analyze_merged(&[src.clone(), cut.clone()], &AnalyzeOptions::default());
    assert!(m.sources[0].incomplete.is_none());
    assert_eq!(
        m.sources[1].incomplete.as_ref().map(|w| w.offset),
        Some(4924)
    );
    let set = m.incomplete.as_ref().expect("set incomplete");
    assert!(
        set.message.starts_with(&cut.display().to_string()),
        "{}",
        set.message
    );
}

/// `--max-flows`: past the cap the least recently active streams are retired
/// early and the report says so (one `flow_cap` warning with the count), in
/// the single-threaded and the staged pipeline alike; below it, no warning.
#[test]
fn analyze_warns_when_the_flow_cap_is_hit() {
    let path = fixtures_dir().join("syn-drops.pcap");
    let full = analyze_path(&path, &AnalyzeOptions::default());
    assert!(full.tcp_streams >= 3, "{}", full.tcp_streams);
    assert!(
        full.warnings
            .iter()
            .all(|w| w.kind != WarningKindReport::FlowCap),
        "{:?}",
        full.warnings
    );
    for threads in [1, 2] {
        let opts = AnalyzeOptions {
            flow_config: FlowConfig {
                max_flows: 1,
                ..FlowConfig::default()
            },
            capture_threads: threads,
            ..AnalyzeOptions::default()
        };
        let capped = analyze_path(&path, &opts);
        let w: Vec<_> = capped
            .warnings
            .iter()
            .filter(|w| w.kind == WarningKindReport::FlowCap)
            .collect();
        assert_eq!(w.len(), 1, "{:?}", capped.warnings);
        // One live stream at a time: 31 streams whose SYN retries interleave,
        // so a stream is evicted, revived by its next retry and evicted again
        // (each eviction counted).
        assert!(
            w[0].message.contains("the flow cap (1 live TCP streams")
                && w[0].message.contains("peak 1 live"),
            "{}",
            w[0].message
        );
        assert!(
            w[0].message
                .contains("was hit: 61 streams were retired early"),
            "{}",
            w[0].message
        );
        assert_eq!((w[0].offset, w[0].frame), (0, None));
        assert_eq!(capped.tcp_streams, full.tcp_streams);
    }
}

/// The capture-wide memory bounds of detectors (`Detector::limits`): a
/// detector that stops keeping what it needs says so, with the count and the
/// first frame it did not examine, in the single-threaded and the staged
/// pipeline alike; under its bound it says nothing. Real captures, bounds
/// lowered through each detector's constructor.
#[test]
fn detectors_report_the_bounds_they_reach() {
    use pcapsleuth_analyze::{DetectorLimit, FlowDetail, Pipeline, StagedPipeline};
    use pcapsleuth_core::FrameNo;
    use pcapsleuth_detect::{Bound, Detector};
    use pcapsleuth_ingest::CaptureReader;

    fn limits(file: &str, make: &dyn Fn() -> Box<dyn Detector>) -> Vec<Vec<DetectorLimit>> {
        let path = fixtures_dir().join(file);
        let mut out = Vec::new();
        for threads in [1, 2] {
            let mut reader = CaptureReader::open(&path).expect("fixture opens");
            let o = if threads == 1 {
                let mut pipe = Pipeline::with_detectors(FlowConfig::default(), vec![make()]);
                assert!(pcapsleuth_analyze::drive(&mut reader, &mut pipe, &mut ()).is_none());
                pipe.finish(reader.interfaces(), &mut ())
            } else {
                let mut pipe = StagedPipeline::start(
                    FlowConfig::default(),
                    vec![make()],
                    1,
                    FlowDetail::FindingsOnly,
                )
                .expect("threads start");
                while let Some(frame) = reader.next_frame().expect("fixture reads") {
                    pipe.push(&frame);
                }
                pipe.finish(reader.interfaces())
            };
            out.push(o.detector_limits);
        }
        assert_eq!(out[0], out[1], "{file}: staged differs");
        out
    }
    let one = |detector, what, limit, refused, first| {
        vec![DetectorLimit {
            detector,
            bound: Bound {
                what,
                limit,
                refused,
                first_frame: Some(FrameNo(first)),
                effect: Bound::DEFAULT_EFFECT,
                scope: Bound::DEFAULT_SCOPE,
            },
        }]
    };
    type Make = dyn Fn() -> Box<dyn Detector>;
    let dns_default: &Make = &|| Box::new(pcapsleuth_dns_timeout::DnsTimeout::default());
    let cil_default: &Make =
        &|| Box::new(pcapsleuth_cross_interface_loss::CrossInterfaceLoss::default());
    let dack_default: &Make =
        &|| Box::new(pcapsleuth_delayed_ack_stall::DelayedAckStall::default());
    // Under the default bounds: nothing.
    for (file, make) in [
        ("dns-timeout-any.pcapng", dns_default),
        ("cross-interface-loss.pcapng", cil_default),
        ("two-interfaces.pcapng", cil_default),
        ("delayed-ack-stall-server.pcap", dack_default),
    ] {
        assert_eq!(limits(file, make)[0], vec![], "{file}");
    }
    // 88 DNS messages (tshark: `dns && dns.flags.opcode==0 &&
    // dns.count.queries==1`) within a minute, concluded 4 at a time: the
    // chunk cannot hold the lookups in progress, so the oldest are
    // concluded early, and the report says how many of them were still
    // unanswered (14).
    let dns = limits("dns-timeout-any.pcapng", &|| {
        Box::new(pcapsleuth_dns_timeout::DnsTimeout::with_chunk(4))
    });
    assert_eq!(
        dns[0],
        vec![DetectorLimit {
            detector: "dns-timeout",
            bound: Bound {
                what: "DNS messages of lookups in progress",
                limit: 2,
                refused: 14,
                first_frame: Some(FrameNo(1)),
                effect: "it concluded that many unanswered lookups before their re-send could come (and answered ones early too), and read a later re-send of any of them as a lookup of its own",
                scope: "at a time",
            },
        }]
    );
    // 300 frames; frames 4-13 recorded (1-3 are ICMPv6 multicast listener
    // reports: no TCP or UDP, no record); every later frame refused.
    let cil = |max, give_up| -> Box<Make> {
        Box::new(move || {
            Box::new(pcapsleuth_cross_interface_loss::CrossInterfaceLoss::with_limits(max, give_up))
        })
    };
    assert_eq!(
        limits("cross-interface-loss.pcapng", &*cil(10, 250_000))[0],
        one("cross-interface-loss", "recorded packets", 10, 287, 14)
    );
    // dumpcap wrote 10 and more frames of one interface first: recording
    // gave up on a "single-port" capture, then the second interface showed
    // (262 frames).
    assert_eq!(
        limits("two-interfaces.pcapng", &*cil(2_000_000, 10))[0],
        one(
            "cross-interface-loss",
            "packets recorded while the capture showed one interface",
            10,
            252,
            11
        )
    );
    // One interface only: giving up is no limit (the detector needs two).
    assert_eq!(limits("syn-drops.pcap", &*cil(2_000_000, 5))[0], vec![]);
    // 19 ACKs that ended a silence on one live stream, the first remembered
    // (a bound on what is held at a time: an ended stream's pairs go).
    let dack = limits("delayed-ack-stall-server.pcap", &|| {
        Box::new(pcapsleuth_delayed_ack_stall::DelayedAckStall::with_max_remembered(1))
    });
    let mut at_a_time = one(
        "delayed-ack-stall",
        "ACK-then-segment pairs after a silence",
        1,
        18,
        41,
    );
    at_a_time[0].bound.scope = "at a time";
    assert_eq!(dack[0], at_a_time);
}

/// The detectors that keep a value per candidate frame for the stall
/// ledger's entries to name (`probe-timer-stall`'s flow silences,
/// `delayed-ack-stall`'s ACK → next segment pairs) drop those of a stream
/// once the ledger has concluded it and the flow table has ended it
/// (`Detector::on_ledger_concluded`, `LedgerFrames`): over forty closed
/// connections one after the other, each with one 300 ms silence with data
/// pending ended by a pure ACK, a bound of 5 is never reached, in the
/// single-threaded and the staged pipeline alike; when streams never end
/// (no close delay, no idle timeout) the same bound is reached, and the
/// findings are the same.
#[test]
fn ledger_readers_forget_what_ended_streams_cannot_name() {
    use pcapsleuth_analyze::{DetectorLimit, FlowDetail, Pipeline, PipelineOutput, StagedPipeline};
    use pcapsleuth_detect::Detector;
    use pcapsleuth_ingest::CaptureReader;
    use pcapsleuth_testkit::capture::Pcap;
    use pcapsleuth_testkit::packet::{ethernet, ipv4_full, tcp_full, HOST_A, HOST_B};
    const MS: i64 = 1_000_000;
    let (syn, ack, psh, fin) = (0x002u16, 0x010u16, 0x008u16, 0x001u16);
    let mut pcap = Pcap::new(1).nanoseconds();
    let data = [b'x'; 100];
    for k in 0..40u32 {
        let t0 = 1_700_000_000_000 * MS + i64::from(k) * 10_000 * MS;
        let port = 40_000 + k as u16;
        let (c, s) = (1_000_000 * (k + 1), 7_000_000 * (k + 1));
        let mut seg =
            |at_ms: i64, to_server: bool, seq: u32, acked: u32, flags: u16, payload: &[u8]| {
                let (src, dst, sp, dp) = if to_server {
                    (HOST_A, HOST_B, port, 80)
                } else {
                    (HOST_B, HOST_A, 80, port)
                };
                let t = tcp_full(sp, dp, seq, acked, flags, &[], payload);
                pcap.packet(
                    t0 + at_ms * MS,
                    &ethernet(0x0800, &ipv4_full(src, dst, 6, 1, 0x4000, &[], &t)),
                );
            };
        seg(0, true, c, 0, syn, &[]);
        seg(1, false, s, c + 1, syn | ack, &[]);
        seg(2, true, c + 1, s + 1, ack, &[]);
        seg(10, true, c + 1, s + 1, psh | ack, &data);
        seg(20, false, s + 1, c + 101, ack, &[]);
        seg(30, true, c + 101, s + 1, psh | ack, &data);
        // 300 ms with 100 bytes unacknowledged; the pure ACK ends it.
        seg(330, false, s + 1, c + 201, ack, &[]);
        seg(340, true, c + 201, s + 1, fin | ack, &[]);
        seg(341, false, s + 1, c + 202, fin | ack, &[]);
        seg(342, true, c + 202, s + 2, ack, &[]);
    }
    let dir = std::env::temp_dir().join(format!("pcapsleuth-ledger-frames-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("closed-one-after-another.pcap");
    pcap.write(&path).expect("written");
    let never = FlowConfig {
        closed_quiet_ns: i64::MAX,
        closed_keep_ns: i64::MAX,
        idle_timeout_ns: i64::MAX,
        ..FlowConfig::default()
    };
    let run = |cfg: FlowConfig, threads: usize| -> PipelineOutput {
        let dets = || -> Vec<Box<dyn Detector>> {
            vec![
                Box::new(pcapsleuth_probe_timer_stall::ProbeTimerStall::with_max_stalls(5)),
                Box::new(pcapsleuth_delayed_ack_stall::DelayedAckStall::with_max_remembered(5)),
                // Not a ledger reader: the staged pipeline puts it elsewhere.
                Box::new(pcapsleuth_zero_window::ZeroWindow::default()),
            ]
        };
        let mut reader = CaptureReader::open(&path).expect("capture opens");
        if threads == 1 {
            let mut pipe = Pipeline::with_detectors(cfg, dets());
            assert!(pcapsleuth_analyze::drive(&mut reader, &mut pipe, &mut ()).is_none());
            pipe.finish(reader.interfaces(), &mut ())
        } else {
            let mut pipe =
                StagedPipeline::start(cfg, dets(), threads - 1, FlowDetail::FindingsOnly)
                    .expect("threads start");
            while let Some(frame) = reader.next_frame().expect("capture reads") {
                pipe.push(&frame);
            }
            pipe.finish(reader.interfaces())
        }
    };
    let refused = |o: &PipelineOutput| -> Vec<(&'static str, u64)> {
        o.detector_limits
            .iter()
            .map(|l: &DetectorLimit| (l.detector, l.bound.refused))
            .collect()
    };
    let ended = run(FlowConfig::default(), 1);
    assert_eq!(
        refused(&ended),
        vec![],
        "streams that end free their values"
    );
    for threads in [2, 3] {
        let o = run(FlowConfig::default(), threads);
        assert_eq!(refused(&o), vec![], "{threads} threads");
        assert_eq!(o.findings, ended.findings);
    }
    let kept = run(never, 1);
    assert_eq!(
        refused(&kept),
        vec![("probe-timer-stall", 35), ("delayed-ack-stall", 35)],
        "without stream ends every silence is held"
    );
    assert_eq!(kept.findings, ended.findings);
    std::fs::remove_dir_all(&dir).ok();
}
