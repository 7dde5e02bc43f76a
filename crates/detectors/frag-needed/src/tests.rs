//! Table tests over synthesized flow events: they assert
//! diagnoses; the last few check the rendered prose and JSON.

use super::*;
use pcapsleuth_core::{Protocol, Severity};
use pcapsleuth_flow::{IcmpErrorEvent, QuotedSegmentMatch};

use pcapsleuth_detect::synth::{self, at as ts, frag_needed, segment, C2S};

const ISN: u32 = u32::MAX - 50;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

struct Cap {
    d: FragNeeded,
    ctx: FinishContext,
    /// IP length of the datagram quoted by the next ICMPs, bytes.
    quoted_len: u32,
}

impl Cap {
    fn new() -> Self {
        let mut d = FragNeeded::default();
        let (client, server) = synth::v4_pair(48001, 9001);
        let ctx = synth::start_flow(&mut d, client, server);
        Cap {
            d,
            ctx,
            quoted_len: 1500,
        }
    }
    fn data(&mut self, frame: u64, ms: f64, rel_seq: i64, len: u32) {
        self.d.on_flow_event(&FlowEvent::Segment(segment(
            C2S,
            frame,
            ts(ms),
            ISN,
            rel_seq,
            len,
        )));
    }
    fn icmp(
        &mut self,
        frame: u64,
        ms: f64,
        src: &str,
        mtu: u32,
        rel_seq: i64,
        matched: Option<u64>,
    ) {
        let v4 = ip(src).is_ipv4();
        self.d.on_flow_event(&FlowEvent::IcmpError(IcmpErrorEvent {
            kind: if v4 {
                IcmpKind::FragNeeded
            } else {
                IcmpKind::PacketTooBig
            },
            icmp_type: if v4 { 3 } else { 2 },
            code: if v4 { 4 } else { 0 },
            mtu: Some(mtu),
            quoted_ip_len: self.quoted_len,
            quoted_seq: Some(SeqNum(ISN).add(rel_seq as u32)),
            matched: matched.map(|f| QuotedSegmentMatch {
                frame: FrameNo(f),
                ts: ts(ms - 0.1),
                rel_seq,
                payload_len: 1448,
                ip_len: 1500,
            }),
            ..frag_needed(frame, ts(ms), ip(src), synth::v4_pair(48001, 9001), rel_seq)
        }));
    }
    fn run(&mut self) -> Vec<Diagnosis> {
        self.d.diagnose(&self.ctx)
    }
}

/// An ICMP error (IPv4 frag-needed or ICMPv6 PTB) from `outer.0` to
/// `outer.1` quoting a `quoted.3`-byte datagram of IP protocol `quoted.2` that
/// the flow table placed in no `tcp.stream`.
fn unplaced_icmp(
    frame: u64,
    outer: (&str, &str),
    mtu: u32,
    quoted: (&str, &str, u8, u32),
    ports: Option<(u16, u16)>,
) -> FlowEvent {
    let v4 = ip(outer.0).is_ipv4();
    let (sp, dp) = ports.unwrap_or((0, 0));
    FlowEvent::IcmpError(IcmpErrorEvent {
        kind: if v4 {
            IcmpKind::FragNeeded
        } else {
            IcmpKind::PacketTooBig
        },
        icmp_type: if v4 { 3 } else { 2 },
        code: if v4 { 4 } else { 0 },
        mtu: Some(mtu),
        icmp_dst: ip(outer.1),
        quoted_src: Endpoint {
            addr: ip(quoted.0),
            port: sp,
        },
        quoted_dst: Endpoint {
            addr: ip(quoted.1),
            port: dp,
        },
        quoted_proto: quoted.2,
        quoted_ports: ports.is_some(),
        quoted_ip_len: quoted.3,
        stream: None,
        quoted_dir: None,
        quoted_rel_seq: None,
        ..frag_needed(frame, ts(0.0), ip(outer.0), synth::v4_pair(1, 2), 0)
    })
}

