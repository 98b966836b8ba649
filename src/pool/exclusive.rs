//! Exclusive keys (`Builder::exclusive_keys`, protocol step 11): a keyed task
//! never starts while its key's previous task runs.
//!
//! # Ground rules
//!
//! - Everything here lives under the pool's state lock.
//! - A key is *busy* from the start of its task until its worker releases
//!   it after the run. A due task whose key is busy is *held* here instead
//!   of being started; it is still pending (cancel, replace and shutdown find
//!   it here), and it goes back into the heap, with its original stamp, when
//!   the key is released.
//! - A key is in the heap or held, never both.

use super::fault::{Fault, Faults};
use super::pending::Pending;
use super::task::{or_lose, Lookup, PoolEntry, Task, TaskKey};
use crate::contain::{catch, forget_payload};
use std::collections::hash_map::RandomState;
use std::collections::HashSet;
use std::hash::Hash;

/// The held tasks by key: hashbrown's map, whose lookups take any
/// [`Lookup`] (a borrowed form of a caller's key), where `std`'s take only
/// what the key type borrows as.
type HeldMap<K> = hashbrown::HashMap<TaskKey<K>, PoolEntry<K>, RandomState>;

/// The busy keys and the tasks held for them.
pub(crate) struct ExclusiveKeys<K> {
    /// Whether the pool keeps keys exclusive at all.
    on: bool,
    /// Keys whose task is started or running.
    busy: HashSet<TaskKey<K>>,
    /// Due tasks waiting for their busy key.
    held: HeldMap<K>,
    /// The protocol step the loom models asked to break, if any.
    faults: Faults,
}

impl<K> ExclusiveKeys<K> {
    /// Tasks held.
    pub(crate) fn len(&self) -> usize {
        self.held.len()
    }

    /// True when no task is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// The keys of the tasks held (at most one per busy key).
    pub(crate) fn held_keys(&self) -> impl Iterator<Item = &TaskKey<K>> {
        self.held.keys()
    }
}

impl<K: Hash + Eq + Clone> ExclusiveKeys<K> {
    /// The bookkeeping of a pool whose keys are exclusive iff `on`.
    pub(crate) fn new(on: bool, faults: Faults) -> Self {
        ExclusiveKeys {
            on,
            busy: HashSet::new(),
            held: HeldMap::default(),
            faults,
        }
    }

    /// True when `key`'s tasks are kept from overlapping.
    pub(crate) fn applies(&self, key: &TaskKey<K>) -> bool {
        self.on && matches!(key, TaskKey::Keyed(_))
    }

    /// Step 11, at a start: the entry if it may start now (its key is then
    /// busy), or `None` if it is held until its key is released.
    pub(crate) fn start(&mut self, entry: PoolEntry<K>) -> Option<PoolEntry<K>> {
        if !self.applies(&entry.key) {
            return Some(entry);
        }
        if self.busy.contains(&entry.key) && !self.faults.has(Fault::ExclusiveNoHold) {
            self.held.insert(entry.key.clone(), entry);
            return None;
        }
        self.busy.insert(entry.key.clone());
        Some(entry)
    }

    /// Step 11, after a run: `key` is free again; its held successor goes
    /// back into `heap` with its original stamp. Returns the keys this let
    /// go of, for the caller to drop once the lock is released.
    ///
    /// The key's `Hash` and `Eq` are user code. If they panic, the key is
    /// found by comparing alone, and a key that cannot be compared is let go
    /// (its held tasks go back too), so that no key stays busy for ever.
    pub(crate) fn release(&mut self, key: &TaskKey<K>, heap: &mut Pending<K>) -> Vec<TaskKey<K>> {
        let keep_held = self.faults.has(Fault::ExclusiveReleaseKeepsHeld);
        let found = catch(|| {
            let busy = self.busy.take(key);
            (
                busy,
                (!keep_held).then(|| self.held.remove_entry(key)).flatten(),
            )
        });
        let (busy, held) = match found {
            Ok((busy, held)) => (busy.into_iter().collect(), held.into_iter().collect()),
            Err(payload) => {
                forget_payload(payload);
                self.release_by_comparing(key)
            }
        };
        let mut keys: Vec<TaskKey<K>> = busy;
        for (k, entry) in held {
            keys.push(k);
            let restored = or_lose(entry, |entry| heap.restore(entry));
            if let Some(Err(entry)) = restored {
                debug_assert!(false, "a held key was also in the heap");
                entry.value.lose();
            }
        }
        keys
    }

    /// [`release`](Self::release) when hashing `key` panicked: compare
    /// alone, and let go of whatever cannot be compared.
    #[allow(clippy::type_complexity)] // the two kinds of thing let go
    fn release_by_comparing(
        &mut self,
        key: &TaskKey<K>,
    ) -> (Vec<TaskKey<K>>, Vec<(TaskKey<K>, PoolEntry<K>)>) {
        let same = |k: &TaskKey<K>| catch(|| k == key).unwrap_or(true);
        let busy = self.busy.extract_if(|k| same(k)).collect();
        let held = self.held.extract_if(|k, _| same(k)).collect();
        (busy, held)
    }

    /// Remove `key`'s held task (only the one stamped `seq`, if given).
    pub(crate) fn take<Q: ?Sized + Lookup<K>>(
        &mut self,
        key: &Q,
        seq: Option<u64>,
    ) -> Option<PoolEntry<K>> {
        if self.held.is_empty() {
            return None; // the common case: no hashing at all
        }
        match self.held.get(key) {
            Some(e) if seq.is_none_or(|s| s == e.seq) => self.held.remove(key),
            _ => None,
        }
    }

    /// `look` at the due time and the task held for `key`, if any.
    pub(crate) fn inspect<Q: ?Sized + Lookup<K>, R>(
        &self,
        key: &Q,
        look: impl FnOnce(i64, &Task) -> R,
    ) -> Option<R> {
        if self.held.is_empty() {
            return None;
        }
        self.held.get(key).map(|e| look(e.due, &e.value))
    }

    /// Remove every held task, in due order.
    pub(crate) fn drain(&mut self) -> Vec<PoolEntry<K>> {
        let mut all: Vec<_> = self.held.drain().map(|(_, e)| e).collect();
        all.sort_by_key(|e| (e.due, e.seq));
        all
    }

    /// Remove every held task that `stops` says a drain stops.
    pub(crate) fn drain_periodic(&mut self, stops: impl Fn(&Task) -> bool) -> Vec<PoolEntry<K>> {
        let keys: Vec<_> = self
            .held
            .iter()
            .filter(|(_, e)| stops(&e.value))
            .map(|(k, _)| k.clone())
            .collect();
        keys.iter().filter_map(|k| self.held.remove(k)).collect()
    }
}
