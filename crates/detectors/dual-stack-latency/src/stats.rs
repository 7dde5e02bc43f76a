//! Per-family statistics and the rule that calls one family slower.

use serde::Serialize;

/// Count, min, median, p90 and max of one family's samples (ms, 3 decimals).
/// Percentiles are nearest-rank: the ⌈p·n⌉-th smallest sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FamilyStats {
    /// Number of samples.
    pub count: usize,
    /// Smallest sample, ms.
    pub min_ms: f64,
    /// Median (nearest-rank p50), ms.
    pub median_ms: f64,
    /// 90th percentile (nearest-rank), ms.
    pub p90_ms: f64,
    /// Largest sample, ms.
    pub max_ms: f64,
}

/// The ⌈p·n⌉-th smallest of `sorted` (nearest-rank percentile, `p` in 0..=1).
pub fn nearest_rank(sorted: &[i64], p: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted.get(rank.min(sorted.len()) - 1).copied()
}

fn ms(ns: i64) -> f64 {
    (ns as f64 / 1_000.0).round() / 1_000.0
}

impl FamilyStats {
    /// Statistics of `samples_ns` (any order); `None` when empty.
    pub fn of(samples_ns: &[i64]) -> Option<FamilyStats> {
        let mut v = samples_ns.to_vec();
        v.sort_unstable();
        Some(FamilyStats {
            count: v.len(),
            min_ms: ms(*v.first()?),
            median_ms: ms(nearest_rank(&v, 0.5)?),
            p90_ms: ms(nearest_rank(&v, 0.9)?),
            max_ms: ms(*v.last()?),
        })
    }
}

/// The thresholds of one comparison (documented in the README, "Thresholds").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// Fewest samples per family before the families are compared.
    pub min_samples: usize,
    /// Smallest difference (slow − fast) of both the medians and the p90s, ms.
    pub abs_floor_ms: f64,
    /// Smallest ratio (slow / fast) of both the medians and the p90s.
    pub ratio_floor: f64,
    /// Median ratio from which the difference is a warning (below: info).
    pub warning_ratio: f64,
}

/// The defaults: at least 1 ms and 1.5× slower at the median and at the
/// p90; a warning from 2× at the median.
pub const DEFAULT: Thresholds = Thresholds {
    min_samples: 5,
    abs_floor_ms: 1.0,
    ratio_floor: 1.5,
    warning_ratio: 2.0,
};

/// Which family a comparison found slower.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// IPv6 consistently slower.
    Ipv6Slower,
    /// IPv4 consistently slower.
    Ipv4Slower,
    /// Enough samples, no consistent difference.
    NoDifference,
    /// Fewer than the minimum samples in a family.
    TooFewSamples,
}

/// How strong a difference is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Strength {
    /// No difference (or not compared).
    None,
    /// Between `ratio_floor` and `warning_ratio` at the median.
    Moderate,
    /// At least `warning_ratio` at the median.
    Strong,
}

/// Whether `slow` is consistently slower than `fast`: both the median and
/// the p90 at least `abs_floor_ms` higher and at least `ratio_floor` times.
fn slower(slow: &FamilyStats, fast: &FamilyStats, t: &Thresholds) -> Strength {
    let consistent = |s: f64, f: f64| s - f >= t.abs_floor_ms && s >= t.ratio_floor * f;
    if !(consistent(slow.median_ms, fast.median_ms) && consistent(slow.p90_ms, fast.p90_ms)) {
        return Strength::None;
    }
    if slow.median_ms >= t.warning_ratio * fast.median_ms {
        Strength::Strong
    } else {
        Strength::Moderate
    }
}

