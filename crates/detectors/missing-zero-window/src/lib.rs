//! `missing-zero-window`: a receiver that drops data behind an open window
//! instead of advertising a zero window.
//!
//! **Incident.** Seed 003 (`../shared/seeds/003_22212713a2f4207c.txt`,
//! Cloudflare 2023): on Linux before 6.5 (and later kernels with
//! `net.ipv4.tcp_shrink_window=0` when the window-scale unit exceeds the
//! segment size) the receive buffer grows to `tcp_rmem` max; then the kernel
//! drops arriving data (`TCPRcvQDrop`) *without ever advertising a zero window*
//! (`TCPWantZeroWindowAdv` counts the zero windows it wanted to send). The
//! sender retransmits with exponential backoff until the connection times out.
//!
//! **Signature** (per flow direction):
//! 1. the receiver's cumulative ACK stops at relative sequence *S* and never
//!    passes it while the sender re-sends the segment starting at *S*
//!    ≥ [`MIN_RETRANSMISSIONS`] times with RTO backoff (gaps roughly doubling,
//!    RFC 6298 §5.5, `tcp_retransmit_timer`; [`pcapsleuth_detect::retx::backoff_doublings`] ≥ 2);
//! 2. the receiver's window stays open — it never advertises 0 during the
//!    episode, and its last ACK before the drop offered at least the segment
//!    length — so flow control cannot explain the silence;
//! 3. segments of that size were acknowledged earlier in the same direction
//!    (the path carries them; otherwise this is `mss-blackhole`);
//! 4. the receiver had taken in far more than its window before the drop
//!    (relative ACK ≥ max([`BUSY_WINDOWS`] × window, [`MIN_ACKED_BYTES`]), or
//!    ≥ [`MIN_ACKED_SEGMENTS`] segments acknowledged for tiny writes): a
//!    receive buffer only reaches `tcp_rmem` max on a busy flow, which rules out
//!    keep-alives and short replies sent to a peer that went away;
//! 5. the receiver demonstrably got the retransmissions: it answers them with
//!    duplicate ACKs at *S* with an open window (seed 003's production trace),
//!    or the capture was taken on the receiver's link — its packets still carry
//!    an initial TTL (64/128/255) — and shows the retransmissions arriving
//!    unanswered (the lab's kernel-6.1 capture). Unanswered retransmissions seen
//!    from afar are not reported: a dead peer or a broken path looks the same.
//!
//! Severity `error`.
//!
//! **Evidence keys.** `receiver`/`sender` (role + address:port), `stuck_ack`
//! (relative sequence, bytes), `segment_bytes` (payload of the stuck segment),
//! `windows_advertised` (bytes, the receiver's distinct windows from its last ACK
//! before the drop through the episode), `window_at_drop_bytes`,
//! `retransmissions` (count), `rto_ladder_ms` (ms, original → each retransmission),
//! `backoff_doublings` (count), `duration_ms` (ms, original transmission → last
//! retransmission or the ACK that ended it), `receiver_answers_open_window`
//! (count of duplicate ACKs at `stuck_ack` with a non-zero window),
//! `capture_at_receiver` (bool: receiver TTL initial, sender's decremented),
//! `capture_on_receiver_link` (bool: receiver TTL initial), `receiver_ttl`,
//! `sender_ttl` (highest TTL / hop limit seen), `largest_acked_payload`
//! (bytes, proves the path carries the size), `acknowledged_later` (bool),
//! `zero_window_seen` (always false: with a zero window this is `zero-window`).
//!
//! **Known false positives.** An inline device on the receiver's link (bridge
//! IPS, L2 firewall) dropping one flow's data behind the capture point looks
//! the same as a silent receiver; so does a receiver that discards segments
//! for another reason (bad checksum offload, PAWS) while acknowledging.
//!
//! **Remedy.** On the receiver: Linux ≥ 6.5 with `net.ipv4.tcp_shrink_window=1`
//! (or a kernel carrying the fix) so it shrinks the window to zero instead of
//! dropping; meanwhile lower `net.ipv4.tcp_rmem` max or make the application
//! read faster so the buffer limit is not reached.

use pcapsleuth_core::{Direction, Endpoint, FrameNo, StreamId, Timestamp};
use pcapsleuth_detect::retx::{backoff_doublings, is_initial_ttl, ns_to_ms, DirLedger, Tx};
use pcapsleuth_detect::{
    Detector, DetectorInfo, Evidence, Finding, FinishContext, FlowEvent, PacketContext, Severity,
};
use pcapsleuth_flow::SegmentEvent;
use serde_json::json;
use std::collections::{BTreeSet, VecDeque};

