//! `syn-retransmit`: connection setup delayed because a SYN (or SYN/ACK) had to
//! be sent again.
//!
//! # Incident
//! Seed `002_2afaa283371823d2.txt` (Kubernetes/Docker SNAT): the conntrack
//! insert race in `nf_nat_l4proto_unique_tuple()` drops the first SYN of a
//! connection inside the host; the client's SYN timer re-sends it after 1 s
//! (and 3 s), so a minority of requests to one busy service take *exactly* 1 s
//! or 3 s longer while the rest connect at once.
//!
//! # Signature
//! In one `tcp.stream`, a SYN re-sent with the same initial sequence number
//! (ISN), or the SYN/ACK re-sent with the same ISN. Other sightings of the same
//! packet (another interface or VLAN, `SegmentEvent::duplicate_of`; the same
//! IPv4 ID or ID 0 / IPv6 within 100 ms; anything within 1 ms) are not
//! retransmissions; a repeat ≥ 1 ms later with a new non-zero IPv4 ID is one.
//! A SYN with a new ISN on the same ports is a new attempt.
//! A connection refused at once (RST answering the only SYN) is not flagged.
//!
//! # Evidence (one finding per affected connection)
//! - `delay_ms` (ms): first SYN → the SYN/ACK the client acknowledged (else the
//!   first SYN/ACK; if never answered, → the last SYN or the RST).
//! - `syn_count` (count): SYNs sent (first + retransmissions), duplicates excluded.
//! - `synack_retransmits` (count): SYN/ACKs re-sent with the same ISN.
//! - `gaps_ms` (array of ms): time between successive SYNs (or SYN/ACKs when
//!   only those were re-sent).
//! - `rto_ms` (ms): the first retransmission's wait (the initial RTO seen).
//! - `ladder` (string): the retry schedule matched (Linux classic 1, 2, 4, 8 s;
//!   1 s ×5 then doubling: Linux ≥ 6.5 `tcp_syn_linear_timeouts=4` or XNU
//!   `tcp_syn_backoff`, named XNU/macOS when more than the 7 SYNs a default
//!   Linux sends;
//!   Windows 3, 6 s; 3 s initial RTO of older stacks; "unrecognised"), with
//!   timer rounding tolerance from [`pcapsleuth_detect::timer`].
//! - `connected` (bool: handshake completed, or its ACK merely not captured),
//!   `refused` (bool: RST after the retries), `duplicate_sightings` (count).
//! - `synack_unacknowledged` (bool): the server re-sent its SYN/ACK and the
//!   client never acknowledged it (handshake never completed).
//! - `syns_after_synack` (count): client SYNs re-sent after a SYN/ACK was
//!   captured (that SYN/ACK was lost between the capture point and the client).
//! - `client_failed_services` (count): distinct services (ip:port) this client
//!   failed to connect to in the capture.
//! - `service` ("ip:port" of the server), `service_connections`,
//!   `service_delayed` (counts over the capture), `conntrack_race_shape` (bool:
//!   ≥ 4 connections to the service, a minority of them delayed by ≈1, 2 or 3 s,
//!   the rest prompt — seed 002; never on loopback, where there is no NAT),
//!   `burst_drop_shape` (bool: the same shape, whatever the cause: conntrack
//!   race or a full listen queue).
//! - `same_isn_streams` (array of `tcp.stream`): the same SYN (ISN, server)
//!   seen in other streams, i.e. before/after NAT on another interface;
//!   `dropped_between_capture_points` (bool): that other view shows the SYN
//!   only from a retry on, so the first SYN died inside the host (seed 002:
//!   seen on veth/cni0, never on eth0). Such views count once per service.
//!
//! # Severity
//! Warning when the connection was set up after the delay (or refused after
//! retries); error when the SYN was never answered or the SYN/ACK never
//! acknowledged. Info instead (also for refusals) when the client failed to reach ≥ 5
//! distinct services (a sweep: port scanner, P2P client trying stale peers;
//! public corpus `gnutella.pcap`) or when every retry came sooner than 200 ms
//! (`TCP_RTO_MIN`: a raw-socket tool such as nmap, not a kernel SYN timer).
//! The conntrack/listen-queue shape needs ≥ 2 delayed connections to the
//! service, unless a NAT view shows the drop (seed 002) or the path is loopback.
//!
//! # False positives
//! A capture that starts after the first SYN sees a retransmission as the
//! first SYN (delay under-counted). Port scanners and SYN floods re-send SYNs on
//! purpose. A capture point after the drop shows no retransmission at all (seed
//! 002 on `eth0`: the retry leaves with a new SNAT port, a new stream).
//!
//! # Remedy
//! Find where the SYN or SYN/ACK is dropped: capture on both sides of the
//! NAT/firewall; `conntrack -S` (`insert_failed`), SYN-flood protection, listen
//! queue overflows (`nstat TcpExtListenOverflows`). For the conntrack race:
//! `MASQUERADE --random-fully` (`NF_NAT_RANGE_PROTO_RANDOM_FULLY`) or a kernel
//! with conntrack clash resolution.

