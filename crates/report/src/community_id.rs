//! Community ID flow hashing, version 1 (Corelight,
//! <https://github.com/corelight/community-id-spec>), so findings and flows
//! join with Zeek `conn.log`, Suricata EVE and Elastic records on one string.
//!
//! `1:` + base64 (standard alphabet, padded) of SHA-1 over: seed (u16, network
//! order), the lower endpoint's address, the higher endpoint's address, the IP
//! protocol number (u8), one zero pad byte, then the lower and higher
//! endpoint's ports (u16, network order). Endpoints are ordered by address
//! bytes, then port, so both directions of a flow give the same id.

use base64::Engine as _;
use pcapsleuth_core::{FlowRef, Protocol};
use sha1::{Digest, Sha1};
use std::net::IpAddr;

/// The Community ID (v1, seed 0) of a transport flow between
/// `a:a_port` and `b:b_port` (order does not matter); `None` when an address
/// does not parse or the two are of different families.
pub fn community_id_v1(a: &str, a_port: u16, b: &str, b_port: u16, proto: u8) -> Option<String> {
    community_id_v1_seeded(0, a, a_port, b, b_port, proto)
}

/// [`community_id_v1`] with an explicit `seed` (the spec's optional seed).
pub fn community_id_v1_seeded(
    seed: u16,
    a: &str,
    a_port: u16,
    b: &str,
    b_port: u16,
    proto: u8,
) -> Option<String> {
    let octets = |s: &str| -> Option<Vec<u8>> {
        Some(match s.parse::<IpAddr>().ok()? {
            IpAddr::V4(v) => v.octets().to_vec(),
            IpAddr::V6(v) => v.octets().to_vec(),
        })
    };
    let (mut x, mut y) = ((octets(a)?, a_port), (octets(b)?, b_port));
    if x.0.len() != y.0.len() {
        return None;
    }
    if x > y {
        std::mem::swap(&mut x, &mut y);
    }
    let mut h = Sha1::new();
    h.update(seed.to_be_bytes());
    h.update(&x.0);
    h.update(&y.0);
    h.update([proto, 0]);
    h.update(x.1.to_be_bytes());
    h.update(y.1.to_be_bytes());
    let digest = h.finalize();
    Some(format!(
        "1:{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    ))
}

/// The Community ID of a finding's flow: TCP (6) and UDP (17) only. ICMP
/// flows get none, because the spec hashes the ICMP type and code, which a
/// [`FlowRef`] does not carry.
pub fn of_flow_ref(f: &FlowRef) -> Option<String> {
    let proto = match f.protocol {
        Protocol::Tcp => pcapsleuth_core::ip_protocol::TCP,
        Protocol::Udp => pcapsleuth_core::ip_protocol::UDP,
        _ => return None,
    };
    community_id_v1(&f.client, f.client_port, &f.server, f.server_port, proto)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spec's baseline examples (community-id-spec README and its
    /// `baseline/` data), checked independently with Python's hashlib.
    #[test]
    fn spec_examples() {
        assert_eq!(
            community_id_v1("128.232.110.120", 34855, "66.35.250.204", 80, 6).as_deref(),
            Some("1:LQU9qZlK+B5F3KDmev6m5PMibrg=")
        );
        // Direction does not matter.
        assert_eq!(
            community_id_v1("66.35.250.204", 80, "128.232.110.120", 34855, 6).as_deref(),
            Some("1:LQU9qZlK+B5F3KDmev6m5PMibrg=")
        );
        assert_eq!(
            community_id_v1("192.168.1.52", 54585, "8.8.8.8", 53, 17).as_deref(),
            Some("1:d/FP5EW3wiY1vCndhwleRRKHowQ=")
        );
        assert_eq!(community_id_v1("::1", 1, "127.0.0.1", 2, 6), None);
        assert_eq!(community_id_v1("nope", 1, "127.0.0.1", 2, 6), None);
    }
}
