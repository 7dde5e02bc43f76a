//! One `tcp.stream` record: both endpoint states, the `tcp.analysis`
//! analyzer, summary counters and duplicate-sighting fingerprints.

use super::PacketMeta;
use crate::analysis::StreamAnalyzer;
use crate::endpoint::Side;
use crate::sightings::SightingTable;
use crate::summary::{conn_state, ms, SummaryAcc};
use crate::{FlowSummary, Sighting};
use pcapsleuth_core::{Direction, Endpoint, FrameNo, SeqNum, StreamId, Timestamp};

/// One `tcp.stream`.
#[derive(Debug)]
pub(super) struct Stream {
    pub(super) id: StreamId,
    pub(super) client: Endpoint,
    pub(super) server: Endpoint,
    /// Wireshark's `base_seq` per direction (stream-id decisions only).
    pub(super) ws_base: [Option<SeqNum>; 2],
    pub(super) sides: [Side; 2],
    /// Window-scale option of the first SYN / SYN-ACK seen (`Some(None)` = seen without option).
    pub(super) syn_wscale: Option<Option<u8>>,
    pub(super) synack_wscale: Option<Option<u8>>,
    pub(super) shifts: [Option<u8>; 2],
    /// The bare SYN came from the server side (or the SYN/ACK from the client side).
    pub(super) roles_swapped: bool,
    pub(super) analyzer: StreamAnalyzer,
    pub(super) acc: SummaryAcc,
    /// Latest timestamp of a segment of this stream (either direction).
    pub(super) last_ts: Option<Timestamp>,
    pub(super) last_frame: FrameNo,
    /// First sightings for duplicate detection (`sightings.rs`).
    pub(super) dups: SightingTable,
    /// RST seen, both FINs acked, or replaced by a newer stream: no stalls, buffers freed.
    pub(super) closed: bool,
}

impl Stream {
    pub(super) fn new(
        id: StreamId,
        client: Endpoint,
        server: Endpoint,
        meta: &PacketMeta,
    ) -> Stream {
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

    pub(super) fn dir_of(&self, src: Endpoint) -> Direction {
        if src == self.client {
            Direction::ClientToServer
        } else {
            Direction::ServerToClient
        }
    }

    /// Heap bytes owned by this stream (by capacity), not counting `size_of::<Stream>()`.
    pub(super) fn heap_bytes(&self) -> usize {
        self.sides.iter().map(Side::heap_bytes).sum::<usize>()
            + self.analyzer.heap_bytes()
            + self.dups.heap_bytes()
            + self.acc.sightings.capacity() * std::mem::size_of::<Sighting>()
    }

    pub(super) fn close(&mut self) {
        self.closed = true;
        for s in self.sides.iter_mut() {
            s.free_buffers();
        }
        // Keep the newest sightings (the closing FIN/ACK or RST is often seen again on
        // another interface) and, on multi-interface streams, those whose copies may
        // still follow in file order; free the rest.
        self.dups.close();
    }

    /// Advertised window in bytes of a segment sent in direction index `d`
    /// with raw window field `raw`: unscaled on a SYN, scaled by the
    /// direction's RFC 7323 shift otherwise, `None` when the shift is unknown.
    pub(super) fn window_bytes(&self, d: usize, syn: bool, raw: u16) -> Option<u64> {
        if syn {
            Some(u64::from(raw))
        } else {
            self.shifts[d].map(|sh| u64::from(raw) << sh)
        }
    }

    /// The `pcapsleuth flows` row of this stream.
    pub(super) fn summary(&self) -> FlowSummary {
        let acc = &self.acc;
        let [c, s] = &self.sides;
        let mut zw_ns = acc.zero_window_ns;
        for side in [c, s] {
            if let Some(since) = side.zw_since {
                zw_ns = zw_ns.saturating_add(acc.last_ts.0.saturating_sub(since.0).max(0));
            }
        }
        let rstos0 = c.syn_sent && c.isn.is_some() && !c.sent_non_syn;
        let sizes_zero = acc.payload[0] == 0 && acc.payload[1] == 0;
        FlowSummary {
            tcp_stream: self.id,
            client: self.client.addr.to_string(),
            client_port: self.client.port,
            server: self.server.addr.to_string(),
            server_port: self.server.port,
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
}

/// The sender's and the receiver's state for a segment travelling in `d`.
pub(super) fn both_mut(sides: &mut [Side; 2], d: Direction) -> (&mut Side, &mut Side) {
    let [c, s] = sides;
    match d {
        Direction::ClientToServer => (c, s),
        Direction::ServerToClient => (s, c),
    }
}
