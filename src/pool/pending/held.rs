//! The workers' holds as seen from the pending tasks: the records of
//! which task went into which hold, the lookups by key that reach into a
//! hold, filling a hold from the lane, and a free worker taking over half
//! of another's (steps 4b and 4c; ground rules in `pending.rs`).

use super::lane::Filed;
use super::Pending;
use crate::pool::fault::Fault;
use crate::pool::hold::{Held, Hold, HOLD_MAX};
use crate::pool::task::{Lookup, PoolEntry, Task};
use crate::sync::MutexGuard;
use std::collections::VecDeque;
use std::hash::Hash;

/// The record of a task moved into a hold.
#[derive(Clone, Copy)]
pub(super) struct HeldAt {
    /// The lane's hash of its key.
    hash: u64,
    /// Whose hold.
    worker: usize,
    /// Its stamp.
    seq: u64,
}

/// A record's bit in `Pending::held_filter`: the top seven bits of the
/// lane's hash of its key.
pub(super) fn bucket(hash: u64) -> u128 {
    1 << (hash >> 57)
}

/// The holds, locked one after another, if any task went into one since
/// its worker last came back for more (there are records); none else.
pub(super) fn held_by<'a, K>(
    holds: &'a [Hold<K>],
    held: &[HeldAt],
) -> impl Iterator<Item = MutexGuard<'a, Held<K>>> {
    let any = !held.is_empty();
    holds.iter().filter(move |_| any).map(Hold::lock)
}

/// The hold in which `key`'s task waits, locked, and where in it; `hash`
/// is the lane's hash of the key. Runs the key's `Eq`.
fn find_held<'a, K: Eq, Q: ?Sized + Lookup<K>>(
    holds: &'a [Hold<K>],
    held: &[HeldAt],
    hash: u64,
    key: &Q,
) -> Option<(MutexGuard<'a, Held<K>>, usize)> {
    for at in held.iter().filter(|at| at.hash == hash) {
        let hold = holds[at.worker].lock();
        if let Some(i) = hold.position(key, Some(at.seq)) {
            return Some((hold, i));
        }
    }
    None
}

impl<K> Pending<K> {
    /// Tasks waiting in holds (none without a record).
    pub(super) fn held_len(&self) -> usize {
        held_by(&self.holds, &self.held)
            .map(|h| h.waiting.len())
            .sum()
    }

    /// True if a task waits in a hold: it is due, so a free worker should
    /// take it (step 4c). Locks the holds that may hold any.
    pub(crate) fn held_waiting(&self) -> bool {
        !self.faults.has(Fault::HoldNotShared) && self.held_len() > 0
    }
}

impl<K: Hash + Eq> Pending<K> {
    /// The hold in which `key`'s task waits, locked, and where in it;
    /// `hash` is the lane's hash of the key. Runs the key's `Eq`.
    pub(super) fn find_held<Q: ?Sized + Lookup<K>>(
        &self,
        hash: u64,
        key: &Q,
    ) -> Option<(MutexGuard<'_, Held<K>>, usize)> {
        let absent = self.held_filter & bucket(hash) == 0;
        if absent || self.faults.has(Fault::LookupSkipsHolds) {
            return None;
        }
        find_held(&self.holds, &self.held, hash, key)
    }

    /// Take `key`'s task out of the hold it waits in (only the one stamped
    /// `seq`, if given); `hash` is the lane's hash of the key.
    pub(super) fn take_held<Q: ?Sized + Lookup<K>>(
        &mut self,
        hash: u64,
        key: &Q,
        seq: Option<u64>,
    ) -> Option<PoolEntry<K>> {
        let (mut hold, i) = self.find_held(hash, key)?;
        if seq.is_some_and(|seq| hold.waiting[i].1.seq != seq) {
            return None;
        }
        let (_, entry) = hold.waiting.remove(i)?;
        drop(hold);
        let seq = entry.seq;
        self.held.retain(|at| at.seq != seq);
        self.refilter();
        Some(entry)
    }

