//! Table tests over synthesized flow events, run through the real stall
//! ledger (as the pipeline does) and the detector; they assert diagnoses;
//! the last checks the rendered finding.

use super::*;
use pcapsleuth_core::Severity;
use pcapsleuth_detect::synth::{at, finish_context, segment, v4_pair, C2S, S2C};
use pcapsleuth_flow::FlowStarted;
use pcapsleuth_ledger::StallLedger;

const SYN: u16 = pcapsleuth_decode::TcpFlags::SYN;
const ACK: u16 = pcapsleuth_decode::TcpFlags::ACK;

/// Stream 0, client 192.0.2.10:40000 → server 198.51.100.10:80, times in ms.
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

    /// One ACK-flagged segment; returns its frame.
    fn seg(&mut self, dir: Direction, t: f64, seq: i64, len: u32, ack: i64) -> FrameNo {
        self.frame += 1;
        let isn = if dir == C2S { 1000 } else { 5000 };
        let s = SegmentEvent {
            rel_ack: Some(ack),
            ..segment(dir, self.frame, at(t), isn, seq, len)
        };
        self.events.push(FlowEvent::Segment(s));
        FrameNo(self.frame)
    }

    fn flags(&mut self, f: u16) {
        if let Some(FlowEvent::Segment(s)) = self.events.last_mut() {
            s.flags = pcapsleuth_decode::TcpFlags(f);
            s.mss = Some(1460);
        }
    }

    /// Handshake seen at the client (`server_side` false: SYN/ACK one RTT
    /// after the SYN, ACK at once) or at the server (SYN/ACK at once, ACK one
    /// RTT later).
    fn handshake(&mut self, rtt: f64, server_side: bool) {
        self.seg(C2S, 0.0, 0, 0, 0);
        self.flags(SYN);
        let (sa, a) = if server_side {
            (0.01, rtt + 0.01)
        } else {
            (rtt, rtt + 0.01)
        };
        self.seg(S2C, sa, 0, 0, 1);
        self.flags(SYN | ACK);
        self.seg(C2S, a, 1, 0, 1);
    }

    /// Requests of an 8-byte header and a 200-byte body, answered with 1000
    /// bytes, starting every 100 ms (300 ms for slow timers) from 10 ms. `hold`
    /// is the peer's ACK delay of the header (ms; 0: no Nagle hold, the body
    /// follows at once), `follow` the ACK → body gap seen at the capture point.
    /// Returns the (header, ACK, body) frames of the held requests.
    fn requests(&mut self, n: usize, hold: f64, follow: f64) -> Vec<[FrameNo; 3]> {
        let mut out = Vec::new();
        let period = if hold > 100.0 { 300.0 } else { 100.0 };
        for i in 0..n {
            let t = 10.0 + period * i as f64;
            let (cs, ss) = (1 + 208 * i as i64, 1 + 1000 * i as i64);
            let h = self.seg(C2S, t, cs, 8, ss);
            if hold > 0.0 {
                let a = self.seg(S2C, t + hold, ss, 0, cs + 8);
                let b = self.seg(C2S, t + hold + follow, cs + 8, 200, ss);
                out.push([h, a, b]);
            } else {
                self.seg(C2S, t + 0.05, cs + 8, 200, ss);
            }
            let t2 = t + hold + follow + 0.3;
            self.seg(S2C, t2, ss, 1000, cs + 208);
            self.seg(C2S, t2 + 0.05, cs + 208, 0, ss + 1000);
        }
        out
    }

    fn run(&self) -> Vec<Diagnosis> {
        let mut d = DelayedAckStall::default();
        let mut l = StallLedger::new();
        for e in &self.events {
            d.on_flow_event(e);
            l.on_event(e);
        }
        let (c, s) = v4_pair(40000, 80);
        let mut ctx = finish_context(c, s);
        ctx.ledger = Some(l.finish());
        d.diagnose(&ctx)
    }
}

/// (case, server-side capture, rtt ms, hold ms, ACK → body ms, requests,
/// expected severity, expected timer ms)
type Case = (
    &'static str,
    bool,
    f64,
    f64,
    f64,
    usize,
    Option<Severity>,
    Option<f64>,
);

