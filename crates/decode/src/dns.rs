//! A small DNS message parser (RFC 1035 §4.1): the 12-byte header and the
//! first question, for detectors that follow lookups (`dns-timeout`).
//!
//! Allocation-free and panic-free on any input: every read is a checked
//! slice. Names are followed through compression pointers (RFC 1035 §4.1.4)
//! only backwards (a pointer must point before the label that holds it, as
//! every encoder writes them), at most [`MAX_POINTER_JUMPS`] times and up to
//! 255 bytes of name (RFC 1035 §2.3.4), so a hostile message cannot loop.
//! DNS over TCP (RFC 1035 §4.2.2, RFC 7766 §8) prefixes each message with a
//! 2-byte length: [`TcpDnsMessages`] walks those.

use std::fmt;

/// DNS header length in bytes (RFC 1035 §4.1.1).
pub const HEADER_LEN: usize = 12;
/// The DNS server port, UDP and TCP (RFC 1035 §4.2).
pub const DNS_PORT: u16 = 53;
/// Longest name in wire form, bytes (RFC 1035 §2.3.4).
pub const MAX_NAME_LEN: usize = 255;
/// Longest label, bytes (RFC 1035 §2.3.4).
pub const MAX_LABEL_LEN: usize = 63;
/// Most compression pointers followed in one name (more is a loop or an attack).
pub const MAX_POINTER_JUMPS: usize = 16;

/// QTYPE A (RFC 1035 §3.2.2).
pub const QTYPE_A: u16 = 1;
/// QTYPE AAAA (RFC 3596 §2.1).
pub const QTYPE_AAAA: u16 = 28;
/// QCLASS IN (RFC 1035 §3.2.4).
pub const QCLASS_IN: u16 = 1;

/// The fixed DNS header (RFC 1035 §4.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DnsHeader {
    /// Transaction ID.
    pub id: u16,
    /// The flags word as on the wire (QR, OPCODE, AA, TC, RD, RA, Z, AD, CD, RCODE).
    pub flags: u16,
    /// Questions.
    pub qdcount: u16,
    /// Answer records.
    pub ancount: u16,
    /// Authority records.
    pub nscount: u16,
    /// Additional records.
    pub arcount: u16,
}

impl DnsHeader {
    /// QR: a response (true) or a query (false).
    pub fn is_response(&self) -> bool {
        self.flags & 0x8000 != 0
    }
    /// OPCODE (0 = QUERY).
    pub fn opcode(&self) -> u8 {
        ((self.flags >> 11) & 0x0f) as u8
    }
    /// TC: the message was truncated (RFC 1035 §4.1.1; the client retries over TCP).
    pub fn truncated(&self) -> bool {
        self.flags & 0x0200 != 0
    }
    /// RD: recursion desired.
    pub fn recursion_desired(&self) -> bool {
        self.flags & 0x0100 != 0
    }
    /// RCODE, the low 4 bits (0 NOERROR, 2 SERVFAIL, 3 NXDOMAIN, 5 REFUSED).
    pub fn rcode(&self) -> u8 {
        (self.flags & 0x000f) as u8
    }
}

/// A domain name inside a message, not yet copied: labels are read on demand.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DnsName<'a> {
    msg: &'a [u8],
    start: usize,
}

/// One question (RFC 1035 §4.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DnsQuestion<'a> {
    /// QNAME.
    pub name: DnsName<'a>,
    /// QTYPE (1 A, 28 AAAA, …).
    pub qtype: u16,
    /// QCLASS (1 IN).
    pub qclass: u16,
}

/// A parsed message: the header and, when it is complete, the first question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DnsMessage<'a> {
    /// The header.
    pub header: DnsHeader,
    /// The first question; `None` when QDCOUNT is 0 or the question is cut
    /// short or malformed.
    pub question: Option<DnsQuestion<'a>>,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([*s.first()?, *s.get(1)?]))
}

/// Parse the header and first question of one DNS message (`msg` starts at
/// the header: the UDP payload, or a TCP message after its length prefix).
/// `None` when fewer than 12 bytes.
pub fn parse(msg: &[u8]) -> Option<DnsMessage<'_>> {
    let header = DnsHeader {
        id: be16(msg, 0)?,
        flags: be16(msg, 2)?,
        qdcount: be16(msg, 4)?,
        ancount: be16(msg, 6)?,
        nscount: be16(msg, 8)?,
        arcount: be16(msg, 10)?,
    };
    let question = if header.qdcount == 0 {
        None
    } else {
        parse_question(msg, HEADER_LEN)
    };
    Some(DnsMessage { header, question })
}

