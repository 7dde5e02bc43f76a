//! Minimal capture reader for the decode tests (legacy pcap, both byte
//! orders and time resolutions, and pcapng EPB/SPB/PB), so these tests do not
//! depend on the ingest crate. Returns (linktype, bytes) per frame in file
//! order, which is Wireshark's `frame.number` order.

#![allow(dead_code)]

use std::path::Path;

/// Every frame of a capture file as (LINKTYPE, captured bytes, wire length); `None` if the
/// file is not a readable pcap/pcapng (gzip is not handled here).
pub fn read_frames(path: &Path) -> Option<Vec<(u32, Vec<u8>, u32)>> {
    let b = std::fs::read(path).ok()?;
    let magic = b.get(..4)?;
    match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => pcap(&b, false),
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => pcap(&b, true),
        [0x0a, 0x0d, 0x0d, 0x0a] => pcapng(&b),
        _ => None,
    }
}

fn u32_at(b: &[u8], off: usize, be: bool) -> Option<u32> {
    let s: [u8; 4] = b.get(off..off + 4)?.try_into().ok()?;
    Some(if be {
        u32::from_be_bytes(s)
    } else {
        u32::from_le_bytes(s)
    })
}

fn pcap(b: &[u8], be: bool) -> Option<Vec<(u32, Vec<u8>, u32)>> {
    let lt = u32_at(b, 20, be)? & 0x0FFF_FFFF;
    let mut off = 24;
    let mut out = Vec::new();
    while let Some(cap) = u32_at(b, off + 8, be) {
        let start = off + 16;
        let Some(data) = b.get(start..start + cap as usize) else {
            break;
        };
        out.push((lt, data.to_vec(), u32_at(b, off + 12, be)?));
        off = start + cap as usize;
    }
    Some(out)
}

fn pcapng(b: &[u8]) -> Option<Vec<(u32, Vec<u8>, u32)>> {
    let mut off = 0;
    let mut be = false;
    let mut ifaces: Vec<u32> = Vec::new();
    let mut out = Vec::new();
    while off + 12 <= b.len() {
        if b.get(off..off + 4)? == [0x0a, 0x0d, 0x0d, 0x0a] {
            be = b.get(off + 8..off + 12)? == [0x1a, 0x2b, 0x3c, 0x4d];
            ifaces.clear();
        }
        let ty = u32_at(b, off, be)?;
        let len = u32_at(b, off + 4, be)? as usize;
        if len < 12 || off + len > b.len() {
            break;
        }
        let body = &b[off + 8..off + len - 4];
        let iface_lt = |i: u32| ifaces.get(i as usize).copied().unwrap_or(0);
        match ty {
            1 => ifaces.push(u32_at(body, 0, be)? & 0xFFFF),
            6 => {
                let cap = u32_at(body, 12, be)? as usize;
                out.push((
                    iface_lt(u32_at(body, 0, be)?),
                    body.get(20..20 + cap)?.to_vec(),
                    u32_at(body, 16, be)?,
                ));
            }
            3 => {
                let orig = u32_at(body, 0, be)? as usize;
                let data = body.get(4..)?;
                out.push((
                    iface_lt(0),
                    data[..orig.min(data.len())].to_vec(),
                    orig as u32,
                ));
            }
            2 => {
                let id = if be {
                    u16::from_be_bytes([body[0], body[1]])
                } else {
                    u16::from_le_bytes([body[0], body[1]])
                };
                let cap = u32_at(body, 12, be)? as usize;
                out.push((
                    iface_lt(u32::from(id)),
                    body.get(20..20 + cap)?.to_vec(),
                    u32_at(body, 16, be)?,
                ));
            }
            _ => {}
        }
        off += len;
    }
    Some(out)
}
