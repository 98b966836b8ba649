//! The ready lane: the tasks that were due, or all but due, when they
//! arrived, in arrival order, beside the heap (`pending.rs`): a queue with
//! holes where entries were removed, and an index from a key's hash to its
//! position, so a backlog of due work starts without a heap sift per task.

use super::super::task::{Lookup, PoolEntry};
use hashbrown::HashTable;
use std::collections::VecDeque;
use std::hash::Hash;

/// A lane entry and the hash it is filed under.
pub(super) type Filed<K> = (u64, PoolEntry<K>);

/// The lane's entries in order, with holes where some were removed.
pub(super) type Queue<K> = VecDeque<Option<Filed<K>>>;

/// The lane's index: (hash, absolute position) of every live entry, and of
/// dead ones not yet pruned.
pub(super) type Index = HashTable<(u64, u64)>;

/// The ready lane: a queue with holes, and an index from a key's hash to
/// its absolute position.
pub(super) struct Lane<K> {
    /// Entries in (due, stamp) order; `None` where one was removed.
    pub(super) queue: Queue<K>,
    /// Absolute position of `queue[0]`.
    pub(super) base: u64,
    /// Where each live entry is (and dead ones, until pruned).
    pub(super) index: Index,
    /// Live entries.
    pub(super) live: usize,
    /// Index entries of positions no longer live.
    pub(super) dead: usize,
    /// Due time of the last entry pushed (live or not): a new entry due no
    /// earlier keeps the order.
    pub(super) last_due: i64,
}

impl<K: Hash + Eq> Lane<K> {
    pub(super) fn new() -> Self {
        Lane {
            queue: VecDeque::new(),
            base: 0,
            index: HashTable::new(),
            live: 0,
            dead: 0,
            last_due: i64::MIN,
        }
    }

    /// The live entry at absolute position `pos`.
    pub(super) fn at(&self, pos: u64) -> &PoolEntry<K> {
        self.live_at(pos).expect("a live lane position")
    }

    /// The entry at absolute position `pos`, if it is live.
    pub(super) fn live_at(&self, pos: u64) -> Option<&PoolEntry<K>> {
        let i = usize::try_from(pos.checked_sub(self.base)?).ok()?;
        self.queue.get(i)?.as_ref().map(|(_, e)| e)
    }

    /// Where `key` is, if it is here. Runs the key's `Eq` only.
    pub(super) fn find<Q: ?Sized + Lookup<K>>(&self, hash: u64, key: &Q) -> Option<u64> {
        if self.live == 0 {
            return None;
        }
        let found = self.index.find(hash, |&(h, pos)| {
            h == hash && self.live_at(pos).is_some_and(|e| key.equivalent(&e.key))
        });
        found.map(|&(_, pos)| pos)
    }

    /// True if an entry due at `due` would keep the order.
    pub(super) fn keeps_order(&self, due: i64) -> bool {
        self.live == 0 || self.last_due <= due
    }

    /// The due time and stamp of the first entry. Runs no user code.
    pub(super) fn first(&self) -> Option<(i64, u64)> {
        let filed = self.queue.front()?.as_ref();
        filed.map(|(_, e)| (e.due, e.seq))
    }

    /// Append an entry filed under `hash`. Runs no user code.
    pub(super) fn push(&mut self, hash: u64, entry: PoolEntry<K>) {
        let pos = self.base + self.queue.len() as u64;
        self.last_due = entry.due;
        self.queue.push_back(Some((hash, entry)));
        self.index.insert_unique(hash, (hash, pos), |&(h, _)| h);
        self.live += 1;
    }

    /// Take the entry at absolute position `pos` out. Runs no user code.
    pub(super) fn take(&mut self, pos: u64) -> PoolEntry<K> {
        self.take_filed(pos).1
    }

    /// Take the entry at absolute position `pos` out, with its hash. Runs
    /// no user code.
    pub(super) fn take_filed(&mut self, pos: u64) -> Filed<K> {
        let i = (pos - self.base) as usize;
        let filed = self.queue[i].take().expect("a live lane position");
        self.live -= 1;
        self.dead += 1;
        while matches!(self.queue.front(), Some(None)) {
            self.queue.pop_front();
            self.base += 1;
        }
        self.prune();
        filed
    }

    /// Drop the index's dead entries once they fill half its capacity (a
    /// pass over the table, paid for by as many removals), or all at once
    /// when nothing is live. Runs no user code.
    pub(super) fn prune(&mut self) {
        if self.live == 0 {
            self.index.clear();
            self.dead = 0;
        } else if self.dead >= (self.index.capacity() / 2).max(32) {
            let (queue, base) = (&self.queue, self.base);
            self.index.retain(|&mut (_, pos)| {
                let i = pos.checked_sub(base).map(|i| i as usize);
                i.and_then(|i| queue.get(i)).is_some_and(Option::is_some)
            });
            self.dead = 0;
        }
    }

    /// Every live entry, in order, leaving the lane empty.
    pub(super) fn drain(&mut self) -> Vec<PoolEntry<K>> {
        self.index.clear();
        self.live = 0;
        self.dead = 0;
        self.base += self.queue.len() as u64;
        self.queue.drain(..).flatten().map(|(_, e)| e).collect()
    }
}
