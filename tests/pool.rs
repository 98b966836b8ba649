//! Tests for the pool: timing rules, outcomes, keys and shutdown.

mod common;
use common::*;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};
use timerpool::{Error, ManualClock, Outcome, TimerPool};

#[test]
fn never_early_start_reads_at_least_due() {
    let (clock, pool) = manual_pool(2);
    let mut handles = Vec::new();
    for i in 0..50u64 {
        let c = clock.clone();
        let due = c.clone_now() + Duration::from_millis(10 * i);
        handles.push((due, pool.schedule(i, due, move || c.clone_now()).unwrap()));
    }
    for _ in 0..60 {
        clock.advance(Duration::from_millis(10));
    }
    for (due, h) in handles {
        let started = done(h).completed().unwrap();
        assert!(started >= due, "started {started:?} before due {due:?}");
    }
}

trait NowExt {
    fn clone_now(&self) -> Instant;
}
impl NowExt for ManualClock {
    fn clone_now(&self) -> Instant {
        timerpool::Clock::now(self)
    }
}

#[test]
fn task_waits_for_the_manual_clock() {
    let (clock, pool) = manual_pool(2);
    let h = pool.schedule(1, Duration::from_secs(3600), || 5).unwrap();
    let h = h.wait_timeout(Duration::from_millis(50)).unwrap_err();
    assert!(!h.is_finished());
    clock.advance(Duration::from_secs(3599));
    let h = h.wait_timeout(Duration::from_millis(50)).unwrap_err();
    clock.advance(Duration::from_secs(1));
    assert_eq!(done(h), Outcome::Completed(5));
}

#[test]
fn earlier_task_preempts_leader_waiting_an_hour() {
    // System clock: the leader sleeps toward a task an hour away; a task due
    // at once must not wait for that sleep to end.
    let pool = TimerPool::<u64>::builder().workers(2).build().unwrap();
    let far = pool.schedule(1, Duration::from_secs(3600), || ()).unwrap();
    // A round trip through the pool: once it completes, a leader has re-read
    // the heap and (almost surely) sleeps toward the far task.
    let probe = pool.submit(Duration::ZERO, || ()).unwrap();
    assert_eq!(done(probe), Outcome::Completed(()));
    let start = Instant::now();
    let near = pool.schedule(2, Duration::from_millis(1), || ()).unwrap();
    assert_eq!(done(near), Outcome::Completed(()));
    // Without preemption the near task would wait for the hour-long sleep and
    // `done` would give up after BOUND.
    assert!(start.elapsed() < BOUND);
    assert!(far.cancel());
}

#[test]
fn panicking_task_is_reported_and_worker_keeps_serving() {
    let pool = TimerPool::<u64>::builder().workers(1).build().unwrap();
    let bad = pool
        .submit(Duration::ZERO, || -> u32 { panic!("boom {}", 7) })
        .unwrap();
    assert_eq!(done(bad), Outcome::Panicked("boom 7".to_string()));
    let good = pool.submit(Duration::ZERO, || 1).unwrap();
    assert_eq!(done(good), Outcome::Completed(1));
}

#[test]
fn non_string_panic_payload_is_reported() {
    let pool = TimerPool::<u64>::builder().workers(1).build().unwrap();
    let h = pool
        .submit(Duration::ZERO, || std::panic::panic_any(42u8))
        .unwrap();
    assert_eq!(
        done::<(), _>(h),
        Outcome::Panicked("<non-string panic payload>".into())
    );
}

#[test]
fn schedule_on_pending_key_replaces_it() {
    let (clock, pool) = manual_pool(2);
    let old = pool.schedule(7, Duration::from_secs(10), || "old").unwrap();
    let new = pool.schedule(7, Duration::from_secs(1), || "new").unwrap();
    assert_eq!(pool.len(), 1);
    assert_eq!(done(old), Outcome::Replaced);
    clock.advance(Duration::from_secs(1));
    assert_eq!(done(new), Outcome::Completed("new"));
}

#[test]
fn schedule_on_running_key_creates_new_pending_work() {
    let pool = Arc::new(TimerPool::<u64>::builder().workers(2).build().unwrap());
    let gate = Arc::new(Barrier::new(2));
    let g = gate.clone();
    let first = pool
        .schedule(1, Duration::ZERO, move || {
            g.wait(); // running
            g.wait(); // released
            "first"
        })
        .unwrap();
    gate.wait(); // key 1 is now running
    let second = pool.schedule(1, Duration::ZERO, || "second").unwrap();
    assert_eq!(done(second), Outcome::Completed("second"));
    gate.wait();
    assert_eq!(done(first), Outcome::Completed("first"));
}

