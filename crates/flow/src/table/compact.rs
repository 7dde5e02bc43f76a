//! Compact forms of a `tcp.stream` record (see the memory model in `lib.rs`):
//!
//! - [`First`]: a stream that saw one packet (or none: created by an ICMP
//!   error's quote) is kept as the raw fields of that packet ([`FirstPkt`]:
//!   72 bytes when both ends are IPv4, 104 otherwise), and rebuilt on demand by replaying it through the same code
//!   ([`replay`]): the state after one packet is a pure function of the
//!   packet, so the rebuilt record equals the one that was dropped. A SYN
//!   scan's streams never need more.
//! - [`Retired`]: a stream retired from the table (closed and quiet, idle, or
//!   evicted) keeps its summary facts and the tombstone `stream_ids.rs` needs
//!   (endpoints and Wireshark's `base_seq`s), so a late packet gets the same
//!   `tcp.stream` and continues the summary ([`Facts::merged`]).

use super::stream::Stream;
use super::{process_segment, FlowConfig, PacketMeta, SegIn};
use crate::endpoint::ZeekState;
use crate::sightings::SightKey;
use crate::summary::{conn_state, ms, SummaryAcc};
use crate::{FlowEvent, FlowSummary, RetransmissionCounts, StallEnd, StallEvent};
use pcapsleuth_core::{Direction, Endpoint, FrameNo, InterfaceId, SeqNum, StreamId, Timestamp};
use pcapsleuth_decode::{IpHeader, IpVersion, TcpFlags, TcpOptions, TcpSegment};
use std::net::IpAddr;

const HAS_IP_ID: u16 = 1;
const HAS_SLL_IF: u16 = 1 << 1;
const HAS_SLL_PT: u16 = 1 << 2;
const HAS_MSS: u16 = 1 << 3;
const HAS_WSCALE: u16 = 1 << 4;
const HAS_TS: u16 = 1 << 5;
const SACK_PERM: u16 = 1 << 6;
const MALFORMED: u16 = 1 << 7;
const DF: u16 = 1 << 8;
const S2C: u16 = 1 << 9;
const REUSED: u16 = 1 << 10;
/// Retired from the table (no longer live).
const RETIRED: u16 = 1 << 11;
/// Closed by a newer stream on the same ports (`new_stream`).
const REPLACED: u16 = 1 << 12;
/// No packet: created by an ICMP error's quote.
const EMPTY: u16 = 1 << 13;

/// How a [`FirstPkt`] holds the stream's two ends.
pub(super) trait Ends: Copy + std::fmt::Debug {
    /// `client`, `server` in this form, if they fit.
    fn pack(client: Endpoint, server: Endpoint) -> Option<Self>;
    /// (client, server).
    fn unpack(&self) -> (Endpoint, Endpoint);
}

/// Both ends IPv4: addresses and ports inline, 12 bytes (against 40 for two
/// [`Endpoint`]s), which is what keeps a SYN scan's record at 72 bytes.
#[derive(Debug, Clone, Copy)]
pub(super) struct V4Ends {
    client: [u8; 4],
    server: [u8; 4],
    client_port: u16,
    server_port: u16,
}

impl Ends for V4Ends {
    fn pack(client: Endpoint, server: Endpoint) -> Option<Self> {
        match (client.addr, server.addr) {
            (IpAddr::V4(c), IpAddr::V4(s)) => Some(V4Ends {
                client: c.octets(),
                server: s.octets(),
                client_port: client.port,
                server_port: server.port,
            }),
            _ => None,
        }
    }
    fn unpack(&self) -> (Endpoint, Endpoint) {
        let ep = |a: [u8; 4], port| Endpoint {
            addr: IpAddr::V4(a.into()),
            port,
        };
        (
            ep(self.client, self.client_port),
            ep(self.server, self.server_port),
        )
    }
}

/// Any ends (IPv6, or mixed): the two [`Endpoint`]s.
#[derive(Debug, Clone, Copy)]
pub(super) struct AnyEnds(Endpoint, Endpoint);

impl Ends for AnyEnds {
    fn pack(client: Endpoint, server: Endpoint) -> Option<Self> {
        Some(AnyEnds(client, server))
    }
    fn unpack(&self) -> (Endpoint, Endpoint) {
        (self.0, self.1)
    }
}