#[test]
fn router_frag_needed_with_immediate_retransmission_is_info_grouped() {
    let mut c = Cap::new();
    for k in 0..5u64 {
        c.data(10 + k, 1.0 + k as f64 * 0.01, 1 + 1448 * k as i64, 1448);
    }
    for k in 0..5u64 {
        c.icmp(
            20 + k,
            1.1 + k as f64 * 0.01,
            "192.0.2.1",
            1400,
            1 + 1448 * k as i64,
            Some(10 + k),
        );
    }
    c.data(30, 1.239, 1, 1348);
    let out = c.run();
    assert_eq!(out.len(), 1, "{out:?}");
    let d = &out[0];
    assert_eq!(d.severity, Severity::Info);
    assert_eq!(d.verdict, Verdict::PmtuDiscovery);
    assert_eq!(d.stream, Some(StreamId(0)));
    assert_eq!(
        d.frames,
        vec![10, 11, 12, 13, 14, 20, 21, 22, 23, 24, 30],
        "ICMPs, the quoted segments and the reaction"
    );
    assert_eq!(d.start_ns, ts(1.1).0);
    assert_eq!(d.end_ns, ts(1.239).0);
    let e = &d.evidence;
    assert_eq!(e.count, 5);
    assert_eq!(e.mtu, 1400);
    assert!(!e.self_addressed);
    assert_eq!(e.mtu_deficit_bytes, 100);
    assert_eq!(e.quoted_size_bytes, 1500);
    assert_eq!(e.sender_next, SenderNext::Immediate);
    assert_eq!(e.sender_delay_ms, Some(0.139));
    assert_eq!(e.sender_next_frame, Some(FrameNo(30)));
    assert_eq!(e.quoted_seq, Some(ISN.wrapping_add(1)));
    assert_eq!(e.quoted_direction, Some(Direction::ClientToServer));
    assert_eq!(e.recurrence_s, None);
}

#[test]
fn self_addressed_with_out_of_order_carrier_is_a_delayed_warning() {
    let mut c = Cap::new();
    c.data(5, 0.0, 1, 100);
    // dumpcap wrote the c0 carrier (206.9 ms later) before the lo ICMP frames.
    c.data(9, 206.909, 101, 1348);
    c.icmp(10, 0.0, "192.0.2.10", 1400, 101, None);
    c.icmp(11, 0.01, "192.0.2.10", 1400, 1549, None);
    let out = c.run();
    assert_eq!(out.len(), 1);
    let d = &out[0];
    assert_eq!(d.severity, Severity::Warning);
    assert_eq!(d.verdict, Verdict::SelfAddressed);
    assert!(d.evidence.self_addressed);
    assert_eq!(d.evidence.sender_next, SenderNext::Delayed);
    assert_eq!(d.evidence.sender_delay_ms, Some(206.909));
    assert_eq!(d.evidence.sender_next_frame, Some(FrameNo(9)));
    assert_eq!(d.frames, vec![9, 10, 11]);
}

#[test]
fn router_icmp_then_long_wait_is_a_warning_and_never_is_reported() {
    let mut c = Cap::new();
    c.data(9, -0.1, 1, 1448); // the 1500-byte datagram the router refused
    c.icmp(10, 0.0, "192.0.2.1", 1480, 1, Some(9));
    c.data(11, 310.0, 1, 1428);
    let out = c.run();
    assert_eq!(out[0].severity, Severity::Warning);
    assert_eq!(out[0].evidence.sender_next, SenderNext::Delayed);
    assert_eq!(out[0].evidence.sender_next_frame, Some(FrameNo(11)));
    assert_eq!(out[0].verdict, Verdict::SenderStalled);
    assert_eq!(
        out[0].evidence.encapsulation_guess,
        "IPIP / IPVS tunnel mode (20 bytes)"
    );

    let mut c = Cap::new();
    c.data(9, -0.1, 1, 1448);
    c.icmp(10, 0.0, "192.0.2.1", 1480, 1, Some(9));
    c.data(11, 1.0, 90_000, 1428);
    let out = c.run();
    assert_eq!(out[0].evidence.sender_next, SenderNext::Never);
    assert_eq!(out[0].evidence.sender_delay_ms, None);
    assert_eq!(out[0].severity, Severity::Info);
    assert_eq!(out[0].verdict, Verdict::PmtuDiscovery);
}

/// One burst at `t_ms`: a full-size segment (frame `f`), the router's
/// frag-needed for it (`f + 1`), and the sender re-sending it in a datagram
/// that fits MTU 1400 (`f + 2`): the host learned the MTU.
fn burst(c: &mut Cap, f: u64, t_ms: f64, rel_seq: i64) {
    c.data(f, t_ms, rel_seq, 1448);
    c.icmp(f + 1, t_ms + 0.2, "192.0.2.1", 1400, rel_seq, Some(f));
    c.data(f + 2, t_ms + 0.3, rel_seq, 1348);
}

