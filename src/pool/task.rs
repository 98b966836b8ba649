//! Type-erased tasks: what the heap and the hand-off channel carry.

use super::outcome::{Abandon, Outcome, OutcomeSlot};
use crate::sync::Arc;
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A task as the pool sees it: run it, or give it up with a reason.
/// Either consumes it and delivers its one outcome.
pub(crate) trait Job: Send {
    /// Run the task, catching its panic, and deliver the outcome.
    fn run(self: Box<Self>);
    /// Drop the task unrun and deliver `why` as its outcome.
    fn abandon(self: Box<Self>, why: Abandon);
}

/// A boxed [`Job`].
pub(crate) type BoxJob = Box<dyn Job>;

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

impl<F, T> Job for OneShot<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    fn run(self: Box<Self>) {
        let OneShot { f, slot } = *self;
        let outcome = match catch_unwind(AssertUnwindSafe(f)) {
            Ok(v) => Outcome::Completed(v),
            Err(payload) => Outcome::Panicked(panic_message(payload)),
        };
        slot.set(outcome);
    }

    fn abandon(self: Box<Self>, why: Abandon) {
        let OneShot { f, slot } = *self;
        drop_quietly(f);
        slot.set(why.into());
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
