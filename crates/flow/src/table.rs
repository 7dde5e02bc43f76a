//! The flow table: Wireshark-exact `tcp.stream` ids, per-endpoint state,
//! stalls, window changes, ICMP-error matching and per-flow summaries.
//!
//! # `tcp.stream` assignment (Wireshark 4.0.17, `dissect_tcp` in `epan/dissectors/packet-tcp.c`)
//! - A stream id is taken (`tcp_stream_count++` in `init_tcp_conversation_data`)
//!   the first time the TCP dissector meets a conversation: ids are dense,
//!   0-based, in first-seen order.
//! - The conversation is looked up by the unordered address/port pair
//!   (`find_conversation`, exact match); the most recently created one wins.
//! - A bare SYN (SYN without ACK) whose sequence number differs from the
//!   sender's `base_seq` — when that base is set — creates a new conversation
//!   (`conversation_new`, `TCP_A_REUSED_PORTS`). FIN or RST alone never does.
//!   A SYN/ACK with a different sequence only moves the sender's `base_seq`.
//! - `base_seq` is set only for segments that are neither an un-reassembled IP
//!   fragment nor inside an ICMP error (`!pinfo->fragmented && !in_error_pkt`)
//!   and whose reported length covers the TCP header: to the SYN's seq, else
//!   seq − 1; the peer's base to ACK − 1 from the first segment with ACK set.
//! - A TCP header quoted inside an ICMP/ICMPv6 error is dissected too (with
//!   `in_error_pkt`): it finds or creates a conversation and may start a new
//!   one by the bare-SYN rule, but sets no base. `dissect_tcp` reads the header
//!   up to the window field (offset 14..16) before the conversation lookup, so
//!   a quote of fewer than 16 TCP bytes throws and takes no part; a quoted
//!   non-first IP fragment is not handed to TCP at all.

use crate::analysis::{SegmentInput, StreamAnalyzer};
use crate::endpoint::{window_shifts, Side, TxSeg};
use crate::sightings::{DupSig, SightKey, SightingTable, SweepQueue};
use crate::summary::{conn_state, ms, zeek_transition, SummaryAcc};
use crate::{
    FlowEvent, FlowStarted, FlowSummary, IcmpErrorEvent, QuotedSegmentMatch, SegmentEvent,
    Sighting, StallEnd, StallEvent, WindowChangeEvent,
};
use pcapsleuth_core::{
    Direction, Endpoint, FlowKey, FrameNo, InterfaceId, SeqNum, StreamId, Timestamp,
};
use pcapsleuth_decode::{
    Decoded, IcmpMessage, IpHeader, QuotedPacket, TcpFlags, TcpSegment, Transport,
};
use std::collections::HashMap;

/// Where and when a packet was captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketMeta {
    /// Wireshark frame number.
    pub frame: FrameNo,
    /// Timestamp, ns since the Unix epoch.
    pub ts: Timestamp,
    /// Capture interface.
    pub interface: InterfaceId,
}

/// What the flow table decided about one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacketFlowInfo {
    /// `tcp.stream` of the packet (for ICMP errors: of the quoted TCP flow, as Wireshark shows it).
    pub stream: Option<StreamId>,
    /// Direction within that stream.
    pub dir: Option<Direction>,
}

/// Limits and thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowConfig {
    /// Most unacknowledged segments remembered per endpoint.
    pub max_unacked_segments: usize,
    /// Most duplicate sightings listed per flow.
    pub max_sightings: usize,
    /// Shortest silence reported as a stall, ns.
    pub stall_threshold_ns: i64,
    /// Window within which two identical packets are one packet seen twice, ns.
    pub duplicate_window_ns: i64,
}

impl Default for FlowConfig {
    fn default() -> Self {
        FlowConfig {
            max_unacked_segments: 4096,
            max_sightings: 1024,
            stall_threshold_ns: 150_000_000,
            duplicate_window_ns: 10_000_000,
        }
    }
}

/// Fewest quoted TCP header bytes for which Wireshark's `dissect_tcp` reaches
/// the conversation lookup (it reads the window field at offset 14..16 first).
const WS_MIN_QUOTED_TCP: u32 = 16;