use pcapsleuth_core::time::ns_to_ms;
use pcapsleuth_core::{Direction, Endpoint, FrameNo, SeqNum, StreamId, Timestamp};
use pcapsleuth_detect::timer::{matches_coarse_timer, matches_timer, SLOW_TICK_NS};
use pcapsleuth_detect::{
    Detector, DetectorInfo, Evidence, Finding, FinishContext, FlowEvent, Severity,
};
use pcapsleuth_flow::SegmentEvent;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

/// Detector id.
pub const ID: &str = "syn-retransmit";

/// A SYN (or SYN/ACK) repeated sooner than this (ns) is not a timer retry
/// (RFC 6298 and every known stack wait ≥ 200 ms): another sighting of the
/// same packet, counted in `duplicate_sightings`. Used only when the IPv4 ID
/// cannot tell (ID 0 or IPv6); see [`same_packet`].
const MIN_RETRY_GAP_NS: i64 = 100_000_000;

/// A SYN (or SYN/ACK) repeated sooner than this (ns) is the same packet seen
/// twice (two taps, VLANs or encapsulations) whatever its IPv4 ID.
const COPY_GAP_NS: i64 = 1_000_000;

/// A client failing to connect to at least this many distinct services
/// (ip:port) in one capture is sweeping (port scan, P2P peer list): its
/// unanswered SYNs are reported as info.
const SWEEP_MIN_SERVICES: usize = 5;

/// SYN retries all sooner than this (ns, Linux `TCP_RTO_MIN` 200 ms) are not
/// a kernel SYN timer.
const TOOL_RETRY_GAP_NS: i64 = 200_000_000;

/// Two SYNs with one ISN to one server this close (ns) are one connection seen
/// before and after NAT (seed 002: veth/cni0 vs eth0).
const SAME_ISN_WINDOW_NS: i64 = 100_000_000;

const EXPLAIN: &str = "\
Looks for TCP connection setups that needed more than one SYN (or SYN/ACK) with the same \
initial sequence number in one tcp.stream. Each retry costs a full SYN timeout (1 s on \
Linux and RFC 6298 stacks, 3 s on Windows and older stacks), so the application sees \
connect() take 1, 3 or 7 s. The finding gives the delay, the gaps between SYNs and the \
retry ladder they match (which stack sent them). Copies of one SYN seen on two interfaces \
are not retries; a connection refused at once (RST) is not flagged.\n\
Why: seed 002 (Kubernetes/Docker SNAT conntrack insert race) dropped first SYNs inside \
the host; requests were delayed by exactly 1 s or 3 s. When a minority of >= 4 connections \
to one service are delayed by ~1 s or ~3 s and the rest connect at once, the finding \
says so (conntrack_race_shape; a full listen queue gives the same shape, and is the only \
explanation on loopback: burst_drop_shape).\n\
What to do: capture on both sides of NAT/firewalls to see where the SYN dies; check \
`conntrack -S` (insert_failed), SYN-flood protection and listen-queue overflows \
(`nstat TcpExtListenOverflows`). For the SNAT race use `MASQUERADE --random-fully` \
(NF_NAT_RANGE_PROTO_RANDOM_FULLY) or a kernel with conntrack clash resolution.";

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

