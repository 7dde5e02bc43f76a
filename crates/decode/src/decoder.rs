//! The decoder: shared decoding state, byte helpers and the entry point.
//!
//! Decoding is a bounded recursive descent over one byte buffer: link layer →
//! ethertype → IP → (tunnel → ethertype/IP)* → transport. Every step works on
//! checked slices, never allocates, and records a [`DecodeStop`] instead of
//! failing. The only state kept across frames is the IP reassembler
//! ([`crate::reassembly`]).

use crate::reassembly::{Reassembler, ReassemblyKey};
use crate::{DecodeStop, Decoded, IpVersion, Layer, StopReason};

/// Maximum number of nested decoding steps (IP headers, Ethernet headers,
/// tunnel headers) in one frame; deeper nesting stops with
/// [`StopReason::Malformed`] at [`Layer::Tunnel`].
pub(crate) const MAX_DEPTH: u8 = 24;

/// Stateful packet decoder (state = bounded IP reassembly buffers).
///
/// Memory: at most [`crate::reassembly::MAX_DATAGRAMS`] datagrams of at most
/// [`crate::reassembly::MAX_DATAGRAM_LEN`] bytes each are buffered.
#[derive(Debug, Default)]
pub struct Decoder {
    reassembler: Reassembler,
}

impl Decoder {
    /// A decoder with empty reassembly state.
    pub fn new() -> Self {
        Decoder::default()
    }

    /// Decode one frame of link type `linktype` (a LINKTYPE_* number, see
    /// [`pcapsleuth_core::linktype`]).
    /// Never panics; see [`Decoded::stop`] for partial results.
    ///
    /// When the frame is an IP fragment that completes a datagram, the
    /// transport is decoded from the reassembled datagram (held in a buffer
    /// owned by the decoder, hence the `&'a mut self` borrow), as Wireshark
    /// does with `ip.defragment` / `ipv6.defragment` on: `ip` is then this
    /// frame's own header (its `fragment` still set). Other fragments stop with
    /// [`StopReason::Fragment`] and [`crate::Transport::None`].
    pub fn decode<'a>(&'a mut self, linktype: u32, data: &'a [u8]) -> Decoded<'a> {
        self.decode_frame(linktype, data, None)
    }

    /// As [`Decoder::decode`], also given the frame's length on the wire
    /// (`frame.len`, the ingest `Frame::orig_len`, bytes).
    ///
    /// Payload lengths are then bounded by the wire length as Wireshark bounds
    /// them by the reported length of its tvb: an IPv4 total length larger
    /// than the frame ("IPv4 total length exceeds packet length") yields the
    /// TCP `payload_len` Wireshark shows as `tcp.len`. `total_len` fields still
    /// hold the header values. With `None` this is exactly `decode`.
    pub fn decode_frame<'a>(
        &'a mut self,
        linktype: u32,
        data: &'a [u8],
        wire_len: Option<u32>,
    ) -> Decoded<'a> {
        let mut state = FrameState::new();
        if let Some(wire_len) = wire_len {
            state.wire_end = usize::try_from(wire_len)
                .unwrap_or(usize::MAX)
                .max(data.len());
        }
        let request = match crate::link::link(&mut state, linktype, data) {
            Ok(()) => return state.decoded,
            Err(request) => request,
        };
        let fragment_payload_at = request.frame_offset;
        let Some(protocol) = self.reassembler.insert(&request) else {
            state.stop(Layer::Ip, fragment_payload_at, StopReason::Fragment);
            return state.decoded;
        };
        let this: &'a Decoder = self;
        let datagram: &'a [u8] = this.reassembler.completed();
        state.in_reassembled_datagram = true;
        state.wire_end = usize::MAX;
        state.stop_offset_base = u32::try_from(fragment_payload_at).unwrap_or(u32::MAX);
        if let Some(ip) = state.decoded.ip.as_mut() {
            ip.protocol = protocol;
        }
        // In reassembly mode nested fragments stop instead of asking for more
        // reassembly, so this cannot return `Err`.
        let len = datagram.len();
        let _ = crate::ip::upper_layers(&mut state, datagram, protocol, 0, len, len);
        state.decoded
    }
}

