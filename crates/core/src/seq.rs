//! TCP sequence numbers with RFC 1982 serial-number arithmetic.

use serde::{Deserialize, Serialize};

/// A raw 32-bit TCP sequence or acknowledgement number.
///
/// Comparisons use RFC 1982 serial arithmetic (`SERIAL_BITS = 32`): `a` is
/// before `b` when `(b - a) mod 2^32` is in `1..2^31`. The type has no `Ord`
/// because that order is not transitive; use [`SeqNum::lt`] and friends, or
/// convert to a 64-bit relative offset with [`SeqNum::offset_from`] once an
/// ISN is known (Zeek's approach).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SeqNum(pub u32);

impl SeqNum {
    /// `self + n` modulo 2^32.
    pub const fn add(self, n: u32) -> SeqNum {
        SeqNum(self.0.wrapping_add(n))
    }
    /// `self - n` modulo 2^32.
    pub const fn sub(self, n: u32) -> SeqNum {
        SeqNum(self.0.wrapping_sub(n))
    }
    /// Signed distance `self - other` in the range `-2^31..2^31`.
    pub const fn diff(self, other: SeqNum) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }
    /// RFC 1982 `self < other`. Undefined (false both ways) at distance 2^31.
    pub const fn lt(self, other: SeqNum) -> bool {
        let d = other.0.wrapping_sub(self.0);
        d != 0 && d < 0x8000_0000
    }
    /// `self <= other` in serial order.
    pub const fn le(self, other: SeqNum) -> bool {
        self.0 == other.0 || self.lt(other)
    }
    /// `self > other` in serial order.
    pub const fn gt(self, other: SeqNum) -> bool {
        other.lt(self)
    }
    /// `self >= other` in serial order.
    pub const fn ge(self, other: SeqNum) -> bool {
        self.0 == other.0 || other.lt(self)
    }
    /// Distance from `base` forward to `self` modulo 2^32 (`0..2^32`): the
    /// relative sequence number Wireshark shows when `base` is the ISN.
    pub const fn offset_from(self, base: SeqNum) -> u32 {
        self.0.wrapping_sub(base.0)
    }
}

impl std::fmt::Display for SeqNum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Unwraps 32-bit sequence numbers into a 64-bit stream offset relative to a
/// base (usually ISN+1), following the nearest-neighbour rule: each new value
/// is placed within ±2^31 of the previous one. Bytes, not segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqUnwrapper {
    base: SeqNum,
    last: i64,
}

impl SeqUnwrapper {
    /// Start unwrapping with `base` at offset 0.
    pub const fn new(base: SeqNum) -> Self {
        SeqUnwrapper { base, last: 0 }
    }
    /// The base sequence number (offset 0).
    pub const fn base(&self) -> SeqNum {
        self.base
    }
    /// Offset of `s` from the base, choosing the candidate nearest the last
    /// value returned (so the result may be negative for data before the base).
    pub fn unwrap(&mut self, s: SeqNum) -> i64 {
        let v = self.peek(s);
        self.last = v;
        v
    }
    /// Like [`Self::unwrap`] but does not move the reference point.
    pub fn peek(&self, s: SeqNum) -> i64 {
        let last_raw = self.base.add(self.last as u32);
        self.last + s.diff(last_raw) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wrap_table() {
        let cases: &[(u32, u32, bool)] = &[
            (0, 1, true),
            (u32::MAX, 0, true),
            (u32::MAX - 10, 5, true),
            (5, u32::MAX - 10, false),
            (0, 0x7fff_ffff, true),
            (0, 0x8000_0000, false),
        ];
        for &(a, b, lt) in cases {
            assert_eq!(SeqNum(a).lt(SeqNum(b)), lt, "{a} < {b}");
        }
    }

    proptest! {
        #[test]
        fn serial_order_is_shift_invariant(a: u32, d in 1u32..0x7fff_ffff, shift: u32) {
            let x = SeqNum(a.wrapping_add(shift));
            let y = x.add(d);
            prop_assert!(x.lt(y));
            prop_assert!(y.gt(x));
            prop_assert!(!y.lt(x));
            prop_assert_eq!(y.diff(x), d as i32);
        }

        #[test]
        fn unwrapper_is_monotonic_across_wrap(isn: u32, steps in proptest::collection::vec(0u32..100_000, 1..200)) {
            let mut u = SeqUnwrapper::new(SeqNum(isn));
            let mut raw = SeqNum(isn);
            let mut expect: i64 = 0;
            for s in steps {
                raw = raw.add(s);
                expect += s as i64;
                prop_assert_eq!(u.unwrap(raw), expect);
            }
        }
    }
}