#[test]
fn recurrence_after_the_learned_mtu_expired_is_measured_per_burst() {
    // frag-needed-recurrence.pcapng: mtu_expires = 10 s, bursts 10.8 s apart.
    let mut c = Cap::new();
    burst(&mut c, 9, 0.0, 1);
    burst(&mut c, 20, 10_800.0, 50_001);
    burst(&mut c, 30, 21_601.0, 90_001);
    burst(&mut c, 40, 32_400.0, 130_001);
    let out = c.run();
    assert_eq!(out.len(), 4, "{out:?}");
    for (k, d) in out.iter().enumerate() {
        assert_eq!(d.evidence.burst, Some(k + 1));
        assert_eq!(d.evidence.recurrence_s, Some(10.8));
        assert_eq!(d.evidence.count, 1);
        assert_eq!(d.evidence.bursts.len(), 4);
        assert_eq!(d.stream, Some(StreamId(0)));
        assert_eq!(d.severity, Severity::Info);
        assert_eq!(d.verdict, Verdict::PmtuDiscovery);
    }
    assert_eq!(out[1].frames, vec![20, 21, 22]);
    let b = &out[0].evidence.bursts;
    assert_eq!(
        b.iter().map(|x| x.first_frame).collect::<Vec<_>>(),
        vec![10, 21, 31, 41]
    );
    assert_eq!(b[0].since_previous_s, None);
    assert_eq!(b[1].since_previous_s, Some(10.8));
    assert_eq!(b[2].since_previous_s, Some(10.801));
    assert_eq!(b[3].since_previous_s, Some(10.799));
}

#[test]
fn recurrence_period_is_measured_whatever_the_expiry() {
    // Linux's default route MTU expiry (600 s) plus the wait for the next
    // full-size write: the same logic, no window of expected periods.
    let mut c = Cap::new();
    burst(&mut c, 9, 0.0, 1);
    burst(&mut c, 20, 605_000.0, 500_001);
    burst(&mut c, 30, 1_210_000.0, 900_001);
    let out = c.run();
    assert_eq!(out.len(), 3);
    assert_eq!(out[0].evidence.recurrence_s, Some(605.0));
}

#[test]
fn in_flight_and_self_addressed_icmps_stay_in_their_burst() {
    // Two full-size segments in flight, both refused; the first is re-sent at
    // the learned size before the second ICMP arrives; later the host's own
    // kernel refuses a stale-MSS segment (self-addressed): the cache still
    // holds the MTU, so no recurrence.
    let mut c = Cap::new();
    c.data(9, 0.0, 1, 1448);
    c.data(10, 0.01, 1449, 1448);
    c.icmp(11, 0.2, "192.0.2.1", 1400, 1, Some(9));
    c.data(12, 0.3, 1, 1348);
    c.icmp(13, 0.4, "192.0.2.1", 1400, 1449, Some(10));
    c.icmp(14, 5_000.0, "192.0.2.10", 1400, 2897, None);
    let out = c.run();
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].evidence.count, 3);
    assert_eq!(out[0].evidence.recurrence_s, None);
    assert_eq!(out[0].evidence.burst, None);
}

#[test]
fn quotes_of_datagrams_never_sent_oversize_do_not_recur() {
    // filestore-5408/input.pcap: MTU 1500 quoting 1645-byte datagrams built
    // after the capture point; every captured datagram fits, so the host
    // never forgot (or needed) the MTU.
    let mut c = Cap::new();
    c.quoted_len = 1645;
    for (k, t) in [0.0, 1_217.0, 17_244.0].into_iter().enumerate() {
        let f = 10 * k as u64 + 9;
        let seq = 1 + 10_000 * k as i64;
        c.data(f, t, seq, 1448);
        c.icmp(f + 1, t + 0.2, "198.51.100.10", 1500, seq, Some(f));
        c.data(f + 2, t + 250.0, seq, 1448);
    }
    let out = c.run();
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].verdict, Verdict::QuotedNotCaptured);
    assert_eq!(out[0].evidence.recurrence_s, None);
}

#[test]
fn a_host_that_never_uses_the_smaller_mtu_does_not_recur() {
    // The sender re-sends full-size datagrams (PMTU discovery off or the
    // ICMP ignored): frag-needed comes back, but nothing expired.
    let mut c = Cap::new();
    for (k, t) in [0.0, 10_800.0, 21_600.0].into_iter().enumerate() {
        let f = 10 * k as u64 + 9;
        c.data(f, t, 1, 1448);
        c.icmp(f + 1, t + 0.2, "192.0.2.1", 1400, 1, Some(f));
    }
    let out = c.run();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].evidence.count, 3);
    assert_eq!(out[0].evidence.recurrence_s, None);
}

