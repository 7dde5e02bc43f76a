//! Table tests over synthesized flow events: they assert diagnoses; the
//! last two check the rendered prose and JSON.

use super::*;
use pcapsleuth_core::Severity;
use pcapsleuth_flow::{IcmpErrorEvent, SegmentAnalysis, WindowChangeEvent};
use std::net::IpAddr;

use pcapsleuth_core::InterfaceId;
use pcapsleuth_detect::synth::{self, at as ts, frag_needed, segment, C2S, S2C};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

struct Cap {
    d: ProbeTimerStall,
    ctx: FinishContext,
}

impl Cap {
    fn new() -> Self {
        let mut d = ProbeTimerStall::default();
        let (client, server) = synth::v4_pair(50001, 9200);
        let ctx = synth::start_flow(&mut d, client, server);
        Cap { d, ctx }
    }
    fn seg(&mut self, dir: Direction, frame: u64, ms: f64, rel_seq: i64, len: u32, probe: bool) {
        let analysis = SegmentAnalysis {
            zero_window_probe: probe,
            ..Default::default()
        };
        self.d.on_flow_event(&FlowEvent::Segment(SegmentEvent {
            analysis,
            ..segment(dir, frame, ts(ms), u32::MAX - 100, rel_seq, len)
        }));
    }
    fn icmp(&mut self, frame: u64, ms: f64, src: &str, rel_seq: i64) {
        self.d.on_flow_event(&FlowEvent::IcmpError(IcmpErrorEvent {
            interface: InterfaceId(1),
            ..frag_needed(frame, ts(ms), ip(src), synth::v4_pair(50001, 9200), rel_seq)
        }));
    }
    fn window(&mut self, dir: Direction, frame: u64, ms: f64, bytes: u64) {
        self.d
            .on_flow_event(&FlowEvent::WindowChange(WindowChangeEvent {
                stream: StreamId(0),
                dir,
                frame: FrameNo(frame),
                ts: ts(ms),
                old_bytes: None,
                new_bytes: Some(bytes),
                raw: (bytes >> 7) as u16,
            }));
    }
    fn run(&mut self) -> Vec<Diagnosis> {
        self.d.diagnose(&self.ctx)
    }
}

#[test]
fn self_addressed_frag_needed_then_probe0_carrier_is_flagged() {
    // Lab probe-timer-200ms: request 526, ICMPs 529-531 (on lo), carrier 532 207 ms later.
    let mut c = Cap::new();
    c.seg(C2S, 33, 0.0, 1801, 600, false);
    c.seg(S2C, 526, 500.0, 101, 100, false);
    c.icmp(529, 500.44, "192.0.2.10", 2401);
    c.icmp(530, 500.45, "192.0.2.10", 3849);
    c.icmp(531, 500.46, "192.0.2.10", 5297);
    c.seg(C2S, 532, 707.349, 2401, 1348, false);
    c.seg(C2S, 533, 707.40, 3749, 1348, false);
    c.seg(C2S, 534, 707.45, 5097, 1304, false);
    let out = c.run();
    assert_eq!(out.len(), 1, "{out:?}");
    let d = &out[0];
    assert_eq!(d.severity, Severity::Warning);
    assert_eq!(d.stream, 0);
    assert_eq!(d.dir, C2S);
    assert_eq!(d.mtu, Some(1400));
    assert_eq!(d.frames, vec![529, 530, 531, 532]);
    assert_eq!(d.start_ns, ts(500.44).0);
    assert_eq!(d.end_ns, ts(707.349).0);
    let e = &d.evidence;
    assert_eq!(e.carrier_frame, 532);
    assert_eq!(e.trigger_frame, 529);
    assert_eq!(e.trigger_frames, vec![529, 530, 531]);
    assert_eq!(e.trigger, TriggerKind::SelfAddressedFragNeeded);
    assert_eq!(e.gap_ms, 206.909);
    assert_eq!(e.timer, Some(KernelTimer::RtoMin));
    assert_eq!(e.bytes_waited, 4000);
    assert_eq!(e.waiting_rel_seq, Some(2401));
    assert_eq!(e.flow_silent_ms, None);
}

#[test]
fn immediate_resend_after_frag_needed_is_not_flagged_even_out_of_order() {
    // Lab 50003 (IPv6): carrier written before the ICMP but 0.022 ms later in time.
    let mut c = Cap::new();
    c.seg(C2S, 516, 100.022, 2401, 1216, false);
    c.icmp(527, 100.0, "192.0.2.10", 2401);
    assert!(c.run().is_empty());
    // Router frag-needed answered at once (seed 000 request A).
    let mut c = Cap::new();
    c.seg(C2S, 10, 0.0, 1, 1448, false);
    c.icmp(11, 0.1, "192.0.2.1", 1);
    c.seg(C2S, 12, 0.2, 1, 1348, false);
    assert!(c.run().is_empty());
}

