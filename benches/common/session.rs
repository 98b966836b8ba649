//! The session-timeout workload: many keyed sessions, each expiring a fixed
//! time after its last touch, driven by a stream of touches and closes
//! every millisecond; then everything still open expires. The same seeded
//! event stream drives `timerpool` and tokio-util's `DelayQueue`, so the two
//! are compared on identical work. Each expiry records its lateness (the
//! start of its handling minus its due time).
//!
//! The callers measure what this module cannot: `bench_report --only session`
//! runs each implementation in a child process of its own and reads the
//! process CPU over the child's life; the criterion bench `benches/session.rs`
//! times whole runs.

use super::scramble;
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::fs::File;
use std::future::poll_fn;
use std::io::{BufWriter, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use timerpool::{Builder, TaskContext, TimerPool};
use tokio_util::time::{delay_queue, DelayQueue};

/// The shape of a session run.
#[derive(Debug, Clone, Copy)]
pub struct SessionSpec {
    /// Sessions, all open at the start; ids `0..sessions`.
    pub sessions: usize,
    /// The first deadlines are spread uniformly over `first_from..first_to`
    /// after the start.
    pub first_from: Duration,
    /// See `first_from`.
    pub first_to: Duration,
    /// A touch moves the session's deadline to now + `timeout`.
    pub timeout: Duration,
    /// The driver wakes at every multiple of `tick` after the start...
    pub tick: Duration,
    /// ...`ticks` times...
    pub ticks: usize,
    /// ...and applies `per_tick` events each time.
    pub per_tick: usize,
    /// Events that close (cancel) their session, per thousand; the others
    /// touch it (and reopen it if it expired or was closed).
    pub close_per_mille: u32,
    /// Percent of the events that go to the first half of the ids (the hot
    /// half); the others go to the second half.
    pub hot_percent: u32,
}

impl SessionSpec {
    /// The report's run: 100,000 sessions, first deadlines over 0.5-1.5 s, a
    /// 1 s timeout, 250 events every 1 ms for 4 s (97% touches, 3% closes,
    /// 70% to the hot half), then the drain.
    pub const FULL: SessionSpec = SessionSpec {
        sessions: 100_000,
        first_from: Duration::from_millis(500),
        first_to: Duration::from_millis(1500),
        timeout: Duration::from_secs(1),
        tick: Duration::from_millis(1),
        ticks: 4_000,
        per_tick: 250,
        close_per_mille: 30,
        hot_percent: 70,
    };

    /// The criterion bench's shorter run: a tenth of the sessions and of the
    /// event rate (so each session sees the same touches per second), 1 s
    /// of events.
    pub const SHORT: SessionSpec = SessionSpec {
        sessions: 10_000,
        ticks: 1_000,
        per_tick: 25,
        ..SessionSpec::FULL
    };
}

/// One event of the stream: the session id it hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Move the session's deadline to now + timeout, or reopen it.
    Touch(usize),
    /// Cancel the session if it is open.
    Close(usize),
}

/// The seeded event stream; the same seed gives the same events.
pub struct Events {
    rng: SmallRng,
    spec: SessionSpec,
}

impl Events {
    /// The stream of `seed`.
    pub fn new(spec: SessionSpec, seed: u64) -> Self {
        Events {
            rng: SmallRng::seed_from_u64(seed),
            spec,
        }
    }

    /// The next event.
    pub fn next_event(&mut self) -> Event {
        let half = self.spec.sessions / 2;
        let id = if self.rng.gen_range(0..100) < self.spec.hot_percent {
            self.rng.gen_range(0..half)
        } else {
            half + self.rng.gen_range(0..self.spec.sessions - half)
        };
        if self.rng.gen_range(0..1000) < self.spec.close_per_mille {
            Event::Close(id)
        } else {
            Event::Touch(id)
        }
    }
}

/// The first deadline of every session, as offsets from the start (a
/// stream of its own, derived from `seed`).
pub fn first_deadlines(spec: SessionSpec, seed: u64) -> Vec<Duration> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5E55_1025);
    let (from, to) = (
        spec.first_from.as_nanos() as u64,
        spec.first_to.as_nanos() as u64,
    );
    (0..spec.sessions)
        .map(|_| Duration::from_nanos(rng.gen_range(from..to)))
        .collect()
}

