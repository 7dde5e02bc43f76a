//! Re-send ladders of stub resolvers: which resolver configuration the gaps
//! between a query's transmissions follow.
//!
//! - glibc `res_send.c` `send_dg()`: the wait for server `ns` is
//!   `seconds = retrans << ns; if (ns > 0) seconds /= nscount; if (seconds <= 0) seconds = 1`,
//!   where `retrans` is `options timeout:N` (default `RES_TIMEOUT` 5 s, at most
//!   30) and the outer loop makes `options attempts:M` rounds (default
//!   `RES_DFLRETRY` 2) over the servers. The query keeps its id and, for one
//!   server, its socket. With one nameserver every gap is N s.
//! - glibc after a timeout with one answer of the A/AAAA pair received:
//!   switches to `RES_SNGLKUP` and re-sends both queries one after the other
//!   (same socket, same ids, the timer restarted); after a second such
//!   timeout to `RES_SNGLKUPREOP` (new socket); after a third it returns the
//!   answer it has. With `single-request-reopen` already set it returns at
//!   once: the lost query is never re-sent.
//! - musl `res_msend.c`: `retry_interval = timeout / attempts` (default
//!   5 s / 2 = 2.5 s), every unanswered query re-sent to every nameserver at
//!   once, same socket and id.
//! - Windows DNS client: `DNSQueryTimeouts`, default `1 2 2 4 8` s (the
//!   preferred server, then the preferred server on all connections, then
//!   all servers three times; Windows 2000/XP TCP/IP registry reference),
//!   same id. Public corpus `sip.pcap`: SRV queries re-sent at 1, 2, 2, 4 s.

use pcapsleuth_detect::timer::matches_timer;

/// Nanoseconds in a second.
const S: i64 = 1_000_000_000;

/// glibc's largest `options timeout:` (`RES_MAXRETRANS`), seconds.
pub const GLIBC_MAX_TIMEOUT_S: i64 = 30;

/// glibc's default per-try timeout (`RES_TIMEOUT`), ns.
pub const GLIBC_DEFAULT_TIMEOUT_NS: i64 = 5 * S;

/// musl's default retry interval (timeout 5 s / attempts 2), ns.
pub const MUSL_DEFAULT_INTERVAL_NS: i64 = 2_500_000_000;

/// The ladder a lookup's gaps follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ladder {
    /// No re-send.
    None,
    /// Every gap is N whole seconds: glibc/BSD `res_send` with
    /// `options timeout:N` (N = 5 is the default), one nameserver.
    FixedSeconds(i64),
    /// 2.5 s: musl's default `timeout / attempts`.
    MuslDefault,
    /// Windows `DNSQueryTimeouts` 1, 2, 2, 4, 8 s (gaps from rung `.0` on).
    Windows(usize),
    /// Gaps of glibc's per-server timeouts for several nameservers.
    GlibcServers,
    /// None of the above.
    Unrecognised,
}

impl Ladder {
    /// The `ladder` evidence string.
    pub fn label(&self) -> String {
        match self {
            Ladder::None => "none".into(),
            Ladder::FixedSeconds(5) => "glibc default: options timeout:5 attempts:2 (5 s per try; BSD libc and Go's resolver use the same 5 s)".into(),
            Ladder::FixedSeconds(n @ (1 | 2)) => format!("glibc options timeout:{n} ({n} s per try), or a Windows DNS client step (DNSQueryTimeouts 1, 2, 2, 4, 8 s)"),
            Ladder::FixedSeconds(n) => format!("glibc options timeout:{n} ({n} s per try)"),
            Ladder::Windows(0) => "Windows DNS client (DNSQueryTimeouts 1, 2, 2, 4, 8 s)".into(),
            Ladder::Windows(k) => format!("Windows DNS client (DNSQueryTimeouts 1, 2, 2, 4, 8 s), from step {}: an earlier try was not captured", k + 1),
            Ladder::MuslDefault => "musl default (timeout 5 s / attempts 2: every 2.5 s)".into(),
            Ladder::GlibcServers => "glibc with several nameservers ((timeout << ns) / nscount per server)".into(),
            Ladder::Unrecognised => "unrecognised".into(),
        }
    }

    /// Short name for the summary.
    pub fn short(&self) -> String {
        match self {
            Ladder::None => "no re-send".into(),
            Ladder::FixedSeconds(5) => "glibc default, 5 s per try".into(),
            Ladder::FixedSeconds(n) => format!("glibc options timeout:{n}"),
            Ladder::MuslDefault => "musl default, every 2.5 s".into(),
            Ladder::Windows(_) => "Windows DNS client, 1, 2, 2, 4, 8 s".into(),
            Ladder::GlibcServers => "glibc, next nameserver".into(),
            Ladder::Unrecognised => "an unrecognised re-send schedule".into(),
        }
    }