    /// Step 4b: after a start from the lane, move up to [`HOLD_MAX`] - 1
    /// more due plain one-shot tasks from the lane's front into
    /// `worker`'s hold (if it is empty: only its worker fills it, once it
    /// has emptied it, and a take-over may have just given it tasks),
    /// while the lane holds a backlog (two tasks per worker of `workers`
    /// for each one taken) and its front comes before the heap's head.
    /// Returns how many moved and how many now wait in the hold. Runs no
    /// user code.
    pub(crate) fn fill_hold(&mut self, now: i64, worker: usize, workers: usize) -> (usize, usize) {
        let waiting = self.holds[worker].lock().waiting.len();
        if waiting > 0 {
            return (0, waiting); // it took over another's tasks (step 4c)
        }
        self.forget_held(worker);
        // Under loom a hold takes whatever is due, so that two tasks
        // exercise it.
        let per = if cfg!(loom) { 1 } else { 2 * workers };
        let n = (self.lane.live / per).min(HOLD_MAX - 1);
        if n == 0 {
            return (0, 0);
        }
        let mut hold = self.holds[worker].lock();
        while hold.waiting.len() < n {
            let Some(Some((hash, front))) = self.lane.queue.front() else {
                break;
            };
            let (due, seq, hash) = (front.due, front.seq, *hash);
            let plain = matches!(front.value, Task::Once(_) | Task::Watched(_));
            let heap_first = self.heap.peek_stamp().is_some_and(|h| h < (due, seq));
            if due > now || !plain || heap_first {
                break;
            }
            hold.waiting.push_back(self.lane.take_filed(self.lane.base));
            self.held.push(HeldAt { hash, worker, seq });
            self.held_filter |= bucket(hash);
        }
        (hold.waiting.len(), hold.waiting.len())
    }

    /// Rebuild the filter from the records that are left.
    pub(super) fn refilter(&mut self) {
        self.held_filter = self.held.iter().fold(0, |f, at| f | bucket(at.hash));
    }

    /// Drop `worker`'s records: its hold is empty (it is back for more).
    pub(crate) fn forget_held(&mut self, worker: usize) {
        if !self.held.is_empty() {
            self.held.retain(|at| at.worker != worker);
            self.refilter();
        }
    }

    /// Step 4 for a worker whose own hold is empty: take out the earliest
    /// due task, in (due, stamp) order, for `worker` to start at once:
    /// the heap's or the lane's head if due, or the first task of another
    /// worker's hold (step 4c), whose tasks were due when they went in.
    /// Runs no user code.
    pub(crate) fn next_due(&mut self, now: i64, worker: usize) -> Option<PoolEntry<K>> {
        match self.earliest_held(worker) {
            Some((front, from)) if self.first_due(now).is_none_or(|head| front < head) => {
                self.take_over(from, worker)
            }
            _ => self.pop_due(now),
        }
    }

    /// Due time and stamp of the heap's or the lane's head, whichever
    /// comes first, if it is due by `now`.
    pub(super) fn first_due(&self, now: i64) -> Option<(i64, u64)> {
        let heap = self.heap.peek_stamp().filter(|&(due, _)| due <= now);
        let lane = self.lane.first().filter(|&(due, _)| due <= now);
        match (heap, lane) {
            (Some(h), Some(l)) => Some(h.min(l)),
            (h, l) => h.or(l),
        }
    }

    /// The first task waiting in a hold other than `worker`'s, by (due,
    /// stamp), and whose hold it is in.
    pub(super) fn earliest_held(&self, worker: usize) -> Option<((i64, u64), usize)> {
        if self.held.is_empty() || self.faults.has(Fault::HoldNotShared) {
            return None;
        }
        let fronts = self.holds.iter().enumerate().filter(|&(w, _)| w != worker);
        let fronts = fronts.filter_map(|(w, hold)| {
            let hold = hold.lock();
            hold.waiting.front().map(|(_, e)| ((e.due, e.seq), w))
        });
        fronts.min()
    }

    /// Step 4c: take the first half of `from`'s hold over for `to`: the
    /// first task to start at once, the rest into `to`'s hold (empty: it
    /// is `to`'s worker that asks), in order, their records moved along.
    pub(super) fn take_over(&mut self, from: usize, to: usize) -> Option<PoolEntry<K>> {
        let mut taken: VecDeque<Filed<K>> = {
            let mut hold = self.holds[from].lock();
            let half = hold.waiting.len().div_ceil(2);
            hold.waiting.drain(..half).collect()
        };
        let (_, first) = taken.pop_front()?;
        let moved: Vec<u64> = taken.iter().map(|(_, e)| e.seq).collect();
        self.holds[to].lock().waiting.extend(taken);
        self.held.retain(|at| at.seq != first.seq);
        for at in self.held.iter_mut().filter(|at| moved.contains(&at.seq)) {
            at.worker = to;
        }
        self.refilter();
        Some(first)
    }

    /// Call `f` with each task waiting in a hold.
    pub(crate) fn each_held(&self, mut f: impl FnMut(&PoolEntry<K>)) {
        for hold in held_by(&self.holds, &self.held) {
            hold.waiting.iter().for_each(|(_, e)| f(e));
        }
    }

    /// Check that every record's bucket is set in the filter.
    #[cfg(test)]
    pub(super) fn check_held_records(&self) -> Result<(), String> {
        if self
            .held
            .iter()
            .any(|at| self.held_filter & bucket(at.hash) == 0)
        {
            return Err("a held task's record is missing from the filter".into());
        }
        Ok(())
    }
}
