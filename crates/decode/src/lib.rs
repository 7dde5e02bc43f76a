//! Packet decoding (the only crate that touches `etherparse`).
//!
//! [`Decoder::decode`] turns one frame's bytes and its link type into a
//! [`Decoded`] view: every layer it could parse plus where and why it stopped
//! ([`DecodeStop`]), in the spirit of etherparse's `LaxSlicedPacket`.
//! Snaplen-truncated frames still yield their IP and TCP headers; lengths come
//! from the IP header, not from the captured byte count. What could not be
//! parsed is a recorded fact, never an error or a panic.
//!
//! The decoder is stateful only for IP reassembly (bounded): a TCP header split
//! across IP fragments is decoded in the frame that completes the datagram,
//! as Wireshark does.
//!
//! # What is decoded
//!
//! - Link types: Ethernet (1) incl. any number of 802.1Q/802.1ad/QinQ tags
//!   (0x8100, 0x88A8, 0x9100, 0x9200; the first two VLAN ids are kept) and
//!   802.3 + LLC/SNAP; Linux SLL (113) and SLL2 (276, interface index and
//!   packet type kept); raw IP (101, 12, 14 by version nibble; 228 IPv4;
//!   229 IPv6); BSD null (0, host-order AF in either byte order, AF_INET 2,
//!   AF_INET6 24/28/30) and OpenBSD LOOP (108, network order); PPP (9, 50);
//!   Linux NFLOG (239); Cisco HDLC (104); IPoIB (242); 802.11 data frames
//!   (105, radiotap 127, PPI 192) with LLC/SNAP; Apple PKTAP (258) carrying
//!   Ethernet.
//! - IPv4 (options, fragments) and IPv6 (hop-by-hop, routing, destination
//!   options, mobility, HIP, shim6, fragment header, AH; ESP and "no next
//!   header" end the chain as [`Transport::Other`]); AH over IPv4.
//! - TCP (9 flags; MSS, window scale, SACK-permitted, up to 4 SACK blocks,
//!   timestamps; unknown options skipped by length), UDP (with its captured
//!   payload), ICMP and ICMPv6 including the datagram quoted by errors.
//! - Tunnels, so that `ip`/`transport` are the innermost headers and
//!   `outer_ip` the outermost, as Wireshark keys `tcp.stream` on the inner
//!   addresses: IPIP (4), 6in4 (41), IPv6-in-IPv6, EtherIP (97), MPLS-in-IP
//!   (137), GRE (47; checksum/key/sequence/RFC 1701 routing; payload
//!   IPv4/IPv6/MPLS/PPP, transparent Ethernet bridging 0x6558, ERSPAN
//!   I/II/III, Aruba WLAN 0x82xx), PPTP enhanced GRE + PPP, MPLS label stacks
//!   (0x8847/0x8848, then IPv4/IPv6 by nibble), PPPoE session (0x8864, PPP
//!   0x0021/0x0057), and, by their standard UDP ports only (like Wireshark),
//!   VXLAN (4789), Geneve (6081), GTP-U (2152, G-PDU only), Teredo (3544)
//!   and CAPWAP data (5247, 802.11 or Ethernet payload).
//!   The lower UDP port is tried first; the higher one only when the lower is
//!   not a well-known port (< 1024), and not when the UDP Length field is
//!   below 8 (IPv6 Length 0, a jumbogram, excepted). The tunnel's UDP header
//!   is kept as [`Decoded::outer_udp`] (Wireshark numbers its conversation
//!   first).
//!
//! Not decoded: MPLS pseudowires (control word + Ethernet), VXLAN-GPE, L2TP,
//! GRE-in-UDP, encrypted 802.11 frames, PKTAP records other than Ethernet
//! packets, and other link types ([`StopReason::Unsupported`]).
//! A first IP fragment that cannot be reassembled keeps its UDP header in
//! [`Decoded::first_fragment_udp`] (for `udp.stream`), nothing else.
//!
//! # Lax rules
//!
//! - Every layer that was parsed completely is kept; [`Decoded::stop`] names
//!   the first layer that could not be, at the frame offset where that layer
//!   starts (inside a reassembled datagram: the offset of the completing
//!   fragment's payload plus the offset in the datagram).
//! - TCP needs its 20-byte base header: with fewer bytes the transport is
//!   [`Transport::None`] and the stop is `Transport`/`Truncated`. Options cut
//!   by the snaplen keep what fits and set [`TcpOptions::malformed`].
//! - When a tunnel's payload cannot be decoded (non-IP inner frame, cut-off
//!   inner header), the outer transport (UDP for VXLAN…, `Other(47)` for
//!   GRE…) is kept together with the stop.
//! - ICMP errors: the quoted IP header must be complete; the quoted transport
//!   header may be cut anywhere ([`QuotedPacket::transport_bytes`]).
//! - Payload lengths come from the IP header. [`Decoder::decode_frame`]
//!   additionally bounds them by the wire length (`frame.len`), as Wireshark
//!   does with its reported length; PPPoE and UDP length fields bound them
//!   too.
//!
//! # Why not only etherparse
//!
//! etherparse 0.21 slices the IPv4/IPv6 fixed headers, IPv6 extension
//! headers, AH and UDP here (its slices check only what the header itself
//! needs, which suits snaplen-cut frames). TCP, ICMP, link layers and tunnels
//! are parsed by hand with checked slicing because etherparse's
//! `TcpHeaderSlice` requires the whole option area, its TCP option iterator
//! stops at unknown option kinds, its ICMP types do not expose a cut-short
//! quoted datagram field by field, and it has no SLL2, NFLOG, BSD loopback,
//! PPP, PPPoE, MPLS or tunnel headers.
//!
//! # Allocation
//!
//! Decoding never allocates except when an IP fragment is buffered for
//! reassembly ([`reassembly`]).

mod decoder;
pub mod dns;
mod ip;
mod link;
pub mod reassembly;
mod transport;
mod tunnel;
pub mod types;

pub use decoder::Decoder;
pub use types::*;
