//! Link layers and ethertype dispatch (hand-written: etherparse has no SLL2,
//! NFLOG, BSD loopback or PPP, and its VLAN handling stops at two tags).

use crate::decoder::{read_u16_be, read_u32_be, subslice, DecodeResult, FrameState};
use crate::ip::ip;
use crate::{IpVersion, Layer, StopReason};
use pcapsleuth_core::consts::ethertype;
use pcapsleuth_core::linktype;

/// LLC/SNAP header with OUI 00-00-00 (RFC 1042): an ethertype follows.
const LLC_SNAP_RFC1042: [u8; 6] = [0xAA, 0xAA, 0x03, 0, 0, 0];

/// Address families in a BSD loopback header (`AF_*`).
mod address_family {
    /// `AF_INET` on every BSD.
    pub const INET: u32 = 2;
    /// `AF_INET6` on NetBSD and OpenBSD.
    pub const INET6_NETBSD_OPENBSD: u32 = 24;
    /// `AF_INET6` on FreeBSD.
    pub const INET6_FREEBSD: u32 = 28;
    /// `AF_INET6` on macOS.
    pub const INET6_DARWIN: u32 = 30;
    /// `AF_INET` in a Linux NFLOG header (one byte).
    pub const NFLOG_INET: u8 = 2;
    /// `AF_INET6` in a Linux NFLOG header (one byte).
    pub const NFLOG_INET6: u8 = 10;
}

/// Linux `ARPHRD_*` hardware types seen in SLL/SLL2 headers.
mod arphrd {
    /// GRE over IP: the payload is a GRE header.
    pub const IPGRE: u16 = 778;
    /// Netlink messages.
    pub const NETLINK: u16 = 824;
}

/// PPP protocol numbers (RFC 1661, IANA "PPP DLL Protocol Numbers").
mod ppp_protocol {
    /// IPv4.
    pub const IPV4: u16 = 0x0021;
    /// IPv6.
    pub const IPV6: u16 = 0x0057;
    /// MPLS unicast.
    pub const MPLS: u16 = 0x0281;
}

/// NFLOG TLV type holding the packet (`NFULA_PAYLOAD`).
const NFULA_PAYLOAD: u16 = 9;

/// Stop at the link layer (offset 0) with `reason`.
fn stop_link<'b>(state: &mut FrameState<'b>, reason: StopReason) -> DecodeResult<'b> {
    state.stop(Layer::Link, 0, reason);
    Ok(())
}

/// Dispatch on the capture's LINKTYPE_* number ([`linktype`]).
pub(crate) fn link<'b>(
    state: &mut FrameState<'b>,
    link_type: u32,
    buf: &'b [u8],
) -> DecodeResult<'b> {
    let Ok(link_type) = u16::try_from(link_type) else {
        return stop_link(state, StopReason::Unsupported);
    };
    match link_type {
        linktype::ETHERNET => ethernet(state, buf, 0),
        linktype::LINUX_SLL => sll(state, buf),
        linktype::LINUX_SLL2 => sll2(state, buf),
        // LINKTYPE_RAW (101) and the DLT_RAW values of some BSDs (12, 14):
        // the version nibble decides.
        linktype::RAW | linktype::RAW_BSD12 | linktype::RAW_BSD14 => ip(state, buf, 0, None),
        linktype::IPV4 => ip(state, buf, 0, Some(IpVersion::V4)),
        linktype::IPV6 => ip(state, buf, 0, Some(IpVersion::V6)),
        linktype::NULL => null(state, buf, false),
        linktype::LOOP => null(state, buf, true),
        linktype::PPP | linktype::PPP_HDLC => ppp(state, buf, 0),
        linktype::NFLOG => nflog(state, buf),
        // IPoIB (RFC 4391) with Wireshark's pseudo-header: destination and
        // source link addresses (20 bytes each), ethertype, 2 reserved bytes.
        linktype::IPOIB => match read_u16_be(buf, 40) {
            Some(ether_type) => dispatch_ethertype(state, buf, ether_type, 44),
            None => stop_link(state, StopReason::Truncated),
        },
        linktype::IEEE802_11 => ieee80211(state, buf, 0, false),
        // Radiotap: little-endian header length at bytes 2-3, then 802.11.
        linktype::IEEE802_11_RADIOTAP => match buf.get(2..4) {
            Some(len) => {
                let header_len = usize::from(u16::from_le_bytes([len[0], len[1]]));
                ieee80211(state, buf, header_len, false)
            }
            None => stop_link(state, StopReason::Truncated),
        },
        linktype::PPI => ppi(state, buf),
        linktype::PKTAP => pktap(state, buf),
        // Cisco HDLC: address, control, then an ethertype.
        linktype::C_HDLC => match read_u16_be(buf, 2) {
            Some(ether_type) => dispatch_ethertype(state, buf, ether_type, 4),
            None => stop_link(state, StopReason::Truncated),
        },
        _ => stop_link(state, StopReason::Unsupported),
    }
}

