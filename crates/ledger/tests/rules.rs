//! One table test per attribution rule, on synthetic flow events
//! (`pcapsleuth_detect::synth`: stream 0, client 192.0.2.10 → server
//! 198.51.100.10, times in ms from `T0`).

use pcapsleuth_core::Direction;
use pcapsleuth_core::{FrameNo, StreamId};
use pcapsleuth_decode::TcpFlags;
use pcapsleuth_detect::synth::{at, frag_needed, segment, v4_pair, C2S, S2C};
use pcapsleuth_flow::{FlowEvent, FlowStarted, SegmentEvent};
use pcapsleuth_ledger::{LedgerReport, StallCause, StallEntry, StallLedger, TimerKind};

const ISN_C: u32 = 1000;
const ISN_S: u32 = 5000;
const SYN: u16 = TcpFlags::SYN;
const ACK: u16 = TcpFlags::ACK;

/// A script of segments: (direction, ms, rel_seq, len, rel_ack, flags, window bytes).
struct Script {
    frame: u64,
    events: Vec<FlowEvent>,
}

impl Script {
    fn new() -> Self {
        let (client, server) = v4_pair(40000, 80);
        Script {
            frame: 0,
            events: vec![FlowEvent::FlowStarted(FlowStarted {
                stream: StreamId(0),
                client,
                server,
                frame: FrameNo(1),
                ts: at(0.0),
            })],
        }
    }

    fn next_frame(&mut self) -> u64 {
        self.frame += 1;
        self.frame
    }

    /// One segment; `ack` is the relative ACK (None: no ACK flag).
    fn seg(
        &mut self,
        dir: Direction,
        t: f64,
        seq: i64,
        len: u32,
        ack: Option<i64>,
    ) -> &mut SegmentEvent {
        let f = self.next_frame();
        let isn = if dir == C2S { ISN_C } else { ISN_S };
        let s = SegmentEvent {
            flags: TcpFlags(if ack.is_some() { ACK } else { 0 }),
            rel_ack: ack,
            ..segment(dir, f, at(t), isn, seq, len)
        };
        self.events.push(FlowEvent::Segment(s));
        match self.events.last_mut() {
            Some(FlowEvent::Segment(s)) => s,
            _ => unreachable!(),
        }
    }

    /// SYN at `t`, SYN/ACK at `t + rtt`, ACK at `t + rtt + ack_after` (ms).
    fn handshake(&mut self, t: f64, rtt: f64, ack_after: f64) {
        self.syn(t);
        let sa = self.seg(S2C, t + rtt, 0, 0, Some(1));
        sa.flags = TcpFlags(SYN | ACK);
        sa.mss = Some(1460);
        self.seg(C2S, t + rtt + ack_after, 1, 0, Some(1));
    }

    fn syn(&mut self, t: f64) {
        let s = self.seg(C2S, t, 0, 0, None);
        s.flags = TcpFlags(SYN);
        s.mss = Some(1460);
    }

    fn run(&self) -> LedgerReport {
        let mut l = StallLedger::new();
        for e in &self.events {
            l.on_event(e);
        }
        l.finish()
    }
}

fn stalls(r: &LedgerReport) -> Vec<StallEntry> {
    r.streams.iter().flat_map(|s| s.stalls.clone()).collect()
}

fn only(r: &LedgerReport) -> StallEntry {
    let s = stalls(r);
    assert_eq!(s.len(), 1, "{s:#?}");
    s[0].clone()
}

