//! The decision: which connection setups were delayed, how they ended and what
//! the rest of the capture says about them. Plain data; no prose (that is
//! [`crate::render`]).

use crate::attempt::{Attempt, Tx};
use crate::ladder::{ladder_for, ladder_joined, next_wait_ns};
use crate::SynRetransmit;
use pcapsleuth_core::time::ns_to_ms;
use pcapsleuth_core::{Endpoint, FlowRef, FrameNo, StreamId};
use pcapsleuth_detect::timer::matches_timer;
use pcapsleuth_detect::{FinishContext, Severity};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr};

/// A client failing to connect to at least this many distinct services
/// (ip:port) in one capture is sweeping (port scan, P2P peer list): its
/// unanswered SYNs are reported as info (public corpus `gnutella.pcap`).
const SWEEP_MIN_SERVICES: usize = 5;

/// SYN retries all sooner than this (ns, Linux `TCP_RTO_MIN` 200 ms) are not
/// a kernel SYN timer (nmap's probes repeat at ~175 ms).
const TOOL_RETRY_GAP_NS: i64 = 200_000_000;

/// Two SYNs with one ISN to one server this close (ns) are one connection seen
/// before and after NAT (seed 002: veth/cni0 vs eth0).
const SAME_ISN_WINDOW_NS: i64 = 100_000_000;

/// How the handshake of a delayed connection ended, in the order the summary
/// tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The server answered and re-sent its SYN/ACK, and the client never
    /// acknowledged it (evidence `synack_unacknowledged`).
    SynackUnacknowledged,
    /// The handshake completed after the delay (evidence `connected`).
    Connected,
    /// The server sent a RST after the retries (evidence `refused`).
    Refused,
    /// No SYN/ACK was captured and the client never went on.
    NeverAnswered,
    /// No SYN/ACK was captured, but the capture (of the interface the last
    /// SYN was seen on) ended before the next retry was due: censored, not
    /// concluded (evidence `capture_end_after_last_syn_ms`). Info.
    StillUnanswered,
}

/// The per-service shape the connection is part of (README "What it looks
/// for": a minority of ≥ 4 connections to one service delayed by ≈1–3 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceShape {
    /// No shape: one lost SYN, or most connections delayed.
    None,
    /// The shape of the SNAT/conntrack insert race (seed 002), or of a full
    /// listen queue (evidence `conntrack_race_shape`).
    ConntrackRace,
    /// The same shape on a host-local path, where there is no NAT: a full
    /// listen queue (evidence `burst_drop_shape` without `conntrack_race_shape`).
    ListenQueue,
}

/// Why a finding is only info.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InfoReason {
    /// The client failed to reach ≥ 5 distinct services: a port or address
    /// sweep (evidence `client_failed_services`).
    Sweep,
    /// Every SYN retry came sooner than 200 ms (`TCP_RTO_MIN`): a raw-socket
    /// tool, not a kernel SYN timer; the connection was neither set up nor
    /// refused.
    RawSocketTool,
}

/// The SYN/ACKs captured for a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SynackTimes {
    /// Frame of the first SYN/ACK.
    pub first_frame: FrameNo,
    /// First SYN → first SYN/ACK (ns).
    pub first_after_syn_ns: i64,
    /// SYN/ACKs sent (first and re-sent, other sightings excluded).
    pub count: usize,
    /// First → last SYN/ACK (ns).
    pub span_ns: i64,
}

/// Another `tcp.stream` showing the same SYN only from a retry on: the
/// connection seen after NAT, whose first SYN died inside the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatView {
    /// That view's `tcp.stream`.
    pub stream: StreamId,
    /// That view's client ("ip:port", after NAT; empty if unknown).
    pub client: String,
}

