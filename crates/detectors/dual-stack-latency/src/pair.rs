//! Which IPv4 and IPv6 addresses belong to one host.
//!
//! Evidence, strongest first:
//! - `mac`: one link-layer source address sent from both addresses with an
//!   initial TTL / hop limit (so neither packet was forwarded by a router,
//!   whose MAC fronts many hosts);
//! - `dns`: one name answered with both (A and AAAA records in the
//!   capture), when it has at most [`MAX_DNS_ADDRESSES`] per family (a
//!   larger set is a pool of machines);
//! - `only_sender`: every sample's asking side is one IPv4 and one IPv6
//!   address (the capture host itself);
//! - `service`: one client host reached the same TCP port (or pinged) exactly
//!   one IPv4 and one IPv6 server (weakest: findings that rest on it are info).

use crate::collect::{Collector, Family, Measure};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// Largest number of addresses per family a DNS name may have to pair them.
pub const MAX_DNS_ADDRESSES: usize = 2;

/// Why two addresses are one host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PairedBy {
    /// Same link-layer source address, both unrouted.
    Mac,
    /// Same DNS name.
    Dns,
    /// The only sender of the capture's requests in each family.
    OnlySender,
    /// One service (TCP port) reached on one address per family.
    Service,
}

/// A union-find over addresses, remembering why sets were joined.
#[derive(Debug, Default)]
pub struct Hosts {
    parent: BTreeMap<IpAddr, IpAddr>,
    reasons: BTreeMap<IpAddr, BTreeSet<PairedBy>>,
}

impl Hosts {
    /// The representative of `a`'s host.
    pub fn root(&self, a: IpAddr) -> IpAddr {
        let mut r = a;
        let mut steps = 0;
        while let Some(&p) = self.parent.get(&r) {
            if p == r || steps > 10_000 {
                break;
            }
            r = p;
            steps += 1;
        }
        r
    }

    /// Join the hosts of `a` and `b` because of `why`.
    pub fn join(&mut self, a: IpAddr, b: IpAddr, why: PairedBy) {
        let (ra, rb) = (self.root(a), self.root(b));
        let mut reasons = self.reasons.remove(&ra).unwrap_or_default();
        if ra != rb {
            reasons.extend(self.reasons.remove(&rb).unwrap_or_default());
            let (keep, drop) = if ra < rb { (ra, rb) } else { (rb, ra) };
            self.parent.insert(drop, keep);
            self.parent.entry(keep).or_insert(keep);
            reasons.insert(why);
            self.reasons.insert(keep, reasons);
        } else {
            reasons.insert(why);
            self.reasons.insert(ra, reasons);
        }
    }

    /// Why `a`'s host holds more than one address (empty when it does not).
    pub fn reasons(&self, a: IpAddr) -> Vec<PairedBy> {
        self.reasons
            .get(&self.root(a))
            .map(|r| r.iter().copied().collect())
            .unwrap_or_default()
    }
}

/// Join every address of `addrs` (in ascending order) to the first.
fn join_all<'a>(hosts: &mut Hosts, addrs: impl IntoIterator<Item = &'a IpAddr>, why: PairedBy) {
    let mut it = addrs.into_iter();
    let Some(&first) = it.next() else { return };
    for &a in it {
        hosts.join(first, a, why);
    }
}

