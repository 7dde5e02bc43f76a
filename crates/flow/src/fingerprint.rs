//! NAT-invariant packet fingerprints, and an index of their sightings across
//! streams and interfaces.
//!
//! One packet crossing a router or a NAT box is captured once per interface
//! (`dumpcap -i eth0 -i eth1`, `tcpdump -i any`, a merge of captures from both
//! sides). Behind SNAT/MASQUERADE the copies carry different addresses and
//! ports, so they fall into different `tcp.stream`s / `udp.stream`s; the
//! per-stream duplicate-sighting matcher (`sightings.rs`) cannot pair them. A
//! [`PacketFingerprint`] is built only from fields that survive the trip, and
//! a [`FingerprintIndex`] finds every sighting of one fingerprint.
//!
//! # What NAT changes and what it keeps
//!
//! - **Rewritten** by SNAT/MASQUERADE/DNAT (Linux `nf_nat`, `nf_nat_manip_pkt`
//!   in `net/netfilter/nf_nat_proto.c`): IP source/destination addresses,
//!   TCP/UDP ports, and the IP, TCP and UDP checksums (incrementally updated).
//!   Not part of the fingerprint.
//! - **Decremented** by every router: IPv4 TTL / IPv6 hop limit (one per hop,
//!   RFC 791, RFC 8200 §3). Not part of the fingerprint.
//! - **Kept**: the IPv4 Identification field (Linux NAT never rewrites it; a
//!   few middleboxes do, e.g. OpenBSD pf `scrub (random-id)`), TCP sequence
//!   and acknowledgement numbers, flags, window field, options (TSval/TSecr,
//!   SACK blocks) and payload — unless a middlebox randomises sequence numbers
//!   (Cisco ASA / PIX "TCP sequence number randomization", pf `modulate
//!   state`: then seq, ack and SACK blocks differ and copies do not match), or
//!   an application-level gateway rewrites the payload (FTP `PORT`, SIP
//!   helpers `nf_nat_ftp`, `nf_nat_sip`). MSS clamping
//!   (`TCPMSS --clamp-mss-to-pmtu`) changes only the MSS option, which is not
//!   fingerprinted.
//!
//! # Identity
//!
//! - IPv4: the IP ID plus the L4 identity — TCP seq, ack, flags, window,
//!   payload length, timestamps option, first SACK block and a hash of
//!   the first [`FINGERPRINT_PAYLOAD_BYTES`] captured payload bytes; UDP
//!   payload length and payload hash.
//! - IPv6 (no IP ID outside a Fragment header) and IPv4 ID 0 (Linux sends
//!   ID 0 on some DF packets, e.g. `ip_select_ident` without a socket): the
//!   L4 identity alone, which repeats (a retransmitted SYN/ACK without
//!   timestamps, two identical DNS queries), so such matches are only
//!   accepted within [`FingerprintIndex::match_window_ns`] of capture time.

use crate::{DatagramEvent, SegmentEvent};
use pcapsleuth_core::{Direction, FrameNo, InterfaceId, SeqNum, StreamRef, Timestamp};
use pcapsleuth_decode::{IpHeader, TcpSegment};
use std::collections::{HashMap, VecDeque};

/// Captured payload bytes hashed into a fingerprint (a prefix, so copies
/// captured with different snap lengths still match when both keep it).
pub const FINGERPRINT_PAYLOAD_BYTES: usize = 32;

/// 64-bit hash of at most the first [`FINGERPRINT_PAYLOAD_BYTES`] of `p`
/// (their number mixed in): eight bytes per multiply-rotate step, so the
/// per-packet cost is four steps instead of FNV-1a's 32 dependent
/// multiplies. Compared for equality only.
pub(crate) fn payload_hash(p: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let p = &p[..p.len().min(FINGERPRINT_PAYLOAD_BYTES)];
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ (p.len() as u64);
    let mut step = |w: u64| h = (h ^ w).wrapping_mul(K).rotate_left(29);
    let mut chunks = p.chunks_exact(8);
    for c in &mut chunks {
        let mut b = [0u8; 8];
        b.copy_from_slice(c);
        step(u64::from_le_bytes(b));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut b = [0u8; 8];
        b[..rest.len()].copy_from_slice(rest);
        step(u64::from_le_bytes(b));
    }
    h ^ (h >> 32)
}

