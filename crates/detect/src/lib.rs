//! The [`Detector`] trait and what the pipeline hands a detector.
//!
//! A detector is a plain struct, one concern each, in its own crate under
//! `crates/detectors/`. For every packet the pipeline first delivers the
//! [`FlowEvent`]s the flow table produced for it (`on_flow_event`), then the
//! packet itself (`on_packet`). At the end of the capture `finish` returns the
//! findings. No I/O, no locks: one detector instance serves one capture.

pub mod fasthash;
pub mod followup;
pub mod retx;
#[cfg(any(test, feature = "test-support"))]
pub mod synth;
pub mod timer;

pub use fasthash::{StreamMap, StreamSet};
pub use pcapsleuth_core::{Evidence, Finding, FlowRef, Severity};
pub use pcapsleuth_decode::Decoded;
pub use pcapsleuth_flow::{FlowEvent, PacketFlowInfo, PacketMeta};

use pcapsleuth_core::{Endpoint, StreamId};
use std::collections::HashMap;

/// One decoded packet with its flow verdict.
#[derive(Debug, Clone, Copy)]
pub struct PacketContext<'a> {
    /// Frame number, timestamp, interface.
    pub meta: PacketMeta,
    /// Decoded layers.
    pub decoded: &'a Decoded<'a>,
    /// `tcp.stream` and direction, if TCP (or an ICMP error quoting TCP).
    pub flow: PacketFlowInfo,
}

/// What a detector may consult when it writes its findings.
#[derive(Debug, Default)]
pub struct FinishContext {
    /// Client and server endpoints of every `tcp.stream`.
    pub streams: HashMap<StreamId, (Endpoint, Endpoint)>,
}

impl FinishContext {
    /// The [`FlowRef`] (client → server) of a TCP stream, if known.
    pub fn flow_ref(&self, stream: StreamId) -> Option<FlowRef> {
        self.streams.get(&stream).map(|(c, s)| FlowRef {
            protocol: "tcp".to_string(),
            client: c.addr.to_string(),
            client_port: c.port,
            server: s.addr.to_string(),
            server_port: s.port,
        })
    }
}

/// Static facts about a detector, for `pcapsleuth explain` and the README.
#[derive(Debug, Clone, Copy)]
pub struct DetectorInfo {
    /// Stable id used in findings and on the command line (`"syn-retransmit"`).
    pub id: &'static str,
    /// One-line title.
    pub title: &'static str,
    /// What it looks for, why (seed incident), false positives, and what to do.
    pub explain: &'static str,
}

/// A pathology detector. One instance per capture.
pub trait Detector: Send {
    /// Static description.
    fn info(&self) -> DetectorInfo;
    /// Called for every flow event, in frame order, before the packet's `on_packet`.
    fn on_flow_event(&mut self, _event: &FlowEvent) {}
    /// Called for every packet after its flow events.
    fn on_packet(&mut self, _pkt: &PacketContext<'_>) {}
    /// End of capture: return findings (any order; the pipeline sorts them).
    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding>;
}
