//! Tests for manual time in one call: `TimerPool::advance` moves the pool's
//! own `ManualClock` and runs everything that comes due on the way,
//! follow-ups scheduled inside the span included; a `Steps` bounds it;
//! each error says which limit was hit and why.

mod common;
use common::*;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use timerpool::{Error, ManualClock, Precision, Repeat, Steps, TaskContext, TimerPool};

const SEC: Duration = Duration::from_secs(1);

/// A pool on a fresh manual clock, shared so its tasks can schedule on it.
fn manual(workers: usize) -> Arc<TimerPool<u32>> {
    let pool = TimerPool::builder()
        .workers(workers)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    Arc::new(pool)
}

/// A task that records its number and the pool's time, then schedules the
/// next one `gap` later.
fn chain(
    pool: Arc<TimerPool<u32>>,
    log: Arc<Mutex<Vec<(u32, Instant)>>>,
    n: u32,
    gap: Duration,
) -> impl FnOnce() + Send + 'static {
    move || {
        log.lock().unwrap().push((n, pool.now()));
        let next = chain(pool.clone(), log.clone(), n + 1, gap);
        pool.schedule_detached(n + 1, gap, next).unwrap();
    }
}

/// What `log` recorded, each run's time as an offset from `t0`.
fn since(log: &Mutex<Vec<(u32, Instant)>>, t0: Instant) -> Vec<(u32, Duration)> {
    let log = log.lock().unwrap();
    log.iter().map(|&(n, at)| (n, at - t0)).collect()
}

#[test]
fn one_advance_runs_a_chain_of_follow_ups_in_order_at_their_times() {
    let pool = manual(2);
    let log = Arc::new(Mutex::new(Vec::new()));
    let t0 = pool.now();
    pool.schedule_detached(1, SEC, chain(pool.clone(), log.clone(), 1, SEC))
        .unwrap();
    let stops = pool.advance(SEC * 5).unwrap();
    assert_eq!(stops, 5);
    let seen = since(&log, t0);
    let expected: Vec<_> = (1..=5).map(|n| (n, SEC * n)).collect();
    assert_eq!(seen, expected, "five runs, in order, each at its own time");
    // The sixth is due at 6 s: pending, not run.
    assert_eq!(pool.now() - t0, SEC * 5);
    assert_eq!(pool.due_of(&6), Some(t0 + SEC * 6));
    assert_eq!(pool.advance(SEC).unwrap(), 1);
    assert_eq!(log.lock().unwrap().len(), 6);
    pool.shutdown_now();
}

#[test]
fn advance_lands_on_its_target_and_runs_what_is_due_there() {
    let pool = manual(1);
    let t0 = pool.now();
    let at_target = pool
        .schedule(1, SEC * 3, || TaskContext::current().unwrap().due())
        .unwrap();
    let after = pool
        .schedule(2, SEC * 3 + Duration::from_nanos(1), || ())
        .unwrap();
    assert_eq!(pool.advance(SEC * 3).unwrap(), 1);
    assert_eq!(pool.now() - t0, SEC * 3);
    assert_eq!(done(at_target), timerpool::Outcome::Completed(t0 + SEC * 3));
    assert!(!after.is_finished() && pool.is_pending(&2));
    // Nothing due on the way: it still moves, and stops nowhere.
    assert_eq!(pool.advance(Duration::ZERO).unwrap(), 0);
    assert_eq!(pool.advance(SEC * 10).unwrap(), 1);
    assert_eq!(pool.now() - t0, SEC * 13);
}

#[test]
fn advance_on_a_pool_with_the_real_clock_is_an_error_not_a_panic() {
    let pool = TimerPool::<u32>::builder().workers(1).build().unwrap();
    let e = pool.advance(SEC).unwrap_err();
    assert_eq!(e, Error::NotManualClock);
    assert!(e.to_string().contains("ManualClock"), "{e}");
    let steps = Steps {
        max: 1,
        ..Steps::from(SEC)
    };
    let bounded = pool.advance(steps).unwrap_err();
    assert_eq!(bounded, Error::NotManualClock);
}

