//! The decoder. (Skeleton: to be implemented.)

use crate::Decoded;

/// Stateful packet decoder (state = bounded IP reassembly buffers).
#[derive(Debug, Default)]
pub struct Decoder {}

impl Decoder {
    /// A decoder with empty reassembly state.
    pub fn new() -> Self {
        Decoder {}
    }

    /// Decode one frame of link type `linktype` (a LINKTYPE_* number).
    /// Never panics; see [`Decoded::stop`] for partial results.
    pub fn decode<'a>(&'a mut self, linktype: u32, data: &'a [u8]) -> Decoded<'a> {
        let _ = (linktype, data);
        Decoded::default()
    }
}
