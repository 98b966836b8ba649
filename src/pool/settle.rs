//! Settling, for tests of timed code: wait until nothing due is waiting and
//! nothing runs; and advancing a manual clock through every due time on the
//! way, settling at each.
//!
//! # Ground rules
//!
//! - Settled means, under the state lock: no pending task is due by the
//!   pool's clock (none held for its key either), and every run a worker
//!   started has ended (a periodic task is back in the heap by then) and
//!   its worker has taken its key out of the running slots.
//! - A worker that finds nothing due to start notifies `Shared::settled`,
//!   under the lock, only while someone waits to settle, so the protocol
//!   pays nothing otherwise.

use super::shared::{Key, Shared, State};
use super::task::TaskKey;
use super::TimerPool;
use crate::contain::drop_quietly;
use crate::sync::MutexGuard;
use crate::{Clock, Error, ManualClock};
use std::any::Any;
use std::hash::Hash;
use std::time::{Duration, Instant};

impl<K: Key> Shared<K> {
    /// True when nothing due waits and nothing runs.
    fn is_settled(&self, st: &State<K>) -> bool {
        let now = self.time.now().ns;
        let due = st.pending.peek_due().is_some_and(|d| d <= now)
            || !st.exclusive.is_empty()
            || st.pending.held_waiting();
        !due && self.started(st) == self.counters.finished() && !self.any_running(st, |_| true)
    }

    /// Wait until settled, or `deadline` (`None`: without a bound).
    ///
    /// # Errors
    ///
    /// [`Error::NotSettled`] at the deadline, with what still ran or was due.
    pub(crate) fn settle(&self, deadline: Option<Instant>) -> Result<(), Error> {
        let mut st = self.state.lock();
        st.settle_waiters += 1;
        let settled = loop {
            if self.is_settled(&st) {
                break true;
            }
            match deadline {
                Some(d) if Instant::now() >= d => break false,
                Some(d) => {
                    self.settled.wait_until(&mut st, d);
                }
                None => self.settled.wait(&mut st),
            }
        };
        st.settle_waiters -= 1;
        match settled {
            true => Ok(()),
            false => Err(self.unsettled(st)),
        }
    }

    /// What keeps the pool from settling. The running keys are cloned
    /// under the lock, named and dropped after it.
    fn unsettled(&self, st: MutexGuard<'_, State<K>>) -> Error {
        let finished = self.counters.finished();
        let running = self.started(&st).saturating_sub(finished) as usize;
        let pending = st.pending.len() + st.exclusive.len();
        let keys = match self.key_names {
            Some(_) => self
                .each_hold(&st)
                .filter_map(|h| h.running.clone())
                .collect(),
            None => Vec::new(),
        };
        drop(st);
        let running_keys = keys.iter().map(|k| self.name_key(k)).collect();
        drop_quietly(keys);
        Error::NotSettled {
            running,
            pending,
            running_keys,
        }
    }

    /// A key as errors name it: [`Builder::debug_keys`](crate::Builder::debug_keys)'s
    /// `Debug` form, `"<keyless>"` for a keyless task.
    fn name_key(&self, key: &TaskKey<K>) -> String {
        match (key, self.key_names) {
            (TaskKey::Keyed(k), Some(name)) => name(k),
            _ => "<keyless>".to_string(),
        }
    }

    /// The caller's keys of the tasks running now, cloned under the lock.
    pub(crate) fn running_keys(&self) -> Vec<K> {
        let st = self.state.lock();
        let keyed = |h: crate::sync::MutexGuard<'_, super::hold::Held<K>>| {
            h.running.as_ref().and_then(TaskKey::keyed).cloned()
        };
        let keys = self.each_hold(&st).filter_map(keyed).collect();
        drop(st);
        keys
    }

    /// A worker found nothing due: wake those who wait to settle.
    pub(crate) fn notify_settle(&self, st: &State<K>) {
        if st.settle_waiters > 0 {
            self.settled.notify_all();
        }
    }
}

/// How far [`TimerPool::advance`] moves the pool's manual clock (`by`),
/// and its bounds: at most `max` stops at due times on the way, and
/// `timeout` of real time for the whole call. A [`Duration`] converts into
/// it with the default bounds, so `pool.advance(d)` is the whole call;
/// spell the fields out for other bounds.
///
/// Default bounds: 100,000 stops and 30 seconds. A runaway task (one that
/// keeps scheduling work just ahead of the clock) then fails in seconds, a
/// task that never returns fails a test instead of hanging it, and a
/// periodic task of one second can be advanced through more than a day.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::{Error, ManualClock, Repeat, Steps, TimerPool};
///
/// let pool = TimerPool::<&str>::builder().workers(1).clock(ManualClock::new()).build()?;
/// // Due every millisecond: a minute holds 60,000 due times.
/// pool.schedule_repeating("tick", Duration::ZERO, Repeat::fixed_rate(Duration::from_millis(1)), || {})?;
/// let a_minute = Steps::from(Duration::from_secs(60));
/// assert_eq!((a_minute.max, a_minute.timeout), (100_000, Duration::from_secs(30)));
/// let bounded = Steps { max: 100, ..a_minute };
/// assert_eq!(pool.advance(bounded).unwrap_err(), Error::StepBound { steps: 100 });
/// # Ok::<(), timerpool::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Steps {
    /// How far to move the clock.
    pub by: Duration,
    /// Most due times to stop at before the target:
    /// [`Error::StepBound`] past it.
    pub max: usize,
    /// Real time the whole call may take: [`Error::NotSettled`] when a
    /// step has not settled by then.
    pub timeout: Duration,
}

