//! Tunnels: GRE (RFC 2784/2890, RFC 1701 routing, PPTP enhanced GRE
//! RFC 2637), ERSPAN I/II/III, and the UDP tunnels Wireshark decodes by their
//! standard ports: VXLAN (4789), Geneve (6081), GTP-U (2152), Teredo (3544),
//! CAPWAP data (5247).
//! None of these are in etherparse.

use crate::decoder::{be16, Res, St};
use crate::ip::ip;
use crate::link::{ethernet, ethertype, ppp};
use crate::{IpVersion, Layer, StopReason};

/// GRE header at `off`.
pub(crate) fn gre<'b>(st: &mut St<'b>, buf: &'b [u8], off: usize) -> Res<'b> {
    if !st.enter(off) {
        return Ok(());
    }
    let (Some(flags), Some(proto)) = (be16(buf, off), be16(buf, off + 2)) else {
        st.stop(Layer::Tunnel, off, StopReason::Truncated);
        return Ok(());
    };
    let (c, r, k, s) = (
        flags & 0x8000 != 0,
        flags & 0x4000 != 0,
        flags & 0x2000 != 0,
        flags & 0x1000 != 0,
    );
    let mut len = 4usize;
    match flags & 7 {
        0 => {
            if c || r {
                len += 4;
            }
            if k {
                len += 4;
            }
            if s {
                len += 4;
            }
            if r {
                // RFC 1701 source route entries, ending with a NULL SRE.
                loop {
                    let (Some(af), Some(&sre_len)) = (be16(buf, off + len), buf.get(off + len + 3))
                    else {
                        st.stop(Layer::Tunnel, off, StopReason::Truncated);
                        return Ok(());
                    };
                    len += 4 + usize::from(sre_len);
                    if af == 0 && sre_len == 0 {
                        break;
                    }
                }
            }
        }
        1 => {
            // Enhanced GRE (PPTP): key (payload length + call id) always,
            // optional sequence and acknowledgement numbers.
            len += 4;
            if s {
                len += 4;
            }
            if flags & 0x0080 != 0 {
                len += 4;
            }
        }
        _ => {
            st.stop(Layer::Tunnel, off, StopReason::Unsupported);
            return Ok(());
        }
    }
    let p = off + len;
    if p > buf.len() {
        st.stop(Layer::Tunnel, off, StopReason::Truncated);
        return Ok(());
    }
    match proto {
        // PPP (PPTP).
        0x880B => ppp(st, buf, p),
        // ERSPAN type II has an 8-byte header when GRE carries a sequence
        // number; without one it is type I (bare Ethernet), as in Wireshark's
        // `erspan` dissector.
        0x88BE => ethernet(st, buf, if s { p + 8 } else { p }),
        // ERSPAN type III: 12-byte header, plus 8 bytes of platform-specific
        // subheader when the O bit (last bit of the header) is set.
        0x22EB => {
            let Some(&last) = buf.get(p + 11) else {
                st.stop(Layer::Tunnel, p, StopReason::Truncated);
                return Ok(());
            };
            ethernet(st, buf, p + 12 + if last & 1 != 0 { 8 } else { 0 })
        }
        // Aruba WLAN: an 802.11 frame.
        0x8200..=0x82FF => crate::link::ieee80211(st, buf, p, false),
        _ => ethertype(st, buf, proto, p),
    }
}

/// Try the UDP-port tunnels, lower port first (Wireshark's `decode_udp_ports`
/// order); the higher port counts only when the lower one is not a well-known
/// port (< 1024). `off` is the UDP payload offset, `buf` ends with the UDP
/// datagram. A payload that does not look like the tunnel leaves the UDP
/// transport as it is.
pub(crate) fn udp_tunnel<'b>(
    st: &mut St<'b>,
    buf: &'b [u8],
    off: usize,
    sport: u16,
    dport: u16,
) -> Res<'b> {
    let (lo, hi) = (sport.min(dport), sport.max(dport));
    let ports: &[u16] = if lo < 1024 { &[lo][..] } else { &[lo, hi][..] };
    for &p in ports {
        match p {
            4789 => return vxlan(st, buf, off),
            6081 => return geneve(st, buf, off),
            2152 => return gtpu(st, buf, off),
            3544 => return teredo(st, buf, off),
            5247 => return capwap_data(st, buf, off),
            _ => {}
        }
    }
    Ok(())
}

/// VXLAN (RFC 7348): 8-byte header, then Ethernet.
fn vxlan<'b>(st: &mut St<'b>, buf: &'b [u8], off: usize) -> Res<'b> {
    if buf.len() < off + 8 {
        st.stop(Layer::Tunnel, off, StopReason::Truncated);
        return Ok(());
    }
    ethernet(st, buf, off + 8)
}

