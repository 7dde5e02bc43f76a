//! The ends of a TCP connection as evidence and prose name them (`"client 192.0.2.10:49001"`), shared by every detector that names a sender or receiver.

use crate::FinishContext;
use pcapsleuth_core::{Direction, Endpoint, StreamId};
use serde::{Serialize, Serializer};
use std::fmt;

/// Which end of a TCP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The side that sent the first SYN (else the first sender seen).
    Client,
    /// The other side.
    Server,
}

impl Role {
    /// The sender of the segments travelling in `dir`.
    pub const fn sender_of(dir: Direction) -> Role {
        match dir {
            Direction::ClientToServer => Role::Client,
            Direction::ServerToClient => Role::Server,
        }
    }
    /// `"client"` or `"server"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Server => "server",
        }
    }
}

/// One end of the connection as the evidence names it. Serialises (and
/// displays) as `"client 192.0.2.10:49001"`, `"server [2001:db8::1]:80"`, or
/// `"client ?"` when the stream's endpoints are unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// Client or server.
    pub role: Role,
    /// Its address and port, when known.
    pub endpoint: Option<Endpoint>,
}

impl Peer {
    /// The end of `stream` that sends the segments travelling in `dir`.
    pub fn sender_of(ctx: &FinishContext, stream: StreamId, dir: Direction) -> Peer {
        let role = Role::sender_of(dir);
        let endpoint = ctx.streams.get(&stream).map(|(c, s)| match role {
            Role::Client => c,
            Role::Server => s,
        });
        Peer { role, endpoint }
    }
    /// Its address as `192.0.2.10:49001` / `[2001:db8::1]:80`, or `?`.
    pub fn address(&self) -> String {
        match self.endpoint {
            Some(e) => match e.addr {
                std::net::IpAddr::V6(a) => format!("[{a}]:{}", e.port),
                std::net::IpAddr::V4(a) => format!("{a}:{}", e.port),
            },
            None => "?".to_string(),
        }
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.role.as_str(), self.address())
    }
}

impl Serialize for Peer {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}
