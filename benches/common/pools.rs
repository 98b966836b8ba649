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

/// A `timerpool` configuration under test: keyed tasks, a handle per task
/// (dropped), the builder's settings changed by `$configure`.
macro_rules! timerpool_with {
    ($(#[$doc:meta])* $name:ident, $configure:expr) => {
        $(#[$doc])*
        pub struct $name(pub TimerPool<u64>);

        impl Pool for $name {
            fn start_with(workers: usize) -> Self {
                let configure: fn(Builder<u64>) -> Builder<u64> = $configure;
                $name(configure(TimerPool::builder().workers(workers)).build().unwrap())
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
    |b| b
);

/// `timerpool` with default settings, each task scheduled without a handle
/// (`schedule_detached`): the handle-less call, one task per call; outcomes
/// only counted in `stats()`.
pub struct TimerpoolDetached(pub TimerPool<u64>);

impl Pool for TimerpoolDetached {
    fn start_with(workers: usize) -> Self {
        TimerpoolDetached(TimerPool::builder().workers(workers).build().unwrap())
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
    /// `timerpool` in precision mode: `.precision(Precision::Spin(250 µs))`.
    TimerpoolSpin,
    |b| b.precision(Precision::Spin(SPIN))
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
