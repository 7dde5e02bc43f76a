//! The decision: per host pair (client host, peer host), compare the two
//! families measure by measure and call one consistently slower.

use crate::collect::{Collector, Family, Measure, Sample};
use crate::pair::{self, Hosts, PairedBy};
use crate::stats::{self, FamilyStats, Strength, Thresholds, Verdict};
use pcapsleuth_core::Severity;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// The measures, in evidence order.
pub const MEASURES: [Measure; 4] = [
    Measure::IcmpEchoRtt,
    Measure::TcpHandshakeRtt,
    Measure::TcpRequestResponse,
    Measure::SendPath,
];

/// The thresholds of `m`: 5 samples per family for echo and send path
/// (five seconds of default `ping`), 3 for TCP handshakes and exchanges
/// (connections are rarer); the floors of [`stats::DEFAULT`].
pub fn thresholds(m: Measure) -> Thresholds {
    let min_samples = match m {
        Measure::IcmpEchoRtt | Measure::SendPath => 5,
        Measure::TcpHandshakeRtt | Measure::TcpRequestResponse => 3,
    };
    Thresholds {
        min_samples,
        ..stats::DEFAULT
    }
}

/// One measure compared between the families.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeasureComparison {
    /// What was measured.
    pub measure: Measure,
    /// Fewest samples per family for a verdict.
    pub min_samples: usize,
    /// IPv4 samples (ms); `None` without any.
    pub ipv4: Option<FamilyStats>,
    /// IPv6 samples (ms); `None` without any.
    pub ipv6: Option<FamilyStats>,
    /// IPv6 median − IPv4 median, ms.
    pub ipv6_minus_ipv4_median_ms: Option<f64>,
    /// IPv6 median / IPv4 median (1 decimal); `None` when the IPv4 median is 0.
    pub ipv6_over_ipv4_median_ratio: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
}

/// The evidence of one finding (JSON `evidence`, in this order).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DualStackLatencyEvidence {
    /// The consistently slower family.
    pub slow_family: Family,
    /// A measure on the wire (echo, handshake, request/response) is slower.
    pub slow_on_wire: bool,
    /// The sender's send path (capture time − ping's send stamp) is slower.
    pub slow_in_send_path: bool,
    /// The asking host's IPv4 address (the one most samples used).
    pub client_ipv4: Option<String>,
    /// The asking host's IPv6 address.
    pub client_ipv6: Option<String>,
    /// Why its two addresses are one host.
    pub client_paired_by: Vec<PairedBy>,
    /// The answering host's IPv4 address; `None` for a send-path finding
    /// whose peers could not be paired.
    pub peer_ipv4: Option<String>,
    /// The answering host's IPv6 address.
    pub peer_ipv6: Option<String>,
    /// Why its two addresses are one host.
    pub peer_paired_by: Vec<PairedBy>,
    /// Every packet of the peer's slow-family address carried an initial
    /// TTL / hop limit (64, 128, 255): the peer is on the captured link.
    pub peer_on_link: Option<bool>,
    /// Every packet of the client's slow-family address carried an initial
    /// TTL / hop limit: the capture was taken on the sender or its link.
    pub sender_on_link: Option<bool>,
    /// Layout of the send stamps decoded (`timeval64_le`, `timeval32_le`).
    pub send_stamp_layout: Option<&'static str>,
    /// Every measure with samples, compared.
    pub measures: Vec<MeasureComparison>,
    /// Smallest median and p90 difference, ms.
    pub abs_floor_ms: f64,
    /// Smallest median and p90 ratio.
    pub ratio_floor: f64,
    /// Median ratio from which the finding is a warning.
    pub warning_ratio: f64,
}

