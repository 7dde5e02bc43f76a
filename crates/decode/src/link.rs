//! Link layers and ethertype dispatch (hand-written: etherparse has no SLL2,
//! NFLOG, BSD loopback or PPP, and its VLAN handling stops at two tags).

use crate::decoder::{be16, be32, sl, Res, St};
use crate::ip::ip;
use crate::{IpVersion, Layer, StopReason};

/// Dispatch on the capture's LINKTYPE_* number.
pub(crate) fn link<'b>(st: &mut St<'b>, linktype: u32, buf: &'b [u8]) -> Res<'b> {
    match linktype {
        1 => ethernet(st, buf, 0),
        113 => sll(st, buf),
        276 => sll2(st, buf),
        // LINKTYPE_RAW (101) and the DLT_RAW values of some BSDs (12, 14):
        // the version nibble decides.
        101 | 12 | 14 => ip(st, buf, 0, None),
        228 => ip(st, buf, 0, Some(IpVersion::V4)),
        229 => ip(st, buf, 0, Some(IpVersion::V6)),
        0 => null(st, buf, false),
        108 => null(st, buf, true),
        9 | 50 => ppp(st, buf, 0),
        239 => nflog(st, buf),
        // IPoIB (RFC 4391) with Wireshark's pseudo-header: destination and
        // source link addresses (20 bytes each), ethertype, 2 reserved bytes.
        242 => match be16(buf, 40) {
            Some(ty) => ethertype(st, buf, ty, 44),
            None => {
                st.stop(Layer::Link, 0, StopReason::Truncated);
                Ok(())
            }
        },
        105 => ieee80211(st, buf, 0, false),
        // Radiotap: little-endian header length at bytes 2-3, then 802.11.
        127 => match buf.get(2..4) {
            Some(l) => ieee80211(
                st,
                buf,
                usize::from(u16::from_le_bytes([l[0], l[1]])),
                false,
            ),
            None => {
                st.stop(Layer::Link, 0, StopReason::Truncated);
                Ok(())
            }
        },
        // PPI: little-endian header length at 2-3 and DLT at 4-7.
        192 => match (buf.get(2..4), buf.get(4..8)) {
            (Some(l), Some(d)) => {
                let len = usize::from(u16::from_le_bytes([l[0], l[1]]));
                match u32::from_le_bytes([d[0], d[1], d[2], d[3]]) {
                    1 => ethernet(st, buf, len),
                    105 => ieee80211(st, buf, len, false),
                    _ => {
                        st.stop(Layer::Link, 0, StopReason::Unsupported);
                        Ok(())
                    }
                }
            }
            _ => {
                st.stop(Layer::Link, 0, StopReason::Truncated);
                Ok(())
            }
        },
        // Cisco HDLC: address, control, then an ethertype.
        104 => match be16(buf, 2) {
            Some(ty) => ethertype(st, buf, ty, 4),
            None => {
                st.stop(Layer::Link, 0, StopReason::Truncated);
                Ok(())
            }
        },
        _ => {
            st.stop(Layer::Link, 0, StopReason::Unsupported);
            Ok(())
        }
    }
}

/// BSD null/loopback (DLT_NULL, host-order AF, either byte order, detected as
/// Wireshark's `dissect_null` does: a value with upper 16 bits set is
/// byte-swapped) and OpenBSD LOOP (network order).
fn null<'b>(st: &mut St<'b>, buf: &'b [u8], network_order: bool) -> Res<'b> {
    let Some(raw) = be32(buf, 0) else {
        st.stop(Layer::Link, 0, StopReason::Truncated);
        return Ok(());
    };
    let af = if network_order {
        raw
    } else {
        let le = raw.swap_bytes();
        if le & 0xFFFF_0000 != 0 {
            raw
        } else {
            le
        }
    };
    match af {
        2 => ip(st, buf, 4, Some(IpVersion::V4)),
        // AF_INET6: NetBSD/OpenBSD 24, FreeBSD 28, macOS 30.
        24 | 28 | 30 => ip(st, buf, 4, Some(IpVersion::V6)),
        _ => {
            st.stop(Layer::Link, 0, StopReason::Unsupported);
            Ok(())
        }
    }
}

