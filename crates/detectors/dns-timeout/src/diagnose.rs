//! Diagnosis: which lookups lost a query, in which shape, and what it cost
//! (plain data; the prose is in `render.rs`).

use crate::ladder::{ladder_for, Ladder, GLIBC_DEFAULT_TIMEOUT_NS};
use crate::lookup::Lookup;
use foldhash::HashMap;
use pcapsleuth_core::{FlowRef, FrameNo, Protocol, Severity, StreamRef};
use pcapsleuth_decode::dns::{qtype_name, QTYPE_A, QTYPE_AAAA};
use pcapsleuth_detect::timer::timer_window;
use pcapsleuth_detect::Bound;
use serde::Serialize;
use std::net::IpAddr;

/// The A and AAAA queries of one `getaddrinfo()` leave within this (ns) of
/// each other (glibc sends them with one `sendmmsg()`, or the second right
/// after the first answer); 1 s covers the single-request modes.
pub const PAIR_WINDOW_NS: i64 = 1_000_000_000;

/// A TCP query for the same id and name this soon (ns) after a truncated UDP
/// answer is the fallback the TC bit asked for (glibc `send_vc()` follows at once).
pub const TCP_FALLBACK_WINDOW_NS: i64 = 10_000_000_000;

/// Distinct query names given a per-name total (lookups, answers; the
/// `name_lookups` of a finding) at most. A lookup that may have lost time
/// always counts under its name; beyond this many names, a lookup of a
/// further name that was answered at once counts in no per-name total
/// (and in [`crate::chunk::Chunker::untallied`]). What it bounds is a capture of a new
/// name in every query (a random-subdomain flood): without it, every name
/// of the capture was kept to the end.
pub const MAX_NAME_TALLIES: usize = 1 << 18;

/// The shape of a lookup that lost time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// A query got no answer and was re-sent after the resolver's timeout.
    Resent,
    /// One query of the parallel A/AAAA pair got no answer; glibc re-sent
    /// both (single-request mode): the answered one is collateral.
    PairResent,
    /// One query of the pair got no answer and was never re-sent while its
    /// sibling was answered: the lookup waited the full timeout
    /// (`single-request-reopen`, or glibc's last fallback step).
    UnansweredNotResent,
    /// No transmission of the query was ever answered.
    NeverAnswered,
    /// Every transmission was answered, yet the query was re-sent (the
    /// answer was lost after the capture point, or its sibling's loss is not
    /// in the capture).
    ResentAfterAnswer,
    /// Answered, re-sent one timeout later together with the first sighting
    /// of its A/AAAA sibling: glibc repeated the pair because the sibling's
    /// first query timed out, and that query never reached this capture
    /// point (seed 002 seen from the uplink, after the DNAT).
    SiblingLostBeforeCapture,
    /// Still unanswered when the capture ended, before the timeout: not a loss.
    Censored,
}

impl Shape {
    /// Severity of the shape (before the one-direction downgrade).
    pub fn severity(self, transmissions: usize) -> Severity {
        match self {
            Shape::NeverAnswered if transmissions > 1 => Severity::Error,
            Shape::Resent
            | Shape::PairResent
            | Shape::UnansweredNotResent
            | Shape::NeverAnswered
            | Shape::SiblingLostBeforeCapture => Severity::Warning,
            Shape::ResentAfterAnswer | Shape::Censored => Severity::Info,
        }
    }
}

