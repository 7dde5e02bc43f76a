//! Whole-detector tests on synthetic captures: two dual-stack hosts, pings
//! and TCP exchanges over both families, with the delay in the peer's
//! answers or in the sender's send path, on Ethernet, `-i any` (SLL2) and
//! raw-IP links, on the link or behind a router.

use crate::collect::{Collector, Family};
use crate::diagnose::{diagnose, Diagnosis};
use crate::pair::PairedBy;
use crate::stats::Verdict;
use crate::Measure;
use pcapsleuth_core::FrameNo;
use pcapsleuth_core::InterfaceId;
use pcapsleuth_core::{Protocol, Severity, Timestamp};
use pcapsleuth_decode::Decoder;
use pcapsleuth_detect::{PacketContext, PacketFlowInfo, PacketMeta};
use pcapsleuth_testkit::packet::{icmp, ipv4_full, ipv6_full, tcp_full, udp};

const MAC_A: [u8; 6] = [0x62, 0xb2, 0x8f, 0xf5, 0x34, 0x7c];
const MAC_B: [u8; 6] = [0x3e, 0x50, 0x35, 0x20, 0x17, 0xf1];
const A4: [u8; 4] = [192, 0, 2, 41];
const B4: [u8; 4] = [192, 0, 2, 42];
const A6: [u8; 16] = [
    0x20, 0x01, 0x0d, 0xb8, 0, 0x41, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a,
];
const B6: [u8; 16] = [
    0x20, 0x01, 0x0d, 0xb8, 0, 0x41, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0b,
];
const T0: i64 = 1_795_000_000_000_000_000;
const US: i64 = 1_000;
const MS: i64 = 1_000_000;

#[derive(Clone, Copy, PartialEq)]
enum Link {
    Ethernet,
    Sll2,
    RawIp,
}

impl Link {
    fn linktype(self) -> u32 {
        match self {
            Link::Ethernet => 1,
            Link::Sll2 => 276,
            Link::RawIp => 101,
        }
    }
}

#[derive(Clone, Copy)]
struct Scenario {
    link: Link,
    /// Extra time B takes to answer over IPv6 (ns).
    v6_answer_delay: i64,
    /// Extra time B takes to answer over IPv4 (ns).
    v4_answer_delay: i64,
    /// Time A's IPv6 requests spend in A's send path (ns).
    v6_send_delay: i64,
    pings: usize,
    connections: usize,
    /// TTL / hop limit of B's packets (63: behind a router).
    peer_ttl: u8,
    /// Echo data is not an iputils stamp.
    foreign_payload: bool,
    /// Each packet captured twice, 5 µs apart.
    twice: bool,
    /// A DNS answer names B with both addresses.
    dns: bool,
}

const BASE: Scenario = Scenario {
    link: Link::Ethernet,
    v6_answer_delay: 0,
    v4_answer_delay: 0,
    v6_send_delay: 0,
    pings: 20,
    connections: 4,
    peer_ttl: 64,
    foreign_payload: false,
    twice: false,
    dns: false,
};

fn ip(from_a: bool, v6: bool, protocol: u8, ttl: u8, payload: &[u8]) -> Vec<u8> {
    if v6 {
        let (s, d) = if from_a { (A6, B6) } else { (B6, A6) };
        let mut p = ipv6_full(s, d, protocol, payload);
        p[7] = ttl;
        p
    } else {
        let (s, d) = if from_a { (A4, B4) } else { (B4, A4) };
        let mut p = ipv4_full(s, d, protocol, 1, 0x4000, &[], payload);
        p[8] = ttl;
        p
    }
}

fn frame(link: Link, src_mac: [u8; 6], dst_mac: [u8; 6], packet: &[u8]) -> Vec<u8> {
    let ethertype: u16 = if packet.first().is_some_and(|b| b >> 4 == 6) {
        0x86DD
    } else {
        0x0800
    };
    match link {
        Link::Ethernet => [&dst_mac[..], &src_mac, &ethertype.to_be_bytes(), packet].concat(),
        Link::Sll2 => [
            &ethertype.to_be_bytes()[..],
            &[0, 0],
            &2u32.to_be_bytes(),
            &1u16.to_be_bytes(),
            &[if src_mac == MAC_A { 4 } else { 0 }, 6],
            &src_mac,
            &[0, 0],
            packet,
        ]
        .concat(),
        Link::RawIp => packet.to_vec(),
    }
}

