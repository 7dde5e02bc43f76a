//! Retry ladders: the SYN retry schedules of known stacks, and which one a
//! connection's SYN gaps follow.

use pcapsleuth_detect::timer::{matches_coarse_timer, matches_timer, SLOW_TICK_NS};

/// A retry schedule: nominal gaps between successive SYNs, in seconds.
struct Ladder {
    short: &'static str,
    label: &'static str,
    gaps_s: &'static [i64],
}

/// Most SYNs (count) a default Linux sends: `tcp_syn_retries` 6 → 7 SYNs
/// (`retransmits_timed_out()` gives up on elapsed time; with
/// `tcp_syn_linear_timeouts=4` the SYNs leave at 0, 1, 2, 3, 4, 5, 7 s).
const LINUX_DEFAULT_MAX_SYNS: usize = 7;

/// `ladder` evidence of the 1 s ×5-then-doubling shape when it could be
/// either stack (at most [`LINUX_DEFAULT_MAX_SYNS`] SYNs).
const LINEAR_LABEL: &str = "Linux tcp_syn_linear_timeouts (1 s ×N then doubling) or XNU/macOS tcp_syn_backoff (1 s ×5 then doubling)";
/// Summary name of [`LINEAR_LABEL`].
const LINEAR_SHORT: &str = "1 s linear then doubling: Linux tcp_syn_linear_timeouts or XNU/macOS";
/// `ladder` evidence of the same shape with more SYNs than a default Linux
/// sends: XNU `tcp_syn_backoff[] = {1, 1, 1, 1, 1, 2, 4, 8, 16, 32, 64, …}`
/// (bsd/netinet/tcp_timer.c; public corpus `http_espn_fail.pcapng`, 11 SYNs
/// from Mac OS X 10.10).
const XNU_LABEL: &str =
    "XNU/macOS tcp_syn_backoff (1 s ×5 then doubling; more SYNs than a default Linux sends)";
/// Summary name of [`XNU_LABEL`].
const XNU_SHORT: &str = "XNU/macOS tcp_syn_backoff";

/// The names of ladder `l` for a connection that sent `syns` SYNs in all
/// (including any missed before the capture began): the linear shape is
/// XNU/macOS when there are more SYNs than default Linux sends.
fn ladder_names(l: &Ladder, syns: usize) -> (&'static str, &'static str) {
    if l.label == LINEAR_LABEL && syns > LINUX_DEFAULT_MAX_SYNS {
        (XNU_LABEL, XNU_SHORT)
    } else {
        (l.label, l.short)
    }
}

/// Known SYN retry schedules. Linux: `tcp_retransmit_timer()` doubles
/// `icsk_rto` from `TCP_TIMEOUT_INIT` (1 s, RFC 6298), except in SYN_SENT while
/// `icsk_backoff <= tcp_syn_linear_timeouts` (default 4 since 6.5); XNU's
/// `tcp_syn_backoff` table has the same shape (see [`ladder_names`]). Windows:
/// `InitialRto` 3 s, `MaxSynRetransmissions` 2. Older stacks: RFC 1122 3 s.
const LADDERS: &[Ladder] = &[
    Ladder {
        short: "Linux classic backoff",
        label: "Linux classic backoff (1, 2, 4, 8 s; tcp_syn_linear_timeouts=0 or kernel < 6.5)",
        gaps_s: &[1, 2, 4, 8, 16, 32, 64],
    },
    Ladder {
        short: LINEAR_SHORT,
        label: LINEAR_LABEL,
        gaps_s: &[1, 1, 1, 1, 1, 2, 4, 8, 16, 32, 64],
    },
    Ladder {
        short: "Windows",
        label: "Windows (3 s, 6 s: done after 3, 9 s)",
        gaps_s: &[3, 6],
    },
    Ladder {
        short: "3 s initial RTO",
        label: "3 s initial RTO doubling (RFC 1122 / older stacks)",
        gaps_s: &[3, 6, 12, 24, 48, 96],
    },
];

/// Whether `gaps_ns` (successive SYN gaps, ns) follow ladder `l` from its
/// first rung.
fn fits(l: &Ladder, gaps_ns: &[i64]) -> bool {
    gaps_ns.len() <= l.gaps_s.len()
        && gaps_ns
            .iter()
            .zip(l.gaps_s)
            .enumerate()
            .all(|(i, (&g, &n))| {
                let nominal = n * 1_000_000_000;
                // 3 s stacks (Windows, BSD-derived) run the SYN timer off a
                // coarse 500 ms tick: the first retry comes up to one tick
                // early (2.9 s gaps in the public corpus).
                if i == 0 && n == 3 {
                    matches_coarse_timer(g, nominal, SLOW_TICK_NS)
                } else {
                    matches_timer(g, nominal)
                }
            })
}

