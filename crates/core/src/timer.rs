//! Matching observed gaps against kernel timer values.
//!
//! A TCP timer in Linux is a `timer_list` on the hierarchical timer wheel
//! (`kernel/time/timer.c`, `calc_wheel_index` / `calc_index`): a timeout of
//! `d` jiffies is filed in level `n` when `d < 63 << 3n`, and its expiry is
//! rounded *up* to that level's granularity of `8^n` jiffies. At HZ=250 that
//! is 4 ms below 252 ms, 32 ms up to ≈2 s, 256 ms up to ≈16 s, 2048 ms beyond
//! (the table in the comment above `LVL_CLK_SHIFT`). A timer therefore never
//! fires early, and fires up to one granule (≈1/64 … 1/8 of the timeout) late;
//! the lab captures (`../shared/lab/README.md`, kernel 6.18, HZ=250) show SYN
//! retries at 1016, 2016 and 4256 ms for nominal 1, 2 and 4 s.
//!
//! The HZ of the sending host is not in the capture, so [`timer_window`]
//! takes the widest granule over the common values (100, 250, 300, 1000) and
//! adds a few jiffies for `msecs_to_jiffies` rounding and softirq latency, plus
//! a small relative allowance for the path (the capture point is not the
//! sender). This is the ONE tolerance function every detector uses.

/// HZ values of common kernels (`CONFIG_HZ`): the widest granule among them bounds the lateness.
pub const COMMON_HZ: [u32; 4] = [100, 250, 300, 1000];

/// Nanoseconds in one millisecond.
const MS: i64 = 1_000_000;

/// Granularity of the Linux timer wheel level a timeout of `timeout_ns` lands
/// in, in ns, for a kernel built with `hz` (`kernel/time/timer.c`:
/// `LVL_CLK_SHIFT` 3, `LVL_BITS` 6, level `n` holds deltas below `63 << 3n`
/// jiffies with granularity `1 << 3n` jiffies). Returns one jiffy for
/// non-positive timeouts; `hz` 0 is treated as 250.
pub fn wheel_granularity_ns(timeout_ns: i64, hz: u32) -> i64 {
    let hz = if hz == 0 { 250 } else { hz as i64 };
    let jiffy_ns = 1_000_000_000 / hz;
    // msecs_to_jiffies rounds up.
    let delta = timeout_ns.max(0).saturating_add(jiffy_ns - 1) / jiffy_ns;
    let mut level = 0u32;
    // LVL_START(level + 1) = 63 << (3 * level); the wheel has 8 or 9 levels.
    while level < 8 && delta >= (63i64 << (3 * level)) {
        level += 1;
    }
    jiffy_ns.saturating_mul(1i64 << (3 * level))
}

/// How late (ns) a timer of nominal `nominal_ns` may appear in a capture:
/// the widest wheel granule over [`COMMON_HZ`], plus 3 jiffies at HZ=100
/// (30 ms: jiffies rounding, softirq latency), plus 3 % of the timeout (path and
/// queueing between sender and capture point).
pub fn late_slack_ns(nominal_ns: i64) -> i64 {
    let gran = COMMON_HZ
        .iter()
        .map(|&hz| wheel_granularity_ns(nominal_ns, hz))
        .max()
        .unwrap_or(4 * MS);
    gran + 30 * MS + nominal_ns.max(0) / 33
}

/// How early (ns) a timer of nominal `nominal_ns` may appear: timers never fire
/// early, but the packet that armed it may have been captured late (queueing
/// before the capture point), so allow 2 % plus 2 ms.
pub fn early_slack_ns(nominal_ns: i64) -> i64 {
    nominal_ns.max(0) / 50 + 2 * MS
}

/// The window `[lo, hi]` (ns) in which a timer of nominal `nominal_ns` is seen to fire.
pub fn timer_window(nominal_ns: i64) -> (i64, i64) {
    (
        nominal_ns - early_slack_ns(nominal_ns),
        nominal_ns.saturating_add(late_slack_ns(nominal_ns)),
    )
}

/// Whether an observed gap of `observed_ns` is a timer of nominal `nominal_ns` firing.
pub fn matches_timer(observed_ns: i64, nominal_ns: i64) -> bool {
    let (lo, hi) = timer_window(nominal_ns);
    observed_ns >= lo && observed_ns <= hi
}

/// Linux `TCP_RTO_MAX` (120 s, `include/net/tcp.h`): the retransmission
/// timer's backoff never waits longer (RFC 6298 §2.5 allows a maximum ≥ 60 s).
pub const TCP_RTO_MAX_NS: i64 = 120_000_000_000;

/// The nominal wait (ns) before the next retransmission after one that
/// followed a gap of `last_gap_ns`: the timer doubles (RFC 6298 §5.5, Linux
/// `tcp_retransmit_timer()`), up to [`TCP_RTO_MAX_NS`].
pub fn next_backoff_ns(last_gap_ns: i64) -> i64 {
    last_gap_ns.max(0).saturating_mul(2).min(TCP_RTO_MAX_NS)
}

