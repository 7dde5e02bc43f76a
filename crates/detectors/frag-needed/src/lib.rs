#![doc = include_str!("../README.md")]
//!
//! # Code layout
//! The detector collects every ICMP message ([`FragNeeded`]);
//! [`FragNeeded::diagnose`] turns the groups into plain-data [`Diagnosis`]
//! values at the end of the capture, and [`render`] writes each one's
//! summary, remedy and evidence.

mod diagnosis;
mod recurrence;
mod render;

pub use diagnosis::{Diagnosis, FragNeededEvidence, SenderNext, Verdict};
pub use recurrence::{BurstEvidence, UNMATCHED_SENT_BEFORE_NS};
pub use render::render;

use pcapsleuth_core::{Direction, Endpoint, FrameNo, SeqNum, StreamId, Timestamp};
use pcapsleuth_decode::IcmpKind;
use pcapsleuth_detect::followup::{FollowUp, WatchId};
use pcapsleuth_detect::{Detector, DetectorInfo, Finding, FinishContext, FlowEvent};
use std::net::IpAddr;

/// Detector id.
pub const ID: &str = "frag-needed";

/// A sender reaction within this many ns of the ICMP is "immediate".
pub const IMMEDIATE_NS: i64 = 10_000_000;
/// A sender wait at least this long (ns) after a router's ICMP makes the finding a warning.
pub const STALL_NS: i64 = 150_000_000;
/// Linux's default route MTU cache lifetime, s (`net.ipv4.route.mtu_expires`,
/// `net.ipv6.route.mtu_expires`); only quoted in prose: recurrence is measured,
/// whatever the lifetime.
pub const MTU_EXPIRES_S: i64 = 600;
/// The MTU of an Ethernet path without encapsulation, bytes: the reference for
/// `mtu_deficit_bytes` when the quoted datagram is not larger than the MTU.
pub const ETHERNET_MTU: u32 = 1500;

/// Guess what encapsulation explains an MTU below 1500 (bytes). Overheads:
/// IPIP 20 bytes (RFC 2003), GRE 24 (RFC 2784 over IPv4), VXLAN 50 (RFC 7348),
/// WireGuard 60/80 (IPv4/IPv6 outer), PPPoE 8 (RFC 2516), IPsec ESP ≈ 62–100
/// depending on cipher (RFC 4303).
pub fn encapsulation_guess(mtu: u32) -> &'static str {
    match mtu {
        1480 => "IPIP / IPVS tunnel mode (20 bytes)",
        1476 => "GRE (24 bytes)",
        1450 => "VXLAN (50 bytes)",
        1420 | 1440 => "WireGuard (60/80 bytes)",
        1492 => "PPPoE (8 bytes)",
        1400..=1438 => "IPsec ESP (likely)",
        1280 => "IPv6 minimum MTU (1280)",
        _ => "unknown",
    }
}

/// One ICMP frag-needed / PTB message, as collected.
#[derive(Debug, Clone)]
struct Icmp {
    frame: FrameNo,
    ts: Timestamp,
    mtu: Option<u32>,
    icmp_src: IpAddr,
    icmp_dst: IpAddr,
    quoted_src: Endpoint,
    quoted_dst: Endpoint,
    quoted_proto: u8,
    quoted_ip_len: u32,
    quoted_seq: Option<SeqNum>,
    quoted_rel_seq: Option<i64>,
    stream: Option<StreamId>,
    quoted_dir: Option<Direction>,
    matched_frame: Option<FrameNo>,
    matched_ts: Option<Timestamp>,
    matched_ip_len: Option<u32>,
    watch: Option<WatchId>,
}

impl Icmp {
    /// The host refused its own packet: the ICMP goes from the host to itself,
    /// or comes from the quoted packet's own source.
    fn self_addressed(&self) -> bool {
        self.icmp_src == self.icmp_dst || self.icmp_src == self.quoted_src.addr
    }
}

/// The `frag-needed` detector.
#[derive(Debug, Default)]
pub struct FragNeeded {
    icmps: Vec<Icmp>,
    follow: FollowUp,
    /// Largest IP datagram (bytes) captured per (stream, direction index).
    largest_sent: pcapsleuth_detect::StreamMap<(StreamId, usize), u32>,
}

impl FragNeeded {
    /// Record one frag-needed / PTB. The flow table emits this event once for
    /// every ICMP error, whatever it quotes (`stream` only for a quoted TCP
    /// segment it placed), so nothing else needs reading or de-duplicating.
    fn on_icmp_event(&mut self, e: &pcapsleuth_flow::IcmpErrorEvent) {
        if !matches!(e.kind, IcmpKind::FragNeeded | IcmpKind::PacketTooBig) {
            return;
        }
        let watch = match (e.stream, e.quoted_dir, e.quoted_rel_seq) {
            (Some(s), Some(d), Some(q)) => Some(self.follow.watch(s, d, q, e.ts)),
            _ => None,
        };
        self.icmps.push(Icmp {
            frame: e.frame,
            ts: e.ts,
            mtu: e.mtu,
            icmp_src: e.icmp_src,
            icmp_dst: e.icmp_dst,
            quoted_src: e.quoted_src,
            quoted_dst: e.quoted_dst,
            quoted_proto: e.quoted_proto,
            quoted_ip_len: e.quoted_ip_len,
            quoted_seq: e.quoted_seq,
            quoted_rel_seq: e.quoted_rel_seq,
            stream: e.stream,
            quoted_dir: e.quoted_dir,
            matched_frame: e.matched.map(|m| m.frame),
            matched_ts: e.matched.map(|m| m.ts),
            matched_ip_len: e.matched.map(|m| m.ip_len),
            watch,
        });
    }
}

impl Detector for FragNeeded {
    fn info(&self) -> DetectorInfo {
        DetectorInfo {
            id: ID,
            aliases: &[],
            title: "ICMP fragmentation needed / Packet Too Big",
            explain: include_str!("../README.md"),
        }
    }

    fn on_flow_event(&mut self, event: &FlowEvent) {
        match event {
            FlowEvent::Segment(s) => {
                self.follow.on_segment(s);
                let m = self
                    .largest_sent
                    .entry((s.stream, s.dir.index()))
                    .or_insert(0);
                *m = (*m).max(s.ip_len);
            }
            FlowEvent::IcmpError(e) => self.on_icmp_event(e),
            _ => {}
        }
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        self.diagnose(ctx).iter().map(render).collect()
    }
}

#[cfg(test)]
mod tests;
