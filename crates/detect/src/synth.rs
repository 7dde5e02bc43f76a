//! Synthetic flow events for detector tests (feature `test-support`).
//!
//! One builder replaces the per-detector copies: every event is stream 0, client
//! 192.0.2.10 → server 198.51.100.10 (RFC 5737 documentation addresses) or
//! 2001:db8::10 → 2001:db8::20 (RFC 3849), timestamps are [`T0`] plus milliseconds.
//! Events are built from a template and adjusted with struct-update syntax, in the
//! style of smoltcp's `..SEG_TEMPL` test packets:
//!
//! ```
//! use pcapsleuth_detect::synth::{at, segment, C2S};
//! use pcapsleuth_flow::SegmentEvent;
//! let s = SegmentEvent { ip_id: Some(7), ..segment(C2S, 3, at(1.5), 1000, 1, 100) };
//! assert_eq!((s.frame.get(), s.snd_nxt, s.ip_len), (3, 101, 152));
//! ```
//!
//! These helpers panic (they are test code): [`Script::last_mut`] when the last
//! event is not a segment, [`evidence`] when a key is missing.

use crate::{Detector, Finding, FinishContext, PacketContext};
use pcapsleuth_core::{Direction, Endpoint, FrameNo, InterfaceId, SeqNum, StreamId, Timestamp};
use pcapsleuth_decode::{
    Decoded, IcmpKind, IpHeader, IpVersion, TcpFlags, TcpOptions, TcpSegment, Transport,
};
use pcapsleuth_flow::{
    FlowEndReason, FlowEnded, FlowEvent, FlowStarted, IcmpErrorEvent, PacketFlowInfo, PacketMeta,
    SegmentAnalysis, SegmentEvent,
};
use serde_json::Value;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Client → server.
pub const C2S: Direction = Direction::ClientToServer;
/// Server → client.
pub const S2C: Direction = Direction::ServerToClient;

/// Base timestamp of every synthetic capture, ns since the Unix epoch (2023-11-14).
pub const T0: i64 = 1_700_000_000_000_000_000;

/// Client address of the IPv4 test flow (RFC 5737 TEST-NET-1).
pub const CLIENT_V4: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10));
/// Server address of the IPv4 test flow (RFC 5737 TEST-NET-2).
pub const SERVER_V4: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 10));
/// Client address of the IPv6 test flow (RFC 3849 documentation prefix).
pub const CLIENT_V6: IpAddr = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x10));
/// Server address of the IPv6 test flow (RFC 3849 documentation prefix).
pub const SERVER_V6: IpAddr = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x20));

/// [`T0`] plus `t_ms` milliseconds (fractions kept down to the ns).
pub fn at(t_ms: f64) -> Timestamp {
    Timestamp(T0 + (t_ms * 1e6) as i64)
}

/// IPv4 client and server endpoints ([`CLIENT_V4`], [`SERVER_V4`]) on the given ports.
pub fn v4_pair(client_port: u16, server_port: u16) -> (Endpoint, Endpoint) {
    (
        Endpoint {
            addr: CLIENT_V4,
            port: client_port,
        },
        Endpoint {
            addr: SERVER_V4,
            port: server_port,
        },
    )
}

/// A [`FinishContext`] naming `client` and `server` as stream 0's endpoints.
pub fn finish_context(client: Endpoint, server: Endpoint) -> FinishContext {
    let mut ctx = FinishContext::default();
    ctx.streams.insert(StreamId(0), (client, server));
    ctx
}

/// Feed `d` the [`FlowStarted`] of stream 0 (frame 1, at [`at`]`(0.0)`) and return
/// the matching [`finish_context`].
pub fn start_flow(d: &mut dyn Detector, client: Endpoint, server: Endpoint) -> FinishContext {
    d.on_flow_event(&FlowEvent::FlowStarted(FlowStarted {
        stream: StreamId(0),
        client,
        server,
        frame: FrameNo(1),
        ts: at(0.0),
    }));
    finish_context(client, server)
}

/// Template data segment of stream 0: ACK flag, `seq` = `isn + rel_seq` (serial
/// arithmetic), ack 1 / relative ack 1, `len` payload bytes in an IPv4 datagram of
/// `len + 52` bytes (20 IP + 32 TCP with timestamps), window 500 raw = 64000 bytes,
/// `snd_una` 1, `snd_nxt` `rel_seq + len`, no analysis flags. Override fields with
/// `SegmentEvent { field, ..segment(..) }`.
pub fn segment(
    dir: Direction,
    frame: u64,
    ts: Timestamp,
    isn: u32,
    rel_seq: i64,
    len: u32,
) -> SegmentEvent {
    SegmentEvent {
        stream: StreamId(0),
        dir,
        frame: FrameNo(frame),
        ts,
        interface: InterfaceId(0),
        flags: TcpFlags(TcpFlags::ACK),
        seq: SeqNum(isn).add(rel_seq as u32),
        ack: SeqNum(1),
        rel_seq,
        rel_ack: Some(1),
        payload_len: len,
        ip_len: len + 52,
        ip_id: None,
        window_raw: 500,
        window_bytes: Some(64000),
        mss: None,
        window_scale: None,
        sack_blocks: 0,
        wireshark: SegmentAnalysis::default(),
        analysis: SegmentAnalysis::default(),
        duplicate_of: None,
        snd_una: 1,
        snd_nxt: rel_seq + i64::from(len),
        since_first_tx_ns: None,
        ack_rtt_ns: None,
        bytes_in_flight: None,
        fingerprint: pcapsleuth_flow::PacketFingerprint {
            ip_id: None,
            l4: pcapsleuth_flow::L4Fingerprint::Tcp(pcapsleuth_flow::TcpFingerprint {
                seq: SeqNum(isn).add(rel_seq as u32),
                ack: SeqNum(1),
                flags: TcpFlags::ACK,
                window: 500,
                payload_len: len,
                timestamps: None,
                sack0: None,
                payload_hash: 0,
            }),
        },
    }
}

