//! Tests for bad input: every odd configuration, time or call is answered with
//! a clear [`Error`] or documented behaviour, never a panic or a hang.

mod common;
use common::*;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use timerpool::{Clock, Error, ManualClock, Outcome, TimerPool, MAX_WORKERS};

/// Counts how often the closures holding it were dropped.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A closure that counts its runs and, through a moved-in guard, its drops.
fn counted(runs: &Arc<AtomicUsize>, drops: &Arc<AtomicUsize>) -> impl FnOnce() + Send + 'static {
    let runs = runs.clone();
    let guard = DropCount(drops.clone());
    move || {
        let _guard = guard;
        runs.fetch_add(1, Ordering::SeqCst);
    }
}

fn counters() -> (Arc<AtomicUsize>, Arc<AtomicUsize>) {
    (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)))
}

#[test]
fn zero_and_absurd_worker_counts_are_errors() {
    let build = |n: usize| TimerPool::<u64>::builder().workers(n).build();
    assert_eq!(build(0).unwrap_err(), Error::ZeroWorkers);
    for n in [MAX_WORKERS + 1, 1 << 20, usize::MAX] {
        let e = build(n).unwrap_err();
        assert_eq!(
            e,
            Error::TooManyWorkers {
                requested: n,
                max: MAX_WORKERS
            }
        );
        let msg = e.to_string();
        assert!(msg.contains(&n.to_string()) && msg.contains(&MAX_WORKERS.to_string()));
    }
    assert!(Error::ZeroWorkers
        .to_string()
        .contains("at least one worker"));
}

#[test]
fn the_largest_worker_count_starts_or_says_why_not() {
    // MAX_WORKERS threads is a lot for a small machine: the pool must either
    // work or report the refused thread as Error::Spawn, never panic.
    match TimerPool::<u64>::builder().workers(MAX_WORKERS).build() {
        Ok(pool) => {
            let h = pool.submit(Duration::ZERO, || 1).unwrap();
            assert_eq!(done(h), Outcome::Completed(1));
            pool.shutdown();
        }
        Err(Error::Spawn(why)) => assert!(!why.is_empty()),
        Err(other) => panic!("unexpected error {other:?}"),
    }
}

