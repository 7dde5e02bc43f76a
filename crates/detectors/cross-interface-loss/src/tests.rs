//! Table tests of the heuristics, on hand-made records.

use crate::{diagnose, Basis, NatKind, Port, PortInfo, Record, Shape, SubPort, TcpBits};
use pcapsleuth_core::{Endpoint, Protocol, Severity};
use pcapsleuth_core::{FrameNo, InterfaceId};
use std::collections::BTreeMap;

const MS: i64 = 1_000_000;
const CNI0: Port = Port {
    interface: InterfaceId(0),
    sub: SubPort::Whole,
};
const ETH0: Port = Port {
    interface: InterfaceId(1),
    sub: SubPort::Whole,
};

fn ep(s: &str) -> Endpoint {
    let (a, p) = s.rsplit_once(':').unwrap();
    Endpoint {
        addr: a.parse().unwrap(),
        port: p.parse().unwrap(),
    }
}

/// A packet: `fp` is its identity (equal on every copy), `ttl` 64 inside.
#[derive(Clone, Copy)]
struct P {
    frame: u64,
    ms: i64,
    port: Port,
    ttl: u8,
    src: &'static str,
    dst: &'static str,
    fp: u64,
    tcp: Option<TcpBits>,
}

fn syn(seq: u32) -> Option<TcpBits> {
    Some(TcpBits {
        seq,
        flags: 0x002,
        payload_len: 0,
        tsval: Some(seq ^ 7),
    })
}

fn data(seq: u32, len: u32) -> Option<TcpBits> {
    Some(TcpBits {
        seq,
        flags: 0x018,
        payload_len: len,
        tsval: None,
    })
}

fn ack(seq: u32) -> Option<TcpBits> {
    Some(TcpBits {
        seq,
        flags: 0x010,
        payload_len: 0,
        tsval: None,
    })
}

fn record(p: P) -> Record {
    Record {
        frame: FrameNo(p.frame),
        ts: p.ms * MS,
        port: p.port,
        outgoing: false,
        ttl: p.ttl,
        proto: if p.tcp.is_some() {
            Protocol::Tcp
        } else {
            Protocol::Udp
        },
        src: ep(p.src),
        dst: ep(p.dst),
        fp: p.fp,
        strong: true,
        ip_id: Some(p.fp as u32),
        stream: None,
        tcp: p.tcp,
        udp_len: if p.tcp.is_some() { 0 } else { 20 },
        l4_hash: p.fp,
    }
}

/// Both ports capture from 0 to `until_ms`.
fn ports(until_ms: i64) -> BTreeMap<Port, PortInfo> {
    [(CNI0, "cni0"), (ETH0, "eth0")]
        .into_iter()
        .map(|(p, name)| {
            (
                p,
                PortInfo {
                    name: name.into(),
                    first_ts: 0,
                    last_ts: until_ms * MS,
                    frames: 1,
                    if_drops: None,
                },
            )
        })
        .collect()
}

const C1: &str = "192.0.2.11:40002";
const C1_OUT: &str = "198.51.100.2:7291";
const SRV: &str = "198.51.100.80:8080";

/// The seed: SYN 1 lost after SNAT, SYN 2 crosses under a new source port.
fn seed_case() -> Vec<Record> {
    let p = |frame, ms, port, ttl, src, dst, fp, tcp| P {
        frame,
        ms,
        port,
        ttl,
        src,
        dst,
        fp,
        tcp,
    };
    vec![
        record(p(1, 100, CNI0, 64, C1, SRV, 11, syn(500))),
        record(p(2, 1100, CNI0, 64, C1, SRV, 12, syn(500))),
        record(p(3, 1100, ETH0, 63, C1_OUT, SRV, 12, syn(500))),
        record(p(4, 1101, ETH0, 64, SRV, C1_OUT, 13, ack(900))),
        record(p(5, 1101, CNI0, 63, SRV, C1, 13, ack(900))),
    ]
}

#[test]
fn first_syn_lost_after_snat_is_the_seed_shape() {
    let d = diagnose(&seed_case(), &ports(10_000));
    assert_eq!(d.len(), 1);
    let ev = &d[0].evidence;
    assert_eq!(d[0].severity, Severity::Warning);
    assert_eq!(ev.shape, Shape::SynAfterSnat);
    assert_eq!(ev.basis, Basis::Conversation);
    assert_eq!(ev.nat, NatKind::Snat);
    assert_eq!(ev.source_port_rewritten, Some(true));
    assert_eq!(ev.lost_frames, [1]);
    assert_eq!(
        ev.outer_flow.as_deref(),
        Some("198.51.100.2:7291 -> 198.51.100.80:8080")
    );
    assert_eq!(ev.syn_number, Some(1));
    assert_eq!(ev.retransmission_crossed, Some(true));
    assert_eq!(
        (ev.crossed_inner_frame, ev.crossed_outer_frame),
        (Some(FrameNo(2)), Some(FrameNo(3)))
    );
    assert_eq!(ev.delay_ms, Some(1000.0));
    assert_eq!(
        (ev.ingress_interface.as_str(), ev.egress_interface.as_str()),
        ("cni0", "eth0")
    );
    assert_eq!((ev.pair_lost_packets, ev.pair_crossed_packets), (1, 1));
    assert_eq!(d[0].flow.client_port, 40002);
}

