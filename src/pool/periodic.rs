//! Periodic tasks: fixed rate or fixed delay, with missed-tick and panic
//! policies.
//!
//! A periodic task is one heap entry under its key, like any task. When the
//! leader claims it, it leaves a *stand-in* under the same key (due never), so
//! that `cancel` and `schedule` on the key still find the task while it runs.
//! After the run, the worker swaps the task back in for its stand-in at the
//! next due time, under the pool lock, only if the stand-in is still there;
//! whoever removed the stand-in (cancel, replace, shutdown) delivered the
//! task's final outcome. So a run never overlaps the previous one, and
//! exactly one final outcome is delivered.

use super::outcome::{Abandon, Outcome, OutcomeSlot, Timing};
use super::task::{drop_quietly, panic_message, BoxJob, Job, Next, Ran, RunCtx};
use super::{Shared, TaskKey};
use crate::sync::{Arc, AtomicU64, Mutex, Ordering, Weak};
use crate::Error;
use std::fmt;
use std::hash::Hash;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

/// What a fixed-rate task does about ticks that passed while it could not run
/// (a slow run, busy workers, a stalled machine).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissedTicks {
    /// Run every missed tick, back to back, until caught up (Java's
    /// `scheduleAtFixedRate`). A long stall becomes a burst of runs.
    Burst,
    /// Shift the schedule: the next run is one period after the late run
    /// finished.
    Delay,
    /// Drop the missed ticks and run at the next tick of the original
    /// schedule still in the future. The default: no burst after a stall, and
    /// the task keeps its phase.
    #[default]
    Skip,
}

/// What a periodic task does when one of its runs panics. Either way the
/// panic is counted and its message kept ([`PeriodicHandle::panics`],
/// [`PeriodicHandle::last_panic`]): never silent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnPanic {
    /// Stop; the handle's final outcome is [`Outcome::Panicked`]. The default,
    /// so a broken task does not keep failing unseen.
    #[default]
    Stop,
    /// Keep the schedule and run again at the next due time.
    Continue,
}

/// How a periodic task repeats.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::{MissedTicks, OnPanic, Repeat};
/// let every_second = Repeat::fixed_rate(Duration::from_secs(1))
///     .missed_ticks(MissedTicks::Delay)
///     .on_panic(OnPanic::Continue);
/// # let _ = every_second;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeat {
    /// Fixed rate or fixed delay.
    kind: Kind,
    /// Nanoseconds of the period or delay.
    every: Duration,
    /// Missed-tick policy (fixed rate only).
    missed: MissedTicks,
    /// Panic policy.
    on_panic: OnPanic,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Runs at `first + k * period`.
    FixedRate,
    /// Runs `delay` after the previous run finished.
    FixedDelay,
}

impl Repeat {
    /// Run at `first`, `first + period`, `first + 2 * period`, ...
    /// Default policies: [`MissedTicks::Skip`], [`OnPanic::Stop`].
    pub fn fixed_rate(period: Duration) -> Self {
        Repeat {
            kind: Kind::FixedRate,
            every: period,
            missed: MissedTicks::default(),
            on_panic: OnPanic::default(),
        }
    }

    /// Run at `first`, then `delay` after each run finishes.
    /// Default policy: [`OnPanic::Stop`].
    pub fn fixed_delay(delay: Duration) -> Self {
        Repeat {
            kind: Kind::FixedDelay,
            every: delay,
            missed: MissedTicks::default(),
            on_panic: OnPanic::default(),
        }
    }

    /// The missed-tick policy of a fixed-rate task (ignored for fixed delay).
    pub fn missed_ticks(mut self, policy: MissedTicks) -> Self {
        self.missed = policy;
        self
    }

    /// The panic policy.
    pub fn on_panic(mut self, policy: OnPanic) -> Self {
        self.on_panic = policy;
        self
    }

    /// The period or delay in nanoseconds, checked.
    pub(crate) fn every_ns(&self) -> Result<i64, Error> {
        if self.every.is_zero() {
            return Err(Error::ZeroPeriod);
        }
        i64::try_from(self.every.as_nanos()).map_err(|_| Error::TimeOutOfRange)
    }
}

/// Shared by a periodic task, its stand-in and its handle.
pub(crate) struct PeriodicCtl {
    /// The final outcome.
    slot: OutcomeSlot<()>,
    /// Heap stamp of the task's current entry (itself or its stand-in).
    /// Read and written only under the pool lock.
    seq: AtomicU64,
    /// Runs that returned.
    runs: AtomicU64,
    /// Runs that panicked.
    panics: AtomicU64,
    /// Ticks that got no run (skipped, shifted or stale).
    missed: AtomicU64,
    /// Message of the latest panic.
    last_panic: Mutex<Option<String>>,
    /// Timing of the latest run.
    last_run: Mutex<Option<Timing>>,
}