#[test]
fn non_tcp_quote_is_reported_without_a_stream() {
    let mut d = FragNeeded::default();
    d.on_flow_event(&unplaced_icmp(
        7,
        ("192.0.2.1", "192.0.2.10"),
        1450,
        ("192.0.2.10", "198.51.100.53", 17, 1500),
        Some((5353, 53)),
    ));
    let out = d.diagnose(&FinishContext::default());
    assert_eq!(out.len(), 1);
    let g = &out[0];
    assert_eq!(g.stream, None);
    assert_eq!(g.frames, vec![7]);
    assert_eq!(g.evidence.count, 1);
    assert_eq!(g.evidence.encapsulation_guess, "VXLAN (50 bytes)");
    assert_eq!(g.evidence.mtu_deficit_bytes, 50);
    assert_eq!(g.evidence.sender_next, SenderNext::Unknown);
    assert_eq!(g.evidence.quoted_direction, None);
    let flow = g.flow.as_ref().expect("a UDP flow");
    assert_eq!(flow.protocol, Protocol::Udp);
    assert_eq!((flow.client_port, flow.server_port), (5353, 53));
}

#[test]
fn quote_of_a_protocol_outside_the_vocabulary_has_no_flow() {
    // An ESP datagram (IP protocol 50) refused by a router.
    let mut d = FragNeeded::default();
    d.on_flow_event(&unplaced_icmp(
        3,
        ("192.0.2.1", "192.0.2.10"),
        1400,
        ("192.0.2.10", "198.51.100.53", 50, 1500),
        None,
    ));
    let out = d.diagnose(&FinishContext::default());
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].flow, None);
    assert_eq!(out[0].quoted_protocol, 50);
}

#[test]
fn encapsulation_table() {
    for (mtu, want) in [
        (1480, "IPIP"),
        (1476, "GRE"),
        (1450, "VXLAN"),
        (1420, "WireGuard"),
        (1440, "WireGuard"),
        (1492, "PPPoE"),
        (1400, "IPsec"),
        (1438, "IPsec"),
        (1300, "unknown"),
    ] {
        assert!(
            encapsulation_guess(mtu).starts_with(want),
            "{mtu}: {}",
            encapsulation_guess(mtu)
        );
    }
}

// ---- Fixes from the public-corpus review (docs/corpus-findings.md) ----

#[test]
fn quoted_datagram_never_captured_is_not_called_an_encapsulation() {
    // filestore-5408/input.pcap: the sender's segments are <= 1500 bytes, the
    // ICMP (MTU 1500) quotes a 1645-byte datagram: coalesced after the capture point.
    let mut c = Cap::new();
    c.data(5, 0.0, 1, 1448); // 1500-byte datagram
    c.data(6, 0.0, 1449, 93);
    c.quoted_len = 1645;
    c.icmp(9, 42.0, "198.51.100.10", 1500, 1, None);
    c.data(10, 300.0, 1, 1448);
    let out = c.run();
    assert_eq!(out.len(), 1);
    let d = &out[0];
    assert_eq!(d.verdict, Verdict::QuotedNotCaptured);
    assert!(d.evidence.quoted_not_captured);
    assert_eq!(d.evidence.largest_captured_bytes, Some(1500));
    assert_eq!(d.evidence.quoted_size_bytes, 1645);
    // The sender waited 258 ms: a warning, though the story is the coalescing.
    assert_eq!(d.severity, Severity::Warning);

    // A real oversize datagram on the wire is the ordinary case.
    let mut c = Cap::new();
    c.data(5, 0.0, 1, 1448);
    c.icmp(9, 1.0, "192.0.2.1", 1492, 1, Some(5));
    c.data(10, 1.1, 1, 1440);
    let out = c.run();
    assert!(!out[0].evidence.quoted_not_captured);
    assert_eq!(out[0].verdict, Verdict::PmtuDiscovery);
    assert_eq!(out[0].evidence.mtu_deficit_bytes, 8);
}

// ---- Rendering ----

#[test]
fn render_self_addressed_prose() {
    let mut c = Cap::new();
    c.data(9, 206.909, 101, 1348);
    c.icmp(10, 0.0, "192.0.2.10", 1400, 101, None);
    let out = c.run();
    let f = render(&out[0]);
    assert!(f.summary.starts_with("Self-addressed"), "{}", f.summary);
    assert!(!f.summary.contains("recurs"), "{}", f.summary);
    assert!(f.remedy.contains("mtu 1400"), "{}", f.remedy);
    assert_eq!(f.tcp_stream, Some(0));
    assert_eq!(f.stream_filter.as_deref(), Some("tcp.stream eq 0"));
}

