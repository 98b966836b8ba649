//! Per-task outcomes, their timing, and the slot a task delivers its
//! outcome into.
//!
//! # Ground rules
//!
//! - An [`OutcomeSlot`] is set exactly once, by whoever holds the task when
//!   it ends (a worker after the run, or the remover of a pending task);
//!   ownership of the task makes a second delivery impossible.
//! - The slot's own lock guards only what the task and its handle share:
//!   before the outcome, the closure of a task with a handle (taken out to
//!   run or drop it outside the lock) and the waker of a handle being
//!   awaited; after it, the outcome and its stamps. No pool lock is held
//!   while delivering.
//! - An awaiting handle registers its waker and checks for the outcome in
//!   one critical section, and the delivery stores the outcome and takes the
//!   waker in another under the same lock, so the wake cannot be lost; the
//!   waker is woken once, after the lock is released.

use super::fault::{Fault, Faults};
use crate::sync::{Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// How a task ended. Every task the pool accepted gets exactly one.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::{Outcome, TimerPool};
///
/// let pool = TimerPool::<u64>::builder().workers(1).build()?;
/// let ok = pool.schedule(1, Duration::ZERO, || 5)?;
/// let gone = pool.schedule(2, Duration::from_secs(60), || 6)?;
/// let newer = pool.schedule(2, Duration::ZERO, || 7)?;
/// match ok.wait() {
///     Outcome::Completed(v) => assert_eq!(v, 5),
///     other => panic!("{other:?}"),
/// }
/// assert_eq!(gone.wait(), Outcome::Replaced);
/// assert_eq!(newer.wait().completed(), Some(7));
/// # Ok::<(), timerpool::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<T> {
    /// The task ran and returned this value; for a periodic task, its
    /// closure returned [`Next::Stop`](crate::Next::Stop).
    Completed(T),
    /// The task ran and panicked with this message (`"<non-string panic
    /// payload>"` when the payload was neither `&str` nor `String`).
    Panicked(String),
    /// The task was cancelled while pending and never ran.
    Cancelled,
    /// A task scheduled under the same key replaced it while it was pending;
    /// it never ran.
    Replaced,
    /// The pool was shut down with [`shutdown_now`](crate::TimerPool::shutdown_now)
    /// (or dropped) while the task was pending, so it never ran; for a
    /// periodic task, any shutdown stops it.
    Shutdown,
    /// The task was skipped because it could only start later than its due
    /// time plus the pool's staleness tolerance
    /// ([`Builder::expire_after`](crate::Builder::expire_after)); or, for a
    /// periodic task, its next tick lay past the end of the clock's range
    /// (about 292 years after the pool started), so it stopped.
    Expired,
}

impl<T> Outcome<T> {
    /// The value of a completed task.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::Outcome;
    /// assert_eq!(Outcome::Completed(3).completed(), Some(3));
    /// assert_eq!(Outcome::<i32>::Cancelled.completed(), None);
    /// ```
    pub fn completed(self) -> Option<T> {
        match self {
            Outcome::Completed(v) => Some(v),
            _ => None,
        }
    }

    /// True if the task ran (completed or panicked).
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::Outcome;
    /// assert!(Outcome::<()>::Panicked("boom".into()).ran());
    /// assert!(!Outcome::<()>::Expired.ran());
    /// ```
    pub fn ran(&self) -> bool {
        matches!(self, Outcome::Completed(_) | Outcome::Panicked(_))
    }
}

/// The message a task is told (as `Outcome::Panicked`) when it is dropped
/// unrun because user code the pool ran for it panicked: its key's `Hash`,
/// `Eq` or `Clone` on a pool thread.
pub(crate) const LOST: &str =
    "the task was dropped unrun: user code the pool ran for it (its key) panicked";

/// Why a pending task was removed without running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Abandon {
    /// Cancelled by key or handle.
    Cancelled,
    /// Replaced by a schedule under the same key.
    Replaced,
    /// Removed by `shutdown_now` or drop.
    Shutdown,
}

impl<T> From<Abandon> for Outcome<T> {
    fn from(why: Abandon) -> Self {
        match why {
            Abandon::Cancelled => Outcome::Cancelled,
            Abandon::Replaced => Outcome::Replaced,
            Abandon::Shutdown => Outcome::Shutdown,
        }
    }
}

