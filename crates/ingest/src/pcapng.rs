//! pcapng: section header, interface description and packet blocks.
//!
//! The SHB and IDB (which carry options) are parsed with `pcap-parser`; the
//! packet blocks (EPB, SPB, obsolete PB) have fixed layouts and are read here
//! without allocating. Block framing checks follow Wireshark's
//! `pcapng_read_block` (wiretap/pcapng.c): a length below 12 or not a multiple
//! of 4, or leading/trailing lengths that differ, end the file.

use crate::format::{bad, max_caplen, rd_u16, rd_u32, PacketRef, Step, MAX_RECORD};
use crate::{InterfaceInfo, LinkType, WarningKind};

/// pcapng block types (pcapng spec, draft-ietf-opsawg-pcapng §11.1; sysdig
/// numbers from Wireshark's wiretap/pcapng_module.h).
pub(crate) mod block {
    pub const SHB: u32 = 0x0A0D_0D0A;
    pub const IDB: u32 = 0x0000_0001;
    pub const PB: u32 = 0x0000_0002;
    pub const SPB: u32 = 0x0000_0003;
    pub const EPB: u32 = 0x0000_0006;
    pub const SJE: u32 = 0x0000_0009;
    pub const CB: u32 = 0x0000_0BAD;
    pub const DCB: u32 = 0x4000_0BAD;
    pub const SYSDIG_EVENT: u32 = 0x0000_0204;
    pub const SYSDIG_EVENT_V2: u32 = 0x0000_0216;
    pub const SYSDIG_EVENT_V2_LARGE: u32 = 0x0000_0221;
    pub const BOM: u32 = 0x1A2B_3C4D;
}

/// Integer-nanosecond timestamp of a pcapng packet: `ts` units of
/// `1/units_per_sec` seconds plus `offset_s` seconds (`if_tsoffset`).
/// Mirrors Wireshark's `pcapng_read_packet_block` (seconds = ts / units,
/// nanoseconds = (ts % units) * 1e9 / units, truncated), computed in 128 bits
/// so very fine resolutions do not overflow. Saturates at the `i64` range.
pub fn ng_timestamp_ns(ts: u64, units_per_sec: u64, offset_s: i64) -> i64 {
    let units = u128::from(units_per_sec.max(1));
    let ts = u128::from(ts);
    let secs = ts / units;
    let frac_ns = (ts % units) * 1_000_000_000 / units;
    let total = (secs as i128 + i128::from(offset_s)) * 1_000_000_000 + frac_ns as i128;
    total.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// Units per second for an `if_tsresol` byte: 10^n, or 2^n when the top bit
/// is set (pcapng spec §4.2, option 9). `None` when the value does not fit in
/// a `u64` (10^20 and up, 2^64 and up).
pub fn tsresol_units(tsresol: u8) -> Option<u64> {
    let exp = u32::from(tsresol & 0x7f);
    if tsresol & 0x80 != 0 {
        1u64.checked_shl(exp)
    } else {
        10u64.checked_pow(exp)
    }
}

/// Per-interface timestamp parameters.
#[derive(Debug, Clone, Copy)]
struct IfTime {
    units_per_sec: u64,
    offset_s: i64,
}

/// State of the current pcapng section.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ng {
    big_endian: bool,
    /// Global index of the first interface of the current section.
    section_base: u32,
    /// Timestamp parameters of every interface of the file, by global index.
    times: Vec<IfTime>,
    /// Timestamp of the previous packet (SPBs carry none).
    last_ts: i64,
}