fn parse_question(msg: &[u8], at: usize) -> Option<DnsQuestion<'_>> {
    let end = name_end(msg, at)?;
    Some(DnsQuestion {
        name: DnsName { msg, start: at },
        qtype: be16(msg, end)?,
        qclass: be16(msg, end.checked_add(2)?)?,
    })
}

/// Where the name at `at` ends in place (the byte after its terminating zero
/// label or its first pointer), after checking the whole name is valid.
fn name_end(msg: &[u8], at: usize) -> Option<usize> {
    let mut end_in_place = None;
    let mut pos = at;
    let mut jumps = 0usize;
    let mut total = 0usize;
    loop {
        let len = *msg.get(pos)? as usize;
        match len & 0xc0 {
            0x00 => {
                total = total.checked_add(len + 1)?;
                if total > MAX_NAME_LEN {
                    return None;
                }
                let next = pos.checked_add(1 + len)?;
                if next > msg.len() {
                    return None;
                }
                if len == 0 {
                    return Some(end_in_place.unwrap_or(next));
                }
                pos = next;
            }
            0xc0 => {
                let target = (be16(msg, pos)? & 0x3fff) as usize;
                if end_in_place.is_none() {
                    end_in_place = Some(pos.checked_add(2)?);
                }
                jumps += 1;
                if target >= pos || jumps > MAX_POINTER_JUMPS {
                    return None;
                }
                pos = target;
            }
            _ => return None, // 0x40 / 0x80: extended label types, obsolete (RFC 6891 §5).
        }
    }
}

impl<'a> DnsName<'a> {
    /// The labels, in order (compression pointers followed). Call only on a
    /// name from [`parse`], which validated it; a malformed name ends early.
    pub fn labels(&self) -> Labels<'a> {
        Labels {
            msg: self.msg,
            pos: self.start,
            jumps: 0,
            done: false,
        }
    }

    /// Whether the name is the root (no labels).
    pub fn is_root(&self) -> bool {
        self.labels().next().is_none()
    }

    /// Whether two names are equal, ASCII case-insensitively (RFC 4343).
    pub fn eq_ignore_case(&self, other: &DnsName<'_>) -> bool {
        let mut a = self.labels();
        let mut b = other.labels();
        loop {
            match (a.next(), b.next()) {
                (None, None) => return true,
                (Some(x), Some(y)) if x.eq_ignore_ascii_case(y) => {}
                _ => return false,
            }
        }
    }
}

impl DnsName<'_> {
    /// Append the presentation form (as [`fmt::Display`] writes it) to
    /// `out`, without the formatting machinery: the per-query path of the
    /// DNS detectors.
    pub fn push_presentation(&self, out: &mut String) {
        // Writing to a String cannot fail.
        let _ = self.write_presentation(out);
    }

    /// The presentation form into `w`, byte by byte (RFC 4343 §2.1 escapes).
    fn write_presentation<W: fmt::Write>(&self, w: &mut W) -> fmt::Result {
        let mut first = true;
        for label in self.labels() {
            if !first {
                w.write_char('.')?;
            }
            first = false;
            for &b in label {
                match b {
                    b'.' | b'\\' => {
                        w.write_char('\\')?;
                        w.write_char(b as char)?;
                    }
                    0x21..=0x7e => w.write_char((b as char).to_ascii_lowercase())?,
                    _ => write!(w, "\\{b:03}")?,
                }
            }
        }
        if first {
            w.write_char('.')?;
        }
        Ok(())
    }
}

impl fmt::Display for DnsName<'_> {
    /// Presentation form, lower-cased, without the trailing dot ("api.lab.test";
    /// the root is "."). Bytes outside printable ASCII, `.` and `\` inside a
    /// label are escaped as RFC 4343 §2.1 (`\DDD`, `\.`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_presentation(f)
    }
}

impl fmt::Debug for DnsName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DnsName({self})")
    }
}

/// Iterator over the labels of a [`DnsName`].
#[derive(Debug, Clone)]
pub struct Labels<'a> {
    msg: &'a [u8],
    pos: usize,
    jumps: usize,
    done: bool,
}

