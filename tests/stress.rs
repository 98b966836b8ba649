//! Tests for accounting under load: producers schedule, replace, cancel and
//! submit at random while a shutdown arrives, and afterwards every task is
//! accounted for.
//!
//! Checked after every round:
//! - every accepted task has exactly one outcome, and completed + panicked +
//!   cancelled + replaced + shutdown + expired == accepted (expired only in
//!   rounds with a staleness tolerance);
//! - the outcome matches what happened to the closure (ran or not, returned
//!   or panicked, with its own id);
//! - no closure ran twice, and every closure, accepted or refused, run or
//!   not, was dropped exactly once;
//! - no task started before its due time on the pool's clock;
//! - successful cancels == `Cancelled` outcomes; `shutdown_now` returned
//!   exactly the keys whose outcome is `Shutdown`; a graceful `shutdown`
//!   leaves no `Shutdown` outcome;
//! - refusals are `ShutDown` only after the shutdown began (and from then on
//!   always), `CapacityReached` only when a capacity was set.
//! - after `shutdown_now` or the last drop, every outcome arrives without
//!   the manual clock moving again, and no worker thread outlives the pool;
//! - with exclusive keys, no two tasks of one key ever run at once;
//! - the pool's own counters (`stats()`) agree with the outcomes;
//! - a completion consumer (a channel read by its own thread in some rounds,
//!   a listener in the others) saw each accepted task exactly once, with the
//!   key and outcome its handle got, and never a record dropped.
//!
//! `TIMERPOOL_STRESS_SCALE=N` multiplies the rounds and the operations per
//! producer; `TIMERPOOL_STRESS_SEED=S` replays a run (the seed is printed).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Once, Weak};
use std::thread;
use std::time::{Duration, Instant};
use timerpool::{Clock, Completion, Error, ManualClock, Outcome, Stats, TaskHandle, TimerPool};

/// Generous bound for waits that must finish; a hang fails instead of blocking CI.
const BOUND: Duration = Duration::from_secs(20);
/// Producer threads per round.
const PRODUCERS: usize = 4;
/// Distinct keys the producers share.
const KEYS: u32 = 3_000;
/// Keys that take half the keyed traffic in rounds with exclusive keys.
const HOT_KEYS: u32 = 8;
/// Operations per producer per round at scale 1.
const OPS: usize = 10_000;
/// Rounds per test at scale 1.
const ROUNDS: usize = 10;
/// Every task's message when it panics on purpose.
const PANIC_TAG: &str = "intentional stress panic";

fn scale() -> usize {
    std::env::var("TIMERPOOL_STRESS_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(1)
}

fn base_seed() -> u64 {
    std::env::var("TIMERPOOL_STRESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen())
}

/// Keep the intentional panics out of the output; report all others.
fn quiet_intentional_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied())
                .unwrap_or("");
            if !msg.starts_with(PANIC_TAG) {
                default(info);
            }
        }));
    });
}

/// The time source of one round, as the tasks read it.
#[derive(Clone)]
enum TestClock {
    /// Moved by the producers and the test.
    Manual(ManualClock),
    /// Real time.
    System,
}

impl TestClock {
    fn now(&self) -> Instant {
        match self {
            TestClock::Manual(c) => c.now(),
            TestClock::System => Instant::now(),
        }
    }

    /// Longest delay a producer picks.
    fn max_delay(&self) -> Duration {
        match self {
            TestClock::Manual(_) => Duration::from_millis(20),
            TestClock::System => Duration::from_millis(3),
        }
    }
}

/// How a round ends while the producers still run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// `shutdown()`: pending work runs, new work is refused.
    Shutdown,
    /// `shutdown_now()`: pending work comes back unrun.
    ShutdownNow,
    /// The last strong reference is dropped (whichever thread holds it).
    Drop,
}

/// Per key: a task of this key is running now (checked with exclusive keys).
type Running = Vec<AtomicBool>;

/// What happened to one closure, written by the closure and its guard.
#[derive(Default)]
struct Record {
    /// Times the closure body started.
    runs: AtomicU32,
    /// Times the closure (its guard) was dropped.
    drops: AtomicU32,
    /// The closure started before its due time.
    early: AtomicBool,
}

