//! The workloads of the suite, shared by the criterion benches and
//! `benches/tools/src/bin/bench_report.rs`.

use super::naive::{NaiveHandle, NaivePool};
use super::pools::Pool;
use super::{ctx_switches, live_bytes, scramble};
use cpu_time::{ProcessTime, ThreadTime};
use hdrhistogram::Histogram;
use std::hint::black_box;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Counts tasks down and wakes the waiter when the last one finished.
pub struct Countdown {
    left: AtomicUsize,
    done: Mutex<bool>,
    cv: Condvar,
}

impl Countdown {
    /// A countdown from `n`.
    pub fn new(n: usize) -> Arc<Self> {
        Arc::new(Countdown {
            left: AtomicUsize::new(n),
            done: Mutex::new(n == 0),
            cv: Condvar::new(),
        })
    }
    /// One task finished.
    pub fn hit(&self) {
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            *self.done.lock().unwrap() = true;
            self.cv.notify_all();
        }
    }
    /// Block until every task finished.
    pub fn wait(&self) {
        let mut d = self.done.lock().unwrap();
        while !*d {
            d = self.cv.wait(d).unwrap();
        }
    }
}

// ---------------------------------------------------------------- burst

/// Burst: one producer submits `n` zero-delay no-op tasks under scrambled
/// keys; the time from the first submit to the last completion.
pub fn burst<P: Pool>(pool: &P, n: usize) -> Duration {
    let done = Countdown::new(n);
    let start = Instant::now();
    for i in 0..n {
        let d = done.clone();
        pool.at(scramble(i as u64), Instant::now(), move || d.hit());
    }
    done.wait();
    start.elapsed()
}

/// Burst through `TimerPool::schedule_batch_at` (a handle per task), in
/// chunks of `chunk`.
pub fn burst_batch(pool: &timerpool::TimerPool<u64>, n: usize, chunk: usize) -> Duration {
    burst_chunked(n, chunk, |keys, now, done| {
        let batch = keys.map(|j| {
            let d = done.clone();
            (scramble(j as u64), now, move || d.hit())
        });
        pool.schedule_batch(batch).unwrap();
    })
}

/// Burst through `TimerPool::schedule_batch_detached_at` (no handles), in
/// chunks of `chunk`.
pub fn burst_batch_detached(pool: &timerpool::TimerPool<u64>, n: usize, chunk: usize) -> Duration {
    burst_chunked(n, chunk, |keys, now, done| {
        let batch = keys.map(|j| {
            let d = done.clone();
            (scramble(j as u64), now, move || d.hit())
        });
        pool.schedule_batch_detached(batch).unwrap();
    })
}

/// The chunked burst loop: `submit(counters, now, countdown)` hands one
/// chunk of task counters, due `now`, to the pool; the time from the first
/// chunk to the last completion.
fn burst_chunked(
    n: usize,
    chunk: usize,
    mut submit: impl FnMut(std::ops::Range<usize>, Instant, &Arc<Countdown>),
) -> Duration {
    let done = Countdown::new(n);
    let start = Instant::now();
    let mut i = 0;
    while i < n {
        let end = (i + chunk).min(n);
        submit(i..end, Instant::now(), &done);
        i = end;
    }
    done.wait();
    start.elapsed()
}

// ---------------------------------------------------------------- lateness

/// What a lateness run observed.
#[derive(Debug, Clone)]
pub struct Lateness {
    /// Lateness of every on-time or late start, in nanoseconds.
    pub hist: Histogram<u64>,
    /// Starts before the due time (must be 0).
    pub early: u64,
    /// Process CPU time from the end of submission to the last completion.
    pub cpu: Duration,
    /// Wall time of the same span.
    pub wall: Duration,
}

impl Lateness {
    /// A percentile in microseconds.
    pub fn us(&self, q: f64) -> f64 {
        self.hist.value_at_quantile(q) as f64 / 1e3
    }
    /// The maximum in microseconds.
    pub fn max_us(&self) -> f64 {
        self.hist.max() as f64 / 1e3
    }
}

fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).unwrap()
}

fn collect(marks: &[AtomicI64]) -> (Histogram<u64>, u64) {
    let mut hist = new_hist();
    let mut early = 0;
    for m in marks {
        let v = m.load(Ordering::Relaxed);
        if v < 0 {
            early += 1;
        } else {
            hist.record(v.max(1) as u64).unwrap();
        }
    }
    (hist, early)
}

