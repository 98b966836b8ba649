//! The completion stream's records: what a record says. Where they go is
//! `observe.rs`, how they are sent `send.rs`, the receiver `receiver.rs`.

use crate::pool::outcome::Outcome;
use std::fmt;
use std::time::Instant;

/// How a pool formats its keys for tracing: `<K as Debug>::fmt`.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))] // used by tracing only
pub(crate) type KeyFormat<K> = fn(&K, &mut fmt::Formatter<'_>) -> fmt::Result;
/// What a [`Completion`] record reports the end of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompletionKind {
    /// A one-shot task (with a handle or detached) ended: it ran, expired,
    /// or was removed unrun. Its only record.
    OneShot,
    /// One run of a periodic task returned or panicked, or a stale tick was
    /// skipped (`Expired`). The task goes on unless a
    /// [`PeriodicEnd`](Self::PeriodicEnd) record follows.
    PeriodicRun,
    /// A periodic task ended, with its final outcome (the one its
    /// [`PeriodicHandle`](crate::PeriodicHandle) gets). Its only final record.
    PeriodicEnd,
}

/// The record of one task's end (or one periodic run), sent as it happens
/// to the completion channel and to the listener.
///
/// Every task the pool accepted produces exactly one `OneShot` or
/// `PeriodicEnd` record. None reaches the channel when it was full or the
/// key's `Clone` panicked (both counted in
/// [`Stats::completions_dropped`](crate::Stats::completions_dropped)), and
/// none is made for a task dropped because its own key's `Hash`, `Eq` or
/// `Clone` panicked on a pool thread (see `docs/semantics.md`, "Completion
/// stream").
///
/// The struct is `#[non_exhaustive]`: fields may be added (read it, do not
/// build it).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Completion<K> {
    /// The task's key; `None` for a keyless (submitted) task.
    pub key: Option<K>,
    /// A one-shot task, a periodic run, or a periodic task's end.
    pub kind: CompletionKind,
    /// How it ended; a completed task's value stays with its handle, so the
    /// record carries `Completed(())`. `Panicked` carries the message.
    pub outcome: Outcome<()>,
    /// Its due time (of this run, for a periodic run); `None` for a
    /// periodic task stopped while one of its runs was in progress.
    pub due: Option<Instant>,
    /// When the run started; `None` if it never ran.
    pub started: Option<Instant>,
    /// When the run returned or panicked; `None` if it never ran.
    pub finished: Option<Instant>,
}