#[test]
fn a_zero_staleness_tolerance_is_an_error() {
    // Zero would expire every task not started within its due nanosecond.
    let e = TimerPool::<u64>::builder()
        .workers(1)
        .expire_after(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(e, Error::ZeroExpiry);
    let one = TimerPool::<u64>::builder()
        .workers(1)
        .expire_after(Duration::from_nanos(1))
        .build();
    assert!(one.is_ok());
}

#[test]
fn zero_and_too_large_capacities_are_errors() {
    let b = || TimerPool::<u64>::builder().workers(1);
    assert_eq!(b().capacity(0).build().unwrap_err(), Error::ZeroCapacity);
    if usize::MAX > timerpool::heap::MAX_LEN {
        assert_eq!(
            b().capacity(usize::MAX).build().unwrap_err(),
            Error::CapacityTooLarge {
                requested: usize::MAX,
                max: timerpool::heap::MAX_LEN
            }
        );
    }
    // The extreme that is allowed works.
    let pool = b().capacity(1).build().unwrap();
    let h = pool.submit(Duration::ZERO, || 2).unwrap();
    assert_eq!(done(h), Outcome::Completed(2));
    pool.shutdown();
}

#[test]
fn odd_thread_names_are_accepted() {
    for name in [String::new(), "x".repeat(10_000), "ünïcødé ⏰".to_string()] {
        let pool = TimerPool::<u64>::builder()
            .workers(1)
            .thread_name(name)
            .build()
            .unwrap();
        let h = pool.submit(Duration::ZERO, || 3).unwrap();
        assert_eq!(done(h), Outcome::Completed(3));
        pool.shutdown();
    }
}

#[test]
fn capacity_reached_under_contention_accepts_exactly_capacity() {
    const CAPACITY: usize = 100;
    const THREADS: usize = 8;
    const PER_THREAD: u64 = 50;
    let clock = ManualClock::new();
    let pool = Arc::new(
        TimerPool::<u64>::builder()
            .workers(2)
            .capacity(CAPACITY)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let (runs, drops) = counters();
    let start = Arc::new(Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS as u64)
        .map(|t| {
            let (pool, start, runs, drops) =
                (pool.clone(), start.clone(), runs.clone(), drops.clone());
            std::thread::spawn(move || {
                start.wait();
                let mut accepted = Vec::new();
                let mut refused = 0;
                for i in 0..PER_THREAD {
                    let key = t * PER_THREAD + i;
                    let f = counted(&runs, &drops);
                    let r = if i % 5 == 0 {
                        pool.submit(Duration::from_secs(60), f)
                    } else {
                        pool.schedule(key, Duration::from_secs(60), f)
                    };
                    match r {
                        Ok(h) => accepted.push(h),
                        Err(e) => {
                            assert_eq!(e, Error::CapacityReached { capacity: CAPACITY });
                            refused += 1;
                        }
                    }
                    assert!(pool.len() <= CAPACITY);
                }
                (accepted, refused)
            })
        })
        .collect();
    let mut accepted = Vec::new();
    let mut refused = 0;
    for t in threads {
        let (a, r) = t.join().unwrap();
        accepted.extend(a);
        refused += r;
    }
    assert_eq!(accepted.len(), CAPACITY);
    assert_eq!(refused, THREADS * PER_THREAD as usize - CAPACITY);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        refused,
        "refused closures dropped"
    );
    assert_eq!(pool.len(), CAPACITY);
    let msg = Error::CapacityReached { capacity: CAPACITY }.to_string();
    assert!(msg.contains("capacity reached") && msg.contains("100"));

    // At capacity: replacing a pending key works, a new key does not.
    let keyed = accepted
        .iter()
        .find_map(|h| h.key().copied())
        .expect("some keyed task was accepted");
    let replacement = pool
        .schedule(keyed, Duration::from_secs(1), counted(&runs, &drops))
        .unwrap();
    assert_eq!(
        pool.schedule(u64::MAX, Duration::from_secs(1), || ())
            .map(|_| ())
            .unwrap_err(),
        Error::CapacityReached { capacity: CAPACITY }
    );
    // Freeing one place admits one new key.
    let victim = accepted.iter().find(|h| h.key().is_none()).unwrap();
    assert!(victim.cancel());
    let newcomer = pool
        .schedule(u64::MAX, Duration::from_secs(1), counted(&runs, &drops))
        .unwrap();

    clock.advance(Duration::from_secs(60));
    assert_eq!(done(replacement), Outcome::Completed(()));
    assert_eq!(done(newcomer), Outcome::Completed(()));
    let mut tally = [0usize; 3];
    for h in accepted {
        match done(h) {
            Outcome::Completed(()) => tally[0] += 1,
            Outcome::Replaced => tally[1] += 1,
            Outcome::Cancelled => tally[2] += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(tally, [CAPACITY - 2, 1, 1]);
    pool.shutdown();
    assert_eq!(runs.load(Ordering::SeqCst), CAPACITY);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        THREADS * PER_THREAD as usize + 2,
        "every closure, run or not, accepted or refused, dropped once"
    );
}

#[test]
fn capacity_holds_under_concurrent_schedule_and_cancel() {
    const CAPACITY: usize = 64;
    let (_clock, pool) = {
        let clock = ManualClock::new();
        let pool = TimerPool::<u64>::builder()
            .workers(2)
            .capacity(CAPACITY)
            .clock(clock.clone())
            .build()
            .unwrap();
        (clock, Arc::new(pool))
    };
    let start = Arc::new(Barrier::new(4));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (pool, start) = (pool.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let (mut ok, mut full) = (0, 0);
                for i in 0..5_000u64 {
                    let key = (t * 31 + i * 7) % 200;
                    if i % 3 == 0 {
                        pool.cancel(&key);
                    } else {
                        match pool.schedule(key, Duration::from_secs(1), || ()) {
                            Ok(_) => ok += 1,
                            Err(Error::CapacityReached { capacity }) => {
                                assert_eq!(capacity, CAPACITY);
                                full += 1;
                            }
                            Err(e) => panic!("unexpected {e:?}"),
                        }
                    }
                    assert!(pool.len() <= CAPACITY);
                }
                (ok, full)
            })
        })
        .collect();
    let (mut ok, mut full) = (0, 0);
    for t in threads {
        let (o, f) = t.join().unwrap();
        ok += o;
        full += f;
    }
    assert!(
        ok > 0 && full > 0,
        "both outcomes exercised: {ok} ok, {full} full"
    );
    assert!(pool.len() <= CAPACITY);
    let left = pool.len();
    assert_eq!(pool.shutdown_now().len(), left);
}