/// The hosts of a capture, from what `c` collected.
pub fn hosts(c: &Collector) -> Hosts {
    let mut h = Hosts::default();
    // In MAC and address order (the sets are hashed).
    let mut macs: Vec<_> = c.mac_sources.iter().collect();
    macs.sort_unstable_by_key(|(mac, _)| **mac);
    for (_, addrs) in macs {
        if crate::collect::both_families(addrs) {
            let sorted: BTreeSet<IpAddr> = addrs.iter().copied().collect();
            join_all(&mut h, &sorted, PairedBy::Mac);
        }
    }
    // In name order: which reason joined two addresses must not depend
    // on the map's hashing.
    let mut named: Vec<(&String, &crate::collect::AddrSet)> = c.dns_names.iter().collect();
    named.sort_unstable_by(|a, b| a.0.cmp(b.0));
    for (_, addrs) in named {
        let v4 = addrs.iter().filter(|a| a.is_ipv4()).count();
        let v6 = addrs.len() - v4;
        if v4 >= 1 && v6 >= 1 && v4 <= MAX_DNS_ADDRESSES && v6 <= MAX_DNS_ADDRESSES {
            join_all(&mut h, addrs, PairedBy::Dns);
        }
    }
    let clients: BTreeSet<IpAddr> = c.samples.iter().map(|s| s.client).collect();
    if clients.iter().filter(|a| a.is_ipv4()).count() == 1
        && clients.iter().filter(|a| a.is_ipv6()).count() == 1
    {
        join_all(&mut h, &clients, PairedBy::OnlySender);
    }
    // Service: per (client host, TCP port), the servers of each family.
    let mut per_service: BTreeMap<(IpAddr, u16), BTreeSet<IpAddr>> = BTreeMap::new();
    // ICMP echo counts as one more service (port 0).
    let services = [Measure::TcpHandshakeRtt, Measure::IcmpEchoRtt];
    for s in c.samples.iter().filter(|s| services.contains(&s.measure)) {
        per_service
            .entry((h.root(s.client), s.server_port))
            .or_default()
            .insert(s.server);
    }
    let mut joins = Vec::new();
    for servers in per_service.values() {
        let v4: Vec<&IpAddr> = servers.iter().filter(|a| a.is_ipv4()).collect();
        let v6: Vec<&IpAddr> = servers.iter().filter(|a| a.is_ipv6()).collect();
        if let ([a], [b]) = (v4.as_slice(), v6.as_slice()) {
            // Only addresses not yet tied to another host.
            if h.reasons(**a).is_empty() && h.reasons(**b).is_empty() {
                joins.push((**a, **b));
            }
        }
    }
    for (a, b) in joins {
        h.join(a, b, PairedBy::Service);
    }
    h
}

/// The address of `family` in `addrs` used by the most samples.
pub fn most_used(counts: &BTreeMap<IpAddr, usize>, family: Family) -> Option<IpAddr> {
    counts
        .iter()
        .filter(|(a, _)| Family::of(a) == family)
        .max_by_key(|(a, n)| (**n, std::cmp::Reverse(**a)))
        .map(|(a, _)| *a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn union_find_keeps_reasons() {
        let mut h = Hosts::default();
        h.join(ip("192.0.2.1"), ip("2001:db8::1"), PairedBy::Mac);
        h.join(ip("2001:db8::1"), ip("2001:db8::99"), PairedBy::Dns);
        assert_eq!(h.root(ip("2001:db8::99")), h.root(ip("192.0.2.1")));
        assert_eq!(
            h.reasons(ip("192.0.2.1")),
            vec![PairedBy::Mac, PairedBy::Dns]
        );
        assert_ne!(h.root(ip("192.0.2.2")), h.root(ip("192.0.2.1")));
        assert!(h.reasons(ip("192.0.2.2")).is_empty());
    }

    #[test]
    fn a_router_mac_without_unrouted_ipv6_pairs_nothing() {
        let mut c = Collector::default();
        // Only IPv4 addresses behind this MAC.
        c.mac_sources.insert(
            [2, 0, 0, 0, 0, 1],
            [ip("192.0.2.1"), ip("192.0.2.9")].into_iter().collect(),
        );
        let h = hosts(&c);
        assert_ne!(h.root(ip("192.0.2.1")), h.root(ip("192.0.2.9")));
    }

    #[test]
    fn dns_pools_are_not_one_host() {
        let mut c = Collector::default();
        c.dns_names.insert(
            "pool.example".into(),
            crate::collect::address_set([
                ip("192.0.2.1"),
                ip("192.0.2.2"),
                ip("192.0.2.3"),
                ip("2001:db8::1"),
            ]),
        );
        c.dns_names.insert(
            "one.example".into(),
            crate::collect::address_set([ip("2001:db8::10"), ip("192.0.2.10")]),
        );
        let h = hosts(&c);
        assert_ne!(h.root(ip("192.0.2.1")), h.root(ip("2001:db8::1")));
        assert_eq!(h.root(ip("192.0.2.10")), h.root(ip("2001:db8::10")));
    }
}
