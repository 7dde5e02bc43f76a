//! Property tests: truncation at every length stops at the right layer;
//! arbitrary and mutated bytes never panic.

mod common;

use pcapsleuth_decode::{Decoder, Layer, StopReason, Transport};
use pcapsleuth_testkit::packet::*;
use proptest::prelude::*;

fn stop_of(lt: u32, f: &[u8]) -> (Option<(Layer, StopReason)>, String) {
    let mut dec = Decoder::new();
    let d = dec.decode(lt, f);
    let kind = match d.transport {
        Transport::None => "none",
        Transport::Tcp(_) => "tcp",
        Transport::Udp(_) => "udp",
        Transport::Icmp(_) => "icmp",
        Transport::Other(_) => "other",
    };
    (d.stop.map(|s| (s.layer, s.reason)), kind.to_string())
}

#[test]
fn every_truncation_of_eth_ipv4_tcp_with_options() {
    let frame = ethernet(
        0x0800,
        &ipv4(6, &tcp_full(1234, 80, 1, 2, 0x012, &SYN_OPTIONS, b"data")),
    );
    let hdr_end = 14 + 20 + 40;
    for len in 0..=frame.len() {
        let f = &frame[..len];
        let mut dec = Decoder::new();
        let d = dec.decode(1, f);
        let stop = d.stop.map(|s| (s.layer, s.reason, s.offset));
        match len {
            0..=13 => assert_eq!(
                stop,
                Some((Layer::Link, StopReason::Truncated, 0)),
                "len {len}"
            ),
            14..=33 => assert_eq!(
                stop,
                Some((Layer::Ip, StopReason::Truncated, 14)),
                "len {len}"
            ),
            34..=53 => {
                assert_eq!(
                    stop,
                    Some((Layer::Transport, StopReason::Truncated, 34)),
                    "len {len}"
                );
                assert!(
                    d.ip.is_some() && matches!(d.transport, Transport::None),
                    "len {len}"
                );
            }
            _ if len < hdr_end => {
                assert_eq!(
                    stop,
                    Some((Layer::Transport, StopReason::Truncated, 34)),
                    "len {len}"
                );
                let Transport::Tcp(t) = d.transport else {
                    panic!("len {len}: no TCP")
                };
                assert!(t.options.malformed, "len {len}");
                assert_eq!((t.src_port, t.payload_len, t.header_len), (1234, 4, 40));
                // MSS is the first option: present once its 4 bytes are.
                assert_eq!(t.options.mss.is_some(), len >= 54 + 4, "len {len}");
            }
            _ => {
                assert_eq!(stop, None, "len {len}");
                let Transport::Tcp(t) = d.transport else {
                    panic!("len {len}: no TCP")
                };
                assert!(!t.options.malformed);
                assert_eq!(
                    (t.options.mss, t.options.window_scale, t.options.timestamps),
                    (Some(1460), Some(7), Some((1, 2)))
                );
                assert_eq!(
                    (t.payload_len as usize, t.payload.len()),
                    (4, len - hdr_end)
                );
            }
        }
    }
}

#[test]
fn every_truncation_of_icmp_frag_needed() {
    let quoted = ipv4(6, &tcp_full(1234, 80, 77, 88, 0x010, &[], &[0; 1400]));
    let frame = ethernet(
        0x0800,
        &ipv4(1, &icmp(3, 4, [0, 0, 0x05, 0x78], &quoted[..48])),
    );
    let (icmp_at, q_at) = (34usize, 42usize);
    for len in 0..=frame.len() {
        let mut dec = Decoder::new();
        let d = dec.decode(1, &frame[..len]);
        let stop = d.stop.map(|s| (s.layer, s.reason));
        if len < 14 {
            assert_eq!(
                stop,
                Some((Layer::Link, StopReason::Truncated)),
                "len {len}"
            );
            continue;
        }
        if len < icmp_at {
            assert_eq!(stop, Some((Layer::Ip, StopReason::Truncated)), "len {len}");
            continue;
        }
        if len < icmp_at + 4 {
            assert_eq!(
                stop,
                Some((Layer::Transport, StopReason::Truncated)),
                "len {len}"
            );
            assert!(matches!(d.transport, Transport::None));
            continue;
        }
        let Transport::Icmp(m) = d.transport else {
            panic!("len {len}: {d:?}")
        };
        assert_eq!((m.icmp_type, m.code), (3, 4));
        if len < q_at {
            assert_eq!(
                stop,
                Some((Layer::Transport, StopReason::Truncated)),
                "len {len}"
            );
            assert_eq!(
                m.mtu,
                if len >= icmp_at + 8 { Some(1400) } else { None },
                "len {len}"
            );
            continue;
        }
        assert_eq!(stop, None, "len {len}");
        assert_eq!(m.mtu, Some(1400));
        let qlen = len - q_at;
        match m.quoted {
            None => assert!(qlen < 20, "len {len}: quoted header lost"),
            Some(q) => {
                assert!(qlen >= 20);
                assert_eq!(
                    q.ip.total_len, 1440,
                    "quoted total_len is the original datagram's"
                );
                let tb = qlen - 20;
                assert_eq!(q.transport_bytes as usize, tb.min(20), "len {len}");
                assert_eq!(q.src_port.is_some(), tb >= 4, "len {len}");
                assert_eq!(q.dst_port.is_some(), tb >= 4, "len {len}");
                assert_eq!(q.tcp_seq.map(|s| s.0), (tb >= 8).then_some(77), "len {len}");
                assert_eq!(
                    q.tcp_ack.map(|s| s.0),
                    (tb >= 12).then_some(88),
                    "len {len}"
                );
                assert_eq!(
                    q.tcp_flags.map(|f| f.0),
                    (tb >= 14).then_some(0x010),
                    "len {len}"
                );
            }
        }
    }
}