#[test]
fn syn_retransmission_timeout_ladder() {
    // (SYN times ms, expected per step ms)
    let table: &[(&[f64], &[f64])] = &[
        (&[0.0, 1016.0], &[1000.0]),
        (&[0.0, 1016.0, 3032.0], &[1000.0, 2000.0]),
        (&[0.0, 1016.0, 2040.0, 3064.0], &[1000.0, 1000.0, 1000.0]),
        (&[0.0, 2950.0], &[3000.0]),
    ];
    for (syns, expected) in table {
        let mut s = Script::new();
        for &t in *syns {
            s.syn(t);
        }
        let last = syns[syns.len() - 1];
        let sa = s.seg(S2C, last + 0.2, 0, 0, Some(1));
        sa.flags = TcpFlags(SYN | ACK);
        let r = s.run();
        let got = stalls(&r);
        assert_eq!(got.len(), expected.len(), "{syns:?}: {got:#?}");
        for (i, (e, want)) in got.iter().zip(expected.iter()).enumerate() {
            assert_eq!(e.cause, StallCause::SynTimeout);
            assert_eq!(e.dir, C2S);
            assert_eq!(e.evidence.timer, Some(TimerKind::SynRto));
            assert_eq!(e.evidence.step, Some(i as u32 + 1));
            assert_eq!(e.evidence.expected_ms, Some(*want), "{syns:?} step {i}");
            assert_eq!(e.evidence.matches_timer, Some(true));
        }
    }
}

#[test]
fn data_rto_backoff_steps() {
    let mut s = Script::new();
    s.handshake(0.0, 0.2, 0.01);
    s.seg(C2S, 10.0, 1, 100, Some(1));
    s.seg(C2S, 225.0, 1, 100, Some(1));
    s.seg(C2S, 655.0, 1, 100, Some(1));
    s.seg(S2C, 655.3, 1, 0, Some(101));
    let r = s.run();
    let got = stalls(&r);
    assert_eq!(got.len(), 2, "{got:#?}");
    assert!(got.iter().all(|e| e.cause == StallCause::DataRto));
    assert_eq!(got[0].evidence.step, Some(1));
    assert_eq!(got[1].evidence.step, Some(2));
    assert_eq!(got[1].evidence.expected_ms, Some(430.0));
    assert_eq!(got[1].evidence.matches_timer, Some(true));
}

#[test]
fn tail_loss_probe_resends_the_last_segment() {
    let mut s = Script::new();
    s.handshake(0.0, 10.0, 0.01);
    s.seg(C2S, 20.0, 1, 1000, Some(1));
    s.seg(C2S, 20.1, 1001, 1000, Some(1));
    // No ACK: the probe re-sends the last segment, not SND.UNA.
    s.seg(C2S, 70.0, 1001, 1000, Some(1));
    let e = only(&s.run());
    assert_eq!(e.cause, StallCause::TailLossProbe);
    assert_eq!(e.evidence.timer, Some(TimerKind::Tlp));
}

#[test]
fn probe0_behind_a_zero_window_then_receiver_zero_window() {
    let mut s = Script::new();
    s.handshake(0.0, 0.2, 0.01);
    s.seg(C2S, 10.0, 1, 1000, Some(1));
    let z = s.seg(S2C, 10.2, 1, 0, Some(1001));
    z.window_raw = 0;
    z.window_bytes = Some(0);
    let p = s.seg(C2S, 220.0, 1000, 0, Some(1));
    p.analysis.zero_window_probe = true;
    let p = s.seg(C2S, 650.0, 1000, 0, Some(1));
    p.analysis.zero_window_probe = true;
    // The window opens at 900 ms.
    s.seg(S2C, 900.0, 1, 0, Some(1001));
    let got = stalls(&s.run());
    let causes: Vec<_> = got.iter().map(|e| e.cause).collect();
    assert_eq!(
        causes,
        [
            StallCause::Probe0,
            StallCause::Probe0,
            StallCause::ReceiverZeroWindow
        ],
        "{got:#?}"
    );
    assert_eq!(got[0].evidence.step, Some(1));
    assert_eq!(got[1].evidence.step, Some(2));
    assert_eq!(got[0].evidence.trigger_frame, Some(FrameNo(5)));
}

#[test]
fn probe0_behind_a_window_smaller_than_the_segment() {
    let mut s = Script::new();
    s.handshake(0.0, 0.2, 0.01);
    s.seg(C2S, 10.0, 1, 1000, Some(1));
    let w = s.seg(S2C, 10.2, 1, 0, Some(1001));
    w.window_bytes = Some(100);
    w.window_raw = 100;
    // tcp_write_wakeup sends exactly the window after the probe timer.
    s.seg(C2S, 220.0, 1001, 100, Some(1));
    let e = only(&s.run());
    assert_eq!(e.cause, StallCause::Probe0);
    assert_eq!(e.evidence.window_bytes, Some(100));
    assert_eq!(e.evidence.segment_bytes, Some(100));
}

