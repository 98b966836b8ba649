//! Periodic tasks: fixed rate, fixed delay or a calendar, with missed-tick
//! and panic policies.
//!
//! A periodic task is one heap entry under its key, like any task. When a
//! worker starts it, it leaves a *stand-in* under the same key (due never),
//! so that `cancel` and `schedule` on the key still find the task while it
//! runs (protocol step 10: `worker::start_entry` puts it there,
//! `worker::after_run` swaps the task back). After the run, the worker swaps the task back in for
//! its stand-in at the next due time, under the pool lock, only if the
//! stand-in is still there; whoever removed the stand-in (cancel, replace,
//! shutdown) delivered the task's final outcome. So a run never overlaps the
//! previous one, and exactly one final outcome is delivered.
//!
//! This file holds the policies, the task between runs ([`PeriodicJob`]) and
//! what it shares with its stand-in and its handle ([`PeriodicCtl`]); it
//! touches no pool state. A calendar task's place on the wall clock is in
//! `wall.rs`.

use super::context::{RunKind, Running};
use super::fault::Faults;
use super::outcome::{Abandon, Outcome, OutcomeSlot, Ran, RunCtx, Stamps, Timing, LOST};
use super::time::{nanos, Now, NEVER};
use super::wall::{Then, Wake, WallTicks};
use crate::calendar::Calendar;
use crate::contain::{drop_quietly, panic_message};
use crate::sync::{Arc, AtomicU64, Mutex, Ordering};
use crate::Error;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

/// What a fixed-rate or calendar task does about ticks that passed while it
/// could not run (a slow run, busy workers, a stalled or suspended machine,
/// a wall clock stepped forward). The late run itself happens either way;
/// the policy decides what follows it.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::{MissedTicks, Repeat};
/// // After a stall, run each missed tick back to back, as Java does.
/// let catch_up = Repeat::fixed_rate(Duration::from_secs(1)).missed_ticks(MissedTicks::Burst);
/// # let _ = catch_up;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissedTicks {
    /// Run every missed tick, back to back, until caught up (Java's
    /// `scheduleAtFixedRate`). A long stall becomes a burst of runs.
    Burst,
    /// Shift the schedule: the next run is one period after the late run
    /// finished. A calendar has no period to shift by: for it this is
    /// [`Skip`](Self::Skip).
    Delay,
    /// Drop the missed ticks and run at the next tick of the original
    /// schedule still in the future. The default: no burst after a stall, and
    /// the task keeps its phase (a calendar task, its calendar).
    #[default]
    Skip,
}

/// What a periodic task does when one of its runs panics. Either way the
/// panic is counted and its message kept ([`PeriodicHandle::panics`](crate::PeriodicHandle::panics),
/// [`PeriodicHandle::last_panic`](crate::PeriodicHandle::last_panic)): never silent.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::{OnPanic, Repeat};
/// // A metrics flush that should survive a bad run.
/// let keep_going = Repeat::fixed_delay(Duration::from_secs(10)).on_panic(OnPanic::Continue);
/// # let _ = keep_going;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnPanic {
    /// Stop; the handle's final outcome is [`Outcome::Panicked`]. The default,
    /// so a broken task does not keep failing unseen.
    #[default]
    Stop,
    /// Keep the schedule and run again at the next due time.
    Continue,
}

/// How a periodic task repeats: at a fixed rate, with a fixed delay
/// between runs, or on a [`Calendar`] (a cron expression in a time zone).
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repeat {
    /// Fixed rate, fixed delay or calendar.
    kind: Kind,
    /// The period or delay (zero for a calendar).
    every: Duration,
    /// Missed-tick policy (fixed rate and calendar).
    missed: MissedTicks,
    /// Panic policy.
    on_panic: OnPanic,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// Runs at `first + k * period`.
    FixedRate,
    /// Runs `delay` after the previous run finished.
    FixedDelay,
    /// Runs at the calendar's ticks on the wall clock (`wall.rs`).
    Calendar(Box<Calendar>),
}

