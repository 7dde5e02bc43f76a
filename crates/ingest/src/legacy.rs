//! Legacy libpcap format: file header (magic, version, variant detection) and
//! packet records.
//!
//! Besides the four standard magics (µs/ns, both byte orders) this reads the
//! Kuznetzov "modified" magic in both byte orders, the Ixia lcap magics, the
//! pre-2.3 swapped `caplen`/`len` order, and — like Wireshark's
//! `libpcap_open` (wiretap/libpcap.c) — guesses between the variants that
//! share a magic (standard, SS990417, Nokia; SS991029, SS990915) by scoring
//! the first two record headers. That matters only for odd or corrupt
//! files, but keeps `frame.number` identical to tshark's on them.

use crate::format::{malformed, max_caplen, read_u16, read_u32, PacketRef, Step};
use crate::LinkType;
use pcapsleuth_core::{linktype, InterfaceId};

/// Standard µs magic as read little-endian from the file.
const MAGIC_STD: u32 = 0xa1b2_c3d4;
/// Nanosecond magic.
const MAGIC_NSEC: u32 = 0xa1b2_3c4d;
/// Kuznetzov's patched ("modified") magic.
const MAGIC_MODIFIED: u32 = 0xa1b2_cd34;
/// Ixia lcap hardware (ns) magic; 4 extra header bytes.
const MAGIC_IXIA_HW: u32 = 0x1c00_01ac;
/// Ixia lcap software (µs) magic; 4 extra header bytes.
const MAGIC_IXIA_SW: u32 = 0x1c00_01ab;

/// Whether the first four bytes of a file (read little-endian) are a legacy
/// pcap magic in either byte order.
pub(crate) fn is_magic(le: u32) -> bool {
    [
        MAGIC_STD,
        MAGIC_NSEC,
        MAGIC_MODIFIED,
        MAGIC_IXIA_HW,
        MAGIC_IXIA_SW,
    ]
    .iter()
    .any(|&magic| le == magic || le == magic.swap_bytes())
}

/// Record header layouts (Wireshark's `pcap_variant_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Variant {
    /// Standard, µs.
    Pcap,
    /// Standard layout, ns.
    Nsec,
    /// AIX: standard layout, ns.
    Aix,
    /// Red Hat 6.1 patch: 24-byte record headers, standard magic.
    Ss990417,
    /// SuSE 6.3 patch: 28-byte record headers, modified magic.
    Ss990915,
    /// 24-byte record headers, modified magic.
    Ss991029,
    /// Nokia IPSO: 20-byte record headers, standard magic.
    Nokia,
}

impl Variant {
    /// Record header size in bytes.
    fn header_len(self) -> usize {
        match self {
            Variant::Pcap | Variant::Nsec | Variant::Aix => 16,
            Variant::Nokia => 20,
            Variant::Ss990417 | Variant::Ss991029 => 24,
            Variant::Ss990915 => 28,
        }
    }
}

/// Whether `caplen` and `len` are stored in the pre-2.3 order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LengthOrder {
    Normal,
    Swapped,
    /// Version 2.3: swapped only when `caplen > len`.
    Maybe,
}

/// Parameters from the legacy pcap file header.
#[derive(Debug, Clone)]
pub(crate) struct LegacyParams {
    big_endian: bool,
    variant: Variant,
    lengths: LengthOrder,
    pub(crate) linktype: LinkType,
    max_caplen: u32,
}

