//! `mss-blackhole` (alias `pmtu-blackhole`): a path-MTU discovery black hole —
//! large segments vanish silently while small ones pass.
//!
//! **Incident.** Seed 004 (`../shared/seeds/004_96b2d0d93e32c8c3.txt`):
//! WireGuard + IPsec tunnels with ICMP blocked site-wide; `scp` crawls at
//! 30 KB/s one way. Full-size segments exceed the tunnel MTU, the router's ICMP
//! "fragmentation needed" (RFC 1191) / ICMPv6 "Packet Too Big" (RFC 8201) never
//! reaches the sender, which re-sends the same oversized segment with RTO
//! backoff forever (RFC 2923 §2.1 "black hole detection"). Fixed by MSS clamping.
//!
//! **Signature** (per flow direction):
//! 1. a data segment is re-sent ≥ [`MIN_RETRANSMISSIONS`] times with the same
//!    size and exponential backoff (gaps roughly doubling, RFC 6298 §5.5;
//!    [`pcapsleuth_detect::retx::backoff_doublings`] ≥ 2) and is never
//!    acknowledged at that size (still unacknowledged at the end of the capture,
//!    or acknowledged only after the sender re-sent the bytes in smaller segments);
//! 2. no segment that large was ever acknowledged in that direction, while
//!    small packets demonstrably pass: smaller data segments were acknowledged,
//!    or the peer kept sending after the first loss, or at least the handshake
//!    completed (the classic symptom: "ssh connects, scp stalls");
//! 3. the failing datagrams are larger than any path must carry (576 bytes for
//!    IPv4, RFC 1122 §3.3.3; 1280 for IPv6, RFC 8200 §5);
//! 4. no ICMP fragmentation-needed / Packet Too Big quoting the flow, or the
//!    same address pair, appears in the capture (otherwise PMTUD is working and
//!    the `frag-needed` detector covers it).
//!
//! The sender's own recovery is recognised: Linux `tcp_mtu_probing=1`
//! (`tcp_mtu_probing()` in `net/ipv4/tcp_timer.c`) drops to `tcp_base_mss`
//! (1024) after a few timeouts and re-sends the stuck bytes in smaller segments,
//! which get acknowledged. The finding is then a `warning` with
//! `sender_recovered_by_mtu_probing: true`; otherwise `error`.
//!
//! **Evidence keys** (other tools rely on these names):
//! - `largest_acked_segment` (bytes, TCP **payload**) and `largest_acked_ip_bytes`
//!   (bytes, IP datagram) of the largest segment acknowledged in that direction;
//! - `smallest_unacked_segment` (bytes, payload) and `smallest_unacked_ip_bytes`
//!   (bytes, IP datagram) of the smallest segment that kept failing;
//! - `retransmissions` (count, of the stuck segment), `rto_ladder_ms` (ms,
//!   gaps between its transmissions), `failing_segments` (count);
//! - `icmp_seen` (bool, always false in a finding);
//! - `path_mtu_lower_bound_bytes` (largest IP datagram proven to pass, this flow
//!   or another between the same hosts), `path_mtu_upper_bound_bytes` (smallest
//!   failing datagram − 1), `path_mtu_bound_bytes` (the MTU assumed for the
//!   recommendation: the lower bound when it is ≥ 1280, else 1280 — the IPv6
//!   minimum MTU and the conventional safe tunnel MTU — when the upper bound
//!   allows it);
//! - `recommended_mss` (bytes: `path_mtu_bound_bytes` − 40 for IPv4, − 60 for
//!   IPv6, the value for `iptables … -j TCPMSS --set-mss`);
//! - `sender_recovered_by_mtu_probing` (bool);
//! - `stall_ms` (ms: first transmission of the stuck segment → its first
//!   smaller re-send when the sender recovered, else → its last transmission).
//!
//! **Known false positives.** A middlebox that drops large packets for another
//! reason (policing by size, a broken NIC offload) looks identical, and the
//! remedy is the same. Heavy random loss hitting only full-size segments for
//! seconds is unlikely but possible on a tiny capture.
//!
//! **Remedy.** Clamp the MSS where the tunnel starts (`iptables -t mangle -A
//! FORWARD -p tcp --tcp-flags SYN,RST SYN -j TCPMSS --set-mss N` or
//! `--clamp-mss-to-pmtu`), or lower the tunnel interface MTU; better, let ICMP
//! type 3 code 4 / ICMPv6 type 2 through. `net.ipv4.tcp_mtu_probing=1` lets Linux
//! senders recover by themselves.

