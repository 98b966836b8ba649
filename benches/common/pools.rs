//! The pools under test behind one small trait, so every workload runs the
//! same code against each of them.

use super::naive::NaivePool;
use scheduled_thread_pool::ScheduledThreadPool;
use std::time::{Duration, Instant};
use timerpool::{Builder, Precision, TimerPool};

/// Worker threads every pool gets.
pub const WORKERS: usize = 2;

/// A pool that runs `f` at `due`, never before (or so it claims).
pub trait Pool: Sized {
    /// Start the pool.
    fn start() -> Self {
        Self::start_with(WORKERS)
    }
    /// Start the pool with `workers` threads.
    fn start_with(workers: usize) -> Self;
    /// Run `f` at `due`; `key` is used by keyed pools and ignored by others.
    fn at<F: FnOnce() + Send + 'static>(&self, key: u64, due: Instant, f: F);
    /// Stop the pool and join its threads.
    fn finish(self);
}

/// A variant's settings, applied to a builder.
pub type Configure = fn(Builder<u64>) -> Builder<u64>;

/// The `timerpool` configurations under test, by the name their rows carry
/// in the reports: every builder setting a variant changes is made here and
/// nowhere else, so that a change of the builder's settings is one line per
/// variant. Each entry starts from `TimerPool::builder().workers(n)`.
pub const TIMERPOOL_VARIANTS: &[(&str, Configure)] = &[
    // Default settings.
    ("timerpool", |b| b),
    // Precision mode: spin the last `SPIN` before each due time.
    ("timerpool-spin250us", |b| {
        b.precision(Precision::Spin(SPIN))
    }),
    // Relaxed mode: tasks may start up to `SLACK` late, one wake-up per
    // slack for all of them.
    ("timerpool-slack2ms", |b| {
        b.precision(Precision::Slack(SLACK))
    }),
];

/// The slack of the relaxed variant.
pub const SLACK: Duration = Duration::from_millis(2);

/// The names of [`TIMERPOOL_VARIANTS`], comma-separated (for messages).
pub fn timerpool_variant_names() -> String {
    let names: Vec<&str> = TIMERPOOL_VARIANTS.iter().map(|(n, _)| *n).collect();
    names.join(", ")
}

/// A builder for the `timerpool` variant `name` of [`TIMERPOOL_VARIANTS`]
/// with `workers` threads, or `None` for a name not in the table.
pub fn timerpool_builder(name: &str, workers: usize) -> Option<Builder<u64>> {
    let (_, configure) = TIMERPOOL_VARIANTS.iter().find(|(n, _)| *n == name)?;
    Some(configure(TimerPool::builder().workers(workers)))
}

/// A `timerpool` configuration under test: keyed tasks, a handle per task
/// (dropped), built as the variant `$variant` of [`TIMERPOOL_VARIANTS`].
macro_rules! timerpool_with {
    ($(#[$doc:meta])* $name:ident, $variant:literal) => {
        $(#[$doc])*
        pub struct $name(pub TimerPool<u64>);

        impl Pool for $name {
            fn start_with(workers: usize) -> Self {
                let builder = timerpool_builder($variant, workers).expect("a variant in the table");
                $name(builder.build().unwrap())
            }
            fn at<F: FnOnce() + Send + 'static>(&self, key: u64, due: Instant, f: F) {
                drop(self.0.schedule(key, due, f).unwrap());
            }
            fn finish(self) {
                self.0.shutdown_now();
            }
        }
    };
}

timerpool_with!(
    /// `timerpool` with default settings.
    Timerpool,
    "timerpool"
);

/// `timerpool` with default settings, each task scheduled without a handle
/// (`schedule_detached`): the handle-less call, one task per call; outcomes
/// only counted in `stats()`.
pub struct TimerpoolDetached(pub TimerPool<u64>);

impl Pool for TimerpoolDetached {
    fn start_with(workers: usize) -> Self {
        let builder = timerpool_builder("timerpool", workers).expect("a variant in the table");
        TimerpoolDetached(builder.build().unwrap())
    }
    fn at<F: FnOnce() + Send + 'static>(&self, key: u64, due: Instant, f: F) {
        self.0.schedule_detached(key, due, f).unwrap();
    }
    fn finish(self) {
        self.0.shutdown_now();
    }
}

/// The spin window of the precision-mode pool.
pub const SPIN: Duration = Duration::from_micros(250);

timerpool_with!(
    /// `timerpool` in precision mode, spinning [`SPIN`] before each due time.
    TimerpoolSpin,
    "timerpool-spin250us"
);

/// The `scheduled-thread-pool` crate.
pub struct Stp(pub ScheduledThreadPool);

impl Pool for Stp {
    fn start_with(workers: usize) -> Self {
        Stp(ScheduledThreadPool::new(workers))
    }
    fn at<F: FnOnce() + Send + 'static>(&self, _key: u64, due: Instant, f: F) {
        let delay = due.saturating_duration_since(Instant::now());
        drop(self.0.execute_after(delay, f));
    }
    fn finish(self) {}
}

/// tokio: one spawned task per timer doing `sleep_until`, 2 workers.
pub struct Tokio(pub tokio::runtime::Runtime);

impl Pool for Tokio {
    fn start_with(workers: usize) -> Self {
        Tokio(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_time()
                .build()
                .unwrap(),
        )
    }
    fn at<F: FnOnce() + Send + 'static>(&self, _key: u64, due: Instant, f: F) {
        self.0.spawn(async move {
            tokio::time::sleep_until(due.into()).await;
            f();
        });
    }
    fn finish(self) {
        self.0.shutdown_background();
    }
}

/// The naive `Mutex<BinaryHeap>` + `Condvar` pool.
pub struct Naive(pub NaivePool);

impl Pool for Naive {
    fn start_with(workers: usize) -> Self {
        Naive(NaivePool::new(workers))
    }
    fn at<F: FnOnce() + Send + 'static>(&self, _key: u64, due: Instant, f: F) {
        drop(self.0.at(due, f));
    }
    fn finish(self) {
        self.0.shutdown();
    }
}