/// Linux cooked capture v1 (16-byte header).
fn sll<'b>(st: &mut St<'b>, buf: &'b [u8]) -> Res<'b> {
    let (Some(pkttype), Some(hatype), Some(proto)) = (be16(buf, 0), be16(buf, 2), be16(buf, 14))
    else {
        st.stop(Layer::Link, 0, StopReason::Truncated);
        return Ok(());
    };
    st.d.link.sll_pkttype = Some(pkttype as u8);
    sll_payload(st, buf, hatype, proto, 16)
}

/// Linux cooked capture v2 (20-byte header with interface index).
fn sll2<'b>(st: &mut St<'b>, buf: &'b [u8]) -> Res<'b> {
    if buf.len() < 20 {
        st.stop(Layer::Link, 0, StopReason::Truncated);
        return Ok(());
    }
    let proto = be16(buf, 0).unwrap_or(0);
    st.d.link.sll_ifindex = be32(buf, 4);
    let hatype = be16(buf, 8).unwrap_or(0);
    st.d.link.sll_pkttype = buf.get(10).copied();
    sll_payload(st, buf, hatype, proto, 20)
}

/// The payload of an SLL/SLL2 frame, by ARPHRD type and protocol.
fn sll_payload<'b>(st: &mut St<'b>, buf: &'b [u8], hatype: u16, proto: u16, off: usize) -> Res<'b> {
    match hatype {
        // ARPHRD_IPGRE: the payload is a GRE header (Wireshark `sll` dissector).
        778 => crate::tunnel::gre(st, buf, off),
        // ARPHRD_NETLINK: not IP.
        824 => {
            st.stop(Layer::Link, off, StopReason::Unsupported);
            Ok(())
        }
        _ if proto < 0x0600 => {
            // LINUX_SLL_P_802_2, _802_3, CAN…: not IP.
            st.stop(Layer::Link, off, StopReason::Unsupported);
            Ok(())
        }
        _ => ethertype(st, buf, proto, off),
    }
}

/// Linux NFLOG: 4-byte header, then TLVs (host-order length/type, padded to
/// 4 bytes); TLV type 9 (NFULA_PAYLOAD) holds the IP packet. Byte order is
/// guessed like Wireshark's `nflog` dissector (try little-endian, then big).
fn nflog<'b>(st: &mut St<'b>, buf: &'b [u8]) -> Res<'b> {
    let Some(&family) = buf.first() else {
        st.stop(Layer::Link, 0, StopReason::Truncated);
        return Ok(());
    };
    let hint = match family {
        2 => Some(IpVersion::V4),
        10 => Some(IpVersion::V6),
        _ => None,
    };
    let mut off = 4usize;
    loop {
        let Some(h) = buf.get(off..off.saturating_add(4)) else {
            st.stop(Layer::Link, off.min(buf.len()), StopReason::Truncated);
            return Ok(());
        };
        let rest = buf.len() - off;
        let (mut len, mut ty) = (
            u16::from_le_bytes([h[0], h[1]]) as usize,
            u16::from_le_bytes([h[2], h[3]]),
        );
        if len < 4 || len > rest {
            len = u16::from_be_bytes([h[0], h[1]]) as usize;
            ty = u16::from_be_bytes([h[2], h[3]]);
        }
        if len < 4 {
            st.stop(Layer::Link, off, StopReason::Malformed);
            return Ok(());
        }
        if ty & 0x7FFF == 9 {
            let end = off.saturating_add(len).min(buf.len());
            return ip(st, sl(buf, 0, end), off + 4, hint);
        }
        off = off.saturating_add((len + 3) & !3);
    }
}

