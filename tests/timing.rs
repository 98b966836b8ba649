//! Tests for the leader's timing: the precision setting (`Precision`: the
//! frugal default's early wake, precision mode's spin window), and batch
//! submission.
//! Timing *targets* live in `benches/latency.rs`; these tests check rules
//! only: never early, no polling without a due time in the window.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use timerpool::{Clock, Error, Outcome, Precision, TimerPool, MAX_WINDOW};

/// Generous bound for waits that must finish.
const BOUND: Duration = Duration::from_secs(20);

fn done<T, K: std::hash::Hash + Eq + Clone + Send + 'static>(
    h: timerpool::TaskHandle<T, K>,
) -> Outcome<T> {
    match h.wait_timeout(BOUND) {
        Ok(o) => o,
        Err(_) => panic!("no outcome within {BOUND:?}"),
    }
}

/// Real time, counting how often the pool reads it.
#[derive(Debug, Default, Clone)]
struct CountingClock(Arc<AtomicU64>);

impl Clock for CountingClock {
    fn now(&self) -> Instant {
        self.0.fetch_add(1, Ordering::Relaxed);
        Instant::now()
    }
}

/// A clock that runs at half the speed of real time but tells the pool to
/// sleep until the *real* instant of a due time: every wake comes early by
/// this clock, so only the re-check under the lock keeps tasks from
/// starting early.
#[derive(Debug, Clone)]
struct LaggingClock {
    base: Instant,
}

impl Clock for LaggingClock {
    fn now(&self) -> Instant {
        self.base + self.base.elapsed() / 2
    }
    fn sleep_deadline(&self, due: Instant) -> Option<Instant> {
        Some(due)
    }
}

#[test]
fn precision_defaults_to_frugal() {
    let b = format!("{:?}", TimerPool::<u64>::builder());
    assert!(b.contains("precision: Frugal"), "{b}");
    let b = format!(
        "{:?}",
        TimerPool::<u64>::builder().precision(Precision::Spin(Duration::from_micros(250)))
    );
    assert!(b.contains("precision: Spin(250µs)"), "{b}");
}

#[test]
fn spin_window_or_slack_longer_than_the_maximum_is_refused() {
    let too_long = MAX_WINDOW + Duration::from_nanos(1);
    for precision in [Precision::Spin(too_long), Precision::Slack(too_long)] {
        let e = TimerPool::<u64>::builder()
            .precision(precision)
            .build()
            .unwrap_err();
        assert_eq!(
            e,
            Error::WindowTooLong {
                requested: too_long,
                max: MAX_WINDOW
            }
        );
    }
    for precision in [Precision::Spin(MAX_WINDOW), Precision::Slack(MAX_WINDOW)] {
        let pool = TimerPool::<u64>::builder()
            .workers(1)
            .precision(precision)
            .build()
            .unwrap();
        pool.shutdown();
    }
}

#[test]
fn a_slack_longer_than_the_staleness_tolerance_is_refused() {
    // It would expire the tasks the slack lets start late.
    let (slack, tolerance) = (Duration::from_millis(5), Duration::from_millis(1));
    let e = TimerPool::<u64>::builder()
        .precision(Precision::Slack(slack))
        .expire_after(tolerance)
        .build()
        .unwrap_err();
    assert_eq!(
        e,
        Error::WindowTooLong {
            requested: slack,
            max: tolerance
        }
    );
    // A tolerance above the slack, and a spin window of any length under
    // the limit beside a tolerance, are fine.
    for (precision, tolerance) in [
        (Precision::Slack(tolerance), slack),
        (Precision::Spin(slack), tolerance),
    ] {
        let pool = TimerPool::<u64>::builder()
            .workers(1)
            .precision(precision)
            .expire_after(tolerance)
            .build()
            .unwrap();
        pool.shutdown();
    }
}

/// Schedule `n` tasks `step` apart on `clock`; each returns the clock's
/// reading when it started, which must not be before its due time.
fn assert_never_early<C: Clock + Clone>(pool: TimerPool<u64>, clock: C, n: u64, step: Duration) {
    let start = clock.now() + Duration::from_millis(5);
    let dues = (0..n).map(|i| start + step * (i as u32)).collect();
    assert_never_early_at(pool, clock, dues);
}

