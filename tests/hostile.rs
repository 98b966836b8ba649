//! Tests for user code that is not a task and panics on the pool's threads:
//! a key's `Hash`, `Eq`, `Clone` and `Drop`, the clock, and the end of the
//! clock's range. Each reproduces a way the pool used to stop, hang or lose
//! an outcome.

mod common;
use common::*;

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{mpsc, Arc, OnceLock};
use std::time::{Duration, Instant};
use timerpool::{Clock, ManualClock, Outcome, Repeat, TimerPool};

/// Which of a key's traits panic, and where.
#[derive(Debug, Default)]
struct Rules {
    /// Thread-name prefix of the pool whose threads the traits panic on.
    pool: String,
    hash: AtomicBool,
    eq: AtomicBool,
    clone: AtomicBool,
    drop: AtomicBool,
    /// Panic once only: the first trait call that panics disarms the rule.
    once: AtomicBool,
    /// Panic only on the thread of this name, if set.
    thread: std::sync::Mutex<Option<String>>,
}

impl Rules {
    fn new(pool: &str) -> Arc<Rules> {
        Arc::new(Rules {
            pool: pool.to_string(),
            ..Rules::default()
        })
    }

    /// Panic if `rule` is armed and this is one of the pool's threads.
    fn check(&self, rule: &AtomicBool, what: &str) {
        let me = std::thread::current();
        let on_pool = me.name().is_some_and(|n| n.starts_with(&self.pool));
        let only = self.thread.lock().unwrap().clone();
        let here = only.is_none_or(|t| me.name() == Some(t.as_str()));
        if on_pool && here && rule.load(SeqCst) {
            if self.once.load(SeqCst) {
                rule.store(false, SeqCst);
            }
            panic!("hostile key: {what} on a pool thread");
        }
    }
}

/// A key whose traits panic on the pool's threads as its rules say.
#[derive(Debug)]
struct Hostile {
    id: u64,
    rules: Arc<Rules>,
}

impl Hostile {
    fn new(id: u64, rules: &Arc<Rules>) -> Self {
        Hostile {
            id,
            rules: rules.clone(),
        }
    }
}

impl Hash for Hostile {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.rules.check(&self.rules.hash, "hash");
        self.id.hash(state);
    }
}

impl PartialEq for Hostile {
    fn eq(&self, other: &Self) -> bool {
        self.rules.check(&self.rules.eq, "eq");
        self.id == other.id
    }
}

impl Eq for Hostile {}

impl Clone for Hostile {
    fn clone(&self) -> Self {
        self.rules.check(&self.rules.clone, "clone");
        Hostile::new(self.id, &self.rules)
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.rules.check(&self.rules.drop, "drop");
        }
    }
}

fn pool(name: &str, workers: usize) -> TimerPool<Hostile> {
    TimerPool::builder()
        .workers(workers)
        .thread_name(name)
        .build()
        .unwrap()
}

/// Run `f` on a thread and fail (instead of hanging) if it takes longer
/// than [`BOUND`].
fn within_bound<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(BOUND)
        .unwrap_or_else(|_| panic!("{what} did not return within {BOUND:?}"))
}

#[test]
fn a_key_whose_hash_panics_on_the_leader_does_not_stop_the_pool() {
    let rules = Rules::new("hash-leader");
    rules.hash.store(true, SeqCst);
    let pool = pool("hash-leader", 2);
    let hostile = pool.schedule(Hostile::new(1, &rules), Duration::ZERO, || 1);
    let hostile = hostile.unwrap();
    let later = pool.schedule(Hostile::new(2, &rules), Duration::from_millis(5), || 2);
    // Without stored hashes the leader rehashed the key it popped, died, and
    // took the lead token with it: nothing ran again.
    assert_eq!(done(hostile), Outcome::Completed(1));
    assert_eq!(done(later.unwrap()), Outcome::Completed(2));
    within_bound("dropping the pool", move || drop(pool));
}

#[test]
fn a_task_whose_key_panics_as_it_starts_tells_its_handle_panicked() {
    let rules = Rules::new("hash-start");
    let pool: TimerPool<Hostile> = TimerPool::builder()
        .workers(1)
        .thread_name("hash-start")
        .exclusive_keys(true)
        .build()
        .unwrap();
    // Exclusive keys hash the key as its task starts, on the worker.
    rules.hash.store(true, SeqCst);
    let h = pool.schedule(Hostile::new(1, &rules), Duration::ZERO, || 1);
    match within_bound("the lost task's outcome", move || h.unwrap().wait()) {
        Outcome::Panicked(msg) => assert!(msg.contains("dropped unrun"), "{msg}"),
        other => panic!("expected Panicked, got {other:?}"),
    }
    rules.hash.store(false, SeqCst);
    within_bound("dropping the pool", move || drop(pool));
}

