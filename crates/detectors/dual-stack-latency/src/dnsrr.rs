//! The A and AAAA records of a DNS answer section (RFC 1035 §4.1.3,
//! RFC 3596), read only far enough to pair a name's IPv4 and IPv6
//! addresses.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const TYPE_A: u16 = 1;
const TYPE_AAAA: u16 = 28;
const CLASS_IN: u16 = 1;
/// Most answer records read from one message.
const MAX_RECORDS: u16 = 64;

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

/// The offset after the (possibly compressed) name at `at`.
fn skip_name(msg: &[u8], mut at: usize) -> Option<usize> {
    for _ in 0..128 {
        let len = *msg.get(at)?;
        match len & 0xc0 {
            0x00 if len == 0 => return Some(at + 1),
            0x00 => at = at.checked_add(1 + usize::from(len))?,
            0xc0 => return Some(at.checked_add(2)?).filter(|e| *e <= msg.len()),
            _ => return None,
        }
    }
    None
}

/// The IN-class A and AAAA addresses in the answer section of `msg` (a DNS
/// message from its header), after `qdcount` questions and up to
/// `ancount` records; stops quietly at the first malformed record.
pub fn addresses(msg: &[u8], qdcount: u16, ancount: u16) -> Vec<IpAddr> {
    let mut out = Vec::new();
    let mut at = 12usize;
    for _ in 0..qdcount.min(4) {
        let Some(end) = skip_name(msg, at) else {
            return out;
        };
        at = end + 4;
    }
    for _ in 0..ancount.min(MAX_RECORDS) {
        let Some(end) = skip_name(msg, at) else {
            return out;
        };
        let (Some(rtype), Some(class), Some(rdlen)) =
            (be16(msg, end), be16(msg, end + 2), be16(msg, end + 8))
        else {
            return out;
        };
        let rdata_at = end + 10;
        let Some(rdata) = msg.get(rdata_at..rdata_at + usize::from(rdlen)) else {
            return out;
        };
        if class == CLASS_IN {
            if let (TYPE_A, Ok(b)) = (rtype, <[u8; 4]>::try_from(rdata)) {
                out.push(IpAddr::V4(Ipv4Addr::from(b)));
            } else if let (TYPE_AAAA, Ok(b)) = (rtype, <[u8; 16]>::try_from(rdata)) {
                out.push(IpAddr::V6(Ipv6Addr::from(b)));
            }
        }
        at = rdata_at + usize::from(rdlen);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(labels: &[&str]) -> Vec<u8> {
        let mut v = Vec::new();
        for l in labels {
            v.push(l.len() as u8);
            v.extend_from_slice(l.as_bytes());
        }
        v.push(0);
        v
    }

    fn rr(owner: &[u8], rtype: u16, rdata: &[u8]) -> Vec<u8> {
        let mut v = owner.to_vec();
        v.extend_from_slice(&rtype.to_be_bytes());
        v.extend_from_slice(&CLASS_IN.to_be_bytes());
        v.extend_from_slice(&300u32.to_be_bytes());
        v.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        v.extend_from_slice(rdata);
        v
    }

    fn message(answers: &[Vec<u8>]) -> Vec<u8> {
        let mut m = vec![
            0x12,
            0x34,
            0x81,
            0x80,
            0,
            1,
            0,
            answers.len() as u8,
            0,
            0,
            0,
            0,
        ];
        m.extend(name(&["www", "example", "com"]));
        m.extend_from_slice(&[0, 28, 0, 1]);
        for a in answers {
            m.extend_from_slice(a);
        }
        m
    }

    #[test]
    fn cname_then_aaaa_with_compression() {
        let ptr = [0xc0, 12];
        let target = name(&["cdn", "example", "net"]);
        let v6: [u8; 16] = "2001:db8::7".parse::<Ipv6Addr>().unwrap().octets();
        let m = message(&[
            rr(&ptr, 5, &target),
            rr(&ptr, TYPE_AAAA, &v6),
            rr(&ptr, TYPE_A, &[192, 0, 2, 7]),
        ]);
        let got = addresses(&m, 1, 3);
        assert_eq!(
            got,
            vec![
                "2001:db8::7".parse::<IpAddr>().unwrap(),
                "192.0.2.7".parse().unwrap()
            ]
        );
    }

    #[test]
    fn truncated_and_malformed_stop_quietly() {
        let ptr = [0xc0, 12];
        let m = message(&[rr(&ptr, TYPE_A, &[192, 0, 2, 7])]);
        for cut in 0..m.len() {
            let _ = addresses(&m[..cut], 1, 1);
        }
        assert!(addresses(&m[..m.len() - 1], 1, 1).is_empty());
        // A record with a wrong length is skipped, not misread.
        let bad = message(&[
            rr(&ptr, TYPE_A, &[1, 2, 3]),
            rr(&ptr, TYPE_A, &[192, 0, 2, 8]),
        ]);
        assert_eq!(
            addresses(&bad, 1, 2),
            vec!["192.0.2.8".parse::<IpAddr>().unwrap()]
        );
        assert!(addresses(&[], 5, 5).is_empty());
    }
}
