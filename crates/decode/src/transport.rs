//! TCP, UDP and ICMP/ICMPv6, plus dispatch of IP-level tunnels.
//!
//! TCP and ICMP are parsed by hand: etherparse's `TcpHeaderSlice` requires
//! the whole option area to be captured and its option iterator gives up on
//! unknown option kinds, and its ICMP slices do not expose a cut-short quoted
//! datagram field by field.

use crate::decoder::{be16, be32, sl, Res, St};
use crate::ip::ip;
use crate::{
    Fragment, IcmpKind, IcmpMessage, IpHeader, IpVersion, Layer, QuotedPacket, StopReason,
    TcpFlags, TcpOptions, TcpSegment, Transport, UdpDatagram,
};
use pcapsleuth_core::SeqNum;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Decode the upper-layer protocol `proto` at `off` (captured bytes end at
/// `end`, `plen` = payload length from the IP header).
pub(crate) fn transport<'b>(
    st: &mut St<'b>,
    buf: &'b [u8],
    proto: u8,
    off: usize,
    end: usize,
    plen: usize,
) -> Res<'b> {
    let end = end.min(buf.len()).max(off.min(buf.len()));
    let inner = sl(buf, 0, end);
    match proto {
        6 => {
            tcp(st, sl(buf, off, end), off, plen);
            Ok(())
        }
        17 => udp(st, inner, off, plen),
        1 => {
            icmp(st, sl(buf, off, end), off, IpVersion::V4);
            Ok(())
        }
        58 => {
            icmp(st, sl(buf, off, end), off, IpVersion::V6);
            Ok(())
        }
        4 => {
            st.d.transport = Transport::Other(proto);
            ip(st, inner, off, Some(IpVersion::V4))
        }
        41 => {
            st.d.transport = Transport::Other(proto);
            ip(st, inner, off, Some(IpVersion::V6))
        }
        47 => {
            st.d.transport = Transport::Other(proto);
            crate::tunnel::gre(st, inner, off)
        }
        137 => {
            st.d.transport = Transport::Other(proto);
            crate::link::mpls(st, inner, off)
        }
        97 => {
            // EtherIP (RFC 3378): 2-byte header, then Ethernet.
            st.d.transport = Transport::Other(proto);
            if inner.len() < off + 2 {
                st.stop(Layer::Tunnel, off, StopReason::Truncated);
                return Ok(());
            }
            crate::link::ethernet(st, inner, off + 2)
        }
        p => {
            st.d.transport = Transport::Other(p);
            Ok(())
        }
    }
}

/// TCP. `seg` = captured bytes of the IP payload, `off` its frame offset.
///
/// Without the full 20-byte base header the transport is
/// [`Transport::None`] with a [`StopReason::Truncated`] stop; a data offset
/// below 5 words is [`StopReason::Malformed`] (also `None`). Options cut by
/// the snaplen keep what fits, set [`TcpOptions::malformed`] and stop with
/// `Truncated`.
fn tcp<'b>(st: &mut St<'b>, seg: &'b [u8], off: usize, plen: usize) {
    let Some(h) = seg.get(..20).and_then(|b| <&[u8; 20]>::try_from(b).ok()) else {
        st.stop(Layer::Transport, off, StopReason::Truncated);
        return;
    };
    let w16 = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
    let w32 = |i: usize| u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    let (src_port, dst_port, seq, ack, window, urgent) =
        (w16(0), w16(2), w32(4), w32(8), w16(14), w16(18));
    let (b12, b13) = (h[12], h[13]);
    let doff = usize::from(b12 >> 4) * 4;
    if doff < 20 {
        st.stop(Layer::Transport, off, StopReason::Malformed);
        return;
    }
    let mut options = parse_options(sl(seg, 20, doff.min(seg.len())));
    if seg.len() < doff {
        options.malformed = true;
        st.stop(Layer::Transport, off, StopReason::Truncated);
    } else if doff > plen {
        // Header longer than the IP payload (Wireshark: "bogus TCP header length").
        options.malformed = true;
        st.stop(Layer::Transport, off, StopReason::Malformed);
    }
    st.d.transport = Transport::Tcp(TcpSegment {
        src_port,
        dst_port,
        seq: SeqNum(seq),
        ack: SeqNum(ack),
        flags: TcpFlags((u16::from(b12 & 1) << 8) | u16::from(b13)),
        window,
        urgent,
        header_len: doff as u32,
        payload_len: plen.saturating_sub(doff) as u32,
        payload: seg.get(doff..).unwrap_or(&[]),
        options,
    });
}

