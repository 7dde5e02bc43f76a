//! Streams in order of last activity, for retirement in amortised O(1).
//!
//! Three intrusive doubly linked lists over the stream indices: live open
//! streams, live closed ones (RST seen, both FINs acknowledged, or replaced),
//! and ended ones whose full state is still kept for stray packets
//! (`retire.rs`). A packet
//! moves its stream to the back of its list with the capture clock (the
//! largest timestamp seen so far, which never goes backwards), so each list
//! stays sorted by last activity: the fronts are the only candidates for the
//! idle and quiet timeouts and for eviction. 16 bytes per stream.

/// No stream.
const NIL: u32 = u32::MAX;

/// The open list.
pub(super) const OPEN: usize = 0;
/// The closed list.
pub(super) const CLOSED: usize = 1;
/// The ended list: closed streams already announced ended
/// ([`crate::FlowEnded`]) whose full state is kept for stray packets.
pub(super) const ENDED: usize = 2;
/// Number of lists.
const LISTS: usize = 3;

#[derive(Debug, Clone, Copy)]
struct Link {
    prev: u32,
    next: u32,
    /// Capture clock at the stream's last activity, ns.
    act: i64,
}

impl Default for Link {
    fn default() -> Self {
        Link {
            prev: NIL,
            next: NIL,
            act: 0,
        }
    }
}

/// The three lists (see the module documentation).
#[derive(Debug)]
pub(super) struct Lru {
    links: Vec<Link>,
    /// (head, tail) of the open, the closed and the ended list.
    ends: [(u32, u32); LISTS],
}

impl Default for Lru {
    fn default() -> Self {
        Lru {
            links: Vec::new(),
            ends: [(NIL, NIL); LISTS],
        }
    }
}

impl Lru {
    /// Heap bytes (links at capacity).
    pub(super) fn heap_bytes(&self) -> usize {
        self.links.capacity() * std::mem::size_of::<Link>()
    }

    /// Take `idx` out of whichever list holds it (no-op when in none).
    pub(super) fn remove(&mut self, idx: usize) {
        let Some(&l) = self.links.get(idx) else {
            return;
        };
        let me = idx as u32;
        let ends = self.ends;
        let list = (0..LISTS).find(|&k| ends[k].0 == me || ends[k].1 == me);
        if l.prev == NIL && l.next == NIL && list.is_none() {
            return;
        }
        match l.prev {
            NIL => {
                if let Some(k) = list {
                    self.ends[k].0 = l.next;
                }
            }
            p => self.links[p as usize].next = l.next,
        }
        match l.next {
            NIL => {
                if let Some(k) = list {
                    self.ends[k].1 = l.prev;
                }
            }
            n => self.links[n as usize].prev = l.prev,
        }
        self.links[idx] = Link {
            act: l.act,
            ..Link::default()
        };
    }

    /// Move `idx` to the back of `list` with activity `act` (the capture
    /// clock: never below the activity of any stream already listed).
    pub(super) fn touch(&mut self, idx: usize, list: usize, act: i64) {
        if self.links.len() <= idx {
            self.links.resize(idx + 1, Link::default());
        }
        if self.ends[list].1 == idx as u32 {
            // Already last (a bulk transfer's packets): only the time moves.
            self.links[idx].act = act;
            return;
        }
        self.remove(idx);
        let me = idx as u32;
        let tail = self.ends[list].1;
        self.links[idx] = Link {
            prev: tail,
            next: NIL,
            act,
        };
        match tail {
            NIL => self.ends[list].0 = me,
            t => self.links[t as usize].next = me,
        }
        self.ends[list].1 = me;
    }

    /// Activity of `idx` (capture clock at its last packet), ns.
    pub(super) fn activity(&self, idx: usize) -> Option<i64> {
        self.links.get(idx).map(|l| l.act)
    }

    /// Move `idx` to the back of `list` keeping its activity: for a stream
    /// taken from the front of another list in activity order, which keeps
    /// `list` sorted.
    pub(super) fn move_to(&mut self, idx: usize, list: usize) {
        let act = self.activity(idx).unwrap_or(0);
        self.touch(idx, list, act);
    }

    /// The least recently active stream of `list` and its activity.
    pub(super) fn front(&self, list: usize) -> Option<(usize, i64)> {
        let h = self.ends[list].0;
        (h != NIL).then(|| (h as usize, self.links[h as usize].act))
    }

    /// The least recently active live stream (of the open and closed lists).
    pub(super) fn oldest(&self) -> Option<usize> {
        match (self.front(OPEN), self.front(CLOSED)) {
            (Some(a), Some(b)) => Some(if b.1 < a.1 { b.0 } else { a.0 }),
            (a, b) => a.or(b).map(|x| x.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_stay_in_activity_order() {
        let mut l = Lru::default();
        assert_eq!(l.oldest(), None);
        l.touch(0, OPEN, 10);
        l.touch(1, OPEN, 20);
        l.touch(2, CLOSED, 30);
        l.touch(0, OPEN, 40);
        assert_eq!(l.front(OPEN), Some((1, 20)));
        assert_eq!(l.oldest(), Some(1));
        l.touch(1, CLOSED, 50);
        assert_eq!(l.front(OPEN), Some((0, 40)));
        assert_eq!(l.front(CLOSED), Some((2, 30)));
        assert_eq!(l.oldest(), Some(2));
        l.remove(2);
        l.remove(2);
        assert_eq!(l.front(CLOSED), Some((1, 50)));
        assert_eq!(l.oldest(), Some(0));
        l.remove(0);
        l.remove(1);
        assert_eq!(l.oldest(), None);
        l.touch(1, OPEN, 60);
        assert_eq!(l.front(OPEN), Some((1, 60)));
        assert_eq!(l.activity(1), Some(60));
    }

    #[test]
    fn ended_streams_keep_their_activity_and_are_never_the_oldest_live() {
        let mut l = Lru::default();
        l.touch(0, CLOSED, 10);
        l.touch(1, CLOSED, 20);
        l.touch(2, OPEN, 30);
        l.move_to(0, ENDED);
        l.move_to(1, ENDED);
        assert_eq!(l.front(CLOSED), None);
        assert_eq!(l.front(ENDED), Some((0, 10)));
        assert_eq!(l.oldest(), Some(2));
        // A stray packet takes it back out (to a live list).
        l.touch(0, CLOSED, 40);
        assert_eq!(l.front(ENDED), Some((1, 20)));
        assert_eq!(l.front(CLOSED), Some((0, 40)));
        l.remove(1);
        assert_eq!(l.front(ENDED), None);
    }
}
