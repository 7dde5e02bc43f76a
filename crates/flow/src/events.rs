//! Events the flow table emits, in frame order, for detectors.

use crate::PacketFingerprint;
use pcapsleuth_core::{
    ip_protocol, Direction, Endpoint, FrameNo, InterfaceId, SeqNum, StreamId, Timestamp,
};
use pcapsleuth_decode::{IcmpKind, TcpFlags};
use serde::Serialize;
use std::net::IpAddr;

/// Per-segment classification, one boolean per Wireshark `tcp.analysis.*` flag.
/// Two copies travel on every [`SegmentEvent`]: Wireshark's verdict and ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct SegmentAnalysis {
    /// `tcp.analysis.retransmission` (Wireshark sets it also for fast and spurious).
    pub retransmission: bool,
    /// `tcp.analysis.fast_retransmission`.
    pub fast_retransmission: bool,
    /// `tcp.analysis.spurious_retransmission`.
    pub spurious_retransmission: bool,
    /// `tcp.analysis.out_of_order`.
    pub out_of_order: bool,
    /// `tcp.analysis.lost_segment` (previous segment not captured).
    pub lost_segment: bool,
    /// `tcp.analysis.ack_lost_segment` (ACKed unseen segment).
    pub ack_lost_segment: bool,
    /// `tcp.analysis.duplicate_ack`.
    pub duplicate_ack: bool,
    /// `tcp.analysis.duplicate_ack_num` (0 when not a duplicate ACK).
    pub duplicate_ack_num: u32,
    /// `tcp.analysis.zero_window`.
    pub zero_window: bool,
    /// `tcp.analysis.zero_window_probe`.
    pub zero_window_probe: bool,
    /// `tcp.analysis.zero_window_probe_ack`.
    pub zero_window_probe_ack: bool,
    /// `tcp.analysis.keep_alive`.
    pub keep_alive: bool,
    /// `tcp.analysis.keep_alive_ack`.
    pub keep_alive_ack: bool,
    /// `tcp.analysis.window_full`.
    pub window_full: bool,
    /// `tcp.analysis.window_update`.
    pub window_update: bool,
    /// `tcp.analysis.reused_ports`.
    pub reused_ports: bool,
}

/// A flow seen for the first time (emitted before its first segment event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowStarted {
    /// `tcp.stream`.
    pub stream: StreamId,
    /// The side that sent the first SYN (else the first sender).
    pub client: Endpoint,
    /// The other side.
    pub server: Endpoint,
    /// Frame that created the stream.
    pub frame: FrameNo,
    /// Its timestamp.
    pub ts: Timestamp,
}

