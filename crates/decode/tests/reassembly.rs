//! IP reassembly: the frame completing a datagram carries its transport.

mod common;

use pcapsleuth_decode::{Decoder, Layer, StopReason, Transport};
use pcapsleuth_testkit::packet::*;

/// Split an IPv4 TCP datagram's payload into fragments of `chunk` bytes (multiple of 8).
fn v4_fragments(id: u16, payload: &[u8], chunk: usize) -> Vec<Vec<u8>> {
    let n = payload.len().div_ceil(chunk);
    (0..n)
        .map(|i| {
            let part = &payload[i * chunk..((i + 1) * chunk).min(payload.len())];
            let more = if i + 1 < n { 0x2000 } else { 0 };
            ethernet(
                0x0800,
                &ipv4_full(
                    HOST_A,
                    HOST_B,
                    6,
                    id,
                    more | (i * chunk / 8) as u16,
                    &[],
                    part,
                ),
            )
        })
        .collect()
}

fn tcp_payload(len: usize) -> Vec<u8> {
    tcp_full(1234, 80, 42, 43, 0x018, &[], &vec![0xAB; len])
}

#[test]
fn v4_in_order_completes_on_last_fragment() {
    let seg = tcp_payload(1000);
    let frags = v4_fragments(7, &seg, 512);
    assert_eq!(frags.len(), 2);
    let mut dec = Decoder::new();
    let d = dec.decode(1, &frags[0]);
    assert!(matches!(d.transport, Transport::None));
    assert_eq!(
        d.stop.map(|s| (s.layer, s.reason)),
        Some((Layer::Ip, StopReason::Fragment))
    );
    assert_eq!(
        d.ip.and_then(|h| h.fragment).map(|f| (f.offset, f.more)),
        Some((0, true))
    );
    let d = dec.decode(1, &frags[1]);
    assert_eq!(d.stop, None);
    let Transport::Tcp(t) = d.transport else {
        panic!("no TCP in the completing frame: {d:?}")
    };
    assert_eq!(
        (
            t.src_port,
            t.dst_port,
            t.seq.0,
            t.payload_len,
            t.payload.len()
        ),
        (1234, 80, 42, 1000, 1000)
    );
    assert!(t.payload.iter().all(|&b| b == 0xAB));
    assert_eq!(d.ip.and_then(|h| h.fragment).map(|f| f.offset), Some(512));
}

#[test]
fn v4_out_of_order_and_interleaved() {
    let a = v4_fragments(1, &tcp_payload(2000), 512);
    let b = v4_fragments(2, &tcp_payload(600), 312);
    assert_eq!((a.len(), b.len()), (4, 2));
    let mut dec = Decoder::new();
    let order = [(&a, 3), (&b, 1), (&a, 0), (&a, 2), (&b, 0), (&a, 1)];
    let mut got = Vec::new();
    for (set, i) in order {
        let d = dec.decode(1, &set[i]);
        got.push(match d.transport {
            Transport::Tcp(t) => Some(t.payload_len),
            _ => None,
        });
    }
    assert_eq!(got, vec![None, None, None, None, Some(600), Some(2000)]);
}

#[test]
fn v6_fragments_reassemble() {
    let seg = tcp_payload(300);
    let (p1, p2) = seg.split_at(160);
    let f1 = ipv6(44, &concat(&[&[6, 0, 0, 1, 0, 0, 0, 5], p1]));
    let f2 = ipv6(44, &concat(&[&[6, 0, 0, 160, 0, 0, 0, 5], p2]));
    let mut dec = Decoder::new();
    assert!(matches!(dec.decode(229, &f2).transport, Transport::None));
    let d = dec.decode(229, &f1);
    let Transport::Tcp(t) = d.transport else {
        panic!("{d:?}")
    };
    assert_eq!((t.payload_len, t.seq.0), (300, 42));
    assert_eq!(d.ip.map(|h| (h.protocol, h.ip_id)), Some((6, Some(5))));
}

#[test]
fn fragment_inside_tunnel_reassembles_with_outer_kept() {
    let seg = tcp_payload(100);
    let (p1, p2) = seg.split_at(64);
    let inner1 = ipv4_full(HOST_A, HOST_B, 6, 3, 0x2000, &[], p1);
    let inner2 = ipv4_full(HOST_A, HOST_B, 6, 3, 8, &[], p2);
    let mut dec = Decoder::new();
    let _ = dec.decode(101, &ipv4_outer(4, &inner1));
    let f2 = ipv4_outer(4, &inner2);
    let d = dec.decode(101, &f2);
    assert_eq!(
        d.outer_ip.map(|h| h.src.to_string()),
        Some("192.0.2.1".into())
    );
    assert!(matches!(d.transport, Transport::Tcp(t) if t.payload_len == 100));
}

#[test]
fn table_is_bounded_and_evicts_oldest() {
    let mut dec = Decoder::new();
    let seg = tcp_payload(100);
    // First halves of 65 datagrams: the first one is evicted.
    for id in 0..65u16 {
        let f = v4_fragments(id, &seg, 64);
        let _ = dec.decode(1, &f[0]);
    }
    let last_of = |id: u16| v4_fragments(id, &seg, 64)[1].clone();
    let (l0, l64) = (last_of(0), last_of(64));
    let d = dec.decode(1, &l0);
    assert!(
        matches!(d.transport, Transport::None),
        "evicted datagram must not complete"
    );
    let d = dec.decode(1, &l64);
    assert!(
        matches!(d.transport, Transport::Tcp(_)),
        "recent datagram completes"
    );
}

#[test]
fn snaplen_cut_fragment_is_not_buffered() {
    let f = v4_fragments(9, &tcp_payload(1000), 512);
    let mut dec = Decoder::new();
    let _ = dec.decode(1, &f[0][..100]);
    let d = dec.decode(1, &f[1]);
    assert!(matches!(d.transport, Transport::None));
    assert_eq!(d.stop.map(|s| s.reason), Some(StopReason::Fragment));
}

#[test]
fn wire_length_bounds_payload_like_wireshark() {
    // IPv4 total length claims 1040 bytes but only 60 were on the wire.
    let f = ethernet(
        0x0800,
        &ipv4(6, &tcp_full(1, 2, 3, 4, 0x010, &[], &[0; 1000])),
    )[..74]
        .to_vec();
    let mut dec = Decoder::new();
    let Transport::Tcp(t) = dec.decode_frame(1, &f, Some(74)).transport else {
        panic!()
    };
    assert_eq!(t.payload_len, 20);
    // Unknown wire length (or a snaplen cut with the full wire length): the IP header rules.
    let Transport::Tcp(t) = dec.decode_frame(1, &f, None).transport else {
        panic!()
    };
    assert_eq!(t.payload_len, 1000);
    let Transport::Tcp(t) = dec.decode_frame(1, &f, Some(1054)).transport else {
        panic!()
    };
    assert_eq!(t.payload_len, 1000);
    // PPPoE length field bounds the payload as well.
    let v4t = ipv4(6, &tcp_full(1, 2, 3, 4, 0x010, &[], &[0; 6]));
    let f = ethernet(
        0x8864,
        &concat(&[
            &[0x11, 0, 0, 1],
            &((2 + 40) as u16).to_be_bytes(),
            &[0x00, 0x21],
            &v4t,
        ]),
    );
    let Transport::Tcp(t) = dec.decode(1, &f).transport else {
        panic!()
    };
    assert_eq!(t.payload_len, 0);
}
