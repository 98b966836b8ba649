//! The heap's invariant checks, for tests and for owners that verify it.

use super::{IndexedHeap, ARITY};
use std::hash::{BuildHasher, Hash};

impl<K: Hash + Eq, V, S: BuildHasher> IndexedHeap<K, V, S> {
    /// Check heap order, index agreement and lengths, then that every key
    /// hashes to the hash its slot keeps and is found at its own slot (so
    /// no key holds two entries).
    ///
    /// The structural checks run first and run no user code; the key checks
    /// call each key's `Hash` and `Eq`, whose panics propagate (the heap is
    /// only read).
    ///
    /// # Errors
    ///
    /// A description of the first broken invariant.
    pub fn check_invariants(&self) -> Result<(), String> {
        let n = self.nodes.len();
        if self.slots.len() != n || self.meta.len() != n || self.index.len() != n {
            return Err(format!(
                "length mismatch: {} nodes, {} slots, {} positions, {} index entries",
                n,
                self.slots.len(),
                self.meta.len(),
                self.index.len()
            ));
        }
        for (pos, node) in self.nodes.iter().enumerate() {
            if pos > 0 {
                let parent = &self.nodes[(pos - 1) / ARITY];
                if self.before(node, parent) {
                    return Err(format!("heap order broken at position {pos}"));
                }
            }
            let meta = self
                .meta
                .get(node.slot as usize)
                .ok_or_else(|| format!("node {pos} points past the slot table"))?;
            if meta.pos as usize != pos {
                return Err(format!(
                    "slot {} says position {}, node is at {pos}",
                    node.slot, meta.pos
                ));
            }
            let seq = (u64::from(meta.seq_hi) << 32) | u64::from(node.seq_lo);
            if seq >= self.next_seq {
                return Err(format!("stamp {seq} not below next_seq"));
            }
            if self.index.find(meta.hash, |s| s == node.slot) != Some(node.slot) {
                return Err(format!("slot {} is not indexed under its hash", node.slot));
            }
        }
        // With the lengths equal and every slot found under its hash, only
        // the index's count and probe sequences remain to check.
        self.index.check(
            |s| self.stored_hash(s),
            |s| match self.meta.get(s as usize) {
                Some(_) => Ok(()),
                None => Err(format!("index holds missing slot {s}")),
            },
        )?;
        for (s, slot) in self.slots.iter().enumerate() {
            let hash = self.hash_of(slot.key());
            if hash != self.meta[s].hash {
                return Err(format!("slot {s}'s key hashes apart from its stored hash"));
            }
            match self.find(hash, slot.key()) {
                Some(found) if found as usize == s => {}
                other => return Err(format!("index maps slot {s}'s key to {other:?}")),
            }
        }
        Ok(())
    }

    /// The hash `slot`'s `Meta` keeps, for the invariant checks (which must
    /// report, not panic on, a slot number past the table).
    pub(super) fn stored_hash(&self, slot: u32) -> u32 {
        self.meta.get(slot as usize).map_or(0, |m| m.hash)
    }
}
