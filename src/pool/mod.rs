//! The pool: N workers, one leader at a time, one outcome per task. This
//! file is the façade ([`TimerPool`]); the rooms below it, floor by floor,
//! each import only from floors beneath:
//!
//! - `outcome.rs` (outcomes, timing, the slot a task delivers into),
//!   `time.rs` (the clock, the epoch, every time conversion), `fault.rs`
//!   (the loom models' fault list), `stats.rs` (counters);
//! - `periodic.rs` (policies; a periodic task between runs);
//! - `task.rs` (the task record: what a heap entry can be);
//! - `pending.rs` (the pending tasks: the heap, and the ready lane of tasks
//!   due on arrival beside it);
//! - `handoff.rs` (what travels through the channel; the lead token),
//!   `exclusive.rs` (busy and held keys), `builder.rs` (configuration);
//! - `shared.rs` (the engine's state and lock);
//! - the protocol's steps: `intake.rs` (6, 12), `cancel.rs` (7, 8),
//!   `leader.rs` (1-5), `worker.rs` (10, 11), and `broken.rs` (their broken
//!   twins for loom);
//! - `crew.rs` (the threads), `handle.rs` (what callers hold).
//!
//! The protocol is written down in `docs/protocol.md`.

mod broken;
mod builder;
mod cancel;
mod completions;
mod crew;
mod drain;
mod exclusive;
mod fault;
mod handle;
mod handoff;
mod intake;
mod leader;
mod outcome;
mod pending;
mod periodic;
mod query;
mod refused;
mod retry;
mod settle;
mod shared;
mod stats;
mod task;
mod time;
#[cfg(feature = "tracing")]
mod trace;
mod worker;

pub use builder::{Builder, MAX_SPIN, MAX_WORKERS};
pub use completions::{Completion, CompletionKind, CompletionReceiver};
pub use handle::{PeriodicHandle, TaskHandle};
pub use outcome::{Outcome, Timing};
pub use periodic::{MissedTicks, Next, OnPanic, Repeat};
pub use query::CancelResult;
pub use refused::Refused;
pub use retry::{Retried, Retry, RetryHandle};
pub use stats::{Lateness, Stats};
pub use time::Due;

use crate::contain::drop_quietly;
use crate::sync::Arc;
use crate::Error;
use crew::Crew;
use intake::{Arrival, Stamp};
use outcome::OutcomeSlot;
use periodic::{PeriodicCtl, PeriodicJob};
use shared::Shared;
use std::cell::OnceCell;
use std::fmt;
use std::hash::Hash;
use std::time::{Duration, Instant};
use task::{Detached, OneShot, Task, TaskKey};
use time::NEVER;

/// A pool of worker threads that runs keyed and keyless tasks at their due
/// time, never before, with exactly one [`Outcome`] per task.
///
/// One worker at a time leads: it alone sleeps until the earliest due time
/// (or until an earlier task preempts it); when work is due it passes the
/// lead on and starts the work, and every free worker takes the next due
/// task, one at a time, so no due task waits behind a running one while a
/// worker is free. A task is pending, cancellable and replaceable, until a
/// worker starts it. Scheduling a pending key replaces its task atomically.
///
/// The ways to add work (every due time is an [`Instant`] or a
/// [`Duration`](std::time::Duration) from now, see [`Due`]):
///
/// | | keyed (a pending key is replaced) | keyless |
/// | --- | --- | --- |
/// | one-shot, with a [`TaskHandle`] | [`schedule`](Self::schedule) | [`submit`](Self::submit) |
/// | one-shot, no handle | [`schedule_detached`](Self::schedule_detached) | [`submit_detached`](Self::submit_detached) |
/// | periodic ([`Repeat`]), with a [`PeriodicHandle`] | [`schedule_repeating`](Self::schedule_repeating) | [`submit_repeating`](Self::submit_repeating) |
/// | periodic, the closure picks its next delay ([`Next`]) | [`schedule_dynamic`](Self::schedule_dynamic) | [`submit_dynamic`](Self::submit_dynamic) |
/// | many one-shots under one lock | [`schedule_batch`](Self::schedule_batch), [`schedule_batch_detached`](Self::schedule_batch_detached) | |
/// | one-shot, run again after a backoff when it panics ([`Retry`]), with a [`RetryHandle`] | [`schedule_retrying`](Self::schedule_retrying) | [`submit_retrying`](Self::submit_retrying) |
/// | one-shot, the closure handed back if refused ([`Refused`]) | [`try_schedule`](Self::try_schedule), [`try_schedule_detached`](Self::try_schedule_detached) | [`try_submit`](Self::try_submit) |
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::{Outcome, TimerPool};
///
/// let pool = TimerPool::<&str>::builder().workers(2).build().unwrap();
/// let offer = pool
///     .schedule("trip-42", Duration::from_secs(15), || "re-dispatch")
///     .unwrap();
/// let moved = pool
///     .schedule("trip-42", Duration::from_millis(1), || "moved")
///     .unwrap();
/// assert_eq!(offer.wait(), Outcome::Replaced);
/// assert_eq!(moved.wait(), Outcome::Completed("moved"));
/// pool.shutdown();
/// ```
pub struct TimerPool<K> {
    /// The engine, shared with workers and handles.
    shared: Arc<Shared<K>>,
    /// The worker threads; dropping them stops the pool.
    crew: Crew,
}