/// Nanoseconds from `due` to now, or -1 for a start before it.
fn late_since(due: Instant) -> i64 {
    let now = Instant::now();
    if now >= due {
        (now - due).as_nanos() as i64
    } else {
        -1
    }
}

impl Lateness {
    /// The marks of a run that began at `cpu0` / `wall0` and ends now.
    fn of(marks: &[AtomicI64], cpu0: ProcessTime, wall0: Instant) -> Self {
        let (cpu, wall) = (cpu0.elapsed(), wall0.elapsed());
        let (hist, early) = collect(marks);
        Lateness {
            hist,
            early,
            cpu,
            wall,
        }
    }
}

/// Lateness: `n` tasks with due times spread evenly over `spread`, submitted
/// in scrambled order before the first is due; each records `start - due`.
pub fn lateness<P: Pool>(pool: &P, n: usize, spread: Duration) -> Lateness {
    let marks: Arc<Vec<AtomicI64>> = Arc::new((0..n).map(|_| AtomicI64::new(0)).collect());
    let done = Countdown::new(n);
    let t0 = Instant::now() + Duration::from_millis(300);
    let step = spread.as_nanos() as u64 / n as u64;
    for i in 0..n {
        // A bijection of 0..n (n is not a power of two in general, so walk
        // by a step coprime with n).
        let j = (i as u64 * 7_919 % n as u64) as usize;
        let due = t0 + Duration::from_nanos(j as u64 * step);
        let (m, d) = (marks.clone(), done.clone());
        pool.at(scramble(j as u64), due, move || {
            m[j].store(late_since(due), Ordering::Relaxed);
            d.hit();
        });
    }
    let cpu0 = ProcessTime::now();
    let wall0 = Instant::now();
    done.wait();
    Lateness::of(&marks, cpu0, wall0)
}

/// What a mixed-lengths run observed.
#[derive(Debug, Clone)]
pub struct Mixed {
    /// Lateness of the short tasks' starts.
    pub short: Lateness,
    /// Short tasks that started more than 1 ms late while fewer than all
    /// workers ran long tasks (a free worker could have started them).
    pub stalled: u64,
}

/// Which stretches of a run had every worker busy with a long task.
struct AllBusy {
    /// Long tasks running now.
    running: AtomicI64,
    /// When the latest all-busy stretch began (ns since the run's start).
    began: AtomicI64,
    /// When the latest all-busy stretch ended (ns since the run's start).
    ended: AtomicI64,
    /// The run's start.
    t0: Instant,
    /// Workers in the pool.
    workers: i64,
}

impl AllBusy {
    fn ns(&self) -> i64 {
        self.t0.elapsed().as_nanos() as i64
    }

    /// Run a long task of `long`.
    fn long(&self, long: Duration) {
        if self.running.fetch_add(1, Ordering::SeqCst) + 1 == self.workers {
            self.began.store(self.ns(), Ordering::SeqCst);
        }
        std::thread::sleep(long);
        if self.running.fetch_sub(1, Ordering::SeqCst) == self.workers {
            self.ended.store(self.ns(), Ordering::SeqCst);
        }
    }

    /// True if a task due at `due` and starting now could have been started
    /// earlier: every worker ran a long task from its due time until just
    /// before now (the 200 µs grant the hand-off from the long task's end).
    fn stalled_with_a_free_worker(&self, due: Instant) -> bool {
        let due = due.saturating_duration_since(self.t0).as_nanos() as i64;
        let (began, ended) = (
            self.began.load(Ordering::SeqCst),
            self.ended.load(Ordering::SeqCst),
        );
        let covered = began <= due && ended >= began && ended >= self.ns() - 200_000;
        !covered
    }
}

