//! Optional integers in the integer's own 8 bytes: one value no field ever
//! holds stands for "none" (an `Option<i64>` takes 16). For per-stream
//! state held for every open flow, where 8 bytes a field add up (the stall
//! ledger's stream: 152 bytes of 632).
//!
//! The sentinels: `i64::MIN` for [`OptI64`] and [`OptTimestamp`] (a
//! relative sequence number, a duration or a capture time in ns since the
//! epoch never reaches −2⁶³), `u64::MAX` for [`OptU64`] (a window in bytes
//! is at most 2³⁰, RFC 7323 §2.3). [`OptI64::some`] of the sentinel itself
//! gives none.

use crate::Timestamp;

/// An `Option<i64>` in 8 bytes (`i64::MIN` is none).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OptI64(i64);

impl OptI64 {
    /// None.
    pub const NONE: OptI64 = OptI64(i64::MIN);

    /// `v` (none if `v` is `i64::MIN`).
    pub const fn some(v: i64) -> OptI64 {
        OptI64(v)
    }

    /// The value, if any.
    pub const fn get(self) -> Option<i64> {
        if self.0 == i64::MIN {
            None
        } else {
            Some(self.0)
        }
    }

    /// The value, if any, leaving none in its place.
    pub fn take(&mut self) -> Option<i64> {
        std::mem::replace(self, OptI64::NONE).get()
    }
}

impl Default for OptI64 {
    fn default() -> Self {
        OptI64::NONE
    }
}

impl From<Option<i64>> for OptI64 {
    fn from(v: Option<i64>) -> Self {
        v.map_or(OptI64::NONE, OptI64::some)
    }
}

impl std::fmt::Debug for OptI64 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

/// An `Option<Timestamp>` in 8 bytes (`i64::MIN` ns is none).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OptTimestamp(i64);

impl OptTimestamp {
    /// None.
    pub const NONE: OptTimestamp = OptTimestamp(i64::MIN);

    /// `t` (none if it is `i64::MIN` ns).
    pub const fn some(t: Timestamp) -> OptTimestamp {
        OptTimestamp(t.0)
    }

    /// The timestamp, if any.
    pub const fn get(self) -> Option<Timestamp> {
        if self.0 == i64::MIN {
            None
        } else {
            Some(Timestamp(self.0))
        }
    }

    /// The value, if any, leaving none in its place.
    pub fn take(&mut self) -> Option<Timestamp> {
        std::mem::replace(self, OptTimestamp::NONE).get()
    }
}

impl Default for OptTimestamp {
    fn default() -> Self {
        OptTimestamp::NONE
    }
}

impl From<Option<Timestamp>> for OptTimestamp {
    fn from(v: Option<Timestamp>) -> Self {
        v.map_or(OptTimestamp::NONE, OptTimestamp::some)
    }
}

impl std::fmt::Debug for OptTimestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

/// An `Option<u64>` in 8 bytes (`u64::MAX` is none).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OptU64(u64);

impl OptU64 {
    /// None.
    pub const NONE: OptU64 = OptU64(u64::MAX);

    /// `v` (none if `v` is `u64::MAX`).
    pub const fn some(v: u64) -> OptU64 {
        OptU64(v)
    }

    /// The value, if any.
    pub const fn get(self) -> Option<u64> {
        if self.0 == u64::MAX {
            None
        } else {
            Some(self.0)
        }
    }

    /// The value, if any, leaving none in its place.
    pub fn take(&mut self) -> Option<u64> {
        std::mem::replace(self, OptU64::NONE).get()
    }
}

impl Default for OptU64 {
    fn default() -> Self {
        OptU64::NONE
    }
}

impl From<Option<u64>> for OptU64 {
    fn from(v: Option<u64>) -> Self {
        v.map_or(OptU64::NONE, OptU64::some)
    }
}

impl std::fmt::Debug for OptU64 {
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