/// PPI (Per-Packet Information): little-endian header length at bytes 2-3
/// and the link type of the payload at 4-7 (Ethernet or 802.11).
fn ppi<'b>(state: &mut FrameState<'b>, buf: &'b [u8]) -> DecodeResult<'b> {
    let (Some(len), Some(dlt)) = (buf.get(2..4), buf.get(4..8)) else {
        return stop_link(state, StopReason::Truncated);
    };
    let header_len = usize::from(u16::from_le_bytes([len[0], len[1]]));
    let inner_link_type = u32::from_le_bytes([dlt[0], dlt[1], dlt[2], dlt[3]]);
    match u16::try_from(inner_link_type) {
        Ok(linktype::ETHERNET) => ethernet(state, buf, header_len),
        Ok(linktype::IEEE802_11) => ieee80211(state, buf, header_len, false),
        _ => stop_link(state, StopReason::Unsupported),
    }
}

/// Apple PKTAP (`packet-pktap.c`): little-endian header length at bytes
/// 0-3 (at least 108), record type at 4-7 (1 = packet) and the link type of
/// the payload at 8-11; Ethernet payloads are decoded.
fn pktap<'b>(state: &mut FrameState<'b>, buf: &'b [u8]) -> DecodeResult<'b> {
    /// Smallest PKTAP header, bytes (`MIN_PKTAP_HDR_LEN`).
    const MIN_HEADER_LEN: u32 = 108;
    /// `PTH_TYPE_PACKET`: the record holds a packet.
    const RECORD_PACKET: u32 = 1;
    let word = |i: usize| {
        buf.get(i..i + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let (Some(header_len), Some(record_type), Some(inner_link_type)) = (word(0), word(4), word(8))
    else {
        return stop_link(state, StopReason::Truncated);
    };
    if header_len < MIN_HEADER_LEN {
        return stop_link(state, StopReason::Malformed);
    }
    match (record_type, u16::try_from(inner_link_type)) {
        (RECORD_PACKET, Ok(linktype::ETHERNET)) => ethernet(
            state,
            buf,
            usize::try_from(header_len).unwrap_or(usize::MAX),
        ),
        _ => stop_link(state, StopReason::Unsupported),
    }
}

/// BSD null/loopback (DLT_NULL, host-order AF, either byte order, detected as
/// Wireshark's `dissect_null` does: a value with upper 16 bits set is
/// byte-swapped) and OpenBSD LOOP (network order).
fn null<'b>(state: &mut FrameState<'b>, buf: &'b [u8], network_order: bool) -> DecodeResult<'b> {
    let Some(raw) = read_u32_be(buf, 0) else {
        return stop_link(state, StopReason::Truncated);
    };
    let family = if network_order {
        raw
    } else {
        let swapped = raw.swap_bytes();
        if swapped & 0xFFFF_0000 != 0 {
            raw
        } else {
            swapped
        }
    };
    match family {
        address_family::INET => ip(state, buf, 4, Some(IpVersion::V4)),
        address_family::INET6_NETBSD_OPENBSD
        | address_family::INET6_FREEBSD
        | address_family::INET6_DARWIN => ip(state, buf, 4, Some(IpVersion::V6)),
        _ => stop_link(state, StopReason::Unsupported),
    }
}

/// Linux cooked capture v1 (16-byte header).
fn sll<'b>(state: &mut FrameState<'b>, buf: &'b [u8]) -> DecodeResult<'b> {
    let (Some(packet_type), Some(hardware_type), Some(protocol)) = (
        read_u16_be(buf, 0),
        read_u16_be(buf, 2),
        read_u16_be(buf, 14),
    ) else {
        return stop_link(state, StopReason::Truncated);
    };
    state.decoded.link.sll_pkttype = Some(packet_type as u8);
    // Bytes 4-5: link-layer address length; 6-13: the address.
    state.decoded.link.src_mac = sll_address(buf, read_u16_be(buf, 4), 6);
    sll_payload(state, buf, hardware_type, protocol, 16)
}

/// Linux cooked capture v2 (20-byte header with interface index).
fn sll2<'b>(state: &mut FrameState<'b>, buf: &'b [u8]) -> DecodeResult<'b> {
    if buf.len() < 20 {
        return stop_link(state, StopReason::Truncated);
    }
    let protocol = read_u16_be(buf, 0).unwrap_or(0);
    state.decoded.link.sll_ifindex = read_u32_be(buf, 4);
    let hardware_type = read_u16_be(buf, 8).unwrap_or(0);
    state.decoded.link.sll_pkttype = buf.get(10).copied();
    // Byte 11: link-layer address length; 12-19: the address.
    let address_len = buf.get(11).copied().map(u16::from);
    state.decoded.link.src_mac = sll_address(buf, address_len, 12);
    sll_payload(state, buf, hardware_type, protocol, 20)
}

/// The SLL/SLL2 link-layer address at `off` when its length is 6 (a MAC).
fn sll_address(buf: &[u8], address_len: Option<u16>, off: usize) -> Option<[u8; 6]> {
    if address_len != Some(6) {
        return None;
    }
    subslice(buf, off, off + 6).try_into().ok()
}

/// The payload of an SLL/SLL2 frame, by ARPHRD type and protocol.
fn sll_payload<'b>(
    state: &mut FrameState<'b>,
    buf: &'b [u8],
    hardware_type: u16,
    protocol: u16,
    off: usize,
) -> DecodeResult<'b> {
    match hardware_type {
        // The payload is a GRE header (Wireshark `sll` dissector).
        arphrd::IPGRE => crate::tunnel::gre(state, buf, off),
        arphrd::NETLINK => {
            state.stop(Layer::Link, off, StopReason::Unsupported);
            Ok(())
        }
        _ if protocol < ethertype::MIN => {
            // LINUX_SLL_P_802_2, _802_3, CAN…: not IP.
            state.stop(Layer::Link, off, StopReason::Unsupported);
            Ok(())
        }
        _ => dispatch_ethertype(state, buf, protocol, off),
    }
}

