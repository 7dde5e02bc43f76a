//! IPv4 / IPv6 headers, IPv6 extension headers, AH and fragments.
//!
//! Fixed headers and extension headers are sliced with etherparse
//! (`Ipv4HeaderSlice`, `Ipv6HeaderSlice`, `Ipv6RawExtHeaderSlice`,
//! `IpAuthHeaderSlice`, `Ipv6FragmentHeaderSlice`): they only check what
//! must hold for the header itself and never look at the payload, which is
//! exactly the lax behaviour needed for snaplen-cut frames.

use crate::decoder::{sl, FragReq, Res, St};
use crate::reassembly::FragKey;
use crate::{Fragment, IpHeader, IpVersion, Layer, StopReason, Transport};
use etherparse::err::{ip_auth, ipv4, ipv6};
use etherparse::{
    IpAuthHeaderSlice, Ipv4HeaderSlice, Ipv6FragmentHeaderSlice, Ipv6HeaderSlice,
    Ipv6RawExtHeaderSlice,
};
use std::net::IpAddr;

/// An IP header at `off`; `hint` is the version the enclosing layer announced
/// (a mismatching version nibble is [`StopReason::Malformed`]).
pub(crate) fn ip<'b>(
    st: &mut St<'b>,
    buf: &'b [u8],
    off: usize,
    hint: Option<IpVersion>,
) -> Res<'b> {
    if !st.enter(off) {
        return Ok(());
    }
    let Some(&b0) = buf.get(off) else {
        st.stop(Layer::Ip, off, StopReason::Truncated);
        return Ok(());
    };
    match (b0 >> 4, hint) {
        (4, None | Some(IpVersion::V4)) => ipv4(st, buf, off),
        (6, None | Some(IpVersion::V6)) => ipv6(st, buf, off),
        _ => {
            st.stop(Layer::Ip, off, StopReason::Malformed);
            Ok(())
        }
    }
}

/// Make `h` the innermost header; the previous innermost becomes the
/// outermost if none is recorded yet.
fn push_ip(st: &mut St<'_>, h: IpHeader) {
    if let Some(prev) = st.d.ip {
        if st.d.outer_ip.is_none() {
            st.d.outer_ip = Some(prev);
        }
    }
    st.d.ip = Some(h);
    st.d.transport = Transport::None;
}

fn ipv4<'b>(st: &mut St<'b>, buf: &'b [u8], off: usize) -> Res<'b> {
    let rest = sl(buf, off, buf.len());
    let s = match Ipv4HeaderSlice::from_slice(rest) {
        Ok(s) => s,
        Err(ipv4::HeaderSliceError::Len(_)) => {
            st.stop(Layer::Ip, off, StopReason::Truncated);
            return Ok(());
        }
        Err(ipv4::HeaderSliceError::Content(_)) => {
            st.stop(Layer::Ip, off, StopReason::Malformed);
            return Ok(());
        }
    };
    let hl = usize::from(s.ihl()) * 4;
    // Total length 0 means TSO/GSO on the capturing host: like Wireshark's
    // `ip.tso_support`, fall back to the captured length.
    let total = match usize::from(s.total_len()) {
        0 if st.wire_end != usize::MAX => st.wire_end.saturating_sub(off),
        0 => rest.len(),
        n => n,
    };
    let frag_off = u32::from(s.fragments_offset().value()) * 8;
    let more = s.more_fragments();
    let id = u32::from(s.identification());
    let proto = s.protocol().0;
    let fragment = (frag_off > 0 || more).then_some(Fragment {
        offset: frag_off,
        more,
        id,
    });
    push_ip(
        st,
        IpHeader {
            version: IpVersion::V4,
            src: IpAddr::V4(s.source_addr()),
            dst: IpAddr::V4(s.destination_addr()),
            ttl: s.ttl(),
            ip_id: Some(id),
            total_len: total as u32,
            header_len: hl as u32,
            protocol: proto,
            dont_fragment: s.dont_fragment(),
            fragment,
        },
    );
    if total < hl {
        st.stop(Layer::Ip, off, StopReason::Malformed);
        return Ok(());
    }
    // Bound by what was on the wire (Wireshark's reported length).
    let wire_total = total.min(st.wire_end.saturating_sub(off)).max(hl);
    st.wire_end = off.saturating_add(wire_total);
    let end = st.wire_end.min(buf.len());
    let plen = wire_total - hl;
    if let Some(f) = fragment {
        return frag(st, buf, off + hl, end, plen, f, proto);
    }
    upper(st, buf, proto, off + hl, end, plen)
}

