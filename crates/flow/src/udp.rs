//! UDP conversations numbered exactly as Wireshark 4.0's `udp.stream`.
//!
//! # `udp.stream` assignment (Wireshark 4.0.17, `dissect` in `epan/dissectors/packet-udp.c`)
//! - The UDP dissector calls `find_or_create_conversation` for every UDP header
//!   it dissects and, the first time a conversation has no UDP data attached,
//!   takes the next id (`init_udp_conversation_data`: `udp_stream_count++`):
//!   ids are dense, 0-based, in first-seen order, counted apart from `tcp.stream`.
//! - Conversations are keyed by the unordered address/port pair (the exact
//!   match of `find_conversation`: both directions are one conversation). There
//!   is no timeout and no reuse rule: a pair keeps its id for the whole capture.
//!   Port 0 is an ordinary value.
//! - A header whose Length field is below 8 gets no id (`dissect` returns
//!   before the lookup), except IPv6 Length 0, a jumbogram (RFC 2675 §4):
//!   [`ws_numbers_udp_length`]. A Length beyond the IP payload still gets one.
//! - A UDP tunnel (VXLAN, Geneve, GTP-U, Teredo, CAPWAP data) is dissected
//!   outside in: its outer header finds or creates its conversation before
//!   the inner packet's, and `udp.stream` lists both, outer first
//!   ([`crate::PacketFlowInfo::outer_udp_stream`]).
//! - A first IP fragment (offset 0, MF) that cannot be reassembled because
//!   the snaplen cut it is still dissected (`packet-ip.c`: "First fragment,
//!   or not fragmented. Dissect what we have here"): its UDP header
//!   ([`pcapsleuth_decode::Decoded::first_fragment_udp`]) gets an id.
//! - A UDP header quoted in an ICMP/ICMPv6 error is dissected too
//!   (`in_error_pkt`): it finds or creates its conversation when all 8 header
//!   bytes are quoted (`dissect` reads the checksum at offset 6 before the
//!   lookup; a shorter quote throws) and the quote is not a non-first fragment.
//! - UDP in IP fragments is dissected once, in the frame that completes the
//!   reassembly (done by `pcapsleuth-decode`).
//! - UDP-Lite (IP protocol 136) goes through the same function and shares the
//!   table and the counter; the decoder does not decode it yet.
//!
//! Wireshark also lets other dissectors create conversations (TFTP's wildcard
//! port, RTP set up by SDP, …), which can merge or split pairs; those side
//! effects are not copied (`docs/udp-stream-differences.md`).

use crate::table::index::{key_hash, ConvIndex};
use crate::{DatagramEvent, FlowEvent, PacketFlowInfo, PacketMeta};
use pcapsleuth_core::{Direction, Endpoint, FlowKey, StreamEndpoints, StreamId};
use pcapsleuth_decode::{Decoded, IpHeader, IpVersion, QuotedPacket, UdpDatagram, UdpLayer};

/// Smallest quoted UDP header (bytes) that Wireshark dissects inside an ICMP
/// error: `dissect` reads the checksum (offset 6..8) before the conversation lookup.
pub const WS_MIN_QUOTED_UDP: u32 = 8;

/// Whether Wireshark 4.0 gives a UDP header with Length field `length`
/// (bytes, header included) a `udp.stream`: `length >= 8`, or an IPv6
/// jumbogram (`length == 0`, RFC 2675 §4), as in `dissect` (`packet-udp.c`).
pub fn ws_numbers_udp_length(length: u16, ipv6: bool) -> bool {
    length >= 8 || (length == 0 && ipv6)
}

/// One UDP conversation (`udp.stream`): the address/port pair it is keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpConversation {
    /// `udp.stream`.
    pub stream: StreamId,
    /// The sender of the datagram that created the conversation (for one
    /// created by an ICMP error's quote: the quoted source).
    pub client: Endpoint,
    /// The other side.
    pub server: Endpoint,
}

impl UdpConversation {
    /// Direction of a datagram from `src` within this conversation.
    pub fn dir_of(&self, src: Endpoint) -> Direction {
        if src == self.client {
            Direction::ClientToServer
        } else {
            Direction::ServerToClient
        }
    }
}

/// Result of a conversation lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpLookup {
    /// `udp.stream`.
    pub stream: StreamId,
    /// Direction of the looked-up packet within the conversation.
    pub dir: Direction,
    /// The lookup created the conversation.
    pub created: bool,
}

/// The UDP conversation table: one entry per unordered address/port pair,
/// for the whole capture (`udp.stream` numbering has no timeout in
/// Wireshark either, so nothing can be retired). O(conversations) memory,
/// kept small: a conversation is its pair only ([`StreamEndpoints`]: a
/// 12-byte record for an IPv4 pair, 40 bytes more for an IPv6 one) plus an
/// 8-byte index bucket, about 22 bytes for an IPv4 conversation. What the
/// datagrams carry goes to the detectors as [`FlowEvent::Datagram`]; the
/// table keeps no counters (a DNS capture of a million client ports: 22 MB,
/// against 120 MB with them).
#[derive(Debug, Clone, Default)]
pub struct UdpTable {
    by_key: ConvIndex,
    ends: StreamEndpoints,
    len: usize,
}