const LINKTYPES: [u32; 20] = [
    0, 1, 9, 12, 14, 50, 101, 104, 105, 108, 113, 127, 192, 228, 229, 239, 242, 276, 147, 4,
];

/// Valid frames with deep encapsulations, to mutate.
fn seeds() -> Vec<(u32, Vec<u8>)> {
    let v4t = ipv4(6, &tcp_full(1, 2, 3, 4, 0x010, &SYN_OPTIONS, b"xx"));
    let v6t = ipv6(
        0,
        &concat(&[
            &ipv6_ext8(60),
            &ipv6_ext8(6),
            &tcp_full(1, 2, 3, 4, 0x010, &SYN_OPTIONS, b"xx"),
        ]),
    );
    let e4 = ethernet(0x8100, &concat(&[&vlan_tag(3, 0x0800), &v4t]));
    vec![
        (1, e4.clone()),
        (
            101,
            ipv4_outer(
                47,
                &concat(&[&[0x30, 0, 0x65, 0x58, 0, 0, 0, 1, 0, 0, 0, 2], &e4]),
            ),
        ),
        (
            101,
            ipv4_outer(
                17,
                &udp(49152, 4789, &concat(&[&[8, 0, 0, 0, 0, 0, 1, 0], &e4])),
            ),
        ),
        (
            101,
            ipv4_outer(
                17,
                &udp(
                    6081,
                    6081,
                    &concat(&[&[1, 0, 0x86, 0xDD, 0, 0, 1, 0, 0, 0, 0, 0], &v6t]),
                ),
            ),
        ),
        (
            101,
            ipv4_outer(
                17,
                &udp(
                    2152,
                    2152,
                    &concat(&[
                        &[0x34, 0xFF, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x85, 1, 0, 9, 0],
                        &v4t,
                    ]),
                ),
            ),
        ),
        (
            1,
            ethernet(0x8847, &concat(&[&[0, 1, 1, 64], &ipv4_outer(41, &v6t)])),
        ),
        (229, ipv6(58, &icmp(2, 0, [0, 0, 5, 0], &v6t[..60]))),
        (
            1,
            ethernet(0x0800, &ipv4(1, &icmp(3, 4, [0, 0, 5, 0], &v4t[..48]))),
        ),
        (
            101,
            ipv4_full(HOST_A, HOST_B, 6, 5, 0x2000, &[], &v4t[20..36]),
        ),
        (101, ipv4_full(HOST_A, HOST_B, 6, 5, 2, &[], &v4t[36..])),
        (
            229,
            ipv6(44, &concat(&[&[6, 0, 0, 1, 0, 0, 0, 5], &v4t[20..36]])),
        ),
        (
            276,
            concat(&[
                &[
                    0x86, 0xDD, 0, 0, 0, 0, 0, 7, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0,
                ],
                &v6t,
            ]),
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(lt in proptest::sample::select(LINKTYPES.to_vec()), data in proptest::collection::vec(any::<u8>(), 0..200), wire in proptest::option::of(0u32..3000)) {
        let mut dec = Decoder::new();
        let d = dec.decode_frame(lt, &data, wire);
        if let Some(s) = d.stop {
            prop_assert!(s.offset as usize <= data.len().max(1) + 65_535);
        }
    }

    #[test]
    fn mutated_frames_never_panic(seed in 0usize..12, muts in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6), cut in any::<prop::sample::Index>()) {
        let seeds = seeds();
        let (lt, mut f) = seeds[seed % seeds.len()].clone();
        for (i, b) in muts {
            let i = i.index(f.len());
            f[i] = b;
        }
        let cut = cut.index(f.len() + 1);
        let mut dec = Decoder::new();
        // Feed all seeds first so the reassembler holds state.
        for (l, s) in &seeds {
            let _ = dec.decode(*l, s);
        }
        let d = dec.decode(lt, &f[..cut]);
        if let Transport::Tcp(t) = d.transport {
            prop_assert!(t.header_len >= 20);
            prop_assert!(t.options.sack.len <= 4);
        }
    }
}

#[test]
fn seeds_decode_to_tcp_or_icmp() {
    // Guards the fuzz seeds: they must reach the transport, or mutating them tests little.
    let mut dec = Decoder::new();
    for (i, (lt, f)) in seeds().iter().enumerate() {
        let (stop, kind) = {
            let d = dec.decode(*lt, f);
            (d.stop, d.transport)
        };
        let ok = match i {
            8 | 10 => stop.map(|s| s.reason) == Some(StopReason::Fragment),
            6 | 7 => matches!(kind, Transport::Icmp(_)),
            _ => matches!(kind, Transport::Tcp(_)) && stop.is_none(),
        };
        assert!(ok, "seed {i}: {:?} {:?}", stop, kind);
    }
    let _ = stop_of(1, &[]);
}
