//! What the detector keeps of each TCP/UDP packet: one compact [`Record`],
//! and where (which [`Port`]) it was captured.

use pcapsleuth_core::{Endpoint, FrameNo, InterfaceId, Protocol, StreamRef};
use pcapsleuth_decode::{Decoded, Transport};
use pcapsleuth_flow::PacketFingerprint;
use std::collections::hash_map::DefaultHasher;
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

fn hash64<T: Hash>(v: &T) -> u64 {
    let mut h = DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
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
