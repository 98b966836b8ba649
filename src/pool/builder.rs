//! Configuration and start-up of a [`TimerPool`].

use super::{TimerPool, Timing};
use crate::clock::{Clock, SystemClock};
use crate::heap::MAX_LEN;
use crate::sync::Arc;
use crate::Error;
use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
use std::time::Duration;

/// The longest spin window [`Builder::spin_before_due`] accepts: one second.
pub const MAX_SPIN: Duration = Duration::from_secs(1);

/// The most worker threads a pool accepts.
pub const MAX_WORKERS: usize = 1024;

/// Builds a [`TimerPool`]; made by [`TimerPool::builder`].
///
/// # Examples
///
/// ```
/// use timerpool::TimerPool;
/// let pool = TimerPool::<u64>::builder()
///     .workers(2)
///     .capacity(10_000)
///     .thread_name("offers")
///     .build()
///     .unwrap();
/// pool.shutdown();
/// ```
pub struct Builder<K> {
    /// Worker threads; `None` means `num_cpus::get()`.
    workers: Option<usize>,
    /// Most pending tasks.
    capacity: usize,
    /// Prefix of worker thread names.
    thread_name: String,
    /// The pool's time source.
    clock: Arc<dyn Clock>,
    /// Most tasks one leadership claims.
    claim_batch: usize,
    /// How long before a due time the leader stops sleeping and yields.
    spin_before_due: Duration,
    /// Whether the leader wakes early by its measured wake-up latency.
    adaptive_wake: bool,
    /// The key type.
    _key: PhantomData<fn(K)>,
}

impl<K> fmt::Debug for Builder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("workers", &self.workers)
            .field("capacity", &self.capacity)
            .field("thread_name", &self.thread_name)
            .field("clock", &self.clock)
            .field("claim_batch", &self.claim_batch)
            .field("spin_before_due", &self.spin_before_due)
            .field("adaptive_wake", &self.adaptive_wake)
            .finish()
    }
}

impl<K: Hash + Eq + Clone + Send + 'static> Builder<K> {
    pub(crate) fn new() -> Self {
        Builder {
            workers: None,
            capacity: MAX_LEN,
            thread_name: "timerpool".to_string(),
            clock: Arc::new(SystemClock),
            claim_batch: 64,
            spin_before_due: Duration::ZERO,
            adaptive_wake: true,
            _key: PhantomData,
        }
    }

    /// Number of worker threads. Default: `num_cpus::get()`. Zero or more
    /// than [`MAX_WORKERS`] makes [`build`](Self::build) fail.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = Some(n);
        self
    }

    /// Most tasks pending at once (keyed and keyless together); a new task
    /// beyond it is refused with [`Error::CapacityReached`]. Default:
    /// `u32::MAX`, the most the index can address.
    pub fn capacity(mut self, n: usize) -> Self {
        self.capacity = n;
        self
    }

    /// Prefix of the worker threads' names (`{prefix}-{i}`). Default:
    /// `"timerpool"`.
    pub fn thread_name(mut self, prefix: impl Into<String>) -> Self {
        self.thread_name = prefix.into();
        self
    }

    /// The pool's clock. Default: [`SystemClock`]. Pass a
    /// [`ManualClock`](crate::ManualClock) to drive time by hand in tests.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Most tasks one leader claims before it passes the lead on. Claimed
    /// tasks can no longer be cancelled, so a bound keeps cancel meaningful
    /// during bursts. Default: 64. Zero makes [`build`](Self::build) fail.
    pub fn claim_batch(mut self, n: usize) -> Self {
        self.claim_batch = n;
        self
    }

    /// Precision mode: the leader stops sleeping `window` before the earliest
    /// due time and waits the rest by yielding its CPU in a loop, re-checking
    /// the heap under the lock each round, so a task starts within a few
    /// microseconds of its due time (never before it) at the cost of up to
    /// one busy core while a due time is that close. The leader never spins
    /// when no due time is within `window`: an idle pool, or one whose timers
    /// are all further away, still sleeps. Has no effect with a clock that
    /// moves only by hand. Default: zero (off). More than [`MAX_SPIN`] makes
    /// [`build`](Self::build) fail.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u64>::builder()
    ///     .spin_before_due(Duration::from_micros(250))
    ///     .build()
    ///     .unwrap();
    /// pool.shutdown();
    /// ```
    pub fn spin_before_due(mut self, window: Duration) -> Self {
        self.spin_before_due = window;
        self
    }

    /// Adaptive early wake: the leader measures how late the operating
    /// system wakes it from timed waits, wakes that much (a smoothed
    /// estimate, at most 1 ms) before the earliest due time, and yields the
    /// remaining microseconds as in [`spin_before_due`](Self::spin_before_due).
    /// Tasks start closer to their due time; they never start before it.
    /// The cost is the CPU of those short yield loops, only while a due time
    /// is that close: the leader yields only after sleeping into the early
    /// window, so due times closer together than the wake-up latency get a
    /// plain timed wait instead of a yield loop from one to the next, and
    /// the yielding is capped at a tenth of one core per 100 ms. For precision regardless of CPU, use
    /// [`spin_before_due`](Self::spin_before_due). Default: on.
    pub fn adaptive_wake(mut self, on: bool) -> Self {
        self.adaptive_wake = on;
        self
    }

    /// Start the workers.
    ///
    /// # Errors
    ///
    /// [`Error::ZeroWorkers`], [`Error::TooManyWorkers`],
    /// [`Error::ZeroCapacity`], [`Error::CapacityTooLarge`],
    /// [`Error::ZeroClaimBatch`], [`Error::SpinTooLong`], or [`Error::Spawn`] if the operating
    /// system refused a thread (the ones already started are stopped).
    pub fn build(self) -> Result<TimerPool<K>, Error> {
        let workers = self.workers.unwrap_or_else(num_cpus::get);
        if workers == 0 {
            return Err(Error::ZeroWorkers);
        }
        if workers > MAX_WORKERS {
            return Err(Error::TooManyWorkers {
                requested: workers,
                max: MAX_WORKERS,
            });
        }
        if self.capacity == 0 {
            return Err(Error::ZeroCapacity);
        }
        if self.capacity > MAX_LEN {
            return Err(Error::CapacityTooLarge {
                requested: self.capacity,
                max: MAX_LEN,
            });
        }
        if self.claim_batch == 0 {
            return Err(Error::ZeroClaimBatch);
        }
        if self.spin_before_due > MAX_SPIN {
            return Err(Error::SpinTooLong {
                requested: self.spin_before_due,
                max: MAX_SPIN,
            });
        }
        TimerPool::start(
            workers,
            self.capacity,
            self.thread_name,
            self.clock,
            Timing {
                workers,
                claim_batch: self.claim_batch,
                spin_before_due: self.spin_before_due,
                adaptive_wake: self.adaptive_wake,
            },
        )
    }
}
