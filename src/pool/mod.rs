//! The pool: N workers, one leader at a time, one outcome per task. This
//! file is the façade ([`TimerPool`]: the type, building it, and the
//! queries); the rooms below it, floor by floor, each import only from
//! floors beneath:
//!
//! - `outcome.rs` (outcomes, timing, the slot a task delivers into),
//!   `time.rs` (the clock, the epoch, every time conversion), `wake.rs`
//!   (the wake policy: pure, no shared state), `few.rs`, `fault.rs` (the
//!   loom models' fault list), `stats.rs` (counters), `completion/` (the
//!   completion stream: its records, sending them, its receiver and end);
//! - `periodic.rs` (policies; a periodic task between runs);
//! - `task.rs` (the task record: what a heap entry can be), `context.rs`
//!   (what a running task can read of itself);
//! - `pending.rs` (the pending tasks: the heap, and the ready lane of tasks
//!   due on arrival beside it; `pending/held.rs` the lookups into the
//!   holds, filling and taking them over), `hold.rs` (the workers' holds);
//! - `handoff.rs` (the mailbox the free workers wait on, what travels
//!   through it; the lead token), `exclusive.rs` (busy and held keys),
//!   `builder.rs` (configuration);
//! - `shared.rs` (the engine's state and lock), with `trace.rs` (the `tracing` feature);
//! - the protocol's steps: `intake.rs`, `cancel.rs`, `leader.rs`,
//!   `deputy.rs`, `worker.rs`, `settle.rs` (waiting for quiet), `drain.rs`
//!   (follow-ups while draining), and `broken.rs` (their broken twins for
//!   loom); which function does which step is the table at the end of
//!   `docs/protocol.md`;
//! - `crew.rs` (the threads), `handle.rs` (what callers hold);
//! - the caller's side of the façade: `add.rs` (the ways to add work),
//!   `retry.rs` (retry policies), `refused.rs` (refused work handed back),
//!   `query.rs` (typed cancel, running and pending keys), `shutdown.rs`.
//!
//! The protocol is written down in `docs/protocol.md`.

mod add;
mod broken;
mod builder;
mod cancel;
mod completion;
mod context;
mod crew;
mod deputy;
mod drain;
mod exclusive;
mod fault;
mod few;
mod handle;
mod handoff;
mod hold;
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
mod shutdown;
mod stats;
mod task;
mod time;
#[cfg(feature = "tracing")]
mod trace;
mod wake;
mod wall;
mod worker;

pub use builder::{Builder, MAX_WORKERS};
pub use completion::{Completion, CompletionKind};
pub use completion::{CompletionIter, CompletionReceiver};
pub use context::TaskContext;
pub use handle::{PeriodicHandle, TaskHandle};
pub use outcome::{Outcome, Timing};
pub use periodic::{MissedTicks, Next, OnPanic, Repeat};
pub use query::CancelResult;
pub use refused::Refused;
pub use retry::{Retried, Retry, RetryHandle, RetryIf, RetryPolicy};
pub use settle::Steps;
pub use stats::{Lateness, Stats};
pub use time::Due;
pub use wake::{Precision, MAX_WINDOW};

use crate::sync::Arc;
use crate::Error;
use crew::Crew;
use shared::Shared;
use std::borrow::Borrow;
use std::fmt;
use std::hash::Hash;
use std::time::{Duration, Instant};
use task::Keyed;
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
/// | one-shot returning `Result`, run again after a backoff while it returns `Err` or panics ([`Retry`], [`Retry::retry_if`]), with a [`RetryHandle`] | [`schedule_retrying`](Self::schedule_retrying) | [`submit_retrying`](Self::submit_retrying) |
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
    /// Set by the pool's drop: holds the completion stream open until the
    /// crew, dropped before it, has reported the tasks its stop removed.
    closing: completion::StreamHold<K>,
}

impl<K> Drop for TimerPool<K> {
    fn drop(&mut self) {
        // A loom model that failed unwinds through here (see `Crew`'s drop).
        if std::thread::panicking() && cfg!(loom) {
            return;
        }
        self.closing = self.shared.sending_owned();
    }
}

