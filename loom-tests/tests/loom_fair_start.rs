#![cfg(loom)]
//! Model 9, fair start: a due task never waits behind a running one while a
//! worker is free, and it stays pending until a worker starts it.
//!
//! - A leader that finds work due passes the token on *before* it starts
//!   and runs a task, so a second free worker can lead and start the next
//!   due task while the first one runs.
//! - A due task stays in the heap until the worker that runs it takes it
//!   under the lock: a `shutdown_now` racing the start either returns it
//!   (`Shutdown`, it never runs) or finds it started (it runs to the end).

use loom_tests::Count;
use std::sync::Arc;
use std::time::Duration;
use timerpool::{ManualClock, Outcome};

/// Two workers. A long task, due at once, blocks until the main thread has
/// seen a short task, due at once as well, complete: only a second worker
/// can run it, while the long one blocks its worker.
fn short_passes_long(fault: Option<&'static str>) {
    loom_tests::model("short_passes_long", move || {
        let clock = ManualClock::new();
        let pool = loom_tests::pool::<u32>(2, &clock, fault);
        let release = Arc::new(Count::new());
        let r = release.clone();
        let long = pool.submit(Duration::ZERO, move || r.wait_for(1)).unwrap();
        let short = pool.submit(Duration::ZERO, || 2).unwrap();
        assert_eq!(short.wait(), Outcome::Completed(2));
        release.bump();
        assert_eq!(long.wait(), Outcome::Completed(()));
        pool.shutdown();
    });
}

/// One worker; a thread runs `shutdown_now` while the task due at once is
/// pending or starting. It ran iff `shutdown_now` did not return its key.
fn shutdown_now_vs_start(fault: Option<&'static str>) {
    loom_tests::model("shutdown_now_vs_start", move || {
        let clock = ManualClock::new();
        let pool = Arc::new(loom_tests::pool::<u32>(1, &clock, fault));
        let ran = Arc::new(Count::new());
        let r = ran.clone();
        let task = pool
            .schedule(7, Duration::ZERO, move || {
                r.bump();
            })
            .unwrap();
        let p = pool.clone();
        let stopper = loom::thread::spawn(move || p.shutdown_now());
        let returned = stopper.join().unwrap();
        match (task.wait(), returned.as_slice()) {
            (Outcome::Completed(()), []) => assert_eq!(ran.get(), 1),
            (Outcome::Shutdown, [7]) => assert_eq!(ran.get(), 0, "a returned task ran"),
            (outcome, keys) => panic!("outcome {outcome:?} with keys {keys:?} returned"),
        }
    });
}

#[test]
fn a_short_task_runs_while_a_long_one_blocks_the_other_worker() {
    short_passes_long(None);
}

/// The leader starts and runs the long task before passing the token on:
/// the other worker never leads, the short task waits behind the long one,
/// and the long one waits for the short one.
#[test]
#[should_panic(
    expected = "deadlock: thread 0 (main) in src/pool/outcome.rs, thread 1 in loom-tests/tests/loom_fair_start.rs, thread 2 in src/pool/handoff.rs"
)]
fn running_before_passing_the_token_is_caught() {
    short_passes_long(Some("run-before-pass"));
}

/// Under loom the worker that starts the long task takes the short one
/// into its hold: a hold no other worker takes from leaves the short task
/// behind the long one, which waits for it.
#[test]
#[should_panic(
    expected = "deadlock: thread 0 (main) in src/pool/outcome.rs, thread 1 in loom-tests/tests/loom_fair_start.rs, thread 2 in src/pool/leader.rs"
)]
fn a_hold_no_other_worker_takes_from_is_caught() {
    short_passes_long(Some("hold-not-shared"));
}

#[test]
fn shutdown_now_returns_a_due_task_iff_it_never_started() {
    shutdown_now_vs_start(None);
}

/// `shutdown_now` reads the pending keys in one critical section and
/// removes the tasks in another: the worker starts the task in between, so
/// it runs although `shutdown_now` returned its key.
#[test]
#[should_panic(expected = "outcome Completed(()) with keys [7] returned")]
fn shutdown_now_reading_keys_apart_from_the_drain_is_caught() {
    shutdown_now_vs_start(Some("shutdown-now-check-then-drain"));
}
