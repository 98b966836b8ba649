//! `timerpool` runs closures at a due time, never before: a leader-follower
//! thread pool ([`TimerPool`]) that gives every task exactly one
//! [`Outcome`], and beside it a keyed scheduler you drive by hand
//! ([`Scheduler`]).
//!
//! Both keep pending tasks in an indexed min-heap ([`heap::IndexedHeap`]):
//! one entry per key, so rescheduling a key moves its single entry and
//! cancelling removes it, each in O(log n), with no stale entries.
//!
//! # Which method
//!
//! Every due time is an [`Instant`](std::time::Instant) on the pool's clock
//! or a [`Duration`](std::time::Duration) from now ([`Due`]). *Schedule*
//! means under a key (a pending task under the same key is replaced);
//! *submit* means without one.
//!
//! | to | call | returns |
//! | --- | --- | --- |
//! | run a closure once, keyed / keyless | [`TimerPool::schedule`] / [`TimerPool::submit`] | [`TaskHandle`]: wait, cancel, timing |
//! | the same, nobody waits for the outcome | [`TimerPool::schedule_detached`] / [`TimerPool::submit_detached`] | nothing (counted in [`TimerPool::stats`]) |
//! | run it periodically ([`Repeat`]: fixed rate or delay, or a cron [`Calendar`] in a time zone; [`MissedTicks`], [`OnPanic`]) | [`TimerPool::schedule_repeating`] / [`TimerPool::submit_repeating`] | [`PeriodicHandle`] |
//! | run it periodically, the closure picking each next delay ([`Next`]) | [`TimerPool::schedule_dynamic`] / [`TimerPool::submit_dynamic`] | [`PeriodicHandle`] |
//! | run a closure returning `Result` again after a backoff while it fails (`Err` or panic; [`Retry`], [`Retry::retry_if`]) | [`TimerPool::schedule_retrying`] / [`TimerPool::submit_retrying`] | [`RetryHandle`]: its [`Retried`] outcome and attempts |
//! | hand over many keyed tasks under one lock | [`TimerPool::schedule_batch`], [`TimerPool::schedule_batch_detached`] | handles, or a count |
//! | stop a pending task | [`TimerPool::cancel`], [`TaskHandle::cancel`], [`PeriodicHandle::cancel`] | whether it was pending |
//! | move a pending task's deadline, keeping its closure and handle | [`TimerPool::reschedule`] | whether it was pending |
//! | read, inside a task, its own key, due time, start, attempt or run count | [`TaskContext::current`] | a [`TaskContext`]; `None` outside a run |
//! | wait for an outcome | [`TaskHandle::wait`], `wait_timeout`, `try_outcome`, or `.await` (handles are futures) | the [`Outcome`] |
//! | receive every task's end as it happens, detached tasks too | [`Builder::completions`] with [`TimerPool::completions`], or [`Builder::on_completion`] | [`Completion`] records: a [`CompletionReceiver`], blocking or an async `Stream`, that ends at shutdown |
//! | ask | [`TimerPool::due_of`], [`TimerPool::is_pending`], [`TaskHandle::replaced`], [`TimerPool::len`], [`TimerPool::next_due`], [`TimerPool::now`], [`TimerPool::stats`] | |
//! | stop the pool | [`TimerPool::shutdown`] (drain), [`TimerPool::shutdown_now`] (return pending keys), [`TimerPool::shutdown_timeout`] (drain, then return what is left), [`TimerPool::begin_shutdown`] with [`TimerPool::await_termination`] (Java's pair), drop | |
//! | move a test's [`ManualClock`] and run all that comes due on the way, follow-ups included | [`TimerPool::advance`] (tokio's `time::advance`; a [`Steps`] for other bounds); [`TimerPool::settle`] to wait for quiet | the due times it stopped at |
//! | drive time yourself, no threads | [`Scheduler`] with plain `i64` due times | |
//!
//! A method that looks a key up takes any borrowed form of it, as `HashMap`
//! does: `pool.cancel("a")` on a `TimerPool<String>`, with no allocation.
//!
//! A [`Builder`] (from [`TimerPool::builder`]) sets workers, capacity, the
//! clock ([`ManualClock`] for tests), exclusive keys, staleness expiry,
//! the precision of wake-ups and the completion stream; the
//! [settings guide](guide::settings) says when to change each.
//!
//! # Examples
//!
//! A ride offer that times out unless the driver accepts:
//!
//! ```
//! use std::time::Duration;
//! use timerpool::{Outcome, TimerPool};
//!
//! let pool = TimerPool::<u64>::builder().workers(2).build()?;
//! let trip = 42;
//! let timeout = pool.schedule(trip, Duration::from_secs(15), move || {
//!     format!("re-dispatch trip {trip}")
//! })?;
//! // The driver accepts: the timeout never fires.
//! assert!(pool.cancel(&trip));
//! assert_eq!(timeout.wait(), Outcome::Cancelled);
//! pool.shutdown();
//! # Ok::<(), timerpool::Error>(())
//! ```
//!
//! # Timing guarantees
//!
//! A task never starts before the pool's clock reads its due time. It starts
//! roughly on time when a worker is free: by default the leader sleeps on a
//! condition variable until the earliest due time, a new earlier task wakes
//! it at once, on two workers or more free workers stand deputy in case
//! the leader's thread is held up or busy, and an idle pool uses no CPU.
//! How late "roughly" is depends on the operating system's timer
//! ([benchmarks](guide::benchmarks)); [`Builder::precision`] buys starts
//! within a few microseconds of due for up to a busy core, or fewer
//! wake-ups for timers that may start a millisecond or two late
//! ([settings](guide::settings)). Time is the
//! monotonic clock by default; a [`ManualClock`] makes tests deterministic:
//!
//! ```
//! use std::time::Duration;
//! use timerpool::{ManualClock, Outcome, TimerPool};
//!
//! let clock = ManualClock::new();
//! let pool = TimerPool::<&str>::builder().workers(1).clock(clock.clone()).build()?;
//! let h = pool.schedule("job", Duration::from_secs(3600), || 7)?;
//! let h = h.wait_timeout(Duration::from_millis(20)).unwrap_err(); // not due yet
//! clock.advance(Duration::from_secs(3600));
//! assert_eq!(h.wait(), Outcome::Completed(7));
//! # Ok::<(), timerpool::Error>(())
//! ```
//!
//! # Shutdown
//!
//! [`TimerPool::shutdown`] refuses new work and runs what is pending at its
//! due time; [`TimerPool::shutdown_now`] removes what is pending (outcome
//! [`Outcome::Shutdown`]) and returns its keys. Both join the workers, and
//! dropping the pool does what `shutdown_now` does, so no thread outlives it
//! and no handle waits forever.
//!
//! ```
//! use std::time::Duration;
//! use timerpool::{Error, Outcome, TimerPool};
//!
//! let pool = TimerPool::<&str>::builder().workers(1).build()?;
//! let far = pool.schedule("lease", Duration::from_secs(60), || ())?;
//! assert_eq!(pool.shutdown_now(), vec!["lease"]);
//! assert_eq!(far.wait(), Outcome::Shutdown);
//! assert_eq!(pool.submit(Duration::ZERO, || ()).unwrap_err(), Error::ShutDown);
//! # Ok::<(), timerpool::Error>(())
//! ```
//!
//! # Cargo features
//!
//! One, off by default.
//!
//! - `tracing`: a span per task run and events for panics, expirations,
//!   removals, refusals and shutdown, through the `tracing` crate; keys are
//!   recorded for pools built with `Builder::debug_keys(true)`. Without the
//!   feature none of it is compiled in.
//!
//! # Guides
//!
//! - [`guide::semantics`]: the rules (keys, replace, cancel, start, panics,
//!   capacity, time, shutdown), each with the test that checks it.
//! - [`guide::settings`]: each builder setting, its default and when to
//!   change it.
//! - [`guide::migration`]: method by method from Java's
//!   `ScheduledThreadPoolExecutor`, `scheduled-thread-pool` and tokio-util's
//!   `DelayQueue`.
//! - [`guide::reliability`]: the guarantees under load, faults and bad
//!   input.
//! - [`guide::benchmarks`]: figures against scheduled-thread-pool, tokio,
//!   tokio-util's `DelayQueue` and a naive pool.
//! - [`guide::dependencies`]: why each dependency is there.
//!
//! Durable keyed timers on PostgreSQL, shared by many processes, are the
//! separate crate `timerpool-pg` (its own guide states their contract).
// Denied rather than forbidden for two places, each with its measurement
// and safety argument: `pool::task::once_job` builds a handle-less task's
// closure into its entry with `smallbox`'s constructor macro, whose
// expansion allows it; `heap::pages` is the allocator of the heap's large
// tables (anonymous mappings of their own, so that a drained heap's memory
// goes back to the system) and holds the crate's only hand-written
// `unsafe` blocks.
#![deny(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]
// On docs.rs (`--cfg docsrs`, nightly rustdoc) items behind a cargo feature
// are shown with the feature they need.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod calendar;
mod clock;
mod contain;
mod error;
pub mod guide;
pub mod heap;
mod pool;
mod scheduler;
mod sync;

pub use calendar::{Calendar, CalendarError};
pub use clock::{Clock, ManualClock, PoolWaker, SystemClock};
pub use error::Error;
pub use pool::{
    Builder, CancelResult, Completion, CompletionIter, CompletionKind, CompletionReceiver, Due,
    Lateness, MissedTicks, Next, OnPanic, Outcome, PeriodicHandle, Precision, Refused, Repeat,
    Retried, Retry, RetryHandle, RetryIf, RetryPolicy, Stats, Steps, TaskContext, TaskHandle,
    TimerPool, Timing, MAX_WINDOW, MAX_WORKERS,
};
pub use scheduler::{Scheduled, Scheduler};

#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