/// The TCP part of a [`PacketFingerprint`]: every field NAT leaves alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpFingerprint {
    /// Raw sequence number.
    pub seq: SeqNum,
    /// Raw acknowledgement number (as sent, also when ACK is not set).
    pub ack: SeqNum,
    /// TCP flags (9 bits).
    pub flags: u16,
    /// Raw (unscaled) window field.
    pub window: u16,
    /// Payload length in bytes (from the IP length, not the captured bytes).
    pub payload_len: u32,
    /// Timestamps option (TSval, TSecr), if present.
    pub timestamps: Option<(u32, u32)>,
    /// First SACK block (left, right edge), if any.
    pub sack0: Option<(SeqNum, SeqNum)>,
    /// Hash of the first [`FINGERPRINT_PAYLOAD_BYTES`] captured payload bytes
    /// (equal bytes, equal hash; the value itself carries no meaning).
    pub payload_hash: u64,
}

/// The UDP part of a [`PacketFingerprint`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpFingerprint {
    /// Payload length in bytes (from the UDP length field).
    pub payload_len: u32,
    /// Hash of the first [`FINGERPRINT_PAYLOAD_BYTES`] captured payload bytes
    /// (equal bytes, equal hash; the value itself carries no meaning).
    pub payload_hash: u64,
}

/// The transport-layer identity of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L4Fingerprint {
    /// A TCP segment.
    Tcp(TcpFingerprint),
    /// A UDP datagram.
    Udp(UdpFingerprint),
}

/// What identifies one packet on every interface it crossed, NAT included:
/// equal fingerprints are the same packet (within a time window when
/// [`PacketFingerprint::strong`] is false). See the module documentation for
/// what NAT rewrites and what it keeps. Addresses, ports, TTL and checksums
/// are deliberately left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PacketFingerprint {
    /// IPv4 Identification (or the IPv6 Fragment header's identification);
    /// `None` for IPv6 without a Fragment header.
    pub ip_id: Option<u32>,
    /// Transport identity.
    pub l4: L4Fingerprint,
}

impl PacketFingerprint {
    /// Fingerprint of a TCP segment carried in `ip`.
    pub fn tcp(ip: &IpHeader, seg: &TcpSegment<'_>) -> PacketFingerprint {
        PacketFingerprint {
            ip_id: ip.ip_id,
            l4: L4Fingerprint::Tcp(TcpFingerprint {
                seq: seg.seq,
                ack: seg.ack,
                flags: seg.flags.0,
                window: seg.window,
                payload_len: seg.payload_len,
                timestamps: seg.options.timestamps,
                sack0: seg.options.sack.as_slice().first().copied(),
                payload_hash: payload_hash(seg.payload),
            }),
        }
    }

    /// Fingerprint of a UDP datagram carried in `ip`: `payload_len` bytes
    /// from the UDP length field, `payload` the bytes captured.
    pub fn udp(ip: &IpHeader, payload_len: u32, payload: &[u8]) -> PacketFingerprint {
        PacketFingerprint {
            ip_id: ip.ip_id,
            l4: L4Fingerprint::Udp(UdpFingerprint {
                payload_len,
                payload_hash: payload_hash(payload),
            }),
        }
    }

    /// The IP ID is a strong identity: present and non-zero. Then the
    /// fingerprint practically never repeats within the index horizon (a
    /// retransmission gets a new IP ID on Linux, `ip_select_ident_segs`).
    pub fn strong(&self) -> bool {
        self.ip_id.is_some_and(|id| id != 0)
    }
}

/// One sighting of a fingerprinted packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FingerprintSighting {
    /// Frame number.
    pub frame: FrameNo,
    /// Capture time, ns since the Unix epoch.
    pub ts: Timestamp,
    /// Capture interface.
    pub interface: InterfaceId,
    /// The `tcp.stream` / `udp.stream` it was assigned to.
    pub stream: StreamRef,
    /// Its direction within that stream.
    pub dir: Direction,
}

impl FingerprintSighting {
    /// The sighting of a segment event.
    pub fn of_segment(e: &SegmentEvent) -> FingerprintSighting {
        FingerprintSighting {
            frame: e.frame,
            ts: e.ts,
            interface: e.interface,
            stream: StreamRef::tcp(e.stream.get()),
            dir: e.dir,
        }
    }

    /// The sighting of a datagram event.
    pub fn of_datagram(e: &DatagramEvent) -> FingerprintSighting {
        FingerprintSighting {
            frame: e.frame,
            ts: e.ts,
            interface: e.interface,
            stream: StreamRef::udp(e.stream.get()),
            dir: e.dir,
        }
    }
}

/// Default [`FingerprintIndex::horizon_ns`]: 1 s, as the per-stream sighting
/// matcher's single-place horizon (a dumpcap buffer flush).
pub const DEFAULT_HORIZON_NS: i64 = 1_000_000_000;
/// Default [`FingerprintIndex::match_window_ns`]: 10 ms, as
/// [`crate::FlowConfig::duplicate_window_ns`].
pub const DEFAULT_MATCH_WINDOW_NS: i64 = 10_000_000;
/// Default [`FingerprintIndex::max_entries`].
pub const DEFAULT_MAX_ENTRIES: usize = 65_536;