#[test]
fn a_periodic_task_whose_key_cannot_be_cloned_for_its_stand_in_is_told_panicked() {
    let rules = Rules::new("clone-stand-in");
    rules.clone.store(true, SeqCst);
    let pool = pool("clone-stand-in", 2);
    let every = Repeat::fixed_rate(Duration::from_secs(60));
    let tick = pool
        .schedule_repeating(Hostile::new(1, &rules), Duration::ZERO, every, || {})
        .unwrap();
    match tick.wait_timeout(BOUND) {
        Ok(Outcome::Panicked(msg)) => assert!(msg.contains("dropped unrun"), "{msg}"),
        Ok(other) => panic!("expected Panicked, got {other:?}"),
        Err(_) => panic!("the periodic handle was never answered"),
    }
    rules.clone.store(false, SeqCst);
    let after = pool.schedule(Hostile::new(2, &rules), Duration::ZERO, || 2);
    assert_eq!(done(after.unwrap()), Outcome::Completed(2));
    let stats = pool.stats();
    assert!(stats.contained_panics >= 1, "{stats:?}");
    assert_eq!(stats.panicked, 1, "{stats:?}");
    within_bound("dropping the pool", move || drop(pool));
}

#[test]
fn a_key_whose_drop_panics_on_a_worker_does_not_kill_it() {
    let rules = Rules::new("drop-worker");
    rules.drop.store(true, SeqCst);
    let pool = TimerPool::builder()
        .workers(1)
        .thread_name("drop-worker")
        .build()
        .unwrap();
    // Each task's key is dropped on the only worker after its run; that
    // used to kill the worker, so the second task never ran.
    let handles: Vec<_> = (0..20)
        .map(|i| pool.schedule(Hostile::new(i, &rules), Duration::ZERO, move || i))
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(done(h.unwrap()), Outcome::Completed(i as u64));
    }
    let pending = pool.schedule(Hostile::new(99, &rules), Duration::from_millis(20), || 99);
    let pending = pending.unwrap();
    within_bound("a graceful shutdown", {
        let pool = Arc::new(pool);
        move || pool.shutdown()
    });
    assert_eq!(done(pending), Outcome::Completed(99));
}

#[test]
fn an_exclusive_key_whose_eq_panics_while_it_is_released_does_not_stay_busy() {
    let rules = Rules::new("eq-release");
    rules.once.store(true, SeqCst);
    let pool = Arc::new(
        TimerPool::builder()
            .workers(2)
            .thread_name("eq-release")
            .exclusive_keys(true)
            .build()
            .unwrap(),
    );
    let (started_tx, started_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let r = rules.clone();
    let first = pool
        .schedule(Hostile::new(7, &rules), Duration::ZERO, move || {
            started_tx.send(()).unwrap();
            go_rx.recv_timeout(BOUND).unwrap();
            // The release after this run, on this worker, compares the key:
            // make that panic (the leader, another thread, may be claiming
            // the held task meanwhile; its comparisons do not panic).
            *r.thread.lock().unwrap() = std::thread::current().name().map(String::from);
            r.eq.store(true, SeqCst);
        })
        .unwrap();
    started_rx.recv_timeout(BOUND).unwrap();
    // Due while key 7 runs: held until the key is released.
    let second = pool
        .schedule(Hostile::new(7, &rules), Duration::ZERO, || 2)
        .unwrap();
    go_tx.send(()).unwrap();
    assert_eq!(done(first), Outcome::Completed(()));
    assert_eq!(done(second), Outcome::Completed(2));
    within_bound("a graceful shutdown", move || pool.shutdown());
}

/// The pool whose keys' `Drop` calls back into it.
static REENTRANT: OnceLock<TimerPool<Reentrant>> = OnceLock::new();

/// A key whose `Drop` asks its pool how many tasks are pending.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Reentrant(u64);

impl Drop for Reentrant {
    fn drop(&mut self) {
        if let Some(pool) = REENTRANT.get() {
            let _ = pool.len();
        }
    }
}

#[test]
fn a_key_dropped_by_a_replace_or_a_cancel_is_dropped_outside_the_pool_lock() {
    let pool = REENTRANT.get_or_init(|| TimerPool::builder().workers(1).build().unwrap());
    within_bound("replacing and cancelling keys that call the pool", || {
        let pool = REENTRANT.get().unwrap();
        for i in 0..100 {
            let far = Duration::from_secs(60);
            let first = pool.schedule(Reentrant(i), far, || ()).unwrap();
            let second = pool.schedule(Reentrant(i), far, || ()).unwrap();
            assert_eq!(done(first), Outcome::Replaced);
            assert!(pool.cancel(&Reentrant(i)));
            assert_eq!(done(second), Outcome::Cancelled);
        }
    });
    assert!(pool.is_empty());
}

/// A clock that panics on the pool's threads while `broken` is set.
#[derive(Debug)]
struct FlakyClock {
    broken: Arc<AtomicBool>,
    calls: Arc<AtomicU64>,
}

impl Clock for FlakyClock {
    fn now(&self) -> Instant {
        let on_pool = std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with("flaky-clock"));
        if on_pool && self.broken.load(SeqCst) {
            self.calls.fetch_add(1, SeqCst);
            panic!("the clock failed");
        }
        Instant::now()
    }
}

