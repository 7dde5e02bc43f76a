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
//! - [`dense::slot_mut`] grows the per-stream vectors indexed by `tcp.stream`;
//!   [`grow`] the per-stream queues.

pub mod consts;
pub mod dense;
pub mod finding;
pub mod flowkey;
pub mod grow;
pub mod opt;
pub mod pairs;
pub mod seq;
pub mod time;
pub mod timer;

pub use consts::{ip_protocol, linktype};
pub use finding::{Evidence, Finding, FindingBuilder, FlowRef, Protocol, Severity, StreamRef};
pub use flowkey::{Direction, Endpoint, FlowKey};
pub use pairs::StreamEndpoints;
pub use seq::SeqNum;
pub use time::{DurationNs, Timestamp};

/// Defines a transparent integer newtype: serde sees the bare number (so JSON is
/// unchanged), `Display` prints the bare number (so text output is unchanged).
macro_rules! int_newtype {
    ($(#[$meta:meta])* $name:ident($int:ty)) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default,
            serde::Serialize, serde::Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub $int);

        impl $name {
            /// The raw integer value.
            #[must_use]
            pub const fn get(self) -> $int {
                self.0
            }

            /// The value one greater (wrapping never happens in practice: the
            /// counters are far below the integer's range).
            #[must_use]
            pub const fn next(self) -> Self {
                Self(self.0 + 1)
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Display::fmt(&self.0, f)
            }
        }

        impl From<$int> for $name {
            fn from(v: $int) -> Self {
                Self(v)
            }
        }

        impl PartialEq<$int> for $name {
            fn eq(&self, other: &$int) -> bool {
                self.0 == *other
            }
        }

        impl From<$name> for $int {
            fn from(v: $name) -> Self {
                v.0
            }
        }
    };
}

int_newtype! {
    /// A Wireshark frame number: 1-based, counting every packet record of a
    /// capture file in file order across all interfaces, exactly as
    /// `frame.number`. Assigned by ingest as records are read; 0 is never a
    /// real frame (it is only the `Default`).
    FrameNo(u64)
}

int_newtype! {
    /// Index of a capture interface: pcapng Interface Description Block order
    /// within the file, counted across sections; always 0 for legacy pcap.
    /// Assigned by ingest.
    InterfaceId(u32)
}

int_newtype! {
    /// A stream index as Wireshark's `tcp.stream` / `udp.stream`: a dense,
    /// 0-based flow index in first-seen order, assigned by the flow table
    /// (separately for TCP and UDP).
    StreamId(u64)
}

impl TryFrom<usize> for InterfaceId {
    type Error = core::num::TryFromIntError;

    fn try_from(v: usize) -> Result<Self, Self::Error> {
        u32::try_from(v).map(Self)
    }
}

impl InterfaceId {
    /// The interface index as a `usize`, for indexing per-interface tables.
    #[must_use]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}
