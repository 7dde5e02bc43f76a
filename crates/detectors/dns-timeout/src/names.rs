//! Interned query names, released when nothing names them any more.
//!
//! Every DNS message names its QNAME by a `u32` id ([`crate::Msg::name`]).
//! A capture can hold a new name in every query (a random-subdomain flood,
//! "DNS water torture": `<random>.victim.example`), so the table must not
//! keep every name the capture ever had: after each chunk is concluded
//! ([`crate::chunk`]) the collector marks the ids still named (the messages
//! held, the lookups kept for the diagnosis, the per-name totals) and
//! [`NameTable::release_unmarked`] frees the others, whose ids are given to
//! later names. Memory then follows the names in use, which
//! [`crate::diagnose::MAX_NAME_TALLIES`] and the chunk size bound.
//!
//! A name is stored once: the index maps a 64-bit hash of the name to its
//! id and compares the stored name; names whose hash another name already
//! holds (probability about n²/2⁶⁵) go to a small map of their own.

use foldhash::HashMap;
use std::hash::BuildHasher;

/// Query names by id, with their index (see the module documentation).
#[derive(Debug, Clone)]
pub struct NameTable {
    /// Name of each id; a released id holds an empty string until reused.
    names: Vec<String>,
    /// Released ids, given to the next new names.
    free: Vec<u32>,
    /// Per id: released (its slot in `names` means nothing).
    released: Vec<bool>,
    /// Hash of a name → its id (the first name with that hash).
    by_hash: HashMap<u64, u32>,
    /// Names whose hash another live name holds in `by_hash`.
    collided: HashMap<String, u32>,
    /// The hash (`name_hash`; tests force collisions with another).
    hash: fn(&str) -> u64,
}

impl Default for NameTable {
    fn default() -> Self {
        NameTable {
            names: Vec::new(),
            free: Vec::new(),
            released: Vec::new(),
            by_hash: HashMap::default(),
            collided: HashMap::default(),
            hash: name_hash,
        }
    }
}

/// The 64-bit hash `by_hash` is keyed by (fixed seed; names whose hashes
/// collide, by chance or crafted, go to `collided`, so it needs no secret).
fn name_hash(name: &str) -> u64 {
    foldhash::quality::FixedState::with_seed(0x4e41_4d45).hash_one(name)
}

impl NameTable {
    /// Every id's name, by id (released ids: empty), for the diagnosis.
    pub fn as_slice(&self) -> &[String] {
        &self.names
    }

    /// Ids handed out so far and not given back (the slots `mark` covers).
    pub fn slots(&self) -> usize {
        self.names.len()
    }

    /// Names held now (released ones not counted).
    pub fn live(&self) -> usize {
        self.names.len() - self.free.len()
    }

    /// The id of `name`, interning it (a released id is reused first).
    /// Past 2³² names held at once every further name would get id
    /// `u32::MAX`; the names held are bounded far below that (the per-name
    /// totals' cap plus a chunk of messages).
    pub fn intern(&mut self, name: &str) -> u32 {
        let h = (self.hash)(name);
        if let Some(&id) = self.by_hash.get(&h) {
            if self.names.get(id as usize).is_some_and(|n| n == name) {
                return id;
            }
            if let Some(&id) = self.collided.get(name) {
                return id;
            }
            let id = self.new_id(name);
            self.collided.insert(name.to_owned(), id);
            return id;
        }
        let id = self.new_id(name);
        self.by_hash.insert(h, id);
        id
    }

    fn new_id(&mut self, name: &str) -> u32 {
        if let Some(id) = self.free.pop() {
            if let (Some(slot), Some(r)) = (
                self.names.get_mut(id as usize),
                self.released.get_mut(id as usize),
            ) {
                name.clone_into(slot);
                *r = false;
                return id;
            }
        }
        let id = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.push(name.to_owned());
        self.released.push(false);
        id
    }

