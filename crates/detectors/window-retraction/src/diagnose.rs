//! The decision: each direction whose right window edge moved left →
//! one [`Diagnosis`] (plain data, no prose; [`crate::render()`] writes the words).

use crate::{DirState, Stream, WindowRetraction};
use pcapsleuth_core::{Direction, FrameNo, Severity, StreamId};
use pcapsleuth_detect::{FinishContext, FlowRef};
use serde::Serialize;
use std::net::IpAddr;

/// One retraction: the receiver's segment `frame` put the right edge (ACK +
/// scaled window, 64-bit relative sequence space, bytes) left of where its
/// previous segment `prev_frame` had put it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RetractionEvidence {
    /// The retracting segment.
    pub frame: FrameNo,
    /// The receiver's previous segment (same direction), which set the old edge.
    pub prev_frame: FrameNo,
    /// Old right edge: `prev_ack + prev_window_bytes` (relative sequence, bytes).
    pub prev_right_edge: i64,
    /// New right edge: `ack + window_bytes` (relative sequence, bytes).
    pub new_right_edge: i64,
    /// `prev_right_edge − new_right_edge` (bytes).
    pub retracted_bytes: u64,
    /// Relative ACK of `frame` (bytes).
    pub ack: i64,
    /// Scaled window of `frame` (bytes).
    pub window_bytes: u64,
    /// Raw window field of `frame` (units of `window_scale_factor` bytes).
    pub window_field: u16,
    /// Relative ACK of `prev_frame` (bytes).
    pub prev_ack: i64,
    /// Scaled window of `prev_frame` (bytes).
    pub prev_window_bytes: u64,
    /// `frame` advertises a zero window.
    pub to_zero_window: bool,
    /// The retraction is smaller than one window-scale unit: it can come from
    /// rounding the window down (`window >> wscale` in Linux
    /// `tcp_select_window`). `null` when the unit is not known yet (every
    /// window so far was zero).
    pub below_scale_unit: Option<bool>,
    /// Bytes of the retracted space the sender had already put on the wire
    /// (before the retraction, or within one handshake RTT +
    /// [`crate::INFLIGHT_SLACK_NS`] after it).
    pub sent_into_bytes: u64,
    /// Of those, bytes the sender had to send again before the receiver
    /// acknowledged them (bytes).
    pub dropped_bytes: u64,
}

/// Data sent into a retracted space and sent again: the receiver dropped it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DroppedSegment {
    /// The first transmission, sent into the retracted space.
    pub original_frame: FrameNo,
    /// The sender's re-send of those bytes.
    pub retransmission_frame: FrameNo,
    /// Bytes of the retracted space it carried that were not acknowledged
    /// before the re-send.
    pub bytes: u64,
}

/// The `evidence` object of a `window-retraction` finding; field order is
/// the JSON key order (see the crate README, section Evidence).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WindowRetractionEvidence {
    /// Role and address of the side whose window retracted (`"server 192.0.2.52:7001"`).
    pub receiver: String,
    /// Role and address of the side sending the data.
    pub sender: String,
    /// Bytes per unit of the receiver's window field (2^window-scale shift),
    /// `null` when every window seen was zero.
    pub window_scale_factor: Option<u64>,
    /// Retractions in this direction.
    pub count: u64,
    /// Largest retraction (bytes).
    pub max_retracted_bytes: u64,
    /// Retractions smaller than one window-scale unit (rounding).
    pub below_scale_unit_count: u64,
    /// Retractions onto a zero window.
    pub to_zero_window_count: u64,
    /// Bytes of retracted space the sender had already sent, summed over retractions.
    pub sent_into_retracted_bytes: u64,
    /// Segments sent into a retracted space and sent again (dropped).
    pub dropped_segments: u64,
    /// Bytes of those segments not acknowledged before the re-send.
    pub dropped_bytes: u64,
    /// The first [`crate::MAX_DROPS_LISTED`] dropped segments.
    pub dropped: Vec<DroppedSegment>,
    /// The first [`crate::MAX_LISTED`] retractions, in capture order.
    pub retractions: Vec<RetractionEvidence>,
}