/// Tick of the coarse "slow" TCP timer of BSD-derived and older Windows
/// stacks, ns: 4.4BSD `tcp_slowtimo()` runs every 500 ms (`PR_SLOWHZ` 2, TCP/IP
/// Illustrated Vol. 2 §25.1), so a timer armed between ticks fires up to one
/// tick early relative to the packet that armed it.
pub const SLOW_TICK_NS: i64 = 500_000_000;

/// Whether `observed_ns` is a timer of nominal `nominal_ns` driven by a coarse
/// tick of `tick_ns`: it may fire up to one tick early (the first timeout after
/// arming, see [`SLOW_TICK_NS`]) and as late as [`matches_timer`] allows.
pub fn matches_coarse_timer(observed_ns: i64, nominal_ns: i64, tick_ns: i64) -> bool {
    let (lo, hi) = timer_window(nominal_ns);
    observed_ns >= lo - tick_ns.max(0) && observed_ns <= hi
}

/// The first of `nominals_ns` that `observed_ns` matches (see [`matches_timer`]), by index.
pub fn match_any(observed_ns: i64, nominals_ns: &[i64]) -> Option<usize> {
    nominals_ns
        .iter()
        .position(|&n| matches_timer(observed_ns, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn granularity_table_hz250() {
        // The HZ=250 table in kernel/time/timer.c.
        assert_eq!(wheel_granularity_ns(200 * MS, 250), 4 * MS);
        assert_eq!(wheel_granularity_ns(1000 * MS, 250), 32 * MS);
        assert_eq!(wheel_granularity_ns(2000 * MS, 250), 32 * MS);
        assert_eq!(wheel_granularity_ns(4000 * MS, 250), 256 * MS);
        assert_eq!(wheel_granularity_ns(20_000 * MS, 250), 2048 * MS);
        assert_eq!(wheel_granularity_ns(1000 * MS, 1000), 64 * MS);
        assert_eq!(wheel_granularity_ns(300 * MS, 1000), 8 * MS);
        assert_eq!(wheel_granularity_ns(-5, 0), 4 * MS);
    }

    #[test]
    fn lab_gaps() {
        // (observed ms, nominal ms, matches) — observed values from ../shared/lab truth files.
        let table: &[(f64, i64, bool)] = &[
            (1016.801, 1000, true),
            (1009.341, 1000, true),
            (1030.793, 1000, true),
            (2016.064, 2000, true),
            (4255.985, 4000, true),
            (206.909, 200, true),
            (207.349, 200, true),
            (215.0, 200, true),
            (424.0, 400, true),
            (3000.0, 3000, true),
            (6010.0, 6000, true),
            (0.139, 200, false),
            (150.0, 200, false),
            (300.0, 200, false),
            (1500.0, 1000, false),
            (900.0, 1000, false),
            (2016.064, 1000, false),
            (3035.865, 2000, false),
            (1016.0, 3000, false),
            (3000.0, 4000, false),
        ];
        for &(obs, nom, want) in table {
            let got = matches_timer((obs * 1e6) as i64, nom * MS);
            assert_eq!(
                got,
                want,
                "{obs} ms vs nominal {nom} ms: window {:?}",
                timer_window(nom * MS)
            );
        }
    }

    #[test]
    fn backoff_doubles_up_to_rto_max() {
        assert_eq!(next_backoff_ns(3_520 * MS), 7_040 * MS);
        assert_eq!(next_backoff_ns(80_000 * MS), TCP_RTO_MAX_NS);
        assert_eq!(next_backoff_ns(-1), 0);
    }

    #[test]
    fn match_any_picks_first() {
        assert_eq!(
            match_any(410 * MS, &[200 * MS, 400 * MS, 800 * MS]),
            Some(1)
        );
        assert_eq!(match_any(600 * MS, &[200 * MS, 400 * MS, 800 * MS]), None);
    }

    #[test]
    fn coarse_slow_tick_allows_one_tick_early() {
        // (observed ms, nominal ms, matches): Windows XP / BSD SYN retries at
        // 2.905-2.944 s in the public corpus (sip.pcap, modbus.pcap, gnutella.pcap).
        let table: &[(i64, i64, bool)] = &[
            (2905, 3000, true),
            (2919, 3000, true),
            (2500, 3000, true),
            (2400, 3000, false),
            (3100, 3000, true),
            (3500, 3000, false),
        ];
        for &(obs, nom, want) in table {
            assert_eq!(
                matches_coarse_timer(obs * MS, nom * MS, SLOW_TICK_NS),
                want,
                "{obs} ms vs {nom} ms"
            );
        }
        assert!(!matches_timer(2919 * MS, 3000 * MS));
    }
}