/// A session's business key: ids scrambled, so that no structure profits
/// from sequential keys.
pub fn key(id: usize) -> u64 {
    scramble(id as u64)
}

/// What a session run observed.
#[derive(Debug, Clone)]
pub struct SessionRun {
    /// Lateness of every expiry that started at or after its due time (ns).
    pub hist: Histogram<u64>,
    /// Expiries that started before their due time (must be 0).
    pub early: u64,
    /// Expiries whose due time could not be found (must be 0).
    pub unmatched: u64,
    /// Touches that moved an open session's deadline.
    pub touches: u64,
    /// Touches that reopened an expired or closed session.
    pub reopens: u64,
    /// Closes that cancelled an open session.
    pub closes: u64,
    /// From the start (before the first open) to the last expiry.
    pub wall: Duration,
}

impl SessionRun {
    /// Sessions that expired (late, on time or early).
    pub fn expired(&self) -> u64 {
        self.hist.len() + self.early + self.unmatched
    }
}

/// Where expiries are recorded: the histogram, and the log line per expiry
/// if a log file was given.
struct Expiries {
    hist: Histogram<u64>,
    early: u64,
    unmatched: u64,
    log: Option<BufWriter<File>>,
}

impl Expiries {
    fn new(log: Option<File>) -> Self {
        Expiries {
            hist: Histogram::new_with_bounds(1, 60_000_000_000, 3).unwrap(),
            early: 0,
            unmatched: 0,
            log: log.map(BufWriter::new),
        }
    }

    /// One expiry of the session under `key`, `late` nanoseconds after its
    /// due time (`None`: started before it).
    fn record(&mut self, key: u64, late: Option<u64>) {
        match late {
            Some(ns) => self.hist.saturating_record(ns.max(1)),
            None => self.early += 1,
        }
        if let Some(log) = &mut self.log {
            // A failed write loses a log line, not the measurement.
            let _ = writeln!(
                log,
                "session {key:016x} expired {} ns late",
                late.unwrap_or(0)
            );
        }
    }

    fn finish(mut self, counts: [u64; 3], wall: Duration) -> SessionRun {
        if let Some(log) = &mut self.log {
            let _ = log.flush();
        }
        SessionRun {
            hist: self.hist,
            early: self.early,
            unmatched: self.unmatched,
            touches: counts[0],
            reopens: counts[1],
            closes: counts[2],
            wall,
        }
    }
}

// ---------------------------------------------------------------- timerpool