impl UdpTable {
    /// An empty table.
    pub fn new() -> Self {
        UdpTable::default()
    }

    /// Find or create the conversation of a UDP header from `src` to `dst`.
    pub fn lookup(&mut self, src: Endpoint, dst: Endpoint) -> UdpLookup {
        let key = FlowKey::new(src, dst);
        let tag = key_hash(&key);
        let ends = &self.ends;
        let holds = |i: usize| {
            ends.get(&StreamId(i as u64))
                .is_some_and(|(c, s)| FlowKey::new(c, s) == key)
        };
        if let Some(i) = self.by_key.get(tag, holds) {
            if let Some((client, _)) = self.ends.get(&StreamId(i as u64)) {
                return UdpLookup {
                    stream: StreamId(i as u64),
                    dir: if src == client {
                        Direction::ClientToServer
                    } else {
                        Direction::ServerToClient
                    },
                    created: false,
                };
            }
        }
        let idx = self.len;
        let stream = StreamId(idx as u64);
        self.ends.insert(stream, (src, dst));
        self.len += 1;
        let ends = &self.ends;
        self.by_key.set(tag, idx, |i| {
            ends.get(&StreamId(i as u64))
                .is_some_and(|(c, s)| FlowKey::new(c, s) == key)
        });
        UdpLookup {
            stream,
            dir: Direction::ClientToServer,
            created: true,
        }
    }

    /// The conversation with this `udp.stream`, if any.
    pub fn get(&self, stream: StreamId) -> Option<UdpConversation> {
        let (client, server) = self.ends.get(&stream)?;
        Some(UdpConversation {
            stream,
            client,
            server,
        })
    }

    /// Number of conversations (the next `udp.stream` id).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no UDP conversation was seen.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The flow table's UDP step for a frame whose innermost transport is UDP:
/// number the datagram, emit [`FlowEvent::Datagram`]. A Length
/// field Wireshark rejects ([`ws_numbers_udp_length`]) gets nothing.
pub(crate) fn on_datagram(
    table: &mut UdpTable,
    meta: &PacketMeta,
    ip: &IpHeader,
    d: &UdpDatagram<'_>,
    out: &mut Vec<FlowEvent>,
) -> PacketFlowInfo {
    if !ws_numbers_udp_length(d.length, ip.version == IpVersion::V6) {
        return PacketFlowInfo::default();
    }
    let src = Endpoint {
        addr: ip.src,
        port: d.src_port,
    };
    let dst = Endpoint {
        addr: ip.dst,
        port: d.dst_port,
    };
    let l = table.lookup(src, dst);
    out.push(FlowEvent::Datagram(DatagramEvent {
        stream: l.stream,
        dir: l.dir,
        frame: meta.frame,
        ts: meta.ts,
        interface: meta.interface,
        src,
        dst,
        payload_len: d.payload_len,
        captured_len: u32::try_from(d.payload.len()).unwrap_or(u32::MAX),
        ip_len: ip.total_len,
        ip_id: ip.ip_id,
        ttl: ip.ttl,
        first_in_stream: l.created,
        fingerprint: crate::PacketFingerprint::udp(ip, d.payload_len, d.payload),
    }));
    PacketFlowInfo {
        udp_stream: Some(l.stream),
        udp_dir: Some(l.dir),
        ..PacketFlowInfo::default()
    }
}

/// Number a UDP header that is not the frame's transport (a
/// tunnel's outer header, an unreassembled first fragment); no event.
fn on_layer(table: &mut UdpTable, u: &UdpLayer) -> Option<UdpLookup> {
    if !ws_numbers_udp_length(u.length, u.ip.version == IpVersion::V6) {
        return None;
    }
    let src = Endpoint {
        addr: u.ip.src,
        port: u.src_port,
    };
    let dst = Endpoint {
        addr: u.ip.dst,
        port: u.dst_port,
    };
    Some(table.lookup(src, dst))
}

/// The flow table's UDP step for the outer header of a UDP tunnel
/// ([`Decoded::outer_udp`]), run before the inner packet's step: its
/// `udp.stream` (no event: the
/// inner packet is the one detectors see).
pub(crate) fn on_outer(table: &mut UdpTable, pkt: &Decoded<'_>) -> Option<StreamId> {
    let u = pkt.outer_udp.as_ref()?;
    on_layer(table, u).map(|l| l.stream)
}

/// The flow table's UDP step for a frame without a decoded transport: a
/// first fragment that was not reassembled but whose UDP header Wireshark
/// dissects ([`Decoded::first_fragment_udp`]) gets its `udp.stream`
/// (no [`FlowEvent::Datagram`], as the payload is incomplete and
/// the decoder leaves the transport empty).
pub(crate) fn on_first_fragment(table: &mut UdpTable, pkt: &Decoded<'_>) -> PacketFlowInfo {
    match pkt
        .first_fragment_udp
        .as_ref()
        .and_then(|u| on_layer(table, u))
    {
        Some(l) => PacketFlowInfo {
            udp_stream: Some(l.stream),
            udp_dir: Some(l.dir),
            ..PacketFlowInfo::default()
        },
        None => PacketFlowInfo::default(),
    }
}

/// The flow table's UDP step for an ICMP/ICMPv6 error (a no-op unless it
/// quotes UDP): the quoted header finds or creates its conversation as
/// Wireshark's dissection of the quote does (all 8 header bytes quoted, not a
/// non-first fragment); no event is emitted.
pub(crate) fn on_quote(table: &mut UdpTable, q: &QuotedPacket) -> PacketFlowInfo {
    if q.ip.protocol != pcapsleuth_core::ip_protocol::UDP {
        return PacketFlowInfo::default();
    }
    let non_first_fragment = q.ip.fragment.is_some_and(|f| f.offset > 0);
    let (Some(sp), Some(dp)) = (q.src_port, q.dst_port) else {
        return PacketFlowInfo::default();
    };
    if q.transport_bytes < WS_MIN_QUOTED_UDP || non_first_fragment {
        return PacketFlowInfo::default();
    }
    let src = Endpoint {
        addr: q.ip.src,
        port: sp,
    };
    let dst = Endpoint {
        addr: q.ip.dst,
        port: dp,
    };
    let l = table.lookup(src, dst);
    PacketFlowInfo {
        udp_stream: Some(l.stream),
        udp_dir: Some(l.dir),
        ..PacketFlowInfo::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    fn ep(last: u8, port: u16) -> Endpoint {
        Endpoint {
            addr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)),
            port,
        }
    }

