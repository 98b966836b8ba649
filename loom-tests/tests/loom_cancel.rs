#![cfg(loom)]
//! Model 3, cancel vs start: `cancel` returns true iff the task never runs.
//!
//! A task falls due when a model thread advances the manual clock ("the
//! timeout fired"), racing the main thread's cancel with a worker's start.
//! Both take the task out of the heap under the pool lock, so exactly one
//! of them gets it: cancel true and outcome `Cancelled`, or cancel false and
//! the task runs.

use timerpool::{Clock, ManualClock, Outcome};

/// How the main thread cancels.
#[derive(Clone, Copy)]
enum Cancel {
    /// `TimerPool::cancel(&key)`.
    ByKey,
    /// `TaskHandle::cancel()`.
    ByHandle,
}

fn cancel_vs_start(how: Cancel, fault: Option<&'static str>) {
    loom_tests::model("cancel_vs_start", move || {
        let clock = ManualClock::new();
        let pool = loom_tests::pool::<u32>(1, &clock, fault);
        let due = clock.now() + loom_tests::LATER;
        let task = pool.schedule(7, due, || "ran").unwrap();
        let mover = clock.clone();
        let timeout = loom::thread::spawn(move || mover.advance(loom_tests::LATER));
        let cancelled = match how {
            Cancel::ByKey => pool.cancel(&7),
            Cancel::ByHandle => task.cancel(),
        };
        let outcome = task.wait();
        timeout.join().unwrap();
        assert_eq!(
            cancelled,
            !outcome.ran(),
            "cancel returned {cancelled} and the outcome is {outcome:?}"
        );
        if cancelled {
            assert_eq!(outcome, Outcome::Cancelled);
        } else {
            assert_eq!(outcome, Outcome::Completed("ran"));
        }
        pool.shutdown();
    });
}

#[test]
fn cancel_by_key_is_true_iff_the_task_never_runs() {
    cancel_vs_start(Cancel::ByKey, None);
}

#[test]
fn cancel_by_handle_is_true_iff_the_task_never_runs() {
    cancel_vs_start(Cancel::ByHandle, None);
}

/// Look up, unlock, remove: a worker starts it in between and the task runs
/// although cancel said true.
#[test]
#[should_panic(expected = "cancel returned true and the outcome is Completed")]
fn cancel_by_key_check_then_remove_is_caught() {
    cancel_vs_start(Cancel::ByKey, Some("cancel-check-then-remove"));
}

/// The same fault on the handle's cancel, which checks the task's stamp.
#[test]
#[should_panic(expected = "cancel returned true and the outcome is Completed")]
fn cancel_by_handle_check_then_remove_is_caught() {
    cancel_vs_start(Cancel::ByHandle, Some("cancel-check-then-remove"));
}