/// Parse a TCP option list (RFC 9293 §3.1): EOL ends it, NOP is one byte,
/// every other kind has a length byte and is skipped by it when unknown. A
/// length below 2 or past the end, or a known kind with the wrong length,
/// sets `malformed`; options parsed before a fatal error are kept.
pub(crate) fn parse_options(opts: &[u8]) -> TcpOptions {
    let mut o = TcpOptions::default();
    let mut i = 0usize;
    while let Some(&kind) = opts.get(i) {
        match kind {
            0 => break,
            1 => {
                i += 1;
                continue;
            }
            _ => {}
        }
        let Some(&len) = opts.get(i + 1) else {
            o.malformed = true;
            break;
        };
        let len = usize::from(len);
        let Some(body) = opts.get(i + 2..i + len.max(2)).filter(|_| len >= 2) else {
            o.malformed = true;
            break;
        };
        match (kind, len) {
            (2, 4) => o.mss = be16(body, 0),
            (3, 3) => o.window_scale = body.first().copied(),
            (4, 2) => o.sack_permitted = true,
            (5, _) if len >= 10 => {
                if (len - 2) % 8 != 0 {
                    o.malformed = true;
                }
                let mut n = 0u8;
                for (k, blk) in body.chunks_exact(8).take(4).enumerate() {
                    if let (Some(l), Some(r), Some(slot)) =
                        (be32(blk, 0), be32(blk, 4), o.sack.blocks.get_mut(k))
                    {
                        *slot = (SeqNum(l), SeqNum(r));
                        n += 1;
                    }
                }
                o.sack.len = n;
            }
            (8, 10) => o.timestamps = be32(body, 0).zip(be32(body, 4)),
            (2..=5 | 8, _) => o.malformed = true,
            _ => {}
        }
        i += len;
    }
    o
}

/// UDP, then UDP-port tunnels. `buf` ends where the IP datagram's captured
/// bytes end.
fn udp<'b>(st: &mut St<'b>, buf: &'b [u8], off: usize, plen: usize) -> Res<'b> {
    let Ok(h) = etherparse::UdpHeaderSlice::from_slice(sl(buf, off, buf.len())) else {
        st.stop(Layer::Transport, off, StopReason::Truncated);
        return Ok(());
    };
    let (sport, dport, len) = (
        h.source_port(),
        h.destination_port(),
        usize::from(h.length()),
    );
    // Length 0: jumbogram (RFC 2675); use the IP payload length.
    let ulen = if len == 0 { plen } else { len };
    st.d.transport = Transport::Udp(UdpDatagram {
        src_port: sport,
        dst_port: dport,
        payload_len: ulen.saturating_sub(8) as u32,
    });
    if ulen >= 8 {
        st.wire_end = st.wire_end.min(off.saturating_add(ulen));
    }
    let end = st.wire_end.min(buf.len());
    crate::tunnel::udp_tunnel(st, sl(buf, 0, end), off + 8, sport, dport)
}