/// A stream that saw at most one packet (see the module documentation), in
/// its own heap record: 72 bytes with IPv4 ends (an 80-byte glibc chunk with
/// its 8-byte header), 104 bytes otherwise (a 112-byte chunk).
#[derive(Debug, Clone)]
pub(super) enum First {
    /// Both ends IPv4.
    V4(Box<FirstPkt<V4Ends>>),
    /// Any other ends.
    Any(Box<FirstPkt<AnyEnds>>),
}

/// Calls `$body` with `$f` bound to the record, whatever its ends.
macro_rules! with_rec {
    ($first:expr, $f:ident => $body:expr) => {
        match $first {
            First::V4($f) => $body,
            First::Any($f) => $body,
        }
    };
}

impl First {
    /// The record of `st` if it saw exactly the one packet `s` that created
    /// it and that packet fits ([`FirstPkt::of_packet`]).
    pub(super) fn of_packet(st: &Stream, s: &SegIn<'_>) -> Option<First> {
        match FirstPkt::of_packet(st, s) {
            Some(r) => Some(First::V4(Box::new(r))),
            None => FirstPkt::of_packet(st, s).map(|r| First::Any(Box::new(r))),
        }
    }

    /// The record of a stream an ICMP error's quote just created
    /// ([`FirstPkt::of_quote`]).
    pub(super) fn of_quote(st: &Stream, meta: &PacketMeta) -> Option<First> {
        match FirstPkt::of_quote(st, meta) {
            Some(r) => Some(First::V4(Box::new(r))),
            None => FirstPkt::of_quote(st, meta).map(|r| First::Any(Box::new(r))),
        }
    }

    /// (client, server).
    pub(super) fn ends(&self) -> (Endpoint, Endpoint) {
        with_rec!(self, f => f.ends.unpack())
    }

    /// Bytes of the heap record (without the allocator's header).
    pub(super) fn record_bytes(&self) -> usize {
        match self {
            First::V4(_) => std::mem::size_of::<FirstPkt<V4Ends>>(),
            First::Any(_) => std::mem::size_of::<FirstPkt<AnyEnds>>(),
        }
    }

    /// Retired from the table.
    pub(super) fn retired(&self) -> bool {
        with_rec!(self, f => f.has(RETIRED))
    }

    /// Mark retired.
    pub(super) fn retire(&mut self) {
        with_rec!(self, f => f.bits |= RETIRED)
    }

    /// Closed by a newer stream on the same ports.
    pub(super) fn replaced(&self) -> bool {
        with_rec!(self, f => f.has(REPLACED))
    }

    /// Mark closed by a newer stream on the same ports.
    pub(super) fn replace(&mut self) {
        with_rec!(self, f => f.bits |= REPLACED)
    }

    /// Frame and time of the packet (or of the ICMP error that created it).
    pub(super) fn last(&self) -> (FrameNo, Timestamp) {
        with_rec!(self, f => (FrameNo(u64::from(f.frame)), f.ts))
    }

    /// Wireshark's `base_seq` per direction after the packet.
    pub(super) fn ws_base(&self) -> [Option<SeqNum>; 2] {
        with_rec!(self, f => f.ws_base())
    }
}

/// A stream that saw at most one packet, as that packet's raw fields
/// (`E`: how the ends are held; see [`First`] for the sizes).
#[derive(Debug, Clone)]
pub(super) struct FirstPkt<E> {
    ends: E,
    ts: Timestamp,
    /// `frame.number` (a frame above 2^32 keeps the full record).
    frame: u32,
    seq: u32,
    ack: u32,
    tsval: u32,
    tsecr: u32,
    sll_ifindex: u32,
    total_len: u16,
    payload_len: u16,
    ip_id: u16,
    interface: u16,
    flags: u16,
    window: u16,
    ip_header_len: u16,
    mss: u16,
    vlans: [u16; 2],
    bits: u16,
    wscale: u8,
    ttl: u8,
    tcp_header_len: u8,
    vlan_count: u8,
    sll_pkttype: u8,
}

