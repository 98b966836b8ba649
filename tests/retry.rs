//! Tests for retry policies: a task that panics runs again after its
//! backoff under the same key, with the manual clock and no sleeps
//! (`retry_errors.rs` has the tasks that return `Err`).

mod common;
use common::*;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use timerpool::{Clock, Error, ManualClock, Outcome, Retry, TimerPool};

const SEC: Duration = Duration::from_secs(1);

fn quiet_manual_pool(workers: usize) -> (ManualClock, TimerPool<&'static str>) {
    let clock = ManualClock::new();
    let pool = TimerPool::builder()
        .workers(workers)
        .clock(clock.clone())
        .quiet_panics(true)
        .build()
        .unwrap();
    (clock, pool)
}

/// A job that records the time of each attempt and panics until attempt
/// `succeed_on` (never if 0), returning the attempt number then.
fn flaky(
    clock: &ManualClock,
    succeed_on: u32,
) -> (
    Arc<Mutex<Vec<Duration>>>,
    impl FnMut() -> Result<u32, Infallible> + Send + 'static,
) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (s, c, t0) = (seen.clone(), clock.clone(), clock.now());
    let mut n = 0;
    let job = move || {
        n += 1;
        s.lock().unwrap().push(c.now() - t0);
        if n != succeed_on {
            panic!("attempt {n} failed");
        }
        Ok(n)
    };
    (seen, job)
}

#[test]
fn a_fixed_backoff_retries_until_an_attempt_returns() {
    let (clock, pool) = quiet_manual_pool(1);
    let (seen, job) = flaky(&clock, 3);
    let h = pool
        .schedule_retrying("job", Duration::ZERO, Retry::fixed(5, SEC), job)
        .unwrap();
    pool.advance(SEC * 10).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![Duration::ZERO, SEC, SEC * 2]);
    let done = h.wait_timeout(BOUND).unwrap();
    assert_eq!(done.outcome, Outcome::Completed(Ok(3)));
    assert_eq!(done.attempts, 3);
    assert_eq!(done.last_panic.as_deref(), Some("attempt 2 failed"));
}

#[test]
fn an_exponential_backoff_doubles_up_to_its_cap_and_gives_up_with_the_last_panic() {
    let (clock, pool) = quiet_manual_pool(1);
    let (seen, job) = flaky(&clock, 0);
    let policy = Retry::exponential(5, SEC, SEC * 3);
    let h = pool
        .schedule_retrying("job", Duration::ZERO, policy, job)
        .unwrap();
    pool.advance(SEC * 60).unwrap();
    let secs: Vec<u64> = seen.lock().unwrap().iter().map(|d| d.as_secs()).collect();
    assert_eq!(
        secs,
        vec![0, 1, 3, 6, 9],
        "delays 1, 2, then 3 (the cap), 3"
    );
    let done = h.wait_timeout(BOUND).unwrap();
    assert_eq!(done.outcome, Outcome::Panicked("attempt 5 failed".into()));
    assert_eq!((done.attempts, pool.len()), (5, 0));
}

#[test]
fn jitter_takes_at_most_its_fraction_off_and_a_seed_repeats_it() {
    let run = |seed| {
        let (clock, pool) = quiet_manual_pool(1);
        let (seen, job) = flaky(&clock, 0);
        let policy = Retry::fixed(6, SEC * 10).jitter(0.5).jitter_seed(seed);
        let h = pool
            .schedule_retrying("job", Duration::ZERO, policy, job)
            .unwrap();
        pool.advance(SEC * 100).unwrap();
        assert_eq!(h.wait_timeout(BOUND).unwrap().attempts, 6);
        let times = seen.lock().unwrap().clone();
        times.windows(2).map(|w| w[1] - w[0]).collect::<Vec<_>>()
    };
    let gaps = run(7);
    assert_eq!(gaps.len(), 5);
    assert!(
        gaps.iter().all(|g| (SEC * 5..=SEC * 10).contains(g)),
        "{gaps:?}"
    );
    assert!(gaps.iter().any(|g| *g != gaps[0]), "jittered: {gaps:?}");
    assert_eq!(run(7), gaps, "the same seed, the same delays");
}

