//! The flow table: takes packets in frame order and drives, per `tcp.stream`,
//! the concerns in its submodules:
//! - `stream_ids`: Wireshark-exact `tcp.stream` ids and `base_seq` rules;
//! - `sightings.rs` (crate level): one packet seen twice (duplicate sightings);
//! - `state`: endpoint state updates (SND.UNA/SND.NXT, windows, handshake);
//! - `stalls`: silences with data outstanding;
//! - `icmp`: ICMP/ICMPv6 errors matched to the flow they quote;
//! - `stream`: the per-stream record and its summary.

mod icmp;
mod stalls;
mod state;
mod stream;
mod stream_ids;

use crate::analysis::{SegmentInput, SegmentVerdict};
use crate::sightings::{DupEntry, DupSig, SightKey, SightingTable, SweepQueue};
use crate::{FlowEvent, FlowSummary, PacketFingerprint, SegmentEvent, Sighting};
use pcapsleuth_core::{Direction, Endpoint, FlowKey, FrameNo, InterfaceId, StreamId, Timestamp};
use pcapsleuth_decode::{Decoded, IpHeader, TcpSegment, Transport};
use std::collections::HashMap;
use stream::Stream;

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
    /// `udp.stream` of the packet (innermost UDP header; for ICMP errors: of
    /// the quoted UDP header, as Wireshark shows it). See [`crate::udp`].
    pub udp_stream: Option<StreamId>,
    /// Direction within that UDP conversation.
    pub udp_dir: Option<Direction>,
    /// `udp.stream` of the outer UDP header of a UDP tunnel
    /// ([`pcapsleuth_decode::Decoded::outer_udp`]): Wireshark numbers it
    /// before the inner headers and prints it first (`udp.stream` "outer,inner").
    pub outer_udp_stream: Option<StreamId>,
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
    /// UDP conversations (`udp.stream`).
    udp: crate::udp::UdpTable,
}

/// Match a segment against the stream's first sightings (`sightings.rs`):
/// one packet seen twice has the same fingerprint within the window, at
/// another place or with the same non-zero IP ID, in either time direction.
/// Returns the first sighting it duplicates.
fn observe_sighting(
    st: &mut Stream,
    cfg: &FlowConfig,
    sight: SightKey,
    dir: Direction,
    meta: &PacketMeta,
    fp: PacketFingerprint,
) -> Option<DupEntry> {
    let sig = DupSig { dir, fp };
    st.dups
        .observe(sig, sight, meta.frame, meta.ts, cfg.duplicate_window_ns)
}

/// Relative sequence and acknowledgement numbers of a segment travelling in
/// `dir`; a later sighting only peeks (it must not move the bases).
fn relative_numbers(
    st: &mut Stream,
    dir: Direction,
    seg: &TcpSegment<'_>,
    sighting: bool,
) -> (i64, Option<i64>) {
    let d = dir.index();
    let r = dir.reverse().index();
    if sighting {
        (
            st.sides[d].peek(seg.seq).unwrap_or(0),
            if seg.flags.ack() {
                st.sides[r].peek(seg.ack)
            } else {
                None
            },
        )
    } else {
        (
            st.sides[d].rel(seg.seq).unwrap_or(0),
            if seg.flags.ack() {
                st.sides[r].rel(seg.ack)
            } else {
                None
            },
        )
    }
}

