//! Giving memory back: once the heap falls to a quarter of its capacity,
//! its tables move to smaller buffers and the old ones are retired.

use super::retired::{Buffers, Retired};
use super::{IndexedHeap, FLOOR};

impl<K, V, S> IndexedHeap<K, V, S> {
    /// Give memory back once the heap has fallen to a quarter of its
    /// capacity: the entries move to smaller vectors (no entry is renumbered)
    /// and the old ones are retired, to be freed outside the owner's lock.
    /// The test is inlined into every removal; the shrinking itself is rare
    /// and kept out of line.
    #[inline]
    pub(super) fn maybe_shrink(&mut self) {
        if self.tables_sparse() || self.index.is_sparse() {
            self.shrink();
        }
    }

    /// True when the tables hold less than a quarter of their capacity
    /// (above the floor).
    #[inline]
    fn tables_sparse(&self) -> bool {
        let cap = self.slots.capacity();
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
            let mut nodes = Vec::with_capacity(target);
            nodes.extend_from_slice(&self.nodes);
            shrunk.nodes = std::mem::replace(&mut self.nodes, nodes);
            shrunk.nodes.clear();
            let mut slots = Vec::with_capacity(target);
            slots.append(&mut self.slots);
            shrunk.slots = std::mem::replace(&mut self.slots, slots);
            let mut meta = Vec::with_capacity(target);
            meta.extend_from_slice(&self.meta);
            shrunk.meta = std::mem::replace(&mut self.meta, meta);
            shrunk.meta.clear();
        }
        let meta = &self.meta;
        if let Some(index) = self.index.shrink_if_sparse(|s| meta[s as usize].hash) {
            shrunk.index = index;
        }
        // Retired buffers hold no entry, so dropping them (here or in the
        // owner) never runs user code.
        debug_assert!(
            shrunk.nodes.is_empty()
                && shrunk.slots.is_empty()
                && shrunk.meta.is_empty()
                && shrunk.index.is_empty()
        );
        if !shrunk.is_empty() {
            // Keeps at most one generation: an owner that does not take
            // them frees the previous ones here.
            self.retired = Retired(Some(Box::new(shrunk)));
        }
    }
}
