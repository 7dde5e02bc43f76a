//! Recurrence: frag-needed for one destination that comes back after the
//! host's learned path MTU expired. The ICMPs of one route (quoted source,
//! quoted destination, MTU) are split into bursts by what the packets show,
//! not by an expected expiry, and the period between bursts is measured.
//!
//! A burst ends once the host is seen *using* the MTU it learned: a segment
//! refused in an oversize datagram is re-sent after one of the burst's ICMPs
//! in a datagram that fits the MTU. A later ICMP from a router quoting an
//! oversize datagram the host sent *after* that moment starts a new burst: the host had learned the MTU and sent an
//! oversize datagram again, so its route MTU cache entry had gone (Linux
//! `net.ipv4.route.mtu_expires`, default 600 s; `ip_rt_update_pmtu`,
//! `__ip_rt_update_pmtu` store it in a route exception that expires). A
//! self-addressed ICMP never starts a burst: the host's own kernel refused the
//! datagram because its cache still held the smaller MTU.

use crate::{FragNeeded, Icmp};
use pcapsleuth_core::FrameNo;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// When the quoted datagram was not captured, it is taken as sent this long
/// (ns) before its ICMP: an ICMP for a datagram in flight when the host
/// learned the MTU arrives within about one round trip.
pub const UNMATCHED_SENT_BEFORE_NS: i64 = 1_000_000_000;

/// The route MTU cache entry an ICMP teaches: (quoted source = the host,
/// quoted destination, announced MTU in bytes).
pub(crate) type RouteKey = (IpAddr, IpAddr, u32);

/// One burst of a recurring route, as listed in the evidence (`bursts`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BurstEvidence {
    /// Position among the route's bursts, from 1.
    pub index: usize,
    /// Frame of the burst's first ICMP.
    pub first_frame: FrameNo,
    /// Timestamp of that ICMP, ns since the Unix epoch.
    pub start_ns: i64,
    /// ICMP messages in the burst.
    pub icmps: usize,
    /// Of those, self-addressed (the host refused its own datagram).
    pub self_addressed: usize,
    /// Time since the previous burst's first ICMP, s (ms precision); null
    /// for the first burst.
    pub since_previous_s: Option<f64>,
}

/// A route whose frag-needed recurred: its bursts (indices into the route's
/// messages kept in full, each in time order) and the measured period.
#[derive(Debug, Clone)]
pub(crate) struct Recurrence {
    pub bursts: Vec<Vec<usize>>,
    /// Median interval between burst starts, s (ms precision).
    pub period_s: f64,
    /// The bursts as evidence lists them.
    pub listed: Vec<BurstEvidence>,
}

/// ns → s rounded to the ms.
fn ns_to_s_ms(ns: i64) -> f64 {
    ((ns as f64) / 1e6).round() / 1e3
}

impl FragNeeded {
    /// Every route whose ICMPs form at least two bursts. A route with more
    /// than [`crate::ROUTE_DETAIL_CAP`] messages (a flood) is not measured.
    pub(crate) fn recurrences(&self) -> BTreeMap<RouteKey, Recurrence> {
        let mut out = BTreeMap::new();
        for (key, route) in &self.routes {
            if route.flood || route.icmps.len() < 2 {
                continue;
            }
            let icmps = &route.icmps;
            let mut idx: Vec<usize> = (0..icmps.len()).collect();
            idx.sort_by_key(|&n| (icmps[n].ts, icmps[n].frame));
            let bursts = self.split_bursts(icmps, &idx, key.2);
            if bursts.len() >= 2 {
                out.insert(*key, timed(icmps, bursts));
            }
        }
        out
    }

    /// Split one route's ICMPs (`idx` into `icmps`, time order) into bursts
    /// (see the module doc).
    fn split_bursts(&self, icmps: &[Icmp], idx: &[usize], mtu: u32) -> Vec<Vec<usize>> {
        let mut bursts: Vec<Vec<usize>> = Vec::new();
        // When the host was first seen using the learned MTU in this burst.
        let mut learned_ns: Option<i64> = None;
        for &n in idx {
            let Some(i) = icmps.get(n) else {
                continue;
            };
            let oversize = sent_len(i) > mtu;
            let new_burst = match (bursts.last_mut(), learned_ns) {
                (None, _) => true,
                (Some(_), Some(l)) => oversize && !i.self_addressed() && sent_ns(i) > l,
                (Some(_), None) => false,
            };
            if new_burst {
                bursts.push(Vec::new());
                learned_ns = None;
            }
            if let Some(b) = bursts.last_mut() {
                b.push(n);
            }
            let used = i
                .watch
                .and_then(|w| self.follow.result(w))
                .filter(|r| oversize && r.ip_len > 0 && r.ip_len <= mtu);
            if let Some(r) = used {
                learned_ns = Some(learned_ns.map_or(r.ts.0, |l| l.min(r.ts.0)));
            }
        }
        bursts
    }
}

/// Period and evidence list of a route's bursts (at least two; indices into
/// `icmps`).
fn timed(icmps: &[Icmp], bursts: Vec<Vec<usize>>) -> Recurrence {
    let starts: Vec<(FrameNo, i64)> = bursts
        .iter()
        .filter_map(|b| {
            b.first()
                .and_then(|&n| icmps.get(n))
                .map(|i| (i.frame, i.ts.0))
        })
        .collect();
    let mut periods: Vec<i64> = starts
        .windows(2)
        .map(|w| w[1].1.saturating_sub(w[0].1))
        .collect();
    periods.sort_unstable();
    let median_ns = match periods.len() {
        0 => 0,
        n if n % 2 == 1 => periods[n / 2],
        n => periods[n / 2 - 1] / 2 + periods[n / 2] / 2,
    };
    let listed = bursts
        .iter()
        .zip(&starts)
        .enumerate()
        .map(|(k, (b, &(first_frame, start_ns)))| BurstEvidence {
            index: k + 1,
            first_frame,
            start_ns,
            icmps: b.len(),
            self_addressed: b
                .iter()
                .filter(|&&n| icmps.get(n).is_some_and(Icmp::self_addressed))
                .count(),
            since_previous_s: (k > 0).then(|| ns_to_s_ms(start_ns.saturating_sub(starts[k - 1].1))),
        })
        .collect();
    Recurrence {
        bursts,
        period_s: ns_to_s_ms(median_ns),
        listed,
    }
}

/// Size of the datagram `i` quotes as the host sent it, bytes: the captured
/// quoted segment's IP length, else the length in the quote. A quote larger
/// than a captured datagram that fits the MTU was built after the capture
/// point (`quoted_not_captured`): the host never sent an oversize datagram.
fn sent_len(i: &Icmp) -> u32 {
    i.matched_ip_len.unwrap_or(i.quoted_ip_len)
}

/// When the host sent the datagram `i` quotes, ns: the capture of the
/// quoted segment, else [`UNMATCHED_SENT_BEFORE_NS`] before the ICMP.
fn sent_ns(i: &Icmp) -> i64 {
    i.matched_ts
        .map_or(i.ts.0.saturating_sub(UNMATCHED_SENT_BEFORE_NS), |t| t.0)
}
