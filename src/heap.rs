//! Indexed 4-ary min-heap: one entry per key, ordered by `(due, seq)`, with a
//! key → slot index that every move keeps true.
//!
//! # Layout
//!
//! The heap array holds small copyable [`Node`]s (`due`, `seq`, slot number),
//! so sifting moves 24-byte values and never touches keys or payloads. Keys and
//! payloads live in a dense slot table; each slot records where its node sits in
//! the heap, so a move costs one store into the slot table and no hashing. The
//! hash index maps a key to its slot. Removal swaps the last slot into the hole,
//! so the table stays dense and every vector can shrink after mass removal: the
//! structure never holds a stale entry.
//!
//! `seq` is a per-heap counter stamped on every insert and replace, so entries
//! with equal due times pop in first-in, first-out order.
//!
//! This module has no synchronisation at all; [`crate::Scheduler`] and the pool
//! wrap it in their own lock.

use std::collections::hash_map::{Entry as MapEntry, RandomState};
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, Hash};

/// Children per heap node. Four halves the depth of a binary heap and keeps a
/// node's children in one or two cache lines.
const ARITY: usize = 4;

/// The most entries a heap can hold: positions are stored as `u32`.
pub const MAX_LEN: usize = u32::MAX as usize;

/// One heap-array element: the ordering key and where the payload lives.
#[derive(Clone, Copy, Debug)]
struct Node {
    /// Due time of the entry.
    due: i64,
    /// Insertion stamp, the tie-breaker for equal due times.
    seq: u64,
    /// Index of the entry's slot in `slots`.
    slot: u32,
}

impl Node {
    /// Strict heap order: earlier due first, then earlier stamp.
    #[inline]
    fn before(&self, other: &Node) -> bool {
        (self.due, self.seq) < (other.due, other.seq)
    }
}

/// Key, payload and heap position of one entry.
#[derive(Debug)]
struct Slot<K, V> {
    /// The entry's key (also held by the index).
    key: K,
    /// The caller's payload.
    value: V,
    /// Position of this entry's node in the heap array.
    pos: u32,
}

/// An entry taken out of the heap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<K, V> {
    /// The entry's key.
    pub key: K,
    /// Its due time.
    pub due: i64,
    /// Its insertion stamp (increasing per heap; equal due times pop in stamp order).
    pub seq: u64,
    /// The payload.
    pub value: V,
}

/// What [`IndexedHeap::insert`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inserted<V> {
    /// The key was new; the entry got this stamp.
    New {
        /// Stamp of the new entry.
        seq: u64,
    },
    /// The key was present; its due time and payload were replaced in one step.
    Replaced {
        /// Stamp of the new entry.
        seq: u64,
        /// Due time of the replaced entry.
        old_due: i64,
        /// Stamp of the replaced entry.
        old_seq: u64,
        /// Payload of the replaced entry.
        old: V,
    },
}

/// An indexed min-heap keyed by `K`, ordered by due time then insertion stamp.
///
/// Insert, replace and remove-by-key are O(log n); [`peek`](Self::peek) is O(1).
///
/// # Examples
///
/// ```
/// use timerpool::heap::IndexedHeap;
///
/// let mut heap = IndexedHeap::new();
/// heap.insert("a", 10, 'a');
/// heap.insert("b", 5, 'b');
/// heap.insert("a", 3, 'A'); // replaces "a"
/// assert_eq!(heap.len(), 2);
/// assert_eq!(heap.peek(), Some((3, &"a")));
/// assert_eq!(heap.pop_due(4).map(|e| e.value), Some('A'));
/// assert_eq!(heap.pop_due(4), None);
/// heap.check_invariants().unwrap();
/// ```
pub struct IndexedHeap<K, V, S = RandomState> {
    /// The heap array, in heap order.
    nodes: Vec<Node>,
    /// Dense table of entries; `slots[nodes[p].slot].pos == p` for every `p`.
    slots: Vec<Slot<K, V>>,
    /// Key → slot number.
    index: HashMap<K, u32, S>,
    /// Next insertion stamp.
    next_seq: u64,
}

impl<K, V, S> fmt::Debug for IndexedHeap<K, V, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IndexedHeap")
            .field("len", &self.nodes.len())
            .field("next_seq", &self.next_seq)
            .finish_non_exhaustive()
    }
}

impl<K, V, S> IndexedHeap<K, V, S> {
    /// Number of entries.
    #[inline]
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when the heap holds no entry.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The earliest entry's due time and key, in O(1).
    #[inline]
    pub fn peek(&self) -> Option<(i64, &K)> {
        self.nodes
            .first()
            .map(|n| (n.due, &self.slots[n.slot as usize].key))
    }