/// Name the retry ladder `gaps_ns` (successive SYN gaps, ns) follows: the
/// full label (the `ladder` evidence) and a short name for the summary.
pub fn ladder_for(gaps_ns: &[i64]) -> (&'static str, &'static str) {
    if gaps_ns.is_empty() {
        return ("none", "no retry");
    }
    let matching: Vec<&Ladder> = LADDERS
        .iter()
        .filter(|l| {
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
        })
        .collect();
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

#[derive(Debug, Clone, Copy)]
struct Tx {
    frame: FrameNo,
    ts: Timestamp,
    /// IPv4 identification (`None` for IPv6).
    ip_id: Option<u32>,
}

/// Whether `s`, a repeat of `prev` (same ISN, same direction), is another
/// sighting of the same packet rather than a new transmission:
/// - sooner than [`COPY_GAP_NS`]: a copy whatever its IPv4 ID (no SYN timer
///   fires within 1 ms; zeek `gtp6_gtp_0x32.pcap` shows one SYN 1 µs apart
///   re-encapsulated with new inner and outer IDs);
/// - a different non-zero IPv4 ID: a new packet however soon (nDPI
///   `webex.pcap` stream 24: SYN re-sent after 78.7 ms, ID 0x7cc0 → 0x7cc1,
///   and its SYN/ACK re-sent with a new ID too);
/// - otherwise (same ID, ID 0 as Linux DF SYNs carry per RFC 6864, or IPv6):
///   a copy when sooner than [`MIN_RETRY_GAP_NS`]. The same non-zero ID is
///   *not* proof of a copy: chrissanders `nowebaccess3.pcapng` stream 0
///   re-sends its SYN after 1 s with the same ID 0x178a.
fn same_packet(prev: &Tx, s: &SegmentEvent) -> bool {
    let gap = (s.ts.0 - prev.ts.0).abs();
    if gap < COPY_GAP_NS {
        return true;
    }
    match (prev.ip_id, s.ip_id) {
        (Some(a), Some(b)) if a != 0 && b != 0 && a != b => false,
        _ => gap < MIN_RETRY_GAP_NS,
    }
}

#[derive(Debug, Clone)]
struct Attempt {
    stream: StreamId,
    syn_dir: Direction,
    isn: SeqNum,
    syns: Vec<Tx>,
    first_retx_wait_ns: Option<i64>,
    duplicates: Vec<FrameNo>,
    synack_isn: Option<SeqNum>,
    synacks: Vec<Tx>,
    synack_retransmits: u32,
    synack_retx_pre_ack: u32,
    rst: Option<Tx>,
    handshake_ack: Option<Tx>,
    acked_synack: Option<Tx>,
    /// First ACK-bearing segment of the SYN sender when no SYN/ACK was captured
    /// (half-duplex capture: the answer exists but is not in the file).
    went_on: Option<Tx>,
    /// SYNs re-sent after a SYN/ACK was captured: the SYN/ACK did not reach
    /// the client (lost between the capture point and the client).
    syns_after_synack: u32,
    /// Every SYN/ACK ISN seen (a load balancer may answer twice with two ISNs;
    /// the handshake ACK may acknowledge either).
    synack_isns: Vec<SeqNum>,
}

impl Attempt {
    fn answered(&self) -> bool {
        !self.synacks.is_empty() || self.rst.is_some() || self.went_on.is_some()
    }
    fn delayed(&self) -> bool {
        self.syns.len() > 1 || self.synack_retx_pre_ack > 0
    }
    fn refused_at_once(&self) -> bool {
        self.rst.is_some() && self.synacks.is_empty() && self.syns.len() <= 1
    }
    /// The handshake completed: the client acknowledged the SYN/ACK, or (no
    /// SYN/ACK captured) went on sending, or one SYN/ACK was captured and its
    /// ACK may simply be missing (capture cut). A SYN/ACK the server had to
    /// re-send and that was never acknowledged is not a connection: servers
    /// re-send it for a minute to a client that never answers.
    fn connected(&self) -> bool {
        self.handshake_ack.is_some() || self.went_on.is_some() || self.synacks.len() == 1
    }
    /// The server answered but the client never acknowledged the SYN/ACK.
    fn synack_unacknowledged(&self) -> bool {
        !self.synacks.is_empty() && !self.connected()
    }
    /// First SYN → the SYN/ACK that was acknowledged (or first SYN/ACK, else last SYN / RST), ns.
    fn delay_ns(&self) -> i64 {
        let Some(first) = self.syns.first() else {
            return 0;
        };
        let end = if let (true, Some(h)) = (self.syns_after_synack > 0, self.handshake_ack) {
            // The client re-sent its SYN after a SYN/ACK was captured: it only
            // learnt of the answer when it sent the handshake ACK.
            h.ts
        } else if let Some(a) = self.acked_synack {
            a.ts
        } else if let (false, Some(s)) = (self.connected(), self.synacks.last()) {
            s.ts
        } else if let Some(s) = self.synacks.first() {
            s.ts
        } else if let Some(w) = self.went_on {
            w.ts
        } else if let Some(r) = self.rst {
            r.ts
        } else {
            self.syns.last().map_or(first.ts, |t| t.ts)
        };
        end.0.saturating_sub(first.ts.0).max(0)
    }
    fn gaps_ns(&self) -> Vec<i64> {
        let txs = if self.syns.len() > 1 {
            &self.syns
        } else {
            &self.synacks
        };
        let mut ts: Vec<i64> = txs.iter().map(|t| t.ts.0).collect();
        ts.sort_unstable();
        ts.windows(2).map(|w| w[1] - w[0]).collect()
    }
}

/// The `syn-retransmit` detector.
#[derive(Debug, Default)]
pub struct SynRetransmit {
    attempts: Vec<Attempt>,
    live: pcapsleuth_detect::StreamMap<StreamId, usize>,
    endpoints: pcapsleuth_detect::StreamMap<StreamId, (Endpoint, Endpoint)>,
    /// Earliest TCP segment time seen (ns): where the capture (of TCP) begins.
    first_ts: Option<i64>,
}

impl SynRetransmit {
    fn on_segment(&mut self, s: &SegmentEvent) {
        let tx = Tx {
            frame: s.frame,
            ts: s.ts,
            ip_id: s.ip_id,
        };
        let live = self.live.get(&s.stream).copied();
        if s.flags.syn() && !s.flags.ack() {
            if let Some(a) = live.and_then(|i| self.attempts.get_mut(i)) {
                if a.isn == s.seq && a.syn_dir == s.dir {
                    let copy = a.syns.last().is_some_and(|p| same_packet(p, s));
                    if s.duplicate_of.is_some() || copy {
                        a.duplicates.push(s.frame);
                    } else if a.handshake_ack.is_none() && a.rst.is_none() && a.went_on.is_none() {
                        if a.syns.len() == 1 {
                            a.first_retx_wait_ns = s.since_first_tx_ns;
                        }
                        if !a.synacks.is_empty() {
                            a.syns_after_synack += 1;
                        }
                        a.syns.push(tx);
                    }
                    return;
                }
            }
            if s.duplicate_of.is_some() {
                return;
            }
            self.live.insert(s.stream, self.attempts.len());
            self.attempts.push(Attempt {
                stream: s.stream,
                syn_dir: s.dir,
                isn: s.seq,
                syns: vec![tx],
                first_retx_wait_ns: None,
                duplicates: Vec::new(),
                synack_isn: None,
                synacks: Vec::new(),
                synack_retransmits: 0,
                synack_retx_pre_ack: 0,
                rst: None,
                handshake_ack: None,
                acked_synack: None,
                went_on: None,
                syns_after_synack: 0,
                synack_isns: Vec::new(),
            });
            return;
        }
        let Some(a) = live.and_then(|i| self.attempts.get_mut(i)) else {
            return;
        };
        if s.duplicate_of.is_some() {
            if s.flags.syn() {
                a.duplicates.push(s.frame);
            }
            return;
        }
        let from_server = s.dir != a.syn_dir;
        if s.flags.syn() && s.flags.ack() && from_server {
            if a.handshake_ack.is_some() && a.synack_isn == Some(s.seq) {
                // SYN/ACK re-sent after the handshake completed (its timer raced the ACK).
                a.synack_retransmits += 1;
                a.synacks.push(tx);
                return;
            }
            match a.synack_isn {
                Some(isn) if isn == s.seq => {
                    let copy = a.synacks.last().is_some_and(|p| same_packet(p, s));
                    if copy {
                        a.duplicates.push(s.frame);
                        return;
                    }
                    a.synack_retransmits += 1;
                    a.synack_retx_pre_ack += 1;
                }
                _ => {
                    a.synack_isn = Some(s.seq);
                    a.synack_isns.push(s.seq);
                }
            }
            a.synacks.push(tx);
        } else if s.flags.rst() && from_server && a.synacks.is_empty() && a.rst.is_none() {
            a.rst = Some(tx);
        } else if s.flags.ack() && !s.flags.syn() && !from_server && a.handshake_ack.is_none() {
            match a.synack_isn {
                Some(_) => {
                    if a.synack_isns.iter().any(|isn| s.ack == isn.add(1)) {
                        a.handshake_ack = Some(tx);
                        a.acked_synack = a.synacks.last().copied();
                    }
                }
                None => {
                    if a.went_on.is_none() && a.rst.is_none() && !s.flags.rst() {
                        a.went_on = Some(tx);
                    }
                }
            }
        }
    }

    fn server_of(&self, a: &Attempt, ctx: &FinishContext) -> Option<(Endpoint, Endpoint)> {
        let (c, s) = ctx
            .streams
            .get(&a.stream)
            .or_else(|| self.endpoints.get(&a.stream))
            .copied()?;
        Some(if a.syn_dir == Direction::ClientToServer {
            (c, s)
        } else {
            (s, c)
        })
    }
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

#[derive(Default)]
struct ServiceStats {
    connections: u64,
    delayed: u64,
    race_sized: u64,
}

impl Detector for SynRetransmit {
    fn info(&self) -> DetectorInfo {
        DetectorInfo {
            id: ID,
            title: "Connection setup delayed by SYN / SYN-ACK retransmission",
            explain: EXPLAIN,
        }
    }

    fn on_flow_event(&mut self, event: &FlowEvent) {
        match event {
            FlowEvent::FlowStarted(f) => {
                self.endpoints.insert(f.stream, (f.client, f.server));
            }
            FlowEvent::Segment(s) => {
                self.first_ts = Some(self.first_ts.map_or(s.ts.0, |t| t.min(s.ts.0)));
                self.on_segment(s)
            }
            _ => {}
        }
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        // Attempts that are one SYN seen before and after NAT (same ISN, same
        // server, overlapping in time: seed 002's veth/cni0 vs eth0 views).
        let server_keys: Vec<Option<String>> = self
            .attempts
            .iter()
            .map(|a| self.server_of(a, ctx).map(|(_, s)| sock(s)))
            .collect();
        let mut by_isn: HashMap<(String, u32), Vec<usize>> = HashMap::new();
        for (i, a) in self.attempts.iter().enumerate() {
            if let Some(Some(k)) = server_keys.get(i) {
                by_isn.entry((k.clone(), a.isn.0)).or_default().push(i);
            }
        }
        let same_isn = |i: usize| -> Vec<usize> {
            let (Some(a), Some(Some(k))) = (self.attempts.get(i), server_keys.get(i)) else {
                return Vec::new();
            };
            let (Some(first), Some(last)) = (a.syns.first(), a.syns.last()) else {
                return Vec::new();
            };
            by_isn
                .get(&(k.clone(), a.isn.0))
                .into_iter()
                .flatten()
                .copied()
                .filter(|&j| j != i)
                .filter(|&j| {
                    // Their SYN spans overlap (symmetric: either view finds the other).
                    self.attempts
                        .get(j)
                        .is_some_and(|b| match (b.syns.first(), b.syns.last()) {
                            (Some(bf), Some(bl)) => {
                                bf.ts.0 <= last.ts.0 + SAME_ISN_WINDOW_NS
                                    && bl.ts.0 >= first.ts.0 - SAME_ISN_WINDOW_NS
                            }
                            _ => false,
                        })
                })
                .collect()
        };
        // Per-service statistics over every attempt that got an answer or was
        // delayed; NAT views of one connection count once.
        let mut services: BTreeMap<String, ServiceStats> = BTreeMap::new();
        for (i, a) in self.attempts.iter().enumerate() {
            if !(a.answered() || a.delayed()) {
                continue;
            }
            let Some(Some(key)) = server_keys.get(i) else {
                continue;
            };
            let twins = same_isn(i);
            if twins.iter().any(|&j| {
                let b = self.attempts.get(j);
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
        // Per client address: distinct services it failed to connect to
        // (never answered, refused, or SYN/ACK never acknowledged).
        let mut client_failed: HashMap<std::net::IpAddr, std::collections::BTreeSet<String>> =
            HashMap::new();
        for (i, a) in self.attempts.iter().enumerate() {
            if a.connected() {
                continue;
            }
            if let (Some((c, _)), Some(Some(key))) = (self.server_of(a, ctx), server_keys.get(i)) {
                client_failed.entry(c.addr).or_default().insert(key.clone());
            }
        }
        let mut out = Vec::new();
        for (i, a) in self.attempts.iter().enumerate() {
            if !a.delayed() || a.refused_at_once() {
                continue;
            }
            let twins: Vec<&Attempt> = same_isn(i)
                .into_iter()
                .filter_map(|j| self.attempts.get(j))
                .collect();
            let Some(first) = a.syns.first() else {
                continue;
            };
            let ends = self.server_of(a, ctx);
            let service = ends.map(|(_, s)| sock(s)).unwrap_or_default();
            let client = ends.map(|(c, _)| sock(c)).unwrap_or_default();
            let st = services.get(&service);
            let (svc_conn, svc_delayed) = st.map_or((0, 0), |s| (s.connections, s.delayed));
            // No NAT on loopback: the same shape there is a full listen queue.
            let loopback = ends.is_some_and(|(c, s)| c.addr.is_loopback() || c.addr == s.addr);
            // The same SYN seen in another stream (after NAT) only from a retry on:
            // the first SYN died inside the host, between the capture points.
            let nat_view = twins.iter().find(|b| {
                b.syns
                    .first()
                    .zip(a.syns.get(1))
                    .is_some_and(|(bf, second)| bf.ts.0 >= second.ts.0 - SAME_ISN_WINDOW_NS)
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
            let (ladder, ladder_short) = match ladder_for(&gaps) {
                ("unrecognised", _) => {
                    let before = self.first_ts.map_or(0, |t0| first.ts.0 - t0);
                    ladder_joined(&gaps, before).unwrap_or_else(|| {
                        (
                            "unrecognised".to_string(),
                            "an unrecognised retry schedule".to_string(),
                        )
                    })
                }
                (l, sh) => (l.to_string(), sh.to_string()),
            };
            let delay_ns = a.delay_ns();
            let connected = a.connected();
            let refused = a.rst.is_some() && !connected;
            let rto_ns = a.first_retx_wait_ns.or_else(|| gaps.first().copied());

            let what = if a.syns.len() > 1 {
                format!("the SYN was sent {} times", a.syns.len())
            } else {
                format!("the SYN/ACK was sent {} times", a.synack_retransmits + 1)
            };
            // "over X ms" only says something when there are several gaps.
            let span = if gaps.len() > 1 {
                format!(" over {:.1} ms", ns_to_ms(delay_ns))
            } else {
                String::new()
            };
            let unacked = a.synack_unacknowledged();
            let mut summary = if unacked {
                let first_sa = a.synacks.first().map_or(0, |t| t.ts.0 - first.ts.0);
                let sa_span = match (a.synacks.first(), a.synacks.last()) {
                    (Some(f), Some(l)) => l.ts.0 - f.ts.0,
                    _ => 0,
                };
                format!(
                    "Connection {client} -> {service} never completed its handshake: the server answered {} ms after the SYN and sent its SYN/ACK {} times over {:.1} ms, but the client never acknowledged it (the SYN/ACK was dropped between the capture point and the client, e.g. by a host firewall, or the client had given up).",
                    fmt_ms(first_sa),
                    a.synacks.len(),
                    ns_to_ms(sa_span)
                )
            } else if connected {
                format!(
                    "Connection {client} -> {service} was set up {:.1} ms late: {what} {} ({ladder_short}), so the first SYN or its SYN/ACK was lost.",
                    ns_to_ms(delay_ns),
                    fmt_gaps(&gaps)
                )
            } else if refused {
                format!(
                    "Connection {client} -> {service} was refused (RST) only after {what}{span} {} ({ladder_short}).",
                    fmt_gaps(&gaps)
                )
            } else {
                format!(
                    "Connection {client} -> {service} was never answered: {what}{span} {} ({ladder_short}) and no SYN/ACK was captured.",
                    fmt_gaps(&gaps)
                )
            };
            if a.syns_after_synack > 0 && !unacked {
                if let Some(sa) = a.synacks.first() {
                    summary.push_str(&format!(
                        " A SYN/ACK (frame {}) was captured {} ms after the first SYN, yet the client sent its SYN again: that SYN/ACK was lost between the capture point and the client.",
                        sa.frame,
                        fmt_ms(sa.ts.0 - first.ts.0)
                    ));
                }
            }
            if let Some(b) = nat_view {
                let other = self
                    .server_of(b, ctx)
                    .map(|(c, _)| sock(c))
                    .unwrap_or_default();
                summary.push_str(&format!(
                    " The same SYN (ISN {}) appears as {other} (tcp.stream {}) only from the retry on: the first SYN was dropped inside this host, between the capture points (NAT/conntrack).",
                    a.isn.0, b.stream
                ));
            }
            if a.synacks.is_empty() && a.went_on.is_some() {
                summary.push_str(
                    " (The SYN/ACK is not in this capture; the client's ACK shows it arrived.)",
                );
            }
            if race {
                summary.push_str(&format!(
                    " {svc_delayed} of {svc_conn} connections to {service} were delayed by ~1 s or ~3 s while the rest connected at once: the shape of the SNAT/conntrack insert race (seed 002), or of a full listen queue on the server."
                ));
            } else if burst_shape {
                summary.push_str(&format!(
                    " {svc_delayed} of {svc_conn} connections to {service} were delayed by ~1 s or ~3 s while the rest connected at once; on this host-local path (no NAT) that is the shape of a full listen queue."
                ));
            }
            let remedy = if unacked {
                "Capture on the client host itself (after its firewall) to see whether the SYN/ACK arrives; check host firewall / conntrack rules dropping the SYN/ACK (iptables INPUT counters, `conntrack -S` invalid), and whether the application abandoned the connect() before the answer."
            } else if race {
                "Make SNAT port allocation fully random (`iptables -t nat ... -j MASQUERADE --random-fully`, NF_NAT_RANGE_PROTO_RANDOM_FULLY) or run a kernel with conntrack clash resolution; confirm with `conntrack -S` insert_failed counting the lost SYNs. If instead the server's `nstat TcpExtListenOverflows` grows, raise its listen backlog (net.core.somaxconn, listen())."
            } else if burst_shape {
                "Raise the server's listen backlog (listen() argument, net.core.somaxconn, net.ipv4.tcp_max_syn_backlog) or accept faster; confirm with `nstat TcpExtListenOverflows` / `TcpExtListenDrops`."
            } else if connected || refused {
                "Find where the SYN or SYN/ACK is dropped: capture on both sides of NAT/firewalls, check `conntrack -S` (insert_failed), SYN-flood protection and listen-queue overflows (`nstat TcpExtListenOverflows`)."
            } else {
                "Check that the server is reachable and listening and that no firewall silently drops the SYN (capture on the server side and on each hop)."
            };
            // Sub-TCP_RTO_MIN retries (200 ms, Linux `TCP_RTO_MIN`; RFC 6298
            // allows no less than 1 s) come from a raw-socket tool, not a
            // kernel SYN timer (nmap's probes repeat at ~175 ms).
            let tool_retries = a.syns.len() > 1 && gaps.iter().all(|&g| g < TOOL_RETRY_GAP_NS);
            let failed_services = ends
                .and_then(|(c, _)| client_failed.get(&c.addr))
                .map_or(0, |s| s.len());
            let sweep = !connected && failed_services >= SWEEP_MIN_SERVICES;
            if sweep {
                summary.push_str(&format!(
                    " This client failed to reach {failed_services} different services in this capture (a port or address sweep, e.g. a scanner or a peer-to-peer client trying stale peers): one unreachable target among many is expected, not an outage."
                ));
            } else if tool_retries && !connected && !refused {
                summary.push_str(
                    " The SYNs repeat faster than any kernel SYN timer (< 200 ms): a raw-socket tool such as a scanner, not a stalled application.",
                );
            }
            let severity = if sweep || (tool_retries && !connected && !refused) {
                Severity::Info
            } else if connected || refused {
                Severity::Warning
            } else {
                Severity::Error
            };

            let mut frames: Vec<u64> = a
                .syns
                .iter()
                .chain(a.synacks.iter())
                .map(|t| t.frame)
                .collect();
            frames.extend(a.rst.iter().map(|t| t.frame));
            frames.extend(a.handshake_ack.iter().map(|t| t.frame));
            frames.extend(a.went_on.iter().map(|t| t.frame));
            frames.extend(nat_view.iter().flat_map(|b| b.syns.iter().map(|t| t.frame)));
            let all_ts: Vec<i64> = a
                .syns
                .iter()
                .chain(a.synacks.iter())
                .chain(a.rst.iter())
                .chain(a.handshake_ack.iter())
                .chain(a.went_on.iter())
                .map(|t| t.ts.0)
                .collect();
            let start = all_ts.iter().copied().min().unwrap_or(first.ts.0);
            let end = all_ts.iter().copied().max().unwrap_or(first.ts.0);

            let mut ev = Evidence::new();
            ev.insert("delay_ms".into(), json!(ns_to_ms(delay_ns)));
            ev.insert("syn_count".into(), json!(a.syns.len()));
            ev.insert("synack_retransmits".into(), json!(a.synack_retransmits));
            ev.insert(
                "gaps_ms".into(),
                Value::Array(gaps.iter().map(|&g| json!(ns_to_ms(g))).collect()),
            );
            ev.insert(
                "rto_ms".into(),
                rto_ns.map_or(Value::Null, |r| json!(ns_to_ms(r))),
            );
            ev.insert("ladder".into(), json!(ladder));
            ev.insert("connected".into(), json!(connected));
            ev.insert("synack_unacknowledged".into(), json!(unacked));
            ev.insert("syns_after_synack".into(), json!(a.syns_after_synack));
            ev.insert("client_failed_services".into(), json!(failed_services));
            ev.insert("refused".into(), json!(refused));
            ev.insert("duplicate_sightings".into(), json!(a.duplicates.len()));
            ev.insert("service".into(), json!(service));
            ev.insert("service_connections".into(), json!(svc_conn));
            ev.insert("service_delayed".into(), json!(svc_delayed));
            ev.insert("conntrack_race_shape".into(), json!(race));
            ev.insert("burst_drop_shape".into(), json!(burst_shape));
            ev.insert(
                "same_isn_streams".into(),
                json!(twins.iter().map(|b| b.stream).collect::<Vec<_>>()),
            );
            ev.insert(
                "dropped_between_capture_points".into(),
                json!(nat_view.is_some()),
            );
            out.push(Finding::new(
                ID,
                severity,
                summary,
                ctx.flow_ref(a.stream),
                Some(a.stream),
                frames,
                start,
                end,
                remedy.to_string(),
                ev,
            ));
        }
        out
    }
}

/// A duration in ms: one decimal, or three below 1 ms (so it never reads "0.0").
fn fmt_ms(ns: i64) -> String {
    if ns.abs() < 1_000_000 {
        format!("{:.3}", ns_to_ms(ns))
    } else {
        format!("{:.1}", ns_to_ms(ns))
    }
}

fn fmt_gaps(gaps: &[i64]) -> String {
    let parts: Vec<String> = gaps
        .iter()
        .map(|&g| format!("{:.0}", ns_to_ms(g)))
        .collect();
    match parts.as_slice() {
        [one] => format!("{one} ms apart"),
        _ => format!("at gaps of {} ms", parts.join(", ")),
    }
}

#[cfg(test)]
mod tests;
