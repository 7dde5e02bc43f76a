//! pcapng: section header, interface description and packet blocks.
//!
//! The SHB and IDB (which carry options) are parsed with `pcap-parser`; the
//! packet blocks (EPB, SPB, obsolete PB) have fixed layouts and are read here
//! without allocating. Block framing checks follow Wireshark's
//! `pcapng_read_block` (wiretap/pcapng.c): a length below 12 or not a multiple
//! of 4, or leading/trailing lengths that differ, end the file.

use crate::format::{malformed, max_caplen, read_u16, read_u32, PacketRef, Step, MAX_RECORD};
use crate::{InterfaceInfo, LinkType, WarningKind};
use pcapsleuth_core::{InterfaceId, Timestamp};

/// pcapng block types (pcapng spec, draft-ietf-opsawg-pcapng §11.1; sysdig
/// numbers from Wireshark's wiretap/pcapng_module.h).
pub(crate) mod block {
    pub const SHB: u32 = 0x0A0D_0D0A;
    pub const IDB: u32 = 0x0000_0001;
    pub const PB: u32 = 0x0000_0002;
    pub const SPB: u32 = 0x0000_0003;
    pub const ISB: u32 = 0x0000_0005;
    pub const EPB: u32 = 0x0000_0006;
    pub const SJE: u32 = 0x0000_0009;
    pub const CB: u32 = 0x0000_0BAD;
    pub const DCB: u32 = 0x4000_0BAD;
    pub const SYSDIG_EVENT: u32 = 0x0000_0204;
    pub const SYSDIG_EVENT_V2: u32 = 0x0000_0216;
    pub const SYSDIG_EVENT_V2_LARGE: u32 = 0x0000_0221;
    pub const BOM: u32 = 0x1A2B_3C4D;
}

/// IDB option `if_tsresol` (pcapng spec §4.2): timestamp resolution.
const IF_TSRESOL: u16 = 9;
/// IDB option `if_tsoffset` (pcapng spec §4.2): seconds added to timestamps.
const IF_TSOFFSET: u16 = 14;

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

/// Per-interface timestamp parameters (`if_tsresol`, `if_tsoffset`).
#[derive(Debug, Clone, Copy)]
struct InterfaceClock {
    /// Timestamp units per second (10^6 by default).
    units_per_sec: u64,
    /// Seconds added to every timestamp.
    offset_s: i64,
}

/// State of the current pcapng section.
#[derive(Debug, Clone, Default)]
pub(crate) struct PcapngSection {
    /// Byte order of the section (from the SHB byte-order magic).
    big_endian: bool,
    /// Global index of the first interface of the current section.
    first_interface: u32,
    /// Timestamp parameters of every interface of the file, by global index.
    clocks: Vec<InterfaceClock>,
    /// Timestamp of the previous packet (SPBs carry none).
    last_ts: i64,
}

