#![cfg(loom)]
//! Model 7, periodic tasks: a true cancel is never followed by another run,
//! and a task put back after its run reaches the leader.
//!
//! While a periodic task runs, a stand-in holds its key in the heap. Cancel
//! removes the stand-in under the pool lock; the worker puts the task back
//! after the run, under the same lock, only if its stand-in is still there.
//! Whichever comes first wins, and exactly one final outcome is delivered.
//! The task put back is a heap insert like any other: when it becomes the
//! earliest task, the worker notifies the leader.

use loom::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use timerpool::{Clock, ManualClock, MissedTicks, Outcome, Repeat};

/// How the canceller cancels.
#[derive(Clone, Copy)]
enum Cancel {
    /// `TimerPool::cancel(&key)`.
    ByKey,
    /// `PeriodicHandle::cancel()`.
    ByHandle,
}

/// Fixed rate every [`loom_tests::LATER`], running every missed tick, so a
/// run that ends after the clock moved still puts the task back at the
/// second tick (the default `Skip` would move it a period further).
fn every_later() -> Repeat {
    Repeat::fixed_rate(loom_tests::LATER).missed_ticks(MissedTicks::Burst)
}

/// Cancel vs putting the task back: one worker; the task's first run is due
/// at once, the second at `LATER`. A canceller thread cancels it while the
/// first run is pending, starting, running or put back. Only then does the
/// main thread move the clock to the second tick, so the second run could
/// only be started after the cancel returned true, and must never happen. A
/// run started before the cancel may still be running after it (its
/// stand-in is what the cancel removed), so the model counts runs, not
/// what happens after the cancel.
fn cancel_vs_reinsert(how: Cancel, fault: Option<&'static str>) {
    loom_tests::model("cancel_vs_reinsert", move || {
        let clock = ManualClock::new();
        let pool = Arc::new(loom_tests::pool::<u32>(1, &clock, fault));
        let t0 = clock.now();
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        let handle = pool
            .schedule_repeating(7, t0, every_later(), move || {
                counted.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        let (cancelled, outcome) = match how {
            Cancel::ByKey => {
                let canceller = pool.clone();
                let canceller = loom::thread::spawn(move || canceller.cancel(&7));
                let outcome = handle.wait();
                (canceller.join().unwrap(), outcome)
            }
            Cancel::ByHandle => {
                let canceller = loom::thread::spawn(move || (handle.cancel(), handle));
                let (cancelled, handle) = canceller.join().unwrap();
                (cancelled, handle.wait())
            }
        };
        assert_eq!(
            cancelled,
            outcome == Outcome::Cancelled,
            "cancel returned {cancelled} and the final outcome is {outcome:?}"
        );
        // The second tick, and a keyless task just after it. With one
        // worker, a task put back at the second tick is claimed no later
        // than this one and runs before it: once it has run, the worker has
        // nothing left to do.
        let gap = Duration::from_millis(1);
        let after = pool.submit(t0 + loom_tests::LATER + gap, || ()).unwrap();
        clock.advance(loom_tests::LATER + gap);
        assert_eq!(after.wait(), Outcome::Completed(()));
        let runs = runs.load(Ordering::SeqCst);
        if cancelled {
            assert!(
                runs <= 1,
                "the task ran again after cancel returned true ({runs} runs)"
            );
            assert_eq!(pool.len(), 0, "the cancelled task is back in the pool");
        }
        pool.shutdown();
    });
}

#[test]
fn cancel_by_key_during_a_run_stops_future_runs() {
    cancel_vs_reinsert(Cancel::ByKey, None);
}

#[test]
fn cancel_by_handle_during_a_run_stops_future_runs() {
    cancel_vs_reinsert(Cancel::ByHandle, None);
}

/// The worker puts the task back although the cancel removed its stand-in:
/// the task runs at the second tick.
#[test]
#[should_panic(expected = "the task ran again after cancel returned true (2 runs)")]
fn cancel_by_key_reinsert_without_stand_in_check_is_caught() {
    cancel_vs_reinsert(Cancel::ByKey, Some("reinsert-without-stand-in-check"));
}

/// The same fault against the handle's cancel, which removes the entry
/// stamped as the task's current one.
#[test]
#[should_panic(expected = "the task ran again after cancel returned true (2 runs)")]
fn cancel_by_handle_reinsert_without_stand_in_check_is_caught() {
    cancel_vs_reinsert(Cancel::ByHandle, Some("reinsert-without-stand-in-check"));
}

/// Replace vs putting the task back: one worker; the periodic task's first
/// run is due at once. A second thread schedules a one-shot task under the
/// same key, due at once, while the periodic task is pending, claimed,
/// running or put back. Either way the key holds the periodic task or its
/// stand-in, so the periodic task ends `Replaced`, and the new task runs.
/// When the new task has run, the periodic one is not in the pool: the
/// worker compared the entry under the key with its stand-in's stamp, not
/// just looked for the key.
fn replace_vs_reinsert(fault: Option<&'static str>) {
    loom_tests::model("replace_vs_reinsert", move || {
        let clock = ManualClock::new();
        let pool = Arc::new(loom_tests::pool::<u32>(1, &clock, fault));
        let periodic = pool
            .schedule_repeating(7, clock.now(), every_later(), || {})
            .unwrap();
        let replacer = pool.clone();
        let replacer =
            loom::thread::spawn(move || replacer.schedule(7, Duration::ZERO, || "new").unwrap());
        assert_eq!(periodic.wait(), Outcome::Replaced);
        let new = replacer.join().unwrap();
        assert_eq!(new.wait(), Outcome::Completed("new"));
        assert_eq!(
            pool.len(),
            0,
            "the replaced periodic task is back in the pool"
        );
        pool.shutdown();
    });
}

#[test]
fn replacing_a_running_periodic_task_stops_it() {
    replace_vs_reinsert(None);
}

/// The worker puts the periodic task back over its replacement: the new
/// task is dropped unrun (its outcome slot reports it lost) instead of
/// running.
#[test]
#[should_panic(expected = "the task was dropped unrun")]
fn replace_reinsert_without_stand_in_check_is_caught() {
    replace_vs_reinsert(Some("reinsert-without-stand-in-check"));
}

/// A task put back already due runs: two workers; a far task due at
/// `3 * LATER` and the periodic task due at once. Its first run moves the
/// clock to `LATER` (the second tick) before it returns, so the leader, woken
/// by that move, still sees only the far task and the stand-in and sleeps
/// again. The task put back at `LATER` is then the earliest and already due;
/// the worker that put it back starts it (or the leader, notified).
fn reinsert_reaches_leader(fault: Option<&'static str>) {
    loom_tests::model("reinsert_reaches_leader", move || {
        let clock = ManualClock::new();
        let pool = loom_tests::pool::<u32>(2, &clock, fault);
        let t0 = clock.now();
        let far = pool
            .schedule(2, t0 + 3 * loom_tests::LATER, || "far")
            .unwrap();
        let runs = Arc::new(loom_tests::Count::new());
        let counted = runs.clone();
        let mover = clock.clone();
        let handle = pool
            .schedule_repeating(1, t0, every_later(), move || {
                if counted.bump() == 1 {
                    mover.advance(loom_tests::LATER);
                }
            })
            .unwrap();
        runs.wait_for(2);
        // The far task is pending; the periodic one too, or its stand-in.
        let keys = pool.shutdown_now();
        assert!(keys.contains(&2), "shutdown_now returned {keys:?}");
        assert_eq!(far.wait(), Outcome::Shutdown);
        assert_eq!(handle.wait(), Outcome::Shutdown);
    });
}

#[test]
fn reinserted_earliest_task_wakes_the_leader() {
    reinsert_reaches_leader(None);
}