impl Repeat {
    /// Run at `first`, `first + period`, `first + 2 * period`, ...
    /// Default policies: [`MissedTicks::Skip`], [`OnPanic::Stop`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{MissedTicks, Repeat};
    /// let every_second = Repeat::fixed_rate(Duration::from_secs(1)).missed_ticks(MissedTicks::Delay);
    /// # let _ = every_second;
    /// ```
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
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::Repeat;
    /// let a_second_after_each_run = Repeat::fixed_delay(Duration::from_secs(1));
    /// # let _ = a_second_after_each_run;
    /// ```
    pub fn fixed_delay(delay: Duration) -> Self {
        Repeat {
            kind: Kind::FixedDelay,
            every: delay,
            missed: MissedTicks::default(),
            on_panic: OnPanic::default(),
        }
    }

    /// Run at the ticks of `calendar`, on the pool clock's wall time
    /// ([`Clock::wall_time`](crate::Clock::wall_time)). The first run is
    /// the calendar's first tick at or after the `first` the task is
    /// scheduled with (pass `Duration::ZERO` for "from now"); each next
    /// tick is the calendar's first after the previous one, so the task
    /// does not drift. Default policies: [`MissedTicks::Skip`],
    /// [`OnPanic::Stop`]. A calendar whose ticks run out ends the task with
    /// [`Outcome::Completed`].
    ///
    /// The rules across daylight-saving changes are [`Calendar`]'s; how
    /// the task follows a step of the wall clock is in `docs/semantics.md`
    /// ("Calendar schedules").
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Calendar, Repeat, TimerPool};
    ///
    /// let pool = TimerPool::<&str>::builder().workers(1).build()?;
    /// let weekdays = Calendar::new("0 9 * * MON-FRI", "Europe/Berlin")?;
    /// let report = pool.schedule_repeating("report", Duration::ZERO, Repeat::calendar(weekdays), || {
    ///     // build and send the report
    /// })?;
    /// assert!(report.cancel());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn calendar(calendar: Calendar) -> Self {
        Repeat {
            kind: Kind::Calendar(Box::new(calendar)),
            every: Duration::ZERO,
            missed: MissedTicks::default(),
            on_panic: OnPanic::default(),
        }
    }

    /// [`Repeat::calendar`] on `Calendar::new(expression, zone)`: run at the
    /// ticks of a cron expression in an IANA time zone.
    ///
    /// # Errors
    ///
    /// As [`Calendar::new`]: a [`CalendarError`](crate::CalendarError) that
    /// names the bad expression or the unknown zone and says why.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{MissedTicks, Repeat, TimerPool};
    ///
    /// let pool = TimerPool::<&str>::builder().workers(1).build()?;
    /// let quarter_hours = Repeat::cron("*/15 9-17 * * MON-FRI", "America/New_York")?
    ///     .missed_ticks(MissedTicks::Skip);
    /// let h = pool.schedule_repeating("poll", Duration::ZERO, quarter_hours, || {})?;
    /// assert!(h.cancel());
    /// assert!(Repeat::cron("0 9 * * *", "America/Gotham").is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cron(expression: &str, zone: &str) -> Result<Self, crate::CalendarError> {
        Calendar::new(expression, zone).map(Repeat::calendar)
    }

    /// The missed-tick policy of a fixed-rate or calendar task (ignored for
    /// fixed delay).
    pub fn missed_ticks(mut self, policy: MissedTicks) -> Self {
        self.missed = policy;
        self
    }

    /// The panic policy.
    pub fn on_panic(mut self, policy: OnPanic) -> Self {
        self.on_panic = policy;
        self
    }

    /// The calendar of a calendar task.
    pub(crate) fn calendar_of(&self) -> Option<&Calendar> {
        match &self.kind {
            Kind::Calendar(c) => Some(c),
            _ => None,
        }
    }

    /// The period or delay in nanoseconds, checked (zero for a calendar,
    /// which has none).
    pub(crate) fn every_ns(&self) -> Result<i64, Error> {
        if matches!(self.kind, Kind::Calendar(_)) {
            return Ok(0);
        }
        if self.every.is_zero() {
            return Err(Error::ZeroPeriod);
        }
        nanos(self.every).ok_or(Error::TimeOutOfRange)
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
    /// A retried one-shot task (`retry.rs`), not a schedule: with
    /// `drain_follow_ups` a graceful shutdown lets it finish.
    retry: bool,
}