impl<E: Ends> FirstPkt<E> {
    /// The record of `st` if it saw exactly the one packet `s` that created
    /// it and that packet fits the record (no captured payload, no SACK
    /// blocks, not a fragment, ends that fit `E`).
    fn of_packet(st: &Stream, s: &SegIn<'_>) -> Option<FirstPkt<E>> {
        if st.acc.packets[0] + st.acc.packets[1] != 1 {
            return None;
        }
        let (ip, seg, meta) = (s.ip, s.seg, s.meta);
        let fits = st.revived.is_none()
            && st.acc.first_frame == meta.frame
            && seg.payload.is_empty()
            && seg.options.sack.len == 0
            && ip.fragment.is_none()
            && ip.protocol == pcapsleuth_core::ip_protocol::TCP
            && matches!(
                (ip.version, ip.src, ip.dst),
                (IpVersion::V4, IpAddr::V4(_), IpAddr::V4(_))
                    | (IpVersion::V6, IpAddr::V6(_), IpAddr::V6(_))
            );
        let ends = E::pack(st.client, st.server)?;
        let tcp_header_len = u8::try_from(seg.header_len).ok()?;
        let ip_header_len = u16::try_from(ip.header_len).ok()?;
        // Narrow fields keep the record small; a packet whose values do not
        // fit stays a full record.
        let frame = u32::try_from(meta.frame.get()).ok()?;
        let total_len = u16::try_from(ip.total_len).ok()?;
        let payload_len = u16::try_from(seg.payload_len).ok()?;
        let ip_id = u16::try_from(ip.ip_id.unwrap_or(0)).ok()?;
        let interface = u16::try_from(meta.interface.0).ok()?;
        if !fits {
            return None;
        }
        let o = &seg.options;
        let bit = |c: bool, b: u16| if c { b } else { 0 };
        let bits = bit(ip.ip_id.is_some(), HAS_IP_ID)
            | bit(s.sight.sll_ifindex.is_some(), HAS_SLL_IF)
            | bit(s.sight.sll_pkttype.is_some(), HAS_SLL_PT)
            | bit(o.mss.is_some(), HAS_MSS)
            | bit(o.window_scale.is_some(), HAS_WSCALE)
            | bit(o.timestamps.is_some(), HAS_TS)
            | bit(o.sack_permitted, SACK_PERM)
            | bit(o.malformed, MALFORMED)
            | bit(ip.dont_fragment, DF)
            | bit(s.dir == Direction::ServerToClient, S2C)
            | bit(s.reused, REUSED);
        let (tsval, tsecr) = o.timestamps.unwrap_or((0, 0));
        Some(FirstPkt {
            ends,
            frame,
            ts: meta.ts,
            seq: seg.seq.0,
            ack: seg.ack.0,
            total_len,
            payload_len,
            ip_id,
            interface,
            sll_ifindex: s.sight.sll_ifindex.unwrap_or(0),
            tsval,
            tsecr,
            flags: seg.flags.0,
            window: seg.window,
            ip_header_len,
            mss: o.mss.unwrap_or(0),
            vlans: s.sight.vlans,
            wscale: o.window_scale.unwrap_or(0),
            ttl: ip.ttl,
            tcp_header_len,
            vlan_count: s.sight.vlan_count,
            sll_pkttype: s.sight.sll_pkttype.unwrap_or(0),
            bits,
        })
    }

    /// The record of a stream an ICMP error's quote just created (frame and
    /// time of the ICMP packet), if `st` is still exactly that.
    fn of_quote(st: &Stream, meta: &PacketMeta) -> Option<FirstPkt<E>> {
        let fits = st.revived.is_none()
            && st.acc.packets == [0, 0]
            && st.acc.first_frame == meta.frame
            && st.last_ts.is_none()
            && st.ws_base == [None, None];
        if !fits {
            return None;
        }
        Some(FirstPkt {
            ends: E::pack(st.client, st.server)?,
            frame: u32::try_from(meta.frame.get()).ok()?,
            ts: meta.ts,
            seq: 0,
            ack: 0,
            total_len: 0,
            payload_len: 0,
            ip_id: 0,
            interface: u16::try_from(meta.interface.0).ok()?,
            sll_ifindex: 0,
            tsval: 0,
            tsecr: 0,
            flags: 0,
            window: 0,
            ip_header_len: 0,
            mss: 0,
            vlans: [0; 2],
            wscale: 0,
            ttl: 0,
            tcp_header_len: 0,
            vlan_count: 0,
            sll_pkttype: 0,
            bits: EMPTY,
        })
    }

    fn has(&self, b: u16) -> bool {
        self.bits & b != 0
    }

    fn dir(&self) -> Direction {
        if self.has(S2C) {
            Direction::ServerToClient
        } else {
            Direction::ClientToServer
        }
    }