/// When a task fell due, was claimed, started and finished, on the pool's
/// clock. The steps a task never reached are `None`: a cancelled task was
/// never claimed, an expired one never started. A task is claimed by the
/// worker that runs it, when it takes the task out of the pending tasks to
/// start it at once; one reading of the clock, taken then, dates both, so
/// `claimed` and `started` are equal (an expired task has only `claimed`).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::TimerPool;
///
/// let pool = TimerPool::<u64>::builder().workers(1).build()?;
/// let (_, t) = pool.submit(Duration::from_millis(1), || ())?.wait_timed();
/// assert!(t.due <= t.claimed.unwrap());
/// assert!(t.claimed.unwrap() <= t.started.unwrap());
/// assert!(t.started.unwrap() <= t.finished.unwrap());
/// # Ok::<(), timerpool::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Its due time.
    pub due: Instant,
    /// When its worker took it out of the pending tasks to run it.
    pub claimed: Option<Instant>,
    /// When a worker started it.
    pub started: Option<Instant>,
    /// When it returned or panicked.
    pub finished: Option<Instant>,
}

impl Timing {
    /// How late the task started: `started - due`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use timerpool::Timing;
    ///
    /// let due = Instant::now();
    /// let t = Timing { due, claimed: None, started: Some(due + Duration::from_millis(3)), finished: None };
    /// assert_eq!(t.lateness(), Some(Duration::from_millis(3)));
    /// ```
    pub fn lateness(&self) -> Option<Duration> {
        Some(self.started?.saturating_duration_since(self.due))
    }
}

/// The steps of [`Timing`] a task reached, without its due time. A task
/// is claimed and started at one reading of the clock, so a task that ran
/// keeps that reading and when it finished; an expired one only the claim.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Stamps {
    /// When claimed (and, if it ran, started).
    claimed: Option<Instant>,
    /// When finished, for a task that ran.
    finished: Option<Instant>,
}

impl From<&Timing> for Stamps {
    fn from(t: &Timing) -> Self {
        Stamps {
            claimed: t.claimed,
            finished: t.started.and(t.finished),
        }
    }
}

impl Stamps {
    /// Stamps of a task claimed and started at `started` that finished at
    /// `finished`.
    pub(crate) fn ran(started: Instant, finished: Instant) -> Stamps {
        Stamps {
            claimed: Some(started),
            finished: Some(finished),
        }
    }

    /// Stamps of a task claimed but not run.
    pub(crate) fn claimed(claimed: Instant) -> Stamps {
        Stamps {
            claimed: Some(claimed),
            finished: None,
        }
    }

    /// Stamps of a task removed while pending.
    pub(crate) fn unclaimed() -> Stamps {
        Stamps::default()
    }

    /// The task's [`Timing`], given its due time.
    fn timing(self, due: Instant) -> Timing {
        Timing {
            due,
            claimed: self.claimed,
            started: self.finished.and(self.claimed),
            finished: self.finished,
        }
    }
}

/// What one run did, for the pool's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ran {
    /// Returned normally.
    Completed,
    /// Panicked.
    Panicked,
    /// Skipped: it could only start later than the staleness tolerance.
    Expired,
    /// Not run and not due: a calendar task woke to read the wall clock
    /// (its tick has not come on it yet) and put itself back
    /// (`pool/wall.rs`). Neither a run nor a report, and decided before
    /// staleness, so never an expiry either (`worker::run_started`).
    Waited,
}

/// [`Stamps`] as an outcome slot keeps them once delivered: the claim and
/// the finish as signed nanoseconds from the task's due time, 16 bytes
/// instead of 32, with a sentinel for a step not reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Packed([i64; 2]);

/// A step the task never reached.
const UNREACHED: i64 = i64::MIN;
/// The earliest offset a step can take (beyond the sentinel).
const EARLIEST: i64 = i64::MIN + 1;

impl Packed {
    /// `stamps` relative to `due`; offsets beyond ±292 years saturate.
    fn pack(stamps: Stamps, due: Instant) -> Packed {
        let off = |t: Option<Instant>| match t {
            None => UNREACHED,
            Some(t) if t >= due => i64::try_from((t - due).as_nanos()).unwrap_or(i64::MAX),
            Some(t) => i64::try_from((due - t).as_nanos()).map_or(EARLIEST, |n| (-n).max(EARLIEST)),
        };
        Packed([off(stamps.claimed), off(stamps.finished)])
    }

    /// The stamps back, given the same `due`.
    fn unpack(&self, due: Instant) -> Stamps {
        let at = |off: i64| match off {
            UNREACHED => None,
            off if off >= 0 => due.checked_add(Duration::from_nanos(off as u64)),
            off => due.checked_sub(Duration::from_nanos(off.unsigned_abs())),
        };
        Stamps {
            claimed: at(self.0[0]),
            finished: at(self.0[1]),
        }
    }
}

