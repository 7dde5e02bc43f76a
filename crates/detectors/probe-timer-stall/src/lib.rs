//! `probe-timer-stall`: bytes that reach the wire (or reach it again) only when
//! a ≈200 ms TCP timer fires, after a silence with data pending.
//!
//! # Incident
//! Seed `000_0b9ea5d7040276bf.txt` (IPVS/IPIP, requests delayed 200 ms+): the
//! host's cached route MTU shrank under a socket still using the old MSS; its
//! own kernel refused the segment in `ip_fragment()` and sent itself a
//! frag-needed (source == destination, on `lo`). While the socket is owned by
//! the writer, `tcp_v4_mtu_reduced()` is deferred and its
//! `tcp_simple_retransmit()` finds nothing "sent", so the data leaves only
//! when the probe0 timer (`ICSK_TIME_PROBE0`, base max(RTO, `TCP_RTO_MIN` 200 ms))
//! fires and `tcp_write_wakeup()` sends it: ≈207 ms later, versus ≈0.1 ms when
//! the frag-needed came from a router.
//!
//! # Signature
//! A trigger, then the first segment carrying the waiting bytes (by timestamp:
//! multi-interface pcapng files are not in time order) ≥ 150 ms later, with no
//! other data from that sender in between:
//! - an ICMP frag-needed / Packet Too Big quoting the flow (the waiting bytes
//!   start at the quoted sequence), or
//! - a zero-window episode during which the sender probed (so it had data),
//!   ended by a window re-opening that the sender did not act on (the waiting
//!   bytes start at its SND.NXT).
//!
//! # Evidence
//! `trigger` ("self-addressed frag-needed" | "frag-needed" | "zero window"),
//! `trigger_frame` (first trigger frame by time), `trigger_frames` (all),
//! `carrier_frame` (the frame that finally carried the bytes), `gap_ms` (ms,
//! trigger → carrier), `timer` ("TCP_RTO_MIN 200ms" | "probe0 backoff 200/400/800 ms"
//! | "RTO" | null, matched with [`pcapsleuth_detect::timer`]), `bytes_waited`
//! (bytes from the waiting offset released within 10 ms of the carrier),
//! `flow_silent_ms` (ms, the flow table's stall ending at the carrier, or null).
//!
//! # Severity
//! Warning: the application saw a ≈200 ms (or longer) delay.
//!
//! # False positives
//! A zero-window reopening by less than one MSS may be ignored on purpose
//! (sender-side silly window avoidance, RFC 1122 4.2.3.4). A capture that missed
//! the data sent in between (snaplen, drops) can make a gap look silent.
//!
//! # Remedy
//! For the frag-needed case: make the route MTU consistent (set MTU/MSS for the
//! tunnelled destination on the host, or clamp the MSS) so the host never
//! refuses its own segments. For the zero-window case: find why the window
//! update was lost or too small (receiver reading in small chunks).

use pcapsleuth_core::time::ns_to_ms;
use pcapsleuth_core::{Direction, FrameNo, StreamId, Timestamp};
use pcapsleuth_decode::IcmpKind;
use pcapsleuth_detect::followup::{FollowUp, SegRec};
use pcapsleuth_detect::timer::{match_any, matches_timer};
use pcapsleuth_detect::{
    Detector, DetectorInfo, Evidence, Finding, FinishContext, FlowEvent, Severity,
};
use pcapsleuth_flow::{SegmentEvent, StallEvent};
use serde_json::{json, Value};

/// Detector id.
pub const ID: &str = "probe-timer-stall";

/// Shortest trigger → carrier gap reported, ns (a 200 ms timer seen early, with margin).
pub const MIN_GAP_NS: i64 = 150_000_000;
/// Longest trigger → carrier gap attributed to the trigger, ns.
pub const MAX_GAP_NS: i64 = 60_000_000_000;
/// Segments remembered per trigger to find the carrier and check the silence.
const SEGS_PER_TRIGGER: usize = 64;
/// Triggers of one sender at most this far apart (ns) form one burst.
const BURST_NS: i64 = 50_000_000;
/// Window after the carrier in which released bytes count as waiting, ns.
const RELEASE_NS: i64 = 10_000_000;