/// Section header block: sets byte order and starts a new section.
pub(crate) fn shb(section: &mut PcapngSection, interfaces: &[InterfaceInfo], input: &[u8]) -> Step {
    if input.len() < 12 {
        return Step::Need {
            bytes: 12,
            frame: false,
        };
    }
    let big_endian = match read_u32(input, 8, false) {
        Some(block::BOM) => false,
        Some(x) if x == block::BOM.swap_bytes() => true,
        other => {
            return malformed(
                format!("bad pcapng byte-order magic {:#010x}", other.unwrap_or(0)),
                false,
            )
        }
    };
    let len = read_u32(input, 4, big_endian).unwrap_or(0) as usize;
    if len < 28 || len & 3 != 0 {
        return malformed(format!("bad section header block length {len}"), false);
    }
    if len > MAX_RECORD {
        return malformed(
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
    let block_bytes = input.get(..len).unwrap_or_default();
    match pcap_parser::parse_sectionheaderblock(block_bytes) {
        Ok((_, shb)) => {
            // Wireshark's pcapng_read_section_header_block accepts 1.0 and 1.2.
            if !(shb.major_version == 1 && (shb.minor_version == 0 || shb.minor_version == 2)) {
                return malformed(
                    format!(
                        "unknown SHB version {}.{}",
                        shb.major_version, shb.minor_version
                    ),
                    false,
                );
            }
            if shb.block_len2 != shb.block_len1 {
                return malformed("section header block lengths differ".to_string(), false);
            }
        }
        Err(e) => return malformed(format!("malformed section header block: {e:?}"), false),
    }
    section.big_endian = big_endian;
    section.first_interface = u32::try_from(interfaces.len()).unwrap_or(u32::MAX);
    Step::Skip(len)
}

/// Interface description block: registers an interface.
fn idb(
    section: &mut PcapngSection,
    interfaces: &mut Vec<InterfaceInfo>,
    warnings: &mut Vec<String>,
    block_bytes: &[u8],
) -> Step {
    let parsed = if section.big_endian {
        pcap_parser::parse_interfacedescriptionblock_be(block_bytes)
    } else {
        pcap_parser::parse_interfacedescriptionblock_le(block_bytes)
    };
    let idb = match parsed {
        Ok((_, idb)) => idb,
        Err(e) => {
            return malformed(
                format!("malformed interface description block: {e:?}"),
                false,
            )
        }
    };
    let mut units_per_sec = 1_000_000;
    let mut offset_s = 0i64;
    for option in &idb.options {
        let Ok(value) = option.as_bytes() else {
            continue;
        };
        match option.code.0 {
            IF_TSRESOL => {
                if let Some(&tsresol) = value.first() {
                    match tsresol_units(tsresol) {
                        Some(units) => units_per_sec = units,
                        None => warnings.push(format!(
                            "if_tsresol {tsresol:#04x} out of range; using microseconds"
                        )),
                    }
                }
            }
            IF_TSOFFSET => {
                if let Ok(bytes) = <[u8; 8]>::try_from(value) {
                    offset_s = if section.big_endian {
                        i64::from_be_bytes(bytes)
                    } else {
                        i64::from_le_bytes(bytes)
                    };
                }
            }
            _ => {}
        }
    }
    let name = match idb.if_name() {
        Some(Ok(name)) => Some(name.trim_end_matches('\0').to_string()),
        _ => None,
    };
    let id = u32::try_from(interfaces.len()).unwrap_or(u32::MAX);
    interfaces.push(InterfaceInfo {
        id: InterfaceId(id),
        name,
        linktype: LinkType(u32::from(idb.linktype.0 as u16)),
        snaplen: idb.snaplen,
        stats: None,
    });
    section.clocks.push(InterfaceClock {
        units_per_sec,
        offset_s,
    });
    Step::Skip(block_bytes.len())
}

/// Resolve a section-local interface id to the global interface.
fn section_interface<'i>(
    section: &PcapngSection,
    interfaces: &'i [InterfaceInfo],
    local: u32,
) -> Option<(&'i InterfaceInfo, InterfaceClock)> {
    let global = section.first_interface.checked_add(local)?;
    let info = interfaces.get(global as usize)?;
    let clock = *section.clocks.get(global as usize)?;
    Some((info, clock))
}

/// Whether Wireshark numbers a block of type `block_type` as a frame
/// (packets, plus custom, systemd journal and sysdig blocks).
fn counts_as_frame(block_type: u32) -> bool {
    matches!(
        block_type,
        block::EPB
            | block::SPB
            | block::PB
            | block::CB
            | block::DCB
            | block::SJE
            | block::SYSDIG_EVENT
            | block::SYSDIG_EVENT_V2
            | block::SYSDIG_EVENT_V2_LARGE
    )
}

/// Any pcapng block after the first SHB.
pub(crate) fn block(
    section: &mut PcapngSection,
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
    if read_u32(input, 0, false) == Some(block::SHB) {
        return shb(section, interfaces, input);
    }
    let block_type = read_u32(input, 0, section.big_endian).unwrap_or(0);
    let counted = counts_as_frame(block_type);
    let block_bytes = match framed_block(section, block_type, counted, input) {
        Ok(block_bytes) => block_bytes,
        Err(step) => return step,
    };
    let len = block_bytes.len();
    match block_type {
        block::IDB => idb(section, interfaces, warnings, block_bytes),
        block::EPB | block::PB => packet_block(section, interfaces, block_type, block_bytes),
        block::SPB => simple_packet_block(section, interfaces, block_bytes),
        block::ISB => {
            isb(section, interfaces, block_bytes);
            Step::Skip(len)
        }
        _ if counted => Step::NonPacketFrame(len),
        _ => Step::Skip(len),
    }
}

/// The whole block at the start of `input` once its framing is valid (as
/// Wireshark's `pcapng_read_block`: length at least 12, a multiple of 4, at
/// most [`MAX_RECORD`], equal leading and trailing lengths), or the
/// [`Step`] to return instead (more bytes needed, or corrupt).
fn framed_block<'i>(
    section: &PcapngSection,
    block_type: u32,
    counted: bool,
    input: &'i [u8],
) -> Result<&'i [u8], Step> {
    if input.len() < 12 {
        return Err(Step::Need {
            bytes: 12,
            frame: counted,
        });
    }
    let len = read_u32(input, 4, section.big_endian).unwrap_or(0) as usize;
    if len < 12 || len & 3 != 0 {
        return Err(malformed(
            format!("block type {block_type:#x} has invalid length {len}"),
            counted,
        ));
    }
    if len > MAX_RECORD {
        return Err(malformed(
            format!("block type {block_type:#x} length {len} exceeds the {MAX_RECORD}-byte limit"),
            counted,
        ));
    }
    if input.len() < len {
        return Err(Step::Need {
            bytes: len,
            frame: counted,
        });
    }
    let block_bytes = input.get(..len).unwrap_or_default();
    if read_u32(block_bytes, len - 4, section.big_endian) != Some(len as u32) {
        return Err(malformed(
            format!("block type {block_type:#x}: leading and trailing lengths differ"),
            counted,
        ));
    }
    Ok(block_bytes)
}