/// iputils echo data: the 64-bit timeval of `stamp_ns`, then 0x10, 0x11, …
fn echo_data(stamp_ns: i64, foreign: bool) -> Vec<u8> {
    if foreign {
        return b"abcdefghijklmnopqrstuvwabcdefghi".to_vec();
    }
    let sec = (stamp_ns / 1_000_000_000) as u64;
    let usec = ((stamp_ns % 1_000_000_000) / 1_000) as u64;
    let mut d = [sec.to_le_bytes(), usec.to_le_bytes()].concat();
    d.extend((16u8..56).collect::<Vec<u8>>());
    d
}

fn dns_answer() -> Vec<u8> {
    let mut m = vec![0, 7, 0x81, 0x80, 0, 1, 0, 2, 0, 0, 0, 0];
    m.extend_from_slice(b"\x01b\x03lab\x04test\x00\x00\x01\x00\x01");
    m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
    m.extend_from_slice(&B4);
    m.extend_from_slice(&[0xc0, 12, 0, 28, 0, 1, 0, 0, 0, 60, 0, 16]);
    m.extend_from_slice(&B6);
    m
}

/// The capture of `s`: (timestamp ns, frame), in time order.
fn capture(s: &Scenario) -> Vec<(i64, Vec<u8>)> {
    let mut pkts: Vec<(i64, bool, Vec<u8>)> = Vec::new(); // (ts, from A, ip packet)
    if s.dns {
        let mut p = ipv4_full(
            [192, 0, 2, 53],
            A4,
            17,
            1,
            0,
            &[],
            &udp(53, 40000, &dns_answer()),
        );
        p[8] = 63;
        pkts.push((T0 - 10 * MS, false, p));
    }
    for i in 0..s.pings {
        let t = T0 + i as i64 * 50 * MS;
        for v6 in [false, true] {
            let (send, answer) = if v6 {
                (t + 10 * MS, s.v6_answer_delay)
            } else {
                (t, s.v4_answer_delay)
            };
            let stamp = send - 30 * US - if v6 { s.v6_send_delay } else { 0 };
            let data = echo_data(stamp, s.foreign_payload);
            let (req_t, rep_t) = if v6 { (128, 129) } else { (8, 0) };
            let proto = if v6 { 58 } else { 1 };
            let seq = (i as u16 + 1).to_be_bytes();
            let rest = [0x7e, 0x25, seq[0], seq[1]];
            pkts.push((
                send,
                true,
                ip(true, v6, proto, 64, &icmp(req_t, 0, rest, &data)),
            ));
            let reply = ip(false, v6, proto, s.peer_ttl, &icmp(rep_t, 0, rest, &data));
            pkts.push((send + 25 * US + answer, false, reply));
        }
    }
    for k in 0..s.connections {
        for v6 in [false, true] {
            let t = T0 + 7 * MS + k as i64 * 200 * MS + if v6 { 100 * MS } else { 0 };
            let d = if v6 {
                s.v6_answer_delay
            } else {
                s.v4_answer_delay
            };
            let port = 45100 + k as u16 + if v6 { 100 } else { 0 };
            let a = |flags, seq, ack, data: &[u8]| {
                ip(
                    true,
                    v6,
                    6,
                    64,
                    &tcp_full(port, 8443, seq, ack, flags, &[], data),
                )
            };
            let b = |flags, seq, ack, data: &[u8]| {
                ip(
                    false,
                    v6,
                    6,
                    s.peer_ttl,
                    &tcp_full(8443, port, seq, ack, flags, &[], data),
                )
            };
            pkts.push((t, true, a(0x002, 100, 0, &[])));
            pkts.push((t + 30 * US + d, false, b(0x012, 500, 101, &[])));
            pkts.push((t + 40 * US + d, true, a(0x010, 101, 501, &[])));
            pkts.push((t + 60 * US + d, true, a(0x018, 101, 501, &[7; 120])));
            pkts.push((t + 300 * US + 2 * d, false, b(0x018, 501, 221, &[9; 600])));
        }
    }
    pkts.sort_by_key(|p| p.0);
    let mut out = Vec::new();
    for (ts, from_a, p) in pkts {
        let (src, dst) = if from_a {
            (MAC_A, MAC_B)
        } else {
            (MAC_B, MAC_A)
        };
        let f = frame(s.link, src, dst, &p);
        if s.twice {
            out.push((ts, f.clone()));
            out.push((ts + 5 * US, f));
        } else {
            out.push((ts, f));
        }
    }
    out
}

fn collect(s: &Scenario) -> Collector {
    collect_into(Collector::default(), s)
}

fn collect_into(mut c: Collector, s: &Scenario) -> Collector {
    let mut dec = Decoder::new();
    for (i, (ts, f)) in capture(s).iter().enumerate() {
        let decoded = dec.decode_frame(s.link.linktype(), f, None);
        c.on_packet(&PacketContext {
            meta: PacketMeta {
                frame: FrameNo(i as u64 + 1),
                ts: Timestamp(*ts),
                interface: InterfaceId(0),
            },
            decoded: &decoded,
            flow: PacketFlowInfo::default(),
        });
    }
    c
}

