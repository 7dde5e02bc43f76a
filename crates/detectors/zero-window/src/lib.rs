#![doc = include_str!("../README.md")]

mod render;

pub use pcapsleuth_detect::{Peer, Role};
pub use render::render;

use pcapsleuth_core::{Direction, FlowRef, FrameNo, StreamId, Timestamp};
use pcapsleuth_detect::{Detector, DetectorInfo, Finding, FinishContext, FlowEvent, Severity};
use pcapsleuth_flow::SegmentEvent;
use serde::Serialize;
use std::collections::BTreeSet;

/// Detector id.
pub const ID: &str = "zero-window";

/// Episodes shorter than this (ns) with no probe are not reported.
pub const MIN_EPISODE_NS: i64 = 1_000_000;

/// Episodes kept in detail per direction (more are counted, not cited).
const MAX_EPISODES: usize = 64;
/// Frames cited per episode for window-0 segments and probes.
const MAX_FRAMES_PER_KIND: usize = 16;
/// Most frames in one finding.
const MAX_FRAMES: usize = 256;
/// Episode durations listed in `episode_durations_ms`.
const MAX_DURATIONS: usize = 16;

/// The `evidence` object of a `zero-window` finding: keys, order and units of
/// the JSON report (see the crate README, section Evidence).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ZeroWindowEvidence {
    /// The side advertising window 0.
    pub receiver: Peer,
    /// The other side, which probes.
    pub sender: Peer,
    /// Reportable episodes in this direction (count).
    pub episodes: u64,
    /// Sum of the episode durations (ms, µs precision).
    pub duration_ms: f64,
    /// The longest episode (ms).
    pub longest_episode_ms: f64,
    /// Each episode's duration (ms), first 16.
    pub episode_durations_ms: Vec<f64>,
    /// Sorted distinct non-zero windows advertised just before and after the
    /// episodes, at most 8 (bytes; raw field values when the scale is unknown).
    pub windows_advertised: Vec<u64>,
    /// The handshake was captured: windows are scaled bytes.
    pub window_scale_known: bool,
    /// Zero-window probes, data retransmissions into the closed window included (count).
    pub probes: u64,
    /// Probes followed by a receiver segment (count).
    pub probes_answered: u64,
    /// Data segments re-sent into the closed window (count, included in `probes`).
    pub data_retransmissions_into_zero_window: u64,
    /// For the episode with most probes: window-0 segment → first probe, then
    /// probe → probe (ms).
    pub probe_gaps_ms: Vec<f64>,
    /// The last episode had not ended when the capture did.
    pub still_closed_at_capture_end: bool,
}

/// The zero-window episodes of one flow direction: plain data, rendered into a
/// [`Finding`] by [`render()`].
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnosis {
    /// Always [`Severity::Info`]: flow control, not a pathology.
    pub severity: Severity,
    /// The `tcp.stream`.
    pub stream: StreamId,
    /// The flow (client → server) as the flow table saw it.
    pub flow: Option<FlowRef>,
    /// Direction of the segments advertising window 0 (the receiver's).
    pub receiver_dir: Direction,
    /// Window-0 segments, probes and window-reopen frames cited (unsorted, ≤ 256).
    pub frames: Vec<FrameNo>,
    /// First episode start, ns since the Unix epoch.
    pub start_ns: i64,
    /// Last episode end (reopen, or last event seen), ns since the Unix epoch.
    pub end_ns: i64,
    /// Sum of the episode durations (ns), unrounded.
    pub total_ns: i64,
    /// Longest episode (ns), unrounded.
    pub longest_ns: i64,
    /// The evidence object.
    pub evidence: ZeroWindowEvidence,
}

#[derive(Debug, Clone, Default)]
struct Episode {
    start_ts: Timestamp,
    last_ts: Timestamp,
    zero_frames: Vec<FrameNo>,
    probes: Vec<(FrameNo, Timestamp)>,
    probe_count: u64,
    data_retx: u64,
    answered: u64,
    awaiting_answer: bool,
    reopen: Option<(FrameNo, Timestamp, u64)>,
}

impl Episode {
    fn duration_ns(&self) -> i64 {
        let end = self.reopen.map(|r| r.1).unwrap_or(self.last_ts);
        end.0.saturating_sub(self.start_ts.0).max(0)
    }
    fn reportable(&self) -> bool {
        self.probe_count > 0 || self.duration_ns() >= MIN_EPISODE_NS
    }
}

