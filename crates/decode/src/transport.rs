//! TCP, UDP and ICMP/ICMPv6, plus dispatch of IP-level tunnels.
//!
//! TCP and ICMP are parsed by hand: etherparse's `TcpHeaderSlice` requires
//! the whole option area to be captured and its option iterator gives up on
//! unknown option kinds, and its ICMP slices do not expose a cut-short quoted
//! datagram field by field.

use crate::decoder::{read_u16_be, read_u32_be, subslice, DecodeResult, FrameState};
use crate::ip::ip;
use crate::{
    Fragment, IcmpEcho, IcmpKind, IcmpMessage, IpHeader, IpVersion, Layer, QuotedPacket,
    StopReason, TcpFlags, TcpOptions, TcpSegment, Transport, UdpDatagram, UdpLayer,
};
use pcapsleuth_core::{ip_protocol, SeqNum};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// TCP option kinds (IANA "TCP Option Kind Numbers").
mod tcp_option {
    /// End of option list.
    pub const EOL: u8 = 0;
    /// No operation (padding).
    pub const NOP: u8 = 1;
    /// Maximum segment size (RFC 9293 §3.7.1).
    pub const MSS: u8 = 2;
    /// Window scale (RFC 7323 §2).
    pub const WINDOW_SCALE: u8 = 3;
    /// SACK permitted (RFC 2018).
    pub const SACK_PERMITTED: u8 = 4;
    /// SACK blocks (RFC 2018).
    pub const SACK: u8 = 5;
    /// Timestamps (RFC 7323 §3).
    pub const TIMESTAMPS: u8 = 8;
}

/// Decode the upper-layer protocol `protocol` at `off` (captured bytes end at
/// `end`, `payload_len` = payload length from the IP header, bytes).
pub(crate) fn transport<'b>(
    state: &mut FrameState<'b>,
    buf: &'b [u8],
    protocol: u8,
    off: usize,
    end: usize,
    payload_len: usize,
) -> DecodeResult<'b> {
    let end = end.min(buf.len()).max(off.min(buf.len()));
    let datagram = subslice(buf, 0, end);
    match protocol {
        ip_protocol::TCP => {
            tcp(state, subslice(buf, off, end), off, payload_len);
            Ok(())
        }
        ip_protocol::UDP => udp(state, datagram, off, payload_len),
        ip_protocol::ICMP => {
            icmp(state, subslice(buf, off, end), off, IpVersion::V4);
            Ok(())
        }
        ip_protocol::ICMPV6 => {
            icmp(state, subslice(buf, off, end), off, IpVersion::V6);
            Ok(())
        }
        ip_protocol::IPIP => {
            state.decoded.transport = Transport::Other(protocol);
            ip(state, datagram, off, Some(IpVersion::V4))
        }
        ip_protocol::IPV6 => {
            state.decoded.transport = Transport::Other(protocol);
            ip(state, datagram, off, Some(IpVersion::V6))
        }
        ip_protocol::GRE => {
            state.decoded.transport = Transport::Other(protocol);
            crate::tunnel::gre(state, datagram, off)
        }
        ip_protocol::MPLS_IN_IP => {
            state.decoded.transport = Transport::Other(protocol);
            crate::link::mpls(state, datagram, off)
        }
        ip_protocol::ETHERIP => {
            // EtherIP (RFC 3378): 2-byte header, then Ethernet.
            state.decoded.transport = Transport::Other(protocol);
            if datagram.len() < off + 2 {
                state.stop(Layer::Tunnel, off, StopReason::Truncated);
                return Ok(());
            }
            crate::link::ethernet(state, datagram, off + 2)
        }
        other => {
            state.decoded.transport = Transport::Other(other);
            Ok(())
        }
    }
}

