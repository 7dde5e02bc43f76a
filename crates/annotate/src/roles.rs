//! The comment written on one cited frame: what that frame is **in** its
//! finding ("SYN retry 2 of 3, +1006 ms", "self-addressed frag-needed, MTU
//! 1400", "lost between cni0 and eth0", "DNS query re-sent after 5000 ms"),
//! derived from the finding's detector and evidence (the JSON contract, see
//! each detector's README `## Evidence`) plus the decoded frame itself, so the
//! report format does not change. Frames no rule names get their place in the
//! finding ("cited frame 3 of 7"); the first cited frame of each finding also
//! carries the finding's summary.

use pcapsleuth_core::Finding;
use pcapsleuth_decode::{Decoder, IcmpKind, TcpFlags, Transport};

/// What the comment rules need to know about one frame.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameFacts {
    /// Capture time, ns since the Unix epoch.
    pub ts_ns: i64,
    /// TCP flags when the frame carries TCP.
    pub tcp_flags: Option<TcpFlags>,
    /// TCP window field (unscaled), when TCP.
    pub tcp_window: Option<u16>,
    /// TCP payload length, bytes (0 when not TCP).
    pub tcp_payload: u32,
    /// ICMP/ICMPv6 meaning and the MTU it carries (bytes), when ICMP.
    pub icmp: Option<(IcmpKind, Option<u32>)>,
}

impl FrameFacts {
    /// Decode `data` (link type `linktype`) far enough for the rules.
    pub fn of(decoder: &mut Decoder, linktype: u32, data: &[u8], ts_ns: i64) -> FrameFacts {
        let d = decoder.decode(linktype, data);
        let mut facts = FrameFacts {
            ts_ns,
            ..FrameFacts::default()
        };
        match d.transport {
            Transport::Tcp(t) => {
                facts.tcp_flags = Some(t.flags);
                facts.tcp_window = Some(t.window);
                facts.tcp_payload = t.payload_len;
            }
            Transport::Icmp(m) => facts.icmp = Some((m.kind, m.mtu)),
            _ => {}
        }
        facts
    }
}

/// Per-finding memory while the frames go by in order.
#[derive(Debug, Clone, Default)]
pub struct RoleState {
    /// Cited frames of this finding seen so far.
    seen: usize,
    /// Time of the first cited frame, ns.
    first_ts: Option<i64>,
    /// SYN attempts seen (without ACK), and the time of the last one (ns).
    syns: u32,
    last_syn_ts: Option<i64>,
    /// Time of the first SYN, ns.
    first_syn_ts: Option<i64>,
    /// ICMP errors seen.
    icmps: u32,
}

/// Two sightings of one SYN closer than this (ns) are the same attempt seen
/// on two interfaces (`tcpdump -i any`), not a retry: Linux's smallest SYN
/// RTO is 1 s (`TCP_TIMEOUT_INIT`), user-set `TCP_USER_TIMEOUT`s aside.
const SAME_SYN_NS: i64 = 1_000_000;

fn ev_f64(f: &Finding, k: &str) -> Option<f64> {
    f.evidence.get(k).and_then(|v| v.as_f64())
}
fn ev_u64(f: &Finding, k: &str) -> Option<u64> {
    f.evidence.get(k).and_then(|v| v.as_u64())
}
fn ev_str<'f>(f: &'f Finding, k: &str) -> Option<&'f str> {
    f.evidence.get(k).and_then(|v| v.as_str())
}
fn ev_bool(f: &Finding, k: &str) -> bool {
    f.evidence.get(k).and_then(|v| v.as_bool()).unwrap_or(false)
}
fn ev_list(f: &Finding, k: &str) -> Vec<u64> {
    f.evidence
        .get(k)
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|x| x.as_u64()).collect())
        .unwrap_or_default()
}
fn ev_f64_list(f: &Finding, k: &str) -> Vec<f64> {
    f.evidence
        .get(k)
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
        .unwrap_or_default()
}

/// Milliseconds for a comment: whole ms from 10 ms up, else one decimal.
pub fn ms(v: f64) -> String {
    if v.abs() >= 10.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.1} ms")
    }
}

fn ns_to_ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