/// Evidence of one diagnosed lookup (keys as emitted; units in the names).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DnsTimeoutEvidence {
    /// Queried name (presentation form, lower case).
    pub qname: String,
    /// QTYPE name ("A", "AAAA", or "TYPEnn").
    pub qtype: String,
    /// DNS transaction id.
    pub dns_id: u16,
    /// Client socket of the first transmission, "ip:port".
    pub client: String,
    /// Resolver the first transmission went to, "ip:port" (the service address as the client saw it).
    pub resolver: String,
    /// [`Shape`].
    pub shape: Shape,
    /// Transmissions of the query (copies on other interfaces or after NAT counted once).
    pub transmissions: usize,
    /// Frames of transmissions that got no answer (the losses).
    pub unanswered_frames: Vec<u64>,
    /// Frames of the re-sends (every transmission after the first).
    pub retry_frames: Vec<u64>,
    /// Frame of the answer that ended the lookup, if any.
    pub answer_frame: Option<u64>,
    /// Gaps between successive transmissions, ms.
    pub gaps_ms: Vec<f64>,
    /// The re-send ladder matched (see `ladder.rs`).
    pub ladder: String,
    /// Its short name (not serialised; for the summary).
    #[serde(skip)]
    pub ladder_short: String,
    /// Per-try timeout, ms: from this lookup's gaps, else from the client's
    /// other re-sent lookups (the nearest in time), else glibc's default 5000.
    pub timeout_ms: f64,
    /// Where `timeout_ms` comes from: "this lookup", "the client's other
    /// lookups" or "glibc default".
    pub timeout_source: &'static str,
    /// Time the lookup lost, ms: first transmission → the transmission that
    /// was answered; for a query never re-sent, the timeout it waited.
    pub time_lost_ms: f64,
    /// Every transmission left from the same client port.
    pub same_socket: bool,
    /// Re-sends with a new transaction id (Go's resolver: a new request and
    /// socket per try), linked by client, name and type and a timeout gap.
    pub new_id_resends: u32,
    /// Frames of the sibling query's re-sends that had already been answered
    /// (glibc repeats the pair): collateral, not losses.
    pub collateral_resend_frames: Vec<u64>,
    /// QTYPE of the sibling query of the A/AAAA pair, when captured.
    pub sibling_qtype: Option<String>,
    /// Frames of the sibling's transmissions.
    pub sibling_frames: Vec<u64>,
    /// The sibling's socket differs from this query's (`single-request-reopen`).
    pub sibling_other_socket: bool,
    /// An answer was truncated (TC) and the client asked again over TCP.
    pub truncated_tcp_fallback: bool,
    /// For a censored query: capture end − the query, ms.
    pub capture_end_after_query_ms: Option<f64>,
    /// Other sightings of the transmissions (other interfaces, before/after NAT).
    pub other_sightings: usize,
    /// UDP lookups of this name in the capture.
    pub name_lookups: usize,
    /// Of them, delayed by a lost query.
    pub name_lookups_delayed: usize,
    /// Time lost by lookups of this name, ms.
    pub name_time_lost_ms: f64,
    /// UDP lookups sent to this resolver.
    pub resolver_lookups: usize,
    /// Of them, delayed by a lost query.
    pub resolver_lookups_delayed: usize,
    /// Time lost by lookups to this resolver, ms.
    pub resolver_time_lost_ms: f64,
    /// Answers captured from this resolver (0: the capture may hold one direction only).
    pub resolver_answers: usize,
    /// ≥ 4 lookups to the resolver, a minority delayed, at least one of them
    /// by losing one query of a parallel A/AAAA pair, the rest answered at
    /// once: the shape of the conntrack insert race on DNAT (seed 002).
    pub burst_loss_shape: bool,
}

/// One diagnosed lookup.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnosis {
    /// Shape.
    pub shape: Shape,
    /// Severity.
    pub severity: Severity,
    /// Client socket → resolver of the first transmission.
    pub flow: FlowRef,
    /// Conversations: the query's own `udp.stream` first, then re-sends on
    /// other sockets and the sibling's.
    pub streams: Vec<StreamRef>,
    /// Cited frames.
    pub frames: Vec<u64>,
    /// First cited time, ns.
    pub start_ns: i64,
    /// Last cited time, ns.
    pub end_ns: i64,
    /// Typed evidence.
    pub evidence: DnsTimeoutEvidence,
}

/// ns → ms with 3 decimals.
pub fn ms(ns: i64) -> f64 {
    (ns as f64 / 1000.0).round() / 1000.0
}

/// QTYPE as text.
pub fn qtype_text(q: u16) -> String {
    qtype_name(q).map_or_else(|| format!("TYPE{q}"), str::to_string)
}