/// TCP. `segment` = captured bytes of the IP payload, `off` its frame offset,
/// `ip_payload_len` the payload length from the IP header (bytes).
///
/// Without the full 20-byte base header the transport is
/// [`Transport::None`] with a [`StopReason::Truncated`] stop; a data offset
/// below 5 words is [`StopReason::Malformed`] (also `None`). Options cut by
/// the snaplen keep what fits, set [`TcpOptions::malformed`] and stop with
/// `Truncated`.
fn tcp<'b>(state: &mut FrameState<'b>, segment: &'b [u8], off: usize, ip_payload_len: usize) {
    let Some(header) = segment
        .get(..20)
        .and_then(|b| <&[u8; 20]>::try_from(b).ok())
    else {
        state.stop(Layer::Transport, off, StopReason::Truncated);
        return;
    };
    let word16 = |i: usize| u16::from_be_bytes([header[i], header[i + 1]]);
    let word32 =
        |i: usize| u32::from_be_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
    let (src_port, dst_port, seq, ack, window, urgent) = (
        word16(0),
        word16(2),
        word32(4),
        word32(8),
        word16(14),
        word16(18),
    );
    // Byte 12: data offset (high nibble) and the NS/AE flag (low bit);
    // byte 13: the other eight flags.
    let (offset_byte, flags_byte) = (header[12], header[13]);
    let data_offset = usize::from(offset_byte >> 4) * 4;
    if data_offset < 20 {
        state.stop(Layer::Transport, off, StopReason::Malformed);
        return;
    }
    let mut options = parse_options(subslice(segment, 20, data_offset.min(segment.len())));
    if segment.len() < data_offset {
        options.malformed = true;
        state.stop(Layer::Transport, off, StopReason::Truncated);
    } else if data_offset > ip_payload_len {
        // Header longer than the IP payload (Wireshark: "bogus TCP header length").
        options.malformed = true;
        state.stop(Layer::Transport, off, StopReason::Malformed);
    }
    state.decoded.transport = Transport::Tcp(TcpSegment {
        src_port,
        dst_port,
        seq: SeqNum(seq),
        ack: SeqNum(ack),
        flags: tcp_flags(offset_byte, flags_byte),
        window,
        urgent,
        header_len: data_offset as u32,
        payload_len: ip_payload_len.saturating_sub(data_offset) as u32,
        payload: segment.get(data_offset..).unwrap_or(&[]),
        options,
    });
}

/// The 9 TCP flag bits from header bytes 12 (NS/AE in the low bit) and 13.
fn tcp_flags(offset_byte: u8, flags_byte: u8) -> TcpFlags {
    TcpFlags((u16::from(offset_byte & 1) << 8) | u16::from(flags_byte))
}

/// Parse a TCP option list (RFC 9293 §3.1): EOL ends it, NOP is one byte,
/// every other kind has a length byte and is skipped by it when unknown. A
/// length below 2 or past the end, or a known kind with the wrong length,
/// sets `malformed`; options parsed before a fatal error are kept.
pub(crate) fn parse_options(option_bytes: &[u8]) -> TcpOptions {
    let mut options = TcpOptions::default();
    let mut pos = 0usize;
    while let Some(&kind) = option_bytes.get(pos) {
        match kind {
            tcp_option::EOL => break,
            tcp_option::NOP => {
                pos += 1;
                continue;
            }
            _ => {}
        }
        let Some(&len) = option_bytes.get(pos + 1) else {
            options.malformed = true;
            break;
        };
        let len = usize::from(len);
        let Some(body) = option_bytes
            .get(pos + 2..pos + len.max(2))
            .filter(|_| len >= 2)
        else {
            options.malformed = true;
            break;
        };
        match (kind, len) {
            (tcp_option::MSS, 4) => options.mss = read_u16_be(body, 0),
            (tcp_option::WINDOW_SCALE, 3) => options.window_scale = body.first().copied(),
            (tcp_option::SACK_PERMITTED, 2) => options.sack_permitted = true,
            (tcp_option::SACK, _) if len >= 10 => {
                if (len - 2) % 8 != 0 {
                    options.malformed = true;
                }
                let mut count = 0u8;
                for (index, block) in body.chunks_exact(8).take(4).enumerate() {
                    if let (Some(left), Some(right), Some(slot)) = (
                        read_u32_be(block, 0),
                        read_u32_be(block, 4),
                        options.sack.blocks.get_mut(index),
                    ) {
                        *slot = (SeqNum(left), SeqNum(right));
                        count += 1;
                    }
                }
                options.sack.len = count;
            }
            (tcp_option::TIMESTAMPS, 10) => {
                options.timestamps = read_u32_be(body, 0).zip(read_u32_be(body, 4));
            }
            (
                tcp_option::MSS
                | tcp_option::WINDOW_SCALE
                | tcp_option::SACK_PERMITTED
                | tcp_option::SACK
                | tcp_option::TIMESTAMPS,
                _,
            ) => options.malformed = true,
            _ => {}
        }
        pos += len;
    }
    options
}