/// The role text of `frame` in finding `f` (without the `pcapsleuth
/// <detector>:` prefix), updating `st`. Frames must be passed in capture order.
pub fn role(f: &Finding, frame: u64, facts: &FrameFacts, st: &mut RoleState) -> String {
    st.seen += 1;
    let first_ts = *st.first_ts.get_or_insert(facts.ts_ns);
    let specific = match f.detector.as_str() {
        "syn-retransmit" => syn_role(f, facts, st),
        "frag-needed" => frag_role(f, frame, facts, st),
        "cross-interface-loss" => cross_role(f, frame),
        "dns-timeout" => dns_role(f, frame),
        _ => None,
    };
    if let Some(text) = specific {
        return text;
    }
    // Generic roles carry the time since the finding's first cited frame.
    let text = evidence_key_role(f, frame).unwrap_or_else(|| {
        let place = format!("cited frame {} of {}", st.seen, f.frames.len());
        match tcp_text(facts) {
            Some(t) => format!("{t} ({place})"),
            None => place,
        }
    });
    if st.seen > 1 && facts.ts_ns > first_ts {
        format!("{text}, +{}", ms(ns_to_ms(facts.ts_ns - first_ts)))
    } else {
        text
    }
}

/// What a TCP frame is, from its flags, window and payload: `SYN`,
/// `SYN-ACK`, `RST`, `FIN`, `zero window`, `1-byte segment`, `ACK, window
/// 512`.
fn tcp_text(facts: &FrameFacts) -> Option<String> {
    let flags = facts.tcp_flags?;
    let n = facts.tcp_payload;
    Some(if flags.syn() && flags.ack() {
        "SYN-ACK".to_string()
    } else if flags.syn() {
        "SYN".to_string()
    } else if flags.rst() {
        "RST".to_string()
    } else if flags.fin() {
        "FIN".to_string()
    } else if n > 0 {
        format!("{n}-byte segment")
    } else if facts.tcp_window == Some(0) {
        "ACK advertising a zero window".to_string()
    } else {
        format!("ACK, window field {}", facts.tcp_window.unwrap_or(0))
    })
}

fn syn_role(f: &Finding, facts: &FrameFacts, st: &mut RoleState) -> Option<String> {
    let flags = facts.tcp_flags?;
    let n = ev_u64(f, "syn_count").unwrap_or(0);
    if flags.syn() && !flags.ack() {
        let same = st
            .last_syn_ts
            .is_some_and(|t| facts.ts_ns.saturating_sub(t) < SAME_SYN_NS);
        st.last_syn_ts = Some(facts.ts_ns);
        if same {
            return Some(format!(
                "SYN {} of {n} seen again (another interface)",
                st.syns
            ));
        }
        st.syns += 1;
        let first = *st.first_syn_ts.get_or_insert(facts.ts_ns);
        return Some(if st.syns == 1 {
            format!("SYN 1 of {n}, first attempt")
        } else {
            format!(
                "SYN retry {} of {n}, +{}",
                st.syns,
                ms(ns_to_ms(facts.ts_ns - first))
            )
        });
    }
    let since = st
        .first_syn_ts
        .map(|t| format!(", +{} after the first SYN", ms(ns_to_ms(facts.ts_ns - t))))
        .unwrap_or_default();
    if flags.rst() {
        return Some(format!("RST: connection refused{since}"));
    }
    if flags.syn() {
        return Some(format!("SYN-ACK{since}"));
    }
    let late = ev_f64(f, "delay_ms")
        .map(|d| format!(", set up {} late", ms(d)))
        .unwrap_or_default();
    Some(format!("ACK completing the handshake{late}"))
}

fn frag_role(f: &Finding, frame: u64, facts: &FrameFacts, st: &mut RoleState) -> Option<String> {
    if let Some((kind, mtu)) = facts.icmp {
        let what = match kind {
            IcmpKind::FragNeeded => "frag-needed",
            IcmpKind::PacketTooBig => "Packet Too Big",
            _ => return None,
        };
        st.icmps += 1;
        let selfa = if ev_bool(f, "self_addressed") {
            "self-addressed "
        } else {
            ""
        };
        let mtu = mtu
            .or_else(|| ev_u64(f, "mtu").and_then(|m| u32::try_from(m).ok()))
            .map(|m| format!(", MTU {m}"))
            .unwrap_or_default();
        let count = ev_u64(f, "count").unwrap_or(0);
        let of = if count > 1 {
            format!(" ({} of {count})", st.icmps)
        } else {
            String::new()
        };
        return Some(format!("{selfa}{what}{mtu}{of}"));
    }
    if ev_u64(f, "sender_next_frame") == Some(frame) {
        let after = ev_f64(f, "sender_delay_ms")
            .map(|d| format!(", {} after the ICMP", ms(d)))
            .unwrap_or_default();
        return Some(format!("sender's next packet{after}"));
    }
    None
}