/// One TCP segment, classified, with the sender's state after it.
/// Sequence offsets are bytes relative to the sender's ISN (the SYN has 0,
/// the first data byte 1, as Wireshark's relative sequence numbers), 64-bit so
/// they never wrap; when the ISN was not captured the first sequence seen is
/// the base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentEvent {
    /// `tcp.stream`.
    pub stream: StreamId,
    /// Direction of travel.
    pub dir: Direction,
    /// Frame number.
    pub frame: FrameNo,
    /// Capture time.
    pub ts: Timestamp,
    /// Interface it was captured on.
    pub interface: InterfaceId,
    /// TCP flags.
    pub flags: TcpFlags,
    /// Raw sequence number.
    pub seq: SeqNum,
    /// Raw acknowledgement number.
    pub ack: SeqNum,
    /// Relative sequence number (bytes).
    pub rel_seq: i64,
    /// Relative acknowledgement number in the peer's space (bytes), if ACK set and the peer's base is known.
    pub rel_ack: Option<i64>,
    /// TCP payload length in bytes (from the IP length).
    pub payload_len: u32,
    /// IP datagram length in bytes (what a path MTU limits).
    pub ip_len: u32,
    /// IPv4 identification, if any.
    pub ip_id: Option<u32>,
    /// Raw window field.
    pub window_raw: u16,
    /// Advertised receive window in bytes after RFC 7323 scaling; `None` when the
    /// scale is unknown (handshake not captured) — recorded, not guessed.
    pub window_bytes: Option<u64>,
    /// MSS option, if present (SYN segments).
    pub mss: Option<u16>,
    /// Window scale option, if present.
    pub window_scale: Option<u8>,
    /// Number of SACK blocks carried.
    pub sack_blocks: u8,
    /// Wireshark's verdict, as `tshark` would print it.
    pub wireshark: SegmentAnalysis,
    /// Our verdict: differs from Wireshark's for duplicate sightings (not a
    /// retransmission) and Linux zero-window probes (seq = SND.UNA−1: a probe, not a keep-alive).
    pub analysis: SegmentAnalysis,
    /// When this is another sighting of a packet already seen (another interface, or the
    /// same packet captured twice), the frame of the first sighting.
    pub duplicate_of: Option<FrameNo>,
    /// Sender's SND.UNA after this segment (highest relative ack the peer sent), bytes.
    pub snd_una: i64,
    /// Sender's SND.NXT after this segment (highest relative seq + len sent), bytes.
    pub snd_nxt: i64,
    /// For a retransmission: time since the first transmission of the same bytes (ns).
    pub since_first_tx_ns: Option<i64>,
    /// For an ACK: RTT to the segment it acknowledges, Karn's rule applied (ns).
    pub ack_rtt_ns: Option<i64>,
    /// Bytes in flight after this segment (Wireshark's `tcp.analysis.bytes_in_flight`).
    pub bytes_in_flight: Option<u64>,
    /// NAT-invariant identity of the packet: finds its copies on other
    /// interfaces also when NAT put them in another `tcp.stream`
    /// ([`crate::FingerprintIndex`]).
    pub fingerprint: PacketFingerprint,
}

/// What ended a stall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StallEnd {
    /// The stalled bytes (or SYN) were sent again.
    Retransmission,
    /// A zero-window / persist probe.
    Probe,
    /// New data moved.
    NewData,
    /// An ACK advanced.
    Ack,
    /// A reset.
    Rst,
    /// A FIN.
    Fin,
    /// The capture ended (stall still open).
    CaptureEnd,
}

/// An interval in which one direction had unacknowledged data or a pending SYN
/// and nothing moved (no segment of that flow in either direction) for at least
/// the configured threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StallEvent {
    /// `tcp.stream`.
    pub stream: StreamId,
    /// The direction that had data (or a SYN) outstanding.
    pub dir: Direction,
    /// Last frame before the silence.
    pub start_frame: FrameNo,
    /// Its timestamp.
    pub start_ts: Timestamp,
    /// First frame after the silence.
    pub end_frame: FrameNo,
    /// Its timestamp.
    pub end_ts: Timestamp,
    /// Bytes sent but unacknowledged while stalled.
    pub pending_bytes: u64,
    /// A SYN (or SYN/ACK) was the thing pending.
    pub pending_syn: bool,
    /// What ended it.
    pub ended_by: StallEnd,
}

/// The advertised receive window of one endpoint changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowChangeEvent {
    /// `tcp.stream`.
    pub stream: StreamId,
    /// Direction of the segment that advertised it (the advertiser is its sender).
    pub dir: Direction,
    /// Frame.
    pub frame: FrameNo,
    /// Timestamp.
    pub ts: Timestamp,
    /// Previous window in bytes (scaled), if known.
    pub old_bytes: Option<u64>,
    /// New window in bytes (scaled), if known.
    pub new_bytes: Option<u64>,
    /// New raw window field.
    pub raw: u16,
}

/// The captured segment an ICMP error's quote refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotedSegmentMatch {
    /// Frame of the (most recent) transmission of that segment before the ICMP.
    pub frame: FrameNo,
    /// Its timestamp.
    pub ts: Timestamp,
    /// Its relative sequence number.
    pub rel_seq: i64,
    /// Its payload length in bytes.
    pub payload_len: u32,
    /// Its IP datagram length in bytes.
    pub ip_len: u32,
}