#[test]
fn a_clock_that_panics_on_a_pool_thread_is_contained() {
    let broken = Arc::new(AtomicBool::new(true));
    let calls = Arc::new(AtomicU64::new(0));
    let clock = FlakyClock {
        broken: broken.clone(),
        calls: calls.clone(),
    };
    let pool = TimerPool::<u64>::builder()
        .workers(2)
        .thread_name("flaky-clock")
        .clock(clock)
        .build()
        .unwrap();
    let h = pool.schedule(1, Duration::from_millis(20), || 1).unwrap();
    eventually("the clock to fail on a pool thread", || {
        calls.load(SeqCst) > 0
    });
    broken.store(false, SeqCst);
    // A panicking reading counts as time standing still: the task waits for
    // a good reading, then runs; the leader survived.
    assert_eq!(done(h), Outcome::Completed(1));
    assert_eq!(
        done(pool.schedule(2, Duration::ZERO, || 2).unwrap()),
        Outcome::Completed(2)
    );
    assert!(pool.stats().contained_panics > 0);
    within_bound("dropping the pool", move || drop(pool));
}

#[test]
fn dropping_a_pool_whose_only_worker_waits_on_a_queued_task_returns() {
    let pool = Arc::new(TimerPool::<u64>::builder().workers(1).build().unwrap());
    let (inner_tx, inner_rx) = mpsc::channel();
    let p = pool.clone();
    // The only worker runs `outer`, which waits for a task claimed on
    // arrival behind it in the hand-off queue: it can never run.
    let outer = pool
        .submit(Duration::ZERO, move || {
            let inner = p.submit(Duration::ZERO, || "inner").unwrap();
            drop(p);
            inner_tx.send(()).unwrap();
            inner.wait()
        })
        .unwrap();
    inner_rx.recv_timeout(BOUND).unwrap();
    let pool = Arc::try_unwrap(pool).unwrap_or_else(|_| panic!("the task let go of the pool"));
    within_bound("dropping the pool", move || drop(pool));
    assert_eq!(done(outer), Outcome::Completed(Outcome::Shutdown));
}

/// About 250 years: 250 * 365.25 days.
const YEARS_250: Duration = Duration::from_secs(250 * 31_557_600);

#[test]
fn a_periodic_tick_past_the_clock_range_ends_the_task_instead_of_running_early() {
    let (clock, pool) = manual_pool::<u64>(1);
    clock.advance(YEARS_250);
    let (tx, rx) = mpsc::channel();
    let every_century = Repeat::fixed_rate(Duration::from_secs(100 * 31_557_600));
    let tick = pool
        .schedule_repeating(1, clock.now(), every_century, move || tx.send(()).unwrap())
        .unwrap();
    rx.recv_timeout(BOUND).unwrap();
    // The next tick, 350 years after the start, lies past the range: it used
    // to be clamped to its end (about 292 years) and run there, early.
    assert_eq!(tick.wait_timeout(BOUND).unwrap(), Outcome::Expired);
    clock.advance(Duration::MAX);
    assert!(rx.try_recv().is_err(), "ran again after the range ended");
}

#[test]
fn at_the_end_of_the_clock_a_periodic_task_stops_instead_of_spinning() {
    let (clock, pool) = manual_pool::<u64>(1);
    let runs = Arc::new(AtomicU64::new(0));
    let r = runs.clone();
    let every = Repeat::fixed_rate(Duration::from_millis(1));
    let tick = pool
        .schedule_repeating(1, Duration::from_millis(1), every, move || {
            r.fetch_add(1, SeqCst);
        })
        .unwrap();
    clock.advance(Duration::MAX);
    // It used to run hundreds of thousands of times a second there, its
    // next due time and the clamped clock being the same value.
    assert_eq!(tick.wait_timeout(BOUND).unwrap(), Outcome::Expired);
    assert!(runs.load(SeqCst) <= 2, "{} runs", runs.load(SeqCst));
    // Work due now is still taken at the end of the clock, given either way.
    let at = pool.schedule(2, clock.now(), || 2).unwrap();
    let after = pool.schedule(3, Duration::ZERO, || 3).unwrap();
    assert_eq!(done(at), Outcome::Completed(2));
    assert_eq!(done(after), Outcome::Completed(3));
}

#[test]
fn a_clock_that_jumps_past_its_range_stops_periodic_tasks_once() {
    let clock = ManualClock::new();
    let pool = TimerPool::<u64>::builder()
        .workers(2)
        .clock(clock.clone())
        .build()
        .unwrap();
    let runs = Arc::new(AtomicU64::new(0));
    let r = runs.clone();
    let tick = pool
        .submit_repeating(
            clock.now(),
            Repeat::fixed_delay(Duration::from_secs(1)),
            move || {
                r.fetch_add(1, SeqCst);
            },
        )
        .unwrap();
    eventually("the first run", || runs.load(SeqCst) >= 1);
    clock.advance(Duration::from_secs(300 * 31_557_600));
    assert_eq!(tick.wait_timeout(BOUND).unwrap(), Outcome::Expired);
    assert!(runs.load(SeqCst) <= 2, "{} runs", runs.load(SeqCst));
}
