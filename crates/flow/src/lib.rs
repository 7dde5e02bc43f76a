//! TCP flow state reconstruction.
//!
//! [`FlowTable::on_packet`] takes every decoded packet in frame order and
//! - assigns Wireshark-exact `tcp.stream` ids ([`StreamId`](pcapsleuth_core::StreamId), dense, 0-based, first-seen order),
//! - keeps Zeek-style per-endpoint state in 64-bit relative sequence space
//!   (SND.UNA, SND.NXT, advertised window with RFC 7323 scaling, MSS, SACK),
//! - classifies every segment with Wireshark's `tcp.analysis.*` heuristics
//!   (`tcp_analyze_sequence_number` in `epan/dissectors/packet-tcp.c`) and with
//!   our corrected verdict (duplicate sightings, Linux zero-window probes),
//! - reports every ICMP/ICMPv6 error that quotes a packet once
//!   ([`FlowEvent::IcmpError`]), matched to the `tcp.stream` it quotes when it quotes TCP,
//! - gives every segment a NAT-invariant [`PacketFingerprint`] so a
//!   [`FingerprintIndex`] finds its copies on other interfaces, also across NAT
//!   (module [`fingerprint`]),
//! - emits [`FlowEvent`]s that detectors consume instead of re-deriving TCP state.
//!
//! # Memory model
//!
//! Heavy state is O(live flows); each retired flow keeps a compact record
//! (so late segments keep Wireshark's `tcp.stream`, and
//! [`FlowTable::summaries`] lists every flow). Sizes are x86-64, measured
//! with `size_of` and [`FlowTable::approx_heap_bytes`]
//! (`tests/retirement.rs`, `tests/many_streams.rs`).
//!
//! Per stream, always: a 16-byte slot in the table's `Vec` (indexed by
//! `tcp.stream`), an 8-byte bucket in the conversation index (`table/index.rs`,
//! the key lives in the record) and, while live, a 16-byte link in the
//! activity lists (`table/lru.rs`). The record itself is one of:
//! - **one packet** (or none: created by an ICMP error's quote): the raw
//!   fields of that packet, 72 bytes when both ends are IPv4 (104 otherwise),
//!   replayed through the same code when the stream is needed again
//!   (`table/compact.rs`). An idle one-SYN IPv4 stream costs about 120 bytes
//!   in all (vector growth slack included), live or retired;
//! - **full state** (two packets or more): the boxed record, 1 216 bytes
//!   inline (two endpoint states, the analyzer's Wireshark machine, summary
//!   counters; our copy of the machine, boxed, only once duplicate sightings
//!   or a zero window make it differ), plus per direction unacked ranges ≤
//!   [`FlowConfig::max_unacked_segments`] (4096) × 56 bytes and a 32 × 56-byte
//!   transmission ring; the Wireshark emulation's unacked lists ≤ 10 000 × 24
//!   bytes per machine (`TCP_MAX_UNACKED_SEGMENTS`); ≤ 4096 × 40-byte
//!   first-transmission records (of which at most 8 fully acknowledged); ≤ 256 duplicate-sighting entries of 40
//!   bytes plus a 4-byte hash each (`sightings.rs`: a 64-bit identity of the
//!   fingerprint, the first sighting's verdict, a place index) with a
//!   256-byte prefilter once 64 are held. These buffers start at 1 element,
//!   double up to 8 and then grow by half ([`pcapsleuth_core::grow`]); an unacked list is freed when everything
//!   in it is acknowledged. A 10-packet stream costs about 2 400 bytes while
//!   open (`tests/open_stream_size.rs`). A closed
//!   stream (RST, both FINs acknowledged, or replaced by a new ISN on the
//!   same ports) frees its buffers and keeps 4 sighting entries: about 1 750
//!   bytes while, for a second, it also keeps its not yet matched ones;
//! - **retired** ([`FlowEvent::FlowEnded`]: closed and quiet for
//!   [`FlowConfig::closed_quiet_ns`], idle for
//!   [`FlowConfig::idle_timeout_ns`], or evicted at [`FlowConfig::max_flows`]):
//!   the summary facts and a tombstone (endpoints, Wireshark's `base_seq`s,
//!   what was pending), about 400 bytes plus the sightings list. A late packet
//!   revives it: same `tcp.stream`, fresh state, summary continued. A closed
//!   stream that ends (5 s quiet by default, Zeek's `tcp_close_delay`) is
//!   first only **ended**: consumers got its `FlowEnded` and dropped their
//!   state, but the table keeps its closed record until
//!   [`FlowConfig::closed_keep_ns`] (120 s, `TCP_RTO_MAX`), so a stray FIN or
//!   data retransmission is still analysed exactly, as Wireshark does.
//!
//! [`FlowTable::stats`] counts live, peak live, retired and evicted streams.

pub mod analysis;
mod endpoint;
pub mod events;
pub mod fingerprint;
mod packed;
mod sightings;
mod summary;
mod table;
pub mod udp;

pub use events::*;
pub use fingerprint::{
    FingerprintIndex, FingerprintSighting, L4Fingerprint, PacketFingerprint, TcpFingerprint,
    UdpFingerprint,
};
pub use table::{FlowConfig, FlowTable, FlowTableStats, PacketFlowInfo, PacketMeta};
