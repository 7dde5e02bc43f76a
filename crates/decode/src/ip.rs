//! IPv4 / IPv6 headers, IPv6 extension headers, AH and fragments.
//!
//! Fixed headers and extension headers are sliced with etherparse
//! (`Ipv4HeaderSlice`, `Ipv6HeaderSlice`, `Ipv6RawExtHeaderSlice`,
//! `IpAuthHeaderSlice`, `Ipv6FragmentHeaderSlice`): they only check what
//! must hold for the header itself and never look at the payload, which is
//! exactly the lax behaviour needed for snaplen-cut frames.

use crate::decoder::{subslice, DecodeResult, FrameState, ReassemblyRequest};
use crate::reassembly::ReassemblyKey;
use crate::{Fragment, IpHeader, IpVersion, Layer, StopReason, Transport, UdpLayer};
use etherparse::err::{ip_auth, ipv4, ipv6};
use etherparse::{
    IpAuthHeaderSlice, Ipv4HeaderSlice, Ipv6FragmentHeaderSlice, Ipv6HeaderSlice,
    Ipv6RawExtHeaderSlice,
};
use pcapsleuth_core::ip_protocol;
use std::net::IpAddr;

/// An IP header at `off`; `hint` is the version the enclosing layer announced
/// (a mismatching version nibble is [`StopReason::Malformed`]).
pub(crate) fn ip<'b>(
    state: &mut FrameState<'b>,
    buf: &'b [u8],
    off: usize,
    hint: Option<IpVersion>,
) -> DecodeResult<'b> {
    if !state.enter(off) {
        return Ok(());
    }
    let Some(&b0) = buf.get(off) else {
        state.stop(Layer::Ip, off, StopReason::Truncated);
        return Ok(());
    };
    match (b0 >> 4, hint) {
        (4, None | Some(IpVersion::V4)) => ipv4(state, buf, off),
        (6, None | Some(IpVersion::V6)) => ipv6(state, buf, off),
        _ => {
            state.stop(Layer::Ip, off, StopReason::Malformed);
            Ok(())
        }
    }
}

/// Make `header` the innermost header; the previous innermost becomes the
/// outermost if none is recorded yet. When the previous header's transport
/// is UDP, that UDP header is a tunnel's outer header
/// ([`crate::Decoded::outer_udp`], the outermost kept).
fn push_ip(state: &mut FrameState<'_>, header: IpHeader) {
    if let Some(prev) = state.decoded.ip {
        if state.decoded.outer_ip.is_none() {
            state.decoded.outer_ip = Some(prev);
        }
        if let (Transport::Udp(d), None) = (state.decoded.transport, state.decoded.outer_udp) {
            state.decoded.outer_udp = Some(UdpLayer {
                ip: prev,
                src_port: d.src_port,
                dst_port: d.dst_port,
                length: d.length,
            });
        }
    }
    state.decoded.ip = Some(header);
    state.decoded.transport = Transport::None;
}

