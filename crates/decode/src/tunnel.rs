//! Tunnels: GRE (RFC 2784/2890, RFC 1701 routing, PPTP enhanced GRE
//! RFC 2637), ERSPAN I/II/III, and the UDP tunnels Wireshark decodes by their
//! standard ports: VXLAN (4789), Geneve (6081), GTP-U (2152), Teredo (3544),
//! CAPWAP data (5247).
//! None of these are in etherparse.

use crate::decoder::{read_u16_be, DecodeResult, FrameState};
use crate::ip::ip;
use crate::link::{dispatch_ethertype, ethernet, ppp};
use crate::{IpVersion, Layer, StopReason};
use pcapsleuth_core::consts::ethertype;

/// The standard UDP ports of the tunnels decoded (IANA service names).
mod udp_port {
    /// VXLAN (RFC 7348).
    pub const VXLAN: u16 = 4789;
    /// Geneve (RFC 8926).
    pub const GENEVE: u16 = 6081;
    /// GTP-U (3GPP TS 29.281).
    pub const GTP_U: u16 = 2152;
    /// Teredo (RFC 4380).
    pub const TEREDO: u16 = 3544;
    /// CAPWAP data channel (RFC 5415).
    pub const CAPWAP_DATA: u16 = 5247;
}

/// GTP-U message type of a G-PDU (user data).
const GTP_G_PDU: u8 = 0xFF;

/// CAPWAP wireless binding id of IEEE 802.11 (RFC 5416).
const CAPWAP_WBID_IEEE80211: u8 = 1;

/// GRE flag bits (first header word, RFC 2784/2890/1701/2637).
mod gre_flag {
    /// Checksum present.
    pub const CHECKSUM: u16 = 0x8000;
    /// Routing present (RFC 1701).
    pub const ROUTING: u16 = 0x4000;
    /// Key present.
    pub const KEY: u16 = 0x2000;
    /// Sequence number present.
    pub const SEQUENCE: u16 = 0x1000;
    /// Acknowledgement number present (enhanced GRE, RFC 2637).
    pub const ACK: u16 = 0x0080;
    /// Version field (low 3 bits): 0 = GRE, 1 = enhanced GRE (PPTP).
    pub const VERSION_MASK: u16 = 0x0007;
}

/// GRE header at `off`.
pub(crate) fn gre<'b>(state: &mut FrameState<'b>, buf: &'b [u8], off: usize) -> DecodeResult<'b> {
    if !state.enter(off) {
        return Ok(());
    }
    let (Some(flags), Some(protocol)) = (read_u16_be(buf, off), read_u16_be(buf, off + 2)) else {
        state.stop(Layer::Tunnel, off, StopReason::Truncated);
        return Ok(());
    };
    let (has_checksum, has_routing, has_key, has_sequence) = (
        flags & gre_flag::CHECKSUM != 0,
        flags & gre_flag::ROUTING != 0,
        flags & gre_flag::KEY != 0,
        flags & gre_flag::SEQUENCE != 0,
    );
    let mut len = 4usize;
    match flags & gre_flag::VERSION_MASK {
        0 => {
            if has_checksum || has_routing {
                len += 4;
            }
            if has_key {
                len += 4;
            }
            if has_sequence {
                len += 4;
            }
            if has_routing {
                // RFC 1701 source route entries, ending with a NULL SRE.
                loop {
                    let (Some(family), Some(&sre_len)) =
                        (read_u16_be(buf, off + len), buf.get(off + len + 3))
                    else {
                        state.stop(Layer::Tunnel, off, StopReason::Truncated);
                        return Ok(());
                    };
                    len += 4 + usize::from(sre_len);
                    if family == 0 && sre_len == 0 {
                        break;
                    }
                }
            }
        }
        1 => {
            // Enhanced GRE (PPTP): key (payload length + call id) always,
            // optional sequence and acknowledgement numbers.
            len += 4;
            if has_sequence {
                len += 4;
            }
            if flags & gre_flag::ACK != 0 {
                len += 4;
            }
        }
        _ => {
            state.stop(Layer::Tunnel, off, StopReason::Unsupported);
            return Ok(());
        }
    }
    let payload_off = off + len;
    if payload_off > buf.len() {
        state.stop(Layer::Tunnel, off, StopReason::Truncated);
        return Ok(());
    }
    match protocol {
        // PPTP.
        ethertype::PPP => ppp(state, buf, payload_off),
        // ERSPAN type II has an 8-byte header when GRE carries a sequence
        // number; without one it is type I (bare Ethernet), as in Wireshark's
        // `erspan` dissector.
        ethertype::ERSPAN_II => {
            let erspan_len = if has_sequence { 8 } else { 0 };
            ethernet(state, buf, payload_off + erspan_len)
        }
        // ERSPAN type III: 12-byte header, plus 8 bytes of platform-specific
        // subheader when the O bit (last bit of the header) is set.
        ethertype::ERSPAN_III => {
            let Some(&last) = buf.get(payload_off + 11) else {
                state.stop(Layer::Tunnel, payload_off, StopReason::Truncated);
                return Ok(());
            };
            let subheader_len = if last & 1 != 0 { 8 } else { 0 };
            ethernet(state, buf, payload_off + 12 + subheader_len)
        }
        // Aruba WLAN (protocol types 0x8200-0x82FF): an 802.11 frame.
        0x8200..=0x82FF => crate::link::ieee80211(state, buf, payload_off, false),
        _ => dispatch_ethertype(state, buf, protocol, payload_off),
    }
}

