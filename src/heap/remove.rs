//! Removals from the heap: by key, by stamp, the earliest, the due ones,
//! by a predicate, all of them; and the index and slot bookkeeping every
//! removal shares.

use super::{Entry, IndexedHeap, Meta, Node, Probe, Retired, Slot};
use hashbrown::Equivalent;
use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};

impl<K: Hash + Eq, V, S: BuildHasher> IndexedHeap<K, V, S> {
    /// Remove `key`'s entry; `key` as for
    /// [`contains_key`](Self::contains_key).
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::heap::IndexedHeap;
    /// let mut heap = IndexedHeap::new();
    /// heap.insert(String::from("a"), 10, 'a');
    /// assert_eq!(heap.remove("a").map(|e| (e.key, e.value)), Some(("a".to_string(), 'a')));
    /// assert!(heap.is_empty());
    /// ```
    pub fn remove<Q>(&mut self, key: &Q) -> Option<Entry<K, V>>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        let hash = self.hash_of(key);
        let slots = &self.slots;
        // Every key comparison happens before the index changes.
        let slot = self
            .index
            .remove(hash, |s| key.equivalent(slots[s as usize].key()))?;
        Some(self.take(slot))
    }

    /// Remove `key`'s entry only if its stamp is `seq` (so a handle to a
    /// replaced entry cannot remove its replacement).
    pub(crate) fn remove_seq<Q: ?Sized + Hash + Equivalent<K>>(
        &mut self,
        key: &Q,
        seq: u64,
    ) -> Option<Entry<K, V>> {
        let hash = self.hash_of(key);
        let slot = self.find(hash, key)?;
        if self.seq_of(&self.nodes[self.meta[slot as usize].pos as usize]) != seq {
            return None;
        }
        self.unindex(hash, slot);
        Some(self.take(slot))
    }

    /// The entry `probe` found, removed; runs no user code (the owner
    /// already ran it in the probe, so the key is not hashed or compared a
    /// second time).
    #[inline]
    pub(crate) fn remove_probed(&mut self, probe: Probe) -> Option<Entry<K, V>> {
        self.check_probe(&probe);
        let slot = probe.slot?;
        self.unindex(probe.hash, slot);
        Some(self.take(slot))
    }

    /// In debug builds, that the heap is unchanged since `probe` was taken.
    #[inline]
    pub(super) fn check_probe(&self, _probe: &Probe) {
        #[cfg(debug_assertions)]
        debug_assert_eq!(
            _probe.at,
            (self.len(), self.next_seq),
            "the heap changed since the probe"
        );
    }

    /// Remove and return the earliest entry. Runs no user code.
    pub fn pop(&mut self) -> Option<Entry<K, V>> {
        let slot = self.nodes.first()?.slot;
        self.unindex(self.meta[slot as usize].hash, slot);
        Some(self.take(slot))
    }

    /// Remove and return the earliest entry if its due time is `<= now`.
    /// Runs no user code.
    pub fn pop_due(&mut self, now: i64) -> Option<Entry<K, V>> {
        match self.nodes.first() {
            Some(n) if n.due <= now => self.pop(),
            _ => None,
        }
    }

    /// [`pop_due`](Self::pop_due), leaving a shrink it makes due to the
    /// caller: an owner that starts the task at once shrinks after the
    /// start, not inside it ([`maybe_shrink`](Self::maybe_shrink),
    /// `shrink.rs`). Runs no user code.
    pub(crate) fn pop_due_unshrunk(&mut self, now: i64) -> Option<Entry<K, V>> {
        let slot = self.nodes.first().filter(|n| n.due <= now)?.slot;
        self.unindex(self.meta[slot as usize].hash, slot);
        Some(self.take_unshrunk(slot))
    }

    /// Remove every entry whose payload satisfies `pred`, in no particular
    /// order. O(n + m log n) for m removals. `pred` sees every payload
    /// before anything is removed, so a panic in it removes nothing.
    pub(crate) fn remove_where(&mut self, mut pred: impl FnMut(&V) -> bool) -> Vec<Entry<K, V>> {
        let doomed: Vec<u32> = (0..self.slots.len() as u32)
            .filter(|&s| pred(&self.slots[s as usize].value))
            .collect();
        // Remove from the highest slot down: a removal only moves the last
        // slot, which is never one still to be removed.
        let mut out = Vec::with_capacity(doomed.len());
        for &slot in doomed.iter().rev() {
            self.unindex(self.meta[slot as usize].hash, slot);
            out.push(self.take(slot));
        }
        out
    }

    /// Remove every entry, in heap order. Runs no user code.
    pub fn drain(&mut self) -> Vec<Entry<K, V>> {
        let mut out = Vec::with_capacity(self.len());
        while let Some(e) = self.pop() {
            out.push(e);
        }
        out
    }

    /// The buffers given up by shrinking since the last call, to drop
    /// outside the owner's lock; see [`Retired`].
    pub(crate) fn take_retired(&mut self) -> Retired<K, V> {
        std::mem::replace(&mut self.retired, Retired::none())
    }

    /// Bytes held by the three tables and not yet taken retired buffers
    /// (capacity, not length), for memory accounting.
    pub fn allocated_bytes(&self) -> usize {
        use std::mem::size_of;
        self.nodes.capacity() * size_of::<Node>()
            + self.slots.capacity() * size_of::<Slot<K, V>>()
            + self.meta.capacity() * size_of::<Meta>()
            + self.index.allocated_bytes()
            + self.retired.0.as_ref().map_or(0, |b| b.bytes())
    }

    /// Remove `slot` from the index, given its stored hash.
    #[inline]
    pub(super) fn unindex(&mut self, hash: u32, slot: u32) {
        let removed = self.index.remove(hash, |s| s == slot);
        debug_assert_eq!(removed, Some(slot), "slot not indexed under its hash");
    }

    /// Take slot `slot` (already out of the index) out of the heap and the
    /// slot table, then shrink the tables if they became sparse. Runs no
    /// user code.
    #[inline]
    pub(super) fn take(&mut self, slot: u32) -> Entry<K, V> {
        let entry = self.take_unshrunk(slot);
        self.maybe_shrink();
        entry
    }

    /// [`take`](Self::take) without the shrink, which the caller leaves
    /// for later ([`maybe_shrink`](Self::maybe_shrink)).
    #[inline]
    pub(super) fn take_unshrunk(&mut self, slot: u32) -> Entry<K, V> {
        let pos = self.meta[slot as usize].pos as usize;
        let node = self.nodes[pos];
        debug_assert_eq!(node.slot, slot, "slot and node disagree");
        let seq = self.seq_of(&node);
        let last = self.nodes.pop().expect("a slot implies a node");
        if pos < self.nodes.len() {
            self.nodes[pos] = last;
            self.meta[last.slot as usize].pos = pos as u32;
            if self.before(&last, &node) {
                self.sift_up(pos);
            } else {
                self.sift_down(pos);
            }
        }
        let (taken, emptied) = self.slots.swap_remove(slot as usize);
        if let Some(chunk) = emptied {
            self.retire_chunk(chunk);
        }
        self.meta.swap_remove(slot as usize);
        if let Some(&moved) = self.meta.get(slot as usize) {
            // The former last slot now lives at `slot`: repoint its node and
            // its index bucket (found by its stored hash and old number).
            let from = self.slots.len() as u32;
            self.nodes[moved.pos as usize].slot = slot;
            self.index.repoint(moved.hash, from, slot);
        }
        Entry {
            key: taken.key,
            due: node.due,
            seq,
            value: taken.value,
        }
    }
}