/// Detector id.
pub const ID: &str = "missing-zero-window";

/// Fewest retransmissions of the stuck segment (seed 003: the sender backs off
/// until it times out, typically 15 retries).
pub const MIN_RETRANSMISSIONS: u32 = 3;

/// Bytes the receiver must have acknowledged before the drop, at least
/// (a receive buffer at `tcp_rmem` max holds megabytes).
pub const MIN_ACKED_BYTES: u64 = 65_536;

/// ... and at least this many times the window it advertised at the drop.
pub const BUSY_WINDOWS: u64 = 4;

/// Alternatively, data segments the receiver must have acknowledged (small
/// segments fill a receive buffer by their per-packet overhead).
pub const MIN_ACKED_SEGMENTS: u64 = 1000;

/// Receiver segments remembered per direction to find the last ACK before the drop.
const RING: usize = 64;
/// Frames cited per kind.
const MAX_CITE: usize = 16;

const EXPLAIN: &str = "Looks for a receiver that drops data while its advertised window is open: its ACKs stop at \
one sequence number S, the sender re-sends the segment at S three or more times with exponential RTO backoff \
(about 200, 400, 800 ms...), the receiver never advertises a zero window, its last ACK offered at least a segment's \
worth of window, and segments of that size had been acknowledged before (so it is not an MTU black hole). Why: \
seed 003 (Cloudflare 2023) - Linux before 6.5 lets the receive buffer grow to tcp_rmem max and then drops incoming \
data without ever sending a zero window (TCPRcvQDrop, TCPWantZeroWindowAdv); the sender backs off until the \
connection times out. Strongest when the receiver answers each retransmission with a duplicate ACK at S and an open \
window, or when the capture was taken on the receiver's link (initial TTL) so the retransmissions are seen \
arriving; unanswered retransmissions seen from afar are not reported (a dead peer looks the same). What to do: on the receiver run Linux >= 6.5 and set net.ipv4.tcp_shrink_window=1 \
so it advertises a zero window instead of dropping; meanwhile lower net.ipv4.tcp_rmem max or make the application \
read faster.";

#[derive(Debug, Clone, Copy)]
struct RcvSeg {
    frame: FrameNo,
    ts: Timestamp,
    window: u64,
    raw: u16,
}

#[derive(Debug, Clone, Default)]
struct Episode {
    stuck_seq: i64,
    len: u32,
    orig: Option<Tx>,
    retx: Vec<Tx>,
    retx_count: u32,
    last_ack_before: Option<RcvSeg>,
    zero_seen: bool,
    windows: BTreeSet<u64>,
    answered: Vec<FrameNo>,
    answered_count: u64,
    awaiting: bool,
    acked_at: Option<(FrameNo, Timestamp)>,
}

#[derive(Debug, Clone, Default)]
struct DirState {
    ledger: DirLedger,
    ring: VecDeque<RcvSeg>,
    ep: Option<Episode>,
    scale_known: bool,
}

/// A qualified episode waiting for `finish` (which has the endpoint names).
#[derive(Debug, Clone)]
struct Hit {
    stream: StreamId,
    dir: Direction,
    ep: Episode,
    largest_acked_payload: u32,
    scale_known: bool,
}

/// The `missing-zero-window` detector.
#[derive(Debug, Default)]
pub struct MissingZeroWindow {
    dirs: pcapsleuth_detect::StreamMap<(StreamId, usize), DirState>,
    /// Highest TTL / hop limit seen per (stream, direction).
    ttl: pcapsleuth_detect::StreamMap<(StreamId, usize), u8>,
    hits: Vec<Hit>,
}

fn dir_of(i: usize) -> Direction {
    if i == 0 {
        Direction::ClientToServer
    } else {
        Direction::ServerToClient
    }
}

