//! Integer-nanosecond time.

use serde::{Deserialize, Serialize};

/// An instant: nanoseconds since 1970-01-01T00:00:00Z (UTC). Signed so that
/// captures with bogus pre-1970 clocks still order correctly.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

/// A span of time in nanoseconds (may be negative when frames are out of
/// timestamp order, as in multi-interface pcapng files).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct DurationNs(pub i64);

impl Timestamp {
    /// Nanoseconds since the Unix epoch.
    pub const fn as_ns(self) -> i64 {
        self.0
    }
    /// `self - earlier`, saturating.
    pub const fn since(self, earlier: Timestamp) -> DurationNs {
        DurationNs(self.0.saturating_sub(earlier.0))
    }
    /// `self + d`, saturating.
    pub const fn add(self, d: DurationNs) -> Timestamp {
        Timestamp(self.0.saturating_add(d.0))
    }
}

impl DurationNs {
    /// One millisecond.
    pub const MILLISECOND: DurationNs = DurationNs(1_000_000);
    /// One second.
    pub const SECOND: DurationNs = DurationNs(1_000_000_000);
    /// Build from whole milliseconds.
    pub const fn from_ms(ms: i64) -> Self {
        DurationNs(ms.saturating_mul(1_000_000))
    }
    /// Build from whole microseconds.
    pub const fn from_us(us: i64) -> Self {
        DurationNs(us.saturating_mul(1_000))
    }
    /// Nanoseconds.
    pub const fn as_ns(self) -> i64 {
        self.0
    }
    /// Milliseconds as a float, for reports only (rounded to 0.001 ms).
    pub fn as_ms_f64(self) -> f64 {
        (self.0 as f64 / 1_000.0).round() / 1_000.0
    }
}

/// Convert nanoseconds to milliseconds rounded to microsecond precision,
/// the unit of every `*_ms` evidence field.
pub fn ns_to_ms(ns: i64) -> f64 {
    DurationNs(ns).as_ms_f64()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn ms_rounding() {
        assert_eq!(DurationNs(1_003_200_499).as_ms_f64(), 1003.2);
        assert_eq!(DurationNs(-1_500_000).as_ms_f64(), -1.5);
        assert_eq!(Timestamp(5).since(Timestamp(7)), DurationNs(-2));
    }
}