impl PeriodicCtl {
    pub(crate) fn new(first: Instant) -> Self {
        PeriodicCtl {
            slot: OutcomeSlot::new(first),
            seq: AtomicU64::new(u64::MAX),
            runs: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            missed: AtomicU64::new(0),
            last_panic: Mutex::new(None),
            last_run: Mutex::new(None),
        }
    }

    pub(crate) fn seq(&self) -> u64 {
        self.seq.load(Ordering::Relaxed)
    }

    pub(crate) fn set_seq(&self, seq: u64) {
        self.seq.store(seq, Ordering::Relaxed);
    }
}

/// A periodic task in the heap.
pub(crate) struct PeriodicJob<F> {
    /// The user's closure.
    f: F,
    /// Shared with the stand-in and the handle.
    ctl: Arc<PeriodicCtl>,
    /// How it repeats.
    repeat: Repeat,
    /// `repeat.every` in nanoseconds.
    every: i64,
}

impl<F> PeriodicJob<F> {
    pub(crate) fn new(f: F, ctl: Arc<PeriodicCtl>, repeat: Repeat, every: i64) -> Self {
        PeriodicJob {
            f,
            ctl,
            repeat,
            every,
        }
    }

    /// The next due time after the run for `due` ended at `now`, and how
    /// many ticks got no run.
    fn next_due(&self, due: i64, now: i64) -> (i64, u64) {
        let p = self.every;
        let (next, missed) = match self.repeat.kind {
            Kind::FixedDelay => (now.saturating_add(p), 0),
            Kind::FixedRate => {
                let nominal = due.saturating_add(p);
                if nominal > now {
                    (nominal, 0)
                } else {
                    // Ticks at nominal, nominal + p, ... up to now have passed.
                    let passed = ((now - nominal) / p) as u64 + 1;
                    match self.repeat.missed {
                        MissedTicks::Burst => (nominal, 0),
                        MissedTicks::Delay => (now.saturating_add(p), passed),
                        MissedTicks::Skip => (
                            nominal.saturating_add((passed as i64).saturating_mul(p)),
                            passed,
                        ),
                    }
                }
            }
        };
        // i64::MAX is the stand-ins' "never"; a real entry stays below it.
        (next.min(i64::MAX - 1), missed)
    }
}

/// The stand-in a periodic task leaves under its key while it runs.
struct StandIn {
    /// The task's shared state.
    ctl: Arc<PeriodicCtl>,
}

impl<K> Job<K> for StandIn {
    fn run(self: Box<Self>, _: &RunCtx, _: &dyn Fn() -> (Instant, i64)) -> (Ran, Next<K>) {
        unreachable!("a stand-in is due never and is never claimed")
    }

    fn expire(self: Box<Self>, _: &RunCtx) -> Next<K> {
        unreachable!("a stand-in is due never and is never claimed")
    }

    fn abandon(self: Box<Self>, why: Abandon) {
        self.ctl.slot.set(why.into(), Timing::unclaimed());
    }

    fn is_stand_in(&self) -> bool {
        true
    }

    fn is_periodic(&self) -> bool {
        true
    }

    fn set_seq(&self, seq: u64) {
        self.ctl.set_seq(seq);
    }
}

