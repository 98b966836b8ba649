//! Indexed 4-ary min-heap: one entry per key, ordered by `(due, seq)`, with a
//! key → slot index that every move keeps true.
//!
//! # Layout
//!
//! Three tables, each touched as little as an operation allows (the churn
//! profile in `docs/benchmarks.md` counts the cache misses):
//!
//! - The heap array holds small copyable `Node`s (`due`, `seq`, slot
//!   number), so sifting moves 24-byte values and never touches keys or
//!   payloads.
//! - A slot table holds each entry's key and payload and the position of
//!   its node, so a move costs one store into the slot table and
//!   no hashing. A removed entry's slot goes on a free list instead of moving
//!   the last slot into the hole (which would cost a re-hash and two more
//!   random accesses); when the table falls to an eighth full it is
//!   compacted, so memory falls back after mass removal.
//! - The index (`index.rs`) is an open-addressing table of 8-byte buckets,
//!   each a slot number beside 32 bits of its key's hash: a lookup costs one
//!   cache miss in the index and one in the slot table (where the key is
//!   compared), and growing the index never touches a key. The default hasher is foldhash with a per-process random seed: several
//!   times cheaper than SipHash on integer keys, and keys an attacker chooses
//!   cannot be aimed at a seed they do not know. Callers who need
//!   cryptographic DoS resistance pass `std`'s `RandomState` to
//!   [`IndexedHeap::with_hasher`].
//!
//! Moves are eager. A lazy variant (a later move leaves the node's old key
//! as a lower bound, settled when it reaches the root) was measured and
//! dropped: when many deadlines move later, the lower bounds surface one by
//! one and each settles with a sift from the root, which cost more than the
//! short eager sift from the node's own position (most nodes of a 4-ary
//! heap are leaves or next to them).
//!
//! `seq` is a per-heap counter stamped on every insert and replace, so entries
//! with equal due times pop in first-in, first-out order.
//!
//! This module has no synchronisation at all; [`crate::Scheduler`] and the pool
//! wrap it in their own lock.

mod index;

use index::SlotIndex;
use std::fmt;
use std::hash::{BuildHasher, Hash};

/// The default hasher of the index: foldhash, seeded per process and per
/// heap from a random source.
pub type DefaultState = foldhash::fast::RandomState;

/// Children per heap node. Four halves the depth of a binary heap and keeps a
/// node's children in one or two cache lines.
const ARITY: usize = 4;

/// The most entries a heap can hold: positions are stored as `u32`.
pub const MAX_LEN: usize = u32::MAX as usize;

/// End of the free list.
const NONE: u32 = u32::MAX;

/// Slot tables at most this long are never compacted.
const FLOOR: usize = 1024;

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

/// Key, payload and heap position of one entry; or a free slot.
#[derive(Debug)]
struct Slot<K, V> {
    /// The entry's key and payload; `None` while the slot is free.
    entry: Option<(K, V)>,
    /// Position of this entry's node in the heap array; for a free slot, the
    /// next free slot.
    pos: u32,
}

impl<K, V> Slot<K, V> {
    #[inline]
    fn key(&self) -> &K {
        &self.entry.as_ref().expect("an indexed slot is live").0
    }
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
pub struct IndexedHeap<K, V, S = DefaultState> {
    /// The heap array, in heap order.
    nodes: Vec<Node>,
    /// Slot table; `slots[nodes[p].slot].pos == p` for every `p`.
    slots: Vec<Slot<K, V>>,
    /// First free slot, or [`NONE`].
    free: u32,
    /// Key hash → slot number.
    index: SlotIndex,
    /// Hashes keys for the index.
    hasher: S,
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
            .map(|n| (n.due, self.slots[n.slot as usize].key()))
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
    /// An empty heap with the default hasher (foldhash, randomly seeded).
    pub fn new() -> Self {
        Self::with_hasher(DefaultState::default())
    }
}

impl<K: Hash + Eq + Clone, V, S: BuildHasher> IndexedHeap<K, V, S> {
    /// An empty heap whose index uses `hasher`.
    pub fn with_hasher(hasher: S) -> Self {
        IndexedHeap {
            nodes: Vec::new(),
            slots: Vec::new(),
            free: NONE,
            index: SlotIndex::default(),
            hasher,
            next_seq: 0,
        }
    }

