//! The task record: what a heap entry can be, and what a worker runs.
//!
//! A heap entry's value is a [`Task`]: a one-shot task, a periodic task
//! between runs, or the stand-in a running periodic task leaves under its
//! key. The heap's stamp of the entry is the task's one stamp: handles and a
//! periodic task's shared state record it after the insert, under the pool
//! lock. Running, expiring or abandoning a task consumes it, so it delivers
//! exactly one outcome.

use super::outcome::{Abandon, Outcome, OutcomeSlot, Ran, RunCtx, Stamps, LOST};
use super::periodic::{PeriodicCtl, PeriodicJob};
use super::time::Now;
use crate::contain::{catch, drop_quietly, forget_payload, panic_message};
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

    /// True for a retried one-shot task or its stand-in.
    pub(crate) fn is_retry(&self) -> bool {
        match self {
            Task::Once(_) => false,
            Task::Periodic(job) => job.ctl().is_retry(),
            Task::StandIn(ctl) => ctl.is_retry(),
        }
    }

    /// The shared state of a periodic task or stand-in.
    fn periodic_ctl(&self) -> Option<Arc<PeriodicCtl>> {
        match self {
            Task::Once(_) => None,
            Task::Periodic(job) => Some(job.ctl().clone()),
            Task::StandIn(ctl) => Some(ctl.clone()),
        }
    }

    /// Drop the task unrun because user code the pool ran for it (its key's
    /// traits) panicked: it is told `Panicked` ([`LOST`]).
    pub(crate) fn lose(self) {
        match self {
            // Its delivery tells it LOST when dropped.
            Task::Once(job) => drop_quietly(job),
            Task::Periodic(job) => job.lose(),
            Task::StandIn(ctl) => ctl.lose(),
        }
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

/// Run `step` on `entry`, which consumes it, containing a panic of the user
/// code it runs (the entry's key): the task, dropped inside, is then told
/// `Panicked` ([`LOST`]) and `None` comes back.
pub(crate) fn or_lose<K, R>(
    entry: PoolEntry<K>,
    step: impl FnOnce(PoolEntry<K>) -> R,
) -> Option<R> {
    let periodic = entry.value.periodic_ctl();
    match catch(move || step(entry)) {
        Ok(r) => Some(r),
        Err(payload) => {
            // A one-shot task's delivery told it when it was dropped.
            forget_payload(payload);
            if let Some(ctl) = periodic {
                ctl.lose();
            }
            None
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
/// delivers its outcome. `Any`, so a refused task can give its closure
/// back (`refused.rs`).
pub(crate) trait OnceJob: std::any::Any + Send {
    /// Run on a worker, catching a panic; `finish` reads the pool's clock
    /// once the run returned. A panic's message goes to `panic` when
    /// `ctx.keep_panic` asks for it.
    fn run(
        self: Box<Self>,
        ctx: &RunCtx,
        finish: &dyn Fn() -> Now,
        panic: &mut Option<String>,
    ) -> Ran;
    /// Skip the run because it is stale.
    fn expire(self: Box<Self>, claimed: Instant);
    /// Drop the task unrun and deliver `why`.
    fn abandon(self: Box<Self>, why: Abandon);
}

/// A task's outcome slot as the task holds it: delivered into exactly once,
/// and told `Panicked` ([`LOST`]) if the task is dropped before it
/// delivered, so that no handle waits for ever.
pub(crate) struct Delivery<T>(Option<Arc<OutcomeSlot<T>>>);

impl<T> Delivery<T> {
    /// Deliver into `slot`.
    pub(crate) fn new(slot: Arc<OutcomeSlot<T>>) -> Self {
        Delivery(Some(slot))
    }

    /// True when no handle is left to read an outcome (none can appear
    /// again).
    fn unwatched(&self) -> bool {
        self.0
            .as_ref()
            .is_none_or(|slot| Arc::strong_count(slot) == 1)
    }

    /// Deliver `outcome`, unless the handle is gone (nobody can read it, and
    /// no handle appears again): then the slot is let go unset, which skips
    /// its lock, its stamps and its wake-ups (a replaced or cancelled
    /// fire-and-forget task). Either way the value the task returned may be
    /// dropped here: its `Drop` is user code and must not take the worker
    /// down.
    fn deliver(mut self, outcome: Outcome<T>, stamps: Stamps) {
        if let Some(slot) = self.0.take() {
            if Arc::strong_count(&slot) == 1 {
                drop_quietly(outcome);
            } else {
                slot.set(outcome, stamps);
            }
            drop_quietly(slot);
        }
    }

    /// Let go of the slot without delivering: nobody can read it.
    fn forget(mut self) {
        self.0 = None;
    }
}

impl<T> Drop for Delivery<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            slot.set(Outcome::Panicked(LOST.to_string()), Stamps::unclaimed());
        }
    }
}

/// A one-shot task and where its outcome goes.
pub(crate) struct OneShot<F, T> {
    /// The user's closure.
    f: F,
    /// The outcome slot shared with the task's handle.
    slot: Delivery<T>,
}

impl<F, T> OneShot<F, T> {
    /// A task running `f` and delivering into `slot`.
    pub(crate) fn new(f: F, slot: Arc<OutcomeSlot<T>>) -> Self {
        OneShot {
            f,
            slot: Delivery::new(slot),
        }
    }

    /// The closure back, unrun, delivering nothing: for a task refused
    /// before its handle was made.
    pub(crate) fn into_closure(self) -> F {
        self.slot.forget();
        self.f
    }
}

impl<F, T> OnceJob for OneShot<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    fn run(
        self: Box<Self>,
        ctx: &RunCtx,
        finish: &dyn Fn() -> Now,
        panic: &mut Option<String>,
    ) -> Ran {
        let OneShot { f, slot } = *self;
        let result = catch_unwind(AssertUnwindSafe(f));
        if slot.unwatched() {
            // Skip delivering the outcome, and the clock read that would
            // date it.
            slot.forget();
            return match result {
                Ok(v) => {
                    drop_quietly(v);
                    Ran::Completed
                }
                Err(payload) => {
                    *panic = kept_message(ctx, payload);
                    Ran::Panicked
                }
            };
        }
        let (ran, outcome) = match result {
            Ok(v) => (Ran::Completed, Outcome::Completed(v)),
            Err(payload) => {
                let msg = panic_message(payload);
                if ctx.keep_panic {
                    *panic = Some(msg.clone());
                }
                (Ran::Panicked, Outcome::Panicked(msg))
            }
        };
        slot.deliver(outcome, Stamps::ran(ctx.claimed, ctx.started, finish().at));
        ran
    }

    fn expire(self: Box<Self>, claimed: Instant) {
        let OneShot { f, slot } = *self;
        drop_quietly(f);
        slot.deliver(Outcome::Expired, Stamps::claimed(claimed));
    }

    fn abandon(self: Box<Self>, why: Abandon) {
        let OneShot { f, slot } = *self;
        drop_quietly(f);
        slot.deliver(why.into(), Stamps::unclaimed());
    }
}

/// The message of a panic nobody holds a handle for, if a completion stream
/// wants it (`ctx.keep_panic`); the payload is disposed of either way.
fn kept_message(ctx: &RunCtx, payload: Box<dyn std::any::Any + Send>) -> Option<String> {
    if ctx.keep_panic {
        Some(panic_message(payload))
    } else {
        forget_payload(payload);
        None
    }
}

/// A one-shot task without a handle: its outcome is only counted (and
/// reported to a completion stream, if the pool has one).
pub(crate) struct Detached<F>(F);

impl<F> Detached<F> {
    /// A task running `f`.
    pub(crate) fn new(f: F) -> Self {
        Detached(f)
    }

    /// The closure back, unrun.
    pub(crate) fn into_closure(self) -> F {
        self.0
    }
}

impl<F> OnceJob for Detached<F>
where
    F: FnOnce() + Send + 'static,
{
    fn run(self: Box<Self>, ctx: &RunCtx, _: &dyn Fn() -> Now, panic: &mut Option<String>) -> Ran {
        match catch_unwind(AssertUnwindSafe(self.0)) {
            Ok(()) => Ran::Completed,
            Err(payload) => {
                *panic = kept_message(ctx, payload);
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