/// Template ICMPv4 fragmentation-needed (type 3 code 4, RFC 1191 §4) sent by
/// `icmp_src` to [`CLIENT_V4`], quoting a 1500-byte client → server datagram of
/// stream 0 at relative sequence `rel_seq`; next-hop MTU 1400 bytes, no quoted
/// absolute sequence, no matched segment, interface 0.
pub fn frag_needed(
    frame: u64,
    ts: Timestamp,
    icmp_src: IpAddr,
    (client, server): (Endpoint, Endpoint),
    rel_seq: i64,
) -> IcmpErrorEvent {
    IcmpErrorEvent {
        frame: FrameNo(frame),
        ts,
        interface: InterfaceId(0),
        kind: IcmpKind::FragNeeded,
        icmp_type: 3,
        code: 4,
        mtu: Some(1400),
        icmp_src,
        icmp_dst: client.addr,
        quoted_src: client,
        quoted_dst: server,
        quoted_proto: pcapsleuth_core::ip_protocol::TCP,
        quoted_ports: true,
        quoted_ip_id: None,
        quoted_ip_len: 1500,
        quoted_seq: None,
        stream: Some(StreamId(0)),
        udp_stream: None,
        quoted_dir: Some(C2S),
        quoted_rel_seq: Some(rel_seq),
        matched: None,
    }
}

/// The [`FlowEnded`] of `stream` (reason [`FlowEndReason::Closed`]) whose
/// last frame was `last_frame` at `last_ts`, between [`CLIENT_V4`] port
/// `40000 + stream` and [`SERVER_V4`] port 80 (as [`syn_only`]'s).
pub fn flow_ended(stream: StreamId, last_frame: u64, last_ts: Timestamp) -> FlowEvent {
    let (client, server) = v4_pair(40000u16.wrapping_add(stream.get() as u16), 80);
    FlowEvent::FlowEnded(FlowEnded {
        stream,
        last_frame: FrameNo(last_frame),
        last_ts,
        reason: FlowEndReason::Closed,
        client,
        server,
    })
}

/// The first SYN of stream `stream` from port `40000 + stream` (frame
/// `frame`, no ACK, window 64240, MSS 1460, client → server), with the
/// [`FlowStarted`] before it: the two events a one-SYN flow (a SYN scan)
/// gives a detector.
pub fn syn_only(stream: u64, frame: u64, ts: Timestamp) -> [FlowEvent; 2] {
    let client = Endpoint {
        addr: CLIENT_V4,
        port: 40000u16.wrapping_add(stream as u16),
    };
    let server = Endpoint {
        addr: SERVER_V4,
        port: 80,
    };
    let started = FlowEvent::FlowStarted(FlowStarted {
        stream: StreamId(stream),
        client,
        server,
        frame: FrameNo(frame),
        ts,
    });
    let syn = SegmentEvent {
        stream: StreamId(stream),
        flags: TcpFlags(TcpFlags::SYN),
        rel_ack: None,
        ack: SeqNum(0),
        window_raw: 64240,
        window_bytes: None,
        mss: Some(1460),
        snd_una: 0,
        snd_nxt: 1,
        ip_len: 60,
        ..segment(C2S, frame, ts, 1000, 0, 0)
    };
    [started, FlowEvent::Segment(syn)]
}

/// Evidence value `k` of finding `f`. Panics (naming the key) when it is missing.
pub fn evidence<'a>(f: &'a Finding, k: &str) -> &'a Value {
    f.evidence
        .get(k)
        .unwrap_or_else(|| panic!("evidence key {k} missing in {:?}", f.evidence))
}

/// A script of events of stream 0, client port 40000 → server port 80, numbered
/// from frame 1; [`Script::run`] feeds them to a detector.
#[derive(Debug, Default)]
pub struct Script {
    /// Frame number of the last event pushed (0 before the first).
    pub frame: u64,
    /// Events in capture order.
    pub events: Vec<FlowEvent>,
    /// IPv6 endpoints ([`CLIENT_V6`], [`SERVER_V6`]) and 72-byte headers instead of IPv4.
    pub v6: bool,
    /// TTL / hop limit of client→server and server→client packets; when set,
    /// [`Script::run`] also feeds each segment to `on_packet`.
    pub ttl: Option<[u8; 2]>,
}