const EXPLAIN: &str = "\
Looks for data that left only when a ~200 ms TCP timer fired: after an ICMP frag-needed / \
Packet Too Big (above all a self-addressed one, source == destination, from the host's own \
kernel) or after a zero window, the first segment carrying the waiting bytes comes >= 150 ms \
later with nothing sent in between. It reports the trigger, the carrier frame, the gap and \
the timer it matches (TCP_RTO_MIN 200 ms, probe0 backoff 200/400/800 ms, RTO).\n\
Why: seed 000 (IPVS/IPIP load balancer): the host's route MTU dropped to 1480 under a socket \
with the old MSS; its own kernel refused the segment and sent itself a frag-needed, and the \
data left ~207 ms later when the probe0 timer fired (tcp_write_wakeup), instead of ~0.1 ms \
after a router's frag-needed.\n\
What to do: set the route/interface MTU (or clamp the MSS) for the tunnelled destination so \
the host never refuses its own segments; for zero-window cases, find why the window update \
was lost or too small.";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    SelfFrag,
    RouterFrag,
    ZeroWindow,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::SelfFrag => "self-addressed frag-needed",
            Kind::RouterFrag => "frag-needed",
            Kind::ZeroWindow => "zero window",
        }
    }
}

#[derive(Debug, Clone)]
struct Trigger {
    kind: Kind,
    stream: StreamId,
    dir: Direction,
    frame: FrameNo,
    ts: Timestamp,
    offset: i64,
    mtu: Option<u32>,
    segs: Vec<SegRec>,
}

#[derive(Debug, Clone, Copy, Default)]
struct ZeroWindowState {
    /// Frame/ts of the zero-window advertisement that started the episode.
    start: Option<(FrameNo, Timestamp)>,
    /// The sender probed during the episode.
    probed: bool,
}

/// The `probe-timer-stall` detector.
#[derive(Debug, Default)]
pub struct ProbeTimerStall {
    triggers: Vec<Trigger>,
    open: pcapsleuth_detect::StreamMap<(StreamId, Direction), Vec<usize>>,
    follow: FollowUp,
    snd: pcapsleuth_detect::StreamMap<(StreamId, Direction), (i64, i64)>,
    zero: pcapsleuth_detect::StreamMap<(StreamId, Direction), ZeroWindowState>,
    stalls: Vec<StallEvent>,
}

impl ProbeTimerStall {
    fn add_trigger(&mut self, mut t: Trigger) {
        // Look back for out-of-order frames already seen (later timestamps, earlier frame numbers).
        t.segs = self
            .follow
            .history(t.stream, t.dir)
            .filter(|r| r.ts.0 > t.ts.0)
            .copied()
            .collect();
        let key = (t.stream, t.dir);
        self.open.entry(key).or_default().push(self.triggers.len());
        self.triggers.push(t);
    }

    fn on_segment(&mut self, s: &SegmentEvent) {
        self.follow.on_segment(s);
        if s.duplicate_of.is_some() {
            return;
        }
        self.snd.insert((s.stream, s.dir), (s.snd_una, s.snd_nxt));
        // A sender probing into a zero window advertised by its peer.
        if let Some(z) = self.zero.get_mut(&(s.stream, s.dir)) {
            if z.start.is_some()
                && (s.analysis.zero_window_probe
                    || s.wireshark.zero_window_probe
                    || s.analysis.keep_alive
                    || s.payload_len > 0)
            {
                z.probed = true;
            }
        }
        if s.payload_len == 0 {
            return;
        }
        let rec = SegRec::from_event(s);
        if let Some(ids) = self.open.get_mut(&(s.stream, s.dir)) {
            ids.retain(|&i| {
                let Some(t) = self.triggers.get_mut(i) else {
                    return false;
                };
                if rec.ts.0 > t.ts.0 {
                    t.segs.push(rec);
                }
                t.segs.len() < SEGS_PER_TRIGGER && rec.ts.0 <= t.ts.0.saturating_add(MAX_GAP_NS)
            });
            if ids.is_empty() {
                self.open.remove(&(s.stream, s.dir));
            }
        }
    }

    fn on_window(&mut self, w: &pcapsleuth_flow::WindowChangeEvent) {
        // The advertiser is the segment's sender; the data sender is the other direction.
        let sender = (w.stream, w.dir.reverse());
        let zero_now = w.new_bytes == Some(0) || (w.new_bytes.is_none() && w.raw == 0);
        let z = self.zero.entry(sender).or_default();
        if zero_now {
            if z.start.is_none() {
                *z = ZeroWindowState {
                    start: Some((w.frame, w.ts)),
                    probed: false,
                };
            }
            return;
        }
        let Some(_) = z.start else { return };
        let probed = z.probed;
        *z = ZeroWindowState::default();
        if !probed {
            return;
        }
        let offset = self.snd.get(&sender).map_or(0, |&(_, nxt)| nxt);
        self.add_trigger(Trigger {
            kind: Kind::ZeroWindow,
            stream: w.stream,
            dir: sender.1,
            frame: w.frame,
            ts: w.ts,
            offset,
            mtu: None,
            segs: Vec::new(),
        });
    }

