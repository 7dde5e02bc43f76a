//! `frag-needed`: ICMP "fragmentation needed" (ICMPv4 type 3 code 4, RFC 1191)
//! and ICMPv6 Packet Too Big (type 2, RFC 8201): a path (or the host itself)
//! could not carry a datagram and told the sender the MTU to use.
//!
//! # Incident
//! Seed `000_0b9ea5d7040276bf.txt`: an IPVS load balancer in IPIP tunnel mode
//! adds 20 bytes and answers full-size segments with frag-needed, MTU 1480.
//! Once the client's route MTU cache holds 1480, *another* socket still using
//! the old MSS has its segment refused by its own kernel in `ip_fragment()`:
//! a **self-addressed** frag-needed (source == destination == the host, seen on
//! `lo`); the data then leaves only when the probe0 timer fires ≈200 ms later
//! (see the `probe-timer-stall` detector). The cache expires after
//! `net.ipv4.route.mtu_expires` (600 s), so the episode recurs every ≈10 min.
//!
//! # Signature
//! Every ICMP frag-needed / Packet Too Big: from [`FlowEvent::IcmpError`] when
//! it quotes a TCP segment, from the packet itself when it quotes anything else
//! (reported without `tcp_stream`). Repeats are grouped per (TCP flow, MTU), or
//! per (quoted source, quoted destination, protocol, MTU) for non-TCP quotes.
//!
//! # Evidence (keys other detectors rely on)
//! - `mtu` (bytes), `count` (ICMP messages in the group), `icmp_source`,
//!   `icmp_destination` (addresses).
//! - `self_addressed` (bool): ICMP source == its destination, or == the quoted
//!   packet's source (the host refused its own packet: local route MTU).
//! - `quoted_seq` (raw TCP sequence of the first quoted segment, or null),
//!   `quoted_rel_seq` (bytes relative to the ISN, or null),
//!   `quoted_size_bytes` (largest quoted IP datagram length),
//!   `mtu_deficit_bytes` (quoted size − MTU, or 1500 − MTU when not larger).
//! - `largest_captured_bytes` (largest IP datagram captured in the quoted
//!   direction, or null) and `quoted_not_captured` (bool: the quoted datagram
//!   exceeds the MTU but everything the sender was seen to send fits it: the
//!   oversize datagram was built after the capture point, by LRO/GRO
//!   coalescing on a forwarding device, or the ICMP is forged; public corpus
//!   `filestore-5408/input.pcap`, MTU 1500 quoting 1645-byte datagrams).
//! - `encapsulation_guess` (string, from the MTU: 1480 IPIP/IPVS, 1476 GRE,
//!   1450 VXLAN, 1420/1440 WireGuard, 1492 PPPoE, 1400–1438 IPsec ESP, else "unknown").
//! - `sender_next` ("immediate" ≤ 10 ms | "delayed" | "never" | "unknown" for
//!   non-TCP) and `sender_delay_ms` (ms, or null): after the first ICMP of the
//!   group, the first segment (by timestamp) in the quoted direction carrying
//!   the quoted sequence; `sender_next_frame`.
//! - `recurrence_s` (s, or null): interval between bursts for the same
//!   destination and MTU when they are ≈600 s apart (route MTU cache expiry).
//!
//! # Severity
//! Self-addressed → warning. From a router → info (PMTU discovery working as
//! designed), unless the sender then waited ≥ 150 ms → warning.
//!
//! # False positives
//! Frag-needed is normal PMTU discovery: a single router ICMP followed by an
//! immediate smaller retransmission costs one RTT. Forged ICMP (RFC 5927) looks
//! the same; `sender_next` shows whether the host believed it.
//!
//! # Remedy
//! Make the MTU consistent along the path: lower the interface or route MTU
//! (`ip route ... mtu 1480`) on the hosts behind the tunnel, or clamp the MSS
//! (`iptables -t mangle ... TCPMSS --clamp-mss-to-pmtu`) on the tunnel
//! endpoint, so full-size segments never need the ICMP round trip.

use pcapsleuth_core::time::ns_to_ms;
use pcapsleuth_core::{Direction, Endpoint, FrameNo, SeqNum, StreamId, Timestamp};
use pcapsleuth_decode::{IcmpKind, Transport};
use pcapsleuth_detect::followup::{FollowUp, WatchId};
use pcapsleuth_detect::{
    Detector, DetectorInfo, Evidence, Finding, FinishContext, FlowEvent, FlowRef, PacketContext,
    Severity,
};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// Detector id.
pub const ID: &str = "frag-needed";

