//! [`FlowTable::finish_chunked`] delivers exactly the events of
//! [`FlowTable::finish`], in order, in bounded slices.
//!
//! A SYN scan in memory: `N` clients send one SYN each, then one more SYN
//! 60 s later ends the capture, so every earlier SYN is a stall still open
//! at the capture end (one [`FlowEvent::Stall`] per stream).

use pcapsleuth_core::{FrameNo, InterfaceId, SeqNum, Timestamp};
use pcapsleuth_decode::{
    Decoded, IpHeader, IpVersion, TcpFlags, TcpOptions, TcpSegment, Transport,
};
use pcapsleuth_flow::{FlowConfig, FlowEvent, FlowTable, PacketMeta};
use std::net::{IpAddr, Ipv4Addr};

/// SYN-only streams before the last one.
const N: u32 = 3_000;
/// Slice size asked of `finish_chunked`.
const CHUNK: usize = 7;

fn syn(table: &mut FlowTable, i: u32, ts: i64) {
    let payload = [0u8; 0];
    let tcp = TcpSegment {
        src_port: 1024 + (i & 0xff) as u16,
        dst_port: 443,
        seq: SeqNum(1000 + i),
        ack: SeqNum(0),
        flags: TcpFlags(TcpFlags::SYN),
        window: 1000,
        urgent: 0,
        header_len: 20,
        payload_len: 0,
        payload: &payload,
        options: TcpOptions {
            mss: Some(1460),
            ..TcpOptions::default()
        },
    };
    let ip = IpHeader {
        version: IpVersion::V4,
        src: IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | (i >> 8))),
        dst: IpAddr::V4(Ipv4Addr::new(198, 51, 100, 10)),
        ttl: 64,
        ip_id: Some(i),
        total_len: 40,
        header_len: 20,
        protocol: 6,
        dont_fragment: true,
        fragment: None,
    };
    let d = Decoded {
        ip: Some(ip),
        transport: Transport::Tcp(tcp),
        ..Decoded::default()
    };
    let meta = PacketMeta {
        frame: FrameNo(u64::from(i) + 1),
        ts: Timestamp(ts),
        interface: InterfaceId(0),
    };
    let mut events = Vec::new();
    table.on_packet(&meta, &d, &mut events);
}

fn scan() -> FlowTable {
    let mut t = FlowTable::new(FlowConfig::default());
    for i in 0..N {
        syn(&mut t, i, i64::from(i) * 1_000);
    }
    syn(&mut t, N, 60_000_000_000);
    t
}

#[test]
fn chunked_finish_delivers_the_same_events_in_bounded_slices() {
    let mut whole = Vec::new();
    scan().finish(&mut whole);
    let stalls = whole
        .iter()
        .filter(|e| matches!(e, FlowEvent::Stall(_)))
        .count();
    assert_eq!(stalls, N as usize, "one open stall per earlier SYN");

    let mut table = scan();
    let mut joined = Vec::new();
    let mut slices = 0;
    table.finish_chunked(CHUNK, |s| {
        assert!(!s.is_empty());
        // One stream adds at most a few events past the slice size.
        assert!(s.len() < CHUNK + 4, "slice of {}", s.len());
        slices += 1;
        joined.extend_from_slice(s);
    });
    assert_eq!(joined, whole);
    assert!(slices >= whole.len() / (CHUNK + 4));
    // Finishing again emits nothing more.
    table.finish_chunked(CHUNK, |_| panic!("second finish emitted events"));
}
