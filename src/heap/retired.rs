//! Buffers a shrinking heap gives up, to be freed outside its owner's lock.

use super::{Meta, Node, Slot};
use std::fmt;

/// Buffers the heap gave up when it shrank, freed when this is dropped.
/// They are empty (their entries moved to the new buffers), so dropping
/// them runs no user code.
///
/// Freeing a large buffer can stall the freeing thread for milliseconds on
/// a virtual machine (the kernel must flush the other CPUs' address
/// translations), so an owner that holds a lock around the heap takes them
/// with [`IndexedHeap::take_retired`] and drops them after unlocking. If
/// the owner never takes them, the heap frees them itself at its next
/// shrink.
///
/// Most of the time there are none: the buffers are boxed, so that taking
/// and dropping an empty `Retired` (after every removal, in the owners)
/// moves one pointer and tests it.
pub(crate) struct Retired<K, V>(pub(super) Option<Box<Buffers<K, V>>>);

/// The buffers of a [`Retired`].
pub(super) struct Buffers<K, V> {
    /// An emptied heap array.
    pub(super) nodes: Vec<Node>,
    /// Emptied chunks of the slot table (`chunks.rs`).
    pub(super) chunks: Vec<Vec<Slot<K, V>>>,
    /// An emptied position and hash table.
    pub(super) meta: Vec<Meta>,
    /// An emptied index table.
    pub(super) index: Vec<u32>,
}

/// Empty tables for a heap's next shrink, their pages already touched
/// (`shrink.rs`): made by the heap's owner outside its lock.
pub(crate) struct Spare<K, V>(pub(super) Box<Buffers<K, V>>);

impl<K, V> Spare<K, V> {
    /// Tables for `capacity` entries, every page of them written once, so
    /// that the shrink which fills them faults none in.
    pub(crate) fn prepared(capacity: usize) -> Self {
        let mut b = Buffers::with_capacity(capacity);
        touch(&mut b.nodes);
        touch(&mut b.meta);
        Spare(Box::new(b))
    }

    /// Bytes the tables hold (capacity).
    pub(super) fn bytes(&self) -> usize {
        self.0.bytes()
    }
}

/// Write one element's worth of zeroes per page of `v`'s spare capacity
/// (its length is unchanged: nothing is initialised).
fn touch<T>(v: &mut Vec<T>) {
    let per_page = (4096 / std::mem::size_of::<T>().max(1)).max(1);
    for m in v.spare_capacity_mut().iter_mut().step_by(per_page) {
        *m = std::mem::MaybeUninit::zeroed();
    }
    std::hint::black_box(v.as_mut_ptr());
}

impl<K, V> Buffers<K, V> {
    pub(super) fn none() -> Self {
        Buffers {
            nodes: Vec::new(),
            chunks: Vec::new(),
            meta: Vec::new(),
            index: Vec::new(),
        }
    }

    /// Empty heap tables for `capacity` entries: the heap array and the
    /// position table (slots are kept in chunks, which a shrink does not
    /// move; no index).
    pub(super) fn with_capacity(capacity: usize) -> Self {
        Buffers {
            nodes: Vec::with_capacity(capacity),
            chunks: Vec::new(),
            meta: Vec::with_capacity(capacity),
            index: Vec::new(),
        }
    }

    /// True if these empty tables can take a shrink to `target` entries
    /// from tables of `cap`: large enough, and smaller.
    pub(super) fn fits(&self, target: usize, cap: usize) -> bool {
        let room = self.room();
        self.nodes.is_empty() && target <= room && room < cap
    }

    /// The entries the heap tables can take without growing.
    pub(super) fn room(&self) -> usize {
        self.nodes.capacity().min(self.meta.capacity())
    }

    /// True when no buffer holds memory.
    pub(super) fn is_empty(&self) -> bool {
        self.nodes.capacity() == 0
            && self.chunks.is_empty()
            && self.meta.capacity() == 0
            && self.index.capacity() == 0
    }

    /// Bytes the buffers hold (capacity).
    pub(super) fn bytes(&self) -> usize {
        use std::mem::size_of;
        self.nodes.capacity() * size_of::<Node>()
            + self.chunks.iter().map(Vec::capacity).sum::<usize>() * size_of::<Slot<K, V>>()
            + self.meta.capacity() * size_of::<Meta>()
            + self.index.capacity() * size_of::<u32>()
    }
}

impl<K, V> Retired<K, V> {
    pub(super) fn none() -> Self {
        Retired(None)
    }

    /// True when it holds no buffer.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

impl<K, V> fmt::Debug for Retired<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let empty = Buffers::none();
        let b = self.0.as_deref().unwrap_or(&empty);
        f.debug_struct("Retired")
            .field("nodes", &b.nodes.capacity())
            .field("chunks", &b.chunks.len())
            .field("meta", &b.meta.capacity())
            .field("index", &b.index.capacity())
            .finish()
    }
}
