//! Heap order: how two entries compare, and the sifts that restore the
//! order after a change. Every move rewrites the moved entry's position
//! in its `Meta`.

use super::{IndexedHeap, Node, ARITY};

impl<K, V, S> IndexedHeap<K, V, S> {
    /// The full stamp of the entry of `node`.
    #[inline]
    pub(super) fn seq_of(&self, node: &Node) -> u64 {
        (u64::from(self.meta[node.slot as usize].seq_hi) << 32) | u64::from(node.seq_lo)
    }

    /// Strict heap order: earlier due first, then earlier stamp. Compares
    /// the stamps' low halves alone while every stamp issued fits in 32
    /// bits (all high halves are then 0), so equal due times read no `Meta`
    /// before the heap's four billionth stamp.
    #[inline]
    pub(super) fn before(&self, a: &Node, b: &Node) -> bool {
        if a.due != b.due {
            return a.due < b.due;
        }
        if self.next_seq <= 1 << 32 {
            return a.seq_lo < b.seq_lo;
        }
        self.seq_of(a) < self.seq_of(b)
    }

    /// Move the node at `pos` up until its parent comes before it.
    pub(super) fn sift_up(&mut self, mut pos: usize) {
        let node = self.nodes[pos];
        while pos > 0 {
            let parent = (pos - 1) / ARITY;
            let p = self.nodes[parent];
            if !self.before(&node, &p) {
                break;
            }
            self.nodes[pos] = p;
            self.meta[p.slot as usize].pos = pos as u32;
            pos = parent;
        }
        self.nodes[pos] = node;
        self.meta[node.slot as usize].pos = pos as u32;
    }

    /// Move the node at `pos` down until no child comes before it.
    pub(super) fn sift_down(&mut self, mut pos: usize) {
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
                if self.before(&self.nodes[c], &self.nodes[best]) {
                    best = c;
                }
            }
            let child = self.nodes[best];
            if !self.before(&child, &node) {
                break;
            }
            self.nodes[pos] = child;
            self.meta[child.slot as usize].pos = pos as u32;
            pos = best;
        }
        self.nodes[pos] = node;
        self.meta[node.slot as usize].pos = pos as u32;
    }

    /// The due times of the entries due at or before `upto`, in no order,
    /// written to the front of `out`: how many, or `None` if more than
    /// `out` holds. Heap order makes them the subtree under the root whose
    /// nodes are due by `upto`, so the walk reads those nodes and their
    /// children only (the top of the heap, mostly cached). Runs no user
    /// code.
    pub(crate) fn dues_through(&self, upto: i64, out: &mut [i64]) -> Option<usize> {
        let mut found = 0;
        self.collect_dues(0, upto, out, &mut found).then_some(found)
    }

    /// Depth first from `pos` (the recursion is as deep as the heap is
    /// high); false once `out` is full and another entry is due by `upto`.
    fn collect_dues(&self, pos: usize, upto: i64, out: &mut [i64], found: &mut usize) -> bool {
        let Some(node) = self.nodes.get(pos).filter(|n| n.due <= upto) else {
            return true;
        };
        let Some(slot) = out.get_mut(*found) else {
            return false;
        };
        *slot = node.due;
        *found += 1;
        (pos * ARITY + 1..pos * ARITY + 1 + ARITY).all(|c| self.collect_dues(c, upto, out, found))
    }
}
