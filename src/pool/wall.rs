//! Calendar tasks between runs: the tick a periodic task waits for on the
//! wall clock, and how that wait becomes due times on the pool's monotonic
//! clock.
//!
//! # Ground rules
//!
//! - A tick is an instant of the wall clock ([`Clock::wall_time`]), taken
//!   from the calendar as the first tick after the previous one, never by
//!   adding a duration to it: a long-running task does not drift, and a
//!   daylight-saving shift does not carry over to the next day.
//! - A tick runs at most once. The next tick is always the first after the
//!   last one that ran or was passed, whatever the wall clock does later:
//!   a wall clock stepped back does not bring a tick back.
//! - The task's heap entry is due where the monotonic clock should reach
//!   the tick by the latest reading of both clocks, but never more than
//!   [`RECHECK`] after that reading. Each wake reads the wall clock again,
//!   so a step of the wall clock (NTP, a manual change) or a suspend that
//!   the monotonic clock did not count is seen within [`RECHECK`].
//! - A wake that finds the wall clock still before the tick runs nothing
//!   ([`Ran::Waited`](super::outcome::Ran::Waited)) and puts the entry back
//!   at its due time computed again.
//! - A wake at or after the tick runs it, late if the wall clock jumped
//!   past it; the ticks passed meanwhile follow the task's
//!   [`MissedTicks`](crate::MissedTicks) policy.

use super::time::{nanos, NEVER};
use crate::calendar::Calendar;
use crate::clock::Clock;
use crate::contain::{catch, forget_payload};
use crate::sync::{Arc, AtomicU64, Ordering};
use jiff::Timestamp;
use std::time::{Duration, SystemTime};

/// The longest a calendar task's entry waits without reading the wall clock
/// again: as often as cron itself looks. Shorter would wake every calendar
/// task more often for steps that are rare; longer would let a step or a
/// resume from suspend delay a tick by more than a cron user expects.
pub(crate) const RECHECK: Duration = Duration::from_secs(60);

/// Missed ticks counted one by one after a stall; past this many, the rest
/// are passed over without being counted, so that a long stall of a
/// per-second calendar costs a bounded search.
const COUNT_LIMIT: u64 = 100_000;

/// What a wake of a calendar task's entry does.
pub(crate) enum Wake {
    /// Run: the tick has come on the wall clock (or the entry is an extra
    /// run its closure asked for).
    Run,
    /// Not yet: put the entry back at this due time (`None`: past the
    /// clock's range).
    Wait(Option<i64>),
}

/// What follows a run (or a passed tick) of a calendar task.
pub(crate) enum Then {
    /// The entry's next due time (`None`: past the clock's range).
    Due(Option<i64>),
    /// The calendar has no tick left.
    Done,
}

/// A calendar task's place on the wall clock.
pub(crate) struct WallTicks {
    /// The schedule.
    calendar: Calendar,
    /// The pool's clock, read for its wall time.
    clock: Arc<dyn Clock>,
    /// The first tick not yet run nor passed.
    tick: Timestamp,
    /// The entry is an extra run the closure asked for (`Next::After`),
    /// not `tick`.
    extra: bool,
}

impl WallTicks {
    /// A calendar task asked to start no earlier than `first` (nanoseconds
    /// on the pool's timeline) while the pool's clock reads `now`: its first
    /// tick is the calendar's first at or after the wall-clock time of
    /// `first`. The state and its entry's due time; `None` when the calendar
    /// has no such tick.
    pub(crate) fn start(
        calendar: Calendar,
        clock: Arc<dyn Clock>,
        first: i64,
        now: i64,
    ) -> Option<(WallTicks, Option<i64>)> {
        let mut ticks = WallTicks {
            calendar,
            clock,
            tick: Timestamp::UNIX_EPOCH,
            extra: false,
        };
        let wall = ticks.wall();
        let ahead = jiff::SignedDuration::from_nanos(first.saturating_sub(now));
        let from = wall.checked_add(ahead).unwrap_or(wall);
        ticks.tick = ticks.calendar.tick_from(from)?;
        let due = ticks.due(now, wall);
        Some((ticks, due))
    }

    /// A wake of the entry while the pool's clock reads `now`.
    pub(crate) fn wake(&self, now: i64) -> Wake {
        if self.extra {
            return Wake::Run;
        }
        let wall = self.wall();
        match wall < self.tick {
            true => Wake::Wait(self.due(now, wall)),
            false => Wake::Run,
        }
    }

