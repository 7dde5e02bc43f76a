//! `UdpDatagram::payload`: the captured UDP payload, bounded by the UDP length
//! field and the captured bytes.

mod common;

use pcapsleuth_decode::{Decoder, Transport, UdpDatagram};
use pcapsleuth_testkit::packet::*;

fn udp_of(frame: &[u8], wire_len: Option<u32>) -> Option<(u32, Vec<u8>)> {
    let mut dec = Decoder::new();
    match dec.decode_frame(1, frame, wire_len).transport {
        Transport::Udp(UdpDatagram {
            payload_len,
            payload,
            ..
        }) => Some((payload_len, payload.to_vec())),
        _ => None,
    }
}

#[test]
fn payload_is_the_bytes_after_the_header() {
    let f = ethernet(0x0800, &ipv4(17, &udp(5353, 53, b"query")));
    assert_eq!(udp_of(&f, None), Some((5, b"query".to_vec())));
}

#[test]
fn payload_stops_at_the_udp_length_field() {
    // Ethernet padding / trailing bytes after the datagram are not payload.
    let mut dgram = udp(1000, 2000, b"abc");
    dgram.extend_from_slice(b"TRAILER");
    let f = ethernet(0x0800, &ipv4(17, &dgram));
    assert_eq!(udp_of(&f, None), Some((3, b"abc".to_vec())));
}

#[test]
fn payload_is_cut_by_the_snaplen() {
    let f = ethernet(0x0800, &ipv4(17, &udp(1000, 2000, b"abcdefgh")));
    let cut = &f[..f.len() - 5];
    let wire = Some(f.len() as u32);
    assert_eq!(udp_of(cut, wire), Some((8, b"abc".to_vec())));
    // Header only: empty payload, full length kept.
    let hdr_only = &f[..14 + 20 + 8];
    assert_eq!(udp_of(hdr_only, wire), Some((8, Vec::new())));
}

#[test]
fn length_below_header_size_gives_empty_payload() {
    let mut dgram = udp(1000, 2000, b"abcd");
    dgram[4..6].copy_from_slice(&5u16.to_be_bytes());
    let f = ethernet(0x0800, &ipv4(17, &dgram));
    assert_eq!(udp_of(&f, None), Some((0, Vec::new())));
}

#[test]
fn ipv6_payload() {
    let f = ethernet(0x86DD, &ipv6(17, &udp(1000, 53, b"v6q")));
    assert_eq!(udp_of(&f, None), Some((3, b"v6q".to_vec())));
}
