//! The stall ledger ([`pcapsleuth_ledger`]) as a [`PacketObserver`], for
//! `pcapsleuth flows`: it sees every flow event of the one pipeline, and its
//! per-stream entries and roll-ups are attached to the flow rows.

use crate::pipeline::PacketObserver;
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
    let mut by_stream: HashMap<u64, _> = ledger
        .streams
        .into_iter()
        .map(|s| (s.tcp_stream, s))
        .collect();
    for f in flows {
        if let Some(s) = by_stream.remove(&f.tcp_stream) {
            f.stalls = s.stalls;
            f.stalls_dropped = s.stalls_dropped;
            f.time_lost_by_cause = s.time_lost_by_cause;
            f.stall_summary = Some(s.summary);
        }
    }
}