/// A fragment the decoder must hand to the reassembler (the `Err` of
/// [`DecodeResult`]).
#[derive(Debug)]
pub(crate) struct ReassemblyRequest<'b> {
    /// Reassembly key.
    pub key: ReassemblyKey,
    /// Fragment offset in bytes.
    pub offset: u32,
    /// More-fragments flag.
    pub more: bool,
    /// The fragment's payload bytes (fully captured).
    pub data: &'b [u8],
    /// Upper-layer protocol announced by this fragment.
    pub protocol: u8,
    /// Frame offset of the fragment payload (for [`DecodeStop::offset`]).
    pub frame_offset: usize,
}

/// Outcome of decoding one layer and everything inside it: `Ok` when the
/// frame is done (fully decoded or stopped, see [`FrameState::stop`]), `Err`
/// carrying a fragment that needs reassembly; decoding of the frame pauses
/// there.
pub(crate) type DecodeResult<'b> = Result<(), ReassemblyRequest<'b>>;

/// Decoding state of one frame.
pub(crate) struct FrameState<'b> {
    /// What has been decoded so far (the result).
    pub decoded: Decoded<'b>,
    /// Nesting steps taken so far (see [`MAX_DEPTH`]).
    depth: u8,
    /// Added to buffer offsets when reporting a stop (non-zero inside a
    /// reassembled datagram).
    pub stop_offset_base: u32,
    /// True while decoding a reassembled datagram (no nested reassembly).
    pub in_reassembled_datagram: bool,
    /// End of the bytes that were on the wire, in buffer coordinates
    /// (`usize::MAX` when unknown); narrowed by each length field passed
    /// (IP total length, PPPoE length, UDP length), like Wireshark's
    /// reported tvb length.
    pub wire_end: usize,
}

impl<'b> FrameState<'b> {
    fn new() -> Self {
        FrameState {
            decoded: Decoded::default(),
            depth: 0,
            stop_offset_base: 0,
            in_reassembled_datagram: false,
            wire_end: usize::MAX,
        }
    }

    /// Record where and why decoding stopped.
    pub fn stop(&mut self, layer: Layer, off: usize, reason: StopReason) {
        let off = u32::try_from(off).unwrap_or(u32::MAX);
        self.decoded.stop = Some(DecodeStop {
            layer,
            offset: self.stop_offset_base.saturating_add(off),
            reason,
        });
    }

    /// Count one nesting step; false (with a stop recorded) when too deep.
    pub fn enter(&mut self, off: usize) -> bool {
        self.depth = self.depth.saturating_add(1);
        if self.depth > MAX_DEPTH {
            self.stop(Layer::Tunnel, off, StopReason::Malformed);
            return false;
        }
        true
    }

    /// The layer to blame for a link-level problem: [`Layer::Link`] before
    /// the first IP header, [`Layer::Tunnel`] inside an encapsulation.
    pub fn link_layer(&self) -> Layer {
        if self.decoded.ip.is_some() {
            Layer::Tunnel
        } else {
            Layer::Link
        }
    }

    /// Version of the current (innermost) IP header.
    pub fn ip_version(&self) -> Option<IpVersion> {
        self.decoded.ip.map(|h| h.version)
    }
}

/// `buf[start..end]`, or an empty slice when the range is not inside `buf`.
#[inline]
pub(crate) fn subslice(buf: &[u8], start: usize, end: usize) -> &[u8] {
    buf.get(start..end).unwrap_or(&[])
}

/// Big-endian u16 at `off`, if present.
#[inline]
pub(crate) fn read_u16_be(buf: &[u8], off: usize) -> Option<u16> {
    let bytes = buf.get(off..off.checked_add(2)?)?;
    Some(u16::from_be_bytes([bytes[0], bytes[1]]))
}

/// Big-endian u32 at `off`, if present.
#[inline]
pub(crate) fn read_u32_be(buf: &[u8], off: usize) -> Option<u32> {
    let bytes = buf.get(off..off.checked_add(4)?)?;
    Some(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}