    /// Wireshark's `base_seq` per direction after the packet, as
    /// `stream_ids::note_bases` sets it (never a fragment here).
    fn ws_base(&self) -> [Option<SeqNum>; 2] {
        let mut b = [None; 2];
        if self.has(EMPTY) || self.ip_header_len > self.total_len {
            return b;
        }
        if self.total_len - self.ip_header_len < u16::from(self.tcp_header_len) {
            return b;
        }
        let f = TcpFlags(self.flags);
        let d = self.dir();
        b[d.index()] = Some(if f.syn() {
            SeqNum(self.seq)
        } else {
            SeqNum(self.seq).sub(1)
        });
        if f.ack() {
            b[d.reverse().index()] = Some(SeqNum(self.ack).sub(1));
        }
        b
    }

    fn opt<T>(&self, b: u16, v: T) -> Option<T> {
        self.has(b).then_some(v)
    }
}

/// Rebuild stream `id` from its record by running the packet through the
/// same steps as [`super::FlowTable::on_packet`] (events go to `scratch`,
/// which is cleared). A record of a replaced stream comes back closed.
/// The record is made from `spare` when there is one ([`Stream::boxed`]).
pub(super) fn replay(
    rec: &First,
    id: StreamId,
    cfg: &FlowConfig,
    scratch: &mut Vec<FlowEvent>,
    spare: &mut Option<Box<Stream>>,
) -> Box<Stream> {
    with_rec!(rec, f => replay_rec(f, id, cfg, scratch, spare))
}

fn replay_rec<E: Ends>(
    rec: &FirstPkt<E>,
    id: StreamId,
    cfg: &FlowConfig,
    scratch: &mut Vec<FlowEvent>,
    spare: &mut Option<Box<Stream>>,
) -> Box<Stream> {
    let meta = PacketMeta {
        frame: FrameNo(u64::from(rec.frame)),
        ts: rec.ts,
        interface: InterfaceId(u32::from(rec.interface)),
    };
    let (client, server) = rec.ends.unpack();
    let mut st = Stream::boxed(id, client, server, &meta, spare);
    if !rec.has(EMPTY) {
        let dir = rec.dir();
        let (src, dst) = match dir {
            Direction::ClientToServer => (client, server),
            Direction::ServerToClient => (server, client),
        };
        let ip = IpHeader {
            version: if src.addr.is_ipv4() {
                IpVersion::V4
            } else {
                IpVersion::V6
            },
            src: src.addr,
            dst: dst.addr,
            ttl: rec.ttl,
            ip_id: rec.opt(HAS_IP_ID, u32::from(rec.ip_id)),
            total_len: u32::from(rec.total_len),
            header_len: u32::from(rec.ip_header_len),
            protocol: pcapsleuth_core::ip_protocol::TCP,
            dont_fragment: rec.has(DF),
            fragment: None,
        };
        let seg = TcpSegment {
            src_port: src.port,
            dst_port: dst.port,
            seq: SeqNum(rec.seq),
            ack: SeqNum(rec.ack),
            flags: TcpFlags(rec.flags),
            window: rec.window,
            urgent: 0,
            header_len: u32::from(rec.tcp_header_len),
            payload_len: u32::from(rec.payload_len),
            payload: &[],
            options: TcpOptions {
                mss: rec.opt(HAS_MSS, rec.mss),
                window_scale: rec.opt(HAS_WSCALE, rec.wscale),
                sack_permitted: rec.has(SACK_PERM),
                timestamps: rec.opt(HAS_TS, (rec.tsval, rec.tsecr)),
                malformed: rec.has(MALFORMED),
                ..TcpOptions::default()
            },
        };
        let sight = SightKey {
            interface: InterfaceId(u32::from(rec.interface)),
            vlans: rec.vlans,
            vlan_count: rec.vlan_count,
            sll_ifindex: rec.opt(HAS_SLL_IF, rec.sll_ifindex),
            sll_pkttype: rec.opt(HAS_SLL_PT, rec.sll_pkttype),
        };
        let s = SegIn {
            meta: &meta,
            sight,
            dir,
            ip: &ip,
            seg: &seg,
            reused: rec.has(REUSED),
        };
        super::stream_ids::note_bases(&mut st, dir, &ip, &seg);
        process_segment(&mut st, cfg, &s, scratch);
    }
    if rec.has(REPLACED) {
        st.close();
        st.analyzer.compact();
    }
    scratch.clear();
    st
}

