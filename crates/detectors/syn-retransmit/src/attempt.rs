//! One connection attempt (SYN, its retries, the answer) as the detector
//! accumulates it from segment events.

use pcapsleuth_core::{Direction, FrameNo, InterfaceId, SeqNum, StreamId, Timestamp};
use pcapsleuth_flow::SegmentEvent;

/// A SYN (or SYN/ACK) repeated sooner than this (ns) is not a timer retry
/// (RFC 6298 and every known stack wait ≥ 200 ms): another sighting of the
/// same packet, counted in `duplicate_sightings`. Used only when the IPv4 ID
/// cannot tell (ID 0 or IPv6); see [`same_packet`].
const MIN_RETRY_GAP_NS: i64 = 100_000_000;

/// A SYN (or SYN/ACK) repeated sooner than this (ns) is the same packet seen
/// twice (two taps, VLANs or encapsulations) whatever its IPv4 ID.
const COPY_GAP_NS: i64 = 1_000_000;

/// One transmission (a SYN, SYN/ACK, RST or ACK) as captured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tx {
    /// Its frame number.
    pub(crate) frame: FrameNo,
    /// Capture time, ns since the Unix epoch.
    pub(crate) ts: Timestamp,
    /// IPv4 identification (`None` for IPv6).
    pub(crate) ip_id: Option<u32>,
    /// The interface it was captured on.
    pub(crate) interface: InterfaceId,
}

/// Whether `s`, a repeat of `prev` (same ISN, same direction), is another
/// sighting of the same packet rather than a new transmission:
/// - sooner than [`COPY_GAP_NS`]: a copy whatever its IPv4 ID (no SYN timer
///   fires within 1 ms; zeek `gtp6_gtp_0x32.pcap` shows one SYN 1 µs apart
///   re-encapsulated with new inner and outer IDs);
/// - a different non-zero IPv4 ID: a new packet however soon (nDPI
///   `webex.pcap` stream 24: SYN re-sent after 78.7 ms, ID 0x7cc0 → 0x7cc1,
///   and its SYN/ACK re-sent with a new ID too);
/// - otherwise (same ID, ID 0 as Linux DF SYNs carry per RFC 6864, or IPv6):
///   a copy when sooner than [`MIN_RETRY_GAP_NS`]. The same non-zero ID is
///   *not* proof of a copy: chrissanders `nowebaccess3.pcapng` stream 0
///   re-sends its SYN after 1 s with the same ID 0x178a.
pub(crate) fn same_packet(prev: &Tx, s: &SegmentEvent) -> bool {
    let gap = s.ts.0.saturating_sub(prev.ts.0).saturating_abs();
    if gap < COPY_GAP_NS {
        return true;
    }
    match (prev.ip_id, s.ip_id) {
        (Some(a), Some(b)) if a != 0 && b != 0 && a != b => false,
        _ => gap < MIN_RETRY_GAP_NS,
    }
}

/// One connection attempt: a SYN with one ISN in one `tcp.stream`, its
/// retries and the answer.
#[derive(Debug, Clone)]
pub(crate) struct Attempt {
    pub(crate) stream: StreamId,
    /// Direction of the SYN (the client is its sender).
    pub(crate) syn_dir: Direction,
    /// The SYN's initial sequence number.
    pub(crate) isn: SeqNum,
    /// The SYN and its retransmissions (other sightings excluded).
    pub(crate) syns: Vec<Tx>,
    /// The flow table's wait before the first retransmission (ns).
    pub(crate) first_retx_wait_ns: Option<i64>,
    /// Other sightings of the SYNs and SYN/ACKs (frames).
    pub(crate) duplicates: Vec<FrameNo>,
    /// ISN of the latest SYN/ACK.
    pub(crate) synack_isn: Option<SeqNum>,
    /// SYN/ACKs (first and re-sent, other sightings excluded).
    pub(crate) synacks: Vec<Tx>,
    /// SYN/ACKs re-sent with the same ISN (count).
    pub(crate) synack_retransmits: u32,
    /// Of those, re-sent before the handshake ACK (count).
    pub(crate) synack_retx_pre_ack: u32,
    /// The server's RST, when it came before any SYN/ACK.
    pub(crate) rst: Option<Tx>,
    /// The client's ACK of a SYN/ACK (third step of the handshake).
    pub(crate) handshake_ack: Option<Tx>,
    /// The SYN/ACK that ACK acknowledged (the latest one seen before it).
    pub(crate) acked_synack: Option<Tx>,
    /// First ACK-bearing segment of the SYN sender when no SYN/ACK was captured
    /// (half-duplex capture: the answer exists but is not in the file).
    pub(crate) went_on: Option<Tx>,
    /// SYNs re-sent after a SYN/ACK was captured: the SYN/ACK did not reach
    /// the client (lost between the capture point and the client).
    pub(crate) syns_after_synack: u32,
    /// Every SYN/ACK ISN seen (a load balancer may answer twice with two ISNs;
    /// the handshake ACK may acknowledge either).
    pub(crate) synack_isns: Vec<SeqNum>,
}