/// One `tcp.stream`.
#[derive(Debug)]
struct Stream {
    id: StreamId,
    client: Endpoint,
    server: Endpoint,
    /// Wireshark's `base_seq` per direction (stream-id decisions only).
    ws_base: [Option<SeqNum>; 2],
    sides: [Side; 2],
    /// Window-scale option of the first SYN / SYN-ACK seen (`Some(None)` = seen without option).
    syn_wscale: Option<Option<u8>>,
    synack_wscale: Option<Option<u8>>,
    shifts: [Option<u8>; 2],
    /// The bare SYN came from the server side (or the SYN/ACK from the client side).
    roles_swapped: bool,
    analyzer: StreamAnalyzer,
    acc: SummaryAcc,
    /// Latest timestamp of a segment of this stream (either direction).
    last_ts: Option<Timestamp>,
    last_frame: FrameNo,
    /// First sightings for duplicate detection (`sightings.rs`).
    dups: SightingTable,
    /// RST seen, both FINs acked, or replaced by a newer stream: no stalls, buffers freed.
    closed: bool,
}

impl Stream {
    fn new(id: StreamId, client: Endpoint, server: Endpoint, meta: &PacketMeta) -> Stream {
        Stream {
            id,
            client,
            server,
            ws_base: [None; 2],
            sides: [Side::default(), Side::default()],
            syn_wscale: None,
            synack_wscale: None,
            shifts: [None; 2],
            roles_swapped: false,
            analyzer: StreamAnalyzer::new(),
            acc: SummaryAcc {
                first_frame: meta.frame,
                last_frame: meta.frame,
                first_ts: meta.ts,
                last_ts: meta.ts,
                ..SummaryAcc::default()
            },
            last_ts: None,
            last_frame: meta.frame,
            dups: SightingTable::default(),
            closed: false,
        }
    }

    fn dir_of(&self, src: Endpoint) -> Direction {
        if src == self.client {
            Direction::ClientToServer
        } else {
            Direction::ServerToClient
        }
    }

    /// Heap bytes owned by this stream (by capacity), not counting `size_of::<Stream>()`.
    fn heap_bytes(&self) -> usize {
        self.sides.iter().map(Side::heap_bytes).sum::<usize>()
            + self.analyzer.heap_bytes()
            + self.dups.heap_bytes()
            + self.acc.sightings.capacity() * std::mem::size_of::<Sighting>()
    }

    fn close(&mut self) {
        self.closed = true;
        for s in self.sides.iter_mut() {
            s.free_buffers();
        }
        // Keep the newest sightings (the closing FIN/ACK or RST is often seen again on
        // another interface) and, on multi-interface streams, those whose copies may
        // still follow in file order; free the rest.
        self.dups.close();
    }
}

/// All TCP flows of one capture.
#[derive(Debug, Default)]
pub struct FlowTable {
    config: FlowConfig,
    /// Latest stream (index into `streams`) per unordered address/port pair.
    convs: HashMap<FlowKey, usize>,
    /// The last `convs` lookup, `(key, stream index)`: consecutive packets
    /// mostly belong to one conversation, so this skips the SipHash lookup.
    /// Always equal to `convs[key]` (`new_stream` refreshes it).
    last_conv: Option<(FlowKey, usize)>,
    /// Boxed so the `Vec`'s growth slack (up to half its capacity) costs a
    /// pointer per slot, not a 1 360-byte record.
    #[allow(clippy::vec_box)]
    streams: Vec<Box<Stream>>,
    last_frame: FrameNo,
    last_ts: Option<Timestamp>,
    finished: bool,
    /// Finished streams whose sighting tables still hold pending entries.
    sweep: SweepQueue,
}

fn both_mut(sides: &mut [Side; 2], d: Direction) -> (&mut Side, &mut Side) {
    let [c, s] = sides;
    match d {
        Direction::ClientToServer => (c, s),
        Direction::ServerToClient => (s, c),
    }
}

