//! A keyed delayed-task scheduler driven by its owner: a manual-drive
//! sibling of the pool over the same heap, not its base.
//!
//! # Ground rules
//!
//! - One lock (`state`) guards the heap, the capacity and the stop latch.
//! - The only user code that runs under it is the key's `Hash` and `Eq`
//!   (inside the heap) and the clock given to [`Scheduler::run`]. Callbacks
//!   run after [`Scheduler::run_due`] released it, and every closure and key
//!   the scheduler lets go of (replaced, cancelled, refused, run, or handed
//!   back by a replace) is dropped after the operation that let go of it
//!   released it, also when the key's `Hash` or `Eq` panicked.
//! - The key's `Ord` runs only in `run_due`, outside the lock.
//! - `wake` is notified, under the lock, whenever the earliest due time
//!   changes (a schedule, a cancel, or the claim in `run_due`) or a stop is
//!   requested; only [`Scheduler::run`] waits on it.

use crate::heap::{check_capacity, Entry, IndexedHeap, Inserted};
use crate::sync::{Condvar, Mutex};
use crate::Error;
use std::borrow::Borrow;
use std::fmt;
use std::hash::Hash;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::time::Duration;

/// A boxed callback.
type Task = Box<dyn FnOnce() + Send + 'static>;

/// What [`Scheduler::schedule`] did.
///
/// # Examples
///
/// ```
/// use timerpool::{Scheduled, Scheduler};
/// let s = Scheduler::new(8)?;
/// assert_eq!(s.schedule("k", 10, || ())?, Scheduled::Inserted);
/// assert_eq!(s.schedule("k", 20, || ())?, Scheduled::Replaced);
/// # Ok::<(), timerpool::Error>(())
/// ```
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
/// the owner calls [`run_due`](Self::run_due) (or [`run`](Self::run)), which
/// runs the due tasks ordered by due time, then key.
///
/// # Panics in user code
///
/// The scheduler never aborts the process and never loses a pending task
/// to a panic in user code:
///
/// - A panic in the key's `Hash` or `Eq` propagates from the call that ran
///   it ([`schedule`](Self::schedule), [`cancel`](Self::cancel)). That call
///   changed nothing; the closure and key it was given are dropped after
///   the lock is released.
/// - The key's `Ord` only orders tasks due at the same time within one
///   `run_due`. If it panics (or the sort finds it is not a total order),
///   that `run_due` runs its tasks in due-time order and, for equal due
///   times, in the order they were scheduled; the panic is reported by the
///   panic hook and goes no further. An inconsistent `Ord` that does not
///   panic leaves tasks with equal due times in an unspecified order. Either
///   way every claimed task runs.
/// - A panicking callback propagates out of `run_due`; see its `# Panics`.
/// - A panic while dropping a replaced, cancelled or refused closure, or a
///   key handed back, propagates after the operation took effect and after
///   everything else it let go of was dropped.
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

