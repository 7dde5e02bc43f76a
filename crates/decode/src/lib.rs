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

mod decoder;
mod ip;
mod link;
pub mod reassembly;
mod transport;
mod tunnel;
pub mod types;

pub use decoder::Decoder;
pub use types::*;