/// Linux NFLOG: 4-byte header, then TLVs (host-order length/type, padded to
/// 4 bytes); TLV type 9 (NFULA_PAYLOAD) holds the IP packet. Byte order is
/// guessed like Wireshark's `nflog` dissector (try little-endian, then big).
fn nflog<'b>(state: &mut FrameState<'b>, buf: &'b [u8]) -> DecodeResult<'b> {
    let Some(&family) = buf.first() else {
        return stop_link(state, StopReason::Truncated);
    };
    let hint = match family {
        address_family::NFLOG_INET => Some(IpVersion::V4),
        address_family::NFLOG_INET6 => Some(IpVersion::V6),
        _ => None,
    };
    let mut off = 4usize;
    loop {
        let Some(tlv) = buf.get(off..off.saturating_add(4)) else {
            state.stop(Layer::Link, off.min(buf.len()), StopReason::Truncated);
            return Ok(());
        };
        let rest = buf.len() - off;
        let (mut tlv_len, mut tlv_type) = (
            u16::from_le_bytes([tlv[0], tlv[1]]) as usize,
            u16::from_le_bytes([tlv[2], tlv[3]]),
        );
        if tlv_len < 4 || tlv_len > rest {
            tlv_len = u16::from_be_bytes([tlv[0], tlv[1]]) as usize;
            tlv_type = u16::from_be_bytes([tlv[2], tlv[3]]);
        }
        if tlv_len < 4 {
            state.stop(Layer::Link, off, StopReason::Malformed);
            return Ok(());
        }
        // The top bit is NLA_F_NESTED.
        if tlv_type & 0x7FFF == NFULA_PAYLOAD {
            let end = off.saturating_add(tlv_len).min(buf.len());
            return ip(state, subslice(buf, 0, end), off + 4, hint);
        }
        off = off.saturating_add((tlv_len + 3) & !3);
    }
}

