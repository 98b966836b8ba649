//! Refused work returned: `try_` forms of the scheduling calls that hand
//! the closure back with the error, as crossbeam's `SendError<T>` hands
//! back the message. The plain calls are unchanged and pay nothing for it.
//!
//! # Ground rules
//!
//! - Intake gives refused tasks back after the lock is released
//!   (`Shared::admit_single`); the task is the one this call boxed, so
//!   its closure comes out by a downcast, unrun, and no outcome is
//!   delivered (no handle was made).

use super::intake::{Arrival, Refusal, Stamp};
use super::task::{once_job, Joint, Task, TaskKey, Watched};
use super::{Due, TaskHandle, TimerPool};
use crate::contain::drop_quietly;
use crate::sync::Arc;
use crate::Error;
use std::any::Any;
use std::fmt;
use std::hash::Hash;

/// A scheduling call's refusal with its closure handed back, unrun: the
/// error of a `try_` method such as [`TimerPool::try_schedule`].
/// It converts into [`Error`], so `?` works where the plain calls' errors
/// do.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::{Error, TimerPool};
///
/// let pool = TimerPool::<u64>::builder().workers(1).capacity(1).build()?;
/// pool.schedule(1, Duration::from_secs(60), || "first")?;
/// let refused = pool.try_schedule(2, Duration::from_secs(60), || "second").unwrap_err();
/// assert_eq!(refused.error(), &Error::CapacityReached { capacity: 1 });
/// let job = refused.into_inner(); // re-queue it elsewhere, or run it here
/// assert_eq!(job(), "second");
/// # Ok::<(), timerpool::Error>(())
/// ```
pub struct Refused<F> {
    /// Why the call was refused.
    error: Error,
    /// The closure it was given.
    task: F,
}

impl<F> Refused<F> {
    /// Why the call was refused: [`Error::ShutDown`],
    /// [`Error::CapacityReached`] or [`Error::TimeOutOfRange`].
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// The closure, unrun.
    pub fn into_inner(self) -> F {
        self.task
    }

    /// The error and the closure.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Error, TimerPool};
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// pool.shutdown();
    /// let (error, job) = pool.try_schedule(1, Duration::ZERO, || "job").unwrap_err().into_parts();
    /// assert_eq!((error, job()), (Error::ShutDown, "job"));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn into_parts(self) -> (Error, F) {
        (self.error, self.task)
    }
}

impl<F> Refused<F> {
    /// The error alone, the closure dropped with a panic of its `Drop`
    /// contained: what the plain (not `try_`) calls return.
    pub(crate) fn drop_closure(self) -> Error {
        drop_quietly(self.task);
        self.error
    }
}

impl<F> From<Refused<F>> for Error {
    /// The error alone; the closure is dropped.
    fn from(refused: Refused<F>) -> Error {
        refused.error
    }
}

impl<F> fmt::Debug for Refused<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Refused")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<F> fmt::Display for Refused<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<F> std::error::Error for Refused<F> {}