    fn on_icmp(&mut self, e: &pcapsleuth_flow::IcmpErrorEvent) {
        if !matches!(e.kind, IcmpKind::FragNeeded | IcmpKind::PacketTooBig) {
            return;
        }
        let (Some(stream), Some(dir), Some(offset)) = (e.stream, e.quoted_dir, e.quoted_rel_seq)
        else {
            return;
        };
        // Stale quote: those bytes were already acknowledged.
        if self
            .snd
            .get(&(stream, dir))
            .is_some_and(|&(una, _)| offset < una)
        {
            return;
        }
        let self_addr = e.icmp_src == e.icmp_dst || e.icmp_src == e.quoted_src.addr;
        self.add_trigger(Trigger {
            kind: if self_addr {
                Kind::SelfFrag
            } else {
                Kind::RouterFrag
            },
            stream,
            dir,
            frame: e.frame,
            ts: e.ts,
            offset,
            mtu: e.mtu,
            segs: Vec::new(),
        });
    }
}

/// Name the kernel timer a trigger → carrier gap matches.
fn timer_name(gap_ns: i64, kind: Kind, carrier: &SegRec) -> Option<&'static str> {
    const MS: i64 = 1_000_000;
    if matches_timer(gap_ns, 200 * MS) {
        return Some("TCP_RTO_MIN 200ms");
    }
    let backoff = [400 * MS, 800 * MS, 1600 * MS, 3200 * MS, 6400 * MS];
    if match_any(gap_ns, &backoff).is_some()
        && (kind == Kind::ZeroWindow || !carrier.retransmission)
    {
        return Some("probe0 backoff 200/400/800 ms");
    }
    if carrier.retransmission {
        return Some("RTO");
    }
    None
}

impl Detector for ProbeTimerStall {
    fn info(&self) -> DetectorInfo {
        DetectorInfo {
            id: ID,
            title: "Data held back until a ~200 ms TCP timer fired",
            explain: EXPLAIN,
        }
    }

