//! Tests for faults inside tasks: odd panic payloads, panicking `Drop`s,
//! tasks that block, tasks that call back into (or drop) their own pool, and
//! handles that outlive the pool.

mod common;
use common::*;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use timerpool::{Clock, Error, ManualClock, Outcome, TaskHandle, TimerPool};

/// A value whose `Drop` counts itself and then panics.
struct PanicOnDrop {
    /// Incremented once per drop, before the panic.
    drops: Arc<AtomicUsize>,
    /// The panic message.
    msg: &'static str,
}

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
        panic!("{}", self.msg);
    }
}

fn panic_on_drop(msg: &'static str) -> (Arc<AtomicUsize>, PanicOnDrop) {
    let drops = Arc::new(AtomicUsize::new(0));
    (drops.clone(), PanicOnDrop { drops, msg })
}

/// A panic payload that is neither `&str` nor `String`.
#[derive(Debug)]
struct CustomPayload {
    #[allow(dead_code)] // only carried, never read: the point is its type
    code: u32,
}

/// A panic payload whose own `Drop` panics when the pool disposes of it.
struct PayloadPanicsOnDrop(Arc<AtomicUsize>);

impl Drop for PayloadPanicsOnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        panic!("intentional: payload drop");
    }
}

#[test]
fn non_string_panic_payloads_are_reported_and_the_worker_survives() {
    // One worker: if any payload killed it, the last task would never run.
    let pool = TimerPool::<u64>::builder().workers(1).build().unwrap();
    let payload_drops = Arc::new(AtomicUsize::new(0));
    let pd = payload_drops.clone();
    let handles: Vec<(TaskHandle<(), u64>, &str)> = vec![
        (
            pool.submit(Duration::ZERO, || std::panic::panic_any(42u8))
                .unwrap(),
            "<non-string panic payload>",
        ),
        (
            pool.submit(Duration::ZERO, || {
                std::panic::panic_any(CustomPayload { code: 7 })
            })
            .unwrap(),
            "<non-string panic payload>",
        ),
        (
            pool.submit(Duration::ZERO, || {
                std::panic::resume_unwind(Box::new(vec![1u64, 2, 3]))
            })
            .unwrap(),
            "<non-string panic payload>",
        ),
        (
            pool.submit(Duration::ZERO, || {
                std::panic::panic_any(String::from("owned string payload"))
            })
            .unwrap(),
            "owned string payload",
        ),
        (
            pool.submit(Duration::ZERO, || {
                std::panic::panic_any("static str payload")
            })
            .unwrap(),
            "static str payload",
        ),
        (
            pool.submit(Duration::ZERO, move || {
                std::panic::panic_any(PayloadPanicsOnDrop(pd))
            })
            .unwrap(),
            "<non-string panic payload>",
        ),
    ];
    for (h, msg) in handles {
        assert_eq!(done(h), Outcome::Panicked(msg.to_string()));
    }
    assert_eq!(payload_drops.load(Ordering::SeqCst), 1);
    let after = pool.submit(Duration::ZERO, || "still serving").unwrap();
    assert_eq!(done(after), Outcome::Completed("still serving"));
    pool.shutdown();
}

#[test]
fn panic_in_drop_of_a_task_that_runs_is_reported_as_panicked() {
    let pool = TimerPool::<u64>::builder().workers(1).build().unwrap();
    let (drops, guard) = panic_on_drop("intentional: closure drop after run");
    let h = pool
        .schedule(1, Duration::ZERO, move || {
            let _keep = &guard;
            5
        })
        .unwrap();
    // The closure's captures are dropped as part of the call, so the panic
    // belongs to the task: it ran, then panicked, and its value is lost.
    assert_eq!(
        done(h),
        Outcome::Panicked("intentional: closure drop after run".into())
    );
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    let after = pool.submit(Duration::ZERO, || 6).unwrap();
    assert_eq!(done(after), Outcome::Completed(6));
    pool.shutdown();
}