/// IPv4 header (RFC 791) at `off`, then fragments or the upper layers.
fn ipv4<'b>(state: &mut FrameState<'b>, buf: &'b [u8], off: usize) -> DecodeResult<'b> {
    let rest = subslice(buf, off, buf.len());
    let slice = match Ipv4HeaderSlice::from_slice(rest) {
        Ok(slice) => slice,
        Err(ipv4::HeaderSliceError::Len(_)) => {
            state.stop(Layer::Ip, off, StopReason::Truncated);
            return Ok(());
        }
        Err(ipv4::HeaderSliceError::Content(_)) => {
            state.stop(Layer::Ip, off, StopReason::Malformed);
            return Ok(());
        }
    };
    let header_len = usize::from(slice.ihl()) * 4;
    // Total length 0 means TSO/GSO on the capturing host: like Wireshark'slice
    // `ip.tso_support`, fall back to the captured length.
    let total_len = match usize::from(slice.total_len()) {
        0 if state.wire_end != usize::MAX => state.wire_end.saturating_sub(off),
        0 => rest.len(),
        n => n,
    };
    let fragment_offset = u32::from(slice.fragments_offset().value()) * 8;
    let more = slice.more_fragments();
    let id = u32::from(slice.identification());
    let protocol = slice.protocol().0;
    let fragment = (fragment_offset > 0 || more).then_some(Fragment {
        offset: fragment_offset,
        more,
        id,
    });
    push_ip(
        state,
        IpHeader {
            version: IpVersion::V4,
            src: IpAddr::V4(slice.source_addr()),
            dst: IpAddr::V4(slice.destination_addr()),
            ttl: slice.ttl(),
            ip_id: Some(id),
            total_len: total_len as u32,
            header_len: header_len as u32,
            protocol,
            dont_fragment: slice.dont_fragment(),
            fragment,
        },
    );
    if total_len < header_len {
        state.stop(Layer::Ip, off, StopReason::Malformed);
        return Ok(());
    }
    // Bound by what was on the wire (Wireshark'slice reported length).
    let wire_total = total_len
        .min(state.wire_end.saturating_sub(off))
        .max(header_len);
    state.wire_end = off.saturating_add(wire_total);
    let end = state.wire_end.min(buf.len());
    let payload_len = wire_total - header_len;
    if let Some(fragment) = fragment {
        let payload_off = off + header_len;
        return request_reassembly(
            state,
            buf,
            payload_off,
            end,
            payload_len,
            fragment,
            protocol,
        );
    }
    upper_layers(state, buf, protocol, off + header_len, end, payload_len)
}

/// IPv6 fixed header (RFC 8200) at `off`, then the extension headers and the
/// upper layer.
fn ipv6<'b>(state: &mut FrameState<'b>, buf: &'b [u8], off: usize) -> DecodeResult<'b> {
    let rest = subslice(buf, off, buf.len());
    let slice = match Ipv6HeaderSlice::from_slice(rest) {
        Ok(slice) => slice,
        Err(ipv6::HeaderSliceError::Len(_)) => {
            state.stop(Layer::Ip, off, StopReason::Truncated);
            return Ok(());
        }
        Err(ipv6::HeaderSliceError::Content(_)) => {
            state.stop(Layer::Ip, off, StopReason::Malformed);
            return Ok(());
        }
    };
    // Payload length 0: jumbogram (RFC 2675) or TSO; use the captured length.
    let payload_len = match usize::from(slice.payload_length()) {
        0 if state.wire_end != usize::MAX => state.wire_end.saturating_sub(off + 40),
        0 => rest.len() - 40,
        n => n,
    };
    let next_header = slice.next_header().0;
    push_ip(
        state,
        IpHeader {
            version: IpVersion::V6,
            src: IpAddr::V6(slice.source_addr()),
            dst: IpAddr::V6(slice.destination_addr()),
            ttl: slice.hop_limit(),
            ip_id: None,
            total_len: (40 + payload_len) as u32,
            header_len: 40,
            protocol: next_header,
            dont_fragment: false,
            fragment: None,
        },
    );
    let payload_len = payload_len.min(state.wire_end.saturating_sub(off + 40));
    state.wire_end = off.saturating_add(40 + payload_len);
    let end = state.wire_end.min(buf.len());
    upper_layers(state, buf, next_header, off + 40, end, payload_len)
}