/// Moved into every closure; counts the closure's drop.
struct Guard {
    table: Arc<Vec<Record>>,
    id: usize,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.table[self.id].drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// One round's settings.
#[derive(Debug, Clone, Copy)]
struct Config {
    seed: u64,
    workers: usize,
    capacity: Option<usize>,
    exclusive_keys: bool,
    /// Staleness tolerance: later starts are skipped as `Expired`.
    expire_after: Option<Duration>,
    manual: bool,
    ending: Ending,
    /// Completion records go to a channel read by a consumer thread (else
    /// to a listener).
    channel: bool,
    /// Percentage of all operations done when the shutdown is triggered.
    trigger_pct: usize,
    ops: usize,
}

impl Config {
    /// Every third round has exclusive keys and at least two workers, so
    /// every test checks them.
    fn random(seed: u64, round: usize, ending: Ending, ops: usize) -> Self {
        let exclusive_keys = round.is_multiple_of(3);
        let mut rng = SmallRng::seed_from_u64(seed);
        Config {
            seed,
            workers: rng.gen_range(if exclusive_keys { 2 } else { 1 }..=4),
            capacity: rng.gen_bool(0.3).then_some(KEYS as usize / 2),
            exclusive_keys,
            expire_after: rng
                .gen_bool(0.3)
                .then(|| Duration::from_micros(rng.gen_range(1_000..10_000))),
            manual: rng.gen_bool(0.6),
            ending,
            channel: rng.gen_bool(0.5),
            trigger_pct: rng.gen_range(30..=90),
            ops,
        }
    }
}

/// A closure this test created, and what the pool said to it.
struct Sent {
    id: usize,
    key: Option<u32>,
    panics: bool,
    result: Result<TaskHandle<usize, u32>, Error>,
}

/// What one producer observed.
#[derive(Default)]
struct ProducerLog {
    sent: Vec<Sent>,
    cancels_true: usize,
}

/// Everything shared by the threads of one round.
struct Round {
    cfg: Config,
    clock: TestClock,
    table: Arc<Vec<Record>>,
    /// Set just before the shutdown call (or the drop of the last reference
    /// the closer holds).
    closing: AtomicBool,
    /// Operations done by all producers.
    progress: AtomicUsize,
    /// Which keys have a task running.
    running: Running,
    /// Two tasks of one key ran at once although keys are exclusive.
    overlaps: AtomicUsize,
    /// The producer that triggers the shutdown waits here for the closer, so
    /// the rest of the operations race with the shutdown.
    closing_started: Barrier,
}

fn producer(
    round: Arc<Round>,
    pool: Weak<TimerPool<u32>>,
    index: usize,
    trigger: mpsc::Sender<()>,
) -> ProducerLog {
    let cfg = round.cfg;
    let mut rng =
        SmallRng::seed_from_u64(cfg.seed ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let total = cfg.ops * PRODUCERS;
    let trigger_at = total * cfg.trigger_pct / 100;
    let mut log = ProducerLog::default();
    let mut refused_shutdown = false;
    for step in 0..cfg.ops {
        let done = round.progress.fetch_add(1, Ordering::SeqCst) + 1;
        if done == trigger_at {
            trigger.send(()).unwrap();
            round.closing_started.wait();
        }
        let Some(pool) = pool.upgrade() else {
            break; // dropped: nothing left to talk to
        };
        let roll = rng.gen_range(0..100);
        match roll {
            0..=14 => {
                if pool.cancel(&rng.gen_range(0..KEYS)) {
                    log.cancels_true += 1;
                }
            }
            15..=24 => {
                if !log.sent.is_empty() {
                    let i = rng.gen_range(0..log.sent.len());
                    if let Ok(h) = &log.sent[i].result {
                        if h.cancel() {
                            log.cancels_true += 1;
                        }
                    }
                }
            }
            25..=32 if matches!(round.clock, TestClock::Manual(_)) => {
                if let TestClock::Manual(c) = &round.clock {
                    c.advance(Duration::from_micros(rng.gen_range(0..5_000)));
                }
            }
            _ => {
                let id = index * cfg.ops + step;
                let keyed = roll >= 50;
                // With exclusive keys, half the keyed tasks share a few hot
                // keys and are due at once, so a key's next task is often
                // due while the previous one still runs.
                let hot = keyed && cfg.exclusive_keys && rng.gen_bool(0.5);
                let key = keyed.then(|| {
                    if hot {
                        rng.gen_range(0..HOT_KEYS)
                    } else {
                        rng.gen_range(0..KEYS)
                    }
                });
                let panics = rng.gen_bool(0.1);
                let now = round.clock.now();
                let due = if hot {
                    now
                } else if rng.gen_bool(0.05) {
                    now.checked_sub(Duration::from_secs(1)).unwrap_or(now)
                } else {
                    now + rng.gen_range(Duration::ZERO..=round.clock.max_delay())
                };
                // Now and then a hot task stays running for a millisecond:
                // the window in which its key's next task falls due.
                let linger = if hot && rng.gen_bool(0.05) {
                    Duration::from_millis(1)
                } else {
                    Duration::ZERO
                };
                let f = task(&round, id, key, due, panics, linger);
                let result = match key {
                    Some(k) => pool.schedule(k, due, f),
                    None => pool.submit(due, f),
                };
                match &result {
                    Ok(_) => assert!(
                        !refused_shutdown,
                        "accepted a task after a ShutDown refusal"
                    ),
                    Err(Error::ShutDown) => {
                        assert!(
                            round.closing.load(Ordering::SeqCst),
                            "ShutDown before any shutdown began"
                        );
                        refused_shutdown = true;
                    }
                    Err(Error::CapacityReached { capacity }) => {
                        assert_eq!(Some(*capacity), cfg.capacity, "capacity refusal");
                    }
                    Err(e) => panic!("unexpected refusal {e:?}"),
                }
                log.sent.push(Sent {
                    id,
                    key,
                    panics,
                    result,
                });
            }
        }
    }
    log
}

/// The closure for task `id`: checks its start time, counts its run, returns
/// its id or panics.
fn task(
    round: &Arc<Round>,
    id: usize,
    key: Option<u32>,
    due: Instant,
    panics: bool,
    linger: Duration,
) -> impl FnOnce() -> usize + Send + 'static {
    let guard = Guard {
        table: round.table.clone(),
        id,
    };
    let round = round.clone();
    move || {
        let started = round.clock.now();
        let rec = &guard.table[guard.id];
        if started < due {
            rec.early.store(true, Ordering::SeqCst);
        }
        rec.runs.fetch_add(1, Ordering::SeqCst);
        if let Some(k) = key {
            let running = &round.running[k as usize];
            if running.swap(true, Ordering::SeqCst) {
                round.overlaps.fetch_add(1, Ordering::SeqCst);
            }
            // Stay running for a moment, so an overlapping run can show up
            // (busy: the task itself takes this long; no sleep).
            let t0 = Instant::now();
            while t0.elapsed() < linger {
                thread::yield_now();
            }
            running.store(false, Ordering::SeqCst);
        }
        if panics {
            panic!("{PANIC_TAG} {id}");
        }
        id
    }
}

/// Run `f` on a new thread whose result can be awaited with a bound.
fn spawn_bounded<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> mpsc::Receiver<thread::Result<T>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    rx
}

