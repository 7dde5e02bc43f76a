//! [`SegmentAnalysis`] packed into 6 bytes, 2-aligned (instead of 20) for the per-packet
//! records a stream keeps: the analyzer's recent verdicts and the
//! duplicate-sighting entries (`sightings.rs`).

use crate::SegmentAnalysis;

/// A [`SegmentAnalysis`]: its 15 flags as bits, plus `duplicate_ack_num`
/// as two 16-bit halves (so the record fits in padding next to a `u32`).
/// Lossless ([`PackedAnalysis::unpack`] returns what was packed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PackedAnalysis {
    bits: u16,
    /// `duplicate_ack_num`, low half first.
    duplicate_ack_num: [u16; 2],
}

/// The flags of `a` in bit order (bit 0 first).
fn flags(a: &SegmentAnalysis) -> [bool; 15] {
    [
        a.retransmission,
        a.fast_retransmission,
        a.spurious_retransmission,
        a.out_of_order,
        a.lost_segment,
        a.ack_lost_segment,
        a.duplicate_ack,
        a.zero_window,
        a.zero_window_probe,
        a.zero_window_probe_ack,
        a.keep_alive,
        a.keep_alive_ack,
        a.window_full,
        a.window_update,
        a.reused_ports,
    ]
}

impl PackedAnalysis {
    pub(crate) fn pack(a: &SegmentAnalysis) -> PackedAnalysis {
        let bits = flags(a)
            .iter()
            .enumerate()
            .fold(0u16, |b, (i, &f)| b | (u16::from(f) << i));
        let n = a.duplicate_ack_num;
        PackedAnalysis {
            bits,
            duplicate_ack_num: [n as u16, (n >> 16) as u16],
        }
    }

    pub(crate) fn unpack(self) -> SegmentAnalysis {
        let f = |i: u32| self.bits & (1 << i) != 0;
        SegmentAnalysis {
            retransmission: f(0),
            fast_retransmission: f(1),
            spurious_retransmission: f(2),
            out_of_order: f(3),
            lost_segment: f(4),
            ack_lost_segment: f(5),
            duplicate_ack: f(6),
            duplicate_ack_num: u32::from(self.duplicate_ack_num[0])
                | (u32::from(self.duplicate_ack_num[1]) << 16),
            zero_window: f(7),
            zero_window_probe: f(8),
            zero_window_probe_ack: f(9),
            keep_alive: f(10),
            keep_alive_ack: f(11),
            window_full: f(12),
            window_update: f(13),
            reused_ports: f(14),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_every_flag_combination() {
        for bits in 0u16..(1 << 15) {
            let n = u32::from(bits).wrapping_mul(0x9e37_79b9);
            let p = PackedAnalysis {
                bits,
                duplicate_ack_num: [n as u16, (n >> 16) as u16],
            };
            let a = p.unpack();
            assert_eq!(a.duplicate_ack_num, n);
            assert_eq!(PackedAnalysis::pack(&a), p);
            assert_eq!(PackedAnalysis::pack(&a).unpack(), a);
        }
        // Each flag has its own bit.
        let one = SegmentAnalysis {
            window_update: true,
            ..SegmentAnalysis::default()
        };
        assert_eq!(PackedAnalysis::pack(&one).bits, 1 << 13);
        assert_eq!(std::mem::size_of::<PackedAnalysis>(), 6);
    }
}
