//! Optional integers in the integer's own 8 bytes: one value no field ever
//! holds stands for "none" (an `Option<i64>` takes 16). For per-stream
//! state held for every open flow, where 8 bytes a field add up (the stall
//! ledger's stream: 136 bytes of 632).
//!
//! The sentinels ([`Sentinel::NONE`]): `i64::MIN` for [`OptI64`] and
//! [`OptTimestamp`] (a relative sequence number, a duration or a capture
//! time in ns since the epoch never reaches −2⁶³), `u64::MAX` for
//! [`OptU64`] (a window in bytes is at most 2³⁰, RFC 7323 §2.3).
//! [`Opt::some`] of the sentinel itself gives none.

use crate::Timestamp;

/// A type with a value that stands for "none" in an [`Opt`].
pub trait Sentinel: Copy + PartialEq {
    /// The value that means none.
    const NONE: Self;
}

impl Sentinel for i64 {
    const NONE: i64 = i64::MIN;
}

impl Sentinel for u64 {
    const NONE: u64 = u64::MAX;
}

impl Sentinel for Timestamp {
    const NONE: Timestamp = Timestamp(i64::MIN);
}

/// An `Option<T>` in the size of `T`: [`Sentinel::NONE`] is none.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Opt<T>(T);

/// An `Option<i64>` in 8 bytes (`i64::MIN` is none).
pub type OptI64 = Opt<i64>;
/// An `Option<u64>` in 8 bytes (`u64::MAX` is none).
pub type OptU64 = Opt<u64>;
/// An `Option<Timestamp>` in 8 bytes (`i64::MIN` ns is none).
pub type OptTimestamp = Opt<Timestamp>;

impl<T: Sentinel> Opt<T> {
    /// None.
    pub const NONE: Opt<T> = Opt(T::NONE);

    /// `v` (none if `v` is the sentinel).
    pub const fn some(v: T) -> Opt<T> {
        Opt(v)
    }

    /// The value, if any.
    pub fn get(self) -> Option<T> {
        (self.0 != T::NONE).then_some(self.0)
    }

    /// The value, if any, leaving none in its place.
    pub fn take(&mut self) -> Option<T> {
        std::mem::replace(self, Opt::NONE).get()
    }
}

impl<T: Sentinel> Default for Opt<T> {
    fn default() -> Self {
        Opt::NONE
    }
}

impl<T: Sentinel> From<Option<T>> for Opt<T> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Opt::NONE, Opt::some)
    }
}

impl<T: Sentinel + std::fmt::Debug> std::fmt::Debug for Opt<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_value_but_the_sentinel() {
        for v in [i64::MIN + 1, -1, 0, 1, 1_795_000_000_000_000_000, i64::MAX] {
            assert_eq!(OptI64::some(v).get(), Some(v));
            assert_eq!(OptI64::from(Some(v)).get(), Some(v));
            assert_eq!(OptTimestamp::some(Timestamp(v)).get(), Some(Timestamp(v)));
        }
        for v in [0, 1, 1 << 30, u64::MAX - 1] {
            assert_eq!(OptU64::some(v).get(), Some(v));
        }
        assert_eq!(OptI64::default().get(), None);
        assert_eq!(OptI64::from(None).get(), None);
        assert_eq!(OptI64::some(i64::MIN).get(), None);
        assert_eq!(OptTimestamp::default().get(), None);
        assert_eq!(OptU64::default().get(), None);
        assert_eq!(OptU64::some(u64::MAX).get(), None);
        let mut t = OptTimestamp::some(Timestamp(5));
        assert_eq!((t.take(), t.get()), (Some(Timestamp(5)), None));
        let mut v = OptI64::some(-3);
        assert_eq!((v.take(), v.take()), (Some(-3), None));
        let mut w = OptU64::some(9);
        assert_eq!((w.take(), w), (Some(9), OptU64::NONE));
        assert_eq!(format!("{:?}", OptI64::some(-4)), "Some(-4)");
        assert_eq!(format!("{:?}", OptU64::NONE), "None");
        assert_eq!(std::mem::size_of::<OptI64>(), 8);
        assert_eq!(std::mem::size_of::<OptTimestamp>(), 8);
    }
}