#[test]
fn data_sent_in_between_breaks_the_silence() {
    let mut c = Cap::new();
    c.icmp(10, 0.0, "192.0.2.10", 1);
    c.seg(C2S, 11, 50.0, 5000, 100, false);
    c.seg(C2S, 12, 210.0, 1, 1348, false);
    assert!(c.run().is_empty());
}

#[test]
fn stale_icmp_for_acked_bytes_is_ignored() {
    let mut c = Cap::new();
    c.seg(S2C, 5, 0.0, 1, 0, false); // sets snd_una of S2C only
    c.seg(C2S, 6, 0.0, 9000, 100, false);
    // C2S snd_una is 1 in the builder, so craft a quote below it via a negative offset.
    c.icmp(10, 1.0, "192.0.2.10", -5);
    c.seg(C2S, 12, 210.0, -5, 1348, false);
    assert!(c.run().is_empty());
}

#[test]
fn zero_window_reopen_ignored_until_probe_timer() {
    let mut c = Cap::new();
    c.seg(C2S, 10, 0.0, 1, 1000, false);
    c.window(S2C, 11, 0.1, 0);
    c.seg(C2S, 12, 200.0, 1001, 0, true);
    c.seg(C2S, 13, 600.0, 1001, 0, true);
    c.window(S2C, 14, 650.0, 700);
    c.seg(C2S, 15, 1451.0, 1001, 700, false);
    let out = c.run();
    assert_eq!(out.len(), 1, "{out:?}");
    let e = &out[0].evidence;
    assert_eq!(e.trigger, TriggerKind::ZeroWindow);
    assert_eq!(e.trigger_frame, 14);
    assert_eq!(e.carrier_frame, 15);
    assert_eq!(e.timer, Some(KernelTimer::Probe0Backoff));
    assert_eq!(e.waiting_rel_seq, Some(1001));
    assert_eq!(out[0].mtu, None);

    // Data right after the reopening: ordinary flow control, not flagged.
    let mut c = Cap::new();
    c.seg(C2S, 10, 0.0, 1, 1000, false);
    c.window(S2C, 11, 0.1, 0);
    c.seg(C2S, 12, 200.0, 1001, 0, true);
    c.window(S2C, 14, 650.0, 65000);
    c.seg(C2S, 15, 650.2, 1001, 1448, false);
    assert!(c.run().is_empty());
}

#[test]
fn router_frag_needed_burst_and_stall_event() {
    // A router's frag-needed, then the bytes leave 420 ms later; the flow
    // table's stall ends at the carrier.
    let mut c = Cap::new();
    c.seg(C2S, 10, 0.0, 1, 1448, false);
    c.icmp(11, 0.1, "192.0.2.1", 1);
    c.icmp(12, 20.0, "192.0.2.1", 1);
    c.d.on_flow_event(&FlowEvent::Stall(StallEvent {
        stream: StreamId(0),
        dir: C2S,
        start_frame: FrameNo(10),
        start_ts: ts(0.0),
        end_frame: FrameNo(13),
        end_ts: ts(400.1),
        pending_bytes: 1448,
        pending_syn: false,
        ended_by: pcapsleuth_flow::StallEnd::Retransmission,
    }));
    c.seg(C2S, 13, 400.1, 1, 1348, false);
    let out = c.run();
    assert_eq!(out.len(), 1, "{out:?}");
    let e = &out[0].evidence;
    assert_eq!(e.trigger, TriggerKind::FragNeeded);
    assert_eq!(e.trigger_frames, vec![11, 12]);
    assert_eq!(e.timer, Some(KernelTimer::Probe0Backoff));
    assert_eq!(e.flow_silent_ms, Some(400.1));
}

