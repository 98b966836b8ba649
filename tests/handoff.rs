//! Tests for the fair hand-off: no due task waits behind a running one while
//! a worker is free, and a task stays pending (cancellable, replaceable,
//! returned by `shutdown_now`, counted by capacity) until a worker starts it.

mod common;
use common::*;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Barrier};
use std::time::Duration;
use timerpool::{Clock, Outcome, TimerPool};

/// Start `n` tasks that block until the returned sender is dropped, and
/// wait until all `n` run.
fn block_workers(pool: &TimerPool<u64>, n: usize, due: std::time::Instant) -> Blocked {
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Arc::new(std::sync::Mutex::new(release_rx));
    let started = Arc::new(Barrier::new(n + 1));
    let handles = (0..n as u64)
        .map(|k| {
            let (rx, started) = (release_rx.clone(), started.clone());
            pool.schedule(1000 + k, due, move || {
                started.wait();
                // Every blocked task waits for the sender to go away.
                let _ = rx.lock().unwrap().recv_timeout(BOUND);
            })
            .unwrap()
        })
        .collect();
    Blocked {
        release: Some(release_tx),
        started,
        handles,
    }
}

/// Tasks that block their workers until released.
struct Blocked {
    release: Option<mpsc::Sender<()>>,
    started: Arc<Barrier>,
    handles: Vec<timerpool::TaskHandle<(), u64>>,
}

impl Blocked {
    /// Wait until every blocked task runs.
    fn running(&self) {
        self.started.wait();
    }

    /// Let them return, and check they completed.
    fn release(mut self) {
        drop(self.release.take());
        for h in self.handles.drain(..) {
            assert_eq!(done(h), Outcome::Completed(()));
        }
    }
}

/// `workers` workers, `blocked` of them running a long task due with
/// `short` short tasks: the short ones must all complete while the long
/// ones block.
fn short_tasks_pass_blocked_ones(workers: usize, blocked: usize, short: u64) {
    let (clock, pool) = manual_pool::<u64>(workers);
    let at = clock.now() + Duration::from_secs(1);
    let long = block_workers(&pool, blocked, at);
    let shorts: Vec<_> = (0..short)
        .map(|k| pool.schedule(k, at, move || k).unwrap())
        .collect();
    clock.advance(Duration::from_secs(1));
    long.running();
    for (k, h) in (0..).zip(shorts) {
        assert_eq!(done(h), Outcome::Completed(k), "short task {k}");
    }
    long.release();
}

#[test]
fn with_two_workers_tasks_due_with_a_blocked_task_complete_while_it_blocks() {
    short_tasks_pass_blocked_ones(2, 1, 3);
}

#[test]
fn with_four_workers_tasks_due_with_three_blocked_tasks_complete_while_they_block() {
    short_tasks_pass_blocked_ones(4, 3, 8);
}

#[test]
fn tasks_due_on_arrival_pass_a_blocked_task() {
    let (clock, pool) = manual_pool::<u64>(2);
    let long = block_workers(&pool, 1, clock.now());
    long.running();
    let shorts: Vec<_> = (0..5u64)
        .map(|k| pool.schedule(k, clock.now(), move || k).unwrap())
        .collect();
    let batch = pool
        .schedule_batch((10..15u64).map(|k| (k, clock.now(), move || k)))
        .unwrap();
    for (k, h) in (0..).zip(shorts) {
        assert_eq!(done(h), Outcome::Completed(k));
    }
    for (k, h) in (10..).zip(batch) {
        assert_eq!(done(h), Outcome::Completed(k));
    }
    long.release();
}