fn sibling_qtype(q: u16) -> Option<u16> {
    match q {
        QTYPE_A => Some(QTYPE_AAAA),
        QTYPE_AAAA => Some(QTYPE_A),
        _ => None,
    }
}

/// Which neighbour of a candidate its verdict names as the sibling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    /// [`Candidate::sibling`].
    Pair,
    /// [`Candidate::unseen_sibling`].
    Unseen,
}

/// Per-lookup verdict before aggregation.
#[derive(Debug, Clone)]
struct Verdict {
    /// Index into [`Concluded::candidates`].
    idx: usize,
    shape: Shape,
    sibling: Option<Which>,
    timeout_ns: i64,
    timeout_source: &'static str,
    ladder: Ladder,
    time_lost_ns: i64,
    censored_after_ns: Option<i64>,
}

/// Per name / per resolver totals.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    lookups: usize,
    delayed: usize,
    lost_ns: i64,
    answers: usize,
    /// Delayed lookups that lost one query of an A/AAAA pair.
    pair_losses: usize,
}

fn gaps(l: &Lookup) -> Vec<i64> {
    l.txs
        .windows(2)
        .map(|w| w[1].ts.saturating_sub(w[0].ts))
        .collect()
}

/// The per-try timeout a re-sent lookup shows, if its ladder gives one.
fn lookup_timeout(l: &Lookup) -> Option<i64> {
    let first = l.first()?;
    let changed = l.txs.iter().any(|t| t.server != first.server);
    ladder_for(&gaps(l), changed).timeout_ns()
}

/// The timeout of the client's re-sent lookup nearest in time to `ts`
/// (the list is in time order).
fn nearest_timeout(
    timeouts: &HashMap<IpAddr, Vec<(i64, i64)>>,
    ip: IpAddr,
    ts: i64,
) -> Option<i64> {
    let list = timeouts.get(&ip)?;
    let k = list.partition_point(|&(t0, _)| t0 < ts);
    [k.checked_sub(1), Some(k)]
        .into_iter()
        .flatten()
        .filter_map(|i| list.get(i))
        .min_by_key(|(t0, _)| t0.abs_diff(ts))
        .map(|&(_, t)| t)
}

/// First-transmission time of lookup `j` (`i64::MIN` when unknown).
fn first_ts(lookups: &[Lookup], j: usize) -> i64 {
    lookups
        .get(j)
        .and_then(Lookup::first)
        .map_or(i64::MIN, |f| f.ts)
}

/// The lookups of `list` (indices in first-transmission order) first sent
/// within `window` ns of `ts`.
fn near<'a>(
    lookups: &'a [Lookup],
    list: &'a [usize],
    ts: i64,
    window: u64,
) -> impl Iterator<Item = usize> + 'a {
    let lo = ts.saturating_sub_unsigned(window);
    let start = list.partition_point(|&j| first_ts(lookups, j) < lo);
    list.get(start..)
        .unwrap_or(&[])
        .iter()
        .copied()
        .take_while(move |&j| {
            first_ts(lookups, j).abs_diff(ts) <= window || first_ts(lookups, j) < ts
        })
}

/// Diagnose every UDP lookup. `capture_end_ns`: the last frame's time.
pub fn diagnose(lookups: &[Lookup], names: &[String], capture_end_ns: i64) -> Vec<Diagnosis> {
    let mut all = Concluded::default();
    all.conclude(lookups, 0..lookups.len(), usize::MAX);
    all.diagnose(names, capture_end_ns)
}

/// A UDP lookup that may have lost time (every lookup but one answered at
/// its first transmission), with what its verdict needs of the lookups
/// around it, resolved while they were all at hand
/// ([`Concluded::conclude`]).
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    lookup: Lookup,
    /// The other query of its A/AAAA pair ([`sibling_of`]).
    sibling: Option<Lookup>,
    /// The sibling first seen with its re-send ([`unseen_sibling`]).
    unseen_sibling: Option<Lookup>,
    /// A truncated answer was followed by the query over TCP ([`tcp_fallback`]).
    tcp_fallback: bool,
}

