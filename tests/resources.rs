//! Tests for resources: a pool gives back every thread it started, however it
//! ends.
//!
//! This binary holds a single test on purpose: it counts all the threads of
//! the process (`/proc/self/task`), which other tests running in parallel
//! threads would disturb. Memory over a long churn is checked by
//! `benches/tools/src/bin/soak.rs`.

mod common;
use common::*;

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use timerpool::{Error, ManualClock, Outcome, TimerPool};

/// The names of this process's threads.
fn threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task is readable")
        .filter_map(|e| {
            let path = e.ok()?.path();
            std::fs::read_to_string(path.join("comm"))
                .ok()
                .map(|s| s.trim_end().to_string())
        })
        .collect()
}

/// Wait, within [`BOUND`], until the process has exactly `expected` threads.
///
/// A joined thread can still be listed for a moment after `join` returns
/// (the kernel wakes the joiner before it removes the thread), so the count
/// is re-read until it matches; a leaked thread never leaves and fails here.
fn await_threads(expected: usize, what: &str) {
    let deadline = Instant::now() + BOUND;
    loop {
        let now = threads();
        if now.len() == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {} threads, expected {expected}: {now:?}",
            now.len()
        );
        std::thread::yield_now();
    }
}

fn busy_pool(workers: usize, name: &str) -> TimerPool<u64> {
    let pool = TimerPool::builder()
        .workers(workers)
        .thread_name(name)
        .build()
        .unwrap();
    // Some finished, some panicked, some pending work.
    let hs: Vec<_> = (0..20u64)
        .map(|k| pool.schedule(k, Duration::ZERO, move || k).unwrap())
        .collect();
    let bad = pool
        .submit(Duration::ZERO, || -> u64 { panic!("intentional") })
        .unwrap();
    for (k, h) in (0..).zip(hs) {
        assert_eq!(done(h), Outcome::Completed(k));
    }
    assert!(matches!(done(bad), Outcome::Panicked(_)));
    for k in 100..110u64 {
        pool.schedule(k, Duration::from_secs(3600), || 0).unwrap();
    }
    pool
}

#[test]
fn a_pool_gives_back_every_thread_it_started() {
    let base = threads().len();
    let cpus = num_cpus::get();

    // The count sees the workers while the pool lives, so it can fail.
    for workers in [1, 4, 16, cpus] {
        let pool = busy_pool(workers, "res-shutdown");
        await_threads(base + workers, "while running");
        assert_eq!(pool.shutdown_now().len(), 10);
        await_threads(base, "after shutdown_now");
    }

    // Graceful shutdown with nothing far away pending.
    let pool = TimerPool::<u64>::builder().workers(8).build().unwrap();
    let h = pool.submit(Duration::from_millis(1), || 1).unwrap();
    pool.shutdown();
    assert_eq!(h.try_outcome().unwrap(), Outcome::Completed(1));
    await_threads(base, "after shutdown");

    // Dropped with pending work and a task still running.
    let pool = busy_pool(4, "res-drop");
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let running = pool
        .submit(Duration::ZERO, move || {
            started_tx.send(()).unwrap();
            release_rx.recv_timeout(BOUND).unwrap();
        })
        .unwrap();
    started_rx.recv_timeout(BOUND).unwrap();
    let dropper = std::thread::spawn(move || drop(pool));
    release_tx.send(()).unwrap();
    dropper.join().unwrap();
    assert_eq!(running.try_outcome().unwrap(), Outcome::Completed(()));
    await_threads(base, "after drop");

    // A manual-clock pool whose clock outlives it.
    let clock = ManualClock::new();
    let pool = TimerPool::<u64>::builder()
        .workers(3)
        .clock(clock.clone())
        .build()
        .unwrap();
    let far = pool.schedule(1, Duration::from_secs(60), || ()).unwrap();
    drop(pool);
    assert_eq!(far.try_outcome().unwrap(), Outcome::Shutdown);
    clock.advance(Duration::from_secs(120)); // wakes nobody, harmlessly
    await_threads(base, "after a manual-clock pool");

    // Refused configurations start no thread.
    for b in [
        TimerPool::<u64>::builder().workers(0),
        TimerPool::<u64>::builder().workers(usize::MAX),
        TimerPool::<u64>::builder().workers(4).capacity(0),
        TimerPool::<u64>::builder()
            .workers(4)
            .precision(timerpool::Precision::Spin(Duration::from_secs(5))),
    ] {
        assert!(b.build().is_err());
    }
    await_threads(base, "after refused builds");

    // Shut down from inside a task, joined from outside.
    let pool = Arc::new(TimerPool::<u64>::builder().workers(2).build().unwrap());
    let p = pool.clone();
    let h = pool
        .submit(Duration::ZERO, move || {
            p.shutdown();
            p.submit(Duration::ZERO, || ()).map(|_| ()).unwrap_err()
        })
        .unwrap();
    assert_eq!(done(h), Outcome::Completed(Error::ShutDown));
    drop(pool);
    await_threads(base, "after a shutdown from inside");

    // Dropped from inside its own worker: nobody can join those threads,
    // but they still exit.
    let pool = Arc::new(
        TimerPool::<u64>::builder()
            .workers(4)
            .thread_name("res-selfdrop")
            .build()
            .unwrap(),
    );
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let p = pool.clone();
    let h = pool
        .submit(Duration::ZERO, move || {
            go_rx.recv_timeout(BOUND).unwrap();
            drop(p);
        })
        .unwrap();
    drop(pool);
    go_tx.send(()).unwrap();
    assert_eq!(done(h), Outcome::Completed(()));
    await_threads(base, "after a drop from inside a worker");

    // Churn: many short-lived pools.
    for i in 0..100 {
        let pool = TimerPool::<u64>::builder()
            .workers(1 + i % 4)
            .build()
            .unwrap();
        let h = pool.schedule(i as u64, Duration::ZERO, || ()).unwrap();
        pool.schedule(u64::MAX, Duration::from_secs(60), || ())
            .unwrap();
        if i % 2 == 0 {
            drop(pool);
        } else {
            pool.shutdown_now();
        }
        assert!(h.try_outcome().is_ok());
    }
    await_threads(base, "after 100 short-lived pools");
}
