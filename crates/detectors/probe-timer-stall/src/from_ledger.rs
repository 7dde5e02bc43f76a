//! The wait, not the trigger: the stall ledger's `probe0` entries
//! ([`pcapsleuth_ledger`]) that the trigger-based diagnosis did not find —
//! the small-window probe (`tcp_write_wakeup` sends exactly the window after
//! the probe timer) and the far side's view (the peer's RTO re-sends its
//! request while the answer waits ≈200 ms, no ICMP visible there). Each
//! becomes a [`Diagnosis`] of the same shape. Frag-needed waits stay with
//! the trigger rules, which see whether the sender re-sent at once after the
//! ICMP (the ledger's probe0-after-frag-needed rule does not: on
//! `lab-incoming/frag-needed-recurrence-self.pcapng` it calls the next
//! periodic write, 800 ms after a router's frag-needed whose bytes had been
//! re-sent within 0.1 ms, a probe0 wait).

use crate::{Diagnosis, KernelTimer, ProbeTimerStall, ProbeTimerStallEvidence, TriggerKind};
use pcapsleuth_core::time::ns_to_ms;
use pcapsleuth_core::{Direction, FrameNo, Severity};
use pcapsleuth_detect::timer::{match_any, matches_timer};
use pcapsleuth_detect::FinishContext;
use pcapsleuth_ledger::{StallCause, StallEntry, TimerKind};

/// The ledger's rule texts (`pcapsleuth_ledger` classify.rs) this module
/// reads, by the shape they name.
const RULE_SMALL_WINDOW: &str = "window smaller than the segment";
const RULE_CROSSED: &str = "crossed it";

/// Which probe0 shape a ledger entry shows, if it is one this detector reports.
fn shape(e: &StallEntry) -> Option<TriggerKind> {
    if e.cause != StallCause::Probe0 {
        return None;
    }
    let r = e.evidence.rule;
    if r.contains(RULE_SMALL_WINDOW) {
        Some(TriggerKind::SmallWindow)
    } else if r.contains(RULE_CROSSED) {
        Some(TriggerKind::FarSide)
    } else {
        // Zero-window probes: the receiver's doing, `zero-window`'s finding;
        // this detector reports a zero window only when its re-opening was
        // missed, and a frag-needed wait only when the sender did not re-send
        // at once (the trigger rules).
        None
    }
}

/// The kernel timer of a ledger-measured wait (ns): 200 ms is
/// `TCP_RTO_MIN`, 400…6400 ms the probe0 backoff.
fn timer_of(wait_ns: i64) -> Option<KernelTimer> {
    const MS: i64 = 1_000_000;
    if matches_timer(wait_ns, 200 * MS) {
        return Some(KernelTimer::RtoMin);
    }
    let backoff = [400 * MS, 800 * MS, 1600 * MS, 3200 * MS, 6400 * MS];
    match_any(wait_ns, &backoff).map(|_| KernelTimer::Probe0Backoff)
}

impl ProbeTimerStall {
    /// Diagnoses of the ledger's probe0 waits (in `ctx`) that overlap no
    /// diagnosis in `known` (same stream, overlapping in time) and whose
    /// wait matches a probe0 / `TCP_RTO_MIN` timer.
    pub(crate) fn diagnose_from_ledger(
        &self,
        ctx: &FinishContext,
        known: &[Diagnosis],
    ) -> Vec<Diagnosis> {
        let Some(ledger) = ctx.ledger() else {
            return Vec::new();
        };
        let mut out: Vec<Diagnosis> = Vec::new();
        for e in ledger.streams.iter().flat_map(|s| s.stalls.iter()) {
            let Some(kind) = shape(e) else { continue };
            let overlaps = |d: &Diagnosis| {
                d.stream == e.tcp_stream && d.start_ns <= e.end_ns && e.start_ns <= d.end_ns
            };
            if known.iter().any(overlaps) || out.iter().any(overlaps) {
                continue;
            }
            if let Some(d) = self.diagnose_entry(e, kind, ctx) {
                out.push(d);
            }
        }
        out
    }

    fn diagnose_entry(
        &self,
        e: &StallEntry,
        kind: TriggerKind,
        ctx: &FinishContext,
    ) -> Option<Diagnosis> {
        let wait_ns = e.end_ns.saturating_sub(e.start_ns);
        // The probe timer's own measure when the ledger has one (from the
        // ICMP for a frag-needed), else the wait.
        let timed_ns = e
            .evidence
            .observed_ms
            .filter(|_| e.evidence.timer == Some(TimerKind::Probe0))
            .map_or(wait_ns, |m| (m * 1e6).round() as i64);
        let timer = timer_of(timed_ns)?;
        let (dir, trigger, carrier): (Direction, FrameNo, FrameNo) = match kind {
            // Seen from the far side: the entry is the peer's RTO wait; the
            // bytes that waited are the answer (its `trigger_frame`), sent
            // the other way; the RTO retransmission shows the wait.
            TriggerKind::FarSide => (e.dir.reverse(), e.end_frame, e.evidence.trigger_frame?),
            TriggerKind::SmallWindow => (e.dir, e.start_frame, e.end_frame),
            _ => (e.dir, e.evidence.trigger_frame?, e.end_frame),
        };
        let flow_silent_ns = self.stalls.get(e.tcp_stream, carrier);
        let mut frames = vec![e.start_frame, trigger, carrier];
        frames.sort_unstable();
        frames.dedup();
        Some(Diagnosis {
            severity: Severity::Warning,
            stream: e.tcp_stream,
            dir,
            flow: ctx.flow_ref(e.tcp_stream),
            mtu: None,
            frames,
            start_ns: e.start_ns,
            end_ns: e.end_ns,
            evidence: ProbeTimerStallEvidence {
                trigger: kind,
                trigger_frame: trigger,
                trigger_frames: vec![trigger],
                carrier_frame: carrier,
                gap_ms: ns_to_ms(wait_ns),
                timer: Some(timer),
                bytes_waited: e.evidence.segment_bytes.map_or(0, i64::from),
                waiting_rel_seq: None,
                flow_silent_ms: flow_silent_ns.map(ns_to_ms),
            },
        })
    }
}
