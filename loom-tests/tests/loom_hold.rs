#![cfg(loom)]
//! Model 11, holds: a task a worker took into its hold is pending until
//! the worker starts it.
//!
//! One worker; two tasks due at once arrive in one call, so the start of
//! the first takes the second into the worker's hold (under loom a hold
//! takes whatever is due). The main thread asks `cancel_result` for the
//! second while the worker starts tasks: it is found and cancelled (it
//! never runs), or found running; never absent, since its run waits for
//! the main thread and so cannot have ended. And a `shutdown_now` racing
//! the starts returns each task iff it never ran, the held one included.

use loom_tests::Count;
use std::sync::Arc;
use std::time::Duration;
use timerpool::{CancelResult, ManualClock, Outcome};

/// A task the model schedules.
type Job = Box<dyn FnOnce() + Send>;

fn cancel_result_vs_start_from_a_hold(fault: Option<&'static str>) {
    loom_tests::model("cancel_result_vs_start_from_a_hold", move || {
        let clock = ManualClock::new();
        let pool = loom_tests::pool::<u32>(1, &clock, fault);
        let gate = Arc::new(Count::new());
        let g = gate.clone();
        let tasks: Vec<(u32, Duration, Job)> = vec![
            (1, Duration::ZERO, Box::new(|| ())),
            (2, Duration::ZERO, Box::new(move || g.wait_for(1))),
        ];
        let handles = pool.schedule_batch(tasks).unwrap();
        let found = pool.cancel_result(&2);
        gate.bump();
        let outcomes: Vec<Outcome<()>> = handles.into_iter().map(|h| h.wait()).collect();
        match (found, &outcomes[1]) {
            (CancelResult::Cancelled, Outcome::Cancelled) => {}
            (CancelResult::Running, Outcome::Completed(())) => {}
            (found, outcome) => panic!("cancel_result {found:?} and the outcome {outcome:?}"),
        }
        assert_eq!(outcomes[0], Outcome::Completed(()));
        pool.shutdown();
    });
}

/// One worker, two tasks due at once in one call; a thread runs
/// `shutdown_now` while the worker starts the first and holds the second.
/// Each ran iff `shutdown_now` did not return its key.
fn shutdown_now_vs_start_from_a_hold(fault: Option<&'static str>) {
    loom_tests::model("shutdown_now_vs_start_from_a_hold", move || {
        let clock = ManualClock::new();
        let pool = Arc::new(loom_tests::pool::<u32>(1, &clock, fault));
        let ran = Arc::new(Count::new());
        let (r1, r2) = (ran.clone(), ran.clone());
        let tasks: Vec<(u32, Duration, Job)> = vec![
            (
                1,
                Duration::ZERO,
                Box::new(move || {
                    r1.bump();
                }),
            ),
            (
                2,
                Duration::ZERO,
                Box::new(move || {
                    r2.bump();
                }),
            ),
        ];
        let handles = pool.schedule_batch(tasks).unwrap();
        let p = pool.clone();
        let stopper = loom::thread::spawn(move || p.shutdown_now());
        let returned = stopper.join().unwrap();
        let mut runs = 0;
        for (key, handle) in (1..).zip(handles) {
            match (handle.wait(), returned.contains(&key)) {
                (Outcome::Completed(()), false) => runs += 1,
                (Outcome::Shutdown, true) => {}
                (outcome, back) => panic!("task {key}: outcome {outcome:?}, returned {back}"),
            }
        }
        assert_eq!(ran.get(), runs, "a returned task ran");
    });
}

#[test]
fn shutdown_now_returns_a_held_task_iff_it_never_started() {
    shutdown_now_vs_start_from_a_hold(None);
}

/// The keys read apart from the drain: a start from the hold in between
/// runs a task whose key was returned.
#[test]
#[should_panic(expected = "outcome Completed(()), returned true")]
fn shutdown_now_reading_keys_apart_from_the_drain_is_caught_at_a_hold() {
    shutdown_now_vs_start_from_a_hold(Some("shutdown-now-check-then-drain"));
}

#[test]
fn a_held_task_is_cancelled_or_running_never_absent() {
    cancel_result_vs_start_from_a_hold(None);
}

/// Lookups that skip the holds report a held task, still pending, absent.
#[test]
#[should_panic(expected = "cancel_result Absent and the outcome Completed(())")]
fn lookups_that_skip_the_holds_are_caught() {
    cancel_result_vs_start_from_a_hold(Some("lookup-skips-holds"));
}