#[test]
fn probe0_after_self_addressed_frag_needed() {
    let mut s = Script::new();
    s.handshake(0.0, 0.2, 0.01);
    // The server's request, acknowledged at once by the client.
    s.seg(S2C, 10.0, 1, 100, Some(1));
    s.seg(C2S, 10.1, 1, 0, Some(101));
    let (c, srv) = v4_pair(40000, 80);
    let f = s.next_frame();
    s.events.push(FlowEvent::IcmpError(frag_needed(
        f,
        at(12.0),
        c.addr,
        (c, srv),
        1,
    )));
    // The answer leaves ≈207 ms later (probe0 timer).
    s.seg(C2S, 219.0, 1, 1348, Some(101));
    let e = only(&s.run());
    assert_eq!(e.cause, StallCause::Probe0);
    assert_eq!(e.dir, C2S);
    assert_eq!(e.evidence.trigger_frame, Some(FrameNo(f)));
}

#[test]
fn nagle_held_until_the_delayed_ack() {
    // (delay of the peer's ACK ms, follow-up after it ms, expected cause)
    let table: &[(f64, f64, Option<StallCause>)] = &[
        (41.5, 0.05, Some(StallCause::NagleDelayedAck)),
        (200.0, 0.05, Some(StallCause::NagleDelayedAck)),
        // No follow-up: nobody waited for that ACK.
        (41.5, 300.0, None),
    ];
    for &(delay, follow, want) in table {
        let mut s = Script::new();
        s.handshake(0.0, 0.2, 0.01);
        s.seg(C2S, 10.0, 1, 8, Some(1));
        s.seg(S2C, 10.0 + delay, 1, 0, Some(9));
        s.seg(C2S, 10.0 + delay + follow, 9, 200, Some(1));
        let got = stalls(&s.run());
        let first = got.first().map(|e| e.cause);
        assert_eq!(first, want, "{delay} {follow}: {got:#?}");
        if want.is_some() {
            assert_eq!(got[0].evidence.timer, Some(TimerKind::DelayedAck));
            assert_eq!(got[0].evidence.matches_timer, Some(true));
        }
    }
}

#[test]
fn missing_zero_window_when_retransmissions_get_open_window_dupacks() {
    let mut s = Script::new();
    s.handshake(0.0, 0.2, 0.01);
    // Segments of this size pass (so this is no black hole)…
    s.seg(C2S, 5.0, 1, 1000, Some(1));
    s.seg(S2C, 5.2, 1, 0, Some(1001));
    // …then one is dropped by the receiver.
    s.seg(C2S, 10.0, 1001, 1000, Some(1));
    s.seg(C2S, 225.0, 1001, 1000, Some(1));
    // The receiver answers the retransmission without taking it, window open.
    s.seg(S2C, 225.2, 1, 0, Some(1001));
    s.seg(C2S, 655.0, 1001, 1000, Some(1));
    let got = stalls(&s.run());
    assert!(
        got.iter()
            .filter(|e| e.evidence.timer == Some(TimerKind::Rto))
            .all(|e| e.cause == StallCause::MissingZeroWindow),
        "{got:#?}"
    );
}

