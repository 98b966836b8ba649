//! Time: the pool's clock, its epoch, and every conversion between the
//! caller's `Instant`s and `Duration`s and the nanoseconds the heap orders by.
//!
//! # Ground rules
//!
//! - Inside the pool a due time is an `i64` of nanoseconds since the epoch
//!   (the clock's reading when the pool started). Readings and real due
//!   times stay below [`NEVER`], which only a running periodic task's
//!   stand-in uses, so a stand-in is never due.
//! - Deciding whether a task is due always uses the pool's clock
//!   ([`Timeline::now`]); the real clock ([`Timeline::real_now`]) only times
//!   the leader's own waits.
//! - The clock is user code. A reading that panics is contained and counts
//!   as the epoch (time standing still, so nothing becomes due early); a
//!   sleep deadline that panics counts as "until notified".

use crate::clock::Clock;
use crate::contain::{catch, forget_payload};
use crate::sync::{Arc, AtomicU64, Ordering};
use crate::Error;
use std::time::{Duration, Instant};

/// Due time of a periodic task's stand-in: never.
pub(crate) const NEVER: i64 = i64::MAX;

/// When a task falls due: at an instant of the pool's clock, or after a
/// delay from now. Every scheduling call takes `impl Into<Due>`, so an
/// [`Instant`] or a [`Duration`] can be passed as it is.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use timerpool::Due;
///
/// assert_eq!(Due::from(Duration::from_secs(1)), Due::After(Duration::from_secs(1)));
/// let at = Instant::now();
/// assert_eq!(Due::from(at), Due::At(at));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// At this instant of the pool's clock (an instant before the pool
    /// started counts as due at once).
    At(Instant),
    /// This long after the pool's clock reads now.
    After(Duration),
}

impl From<Instant> for Due {
    fn from(at: Instant) -> Self {
        Due::At(at)
    }
}

impl From<Duration> for Due {
    fn from(delay: Duration) -> Self {
        Due::After(delay)
    }
}

/// One reading of the pool's clock, as an instant and in nanoseconds since
/// the epoch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Now {
    /// The reading.
    pub(crate) at: Instant,
    /// The reading in nanoseconds since the epoch, below [`NEVER`].
    pub(crate) ns: i64,
}

/// The pool's clock and its epoch.
#[derive(Debug)]
pub(crate) struct Timeline {
    /// The pool's time source.
    clock: Arc<dyn Clock>,
    /// `clock.now()` when the pool started.
    epoch: Instant,
    /// Readings that panicked (and were contained).
    panics: AtomicU64,
}

