//! Grouping of repeated findings for the human-readable renderers.
//!
//! A scanner or a peer-to-peer client trying stale peers gives one finding
//! per target (136 near-identical `syn-retransmit` findings in one capture);
//! a browser retrying a dead server gives one per connection. Text and
//! Markdown show such findings as one group with its members; JSON and JSON
//! Lines keep every finding (grouping is rendering only).
//!
//! Rule: findings of one detector, one severity and one remedy that share a
//! **peer** are
//! one group when there are at least [`MIN_GROUP`] of them. The peer is the
//! server endpoint (address and port: one service) when those findings have
//! fewer distinct services than clients, else the client address (one host
//! reaching out). Findings without a flow are never grouped.

use pcapsleuth_core::{Finding, Severity};
use std::collections::BTreeMap;

/// Fewest members of a group; fewer findings are shown one by one.
pub const MIN_GROUP: usize = 3;

/// What the members of a [`Group`] share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// One service (`server:port`): many clients or connections to it.
    Service {
        /// Server address.
        server: String,
        /// Server port.
        port: u16,
    },
    /// One client host reaching out to many services.
    Client(String),
}

/// Findings shown together: indexes into the capture's findings, ascending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Indexes of the members in the capture's findings, ascending (the
    /// first one positions the group).
    pub members: Vec<usize>,
    /// What they share; `None` for a finding shown alone.
    pub peer: Option<Peer>,
}

/// Partition `findings` into groups, in the order of their first member.
pub fn group_findings(findings: &[Finding]) -> Vec<Group> {
    // (detector, severity) -> member indexes with a flow.
    let mut buckets: BTreeMap<(&str, Severity), Vec<usize>> = BTreeMap::new();
    for (i, f) in findings.iter().enumerate() {
        if f.flow.is_some() {
            buckets
                .entry((f.detector.as_str(), f.severity))
                .or_default()
                .push(i);
        }
    }
    let mut grouped: Vec<Option<usize>> = vec![None; findings.len()];
    let mut groups: Vec<Group> = Vec::new();
    for members in buckets.values() {
        let flows = || members.iter().filter_map(|&i| findings[i].flow.as_ref());
        let mut services: Vec<(&str, u16)> = flows()
            .map(|f| (f.server.as_str(), f.server_port))
            .collect();
        services.sort_unstable();
        services.dedup();
        let mut clients: Vec<&str> = flows().map(|f| f.client.as_str()).collect();
        clients.sort_unstable();
        clients.dedup();
        let by_service = services.len() < clients.len();
        let mut by_peer: BTreeMap<(String, u16), Vec<usize>> = BTreeMap::new();
        for &i in members {
            if let Some(f) = &findings[i].flow {
                let key = if by_service {
                    (f.server.clone(), f.server_port)
                } else {
                    (f.client.clone(), 0)
                };
                by_peer.entry(key).or_default().push(i);
            }
        }
        for ((addr, port), m) in by_peer {
            if m.len() < MIN_GROUP {
                continue;
            }
            let peer = if by_service {
                Peer::Service { server: addr, port }
            } else {
                Peer::Client(addr)
            };
            for &i in &m {
                grouped[i] = Some(groups.len());
            }
            groups.push(Group {
                members: m,
                peer: Some(peer),
            });
        }
    }
    let mut out: Vec<Group> = Vec::new();
    let mut placed = vec![false; groups.len()];
    for (i, g) in grouped.iter().enumerate() {
        match g {
            None => out.push(Group {
                members: vec![i],
                peer: None,
            }),
            Some(gi) if !placed[*gi] => {
                placed[*gi] = true;
                out.push(groups[*gi].clone());
            }
            Some(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcapsleuth_core::{FlowRef, Protocol};

    fn f(client_port: u16, server: &str, port: u16) -> Finding {
        Finding::builder("syn-retransmit", Severity::Error)
            .summary("s")
            .flow(Some(FlowRef {
                protocol: Protocol::Tcp,
                client: "10.0.0.1".into(),
                client_port,
                server: server.into(),
                server_port: port,
            }))
            .frames(vec![u64::from(client_port)])
            .build()
    }

    #[test]
    fn groups_by_service_or_client() {
        // Three connections of one client to one service: by client (as
        // many services as clients), one group.
        let same = vec![
            f(1, "192.0.2.1", 80),
            f(2, "192.0.2.1", 80),
            f(3, "192.0.2.1", 80),
        ];
        let g = group_findings(&same);
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].members, [0, 1, 2]);
        // A sweep: one client, many services: one group by client.
        let sweep: Vec<Finding> = (1..=5)
            .map(|i| f(i, &format!("192.0.2.{i}"), 6346))
            .collect();
        let g = group_findings(&sweep);
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].peer, Some(Peer::Client("10.0.0.1".into())));
        // Two are shown alone.
        assert_eq!(group_findings(&sweep[..2]).len(), 2);
    }
}
