//! The closed vocabulary of stall causes and of the timers behind them.

use serde::Serialize;

/// Why one side of a TCP connection waited. Closed: every stall gets exactly
/// one of these; the rule that picks each is in the crate README (and in
/// `classify.rs`), with its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StallCause {
    /// A SYN or SYN/ACK was re-sent by its retransmission timer (RFC 6298
    /// §2.1 / RFC 9293 §3.8.1 initial RTO 1 s; Linux `tcp_retransmit_timer`
    /// for a request socket `inet_rtx_syn_ack`, `tcp_syn_linear_timeouts`).
    SynTimeout,
    /// Data re-sent by the retransmission timer (RFC 6298 §5.4–5.5 backoff;
    /// Linux `tcp_retransmit_timer`, `TCP_RTO_MIN` 200 ms).
    DataRto,
    /// The last segment re-sent by the tail-loss probe before the RTO
    /// (RFC 8985 §7; Linux `tcp_schedule_loss_probe`, `tcp_send_loss_probe`).
    TailLossProbe,
    /// The sender waited for its zero-window probe timer (Linux
    /// `tcp_probe_timer` → `tcp_write_wakeup`; RFC 9293 §3.8.6.1): behind a
    /// zero window, behind a window smaller than the segment (the probe then
    /// sends exactly the window), or after a frag-needed cut the segment
    /// (seed 000).
    Probe0,
    /// A small segment held by Nagle (RFC 896; Linux `tcp_nagle_check`) until
    /// the peer's delayed ACK (RFC 1122 §4.2.3.2; Linux `TCP_DELACK_MIN` 40 ms,
    /// 200 ms on other stacks) released it.
    NagleDelayedAck,
    /// The sender waited for the peer's delayed ACK with no Nagle hold visible
    /// (its window or congestion window needed the ACK).
    DelayedAck,
    /// The receiver advertised a zero window (RFC 9293 §3.8.6); the wait ended
    /// by a window update or an ACK, not by a probe.
    ReceiverZeroWindow,
    /// The receiver dropped data behind an open window (seed 003, Linux before
    /// 6.5 / `tcp_shrink_window=0`): retransmissions reached it (or were
    /// answered by a non-advancing ACK with an open window) and were not acknowledged.
    MissingZeroWindow,
    /// A path MTU problem: an ICMP frag-needed / Packet Too Big for the stalled
    /// bytes (RFC 1191, RFC 8201), or a black hole (RFC 2923 §2.1: large
    /// segments re-sent unacknowledged while the peer is heard, seed 004).
    PathMtu,
    /// The peer had acknowledged (or was sent) the request and took this long
    /// to answer: the remote application's time.
    PeerApplication,
    /// The answer was late on the host where the capture was taken: the
    /// local application's time.
    OwnApplication,
    /// The capture missed packets: the segment ending the wait acknowledges
    /// bytes the capture never saw (Wireshark `tcp.analysis.ack_lost_segment`).
    CaptureGap,
    /// Nothing the packets show explains the wait.
    Unknown,
}

impl StallCause {
    /// Every cause, in declaration order (the order of the roll-ups).
    pub const ALL: [StallCause; 13] = [
        StallCause::SynTimeout,
        StallCause::DataRto,
        StallCause::TailLossProbe,
        StallCause::Probe0,
        StallCause::NagleDelayedAck,
        StallCause::DelayedAck,
        StallCause::ReceiverZeroWindow,
        StallCause::MissingZeroWindow,
        StallCause::PathMtu,
        StallCause::PeerApplication,
        StallCause::OwnApplication,
        StallCause::CaptureGap,
        StallCause::Unknown,
    ];

    /// Index into [`StallCause::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether the cause is a TCP timer's (or the receiver's) doing, so the
    /// wait is bounded by the timer's cap: everything but application
    /// time, capture gaps, zero windows and `unknown`.
    pub fn is_timer_driven(self) -> bool {
        !matches!(
            self,
            StallCause::PeerApplication
                | StallCause::OwnApplication
                | StallCause::CaptureGap
                | StallCause::ReceiverZeroWindow
                | StallCause::Unknown
        )
    }

    /// Human label (singular), for summaries.
    pub fn label(self) -> &'static str {
        match self {
            StallCause::SynTimeout => "SYN retransmission timeout",
            StallCause::DataRto => "retransmission timeout",
            StallCause::TailLossProbe => "tail-loss probe",
            StallCause::Probe0 => "probe0 timer wait",
            StallCause::NagleDelayedAck => "Nagle × delayed ACK hold",
            StallCause::DelayedAck => "delayed ACK wait",
            StallCause::ReceiverZeroWindow => "receiver zero window",
            StallCause::MissingZeroWindow => "missing zero window",
            StallCause::PathMtu => "path MTU stall",
            StallCause::PeerApplication => "peer application wait",
            StallCause::OwnApplication => "own application wait",
            StallCause::CaptureGap => "capture gap",
            StallCause::Unknown => "unexplained stall",
        }
    }
}

/// A set of [`StallCause`]s (a bit per cause, by [`StallCause::index`]).
///
/// Says which streams keep their per-stream ledger in the report
/// ([`crate::LedgerConfig::keep_streams`]): a detector names the causes it
/// reads (`pcapsleuth_detect::Detector::ledger_causes`), and a run that lists
/// no flows keeps only those streams' ledgers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CauseSet(u16);

impl CauseSet {
    /// No cause.
    pub const EMPTY: CauseSet = CauseSet(0);
    /// Every cause.
    pub const ALL: CauseSet = CauseSet((1 << StallCause::ALL.len()) - 1);

    /// The set of exactly `causes`.
    pub const fn of(causes: &[StallCause]) -> CauseSet {
        let mut bits = 0u16;
        let mut i = 0;
        while i < causes.len() {
            bits |= 1 << (causes[i] as u16);
            i += 1;
        }
        CauseSet(bits)
    }

    /// Whether `cause` is in the set.
    pub fn contains(self, cause: StallCause) -> bool {
        self.0 & (1 << cause.index()) != 0
    }

    /// Every cause of `self` and of `other`.
    #[must_use]
    pub fn union(self, other: CauseSet) -> CauseSet {
        CauseSet(self.0 | other.0)
    }

    /// Whether the set has no cause.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl Default for CauseSet {
    /// [`CauseSet::ALL`]: keep everything unless told otherwise.
    fn default() -> Self {
        CauseSet::ALL
    }
}

/// The kernel timer whose expiry ended a wait, when one did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimerKind {
    /// SYN / SYN-ACK retransmission timer (initial RTO 1 s).
    SynRto,
    /// Data retransmission timer (`icsk_retransmit_timer`, ≥ `TCP_RTO_MIN`).
    Rto,
    /// Tail-loss probe timer (PTO ≈ 2·SRTT, + `TCP_RTO_MIN` with one segment out).
    Tlp,
    /// Zero-window probe timer (`ICSK_TIME_PROBE0`, RTO-based, doubling).
    Probe0,
    /// The peer's delayed-ACK timer (40 ms Linux, 200 ms others).
    DelayedAck,
}
