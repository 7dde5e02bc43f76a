//! The decision: triggers → bursts → carriers → [`Diagnosis`] values (plain
//! data, no prose; [`crate::render`] writes the words).

use crate::{ProbeTimerStall, Trigger, BURST_NS, MAX_GAP_NS, MIN_GAP_NS, RELEASE_NS};
use pcapsleuth_core::time::ns_to_ms;
use pcapsleuth_core::{Direction, FrameNo, Severity, StreamId, Timestamp};
use pcapsleuth_detect::followup::SegRec;
use pcapsleuth_detect::timer::{match_any, matches_timer};
use pcapsleuth_detect::{FinishContext, FlowRef};
use serde::Serialize;

/// What held the bytes back (JSON: the label in `trigger`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TriggerKind {
    /// An ICMP frag-needed / PTB from the host to itself (or from the quoted
    /// packet's own source): the local route MTU refused the segment.
    #[serde(rename = "self-addressed frag-needed")]
    SelfAddressedFragNeeded,
    /// An ICMP frag-needed / PTB from a router.
    #[serde(rename = "frag-needed")]
    FragNeeded,
    /// A zero-window episode the sender probed through, whose re-opening it
    /// did not act on.
    #[serde(rename = "zero window")]
    ZeroWindow,
    /// A window smaller than the segment: the sender waited for its probe0
    /// timer, then `tcp_write_wakeup` sent exactly the window (from the
    /// stall ledger).
    #[serde(rename = "small window")]
    SmallWindow,
    /// Seen from the far side (no ICMP visible there): the peer's RTO
    /// re-sent its request while the answer waited ≈ one probe0 period, and
    /// the answer, cut below the MSS, crossed the retransmission (from the
    /// stall ledger).
    #[serde(rename = "probe0 seen from the peer")]
    FarSide,
}

/// The kernel timer a trigger → carrier gap matches (JSON: the label in `timer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum KernelTimer {
    /// 200 ms: `TCP_RTO_MIN`, the floor of the RTO and of the probe0 timer.
    #[serde(rename = "TCP_RTO_MIN 200ms")]
    RtoMin,
    /// 400/800/1600/3200/6400 ms: the probe0 timer backing off.
    #[serde(rename = "probe0 backoff 200/400/800 ms")]
    Probe0Backoff,
    /// Another gap ending in a retransmission: the retransmission timer.
    #[serde(rename = "RTO")]
    Rto,
}

impl KernelTimer {
    /// The label used in evidence and prose.
    pub const fn label(self) -> &'static str {
        match self {
            KernelTimer::RtoMin => "TCP_RTO_MIN 200ms",
            KernelTimer::Probe0Backoff => "probe0 backoff 200/400/800 ms",
            KernelTimer::Rto => "RTO",
        }
    }

    /// Name the kernel timer a trigger → carrier gap (ns) matches, with the
    /// tolerances of [`pcapsleuth_detect::timer`].
    pub fn of_gap(gap_ns: i64, trigger: TriggerKind, carrier: &SegRec) -> Option<KernelTimer> {
        const MS: i64 = 1_000_000;
        if matches_timer(gap_ns, 200 * MS) {
            return Some(KernelTimer::RtoMin);
        }
        let backoff = [400 * MS, 800 * MS, 1600 * MS, 3200 * MS, 6400 * MS];
        if match_any(gap_ns, &backoff).is_some()
            && (trigger == TriggerKind::ZeroWindow || !carrier.retransmission)
        {
            return Some(KernelTimer::Probe0Backoff);
        }
        if carrier.retransmission {
            return Some(KernelTimer::Rto);
        }
        None
    }
}

/// The `evidence` object of a `probe-timer-stall` finding. Field order is the
/// JSON key order; see the crate README, section "Evidence".
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeTimerStallEvidence {
    /// What held the bytes back.
    pub trigger: TriggerKind,
    /// First trigger frame of the burst, by time.
    pub trigger_frame: FrameNo,
    /// Every trigger frame of the burst, ascending.
    pub trigger_frames: Vec<FrameNo>,
    /// The frame that finally carried the waiting bytes.
    pub carrier_frame: FrameNo,
    /// Trigger → carrier, ms.
    pub gap_ms: f64,
    /// The kernel timer the gap matches, if any.
    pub timer: Option<KernelTimer>,
    /// Bytes from the waiting offset released within [`RELEASE_NS`] (10 ms)
    /// of the carrier (at least the carrier's payload).
    pub bytes_waited: i64,
    /// Relative sequence of the first waiting byte, bytes; `None` for a
    /// wait found by the stall ledger.
    pub waiting_rel_seq: Option<i64>,
    /// The flow table's stall ending at the carrier, ms.
    pub flow_silent_ms: Option<f64>,
}

/// One burst of triggers and the late carrier, diagnosed.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnosis {
    /// Always a warning: the application saw a ≈200 ms (or longer) delay.
    pub severity: Severity,
    /// The stream.
    pub stream: StreamId,
    /// Direction of the sender whose bytes waited.
    pub dir: Direction,
    /// The stream's flow (client → server), if known.
    pub flow: Option<FlowRef>,
    /// MTU announced by the first trigger (ICMP), bytes.
    pub mtu: Option<u32>,
    /// Trigger frames and the carrier, ascending.
    pub frames: Vec<FrameNo>,
    /// First trigger's timestamp, ns since the Unix epoch.
    pub start_ns: i64,
    /// Carrier's timestamp, ns since the Unix epoch.
    pub end_ns: i64,
    /// The evidence object.
    pub evidence: ProbeTimerStallEvidence,
}