/// Mixed task lengths: `n` tasks due evenly over `spread`, every `every`-th
/// sleeps `long` (occupying a worker), the others return at once. Records
/// the short tasks' lateness, and how many of them started more than 1 ms
/// late although not every worker was running a long task all that time.
pub fn mixed<P: Pool>(
    pool: &P,
    n: usize,
    spread: Duration,
    every: usize,
    long: Duration,
    workers: usize,
) -> Mixed {
    let marks: Arc<Vec<AtomicI64>> = Arc::new((0..n).map(|_| AtomicI64::new(i64::MIN)).collect());
    let stalled = Arc::new(AtomicUsize::new(0));
    let done = Countdown::new(n);
    let t0 = Instant::now() + Duration::from_millis(300);
    let busy = Arc::new(AllBusy {
        running: AtomicI64::new(0),
        began: AtomicI64::new(i64::MAX),
        ended: AtomicI64::new(i64::MIN),
        t0,
        workers: workers as i64,
    });
    let step = spread.as_nanos() as u64 / n as u64;
    for i in 0..n {
        let due = t0 + Duration::from_nanos(i as u64 * step);
        let (m, d, b, st) = (marks.clone(), done.clone(), busy.clone(), stalled.clone());
        let is_long = i % every == every - 1;
        pool.at(scramble(i as u64), due, move || {
            if is_long {
                b.long(long);
            } else {
                let late = late_since(due);
                if late > 1_000_000 && b.stalled_with_a_free_worker(due) {
                    st.fetch_add(1, Ordering::Relaxed);
                }
                m[i].store(late, Ordering::Relaxed);
            }
            d.hit();
        });
    }
    let cpu0 = ProcessTime::now();
    let wall0 = Instant::now();
    done.wait();
    let shorts: Vec<AtomicI64> = marks
        .iter()
        .map(|m| m.load(Ordering::Relaxed))
        .filter(|&v| v != i64::MIN)
        .map(AtomicI64::new)
        .collect();
    Mixed {
        short: Lateness::of(&shorts, cpu0, wall0),
        stalled: stalled.load(Ordering::Relaxed) as u64,
    }
}

/// Preemption: while a task due in 10 s is pending, `trials` times schedule
/// a task due in 1 ms and record its lateness.
pub fn preemption<P: Pool>(pool: &P, trials: usize) -> Lateness {
    pool.at(u64::MAX, Instant::now() + Duration::from_secs(10), || {});
    let marks: Arc<Vec<AtomicI64>> = Arc::new((0..trials).map(|_| AtomicI64::new(0)).collect());
    let cpu0 = ProcessTime::now();
    let wall0 = Instant::now();
    for i in 0..trials {
        // Let the pool settle back into its wait on the far task.
        std::thread::sleep(Duration::from_micros(500));
        let done = Countdown::new(1);
        let (m, d) = (marks.clone(), done.clone());
        let due = Instant::now() + Duration::from_millis(1);
        pool.at(scramble(i as u64), due, move || {
            m[i].store(late_since(due), Ordering::Relaxed);
            d.hit();
        });
        done.wait();
    }
    Lateness::of(&marks, cpu0, wall0)
}

/// Sparse timers: `n` tasks due `gap` apart, the first `gap` from now, so
/// that the pool idles `gap` before each; each records `start - due`. The
/// CPU is the whole run's.
pub fn sparse<P: Pool>(pool: &P, n: usize, gap: Duration) -> Lateness {
    let marks: Arc<Vec<AtomicI64>> = Arc::new((0..n).map(|_| AtomicI64::new(0)).collect());
    let done = Countdown::new(n);
    let cpu0 = ProcessTime::now();
    let wall0 = Instant::now();
    for i in 0..n {
        let due = wall0 + gap * (i as u32 + 1);
        let (m, d) = (marks.clone(), done.clone());
        pool.at(scramble(i as u64), due, move || {
            m[i].store(late_since(due), Ordering::Relaxed);
            d.hit();
        });
    }
    done.wait();
    Lateness::of(&marks, cpu0, wall0)
}

/// What an idle run cost.
#[derive(Debug, Clone, Copy)]
pub struct Idle {
    /// Process CPU time over the idle span.
    pub cpu: Duration,
    /// Context switches of the process's threads over the idle span.
    pub wakeups: u64,
}

/// Idle cost: `timers` tasks due in an hour, then `span` of doing nothing.
pub fn idle<P: Pool>(pool: &P, timers: usize, span: Duration) -> Idle {
    let far = Instant::now() + Duration::from_secs(3600);
    for i in 0..timers {
        pool.at(
            scramble(i as u64),
            far + Duration::from_micros(i as u64),
            || {},
        );
    }
    // Let the workers settle before measuring.
    std::thread::sleep(Duration::from_millis(100));
    let sw0 = ctx_switches();
    let cpu0 = ProcessTime::now();
    std::thread::sleep(span);
    let cpu = cpu0.elapsed();
    // The sleeping main thread itself switches once or twice.
    Idle {
        cpu,
        wakeups: ctx_switches().saturating_sub(sw0),
    }
}