/// What one side contributes to the summary row.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct SideFacts {
    pub(super) zeek: ZeekState,
    pub(super) syn_sent: bool,
    pub(super) isn_seen: bool,
    pub(super) sent_non_syn: bool,
    pub(super) mss: Option<u16>,
    pub(super) wscale_offered: Option<u8>,
    pub(super) unacked_capped: bool,
}

/// Everything a summary row is made of (an open zero-window episode already
/// counted up to the last packet).
#[derive(Debug, Clone, Default)]
pub(super) struct Facts {
    pub(super) acc: SummaryAcc,
    pub(super) sides: [SideFacts; 2],
}

fn add_retrans(a: &mut RetransmissionCounts, b: &RetransmissionCounts) {
    a.total += b.total;
    a.rto += b.rto;
    a.fast += b.fast;
    a.spurious += b.spurious;
}

impl Facts {
    /// These facts (of a retired stream) continued by `new` (of the same
    /// `tcp.stream`, revived by a late packet): counters added, first frame
    /// and handshake kept, last frame and connection state taken from the
    /// newer part; `max_sightings` caps the joined sightings list.
    pub(super) fn merged(&self, new: Facts, max_sightings: usize) -> Facts {
        let (o, n) = (&self.acc, new.acc);
        let mut acc = o.clone();
        for d in 0..2 {
            acc.packets[d] += n.packets[d];
            acc.payload[d] += n.payload[d];
        }
        acc.bytes += n.bytes;
        acc.last_frame = n.last_frame;
        acc.last_ts = acc.last_ts.max(n.last_ts);
        add_retrans(&mut acc.retrans, &n.retrans);
        acc.duplicate_sightings += n.duplicate_sightings;
        for s in n.sightings {
            if acc.sightings.len() >= max_sightings {
                acc.sightings_capped = true;
                break;
            }
            acc.sightings.push(s);
        }
        acc.sightings_capped |= n.sightings_capped;
        acc.zero_window_ns = acc.zero_window_ns.saturating_add(n.zero_window_ns);
        acc.zero_window_episodes += n.zero_window_episodes;
        acc.handshake_rtt_ns = o.handshake_rtt_ns.or(n.handshake_rtt_ns);
        acc.rtt.merge(&n.rtt);
        if n.longest_stall_ns > acc.longest_stall_ns {
            acc.longest_stall_ns = n.longest_stall_ns;
            acc.longest_stall_frames = n.longest_stall_frames;
        }
        let side = |a: &SideFacts, b: &SideFacts| SideFacts {
            zeek: b.zeek,
            syn_sent: a.syn_sent || b.syn_sent,
            isn_seen: a.isn_seen || b.isn_seen,
            sent_non_syn: a.sent_non_syn || b.sent_non_syn,
            mss: b.mss.or(a.mss),
            wscale_offered: if b.syn_sent {
                b.wscale_offered
            } else {
                a.wscale_offered
            },
            unacked_capped: a.unacked_capped || b.unacked_capped,
        };
        Facts {
            acc,
            sides: [
                side(&self.sides[0], &new.sides[0]),
                side(&self.sides[1], &new.sides[1]),
            ],
        }
    }

    /// The `pcapsleuth flows` row.
    pub(super) fn summary(self, id: StreamId, client: Endpoint, server: Endpoint) -> FlowSummary {
        let acc = self.acc;
        let [c, s] = self.sides;
        let rstos0 = c.syn_sent && c.isn_seen && !c.sent_non_syn;
        let sizes_zero = acc.payload[0] == 0 && acc.payload[1] == 0;
        FlowSummary {
            tcp_stream: id,
            client: client.addr,
            client_port: client.port,
            server: server.addr,
            server_port: server.port,
            packets: acc.packets[0] + acc.packets[1],
            bytes: acc.bytes,
            packets_c2s: acc.packets[0],
            packets_s2c: acc.packets[1],
            payload_bytes_c2s: acc.payload[0],
            payload_bytes_s2c: acc.payload[1],
            first_frame: acc.first_frame,
            last_frame: acc.last_frame,
            duration_ms: ms(acc.last_ts.0.saturating_sub(acc.first_ts.0)),
            state: conn_state(c.zeek, s.zeek, rstos0, sizes_zero),
            retransmissions: acc.retrans,
            duplicate_sightings: acc.duplicate_sightings,
            sightings: acc.sightings,
            sightings_capped: acc.sightings_capped,
            zero_window_ms: ms(acc.zero_window_ns),
            zero_window_episodes: acc.zero_window_episodes,
            handshake_rtt_ms: acc.handshake_rtt_ns.map(ms),
            rtt_ms: acc.rtt.stats(),
            longest_stall_ms: ms(acc.longest_stall_ns),
            longest_stall_frames: acc.longest_stall_frames,
            mss: [c.mss, s.mss],
            window_scale: [c.wscale_offered, s.wscale_offered],
            unacked_capped: c.unacked_capped || s.unacked_capped,
        }
    }
}

