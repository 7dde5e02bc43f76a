//! The [`Detector`] trait and what the pipeline hands a detector.
//!
//! A detector is a plain struct, one concern each, in its own crate under
//! `crates/detectors/`. For every packet the pipeline first delivers the
//! [`FlowEvent`]s the flow table produced for it (`on_flow_event`), then the
//! packet itself (`on_packet`). At the end of the capture `finish` returns the
//! findings. No I/O, no locks: one detector instance serves one capture.

pub mod bound;
pub mod fasthash;
pub mod followup;
pub mod ledger_frames;
pub mod peer;
pub mod quality;
pub mod retx;
pub mod slots;
#[cfg(any(test, feature = "test-support"))]
pub mod synth;
/// Timer tolerance (the Linux timer wheel), shared with the stall ledger; it lives in core.
pub use pcapsleuth_core::timer;
pub use pcapsleuth_ledger::{CauseSet, LedgerReport, StallEntry};

pub use bound::Bound;
pub use fasthash::{StreamMap, StreamSet};
pub use ledger_frames::LedgerFrames;
pub use pcapsleuth_core::{Evidence, Finding, FlowRef, Severity, StreamEndpoints};
pub use pcapsleuth_decode::Decoded;
pub use pcapsleuth_flow::{FlowEvent, FlowSummary, PacketFlowInfo, PacketMeta};
pub use peer::{Peer, Role};
pub use slots::StreamSlots;

use pcapsleuth_core::{InterfaceId, StreamId, Timestamp};

/// One decoded packet with its flow verdict.
#[derive(Debug, Clone, Copy)]
pub struct PacketContext<'a> {
    /// Frame number, timestamp, interface.
    pub meta: PacketMeta,
    /// Decoded layers.
    pub decoded: &'a Decoded<'a>,
    /// `tcp.stream` and direction, if TCP (or an ICMP error quoting TCP).
    pub flow: PacketFlowInfo,
}

/// One capture interface as the pipeline saw it: the pcapng Interface
/// Description Block (or the pcap file header) plus what the frames on it
/// showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceContext {
    /// Interface id as in [`PacketMeta::interface`] (pcapng IDB index across
    /// sections, 0 for pcap; in a merged set, the merged id).
    pub id: InterfaceId,
    /// pcapng `if_name`, when recorded.
    pub name: Option<String>,
    /// Link type number (`LINKTYPE_*`, see [`pcapsleuth_core::linktype`]).
    pub linktype: u32,
    /// Timestamp of the first frame seen on it, ns since the Unix epoch
    /// (`None` when no frame was captured on it).
    pub first_ts: Option<Timestamp>,
    /// Timestamp of the last frame seen on it, ns since the Unix epoch.
    pub last_ts: Option<Timestamp>,
    /// Frames seen on it.
    pub frames: u64,
    /// Packets the capture itself dropped on this interface: pcapng
    /// Interface Statistics Block `isb_ifdrop` + `isb_osdrop`
    /// (draft-ietf-opsawg-pcapng §4.6; the last ISB carrying each), when the
    /// file records either. `None` for legacy pcap and pcapng without ISB.
    pub if_drops: Option<u64>,
}

/// The time span of a capture, ns since the Unix epoch. `first`/`last` are
/// in file order (frame 1 and the last frame, as the report's `first_ts_ns`
/// and `last_ts_ns`); a multi-interface pcapng is not sorted by time, so
/// `earliest`/`latest` give the real extent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureSpan {
    /// Timestamp of frame 1, ns.
    pub first: Timestamp,
    /// Timestamp of the last frame, ns.
    pub last: Timestamp,
    /// Smallest timestamp of any frame, ns.
    pub earliest: Timestamp,
    /// Largest timestamp of any frame, ns.
    pub latest: Timestamp,
}

