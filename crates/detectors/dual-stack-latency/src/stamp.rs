//! The send timestamp iputils `ping` writes at the start of every echo
//! request's data, and how old it is when the request is captured.
//!
//! iputils `ping` (`ping_common.c` `pinger()` → `gettimeofday()`, then
//! `sendto()`) copies a `struct timeval` into bytes 0.. of the echo data and
//! fills the rest with 0x08, 0x09, … (the byte's own offset): on 64-bit Linux
//! the timeval is 16 bytes, `tv_sec` and `tv_usec` as little-endian `i64`
//! (x86_64, aarch64); on 32-bit builds 8 bytes, two `i32`. tshark 4.0's
//! `icmp.data_time` reads every stamp as the 32-bit layout, which turns the
//! 64-bit layout's zero high half of `tv_sec` into `tv_usec`.

/// How the stamp was laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StampLayout {
    /// 16 bytes: `tv_sec` then `tv_usec`, little-endian 64-bit (iputils on
    /// 64-bit Linux).
    Timeval64Le,
    /// 8 bytes: `tv_sec` then `tv_usec`, little-endian 32-bit, followed by
    /// iputils' fill pattern (bytes 8..16 = 0x08..0x0f).
    Timeval32Le,
}

/// A stamp older than this at capture time is not believed (ns): 5 s. The
/// send path of a working host takes microseconds; the seed's pathology
/// milliseconds. Anything older is another payload that happens to decode.
pub const MAX_STAMP_AGE_NS: i64 = 5_000_000_000;

const NS_PER_S: i64 = 1_000_000_000;
const US_PER_S: u64 = 1_000_000;

