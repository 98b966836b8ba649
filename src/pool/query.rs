//! Questions about keys: which are running, and (with `cancel.rs`) what a
//! cancel found.
//!
//! # Ground rules
//!
//! - The running keys are the workers' running slots, one per worker in
//!   its hold (`hold.rs`), kept by the workers' own critical sections
//!   (`worker.rs`); a query reads them under the state lock (and each
//!   hold's, in the lock order) and clones nothing but what it returns.

use super::outcome::Abandon;
use super::task::{Keyed, TaskKey};
use super::TimerPool;
use crate::contain::drop_quietly;
use hashbrown::Equivalent;
use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::Hash;

impl<K: Hash + Eq + Clone + Send + 'static> TimerPool<K> {
    /// The keys of the keyed tasks running now (periodic runs included),
    /// each cloned under the pool's lock, in no particular order. A key
    /// counts as running from the moment its worker starts the task until
    /// the worker's next step after the run (it may still be listed for an
    /// instant after the task's outcome was delivered); after
    /// [`settle`](Self::settle) returns, none is.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    ///
    /// let pool = TimerPool::<&str>::builder().workers(1).build()?;
    /// let (tell, started) = mpsc::channel();
    /// let (release, wait) = mpsc::channel::<()>();
    /// pool.schedule("export", Duration::ZERO, move || {
    ///     tell.send(()).unwrap();
    ///     let _ = wait.recv();
    /// })?;
    /// started.recv().unwrap();
    /// assert_eq!(pool.running_keys(), vec!["export"]);
    /// assert!(pool.is_running(&"export"));
    /// drop(release);
    /// pool.settle(Duration::from_secs(10))?;
    /// assert!(!pool.is_running(&"export"));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn running_keys(&self) -> Vec<K> {
        self.shared.running_keys()
    }

    /// True while a task under `key` runs (as
    /// [`running_keys`](Self::running_keys) counts it). Reads one slot per
    /// worker under the lock; clones nothing. A key may be running and
    /// pending at once (its next task waits, or a periodic task's run).
    /// `key` may be any borrowed form of the key type (`&str` for `String`
    /// keys), as for [`cancel`](Self::cancel).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<&str>::builder().workers(1).build()?;
    /// pool.schedule("later", Duration::from_secs(60), || ())?;
    /// assert!(!pool.is_running(&"later"), "pending, not running");
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn is_running<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        let st = self.shared.state.lock();
        self.shared.any_running(&st, |k| Keyed(key).equivalent(k))
    }
}

/// What [`TimerPool::cancel_result`] found under a key.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::{CancelResult, TimerPool};
///
/// let pool = TimerPool::<&str>::builder().workers(1).build()?;
/// pool.schedule("lease", Duration::from_secs(30), || ())?;
/// assert_eq!(pool.cancel_result(&"lease"), CancelResult::Cancelled);
/// assert_eq!(pool.cancel_result(&"lease"), CancelResult::Absent);
/// assert!(!CancelResult::Absent.cancelled());
/// # Ok::<(), timerpool::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CancelResult {
    /// A task was pending under the key; it will never run, its outcome is
    /// [`Outcome::Cancelled`](crate::Outcome::Cancelled). For a periodic
    /// task this includes one whose run is in progress: the run completes
    /// and no other follows.
    Cancelled,
    /// Nothing was pending, but a one-shot task under the key has started
    /// and runs now: too late to cancel it.
    Running,
    /// Nothing was pending or running under the key (never scheduled, or
    /// already finished, cancelled, replaced or shut down).
    Absent,
}

impl CancelResult {
    /// True for [`Cancelled`](Self::Cancelled), what
    /// [`TimerPool::cancel`] returns.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::CancelResult;
    /// assert!(CancelResult::Cancelled.cancelled());
    /// assert!(!CancelResult::Running.cancelled());
    /// ```
    pub fn cancelled(self) -> bool {
        self == CancelResult::Cancelled
    }
}

/// Keys copied per acquisition of the pool's lock by
/// [`TimerPool::pending_keys`].
const CHUNK: usize = 256;

