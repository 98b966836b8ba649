#![cfg(loom)]
//! Model 1, lost wakeup: a task scheduled between the leader's look at the
//! heap and its wait must still wake it.
//!
//! One worker leads with an empty heap, so it decides to wait; the model's
//! main thread schedules a task that is due at once and waits for its
//! outcome. The leader checks the head and waits in one critical section,
//! and `schedule` notifies under the same lock, so the notify either comes
//! before the check (which then sees the task) or after the wait began.

use std::time::Duration;
use timerpool::{ManualClock, Outcome};

fn lost_wakeup(fault: Option<&'static str>) {
    loom_tests::model("lost_wakeup", move || {
        let clock = ManualClock::new();
        let pool = loom_tests::pool::<u32>(1, &clock, fault);
        let task = pool.submit(Duration::ZERO, || 1).unwrap();
        assert_eq!(task.wait(), Outcome::Completed(1));
        pool.shutdown();
    });
}

#[test]
fn schedule_between_check_and_wait_wakes_the_leader() {
    lost_wakeup(None);
}

/// Checking the head, letting go of the lock, then waiting: the schedule in
/// the gap notifies nobody, the task is never started, and the main thread
/// waits on its handle forever.
#[test]
#[should_panic(
    expected = "deadlock: thread 0 (main) in src/pool/outcome.rs, thread 1 in src/pool/leader.rs"
)]
fn unlock_before_wait_is_caught() {
    lost_wakeup(Some("unlock-before-wait"));
}