impl MissingZeroWindow {
    fn on_segment(&mut self, seg: &SegmentEvent) {
        if seg.duplicate_of.is_some() {
            return;
        }
        // 1. As data sender.
        let key = (seg.stream, seg.dir.index());
        if seg.payload_len > 0 && !seg.flags.syn() && !seg.flags.rst() {
            let st = self.dirs.entry(key).or_insert_with(|| DirState {
                ledger: DirLedger::new(u32::MAX),
                ..Default::default()
            });
            let una = st.ledger.highest_ack;
            let rec = st.ledger.on_data(seg).cloned();
            if let Some(rec) = rec {
                if una == Some(rec.rel_seq) {
                    let tx = Tx {
                        frame: seg.frame,
                        ts: seg.ts,
                    };
                    let same = st.ep.as_ref().is_some_and(|e| e.stuck_seq == rec.rel_seq);
                    if !same {
                        if let Some(old) = st.ep.take() {
                            let largest = st.ledger.largest_acked_payload;
                            let n = st.ledger.acked_segments;
                            let sk = st.scale_known;
                            self.consider(seg.stream, seg.dir, old, largest, n, sk);
                        }
                        let Some(st) = self.dirs.get_mut(&key) else {
                            return;
                        };
                        let orig = (rec.tx_count > 1)
                            .then(|| rec.txs.first().copied())
                            .flatten();
                        let before_frame = orig.map(|o| o.frame).unwrap_or(seg.frame);
                        let last_ack_before = st
                            .ring
                            .iter()
                            .rev()
                            .find(|r| r.frame < before_frame)
                            .copied();
                        let mut ep = Episode {
                            stuck_seq: rec.rel_seq,
                            len: rec.payload_len,
                            orig,
                            last_ack_before,
                            ..Default::default()
                        };
                        // Retransmissions before this one (same bytes) count too.
                        for t in rec.txs.iter().skip(1) {
                            if t.frame != seg.frame {
                                ep.retx.push(*t);
                                ep.retx_count += 1;
                            }
                        }
                        st.ep = Some(ep);
                    }
                    if let Some(ep) = self.dirs.get_mut(&key).and_then(|s| s.ep.as_mut()) {
                        ep.retx_count += 1;
                        if ep.retx.len() < 32 {
                            ep.retx.push(tx);
                        }
                        ep.awaiting = true;
                    }
                }
            }
        }
        // 2. As receiver of the other direction's data.
        let Some(rel_ack) = seg.rel_ack else { return };
        if !seg.flags.ack() || seg.flags.rst() {
            return;
        }
        let dkey = (seg.stream, seg.dir.reverse().index());
        let Some(st) = self.dirs.get_mut(&dkey) else {
            return;
        };
        let (window, known) = match seg.window_bytes {
            Some(b) => (b, true),
            None => (u64::from(seg.window_raw), false),
        };
        st.scale_known |= known;
        let r = RcvSeg {
            frame: seg.frame,
            ts: seg.ts,
            window,
            raw: seg.window_raw,
        };
        if st.ring.len() >= RING {
            st.ring.pop_front();
        }
        st.ring.push_back(r);
        st.ledger.on_ack(rel_ack, seg.frame, seg.ts);
        let mut finished = None;
        if let Some(ep) = st.ep.as_mut() {
            if rel_ack > ep.stuck_seq {
                ep.acked_at = Some((seg.frame, seg.ts));
                finished = st.ep.take();
            } else {
                if seg.window_raw == 0 {
                    ep.zero_seen = true;
                } else if ep.windows.len() < 8 {
                    ep.windows.insert(window);
                }
                if rel_ack == ep.stuck_seq && seg.window_raw > 0 && ep.awaiting {
                    ep.awaiting = false;
                    ep.answered_count += 1;
                    if ep.answered.len() < MAX_CITE {
                        ep.answered.push(seg.frame);
                    }
                }
            }
        }
        if let Some(ep) = finished {
            let largest = st.ledger.largest_acked_payload;
            let n = st.ledger.acked_segments;
            let sk = st.scale_known;
            self.consider(seg.stream, seg.dir.reverse(), ep, largest, n, sk);
        }
    }

    /// Keep an ended episode if it has the signature (all but the vantage test,
    /// which needs the TTLs seen up to the end).
    fn consider(
        &mut self,
        stream: StreamId,
        dir: Direction,
        ep: Episode,
        largest_acked_payload: u32,
        acked_segments: u64,
        scale_known: bool,
    ) {
        if ep.retx_count < MIN_RETRANSMISSIONS || ep.zero_seen {
            return;
        }
        let gaps = ladder_gaps(&ep);
        if backoff_doublings(&gaps) < 2 {
            return;
        }
        // The window must have been open for this segment.
        let Some(before) = ep.last_ack_before else {
            return;
        };
        if before.raw == 0 || (scale_known && before.window < u64::from(ep.len)) {
            return;
        }
        // The path must carry segments of this size (else: mss-blackhole).
        if largest_acked_payload < ep.len {
            return;
        }
        // A receive buffer only fills after the receiver has taken in far more
        // than its window (seed 003: megabytes queued behind a 32 KB window).
        // Tiny segments fill it by count instead (skb truesize; seed 003's
        // "reader never reads" case with 4-byte writes).
        let min_bytes = (before.window.saturating_mul(BUSY_WINDOWS)).max(MIN_ACKED_BYTES);
        let busy_bytes = ep.stuck_seq >= 0 && (ep.stuck_seq as u64) >= min_bytes;
        if !busy_bytes && acked_segments < MIN_ACKED_SEGMENTS {
            return;
        }
        self.hits.push(Hit {
            stream,
            dir,
            ep,
            largest_acked_payload,
            scale_known,
        });
    }
}

