//! Tests for driving timed code deterministically with the manual clock:
//! settle after an advance, step through every due time on the way, and the
//! bounds that keep a test from hanging. No sleeps.

mod common;
use common::*;

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use timerpool::{Clock, Error, ManualClock, Repeat, Steps, TimerPool};

const SEC: Duration = Duration::from_secs(1);

#[test]
fn settle_after_an_advance_waits_for_what_fell_due() {
    let (clock, pool) = manual_pool::<u64>(2);
    let ran = Arc::new(AtomicU32::new(0));
    for k in 0..50 {
        let r = ran.clone();
        pool.schedule(k, SEC * (k as u32 % 5 + 1), move || {
            r.fetch_add(1, SeqCst);
        })
        .unwrap();
    }
    clock.advance(SEC * 3);
    pool.settle(BOUND).unwrap();
    assert_eq!(ran.load(SeqCst), 30, "everything due by 3 s, nothing later");
    assert_eq!(pool.len(), 20);
}

#[test]
fn a_ten_second_step_shows_a_one_second_task_all_ten_ticks() {
    let (clock, pool) = manual_pool::<&str>(1);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (s, c, t0) = (seen.clone(), clock.clone(), clock.now());
    pool.schedule_repeating("tick", SEC, Repeat::fixed_rate(SEC), move || {
        s.lock().unwrap().push(c.now() - t0);
    })
    .unwrap();
    let stops = pool.advance(SEC * 10).unwrap();
    assert_eq!(stops, 10);
    let expected: Vec<_> = (1..=10).map(|k| SEC * k).collect();
    assert_eq!(*seen.lock().unwrap(), expected, "each tick at its own time");
}

#[test]
fn work_a_callback_schedules_inside_the_step_runs_at_its_time() {
    let (clock, pool) = manual_pool::<u64>(2);
    let pool = Arc::new(pool);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (weak, s, c, t0): (Weak<TimerPool<u64>>, _, _, Instant) = (
        Arc::downgrade(&pool),
        seen.clone(),
        clock.clone(),
        clock.now(),
    );
    pool.schedule(1, SEC, move || {
        s.lock().unwrap().push(("first", c.now() - t0));
        let (s, c) = (s.clone(), c.clone());
        let pool = weak.upgrade().unwrap();
        pool.schedule(2, SEC, move || {
            s.lock().unwrap().push(("follow-up", c.now() - t0))
        })
        .unwrap();
    })
    .unwrap();
    pool.advance(SEC * 5).unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![("first", SEC), ("follow-up", SEC * 2)]
    );
}

#[test]
fn settle_times_out_on_a_task_that_never_returns() {
    let (_clock, pool) = manual_pool::<u64>(1);
    let (blocker, release) = block_a_worker(&pool, 7, Duration::ZERO);
    let e = pool.settle(Duration::from_millis(50)).unwrap_err();
    assert_eq!(
        e,
        Error::NotSettled {
            running: 1,
            pending: 0,
            running_keys: Vec::new(),
        }
    );
    assert_eq!(pool.running_keys(), vec![7], "the typed accessor names it");
    release.send(()).unwrap();
    pool.settle(BOUND).unwrap();
    assert_eq!(done(blocker), timerpool::Outcome::Completed(()));
}

#[test]
fn a_task_that_keeps_rescheduling_itself_just_ahead_meets_the_step_bound() {
    let clock = ManualClock::new();
    let pool = TimerPool::<&str>::builder()
        .workers(1)
        .clock(clock.clone())
        .build()
        .unwrap();
    let every_ns = Repeat::fixed_delay(Duration::from_nanos(1));
    pool.schedule_repeating("busy", Duration::ZERO, every_ns, || {})
        .unwrap();
    let steps = Steps {
        by: SEC,
        max: 50,
        timeout: BOUND,
    };
    let e = pool.advance(steps).unwrap_err();
    assert_eq!(e, Error::StepBound { steps: 50 });
}

#[test]
fn settle_timing_out_on_a_blocked_task_names_its_key() {
    let clock = ManualClock::new();
    let pool = TimerPool::<u64>::builder()
        .workers(2)
        .clock(clock.clone())
        .debug_keys(true)
        .build()
        .unwrap();
    let (blocker, release) = block_a_worker(&pool, 7, Duration::ZERO);
    let other = pool.schedule(8, SEC, || ()).unwrap();
    clock.advance(SEC);
    assert_eq!(done(other), timerpool::Outcome::Completed(()));
    eventually("8's worker let its key go", || !pool.is_running(&8));
    let e = pool.settle(Duration::from_millis(50)).unwrap_err();
    let Error::NotSettled {
        running,
        pending,
        running_keys,
    } = &e
    else {
        panic!("{e:?}")
    };
    assert_eq!((*running, *pending), (1, 0), "8 ran on the other worker");
    assert_eq!(running_keys, &["7"]);
    assert_eq!(
        e.to_string(),
        "not settled within the timeout: 1 tasks still running (7), 0 pending; \
         a task that blocks or never returns keeps the pool from settling"
    );
    assert!(pool.is_running(&7));
    release.send(()).unwrap();
    pool.settle(BOUND).unwrap();
    assert!(pool.running_keys().is_empty() && !pool.is_running(&7));
    assert_eq!(done(blocker), timerpool::Outcome::Completed(()));
}

#[test]
fn a_task_due_a_moment_ahead_waits_for_the_clock_to_reach_it() {
    // Due within the millisecond in which a task may join the ready lane
    // without a clock read of its own: it still starts only at its time.
    let (clock, pool) = manual_pool::<u64>(2);
    let ran = Arc::new(AtomicU32::new(0));
    for k in 0..3 {
        let r = ran.clone();
        let due = clock.now() + Duration::from_micros(200 * (k + 1));
        pool.schedule(k, due, move || {
            r.fetch_add(1, SeqCst);
        })
        .unwrap();
    }
    pool.settle(BOUND).unwrap();
    assert_eq!(ran.load(SeqCst), 0, "nothing due yet");
    clock.advance(Duration::from_micros(399));
    pool.settle(BOUND).unwrap();
    assert_eq!(ran.load(SeqCst), 1, "only the one due at 200 µs");
    clock.advance(Duration::from_micros(201));
    pool.settle(BOUND).unwrap();
    assert_eq!(ran.load(SeqCst), 3);
}
