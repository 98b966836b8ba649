//! The keyed core: a thread-safe delayed-task scheduler driven by its owner.
//!
//! # Ground rules
//!
//! - One lock (`state`) guards the heap, the capacity and the stop latch.
//! - User code never runs under it: callbacks run after [`Scheduler::run_due`]
//!   released it, and replaced or cancelled closures are dropped after the
//!   operation that removed them released it.
//! - `wake` is notified, under the lock, whenever the earliest due time
//!   changes or a stop is requested; only [`Scheduler::run`] waits on it.

use crate::heap::{IndexedHeap, Inserted, MAX_LEN};
use crate::sync::{Condvar, Mutex};
use crate::Error;
use std::fmt;
use std::hash::Hash;
use std::time::Duration;

/// A boxed callback.
type Task = Box<dyn FnOnce() + Send + 'static>;

/// What [`Scheduler::schedule`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheduled {
    /// The key was not pending; a new task was added.
    Inserted,
    /// The key was pending; its due time and callback were replaced atomically.
    Replaced,
}

/// State behind the scheduler's lock.
struct State<K> {
    /// Pending tasks, one per key.
    heap: IndexedHeap<K, Task>,
    /// Most keys that may be pending at once.
    capacity: usize,
    /// Set by [`Scheduler::stop`], consumed by [`Scheduler::run`].
    stop: bool,
}

/// A keyed delayed-task scheduler with manual drive.
///
/// At most one task is pending per key; scheduling a pending key replaces it.
/// Due times are plain `i64`s in units the caller chooses. Nothing runs until
/// the owner calls [`run_due`](Self::run_due) (or [`run`](Self::run)).
///
/// # Examples
///
/// The worked example of the design: a replaced key moves its single entry.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use timerpool::Scheduler;
///
/// let s = Scheduler::new(16).unwrap();
/// let log = Arc::new(Mutex::new(Vec::new()));
/// for (key, due) in [("a", 10), ("b", 5), ("a", 3)] {
///     let log = log.clone();
///     s.schedule(key, due, move || log.lock().unwrap().push(key)).unwrap();
/// }
/// assert_eq!(s.next(), Some(3));
/// assert_eq!(s.run_due(4), 1);
/// assert!(s.cancel(&"b"));
/// assert_eq!(s.run_due(100), 0);
/// assert!(!s.cancel(&"b"));
/// assert_eq!(*log.lock().unwrap(), vec!["a"]);
/// ```
pub struct Scheduler<K> {
    /// Heap, capacity and stop latch.
    state: Mutex<State<K>>,
    /// Wakes [`run`](Self::run) when the head changes or a stop is requested.
    wake: Condvar,
}

impl<K> fmt::Debug for Scheduler<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.state.lock();
        f.debug_struct("Scheduler")
            .field("pending", &st.heap.len())
            .field("capacity", &st.capacity)
            .finish()
    }
}

