//! Vectors indexed by a dense id, grown on demand.
//!
//! `tcp.stream` ids are assigned 0, 1, 2, … in first-seen order
//! ([`crate::StreamId`]), so per-stream state every stream may need is
//! cheapest in a `Vec` indexed by the id: no hashing, no key, no control
//! byte. [`slot_mut`] is the one growth rule those vectors share (the flow
//! table's consumers: stall ledger, capture quality, syn-retransmit,
//! frag-needed).

/// The element of `v` at `index`, `v` first grown to hold it with elements
/// made by `fill`.
///
/// Growth reserves at least a quarter of the current length: O(1) amortised
/// per element, like `Vec::push`, but at most a fifth of the capacity unused
/// rather than half (these vectors reach millions of elements on a SYN
/// scan). `None` only when `index + 1` overflows `usize`.
pub fn slot_mut<T>(v: &mut Vec<T>, index: usize, fill: impl FnMut() -> T) -> Option<&mut T> {
    if index >= v.len() {
        let want = index.checked_add(1)?;
        if want > v.capacity() {
            let extra = (want - v.len()).max(v.len() / 4);
            v.reserve_exact(extra);
        }
        v.resize_with(want, fill);
    }
    v.get_mut(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_by_a_quarter_and_fills_the_gap() {
        let mut v: Vec<u32> = Vec::new();
        *slot_mut(&mut v, 3, || 7).unwrap() = 1;
        assert_eq!(v, [7, 7, 7, 1]);
        assert_eq!(v.capacity(), 4);
        // Within the length: no growth, the element itself.
        *slot_mut(&mut v, 0, || 9).unwrap() += 1;
        assert_eq!(v, [8, 7, 7, 1]);
        // Dense ids one by one: capacity grows by a quarter, never doubles.
        let mut caps = Vec::new();
        for i in 4..2000 {
            slot_mut(&mut v, i, || 0);
            if caps.last() != Some(&v.capacity()) {
                caps.push(v.capacity());
            }
        }
        assert_eq!(v.len(), 2000);
        assert!(
            caps.windows(2)
                .all(|w| w[1] >= w[0] + w[0] / 4 && w[1] <= w[0] + w[0] / 4 + 1),
            "{caps:?}"
        );
        assert!(
            v.capacity() * 4 <= v.len() * 5,
            "{} for {}",
            v.capacity(),
            v.len()
        );
        assert_eq!(slot_mut(&mut v, usize::MAX, || 0), None);
    }
}