impl ProbeTimerStall {
    /// Diagnose every burst of triggers whose waiting bytes left only after
    /// a silence of 150 ms to 60 s, then every probe0 wait of the stall
    /// ledger (in `ctx`) that none of those covers (small-window probe,
    /// far-side view), in that order.
    pub fn diagnose(&self, ctx: &FinishContext) -> Vec<Diagnosis> {
        let mut keyed = self.ended.clone();
        let mut live: Vec<_> = self.streams.iter().collect();
        live.sort_unstable_by_key(|(k, _)| **k);
        for c in live.into_iter().filter_map(|(_, st)| st.cold.as_deref()) {
            keyed.extend(diagnose_stream(&c.triggers));
        }
        // Bursts in (stream, direction, first trigger) order, as clustered
        // over the whole capture (stable: an ended stream's bursts before
        // those of a stream that later reused its id).
        keyed.sort_by_key(|(k, _)| *k);
        let mut out: Vec<Diagnosis> = keyed
            .into_iter()
            .map(|(_, mut d)| {
                d.flow = ctx.flow_ref(d.stream);
                d.evidence.flow_silent_ms = self
                    .stalls
                    .get(d.stream, d.evidence.carrier_frame)
                    .map(ns_to_ms);
                d
            })
            .collect();
        let more = self.diagnose_from_ledger(ctx, &out);
        out.extend(more);
        out
    }
}

/// Order key of a burst: its stream, direction, and first trigger's time and frame.
pub(crate) type BurstKey = (StreamId, usize, Timestamp, FrameNo);

/// The diagnoses of one stream's triggers (see [`diagnose_burst`]), with
/// their order keys; `flow` and `flow_silent_ms` are left empty (the caller
/// has the context and the stalls).
pub(crate) fn diagnose_stream(triggers: &[Trigger]) -> Vec<(BurstKey, Diagnosis)> {
    bursts(triggers)
        .iter()
        .filter_map(|members| {
            let t = triggers.get(*members.first()?)?;
            let key = (t.stream, t.dir.index(), t.ts, t.frame);
            diagnose_burst(triggers, members).map(|d| (key, d))
        })
        .collect()
}

/// Cluster triggers of one sender that come in a burst (≤ [`BURST_NS`]
/// apart, same kind), each in time order; indices into `triggers`.
fn bursts(triggers: &[Trigger]) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..triggers.len()).collect();
    order.sort_by_key(|&i| {
        triggers
            .get(i)
            .map(|t| (t.stream, t.dir.index(), t.ts, t.frame))
    });
    let mut clusters: Vec<Vec<usize>> = Vec::new();
    for i in order {
        let Some(t) = triggers.get(i) else {
            continue;
        };
        let joins = clusters
            .last()
            .and_then(|c| c.last())
            .and_then(|&j| triggers.get(j))
            .is_some_and(|p| {
                p.stream == t.stream
                    && p.dir == t.dir
                    && p.kind == t.kind
                    && t.ts.0.saturating_sub(p.ts.0) <= BURST_NS
            });
        match clusters.last_mut() {
            Some(c) if joins => c.push(i),
            _ => clusters.push(vec![i]),
        }
    }
    clusters
}

/// The earliest trigger's waiting bytes decide the carrier: the first
/// segment (by time) carrying them, 150 ms – 60 s later, with none of the
/// sender's data in between.
fn diagnose_burst(triggers: &[Trigger], members: &[usize]) -> Option<Diagnosis> {
    let t: &Trigger = triggers.get(*members.first()?)?;
    let carrier = t
        .segs
        .iter()
        .filter(|r| r.covers(t.offset))
        .min_by_key(|r| (r.ts, r.frame))
        .copied()?;
    let gap = carrier.ts.0.saturating_sub(t.ts.0);
    if !(MIN_GAP_NS..=MAX_GAP_NS).contains(&gap) {
        return None;
    }
    // Silence: nothing else of this sender's data between the trigger and the carrier.
    if t.segs
        .iter()
        .any(|r| r.ts.0 > t.ts.0 && r.ts.0 < carrier.ts.0)
    {
        return None;
    }
    let released_end = t
        .segs
        .iter()
        .filter(|r| r.ts.0 >= carrier.ts.0 && r.ts.0 <= carrier.ts.0.saturating_add(RELEASE_NS))
        .map(|r| r.rel_seq + r.payload_len as i64)
        .max()
        .unwrap_or(carrier.rel_seq + carrier.payload_len as i64);
    let bytes_waited = (released_end - t.offset).max(carrier.payload_len as i64);
    let mut trigger_frames: Vec<FrameNo> = members
        .iter()
        .filter_map(|i| triggers.get(*i).map(|t| t.frame))
        .collect();
    trigger_frames.sort_unstable();
    trigger_frames.dedup();
    let mut frames = trigger_frames.clone();
    frames.push(carrier.frame);
    frames.sort_unstable();
    frames.dedup();
    Some(Diagnosis {
        severity: Severity::Warning,
        stream: t.stream,
        dir: t.dir,
        flow: None,
        mtu: t.mtu,
        frames,
        start_ns: t.ts.0,
        end_ns: carrier.ts.0,
        evidence: ProbeTimerStallEvidence {
            trigger: t.kind,
            trigger_frame: t.frame,
            trigger_frames,
            carrier_frame: carrier.frame,
            gap_ms: ns_to_ms(gap),
            timer: KernelTimer::of_gap(gap, t.kind, &carrier),
            bytes_waited,
            waiting_rel_seq: Some(t.offset),
            flow_silent_ms: None,
        },
    })
}
