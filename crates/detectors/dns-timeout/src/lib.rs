#![doc = include_str!("../README.md")]
//!
//! # Code layout
//! `collect.rs` keeps one compact record per DNS message (`on_packet`);
//! at the end of the capture `lookup.rs` groups them into lookups (copies of
//! one packet counted once, answers matched), [`diagnose::diagnose`] decides
//! ([`Diagnosis`], plain data) and [`render::render`] writes the prose.

mod collect;
pub mod diagnose;
pub mod ladder;
pub mod lookup;
pub mod render;

pub use collect::{Msg, DNS_PORT, MAX_MESSAGES};
pub use diagnose::{diagnose, Diagnosis, DnsTimeoutEvidence, Shape};

use pcapsleuth_detect::{
    Bound, Detector, DetectorInfo, Finding, FinishContext, FlowEvent, PacketContext,
};

/// Detector id.
pub const ID: &str = "dns-timeout";

/// The `dns-timeout` detector.
#[derive(Debug, Default)]
pub struct DnsTimeout {
    collector: collect::Collector,
    /// Latest frame time seen, ns (the capture's end; frames may be out of
    /// time order in multi-interface captures).
    last_ts: Option<i64>,
}

impl DnsTimeout {
    /// A detector that keeps at most `max` DNS messages of the capture
    /// (default [`MAX_MESSAGES`], about 100 bytes each); later ones are not
    /// examined, and [`Detector::limits`] says how many, from which frame.
    pub fn with_max_messages(max: usize) -> Self {
        DnsTimeout {
            collector: collect::Collector::with_max_messages(max),
            last_ts: None,
        }
    }

    /// Diagnose what was collected; `capture_end_ns` is the latest frame time.
    pub fn diagnose(&self, capture_end_ns: i64) -> Vec<Diagnosis> {
        let lookups = lookup::build(self.collector.msgs.clone());
        diagnose::diagnose(&lookups, &self.collector.names, capture_end_ns)
    }
}

impl Detector for DnsTimeout {
    fn info(&self) -> DetectorInfo {
        DetectorInfo {
            id: ID,
            aliases: &[],
            title: "DNS lookups that waited for the resolver timeout",
            explain: include_str!("../README.md"),
        }
    }

    fn on_flow_event(&mut self, event: &FlowEvent) {
        if let FlowEvent::FlowEnded(e) = event {
            self.collector.end_stream(e.stream);
        }
    }

    fn on_packet(&mut self, pkt: &PacketContext<'_>) {
        let ts = pkt.meta.ts.0;
        self.last_ts = Some(self.last_ts.map_or(ts, |t| t.max(ts)));
        self.collector.on_packet(pkt);
    }

    /// [`MAX_MESSAGES`], when more DNS messages than that were seen.
    fn limits(&self) -> Vec<Bound> {
        self.collector.bound.if_reached().into_iter().collect()
    }

    fn finish(&mut self, _ctx: &FinishContext) -> Vec<Finding> {
        let Some(end) = self.last_ts else {
            return Vec::new();
        };
        let lookups = lookup::build(std::mem::take(&mut self.collector.msgs));
        diagnose::diagnose(&lookups, &self.collector.names, end)
            .iter()
            .map(render::render)
            .collect()
    }
}

#[cfg(test)]
mod tests;