use pcapsleuth_core::{Direction, Endpoint, FrameNo, StreamId};
use pcapsleuth_decode::IcmpKind;
use pcapsleuth_detect::retx::{backoff_doublings, ns_to_ms, DirLedger, Outcome, Retired};
use pcapsleuth_detect::{
    Detector, DetectorInfo, Evidence, Finding, FinishContext, FlowEvent, Severity,
};
use pcapsleuth_flow::SegmentEvent;
use serde_json::json;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;

/// Detector id (the truth files use it).
pub const ID: &str = "mss-blackhole";

/// Alias under which the detector is also documented.
pub const ALIAS: &str = "pmtu-blackhole";

/// Fewest retransmissions of the same oversized segment.
pub const MIN_RETRANSMISSIONS: u32 = 3;

/// The path MTU assumed when nothing larger is proven to pass: the IPv6 minimum
/// link MTU (RFC 8200 §5), the conventional safe tunnel MTU (seed 004 uses MSS 1280).
pub const SAFE_PATH_MTU: u32 = 1280;

/// Smallest datagram every IPv4 path must carry (RFC 791 / RFC 1122 §3.3.3), bytes.
pub const MIN_MTU_V4: u32 = 576;

/// Smallest link MTU IPv6 allows (RFC 8200 §5), bytes.
pub const MIN_MTU_V6: u32 = 1280;

const MAX_CITE: usize = 24;

const EXPLAIN: &str = "Looks for a path-MTU black hole (alias pmtu-blackhole): in one direction of a flow, a segment \
above some size is re-sent three or more times with exponential RTO backoff and never acknowledged, while smaller \
segments in the same direction are, and no ICMP fragmentation-needed / ICMPv6 Packet Too Big quoting the flow \
appears anywhere in the capture. Why: seed 004 - WireGuard + IPsec tunnels with ICMP blocked; full-size segments \
exceed the tunnel MTU, the router's frag-needed never reaches the sender, and it retransmits the same oversized \
segment forever (scp at 30 KB/s). Recognises Linux tcp_mtu_probing recovering by itself (segments shrink to \
tcp_base_mss 1024 after a few timeouts): then a warning instead of an error. Evidence gives the largest acknowledged \
and smallest failing sizes, the path-MTU bounds they imply and the MSS to clamp to. What to do: clamp the MSS at the \
tunnel (iptables -t mangle -A FORWARD -p tcp --tcp-flags SYN,RST SYN -j TCPMSS --set-mss <recommended_mss>, or \
--clamp-mss-to-pmtu), or lower the tunnel MTU; better, let ICMP type 3 code 4 and ICMPv6 type 2 through; \
net.ipv4.tcp_mtu_probing=1 lets Linux senders recover on their own.";

#[derive(Debug, Clone, Default)]
struct DirState {
    ledger: DirLedger,
    /// Timestamp (ns) of the peer's last segment on this flow.
    peer_last_ts: Option<i64>,
}

/// The `mss-blackhole` detector.
#[derive(Debug, Default)]
pub struct MssBlackhole {
    dirs: BTreeMap<(StreamId, usize), DirState>,
    icmp_streams: pcapsleuth_detect::StreamSet<StreamId>,
    icmp_pairs: HashSet<(IpAddr, IpAddr)>,
}