/// PPP with optional HDLC address/control (0xFF 0x03) and protocol-field
/// compression (RFC 1661 §6.5).
pub(crate) fn ppp<'b>(
    state: &mut FrameState<'b>,
    buf: &'b [u8],
    mut off: usize,
) -> DecodeResult<'b> {
    if buf.get(off..off.saturating_add(2)) == Some(&[0xFF, 0x03]) {
        off += 2;
    }
    let Some(&first) = buf.get(off) else {
        state.stop(state.link_layer(), off, StopReason::Truncated);
        return Ok(());
    };
    // An odd first byte is a compressed (1-byte) protocol field.
    let (protocol, payload_off) = if first & 1 == 1 {
        (u16::from(first), off + 1)
    } else {
        match read_u16_be(buf, off) {
            Some(protocol) => (protocol, off + 2),
            None => {
                state.stop(state.link_layer(), off, StopReason::Truncated);
                return Ok(());
            }
        }
    };
    dispatch_ppp_protocol(state, buf, protocol, off, payload_off)
}

/// Dispatch on a PPP protocol number; `header_off` is where the PPP header
/// started, `payload_off` where its payload starts.
fn dispatch_ppp_protocol<'b>(
    state: &mut FrameState<'b>,
    buf: &'b [u8],
    protocol: u16,
    header_off: usize,
    payload_off: usize,
) -> DecodeResult<'b> {
    match protocol {
        ppp_protocol::IPV4 => ip(state, buf, payload_off, Some(IpVersion::V4)),
        ppp_protocol::IPV6 => ip(state, buf, payload_off, Some(IpVersion::V6)),
        ppp_protocol::MPLS => mpls(state, buf, payload_off),
        _ => {
            state.stop(state.link_layer(), header_off, StopReason::Unsupported);
            Ok(())
        }
    }
}

/// Ethernet II (and 802.3 with LLC/SNAP, OUI 0, which carries an ethertype).
pub(crate) fn ethernet<'b>(
    state: &mut FrameState<'b>,
    buf: &'b [u8],
    off: usize,
) -> DecodeResult<'b> {
    if !state.enter(off) {
        return Ok(());
    }
    let Some(type_or_len) = read_u16_be(buf, off + 12) else {
        state.stop(state.link_layer(), off, StopReason::Truncated);
        return Ok(());
    };
    // The outermost Ethernet header only (not one inside VXLAN/EtherIP).
    if state.decoded.ip.is_none() && state.decoded.link.src_mac.is_none() {
        state.decoded.link.src_mac = subslice(buf, off + 6, off + 12).try_into().ok();
    }
    if type_or_len >= ethertype::MIN {
        return dispatch_ethertype(state, buf, type_or_len, off + 14);
    }
    // 802.3 length field: only LLC/SNAP with OUI 00-00-00 carries an ethertype.
    if subslice(buf, off + 14, off + 20) == LLC_SNAP_RFC1042 {
        if let Some(ether_type) = read_u16_be(buf, off + 20) {
            return dispatch_ethertype(state, buf, ether_type, off + 22);
        }
    }
    state.stop(state.link_layer(), off + 14, StopReason::Unsupported);
    Ok(())
}

/// Dispatch on an ethertype whose payload starts at `off`, skipping any
/// number of 802.1Q / 802.1ad / QinQ tags (0x8100, 0x88A8, 0x9100, 0x9200).
/// Tags are recorded in [`crate::LinkInfo`] only before the first IP header.
pub(crate) fn dispatch_ethertype<'b>(
    state: &mut FrameState<'b>,
    buf: &'b [u8],
    mut ether_type: u16,
    mut off: usize,
) -> DecodeResult<'b> {
    loop {
        match ether_type {
            ethertype::VLAN | ethertype::QINQ | ethertype::QINQ_9100 | ethertype::QINQ_9200 => {
                let (Some(tci), Some(next)) = (read_u16_be(buf, off), read_u16_be(buf, off + 2))
                else {
                    state.stop(state.link_layer(), off, StopReason::Truncated);
                    return Ok(());
                };
                if state.decoded.ip.is_none() {
                    let link = &mut state.decoded.link;
                    if let Some(slot) = link.vlans.get_mut(usize::from(link.vlan_count)) {
                        // The VLAN id is the low 12 bits of the TCI.
                        *slot = tci & 0x0FFF;
                    }
                    link.vlan_count = link.vlan_count.saturating_add(1);
                }
                ether_type = next;
                off += 4;
            }
            ethertype::IPV4 => return ip(state, buf, off, Some(IpVersion::V4)),
            ethertype::IPV6 => return ip(state, buf, off, Some(IpVersion::V6)),
            ethertype::MPLS | ethertype::MPLS_MULTICAST => return mpls(state, buf, off),
            ethertype::PPPOE_SESSION => return pppoe(state, buf, off),
            // GRE, Geneve.
            ethertype::TRANSPARENT_ETHERNET_BRIDGING => return ethernet(state, buf, off),
            _ => {
                state.stop(state.link_layer(), off, StopReason::Unsupported);
                return Ok(());
            }
        }
    }
}

