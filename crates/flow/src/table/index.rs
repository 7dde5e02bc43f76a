//! The conversation index: unordered address/port pair → record index.
//!
//! Open addressing with linear probing over 8-byte buckets (a 32-bit hash
//! tag and the record index); the key itself lives in the record (its client
//! and server endpoints), so an entry costs 8 bytes at capacity instead of
//! the 45 of a `HashMap<FlowKey, usize>` bucket. Entries are never removed
//! (a retired `tcp.stream` keeps its id for late packets), only repointed
//! when a newer stream takes the pair. The hash is a multiply-xor mix of the
//! addresses and ports (FxHash-style, not SipHash: the input is a capture,
//! and a hostile capture can only slow the table down, not corrupt it).

use pcapsleuth_core::{Endpoint, FlowKey};
use std::net::IpAddr;

/// Multiplier of the mix (the golden-ratio constant FxHash uses).
const K: u64 = 0x9e37_79b9_7f4a_7c15;

/// One endpoint as a 64-bit word (IPv6 folded).
fn word(e: &Endpoint) -> u64 {
    let a = match e.addr {
        IpAddr::V4(a) => u64::from(u32::from(a)),
        IpAddr::V6(a) => {
            let v = u128::from(a);
            (v as u64) ^ ((v >> 64) as u64).rotate_left(29) ^ 0x5bd1_e995
        }
    };
    a ^ (u64::from(e.port) << 44).rotate_left(7)
}

/// Hash of an unordered address/port pair (equal for both directions).
pub(crate) fn key_hash(key: &FlowKey) -> u32 {
    let h = (word(&key.lo).wrapping_mul(K).rotate_left(26) ^ word(&key.hi)).wrapping_mul(K);
    // Final avalanche: fold the well-mixed high bits down.
    ((h >> 32) ^ (h >> 5)) as u32
}

/// Bucket: `slot` is the record index + 1 (0 = empty).
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    tag: u32,
    slot: u32,
}

/// Pair → record index, for keys whose endpoints the caller can read back
/// from its records (see the module documentation).
#[derive(Debug, Clone, Default)]
pub(crate) struct ConvIndex {
    buckets: Vec<Bucket>,
    len: usize,
}

impl ConvIndex {
    /// Heap bytes (buckets at capacity).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<Bucket>()
    }

    /// The record index stored for the key with hash `tag`, where `is_key`
    /// tells whether a record index holds that key.
    pub(crate) fn get(&self, tag: u32, is_key: impl Fn(usize) -> bool) -> Option<usize> {
        let n = self.buckets.len();
        if n == 0 {
            return None;
        }
        let mask = n - 1;
        let mut i = tag as usize & mask;
        loop {
            let b = self.buckets[i];
            if b.slot == 0 {
                return None;
            }
            let idx = (b.slot - 1) as usize;
            if b.tag == tag && is_key(idx) {
                return Some(idx);
            }
            i = (i + 1) & mask;
        }
    }

    /// Point the key with hash `tag` at record `idx` (replacing the record
    /// `is_key` recognises, or adding an entry). Indices must be below
    /// `u32::MAX`.
    pub(crate) fn set(&mut self, tag: u32, idx: usize, is_key: impl Fn(usize) -> bool) {
        if (self.len + 1) * 8 > self.buckets.len() * 7 {
            self.grow();
        }
        let mask = self.buckets.len() - 1;
        let mut i = tag as usize & mask;
        let slot = u32::try_from(idx + 1).unwrap_or(u32::MAX);
        loop {
            let b = &mut self.buckets[i];
            if b.slot == 0 {
                *b = Bucket { tag, slot };
                self.len += 1;
                return;
            }
            if b.tag == tag && is_key((b.slot - 1) as usize) {
                b.slot = slot;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Double the bucket array (at least 16) and re-insert by tag.
    fn grow(&mut self) {
        let cap = (self.buckets.len() * 2).max(16);
        let old = std::mem::replace(&mut self.buckets, vec![Bucket::default(); cap]);
        let mask = cap - 1;
        for b in old.into_iter().filter(|b| b.slot != 0) {
            let mut i = b.tag as usize & mask;
            while self.buckets[i].slot != 0 {
                i = (i + 1) & mask;
            }
            self.buckets[i] = b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ep(i: u32, port: u16) -> Endpoint {
        Endpoint {
            addr: IpAddr::V4(Ipv4Addr::from(i)),
            port,
        }
    }

    #[test]
    fn finds_repoints_and_grows() {
        let keys: Vec<FlowKey> = (0..5000u32)
            .map(|i| FlowKey::new(ep(i, 80), ep(7, (i % 3) as u16)))
            .collect();
        let mut ix = ConvIndex::default();
        for (i, k) in keys.iter().enumerate() {
            ix.set(key_hash(k), i, |j| keys[j] == *k);
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(ix.get(key_hash(k), |j| keys[j] == *k), Some(i));
        }
        // Repoint key 42 at a "newer record" 42 + 5000 that holds the same key.
        let k = keys[42];
        let holds = |j: usize| keys[j % 5000] == k;
        ix.set(key_hash(&k), 5042, holds);
        assert_eq!(ix.get(key_hash(&k), holds), Some(5042));
        assert_eq!(ix.len, 5000);
        let absent = FlowKey::new(ep(1, 1), ep(2, 2));
        assert_eq!(ix.get(key_hash(&absent), |j| keys[j] == absent), None);
        assert_eq!(
            key_hash(&FlowKey::new(ep(1, 2), ep(3, 4))),
            key_hash(&FlowKey::new(ep(3, 4), ep(1, 2)))
        );
    }
}