#[test]
fn cancel_pending_returns_true_and_task_never_runs() {
    let (clock, pool) = manual_pool(2);
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let h = pool
        .schedule(3, Duration::from_secs(5), move || {
            r.fetch_add(1, Ordering::SeqCst)
        })
        .unwrap();
    assert!(pool.cancel(&3));
    assert!(!pool.cancel(&3));
    assert!(!h.cancel());
    clock.advance(Duration::from_secs(10));
    assert_eq!(done(h), Outcome::Cancelled);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

#[test]
fn cancel_after_start_returns_false() {
    let pool = TimerPool::<u64>::builder().workers(1).build().unwrap();
    let gate = Arc::new(Barrier::new(2));
    let g = gate.clone();
    let h = pool
        .schedule(9, Duration::ZERO, move || {
            g.wait();
            g.wait();
        })
        .unwrap();
    gate.wait(); // claimed and running
    assert!(!pool.cancel(&9));
    assert!(!h.cancel());
    gate.wait();
    assert_eq!(done(h), Outcome::Completed(()));
}

#[test]
fn handle_cancel_does_not_cancel_a_replacement() {
    let (_clock, pool) = manual_pool(1);
    let old = pool.schedule(1, Duration::from_secs(5), || 1).unwrap();
    let new = pool.schedule(1, Duration::from_secs(5), || 2).unwrap();
    assert!(!old.cancel());
    assert_eq!(pool.len(), 1);
    assert!(new.cancel());
    assert_eq!(done(new), Outcome::Cancelled);
}

#[test]
fn keyless_equal_due_times_run_in_submission_order() {
    let (clock, pool) = manual_pool::<u64>(1);
    let log = Arc::new(Mutex::new(Vec::new()));
    let at = timerpool::Clock::now(&clock) + Duration::from_secs(1);
    let handles: Vec<_> = (0..200)
        .map(|i| {
            let log = log.clone();
            pool.submit(at, move || log.lock().unwrap().push(i))
                .unwrap()
        })
        .collect();
    clock.advance(Duration::from_secs(1));
    for h in handles {
        assert_eq!(done(h), Outcome::Completed(()));
    }
    assert_eq!(*log.lock().unwrap(), (0..200).collect::<Vec<_>>());
}

#[test]
fn out_of_range_times_are_errors_not_panics() {
    let pool = TimerPool::<u64>::builder().workers(1).build().unwrap();
    assert_eq!(
        pool.schedule(1, Duration::MAX, || ()).unwrap_err(),
        Error::TimeOutOfRange
    );
    assert_eq!(
        pool.submit(Duration::from_secs(300 * 365 * 24 * 3600), || ())
            .unwrap_err(),
        Error::TimeOutOfRange
    );
    // Far in the past counts as due now.
    if let Some(past) = Instant::now().checked_sub(Duration::from_secs(3600)) {
        let h = pool.submit(past, || 3).unwrap();
        assert_eq!(done(h), Outcome::Completed(3));
    }
    assert!(pool.is_empty());
}

#[test]
fn builder_rejects_bad_configuration() {
    let e = |b: timerpool::Builder<u64>| b.build().unwrap_err();
    assert_eq!(e(TimerPool::builder().workers(0)), Error::ZeroWorkers);
    assert!(matches!(
        e(TimerPool::builder().workers(1_000_000)),
        Error::TooManyWorkers { .. }
    ));
    assert_eq!(e(TimerPool::builder().capacity(0)), Error::ZeroCapacity);
}

#[test]
fn capacity_refuses_new_keys_but_allows_replace() {
    let (_clock, pool) = {
        let clock = ManualClock::new();
        let pool = TimerPool::<u64>::builder()
            .workers(1)
            .capacity(2)
            .clock(clock.clone())
            .build()
            .unwrap();
        (clock, pool)
    };
    let _a = pool.schedule(1, Duration::from_secs(1), || ()).unwrap();
    let _b = pool.schedule(2, Duration::from_secs(1), || ()).unwrap();
    assert_eq!(
        pool.schedule(3, Duration::from_secs(1), || ()).unwrap_err(),
        Error::CapacityReached { capacity: 2 }
    );
    assert!(pool.schedule(2, Duration::from_secs(2), || ()).is_ok());
    assert_eq!(pool.len(), 2);
}

#[test]
fn shutdown_runs_pending_work_then_joins() {
    let pool = TimerPool::<u64>::builder().workers(2).build().unwrap();
    let h = pool
        .schedule(1, Duration::from_millis(20), || "ran")
        .unwrap();
    pool.shutdown();
    assert_eq!(h.try_outcome().unwrap(), Outcome::Completed("ran"));
    assert_eq!(
        pool.schedule(2, Duration::ZERO, || "late").unwrap_err(),
        Error::ShutDown
    );
}

#[test]
fn shutdown_now_returns_pending_keys_unrun() {
    let (_clock, pool) = manual_pool(2);
    let a = pool.schedule(1, Duration::from_secs(2), || ()).unwrap();
    let b = pool.schedule(2, Duration::from_secs(1), || ()).unwrap();
    let c = pool.submit(Duration::from_secs(1), || ()).unwrap();
    assert_eq!(pool.shutdown_now(), vec![2, 1]);
    for h in [a, b, c] {
        assert_eq!(h.try_outcome().unwrap(), Outcome::Shutdown);
    }
}

#[test]
fn dropping_the_pool_gives_pending_tasks_an_outcome() {
    let (_clock, pool) = manual_pool(3);
    let h = pool.schedule(1, Duration::from_secs(9), || ()).unwrap();
    drop(pool);
    assert_eq!(h.try_outcome().unwrap(), Outcome::Shutdown);
}

#[test]
fn task_may_schedule_cancel_and_shut_down_its_own_pool() {
    let pool = Arc::new(TimerPool::<u64>::builder().workers(2).build().unwrap());
    let p = pool.clone();
    let h = pool
        .schedule(1, Duration::ZERO, move || {
            let inner = p.schedule(2, Duration::from_secs(60), || ()).unwrap();
            assert!(p.cancel(&2));
            p.shutdown();
            inner.wait()
        })
        .unwrap();
    assert_eq!(done(h), Outcome::Completed(Outcome::Cancelled));
    pool.shutdown();
}

#[test]
fn no_busy_polling_idle_pool_with_far_timers_never_wakes() {
    let pool = TimerPool::<u64>::builder().workers(3).build().unwrap();
    let far: Vec<_> = (0..10_000u64)
        .map(|k| pool.schedule(k, Duration::from_secs(3600), || ()).unwrap())
        .collect();
    let probe = pool.submit(Duration::ZERO, || ()).unwrap();
    assert_eq!(done(probe), Outcome::Completed(()));
    let before = pool.stats();
    // Observe the pool idling; a polling leader would wake many times.
    std::thread::sleep(Duration::from_millis(300));
    let after = pool.stats();
    let woke = after.leader_wakeups - before.leader_wakeups;
    // At most the leader that took over after the probe settling in.
    assert!(woke <= 1, "an idle pool woke {woke} times in 300 ms");
    // The deputies (three workers have two) watch a due time an hour away:
    // they do not wake either.
    let deputy = after.deputy_wakeups - before.deputy_wakeups;
    assert_eq!(deputy, 0, "an idle pool's deputy woke {deputy} times");
    assert_eq!(pool.len(), 10_000);
    drop(far);
}

#[test]
fn no_busy_polling_one_far_timer_wakes_about_once() {
    let pool = TimerPool::<u64>::builder().workers(3).build().unwrap();
    let before = pool.stats().leader_wakeups;
    let h = pool.schedule(1, Duration::from_millis(200), || ()).unwrap();
    assert_eq!(done(h), Outcome::Completed(()));
    // One wake for the schedule's notify (the head changed), one for the
    // warm-up 0.5 ms before the end of the long wait, one at the due time
    // (the adaptive wake's; it then yields, which is no wake-up); a fourth
    // would be a spurious wakeup, more a poll.
    let woke = pool.stats().leader_wakeups - before;
    assert!(woke <= 4, "one 200 ms timer cost {woke} wakeups");
    // Each of the two deputies wakes at most once, at the due time, if it
    // watched the timer at all.
    let deputy = pool.stats().deputy_wakeups;
    assert!(
        deputy <= 2,
        "one 200 ms timer cost the deputies {deputy} wakeups"
    );
}

#[test]
fn every_wake_rereads_clock_and_head() {
    let (clock, pool) = manual_pool(2);
    let t0 = timerpool::Clock::now(&clock);
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let first = pool
        .schedule(1, t0 + Duration::from_secs(10), move || {
            r.fetch_add(1, Ordering::SeqCst)
        })
        .unwrap();
    // A wake with nothing due: the leader must re-read the clock, not assume.
    clock.advance(Duration::from_secs(5));
    // The head moves later while the leader sleeps toward 10 s.
    let r = ran.clone();
    let moved = pool
        .schedule(1, t0 + Duration::from_secs(20), move || {
            r.fetch_add(1, Ordering::SeqCst)
        })
        .unwrap();
    assert_eq!(done(first), Outcome::Replaced);
    // At 10 s the old head's time has come, but the head is now at 20 s.
    clock.advance(Duration::from_secs(5));
    let moved = moved.wait_timeout(Duration::from_millis(100)).unwrap_err();
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    clock.advance(Duration::from_secs(10));
    // A leader that kept a clock reading across its waits would never see
    // 20 s and the task would never finish: bounded wait.
    let start = Instant::now();
    while !moved.is_finished() {
        assert!(start.elapsed() < BOUND, "the task never ran at 20 s");
        std::thread::yield_now();
    }
    let timing = moved.timing().unwrap();
    assert!(timing.started.unwrap() >= t0 + Duration::from_secs(20));
    assert_eq!(done(moved), Outcome::Completed(0));
}

#[test]
fn shutdown_returns_once_the_last_pending_task_is_cancelled() {
    // A draining leader waits for the last pending task; cancelling that
    // task must wake it, or shutdown() would wait for the task's due time
    // (for ever on a manual clock).
    let (clock, pool) = manual_pool(2);
    let pool = Arc::new(pool);
    let far = pool.schedule(1, Duration::from_secs(3600), || ()).unwrap();
    let wakeups = || pool.stats().leader_wakeups;
    let woke_since = |before: u64| {
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(50) {
            if wakeups() > before {
                return true;
            }
            std::thread::yield_now();
        }
        false
    };
    // Barrier: a clock move counts as a wakeup only if the leader was
    // waiting; once counted, it is waiting again (it holds the lock from
    // its wake to its next wait, and stats() reads under that lock).
    let start = Instant::now();
    loop {
        assert!(start.elapsed() < BOUND, "the leader never settled");
        let before = wakeups();
        clock.advance(Duration::from_nanos(1));
        if woke_since(before) {
            break;
        }
    }
    // The waiting leader hears the shutdown, sees the far task still
    // pending and waits again; then the cancel takes the last task.
    let (stopper, rx) = shutdown_heard(&pool);
    assert!(far.cancel());
    rx.recv_timeout(BOUND)
        .expect("shutdown returned after the last task was cancelled");
    stopper.join().unwrap();
}

#[test]
fn a_task_due_on_arrival_is_pending_until_a_worker_starts_it() {
    // One worker, busy: a task due at once stays pending (cancellable,
    // counted) until the worker is free to start it.
    let (clock, pool) = manual_pool(1);
    let (blocker, release_tx) = block_a_worker(&pool, 0, clock.clone_now());
    let h = pool.schedule(1, clock.clone_now(), || "ran").unwrap();
    assert_eq!(pool.len(), 1);
    assert!(pool.cancel(&1));
    assert_eq!(done(h), Outcome::Cancelled);
    release_tx.send(()).unwrap();
    assert_eq!(done(blocker), Outcome::Completed(()));
}

#[test]
fn a_task_due_on_arrival_runs_while_another_worker_is_busy() {
    // One worker blocked in a task, the leader asleep on an empty heap: the
    // new due task wakes the leader, which passes the lead on and starts it.
    let pool = TimerPool::<u64>::builder().workers(2).build().unwrap();
    let (blocker, release_tx) = block_a_worker(&pool, 0, Instant::now());
    let h = pool.submit(Instant::now(), || 7).unwrap();
    assert_eq!(done(h), Outcome::Completed(7));
    release_tx.send(()).unwrap();
    assert_eq!(done(blocker), Outcome::Completed(()));
}

#[test]
fn a_task_due_on_arrival_waits_behind_earlier_due_tasks() {
    // One worker, busy: a task that fell due meanwhile is pending in the heap,
    // so a new due task joins it there (cancellable) instead of jumping ahead.
    let (clock, pool) = manual_pool(1);
    let order = Arc::new(Mutex::new(Vec::new()));
    let (blocker, release_tx) = block_a_worker(&pool, 0, clock.clone_now());
    let o = order.clone();
    let earlier = pool
        .schedule(1, Duration::from_secs(1), move || o.lock().unwrap().push(1))
        .unwrap();
    clock.advance(Duration::from_secs(2));
    let o = order.clone();
    let cancelled = pool
        .schedule(2, clock.clone_now(), move || o.lock().unwrap().push(99))
        .unwrap();
    assert!(
        pool.cancel(&2),
        "pending behind the due task, so cancellable"
    );
    let o = order.clone();
    let later = pool
        .schedule(2, clock.clone_now(), move || o.lock().unwrap().push(2))
        .unwrap();
    release_tx.send(()).unwrap();
    assert_eq!(done(blocker), Outcome::Completed(()));
    assert_eq!(done(earlier), Outcome::Completed(()));
    assert_eq!(done(later), Outcome::Completed(()));
    assert_eq!(done(cancelled), Outcome::Cancelled);
    assert_eq!(*order.lock().unwrap(), vec![1, 2]);
}

#[test]
fn detached_tasks_run_replace_cancel_and_are_counted() {
    let (clock, pool) = manual_pool(2);
    let ran = Arc::new(Mutex::new(Vec::new()));
    let at = clock.clone_now() + Duration::from_secs(1);
    for (key, tag) in [
        (1u64, "first"),
        (1, "second"),
        (2, "cancelled"),
        (3, "third"),
    ] {
        let r = ran.clone();
        pool.schedule_detached(key, at, move || r.lock().unwrap().push(tag))
            .unwrap();
    }
    assert!(pool.cancel(&2));
    pool.schedule_detached(4, at, || panic!("intentional"))
        .unwrap();
    let r = ran.clone();
    let n = pool
        .schedule_batch_detached((10..20u64).map(|k| {
            let r = r.clone();
            (k, at, move || r.lock().unwrap().push("batch"))
        }))
        .unwrap();
    assert_eq!(n, 10);
    clock.advance(Duration::from_secs(1));
    eventually("every detached task ran", || {
        let s = pool.stats();
        s.completed + s.panicked == 13
    });
    let s = pool.stats();
    assert_eq!(
        (
            s.scheduled,
            s.completed,
            s.panicked,
            s.replaced,
            s.cancelled
        ),
        (15, 12, 1, 1, 1)
    );
    let mut ran = ran.lock().unwrap().clone();
    ran.sort();
    let mut want = vec!["second", "third"];
    want.extend(["batch"; 10]);
    want.sort();
    assert_eq!(ran, want);
    // The worker that ran the panicking task still serves.
    assert_eq!(
        done(pool.submit(Duration::ZERO, || 1).unwrap()),
        Outcome::Completed(1)
    );
    assert_eq!(
        pool.schedule_detached(
            5,
            Instant::now() + Duration::from_secs(400 * 365 * 24 * 3600),
            || ()
        ),
        Err(Error::TimeOutOfRange)
    );
}

#[test]
fn capacity_counts_due_tasks_no_worker_has_started() {
    // A due task is pending until a worker starts it, so capacity counts it.
    let clock = ManualClock::new();
    let pool = TimerPool::<u64>::builder()
        .workers(1)
        .capacity(1)
        .clock(clock.clone())
        .build()
        .unwrap();
    let (blocker, release_tx) = block_a_worker(&pool, 0, clock.clone_now());
    let due = pool.schedule(1, clock.clone_now(), || "ran").unwrap();
    assert_eq!(
        pool.schedule(2, clock.clone_now(), || "refused")
            .unwrap_err(),
        Error::CapacityReached { capacity: 1 }
    );
    release_tx.send(()).unwrap();
    assert_eq!(done(blocker), Outcome::Completed(()));
    assert_eq!(done(due), Outcome::Completed("ran"));
}

#[test]
fn reschedule_moves_a_pending_deadline_in_place_and_keeps_the_handle() {
    let (clock, pool) = manual_pool::<u64>(1);
    let h = pool
        .schedule(1, Duration::from_secs(3600), || "ran")
        .unwrap();
    // Earlier: the leader, asleep toward an hour away, must hear of it.
    assert_eq!(pool.reschedule(&1, Duration::from_secs(1)), Ok(true));
    assert_eq!(pool.len(), 1);
    clock.advance(Duration::from_secs(1));
    // The same task and handle: not Replaced, and it ran at the new time.
    let (outcome, timing) = h.wait_timed();
    assert_eq!(outcome, Outcome::Completed("ran"));
    assert!(timing.started.unwrap() >= clock.clone_now());
    // Nothing pending under the key any more, or ever: false.
    assert_eq!(pool.reschedule(&1, Duration::from_secs(1)), Ok(false));
    assert_eq!(pool.reschedule(&2, Duration::from_secs(1)), Ok(false));
    assert_eq!(
        pool.reschedule(&2, Duration::MAX),
        Err(Error::TimeOutOfRange)
    );
}

#[test]
fn reschedule_later_keeps_a_task_from_running_at_its_old_time() {
    let (clock, pool) = manual_pool::<u64>(1);
    let h = pool.schedule(1, Duration::from_secs(1), || ()).unwrap();
    assert_eq!(pool.reschedule(&1, Duration::from_secs(10)), Ok(true));
    clock.advance(Duration::from_secs(5));
    let h = h.wait_timeout(Duration::from_millis(50)).unwrap_err();
    assert!(pool.cancel(&1));
    assert_eq!(done(h), Outcome::Cancelled);
}

#[test]
fn begin_shutdown_returns_at_once_and_await_termination_is_bounded() {
    let (clock, pool) = manual_pool::<u64>(2);
    let h = pool
        .schedule(1, Duration::from_secs(3600), || "ran")
        .unwrap();
    pool.begin_shutdown();
    assert!(pool.is_shutdown());
    assert_eq!(
        pool.schedule(2, Duration::ZERO, || "refused").unwrap_err(),
        Error::ShutDown
    );
    // The pending task holds the pool open until its time.
    assert!(!pool.await_termination(Duration::from_millis(20)));
    assert!(!pool.is_terminated());
    clock.advance(Duration::from_secs(3600));
    assert!(pool.await_termination(BOUND));
    assert!(pool.is_terminated());
    assert_eq!(done(h), Outcome::Completed("ran"));
}

#[test]
fn shutdown_timeout_returns_what_is_still_pending_at_its_deadline() {
    let pool = TimerPool::<u64>::builder().workers(2).build().unwrap();
    let soon = pool
        .schedule(1, Duration::from_millis(1), || "ran")
        .unwrap();
    let far = pool
        .schedule(2, Duration::from_secs(3600), || "never")
        .unwrap();
    let start = Instant::now();
    assert_eq!(pool.shutdown_timeout(Duration::from_millis(200)), vec![2]);
    assert!(start.elapsed() < BOUND);
    assert_eq!(done(soon), Outcome::Completed("ran"));
    assert_eq!(done(far), Outcome::Shutdown);
    assert!(pool.await_termination(BOUND));
    // Everything ran in time: nothing comes back.
    let pool = TimerPool::<u64>::builder().workers(1).build().unwrap();
    let h = pool.schedule(3, Duration::ZERO, || ()).unwrap();
    assert_eq!(pool.shutdown_timeout(BOUND), Vec::<u64>::new());
    assert_eq!(done(h), Outcome::Completed(()));
    assert!(pool.is_terminated());
}

#[test]
fn due_of_and_is_pending_answer_for_pending_tasks_only() {
    let (clock, pool) = manual_pool::<u64>(1);
    let at = clock.clone_now() + Duration::from_secs(5);
    assert_eq!(pool.due_of(&1), None);
    let h = pool.schedule(1, at, || ()).unwrap();
    assert_eq!(pool.due_of(&1), Some(at));
    assert!(pool.is_pending(&1));
    assert!(pool.reschedule(&1, at + Duration::from_secs(1)).unwrap());
    assert_eq!(pool.due_of(&1), Some(at + Duration::from_secs(1)));
    clock.advance(Duration::from_secs(6));
    assert_eq!(done(h), Outcome::Completed(()));
    assert_eq!(pool.due_of(&1), None);
    assert!(!pool.is_pending(&1));
}

#[test]
fn a_handle_says_whether_its_scheduling_replaced_a_pending_task() {
    let (_clock, pool) = manual_pool::<u64>(1);
    let first = pool.schedule(1, Duration::from_secs(60), || ()).unwrap();
    assert!(!first.replaced());
    let second = pool.schedule(1, Duration::from_secs(60), || ()).unwrap();
    assert!(second.replaced());
    assert_eq!(done(first), Outcome::Replaced);
    let batch = pool
        .schedule_batch([1u64, 2].map(|k| (k, Duration::from_secs(60), || ())))
        .unwrap();
    assert!(batch[0].replaced() && !batch[1].replaced());
    assert!(pool.cancel(&1) && pool.cancel(&2));
}