#[test]
fn panic_in_drop_of_a_task_that_never_runs_is_contained() {
    let (_clock, pool) = manual_pool(2);
    let far = Duration::from_secs(3600);
    let ran = Arc::new(AtomicUsize::new(0));
    let task = |msg: &'static str| {
        let (drops, guard) = panic_on_drop(msg);
        let ran = ran.clone();
        (drops, move || {
            let _keep = &guard;
            ran.fetch_add(1, Ordering::SeqCst);
        })
    };

    // Cancelled by key: the panic stays inside the pool, cancel answers true.
    let (d_cancel_key, f) = task("intentional: drop on cancel by key");
    let h_cancel_key = pool.schedule(1, far, f).unwrap();
    assert!(pool.cancel(&1));
    assert_eq!(done(h_cancel_key), Outcome::Cancelled);

    // Cancelled by handle.
    let (d_cancel_handle, f) = task("intentional: drop on cancel by handle");
    let h_cancel_handle = pool.schedule(2, far, f).unwrap();
    assert!(h_cancel_handle.cancel());
    assert_eq!(done(h_cancel_handle), Outcome::Cancelled);

    // Replaced: the schedule that replaces it succeeds and returns normally.
    let (d_replaced, f) = task("intentional: drop on replace");
    let h_replaced = pool.schedule(3, far, f).unwrap();
    let h_replacement = pool.schedule(3, far, || ()).unwrap();
    assert_eq!(done(h_replaced), Outcome::Replaced);

    // Refused for a bad due time: the error comes back, not the panic.
    let (d_refused_time, f) = task("intentional: drop on refused due time");
    assert_eq!(
        pool.schedule(4, Duration::MAX, f).unwrap_err(),
        Error::TimeOutOfRange
    );

    // Removed by shutdown_now.
    let (d_shutdown, f) = task("intentional: drop on shutdown_now");
    let h_shutdown = pool.schedule(5, far, f).unwrap();
    let mut removed = pool.shutdown_now();
    removed.sort_unstable();
    assert_eq!(removed, vec![3, 5]);
    assert_eq!(done(h_shutdown), Outcome::Shutdown);
    assert_eq!(done(h_replacement), Outcome::Shutdown);

    // Refused after shutdown.
    let (d_refused_shutdown, f) = task("intentional: drop on refused after shutdown");
    assert_eq!(pool.schedule(6, far, f).unwrap_err(), Error::ShutDown);

    for (what, d) in [
        ("cancel by key", d_cancel_key),
        ("cancel by handle", d_cancel_handle),
        ("replace", d_replaced),
        ("refused due time", d_refused_time),
        ("shutdown_now", d_shutdown),
        ("refused after shutdown", d_refused_shutdown),
    ] {
        assert_eq!(d.load(Ordering::SeqCst), 1, "{what}: dropped once");
    }
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