impl<K: Hash + Eq + Clone + Send + 'static> TimerPool<K> {
    /// [`cancel`](Self::cancel), telling apart "was pending, now
    /// cancelled", "already started and running" and "no such key", all
    /// read in the one critical section that cancels. `key` as for
    /// [`cancel`](Self::cancel).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{CancelResult, TimerPool};
    /// let pool = TimerPool::<&str>::builder().workers(1).build()?;
    /// pool.schedule("lease", Duration::from_secs(60), || ())?;
    /// assert_eq!(pool.cancel_result(&"lease"), CancelResult::Cancelled);
    /// assert_eq!(pool.cancel_result(&"never-scheduled"), CancelResult::Absent);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    #[doc(alias = "try_remove")]
    pub fn cancel_result<Q>(&self, key: &Q) -> CancelResult
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        let key = Keyed(key);
        let _sending = self.shared.sending();
        let (removed, running, retired) = {
            let mut st = self.shared.state.lock();
            let removed = st.remove_pending(&key, None);
            if removed.is_some() {
                self.shared.notify_if_drained(&st);
            }
            let running = removed.is_none() && self.shared.any_running(&st, |k| key.equivalent(k));
            (removed, running, st.pending.take_retired())
        };
        drop(retired);
        match removed {
            Some(entry) => {
                self.shared
                    .abandon(&entry.key, entry.due, entry.value, Abandon::Cancelled);
                drop_quietly(entry.key);
                CancelResult::Cancelled
            }
            None if running => CancelResult::Running,
            None => CancelResult::Absent,
        }
    }

    /// The keys of the keyed tasks pending now (due or not, held for a busy
    /// key too; a periodic task while it waits for its next run), in no
    /// particular order, without holding the pool's lock for long: they
    /// are copied 256 at a time, the lock released between chunks, so
    /// scheduling, cancelling and starting go on meanwhile.
    ///
    /// What it promises under concurrent change: every key pending for the
    /// whole call is listed, once (the walk goes over the heap's slots from
    /// the last down, so a removal, which moves only the last slot, can
    /// repeat a key but never hide one, and repeats are removed); a key
    /// added, removed or started during the call may or may not be listed.
    /// One exception, with [`exclusive_keys`](crate::Builder::exclusive_keys):
    /// a task that falls due while its key is busy and is let go again
    /// within the call may be missed.
    /// It is one consistent snapshot only while the pool is quiet. Cost:
    /// O(n) clones and hashes, a lock per 256 keys.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    ///
    /// let pool = TimerPool::<u32>::builder().workers(1).build()?;
    /// for lease in 0..1000 {
    ///     pool.schedule_detached(lease, Duration::from_secs(60), || ())?;
    /// }
    /// pool.cancel(&7);
    /// let mut keys = pool.pending_keys();
    /// keys.sort();
    /// assert_eq!(keys.len(), 999);
    /// assert!(keys.binary_search(&7).is_err());
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn pending_keys(&self) -> Vec<K> {
        let mut keys = self.ready_lane_keys();
        let mut next = usize::MAX;
        loop {
            let st = self.shared.state.lock();
            if next == usize::MAX {
                // Held tasks are few (one per busy key): read first and last.
                keys.extend(st.exclusive.held_keys().filter_map(TaskKey::keyed).cloned());
                // So are the tasks in the workers' holds.
                st.pending
                    .each_held(|e| keys.extend(e.key.keyed().cloned()));
            }
            let from = next.min(st.pending.heap_len());
            let to = from.saturating_sub(CHUNK);
            for slot in (to..from).rev() {
                match st.pending.slot_entry(slot) {
                    Some((TaskKey::Keyed(k), task)) if !task.is_stand_in() => keys.push(k.clone()),
                    _ => {}
                }
            }
            if to == 0 {
                keys.extend(st.exclusive.held_keys().filter_map(TaskKey::keyed).cloned());
                break;
            }
            next = to;
        }
        without_repeats(keys)
    }
}

impl<K: Hash + Eq + Clone + Send + 'static> TimerPool<K> {
    /// The keys of the ready lane (tasks due on arrival, `pending.rs`), a
    /// lock per chunk; walked before the heap, since a lane entry that is
    /// replaced or rescheduled moves into the heap.
    fn ready_lane_keys(&self) -> Vec<K> {
        let mut keys = Vec::new();
        let mut from = Some(0);
        while let Some(pos) = from {
            let st = self.shared.state.lock();
            let (entries, next) = st.pending.lane_chunk(pos, CHUNK);
            let keyed = entries.into_iter().filter(|e| !e.value.is_stand_in());
            keys.extend(keyed.filter_map(|e| e.key.keyed()).cloned());
            from = next;
        }
        keys
    }
}

/// `keys` in their order, each once (the repeats are dropped).
fn without_repeats<K: Hash + Eq>(mut keys: Vec<K>) -> Vec<K> {
    let first: Vec<bool> = {
        let mut seen = HashSet::with_capacity(keys.len());
        keys.iter().map(|k| seen.insert(k)).collect()
    };
    let mut first = first.into_iter();
    keys.retain(|_| first.next().unwrap_or(true));
    keys
}