/// What a detector may consult when it writes its findings. Filled by the
/// pipeline (`pcapsleuth_analyze::Pipeline`) at the end of the capture.
#[derive(Debug, Default)]
pub struct FinishContext {
    /// Client and server endpoints of every `tcp.stream`.
    pub streams: StreamEndpoints,
    /// Every interface of the capture, in id order.
    pub interfaces: Vec<InterfaceContext>,
    /// First and last frame timestamps; `None` when the capture has no frame.
    pub span: Option<CaptureSpan>,
    /// What the capture itself lost, cut, doubled or reordered
    /// ([`quality::CaptureQuality`]): consult it before calling a loss or a
    /// silence a network fault ([`quality::CaptureQuality::capture_lost_bytes`],
    /// [`quality::CaptureQuality::one_sided`]).
    pub quality: quality::CaptureQuality,
    /// The capture's stall ledger, when the pipeline ran one: every wait of
    /// every TCP connection with its cause (data flows flow → ledger →
    /// detectors).
    pub ledger: Option<LedgerReport>,
}

impl FinishContext {
    /// The stall ledger's report, if the pipeline ran one.
    pub fn ledger(&self) -> Option<&LedgerReport> {
        self.ledger.as_ref()
    }

    /// The [`FlowRef`] (client → server) of a TCP stream, if known.
    pub fn flow_ref(&self, stream: StreamId) -> Option<FlowRef> {
        self.streams.get(&stream).map(|(c, s)| FlowRef {
            protocol: pcapsleuth_core::Protocol::Tcp,
            client: c.addr.to_string(),
            client_port: c.port,
            server: s.addr.to_string(),
            server_port: s.port,
        })
    }

    /// The interface with id `id`, if the capture described it.
    pub fn interface(&self, id: InterfaceId) -> Option<&InterfaceContext> {
        self.interfaces.iter().find(|i| i.id == id)
    }

    /// When the capture ended for something seen on `interface`: the last
    /// frame captured on that interface when known (a multi-interface capture
    /// may stop one interface early), else the latest frame of the capture.
    /// `None` without frames.
    pub fn capture_end(&self, interface: Option<InterfaceId>) -> Option<Timestamp> {
        interface
            .and_then(|i| self.interface(i))
            .and_then(|i| i.last_ts)
            .or_else(|| self.span.map(|s| s.latest))
    }

    /// Censoring at the capture's edge: how long (ns) after `last` — the
    /// last transmission of something still unanswered, whose timer of
    /// nominal `next_ns` would fire next — the capture (of `interface`, see
    /// [`Self::capture_end`]) ended, when it ended before that timer was
    /// surely due (the late edge of [`timer::timer_window`]). The condition
    /// is then open at the end of the capture: censored, not concluded.
    /// `None` when the timer was overdue (the capture saw it not fire) or the
    /// end is unknown.
    pub fn open_at_end(
        &self,
        interface: Option<InterfaceId>,
        last: Timestamp,
        next_ns: i64,
    ) -> Option<i64> {
        let end = self.capture_end(interface)?;
        let after = end.0.saturating_sub(last.0).max(0);
        (after < timer::timer_window(next_ns).1).then_some(after)
    }
}

/// Static facts about a detector, for `pcapsleuth explain` and the README.
#[derive(Debug, Clone, Copy)]
pub struct DetectorInfo {
    /// Stable id used in findings and on the command line (`"syn-retransmit"`).
    pub id: &'static str,
    /// Other ids accepted on the command line and by `explain` (e.g.
    /// `pmtu-blackhole` for `mss-blackhole`); findings always carry `id`.
    pub aliases: &'static [&'static str],
    /// One-line title.
    pub title: &'static str,
    /// What it looks for, why (seed incident), false positives, and what to do.
    pub explain: &'static str,
}