/// One diagnosed host pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnosis {
    /// Warning for a strong difference, info for a moderate one or one that
    /// rests on a `service` pairing only.
    pub severity: Severity,
    /// The slow family's (client, peer) addresses: the finding's flow.
    pub flow: (IpAddr, IpAddr),
    /// The addresses of the host that is slow (peer for the wire, sender
    /// for the send path, both when both).
    pub hosts: Vec<String>,
    /// Cited frames: per measure and family, the first three samples and the
    /// middle one.
    pub frames: Vec<u64>,
    /// First and last timestamps of the samples, ns.
    pub start_ns: i64,
    /// Last timestamp, ns.
    pub end_ns: i64,
    /// The facts.
    pub evidence: DualStackLatencyEvidence,
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// Compare one measure over `samples` (already of that measure).
pub fn compare_measure(m: Measure, samples: &[&Sample]) -> MeasureComparison {
    let mut samples: Vec<&Sample> = samples.to_vec();
    if m == Measure::TcpRequestResponse {
        // Only services reached over both families: request/response time
        // includes the server's work, which differs between services.
        let ports = |f: Family| -> BTreeSet<u16> {
            samples
                .iter()
                .filter(|s| Family::of(&s.client) == f)
                .map(|s| s.server_port)
                .collect()
        };
        let both: BTreeSet<u16> = ports(Family::Ipv4)
            .intersection(&ports(Family::Ipv6))
            .copied()
            .collect();
        samples.retain(|s| both.contains(&s.server_port));
    }
    let values = |f: Family| -> Vec<i64> {
        samples
            .iter()
            .filter(|s| Family::of(&s.client) == f)
            .map(|s| s.value_ns)
            .collect()
    };
    let (v4, v6) = (
        FamilyStats::of(&values(Family::Ipv4)),
        FamilyStats::of(&values(Family::Ipv6)),
    );
    let t = thresholds(m);
    let (verdict, _) = stats::compare(v4.as_ref(), v6.as_ref(), &t);
    let (diff, ratio) = match (&v4, &v6) {
        (Some(a), Some(b)) => (
            Some(round3(b.median_ms - a.median_ms)),
            (a.median_ms > 0.0).then(|| (b.median_ms / a.median_ms * 10.0).round() / 10.0),
        ),
        _ => (None, None),
    };
    MeasureComparison {
        measure: m,
        min_samples: t.min_samples,
        ipv4: v4,
        ipv6: v6,
        ipv6_minus_ipv4_median_ms: diff,
        ipv6_over_ipv4_median_ratio: ratio,
        verdict,
    }
}

fn strength(c: &MeasureComparison) -> Strength {
    stats::compare(c.ipv4.as_ref(), c.ipv6.as_ref(), &thresholds(c.measure)).1
}

fn slow_verdict(f: Family) -> Verdict {
    match f {
        Family::Ipv4 => Verdict::Ipv4Slower,
        Family::Ipv6 => Verdict::Ipv6Slower,
    }
}

