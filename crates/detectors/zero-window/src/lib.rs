//! `zero-window`: ordinary TCP flow control, reported so that it can be told
//! apart from the pathologies around it.
//!
//! **Incident.** Seed 003 (`../shared/seeds/003_22212713a2f4207c.txt`): a
//! healthy receiver whose application reads slowly advertises a zero window and
//! the sender's persist timer probes it; the *pathology* is the receiver that
//! never does (see the `missing-zero-window` detector). Seeing the healthy
//! episodes with their probe timing is what lets an engineer tell the two apart.
//!
//! **Signature.** Per flow direction, an *episode* starts at the first segment
//! whose window field is 0 (RST and SYN excluded) and ends at the receiver's
//! next segment with a non-zero window (the window-reopen frame), or at the end
//! of the capture. During it, the peer's zero-window probes (Linux: a bare ACK
//! with seq = SND.UNA−1, `tcp_send_probe0`/`tcp_write_wakeup`; Wireshark calls
//! it a keep-alive) and data re-sent into the closed window (RTO retransmissions)
//! are counted as probes. The persist timer backs off exponentially from
//! max(RTO, 200 ms) (`tcp_probe0_when`, `TCP_RTO_MIN`), so gaps of ≈200, 400,
//! 800 ms are expected. Episodes shorter than 1 ms with no probe are ignored.
//! One `info` finding per flow direction groups its episodes.
//!
//! **Evidence keys.**
//! - `receiver` (string): `"client 192.0.2.10:49001"` / `"server …"`, the side advertising window 0.
//! - `sender` (string): the other side, which probes.
//! - `episodes` (count), `duration_ms` (sum of episode durations, ms),
//!   `longest_episode_ms` (ms), `episode_durations_ms` (ms, first 16).
//! - `windows_advertised` (bytes, sorted distinct non-zero windows the receiver
//!   advertised just before and after the episodes, at most 8; raw field values
//!   when `window_scale_known` is false).
//! - `window_scale_known` (bool): the handshake was captured, windows are scaled bytes.
//! - `probes` (count), `probes_answered` (count of probes followed by a receiver segment),
//!   `data_retransmissions_into_zero_window` (count, included in `probes`).
//! - `probe_gaps_ms` (ms): for the episode with most probes, window-0 segment →
//!   first probe, then probe → probe.
//! - `still_closed_at_capture_end` (bool).
//!
//! **Known false positives.** None as a pathology (severity is `info`). A
//! receiver stuck at window 0 for minutes is still reported here, as flow
//! control: the cause is its application, not TCP.
//!
//! **Remedy.** Nothing to fix in TCP; find out why the receiving application
//! stops reading (blocked thread, slow disk, downstream back-pressure) or give
//! it a larger receive buffer.

use pcapsleuth_core::{Direction, Endpoint, FrameNo, StreamId, Timestamp};
use pcapsleuth_detect::{
    Detector, DetectorInfo, Evidence, Finding, FinishContext, FlowEvent, Severity,
};
use pcapsleuth_flow::SegmentEvent;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

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

const EXPLAIN: &str = "Looks for receivers that advertise a zero receive window (ordinary TCP flow control): \
per flow direction, each episode from the first window-0 segment to the window update that reopens it, with the \
sender's zero-window probes (Linux sends a bare ACK with seq = SND.UNA-1, which Wireshark calls a keep-alive) and \
their exponential backoff from max(RTO, 200 ms): about 200, 400, 800, 1600 ms. Why: a receiver whose application \
reads slowly must say so with a zero window; seeing these healthy episodes tells them apart from the seed-003 \
pathology in which the receiver drops data behind an open window (detector missing-zero-window). Severity info. \
What to do: nothing in TCP - find out why the receiving application stops reading (blocked thread, slow disk, \
back-pressure downstream) or give it a larger receive buffer (SO_RCVBUF, net.ipv4.tcp_rmem).";

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

