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
pub use pcapsleuth_core::{Evidence, Finding, FlowRef, Severity};
pub use pcapsleuth_decode::Decoded;
pub use pcapsleuth_flow::{FlowEvent, FlowSummary, PacketFlowInfo, PacketMeta};
pub use peer::{Peer, Role};
pub use slots::StreamSlots;

use pcapsleuth_core::{Endpoint, InterfaceId, StreamId, Timestamp};

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

/// Client and server endpoints of every `tcp.stream`, indexed by stream id:
/// the ids are dense (assigned in first-seen order by the flow table), so
/// there is no hashing and no per-stream index. A stream costs a 12-byte
/// record and two bits: an IPv4 pair is the record itself, any other pair
/// (IPv6, or mixed) is a 40-byte entry elsewhere whose index the record
/// holds (a SYN scan of 2 million IPv4 streams: 24 MB).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamEndpoints {
    /// Per stream id: an IPv4 pair (client address, server address
    /// big-endian, client port, server port), or in its first four bytes
    /// (native order) the index into `other` when the `other` bit is set.
    records: Vec<([u8; 4], [u8; 4], u16, u16)>,
    /// Per stream id, 64 to a word: the record is set.
    known: Vec<u64>,
    /// Per stream id, 64 to a word: the record is an index into `other`.
    is_other: Vec<u64>,
    /// Every other pair (IPv6, or a mixed one).
    other: Vec<(Endpoint, Endpoint)>,
}

/// Bit `i` of a bitset.
fn bit(words: &[u64], i: usize) -> bool {
    words.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
}

/// Set bit `i` of a bitset to `on` (the set long enough).
fn set_bit(words: &mut [u64], i: usize, on: bool) {
    if let Some(w) = words.get_mut(i / 64) {
        if on {
            *w |= 1 << (i % 64);
        } else {
            *w &= !(1 << (i % 64));
        }
    }
}

impl StreamEndpoints {
    /// Client and server of `stream`, if recorded.
    pub fn get(&self, stream: &StreamId) -> Option<(Endpoint, Endpoint)> {
        let i = usize::try_from(stream.get()).ok()?;
        if !bit(&self.known, i) {
            return None;
        }
        let &(c, s, cp, sp) = self.records.get(i)?;
        if bit(&self.is_other, i) {
            return self.other.get(u32::from_ne_bytes(c) as usize).copied();
        }
        let ep = |a: [u8; 4], port| Endpoint {
            addr: std::net::IpAddr::V4(a.into()),
            port,
        };
        Some((ep(c, cp), ep(s, sp)))
    }

    /// Record (or replace) `stream`'s client and server. The table grows to
    /// the largest id recorded, so ids must be dense (the flow table's);
    /// ids past `u32::MAX` are ignored, and so are IPv6 or mixed pairs
    /// beyond 2^32.
    pub fn insert(&mut self, stream: StreamId, ends: (Endpoint, Endpoint)) {
        let Ok(idx) = usize::try_from(stream.get()) else {
            return;
        };
        if u32::try_from(idx).is_err() {
            return;
        }
        if self.records.len() <= idx {
            self.records.resize(idx + 1, ([0; 4], [0; 4], 0, 0));
            let words = idx / 64 + 1;
            self.known.resize(words, 0);
            self.is_other.resize(words, 0);
        }
        let was_other = bit(&self.is_other, idx) && bit(&self.known, idx);
        let Some(rec) = self.records.get_mut(idx) else {
            return;
        };
        let old_other = was_other.then(|| u32::from_ne_bytes(rec.0) as usize);
        match ends {
            (
                Endpoint {
                    addr: std::net::IpAddr::V4(c),
                    port: cp,
                },
                Endpoint {
                    addr: std::net::IpAddr::V4(s),
                    port: sp,
                },
            ) => {
                *rec = (c.octets(), s.octets(), cp, sp);
                set_bit(&mut self.is_other, idx, false);
            }
            _ => {
                // Replaced in place when the stream already had an entry.
                let at = match old_other {
                    Some(j) if j < self.other.len() => j,
                    _ => self.other.len(),
                };
                let Ok(at32) = u32::try_from(at) else {
                    return;
                };
                match self.other.get_mut(at) {
                    Some(r) => *r = ends,
                    None => self.other.push(ends),
                }
                *rec = (at32.to_ne_bytes(), [0; 4], 0, 0);
                set_bit(&mut self.is_other, idx, true);
            }
        }
        set_bit(&mut self.known, idx, true);
    }
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
    fn stream_endpoints_keep_every_family_and_replace() {
        let ep = |a: &str, port| Endpoint {
            addr: a.parse().unwrap(),
            port,
        };
        let v4 = (ep("192.0.2.10", 40000), ep("198.51.100.10", 80));
        let v6 = (ep("2001:db8::1", 40001), ep("2001:db8::2", 443));
        let mixed = (ep("192.0.2.10", 1), ep("2001:db8::2", 2));
        let mut t = StreamEndpoints::default();
        assert_eq!(t.get(&StreamId(0)), None);
        t.insert(StreamId(2), v4);
        t.insert(StreamId(0), v6);
        t.insert(StreamId(5), mixed);
        assert_eq!(t.get(&StreamId(2)), Some(v4));
        assert_eq!(t.get(&StreamId(0)), Some(v6));
        assert_eq!(t.get(&StreamId(5)), Some(mixed));
        assert_eq!(t.get(&StreamId(1)), None);
        assert_eq!(t.get(&StreamId(6)), None);
        // Replaced in place, in either family.
        let v4b = (ep("203.0.113.7", 9), ep("198.51.100.10", 80));
        t.insert(StreamId(2), v4b);
        t.insert(StreamId(0), mixed);
        assert_eq!(t.get(&StreamId(2)), Some(v4b));
        assert_eq!(t.get(&StreamId(0)), Some(mixed));
        assert_eq!(t.other.len(), 2);
        // A family change: an IPv6 pair takes a new entry, an IPv4 one none.
        t.insert(StreamId(0), v4b);
        assert_eq!(t.get(&StreamId(0)), Some(v4b));
        assert_eq!(t.other.len(), 2);
        t.insert(StreamId(2), v6);
        assert_eq!(t.get(&StreamId(2)), Some(v6));
        assert_eq!(t.get(&StreamId(0)), Some(v4b));
        assert_eq!(t.other.len(), 3);
        // An all-zero pair is a pair like any other; a gap is not recorded.
        let zero = (ep("0.0.0.0", 0), ep("0.0.0.0", 0));
        t.insert(StreamId(130), zero);
        assert_eq!(t.get(&StreamId(130)), Some(zero));
        assert_eq!(t.get(&StreamId(129)), None);
        assert_eq!(std::mem::size_of_val(&t.records[0]), 12);
        // Ids past u32::MAX are not recorded.
        t.insert(StreamId(u64::from(u32::MAX) + 1), v4);
        assert_eq!(t.get(&StreamId(u64::from(u32::MAX) + 1)), None);
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