/// Section header block: sets byte order and starts a new section.
pub(crate) fn shb(ng: &mut Ng, interfaces: &[InterfaceInfo], input: &[u8]) -> Step {
    if input.len() < 12 {
        return Step::Need {
            bytes: 12,
            frame: false,
        };
    }
    let big_endian = match rd_u32(input, 8, false) {
        Some(block::BOM) => false,
        Some(x) if x == block::BOM.swap_bytes() => true,
        other => {
            return bad(
                format!("bad pcapng byte-order magic {:#010x}", other.unwrap_or(0)),
                false,
            )
        }
    };
    let len = rd_u32(input, 4, big_endian).unwrap_or(0) as usize;
    if len < 28 || len & 3 != 0 {
        return bad(format!("bad section header block length {len}"), false);
    }
    if len > MAX_RECORD {
        return bad(
            format!("section header block length {len} too large"),
            false,
        );
    }
    if input.len() < len {
        return Step::Need {
            bytes: len,
            frame: false,
        };
    }
    let blk = input.get(..len).unwrap_or_default();
    match pcap_parser::parse_sectionheaderblock(blk) {
        Ok((_, shb)) => {
            // Wireshark's pcapng_read_section_header_block accepts 1.0 and 1.2.
            if !(shb.major_version == 1 && (shb.minor_version == 0 || shb.minor_version == 2)) {
                return bad(
                    format!(
                        "unknown SHB version {}.{}",
                        shb.major_version, shb.minor_version
                    ),
                    false,
                );
            }
            if shb.block_len2 != shb.block_len1 {
                return bad("section header block lengths differ".to_string(), false);
            }
        }
        Err(e) => return bad(format!("malformed section header block: {e:?}"), false),
    }
    ng.big_endian = big_endian;
    ng.section_base = u32::try_from(interfaces.len()).unwrap_or(u32::MAX);
    Step::Skip(len)
}

/// Interface description block: registers an interface.
fn idb(
    ng: &mut Ng,
    interfaces: &mut Vec<InterfaceInfo>,
    warnings: &mut Vec<String>,
    blk: &[u8],
) -> Step {
    let parsed = if ng.big_endian {
        pcap_parser::parse_interfacedescriptionblock_be(blk)
    } else {
        pcap_parser::parse_interfacedescriptionblock_le(blk)
    };
    let idb = match parsed {
        Ok((_, idb)) => idb,
        Err(e) => {
            return bad(
                format!("malformed interface description block: {e:?}"),
                false,
            )
        }
    };
    let mut units_per_sec = 1_000_000;
    let mut offset_s = 0i64;
    for opt in &idb.options {
        let Ok(v) = opt.as_bytes() else { continue };
        match opt.code.0 {
            9 => {
                if let Some(&r) = v.first() {
                    match tsresol_units(r) {
                        Some(u) => units_per_sec = u,
                        None => warnings.push(format!(
                            "if_tsresol {r:#04x} out of range; using microseconds"
                        )),
                    }
                }
            }
            14 => {
                if let Ok(a) = <[u8; 8]>::try_from(v) {
                    offset_s = if ng.big_endian {
                        i64::from_be_bytes(a)
                    } else {
                        i64::from_le_bytes(a)
                    };
                }
            }
            _ => {}
        }
    }
    let name = match idb.if_name() {
        Some(Ok(s)) => Some(s.trim_end_matches('\0').to_string()),
        _ => None,
    };
    let id = u32::try_from(interfaces.len()).unwrap_or(u32::MAX);
    interfaces.push(InterfaceInfo {
        id,
        name,
        linktype: LinkType(u32::from(idb.linktype.0 as u16)),
        snaplen: idb.snaplen,
    });
    ng.times.push(IfTime {
        units_per_sec,
        offset_s,
    });
    Step::Skip(blk.len())
}

/// Resolve a section-local interface id to the global interface.
fn ng_iface<'i>(
    ng: &Ng,
    interfaces: &'i [InterfaceInfo],
    local: u32,
) -> Option<(&'i InterfaceInfo, IfTime)> {
    let global = ng.section_base.checked_add(local)?;
    let info = interfaces.get(global as usize)?;
    let time = *ng.times.get(global as usize)?;
    Some((info, time))
}

