//! Giving memory back: once the heap falls to a quarter of its capacity,
//! its heap array and position table shrink to twice its length, in place
//! (`pages::shrink`): they keep their pages up to the new end, where the
//! surviving entries already are, and the pages past it are retired, to be
//! unmapped outside the owner's lock. (The slot table, in chunks, gives
//! each chunk up as it empties, `chunks.rs`, and shrinks its first chunk
//! the same way once it fits in it; the index, at a 32nd full, re-places
//! its entries at the front of its own table and sheds the rest.)
//!
//! So a shrink copies nothing, faults in no fresh page and unmaps nothing
//! while the owner's lock is held. It used to move the entries into fresh
//! smaller buffers, and that copy faulted in every page of them under the
//! lock, with every due task waiting (`docs/bench/lab-notes.md`, "The
//! shrink's page faults"); the heap then asked its owner for spare tables
//! prepared outside the lock, which cost a thread per large shrink and
//! half the tables' memory while the heap neared it. A table too small for
//! a mapping of its own still moves, into a buffer of the global allocator
//! (a few pages at most).
//!
//! Every removal shrinks inline, except [`IndexedHeap::pop_due_unshrunk`]:
//! the pool's worker takes a task out to start it at once and leaves the
//! shrink's bookkeeping for after the task's run ([`IndexedHeap::sparse`],
//! [`IndexedHeap::maybe_shrink`], step 4d of `docs/protocol.md`).
//!
//! After a large drain the retired memory also carries a request to trim
//! the allocator (`pages::trim_allocator`): the payloads the drain dropped
//! were often allocations of their own (a handle's shared state, a closure
//! too large for its entry), which glibc keeps in its bins until a trim.

use super::pages;
use super::retired::{keep, Buffers, Retired};
use super::{IndexedHeap, FLOOR};

/// A heap whose tables held at least this many entries asks for a trim of
/// the allocator once it has drained down to tables [`TRIM_RATIO`] times
/// smaller; smaller heaps never ask.
pub(super) const TRIM_FROM: usize = 1 << 16;

/// How many times smaller the tables must have become since the last trim
/// (or since they were largest) for the next one: a drain of a large heap
/// trims a few times, each time after most of what is left went.
pub(super) const TRIM_RATIO: usize = 8;

impl<K, V, S> IndexedHeap<K, V, S> {
    /// Give memory back once the heap has fallen to a quarter of its
    /// capacity (no entry is renumbered, none moves); what the tables give
    /// up is retired, to be freed outside the owner's lock. The test is
    /// inlined into every removal (but
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
        let mut shed = Buffers::none();
        if self.tables_sparse() {
            let target = (len * 2).max(FLOOR);
            self.drained_from = self.drained_from.max(self.nodes.capacity());
            let t = &mut shed.tails;
            keep(pages::shrink(&mut self.nodes, target), &mut shed.nodes, t);
            keep(pages::shrink(&mut self.meta, target), &mut shed.meta, t);
            // Slots move only in a table small enough for one chunk.
            let (chunks, first) = self.slots.shrink_small(target);
            shed.chunks = chunks;
            keep(first, &mut shed.chunks, t);
            let now = self.nodes.capacity();
            if self.drained_from >= TRIM_FROM && self.drained_from >= now * TRIM_RATIO {
                shed.trim = true;
                self.drained_from = now;
            }
        }
        let meta = &self.meta;
        let index = self.index.shrink_if_sparse(|s| meta[s as usize].hash);
        keep(index, &mut shed.index, &mut shed.tails);
        // Retired memory holds no entry, so freeing it (here or in the
        // owner) never runs user code.
        debug_assert!(shed.holds_no_entry());
        if !shed.is_empty() {
            // Keeps at most one generation: an owner that does not take
            // them frees the previous ones here.
            self.retired = Retired(Some(Box::new(shed)));
        }
    }

    /// Retire an emptied chunk of the slot table (`chunks.rs`) with the
    /// memory the owner has not taken yet.
    #[cold]
    pub(super) fn retire_chunk(&mut self, chunk: pages::Table<super::Slot<K, V>>) {
        let retired = self
            .retired
            .0
            .get_or_insert_with(|| Box::new(Buffers::none()));
        retired.chunks.push(chunk);
    }
}
