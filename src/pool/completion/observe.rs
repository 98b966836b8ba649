//! Observing a pool: the completion channel and listener the builder asked
//! for, and where the engine sends the records (`Sink`).

use super::receiver::{CompletionReceiver, Outlet};
use super::record::Completion;
#[cfg(feature = "tracing")]
use super::record::KeyFormat;
use crate::sync::{Arc, Receiver};
use std::fmt;

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
