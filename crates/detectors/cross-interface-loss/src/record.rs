//! What the detector keeps of each TCP/UDP packet: one compact [`Record`],
//! and where (which [`Port`]) it was captured.

use pcapsleuth_core::{Endpoint, FrameNo, InterfaceId, Protocol, StreamRef};
use pcapsleuth_decode::{Decoded, Transport};
use pcapsleuth_detect::fasthash::StreamHasher;
use pcapsleuth_flow::PacketFingerprint;
use std::hash::{Hash, Hasher};

/// Linux `PACKET_OUTGOING` (`<linux/if_packet.h>`): the SLL/SLL2 packet type
/// of a packet the host sent (or forwarded) out of the interface.
pub const PACKET_OUTGOING: u8 = 4;

/// One place packets are captured: a capture interface, or inside a
/// `tcpdump -i any` capture (Linux cooked capture) the interface the kernel
/// names per packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Port {
    /// Capture interface (pcapng IDB index; merged id under `--merge`).
    pub interface: InterfaceId,
    /// Which part of it.
    pub sub: SubPort,
}

/// The part of a capture interface a packet was seen on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SubPort {
    /// The whole capture interface (Ethernet, raw IP, …: one interface).
    Whole,
    /// SLL2 (`LINKTYPE_LINUX_SLL2`): the kernel interface index
    /// (`sll2_if_index`) of the interface the packet crossed.
    Ifindex(u32),
    /// SLL v1 (no interface index): packets received (`PACKET_HOST`,
    /// `BROADCAST`, `MULTICAST`, `OTHERHOST`) on some interface.
    SllIn,
    /// SLL v1: packets sent (`PACKET_OUTGOING`) on some interface.
    SllOut,
}

/// TCP facts of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpBits {
    /// Raw sequence number.
    pub seq: u32,
    /// Flags (9 bits, as on the wire).
    pub flags: u16,
    /// Payload length in bytes.
    pub payload_len: u32,
    /// TSval of the timestamps option, if present.
    pub tsval: Option<u32>,
}

impl TcpBits {
    /// A SYN without ACK (a connection request).
    pub fn is_syn(&self) -> bool {
        self.flags & 0x012 == 0x002
    }
    /// SYN, FIN or payload: something TCP retransmits when it is lost.
    pub fn is_reliable(&self) -> bool {
        self.flags & 0x003 != 0 || self.payload_len > 0
    }
}

/// One TCP or UDP packet as captured on one [`Port`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Frame number.
    pub frame: FrameNo,
    /// Capture time, ns since the Unix epoch.
    pub ts: i64,
    /// Where it was captured.
    pub port: Port,
    /// SLL/SLL2 packet type was `PACKET_OUTGOING`.
    pub outgoing: bool,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
    /// TCP or UDP.
    pub proto: Protocol,
    /// Sender.
    pub src: Endpoint,
    /// Receiver.
    pub dst: Endpoint,
    /// 64-bit hash of the packet's [`PacketFingerprint`] (NAT-invariant
    /// identity: IP ID, TCP seq/ack/flags/window/timestamps, payload hash).
    pub fp: u64,
    /// The fingerprint carries a non-zero IP ID ([`PacketFingerprint::strong`]).
    pub strong: bool,
    /// IPv4 identification, if any.
    pub ip_id: Option<u32>,
    /// `tcp.stream` / `udp.stream`.
    pub stream: Option<StreamRef>,
    /// TCP facts (`None` for UDP).
    pub tcp: Option<TcpBits>,
    /// UDP payload length in bytes (0 for TCP).
    pub udp_len: u32,
    /// Hash of the whole fingerprint's L4 part without the IP ID: equal for
    /// a datagram re-sent with the same bytes (a DNS retry).
    pub l4_hash: u64,
}