/// One direction whose receive window retracted: plain data, rendered into
/// a finding by [`crate::render()`].
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnosis {
    /// Warning when data sent into a retracted space was dropped, else info.
    pub severity: Severity,
    /// The `tcp.stream`.
    pub stream: StreamId,
    /// The flow (client → server).
    pub flow: Option<FlowRef>,
    /// Direction of the retracting receiver's segments.
    pub receiver_dir: Direction,
    /// Every listed retraction and its previous segment, every listed dropped
    /// segment and its re-send (unsorted).
    pub frames: Vec<FrameNo>,
    /// Earliest cited frame, ns since the Unix epoch.
    pub start_ns: i64,
    /// Latest cited frame, ns since the Unix epoch.
    pub end_ns: i64,
    /// The evidence object.
    pub evidence: WindowRetractionEvidence,
}

impl WindowRetraction {
    /// One [`Diagnosis`] per (`tcp.stream`, receiver direction) that
    /// retracted by at least one window-scale unit or dropped data, in that
    /// order (see `reported`). Consumes the detector's state.
    pub fn diagnose(&mut self, ctx: &FinishContext) -> Vec<Diagnosis> {
        let mut all = std::mem::take(&mut self.ended);
        for (stream, st) in std::mem::take(&mut self.streams) {
            let Stream { dirs, .. } = *st;
            for (i, d) in dirs.into_iter().enumerate() {
                if reported(&d) {
                    all.push(((stream, i), d));
                }
            }
        }
        // (stream, direction) order; an ended stream's direction before the
        // live state of a stream that later reused its id (stable sort).
        all.sort_by_key(|(k, _)| *k);
        all.into_iter()
            .map(|(k, st)| diagnose_dir(ctx, k.0, dir_of(k.1), st))
            .collect()
    }
}

/// A direction is reported when one of its retractions is not explained by
/// rounding (at least one window-scale unit, or the unit unknown) or data
/// sent into a retracted space was dropped. Retractions smaller than one unit
/// alone are the arithmetic of window scaling (`window >> wscale` rounds
/// down; many stacks do it on every ACK: 1,282 connection directions of the
/// public corpus): listed in the evidence of a reported direction, never
/// reported on their own.
pub(crate) fn reported(st: &DirState) -> bool {
    st.rx
        .as_ref()
        .is_some_and(|rx| rx.count > rx.below_unit || rx.dropped_segments > 0)
}

fn dir_of(i: usize) -> Direction {
    if i == 0 {
        Direction::ClientToServer
    } else {
        Direction::ServerToClient
    }
}

fn diagnose_dir(ctx: &FinishContext, stream: StreamId, dir: Direction, d: DirState) -> Diagnosis {
    let factor = d.factor;
    let st = d.rx.map(|rx| *rx).unwrap_or_default();
    let mut frames: Vec<FrameNo> = st
        .listed
        .iter()
        .flat_map(|r| [r.prev_frame, r.frame])
        .collect();
    frames.extend(
        st.drops
            .iter()
            .flat_map(|d| [d.original_frame, d.retransmission_frame]),
    );
    let (start_ns, end_ns) = st.span.unwrap_or((0, 0));
    let evidence = WindowRetractionEvidence {
        receiver: peer(ctx, stream, dir),
        sender: peer(ctx, stream, dir.reverse()),
        window_scale_factor: factor,
        count: st.count,
        max_retracted_bytes: st.max_retracted,
        below_scale_unit_count: st.below_unit,
        to_zero_window_count: st.to_zero,
        sent_into_retracted_bytes: st.sent_into,
        dropped_segments: st.dropped_segments,
        dropped_bytes: st.dropped_bytes,
        dropped: st.drops,
        retractions: st.listed,
    };
    Diagnosis {
        severity: if evidence.dropped_segments > 0 {
            Severity::Warning
        } else {
            Severity::Info
        },
        stream,
        flow: ctx.flow_ref(stream),
        receiver_dir: dir,
        frames,
        start_ns,
        end_ns,
        evidence,
    }
}

/// `"client 192.0.2.51:47001"` / `"server [2001:db8::1]:80"`: the sender of
/// the segments travelling in `dir`; `?` for an unknown address.
fn peer(ctx: &FinishContext, stream: StreamId, dir: Direction) -> String {
    let client = dir == Direction::ClientToServer;
    let role = if client { "client" } else { "server" };
    let addr = ctx
        .streams
        .get(&stream)
        .map(|(c, s)| if client { c } else { s });
    match addr {
        Some(e) => match e.addr {
            IpAddr::V4(a) => format!("{role} {a}:{}", e.port),
            IpAddr::V6(a) => format!("{role} [{a}]:{}", e.port),
        },
        None => format!("{role} ?"),
    }
}