/// Walk extension headers starting with protocol number `protocol` at `off` (IPv6:
/// hop-by-hop, routing, destination options, mobility, HIP, shim6, fragment;
/// both versions: AH), then decode the transport. `end` bounds the captured
/// bytes of this datagram, `payload_len` is the payload length the header announced.
pub(crate) fn upper_layers<'b>(
    state: &mut FrameState<'b>,
    buf: &'b [u8],
    mut protocol: u8,
    mut off: usize,
    end: usize,
    mut payload_len: usize,
) -> DecodeResult<'b> {
    let is_v6 = state.ip_version() == Some(IpVersion::V6);
    loop {
        let rest = subslice(buf, off, end);
        let (next, ext_len) = match protocol {
            ip_protocol::HOPOPT
            | ip_protocol::IPV6_ROUTING
            | ip_protocol::IPV6_DSTOPTS
            | ip_protocol::MOBILITY
            | ip_protocol::HIP
            | ip_protocol::SHIM6
                if is_v6 =>
            {
                match Ipv6RawExtHeaderSlice::from_slice(rest) {
                    Ok(slice) => (slice.next_header().0, slice.slice().len()),
                    Err(_) => {
                        state.stop(Layer::Ip, off, StopReason::Truncated);
                        return Ok(());
                    }
                }
            }
            ip_protocol::AH => match IpAuthHeaderSlice::from_slice(rest) {
                Ok(slice) => (slice.next_header().0, slice.slice().len()),
                Err(err) => {
                    let reason = match err {
                        ip_auth::HeaderSliceError::Len(_) => StopReason::Truncated,
                        ip_auth::HeaderSliceError::Content(_) => StopReason::Malformed,
                    };
                    state.stop(Layer::Ip, off, reason);
                    return Ok(());
                }
            },
            ip_protocol::IPV6_FRAGMENT if is_v6 => {
                let Ok(slice) = Ipv6FragmentHeaderSlice::from_slice(rest) else {
                    state.stop(Layer::Ip, off, StopReason::Truncated);
                    return Ok(());
                };
                let next = slice.next_header().0;
                let offset = u32::from(slice.fragment_offset().value()) * 8;
                let more = slice.more_fragments();
                let id = slice.identification();
                if let Some(ip_header) = state.decoded.ip.as_mut() {
                    ip_header.header_len = ip_header.header_len.saturating_add(8);
                    ip_header.protocol = next;
                    ip_header.ip_id = Some(id);
                }
                off += 8;
                payload_len = payload_len.saturating_sub(8);
                if offset > 0 || more {
                    return request_reassembly(
                        state,
                        buf,
                        off,
                        end,
                        payload_len,
                        Fragment { offset, more, id },
                        next,
                    );
                }
                // Atomic fragment (RFC 6946): not a fragment.
                protocol = next;
                continue;
            }
            _ => break,
        };
        if let Some(ip_header) = state.decoded.ip.as_mut() {
            ip_header.header_len = ip_header.header_len.saturating_add(ext_len as u32);
            ip_header.protocol = next;
        }
        off += ext_len;
        payload_len = payload_len.saturating_sub(ext_len);
        protocol = next;
    }
    crate::transport::transport(state, buf, protocol, off, end, payload_len)
}

/// A fragment whose payload starts at `off`: ask for reassembly, or stop.
fn request_reassembly<'b>(
    state: &mut FrameState<'b>,
    buf: &'b [u8],
    off: usize,
    end: usize,
    payload_len: usize,
    fragment: Fragment,
    protocol: u8,
) -> DecodeResult<'b> {
    let Some(ip_header) = state.decoded.ip.as_mut() else {
        return Ok(());
    };
    ip_header.fragment = Some(fragment);
    let key = ReassemblyKey {
        src: ip_header.src,
        dst: ip_header.dst,
        // IPv6 fragments are keyed by (src, dst, id) only (RFC 8200 §4.5).
        protocol: if ip_header.version == IpVersion::V4 {
            protocol
        } else {
            0
        },
        id: fragment.id,
    };
    let data = subslice(buf, off, end);
    // Wireshark reassembles only when the whole payload the IP header
    // announces is captured (`tvb_bytes_exist`); otherwise it dissects the
    // transport of a first fragment as it is (`packet-ip.c`: "First
    // fragment, or not fragmented. Dissect what we have here"). Only its UDP
    // header is recorded, for `udp.stream`; the transport stays `None`.
    let announced = ip_header.total_len.saturating_sub(ip_header.header_len) as usize;
    let header = *ip_header;
    if fragment.offset == 0
        && protocol == ip_protocol::UDP
        && !state.in_reassembled_datagram
        && data.len() < announced
    {
        state.decoded.first_fragment_udp = crate::transport::udp_layer(header, data);
    }
    if state.in_reassembled_datagram || data.len() < payload_len {
        // Nested fragmentation, or a fragment cut by the snaplen: cannot be
        // reassembled.
        state.stop(Layer::Ip, off, StopReason::Fragment);
        return Ok(());
    }
    Err(ReassemblyRequest {
        key,
        offset: fragment.offset,
        more: fragment.more,
        data: subslice(data, 0, payload_len),
        protocol,
        frame_offset: off,
    })
}
