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
use pcapsleuth_core::{Direction, Endpoint, FrameNo, InterfaceId, SeqNum, StreamId, Timestamp};
use pcapsleuth_detect::{Detector, DetectorInfo, Finding, FinishContext, FlowEvent};
use pcapsleuth_flow::SegmentEvent;
use std::collections::HashSet;
use std::net::IpAddr;

/// Detector id.
pub const ID: &str = "syn-retransmit";

/// The `syn-retransmit` detector.
///
/// Per `tcp.stream` it holds its live attempt: a SYN alone in a 24-byte
/// `Live::Syn` (a SYN scan's flows cost no more), a handshake completed on
/// the first SYN and SYN/ACK as a 72-byte `Done`, anything more as an
/// `Attempt` (a list of transmissions).
#[derive(Debug, Default)]
pub struct SynRetransmit {
    /// Attempts beyond one SYN (unordered: sorted by first SYN at the end).
    attempts: Vec<Attempt>,
    /// Handshakes completed at once (unordered; those a `Live::Done` no
    /// longer points to were expanded into `attempts` again).
    done: Vec<Done>,
    /// Per `tcp.stream` (dense ids): its live attempt.
    live: Vec<Live>,
    /// Earliest TCP segment time seen (ns): where the capture (of TCP) begins.
    first_ts: Option<i64>,
}

/// A stream's live attempt.
#[derive(Debug, Clone, Copy, Default)]
enum Live {
    /// None.
    #[default]
    None,
    /// An attempt of one SYN so far: a [`OneSyn`], its fields inline so
    /// the slot stays 24 bytes.
    Syn {
        ts: Timestamp,
        frame: u32,
        isn: u32,
        ip_id: u16,
        interface: u16,
        bits: u8,
    },
    /// An attempt at this index of `attempts`.
    At(u32),
    /// A handshake completed at once, at this index of `done`.
    Done(u32),
}

/// A handshake completed on the first SYN and the first SYN/ACK with no
/// other sighting, retry or RST: all its `Attempt` holds, in 72 bytes.
#[derive(Debug, Clone, Copy)]
struct Done {
    /// The SYN (and the attempt's ISN, direction).
    syn: OneSyn,
    /// The SYN/ACK (`isn`: its ISN).
    synack: OneSyn,
    /// The handshake ACK (`isn` unused).
    ack: OneSyn,
}

impl Done {
    /// The compact form of `a`, if it is a handshake completed at once
    /// whose transmissions fit.
    fn of(a: &Attempt) -> Option<Done> {
        let plain = a.first_retx_wait_ns.is_none()
            && a.duplicates.is_empty()
            && a.synack_retransmits == 0
            && a.synack_retx_pre_ack == 0
            && a.rst.is_none()
            && a.went_on.is_none()
            && a.syns_after_synack == 0;
        let ([syn], [synack], [isn], Some(ack), Some(acked)) = (
            a.syns.as_slice(),
            a.synacks.as_slice(),
            a.synack_isns.as_slice(),
            a.handshake_ack,
            a.acked_synack,
        ) else {
            return None;
        };
        if !plain || a.synack_isn != Some(*isn) || acked.frame != synack.frame {
            return None;
        }
        Some(Done {
            syn: OneSyn::of_tx(syn, a.isn.0, a.syn_dir)?,
            synack: OneSyn::of_tx(synack, isn.0, a.syn_dir.reverse())?,
            ack: OneSyn::of_tx(&ack, 0, a.syn_dir)?,
        })
    }

    /// The attempt of stream `stream` it is.
    fn attempt(&self, stream: StreamId) -> Attempt {
        let mut a = self.syn.attempt(stream);
        let synack = self.synack.tx();
        a.synack_isn = Some(SeqNum(self.synack.isn));
        push_one(&mut a.synack_isns, SeqNum(self.synack.isn));
        push_one(&mut a.synacks, synack);
        a.handshake_ack = Some(self.ack.tx());
        a.acked_synack = Some(synack);
        a
    }
}

