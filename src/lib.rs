//! `timerpool` runs closures at a due time, never before: a keyed core you
//! drive by hand ([`Scheduler`]) and a leader-follower thread pool
//! ([`TimerPool`]) that gives every task exactly one [`Outcome`].
//!
//! Both keep pending tasks in one indexed min-heap ([`heap::IndexedHeap`]):
//! one entry per key, so rescheduling a key moves its single entry and
//! cancelling removes it, each in O(log n), with no stale entries.
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
//! let timeout = pool.schedule_after(trip, Duration::from_secs(15), move || {
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
//! roughly on time when a worker is free: the leader sleeps on a condition
//! variable until the earliest due time, a new earlier task wakes it at once,
//! and an idle pool uses no CPU. How late "roughly" is depends on the
//! operating system's timer; `docs/benchmarks.md` has measurements. Time is
//! the monotonic clock by default; a [`ManualClock`] makes tests
//! deterministic:
//!
//! ```
//! use std::time::Duration;
//! use timerpool::{ManualClock, Outcome, TimerPool};
//!
//! let clock = ManualClock::new();
//! let pool = TimerPool::<&str>::builder().workers(1).clock(clock.clone()).build()?;
//! let h = pool.schedule_after("job", Duration::from_secs(3600), || 7)?;
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
//! let far = pool.schedule_after("lease", Duration::from_secs(60), || ())?;
//! assert_eq!(pool.shutdown_now(), vec!["lease"]);
//! assert_eq!(far.wait(), Outcome::Shutdown);
//! assert_eq!(pool.submit_after(Duration::ZERO, || ()).unwrap_err(), Error::ShutDown);
//! # Ok::<(), timerpool::Error>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod clock;
mod error;
pub mod heap;
#[cfg(feature = "postgres")]
pub mod pg;
mod pool;
mod scheduler;
mod sync;

pub use clock::{Clock, ManualClock, SystemClock, Waker};
pub use error::Error;
pub use pool::{
    Builder, Lateness, MissedTicks, OnPanic, Outcome, PeriodicHandle, Repeat, Stats, TaskHandle,
    TimerPool, Timing, MAX_SPIN, MAX_WORKERS,
};
pub use scheduler::{Scheduled, Scheduler};

#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