impl Attempt {
    /// A new attempt of `stream`: SYN `tx` in direction `syn_dir` with ISN `isn`.
    pub(crate) fn new(stream: StreamId, syn_dir: Direction, isn: SeqNum, tx: Tx) -> Attempt {
        Attempt {
            stream,
            syn_dir,
            isn,
            syns: vec![tx],
            first_retx_wait_ns: None,
            duplicates: Vec::new(),
            synack_isn: None,
            synacks: Vec::new(),
            synack_retransmits: 0,
            synack_retx_pre_ack: 0,
            rst: None,
            handshake_ack: None,
            acked_synack: None,
            went_on: None,
            syns_after_synack: 0,
            synack_isns: Vec::new(),
        }
    }

    /// Heap bytes of its lists.
    pub(crate) fn heap_bytes(&self) -> usize {
        (self.syns.capacity() + self.synacks.capacity()) * std::mem::size_of::<Tx>()
            + self.duplicates.capacity() * std::mem::size_of::<FrameNo>()
            + self.synack_isns.capacity() * std::mem::size_of::<SeqNum>()
    }

    pub(crate) fn answered(&self) -> bool {
        !self.synacks.is_empty() || self.rst.is_some() || self.went_on.is_some()
    }
    pub(crate) fn delayed(&self) -> bool {
        self.syns.len() > 1 || self.synack_retx_pre_ack > 0
    }
    pub(crate) fn refused_at_once(&self) -> bool {
        self.rst.is_some() && self.synacks.is_empty() && self.syns.len() <= 1
    }
    /// The handshake completed: the client acknowledged the SYN/ACK, or (no
    /// SYN/ACK captured) went on sending, or one SYN/ACK was captured and its
    /// ACK may simply be missing (capture cut). A SYN/ACK the server had to
    /// re-send and that was never acknowledged is not a connection: servers
    /// re-send it for a minute to a client that never answers.
    pub(crate) fn connected(&self) -> bool {
        self.handshake_ack.is_some() || self.went_on.is_some() || self.synacks.len() == 1
    }
    /// The server answered but the client never acknowledged the SYN/ACK.
    pub(crate) fn synack_unacknowledged(&self) -> bool {
        !self.synacks.is_empty() && !self.connected()
    }
    /// First SYN → the SYN/ACK that was acknowledged (or first SYN/ACK, else last SYN / RST), ns.
    pub(crate) fn delay_ns(&self) -> i64 {
        let Some(first) = self.syns.first() else {
            return 0;
        };
        let end = if let (true, Some(h)) = (self.syns_after_synack > 0, self.handshake_ack) {
            // The client re-sent its SYN after a SYN/ACK was captured: it only
            // learnt of the answer when it sent the handshake ACK.
            h.ts
        } else if let Some(a) = self.acked_synack {
            a.ts
        } else if let (false, Some(s)) = (self.connected(), self.synacks.last()) {
            s.ts
        } else if let Some(s) = self.synacks.first() {
            s.ts
        } else if let Some(w) = self.went_on {
            w.ts
        } else if let Some(r) = self.rst {
            r.ts
        } else {
            self.syns.last().map_or(first.ts, |t| t.ts)
        };
        end.0.saturating_sub(first.ts.0).max(0)
    }
    pub(crate) fn gaps_ns(&self) -> Vec<i64> {
        let txs = if self.syns.len() > 1 {
            &self.syns
        } else {
            &self.synacks
        };
        let mut ts: Vec<i64> = txs.iter().map(|t| t.ts.0).collect();
        ts.sort_unstable();
        ts.windows(2).map(|w| w[1] - w[0]).collect()
    }
}