/// One delayed connection setup, diagnosed.
#[derive(Debug, Clone)]
pub struct Diagnosis {
    /// The connection's `tcp.stream`.
    pub stream: StreamId,
    /// The flow (client → server) as the flow table saw it.
    pub flow: Option<FlowRef>,
    /// The SYN sender, "ip:port" (empty if unknown).
    pub client: String,
    /// The SYN's initial sequence number.
    pub isn: u32,
    /// Warning (set up or refused late), error (never set up), or info
    /// ([`Diagnosis::info_reason`]).
    pub severity: Severity,
    /// How the handshake ended.
    pub outcome: Outcome,
    /// The per-service shape the connection is part of.
    pub shape: ServiceShape,
    /// Why the finding is only info, if it is.
    pub info_reason: Option<InfoReason>,
    /// The evidence `delay_ms`, in ns.
    pub delay_ns: i64,
    /// The evidence `gaps_ms`, in ns.
    pub gaps_ns: Vec<i64>,
    /// Short name of the retry ladder, for the summary (the full label is
    /// the evidence `ladder`).
    pub ladder_short: String,
    /// The SYN/ACKs captured, if any.
    pub synacks: Option<SynackTimes>,
    /// A SYN/ACK was captured, yet the client re-sent its SYN: that SYN/ACK
    /// was lost between the capture point and the client.
    pub synack_lost_before_client: bool,
    /// No SYN/ACK in the capture, but the client's ACK shows it arrived
    /// (half-duplex capture).
    pub synack_not_captured: bool,
    /// The NAT view showing the first SYN dropped inside the host, if any.
    pub nat_view: Option<NatView>,
    /// Cited frames: SYNs, SYN/ACKs, RST, handshake ACK or first ACK, and the
    /// NAT view's SYNs (unsorted).
    pub frames: Vec<FrameNo>,
    /// Earliest cited event of this stream, ns since the Unix epoch.
    pub start_ns: i64,
    /// Latest cited event of this stream, ns since the Unix epoch.
    pub end_ns: i64,
    /// The finding's evidence.
    pub evidence: SynRetransmitEvidence,
}

/// The `evidence` object of a `syn-retransmit` finding; the README's
/// "Evidence" section is its reference. Field order is the JSON key order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SynRetransmitEvidence {
    /// First SYN → the SYN/ACK the client acknowledged (ms).
    pub delay_ms: f64,
    /// SYNs sent, duplicates excluded (count).
    pub syn_count: usize,
    /// SYN/ACKs re-sent with the same ISN (count).
    pub synack_retransmits: u32,
    /// Time between successive SYNs, or SYN/ACKs when only those were re-sent (ms).
    pub gaps_ms: Vec<f64>,
    /// The first retransmission's wait (ms), `null` when unknown.
    pub rto_ms: Option<f64>,
    /// The retry schedule matched.
    pub ladder: String,
    /// Handshake completed, or its ACK merely not captured.
    pub connected: bool,
    /// The server re-sent its SYN/ACK and the client never acknowledged it.
    pub synack_unacknowledged: bool,
    /// Client SYNs re-sent after a SYN/ACK was captured (count).
    pub syns_after_synack: u32,
    /// Distinct services (ip:port) this client failed to connect to (count).
    pub client_failed_services: usize,
    /// RST after the retries.
    pub refused: bool,
    /// Other sightings of the SYNs and SYN/ACKs (count).
    pub duplicate_sightings: usize,
    /// The server, "ip:port".
    pub service: String,
    /// Connections to the service answered or delayed in the capture (count).
    pub service_connections: u64,
    /// Of those, delayed (count).
    pub service_delayed: u64,
    /// The conntrack-race shape (never on loopback).
    pub conntrack_race_shape: bool,
    /// The same shape, whatever the cause.
    pub burst_drop_shape: bool,
    /// `tcp.stream`s showing the same SYN (ISN, server): NAT views.
    pub same_isn_streams: Vec<StreamId>,
    /// A NAT view shows the SYN only from a retry on.
    pub dropped_between_capture_points: bool,
    /// Only when the SYN was still unanswered when the capture ended before
    /// its next retry was due: last SYN → the last frame captured on its
    /// interface (ms). Omitted otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture_end_after_last_syn_ms: Option<f64>,
    /// With `capture_end_after_last_syn_ms`: the nominal wait after the last
    /// SYN before the next retry (or the give-up) of the schedule matched
    /// (ms). Omitted otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_retry_due_ms: Option<f64>,
}

