//! The ways to add work (protocol step 6 seen from the caller): one-shot,
//! detached, repeating, dynamic and batch scheduling, keyed and keyless,
//! and the one path they share into the intake (`intake.rs`). The method
//! map is in [`TimerPool`]'s docs.

use super::intake::{Arrival, Stamp};
use super::periodic::{Next, PeriodicCtl, PeriodicJob, Repeat};
use super::task::{once_job, Joint, SlotOf, Task, TaskKey, Watched};
use super::time::Due;
#[cfg(feature = "tracing")]
use super::trace;
use super::wall::WallTicks;
use super::{PeriodicHandle, Refused, TaskHandle, TimerPool};
use crate::contain::drop_quietly;
use crate::sync::Arc;
use crate::Error;
use std::cell::OnceCell;
use std::hash::Hash;

impl<K: Hash + Eq + Clone + Send + 'static> TimerPool<K> {
    /// Run `f` when `when` comes (never before) under `key`. A pending task
    /// under `key` is replaced atomically: its outcome becomes
    /// [`Outcome::Replaced`](crate::Outcome::Replaced). If `key`'s task is already running, this adds
    /// new pending work.
    ///
    /// # Errors
    ///
    /// [`Error::ShutDown`](crate::Error::ShutDown) after a shutdown, [`Error::CapacityReached`] for a
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
    #[doc(alias = "insert", alias = "insert_at")]
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
    #[doc(alias = "execute", alias = "execute_after")]
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
    #[doc(alias = "execute")]
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
    /// With a calendar ([`Repeat::cron`], [`Repeat::calendar`]) the first
    /// run is the calendar's first tick at or after `first`.
    ///
    /// # Errors
    ///
    /// As [`schedule`](Self::schedule), and [`Error::ZeroPeriod`];
    /// [`Error::TimeOutOfRange`] for a calendar with no tick from `first`
    /// on.
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
    #[doc(alias = "scheduleAtFixedRate", alias = "scheduleWithFixedDelay")]
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
    /// pool.advance(Duration::from_secs(3))?;
    /// assert_eq!(h.runs(), 3);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    #[doc(
        alias = "execute_at_fixed_rate",
        alias = "execute_with_fixed_delay",
        alias = "scheduleAtFixedRate",
        alias = "scheduleWithFixedDelay"
    )]
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
    /// run), [`Next::Stop`] (final outcome [`Outcome::Completed`](crate::Outcome::Completed)), or
    /// [`Next::OnSchedule`] to run as `repeat` says. Otherwise it is a
    /// periodic task like any other: one [`PeriodicHandle`], the same
    /// cancel, replace, panic policy and shutdown rules. `repeat` also says
    /// when it runs after a panic under [`OnPanic::Continue`](crate::OnPanic::Continue) and after a
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
    /// pool.advance(Duration::from_secs(10))?;
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
    /// pool.advance(Duration::from_secs(10))?;
    /// assert_eq!(h.wait(), Outcome::Completed(()));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    #[doc(
        alias = "execute_with_dynamic_delay",
        alias = "execute_at_dynamic_rate"
    )]
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
    /// earlier handle reports [`Outcome::Replaced`](crate::Outcome::Replaced)). All or none: on error
    /// nothing is scheduled and every closure is dropped.
    ///
    /// # Errors
    ///
    /// [`Error::TimeOutOfRange`] if any due time is out of range,
    /// [`Error::ShutDown`](crate::Error::ShutDown) after a shutdown, and [`Error::CapacityReached`]
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
            let joint = Arc::new(Joint::new(
                f,
                self.shared.time.instant_of(due),
                self.shared.faults,
            ));
            made.push((joint.clone() as Arc<dyn SlotOf<T>>, key.clone()));
            Task::Watched(Watched::new(joint))
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
        let arrivals = self.arrivals(tasks, |_, _, f| Task::Once(once_job(f)))?;
        let n = arrivals.len();
        self.admit_counted(arrivals.into_iter(), |_, _| {})?;
        Ok(n)
    }

    /// A one-shot task with a handle: the `try_` form, with a refused
    /// closure dropped (contained).
    pub(super) fn add_once<F, T>(
        &self,
        key: TaskKey<K>,
        when: Due,
        f: F,
    ) -> Result<TaskHandle<T, K>, Error>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.try_add_once(key, when, f)
            .map_err(Refused::drop_closure)
    }

    /// A one-shot task without a handle: the `try_` form, with a refused
    /// closure dropped (contained).
    pub(super) fn add_detached<F>(&self, key: TaskKey<K>, when: Due, f: F) -> Result<(), Error>
    where
        F: FnOnce() + Send + 'static,
    {
        self.try_add_detached(key, when, f)
            .map_err(Refused::drop_closure)
    }

    /// A periodic task; its shared state records its stamp under the lock.
    pub(super) fn add_repeating<F>(
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
    pub(super) fn add_periodic<F>(
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
        let (every, mut due) = match checked {
            Ok(v) => v,
            Err(e) => return Err(self.refuse(f, e)),
        };
        // A calendar task starts at its calendar's first tick from `first` on.
        let mut wall = None;
        if let Some(calendar) = repeat.calendar_of() {
            let (clock, now) = (self.shared.time.shared_clock(), self.shared.time.now());
            match WallTicks::start(calendar.clone(), clock, due, now.ns) {
                Some((ticks, Some(at))) => (wall, due) = (Some(ticks), at),
                _ => return Err(self.refuse(f, Error::TimeOutOfRange)),
            }
        }
        let ctl = PeriodicCtl::new(self.shared.time.instant_of(due), self.shared.faults);
        let ctl = Arc::new(if retry { ctl.for_retry() } else { ctl });
        let job = PeriodicJob::new(Box::new(f), ctl.clone(), repeat, every);
        let job = match wall {
            Some(ticks) => job.on_calendar(ticks),
            None => job,
        };
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
    pub(super) fn arrivals<I, D, F>(
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
    pub(super) fn admit_single(
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
    pub(super) fn admit_counted(
        &self,
        arrivals: impl ExactSizeIterator<Item = Arrival<K>>,
        stamped: impl FnMut(usize, Stamp),
    ) -> Result<(), Error> {
        let n = arrivals.len() as u64;
        // A replace reports the task it removed: the stream stays open.
        let admitted = self
            .shared
            .sending_while(|| self.shared.admit(arrivals, stamped));
        admitted.inspect_err(|_e| {
            self.shared.counters.refused(n);
            #[cfg(feature = "tracing")]
            trace::refused(n, _e);
        })
    }

    /// `when` in the pool's nanoseconds.
    pub(super) fn due_ns(&self, when: Due) -> Result<i64, Error> {
        self.shared.time.due_ns(when, || self.shared.time.now())
    }

    /// Refuse a call before its task was built: count it, drop the closure
    /// (containing a panic from its `Drop`), and give the error back.
    pub(super) fn refuse<F>(&self, f: F, e: Error) -> Error {
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