/// The result of a [`spawn_bounded`] thread within [`BOUND`], or a loud
/// failure naming what hung.
fn join_within<T>(rx: mpsc::Receiver<thread::Result<T>>, what: &str) -> T {
    match rx.recv_timeout(BOUND) {
        Ok(Ok(v)) => v,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("{what} did not finish within {BOUND:?}"),
    }
}

/// Outcome counts of one round.
#[derive(Debug, Default)]
struct Tally {
    accepted: usize,
    refused: usize,
    refused_shut_down: usize,
    completed: usize,
    panicked: usize,
    cancelled: usize,
    replaced: usize,
    shutdown: usize,
    expired: usize,
    /// Runs that started while another task of their key was running.
    overlaps: usize,
}

/// Worker-name prefix of one test's pools; each test has its own, since the
/// tests of this binary run in parallel.
fn thread_prefix(ending: Ending) -> &'static str {
    match ending {
        Ending::Shutdown => "st-graceful",
        Ending::ShutdownNow => "st-now",
        Ending::Drop => "st-drop",
    }
}

/// Wait, within [`BOUND`], until no thread whose name starts with `prefix`
/// is left. (A joined thread may be listed for a moment after `join`.)
fn await_no_threads_named(prefix: &str) {
    let deadline = Instant::now() + BOUND;
    loop {
        let left = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
            .filter(|name| name.starts_with(prefix))
            .count();
        if left == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{left} worker threads named {prefix}* outlived their pool"
        );
        thread::yield_now();
    }
}