/// A SYN still unanswered when the capture ended, before its next retry was due.
#[derive(Debug, Clone, Copy)]
struct OpenAtEnd {
    /// Last SYN → end of its interface's capture (ns).
    after_last_ns: i64,
    /// Nominal wait before the next retry (ns, [`next_wait_ns`]).
    next_wait_ns: i64,
}

/// Whether a delay looks like the conntrack race of seed 002 (≈1, 2 or 3 s).
fn race_sized(delay_ns: i64) -> bool {
    [1_000_000_000i64, 2_000_000_000, 3_000_000_000]
        .iter()
        .any(|&n| matches_timer(delay_ns, n))
}

fn sock(e: Endpoint) -> String {
    SocketAddr::new(e.addr, e.port).to_string()
}

/// Connections to one service (server ip:port) over the capture.
#[derive(Default)]
struct ServiceStats {
    connections: u64,
    delayed: u64,
    race_sized: u64,
}

/// The hand-rolled NAT join: attempts that are one SYN seen before and after
/// NAT (same ISN, same server, overlapping in time: seed 002's veth/cni0 vs
/// eth0 views).
struct SameIsn {
    /// Server "ip:port" of each attempt (by index).
    server_keys: Vec<Option<String>>,
    by_isn: HashMap<(String, u32), Vec<usize>>,
}

impl SameIsn {
    fn new(d: &SynRetransmit, attempts: &[Attempt], ctx: &FinishContext) -> Self {
        let server_keys: Vec<Option<String>> = attempts
            .iter()
            .map(|a| d.server_of(a, ctx).map(|(_, s)| sock(s)))
            .collect();
        let mut by_isn: HashMap<(String, u32), Vec<usize>> = HashMap::new();
        for (i, a) in attempts.iter().enumerate() {
            if let Some(Some(k)) = server_keys.get(i) {
                by_isn.entry((k.clone(), a.isn.0)).or_default().push(i);
            }
        }
        SameIsn {
            server_keys,
            by_isn,
        }
    }

    /// Indexes of the other attempts with attempt `i`'s ISN and server whose
    /// SYN spans overlap its own (symmetric: either view finds the other).
    fn twins(&self, attempts: &[Attempt], i: usize) -> Vec<usize> {
        let (Some(a), Some(Some(k))) = (attempts.get(i), self.server_keys.get(i)) else {
            return Vec::new();
        };
        let (Some(first), Some(last)) = (a.syns.first(), a.syns.last()) else {
            return Vec::new();
        };
        self.by_isn
            .get(&(k.clone(), a.isn.0))
            .into_iter()
            .flatten()
            .copied()
            .filter(|&j| j != i)
            .filter(|&j| {
                attempts
                    .get(j)
                    .is_some_and(|b| match (b.syns.first(), b.syns.last()) {
                        (Some(bf), Some(bl)) => {
                            bf.ts.0 <= last.ts.0.saturating_add(SAME_ISN_WINDOW_NS)
                                && bl.ts.0 >= first.ts.0.saturating_sub(SAME_ISN_WINDOW_NS)
                        }
                        _ => false,
                    })
            })
            .collect()
    }
}

/// What the whole capture says, computed once before the per-connection
/// diagnosis.
struct CaptureFacts {
    same_isn: SameIsn,
    services: BTreeMap<String, ServiceStats>,
    /// Per client address: distinct services it failed to connect to.
    client_failed: HashMap<IpAddr, BTreeSet<String>>,
}