/// PPP with optional HDLC address/control (0xFF 0x03) and protocol-field
/// compression (RFC 1661 §6.5).
pub(crate) fn ppp<'b>(st: &mut St<'b>, buf: &'b [u8], mut off: usize) -> Res<'b> {
    if buf.get(off..off.saturating_add(2)) == Some(&[0xFF, 0x03]) {
        off += 2;
    }
    let Some(&b0) = buf.get(off) else {
        st.stop(st.link_layer(), off, StopReason::Truncated);
        return Ok(());
    };
    let (proto, next) = if b0 & 1 == 1 {
        (u16::from(b0), off + 1)
    } else {
        match be16(buf, off) {
            Some(p) => (p, off + 2),
            None => {
                st.stop(st.link_layer(), off, StopReason::Truncated);
                return Ok(());
            }
        }
    };
    ppp_proto(st, buf, proto, off, next)
}

/// Dispatch on a PPP protocol number; `hdr` is where the PPP header started.
fn ppp_proto<'b>(st: &mut St<'b>, buf: &'b [u8], proto: u16, hdr: usize, off: usize) -> Res<'b> {
    match proto {
        0x0021 => ip(st, buf, off, Some(IpVersion::V4)),
        0x0057 => ip(st, buf, off, Some(IpVersion::V6)),
        0x0281 => mpls(st, buf, off),
        _ => {
            st.stop(st.link_layer(), hdr, StopReason::Unsupported);
            Ok(())
        }
    }
}

/// Ethernet II (and 802.3 with LLC/SNAP, OUI 0, which carries an ethertype).
pub(crate) fn ethernet<'b>(st: &mut St<'b>, buf: &'b [u8], off: usize) -> Res<'b> {
    if !st.enter(off) {
        return Ok(());
    }
    let Some(ty) = be16(buf, off + 12) else {
        st.stop(st.link_layer(), off, StopReason::Truncated);
        return Ok(());
    };
    if ty >= 0x0600 {
        return ethertype(st, buf, ty, off + 14);
    }
    // 802.3 length field: only LLC/SNAP with OUI 00-00-00 carries an ethertype.
    if sl(buf, off + 14, off + 20) == [0xAA, 0xAA, 0x03, 0, 0, 0] {
        if let Some(ty) = be16(buf, off + 20) {
            return ethertype(st, buf, ty, off + 22);
        }
    }
    st.stop(st.link_layer(), off + 14, StopReason::Unsupported);
    Ok(())
}

/// Dispatch on an ethertype whose payload starts at `off`, skipping any
/// number of 802.1Q / 802.1ad / QinQ tags (0x8100, 0x88A8, 0x9100, 0x9200).
/// Tags are recorded in [`crate::LinkInfo`] only before the first IP header.
pub(crate) fn ethertype<'b>(
    st: &mut St<'b>,
    buf: &'b [u8],
    mut ty: u16,
    mut off: usize,
) -> Res<'b> {
    loop {
        match ty {
            0x8100 | 0x88A8 | 0x9100 | 0x9200 => {
                let (Some(tci), Some(next)) = (be16(buf, off), be16(buf, off + 2)) else {
                    st.stop(st.link_layer(), off, StopReason::Truncated);
                    return Ok(());
                };
                if st.d.ip.is_none() {
                    let link = &mut st.d.link;
                    if let Some(slot) = link.vlans.get_mut(usize::from(link.vlan_count)) {
                        *slot = tci & 0x0FFF;
                    }
                    link.vlan_count = link.vlan_count.saturating_add(1);
                }
                ty = next;
                off += 4;
            }
            0x0800 => return ip(st, buf, off, Some(IpVersion::V4)),
            0x86DD => return ip(st, buf, off, Some(IpVersion::V6)),
            0x8847 | 0x8848 => return mpls(st, buf, off),
            0x8864 => return pppoe(st, buf, off),
            // Transparent Ethernet bridging (GRE, Geneve).
            0x6558 => return ethernet(st, buf, off),
            _ => {
                st.stop(st.link_layer(), off, StopReason::Unsupported);
                return Ok(());
            }
        }
    }
}