/// Per family, the first three samples and the middle one (time order).
fn cited_frames(samples: &[&Sample]) -> Vec<u64> {
    let mut out = Vec::new();
    for m in MEASURES {
        let of_m: Vec<&&Sample> = samples.iter().filter(|s| s.measure == m).collect();
        let has = |f: Family| of_m.iter().any(|s| Family::of(&s.client) == f);
        if !(has(Family::Ipv4) && has(Family::Ipv6)) {
            continue;
        }
        for f in [Family::Ipv4, Family::Ipv6] {
            let mut v: Vec<&&Sample> = of_m
                .iter()
                .copied()
                .filter(|s| Family::of(&s.client) == f)
                .collect();
            v.sort_by_key(|s| (s.start_ns, s.frames[0]));
            let mid = v.len() / 2;
            for (i, s) in v.iter().enumerate() {
                if i < 3 || i == mid {
                    out.extend(s.frames());
                }
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Whether every packet from `a` carried an initial TTL; `None` if none seen.
fn on_link(c: &Collector, a: Option<IpAddr>) -> Option<bool> {
    let (initial, other) = c.ttl_counts(&a?)?;
    (initial + other > 0).then_some(other == 0)
}

/// Addresses of the slow and fast sides of one group, by family.
struct Sides {
    client: [Option<IpAddr>; 2],
    peer: [Option<IpAddr>; 2],
}

fn sides(samples: &[&Sample]) -> Sides {
    let mut clients = BTreeMap::new();
    let mut peers = BTreeMap::new();
    for s in samples {
        *clients.entry(s.client).or_insert(0usize) += 1;
        *peers.entry(s.server).or_insert(0usize) += 1;
    }
    let fam = |m: &BTreeMap<IpAddr, usize>| {
        [
            pair::most_used(m, Family::Ipv4),
            pair::most_used(m, Family::Ipv6),
        ]
    };
    Sides {
        client: fam(&clients),
        peer: fam(&peers),
    }
}

fn idx(f: Family) -> usize {
    match f {
        Family::Ipv4 => 0,
        Family::Ipv6 => 1,
    }
}

/// Diagnose one group of samples: `peer_known` is false for a send-path
/// group whose peers were not paired (its peer fields are then empty).
fn diagnose_group(
    c: &Collector,
    hosts: &Hosts,
    samples: &[&Sample],
    peer_known: bool,
) -> Vec<Diagnosis> {
    let measures: Vec<MeasureComparison> = MEASURES
        .iter()
        .filter_map(|&m| {
            let of_m: Vec<&Sample> = samples.iter().copied().filter(|s| s.measure == m).collect();
            (!of_m.is_empty()).then(|| compare_measure(m, &of_m))
        })
        .collect();
    let sd = sides(samples);
    let mut out = Vec::new();
    for slow in [Family::Ipv6, Family::Ipv4] {
        let flagged: Vec<&MeasureComparison> = measures
            .iter()
            .filter(|m| m.verdict == slow_verdict(slow))
            .collect();
        if flagged.is_empty() {
            continue;
        }
        let (Some(client), Some(peer)) = (sd.client[idx(slow)], sd.peer[idx(slow)]) else {
            continue;
        };
        let on_wire = flagged.iter().any(|m| m.measure.on_wire());
        let in_send_path = flagged.iter().any(|m| m.measure == Measure::SendPath);
        let client_paired_by = hosts.reasons(client);
        let peer_paired_by = if peer_known {
            hosts.reasons(peer)
        } else {
            Vec::new()
        };
        let strongest = flagged
            .iter()
            .map(|m| strength(m))
            .max()
            .unwrap_or(Strength::None);
        let weak_pairing = !in_send_path && peer_paired_by == [PairedBy::Service];
        let severity = if strongest == Strength::Strong && !weak_pairing {
            Severity::Warning
        } else {
            Severity::Info
        };
        let show = |a: Option<IpAddr>| a.map(|a| a.to_string());
        let peer_addrs = if peer_known { sd.peer } else { [None, None] };
        let mut hosts_out = Vec::new();
        if on_wire {
            hosts_out.extend(peer_addrs.iter().flatten().map(IpAddr::to_string));
        }
        if in_send_path {
            hosts_out.extend(sd.client.iter().flatten().map(IpAddr::to_string));
        }
        out.push(Diagnosis {
            severity,
            flow: (client, peer),
            hosts: hosts_out,
            frames: cited_frames(samples),
            start_ns: samples.iter().map(|s| s.start_ns).min().unwrap_or(0),
            end_ns: samples.iter().map(|s| s.end_ns).max().unwrap_or(0),
            evidence: DualStackLatencyEvidence {
                slow_family: slow,
                slow_on_wire: on_wire,
                slow_in_send_path: in_send_path,
                client_ipv4: show(sd.client[0]),
                client_ipv6: show(sd.client[1]),
                client_paired_by,
                peer_ipv4: show(peer_addrs[0]),
                peer_ipv6: show(peer_addrs[1]),
                peer_paired_by,
                peer_on_link: if peer_known {
                    on_link(c, Some(peer))
                } else {
                    None
                },
                sender_on_link: on_link(c, Some(client)),
                send_stamp_layout: in_send_path
                    .then(|| {
                        c.stamp_layouts
                            .iter()
                            .max_by_key(|(_, n)| **n)
                            .map(|(l, _)| *l)
                    })
                    .flatten(),
                measures: measures.clone(),
                abs_floor_ms: stats::DEFAULT.abs_floor_ms,
                ratio_floor: stats::DEFAULT.ratio_floor,
                warning_ratio: stats::DEFAULT.warning_ratio,
            },
        });
    }
    out
}

fn both_families<'a>(samples: impl Iterator<Item = &'a &'a Sample>) -> bool {
    let fams: BTreeSet<Family> = samples.map(|s| Family::of(&s.client)).collect();
    fams.len() == 2
}

/// Every host pair reached over both families with a consistently slower
/// family.
pub fn diagnose(c: &Collector) -> Vec<Diagnosis> {
    let hosts = pair::hosts(c);
    let mut groups: BTreeMap<(IpAddr, IpAddr), Vec<&Sample>> = BTreeMap::new();
    for s in &c.samples {
        groups
            .entry((hosts.root(s.client), hosts.root(s.server)))
            .or_default()
            .push(s);
    }
    let mut out = Vec::new();
    // Senders whose send path was compared within one host pair.
    let mut send_path_done = BTreeSet::new();
    for ((client_root, _), samples) in &groups {
        let dual = MEASURES
            .iter()
            .any(|&m| both_families(samples.iter().filter(|s| s.measure == m)));
        if !dual {
            continue;
        }
        if both_families(samples.iter().filter(|s| s.measure == Measure::SendPath)) {
            send_path_done.insert(*client_root);
        }
        out.extend(diagnose_group(c, &hosts, samples, true));
    }
    // The send path is the sender's own: compare it per sender also when
    // its peers could not be paired.
    let mut per_sender: BTreeMap<IpAddr, Vec<&Sample>> = BTreeMap::new();
    for s in c.samples.iter().filter(|s| s.measure == Measure::SendPath) {
        per_sender.entry(hosts.root(s.client)).or_default().push(s);
    }
    for (sender, samples) in &per_sender {
        if send_path_done.contains(sender) || !both_families(samples.iter()) {
            continue;
        }
        out.extend(diagnose_group(c, &hosts, samples, false));
    }
    out
}