#[test]
fn what_is_not_a_loss() {
    let base = seed_case();
    // (name, records, ports until ms): each must give no diagnosis.
    let mut single = base.clone();
    single.retain(|r| r.port == CNI0);
    let single_ports: BTreeMap<Port, PortInfo> = ports(10_000)
        .into_iter()
        .filter(|(p, _)| *p == CNI0)
        .collect();
    assert!(diagnose(&single, &single_ports).is_empty(), "single port");
    // The uplink capture began after the first SYN.
    let mut late = ports(10_000);
    late.get_mut(&ETH0).unwrap().first_ts = 500 * MS;
    assert!(
        diagnose(&base, &late).is_empty(),
        "egress not capturing yet"
    );
    // It ended before the copy could have been captured.
    let mut ended = ports(10_000);
    ended.get_mut(&ETH0).unwrap().last_ts = 120 * MS;
    assert!(diagnose(&base[..1], &ended).is_empty(), "egress stopped");
    let mut cases: Vec<(&str, Vec<Record>)> = Vec::new();
    // Local delivery: to the host's own address, never crossing.
    let mut local = base.clone();
    local.push(record(P {
        frame: 9,
        ms: 2000,
        port: CNI0,
        ttl: 64,
        src: C1,
        dst: "192.0.2.1:53",
        fp: 99,
        tcp: None,
    }));
    cases.push(("local delivery", local[1..].to_vec()));
    // Routed back out of the same port (DNAT to a local pod): forwarded.
    let mut hairpin = base.clone();
    hairpin.push(record(P {
        frame: 6,
        ms: 100,
        port: CNI0,
        ttl: 63,
        src: C1,
        dst: "192.0.2.12:8080",
        fp: 11,
        tcp: syn(500),
    }));
    cases.push(("hairpin", hairpin));
    // TTL 1: the router must drop it (traceroute).
    let mut ttl1 = base.clone();
    ttl1[0].ttl = 1;
    cases.push(("ttl 1", ttl1));
    // GSO: a 2896-byte segment inside, two 1448-byte segments on the uplink.
    let mut gso = base.clone();
    for (frame, port, fp, seq, len, src) in [
        (10, CNI0, 40, 501, 2896, C1),
        (11, ETH0, 41, 501, 1448, C1_OUT),
        (12, ETH0, 42, 1949, 1448, C1_OUT),
    ] {
        gso.push(record(P {
            frame,
            ms: 1200,
            port,
            ttl: if port == CNI0 { 64 } else { 63 },
            src,
            dst: SRV,
            fp,
            tcp: data(seq, len),
        }));
    }
    cases.push(("gso", gso[1..].to_vec()));
    for (name, recs) in cases {
        assert!(diagnose(&recs, &ports(10_000)).is_empty(), "{name}");
    }
}

#[test]
fn severity_ladder() {
    // (case, expected severity): never came up → error, pure ACK → info.
    let base = seed_case();
    // Every SYN lost, the uplink captured 5 s more; a crossed ACK teaches the mapping.
    let never: Vec<Record> = vec![
        base[0],
        record(P {
            frame: 2,
            ms: 1100,
            port: CNI0,
            ttl: 64,
            src: C1,
            dst: SRV,
            fp: 21,
            tcp: syn(500),
        }),
        record(P {
            frame: 3,
            ms: 3100,
            port: CNI0,
            ttl: 64,
            src: C1,
            dst: SRV,
            fp: 22,
            tcp: ack(501),
        }),
        record(P {
            frame: 4,
            ms: 3100,
            port: ETH0,
            ttl: 63,
            src: C1_OUT,
            dst: SRV,
            fp: 22,
            tcp: ack(501),
        }),
        record(P {
            frame: 5,
            ms: 3200,
            port: CNI0,
            ttl: 64,
            src: C1,
            dst: SRV,
            fp: 23,
            tcp: ack(501),
        }),
    ];
    let d = diagnose(&never, &ports(8_000));
    let sev: Vec<(u64, Severity)> = d
        .iter()
        .map(|d| (d.evidence.lost_frames[0].get(), d.severity))
        .collect();
    assert_eq!(
        sev,
        [
            (1, Severity::Error),
            (2, Severity::Error),
            (5, Severity::Info)
        ]
    );
    assert!(d[0].never_crossed);
    assert_eq!(d[2].evidence.shape, Shape::TcpControl);
}

