//! The UDP headers Wireshark numbers besides the transport: `UdpDatagram::length`
//! (the raw Length field), `Decoded::outer_udp` (a UDP tunnel's outer header),
//! `Decoded::first_fragment_udp` (a first fragment cut by the snaplen), and
//! LINKTYPE_PKTAP.

use pcapsleuth_decode::{Decoder, StopReason, Transport, UdpLayer};
use pcapsleuth_testkit::packet::*;

/// An Ethernet frame carrying IPv4 UDP from `OUTER_A` to `OUTER_B`, ports 50000 → 4789 (VXLAN).
fn vxlan(inner_ethernet: &[u8]) -> Vec<u8> {
    let vxlan_header = [0x08, 0, 0, 0, 0, 0, 0x2A, 0];
    ethernet(
        0x0800,
        &ipv4_outer(
            17,
            &udp(50000, 4789, &concat(&[&vxlan_header, inner_ethernet])),
        ),
    )
}

#[test]
fn the_raw_length_field_is_exposed() {
    let f = ethernet(0x0800, &ipv4(17, &udp(5353, 53, b"query")));
    let mut dec = Decoder::new();
    let d = dec.decode(1, &f);
    assert!(matches!(d.transport, Transport::Udp(u) if u.length == 13 && u.payload_len == 5));
    assert_eq!(d.outer_udp, None);
}

#[test]
fn vxlan_records_the_outer_udp_header() {
    let inner = ethernet(0x0800, &ipv4(17, &udp(1000, 2000, b"in")));
    let f = vxlan(&inner);
    let mut dec = Decoder::new();
    let d = dec.decode(1, &f);
    let Some(UdpLayer {
        ip,
        src_port,
        dst_port,
        length,
    }) = d.outer_udp
    else {
        panic!("no outer UDP: {d:?}");
    };
    assert_eq!((src_port, dst_port), (50000, 4789));
    assert_eq!(usize::from(length), 8 + 8 + inner.len());
    assert_eq!(
        ip.src.to_string(),
        std::net::Ipv4Addr::from(OUTER_A).to_string()
    );
    assert!(matches!(d.transport, Transport::Udp(u) if (u.src_port, u.dst_port) == (1000, 2000)));
}

#[test]
fn vxlan_carrying_tcp_keeps_the_outer_udp_header() {
    let f = vxlan(&ethernet(0x0800, &ipv4(6, &tcp(1000, 80))));
    let mut dec = Decoder::new();
    let d = dec.decode(1, &f);
    assert!(matches!(d.transport, Transport::Tcp(_)));
    assert_eq!(d.outer_udp.map(|u| u.dst_port), Some(4789));
}

#[test]
fn a_bad_length_field_stops_before_the_tunnel() {
    let inner = ethernet(0x0800, &ipv4(6, &tcp(1000, 80)));
    let mut f = vxlan(&inner);
    // UDP Length field (Ethernet 14 + IPv4 20 + 4) set to 7.
    f[38..40].copy_from_slice(&7u16.to_be_bytes());
    let mut dec = Decoder::new();
    let d = dec.decode(1, &f);
    assert!(matches!(d.transport, Transport::Udp(u) if u.length == 7 && u.dst_port == 4789));
    assert_eq!(d.outer_udp, None);
}

#[test]
fn a_cut_first_fragment_records_its_udp_header_only() {
    // First fragment (MF, offset 0) of a 1000-byte UDP datagram, cut by the snaplen.
    let dgram = udp(40000, 53, &[0x55; 992]);
    let frag = ipv4_full(HOST_A, HOST_B, 17, 0x77, 0x2000, &[], &dgram[..600]);
    let f = ethernet(0x0800, &frag);
    let cut = &f[..14 + 20 + 100];
    let mut dec = Decoder::new();
    let d = dec.decode_frame(1, cut, Some(f.len() as u32));
    assert_eq!(d.transport, Transport::None);
    assert_eq!(d.stop.map(|s| s.reason), Some(StopReason::Fragment));
    let u = d.first_fragment_udp.expect("header recorded");
    assert_eq!((u.src_port, u.dst_port, u.length), (40000, 53, 1000));
    assert_eq!(u.ip.fragment.map(|f| (f.offset, f.more)), Some((0, true)));

    // The same fragment fully captured goes to the reassembler instead.
    let mut dec = Decoder::new();
    let d = dec.decode(1, &f);
    assert_eq!(d.first_fragment_udp, None);
    assert_eq!(d.stop.map(|s| s.reason), Some(StopReason::Fragment));

    // A frame shorter on the wire than its IP length field (badpackets.pcap):
    // not reassembled by Wireshark either, so the header is recorded.
    let mut dec = Decoder::new();
    let d = dec.decode_frame(1, cut, Some(cut.len() as u32));
    assert_eq!(d.first_fragment_udp.map(|u| u.dst_port), Some(53));
    assert_eq!(d.transport, Transport::None);

    // Cut inside the UDP header: nothing recorded.
    let mut dec = Decoder::new();
    let d = dec.decode_frame(1, &f[..14 + 20 + 6], Some(f.len() as u32));
    assert_eq!(d.first_fragment_udp, None);
}

#[test]
fn a_cut_later_fragment_records_nothing() {
    let frag = ipv4_full(HOST_A, HOST_B, 17, 0x77, 0x2000 | 75, &[], &[0x55; 600]);
    let f = ethernet(0x0800, &frag);
    let mut dec = Decoder::new();
    let d = dec.decode_frame(1, &f[..100], Some(f.len() as u32));
    assert_eq!(d.first_fragment_udp, None);
}

#[test]
fn pktap_carrying_ethernet() {
    let mut header = vec![0u8; 108];
    header[0..4].copy_from_slice(&108u32.to_le_bytes());
    header[4..8].copy_from_slice(&1u32.to_le_bytes());
    header[8..12].copy_from_slice(&1u32.to_le_bytes());
    let f = concat(&[&header, &ethernet(0x0800, &ipv4(17, &udp(63538, 53, b"q")))]);
    let mut dec = Decoder::new();
    let d = dec.decode(258, &f);
    assert!(
        matches!(d.transport, Transport::Udp(u) if u.dst_port == 53),
        "{d:?}"
    );
    // A header shorter than the minimum is malformed.
    header[0..4].copy_from_slice(&20u32.to_le_bytes());
    let f = concat(&[&header, &ethernet(0x0800, &ipv4(17, &udp(63538, 53, b"q")))]);
    let mut dec = Decoder::new();
    assert_eq!(
        dec.decode(258, &f).stop.map(|s| s.reason),
        Some(StopReason::Malformed)
    );
}