fn run(s: &Scenario) -> Vec<Diagnosis> {
    diagnose(&collect(s))
}

fn verdict(d: &Diagnosis, m: Measure) -> Option<Verdict> {
    d.evidence
        .measures
        .iter()
        .find(|c| c.measure == m)
        .map(|c| c.verdict)
}

fn count(d: &Diagnosis, m: Measure, f: Family) -> usize {
    let c = d.evidence.measures.iter().find(|c| c.measure == m);
    let s = c.and_then(|c| if f == Family::Ipv4 { c.ipv4 } else { c.ipv6 });
    s.map_or(0, |s| s.count)
}

const ANSWER: Scenario = Scenario {
    v6_answer_delay: 6 * MS,
    ..BASE
};
const SEND: Scenario = Scenario {
    v6_send_delay: 4 * MS,
    ..BASE
};

#[test]
fn peer_answers_ipv6_late_on_every_link_type() {
    for link in [Link::Ethernet, Link::Sll2] {
        let ds = run(&Scenario { link, ..ANSWER });
        assert_eq!(ds.len(), 1);
        let d = &ds[0];
        let ev = &d.evidence;
        assert_eq!(
            (ev.slow_family, ev.slow_on_wire, ev.slow_in_send_path),
            (Family::Ipv6, true, false)
        );
        assert_eq!(d.severity, Severity::Warning);
        assert_eq!(ev.peer_paired_by, vec![PairedBy::Mac]);
        assert_eq!(ev.peer_on_link, Some(true));
        assert_eq!(verdict(d, Measure::IcmpEchoRtt), Some(Verdict::Ipv6Slower));
        assert_eq!(
            verdict(d, Measure::TcpHandshakeRtt),
            Some(Verdict::Ipv6Slower)
        );
        assert_eq!(
            verdict(d, Measure::TcpRequestResponse),
            Some(Verdict::Ipv6Slower)
        );
        assert_eq!(verdict(d, Measure::SendPath), Some(Verdict::NoDifference));
        assert_eq!(count(d, Measure::IcmpEchoRtt, Family::Ipv6), 20);
        assert_eq!(
            d.flow,
            (
                "2001:db8:41::a".parse().unwrap(),
                "2001:db8:41::b".parse().unwrap()
            )
        );
        assert_eq!(
            d.hosts,
            vec!["192.0.2.42".to_string(), "2001:db8:41::b".to_string()]
        );
        // The first three request/reply pairs of each family are cited.
        for f in 1..=12 {
            assert!(d.frames.contains(&f), "frame {f} of {:?}", d.frames);
        }
    }
}

#[test]
fn send_path_delay_in_the_sender() {
    for link in [Link::Ethernet, Link::Sll2, Link::RawIp] {
        let ds = run(&Scenario { link, ..SEND });
        assert_eq!(ds.len(), 1, "{:?}", ds);
        let ev = &ds[0].evidence;
        assert_eq!(
            (ev.slow_family, ev.slow_on_wire, ev.slow_in_send_path),
            (Family::Ipv6, false, true)
        );
        assert_eq!(ds[0].severity, Severity::Warning);
        assert_eq!(
            verdict(&ds[0], Measure::IcmpEchoRtt),
            Some(Verdict::NoDifference)
        );
        assert_eq!(ev.send_stamp_layout, Some("timeval64_le"));
        assert_eq!(ev.sender_on_link, Some(true));
        assert_eq!(
            ds[0].hosts,
            vec!["192.0.2.41".to_string(), "2001:db8:41::a".to_string()]
        );
    }
}

#[test]
fn controls_are_clean() {
    for link in [Link::Ethernet, Link::Sll2, Link::RawIp] {
        assert!(run(&Scenario { link, ..BASE }).is_empty());
        // Sub-millisecond differences stay below the floor.
        assert!(run(&Scenario {
            link,
            v6_answer_delay: 500 * US,
            v6_send_delay: 500 * US,
            ..BASE
        })
        .is_empty());
    }
}