impl<K> fmt::Debug for TimerPool<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.shared.state.lock();
        f.debug_struct("TimerPool")
            .field("workers", &self.crew.len())
            .field("pending", &st.pending())
            .field("mode", &st.mode)
            .finish()
    }
}

impl<K: Hash + Eq + Clone + Send + 'static> Builder<K> {
    /// Start the workers.
    ///
    /// # Errors
    ///
    /// [`Error::ZeroWorkers`], [`Error::TooManyWorkers`],
    /// [`Error::ZeroCapacity`] (of the pool or of its
    /// [`completions`](Builder::completions) channel), [`Error::CapacityTooLarge`],
    /// [`Error::InvalidThreadName`],
    /// [`Error::SpinTooLong`], [`Error::ZeroExpiry`], [`Error::ThreadStart`] if a
    /// start hook panicked, [`Error::TimeOutOfRange`] for an
    /// `expire_after` beyond about 292 years, or [`Error::Spawn`] if the
    /// operating system refused a thread (the ones already started are
    /// stopped).
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::{Error, TimerPool};
    /// let pool = TimerPool::<u64>::builder().workers(2).build()?;
    /// assert_eq!(pool.workers(), 2);
    /// let bad = TimerPool::<u64>::builder().thread_name("a\0b").build();
    /// assert_eq!(bad.unwrap_err(), Error::InvalidThreadName);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn build(mut self) -> Result<TimerPool<K>, Error> {
        let key_names = self.key_names();
        let observe = self.take_observe()?;
        let config = self.validate()?;
        let shared = Arc::new(Shared::new(config.clone(), key_names, observe));
        let crew = Crew::start(&shared, &config)?;
        Ok(TimerPool { shared, crew })
    }
}