/// Compare the IPv4 and IPv6 statistics of one measure.
pub fn compare(
    v4: Option<&FamilyStats>,
    v6: Option<&FamilyStats>,
    t: &Thresholds,
) -> (Verdict, Strength) {
    let (Some(v4), Some(v6)) = (v4, v6) else {
        return (Verdict::TooFewSamples, Strength::None);
    };
    if v4.count < t.min_samples || v6.count < t.min_samples {
        return (Verdict::TooFewSamples, Strength::None);
    }
    match (slower(v6, v4, t), slower(v4, v6, t)) {
        (Strength::None, Strength::None) => (Verdict::NoDifference, Strength::None),
        (s, Strength::None) => (Verdict::Ipv6Slower, s),
        (_, s) => (Verdict::Ipv4Slower, s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(count: usize, median_ms: f64, p90_ms: f64) -> FamilyStats {
        FamilyStats {
            count,
            min_ms: median_ms,
            median_ms,
            p90_ms,
            max_ms: p90_ms,
        }
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<i64> = (1..=10).collect();
        assert_eq!(nearest_rank(&v, 0.5), Some(5));
        assert_eq!(nearest_rank(&v, 0.9), Some(9));
        assert_eq!(nearest_rank(&[7], 0.9), Some(7));
        assert_eq!(nearest_rank(&[1, 2, 3, 4, 5], 0.9), Some(5));
        assert_eq!(nearest_rank(&[], 0.5), None);
        assert_eq!(nearest_rank(&[3, 4], 0.0), Some(3));
    }

    #[test]
    fn stats_in_ms() {
        let s = FamilyStats::of(&[27_000, 16_000, 30_000, 86_000]).unwrap();
        assert_eq!(
            (s.count, s.min_ms, s.median_ms, s.p90_ms, s.max_ms),
            (4, 0.016, 0.027, 0.086, 0.086)
        );
        assert_eq!(FamilyStats::of(&[]), None);
    }

    /// (name, v4, v6, verdict, strength) with the default thresholds.
    #[test]
    fn table() {
        use Strength::*;
        use Verdict::*;
        let rows = [
            (
                "lab: IPv6 answers held 5-7 ms",
                st(60, 0.027, 0.03),
                st(60, 6.361, 7.439),
                Ipv6Slower,
                Strong,
            ),
            (
                "lab: IPv6 send path 3.9 ms",
                st(50, 0.037, 0.039),
                st(50, 3.87, 4.078),
                Ipv6Slower,
                Strong,
            ),
            (
                "control: equal",
                st(60, 0.025, 0.03),
                st(60, 0.023, 0.028),
                NoDifference,
                None,
            ),
            (
                "IPv4 slower",
                st(10, 30.0, 35.0),
                st(10, 10.0, 12.0),
                Ipv4Slower,
                Strong,
            ),
            (
                "1.75x on an internet path: info",
                st(10, 20.0, 24.0),
                st(10, 35.0, 40.0),
                Ipv6Slower,
                Moderate,
            ),
            (
                "below 1.5x",
                st(10, 20.0, 24.0),
                st(10, 29.0, 40.0),
                NoDifference,
                None,
            ),
            (
                "under the 1 ms floor although 10x",
                st(10, 0.05, 0.06),
                st(10, 0.5, 0.9),
                NoDifference,
                None,
            ),
            (
                "median slower, p90 not (an outlier burst in IPv4)",
                st(10, 1.0, 30.0),
                st(10, 5.0, 8.0),
                NoDifference,
                None,
            ),
            (
                "p90 slower, median not (a few slow IPv6 samples)",
                st(10, 1.0, 1.2),
                st(10, 1.1, 9.0),
                NoDifference,
                None,
            ),
            (
                "4 samples: too few",
                st(4, 0.03, 0.03),
                st(60, 6.0, 7.0),
                TooFewSamples,
                None,
            ),
            (
                "exactly 5 samples",
                st(5, 0.03, 0.03),
                st(5, 6.0, 7.0),
                Ipv6Slower,
                Strong,
            ),
            (
                "exactly at the floors",
                st(10, 2.0, 2.0),
                st(10, 3.0, 3.0),
                Ipv6Slower,
                Moderate,
            ),
        ];
        for (name, v4, v6, verdict, strength) in rows {
            assert_eq!(
                compare(Some(&v4), Some(&v6), &DEFAULT),
                (verdict, strength),
                "{name}"
            );
        }
        assert_eq!(
            compare(Option::None, Some(&st(9, 1.0, 1.0)), &DEFAULT).0,
            TooFewSamples
        );
    }
}