#[test]
fn behind_a_router_without_mac_pairing() {
    // Raw IP, peer one hop away: no MAC; paired by the one service reached
    // on both families (info), or by DNS (warning).
    let routed = Scenario {
        link: Link::RawIp,
        peer_ttl: 63,
        ..ANSWER
    };
    let ds = run(&routed);
    assert_eq!(ds.len(), 1);
    assert_eq!(ds[0].evidence.peer_paired_by, vec![PairedBy::Service]);
    assert_eq!(ds[0].evidence.client_paired_by, vec![PairedBy::OnlySender]);
    assert_eq!(ds[0].evidence.peer_on_link, Some(false));
    assert_eq!(ds[0].severity, Severity::Info);
    let ds = run(&Scenario {
        dns: true,
        ..routed
    });
    assert_eq!(ds.len(), 1);
    assert!(ds[0].evidence.peer_paired_by.contains(&PairedBy::Dns));
    assert_eq!(ds[0].severity, Severity::Warning);
    // Ethernet behind a router: B's packets carry the router's MAC and a
    // decremented TTL, which pair nothing by MAC.
    let ds = run(&Scenario {
        peer_ttl: 63,
        ..ANSWER
    });
    assert_eq!(ds[0].evidence.peer_paired_by, vec![PairedBy::Service]);
}

#[test]
fn duplicate_sightings_count_once() {
    let ds = run(&Scenario {
        twice: true,
        link: Link::Sll2,
        ..ANSWER
    });
    assert_eq!(ds.len(), 1);
    let d = &ds[0];
    assert_eq!(count(d, Measure::IcmpEchoRtt, Family::Ipv6), 20);
    assert_eq!(count(d, Measure::TcpHandshakeRtt, Family::Ipv6), 4);
    assert_eq!(count(d, Measure::SendPath, Family::Ipv4), 20);
}

#[test]
fn foreign_payloads_give_no_send_path() {
    let c = collect(&Scenario {
        foreign_payload: true,
        ..SEND
    });
    assert!(c.samples.iter().all(|s| s.measure != Measure::SendPath));
    assert!(diagnose(&c).is_empty());
}

#[test]
fn ipv4_slower() {
    let ds = run(&Scenario {
        v4_answer_delay: 20 * MS,
        ..BASE
    });
    assert_eq!(ds.len(), 1);
    assert_eq!(ds[0].evidence.slow_family, Family::Ipv4);
    let f = crate::render::render(&ds[0]);
    let flow = f.flow.expect("flow");
    assert_eq!(
        (flow.protocol, flow.client_port, flow.server_port),
        (Protocol::Icmp, 0, 0)
    );
    assert_eq!(flow.client, "192.0.2.41");
}

#[test]
fn too_few_samples() {
    let s = Scenario {
        pings: 4,
        connections: 2,
        ..ANSWER
    };
    assert!(run(&s).is_empty());
}

#[test]
fn render_names_the_place_and_the_seed_remedy() {
    let f = crate::render::render(&run(&SEND)[0]);
    assert!(f.summary.contains("sendto()"), "{}", f.summary);
    assert!(f.remedy.contains("use_oif_addrs_only=1"), "{}", f.remedy);
    assert_eq!(f.flow.expect("flow").protocol, Protocol::Icmpv6);
    assert_eq!(f.evidence["slow_family"], "ipv6");
    let f = crate::render::render(&run(&ANSWER)[0]);
    assert!(f.summary.contains("inside the peer host"), "{}", f.summary);
    assert!(!f.remedy.contains("use_oif_addrs_only"));
}

/// Each capture-wide cap, lowered, refuses what it cannot keep and says so
/// (`Collector::limits`, the `detector_limit` warnings); at the defaults the
/// scenario reaches none. BASE with a DNS answer: 40 pings (each a send-path
/// and an echo sample), 8 connections (a handshake and a request/response
/// sample each), one DNS name, and four host addresses with a MAC (A's and
/// B's, both families; the resolver's TTL 63 is not an initial one).
#[test]
fn caps_refuse_and_say_so() {
    let s = Scenario { dns: true, ..BASE };
    let full = collect(&s);
    assert_eq!(full.limits(), vec![]);
    assert_eq!(full.samples.len(), 96);
    type Lower = fn(&mut Collector);
    let cases: [(Lower, &str, u64); 4] = [
        (|c| c.bounds.samples.limit = 10, "latency samples", 86),
        // Echo requests are answered before the next one: only the
        // connections (never forgotten) fill the cap.
        (
            |c| c.bounds.pending.limit = 3,
            "TCP connections and ICMP echo requests in progress",
            5,
        ),
        (
            |c| c.bounds.names.limit = 0,
            "DNS names with A or AAAA answers",
            1,
        ),
        // A's IPv4 address kept; the other three refused each time one of
        // them follows a different (MAC, address) pair (counted each time).
        (|c| c.bounds.addresses.limit = 1, "host addresses", 60),
    ];
    for (lower, what, refused) in cases {
        let mut c = Collector::default();
        lower(&mut c);
        let c = collect_into(c, &s);
        let l = c.limits();
        assert_eq!(l.len(), 1, "{what}: {l:?}");
        assert_eq!((l[0].what, l[0].refused), (what, refused), "{l:?}");
        assert!(l[0].first_frame.is_some());
    }
}