/// What the diagnosis needs of every concluded lookup of a capture, however
/// many passes ([`crate::chunk`]) concluded them: the candidates whole, the
/// re-sent lookups' timeouts per client, and lookups and answers counted per
/// name and per resolver. O(candidates + clients with re-sent lookups +
/// names + resolvers), not O(lookups), and at most [`MAX_NAME_TALLIES`]
/// names beyond the candidates'.
#[derive(Debug, Clone)]
pub(crate) struct Concluded {
    candidates: Vec<Candidate>,
    /// Per client: (first transmission time, its frame, timeout), ns.
    timeouts: HashMap<IpAddr, Vec<(i64, u64, i64)>>,
    /// Lookups and answers per name (the `delayed` fields stay 0 here).
    by_name: HashMap<u32, Tally>,
    /// The same per resolver.
    by_resolver: HashMap<pcapsleuth_core::Endpoint, Tally>,
    /// Lookups answered at once whose name found no room in `by_name`.
    untallied: Bound,
}

impl Default for Concluded {
    fn default() -> Self {
        Concluded {
            candidates: Vec::new(),
            timeouts: HashMap::default(),
            by_name: HashMap::default(),
            by_resolver: HashMap::default(),
            untallied: Bound::new("query names with per-name totals", MAX_NAME_TALLIES as u64)
                .with_effect(
                    "a finding's name_lookups leaves out the lookups of further names that were answered at once",
                ),
        }
    }
}

impl Concluded {
    /// Set `live[id]` for every name id kept: the candidates' (and their
    /// siblings') and the per-name totals'.
    pub(crate) fn mark_names(&self, live: &mut [bool]) {
        let lookups = self.candidates.iter().flat_map(|c| {
            std::iter::once(&c.lookup)
                .chain(c.sibling.as_ref())
                .chain(c.unseen_sibling.as_ref())
        });
        for id in lookups.map(|l| l.name).chain(self.by_name.keys().copied()) {
            if let Some(l) = live.get_mut(id as usize) {
                *l = true;
            }
        }
    }

    /// Lookups answered at once that no per-name total counts.
    pub(crate) fn untallied(&self) -> &Bound {
        &self.untallied
    }

    /// Conclude `lookups[i]` for every `i` of `which`: `lookups` holds every
    /// lookup that can be its sibling or its TCP fallback (those first sent
    /// within [`PAIR_WINDOW_NS`] of its transmissions or
    /// [`TCP_FALLBACK_WINDOW_NS`] after its answers).
    ///
    /// `name_cap`: names with a per-name total at most (beyond them a lookup
    /// answered at once counts under no name): [`MAX_NAME_TALLIES`] while
    /// chunks are concluded, none for the last one (whose names the chunk
    /// size bounds), so every refusal is known when
    /// [`crate::DnsTimeout`]'s limits are asked for, before the diagnosis.
    pub(crate) fn conclude(
        &mut self,
        lookups: &[Lookup],
        which: impl Iterator<Item = usize>,
        name_cap: usize,
    ) {
        let mut pairs: HashMap<(IpAddr, u32), Vec<usize>> = HashMap::default();
        for (i, l) in lookups.iter().enumerate().filter(|(_, l)| !l.tcp) {
            pairs.entry((l.client_ip, l.name)).or_default().push(i);
        }
        for l in which.filter_map(|i| lookups.get(i)).filter(|l| !l.tcp) {
            let Some(first) = l.first() else { continue };
            let answers = l.txs.iter().filter(|t| t.answer.is_some()).count();
            let answered_at_once = l.txs.len() == 1 && first.answer.is_some();
            let resolver = self.by_resolver.entry(first.server).or_default();
            resolver.lookups += 1;
            resolver.answers += answers;
            if answered_at_once
                && self.by_name.len() >= name_cap
                && !self.by_name.contains_key(&l.name)
            {
                self.untallied.refuse(FrameNo(first.frame));
            } else {
                let t = self.by_name.entry(l.name).or_default();
                t.lookups += 1;
                t.answers += answers;
            }
            if l.txs.len() > 1 {
                if let Some(t) = lookup_timeout(l) {
                    self.timeouts
                        .entry(l.client_ip)
                        .or_default()
                        .push((first.ts, first.frame, t));
                }
            }
            if answered_at_once {
                continue; // nothing lost
            }
            let neighbour = |j: Option<usize>| j.and_then(|j| lookups.get(j)).cloned();
            self.candidates.push(Candidate {
                lookup: l.clone(),
                sibling: neighbour(sibling_of(lookups, &pairs, l)),
                unseen_sibling: neighbour(unseen_sibling(lookups, &pairs, l)),
                tcp_fallback: tcp_fallback(lookups, l),
            });
        }
    }