impl<K: Ord + Hash + Send + 'static> Scheduler<K> {
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
        Ok(Scheduler {
            state: Mutex::new(State {
                heap: IndexedHeap::new(),
                capacity: check_capacity(capacity)?,
                stop: false,
            }),
            wake: Condvar::new(),
        })
    }

    /// Schedule `task` under `key` at `due`, replacing the pending task of
    /// `key` (due time and callback, in one step) if there is one.
    ///
    /// A replaced callback is dropped unrun, after the lock is released, and
    /// so is `key` itself: the scheduler keeps the key it already held.
    ///
    /// # Errors
    ///
    /// [`Error::CapacityReached`] if `key` is new and `capacity` keys are
    /// pending; nothing changes and `task` and `key` are dropped.
    ///
    /// # Panics
    ///
    /// A panic in the key's `Hash` or `Eq` propagates; nothing changed, and
    /// `task` and `key` are dropped after the lock is released. A panic
    /// while dropping the replaced callback or `key` propagates after the
    /// replace took effect.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::{Error, Scheduler};
    /// let s = Scheduler::new(1)?;
    /// s.schedule(1u32, 100, || println!("due at 100"))?;
    /// assert_eq!(s.schedule(2, 50, || ()).unwrap_err(), Error::CapacityReached { capacity: 1 });
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    #[doc(alias = "insert", alias = "insert_at")]
    pub fn schedule<F>(&self, key: K, due: i64, task: F) -> Result<Scheduled, Error>
    where
        F: FnOnce() + Send + 'static,
    {
        let task: Task = Box::new(task);
        let mut st = self.state.lock();
        // The only user code of an insert: run it where a panic can be
        // caught, so that the key and closure are dropped after unlocking.
        let probe = match catch_unwind(AssertUnwindSafe(|| st.heap.probe(&key))) {
            Ok(probe) => probe,
            Err(panic) => {
                drop(st);
                drop_quietly(task);
                drop_quietly(key);
                resume_unwind(panic)
            }
        };
        let head = st.heap.peek_due();
        let capacity = st.capacity;
        let result = st.heap.try_insert_probed(probe, key, due, task, capacity);
        debug_assert!(st.heap.len() <= capacity, "more pending than capacity");
        if st.heap.peek_due() != head {
            self.wake.notify_all();
        }
        drop(st);
        match result {
            Ok(Inserted::New { .. }) => Ok(Scheduled::Inserted),
            Ok(Inserted::Replaced { old, key, .. }) => {
                drop_both(old, key);
                Ok(Scheduled::Replaced)
            }
            Err((key, task)) => {
                drop_both(task, key);
                Err(Error::CapacityReached { capacity })
            }
        }
    }

    /// Cancel `key`'s pending task. True iff it was pending; it will then never
    /// run. A task already claimed by [`run_due`](Self::run_due) cannot be
    /// stopped: cancel returns false.
    ///
    /// The cancelled closure and its key are dropped after the lock is
    /// released. `key` may be any borrowed form of the key type, as for
    /// `HashMap` (`&str` for `String` keys); the lookup allocates nothing.
    ///
    /// # Panics
    ///
    /// A panic in the key's `Hash` or `Eq` propagates; nothing changed. A
    /// panic while dropping the cancelled closure or its key propagates
    /// after the cancel took effect.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::Scheduler;
    /// let s = Scheduler::new(8)?;
    /// s.schedule("k", 10, || unreachable!("cancelled"))?;
    /// assert!(s.cancel(&"k"));
    /// assert_eq!(s.run_due(100), 0);
    ///
    /// let owned = Scheduler::new(8)?;
    /// owned.schedule(String::from("lease"), 10, || ())?;
    /// assert!(owned.cancel("lease"));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    #[doc(alias = "remove", alias = "abort")]
    pub fn cancel<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        let (removed, retired) = {
            let mut st = self.state.lock();
            let head = st.heap.peek_due();
            let removed = st.heap.remove(key);
            if st.heap.peek_due() != head {
                self.wake.notify_all();
            }
            (removed, st.heap.take_retired())
        };
        // Freed outside the lock, as is the removed entry.
        drop(retired);
        match removed {
            Some(entry) => {
                drop_both(entry.value, entry.key);
                true
            }
            None => false,
        }
    }

    /// Move `key`'s pending task to `due`, keeping its callback (a lease
    /// renewal, as tokio-util's `DelayQueue::reset`). True iff a task was
    /// pending under `key`. O(log n); `key` as for [`cancel`](Self::cancel).
    ///
    /// # Panics
    ///
    /// A panic in the key's `Hash` or `Eq` propagates; nothing changed.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::Scheduler;
    /// let s = Scheduler::new(8)?;
    /// s.schedule(String::from("lease"), 10, || ())?;
    /// assert!(s.reschedule("lease", 50));
    /// assert!(!s.reschedule("other", 50));
    /// assert_eq!((s.run_due(10), s.next()), (0, Some(50)));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    #[doc(alias = "reset")]
    pub fn reschedule<Q>(&self, key: &Q, due: i64) -> bool
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        let mut st = self.state.lock();
        let head = st.heap.peek_due();
        let moved = st.heap.reschedule(key, due).is_some();
        if st.heap.peek_due() != head {
            self.wake.notify_all();
        }
        moved
    }

    /// When `key`'s pending task is due; `None` when nothing is pending
    /// under it (never scheduled, or already claimed by
    /// [`run_due`](Self::run_due), or cancelled). `key` as for
    /// [`cancel`](Self::cancel).
    ///
    /// # Panics
    ///
    /// A panic in the key's `Hash` or `Eq` propagates.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::Scheduler;
    /// let s = Scheduler::new(8)?;
    /// s.schedule(String::from("lease"), 10, || ())?;
    /// assert_eq!(s.due_of("lease"), Some(10));
    /// assert_eq!(s.due_of("other"), None);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    #[doc(alias = "deadline")]
    pub fn due_of<Q>(&self, key: &Q) -> Option<i64>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        self.state.lock().heap.get(key).map(|(due, _)| due)
    }

    /// True if a task is pending under `key`; see [`due_of`](Self::due_of).
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::Scheduler;
    /// let s = Scheduler::new(8)?;
    /// s.schedule(String::from("lease"), 10, || ())?;
    /// assert!(s.is_pending("lease"));
    /// s.run_due(10);
    /// assert!(!s.is_pending("lease"));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn is_pending<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        self.due_of(key).is_some()
    }

    /// The earliest pending due time, in O(1).
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::Scheduler;
    /// let s = Scheduler::new(8)?;
    /// assert_eq!(s.next(), None);
    /// s.schedule("late", 30, || ())?;
    /// s.schedule("early", 10, || ())?;
    /// assert_eq!(s.next(), Some(10));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn next(&self) -> Option<i64> {
        self.state.lock().heap.peek_due()
    }

    /// Number of pending tasks.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::Scheduler;
    /// let s = Scheduler::new(8)?;
    /// s.schedule(1u8, 10, || ())?;
    /// s.schedule(1u8, 20, || ())?; // a replace
    /// assert_eq!(s.len(), 1);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.state.lock().heap.len()
    }

    /// True when nothing is pending.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::Scheduler;
    /// let s = Scheduler::<u8>::new(8)?;
    /// assert!(s.is_empty());
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Claim every task with `due <= now` in one locked step, then run them
    /// outside the lock ordered by due time, then key. Returns how many ran.
    ///
    /// Callbacks may call `schedule` and `cancel` on this scheduler; what they
    /// schedule is not part of this snapshot even if already due. Each key is
    /// dropped after its callback returned.
    ///
    /// # Panics
    ///
    /// A panicking callback (or a panic while dropping the key of a task
    /// that ran) propagates to the caller once the rest of the snapshot has
    /// been dropped unrun, each closure and key exactly once. Panics while
    /// dropping that rest are contained (the panic hook reports them), so
    /// the process never aborts, and the scheduler stays usable.
    ///
    /// A panic in the key's `Ord` does not propagate and costs no task its
    /// run: if ordering equal due times by key panics (or the sort finds
    /// the `Ord` is not a total order), this snapshot runs in due-time
    /// order, ties in the order they were scheduled. See
    /// [Panics in user code](Self#panics-in-user-code).
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::Scheduler;
    /// let s = Scheduler::new(8)?;
    /// for (k, due) in [(1u8, 5), (2, 15), (3, 10)] {
    ///     s.schedule(k, due, || ())?;
    /// }
    /// assert_eq!(s.run_due(10), 2); // 1 and 3
    /// assert_eq!(s.next(), Some(15));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn run_due(&self, now: i64) -> usize {
        let mut batch = Vec::new();
        let retired = {
            let mut st = self.state.lock();
            let head = st.heap.peek_due();
            // Popping runs no user code, so the claim is one step.
            while let Some(e) = st.heap.pop_due(now) {
                batch.push(e);
            }
            if st.heap.peek_due() != head {
                self.wake.notify_all();
            }
            st.heap.take_retired()
        };
        drop(retired);
        order_by_key(&mut batch);
        run_in_order(batch)
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
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::{Duration, Instant};
    /// use timerpool::Scheduler;
    /// let s = Arc::new(Scheduler::<u8>::new(8)?);
    /// let start = Instant::now();
    /// let driver = {
    ///     let s = s.clone();
    ///     std::thread::spawn(move || s.run(move || start.elapsed().as_millis() as i64, Duration::from_millis(1)))
    /// };
    /// s.stop(); // run returns, now or as soon as it starts
    /// driver.join().unwrap()?;
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn stop(&self) {
        let mut st = self.state.lock();
        st.stop = true;
        self.wake.notify_all();
    }

    /// Check the heap and index invariants under the lock.
    ///
    /// Test-only, so that it is no part of the public surface: the
    /// scheduler's own invariants are the heap's, which the heap's public
    /// [`IndexedHeap::check_invariants`] and its oracle tests cover, and
    /// what the scheduler adds (run order, drops, the lock) is observable
    /// through its public methods, which `tests/scheduler.rs` and
    /// `tests/oracle.rs` check. The unit tests below use it where only the
    /// heap's state can show a fault.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) -> Result<(), String> {
        self.state.lock().heap.check_invariants()
    }
}