impl Script {
    /// An empty IPv4 script without TTLs.
    pub fn new() -> Self {
        Self::default()
    }

    /// Push a pure-ACK-flagged segment and return its frame number. Sequence numbers
    /// are relative to ISN 1000 (`dir`'s) and 5000 (acknowledged); `len` payload bytes;
    /// `window` in bytes, advertised raw with scale 7 (0 stays 0); `snd_una` =
    /// `rel_seq`; IP length adds 52 (IPv4) or 72 (IPv6) header bytes.
    pub fn seg(
        &mut self,
        dir: Direction,
        t_ms: f64,
        rel_seq: i64,
        len: u32,
        rel_ack: i64,
        window: u64,
    ) -> u64 {
        self.frame += 1;
        let ev = SegmentEvent {
            ack: SeqNum(5000u32.wrapping_add(rel_ack as u32)),
            rel_ack: Some(rel_ack),
            ip_len: len + if self.v6 { 72 } else { 52 },
            window_raw: if window == 0 {
                0
            } else {
                (window / 128).clamp(1, 65535) as u16
            },
            window_bytes: Some(window),
            snd_una: rel_seq,
            ..segment(dir, self.frame, at(t_ms), 1000, rel_seq, len)
        };
        self.events.push(FlowEvent::Segment(ev));
        self.frame
    }

    /// The last segment pushed, to modify. Panics when the last event is not a segment.
    pub fn last_mut(&mut self) -> &mut SegmentEvent {
        match self.events.last_mut() {
            Some(FlowEvent::Segment(s)) => s,
            _ => panic!("last event is not a segment"),
        }
    }

    /// Push the [`FlowEnded`] of stream 0 after the last event (no frame
    /// counted: the flow table emits it with a later packet).
    pub fn end_flow(&mut self) {
        let ts = self
            .events
            .iter()
            .rev()
            .find_map(|e| match e {
                FlowEvent::Segment(s) => Some(s.ts),
                _ => None,
            })
            .unwrap_or(at(0.0));
        self.events.push(flow_ended(StreamId(0), self.frame, ts));
    }

    /// Push any event (counts a frame).
    pub fn push(&mut self, ev: FlowEvent) {
        self.frame += 1;
        self.events.push(ev);
    }

    /// Finish context naming stream 0's endpoints.
    pub fn ctx(&self) -> FinishContext {
        let (c, s) = self.endpoints();
        finish_context(c, s)
    }

    /// Client and server endpoints (port 40000 → 80).
    pub fn endpoints(&self) -> (Endpoint, Endpoint) {
        if self.v6 {
            (
                Endpoint {
                    addr: CLIENT_V6,
                    port: 40000,
                },
                Endpoint {
                    addr: SERVER_V6,
                    port: 80,
                },
            )
        } else {
            v4_pair(40000, 80)
        }
    }

    /// Feed every event to `d` (and, when [`Script::ttl`] is set, each segment's
    /// packet to `on_packet`) and return its findings.
    pub fn run(&self, d: &mut dyn Detector) -> Vec<Finding> {
        for ev in &self.events {
            d.on_flow_event(ev);
            if let (FlowEvent::Segment(s), Some(ttl)) = (ev, self.ttl) {
                self.feed_packet(d, s, ttl[s.dir.index()]);
            }
        }
        d.finish(&self.ctx())
    }

    /// Feed `d` the decoded packet carrying segment `s` with IP TTL / hop limit `ttl`
    /// (DF set, 20-byte IP and 32-byte TCP header, no payload bytes kept).
    fn feed_packet(&self, d: &mut dyn Detector, s: &SegmentEvent, ttl: u8) {
        let (c, sv) = self.endpoints();
        let (src, dst) = if s.dir == C2S { (c, sv) } else { (sv, c) };
        let ip = IpHeader {
            version: if self.v6 {
                IpVersion::V6
            } else {
                IpVersion::V4
            },
            src: src.addr,
            dst: dst.addr,
            ttl,
            ip_id: None,
            total_len: s.ip_len,
            header_len: 20,
            protocol: 6,
            dont_fragment: true,
            fragment: None,
        };
        let tcp = TcpSegment {
            src_port: src.port,
            dst_port: dst.port,
            seq: s.seq,
            ack: s.ack,
            flags: s.flags,
            window: s.window_raw,
            urgent: 0,
            header_len: 32,
            payload_len: s.payload_len,
            payload: &[],
            options: TcpOptions::default(),
        };
        let decoded = Decoded {
            ip: Some(ip),
            transport: Transport::Tcp(tcp),
            ..Default::default()
        };
        d.on_packet(&PacketContext {
            meta: PacketMeta {
                frame: s.frame,
                ts: s.ts,
                interface: InterfaceId(0),
            },
            decoded: &decoded,
            flow: PacketFlowInfo {
                stream: Some(StreamId(0)),
                dir: Some(s.dir),
                ..PacketFlowInfo::default()
            },
        });
    }
}