    /// The earliest due time, in O(1).
    #[inline]
    pub fn peek_due(&self) -> Option<i64> {
        self.nodes.first().map(|n| n.due)
    }
}

impl<K: Hash + Eq + Clone, V> Default for IndexedHeap<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Hash + Eq + Clone, V> IndexedHeap<K, V> {
    /// An empty heap.
    pub fn new() -> Self {
        Self::with_hasher(RandomState::new())
    }
}

impl<K: Hash + Eq + Clone, V, S: BuildHasher> IndexedHeap<K, V, S> {
    /// An empty heap whose index uses `hasher`.
    pub fn with_hasher(hasher: S) -> Self {
        IndexedHeap {
            nodes: Vec::new(),
            slots: Vec::new(),
            index: HashMap::with_hasher(hasher),
            next_seq: 0,
        }
    }

    /// True when `key` has an entry.
    pub fn contains_key(&self, key: &K) -> bool {
        self.index.contains_key(key)
    }

    /// Due time and stamp of `key`'s entry.
    pub fn get(&self, key: &K) -> Option<(i64, u64)> {
        let slot = *self.index.get(key)?;
        let node = self.nodes[self.slots[slot as usize].pos as usize];
        Some((node.due, node.seq))
    }

    /// Insert `key`, or replace its due time and payload if present.
    ///
    /// # Panics
    ///
    /// Panics if the heap already holds [`MAX_LEN`] entries and `key` is new;
    /// use [`try_insert`](Self::try_insert) to bound the size instead.
    pub fn insert(&mut self, key: K, due: i64, value: V) -> Inserted<V> {
        match self.try_insert(key, due, value, MAX_LEN) {
            Ok(done) => done,
            Err(_) => panic!("IndexedHeap is full ({MAX_LEN} entries)"),
        }
    }

    /// Like [`insert`](Self::insert), but a new key is refused (and given
    /// back with its payload) when the heap already holds `limit` entries.
    /// Replacing a present key always succeeds. One hash lookup either way.
    pub fn try_insert(
        &mut self,
        key: K,
        due: i64,
        value: V,
        limit: usize,
    ) -> Result<Inserted<V>, (K, V)> {
        let seq = self.next_seq;
        match self.index.entry(key) {
            MapEntry::Occupied(occupied) => {
                self.next_seq += 1;
                let slot = *occupied.get() as usize;
                let old = std::mem::replace(&mut self.slots[slot].value, value);
                let pos = self.slots[slot].pos as usize;
                let before = self.nodes[pos];
                self.nodes[pos].due = due;
                self.nodes[pos].seq = seq;
                if self.nodes[pos].before(&before) {
                    self.sift_up(pos);
                } else {
                    self.sift_down(pos);
                }
                Ok(Inserted::Replaced {
                    seq,
                    old_due: before.due,
                    old_seq: before.seq,
                    old,
                })
            }
            MapEntry::Vacant(vacant) => {
                if self.nodes.len() >= limit.min(MAX_LEN) {
                    let key = vacant.into_key();
                    return Err((key, value));
                }
                self.next_seq += 1;
                let slot = self.slots.len() as u32;
                let pos = self.nodes.len();
                self.slots.push(Slot {
                    key: vacant.key().clone(),
                    value,
                    pos: pos as u32,
                });
                vacant.insert(slot);
                self.nodes.push(Node { due, seq, slot });
                self.sift_up(pos);
                Ok(Inserted::New { seq })
            }
        }
    }

    /// The stamp the next insert or replace will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Put back an entry taken out earlier, keeping its stamp (so its place
    /// among equal due times, and handles that name it by stamp, stay valid).
    /// Returns the entry if `key` is present now, or `seq` was never issued.
    pub fn restore(&mut self, entry: Entry<K, V>) -> Result<(), Entry<K, V>> {
        if entry.seq >= self.next_seq || self.index.contains_key(&entry.key) {
            return Err(entry);
        }
        let slot = self.slots.len() as u32;
        let pos = self.nodes.len();
        self.index.insert(entry.key.clone(), slot);
        self.slots.push(Slot {
            key: entry.key,
            value: entry.value,
            pos: pos as u32,
        });
        self.nodes.push(Node {
            due: entry.due,
            seq: entry.seq,
            slot,
        });
        self.sift_up(pos);
        Ok(())
    }

    /// Remove `key`'s entry.
    pub fn remove(&mut self, key: &K) -> Option<Entry<K, V>> {
        let slot = *self.index.get(key)?;
        Some(self.remove_slot(slot))
    }

