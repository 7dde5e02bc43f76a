//! Bounded IP reassembly (IPv4 and IPv6 fragments).
//!
//! Datagrams are keyed by (src, dst, protocol, id) (IPv6: protocol 0, as
//! RFC 8200 §4.5 keys by addresses and identification only). Received bytes
//! are tracked in 8-byte blocks (the fragment-offset unit). At most
//! [`MAX_DATAGRAMS`] datagrams are in progress; a new one evicts the oldest.
//! Overlapping fragments overwrite earlier bytes. No timeouts: the decoder
//! sees no timestamps, and eviction bounds memory anyway.
//!
//! Memory is only allocated when fragments arrive, never on the
//! non-fragment path.

use crate::decoder::ReassemblyRequest;
use std::net::IpAddr;

/// Datagrams reassembled concurrently; older ones are evicted.
pub const MAX_DATAGRAMS: usize = 64;
/// Largest reassembled IP payload, bytes (IPv4/IPv6 length fields are 16-bit).
pub const MAX_DATAGRAM_LEN: usize = 65_535;

const BLOCKS_PER_DATAGRAM: usize = MAX_DATAGRAM_LEN.div_ceil(8);
const BITMAP_WORDS: usize = BLOCKS_PER_DATAGRAM.div_ceil(64);

/// Reassembly key: which fragments belong to one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReassemblyKey {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// IPv4 protocol number; 0 for IPv6.
    pub protocol: u8,
    /// IPv4 identification or IPv6 fragment header identification.
    pub id: u32,
}

/// One datagram being reassembled.
#[derive(Debug)]
struct Slot {
    key: ReassemblyKey,
    /// The payload bytes received so far (gaps are zero).
    buf: Vec<u8>,
    /// One bit per 8-byte block received.
    received_blocks: Vec<u64>,
    /// Payload length, known once the last fragment (MF = 0) arrived.
    total: Option<usize>,
    /// Protocol announced by the offset-0 fragment.
    first_protocol: Option<u8>,
    /// Insertion order, for eviction.
    created: u64,
}

/// The reassembly table.
#[derive(Debug, Default)]
pub(crate) struct Reassembler {
    slots: Vec<Slot>,
    /// Counter stamped on each new slot (its age, for eviction).
    clock: u64,
    /// The payload of the datagram completed last.
    completed_payload: Vec<u8>,
}

impl Reassembler {
    /// Add one fragment. Returns the upper-layer protocol when this fragment
    /// completes its datagram; the payload is then in [`Self::completed`].
    pub fn insert(&mut self, req: &ReassemblyRequest<'_>) -> Option<u8> {
        let start = req.offset as usize;
        let end = start.checked_add(req.data.len())?;
        if end > MAX_DATAGRAM_LEN {
            self.slots.retain(|s| s.key != req.key);
            return None;
        }
        let idx = match self.slots.iter().position(|s| s.key == req.key) {
            Some(i) => i,
            None => {
                if self.slots.len() >= MAX_DATAGRAMS {
                    let oldest = self
                        .slots
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, s)| s.created)
                        .map(|(i, _)| i)?;
                    self.slots.swap_remove(oldest);
                }
                self.clock += 1;
                self.slots.push(Slot {
                    key: req.key,
                    buf: Vec::new(),
                    received_blocks: vec![0; BITMAP_WORDS],
                    total: None,
                    first_protocol: None,
                    created: self.clock,
                });
                self.slots.len() - 1
            }
        };
        let slot = self.slots.get_mut(idx)?;
        if slot.buf.len() < end {
            slot.buf.resize(end, 0);
        }
        slot.buf.get_mut(start..end)?.copy_from_slice(req.data);
        for b in start / 8..end.div_ceil(8) {
            if let Some(w) = slot.received_blocks.get_mut(b / 64) {
                *w |= 1 << (b % 64);
            }
        }
        if start == 0 {
            slot.first_protocol = Some(req.protocol);
        }
        if !req.more {
            slot.total = Some(end);
        }
        let total = slot.total?;
        let protocol = slot.first_protocol?;
        let blocks = total.div_ceil(8);
        let complete = (0..blocks).all(|b| {
            slot.received_blocks
                .get(b / 64)
                .is_some_and(|w| w & (1 << (b % 64)) != 0)
        });
        if !complete {
            return None;
        }
        let mut slot = self.slots.swap_remove(idx);
        slot.buf.truncate(total);
        std::mem::swap(&mut self.completed_payload, &mut slot.buf);
        Some(protocol)
    }

    /// The payload of the datagram completed by the last successful
    /// [`Self::insert`].
    pub fn completed(&self) -> &[u8] {
        &self.completed_payload
    }

    /// Datagrams in progress.
    #[cfg(test)]
    fn in_progress(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn req(id: u32, offset: u32, more: bool, data: &[u8]) -> ReassemblyRequest<'_> {
        let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        ReassemblyRequest {
            key: ReassemblyKey {
                src: a,
                dst: a,
                protocol: 6,
                id,
            },
            offset,
            more,
            data,
            protocol: 6,
            frame_offset: 0,
        }
    }

    #[test]
    fn bounded_and_completes() {
        let mut r = Reassembler::default();
        for id in 0..200 {
            assert_eq!(r.insert(&req(id, 0, true, &[1; 8])), None);
        }
        assert_eq!(r.in_progress(), MAX_DATAGRAMS);
        assert_eq!(r.insert(&req(199, 8, false, &[2; 3])), Some(6));
        assert_eq!(r.completed(), &[1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2]);
        assert_eq!(r.in_progress(), MAX_DATAGRAMS - 1);
        // Evicted: id 0 never completes.
        assert_eq!(r.insert(&req(0, 8, false, &[2; 3])), None);
    }

    #[test]
    fn gap_does_not_complete_and_oversize_is_dropped() {
        let mut r = Reassembler::default();
        assert_eq!(r.insert(&req(1, 0, true, &[0; 16])), None);
        assert_eq!(r.insert(&req(1, 24, false, &[0; 8])), None);
        assert_eq!(r.insert(&req(1, 16, true, &[0; 8])), Some(6));
        assert_eq!(r.completed().len(), 32);
        assert_eq!(r.insert(&req(2, 65_528, false, &[0; 16])), None);
        assert_eq!(r.in_progress(), 0);
    }
}