impl<'a> Iterator for Labels<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        while !self.done {
            let Some(&len) = self.msg.get(self.pos) else {
                self.done = true;
                return None;
            };
            let len = len as usize;
            if len & 0xc0 == 0xc0 {
                let target = be16(self.msg, self.pos).map(|v| (v & 0x3fff) as usize);
                self.jumps += 1;
                match target {
                    Some(t) if t < self.pos && self.jumps <= MAX_POINTER_JUMPS => self.pos = t,
                    _ => self.done = true,
                }
                continue;
            }
            if len == 0 || len > MAX_LABEL_LEN {
                self.done = true;
                return None;
            }
            let from = self.pos + 1;
            let Some(label) = self.msg.get(from..from + len) else {
                self.done = true;
                return None;
            };
            self.pos = from + len;
            return Some(label);
        }
        None
    }
}

/// The DNS messages in the payload of one TCP segment that starts at a
/// message boundary (RFC 1035 §4.2.2: each message is preceded by its length,
/// 2 bytes). Yields `(declared_len, bytes)`; the last message may be cut
/// short (`bytes.len() < declared_len`) when it continues in the next segment.
#[derive(Debug, Clone)]
pub struct TcpDnsMessages<'a> {
    payload: &'a [u8],
    pos: usize,
}

impl<'a> TcpDnsMessages<'a> {
    /// Walk `payload`, which must begin with a length prefix.
    pub fn new(payload: &'a [u8]) -> Self {
        TcpDnsMessages { payload, pos: 0 }
    }
}

impl<'a> Iterator for TcpDnsMessages<'a> {
    type Item = (usize, &'a [u8]);
    fn next(&mut self) -> Option<(usize, &'a [u8])> {
        let len = be16(self.payload, self.pos)? as usize;
        let from = self.pos.checked_add(2)?;
        let to = from.checked_add(len)?.min(self.payload.len());
        let bytes = self.payload.get(from..to)?;
        self.pos = from + len;
        Some((len, bytes))
    }
}

/// Name of common QTYPEs ("A", "AAAA", …), else `None`.
pub fn qtype_name(qtype: u16) -> Option<&'static str> {
    Some(match qtype {
        1 => "A",
        2 => "NS",
        5 => "CNAME",
        6 => "SOA",
        12 => "PTR",
        15 => "MX",
        16 => "TXT",
        28 => "AAAA",
        33 => "SRV",
        35 => "NAPTR",
        43 => "DS",
        48 => "DNSKEY",
        64 => "SVCB",
        65 => "HTTPS",
        255 => "ANY",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query for api.lab.test AAAA, id 0x4c28, RD (dns-timeout.pcap frame 2).
    const AAAA_QUERY: &[u8] = &[
        0x4c, 0x28, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 3, b'a', b'p',
        b'i', 3, b'l', b'a', b'b', 4, b't', b'e', b's', b't', 0, 0x00, 0x1c, 0x00, 0x01,
    ];

    #[test]
    fn header_and_question() {
        let m = parse(AAAA_QUERY).unwrap();
        assert_eq!(m.header.id, 0x4c28);
        assert!(!m.header.is_response());
        assert!(m.header.recursion_desired());
        assert!(!m.header.truncated());
        assert_eq!(m.header.opcode(), 0);
        let q = m.question.unwrap();
        assert_eq!(q.qtype, QTYPE_AAAA);
        assert_eq!(q.qclass, QCLASS_IN);
        assert_eq!(q.name.to_string(), "api.lab.test");
        assert_eq!(qtype_name(q.qtype), Some("AAAA"));
    }

    #[test]
    fn flags_table() {
        // (flags, response, truncated, rcode, opcode)
        let table: &[(u16, bool, bool, u8, u8)] = &[
            (0x0100, false, false, 0, 0),
            (0x8180, true, false, 0, 0),
            (0x8380, true, true, 0, 0),
            (0x8183, true, false, 3, 0),
            (0x8182, true, false, 2, 0),
            (0x2800, false, false, 0, 5),
        ];
        for &(flags, resp, tc, rcode, op) in table {
            let h = DnsHeader {
                id: 0,
                flags,
                qdcount: 0,
                ancount: 0,
                nscount: 0,
                arcount: 0,
            };
            assert_eq!(
                (h.is_response(), h.truncated(), h.rcode(), h.opcode()),
                (resp, tc, rcode, op),
                "{flags:#06x}"
            );
        }
    }

    #[test]
    fn compression_pointer_backwards_only() {
        // Header, question "a.b" at 12, then a second name at 19 pointing to 12.
        let mut m = vec![0u8; 12];
        m[5] = 1;
        m.extend_from_slice(&[1, b'a', 1, b'b', 0, 0, 1, 0, 1]);
        let n = DnsName { msg: &m, start: 12 };
        assert_eq!(n.to_string(), "a.b");
        m.extend_from_slice(&[1, b'X', 0xc0, 12]);
        let n2 = DnsName { msg: &m, start: 21 };
        assert_eq!(n2.to_string(), "x.a.b");
        assert_eq!(name_end(&m, 21), Some(25));
        // A pointer to itself or forwards is rejected.
        let mut bad = vec![0u8; 12];
        bad[5] = 1;
        bad.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]);
        assert!(parse(&bad).unwrap().question.is_none());
        let mut fwd = vec![0u8; 12];
        fwd[5] = 1;
        fwd.extend_from_slice(&[0xc0, 20, 0, 1, 0, 1, 0, 0, 0]);
        assert!(parse(&fwd).unwrap().question.is_none());
    }

