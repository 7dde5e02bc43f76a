//! Collection: one compact [`Msg`] per DNS message seen (UDP datagram or
//! message in a TCP segment), with the name interned.

use crate::chunk::Chunker;
use crate::names::NameTable;
use pcapsleuth_core::{Direction, Endpoint, StreamId};
use pcapsleuth_decode::dns::{self, TcpDnsMessages};
use pcapsleuth_decode::Transport;
use pcapsleuth_detect::PacketContext;
use std::hash::BuildHasher;

pub use pcapsleuth_decode::dns::DNS_PORT;

/// The hash of a message's bytes ([`Msg::hash`]): fixed, so equal inputs
/// give equal reports run after run (a collision only makes two messages
/// within [`crate::lookup`]'s copy window look like copies of one).
const MSG_HASH: foldhash::quality::FixedState =
    foldhash::quality::FixedState::with_seed(0x5eed_d115);

/// One DNS message as seen on the wire: what the lookup matching needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Msg {
    /// Wireshark frame number.
    pub frame: u64,
    /// Capture time, ns since the Unix epoch.
    pub ts: i64,
    /// Capture interface.
    pub interface: u32,
    /// Carried over TCP (RFC 7766) rather than UDP.
    pub tcp: bool,
    /// `udp.stream` (or `tcp.stream` when `tcp`), if numbered.
    pub stream: Option<StreamId>,
    /// Sender.
    pub src: Endpoint,
    /// Receiver.
    pub dst: Endpoint,
    /// Transaction ID.
    pub id: u16,
    /// QR bit: a response.
    pub response: bool,
    /// TC bit: truncated.
    pub truncated: bool,
    /// RCODE.
    pub rcode: u8,
    /// ANCOUNT.
    pub answers: u16,
    /// Interned QNAME (lower case), index into the collector's names.
    pub name: u32,
    /// QTYPE.
    pub qtype: u16,
    /// QCLASS.
    pub qclass: u16,
    /// Hash of the DNS message bytes: the same message seen again (another
    /// interface, before and after NAT) hashes the same.
    pub hash: u64,
}

/// Collects [`Msg`]s from packets and hands them to the [`Chunker`].
#[derive(Debug, Clone, Default)]
pub struct Collector {
    /// The messages, concluded a chunk at a time.
    pub chunks: Chunker,
    /// Interned names: those the messages held, the lookups kept and the
    /// per-name totals name (released after each chunk, [`crate::names`]).
    pub names: NameTable,
    /// The QNAME being interned (no allocation per message).
    scratch: String,
    /// Next message boundary (raw sequence number) per TCP stream and
    /// direction (client → server); dropped when the flow ends.
    tcp_boundary: pcapsleuth_detect::StreamMap<(StreamId, bool), u32>,
}

/// Whether `ep` is a destination a unicast DNS exchange can have
/// (multicast: mDNS / LLMNR, broadcast: NetBIOS are other protocols).
fn unicast(ep: &Endpoint) -> bool {
    match ep.addr {
        std::net::IpAddr::V4(a) => !a.is_multicast() && !a.is_broadcast(),
        std::net::IpAddr::V6(a) => !a.is_multicast(),
    }
}

impl Collector {
    /// A collector whose chunker concludes every `chunk` messages
    /// ([`crate::chunk::CHUNK_MESSAGES`] by default).
    pub fn with_chunk(chunk: usize) -> Self {
        Collector {
            chunks: Chunker::with_chunk(chunk),
            ..Collector::default()
        }
    }

    /// The flow table retired `stream`: forget its message boundaries (a
    /// later segment of it starts at a message again).
    pub fn end_stream(&mut self, stream: StreamId) {
        if self.tcp_boundary.is_empty() {
            return;
        }
        self.tcp_boundary.remove(&(stream, true));
        self.tcp_boundary.remove(&(stream, false));
    }

    /// TCP stream directions whose message boundary is tracked.
    #[cfg(test)]
    fn tcp_directions(&self) -> usize {
        self.tcp_boundary.len()
    }

    /// Release the names nothing names any more (after a chunk was concluded).
    fn release_names(&mut self) {
        let mut live = vec![false; self.names.slots()];
        self.chunks.mark_names(&mut live);
        self.names.release_unmarked(&live);
    }

