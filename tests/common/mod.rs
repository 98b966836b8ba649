//! Helpers shared by the integration tests.
// Each test binary uses its own subset of these helpers.
#![allow(dead_code)]

use std::time::{Duration, Instant};
use timerpool::{Due, ManualClock, Outcome, TaskHandle, TimerPool};

/// Generous bound for waits that must finish; a hang fails instead of
/// blocking CI.
pub const BOUND: Duration = Duration::from_secs(20);

/// A pool of `workers` driven by a fresh manual clock, keyed by `K`
/// (`u64` where the test does not say).
pub fn manual_pool<K: std::hash::Hash + Eq + Clone + Send + 'static>(
    workers: usize,
) -> (ManualClock, TimerPool<K>) {
    let clock = ManualClock::new();
    let pool = TimerPool::builder()
        .workers(workers)
        .clock(clock.clone())
        .build()
        .unwrap();
    (clock, pool)
}

/// The outcome within [`BOUND`], or a loud failure.
pub fn done<T, K: std::hash::Hash + Eq + Clone + Send + 'static>(
    h: TaskHandle<T, K>,
) -> Outcome<T> {
    match h.wait_timeout(BOUND) {
        Ok(o) => o,
        Err(_) => panic!("no outcome within {BOUND:?}"),
    }
}

/// Wait (bounded by [`BOUND`]) until `cond` holds, re-checking every
/// millisecond.
pub fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < BOUND, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Start `pool.shutdown()` on another thread and return once the waiting
/// leader has heard it (its wake-up count moved; it then waits again, since
/// it holds the lock from its wake to its next wait and `stats()` reads
/// under that lock). The receiver gets a message when `shutdown()` returns.
/// The caller makes sure a leader is waiting first (a worker may still be on
/// its way back to leading), on a manual clock: with a real deadline the
/// leader may release the lock between a wake and its next wait to ask for
/// a deputy, and a notify sent then wakes nobody.
pub fn shutdown_heard(
    pool: &std::sync::Arc<TimerPool<u64>>,
) -> (std::thread::JoinHandle<()>, std::sync::mpsc::Receiver<()>) {
    let before = pool.stats().leader_wakeups;
    let (tx, rx) = std::sync::mpsc::channel();
    let p = pool.clone();
    let closer = std::thread::spawn(move || {
        p.shutdown();
        let _ = tx.send(());
    });
    let start = Instant::now();
    while pool.stats().leader_wakeups == before {
        assert!(
            start.elapsed() < BOUND,
            "the leader never heard the shutdown"
        );
        std::thread::yield_now();
    }
    (closer, rx)
}

/// Schedule under `key`, due `at`, a task that blocks its worker until the
/// returned sender sends (or is dropped), and return once it runs.
pub fn block_a_worker(
    pool: &TimerPool<u64>,
    key: u64,
    at: impl Into<Due>,
) -> (TaskHandle<(), u64>, std::sync::mpsc::Sender<()>) {
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let blocker = pool
        .schedule(key, at, move || {
            started_tx.send(()).unwrap();
            let _ = release_rx.recv_timeout(BOUND);
        })
        .unwrap();
    started_rx
        .recv_timeout(BOUND)
        .expect("the blocking task started");
    (blocker, release_tx)
}

/// A key that counts its clones in its shared counter; equal and hashed by
/// its number alone, so clones of one key are the same key.
#[derive(Debug)]
pub struct Counted(pub u32, pub std::sync::Arc<std::sync::atomic::AtomicU32>);

impl PartialEq for Counted {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for Counted {}

impl std::hash::Hash for Counted {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.hash(h);
    }
}

impl Clone for Counted {
    fn clone(&self) -> Self {
        self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Counted(self.0, self.1.clone())
    }
}
