#![cfg(loom)]
//! Model 2, earlier-task preemption: a task that becomes the new earliest
//! wakes a leader that waits for a far deadline.
//!
//! The manual clock is frozen, so the leader's wait for the far task ends
//! only on a notify. Another thread schedules a task due at once; the main
//! thread waits on its handle. `schedule` notifies the leader, under the
//! lock, whenever the earliest due time changes, so the leader re-reads the
//! head and claims the new task while the far one stays pending.

use std::sync::Arc;
use std::time::Duration;
use timerpool::{ManualClock, Outcome};

fn preemption(fault: Option<&'static str>) {
    loom_tests::model("preemption", move || {
        let clock = ManualClock::new();
        let pool = Arc::new(loom_tests::pool::<&str>(1, &clock, fault));
        let far = pool
            .schedule("far", Duration::from_secs(3600), || "far")
            .unwrap();
        let other = pool.clone();
        let near =
            loom::thread::spawn(move || other.schedule("near", Duration::ZERO, || "near").unwrap())
                .join()
                .unwrap();
        assert_eq!(near.wait(), Outcome::Completed("near"));
        assert_eq!(pool.shutdown_now(), vec!["far"]);
        assert_eq!(far.wait(), Outcome::Shutdown);
    });
}

#[test]
fn earlier_task_preempts_the_leaders_far_wait() {
    preemption(None);
}

/// No notify when the head changes: the leader sleeps on through the
/// earlier task, and the main thread waits on its handle forever.
#[test]
#[should_panic(
    expected = "deadlock: thread 0 (main) in src/pool/outcome.rs, thread 1 in src/pool/leader.rs"
)]
fn no_notify_on_new_head_is_caught() {
    preemption(Some("no-notify-on-new-head"));
}