#[test]
fn a_replace_or_a_cancel_of_the_key_between_attempts_wins() {
    let (clock, pool) = quiet_manual_pool(1);
    let (_, job) = flaky(&clock, 0);
    let replaced = pool
        .schedule_retrying("a", Duration::ZERO, Retry::fixed(5, SEC), job)
        .unwrap();
    let (_, job) = flaky(&clock, 0);
    let cancelled = pool
        .schedule_retrying("b", Duration::ZERO, Retry::fixed(5, SEC), job)
        .unwrap();
    pool.settle(BOUND).unwrap();
    assert_eq!((replaced.attempts(), cancelled.attempts()), (1, 1));
    assert!(
        pool.is_pending(&"a") && pool.is_pending(&"b"),
        "waiting to retry"
    );
    let next = pool.schedule("a", SEC, || "instead").unwrap();
    assert!(pool.cancel(&"b"));
    pool.advance(SEC * 10).unwrap();
    let (r, c) = (
        replaced.wait_timeout(BOUND).unwrap(),
        cancelled.wait_timeout(BOUND).unwrap(),
    );
    assert_eq!((r.outcome, r.attempts), (Outcome::Replaced, 1));
    assert_eq!((c.outcome, c.attempts), (Outcome::Cancelled, 1));
    assert_eq!(c.last_panic.as_deref(), Some("attempt 1 failed"));
    assert_eq!(done(next), Outcome::Completed("instead"));
}

#[test]
fn a_shutdown_stops_a_task_waiting_to_retry_by_default() {
    let (clock, pool) = quiet_manual_pool(1);
    let (_, job) = flaky(&clock, 0);
    let h = pool
        .schedule_retrying("job", Duration::ZERO, Retry::fixed(5, SEC), job)
        .unwrap();
    pool.settle(BOUND).unwrap();
    pool.shutdown();
    let done = h.wait_timeout(BOUND).unwrap();
    assert_eq!((done.outcome, done.attempts), (Outcome::Shutdown, 1));
}

#[test]
fn a_bad_retry_policy_is_an_error_value() {
    let (_clock, pool) = quiet_manual_pool(1);
    let ok = || Ok::<(), Infallible>(());
    let zero = pool.schedule_retrying("job", Duration::ZERO, Retry::fixed(0, SEC), ok);
    assert!(matches!(zero.unwrap_err(), Error::InvalidRetry(_)));
    for jitter in [-0.1, 1.5, f64::NAN] {
        let policy = Retry::fixed(3, SEC).jitter(jitter);
        let bad = pool.schedule_retrying("job", Duration::ZERO, policy, ok);
        assert!(
            matches!(bad.unwrap_err(), Error::InvalidRetry(_)),
            "{jitter}"
        );
    }
    assert_eq!(pool.len(), 0);
}

#[test]
fn a_panic_then_an_error_ends_with_the_error_and_the_panic_kept() {
    let (_clock, pool) = quiet_manual_pool(1);
    let mut n = 0;
    let h = pool
        .schedule_retrying("job", Duration::ZERO, Retry::fixed(2, SEC), move || {
            n += 1;
            match n {
                1 => panic!("attempt 1 panicked"),
                _ => Err::<(), _>(format!("attempt {n} failed")),
            }
        })
        .unwrap();
    pool.advance(SEC * 5).unwrap();
    let done = h.wait_timeout(BOUND).unwrap();
    assert_eq!(
        (done.outcome, done.attempts),
        (Outcome::Completed(Err("attempt 2 failed".to_string())), 2)
    );
    assert_eq!(done.last_panic.as_deref(), Some("attempt 1 panicked"));
}

#[test]
fn a_retry_predicate_that_panics_ends_the_task_as_panicked() {
    let (_clock, pool) = quiet_manual_pool(1);
    let policy = Retry::fixed(3, SEC).retry_if(|_: &u16| panic!("predicate broke"));
    let h = pool
        .schedule_retrying("job", Duration::ZERO, policy, || Err::<(), u16>(503))
        .unwrap();
    let done = h.wait_timeout(BOUND).unwrap();
    assert_eq!(
        (done.outcome, done.attempts),
        (Outcome::Panicked("predicate broke".to_string()), 1)
    );
    assert!(!pool.is_pending(&"job"));
}
