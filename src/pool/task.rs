//! Type-erased tasks: what the heap and the hand-off channel carry.

use super::outcome::{Abandon, Outcome, OutcomeSlot, Timing};
use crate::sync::Arc;
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

/// A boxed [`Job`].
pub(crate) type BoxJob<K> = Box<dyn Job<K>>;

/// When a claimed task fell due, was claimed and started, on the pool's clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunCtx {
    /// Due time, nanoseconds since the pool's epoch.
    pub(crate) due: i64,
    /// The instant of `due`.
    pub(crate) due_at: Instant,
    /// When the leader claimed it.
    pub(crate) claimed: Instant,
    /// When its worker started it.
    pub(crate) started: Instant,
    /// `started` in nanoseconds since the pool's epoch.
    pub(crate) started_ns: i64,
}

/// What a worker does after a run.
pub(crate) enum Next<K> {
    /// The task is finished and has delivered its outcome.
    Done,
    /// A periodic task wants to run again at `due` (nanoseconds since epoch),
    /// in place of the stand-in it left in the heap.
    Again {
        /// Next due time.
        due: i64,
        /// The task itself.
        job: BoxJob<K>,
    },
    /// A periodic task stops with this outcome, if its stand-in is still in
    /// the heap (otherwise whoever removed the stand-in delivered one).
    Stop {
        /// The task itself.
        job: BoxJob<K>,
        /// Its final outcome.
        outcome: Outcome<()>,
    },
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
}

/// A task as the pool sees it. Running, expiring or abandoning consumes it.
pub(crate) trait Job<K>: Send {
    /// Run the task on a worker, catching its panic.
    fn run(self: Box<Self>, ctx: &RunCtx, finished: &dyn Fn() -> (Instant, i64)) -> (Ran, Next<K>);
    /// Skip this run because it is stale.
    fn expire(self: Box<Self>, ctx: &RunCtx) -> Next<K>;
    /// Drop the task unrun and deliver `why` as its (final) outcome.
    fn abandon(self: Box<Self>, why: Abandon);
    /// A periodic task's stand-in, left in the heap under its key while it
    /// runs so that cancel and replace still find it.
    fn stand_in(&self) -> Option<BoxJob<K>> {
        None
    }
    /// True for a stand-in (never claimed, never run).
    fn is_stand_in(&self) -> bool {
        false
    }
    /// True for periodic tasks and their stand-ins.
    fn is_periodic(&self) -> bool {
        false
    }
    /// Deliver a final outcome (periodic tasks stopping by themselves).
    fn finish(self: Box<Self>, outcome: Outcome<()>) {
        drop_quietly(self);
        let _ = outcome;
    }
    /// Record the heap stamp of the task's current entry (periodic tasks).
    fn set_seq(&self, seq: u64) {
        let _ = seq;
    }
    /// The heap stamp of the entry this task expects to find (periodic tasks).
    fn seq(&self) -> u64 {
        u64::MAX
    }
}

/// A one-shot task and where its outcome goes.
pub(crate) struct OneShot<F, T> {
    /// The user's closure.
    f: F,
    /// The outcome slot shared with the task's handle.
    slot: Arc<OutcomeSlot<T>>,
}

impl<F, T> OneShot<F, T> {
    pub(crate) fn new(f: F, slot: Arc<OutcomeSlot<T>>) -> Self {
        OneShot { f, slot }
    }
}

impl<K, F, T> Job<K> for OneShot<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    fn run(self: Box<Self>, ctx: &RunCtx, finished: &dyn Fn() -> (Instant, i64)) -> (Ran, Next<K>) {
        let OneShot { f, slot } = *self;
        let result = catch_unwind(AssertUnwindSafe(f));
        if Arc::strong_count(&slot) == 1 {
            // No handle is left to read an outcome (none can appear again):
            // skip delivering it, and the clock read that would date it.
            return match result {
                Ok(v) => {
                    drop_quietly(v);
                    (Ran::Completed, Next::Done)
                }
                Err(payload) => {
                    forget_payload(payload);
                    (Ran::Panicked, Next::Done)
                }
            };
        }
        let (ran, outcome) = match result {
            Ok(v) => (Ran::Completed, Outcome::Completed(v)),
            Err(payload) => (Ran::Panicked, Outcome::Panicked(panic_message(payload))),
        };
        slot.set(outcome, Timing::ran(ctx, finished().0));
        // If the handle is gone, this drops the value the task returned:
        // its `Drop` is user code and must not take the worker down.
        drop_quietly(slot);
        (ran, Next::Done)
    }

    fn expire(self: Box<Self>, ctx: &RunCtx) -> Next<K> {
        let OneShot { f, slot } = *self;
        drop_quietly(f);
        slot.set(Outcome::Expired, Timing::claimed(ctx));
        drop_quietly(slot);
        Next::Done
    }

    fn abandon(self: Box<Self>, why: Abandon) {
        let OneShot { f, slot } = *self;
        drop_quietly(f);
        slot.set(why.into(), Timing::unclaimed());
        drop_quietly(slot);
    }
}

/// A one-shot task without a handle: its outcome is only counted.
pub(crate) struct Detached<F>(F);

impl<F> Detached<F> {
    pub(crate) fn new(f: F) -> Self {
        Detached(f)
    }
}

impl<K, F> Job<K> for Detached<F>
where
    F: FnOnce() + Send + 'static,
{
    fn run(self: Box<Self>, _: &RunCtx, _: &dyn Fn() -> (Instant, i64)) -> (Ran, Next<K>) {
        match catch_unwind(AssertUnwindSafe(self.0)) {
            Ok(()) => (Ran::Completed, Next::Done),
            Err(payload) => {
                forget_payload(payload);
                (Ran::Panicked, Next::Done)
            }
        }
    }

    fn expire(self: Box<Self>, _: &RunCtx) -> Next<K> {
        drop_quietly(self.0);
        Next::Done
    }

    fn abandon(self: Box<Self>, _: Abandon) {
        drop_quietly(self.0);
    }
}

/// Drop `value`, containing a panic from its `Drop` so that the pool's
/// callers and workers never see it.
pub(crate) fn drop_quietly<V>(value: V) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(move || drop(value))) {
        forget_payload(payload);
    }
}

/// The message of a panic payload; the payload is disposed of safely.
pub(crate) fn panic_message(payload: Box<dyn Any + Send>) -> String {
    let msg = if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_string()
    };
    forget_payload(payload);
    msg
}

/// Drop a panic payload; if its own `Drop` panics, leak that second payload
/// rather than unwind out of a worker.
fn forget_payload(payload: Box<dyn Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
}