impl PeriodicCtl {
    /// The shared state of a task first due at `first`.
    pub(crate) fn new(first: Instant, faults: Faults) -> Self {
        PeriodicCtl {
            slot: OutcomeSlot::new(first, faults),
            seq: AtomicU64::new(0),
            runs: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            missed: AtomicU64::new(0),
            last_panic: Mutex::new(None),
            last_run: Mutex::new(None),
            retry: false,
        }
    }

    /// Mark it a retried one-shot task.
    pub(crate) fn for_retry(mut self) -> Self {
        self.retry = true;
        self
    }

    /// True for a retried one-shot task.
    pub(crate) fn is_retry(&self) -> bool {
        self.retry
    }

    /// The stamp of the task's current entry (under the pool lock).
    pub(crate) fn seq(&self) -> u64 {
        self.seq.load(Ordering::Relaxed)
    }

    /// Record the stamp of the task's current entry (under the pool lock).
    pub(crate) fn set_seq(&self, seq: u64) {
        self.seq.store(seq, Ordering::Relaxed);
    }

    /// The final outcome's slot.
    pub(crate) fn slot(&self) -> &OutcomeSlot<()> {
        &self.slot
    }

    /// Runs that returned.
    pub(crate) fn runs(&self) -> u64 {
        self.runs.load(Ordering::Relaxed)
    }

    /// Runs that panicked.
    pub(crate) fn panics(&self) -> u64 {
        self.panics.load(Ordering::Relaxed)
    }

    /// Ticks that got no run.
    pub(crate) fn missed(&self) -> u64 {
        self.missed.load(Ordering::Relaxed)
    }

    /// The latest panic's message.
    pub(crate) fn last_panic(&self) -> Option<String> {
        self.last_panic.lock().clone()
    }

    /// The latest run's timing.
    pub(crate) fn last_run(&self) -> Option<Timing> {
        *self.last_run.lock()
    }

    /// Deliver `why` as the final outcome of a task removed while pending
    /// (or, through its stand-in, while running).
    pub(crate) fn abandon(&self, why: Abandon) {
        self.slot.set(why.into(), Stamps::unclaimed());
    }

    /// Deliver `Panicked` as the final outcome of a task dropped because
    /// user code the pool ran for it (its key's traits) panicked.
    pub(crate) fn lose(&self) {
        let lost = Outcome::Panicked(LOST.to_string());
        self.slot.set(lost, Stamps::unclaimed());
    }
}

/// What the closure of a dynamic periodic task (see
/// [`TimerPool::schedule_dynamic`](crate::TimerPool::schedule_dynamic))
/// returns after each run: when it runs next, or that it is done.
///
/// ```
/// use std::time::Duration;
/// use timerpool::Next;
/// let mut tries = 0;
/// let mut backoff = move || {
///     tries += 1;
///     if tries < 3 { Next::After(Duration::from_millis(100 << tries)) } else { Next::Stop }
/// };
/// assert_eq!(backoff(), Next::After(Duration::from_millis(200)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Run again as the task's [`Repeat`] says.
    OnSchedule,
    /// Run again this long after this run finished. A delay whose due time
    /// lies past the clock's range ends the task with
    /// [`Outcome::Expired`].
    After(Duration),
    /// Run no more: the task ends with [`Outcome::Completed`].
    Stop,
}

/// What a periodic task does after a run, or a run skipped as stale.
pub(crate) enum After {
    /// Run again at this due time, in place of the stand-in.
    Again(i64),
    /// Stop with this final outcome (a panic under [`OnPanic::Stop`]), if the
    /// stand-in is still there.
    Stop(Outcome<()>),
}