fn run_round(cfg: Config) -> Tally {
    let clock = if cfg.manual {
        TestClock::Manual(ManualClock::new())
    } else {
        TestClock::System
    };
    let table: Arc<Vec<Record>> = Arc::new(
        (0..PRODUCERS * cfg.ops)
            .map(|_| Record::default())
            .collect(),
    );
    let mut builder = TimerPool::<u32>::builder()
        .workers(cfg.workers)
        .thread_name(thread_prefix(cfg.ending));
    if let Some(c) = cfg.capacity {
        builder = builder.capacity(c);
    }
    if let Some(t) = cfg.expire_after {
        builder = builder.expire_after(t);
    }
    builder = builder.exclusive_keys(cfg.exclusive_keys);
    if let TestClock::Manual(c) = &clock {
        builder = builder.clock(c.clone());
    }
    let records = Arc::new(std::sync::Mutex::new(Vec::new()));
    if cfg.channel {
        // Room for every task: a record is never dropped, whatever the
        // consumer's pace.
        builder = builder.completions(PRODUCERS * cfg.ops);
    } else {
        let records = records.clone();
        builder = builder.on_completion(move |c: &Completion<u32>| {
            records.lock().unwrap().push(c.clone());
        });
    }
    let pool = Arc::new(builder.build().unwrap());
    // The channel's consumer ends once the pool is dropped and its workers
    // are joined.
    let consumer = pool.completions().map(|rx| {
        let records = records.clone();
        spawn_bounded(move || rx.iter().for_each(|c| records.lock().unwrap().push(c)))
    });
    let round = Arc::new(Round {
        cfg,
        clock: clock.clone(),
        table: table.clone(),
        closing: AtomicBool::new(false),
        progress: AtomicUsize::new(0),
        running: (0..KEYS).map(|_| AtomicBool::new(false)).collect(),
        overlaps: AtomicUsize::new(0),
        closing_started: Barrier::new(2),
    });

    let (trigger_tx, trigger_rx) = mpsc::channel();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|i| {
            let (round, weak, trigger) = (round.clone(), Arc::downgrade(&pool), trigger_tx.clone());
            spawn_bounded(move || producer(round, weak, i, trigger))
        })
        .collect();
    drop(trigger_tx);
    let closer = {
        let round = round.clone();
        spawn_bounded(move || {
            trigger_rx
                .recv_timeout(BOUND)
                .expect("producers never reached the shutdown trigger");
            round.closing.store(true, Ordering::SeqCst);
            round.closing_started.wait();
            // The pool comes back so its counters can be read once the
            // producers are done too.
            match round.cfg.ending {
                Ending::Shutdown => {
                    pool.shutdown();
                    (None, Some(pool))
                }
                Ending::ShutdownNow => {
                    let keys = pool.shutdown_now();
                    (Some(keys), Some(pool))
                }
                Ending::Drop => {
                    drop(pool);
                    (None, None)
                }
            }
        })
    };
    let logs: Vec<ProducerLog> = producers
        .into_iter()
        .map(|p| join_within(p, "a producer"))
        .collect();
    if cfg.ending == Ending::Shutdown {
        // No more intake: move a manual clock past every due time, so the
        // graceful shutdown can finish. shutdown_now and drop must not leave
        // anything waiting for the clock, so for them it stays where it is.
        if let TestClock::Manual(c) = &clock {
            c.advance(clock.max_delay() + Duration::from_millis(1));
        }
    }
    let (returned_keys, pool) = join_within(closer, "the shutdown");
    // Workers joined, producers done: the counters are final. (Read while a
    // schedule is still returning, `scheduled` can lag the outcomes by that
    // task, since it is counted after the pool's lock is released.)
    let stats = pool.map(|p| p.stats());
    // The pool is gone (its last reference dropped by the closer, a producer
    // or just above), so its workers must be too.
    await_no_threads_named(thread_prefix(cfg.ending));

    // Every handle must be answered by now or very soon.
    let mut t = Tally::default();
    let mut ends = Vec::new();
    let mut cancels_true = 0;
    let mut shutdown_keys = Vec::new();
    let mut created = Vec::new();
    for log in logs {
        cancels_true += log.cancels_true;
        for sent in log.sent {
            created.push(sent.id);
            let rec = &table[sent.id];
            let h = match sent.result {
                Ok(h) => h,
                Err(e) => {
                    t.refused += 1;
                    t.refused_shut_down += usize::from(e == Error::ShutDown);
                    assert_eq!(
                        rec.runs.load(Ordering::SeqCst),
                        0,
                        "refused task {} ran",
                        sent.id
                    );
                    continue;
                }
            };
            t.accepted += 1;
            let outcome = match h.wait_timeout(BOUND) {
                Ok(o) => o,
                Err(_) => panic!("task {} has no outcome after {BOUND:?} ({cfg:?})", sent.id),
            };
            let runs = rec.runs.load(Ordering::SeqCst);
            ends.push((sent.key, unit(&outcome)));
            match outcome {
                Outcome::Completed(v) => {
                    assert_eq!(v, sent.id, "another task's value");
                    assert!(!sent.panics);
                    assert_eq!(runs, 1, "completed task {} ran {runs} times", sent.id);
                    t.completed += 1;
                }
                Outcome::Panicked(msg) => {
                    assert!(sent.panics);
                    assert_eq!(msg, format!("{PANIC_TAG} {}", sent.id));
                    assert_eq!(runs, 1, "panicked task {} ran {runs} times", sent.id);
                    t.panicked += 1;
                }
                other => {
                    assert_eq!(runs, 0, "task {} ran but its outcome is {other:?}", sent.id);
                    match other {
                        Outcome::Cancelled => t.cancelled += 1,
                        Outcome::Replaced => t.replaced += 1,
                        Outcome::Shutdown => {
                            t.shutdown += 1;
                            if let Some(k) = sent.key {
                                shutdown_keys.push(k);
                            }
                        }
                        Outcome::Expired => {
                            assert!(cfg.expire_after.is_some(), "expired without a tolerance");
                            t.expired += 1;
                        }
                        _ => unreachable!(),
                    }
                }
            }
        }
    }

    assert_eq!(
        t.completed + t.panicked + t.cancelled + t.replaced + t.shutdown + t.expired,
        t.accepted,
        "{t:?}"
    );
    t.overlaps = round.overlaps.load(Ordering::SeqCst);
    if cfg.exclusive_keys {
        assert_eq!(t.overlaps, 0, "an exclusive key ran twice at once");
    }
    if let Some(stats) = stats {
        check_stats(&stats, &t);
        assert_eq!(stats.completions_dropped, 0, "a completion record dropped");
    }
    if let Some(consumer) = consumer {
        join_within(consumer, "the completion consumer");
    }
    let records = std::mem::take(&mut *records.lock().unwrap());
    check_completions(records, ends);
    assert_eq!(
        cancels_true, t.cancelled,
        "successful cancels vs Cancelled outcomes"
    );
    let distinct: HashSet<u32> = shutdown_keys.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        shutdown_keys.len(),
        "two pending tasks under one key"
    );
    match cfg.ending {
        Ending::Shutdown => assert_eq!(t.shutdown, 0, "graceful shutdown left tasks unrun"),
        Ending::ShutdownNow => {
            let mut returned = returned_keys.expect("shutdown_now returns keys");
            returned.sort_unstable();
            shutdown_keys.sort_unstable();
            assert_eq!(returned, shutdown_keys, "keys returned by shutdown_now");
        }
        Ending::Drop => {}
    }
    for id in created {
        let rec = &table[id];
        assert_eq!(rec.drops.load(Ordering::SeqCst), 1, "closure {id} drops");
        assert!(
            rec.runs.load(Ordering::SeqCst) <= 1,
            "closure {id} ran twice"
        );
        assert!(
            !rec.early.load(Ordering::SeqCst),
            "task {id} started before its due time"
        );
    }
    t
}