#[test]
fn render_burst_prose_and_self_addressed_wait() {
    let mut c = Cap::new();
    burst(&mut c, 9, 0.0, 1);
    c.icmp(12, 200.0, "192.0.2.10", 1400, 1349, None);
    c.data(13, 406.6, 1349, 1348);
    burst(&mut c, 20, 10_800.0, 50_001);
    let out = c.run();
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].evidence.self_addressed_next_frame, Some(FrameNo(13)));
    assert_eq!(out[0].severity, Severity::Warning);
    let f = render(&out[0]);
    let s = &f.summary;
    assert!(
        s.starts_with("ICMP fragmentation-needed burst 1 of 2"),
        "{s}"
    );
    assert!(s.contains("1 self-addressed by 192.0.2.10"), "{s}");
    assert!(s.contains("206.6 ms later"), "{s}");
    assert!(s.contains("recurs every 10.8 s"), "{s}");
    assert!(s.contains("mtu_expires"), "{s}");
    assert!(f.remedy.contains("recurrence"), "{}", f.remedy);
    assert_eq!(f.evidence["burst"], 1);
    assert_eq!(f.evidence["bursts"][1]["first_frame"], 21);
}

#[test]
fn render_quoted_not_captured_prose() {
    let mut c = Cap::new();
    c.data(5, 0.0, 1, 1448);
    c.quoted_len = 1645;
    c.icmp(9, 42.0, "198.51.100.10", 1500, 1, None);
    let f = render(&c.run()[0]);
    assert!(f.summary.contains("never seen to send"), "{}", f.summary);
    assert!(f.summary.contains("LRO/GRO"), "{}", f.summary);
    assert!(!f.summary.contains("encapsulation guess"), "{}", f.summary);
    assert!(f.remedy.contains("lro off"), "{}", f.remedy);
}

#[test]
fn render_icmp_quote_has_no_ports_and_one_byte_is_singular() {
    // ipv6-atomic-fragments-toobig/toobig.pcap: PTB (MTU 1200) quoting a
    // 1201-byte ICMPv6 echo; the summary printed "[..]:0" and "1 bytes".
    let mut d = FragNeeded::default();
    d.on_flow_event(&unplaced_icmp(
        2,
        ("2001:db8:2::2", "fe80::1"),
        1200,
        ("fe80::1", "2001:db8:2::2", 58, 1201),
        None,
    ));
    let out = d.finish(&FinishContext::default());
    assert_eq!(out.len(), 1);
    let s = &out[0].summary;
    assert!(s.contains("for ICMPv6 fe80::1 -> 2001:db8:2::2:"), "{s}");
    assert!(!s.contains(":0"), "{s}");
    assert!(s.contains("1 byte short of the 1201-byte datagram"), "{s}");
    assert_eq!(
        out[0].flow.as_ref().map(|f| f.protocol),
        Some(Protocol::Icmpv6)
    );
}

#[test]
fn evidence_json_keys_order_and_nulls() {
    let mut c = Cap::new();
    c.icmp(10, 0.0, "192.0.2.1", 1480, 1, None);
    let f = render(&c.run()[0]);
    let json = serde_json::to_string(&f.evidence).unwrap();
    assert_eq!(
        json,
        format!(
            concat!(
                r#"{{"mtu":1480,"count":1,"self_addressed":false,"#,
                r#""icmp_source":"192.0.2.1","icmp_destination":"192.0.2.10","#,
                r#""quoted_seq":{},"quoted_rel_seq":1,"quoted_size_bytes":1500,"#,
                r#""largest_captured_bytes":null,"quoted_not_captured":false,"#,
                r#""mtu_deficit_bytes":20,"encapsulation_guess":"IPIP / IPVS tunnel mode (20 bytes)","#,
                r#""sender_next":"never","sender_delay_ms":null,"sender_next_frame":null,"#,
                r#""quoted_direction":"client_to_server","recurrence_s":null}}"#
            ),
            ISN.wrapping_add(1)
        )
    );
}

