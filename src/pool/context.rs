//! The task context: what a task's closure can read about its own run (its
//! key, due time, start, attempt, run number) while a worker runs it,
//! without a signature of its own and without a pool-wide listener.
//!
//! # Ground rules
//!
//! - A run sets this thread's current run ([`Running`]) around the call of
//!   its closure, from what the worker already holds for it (`RunCtx`): a
//!   thread-local store before and one after. A task that never asks pays
//!   only that; nothing is cloned, allocated or locked for it.
//! - The key is not copied for the run: it waits in the worker's running
//!   slot, as it does for every run. Each worker registers its pool's
//!   engine once, when it starts ([`Worker`]), weakly, so a task that asks
//!   ([`TaskContext::key`]) finds the slot and clones the key under the
//!   slot's lock.
//! - The context is read on the thread that runs the task, during the run;
//!   a [`TaskContext`] cannot leave that thread (it is not `Send`).

use super::outcome::RunCtx;
use crate::sync::Weak;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::fmt;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

thread_local! {
    /// The run in progress on this thread, if a pool's worker runs a task
    /// here.
    static RUN: Cell<Option<Run>> = const { Cell::new(None) };
    /// This worker thread's pool engine and its index among the workers.
    static WORKER: RefCell<Option<(Weak<dyn RunningKey>, usize)>> = const { RefCell::new(None) };
}

/// What a run tells its task: copied into the thread-local per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    /// When it fell due, on the pool's clock.
    due: Instant,
    /// When its worker started it, on the pool's clock.
    started: Instant,
    /// The attempt (retried task) or run (periodic task) number, from 1.
    n: u64,
    /// What kind of task runs.
    kind: RunKind,
}

/// What kind of task a run belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunKind {
    /// A one-shot task: its first and only attempt.
    Once,
    /// A periodic task's run.
    Periodic,
    /// An attempt of a retried task.
    Retry,
}

/// This thread's current run, set for as long as the value lives. Runs do
/// not nest (a worker runs one task at a time, and a task cannot make its
/// worker run another), so the end of a run clears it.
pub(crate) struct Running(());

impl Running {
    /// The run of a task of `kind` started as `ctx` says; `n` counts its
    /// runs or attempts from 1.
    #[inline]
    pub(crate) fn enter(ctx: &RunCtx, kind: RunKind, n: u64) -> Self {
        let run = Run {
            due: ctx.due_at,
            started: ctx.started,
            n,
            kind,
        };
        RUN.set(Some(run));
        Running(())
    }
}

impl Drop for Running {
    #[inline]
    fn drop(&mut self) {
        RUN.set(None);
    }
}

/// A pool engine, as a task asking for its key reaches it.
pub(crate) trait RunningKey: Send + Sync {
    /// Clone the key in worker `index`'s running slot into `out`, if `out`
    /// is an `Option<K>` of the pool's key type and the task is keyed.
    fn key_into(&self, index: usize, out: &mut dyn Any);
}

/// A worker thread's registration of its pool, for the length of its life.
pub(crate) struct Worker(());

impl Worker {
    /// Register `pool` (the engine, as a task asking for its key reaches
    /// it) as the pool of this thread, worker `index`.
    pub(crate) fn enter(pool: Weak<dyn RunningKey>, index: usize) -> Self {
        let weak = pool;
        WORKER.with(|w| *w.borrow_mut() = Some((weak, index)));
        Worker(())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Taken out first: the `Weak` is dropped outside the borrow.
        let registered = WORKER.with(|w| w.borrow_mut().take());
        drop(registered);
    }
}

/// What a task running on a pool's worker can read about its own run: its
/// key, when it fell due and started, and which attempt (retried task) or
/// run (periodic task) this is. Read it from inside the task's closure with
/// [`TaskContext::current`]; outside a run there is none.
///
/// The closure keeps its signature, and a task that never asks costs the
/// pool two thread-local stores per run; nothing is copied for it. A
/// rescheduled task reads its new due time here, where a deadline its
/// closure captured would be stale. A `TaskContext` stays on the thread of
/// the run (it is not `Send`).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::{Outcome, TaskContext, TimerPool};
///
/// let pool = TimerPool::<String>::builder().workers(1).build()?;
/// let h = pool.schedule("session-7".to_string(), Duration::from_millis(1), || {
///     let ctx = TaskContext::current().expect("run by the pool");
///     let key: String = ctx.key().expect("keyed by a String");
///     format!("{key} expired {:?} late, attempt {}", ctx.lateness(), ctx.attempt())
/// })?;
/// let Outcome::Completed(line) = h.wait() else { panic!() };
/// assert!(line.starts_with("session-7 expired") && line.ends_with("attempt 1"));
/// assert!(TaskContext::current().is_none(), "no run on this thread");
/// # Ok::<(), timerpool::Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TaskContext {
    /// The run, as the thread-local held it when read.
    run: Run,
    /// Not `Send`: the key is read from the thread of the run.
    _here: PhantomData<*const ()>,
}

impl fmt::Debug for TaskContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskContext")
            .field("due", &self.run.due)
            .field("started", &self.run.started)
            .field("attempt", &self.attempt())
            .field("run_count", &self.run_count())
            .finish()
    }
}