impl SynRetransmit {
    /// Diagnose every delayed connection setup of the capture (one
    /// [`Diagnosis`] per connection; a connection refused at once is not one).
    pub fn diagnose(&self, ctx: &FinishContext) -> Vec<Diagnosis> {
        let attempts = self.attempts_for(ctx);
        let same_isn = SameIsn::new(self, &attempts, ctx);
        let facts = CaptureFacts {
            services: Self::service_stats(&attempts, &same_isn),
            client_failed: self.client_failures(&attempts, ctx, &same_isn),
            same_isn,
        };
        attempts
            .iter()
            .enumerate()
            .filter(|(_, a)| a.delayed() && !a.refused_at_once())
            .filter_map(|(i, a)| self.diagnose_attempt(&attempts, i, a, ctx, &facts))
            .collect()
    }

    /// Per-service statistics over every attempt that got an answer or was
    /// delayed; NAT views of one connection count once.
    fn service_stats(attempts: &[Attempt], same_isn: &SameIsn) -> BTreeMap<String, ServiceStats> {
        let mut services: BTreeMap<String, ServiceStats> = BTreeMap::new();
        for (i, a) in attempts.iter().enumerate() {
            if !(a.answered() || a.delayed()) {
                continue;
            }
            let Some(Some(key)) = same_isn.server_keys.get(i) else {
                continue;
            };
            let twins = same_isn.twins(attempts, i);
            if twins.iter().any(|&j| {
                let b = attempts.get(j);
                // Keep the delayed view; between equals keep the first.
                b.is_some_and(|b| {
                    (b.delayed() && !a.delayed()) || (b.delayed() == a.delayed() && j < i)
                })
            }) {
                continue;
            }
            let st = services.entry(key.clone()).or_default();
            st.connections += 1;
            if a.delayed() && !a.refused_at_once() {
                st.delayed += 1;
                if a.connected() && race_sized(a.delay_ns()) {
                    st.race_sized += 1;
                }
            }
        }
        services
    }

    /// Per client address: distinct services it failed to connect to (never
    /// answered, refused, or SYN/ACK never acknowledged).
    fn client_failures(
        &self,
        attempts: &[Attempt],
        ctx: &FinishContext,
        same_isn: &SameIsn,
    ) -> HashMap<IpAddr, BTreeSet<String>> {
        let mut client_failed: HashMap<IpAddr, BTreeSet<String>> = HashMap::new();
        for (i, a) in attempts.iter().enumerate() {
            if a.connected() {
                continue;
            }
            if let (Some((c, _)), Some(Some(key))) =
                (self.server_of(a, ctx), same_isn.server_keys.get(i))
            {
                client_failed.entry(c.addr).or_default().insert(key.clone());
            }
        }
        client_failed
    }

