//! The decoded view of a packet. All types are plain data; nothing allocates.

use pcapsleuth_core::SeqNum;
use std::net::IpAddr;

/// Everything decoded from one frame.
#[derive(Debug, Clone, Copy, Default)]
pub struct Decoded<'a> {
    /// Link-layer facts (VLAN tags, Linux cooked-capture fields).
    pub link: LinkInfo,
    /// Outermost IP header, when the transport is carried inside a tunnel
    /// (IPIP, 6in4, GRE, VXLAN, …); `None` when not tunnelled.
    pub outer_ip: Option<IpHeader>,
    /// The outermost UDP header of a UDP tunnel (VXLAN, Geneve, GTP-U,
    /// Teredo, CAPWAP data) whose payload was decoded as an inner packet;
    /// `None` when not tunnelled in UDP. Wireshark dissects it first, so its
    /// conversation takes the first `udp.stream` value of the frame. Only the
    /// outermost is kept when UDP tunnels nest.
    pub outer_udp: Option<UdpLayer>,
    /// The IP header that carries [`Decoded::transport`] (innermost).
    pub ip: Option<IpHeader>,
    /// The transport layer found inside `ip`.
    pub transport: Transport<'a>,
    /// Where and why decoding stopped early, if it did.
    pub stop: Option<DecodeStop>,
    /// The UDP header at the start of a first IP fragment (offset 0, MF set)
    /// that Wireshark does not reassemble because fewer bytes were captured
    /// than the IP header announces (snaplen, or a frame shorter than the IP
    /// length field; `tvb_bytes_exist` fails in `packet-ip.c`). Wireshark
    /// then dissects the transport as it is ("First fragment, or not
    /// fragmented. Dissect what we have here"), which gives the frame a
    /// `udp.stream`. Only this header is recorded: the transport stays what
    /// the decoder made of the fragment ([`Transport::None`] with a
    /// [`StopReason::Fragment`] stop, unless it completed a datagram).
    /// Needs the 8 header bytes captured.
    pub first_fragment_udp: Option<UdpLayer>,
}

/// A UDP header that is not [`Decoded::transport`] (a tunnel's outer header,
/// or the header of a first fragment that was not reassembled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpLayer {
    /// The IP header that carries it.
    pub ip: IpHeader,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// The raw Length field, bytes, 8-byte header included (0 in an RFC 2675
    /// jumbogram; below 8 is invalid).
    pub length: u16,
}

/// Link-layer facts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkInfo {
    /// 802.1Q / QinQ VLAN ids, outermost first; `vlan_count` of them are valid.
    pub vlans: [u16; 2],
    /// Number of valid entries in `vlans` (tags beyond two are skipped but counted here up to 255).
    pub vlan_count: u8,
    /// Linux SLL/SLL2 packet type (0 = to us, 4 = outgoing…), if cooked capture.
    pub sll_pkttype: Option<u8>,
    /// Linux SLL2 interface index, if present.
    pub sll_ifindex: Option<u32>,
    /// Link-layer source address of the frame, when it is a 6-byte MAC: the
    /// outermost Ethernet header's source, or the SLL/SLL2 "link-layer
    /// address" (the sender's address; for outgoing packets the capturing
    /// host's own). `None` for other link types.
    pub src_mac: Option<[u8; 6]>,
}

/// IP version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IpVersion {
    /// IPv4.
    #[default]
    V4,
    /// IPv6.
    V6,
}

/// Fragmentation facts of an IP datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fragment {
    /// Fragment offset in bytes.
    pub offset: u32,
    /// More-fragments flag.
    pub more: bool,
    /// Identification (IPv4 16-bit ID or IPv6 fragment header 32-bit ID).
    pub id: u32,
}

/// A parsed IPv4 or IPv6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpHeader {
    /// 4 or 6.
    pub version: IpVersion,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// TTL / hop limit.
    pub ttl: u8,
    /// IPv4 identification; `None` for IPv6 without a fragment header.
    pub ip_id: Option<u32>,
    /// Datagram length from the header in bytes (IPv4 total length; IPv6
    /// 40 + payload length), even when the frame was cut short by the snaplen.
    pub total_len: u32,
    /// Header length in bytes including IPv6 extension headers.
    pub header_len: u32,
    /// Transport protocol number after extension headers.
    pub protocol: u8,
    /// IPv4 DF bit (always false for IPv6).
    pub dont_fragment: bool,
    /// Set when this datagram is a fragment (offset > 0 or MF set).
    pub fragment: Option<Fragment>,
}