/// Per (stream, receiver direction) state.
#[derive(Debug, Clone, Default)]
struct DirState {
    open: Option<Episode>,
    episodes: Vec<Episode>,
    episode_count: u64,
    total_ns: i64,
    last_nonzero: Option<u64>,
    windows: BTreeSet<u64>,
    scale_known: bool,
}

impl DirState {
    fn close(&mut self, ep: Episode) {
        if !ep.reportable() {
            return;
        }
        self.episode_count += 1;
        self.total_ns = self.total_ns.saturating_add(ep.duration_ns());
        if self.episodes.len() < MAX_EPISODES {
            self.episodes.push(ep);
        }
    }
    fn note_window(&mut self, w: u64) {
        if self.windows.len() < 8 {
            self.windows.insert(w);
        }
    }
}

/// Everything kept for one stream that sent a segment other than SYN/RST:
/// 32 bytes inline, the zero-window states boxed from the first zero window.
#[derive(Debug, Clone, Default)]
struct Stream {
    /// Last non-zero window per advertiser direction ([`Direction::index`]),
    /// valid when its bit in `present` is set.
    window: [u64; 2],
    /// Bit `i`: direction `i` advertised a non-zero window; bit `2 + i`: that
    /// window was scaled (the handshake was captured).
    present: u8,
    /// Zero-window state per advertiser direction, from its first zero window.
    dirs: Option<Box<[Option<DirState>; 2]>>,
}

impl Stream {
    fn last_window(&self, di: usize) -> Option<(u64, bool)> {
        let w = *self.window.get(di)?;
        (self.present & (1 << di) != 0).then_some((w, self.present & (4 << di) != 0))
    }
    fn set_last_window(&mut self, di: usize, (w, known): (u64, bool)) {
        if let Some(slot) = self.window.get_mut(di) {
            *slot = w;
        }
        self.present = (self.present & !(5 << di)) | (1 << di) | (u8::from(known) << (2 + di));
    }
}

/// A direction of an ended stream with reportable episodes.
#[derive(Debug, Clone)]
struct Ended {
    key: (StreamId, usize),
    st: DirState,
    still_closed: bool,
}

/// The `zero-window` detector. Keys: (`tcp.stream`, direction of the segments
/// advertising the window).
///
/// Memory: nothing for a stream that sent only SYNs; a map entry (the last
/// non-zero window each way) once it sends anything else, and the episodes
/// of a direction from its first zero window, until the stream's
/// [`FlowEvent::FlowEnded`]; then only reportable directions are kept.
#[derive(Debug, Default)]
pub struct ZeroWindow {
    streams: pcapsleuth_detect::StreamMap<StreamId, Stream>,
    ended: Vec<Ended>,
}

fn window_value(seg: &SegmentEvent) -> (u64, bool) {
    match seg.window_bytes {
        Some(b) => (b, true),
        None => (u64::from(seg.window_raw), false),
    }
}

fn is_probe(seg: &SegmentEvent) -> bool {
    let a = &seg.analysis;
    let w = &seg.wireshark;
    a.zero_window_probe
        || a.keep_alive
        || w.zero_window_probe
        || w.keep_alive
        // Data re-sent into the closed window (RTO retransmission) probes too;
        // new data that was already in flight when the window closed does not.
        || (seg.payload_len > 0 && (a.retransmission || w.retransmission))
        || (seg.payload_len <= 1 && seg.rel_seq == seg.snd_una - 1)
}

impl ZeroWindow {
    /// Streams with live state (sent more than SYNs, not ended).
    pub fn active_streams(&self) -> usize {
        self.streams.len()
    }

    /// Heap bytes held for live streams (by capacity: map slots and the
    /// zero-window states), excluding what ended streams left.
    pub fn state_bytes(&self) -> usize {
        let slot = std::mem::size_of::<(StreamId, Stream)>() + 1;
        let dirs: usize = self
            .streams
            .values()
            .filter(|s| s.dirs.is_some())
            .map(|_| std::mem::size_of::<[Option<DirState>; 2]>())
            .sum();
        self.streams.capacity() * slot + dirs
    }

