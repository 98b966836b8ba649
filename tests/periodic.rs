//! Tests for periodic tasks, missed-tick and panic policies, exclusive keys,
//! staleness, task timing and the pool's counters.

mod common;
use common::*;

use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};
use timerpool::{Clock, Error, ManualClock, MissedTicks, OnPanic, Outcome, Repeat, TimerPool};

const SEC: Duration = Duration::from_secs(1);

fn pool(workers: usize) -> (ManualClock, TimerPool<&'static str>) {
    manual_pool(workers)
}

/// A closure that sends the clock's reading at each run.
fn ticker(clock: &ManualClock) -> (impl FnMut() + Send + 'static, Receiver<Instant>) {
    let (tx, rx) = channel();
    let c = clock.clone();
    (move || tx.send(c.now()).unwrap(), rx)
}

fn recv(rx: &Receiver<Instant>) -> Instant {
    rx.recv_timeout(BOUND).expect("a run within the bound")
}

#[test]
fn fixed_rate_runs_at_each_period() {
    let (clock, pool) = pool(2);
    let t0 = clock.now();
    let (f, runs) = ticker(&clock);
    let h = pool
        .schedule_repeating("tick", t0, Repeat::fixed_rate(SEC), f)
        .unwrap();
    assert_eq!(recv(&runs), t0);
    for k in 1..=3 {
        eventually("the next tick to be scheduled", || {
            pool.next_due() == Some(t0 + SEC * k)
        });
        clock.advance(SEC);
        assert_eq!(recv(&runs), t0 + SEC * k);
    }
    // The counter moves after the closure returns.
    eventually("four runs counted", || h.runs() == 4);
    assert!(h.cancel());
    assert_eq!(h.wait_timeout(BOUND).unwrap(), Outcome::Cancelled);
}

/// Run once at t0, then stall 3.5 periods; return the runs after the stall
/// and the next due time.
fn stall(policy: MissedTicks) -> (usize, Instant, u64, Instant) {
    let (clock, pool) = pool(1);
    let t0 = clock.now();
    let (f, runs) = ticker(&clock);
    let h = pool
        .schedule_repeating("tick", t0, Repeat::fixed_rate(SEC).missed_ticks(policy), f)
        .unwrap();
    recv(&runs);
    eventually("the first reschedule", || pool.next_due() == Some(t0 + SEC));
    clock.advance(SEC * 7 / 2);
    let expected_runs = if policy == MissedTicks::Burst { 3 } else { 1 };
    for _ in 0..expected_runs {
        assert_eq!(recv(&runs), t0 + SEC * 7 / 2);
    }
    let after = |next: Option<Instant>| next.is_some_and(|n| n > t0 + SEC * 7 / 2);
    eventually("the post-stall reschedule", || after(pool.next_due()));
    // Nothing else is due at 3.5 s: no further run arrives.
    assert!(runs.try_recv().is_err());
    (expected_runs, pool.next_due().unwrap(), h.missed(), t0)
}

#[test]
fn missed_ticks_burst_catches_up_every_tick() {
    let (runs, next, missed, t0) = stall(MissedTicks::Burst);
    assert_eq!(runs, 3); // the ticks due at 1, 2 and 3 s
    assert_eq!(next, t0 + SEC * 4);
    assert_eq!(missed, 0);
}

#[test]
fn missed_ticks_delay_shifts_the_schedule() {
    let (runs, next, missed, t0) = stall(MissedTicks::Delay);
    assert_eq!(runs, 1);
    assert_eq!(next, t0 + SEC * 9 / 2); // one period after the late run
    assert_eq!(missed, 2); // the ticks at 2 and 3 s
}

#[test]
fn missed_ticks_skip_keeps_the_phase() {
    let (runs, next, missed, t0) = stall(MissedTicks::Skip);
    assert_eq!(runs, 1);
    assert_eq!(next, t0 + SEC * 4); // next tick of the original schedule
    assert_eq!(missed, 2);
}

#[test]
fn fixed_delay_counts_from_the_end_of_each_run() {
    let (clock, pool) = pool(1);
    let t0 = clock.now();
    let (f, runs) = ticker(&clock);
    let _h = pool
        .schedule_repeating("poll", t0, Repeat::fixed_delay(SEC), f)
        .unwrap();
    recv(&runs);
    eventually("reschedule", || pool.next_due() == Some(t0 + SEC));
    clock.advance(SEC * 5 / 2); // the run at 1 s starts late, at 2.5 s
    assert_eq!(recv(&runs), t0 + SEC * 5 / 2);
    eventually("reschedule", || pool.next_due() == Some(t0 + SEC * 7 / 2));
}