    #[test]
    fn both_directions_are_one_conversation_and_ids_are_first_seen_order() {
        let mut t = UdpTable::new();
        let a = t.lookup(ep(1, 5353), ep(2, 53));
        assert_eq!(
            (a.stream, a.dir, a.created),
            (StreamId(0), Direction::ClientToServer, true)
        );
        let b = t.lookup(ep(3, 1000), ep(2, 53));
        assert_eq!((b.stream, b.created), (StreamId(1), true));
        let r = t.lookup(ep(2, 53), ep(1, 5353));
        assert_eq!(
            (r.stream, r.dir, r.created),
            (StreamId(0), Direction::ServerToClient, false)
        );
        assert_eq!(
            t.get(StreamId(0)),
            Some(UdpConversation {
                stream: StreamId(0),
                client: ep(1, 5353),
                server: ep(2, 53),
            })
        );
        assert_eq!(
            t.get(StreamId(1)).map(|c| c.dir_of(ep(2, 53))),
            Some(Direction::ServerToClient)
        );
        assert_eq!(t.get(StreamId(2)), None);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn port_zero_and_address_family_are_part_of_the_key() {
        let mut t = UdpTable::new();
        assert_eq!(t.lookup(ep(1, 0), ep(2, 0)).stream, StreamId(0));
        assert_eq!(t.lookup(ep(2, 0), ep(1, 0)).stream, StreamId(0));
        let v6 = |n: u16, port| Endpoint {
            addr: IpAddr::V6(Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0x0a00, n)),
            port,
        };
        assert_eq!(t.lookup(v6(1, 0), v6(2, 0)).stream, StreamId(1));
        assert_eq!(t.lookup(v6(2, 0), v6(1, 0)).dir, Direction::ServerToClient);
        assert_eq!(t.lookup(ep(1, 0), v6(2, 0)).stream, StreamId(2));
        assert_eq!(t.get(StreamId(1)).map(|c| c.client), Some(v6(1, 0)));
    }

    #[test]
    fn many_conversations_keep_their_ids() {
        // Past the index's growth steps, with IPv4 and IPv6 pairs interleaved.
        let mut t = UdpTable::new();
        let pair = |i: u32| {
            let a = if i.is_multiple_of(3) {
                IpAddr::V6(Ipv6Addr::new(
                    0x2001,
                    0xdb8,
                    0,
                    0,
                    0,
                    0,
                    (i >> 16) as u16,
                    i as u16,
                ))
            } else {
                IpAddr::V4(Ipv4Addr::from(0xc000_0200 | (i & 0xff)))
            };
            (
                Endpoint {
                    addr: a,
                    port: (i >> 8) as u16,
                },
                ep(53, 53),
            )
        };
        for i in 0..50_000u32 {
            let (c, s) = pair(i);
            assert_eq!(t.lookup(c, s).stream, StreamId(u64::from(i)));
        }
        for i in (0..50_000u32).rev() {
            let (c, s) = pair(i);
            let l = t.lookup(s, c);
            assert_eq!(
                (l.stream, l.dir, l.created),
                (StreamId(u64::from(i)), Direction::ServerToClient, false)
            );
        }
        assert_eq!(t.len(), 50_000);
    }

    #[test]
    fn length_rule_follows_wireshark() {
        assert!(ws_numbers_udp_length(8, false));
        assert!(!ws_numbers_udp_length(7, false));
        assert!(!ws_numbers_udp_length(0, false));
        assert!(ws_numbers_udp_length(0, true));
        assert!(!ws_numbers_udp_length(5, true));
    }
}
