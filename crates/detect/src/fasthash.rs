//! A fast hasher for maps keyed by numbers the pipeline itself assigns.
//!
//! `std`'s SipHash resists hash flooding but costs tens of ns per lookup, and
//! detectors look up per-stream state on every segment. Keys such as
//! [`pcapsleuth_core::StreamId`] (a counter) and frame numbers are chosen by
//! us, not by the capture, so a multiply-rotate hash (the `FxHasher` of
//! rustc's `rustc-hash`) is safe for them. Do **not** key [`StreamMap`] by
//! anything taken from packet bytes (addresses, ports, sequence numbers):
//! for those use `foldhash::HashMap` (randomly seeded, as std's, and much
//! cheaper than SipHash on short keys; `dns-timeout` and `dual-stack-latency`
//! key names, addresses and message bytes with it), and
//! `foldhash::quality::FixedState` where a hash value itself must be the
//! same run after run (a fingerprint that decides what is a copy).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// `FxHasher` (rustc-hash 1.x): `h = (h.rotl(5) ^ word) * K` per word.
#[derive(Debug, Default, Clone, Copy)]
pub struct StreamHasher {
    hash: u64,
}

/// The multiplier of rustc-hash's 64-bit `FxHasher`.
const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl StreamHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for StreamHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// `HashMap` with [`StreamHasher`]: for keys the pipeline assigns (stream
/// ids, directions, frame numbers). Create with `StreamMap::default()`.
pub type StreamMap<K, V> = HashMap<K, V, BuildHasherDefault<StreamHasher>>;

/// `HashSet` with [`StreamHasher`] (same key rules as [`StreamMap`]).
pub type StreamSet<K> = HashSet<K, BuildHasherDefault<StreamHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_map_works_and_spreads_keys() {
        let mut m: StreamMap<(u32, usize), u32> = StreamMap::default();
        for s in 0..1000u32 {
            m.insert((s, (s % 2) as usize), s * 3);
        }
        assert_eq!(m.len(), 1000);
        assert_eq!(m.get(&(501, 1)), Some(&1503));
        assert_eq!(m.get(&(501, 0)), None);
        // Distinct small keys hash apart.
        let h = |v: u64| {
            let mut x = StreamHasher::default();
            x.write_u64(v);
            x.finish()
        };
        assert_ne!(h(1), h(2));
        let mut a = StreamHasher::default();
        a.write(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        let mut b = StreamHasher::default();
        b.write(&[1, 2, 3, 4, 5, 6, 7, 8, 10]);
        assert_ne!(a.finish(), b.finish());
    }
}