#[test]
fn path_mtu_after_frag_needed_and_black_hole() {
    // frag-needed quoting the segment.
    let mut s = Script::new();
    s.handshake(0.0, 0.2, 0.01);
    let d = s.seg(C2S, 10.0, 1, 1448, Some(1));
    d.ip_len = 1500;
    let (c, srv) = v4_pair(40000, 80);
    let f = s.next_frame();
    s.events.push(FlowEvent::IcmpError(frag_needed(
        f,
        at(10.1),
        "198.51.100.1".parse().unwrap(),
        (c, srv),
        1,
    )));
    s.seg(C2S, 225.0, 1, 1448, Some(1)).ip_len = 1500;
    let e = only(&s.run());
    assert_eq!(e.cause, StallCause::PathMtu);
    assert_eq!(e.evidence.trigger_frame, Some(FrameNo(f)));
    // Black hole: the peer's heartbeats pass, the big segment never does.
    let mut s = Script::new();
    s.handshake(0.0, 0.2, 0.01);
    s.seg(C2S, 10.0, 1, 1448, Some(1)).ip_len = 1500;
    s.seg(S2C, 100.0, 1, 17, Some(1));
    s.seg(C2S, 225.0, 1, 1448, Some(18)).ip_len = 1500;
    s.seg(S2C, 400.0, 18, 17, Some(1));
    s.seg(C2S, 655.0, 1, 1448, Some(35)).ip_len = 1500;
    let got = stalls(&s.run());
    let rto: Vec<_> = got.iter().filter(|e| e.dir == C2S).collect();
    assert_eq!(rto.len(), 2, "{got:#?}");
    assert!(
        rto.iter().all(|e| e.cause == StallCause::PathMtu),
        "{got:#?}"
    );
}

#[test]
fn application_time_peer_and_own() {
    // (handshake: rtt, ack_after; expected cause for the server's late answer)
    let table: &[(f64, f64, StallCause)] = &[
        // At the client: SYN → SYN/ACK is the round trip.
        (5.0, 0.01, StallCause::PeerApplication),
        // At the server: the client's ACK comes one round trip after the SYN/ACK.
        (0.01, 5.0, StallCause::OwnApplication),
    ];
    for &(rtt, ack_after, want) in table {
        let mut s = Script::new();
        s.handshake(0.0, rtt, ack_after);
        s.seg(C2S, 20.0, 1, 100, Some(1));
        s.seg(S2C, 20.1, 1, 0, Some(101));
        s.seg(S2C, 320.0, 1, 500, Some(101));
        let e = only(&s.run());
        assert_eq!(e.cause, want);
        assert_eq!(e.dir, S2C);
    }
}

#[test]
fn idle_time_is_not_a_stall() {
    let mut s = Script::new();
    s.handshake(0.0, 0.2, 0.01);
    s.seg(C2S, 10.0, 1, 100, Some(1));
    s.seg(S2C, 10.5, 1, 50, Some(101));
    s.seg(C2S, 10.6, 101, 0, Some(51));
    // The client's next request 5 s later: nobody waited.
    s.seg(C2S, 5000.0, 101, 100, Some(51));
    s.seg(S2C, 5000.5, 51, 50, Some(201));
    let got = stalls(&s.run());
    assert!(got.is_empty(), "{got:#?}");
}

#[test]
fn capture_gap_when_the_ack_covers_unseen_bytes() {
    let mut s = Script::new();
    s.handshake(0.0, 0.2, 0.01);
    s.seg(C2S, 10.0, 1, 100, Some(1));
    let a = s.seg(S2C, 500.0, 1, 0, Some(301));
    a.analysis.ack_lost_segment = true;
    let e = only(&s.run());
    assert_eq!(e.cause, StallCause::CaptureGap);
}

#[test]
fn unknown_when_refused_after_a_wait() {
    let mut s = Script::new();
    s.syn(0.0);
    let r = s.seg(S2C, 500.0, 0, 0, Some(1));
    r.flags = TcpFlags(TcpFlags::RST | ACK);
    let e = only(&s.run());
    assert_eq!(e.cause, StallCause::Unknown);
}