/// A sender reaction within this many ns of the ICMP is "immediate".
pub const IMMEDIATE_NS: i64 = 10_000_000;
/// A sender wait at least this long (ns) after a router's ICMP makes the finding a warning.
pub const STALL_NS: i64 = 150_000_000;
/// Route MTU cache lifetime, s (`net.ipv4.route.mtu_expires`, `net.ipv6.route.mtu_expires`).
pub const MTU_EXPIRES_S: i64 = 600;
/// ICMPs for one destination more than this far apart (ns) start a new burst.
const BURST_GAP_NS: i64 = 60_000_000_000;

const EXPLAIN: &str = "\
Reports every ICMP 'fragmentation needed' (IPv4 type 3 code 4) and ICMPv6 'Packet Too Big' \
(type 2), grouped per flow and MTU: the MTU announced, who sent it, the quoted datagram size, \
a guess at the encapsulation that ate the difference (1480 IPIP/IPVS, 1476 GRE, 1450 VXLAN, \
1420/1440 WireGuard, 1492 PPPoE, ~1400-1438 IPsec), and what the sender did next with the \
refused bytes (immediate smaller retransmission, a delay, or nothing).\n\
Why: seed 000 (IPVS load balancer with IPIP forwarding): router frag-needed with MTU 1480, and \
a SELF-ADDRESSED frag-needed (source == destination, on lo) when the host's cached route MTU \
shrank under a socket still using the old MSS; that data then waited ~200 ms for the probe0 \
timer. The route MTU cache expires after 600 s, so it recurs (recurrence_s).\n\
What to do: make the MTU consistent along the path (route/interface MTU on hosts behind the \
tunnel, e.g. `ip route change ... mtu 1480`) or clamp the MSS on the tunnel endpoint \
(`TCPMSS --clamp-mss-to-pmtu`). A router frag-needed followed by an immediate retransmission \
is PMTU discovery working: info only.";

/// Guess what encapsulation explains an MTU below 1500 (bytes).
pub fn encapsulation_guess(mtu: u32) -> &'static str {
    match mtu {
        1480 => "IPIP / IPVS tunnel mode (20 bytes)",
        1476 => "GRE (24 bytes)",
        1450 => "VXLAN (50 bytes)",
        1420 | 1440 => "WireGuard (60/80 bytes)",
        1492 => "PPPoE (8 bytes)",
        1400..=1438 => "IPsec ESP (likely)",
        1280 => "IPv6 minimum MTU (1280)",
        _ => "unknown",
    }
}

/// One ICMP frag-needed / PTB message.
#[derive(Debug, Clone)]
struct Icmp {
    frame: FrameNo,
    ts: Timestamp,
    mtu: Option<u32>,
    icmp_src: IpAddr,
    icmp_dst: IpAddr,
    quoted_src: Endpoint,
    quoted_dst: Endpoint,
    quoted_proto: u8,
    quoted_ip_len: u32,
    quoted_seq: Option<SeqNum>,
    quoted_rel_seq: Option<i64>,
    stream: Option<StreamId>,
    quoted_dir: Option<Direction>,
    matched_frame: Option<FrameNo>,
    watch: Option<WatchId>,
}

impl Icmp {
    fn self_addressed(&self) -> bool {
        self.icmp_src == self.icmp_dst || self.icmp_src == self.quoted_src.addr
    }
}

/// Grouping key: TCP stream (with its quoted direction), else the quoted
/// addresses and protocol; plus the MTU.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum GroupKey {
    Tcp(StreamId, u8, u32),
    Other(IpAddr, IpAddr, u8, u32),
}

/// The `frag-needed` detector.
#[derive(Debug, Default)]
pub struct FragNeeded {
    icmps: Vec<Icmp>,
    seen_frames: pcapsleuth_detect::StreamSet<FrameNo>,
    follow: FollowUp,
    /// Largest IP datagram (bytes) captured per (stream, direction index).
    largest_sent: pcapsleuth_detect::StreamMap<(StreamId, usize), u32>,
}

impl FragNeeded {
    fn on_icmp_event(&mut self, e: &pcapsleuth_flow::IcmpErrorEvent) {
        if !matches!(e.kind, IcmpKind::FragNeeded | IcmpKind::PacketTooBig) {
            return;
        }
        if !self.seen_frames.insert(e.frame) {
            return;
        }
        let watch = match (e.stream, e.quoted_dir, e.quoted_rel_seq) {
            (Some(s), Some(d), Some(q)) => Some(self.follow.watch(s, d, q, e.ts)),
            _ => None,
        };
        self.icmps.push(Icmp {
            frame: e.frame,
            ts: e.ts,
            mtu: e.mtu,
            icmp_src: e.icmp_src,
            icmp_dst: e.icmp_dst,
            quoted_src: e.quoted_src,
            quoted_dst: e.quoted_dst,
            quoted_proto: 6,
            quoted_ip_len: e.quoted_ip_len,
            quoted_seq: e.quoted_seq,
            quoted_rel_seq: e.quoted_rel_seq,
            stream: e.stream,
            quoted_dir: e.quoted_dir,
            matched_frame: e.matched.map(|m| m.frame),
            watch,
        });
    }
}