#[test]
fn out_of_range_durations_are_errors_and_drop_the_closure() {
    let (clock, pool) = manual_pool(1);
    let (runs, drops) = counters();
    for d in [
        Duration::MAX,
        Duration::from_secs(u64::MAX),
        Duration::from_nanos(i64::MAX as u64) + Duration::from_secs(1),
    ] {
        assert_eq!(
            pool.schedule(1, d, counted(&runs, &drops))
                .map(|_| ())
                .unwrap_err(),
            Error::TimeOutOfRange
        );
        assert_eq!(
            pool.submit(d, counted(&runs, &drops))
                .map(|_| ())
                .unwrap_err(),
            Error::TimeOutOfRange
        );
    }
    assert_eq!(drops.load(Ordering::SeqCst), 6);
    assert!(pool.is_empty());
    assert!(Error::TimeOutOfRange.to_string().contains("out of range"));

    // A long but representable delay is accepted and simply pending.
    let year = Duration::from_secs(365 * 24 * 3600);
    let far = pool
        .schedule(2, 200 * year, counted(&runs, &drops))
        .unwrap();
    assert_eq!(pool.next_due(), Some(clock.now() + 200 * year));
    assert_eq!(pool.shutdown_now(), vec![2]);
    assert_eq!(done(far), Outcome::Shutdown);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(drops.load(Ordering::SeqCst), 7);
}

#[test]
fn instants_far_in_the_past_run_at_once_and_far_future_ones_are_errors() {
    let (clock, pool) = manual_pool(2);
    let now = clock.now();
    // Instants before the pool's start count as due at once: they run
    // without any clock movement.
    let mut past = Vec::new();
    for back in [1, 3600, 365 * 24 * 3600, 100 * 365 * 24 * 3600] {
        if let Some(at) = now.checked_sub(Duration::from_secs(back)) {
            past.push(pool.schedule(back, at, move || back).unwrap());
            past.push(pool.submit(at, move || back).unwrap());
        }
    }
    assert!(!past.is_empty());
    for h in past {
        assert!(done(h).ran());
    }
    // Beyond about 292 years after the pool started: an error, not a wrap.
    for ahead in [293u64 * 365 * 24 * 3600, 1 << 40, i64::MAX as u64] {
        if let Some(at) = now.checked_add(Duration::from_secs(ahead)) {
            assert_eq!(
                pool.schedule(1, at, || ()).map(|_| ()).unwrap_err(),
                Error::TimeOutOfRange
            );
            assert_eq!(
                pool.submit(at, || ()).map(|_| ()).unwrap_err(),
                Error::TimeOutOfRange
            );
        }
    }
    assert!(pool.is_empty());
    pool.shutdown();
}