// ---------------------------------------------------------------- churn

/// A keyed timer structure under the churn workload. `i` is the entry's
/// counter, `key` its scrambled business key.
pub trait Churn {
    /// Add a timer.
    fn insert(&mut self, i: usize, key: u64, due: Instant);
    /// Move a pending timer to a new due time.
    fn reschedule(&mut self, i: usize, key: u64, due: Instant);
    /// Cancel a pending timer.
    fn cancel(&mut self, i: usize, key: u64);
    /// A runtime to enter around the timed loops, for structures that need one.
    fn runtime(&self) -> Option<tokio::runtime::Handle> {
        None
    }
}

/// What a churn run measured.
#[derive(Debug, Clone, Copy)]
pub struct ChurnResult {
    /// Nanoseconds per insert, reschedule, cancel.
    pub ns: [f64; 3],
    /// The same in the measuring thread's CPU time: on a loaded machine it
    /// leaves out the time the thread waited for a CPU.
    pub cpu_ns: [f64; 3],
    /// Live heap bytes after each phase, above the baseline before inserting.
    pub bytes: [i64; 3],
}

/// Churn: insert `n` far timers, reschedule each once (later), cancel all.
/// `make` builds the structure; caller-side storage it preallocates is not
/// counted.
pub fn churn<C: Churn>(n: usize, make: impl FnOnce(usize) -> C) -> ChurnResult {
    churn_phases(n, 3, make)
}

/// [`churn`], stopping after the first `phases` phases (1: insert only, 2:
/// insert and reschedule), so that a profiler's counts of runs with 1, 2
/// and 3 phases give each phase's share by difference.
pub fn churn_phases<C: Churn>(
    n: usize,
    phases: usize,
    make: impl FnOnce(usize) -> C,
) -> ChurnResult {
    let mut c = make(n);
    let base = Instant::now() + Duration::from_secs(3600);
    let due = |i: usize, round: u64| {
        let jitter = scramble(i as u64 ^ round.wrapping_mul(0x9E37)) % 10_000_000_000;
        base + Duration::from_nanos(round * 10_000_000_000 + jitter)
    };
    // Precompute the dues so the timed loops do only the operation.
    let first: Vec<Instant> = (0..n).map(|i| due(i, 0)).collect();
    let second: Vec<Instant> = (0..n).map(|i| due(i, 1)).collect();
    let order: Vec<usize> = (0..n).map(|i| (i * 7_919) % n).collect();
    let rt = c.runtime();
    let _entered = rt.as_ref().map(|h| h.enter());
    let b0 = live_bytes();
    let mut ns = [0.0; 3];
    let mut cpu_ns = [0.0; 3];
    let mut bytes = [0; 3];
    let per_op = |d: Duration| d.as_nanos() as f64 / n as f64;

    let (t, cpu) = (Instant::now(), ThreadTime::now());
    for (i, &due) in first.iter().enumerate() {
        c.insert(i, scramble(i as u64), due);
    }
    (ns[0], cpu_ns[0]) = (per_op(t.elapsed()), per_op(cpu.elapsed()));
    bytes[0] = live_bytes() - b0;

    if phases < 2 {
        // Not dropped: tearing down a full structure is no phase's cost.
        std::mem::forget(c);
        return ChurnResult { ns, cpu_ns, bytes };
    }
    let (t, cpu) = (Instant::now(), ThreadTime::now());
    for &i in &order {
        c.reschedule(i, scramble(i as u64), second[i]);
    }
    (ns[1], cpu_ns[1]) = (per_op(t.elapsed()), per_op(cpu.elapsed()));
    bytes[1] = live_bytes() - b0;

    if phases < 3 {
        std::mem::forget(c);
        return ChurnResult { ns, cpu_ns, bytes };
    }
    let (t, cpu) = (Instant::now(), ThreadTime::now());
    for i in 0..n {
        let i = order[(i * 31) % n];
        c.cancel(i, scramble(i as u64));
    }
    (ns[2], cpu_ns[2]) = (per_op(t.elapsed()), per_op(cpu.elapsed()));
    bytes[2] = live_bytes() - b0;
    black_box(&c);
    drop(c);
    ChurnResult { ns, cpu_ns, bytes }
}

