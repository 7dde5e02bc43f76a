#![doc = include_str!("../README.md")]
//!
//! # Code layout
//! `collect.rs` makes one compact record per DNS message (`on_packet`);
//! [`chunk`] holds them and, a chunk at a time, has `lookup.rs` group them
//! into lookups (copies of one packet counted once, answers matched) and
//! concludes those no later message can change ([`chunk::Chunker`]: memory
//! follows the lookups in progress, not the capture); at the end
//! [`diagnose::diagnose`] decides ([`Diagnosis`], plain data) and
//! [`render::render`] writes the prose.

pub mod chunk;
mod collect;
pub mod diagnose;
pub mod ladder;
pub mod lookup;
pub mod names;
pub mod render;

pub use chunk::CHUNK_MESSAGES;
pub use collect::{Msg, DNS_PORT};
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
    /// A detector that concludes the capture's lookups every `chunk` DNS
    /// messages (default [`CHUNK_MESSAGES`]; see [`chunk`]): the findings
    /// are the same for any chunk that holds the messages of
    /// [`chunk::SETTLE_NS`] of capture time; a smaller one concludes some
    /// lookups early and [`Detector::limits`] says how many, from which frame.
    pub fn with_chunk(chunk: usize) -> Self {
        DnsTimeout {
            collector: collect::Collector::with_chunk(chunk),
            last_ts: None,
        }
    }

    /// Diagnose what was collected; `capture_end_ns` is the latest frame time.
    pub fn diagnose(&self, capture_end_ns: i64) -> Vec<Diagnosis> {
        self.collector
            .chunks
            .clone()
            .diagnose(self.collector.names.as_slice(), capture_end_ns)
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

    /// Lookups concluded before they settled ([`chunk::Chunker::early`]),
    /// when a chunk could not hold the lookups in progress, and lookups of
    /// names beyond [`diagnose::MAX_NAME_TALLIES`] that no per-name total
    /// counts ([`chunk::Chunker::untallied`]).
    fn limits(&self) -> Vec<Bound> {
        let chunks = &self.collector.chunks;
        [&chunks.early, chunks.untallied()]
            .into_iter()
            .filter_map(Bound::if_reached)
            .collect()
    }

    fn finish(&mut self, _ctx: &FinishContext) -> Vec<Finding> {
        let Some(end) = self.last_ts else {
            return Vec::new();
        };
        let chunks = std::mem::take(&mut self.collector.chunks);
        chunks
            .diagnose(self.collector.names.as_slice(), end)
            .iter()
            .map(render::render)
            .collect()
    }
}

#[cfg(test)]
mod tests;