fn cross_role(f: &Finding, frame: u64) -> Option<String> {
    let ingress = ev_str(f, "ingress_interface").unwrap_or("?");
    let egress = ev_str(f, "egress_interface").unwrap_or("?");
    if ev_list(f, "lost_frames").contains(&frame) {
        let nat = match ev_str(f, "outer_flow") {
            Some(outer) if Some(outer) != ev_str(f, "inner_flow") => {
                format!(" (would have left as {outer})")
            }
            _ => String::new(),
        };
        return Some(format!("lost between {ingress} and {egress}{nat}"));
    }
    let delay = ev_f64(f, "delay_ms")
        .map(|d| format!(", loss cost {}", ms(d)))
        .unwrap_or_default();
    if ev_u64(f, "crossed_inner_frame") == Some(frame) {
        return Some(format!("retransmission entered on {ingress}{delay}"));
    }
    if ev_u64(f, "crossed_outer_frame") == Some(frame) {
        return Some(format!("retransmission left on {egress}{delay}"));
    }
    if ev_list(f, "retransmission_frames").contains(&frame) {
        return Some("retransmission".to_string());
    }
    None
}

fn dns_role(f: &Finding, frame: u64) -> Option<String> {
    let qtype = ev_str(f, "qtype").unwrap_or("");
    let qname = ev_str(f, "qname").unwrap_or("");
    let unanswered = ev_list(f, "unanswered_frames").contains(&frame);
    let retries = ev_list(f, "retry_frames");
    if let Some(i) = retries.iter().position(|&r| r == frame) {
        let gap = ev_f64_list(f, "gaps_ms")
            .get(i)
            .map(|g| format!(" after {}", ms(*g)))
            .unwrap_or_default();
        let still = if unanswered { ", unanswered again" } else { "" };
        return Some(format!("DNS {qtype} query re-sent{gap}{still}"));
    }
    if unanswered {
        return Some(format!("DNS {qtype} {qname} query, never answered"));
    }
    if ev_u64(f, "answer_frame") == Some(frame) {
        let lost = ev_f64(f, "time_lost_ms")
            .map(|d| format!(", {} lost waiting", ms(d)))
            .unwrap_or_default();
        return Some(format!("DNS answer{lost}"));
    }
    let sibling = ev_str(f, "sibling_qtype").unwrap_or("sibling");
    if ev_list(f, "collateral_resend_frames").contains(&frame) {
        return Some(format!(
            "{sibling} query re-sent with it (collateral: it was answered)"
        ));
    }
    if ev_list(f, "sibling_frames").contains(&frame) {
        return Some(format!("{sibling} query of the same lookup"));
    }
    if ev_u64(f, "other_sightings").is_some_and(|n| n > 0) {
        return Some(
            "the same query seen again (another interface, before/after NAT, or -i any)"
                .to_string(),
        );
    }
    None
}

/// Any evidence field named `*_frame` equal to `frame`, or `*_frames`
/// containing it, names the role: `sender_next_frame` → "sender next".
fn evidence_key_role(f: &Finding, frame: u64) -> Option<String> {
    for (k, v) in &f.evidence {
        let hit = if let Some(stem) = k.strip_suffix("_frame") {
            (v.as_u64() == Some(frame)).then_some(stem)
        } else if let Some(stem) = k.strip_suffix("_frames") {
            v.as_array()
                .is_some_and(|a| a.iter().any(|x| x.as_u64() == Some(frame)))
                .then_some(stem)
        } else {
            None
        };
        if let Some(stem) = hit {
            return Some(stem.replace('_', " "));
        }
    }
    None
}