/// Update the stream's summary counters with one segment.
fn count_segment(
    st: &mut Stream,
    cfg: &FlowConfig,
    dir: Direction,
    meta: &PacketMeta,
    (ip, seg): (&IpHeader, &TcpSegment<'_>),
    dup: Option<&DupEntry>,
    (verdict, own_rtt): (&SegmentVerdict, Option<i64>),
) {
    let d = dir.index();
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
}

/// The [`SegmentEvent`] of a segment, after the stream state was updated.
fn segment_event(
    st: &Stream,
    dir: Direction,
    meta: &PacketMeta,
    (ip, seg): (&IpHeader, &TcpSegment<'_>),
    (rel_seq, rel_ack): (i64, Option<i64>),
    verdict: &SegmentVerdict,
    (duplicate_of, fingerprint): (Option<FrameNo>, PacketFingerprint),
) -> SegmentEvent {
    let d = dir.index();
    let side = &st.sides[d];
    let flags = seg.flags;
    SegmentEvent {
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
        window_bytes: st.window_bytes(d, flags.syn(), seg.window),
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
        fingerprint,
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
    /// ICMP/ICMPv6 errors that quote a packet (one [`FlowEvent::IcmpError`]
    /// each, whatever the quoted protocol; a `tcp.stream` only for quoted
    /// TCP); UDP datagrams, a UDP tunnel's outer header and the UDP header of
    /// an unreassembled first fragment get their `udp.stream` ([`crate::udp`]);
    /// everything else returns an empty [`PacketFlowInfo`]. Never panics.
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
        // A UDP tunnel's outer conversation is numbered before the inner headers.
        let outer_udp_stream = crate::udp::on_outer(&mut self.udp, meta, pkt);
        let info = self.on_transport(meta, pkt, out);
        PacketFlowInfo {
            outer_udp_stream,
            ..info
        }
    }

    /// [`FlowTable::on_packet`] for the innermost transport.
    fn on_transport(
        &mut self,
        meta: &PacketMeta,
        pkt: &Decoded<'_>,
        out: &mut Vec<FlowEvent>,
    ) -> PacketFlowInfo {
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
            Transport::Udp(d) => crate::udp::on_datagram(&mut self.udp, meta, &ip, d, out),
            Transport::Icmp(m) => match m.quoted {
                Some(q) => {
                    let udp = crate::udp::on_quote(&mut self.udp, meta, &q);
                    PacketFlowInfo {
                        udp_stream: udp.udp_stream,
                        udp_dir: udp.udp_dir,
                        ..self.on_icmp(meta, &ip, m, &q, udp, out)
                    }
                }
                None => PacketFlowInfo::default(),
            },
            Transport::None => crate::udp::on_first_fragment(&mut self.udp, meta, pkt),
            _ => PacketFlowInfo::default(),
        }
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
        let (idx, dir, new_stream_on_syn) = self.lookup(src, dst, seg.flags, seg.seq, meta, out);
        let cfg = self.config;
        let st = &mut self.streams[idx];
        stream_ids::note_bases(st, dir, ip, seg);

        let fingerprint = PacketFingerprint::tcp(ip, seg);
        let dup = observe_sighting(st, &cfg, sight, dir, meta, fingerprint);
        let duplicate_of = dup.map(|e| e.frame);
        let rel = relative_numbers(st, dir, seg, dup.is_some());

        let mut own_rtt = None;
        let mut window_event = None;
        if dup.is_none() {
            // Stalls end with this segment.
            stalls::check_stall(st, &cfg, dir, meta, seg, rel, out);
            (own_rtt, window_event) = state::update_state(st, &cfg, dir, meta, ip, seg, rel);
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

        count_segment(
            st,
            &cfg,
            dir,
            meta,
            (ip, seg),
            dup.as_ref(),
            (&verdict, own_rtt),
        );
        out.push(FlowEvent::Segment(segment_event(
            st,
            dir,
            meta,
            (ip, seg),
            rel,
            &verdict,
            (duplicate_of, fingerprint),
        )));
        if let Some(w) = window_event {
            out.push(FlowEvent::WindowChange(w));
        }
        PacketFlowInfo {
            stream: Some(st.id),
            dir: Some(dir),
            ..PacketFlowInfo::default()
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
            stalls::finish_stream(st, &cfg, end_frame, end_ts, out);
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

    /// The UDP conversations (`udp.stream`) seen so far; `udp().len()` is
    /// the number of UDP streams.
    pub fn udp(&self) -> &crate::udp::UdpTable {
        &self.udp
    }

    /// Per-flow summaries in `tcp.stream` order.
    pub fn summaries(&self) -> Vec<FlowSummary> {
        self.streams.iter().map(|s| s.summary()).collect()
    }
}