#[test]
fn a_long_blocking_task_does_not_stop_other_workers_serving_due_work() {
    for workers in [2, 4] {
        let (clock, pool) = manual_pool(workers);
        let (started_tx, started_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let blocker = pool
            .schedule(0, Duration::ZERO, move || {
                started_tx.send(()).unwrap();
                release_rx
                    .recv_timeout(BOUND)
                    .expect("blocker was never released");
            })
            .unwrap();
        started_rx
            .recv_timeout(BOUND)
            .expect("blocker never started");

        // While one worker is stuck, due work keeps flowing through the rest,
        // including work scheduled and falling due only now.
        let t0 = clock.now();
        let handles: Vec<_> = (1..=200u64)
            .map(|k| {
                let at = t0 + Duration::from_millis(k % 20);
                let c = clock.clone();
                (at, pool.schedule(k, at, move || c.now()).unwrap())
            })
            .collect();
        for _ in 0..20 {
            clock.advance(Duration::from_millis(1));
        }
        for (at, h) in handles {
            let started = done(h).completed().expect("ran");
            assert!(started >= at);
        }
        assert!(!blocker.is_finished());
        release_tx.send(()).unwrap();
        assert_eq!(done(blocker), Outcome::Completed(()));
        pool.shutdown();
    }
}

#[test]
fn a_task_may_schedule_and_cancel_on_its_own_pool_with_one_worker() {
    let (clock, pool) = manual_pool(1);
    let pool = Arc::new(pool);
    let p = pool.clone();
    let (tx, rx) = mpsc::channel();
    let outer = pool
        .schedule(1, Duration::ZERO, move || {
            // Replace a pending key, add new ones, cancel one, all from the
            // only worker: none of it may wait for a worker.
            let inner = p.schedule(2, Duration::from_secs(1), || "inner").unwrap();
            let again = p.schedule(2, Duration::from_secs(1), || "again").unwrap();
            let gone = p.schedule(3, Duration::from_secs(1), || "gone").unwrap();
            assert!(p.cancel(&3));
            assert!(!p.cancel(&3));
            assert!(!p.cancel(&1), "the running task is not pending");
            tx.send((inner, again, gone)).unwrap();
            "outer"
        })
        .unwrap();
    assert_eq!(done(outer), Outcome::Completed("outer"));
    let (inner, again, gone) = rx.recv_timeout(BOUND).unwrap();
    assert_eq!(done(inner), Outcome::Replaced);
    assert_eq!(done(gone), Outcome::Cancelled);
    clock.advance(Duration::from_secs(1));
    assert_eq!(done(again), Outcome::Completed("again"));
    pool.shutdown();
}

#[test]
fn a_task_calling_shutdown_does_not_join_itself_and_pending_work_still_runs() {
    let (clock, pool) = manual_pool(1);
    let pool = Arc::new(pool);
    let later = pool
        .schedule(2, Duration::from_secs(1), || "later")
        .unwrap();
    let p = pool.clone();
    let closer = pool
        .schedule(1, Duration::ZERO, move || {
            p.shutdown();
            p.schedule(3, Duration::ZERO, || "refused")
                .map(|_| ())
                .unwrap_err()
        })
        .unwrap();
    assert_eq!(done(closer), Outcome::Completed(Error::ShutDown));
    assert!(pool.is_shutdown());
    clock.advance(Duration::from_secs(1));
    assert_eq!(done(later), Outcome::Completed("later"));
    pool.shutdown(); // joins from outside
}

#[test]
fn a_task_calling_shutdown_now_removes_every_task_not_yet_started() {
    // One worker: key 1 runs and calls shutdown_now. Keys 2..=6 are due but
    // no worker has started them, so they are pending and come back unrun.
    let clock = ManualClock::new();
    let pool = Arc::new(
        TimerPool::<u64>::builder()
            .workers(1)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let at = clock.now() + Duration::from_secs(1);
    let p = pool.clone();
    let first = pool.schedule(1, at, move || p.shutdown_now()).unwrap();
    let rest: Vec<_> = (2..=6u64)
        .map(|k| pool.schedule(k, at, move || k).unwrap())
        .collect();
    clock.advance(Duration::from_secs(1));
    assert_eq!(done(first), Outcome::Completed(vec![2, 3, 4, 5, 6]));
    let outcomes: Vec<_> = rest.into_iter().map(done).collect();
    assert_eq!(outcomes, vec![Outcome::Shutdown; 5]);
    pool.shutdown();
}

/// Names of this process's threads whose name starts with `prefix`.
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

/// Wait, within [`BOUND`], until no thread named `prefix…` is left.
fn await_no_threads_named(prefix: &str) {
    let deadline = Instant::now() + BOUND;
    while threads_named(prefix) > 0 {
        assert!(
            Instant::now() < deadline,
            "threads named {prefix}* still alive after {BOUND:?}"
        );
        std::thread::yield_now();
    }
}

#[test]
fn a_task_dropping_the_last_pool_reference_does_not_deadlock() {
    let clock = ManualClock::new();
    let pool = Arc::new(
        TimerPool::<u64>::builder()
            .workers(3)
            .thread_name("flt-selfdrop")
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let pending = pool.schedule(2, Duration::from_secs(60), || ()).unwrap();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let p = pool.clone();
    let last = pool
        .schedule(1, Duration::ZERO, move || {
            go_rx.recv_timeout(BOUND).expect("never told to go");
            // Drop the only remaining reference: this is shutdown_now run on
            // a worker, which must not try to join itself.
            drop(p);
            "dropped"
        })
        .unwrap();
    drop(pool); // the task now holds the last reference
    go_tx.send(()).unwrap();
    assert_eq!(done(last), Outcome::Completed("dropped"));
    assert_eq!(done(pending), Outcome::Shutdown);
    // The workers were not joined by anyone, but they still exit.
    await_no_threads_named("flt-selfdrop");
}

#[test]
fn cancelling_through_a_handle_may_drop_the_last_pool_reference() {
    let (_clock, pool) = manual_pool(2);
    let pool = Arc::new(pool);
    let p = pool.clone();
    let h = pool
        .schedule(1, Duration::from_secs(60), move || drop(p))
        .unwrap();
    let other = pool.schedule(2, Duration::from_secs(60), || ()).unwrap();
    drop(pool);
    // Cancelling drops the closure, which holds the last reference: the pool
    // shuts down from inside cancel, on this (non-worker) thread.
    assert!(h.cancel());
    assert_eq!(done(h), Outcome::Cancelled);
    assert_eq!(done(other), Outcome::Shutdown);
}

#[test]
fn handles_are_answered_after_the_pool_is_gone() {
    let (clock, pool) = manual_pool(2);
    let completed = pool.schedule(1, Duration::ZERO, || 1).unwrap();
    let completed_outcome_known = {
        // Make sure it finished before the drop.
        let (tx, rx) = mpsc::channel();
        let probe = pool
            .schedule(9, Duration::ZERO, move || tx.send(()).unwrap())
            .unwrap();
        rx.recv_timeout(BOUND).unwrap();
        probe
    };
    let pending = pool.schedule(2, Duration::from_secs(60), || 2).unwrap();
    let keyless_pending = pool.submit(Duration::from_secs(60), || 3).unwrap();
    let cancelled = pool.schedule(4, Duration::from_secs(60), || 4).unwrap();
    assert!(cancelled.cancel());

    // A task running while the pool is dropped finishes: drop joins it.
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let running = pool
        .schedule(5, Duration::ZERO, move || {
            started_tx.send(()).unwrap();
            release_rx.recv_timeout(BOUND).unwrap();
            5
        })
        .unwrap();
    started_rx.recv_timeout(BOUND).unwrap();
    let dropper = std::thread::spawn(move || drop(pool));
    release_tx.send(()).unwrap();
    dropper.join().unwrap();
    drop(clock);

    assert!(!pending.cancel(), "nothing to cancel once the pool is gone");
    assert!(pending.is_finished());
    assert_eq!(pending.key(), Some(&2));
    assert_eq!(keyless_pending.key(), None);
    assert_eq!(done(completed), Outcome::Completed(1));
    assert_eq!(done(completed_outcome_known), Outcome::Completed(()));
    assert_eq!(pending.wait(), Outcome::Shutdown);
    assert_eq!(keyless_pending.try_outcome().unwrap(), Outcome::Shutdown);
    assert_eq!(cancelled.wait(), Outcome::Cancelled);
    assert_eq!(running.wait(), Outcome::Completed(5));
}

#[test]
fn cancelling_the_last_pending_task_lets_a_graceful_shutdown_finish() {
    // A graceful shutdown waits for pending work. Once the only pending task
    // is cancelled there is nothing left to wait for, so shutdown() must
    // return without the clock moving.
    let (clock, pool) = manual_pool(1);
    let pool = Arc::new(pool);
    let h = pool.schedule(1, Duration::from_secs(3600), || ()).unwrap();
    // Make sure the leader is waiting: a clock move wakes a waiting leader,
    // and once the wake-up count has moved it waits again (stats() takes the
    // lock it waits with).
    let deadline = Instant::now() + BOUND;
    let start = pool.stats().leader_wakeups;
    while pool.stats().leader_wakeups == start {
        assert!(Instant::now() < deadline, "no leader ever waited");
        clock.advance(Duration::ZERO);
        std::thread::yield_now();
    }
    // The leader sees the shutdown and goes back to waiting for the task's
    // due time.
    let (closer, done_rx) = shutdown_heard(&pool);
    assert!(pool.cancel(&1));
    assert_eq!(done(h), Outcome::Cancelled);
    let finished = done_rx.recv_timeout(BOUND).is_ok();
    if !finished {
        clock.advance(Duration::from_secs(3600)); // unblock it, then fail
    }
    closer.join().unwrap();
    assert!(finished, "shutdown() still waited for a cancelled task");
}

#[test]
fn cancelling_a_held_exclusive_task_lets_a_graceful_shutdown_finish() {
    // Exclusive keys hold a due task back while its key's previous task
    // runs. If that held task is cancelled during a graceful shutdown, the
    // shutdown has nothing left to wait for once the running task returns.
    // A manual clock: no wait has a real deadline, so the leader asks for
    // no deputy and holds the state lock from each wake to its next wait,
    // which `shutdown_heard` relies on.
    let clock = ManualClock::new();
    let pool = Arc::new(
        TimerPool::<u64>::builder()
            .workers(2)
            .exclusive_keys(true)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let a = pool
        .schedule(1, Duration::ZERO, move || {
            started_tx.send(()).unwrap();
            release_rx.recv_timeout(BOUND).unwrap();
        })
        .unwrap();
    started_rx.recv_timeout(BOUND).unwrap();
    // B is due at once, but key 1 is busy: the leader holds it back.
    let b = pool.schedule(1, Duration::ZERO, || ()).unwrap();
    let deadline = Instant::now() + BOUND;
    while !(pool.next_due().is_none() && pool.len() == 1) {
        assert!(Instant::now() < deadline, "B was never held");
        std::thread::yield_now();
    }
    // The worker that held B may still be on its way back to leading: a
    // clock move wakes a waiting leader; once the wake-up count has moved
    // it waits again.
    let poked = pool.stats().leader_wakeups;
    while pool.stats().leader_wakeups == poked {
        assert!(Instant::now() < deadline, "no leader ever waited");
        clock.advance(Duration::ZERO);
        std::thread::yield_now();
    }
    let (closer, done_rx) = shutdown_heard(&pool);
    assert!(pool.cancel(&1));
    assert_eq!(done(b), Outcome::Cancelled);
    release_tx.send(()).unwrap();
    assert_eq!(done(a), Outcome::Completed(()));
    let finished = done_rx.recv_timeout(BOUND).is_ok();
    assert!(
        finished,
        "shutdown() waits for ever after a held task was cancelled"
    );
    closer.join().unwrap();
}
#[test]
fn panic_in_drop_of_a_result_nobody_waits_for_does_not_kill_a_worker() {
    // One worker, so a dead worker means nothing else ever runs.
    let (clock, pool) = manual_pool(1);
    let (drops, value) = panic_on_drop("intentional: result drop");
    let value = std::sync::Mutex::new(Some(value));
    let abandoned = pool
        .schedule(1, Duration::from_secs(1), move || {
            value.lock().unwrap().take().unwrap()
        })
        .unwrap();
    // Nobody will take the result: the pool disposes of it.
    drop(abandoned);
    clock.advance(Duration::from_secs(1));
    let next = pool
        .schedule(2, Duration::from_secs(1), || "served")
        .unwrap();
    clock.advance(Duration::from_secs(1));
    assert_eq!(done(next), Outcome::Completed("served"));
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    pool.shutdown();
}