/// Geneve (RFC 8926): 8-byte header + options, protocol type = ethertype.
fn geneve<'b>(st: &mut St<'b>, buf: &'b [u8], off: usize) -> Res<'b> {
    let (Some(&b0), Some(proto)) = (buf.get(off), be16(buf, off + 2)) else {
        st.stop(Layer::Tunnel, off, StopReason::Truncated);
        return Ok(());
    };
    if b0 >> 6 != 0 {
        st.stop(Layer::Tunnel, off, StopReason::Unsupported);
        return Ok(());
    }
    let p = off + 8 + usize::from(b0 & 0x3F) * 4;
    if p > buf.len() {
        st.stop(Layer::Tunnel, off, StopReason::Truncated);
        return Ok(());
    }
    if !st.enter(off) {
        return Ok(());
    }
    ethertype(st, buf, proto, p)
}

/// GTP-U v1 (3GPP TS 29.281): only G-PDU messages (type 255) carry a user
/// IP packet; other messages (echo, error indication…) stay plain UDP.
fn gtpu<'b>(st: &mut St<'b>, buf: &'b [u8], off: usize) -> Res<'b> {
    let (Some(&b0), Some(&msg)) = (buf.get(off), buf.get(off + 1)) else {
        st.stop(Layer::Tunnel, off, StopReason::Truncated);
        return Ok(());
    };
    if b0 >> 5 != 1 || b0 & 0x10 == 0 || msg != 0xFF {
        return Ok(());
    }
    let mut len = 8usize;
    if b0 & 0x07 != 0 {
        len += 4;
        if b0 & 0x04 != 0 {
            // Extension header chain: the byte before each header holds its
            // type; each header's first byte is its length in 4-byte units.
            let mut next = buf.get(off + len - 1).copied().unwrap_or(0);
            while next != 0 {
                let Some(&units) = buf.get(off + len) else {
                    st.stop(Layer::Tunnel, off, StopReason::Truncated);
                    return Ok(());
                };
                if units == 0 {
                    st.stop(Layer::Tunnel, off, StopReason::Malformed);
                    return Ok(());
                }
                len += usize::from(units) * 4;
                next = buf.get(off + len - 1).copied().unwrap_or(0);
            }
        }
    }
    let p = off + len;
    match buf.get(p).map(|b| b >> 4) {
        Some(4) => ip(st, buf, p, Some(IpVersion::V4)),
        Some(6) => ip(st, buf, p, Some(IpVersion::V6)),
        None => {
            st.stop(Layer::Tunnel, p.min(buf.len()), StopReason::Truncated);
            Ok(())
        }
        Some(_) => {
            st.stop(Layer::Tunnel, p, StopReason::Unsupported);
            Ok(())
        }
    }
}

/// Teredo (RFC 4380): optional authentication and origin-indication headers,
/// then IPv6. Payloads that are not IPv6 stay plain UDP.
fn teredo<'b>(st: &mut St<'b>, buf: &'b [u8], mut off: usize) -> Res<'b> {
    if be16(buf, off) == Some(0x0001) {
        let (Some(&id_len), Some(&au_len)) = (buf.get(off + 2), buf.get(off + 3)) else {
            return Ok(());
        };
        off += 13 + usize::from(id_len) + usize::from(au_len);
    }
    if be16(buf, off) == Some(0x0000) {
        off += 8;
    }
    if buf.get(off).map(|b| b >> 4) != Some(6) || buf.len() < off + 40 {
        return Ok(());
    }
    ip(st, buf, off, Some(IpVersion::V6))
}

/// CAPWAP data channel (RFC 5415 §4.3): preamble type 0 (not DTLS), header of
/// HLEN 4-byte words; T = 1 with wireless binding 1 carries an 802.11 frame,
/// T = 0 an Ethernet frame. Fragments (F bit) are not reassembled.
fn capwap_data<'b>(st: &mut St<'b>, buf: &'b [u8], off: usize) -> Res<'b> {
    let (Some(&pre), Some(&b1), Some(&b2), Some(&b3)) = (
        buf.get(off),
        buf.get(off + 1),
        buf.get(off + 2),
        buf.get(off + 3),
    ) else {
        return Ok(());
    };
    if pre != 0 {
        return Ok(());
    }
    let hlen = usize::from(b1 >> 3) * 4;
    let (wbid, t, f) = ((b2 >> 1) & 0x1F, b2 & 1 != 0, b3 & 0x80 != 0);
    let p = off + hlen;
    if f || hlen < 8 || (t && wbid != 1) {
        st.stop(Layer::Tunnel, off, StopReason::Unsupported);
        return Ok(());
    }
    if t {
        crate::link::ieee80211(st, buf, p, true)
    } else {
        ethernet(st, buf, p)
    }
}