#[test]
fn a_manual_clock_pushed_to_its_end_saturates_and_keeps_working() {
    let (clock, pool) = manual_pool(2);
    let year = Duration::from_secs(365 * 24 * 3600);
    let far = pool.schedule(1, 250 * year, || "far").unwrap();
    clock.advance(Duration::MAX);
    clock.advance(Duration::MAX);
    assert_eq!(done(far), Outcome::Completed("far"));
    // At the end of time a zero delay is still due now ...
    let now = pool.submit(Duration::ZERO, || "now").unwrap();
    assert_eq!(done(now), Outcome::Completed("now"));
    // ... and any later time cannot be represented.
    assert_eq!(
        pool.schedule(2, Duration::from_nanos(1), || ())
            .map(|_| ())
            .unwrap_err(),
        Error::TimeOutOfRange
    );
    pool.shutdown();
}

#[test]
fn scheduling_after_shutdown_is_refused_and_the_closure_dropped_unrun() {
    for how in ["shutdown", "shutdown_now"] {
        let (_clock, pool) = manual_pool(2);
        let (runs, drops) = counters();
        match how {
            "shutdown" => pool.shutdown(),
            _ => assert!(pool.shutdown_now().is_empty()),
        }
        assert!(pool.is_shutdown());
        let at = Instant::now();
        let refusals = [
            pool.schedule(1, Duration::ZERO, counted(&runs, &drops))
                .map(|_| ()),
            pool.schedule(2, at, counted(&runs, &drops)).map(|_| ()),
            pool.submit(Duration::ZERO, counted(&runs, &drops))
                .map(|_| ()),
            pool.submit(at, counted(&runs, &drops)).map(|_| ()),
        ];
        for r in refusals {
            assert_eq!(r.unwrap_err(), Error::ShutDown, "after {how}");
        }
        assert_eq!(drops.load(Ordering::SeqCst), 4, "after {how}");
        assert_eq!(runs.load(Ordering::SeqCst), 0, "after {how}");
        assert!(Error::ShutDown.to_string().contains("shut down"));
        // Repeated shutdowns are harmless.
        pool.shutdown();
        assert!(pool.shutdown_now().is_empty());
        assert!(!pool.cancel(&1));
        assert_eq!(pool.next_due(), None);
    }
}

