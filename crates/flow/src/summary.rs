//! Per-flow summary accumulation and Zeek's `conn_state`.

use crate::endpoint::ZeekState;
use crate::{ConnState, RetransmissionCounts, RttStats, SegmentAnalysis, Sighting};
use pcapsleuth_core::{FrameNo, Timestamp};

/// Zeek `conn_state` from the two endpoint states, after Zeek's
/// `conn_state()` in `base/protocols/conn/main.zeek`.
///
/// `orig_syn_only_then_rst` stands for Zeek's history test `^?S[^HAFGIQ]*R`
/// (originator sent SYN then RST, nothing else from either side); `sizes_zero`
/// for `orig$size == 0 && resp$size == 0` (no payload either way).
pub(crate) fn conn_state(
    os: ZeekState,
    rs: ZeekState,
    orig_syn_only_then_rst: bool,
    sizes_zero: bool,
) -> ConnState {
    use ZeekState::*;
    let o_inactive = matches!(os, Inactive | Partial);
    let r_inactive = matches!(rs, Inactive | Partial);
    if rs == Reset {
        if matches!(os, SynSent | SynAckSent) || (os == Reset && sizes_zero) {
            ConnState::REJ
        } else if o_inactive {
            ConnState::RSTRH
        } else {
            ConnState::RSTR
        }
    } else if os == Reset {
        if r_inactive {
            if orig_syn_only_then_rst {
                ConnState::RSTOS0
            } else {
                ConnState::OTH
            }
        } else {
            ConnState::RSTO
        }
    } else if rs == Closed && os == Closed {
        ConnState::SF
    } else if os == Closed {
        if r_inactive {
            ConnState::SH
        } else {
            ConnState::S2
        }
    } else if rs == Closed {
        if o_inactive {
            ConnState::SHR
        } else {
            ConnState::S3
        }
    } else if os == SynSent && rs == Inactive {
        ConnState::S0
    } else if os == Established && rs == Established {
        ConnState::S1
    } else {
        ConnState::OTH
    }
}

/// Zeek-style endpoint state transition for a segment sent by `s` to `p`
/// (simplified from Zeek's `TCP_Analyzer::UpdateStateMachine`).
pub(crate) fn zeek_transition(
    s: &mut ZeekState,
    p: &mut ZeekState,
    syn: bool,
    ack: bool,
    fin: bool,
    rst: bool,
) {
    use ZeekState::*;
    if rst {
        *s = Reset;
        return;
    }
    if *s == Reset {
        return;
    }
    if syn && !ack {
        if matches!(*s, Inactive | Partial) {
            *s = SynSent;
        }
    } else if syn {
        if matches!(*s, Inactive | Partial | SynSent) {
            *s = SynAckSent;
        }
        if *p == SynSent && *s == SynAckSent {
            *p = Established;
            *s = Established;
        }
    } else {
        match *s {
            Inactive => *s = Partial,
            SynSent | SynAckSent if matches!(*p, SynAckSent | SynSent | Established | Closed) => {
                *s = Established;
                if matches!(*p, SynAckSent | SynSent) {
                    *p = Established;
                }
            }
            _ => {}
        }
    }
    if fin && *s != Reset {
        *s = Closed;
    }
}

/// Running RTT statistics, ns.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RttAcc {
    pub min: i64,
    pub max: i64,
    pub sum: i128,
    pub n: u64,
}

impl RttAcc {
    pub(crate) fn add(&mut self, ns: i64) {
        if self.n == 0 || ns < self.min {
            self.min = ns;
        }
        if self.n == 0 || ns > self.max {
            self.max = ns;
        }
        self.sum += i128::from(ns);
        self.n += 1;
    }
    /// Fold in the samples of `other`.
    pub(crate) fn merge(&mut self, other: &RttAcc) {
        if other.n == 0 {
            return;
        }
        if self.n == 0 || other.min < self.min {
            self.min = other.min;
        }
        if self.n == 0 || other.max > self.max {
            self.max = other.max;
        }
        self.sum += other.sum;
        self.n += other.n;
    }
    pub(crate) fn stats(&self) -> Option<RttStats> {
        (self.n > 0).then(|| RttStats {
            min: ms(self.min),
            avg: ms((self.sum / i128::from(self.n)) as i64),
            max: ms(self.max),
        })
    }
}

/// Nanoseconds to milliseconds (f64, µs-rounded as `DurationNs::as_ms_f64`).
pub(crate) fn ms(ns: i64) -> f64 {
    pcapsleuth_core::DurationNs(ns).as_ms_f64()
}

