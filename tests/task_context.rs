//! Tests for the task context: a task reads its own key, due time, start,
//! attempt and run count from inside its closure (`TaskContext::current`),
//! with no listener, and nothing is copied for a task that does not ask.

mod common;
use common::*;

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use timerpool::{
    ManualClock, Next, OnPanic, Outcome, Repeat, Retry, Scheduler, TaskContext, TimerPool,
};

const SEC: Duration = Duration::from_secs(1);

/// What a task saw of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    key: Option<String>,
    due: Instant,
    started: Instant,
    attempt: u32,
    run_count: Option<u64>,
}

/// The context of the current run, as `Seen`.
fn seen() -> Seen {
    let ctx = TaskContext::current().expect("inside a run");
    Seen {
        key: ctx.key::<String>(),
        due: ctx.due(),
        started: ctx.started(),
        attempt: ctx.attempt(),
        run_count: ctx.run_count(),
    }
}

fn manual(workers: usize) -> (ManualClock, TimerPool<String>) {
    let clock = ManualClock::new();
    let pool = TimerPool::builder()
        .workers(workers)
        .clock(clock.clone())
        .quiet_panics(true)
        .build()
        .unwrap();
    (clock, pool)
}

#[test]
fn a_task_reads_its_own_key_due_time_start_and_attempt() {
    let (clock, pool) = manual(2);
    let t0 = pool.now();
    let h = pool.schedule("session-7".into(), SEC * 5, seen).unwrap();
    let detached = Arc::new(Mutex::new(None));
    let d = detached.clone();
    pool.schedule_detached("session-8".into(), SEC * 5, move || {
        *d.lock().unwrap() = Some(seen());
    })
    .unwrap();
    // The clock jumps past the due time: the start is 2 s late.
    clock.advance(SEC * 7);
    pool.settle(BOUND).unwrap();
    let expected = |key: &str| Seen {
        key: Some(key.to_string()),
        due: t0 + SEC * 5,
        started: t0 + SEC * 7,
        attempt: 1,
        run_count: None,
    };
    assert_eq!(done(h), Outcome::Completed(expected("session-7")));
    assert_eq!(
        detached.lock().unwrap().clone(),
        Some(expected("session-8"))
    );
}

#[test]
fn a_rescheduled_task_reads_its_new_due_time_not_the_captured_one() {
    let (clock, pool) = manual(1);
    let captured = pool.now() + SEC * 30;
    let h = pool
        .schedule("lease".into(), captured, move || {
            let ctx = TaskContext::current().unwrap();
            (ctx.due(), ctx.lateness())
        })
        .unwrap();
    assert!(pool.reschedule("lease", SEC * 60).unwrap());
    let renewed = pool.due_of("lease").unwrap();
    assert_ne!(renewed, captured);
    clock.advance(SEC * 61);
    assert_eq!(done(h), Outcome::Completed((renewed, SEC)));
}

#[test]
fn a_retried_task_sees_attempts_one_two_three() {
    let (_clock, pool) = manual(1);
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let a = attempts.clone();
    let t0 = pool.now();
    let h = pool
        .schedule_retrying(
            "upload".into(),
            SEC,
            Retry::fixed(3, SEC * 2),
            move || -> Result<(), u16> {
                a.lock().unwrap().push(seen());
                Err(503)
            },
        )
        .unwrap();
    pool.advance(SEC * 10).unwrap();
    let r = h.wait_timeout(BOUND).unwrap();
    assert_eq!((r.outcome, r.attempts), (Outcome::Completed(Err(503)), 3));
    let seen = attempts.lock().unwrap().clone();
    let got: Vec<_> = seen.iter().map(|s| (s.attempt, s.run_count)).collect();
    assert_eq!(got, [(1, None), (2, None), (3, None)]);
    // Each attempt's due time: at 1 s, then 2 s after each failure.
    let dues: Vec<_> = seen.iter().map(|s| s.due - t0).collect();
    assert_eq!(dues, [SEC, SEC * 3, SEC * 5]);
    assert!(seen.iter().all(|s| s.key.as_deref() == Some("upload")));
}

#[test]
fn a_retried_task_that_panics_counts_its_attempts_too() {
    let (_clock, pool) = manual(1);
    let h = pool
        .schedule_retrying("flaky".into(), SEC, Retry::fixed(4, SEC), || {
            let n = TaskContext::current().unwrap().attempt();
            if n < 3 {
                panic!("attempt {n}");
            }
            Ok::<_, std::convert::Infallible>(n)
        })
        .unwrap();
    pool.advance(SEC * 10).unwrap();
    let r = h.wait_timeout(BOUND).unwrap();
    assert_eq!((r.outcome, r.attempts), (Outcome::Completed(Ok(3)), 3));
    assert_eq!(r.last_panic.as_deref(), Some("attempt 2"));
}

