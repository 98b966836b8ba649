//! Holds: each worker's few due tasks, taken out of the ready lane in one
//! round of the state lock and started one by one under the hold's own
//! lock, and the worker's running slot.
//!
//! A burst of due tasks otherwise costs the workers one round of the state
//! lock per start, the lock the scheduling calls take per task too: that
//! one lock bounded the burst. A worker that starts
//! a task from a long lane takes a few more due ones into its hold in the
//! same critical section (step 4b of `docs/protocol.md`).
//!
//! # Ground rules
//!
//! - A task in a hold is pending, as in the heap: cancel, replace,
//!   reschedule, `due_of`, `shutdown_now`, capacity and settling find it
//!   (through `Pending`, which keeps a record of what went where) and
//!   remove it under the hold's lock; until its worker takes it out under
//!   that lock to run it at once, it has not started.
//! - Only plain one-shot tasks go into a hold (periodic tasks and exclusive
//!   keys need the state lock when they start), and only from the lane's
//!   front while it holds a backlog, in the order a start would take them.
//! - Lock order: the state lock, then a hold's. The owner takes its own
//!   hold's lock without the state lock; everyone else takes a hold's lock
//!   only while holding the state lock.
//! - No task waits behind a running one: a worker whose own hold is empty
//!   takes the earliest due task, the front of another's hold included
//!   (with the rest of that hold's first half: a *take-over*), and a fill
//!   notifies the leader, which then finds held work due and passes the
//!   lead on as for any due task.
//! - The running slot (the key of the task the worker started last, see
//!   `worker.rs`) lives here so that a start from the hold records it in
//!   the same critical section that takes the task out.

use super::task::{Lookup, PoolEntry, TaskKey};
use crate::sync::{Mutex, MutexGuard};
use std::collections::VecDeque;

/// Most tasks a worker takes out of the lane in one round of the state
/// lock: the one it starts and up to fifteen into its hold.
pub(crate) const HOLD_MAX: usize = 16;

/// A worker's hold and running slot, on cache lines of its own: holds sit
/// side by side in one slice, and a hold is locked and written at every
/// start its worker makes from it; sharing a line with the next worker's
/// hold, each start missed the cache (`perf` of a batch burst: about a
/// seventh of all samples on the hold's lock and length). 128 bytes, as
/// crossbeam's `CachePadded` on x86-64, whose prefetcher pulls lines in
/// pairs.
#[repr(align(128))]
pub(crate) struct Hold<K>(Mutex<Held<K>>);

/// What a hold's lock guards.
pub(crate) struct Held<K> {
    /// Due tasks taken out of the lane for this worker, in (due, stamp)
    /// order, each with the lane's hash of its key; pending.
    pub(crate) waiting: VecDeque<(u64, PoolEntry<K>)>,
    /// The key of the task this worker started last, until its next start
    /// or the settling of that run takes it back out.
    pub(crate) running: Option<TaskKey<K>>,
    /// Tasks this worker started from its hold (`State::started` counts
    /// the starts made under the state lock).
    pub(crate) started: u64,
}

impl<K> Hold<K> {
    /// An empty hold.
    pub(crate) fn new() -> Self {
        Hold(Mutex::new(Held {
            waiting: VecDeque::new(),
            running: None,
            started: 0,
        }))
    }

    /// Lock it (see the lock order above).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Held<K>> {
        self.0.lock()
    }
}

impl<K: Eq> Held<K> {
    /// Where the task stamped `seq` under `key` waits, if it still does.
    /// Runs the key's `Eq`.
    pub(crate) fn position<Q: ?Sized + Lookup<K>>(
        &self,
        key: &Q,
        seq: Option<u64>,
    ) -> Option<usize> {
        self.waiting
            .iter()
            .position(|(_, e)| seq.is_none_or(|s| e.seq == s) && key.equivalent(&e.key))
    }
}