/// A pathology detector. One instance per capture.
pub trait Detector: Send {
    /// Static description.
    fn info(&self) -> DetectorInfo;
    /// Called for every flow event, in frame order, before the packet's `on_packet`.
    fn on_flow_event(&mut self, _event: &FlowEvent) {}
    /// Called for every packet after its flow events.
    fn on_packet(&mut self, _pkt: &PacketContext<'_>) {}
    /// The stall causes whose per-stream entries this detector reads from
    /// [`FinishContext::ledger`] (`LedgerReport::streams`). A run that lists
    /// no flows keeps the per-stream ledger only of streams that stalled with
    /// one of the causes its detectors name here (the roll-ups always count
    /// every stream). Default: none.
    fn ledger_causes(&self) -> CauseSet {
        CauseSet::EMPTY
    }
    /// The stall ledger concluded `stream` before the end of the capture:
    /// `entries` are its final entries, the same that
    /// [`FinishContext::ledger`] will list (empty when it keeps none). Called
    /// only on detectors whose [`Detector::ledger_causes`] is not empty,
    /// after the flow event that concluded it (so after this detector saw
    /// that event), possibly twice for one stream (retired by the ledger at
    /// its reset or close, then ended by the flow table); not called for
    /// streams concluded at the end of the capture. With it a detector that
    /// keeps something per event for the ledger's entries to name at the
    /// end ([`LedgerFrames`]) keeps only what they name. Default: nothing.
    fn on_ledger_concluded(&mut self, _stream: pcapsleuth_core::StreamId, _entries: &[StallEntry]) {
    }
    /// The capture-wide memory bounds this detector reached ([`Bound`]):
    /// the parts of the capture it did not examine. Asked once, before
    /// [`Detector::finish`]; each becomes a `detector_limit` warning of the
    /// report. Default: none (a detector whose state is all per stream,
    /// dropped at [`FlowEvent::FlowEnded`], has no such bound).
    fn limits(&self) -> Vec<Bound> {
        Vec::new()
    }
    /// End of capture: return findings (any order; the pipeline sorts them).
    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding>;
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    fn ctx(if0_last_ms: Option<i64>, latest_ms: i64) -> FinishContext {
        FinishContext {
            span: Some(CaptureSpan {
                first: Timestamp(0),
                last: Timestamp(latest_ms * MS),
                earliest: Timestamp(0),
                latest: Timestamp(latest_ms * MS),
            }),
            interfaces: vec![InterfaceContext {
                id: InterfaceId(0),
                name: None,
                linktype: 1,
                first_ts: Some(Timestamp(0)),
                last_ts: if0_last_ms.map(|t| Timestamp(t * MS)),
                frames: 1,
                if_drops: None,
            }],
            ..FinishContext::default()
        }
    }

    #[test]
    fn open_at_end_until_the_next_timer_is_surely_due() {
        let c = ctx(None, 5_000);
        // Last transmission at 4 s, next timer 2 s later: still open at 5 s.
        assert_eq!(
            c.open_at_end(None, Timestamp(4_000 * MS), 2_000 * MS),
            Some(1_000 * MS)
        );
        // Within the late slack of the timer window: still open.
        assert!(c
            .open_at_end(None, Timestamp(2_950 * MS), 2_000 * MS)
            .is_some());
        // Overdue: concluded.
        assert_eq!(c.open_at_end(None, Timestamp(1_000 * MS), 2_000 * MS), None);
        // The interface stopped early: its own end counts.
        let c = ctx(Some(4_100), 60_000);
        assert_eq!(
            c.capture_end(Some(InterfaceId(0))),
            Some(Timestamp(4_100 * MS))
        );
        assert_eq!(
            c.capture_end(Some(InterfaceId(7))),
            Some(Timestamp(60_000 * MS))
        );
        assert!(c
            .open_at_end(Some(InterfaceId(0)), Timestamp(4_000 * MS), 2_000 * MS)
            .is_some());
        assert!(c
            .open_at_end(None, Timestamp(4_000 * MS), 2_000 * MS)
            .is_none());
        // No frames: unknown, not censored.
        assert_eq!(
            FinishContext::default().open_at_end(None, Timestamp(0), MS),
            None
        );
    }
}