/// An outcome without its value, as a completion record carries it.
fn unit<T>(o: &Outcome<T>) -> Outcome<()> {
    match o {
        Outcome::Completed(_) => Outcome::Completed(()),
        Outcome::Panicked(m) => Outcome::Panicked(m.clone()),
        Outcome::Cancelled => Outcome::Cancelled,
        Outcome::Replaced => Outcome::Replaced,
        Outcome::Shutdown => Outcome::Shutdown,
        Outcome::Expired => Outcome::Expired,
    }
}

/// The completion records against the handles' outcomes: the same
/// (key, outcome) pairs, each exactly once (a panic's message names its
/// task), and no task started before its due time.
fn check_completions(records: Vec<Completion<u32>>, mut ends: Vec<(Option<u32>, Outcome<()>)>) {
    for r in &records {
        if let (Some(due), Some(started)) = (r.due, r.started) {
            assert!(
                started >= due,
                "a record started before its due time: {r:?}"
            );
        }
    }
    let mut seen: Vec<_> = records.into_iter().map(|r| (r.key, r.outcome)).collect();
    let order = |a: &(Option<u32>, Outcome<()>), b: &(Option<u32>, Outcome<()>)| {
        (a.0, format!("{:?}", a.1)).cmp(&(b.0, format!("{:?}", b.1)))
    };
    seen.sort_by(order);
    ends.sort_by(order);
    assert_eq!(seen.len(), ends.len(), "records vs accepted tasks");
    assert!(
        seen == ends,
        "completion records differ from the handles' outcomes"
    );
}