#[test]
fn a_periodic_task_sees_its_run_count_panicked_runs_included() {
    let (_clock, pool) = manual(1);
    let runs = Arc::new(Mutex::new(Vec::new()));
    let r = runs.clone();
    let every = Repeat::fixed_rate(SEC).on_panic(OnPanic::Continue);
    let t0 = pool.now();
    let h = pool
        .schedule_repeating("tick".into(), SEC, every, move || {
            let s = seen();
            r.lock().unwrap().push(s.clone());
            if s.run_count == Some(2) {
                panic!("the second run fails");
            }
        })
        .unwrap();
    pool.advance(SEC * 4).unwrap();
    assert!(h.cancel());
    let runs = runs.lock().unwrap().clone();
    let counts: Vec<_> = runs.iter().map(|s| (s.run_count, s.attempt)).collect();
    assert_eq!(
        counts,
        [(Some(1), 1), (Some(2), 1), (Some(3), 1), (Some(4), 1)]
    );
    let dues: Vec<_> = runs.iter().map(|s| s.due - t0).collect();
    assert_eq!(dues, [SEC, SEC * 2, SEC * 3, SEC * 4]);
    assert_eq!(h.panics(), 1);
}

#[test]
fn a_dynamic_task_stops_itself_on_its_run_count() {
    let (_clock, pool) = manual(1);
    let counts = Arc::new(Mutex::new(Vec::new()));
    let c = counts.clone();
    let h = pool
        .schedule_dynamic("poll".into(), SEC, Repeat::fixed_delay(SEC), move || {
            let n = TaskContext::current().unwrap().run_count();
            c.lock().unwrap().push(n);
            match n {
                Some(n) if n < 5 => Next::After(SEC * n as u32),
                _ => Next::Stop,
            }
        })
        .unwrap();
    pool.advance(SEC * 20).unwrap();
    assert_eq!(h.wait_timeout(BOUND).unwrap(), Outcome::Completed(()));
    let expected: Vec<_> = (1..=5).map(Some).collect();
    assert_eq!(*counts.lock().unwrap(), expected);
}

#[test]
fn a_keyless_task_and_a_wrong_key_type_read_no_key() {
    let (clock, pool) = manual(1);
    let keyless = pool
        .submit(SEC, || {
            let ctx = TaskContext::current().unwrap();
            (ctx.key::<String>(), ctx.attempt())
        })
        .unwrap();
    let wrong = pool
        .schedule("k".into(), SEC, || TaskContext::current()?.key::<u64>())
        .unwrap();
    clock.advance(SEC);
    assert_eq!(done(keyless), Outcome::Completed((None, 1)));
    assert_eq!(done(wrong), Outcome::Completed(None));
}

#[test]
fn outside_a_run_there_is_no_context() {
    assert!(TaskContext::current().is_none(), "the test's own thread");
    // A thread a task starts, and the worker once the run returned (its
    // completion listener runs there, after the run).
    let after_run = Arc::new(Mutex::new(Vec::new()));
    let a = after_run.clone();
    let pool = TimerPool::<u32>::builder()
        .workers(1)
        .on_completion(move |_| a.lock().unwrap().push(TaskContext::current().is_some()))
        .build()
        .unwrap();
    let h = pool
        .schedule(1, Duration::ZERO, || {
            let inside = TaskContext::current().is_some();
            let spawned = std::thread::spawn(|| TaskContext::current().is_some())
                .join()
                .unwrap();
            (inside, spawned)
        })
        .unwrap();
    assert_eq!(done(h), Outcome::Completed((true, false)));
    pool.shutdown();
    assert_eq!(*after_run.lock().unwrap(), [false]);
    // A task of the hand-driven scheduler runs on its caller's thread, not
    // a pool's worker.
    let s = Scheduler::new(4).unwrap();
    let in_scheduler = Arc::new(Mutex::new(None));
    let i = in_scheduler.clone();
    s.schedule(1, 0, move || {
        *i.lock().unwrap() = Some(TaskContext::current().is_some());
    })
    .unwrap();
    assert_eq!(s.run_due(0), 1);
    assert_eq!(*in_scheduler.lock().unwrap(), Some(false));
}

#[test]
fn the_key_is_cloned_only_for_a_task_that_asks_for_it() {
    let clones = Arc::new(AtomicU32::new(0));
    let clock = ManualClock::new();
    let pool = TimerPool::<Counted>::builder()
        .workers(1)
        .clock(clock.clone())
        .build()
        .unwrap();
    for k in 0..4 {
        pool.schedule_detached(Counted(k, clones.clone()), SEC, || {
            // Reads the context, not the key.
            let ctx = TaskContext::current().unwrap();
            assert_eq!(ctx.attempt(), 1);
        })
        .unwrap();
    }
    let h = pool
        .schedule(Counted(9, clones.clone()), SEC, || {
            TaskContext::current()?.key::<Counted>().map(|k| k.0)
        })
        .unwrap();
    let before = clones.load(SeqCst);
    clock.advance(SEC);
    pool.settle(BOUND).unwrap();
    assert_eq!(done(h), Outcome::Completed(Some(9)));
    assert_eq!(
        clones.load(SeqCst) - before,
        1,
        "one clone, for the task that asked"
    );
}