#[test]
fn nagle_held_requests_by_vantage_and_timer() {
    // (case, server-side capture, rtt ms, hold ms, ACK → body ms, requests,
    //  expected severity, expected timer ms)
    let table: &[Case] = &[
        (
            "client, Linux 40 ms",
            false,
            0.1,
            41.5,
            0.02,
            5,
            Some(Severity::Warning),
            Some(40.0),
        ),
        (
            "server, Linux 40 ms",
            true,
            0.1,
            41.5,
            0.1,
            5,
            Some(Severity::Warning),
            Some(40.0),
        ),
        (
            "client, 200 ms stack",
            false,
            0.5,
            201.0,
            0.02,
            4,
            Some(Severity::Warning),
            Some(200.0),
        ),
        (
            "server, 200 ms stack",
            true,
            2.0,
            201.0,
            2.0,
            4,
            Some(Severity::Warning),
            Some(200.0),
        ),
        (
            "single stall",
            false,
            0.1,
            41.5,
            0.02,
            1,
            Some(Severity::Info),
            Some(40.0),
        ),
        (
            "two stalls: info",
            false,
            0.1,
            41.5,
            0.02,
            2,
            Some(Severity::Info),
            Some(40.0),
        ),
        (
            "stalls off every timer: info",
            false,
            0.1,
            120.0,
            0.02,
            4,
            Some(Severity::Info),
            None,
        ),
        ("TCP_NODELAY control", false, 0.1, 0.0, 0.0, 5, None, None),
    ];
    for &(case, server_side, rtt, hold, follow, n, sev, timer) in table {
        let mut s = Script::new();
        s.handshake(rtt, server_side);
        let held = s.requests(n, hold, follow);
        let got = s.run();
        match sev {
            None => assert!(got.is_empty(), "{case}: {got:#?}"),
            Some(sev) => {
                assert_eq!(got.len(), 1, "{case}: {got:#?}");
                let d = &got[0];
                assert_eq!(d.severity, sev, "{case}");
                assert_eq!(d.dir, C2S, "{case}");
                assert_eq!(d.evidence.stalls, n, "{case}");
                assert_eq!(d.evidence.delayed_ack_timer_ms, timer, "{case}");
                assert_eq!(
                    d.evidence.matching_timer,
                    if timer.is_some() { n } else { 0 },
                    "{case}"
                );
                assert_eq!(d.evidence.held_bytes_max, Some(200), "{case}");
                for (h, want) in d.evidence.held_requests.iter().zip(&held) {
                    assert_eq!([h.first_frame, h.ack_frame], [want[0], want[1]], "{case}");
                    assert_eq!(h.held_frame, Some(want[2]), "{case}");
                }
                let cited: Vec<FrameNo> = held.iter().flatten().copied().collect();
                assert!(cited.iter().all(|f| d.frames.contains(f)), "{case}");
            }
        }
    }
}

#[test]
fn no_ledger_no_diagnosis() {
    let mut s = Script::new();
    s.handshake(0.1, false);
    s.requests(3, 41.5, 0.02);
    let mut d = DelayedAckStall::default();
    for e in &s.events {
        d.on_flow_event(e);
    }
    let (c, sv) = v4_pair(40000, 80);
    assert!(d.diagnose(&finish_context(c, sv)).is_empty());
}

#[test]
fn listing_is_capped() {
    let mut s = Script::new();
    s.handshake(0.1, false);
    s.requests(MAX_LISTED + 3, 41.5, 0.02);
    let got = s.run();
    assert_eq!(got.len(), 1);
    let e = &got[0].evidence;
    assert_eq!(e.stalls, MAX_LISTED + 3);
    assert_eq!(e.listed, MAX_LISTED);
    assert_eq!(e.held_requests.len(), MAX_LISTED);
    assert_eq!(got[0].frames.len(), 3 * MAX_LISTED);
}

#[test]
fn renders_summary_and_evidence() {
    let mut s = Script::new();
    s.handshake(0.1, false);
    s.requests(3, 41.5, 0.02);
    let f = render(&s.run()[0]);
    assert_eq!(f.detector, ID);
    assert!(
        f.summary.contains("40 ms delayed ACK 3 times"),
        "{}",
        f.summary
    );
    assert!(
        f.summary
            .starts_with("The client 192.0.2.10:40000 wrote to 198.51.100.10:80"),
        "{}",
        f.summary
    );
    assert_eq!(f.evidence["stalls"], 3);
    assert_eq!(f.evidence["held_requests"][0]["held_bytes"], 200);
    assert!(f.remedy.contains("TCP_NODELAY"));
}

#[test]
fn flow_ended_keeps_the_diagnosis_and_drops_the_stream() {
    let build = || {
        let mut s = Script::new();
        s.handshake(0.1, false);
        s.requests(5, 41.5, 0.02);
        s
    };
    let without = build().run();
    assert_eq!(without.len(), 1);
    let mut s = build();
    let last = s.frame;
    s.events.push(pcapsleuth_detect::synth::flow_ended(
        StreamId(0),
        last,
        at(1000.0),
    ));
    let mut d = DelayedAckStall::default();
    for e in &s.events {
        d.on_flow_event(e);
    }
    assert_eq!(d.active_streams(), 0);
    assert_eq!(s.run(), without);
}

#[test]
fn one_syn_streams_keep_no_state() {
    let mut d = DelayedAckStall::default();
    for i in 0..10_000u64 {
        for ev in pcapsleuth_detect::synth::syn_only(i, i + 1, at(i as f64)) {
            d.on_flow_event(&ev);
        }
    }
    // The map's first (empty) allocation only: nothing per stream.
    assert_eq!(d.active_streams(), 0);
    assert!(d.state_bytes() < 200, "{}", d.state_bytes());
}
