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

use crate::format::{bad, max_caplen, rd_u16, rd_u32, PacketRef, Step};
use crate::LinkType;

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
    .any(|&m| le == m || le == m.swap_bytes())
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
pub(crate) struct Legacy {
    big_endian: bool,
    variant: Variant,
    lengths: LengthOrder,
    pub(crate) linktype: LinkType,
    max_caplen: u32,
}

/// Parse the file header. On success returns the parameters, the snaplen and
/// the header length in bytes. May ask for more input than the header to look
/// at the first records (variant detection).
pub(crate) fn header(input: &[u8], eof: bool) -> Result<(Legacy, u32, usize), Step> {
    let raw = rd_u32(input, 0, false).ok_or(Step::Need {
        bytes: 4,
        frame: false,
    })?;
    let ixia = [MAGIC_IXIA_HW, MAGIC_IXIA_SW]
        .iter()
        .any(|&m| raw == m || raw == m.swap_bytes());
    let hlen = if ixia { 28 } else { 24 };
    if input.len() < hlen {
        return Err(Step::Need {
            bytes: hlen,
            frame: false,
        });
    }
    // pcap-parser knows the standard, ns and (little-endian) modified magics.
    let (magic, big_endian) = match pcap_parser::parse_pcap_header(input) {
        Ok((_, h)) => (h.magic_number, h.is_bigendian()),
        Err(_) if raw == MAGIC_MODIFIED.swap_bytes() => (MAGIC_MODIFIED, true),
        Err(_) if ixia => (
            if raw & 0xff == 0x1c {
                raw.swap_bytes()
            } else {
                raw
            },
            raw & 0xff == 0x1c,
        ),
        Err(_) => return Err(bad(format!("unrecognised pcap magic {raw:#010x}"), false)),
    };
    let magic = if big_endian && magic.swap_bytes() & 0xffff_0000 == 0xa1b2_0000 {
        magic.swap_bytes()
    } else {
        magic
    };
    let major = rd_u16(input, 4, big_endian).unwrap_or(0);
    let minor = rd_u16(input, 6, big_endian).unwrap_or(0);
    let snaplen = rd_u32(input, 16, big_endian).unwrap_or(0);
    let mut network = rd_u32(input, 20, big_endian).unwrap_or(0);
    if major < 2 {
        // Wireshark: "pcap: major version %u unsupported".
        return Err(bad(
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
        let aix = match network {
            6 => Some(1),
            9 => Some(6),
            15 => Some(10),
            24 => Some(0),
            _ => None,
        };
        if let Some(n) = aix {
            network = n;
            variant = Some(Variant::Aix);
        }
    }
    if network & 0x03FF_0000 != 0 {
        return Err(bad(
            format!("pcap network type reserved field not zero ({network:#010x})"),
            false,
        ));
    }
    // The upper bits carry FCS-length information (LT_FCS_* in libpcap).
    let linktype = network & 0xFFFF;
    let max = max_caplen(linktype);
    let variant = match variant {
        Some(v) => v,
        None => {
            let candidates: &[Variant] = if magic == MAGIC_MODIFIED {
                &[Variant::Ss991029, Variant::Ss990915]
            } else {
                &[Variant::Pcap, Variant::Ss990417, Variant::Nokia]
            };
            let recs = input.get(hlen..).unwrap_or_default();
            guess_variant(recs, eof, candidates, big_endian, snaplen, max).map_err(|n| {
                Step::Need {
                    bytes: hlen + n,
                    frame: false,
                }
            })?
        }
    };
    Ok((
        Legacy {
            big_endian,
            variant,
            lengths,
            linktype: LinkType(linktype),
            max_caplen: max,
        },
        snaplen,
        hlen,
    ))
}

/// Pick the variant whose first record headers look least wrong (first one
/// with no problem, else the lowest score; ties go to the earlier one).
/// `Err(n)` asks for `n` bytes of records.
fn guess_variant(
    recs: &[u8],
    eof: bool,
    candidates: &[Variant],
    be: bool,
    snaplen: u32,
    max: u32,
) -> Result<Variant, usize> {
    let mut best: Option<(u32, Variant)> = None;
    for &v in candidates {
        let m = variant_merit(recs, eof, v, be, snaplen, max)?;
        if m == 0 {
            return Ok(v);
        }
        match best {
            Some((bm, _)) if bm <= m => {}
            _ => best = Some((m, v)),
        }
    }
    Ok(best.map_or(Variant::Pcap, |(_, v)| v))
}

/// Problems found reading the first two record headers as variant `v`,
/// scored as Wireshark 4.0's `libpcap_try`/`libpcap_try_header` do: one point
/// per implausible field (fraction ≥ 10^6, caplen above the link-type maximum
/// or the snaplen, len above 128 MiB, caplen > len); a bad first header is
/// scored alone; running out of input scores 0. `Err(n)` if `n` bytes are
/// needed and more input may come.
fn variant_merit(
    recs: &[u8],
    eof: bool,
    v: Variant,
    be: bool,
    snaplen: u32,
    max: u32,
) -> Result<u32, usize> {
    let hlen = v.header_len();
    let mut pos = 0usize;
    for _ in 0..2 {
        let Some(h) = recs.get(pos..pos + hlen) else {
            return if eof { Ok(0) } else { Err(pos + hlen) };
        };
        let field = |off| rd_u32(h, off, be).unwrap_or(0);
        let (frac, incl, orig) = (field(4), field(8), field(12));
        let merit = u32::from(frac >= 1_000_000)
            + u32::from(incl > max)
            + u32::from(orig > 128 * 1024 * 1024)
            + u32::from(incl > snaplen)
            + u32::from(incl > orig);
        if merit != 0 {
            return Ok(merit);
        }
        pos += hlen + incl as usize;
    }
    Ok(0)
}

/// One record: a 16-byte header (20/24/28 in the variants), then `caplen`
/// bytes.
pub(crate) fn record(lg: &Legacy, input: &[u8]) -> Step {
    let hdr = lg.variant.header_len();
    if input.len() < hdr {
        return Step::Need {
            bytes: hdr,
            frame: true,
        };
    }
    let field = |off| rd_u32(input, off, lg.big_endian).unwrap_or(0);
    let (ts_sec, ts_frac, mut caplen, mut orig_len) = (field(0), field(4), field(8), field(12));
    if lg.lengths == LengthOrder::Swapped || (lg.lengths == LengthOrder::Maybe && caplen > orig_len)
    {
        std::mem::swap(&mut caplen, &mut orig_len);
    }
    if caplen > lg.max_caplen {
        // Wireshark's libpcap_read_packet: "File has %u-byte packet, bigger
        // than maximum of %u" ends the file.
        return bad(
            format!(
                "record of {caplen} bytes, bigger than the maximum of {}",
                lg.max_caplen
            ),
            true,
        );
    }
    let total = hdr + caplen as usize;
    if input.len() < total {
        return Step::Need {
            bytes: total,
            frame: true,
        };
    }
    let frac_ns = match lg.variant {
        Variant::Nsec | Variant::Aix => i64::from(ts_frac),
        _ => i64::from(ts_frac) * 1_000,
    };
    let ts = i64::from(ts_sec) * 1_000_000_000 + frac_ns;
    Step::Packet(
        total,
        PacketRef {
            ts,
            interface: 0,
            linktype: lg.linktype,
            orig_len,
            data_off: hdr,
            data_len: caplen as usize,
        },
    )
}