    fn on_segment(&mut self, seg: &SegmentEvent) {
        if seg.duplicate_of.is_some() || seg.flags.rst() || seg.flags.syn() {
            return;
        }
        let stream = self.streams.entry(seg.stream).or_default();
        // As advertiser (receiver).
        let di = seg.dir.index();
        let (w, known) = window_value(seg);
        let zero = seg.window_raw == 0;
        if zero {
            let before = stream.last_window(di);
            let dirs = stream.dirs.get_or_insert_with(Box::default);
            if dirs[di].is_none() {
                let mut st = DirState::default();
                if let Some((lw, lk)) = before {
                    st.last_nonzero = Some(lw);
                    st.scale_known = lk;
                }
                dirs[di] = Some(st);
            }
        } else {
            stream.set_last_window(di, (w, known));
        }
        let Some(dirs) = stream.dirs.as_deref_mut() else {
            return;
        };
        if let Some(st) = dirs[di].as_mut() {
            st.on_advertisement(seg, zero, w, known);
        }
        // As prober (sender towards a closed window).
        if let Some(st) = dirs[seg.dir.reverse().index()].as_mut() {
            if let Some(ep) = st.open.as_mut() {
                if is_probe(seg) {
                    ep.probe_count += 1;
                    if seg.payload_len > 0
                        && (seg.analysis.retransmission || seg.wireshark.retransmission)
                    {
                        ep.data_retx += 1;
                    }
                    ep.awaiting_answer = true;
                    ep.last_ts = seg.ts.max(ep.last_ts);
                    if ep.probes.len() < MAX_FRAMES_PER_KIND {
                        ep.probes.push((seg.frame, seg.ts));
                    }
                }
            }
        }
    }

    /// The stream left the flow table: conclude its episodes (an episode
    /// still open stays "still closed", as at the end of the capture), keep
    /// reportable directions, drop the rest.
    fn on_flow_ended(&mut self, stream: StreamId) {
        let Some(st) = self.streams.remove(&stream) else {
            return;
        };
        for (di, d) in st.dirs.into_iter().flat_map(|d| *d).enumerate() {
            let Some(d) = d else { continue };
            let (st, still_closed) = conclude(d);
            if st.episode_count > 0 {
                self.ended.push(Ended {
                    key: (stream, di),
                    st,
                    still_closed,
                });
            }
        }
    }
}

impl DirState {
    /// A segment of this direction's advertiser with window `w`.
    fn on_advertisement(&mut self, seg: &SegmentEvent, zero: bool, w: u64, known: bool) {
        self.scale_known |= known;
        if zero {
            let before = self.last_nonzero;
            let ep = self.open.get_or_insert_with(|| Episode {
                start_ts: seg.ts,
                last_ts: seg.ts,
                ..Default::default()
            });
            if ep.awaiting_answer {
                ep.answered += 1;
                ep.awaiting_answer = false;
            }
            ep.last_ts = seg.ts.max(ep.last_ts);
            if ep.zero_frames.len() < MAX_FRAMES_PER_KIND {
                ep.zero_frames.push(seg.frame);
            }
            if let Some(b) = before {
                self.note_window(b);
            }
        } else {
            self.last_nonzero = Some(w);
            if let Some(mut ep) = self.open.take() {
                if ep.awaiting_answer {
                    ep.answered += 1;
                }
                ep.reopen = Some((seg.frame, seg.ts, w));
                self.note_window(w);
                self.close(ep);
            }
        }
    }
}

/// Close the open episode (if any): the state and whether a reportable
/// episode was still open.
fn conclude(mut st: DirState) -> (DirState, bool) {
    let still_closed = st.open.as_ref().is_some_and(|e| e.reportable());
    if let Some(ep) = st.open.take() {
        st.close(ep);
    }
    (st, still_closed)
}

fn ms(ns: i64) -> f64 {
    (ns as f64 / 1_000.0).round() / 1_000.0
}

/// What the episodes of one direction add up to.
#[derive(Debug, Default)]
struct Totals {
    frames: Vec<FrameNo>,
    probes: u64,
    answered: u64,
    data_retx: u64,
    longest_ns: i64,
    best_gaps_ms: Vec<f64>,
    start_ns: Option<i64>,
    end_ns: Option<i64>,
}