impl Detector for FragNeeded {
    fn info(&self) -> DetectorInfo {
        DetectorInfo {
            id: ID,
            title: "ICMP fragmentation needed / Packet Too Big",
            explain: EXPLAIN,
        }
    }

    fn on_flow_event(&mut self, event: &FlowEvent) {
        match event {
            FlowEvent::Segment(s) => {
                self.follow.on_segment(s);
                let m = self
                    .largest_sent
                    .entry((s.stream, s.dir.index()))
                    .or_insert(0);
                *m = (*m).max(s.ip_len);
            }
            FlowEvent::IcmpError(e) => self.on_icmp_event(e),
            _ => {}
        }
    }

    fn on_packet(&mut self, pkt: &PacketContext<'_>) {
        let Transport::Icmp(m) = pkt.decoded.transport else {
            return;
        };
        if !matches!(m.kind, IcmpKind::FragNeeded | IcmpKind::PacketTooBig) {
            return;
        }
        if self.seen_frames.contains(&pkt.meta.frame) {
            return;
        }
        let (Some(ip), Some(q)) = (pkt.decoded.ip, m.quoted) else {
            return;
        };
        self.seen_frames.insert(pkt.meta.frame);
        self.icmps.push(Icmp {
            frame: pkt.meta.frame,
            ts: pkt.meta.ts,
            mtu: m.mtu,
            icmp_src: ip.src,
            icmp_dst: ip.dst,
            quoted_src: Endpoint {
                addr: q.ip.src,
                port: q.src_port.unwrap_or(0),
            },
            quoted_dst: Endpoint {
                addr: q.ip.dst,
                port: q.dst_port.unwrap_or(0),
            },
            quoted_proto: q.ip.protocol,
            quoted_ip_len: q.ip.total_len,
            quoted_seq: q.tcp_seq,
            quoted_rel_seq: None,
            stream: None,
            quoted_dir: None,
            matched_frame: None,
            watch: None,
        });
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        let mut groups: BTreeMap<GroupKey, Vec<&Icmp>> = BTreeMap::new();
        for i in &self.icmps {
            let mtu = i.mtu.unwrap_or(0);
            let key = match i.stream {
                Some(s) => GroupKey::Tcp(s, i.quoted_dir.map_or(0, |d| d.index() as u8), mtu),
                None => GroupKey::Other(i.quoted_src.addr, i.quoted_dst.addr, i.quoted_proto, mtu),
            };
            groups.entry(key).or_default().push(i);
        }
        let recurrence = recurrences(&self.icmps);
        let mut out = Vec::new();
        for (key, mut list) in groups {
            list.sort_by_key(|i| (i.ts, i.frame));
            let Some(first) = list.first().copied() else {
                continue;
            };
            let mtu = first.mtu.unwrap_or(0);
            let self_addr = list.iter().any(|i| i.self_addressed());
            let quoted_size = list.iter().map(|i| i.quoted_ip_len).max().unwrap_or(0);
            let deficit = if quoted_size > mtu {
                quoted_size - mtu
            } else {
                1500u32.saturating_sub(mtu)
            };
            let (stream, dir) = match key {
                GroupKey::Tcp(s, d, _) => (
                    Some(s),
                    Some(if d == 0 {
                        Direction::ClientToServer
                    } else {
                        Direction::ServerToClient
                    }),
                ),
                GroupKey::Other(..) => (None, None),
            };
            let reaction = first.watch.and_then(|w| self.follow.result(w));
            let (sender_next, delay_ns) = match (first.watch, reaction) {
                (None, _) => ("unknown", None),
                (Some(_), None) => ("never", None),
                (Some(_), Some(r)) => {
                    let d = r.ts.0 - first.ts.0;
                    (
                        if d <= IMMEDIATE_NS {
                            "immediate"
                        } else {
                            "delayed"
                        },
                        Some(d),
                    )
                }
            };
            let stalled = delay_ns.is_some_and(|d| d >= STALL_NS);
            let severity = if self_addr || stalled {
                Severity::Warning
            } else {
                Severity::Info
            };
            let rec_s = recurrence.get(&(first.quoted_dst.addr, mtu)).copied();

            let mut frames: Vec<u64> = list.iter().map(|i| i.frame).collect();
            frames.extend(list.iter().filter_map(|i| i.matched_frame));
            frames.extend(reaction.map(|r| r.frame));
            let mut ts: Vec<i64> = list.iter().map(|i| i.ts.0).collect();
            ts.extend(reaction.map(|r| r.ts.0));
            let start = ts.iter().copied().min().unwrap_or(first.ts.0);
            let end = ts.iter().copied().max().unwrap_or(first.ts.0);

            let what = if first.icmp_src.is_ipv4() {
                "ICMP fragmentation-needed"
            } else {
                "ICMPv6 Packet Too Big"
            };
            let n = list.len();
            let times = if n == 1 {
                String::new()
            } else {
                format!(" ({n} messages)")
            };
            let proto = match first.quoted_proto {
                6 => "TCP",
                17 => "UDP",
                1 => "ICMP",
                58 => "ICMPv6",
                _ => "IP",
            };
            // Only TCP and UDP have ports; "[addr]:0" for an ICMP quote misleads.
            let flow_txt = if matches!(first.quoted_proto, 6 | 17) {
                format!(
                    "{proto} {} -> {}",
                    sock(first.quoted_src),
                    sock(first.quoted_dst)
                )
            } else {
                format!(
                    "{proto} {} -> {}",
                    first.quoted_src.addr, first.quoted_dst.addr
                )
            };
            // The quoted datagram is bigger than anything the sender was seen
            // to send, and what it sent fits the MTU: the oversize datagram was
            // built after the capture point (segments coalesced by LRO/GRO on a
            // forwarding device) or the ICMP is forged (RFC 5927 section 3).
            let largest_captured = match (stream, dir) {
                (Some(s), Some(d)) => self.largest_sent.get(&(s, d.index())).copied(),
                _ => None,
            };
            let quoted_not_captured = largest_captured
                .is_some_and(|l| l > 0 && quoted_size > l && l <= mtu && quoted_size > mtu);
            let reaction_txt = match (sender_next, delay_ns) {
                ("immediate", Some(d)) => {
                    format!("; the sender re-sent the bytes {:.3} ms later", ns_to_ms(d))
                }
                ("delayed", Some(d)) => format!(
                    "; the sender re-sent the bytes only {:.1} ms later",
                    ns_to_ms(d)
                ),
                ("never", _) => {
                    "; the sender never re-sent the quoted bytes in this capture".to_string()
                }
                _ => String::new(),
            };
            let mut summary = if self_addr {
                format!(
                    "Self-addressed {what}{times} from {} to itself, MTU {mtu}: the host's own route MTU ({mtu}) is below what the socket of {flow_txt} still uses{reaction_txt}.",
                    first.icmp_src
                )
            } else {
                let unit = |n: u32| if n == 1 { "byte" } else { "bytes" };
                if quoted_not_captured {
                    format!(
                        "{what}{times} from {} for {flow_txt}: path MTU {mtu} bytes, quoting a {quoted_size}-byte datagram the sender was never seen to send (its largest captured datagram is {} bytes, within the MTU): a device on the path coalesced segments (LRO/GRO) and could not forward the result, or the ICMP is forged (RFC 5927){reaction_txt}.",
                        first.icmp_src,
                        largest_captured.unwrap_or(0)
                    )
                } else {
                    let size_txt = if quoted_size > mtu {
                        format!(
                            "{deficit} {} short of the {quoted_size}-byte datagram",
                            unit(deficit)
                        )
                    } else {
                        format!("{deficit} {} below 1500", unit(deficit))
                    };
                    format!(
                        "{what}{times} from {} for {flow_txt}: path MTU {mtu} bytes, {size_txt} (encapsulation guess: {}){reaction_txt}.",
                        first.icmp_src,
                        encapsulation_guess(mtu)
                    )
                }
            };
            if let Some(r) = rec_s {
                summary.push_str(&format!(
                    " It recurs every ~{r} s: the route MTU cache expires (net.ipv4.route.mtu_expires = {MTU_EXPIRES_S})."
                ));
            }
            let remedy = if self_addr {
                format!(
                    "Set the route or interface MTU to {mtu} on this host (e.g. `ip route change <dst> ... mtu {mtu}`) or clamp the MSS at the tunnel endpoint, so sockets never build segments larger than the path ({}).",
                    encapsulation_guess(mtu)
                )
            } else if quoted_not_captured {
                "Find the device that coalesces segments before forwarding (disable LRO/GRO on routers, bridges and hypervisor switches: `ethtool -K <dev> lro off gro off`), or, if the ICMP is forged, filter it; lowering this sender's MTU does not help, its packets already fit.".to_string()
            } else if stalled {
                format!("Lower the MTU/MSS towards this destination to {mtu} (route MTU or `TCPMSS --clamp-mss-to-pmtu` on the tunnel endpoint) so the sender never waits for PMTU discovery.")
            } else {
                format!("PMTU discovery worked; to avoid the extra round trip, clamp the MSS (`TCPMSS --clamp-mss-to-pmtu`) or set MTU {mtu} on hosts behind the {} link.", encapsulation_guess(mtu))
            };

            let mut ev = Evidence::new();
            ev.insert("mtu".into(), json!(mtu));
            ev.insert("count".into(), json!(n));
            ev.insert("self_addressed".into(), json!(self_addr));
            ev.insert("icmp_source".into(), json!(first.icmp_src.to_string()));
            ev.insert("icmp_destination".into(), json!(first.icmp_dst.to_string()));
            ev.insert(
                "quoted_seq".into(),
                first.quoted_seq.map_or(Value::Null, |s| json!(s.0)),
            );
            ev.insert(
                "quoted_rel_seq".into(),
                first.quoted_rel_seq.map_or(Value::Null, |s| json!(s)),
            );
            ev.insert("quoted_size_bytes".into(), json!(quoted_size));
            ev.insert(
                "largest_captured_bytes".into(),
                largest_captured.map_or(Value::Null, |l| json!(l)),
            );
            ev.insert("quoted_not_captured".into(), json!(quoted_not_captured));
            ev.insert("mtu_deficit_bytes".into(), json!(deficit));
            ev.insert(
                "encapsulation_guess".into(),
                json!(encapsulation_guess(mtu)),
            );
            ev.insert("sender_next".into(), json!(sender_next));
            ev.insert(
                "sender_delay_ms".into(),
                delay_ns.map_or(Value::Null, |d| json!(ns_to_ms(d))),
            );
            ev.insert(
                "sender_next_frame".into(),
                reaction.map_or(Value::Null, |r| json!(r.frame)),
            );
            ev.insert(
                "quoted_direction".into(),
                dir.map_or(Value::Null, |d| json!(d)),
            );
            ev.insert(
                "recurrence_s".into(),
                rec_s.map_or(Value::Null, |r| json!(r)),
            );
            let flow = match stream {
                Some(s) => ctx.flow_ref(s),
                None => Some(FlowRef {
                    protocol: proto.to_ascii_lowercase(),
                    client: first.quoted_src.addr.to_string(),
                    client_port: first.quoted_src.port,
                    server: first.quoted_dst.addr.to_string(),
                    server_port: first.quoted_dst.port,
                }),
            };
            out.push(Finding::new(
                ID, severity, summary, flow, stream, frames, start, end, remedy, ev,
            ));
        }
        out
    }
}