#[test]
fn panic_in_run_3_stops_a_periodic_task_and_is_reported() {
    let (clock, pool) = pool(2);
    let t0 = clock.now();
    let count = Arc::new(Mutex::new(0));
    let c = count.clone();
    let h = pool
        .schedule_repeating("flaky", t0, Repeat::fixed_rate(SEC), move || {
            let mut n = c.lock().unwrap();
            *n += 1;
            if *n == 3 {
                panic!("run {} failed", *n);
            }
        })
        .unwrap();
    for k in 1..=2 {
        eventually("reschedule", || pool.next_due() == Some(t0 + SEC * k));
        clock.advance(SEC);
    }
    eventually("the task to stop", || h.is_finished());
    assert_eq!((h.runs(), h.panics()), (2, 1));
    assert_eq!(h.last_panic().as_deref(), Some("run 3 failed"));
    assert_eq!(
        h.wait_timeout(BOUND).unwrap(),
        Outcome::Panicked("run 3 failed".into())
    );
    // Stopped: no stand-in, nothing pending, no further run.
    assert!(pool.is_empty());
    assert_eq!(pool.stats().panicked, 1);
}

#[test]
fn panic_in_run_3_with_continue_keeps_the_schedule() {
    let (clock, pool) = pool(2);
    let t0 = clock.now();
    let (tx, rx) = channel();
    let mut n = 0;
    let h = pool
        .schedule_repeating(
            "flaky",
            t0,
            Repeat::fixed_rate(SEC).on_panic(OnPanic::Continue),
            move || {
                n += 1;
                tx.send(n).unwrap();
                if n == 3 {
                    panic!("run 3 failed");
                }
            },
        )
        .unwrap();
    for k in 1..=4u32 {
        assert_eq!(rx.recv_timeout(BOUND).unwrap(), k);
        eventually("reschedule", || pool.next_due() == Some(t0 + SEC * k));
        clock.advance(SEC);
    }
    assert_eq!(rx.recv_timeout(BOUND).unwrap(), 5);
    eventually("five runs counted", || h.runs() + h.panics() == 5);
    assert_eq!(h.panics(), 1);
    assert_eq!(h.last_panic().as_deref(), Some("run 3 failed"));
    let stats = pool.stats();
    assert_eq!(stats.periodic_panics, 1);
    assert!(h.cancel());
}

#[test]
fn cancel_by_key_during_a_run_stops_future_runs() {
    let (clock, pool) = pool(2);
    let gate = Arc::new(Barrier::new(2));
    let g = gate.clone();
    let h = pool
        .schedule_repeating("job", clock.now(), Repeat::fixed_rate(SEC), move || {
            g.wait();
            g.wait();
        })
        .unwrap();
    gate.wait(); // run 1 is in progress
    assert!(pool.cancel(&"job"));
    assert!(!h.cancel());
    gate.wait();
    assert_eq!(h.wait_timeout(BOUND).unwrap(), Outcome::Cancelled);
    clock.advance(SEC * 10);
    assert!(pool.is_empty());
}

#[test]
fn scheduling_the_key_of_a_running_periodic_task_replaces_it() {
    let (clock, pool) = pool(2);
    let gate = Arc::new(Barrier::new(2));
    let g = gate.clone();
    let periodic = pool
        .schedule_repeating("job", clock.now(), Repeat::fixed_rate(SEC), move || {
            g.wait();
            g.wait();
        })
        .unwrap();
    gate.wait();
    let one_shot = pool.schedule("job", SEC * 5, || "new").unwrap();
    gate.wait();
    assert_eq!(periodic.wait_timeout(BOUND).unwrap(), Outcome::Replaced);
    assert_eq!(pool.len(), 1);
    clock.advance(SEC * 5);
    assert_eq!(
        one_shot.wait_timeout(BOUND).unwrap(),
        Outcome::Completed("new")
    );
}

#[test]
fn graceful_shutdown_stops_periodic_tasks() {
    let (clock, pool) = pool(2);
    let (f, runs) = ticker(&clock);
    let h = pool
        .submit_repeating(clock.now(), Repeat::fixed_rate(SEC), f)
        .unwrap();
    recv(&runs);
    pool.shutdown(); // must not wait forever for a task that never ends
    assert_eq!(h.wait_timeout(BOUND).unwrap(), Outcome::Shutdown);
}

#[test]
fn zero_period_is_an_error() {
    let (clock, pool) = pool(1);
    let e = pool.schedule_repeating("x", clock.now(), Repeat::fixed_rate(Duration::ZERO), || {});
    assert_eq!(e.unwrap_err(), Error::ZeroPeriod);
    assert_eq!(
        pool.submit_repeating(clock.now(), Repeat::fixed_delay(Duration::MAX), || {})
            .unwrap_err(),
        Error::TimeOutOfRange
    );
    assert_eq!(pool.stats().refused, 2);
}