/// Run again at `next`, or, with no next tick inside the clock's range,
/// stop with [`Outcome::Expired`]: no tick past the range is clamped into
/// it (it would run early), and none runs again and again at its end.
fn after(next: Option<i64>) -> After {
    // `NEVER` is the stand-ins' "never"; a real entry stays below it.
    match next.filter(|&n| n < NEVER) {
        Some(due) => After::Again(due),
        None => After::Stop(Outcome::Expired),
    }
}

/// What follows a calendar task's run: its next due time, or, with its
/// calendar run out, the end.
fn after_then(then: Then) -> After {
    match then {
        Then::Due(due) => after(due),
        Then::Done => After::Stop(Outcome::Completed(())),
    }
}

/// A periodic task between runs: its closure, its policies, and what it
/// shares with its handle.
pub(crate) struct PeriodicJob {
    /// The user's closure; it picks when it runs next.
    f: Box<dyn FnMut() -> Next + Send>,
    /// Shared with the stand-in and the handle.
    ctl: Arc<PeriodicCtl>,
    /// How it repeats.
    repeat: Repeat,
    /// `repeat.every` in nanoseconds.
    every: i64,
    /// A calendar task's place on the wall clock.
    wall: Option<Box<WallTicks>>,
}

impl PeriodicJob {
    /// The task running `f` as `repeat` says, every `every` nanoseconds.
    pub(crate) fn new(
        f: Box<dyn FnMut() -> Next + Send>,
        ctl: Arc<PeriodicCtl>,
        repeat: Repeat,
        every: i64,
    ) -> Self {
        PeriodicJob {
            f,
            ctl,
            repeat,
            every,
            wall: None,
        }
    }

    /// The same task on a calendar, at `wall`.
    pub(crate) fn on_calendar(mut self, wall: WallTicks) -> Self {
        self.wall = Some(Box::new(wall));
        self
    }

    /// The wall-clock tick a calendar task's entry waits for (`None` for
    /// other tasks, and for an extra run a calendar task's closure asked
    /// for).
    pub(crate) fn pending_tick(&self) -> Option<jiff::Timestamp> {
        self.wall.as_ref()?.pending_tick()
    }

    /// The state shared with the stand-in and the handle.
    pub(crate) fn ctl(&self) -> &Arc<PeriodicCtl> {
        &self.ctl
    }

    /// A wake of a calendar task's entry at `now` (on the pool's clock)
    /// that finds the wall clock still before its tick: the entry's next
    /// due time, to put it back ([`Ran::Waited`]). `None` for every other
    /// wake, which runs the task or, past the staleness tolerance, expires
    /// it. Decided before staleness: a recheck has no tick to be late for,
    /// so it is never a run, a miss, an expiry or a lateness sample.
    pub(crate) fn recheck(&self, now: i64) -> Option<After> {
        match self.wall.as_ref()?.wake(now) {
            Wake::Wait(due) => Some(after(due)),
            Wake::Run => None,
        }
    }

    /// Run once on a worker, catching a panic; `finish` reads the pool's
    /// clock when the run returns.
    pub(crate) fn run(&mut self, ctx: &RunCtx, finish: &dyn Fn() -> Now) -> (Ran, After) {
        // This run's number: the runs that returned or panicked, and this.
        let n = self.ctl.runs() + self.ctl.panics() + 1;
        let kind = match self.ctl.is_retry() {
            true => RunKind::Retry,
            false => RunKind::Periodic,
        };
        let running = Running::enter(ctx, kind, n);
        let result = catch_unwind(AssertUnwindSafe(&mut self.f));
        drop(running);
        let end = finish();
        *self.ctl.last_run.lock() = Some(Timing {
            due: ctx.due_at,
            claimed: Some(ctx.started),
            started: Some(ctx.started),
            finished: Some(end.at),
        });
        let payload = match result {
            Ok(pick) => {
                self.ctl.runs.fetch_add(1, Ordering::Relaxed);
                return (Ran::Completed, self.picked(pick, ctx.due, end.ns));
            }
            Err(payload) => payload,
        };
        let next = self.next_after(ctx.due, end.ns);
        let msg = panic_message(payload);
        self.ctl.panics.fetch_add(1, Ordering::Relaxed);
        *self.ctl.last_panic.lock() = Some(msg.clone());
        match self.repeat.on_panic {
            OnPanic::Stop => (Ran::Panicked, After::Stop(Outcome::Panicked(msg))),
            OnPanic::Continue => (Ran::Panicked, next),
        }
    }

