#![doc = include_str!("../README.md")]
//!
//! # Code layout
//! `collect.rs` keeps the latency samples and the pairing facts of every
//! packet (`on_packet`); [`stamp`] decodes ping's send stamp; [`pair`] ties
//! addresses to hosts; [`diagnose::diagnose`] compares the families with the
//! rule of [`stats`] ([`Diagnosis`], plain data) and [`render::render`]
//! writes the prose.

pub mod collect;
pub mod diagnose;
mod dnsrr;
pub mod pair;
pub mod render;
pub mod stamp;
pub mod stats;

pub use collect::{Collector, Family, Measure, Sample};
pub use diagnose::{diagnose, Diagnosis, DualStackLatencyEvidence, MeasureComparison};

use pcapsleuth_detect::{
    Bound, Detector, DetectorInfo, Finding, FinishContext, FlowEvent, PacketContext,
};

/// Detector id.
pub const ID: &str = "dual-stack-latency";

/// The `dual-stack-latency` detector.
#[derive(Debug, Default)]
pub struct DualStackLatency {
    collector: Collector,
}

impl DualStackLatency {
    /// Diagnose what was collected so far.
    pub fn diagnose(&self) -> Vec<Diagnosis> {
        diagnose::diagnose(&self.collector)
    }
}

impl Detector for DualStackLatency {
    fn info(&self) -> DetectorInfo {
        DetectorInfo {
            id: ID,
            aliases: &[],
            title: "One address family consistently slower to the same host",
            explain: include_str!("../README.md"),
        }
    }

    /// A stream's end forgets its connection ([`Collector::end_stream`]).
    fn on_flow_event(&mut self, event: &FlowEvent) {
        if let FlowEvent::FlowEnded(e) = event {
            self.collector.end_stream(e.stream, e.client, e.server);
        }
    }

    fn on_packet(&mut self, pkt: &PacketContext<'_>) {
        self.collector.on_packet(pkt);
    }

    /// [`collect::MAX_SAMPLES`], [`collect::MAX_PENDING`] and
    /// [`collect::MAX_ADDRESSES`], those that refused something.
    fn limits(&self) -> Vec<Bound> {
        self.collector.limits()
    }

    fn finish(&mut self, _ctx: &FinishContext) -> Vec<Finding> {
        let out = self.diagnose().iter().map(render::render).collect();
        self.collector = Collector::default();
        out
    }
}

#[cfg(test)]
mod tests;