fn sock(e: Endpoint) -> String {
    match e.addr {
        IpAddr::V4(a) => format!("{a}:{}", e.port),
        IpAddr::V6(a) => format!("[{a}]:{}", e.port),
    }
}

/// Per (quoted destination, MTU): the burst interval in whole seconds when
/// successive bursts of ICMPs are ≈600 s apart (570–720 s: the cache expires
/// 600 s after it was learned; the next oversize segment may come a little later).
fn recurrences(icmps: &[Icmp]) -> BTreeMap<(IpAddr, u32), i64> {
    let mut by_dst: BTreeMap<(IpAddr, u32), Vec<i64>> = BTreeMap::new();
    for i in icmps {
        by_dst
            .entry((i.quoted_dst.addr, i.mtu.unwrap_or(0)))
            .or_default()
            .push(i.ts.0);
    }
    let mut out = BTreeMap::new();
    for (k, mut ts) in by_dst {
        ts.sort_unstable();
        let mut starts: Vec<i64> = Vec::new();
        let mut last = i64::MIN;
        for t in ts {
            if last == i64::MIN || t - last > BURST_GAP_NS {
                starts.push(t);
            }
            last = t;
        }
        if starts.len() < 2 {
            continue;
        }
        let gaps: Vec<i64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
        let ok = gaps
            .iter()
            .all(|&g| (570_000_000_000..=720_000_000_000).contains(&g));
        if ok {
            let mean = gaps.iter().sum::<i64>() / gaps.len() as i64;
            out.insert(k, (mean + 500_000_000) / 1_000_000_000);
        }
    }
    out
}

#[cfg(test)]
mod tests;