/// An ICMP/ICMPv6 error message that quotes a packet (RFC 792, RFC 4443 §2.4(c)).
///
/// Emitted once for **every** such error, whatever it quotes (TCP, UDP, ICMP,
/// another protocol, a header cut short) and whether or not the quote matches
/// a known flow, so detectors never need to read ICMP from raw packets.
/// When the quote is a TCP header with both ports ([`IcmpErrorEvent::quotes_tcp`]),
/// it is matched to its `tcp.stream` as Wireshark's dissection of the quote
/// does, and to the captured segment it quotes; otherwise `stream`,
/// `quoted_dir`, `quoted_rel_seq` and `matched` are `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcmpErrorEvent {
    /// Frame of the ICMP message.
    pub frame: FrameNo,
    /// Its timestamp.
    pub ts: Timestamp,
    /// Interface it was captured on.
    pub interface: InterfaceId,
    /// What it is.
    pub kind: IcmpKind,
    /// Type.
    pub icmp_type: u8,
    /// Code.
    pub code: u8,
    /// Next-hop MTU / PTB MTU in bytes.
    pub mtu: Option<u32>,
    /// Source of the ICMP message (the router, or the host itself).
    pub icmp_src: IpAddr,
    /// Destination of the ICMP message.
    pub icmp_dst: IpAddr,
    /// Quoted packet's source (port 0 when the quote holds no ports, see `quoted_ports`).
    pub quoted_src: Endpoint,
    /// Quoted packet's destination (port 0 when the quote holds no ports).
    pub quoted_dst: Endpoint,
    /// Quoted IP protocol number (IPv4 `protocol`, IPv6 last `next header`
    /// decoded), as in [`pcapsleuth_core::ip_protocol`]: `TCP` 6, `UDP` 17,
    /// `ICMP` 1, `ICMPV6` 58, …
    pub quoted_proto: u8,
    /// Both transport ports were quoted: a TCP, UDP, DCCP, SCTP or UDP-Lite
    /// header of at least 4 bytes, not in a non-first fragment.
    pub quoted_ports: bool,
    /// Quoted IPv4 identification (`None` for IPv6): with the quoted TCP
    /// sequence number it identifies the original packet also across NAT
    /// (see [`crate::PacketFingerprint`]).
    pub quoted_ip_id: Option<u32>,
    /// Quoted IP datagram length in bytes (the packet that did not fit).
    pub quoted_ip_len: u32,
    /// Quoted TCP sequence number, if TCP and at least 8 transport bytes were quoted.
    pub quoted_seq: Option<SeqNum>,
    /// Stream of the quoted flow, if it is a known (or newly created) TCP flow.
    pub stream: Option<StreamId>,
    /// `udp.stream` of a quoted UDP header, when Wireshark numbers it
    /// (`crate::udp`; the same as [`crate::PacketFlowInfo::udp_stream`]).
    pub udp_stream: Option<StreamId>,
    /// Direction of the quoted packet within `stream` (TCP) or `udp_stream` (UDP).
    pub quoted_dir: Option<Direction>,
    /// Quoted sequence relative to the quoted sender's ISN.
    pub quoted_rel_seq: Option<i64>,
    /// The captured segment the quote refers to, if found.
    pub matched: Option<QuotedSegmentMatch>,
}

/// One UDP datagram (the innermost UDP header of the frame), numbered with
/// Wireshark's `udp.stream` (`crate::udp`). Emitted for every datagram the
/// UDP dissector numbers, in frame order; a UDP header quoted in an ICMP error
/// is not a datagram (its stream is in [`crate::PacketFlowInfo::udp_stream`]).
///
/// The payload itself stays in the decoded packet
/// (`pcapsleuth_decode::UdpDatagram::payload`): a detector reads it in
/// `on_packet`, where [`crate::PacketFlowInfo::udp_stream`] gives the same
/// stream as this event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramEvent {
    /// `udp.stream`.
    pub stream: StreamId,
    /// Direction: client→server when sent by the conversation's first sender.
    pub dir: Direction,
    /// Frame number.
    pub frame: FrameNo,
    /// Capture time, ns since the Unix epoch.
    pub ts: Timestamp,
    /// Interface it was captured on.
    pub interface: InterfaceId,
    /// Sender's address and port.
    pub src: Endpoint,
    /// Receiver's address and port.
    pub dst: Endpoint,
    /// UDP payload length in bytes, from the UDP Length field (minus the
    /// 8-byte header; for an IPv6 jumbogram, from the IP payload length).
    pub payload_len: u32,
    /// Payload bytes actually captured (≤ `payload_len` when the snaplen cut it).
    pub captured_len: u32,
    /// IP datagram length in bytes (IPv4 total length; IPv6 40 + payload length).
    pub ip_len: u32,
    /// IPv4 identification (or IPv6 fragment header id), if any.
    pub ip_id: Option<u32>,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
    /// True for the datagram that created this `udp.stream` (its first
    /// sighting; a conversation created by an ICMP error's quote has none).
    pub first_in_stream: bool,
    /// NAT-invariant identity of the datagram (IP ID, payload length and
    /// payload hash): finds its copies on other interfaces also when NAT put
    /// them in another `udp.stream` ([`crate::FingerprintIndex`]).
    pub fingerprint: PacketFingerprint,
}

