//! Table tests over synthesized flow events and packets.

use super::*;
use pcapsleuth_decode::{Decoded, IcmpMessage, IpHeader, IpVersion, QuotedPacket};
use pcapsleuth_detect::{PacketFlowInfo, PacketMeta};
use pcapsleuth_flow::{IcmpErrorEvent, QuotedSegmentMatch};

use pcapsleuth_detect::synth::{self, at as ts, evidence as ev, frag_needed, segment, C2S};

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
                frame: f,
                ts: ts(ms - 0.1),
                rel_seq,
                payload_len: 1448,
                ip_len: 1500,
            }),
            ..frag_needed(frame, ts(ms), ip(src), synth::v4_pair(48001, 9001), rel_seq)
        }));
    }
    fn run(&mut self) -> Vec<Finding> {
        self.d.finish(&self.ctx)
    }
}

#[test]
fn router_frag_needed_with_immediate_retransmission_is_info_grouped() {
    let mut c = Cap::new();
    let mut icmp_frames = Vec::new();
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
        icmp_frames.push(20 + k);
    }
    c.data(30, 1.239, 1, 1348);
    let out = c.run();
    assert_eq!(out.len(), 1, "{out:?}");
    let f = &out[0];
    assert_eq!(f.severity, Severity::Info);
    assert!(icmp_frames.iter().all(|x| f.frames.contains(x)));
    assert!(f.frames.contains(&10) && f.frames.contains(&30));
    assert_eq!(ev(f, "count"), &json!(5));
    assert_eq!(ev(f, "mtu"), &json!(1400));
    assert_eq!(ev(f, "self_addressed"), &json!(false));
    assert_eq!(ev(f, "mtu_deficit_bytes"), &json!(100));
    assert_eq!(ev(f, "quoted_size_bytes"), &json!(1500));
    assert_eq!(ev(f, "sender_next"), &json!("immediate"));
    assert_eq!(ev(f, "sender_delay_ms"), &json!(0.139));
    assert_eq!(ev(f, "quoted_seq"), &json!(ISN.wrapping_add(1)));
    assert_eq!(ev(f, "recurrence_s"), &Value::Null);
    assert_eq!(f.tcp_stream, Some(0));
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
    let f = &out[0];
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(ev(f, "self_addressed"), &json!(true));
    assert_eq!(ev(f, "sender_next"), &json!("delayed"));
    assert_eq!(ev(f, "sender_delay_ms"), &json!(206.909));
    assert_eq!(ev(f, "sender_next_frame"), &json!(9));
    assert!(f.summary.starts_with("Self-addressed"), "{}", f.summary);
    assert_eq!(f.frames, vec![9, 10, 11]);
}

#[test]
fn router_icmp_then_long_wait_is_a_warning_and_never_is_reported() {
    let mut c = Cap::new();
    c.icmp(10, 0.0, "192.0.2.1", 1480, 1, Some(9));
    c.data(11, 310.0, 1, 1428);
    let out = c.run();
    assert_eq!(out[0].severity, Severity::Warning);
    assert_eq!(
        ev(&out[0], "encapsulation_guess"),
        &json!("IPIP / IPVS tunnel mode (20 bytes)")
    );

    let mut c = Cap::new();
    c.icmp(10, 0.0, "192.0.2.1", 1480, 1, Some(9));
    c.data(11, 1.0, 90_000, 1428);
    let out = c.run();
    assert_eq!(ev(&out[0], "sender_next"), &json!("never"));
    assert_eq!(out[0].severity, Severity::Info);
}

#[test]
fn recurrence_every_600_seconds_is_called_out() {
    let mut c = Cap::new();
    c.icmp(10, 0.0, "192.0.2.1", 1480, 1, None);
    c.icmp(20, 605_000.0, "192.0.2.1", 1480, 500_000, None);
    c.icmp(30, 1_210_000.0, "192.0.2.1", 1480, 900_000, None);
    let out = c.run();
    assert_eq!(out.len(), 1);
    assert_eq!(ev(&out[0], "recurrence_s"), &json!(605));
    assert!(out[0].summary.contains("mtu_expires"));
}