    #[test]
    fn truncated_and_hostile_inputs() {
        for cut in 0..AAAA_QUERY.len() {
            let m = parse(&AAAA_QUERY[..cut]);
            if cut < HEADER_LEN {
                assert!(m.is_none());
            } else {
                // The question needs its name, type and class.
                assert_eq!(m.unwrap().question.is_some(), cut >= AAAA_QUERY.len());
            }
        }
        // Label type 0x40, label running past the end, 256-byte name.
        for tail in [&[0x41u8, 0, 0, 1, 0, 1][..], &[9, b'a', 0][..]] {
            let mut m = vec![0u8; 12];
            m[5] = 1;
            m.extend_from_slice(tail);
            assert!(parse(&m).unwrap().question.is_none());
        }
        let mut long = vec![0u8; 12];
        long[5] = 1;
        for _ in 0..5 {
            long.push(63);
            long.extend_from_slice(&[b'a'; 63]);
        }
        long.extend_from_slice(&[0, 0, 1, 0, 1]);
        assert!(parse(&long).unwrap().question.is_none());
        // Every byte value in every position: no panic.
        let mut m = AAAA_QUERY.to_vec();
        for i in 0..m.len() {
            for v in [0u8, 0x3f, 0x40, 0xc0, 0xff] {
                let old = m[i];
                m[i] = v;
                if let Some(q) = parse(&m).and_then(|d| d.question) {
                    let _ = q.name.to_string();
                }
                m[i] = old;
            }
        }
    }

    #[test]
    fn names_compare_case_insensitively_and_escape() {
        let mut m = vec![0u8; 12];
        m[5] = 1;
        m.extend_from_slice(&[3, b'A', b'.', 0x07, 0]);
        let a = DnsName { msg: &m, start: 12 };
        assert_eq!(a.to_string(), "a\\.\\007");
        let mut m2 = vec![0u8; 12];
        m2.extend_from_slice(&[3, b'a', b'.', 0x07, 0]);
        let b = DnsName {
            msg: &m2,
            start: 12,
        };
        assert!(a.eq_ignore_case(&b));
        let root = DnsName {
            msg: &[0u8],
            start: 0,
        };
        assert!(root.is_root());
        assert_eq!(root.to_string(), ".");
        // push_presentation appends the same text (after what is there).
        let mut out = String::from("x:");
        a.push_presentation(&mut out);
        root.push_presentation(&mut out);
        assert_eq!(out, "x:a\\.\\007.");
    }

    #[test]
    fn tcp_length_prefixed() {
        let mut p = Vec::new();
        p.extend_from_slice(&(AAAA_QUERY.len() as u16).to_be_bytes());
        p.extend_from_slice(AAAA_QUERY);
        p.extend_from_slice(&(AAAA_QUERY.len() as u16).to_be_bytes());
        p.extend_from_slice(&AAAA_QUERY[..14]);
        let msgs: Vec<(usize, &[u8])> = TcpDnsMessages::new(&p).collect();
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[0].1.len(), AAAA_QUERY.len());
        assert_eq!(msgs[1], (AAAA_QUERY.len(), &AAAA_QUERY[..14]));
        assert_eq!(TcpDnsMessages::new(&[0]).count(), 0);
        assert_eq!(TcpDnsMessages::new(&[]).count(), 0);
    }
}
