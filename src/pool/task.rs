//! The task record: what a heap entry can be, and what a worker runs.
//!
//! A heap entry's value is a [`Task`]: a one-shot task, a periodic task
//! between runs, or the stand-in a running periodic task leaves under its
//! key. The heap's stamp of the entry is the task's one stamp: handles and a
//! periodic task's shared state record it after the insert, under the pool
//! lock. Running, expiring or abandoning a task consumes it, so it delivers
//! exactly one outcome.

use super::outcome::{Abandon, Outcome, OutcomeSlot, Ran, RunCtx, Stamps};
use super::periodic::{PeriodicCtl, PeriodicJob};
use super::time::Now;
use crate::contain::{drop_quietly, forget_payload, panic_message};
use crate::heap::Entry;
use crate::sync::Arc;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

/// A task's identity in the heap: the caller's key, or a sequence number for
/// keyless submissions.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum TaskKey<K> {
    /// Scheduled under a caller's key.
    Keyed(K),
    /// Submitted without a key.
    Anon(u64),
}

impl<K> TaskKey<K> {
    /// The caller's key, if any.
    pub(crate) fn keyed(&self) -> Option<&K> {
        match self {
            TaskKey::Keyed(k) => Some(k),
            TaskKey::Anon(_) => None,
        }
    }
}

/// An entry of the pool's heap.
pub(crate) type PoolEntry<K> = Entry<TaskKey<K>, Task>;

/// What a heap entry holds.
pub(crate) enum Task {
    /// A one-shot task, with or without a handle.
    Once(Box<dyn OnceJob>),
    /// A periodic task waiting for its next run.
    Periodic(Box<PeriodicJob>),
    /// Left under a running periodic task's key (due never), so that cancel,
    /// replace and shutdown still find the task; it delivers the task's
    /// final outcome if it is removed.
    StandIn(Arc<PeriodicCtl>),
}

impl Task {
    /// True for periodic tasks and their stand-ins.
    pub(crate) fn is_periodic(&self) -> bool {
        !matches!(self, Task::Once(_))
    }

    /// True for a stand-in.
    pub(crate) fn is_stand_in(&self) -> bool {
        matches!(self, Task::StandIn(_))
    }

    /// Drop the task unrun and deliver `why` as its (final) outcome.
    pub(crate) fn abandon(self, why: Abandon) {
        match self {
            Task::Once(job) => job.abandon(why),
            Task::Periodic(job) => job.abandon(why),
            Task::StandIn(ctl) => ctl.abandon(why),
        }
    }
}

/// A claimed task, ready to run: a stand-in is never claimed.
pub(crate) enum Runnable {
    /// A one-shot task.
    Once(Box<dyn OnceJob>),
    /// One run of a periodic task.
    Periodic(Box<PeriodicJob>),
}

/// A one-shot task as the pool sees it; each method consumes it and
/// delivers its outcome.
pub(crate) trait OnceJob: Send {
    /// Run on a worker, catching a panic; `finish` reads the pool's clock
    /// once the run returned.
    fn run(self: Box<Self>, ctx: &RunCtx, finish: &dyn Fn() -> Now) -> Ran;
    /// Skip the run because it is stale.
    fn expire(self: Box<Self>, claimed: Instant);
    /// Drop the task unrun and deliver `why`.
    fn abandon(self: Box<Self>, why: Abandon);
}

/// A one-shot task and where its outcome goes.
pub(crate) struct OneShot<F, T> {
    /// The user's closure.
    f: F,
    /// The outcome slot shared with the task's handle.
    slot: Arc<OutcomeSlot<T>>,
}

impl<F, T> OneShot<F, T> {
    /// A task running `f` and delivering into `slot`.
    pub(crate) fn new(f: F, slot: Arc<OutcomeSlot<T>>) -> Self {
        OneShot { f, slot }
    }
}

impl<F, T> OnceJob for OneShot<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    fn run(self: Box<Self>, ctx: &RunCtx, finish: &dyn Fn() -> Now) -> Ran {
        let OneShot { f, slot } = *self;
        let result = catch_unwind(AssertUnwindSafe(f));
        if Arc::strong_count(&slot) == 1 {
            // No handle is left to read an outcome (none can appear again):
            // skip delivering it, and the clock read that would date it.
            return match result {
                Ok(v) => {
                    drop_quietly(v);
                    Ran::Completed
                }
                Err(payload) => {
                    forget_payload(payload);
                    Ran::Panicked
                }
            };
        }
        let (ran, outcome) = match result {
            Ok(v) => (Ran::Completed, Outcome::Completed(v)),
            Err(payload) => (Ran::Panicked, Outcome::Panicked(panic_message(payload))),
        };
        slot.set(outcome, Stamps::ran(ctx.claimed, ctx.started, finish().at));
        // If the handle is gone, this drops the value the task returned:
        // its `Drop` is user code and must not take the worker down.
        drop_quietly(slot);
        ran
    }

    fn expire(self: Box<Self>, claimed: Instant) {
        let OneShot { f, slot } = *self;
        drop_quietly(f);
        slot.set(Outcome::Expired, Stamps::claimed(claimed));
        drop_quietly(slot);
    }

    fn abandon(self: Box<Self>, why: Abandon) {
        let OneShot { f, slot } = *self;
        drop_quietly(f);
        slot.set(why.into(), Stamps::unclaimed());
        drop_quietly(slot);
    }
}

/// A one-shot task without a handle: its outcome is only counted.
pub(crate) struct Detached<F>(F);

impl<F> Detached<F> {
    /// A task running `f`.
    pub(crate) fn new(f: F) -> Self {
        Detached(f)
    }
}

impl<F> OnceJob for Detached<F>
where
    F: FnOnce() + Send + 'static,
{
    fn run(self: Box<Self>, _: &RunCtx, _: &dyn Fn() -> Now) -> Ran {
        match catch_unwind(AssertUnwindSafe(self.0)) {
            Ok(()) => Ran::Completed,
            Err(payload) => {
                forget_payload(payload);
                Ran::Panicked
            }
        }
    }

    fn expire(self: Box<Self>, _: Instant) {
        drop_quietly(self.0);
    }

    fn abandon(self: Box<Self>, _: Abandon) {
        drop_quietly(self.0);
    }
}
