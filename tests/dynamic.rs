//! Periodic tasks whose closure picks its next delay (`schedule_dynamic`),
//! driven by the manual clock: the picked delays, stopping, falling back to
//! the `Repeat` after a panic, and the same cancel, replace and shutdown rules
//! as any periodic task. No sleeps.

mod common;
use common::*;

use std::sync::{Arc, Mutex};
use std::time::Duration;
use timerpool::{Clock, Next, OnPanic, Outcome, Repeat};

const SEC: Duration = Duration::from_secs(1);

/// Offsets from the start at which a task ran, pushed by its closure.
type Seen = Arc<Mutex<Vec<Duration>>>;

#[test]
fn each_run_happens_after_the_delay_the_previous_run_picked() {
    let (clock, pool) = manual_pool::<&str>(1);
    let seen: Seen = Arc::default();
    let (s, c, t0) = (seen.clone(), clock.clone(), clock.now());
    let mut picks = vec![Next::Stop, Next::After(SEC * 4), Next::After(SEC * 2)];
    let task = pool
        .schedule_dynamic("backoff", SEC, Repeat::fixed_delay(SEC * 100), move || {
            s.lock().unwrap().push(c.now() - t0);
            picks.pop().unwrap()
        })
        .unwrap();
    pool.advance(SEC * 20).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![SEC, SEC * 3, SEC * 7]);
    assert_eq!(task.runs(), 3);
    assert_eq!(task.wait(), Outcome::Completed(()), "Stop completes it");
    assert!(pool.is_empty(), "a stopped task leaves nothing behind");
}

#[test]
fn on_schedule_follows_the_repeat() {
    let (clock, pool) = manual_pool::<&str>(1);
    let seen: Seen = Arc::default();
    let (s, c, t0) = (seen.clone(), clock.clone(), clock.now());
    let task = pool
        .schedule_dynamic("rate", SEC, Repeat::fixed_rate(SEC * 3), move || {
            s.lock().unwrap().push(c.now() - t0);
            Next::OnSchedule
        })
        .unwrap();
    pool.advance(SEC * 10).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![SEC, SEC * 4, SEC * 7, SEC * 10]);
    assert!(task.cancel());
    assert_eq!(task.wait(), Outcome::Cancelled);
}

#[test]
fn a_panic_under_continue_runs_again_as_the_repeat_says() {
    let (clock, pool) = manual_pool::<&str>(1);
    let seen: Seen = Arc::default();
    let (s, c, t0) = (seen.clone(), clock.clone(), clock.now());
    let repeat = Repeat::fixed_delay(SEC * 5).on_panic(OnPanic::Continue);
    let task = pool
        .schedule_dynamic("flaky", SEC, repeat, move || {
            let tries = {
                let mut s = s.lock().unwrap();
                s.push(c.now() - t0);
                s.len()
            };
            match tries {
                1 => panic!("first try fails"),
                2 => Next::After(SEC),
                _ => Next::Stop,
            }
        })
        .unwrap();
    pool.advance(SEC * 20).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![SEC, SEC * 6, SEC * 7]);
    assert_eq!((task.runs(), task.panics()), (2, 1));
    assert_eq!(task.wait(), Outcome::Completed(()));
}

#[test]
fn a_panic_under_stop_ends_it_with_the_panic() {
    let (_clock, pool) = manual_pool::<&str>(1);
    let task = pool
        .schedule_dynamic("fails", SEC, Repeat::fixed_delay(SEC), || -> Next {
            panic!("boom")
        })
        .unwrap();
    pool.advance(SEC * 5).unwrap();
    assert_eq!(task.wait(), Outcome::Panicked("boom".into()));
}

#[test]
fn a_delay_past_the_clocks_range_ends_it_as_expired() {
    let (_clock, pool) = manual_pool::<&str>(1);
    let task = pool
        .schedule_dynamic("far", SEC, Repeat::fixed_delay(SEC), || {
            Next::After(Duration::MAX)
        })
        .unwrap();
    pool.advance(SEC * 2).unwrap();
    assert_eq!(task.runs(), 1);
    assert_eq!(task.wait(), Outcome::Expired);
    assert!(pool.is_empty());
}

#[test]
fn a_zero_delay_runs_again_at_once_and_the_step_bound_holds() {
    let (clock, pool) = manual_pool::<&str>(1);
    let seen: Seen = Arc::default();
    let (s, c, t0) = (seen.clone(), clock.clone(), clock.now());
    let task = pool
        .schedule_dynamic("again", SEC, Repeat::fixed_delay(SEC), move || {
            let mut s = s.lock().unwrap();
            s.push(c.now() - t0);
            if s.len() < 5 {
                Next::After(Duration::ZERO)
            } else {
                Next::Stop
            }
        })
        .unwrap();
    pool.advance(SEC * 2).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![SEC; 5], "all at 1 s");
    assert_eq!(task.wait(), Outcome::Completed(()));
}

#[test]
fn replacing_the_key_stops_it_as_replaced() {
    let (clock, pool) = manual_pool::<&str>(1);
    let task = pool
        .schedule_dynamic("k", SEC, Repeat::fixed_delay(SEC), || Next::After(SEC))
        .unwrap();
    pool.advance(SEC * 2).unwrap();
    let one_shot = pool.schedule("k", SEC, || 7).unwrap();
    assert_eq!(task.wait(), Outcome::Replaced);
    clock.advance(SEC);
    assert_eq!(one_shot.wait(), Outcome::Completed(7));
}

#[test]
fn shutdown_ends_a_pending_dynamic_task_as_shut_down() {
    let (_clock, pool) = manual_pool::<&str>(1);
    let task = pool
        .submit_dynamic(SEC, Repeat::fixed_delay(SEC), || Next::After(SEC * 60))
        .unwrap();
    pool.advance(SEC * 2).unwrap();
    assert_eq!(task.runs(), 1);
    pool.shutdown();
    assert_eq!(task.wait(), Outcome::Shutdown);
}

#[test]
fn a_bad_repeat_is_refused_with_an_error() {
    let (_clock, pool) = manual_pool::<&str>(1);
    let err = pool
        .schedule_dynamic("z", SEC, Repeat::fixed_delay(Duration::ZERO), || Next::Stop)
        .unwrap_err();
    assert_eq!(err, timerpool::Error::ZeroPeriod);
    assert!(pool.is_empty());
}