/// A frag-needed flood (issue 11): 100,000 router ICMPs quoting eight
/// captured segments in turn, then the sender's smaller re-send. Retained
/// state does not grow with the messages, and the finding cites the first
/// 100 and the last 10 of its frames and says how many there were.
#[test]
fn flood_keeps_bounded_state_and_cites_a_bounded_sample() {
    const N: u64 = 100_000;
    let mut c = Cap::new();
    for k in 0..8u64 {
        c.data(10 + k, 1.0, 1 + 1448 * k as i64, 1448);
    }
    for n in 0..N {
        let k = n % 8;
        let at = 2.0 + n as f64 * 0.01;
        c.icmp(
            100 + n,
            at,
            "192.0.2.1",
            1400,
            1 + 1448 * k as i64,
            Some(10 + k),
        );
    }
    let last = 100 + N;
    c.data(last, 2.0 + N as f64 * 0.01, 1, 1348);
    let (groups, routes, detail, watches) = c.d.retained();
    assert_eq!((groups, routes), (1, 1));
    assert_eq!(detail, 0, "a flooded route drops its messages kept in full");
    assert!(watches <= ROUTE_DETAIL_CAP + 1, "{watches} watches");

    let out = c.run();
    assert_eq!(out.len(), 1, "{out:?}");
    let d = &out[0];
    assert_eq!(d.evidence.count, N as usize);
    let total = N as usize + 8 + 1;
    assert_eq!(d.frames_total, total);
    assert_eq!(d.evidence.frames_total, Some(total));
    assert_eq!(d.frames.len(), FRAMES_CITED_HEAD + FRAMES_CITED_TAIL);
    let head: Vec<FrameNo> = (10..18).chain(100..192).map(FrameNo).collect();
    assert_eq!(&d.frames[..FRAMES_CITED_HEAD], &head[..]);
    let tail: Vec<FrameNo> = (last - 9..=last).map(FrameNo).collect();
    assert_eq!(&d.frames[FRAMES_CITED_HEAD..], &tail[..]);
    // The first message still decides what the sender did next.
    assert_eq!(d.evidence.sender_next_frame, Some(FrameNo(last)));
    assert_eq!(d.evidence.sender_next, SenderNext::Delayed);
    assert_eq!(d.end_ns, ts(2.0 + N as f64 * 0.01).0);
    let json = serde_json::to_value(render(d)).unwrap();
    assert_eq!(json["frames"].as_array().map(Vec::len), Some(110));
    assert_eq!(json["evidence"]["frames_total"], total);
}

/// Up to the bound every frame is cited and `frames_total` is absent; one
/// frame more and the sample is the first 100 and the last 10.
#[test]
fn frames_are_all_cited_up_to_the_bound() {
    let bound = FRAMES_CITED_HEAD + FRAMES_CITED_TAIL;
    for n in [bound, bound + 1] {
        let mut c = Cap::new();
        for f in 0..n as u64 {
            c.icmp(1 + f, f as f64, "192.0.2.1", 1480, 1, None);
        }
        let d = &c.run()[0];
        assert_eq!(d.frames_total, n);
        if n == bound {
            assert_eq!(d.frames, (1..=n as u64).collect::<Vec<_>>());
            assert_eq!(d.evidence.frames_total, None);
        } else {
            assert_eq!(d.frames.len(), bound);
            assert_eq!(d.frames[FRAMES_CITED_HEAD - 1], FRAMES_CITED_HEAD as u64);
            assert_eq!(d.frames[FRAMES_CITED_HEAD], n as u64 - 9);
            assert_eq!(d.evidence.frames_total, Some(n));
        }
    }
}

/// Out-of-order arrival: the sample is by frame number, not arrival.
#[test]
fn frame_sample_is_by_frame_number_whatever_the_arrival_order() {
    let mut c = Cap::new();
    for f in (1..=300u64).rev() {
        c.icmp(f, 1000.0 - f as f64, "192.0.2.1", 1480, 1, None);
    }
    let d = &c.run()[0];
    let want: Vec<FrameNo> = (1..=100).chain(291..=300).map(FrameNo).collect();
    assert_eq!(d.frames, want);
    assert_eq!(d.evidence.frames_total, Some(300));
}

/// A route with more than `ROUTE_DETAIL_CAP` messages is a flood: reported
/// per group, its recurrence not measured; a route at the cap still recurs.
#[test]
fn a_flooded_route_is_reported_per_group_without_recurrence() {
    for extra in [0, 1] {
        let mut c = Cap::new();
        burst(&mut c, 9, 0.0, 1);
        burst(&mut c, 20, 10_800.0, 50_001);
        let n = (ROUTE_DETAIL_CAP - 2 + extra) as u64;
        for k in 0..n {
            c.icmp(100 + k, 20_000.0 + k as f64, "192.0.2.1", 1400, 1, None);
        }
        let out = c.run();
        if extra == 0 {
            // the later ICMPs quote an oversize datagram sent after the
            // host used MTU 1400: a third burst
            assert_eq!(out.len(), 3, "three bursts");
            assert_eq!(out[2].evidence.count, n as usize);
            assert!(out.iter().all(|d| d.evidence.recurrence_s.is_some()));
        } else {
            assert_eq!(out.len(), 1, "one group");
            assert_eq!(out[0].evidence.count, ROUTE_DETAIL_CAP + 1);
            assert_eq!(out[0].evidence.recurrence_s, None);
            assert_eq!(out[0].evidence.burst, None);
        }
    }
}

