#![cfg(loom)]
//! Model 9, claim on submit: a task due when it is scheduled, with nothing
//! else due, is claimed by the scheduling call and sent to the workers past
//! the leader. Two steps keep it from being stranded in the hand-off queue.
//!
//! - It is sent while the scheduling call still holds the pool lock, so it
//!   is in the queue before the exit pill a later shutdown makes the leader
//!   send, and the workers serve everything ahead of the pill.
//! - The scheduling call then notifies the leader: a leader waiting on the
//!   heap sees the queued task, passes the token on behind it and helps.
//!   With one worker the leader is the only thread that can run it.

use loom_tests::Stop;
use std::time::Duration;
use timerpool::{ManualClock, Outcome};

/// One worker; one thread submits a task due at once while the main thread
/// shuts the pool down. An accepted task was claimed on arrival, so it must
/// have its outcome by the time the shutdown has joined the worker: it ran,
/// or `shutdown_now` took it from the queue (`Shutdown`).
fn shutdown_vs_claim(stop: Stop, fault: Option<&'static str>) {
    loom_tests::model("shutdown_vs_claim_on_submit", move || {
        let clock = ManualClock::new();
        let pool = std::sync::Arc::new(loom_tests::pool_with::<u32>(1, &clock, fault, |b| {
            b.claim_on_submit(true)
        }));
        let other = pool.clone();
        let submitter = loom::thread::spawn(move || other.submit(Duration::ZERO, || 5).ok());
        stop.apply(&pool);
        let Some(task) = submitter.join().unwrap() else {
            return;
        };
        match (task.try_outcome(), stop) {
            (Ok(Outcome::Completed(5)), _) => {}
            // `shutdown_now` takes claimed tasks still queued and tells
            // them `Shutdown`.
            (Ok(Outcome::Shutdown), Stop::Now) => {}
            (Ok(other), _) => panic!("a task claimed on arrival ended {other:?}"),
            (Err(_), _) => panic!("a task claimed on arrival has no outcome after shutdown joined"),
        }
    });
}

/// One worker, which leads and waits on the empty heap; the main thread
/// submits a task due at once and waits for it.
fn leader_helps(fault: Option<&'static str>) {
    loom_tests::model("leader_helps_with_claimed_tasks", move || {
        let clock = ManualClock::new();
        let pool = loom_tests::pool_with::<u32>(1, &clock, fault, |b| b.claim_on_submit(true));
        let task = pool.submit(Duration::ZERO, || 7).unwrap();
        assert_eq!(task.wait(), Outcome::Completed(7));
        pool.shutdown();
    });
}

#[test]
fn a_task_claimed_on_arrival_runs_before_a_graceful_shutdown_ends() {
    shutdown_vs_claim(Stop::Graceful, None);
}

#[test]
fn a_task_claimed_on_arrival_runs_before_shutdown_now_ends() {
    shutdown_vs_claim(Stop::Now, None);
}

#[test]
fn the_waiting_leader_runs_a_task_claimed_on_arrival() {
    leader_helps(None);
}

/// The claimed task is sent after the lock is released: the shutdown and
/// the leader's exit pill get in between, the worker leaves with the pill,
/// and the task arrives to an empty pool.
#[test]
#[should_panic(expected = "a task claimed on arrival has no outcome after shutdown joined")]
fn sending_after_unlock_is_caught() {
    shutdown_vs_claim(Stop::Now, Some("claim-send-after-unlock"));
}

/// The claimed task is queued without waking the leader: the only worker
/// sleeps on the empty heap while the task waits in the queue.
#[test]
#[should_panic(
    expected = "deadlock: thread 0 (main) in src/pool/outcome.rs, thread 1 in src/pool/leader.rs"
)]
fn not_calling_the_leader_is_caught() {
    leader_helps(Some("claim-no-call-leader"));
}