    /// Candidates kept so far.
    pub(crate) fn candidates(&self) -> usize {
        self.candidates.len()
    }

    /// Diagnose the concluded lookups, in first-transmission order.
    /// `capture_end_ns`: the last frame's time.
    pub(crate) fn diagnose(mut self, names: &[String], capture_end_ns: i64) -> Vec<Diagnosis> {
        // First-transmission order, as one pass over the whole capture makes them.
        self.candidates
            .sort_by_key(|c| c.lookup.identity().unwrap_or((i64::MIN, 0)));
        let timeouts: HashMap<IpAddr, Vec<(i64, i64)>> = self
            .timeouts
            .into_iter()
            .map(|(ip, mut list)| {
                list.sort_by_key(|&(t0, frame, _)| (t0, frame));
                (ip, list.into_iter().map(|(t0, _, t)| (t0, t)).collect())
            })
            .collect();
        let cands = &self.candidates;
        let verdicts: Vec<Verdict> = cands
            .iter()
            .enumerate()
            .filter_map(|(i, c)| verdict(c, &timeouts, i, capture_end_ns))
            .collect();
        // Collateral re-sends are folded into their sibling's finding.
        let collateral: Vec<(i64, u64)> = verdicts
            .iter()
            .filter(|v| v.shape == Shape::PairResent)
            .filter_map(|v| sibling_lookup(cands, v).and_then(Lookup::identity))
            .collect();
        let verdicts: Vec<Verdict> = verdicts
            .into_iter()
            .filter(|v| {
                !(v.shape == Shape::ResentAfterAnswer
                    && cands
                        .get(v.idx)
                        .and_then(|c| c.lookup.identity())
                        .is_some_and(|id| collateral.contains(&id)))
            })
            .collect();
        let (by_name, by_resolver) = tallies(cands, &verdicts, self.by_name, self.by_resolver);
        verdicts
            .iter()
            .filter_map(|v| {
                let c = cands.get(v.idx)?;
                let first = c.lookup.first()?;
                let name = by_name.get(&c.lookup.name).copied().unwrap_or_default();
                let res = by_resolver.get(&first.server).copied().unwrap_or_default();
                build(names, c, v, name, res)
            })
            .collect()
    }
}

/// The lookup `v` names as its sibling.
fn sibling_lookup<'a>(cands: &'a [Candidate], v: &Verdict) -> Option<&'a Lookup> {
    let c = cands.get(v.idx)?;
    match v.sibling? {
        Which::Pair => c.sibling.as_ref(),
        Which::Unseen => c.unseen_sibling.as_ref(),
    }
}