/// UDP, then UDP-port tunnels. `buf` ends where the IP datagram's captured
/// bytes end.
fn udp<'b>(
    state: &mut FrameState<'b>,
    buf: &'b [u8],
    off: usize,
    ip_payload_len: usize,
) -> DecodeResult<'b> {
    let Ok(header) = etherparse::UdpHeaderSlice::from_slice(subslice(buf, off, buf.len())) else {
        state.stop(Layer::Transport, off, StopReason::Truncated);
        return Ok(());
    };
    let (src_port, dst_port, length) = (
        header.source_port(),
        header.destination_port(),
        header.length(),
    );
    let length_field = usize::from(length);
    // Length 0: jumbogram (RFC 2675); use the IP payload length.
    let udp_len = if length_field == 0 {
        ip_payload_len
    } else {
        length_field
    };
    if udp_len >= 8 {
        state.wire_end = state.wire_end.min(off.saturating_add(udp_len));
    }
    let end = state.wire_end.min(buf.len());
    let payload = if udp_len >= 8 {
        subslice(buf, off.saturating_add(8), end)
    } else {
        &[]
    };
    state.decoded.transport = Transport::Udp(UdpDatagram {
        src_port,
        dst_port,
        length,
        payload_len: udp_len.saturating_sub(8) as u32,
        payload,
    });
    // Wireshark's UDP dissector stops at a Length field below 8 (IPv6
    // Length 0 is a jumbogram, RFC 2675 §4) and hands nothing to the tunnel
    // dissectors.
    let ipv6 = state.ip_version() == Some(IpVersion::V6);
    if length < 8 && !(length == 0 && ipv6) {
        return Ok(());
    }
    crate::tunnel::udp_tunnel(state, subslice(buf, 0, end), off + 8, src_port, dst_port)
}

/// The UDP header at the start of `fragment` (the captured payload of a
/// first IP fragment that cannot be reassembled), carried by `ip`; `None`
/// unless all 8 header bytes are captured (Wireshark reads the checksum
/// before the conversation lookup).
pub(crate) fn udp_layer(ip: IpHeader, fragment: &[u8]) -> Option<UdpLayer> {
    Some(UdpLayer {
        ip,
        src_port: read_u16_be(fragment, 0)?,
        dst_port: read_u16_be(fragment, 2)?,
        length: read_u16_be(fragment, 4).filter(|_| fragment.len() >= 8)?,
    })
}

/// Classify an ICMP type/code; the flag is true for error messages, which
/// quote the offending datagram.
fn classify(version: IpVersion, icmp_type: u8, code: u8) -> (IcmpKind, bool) {
    match (version, icmp_type) {
        (IpVersion::V4, 0) => (IcmpKind::EchoReply, false),
        (IpVersion::V4, 8) => (IcmpKind::EchoRequest, false),
        (IpVersion::V4, 3) if code == 4 => (IcmpKind::FragNeeded, true),
        (IpVersion::V4, 3) => (IcmpKind::DestUnreachable, true),
        (IpVersion::V4, 11) => (IcmpKind::TimeExceeded, true),
        // Source quench, redirect, parameter problem also quote the datagram.
        (IpVersion::V4, 4 | 5 | 12) => (IcmpKind::Other, true),
        (IpVersion::V6, 1) => (IcmpKind::DestUnreachable, true),
        (IpVersion::V6, 2) => (IcmpKind::PacketTooBig, true),
        (IpVersion::V6, 3) => (IcmpKind::TimeExceeded, true),
        (IpVersion::V6, 4) => (IcmpKind::Other, true),
        (IpVersion::V6, 128) => (IcmpKind::EchoRequest, false),
        (IpVersion::V6, 129) => (IcmpKind::EchoReply, false),
        _ => (IcmpKind::Other, false),
    }
}