fn ladder_gaps(ep: &Episode) -> Vec<i64> {
    let mut ts: Vec<i64> = Vec::with_capacity(ep.retx.len() + 1);
    if let Some(o) = ep.orig {
        ts.push(o.ts.0);
    }
    ts.extend(ep.retx.iter().map(|t| t.ts.0));
    ts.windows(2)
        .map(|w| w[1].saturating_sub(w[0]).max(0))
        .collect()
}

fn endpoint_label(
    ctx: &FinishContext,
    stream: StreamId,
    sender_is_client: bool,
) -> (String, String) {
    let ends: Option<(Endpoint, Endpoint)> = ctx.streams.get(&stream).copied();
    let ep = ends.map(|(c, s)| if sender_is_client { c } else { s });
    let role = if sender_is_client { "client" } else { "server" };
    let addr = ep
        .map(|e| match e.addr {
            std::net::IpAddr::V6(a) => format!("[{a}]:{}", e.port),
            std::net::IpAddr::V4(a) => format!("{a}:{}", e.port),
        })
        .unwrap_or_else(|| "?".to_string());
    (role.to_string(), addr)
}

fn fmt_ms(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

impl Detector for MissingZeroWindow {
    fn info(&self) -> DetectorInfo {
        DetectorInfo {
            id: ID,
            title: "Receiver drops data behind an open window (missing zero window)",
            explain: EXPLAIN,
        }
    }

    fn on_flow_event(&mut self, event: &FlowEvent) {
        if let FlowEvent::Segment(seg) = event {
            self.on_segment(seg);
        }
    }

    fn on_packet(&mut self, pkt: &PacketContext<'_>) {
        if let (Some(stream), Some(dir), Some(ip)) = (pkt.flow.stream, pkt.flow.dir, pkt.decoded.ip)
        {
            if matches!(pkt.decoded.transport, pcapsleuth_decode::Transport::Tcp(_)) {
                let e = self.ttl.entry((stream, dir.index())).or_insert(0);
                *e = (*e).max(ip.ttl);
            }
        }
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        let mut keys: Vec<(StreamId, usize)> = self.dirs.keys().copied().collect();
        keys.sort_unstable();
        for k in keys {
            if let Some(mut st) = self.dirs.remove(&k) {
                if let Some(ep) = st.ep.take() {
                    let largest = st.ledger.largest_acked_payload;
                    let n = st.ledger.acked_segments;
                    self.consider(k.0, dir_of(k.1), ep, largest, n, st.scale_known);
                }
            }
        }
        let hits = std::mem::take(&mut self.hits);
        let mut out = Vec::new();
        for h in hits {
            let ep = &h.ep;
            let sender_is_client = matches!(h.dir, Direction::ClientToServer);
            let (srole, saddr) = endpoint_label(ctx, h.stream, sender_is_client);
            let (rrole, raddr) = endpoint_label(ctx, h.stream, !sender_is_client);
            let rttl = self.ttl.get(&(h.stream, h.dir.reverse().index())).copied();
            let sttl = self.ttl.get(&(h.stream, h.dir.index())).copied();
            // The receiver's packets still carry an initial TTL: the capture
            // point is on the receiver's own link, so retransmissions seen here
            // reached it. If the sender's are decremented, the capture is at the receiver's end.
            let on_receiver_link = rttl.is_some_and(is_initial_ttl);
            let at_receiver = on_receiver_link && sttl.is_some_and(|t| !is_initial_ttl(t));
            let answered = ep.answered_count > 0;
            if !answered && !on_receiver_link {
                // Unanswered and seen from afar: a dead peer or path looks the same.
                continue;
            }
            let gaps = ladder_gaps(ep);
            let ladder: Vec<f64> = gaps.iter().map(|g| ns_to_ms(*g)).collect();
            let before = ep.last_ack_before;
            let window_at_drop = before.map(|b| b.window).unwrap_or(0);
            let mut windows: BTreeSet<u64> = ep.windows.clone();
            if let Some(b) = before {
                windows.insert(b.window);
            }
            let start = ep.orig.or(ep.retx.first().copied());
            let end_ts = ep.acked_at.map(|a| a.1).or(ep.retx.last().map(|t| t.ts));
            let dur_ns = match (start, end_ts) {
                (Some(s), Some(e)) => e.0.saturating_sub(s.ts.0).max(0),
                _ => 0,
            };
            let mut frames: Vec<u64> = Vec::new();
            if let Some(b) = before {
                frames.push(b.frame);
            }
            if let Some(o) = ep.orig {
                frames.push(o.frame);
            }
            frames.extend(ep.retx.iter().take(MAX_CITE).map(|t| t.frame));
            frames.extend(ep.answered.iter().copied());
            if let Some(a) = ep.acked_at {
                frames.push(a.0);
            }
            let mut ev = Evidence::new();
            ev.insert("receiver".into(), json!(format!("{rrole} {raddr}")));
            ev.insert("sender".into(), json!(format!("{srole} {saddr}")));
            ev.insert("stuck_ack".into(), json!(ep.stuck_seq));
            ev.insert("segment_bytes".into(), json!(ep.len));
            ev.insert(
                "windows_advertised".into(),
                json!(windows.iter().copied().collect::<Vec<u64>>()),
            );
            ev.insert("window_at_drop_bytes".into(), json!(window_at_drop));
            ev.insert("window_scale_known".into(), json!(h.scale_known));
            ev.insert("retransmissions".into(), json!(ep.retx_count));
            ev.insert("rto_ladder_ms".into(), json!(ladder));
            ev.insert("backoff_doublings".into(), json!(backoff_doublings(&gaps)));
            ev.insert("duration_ms".into(), json!(ns_to_ms(dur_ns)));
            ev.insert(
                "receiver_answers_open_window".into(),
                json!(ep.answered_count),
            );
            ev.insert("capture_at_receiver".into(), json!(at_receiver));
            ev.insert("capture_on_receiver_link".into(), json!(on_receiver_link));
            ev.insert("sender_ttl".into(), json!(sttl));
            ev.insert("receiver_ttl".into(), json!(rttl));
            ev.insert(
                "largest_acked_payload".into(),
                json!(h.largest_acked_payload),
            );
            ev.insert("acknowledged_later".into(), json!(ep.acked_at.is_some()));
            ev.insert("zero_window_seen".into(), json!(false));
            let ladder_txt = match (ladder.first(), ladder.last()) {
                (Some(a), Some(b)) if ladder.len() > 1 => {
                    format!("{} … {} ms", fmt_ms(*a), fmt_ms(*b))
                }
                (Some(a), _) => format!("{} ms", fmt_ms(*a)),
                _ => String::new(),
            };
            let how = if answered {
                format!(
                    "answering {} of them with duplicate ACKs that keep the window open",
                    ep.answered_count
                )
            } else if at_receiver {
                "the capture, taken at the receiver's end, shows them arriving unanswered"
                    .to_string()
            } else {
                "the capture, taken on the receiver's link (its packets carry an initial TTL), shows them arriving unanswered".to_string()
            };
            let severity = Severity::Error;
            let summary = format!(
                "The {rrole} {raddr} stopped acknowledging at relative seq {} while still advertising a {}-byte window and never sent a zero window; the {srole} re-sent the {}-byte segment {} times with exponential backoff ({ladder_txt}), {how}: the receiver is dropping data behind an open window (seed 003).",
                ep.stuck_seq, window_at_drop, ep.len, ep.retx_count
            );
            let remedy = format!(
                "On {raddr}: run Linux >= 6.5 with net.ipv4.tcp_shrink_window=1 so the receiver advertises a zero window instead of dropping data; meanwhile lower net.ipv4.tcp_rmem max or make the application read faster so the buffer limit is not reached."
            );
            let start_ts = before
                .map(|b| b.ts.0)
                .or(start.map(|s| s.ts.0))
                .unwrap_or(0);
            out.push(Finding::new(
                ID,
                severity,
                summary,
                ctx.flow_ref(h.stream),
                Some(h.stream),
                frames,
                start_ts,
                end_ts.map(|t| t.0).unwrap_or(start_ts),
                remedy,
                ev,
            ));
        }
        out
    }
}