fn totals(episodes: &[Episode]) -> Totals {
    let mut t = Totals::default();
    let mut best_probe_count = 0usize;
    for ep in episodes {
        t.probes += ep.probe_count;
        t.answered += ep.answered;
        t.data_retx += ep.data_retx;
        t.longest_ns = t.longest_ns.max(ep.duration_ns());
        let end = ep.reopen.map(|r| r.1 .0).unwrap_or(ep.last_ts.0);
        t.start_ns = Some(t.start_ns.map_or(ep.start_ts.0, |s| s.min(ep.start_ts.0)));
        t.end_ns = Some(t.end_ns.map_or(end, |e| e.max(end)));
        if t.frames.len() < MAX_FRAMES {
            t.frames.extend(ep.zero_frames.iter().copied());
            t.frames.extend(ep.probes.iter().map(|p| p.0));
            if let Some(r) = ep.reopen {
                t.frames.push(r.0);
            }
        }
        if ep.probes.len() > best_probe_count {
            best_probe_count = ep.probes.len();
            let mut prev = ep.start_ts.0;
            t.best_gaps_ms = ep
                .probes
                .iter()
                .map(|p| {
                    let g = p.1 .0.saturating_sub(prev).max(0);
                    prev = p.1 .0;
                    ms(g)
                })
                .collect();
        }
    }
    t.frames.truncate(MAX_FRAMES);
    t
}

fn diagnose_direction(
    ctx: &FinishContext,
    stream: StreamId,
    di: usize,
    st: DirState,
    still_closed: bool,
) -> Option<Diagnosis> {
    if st.episode_count == 0 {
        return None;
    }
    let dir = if di == 0 {
        Direction::ClientToServer
    } else {
        Direction::ServerToClient
    };
    let t = totals(&st.episodes);
    let evidence = ZeroWindowEvidence {
        receiver: Peer::sender_of(ctx, stream, dir),
        sender: Peer::sender_of(ctx, stream, dir.reverse()),
        episodes: st.episode_count,
        duration_ms: ms(st.total_ns),
        longest_episode_ms: ms(t.longest_ns),
        episode_durations_ms: st
            .episodes
            .iter()
            .take(MAX_DURATIONS)
            .map(|e| ms(e.duration_ns()))
            .collect(),
        windows_advertised: st.windows.iter().copied().collect(),
        window_scale_known: st.scale_known,
        probes: t.probes,
        probes_answered: t.answered,
        data_retransmissions_into_zero_window: t.data_retx,
        probe_gaps_ms: t.best_gaps_ms,
        still_closed_at_capture_end: still_closed,
    };
    Some(Diagnosis {
        severity: Severity::Info,
        stream,
        flow: ctx.flow_ref(stream),
        receiver_dir: dir,
        frames: t.frames,
        start_ns: t.start_ns.unwrap_or(0),
        end_ns: t.end_ns.unwrap_or(0),
        total_ns: st.total_ns,
        longest_ns: t.longest_ns,
        evidence,
    })
}

impl ZeroWindow {
    /// End of capture: one [`Diagnosis`] per flow direction that had a
    /// reportable zero-window episode, in (`tcp.stream`, direction) order.
    /// Consumes the detector's state.
    pub fn diagnose(&mut self, ctx: &FinishContext) -> Vec<Diagnosis> {
        let mut all = std::mem::take(&mut self.ended);
        for (stream, st) in std::mem::take(&mut self.streams) {
            for (di, d) in st.dirs.into_iter().flat_map(|d| *d).enumerate() {
                let Some(d) = d else { continue };
                let (st, still_closed) = conclude(d);
                all.push(Ended {
                    key: (stream, di),
                    st,
                    still_closed,
                });
            }
        }
        // (stream, direction) order; an ended stream's direction before the
        // live state of a stream that later reused its id (stable sort).
        all.sort_by_key(|e| e.key);
        all.into_iter()
            .filter_map(|e| diagnose_direction(ctx, e.key.0, e.key.1, e.st, e.still_closed))
            .collect()
    }
}

impl Detector for ZeroWindow {
    fn info(&self) -> DetectorInfo {
        DetectorInfo {
            id: ID,
            aliases: &[],
            title: "Zero-window episodes (ordinary receiver flow control)",
            explain: include_str!("../README.md"),
        }
    }

    fn on_flow_event(&mut self, event: &FlowEvent) {
        match event {
            FlowEvent::Segment(seg) => self.on_segment(seg),
            FlowEvent::FlowEnded(e) => self.on_flow_ended(e.stream),
            _ => {}
        }
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        self.diagnose(ctx).iter().map(render).collect()
    }
}