/// Parse the file header. On success returns the parameters, the snaplen and
/// the header length in bytes. May ask for more input than the header to look
/// at the first records (variant detection).
pub(crate) fn header(input: &[u8], eof: bool) -> Result<(LegacyParams, u32, usize), Step> {
    let raw = read_u32(input, 0, false).ok_or(Step::Need {
        bytes: 4,
        frame: false,
    })?;
    let ixia = [MAGIC_IXIA_HW, MAGIC_IXIA_SW]
        .iter()
        .any(|&magic| raw == magic || raw == magic.swap_bytes());
    let header_len = if ixia { 28 } else { 24 };
    if input.len() < header_len {
        return Err(Step::Need {
            bytes: header_len,
            frame: false,
        });
    }
    // pcap-parser knows the standard, ns and (little-endian) modified magics.
    let (magic, big_endian) = match pcap_parser::parse_pcap_header(input) {
        Ok((_, file_header)) => (file_header.magic_number, file_header.is_bigendian()),
        Err(_) if raw == MAGIC_MODIFIED.swap_bytes() => (MAGIC_MODIFIED, true),
        Err(_) if ixia => (
            if raw & 0xff == 0x1c {
                raw.swap_bytes()
            } else {
                raw
            },
            raw & 0xff == 0x1c,
        ),
        Err(_) => {
            return Err(malformed(
                format!("unrecognised pcap magic {raw:#010x}"),
                false,
            ))
        }
    };
    let magic = if big_endian && magic.swap_bytes() & 0xffff_0000 == 0xa1b2_0000 {
        magic.swap_bytes()
    } else {
        magic
    };
    let major = read_u16(input, 4, big_endian).unwrap_or(0);
    let minor = read_u16(input, 6, big_endian).unwrap_or(0);
    let snaplen = read_u32(input, 16, big_endian).unwrap_or(0);
    let mut network = read_u32(input, 20, big_endian).unwrap_or(0);
    if major < 2 {
        // Wireshark: "pcap: major version %u unsupported".
        return Err(malformed(
            format!("pcap major version {major} unsupported"),
            false,
        ));
    }
    let mut variant = match magic {
        MAGIC_NSEC | MAGIC_IXIA_HW => Some(Variant::Nsec),
        MAGIC_IXIA_SW => Some(Variant::Pcap),
        _ => None,
    };
    let lengths = match (major, minor) {
        (2, m) if m < 3 => LengthOrder::Swapped,
        (2, 3) => LengthOrder::Maybe,
        (543, _) => LengthOrder::Swapped,
        _ => LengthOrder::Normal,
    };
    if lengths != LengthOrder::Normal && variant.is_none() && magic != MAGIC_MODIFIED {
        variant = Some(Variant::Pcap);
    }
    // AIX writes version 2.2 with RFC 1573 ifType values in `network`.
    if magic == MAGIC_STD && major == 2 && minor == 2 {
        // RFC 1573 ifType: ethernetCsmacd, iso88025TokenRing, fddi, softwareLoopback.
        let aix_linktype = match network {
            6 => Some(linktype::ETHERNET),
            9 => Some(linktype::IEEE802_5),
            15 => Some(linktype::FDDI),
            24 => Some(linktype::NULL),
            _ => None,
        };
        if let Some(aix_linktype) = aix_linktype {
            network = u32::from(aix_linktype);
            variant = Some(Variant::Aix);
        }
    }
    if network & 0x03FF_0000 != 0 {
        return Err(malformed(
            format!("pcap network type reserved field not zero ({network:#010x})"),
            false,
        ));
    }
    // The upper bits carry FCS-length information (LT_FCS_* in libpcap).
    let link_type = network & 0xFFFF;
    let max = max_caplen(link_type);
    let variant = match variant {
        Some(v) => v,
        None => {
            let candidates: &[Variant] = if magic == MAGIC_MODIFIED {
                &[Variant::Ss991029, Variant::Ss990915]
            } else {
                &[Variant::Pcap, Variant::Ss990417, Variant::Nokia]
            };
            let records = input.get(header_len..).unwrap_or_default();
            guess_variant(records, eof, candidates, big_endian, snaplen, max).map_err(|n| {
                Step::Need {
                    bytes: header_len + n,
                    frame: false,
                }
            })?
        }
    };
    Ok((
        LegacyParams {
            big_endian,
            variant,
            lengths,
            linktype: LinkType(link_type),
            max_caplen: max,
        },
        snaplen,
        header_len,
    ))
}