#[test]
fn non_tcp_quote_is_reported_from_the_packet() {
    let mut d = FragNeeded::default();
    let hdr = |src: &str, dst: &str, proto: u8, len: u32| IpHeader {
        version: IpVersion::V4,
        src: ip(src),
        dst: ip(dst),
        ttl: 64,
        ip_id: Some(1),
        total_len: len,
        header_len: 20,
        protocol: proto,
        dont_fragment: true,
        fragment: None,
    };
    let decoded = Decoded {
        ip: Some(hdr("192.0.2.1", "192.0.2.10", 1, 576)),
        transport: Transport::Icmp(IcmpMessage {
            version: IpVersion::V4,
            icmp_type: 3,
            code: 4,
            kind: IcmpKind::FragNeeded,
            mtu: Some(1450),
            quoted: Some(QuotedPacket {
                ip: hdr("192.0.2.10", "198.51.100.53", 17, 1500),
                src_port: Some(5353),
                dst_port: Some(53),
                tcp_seq: None,
                tcp_ack: None,
                tcp_flags: None,
                transport_bytes: 8,
            }),
        }),
        ..Default::default()
    };
    let pkt = PacketContext {
        meta: PacketMeta {
            frame: 7,
            ts: ts(0.0),
            interface: 0,
        },
        decoded: &decoded,
        flow: PacketFlowInfo::default(),
    };
    d.on_packet(&pkt);
    d.on_packet(&pkt); // the same frame twice is one message
    let out = d.finish(&FinishContext::default());
    assert_eq!(out.len(), 1);
    let f = &out[0];
    assert_eq!(f.tcp_stream, None);
    assert_eq!(f.frames, vec![7]);
    assert_eq!(ev(f, "encapsulation_guess"), &json!("VXLAN (50 bytes)"));
    assert_eq!(ev(f, "mtu_deficit_bytes"), &json!(50));
    assert_eq!(ev(f, "sender_next"), &json!("unknown"));
    assert_eq!(f.flow.as_ref().map(|r| r.protocol.as_str()), Some("udp"));
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
    let f = &out[0];
    assert_eq!(ev(f, "quoted_not_captured"), &json!(true));
    assert_eq!(ev(f, "largest_captured_bytes"), &json!(1500));
    assert!(f.summary.contains("never seen to send"), "{}", f.summary);
    assert!(f.summary.contains("LRO/GRO"), "{}", f.summary);
    assert!(!f.summary.contains("encapsulation guess"), "{}", f.summary);
    assert!(f.remedy.contains("lro off"), "{}", f.remedy);

    // A real oversize datagram on the wire is the ordinary case.
    let mut c = Cap::new();
    c.data(5, 0.0, 1, 1448);
    c.icmp(9, 1.0, "192.0.2.1", 1492, 1, Some(5));
    c.data(10, 1.1, 1, 1440);
    let out = c.run();
    assert_eq!(ev(&out[0], "quoted_not_captured"), &json!(false));
    assert!(
        out[0].summary.contains("8 bytes short"),
        "{}",
        out[0].summary
    );
}

#[test]
fn icmp_quote_has_no_ports_and_one_byte_is_singular() {
    // ipv6-atomic-fragments-toobig/toobig.pcap: PTB (MTU 1200) quoting a
    // 1201-byte ICMPv6 echo; the summary printed "[..]:0" and "1 bytes".
    let mut d = FragNeeded::default();
    let hdr = |src: &str, dst: &str, proto: u8, len: u32| IpHeader {
        version: IpVersion::V6,
        src: ip(src),
        dst: ip(dst),
        ttl: 64,
        ip_id: None,
        total_len: len,
        header_len: 40,
        protocol: proto,
        dont_fragment: true,
        fragment: None,
    };
    let decoded = Decoded {
        ip: Some(hdr("2001:db8:2::2", "fe80::1", 58, 1240)),
        transport: Transport::Icmp(IcmpMessage {
            version: IpVersion::V6,
            icmp_type: 2,
            code: 0,
            kind: IcmpKind::PacketTooBig,
            mtu: Some(1200),
            quoted: Some(QuotedPacket {
                ip: hdr("fe80::1", "2001:db8:2::2", 58, 1201),
                src_port: None,
                dst_port: None,
                tcp_seq: None,
                tcp_ack: None,
                tcp_flags: None,
                transport_bytes: 8,
            }),
        }),
        ..Default::default()
    };
    d.on_packet(&PacketContext {
        meta: PacketMeta {
            frame: 2,
            ts: ts(0.0),
            interface: 0,
        },
        decoded: &decoded,
        flow: PacketFlowInfo::default(),
    });
    let out = d.finish(&FinishContext::default());
    assert_eq!(out.len(), 1);
    let s = &out[0].summary;
    assert!(s.contains("for ICMPv6 fe80::1 -> 2001:db8:2::2:"), "{s}");
    assert!(!s.contains(":0"), "{s}");
    assert!(s.contains("1 byte short of the 1201-byte datagram"), "{s}");
}
