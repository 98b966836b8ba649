//! Giving memory back: once the heap falls to a quarter of its capacity,
//! its heap array and position table move to smaller buffers and the old
//! ones are retired. (The slot table, in chunks, gives each chunk up as it
//! empties, `chunks.rs`, and moves only while it fits in its first chunk.)
//!
//! The move copies the surviving entries' nodes and positions, 28 bytes
//! an entry, under the owner's lock. Into
//! fresh buffers that copy faulted in every page of them: a 100,000-entry
//! heap falling to 32,767 held its owner's lock for 1.6-2.3 ms on this
//! project's virtual machine, and every due task with it
//! (`docs/bench/lab-notes.md`, "The shrink's page faults"). So a heap that
//! nears a shrink asks its owner, once, for a [`Spare`]: tables of the
//! smaller size whose pages the owner touches outside its lock. The copy
//! then only writes memory that is already mapped. A heap whose owner
//! gives none shrinks as before. The spare costs half the tables' memory
//! while the heap stays between 5/16 and a quarter of them; it counts in
//! [`IndexedHeap::allocated_bytes`]. A spare that no longer fits when the
//! shrink comes (the heap grew meanwhile) is dropped there.
//!
//! Every removal shrinks inline, except [`IndexedHeap::pop_due_unshrunk`]:
//! the pool's worker takes a task out to start it at once, and a copy
//! inside that critical section made the task late by the copy's length
//! (about 0.1 ms for 8,191 entries, before the slot table was chunked;
//! 30-60 µs since). It asks [`IndexedHeap::sparse`] and
//! calls [`IndexedHeap::maybe_shrink`] after the task's run instead (step
//! 4d of `docs/protocol.md`).

use super::retired::{Buffers, Retired, Spare};
use super::{IndexedHeap, FLOOR};

impl<K, V, S> IndexedHeap<K, V, S> {
    /// Give memory back once the heap has fallen to a quarter of its
    /// capacity: the entries move to smaller vectors (no entry is renumbered)
    /// and the old ones are retired, to be freed outside the owner's lock.
    /// The test is inlined into every removal (but
    /// [`pop_due_unshrunk`](Self::pop_due_unshrunk)'s, whose caller calls
    /// this itself later); the shrinking itself is rare and kept out of
    /// line.
    #[inline]
    pub(crate) fn maybe_shrink(&mut self) {
        if self.sparse() {
            self.shrink();
        }
    }

    /// True when [`maybe_shrink`](Self::maybe_shrink) would shrink.
    #[inline]
    pub(crate) fn sparse(&self) -> bool {
        self.tables_sparse() || self.index.is_sparse()
    }

    /// True when the tables hold less than a quarter of their capacity
    /// (above the floor).
    #[inline]
    fn tables_sparse(&self) -> bool {
        let cap = self.nodes.capacity();
        cap > FLOOR && self.nodes.len() < cap / 4
    }

    /// The shrinking of [`maybe_shrink`](Self::maybe_shrink).
    #[cold]
    #[inline(never)]
    fn shrink(&mut self) {
        let len = self.nodes.len();
        let mut shrunk = Buffers::none();
        if self.tables_sparse() {
            let target = (len * 2).max(FLOOR);
            let mut into = self.spare_for(target);
            into.nodes.extend_from_slice(&self.nodes);
            shrunk.nodes = std::mem::replace(&mut self.nodes, into.nodes);
            shrunk.nodes.clear();
            into.meta.extend_from_slice(&self.meta);
            shrunk.meta = std::mem::replace(&mut self.meta, into.meta);
            shrunk.meta.clear();
            // Slots move only in a table small enough for one chunk.
            shrunk.chunks = self.slots.shrink_small(target);
        }
        let meta = &self.meta;
        if let Some(index) = self.index.shrink_if_sparse(|s| meta[s as usize].hash) {
            shrunk.index = index;
        }
        // Retired buffers hold no entry, so dropping them (here or in the
        // owner) never runs user code.
        debug_assert!(
            shrunk.nodes.is_empty()
                && shrunk.chunks.iter().all(Vec::is_empty)
                && shrunk.meta.is_empty()
                && shrunk.index.is_empty()
        );
        if !shrunk.is_empty() {
            // Keeps at most one generation: an owner that does not take
            // them frees the previous ones here.
            self.retired = Retired(Some(Box::new(shrunk)));
        }
    }

    /// Retire an emptied chunk of the slot table (`chunks.rs`) with the
    /// buffers the owner has not taken yet.
    #[cold]
    pub(super) fn retire_chunk(&mut self, chunk: Vec<super::Slot<K, V>>) {
        let retired = self
            .retired
            .0
            .get_or_insert_with(|| Box::new(Buffers::none()));
        retired.chunks.push(chunk);
    }

    /// Empty tables for a shrink to `target` entries: the spare if it fits
    /// (at least `target`, less than the tables now), else fresh ones. A
    /// spare that does not fit is dropped here (it holds no entry); the
    /// next spare is asked for once the heap nears its next shrink.
    fn spare_for(&mut self, target: usize) -> Buffers<K, V> {
        self.spare_asked = false;
        let cap = self.nodes.capacity();
        match self.spare.take() {
            Some(Spare(b)) if b.fits(target, cap) => *b,
            _ => Buffers::with_capacity(target),
        }
    }

    /// The size of tables to prepare for the next shrink, once the heap
    /// nears it (within a quarter of the shrink's threshold) and has no
    /// spare: asked once per shrink. The owner makes them with
    /// [`Spare::prepared`] outside its lock and hands them over with
    /// [`give_spare`](Self::give_spare).
    #[inline]
    pub(crate) fn spare_wanted(&mut self) -> Option<usize> {
        let cap = self.nodes.capacity();
        let near = cap > FLOOR && self.nodes.len() < cap / 16 * 5;
        if !near || self.spare_asked || self.spare.is_some() {
            return None;
        }
        self.spare_asked = true;
        Some(cap / 2)
    }

    /// Keep `spare` for the next shrink, if the heap still nears one and
    /// holds none; else give it back, to drop outside the lock (and ask
    /// again when the heap next nears a shrink).
    pub(crate) fn give_spare(&mut self, spare: Spare<K, V>) -> Option<Spare<K, V>> {
        let cap = self.nodes.capacity();
        let near = self.nodes.len() < cap / 16 * 5;
        let room = spare.0.room();
        if self.spare.is_some() || !near || room >= cap {
            self.spare_asked = self.spare.is_some();
            return Some(spare);
        }
        self.spare = Some(spare);
        None
    }
}