/// MPLS label stack (RFC 3032) up to bottom-of-stack, then IPv4/IPv6 by the
/// version nibble (Wireshark's default MPLS payload guess); anything else
/// (pseudowires) is unsupported.
pub(crate) fn mpls<'b>(
    state: &mut FrameState<'b>,
    buf: &'b [u8],
    mut off: usize,
) -> DecodeResult<'b> {
    let start = off;
    loop {
        let Some(label_entry) = read_u32_be(buf, off) else {
            state.stop(
                state.link_layer(),
                off.min(buf.len()),
                StopReason::Truncated,
            );
            return Ok(());
        };
        off += 4;
        // Bottom-of-stack bit.
        if label_entry & 0x100 != 0 {
            break;
        }
    }
    match buf.get(off).map(|b| b >> 4) {
        Some(4) => ip(state, buf, off, Some(IpVersion::V4)),
        Some(6) => ip(state, buf, off, Some(IpVersion::V6)),
        None => {
            state.stop(Layer::Tunnel, off, StopReason::Truncated);
            Ok(())
        }
        Some(_) => {
            state.stop(Layer::Tunnel, start, StopReason::Unsupported);
            Ok(())
        }
    }
}

/// PPPoE session stage (RFC 2516): 6-byte header, then a 2-byte PPP protocol.
fn pppoe<'b>(state: &mut FrameState<'b>, buf: &'b [u8], off: usize) -> DecodeResult<'b> {
    let (Some(pppoe_len), Some(protocol)) = (read_u16_be(buf, off + 4), read_u16_be(buf, off + 6))
    else {
        state.stop(state.link_layer(), off, StopReason::Truncated);
        return Ok(());
    };
    // The PPPoE length bounds the payload (Wireshark's `pppoe` dissector
    // sets the reported length from it).
    let wire = off + 6 + usize::from(pppoe_len);
    if wire >= off + 8 {
        state.wire_end = state.wire_end.min(wire);
    }
    dispatch_ppp_protocol(state, buf, protocol, off, off + 8)
}

/// IEEE 802.11 data frame (no radiotap) followed by LLC/SNAP, as carried by
/// Aruba GRE (protocol 0x8200–0x82FF, Wireshark `gre` "ARUBA WLAN"), CAPWAP
/// (frame control byte-swapped, Wireshark's `capwap.swap_frame_control`
/// default) and LINKTYPE_IEEE802_11 (105). Management/control frames, null data and
/// protected (encrypted) frames are unsupported.
pub(crate) fn ieee80211<'b>(
    state: &mut FrameState<'b>,
    buf: &'b [u8],
    off: usize,
    swap_frame_control: bool,
) -> DecodeResult<'b> {
    let (Some(&byte0), Some(&byte1)) = (buf.get(off), buf.get(off + 1)) else {
        state.stop(state.link_layer(), off, StopReason::Truncated);
        return Ok(());
    };
    let (fc0, fc_flags) = if swap_frame_control {
        (byte1, byte0)
    } else {
        (byte0, byte1)
    };
    let (frame_type, subtype) = ((fc0 >> 2) & 3, fc0 >> 4);
    // Data frames (type 2) only; subtype bit 2 = no data; flag 0x40 = protected.
    if frame_type != 2 || subtype & 4 != 0 || fc_flags & 0x40 != 0 {
        state.stop(state.link_layer(), off, StopReason::Unsupported);
        return Ok(());
    }
    let mut header_len = 24;
    // To-DS and From-DS both set.
    if fc_flags & 3 == 3 {
        header_len += 6; // address 4 (WDS)
    }
    if subtype & 8 != 0 {
        header_len += 2; // QoS control
        if fc_flags & 0x80 != 0 {
            header_len += 4; // HT control
        }
    }
    let llc = off + header_len;
    if subslice(buf, llc, llc + 6) == LLC_SNAP_RFC1042 {
        if let Some(ether_type) = read_u16_be(buf, llc + 6) {
            return dispatch_ethertype(state, buf, ether_type, llc + 8);
        }
    }
    let reason = if buf.len() < llc + 8 {
        StopReason::Truncated
    } else {
        StopReason::Unsupported
    };
    state.stop(state.link_layer(), llc.min(buf.len()), reason);
    Ok(())
}