/// The verdict on candidate `c` (index `i`), `None` when it lost nothing.
fn verdict(
    c: &Candidate,
    timeouts: &HashMap<IpAddr, Vec<(i64, i64)>>,
    i: usize,
    capture_end_ns: i64,
) -> Option<Verdict> {
    let l = &c.lookup;
    let first = l.first()?;
    let last = l.last()?;
    if l.txs.len() == 1 && first.answer.is_some() {
        return None; // answered at once: nothing lost
    }
    let client_timeout_ns = nearest_timeout(timeouts, l.client_ip, first.ts);
    let g = gaps(l);
    let changed = l.txs.iter().any(|t| t.server != first.server);
    let ladder = ladder_for(&g, changed);
    let (timeout_ns, timeout_source) = match (ladder.timeout_ns(), client_timeout_ns) {
        (Some(t), _) => (t, "this lookup"),
        (None, Some(t)) => (t, "the client's other lookups"),
        (None, None) => (GLIBC_DEFAULT_TIMEOUT_NS, "glibc default"),
    };
    let after_end = capture_end_ns.saturating_sub(last.ts);
    let censored = last.answer.is_none() && after_end <= timer_window(timeout_ns).1;
    let n = l.txs.len();
    let lost = l
        .txs
        .iter()
        .enumerate()
        .filter(|(k, t)| t.answer.is_none() && !(censored && *k + 1 == n))
        .count();
    let answered_at = l.txs.iter().find(|t| t.answer.is_some()).map(|t| t.ts);
    let mut sibling = c.sibling.as_ref().map(|_| Which::Pair);
    let sib = c.sibling.as_ref();
    let mut shape = if lost > 0 {
        if answered_at.is_none() && !censored {
            if n == 1 && sib.is_some_and(|s| s.txs.iter().any(|t| t.answer.is_some())) {
                Shape::UnansweredNotResent
            } else {
                Shape::NeverAnswered
            }
        } else if sib.is_some_and(|s| is_collateral(l, s)) {
            Shape::PairResent
        } else {
            Shape::Resent
        }
    } else if censored && n == 1 {
        Shape::Censored
    } else if n > 1 {
        match c.unseen_sibling {
            Some(_) => {
                sibling = Some(Which::Unseen);
                Shape::SiblingLostBeforeCapture
            }
            None => Shape::ResentAfterAnswer,
        }
    } else {
        return None;
    };
    if shape == Shape::NeverAnswered && n > 1 && censored {
        // Re-sent, the last try still open at the capture's end.
        shape = Shape::Resent;
    }
    let time_lost_ns = match shape {
        Shape::ResentAfterAnswer | Shape::SiblingLostBeforeCapture => {
            last.ts.saturating_sub(first.ts)
        }
        Shape::Resent | Shape::PairResent => answered_at
            .unwrap_or(last.ts.saturating_add(timeout_ns))
            .saturating_sub(first.ts),
        Shape::UnansweredNotResent => timeout_ns,
        Shape::NeverAnswered => last.ts.saturating_add(timeout_ns).saturating_sub(first.ts),
        Shape::Censored => 0,
    };
    Some(Verdict {
        idx: i,
        shape,
        sibling: if shape == Shape::NeverAnswered && n > 1 {
            None
        } else {
            sibling
        },
        timeout_ns,
        timeout_source,
        ladder,
        time_lost_ns,
        censored_after_ns: (shape == Shape::Censored).then_some(after_end),
    })
}

/// The other query of `l`'s A/AAAA pair: same client, same name, the other
/// type, first sent within [`PAIR_WINDOW_NS`].
fn sibling_of(
    lookups: &[Lookup],
    pairs: &HashMap<(IpAddr, u32), Vec<usize>>,
    l: &Lookup,
) -> Option<usize> {
    let want = sibling_qtype(l.qtype)?;
    let t0 = l.first()?.ts;
    near(
        lookups,
        pairs.get(&(l.client_ip, l.name))?,
        t0,
        PAIR_WINDOW_NS.unsigned_abs(),
    )
    .find(|&j| {
        lookups.get(j).is_some_and(|s| {
            s.qtype == want
                && s.first()
                    .is_some_and(|f| f.ts.abs_diff(t0) <= PAIR_WINDOW_NS.unsigned_abs())
        })
    })
}

/// The sibling (other type of the A/AAAA pair, same client and name) first
/// seen together with `l`'s first re-send, long after `l`'s first query:
/// glibc re-sent the pair, and the sibling's first query is not in the capture.
fn unseen_sibling(
    lookups: &[Lookup],
    pairs: &HashMap<(IpAddr, u32), Vec<usize>>,
    l: &Lookup,
) -> Option<usize> {
    let want = sibling_qtype(l.qtype)?;
    let t0 = l.first()?.ts;
    let resend = l.txs.get(1)?.ts;
    let window = PAIR_WINDOW_NS.unsigned_abs();
    near(lookups, pairs.get(&(l.client_ip, l.name))?, resend, window).find(|&j| {
        lookups.get(j).is_some_and(|s| {
            s.qtype == want
                && s.first()
                    .is_some_and(|f| f.ts.abs_diff(resend) <= window && f.ts.abs_diff(t0) > window)
        })
    })
}