    /// Remove `key`'s entry only if its stamp is `seq` (so a handle to a
    /// replaced entry cannot remove its replacement).
    pub fn remove_seq(&mut self, key: &K, seq: u64) -> Option<Entry<K, V>> {
        let slot = *self.index.get(key)?;
        let pos = self.slots[slot as usize].pos as usize;
        if self.nodes[pos].seq != seq {
            return None;
        }
        Some(self.remove_slot(slot))
    }

    /// Remove and return the earliest entry.
    pub fn pop(&mut self) -> Option<Entry<K, V>> {
        let slot = self.nodes.first()?.slot;
        Some(self.remove_slot(slot))
    }

    /// Remove and return the earliest entry if its due time is `<= now`.
    pub fn pop_due(&mut self, now: i64) -> Option<Entry<K, V>> {
        match self.nodes.first() {
            Some(n) if n.due <= now => {
                let slot = n.slot;
                Some(self.remove_slot(slot))
            }
            _ => None,
        }
    }

    /// Remove every entry whose payload satisfies `pred`, in no particular
    /// order. O(n log n) at worst.
    pub fn remove_where(&mut self, mut pred: impl FnMut(&V) -> bool) -> Vec<Entry<K, V>> {
        let doomed: Vec<u32> = (0..self.slots.len() as u32)
            .filter(|&s| pred(&self.slots[s as usize].value))
            .collect();
        // Remove from the highest slot down: a removal only moves the last
        // slot, which is never one still to be removed.
        let mut out = Vec::with_capacity(doomed.len());
        for &slot in doomed.iter().rev() {
            out.push(self.remove_slot(slot));
        }
        out
    }

    /// Remove every entry, in heap order.
    pub fn drain(&mut self) -> Vec<Entry<K, V>> {
        let mut out = Vec::with_capacity(self.len());
        while let Some(e) = self.pop() {
            out.push(e);
        }
        out
    }

    /// Bytes held by the three tables (capacity, not length), for memory
    /// accounting. The hash index is estimated from its capacity.
    pub fn allocated_bytes(&self) -> usize {
        use std::mem::size_of;
        self.nodes.capacity() * size_of::<Node>()
            + self.slots.capacity() * size_of::<Slot<K, V>>()
            + self.index.capacity() * (size_of::<(K, u32)>() + 1)
    }

    /// Check heap order, index agreement and lengths.
    ///
    /// # Errors
    ///
    /// A description of the first broken invariant.
    pub fn check_invariants(&self) -> Result<(), String> {
        let n = self.nodes.len();
        if self.slots.len() != n || self.index.len() != n {
            return Err(format!(
                "length mismatch: {} nodes, {} slots, {} index entries",
                n,
                self.slots.len(),
                self.index.len()
            ));
        }
        for (pos, node) in self.nodes.iter().enumerate() {
            if pos > 0 {
                let parent = &self.nodes[(pos - 1) / ARITY];
                if node.before(parent) {
                    return Err(format!("heap order broken at position {pos}"));
                }
            }
            let slot = self
                .slots
                .get(node.slot as usize)
                .ok_or_else(|| format!("node {pos} points past the slot table"))?;
            if slot.pos as usize != pos {
                return Err(format!(
                    "slot {} says position {}, node is at {pos}",
                    node.slot, slot.pos
                ));
            }
            if node.seq >= self.next_seq {
                return Err(format!("stamp {} not below next_seq", node.seq));
            }
        }
        for (i, slot) in self.slots.iter().enumerate() {
            match self.index.get(&slot.key) {
                Some(&s) if s as usize == i => {}
                other => return Err(format!("index maps slot {i}'s key to {other:?}")),
            }
        }
        Ok(())
    }

    /// Take slot `slot` out of all three tables.
    fn remove_slot(&mut self, slot: u32) -> Entry<K, V> {
        let pos = self.slots[slot as usize].pos as usize;
        let node = self.nodes[pos];
        let last = self.nodes.pop().expect("a slot implies a node");
        if pos < self.nodes.len() {
            self.nodes[pos] = last;
            self.slots[last.slot as usize].pos = pos as u32;
            if last.before(&node) {
                self.sift_up(pos);
            } else {
                self.sift_down(pos);
            }
        }
        let taken = self.slots.swap_remove(slot as usize);
        if let Some(moved) = self.slots.get(slot as usize) {
            // The former last slot now lives at `slot`: repoint its node and key.
            self.nodes[moved.pos as usize].slot = slot;
            *self
                .index
                .get_mut(&moved.key)
                .expect("every slot's key is indexed") = slot;
        }
        self.index.remove(&taken.key);
        self.maybe_shrink();
        Entry {
            key: taken.key,
            due: node.due,
            seq: node.seq,
            value: taken.value,
        }
    }