#[test]
fn scheduling_while_draining_is_refused() {
    // A task starts the shutdown from inside (no join there), so the pool is
    // draining, deterministically, while a later task is still pending.
    let (clock, pool) = manual_pool(1);
    let pool = Arc::new(pool);
    let pending = pool
        .schedule(1, Duration::from_secs(1), || "drained")
        .unwrap();
    let p = pool.clone();
    let closer = pool.submit(Duration::ZERO, move || p.shutdown()).unwrap();
    assert_eq!(done(closer), Outcome::Completed(()));
    assert!(pool.is_shutdown());
    let (runs, drops) = counters();
    assert_eq!(
        pool.schedule(2, Duration::ZERO, counted(&runs, &drops))
            .map(|_| ())
            .unwrap_err(),
        Error::ShutDown
    );
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert!(!pool.cancel(&2));
    clock.advance(Duration::from_secs(1));
    assert_eq!(done(pending), Outcome::Completed("drained"));
    pool.shutdown();
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[test]
fn cancel_of_unknown_finished_or_already_cancelled_keys_is_false() {
    let (clock, pool) = manual_pool(1);
    assert!(!pool.cancel(&12345));
    assert!(!pool.cancel(&u64::MAX));

    let finished = pool.schedule(1, Duration::ZERO, || ()).unwrap();
    assert_eq!(done(finished), Outcome::Completed(()));
    assert!(!pool.cancel(&1), "a finished key is not pending");

    let h = pool.schedule(2, Duration::from_secs(1), || ()).unwrap();
    assert!(pool.cancel(&2));
    assert!(!pool.cancel(&2));
    assert!(!h.cancel());
    assert_eq!(done(h), Outcome::Cancelled);

    // One worker runs equal due times in order: once `after` is done, `first`
    // has finished too, and its handle can still be asked to cancel.
    let at = clock.now() + Duration::from_secs(1);
    let first = pool.schedule(3, at, || 10).unwrap();
    let keyless = pool.submit(at, || 11).unwrap();
    let after = pool.submit(at, || 12).unwrap();
    clock.advance(Duration::from_secs(1));
    assert_eq!(done(after), Outcome::Completed(12));
    assert!(first.is_finished() && keyless.is_finished());
    assert!(!first.cancel());
    assert!(!keyless.cancel());
    assert!(!pool.cancel(&3));
    assert_eq!(first.try_outcome().unwrap(), Outcome::Completed(10));
    assert_eq!(keyless.try_outcome().unwrap(), Outcome::Completed(11));
    assert!(pool.is_empty());
    pool.shutdown();
}

#[test]
fn one_key_replaced_thousands_of_times_runs_exactly_once() {
    const REPLACES: usize = 20_000;
    let (clock, pool) = manual_pool(2);
    let (runs, drops) = counters();
    let due = clock.now() + Duration::from_secs(1);
    let started = Instant::now();
    let handles: Vec<_> = (0..REPLACES)
        .map(|_| pool.schedule(7, due, counted(&runs, &drops)).unwrap())
        .collect();
    let elapsed = started.elapsed();
    let rate = REPLACES as f64 / elapsed.as_secs_f64();
    println!("{REPLACES} replaces in {elapsed:?} ({rate:.0}/s)");
    assert!(rate > 1_000.0, "replacing is too slow: {rate:.0}/s");
    assert_eq!(pool.len(), 1);
    clock.advance(Duration::from_secs(1));
    let mut handles = handles.into_iter();
    let last = handles.next_back().unwrap();
    for h in handles {
        assert_eq!(done(h), Outcome::Replaced);
    }
    assert_eq!(done(last), Outcome::Completed(()));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(drops.load(Ordering::SeqCst), REPLACES);
    pool.shutdown();
}

#[test]
fn one_key_replaced_from_several_threads_runs_exactly_once() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 5_000;
    let (clock, pool) = manual_pool(2);
    let pool = Arc::new(pool);
    let (runs, drops) = counters();
    let due = clock.now() + Duration::from_secs(1);
    let start = Arc::new(Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (pool, start, runs, drops) =
                (pool.clone(), start.clone(), runs.clone(), drops.clone());
            std::thread::spawn(move || {
                start.wait();
                (0..PER_THREAD)
                    .map(|_| pool.schedule(7, due, counted(&runs, &drops)).unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let handles: Vec<_> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert_eq!(pool.len(), 1);
    clock.advance(Duration::from_secs(1));
    let (mut completed, mut replaced) = (0, 0);
    for h in handles {
        match done(h) {
            Outcome::Completed(()) => completed += 1,
            Outcome::Replaced => replaced += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((completed, replaced), (1, THREADS * PER_THREAD - 1));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(drops.load(Ordering::SeqCst), THREADS * PER_THREAD);
    pool.shutdown();
}

#[test]
fn a_key_replaced_while_it_keeps_falling_due_accounts_for_every_schedule() {
    // Real time, tiny delays: some schedules replace a pending task, others
    // land after the previous one was claimed and create new work.
    let pool = TimerPool::<u64>::builder().workers(2).build().unwrap();
    let (runs, drops) = counters();
    let handles: Vec<_> = (0..5_000u32)
        .map(|i| {
            let d = Duration::from_micros(u64::from(i % 50));
            pool.schedule(7, d, counted(&runs, &drops)).unwrap()
        })
        .collect();
    let n = handles.len();
    let mut completed = 0;
    for h in handles {
        match done(h) {
            Outcome::Completed(()) => completed += 1,
            Outcome::Replaced => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(completed >= 1);
    assert_eq!(runs.load(Ordering::SeqCst), completed);
    assert_eq!(drops.load(Ordering::SeqCst), n);
    pool.shutdown();
}

#[test]
fn a_thread_name_with_a_nul_byte_is_an_error_not_a_panic() {
    let built = TimerPool::<u64>::builder()
        .workers(2)
        .thread_name("bad\0name")
        .build();
    assert_eq!(built.unwrap_err(), Error::InvalidThreadName);
}