/// ISB option codes (pcapng spec §4.6): `isb_starttime` … `isb_usrdeliv`.
mod isb_opt {
    pub const STARTTIME: u16 = 2;
    pub const ENDTIME: u16 = 3;
    pub const IFRECV: u16 = 4;
    pub const IFDROP: u16 = 5;
    pub const FILTERACCEPT: u16 = 6;
    pub const OSDROP: u16 = 7;
    pub const USRDELIV: u16 = 8;
}

/// Interface statistics block (framing already checked): interface id,
/// timestamp, options. Stores the statistics on the interface (a later ISB
/// replaces an earlier one: the counters are cumulative). An ISB naming an
/// unknown interface, or too short, is ignored as Wireshark's
/// `pcapng_read_interface_statistics_block` reading does not end the file
/// for it; malformed options stop the option walk, keeping those before.
fn isb(section: &PcapngSection, interfaces: &mut [InterfaceInfo], block_bytes: &[u8]) {
    // type, len, if_id(4), ts_high, ts_low, options…, len.
    let len = block_bytes.len();
    if len < 24 {
        return;
    }
    let be = section.big_endian;
    let local = read_u32(block_bytes, 8, be).unwrap_or(0);
    let Some(global) = section.first_interface.checked_add(local) else {
        return;
    };
    let Some(clock) = section.clocks.get(global as usize).copied() else {
        return;
    };
    let Some(info) = interfaces.get_mut(global as usize) else {
        return;
    };
    let last_packet = section.last_ts;
    let ts_of = |high: u32, low: u32| {
        let raw = (u64::from(high) << 32) | u64::from(low);
        let spec = ng_timestamp_ns(raw, clock.units_per_sec, clock.offset_s);
        // dumpcap (wiretap's pcapio.c) writes ISB times in microseconds
        // whatever the interface's `if_tsresol`: when the interface is not
        // in µs, take the reading nearer the last packet's timestamp.
        if clock.units_per_sec == 1_000_000 || last_packet == 0 {
            return Timestamp(spec);
        }
        let micro = ng_timestamp_ns(raw, 1_000_000, clock.offset_s);
        let dist = |t: i64| t.abs_diff(last_packet);
        Timestamp(if dist(micro) < dist(spec) {
            micro
        } else {
            spec
        })
    };
    // A later ISB updates what it carries; one without a counter (some
    // writers add an empty ISB at the end) does not erase an earlier value.
    let mut stats = info.stats.unwrap_or_default();
    stats.ts = ts_of(
        read_u32(block_bytes, 12, be).unwrap_or(0),
        read_u32(block_bytes, 16, be).unwrap_or(0),
    );
    let options = block_bytes.get(20..len - 4).unwrap_or_default();
    let mut off = 0usize;
    while let (Some(code), Some(olen)) =
        (read_u16(options, off, be), read_u16(options, off + 2, be))
    {
        if code == 0 {
            break;
        }
        let olen = usize::from(olen);
        let Some(value) = options.get(off + 4..off + 4 + olen) else {
            break;
        };
        let counter = (olen == 8).then(|| read_u32(value, 0, be).zip(read_u32(value, 4, be)));
        let counter = counter.flatten();
        let as_u64 = counter.map(|(a, b)| {
            if be {
                (u64::from(a) << 32) | u64::from(b)
            } else {
                (u64::from(b) << 32) | u64::from(a)
            }
        });
        let ts = counter.map(|(h, l)| ts_of(h, l));
        let slot = match code {
            // Timestamps are two u32 (high, low), as in an EPB.
            isb_opt::STARTTIME => {
                stats.start_ts = ts.or(stats.start_ts);
                None
            }
            isb_opt::ENDTIME => {
                stats.end_ts = ts.or(stats.end_ts);
                None
            }
            isb_opt::IFRECV => Some(&mut stats.if_recv),
            isb_opt::IFDROP => Some(&mut stats.if_drop),
            isb_opt::FILTERACCEPT => Some(&mut stats.filter_accept),
            isb_opt::OSDROP => Some(&mut stats.os_drop),
            isb_opt::USRDELIV => Some(&mut stats.usr_deliv),
            _ => None,
        };
        if let (Some(slot), Some(v)) = (slot, as_u64) {
            *slot = Some(v);
        }
        off += 4 + ((olen + 3) & !3);
    }
    info.stats = Some(stats);
}