impl<K: Hash + Eq + Clone + Send + 'static> TimerPool<K> {
    /// [`schedule`](Self::schedule) that hands `f` back if it is refused.
    ///
    /// # Errors
    ///
    /// As [`schedule`](Self::schedule), in a [`Refused`] holding `f`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TimerPool};
    /// let primary = TimerPool::<u64>::builder().workers(1).capacity(1).build()?;
    /// let overflow = TimerPool::<u64>::builder().workers(1).build()?;
    /// primary.schedule(1, Duration::from_secs(60), || 1)?;
    /// let h = match primary.try_schedule(2, Duration::ZERO, || 2) {
    ///     Ok(h) => h,
    ///     Err(refused) => overflow.schedule(2, Duration::ZERO, refused.into_inner())?,
    /// };
    /// assert_eq!(h.wait(), Outcome::Completed(2));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn try_schedule<F, T>(
        &self,
        key: K,
        when: impl Into<Due>,
        f: F,
    ) -> Result<TaskHandle<T, K>, Refused<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.try_add_once(TaskKey::Keyed(key), when.into(), f)
    }

    /// [`submit`](Self::submit) that hands `f` back if it is refused.
    ///
    /// # Errors
    ///
    /// As [`schedule`](Self::schedule), in a [`Refused`] holding `f`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Error, TimerPool};
    ///
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// pool.shutdown();
    /// let refused = pool.try_submit(Duration::ZERO, || 42).unwrap_err();
    /// assert_eq!(refused.error(), &Error::ShutDown);
    /// assert_eq!(refused.into_inner()(), 42);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn try_submit<F, T>(
        &self,
        when: impl Into<Due>,
        f: F,
    ) -> Result<TaskHandle<T, K>, Refused<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.try_add_once(self.shared.anon_key(), when.into(), f)
    }

    /// [`schedule_detached`](Self::schedule_detached) that hands `f` back if
    /// it is refused.
    ///
    /// # Errors
    ///
    /// As [`schedule`](Self::schedule), in a [`Refused`] holding `f`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Error, TimerPool};
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// pool.begin_shutdown();
    /// let refused = pool.try_schedule_detached(1, Duration::ZERO, || ()).unwrap_err();
    /// assert_eq!(refused.error(), &Error::ShutDown);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn try_schedule_detached<F>(
        &self,
        key: K,
        when: impl Into<Due>,
        f: F,
    ) -> Result<(), Refused<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        self.try_add_detached(TaskKey::Keyed(key), when.into(), f)
    }

    /// A one-shot task without a handle, or `f` back.
    pub(super) fn try_add_detached<F>(
        &self,
        key: TaskKey<K>,
        when: Due,
        f: F,
    ) -> Result<(), Refused<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        let due = match self.due_ns(when) {
            Ok(due) => due,
            Err(error) => return Err(self.refused(error, f)),
        };
        let task = Task::Once(once_job(f));
        self.try_admit(key, due, task).map(drop).map_err(|refusal| {
            let f = own_closure::<F>(refusal.tasks);
            self.refused(refusal.error, f)
        })
    }

    /// A one-shot task with a handle, or `f` back.
    pub(super) fn try_add_once<F, T>(
        &self,
        key: TaskKey<K>,
        when: Due,
        f: F,
    ) -> Result<TaskHandle<T, K>, Refused<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let time = &self.shared.time;
        let (due, due_at) = match time.due_at(when, || time.now()) {
            Ok(due) => due,
            Err(error) => return Err(self.refused(error, f)),
        };
        let joint = Arc::new(Joint::new(f, due_at, self.shared.faults));
        let handle_key = key.clone();
        let task = Task::Watched(Watched::new(joint.clone()));
        match self.try_admit(key, due, task) {
            Ok(stamp) => {
                let pool = Arc::downgrade(&self.shared);
                Ok(TaskHandle::new(joint, pool, handle_key, stamp))
            }
            Err(refusal) => {
                drop(joint);
                let f = own_watched::<F, T>(refusal.tasks);
                Err(self.refused(refusal.error, f))
            }
        }
    }

    /// Admit one task, or hand it back.
    fn try_admit(&self, key: TaskKey<K>, due: i64, task: Task) -> Result<Stamp, Refusal> {
        // A replace reports the task it removed: the stream stays open.
        let arrival = Arrival { key, due, task };
        self.shared
            .sending_while(|| self.shared.admit_single(arrival))
    }

    /// Count (and trace) a refusal and pair its error with the closure.
    fn refused<F>(&self, error: Error, task: F) -> Refused<F> {
        self.shared.counters.refused(1);
        #[cfg(feature = "tracing")]
        super::trace::refused(1, &error);
        Refused { error, task }
    }
}

/// The closure of the one watched task a `try_` call handed intake.
fn own_watched<F, T>(tasks: Vec<Task>) -> F
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let f = match tasks.into_iter().next() {
        Some(Task::Watched(job)) => job.into_closure::<F, T>(),
        _ => None,
    };
    // Intake hands back exactly the arrival it was given, which this call
    // made as a `Joint<F, T>` whose handle is gone: the closure is there.
    f.expect("a refused call gets its own task back")
}

/// The closure of the one task without a handle a `try_` call handed
/// intake.
fn own_closure<F: 'static>(tasks: Vec<Task>) -> F {
    let f: Option<Box<dyn Any + Send>> = match tasks.into_iter().next() {
        Some(Task::Once(mut job)) => Some(job.take_closure()),
        _ => None,
    };
    // Intake hands back exactly the arrival it was given, which this call
    // made from an `F`, unrun: the downcast cannot fail.
    f.and_then(|f| f.downcast::<Option<F>>().ok())
        .and_then(|f| *f)
        .expect("a refused call gets its own task back")
}