    /// Nominal wait of one try, ns, when known.
    pub fn timeout_ns(&self) -> Option<i64> {
        match self {
            Ladder::FixedSeconds(n) => Some(n * S),
            Ladder::MuslDefault => Some(MUSL_DEFAULT_INTERVAL_NS),
            Ladder::Windows(k) => WINDOWS_S.get(*k).map(|s| s * S),
            _ => None,
        }
    }
}

/// Name the ladder of `gaps_ns` (successive transmission gaps of one query,
/// ns); `servers_changed` when the re-sends went to other resolver addresses.
pub fn ladder_for(gaps_ns: &[i64], servers_changed: bool) -> Ladder {
    if gaps_ns.is_empty() {
        return Ladder::None;
    }
    if gaps_ns
        .iter()
        .all(|&g| matches_timer(g, MUSL_DEFAULT_INTERVAL_NS))
    {
        return Ladder::MuslDefault;
    }
    // Windows only when the gaps grow (equal gaps are read as timeout:N).
    if gaps_ns
        .windows(2)
        .any(|w| w[1] > w[0].saturating_add(S / 2))
    {
        if let Some(k) = windows_rung(gaps_ns) {
            return Ladder::Windows(k);
        }
    }
    // The closest whole-second timeout that every gap matches (the timer
    // window widens with the timeout, so several may match a long gap).
    let best = (1..=GLIBC_MAX_TIMEOUT_S)
        .filter(|n| gaps_ns.iter().all(|&g| matches_timer(g, n * S)))
        .min_by_key(|n| {
            gaps_ns
                .iter()
                .map(|&g| g.abs_diff(n * S))
                .fold(0u64, u64::saturating_add)
        });
    if let Some(n) = best {
        return Ladder::FixedSeconds(n);
    }
    if servers_changed && glibc_servers(gaps_ns) {
        return Ladder::GlibcServers;
    }
    Ladder::Unrecognised
}

/// Windows `DNSQueryTimeouts` default, seconds.
const WINDOWS_S: [i64; 5] = [1, 2, 2, 4, 8];

/// The first rung of [`WINDOWS_S`] from which `gaps_ns` follow it, if any.
fn windows_rung(gaps_ns: &[i64]) -> Option<usize> {
    (0..WINDOWS_S.len()).find(|&k| {
        let rest = WINDOWS_S.get(k..).unwrap_or(&[]);
        gaps_ns.len() <= rest.len()
            && gaps_ns
                .iter()
                .zip(rest)
                .all(|(&g, &n)| matches_timer(g, n * S))
    })
}

/// Whether the gaps fit glibc's per-server schedule for 2 or 3 nameservers
/// and some `timeout:N`: server `ns` waits `max(1, (N << ns) / nscount)` s
/// (`ns` 0 waits N), servers tried in turn.
fn glibc_servers(gaps_ns: &[i64]) -> bool {
    (1..=GLIBC_MAX_TIMEOUT_S).any(|n| {
        (2..=3i64).any(|count| {
            gaps_ns.iter().enumerate().all(|(i, &g)| {
                let ns = (i as i64) % count;
                let secs = if ns == 0 {
                    n
                } else {
                    ((n << ns) / count).max(1)
                };
                matches_timer(g, secs * S)
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    #[test]
    fn ladders_table() {
        // (gaps ms, servers changed, expected) — 5000.639 / 5004.721 / 5001.992
        // are dns-timeout.pcap's glibc gaps.
        let table: &[(&[i64], bool, Ladder)] = &[
            (&[], false, Ladder::None),
            (&[5000], false, Ladder::FixedSeconds(5)),
            (&[5004], false, Ladder::FixedSeconds(5)),
            (&[5000, 5002], false, Ladder::FixedSeconds(5)),
            (&[1001], false, Ladder::FixedSeconds(1)),
            (&[2000, 2001], false, Ladder::FixedSeconds(2)),
            (&[2500, 2500], false, Ladder::MuslDefault),
            (&[30_010], false, Ladder::FixedSeconds(30)),
            // 3 servers, timeout 5: 5, (10/3)=3, (20/3)=6 s.
            (&[5000, 3000, 6000], true, Ladder::GlibcServers),
            (&[700], false, Ladder::Unrecognised),
            (&[5000, 9000], false, Ladder::Unrecognised),
            // sip.pcap (Windows XP): 1, 2, 2, 4 s; smb psexec capture: 2, 2, 4 s.
            (&[995, 2003, 2003, 4006], false, Ladder::Windows(0)),
            (&[1998, 2000, 4000], false, Ladder::Windows(1)),
            (&[2007, 1993], false, Ladder::FixedSeconds(2)),
        ];
        for (gaps, changed, want) in table {
            let g: Vec<i64> = gaps.iter().map(|ms| ms * MS).collect();
            assert_eq!(ladder_for(&g, *changed), *want, "{gaps:?}");
        }
        assert_eq!(Ladder::FixedSeconds(5).timeout_ns(), Some(5 * S));
        assert!(Ladder::FixedSeconds(2).label().contains("timeout:2"));
    }
}