fn payload_hash(p: &[u8]) -> u64 {
    // FNV-1a over at most the first 32 captured payload bytes.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in p.iter().take(32) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Whether this datagram is the first fragment of a datagram that was not
/// reassembled (Wireshark then dissects TCP with `pinfo->fragmented` set).
fn unreassembled_fragment(ip: &IpHeader, seg: &TcpSegment<'_>) -> bool {
    match ip.fragment {
        Some(f) if f.offset == 0 && f.more => {
            let own = ip.total_len.saturating_sub(ip.header_len);
            seg.header_len.saturating_add(seg.payload_len) <= own
        }
        _ => false,
    }
}

impl FlowTable {
    /// An empty table.
    pub fn new(config: FlowConfig) -> Self {
        FlowTable {
            config,
            ..FlowTable::default()
        }
    }

    /// Process one packet (in frame order); append resulting events to `out`.
    ///
    /// Handles TCP segments (innermost header of tunnelled packets) and
    /// ICMP/ICMPv6 errors quoting TCP; everything else returns an empty
    /// [`PacketFlowInfo`]. Never panics.
    pub fn on_packet(
        &mut self,
        meta: &PacketMeta,
        pkt: &Decoded<'_>,
        out: &mut Vec<FlowEvent>,
    ) -> PacketFlowInfo {
        self.last_frame = meta.frame;
        if self.last_ts.is_none_or(|t| meta.ts > t) {
            self.last_ts = Some(meta.ts);
        }
        while let Some(i) = self.sweep.pop_due(self.last_ts.unwrap_or(meta.ts)) {
            if let Some(s) = self.streams.get_mut(i) {
                s.dups.sweep();
            }
        }
        let Some(ip) = pkt.ip else {
            return PacketFlowInfo::default();
        };
        match &pkt.transport {
            Transport::Tcp(seg) => {
                let key = SightKey {
                    interface: meta.interface,
                    vlans: pkt.link.vlans,
                    vlan_count: pkt.link.vlan_count,
                    sll_ifindex: pkt.link.sll_ifindex,
                    sll_pkttype: pkt.link.sll_pkttype,
                };
                self.on_tcp(meta, key, &ip, seg, out)
            }
            Transport::Icmp(m) => match m.quoted {
                Some(q) => self.on_icmp(meta, &ip, m, &q, out),
                None => PacketFlowInfo::default(),
            },
            _ => PacketFlowInfo::default(),
        }
    }

    fn new_stream(
        &mut self,
        key: FlowKey,
        client: Endpoint,
        server: Endpoint,
        meta: &PacketMeta,
        out: &mut Vec<FlowEvent>,
    ) -> usize {
        if let Some(&old) = self.convs.get(&key) {
            if let Some(s) = self.streams.get_mut(old) {
                s.close();
                s.analyzer.compact();
                if let Some(n) = s.dups.take_sweep_wanted() {
                    self.sweep.push(old, meta.ts, n);
                }
            }
        }
        let idx = self.streams.len();
        let id = idx as StreamId;
        self.streams
            .push(Box::new(Stream::new(id, client, server, meta)));
        self.convs.insert(key, idx);
        self.last_conv = Some((key, idx));
        out.push(FlowEvent::FlowStarted(FlowStarted {
            stream: id,
            client,
            server,
            frame: meta.frame,
            ts: meta.ts,
        }));
        idx
    }

    /// Find or create the conversation of a (possibly quoted) TCP header and
    /// apply Wireshark's SYN rules. Returns the stream index, the direction and
    /// whether a bare SYN with a new ISN opened a new stream on reused ports.
    #[allow(clippy::too_many_arguments)]
    fn lookup(
        &mut self,
        src: Endpoint,
        dst: Endpoint,
        flags: TcpFlags,
        seq: SeqNum,
        meta: &PacketMeta,
        out: &mut Vec<FlowEvent>,
    ) -> (usize, Direction, bool) {
        let key = FlowKey::new(src, dst);
        // A stream created by a SYN/ACK has the SYN/ACK's receiver as client.
        let (c, s) = if flags.syn() && flags.ack() {
            (dst, src)
        } else {
            (src, dst)
        };
        let known = match self.last_conv {
            Some((k, i)) if k == key => Some(i),
            _ => self.convs.get(&key).copied(),
        };
        let mut idx = match known {
            Some(i) => {
                self.last_conv = Some((key, i));
                i
            }
            None => self.new_stream(key, c, s, meta, out),
        };
        let mut dir = self.streams[idx].dir_of(src);
        let mut reused = false;
        if flags.syn() && !flags.ack() {
            if let Some(b) = self.streams[idx].ws_base[dir.index()] {
                if b != seq {
                    idx = self.new_stream(key, c, s, meta, out);
                    dir = self.streams[idx].dir_of(src);
                    reused = true;
                }
            }
        } else if flags.syn() {
            let st = &mut self.streams[idx];
            if let Some(b) = st.ws_base[dir.index()] {
                if b != seq {
                    // Wireshark moves base_seq (issue 16944); so do our relative numbers.
                    st.ws_base[dir.index()] = Some(seq);
                    st.sides[dir.index()].set_base(seq, 0);
                }
            }
        }
        (idx, dir, reused)
    }

    fn on_tcp(
        &mut self,
        meta: &PacketMeta,
        sight: SightKey,
        ip: &IpHeader,
        seg: &TcpSegment<'_>,
        out: &mut Vec<FlowEvent>,
    ) -> PacketFlowInfo {
        let src = Endpoint {
            addr: ip.src,
            port: seg.src_port,
        };
        let dst = Endpoint {
            addr: ip.dst,
            port: seg.dst_port,
        };
        let flags = seg.flags;
        let (idx, dir, new_stream_on_syn) = self.lookup(src, dst, flags, seg.seq, meta, out);
        let cfg = self.config;
        let st = &mut self.streams[idx];
        let d = dir.index();
        let r = dir.reverse().index();

        // Wireshark base_seq (stream-id rules).
        let fragmented = unreassembled_fragment(ip, seg);
        let reported_ok = ip.total_len.saturating_sub(ip.header_len) >= seg.header_len;
        if !fragmented && reported_ok {
            if st.ws_base[d].is_none() {
                st.ws_base[d] = Some(if flags.syn() { seg.seq } else { seg.seq.sub(1) });
            }
            if flags.ack() && st.ws_base[r].is_none() {
                st.ws_base[r] = Some(seg.ack.sub(1));
            }
        }
        // Our relative-sequence bases follow the same rules, fragments included.
        if st.sides[d].base.is_none() {
            if flags.syn() {
                st.sides[d].set_base(seg.seq, 0);
            } else {
                st.sides[d].set_base(seg.seq.sub(1), 1);
            }
        }
        if flags.ack() && st.sides[r].base.is_none() {
            st.sides[r].set_base(seg.ack.sub(1), 1);
        }

        // Duplicate sighting?
        let sig = DupSig {
            dir,
            ip_id: ip.ip_id.unwrap_or(0),
            seq: seg.seq,
            ack: seg.ack,
            flags: flags.0,
            payload_len: seg.payload_len,
            window: seg.window,
            tsopt: seg.options.timestamps,
            sack0: seg.options.sack.as_slice().first().copied(),
            hash: payload_hash(seg.payload),
        };
        // One packet seen twice: same fingerprint within the window, at another place
        // or with the same non-zero IP ID, in either time direction (`sightings.rs`).
        let dup = st
            .dups
            .observe(sig, sight, meta.frame, meta.ts, cfg.duplicate_window_ns);
        let duplicate_of = dup.map(|e| e.frame);

        let (rel_seq, rel_ack) = if dup.is_some() {
            (
                st.sides[d].peek(seg.seq).unwrap_or(0),
                if flags.ack() {
                    st.sides[r].peek(seg.ack)
                } else {
                    None
                },
            )
        } else {
            (
                st.sides[d].rel(seg.seq).unwrap_or(0),
                if flags.ack() {
                    st.sides[r].rel(seg.ack)
                } else {
                    None
                },
            )
        };

        let mut own_rtt = None;
        let mut window_event = None;
        if dup.is_none() {
            // Stalls end with this segment.
            check_stall(st, &cfg, dir, meta, seg, rel_seq, rel_ack, out);
            own_rtt = update_state(
                st,
                &cfg,
                dir,
                meta,
                ip,
                seg,
                rel_seq,
                rel_ack,
                &mut window_event,
            );
        }

        let mut verdict = st.analyzer.on_segment(&SegmentInput {
            frame: meta.frame,
            ts: meta.ts,
            dir,
            seg,
            duplicate_of,
            new_stream_on_syn,
        });
        if st.closed {
            // After the verdict, so the closing ACK still gets its RTT sample.
            st.analyzer.compact();
        }
        // A later sighting copies its first sighting's verdict (kept with the
        // fingerprint: the analyzer's own ring is cut when a stream finishes).
        if let Some(e) = dup {
            verdict.analysis = e.analysis;
            verdict.bytes_in_flight = SightingTable::bytes_in_flight(&e);
        } else {
            st.dups
                .set_verdict(meta.frame, verdict.analysis, verdict.bytes_in_flight);
        }
        if let Some(n) = st.dups.take_sweep_wanted() {
            self.sweep.push(idx, meta.ts, n);
        }

        // Summary counters.
        let acc = &mut st.acc;
        acc.packets[d] += 1;
        acc.bytes += u64::from(ip.total_len);
        acc.last_frame = meta.frame;
        if meta.ts > acc.last_ts {
            acc.last_ts = meta.ts;
        }
        if let Some(first) = dup {
            let a = Sighting {
                frame: first.frame,
                interface: first.key.interface,
                ts_ns: first.ts.0,
            };
            let b = Sighting {
                frame: meta.frame,
                interface: meta.interface,
                ts_ns: meta.ts.0,
            };
            acc.add_sighting(a, b, cfg.max_sightings);
        } else {
            acc.payload[d] += u64::from(seg.payload_len);
            acc.count_retrans(&verdict.analysis);
            if let Some(rtt) = verdict.ack_rtt_ns.or(own_rtt) {
                acc.rtt.add(rtt);
            }
        }
        st.last_frame = meta.frame;
        if st.last_ts.is_none_or(|t| meta.ts > t) {
            st.last_ts = Some(meta.ts);
        }

        let side = &st.sides[d];
        out.push(FlowEvent::Segment(SegmentEvent {
            stream: st.id,
            dir,
            frame: meta.frame,
            ts: meta.ts,
            interface: meta.interface,
            flags,
            seq: seg.seq,
            ack: seg.ack,
            rel_seq,
            rel_ack,
            payload_len: seg.payload_len,
            ip_len: ip.total_len,
            ip_id: ip.ip_id,
            window_raw: seg.window,
            window_bytes: if flags.syn() {
                Some(u64::from(seg.window))
            } else {
                st.shifts[d].map(|sh| u64::from(seg.window) << sh)
            },
            mss: seg.options.mss,
            window_scale: seg.options.window_scale,
            sack_blocks: seg.options.sack.len,
            wireshark: verdict.wireshark,
            analysis: verdict.analysis,
            duplicate_of,
            snd_una: side.snd_una,
            snd_nxt: side.snd_nxt,
            since_first_tx_ns: verdict.since_first_tx_ns,
            ack_rtt_ns: verdict.ack_rtt_ns,
            bytes_in_flight: verdict.bytes_in_flight,
        }));
        if let Some(w) = window_event {
            out.push(FlowEvent::WindowChange(w));
        }
        PacketFlowInfo {
            stream: Some(st.id),
            dir: Some(dir),
        }
    }

    fn on_icmp(
        &mut self,
        meta: &PacketMeta,
        ip: &IpHeader,
        m: &IcmpMessage,
        q: &QuotedPacket,
        out: &mut Vec<FlowEvent>,
    ) -> PacketFlowInfo {
        if q.ip.protocol != 6 {
            return PacketFlowInfo::default();
        }
        let (Some(sp), Some(dp)) = (q.src_port, q.dst_port) else {
            return PacketFlowInfo::default();
        };
        let qsrc = Endpoint {
            addr: q.ip.src,
            port: sp,
        };
        let qdst = Endpoint {
            addr: q.ip.dst,
            port: dp,
        };
        let non_first_fragment = q.ip.fragment.is_some_and(|f| f.offset > 0);
        let ws_dissects = q.transport_bytes >= WS_MIN_QUOTED_TCP && !non_first_fragment;
        let found = if ws_dissects {
            let flags = q.tcp_flags.unwrap_or_default();
            let seq = q.tcp_seq.unwrap_or_default();
            let (idx, dir, _) = self.lookup(qsrc, qdst, flags, seq, meta, out);
            Some((idx, dir))
        } else {
            self.convs
                .get(&FlowKey::new(qsrc, qdst))
                .map(|&i| (i, self.streams[i].dir_of(qsrc)))
        };
        let mut ev = IcmpErrorEvent {
            frame: meta.frame,
            ts: meta.ts,
            interface: meta.interface,
            kind: m.kind,
            icmp_type: m.icmp_type,
            code: m.code,
            mtu: m.mtu,
            icmp_src: ip.src,
            icmp_dst: ip.dst,
            quoted_src: qsrc,
            quoted_dst: qdst,
            quoted_ip_len: q.ip.total_len,
            quoted_seq: q.tcp_seq,
            stream: None,
            quoted_dir: None,
            quoted_rel_seq: None,
            matched: None,
        };
        if let Some((idx, dir)) = found {
            let st = &self.streams[idx];
            let side = &st.sides[dir.index()];
            ev.stream = Some(st.id);
            ev.quoted_dir = Some(dir);
            ev.quoted_rel_seq = q.tcp_seq.and_then(|s| side.peek(s));
            ev.matched =
                ev.quoted_rel_seq
                    .and_then(|rq| side.find_tx(rq))
                    .map(|t| QuotedSegmentMatch {
                        frame: t.last_frame,
                        ts: t.last_ts,
                        rel_seq: t.rel_seq,
                        payload_len: t.payload_len,
                        ip_len: t.ip_len,
                    });
        }
        out.push(FlowEvent::IcmpError(ev));
        match found {
            Some((idx, dir)) if ws_dissects => PacketFlowInfo {
                stream: Some(self.streams[idx].id),
                dir: Some(dir),
            },
            _ => PacketFlowInfo::default(),
        }
    }

    /// End of capture: close open stalls (with [`crate::StallEnd::CaptureEnd`]).
    /// A stall is open when a direction still had unacknowledged data (or a
    /// SYN) and the stream was silent for at least the stall threshold until
    /// the last timestamp of the capture. Calling it twice emits nothing more.
    pub fn finish(&mut self, out: &mut Vec<FlowEvent>) {
        if self.finished {
            return;
        }
        self.finished = true;
        let Some(end_ts) = self.last_ts else { return };
        let cfg = self.config;
        let end_frame = self.last_frame;
        for st in self.streams.iter_mut() {
            if st.closed {
                continue;
            }
            let Some(last) = st.last_ts else { continue };
            if end_ts.0.saturating_sub(last.0) < cfg.stall_threshold_ns {
                continue;
            }
            for dir in [Direction::ClientToServer, Direction::ServerToClient] {
                if let Some((pending_bytes, pending_syn)) = pending(st, dir) {
                    emit_stall(
                        st,
                        dir,
                        end_frame,
                        end_ts,
                        pending_bytes,
                        pending_syn,
                        StallEnd::CaptureEnd,
                        out,
                    );
                }
            }
        }
    }

    /// Approximate memory held by the table, bytes: the inline size of every
    /// stream record plus the capacity of every heap buffer it owns, plus the
    /// 4-tuple map (entries at capacity plus one control byte each, as
    /// hashbrown lays them out). Deterministic (no allocator or RSS noise), for
    /// memory-bound tests; excludes allocator overhead.
    pub fn approx_heap_bytes(&self) -> usize {
        let map = self.convs.capacity() * (std::mem::size_of::<(FlowKey, usize)>() + 1);
        let slots = self.streams.capacity() * std::mem::size_of::<Box<Stream>>();
        let records = self.streams.len() * std::mem::size_of::<Stream>();
        map + slots
            + records
            + self.sweep.heap_bytes()
            + self.streams.iter().map(|s| s.heap_bytes()).sum::<usize>()
    }

    /// Number of streams assigned so far.
    pub fn stream_count(&self) -> u64 {
        self.streams.len() as u64
    }

    /// Per-flow summaries in `tcp.stream` order.
    pub fn summaries(&self) -> Vec<FlowSummary> {
        self.streams.iter().map(|s| summary_of(s)).collect()
    }
}

/// What a direction has pending: (payload bytes, SYN pending), if anything:
/// unacknowledged data, a SYN awaiting its ACK, or a peer window of zero.
/// Data counts only once the peer has been heard from (a one-way capture
/// shows no ACKs at all, which is not a stall).
fn pending(st: &Stream, dir: Direction) -> Option<(u64, bool)> {
    let side = &st.sides[dir.index()];
    let peer = &st.sides[dir.reverse().index()];
    if side.rst_sent || peer.rst_sent {
        return None;
    }
    let syn = side.syn_pending();
    // Blocked by a zero window counts as pending too (the sender may have
    // nothing unacknowledged while the receiver's buffer is full).
    let blocked = peer.window_raw == Some(0);
    if syn || (peer.seen && (side.outstanding() > 0 || blocked)) {
        Some((side.pending_bytes(), syn))
    } else {
        None
    }
}

#[allow(clippy::too_many_arguments)]
fn emit_stall(
    st: &mut Stream,
    dir: Direction,
    end_frame: FrameNo,
    end_ts: Timestamp,
    pending_bytes: u64,
    pending_syn: bool,
    ended_by: StallEnd,
    out: &mut Vec<FlowEvent>,
) {
    let Some(start_ts) = st.last_ts else { return };
    let dur = end_ts.0.saturating_sub(start_ts.0);
    if dur > st.acc.longest_stall_ns {
        st.acc.longest_stall_ns = dur;
        st.acc.longest_stall_frames = Some([st.last_frame, end_frame]);
    }
    out.push(FlowEvent::Stall(StallEvent {
        stream: st.id,
        dir,
        start_frame: st.last_frame,
        start_ts,
        end_frame,
        end_ts,
        pending_bytes,
        pending_syn,
        ended_by,
    }));
}

/// Emit the stalls that the segment `seg` (sent in `sdir`) ends.
#[allow(clippy::too_many_arguments)]
fn check_stall(
    st: &mut Stream,
    cfg: &FlowConfig,
    sdir: Direction,
    meta: &PacketMeta,
    seg: &TcpSegment<'_>,
    rel_seq: i64,
    rel_ack: Option<i64>,
    out: &mut Vec<FlowEvent>,
) {
    if st.closed {
        return;
    }
    let Some(last) = st.last_ts else { return };
    if meta.ts.0.saturating_sub(last.0) < cfg.stall_threshold_ns {
        return;
    }
    for d in [Direction::ClientToServer, Direction::ServerToClient] {
        let Some((pending_bytes, pending_syn)) = pending(st, d) else {
            continue;
        };
        let ended_by = classify_end(st, d, sdir, seg, rel_seq, rel_ack);
        emit_stall(
            st,
            d,
            meta.frame,
            meta.ts,
            pending_bytes,
            pending_syn,
            ended_by,
            out,
        );
    }
}

/// What the segment that broke the silence did, from the stalled direction `d`'s view.
fn classify_end(
    st: &Stream,
    d: Direction,
    sdir: Direction,
    seg: &TcpSegment<'_>,
    rel_seq: i64,
    rel_ack: Option<i64>,
) -> StallEnd {
    let f = seg.flags;
    if f.rst() {
        return StallEnd::Rst;
    }
    let side = &st.sides[d.index()];
    let peer = &st.sides[d.reverse().index()];
    let payload = seg.payload_len;
    if sdir == d {
        if f.syn() && side.syn_pending() {
            return StallEnd::Retransmission;
        }
        if payload > 0 && rel_seq < side.snd_nxt {
            return StallEnd::Retransmission;
        }
        if f.fin()
            && side
                .fin_rel
                .is_some_and(|fr| rel_seq + i64::from(payload) <= fr)
        {
            return StallEnd::Retransmission;
        }
        // Zero-window probe: small segment into a closed window, or Linux's
        // empty probe at SND.UNA − 1 (`tcp_xmit_probe_skb`, net/ipv4/tcp_output.c).
        if (peer.window_raw == Some(0) && payload <= 1 && !f.fin())
            || (payload == 0 && !f.syn() && !f.fin() && rel_seq == side.snd_una - 1)
        {
            return StallEnd::Probe;
        }
        if f.fin() {
            return StallEnd::Fin;
        }
        if payload > 0 {
            return StallEnd::NewData;
        }
        StallEnd::Ack
    } else {
        if f.fin() {
            return StallEnd::Fin;
        }
        if rel_ack.is_some_and(|a| a > side.snd_una) {
            return StallEnd::Ack;
        }
        if payload > 0 {
            return StallEnd::NewData;
        }
        StallEnd::Ack
    }
}

/// Apply one (non-duplicate) segment to the sender's and receiver's state.
/// Returns our Karn's-rule RTT sample for its ACK, if any.
#[allow(clippy::too_many_arguments)]
fn update_state(
    st: &mut Stream,
    cfg: &FlowConfig,
    dir: Direction,
    meta: &PacketMeta,
    ip: &IpHeader,
    seg: &TcpSegment<'_>,
    rel_seq: i64,
    rel_ack: Option<i64>,
    window_event: &mut Option<WindowChangeEvent>,
) -> Option<i64> {
    let f = seg.flags;
    let d = dir.index();
    // Handshake options.
    if f.syn() {
        let opt = seg.options.window_scale;
        if f.ack() {
            if st.synack_wscale.is_none() {
                st.synack_wscale = Some(opt);
            }
        } else if st.syn_wscale.is_none() {
            st.syn_wscale = Some(opt);
        }
        // Shifts are computed by role (SYN sender, SYN/ACK sender), then mapped to directions.
        if (dir == Direction::ServerToClient) != f.ack() {
            st.roles_swapped = true;
        }
        let [a, b] = window_shifts(st.syn_wscale, st.synack_wscale);
        st.shifts = if st.roles_swapped { [b, a] } else { [a, b] };
    }
    let handshake_done = st.sides[0].syn_sent && st.sides[1].syn_sent;
    let client_syn_ts = st.sides[0].last_syn_ts;
    let (side, peer) = both_mut(&mut st.sides, dir);
    side.seen = true;
    if f.syn() {
        if !f.ack() || side.isn.is_none() {
            side.isn = Some(seg.seq);
        }
        side.syn_sent = true;
        side.last_syn_ts = Some(meta.ts);
        if seg.options.mss.is_some() {
            side.mss = seg.options.mss;
        }
        side.wscale_offered = seg.options.window_scale;
    }
    if seg.options.sack_permitted || seg.options.sack.len > 0 {
        side.sack_seen = true;
    }
    if seg.options.timestamps.is_some() {
        side.ts_seen = true;
    }
    if !f.syn() && !f.rst() {
        side.sent_non_syn = true;
    }
    zeek_transition(
        &mut side.zeek,
        &mut peer.zeek,
        f.syn(),
        f.ack(),
        f.fin(),
        f.rst(),
    );

    let seq_len = seg
        .payload_len
        .saturating_add(u32::from(f.syn()))
        .saturating_add(u32::from(f.fin()));
    let tx = TxSeg {
        rel_seq,
        seq_len,
        payload_len: seg.payload_len,
        ip_len: ip.total_len,
        first_frame: meta.frame,
        first_ts: meta.ts,
        last_frame: meta.frame,
        last_ts: meta.ts,
        tx_count: 1,
    };
    side.on_transmit(tx, cfg.max_unacked_segments);
    if f.fin() {
        let fr = rel_seq + i64::from(seg.payload_len);
        side.fin_sent = true;
        if side.fin_rel.is_none_or(|x| fr > x) {
            side.fin_rel = Some(fr);
        }
    }
    if f.rst() {
        side.rst_sent = true;
    }
    let own_rtt = rel_ack.and_then(|a| peer.on_acked(a, meta.ts));

    // Advertised window (RST windows carry no meaning).
    if !f.rst() {
        let bytes = if f.syn() {
            Some(u64::from(seg.window))
        } else {
            st.shifts[d].map(|sh| u64::from(seg.window) << sh)
        };
        let (side, _) = both_mut(&mut st.sides, dir);
        if let Some(old_raw) = side.window_raw {
            let changed = match (side.window_bytes, bytes) {
                (Some(a), Some(b)) => a != b,
                (None, None) => old_raw != seg.window,
                _ => true,
            };
            if changed {
                *window_event = Some(WindowChangeEvent {
                    stream: st.id,
                    dir,
                    frame: meta.frame,
                    ts: meta.ts,
                    old_bytes: side.window_bytes,
                    new_bytes: bytes,
                    raw: seg.window,
                });
            }
        }
        side.window_raw = Some(seg.window);
        side.window_bytes = bytes;
        if !f.syn() {
            if seg.window == 0 {
                if side.zw_since.is_none() {
                    side.zw_since = Some(meta.ts);
                    st.acc.zero_window_episodes += 1;
                }
            } else if let Some(since) = side.zw_since.take() {
                st.acc.zero_window_ns = st
                    .acc
                    .zero_window_ns
                    .saturating_add(meta.ts.0.saturating_sub(since.0).max(0));
            }
        }
    }

    // Handshake RTT: client SYN → SYN/ACK → first client ACK after it.
    if dir == Direction::ClientToServer
        && f.ack()
        && !f.syn()
        && handshake_done
        && st.acc.handshake_rtt_ns.is_none()
    {
        if let Some(t0) = client_syn_ts {
            st.acc.handshake_rtt_ns = Some(meta.ts.0.saturating_sub(t0.0));
        }
    }

    // Closed: RST, or both FINs acknowledged. A late segment on a closed
    // stream refilled the buffers just freed: free them again.
    let [c, s] = &st.sides;
    let fin_acked = |x: &Side| x.fin_rel.is_some_and(|fr| x.snd_una > fr);
    if st.closed || f.rst() || (fin_acked(c) && fin_acked(s)) {
        st.close();
    }
    own_rtt
}

fn summary_of(st: &Stream) -> FlowSummary {
    let acc = &st.acc;
    let [c, s] = &st.sides;
    let mut zw_ns = acc.zero_window_ns;
    for side in [c, s] {
        if let Some(since) = side.zw_since {
            zw_ns = zw_ns.saturating_add(acc.last_ts.0.saturating_sub(since.0).max(0));
        }
    }
    let rstos0 = c.syn_sent && c.isn.is_some() && !c.sent_non_syn;
    let sizes_zero = acc.payload[0] == 0 && acc.payload[1] == 0;
    FlowSummary {
        tcp_stream: st.id,
        client: st.client.addr.to_string(),
        client_port: st.client.port,
        server: st.server.addr.to_string(),
        server_port: st.server.port,
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
        sightings: acc.sightings.clone(),
        sightings_capped: acc.sightings_capped,
        zero_window_ms: ms(zw_ns),
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