fn dir_of(i: usize) -> Direction {
    if i == 0 {
        Direction::ClientToServer
    } else {
        Direction::ServerToClient
    }
}

fn fmt_ep(e: Endpoint) -> String {
    match e.addr {
        IpAddr::V6(a) => format!("[{a}]:{}", e.port),
        IpAddr::V4(a) => format!("{a}:{}", e.port),
    }
}

fn fmt_ms(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn all_gaps(r: &Retired) -> Vec<i64> {
    r.record.gaps_ns()
}

impl MssBlackhole {
    fn new_dir() -> DirState {
        DirState {
            ledger: DirLedger::new(MIN_RETRANSMISSIONS),
            peer_last_ts: None,
        }
    }

    fn on_segment(&mut self, seg: &SegmentEvent) {
        if seg.duplicate_of.is_some() {
            return;
        }
        let key = (seg.stream, seg.dir.index());
        if seg.payload_len > 0 && !seg.flags.syn() && !seg.flags.rst() {
            self.dirs
                .entry(key)
                .or_insert_with(Self::new_dir)
                .ledger
                .on_data(seg);
        }
        let peer_key = (seg.stream, seg.dir.reverse().index());
        // Every ACK counts (the SYN/ACK acknowledging the SYN proves the handshake passed).
        if seg.flags.ack() || self.dirs.contains_key(&peer_key) {
            let st = self.dirs.entry(peer_key).or_insert_with(Self::new_dir);
            st.peer_last_ts = Some(seg.ts.0);
            if seg.flags.ack() && !seg.flags.rst() {
                if let Some(a) = seg.rel_ack {
                    st.ledger.on_ack(a, seg.frame, seg.ts);
                }
            }
        }
    }
}

impl Detector for MssBlackhole {
    fn info(&self) -> DetectorInfo {
        DetectorInfo {
            id: ID,
            title: "Path-MTU black hole: large segments vanish, small ones pass (pmtu-blackhole)",
            explain: EXPLAIN,
        }
    }

    fn on_flow_event(&mut self, event: &FlowEvent) {
        match event {
            FlowEvent::Segment(seg) => self.on_segment(seg),
            FlowEvent::IcmpError(ic)
                if matches!(ic.kind, IcmpKind::FragNeeded | IcmpKind::PacketTooBig) =>
            {
                if let Some(s) = ic.stream {
                    self.icmp_streams.insert(s);
                }
                self.icmp_pairs
                    .insert((ic.quoted_src.addr, ic.quoted_dst.addr));
            }
            _ => {}
        }
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        let mut dirs = std::mem::take(&mut self.dirs);
        // Largest IP datagram acknowledged per (src addr, dst addr), across flows.
        let mut pair_lower: HashMap<(IpAddr, IpAddr), u32> = HashMap::new();
        for (&(stream, di), st) in dirs.iter_mut() {
            st.ledger.finish();
            if let Some(&(c, s)) = ctx.streams.get(&stream) {
                let (src, dst) = if di == 0 {
                    (c.addr, s.addr)
                } else {
                    (s.addr, c.addr)
                };
                let e = pair_lower.entry((src, dst)).or_insert(0);
                *e = (*e).max(st.ledger.largest_acked_ip);
            }
        }
        let mut out = Vec::new();
        for ((stream, di), mut st) in dirs {
            let retired = st.ledger.take_retired();
            // Segments that kept failing at their own size, with backoff.
            let failing: Vec<&Retired> = retired
                .iter()
                .filter(|r| {
                    let unacked_at_size = match r.outcome {
                        Outcome::CaptureEnd => true,
                        Outcome::Acked { .. } => r.record.superseded,
                    };
                    unacked_at_size && backoff_doublings(&all_gaps(r)) >= 2
                })
                .collect();
            let Some(main) = failing
                .iter()
                .max_by_key(|r| (r.record.tx_count, std::cmp::Reverse(r.record.rel_seq)))
            else {
                continue;
            };
            let smallest_ip = failing.iter().map(|r| r.record.ip_len).min().unwrap_or(0);
            let smallest_payload = failing
                .iter()
                .map(|r| r.record.payload_len)
                .min()
                .unwrap_or(0);
            let dir = dir_of(di);
            let ends = ctx.streams.get(&stream).copied();
            let v6 = ends.is_some_and(|(c, _)| c.addr.is_ipv6());
            // Every IPv4 path carries 576-byte datagrams (RFC 791, RFC 1122
            // 3.3.3) and every IPv6 path 1280 (RFC 8200 section 5): smaller losses are not an MTU limit.
            if smallest_ip <= if v6 { MIN_MTU_V6 } else { MIN_MTU_V4 } {
                continue;
            }
            let l = &st.ledger;
            if l.largest_acked_ip >= smallest_ip || l.largest_acked_payload >= smallest_payload {
                continue; // that size got through: loss, not a size limit
            }
            let first_fail_ts = main.record.txs.first().map(|t| t.ts.0).unwrap_or(i64::MAX);
            let peer_alive = st.peer_last_ts.is_some_and(|t| t > first_fail_ts);
            // Small packets pass: smaller data was acknowledged, the peer kept
            // sending after the first loss, or at least the handshake completed.
            if l.acked_segments == 0 && !peer_alive && l.highest_ack.is_none() {
                continue;
            }
            let (src, dst) = match (ends, dir) {
                (Some((c, s)), Direction::ClientToServer) => (Some(c), Some(s)),
                (Some((c, s)), Direction::ServerToClient) => (Some(s), Some(c)),
                _ => (None, None),
            };
            let icmp_seen = self.icmp_streams.contains(&stream)
                || src
                    .zip(dst)
                    .is_some_and(|(s, d)| self.icmp_pairs.contains(&(s.addr, d.addr)));
            if icmp_seen {
                continue; // PMTUD works: frag-needed covers it
            }
            let recovered = failing
                .iter()
                .any(|r| r.record.superseded && matches!(r.outcome, Outcome::Acked { .. }));
            let cross = src
                .zip(dst)
                .and_then(|(s, d)| pair_lower.get(&(s.addr, d.addr)).copied())
                .unwrap_or(0);
            let lower = l
                .largest_acked_ip
                .max(cross.min(smallest_ip.saturating_sub(1)));
            let upper = smallest_ip.saturating_sub(1);
            let bound = if upper >= SAFE_PATH_MTU {
                lower.max(SAFE_PATH_MTU)
            } else {
                lower
            };
            let overhead = if v6 { 60 } else { 40 };
            let recommended = bound.saturating_sub(overhead);
            let gaps = all_gaps(main);
            let ladder: Vec<f64> = gaps.iter().map(|g| ns_to_ms(*g)).collect();
            let mut frames: Vec<FrameNo> = main.record.txs.iter().map(|t| t.frame).collect();
            for r in &failing {
                if frames.len() >= MAX_CITE {
                    break;
                }
                if let Some(t) = r.record.txs.first() {
                    frames.push(t.frame);
                }
            }
            if let Some(t) = main.record.superseded_by {
                frames.push(t.frame); // first smaller re-send (tcp_mtu_probing)
            }
            if let Outcome::Acked { frame, .. } = main.outcome {
                frames.push(frame);
            }
            let start_ts = main.record.txs.first().map(|t| t.ts.0).unwrap_or(0);
            let end_ts = match main.outcome {
                Outcome::Acked { ts, .. } => ts.0,
                Outcome::CaptureEnd => main.record.txs.last().map(|t| t.ts.0).unwrap_or(start_ts),
            };
            let role = if matches!(dir, Direction::ClientToServer) {
                "client"
            } else {
                "server"
            };
            let saddr = src.map(fmt_ep).unwrap_or_else(|| "?".into());
            let daddr = dst.map(fmt_ep).unwrap_or_else(|| "?".into());
            let mut ev = Evidence::new();
            ev.insert("sender".into(), json!(format!("{role} {saddr}")));
            ev.insert(
                "largest_acked_segment".into(),
                json!(l.largest_acked_payload),
            );
            ev.insert("largest_acked_ip_bytes".into(), json!(l.largest_acked_ip));
            ev.insert("smallest_unacked_segment".into(), json!(smallest_payload));
            ev.insert("smallest_unacked_ip_bytes".into(), json!(smallest_ip));
            ev.insert(
                "retransmissions".into(),
                json!(main.record.retransmissions()),
            );
            ev.insert("failing_segments".into(), json!(failing.len()));
            ev.insert("rto_ladder_ms".into(), json!(ladder));
            ev.insert("icmp_seen".into(), json!(false));
            ev.insert("path_mtu_lower_bound_bytes".into(), json!(lower));
            ev.insert("path_mtu_upper_bound_bytes".into(), json!(upper));
            ev.insert("path_mtu_bound_bytes".into(), json!(bound));
            ev.insert("recommended_mss".into(), json!(recommended));
            ev.insert("sender_recovered_by_mtu_probing".into(), json!(recovered));
            let stall_end = match main.record.superseded_by {
                Some(t) => t.ts.0,
                None => main.record.txs.last().map(|t| t.ts.0).unwrap_or(start_ts),
            };
            ev.insert(
                "stall_ms".into(),
                json!(ns_to_ms(stall_end.saturating_sub(start_ts).max(0))),
            );
            let ladder_txt = match (ladder.first(), ladder.last()) {
                (Some(a), Some(b)) if ladder.len() > 1 => {
                    format!("{} … {} ms", fmt_ms(*a), fmt_ms(*b))
                }
                (Some(a), _) => format!("{} ms", fmt_ms(*a)),
                _ => String::new(),
            };
            let small = if l.acked_segments > 0 {
                format!(
                    "while {}-byte segments were acknowledged",
                    l.largest_acked_payload
                )
            } else if peer_alive {
                "while the peer's small packets kept flowing".to_string()
            } else {
                "although the handshake's small packets passed".to_string()
            };
            let icmp_name = if v6 {
                "ICMPv6 Packet Too Big"
            } else {
                "ICMP fragmentation-needed"
            };
            let (severity, tail) = if recovered {
                (
                    Severity::Warning,
                    format!(
                        ": a path-MTU black hole between {lower} and {smallest_ip} bytes, which the sender escaped by shrinking its segments (tcp_mtu_probing)"
                    ),
                )
            } else {
                (
                    Severity::Error,
                    format!(": a path-MTU black hole between {lower} and {smallest_ip} bytes"),
                )
            };
            let summary = format!(
                "{}-byte segments ({smallest_ip}-byte IP packets) from the {role} {saddr} to {daddr} were re-sent {} times with exponential backoff ({ladder_txt}) and never acknowledged at that size, {small}, and no {icmp_name} came back{tail}.",
                main.record.payload_len,
                main.record.retransmissions()
            );
            let remedy = format!(
                "Clamp the MSS where the tunnel or smaller-MTU link starts (iptables -t mangle -A FORWARD -p tcp --tcp-flags SYN,RST SYN -j TCPMSS --set-mss {recommended}, or --clamp-mss-to-pmtu) or lower that interface's MTU; better, let {icmp_name} through. net.ipv4.tcp_mtu_probing=1 lets Linux senders recover by themselves."
            );
            out.push(Finding::new(
                ID,
                severity,
                summary,
                ctx.flow_ref(stream),
                Some(stream),
                frames,
                start_ts,
                end_ts,
                remedy,
                ev,
            ));
        }
        out
    }
}
