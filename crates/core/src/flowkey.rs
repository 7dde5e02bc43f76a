//! Canonical flow keys.

use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// One end of a transport conversation: address and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Endpoint {
    /// IPv4 or IPv6 address.
    pub addr: IpAddr,
    /// Transport port (0 for port-less protocols).
    pub port: u16,
}

/// Which way a packet travels relative to a flow's canonical key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// From the flow's client (the side that sent the first SYN, else the first sender).
    ClientToServer,
    /// From the server towards the client.
    ServerToClient,
}

impl Direction {
    /// The other direction.
    pub const fn reverse(self) -> Direction {
        match self {
            Direction::ClientToServer => Direction::ServerToClient,
            Direction::ServerToClient => Direction::ClientToServer,
        }
    }
    /// 0 for client→server, 1 for server→client: an index into per-direction arrays.
    pub const fn index(self) -> usize {
        match self {
            Direction::ClientToServer => 0,
            Direction::ServerToClient => 1,
        }
    }
}

/// An unordered address/port pair: `FlowKey::new(a, b) == FlowKey::new(b, a)`.
/// `lo` is the smaller endpoint in (addr, port) order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    /// The lower endpoint.
    pub lo: Endpoint,
    /// The higher endpoint.
    pub hi: Endpoint,
}

impl FlowKey {
    /// Canonical key of the conversation between `a` and `b`.
    pub fn new(a: Endpoint, b: Endpoint) -> Self {
        if a <= b {
            FlowKey { lo: a, hi: b }
        } else {
            FlowKey { lo: b, hi: a }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn unordered() {
        let a = Endpoint {
            addr: "192.0.2.1".parse().unwrap(),
            port: 80,
        };
        let b = Endpoint {
            addr: "192.0.2.2".parse().unwrap(),
            port: 1,
        };
        assert_eq!(FlowKey::new(a, b), FlowKey::new(b, a));
        assert_eq!(FlowKey::new(b, a).lo, a);
    }
}
