//! Decoding table: one labelled row per link type, encapsulation and option
//! case, each a small hand-made frame. A row passes when every expected piece
//! appears in the decoded summary (see `summary`).

mod common;

use pcapsleuth_decode::{Decoded, Decoder, IpHeader, IpVersion, Transport};
use pcapsleuth_testkit::packet::*;
use std::fmt::Write;

fn ip_s(h: &IpHeader) -> String {
    let v = if h.version == IpVersion::V4 { 4 } else { 6 };
    let mut s = format!(
        "v{v} {}>{} p={} len={} hl={}",
        h.src, h.dst, h.protocol, h.total_len, h.header_len
    );
    if let Some(f) = h.fragment {
        let _ = write!(s, " frag={}/{}/{}", f.offset, f.more, f.id);
    }
    s
}

/// A compact, canonical description of a decode result.
fn summary(d: &Decoded<'_>) -> String {
    let mut s = String::new();
    let l = d.link;
    if l.vlan_count > 0 {
        let _ = write!(
            s,
            "vlans={}:{:?} ",
            l.vlan_count,
            &l.vlans[..usize::from(l.vlan_count).min(2)]
        );
    }
    if let Some(p) = l.sll_pkttype {
        let _ = write!(s, "pkttype={p} ");
    }
    if let Some(i) = l.sll_ifindex {
        let _ = write!(s, "ifindex={i} ");
    }
    if let Some(h) = &d.outer_ip {
        let _ = write!(s, "outer=[{}] ", ip_s(h));
    }
    if let Some(h) = &d.ip {
        let _ = write!(s, "ip=[{}] ", ip_s(h));
    }
    match d.transport {
        Transport::None => s.push_str("none "),
        Transport::Tcp(t) => {
            let o = t.options;
            let _ = write!(
                s,
                "tcp {}>{} seq={} ack={} flags={:#05x} hl={} plen={} cap={} ",
                t.src_port,
                t.dst_port,
                t.seq.0,
                t.ack.0,
                t.flags.0,
                t.header_len,
                t.payload_len,
                t.payload.len()
            );
            if let Some(m) = o.mss {
                let _ = write!(s, "mss={m} ");
            }
            if let Some(w) = o.window_scale {
                let _ = write!(s, "ws={w} ");
            }
            if o.sack_permitted {
                s.push_str("sackp ");
            }
            if o.sack.len > 0 {
                let b: Vec<String> = o
                    .sack
                    .as_slice()
                    .iter()
                    .map(|(l, r)| format!("{}-{}", l.0, r.0))
                    .collect();
                let _ = write!(s, "sack={} ", b.join(","));
            }
            if let Some((a, b)) = o.timestamps {
                let _ = write!(s, "ts={a},{b} ");
            }
            if o.malformed {
                s.push_str("optmalformed ");
            }
        }
        Transport::Udp(u) => {
            let _ = write!(
                s,
                "udp {}>{} plen={} ",
                u.src_port, u.dst_port, u.payload_len
            );
        }
        Transport::Icmp(m) => {
            let v = if m.version == IpVersion::V4 { 4 } else { 6 };
            let _ = write!(s, "icmp{v} t={} c={} {:?} ", m.icmp_type, m.code, m.kind);
            if let Some(mtu) = m.mtu {
                let _ = write!(s, "mtu={mtu} ");
            }
            if let Some(q) = m.quoted {
                let _ = write!(
                    s,
                    "q=[{} sp={:?} dp={:?} seq={:?} ack={:?} flags={:?} tb={}] ",
                    ip_s(&q.ip),
                    q.src_port,
                    q.dst_port,
                    q.tcp_seq.map(|x| x.0),
                    q.tcp_ack.map(|x| x.0),
                    q.tcp_flags.map(|x| x.0),
                    q.transport_bytes
                );
            }
        }
        Transport::Other(p) => {
            let _ = write!(s, "other={p} ");
        }
    }
    match d.stop {
        None => s.push_str("stop=None"),
        Some(st) => {
            let _ = write!(s, "stop={:?}/{:?}@{}", st.layer, st.reason, st.offset);
        }
    }
    s
}

struct Row {
    name: &'static str,
    linktype: u32,
    frame: Vec<u8>,
    expect: &'static [&'static str],
}

