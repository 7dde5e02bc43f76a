//! "What did the sender do next with these bytes?"
//!
//! Several detectors need the first segment, *by timestamp*, that carries a
//! given sequence offset after some trigger (an ICMP frag-needed, a zero
//! window): `frag-needed` reports how fast the sender reacted, `probe-timer-stall`
//! reports the ≈200 ms it waited. Frames of multi-interface pcapng files are not
//! in timestamp order (dumpcap writes each interface's buffer as it drains it,
//! `../shared/lab/README.md`), so the answer may sit a few frames *before* the
//! trigger in file order. [`FollowUp`] keeps a short capture-wide history of
//! recent data segments (fixed memory, however many flows) and a list of open watches, and resolves each watch to the
//! earliest-timestamped segment after the trigger time whose payload covers the
//! watched offset (or starts at it).

use pcapsleuth_core::{Direction, FrameNo, StreamId, Timestamp};
use pcapsleuth_flow::SegmentEvent;
use std::collections::VecDeque;

/// Most recent data segments (all flows) remembered for looking back: dumpcap
/// interleaves interfaces by buffer drains, a few hundred packets at most.
pub const HISTORY: usize = 4096;
/// Open watches kept at most; the oldest is closed (as it stands) beyond this.
pub const MAX_OPEN_WATCHES: usize = 65_536;
/// A resolved watch stops looking for an earlier-timestamped candidate once
/// segments 2 s (ns) later than its candidate arrive.
pub const REORDER_HORIZON_NS: i64 = 2_000_000_000;

/// One data segment as remembered for follow-up matching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegRec {
    /// Frame number.
    pub frame: FrameNo,
    /// Capture time.
    pub ts: Timestamp,
    /// Relative sequence of its first byte (bytes).
    pub rel_seq: i64,
    /// Payload length in bytes.
    pub payload_len: u32,
    /// IP datagram length in bytes.
    pub ip_len: u32,
    /// Our verdict: a retransmission.
    pub retransmission: bool,
    /// For a retransmission: time since the first transmission of these bytes (ns).
    pub since_first_tx_ns: Option<i64>,
}

impl SegRec {
    /// Build from a segment event.
    pub fn from_event(s: &SegmentEvent) -> SegRec {
        SegRec {
            frame: s.frame,
            ts: s.ts,
            rel_seq: s.rel_seq,
            payload_len: s.payload_len,
            ip_len: s.ip_len,
            retransmission: s.analysis.retransmission,
            since_first_tx_ns: s.since_first_tx_ns,
        }
    }
    /// Whether this segment carries byte `offset` or starts exactly at it.
    pub fn covers(&self, offset: i64) -> bool {
        self.rel_seq == offset
            || (self.rel_seq <= offset && offset < self.rel_seq + self.payload_len as i64)
    }
}

/// One remembered segment in the history ring: a [`SegRec`] and its flow
/// direction packed into 56 bytes (the ring is written on every data
/// segment, so its size is memory traffic).
#[derive(Debug, Clone, Copy)]
struct Hist {
    frame: FrameNo,
    ts: Timestamp,
    rel_seq: i64,
    /// `since_first_tx_ns`, `i64::MIN` for none.
    since: i64,
    stream: StreamId,
    payload_len: u32,
    ip_len: u32,
    /// Bit 0: server → client; bit 1: a retransmission.
    bits: u8,
}

impl Hist {
    fn new(stream: StreamId, dir: Direction, r: &SegRec) -> Hist {
        Hist {
            frame: r.frame,
            ts: r.ts,
            rel_seq: r.rel_seq,
            since: r.since_first_tx_ns.unwrap_or(i64::MIN),
            stream,
            payload_len: r.payload_len,
            ip_len: r.ip_len,
            bits: u8::from(dir == Direction::ServerToClient) | (u8::from(r.retransmission) << 1),
        }
    }
    fn is(&self, stream: StreamId, dir: Direction) -> bool {
        self.stream == stream && (self.bits & 1 == 1) == (dir == Direction::ServerToClient)
    }
    fn rec(&self) -> SegRec {
        SegRec {
            frame: self.frame,
            ts: self.ts,
            rel_seq: self.rel_seq,
            payload_len: self.payload_len,
            ip_len: self.ip_len,
            retransmission: self.bits & 2 != 0,
            since_first_tx_ns: (self.since != i64::MIN).then_some(self.since),
        }
    }
}

/// Handle of a watch, returned by [`FollowUp::watch`].
pub type WatchId = usize;

#[derive(Debug, Clone, Copy)]
struct Watch {
    stream: StreamId,
    dir: Direction,
    offset: i64,
    after: Timestamp,
    best: Option<SegRec>,
    open: bool,
}

