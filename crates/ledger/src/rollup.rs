//! Roll-ups: per stream, per service (server endpoint), per capture.

use crate::model::{CauseTime, LedgerReport, ServiceLedger, StallEntry, StreamLedger};
use crate::state::{StreamOut, StreamState};
use crate::{ms, CauseSet, StallCause};
use pcapsleuth_core::Endpoint;
use std::collections::HashMap;

type ByCause = [(u64, i64); StallCause::ALL.len()];

/// Add `e` to a stream's output: counted always, kept while under `max`.
pub(crate) fn push(st: &mut StreamState, e: StallEntry, max: usize) {
    let dur = e.end_ns.saturating_sub(e.start_ns);
    if dur <= 0 {
        return;
    }
    let out = st.out_mut();
    let slot = &mut out.by_cause[e.cause.index()];
    slot.0 += 1;
    slot.1 = slot.1.saturating_add(dur);
    if out.entries.len() < max {
        if out.entries.capacity() == 0 {
            // Most streams stall once: no room for four (Vec's first growth).
            out.entries.reserve_exact(1);
        }
        out.entries.push(e);
    } else {
        out.dropped += 1;
    }
}

/// The causes with time lost, in [`StallCause::ALL`] order; allocated
/// exactly (a SYN-timeout stream has one: no room for four).
fn cause_times(by: &ByCause) -> Vec<CauseTime> {
    let n = by.iter().filter(|(n, _)| *n > 0).count();
    let mut v = Vec::with_capacity(n);
    v.extend(
        StallCause::ALL
            .iter()
            .zip(by.iter())
            .filter(|(_, (n, _))| *n > 0)
            .map(|(c, (n, ns))| CauseTime {
                cause: *c,
                stalls: *n,
                duration_ms: ms(*ns),
            }),
    );
    v
}

fn add(into: &mut ByCause, from: &ByCause) {
    for (a, b) in into.iter_mut().zip(from.iter()) {
        a.0 += b.0;
        a.1 = a.1.saturating_add(b.1);
    }
}

/// Human duration: "4.2 s" from one second on, else "41 ms".
pub(crate) fn human(ns: i64) -> String {
    if ns >= 1_000_000_000 {
        format!("{:.1} s", ns as f64 / 1e9)
    } else {
        format!("{:.0} ms", ns as f64 / 1e6)
    }
}

/// "4.2 s of 4.5 s lost to 3 SYN retransmission timeouts": the causes by
/// descending time, each with its count.
pub(crate) fn summary(stall_ns: i64, span_ns: i64, by: &ByCause) -> String {
    let mut parts: Vec<(StallCause, u64, i64)> = StallCause::ALL
        .iter()
        .zip(by.iter())
        .filter(|(_, (n, _))| *n > 0)
        .map(|(c, (n, t))| (*c, *n, *t))
        .collect();
    parts.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    let list: Vec<String> = parts
        .iter()
        .map(|(c, n, t)| {
            let plural = if *n == 1 { "" } else { "s" };
            if parts.len() == 1 {
                format!("{n} {}{plural}", c.label())
            } else {
                format!("{n} {}{plural} ({})", c.label(), human(*t))
            }
        })
        .collect();
    format!(
        "{} of {} lost to {}",
        human(stall_ns),
        human(span_ns),
        list.join(", ")
    )
}