/// A 64-bit digest of `v` for equality tests between packets: the
/// multiply-rotate [`StreamHasher`] (a bijection of its state per word, so
/// fingerprints differing in one field never collide) with the splitmix64
/// finaliser to spread the bits. `std`'s SipHash, used until now, was 12 %
/// of the instructions of a 200,000-packet capture (every packet is
/// recorded until [`crate::SINGLE_PORT_GIVE_UP`]); its resistance to
/// crafted collisions buys nothing for a digest that is never a map's hash.
fn hash64<T: Hash>(v: &T) -> u64 {
    let mut h = StreamHasher::default();
    v.hash(&mut h);
    let mut z = h.finish().wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The port of a packet: the capture interface, refined by the SLL/SLL2
/// interface index or packet type.
pub fn port_of(interface: InterfaceId, d: &Decoded<'_>) -> Port {
    let sub = match (d.link.sll_ifindex, d.link.sll_pkttype) {
        (Some(i), _) => SubPort::Ifindex(i),
        (None, Some(PACKET_OUTGOING)) => SubPort::SllOut,
        (None, Some(_)) => SubPort::SllIn,
        (None, None) => SubPort::Whole,
    };
    Port { interface, sub }
}

/// The record of a decoded packet, if it is TCP or UDP over IP.
pub fn record_of(
    frame: FrameNo,
    ts: i64,
    port: Port,
    d: &Decoded<'_>,
    stream: Option<StreamRef>,
) -> Option<Record> {
    let ip = d.ip.as_ref()?;
    let (proto, sport, dport, fp, tcp, udp_len) = match &d.transport {
        Transport::Tcp(seg) => (
            Protocol::Tcp,
            seg.src_port,
            seg.dst_port,
            PacketFingerprint::tcp(ip, seg),
            Some(TcpBits {
                seq: seg.seq.0,
                flags: seg.flags.0,
                payload_len: seg.payload_len,
                tsval: seg.options.timestamps.map(|t| t.0),
            }),
            0,
        ),
        Transport::Udp(u) => (
            Protocol::Udp,
            u.src_port,
            u.dst_port,
            PacketFingerprint::udp(ip, u.payload_len, u.payload),
            None,
            u.payload_len,
        ),
        _ => return None,
    };
    Some(Record {
        frame,
        ts,
        port,
        outgoing: d.link.sll_pkttype == Some(PACKET_OUTGOING),
        ttl: ip.ttl,
        proto,
        src: Endpoint {
            addr: ip.src,
            port: sport,
        },
        dst: Endpoint {
            addr: ip.dst,
            port: dport,
        },
        fp: hash64(&fp),
        strong: fp.strong(),
        ip_id: ip.ip_id,
        stream,
        tcp,
        udp_len,
        l4_hash: hash64(&fp.l4),
    })
}

#[cfg(test)]
mod tests {
    use super::hash64;
    use std::collections::HashSet;
    use std::net::{IpAddr, Ipv4Addr};

    /// Equal values give equal digests; values differing in one field, and
    /// the segments of a bulk transfer, give distinct ones.
    #[test]
    fn digests_tell_packets_apart() {
        type Pkt = (IpAddr, IpAddr, u16, u16, u32, u32, Option<u16>, Option<u32>);
        let a: IpAddr = Ipv4Addr::new(192, 0, 2, 1).into();
        let b: IpAddr = Ipv4Addr::new(198, 51, 100, 7).into();
        let base: Pkt = (a, b, 40_000, 443, 1_000, 2_000, Some(7), None);
        assert_eq!(hash64(&base), hash64(&base.clone()));
        let variants: Vec<Pkt> = vec![
            base,
            (b, a, 40_000, 443, 1_000, 2_000, Some(7), None),
            (a, b, 443, 40_000, 1_000, 2_000, Some(7), None),
            (a, b, 40_000, 443, 2_000, 1_000, Some(7), None),
            (a, b, 40_000, 443, 1_001, 2_000, Some(7), None),
            (a, b, 40_000, 443, 1_000, 2_000, None, None),
            (a, b, 40_000, 443, 1_000, 2_000, Some(0), None),
            (a, b, 40_000, 443, 1_000, 2_000, Some(7), Some(0)),
            (a, b, 40_000, 443, 1_000, 2_000, Some(8), None),
        ];
        let digests: HashSet<u64> = variants.iter().map(hash64).collect();
        assert_eq!(digests.len(), variants.len());
        let bulk: HashSet<u64> = (0..200_000u32)
            .map(|k| {
                hash64(&(
                    a,
                    b,
                    40_000u16,
                    443u16,
                    k.wrapping_mul(1448),
                    1u32,
                    Some(k as u16),
                    None::<u32>,
                ))
            })
            .collect();
        assert_eq!(bulk.len(), 200_000);
    }
}