/// Tracks data segments and resolves watches (see the module doc).
#[derive(Debug, Default)]
pub struct FollowUp {
    history: VecDeque<Hist>,
    watches: Vec<Watch>,
    open: crate::StreamMap<(StreamId, Direction), VecDeque<WatchId>>,
    open_count: usize,
    /// No watch before this index is open (watches close oldest first or
    /// when resolved), so [`FollowUp::close_oldest`] never rescans them: a
    /// flood of triggers stays linear.
    oldest_open: WatchId,
}

impl FollowUp {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed every segment event (in frame order). Duplicate sightings and
    /// segments without payload are ignored.
    pub fn on_segment(&mut self, s: &SegmentEvent) {
        if s.payload_len == 0 || s.duplicate_of.is_some() {
            return;
        }
        let rec = SegRec::from_event(s);
        let key = (s.stream, s.dir);
        if self.history.len() >= HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(Hist::new(s.stream, s.dir, &rec));
        if self.open_count == 0 {
            return; // no watch to offer it to (the common case): no lookup
        }
        if let Some(ids) = self.open.get_mut(&key) {
            let mut closed = 0;
            ids.retain(|&id| {
                let Some(w) = self.watches.get_mut(id) else {
                    return false;
                };
                offer(w, &rec);
                if let Some(b) = w.best {
                    if rec.ts.0 > b.ts.0.saturating_add(REORDER_HORIZON_NS) {
                        w.open = false;
                        closed += 1;
                        return false;
                    }
                }
                true
            });
            self.open_count -= closed;
            if ids.is_empty() {
                self.open.remove(&key);
            }
        }
    }

    /// Start watching for the first segment of `stream`/`dir` after time
    /// `after` that carries byte `offset` (relative sequence, bytes). Looks
    /// back through the remembered history first.
    pub fn watch(
        &mut self,
        stream: StreamId,
        dir: Direction,
        offset: i64,
        after: Timestamp,
    ) -> WatchId {
        let mut w = Watch {
            stream,
            dir,
            offset,
            after,
            best: None,
            open: true,
        };
        for h in self.history.iter().filter(|h| h.is(stream, dir)) {
            offer(&mut w, &h.rec());
        }
        let id = self.watches.len();
        self.watches.push(w);
        self.open.entry((stream, dir)).or_default().push_back(id);
        self.open_count += 1;
        if self.open_count > MAX_OPEN_WATCHES {
            self.close_oldest();
        }
        id
    }

    /// The earliest-timestamped segment found so far for watch `id`.
    pub fn result(&self, id: WatchId) -> Option<SegRec> {
        self.watches.get(id).and_then(|w| w.best)
    }

    /// Recently seen data segments of `stream`/`dir` (at most [`HISTORY`] over
    /// all flows), oldest first (frame order).
    pub fn history(&self, stream: StreamId, dir: Direction) -> impl Iterator<Item = SegRec> + '_ {
        self.history
            .iter()
            .filter(move |h| h.is(stream, dir))
            .map(Hist::rec)
    }

    /// The stream left the flow table
    /// ([`pcapsleuth_flow::FlowEvent::FlowEnded`]): close its open watches as
    /// they stand (no later segment of it can resolve them) and free their
    /// lists. Results stay readable with [`FollowUp::result`].
    pub fn end_stream(&mut self, stream: StreamId) {
        for dir in [Direction::ClientToServer, Direction::ServerToClient] {
            if let Some(ids) = self.open.remove(&(stream, dir)) {
                for id in ids {
                    if let Some(w) = self.watches.get_mut(id) {
                        w.open = false;
                    }
                    self.open_count = self.open_count.saturating_sub(1);
                }
            }
        }
    }

    /// Watches still open (at most [`MAX_OPEN_WATCHES`]).
    pub fn open_watches(&self) -> usize {
        self.open_count
    }

    /// Close the oldest open watch (as it stands). Amortised O(1): the
    /// cursor only moves forward, and the oldest open watch is the first of
    /// its flow direction's list (lists are in watch order).
    fn close_oldest(&mut self) {
        while self.watches.get(self.oldest_open).is_some_and(|w| !w.open) {
            self.oldest_open += 1;
        }
        let id = self.oldest_open;
        let Some(w) = self.watches.get_mut(id) else {
            return;
        };
        w.open = false;
        let key = (w.stream, w.dir);
        if let Some(ids) = self.open.get_mut(&key) {
            if ids.front() == Some(&id) {
                ids.pop_front();
            } else {
                ids.retain(|&x| x != id);
            }
            if ids.is_empty() {
                self.open.remove(&key);
            }
        }
        self.open_count = self.open_count.saturating_sub(1);
    }
}