/// Schedule a task due at each of `dues` on `pool`; assert that every
/// task runs and none starts before its due time by `clock`.
fn assert_never_early_at<C: Clock + Clone>(pool: TimerPool<u64>, clock: C, dues: Vec<Instant>) {
    let handles: Vec<_> = dues
        .into_iter()
        .enumerate()
        .map(|(i, due)| {
            let c = clock.clone();
            (due, pool.schedule(i as u64, due, move || c.now()).unwrap())
        })
        .collect();
    for (due, h) in handles {
        let started = done(h).completed().unwrap();
        assert!(started >= due, "started {started:?} before due {due:?}");
    }
    pool.shutdown();
}

#[test]
fn spin_never_starts_early() {
    let clock = CountingClock::default();
    let pool = TimerPool::builder()
        .workers(2)
        .clock(clock.clone())
        .precision(Precision::Spin(Duration::from_millis(2)))
        .build()
        .unwrap();
    assert_never_early(pool, clock, 200, Duration::from_micros(100));
}

/// A two-worker pool at `precision` on a clock behind real time.
fn lagging_pool(precision: Precision) -> (LaggingClock, TimerPool<u64>) {
    let clock = LaggingClock {
        base: Instant::now(),
    };
    let pool = TimerPool::builder()
        .workers(2)
        .clock(clock.clone())
        .precision(precision)
        .build()
        .unwrap();
    (clock, pool)
}

#[test]
fn spin_never_starts_early_on_a_clock_behind_real_time() {
    let (clock, pool) = lagging_pool(Precision::Spin(Duration::from_millis(1)));
    assert_never_early(pool, clock, 50, Duration::from_micros(500));
}

#[test]
fn the_frugal_early_wake_never_starts_early() {
    let (clock, pool) = lagging_pool(Precision::Frugal);
    assert_never_early(pool, clock, 100, Duration::from_micros(700));
}

#[test]
fn batched_due_times_never_start_early() {
    // Batches of five due times 30 µs apart, 2 ms between batches: a
    // frugal pool waits for each batch's last due time and starts the five
    // on one wake-up, on a clock behind real time too.
    let (clock, pool) = lagging_pool(Precision::Frugal);
    let start = clock.now() + Duration::from_millis(5);
    let dues = (0..100u32)
        .map(|i| start + Duration::from_millis(2) * (i / 5) + Duration::from_micros(30) * (i % 5))
        .collect();
    assert_never_early_at(pool, clock, dues);
}

#[test]
fn slack_never_starts_early_on_a_clock_behind_real_time() {
    let (clock, pool) = lagging_pool(Precision::Slack(Duration::from_millis(2)));
    assert_never_early(pool, clock, 100, Duration::from_micros(100));
}

#[test]
fn slack_starts_a_stream_of_due_times_on_a_wake_up_per_slack() {
    // 400 due times 50 µs apart (20 ms) with a 10 ms slack: the leader
    // wakes for the first, then once per slack, a handful of times in all
    // (fewer if its waits end late); waking per due time would take one
    // wake-up per timed wait's latency, dozens at least.
    let pool = TimerPool::<u64>::builder()
        .workers(1)
        .precision(Precision::Slack(Duration::from_millis(10)))
        .build()
        .unwrap();
    let start = Instant::now() + Duration::from_millis(20);
    let handles: Vec<_> = (0..400u32)
        .map(|i| {
            let due = start + Duration::from_micros(50) * i;
            (due, pool.schedule(u64::from(i), due, Instant::now).unwrap())
        })
        .collect();
    let before = pool.stats().leader_wakeups;
    for (due, h) in handles {
        let started = done(h).completed().unwrap();
        assert!(started >= due, "started {started:?} before due {due:?}");
    }
    let wakeups = pool.stats().leader_wakeups - before;
    assert!(wakeups <= 8, "{wakeups} wake-ups for 400 due times");
    pool.shutdown();
}

