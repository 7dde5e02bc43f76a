//! `IcmpMessage::echo` (identifier, sequence, data of echo requests and
//! replies) and `LinkInfo::src_mac` (Ethernet / SLL / SLL2 source address).

use pcapsleuth_decode::{Decoded, Decoder, IcmpEcho, Transport};
use pcapsleuth_testkit::packet::*;

/// (identifier, sequence, data) of the echo in `frame`, if any.
type Echo = Option<(u16, u16, Vec<u8>)>;

fn decode_with<R>(
    linktype: u32,
    frame: &[u8],
    wire_len: Option<u32>,
    f: impl FnOnce(&Decoded<'_>) -> R,
) -> R {
    let mut dec = Decoder::new();
    f(&dec.decode_frame(linktype, frame, wire_len))
}

fn echo(linktype: u32, frame: &[u8], wire_len: Option<u32>) -> Echo {
    decode_with(linktype, frame, wire_len, |d| match d.transport {
        Transport::Icmp(m) => m
            .echo
            .map(|IcmpEcho { id, seq, data }| (id, seq, data.to_vec())),
        _ => None,
    })
}

fn src_mac(linktype: u32, frame: &[u8]) -> Option<[u8; 6]> {
    decode_with(linktype, frame, None, |d| d.link.src_mac)
}

#[test]
fn echo_request_and_reply_expose_id_seq_and_data() {
    let f = ethernet(
        0x0800,
        &ipv4(1, &icmp(8, 0, [0x7e, 0x25, 0, 3], b"stamp...")),
    );
    assert_eq!(echo(1, &f, None), Some((0x7e25, 3, b"stamp...".to_vec())));
    let f6 = ethernet(0x86DD, &ipv6(58, &icmp(129, 0, [0, 9, 1, 0], b"pong")));
    assert_eq!(echo(1, &f6, None), Some((9, 256, b"pong".to_vec())));
}

#[test]
fn echo_data_stops_at_the_ip_length_and_the_snaplen() {
    // Ethernet padding after the datagram is not echo data.
    let mut f = ethernet(0x0800, &ipv4(1, &icmp(8, 0, [0, 1, 0, 1], b"ab")));
    f.extend_from_slice(&[0xEE; 20]);
    assert_eq!(echo(1, &f, None), Some((1, 1, b"ab".to_vec())));
    let full = ethernet(0x0800, &ipv4(1, &icmp(8, 0, [0, 1, 0, 1], b"abcdef")));
    let cut = &full[..full.len() - 4];
    assert_eq!(
        echo(1, cut, Some(full.len() as u32)),
        Some((1, 1, b"ab".to_vec()))
    );
}

#[test]
fn no_echo_for_errors_or_a_cut_header() {
    let err = ethernet(0x0800, &ipv4(1, &icmp(3, 1, [0; 4], &[0; 28])));
    assert_eq!(echo(1, &err, None), None);
    let short = ethernet(0x0800, &ipv4(1, &[8, 0, 0, 0, 0, 1]));
    assert_eq!(echo(1, &short, None), None);
}

#[test]
fn ethernet_source_mac() {
    let f = ethernet(0x0800, &ipv4(1, &icmp(8, 0, [0, 1, 0, 1], b"")));
    assert_eq!(src_mac(1, &f), Some([0x02, 0, 0, 0, 0, 2]));
}

/// SLL (linktype 113): packet type, ARPHRD, address length, 8-byte address,
/// protocol.
fn sll(address_len: u16, payload: &[u8]) -> Vec<u8> {
    concat(&[
        &4u16.to_be_bytes(),
        &1u16.to_be_bytes(),
        &address_len.to_be_bytes(),
        &[0x3e, 0x50, 0x35, 0x20, 0x17, 0xf1, 0, 0],
        &0x0800u16.to_be_bytes(),
        payload,
    ])
}

/// SLL2 (linktype 276): protocol, reserved, ifindex, ARPHRD, packet type,
/// address length, 8-byte address.
fn sll2(address_len: u8, payload: &[u8]) -> Vec<u8> {
    concat(&[
        &0x86DDu16.to_be_bytes(),
        &[0, 0],
        &3u32.to_be_bytes(),
        &1u16.to_be_bytes(),
        &[0, address_len],
        &[0x62, 0xb2, 0x8f, 0xf5, 0x34, 0x7c, 0, 0],
        payload,
    ])
}

#[test]
fn sll_and_sll2_link_layer_address() {
    let p4 = ipv4(1, &icmp(8, 0, [0, 1, 0, 1], b""));
    let p6 = ipv6(58, &icmp(128, 0, [0, 1, 0, 1], b""));
    assert_eq!(
        src_mac(113, &sll(6, &p4)),
        Some([0x3e, 0x50, 0x35, 0x20, 0x17, 0xf1])
    );
    assert_eq!(src_mac(113, &sll(0, &p4)), None);
    let f = sll2(6, &p6);
    assert_eq!(src_mac(276, &f), Some([0x62, 0xb2, 0x8f, 0xf5, 0x34, 0x7c]));
    assert!(echo(276, &f, None).is_some());
    assert_eq!(src_mac(276, &sll2(8, &p6)), None);
}

#[test]
fn inner_ethernet_does_not_replace_the_outer_mac() {
    // VXLAN (UDP 4789) carrying an Ethernet frame with another source MAC.
    let mut inner = ethernet(0x0800, &ipv4(1, &icmp(8, 0, [0, 1, 0, 1], b"")));
    inner[6..12].copy_from_slice(&[0xaa; 6]);
    let vxlan = concat(&[&[0x08, 0, 0, 0, 0, 0, 1, 0], &inner]);
    let f = ethernet(0x0800, &ipv4(17, &udp(40000, 4789, &vxlan)));
    assert_eq!(src_mac(1, &f), Some([0x02, 0, 0, 0, 0, 2]));
}