/// A retired `tcp.stream` (see the module documentation).
#[derive(Debug, Clone)]
pub(super) struct Retired {
    pub(super) client: Endpoint,
    pub(super) server: Endpoint,
    /// Wireshark's `base_seq` per direction (`stream_ids.rs`).
    pub(super) ws_base: [Option<SeqNum>; 2],
    pub(super) facts: Facts,
    /// The stream's last frame and latest timestamp.
    pub(super) last_frame: FrameNo,
    pub(super) last_ts: Timestamp,
    /// What each direction had pending when it was retired open (payload
    /// bytes, SYN pending; `stalls::pending`): the silence lasts until the
    /// capture end, which closes a stall on it as on a live stream
    /// (`stalls::finish_stream`).
    pub(super) pending: [Option<(u64, bool)>; 2],
}

impl Retired {
    /// Whether either side's unacknowledged-segment list hit its cap.
    pub(super) fn unacked_capped(&self) -> bool {
        self.facts.sides.iter().any(|x| x.unacked_capped)
    }

    /// The stalls the capture end at `end` (frame, time) closes on this
    /// retired stream: one per direction that had something pending, when
    /// the silence since its last packet reached the stall threshold.
    pub(super) fn end_stalls(
        &self,
        id: StreamId,
        (end_frame, end_ts): (FrameNo, Timestamp),
        stall_threshold_ns: i64,
    ) -> impl Iterator<Item = StallEvent> + '_ {
        let due = end_ts.0.saturating_sub(self.last_ts.0) >= stall_threshold_ns;
        [Direction::ClientToServer, Direction::ServerToClient]
            .into_iter()
            .filter(move |_| due)
            .filter_map(move |dir| {
                self.pending[dir.index()].map(|(pending_bytes, pending_syn)| StallEvent {
                    stream: id,
                    dir,
                    start_frame: self.last_frame,
                    start_ts: self.last_ts,
                    end_frame,
                    end_ts,
                    pending_bytes,
                    pending_syn,
                    ended_by: StallEnd::CaptureEnd,
                })
            })
    }

    /// The summary row; once the capture ended at `end` (frame, time), with
    /// the stalls the capture end closed ([`Retired::end_stalls`]).
    pub(super) fn summary(
        &self,
        id: StreamId,
        end: Option<(FrameNo, Timestamp)>,
        stall_threshold_ns: i64,
    ) -> FlowSummary {
        let mut f = self.facts.clone();
        if let Some(end) = end {
            for s in self.end_stalls(id, end, stall_threshold_ns) {
                let dur = s.end_ts.0.saturating_sub(s.start_ts.0);
                if dur > f.acc.longest_stall_ns {
                    f.acc.longest_stall_ns = dur;
                    f.acc.longest_stall_frames = Some([s.start_frame, s.end_frame]);
                }
            }
        }
        f.summary(id, self.client, self.server)
    }

    /// Heap bytes owned (sightings list by capacity).
    pub(super) fn heap_bytes(&self) -> usize {
        self.facts.acc.sightings.capacity() * std::mem::size_of::<crate::Sighting>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The compact forms must not grow silently (see the memory model in
    /// `lib.rs`): a one-packet stream is the table's per-flow floor.
    #[test]
    fn compact_records_stay_small() {
        // 72 and 104 bytes: glibc chunks of 80 and 112 bytes.
        assert_eq!(std::mem::size_of::<FirstPkt<V4Ends>>(), 72);
        assert_eq!(std::mem::size_of::<FirstPkt<AnyEnds>>(), 104);
        assert_eq!(std::mem::size_of::<First>(), 16);
        let r = std::mem::size_of::<Retired>();
        assert!(r <= 400, "Retired is {r} bytes");
    }
}