    /// The diagnosis of one delayed attempt (index `i`).
    fn diagnose_attempt(
        &self,
        attempts: &[Attempt],
        i: usize,
        a: &Attempt,
        ctx: &FinishContext,
        facts: &CaptureFacts,
    ) -> Option<Diagnosis> {
        let twins: Vec<&Attempt> = facts
            .same_isn
            .twins(attempts, i)
            .into_iter()
            .filter_map(|j| attempts.get(j))
            .collect();
        let first = a.syns.first()?;
        let ends = self.server_of(a, ctx);
        let service = ends.map(|(_, s)| sock(s)).unwrap_or_default();
        let client = ends.map(|(c, _)| sock(c)).unwrap_or_default();
        let st = facts.services.get(&service);
        let (svc_conn, svc_delayed) = st.map_or((0, 0), |s| (s.connections, s.delayed));
        // No NAT on loopback: the same shape there is a full listen queue.
        let loopback = ends.is_some_and(|(c, s)| c.addr.is_loopback() || c.addr == s.addr);
        // The same SYN seen in another stream (after NAT) only from a retry on:
        // the first SYN died inside the host, between the capture points.
        let nat_view = twins.iter().copied().find(|b| {
            b.syns
                .first()
                .zip(a.syns.get(1))
                .is_some_and(|(bf, second)| {
                    bf.ts.0 >= second.ts.0.saturating_sub(SAME_ISN_WINDOW_NS)
                })
        });
        // One delayed connection among many is one lost SYN, not a shape,
        // unless a NAT view shows it died inside the host (seed 002) or the
        // path is loopback (nothing but a full listen queue drops there).
        let burst_shape = st.is_some_and(|s| {
            s.connections >= 4
                && (s.delayed >= 2 || nat_view.is_some() || loopback)
                && s.delayed >= 1
                && s.delayed * 2 < s.connections
                && s.race_sized == s.delayed
        });
        let race = burst_shape && !loopback;
        let gaps = a.gaps_ns();
        let (ladder, ladder_short) = self.ladder_of(&gaps, first);
        let connected = a.connected();
        let refused = a.rst.is_some() && !connected;
        let unacked = a.synack_unacknowledged();
        let failed_services = ends
            .and_then(|(c, _)| facts.client_failed.get(&c.addr))
            .map_or(0, |s| s.len());
        let info_reason = info_reason(a, &gaps, failed_services, refused);
        let never_answered = !unacked && !connected && !refused;
        let open = never_answered
            .then(|| self.open_at_end(a, &gaps, first, ctx))
            .flatten();
        let (frames, start_ns, end_ns) = cited(a, nat_view, first);
        let delay_ns = a.delay_ns();
        let evidence = SynRetransmitEvidence {
            delay_ms: ns_to_ms(delay_ns),
            syn_count: a.syns.len(),
            synack_retransmits: a.synack_retransmits,
            gaps_ms: gaps.iter().map(|&g| ns_to_ms(g)).collect(),
            rto_ms: a
                .first_retx_wait_ns
                .or_else(|| gaps.first().copied())
                .map(ns_to_ms),
            ladder,
            connected,
            synack_unacknowledged: unacked,
            syns_after_synack: a.syns_after_synack,
            client_failed_services: failed_services,
            refused,
            duplicate_sightings: a.duplicates.len(),
            service,
            service_connections: svc_conn,
            service_delayed: svc_delayed,
            conntrack_race_shape: race,
            burst_drop_shape: burst_shape,
            same_isn_streams: twins.iter().map(|b| b.stream).collect(),
            dropped_between_capture_points: nat_view.is_some(),
            capture_end_after_last_syn_ms: open.map(|o| ns_to_ms(o.after_last_ns)),
            next_retry_due_ms: open.map(|o| ns_to_ms(o.next_wait_ns)),
        };
        Some(Diagnosis {
            stream: a.stream,
            flow: ctx.flow_ref(a.stream),
            client,
            isn: a.isn.0,
            severity: match info_reason {
                _ if open.is_some() => Severity::Info,
                Some(_) => Severity::Info,
                None if connected || refused => Severity::Warning,
                None => Severity::Error,
            },
            outcome: if unacked {
                Outcome::SynackUnacknowledged
            } else if connected {
                Outcome::Connected
            } else if refused {
                Outcome::Refused
            } else if open.is_some() {
                Outcome::StillUnanswered
            } else {
                Outcome::NeverAnswered
            },
            shape: match (race, burst_shape) {
                (true, _) => ServiceShape::ConntrackRace,
                (false, true) => ServiceShape::ListenQueue,
                (false, false) => ServiceShape::None,
            },
            info_reason,
            delay_ns,
            ladder_short,
            synacks: synack_times(a, first),
            synack_lost_before_client: a.syns_after_synack > 0 && !unacked && !a.synacks.is_empty(),
            synack_not_captured: a.synacks.is_empty() && a.went_on.is_some(),
            nat_view: nat_view.map(|b| NatView {
                stream: b.stream,
                client: self
                    .server_of(b, ctx)
                    .map(|(c, _)| sock(c))
                    .unwrap_or_default(),
            }),
            gaps_ns: gaps,
            frames,
            start_ns,
            end_ns,
            evidence,
        })
    }