/// What a slot's lock guards, in turn: before the outcome, the task's
/// closure (for a one-shot task with a handle, whose closure shares the
/// slot's allocation) and the waker of a handle being awaited; after it,
/// the outcome until the handle takes it and the stamps. No phase needs the
/// other's fields, so they share one space.
enum Phase<T, F> {
    /// Pending or running.
    Before {
        /// The closure, until it is taken out to run or drop it.
        job: Option<F>,
        /// The waker of a handle being awaited, woken with the outcome.
        waker: Option<Waker>,
    },
    /// Delivered.
    After {
        /// The outcome, until the handle takes it.
        outcome: Option<Outcome<T>>,
        /// When the task was claimed and finished.
        stamps: Packed,
    },
}

impl<T, F> Phase<T, F> {
    /// The outcome, if delivered and not yet taken.
    fn take_outcome(&mut self) -> Option<Outcome<T>> {
        match self {
            Phase::After { outcome, .. } => outcome.take(),
            Phase::Before { .. } => None,
        }
    }

    /// The stamps, once delivered.
    fn stamps(&self) -> Option<Packed> {
        match self {
            Phase::After { stamps, .. } => Some(*stamps),
            Phase::Before { .. } => None,
        }
    }
}

/// Where a task's outcome is delivered, shared by the task and its handle;
/// for a one-shot task with a handle, also where its closure waits (`F`).
pub(crate) struct OutcomeSlot<T, F = ()> {
    /// The closure and waker, then the outcome and stamps.
    value: Mutex<Phase<T, F>>,
    /// Notified when the outcome is set.
    ready: Condvar,
    /// The task's due time (of its first run, for periodic tasks).
    due: Instant,
    /// The protocol step the loom models asked to break, if any.
    faults: Faults,
}

impl<T> OutcomeSlot<T> {
    /// The slot of a task due at `due` whose closure lives elsewhere.
    pub(crate) fn new(due: Instant, faults: Faults) -> Self {
        Self::holding(None, due, faults)
    }
}

impl<T, F> OutcomeSlot<T, F> {
    /// The slot of a task due at `due` that holds its closure `f` until
    /// [`take_job`](Self::take_job).
    pub(crate) fn with_job(f: F, due: Instant, faults: Faults) -> Self {
        Self::holding(Some(f), due, faults)
    }

    /// A slot holding `job`, if any, until its outcome.
    fn holding(job: Option<F>, due: Instant, faults: Faults) -> Self {
        OutcomeSlot {
            value: Mutex::new(Phase::Before { job, waker: None }),
            ready: Condvar::new(),
            due,
            faults,
        }
    }

    /// The closure, the first time (to run or drop it outside the lock).
    pub(crate) fn take_job(&self) -> Option<F> {
        match &mut *self.value.lock() {
            Phase::Before { job, .. } => job.take(),
            Phase::After { .. } => None,
        }
    }