/// TCP flag bits as on the wire (9 bits: NS/AE, CWR, ECE, URG, ACK, PSH, RST, SYN, FIN).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct TcpFlags(pub u16);

impl TcpFlags {
    /// FIN.
    pub const FIN: u16 = 0x001;
    /// SYN.
    pub const SYN: u16 = 0x002;
    /// RST.
    pub const RST: u16 = 0x004;
    /// PSH.
    pub const PSH: u16 = 0x008;
    /// ACK.
    pub const ACK: u16 = 0x010;
    /// URG.
    pub const URG: u16 = 0x020;
    /// ECE.
    pub const ECE: u16 = 0x040;
    /// CWR.
    pub const CWR: u16 = 0x080;
    /// NS (RFC 3540) / AE (accurate ECN).
    pub const NS: u16 = 0x100;
    /// SYN set.
    pub const fn syn(self) -> bool {
        self.0 & Self::SYN != 0
    }
    /// ACK set.
    pub const fn ack(self) -> bool {
        self.0 & Self::ACK != 0
    }
    /// FIN set.
    pub const fn fin(self) -> bool {
        self.0 & Self::FIN != 0
    }
    /// RST set.
    pub const fn rst(self) -> bool {
        self.0 & Self::RST != 0
    }
    /// PSH set.
    pub const fn psh(self) -> bool {
        self.0 & Self::PSH != 0
    }
    /// URG set.
    pub const fn urg(self) -> bool {
        self.0 & Self::URG != 0
    }
}

/// Up to four SACK blocks (RFC 2018), `[left, right)` in sequence space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SackBlocks {
    /// The blocks; only the first `len` are valid.
    pub blocks: [(SeqNum, SeqNum); 4],
    /// Number of valid blocks.
    pub len: u8,
}

impl SackBlocks {
    /// The valid blocks.
    pub fn as_slice(&self) -> &[(SeqNum, SeqNum)] {
        &self.blocks[..usize::from(self.len).min(self.blocks.len())]
    }
}

/// TCP options the analyzer uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpOptions {
    /// MSS option (kind 2), bytes.
    pub mss: Option<u16>,
    /// Window scale shift count (kind 3), as sent (not clamped to 14).
    pub window_scale: Option<u8>,
    /// SACK-permitted (kind 4).
    pub sack_permitted: bool,
    /// SACK blocks (kind 5).
    pub sack: SackBlocks,
    /// Timestamps (kind 8): (TSval, TSecr).
    pub timestamps: Option<(u32, u32)>,
    /// The option list was malformed or cut short; options before that point are kept.
    pub malformed: bool,
}

/// A TCP segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSegment<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: SeqNum,
    /// Acknowledgement number (meaningful when ACK is set).
    pub ack: SeqNum,
    /// Flags.
    pub flags: TcpFlags,
    /// Raw (unscaled) window field.
    pub window: u16,
    /// Urgent pointer.
    pub urgent: u16,
    /// Data offset in bytes.
    pub header_len: u32,
    /// Payload length in bytes from the IP length (not the captured length).
    pub payload_len: u32,
    /// Captured payload bytes (may be shorter than `payload_len`).
    pub payload: &'a [u8],
    /// Parsed options.
    pub options: TcpOptions,
}

/// A UDP datagram (RFC 768).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpDatagram<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// The raw Length field, bytes, 8-byte header included, as on the wire:
    /// 0 in an RFC 2675 jumbogram (IPv6), below 8 invalid (Wireshark then
    /// dissects no further and gives no `udp.stream`).
    pub length: u16,
    /// Payload length in bytes (from the UDP length field; for a length of 0,
    /// an RFC 2675 jumbogram, from the IP payload length).
    pub payload_len: u32,
    /// The UDP payload bytes as captured: the bytes after the 8-byte UDP
    /// header, bounded by the UDP length field (`payload_len`), the IP
    /// length and the captured bytes, so it may be shorter than `payload_len`
    /// when the snaplen cut the frame. Empty when the length field is below 8.
    /// Inside a reassembled IP datagram it borrows the reassembly buffer.
    pub payload: &'a [u8],
}

