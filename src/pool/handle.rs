//! Handles: what a scheduling call gives back, to wait for a task's outcome
//! (blocking, with a timeout, or as a future) or cancel it.

use super::intake::Stamp;
use super::outcome::{Outcome, ReadSlot, Timing};
use super::periodic::PeriodicCtl;
use super::shared::Shared;
use super::task::{SlotOf, TaskKey};
use crate::sync::{Arc, Weak};
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// A handle to one task: wait for its [`Outcome`] or cancel it.
///
/// The taking methods consume the handle, so an outcome is handed out once;
/// the timed and non-blocking ones give the handle back while there is none.
/// Dropping a handle does not cancel its task.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::{Outcome, TimerPool};
///
/// let pool = TimerPool::<&str>::builder().workers(1).build()?;
/// let h = pool.schedule("report", Duration::from_millis(1), || 6 * 7)?;
/// assert_eq!(h.key(), Some(&"report"));
/// assert_eq!(h.wait(), Outcome::Completed(42));
/// # Ok::<(), timerpool::Error>(())
/// ```
pub struct TaskHandle<T, K> {
    /// Where the outcome arrives.
    slot: Arc<dyn SlotOf<T>>,
    /// The pool, for cancel; gone once the pool is dropped.
    pool: Weak<Shared<K>>,
    /// The task's key in the pool's heap.
    key: TaskKey<K>,
    /// The heap stamp of this task, so a handle never cancels a replacement.
    seq: u64,
    /// Whether scheduling it replaced a pending task under its key.
    replaced: bool,
}

impl<T, K> fmt::Debug for TaskHandle<T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskHandle")
            .field("seq", &self.seq)
            .field("finished", &self.slot.slot().is_set())
            .finish_non_exhaustive()
    }
}

impl<T, K: Hash + Eq + Clone + Send + 'static> TaskHandle<T, K> {
    /// The handle of the task stamped `seq` under `key`.
    pub(crate) fn new(
        slot: Arc<dyn SlotOf<T>>,
        pool: Weak<Shared<K>>,
        key: TaskKey<K>,
        stamp: Stamp,
    ) -> Self {
        TaskHandle {
            slot,
            pool,
            key,
            seq: stamp.seq,
            replaced: stamp.replaced,
        }
    }

    /// True if scheduling this task replaced a task pending under its key
    /// (that task's outcome is [`Outcome::Replaced`]); false if the key had
    /// nothing pending (it may have had a task running).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    ///
    /// let pool = TimerPool::<&str>::builder().workers(1).build()?;
    /// let first = pool.schedule("lease", Duration::from_secs(60), || ())?;
    /// let second = pool.schedule("lease", Duration::from_secs(90), || ())?;
    /// assert!(!first.replaced() && second.replaced());
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn replaced(&self) -> bool {
        self.replaced
    }

    /// Cancel the task if it is still pending (due or not, until a worker
    /// starts it). True iff it was: it will never run and its outcome is
    /// [`Outcome::Cancelled`]. False once it has started, or was replaced,
    /// cancelled or shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TimerPool};
    ///
    /// let pool = TimerPool::<&str>::builder().workers(1).build()?;
    /// let h = pool.schedule("offer", Duration::from_secs(60), || ())?;
    /// assert!(h.cancel());
    /// assert!(!h.cancel(), "only once");
    /// assert_eq!(h.wait(), Outcome::Cancelled);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    #[doc(alias = "abort")]
    pub fn cancel(&self) -> bool {
        match self.pool.upgrade() {
            Some(pool) => pool.sending_while(|| pool.cancel(&self.key, Some(self.seq))),
            None => false,
        }
    }

    /// The key the task was scheduled under; `None` for keyless submissions.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    ///
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// assert_eq!(pool.schedule(7, Duration::from_secs(60), || ())?.key(), Some(&7));
    /// assert_eq!(pool.submit(Duration::from_secs(60), || ())?.key(), None);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn key(&self) -> Option<&K> {
        self.key.keyed()
    }

    /// True once the task has an outcome.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    ///
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// let h = pool.schedule(1, Duration::from_secs(60), || ())?;
    /// assert!(!h.is_finished());
    /// h.cancel();
    /// assert!(h.is_finished());
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    #[doc(alias = "isDone")]
    pub fn is_finished(&self) -> bool {
        self.slot.slot().is_set()
    }

    /// When the task fell due, was claimed, started and finished; `None`
    /// until it has an outcome.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    ///
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// let h = pool.schedule(1, Duration::from_secs(60), || ())?;
    /// assert!(h.timing().is_none(), "no outcome yet");
    /// h.cancel();
    /// let t = h.timing().unwrap();
    /// assert!(t.claimed.is_none() && t.started.is_none(), "it never ran");
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn timing(&self) -> Option<Timing> {
        self.slot.slot().timing()
    }

    /// Block until the task has an outcome and return it.
    ///
    /// Never blocks forever: every accepted task gets an outcome, at the
    /// latest when the pool is shut down or dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TimerPool};
    ///
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// let h = pool.submit(Duration::ZERO, || panic!("boom"))?;
    /// assert_eq!(h.wait(), Outcome::<()>::Panicked("boom".into()));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    #[doc(alias = "get")]
    pub fn wait(self) -> Outcome<T> {
        self.slot.slot().wait()
    }

    /// Like [`wait`](Self::wait), also returning the task's [`Timing`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TimerPool};
    ///
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// let h = pool.submit(Duration::from_millis(2), || "done")?;
    /// let (outcome, timing) = h.wait_timed();
    /// assert_eq!(outcome, Outcome::Completed("done"));
    /// assert!(timing.started.unwrap() >= timing.due, "never early");
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn wait_timed(self) -> (Outcome<T>, Timing) {
        let outcome = self.slot.slot().wait();
        let timing = self
            .slot
            .slot()
            .timing()
            .expect("delivered with the outcome");
        (outcome, timing)
    }

    /// Wait at most `timeout` for the outcome; the handle comes back as the
    /// error if there is none yet.
    ///
    /// # Errors
    ///
    /// The handle itself, when the timeout passed without an outcome.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TimerPool};
    ///
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// let h = pool.schedule(1, Duration::from_secs(3600), || ())?;
    /// let h = h.wait_timeout(Duration::from_millis(1)).unwrap_err(); // not yet
    /// h.cancel();
    /// assert_eq!(h.wait_timeout(Duration::from_secs(1)).unwrap(), Outcome::Cancelled);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn wait_timeout(self, timeout: Duration) -> Result<Outcome<T>, Self> {
        let deadline = Instant::now().checked_add(timeout);
        self.slot.slot().wait_until(deadline).ok_or(self)
    }

    /// The outcome if there is one now; otherwise the handle comes back.
    ///
    /// # Errors
    ///
    /// The handle itself, when the task has no outcome yet.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TimerPool};
    ///
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// let h = pool.schedule(1, Duration::from_secs(3600), || ())?;
    /// let h = h.try_outcome().unwrap_err(); // pending: the handle comes back
    /// h.cancel();
    /// assert_eq!(h.try_outcome().unwrap(), Outcome::Cancelled);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn try_outcome(self) -> Result<Outcome<T>, Self> {
        self.slot.slot().try_take().ok_or(self)
    }
}