impl<K, F> Job<K> for PeriodicJob<F>
where
    F: FnMut() + Send + 'static,
{
    fn run(
        mut self: Box<Self>,
        ctx: &RunCtx,
        finished: &dyn Fn() -> (Instant, i64),
    ) -> (Ran, Next<K>) {
        let result = catch_unwind(AssertUnwindSafe(&mut self.f));
        let (end, end_ns) = finished();
        *self.ctl.last_run.lock() = Some(Timing {
            due: ctx.due_at,
            claimed: Some(ctx.claimed),
            started: Some(ctx.started),
            finished: Some(end),
        });
        let (next, missed) = self.next_due(ctx.due, end_ns);
        self.ctl.missed.fetch_add(missed, Ordering::Relaxed);
        match result {
            Ok(()) => {
                self.ctl.runs.fetch_add(1, Ordering::Relaxed);
                (
                    Ran::Completed,
                    Next::Again {
                        due: next,
                        job: self,
                    },
                )
            }
            Err(payload) => {
                let msg = panic_message(payload);
                self.ctl.panics.fetch_add(1, Ordering::Relaxed);
                *self.ctl.last_panic.lock() = Some(msg.clone());
                match self.repeat.on_panic {
                    OnPanic::Stop => (
                        Ran::Panicked,
                        Next::Stop {
                            job: self,
                            outcome: Outcome::Panicked(msg),
                        },
                    ),
                    OnPanic::Continue => (
                        Ran::Panicked,
                        Next::Again {
                            due: next,
                            job: self,
                        },
                    ),
                }
            }
        }
    }

    fn expire(self: Box<Self>, ctx: &RunCtx) -> Next<K> {
        let (next, missed) = self.next_due(ctx.due, ctx.started_ns);
        self.ctl.missed.fetch_add(missed + 1, Ordering::Relaxed);
        Next::Again {
            due: next,
            job: self,
        }
    }

    fn abandon(self: Box<Self>, why: Abandon) {
        let PeriodicJob { f, ctl, .. } = *self;
        drop_quietly(f);
        ctl.slot.set(why.into(), Timing::unclaimed());
    }

    fn stand_in(&self) -> Option<BoxJob<K>> {
        Some(Box::new(StandIn {
            ctl: self.ctl.clone(),
        }))
    }

    fn is_periodic(&self) -> bool {
        true
    }

    fn finish(self: Box<Self>, outcome: Outcome<()>) {
        let PeriodicJob { f, ctl, .. } = *self;
        drop_quietly(f);
        let timing = ctl
            .last_run
            .lock()
            .map(|t| super::outcome::Stamps::from(&t));
        ctl.slot.set(outcome, timing.unwrap_or_default());
    }

    fn set_seq(&self, seq: u64) {
        self.ctl.set_seq(seq);
    }

    fn seq(&self) -> u64 {
        self.ctl.seq()
    }
}

/// A handle to a periodic task: its run counters, its final outcome, cancel.
///
/// The final outcome arrives when the task stops: [`Outcome::Cancelled`]
/// (by key or handle), [`Outcome::Replaced`] (its key was scheduled again),
/// [`Outcome::Panicked`] (a run panicked under [`OnPanic::Stop`]) or
/// [`Outcome::Shutdown`] (any shutdown stops periodic tasks).
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
            .field("runs", &self.ctl.runs.load(Ordering::Relaxed))
            .field("panics", &self.ctl.panics.load(Ordering::Relaxed))
            .field("finished", &self.ctl.slot.is_set())
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq + Clone + Send + 'static> PeriodicHandle<K> {
    pub(crate) fn new(ctl: Arc<PeriodicCtl>, pool: Weak<Shared<K>>, key: TaskKey<K>) -> Self {
        PeriodicHandle { ctl, pool, key }
    }

    /// Stop future runs. True iff the task was still live (pending or
    /// running); the final outcome is then [`Outcome::Cancelled`]. A run the
    /// leader already claimed (about to start, or running) still happens, and
    /// none follows it.
    pub fn cancel(&self) -> bool {
        match self.pool.upgrade() {
            Some(pool) => pool.cancel_periodic(&self.key, &self.ctl),
            None => false,
        }
    }

    /// The key; `None` for keyless periodic tasks.
    pub fn key(&self) -> Option<&K> {
        match &self.key {
            TaskKey::Keyed(k) => Some(k),
            TaskKey::Anon(_) => None,
        }
    }

    /// Runs that returned normally so far.
    pub fn runs(&self) -> u64 {
        self.ctl.runs.load(Ordering::Relaxed)
    }

    /// Runs that panicked so far.
    pub fn panics(&self) -> u64 {
        self.ctl.panics.load(Ordering::Relaxed)
    }

    /// Ticks that got no run: dropped by [`MissedTicks::Skip`], shifted away
    /// by [`MissedTicks::Delay`], or skipped as stale.
    pub fn missed(&self) -> u64 {
        self.ctl.missed.load(Ordering::Relaxed)
    }

    /// The message of the latest panic, if any run panicked.
    pub fn last_panic(&self) -> Option<String> {
        self.ctl.last_panic.lock().clone()
    }

    /// Timing of the latest run.
    pub fn last_run(&self) -> Option<Timing> {
        *self.ctl.last_run.lock()
    }

    /// True once the task has stopped.
    pub fn is_finished(&self) -> bool {
        self.ctl.slot.is_set()
    }

    /// Block until the task stops; its final outcome.
    pub fn wait(self) -> Outcome<()> {
        self.ctl.slot.wait()
    }

    /// Wait at most `timeout` for the task to stop.
    ///
    /// # Errors
    ///
    /// The handle itself, when the task is still live after `timeout`.
    pub fn wait_timeout(self, timeout: Duration) -> Result<Outcome<()>, Self> {
        let deadline = Instant::now().checked_add(timeout);
        self.ctl.slot.wait_until(deadline).ok_or(self)
    }
}