/// What an ICMP/ICMPv6 message means, for the types the analyzer cares about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpKind {
    /// ICMPv4 type 3 code 4: fragmentation needed and DF set (RFC 1191).
    FragNeeded,
    /// ICMPv6 type 2: Packet Too Big (RFC 8201).
    PacketTooBig,
    /// Other destination-unreachable codes.
    DestUnreachable,
    /// ICMPv4 type 11 / ICMPv6 type 3.
    TimeExceeded,
    /// Echo request.
    EchoRequest,
    /// Echo reply.
    EchoReply,
    /// Anything else.
    Other,
}

/// The packet quoted inside an ICMP error (RFC 792 / RFC 4443).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotedPacket {
    /// The quoted IP header (its `total_len` is the original datagram size).
    pub ip: IpHeader,
    /// Quoted transport source port, if at least 4 bytes were quoted.
    pub src_port: Option<u16>,
    /// Quoted transport destination port.
    pub dst_port: Option<u16>,
    /// Quoted TCP sequence number, if TCP and at least 8 bytes were quoted.
    pub tcp_seq: Option<SeqNum>,
    /// Quoted TCP acknowledgement number, if at least 12 bytes were quoted.
    pub tcp_ack: Option<SeqNum>,
    /// Quoted TCP flags, if at least 14 bytes were quoted.
    pub tcp_flags: Option<TcpFlags>,
    /// How many bytes of the quoted transport header are present.
    pub transport_bytes: u32,
}

/// The body of an ICMP/ICMPv6 echo request or reply (RFC 792 types 8/0,
/// RFC 4443 §4.1-4.2 types 128/129).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcmpEcho<'a> {
    /// Identifier (bytes 4-5 of the ICMP header, big-endian).
    pub id: u16,
    /// Sequence number (bytes 6-7, big-endian).
    pub seq: u16,
    /// The echo data after the 8-byte header, as captured and bounded by the
    /// IP length (shorter than sent when the snaplen cut the frame).
    pub data: &'a [u8],
}

/// An ICMP or ICMPv6 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcmpMessage<'a> {
    /// 4 for ICMP, 6 for ICMPv6.
    pub version: IpVersion,
    /// Type field.
    pub icmp_type: u8,
    /// Code field.
    pub code: u8,
    /// Classified meaning.
    pub kind: IcmpKind,
    /// Next-hop MTU (frag-needed) or MTU (Packet Too Big), bytes.
    pub mtu: Option<u32>,
    /// The quoted packet of an error message.
    pub quoted: Option<QuotedPacket>,
    /// Identifier, sequence number and data of an echo request or reply
    /// with its 8-byte header captured; `None` for other types.
    pub echo: Option<IcmpEcho<'a>>,
}

/// The transport layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport<'a> {
    /// No IP, or decoding stopped before the transport.
    #[default]
    None,
    /// TCP.
    Tcp(TcpSegment<'a>),
    /// UDP.
    Udp(UdpDatagram<'a>),
    /// ICMP or ICMPv6.
    Icmp(IcmpMessage<'a>),
    /// Another protocol number, not decoded.
    Other(u8),
}

/// The layer at which decoding stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// Link layer.
    Link,
    /// IPv4/IPv6 header or extension headers.
    Ip,
    /// Tunnel encapsulation.
    Tunnel,
    /// TCP/UDP/ICMP header.
    Transport,
}

/// Why decoding stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Fewer bytes captured than the header needs.
    Truncated,
    /// A length or version field is invalid.
    Malformed,
    /// A link type or ethertype this decoder does not handle.
    Unsupported,
    /// A non-first IP fragment, or a fragment whose datagram is not complete yet.
    Fragment,
}

/// Where and why decoding stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeStop {
    /// Layer being decoded.
    pub layer: Layer,
    /// Byte offset into the frame.
    pub offset: u32,
    /// Why.
    pub reason: StopReason,
}

#[cfg(test)]
mod sack_tests {
    use super::*;

    /// `len` is a public field: a caller-built value above 4 must not panic.
    #[test]
    fn as_slice_clamps_a_bogus_len() {
        let s = SackBlocks {
            blocks: [(SeqNum(1), SeqNum(2)); 4],
            len: 9,
        };
        assert_eq!(s.as_slice().len(), 4);
    }
}