impl<K> fmt::Debug for TimerPool<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.shared.state.lock();
        f.debug_struct("TimerPool")
            .field("workers", &self.crew.len())
            .field("pending", &st.pending_count())
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
    /// [`Error::WindowTooLong`], [`Error::ZeroExpiry`], [`Error::ThreadStart`] if a
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
        Ok(TimerPool {
            shared,
            crew,
            closing: Default::default(),
        })
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

    /// Cancel `key`'s pending task. True iff one was pending: it will never
    /// run and its outcome is [`Outcome::Cancelled`]. A task is pending until
    /// a worker starts it, due or not; a task that has started cannot be
    /// cancelled.
    ///
    /// `key` may be any borrowed form of the key type, as for `HashMap`
    /// (`&str` for `String` keys); the lookup allocates nothing. The same
    /// holds for every method that looks a key up.
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
    ///
    /// let sessions = TimerPool::<String>::builder().workers(1).build()?;
    /// sessions.schedule_detached("s-1".to_string(), Duration::from_secs(30), || ())?;
    /// assert!(sessions.cancel("s-1")); // a `&str`, no `String` built
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    #[doc(alias = "remove", alias = "abort")]
    pub fn cancel<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        self.shared
            .sending_while(|| self.shared.cancel(&Keyed(key), None))
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
    /// moves. `key` as for [`cancel`](Self::cancel).
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
    #[doc(alias = "reset")]
    pub fn reschedule<Q>(&self, key: &Q, when: impl Into<Due>) -> Result<bool, Error>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        let due = self.due_ns(when.into())?;
        Ok(self.shared.reschedule(&Keyed(key), due))
    }

    /// When `key`'s pending task is due (Java's `getDelay`, as an instant on
    /// the pool's clock): a task is pending until a worker starts it, due or
    /// not; a periodic task while it waits for its next run, not while it
    /// runs. `None` when nothing is pending under `key` (any borrowed form
    /// of the key, as for [`cancel`](Self::cancel)).
    ///
    /// For a calendar task ([`Repeat::calendar`](crate::Repeat::calendar))
    /// this is its next tick: where the pool's clock should reach it by the
    /// wall clock read now, or the task's next wake if that is later (a
    /// tick the wall clock has passed runs then). A later step of the wall
    /// clock moves it. The task may wake earlier, at most a minute ahead,
    /// only to read the wall clock again; those wakes run nothing and are
    /// what [`next_due`](Self::next_due) shows.
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
    #[doc(alias = "deadline", alias = "getDelay")]
    pub fn due_of<Q>(&self, key: &Q) -> Option<Instant>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        let (due, tick) = self.entry_due(key)?;
        // A calendar task's tick, by a reading of the wall clock taken
        // after the lock (the clock is user code).
        let due = match tick {
            Some(tick) => {
                let now = self.shared.time.now().ns;
                let clock = self.shared.time.clock();
                due.max(wall::tick_due(tick, clock, now))
            }
            None => due,
        };
        Some(self.shared.time.instant_of(due))
    }

    /// The due time of `key`'s pending entry and, for a calendar task, the
    /// wall-clock tick it waits for; `None` when nothing is pending under
    /// `key` or its periodic task is running (its stand-in is due never).
    fn entry_due<Q>(&self, key: &Q) -> Option<(i64, Option<jiff::Timestamp>)>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        let key = Keyed(key);
        let look = |due: i64, task: &task::Task| (due, task.pending_tick());
        let (due, tick) = {
            let st = self.shared.state.lock();
            let held = || st.exclusive.inspect(&key, look);
            st.pending.inspect(&key, look).or_else(held)?
        };
        (due != NEVER).then_some((due, tick))
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
    pub fn is_pending<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        self.entry_due(key).is_some()
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
    #[doc(alias = "getActiveCount")]
    pub fn running(&self) -> usize {
        let finished = self.shared.counters.finished();
        let started = self.shared.started(&self.shared.state.lock());
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
    /// test waits for what a [`ManualClock::advance`](crate::ManualClock::advance)
    /// made due ([`advance`](Self::advance) moves the clock and settles in
    /// one call); with the real clock it waits until quiet.
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

    /// The earliest pending due time: when the pool next wakes a task. For
    /// a calendar task that may be a wake, at most a minute ahead, that
    /// only reads the wall clock again and runs nothing, before its tick
    /// (which [`due_of`](Self::due_of) shows); so this can be earlier than
    /// every task's `due_of`.
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
        let due = self.shared.state.lock().pending.peek_due()?;
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
        self.shared.state.lock().pending_count()
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
    /// shares one queue: each record goes to one of them. Read it blocking
    /// or, from async code, as a `futures_core::Stream`; it ends once the
    /// pool has shut down and its last record was sent, whoever still holds
    /// the pool ([`CompletionReceiver`]). See [`Completion`] for what a
    /// record carries and `docs/semantics.md` ("Completion stream") for the
    /// rules.
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
        let locked = {
            let st = self.shared.state.lock();
            stats::Locked {
                pending: st.pending_count(),
                scheduled: st.scheduled,
                leader_wakeups: st.wakeups,
            }
        };
        self.shared
            .counters
            .snapshot(locked, self.shared.time.panics())
    }
}