#[test]
fn rollups_and_summary() {
    let mut s = Script::new();
    s.syn(0.0);
    s.syn(1016.0);
    s.syn(3032.0);
    s.syn(7100.0);
    let sa = s.seg(S2C, 7100.2, 0, 0, Some(1));
    sa.flags = TcpFlags(SYN | ACK);
    let r = s.run();
    let st = r.stream(StreamId(0)).expect("stream 0 stalled");
    assert_eq!(
        st.summary,
        "7.1 s of 7.1 s lost to 3 SYN retransmission timeouts"
    );
    assert_eq!(r.time_lost_by_cause.len(), 1);
    assert_eq!(r.time_lost_by_cause[0].stalls, 3);
    assert_eq!(r.services.len(), 1);
    assert_eq!(r.services[0].stalled_connections, 1);
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["time_lost_by_cause"][0]["cause"], "syn_timeout");
    assert_eq!(json["streams"][0]["stalls"][0]["dir"], "client_to_server");
}

#[test]
fn probe0_seen_from_the_far_side_crosses_a_spurious_rto() {
    // At the server: its request (the stream's first data) waits ≈207 ms;
    // its RTO re-sends it and the client's answer, cut below the MSS by a
    // path-MTU drop the server cannot see, arrives at once.
    // (answer delay after the re-send ms, answer bytes, expected cause)
    let table: &[(f64, u32, StallCause)] = &[
        (0.1, 1348, StallCause::Probe0),
        // A full-size answer (MSS 1460 less 12 bytes of timestamps): nothing
        // says the peer was held by a timer.
        (0.1, 1448, StallCause::DataRto),
        // The answer long after the RTO: not crossing it.
        (50.0, 1348, StallCause::DataRto),
    ];
    for &(after, len, want) in table {
        let mut s = Script::new();
        s.handshake(0.0, 0.01, 0.2);
        s.seg(S2C, 10.0, 1, 11, Some(1));
        s.seg(S2C, 217.0, 1, 11, Some(1));
        s.seg(C2S, 217.0 + after, 1, len, Some(12));
        let got = stalls(&s.run());
        let rto: Vec<_> = got
            .iter()
            .filter(|e| e.dir == S2C && e.evidence.step.is_some())
            .collect();
        assert_eq!(rto.len(), 1, "{after} {len}: {got:#?}");
        assert_eq!(rto[0].cause, want, "{after} {len}: {got:#?}");
    }
}

#[test]
fn state_is_bounded_by_active_streams() {
    let mut l = StallLedger::new();
    let (client, server) = v4_pair(40000, 80);
    let mut frame = 0;
    for stream in 0..5000u64 {
        let t = stream as f64 * 10.0;
        l.on_event(&FlowEvent::FlowStarted(FlowStarted {
            stream: StreamId(stream),
            client,
            server,
            frame: FrameNo(frame + 1),
            ts: at(t),
        }));
        let mut seg = |dir, dt: f64, seq, len, ack: Option<i64>, flags: u16| {
            frame += 1;
            let isn = if dir == C2S { ISN_C } else { ISN_S };
            let s = SegmentEvent {
                stream: StreamId(stream),
                flags: TcpFlags(flags),
                rel_ack: ack,
                ..segment(dir, frame, at(t + dt), isn, seq, len)
            };
            l.on_event(&FlowEvent::Segment(s));
        };
        seg(C2S, 0.0, 0, 0, None, SYN);
        seg(S2C, 0.1, 0, 0, Some(1), SYN | ACK);
        seg(C2S, 0.2, 1, 0, Some(1), ACK);
        seg(C2S, 0.3, 1, 0, Some(1), TcpFlags::RST | ACK);
    }
    assert_eq!(l.active_streams(), 0);
    assert!(l.finish().streams.is_empty());
}

/// `events` with the `FlowEnded` of stream 0 inserted after event `at`.
fn with_end(events: &[FlowEvent], at: usize) -> Vec<FlowEvent> {
    let mut v = events.to_vec();
    v.insert(
        at + 1,
        pcapsleuth_detect::synth::flow_ended(StreamId(0), 0, pcapsleuth_detect::synth::at(0.0)),
    );
    v
}

fn feed(events: &[FlowEvent]) -> StallLedger {
    let mut l = StallLedger::new();
    for e in events {
        l.on_event(e);
    }
    l
}

/// Stream 1 (one SYN) at `t` ms: moves the capture's end on.
fn later_stream(t: f64, frame: u64) -> [FlowEvent; 2] {
    pcapsleuth_detect::synth::syn_only(1, frame, at(t))
}