/// The keyed core, `Scheduler<u64>`, through its thread-safe `&self` API.
pub struct ChurnScheduler {
    /// The scheduler.
    pub s: timerpool::Scheduler<u64>,
    /// Time zero of the scheduler's units (nanoseconds).
    pub t0: Instant,
}

impl ChurnScheduler {
    /// A scheduler with room for `n` keys.
    pub fn new(n: usize) -> Self {
        ChurnScheduler {
            s: timerpool::Scheduler::new(n.max(1)).unwrap(),
            t0: Instant::now(),
        }
    }
    fn ns(&self, due: Instant) -> i64 {
        (due - self.t0).as_nanos() as i64
    }
}

impl Churn for ChurnScheduler {
    fn insert(&mut self, _i: usize, key: u64, due: Instant) {
        let d = self.ns(due);
        self.s
            .schedule(key, d, move || {
                black_box(key);
            })
            .unwrap();
    }
    fn reschedule(&mut self, i: usize, key: u64, due: Instant) {
        self.insert(i, key, due);
    }
    fn cancel(&mut self, _i: usize, key: u64) {
        assert!(self.s.cancel(&key));
    }
}

/// The pool's keyed API, `TimerPool<u64>::schedule_at` (a handle per task,
/// dropped at once) and `cancel`.
pub struct ChurnPool(pub timerpool::TimerPool<u64>);

impl ChurnPool {
    /// A pool with 2 workers.
    pub fn new(_n: usize) -> Self {
        ChurnPool(
            timerpool::TimerPool::builder()
                .workers(super::pools::WORKERS)
                .build()
                .unwrap(),
        )
    }
}

impl Churn for ChurnPool {
    fn insert(&mut self, _i: usize, key: u64, due: Instant) {
        drop(
            self.0
                .schedule(key, due, move || {
                    black_box(key);
                })
                .unwrap(),
        );
    }
    fn reschedule(&mut self, i: usize, key: u64, due: Instant) {
        self.insert(i, key, due);
    }
    fn cancel(&mut self, _i: usize, key: u64) {
        assert!(self.0.cancel(&key));
    }
}

/// The pool's keyed API without handles, `TimerPool<u64>::schedule_detached`
/// and `cancel`: what a user who never reads the outcome calls.
pub struct ChurnPoolDetached(pub timerpool::TimerPool<u64>);

impl ChurnPoolDetached {
    /// A pool with 2 workers.
    pub fn new(n: usize) -> Self {
        ChurnPoolDetached(ChurnPool::new(n).0)
    }
}

impl Churn for ChurnPoolDetached {
    fn insert(&mut self, _i: usize, key: u64, due: Instant) {
        self.0
            .schedule_detached(key, due, move || {
                black_box(key);
            })
            .unwrap();
    }
    fn reschedule(&mut self, i: usize, key: u64, due: Instant) {
        self.insert(i, key, due);
    }
    fn cancel(&mut self, _i: usize, key: u64) {
        assert!(self.0.cancel(&key));
    }
}

/// tokio-util's `DelayQueue`, with the slab keys held by the caller in a
/// preallocated vector indexed by the entry's counter (its best case: no map
/// from business key to slab key).
pub struct ChurnDelayQueue {
    q: tokio_util::time::DelayQueue<u64>,
    keys: Vec<Option<tokio_util::time::delay_queue::Key>>,
    rt: tokio::runtime::Runtime,
}

impl ChurnDelayQueue {
    /// An empty queue inside a current-thread runtime (its timer is needed).
    pub fn new(n: usize) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let q = {
            let _g = rt.enter();
            tokio_util::time::DelayQueue::new()
        };
        ChurnDelayQueue {
            q,
            keys: vec![None; n],
            rt,
        }
    }
}