/// Name the retry ladder `gaps_ns` (successive SYN gaps, ns) follows: the
/// full label (the `ladder` evidence) and a short name for the summary.
pub fn ladder_for(gaps_ns: &[i64]) -> (&'static str, &'static str) {
    if gaps_ns.is_empty() {
        return ("none", "no retry");
    }
    let matching: Vec<&Ladder> = LADDERS.iter().filter(|l| fits(l, gaps_ns)).collect();
    match matching.as_slice() {
        [] => ("unrecognised", "an unrecognised retry schedule"),
        [one] => ladder_names(one, gaps_ns.len() + 1),
        [a, ..] if a.gaps_s[0] == 1 => (
            "Linux / RFC 6298 1 s initial RTO (classic or linear: too few retries to tell)",
            "1 s initial RTO, Linux / RFC 6298",
        ),
        _ => (
            "3 s initial RTO (Windows: 3 s, 6 s; or an older stack)",
            "3 s initial RTO, Windows or an older stack",
        ),
    }
}

/// A ladder the gaps follow from a later rung on, when the capture began
/// after the first SYN(s): `since_capture_start_ns` is the first captured
/// SYN's time after the first TCP segment of the capture, and the SYNs missed
/// must fit before the capture began. Returns the `ladder` evidence and the
/// summary's short name (smallest rung first: the most SYNs captured).
pub fn ladder_joined(gaps_ns: &[i64], since_capture_start_ns: i64) -> Option<(String, String)> {
    if gaps_ns.is_empty() {
        return None;
    }
    let mut best: Option<(usize, &Ladder)> = None;
    for l in LADDERS {
        for k in 1..l.gaps_s.len() {
            let rest = l.gaps_s.get(k..).unwrap_or(&[]);
            let missed_ns: i64 = l.gaps_s.iter().take(k).sum::<i64>() * 1_000_000_000;
            if gaps_ns.len() <= rest.len()
                && since_capture_start_ns < missed_ns
                && gaps_ns
                    .iter()
                    .zip(rest)
                    .all(|(&g, &n)| matches_timer(g, n * 1_000_000_000))
            {
                if best.is_none_or(|(bk, _)| k < bk) {
                    best = Some((k, l));
                }
                break;
            }
        }
    }
    best.map(|(k, l)| {
        let missed_s: i64 = l.gaps_s.iter().take(k).sum();
        let (label, short) = ladder_names(l, k + gaps_ns.len() + 1);
        (
            format!(
                "{label}, joined at retry {k}: the capture began after the first SYN ({k} earlier SYN(s), ~{missed_s} s, not captured)"
            ),
            format!(
                "likely {short} from retry {k} on: the capture began ~{missed_s} s after the first SYN, so the real delay is longer"
            ),
        )
    })
}

/// The nominal wait (ns) after the last of the SYNs whose gaps are `gaps_ns`
/// before the next retry (or, when the schedule has no further rung, the
/// give-up) is due: the next rung of every ladder the gaps follow, from its
/// first rung or joined late (`since_capture_start_ns` as in
/// [`ladder_joined`], only when none fits from its first rung), the longest when several fit (the retry is only
/// surely overdue once it is overdue on every schedule that fits). With no
/// fitting ladder with a further rung: the last gap (backoff never shortens
/// the wait), or the 1 s initial RTO (RFC 6298 §2) after a single SYN.
pub fn next_wait_ns(gaps_ns: &[i64], since_capture_start_ns: i64) -> i64 {
    const S: i64 = 1_000_000_000;
    let Some(&last) = gaps_ns.last() else {
        return S;
    };
    let mut next: Option<i64> = None;
    let mut note = |n: Option<&i64>| {
        if let Some(&n) = n {
            next = Some(next.map_or(n * S, |m| m.max(n * S)));
        }
    };
    let full: Vec<&Ladder> = LADDERS.iter().filter(|l| fits(l, gaps_ns)).collect();
    for l in &full {
        note(l.gaps_s.get(gaps_ns.len()));
    }
    // Joined late only when no schedule fits from its first rung (as
    // [`ladder_for`] then [`ladder_joined`] name it).
    for l in LADDERS.iter().filter(|_| full.is_empty()) {
        for k in 1..l.gaps_s.len() {
            let rest = l.gaps_s.get(k..).unwrap_or(&[]);
            let missed_ns: i64 = l.gaps_s.iter().take(k).sum::<i64>() * S;
            if gaps_ns.len() <= rest.len()
                && since_capture_start_ns < missed_ns
                && gaps_ns
                    .iter()
                    .zip(rest)
                    .all(|(&g, &n)| matches_timer(g, n * S))
            {
                note(rest.get(gaps_ns.len()));
            }
        }
    }
    next.unwrap_or(last)
}