/// Try the UDP-port tunnels, lower port first (Wireshark's `decode_udp_ports`
/// order); the higher port counts only when the lower one is not a well-known
/// port (< 1024). `off` is the UDP payload offset, `buf` ends with the UDP
/// datagram. A payload that does not look like the tunnel leaves the UDP
/// transport as it is.
pub(crate) fn udp_tunnel<'b>(
    state: &mut FrameState<'b>,
    buf: &'b [u8],
    off: usize,
    src_port: u16,
    dst_port: u16,
) -> DecodeResult<'b> {
    let (low, high) = (src_port.min(dst_port), src_port.max(dst_port));
    let ports: &[u16] = if low < 1024 {
        &[low][..]
    } else {
        &[low, high][..]
    };
    for &port in ports {
        match port {
            udp_port::VXLAN => return vxlan(state, buf, off),
            udp_port::GENEVE => return geneve(state, buf, off),
            udp_port::GTP_U => return gtpu(state, buf, off),
            udp_port::TEREDO => return teredo(state, buf, off),
            udp_port::CAPWAP_DATA => return capwap_data(state, buf, off),
            _ => {}
        }
    }
    Ok(())
}

/// VXLAN (RFC 7348): 8-byte header, then Ethernet.
fn vxlan<'b>(state: &mut FrameState<'b>, buf: &'b [u8], off: usize) -> DecodeResult<'b> {
    if buf.len() < off + 8 {
        state.stop(Layer::Tunnel, off, StopReason::Truncated);
        return Ok(());
    }
    ethernet(state, buf, off + 8)
}

/// Geneve (RFC 8926): 8-byte header + options, protocol type = ethertype.
fn geneve<'b>(state: &mut FrameState<'b>, buf: &'b [u8], off: usize) -> DecodeResult<'b> {
    let (Some(&version_and_opt_len), Some(protocol)) = (buf.get(off), read_u16_be(buf, off + 2))
    else {
        state.stop(Layer::Tunnel, off, StopReason::Truncated);
        return Ok(());
    };
    // Version (top 2 bits) must be 0; options length in 4-byte words.
    if version_and_opt_len >> 6 != 0 {
        state.stop(Layer::Tunnel, off, StopReason::Unsupported);
        return Ok(());
    }
    let payload_off = off + 8 + usize::from(version_and_opt_len & 0x3F) * 4;
    if payload_off > buf.len() {
        state.stop(Layer::Tunnel, off, StopReason::Truncated);
        return Ok(());
    }
    if !state.enter(off) {
        return Ok(());
    }
    dispatch_ethertype(state, buf, protocol, payload_off)
}