/// Sort each run of equal due times by key. `batch` comes in claim order,
/// `(due, seq)`, so only ties need the key's `Ord`. A sort that panics
/// (a panicking `Ord`, or one the sort finds is not a total order) leaves a
/// permutation of its input: the claim order is then put back.
fn order_by_key<K: Ord>(batch: &mut [Entry<K, Task>]) {
    debug_assert!(
        batch
            .windows(2)
            .all(|w| (w[0].due, w[0].seq) < (w[1].due, w[1].seq)),
        "a claim comes out of the heap in (due, seq) order"
    );
    let sorted = catch_unwind(AssertUnwindSafe(|| {
        for ties in batch.chunk_by_mut(|a, b| a.due == b.due) {
            ties.sort_by(|a, b| a.key.cmp(&b.key));
        }
    }));
    if let Err(panic) = sorted {
        batch.sort_unstable_by_key(|e| (e.due, e.seq));
        drop_quietly(panic);
    }
}

/// Run each task of `batch` in order and drop its key; returns how many
/// ran. On the first panic, drop the rest quietly, then resume it.
fn run_in_order<K>(batch: Vec<Entry<K, Task>>) -> usize {
    let mut ran = 0;
    let mut rest = batch.into_iter();
    while let Some(Entry { key, value, .. }) = rest.next() {
        let outcome = match catch_unwind(AssertUnwindSafe(value)) {
            Ok(()) => {
                ran += 1;
                catch_unwind(AssertUnwindSafe(move || drop(key)))
            }
            Err(panic) => {
                drop_quietly(key);
                Err(panic)
            }
        };
        if let Err(panic) = outcome {
            for e in rest.by_ref() {
                drop_quietly(e.value);
                drop_quietly(e.key);
            }
            resume_unwind(panic);
        }
    }
    ran
}

/// Drop `value`, containing a panic in its drop (the panic hook has
/// reported it); a payload that panics when dropped is leaked.
fn drop_quietly<T>(value: T) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(move || drop(value))) {
        if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(panic))) {
            std::mem::forget(again);
        }
    }
}

/// Drop `first`, then `second`, each exactly once; a panic in either
/// propagates after both were dropped (the first, if both panic).
fn drop_both<A, B>(first: A, second: B) {
    let a = catch_unwind(AssertUnwindSafe(move || drop(first)));
    let b = catch_unwind(AssertUnwindSafe(move || drop(second)));
    match (a, b) {
        (Err(panic), b) => {
            if let Err(again) = b {
                drop_quietly(again);
            }
            resume_unwind(panic)
        }
        (Ok(()), Err(panic)) => resume_unwind(panic),
        (Ok(()), Ok(())) => {}
    }
}

#[cfg(test)]
mod tests;