/// The stall table keeps at most its bound of flow silences: past it a
/// diagnosis has no `flow_silent_ms`, and `limits` says how many silences
/// were refused, from which frame; a silence already kept is not refused
/// again.
#[test]
fn the_stall_table_is_bounded_and_says_so() {
    let stall = |end: u64, ms: f64| {
        FlowEvent::Stall(StallEvent {
            stream: StreamId(0),
            dir: C2S,
            start_frame: FrameNo(end - 1),
            start_ts: ts(0.0),
            end_frame: FrameNo(end),
            end_ts: ts(ms),
            pending_bytes: 1448,
            pending_syn: false,
            ended_by: pcapsleuth_flow::StallEnd::Retransmission,
        })
    };
    for (max, silent, limits) in [
        (1, None, vec![(2u64, FrameNo(13))]),
        (3, Some(400.1), vec![]),
    ] {
        let mut c = Cap::new();
        c.d = ProbeTimerStall::with_max_stalls(max);
        c.ctx = synth::start_flow(
            &mut c.d,
            synth::v4_pair(50001, 9200).0,
            synth::v4_pair(50001, 9200).1,
        );
        c.d.on_flow_event(&stall(5, 200.0));
        c.d.on_flow_event(&stall(5, 200.0));
        c.seg(C2S, 10, 0.0, 1, 1448, false);
        c.icmp(11, 0.1, "192.0.2.1", 1);
        c.icmp(12, 20.0, "192.0.2.1", 1);
        c.d.on_flow_event(&stall(13, 400.1));
        c.d.on_flow_event(&stall(13, 400.1));
        c.seg(C2S, 13, 400.1, 1, 1348, false);
        let out = c.run();
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].evidence.flow_silent_ms, silent, "max {max}");
        let got: Vec<(u64, FrameNo)> =
            c.d.limits()
                .iter()
                .map(|b| (b.refused, b.first_frame.unwrap_or(FrameNo(0))))
                .collect();
        assert_eq!(got, limits, "max {max}");
        if let Some(b) = c.d.limits().first() {
            assert!(b.effect.contains("no finding is lost"), "{}", b.effect);
        }
    }
}

// ---- Rendering ----

#[test]
fn render_prose_names_the_sender_the_gap_and_the_timer() {
    let mut c = Cap::new();
    c.icmp(529, 500.44, "192.0.2.10", 2401);
    c.seg(C2S, 532, 707.349, 2401, 1348, false);
    let f = render(&c.run()[0]);
    assert_eq!(
        f.summary,
        "1348 bytes of 192.0.2.10:50001 -> 198.51.100.10:9200 left only 206.9 ms after the host's own frag-needed (MTU 1400) refused them, when a timer fired (TCP_RTO_MIN 200ms): the application waited for the TCP probe/retransmission timer."
    );
    assert!(
        f.remedy.starts_with("Make the MTU consistent"),
        "{}",
        f.remedy
    );
    assert_eq!(f.tcp_stream, Some(0));
    assert_eq!(f.frames, vec![529, 532]);
}

#[test]
fn evidence_json_keys_order_and_nulls() {
    let mut c = Cap::new();
    c.icmp(529, 500.44, "192.0.2.10", 2401);
    c.seg(C2S, 532, 707.349, 2401, 1348, false);
    let f = render(&c.run()[0]);
    assert_eq!(
        serde_json::to_string(&f.evidence).unwrap(),
        concat!(
            r#"{"trigger":"self-addressed frag-needed","trigger_frame":529,"#,
            r#""trigger_frames":[529],"carrier_frame":532,"gap_ms":206.909,"#,
            r#""timer":"TCP_RTO_MIN 200ms","bytes_waited":1348,"waiting_rel_seq":2401,"#,
            r#""flow_silent_ms":null}"#
        )
    );
}

// ---- The wait, from the stall ledger ----

/// Stream 0 (client 192.0.2.10:40000 → server 198.51.100.10:80) through the
/// real stall ledger and the detector, as the pipeline runs them; ms times.
mod ledger {
    use super::*;
    use pcapsleuth_decode::TcpFlags;
    use pcapsleuth_detect::synth::v4_pair;
    use pcapsleuth_flow::FlowStarted;
    use pcapsleuth_ledger::StallLedger;

    pub struct Script {
        pub frame: u64,
        pub events: Vec<FlowEvent>,
    }

    impl Script {
        pub fn new() -> Self {
            let (client, server) = v4_pair(40000, 80);
            Script {
                frame: 0,
                events: vec![FlowEvent::FlowStarted(FlowStarted {
                    stream: StreamId(0),
                    client,
                    server,
                    frame: FrameNo(1),
                    ts: ts(0.0),
                })],
            }
        }

        /// One ACK-flagged segment advertising `window` bytes; its frame.
        pub fn seg(
            &mut self,
            dir: Direction,
            t: f64,
            seq: i64,
            len: u32,
            ack: i64,
            window: u64,
        ) -> u64 {
            self.frame += 1;
            let isn = if dir == C2S { 1000 } else { 5000 };
            self.events.push(FlowEvent::Segment(SegmentEvent {
                rel_ack: Some(ack),
                window_bytes: Some(window),
                window_raw: window.min(65535) as u16,
                ..segment(dir, self.frame, ts(t), isn, seq, len)
            }));
            self.frame
        }