impl IcmpErrorEvent {
    /// The quote is a TCP header with both ports: the only errors matched to
    /// a `tcp.stream` (and the only ones the flow table emitted before it
    /// reported every error). Detectors about TCP flows filter on this.
    pub fn quotes_tcp(&self) -> bool {
        self.quoted_proto == ip_protocol::TCP && self.quoted_ports
    }
}

/// Everything the flow table tells detectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowEvent {
    /// A new `tcp.stream`.
    FlowStarted(FlowStarted),
    /// A TCP segment, classified.
    Segment(SegmentEvent),
    /// A stall closed.
    Stall(StallEvent),
    /// An advertised window changed.
    WindowChange(WindowChangeEvent),
    /// An ICMP/ICMPv6 error quoting a packet (any protocol, matched or not).
    IcmpError(IcmpErrorEvent),
    /// A UDP datagram, with its `udp.stream`.
    Datagram(DatagramEvent),
    /// A `tcp.stream` left the flow table ([`FlowEnded`]): drop its state.
    FlowEnded(FlowEnded),
}

/// Why the flow table retired a `tcp.stream` before the end of the capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowEndReason {
    /// Closed (RST seen, or both FINs acknowledged) and then quiet for
    /// [`crate::FlowConfig::closed_quiet_ns`] of capture time.
    Closed,
    /// No packet for [`crate::FlowConfig::idle_timeout_ns`] of capture time
    /// (longer than Linux's `TCP_RTO_MAX`, 120 s, so no live timer is cut).
    Idle,
    /// Evicted, least recently active first, because the table held
    /// [`crate::FlowConfig::max_flows`] live streams (the report says so).
    Evicted,
}

/// A `tcp.stream` retired from the flow table while the capture goes on
/// (emitted once, before the events of the packet whose timestamp or arrival
/// retired it; never at the end of the capture, where every stream is still
/// live). Its summary is kept; every consumer must now conclude what it
/// needs from the stream and drop its per-stream state, so memory stays
/// O(active flows). A later packet of the same conversation that Wireshark
/// would put in the same `tcp.stream` keeps that id but starts consumers'
/// state afresh (no second [`FlowStarted`]): consumers must accept segments
/// of a stream they dropped. (The flow table itself keeps a closed stream's
/// exact state for [`crate::FlowConfig::closed_keep_ns`] after it ends, so
/// such a packet's [`SegmentEvent`] fields are still exact.) The only other event of a retired stream is, at the
/// end of the capture, the [`StallEvent`] ended by [`StallEnd::CaptureEnd`]
/// of a stream retired idle or evicted while a direction had something
/// pending (its silence lasted until the capture end, as for a live stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowEnded {
    /// `tcp.stream`.
    pub stream: StreamId,
    /// The stream's last frame.
    pub last_frame: FrameNo,
    /// Timestamp of its last frame, ns.
    pub last_ts: Timestamp,
    /// Why it was retired.
    pub reason: FlowEndReason,
    /// The stream's client (the side that sent the first SYN, else the
    /// first sender), as in its [`FlowSummary`]: with `server`, the
    /// conversation a consumer keyed by addresses and ports can forget.
    pub client: Endpoint,
    /// The stream's server.
    pub server: Endpoint,
}