/// Whether sibling `s` was answered and re-sent together with `l`'s re-send
/// (glibc's single-request switch repeats the pair).
fn is_collateral(l: &Lookup, s: &Lookup) -> bool {
    let (Some(lr), Some(sr)) = (l.txs.get(1), s.txs.get(1)) else {
        return false;
    };
    s.first().is_some_and(|f| f.answer.is_some())
        && lr.ts.abs_diff(sr.ts) <= PAIR_WINDOW_NS.unsigned_abs()
}

/// Totals per name and per resolver: the lookups and answers counted as
/// they were concluded (`by_name`, `by_resolver`), plus the delays of the
/// verdicts that are losses.
fn tallies(
    cands: &[Candidate],
    verdicts: &[Verdict],
    mut by_name: HashMap<u32, Tally>,
    mut by_res: HashMap<pcapsleuth_core::Endpoint, Tally>,
) -> (
    HashMap<u32, Tally>,
    HashMap<pcapsleuth_core::Endpoint, Tally>,
) {
    for v in verdicts
        .iter()
        .filter(|v| v.shape.severity(2) >= Severity::Warning)
    {
        let Some(c) = cands.get(v.idx) else {
            continue;
        };
        let l = &c.lookup;
        let Some(first) = l.first() else { continue };
        for t in [
            by_name.entry(l.name).or_default(),
            by_res.entry(first.server).or_default(),
        ] {
            t.delayed += 1;
            t.lost_ns = t.lost_ns.saturating_add(v.time_lost_ns);
            if matches!(
                v.shape,
                Shape::PairResent | Shape::UnansweredNotResent | Shape::SiblingLostBeforeCapture
            ) {
                t.pair_losses += 1;
            }
        }
    }
    (by_name, by_res)
}

/// Whether the client asked again over TCP after a truncated answer.
fn tcp_fallback(lookups: &[Lookup], l: &Lookup) -> bool {
    l.txs.iter().filter_map(|t| t.answer).any(|a| {
        a.truncated
            && lookups.iter().any(|o| {
                o.tcp
                    && o.client_ip == l.client_ip
                    && o.id == l.id
                    && o.name == l.name
                    && o.first().is_some_and(|f| {
                        f.ts >= a.ts && f.ts.saturating_sub(a.ts) <= TCP_FALLBACK_WINDOW_NS
                    })
            })
    })
}