fn ipv6<'b>(st: &mut St<'b>, buf: &'b [u8], off: usize) -> Res<'b> {
    let rest = sl(buf, off, buf.len());
    let s = match Ipv6HeaderSlice::from_slice(rest) {
        Ok(s) => s,
        Err(ipv6::HeaderSliceError::Len(_)) => {
            st.stop(Layer::Ip, off, StopReason::Truncated);
            return Ok(());
        }
        Err(ipv6::HeaderSliceError::Content(_)) => {
            st.stop(Layer::Ip, off, StopReason::Malformed);
            return Ok(());
        }
    };
    // Payload length 0: jumbogram (RFC 2675) or TSO; use the captured length.
    let plen = match usize::from(s.payload_length()) {
        0 if st.wire_end != usize::MAX => st.wire_end.saturating_sub(off + 40),
        0 => rest.len() - 40,
        n => n,
    };
    let nh = s.next_header().0;
    push_ip(
        st,
        IpHeader {
            version: IpVersion::V6,
            src: IpAddr::V6(s.source_addr()),
            dst: IpAddr::V6(s.destination_addr()),
            ttl: s.hop_limit(),
            ip_id: None,
            total_len: (40 + plen) as u32,
            header_len: 40,
            protocol: nh,
            dont_fragment: false,
            fragment: None,
        },
    );
    let plen = plen.min(st.wire_end.saturating_sub(off + 40));
    st.wire_end = off.saturating_add(40 + plen);
    let end = st.wire_end.min(buf.len());
    upper(st, buf, nh, off + 40, end, plen)
}

/// Walk extension headers starting with protocol `proto` at `off` (IPv6:
/// hop-by-hop, routing, destination options, mobility, HIP, shim6, fragment;
/// both versions: AH), then decode the transport. `end` bounds the captured
/// bytes of this datagram, `plen` is the payload length the header announced.
pub(crate) fn upper<'b>(
    st: &mut St<'b>,
    buf: &'b [u8],
    mut proto: u8,
    mut off: usize,
    end: usize,
    mut plen: usize,
) -> Res<'b> {
    let v6 = st.ip_version() == Some(IpVersion::V6);
    loop {
        let rest = sl(buf, off, end);
        let (next, n) = match proto {
            0 | 43 | 60 | 135 | 139 | 140 if v6 => match Ipv6RawExtHeaderSlice::from_slice(rest) {
                Ok(s) => (s.next_header().0, s.slice().len()),
                Err(_) => {
                    st.stop(Layer::Ip, off, StopReason::Truncated);
                    return Ok(());
                }
            },
            51 => match IpAuthHeaderSlice::from_slice(rest) {
                Ok(s) => (s.next_header().0, s.slice().len()),
                Err(e) => {
                    let reason = match e {
                        ip_auth::HeaderSliceError::Len(_) => StopReason::Truncated,
                        ip_auth::HeaderSliceError::Content(_) => StopReason::Malformed,
                    };
                    st.stop(Layer::Ip, off, reason);
                    return Ok(());
                }
            },
            44 if v6 => {
                let Ok(s) = Ipv6FragmentHeaderSlice::from_slice(rest) else {
                    st.stop(Layer::Ip, off, StopReason::Truncated);
                    return Ok(());
                };
                let next = s.next_header().0;
                let offset = u32::from(s.fragment_offset().value()) * 8;
                let more = s.more_fragments();
                let id = s.identification();
                if let Some(h) = st.d.ip.as_mut() {
                    h.header_len = h.header_len.saturating_add(8);
                    h.protocol = next;
                    h.ip_id = Some(id);
                }
                off += 8;
                plen = plen.saturating_sub(8);
                if offset > 0 || more {
                    return frag(st, buf, off, end, plen, Fragment { offset, more, id }, next);
                }
                // Atomic fragment (RFC 6946): not a fragment.
                proto = next;
                continue;
            }
            _ => break,
        };
        if let Some(h) = st.d.ip.as_mut() {
            h.header_len = h.header_len.saturating_add(n as u32);
            h.protocol = next;
        }
        off += n;
        plen = plen.saturating_sub(n);
        proto = next;
    }
    crate::transport::transport(st, buf, proto, off, end, plen)
}

/// A fragment whose payload starts at `off`: ask for reassembly, or stop.
fn frag<'b>(
    st: &mut St<'b>,
    buf: &'b [u8],
    off: usize,
    end: usize,
    plen: usize,
    f: Fragment,
    proto: u8,
) -> Res<'b> {
    let Some(h) = st.d.ip.as_mut() else {
        return Ok(());
    };
    h.fragment = Some(f);
    let key = FragKey {
        src: h.src,
        dst: h.dst,
        // IPv6 fragments are keyed by (src, dst, id) only (RFC 8200 §4.5).
        proto: if h.version == IpVersion::V4 { proto } else { 0 },
        id: f.id,
    };
    let data = sl(buf, off, end);
    if st.in_reasm || data.len() < plen {
        // Nested fragmentation, or a fragment cut by the snaplen: cannot be
        // reassembled.
        st.stop(Layer::Ip, off, StopReason::Fragment);
        return Ok(());
    }
    Err(FragReq {
        key,
        offset: f.offset,
        more: f.more,
        data: sl(data, 0, plen),
        proto,
        frame_off: off,
    })
}