        pub fn last_mut(&mut self) -> &mut SegmentEvent {
            match self.events.last_mut() {
                Some(FlowEvent::Segment(s)) => s,
                _ => unreachable!(),
            }
        }

        /// SYN / SYN-ACK (MSS 1460 both ways) / ACK, seen at the client
        /// (SYN/ACK one RTT after the SYN) or at the server (ACK one RTT
        /// after the SYN/ACK).
        pub fn handshake(&mut self, rtt: f64, server_side: bool) {
            let (sa, a) = if server_side {
                (0.01, rtt + 0.01)
            } else {
                (rtt, rtt + 0.01)
            };
            self.seg(C2S, 0.0, 0, 0, 0, 64000);
            *self.last_mut() = SegmentEvent {
                flags: TcpFlags(TcpFlags::SYN),
                rel_ack: None,
                mss: Some(1460),
                ..*self.last_mut()
            };
            self.seg(S2C, sa, 0, 0, 1, 64000);
            *self.last_mut() = SegmentEvent {
                flags: TcpFlags(TcpFlags::SYN | TcpFlags::ACK),
                mss: Some(1460),
                ..*self.last_mut()
            };
            self.seg(C2S, a, 1, 0, 1, 64000);
        }

        pub fn run(&self) -> Vec<Diagnosis> {
            let mut d = ProbeTimerStall::default();
            let mut l = StallLedger::new();
            for e in &self.events {
                d.on_flow_event(e);
                l.on_event(e);
            }
            let (c, s) = v4_pair(40000, 80);
            let mut ctx = synth::finish_context(c, s);
            ctx.ledger = Some(l.finish());
            d.diagnose(&ctx)
        }
    }
}

#[test]
fn small_window_probe_found_from_the_wait() {
    // (case, probe delay after the small-window ACK ms, window bytes, expected timer)
    let table: &[(&str, f64, u64, Option<KernelTimer>)] = &[
        (
            "probe0 at TCP_RTO_MIN",
            204.0,
            1000,
            Some(KernelTimer::RtoMin),
        ),
        (
            "probe0 backed off",
            404.0,
            700,
            Some(KernelTimer::Probe0Backoff),
        ),
        // Sent at once: ordinary flow control, nobody waited for a timer.
        ("no wait", 0.3, 1000, None),
        // A full segment after the wait is no window-limited probe.
        ("full segment", 204.0, 1448, None),
    ];
    for &(case, delay, window, want) in table {
        let mut s = ledger::Script::new();
        s.handshake(0.2, false);
        s.seg(C2S, 10.0, 1, 1448, 1, 64000);
        s.seg(C2S, 10.01, 1449, 1448, 1, 64000);
        let ack = s.seg(S2C, 10.2, 1, 0, 2897, window);
        let carrier = s.seg(C2S, 10.2 + delay, 2897, window as u32, 1, 64000);
        let got = s.run();
        match want {
            None => assert!(got.is_empty(), "{case}: {got:#?}"),
            Some(timer) => {
                assert_eq!(got.len(), 1, "{case}: {got:#?}");
                let d = &got[0];
                assert_eq!(d.dir, C2S, "{case}");
                assert_eq!(d.severity, Severity::Warning);
                assert_eq!(d.frames, vec![ack, carrier], "{case}");
                let e = &d.evidence;
                assert_eq!(e.trigger, TriggerKind::SmallWindow, "{case}");
                assert_eq!(e.trigger_frame, ack, "{case}");
                assert_eq!(e.carrier_frame, carrier, "{case}");
                assert_eq!(e.timer, Some(timer), "{case}");
                assert_eq!(e.bytes_waited, window as i64, "{case}");
                assert_eq!(e.waiting_rel_seq, None, "{case}");
            }
        }
    }
}