impl Timeline {
    /// A timeline whose epoch is `clock`'s reading now.
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        let epoch = clock.now();
        Timeline {
            clock,
            epoch,
            panics: AtomicU64::new(0),
        }
    }

    /// The pool's clock.
    pub(crate) fn clock(&self) -> &dyn Clock {
        &*self.clock
    }

    /// The pool's clock, to keep: a calendar task reads its wall time.
    pub(crate) fn shared_clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    /// Read the pool's clock (the epoch if the clock panics).
    pub(crate) fn now(&self) -> Now {
        let at = self.contain(|| self.clock.now()).unwrap_or(self.epoch);
        let ns = nanos(at.saturating_duration_since(self.epoch)).unwrap_or(NEVER);
        Now {
            at,
            ns: ns.min(NEVER - 1),
        }
    }

    /// `due` in nanoseconds since the epoch; `now` reads the clock, called
    /// only for a delay or an instant past the range.
    ///
    /// An instant the clock has already reached is due at once, even past
    /// the end of the range (a clock moved to its end still takes work due
    /// now).
    ///
    /// # Errors
    ///
    /// [`Error::TimeOutOfRange`] when the due time is not below [`NEVER`]
    /// and not already reached.
    pub(crate) fn due_ns(&self, due: Due, now: impl FnOnce() -> Now) -> Result<i64, Error> {
        let ns = match due {
            Due::At(at) => match self.since_epoch(at) {
                Some(ns) => Some(ns),
                None => {
                    let now = now();
                    (at <= now.at).then_some(now.ns)
                }
            },
            Due::After(delay) => nanos(delay).and_then(|d| now().ns.checked_add(d)),
        };
        // Matched rather than `ok_or`: that builds (and drops) an error on
        // every call.
        match ns {
            Some(ns) if ns < NEVER => Ok(ns),
            _ => Err(Error::TimeOutOfRange),
        }
    }

    /// [`due_ns`](Self::due_ns) with the instant of the result on the
    /// pool's clock, as [`instant_of`](Self::instant_of) gives it. For an
    /// instant in the range that is the instant itself (or the epoch, for
    /// one before it), so the common case converts nothing back.
    ///
    /// # Errors
    ///
    /// As [`due_ns`](Self::due_ns).
    #[inline]
    pub(crate) fn due_at(
        &self,
        due: Due,
        now: impl FnOnce() -> Now,
    ) -> Result<(i64, Instant), Error> {
        if let Due::At(at) = due {
            if let Some(ns) = self.since_epoch(at) {
                return Ok((ns, at.max(self.epoch)));
            }
        }
        let ns = self.due_ns(due, now)?;
        Ok((ns, self.instant_of(ns)))
    }

    /// Nanoseconds from the epoch to `at` (0 for an instant before it), if
    /// they are below [`NEVER`].
    #[inline]
    fn since_epoch(&self, at: Instant) -> Option<i64> {
        match at.checked_duration_since(self.epoch) {
            Some(d) => nanos(d).filter(|&ns| ns < NEVER),
            None => Some(0),
        }
    }

    /// The instant of `due` on the pool's clock (the epoch for a due time
    /// before it, or one the platform's `Instant` cannot represent).
    pub(crate) fn instant_of(&self, due: i64) -> Instant {
        let since = Duration::from_nanos(due.max(0) as u64);
        self.epoch.checked_add(since).unwrap_or(self.epoch)
    }

    /// The real instant the leader may sleep until while waiting for `due`;
    /// `None`: until notified (a clock that moves only by hand).
    pub(crate) fn sleep_deadline(&self, due: i64) -> Option<Instant> {
        let at = self.instant_of(due);
        self.contain(|| self.clock.sleep_deadline(at)).flatten()
    }

    /// Clock calls that panicked so far.
    pub(crate) fn panics(&self) -> u64 {
        self.panics.load(Ordering::Relaxed)
    }

    /// Run a clock call, containing and counting its panic.
    fn contain<T>(&self, call: impl FnOnce() -> T) -> Option<T> {
        match catch(call) {
            Ok(v) => Some(v),
            Err(payload) => {
                forget_payload(payload);
                self.panics.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// The real instant now, for timing the leader's own waits; never for
    /// deciding whether a task is due.
    pub(crate) fn real_now(&self) -> Instant {
        Instant::now()
    }
}

/// Ask the operating system to end this thread's timed waits at their
/// deadline rather than up to its default timer slack later. Precision
/// mode only (`Precision::Spin`): the thread still sleeps until its
/// deadline, but the kernel can no longer fold nearby wake-ups into one,
/// so a dense stream of due times costs a wake-up each. The worker's start
/// hook may set it back. Elsewhere, and if the call fails, nothing changes.
pub(crate) fn tighten_timer_slack() {
    #[cfg(all(target_os = "linux", not(loom)))]
    let _ = nix::sys::prctl::set_timerslack(1);
}

/// This thread's timer slack, where the platform tells it (Linux: 50 µs
/// unless changed): how much later than its deadline the kernel may end a
/// timed wait. New threads inherit it, so the builder's thread reads what
/// the workers will have.
pub(crate) fn timer_slack() -> Option<Duration> {
    #[cfg(all(target_os = "linux", not(loom)))]
    if let Ok(ns) = nix::sys::prctl::get_timerslack() {
        return u64::try_from(ns).ok().map(Duration::from_nanos);
    }
    None
}

/// Nanoseconds of `d` as an `i64`, if they fit. Computed in 64 bits:
/// whole seconds times 10^9 plus the rest, with overflow checks, which is
/// `d.as_nanos()` without its 128-bit product and conversion.
pub(crate) fn nanos(d: Duration) -> Option<i64> {
    let secs = i64::try_from(d.as_secs()).ok()?;
    secs.checked_mul(1_000_000_000)?
        .checked_add(i64::from(d.subsec_nanos()))
}
