//! The stall ledger ([`pcapsleuth_ledger`]) as a [`PacketObserver`], for
//! `pcapsleuth flows`: it sees every flow event of the one pipeline, and its
//! per-stream entries and roll-ups are attached to the flow rows.

use crate::pipeline::PacketObserver;
use pcapsleuth_core::StreamId;
use pcapsleuth_detect::PacketContext;
use pcapsleuth_flow::FlowEvent;
use pcapsleuth_ledger::{LedgerReport, StallLedger};
use pcapsleuth_report::FlowReport;
use std::collections::HashMap;

/// Feeds every flow event to a [`StallLedger`] when switched on (a no-op otherwise).
#[derive(Debug, Default)]
pub struct LedgerObserver(Option<StallLedger>);

impl LedgerObserver {
    /// An observer that keeps a ledger when `on`.
    pub fn new(on: bool) -> Self {
        LedgerObserver(on.then(StallLedger::new))
    }

    /// The ledger's report, if it was on.
    pub fn finish(self) -> Option<LedgerReport> {
        self.0.map(StallLedger::finish)
    }

    fn feed(&mut self, events: &[FlowEvent]) {
        if let Some(l) = &mut self.0 {
            for e in events {
                l.on_event(e);
            }
        }
    }
}

impl PacketObserver for LedgerObserver {
    fn packet(&mut self, _pkt: &PacketContext<'_>, events: &[FlowEvent]) {
        self.feed(events);
    }
    fn finish(&mut self, events: &[FlowEvent]) {
        self.feed(events);
    }
}

/// Attach each stream's ledger (stalls, per-cause time, summary) to its flow row.
pub(crate) fn attach(flows: &mut [FlowReport], ledger: LedgerReport) {
    let mut by_stream: HashMap<StreamId, _> = ledger
        .streams
        .into_iter()
        .map(|s| (s.tcp_stream, s))
        .collect();
    for f in flows {
        if let Some(s) = by_stream.remove(&StreamId(f.tcp_stream)) {
            f.stalls = s.stalls;
            f.stalls_dropped = s.stalls_dropped;
            f.time_lost_by_cause = s.time_lost_by_cause;
            f.stall_summary = Some(s.summary);
        }
        longest_stall_from_ledger(f);
    }
}

/// The flow's `longest_stall_ms` / `longest_stall_frames` columns are the
/// ledger's longest entry (issue 10, item 5): a wait between two of the flow's
/// own frames, attributed to a cause. The flow table's older measure (silence
/// of the whole stream with data outstanding) could span the capture's
/// timestamp jumps (a 4-day "stall" on a 342 ms flow) and missed waits the
/// ledger sees. A flow with no ledger entry has no stall: 0 ms, no frames.
fn longest_stall_from_ledger(f: &mut FlowReport) {
    let longest = f.stalls.iter().max_by(|a, b| {
        a.duration_ms
            .total_cmp(&b.duration_ms)
            .then(b.start_frame.cmp(&a.start_frame))
    });
    match longest {
        Some(e) => {
            f.longest_stall_ms = e.duration_ms;
            f.longest_stall_frames = Some([e.start_frame.get(), e.end_frame.get()]);
        }
        None => {
            f.longest_stall_ms = 0.0;
            f.longest_stall_frames = None;
        }
    }
}