/// A handle to a periodic task: its run counters, its final outcome, cancel.
///
/// The final outcome arrives when the task stops: [`Outcome::Cancelled`]
/// (by key or handle), [`Outcome::Replaced`] (its key was scheduled again),
/// [`Outcome::Panicked`] (a run panicked under [`OnPanic::Stop`](crate::OnPanic::Stop)) or
/// [`Outcome::Shutdown`] (any shutdown stops periodic tasks).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::{ManualClock, OnPanic, Outcome, Repeat, TimerPool};
///
/// let clock = ManualClock::new();
/// let pool = TimerPool::<&str>::builder().workers(1).clock(clock.clone()).quiet_panics(true).build()?;
/// let mut n = 0;
/// let every = Repeat::fixed_rate(Duration::from_secs(1)).on_panic(OnPanic::Continue);
/// let h = pool.schedule_repeating("poll", Duration::from_secs(1), every, move || {
///     n += 1;
///     if n == 2 { panic!("second poll failed") }
/// })?;
/// pool.advance(Duration::from_secs(3))?;
/// assert_eq!((h.runs(), h.panics()), (2, 1));
/// assert_eq!(h.last_panic().as_deref(), Some("second poll failed"));
/// assert!(h.last_run().is_some() && h.missed() == 0);
/// assert_eq!(h.key(), Some(&"poll"));
/// assert!(h.cancel() && h.is_finished());
/// assert_eq!(h.wait(), Outcome::Cancelled);
/// # Ok::<(), timerpool::Error>(())
/// ```
pub struct PeriodicHandle<K> {
    /// Shared with the task.
    ctl: Arc<PeriodicCtl>,
    /// The pool, for cancel.
    pool: Weak<Shared<K>>,
    /// The task's key in the heap.
    key: TaskKey<K>,
}