/// The `zero-window` detector. Keys: (`tcp.stream`, direction of the segments
/// advertising the window).
#[derive(Debug, Default)]
pub struct ZeroWindow {
    dirs: BTreeMap<(StreamId, usize), DirState>,
    /// Last non-zero window (value, scaled?) of every direction: O(active flows).
    last_window: pcapsleuth_detect::StreamMap<(StreamId, usize), (u64, bool)>,
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
    fn on_segment(&mut self, seg: &SegmentEvent) {
        if seg.duplicate_of.is_some() || seg.flags.rst() || seg.flags.syn() {
            return;
        }
        // As advertiser (receiver).
        let key = (seg.stream, seg.dir.index());
        let (w, known) = window_value(seg);
        let zero = seg.window_raw == 0;
        if zero && !self.dirs.contains_key(&key) {
            let mut st = DirState::default();
            if let Some(&(lw, lk)) = self.last_window.get(&key) {
                st.last_nonzero = Some(lw);
                st.scale_known = lk;
            }
            self.dirs.insert(key, st);
        }
        if !zero {
            self.last_window.insert(key, (w, known));
        }
        if let Some(st) = self.dirs.get_mut(&key) {
            st.scale_known |= known;
            if zero {
                let before = st.last_nonzero;
                let ep = st.open.get_or_insert_with(|| Episode {
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
                    st.note_window(b);
                }
            } else {
                st.last_nonzero = Some(w);
                if let Some(mut ep) = st.open.take() {
                    if ep.awaiting_answer {
                        ep.answered += 1;
                    }
                    ep.reopen = Some((seg.frame, seg.ts, w));
                    st.note_window(w);
                    st.close(ep);
                }
            }
        }
        // As prober (sender towards a closed window).
        let peer_key = (seg.stream, seg.dir.reverse().index());
        if let Some(st) = self.dirs.get_mut(&peer_key) {
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
}

fn label(
    ctx: &FinishContext,
    stream: StreamId,
    dir: Direction,
    advertiser: bool,
) -> (String, String) {
    // The advertiser is the sender of the segments in `dir`.
    let sender_is_client = matches!(dir, Direction::ClientToServer) == advertiser;
    let ends: Option<(Endpoint, Endpoint)> = ctx.streams.get(&stream).copied();
    let (role, ep) = match (ends, sender_is_client) {
        (Some((c, _)), true) => ("client", Some(c)),
        (Some((_, s)), false) => ("server", Some(s)),
        (None, true) => ("client", None),
        (None, false) => ("server", None),
    };
    let addr = ep
        .map(|e| format!("{}:{}", fmt_addr(e), e.port))
        .unwrap_or_else(|| "?".to_string());
    (role.to_string(), addr)
}

fn fmt_addr(e: Endpoint) -> String {
    match e.addr {
        std::net::IpAddr::V6(a) => format!("[{a}]"),
        std::net::IpAddr::V4(a) => a.to_string(),
    }
}

fn ms(ns: i64) -> f64 {
    (ns as f64 / 1_000.0).round() / 1_000.0
}

fn fmt_ms(ns: i64) -> String {
    let v = ns as f64 / 1e6;
    if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

impl Detector for ZeroWindow {
    fn info(&self) -> DetectorInfo {
        DetectorInfo {
            id: ID,
            title: "Zero-window episodes (ordinary receiver flow control)",
            explain: EXPLAIN,
        }
    }

    fn on_flow_event(&mut self, event: &FlowEvent) {
        if let FlowEvent::Segment(seg) = event {
            self.on_segment(seg);
        }
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        let mut out = Vec::new();
        let dirs = std::mem::take(&mut self.dirs);
        for ((stream, di), mut st) in dirs {
            let still_closed = st.open.as_ref().is_some_and(|e| e.reportable());
            if let Some(ep) = st.open.take() {
                st.close(ep);
            }
            if st.episode_count == 0 {
                continue;
            }
            let dir = if di == 0 {
                Direction::ClientToServer
            } else {
                Direction::ServerToClient
            };
            let (rrole, raddr) = label(ctx, stream, dir, true);
            let (srole, saddr) = label(ctx, stream, dir, false);
            let mut frames: Vec<u64> = Vec::new();
            let mut probes = 0u64;
            let mut answered = 0u64;
            let mut data_retx = 0u64;
            let mut longest = 0i64;
            let mut best_gaps: Vec<f64> = Vec::new();
            let mut best_probe_count = 0usize;
            let mut start_ts = i64::MAX;
            let mut end_ts = i64::MIN;
            for ep in &st.episodes {
                probes += ep.probe_count;
                answered += ep.answered;
                data_retx += ep.data_retx;
                longest = longest.max(ep.duration_ns());
                start_ts = start_ts.min(ep.start_ts.0);
                end_ts = end_ts.max(ep.reopen.map(|r| r.1 .0).unwrap_or(ep.last_ts.0));
                if frames.len() < MAX_FRAMES {
                    frames.extend(ep.zero_frames.iter().copied());
                    frames.extend(ep.probes.iter().map(|p| p.0));
                    if let Some(r) = ep.reopen {
                        frames.push(r.0);
                    }
                }
                if ep.probes.len() > best_probe_count {
                    best_probe_count = ep.probes.len();
                    let mut prev = ep.start_ts.0;
                    best_gaps = ep
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
            frames.truncate(MAX_FRAMES);
            let durations: Vec<Value> = st
                .episodes
                .iter()
                .take(16)
                .map(|e| json!(ms(e.duration_ns())))
                .collect();
            let mut ev = Evidence::new();
            ev.insert("receiver".into(), json!(format!("{rrole} {raddr}")));
            ev.insert("sender".into(), json!(format!("{srole} {saddr}")));
            ev.insert("episodes".into(), json!(st.episode_count));
            ev.insert("duration_ms".into(), json!(ms(st.total_ns)));
            ev.insert("longest_episode_ms".into(), json!(ms(longest)));
            ev.insert("episode_durations_ms".into(), Value::Array(durations));
            ev.insert(
                "windows_advertised".into(),
                json!(st.windows.iter().copied().collect::<Vec<u64>>()),
            );
            ev.insert("window_scale_known".into(), json!(st.scale_known));
            ev.insert("probes".into(), json!(probes));
            ev.insert("probes_answered".into(), json!(answered));
            ev.insert(
                "data_retransmissions_into_zero_window".into(),
                json!(data_retx),
            );
            ev.insert("probe_gaps_ms".into(), json!(best_gaps));
            ev.insert("still_closed_at_capture_end".into(), json!(still_closed));
            let times = if st.episode_count == 1 {
                "once".to_string()
            } else {
                format!("{} times", st.episode_count)
            };
            let gaps_txt = if best_gaps.is_empty() {
                String::new()
            } else {
                let g: Vec<String> = best_gaps.iter().map(|g| fmt_ms((g * 1e6) as i64)).collect();
                format!(" (gaps {} ms)", g.join(", "))
            };
            let ending = if still_closed {
                "; the window was still closed when the capture ended"
            } else if probes > 0 {
                " until the window reopened"
            } else {
                ""
            };
            let probe_txt = match (probes, data_retx) {
                (0, _) => format!("; the {srole} did not need to probe"),
                (p, 0) => format!(" and the {srole} sent {p} zero-window probe(s){gaps_txt}"),
                (p, d) => format!(
                    " and the {srole} probed it {p} time(s){gaps_txt}, {d} of them by re-sending data into the closed window"
                ),
            };
            let summary = format!(
                "The {rrole} {raddr} advertised a zero receive window {times} ({} ms in all, longest {} ms){probe_txt}{ending}: ordinary flow control, its application read slower than data arrived.",
                fmt_ms(st.total_ns),
                fmt_ms(longest)
            );
            let remedy = format!(
                "Nothing to fix in TCP: find out why the application on {raddr} stops reading its socket (blocked thread, slow disk, back-pressure downstream), or give it a larger receive buffer."
            );
            out.push(Finding::new(
                ID,
                Severity::Info,
                summary,
                ctx.flow_ref(stream),
                Some(stream),
                frames,
                if start_ts == i64::MAX { 0 } else { start_ts },
                if end_ts == i64::MIN { 0 } else { end_ts },
                remedy,
                ev,
            ));
        }
        out
    }
}
