//! Options already in the input (pcapng spec draft-ietf-opsawg-pcapng §3.5):
//! read from the raw SHB, IDB and EPB bytes that
//! [`pcapsleuth_ingest::CaptureReader`] keeps ([`CaptureReader::header_blocks`],
//! [`CaptureReader::record_bytes`]) and converted to the little-endian form
//! the [`crate::writer`] writes.
//!
//! [`CaptureReader::header_blocks`]: pcapsleuth_ingest::CaptureReader::header_blocks
//! [`CaptureReader::record_bytes`]: pcapsleuth_ingest::CaptureReader::record_bytes

/// One option: code and value bytes (little-endian where the value is a number).
pub type RawOption = (u16, Vec<u8>);

/// `opt_comment`.
pub const OPT_COMMENT: u16 = 1;
/// Custom options (§3.5.1): a Private Enterprise Number, then data.
const CUSTOM_CODES: [u16; 4] = [2988, 2989, 19372, 19373];

/// Which kind of block the options come from: their numeric codes differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// Section Header Block (§4.1).
    Section,
    /// Interface Description Block (§4.2).
    Interface,
    /// Enhanced Packet Block (§4.3) or the obsolete Packet Block.
    Packet,
}

/// Byte widths of the numeric options of `kind` whose byte order must be
/// swapped when the input section is big-endian; `None` for byte strings.
fn numeric_width(kind: BlockKind, code: u16) -> Option<usize> {
    match (kind, code) {
        // epb_flags, epb_queue (u32); epb_dropcount, epb_packetid (u64).
        (BlockKind::Packet, 2 | 6) => Some(4),
        (BlockKind::Packet, 4 | 5) => Some(8),
        // if_speed, if_txspeed, if_rxspeed (u64); if_tzone (u32).
        (BlockKind::Interface, 8 | 16 | 17) => Some(8),
        (BlockKind::Interface, 10) => Some(4),
        _ => None,
    }
}

/// Walk the options in `opts` (the bytes after the fixed part of a block, up
/// to its trailing length) until `opt_endofopt` or the first malformed one.
/// Values are converted to little-endian for the numeric options and the PEN
/// of custom options when `big_endian`.
pub fn parse(opts: &[u8], big_endian: bool, kind: BlockKind) -> Vec<RawOption> {
    let rd16 = |off: usize| -> Option<u16> {
        let b: [u8; 2] = opts.get(off..off + 2)?.try_into().ok()?;
        Some(if big_endian {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        })
    };
    let mut out = Vec::new();
    let mut off = 0usize;
    while let (Some(code), Some(len)) = (rd16(off), rd16(off + 2)) {
        if code == 0 {
            break;
        }
        let len = usize::from(len);
        let Some(value) = opts.get(off + 4..off + 4 + len) else {
            break;
        };
        let mut v = value.to_vec();
        if big_endian {
            if let Some(w) = numeric_width(kind, code) {
                if v.len() == w {
                    v.reverse();
                }
            }
            if CUSTOM_CODES.contains(&code) {
                if let Some(pen) = v.get_mut(..4) {
                    pen.reverse();
                }
            }
        }
        out.push((code, v));
        off += 4 + ((len + 3) & !3);
    }
    out
}

/// Byte order of a block from its type field: `true` when the type reads as
/// `expected` only big-endian.
fn block_big_endian(b: &[u8], expected: u32) -> Option<bool> {
    let t: [u8; 4] = b.get(..4)?.try_into().ok()?;
    if u32::from_le_bytes(t) == expected {
        Some(false)
    } else if u32::from_be_bytes(t) == expected {
        Some(true)
    } else {
        None
    }
}

/// The options of a raw pcapng packet record (EPB type 6 or obsolete PB
/// type 2, whole block with framing). Empty for anything else (legacy pcap
/// records, simple packet blocks).
pub fn packet_options(record: &[u8]) -> Vec<RawOption> {
    let (be, _) = match (block_big_endian(record, 6), block_big_endian(record, 2)) {
        (Some(be), _) => (be, 6),
        (None, Some(be)) => (be, 2),
        _ => return Vec::new(),
    };
    let rd32 = |off: usize| -> Option<usize> {
        let b: [u8; 4] = record.get(off..off + 4)?.try_into().ok()?;
        let v = if be {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        };
        usize::try_from(v).ok()
    };
    let (Some(len), Some(caplen)) = (rd32(4), rd32(20)) else {
        return Vec::new();
    };
    let start = 28usize.saturating_add((caplen.saturating_add(3)) & !3);
    let end = len.saturating_sub(4).min(record.len());
    match record.get(start..end) {
        Some(opts) if !opts.is_empty() => parse(opts, be, BlockKind::Packet),
        _ => Vec::new(),
    }
}

/// The options of a raw SHB (fixed part: 24 bytes incl. type and length).
pub fn section_options(block: &[u8]) -> Vec<RawOption> {
    // The SHB type is byte-order neutral: the byte-order magic tells.
    let be = match block.get(8..12) {
        Some([0x1A, 0x2B, 0x3C, 0x4D]) => true,
        Some([0x4D, 0x3C, 0x2B, 0x1A]) => false,
        _ => return Vec::new(),
    };
    let end = block.len().saturating_sub(4);
    block
        .get(24..end)
        .map(|o| parse(o, be, BlockKind::Section))
        .unwrap_or_default()
}

/// The options of a raw IDB (fixed part: 16 bytes incl. type and length),
/// `None` when `block` is not an IDB.
pub fn interface_options(block: &[u8]) -> Option<Vec<RawOption>> {
    let be = block_big_endian(block, 1)?;
    let end = block.len().saturating_sub(4);
    Some(
        block
            .get(16..end)
            .map(|o| parse(o, be, BlockKind::Interface))
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epb(be: bool, caplen: u32, opts: &[u8]) -> Vec<u8> {
        let w = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let pad = (caplen as usize + 3) & !3;
        let total = (32 + pad + opts.len()) as u32;
        let mut b = Vec::new();
        b.extend_from_slice(&w(6));
        b.extend_from_slice(&w(total));
        for v in [0, 0, 0, caplen, caplen] {
            b.extend_from_slice(&w(v));
        }
        b.resize(28 + pad, 0xAA);
        b.extend_from_slice(opts);
        b.extend_from_slice(&w(total));
        b
    }

    #[test]
    fn epb_comment_and_flags_little_endian() {
        let opts = [
            1, 0, 3, 0, b'h', b'i', b'!', 0, // comment
            2, 0, 4, 0, 1, 0, 0, 0, // epb_flags = 1 (inbound)
            0, 0, 0, 0,
        ];
        let got = packet_options(&epb(false, 5, &opts));
        assert_eq!(got, vec![(1, b"hi!".to_vec()), (2, vec![1, 0, 0, 0])]);
    }

    #[test]
    fn epb_flags_big_endian_become_little_endian() {
        let opts = [0, 2, 0, 4, 0, 0, 0, 2, 0, 0, 0, 0];
        let got = packet_options(&epb(true, 3, &opts));
        assert_eq!(got, vec![(2, vec![2, 0, 0, 0])]);
    }

    #[test]
    fn truncated_option_stops_the_walk() {
        let opts = [1, 0, 200, 0, b'x', 0, 0, 0];
        assert!(packet_options(&epb(false, 4, &opts)).is_empty());
        assert!(packet_options(&[1, 2, 3]).is_empty());
    }
}