impl Live {
    fn syn(o: OneSyn) -> Live {
        Live::Syn {
            ts: o.ts,
            frame: o.frame,
            isn: o.isn,
            ip_id: o.ip_id,
            interface: o.interface,
            bits: o.bits,
        }
    }

    fn one_syn(&self) -> Option<OneSyn> {
        match *self {
            Live::Syn {
                ts,
                frame,
                isn,
                ip_id,
                interface,
                bits,
            } => Some(OneSyn {
                ts,
                frame,
                isn,
                ip_id,
                interface,
                bits,
            }),
            _ => None,
        }
    }
}

/// An attempt of one SYN (frame below 2^32, interface below 2^16, IPv4 ID
/// of 16 bits or none): what an `Attempt` would hold, in 21 bytes.
#[derive(Debug, Clone, Copy)]
struct OneSyn {
    ts: Timestamp,
    frame: u32,
    isn: u32,
    ip_id: u16,
    interface: u16,
    /// [`ONE_SYN_S2C`], [`ONE_SYN_IP_ID`].
    bits: u8,
}

/// [`OneSyn`]: the SYN went server → client.
const ONE_SYN_S2C: u8 = 1;
/// [`OneSyn`]: the SYN carried an IPv4 ID.
const ONE_SYN_IP_ID: u8 = 2;

impl OneSyn {
    /// The compact form of a SYN that starts an attempt, if it fits.
    fn of(s: &SegmentEvent) -> Option<OneSyn> {
        let ip_id = match s.ip_id {
            Some(i) => Some(u16::try_from(i).ok()?),
            None => None,
        };
        Some(OneSyn {
            ts: s.ts,
            frame: u32::try_from(s.frame.get()).ok()?,
            isn: s.seq.0,
            ip_id: ip_id.unwrap_or(0),
            interface: u16::try_from(s.interface.get()).ok()?,
            bits: (u8::from(s.dir == Direction::ServerToClient) * ONE_SYN_S2C)
                | (u8::from(ip_id.is_some()) * ONE_SYN_IP_ID),
        })
    }

    /// The compact form of transmission `tx` in direction `dir` carrying
    /// sequence number `isn`, if it fits.
    fn of_tx(tx: &Tx, isn: u32, dir: Direction) -> Option<OneSyn> {
        let ip_id = match tx.ip_id {
            Some(i) => Some(u16::try_from(i).ok()?),
            None => None,
        };
        Some(OneSyn {
            ts: tx.ts,
            frame: u32::try_from(tx.frame.get()).ok()?,
            isn,
            ip_id: ip_id.unwrap_or(0),
            interface: u16::try_from(tx.interface.get()).ok()?,
            bits: (u8::from(dir == Direction::ServerToClient) * ONE_SYN_S2C)
                | (u8::from(ip_id.is_some()) * ONE_SYN_IP_ID),
        })
    }

    /// The transmission.
    fn tx(&self) -> Tx {
        Tx {
            frame: FrameNo(u64::from(self.frame)),
            ts: self.ts,
            ip_id: (self.bits & ONE_SYN_IP_ID != 0).then_some(u32::from(self.ip_id)),
            interface: InterfaceId(u32::from(self.interface)),
        }
    }

    fn dir(&self) -> Direction {
        if self.bits & ONE_SYN_S2C != 0 {
            Direction::ServerToClient
        } else {
            Direction::ClientToServer
        }
    }

    /// The attempt of stream `stream` this SYN is.
    fn attempt(&self, stream: StreamId) -> Attempt {
        Attempt::new(stream, self.dir(), SeqNum(self.isn), self.tx())
    }
}

impl SynRetransmit {
    /// Streams with an attempt (one SYN or more).
    pub fn live_streams(&self) -> usize {
        self.live
            .iter()
            .filter(|l| !matches!(l, Live::None))
            .count()
    }

