//! Per-task outcomes and the handles that wait for them.

use super::task::RunCtx;
use super::{Shared, TaskKey};
use crate::sync::{Arc, Condvar, Mutex, Weak};
use std::fmt;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// How a task ended. Every task the pool accepted gets exactly one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<T> {
    /// The task ran and returned this value.
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
    /// ([`Builder::expire_after`](crate::Builder::expire_after)).
    Expired,
}

impl<T> Outcome<T> {
    /// The value of a completed task.
    pub fn completed(self) -> Option<T> {
        match self {
            Outcome::Completed(v) => Some(v),
            _ => None,
        }
    }

    /// True if the task ran (completed or panicked).
    pub fn ran(&self) -> bool {
        matches!(self, Outcome::Completed(_) | Outcome::Panicked(_))
    }
}

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
/// never claimed, an expired one never started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Its due time.
    pub due: Instant,
    /// When the leader claimed it.
    pub claimed: Option<Instant>,
    /// When a worker started it.
    pub started: Option<Instant>,
    /// When it returned or panicked.
    pub finished: Option<Instant>,
}

impl Timing {
    /// How late the task started: `started - due`.
    pub fn lateness(&self) -> Option<Duration> {
        Some(self.started?.saturating_duration_since(self.due))
    }
}

/// The steps of [`Timing`] a task reached, without its due time.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Stamps {
    /// When claimed.
    claimed: Option<Instant>,
    /// When started.
    started: Option<Instant>,
    /// When finished.
    finished: Option<Instant>,
}

impl From<&Timing> for Stamps {
    fn from(t: &Timing) -> Self {
        Stamps {
            claimed: t.claimed,
            started: t.started,
            finished: t.finished,
        }
    }
}

impl Timing {
    /// Stamps of a task that ran.
    pub(crate) fn ran(ctx: &RunCtx, finished: Instant) -> Stamps {
        Stamps {
            claimed: Some(ctx.claimed),
            started: Some(ctx.started),
            finished: Some(finished),
        }
    }

    /// Stamps of a task claimed but not run.
    pub(crate) fn claimed(ctx: &RunCtx) -> Stamps {
        Stamps {
            claimed: Some(ctx.claimed),
            ..Stamps::default()
        }
    }

    /// Stamps of a task removed while pending.
    pub(crate) fn unclaimed() -> Stamps {
        Stamps::default()
    }
}

/// The outcome and stamps, once there are some.
struct Delivered<T> {
    /// Taken by the handle.
    outcome: Option<Outcome<T>>,
    /// Set with the outcome.
    stamps: Option<Stamps>,
}

/// Where a task's outcome is delivered, shared by the task and its handle.
pub(crate) struct OutcomeSlot<T> {
    /// The outcome, once there is one.
    value: Mutex<Delivered<T>>,
    /// Notified when `value` is set.
    ready: Condvar,
    /// The task's due time (of its first run, for periodic tasks).
    due: Instant,
}

impl<T> OutcomeSlot<T> {
    pub(crate) fn new(due: Instant) -> Self {
        OutcomeSlot {
            value: Mutex::new(Delivered {
                outcome: None,
                stamps: None,
            }),
            ready: Condvar::new(),
            due,
        }
    }

    /// Deliver the outcome; called exactly once per task.
    pub(crate) fn set(&self, outcome: Outcome<T>, stamps: Stamps) {
        let mut v = self.value.lock();
        debug_assert!(v.stamps.is_none(), "a task got two outcomes");
        v.outcome = Some(outcome);
        v.stamps = Some(stamps);
        self.ready.notify_all();
    }

    /// True once an outcome was delivered.
    pub(crate) fn is_set(&self) -> bool {
        self.value.lock().stamps.is_some()
    }

    /// The timing, once an outcome was delivered.
    pub(crate) fn timing(&self) -> Option<Timing> {
        let s = self.value.lock().stamps?;
        Some(Timing {
            due: self.due,
            claimed: s.claimed,
            started: s.started,
            finished: s.finished,
        })
    }

