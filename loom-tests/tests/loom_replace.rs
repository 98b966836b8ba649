#![cfg(loom)]
//! Model 4, replace vs claim: scheduling a pending key replaces its task, so
//! of the old and the new task exactly one runs and the other is `Replaced`.
//!
//! The old task falls due when a model thread advances the manual clock; the
//! main thread schedules the new task under the same key and due time. The
//! replace and the claim both happen under the pool lock: either the replace
//! finds the old task pending (old `Replaced`, new runs), or the leader has
//! already claimed it, and then the new task is fresh work for a key that is
//! running (both run; `Outcome::Replaced` never goes to a task that ran).
//! If the clock had not reached the due time when the replace returned, the
//! old task cannot have been claimed, so it must be `Replaced`.

use timerpool::{Clock, ManualClock, Outcome};

fn replace_vs_claim(fault: Option<&'static str>) {
    loom_tests::model("replace_vs_claim", move || {
        let clock = ManualClock::new();
        let pool = loom_tests::pool::<u32>(1, &clock, fault);
        let due = clock.now() + loom_tests::LATER;
        let old = pool.schedule(7, due, || "old").unwrap();
        let mover = clock.clone();
        let timeout = loom::thread::spawn(move || mover.advance(loom_tests::LATER));
        let new = pool.schedule(7, due, || "new").unwrap();
        let old_was_due = clock.now() >= due;
        let (old, new) = (old.wait(), new.wait());
        timeout.join().unwrap();
        assert_eq!(new, Outcome::Completed("new"));
        match old {
            Outcome::Replaced => {}
            Outcome::Completed("old") => assert!(
                old_was_due,
                "old and new both ran, though the old one was not yet due when replaced"
            ),
            other => panic!("old task ended {other:?}"),
        }
        pool.shutdown();
    });
}

#[test]
fn replace_makes_exactly_one_of_old_and_new_run() {
    replace_vs_claim(None);
}

/// The new task goes in beside the old one instead of replacing it (a heap
/// without a key index): both run.
#[test]
#[should_panic(expected = "old and new both ran")]
fn replace_keeps_old_is_caught() {
    replace_vs_claim(Some("replace-keeps-old"));
}