impl TaskContext {
    /// The context of the task this thread is running for a pool, or
    /// `None` outside such a run (on any other thread, or before and after
    /// it).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TaskContext, TimerPool};
    ///
    /// assert!(TaskContext::current().is_none());
    /// let pool = TimerPool::<u32>::builder().workers(1).build()?;
    /// let h = pool.submit(Duration::ZERO, || TaskContext::current().is_some())?;
    /// assert_eq!(h.wait(), Outcome::Completed(true));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn current() -> Option<TaskContext> {
        RUN.get().map(|run| TaskContext {
            run,
            _here: PhantomData,
        })
    }

    /// When the run fell due, on the pool's clock: for a rescheduled task
    /// its latest due time, for a periodic task this run's tick, for a
    /// retried task this attempt's.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{ManualClock, Outcome, TaskContext, TimerPool};
    ///
    /// let clock = ManualClock::new();
    /// let pool = TimerPool::<&str>::builder().workers(1).clock(clock.clone()).build()?;
    /// let h = pool.schedule("lease", Duration::from_secs(30), || TaskContext::current().unwrap().due())?;
    /// pool.reschedule("lease", Duration::from_secs(60))?; // the closure is kept
    /// let renewed = pool.due_of("lease").unwrap();
    /// clock.advance(Duration::from_secs(60));
    /// assert_eq!(h.wait(), Outcome::Completed(renewed));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn due(&self) -> Instant {
        self.run.due
    }

    /// When its worker started the run, on the pool's clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TaskContext, TimerPool};
    /// let pool = TimerPool::<u32>::builder().workers(1).build()?;
    /// let h = pool.submit(Duration::from_millis(1), || {
    ///     let ctx = TaskContext::current().unwrap();
    ///     ctx.started() >= ctx.due()
    /// })?;
    /// assert_eq!(h.wait(), Outcome::Completed(true), "never before its due time");
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn started(&self) -> Instant {
        self.run.started
    }

    /// How late the run started: [`started`](Self::started) less
    /// [`due`](Self::due).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{ManualClock, Outcome, TaskContext, TimerPool};
    /// let clock = ManualClock::new();
    /// let pool = TimerPool::<u32>::builder().workers(1).clock(clock.clone()).build()?;
    /// let h = pool.submit(Duration::from_secs(1), || TaskContext::current().unwrap().lateness())?;
    /// clock.advance(Duration::from_secs(3)); // the clock jumps past the due time
    /// assert_eq!(h.wait(), Outcome::Completed(Duration::from_secs(2)));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn lateness(&self) -> Duration {
        self.run.started.saturating_duration_since(self.run.due)
    }

    /// Which attempt this is, from 1: for a task of
    /// [`schedule_retrying`](crate::TimerPool::schedule_retrying), the
    /// attempts made so far and this one; 1 for any other task.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, Retry, TaskContext, TimerPool};
    /// let pool = TimerPool::<&str>::builder().workers(1).build()?;
    /// let retry = Retry::fixed(5, Duration::from_millis(1));
    /// let h = pool.schedule_retrying("upload", Duration::ZERO, retry, || {
    ///     match TaskContext::current().unwrap().attempt() {
    ///         n if n < 3 => Err(n),
    ///         n => Ok(n),
    ///     }
    /// })?;
    /// assert_eq!(h.wait().outcome, Outcome::Completed(Ok(3)));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn attempt(&self) -> u32 {
        match self.run.kind {
            RunKind::Retry => u32::try_from(self.run.n).unwrap_or(u32::MAX),
            RunKind::Once | RunKind::Periodic => 1,
        }
    }

    /// For a periodic task (repeating or dynamic), which run this is, from
    /// 1: the runs that returned or panicked before it, and this one (a
    /// tick skipped as stale or missed is no run); `None` for any other
    /// task.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Next, Outcome, Repeat, TaskContext, TimerPool};
    /// let pool = TimerPool::<&str>::builder().workers(1).build()?;
    /// let every = Repeat::fixed_delay(Duration::from_millis(1));
    /// let h = pool.schedule_dynamic("poll", Duration::ZERO, every, move || {
    ///     match TaskContext::current().unwrap().run_count() {
    ///         Some(n) if n < 3 => Next::OnSchedule,
    ///         Some(_) => Next::Stop, // after its third run
    ///         None => unreachable!("a periodic task counts its runs"),
    ///     }
    /// })?;
    /// assert_eq!(h.wait(), Outcome::Completed(()));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn run_count(&self) -> Option<u64> {
        match self.run.kind {
            RunKind::Periodic => Some(self.run.n),
            RunKind::Once | RunKind::Retry => None,
        }
    }

    /// The task's key, cloned, if the task is keyed and `K` is the pool's
    /// key type; `None` for a keyless task, another type, or when no run is
    /// in progress on this thread. The key is cloned only here, under the
    /// worker's lock on its running slot (a panic in `K::clone` unwinds
    /// into the task).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TaskContext, TimerPool};
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// let keyed = pool.schedule(42, Duration::ZERO, || TaskContext::current()?.key::<u64>())?;
    /// assert_eq!(keyed.wait(), Outcome::Completed(Some(42)));
    /// let keyless = pool.submit(Duration::ZERO, || TaskContext::current()?.key::<u64>())?;
    /// assert_eq!(keyless.wait(), Outcome::Completed(None));
    /// let wrong_type = pool.schedule(7, Duration::ZERO, || TaskContext::current()?.key::<String>())?;
    /// assert_eq!(wrong_type.wait(), Outcome::Completed(None));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn key<K: 'static>(&self) -> Option<K> {
        RUN.get()?;
        let (engine, index) = WORKER.with(|w| w.borrow().clone())?;
        let mut out: Option<K> = None;
        engine.upgrade()?.key_into(index, &mut out);
        out
    }
}