    /// Heap bytes held: the per-stream table, the completed handshakes and
    /// the other attempts beyond one SYN (with their lists).
    pub fn state_bytes(&self) -> usize {
        self.live.capacity() * std::mem::size_of::<Live>()
            + self.done.capacity() * std::mem::size_of::<Done>()
            + self.attempts.capacity() * std::mem::size_of::<Attempt>()
            + self.attempts.iter().map(Attempt::heap_bytes).sum::<usize>()
    }

    /// The slot of `stream`, the table grown to hold it
    /// ([`pcapsleuth_core::dense::slot_mut`]: by a quarter at least).
    fn live_slot(&mut self, stream: StreamId) -> Option<&mut Live> {
        let i = usize::try_from(stream.get()).ok()?;
        pcapsleuth_core::dense::slot_mut(&mut self.live, i, || Live::None)
    }

    /// The index in `attempts` of `stream`'s live attempt, a one-SYN
    /// attempt moved there first.
    fn live_attempt(&mut self, stream: StreamId) -> Option<usize> {
        let next = u32::try_from(self.attempts.len()).ok()?;
        let done = match usize::try_from(stream.get())
            .ok()
            .and_then(|i| self.live.get(i))
        {
            Some(Live::Done(d)) => self.done.get(*d as usize).copied(),
            _ => None,
        };
        let slot = self.live_slot(stream)?;
        match *slot {
            Live::None => None,
            Live::At(i) => Some(i as usize),
            Live::Syn { .. } => {
                let o = slot.one_syn()?;
                *slot = Live::At(next);
                self.attempts.push(o.attempt(stream));
                Some(next as usize)
            }
            Live::Done(_) => {
                let a = done?.attempt(stream);
                *slot = Live::At(next);
                self.attempts.push(a);
                Some(next as usize)
            }
        }
    }

    /// Replace the attempt at index `i` (`stream`'s live one, its handshake
    /// just completed) by its compact form when it has one.
    fn compact(&mut self, stream: StreamId, i: usize) {
        let Some(d) = self.attempts.get(i).and_then(Done::of) else {
            return;
        };
        let Ok(at) = u32::try_from(self.done.len()) else {
            return;
        };
        self.attempts.swap_remove(i);
        // A burst of handshakes in flight at once (200,000 SYN/ACKs before
        // their ACKs) leaves the list mostly empty: give the room back.
        if self.attempts.capacity() > 1024 && self.attempts.len() < self.attempts.capacity() / 4 {
            self.attempts.shrink_to(self.attempts.capacity() / 2);
        }
        self.done.push(d);
        if let Some(slot) = self.live_slot(stream) {
            *slot = Live::Done(at);
        }
        // The attempt moved into index `i` (if its stream still points to it).
        let last = self.attempts.len();
        let Some(moved) = self.attempts.get(i).map(|a| a.stream) else {
            return;
        };
        if let (Some(slot), Ok(last), Ok(i)) =
            (self.live_slot(moved), u32::try_from(last), u32::try_from(i))
        {
            if matches!(*slot, Live::At(x) if x == last) {
                *slot = Live::At(i);
            }
        }
    }

    /// Start a new attempt of `s.stream` with SYN `s` (the stream's earlier
    /// attempt, if any, is already in `attempts`).
    fn start_attempt(&mut self, s: &SegmentEvent, tx: Tx) {
        let next = u32::try_from(self.attempts.len()).unwrap_or(u32::MAX);
        let one = OneSyn::of(s);
        let Some(slot) = self.live_slot(s.stream) else {
            return;
        };
        match one {
            Some(o) => *slot = Live::syn(o),
            None => {
                *slot = Live::At(next);
                self.attempts.push(Attempt::new(s.stream, s.dir, s.seq, tx));
            }
        }
    }

