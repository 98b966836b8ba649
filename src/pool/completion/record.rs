//! The completion stream's records and plumbing: what a record says, and
//! the channel and listener a pool built with a stream sends them to. The
//! protocol of sending them is in `completion/send.rs`, the channel and its
//! receiver in `receiver.rs`.

use super::receiver::{CompletionReceiver, Outlet};
use crate::pool::outcome::Outcome;
use crate::sync::{Arc, Receiver};
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

/// A completion listener, as the builder keeps it.
pub(crate) type Listener<K> = Arc<dyn Fn(&Completion<K>) + Send + Sync>;

/// The completion channel: its sending side and the receiver the pool
/// hands out copies of.
pub(crate) type Channel<K> = (Arc<Outlet<K>>, Receiver<Completion<K>>);

/// Where records go; present only when the pool was built with a stream.
/// Dropped with the pool's engine, it ends the stream.
pub(crate) struct Sink<K> {
    /// The bounded channel: its sending side and the receiver the pool
    /// hands out copies of.
    pub(crate) channel: Option<Channel<K>>,
    /// The listener.
    pub(crate) listener: Option<Listener<K>>,
}

impl<K> fmt::Debug for Sink<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sink")
            .field("channel", &self.channel.is_some())
            .field("listener", &self.listener.is_some())
            .finish()
    }
}

/// What the builder was told about observing the pool: the completion
/// stream and, with the `tracing` feature, how to format keys.
pub(crate) struct Observe<K> {
    /// Capacity of the channel, if one was asked for.
    pub(crate) capacity: Option<usize>,
    /// The listener, if one was given.
    pub(crate) listener: Option<Listener<K>>,
    /// How keys are formatted in tracing spans and events (`trace.rs`).
    #[cfg(feature = "tracing")]
    pub(crate) key_format: Option<KeyFormat<K>>,
}

impl<K> Default for Observe<K> {
    fn default() -> Self {
        Observe {
            capacity: None,
            listener: None,
            #[cfg(feature = "tracing")]
            key_format: None,
        }
    }
}

impl<K> fmt::Debug for Observe<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observe")
            .field("capacity", &self.capacity)
            .field("listener", &self.listener.is_some())
            .finish_non_exhaustive()
    }
}

impl<K> Observe<K> {
    /// The sink, or `None` when neither a channel nor a listener was asked
    /// for (the capacity was validated by the builder).
    pub(crate) fn sink(&mut self) -> Option<Sink<K>> {
        if self.capacity.is_none() && self.listener.is_none() {
            return None;
        }
        Some(Sink {
            channel: self.capacity.map(Outlet::new),
            listener: self.listener.take(),
        })
    }
}

impl<K> Sink<K> {
    /// A receiver of the channel, if there is one.
    pub(crate) fn receiver(&self) -> Option<CompletionReceiver<K>> {
        let (outlet, rx) = self.channel.as_ref()?;
        Some(CompletionReceiver::new(rx.clone(), outlet.clone()))
    }

    /// The channel's sending side, if there is one.
    pub(crate) fn outlet(&self) -> Option<&Arc<Outlet<K>>> {
        self.channel.as_ref().map(|(outlet, _)| outlet)
    }
}

impl<K> Drop for Sink<K> {
    /// The engine is gone: no record can follow.
    fn drop(&mut self) {
        // A failed loom model unwinds through here: no loom operation then.
        if cfg!(loom) && std::thread::panicking() {
            return;
        }
        if let Some(outlet) = self.outlet() {
            outlet.close();
        }
    }
}