/// Union of the entries' intervals, ns.
fn union_ns(entries: &[StallEntry]) -> i64 {
    let mut iv: Vec<(i64, i64)> = entries.iter().map(|e| (e.start_ns, e.end_ns)).collect();
    iv.sort_unstable();
    let mut total = 0i64;
    let mut cur: Option<(i64, i64)> = None;
    for (s, e) in iv {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total = total.saturating_add(ce.saturating_sub(cs));
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    if let Some((cs, ce)) = cur {
        total = total.saturating_add(ce.saturating_sub(cs));
    }
    total
}

#[derive(Debug, Default)]
struct ServiceAcc {
    connections: u64,
    stalled: u64,
    stall_ns: i64,
    by: ByCause,
}

/// Everything retired so far.
#[derive(Debug, Default)]
pub(crate) struct Rollup {
    streams: Vec<StreamLedger>,
    by: ByCause,
    /// Every server endpoint seen, with its index in `services`.
    service_index: HashMap<Endpoint, u32>,
    services: Vec<(Endpoint, ServiceAcc)>,
}

impl Rollup {
    /// The index of `server`'s service (added when new).
    fn service(&mut self, server: Endpoint) -> usize {
        let next = self.services.len();
        let i = *self
            .service_index
            .entry(server)
            .or_insert_with(|| u32::try_from(next).unwrap_or(u32::MAX));
        let i = i as usize;
        if i == next {
            self.services.push((server, ServiceAcc::default()));
        }
        i
    }

    /// A connection to `server` started: the index of its service (see
    /// [`Rollup::server`]).
    pub fn connection(&mut self, server: Endpoint) -> u32 {
        let i = self.service(server);
        if let Some((_, acc)) = self.services.get_mut(i) {
            acc.connections += 1;
        }
        u32::try_from(i).unwrap_or(u32::MAX)
    }

    /// The server endpoint of service index `i` (from [`Rollup::connection`]).
    pub fn server(&self, i: u32) -> Option<Endpoint> {
        self.services.get(i as usize).map(|(e, _)| *e)
    }

    /// The service index of `server`, if a connection to it started.
    pub fn service_of(&self, server: &Endpoint) -> Option<u32> {
        self.service_index.get(server).copied()
    }

    /// Room for `n` more stream ledgers.
    pub fn reserve_streams(&mut self, n: usize) {
        self.streams.reserve_exact(n);
    }

    /// A stream is done: count its stalls in the roll-ups, and keep its
    /// ledger if it stalled with a cause in `keep`. Returns the kept
    /// ledger's index ([`Rollup::kept`]), if it was kept.
    pub fn stream(&mut self, st: StreamState, keep: CauseSet) -> Option<usize> {
        let out = st.out?;
        let total: i64 = out
            .by_cause
            .iter()
            .fold(0i64, |acc, x| acc.saturating_add(x.1));
        if total == 0 {
            return None;
        }
        let StreamOut {
            mut entries,
            dropped,
            by_cause,
        } = *out;
        entries.sort_by_key(|e| (e.end_ns, e.start_ns));
        entries.shrink_to_fit();
        let kept_ns = entries.iter().fold(0i64, |acc, e| {
            acc.saturating_add(e.end_ns.saturating_sub(e.start_ns))
        });
        let dropped_ns = total.saturating_sub(kept_ns);
        let stall_ns = union_ns(&entries).saturating_add(dropped_ns.max(0));
        let first = st.first_ts.get().map_or(0, |t| t.0);
        let last = st.last_ts.get().map_or(0, |t| t.0);
        let span = last.saturating_sub(first).max(0).max(stall_ns);
        add(&mut self.by, &by_cause);
        let i = self.service(st.server);
        let (_, svc) = self.services.get_mut(i)?;
        svc.stalled += 1;
        svc.stall_ns = svc.stall_ns.saturating_add(stall_ns);
        add(&mut svc.by, &by_cause);
        let wanted = StallCause::ALL
            .iter()
            .zip(by_cause.iter())
            .any(|(c, (n, _))| *n > 0 && keep.contains(*c));
        if !wanted {
            return None;
        }
        self.streams.push(StreamLedger {
            tcp_stream: st.id,
            client: st.client,
            server: st.server,
            first_ns: first,
            last_ns: last,
            duration_ms: ms(last.saturating_sub(first)),
            stall_ms: ms(stall_ns),
            time_lost_by_cause: cause_times(&by_cause),
            summary: summary(stall_ns, span, &by_cause),
            stalls: entries,
            stalls_dropped: dropped,
        });
        Some(self.streams.len() - 1)
    }

    /// The kept ledger at `index` ([`Rollup::stream`]'s result).
    pub fn kept(&self, index: usize) -> Option<&StreamLedger> {
        self.streams.get(index)
    }

    /// The capture's report.
    pub fn report(mut self, min_stall_ns: i64) -> LedgerReport {
        // Mostly pushed in stream order already: a stable sort would
        // allocate half the ledgers again as scratch.
        if !self.streams.is_sorted_by_key(|s| s.tcp_stream) {
            self.streams.sort_by_key(|s| s.tcp_stream);
        }
        let mut services: Vec<ServiceLedger> = self
            .services
            .into_iter()
            .filter(|(_, a)| a.stalled > 0)
            .map(|(server, a)| ServiceLedger {
                server,
                connections: a.connections.max(a.stalled),
                stalled_connections: a.stalled,
                stall_ms: ms(a.stall_ns),
                time_lost_by_cause: cause_times(&a.by),
            })
            .collect();
        services.sort_by(|a, b| {
            b.stall_ms
                .total_cmp(&a.stall_ms)
                .then_with(|| a.server.cmp(&b.server))
        });
        let total: i64 = self.by.iter().fold(0i64, |acc, x| acc.saturating_add(x.1));
        LedgerReport {
            stall_threshold_ms: ms(min_stall_ns),
            total_stall_ms: ms(total),
            time_lost_by_cause: cause_times(&self.by),
            services,
            streams: self.streams,
        }
    }
}
