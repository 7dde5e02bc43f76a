//! Packet builders shared by the flow table's integration tests.

use pcapsleuth_decode::{IcmpKind, IcmpMessage, IpVersion, QuotedPacket};

/// An IPv4 ICMP fragmentation-needed (type 3, code 4) announcing MTU 1400
/// bytes and quoting `quoted` (RFC 1191).
pub fn frag_needed_1400(quoted: QuotedPacket) -> IcmpMessage<'static> {
    IcmpMessage {
        version: IpVersion::V4,
        icmp_type: 3,
        code: 4,
        kind: IcmpKind::FragNeeded,
        mtu: Some(1400),
        quoted: Some(quoted),
        echo: None,
    }
}