/// GTP-U v1 (3GPP TS 29.281): only G-PDU messages (type 255) carry a user
/// IP packet; other messages (echo, error indication…) stay plain UDP.
fn gtpu<'b>(state: &mut FrameState<'b>, buf: &'b [u8], off: usize) -> DecodeResult<'b> {
    let (Some(&flags), Some(&message_type)) = (buf.get(off), buf.get(off + 1)) else {
        state.stop(Layer::Tunnel, off, StopReason::Truncated);
        return Ok(());
    };
    // Version 1 (top 3 bits), protocol type GTP (0x10), G-PDU.
    if flags >> 5 != 1 || flags & 0x10 == 0 || message_type != GTP_G_PDU {
        return Ok(());
    }
    let mut len = 8usize;
    // E, S or PN set: sequence number, N-PDU number and next extension type follow.
    if flags & 0x07 != 0 {
        len += 4;
        if flags & 0x04 != 0 {
            // Extension header chain: the byte before each header holds its
            // type; each header's first byte is its length in 4-byte units.
            let mut next = buf.get(off + len - 1).copied().unwrap_or(0);
            while next != 0 {
                let Some(&units) = buf.get(off + len) else {
                    state.stop(Layer::Tunnel, off, StopReason::Truncated);
                    return Ok(());
                };
                if units == 0 {
                    state.stop(Layer::Tunnel, off, StopReason::Malformed);
                    return Ok(());
                }
                len += usize::from(units) * 4;
                next = buf.get(off + len - 1).copied().unwrap_or(0);
            }
        }
    }
    let payload_off = off + len;
    match buf.get(payload_off).map(|b| b >> 4) {
        Some(4) => ip(state, buf, payload_off, Some(IpVersion::V4)),
        Some(6) => ip(state, buf, payload_off, Some(IpVersion::V6)),
        None => {
            let at = payload_off.min(buf.len());
            state.stop(Layer::Tunnel, at, StopReason::Truncated);
            Ok(())
        }
        Some(_) => {
            state.stop(Layer::Tunnel, payload_off, StopReason::Unsupported);
            Ok(())
        }
    }
}

/// Teredo (RFC 4380): optional authentication and origin-indication headers,
/// then IPv6. Payloads that are not IPv6 stay plain UDP.
fn teredo<'b>(state: &mut FrameState<'b>, buf: &'b [u8], mut off: usize) -> DecodeResult<'b> {
    // Authentication indicator: client id and auth value lengths, nonce, confirmation.
    if read_u16_be(buf, off) == Some(0x0001) {
        let (Some(&id_len), Some(&auth_len)) = (buf.get(off + 2), buf.get(off + 3)) else {
            return Ok(());
        };
        off += 13 + usize::from(id_len) + usize::from(auth_len);
    }
    // Origin indication (8 bytes).
    if read_u16_be(buf, off) == Some(0x0000) {
        off += 8;
    }
    if buf.get(off).map(|b| b >> 4) != Some(6) || buf.len() < off + 40 {
        return Ok(());
    }
    ip(state, buf, off, Some(IpVersion::V6))
}

/// CAPWAP data channel (RFC 5415 §4.3): preamble type 0 (not DTLS), header of
/// HLEN 4-byte words; T = 1 with wireless binding 1 carries an 802.11 frame,
/// T = 0 an Ethernet frame. Fragments (F bit) are not reassembled.
fn capwap_data<'b>(state: &mut FrameState<'b>, buf: &'b [u8], off: usize) -> DecodeResult<'b> {
    let (Some(&preamble), Some(&byte1), Some(&byte2), Some(&byte3)) = (
        buf.get(off),
        buf.get(off + 1),
        buf.get(off + 2),
        buf.get(off + 3),
    ) else {
        return Ok(());
    };
    if preamble != 0 {
        return Ok(());
    }
    let header_len = usize::from(byte1 >> 3) * 4;
    let wireless_binding = (byte2 >> 1) & 0x1F;
    let native_frame = byte2 & 1 != 0;
    let is_fragment = byte3 & 0x80 != 0;
    let payload_off = off + header_len;
    if is_fragment || header_len < 8 || (native_frame && wireless_binding != CAPWAP_WBID_IEEE80211)
    {
        state.stop(Layer::Tunnel, off, StopReason::Unsupported);
        return Ok(());
    }
    if native_frame {
        crate::link::ieee80211(state, buf, payload_off, true)
    } else {
        ethernet(state, buf, payload_off)
    }
}
