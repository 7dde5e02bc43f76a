//! Integer-nanosecond time formatting for human-readable renderers.
//!
//! No floating point and no time-zone database: timestamps are rendered in UTC
//! with the proleptic Gregorian calendar (Howard Hinnant's `civil_from_days`
//! algorithm, <https://howardhinnant.github.io/date_algorithms.html>).

const NS_PER_SEC: i64 = 1_000_000_000;

/// Convert days since 1970-01-01 to a (year, month, day) civil date.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32; // [1, 31]
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32; // [1, 12]
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Format a timestamp (ns since the Unix epoch) as UTC ISO-8601 / RFC 3339 with
/// nanosecond precision, e.g. `2024-05-01T12:34:56.123456789Z`. Trailing
/// groups of zero digits are trimmed to milliseconds or microseconds when exact
/// (`…:56.120Z` stays millisecond-precise, `…:56Z` when the fraction is zero).
pub fn format_ts_utc(ts_ns: i64) -> String {
    let secs = ts_ns.div_euclid(NS_PER_SEC);
    let frac = ts_ns.rem_euclid(NS_PER_SEC);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let (hh, mm, ss) = (sod / 3600, (sod / 60) % 60, sod % 60);
    let frac_s = if frac == 0 {
        String::new()
    } else if frac % 1_000_000 == 0 {
        format!(".{:03}", frac / 1_000_000)
    } else if frac % 1_000 == 0 {
        format!(".{:06}", frac / 1_000)
    } else {
        format!(".{frac:09}")
    };
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}{frac_s}Z")
}

/// Format a duration in ns as seconds with millisecond precision (`3.205 s`),
/// truncating toward zero. Negative durations keep their sign.
pub fn format_duration_s(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let abs = ns.unsigned_abs();
    let ms = abs / 1_000_000;
    format!("{sign}{}.{:03} s", ms / 1000, ms % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_and_known_dates() {
        assert_eq!(format_ts_utc(0), "1970-01-01T00:00:00Z");
        // 2000-02-29 (leap day), 12:00:00.5
        assert_eq!(
            format_ts_utc(951_825_600_500_000_000),
            "2000-02-29T12:00:00.500Z"
        );
        // date -u -d @1700000000 → 2023-11-14T22:13:20Z
        assert_eq!(
            format_ts_utc(1_700_000_000_000_000_000),
            "2023-11-14T22:13:20Z"
        );
        assert_eq!(
            format_ts_utc(1_700_000_000_000_001_000),
            "2023-11-14T22:13:20.000001Z"
        );
        assert_eq!(
            format_ts_utc(1_700_000_000_000_000_001),
            "2023-11-14T22:13:20.000000001Z"
        );
        assert_eq!(format_ts_utc(-1), "1969-12-31T23:59:59.999999999Z");
    }

    #[test]
    fn extreme_values_do_not_panic() {
        assert!(format_ts_utc(i64::MIN).ends_with('Z'));
        assert!(format_ts_utc(i64::MAX).starts_with("2262-04-11T23:47:16"));
    }

    #[test]
    fn durations() {
        assert_eq!(format_duration_s(3_205_999_999), "3.205 s");
        assert_eq!(format_duration_s(0), "0.000 s");
        assert_eq!(format_duration_s(-1_500_000_000), "-1.500 s");
        assert_eq!(format_duration_s(i64::MIN), "-9223372036.854 s");
    }
}