/// The frame sample equals first 100 + last 10 of the sorted distinct
/// frames, for any arrival order and size (against a brute-force reference);
/// repeated segments count once.
#[test]
fn frame_sample_matches_a_sorted_reference() {
    let mut x: u64 = 12345;
    for n in [0usize, 1, 99, 100, 101, 109, 110, 111, 120, 500, 3000] {
        let mut s = group::FrameSample::default();
        let mut all = Vec::new();
        for _ in 0..n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // ICMP frames (odd) are never segment frames (even)
            let f = (((x >> 33) % 10_000) << 1) | (x & 1);
            if x & 1 == 1 {
                if !all.contains(&f) {
                    s.add_icmp(FrameNo(f));
                    all.push(f);
                }
            } else {
                s.add_segment(FrameNo(f));
                if !all.contains(&f) {
                    all.push(f);
                }
            }
        }
        all.sort_unstable();
        let bound = FRAMES_CITED_HEAD + FRAMES_CITED_TAIL;
        let want: Vec<FrameNo> = if all.len() <= bound {
            all.clone().iter().copied().map(FrameNo).collect::<Vec<_>>()
        } else {
            let mut w = all[..FRAMES_CITED_HEAD].to_vec();
            w.extend_from_slice(&all[all.len() - FRAMES_CITED_TAIL..]);
            w.iter().copied().map(FrameNo).collect::<Vec<_>>()
        };
        assert_eq!(s.cited(), want, "n = {n}");
        assert_eq!(s.total(), all.len(), "n = {n}");
    }
}

#[test]
fn flow_ended_keeps_the_diagnosis_and_closes_the_watches() {
    // The router refused a 1500-byte datagram; the flow ends before the
    // sender re-sent: the watch closes as it stands (never re-sent), as at
    // the end of the capture.
    let build = |end: bool| {
        let mut c = Cap::new();
        c.data(9, -0.1, 1, 1448);
        c.icmp(10, 0.0, "192.0.2.1", 1480, 1, Some(9));
        c.data(11, 1.0, 90_000, 1428);
        if end {
            c.d.on_flow_event(&synth::flow_ended(StreamId(0), 11, ts(1.0)));
            assert_eq!(c.d.follow.open_watches(), 0);
        }
        c
    };
    let want = format!("{:?}", build(false).run());
    assert_eq!(format!("{:?}", build(true).run()), want);
    assert!(want.contains("Never"), "{want}");
}

#[test]
fn a_one_syn_stream_costs_4_bytes() {
    let mut d = FragNeeded::default();
    let n = 10_000u64;
    for i in 0..n {
        for e in synth::syn_only(i, i + 1, ts(i as f64)) {
            d.on_flow_event(&e);
        }
    }
    let per = d.stream_bytes() as f64 / n as f64;
    println!("frag-needed: {per:.1} bytes per one-SYN stream");
    assert!(per <= 4.0 * 1.25, "{per}");
    assert_eq!(d.largest_sent(StreamId(7), C2S), Some(60));
    // The largest datagram is kept to 65,534 bytes; from 65,535 on (an
    // IPv6 jumbogram) it is not known.
    let mut big = synth::segment(C2S, 1, ts(0.0), 1000, 0, 0);
    big.stream = StreamId(3);
    for (ip_len, want) in [(65_534, Some(65_534)), (65_535, None), (90_000, None)] {
        big.ip_len = ip_len;
        let mut d = FragNeeded::default();
        d.on_flow_event(&FlowEvent::Segment(big));
        assert_eq!(d.largest_sent(StreamId(3), C2S), want, "{ip_len}");
    }
}