/// Every recent sighting of every fingerprint, across streams and interfaces.
///
/// Bounded: at most `max_entries` sightings (oldest inserted evicted), and a
/// sighting is dropped once the latest capture time seen is more than
/// `horizon_ns` past it (checked from the oldest inserted, so one late
/// sighting may outlive its horizon until the ones before it expire; lookups
/// filter by time anyway). Frame order is not time order: a copy written a
/// capture-buffer flush later, with an earlier timestamp, is still found while
/// its original is within the horizon. Memory: about 270 bytes per sighting
/// held (96-byte entry, 80-byte map key with its serial list, growth slack;
/// [`FingerprintIndex::heap_bytes`]), 17.7 MB when full with the defaults.
#[derive(Debug)]
pub struct FingerprintIndex {
    /// Sightings are kept this long past the latest capture time seen, ns.
    pub horizon_ns: i64,
    /// Largest |Δts| for a match of a fingerprint that is not
    /// [`PacketFingerprint::strong`], ns (strong ones match within `horizon_ns`).
    pub match_window_ns: i64,
    /// Most sightings held.
    pub max_entries: usize,
    /// Sightings in insertion order; entry `i` has serial `base + i`.
    entries: VecDeque<(PacketFingerprint, FingerprintSighting)>,
    base: u64,
    /// Serials of the sightings held per fingerprint, ascending.
    by_fp: HashMap<PacketFingerprint, Vec<u64>>,
    latest: Option<Timestamp>,
}

impl Default for FingerprintIndex {
    fn default() -> Self {
        FingerprintIndex::new(
            DEFAULT_HORIZON_NS,
            DEFAULT_MATCH_WINDOW_NS,
            DEFAULT_MAX_ENTRIES,
        )
    }
}

impl FingerprintIndex {
    /// An empty index (times in ns; `max_entries` at least 1).
    pub fn new(horizon_ns: i64, match_window_ns: i64, max_entries: usize) -> FingerprintIndex {
        FingerprintIndex {
            horizon_ns: horizon_ns.max(0),
            match_window_ns: match_window_ns.max(0),
            max_entries: max_entries.max(1),
            entries: VecDeque::new(),
            base: 0,
            by_fp: HashMap::new(),
            latest: None,
        }
    }

    /// Sightings held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No sightings held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Approximate heap bytes (by capacity; hashbrown entries plus one control byte).
    pub fn heap_bytes(&self) -> usize {
        let entry = std::mem::size_of::<(PacketFingerprint, FingerprintSighting)>();
        let key = std::mem::size_of::<(PacketFingerprint, Vec<u64>)>() + 1;
        self.entries.capacity() * entry
            + self.by_fp.capacity() * key
            + self
                .by_fp
                .values()
                .map(|v| v.capacity() * std::mem::size_of::<u64>())
                .sum::<usize>()
    }