#[test]
fn flow_ended_concludes_waits_as_the_capture_end_does() {
    // Each script leaves stream 0 in another state when it goes quiet.
    let mut scripts: Vec<(&str, Script)> = Vec::new();
    let mut s = Script::new();
    s.syn(0.0);
    scripts.push(("one SYN", s));
    let mut s = Script::new();
    s.syn(0.0);
    s.syn(1010.0);
    scripts.push(("SYN ladder", s));
    let mut s = Script::new();
    s.handshake(0.0, 0.2, 0.01);
    s.seg(C2S, 10.0, 1, 100, Some(1));
    s.seg(C2S, 225.0, 1, 100, Some(1));
    scripts.push(("RTO ladder open", s));
    let mut s = Script::new();
    s.handshake(0.0, 0.2, 0.01);
    s.seg(C2S, 10.0, 1, 1000, Some(1));
    let z = s.seg(S2C, 10.2, 1, 0, Some(1001));
    z.window_raw = 0;
    z.window_bytes = Some(0);
    scripts.push(("zero window open", s));
    let mut s = Script::new();
    s.handshake(0.0, 0.2, 0.01);
    s.seg(C2S, 10.0, 1, 100, Some(1));
    s.seg(S2C, 200.0, 1, 0, Some(101));
    scripts.push(("pending ACK", s));
    for (name, s) in &scripts {
        let n = s.events.len();
        // The capture goes on 0.5 s or 500 s after the stream's last event.
        for gap in [500.0, 500_000.0] {
            let last_ms = s
                .events
                .iter()
                .filter_map(|e| match e {
                    FlowEvent::Segment(g) => Some(g.ts.0 as f64 / 1e6),
                    _ => None,
                })
                .fold(0.0f64, f64::max)
                - at(0.0).0 as f64 / 1e6;
            let mut base = s.events.clone();
            base.extend(later_stream(last_ms + gap, s.frame + 1));
            let want = serde_json::to_string(&feed(&base).finish()).unwrap();
            // FlowEnded right after the stream's last event, or after the
            // capture moved on.
            for pos in [n - 1, base.len() - 1] {
                let events = with_end(&base, pos);
                let l = feed(&events[..=pos + 1]);
                // Only stream 1 (after the capture moved on) is left.
                let live = usize::from(pos != n - 1);
                assert_eq!(l.active_streams(), live, "{name} gap {gap} pos {pos}");
                let got = serde_json::to_string(&feed(&events).finish()).unwrap();
                assert_eq!(got, want, "{name} gap {gap} pos {pos}");
            }
        }
    }
    // A stream whose open wait is past its timer is concluded at once; a
    // zero window ends only with the capture.
    let one_syn = &scripts[0].1;
    let mut ev = one_syn.events.clone();
    ev.extend(later_stream(5000.0, 10));
    let l = feed(&with_end(&ev, ev.len() - 1));
    assert_eq!(l.waiting_for_end(), 0);
    let zero = &scripts[3].1;
    let l = feed(&with_end(&zero.events, zero.events.len() - 1));
    assert_eq!(l.waiting_for_end(), 1);
}

#[test]
fn segments_after_flow_ended_start_a_new_state() {
    let mut s = Script::new();
    s.syn(0.0);
    let mut events = with_end(&s.events, s.events.len() - 1);
    // The same tcp.stream again, 5 s later, without a FlowStarted.
    s.events.clear();
    s.syn(5000.0);
    let sa = s.seg(S2C, 5000.2, 0, 0, Some(1));
    sa.flags = TcpFlags(SYN | ACK);
    s.seg(C2S, 5000.4, 1, 0, Some(1));
    events.extend(s.events.iter().copied());
    let l = feed(&events);
    assert_eq!(l.active_streams(), 1);
    let r = l.finish();
    // The first SYN's wait was concluded; the new connection did not stall.
    let got = stalls(&r);
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(got[0].cause, StallCause::SynTimeout);
    assert_eq!(r.streams[0].client.port, 40000);
}