    /// When the capture of the interface `a`'s last SYN was seen on (else
    /// the whole capture) ended before the next retry ([`next_wait_ns`]) was
    /// surely due ([`FinishContext::open_at_end`]): how long after the last
    /// SYN it ended. `None` when the retry was overdue, or the
    /// capture end is unknown.
    fn open_at_end(
        &self,
        a: &Attempt,
        gaps: &[i64],
        first: &Tx,
        ctx: &FinishContext,
    ) -> Option<OpenAtEnd> {
        let last = a.syns.last()?;
        let before = self.first_ts.map_or(0, |t0| first.ts.0.saturating_sub(t0));
        let next_wait_ns = next_wait_ns(gaps, before);
        let after_last_ns = ctx.open_at_end(Some(last.interface), last.ts, next_wait_ns)?;
        Some(OpenAtEnd {
            after_last_ns,
            next_wait_ns,
        })
    }

    /// The retry ladder of `gaps` (ns): the `ladder` evidence and the
    /// summary's short name. An unrecognised ladder may be a known one joined
    /// late, when the first captured SYN (`first`) came soon after the
    /// capture began.
    fn ladder_of(&self, gaps: &[i64], first: &Tx) -> (String, String) {
        match ladder_for(gaps) {
            ("unrecognised", _) => {
                let before = self.first_ts.map_or(0, |t0| first.ts.0.saturating_sub(t0));
                ladder_joined(gaps, before).unwrap_or_else(|| {
                    (
                        "unrecognised".to_string(),
                        "an unrecognised retry schedule".to_string(),
                    )
                })
            }
            (l, sh) => (l.to_string(), sh.to_string()),
        }
    }
}

/// Why the finding of `a` is only info, if it is: the client swept many
/// services, or (neither set up nor refused) every retry came sooner than
/// `TCP_RTO_MIN` (200 ms, Linux; RFC 6298 allows no less than 1 s).
fn info_reason(
    a: &Attempt,
    gaps: &[i64],
    failed_services: usize,
    refused: bool,
) -> Option<InfoReason> {
    let connected = a.connected();
    let tool_retries = a.syns.len() > 1 && gaps.iter().all(|&g| g < TOOL_RETRY_GAP_NS);
    if !connected && failed_services >= SWEEP_MIN_SERVICES {
        Some(InfoReason::Sweep)
    } else if tool_retries && !connected && !refused {
        Some(InfoReason::RawSocketTool)
    } else {
        None
    }
}

/// The SYN/ACK facts of `a`, relative to its first SYN `first`.
fn synack_times(a: &Attempt, first: &Tx) -> Option<SynackTimes> {
    let (f, l) = (a.synacks.first()?, a.synacks.last()?);
    Some(SynackTimes {
        first_frame: f.frame,
        first_after_syn_ns: f.ts.0.saturating_sub(first.ts.0),
        count: a.synacks.len(),
        span_ns: l.ts.0.saturating_sub(f.ts.0),
    })
}

/// Frames cited for `a` (and its NAT view's SYNs), and the time span of
/// `a`'s own events (ns).
fn cited(a: &Attempt, nat_view: Option<&Attempt>, first: &Tx) -> (Vec<FrameNo>, i64, i64) {
    let own = || {
        a.syns
            .iter()
            .chain(a.synacks.iter())
            .chain(a.rst.iter())
            .chain(a.handshake_ack.iter())
            .chain(a.went_on.iter())
    };
    let mut frames: Vec<FrameNo> = own().map(|t| t.frame).collect();
    frames.extend(nat_view.iter().flat_map(|b| b.syns.iter().map(|t| t.frame)));
    let start = own().map(|t| t.ts.0).min().unwrap_or(first.ts.0);
    let end = own().map(|t| t.ts.0).max().unwrap_or(first.ts.0);
    (frames, start, end)
}
