//! Pending tasks: the heap, ordered by due time and stamp, and beside it the
//! *ready lane*, a queue of tasks that were due, or all but due (within a
//! millisecond of the latest clock reading), when they arrived.
//!
//! A burst of tasks due on arrival (a backlog the workers have not caught up
//! with) would otherwise sit in the heap, and every start would pay a full
//! sift from its root. Such tasks arrive in due order, so a queue keeps them
//! in order for nothing, and a start takes the earlier of the two heads.
//! A task in the lane is pending like any other: cancel, replace,
//! reschedule and `shutdown_now` find it by key, capacity counts it. So is
//! a task a worker took from the lane's front into its hold (`hold.rs`):
//! every lookup by key that misses the heap and the lane looks there too,
//! through a record of what went into which hold.
//!
//! # Ground rules
//!
//! - A key is pending in the heap, in the lane or in a hold, in one of
//!   them only (and, with exclusive keys, in none while held for its key;
//!   such pools fill no holds).
//! - A hold takes only plain one-shot tasks, from the lane's front, due
//!   by the start's own reading and not behind the heap's head: the order
//!   a start would take them in. A record (lane hash, worker, stamp) per
//!   held task lets lookups find it; a task its worker started since has
//!   left its hold without the state lock, so a record may be stale and a
//!   lookup checks the hold itself, under its lock. A worker's records go
//!   when it next comes for more (its hold is empty then); the count of
//!   held tasks is read from the holds themselves, and only near the
//!   capacity on the admission path (the records bound it).
//! - The lane takes an arrival only if it is new (pending nowhere), due by
//!   the reading intake passes (`intake::now_for`: a real reading, or the
//!   task's own due time when that lies within a millisecond of the latest
//!   one), and due no earlier than the lane's last entry: so the lane is
//!   sorted by (due, stamp), and its stamps come from the heap's counter,
//!   so one order covers both. Its front may be not yet due: a start takes
//!   it only if due by the start's own reading, as for the heap.
//! - User code (a key's `Hash` and `Eq`) runs only while looking a key up,
//!   before anything changes: the lane files keys under the hash the heap
//!   computed, and a start or removal by position runs none.
//! - Removing a lane entry leaves a hole; holes at the front are dropped at
//!   once, so the front is live whenever the lane holds a task. An emptied
//!   lane gives its buffers up to be freed outside the lock.
//! - Removing an entry leaves its index entry behind, *dead*: a lookup
//!   skips positions that are no longer live, and the dead are pruned in
//!   one sequential pass once they fill half the index's capacity (or all
//!   at once when the lane empties). A start then reads only the queue's
//!   front, never a bucket of the index: on a backlog the index outgrows
//!   the cache, and removing each started entry from it cost two cache
//!   misses per start (a burst scheduled in batches drained at half the
//!   rate of one scheduled a task per call).

use super::fault::Faults;
use super::hold::Hold;
use super::task::{Lookup, PoolEntry, Task, TaskKey};
use super::time::NEVER;
use crate::heap::{Entry, IndexedHeap, Inserted, Probe, Retired};
use crate::sync::Arc;
use held::{held_by, HeldAt};
use lane::{Index, Lane, Queue};
use std::hash::Hash;

/// A lane this long or more gives its buffers up when it empties.
const SHRINK_AT: usize = 1024;

/// Pending tasks, in the heap, the ready lane or a worker's hold.
pub(crate) struct Pending<K> {
    /// Tasks not yet due when they arrived, and every other pending task.
    heap: IndexedHeap<TaskKey<K>, Task>,
    /// Tasks due when they arrived, in arrival order.
    lane: Lane<K>,
    /// The workers' holds (`hold.rs`), one per worker.
    holds: Arc<[Hold<K>]>,
    /// Where each task moved into a hold went: a record per task, kept
    /// until its worker next fills its hold; a task started since (which
    /// left its hold without the state lock) is simply not found there.
    held: Vec<HeldAt>,
    /// A bit per bucket of the records' hashes ([`bucket`]): a key whose
    /// bucket is clear is in no hold, and a new key in a burst (nearly
    /// every admission) skips the search of the records.
    held_filter: u128,
    /// The protocol step the loom models asked to break, if any.
    faults: Faults,
}