impl Churn for ChurnDelayQueue {
    fn insert(&mut self, i: usize, key: u64, due: Instant) {
        self.keys[i] = Some(self.q.insert_at(key, due.into()));
    }
    fn reschedule(&mut self, i: usize, _key: u64, due: Instant) {
        self.q.reset_at(self.keys[i].as_ref().unwrap(), due.into());
    }
    fn cancel(&mut self, i: usize, _key: u64) {
        let k = self.keys[i].take().unwrap();
        black_box(self.q.remove(&k));
    }
    fn runtime(&self) -> Option<tokio::runtime::Handle> {
        Some(self.rt.handle().clone())
    }
}

/// tokio-util's `DelayQueue` behind a map from business key to slab key
/// (foldhash, like timerpool's index): what a caller with its own keys (trip
/// ids) needs to reschedule or cancel by key, the same API timerpool offers.
pub struct ChurnDelayQueueMap {
    q: tokio_util::time::DelayQueue<u64>,
    keys: std::collections::HashMap<
        u64,
        tokio_util::time::delay_queue::Key,
        foldhash::fast::RandomState,
    >,
    rt: tokio::runtime::Runtime,
}

impl ChurnDelayQueueMap {
    /// An empty queue and map inside a current-thread runtime.
    pub fn new(_n: usize) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let q = {
            let _g = rt.enter();
            tokio_util::time::DelayQueue::new()
        };
        ChurnDelayQueueMap {
            q,
            keys: Default::default(),
            rt,
        }
    }
}

impl Churn for ChurnDelayQueueMap {
    fn insert(&mut self, _i: usize, key: u64, due: Instant) {
        let k = self.q.insert_at(key, due.into());
        self.keys.insert(key, k);
    }
    fn reschedule(&mut self, _i: usize, key: u64, due: Instant) {
        self.q.reset_at(&self.keys[&key], due.into());
    }
    fn cancel(&mut self, _i: usize, key: u64) {
        let k = self.keys.remove(&key).unwrap();
        black_box(self.q.remove(&k));
    }
    fn runtime(&self) -> Option<tokio::runtime::Handle> {
        Some(self.rt.handle().clone())
    }
}

/// `scheduled-thread-pool`: reschedule is cancel (a flag) plus a new job;
/// handles held by the caller in a preallocated vector.
pub struct ChurnStp {
    pool: scheduled_thread_pool::ScheduledThreadPool,
    handles: Vec<Option<scheduled_thread_pool::JobHandle>>,
}

impl ChurnStp {
    /// A pool with 2 workers.
    pub fn new(n: usize) -> Self {
        ChurnStp {
            pool: scheduled_thread_pool::ScheduledThreadPool::new(super::pools::WORKERS),
            handles: (0..n).map(|_| None).collect(),
        }
    }
}

impl Churn for ChurnStp {
    fn insert(&mut self, i: usize, key: u64, due: Instant) {
        let delay = due.saturating_duration_since(Instant::now());
        self.handles[i] = Some(self.pool.execute_after(delay, move || {
            black_box(key);
        }));
    }
    fn reschedule(&mut self, i: usize, key: u64, due: Instant) {
        if let Some(h) = self.handles[i].take() {
            h.cancel();
        }
        self.insert(i, key, due);
    }
    fn cancel(&mut self, i: usize, _key: u64) {
        self.handles[i].take().unwrap().cancel();
    }
}

/// The naive pool: reschedule is flag plus a new entry.
pub struct ChurnNaive {
    pool: Option<NaivePool>,
    handles: Vec<Option<NaiveHandle>>,
}

impl ChurnNaive {
    /// A naive pool with 2 workers.
    pub fn new(n: usize) -> Self {
        ChurnNaive {
            pool: Some(NaivePool::new(super::pools::WORKERS)),
            handles: (0..n).map(|_| None).collect(),
        }
    }
}

impl Churn for ChurnNaive {
    fn insert(&mut self, i: usize, key: u64, due: Instant) {
        self.handles[i] = Some(self.pool.as_ref().unwrap().at(due, move || {
            black_box(key);
        }));
    }
    fn reschedule(&mut self, i: usize, key: u64, due: Instant) {
        if let Some(h) = self.handles[i].take() {
            h.cancel();
        }
        self.insert(i, key, due);
    }
    fn cancel(&mut self, i: usize, _key: u64) {
        self.handles[i].take().unwrap().cancel();
    }
}

impl Drop for ChurnNaive {
    fn drop(&mut self) {
        if let Some(p) = self.pool.take() {
            p.shutdown();
        }
    }
}
