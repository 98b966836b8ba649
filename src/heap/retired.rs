//! Memory a shrinking heap gives up, to be freed outside its owner's lock.

use super::pages::{Shed, Table, Tail};
use super::{Meta, Node, Slot};
use std::fmt;

/// Memory the heap gave up when it shrank, freed when this is dropped:
/// emptied buffers (their entries moved to new ones) and the pages past
/// the new end of tables that shrank in place (`pages.rs`). None of it
/// holds an entry, so dropping it runs no user code.
///
/// Unmapping memory can stall the thread for milliseconds on a virtual
/// machine (the kernel must flush the other CPUs' address translations),
/// so an owner that holds a lock around the heap takes it with
/// [`IndexedHeap::take_retired`](super::IndexedHeap::take_retired) and
/// drops it after unlocking. If the owner never takes it, the heap frees
/// it itself at its next shrink.
///
/// After a large drain it also asks the allocator, once the memory is
/// freed, to give its own free memory back to the system (`shrink.rs`,
/// `pages::trim_allocator`).
///
/// Most of the time there is none: the buffers are boxed, so that taking
/// and dropping an empty `Retired` (after every removal, in the owners)
/// moves one pointer and tests it.
pub(crate) struct Retired<K, V>(pub(super) Option<Box<Buffers<K, V>>>);

/// The memory of a [`Retired`].
pub(super) struct Buffers<K, V> {
    /// An emptied heap array, if it moved.
    pub(super) nodes: Vec<Table<Node>>,
    /// Emptied chunks of the slot table (`chunks.rs`).
    pub(super) chunks: Vec<Table<Slot<K, V>>>,
    /// An emptied position and hash table, if it moved.
    pub(super) meta: Vec<Table<Meta>>,
    /// An emptied index table, if it moved.
    pub(super) index: Vec<Table<u64>>,
    /// Pages given up by tables that shrank in place.
    pub(super) tails: Vec<Tail>,
    /// The heap has drained a large part of what it held: once the rest is
    /// freed, ask the allocator to give its free memory back to the system.
    pub(super) trim: bool,
}

/// Keep what a table shed in `buffers` (an old buffer) or `tails`.
pub(super) fn keep<T>(shed: Shed<T>, buffers: &mut Vec<Table<T>>, tails: &mut Vec<Tail>) {
    match shed {
        Shed::Nothing => {}
        Shed::Buffer(b) => buffers.push(b),
        Shed::Pages(t) => tails.push(t),
    }
}

impl<K, V> Buffers<K, V> {
    pub(super) fn none() -> Self {
        Buffers {
            nodes: Vec::new(),
            chunks: Vec::new(),
            meta: Vec::new(),
            index: Vec::new(),
            tails: Vec::new(),
            trim: false,
        }
    }

    /// True when no buffer holds an entry (all were emptied before they
    /// were given up).
    pub(super) fn holds_no_entry(&self) -> bool {
        self.nodes.iter().all(|t| t.is_empty())
            && self.chunks.iter().all(|t| t.is_empty())
            && self.meta.iter().all(|t| t.is_empty())
            && self.index.iter().all(|t| t.is_empty())
    }

    /// True when there is nothing to free and no trim to ask for.
    pub(super) fn is_empty(&self) -> bool {
        self.nodes.is_empty()
            && self.chunks.is_empty()
            && self.meta.is_empty()
            && self.index.is_empty()
            && self.tails.is_empty()
            && !self.trim
    }

    /// Bytes the buffers and pages hold (capacity).
    pub(super) fn bytes(&self) -> usize {
        fn sum<T>(tables: &[Table<T>]) -> usize {
            tables.iter().map(Table::capacity).sum::<usize>() * std::mem::size_of::<T>()
        }
        sum(&self.nodes)
            + sum(&self.chunks)
            + sum(&self.meta)
            + sum(&self.index)
            + self.tails.iter().map(Tail::bytes).sum::<usize>()
    }
}

impl<K, V> Retired<K, V> {
    pub(super) fn none() -> Self {
        Retired(None)
    }

    /// True when it holds nothing to free.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

impl<K, V> Drop for Retired<K, V> {
    fn drop(&mut self) {
        if let Some(buffers) = self.0.take() {
            let trim = buffers.trim;
            drop(buffers);
            if trim {
                super::pages::trim_allocator();
            }
        }
    }
}

impl<K, V> fmt::Debug for Retired<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let empty = Buffers::none();
        let b = self.0.as_deref().unwrap_or(&empty);
        f.debug_struct("Retired")
            .field("nodes", &b.nodes.len())
            .field("chunks", &b.chunks.len())
            .field("meta", &b.meta.len())
            .field("index", &b.index.len())
            .field("tails", &b.tails.len())
            .field("bytes", &b.bytes())
            .field("trim", &b.trim)
            .finish()
    }
}