    /// Deliver the outcome; called exactly once per task, after its closure
    /// was taken. Wakes blocking waiters and, once the lock is released, an
    /// awaiting handle's waker.
    pub(crate) fn set(&self, outcome: Outcome<T>, stamps: Stamps) {
        let after = Phase::After {
            outcome: Some(outcome),
            stamps: Packed::pack(stamps, self.due),
        };
        let waker = {
            let mut v = self.value.lock();
            let before = std::mem::replace(&mut *v, after);
            self.ready.notify_all();
            match before {
                Phase::Before { job, waker } => {
                    debug_assert!(job.is_none(), "a closure left behind");
                    waker
                }
                Phase::After { .. } => {
                    debug_assert!(false, "a task got two outcomes");
                    None
                }
            }
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// A handle's side of a slot, whatever closure type shares it: read and
/// take the outcome.
pub(crate) trait ReadSlot<T>: Send + Sync {
    /// Take the outcome if delivered, or register `cx`'s waker to be woken
    /// when it is.
    ///
    /// # Panics
    ///
    /// If the outcome was already taken (a handle polled after it
    /// completed).
    fn poll(&self, cx: &mut Context<'_>) -> Poll<Outcome<T>>;
    /// True once an outcome was delivered.
    fn is_set(&self) -> bool;
    /// The timing, once an outcome was delivered.
    fn timing(&self) -> Option<Timing>;
    /// Block until delivered; take the outcome.
    fn wait(&self) -> Outcome<T>;
    /// Wait until `deadline` at most; take the outcome if delivered.
    fn wait_until(&self, deadline: Option<Instant>) -> Option<Outcome<T>>;
    /// Take the outcome if delivered.
    fn try_take(&self) -> Option<Outcome<T>>;
}

impl<T: Send, F: Send> ReadSlot<T> for OutcomeSlot<T, F> {
    fn poll(&self, cx: &mut Context<'_>) -> Poll<Outcome<T>> {
        let mut v = self.value.lock();
        if let Some(o) = v.take_outcome() {
            return Poll::Ready(o);
        }
        assert!(
            v.stamps().is_none(),
            "a task handle was polled after it completed"
        );
        if self.faults.has(Fault::WakerCheckThenRegister) {
            MutexGuard::unlocked(&mut v, || ());
        }
        // Broken on purpose only: an outcome delivered while unlocked leaves
        // no place for the waker, which is lost.
        if let Phase::Before { waker, .. } = &mut *v {
            match waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                slot => *slot = Some(cx.waker().clone()),
            }
        }
        Poll::Pending
    }

    fn is_set(&self) -> bool {
        self.value.lock().stamps().is_some()
    }

    fn timing(&self) -> Option<Timing> {
        let packed = self.value.lock().stamps()?;
        Some(packed.unpack(self.due).timing(self.due))
    }

    fn wait(&self) -> Outcome<T> {
        let mut v = self.value.lock();
        loop {
            if let Some(o) = v.take_outcome() {
                return o;
            }
            self.ready.wait(&mut v);
        }
    }

    fn wait_until(&self, deadline: Option<Instant>) -> Option<Outcome<T>> {
        let mut v = self.value.lock();
        loop {
            if let Some(o) = v.take_outcome() {
                return Some(o);
            }
            match deadline {
                Some(d) if Instant::now() >= d => return None,
                Some(d) => {
                    self.ready.wait_until(&mut v, d);
                }
                None => self.ready.wait(&mut v),
            }
        }
    }

    fn try_take(&self) -> Option<Outcome<T>> {
        self.value.lock().take_outcome()
    }
}

/// When a claimed task fell due, was claimed and started, on the pool's clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunCtx {
    /// Due time, nanoseconds since the pool's epoch.
    pub(crate) due: i64,
    /// The instant of `due`.
    pub(crate) due_at: Instant,
    /// When its worker claimed and started it (one reading).
    pub(crate) started: Instant,
    /// `started` in nanoseconds since the pool's epoch.
    pub(crate) started_ns: i64,
    /// A completion stream wants a panic's message even without a handle.
    pub(crate) keep_panic: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_stamps_round_trip_relative_to_the_due_time() {
        let due = Instant::now() + Duration::from_secs(5);
        let cases = [
            Stamps::unclaimed(),
            Stamps::claimed(due + Duration::from_nanos(1)),
            // A claim before the due time (an early wake) is kept as it was.
            Stamps::ran(
                due - Duration::from_micros(250),
                due + Duration::from_secs(3600),
            ),
        ];
        for stamps in cases {
            let packed = Packed::pack(stamps, due);
            let back = packed.unpack(due);
            assert_eq!(
                (back.claimed, back.finished),
                (stamps.claimed, stamps.finished)
            );
            // Started with the claim if it ran; not started otherwise.
            let t = back.timing(due);
            assert_eq!(t.started, stamps.finished.and(stamps.claimed));
        }
    }

    #[test]
    fn an_outcome_slot_keeps_its_timing_in_packed_form() {
        let due = Instant::now();
        let slot = OutcomeSlot::<u8>::new(due, Faults::default());
        assert!(!slot.is_set() && slot.timing().is_none());
        let at = due + Duration::from_millis(2);
        slot.set(Outcome::Completed(7), Stamps::ran(at, at));
        let t = slot.timing().unwrap();
        assert_eq!((t.due, t.claimed, t.started), (due, Some(at), Some(at)));
        assert_eq!(slot.try_take(), Some(Outcome::Completed(7)));
        assert!(slot.is_set());
    }

    #[test]
    fn a_slot_gives_its_closure_once_and_then_holds_the_outcome() {
        let due = Instant::now();
        let slot = OutcomeSlot::<u8, Box<u8>>::with_job(Box::new(3), due, Faults::default());
        assert!(slot.try_take().is_none(), "a closure is no outcome");
        assert_eq!(slot.take_job().as_deref(), Some(&3));
        assert!(slot.take_job().is_none(), "taken once");
        slot.set(Outcome::Expired, Stamps::claimed(due));
        assert!(slot.take_job().is_none(), "an outcome is no closure");
        let t = slot.timing().unwrap();
        assert_eq!((t.claimed, t.started, t.finished), (Some(due), None, None));
        assert_eq!(slot.wait(), Outcome::Expired);
    }
}