fn build(
    names: &[String],
    c: &Candidate,
    v: &Verdict,
    name: Tally,
    res: Tally,
) -> Option<Diagnosis> {
    let l = &c.lookup;
    let first = l.first()?;
    let last = l.last()?;
    let sib = match v.sibling {
        Some(Which::Pair) => c.sibling.as_ref(),
        Some(Which::Unseen) => c.unseen_sibling.as_ref(),
        None => None,
    };
    let mut frames: Vec<u64> = Vec::new();
    let mut streams: Vec<StreamRef> = Vec::new();
    let mut times: Vec<i64> = Vec::new();
    for t in cited(&l.txs)
        .into_iter()
        .chain(sib.into_iter().flat_map(|s| cited(&s.txs)))
    {
        frames.push(t.frame);
        times.push(t.ts);
        if let Some(a) = t.answer {
            frames.push(a.frame);
            times.push(a.ts);
        }
        if let Some(s) = t.stream {
            if !streams.contains(&StreamRef::udp(s)) {
                streams.push(StreamRef::udp(s));
            }
        }
    }
    let collateral: Vec<u64> = match (v.shape, sib) {
        (Shape::PairResent, Some(s)) => s.txs.iter().skip(1).map(|t| t.frame).collect(),
        _ => Vec::new(),
    };
    let severity = if res.answers == 0 {
        Severity::Info
    } else {
        v.shape.severity(l.txs.len())
    };
    let n = l.txs.len();
    let evidence = DnsTimeoutEvidence {
        qname: names.get(l.name as usize).cloned().unwrap_or_default(),
        qtype: qtype_text(l.qtype),
        dns_id: l.id,
        client: endpoint_text(&first.client),
        resolver: endpoint_text(&first.server),
        shape: v.shape,
        transmissions: n,
        unanswered_frames: l
            .txs
            .iter()
            .enumerate()
            .filter(|(k, t)| t.answer.is_none() && !(v.shape == Shape::Censored && *k + 1 == n))
            .map(|(_, t)| t.frame)
            .collect(),
        retry_frames: l.txs.iter().skip(1).map(|t| t.frame).collect(),
        answer_frame: l.txs.iter().rev().find_map(|t| t.answer.map(|a| a.frame)),
        gaps_ms: gaps(l).into_iter().take(MAX_CITED_TXS).map(ms).collect(),
        ladder: v.ladder.label(),
        ladder_short: v.ladder.short(),
        timeout_ms: ms(v.timeout_ns),
        timeout_source: v.timeout_source,
        time_lost_ms: ms(v.time_lost_ns),
        same_socket: l.txs.iter().all(|t| t.client == first.client),
        new_id_resends: l.new_id_resends,
        collateral_resend_frames: collateral,
        sibling_qtype: sib.map(|s| qtype_text(s.qtype)),
        sibling_frames: sib.map_or_else(Vec::new, |s| s.txs.iter().map(|t| t.frame).collect()),
        sibling_other_socket: sib
            .and_then(|s| s.first())
            .is_some_and(|s| s.client != first.client),
        truncated_tcp_fallback: c.tcp_fallback,
        capture_end_after_query_ms: v.censored_after_ns.map(ms),
        other_sightings: l.txs.iter().map(|t| t.copies.len()).sum(),
        name_lookups: name.lookups,
        name_lookups_delayed: name.delayed,
        name_time_lost_ms: ms(name.lost_ns),
        resolver_lookups: res.lookups,
        resolver_lookups_delayed: res.delayed,
        resolver_time_lost_ms: ms(res.lost_ns),
        resolver_answers: res.answers,
        burst_loss_shape: res.lookups >= 4 && res.pair_losses >= 1 && res.delayed * 2 < res.lookups,
    };
    Some(Diagnosis {
        shape: v.shape,
        severity,
        flow: FlowRef {
            protocol: Protocol::Udp,
            client: first.client.addr.to_string(),
            client_port: first.client.port,
            server: first.server.addr.to_string(),
            server_port: first.server.port,
        },
        streams,
        frames,
        start_ns: times.iter().copied().min().unwrap_or(first.ts),
        end_ns: times.iter().copied().max().unwrap_or(last.ts),
        evidence,
    })
}

/// Most transmissions of one lookup cited (frames) and gaps listed: a client
/// that reuses one id for the same name (a constant-id stub) can make one
/// lookup of thousands of transmissions.
pub const MAX_CITED_TXS: usize = 16;

/// The transmissions cited: all of them, or for a long lookup the first
/// ones, every unanswered one with the one after it, and the last.
fn cited(txs: &[crate::lookup::Tx]) -> Vec<&crate::lookup::Tx> {
    if txs.len() <= MAX_CITED_TXS {
        return txs.iter().collect();
    }
    txs.iter()
        .enumerate()
        .filter(|(k, t)| {
            *k < 4
                || *k + 1 == txs.len()
                || t.answer.is_none()
                || k.checked_sub(1)
                    .and_then(|p| txs.get(p))
                    .is_some_and(|p| p.answer.is_none())
        })
        .map(|(_, t)| t)
        .collect()
}

/// "ip:port", IPv6 in brackets.
pub fn endpoint_text(e: &pcapsleuth_core::Endpoint) -> String {
    match e.addr {
        IpAddr::V4(a) => format!("{a}:{}", e.port),
        IpAddr::V6(a) => format!("[{a}]:{}", e.port),
    }
}
