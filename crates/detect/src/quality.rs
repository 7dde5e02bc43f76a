//! Capture quality: what the capture itself lost, cut, doubled or reordered,
//! judged before any diagnosis (issue 11 item 3).
//!
//! The pipeline (`pcapsleuth_analyze::quality`) computes a
//! [`CaptureQuality`] from the frames and the flow events and hands it to
//! every detector in [`crate::FinishContext::quality`], so a detector can tell
//! the capture's own loss from the network's: bytes that the receiver
//! acknowledged but that no frame carried were lost **by the capture**
//! (Wireshark's `tcp.analysis.ack_lost_segment`, "ACKed segment that wasn't
//! captured"), while a gap in the sequence space that a retransmission later
//! fills was lost **by the network** before the capture point (Wireshark's
//! `tcp.analysis.lost_segment` followed by `tcp.analysis.retransmission`; a
//! reordered segment fills a gap the same way). The report shows the same
//! facts as `capture_quality` on every capture.
//!
//! The verdict is the worst of the [`QualityReason`]s' verdicts; the rules
//! (thresholds and their sources) are on [`QualityReason::verdict`].

use pcapsleuth_core::{Direction, InterfaceId, StreamId};

/// How far the capture can be trusted, best first (ordered: the capture's
/// verdict is the maximum over its reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum QualityVerdict {
    /// Nothing found that would make a diagnosis doubtful.
    #[default]
    Trustworthy,
    /// The capture lost, cut or doubled something: findings hold, but a
    /// finding about loss, timing or a missing direction may be the
    /// capture's doing (the reasons say which).
    UseWithCare,
    /// The capture lost or cut so much that loss and timing findings are
    /// more likely the capture's than the network's.
    NotTrustworthy,
}

impl QualityVerdict {
    /// `"trustworthy"`, `"use_with_care"`, `"not_trustworthy"` (as in JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            QualityVerdict::Trustworthy => "trustworthy",
            QualityVerdict::UseWithCare => "use_with_care",
            QualityVerdict::NotTrustworthy => "not_trustworthy",
        }
    }
}

/// Share (per mille) of lost, dropped or cut units above which a capture is
/// [`QualityVerdict::NotTrustworthy`]: 1 %. Loss of 1 % already drives a
/// Reno/CUBIC sender into recovery several times per hundred segments
/// (RFC 5681 §3.2), so a capture missing that share cannot tell its own
/// gaps from the network's.
pub const NOT_TRUSTWORTHY_PER_MILLE: u64 = 10;

/// Share (per mille) of frames whose headers snaplen hid above which the
/// capture is [`QualityVerdict::NotTrustworthy`]: 10 %. Below it the
/// flows with hidden headers are few; above it whole flows go unanalysed.
pub const HEADERS_NOT_TRUSTWORTHY_PER_MILLE: u64 = 100;

/// Largest step back in time on one interface that is not a reason, ns:
/// 1 ms. Kernels timestamp packets per CPU or per queue, so a capture
/// written in arrival order steps back by microseconds now and then (the
/// lab captures do, by up to 78 µs); detector timer tolerances are
/// milliseconds ([`crate::timer`]), which such steps do not reach.
pub const BACKWARDS_TOLERANCE_NS: i64 = 1_000_000;