    /// After a run that ended at `now` (or a panic under
    /// `OnPanic::Continue`): move past the tick that ran. If later ticks
    /// passed meanwhile, `burst` (the `MissedTicks::Burst` policy) runs
    /// each of them; otherwise they are skipped and counted in `missed`.
    /// After an extra run the tick it waited for is still ahead.
    pub(crate) fn advance(&mut self, now: i64, burst: bool, missed: &AtomicU64) -> Then {
        let wall = self.wall();
        if std::mem::take(&mut self.extra) {
            return Then::Due(self.due(now, wall));
        }
        let Some(nominal) = self.calendar.next_tick(self.tick) else {
            return Then::Done;
        };
        if nominal > wall || burst {
            self.tick = nominal;
            return Then::Due(self.due(now, wall));
        }
        // Ticks from `nominal` up to the wall clock have passed: with no
        // period to shift by, `Delay` keeps to the calendar as `Skip` does.
        let mut passed = 0u64;
        let mut next = Some(nominal);
        while let Some(t) = next.filter(|&t| t <= wall) {
            passed += 1;
            next = match passed < COUNT_LIMIT {
                true => self.calendar.next_tick(t),
                false => self.calendar.next_tick(wall),
            };
        }
        missed.fetch_add(passed, Ordering::Relaxed);
        match next {
            Some(t) => {
                self.tick = t;
                Then::Due(self.due(now, wall))
            }
            None => Then::Done,
        }
    }

    /// The entry woke at `now` to run, too late (the pool's staleness
    /// tolerance): the tick (or the extra run) counts as missed and the
    /// schedule moves on as [`advance`](Self::advance) does. Only a wake that [`wake`](Self::wake)
    /// found ready to run gets here; a wake before the tick waits again,
    /// however late it is.
    pub(crate) fn expire(&mut self, now: i64, burst: bool, missed: &AtomicU64) -> Then {
        missed.fetch_add(1, Ordering::Relaxed);
        self.advance(now, burst, missed)
    }

    /// The closure asked to run again after a delay: the entry's next wake
    /// runs without waiting for a tick.
    pub(crate) fn set_extra(&mut self) {
        self.extra = true;
    }

    /// The entry's due time for the pending tick, by the pool's clock at
    /// `now` and the wall clock at `wall`: when the monotonic clock should
    /// reach the tick, or [`RECHECK`] from now if that is sooner.
    fn due(&self, now: i64, wall: Timestamp) -> Option<i64> {
        let ahead = self.tick.duration_since(wall);
        if ahead.is_negative() || ahead.is_zero() {
            return Some(now);
        }
        let ahead = ahead.unsigned_abs().min(RECHECK);
        now.checked_add(nanos(ahead)?)
    }

    /// The tick the entry waits for; `None` while it waits for an extra
    /// run instead, which its due time gives.
    pub(crate) fn pending_tick(&self) -> Option<Timestamp> {
        (!self.extra).then_some(self.tick)
    }

    /// The wall clock now (see [`wall_now`]).
    fn wall(&self) -> Timestamp {
        wall_now(&*self.clock)
    }
}

/// `clock`'s wall time now. A reading that panics is contained and the
/// system's wall clock read instead; one past the calendar's years counts
/// as its end.
fn wall_now(clock: &dyn Clock) -> Timestamp {
    let read = match catch(|| clock.wall_time()) {
        Ok(t) => t,
        Err(payload) => {
            forget_payload(payload);
            SystemTime::now()
        }
    };
    Timestamp::try_from(read).unwrap_or(match read < SystemTime::UNIX_EPOCH {
        true => Timestamp::MIN,
        false => Timestamp::MAX,
    })
}

/// When the pool's clock, reading `now`, should reach `tick` by `clock`'s
/// wall time read now: what `due_of` shows for a calendar task, whose
/// entry may wake earlier only to read the wall clock again. Saturates at
/// the ends of the pool's timeline rather than fail, since it is shown,
/// not waited for.
pub(crate) fn tick_due(tick: Timestamp, clock: &dyn Clock, now: i64) -> i64 {
    let ahead = tick.duration_since(wall_now(clock)).as_nanos();
    let at = i128::from(now).saturating_add(ahead);
    at.clamp(0, i128::from(NEVER - 1)) as i64
}
