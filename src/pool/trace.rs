//! Tracing (the `tracing` cargo feature): a span per task run and events
//! for panics, expirations, removals, refusals and shutdown. This module is
//! compiled only with the feature; every call to it sits behind
//! `#[cfg(feature = "tracing")]`, so without the feature nothing of it is in
//! the pool.
//!
//! # Keys
//!
//! The pool's keys need not be `Debug`, and Rust has no specialization to
//! format them only when they are. So a pool records a key only if it was
//! built with [`Builder::debug_keys`] (available where `K: Debug`), which
//! stores `<K as Debug>::fmt` as a function pointer; otherwise a keyed task
//! shows as `key=<keyed>`. A keyless task shows as `key=#<number>`. The key
//! is formatted lazily, only when a subscriber records the field.
//!
//! # What is emitted (target `timerpool`)
//!
//! | what | level | fields |
//! | --- | --- | --- |
//! | span `run`, around each run (or stale skip); none for a calendar task's recheck of the wall clock, which runs nothing | DEBUG | `key`, `periodic`, `late_ns` |
//! | event "task panicked" | WARN | `key` (from the span), `panic` |
//! | event "task expired" | DEBUG | (the span's) |
//! | event "task removed" (cancelled, replaced, shutdown) | DEBUG | `key`, `why` |
//! | event "refused" | DEBUG | `tasks`, `error` |
//! | event "shutdown" | INFO | `how`, `removed` |

use super::completion::KeyFormat;
use super::outcome::{Abandon, Ran};
use super::shared::{Key, Shared};
use super::task::TaskKey;
use crate::Error;
use std::fmt;

/// A task's key as a tracing field, formatted only when recorded.
struct TraceKey<'a, K>(&'a TaskKey<K>, Option<KeyFormat<K>>);

/// A keyed task whose key is not shown.
struct Hidden;

impl fmt::Debug for Hidden {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<keyed>")
    }
}

impl<K> fmt::Debug for TraceKey<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.0, self.1) {
            (TaskKey::Keyed(k), Some(format)) => format(k, f),
            (TaskKey::Keyed(_), None) => f.write_str("<keyed>"),
            (TaskKey::Anon(n), _) => write!(f, "#{n}"),
        }
    }
}

impl<K: Key> Shared<K> {
    /// The span of one run, `late_ns` after its due time, of the task under
    /// `key` (a copy kept only while keys are shown, `Shared::shows_keys`),
    /// or else the keyless task numbered `anon`, or else a keyed one.
    pub(crate) fn run_span(
        &self,
        key: Option<&TaskKey<K>>,
        anon: Option<u64>,
        periodic: bool,
        late_ns: i64,
    ) -> tracing::Span {
        let key: &dyn fmt::Debug = match (key, anon) {
            (Some(key), _) => &TraceKey(key, self.key_format),
            (None, Some(n)) => &TraceKey(&TaskKey::<K>::Anon(n), None),
            (None, None) => &Hidden,
        };
        tracing::debug_span!(target: "timerpool", "run", key = ?key, periodic, late_ns)
    }

    /// True when traces name keys (`Builder::debug_keys`), so a started
    /// task's key is copied for its span.
    pub(crate) fn formats_keys(&self) -> bool {
        self.key_format.is_some()
    }

    /// Inside a run's span: what the run did, if it is worth an event.
    pub(crate) fn trace_ran(&self, ran: Ran, panic: Option<&str>) {
        match ran {
            // A recheck (`Waited`) opens no span and gets here only
            // through this match's need to be whole.
            Ran::Completed | Ran::Waited => {}
            Ran::Panicked => {
                tracing::warn!(target: "timerpool", panic = panic.unwrap_or(""), "task panicked");
            }
            Ran::Expired => tracing::debug!(target: "timerpool", "task expired"),
        }
    }

    /// A pending task under `key` was removed unrun.
    pub(crate) fn trace_removed(&self, key: &TaskKey<K>, why: Abandon) {
        tracing::debug!(
            target: "timerpool",
            key = ?TraceKey(key, self.key_format),
            why = ?why,
            "task removed",
        );
    }
}

/// A call adding `tasks` tasks was refused with `error`.
pub(crate) fn refused(tasks: u64, error: &Error) {
    tracing::debug!(target: "timerpool", tasks, error = %error, "refused");
}

/// The pool began shutting down (`how`: "drain" or "now"), removing
/// `removed` pending tasks.
pub(crate) fn shutdown(how: &'static str, removed: usize) {
    tracing::info!(target: "timerpool", how, removed, "shutdown");
}