impl<K: Hash + Eq + Clone + Send + 'static> TimerPool<K> {
    /// A builder with the defaults: `num_cpus::get()` workers, the system
    /// clock, capacity `u32::MAX`.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<String>::builder().workers(1).capacity(1000).build()?;
    /// # drop(pool);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn builder() -> Builder<K> {
        Builder::new()
    }

    /// A pool with the default settings.
    ///
    /// # Errors
    ///
    /// [`Error::Spawn`] if the operating system refused a thread.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u64>::new()?; // one worker per CPU
    /// assert!(pool.workers() >= 1);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn new() -> Result<Self, Error> {
        Self::builder().build()
    }

    /// Run `f` when `when` comes (never before) under `key`. A pending task
    /// under `key` is replaced atomically: its outcome becomes
    /// [`Outcome::Replaced`]. If `key`'s task is already running, this adds
    /// new pending work.
    ///
    /// # Errors
    ///
    /// [`Error::ShutDown`] after a shutdown, [`Error::CapacityReached`] for a
    /// new key at capacity, [`Error::TimeOutOfRange`] if the due time is more
    /// than about 292 years after the pool started (`Duration::MAX`, say). On
    /// error `f` is dropped and nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use timerpool::{Outcome, TimerPool};
    ///
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// let soon = pool.schedule(1, Duration::from_millis(5), || "after a delay")?;
    /// let at = pool.schedule(2, Instant::now(), || "at an instant")?;
    /// assert_eq!(soon.wait(), Outcome::Completed("after a delay"));
    /// assert_eq!(at.wait(), Outcome::Completed("at an instant"));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn schedule<F, T>(
        &self,
        key: K,
        when: impl Into<Due>,
        f: F,
    ) -> Result<TaskHandle<T, K>, Error>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.add_once(TaskKey::Keyed(key), when.into(), f)
    }

    /// Run `f` when `when` comes, without a key. Keyless tasks with equal due
    /// times run in submission order.
    ///
    /// # Errors
    ///
    /// As [`schedule`](Self::schedule).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TimerPool};
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// let first = pool.submit(Duration::from_millis(1), || 1)?;
    /// let second = pool.submit(Duration::from_millis(1), || 2)?;
    /// assert_eq!((first.wait(), second.wait()), (Outcome::Completed(1), Outcome::Completed(2)));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn submit<F, T>(&self, when: impl Into<Due>, f: F) -> Result<TaskHandle<T, K>, Error>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.add_once(self.shared.anon_key(), when.into(), f)
    }

    /// [`schedule`](Self::schedule) without a handle: for timeouts whose
    /// outcome nobody waits for. The task is replaced, cancelled and counted
    /// in [`stats`](Self::stats) like any other; skipping the handle saves
    /// its allocation and the outcome delivery.
    ///
    /// # Errors
    ///
    /// As [`schedule`](Self::schedule).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    ///
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// pool.schedule_detached(42, Duration::from_secs(15), || {
    ///     // re-dispatch trip 42
    /// })?;
    /// assert!(pool.cancel(&42));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn schedule_detached<F>(&self, key: K, when: impl Into<Due>, f: F) -> Result<(), Error>
    where
        F: FnOnce() + Send + 'static,
    {
        self.add_detached(TaskKey::Keyed(key), when.into(), f)
    }

    /// [`submit`](Self::submit) without a handle.
    ///
    /// # Errors
    ///
    /// As [`schedule`](Self::schedule).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// let (tx, rx) = mpsc::channel();
    /// pool.submit_detached(Duration::from_millis(1), move || tx.send("fired").unwrap())?;
    /// assert_eq!(rx.recv().unwrap(), "fired");
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn submit_detached<F>(&self, when: impl Into<Due>, f: F) -> Result<(), Error>
    where
        F: FnOnce() + Send + 'static,
    {
        self.add_detached(self.shared.anon_key(), when.into(), f)
    }

    /// Run `f` when `first` comes and then as `repeat` says, under `key`. A
    /// run never overlaps the previous run of the same task. Scheduling a
    /// pending key replaces its task, periodic or not; scheduling any task
    /// under the key of a periodic task stops it (outcome `Replaced`), even
    /// while it runs.
    ///
    /// # Errors
    ///
    /// As [`schedule`](Self::schedule), and [`Error::ZeroPeriod`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Clock, ManualClock, Outcome, Repeat, TimerPool};
    ///
    /// let clock = ManualClock::new();
    /// let pool = TimerPool::<&str>::builder().workers(1).clock(clock.clone()).build()?;
    /// let every_second = Repeat::fixed_rate(Duration::from_secs(1));
    /// let tick = pool.schedule_repeating("heartbeat", clock.now(), every_second, || {})?;
    /// while tick.runs() < 1 {
    ///     std::thread::yield_now();
    /// }
    /// assert!(tick.cancel());
    /// assert_eq!(tick.wait(), Outcome::Cancelled);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn schedule_repeating<F>(
        &self,
        key: K,
        first: impl Into<Due>,
        repeat: Repeat,
        f: F,
    ) -> Result<PeriodicHandle<K>, Error>
    where
        F: FnMut() + Send + 'static,
    {
        self.add_repeating(TaskKey::Keyed(key), first.into(), repeat, on_schedule(f))
    }

    /// Keyless [`schedule_repeating`](Self::schedule_repeating).
    ///
    /// # Errors
    ///
    /// As [`schedule_repeating`](Self::schedule_repeating).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{ManualClock, Repeat, TimerPool};
    /// let clock = ManualClock::new();
    /// let pool = TimerPool::<u64>::builder().workers(1).clock(clock.clone()).build()?;
    /// let h = pool.submit_repeating(Duration::from_secs(1), Repeat::fixed_rate(Duration::from_secs(1)), || {})?;
    /// pool.advance_in_steps(&clock, Duration::from_secs(3), 10, Duration::from_secs(10))?;
    /// assert_eq!(h.runs(), 3);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn submit_repeating<F>(
        &self,
        first: impl Into<Due>,
        repeat: Repeat,
        f: F,
    ) -> Result<PeriodicHandle<K>, Error>
    where
        F: FnMut() + Send + 'static,
    {
        self.add_repeating(self.shared.anon_key(), first.into(), repeat, on_schedule(f))
    }

    /// A periodic task whose closure picks when it runs next: after each
    /// run, `f` returns [`Next::After`] a delay (counted from the end of the
    /// run), [`Next::Stop`] (final outcome [`Outcome::Completed`]), or
    /// [`Next::OnSchedule`] to run as `repeat` says. Otherwise it is a
    /// periodic task like any other: one [`PeriodicHandle`], the same
    /// cancel, replace, panic policy and shutdown rules. `repeat` also says
    /// when it runs after a panic under [`OnPanic::Continue`] and after a
    /// run skipped as stale, neither of which returns a pick.
    ///
    /// # Errors
    ///
    /// As [`schedule_repeating`](Self::schedule_repeating).
    ///
    /// # Examples
    ///
    /// A retry with doubling delays that stops after its third try:
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Clock, ManualClock, Next, Outcome, Repeat, TimerPool};
    ///
    /// let clock = ManualClock::new();
    /// let pool = TimerPool::<&str>::builder().workers(1).clock(clock.clone()).build()?;
    /// let mut tries = 0u32;
    /// let retry = pool.schedule_dynamic(
    ///     "retry",
    ///     clock.now(),
    ///     Repeat::fixed_delay(Duration::from_secs(1)),
    ///     move || {
    ///         tries += 1;
    ///         match tries {
    ///             3 => Next::Stop,
    ///             n => Next::After(Duration::from_secs(1 << n)),
    ///         }
    ///     },
    /// )?;
    /// pool.advance_in_steps(&clock, Duration::from_secs(10), 10, Duration::from_secs(5))?;
    /// assert_eq!(retry.runs(), 3);
    /// assert_eq!(retry.wait(), Outcome::Completed(()));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn schedule_dynamic<F>(
        &self,
        key: K,
        first: impl Into<Due>,
        repeat: Repeat,
        f: F,
    ) -> Result<PeriodicHandle<K>, Error>
    where
        F: FnMut() -> Next + Send + 'static,
    {
        self.add_repeating(TaskKey::Keyed(key), first.into(), repeat, f)
    }

    /// Keyless [`schedule_dynamic`](Self::schedule_dynamic).
    ///
    /// # Errors
    ///
    /// As [`schedule_repeating`](Self::schedule_repeating).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{ManualClock, Next, Outcome, Repeat, TimerPool};
    /// let clock = ManualClock::new();
    /// let pool = TimerPool::<u64>::builder().workers(1).clock(clock.clone()).build()?;
    /// let mut left = 2;
    /// let h = pool.submit_dynamic(Duration::ZERO, Repeat::fixed_delay(Duration::from_secs(1)), move || {
    ///     left -= 1;
    ///     if left == 0 { Next::Stop } else { Next::After(Duration::from_secs(5)) }
    /// })?;
    /// pool.advance_in_steps(&clock, Duration::from_secs(10), 10, Duration::from_secs(10))?;
    /// assert_eq!(h.wait(), Outcome::Completed(()));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn submit_dynamic<F>(
        &self,
        first: impl Into<Due>,
        repeat: Repeat,
        f: F,
    ) -> Result<PeriodicHandle<K>, Error>
    where
        F: FnMut() -> Next + Send + 'static,
    {
        self.add_repeating(self.shared.anon_key(), first.into(), repeat, f)
    }

    /// Schedule many keyed tasks under one acquisition of the pool's lock:
    /// each `(key, when, f)` as [`schedule`](Self::schedule) would, in
    /// order. A key that appears twice is replaced by its later entry (the
    /// earlier handle reports [`Outcome::Replaced`]). All or none: on error
    /// nothing is scheduled and every closure is dropped.
    ///
    /// # Errors
    ///
    /// [`Error::TimeOutOfRange`] if any due time is out of range,
    /// [`Error::ShutDown`] after a shutdown, and [`Error::CapacityReached`]
    /// if the pending tasks plus the batch's length exceed the capacity
    /// (counted before replacements, so a batch of replacements at capacity
    /// is refused; schedule those one by one).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Instant;
    /// use timerpool::{Outcome, TimerPool};
    ///
    /// let pool = TimerPool::<u64>::builder().workers(2).build()?;
    /// let now = Instant::now();
    /// let handles = pool.schedule_batch((0..100u64).map(|k| (k, now, move || k * 2)))?;
    /// assert_eq!(handles.into_iter().map(|h| h.wait()).filter(Outcome::ran).count(), 100);
    /// pool.shutdown();
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn schedule_batch<I, D, F, T>(&self, tasks: I) -> Result<Vec<TaskHandle<T, K>>, Error>
    where
        I: IntoIterator<Item = (K, D, F)>,
        D: Into<Due>,
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let mut made = Vec::new();
        let arrivals = self.arrivals(tasks, |key, due, f| {
            let slot = Arc::new(OutcomeSlot::new(
                self.shared.time.instant_of(due),
                self.shared.faults,
            ));
            made.push((slot.clone(), key.clone()));
            Task::Once(Box::new(OneShot::new(f, slot)))
        })?;
        let mut stamps = vec![Stamp::default(); arrivals.len()];
        self.admit_counted(arrivals.into_iter(), |i, stamp| stamps[i] = stamp)?;
        let pool = Arc::downgrade(&self.shared);
        let handles = made.into_iter().zip(stamps);
        Ok(handles
            .map(|((slot, key), stamp)| TaskHandle::new(slot, pool.clone(), key, stamp))
            .collect())
    }

    /// [`schedule_batch`](Self::schedule_batch) without handles; returns how
    /// many were scheduled. The cheapest way to hand the pool a burst of work.
    ///
    /// # Errors
    ///
    /// As [`schedule_batch`](Self::schedule_batch).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    ///
    /// let pool = TimerPool::<u64>::builder().workers(2).build()?;
    /// let sum = Arc::new(AtomicU64::new(0));
    /// let n = pool.schedule_batch_detached((1..=100u64).map(|k| {
    ///     let sum = sum.clone();
    ///     (k, Duration::ZERO, move || {
    ///         sum.fetch_add(k, Ordering::Relaxed);
    ///     })
    /// }))?;
    /// assert_eq!(n, 100);
    /// pool.shutdown(); // runs everything pending, joins the workers
    /// assert_eq!(sum.load(Ordering::Relaxed), 5050);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn schedule_batch_detached<I, D, F>(&self, tasks: I) -> Result<usize, Error>
    where
        I: IntoIterator<Item = (K, D, F)>,
        D: Into<Due>,
        F: FnOnce() + Send + 'static,
    {
        let arrivals = self.arrivals(tasks, |_, _, f| Task::Once(Box::new(Detached::new(f))))?;
        let n = arrivals.len();
        self.admit_counted(arrivals.into_iter(), |_, _| {})?;
        Ok(n)
    }

    /// Cancel `key`'s pending task. True iff one was pending: it will never
    /// run and its outcome is [`Outcome::Cancelled`]. A task is pending until
    /// a worker starts it, due or not; a task that has started cannot be
    /// cancelled.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TimerPool};
    ///
    /// let pool = TimerPool::<&str>::builder().workers(1).build()?;
    /// let lease = pool.schedule("lease-7", Duration::from_secs(30), || ())?;
    /// assert!(pool.cancel(&"lease-7"));
    /// assert!(!pool.cancel(&"lease-7")); // nothing pending any more
    /// assert_eq!(lease.wait(), Outcome::Cancelled);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn cancel(&self, key: &K) -> bool {
        self.shared.cancel(&TaskKey::Keyed(key.clone()), None)
    }

    /// Move `key`'s pending task to `when`, keeping its closure and its
    /// handle (which still reports the task's one outcome): a lease renewal
    /// without a new closure, as tokio-util's `DelayQueue::reset`. O(log n).
    /// True iff a task was pending under `key`; false when none is, or its
    /// task is running (a periodic task's next run is pending again once
    /// the run ends).
    ///
    /// # Errors
    ///
    /// [`Error::TimeOutOfRange`] as [`schedule`](Self::schedule); nothing
    /// moves.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TimerPool};
    ///
    /// let pool = TimerPool::<&str>::builder().workers(1).build()?;
    /// let lease = pool.schedule("lease-7", Duration::from_secs(30), || "expired")?;
    /// // Renewed: the same task, due later; its handle stays valid.
    /// assert!(pool.reschedule(&"lease-7", Duration::from_secs(60))?);
    /// assert!(!pool.reschedule(&"no-such-lease", Duration::from_secs(60))?);
    /// // Moved forward instead, it runs at once.
    /// assert!(pool.reschedule(&"lease-7", Duration::ZERO)?);
    /// assert_eq!(lease.wait(), Outcome::Completed("expired"));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn reschedule(&self, key: &K, when: impl Into<Due>) -> Result<bool, Error> {
        let due = self.due_ns(when.into())?;
        Ok(self.shared.reschedule(&TaskKey::Keyed(key.clone()), due))
    }

    /// When `key`'s pending task is due (Java's `getDelay`, as an instant on
    /// the pool's clock): a task is pending until a worker starts it, due or
    /// not; a periodic task while it waits for its next run, not while it
    /// runs. `None` when nothing is pending under `key`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    ///
    /// let pool = TimerPool::<&str>::builder().workers(1).build()?;
    /// pool.schedule("offer-9", Duration::from_secs(15), || ())?;
    /// let due = pool.due_of(&"offer-9").expect("pending");
    /// assert!(due > pool.now());
    /// assert!(pool.is_pending(&"offer-9") && !pool.is_pending(&"offer-1"));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn due_of(&self, key: &K) -> Option<Instant> {
        let key = TaskKey::Keyed(key.clone());
        let due = {
            let st = self.shared.state.lock();
            let held = || st.exclusive.due_of(&key);
            st.heap.get(&key).map(|(due, _)| due).or_else(held)?
        };
        // A running periodic task's stand-in is due never.
        (due != NEVER).then(|| self.shared.time.instant_of(due))
    }

    /// True if a task is pending under `key`; see [`due_of`](Self::due_of).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<&str>::builder().workers(1).build()?;
    /// pool.schedule("lease", Duration::from_secs(60), || ())?;
    /// assert!(pool.is_pending(&"lease"));
    /// pool.cancel(&"lease");
    /// assert!(!pool.is_pending(&"lease"));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn is_pending(&self, key: &K) -> bool {
        self.due_of(key).is_some()
    }

    /// Tasks running now (periodic runs included), roughly: it reads two
    /// counters one after the other, so it is exact only while the pool is
    /// quiet.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// let (started, wait) = (mpsc::channel(), mpsc::channel::<()>());
    /// let (tell, release) = (started.0, wait.1);
    /// pool.submit_detached(Duration::ZERO, move || {
    ///     tell.send(()).unwrap();
    ///     let _ = release.recv();
    /// })?;
    /// started.1.recv().unwrap();
    /// assert_eq!(pool.running(), 1);
    /// drop(wait.0);
    /// pool.settle(Duration::from_secs(10))?;
    /// assert_eq!(pool.running(), 0);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn running(&self) -> usize {
        let finished = self.shared.counters.finished();
        let started = self.shared.state.lock().started;
        started.saturating_sub(finished) as usize
    }

    /// The number of worker threads.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u64>::builder().workers(3).build()?;
    /// assert_eq!(pool.workers(), 3);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn workers(&self) -> usize {
        self.crew.len()
    }

    /// Wait at most `timeout` until the pool is quiet: no pending task is
    /// due by its clock, and every run a worker started has ended (a
    /// periodic task is back in the heap at its next time). Work a task
    /// schedules that is already due keeps the pool from settling until it
    /// has run. With a [`ManualClock`](crate::ManualClock) this is how a
    /// test waits for what an `advance` made due; with the real clock it
    /// waits until quiet.
    ///
    /// # Errors
    ///
    /// [`Error::NotSettled`] at the bound (a task that never returns, say),
    /// with the number of tasks still running and pending, and the running
    /// keys named if the pool was built with
    /// [`Builder::debug_keys`](crate::Builder::debug_keys).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use timerpool::{ManualClock, TimerPool};
    ///
    /// let clock = ManualClock::new();
    /// let pool = TimerPool::<&str>::builder().workers(2).clock(clock.clone()).build()?;
    /// let fired = Arc::new(AtomicU32::new(0));
    /// let f = fired.clone();
    /// pool.schedule("reminder", Duration::from_secs(60), move || {
    ///     f.fetch_add(1, Ordering::SeqCst);
    /// })?;
    /// clock.advance(Duration::from_secs(60));
    /// pool.settle(Duration::from_secs(10))?; // no sleep, no polling
    /// assert_eq!(fired.load(Ordering::SeqCst), 1);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn settle(&self, timeout: Duration) -> Result<(), Error> {
        self.shared.settle(Instant::now().checked_add(timeout))
    }

    /// Move `clock` (the pool's manual clock) forward by `by`, stopping at
    /// every due time on the way, in order, and settling at each: a task
    /// due every second sees each of ten ticks in a ten-second step, and
    /// work a callback schedules inside the window runs at its time. Returns
    /// how many due times it stopped at. `timeout` bounds the whole call.
    ///
    /// # Errors
    ///
    /// [`Error::StepBound`] after `max_steps` stops short of the target (a
    /// task that keeps rescheduling itself just ahead), [`Error::NotSettled`]
    /// at `timeout`, [`Error::TimeOutOfRange`] if the target is past the
    /// clock's range.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use timerpool::{Clock, ManualClock, Repeat, TimerPool};
    ///
    /// let clock = ManualClock::new();
    /// let pool = TimerPool::<&str>::builder().workers(1).clock(clock.clone()).build()?;
    /// let ticks = Arc::new(AtomicU32::new(0));
    /// let t = ticks.clone();
    /// let every_second = Repeat::fixed_rate(Duration::from_secs(1));
    /// pool.schedule_repeating("tick", Duration::from_secs(1), every_second, move || {
    ///     t.fetch_add(1, Ordering::SeqCst);
    /// })?;
    /// let stops = pool.advance_in_steps(&clock, Duration::from_secs(10), 100, Duration::from_secs(10))?;
    /// assert_eq!((stops, ticks.load(Ordering::SeqCst)), (10, 10));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn advance_in_steps(
        &self,
        clock: &crate::ManualClock,
        by: Duration,
        max_steps: usize,
        timeout: Duration,
    ) -> Result<usize, Error> {
        use crate::Clock;
        let target = clock.now().checked_add(by).ok_or(Error::TimeOutOfRange)?;
        let deadline = Instant::now().checked_add(timeout);
        self.shared.settle(deadline)?;
        let mut steps = 0;
        while let Some(next) = self.next_due().filter(|&next| next <= target) {
            if steps == max_steps {
                return Err(Error::StepBound { steps });
            }
            steps += 1;
            clock.advance(next.saturating_duration_since(clock.now()));
            self.shared.settle(deadline)?;
        }
        clock.advance(target.saturating_duration_since(clock.now()));
        self.shared.settle(deadline)?;
        Ok(steps)
    }

    /// The earliest pending due time.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{ManualClock, TimerPool};
    /// let clock = ManualClock::new();
    /// let pool = TimerPool::<u64>::builder().workers(1).clock(clock.clone()).build()?;
    /// assert_eq!(pool.next_due(), None);
    /// pool.schedule(1, Duration::from_secs(30), || ())?;
    /// pool.schedule(2, Duration::from_secs(10), || ())?;
    /// assert_eq!(pool.next_due(), Some(pool.now() + Duration::from_secs(10)));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn next_due(&self) -> Option<Instant> {
        let due = self.shared.state.lock().heap.peek_due()?;
        // Only running periodic tasks' stand-ins are due never.
        (due != NEVER).then(|| self.shared.time.instant_of(due))
    }

    /// Number of pending (not yet started) tasks, due or not; a periodic
    /// task counts while it is live.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// for k in 0..3 {
    ///     pool.schedule(k, Duration::from_secs(60), || ())?;
    /// }
    /// pool.schedule(0, Duration::from_secs(90), || ())?; // a replace: still 3
    /// assert_eq!(pool.len(), 3);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.shared.state.lock().pending()
    }

    /// True when no task is pending.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// assert!(pool.is_empty());
    /// pool.schedule(1, Duration::from_secs(60), || ())?;
    /// assert!(!pool.is_empty());
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pool's current time, as its clock reads it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Clock, ManualClock, TimerPool};
    /// let clock = ManualClock::new();
    /// let pool = TimerPool::<u64>::builder().workers(1).clock(clock.clone()).build()?;
    /// let before = pool.now();
    /// clock.advance(Duration::from_secs(5));
    /// assert_eq!(pool.now() - before, Duration::from_secs(5));
    /// assert_eq!(pool.now(), clock.now());
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn now(&self) -> Instant {
        self.shared.time.clock().now()
    }

    /// A receiver of the pool's completion channel, or `None` if the pool
    /// was built without one ([`Builder::completions`]). Every receiver
    /// shares one queue: each record goes to one of them. It works in
    /// `crossbeam_channel::select!`; see [`Completion`] for what a record
    /// carries and `docs/semantics.md` ("Completion stream") for the rules.
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TimerPool};
    ///
    /// let pool = TimerPool::<u32>::builder().workers(1).completions(64).build()?;
    /// let done = pool.completions().unwrap();
    /// let h = pool.schedule(7, Duration::from_secs(60), || ())?;
    /// h.cancel();
    /// let record = done.recv_timeout(Duration::from_secs(10)).unwrap();
    /// assert_eq!((record.key, record.outcome), (Some(7), Outcome::Cancelled));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn completions(&self) -> Option<CompletionReceiver<K>> {
        self.shared.completion_receiver()
    }

    /// The pool's counters and lateness percentiles.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// pool.submit(Duration::ZERO, || ())?.wait();
    /// pool.settle(Duration::from_secs(10))?; // the counters follow the outcome
    /// assert_eq!(pool.stats().completed, 1);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn stats(&self) -> Stats {
        let (pending, wakeups) = {
            let st = self.shared.state.lock();
            (st.pending(), st.wakeups)
        };
        self.shared
            .counters
            .snapshot(pending, wakeups, self.shared.time.panics())
    }

    /// Stop taking new tasks, let every pending one-shot task run at its due
    /// time (periodic tasks stop, outcome [`Outcome::Shutdown`]), then join
    /// the workers.
    ///
    /// Called from inside one of the pool's tasks, it starts the shutdown but
    /// does not wait (a worker cannot join itself).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Error, Outcome, Repeat, TimerPool};
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// let once = pool.schedule(1, Duration::from_millis(5), || "ran")?;
    /// let tick = pool.schedule_repeating(2, Duration::from_secs(1), Repeat::fixed_rate(Duration::from_secs(1)), || {})?;
    /// pool.shutdown(); // waits for the one-shot task's due time
    /// assert_eq!(once.wait(), Outcome::Completed("ran"));
    /// assert_eq!(tick.wait(), Outcome::Shutdown);
    /// assert_eq!(pool.schedule(3, Duration::ZERO, || "late").unwrap_err(), Error::ShutDown);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn shutdown(&self) {
        self.shared.begin_drain();
        self.crew.join();
    }

    /// Stop taking new tasks, remove every pending task unrun (outcome
    /// [`Outcome::Shutdown`]; due tasks no worker has started are pending
    /// too), let running tasks finish, join the workers, and return the keys
    /// of the removed keyed tasks in due order.
    ///
    /// Called from inside one of the pool's tasks, it does not wait for the
    /// workers. Dropping the pool does the same.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TimerPool};
    /// let pool = TimerPool::<&str>::builder().workers(1).build()?;
    /// let h = pool.schedule("b", Duration::from_secs(20), || ())?;
    /// pool.schedule("a", Duration::from_secs(10), || ())?;
    /// assert_eq!(pool.shutdown_now(), vec!["a", "b"]); // in due order
    /// assert_eq!(h.wait(), Outcome::Shutdown);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn shutdown_now(&self) -> Vec<K> {
        let keys = self.shared.stop_now();
        self.crew.join();
        keys
    }

    /// Begin a graceful shutdown and return at once (Java's `shutdown()`):
    /// new work is refused with [`Error::ShutDown`] (a running task's
    /// follow-up too, unless the pool was built with
    /// [`Builder::drain_follow_ups`]), pending one-shot tasks still run at
    /// their due time, periodic tasks stop. Wait for the end with
    /// [`await_termination`](Self::await_termination).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TimerPool};
    ///
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// let h = pool.schedule(1, Duration::from_millis(10), || "done")?;
    /// pool.begin_shutdown(); // returns at once
    /// assert!(pool.is_shutdown() && !pool.is_terminated());
    /// assert!(pool.await_termination(Duration::from_secs(10)));
    /// assert_eq!(h.wait(), Outcome::Completed("done"));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn begin_shutdown(&self) {
        self.shared.begin_drain();
    }

    /// Wait at most `timeout` for every worker to exit after a shutdown
    /// (Java's `awaitTermination`); true when they have (and then they are
    /// joined). Called from inside one of the pool's tasks it does not
    /// wait.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u64>::builder().workers(2).build()?;
    /// assert!(!pool.await_termination(Duration::from_millis(1)), "not shut down");
    /// pool.begin_shutdown();
    /// assert!(pool.await_termination(Duration::from_secs(10)));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn await_termination(&self, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        self.crew.await_exit(&self.shared, deadline)
    }

    /// True once every worker has exited.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// assert!(!pool.is_terminated());
    /// pool.shutdown();
    /// assert!(pool.is_terminated());
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn is_terminated(&self) -> bool {
        *self.shared.live.lock() == 0
    }

    /// A graceful shutdown with a deadline: like [`shutdown`](Self::shutdown)
    /// until `timeout` has passed, then like
    /// [`shutdown_now`](Self::shutdown_now) for what is still pending, whose
    /// keys it returns (empty if everything ran in time). It does not wait
    /// for tasks still running at the deadline (they are never
    /// interrupted): [`await_termination`](Self::await_termination) does.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TimerPool};
    ///
    /// let pool = TimerPool::<&str>::builder().workers(1).build()?;
    /// let lease = pool.schedule("lease", Duration::from_secs(1800), || ())?;
    /// assert_eq!(pool.shutdown_timeout(Duration::from_millis(10)), vec!["lease"]);
    /// assert_eq!(lease.wait(), Outcome::Shutdown);
    /// assert!(pool.await_termination(Duration::from_secs(10)));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn shutdown_timeout(&self, timeout: Duration) -> Vec<K> {
        self.shared.begin_drain();
        if self.await_termination(timeout) {
            return Vec::new();
        }
        self.shared.stop_now()
    }

    /// True once `shutdown` or `shutdown_now` has been called.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// assert!(!pool.is_shutdown());
    /// pool.begin_shutdown();
    /// assert!(pool.is_shutdown());
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn is_shutdown(&self) -> bool {
        self.shared.state.lock().mode != shared::Mode::Running
    }

    /// A one-shot task with a handle.
    fn add_once<F, T>(&self, key: TaskKey<K>, when: Due, f: F) -> Result<TaskHandle<T, K>, Error>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let due = match self.due_ns(when) {
            Ok(due) => due,
            Err(e) => return Err(self.refuse(f, e)),
        };
        let slot = Arc::new(OutcomeSlot::new(
            self.shared.time.instant_of(due),
            self.shared.faults,
        ));
        let handle_key = key.clone();
        let task = Task::Once(Box::new(OneShot::new(f, slot.clone())));
        let stamp = self.admit_single(key, due, task, |_| {})?;
        let pool = Arc::downgrade(&self.shared);
        Ok(TaskHandle::new(slot, pool, handle_key, stamp))
    }

    /// A one-shot task without a handle.
    fn add_detached<F>(&self, key: TaskKey<K>, when: Due, f: F) -> Result<(), Error>
    where
        F: FnOnce() + Send + 'static,
    {
        let due = match self.due_ns(when) {
            Ok(due) => due,
            Err(e) => return Err(self.refuse(f, e)),
        };
        let task = Task::Once(Box::new(Detached::new(f)));
        self.admit_single(key, due, task, |_| {}).map(|_| ())
    }

    /// A periodic task; its shared state records its stamp under the lock.
    fn add_repeating<F>(
        &self,
        key: TaskKey<K>,
        first: Due,
        repeat: Repeat,
        f: F,
    ) -> Result<PeriodicHandle<K>, Error>
    where
        F: FnMut() -> Next + Send + 'static,
    {
        self.add_periodic(key, first, repeat, f, false)
    }

    /// A periodic task, or (`retry`) a retried one-shot task run as one.
    fn add_periodic<F>(
        &self,
        key: TaskKey<K>,
        first: Due,
        repeat: Repeat,
        f: F,
        retry: bool,
    ) -> Result<PeriodicHandle<K>, Error>
    where
        F: FnMut() -> Next + Send + 'static,
    {
        let checked = repeat
            .every_ns()
            .and_then(|every| Ok((every, self.due_ns(first)?)));
        let (every, due) = match checked {
            Ok(v) => v,
            Err(e) => return Err(self.refuse(f, e)),
        };
        let ctl = PeriodicCtl::new(self.shared.time.instant_of(due), self.shared.faults);
        let ctl = Arc::new(if retry { ctl.for_retry() } else { ctl });
        let job = PeriodicJob::new(Box::new(f), ctl.clone(), repeat, every);
        let handle_key = key.clone();
        self.admit_single(key, due, Task::Periodic(Box::new(job)), |seq| {
            ctl.set_seq(seq)
        })?;
        Ok(PeriodicHandle::new(
            ctl,
            Arc::downgrade(&self.shared),
            handle_key,
        ))
    }

    /// The arrivals of a batch, or the whole batch refused (each task
    /// counted) if any due time is out of range. Delays count from one
    /// reading of the clock.
    fn arrivals<I, D, F>(
        &self,
        tasks: I,
        mut task: impl FnMut(&TaskKey<K>, i64, F) -> Task,
    ) -> Result<Vec<Arrival<K>>, Error>
    where
        I: IntoIterator<Item = (K, D, F)>,
        D: Into<Due>,
    {
        let now = OnceCell::new();
        let read = || *now.get_or_init(|| self.shared.time.now());
        let tasks = tasks.into_iter();
        let mut arrivals = Vec::with_capacity(tasks.size_hint().0);
        let mut bad = 0;
        for (key, when, f) in tasks {
            let key = TaskKey::Keyed(key);
            match self.shared.time.due_ns(when.into(), read) {
                Ok(due) => arrivals.push(Arrival {
                    task: task(&key, due, f),
                    key,
                    due,
                }),
                Err(_) => {
                    bad += 1;
                    drop_quietly(f);
                }
            }
        }
        if bad == 0 {
            return Ok(arrivals);
        }
        self.shared.counters.refused(bad + arrivals.len() as u64);
        #[cfg(feature = "tracing")]
        trace::refused(bad + arrivals.len() as u64, &Error::TimeOutOfRange);
        arrivals.into_iter().for_each(|a| drop_quietly(a.task));
        Err(Error::TimeOutOfRange)
    }

    /// Admit one task; its stamp goes to `stamped` under the lock and is
    /// returned.
    fn admit_single(
        &self,
        key: TaskKey<K>,
        due: i64,
        task: Task,
        mut stamped: impl FnMut(u64),
    ) -> Result<Stamp, Error> {
        let mut out = Stamp::default();
        let arrival = Arrival { key, due, task };
        self.admit_counted(std::iter::once(arrival), |_, stamp| {
            stamped(stamp.seq);
            out = stamp;
        })?;
        Ok(out)
    }

    /// Admit `arrivals`, counting each refused task.
    fn admit_counted(
        &self,
        arrivals: impl ExactSizeIterator<Item = Arrival<K>>,
        stamped: impl FnMut(usize, Stamp),
    ) -> Result<(), Error> {
        let n = arrivals.len() as u64;
        self.shared.admit(arrivals, stamped).inspect_err(|_e| {
            self.shared.counters.refused(n);
            #[cfg(feature = "tracing")]
            trace::refused(n, _e);
        })
    }

    /// `when` in the pool's nanoseconds.
    fn due_ns(&self, when: Due) -> Result<i64, Error> {
        self.shared.time.due_ns(when, || self.shared.time.now())
    }

    /// Refuse a call before its task was built: count it, drop the closure
    /// (containing a panic from its `Drop`), and give the error back.
    fn refuse<F>(&self, f: F, e: Error) -> Error {
        self.shared.counters.refused(1);
        #[cfg(feature = "tracing")]
        trace::refused(1, &e);
        drop_quietly(f);
        e
    }
}

/// A fixed-rate or fixed-delay closure as one that always runs on schedule.
fn on_schedule<F: FnMut() + Send + 'static>(mut f: F) -> impl FnMut() -> Next + Send + 'static {
    move || {
        f();
        Next::OnSchedule
    }
}
