//! Time sources for the pool: the monotonic system clock and a manual clock
//! for deterministic tests.

use crate::sync::{Arc, Mutex, Weak};
use std::any::Any;
use std::fmt;
use std::time::{Duration, Instant, SystemTime};

/// A monotonic time source for [`TimerPool`](crate::TimerPool).
///
/// The pool reads [`now`](Clock::now) under its lock every time it decides
/// whether a task is due, so a task never starts before the clock reads its
/// due time. A clock that only moves when told to (like [`ManualClock`])
/// returns `None` from [`sleep_deadline`](Clock::sleep_deadline) and calls the
/// [`PoolWaker`]s it was given whenever it moves.
///
/// A clock is `Any` (every `'static` type is), so that
/// [`TimerPool::advance`](crate::TimerPool::advance) can tell a pool built
/// on a [`ManualClock`] from one built on any other clock.
pub trait Clock: Any + Send + Sync + fmt::Debug {
    /// The current time. Must never go backwards.
    fn now(&self) -> Instant;

    /// The real instant until which the leader may sleep while waiting for
    /// `due` on this clock; `None` means "until woken". The default, right for
    /// any clock that moves with real time, is `Some(due)`.
    fn sleep_deadline(&self, due: Instant) -> Option<Instant> {
        Some(due)
    }

    /// The wall-clock time now: the civil calendar that calendar schedules
    /// ([`Repeat::calendar`](crate::Repeat::calendar)) are computed on. Unlike
    /// [`now`](Clock::now) it may step backwards or forwards (an NTP step,
    /// a manual change, a resumed machine); `docs/semantics.md` says how a
    /// calendar task follows such a step. The default is
    /// [`SystemTime::now`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::SystemTime;
    /// use timerpool::{Clock, SystemClock};
    /// assert!(SystemClock.wall_time() > SystemTime::UNIX_EPOCH);
    /// ```
    fn wall_time(&self) -> SystemTime {
        SystemTime::now()
    }

    /// Called once by every pool built on this clock. A clock that moves by
    /// hand must call [`PoolWaker::wake`] on each registered waker after moving.
    fn register(&self, waker: PoolWaker) {
        let _ = waker;
    }
}

/// The default clock: [`Instant::now`], monotonic.
///
/// # Examples
///
/// ```
/// use timerpool::{Clock, SystemClock};
/// let a = SystemClock.now();
/// assert!(SystemClock.now() >= a);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// Something a clock can wake: in practice a pool's leader.
pub(crate) trait Wake: Send + Sync {
    /// Make the waiter re-read the clock.
    fn wake(&self);
}

/// A handle a [`Clock`] uses to wake a pool after it moved.
#[derive(Clone)]
pub struct PoolWaker(Weak<dyn Wake>);

impl PoolWaker {
    pub(crate) fn new(target: Weak<dyn Wake>) -> Self {
        PoolWaker(target)
    }

    /// Wake the pool; false if the pool is gone (the waker may be forgotten).
    pub fn wake(&self) -> bool {
        match self.0.upgrade() {
            Some(t) => {
                t.wake();
                true
            }
            None => false,
        }
    }
}

impl fmt::Debug for PoolWaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolWaker")
            .field("alive", &(self.0.strong_count() > 0))
            .finish()
    }
}

/// A clock that moves only when told to; [`advance`](ManualClock::advance)
/// wakes every pool built on it, so threaded tests need no sleeps.
/// Its wall-clock time ([`Clock::wall_time`]) starts at the system's and
/// moves with `advance`; [`set_wall_time`](ManualClock::set_wall_time)
/// steps it alone, as an NTP step would.
/// [`TimerPool::advance`](crate::TimerPool::advance) moves a pool's manual
/// clock and runs what falls due on the way in one call.
///
/// Clones share the same time.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let t0 = clock.now();
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(clock.now() - t0, Duration::from_secs(5));
/// ```
#[derive(Clone)]
pub struct ManualClock(Arc<ManualInner>);

struct ManualInner {
    /// The instant the clock started at.
    base: Instant,
    /// How far the clock has been moved.
    offset: Mutex<Duration>,
    /// The wall-clock time at `base`: the wall clock reads this plus
    /// `offset`.
    wall_base: Mutex<SystemTime>,
    /// Pools to wake after each move.
    wakers: Mutex<Vec<PoolWaker>>,
}