/// Counters for one flow's summary row (kept for every stream, small).
#[derive(Debug, Clone, Default)]
pub(crate) struct SummaryAcc {
    pub packets: [u64; 2],
    pub bytes: u64,
    pub payload: [u64; 2],
    pub first_frame: FrameNo,
    pub last_frame: FrameNo,
    pub first_ts: Timestamp,
    pub last_ts: Timestamp,
    pub retrans: RetransmissionCounts,
    pub duplicate_sightings: u64,
    pub sightings: Vec<Sighting>,
    pub sightings_capped: bool,
    pub zero_window_ns: i64,
    pub zero_window_episodes: u64,
    pub handshake_rtt_ns: Option<i64>,
    pub rtt: RttAcc,
    pub longest_stall_ns: i64,
    pub longest_stall_frames: Option<[FrameNo; 2]>,
}

impl SummaryAcc {
    /// Count a verdict's retransmission kind.
    pub(crate) fn count_retrans(&mut self, a: &SegmentAnalysis) {
        if !a.retransmission && !a.fast_retransmission && !a.spurious_retransmission {
            return;
        }
        self.retrans.total += 1;
        if a.fast_retransmission {
            self.retrans.fast += 1;
        } else if a.spurious_retransmission {
            self.retrans.spurious += 1;
        } else {
            self.retrans.rto += 1;
        }
    }

    /// Record a duplicate sighting pair (first sighting + this one), capped at `cap`.
    pub(crate) fn add_sighting(&mut self, first: Sighting, this: Sighting, cap: usize) {
        self.duplicate_sightings += 1;
        for s in [first, this] {
            if self
                .sightings
                .iter()
                .rev()
                .take(8)
                .any(|x| x.frame == s.frame)
            {
                continue;
            }
            if self.sightings.len() >= cap {
                self.sightings_capped = true;
                return;
            }
            self.sightings.push(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ZeekState::*;

    /// Drive the state machine with (from_orig, flags) and return conn_state.
    fn run(segs: &[(bool, &str)]) -> ConnState {
        let (mut o, mut r) = (Inactive, Inactive);
        let mut orig_other = false;
        let mut orig_syn = false;
        let mut resp_any = false;
        for (from_orig, f) in segs {
            let syn = f.contains('S');
            let ack = f.contains('A');
            let fin = f.contains('F');
            let rst = f.contains('R');
            if *from_orig {
                zeek_transition(&mut o, &mut r, syn, ack, fin, rst);
                orig_syn |= syn && !ack;
                orig_other |= !syn && !rst;
            } else {
                zeek_transition(&mut r, &mut o, syn, ack, fin, rst);
                resp_any = true;
            }
        }
        conn_state(o, r, orig_syn && !orig_other && !resp_any, true)
    }

    #[test]
    fn conn_state_table() {
        use ConnState::*;
        let o = true;
        let r = false;
        let cases: &[(&[(bool, &str)], ConnState)] = &[
            (&[(o, "S")], S0),
            (&[(o, "S"), (o, "S")], S0),
            (&[(o, "S"), (r, "RA")], REJ),
            (&[(o, "S"), (r, "SA"), (o, "A")], S1),
            (
                &[
                    (o, "S"),
                    (r, "SA"),
                    (o, "A"),
                    (o, "FA"),
                    (r, "FA"),
                    (o, "A"),
                ],
                SF,
            ),
            (&[(o, "S"), (r, "SA"), (o, "A"), (o, "FA")], S2),
            (&[(o, "S"), (r, "SA"), (o, "A"), (r, "FA")], S3),
            (&[(o, "S"), (r, "SA"), (o, "A"), (o, "RA")], RSTO),
            (&[(o, "S"), (r, "SA"), (o, "A"), (r, "R")], RSTR),
            (&[(o, "S"), (o, "R")], RSTOS0),
            (&[(r, "SA"), (r, "R")], RSTRH),
            (&[(o, "S"), (o, "F")], SH),
            (&[(r, "SA"), (r, "FA")], SHR),
            (&[(o, "A"), (r, "A")], OTH),
            (&[(o, "PA")], OTH),
        ];
        for (segs, want) in cases {
            assert_eq!(run(segs), *want, "{segs:?}");
        }
    }

    #[test]
    fn rtt_acc() {
        let mut a = RttAcc::default();
        assert!(a.stats().is_none());
        a.add(1_000_000);
        a.add(3_000_000);
        let s = a.stats().unwrap();
        assert_eq!((s.min, s.avg, s.max), (1.0, 2.0, 3.0));
    }
}
