//! Bytes per live 10-packet stream stay bounded.
//!
//! Synthesizes, in memory, the connections of the `flows200k` scale capture
//! (`../shared/bench/gen-scale.py`): `N` clients, interleaved round-robin
//! (all in progress at once), each SYN, SYN/ACK, ACK, 100 bytes, ACK, 100
//! bytes, ACK, FIN, FIN/ACK, ACK. Packets of one connection are 1 ms apart in
//! capture time, so every stream is live at the end (no retirement).
//!
//! Checks [`FlowTable::approx_heap_bytes`] per stream (inline records plus
//! buffer capacities; deterministic) after 7 packets of each (open, all data
//! acknowledged) and after all 10 (closed by the FINs, not yet retired,
//! duplicate-sighting entries still pending), against bounds a little above
//! the measured values, so the per-stream cost cannot grow unnoticed.
//!
//! Measured (x86-64, `N` = 1000): 2 145 bytes per open stream after 7 packets
//! and 1 697 after 10. Before four optional fields of each endpoint (FIN
//! offset, scaled window, zero-window start, last SYN time) took 8 bytes
//! instead of 16 (`pcapsleuth_core::opt`): 2 209 and 1 761. Before the ring of recent transmissions kept 40-byte
//! records instead of 56-byte unacknowledged-range ones: 2 289 and 1 761.
//! Before per-stream queues started at one slot instead
//! of two (`pcapsleuth_core::grow`): 2 385 and 1 761. Before duplicate-sighting entries kept a 64-bit
//! identity and a place index instead of the fingerprint and place (112 → 40
//! bytes) and the table's analyzers dropped their recent-verdict ring: 3 153
//! and 2 577. Before per-stream buffers grew by half instead of doubling,
//! fully acknowledged unacked lists were freed, the per-packet verdict
//! records were packed and our Wireshark-machine copy was forked lazily:
//! about 4 870 and 3 110 (measured with `N` = 100).

use pcapsleuth_core::{FrameNo, InterfaceId, SeqNum, Timestamp};
use pcapsleuth_decode::{
    Decoded, IpHeader, IpVersion, TcpFlags, TcpOptions, TcpSegment, Transport,
};
use pcapsleuth_flow::{FlowConfig, FlowTable, PacketMeta};
use std::net::{IpAddr, Ipv4Addr};

/// Connections synthesized.
const N: u32 = 1000;
/// Bound on bytes per stream after 7 packets each (open).
const MAX_BYTES_OPEN_7: usize = 2_250;
/// Bound on bytes per stream after 10 packets each (closed, live).
const MAX_BYTES_CLOSED_10: usize = 1_800;

const S: u16 = TcpFlags::SYN;
const A: u16 = TcpFlags::ACK;
const P: u16 = TcpFlags::PSH;
const F: u16 = TcpFlags::FIN;

struct Gen {
    table: FlowTable,
    frame: u64,
}

impl Gen {
    /// Packet `r` (0..10) of connection `i`, as `gen-scale.py flows200k`.
    fn step(&mut self, i: u32, r: u32) {
        let (ci, si) = (i.wrapping_mul(2_654_435_761), 7_000_000 + i);
        let (c2s, seq, ack, flags, len) = match r {
            0 => (true, ci, 0, S, 0),
            1 => (false, si, ci + 1, S | A, 0),
            2 => (true, ci + 1, si + 1, A, 0),
            3 | 5 => (true, ci + 1 + 100 * ((r - 3) / 2), si + 1, A | P, 100),
            4 | 6 => (false, si + 1, ci + 101 + 100 * ((r - 4) / 2), A, 0),
            7 => (true, ci + 201, si + 1, A | F, 0),
            8 => (false, si + 1, ci + 202, A | F, 0),
            _ => (true, ci + 202, si + 2, A, 0),
        };
        let client = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | i));
        let server = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
        let (src, dst, sp, dp) = if c2s {
            (client, server, 40_000, 80)
        } else {
            (server, client, 80, 40_000)
        };
        let syn = flags & S != 0;
        let payload = [b'x'; 100];
        let tcp = TcpSegment {
            src_port: sp,
            dst_port: dp,
            seq: SeqNum(seq),
            ack: SeqNum(ack),
            flags: TcpFlags(flags),
            window: 65_535,
            urgent: 0,
            header_len: 20,
            payload_len: len,
            payload: &payload[..len as usize],
            options: TcpOptions {
                window_scale: syn.then_some(7),
                mss: syn.then_some(1460),
                sack_permitted: syn,
                ..TcpOptions::default()
            },
        };
        self.frame += 1;
        let ip = IpHeader {
            version: IpVersion::V4,
            src,
            dst,
            ttl: 64,
            ip_id: Some(0),
            total_len: 40 + len,
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
            frame: FrameNo(self.frame),
            ts: Timestamp(1_700_000_000_000_000_000 + self.frame as i64 * 1_000),
            interface: InterfaceId(0),
        };
        let mut out = Vec::new();
        self.table.on_packet(&meta, &d, &mut out);
    }
}

/// Bytes per stream after `rounds` packets of each of the `N` connections.
fn bytes_per_stream(rounds: u32) -> usize {
    let mut g = Gen {
        table: FlowTable::new(FlowConfig::default()),
        frame: 0,
    };
    for r in 0..rounds {
        for i in 0..N {
            g.step(i, r);
        }
    }
    assert_eq!(g.table.stream_count(), u64::from(N));
    let stats = g.table.stats();
    assert_eq!(stats.live, u64::from(N), "{stats:?}");
    let sums = g.table.summaries();
    assert_eq!(sums[17].packets, u64::from(rounds));
    assert_eq!(
        sums[17].payload_bytes_c2s,
        if rounds >= 6 {
            200
        } else if rounds >= 4 {
            100
        } else {
            0
        }
    );
    g.table.approx_heap_bytes() / N as usize
}

#[test]
fn open_stream_after_7_packets() {
    let per = bytes_per_stream(7);
    println!("{N} open streams, 7 packets each: {per} B/stream");
    assert!(
        per <= MAX_BYTES_OPEN_7,
        "{per} > {MAX_BYTES_OPEN_7} B/stream"
    );
}

#[test]
fn live_stream_after_10_packets() {
    let per = bytes_per_stream(10);
    println!("{N} live closed streams, 10 packets each: {per} B/stream");
    assert!(
        per <= MAX_BYTES_CLOSED_10,
        "{per} > {MAX_BYTES_CLOSED_10} B/stream"
    );
}