#[test]
fn with_every_worker_busy_a_due_task_stays_pending_and_never_runs() {
    let (clock, pool) = manual_pool::<u64>(2);
    let long = block_workers(&pool, 2, clock.now());
    long.running();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let cancelled = pool
        .schedule(1, clock.now(), move || {
            r.fetch_add(1, SeqCst);
        })
        .unwrap();
    // Due, but no worker is free: pending, so cancel wins.
    assert_eq!(pool.len(), 1);
    assert!(cancelled.cancel());
    assert_eq!(done(cancelled), Outcome::Cancelled);
    // Due and pending: a schedule of its key replaces it.
    let r = ran.clone();
    let replaced = pool
        .schedule(2, clock.now(), move || {
            r.fetch_add(1, SeqCst);
        })
        .unwrap();
    let replacement = pool.schedule(2, clock.now(), || ()).unwrap();
    assert_eq!(done(replaced), Outcome::Replaced);
    assert_eq!(pool.len(), 1);
    // Still pending: shutdown_now returns it.
    let pool = Arc::new(pool);
    let p = pool.clone();
    let stopper = std::thread::spawn(move || p.shutdown_now());
    assert_eq!(done(replacement), Outcome::Shutdown);
    long.release();
    assert_eq!(stopper.join().unwrap(), vec![2]);
    assert_eq!(ran.load(SeqCst), 0, "a cancelled or replaced task ran");
}

#[test]
fn a_cancel_racing_the_start_is_exact() {
    // True: it never ran (Cancelled). False: it ran, once (Completed).
    let pool = Arc::new(TimerPool::<u64>::builder().workers(2).build().unwrap());
    let (mut won, mut lost) = (0, 0);
    for round in 0..3000u64 {
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        let h = pool
            .schedule(round, Duration::ZERO, move || r.fetch_add(1, SeqCst))
            .unwrap();
        let cancelled = pool.cancel(&round);
        let outcome = done(h);
        if cancelled {
            won += 1;
            assert_eq!(outcome, Outcome::Cancelled, "round {round}");
            assert_eq!(
                ran.load(SeqCst),
                0,
                "round {round}: ran after a true cancel"
            );
        } else {
            lost += 1;
            assert_eq!(outcome, Outcome::Completed(0), "round {round}");
            assert_eq!(ran.load(SeqCst), 1, "round {round}");
        }
    }
    assert_eq!(won + lost, 3000);
}

#[test]
fn with_every_worker_busy_tasks_taken_into_holds_stay_pending_and_never_run() {
    // A backlog due at once: each worker that starts one takes more into
    // its hold. With both workers blocked, every task not started is
    // still pending: cancel finds it, and it never runs.
    let (clock, pool) = manual_pool::<u64>(2);
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Arc::new(std::sync::Mutex::new(release_rx));
    let started = Arc::new(AtomicUsize::new(0));
    let tasks = (0..100u64).map(|k| {
        let (rx, started) = (release_rx.clone(), started.clone());
        let job = move || {
            started.fetch_add(1, SeqCst);
            let _ = rx.lock().unwrap().recv_timeout(BOUND);
            k
        };
        (k, clock.now(), job)
    });
    let handles = pool.schedule_batch(tasks).unwrap();
    eventually("both workers run a task", || started.load(SeqCst) == 2);
    assert!(pool.stats().held > 0, "the workers filled their holds");
    let running = pool.running_keys();
    assert_eq!(running.len(), 2);
    let cancelled: Vec<bool> = (0..100u64).map(|k| pool.cancel(&k)).collect();
    for (k, &c) in (0..).zip(&cancelled) {
        assert_eq!(c, !running.contains(&k), "key {k}");
    }
    drop(release_tx);
    for ((k, h), c) in (0..).zip(handles).zip(cancelled) {
        let want = if c {
            Outcome::Cancelled
        } else {
            Outcome::Completed(k)
        };
        assert_eq!(done(h), want, "key {k}");
    }
    assert_eq!(started.load(SeqCst), 2, "a cancelled task ran");
    assert_eq!(pool.len(), 0);
}

#[test]
fn tasks_in_a_blocked_workers_hold_run_on_the_free_worker() {
    // The first task blocks until every other one has run. Its worker
    // takes some of them into its hold as it starts it, all due at once
    // in one call; the free worker takes them from there.
    let (clock, pool) = manual_pool::<u64>(2);
    let ran = Arc::new(AtomicUsize::new(0));
    let (all_ran_tx, all_ran_rx) = mpsc::channel::<()>();
    let all_ran_tx = Arc::new(std::sync::Mutex::new(Some(all_ran_tx)));
    type Job = Box<dyn FnOnce() -> bool + Send>;
    let first: Job = Box::new(move || {
        let waited = all_ran_rx.recv_timeout(BOUND);
        waited == Err(mpsc::RecvTimeoutError::Disconnected)
    });
    let rest = (1..200u64).map(|k| {
        let (ran, tx) = (ran.clone(), all_ran_tx.clone());
        let job: Job = Box::new(move || {
            if ran.fetch_add(1, SeqCst) + 1 == 199 {
                drop(tx.lock().unwrap().take());
            }
            true
        });
        (k, clock.now(), job)
    });
    let tasks = std::iter::once((0, clock.now(), first)).chain(rest);
    let handles = pool.schedule_batch(tasks).unwrap();
    // The blocked task sees the channel close only once all 199 ran.
    for (k, h) in (0..).zip(handles) {
        assert_eq!(done(h), Outcome::Completed(true), "key {k}");
    }
    assert_eq!(ran.load(SeqCst), 199);
    assert!(pool.stats().held > 0, "the workers filled their holds");
}