    /// The slot of `key`, if present.
    #[inline]
    fn find(&self, hash: u64, key: &K) -> Option<u32> {
        let slots = &self.slots;
        self.index.find(hash, |s| slots[s as usize].key() == key)
    }

    /// True when `key` has an entry.
    pub fn contains_key(&self, key: &K) -> bool {
        self.find(self.hasher.hash_one(key), key).is_some()
    }

    /// Due time and stamp of `key`'s entry.
    pub fn get(&self, key: &K) -> Option<(i64, u64)> {
        let slot = &self.slots[self.find(self.hasher.hash_one(key), key)? as usize];
        let node = self.nodes[slot.pos as usize];
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
    /// Replacing a present key always succeeds.
    pub fn try_insert(
        &mut self,
        key: K,
        due: i64,
        value: V,
        limit: usize,
    ) -> Result<Inserted<V>, (K, V)> {
        let hash = self.hasher.hash_one(&key);
        let seq = self.next_seq;
        if let Some(slot) = self.find(hash, &key) {
            self.next_seq += 1;
            let s = &mut self.slots[slot as usize];
            let (_, old) = std::mem::replace(
                s.entry.as_mut().expect("an indexed slot is live"),
                (key, value),
            );
            let pos = s.pos as usize;
            let before = self.nodes[pos];
            let (old_due, old_seq) = (before.due, before.seq);
            self.nodes[pos].due = due;
            self.nodes[pos].seq = seq;
            if self.nodes[pos].before(&before) {
                self.sift_up(pos);
            } else {
                self.sift_down(pos);
            }
            return Ok(Inserted::Replaced {
                seq,
                old_due,
                old_seq,
                old,
            });
        }
        if self.nodes.len() >= limit.min(MAX_LEN) {
            return Err((key, value));
        }
        self.next_seq += 1;
        let pos = self.nodes.len();
        let slot = self.alloc_slot(key, value, pos as u32);
        self.index.insert(hash, slot);
        self.nodes.push(Node { due, seq, slot });
        self.sift_up(pos);
        Ok(Inserted::New { seq })
    }

    /// Put an entry into a free slot (or a new one) and return its number.
    fn alloc_slot(&mut self, key: K, value: V, pos: u32) -> u32 {
        let filled = Slot {
            entry: Some((key, value)),
            pos,
        };
        if self.free != NONE {
            let slot = self.free;
            let s = &mut self.slots[slot as usize];
            self.free = s.pos;
            *s = filled;
            slot
        } else {
            self.slots.push(filled);
            (self.slots.len() - 1) as u32
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
        let hash = self.hasher.hash_one(&entry.key);
        if entry.seq >= self.next_seq || self.find(hash, &entry.key).is_some() {
            return Err(entry);
        }
        let pos = self.nodes.len();
        let slot = self.alloc_slot(entry.key, entry.value, pos as u32);
        self.index.insert(hash, slot);
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
        let hash = self.hasher.hash_one(key);
        let slots = &self.slots;
        let slot = self
            .index
            .remove(hash, |s| slots[s as usize].key() == key)?;
        Some(self.take(slot))
    }

    /// Remove `key`'s entry only if its stamp is `seq` (so a handle to a
    /// replaced entry cannot remove its replacement).
    pub fn remove_seq(&mut self, key: &K, seq: u64) -> Option<Entry<K, V>> {
        let hash = self.hasher.hash_one(key);
        let slot = self.find(hash, key)?;
        if self.nodes[self.slots[slot as usize].pos as usize].seq != seq {
            return None;
        }
        self.unindex(hash, slot);
        Some(self.take(slot))
    }

    /// Remove and return the earliest entry.
    pub fn pop(&mut self) -> Option<Entry<K, V>> {
        let slot = self.nodes.first()?.slot;
        let hash = self.hasher.hash_one(self.slots[slot as usize].key());
        self.unindex(hash, slot);
        Some(self.take(slot))
    }

    /// Remove and return the earliest entry if its due time is `<= now`.
    pub fn pop_due(&mut self, now: i64) -> Option<Entry<K, V>> {
        match self.nodes.first() {
            Some(n) if n.due <= now => self.pop(),
            _ => None,
        }
    }

    /// Remove every entry whose payload satisfies `pred`, in no particular
    /// order. O(n + m log n) for m removals.
    pub fn remove_where(&mut self, mut pred: impl FnMut(&V) -> bool) -> Vec<Entry<K, V>> {
        // Collect keys first: a removal may compact the slot table and
        // renumber slots.
        let doomed: Vec<K> = self
            .slots
            .iter()
            .filter_map(|s| s.entry.as_ref())
            .filter(|(_, v)| pred(v))
            .map(|(k, _)| k.clone())
            .collect();
        doomed.iter().filter_map(|k| self.remove(k)).collect()
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
    /// accounting.
    pub fn allocated_bytes(&self) -> usize {
        use std::mem::size_of;
        self.nodes.capacity() * size_of::<Node>()
            + self.slots.capacity() * size_of::<Slot<K, V>>()
            + self.index.allocated_bytes()
    }

    /// Check heap order, index agreement, the free list and lengths.
    ///
    /// # Errors
    ///
    /// A description of the first broken invariant.
    pub fn check_invariants(&self) -> Result<(), String> {
        let n = self.nodes.len();
        if self.index.len() != n {
            return Err(format!(
                "length mismatch: {} nodes, {} index entries",
                n,
                self.index.len()
            ));
        }
        let live = self.slots.iter().filter(|s| s.entry.is_some()).count();
        if live != n {
            return Err(format!("{live} live slots for {n} nodes"));
        }
        let mut free = 0;
        let mut f = self.free;
        while f != NONE {
            let s = self
                .slots
                .get(f as usize)
                .ok_or_else(|| format!("free list points past the table at {f}"))?;
            if s.entry.is_some() {
                return Err(format!("free list holds live slot {f}"));
            }
            free += 1;
            if free > self.slots.len() {
                return Err("free list has a cycle".to_string());
            }
            f = s.pos;
        }
        if free + live != self.slots.len() {
            return Err(format!(
                "{free} free + {live} live slots, table has {}",
                self.slots.len()
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
            if slot.entry.is_none() {
                return Err(format!("node {pos} points at free slot {}", node.slot));
            }
            if slot.pos as usize != pos {
                return Err(format!(
                    "slot {} says position {}, node is at {pos}",
                    node.slot, slot.pos
                ));
            }
            if node.seq >= self.next_seq {
                return Err(format!("stamp {} not below next_seq", node.seq));
            }
            match self.find(self.hasher.hash_one(slot.key()), slot.key()) {
                Some(s) if s == node.slot => {}
                other => return Err(format!("index maps slot {}'s key to {other:?}", node.slot)),
            }
        }
        self.index.check(|h, s| match self.slots.get(s as usize) {
            Some(slot) if slot.entry.is_some() => {
                if SlotIndex::short(self.hasher.hash_one(slot.key())) == h {
                    Ok(())
                } else {
                    Err(format!("index holds slot {s} under a wrong hash"))
                }
            }
            _ => Err(format!("index holds free or missing slot {s}")),
        })
    }

    /// Remove `slot` from the index, given its key's hash.
    fn unindex(&mut self, hash: u64, slot: u32) {
        self.index.remove(hash, |s| s == slot);
    }

    /// Take slot `slot` (already out of the index) out of the heap and the
    /// slot table.
    fn take(&mut self, slot: u32) -> Entry<K, V> {
        let s = &mut self.slots[slot as usize];
        let (key, value) = s.entry.take().expect("a taken slot is live");
        let pos = std::mem::replace(&mut s.pos, self.free) as usize;
        self.free = slot;
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
        self.maybe_shrink();
        Entry {
            key,
            due: node.due,
            seq: node.seq,
            value,
        }
    }

    /// Give memory back once the heap has fallen to an eighth of its slot
    /// table: move the live slots to the front, renumber the index, shrink.
    fn maybe_shrink(&mut self) {
        let len = self.nodes.len();
        let cap = self.slots.capacity();
        if cap <= FLOOR || len >= cap / 8 {
            return;
        }
        let target = (len * 2).max(FLOOR);
        // One pass in slot order (sequential reads; the node writes land in
        // the now small heap array), then renumber the index in place: its
        // buckets keep their hashes, so no key is hashed again. This runs
        // under the owner's lock, so it must stay short: a rebuild of the
        // index by re-inserting keys took milliseconds at 32k entries.
        let mut renumber = vec![NONE; self.slots.len()];
        let mut slots: Vec<Slot<K, V>> = Vec::with_capacity(target);
        for (old, s) in self.slots.iter_mut().enumerate() {
            if s.entry.is_none() {
                continue;
            }
            if let Some(entry) = s.entry.take() {
                let new = slots.len() as u32;
                renumber[old] = new;
                self.nodes[s.pos as usize].slot = new;
                slots.push(Slot {
                    entry: Some(entry),
                    pos: s.pos,
                });
            }
        }
        self.slots = slots;
        self.free = NONE;
        self.index.renumber(|old| renumber[old as usize]);
        self.nodes.shrink_to(target);
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

    #[test]
    fn moving_every_key_later_keeps_pop_order() {
        let mut h = IndexedHeap::new();
        for k in 0..1000u64 {
            h.insert(k, (k * 7919 % 1000) as i64, k);
        }
        // Move every key later, in an order unrelated to the heap's.
        for k in 0..1000u64 {
            h.insert((k * 13) % 1000, 5000 + (k * 31 % 1000) as i64, k);
            h.check_invariants().unwrap();
        }
        let mut last = (i64::MIN, 0);
        while let Some(e) = h.pop() {
            assert!((e.due, e.seq) > last, "{:?} after {last:?}", (e.due, e.seq));
            last = (e.due, e.seq);
            h.check_invariants().unwrap();
        }
    }

    #[test]
    fn a_later_move_with_a_tied_child_stays_ordered() {
        let mut h = IndexedHeap::new();
        h.insert("root", 1, ());
        for k in ["a", "b", "c"] {
            h.insert(k, 5, ());
        }
        h.insert("d", 5, ());
        // "a" shares due 5 with its siblings, not its children; move the
        // root later than its tied children.
        h.insert("root", 5, ());
        h.check_invariants().unwrap();
        let order: Vec<_> = std::iter::from_fn(|| h.pop().map(|e| e.key)).collect();
        assert_eq!(order, vec!["a", "b", "c", "d", "root"]);
    }

    #[test]
    fn freed_slots_are_reused_and_compacted() {
        let mut h = IndexedHeap::new();
        for k in 0..10_000u64 {
            h.insert(k, k as i64, ());
        }
        for k in (0..10_000u64).step_by(2) {
            h.remove(&k).unwrap();
        }
        for k in 10_000..15_000u64 {
            h.insert(k, k as i64, ());
        }
        h.check_invariants().unwrap();
        for k in (1..10_000u64).step_by(2) {
            h.remove(&k).unwrap();
            if k % 1001 == 0 {
                h.check_invariants().unwrap();
            }
        }
        h.check_invariants().unwrap();
        assert_eq!(h.len(), 5000);
        assert_eq!(h.pop().map(|e| e.key), Some(10_000));
    }
}