#[test]
fn far_side_view_found_from_the_crossed_rto() {
    // Seen at the client or at the server: the request is re-sent by the
    // client's RTO while the server's answer waits for its probe0 timer;
    // the answer (cut below the 1460-byte MSS) crosses the retransmission.
    // (case, server-side capture, answer bytes, expected)
    let table: &[(&str, bool, u32, bool)] = &[
        ("server side, answer cut to 1348", true, 1348, true),
        ("client side, answer cut to 1348", false, 1348, true),
        // A full-size (or short) answer is a plain spurious RTO, not probe0.
        ("full-size answer", true, 1448, false),
        ("short answer", true, 200, false),
    ];
    for &(case, server_side, answer, want) in table {
        let mut s = ledger::Script::new();
        s.handshake(0.2, server_side);
        let req = s.seg(C2S, 10.0, 1, 100, 1, 64000);
        let rto = s.seg(C2S, 10.0 + 207.0, 1, 100, 1, 64000);
        s.last_mut().analysis.retransmission = true;
        let ans = s.seg(S2C, 10.0 + 207.1, 1, answer, 101, 64000);
        let got = s.run();
        if !want {
            assert!(got.is_empty(), "{case}: {got:#?}");
            continue;
        }
        assert_eq!(got.len(), 1, "{case}: {got:#?}");
        let d = &got[0];
        assert_eq!(d.dir, S2C, "{case}: the answer waited");
        assert_eq!(d.frames, vec![req, rto, ans], "{case}");
        let e = &d.evidence;
        assert_eq!(e.trigger, TriggerKind::FarSide, "{case}");
        assert_eq!(e.trigger_frame, rto, "{case}");
        assert_eq!(e.carrier_frame, ans, "{case}");
        assert_eq!(e.timer, Some(KernelTimer::RtoMin), "{case}");
        assert_eq!(e.bytes_waited, i64::from(answer), "{case}");
    }
}

#[test]
fn ledger_wait_covered_by_a_trigger_is_reported_once() {
    // The self-addressed frag-needed case: the trigger rule finds it, the
    // ledger's probe0 entry for the same wait adds nothing.
    let mut s = ledger::Script::new();
    s.handshake(0.2, false);
    s.seg(C2S, 10.0, 1, 100, 1, 64000);
    s.seg(S2C, 10.2, 1, 0, 101, 64000);
    s.frame += 1;
    s.events.push(FlowEvent::IcmpError(IcmpErrorEvent {
        interface: InterfaceId(1),
        ..frag_needed(
            6,
            ts(500.44),
            ip("192.0.2.10"),
            synth::v4_pair(40000, 80),
            101,
        )
    }));
    let carrier = s.seg(C2S, 707.349, 101, 1348, 1, 64000);
    let got = s.run();
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(
        got[0].evidence.trigger,
        TriggerKind::SelfAddressedFragNeeded
    );
    assert_eq!(got[0].evidence.carrier_frame, carrier);
}

// ---- FlowEnded and memory ----

/// Three captures' worth of triggers: self-addressed frag-needed, a missed
/// zero-window re-opening, a router's frag-needed burst with a stall.
fn scenarios() -> Vec<fn(&mut Cap)> {
    vec![
        |c| {
            c.seg(C2S, 33, 0.0, 1801, 600, false);
            c.icmp(529, 500.44, "192.0.2.10", 2401);
            c.icmp(530, 500.45, "192.0.2.10", 3849);
            c.seg(C2S, 532, 707.349, 2401, 1348, false);
            c.seg(C2S, 533, 707.40, 3749, 1348, false);
        },
        |c| {
            c.seg(C2S, 10, 0.0, 1, 1000, false);
            c.window(S2C, 11, 0.1, 0);
            c.seg(C2S, 12, 200.0, 1001, 0, true);
            c.window(S2C, 14, 650.0, 700);
            c.seg(C2S, 15, 1451.0, 1001, 700, false);
        },
        |c| {
            c.seg(C2S, 10, 0.0, 1, 1448, false);
            c.icmp(11, 0.1, "192.0.2.1", 1);
            c.d.on_flow_event(&FlowEvent::Stall(StallEvent {
                stream: StreamId(0),
                dir: C2S,
                start_frame: FrameNo(10),
                start_ts: ts(0.0),
                end_frame: FrameNo(13),
                end_ts: ts(400.1),
                pending_bytes: 1448,
                pending_syn: false,
                ended_by: pcapsleuth_flow::StallEnd::Retransmission,
            }));
            c.seg(C2S, 13, 400.1, 1, 1348, false);
        },
    ]
}

#[test]
fn flow_ended_diagnoses_the_stream_and_drops_it() {
    for build in scenarios() {
        let mut c = Cap::new();
        build(&mut c);
        let without = c.run();
        assert_eq!(without.len(), 1, "{without:?}");
        let mut c = Cap::new();
        build(&mut c);
        c.d.on_flow_event(&synth::flow_ended(StreamId(0), 9999, ts(5000.0)));
        assert_eq!(c.d.active_streams(), 0);
        assert_eq!(c.run(), without);
    }
}

#[test]
fn one_syn_streams_keep_no_state() {
    let mut d = ProbeTimerStall::default();
    for i in 0..10_000u64 {
        for ev in synth::syn_only(i, i + 1, ts(i as f64)) {
            d.on_flow_event(&ev);
        }
    }
    assert_eq!((d.active_streams(), d.state_bytes()), (0, 0));
}
