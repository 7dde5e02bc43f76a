//! Byte builders for hand-made test packets: Ethernet, VLAN tags, IPv4,
//! IPv6, TCP, UDP and ICMP headers around a payload. Checksums are zero (the
//! decoder does not verify them); lengths are filled in from the payload.
//! Put the frames in a capture file with [`crate::capture`].
//!
//! ```
//! use pcapsleuth_testkit::packet::{ethernet, ipv4, udp};
//! let frame = ethernet(0x0800, &ipv4(17, &udp(5353, 53, b"query")));
//! assert_eq!(frame.len(), 14 + 20 + 8 + 5);
//! ```

/// 10.0.0.1, the default IPv4 source.
pub const HOST_A: [u8; 4] = [10, 0, 0, 1];
/// 10.0.0.2, the default IPv4 destination.
pub const HOST_B: [u8; 4] = [10, 0, 0, 2];
/// 192.0.2.1, the source of outer (tunnel) IPv4 headers.
pub const OUTER_A: [u8; 4] = [192, 0, 2, 1];
/// 192.0.2.2, the destination of outer (tunnel) IPv4 headers.
pub const OUTER_B: [u8; 4] = [192, 0, 2, 2];

/// The documentation IPv6 address `2001:db8::<last>` (RFC 3849).
pub fn doc_ipv6(last: u8) -> [u8; 16] {
    let mut addr = [0u8; 16];
    addr[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    addr[15] = last;
    addr
}

/// The parts one after the other.
pub fn concat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Ethernet II header (destination 02:00:00:00:00:01, source
/// 02:00:00:00:00:02, ethertype `ether_type`) + payload.
pub fn ethernet(ether_type: u16, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
    frame.extend_from_slice(&ether_type.to_be_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// The 4 bytes after an 802.1Q-style tag's ethertype: the TCI (`tci`, whose
/// low 12 bits are the VLAN id) then the next ethertype.
pub fn vlan_tag(tci: u16, next_ether_type: u16) -> Vec<u8> {
    concat(&[&tci.to_be_bytes(), &next_ether_type.to_be_bytes()])
}

/// IPv4 header (TTL 64, with `options` padded to 4 bytes) + payload;
/// `flags_fragment` is the flags + fragment offset word (0x4000 = DF).
pub fn ipv4_full(
    src: [u8; 4],
    dst: [u8; 4],
    protocol: u8,
    id: u16,
    flags_fragment: u16,
    options: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    let mut options = options.to_vec();
    while !options.len().is_multiple_of(4) {
        options.push(0);
    }
    let header_len = 20 + options.len();
    let total_len = (header_len + payload.len()) as u16;
    let mut packet = vec![0x40 | (header_len / 4) as u8, 0];
    packet.extend_from_slice(&total_len.to_be_bytes());
    packet.extend_from_slice(&id.to_be_bytes());
    packet.extend_from_slice(&flags_fragment.to_be_bytes());
    packet.extend_from_slice(&[64, protocol, 0, 0]);
    packet.extend_from_slice(&src);
    packet.extend_from_slice(&dst);
    packet.extend_from_slice(&options);
    packet.extend_from_slice(payload);
    packet
}

/// IPv4 from [`HOST_A`] to [`HOST_B`], id 0x1234, DF set.
pub fn ipv4(protocol: u8, payload: &[u8]) -> Vec<u8> {
    ipv4_full(HOST_A, HOST_B, protocol, 0x1234, 0x4000, &[], payload)
}

/// IPv4 from [`OUTER_A`] to [`OUTER_B`], id 7, no flags: the outer header
/// of a tunnel.
pub fn ipv4_outer(protocol: u8, payload: &[u8]) -> Vec<u8> {
    ipv4_full(OUTER_A, OUTER_B, protocol, 7, 0, &[], payload)
}

/// IPv6 header (hop limit 64) + payload, which may start with extension
/// headers (`next_header` names the first).
pub fn ipv6_full(src: [u8; 16], dst: [u8; 16], next_header: u8, payload: &[u8]) -> Vec<u8> {
    let mut packet = vec![0x60, 0, 0, 0];
    packet.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    packet.extend_from_slice(&[next_header, 64]);
    packet.extend_from_slice(&src);
    packet.extend_from_slice(&dst);
    packet.extend_from_slice(payload);
    packet
}

/// IPv6 from `2001:db8::1` to `2001:db8::2`.
pub fn ipv6(next_header: u8, payload: &[u8]) -> Vec<u8> {
    ipv6_full(doc_ipv6(1), doc_ipv6(2), next_header, payload)
}

/// An 8-byte IPv6 extension header (hop-by-hop, routing, destination
/// options) followed by `next_header`.
pub fn ipv6_ext8(next_header: u8) -> Vec<u8> {
    vec![next_header, 0, 1, 4, 0, 0, 0, 0]
}

/// TCP header (window 0xFFFF, with `options` padded with NOPs to 4 bytes) +
/// payload; `flags` are the 9 flag bits (0x002 SYN, 0x010 ACK, …).
pub fn tcp_full(
    src_port: u16,
    dst_port: u16,
    seq: u32,
    ack: u32,
    flags: u16,
    options: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    let mut options = options.to_vec();
    while !options.len().is_multiple_of(4) {
        options.push(1);
    }
    let data_offset_words = ((20 + options.len()) / 4) as u8;
    let mut segment = Vec::new();
    segment.extend_from_slice(&src_port.to_be_bytes());
    segment.extend_from_slice(&dst_port.to_be_bytes());
    segment.extend_from_slice(&seq.to_be_bytes());
    segment.extend_from_slice(&ack.to_be_bytes());
    segment.push((data_offset_words << 4) | ((flags >> 8) as u8 & 1));
    segment.push(flags as u8);
    segment.extend_from_slice(&[0xFF, 0xFF, 0, 0, 0, 0]);
    segment.extend_from_slice(&options);
    segment.extend_from_slice(payload);
    segment
}

/// A PSH+ACK segment (seq 1000, ack 2000) carrying `hello`.
pub fn tcp(src_port: u16, dst_port: u16) -> Vec<u8> {
    tcp_full(src_port, dst_port, 1000, 2000, 0x018, &[], b"hello")
}

/// SYN options: MSS 1460, SACK-permitted, timestamps (1, 2), NOP, window
/// scale 7.
pub const SYN_OPTIONS: [u8; 20] = [
    2, 4, 5, 0xB4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 1, 3, 3, 7,
];

/// UDP header (length from the payload, checksum 0) + payload.
pub fn udp(src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let mut datagram = Vec::new();
    datagram.extend_from_slice(&src_port.to_be_bytes());
    datagram.extend_from_slice(&dst_port.to_be_bytes());
    datagram.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    datagram.extend_from_slice(&[0, 0]);
    datagram.extend_from_slice(payload);
    datagram
}

/// ICMP/ICMPv6 message: type, code, checksum 0, the 4-byte rest of the
/// header (`rest`: identifier/sequence, MTU, …), body.
pub fn icmp(icmp_type: u8, code: u8, rest: [u8; 4], body: &[u8]) -> Vec<u8> {
    concat(&[&[icmp_type, code, 0, 0], &rest, body])
}
