//! The decoder: shared decoding state, byte helpers and the entry point.
//!
//! Decoding is a bounded recursive descent over one byte buffer: link layer →
//! ethertype → IP → (tunnel → ethertype/IP)* → transport. Every step works on
//! checked slices, never allocates, and records a [`DecodeStop`] instead of
//! failing. The only state kept across frames is the IP reassembler
//! ([`crate::reassembly`]).

use crate::reassembly::{FragKey, Reassembler};
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
    reasm: Reassembler,
}

impl Decoder {
    /// A decoder with empty reassembly state.
    pub fn new() -> Self {
        Decoder::default()
    }

    /// Decode one frame of link type `linktype` (a LINKTYPE_* number).
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
        let mut st = St::new();
        if let Some(w) = wire_len {
            st.wire_end = usize::try_from(w).unwrap_or(usize::MAX).max(data.len());
        }
        let req = match crate::link::link(&mut st, linktype, data) {
            Ok(()) => return st.d,
            Err(req) => req,
        };
        let stop_at = req.frame_off;
        let Some(proto) = self.reasm.insert(&req) else {
            st.stop(Layer::Ip, stop_at, StopReason::Fragment);
            return st.d;
        };
        let this: &'a Decoder = self;
        let buf: &'a [u8] = this.reasm.completed();
        st.in_reasm = true;
        st.wire_end = usize::MAX;
        st.base = u32::try_from(stop_at).unwrap_or(u32::MAX);
        if let Some(ip) = st.d.ip.as_mut() {
            ip.protocol = proto;
        }
        // In reassembly mode nested fragments stop instead of asking for more
        // reassembly, so this cannot return `Err`.
        let _ = crate::ip::upper(&mut st, buf, proto, 0, buf.len(), buf.len());
        st.d
    }
}

/// A fragment the decoder must hand to the reassembler.
#[derive(Debug)]
pub(crate) struct FragReq<'b> {
    /// Reassembly key.
    pub key: FragKey,
    /// Fragment offset in bytes.
    pub offset: u32,
    /// More-fragments flag.
    pub more: bool,
    /// The fragment's payload bytes (fully captured).
    pub data: &'b [u8],
    /// Upper-layer protocol announced by this fragment.
    pub proto: u8,
    /// Frame offset of the fragment payload (for [`DecodeStop::offset`]).
    pub frame_off: usize,
}

/// `Err` carries a fragment that needs reassembly; decoding of the frame
/// pauses there.
pub(crate) type Res<'b> = Result<(), FragReq<'b>>;

/// Decoding state of one frame.
pub(crate) struct St<'b> {
    pub d: Decoded<'b>,
    depth: u8,
    /// Added to buffer offsets when reporting a stop (non-zero inside a
    /// reassembled datagram).
    pub base: u32,
    /// True while decoding a reassembled datagram (no nested reassembly).
    pub in_reasm: bool,
    /// End of the bytes that were on the wire, in buffer coordinates
    /// (`usize::MAX` when unknown); narrowed by each length field passed
    /// (IP total length, PPPoE length, UDP length), like Wireshark's
    /// reported tvb length.
    pub wire_end: usize,
}

impl<'b> St<'b> {
    fn new() -> Self {
        St {
            d: Decoded::default(),
            depth: 0,
            base: 0,
            in_reasm: false,
            wire_end: usize::MAX,
        }
    }

    /// Record where and why decoding stopped.
    pub fn stop(&mut self, layer: Layer, off: usize, reason: StopReason) {
        let off = u32::try_from(off).unwrap_or(u32::MAX);
        self.d.stop = Some(DecodeStop {
            layer,
            offset: self.base.saturating_add(off),
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
        if self.d.ip.is_some() {
            Layer::Tunnel
        } else {
            Layer::Link
        }
    }

    /// Version of the current (innermost) IP header.
    pub fn ip_version(&self) -> Option<IpVersion> {
        self.d.ip.map(|h| h.version)
    }
}

/// `buf[a..b]`, or an empty slice when the range is not inside `buf`.
#[inline]
pub(crate) fn sl(buf: &[u8], a: usize, b: usize) -> &[u8] {
    buf.get(a..b).unwrap_or(&[])
}

/// Big-endian u16 at `off`, if present.
#[inline]
pub(crate) fn be16(buf: &[u8], off: usize) -> Option<u16> {
    let b = buf.get(off..off.checked_add(2)?)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

/// Big-endian u32 at `off`, if present.
#[inline]
pub(crate) fn be32(buf: &[u8], off: usize) -> Option<u32> {
    let b = buf.get(off..off.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}