/// The expiry task of the session under `key`: its lateness is the time
/// its closure starts less the due time the pool ran it for
/// ([`TaskContext::due`]), as the DelayQueue arm reads each expiry's
/// deadline from the queue.
fn expiry(out: &'static Mutex<Expiries>, key: u64) -> impl FnOnce() + Send + 'static {
    move || {
        let now = Instant::now();
        let Some(ctx) = TaskContext::current() else {
            out.lock().unwrap().unmatched += 1;
            return;
        };
        let late = now.checked_duration_since(ctx.due());
        out.lock()
            .unwrap()
            .record(key, late.map(|d| d.as_nanos() as u64));
    }
}

/// The session workload on `timerpool`, built from `builder`: the calling
/// thread is the driver (`schedule_detached` to open and reopen,
/// `reschedule(&key, timeout)` to touch, `cancel(&key)` to close), each
/// expiry a task, `shutdown()` the drain. The pool's keys are the only
/// record of which sessions are open: a touch whose `reschedule` finds no
/// pending task reopens the session. Expiries log to `log` if given.
pub fn session_timerpool(
    spec: SessionSpec,
    seed: u64,
    builder: Builder<u64>,
    log: Option<File>,
) -> SessionRun {
    let pool: TimerPool<u64> = builder.build().expect("a pool from the variants' table");
    let firsts = first_deadlines(spec, seed);
    let mut events = Events::new(spec, seed);
    let t0 = Instant::now();
    // Leaked (once per run) rather than shared through an `Arc`: a
    // reference count per task would be the measurement's cost, charged to
    // the pool.
    let out: &'static Mutex<Expiries> = Box::leak(Box::new(Mutex::new(Expiries::new(log))));
    for (id, first) in firsts.iter().enumerate() {
        pool.schedule_detached(key(id), t0 + *first, expiry(out, key(id)))
            .expect("an open");
    }
    // Touches, reopens, closes.
    let mut counts = [0u64; 3];
    for tick in 0..spec.ticks {
        let mark = t0 + spec.tick * tick as u32;
        let now = Instant::now();
        if mark > now {
            std::thread::sleep(mark - now);
        }
        for _ in 0..spec.per_tick {
            match events.next_event() {
                Event::Touch(id) => {
                    let k = key(id);
                    if pool.reschedule(&k, spec.timeout).expect("a touch") {
                        counts[0] += 1;
                    } else {
                        pool.schedule_detached(k, spec.timeout, expiry(out, k))
                            .expect("a reopen");
                        counts[1] += 1;
                    }
                }
                Event::Close(id) => {
                    // A failed cancel: the session expired or was closed
                    // before.
                    if pool.cancel(&key(id)) {
                        counts[2] += 1;
                    }
                }
            }
        }
    }
    pool.shutdown();
    let wall = t0.elapsed();
    drop(pool);
    let out = std::mem::replace(&mut *out.lock().unwrap(), Expiries::new(None));
    out.finish(counts, wall)
}

// ---------------------------------------------------------------- DelayQueue

/// The session workload on tokio-util's `DelayQueue` in a multi-thread tokio
/// runtime with `workers` workers: one spawned task owns the queue and a map
/// from session key to queue key, and `select!`s between a 1 ms interval
/// (the same events) and the queue's expiries; then it drains the queue.
/// Expiries log to `log` if given.
pub fn session_delayqueue(
    spec: SessionSpec,
    seed: u64,
    workers: usize,
    log: Option<File>,
) -> SessionRun {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_time()
        .build()
        .expect("a tokio runtime");
    let run = rt.block_on(async move {
        tokio::spawn(delayqueue_task(spec, seed, log))
            .await
            .expect("the queue's task")
    });
    drop(rt);
    run
}

async fn delayqueue_task(spec: SessionSpec, seed: u64, log: Option<File>) -> SessionRun {
    let firsts = first_deadlines(spec, seed);
    let mut events = Events::new(spec, seed);
    let mut out = Expiries::new(log);
    let t0 = Instant::now();
    let mut queue: DelayQueue<u64> = DelayQueue::new();
    let mut keys: HashMap<u64, delay_queue::Key, foldhash::fast::RandomState> = HashMap::default();
    for (id, first) in firsts.iter().enumerate() {
        let k = queue.insert_at(key(id), (t0 + *first).into());
        keys.insert(key(id), k);
    }
    let expired = |out: &mut Expiries, e: &delay_queue::Expired<u64>| {
        let late = tokio::time::Instant::now().checked_duration_since(e.deadline());
        out.record(*e.get_ref(), late.map(|d| d.as_nanos() as u64));
    };
    let mut interval = tokio::time::interval_at(t0.into(), spec.tick);
    let mut counts = [0u64; 3];
    let mut ticks = 0;
    while ticks < spec.ticks {
        tokio::select! {
            _ = interval.tick() => {
                ticks += 1;
                for _ in 0..spec.per_tick {
                    match events.next_event() {
                        Event::Touch(id) => {
                            let k = key(id);
                            if let Some(qk) = keys.get(&k) {
                                queue.reset(qk, spec.timeout);
                                counts[0] += 1;
                            } else {
                                keys.insert(k, queue.insert(k, spec.timeout));
                                counts[1] += 1;
                            }
                        }
                        Event::Close(id) => {
                            if let Some(qk) = keys.remove(&key(id)) {
                                queue.remove(&qk);
                                counts[2] += 1;
                            }
                        }
                    }
                }
            }
            Some(e) = poll_fn(|cx| queue.poll_expired(cx)) => {
                expired(&mut out, &e);
                keys.remove(e.get_ref());
            }
        }
    }
    while let Some(e) = poll_fn(|cx| queue.poll_expired(cx)).await {
        expired(&mut out, &e);
        keys.remove(e.get_ref());
    }
    out.finish(counts, t0.elapsed())
}