/// One reason a capture is not [`QualityVerdict::Trustworthy`], with its
/// counts. Payload-only snaplen truncation is not a reason: every detector
/// reads headers only and takes lengths from the IP header, so the cut
/// changes no diagnosis (it stays a fact in [`CaptureQuality`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QualityReason {
    /// The capturing interface or the OS dropped packets (pcapng Interface
    /// Statistics Block `isb_ifdrop` + `isb_osdrop`).
    InterfaceDrops {
        /// Interface id.
        interface: InterfaceId,
        /// Packets dropped (`isb_ifdrop` + `isb_osdrop`).
        dropped: u64,
        /// Frames captured on it.
        captured: u64,
    },
    /// Bytes the receiver acknowledged that no captured frame carried.
    CaptureLoss {
        /// Flows (`tcp.stream`s) with such bytes.
        flows: u64,
        /// Bytes acknowledged but never captured.
        bytes: u64,
        /// TCP payload bytes the capture did see (all flows, first
        /// transmissions and retransmissions alike).
        captured_bytes: u64,
    },
    /// snaplen cut frames inside their IP, tunnel or transport headers.
    HeadersTruncated {
        /// Frames whose headers were cut.
        frames: u64,
        /// All frames.
        of_frames: u64,
    },
    /// snaplen cut DNS messages (UDP, port 53) before the end of their
    /// first question: the DNS detectors (`dns-timeout`, the DNS answers of
    /// `dual-stack-latency`) cannot read them, so their lookups are not
    /// examined at all. `tcpdump -s 96` on IPv6 under `-i any` does it to
    /// any name longer than a few bytes.
    DnsTruncated {
        /// DNS messages cut before the end of their first question.
        frames: u64,
        /// All DNS messages.
        of_frames: u64,
    },
    /// snaplen cut ICMP/ICMPv6 errors (frag-needed, Packet Too Big,
    /// unreachable, time exceeded) inside the packet they quote, before its
    /// ports: the detectors cannot tell which flow an error is about
    /// (`frag-needed`, `mss-blackhole`). `tcpdump -s 96` on IPv6 does it to
    /// every Packet Too Big (14 + 40 + 8 bytes leave 34 of the quote).
    IcmpQuoteTruncated {
        /// ICMP errors whose quote was cut before its ports.
        frames: u64,
        /// All ICMP errors.
        of_frames: u64,
    },
    /// TCP flows of which only one direction was captured although the
    /// captured side acknowledges the other's bytes (asymmetric routing, a
    /// one-way filter or a mirror port that sees one direction).
    OneSidedFlows {
        /// Such flows.
        flows: u64,
        /// All TCP flows.
        of_flows: u64,
    },
    /// Timestamps going backwards on one interface (in file order), by more
    /// than [`BACKWARDS_TOLERANCE_NS`] at least once.
    TimestampsBackwards {
        /// Interface id.
        interface: InterfaceId,
        /// Frames older than the frame before them on the same interface.
        frames: u64,
        /// Largest step back, ns.
        max_back_ns: i64,
    },
    /// The same packet captured twice at the same place: the same interface,
    /// and in a Linux `-i any` capture the same kernel interface index and
    /// direction, with the same link-layer source address (a routed packet
    /// captured on both sides of the router is two places): a mirror port
    /// copying both directions of a switch, a doubled capture path;
    /// recognised, so never counted as a retransmission, but packet counts
    /// are inflated.
    SameInterfaceDuplicates {
        /// Frames that are another sighting on the same interface.
        frames: u64,
    },
    /// Reading stopped before the end of the file (a record cut short or
    /// malformed: the report's `incomplete`, or a read `error`); what
    /// followed was not analysed.
    ReadIncomplete {
        /// Frames read before the stop.
        frames: u64,
    },
}

impl QualityReason {
    /// What this reason alone makes of the capture:
    /// - `InterfaceDrops`: not trustworthy when the drops are at least
    ///   [`NOT_TRUSTWORTHY_PER_MILLE`] of the packets offered (captured +
    ///   dropped), else use with care;
    /// - `CaptureLoss`: not trustworthy when the bytes lost by the capture
    ///   are at least [`NOT_TRUSTWORTHY_PER_MILLE`] of those it saw plus
    ///   those it lost, else use with care;
    /// - `HeadersTruncated`: not trustworthy at
    ///   [`HEADERS_NOT_TRUSTWORTHY_PER_MILLE`] of the frames, else use with care;
    /// - every other reason: use with care.
    pub fn verdict(&self) -> QualityVerdict {
        let share = |part: u64, whole: u64, per_mille: u64| {
            whole > 0 && u128::from(part) * 1000 >= u128::from(whole) * u128::from(per_mille)
        };
        let bad = match *self {
            QualityReason::InterfaceDrops {
                dropped, captured, ..
            } => share(
                dropped,
                dropped.saturating_add(captured),
                NOT_TRUSTWORTHY_PER_MILLE,
            ),
            QualityReason::CaptureLoss {
                bytes,
                captured_bytes,
                ..
            } => share(
                bytes,
                bytes.saturating_add(captured_bytes),
                NOT_TRUSTWORTHY_PER_MILLE,
            ),
            QualityReason::HeadersTruncated { frames, of_frames } => {
                share(frames, of_frames, HEADERS_NOT_TRUSTWORTHY_PER_MILLE)
            }
            _ => false,
        };
        if bad {
            QualityVerdict::NotTrustworthy
        } else {
            QualityVerdict::UseWithCare
        }
    }
}

/// Capture quality of one TCP flow; only flows with something to say are
/// listed in [`CaptureQuality::flows`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowQuality {
    /// `tcp.stream`.
    pub stream: StreamId,
    /// Bytes the peer acknowledged that no captured frame carried (capture
    /// loss), both directions.
    pub capture_lost_bytes: u64,
    /// ACKs that revealed such bytes (each covering some for the first time).
    pub capture_loss_acks: u64,
    /// First frame of such an ACK.
    pub first_capture_loss_frame: Option<u64>,
    /// Bytes of sequence gaps a later segment filled: lost before the
    /// capture point and retransmitted (network loss), or reordered before
    /// it; both directions.
    pub gap_bytes_filled_late: u64,
    /// The only direction captured, when the flow is one-sided (see
    /// [`QualityReason::OneSidedFlows`]).
    pub one_sided: Option<Direction>,
    /// Frames that were another sighting on the same interface.
    pub duplicates_same_interface: u64,
    /// Frames that were another sighting on another interface.
    pub duplicates_other_interface: u64,
    /// Frames of this flow cut by snaplen in their payload only (frames cut
    /// inside a header yield no TCP segment, so they count per capture only).
    pub payload_truncated_frames: u64,
}