impl<K: Ord + Hash + Clone + Send + 'static> Scheduler<K> {
    /// A scheduler holding at most `capacity` pending keys.
    ///
    /// # Errors
    ///
    /// [`Error::ZeroCapacity`] for 0, [`Error::CapacityTooLarge`] above
    /// `u32::MAX`.
    ///
    /// ```
    /// use timerpool::{Error, Scheduler};
    /// assert_eq!(Scheduler::<u64>::new(0).unwrap_err(), Error::ZeroCapacity);
    /// ```
    pub fn new(capacity: usize) -> Result<Self, Error> {
        if capacity == 0 {
            return Err(Error::ZeroCapacity);
        }
        if capacity > MAX_LEN {
            return Err(Error::CapacityTooLarge {
                requested: capacity,
                max: MAX_LEN,
            });
        }
        Ok(Scheduler {
            state: Mutex::new(State {
                heap: IndexedHeap::new(),
                capacity,
                stop: false,
            }),
            wake: Condvar::new(),
        })
    }

    /// Schedule `task` under `key` at `due`, replacing the pending task of
    /// `key` (due time and callback, in one step) if there is one.
    ///
    /// A replaced callback is dropped unrun, after the lock is released.
    ///
    /// # Errors
    ///
    /// [`Error::CapacityReached`] if `key` is new and `capacity` keys are
    /// pending; nothing changes and `task` is dropped.
    pub fn schedule<F>(&self, key: K, due: i64, task: F) -> Result<Scheduled, Error>
    where
        F: FnOnce() + Send + 'static,
    {
        let task: Task = Box::new(task);
        let mut st = self.state.lock();
        let head = st.heap.peek_due();
        let capacity = st.capacity;
        let result = st.heap.try_insert(key, due, task, capacity);
        if st.heap.peek_due() != head {
            self.wake.notify_all();
        }
        drop(st);
        match result {
            Ok(Inserted::New { .. }) => Ok(Scheduled::Inserted),
            Ok(Inserted::Replaced { old, .. }) => {
                drop(old);
                Ok(Scheduled::Replaced)
            }
            Err((_key, task)) => {
                drop(task);
                Err(Error::CapacityReached { capacity })
            }
        }
    }

    /// Cancel `key`'s pending task. True iff it was pending; it will then never
    /// run. A task already claimed by [`run_due`](Self::run_due) cannot be
    /// stopped: cancel returns false.
    pub fn cancel(&self, key: &K) -> bool {
        let mut st = self.state.lock();
        let head = st.heap.peek_due();
        let removed = st.heap.remove(key);
        if st.heap.peek_due() != head {
            self.wake.notify_all();
        }
        let retired = st.heap.take_retired();
        drop(st);
        // Freed outside the lock, as is the removed closure.
        drop(retired);
        removed.is_some()
    }

    /// The earliest pending due time, in O(1).
    pub fn next(&self) -> Option<i64> {
        self.state.lock().heap.peek_due()
    }

    /// Number of pending tasks.
    pub fn len(&self) -> usize {
        self.state.lock().heap.len()
    }

    /// True when nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Claim every task with `due <= now` in one locked step, then run them
    /// outside the lock ordered by due time, then key. Returns how many ran.
    ///
    /// Callbacks may call `schedule` and `cancel` on this scheduler; what they
    /// schedule is not part of this snapshot even if already due.
    ///
    /// # Panics
    ///
    /// A panicking callback propagates to the caller; the rest of the
    /// snapshot is dropped unrun (each closure exactly once) and the scheduler
    /// stays usable.
    pub fn run_due(&self, now: i64) -> usize {
        let mut batch = Vec::new();
        let retired = {
            let mut st = self.state.lock();
            while let Some(e) = st.heap.pop_due(now) {
                batch.push(e);
            }
            st.heap.take_retired()
        };
        drop(retired);
        batch.sort_unstable_by(|a, b| (a.due, &a.key).cmp(&(b.due, &b.key)));
        let n = batch.len();
        for e in batch {
            (e.value)();
        }
        n
    }

    /// Drive the scheduler on this thread until [`stop`](Self::stop):
    /// run what is due, then sleep until the next due time or until a
    /// schedule or cancel changes the earliest task.
    ///
    /// `clock` reads the current time in the scheduler's units and is called
    /// under the scheduler's lock, so it must not call into the scheduler.
    /// `unit` is how long one unit lasts in real time: the loop sleeps
    /// `(due - now) * unit`, then re-reads the clock, so a clock that is not
    /// real time (a test's counter) is re-read at least that often.
    ///
    /// # Errors
    ///
    /// [`Error::ZeroTimeUnit`] if `unit` is zero (the loop would busy-poll).
    ///
    /// # Panics
    ///
    /// A panicking callback propagates out of `run`, as from `run_due`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::{Duration, Instant};
    /// use timerpool::Scheduler;
    ///
    /// let s = Arc::new(Scheduler::<&str>::new(8).unwrap());
    /// let start = Instant::now();
    /// let ms = move || start.elapsed().as_millis() as i64;
    /// let stopper = s.clone();
    /// s.schedule("bye", 5, move || stopper.stop()).unwrap();
    /// s.run(ms, Duration::from_millis(1)).unwrap();
    /// assert!(start.elapsed() >= Duration::from_millis(5));
    /// ```
    pub fn run(&self, clock: impl Fn() -> i64, unit: Duration) -> Result<(), Error> {
        if unit.is_zero() {
            return Err(Error::ZeroTimeUnit);
        }
        let unit_ns = unit.as_nanos();
        let mut st = self.state.lock();
        loop {
            if st.stop {
                st.stop = false;
                return Ok(());
            }
            let now = clock();
            match st.heap.peek_due() {
                Some(due) if due <= now => {
                    drop(st);
                    self.run_due(now);
                    st = self.state.lock();
                }
                Some(due) => {
                    let ticks = (due as i128 - now as i128) as u128;
                    let ns = ticks.saturating_mul(unit_ns).min(u64::MAX as u128) as u64;
                    self.wake.wait_for(&mut st, Duration::from_nanos(ns));
                }
                None => self.wake.wait(&mut st),
            }
        }
    }

    /// Make the running [`run`](Self::run) return after its current step (or
    /// the next call to `run` return at once, if none is running).
    pub fn stop(&self) {
        let mut st = self.state.lock();
        st.stop = true;
        self.wake.notify_all();
    }

    /// Check the heap and index invariants (for tests).
    ///
    /// # Errors
    ///
    /// A description of the first broken invariant.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.state.lock().heap.check_invariants()
    }
}