#[test]
fn slack_wakes_once_per_sparse_timer() {
    // Ten due times 20 ms apart, longer than a wait the frugal default ends
    // with a warm-up: relaxed mode wakes once for each, plus the wake-up
    // the first schedule's notification gives. A warm-up would end each
    // wait 500 µs early, before this slack's end, and double the count.
    let n = 10u32;
    let pool = TimerPool::<u64>::builder()
        .workers(1)
        .precision(Precision::Slack(Duration::from_micros(200)))
        .build()
        .unwrap();
    let before = pool.stats().leader_wakeups;
    let start = Instant::now() + Duration::from_millis(20);
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let due = start + Duration::from_millis(20) * i;
            pool.schedule(u64::from(i), due, || ()).unwrap()
        })
        .collect();
    for h in handles {
        done(h).completed().unwrap();
    }
    let wakeups = pool.stats().leader_wakeups - before;
    assert!(
        wakeups <= u64::from(n) + n as u64 / 2,
        "{wakeups} wake-ups for {n} sparse due times"
    );
    pool.shutdown();
}

/// How often the pool reads its clock over `span` with nothing due within
/// the spin window.
fn clock_reads_while_waiting(far: Option<Duration>, span: Duration) -> u64 {
    let clock = CountingClock::default();
    let pool = TimerPool::builder()
        .workers(2)
        .clock(clock.clone())
        .precision(Precision::Spin(MAX_WINDOW))
        .build()
        .unwrap();
    if let Some(far) = far {
        pool.schedule(1, far, || ()).unwrap();
    }
    // Past start-up: the leader has read the clock and gone to sleep.
    std::thread::sleep(Duration::from_millis(50));
    let before = clock.0.load(Ordering::Relaxed);
    std::thread::sleep(span);
    let reads = clock.0.load(Ordering::Relaxed) - before;
    pool.shutdown_now();
    reads
}

#[test]
fn spin_window_never_polls_an_idle_pool() {
    let reads = clock_reads_while_waiting(None, Duration::from_millis(200));
    assert!(reads <= 2, "{reads} clock reads while idle");
}

#[test]
fn spin_window_never_polls_for_a_timer_beyond_it() {
    let reads =
        clock_reads_while_waiting(Some(Duration::from_secs(3600)), Duration::from_millis(200));
    assert!(
        reads <= 2,
        "{reads} clock reads while the only timer is an hour away"
    );
}

#[test]
fn schedule_batch_runs_every_task_and_replaces_duplicate_keys() {
    // Every task of the batch is pending before any runs.
    let pool = TimerPool::<u64>::builder().workers(2).build().unwrap();
    let now = Instant::now();
    let mut handles = pool
        .schedule_batch((0..100u64).map(|k| (k % 90, now, move || k)))
        .unwrap();
    // Keys 0..10 appear twice: the first of each pair is replaced.
    let later = handles.split_off(90);
    for (k, h) in handles.into_iter().enumerate() {
        let o = done(h);
        if k < 10 {
            assert_eq!(o, Outcome::Replaced, "key {k}");
        } else {
            assert_eq!(o, Outcome::Completed(k as u64));
        }
    }
    for (k, h) in later.into_iter().enumerate() {
        assert_eq!(done(h), Outcome::Completed(90 + k as u64));
    }
    pool.shutdown();
}

fn noop() {}

#[test]
fn schedule_batch_is_all_or_nothing() {
    let pool = TimerPool::<u64>::builder()
        .workers(1)
        .capacity(10)
        .build()
        .unwrap();
    let far = Instant::now() + Duration::from_secs(3600);
    assert_eq!(
        pool.schedule_batch((0..11u64).map(|k| (k, far, || ())))
            .unwrap_err(),
        Error::CapacityReached { capacity: 10 }
    );
    assert!(pool.is_empty());
    let too_far = far + Duration::from_secs(400 * 365 * 24 * 3600);
    assert_eq!(
        pool.schedule_batch([(1, far, noop as fn()), (2, too_far, noop)])
            .unwrap_err(),
        Error::TimeOutOfRange
    );
    assert!(pool.is_empty());
    pool.shutdown();
    assert_eq!(
        pool.schedule_batch([(1, far, noop as fn())]).unwrap_err(),
        Error::ShutDown
    );
}