#[test]
fn udp_to_a_dnat_service_is_found_by_service_when_its_socket_never_crossed() {
    let svc = "198.51.100.53:53";
    let real = "203.0.113.53:53";
    let q = |frame, port, src: &'static str, dst, fp| {
        record(P {
            frame,
            ms: frame as i64 * 10,
            port,
            ttl: if port == CNI0 { 64 } else { 63 },
            src,
            dst,
            fp,
            tcp: None,
        })
    };
    let mut recs = vec![
        q(1, CNI0, "192.0.2.50:1001", svc, 1),
        q(2, ETH0, "192.0.2.50:1001", real, 1),
        q(3, CNI0, "192.0.2.50:1002", svc, 2),
        q(4, ETH0, "192.0.2.50:1002", real, 2),
        q(5, CNI0, "192.0.2.50:1003", svc, 3),
    ];
    let d = diagnose(&recs, &ports(10_000));
    assert_eq!(d.len(), 1);
    let ev = &d[0].evidence;
    assert_eq!(
        (ev.basis, ev.shape, ev.nat),
        (Basis::Service, Shape::UdpToDnatService, NatKind::Dnat)
    );
    assert_eq!(ev.outer_flow, None);
    // An answer came back to that socket (it left by another uplink, ECMP):
    // not lost.
    let mut answered = recs.clone();
    answered.push(record(P {
        frame: 6,
        ms: 60,
        port: CNI0,
        ttl: 63,
        src: svc,
        dst: "192.0.2.50:1003",
        fp: 6,
        tcp: None,
    }));
    assert!(diagnose(&answered, &ports(10_000)).is_empty(), "answered");
    // The egress copy's payload hash differs (another snap length) but its
    // IPv4 ID and length match: it crossed.
    let mut cut = recs.clone();
    let mut copy = q(6, ETH0, "192.0.2.50:1003", real, 77);
    copy.ip_id = Some(3);
    cut.push(copy);
    assert!(diagnose(&cut, &ports(10_000)).is_empty(), "snap length");
    // One client is not a service: nothing is expected of another socket.
    recs.drain(2..4);
    assert!(diagnose(&recs, &ports(10_000)).is_empty());
}

#[test]
fn sll2_copies_on_veth_and_bridge_are_one_packet() {
    let any = |i| Port {
        interface: InterfaceId(0),
        sub: SubPort::Ifindex(i),
    };
    let (veth, bridge, uplink, veth2) = (any(3), any(5), any(2), any(4));
    let mk = |frame, ms, port, ttl, out, src, dst, fp, tcp| {
        let mut r = record(P {
            frame,
            ms,
            port,
            ttl,
            src,
            dst,
            fp,
            tcp,
        });
        r.outgoing = out;
        r
    };
    let recs = vec![
        mk(1, 100, veth, 64, false, C1, SRV, 11, syn(500)),
        mk(2, 100, bridge, 64, false, C1, SRV, 11, syn(500)),
        mk(3, 1100, veth, 64, false, C1, SRV, 12, syn(500)),
        mk(4, 1100, bridge, 64, false, C1, SRV, 12, syn(500)),
        mk(5, 1100, uplink, 63, true, C1_OUT, SRV, 12, syn(500)),
        // Bridged between two ports (same TTL, received then sent): a crossing.
        mk(6, 2000, veth, 64, false, C1, "192.0.2.12:80", 30, ack(7)),
        mk(7, 2000, veth2, 64, true, C1, "192.0.2.12:80", 30, ack(7)),
    ];
    let infos: BTreeMap<Port, PortInfo> = [veth, bridge, uplink, veth2]
        .into_iter()
        .map(|p| {
            (
                p,
                PortInfo {
                    name: format!("{p:?}"),
                    first_ts: 0,
                    last_ts: 10_000 * MS,
                    frames: 1,
                    if_drops: None,
                },
            )
        })
        .collect();
    let d = diagnose(&recs, &infos);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].evidence.lost_frames, [1, 2]);
    assert_eq!(d[0].evidence.seen_on.len(), 2);
    assert_eq!(d[0].evidence.pair_crossed_packets, 1);
    let clusters = crate::cluster::clusters(&recs);
    let bridged = clusters
        .iter()
        .find(|c| c.ingress.iter().any(|&i| recs[i].frame == 6))
        .unwrap();
    assert!(bridged.crossed());
}

#[test]
fn a_record_stays_small() {
    // MAX_RECORDS records must stay a few hundred MB.
    assert!(
        std::mem::size_of::<Record>() <= 160,
        "{}",
        std::mem::size_of::<Record>()
    );
}