    /// Record the DNS messages of one packet, if any.
    pub fn on_packet(&mut self, pkt: &PacketContext<'_>) {
        let Some(ip) = pkt.decoded.ip else { return };
        match &pkt.decoded.transport {
            Transport::Udp(u) => {
                if u.src_port != DNS_PORT && u.dst_port != DNS_PORT {
                    return;
                }
                let src = Endpoint {
                    addr: ip.src,
                    port: u.src_port,
                };
                let dst = Endpoint {
                    addr: ip.dst,
                    port: u.dst_port,
                };
                self.push(pkt, false, pkt.flow.udp_stream, src, dst, u.payload);
            }
            Transport::Tcp(t) => {
                if (t.src_port != DNS_PORT && t.dst_port != DNS_PORT) || t.payload.is_empty() {
                    return;
                }
                let (Some(stream), Some(dir)) = (pkt.flow.stream, pkt.flow.dir) else {
                    return;
                };
                let key = (stream, dir == Direction::ClientToServer);
                let seq = t.seq.0;
                // Parse only segments that start at a message boundary: the
                // first data segment of a direction, then where the previous
                // messages end (retransmissions and continuations are skipped).
                let boundary = *self.tcp_boundary.entry(key).or_insert(seq);
                if boundary != seq {
                    return;
                }
                let mut next = seq;
                let src = Endpoint {
                    addr: ip.src,
                    port: t.src_port,
                };
                let dst = Endpoint {
                    addr: ip.dst,
                    port: t.dst_port,
                };
                for (len, bytes) in TcpDnsMessages::new(t.payload) {
                    next = next.wrapping_add(2).wrapping_add(len as u32);
                    self.push(pkt, true, Some(stream), src, dst, bytes);
                }
                self.tcp_boundary.insert(key, next);
            }
            _ => {}
        }
    }

    fn push(
        &mut self,
        pkt: &PacketContext<'_>,
        tcp: bool,
        stream: Option<StreamId>,
        src: Endpoint,
        dst: Endpoint,
        bytes: &[u8],
    ) {
        if !unicast(&dst) || src.port == 137 || dst.port == 137 {
            return;
        }
        let Some(m) = dns::parse(bytes) else { return };
        let Some(q) = m.question else { return };
        // Only standard queries (OPCODE 0) with one question: what stub
        // resolvers send (RFC 9619: QDCOUNT is 1).
        if m.header.opcode() != 0 || m.header.qdcount != 1 {
            return;
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        q.name.push_presentation(&mut scratch);
        self.add(
            Msg {
                frame: pkt.meta.frame.get(),
                ts: pkt.meta.ts.0,
                interface: pkt.meta.interface.get(),
                tcp,
                stream,
                src,
                dst,
                id: m.header.id,
                response: m.header.is_response(),
                truncated: m.header.truncated(),
                rcode: m.header.rcode(),
                answers: m.header.ancount,
                name: 0,
                qtype: q.qtype,
                qclass: q.qclass,
                hash: MSG_HASH.hash_one(bytes),
            },
            &scratch,
        );
        self.scratch = scratch;
    }

    /// Hand `msg` to the chunker with its name interned as `qname` (its
    /// `name` field is set here); release the names nothing names any more
    /// when that concluded a chunk.
    pub(crate) fn add(&mut self, mut msg: Msg, qname: &str) {
        msg.name = self.names.intern(qname);
        if self.chunks.push(msg) {
            self.release_names();
        }
    }
}

#[cfg(test)]
mod end_tests {
    use super::*;

    #[test]
    fn end_stream_forgets_only_that_streams_boundaries() {
        let mut c = Collector::default();
        for s in 0..3u64 {
            c.tcp_boundary.insert((StreamId(s), true), 100);
            c.tcp_boundary.insert((StreamId(s), false), 200);
        }
        c.end_stream(StreamId(1));
        assert_eq!(c.tcp_directions(), 4);
        assert!(!c.tcp_boundary.contains_key(&(StreamId(1), true)));
        assert_eq!(c.tcp_boundary.get(&(StreamId(2), false)), Some(&200));
    }
}