/// ICMP (RFC 792) / ICMPv6 (RFC 4443). Needs 4 bytes (type, code,
/// checksum); errors with fewer than 8 bytes keep type/code but have no MTU
/// and stop `Truncated`. `message` = captured bytes of the IP payload.
fn icmp<'b>(state: &mut FrameState<'b>, message: &'b [u8], off: usize, version: IpVersion) {
    let (Some(&icmp_type), Some(&code)) = (message.first(), message.get(1)) else {
        state.stop(Layer::Transport, off, StopReason::Truncated);
        return;
    };
    if message.len() < 4 {
        state.stop(Layer::Transport, off, StopReason::Truncated);
        return;
    }
    let (kind, is_error) = classify(version, icmp_type, code);
    let mtu = match kind {
        // RFC 1191 §4: next-hop MTU in the low 16 bits of the second word.
        IcmpKind::FragNeeded => read_u16_be(message, 6).map(u32::from),
        // RFC 4443 §3.2: 32-bit MTU.
        IcmpKind::PacketTooBig => read_u32_be(message, 4),
        _ => None,
    };
    let quoted = if is_error {
        quoted(subslice(message, 8, message.len()))
    } else {
        None
    };
    let echo = match (kind, read_u16_be(message, 4), read_u16_be(message, 6)) {
        (IcmpKind::EchoRequest | IcmpKind::EchoReply, Some(id), Some(seq)) => Some(IcmpEcho {
            id,
            seq,
            data: subslice(message, 8, message.len()),
        }),
        _ => None,
    };
    state.decoded.transport = Transport::Icmp(IcmpMessage {
        version,
        icmp_type,
        code,
        kind,
        mtu,
        quoted,
        echo,
    });
    if message.len() < 8 {
        state.stop(Layer::Transport, off, StopReason::Truncated);
    }
}

/// The datagram quoted in an ICMP error, decoded laxly: the IP header must
/// be complete (20 bytes + options for IPv4, 40 for IPv6) but the transport
/// header may be cut anywhere. The quoted `total_len` is the original
/// datagram's length field.
pub(crate) fn quoted(quote: &[u8]) -> Option<QuotedPacket> {
    let first = *quote.first()?;
    let (ip, transport_off) = match first >> 4 {
        4 => quoted_v4(quote)?,
        6 => quoted_v6(quote)?,
        _ => return None,
    };
    let transport = subslice(quote, transport_off, quote.len());
    let non_first = ip.fragment.is_some_and(|f| f.offset > 0);
    let mut packet = QuotedPacket {
        ip,
        src_port: None,
        dst_port: None,
        tcp_seq: None,
        tcp_ack: None,
        tcp_flags: None,
        transport_bytes: 0,
    };
    if non_first {
        return Some(packet);
    }
    let mut transport_bytes = transport.len();
    match ip.protocol {
        ip_protocol::TCP => {
            packet.tcp_seq = read_u32_be(transport, 4).map(SeqNum);
            packet.tcp_ack = read_u32_be(transport, 8).map(SeqNum);
            if let (Some(&offset_byte), Some(&flags_byte)) = (transport.get(12), transport.get(13))
            {
                packet.tcp_flags = Some(tcp_flags(offset_byte, flags_byte));
            }
            if let Some(&offset_byte) = transport.get(12) {
                let data_offset = (usize::from(offset_byte >> 4) * 4).max(20);
                transport_bytes = transport_bytes.min(data_offset);
            }
        }
        ip_protocol::UDP | ip_protocol::UDPLITE => transport_bytes = transport_bytes.min(8),
        _ => {}
    }
    // Ports only when both are quoted (at least 4 bytes).
    let has_ports = matches!(
        ip.protocol,
        ip_protocol::TCP
            | ip_protocol::UDP
            | ip_protocol::DCCP
            | ip_protocol::SCTP
            | ip_protocol::UDPLITE
    );
    if has_ports && transport.len() >= 4 {
        packet.src_port = read_u16_be(transport, 0);
        packet.dst_port = read_u16_be(transport, 2);
    }
    packet.transport_bytes = transport_bytes as u32;
    Some(packet)
}

