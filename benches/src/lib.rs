//! Synthetic capture generator for the throughput benchmarks
//! (`cargo bench -p pcapsleuth-benches`); `gen-synthetic OUT [MB]` writes one
//! for `benches/compare.sh OUT`.
//!
//! [`write_synthetic_pcap`] writes a legacy pcap (little-endian, µs, Ethernet)
//! of many interleaved IPv4 TCP connections: handshake, server data in
//! 1448-byte segments acknowledged every second segment, about one
//! retransmission per 400 data segments (200 ms later), and FIN exchange.
//! Everything is derived from a fixed seed, so the file is identical on every
//! run. Files go wherever the caller says (the benches use
//! `std::env::temp_dir()`, never the repository).

use std::io::{self, BufWriter, Write};
use std::path::Path;

/// What was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SynthStats {
    /// File size in bytes.
    pub bytes: u64,
    /// Packet records.
    pub packets: u64,
    /// TCP connections.
    pub connections: u64,
}

/// Deterministic xorshift64* generator (no external dependency).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One simulated connection.
struct Conn {
    client: [u8; 4],
    server: [u8; 4],
    cport: u16,
    sport: u16,
    /// Next client / server sequence numbers.
    cseq: u32,
    sseq: u32,
    /// Data segments still to send from the server.
    remaining: u32,
    state: u8,
    unacked: u32,
}

/// Internet checksum (RFC 1071) over `data`, continuing from `sum`.
fn csum_add(mut sum: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    sum
}

