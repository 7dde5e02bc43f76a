//! Vocabulary types shared by every pcapsleuth crate.
//!
//! Nothing here parses bytes or decides anything: these are the nouns the
//! pipeline (ingest → decode → flow → detectors → report) passes along.
//!
//! - Time is integer nanoseconds since the Unix epoch ([`Timestamp`]); spans are
//!   [`DurationNs`]. No `f64` time exists below the report layer.
//! - [`FrameNo`] is 1-based and equals Wireshark's `frame.number`.
//! - [`SeqNum`] is a TCP sequence number with RFC 1982 serial arithmetic and
//!   deliberately no `Ord`: serial order is not transitive.
//! - [`Finding`] is what a detector reports; its JSON shape is the report contract.

pub mod consts;
pub mod finding;
pub mod flowkey;
pub mod seq;
pub mod time;
pub mod timer;

pub use consts::{ip_protocol, linktype};
pub use finding::{Evidence, Finding, FindingBuilder, FlowRef, Protocol, Severity, StreamRef};
pub use flowkey::{Direction, Endpoint, FlowKey};
pub use seq::SeqNum;
pub use time::{DurationNs, Timestamp};

/// A Wireshark frame number: 1-based, counting every packet record of a capture
/// file in file order across all interfaces, exactly as `frame.number`.
pub type FrameNo = u64;

/// Index of a capture interface (pcapng Interface Description Block order within
/// the file, counted across sections; always 0 for legacy pcap).
pub type InterfaceId = u32;

/// Wireshark's `tcp.stream`: a dense, 0-based flow index in first-seen order.
pub type StreamId = u64;
