//! TCP flow state reconstruction.
//!
//! [`FlowTable::on_packet`] takes every decoded packet in frame order and
//! - assigns Wireshark-exact `tcp.stream` ids ([`StreamId`], dense, 0-based, first-seen order),
//! - keeps Zeek-style per-endpoint state in 64-bit relative sequence space
//!   (SND.UNA, SND.NXT, advertised window with RFC 7323 scaling, MSS, SACK),
//! - classifies every segment with Wireshark's `tcp.analysis.*` heuristics
//!   (`tcp_analyze_sequence_number` in `epan/dissectors/packet-tcp.c`) and with
//!   our corrected verdict (duplicate sightings, Linux zero-window probes),
//! - emits [`FlowEvent`]s that detectors consume instead of re-deriving TCP state.
//!
//! Memory is O(active flows): unacked-segment lists and sighting windows are capped.

pub mod analysis;
mod endpoint;
pub mod events;
mod summary;
mod table;

pub use events::*;
pub use table::{FlowConfig, FlowTable, PacketFlowInfo, PacketMeta};
