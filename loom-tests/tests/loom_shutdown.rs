#![cfg(loom)]
//! Model 5, shutdown vs schedule: every task the pool accepted gets exactly
//! one outcome, and every worker exits.
//!
//! Two workers; one thread submits a task due at once while the main thread
//! shuts the pool down. `submit` checks the mode and inserts in one critical
//! section, and a shutdown changes the mode and notifies the leader in one,
//! so a task is either refused or in the heap before the leader sees the
//! stop: `shutdown()` lets the leader drain it before the exit pill goes
//! round, `shutdown_now()` takes it out with outcome `Shutdown` unless it was
//! already claimed. Both join the workers, so when they return an accepted
//! task already has its outcome (a second outcome trips the debug assertion
//! in the outcome slot); a worker that never exits is a loom deadlock.

use loom_tests::Stop;
use std::sync::Arc;
use std::time::Duration;
use timerpool::{ManualClock, Outcome};

fn shutdown_vs_schedule(stop: Stop, fault: Option<&'static str>) {
    loom_tests::model("shutdown_vs_schedule", move || {
        let clock = ManualClock::new();
        let pool = Arc::new(loom_tests::pool::<u32>(2, &clock, fault));
        let other = pool.clone();
        let submitter = loom::thread::spawn(move || other.submit(Duration::ZERO, || 5).ok());
        stop.apply(&pool);
        let Some(task) = submitter.join().unwrap() else {
            return;
        };
        match (stop, task.try_outcome()) {
            (_, Ok(Outcome::Completed(5))) | (Stop::Now, Ok(Outcome::Shutdown)) => {}
            (_, Ok(other)) => panic!("an accepted task ended {other:?}"),
            (_, Err(_)) => {
                panic!("an accepted task has no outcome after shutdown joined the workers")
            }
        }
    });
}

#[test]
fn shutdown_gives_every_accepted_task_one_outcome_and_stops_every_worker() {
    shutdown_vs_schedule(Stop::Graceful, None);
}

#[test]
fn shutdown_now_gives_every_accepted_task_one_outcome_and_stops_every_worker() {
    shutdown_vs_schedule(Stop::Now, None);
}

/// `shutdown` sets the mode without notifying: the leader waits on an empty
/// heap forever and `shutdown` never finishes joining it.
#[test]
#[should_panic(expected = "deadlock: thread 0 (main) in src/pool/crew.rs")]
fn shutdown_without_notify_is_caught() {
    shutdown_vs_schedule(Stop::Graceful, Some("shutdown-no-notify"));
}

/// `submit` checks the mode in one critical section and inserts in another:
/// the task goes in after the workers have exited.
#[test]
#[should_panic(expected = "an accepted task has no outcome after shutdown")]
fn intake_check_outside_the_lock_is_caught() {
    shutdown_vs_schedule(Stop::Graceful, Some("intake-outside-lock"));
}

/// The same fault against `shutdown_now`.
#[test]
#[should_panic(expected = "an accepted task has no outcome after shutdown")]
fn intake_check_outside_the_lock_is_caught_by_shutdown_now() {
    shutdown_vs_schedule(Stop::Now, Some("intake-outside-lock"));
}
