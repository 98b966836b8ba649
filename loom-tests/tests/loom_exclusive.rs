#![cfg(loom)]
//! Model 8, exclusive keys: a replacement that falls due while its key's
//! task runs starts only after that run returns, and is never lost.
//!
//! With `exclusive_keys(true)` a worker marks a started task's key busy
//! and moves a due task whose key is busy to `held` instead of starting it.
//! When the run returns, its worker clears the key and moves the held task
//! back into the heap under the pool lock, notifying the leader if the head
//! changed; a draining leader keeps leading while anything is held.

use loom::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use timerpool::{Outcome, TaskHandle, TimerPool};

/// Two workers. The first task under key 7 is due at once; while it runs it
/// schedules its replacement under the same key, due at once too, and
/// returns that task's handle. The replacement reports whether the first
/// task had returned when it started. The main thread takes the handle from
/// the first task's outcome and shuts the pool down at once, while the
/// replacement may still be held, pending, starting or running: `shutdown()`
/// drains, so once it has joined the workers the replacement must have run,
/// once, after the first task.
fn replacement_waits_for_the_run(fault: Option<&'static str>) {
    loom_tests::model("replacement_waits_for_the_run", move || {
        let clock = timerpool::ManualClock::new();
        let pool: Arc<TimerPool<u32>> = Arc::new(loom_tests::pool_with(2, &clock, fault, |b| {
            b.exclusive_keys(true)
        }));
        let first_returned = Arc::new(AtomicBool::new(false));
        let (inner, returned) = (pool.clone(), first_returned.clone());
        let first = pool
            .schedule(7, Duration::ZERO, move || {
                let seen = returned.clone();
                let second = inner
                    .schedule(7, Duration::ZERO, move || seen.load(Ordering::SeqCst))
                    .expect("the pool is running");
                returned.store(true, Ordering::SeqCst);
                second
            })
            .unwrap();
        let second: TaskHandle<bool, u32> = match first.wait() {
            Outcome::Completed(handle) => handle,
            other => panic!("the first task ended {other:?}"),
        };
        pool.shutdown();
        match second.try_outcome() {
            Ok(Outcome::Completed(true)) => {}
            Ok(Outcome::Completed(false)) => {
                panic!("the replacement started while its key's task was still running")
            }
            Ok(other) => panic!("the replacement ended {other:?}"),
            Err(_) => panic!("the replacement has no outcome after shutdown joined the workers"),
        }
    });
}

#[test]
fn replacement_starts_after_the_run_and_is_drained() {
    replacement_waits_for_the_run(None);
}

/// A worker starts the replacement although its key is busy: the second
/// worker runs it while the first task is still running.
#[test]
#[should_panic(expected = "the replacement started while its key's task was still running")]
fn exclusive_no_hold_is_caught() {
    replacement_waits_for_the_run(Some("exclusive-no-hold"));
}

/// Releasing the key frees it but leaves the replacement held: it never
/// goes back into the heap, so it never runs and the draining shutdown
/// waits for it for ever.
#[test]
#[should_panic(expected = "deadlock: thread 0 (main) in src/pool/crew.rs")]
fn release_keeping_the_replacement_held_is_caught() {
    replacement_waits_for_the_run(Some("exclusive-release-keeps-held"));
}