    /// What follows a run for `due` that ended at `now` and picked `pick`.
    fn picked(&mut self, pick: Next, due: i64, now: i64) -> After {
        match pick {
            Next::OnSchedule => self.next_after(due, now),
            Next::After(delay) => {
                if let Some(wall) = &mut self.wall {
                    // The tick ran: the calendar moves past it, and the extra
                    // run comes before the next tick.
                    if let Then::Done = wall.advance(
                        now,
                        self.repeat.missed == MissedTicks::Burst,
                        &self.ctl.missed,
                    ) {
                        return After::Stop(Outcome::Completed(()));
                    }
                    wall.set_extra();
                }
                after(nanos(delay).and_then(|d| now.checked_add(d)))
            }
            Next::Stop => After::Stop(Outcome::Completed(())),
        }
    }

    /// Skip this run as stale: the tick counts as missed. (A calendar
    /// task's wake before its tick is a [`recheck`](Self::recheck), never
    /// stale.)
    pub(crate) fn expire(&mut self, ctx: &RunCtx) -> After {
        if let Some(wall) = &mut self.wall {
            let then = wall.expire(
                ctx.started_ns,
                self.repeat.missed == MissedTicks::Burst,
                &self.ctl.missed,
            );
            return after_then(then);
        }
        self.ctl.missed.fetch_add(1, Ordering::Relaxed);
        after(self.next_due(ctx.due, ctx.started_ns))
    }

    /// What follows the run for `due` that ended at `now`, on schedule.
    fn next_after(&mut self, due: i64, now: i64) -> After {
        match &mut self.wall {
            Some(wall) => after_then(wall.advance(
                now,
                self.repeat.missed == MissedTicks::Burst,
                &self.ctl.missed,
            )),
            None => after(self.next_due(due, now)),
        }
    }

    /// Drop the task unrun with `why` as its final outcome.
    pub(crate) fn abandon(self, why: Abandon) {
        let PeriodicJob { f, ctl, .. } = self;
        drop_quietly(f);
        ctl.abandon(why);
    }

    /// Drop the task unrun because user code the pool ran for it panicked.
    pub(crate) fn lose(self) {
        let PeriodicJob { f, ctl, .. } = self;
        drop_quietly(f);
        ctl.lose();
    }

    /// End the task by itself with `outcome` (its stand-in was removed by
    /// the worker that ran it).
    pub(crate) fn finish(self, outcome: Outcome<()>) {
        let PeriodicJob { f, ctl, .. } = self;
        drop_quietly(f);
        let stamps = ctl.last_run().map(|t| Stamps::from(&t));
        ctl.slot.set(outcome, stamps.unwrap_or_default());
    }

    /// The next due time after the run for `due` ended at `now`, counting the
    /// ticks that get no run; `None` when it lies past the clock's range.
    fn next_due(&self, due: i64, now: i64) -> Option<i64> {
        let p = self.every;
        let (next, missed) = match &self.repeat.kind {
            // Calendar tasks move on through `wall.rs`; never reached.
            Kind::Calendar(_) => (None, 0),
            Kind::FixedDelay => (now.checked_add(p), 0),
            Kind::FixedRate => match due.checked_add(p) {
                Some(nominal) if nominal <= now => {
                    // Ticks at nominal, nominal + p, ... up to now have passed.
                    let passed = (now - nominal) / p + 1;
                    match self.repeat.missed {
                        MissedTicks::Burst => (Some(nominal), 0),
                        MissedTicks::Delay => (now.checked_add(p), passed),
                        MissedTicks::Skip => (
                            passed.checked_mul(p).and_then(|d| nominal.checked_add(d)),
                            passed,
                        ),
                    }
                }
                nominal => (nominal, 0),
            },
        };
        self.ctl.missed.fetch_add(missed as u64, Ordering::Relaxed);
        next
    }
}
