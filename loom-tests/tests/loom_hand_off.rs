#![cfg(loom)]
//! Model 6, leadership hand-off: due work is never left with an idle worker
//! and no leader.
//!
//! One task is due at once; the main thread waits for it, then advances the
//! manual clock so that a second task falls due. The leader that found the
//! first task due passed the token on before starting it, so the second
//! needs the next leadership, and the clock may move while the token is
//! still in the channel, with no worker in the leader's wait to be notified.
//! Some worker always takes the lead next, and it reads the clock and the
//! head before it decides to wait.

use std::time::Duration;
use timerpool::{ManualClock, Outcome};

fn hand_off(workers: usize, fault: Option<&'static str>) {
    loom_tests::model("hand_off", move || {
        let clock = ManualClock::new();
        let pool = loom_tests::pool::<u32>(workers, &clock, fault);
        let first = pool.submit(Duration::ZERO, || 1).unwrap();
        let second = pool.submit(loom_tests::LATER, || 2).unwrap();
        assert_eq!(first.wait(), Outcome::Completed(1));
        clock.advance(loom_tests::LATER);
        assert_eq!(second.wait(), Outcome::Completed(2));
        pool.shutdown();
    });
}

#[test]
fn leadership_passes_on_with_two_workers() {
    hand_off(2, None);
}

#[test]
fn leadership_comes_back_to_a_single_worker() {
    hand_off(1, None);
}

/// The leader starts the first task but drops the token: nobody leads, the
/// second task is never started, and both workers sit idle in `recv`.
#[test]
#[should_panic(
    expected = "deadlock: thread 0 (main) in src/pool/outcome.rs, thread 1 in src/pool/handoff.rs, thread 2 in src/pool/handoff.rs"
)]
fn dropped_lead_token_is_caught() {
    hand_off(2, Some("drop-lead"));
}

/// The leader compares against the clock it read when it took the lead:
/// the clock moves, the leader wakes, and still sees the second task as not
/// due.
#[test]
#[should_panic(expected = "deadlock: thread 0 (main) in src/pool/outcome.rs")]
fn stale_clock_after_wake_is_caught() {
    hand_off(2, Some("stale-clock"));
}

/// The moved clock notifies without the pool lock: the notify lands between
/// the new leader's clock read and its wait, and nobody wakes it again.
#[test]
#[should_panic(expected = "deadlock: thread 0 (main) in src/pool/outcome.rs")]
fn wake_without_lock_is_caught() {
    hand_off(2, Some("wake-without-lock"));
}
