//! Numbers from the registries the decoder and the report speak: pcap link
//! types (tcpdump.org `LINKTYPE_*`, also pcapng's `LinkType`), IP protocol
//! numbers (IANA "Assigned Internet Protocol Numbers"; the IPv6 next-header
//! values share that space) and ethertypes (IEEE 802 / IANA "IEEE 802
//! Numbers").

/// pcap / pcapng link types (`LINKTYPE_*` from tcpdump.org's link-layer header
/// types list). Only those pcapsleuth decodes or names are listed.
pub mod linktype {
    /// BSD loopback, host byte order (`LINKTYPE_NULL`).
    pub const NULL: u16 = 0;
    /// Ethernet II / 802.3 (`LINKTYPE_ETHERNET`).
    pub const ETHERNET: u16 = 1;
    /// IEEE 802.5 Token Ring.
    pub const IEEE802_5: u16 = 6;
    /// PPP (`LINKTYPE_PPP`).
    pub const PPP: u16 = 9;
    /// FDDI.
    pub const FDDI: u16 = 10;
    /// Raw IP as some BSDs number it (`DLT_RAW` 12).
    pub const RAW_BSD12: u16 = 12;
    /// Raw IP as OpenBSD numbers it (`DLT_RAW` 14).
    pub const RAW_BSD14: u16 = 14;
    /// PPP in HDLC-like framing (`LINKTYPE_PPP_HDLC`).
    pub const PPP_HDLC: u16 = 50;
    /// Raw IPv4 or IPv6, version from the first nibble (`LINKTYPE_RAW`).
    pub const RAW: u16 = 101;
    /// Cisco HDLC (`LINKTYPE_C_HDLC`).
    pub const C_HDLC: u16 = 104;
    /// IEEE 802.11 without radio header.
    pub const IEEE802_11: u16 = 105;
    /// Frame Relay.
    pub const FRELAY: u16 = 107;
    /// OpenBSD loopback, network byte order (`LINKTYPE_LOOP`).
    pub const LOOP: u16 = 108;
    /// Linux cooked capture v1, `tcpdump -i any` before libpcap 1.10 (`LINKTYPE_LINUX_SLL`).
    pub const LINUX_SLL: u16 = 113;
    /// OpenBSD pflog.
    pub const PFLOG: u16 = 117;
    /// SunATM.
    pub const SUNATM: u16 = 123;
    /// IEEE 802.11 with radiotap header.
    pub const IEEE802_11_RADIOTAP: u16 = 127;
    /// Per-Packet Information header.
    pub const PPI: u16 = 192;
    /// Raw IPv4, no version check (`LINKTYPE_IPV4`).
    pub const IPV4: u16 = 228;
    /// Raw IPv6 (`LINKTYPE_IPV6`).
    pub const IPV6: u16 = 229;
    /// D-Bus messages (`LINKTYPE_DBUS`).
    pub const DBUS: u16 = 231;
    /// Linux netfilter NFLOG (`LINKTYPE_NFLOG`).
    pub const NFLOG: u16 = 239;
    /// IP over InfiniBand (RFC 4391) with Wireshark's 44-byte pseudo-header
    /// (`LINKTYPE_IPOIB`).
    pub const IPOIB: u16 = 242;
    /// USB packets from USBPcap on Windows (`LINKTYPE_USBPCAP`).
    pub const USBPCAP: u16 = 249;
    /// Apple PKTAP: a metadata header with the inner packet's link type (`LINKTYPE_PKTAP`).
    pub const PKTAP: u16 = 258;
    /// Linux cooked capture v2, `tcpdump -i any` since libpcap 1.10 (`LINKTYPE_LINUX_SLL2`).
    pub const LINUX_SLL2: u16 = 276;
    /// Elektrobit High Speed Capture and Replay (`LINKTYPE_EBHSCR`).
    pub const EBHSCR: u16 = 279;
}

/// IP protocol numbers (IPv4 `protocol`, IPv6 `next header`).
pub mod ip_protocol {
    /// IPv6 Hop-by-Hop Options.
    pub const HOPOPT: u8 = 0;
    /// ICMP for IPv4.
    pub const ICMP: u8 = 1;
    /// IPv4 in IP (IPIP, RFC 2003).
    pub const IPIP: u8 = 4;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// DCCP (RFC 4340).
    pub const DCCP: u8 = 33;
    /// IPv6 in IP (6in4, RFC 4213).
    pub const IPV6: u8 = 41;
    /// IPv6 Routing header.
    pub const IPV6_ROUTING: u8 = 43;
    /// IPv6 Fragment header.
    pub const IPV6_FRAGMENT: u8 = 44;
    /// GRE (RFC 2784).
    pub const GRE: u8 = 47;
    /// ESP.
    pub const ESP: u8 = 50;
    /// AH.
    pub const AH: u8 = 51;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// IPv6 No Next Header.
    pub const IPV6_NONXT: u8 = 59;
    /// IPv6 Destination Options.
    pub const IPV6_DSTOPTS: u8 = 60;
    /// Ethernet in IP (EtherIP, RFC 3378).
    pub const ETHERIP: u8 = 97;
    /// SCTP.
    pub const SCTP: u8 = 132;
    /// IPv6 Mobility header (RFC 6275).
    pub const MOBILITY: u8 = 135;
    /// UDP-Lite (RFC 3828).
    pub const UDPLITE: u8 = 136;
    /// MPLS in IP (RFC 4023).
    pub const MPLS_IN_IP: u8 = 137;
    /// Host Identity Protocol (RFC 7401).
    pub const HIP: u8 = 139;
    /// Shim6 (RFC 5533).
    pub const SHIM6: u8 = 140;
}

/// Ethertypes (IEEE 802; IANA "IEEE 802 Numbers"). Values below
/// [`ethertype::MIN`] in the Ethernet type/length field are 802.3 lengths.
pub mod ethertype {
    /// Smallest ethertype; a type/length field below it is an 802.3 length.
    pub const MIN: u16 = 0x0600;
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// IPv6.
    pub const IPV6: u16 = 0x86DD;
    /// 802.1Q VLAN tag (C-tag).
    pub const VLAN: u16 = 0x8100;
    /// 802.1ad service tag (S-tag, QinQ).
    pub const QINQ: u16 = 0x88A8;
    /// Pre-standard QinQ tag (Cisco/Juniper).
    pub const QINQ_9100: u16 = 0x9100;
    /// Pre-standard QinQ tag.
    pub const QINQ_9200: u16 = 0x9200;
    /// MPLS unicast (RFC 3032).
    pub const MPLS: u16 = 0x8847;
    /// MPLS multicast (RFC 5332).
    pub const MPLS_MULTICAST: u16 = 0x8848;
    /// PPPoE session stage (RFC 2516).
    pub const PPPOE_SESSION: u16 = 0x8864;
    /// Transparent Ethernet bridging (Ethernet in GRE, Geneve).
    pub const TRANSPARENT_ETHERNET_BRIDGING: u16 = 0x6558;
    /// PPP (as a GRE protocol type: PPTP, RFC 2637).
    pub const PPP: u16 = 0x880B;
    /// ERSPAN type I/II (as a GRE protocol type).
    pub const ERSPAN_II: u16 = 0x88BE;
    /// ERSPAN type III (as a GRE protocol type).
    pub const ERSPAN_III: u16 = 0x22EB;
}