impl ManualClock {
    /// A clock standing at the current instant, moving only by
    /// [`advance`](Self::advance).
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::{Clock, ManualClock};
    /// let clock = ManualClock::new();
    /// let t0 = clock.now();
    /// assert_eq!(clock.now(), t0, "it moves only by hand");
    /// ```
    pub fn new() -> Self {
        ManualClock(Arc::new(ManualInner {
            base: Instant::now(),
            offset: Mutex::new(Duration::ZERO),
            wall_base: Mutex::new(SystemTime::now()),
            wakers: Mutex::new(Vec::new()),
        }))
    }

    /// Move the clock forward by `by` and wake every pool built on it.
    /// Saturates instead of overflowing: an advance past the largest
    /// representable instant leaves the clock at that instant.
    ///
    /// It returns at once: the pools run what fell due on their workers
    /// afterwards ([`TimerPool::settle`](crate::TimerPool::settle) waits
    /// for that). [`TimerPool::advance`](crate::TimerPool::advance) moves
    /// the clock, stopping at every due time on the way, and returns once
    /// it all ran.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Clock, ManualClock};
    /// let clock = ManualClock::new();
    /// let t0 = clock.now();
    /// clock.advance(Duration::from_secs(2));
    /// assert_eq!(clock.now() - t0, Duration::from_secs(2));
    /// ```
    pub fn advance(&self, by: Duration) {
        {
            let mut offset = self.0.offset.lock();
            let wanted = offset.saturating_add(by);
            // Keep `base + offset` representable.
            *offset = if self.0.base.checked_add(wanted).is_some() {
                wanted
            } else {
                max_offset(self.0.base, *offset, wanted)
            };
        }
        // Wake outside the clock's lock: a pool reads the clock under its own
        // lock, so holding ours while taking theirs could deadlock.
        let wakers: Vec<PoolWaker> = self.0.wakers.lock().clone();
        let mut gone = false;
        for w in &wakers {
            gone |= !w.wake();
        }
        if gone {
            self.0.wakers.lock().retain(|w| w.0.strong_count() > 0);
        }
    }

    /// Step the wall clock ([`Clock::wall_time`]) to `to`, forwards or
    /// backwards, leaving the monotonic time where it is: what an NTP step
    /// or a manual change of the system time does. Later
    /// [`advance`](Self::advance)s move both together from there.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use timerpool::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let t0 = clock.now();
    /// let midnight = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600); // 2026-01-01
    /// clock.set_wall_time(midnight);
    /// clock.advance(Duration::from_secs(60));
    /// assert_eq!(clock.wall_time(), midnight + Duration::from_secs(60));
    /// assert_eq!(clock.now() - t0, Duration::from_secs(60));
    /// ```
    pub fn set_wall_time(&self, to: SystemTime) {
        let offset = *self.0.offset.lock();
        // A time before `base` could hold may not subtract; then the step
        // lands as near as the platform allows.
        *self.0.wall_base.lock() = to.checked_sub(offset).unwrap_or(to);
    }

    /// How far the clock has moved since it was made.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::ManualClock;
    /// let clock = ManualClock::new();
    /// clock.advance(Duration::from_millis(1500));
    /// assert_eq!(clock.elapsed(), Duration::from_millis(1500));
    /// ```
    pub fn elapsed(&self) -> Duration {
        *self.0.offset.lock()
    }
}

/// The largest offset in `lo..=hi` that `base` can still be moved by.
fn max_offset(base: Instant, mut lo: Duration, mut hi: Duration) -> Duration {
    while hi > lo + Duration::from_nanos(1) {
        let mid = lo + (hi - lo) / 2;
        if base.checked_add(mid).is_some() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field("elapsed", &self.elapsed())
            .finish()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.0.base + *self.0.offset.lock()
    }

    fn sleep_deadline(&self, _due: Instant) -> Option<Instant> {
        None
    }

    fn wall_time(&self) -> SystemTime {
        let offset = *self.0.offset.lock();
        let base = *self.0.wall_base.lock();
        base.checked_add(offset).unwrap_or(base)
    }

    fn register(&self, waker: PoolWaker) {
        self.0.wakers.lock().push(waker);
    }
}