#[test]
fn without_exclusive_keys_a_replacement_may_overlap() {
    // Two runs under one key meet at a barrier: only possible if they overlap.
    let pool = TimerPool::<&str>::builder().workers(2).build().unwrap();
    let meet = Arc::new(Barrier::new(2));
    let (a, b) = (meet.clone(), meet.clone());
    let first = pool
        .schedule("k", Duration::ZERO, move || a.wait())
        .unwrap();
    // Make sure the first is claimed (running) before the second is scheduled.
    eventually("first claimed", || pool.is_empty());
    let second = pool
        .schedule("k", Duration::ZERO, move || b.wait())
        .unwrap();
    assert!(first.wait_timeout(BOUND).unwrap().ran());
    assert!(second.wait_timeout(BOUND).unwrap().ran());
}

#[test]
fn exclusive_keys_replacement_never_overlaps_under_a_storm() {
    let pool = Arc::new(
        TimerPool::<u8>::builder()
            .workers(4)
            .exclusive_keys(true)
            .build()
            .unwrap(),
    );
    let spans = Arc::new(Mutex::new(Vec::new()));
    let producers: Vec<_> = (0..3)
        .map(|_| {
            let (pool, spans) = (pool.clone(), spans.clone());
            std::thread::spawn(move || {
                let mut handles = Vec::new();
                for _ in 0..2000 {
                    let spans = spans.clone();
                    let h = pool
                        .schedule(7, Duration::ZERO, move || {
                            let start = Instant::now();
                            for _ in 0..200 {
                                std::hint::spin_loop();
                            }
                            spans.lock().unwrap().push((start, Instant::now()));
                        })
                        .unwrap();
                    handles.push(h);
                }
                handles
            })
        })
        .collect();
    let handles: Vec<_> = producers
        .into_iter()
        .flat_map(|p| p.join().unwrap())
        .collect();
    let mut ran = 0;
    for h in handles {
        match h.wait_timeout(BOUND).unwrap() {
            Outcome::Completed(()) => ran += 1,
            Outcome::Replaced => {}
            other => panic!("unexpected outcome {other:?}"),
        }
    }
    let mut spans = spans.lock().unwrap().clone();
    assert_eq!(spans.len(), ran);
    assert!(ran >= 1);
    spans.sort();
    for w in spans.windows(2) {
        assert!(w[1].0 >= w[0].1, "two runs of key 7 overlapped: {w:?}");
    }
}

#[test]
fn exclusive_keys_holds_a_due_replacement_until_the_run_returns() {
    let pool = TimerPool::<u8>::builder()
        .workers(2)
        .exclusive_keys(true)
        .build()
        .unwrap();
    let gate = Arc::new(Barrier::new(2));
    let g = gate.clone();
    let first = pool
        .schedule(1, Duration::ZERO, move || {
            g.wait();
            g.wait();
        })
        .unwrap();
    gate.wait();
    let second = pool.schedule(1, Duration::ZERO, || ()).unwrap();
    // Held, not lost: still pending and cancellable until the first returns.
    eventually("second pending", || pool.len() == 1);
    gate.wait();
    let (o1, t1) = first.wait_timed();
    let (o2, t2) = second.wait_timed();
    assert_eq!((o1, o2), (Outcome::Completed(()), Outcome::Completed(())));
    assert!(t2.started.unwrap() >= t1.finished.unwrap());
}

#[test]
fn staleness_at_the_boundary() {
    let clock = ManualClock::new();
    let pool = TimerPool::<u8>::builder()
        .workers(1)
        .clock(clock.clone())
        .expire_after(Duration::from_millis(100))
        .build()
        .unwrap();
    let t0 = clock.now();
    let on_time = pool.schedule(1, t0 + SEC, || "ran").unwrap();
    let stale = pool
        .schedule(2, t0 + SEC - Duration::from_nanos(1), || "ran")
        .unwrap();
    // Now is exactly 100 ms after task 1's due time and 100 ms + 1 ns after
    // task 2's.
    clock.advance(SEC + Duration::from_millis(100));
    assert_eq!(
        on_time.wait_timeout(BOUND).unwrap(),
        Outcome::Completed("ran")
    );
    let (outcome, timing) = stale.wait_timed();
    assert_eq!(outcome, Outcome::Expired);
    assert!(timing.claimed.is_some() && timing.started.is_none());
    assert_eq!(pool.stats().expired, 1);
}

#[test]
fn timing_reports_due_claimed_started_finished_in_order() {
    let (clock, pool) = pool(2);
    let t0 = clock.now();
    let h = pool.schedule("a", t0 + SEC, || ()).unwrap();
    let c = pool.schedule("b", t0 + SEC, || ()).unwrap();
    assert!(c.cancel());
    clock.advance(SEC * 2);
    let (_, t) = h.wait_timed();
    assert_eq!(t.due, t0 + SEC);
    assert!(t.due <= t.claimed.unwrap());
    assert!(t.claimed <= t.started && t.started <= t.finished);
    assert_eq!(t.lateness(), Some(SEC));
    let ct = c.timing().unwrap();
    assert_eq!((ct.claimed, ct.started, ct.finished), (None, None, None));
}