fn le_u64(data: &[u8], at: usize) -> Option<u64> {
    let b: [u8; 8] = data.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

fn le_u32(data: &[u8], at: usize) -> Option<u32> {
    let b: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
    Some(u32::from_le_bytes(b))
}

/// `sec`/`usec` as ns since the epoch, when `usec` is a valid microsecond
/// count and the result fits.
fn to_ns(sec: u64, usec: u64) -> Option<i64> {
    if usec >= US_PER_S {
        return None;
    }
    let sec = i64::try_from(sec).ok()?;
    sec.checked_mul(NS_PER_S)?
        .checked_add(i64::try_from(usec).ok()? * 1_000)
}

/// The age (ns) of a stamp at `capture_ns`, when it is plausible: not in the
/// future and at most [`MAX_STAMP_AGE_NS`] old.
fn plausible_age(stamp_ns: i64, capture_ns: i64) -> Option<i64> {
    let age = capture_ns.checked_sub(stamp_ns)?;
    (0..=MAX_STAMP_AGE_NS).contains(&age).then_some(age)
}

/// Decode the send stamp at the start of echo-request `data` captured at
/// `capture_ns` (ns since the epoch) and return its layout and its age at
/// capture time (ns): the time between `gettimeofday()` in the sender and
/// the capture.
///
/// The 64-bit layout is tried first. The 32-bit layout is accepted only
/// when the 64-bit reading fails and bytes 8..16 hold iputils' fill pattern
/// (0x08..0x0f), which a 64-bit stamp can never hold there (its `tv_usec`
/// is below 10^6, so bytes 11..16 are zero). `None` for anything else
/// (other pingers' payloads, stamps in the future or older than
/// [`MAX_STAMP_AGE_NS`], data cut short by the snaplen).
pub fn stamp_age(data: &[u8], capture_ns: i64) -> Option<(StampLayout, i64)> {
    if let (Some(sec), Some(usec)) = (le_u64(data, 0), le_u64(data, 8)) {
        if let Some(age) = to_ns(sec, usec).and_then(|s| plausible_age(s, capture_ns)) {
            return Some((StampLayout::Timeval64Le, age));
        }
    }
    let fill = data.get(8..16)?;
    if !fill.iter().zip(8u8..).all(|(b, i)| *b == i) {
        return None;
    }
    let (sec, usec) = (le_u32(data, 0)?, le_u32(data, 4)?);
    let stamp = to_ns(u64::from(sec), u64::from(usec))?;
    plausible_age(stamp, capture_ns).map(|age| (StampLayout::Timeval32Le, age))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPTURE_NS: i64 = 1_795_000_000_123_456_000; // 2026-11-18, µs-aligned

    fn tv64(sec: u64, usec: u64, fill_to: usize) -> Vec<u8> {
        let mut v = [sec.to_le_bytes(), usec.to_le_bytes()].concat();
        v.extend((16..fill_to).map(|i| i as u8));
        v
    }

    fn tv32(sec: u32, usec: u32, fill_to: usize) -> Vec<u8> {
        let mut v = [sec.to_le_bytes(), usec.to_le_bytes()].concat();
        v.extend((8..fill_to).map(|i| i as u8));
        v
    }

    type Decoded = Option<(StampLayout, i64)>;

    /// (name, data, expected) with the capture at `CAPTURE_NS`
    /// (1795000000 s + 123456 µs).
    #[test]
    fn table() {
        let s = 1_795_000_000u64;
        let rows: Vec<(&str, Vec<u8>, Decoded)> = vec![
            (
                "64-bit, 3.9 ms old",
                tv64(s, 119_556, 56),
                Some((StampLayout::Timeval64Le, 3_900_000)),
            ),
            (
                "64-bit, same µs",
                tv64(s, 123_456, 56),
                Some((StampLayout::Timeval64Le, 0)),
            ),
            ("64-bit, in the future", tv64(s, 123_457, 56), None),
            ("64-bit, 6 s old", tv64(s - 6, 123_456, 56), None),
            ("64-bit, usec out of range", tv64(s, 1_000_000, 56), None),
            (
                "64-bit, exactly 16 bytes captured",
                tv64(s, 23_456, 16),
                Some((StampLayout::Timeval64Le, 100_000_000)),
            ),
            (
                "32-bit with iputils fill",
                tv32(s as u32, 122_456, 56),
                Some((StampLayout::Timeval32Le, 1_000_000)),
            ),
            (
                "32-bit, usec 0, fill",
                tv32(s as u32, 0, 56),
                Some((StampLayout::Timeval32Le, 123_456_000)),
            ),
            (
                "32-bit without the fill pattern",
                tv32(s as u32, 122_456, 8),
                None,
            ),
            ("32-bit, 12 bytes only", tv32(s as u32, 122_456, 12), None),
            (
                "Windows ping payload",
                b"abcdefghijklmnopqrstuvwabcdefghi".to_vec(),
                None,
            ),
            ("zeros", vec![0; 56], None),
            ("8 bytes", vec![1; 8], None),
            ("empty", Vec::new(), None),
        ];
        for (name, data, want) in rows {
            assert_eq!(stamp_age(&data, CAPTURE_NS), want, "{name}");
        }
    }

    /// What tshark 4.0 does (32-bit read of a 64-bit stamp: `tv_usec` = 0)
    /// must not happen here.
    #[test]
    fn a_64_bit_stamp_is_never_read_as_32_bit() {
        for usec in [0u64, 1, 500_000, 999_999] {
            let d = tv64(1_795_000_000, usec, 56);
            let got = stamp_age(&d, 1_795_000_000_999_999_000 + 1_000);
            assert_eq!(got.map(|g| g.0), Some(StampLayout::Timeval64Le));
        }
    }

    #[test]
    fn no_overflow_on_extreme_values() {
        let d = tv64(u64::MAX, 999_999, 16);
        assert_eq!(stamp_age(&d, i64::MAX), None);
        assert_eq!(stamp_age(&d, i64::MIN), None);
        let d = tv64(0, 0, 16);
        assert_eq!(stamp_age(&d, i64::MIN), None);
    }
}
