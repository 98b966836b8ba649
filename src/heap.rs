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
//! - A dense slot table holds each entry's key and payload and the position
//!   of its node, so a move costs one store into the slot table and no
//!   hashing. Removal moves the last slot into the hole (re-pointing its
//!   node and its index bucket), so the table never has holes and every
//!   vector shrinks in place (`shrink_to`) after mass removal, with no
//!   compaction pass. (A free list of slots was measured: 5-15% cheaper per
//!   removal at 1M entries, but its compaction, run inside a removal under
//!   the owner's lock, stalled a pool for milliseconds.)
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

/// Tables at most this long are never shrunk.
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

/// Key, payload and heap position of one entry.
#[derive(Debug)]
struct Slot<K, V> {
    /// The entry's key (also hashed by the index).
    key: K,
    /// The caller's payload.
    value: V,
    /// Position of this entry's node in the heap array.
    pos: u32,
}

impl<K, V> Slot<K, V> {
    #[inline]
    fn key(&self) -> &K {
        &self.key
    }
}

/// Buffers the heap gave up when it shrank, freed when this is dropped.
///
/// Freeing a large buffer can stall the freeing thread for milliseconds on
/// a virtual machine (the kernel must flush the other CPUs' address
/// translations), so an owner that holds a lock around the heap takes them
/// with [`IndexedHeap::take_retired`] and drops them after unlocking. If
/// the owner never takes them, the heap frees them itself at its next
/// shrink.
pub struct Retired<K, V> {
    /// An emptied heap array.
    nodes: Vec<Node>,
    /// An emptied slot table.
    slots: Vec<Slot<K, V>>,
    /// An emptied index table.
    index: Vec<u64>,
}

impl<K, V> Retired<K, V> {
    fn none() -> Self {
        Retired {
            nodes: Vec::new(),
            slots: Vec::new(),
            index: Vec::new(),
        }
    }

    /// True when it holds no buffer.
    pub fn is_empty(&self) -> bool {
        self.nodes.capacity() == 0 && self.slots.capacity() == 0 && self.index.capacity() == 0
    }
}

impl<K, V> fmt::Debug for Retired<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retired")
            .field("nodes", &self.nodes.capacity())
            .field("slots", &self.slots.capacity())
            .field("index", &self.index.capacity())
            .finish()
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
    /// Dense slot table; `slots[nodes[p].slot].pos == p` for every `p`.
    slots: Vec<Slot<K, V>>,
    /// Buffers given up by the last shrink, not yet taken by the owner.
    retired: Retired<K, V>,
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
            retired: Retired::none(),
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
            s.key = key;
            let old = std::mem::replace(&mut s.value, value);
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

    /// Append an entry's slot and return its number.
    fn alloc_slot(&mut self, key: K, value: V, pos: u32) -> u32 {
        self.slots.push(Slot { key, value, pos });
        (self.slots.len() - 1) as u32
    }

    /// The stamp the next insert or replace will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Issue a stamp without inserting anything: for an entry that is
    /// claimed as it arrives and never enters the heap, so that no later
    /// entry gets the same stamp.
    pub fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
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
        let doomed: Vec<u32> = (0..self.slots.len() as u32)
            .filter(|&s| pred(&self.slots[s as usize].value))
            .collect();
        // Remove from the highest slot down: a removal only moves the last
        // slot, which is never one still to be removed.
        let mut out = Vec::with_capacity(doomed.len());
        for &slot in doomed.iter().rev() {
            let hash = self.hasher.hash_one(self.slots[slot as usize].key());
            self.unindex(hash, slot);
            out.push(self.take(slot));
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

    /// The buffers given up by shrinking since the last call, to drop
    /// outside the owner's lock; see [`Retired`].
    pub fn take_retired(&mut self) -> Retired<K, V> {
        std::mem::replace(&mut self.retired, Retired::none())
    }

    /// Bytes held by the three tables and not yet taken retired buffers
    /// (capacity, not length), for memory accounting.
    pub fn allocated_bytes(&self) -> usize {
        use std::mem::size_of;
        self.nodes.capacity() * size_of::<Node>()
            + self.slots.capacity() * size_of::<Slot<K, V>>()
            + self.index.allocated_bytes()
            + self.retired.nodes.capacity() * size_of::<Node>()
            + self.retired.slots.capacity() * size_of::<Slot<K, V>>()
            + self.retired.index.capacity() * size_of::<u64>()
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
            match self.find(self.hasher.hash_one(slot.key()), slot.key()) {
                Some(s) if s == node.slot => {}
                other => return Err(format!("index maps slot {}'s key to {other:?}", node.slot)),
            }
        }
        self.index.check(|h, s| match self.slots.get(s as usize) {
            Some(slot) if SlotIndex::short(self.hasher.hash_one(slot.key())) == h => Ok(()),
            Some(_) => Err(format!("index holds slot {s} under a wrong hash")),
            None => Err(format!("index holds missing slot {s}")),
        })
    }

    /// Remove `slot` from the index, given its key's hash.
    fn unindex(&mut self, hash: u64, slot: u32) {
        self.index.remove(hash, |s| s == slot);
    }

    /// Take slot `slot` (already out of the index) out of the heap and the
    /// slot table.
    fn take(&mut self, slot: u32) -> Entry<K, V> {
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
            // The former last slot now lives at `slot`: repoint its node and
            // its index bucket (found by its hash and old number).
            let from = self.slots.len() as u32;
            self.nodes[moved.pos as usize].slot = slot;
            let hash = self.hasher.hash_one(moved.key());
            self.index.repoint(hash, from, slot);
        }
        self.maybe_shrink();
        Entry {
            key: taken.key,
            due: node.due,
            seq: node.seq,
            value: taken.value,
        }
    }

    /// Give memory back once the heap has fallen to a quarter of its
    /// capacity: the entries move to smaller vectors (no entry is renumbered)
    /// and the old ones are retired, to be freed outside the owner's lock.
    fn maybe_shrink(&mut self) {
        let len = self.nodes.len();
        let cap = self.slots.capacity();
        let mut shrunk = Retired::none();
        if cap > FLOOR && len < cap / 4 {
            let target = (len * 2).max(FLOOR);
            let mut nodes = Vec::with_capacity(target);
            nodes.extend_from_slice(&self.nodes);
            shrunk.nodes = std::mem::replace(&mut self.nodes, nodes);
            shrunk.nodes.clear();
            let mut slots = Vec::with_capacity(target);
            slots.append(&mut self.slots);
            shrunk.slots = std::mem::replace(&mut self.slots, slots);
        }
        if let Some(index) = self.index.shrink_if_sparse() {
            shrunk.index = index;
        }
        if !shrunk.is_empty() {
            // Keeps at most one generation: an owner that does not take
            // them frees the previous ones here.
            self.retired = shrunk;
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
    fn shrinking_retires_the_old_buffers_to_the_owner() {
        let mut h = IndexedHeap::new();
        for k in 0..10_000u64 {
            h.insert(k, k as i64, ());
        }
        assert!(h.take_retired().is_empty());
        for k in 0..9_990u64 {
            h.remove(&k).unwrap();
        }
        h.check_invariants().unwrap();
        let retired = h.take_retired();
        assert!(!retired.is_empty(), "{retired:?}");
        assert!(h.take_retired().is_empty());
        assert_eq!(h.len(), 10);
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
    fn removals_keep_the_slot_table_dense_and_ordered() {
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
