//! Per-group aggregates: what a finding needs of its ICMP messages, folded
//! as they arrive, so memory does not grow with the number of messages
//! (issue 11: a frag-needed flood must be linear in time, bounded in memory).

use crate::{Icmp, FRAMES_CITED_HEAD, FRAMES_CITED_TAIL};
use pcapsleuth_core::FrameNo;
use std::collections::BTreeSet;

/// The frames of one finding: the lowest [`FRAMES_CITED_HEAD`] and the
/// highest [`FRAMES_CITED_TAIL`] (exact, whatever the arrival order) and how
/// many distinct frames there are in all.
#[derive(Debug, Clone, Default)]
pub(crate) struct FrameSample {
    /// The lowest frames, ascending, at most [`FRAMES_CITED_HEAD`].
    head: Vec<FrameNo>,
    /// Once `head` has dropped a frame: the highest frames, ascending, at
    /// most [`FRAMES_CITED_TAIL`] (until then `head` holds every frame).
    tail: Vec<FrameNo>,
    /// `head` has dropped a frame.
    sampled: bool,
    /// ICMP frames added (each ICMP message is its own frame).
    icmp_frames: usize,
    /// Distinct captured TCP segments (quoted segments, the sender's next
    /// segment): one entry per distinct segment, however many ICMPs quote it.
    segments: BTreeSet<FrameNo>,
}

impl FrameSample {
    /// Add the frame of one ICMP message (distinct from every other frame).
    pub fn add_icmp(&mut self, f: FrameNo) {
        self.icmp_frames += 1;
        self.keep(f);
    }

    /// Add the frame of a captured TCP segment (counted once however often).
    pub fn add_segment(&mut self, f: FrameNo) {
        if self.segments.insert(f) {
            self.keep(f);
        }
    }

    /// Keep `f` if it is among the lowest or highest so far (frames arrive
    /// mostly ascending: O(log n) for the head, O(tail) for the tail).
    fn keep(&mut self, f: FrameNo) {
        if let Err(at) = self.head.binary_search(&f) {
            if at < FRAMES_CITED_HEAD || !self.sampled {
                self.head.insert(at, f);
            }
            if !self.sampled && self.head.len() > FRAMES_CITED_HEAD {
                // head held every frame: its highest are the tail
                let from = self.head.len().saturating_sub(FRAMES_CITED_TAIL);
                self.tail = self.head.get(from..).unwrap_or_default().to_vec();
                self.sampled = true;
            }
            self.head.truncate(FRAMES_CITED_HEAD);
        }
        if !self.sampled {
            return;
        }
        if let Err(at) = self.tail.binary_search(&f) {
            if self.tail.len() < FRAMES_CITED_TAIL {
                self.tail.insert(at, f);
            } else if at > 0 {
                self.tail.insert(at, f);
                self.tail.remove(0);
            }
        }
    }

    /// Distinct frames added.
    pub fn total(&self) -> usize {
        self.icmp_frames + self.segments.len()
    }

    /// The cited frames, ascending: all of them when there are at most
    /// `FRAMES_CITED_HEAD + FRAMES_CITED_TAIL`, else the first
    /// [`FRAMES_CITED_HEAD`] and the last [`FRAMES_CITED_TAIL`].
    pub fn cited(&self) -> Vec<FrameNo> {
        let mut all: Vec<FrameNo> = self.head.iter().chain(&self.tail).copied().collect();
        all.sort_unstable();
        all.dedup();
        all
    }
}

/// One group of ICMP messages (or one burst), folded.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    /// The earliest message by (timestamp, frame).
    pub first: Icmp,
    /// Messages folded.
    pub count: usize,
    /// Any message self-addressed.
    pub self_addressed: bool,
    /// Largest quoted IP datagram length, bytes.
    pub quoted_size: u32,
    /// Earliest and latest message timestamps, ns since the Unix epoch.
    pub start_ns: i64,
    /// See `start_ns`.
    pub end_ns: i64,
    /// ICMP frames and the quoted segments matched in the capture.
    pub frames: FrameSample,
}

impl Group {
    /// A group of one message.
    pub fn new(i: &Icmp) -> Group {
        let mut g = Group {
            first: i.clone(),
            count: 0,
            self_addressed: false,
            quoted_size: 0,
            start_ns: i.ts.0,
            end_ns: i.ts.0,
            frames: FrameSample::default(),
        };
        g.add(i);
        g
    }

    /// Whether `i` would be the group's new first message.
    pub fn precedes_first(&self, i: &Icmp) -> bool {
        (i.ts, i.frame) < (self.first.ts, self.first.frame)
    }

    /// Fold one message in (the caller replaces `first` when
    /// [`Group::precedes_first`] held).
    pub fn add(&mut self, i: &Icmp) {
        self.count += 1;
        self.self_addressed |= i.self_addressed();
        self.quoted_size = self.quoted_size.max(i.quoted_ip_len);
        self.start_ns = self.start_ns.min(i.ts.0);
        self.end_ns = self.end_ns.max(i.ts.0);
        self.frames.add_icmp(i.frame);
        if let Some(m) = i.matched_frame {
            self.frames.add_segment(m);
        }
    }

    /// The group of `list` (non-empty).
    pub fn of(list: &[&Icmp]) -> Option<Group> {
        let (head, rest) = list.split_first()?;
        let mut g = Group::new(head);
        for i in rest {
            if g.precedes_first(i) {
                g.first = (*i).clone();
            }
            g.add(i);
        }
        Some(g)
    }
}