    fn on_flow_event(&mut self, event: &FlowEvent) {
        match event {
            FlowEvent::Segment(s) => self.on_segment(s),
            FlowEvent::IcmpError(e) => self.on_icmp(e),
            FlowEvent::WindowChange(w) => self.on_window(w),
            FlowEvent::Stall(s) => {
                if s.pending_bytes > 0 || !s.pending_syn {
                    self.stalls.push(*s);
                }
            }
            FlowEvent::FlowStarted(_) => {}
        }
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        // Cluster triggers of one sender that come in a burst (≤ 50 ms apart, same
        // kind); the earliest one's waiting bytes decide the carrier.
        let mut order: Vec<usize> = (0..self.triggers.len()).collect();
        order.sort_by_key(|&i| {
            self.triggers
                .get(i)
                .map(|t| (t.stream, t.dir.index(), t.ts, t.frame))
        });
        let mut clusters: Vec<Vec<usize>> = Vec::new();
        for i in order {
            let Some(t) = self.triggers.get(i) else {
                continue;
            };
            let joins = clusters
                .last()
                .and_then(|c| c.last())
                .and_then(|&j| self.triggers.get(j))
                .is_some_and(|p| {
                    p.stream == t.stream
                        && p.dir == t.dir
                        && p.kind == t.kind
                        && t.ts.0 - p.ts.0 <= BURST_NS
                });
            match clusters.last_mut() {
                Some(c) if joins => c.push(i),
                _ => clusters.push(vec![i]),
            }
        }
        let mut out = Vec::new();
        for members in clusters {
            let Some(&first_i) = members.first() else {
                continue;
            };
            let Some(t0) = self.triggers.get(first_i) else {
                continue;
            };
            let Some(carrier) = t0
                .segs
                .iter()
                .filter(|r| r.covers(t0.offset))
                .min_by_key(|r| (r.ts, r.frame))
                .copied()
            else {
                continue;
            };
            let stream = t0.stream;
            let t = t0;
            let gap = carrier.ts.0 - t.ts.0;
            if !(MIN_GAP_NS..=MAX_GAP_NS).contains(&gap) {
                continue;
            }
            // Silence: nothing else of this sender's data between the trigger and the carrier.
            if t.segs
                .iter()
                .any(|r| r.ts.0 > t.ts.0 && r.ts.0 < carrier.ts.0)
            {
                continue;
            }
            let timer = timer_name(gap, t.kind, &carrier);
            let released_end = t
                .segs
                .iter()
                .filter(|r| r.ts.0 >= carrier.ts.0 && r.ts.0 <= carrier.ts.0 + RELEASE_NS)
                .map(|r| r.rel_seq + r.payload_len as i64)
                .max()
                .unwrap_or(carrier.rel_seq + carrier.payload_len as i64);
            let bytes_waited = (released_end - t.offset).max(carrier.payload_len as i64);
            let stall = self
                .stalls
                .iter()
                .find(|s| s.stream == stream && s.end_frame == carrier.frame)
                .map(|s| s.end_ts.0 - s.start_ts.0);
            let mut trigger_frames: Vec<u64> = members
                .iter()
                .filter_map(|i| self.triggers.get(*i).map(|t| t.frame))
                .collect();
            trigger_frames.sort_unstable();
            trigger_frames.dedup();
            let mut frames = trigger_frames.clone();
            frames.push(carrier.frame);

            let flow = ctx.flow_ref(stream);
            let who = flow
                .as_ref()
                .map(|f| {
                    let (a, ap, b, bp) = if t.dir == Direction::ClientToServer {
                        (&f.client, f.client_port, &f.server, f.server_port)
                    } else {
                        (&f.server, f.server_port, &f.client, f.client_port)
                    };
                    format!("{} -> {}", ep(a, ap), ep(b, bp))
                })
                .unwrap_or_else(|| format!("tcp.stream {stream}"));
            let timer_txt = timer.map_or("no known timer".to_string(), |n| n.to_string());
            let cause = match t.kind {
                Kind::SelfFrag => format!(
                    "after the host's own frag-needed (MTU {}) refused them",
                    t.mtu.map_or("?".to_string(), |m| m.to_string())
                ),
                Kind::RouterFrag => format!(
                    "after a frag-needed (MTU {})",
                    t.mtu.map_or("?".to_string(), |m| m.to_string())
                ),
                Kind::ZeroWindow => "after the receiver's zero window re-opened".to_string(),
            };
            let summary = format!(
                "{bytes_waited} bytes of {who} left only {:.1} ms {cause}, when a timer fired ({timer_txt}): the application waited for the TCP probe/retransmission timer.",
                ns_to_ms(gap)
            );
            let remedy = match t.kind {
                Kind::SelfFrag | Kind::RouterFrag => "Make the MTU consistent for this destination: set the route/interface MTU on the host (e.g. `ip route change <dst> ... mtu <mtu>`) or clamp the MSS at the tunnel endpoint, so segments built with the old MSS are never refused.".to_string(),
                Kind::ZeroWindow => "Find why the sender missed the window re-opening (window update lost, or re-opened by less than one MSS: the receiver reads in small chunks); larger receive buffers or reads avoid the probe-timer wait.".to_string(),
            };
            let mut ev = Evidence::new();
            ev.insert("trigger".into(), json!(t.kind.label()));
            ev.insert("trigger_frame".into(), json!(t.frame));
            ev.insert("trigger_frames".into(), json!(trigger_frames));
            ev.insert("carrier_frame".into(), json!(carrier.frame));
            ev.insert("gap_ms".into(), json!(ns_to_ms(gap)));
            ev.insert("timer".into(), timer.map_or(Value::Null, |n| json!(n)));
            ev.insert("bytes_waited".into(), json!(bytes_waited));
            ev.insert("waiting_rel_seq".into(), json!(t.offset));
            ev.insert(
                "flow_silent_ms".into(),
                stall.map_or(Value::Null, |s| json!(ns_to_ms(s))),
            );
            out.push(Finding::new(
                ID,
                Severity::Warning,
                summary,
                flow,
                Some(stream),
                frames,
                t.ts.0,
                carrier.ts.0,
                remedy,
                ev,
            ));
        }
        out
    }
}

fn ep(addr: &str, port: u16) -> String {
    if addr.contains(':') {
        format!("[{addr}]:{port}")
    } else {
        format!("{addr}:{port}")
    }
}

#[cfg(test)]
mod tests;