fn offer(w: &mut Watch, rec: &SegRec) {
    if rec.ts.0 <= w.after.0 || !rec.covers(w.offset) {
        return;
    }
    let better = match w.best {
        None => true,
        Some(b) => rec.ts.0 < b.ts.0,
    };
    if better {
        w.best = Some(*rec);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{segment, C2S};

    /// Client data segment at `ts_ms` ms after the epoch (ISN 2^32 - 11).
    fn seg(frame: u64, ts_ms: i64, rel_seq: i64, len: u32) -> SegmentEvent {
        segment(
            C2S,
            frame,
            Timestamp(ts_ms * 1_000_000),
            u32::MAX - 10,
            rel_seq,
            len,
        )
    }

    #[test]
    fn resolves_later_segment_and_looks_back_for_out_of_order_frames() {
        let mut f = FollowUp::new();
        f.on_segment(&seg(1, 0, 1, 100));
        // frame 2 is written before the trigger but has a later timestamp
        f.on_segment(&seg(2, 207, 101, 1348));
        let w = f.watch(
            StreamId(0),
            Direction::ClientToServer,
            101,
            Timestamp(5_000_000),
        );
        assert_eq!(f.result(w).map(|r| r.frame), Some(FrameNo(2)));
        // an even earlier-timestamped carrier later in the file wins
        f.on_segment(&seg(3, 100, 50, 100));
        assert_eq!(f.result(w).map(|r| r.frame), Some(FrameNo(3)));
        // other direction and non-covering segments are ignored
        let w2 = f.watch(StreamId(0), Direction::ServerToClient, 101, Timestamp(0));
        assert_eq!(f.result(w2), None);
        let w3 = f.watch(StreamId(0), Direction::ClientToServer, 5000, Timestamp(0));
        f.on_segment(&seg(4, 300, 6000, 10));
        assert_eq!(f.result(w3), None);
    }
}

#[cfg(test)]
mod hist_tests {
    use super::*;
    use crate::synth::{segment, S2C};

    #[test]
    fn history_entries_are_packed_and_round_trip() {
        assert!(std::mem::size_of::<Hist>() <= 56);
        let mut s = segment(S2C, 9, Timestamp(77), 7, 100, 1448);
        s.analysis.retransmission = true;
        s.since_first_tx_ns = Some(5);
        let r = SegRec::from_event(&s);
        let h = Hist::new(StreamId(3), S2C, &r);
        assert!(h.is(StreamId(3), S2C));
        assert!(!h.is(StreamId(3), Direction::ClientToServer));
        assert_eq!(h.rec(), r);
        let plain = SegRec {
            retransmission: false,
            since_first_tx_ns: None,
            ..r
        };
        assert_eq!(Hist::new(StreamId(3), S2C, &plain).rec(), plain);
    }
}

#[cfg(test)]
mod end_tests {
    use super::*;
    use crate::synth::{segment, C2S};

    #[test]
    fn end_stream_closes_its_watches_and_keeps_their_results() {
        let mut f = FollowUp::new();
        f.on_segment(&segment(C2S, 1, Timestamp(10), 7, 1, 100));
        let w = f.watch(StreamId(0), Direction::ClientToServer, 1, Timestamp(0));
        let open = f.watch(StreamId(0), Direction::ClientToServer, 500, Timestamp(0));
        assert_eq!(f.open_watches(), 2);
        f.end_stream(StreamId(0));
        assert_eq!(f.open_watches(), 0);
        assert!(f.open.is_empty());
        assert_eq!(f.result(w).map(|r| r.frame), Some(FrameNo(1)));
        // A segment of the same id afterwards (a retired stream's id reused)
        // resolves nothing closed.
        f.on_segment(&segment(C2S, 2, Timestamp(20), 7, 500, 100));
        assert_eq!(f.result(open), None);
    }
}

#[cfg(test)]
mod flood_tests {
    use super::*;
    use crate::synth::{segment, C2S};

    #[test]
    fn a_flood_of_watches_closes_the_oldest_in_linear_time() {
        let mut f = FollowUp::new();
        f.on_segment(&segment(C2S, 1, Timestamp(0), 7, 1, 1448));
        // Three times the open-watch cap on one flow direction, none
        // resolved: each watch past the cap closes the oldest. Quadratic
        // (a scan from the first watch per close) this took minutes at 1 M.
        let n = 3 * MAX_OPEN_WATCHES;
        let started = std::time::Instant::now();
        let ids: Vec<WatchId> = (0..n)
            .map(|i| {
                f.watch(
                    StreamId(0),
                    Direction::ClientToServer,
                    1,
                    Timestamp(i as i64 + 1),
                )
            })
            .collect();
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
        assert_eq!(f.open_count, MAX_OPEN_WATCHES);
        let open: usize = f.open.values().map(VecDeque::len).sum();
        assert_eq!(open, MAX_OPEN_WATCHES);
        // The newest watches are the open ones, and still resolve.
        f.on_segment(&segment(C2S, 2, Timestamp(1_000_000_000), 7, 1, 1448));
        assert_eq!(f.result(ids[n - 1]).map(|r| r.frame), Some(FrameNo(2)));
        assert_eq!(f.result(ids[0]), None);
    }
}
