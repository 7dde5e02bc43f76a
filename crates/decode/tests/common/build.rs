//! Tiny byte builders for hand-made test frames (checksums are zero: the
//! decoder does not verify them).

#![allow(dead_code)]

pub const A: [u8; 4] = [10, 0, 0, 1];
pub const B: [u8; 4] = [10, 0, 0, 2];
pub const O1: [u8; 4] = [192, 0, 2, 1];
pub const O2: [u8; 4] = [192, 0, 2, 2];

pub fn a6(last: u8) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[0] = 0x20;
    a[1] = 0x01;
    a[2] = 0x0d;
    a[3] = 0xb8;
    a[15] = last;
    a
}

pub fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Ethernet II header + payload.
pub fn eth(ty: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
    v.extend_from_slice(&ty.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

/// An 802.1Q-style tag: TCI then the next ethertype.
pub fn tag(vid: u16, next: u16) -> Vec<u8> {
    cat(&[&vid.to_be_bytes(), &next.to_be_bytes()])
}

/// IPv4 header (with `opts`, padded to 4 bytes) + payload; `ff` = flags+fragment word.
pub fn ipv4_full(
    src: [u8; 4],
    dst: [u8; 4],
    proto: u8,
    id: u16,
    ff: u16,
    opts: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    let mut o = opts.to_vec();
    while o.len() & 3 != 0 {
        o.push(0);
    }
    let hl = 20 + o.len();
    let total = (hl + payload.len()) as u16;
    let mut v = vec![0x40 | (hl / 4) as u8, 0];
    v.extend_from_slice(&total.to_be_bytes());
    v.extend_from_slice(&id.to_be_bytes());
    v.extend_from_slice(&ff.to_be_bytes());
    v.extend_from_slice(&[64, proto, 0, 0]);
    v.extend_from_slice(&src);
    v.extend_from_slice(&dst);
    v.extend_from_slice(&o);
    v.extend_from_slice(payload);
    v
}

pub fn ipv4(proto: u8, payload: &[u8]) -> Vec<u8> {
    ipv4_full(A, B, proto, 0x1234, 0x4000, &[], payload)
}

pub fn ipv4_outer(proto: u8, payload: &[u8]) -> Vec<u8> {
    ipv4_full(O1, O2, proto, 7, 0, &[], payload)
}

/// IPv6 header + payload (which may start with extension headers).
pub fn ipv6_full(src: [u8; 16], dst: [u8; 16], nh: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0x60, 0, 0, 0];
    v.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    v.extend_from_slice(&[nh, 64]);
    v.extend_from_slice(&src);
    v.extend_from_slice(&dst);
    v.extend_from_slice(payload);
    v
}

pub fn ipv6(nh: u8, payload: &[u8]) -> Vec<u8> {
    ipv6_full(a6(1), a6(2), nh, payload)
}

/// An IPv6 extension header of 8 bytes (hop-by-hop, routing, dest options).
pub fn ext8(nh: u8) -> Vec<u8> {
    vec![nh, 0, 1, 4, 0, 0, 0, 0]
}

/// TCP header with options (padded with NOPs to 4 bytes) + payload.
pub fn tcp_full(
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u16,
    opts: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    let mut o = opts.to_vec();
    while o.len() & 3 != 0 {
        o.push(1);
    }
    let doff = ((20 + o.len()) / 4) as u8;
    let mut v = Vec::new();
    v.extend_from_slice(&sport.to_be_bytes());
    v.extend_from_slice(&dport.to_be_bytes());
    v.extend_from_slice(&seq.to_be_bytes());
    v.extend_from_slice(&ack.to_be_bytes());
    v.push((doff << 4) | ((flags >> 8) as u8 & 1));
    v.push(flags as u8);
    v.extend_from_slice(&[0xFF, 0xFF, 0, 0, 0, 0]);
    v.extend_from_slice(&o);
    v.extend_from_slice(payload);
    v
}

pub fn tcp(sport: u16, dport: u16) -> Vec<u8> {
    tcp_full(sport, dport, 1000, 2000, 0x018, &[], b"hello")
}

/// MSS 1460, SACK-permitted, timestamps (1, 2), NOP, window scale 7.
pub const SYN_OPTS: [u8; 20] = [
    2, 4, 5, 0xB4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 1, 3, 3, 7,
];

pub fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&sport.to_be_bytes());
    v.extend_from_slice(&dport.to_be_bytes());
    v.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    v.extend_from_slice(&[0, 0]);
    v.extend_from_slice(payload);
    v
}

/// ICMP/ICMPv6 message: type, code, checksum 0, 4-byte rest, body.
pub fn icmp(t: u8, c: u8, rest: [u8; 4], body: &[u8]) -> Vec<u8> {
    cat(&[&[t, c, 0, 0], &rest, body])
}