#[test]
fn a_one_syn_stream_costs_32_bytes() {
    let mut l = StallLedger::new();
    let n = 10_000u64;
    for i in 0..n {
        for e in pcapsleuth_detect::synth::syn_only(i, i + 1, at(i as f64)) {
            l.on_event(&e);
        }
    }
    assert_eq!(l.active_streams(), n as usize);
    let per = l.state_bytes() as f64 / n as f64;
    println!("ledger: {per:.1} bytes per one-SYN stream");
    // 32-byte slots, the table grown by a quarter at a time.
    assert!(per <= 32.0 * 1.25, "{per}");
    let r = l.finish();
    // Every SYN but those of the last 30 ms waited (1 ms apart).
    assert_eq!(r.streams.len(), 9970);
}

/// The flows of `gen-scale.py flows200k` before their last ACK: handshake,
/// two 100-byte requests each acknowledged, FIN, FIN/ACK (9 segments), all
/// still open.
#[test]
fn an_open_short_exchange_costs_under_800_bytes() {
    const FIN: u16 = TcpFlags::FIN;
    let mut s = Script::new();
    s.handshake(0.0, 0.2, 0.01);
    s.seg(C2S, 1.0, 1, 100, Some(1));
    s.seg(S2C, 1.2, 1, 0, Some(101));
    s.seg(C2S, 2.0, 101, 100, Some(1));
    s.seg(S2C, 2.2, 1, 0, Some(201));
    s.seg(C2S, 3.0, 201, 0, Some(1)).flags = TcpFlags(FIN | ACK);
    s.seg(S2C, 3.2, 1, 0, Some(202)).flags = TcpFlags(FIN | ACK);
    let mut l = StallLedger::new();
    let n = 2_000u64;
    for i in 0..n {
        for e in &s.events {
            let mut e = *e;
            match &mut e {
                FlowEvent::FlowStarted(f) => f.stream = StreamId(i),
                FlowEvent::Segment(g) => g.stream = StreamId(i),
                _ => {}
            }
            l.on_event(&e);
        }
    }
    assert_eq!(l.active_streams(), n as usize);
    let per = l.state_bytes() as f64 / n as f64;
    println!("ledger: {per:.1} bytes per open 9-segment stream");
    // 32-byte slot, the state (two sides, timer ladders boxed when used),
    // room for two unacknowledged segments.
    assert!(per <= 800.0, "{per}");
}

/// `n` one-SYN streams 1 ms apart, each retired by the flow table right
/// after its SYN (`evicted`, as `--max-flows` does to a SYN scan), fed to
/// `l`.
fn syn_scan(l: &mut StallLedger, n: u64, evicted: bool) {
    syn_scan_from(l, n, evicted, None);
}

/// [`syn_scan`], the client's address replaced by `client` when given.
fn syn_scan_from(l: &mut StallLedger, n: u64, evicted: bool, client: Option<std::net::IpAddr>) {
    for i in 0..n {
        for mut e in pcapsleuth_detect::synth::syn_only(i, i + 1, at(i as f64)) {
            if let (FlowEvent::FlowStarted(f), Some(a)) = (&mut e, client) {
                f.client.addr = a;
            }
            l.on_event(&e);
        }
        if evicted {
            l.on_event(&pcapsleuth_detect::synth::flow_ended(
                StreamId(i),
                i + 1,
                at(i as f64),
            ));
        }
    }
}

#[test]
fn a_syn_scan_retired_with_its_waits_open_stays_at_32_bytes_a_stream() {
    let n = 10_000u64;
    let mut live = StallLedger::new();
    syn_scan(&mut live, n, false);
    let mut retired = StallLedger::new();
    syn_scan(&mut retired, n, true);
    assert_eq!(retired.active_streams(), 0);
    // Every SYN's wait ends only with the capture (no retry was due yet).
    assert_eq!(retired.waiting_for_end(), n as usize);
    let per = retired.state_bytes() as f64 / n as f64;
    println!("ledger: {per:.1} bytes per retired one-SYN stream");
    // The 32-byte slot, not a parked state (≈ 660 bytes before).
    assert!(per <= 32.0 * 1.25, "{per}");
    let want = serde_json::to_string(&live.finish()).unwrap();
    let got = serde_json::to_string(&retired.finish()).unwrap();
    assert_eq!(got, want);
}