impl<K> fmt::Debug for PeriodicHandle<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeriodicHandle")
            .field("runs", &self.ctl.runs())
            .field("panics", &self.ctl.panics())
            .field("finished", &self.ctl.slot().is_set())
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq + Clone + Send + 'static> PeriodicHandle<K> {
    /// The handle of the periodic task under `key`.
    pub(crate) fn new(ctl: Arc<PeriodicCtl>, pool: Weak<Shared<K>>, key: TaskKey<K>) -> Self {
        PeriodicHandle { ctl, pool, key }
    }

    /// Stop future runs. True iff the task was still live (pending or
    /// running); the final outcome is then [`Outcome::Cancelled`]. A run a
    /// worker already started still completes, and none follows it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, Repeat, TimerPool};
    ///
    /// let pool = TimerPool::<&str>::builder().workers(1).build()?;
    /// let h = pool.schedule_repeating("tick", Duration::from_secs(60), Repeat::fixed_rate(Duration::from_secs(60)), || {})?;
    /// assert!(h.cancel());
    /// assert_eq!(h.wait(), Outcome::Cancelled);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    #[doc(alias = "abort")]
    pub fn cancel(&self) -> bool {
        match self.pool.upgrade() {
            Some(pool) => pool.sending_while(|| pool.cancel_current(&self.key, || self.ctl.seq())),
            None => false,
        }
    }

    /// The key; `None` for keyless periodic tasks.
    pub fn key(&self) -> Option<&K> {
        self.key.keyed()
    }

    /// Runs that returned normally so far.
    pub fn runs(&self) -> u64 {
        self.ctl.runs()
    }

    /// Runs that panicked so far.
    pub fn panics(&self) -> u64 {
        self.ctl.panics()
    }

    /// Ticks that got no run: dropped by [`MissedTicks::Skip`](crate::MissedTicks::Skip), shifted away
    /// by [`MissedTicks::Delay`](crate::MissedTicks::Delay), or skipped as stale.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{ManualClock, MissedTicks, Repeat, TimerPool};
    ///
    /// let clock = ManualClock::new();
    /// let pool = TimerPool::<&str>::builder().workers(1).clock(clock.clone()).build()?;
    /// let every = Repeat::fixed_rate(Duration::from_secs(1)).missed_ticks(MissedTicks::Skip);
    /// let h = pool.schedule_repeating("tick", Duration::from_secs(1), every, || {})?;
    /// clock.advance(Duration::from_millis(3500)); // one jump over three ticks
    /// pool.settle(Duration::from_secs(10))?;
    /// assert_eq!((h.runs(), h.missed()), (1, 2)); // ran once, skipped two
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn missed(&self) -> u64 {
        self.ctl.missed()
    }

    /// The message of the latest panic, if any run panicked.
    pub fn last_panic(&self) -> Option<String> {
        self.ctl.last_panic()
    }

    /// Timing of the latest run.
    pub fn last_run(&self) -> Option<Timing> {
        self.ctl.last_run()
    }

    /// True once the task has stopped.
    pub fn is_finished(&self) -> bool {
        self.ctl.slot().is_set()
    }

    /// Block until the task stops; its final outcome.
    pub fn wait(self) -> Outcome<()> {
        self.ctl.slot().wait()
    }

    /// Wait at most `timeout` for the task to stop.
    ///
    /// # Errors
    ///
    /// The handle itself, when the task is still live after `timeout`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, Repeat, TimerPool};
    ///
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// let h = pool.submit_repeating(Duration::from_secs(60), Repeat::fixed_delay(Duration::from_secs(60)), || {})?;
    /// let h = h.wait_timeout(Duration::from_millis(1)).unwrap_err(); // still live
    /// pool.shutdown();
    /// assert_eq!(h.wait_timeout(Duration::from_secs(1)).unwrap(), Outcome::Shutdown);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn wait_timeout(self, timeout: Duration) -> Result<Outcome<()>, Self> {
        let deadline = Instant::now().checked_add(timeout);
        self.ctl.slot().wait_until(deadline).ok_or(self)
    }
}

/// A handle is a future of its task's outcome, in any executor: awaiting it
/// is [`wait`](TaskHandle::wait) without blocking a thread. The waker is
/// woken once, when the outcome is delivered. Dropping the future (or the
/// handle) does not cancel the task.
///
/// # Panics
///
/// Polled again after it returned the outcome.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::{Outcome, TimerPool};
///
/// let pool = TimerPool::<u64>::builder().workers(1).build()?;
/// let h = pool.schedule(7, Duration::from_millis(1), || 7 * 6)?;
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// assert_eq!(rt.block_on(h), Outcome::Completed(42));
/// # Ok::<(), timerpool::Error>(())
/// ```
impl<T, K> Future for TaskHandle<T, K> {
    type Output = Outcome<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome<T>> {
        self.slot.slot().poll(cx)
    }
}

/// A periodic handle is a future of the task's final outcome, as
/// [`PeriodicHandle::wait`]; dropping it does not cancel the task.
///
/// # Panics
///
/// Polled again after it returned the outcome.
impl<K> Future for PeriodicHandle<K> {
    type Output = Outcome<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome<()>> {
        self.poll_outcome(cx)
    }
}

impl<K> PeriodicHandle<K> {
    /// Poll for the final outcome through a shared reference (a handle
    /// that wraps this one needs no pinning of the key).
    pub(crate) fn poll_outcome(&self, cx: &mut Context<'_>) -> Poll<Outcome<()>> {
        self.ctl.slot().poll(cx)
    }
}