    /// Earlier sightings of `fp` that are the same packet as one seen at `ts`:
    /// |Δts| ≤ `horizon_ns` for a strong fingerprint, ≤ `match_window_ns`
    /// otherwise. In insertion order.
    pub fn sightings(
        &self,
        fp: &PacketFingerprint,
        ts: Timestamp,
    ) -> impl Iterator<Item = &FingerprintSighting> + '_ {
        let window = if fp.strong() {
            self.horizon_ns
        } else {
            self.match_window_ns
        } as u64;
        let base = self.base;
        self.by_fp
            .get(fp)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter_map(move |&serial| {
                let i = usize::try_from(serial.checked_sub(base)?).ok()?;
                self.entries.get(i).map(|e| &e.1)
            })
            .filter(move |s| s.ts.0.abs_diff(ts.0) <= window)
    }

    /// Record a sighting of `fp`; returns the earlier sightings of the same
    /// packet ([`FingerprintIndex::sightings`]), on any stream or interface.
    pub fn observe(
        &mut self,
        fp: PacketFingerprint,
        sighting: FingerprintSighting,
    ) -> Vec<FingerprintSighting> {
        if self.latest.is_none_or(|t| sighting.ts > t) {
            self.latest = Some(sighting.ts);
        }
        self.expire();
        let earlier: Vec<FingerprintSighting> = self.sightings(&fp, sighting.ts).copied().collect();
        if self.entries.len() >= self.max_entries {
            self.pop_oldest();
        }
        let serial = self.base + self.entries.len() as u64;
        self.entries.push_back((fp, sighting));
        self.by_fp.entry(fp).or_default().push(serial);
        earlier
    }

    /// [`FingerprintIndex::observe`] for a segment event (its
    /// [`SegmentEvent::fingerprint`]).
    pub fn observe_segment(&mut self, e: &SegmentEvent) -> Vec<FingerprintSighting> {
        self.observe(e.fingerprint, FingerprintSighting::of_segment(e))
    }

    /// [`FingerprintIndex::observe`] for a datagram event (its
    /// [`DatagramEvent::fingerprint`]).
    pub fn observe_datagram(&mut self, e: &DatagramEvent) -> Vec<FingerprintSighting> {
        self.observe(e.fingerprint, FingerprintSighting::of_datagram(e))
    }

    fn expire(&mut self) {
        let Some(latest) = self.latest else { return };
        let watermark = latest.0.saturating_sub(self.horizon_ns);
        while self.entries.front().is_some_and(|e| e.1.ts.0 < watermark) {
            self.pop_oldest();
        }
    }

    fn pop_oldest(&mut self) {
        let Some((fp, _)) = self.entries.pop_front() else {
            return;
        };
        let serial = self.base;
        self.base += 1;
        if let Some(list) = self.by_fp.get_mut(&fp) {
            if list.first() == Some(&serial) {
                list.remove(0);
            }
            if list.is_empty() {
                self.by_fp.remove(&fp);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcapsleuth_decode::IpVersion;
    use std::net::IpAddr;

    fn v4(src: &str, dst: &str, id: u32, ttl: u8) -> IpHeader {
        IpHeader {
            version: IpVersion::V4,
            src: src.parse::<IpAddr>().unwrap(),
            dst: dst.parse::<IpAddr>().unwrap(),
            ttl,
            ip_id: Some(id),
            total_len: 64,
            header_len: 20,
            protocol: 17,
            dont_fragment: false,
            fragment: None,
        }
    }

    fn at(frame: u64, ms: i64, iface: u32, stream: u64) -> FingerprintSighting {
        FingerprintSighting {
            frame: FrameNo(frame),
            ts: Timestamp(ms * 1_000_000),
            interface: InterfaceId(iface),
            stream: StreamRef::udp(stream),
            dir: Direction::ClientToServer,
        }
    }

    #[test]
    fn udp_datagram_behind_nat_has_the_same_fingerprint() {
        let dns = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01";
        // Inside: 10.0.0.2 → 192.0.2.53, TTL 64; outside after MASQUERADE: 198.51.100.1, TTL 63.
        let inside = PacketFingerprint::udp(&v4("10.0.0.2", "192.0.2.53", 77, 64), 29, dns);
        let outside = PacketFingerprint::udp(&v4("198.51.100.1", "192.0.2.53", 77, 63), 29, dns);
        assert_eq!(inside, outside);
        // Another query (new DNS ID) is another packet.
        let mut other = *dns;
        other[1] = 0x35;
        assert_ne!(
            inside,
            PacketFingerprint::udp(&v4("10.0.0.2", "192.0.2.53", 77, 64), 29, &other)
        );

        let mut index = FingerprintIndex::default();
        assert!(index.observe(inside, at(1, 0, 0, 0)).is_empty());
        let found = index.observe(outside, at(2, 0, 1, 1));
        assert_eq!(found, [at(1, 0, 0, 0)]);
    }

    #[test]
    fn memory_is_bounded_by_count_and_capture_time() {
        let fp = |i: u32| PacketFingerprint {
            ip_id: Some(i + 1),
            l4: L4Fingerprint::Udp(UdpFingerprint {
                payload_len: 10,
                payload_hash: 1,
            }),
        };
        let mut index = FingerprintIndex::new(DEFAULT_HORIZON_NS, DEFAULT_MATCH_WINDOW_NS, 100);
        for i in 0..1000u32 {
            index.observe(fp(i), at(u64::from(i), 0, 0, 0));
        }
        assert_eq!(index.len(), 100);
        assert_eq!(index.by_fp.len(), 100);
        // The oldest were evicted; the newest are still found.
        assert_eq!(index.sightings(&fp(0), Timestamp(0)).count(), 0);
        assert_eq!(index.sightings(&fp(999), Timestamp(0)).count(), 1);
        // 2 s of capture time later everything older than the 1 s horizon goes.
        index.observe(fp(5000), at(5000, 2000, 0, 0));
        assert_eq!(index.len(), 1);
        assert_eq!(index.by_fp.len(), 1);
        assert!(index.heap_bytes() > 0);
        // A strong fingerprint matches within the horizon, a weak one within the window.
        let weak = PacketFingerprint {
            ip_id: None,
            ..fp(0)
        };
        index.observe(weak, at(6000, 2000, 0, 0));
        assert_eq!(index.sightings(&weak, Timestamp(2_005_000_000)).count(), 1);
        assert_eq!(index.sightings(&weak, Timestamp(2_020_000_000)).count(), 0);
        assert_eq!(
            index.sightings(&fp(5000), Timestamp(2_900_000_000)).count(),
            1
        );
    }
}
