//! A table of small per-stream values indexed by stream id.
//!
//! `tcp.stream` ids are dense and assigned in first-seen order
//! ([`pcapsleuth_core::StreamId`]), so a value every stream may need (a
//! timestamp, two TTLs) is cheapest in a queue indexed by `id − base`: no
//! hashing, no per-entry key or control byte, `size_of::<T>()` bytes per
//! stream between the oldest and the newest stream holding a value. Values
//! equal to `T::default()` mean "none"; [`StreamSlots::clear`] resets one
//! and trims defaults off both ends, so the table follows the live streams
//! when streams end ([`pcapsleuth_flow::FlowEvent::FlowEnded`]) roughly in
//! the order they started.

use pcapsleuth_core::StreamId;
use std::collections::VecDeque;

/// Small values per stream id (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct StreamSlots<T> {
    base: u64,
    slots: VecDeque<T>,
}

impl<T: Default + PartialEq> StreamSlots<T> {
    /// An empty table.
    pub fn new() -> Self {
        StreamSlots {
            base: 0,
            slots: VecDeque::new(),
        }
    }

    /// The value of `stream`, if it is not the default.
    pub fn get(&self, stream: StreamId) -> Option<&T> {
        let i = stream.0.checked_sub(self.base)?;
        let v = self.slots.get(usize::try_from(i).ok()?)?;
        (*v != T::default()).then_some(v)
    }

    /// The value of `stream`, creating it (as `T::default()`) when absent.
    pub fn get_mut(&mut self, stream: StreamId) -> &mut T {
        let s = stream.0;
        if self.slots.is_empty() {
            self.base = s;
        }
        while s < self.base {
            self.slots.push_front(T::default());
            self.base -= 1;
        }
        let i = usize::try_from(s - self.base).unwrap_or(usize::MAX);
        while self.slots.len() <= i {
            self.slots.push_back(T::default());
        }
        &mut self.slots[i]
    }

    /// Reset `stream`'s value to the default and release trailing defaults
    /// at both ends of the table.
    pub fn clear(&mut self, stream: StreamId) {
        let Some(i) = stream.0.checked_sub(self.base) else {
            return;
        };
        let Some(v) = usize::try_from(i).ok().and_then(|i| self.slots.get_mut(i)) else {
            return;
        };
        *v = T::default();
        while self.slots.front().is_some_and(|v| *v == T::default()) {
            self.slots.pop_front();
            self.base += 1;
        }
        while self.slots.back().is_some_and(|v| *v == T::default()) {
            self.slots.pop_back();
        }
    }

    /// Slots held: streams from the oldest to the newest with a value.
    pub fn span(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_live_streams() {
        let mut t: StreamSlots<u16> = StreamSlots::new();
        assert_eq!(t.get(StreamId(3)), None);
        *t.get_mut(StreamId(3)) = 7;
        *t.get_mut(StreamId(5)) = 9;
        assert_eq!(t.get(StreamId(3)), Some(&7));
        assert_eq!(t.get(StreamId(4)), None);
        assert_eq!(t.span(), 3);
        // An id below the base (a retired stream's id seen again) extends the front.
        *t.get_mut(StreamId(1)) = 2;
        assert_eq!(t.get(StreamId(1)), Some(&2));
        assert_eq!(t.span(), 5);
        t.clear(StreamId(1));
        assert_eq!(t.span(), 3);
        t.clear(StreamId(5));
        assert_eq!(t.span(), 1);
        t.clear(StreamId(3));
        assert_eq!(t.span(), 0);
        assert_eq!(t.get(StreamId(3)), None);
        t.clear(StreamId(99));
        *t.get_mut(StreamId(100)) = 1;
        assert_eq!((t.span(), t.get(StreamId(100))), (1, Some(&1)));
    }
}