/// An IPv6 client does not fit the 32-byte slot: its lone SYN keeps the
/// client in an 18-byte entry of a side table (a box took 48 bytes, 64 with
/// malloc's header) and gives the same ledger, live or retired, naming that
/// client.
#[test]
fn an_ipv6_syn_scan_keeps_its_clients_in_a_side_table_and_the_same_ledger() {
    let v6: std::net::IpAddr = "2001:db8::7".parse().unwrap();
    let n = 2_000u64;
    let mut live = StallLedger::new();
    syn_scan_from(&mut live, n, false, Some(v6));
    let mut retired = StallLedger::new();
    syn_scan_from(&mut retired, n, true, Some(v6));
    assert_eq!(live.active_streams(), n as usize);
    assert_eq!(retired.waiting_for_end(), n as usize);
    // Slots grow by a quarter, the side table by doubling.
    let per = live.state_bytes() as f64 / n as f64;
    assert!(per <= 32.0 * 1.25 + 18.0 * 2.0, "{per}");
    assert!(per >= 32.0 + 18.0, "{per}: the side table is not counted");
    let live = live.finish();
    assert_eq!(live.streams.len(), 1970);
    assert!(live.streams.iter().all(|s| s.client.addr == v6));
    assert_eq!(live.streams[0].client.port, 40000);
    assert_eq!(retired.finish(), live);
}

#[test]
fn keep_streams_lists_only_streams_with_a_wanted_cause_and_counts_all() {
    use pcapsleuth_ledger::{CauseSet, LedgerConfig};
    let n = 2_000u64;
    let mut all = StallLedger::new();
    syn_scan(&mut all, n, false);
    let all = all.finish();
    let probe0_only = LedgerConfig {
        keep_streams: CauseSet::of(&[StallCause::Probe0]),
        ..LedgerConfig::default()
    };
    let mut lean = StallLedger::with_config(probe0_only);
    syn_scan(&mut lean, n, false);
    let lean = lean.finish();
    // Every SYN but those of the last 30 ms waited (1 ms apart).
    assert_eq!(all.streams.len(), 1970);
    assert!(lean.streams.is_empty(), "{:?}", lean.streams.first());
    // The roll-ups are the same.
    assert_eq!(lean.time_lost_by_cause, all.time_lost_by_cause);
    assert_eq!(lean.services, all.services);
    assert_eq!(lean.total_stall_ms, all.total_stall_ms);
    assert_eq!(lean.time_lost_by_cause[0].stalls, 1970);
    // Keeping SYN timeouts keeps them all.
    let syn_too = LedgerConfig {
        keep_streams: CauseSet::of(&[StallCause::Probe0, StallCause::SynTimeout]),
        ..LedgerConfig::default()
    };
    let mut l = StallLedger::with_config(syn_too);
    syn_scan(&mut l, n, true);
    assert_eq!(l.finish(), all);
}

#[test]
fn cause_sets() {
    use pcapsleuth_ledger::CauseSet;
    let p = CauseSet::of(&[StallCause::Probe0]);
    assert!(p.contains(StallCause::Probe0));
    assert!(!p.contains(StallCause::SynTimeout));
    let both = p.union(CauseSet::of(&[StallCause::Unknown]));
    assert!(both.contains(StallCause::Unknown) && both.contains(StallCause::Probe0));
    assert!(CauseSet::EMPTY.is_empty());
    for c in StallCause::ALL {
        assert!(CauseSet::ALL.contains(c));
        assert!(!CauseSet::EMPTY.contains(c));
        assert_eq!(
            CauseSet::of(&[c]).union(CauseSet::EMPTY),
            CauseSet::of(&[c])
        );
    }
    assert_eq!(CauseSet::default(), CauseSet::ALL);
}