/// Pick the variant whose first record headers look least wrong (first one
/// with no problem, else the lowest score; ties go to the earlier one).
/// `Err(n)` asks for `n` bytes of records.
fn guess_variant(
    records: &[u8],
    eof: bool,
    candidates: &[Variant],
    big_endian: bool,
    snaplen: u32,
    max_caplen: u32,
) -> Result<Variant, usize> {
    let mut best: Option<(u32, Variant)> = None;
    for &variant in candidates {
        let merit = variant_merit(records, eof, variant, big_endian, snaplen, max_caplen)?;
        if merit == 0 {
            return Ok(variant);
        }
        match best {
            Some((best_merit, _)) if best_merit <= merit => {}
            _ => best = Some((merit, variant)),
        }
    }
    Ok(best.map_or(Variant::Pcap, |(_, variant)| variant))
}

/// Problems found reading the first two record headers as `variant`,
/// scored as Wireshark 4.0's `libpcap_try`/`libpcap_try_header` do: one point
/// per implausible field (fraction ≥ 10^6, caplen above the link-type maximum
/// or the snaplen, len above 128 MiB, caplen > len); a bad first header is
/// scored alone; running out of input scores 0. `Err(n)` if `n` bytes are
/// needed and more input may come.
fn variant_merit(
    records: &[u8],
    eof: bool,
    variant: Variant,
    big_endian: bool,
    snaplen: u32,
    max_caplen: u32,
) -> Result<u32, usize> {
    let header_len = variant.header_len();
    let mut pos = 0usize;
    for _ in 0..2 {
        let Some(record_header) = records.get(pos..pos + header_len) else {
            return if eof { Ok(0) } else { Err(pos + header_len) };
        };
        let field = |off| read_u32(record_header, off, big_endian).unwrap_or(0);
        let (ts_frac, caplen, orig_len) = (field(4), field(8), field(12));
        let merit = u32::from(ts_frac >= 1_000_000)
            + u32::from(caplen > max_caplen)
            + u32::from(orig_len > 128 * 1024 * 1024)
            + u32::from(caplen > snaplen)
            + u32::from(caplen > orig_len);
        if merit != 0 {
            return Ok(merit);
        }
        pos += header_len + caplen as usize;
    }
    Ok(0)
}

/// One record: a 16-byte header (20/24/28 in the variants), then `caplen`
/// bytes.
pub(crate) fn record(params: &LegacyParams, input: &[u8]) -> Step {
    let header_len = params.variant.header_len();
    if input.len() < header_len {
        return Step::Need {
            bytes: header_len,
            frame: true,
        };
    }
    let field = |off| read_u32(input, off, params.big_endian).unwrap_or(0);
    let (ts_sec, ts_frac, mut caplen, mut orig_len) = (field(0), field(4), field(8), field(12));
    if params.lengths == LengthOrder::Swapped
        || (params.lengths == LengthOrder::Maybe && caplen > orig_len)
    {
        std::mem::swap(&mut caplen, &mut orig_len);
    }
    if caplen > params.max_caplen {
        // Wireshark's libpcap_read_packet: "File has %u-byte packet, bigger
        // than maximum of %u" ends the file.
        return malformed(
            format!(
                "record of {caplen} bytes, bigger than the maximum of {}",
                params.max_caplen
            ),
            true,
        );
    }
    let total = header_len + caplen as usize;
    if input.len() < total {
        return Step::Need {
            bytes: total,
            frame: true,
        };
    }
    let frac_ns = match params.variant {
        Variant::Nsec | Variant::Aix => i64::from(ts_frac),
        _ => i64::from(ts_frac) * 1_000,
    };
    let ts = i64::from(ts_sec) * 1_000_000_000 + frac_ns;
    Step::Packet(
        total,
        PacketRef {
            ts,
            interface: InterfaceId(0),
            linktype: params.linktype,
            orig_len,
            data_off: header_len,
            data_len: caplen as usize,
        },
    )
}