/// MPLS label stack (RFC 3032) up to bottom-of-stack, then IPv4/IPv6 by the
/// version nibble (Wireshark's default MPLS payload guess); anything else
/// (pseudowires) is unsupported.
pub(crate) fn mpls<'b>(st: &mut St<'b>, buf: &'b [u8], mut off: usize) -> Res<'b> {
    let start = off;
    loop {
        let Some(entry) = be32(buf, off) else {
            st.stop(st.link_layer(), off.min(buf.len()), StopReason::Truncated);
            return Ok(());
        };
        off += 4;
        if entry & 0x100 != 0 {
            break;
        }
    }
    match buf.get(off).map(|b| b >> 4) {
        Some(4) => ip(st, buf, off, Some(IpVersion::V4)),
        Some(6) => ip(st, buf, off, Some(IpVersion::V6)),
        None => {
            st.stop(Layer::Tunnel, off, StopReason::Truncated);
            Ok(())
        }
        Some(_) => {
            st.stop(Layer::Tunnel, start, StopReason::Unsupported);
            Ok(())
        }
    }
}

/// PPPoE session stage (RFC 2516): 6-byte header, then a 2-byte PPP protocol.
fn pppoe<'b>(st: &mut St<'b>, buf: &'b [u8], off: usize) -> Res<'b> {
    let (Some(len), Some(proto)) = (be16(buf, off + 4), be16(buf, off + 6)) else {
        st.stop(st.link_layer(), off, StopReason::Truncated);
        return Ok(());
    };
    // The PPPoE length bounds the payload (Wireshark's `pppoe` dissector
    // sets the reported length from it).
    let wire = off + 6 + usize::from(len);
    if wire >= off + 8 {
        st.wire_end = st.wire_end.min(wire);
    }
    ppp_proto(st, buf, proto, off, off + 8)
}

/// IEEE 802.11 data frame (no radiotap) followed by LLC/SNAP, as carried by
/// Aruba GRE (protocol 0x8200–0x82FF, Wireshark `gre` "ARUBA WLAN"), CAPWAP
/// (frame control byte-swapped, Wireshark's `capwap.swap_frame_control`
/// default) and LINKTYPE_IEEE802_11 (105). Management/control frames, null data and
/// protected (encrypted) frames are unsupported.
pub(crate) fn ieee80211<'b>(st: &mut St<'b>, buf: &'b [u8], off: usize, swap_fc: bool) -> Res<'b> {
    let (Some(&a), Some(&b)) = (buf.get(off), buf.get(off + 1)) else {
        st.stop(st.link_layer(), off, StopReason::Truncated);
        return Ok(());
    };
    let (fc0, fc1) = if swap_fc { (b, a) } else { (a, b) };
    let (ftype, subtype) = ((fc0 >> 2) & 3, fc0 >> 4);
    if ftype != 2 || subtype & 4 != 0 || fc1 & 0x40 != 0 {
        st.stop(st.link_layer(), off, StopReason::Unsupported);
        return Ok(());
    }
    let mut len = 24;
    if fc1 & 3 == 3 {
        len += 6; // address 4 (WDS)
    }
    if subtype & 8 != 0 {
        len += 2; // QoS control
        if fc1 & 0x80 != 0 {
            len += 4; // HT control
        }
    }
    let p = off + len;
    if sl(buf, p, p + 6) == [0xAA, 0xAA, 0x03, 0, 0, 0] {
        if let Some(ty) = be16(buf, p + 6) {
            return ethertype(st, buf, ty, p + 8);
        }
    }
    let reason = if buf.len() < p + 8 {
        StopReason::Truncated
    } else {
        StopReason::Unsupported
    };
    st.stop(st.link_layer(), p.min(buf.len()), reason);
    Ok(())
}