/// The pool's counters, read once its workers were joined, against the
/// outcomes the handles reported.
fn check_stats(s: &Stats, t: &Tally) {
    let pool = (
        s.scheduled,
        s.completed,
        s.panicked,
        s.cancelled,
        s.replaced,
        s.shutdown,
        s.expired,
        s.pending,
    );
    let seen = (
        t.accepted as u64,
        t.completed as u64,
        t.panicked as u64,
        t.cancelled as u64,
        t.replaced as u64,
        t.shutdown as u64,
        t.expired as u64,
        0,
    );
    assert_eq!(
        pool, seen,
        "stats (scheduled, completed, panicked, cancelled, replaced, shutdown, expired, pending)"
    );
}

fn stress(ending: Ending, salt: u64) {
    quiet_intentional_panics();
    let scale = scale();
    let base = base_seed();
    println!("stress {ending:?}: TIMERPOOL_STRESS_SEED={base} TIMERPOOL_STRESS_SCALE={scale}");
    let mut rng = SmallRng::seed_from_u64(base ^ salt);
    let started = Instant::now();
    for round in 0..ROUNDS * scale {
        let cfg = Config::random(rng.gen(), round, ending, OPS * scale);
        let t0 = Instant::now();
        let t = run_round(cfg);
        println!("  {cfg:?}\n    {t:?} in {:?}", t0.elapsed());
    }
    println!("stress {ending:?}: done in {:?}", started.elapsed());
}

#[test]
fn every_task_is_accounted_for_when_shutdown_arrives_under_load() {
    stress(Ending::Shutdown, 0x5d);
}

#[test]
fn every_task_is_accounted_for_when_shutdown_now_arrives_under_load() {
    stress(Ending::ShutdownNow, 0x5e);
}

#[test]
fn every_task_is_accounted_for_when_the_pool_is_dropped_under_load() {
    stress(Ending::Drop, 0x5f);
}
