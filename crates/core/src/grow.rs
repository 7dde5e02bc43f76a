//! Growth policy for per-stream queues.
//!
//! `VecDeque::push_back` doubles a full queue and allocates 4 elements for
//! the first one, so every stream that ever had one segment in flight keeps
//! 4 slots of each per-segment queue for the rest of its life. Streams hold
//! many such queues (the flow table's unacked and recent lists, the
//! detectors' segment ledgers and rings), most of them short, and a capture
//! can hold hundreds of thousands of open streams (`flows200k` in
//! `../shared/bench/gen-scale.py`). So a queue here grows to 1, 2, 4 and 8
//! elements, then by half (12, 18, 27, …): a stream with one segment in
//! flight at a time keeps one slot, at most a third of a larger capacity is
//! slack, and a push stays O(1) amortised.

use std::collections::VecDeque;

/// Capacity up to which a full queue doubles (from 1); above it, it grows by half.
const DOUBLE_UP_TO: usize = 8;

/// Make room for one more element in `d` under this module's policy (a
/// no-op when `d` has room).
pub fn reserve_one<T>(d: &mut VecDeque<T>) {
    if d.len() == d.capacity() {
        let cap = d.capacity();
        d.reserve_exact(if cap < DOUBLE_UP_TO {
            cap.max(1)
        } else {
            cap / 2
        });
    }
}

/// Push `x` at the back of `d`, growing a full queue by [`reserve_one`]'s
/// policy rather than doubling it.
pub fn push_back<T>(d: &mut VecDeque<T>, x: T) {
    reserve_one(d);
    d.push_back(x);
}

/// Insert `x` at `index` of `d` (as [`VecDeque::insert`]: panics when
/// `index > d.len()`), growing a full queue by [`reserve_one`]'s policy.
pub fn insert<T>(d: &mut VecDeque<T>, index: usize, x: T) {
    reserve_one(d);
    d.insert(index, x);
}

/// `old` emptied, its allocation kept: for a fresh record taking the
/// buffers of one it replaces.
#[must_use]
pub fn emptied<T>(mut old: VecDeque<T>) -> VecDeque<T> {
    old.clear();
    old
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_from_one_by_doubling_to_eight_then_by_half() {
        let mut d = VecDeque::new();
        let mut caps = Vec::new();
        for i in 0..20u64 {
            push_back(&mut d, i);
            if caps.last() != Some(&d.capacity()) {
                caps.push(d.capacity());
            }
        }
        assert_eq!(caps, [1, 2, 4, 8, 12, 18, 27]);
        assert_eq!(d.iter().copied().sum::<u64>(), 190);
    }

    #[test]
    fn insert_grows_by_the_same_policy_and_keeps_order() {
        let mut d = VecDeque::new();
        insert(&mut d, 0, 3u8);
        assert_eq!(d.capacity(), 1);
        insert(&mut d, 0, 1);
        insert(&mut d, 1, 2);
        assert_eq!(d.capacity(), 4);
        assert_eq!(d, [1, 2, 3]);
        let kept = emptied(d);
        assert!(kept.is_empty());
        assert_eq!(kept.capacity(), 4);
    }
}