/// Zeek `conn_state` vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ConnState {
    /// Connection attempt seen, no reply.
    S0,
    /// Established, not terminated.
    S1,
    /// Normal establishment and termination.
    SF,
    /// Connection attempt rejected.
    REJ,
    /// Established, originator aborted (RST).
    RSTO,
    /// Established, responder aborted.
    RSTR,
    /// Originator sent SYN then RST, no SYN/ACK.
    RSTOS0,
    /// Responder sent SYN/ACK then RST, no SYN seen.
    RSTRH,
    /// Originator sent SYN then FIN, no SYN/ACK ("half open").
    SH,
    /// Responder sent SYN/ACK then FIN, no SYN seen.
    SHR,
    /// Established, originator closed (FIN), no reply FIN.
    S2,
    /// Established, responder closed, no originator FIN.
    S3,
    /// No SYN seen, just midstream traffic.
    OTH,
}

/// RTT statistics in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RttStats {
    /// Minimum, ms.
    pub min: f64,
    /// Mean, ms.
    pub avg: f64,
    /// Maximum, ms.
    pub max: f64,
}

/// Retransmission counts by kind (our verdict).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct RetransmissionCounts {
    /// All retransmissions.
    pub total: u64,
    /// Timeout-driven (not fast, not spurious).
    pub rto: u64,
    /// Fast retransmissions.
    pub fast: u64,
    /// Spurious retransmissions.
    pub spurious: u64,
}

/// One sighting of a duplicated packet on an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Sighting {
    /// Frame number.
    pub frame: FrameNo,
    /// Interface.
    pub interface: InterfaceId,
    /// Timestamp, ns.
    pub ts_ns: i64,
}

/// Per-flow summary (the `pcapsleuth flows` row). JSON field names are the contract.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowSummary {
    /// `tcp.stream`.
    pub tcp_stream: StreamId,
    /// Client address (the JSON contract's string is its `Display`:
    /// dotted quad or RFC 5952 IPv6, made in `pcapsleuth-report`'s `wire.rs`).
    pub client: IpAddr,
    /// Client port.
    pub client_port: u16,
    /// Server address (see `client`).
    pub server: IpAddr,
    /// Server port.
    pub server_port: u16,
    /// Packets both ways.
    pub packets: u64,
    /// IP bytes both ways.
    pub bytes: u64,
    /// Packets client→server.
    pub packets_c2s: u64,
    /// Packets server→client.
    pub packets_s2c: u64,
    /// Payload bytes client→server.
    pub payload_bytes_c2s: u64,
    /// Payload bytes server→client.
    pub payload_bytes_s2c: u64,
    /// First frame of the flow.
    pub first_frame: FrameNo,
    /// Last frame of the flow.
    pub last_frame: FrameNo,
    /// Duration from first to last packet, ms.
    pub duration_ms: f64,
    /// Zeek `conn_state`.
    pub state: ConnState,
    /// Retransmissions (our verdict).
    pub retransmissions: RetransmissionCounts,
    /// Packets that were other sightings of an already-seen packet.
    pub duplicate_sightings: u64,
    /// Per-interface sightings of duplicated packets (capped; see `sightings_capped`).
    pub sightings: Vec<Sighting>,
    /// True if the sightings list hit its cap.
    pub sightings_capped: bool,
    /// Total time either side advertised a zero window, ms.
    pub zero_window_ms: f64,
    /// Zero-window episodes.
    pub zero_window_episodes: u64,
    /// SYN → SYN/ACK → ACK round trip as seen at the capture point, ms.
    pub handshake_rtt_ms: Option<f64>,
    /// ACK RTT statistics (Karn's rule), ms.
    pub rtt_ms: Option<RttStats>,
    /// Longest stall, ms (0 when none).
    pub longest_stall_ms: f64,
    /// Frames bounding the longest stall.
    pub longest_stall_frames: Option<[FrameNo; 2]>,
    /// MSS offered by client / server, bytes.
    pub mss: [Option<u16>; 2],
    /// Window scale offered by client / server.
    pub window_scale: [Option<u8>; 2],
    /// True if the unacked-segment list of either side hit its cap.
    pub unacked_capped: bool,
}