/// Quoted IPv4 header; returns it and the transport offset in `quote`.
fn quoted_v4(quote: &[u8]) -> Option<(IpHeader, usize)> {
    let header_len = usize::from(quote.first()? & 0x0F) * 4;
    if header_len < 20 || quote.len() < 20 {
        return None;
    }
    let byte = |i: usize| quote.get(i).copied().unwrap_or(0);
    let id = u32::from(read_u16_be(quote, 4)?);
    let flags_fragment = read_u16_be(quote, 6)?;
    let (offset, more) = (
        u32::from(flags_fragment & 0x1FFF) * 8,
        flags_fragment & 0x2000 != 0,
    );
    let header = IpHeader {
        version: IpVersion::V4,
        src: IpAddr::V4(Ipv4Addr::new(byte(12), byte(13), byte(14), byte(15))),
        dst: IpAddr::V4(Ipv4Addr::new(byte(16), byte(17), byte(18), byte(19))),
        ttl: byte(8),
        ip_id: Some(id),
        total_len: u32::from(read_u16_be(quote, 2)?),
        header_len: header_len as u32,
        protocol: byte(9),
        dont_fragment: flags_fragment & 0x4000 != 0,
        fragment: (offset > 0 || more).then_some(Fragment { offset, more, id }),
    };
    // Options cut short: header kept, no transport bytes.
    Some((header, header_len.min(quote.len())))
}

/// Quoted IPv6 header with extension headers walked as far as quoted.
fn quoted_v6(quote: &[u8]) -> Option<(IpHeader, usize)> {
    let src: [u8; 16] = quote.get(8..24)?.try_into().ok()?;
    let dst: [u8; 16] = quote.get(24..40)?.try_into().ok()?;
    let mut header = IpHeader {
        version: IpVersion::V6,
        src: IpAddr::V6(Ipv6Addr::from(src)),
        dst: IpAddr::V6(Ipv6Addr::from(dst)),
        ttl: quote.get(7).copied().unwrap_or(0),
        ip_id: None,
        total_len: 40 + u32::from(read_u16_be(quote, 4)?),
        header_len: 40,
        protocol: quote.get(6).copied().unwrap_or(0),
        dont_fragment: false,
        fragment: None,
    };
    let mut off = 40usize;
    for _ in 0..8 {
        let ext_len = match header.protocol {
            ip_protocol::HOPOPT
            | ip_protocol::IPV6_ROUTING
            | ip_protocol::IPV6_DSTOPTS
            | ip_protocol::MOBILITY
            | ip_protocol::HIP
            | ip_protocol::SHIM6 => quote
                .get(off + 1)
                .map(|&units| (usize::from(units) + 1) * 8),
            ip_protocol::AH => quote
                .get(off + 1)
                .map(|&units| (usize::from(units) + 2) * 4),
            ip_protocol::IPV6_FRAGMENT => {
                if let (Some(offset_flags), Some(id)) =
                    (read_u16_be(quote, off + 2), read_u32_be(quote, off + 4))
                {
                    let (offset, more) = (u32::from(offset_flags >> 3) * 8, offset_flags & 1 != 0);
                    header.ip_id = Some(id);
                    header.fragment = (offset > 0 || more).then_some(Fragment { offset, more, id });
                    Some(8)
                } else {
                    None
                }
            }
            _ => break,
        };
        let Some((next_header, ext_len)) =
            ext_len.and_then(|len| quote.get(off).map(|&next| (next, len)))
        else {
            // Extension header cut short: no transport bytes.
            return Some((header, quote.len()));
        };
        if off + ext_len > quote.len() {
            return Some((header, quote.len()));
        }
        header.protocol = next_header;
        header.header_len += ext_len as u32;
        off += ext_len;
    }
    Some((header, off))
}