fn row(name: &'static str, linktype: u32, frame: Vec<u8>, expect: &'static [&'static str]) -> Row {
    Row {
        name,
        linktype,
        frame,
        expect,
    }
}

const V4AB: &str = "ip=[v4 10.0.0.1>10.0.0.2 p=6";
const V6AB: &str = "ip=[v6 2001:db8::1>2001:db8::2 p=6";
const OUT4: &str = "outer=[v4 192.0.2.1>192.0.2.2";
const TCP: &str = "tcp 1234>80 seq=1000 ack=2000 flags=0x018 hl=20 plen=5 cap=5";

/// The frames most rows wrap: a TCP segment (`t`) in IPv4 (`v4t`), IPv6
/// (`v6t`) and Ethernet (`e4`, and `vx_inner` for the VXLAN payloads).
#[derive(Clone)]
struct Base {
    t: Vec<u8>,
    v4t: Vec<u8>,
    v6t: Vec<u8>,
    e4: Vec<u8>,
    vx_inner: Vec<u8>,
}

fn base() -> Base {
    let t = tcp(1234, 80);
    let v4t = ipv4(6, &t);
    let v6t = ipv6(6, &t);
    let e4 = ethernet(0x0800, &v4t);
    let vx_inner = ethernet(0x0800, &v4t);
    Base {
        t,
        v4t,
        v6t,
        e4,
        vx_inner,
    }
}

/// Every row, in a fixed order (one decoder decodes them all in turn).
fn rows() -> Vec<Row> {
    let base = base();
    let mut rows = ethernet_sll_raw_rows(&base);
    rows.extend(other_link_rows(&base));
    rows.extend(ip_rows(&base));
    rows.extend(tcp_udp_rows(&base));
    rows.extend(icmp_rows(&base));
    rows.extend(ip_tunnel_rows(&base));
    rows.extend(udp_tunnel_rows(&base));
    rows.extend(other_tunnel_rows(&base));
    rows
}

/// Link layers: Ethernet and VLAN tags, LLC/SNAP, SLL/SLL2, raw IP.
fn ethernet_sll_raw_rows(base: &Base) -> Vec<Row> {
    let Base { v4t, v6t, e4, .. } = base.clone();
    vec![
        // ---- link layers ----
        row(
            "ethernet ipv4 tcp",
            1,
            e4.clone(),
            &[V4AB, TCP, "stop=None"],
        ),
        row(
            "ethernet ipv6 tcp",
            1,
            ethernet(0x86DD, &v6t),
            &[V6AB, "len=65 hl=40", TCP, "stop=None"],
        ),
        row(
            "802.1Q",
            1,
            ethernet(0x8100, &concat(&[&vlan_tag(10, 0x0800), &v4t])),
            &["vlans=1:[10]", TCP],
        ),
        row(
            "802.1ad QinQ",
            1,
            ethernet(
                0x88A8,
                &concat(&[&vlan_tag(0x2064, 0x8100), &vlan_tag(200, 0x0800), &v4t]),
            ),
            &["vlans=2:[100, 200]", TCP],
        ),
        row(
            "three stacked tags",
            1,
            ethernet(
                0x9100,
                &concat(&[
                    &vlan_tag(1, 0x8100),
                    &vlan_tag(2, 0x8100),
                    &vlan_tag(3, 0x86DD),
                    &v6t,
                ]),
            ),
            &["vlans=3:[1, 2]", V6AB, TCP],
        ),
        row(
            "VLAN tag cut",
            1,
            ethernet(0x8100, &[0, 10]),
            &["none", "stop=Link/Truncated@14"],
        ),
        row(
            "802.3 length + LLC (not IP)",
            1,
            ethernet(0x0026, &[0x42, 0x42, 0x03, 0, 0, 0]),
            &["stop=Link/Unsupported@14"],
        ),
        row(
            "802.3 + LLC/SNAP ipv4",
            1,
            ethernet(
                0x0030,
                &concat(&[&[0xAA, 0xAA, 0x03, 0, 0, 0, 0x08, 0x00], &v4t]),
            ),
            &[V4AB, TCP, "stop=None"],
        ),
        row(
            "ARP",
            1,
            ethernet(0x0806, &[0; 28]),
            &["none", "stop=Link/Unsupported@14"],
        ),
        row("empty frame", 1, vec![], &["stop=Link/Truncated@0"]),
        row(
            "unknown linktype",
            147,
            e4.clone(),
            &["stop=Link/Unsupported@0"],
        ),
        row(
            "Linux SLL v1 outgoing",
            113,
            concat(&[
                &[0, 4, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x00],
                &v4t,
            ]),
            &["pkttype=4", V4AB, TCP],
        ),
        row(
            "Linux SLL v2 ifindex",
            276,
            concat(&[
                &[
                    0x86, 0xDD, 0, 0, 0, 0, 0, 7, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0,
                ],
                &v6t,
            ]),
            &["pkttype=0", "ifindex=7", V6AB, TCP],
        ),
        row(
            "SLL v1 with VLAN protocol",
            113,
            concat(&[
                &[0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x81, 0x00],
                &vlan_tag(42, 0x0800),
                &v4t,
            ]),
            &["vlans=1:[42]", TCP],
        ),
        row("raw 101 v4", 101, v4t.clone(), &[V4AB, TCP]),
        row("raw 101 v6", 101, v6t.clone(), &[V6AB, TCP]),
        row("raw 12", 12, v4t.clone(), &[V4AB, TCP]),
        row("raw 14", 14, v6t.clone(), &[V6AB, TCP]),
        row("IPV4 228", 228, v4t.clone(), &[V4AB, TCP]),
        row("IPV6 229", 229, v6t.clone(), &[V6AB, TCP]),
        row(
            "IPV4 228 with v6 bytes",
            228,
            v6t.clone(),
            &["stop=Ip/Malformed@0"],
        ),
        row(
            "raw 101 version 5",
            101,
            vec![0x50; 40],
            &["stop=Ip/Malformed@0"],
        ),
    ]
}

/// Link layers: BSD loopback, PPP, NFLOG, IPoIB, 802.11, Cisco HDLC.
fn other_link_rows(base: &Base) -> Vec<Row> {
    let Base { v4t, v6t, .. } = base.clone();
    vec![
        row(
            "null LE AF_INET",
            0,
            concat(&[&[2, 0, 0, 0], &v4t]),
            &[V4AB, TCP],
        ),
        row(
            "null BE AF_INET",
            0,
            concat(&[&[0, 0, 0, 2], &v4t]),
            &[V4AB, TCP],
        ),
        row(
            "null AF_INET6 24",
            0,
            concat(&[&[24, 0, 0, 0], &v6t]),
            &[V6AB, TCP],
        ),
        row(
            "null AF_INET6 28 BE",
            0,
            concat(&[&[0, 0, 0, 28], &v6t]),
            &[V6AB, TCP],
        ),
        row(
            "null AF_INET6 30",
            0,
            concat(&[&[30, 0, 0, 0], &v6t]),
            &[V6AB, TCP],
        ),
        row(
            "null unknown AF",
            0,
            concat(&[&[99, 0, 0, 0], &v4t]),
            &["stop=Link/Unsupported@0"],
        ),
        row(
            "OpenBSD LOOP AF_INET",
            108,
            concat(&[&[0, 0, 0, 2], &v4t]),
            &[V4AB, TCP],
        ),
        row(
            "OpenBSD LOOP AF_INET6",
            108,
            concat(&[&[0, 0, 0, 24], &v6t]),
            &[V6AB, TCP],
        ),
        row(
            "PPP with address/control",
            9,
            concat(&[&[0xFF, 0x03, 0x00, 0x21], &v4t]),
            &[V4AB, TCP],
        ),
        row(
            "PPP compressed protocol",
            9,
            concat(&[&[0x57], &v6t]),
            &[V6AB, TCP],
        ),
        row(
            "PPP LCP",
            9,
            vec![0xFF, 0x03, 0xC0, 0x21, 1, 1, 0, 4],
            &["stop=Link/Unsupported@2"],
        ),
        row(
            "NFLOG",
            239,
            concat(&[
                &[2, 0, 0, 0],
                &[8, 0, 1, 0, 0x08, 0x00, 1, 0], // NFULA_PACKET_HDR
                &((4 + v4t.len()) as u16).to_le_bytes(),
                &[9, 0],
                &v4t,
            ]),
            &[V4AB, TCP],
        ),
        row(
            "Cisco HDLC",
            104,
            concat(&[&[0x0F, 0x00, 0x08, 0x00], &v4t]),
            &[V4AB, TCP],
        ),
    ]
}

/// IPv4 and IPv6 headers, extension headers, fragments.
fn ip_rows(base: &Base) -> Vec<Row> {
    let Base { t, v4t, e4, .. } = base.clone();
    vec![
        // ---- IP ----
        row(
            "IPv4 options",
            1,
            ethernet(
                0x0800,
                &ipv4_full(HOST_A, HOST_B, 6, 1, 0, &[7, 7, 4, 0, 0, 0, 0], &t),
            ),
            &["hl=28", TCP, "stop=None"],
        ),
        row(
            "IPv4 snaplen cut: lengths from the header",
            1,
            ethernet(
                0x0800,
                &ipv4(6, &tcp_full(1234, 80, 1, 0, 0x010, &[], &[0u8; 1000])),
            )[..14 + 20 + 20 + 10]
                .to_vec(),
            &["len=1040", "plen=1000 cap=10", "stop=None"],
        ),
        row(
            "IPv4 total length 0 (TSO)",
            1,
            ethernet(0x0800, &{
                let mut v = v4t.clone();
                v[2] = 0;
                v[3] = 0;
                v
            }),
            &[TCP, "stop=None"],
        ),
        row(
            "IPv4 total length < header",
            1,
            ethernet(0x0800, &{
                let mut v = v4t.clone();
                v[3] = 10;
                v
            }),
            &["none", "stop=Ip/Malformed@14"],
        ),
        row(
            "IPv4 IHL 4",
            1,
            ethernet(0x0800, &[0x44; 40]),
            &["stop=Ip/Malformed@14"],
        ),
        row(
            "IPv4 header cut",
            1,
            e4[..14 + 19].to_vec(),
            &["stop=Ip/Truncated@14"],
        ),
        row(
            "IPv4 non-first fragment",
            1,
            ethernet(0x0800, &ipv4_full(HOST_A, HOST_B, 6, 99, 0x0003, &[], &t)),
            &["frag=24/false/99", "none", "stop=Ip/Fragment@34"],
        ),
        row(
            "IPv6 hop-by-hop, routing, destination options",
            1,
            ethernet(
                0x86DD,
                &ipv6(
                    0,
                    &concat(&[&ipv6_ext8(43), &ipv6_ext8(60), &ipv6_ext8(6), &t]),
                ),
            ),
            &["p=6 len=89 hl=64", TCP, "stop=None"],
        ),
        row(
            "IPv6 AH",
            101,
            ipv6(
                51,
                &concat(&[
                    &[
                        6, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                    ],
                    &t,
                ]),
            ),
            &["hl=64", TCP],
        ),
        row(
            "IPv4 AH",
            101,
            ipv4(
                51,
                &concat(&[
                    &[
                        6, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                    ],
                    &t,
                ]),
            ),
            &["hl=44", TCP],
        ),
        row(
            "IPv6 ESP",
            101,
            ipv6(50, &[0; 32]),
            &["p=50", "other=50", "stop=None"],
        ),
        row(
            "IPv6 no next header",
            101,
            ipv6(59, &[]),
            &["other=59", "stop=None"],
        ),
        row(
            "IPv6 ext header cut",
            101,
            ipv6(0, &[6, 1, 0, 0]),
            &["stop=Ip/Truncated@40"],
        ),
        row(
            "IPv6 atomic fragment",
            101,
            ipv6(44, &concat(&[&[6, 0, 0, 0, 0, 0, 0, 9], &t])),
            &["hl=48", TCP, "stop=None"],
        ),
        row(
            "IPv6 non-first fragment",
            101,
            ipv6(44, &concat(&[&[6, 0, 0, 16, 0, 0, 0, 9], &t])),
            &["frag=16/false/9", "none", "stop=Ip/Fragment@48"],
        ),
    ]
}

/// TCP header and options; UDP.
fn tcp_udp_rows(base: &Base) -> Vec<Row> {
    let Base { t, .. } = base.clone();
    vec![
        // ---- TCP ----
        row(
            "TCP SYN options",
            101,
            ipv4(6, &tcp_full(1, 2, 5, 0, 0x002, &SYN_OPTIONS, &[])),
            &[
                "flags=0x002 hl=40 plen=0",
                "mss=1460 ws=7 sackp ts=1,2",
                "stop=None",
            ],
        ),
        row(
            "TCP all nine flags",
            101,
            ipv4(6, &tcp_full(1, 2, 5, 0, 0x1FF, &[], &[])),
            &["flags=0x1ff"],
        ),
        row(
            "TCP unknown option skipped",
            101,
            ipv4(
                6,
                &tcp_full(1, 2, 5, 0, 0x002, &[30, 4, 9, 9, 2, 4, 5, 0xB4], &[]),
            ),
            &["mss=1460", "stop=None"],
        ),
        row(
            "TCP option length 1 keeps earlier options",
            101,
            ipv4(
                6,
                &tcp_full(1, 2, 5, 0, 0x002, &[2, 4, 5, 0xB4, 3, 1, 7, 0], &[]),
            ),
            &["mss=1460 optmalformed", "stop=None"],
        ),
        row(
            "TCP option past the header",
            101,
            ipv4(
                6,
                &tcp_full(1, 2, 5, 0, 0x002, &[1, 1, 3, 3, 7, 8, 10, 0], &[]),
            ),
            &["ws=7 optmalformed"],
        ),
        row(
            "TCP SACK two blocks",
            101,
            ipv4(
                6,
                &tcp_full(
                    1,
                    2,
                    5,
                    0,
                    0x010,
                    &[
                        1, 1, 5, 18, 0, 0, 0, 10, 0, 0, 0, 20, 0, 0, 0, 30, 0, 0, 0, 40,
                    ],
                    &[],
                ),
            ),
            &["sack=10-20,30-40", "stop=None"],
        ),
        row(
            "TCP SACK four blocks",
            101,
            ipv4(
                6,
                &tcp_full(
                    1,
                    2,
                    5,
                    0,
                    0x010,
                    &concat(&[
                        &[1, 1, 5, 34],
                        &(1u32..=8)
                            .flat_map(|x| x.to_be_bytes())
                            .collect::<Vec<u8>>(),
                    ]),
                    &[],
                ),
            ),
            &["sack=1-2,3-4,5-6,7-8", "stop=None"],
        ),
        row(
            "TCP options cut by the snaplen",
            101,
            ipv4(6, &tcp_full(1, 2, 5, 0, 0x002, &SYN_OPTIONS, &[]))[..20 + 20 + 6].to_vec(),
            &["mss=1460 sackp optmalformed", "stop=Transport/Truncated@20"],
        ),
        row(
            "TCP 12 bytes only",
            101,
            ipv4(6, &t)[..32].to_vec(),
            &["none", "stop=Transport/Truncated@20"],
        ),
        row(
            "TCP data offset 4",
            101,
            ipv4(6, &{
                let mut v = t.clone();
                v[12] = 0x40;
                v
            }),
            &["none", "stop=Transport/Malformed@20"],
        ),
        row(
            "UDP",
            101,
            ipv4(17, &udp(53, 5353, &[0; 12])),
            &["udp 53>5353 plen=12", "stop=None"],
        ),
        row(
            "UDP cut",
            101,
            ipv4(17, &udp(53, 5353, &[0; 12]))[..24].to_vec(),
            &["none", "stop=Transport/Truncated@20"],
        ),
    ]
}

/// ICMP and ICMPv6, with quoted datagrams.
fn icmp_rows(base: &Base) -> Vec<Row> {
    let Base { t, .. } = base.clone();
    vec![
        // ---- ICMP ----
        row(
            "ICMP frag-needed quoting 8 TCP bytes",
            101,
            ipv4(
                1,
                &icmp(3, 4, [0, 0, 0x05, 0x78], &concat(&[&ipv4(6, &tcp_full(1234, 80, 77, 88, 0x018, &[], &[0; 1452]))[..28]])),
            ),
            &[
                "icmp4 t=3 c=4 FragNeeded mtu=1400",
                "q=[v4 10.0.0.1>10.0.0.2 p=6 len=1492 hl=20 sp=Some(1234) dp=Some(80) seq=Some(77) ack=None flags=None tb=8]",
                "stop=None",
            ],
        ),
        row(
            "ICMP frag-needed quoting a full TCP header",
            101,
            ipv4(1, &icmp(3, 4, [0, 0, 0x05, 0x78], &ipv4(6, &tcp_full(1234, 80, 77, 88, 0x018, &[], &[0; 100]))[..60])),
            &["seq=Some(77) ack=Some(88) flags=Some(24) tb=20]"],
        ),
        row(
            "ICMPv6 Packet Too Big",
            101,
            ipv6(58, &icmp(2, 0, [0, 0, 0x05, 0x00], &ipv6(6, &tcp_full(1234, 80, 77, 88, 0x010, &[], &[0; 1400]))[..48])),
            &["icmp6 t=2 c=0 PacketTooBig mtu=1280", "q=[v6 2001:db8::1>2001:db8::2 p=6 len=1460 hl=40 sp=Some(1234)", "tb=8]"],
        ),
        row(
            "ICMP time exceeded quoting UDP",
            101,
            ipv4(1, &icmp(11, 0, [0; 4], &ipv4(17, &udp(999, 33434, &[0; 20]))[..28])),
            &["TimeExceeded", "sp=Some(999) dp=Some(33434) seq=None", "tb=8"],
        ),
        row("ICMP echo request", 101, ipv4(1, &icmp(8, 0, [0, 1, 0, 1], b"ping")), &["icmp4 t=8 c=0 EchoRequest", "stop=None"]),
        row("ICMPv6 echo reply", 101, ipv6(58, &icmp(129, 0, [0, 1, 0, 1], b"pong")), &["icmp6 t=129 c=0 EchoReply"]),
        row(
            "ICMP quote cut inside the IP header",
            101,
            ipv4(1, &icmp(3, 1, [0; 4], &ipv4(6, &t)[..12])),
            &["DestUnreachable", "stop=None"],
        ),
        row("ICMP 6 bytes", 101, ipv4(1, &[3, 4, 0, 0, 0, 0]), &["FragNeeded", "stop=Transport/Truncated@20"]),
    ]
}

/// Tunnels over IP and GRE (IPIP, 6in4, GRE, ERSPAN, PPTP, Aruba).
fn ip_tunnel_rows(base: &Base) -> Vec<Row> {
    let Base { v4t, v6t, e4, .. } = base.clone();
    vec![
        // ---- tunnels ----
        row(
            "IPIP",
            1,
            ethernet(0x0800, &ipv4_outer(4, &v4t)),
            &[OUT4, V4AB, TCP, "stop=None"],
        ),
        row(
            "6in4",
            1,
            ethernet(0x0800, &ipv4_outer(41, &v6t)),
            &[OUT4, V6AB, TCP],
        ),
        row(
            "IPv6-in-IPv6",
            101,
            ipv6_full(doc_ipv6(9), doc_ipv6(10), 41, &v6t),
            &["outer=[v6 2001:db8::9>2001:db8::a", V6AB, TCP],
        ),
        row(
            "IPIP inner cut",
            101,
            ipv4_outer(4, &v4t[..10]),
            &[
                "ip=[v4 192.0.2.1>192.0.2.2",
                "other=4",
                "stop=Ip/Truncated@20",
            ],
        ),
        row(
            "GRE ipv4",
            101,
            ipv4_outer(47, &concat(&[&[0, 0, 0x08, 0x00], &v4t])),
            &[OUT4, V4AB, TCP],
        ),
        row(
            "GRE checksum+key+seq ipv6",
            101,
            ipv4_outer(47, &concat(&[&[0xB0, 0, 0x86, 0xDD], &[0; 12], &v6t])),
            &[OUT4, V6AB, TCP],
        ),
        row(
            "GRE transparent Ethernet bridging",
            101,
            ipv4_outer(
                47,
                &concat(&[
                    &[0x20, 0, 0x65, 0x58, 0, 0, 0, 1],
                    &ethernet(0x8100, &concat(&[&vlan_tag(5, 0x0800), &v4t])),
                ]),
            ),
            &[OUT4, V4AB, TCP],
        ),
        row(
            "ERSPAN type II",
            101,
            ipv4_outer(
                47,
                &concat(&[
                    &[0x10, 0, 0x88, 0xBE, 0, 0, 0, 1],
                    &[0x10, 0, 0, 1, 0, 0, 0, 0],
                    &e4,
                ]),
            ),
            &[OUT4, V4AB, TCP],
        ),
        row(
            "ERSPAN type I",
            101,
            ipv4_outer(47, &concat(&[&[0, 0, 0x88, 0xBE], &e4])),
            &[OUT4, V4AB, TCP],
        ),
        row(
            "ERSPAN type III with platform subheader",
            101,
            ipv4_outer(
                47,
                &concat(&[
                    &[0x10, 0, 0x22, 0xEB, 0, 0, 0, 1],
                    &[0x20, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1],
                    &[0; 8],
                    &e4,
                ]),
            ),
            &[OUT4, V4AB, TCP],
        ),
        row(
            "PPTP enhanced GRE + PPP",
            101,
            ipv4_outer(
                47,
                &concat(&[
                    &[0x30, 0x81, 0x88, 0x0B, 0, 44, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0],
                    &[0xFF, 0x03, 0x00, 0x21],
                    &v4t,
                ]),
            ),
            &[OUT4, V4AB, TCP],
        ),
        row(
            "Aruba GRE 802.11 QoS data",
            101,
            ipv4_outer(
                47,
                &concat(&[
                    &[0, 0, 0x82, 0x00],
                    &[0x88, 0x01],
                    &[0; 22],
                    &[0, 0],
                    &[0xAA, 0xAA, 3, 0, 0, 0, 0x08, 0x00],
                    &v4t,
                ]),
            ),
            &[OUT4, V4AB, TCP],
        ),
    ]
}

/// UDP-port tunnels: VXLAN, Geneve, GTP-U.
fn udp_tunnel_rows(base: &Base) -> Vec<Row> {
    let Base {
        v4t, v6t, vx_inner, ..
    } = base.clone();
    vec![
        row(
            "VXLAN",
            101,
            ipv4_outer(
                17,
                &udp(
                    49152,
                    4789,
                    &concat(&[&[8, 0, 0, 0, 0, 0, 1, 0], &vx_inner]),
                ),
            ),
            &[OUT4, V4AB, TCP],
        ),
        row(
            "VXLAN inner ARP keeps UDP",
            101,
            ipv4_outer(
                17,
                &udp(
                    49152,
                    4789,
                    &concat(&[&[8, 0, 0, 0, 0, 0, 1, 0], &ethernet(0x0806, &[0; 28])]),
                ),
            ),
            &[
                "ip=[v4 192.0.2.1>192.0.2.2",
                "udp 49152>4789",
                "stop=Tunnel/Unsupported@50",
            ],
        ),
        row(
            "Geneve with options, Ethernet",
            101,
            ipv4_outer(
                17,
                &udp(
                    50000,
                    6081,
                    &concat(&[&[1, 0, 0x65, 0x58, 0, 0, 1, 0], &[0; 4], &vx_inner]),
                ),
            ),
            &[OUT4, V4AB, TCP],
        ),
        row(
            "Geneve IPv6 payload",
            101,
            ipv4_outer(
                17,
                &udp(
                    50000,
                    6081,
                    &concat(&[&[0, 0, 0x86, 0xDD, 0, 0, 1, 0], &v6t]),
                ),
            ),
            &[OUT4, V6AB, TCP],
        ),
        row(
            "GTP-U G-PDU with sequence number",
            101,
            ipv4_outer(
                17,
                &udp(
                    2152,
                    2152,
                    &concat(&[&[0x32, 0xFF, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0], &v4t]),
                ),
            ),
            &[OUT4, V4AB, TCP],
        ),
        row(
            "GTP-U with extension header",
            101,
            ipv4_outer(
                17,
                &udp(
                    2152,
                    2152,
                    &concat(&[
                        &[0x34, 0xFF, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x85],
                        &[1, 0, 9, 0],
                        &v6t,
                    ]),
                ),
            ),
            &[OUT4, V6AB, TCP],
        ),
        row(
            "GTP-U echo stays UDP",
            101,
            ipv4_outer(
                17,
                &udp(2152, 2152, &[0x32, 0x01, 0, 4, 0, 0, 0, 0, 0, 1, 0, 0]),
            ),
            &["udp 2152>2152", "stop=None"],
        ),
    ]
}

/// MPLS, PPPoE, Teredo, EtherIP, CAPWAP and nesting.
fn other_tunnel_rows(base: &Base) -> Vec<Row> {
    let Base {
        t, v4t, v6t, e4, ..
    } = base.clone();
    let mut r = vec![
        row(
            "MPLS two labels",
            1,
            ethernet(0x8847, &concat(&[&[0, 1, 0, 64], &[0, 2, 1, 64], &v4t])),
            &[V4AB, TCP, "stop=None"],
        ),
        row(
            "MPLS pseudowire unsupported",
            1,
            ethernet(0x8847, &concat(&[&[0, 1, 1, 64], &[0, 0, 0, 0], &e4])),
            &["stop=Tunnel/Unsupported@14"],
        ),
        row(
            "PPPoE session IPv4",
            1,
            ethernet(
                0x8864,
                &concat(&[
                    &[0x11, 0, 0, 1],
                    &((2 + v4t.len()) as u16).to_be_bytes(),
                    &[0x00, 0x21],
                    &v4t,
                ]),
            ),
            &[V4AB, TCP],
        ),
        row(
            "PPPoE session IPv6 over QinQ",
            1,
            ethernet(
                0x88A8,
                &concat(&[
                    &vlan_tag(1, 0x8100),
                    &vlan_tag(2, 0x8864),
                    &[0x11, 0, 0, 1],
                    &((2 + v6t.len()) as u16).to_be_bytes(),
                    &[0x00, 0x57],
                    &v6t,
                ]),
            ),
            &["vlans=2:[1, 2]", V6AB, TCP],
        ),
        row(
            "Teredo with origin indication",
            101,
            ipv4_outer(
                17,
                &udp(
                    3544,
                    40000,
                    &concat(&[&[0, 0, 0x9C, 0x40, 1, 2, 3, 4], &v6t]),
                ),
            ),
            &[OUT4, V6AB, TCP],
        ),
        row(
            "Teredo bubble-less garbage stays UDP",
            101,
            ipv4_outer(17, &udp(3544, 40000, &[1, 2, 3])),
            &["udp 3544>40000", "stop=None"],
        ),
        row(
            "EtherIP",
            101,
            ipv4_outer(97, &concat(&[&[0x30, 0], &e4])),
            &[OUT4, V4AB, TCP],
        ),
        row(
            "ICMP error inside GRE",
            101,
            ipv4_outer(
                47,
                &concat(&[
                    &[0, 0, 0x08, 0x00],
                    &ipv4(1, &icmp(3, 4, [0, 0, 5, 0xDC], &ipv4(6, &t)[..28])),
                ]),
            ),
            &[OUT4, "FragNeeded mtu=1500", "sp=Some(1234)"],
        ),
    ];
    r.push(row(
        "CAPWAP data, byte-swapped 802.11",
        101,
        ipv4_outer(
            17,
            &udp(
                41264,
                5247,
                &concat(&[
                    &[
                        0, 0x20, 0x03, 0x20, 0, 0, 0, 0, 4, 0xBF, 0x23, 0, 0, 0, 0, 0,
                    ],
                    &[0x01, 0x08],
                    &[0; 22],
                    &[0xAA, 0xAA, 3, 0, 0, 0, 0x08, 0x00],
                    &v4t,
                ]),
            ),
        ),
        &[OUT4, V4AB, TCP],
    ));
    r.push(row(
        "VLAN inside VXLAN not recorded as link VLAN",
        101,
        ipv4_outer(
            17,
            &udp(
                49152,
                4789,
                &concat(&[
                    &[8, 0, 0, 0, 0, 0, 1, 0],
                    &ethernet(0x8100, &concat(&[&vlan_tag(9, 0x0800), &v4t])),
                ]),
            ),
        ),
        &[OUT4, V4AB, TCP],
    ));
    r
}

#[test]
fn decoding_table() {
    let mut failures = Vec::new();
    let mut dec = Decoder::new();
    let rows = rows();
    for r in &rows {
        let d = dec.decode(r.linktype, &r.frame);
        let s = summary(&d);
        let missing: Vec<&&str> = r.expect.iter().filter(|e| !s.contains(**e)).collect();
        if !missing.is_empty() {
            failures.push(format!("{}: missing {:?}\n    got {}", r.name, missing, s));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

#[test]
fn vlan_inside_tunnel_is_not_a_link_vlan() {
    let v4t = ipv4(6, &tcp(1234, 80));
    let f = ipv4_outer(
        17,
        &udp(
            49152,
            4789,
            &concat(&[
                &[8, 0, 0, 0, 0, 0, 1, 0],
                &ethernet(0x8100, &concat(&[&vlan_tag(9, 0x0800), &v4t])),
            ]),
        ),
    );
    let mut dec = Decoder::new();
    let d = dec.decode(101, &f);
    assert_eq!(d.link.vlan_count, 0);
    assert!(matches!(d.transport, Transport::Tcp(_)));
}
