//! Client and server endpoints per dense stream id, packed:
//! [`StreamEndpoints`] (the detectors' `tcp.stream` ends, the flow table's
//! `udp.stream` conversations).

use crate::{Endpoint, StreamId};

/// Client and server endpoints of every stream (`tcp.stream` for the
/// detectors, `udp.stream` for the flow table's UDP conversations), indexed
/// by stream id: the ids are dense (assigned in first-seen order), so
/// there is no hashing and no per-stream index. A stream costs a 12-byte
/// record and two bits: an IPv4 pair is the record itself, any other pair
/// (IPv6, or mixed) is a 40-byte entry elsewhere whose index the record
/// holds (a SYN scan of 2 million IPv4 streams: 24 MB).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamEndpoints {
    /// Per stream id: an IPv4 pair (client address, server address
    /// big-endian, client port, server port), or in its first four bytes
    /// (native order) the index into `other` when the `other` bit is set.
    records: Vec<([u8; 4], [u8; 4], u16, u16)>,
    /// Per stream id, 64 to a word: the record is set.
    known: Vec<u64>,
    /// Per stream id, 64 to a word: the record is an index into `other`.
    is_other: Vec<u64>,
    /// Every other pair (IPv6, or a mixed one).
    other: Vec<(Endpoint, Endpoint)>,
}

/// Bit `i` of a bitset.
fn bit(words: &[u64], i: usize) -> bool {
    words.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
}

/// Set bit `i` of a bitset to `on` (the set long enough).
fn set_bit(words: &mut [u64], i: usize, on: bool) {
    if let Some(w) = words.get_mut(i / 64) {
        if on {
            *w |= 1 << (i % 64);
        } else {
            *w &= !(1 << (i % 64));
        }
    }
}

impl StreamEndpoints {
    /// Client and server of `stream`, if recorded.
    pub fn get(&self, stream: &StreamId) -> Option<(Endpoint, Endpoint)> {
        let i = usize::try_from(stream.get()).ok()?;
        if !bit(&self.known, i) {
            return None;
        }
        let &(c, s, cp, sp) = self.records.get(i)?;
        if bit(&self.is_other, i) {
            return self.other.get(u32::from_ne_bytes(c) as usize).copied();
        }
        let ep = |a: [u8; 4], port| Endpoint {
            addr: std::net::IpAddr::V4(a.into()),
            port,
        };
        Some((ep(c, cp), ep(s, sp)))
    }

    /// Record (or replace) `stream`'s client and server. The table grows to
    /// the largest id recorded, so ids must be dense (the flow table's);
    /// ids past `u32::MAX` are ignored, and so are IPv6 or mixed pairs
    /// beyond 2^32.
    pub fn insert(&mut self, stream: StreamId, ends: (Endpoint, Endpoint)) {
        let Ok(idx) = usize::try_from(stream.get()) else {
            return;
        };
        if u32::try_from(idx).is_err() {
            return;
        }
        if self.records.len() <= idx {
            self.records.resize(idx + 1, ([0; 4], [0; 4], 0, 0));
            let words = idx / 64 + 1;
            self.known.resize(words, 0);
            self.is_other.resize(words, 0);
        }
        let was_other = bit(&self.is_other, idx) && bit(&self.known, idx);
        let Some(rec) = self.records.get_mut(idx) else {
            return;
        };
        let old_other = was_other.then(|| u32::from_ne_bytes(rec.0) as usize);
        match ends {
            (
                Endpoint {
                    addr: std::net::IpAddr::V4(c),
                    port: cp,
                },
                Endpoint {
                    addr: std::net::IpAddr::V4(s),
                    port: sp,
                },
            ) => {
                *rec = (c.octets(), s.octets(), cp, sp);
                set_bit(&mut self.is_other, idx, false);
            }
            _ => {
                // Replaced in place when the stream already had an entry.
                let at = match old_other {
                    Some(j) if j < self.other.len() => j,
                    _ => self.other.len(),
                };
                let Ok(at32) = u32::try_from(at) else {
                    return;
                };
                match self.other.get_mut(at) {
                    Some(r) => *r = ends,
                    None => self.other.push(ends),
                }
                *rec = (at32.to_ne_bytes(), [0; 4], 0, 0);
                set_bit(&mut self.is_other, idx, true);
            }
        }
        set_bit(&mut self.known, idx, true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_endpoints_keep_every_family_and_replace() {
        let ep = |a: &str, port| Endpoint {
            addr: a.parse().unwrap(),
            port,
        };
        let v4 = (ep("192.0.2.10", 40000), ep("198.51.100.10", 80));
        let v6 = (ep("2001:db8::1", 40001), ep("2001:db8::2", 443));
        let mixed = (ep("192.0.2.10", 1), ep("2001:db8::2", 2));
        let mut t = StreamEndpoints::default();
        assert_eq!(t.get(&StreamId(0)), None);
        t.insert(StreamId(2), v4);
        t.insert(StreamId(0), v6);
        t.insert(StreamId(5), mixed);
        assert_eq!(t.get(&StreamId(2)), Some(v4));
        assert_eq!(t.get(&StreamId(0)), Some(v6));
        assert_eq!(t.get(&StreamId(5)), Some(mixed));
        assert_eq!(t.get(&StreamId(1)), None);
        assert_eq!(t.get(&StreamId(6)), None);
        // Replaced in place, in either family.
        let v4b = (ep("203.0.113.7", 9), ep("198.51.100.10", 80));
        t.insert(StreamId(2), v4b);
        t.insert(StreamId(0), mixed);
        assert_eq!(t.get(&StreamId(2)), Some(v4b));
        assert_eq!(t.get(&StreamId(0)), Some(mixed));
        assert_eq!(t.other.len(), 2);
        // A family change: an IPv6 pair takes a new entry, an IPv4 one none.
        t.insert(StreamId(0), v4b);
        assert_eq!(t.get(&StreamId(0)), Some(v4b));
        assert_eq!(t.other.len(), 2);
        t.insert(StreamId(2), v6);
        assert_eq!(t.get(&StreamId(2)), Some(v6));
        assert_eq!(t.get(&StreamId(0)), Some(v4b));
        assert_eq!(t.other.len(), 3);
        // An all-zero pair is a pair like any other; a gap is not recorded.
        let zero = (ep("0.0.0.0", 0), ep("0.0.0.0", 0));
        t.insert(StreamId(130), zero);
        assert_eq!(t.get(&StreamId(130)), Some(zero));
        assert_eq!(t.get(&StreamId(129)), None);
        assert_eq!(std::mem::size_of_val(&t.records[0]), 12);
        // Ids past u32::MAX are not recorded.
        t.insert(StreamId(u64::from(u32::MAX) + 1), v4);
        assert_eq!(t.get(&StreamId(u64::from(u32::MAX) + 1)), None);
    }
}