/// Enhanced packet block or obsolete packet block (framing already checked).
fn packet_block(
    section: &mut PcapngSection,
    interfaces: &[InterfaceInfo],
    block_type: u32,
    block_bytes: &[u8],
) -> Step {
    // EPB: type, len, if_id(4), ts_high, ts_low, caplen, origlen, data.
    // PB:  type, len, if_id(2), drops(2), ts_high, ts_low, caplen, origlen, data.
    let len = block_bytes.len();
    let big_endian = section.big_endian;
    if len < 32 {
        return malformed(format!("packet block of {len} bytes is too short"), true);
    }
    let local = if block_type == block::EPB {
        read_u32(block_bytes, 8, big_endian).unwrap_or(0)
    } else {
        u32::from(read_u16(block_bytes, 8, big_endian).unwrap_or(0))
    };
    let ts_high = read_u32(block_bytes, 12, big_endian).unwrap_or(0);
    let ts_low = read_u32(block_bytes, 16, big_endian).unwrap_or(0);
    let caplen = read_u32(block_bytes, 20, big_endian).unwrap_or(0);
    let orig_len = read_u32(block_bytes, 24, big_endian).unwrap_or(0);
    let Some((info, clock)) = section_interface(section, interfaces, local) else {
        return Step::Bad {
            kind: WarningKind::UnknownInterface,
            message: format!(
                "packet refers to interface {local} but the section has {} interface description block(s)",
                interfaces.len() as u64 - u64::from(section.first_interface)
            ),
            frame: true,
        };
    };
    if caplen as usize > len - 32 {
        return malformed(
            format!("captured length {caplen} larger than the block allows"),
            true,
        );
    }
    let max = max_caplen(info.linktype.0);
    if caplen > max {
        return malformed(
            format!("captured length {caplen} larger than the maximum of {max}"),
            true,
        );
    }
    let ts = (u64::from(ts_high) << 32) | u64::from(ts_low);
    let ts = ng_timestamp_ns(ts, clock.units_per_sec, clock.offset_s);
    section.last_ts = ts;
    Step::Packet(
        len,
        PacketRef {
            ts,
            interface: InterfaceId(section.first_interface + local),
            linktype: info.linktype,
            orig_len,
            data_off: 28,
            data_len: caplen as usize,
        },
    )
}

/// Simple packet block (framing already checked): type, len, origlen, data.
/// Interface 0 of the section; no timestamp (the previous packet's is used).
fn simple_packet_block(
    section: &PcapngSection,
    interfaces: &[InterfaceInfo],
    block_bytes: &[u8],
) -> Step {
    let len = block_bytes.len();
    if len < 16 {
        return malformed(
            format!("simple packet block of {len} bytes is too short"),
            true,
        );
    }
    let Some((info, _)) = section_interface(section, interfaces, 0) else {
        return Step::Bad {
            kind: WarningKind::UnknownInterface,
            message: "simple packet block before any interface description block".to_string(),
            frame: true,
        };
    };
    let orig_len = read_u32(block_bytes, 8, section.big_endian).unwrap_or(0);
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
            ts: section.last_ts,
            interface: InterfaceId(section.first_interface),
            linktype: info.linktype,
            orig_len,
            data_off: 12,
            data_len: caplen,
        },
    )
}