#[test]
fn a_free_worker_takes_held_tasks_before_later_ones() {
    // As above, but the free worker's start order is checked: tasks held
    // behind the blocked one are earlier (due order, then scheduling
    // order) than those still in the lane, so they start first, not after
    // the backlog.
    let (clock, pool) = manual_pool::<u64>(2);
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (all_ran_tx, all_ran_rx) = mpsc::channel::<()>();
    let all_ran_tx = Arc::new(std::sync::Mutex::new(Some(all_ran_tx)));
    type Job = Box<dyn FnOnce() + Send>;
    let first: Job = Box::new(move || {
        let _ = all_ran_rx.recv_timeout(BOUND);
    });
    let rest = (1..200u64).map(|k| {
        let (order, tx) = (order.clone(), all_ran_tx.clone());
        let job: Job = Box::new(move || {
            let mut order = order.lock().unwrap();
            order.push(k);
            if order.len() == 199 {
                drop(tx.lock().unwrap().take());
            }
        });
        (k, clock.now(), job)
    });
    let tasks = std::iter::once((0, clock.now(), first)).chain(rest);
    let handles = pool.schedule_batch(tasks).unwrap();
    for h in handles {
        assert_eq!(done(h), Outcome::Completed(()));
    }
    let order = order.lock().unwrap().clone();
    assert_eq!(order.len(), 199);
    let late: Vec<_> = order.windows(2).filter(|w| w[0] > w[1]).collect();
    assert!(late.is_empty(), "started out of order: {late:?}");
    assert!(pool.stats().held > 0, "the workers filled their holds");
}

#[test]
fn with_three_workers_tasks_taken_over_behind_a_second_blocked_task_still_run() {
    // Tasks 0 and 1 block until every other task has run. The worker that
    // starts 0 holds 1 and more; the one that takes 1 over holds the rest
    // of that half; the third worker takes from both holds.
    let (clock, pool) = manual_pool::<u64>(3);
    let ran = Arc::new(AtomicUsize::new(0));
    let (all_ran_tx, all_ran_rx) = mpsc::channel::<()>();
    let all_ran_rx = Arc::new(std::sync::Mutex::new(all_ran_rx));
    let all_ran_tx = Arc::new(std::sync::Mutex::new(Some(all_ran_tx)));
    type Job = Box<dyn FnOnce() -> bool + Send>;
    let blocked = |rx: Arc<std::sync::Mutex<mpsc::Receiver<()>>>| -> Job {
        Box::new(move || {
            // Both blocked tasks wait for the sender to go away.
            let waited = rx.lock().unwrap().recv_timeout(BOUND);
            waited == Err(mpsc::RecvTimeoutError::Disconnected)
        })
    };
    let first = [
        (0, clock.now(), blocked(all_ran_rx.clone())),
        (1, clock.now(), blocked(all_ran_rx)),
    ];
    let rest = (2..300u64).map(|k| {
        let (ran, tx) = (ran.clone(), all_ran_tx.clone());
        let job: Job = Box::new(move || {
            if ran.fetch_add(1, SeqCst) + 1 == 298 {
                drop(tx.lock().unwrap().take());
            }
            true
        });
        (k, clock.now(), job)
    });
    let handles = pool.schedule_batch(first.into_iter().chain(rest)).unwrap();
    for (k, h) in (0..).zip(handles) {
        assert_eq!(done(h), Outcome::Completed(true), "key {k}");
    }
    assert_eq!(ran.load(SeqCst), 298);
}