#[test]
fn a_target_past_the_clock_range_is_an_error() {
    let pool = manual(1);
    assert_eq!(
        pool.advance(Duration::MAX).unwrap_err(),
        Error::TimeOutOfRange
    );
}

#[test]
fn the_step_bound_says_tasks_keep_scheduling_just_ahead() {
    let pool = manual(1);
    let every_ms = Repeat::fixed_rate(Duration::from_millis(1));
    pool.schedule_repeating(1, Duration::from_millis(1), every_ms, || {})
        .unwrap();
    let t0 = pool.now();
    let steps = Steps {
        by: SEC,
        max: 20,
        timeout: BOUND,
    };
    let e = pool.advance(steps).unwrap_err();
    assert_eq!(e, Error::StepBound { steps: 20 });
    let msg = e.to_string();
    assert!(msg.contains("20") && msg.contains("Steps::max"), "{msg}");
    // The clock stayed at the last stop: 20 ticks in.
    assert_eq!(pool.now() - t0, Duration::from_millis(20));
}

#[test]
fn a_task_that_never_returns_ends_an_advance_at_its_timeout() {
    let clock = ManualClock::new();
    let pool = TimerPool::<u64>::builder()
        .workers(2)
        .clock(clock)
        .debug_keys(true)
        .build()
        .unwrap();
    let (blocker, release) = block_a_worker(&pool, 7, Duration::ZERO);
    let steps = Steps {
        by: SEC,
        max: 10,
        timeout: Duration::from_millis(50),
    };
    let e = pool.advance(steps).unwrap_err();
    assert_eq!(
        e,
        Error::NotSettled {
            running: 1,
            pending: 0,
            running_keys: vec!["7".to_string()],
        }
    );
    assert!(e.to_string().contains("never returns"), "{e}");
    release.send(()).unwrap();
    assert_eq!(pool.advance(SEC).unwrap(), 0);
    assert_eq!(done(blocker), timerpool::Outcome::Completed(()));
}

#[test]
fn work_due_at_once_again_and_again_never_settles_and_meets_the_timeout() {
    let pool = manual(1);
    fn again(pool: Arc<TimerPool<u32>>) -> impl FnOnce() + Send + 'static {
        move || {
            let p = pool.clone();
            // Refused once the pool shuts down, which ends the loop.
            let _ = pool.schedule_detached(1, Duration::ZERO, again(p));
        }
    }
    pool.schedule_detached(1, SEC, again(pool.clone())).unwrap();
    let steps = Steps {
        by: SEC,
        max: 1_000,
        timeout: Duration::from_millis(100),
    };
    let e = pool.advance(steps).unwrap_err();
    assert!(matches!(e, Error::NotSettled { .. }), "{e:?}");
    pool.shutdown_now();
}

#[test]
fn a_slack_never_delays_runs_on_a_manual_clock() {
    // The slack is about real timed waits: on a clock moved by hand each
    // task runs at its own time, as in every mode.
    let pool = Arc::new(
        TimerPool::builder()
            .workers(2)
            .clock(ManualClock::new())
            .precision(Precision::Slack(SEC))
            .build()
            .unwrap(),
    );
    let log = Arc::new(Mutex::new(Vec::new()));
    let t0 = pool.now();
    for n in 1..=3u32 {
        let (p, l) = (pool.clone(), log.clone());
        pool.schedule_detached(n, SEC * 10 * n, move || {
            l.lock().unwrap().push((n, p.now()))
        })
        .unwrap();
    }
    assert_eq!(pool.advance(SEC * 15).unwrap(), 1);
    assert_eq!(pool.advance(SEC * 20).unwrap(), 2);
    let seen = since(&log, t0);
    assert_eq!(seen, vec![(1, SEC * 10), (2, SEC * 20), (3, SEC * 30)]);
}