impl From<Duration> for Steps {
    /// Advance by `by`, with the default bounds (100,000 stops, 30 s).
    fn from(by: Duration) -> Self {
        Steps {
            by,
            max: 100_000,
            timeout: Duration::from_secs(30),
        }
    }
}

impl<K: Hash + Eq + Clone + Send + 'static> TimerPool<K> {
    /// Move the pool's [`ManualClock`] forward and run everything that
    /// comes due on the way, each task at its own time: the one-call form
    /// of tokio's `time::advance` for a paused clock. `steps` is a
    /// [`Duration`] (with the default bounds) or a [`Steps`] (with bounds
    /// of its own).
    ///
    /// It stops at every due time in the span, in order, and settles at
    /// each (as [`settle`](Self::settle) does), so a task due every second
    /// sees each of ten ticks in a ten-second advance, and work a task
    /// schedules inside the span (a follow-up, a retry) runs at its time.
    /// When it returns, everything due by the new time has run. Returns how
    /// many due times it stopped at.
    ///
    /// # Errors
    ///
    /// - [`Error::NotManualClock`] if the pool was not built on a
    ///   [`ManualClock`] ([`Builder::clock`](crate::Builder::clock)); the
    ///   clock is not moved.
    /// - [`Error::StepBound`] after [`Steps::max`] stops short of the
    ///   target: tasks keep scheduling work just ahead of the clock (a
    ///   periodic task with a period far below the span, say); the clock
    ///   stays at the last stop.
    /// - [`Error::NotSettled`] when a step has not settled by
    ///   [`Steps::timeout`]: a task still running (one that blocks or never
    ///   returns), or work that keeps falling due at once (a task that
    ///   schedules work due now, again and again, never lets a step
    ///   settle).
    /// - [`Error::TimeOutOfRange`] if the target is past the clock's range.
    ///
    /// # Examples
    ///
    /// A reminder that schedules its own follow-up a second later, five
    /// times over:
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    /// use timerpool::{Error, ManualClock, TimerPool};
    ///
    /// let pool = Arc::new(TimerPool::<u32>::builder().workers(1).clock(ManualClock::new()).build()?);
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// fn remind(pool: Arc<TimerPool<u32>>, seen: Arc<Mutex<Vec<u32>>>, n: u32) -> impl FnOnce() + Send {
    ///     move || {
    ///         seen.lock().unwrap().push(n);
    ///         let (p, s) = (pool.clone(), seen.clone());
    ///         pool.schedule_detached(n + 1, Duration::from_secs(1), remind(p, s, n + 1)).unwrap();
    ///     }
    /// }
    /// pool.schedule_detached(1, Duration::from_secs(1), remind(pool.clone(), seen.clone(), 1))?;
    /// assert_eq!(pool.advance(Duration::from_secs(5))?, 5);
    /// assert_eq!(*seen.lock().unwrap(), [1, 2, 3, 4, 5]);
    ///
    /// let real_time = TimerPool::<u32>::builder().workers(1).build()?;
    /// assert_eq!(real_time.advance(Duration::from_secs(1)), Err(Error::NotManualClock));
    /// # pool.shutdown_now();
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    ///
    /// With bounds of its own:
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use timerpool::{ManualClock, Repeat, Steps, TimerPool};
    ///
    /// let pool = TimerPool::<&str>::builder().workers(1).clock(ManualClock::new()).build()?;
    /// let ticks = Arc::new(AtomicU32::new(0));
    /// let t = ticks.clone();
    /// let every_second = Repeat::fixed_rate(Duration::from_secs(1));
    /// pool.schedule_repeating("tick", Duration::from_secs(1), every_second, move || {
    ///     t.fetch_add(1, Ordering::SeqCst);
    /// })?;
    /// let steps = Steps { by: Duration::from_secs(10), max: 100, timeout: Duration::from_secs(10) };
    /// assert_eq!(pool.advance(steps)?, 10);
    /// assert_eq!(ticks.load(Ordering::SeqCst), 10);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    #[doc(alias = "advance_in_steps")]
    pub fn advance(&self, steps: impl Into<Steps>) -> Result<usize, Error> {
        let Steps { by, max, timeout } = steps.into();
        let any: &dyn Any = self.shared.time.clock();
        let clock = any
            .downcast_ref::<ManualClock>()
            .ok_or(Error::NotManualClock)?;
        let target = clock.now().checked_add(by).ok_or(Error::TimeOutOfRange)?;
        let deadline = Instant::now().checked_add(timeout);
        self.shared.settle(deadline)?;
        let mut stops = 0;
        while let Some(next) = self.next_due().filter(|&next| next <= target) {
            if stops == max {
                return Err(Error::StepBound { steps: stops });
            }
            stops += 1;
            clock.advance(next.saturating_duration_since(clock.now()));
            self.shared.settle(deadline)?;
        }
        clock.advance(target.saturating_duration_since(clock.now()));
        self.shared.settle(deadline)?;
        Ok(stops)
    }
}