    /// Give memory back once the heap has fallen to a quarter of its capacity.
    fn maybe_shrink(&mut self) {
        const FLOOR: usize = 1024;
        let len = self.nodes.len();
        let cap = self.nodes.capacity();
        if cap > FLOOR && len < cap / 4 {
            let target = (len * 2).max(FLOOR);
            self.nodes.shrink_to(target);
            self.slots.shrink_to(target);
            self.index.shrink_to(target);
        }
    }

    fn sift_up(&mut self, mut pos: usize) {
        let node = self.nodes[pos];
        while pos > 0 {
            let parent = (pos - 1) / ARITY;
            let p = self.nodes[parent];
            if !node.before(&p) {
                break;
            }
            self.nodes[pos] = p;
            self.slots[p.slot as usize].pos = pos as u32;
            pos = parent;
        }
        self.nodes[pos] = node;
        self.slots[node.slot as usize].pos = pos as u32;
    }

    fn sift_down(&mut self, mut pos: usize) {
        let node = self.nodes[pos];
        let len = self.nodes.len();
        loop {
            let first = pos * ARITY + 1;
            if first >= len {
                break;
            }
            let end = (first + ARITY).min(len);
            let mut best = first;
            for c in first + 1..end {
                if self.nodes[c].before(&self.nodes[best]) {
                    best = c;
                }
            }
            let child = self.nodes[best];
            if !child.before(&node) {
                break;
            }
            self.nodes[pos] = child;
            self.slots[child.slot as usize].pos = pos as u32;
            pos = best;
        }
        self.nodes[pos] = node;
        self.slots[node.slot as usize].pos = pos as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_due_times_pop_in_insertion_order() {
        let mut h = IndexedHeap::new();
        for k in [5, 3, 9, 1] {
            h.insert(k, 7, ());
            h.check_invariants().unwrap();
        }
        let order: Vec<_> = std::iter::from_fn(|| h.pop().map(|e| e.key)).collect();
        assert_eq!(order, vec![5, 3, 9, 1]);
    }

    #[test]
    fn replace_moves_the_single_entry() {
        let mut h = IndexedHeap::new();
        h.insert("a", 10, 1);
        h.insert("b", 5, 2);
        let r = h.insert("a", 3, 3);
        assert!(matches!(
            r,
            Inserted::Replaced {
                old: 1,
                old_due: 10,
                ..
            }
        ));
        assert_eq!(h.len(), 2);
        assert_eq!(h.peek(), Some((3, &"a")));
        h.check_invariants().unwrap();
    }

    #[test]
    fn try_insert_refuses_new_key_at_limit_but_replaces() {
        let mut h = IndexedHeap::new();
        h.try_insert(1, 1, (), 1).unwrap();
        assert_eq!(h.try_insert(2, 1, (), 1), Err((2, ())));
        assert!(h.try_insert(1, 0, (), 1).is_ok());
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn remove_seq_ignores_a_replaced_stamp() {
        let mut h = IndexedHeap::new();
        let Inserted::New { seq } = h.insert(1, 1, 'x') else {
            panic!("new key")
        };
        h.insert(1, 2, 'y');
        assert_eq!(h.remove_seq(&1, seq), None);
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn memory_shrinks_after_mass_removal() {
        let mut h = IndexedHeap::new();
        for k in 0..100_000u64 {
            h.insert(k, (k * 7919 % 1000) as i64, k);
        }
        let peak = h.allocated_bytes();
        for k in 0..100_000u64 {
            h.remove(&k).unwrap();
        }
        h.check_invariants().unwrap();
        assert!(
            h.allocated_bytes() * 10 < peak,
            "{} vs {peak}",
            h.allocated_bytes()
        );
    }

    #[test]
    fn extreme_due_times_order_correctly() {
        let mut h = IndexedHeap::new();
        h.insert(1, i64::MAX, ());
        h.insert(2, i64::MIN, ());
        h.insert(3, 0, ());
        assert_eq!(h.pop_due(i64::MIN).map(|e| e.key), Some(2));
        assert_eq!(h.pop_due(0).map(|e| e.key), Some(3));
        assert_eq!(h.pop_due(i64::MAX - 1), None);
        assert_eq!(h.pop_due(i64::MAX).map(|e| e.key), Some(1));
    }
}