#[test]
fn stats_count_every_outcome_and_lateness() {
    let (clock, pool) = pool(2);
    let t0 = clock.now();
    let ok: Vec<_> = (0..3)
        .map(|_| pool.submit(t0 + SEC, || ()).unwrap())
        .collect();
    let bad = pool.submit(t0 + SEC, || panic!("boom")).unwrap();
    let _gone = pool.schedule("x", t0 + SEC, || ()).unwrap();
    let _new = pool.schedule("x", t0 + SEC * 9, || ()).unwrap();
    let _cancelled = pool.schedule("c", t0 + SEC, || ()).unwrap();
    assert!(pool.cancel(&"c"));
    clock.advance(SEC * 2);
    for h in ok {
        h.wait_timeout(BOUND).unwrap();
    }
    bad.wait_timeout(BOUND).unwrap();
    assert_eq!(pool.shutdown_now(), vec!["x"]);
    let s = pool.stats();
    assert_eq!(
        (
            s.scheduled,
            s.completed,
            s.panicked,
            s.cancelled,
            s.replaced,
            s.shutdown
        ),
        (7, 3, 1, 1, 1, 1)
    );
    assert_eq!(s.pending, 0);
    assert_eq!(s.lateness.count, 4);
    // Two significant digits: within 1 % of the exact 1 s.
    assert!(s.lateness.p50 >= SEC && s.lateness.p50 <= SEC * 101 / 100);
}

#[test]
fn a_periodic_task_put_back_before_a_far_task_runs_on_time() {
    // While the periodic task's first run goes on, the other worker leads
    // and sleeps toward a task an hour away; putting the task back at its
    // next tick makes it the earliest, and the leader must hear of that or
    // it oversleeps the tick by an hour.
    let pool = Arc::new(TimerPool::<&str>::builder().workers(2).build().unwrap());
    let far = pool
        .schedule("far", Duration::from_secs(3600), || ())
        .unwrap();
    let (tx, rx) = channel();
    let every = Repeat::fixed_rate(Duration::from_millis(20));
    let weak = Arc::downgrade(&pool);
    let mut first = true;
    let tick = pool
        .schedule_repeating("tick", Duration::ZERO, every, move || {
            if std::mem::take(&mut first) {
                let pool = weak.upgrade().expect("the pool outlives the test");
                leader_asleep(&pool);
            }
            let _ = tx.send(());
        })
        .unwrap();
    for run in 0..3 {
        rx.recv_timeout(BOUND)
            .unwrap_or_else(|_| panic!("run {run} did not come within {BOUND:?}"));
    }
    assert!(tick.cancel());
    assert!(far.cancel());
}

/// Return once a leader is asleep (from inside a task, so on another worker):
/// poke it with ever earlier far tasks (each a new head, which notifies the
/// leader) until its wake-up count moves, then take the poke away again (a
/// cancel while running notifies nobody).
fn leader_asleep(pool: &TimerPool<&'static str>) {
    let before = pool.stats().leader_wakeups;
    let start = Instant::now();
    let mut poke = Duration::from_secs(1800);
    while pool.stats().leader_wakeups == before {
        assert!(start.elapsed() < BOUND, "no leader ever slept");
        poke -= Duration::from_millis(1);
        pool.schedule("poke", poke, || ()).unwrap();
        std::thread::yield_now();
    }
    assert!(pool.cancel(&"poke"));
}

#[test]
fn reschedule_moves_a_periodic_tasks_next_run_but_not_a_running_one() {
    let (clock, pool) = pool(2);
    let (started_tx, started_rx) = channel();
    let (go_tx, go_rx) = channel::<()>();
    let go_rx = Mutex::new(go_rx);
    let tick = pool
        .schedule_repeating(
            "tick",
            clock.now() + SEC,
            Repeat::fixed_rate(SEC),
            move || {
                started_tx.send(()).unwrap();
                go_rx.lock().unwrap().recv_timeout(BOUND).unwrap();
            },
        )
        .unwrap();
    // Pending: its first run moves to now.
    assert_eq!(pool.reschedule(&"tick", clock.now()), Ok(true));
    started_rx.recv_timeout(BOUND).unwrap();
    // Running: its stand-in holds the key, and there is no pending run.
    assert_eq!(pool.reschedule(&"tick", clock.now()), Ok(false));
    go_tx.send(()).unwrap();
    assert!(tick.cancel());
    assert_eq!(tick.wait_timeout(BOUND).unwrap(), Outcome::Cancelled);
}
