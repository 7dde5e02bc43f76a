//! Growth policy for per-stream buffers.
//!
//! `VecDeque::push_back` doubles a full buffer (first allocation: 4
//! elements), so a stream of 9 packets holds 16 slots of each per-packet
//! buffer. Per-stream buffers here are mostly short and there are hundreds of
//! thousands of streams, so they grow by 2 elements up to 8, then by half
//! (capacities 2, 4, 6, 8, 12, 18, 27, …): at most a third of the capacity is slack, and the amortized
//! cost of a push stays O(1).

use std::collections::VecDeque;

/// Elements allocated for an empty buffer's first element.
const FIRST: usize = 2;

/// Push `x` at the back of `d`, growing a full buffer by [`FIRST`] elements
/// up to `4 * FIRST`, then by half, rather than doubling it.
pub(crate) fn push_back<T>(d: &mut VecDeque<T>, x: T) {
    if d.len() == d.capacity() {
        let cap = d.capacity();
        d.reserve_exact(if cap < 4 * FIRST { FIRST } else { cap / 2 });
    }
    d.push_back(x);
}

/// `old` emptied, its allocation kept: for a fresh record taking the
/// buffers of one it replaces (`Stream::reuse_buffers`).
pub(crate) fn emptied<T>(mut old: VecDeque<T>) -> VecDeque<T> {
    old.clear();
    old
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_by_half() {
        let mut d = VecDeque::new();
        let mut caps = Vec::new();
        for i in 0..20u64 {
            push_back(&mut d, i);
            if caps.last() != Some(&d.capacity()) {
                caps.push(d.capacity());
            }
        }
        assert_eq!(caps, [2, 4, 6, 8, 12, 18, 27]);
        assert_eq!(d.iter().copied().sum::<u64>(), 190);
    }
}