/// A router refusing the datagrams of many flows the capture does not hold
/// (`icmp1m_rand` of `gen-scale.py`, scaled down): the first
/// `UNPLACED_GROUPS_CAP` quoted flows are findings of their own, the rest
/// fold into one flood finding per ICMP source and MTU (sources beyond
/// `FLOOD_SOURCES_CAP` share one), and a message of a group already
/// reported still joins that group.
#[test]
fn quotes_of_flows_beyond_the_cap_fold_into_a_flood_per_source() {
    let quoted = |n: u64| format!("10.{}.{}.{}", (n >> 16) & 255, (n >> 8) & 255, n & 255);
    let mut d = FragNeeded::default();
    let mut frame = 0u64;
    let mut send = |d: &mut FragNeeded, router: &str, mtu: u32, n: u64| {
        frame += 1;
        let q = quoted(n);
        d.on_flow_event(&unplaced_icmp(
            frame,
            (router, q.as_str()),
            mtu,
            (q.as_str(), "192.0.2.1", 6, 1500),
            Some((40_000, 443)),
        ));
    };
    let cap = UNPLACED_GROUPS_CAP as u64;
    for n in 0..cap + 500 {
        send(&mut d, "198.51.100.1", 1400, n);
    }
    // The first flow again: its own group, not the flood.
    send(&mut d, "198.51.100.1", 1400, 0);
    // The same router announcing another MTU is another source's flood.
    send(&mut d, "198.51.100.1", 1280, 1);
    // 62 more routers fill the flood sources; 7 beyond share one.
    for r in 0..69u64 {
        send(
            &mut d,
            &format!("203.0.113.{}", r + 1),
            1400,
            cap + 1000 + r,
        );
    }
    let (groups, routes, detail, watches) = d.retained();
    assert_eq!(groups, UNPLACED_GROUPS_CAP + FLOOD_SOURCES_CAP + 1);
    assert_eq!(routes, UNPLACED_GROUPS_CAP);
    // The first flow's route, with two messages, keeps them for its recurrence.
    assert_eq!((detail, watches), (2, 0));

    let ctx = FinishContext::default();
    let out = d.diagnose(&ctx);
    assert_eq!(out.len(), UNPLACED_GROUPS_CAP + FLOOD_SOURCES_CAP + 1);
    let (apart, floods) = out.split_at(UNPLACED_GROUPS_CAP);
    assert!(apart.iter().all(|x| x.evidence.flood.is_none()));
    let first = apart
        .iter()
        .find(|x| x.quoted_src.addr == ip("10.0.0.0"))
        .unwrap();
    assert_eq!(first.evidence.count, 2);
    assert!(first.flow.is_some());

    // The sources beyond the cap first (`None` sorts first), then by source.
    let others = &floods[0];
    let flood = |e: &Diagnosis| e.evidence.flood.clone().unwrap();
    assert!(flood(others).other_sources);
    assert_eq!(others.evidence.count, 69 - (FLOOD_SOURCES_CAP - 2));
    let main = floods
        .iter()
        .find(|x| x.evidence.icmp_source == ip("198.51.100.1") && x.evidence.mtu == 1400)
        .unwrap();
    assert_eq!(main.evidence.count, 500);
    assert_eq!(
        flood(main),
        FloodEvidence {
            reported_apart: UNPLACED_GROUPS_CAP,
            other_sources: false
        }
    );
    assert_eq!(main.severity, Severity::Info);
    assert_eq!(main.flow, None);
    assert_eq!(main.stream, None);
    assert_eq!(main.frames_total, 500);
    assert_eq!(main.frames.len(), FRAMES_CITED_HEAD + FRAMES_CITED_TAIL);
    assert_eq!(main.frames[0], FrameNo(cap + 1));
    let f = render(main);
    assert_eq!(
        f.summary,
        format!(
            "ICMP fragmentation-needed flood: 500 more messages from 198.51.100.1, MTU 1400, each quoting a flow this capture does not hold, beyond the {UNPLACED_GROUPS_CAP} such flows reported one by one (the first folded here quotes TCP 10.0.4.0:40000 -> 192.0.2.1:443)."
        )
    );
    let json = serde_json::to_value(&f).unwrap();
    assert_eq!(
        json["evidence"]["flood"]["reported_apart"],
        UNPLACED_GROUPS_CAP
    );
    assert_eq!(json["evidence"]["flood"]["other_sources"], false);
    assert_eq!(json["evidence"]["count"], 500);
    assert!(serde_json::to_value(render(&apart[0])).unwrap()["evidence"]
        .get("flood")
        .is_none());
}

/// The same fold for ICMPv6 Packet Too Big (RFC 8201): the flood finding
/// names its source and MTU and says "ICMPv6 Packet Too Big".
#[test]
fn packet_too_big_quotes_beyond_the_cap_fold_into_a_flood() {
    let mut d = FragNeeded::default();
    let cap = UNPLACED_GROUPS_CAP as u64;
    for n in 0..cap + 3 {
        let q = format!("2001:db8:1::{:x}", n + 1);
        d.on_flow_event(&unplaced_icmp(
            n + 1,
            ("2001:db8::1", q.as_str()),
            1280,
            (q.as_str(), "2001:db8:2::1", 6, 1500),
            Some((40_000, 443)),
        ));
    }
    let out = d.diagnose(&FinishContext::default());
    assert_eq!(out.len(), UNPLACED_GROUPS_CAP + 1);
    let flood = out.last().unwrap();
    assert_eq!(flood.evidence.count, 3);
    assert_eq!(
        flood.frames,
        vec![FrameNo(cap + 1), FrameNo(cap + 2), FrameNo(cap + 3)]
    );
    assert!(
        render(flood).summary.starts_with(
            "ICMPv6 Packet Too Big flood: 3 more messages from 2001:db8::1, MTU 1280, each quoting"
        ),
        "{}",
        render(flood).summary
    );
    assert!(render(flood)
        .summary
        .contains("TCP [2001:db8:1::401]:40000 -> [2001:db8:2::1]:443"));
}
