//! The decision: the ledger's `nagle_delayed_ack` entries → one
//! [`Diagnosis`] per connection direction (plain data, no prose;
//! [`crate::render`] writes the words).

use crate::{DelayedAckStall, MAX_LISTED, MIN_RECURRING};
use pcapsleuth_core::{Direction, FrameNo, Severity, StreamId};
use pcapsleuth_detect::{FinishContext, FlowRef};
use pcapsleuth_ledger::{StallCause, StallEntry};
use serde::Serialize;

/// One request whose later piece waited for the peer's delayed ACK.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeldRequest {
    /// The last segment before the wait: the request's first piece.
    pub first_frame: FrameNo,
    /// The peer's (delayed) pure ACK that released the rest.
    pub ack_frame: FrameNo,
    /// The held piece (the stream's next segment after the ACK, when it is
    /// the sender's data), or `None`.
    pub held_frame: Option<FrameNo>,
    /// First piece → ACK, ms.
    pub stall_ms: f64,
    /// The delayed-ACK period the ledger compared with (40 or 200), ms.
    pub expected_ms: Option<f64>,
    /// Whether `stall_ms` matches that timer (`pcapsleuth_detect::timer::matches_timer`).
    pub matches_timer: bool,
    /// Payload of the held piece, bytes.
    pub held_bytes: Option<u32>,
}

/// The `evidence` object of a `delayed-ack-stall` finding. Field order is
/// the JSON key order; see the crate README, section "Evidence".
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DelayedAckStallEvidence {
    /// Nagle × delayed-ACK stalls of this direction.
    pub stalls: usize,
    /// Their summed duration, ms.
    pub stalled_ms: f64,
    /// Shortest stall, ms.
    pub min_ms: f64,
    /// Median stall (the lower middle of an even count), ms.
    pub median_ms: f64,
    /// Longest stall, ms.
    pub max_ms: f64,
    /// The delayed-ACK period most matching stalls match (40: Linux
    /// `TCP_DELACK_MIN`; 200: other stacks), ms; `None` when none matches.
    pub delayed_ack_timer_ms: Option<f64>,
    /// Stalls whose duration matches `delayed_ack_timer_ms`.
    pub matching_timer: usize,
    /// Largest held piece, bytes.
    pub held_bytes_max: Option<u32>,
    /// Stalls listed in `held_requests` (at most [`MAX_LISTED`], the first).
    pub listed: usize,
    /// The first stalls, in time order.
    pub held_requests: Vec<HeldRequest>,
}

/// One connection direction whose requests waited for the peer's delayed ACK.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnosis {
    /// Warning from [`MIN_RECURRING`] stalls matching the delayed-ACK timer on, else info.
    pub severity: Severity,
    /// The stream.
    pub stream: StreamId,
    /// Direction of the sender whose pieces were held.
    pub dir: Direction,
    /// The stream's flow (client → server), if known.
    pub flow: Option<FlowRef>,
    /// Every listed stall's first piece, ACK and held piece, ascending.
    pub frames: Vec<FrameNo>,
    /// First stall's start, ns since the Unix epoch.
    pub start_ns: i64,
    /// Last stall's end, ns since the Unix epoch.
    pub end_ns: i64,
    /// The evidence object.
    pub evidence: DelayedAckStallEvidence,
}

impl DelayedAckStall {
    /// Diagnose every connection direction the ledger (in `ctx`) found
    /// Nagle × delayed-ACK stalls on; none without a ledger.
    pub fn diagnose(&self, ctx: &FinishContext) -> Vec<Diagnosis> {
        let Some(ledger) = ctx.ledger() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for s in &ledger.streams {
            for dir in [Direction::ClientToServer, Direction::ServerToClient] {
                let entries: Vec<&StallEntry> = s
                    .stalls
                    .iter()
                    .filter(|e| e.dir == dir && e.cause == StallCause::NagleDelayedAck)
                    .collect();
                if let Some(d) = self.diagnose_direction(s.tcp_stream, dir, &entries, ctx) {
                    out.push(d);
                }
            }
        }
        out
    }

    fn held(&self, e: &StallEntry) -> HeldRequest {
        let follower = self
            .followers
            .get(e.tcp_stream, e.end_frame)
            .filter(|f| f.dir == e.dir && f.payload_len > 0);
        HeldRequest {
            first_frame: e.start_frame,
            ack_frame: e.end_frame,
            held_frame: follower.map(|f| f.frame),
            stall_ms: e.duration_ms,
            expected_ms: e.evidence.expected_ms,
            matches_timer: e.evidence.matches_timer.unwrap_or(false),
            held_bytes: follower.map(|f| f.payload_len).or(e.evidence.segment_bytes),
        }
    }

    fn diagnose_direction(
        &self,
        stream: StreamId,
        dir: Direction,
        entries: &[&StallEntry],
        ctx: &FinishContext,
    ) -> Option<Diagnosis> {
        let first = entries.first()?;
        let last = entries.last()?;
        let held: Vec<HeldRequest> = entries.iter().map(|e| self.held(e)).collect();
        let mut durations: Vec<f64> = held.iter().map(|h| h.stall_ms).collect();
        durations.sort_by(f64::total_cmp);
        let n = durations.len();
        let median = durations.get((n - 1) / 2).copied().unwrap_or(0.0);
        let (timer, matching) = dominant_timer(&held);
        let listed: Vec<HeldRequest> = held.iter().take(MAX_LISTED).cloned().collect();
        let mut frames: Vec<FrameNo> = listed
            .iter()
            .flat_map(|h| [Some(h.first_frame), Some(h.ack_frame), h.held_frame])
            .flatten()
            .collect();
        frames.sort_unstable();
        frames.dedup();
        let stalled: f64 = durations.iter().sum();
        Some(Diagnosis {
            severity: if matching >= MIN_RECURRING {
                Severity::Warning
            } else {
                Severity::Info
            },
            stream,
            dir,
            flow: ctx.flow_ref(stream),
            frames,
            start_ns: first.start_ns,
            end_ns: last.end_ns.max(first.end_ns),
            evidence: DelayedAckStallEvidence {
                stalls: n,
                stalled_ms: (stalled * 1000.0).round() / 1000.0,
                min_ms: durations.first().copied().unwrap_or(0.0),
                median_ms: median,
                max_ms: durations.last().copied().unwrap_or(0.0),
                delayed_ack_timer_ms: timer,
                matching_timer: matching,
                held_bytes_max: held.iter().filter_map(|h| h.held_bytes).max(),
                listed: listed.len(),
                held_requests: listed,
            },
        })
    }
}

/// The delayed-ACK period (ms) most matching stalls match, and how many
/// match it; ties go to the shorter (Linux's 40 ms).
fn dominant_timer(held: &[HeldRequest]) -> (Option<f64>, usize) {
    let mut counts: Vec<(f64, usize)> = Vec::new();
    for h in held.iter().filter(|h| h.matches_timer) {
        let Some(e) = h.expected_ms else { continue };
        match counts.iter_mut().find(|(v, _)| *v == e) {
            Some(c) => c.1 += 1,
            None => counts.push((e, 1)),
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.total_cmp(&b.0)));
    counts.first().map_or((None, 0), |&(v, c)| (Some(v), c))
}