    /// Release every live id whose `live` flag is false (`live` is indexed
    /// by id, [`NameTable::slots`] long; ids past its end are kept).
    pub fn release_unmarked(&mut self, live: &[bool]) {
        for (id, (name, released)) in self.names.iter_mut().zip(&mut self.released).enumerate() {
            if *released || live.get(id).is_none_or(|&l| l) {
                continue;
            }
            let Ok(id32) = u32::try_from(id) else { break };
            let h = (self.hash)(name);
            if self.by_hash.get(&h) == Some(&id32) {
                self.by_hash.remove(&h);
            } else {
                self.collided.remove(name.as_str());
            }
            // Emptied, its buffer kept for the name that reuses the id.
            name.clear();
            *released = true;
            self.free.push(id32);
        }
        // A collided name whose hash is free again stays where it is: it is
        // still found (the hash lookup misses, the collided map answers).
        if !self.collided.is_empty() {
            let (by_hash, hash) = (&mut self.by_hash, self.hash);
            self.collided.retain(|n, id| match by_hash.entry(hash(n)) {
                std::collections::hash_map::Entry::Occupied(_) => true,
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(*id);
                    false
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_interned_once_and_released_ids_are_reused() {
        let mut t = NameTable::default();
        let a = t.intern("a.example");
        let b = t.intern("b.example");
        assert_eq!(t.intern("a.example"), a);
        assert_ne!(a, b);
        assert_eq!(t.live(), 2);
        // Only b is still named.
        let mut live = vec![false; t.slots()];
        live[b as usize] = true;
        t.release_unmarked(&live);
        assert_eq!(t.live(), 1);
        assert_eq!(t.as_slice()[a as usize], "");
        assert_eq!(t.intern("b.example"), b);
        // a's id goes to the next new name; a itself is new again.
        let c = t.intern("c.example");
        assert_eq!(c, a);
        assert_eq!(t.as_slice()[c as usize], "c.example");
        let a2 = t.intern("a.example");
        assert_eq!(t.as_slice()[a2 as usize], "a.example");
        assert_eq!(t.slots(), 3);
        // The empty name (never produced by the decoder, which prints the
        // root as ".") is a name like any other.
        let e = t.intern("");
        assert_eq!(t.intern(""), e);
    }

    #[test]
    fn a_flood_of_new_names_holds_only_the_names_in_use() {
        let mut t = NameTable::default();
        for round in 0..10u32 {
            for i in 0..1000u32 {
                t.intern(&format!("{}.water.example", round * 1000 + i));
            }
            // Nothing names this round's names once it is over.
            let live = vec![false; t.slots()];
            t.release_unmarked(&live);
            assert_eq!(t.live(), 0);
        }
        assert_eq!(t.slots(), 1000, "ids are reused");
    }

    #[test]
    fn colliding_names_are_told_apart() {
        // Every name has the same hash.
        let mut t = NameTable {
            hash: |_| 7,
            ..NameTable::default()
        };
        let x = t.intern("x.example");
        let y = t.intern("y.example");
        let z = t.intern("z.example");
        assert_eq!((t.by_hash.len(), t.collided.len()), (1, 2));
        assert_eq!(
            [
                t.intern("x.example"),
                t.intern("y.example"),
                t.intern("z.example")
            ],
            [x, y, z]
        );
        // x released: one of the others takes the hash index, both still found.
        let mut live = vec![true; t.slots()];
        live[x as usize] = false;
        t.release_unmarked(&live);
        assert_eq!((t.by_hash.len(), t.collided.len()), (1, 1));
        assert_eq!([t.intern("y.example"), t.intern("z.example")], [y, z]);
        // A collided one released: the other stays where it is.
        let mut live = vec![true; t.slots()];
        live[z as usize] = false;
        t.release_unmarked(&live);
        assert_eq!(t.intern("y.example"), y);
        assert_eq!(t.live(), 1);
        // x is new again and gets a released id.
        let x2 = t.intern("x.example");
        assert!(x2 == x || x2 == z);
        assert_eq!(t.intern("x.example"), x2);
    }
}