    /// Block until delivered; take the outcome.
    pub(crate) fn wait(&self) -> Outcome<T> {
        let mut v = self.value.lock();
        loop {
            if let Some(o) = v.outcome.take() {
                return o;
            }
            self.ready.wait(&mut v);
        }
    }

    /// Wait until `deadline` at most; take the outcome if delivered.
    pub(crate) fn wait_until(&self, deadline: Option<Instant>) -> Option<Outcome<T>> {
        let mut v = self.value.lock();
        loop {
            if let Some(o) = v.outcome.take() {
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

    /// Take the outcome if delivered.
    pub(crate) fn try_take(&self) -> Option<Outcome<T>> {
        self.value.lock().outcome.take()
    }
}

/// A handle to one task: wait for its [`Outcome`] or cancel it.
///
/// The taking methods consume the handle, so an outcome is handed out once;
/// the timed and non-blocking ones give the handle back while there is none.
/// Dropping a handle does not cancel its task.
pub struct TaskHandle<T, K> {
    /// Where the outcome arrives.
    slot: Arc<OutcomeSlot<T>>,
    /// The pool, for cancel; gone once the pool is dropped.
    pool: Weak<Shared<K>>,
    /// The task's key in the pool's heap.
    key: TaskKey<K>,
    /// The heap stamp of this task, so a handle never cancels a replacement.
    seq: u64,
}

impl<T, K> fmt::Debug for TaskHandle<T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskHandle")
            .field("seq", &self.seq)
            .field("finished", &self.slot.is_set())
            .finish_non_exhaustive()
    }
}

impl<T, K: Hash + Eq + Clone + Send + 'static> TaskHandle<T, K> {
    pub(crate) fn new(
        slot: Arc<OutcomeSlot<T>>,
        pool: Weak<Shared<K>>,
        key: TaskKey<K>,
        seq: u64,
    ) -> Self {
        TaskHandle {
            slot,
            pool,
            key,
            seq,
        }
    }

    /// Cancel the task if it is still pending. True iff it was: it will never
    /// run and its outcome is [`Outcome::Cancelled`]. False once it has been
    /// claimed, replaced, cancelled or shut down.
    pub fn cancel(&self) -> bool {
        match self.pool.upgrade() {
            Some(pool) => pool.cancel_exact(&self.key, self.seq),
            None => false,
        }
    }

    /// The key the task was scheduled under; `None` for keyless submissions.
    pub fn key(&self) -> Option<&K> {
        match &self.key {
            TaskKey::Keyed(k) => Some(k),
            TaskKey::Anon(_) => None,
        }
    }

    /// True once the task has an outcome.
    pub fn is_finished(&self) -> bool {
        self.slot.is_set()
    }

    /// When the task fell due, was claimed, started and finished; `None`
    /// until it has an outcome.
    pub fn timing(&self) -> Option<Timing> {
        self.slot.timing()
    }

    /// Block until the task has an outcome and return it.
    ///
    /// Never blocks forever: every accepted task gets an outcome, at the
    /// latest when the pool is shut down or dropped.
    pub fn wait(self) -> Outcome<T> {
        self.slot.wait()
    }

    /// Like [`wait`](Self::wait), also returning the task's [`Timing`].
    pub fn wait_timed(self) -> (Outcome<T>, Timing) {
        let outcome = self.slot.wait();
        let timing = self.slot.timing().expect("delivered with the outcome");
        (outcome, timing)
    }

    /// Wait at most `timeout` for the outcome; the handle comes back as the
    /// error if there is none yet.
    ///
    /// # Errors
    ///
    /// The handle itself, when the timeout passed without an outcome.
    pub fn wait_timeout(self, timeout: Duration) -> Result<Outcome<T>, Self> {
        let deadline = Instant::now().checked_add(timeout);
        self.slot.wait_until(deadline).ok_or(self)
    }

    /// The outcome if there is one now; otherwise the handle comes back.
    ///
    /// # Errors
    ///
    /// The handle itself, when the task has no outcome yet.
    pub fn try_outcome(self) -> Result<Outcome<T>, Self> {
        self.slot.try_take().ok_or(self)
    }
}