    /// Every attempt the end of the capture needs, in the order they began
    /// (first SYN's frame): those beyond one SYN, and the one-SYN attempts
    /// that can matter to them — another view (same ISN and server) of an
    /// answered or delayed one, or a failure of a delayed one's client.
    pub(crate) fn attempts_for(&self, ctx: &FinishContext) -> Vec<Attempt> {
        let mut keys: HashSet<(Endpoint, u32)> = HashSet::new();
        let mut clients: HashSet<IpAddr> = HashSet::new();
        for a in &self.attempts {
            let Some((c, srv)) = self.server_of(a, ctx) else {
                continue;
            };
            if a.answered() || a.delayed() {
                keys.insert((srv, a.isn.0));
            }
            if a.delayed() && !a.refused_at_once() {
                clients.insert(c.addr);
            }
        }
        let mut all = self.attempts.clone();
        for (i, l) in self.live.iter().enumerate() {
            let Some(d) = (match *l {
                Live::Done(d) => self.done.get(d as usize),
                _ => None,
            }) else {
                continue;
            };
            let a = d.attempt(StreamId(i as u64));
            // Answered, never delayed.
            if let Some((_, srv)) = self.server_of(&a, ctx) {
                keys.insert((srv, a.isn.0));
            }
            all.push(a);
        }
        if !keys.is_empty() || !clients.is_empty() {
            for (i, l) in self.live.iter().enumerate() {
                let Some(o) = l.one_syn() else {
                    continue;
                };
                let a = o.attempt(StreamId(i as u64));
                let Some((c, srv)) = self.server_of(&a, ctx) else {
                    continue;
                };
                if keys.contains(&(srv, o.isn)) || clients.contains(&c.addr) {
                    all.push(a);
                }
            }
        }
        all.sort_by_key(|a| a.syns.first().map(|t| t.frame));
        all
    }

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
        // A completed handshake changes only with a SYN or SYN/ACK (a
        // retransmission or another sighting): expanded for those alone.
        let done = usize::try_from(s.stream.get())
            .ok()
            .and_then(|i| self.live.get(i))
            .is_some_and(|l| matches!(l, Live::Done(_)));
        if done && !s.flags.syn() {
            return;
        }
        let live = self.live_attempt(s.stream);
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
            self.start_attempt(s, tx);
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
                push_one(&mut a.synacks, tx);
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
                    push_one(&mut a.synack_isns, s.seq);
                }
            }
            push_one(&mut a.synacks, tx);
        } else if s.flags.rst() && from_server && a.synacks.is_empty() && a.rst.is_none() {
            a.rst = Some(tx);
        } else if s.flags.ack() && !s.flags.syn() && !from_server && a.handshake_ack.is_none() {
            match a.synack_isn {
                Some(_) => {
                    if a.synack_isns.iter().any(|isn| s.ack == isn.add(1)) {
                        a.handshake_ack = Some(tx);
                        a.acked_synack = a.synacks.last().copied();
                        if let Some(i) = live {
                            self.compact(s.stream, i);
                        }
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
        let (c, s) = ctx.streams.get(&a.stream)?;
        Some(if a.syn_dir == Direction::ClientToServer {
            (c, s)
        } else {
            (s, c)
        })
    }
}

/// Push `x`, the list's first element taking room for one only (most
/// attempts see one SYN/ACK; a Vec's first growth makes room for four).
fn push_one<T>(v: &mut Vec<T>, x: T) {
    if v.capacity() == 0 {
        v.reserve_exact(1);
    }
    v.push(x);
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
            FlowEvent::Segment(s) => {
                self.first_ts = Some(self.first_ts.map_or(s.ts.0, |t| t.min(s.ts.0)));
                self.on_segment(s)
            }
            // Nothing to drop: a stream's only state is its attempt (24
            // bytes for one SYN), which the end of the capture needs; and a
            // SYN re-sent with the same ISN after the flow table retired the
            // stream (a reset, then 13 s: suricata-verify
            // `tls-subjectaltname`) is still that attempt's retry.
            FlowEvent::FlowEnded(_) => {}
            _ => {}
        }
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        self.diagnose(ctx).iter().map(render::render).collect()
    }
}

#[cfg(test)]
mod tests;
