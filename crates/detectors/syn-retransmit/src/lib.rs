#![doc = include_str!("../README.md")]
//!
//! # Code layout
//! The detector collects one attempt per SYN (`on_flow_event`, `attempt.rs`);
//! at the end of the capture [`SynRetransmit::diagnose`] decides which were
//! delayed and why ([`Diagnosis`], plain data) and [`render::render`] writes
//! each one's summary and remedy into a [`Finding`].

mod attempt;
mod diagnose;
mod ladder;
pub mod render;

pub use diagnose::{
    Diagnosis, InfoReason, NatView, Outcome, ServiceShape, SynRetransmitEvidence, SynackTimes,
};
pub use ladder::{ladder_for, ladder_joined};

use attempt::{same_packet, Attempt, Tx};
use pcapsleuth_core::{Direction, Endpoint, StreamId};
use pcapsleuth_detect::{Detector, DetectorInfo, Finding, FinishContext, FlowEvent};
use pcapsleuth_flow::SegmentEvent;

/// Detector id.
pub const ID: &str = "syn-retransmit";

/// The `syn-retransmit` detector.
#[derive(Debug, Default)]
pub struct SynRetransmit {
    attempts: Vec<Attempt>,
    live: pcapsleuth_detect::StreamMap<StreamId, usize>,
    endpoints: pcapsleuth_detect::StreamMap<StreamId, (Endpoint, Endpoint)>,
    /// Earliest TCP segment time seen (ns): where the capture (of TCP) begins.
    first_ts: Option<i64>,
}

impl SynRetransmit {
    /// Fold one TCP segment into its stream's live attempt: a SYN starts an
    /// attempt (or is its retransmission or another sighting), a SYN/ACK, RST
    /// or handshake ACK answers it.
    fn on_segment(&mut self, s: &SegmentEvent) {
        let tx = Tx {
            frame: s.frame,
            ts: s.ts,
            ip_id: s.ip_id,
            interface: s.interface,
        };
        let live = self.live.get(&s.stream).copied();
        if s.flags.syn() && !s.flags.ack() {
            if let Some(a) = live.and_then(|i| self.attempts.get_mut(i)) {
                if a.isn == s.seq && a.syn_dir == s.dir {
                    let copy = a.syns.last().is_some_and(|p| same_packet(p, s));
                    if s.duplicate_of.is_some() || copy {
                        a.duplicates.push(s.frame);
                    } else if a.handshake_ack.is_none() && a.rst.is_none() && a.went_on.is_none() {
                        if a.syns.len() == 1 {
                            a.first_retx_wait_ns = s.since_first_tx_ns;
                        }
                        if !a.synacks.is_empty() {
                            a.syns_after_synack += 1;
                        }
                        a.syns.push(tx);
                    }
                    return;
                }
            }
            if s.duplicate_of.is_some() {
                return;
            }
            self.live.insert(s.stream, self.attempts.len());
            self.attempts.push(Attempt {
                stream: s.stream,
                syn_dir: s.dir,
                isn: s.seq,
                syns: vec![tx],
                first_retx_wait_ns: None,
                duplicates: Vec::new(),
                synack_isn: None,
                synacks: Vec::new(),
                synack_retransmits: 0,
                synack_retx_pre_ack: 0,
                rst: None,
                handshake_ack: None,
                acked_synack: None,
                went_on: None,
                syns_after_synack: 0,
                synack_isns: Vec::new(),
            });
            return;
        }
        let Some(a) = live.and_then(|i| self.attempts.get_mut(i)) else {
            return;
        };
        if s.duplicate_of.is_some() {
            if s.flags.syn() {
                a.duplicates.push(s.frame);
            }
            return;
        }
        let from_server = s.dir != a.syn_dir;
        if s.flags.syn() && s.flags.ack() && from_server {
            if a.handshake_ack.is_some() && a.synack_isn == Some(s.seq) {
                // SYN/ACK re-sent after the handshake completed (its timer raced the ACK).
                a.synack_retransmits += 1;
                a.synacks.push(tx);
                return;
            }
            match a.synack_isn {
                Some(isn) if isn == s.seq => {
                    let copy = a.synacks.last().is_some_and(|p| same_packet(p, s));
                    if copy {
                        a.duplicates.push(s.frame);
                        return;
                    }
                    a.synack_retransmits += 1;
                    a.synack_retx_pre_ack += 1;
                }
                _ => {
                    a.synack_isn = Some(s.seq);
                    a.synack_isns.push(s.seq);
                }
            }
            a.synacks.push(tx);
        } else if s.flags.rst() && from_server && a.synacks.is_empty() && a.rst.is_none() {
            a.rst = Some(tx);
        } else if s.flags.ack() && !s.flags.syn() && !from_server && a.handshake_ack.is_none() {
            match a.synack_isn {
                Some(_) => {
                    if a.synack_isns.iter().any(|isn| s.ack == isn.add(1)) {
                        a.handshake_ack = Some(tx);
                        a.acked_synack = a.synacks.last().copied();
                    }
                }
                None => {
                    if a.went_on.is_none() && a.rst.is_none() && !s.flags.rst() {
                        a.went_on = Some(tx);
                    }
                }
            }
        }
    }

    /// The (client, server) endpoints of attempt `a`, the client being the
    /// SYN's sender.
    fn server_of(&self, a: &Attempt, ctx: &FinishContext) -> Option<(Endpoint, Endpoint)> {
        let (c, s) = ctx
            .streams
            .get(&a.stream)
            .or_else(|| self.endpoints.get(&a.stream))
            .copied()?;
        Some(if a.syn_dir == Direction::ClientToServer {
            (c, s)
        } else {
            (s, c)
        })
    }
}

impl Detector for SynRetransmit {
    fn info(&self) -> DetectorInfo {
        DetectorInfo {
            id: ID,
            aliases: &[],
            title: "Connection setup delayed by SYN / SYN-ACK retransmission",
            explain: include_str!("../README.md"),
        }
    }

    fn on_flow_event(&mut self, event: &FlowEvent) {
        match event {
            FlowEvent::FlowStarted(f) => {
                self.endpoints.insert(f.stream, (f.client, f.server));
            }
            FlowEvent::Segment(s) => {
                self.first_ts = Some(self.first_ts.map_or(s.ts.0, |t| t.min(s.ts.0)));
                self.on_segment(s)
            }
            _ => {}
        }
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        self.diagnose(ctx).iter().map(render::render).collect()
    }
}

#[cfg(test)]
mod tests;