impl FlowQuality {
    /// Whether the flow has anything to report.
    pub fn is_clean(&self) -> bool {
        *self
            == FlowQuality {
                stream: self.stream,
                ..FlowQuality::default()
            }
    }
}

/// Capture quality of one interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InterfaceQuality {
    /// Interface id.
    pub id: InterfaceId,
    /// Frames captured on it.
    pub frames: u64,
    /// pcapng ISB `isb_ifdrop`, when recorded.
    pub if_drop: Option<u64>,
    /// pcapng ISB `isb_osdrop`, when recorded.
    pub os_drop: Option<u64>,
    /// pcapng ISB `isb_ifrecv`, when recorded.
    pub if_recv: Option<u64>,
    /// pcapng ISB `isb_starttime`, ns since the Unix epoch.
    pub stats_start_ns: Option<i64>,
    /// pcapng ISB `isb_endtime`, ns since the Unix epoch.
    pub stats_end_ns: Option<i64>,
    /// Frames older than the previous frame on this interface.
    pub backwards_frames: u64,
    /// Largest such step back, ns (0 when none).
    pub max_backwards_ns: i64,
}

impl InterfaceQuality {
    /// `isb_ifdrop` + `isb_osdrop` when either is recorded.
    pub fn dropped(&self) -> Option<u64> {
        match (self.if_drop, self.os_drop) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        }
    }
}

/// Capture quality of a whole capture (or merged set).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CaptureQuality {
    /// The worst verdict of [`CaptureQuality::reasons`] (trustworthy without).
    pub verdict: QualityVerdict,
    /// Why the capture is not trustworthy, worst first, then in the order
    /// of the [`QualityReason`] variants.
    pub reasons: Vec<QualityReason>,
    /// Frames analysed.
    pub frames: u64,
    /// Frames that were another sighting on the same interface.
    pub duplicates_same_interface: u64,
    /// Frames that were another sighting on another interface (expected
    /// with several capture points; recognised, not a reason).
    pub duplicates_other_interface: u64,
    /// Bytes acknowledged but never captured, all flows.
    pub capture_lost_bytes: u64,
    /// Flows with such bytes.
    pub capture_loss_flows: u64,
    /// Sequence-gap bytes a later segment filled (network loss or
    /// reordering before the capture point), all flows.
    pub gap_bytes_filled_late: u64,
    /// TCP payload bytes captured (not counting duplicate sightings).
    pub captured_payload_bytes: u64,
    /// Frames cut by snaplen (caplen < len) in their payload only.
    pub payload_truncated_frames: u64,
    /// Frames cut by snaplen inside a header.
    pub header_truncated_frames: u64,
    /// UDP datagrams to or from port 53 (DNS messages), duplicate
    /// sightings included.
    pub dns_frames: u64,
    /// Of those, datagrams that snaplen cut before the end of their first
    /// question (header and question are what the DNS detectors read).
    pub dns_truncated_frames: u64,
    /// ICMP/ICMPv6 errors (which quote a packet).
    pub icmp_errors: u64,
    /// Of those, errors in frames snaplen cut whose quote lacks the quoted
    /// IP header or, for TCP and UDP, the ports.
    pub icmp_quote_truncated: u64,
    /// One-sided TCP flows.
    pub one_sided_flows: u64,
    /// TCP flows.
    pub tcp_flows: u64,
    /// Frames older than the previous frame in the file that was captured on
    /// another interface (interfaces written unsorted; not a reason).
    pub backwards_across_interfaces: u64,
    /// Largest such step back, ns.
    pub max_backwards_across_ns: i64,
    /// Per interface, in id order.
    pub interfaces: Vec<InterfaceQuality>,
    /// Per flow with something to report, in `tcp.stream` order.
    pub flows: Vec<FlowQuality>,
}

impl CaptureQuality {
    /// Set [`CaptureQuality::verdict`] and sort the reasons, worst first.
    pub fn conclude(&mut self) {
        self.reasons.sort_by_key(|r| std::cmp::Reverse(r.verdict()));
        self.verdict = self
            .reasons
            .iter()
            .map(QualityReason::verdict)
            .max()
            .unwrap_or_default();
    }

    /// The quality of `tcp.stream` `stream`, when it has something to report.
    pub fn flow(&self, stream: StreamId) -> Option<&FlowQuality> {
        self.flows
            .binary_search_by_key(&stream, |f| f.stream)
            .ok()
            .and_then(|i| self.flows.get(i))
    }

    /// Bytes of `stream` the peer acknowledged that the capture never saw
    /// (0 when none): a detector that would call a silence or a missing
    /// segment of this flow a network fault should consult it.
    pub fn capture_lost_bytes(&self, stream: StreamId) -> u64 {
        self.flow(stream).map_or(0, |f| f.capture_lost_bytes)
    }

    /// The only captured direction of `stream`, when it is one-sided.
    pub fn one_sided(&self, stream: StreamId) -> Option<Direction> {
        self.flow(stream).and_then(|f| f.one_sided)
    }
}