/// Any pcapng block after the first SHB.
pub(crate) fn block(
    ng: &mut Ng,
    interfaces: &mut Vec<InterfaceInfo>,
    warnings: &mut Vec<String>,
    input: &[u8],
) -> Step {
    if input.len() < 4 {
        // Block type unknown yet: cannot say whether it would be a frame.
        return Step::Need {
            bytes: 12,
            frame: false,
        };
    }
    let btype_le = rd_u32(input, 0, false).unwrap_or(0);
    if btype_le == block::SHB {
        return shb(ng, interfaces, input);
    }
    let btype = rd_u32(input, 0, ng.big_endian).unwrap_or(0);
    let counted = matches!(
        btype,
        block::EPB
            | block::SPB
            | block::PB
            | block::CB
            | block::DCB
            | block::SJE
            | block::SYSDIG_EVENT
            | block::SYSDIG_EVENT_V2
            | block::SYSDIG_EVENT_V2_LARGE
    );
    if input.len() < 12 {
        return Step::Need {
            bytes: 12,
            frame: counted,
        };
    }
    let len = rd_u32(input, 4, ng.big_endian).unwrap_or(0) as usize;
    // Wireshark's pcapng_read_block rejects lengths that are too small or not
    // a multiple of 4.
    if len < 12 || len & 3 != 0 {
        return bad(
            format!("block type {btype:#x} has invalid length {len}"),
            counted,
        );
    }
    if len > MAX_RECORD {
        return bad(
            format!("block type {btype:#x} length {len} exceeds the {MAX_RECORD}-byte limit"),
            counted,
        );
    }
    if input.len() < len {
        return Step::Need {
            bytes: len,
            frame: counted,
        };
    }
    let blk = input.get(..len).unwrap_or_default();
    if rd_u32(blk, len - 4, ng.big_endian) != Some(len as u32) {
        return bad(
            format!("block type {btype:#x}: leading and trailing lengths differ"),
            counted,
        );
    }
    let be = ng.big_endian;
    match btype {
        block::IDB => idb(ng, interfaces, warnings, blk),
        block::EPB | block::PB => {
            // EPB: type, len, if_id(4), ts_high, ts_low, caplen, origlen, data.
            // PB:  type, len, if_id(2), drops(2), ts_high, ts_low, caplen, origlen, data.
            if len < 32 {
                return bad(format!("packet block of {len} bytes is too short"), true);
            }
            let local = if btype == block::EPB {
                rd_u32(blk, 8, be).unwrap_or(0)
            } else {
                u32::from(rd_u16(blk, 8, be).unwrap_or(0))
            };
            let ts_high = rd_u32(blk, 12, be).unwrap_or(0);
            let ts_low = rd_u32(blk, 16, be).unwrap_or(0);
            let caplen = rd_u32(blk, 20, be).unwrap_or(0);
            let orig_len = rd_u32(blk, 24, be).unwrap_or(0);
            let Some((info, time)) = ng_iface(ng, interfaces, local) else {
                return Step::Bad {
                    kind: WarningKind::UnknownInterface,
                    message: format!(
                        "packet refers to interface {local} but the section has {} interface description block(s)",
                        interfaces.len() as u64 - u64::from(ng.section_base)
                    ),
                    frame: true,
                };
            };
            if caplen as usize > len - 32 {
                return bad(
                    format!("captured length {caplen} larger than the block allows"),
                    true,
                );
            }
            let max = max_caplen(info.linktype.0);
            if caplen > max {
                return bad(
                    format!("captured length {caplen} larger than the maximum of {max}"),
                    true,
                );
            }
            let ts = (u64::from(ts_high) << 32) | u64::from(ts_low);
            let ts = ng_timestamp_ns(ts, time.units_per_sec, time.offset_s);
            ng.last_ts = ts;
            Step::Packet(
                len,
                PacketRef {
                    ts,
                    interface: ng.section_base + local,
                    linktype: info.linktype,
                    orig_len,
                    data_off: 28,
                    data_len: caplen as usize,
                },
            )
        }
        block::SPB => {
            // type, len, origlen, data. Interface 0 of the section; no timestamp.
            if len < 16 {
                return bad(
                    format!("simple packet block of {len} bytes is too short"),
                    true,
                );
            }
            let Some((info, _)) = ng_iface(ng, interfaces, 0) else {
                return Step::Bad {
                    kind: WarningKind::UnknownInterface,
                    message: "simple packet block before any interface description block"
                        .to_string(),
                    frame: true,
                };
            };
            let orig_len = rd_u32(blk, 8, be).unwrap_or(0);
            // Wireshark's pcapng_read_simple_packet_block: caplen is the
            // original length, limited by the snaplen and the block size.
            let mut caplen = orig_len as usize;
            if info.snaplen != 0 {
                caplen = caplen.min(info.snaplen as usize);
            }
            caplen = caplen.min(len - 16);
            Step::Packet(
                len,
                PacketRef {
                    ts: ng.last_ts,
                    interface: ng.section_base,
                    linktype: info.linktype,
                    orig_len,
                    data_off: 12,
                    data_len: caplen,
                },
            )
        }
        _ if counted => Step::NonPacketFrame(len),
        _ => Step::Skip(len),
    }
}
