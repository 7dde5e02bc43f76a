#![allow(dead_code)]
// Test builder: synthesized flow events for one stream (stream 0), client
// 192.0.2.10:40000 -> server 198.51.100.10:80 (IPv4) or 2001:db8::10 -> 2001:db8::20.

use pcapsleuth_core::{Direction, Endpoint, FrameNo, SeqNum, Timestamp};
use pcapsleuth_decode::{
    Decoded, IpHeader, IpVersion, TcpFlags, TcpOptions, TcpSegment, Transport,
};
use pcapsleuth_detect::{Detector, Finding, FinishContext, PacketContext};
use pcapsleuth_flow::{FlowEvent, PacketFlowInfo, PacketMeta, SegmentAnalysis, SegmentEvent};

pub const C2S: Direction = Direction::ClientToServer;
pub const S2C: Direction = Direction::ServerToClient;

/// Base timestamp (ns) plus `t` milliseconds.
pub fn at(t_ms: f64) -> Timestamp {
    Timestamp(1_700_000_000_000_000_000 + (t_ms * 1e6) as i64)
}

/// A script of segments of stream 0, numbered from frame 1.
pub struct Script {
    pub frame: FrameNo,
    pub events: Vec<FlowEvent>,
    pub v6: bool,
    /// TTL / hop limit of client->server and server->client packets, fed via `on_packet`.
    pub ttl: Option<[u8; 2]>,
}

impl Script {
    pub fn new() -> Self {
        Script {
            frame: 0,
            events: Vec::new(),
            v6: false,
            ttl: None,
        }
    }
    /// Any segment; returns its frame number. `window` in bytes (scale 7 assumed).
    #[allow(clippy::too_many_arguments)]
    pub fn seg(
        &mut self,
        dir: Direction,
        t_ms: f64,
        rel_seq: i64,
        len: u32,
        rel_ack: i64,
        window: u64,
    ) -> FrameNo {
        self.frame += 1;
        let ev = SegmentEvent {
            stream: 0,
            dir,
            frame: self.frame,
            ts: at(t_ms),
            interface: 0,
            flags: TcpFlags(TcpFlags::ACK),
            seq: SeqNum(1000u32.wrapping_add(rel_seq as u32)),
            ack: SeqNum(5000u32.wrapping_add(rel_ack as u32)),
            rel_seq,
            rel_ack: Some(rel_ack),
            payload_len: len,
            ip_len: len + if self.v6 { 72 } else { 52 },
            ip_id: None,
            window_raw: if window == 0 {
                0
            } else {
                (window / 128).clamp(1, 65535) as u16
            },
            window_bytes: Some(window),
            mss: None,
            window_scale: None,
            sack_blocks: 0,
            wireshark: SegmentAnalysis::default(),
            analysis: SegmentAnalysis::default(),
            duplicate_of: None,
            snd_una: rel_seq,
            snd_nxt: rel_seq + i64::from(len),
            since_first_tx_ns: None,
            ack_rtt_ns: None,
            bytes_in_flight: None,
        };
        self.events.push(FlowEvent::Segment(ev));
        self.frame
    }
    /// Modify the last segment pushed.
    pub fn last_mut(&mut self) -> &mut SegmentEvent {
        match self.events.last_mut() {
            Some(FlowEvent::Segment(s)) => s,
            _ => panic!("last event is not a segment"),
        }
    }
    /// Push any event (counts a frame).
    pub fn push(&mut self, ev: FlowEvent) {
        self.frame += 1;
        self.events.push(ev);
    }
    /// Finish context naming stream 0's endpoints.
    pub fn ctx(&self) -> FinishContext {
        let mut ctx = FinishContext::default();
        let (c, s) = self.endpoints();
        ctx.streams.insert(0, (c, s));
        ctx
    }
    pub fn endpoints(&self) -> (Endpoint, Endpoint) {
        if self.v6 {
            (
                Endpoint {
                    addr: "2001:db8::10".parse().unwrap(),
                    port: 40000,
                },
                Endpoint {
                    addr: "2001:db8::20".parse().unwrap(),
                    port: 80,
                },
            )
        } else {
            (
                Endpoint {
                    addr: "192.0.2.10".parse().unwrap(),
                    port: 40000,
                },
                Endpoint {
                    addr: "198.51.100.10".parse().unwrap(),
                    port: 80,
                },
            )
        }
    }
    /// Feed every event to `d` and return its findings.
    pub fn run(&self, d: &mut dyn Detector) -> Vec<Finding> {
        for ev in &self.events {
            d.on_flow_event(ev);
            if let (FlowEvent::Segment(s), Some(ttl)) = (ev, self.ttl) {
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
                    ttl: ttl[s.dir.index()],
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
                let pkt = PacketContext {
                    meta: PacketMeta {
                        frame: s.frame,
                        ts: s.ts,
                        interface: 0,
                    },
                    decoded: &decoded,
                    flow: PacketFlowInfo {
                        stream: Some(0),
                        dir: Some(s.dir),
                    },
                };
                d.on_packet(&pkt);
            }
        }
        d.finish(&self.ctx())
    }
}