/// Buffers given up, to free once the state lock is released.
pub(crate) struct Given<K> {
    /// The heap's.
    heap: Retired<TaskKey<K>, Task>,
    /// The lane's queue and index.
    lane: Option<(Queue<K>, Index)>,
}

impl<K> Given<K> {
    /// True when there is nothing to free.
    pub(crate) fn is_empty(&self) -> bool {
        self.heap.is_empty() && self.lane.is_none()
    }
}

/// The lane's hash of a key, from the heap's 32 bits, spread over 64 (the
/// table reads its top bits).
fn spread(probe: &Probe) -> u64 {
    u64::from(probe.hash()).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl<K> Pending<K> {
    /// Pending tasks. Locks the holds that may hold any.
    pub(crate) fn len(&self) -> usize {
        self.heap.len() + self.lane.live + self.held_len()
    }

    /// True when nothing is pending. Locks the holds that may hold any.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K: Hash + Eq> Pending<K> {
    /// Nothing pending; `holds` are the workers' (`hold.rs`).
    pub(crate) fn new(holds: Arc<[Hold<K>]>, faults: Faults) -> Self {
        Pending {
            heap: IndexedHeap::new(),
            lane: Lane::new(),
            holds,
            held: Vec::new(),
            held_filter: 0,
            faults,
        }
    }

    /// The earliest due time. Runs no user code, and reads no stamp (the
    /// heap keeps the high half of its head's stamp in a table apart).
    pub(crate) fn peek_due(&self) -> Option<i64> {
        match (self.heap.peek_due(), self.lane.first()) {
            (Some(h), Some((l, _))) => Some(h.min(l)),
            (h, l) => h.or(l.map(|(due, _)| due)),
        }
    }

    /// The due times of the heap's tasks due at or before `upto`, in no
    /// order, into the front of `out`: how many, or `None` if more than
    /// `out` holds (`IndexedHeap::dues_through`). The ready lane's tasks
    /// are due on arrival and started before any wait, so they are not
    /// among them.
    pub(crate) fn dues_through(&self, upto: i64, out: &mut [i64]) -> Option<usize> {
        self.heap.dues_through(upto, out)
    }

    /// Take out the earliest task if it is due by `now`, to start it at
    /// once. A shrink of the heap this makes due waits for
    /// [`shrink_heap`](Self::shrink_heap), after the start. Runs no user
    /// code.
    pub(crate) fn pop_due(&mut self, now: i64) -> Option<PoolEntry<K>> {
        let Some(lane) = self.lane.first().filter(|&(due, _)| due <= now) else {
            return self.heap.pop_due_unshrunk(now);
        };
        match (self.heap.peek_stamp(), Some(lane)) {
            (Some(h), Some(l)) if h < l => self.heap.pop_due_unshrunk(now),
            (_, Some(_)) => Some(self.lane.take(self.lane.base)),
            _ => self.heap.pop_due_unshrunk(now),
        }
    }

    /// True if the heap's tables are sparse enough to shrink: a start left
    /// the shrink for [`shrink_heap`](Self::shrink_heap).
    pub(crate) fn heap_sparse(&self) -> bool {
        self.heap.sparse()
    }

    /// Shrink the heap's tables if they are sparse (`heap/shrink.rs`); the
    /// old ones come out with [`take_retired`](Self::take_retired).
    pub(crate) fn shrink_heap(&mut self) {
        self.heap.maybe_shrink();
    }

    /// Where `key` is in the lane, with the heap's probe for it.
    #[inline(always)]
    fn probe<Q: ?Sized + Lookup<K>>(&self, key: &Q) -> (Probe, Option<u64>) {
        let probe = self.heap.probe(key);
        // An empty lane (the common case) is not searched at all.
        let in_lane = (!probe.found() && self.lane.live > 0)
            .then(|| self.lane.find(spread(&probe), key))
            .flatten();
        (probe, in_lane)
    }

    /// Due time and stamp of `key`'s pending task.
    pub(crate) fn get<Q: ?Sized + Lookup<K>>(&self, key: &Q) -> Option<(i64, u64)> {
        match self.probe(key) {
            (_, Some(pos)) => Some((self.lane.at(pos).due, self.lane.at(pos).seq)),
            (probe, None) if probe.found() => self.heap.get_equivalent(key),
            (probe, None) => {
                let (hold, i) = self.find_held(spread(&probe), key)?;
                let entry = &hold.waiting[i].1;
                Some((entry.due, entry.seq))
            }
        }
    }

    /// `look` at the due time and the task of `key`'s pending task.
    pub(crate) fn inspect<Q: ?Sized + Lookup<K>, R>(
        &self,
        key: &Q,
        look: impl FnOnce(i64, &Task) -> R,
    ) -> Option<R> {
        match self.probe(key) {
            (_, Some(pos)) => Some(look(self.lane.at(pos).due, &self.lane.at(pos).value)),
            (probe, None) if probe.found() => {
                let (due, task) = self.heap.get_value_equivalent(key)?;
                Some(look(due, task))
            }
            (probe, None) => {
                let (hold, i) = self.find_held(spread(&probe), key)?;
                let entry = &hold.waiting[i].1;
                Some(look(entry.due, &entry.value))
            }
        }
    }

    /// True if `key` has a pending task.
    pub(crate) fn contains_key<Q: ?Sized + Lookup<K>>(&self, key: &Q) -> bool {
        self.get(key).is_some()
    }

    /// Admit a task (step 6): replace `key`'s pending task, or add a new one
    /// if fewer than `limit` are pending. The lane takes a new key due by
    /// `now` that keeps its order; everything else goes into the heap.
    /// Gives the key and task back at the limit.
    #[inline]
    pub(crate) fn try_insert(
        &mut self,
        key: TaskKey<K>,
        due: i64,
        task: Task,
        limit: usize,
        now: i64,
    ) -> Result<Inserted<TaskKey<K>, Task>, (TaskKey<K>, Task)> {
        let (probe, in_lane) = self.probe(&key);
        if let Some(pos) = in_lane {
            return Ok(self.replace_in_lane(probe, pos, key, due, task));
        }
        if let Some(old) = self.take_held_probed(&probe, &key) {
            return Ok(self.replaced_by(probe, old, key, due, task));
        }
        // The records bound what the holds have (a task started from one
        // leaves its record behind): counted exactly only near the limit.
        let others = self.heap.len() + self.lane.live;
        let held = match others + self.held.len() < limit {
            true => self.held.len(),
            false => self.held_len(),
        };
        let fits = others + held < limit;
        if !probe.found() && fits && due <= now && self.lane.keeps_order(due) {
            let seq = self.heap.take_seq();
            let entry = Entry {
                key,
                due,
                seq,
                value: task,
            };
            self.lane.push(spread(&probe), entry);
            return Ok(Inserted::New { seq });
        }
        let heap_limit = limit.saturating_sub(self.lane.live + held);
        self.heap
            .try_insert_probed(probe, key, due, task, heap_limit)
    }

    /// `key`'s task out of the hold it waits in, if the heap does not have
    /// it (`probe`) and a hold may (there are records).
    #[inline]
    fn take_held_probed<Q: ?Sized + Lookup<K>>(
        &mut self,
        probe: &Probe,
        key: &Q,
    ) -> Option<PoolEntry<K>> {
        if probe.found() || self.held.is_empty() {
            return None;
        }
        self.take_held(spread(probe), key, None)
    }

    /// Insert or replace, as the heap does, for tasks put back by a worker.
    pub(crate) fn insert(
        &mut self,
        key: TaskKey<K>,
        due: i64,
        task: Task,
    ) -> Inserted<TaskKey<K>, Task> {
        match self.probe(&key) {
            (probe, Some(pos)) => self.replace_in_lane(probe, pos, key, due, task),
            (probe, None) => {
                if let Some(old) = self.take_held_probed(&probe, &key) {
                    return self.replaced_by(probe, old, key, due, task);
                }
                let put = self
                    .heap
                    .try_insert_probed(probe, key, due, task, usize::MAX);
                put.unwrap_or_else(|_| unreachable!("no limit"))
            }
        }
    }

    /// Replace the lane entry at `pos` by a task due at `due`, which goes
    /// into the heap (it would not keep the lane's order in general).
    /// `probe` is the heap's for `key`, taken before anything changed, so
    /// no user code runs once the lane entry is out.
    fn replace_in_lane(
        &mut self,
        probe: Probe,
        pos: u64,
        key: TaskKey<K>,
        due: i64,
        task: Task,
    ) -> Inserted<TaskKey<K>, Task> {
        let old = self.lane.take(pos);
        self.replaced_by(probe, old, key, due, task)
    }

    /// Put a task due at `due` into the heap in place of `old`, an entry
    /// already taken out of the lane or a hold. `probe` is the heap's for
    /// `key`, which did not have it.
    fn replaced_by(
        &mut self,
        probe: Probe,
        old: PoolEntry<K>,
        key: TaskKey<K>,
        due: i64,
        task: Task,
    ) -> Inserted<TaskKey<K>, Task> {
        let put = self
            .heap
            .try_insert_probed(probe, key, due, task, usize::MAX);
        let Ok(Inserted::New { seq }) = put else {
            unreachable!("a key in the lane or a hold is not in the heap")
        };
        Inserted::Replaced {
            seq,
            old_due: old.due,
            old_seq: old.seq,
            old: old.value,
            key: old.key,
        }
    }

    /// Move `key`'s pending task to `due`, keeping its task and stamp; its
    /// old due time, or `None` if nothing is pending under it. A running
    /// periodic task's stand-in (due [`NEVER`]) is not pending and stays.
    /// The key is looked up once.
    pub(crate) fn reschedule<Q: ?Sized + Lookup<K>>(&mut self, key: &Q, due: i64) -> Option<i64> {
        let mut entry = match self.probe(key) {
            (_, Some(pos)) => self.lane.take(pos),
            // A stand-in is never due, so never in the lane or a hold.
            (probe, None) if probe.found() => {
                self.heap.due_probed(&probe).filter(|&d| d != NEVER)?;
                return self.heap.reschedule_probed(probe, due);
            }
            (probe, None) => self.take_held_probed(&probe, key)?,
        };
        let old = entry.due;
        entry.due = due;
        if let Err(entry) = self.heap.restore(entry) {
            debug_assert!(false, "a key in the lane or a hold is not in the heap");
            drop(entry);
        }
        Some(old)
    }

    /// Put back a task taken out earlier (held for its busy key), keeping its
    /// stamp; gives it back if its key is pending again.
    pub(crate) fn restore(&mut self, entry: PoolEntry<K>) -> Result<(), PoolEntry<K>> {
        let (probe, in_lane) = self.probe(&entry.key);
        let held = || self.find_held(spread(&probe), &entry.key).is_some();
        if in_lane.is_some() || (!probe.found() && held()) {
            return Err(entry);
        }
        self.heap.restore(entry)
    }

    /// Take out `key`'s pending task.
    pub(crate) fn remove<Q: ?Sized + Lookup<K>>(&mut self, key: &Q) -> Option<PoolEntry<K>> {
        match self.probe(key) {
            (_, Some(pos)) => Some(self.lane.take(pos)),
            (probe, None) => match self.take_held_probed(&probe, key) {
                Some(entry) => Some(entry),
                None => self.heap.remove_probed(probe),
            },
        }
    }

    /// Take out `key`'s pending task only if its stamp is `seq`.
    pub(crate) fn remove_seq<Q: ?Sized + Lookup<K>>(
        &mut self,
        key: &Q,
        seq: u64,
    ) -> Option<PoolEntry<K>> {
        match self.probe(key) {
            (_, Some(pos)) if self.lane.at(pos).seq == seq => Some(self.lane.take(pos)),
            (_, Some(_)) => None,
            (probe, None) if probe.found() || self.held.is_empty() => {
                self.heap.remove_seq(key, seq)
            }
            (probe, None) => self.take_held(spread(&probe), key, Some(seq)),
        }
    }

    /// Take out every task `pred` picks, in no particular order.
    pub(crate) fn remove_where(
        &mut self,
        mut pred: impl FnMut(&Task) -> bool,
    ) -> Vec<PoolEntry<K>> {
        let picked: Vec<u64> = (self.lane.queue.iter().zip(self.lane.base..))
            .filter(|(filed, _)| filed.as_ref().is_some_and(|(_, e)| pred(&e.value)))
            .map(|(_, pos)| pos)
            .collect();
        let mut out = self.heap.remove_where(&mut pred);
        out.extend(picked.into_iter().map(|pos| self.lane.take(pos)));
        for mut hold in held_by(&self.holds, &self.held) {
            let waiting = std::mem::take(&mut hold.waiting);
            for (hash, e) in waiting {
                match pred(&e.value) {
                    true => out.push(e),
                    false => hold.waiting.push_back((hash, e)),
                }
            }
        }
        out
    }

    /// Take out every pending task, in (due, stamp) order.
    pub(crate) fn drain(&mut self) -> Vec<PoolEntry<K>> {
        let mut out = self.heap.drain();
        let held = self.held_len() > 0;
        for mut hold in held_by(&self.holds, &self.held) {
            out.extend(hold.waiting.drain(..).map(|(_, e)| e));
        }
        self.held.clear();
        self.held_filter = 0;
        if self.lane.live > 0 || held {
            out.extend(self.lane.drain());
            out.sort_by_key(|e| (e.due, e.seq));
        }
        out
    }

    /// Tasks in the heap (its slots are numbered `0..heap_len()`).
    pub(crate) fn heap_len(&self) -> usize {
        self.heap.len()
    }

    /// The key and task in heap slot `slot`, for a walk in chunks
    /// (`IndexedHeap::slot_entry`).
    pub(crate) fn slot_entry(&self, slot: usize) -> Option<(&TaskKey<K>, &Task)> {
        self.heap.slot_entry(slot)
    }

    /// Up to `n` lane entries from absolute position `from` on (from the
    /// front if it has moved past `from`), and where the next chunk starts
    /// (`None`: this one reached the end). Entries only leave the lane (to
    /// start, or into the heap) or join it at the end, so a walk in chunks
    /// misses no entry present throughout, and one that moves into the heap
    /// before the walk reaches it is found by a heap walk begun after it.
    pub(crate) fn lane_chunk(&self, from: u64, n: usize) -> (Vec<&PoolEntry<K>>, Option<u64>) {
        let lane = &self.lane;
        let start = from.max(lane.base);
        let skip = (start - lane.base) as usize;
        let chunk = lane.queue.iter().skip(skip).take(n);
        let entries: Vec<_> = chunk.flatten().map(|(_, e)| e).collect();
        let end = start + n as u64;
        let more = end < lane.base + lane.queue.len() as u64;
        (entries, more.then_some(end))
    }

    /// Buffers given up since the last call, to free outside the lock.
    pub(crate) fn take_retired(&mut self) -> Given<K> {
        let lane = &mut self.lane;
        let emptied = lane.live == 0 && lane.queue.capacity() >= SHRINK_AT;
        Given {
            heap: self.heap.take_retired(),
            lane: emptied.then(|| {
                lane.base += lane.queue.len() as u64;
                lane.dead = 0;
                (
                    std::mem::take(&mut lane.queue),
                    std::mem::take(&mut lane.index),
                )
            }),
        }
    }

    /// Check the heap's invariants and the lane's: sorted, live count and
    /// index agree, a live front.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) -> Result<(), String> {
        self.heap.check_invariants()?;
        let live: Vec<_> = self.lane.queue.iter().flatten().collect();
        let lane = &self.lane;
        let indexed = lane
            .index
            .iter()
            .filter(|(_, pos)| lane.live_at(*pos).is_some());
        if live.len() != lane.live || indexed.count() != lane.live {
            return Err("lane count, queue and index disagree".into());
        }
        if lane.index.len() != lane.live + lane.dead {
            return Err("the lane's dead index entries are miscounted".into());
        }
        let mut positions: Vec<u64> = lane.index.iter().map(|&(_, pos)| pos).collect();
        positions.sort_unstable();
        if positions.windows(2).any(|w| w[0] == w[1]) {
            return Err("a lane position indexed twice".into());
        }
        if live
            .windows(2)
            .any(|w| (w[0].1.due, w[0].1.seq) > (w[1].1.due, w[1].1.seq))
        {
            return Err("lane out of order".into());
        }
        if matches!(self.lane.queue.front(), Some(None)) {
            return Err("a hole at the lane's front".into());
        }
        self.check_held_records()
    }
}

mod held;
mod lane;
#[cfg(test)]
mod tests;