fn csum_fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Build one Ethernet/IPv4/TCP frame into `out` (cleared first).
#[allow(clippy::too_many_arguments)]
fn tcp_frame(
    out: &mut Vec<u8>,
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    payload: usize,
) {
    out.clear();
    // Ethernet: dst MAC, src MAC, IPv4 ethertype.
    out.extend_from_slice(&[
        0x02, 0, 0, 0, dst[2], dst[3], 0x02, 0, 0, 0, src[2], src[3], 0x08, 0x00,
    ]);
    let syn = flags & 0x02 != 0;
    let tcp_len = if syn { 24 } else { 20 };
    let total = 20 + tcp_len + payload;
    let ip_start = out.len();
    out.extend_from_slice(&[
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        0,
        0x40,
        0,
        64,
        6,
        0,
        0,
    ]);
    out.extend_from_slice(&src);
    out.extend_from_slice(&dst);
    let ipsum = csum_fold(csum_add(0, &out[ip_start..ip_start + 20]));
    out[ip_start + 10..ip_start + 12].copy_from_slice(&ipsum.to_be_bytes());
    let tcp_start = out.len();
    out.extend_from_slice(&sport.to_be_bytes());
    out.extend_from_slice(&dport.to_be_bytes());
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(&ack.to_be_bytes());
    out.push(((tcp_len / 4) as u8) << 4);
    out.push(flags);
    out.extend_from_slice(&64240u16.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    if syn {
        out.extend_from_slice(&[2, 4, 0x05, 0xb4]); // MSS 1460
    }
    out.extend((0..payload).map(|i| (i as u8).wrapping_mul(31)));
    let mut pseudo = csum_add(0, &src);
    pseudo = csum_add(pseudo, &dst);
    pseudo += 6 + (tcp_len + payload) as u32;
    let sum = csum_fold(csum_add(pseudo, &out[tcp_start..]));
    out[tcp_start + 16..tcp_start + 18].copy_from_slice(&sum.to_be_bytes());
}

/// Write a synthetic capture of about `target_bytes` bytes to `path`.
///
/// `concurrency` connections are interleaved at any time (new ones start as
/// old ones finish); packets are 10–60 µs apart.
///
/// # Errors
/// I/O errors creating or writing the file.
pub fn write_synthetic_pcap(
    path: &Path,
    target_bytes: u64,
    concurrency: usize,
) -> io::Result<SynthStats> {
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    // pcap header: LE µs magic, 2.4, snaplen 262144, Ethernet.
    w.write_all(&[
        0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 1, 0, 0, 0,
    ])?;
    let mut stats = SynthStats {
        bytes: 24,
        packets: 0,
        connections: 0,
    };
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut ts_us: u64 = 1_700_000_000_000_000;
    let mut frame = Vec::with_capacity(1600);
    let mut conns: Vec<Conn> = Vec::with_capacity(concurrency);
    let mut delayed: Vec<(u64, Vec<u8>)> = Vec::new();
    let new_conn = |rng: &mut Rng, n: u64| Conn {
        client: [10, 1, (n >> 8) as u8, n as u8],
        server: [10, 2, 0, (1 + rng.below(200)) as u8],
        cport: 20_000 + (n % 40_000) as u16,
        sport: [80, 443, 8080, 5432][rng.below(4) as usize],
        cseq: rng.next() as u32,
        sseq: rng.next() as u32,
        remaining: 20 + rng.below(400) as u32,
        state: 0,
        unacked: 0,
    };
    while stats.bytes < target_bytes {
        while conns.len() < concurrency {
            let c = new_conn(&mut rng, stats.connections);
            stats.connections += 1;
            conns.push(c);
        }
        let i = rng.below(conns.len() as u64) as usize;
        let c = &mut conns[i];
        let (cl, sv) = (c.client, c.server);
        let mut done = false;
        match c.state {
            0 => {
                tcp_frame(&mut frame, cl, sv, c.cport, c.sport, c.cseq, 0, 0x02, 0);
                c.cseq = c.cseq.wrapping_add(1);
                c.state = 1;
            }
            1 => {
                tcp_frame(
                    &mut frame, sv, cl, c.sport, c.cport, c.sseq, c.cseq, 0x12, 0,
                );
                c.sseq = c.sseq.wrapping_add(1);
                c.state = 2;
            }
            2 => {
                tcp_frame(
                    &mut frame, cl, sv, c.cport, c.sport, c.cseq, c.sseq, 0x10, 0,
                );
                c.state = 3;
            }
            3 if c.remaining > 0 && c.unacked < 2 => {
                tcp_frame(
                    &mut frame, sv, cl, c.sport, c.cport, c.sseq, c.cseq, 0x18, 1448,
                );
                if rng.below(400) == 0 {
                    delayed.push((ts_us + 200_000, frame.clone()));
                }
                c.sseq = c.sseq.wrapping_add(1448);
                c.remaining -= 1;
                c.unacked += 1;
            }
            3 if c.unacked > 0 => {
                tcp_frame(
                    &mut frame, cl, sv, c.cport, c.sport, c.cseq, c.sseq, 0x10, 0,
                );
                c.unacked = 0;
            }
            3 => {
                tcp_frame(
                    &mut frame, sv, cl, c.sport, c.cport, c.sseq, c.cseq, 0x11, 0,
                );
                c.sseq = c.sseq.wrapping_add(1);
                c.state = 4;
            }
            _ => {
                tcp_frame(
                    &mut frame, cl, sv, c.cport, c.sport, c.cseq, c.sseq, 0x11, 0,
                );
                done = true;
            }
        }
        ts_us += 10 + rng.below(50);
        // Retransmissions whose time has come go first.
        while let Some(pos) = delayed.iter().position(|(t, _)| *t <= ts_us) {
            let (_, old) = delayed.swap_remove(pos);
            write_record(&mut w, ts_us, &old, &mut stats)?;
            ts_us += 10;
        }
        write_record(&mut w, ts_us, &frame, &mut stats)?;
        if done {
            conns.swap_remove(i);
        }
    }
    w.flush()?;
    Ok(stats)
}

fn write_record(
    w: &mut impl Write,
    ts_us: u64,
    frame: &[u8],
    stats: &mut SynthStats,
) -> io::Result<()> {
    let len = frame.len() as u32;
    w.write_all(&((ts_us / 1_000_000) as u32).to_le_bytes())?;
    w.write_all(&((ts_us % 1_000_000) as u32).to_le_bytes())?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(frame)?;
    stats.bytes += 16 + u64::from(len);
    stats.packets += 1;
    Ok(())
}

/// Default size of the benchmark capture: 64 MiB.
pub const DEFAULT_BYTES: u64 = 64 * 1024 * 1024;
/// Default number of interleaved connections.
pub const DEFAULT_CONCURRENCY: usize = 2_000;

/// (Re)generate the benchmark capture in `std::env::temp_dir()` (written to a
/// `.tmp` name, then renamed, so a concurrent reader never sees half a file).
///
/// # Errors
/// I/O errors writing it.
pub fn synthetic_capture() -> io::Result<(std::path::PathBuf, SynthStats)> {
    let path = std::env::temp_dir().join("pcapsleuth-bench-synthetic-v1.pcap");
    let tmp = path.with_extension("pcap.tmp");
    let stats = write_synthetic_pcap(&tmp, DEFAULT_BYTES, DEFAULT_CONCURRENCY)?;
    std::fs::rename(&tmp, &path)?;
    Ok((path, stats))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcapsleuth_decode::Decoder;
    use pcapsleuth_flow::{FlowConfig, FlowTable, PacketMeta};
    use pcapsleuth_ingest::CaptureReader;

    /// The generated file is a valid capture: every record reads back, every
    /// frame decodes to IPv4, and the flow table sees every connection.
    #[test]
    fn synthetic_capture_reads_back() {
        let path =
            std::env::temp_dir().join(format!("pcapsleuth-synth-test-{}.pcap", std::process::id()));
        let stats = write_synthetic_pcap(&path, 2 * 1024 * 1024, 300).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), stats.bytes);
        assert!(stats.bytes >= 2 * 1024 * 1024 && stats.connections >= 300);
        let mut r = CaptureReader::open(&path).unwrap();
        let mut d = Decoder::new();
        let mut flows = FlowTable::new(FlowConfig::default());
        let mut events = Vec::new();
        let mut n = 0;
        while let Some(f) = r.next_frame().unwrap() {
            n += 1;
            let decoded = d.decode(f.linktype.0, f.data);
            assert!(
                decoded.ip.is_some() && decoded.stop.is_none(),
                "frame {}: {:?}",
                f.number,
                decoded.stop
            );
            flows.on_packet(
                &PacketMeta {
                    frame: f.number,
                    ts: f.ts,
                    interface: f.interface,
                },
                &decoded,
                &mut events,
            );
        }
        assert!(r.warnings().is_empty());
        assert_eq!(n, stats.packets);
        assert_eq!(flows.stream_count(), stats.connections);
        std::fs::remove_file(&path).unwrap();
    }
}
