//! Per-task outcomes and the handles that wait for them.

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
    /// (or dropped) while the task was pending; it never ran.
    Shutdown,
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

/// Where a task's outcome is delivered, shared by the task and its handle.
pub(crate) struct OutcomeSlot<T> {
    /// The outcome, once there is one.
    value: Mutex<Option<Outcome<T>>>,
    /// Notified when `value` is set.
    ready: Condvar,
}

impl<T> OutcomeSlot<T> {
    pub(crate) fn new() -> Self {
        OutcomeSlot {
            value: Mutex::new(None),
            ready: Condvar::new(),
        }
    }

    /// Deliver the outcome; called exactly once per task.
    pub(crate) fn set(&self, outcome: Outcome<T>) {
        let mut v = self.value.lock();
        debug_assert!(v.is_none(), "a task got two outcomes");
        *v = Some(outcome);
        self.ready.notify_all();
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
            .field("finished", &self.slot.value.lock().is_some())
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
        self.slot.value.lock().is_some()
    }

    /// Block until the task has an outcome and return it.
    ///
    /// Never blocks forever: every accepted task gets an outcome, at the
    /// latest when the pool is shut down or dropped.
    pub fn wait(self) -> Outcome<T> {
        let mut v = self.slot.value.lock();
        loop {
            if let Some(o) = v.take() {
                return o;
            }
            self.slot.ready.wait(&mut v);
        }
    }

    /// Wait at most `timeout` for the outcome; the handle comes back as the
    /// error if there is none yet.
    ///
    /// # Errors
    ///
    /// The handle itself, when the timeout passed without an outcome.
    pub fn wait_timeout(self, timeout: Duration) -> Result<Outcome<T>, Self> {
        let deadline = Instant::now().checked_add(timeout);
        {
            let mut v = self.slot.value.lock();
            loop {
                if let Some(o) = v.take() {
                    return Ok(o);
                }
                match deadline {
                    Some(d) if Instant::now() >= d => break,
                    Some(d) => {
                        self.slot.ready.wait_until(&mut v, d);
                    }
                    None => self.slot.ready.wait(&mut v),
                }
            }
        }
        Err(self)
    }

    /// The outcome if there is one now; otherwise the handle comes back.
    ///
    /// # Errors
    ///
    /// The handle itself, when the task has no outcome yet.
    pub fn try_outcome(self) -> Result<Outcome<T>, Self> {
        let taken = self.slot.value.lock().take();
        taken.ok_or(self)
    }
}