/// Classify an ICMP type/code.
fn classify(version: IpVersion, t: u8, c: u8) -> (IcmpKind, bool) {
    match (version, t) {
        (IpVersion::V4, 0) => (IcmpKind::EchoReply, false),
        (IpVersion::V4, 8) => (IcmpKind::EchoRequest, false),
        (IpVersion::V4, 3) if c == 4 => (IcmpKind::FragNeeded, true),
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
/// and stop `Truncated`.
fn icmp(st: &mut St<'_>, seg: &[u8], off: usize, version: IpVersion) {
    let (Some(&t), Some(&c)) = (seg.first(), seg.get(1)) else {
        st.stop(Layer::Transport, off, StopReason::Truncated);
        return;
    };
    if seg.len() < 4 {
        st.stop(Layer::Transport, off, StopReason::Truncated);
        return;
    }
    let (kind, is_error) = classify(version, t, c);
    let mtu = match kind {
        // RFC 1191 §4: next-hop MTU in the low 16 bits of the second word.
        IcmpKind::FragNeeded => be16(seg, 6).map(u32::from),
        // RFC 4443 §3.2: 32-bit MTU.
        IcmpKind::PacketTooBig => be32(seg, 4),
        _ => None,
    };
    let quoted = if is_error {
        quoted(sl(seg, 8, seg.len()))
    } else {
        None
    };
    st.d.transport = Transport::Icmp(IcmpMessage {
        version,
        icmp_type: t,
        code: c,
        kind,
        mtu,
        quoted,
    });
    if seg.len() < 8 {
        st.stop(Layer::Transport, off, StopReason::Truncated);
    }
}

/// The datagram quoted in an ICMP error, decoded laxly: the IP header must
/// be complete (20 bytes + options for IPv4, 40 for IPv6) but the transport
/// header may be cut anywhere. The quoted `total_len` is the original
/// datagram's length field.
pub(crate) fn quoted(q: &[u8]) -> Option<QuotedPacket> {
    let b0 = *q.first()?;
    let (ip, th) = match b0 >> 4 {
        4 => quoted_v4(q)?,
        6 => quoted_v6(q)?,
        _ => return None,
    };
    let t = sl(q, th, q.len());
    let non_first = ip.fragment.is_some_and(|f| f.offset > 0);
    let mut p = QuotedPacket {
        ip,
        src_port: None,
        dst_port: None,
        tcp_seq: None,
        tcp_ack: None,
        tcp_flags: None,
        transport_bytes: 0,
    };
    if non_first {
        return Some(p);
    }
    let mut tb = t.len();
    match ip.protocol {
        6 => {
            p.tcp_seq = be32(t, 4).map(SeqNum);
            p.tcp_ack = be32(t, 8).map(SeqNum);
            if let (Some(&b12), Some(&b13)) = (t.get(12), t.get(13)) {
                p.tcp_flags = Some(TcpFlags((u16::from(b12 & 1) << 8) | u16::from(b13)));
            }
            if let Some(&b12) = t.get(12) {
                tb = tb.min((usize::from(b12 >> 4) * 4).max(20));
            }
        }
        17 | 136 => tb = tb.min(8),
        _ => {}
    }
    // Ports only when both are quoted (at least 4 bytes).
    if matches!(ip.protocol, 6 | 17 | 33 | 132 | 136) && t.len() >= 4 {
        p.src_port = be16(t, 0);
        p.dst_port = be16(t, 2);
    }
    p.transport_bytes = tb as u32;
    Some(p)
}

/// Quoted IPv4 header; returns it and the transport offset in `q`.
fn quoted_v4(q: &[u8]) -> Option<(IpHeader, usize)> {
    let hl = usize::from(q.first()? & 0x0F) * 4;
    if hl < 20 || q.len() < 20 {
        return None;
    }
    let a = |i: usize| q.get(i).copied().unwrap_or(0);
    let id = u32::from(be16(q, 4)?);
    let ff = be16(q, 6)?;
    let (offset, more) = (u32::from(ff & 0x1FFF) * 8, ff & 0x2000 != 0);
    let h = IpHeader {
        version: IpVersion::V4,
        src: IpAddr::V4(Ipv4Addr::new(a(12), a(13), a(14), a(15))),
        dst: IpAddr::V4(Ipv4Addr::new(a(16), a(17), a(18), a(19))),
        ttl: a(8),
        ip_id: Some(id),
        total_len: u32::from(be16(q, 2)?),
        header_len: hl as u32,
        protocol: a(9),
        dont_fragment: ff & 0x4000 != 0,
        fragment: (offset > 0 || more).then_some(Fragment { offset, more, id }),
    };
    // Options cut short: header kept, no transport bytes.
    Some((h, hl.min(q.len())))
}

/// Quoted IPv6 header with extension headers walked as far as quoted.
fn quoted_v6(q: &[u8]) -> Option<(IpHeader, usize)> {
    let src: [u8; 16] = q.get(8..24)?.try_into().ok()?;
    let dst: [u8; 16] = q.get(24..40)?.try_into().ok()?;
    let mut h = IpHeader {
        version: IpVersion::V6,
        src: IpAddr::V6(Ipv6Addr::from(src)),
        dst: IpAddr::V6(Ipv6Addr::from(dst)),
        ttl: q.get(7).copied().unwrap_or(0),
        ip_id: None,
        total_len: 40 + u32::from(be16(q, 4)?),
        header_len: 40,
        protocol: q.get(6).copied().unwrap_or(0),
        dont_fragment: false,
        fragment: None,
    };
    let mut off = 40usize;
    for _ in 0..8 {
        let n = match h.protocol {
            0 | 43 | 60 | 135 | 139 | 140 => q.get(off + 1).map(|&l| (usize::from(l) + 1) * 8),
            51 => q.get(off + 1).map(|&l| (usize::from(l) + 2) * 4),
            44 => {
                if let (Some(ff), Some(id)) = (be16(q, off + 2), be32(q, off + 4)) {
                    let (offset, more) = (u32::from(ff >> 3) * 8, ff & 1 != 0);
                    h.ip_id = Some(id);
                    h.fragment = (offset > 0 || more).then_some(Fragment { offset, more, id });
                    Some(8)
                } else {
                    None
                }
            }
            _ => break,
        };
        let Some(next) = n.and_then(|n| q.get(off).map(|&nh| (nh, n))) else {
            // Extension header cut short: no transport bytes.
            return Some((h, q.len()));
        };
        if off + next.1 > q.len() {
            return Some((h, q.len()));
        }
        h.protocol = next.0;
        h.header_len += next.1 as u32;
        off += next.1;
    }
    Some((h, off))
}
