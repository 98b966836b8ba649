//! Soak: bursts, key churn and panics against one pool for a fixed time, with
//! the accounting and the resident memory printed as it goes.
//!
//! ```text
//! cargo run --release -p timerpool-bench-tools --bin soak -- --seconds N [--workers N] [--rss-growth-mib N]
//! ```
//!
//! Producers schedule, replace and cancel keyed tasks over a large key
//! space, submit keyless bursts due at one instant, and let a share of the
//! tasks panic. A collector takes every handle's outcome as it arrives, so
//! the soak's own bookkeeping stays bounded. At the end the pool is shut
//! down with `shutdown_now` while the producers still run and every task is
//! accounted for.
//!
//! Exits non-zero if:
//! - the accounting fails (an outcome missing or unexpected, a closure not
//!   dropped exactly once, a task started early, cancels and `Cancelled`
//!   outcomes disagree, the pool's `stats()` disagree with the outcomes), or
//! - the resident set grows, after warm-up (the first quarter of the run, at
//!   at least two seconds), by more than `--rss-growth-mib` (default 32 MiB) over
//!   its size at the end of warm-up.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};
use timerpool::{Error, Outcome, TaskHandle, TimerPool};

/// Every intentional panic's message starts with this.
const PANIC_TAG: &str = "intentional soak panic";
/// Keys the producers churn over.
const KEYS: u64 = 50_000;
/// Handles queued between the producers and the collector.
const IN_FLIGHT: usize = 50_000;
/// How long after the shutdown every outcome must have arrived.
const OUTCOME_BOUND: Duration = Duration::from_secs(30);

/// Counters shared by every thread.
#[derive(Default)]
struct Stats {
    created: AtomicU64,
    dropped: AtomicU64,
    ran: AtomicU64,
    early: AtomicU64,
    accepted: AtomicU64,
    refused: AtomicU64,
    cancels_true: AtomicU64,
    completed: AtomicU64,
    panicked: AtomicU64,
    cancelled: AtomicU64,
    replaced: AtomicU64,
    shutdown: AtomicU64,
    shutdown_keyed: AtomicU64,
    lost: AtomicU64,
    wrong: AtomicU64,
}

impl Stats {
    fn outcomes(&self) -> u64 {
        self.completed.load(Relaxed)
            + self.panicked.load(Relaxed)
            + self.cancelled.load(Relaxed)
            + self.replaced.load(Relaxed)
            + self.shutdown.load(Relaxed)
    }
}

/// Counts the drop of the closure it is moved into.
struct Guard(Arc<Stats>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.dropped.fetch_add(1, Relaxed);
    }
}

/// A task: never early, counted, sometimes panicking.
fn task(stats: &Arc<Stats>, due: Instant, panics: bool) -> impl FnOnce() -> u64 + Send + 'static {
    stats.created.fetch_add(1, Relaxed);
    let guard = Guard(stats.clone());
    move || {
        let g = guard;
        if Instant::now() < due {
            g.0.early.fetch_add(1, Relaxed);
        }
        g.0.ran.fetch_add(1, Relaxed);
        if panics {
            panic!("{PANIC_TAG}");
        }
        // A little work, so workers are busy for a moment.
        (0..64u64).fold(0, |a, b| a.wrapping_mul(31).wrapping_add(b))
    }
}

/// What travels to the collector: the handle, and whether its task panics.
type Sent = (TaskHandle<u64, u64>, bool);

fn producer(
    pool: Arc<TimerPool<u64>>,
    stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
    tx: mpsc::SyncSender<Sent>,
    seed: u64,
) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut last_burst = Instant::now();
    while !stop.load(Relaxed) {
        let now = Instant::now();
        if now.duration_since(last_burst) >= Duration::from_millis(500) {
            // Burst: thousands of keyless tasks due at one instant.
            last_burst = now;
            let due = now + Duration::from_millis(rng.gen_range(5..50));
            for _ in 0..rng.gen_range(1_000..10_000) {
                let panics = rng.gen_bool(0.05);
                if !send(&pool, &stats, &tx, None, due, panics) {
                    return;
                }
            }
            continue;
        }
        let key = rng.gen_range(0..KEYS);
        match rng.gen_range(0..100) {
            0..=19 => {
                if pool.cancel(&key) {
                    stats.cancels_true.fetch_add(1, Relaxed);
                }
            }
            roll => {
                // Mostly short timeouts; some long ones that churn without
                // firing; a few due at once.
                let delay = match roll {
                    20..=29 => Duration::ZERO,
                    30..=89 => Duration::from_micros(rng.gen_range(0..20_000)),
                    _ => Duration::from_millis(rng.gen_range(200..1_000)),
                };
                let panics = rng.gen_bool(0.05);
                if !send(&pool, &stats, &tx, Some(key), now + delay, panics) {
                    return;
                }
            }
        }
    }
}

/// Schedule one task and pass its handle on; false once the collector is gone.
fn send(
    pool: &TimerPool<u64>,
    stats: &Arc<Stats>,
    tx: &mpsc::SyncSender<Sent>,
    key: Option<u64>,
    due: Instant,
    panics: bool,
) -> bool {
    let f = task(stats, due, panics);
    let r = match key {
        Some(k) => pool.schedule(k, due, f),
        None => pool.submit(due, f),
    };
    match r {
        Ok(h) => {
            stats.accepted.fetch_add(1, Relaxed);
            tx.send((h, panics)).is_ok()
        }
        Err(Error::ShutDown) => {
            stats.refused.fetch_add(1, Relaxed);
            true
        }
        Err(e) => {
            eprintln!("FAIL: unexpected refusal {e}");
            stats.wrong.fetch_add(1, Relaxed);
            true
        }
    }
}

/// Take every handle's outcome as it arrives. Handles without one yet are
/// swept again later, so one long timeout never holds up the rest; each key
/// has at most one pending task, so the sweep list stays bounded.
fn collector(rx: mpsc::Receiver<Sent>, stats: Arc<Stats>) {
    let mut live: Vec<Sent> = Vec::new();
    loop {
        let mut closed = false;
        match rx.recv_timeout(Duration::from_millis(1)) {
            Ok(sent) => live.push(sent),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => closed = true,
        }
        while let Ok(sent) = rx.try_recv() {
            live.push(sent);
        }
        if closed {
            // The pool is gone: every outcome must be there now. One
            // deadline for all, so a run that lost many fails promptly.
            let deadline = Instant::now() + OUTCOME_BOUND;
            let mut lost = 0;
            for (h, panics) in live {
                let keyed = h.key().is_some();
                match h.wait_timeout(deadline.saturating_duration_since(Instant::now())) {
                    Ok(o) => tally(&stats, o, panics, keyed),
                    Err(_) => lost += 1,
                }
            }
            if lost > 0 {
                eprintln!(
                    "FAIL: {lost} tasks have no outcome {OUTCOME_BOUND:?} after the shutdown"
                );
                stats.lost.fetch_add(lost, Relaxed);
            }
            return;
        }
        live = live
            .into_iter()
            .filter_map(|(h, panics)| {
                let keyed = h.key().is_some();
                match h.try_outcome() {
                    Ok(o) => {
                        tally(&stats, o, panics, keyed);
                        None
                    }
                    Err(h) => Some((h, panics)),
                }
            })
            .collect();
    }
}

/// Count one outcome, checking it fits what the task does.
fn tally(stats: &Stats, o: Outcome<u64>, panics: bool, keyed: bool) {
    let counter = match (&o, panics) {
        (Outcome::Completed(_), false) => &stats.completed,
        (Outcome::Panicked(m), true) if m == PANIC_TAG => &stats.panicked,
        (Outcome::Cancelled, _) => &stats.cancelled,
        (Outcome::Replaced, _) => &stats.replaced,
        (Outcome::Shutdown, _) => {
            if keyed {
                stats.shutdown_keyed.fetch_add(1, Relaxed);
            }
            &stats.shutdown
        }
        (other, _) => {
            eprintln!("FAIL: unexpected outcome {other:?} (panics: {panics})");
            &stats.wrong
        }
    };
    counter.fetch_add(1, Relaxed);
}

/// Resident set size in KiB, from `/proc/self/status`.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn report(t: Duration, pending: usize, s: &Stats, rss: u64) {
    let accepted = s.accepted.load(Relaxed);
    println!(
        "{:>6.1}s accepted {accepted:>9} | done {:>9} (completed {} panicked {} cancelled {} \
         replaced {} shutdown {}) | in flight {:>6} | pending {:>6} | rss {:>6.1} MiB",
        t.as_secs_f64(),
        s.outcomes(),
        s.completed.load(Relaxed),
        s.panicked.load(Relaxed),
        s.cancelled.load(Relaxed),
        s.replaced.load(Relaxed),
        s.shutdown.load(Relaxed),
        accepted - s.outcomes(),
        pending,
        rss as f64 / 1024.0,
    );
}

struct Args {
    seconds: u64,
    workers: usize,
    rss_growth_mib: u64,
}

fn args() -> Args {
    let mut a = Args {
        seconds: 10,
        workers: num_cpus::get().max(2),
        rss_growth_mib: 32,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| -> u64 {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| usage(&format!("{name} needs a number")))
        };
        match flag.as_str() {
            "--seconds" => a.seconds = value("--seconds"),
            "--workers" => a.workers = value("--workers") as usize,
            "--rss-growth-mib" => a.rss_growth_mib = value("--rss-growth-mib"),
            "-h" | "--help" => usage(""),
            other => usage(&format!("unknown argument {other}")),
        }
    }
    a
}

fn usage(why: &str) -> ! {
    if !why.is_empty() {
        eprintln!("{why}");
    }
    eprintln!("usage: soak [--seconds N] [--workers N] [--rss-growth-mib N]");
    std::process::exit(2)
}

fn main() {
    let args = args();
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if !msg.starts_with(PANIC_TAG) {
            default_hook(info);
        }
    }));

    let run = Duration::from_secs(args.seconds);
    let warm_up = (run / 4).max(Duration::from_secs(2));
    let every = Duration::from_secs(if args.seconds >= 30 { 5 } else { 1 });
    let seed: u64 = rand::thread_rng().gen();
    println!(
        "soak: {} s, {} workers, {KEYS} keys, seed {seed}; RSS may grow at most {} MiB after a {:?} warm-up",
        args.seconds, args.workers, args.rss_growth_mib, warm_up
    );

    let pool = Arc::new(
        TimerPool::<u64>::builder()
            .workers(args.workers)
            .thread_name("soak")
            .build()
            .expect("pool"),
    );
    let stats = Arc::new(Stats::default());
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::sync_channel::<Sent>(IN_FLIGHT);
    let collector = {
        let stats = stats.clone();
        thread::spawn(move || collector(rx, stats))
    };
    let producers: Vec<_> = (0..2u64)
        .map(|i| {
            let (pool, stats, stop, tx) = (pool.clone(), stats.clone(), stop.clone(), tx.clone());
            thread::spawn(move || producer(pool, stats, stop, tx, seed.wrapping_add(i)))
        })
        .collect();
    drop(tx);

    let start = Instant::now();
    let mut next_report = start + every;
    let mut baseline: Option<u64> = None;
    let mut peak = 0;
    let mut failures = Vec::new();
    while start.elapsed() < run {
        let now = Instant::now();
        if now < next_report {
            thread::sleep((next_report - now).min(run.saturating_sub(start.elapsed())));
            continue;
        }
        next_report += every;
        let rss = rss_kib();
        report(start.elapsed(), pool.len(), &stats, rss);
        if start.elapsed() >= warm_up {
            let base = *baseline.get_or_insert(rss);
            peak = peak.max(rss);
            if rss > base + args.rss_growth_mib * 1024 {
                failures.push(format!(
                    "RSS {:.1} MiB grew more than {} MiB over the warm-up's {:.1} MiB",
                    rss as f64 / 1024.0,
                    args.rss_growth_mib,
                    base as f64 / 1024.0
                ));
                break;
            }
        }
    }

    // End while the producers still run: pending tasks come back unrun.
    let returned = pool.shutdown_now();
    stop.store(true, Relaxed);
    for p in producers {
        p.join().expect("producer");
    }
    // Workers joined, producers done: the pool's counters are final. (Read
    // while a schedule is still returning, `scheduled` can lag by that task.)
    let pool_stats = pool.stats();
    drop(pool);
    collector.join().expect("collector");
    let rss = rss_kib();
    report(start.elapsed(), 0, &stats, rss);

    let s = &stats;
    let get = |c: &AtomicU64| c.load(Relaxed);
    let accepted = get(&s.accepted);
    let mut check = |ok: bool, what: String| {
        if !ok {
            failures.push(what);
        }
    };
    check(
        s.outcomes() == accepted,
        format!("{} outcomes for {accepted} accepted tasks", s.outcomes()),
    );
    check(
        get(&s.lost) == 0,
        format!("{} tasks without an outcome", get(&s.lost)),
    );
    check(
        get(&s.wrong) == 0,
        format!("{} unexpected outcomes or refusals", get(&s.wrong)),
    );
    check(
        get(&s.created) == get(&s.dropped),
        format!(
            "{} closures created, {} dropped",
            get(&s.created),
            get(&s.dropped)
        ),
    );
    check(
        get(&s.ran) == get(&s.completed) + get(&s.panicked),
        format!(
            "{} closures ran, {} completed + panicked",
            get(&s.ran),
            get(&s.completed) + get(&s.panicked)
        ),
    );
    check(
        get(&s.early) == 0,
        format!("{} tasks started early", get(&s.early)),
    );
    check(
        get(&s.cancels_true) == get(&s.cancelled),
        format!(
            "{} successful cancels, {} Cancelled outcomes",
            get(&s.cancels_true),
            get(&s.cancelled)
        ),
    );
    check(
        returned.len() as u64 == get(&s.shutdown_keyed),
        format!(
            "shutdown_now returned {} keys, {} keyed Shutdown outcomes",
            returned.len(),
            get(&s.shutdown_keyed)
        ),
    );
    let mine = [
        accepted,
        get(&s.completed),
        get(&s.panicked),
        get(&s.cancelled),
        get(&s.replaced),
        get(&s.shutdown),
    ];
    let theirs = [
        pool_stats.scheduled,
        pool_stats.completed,
        pool_stats.panicked,
        pool_stats.cancelled,
        pool_stats.replaced,
        pool_stats.shutdown,
    ];
    check(
        mine == theirs,
        format!(
            "the pool's stats (scheduled, completed, panicked, cancelled, replaced, shutdown) \
             {theirs:?} disagree with the outcomes {mine:?}"
        ),
    );

    println!(
        "soak: {accepted} accepted, {} refused after shutdown, {} closures created, {} dropped; \
         RSS after warm-up {:.1} MiB, peak {:.1} MiB, end {:.1} MiB",
        get(&s.refused),
        get(&s.created),
        get(&s.dropped),
        baseline.unwrap_or(0) as f64 / 1024.0,
        peak as f64 / 1024.0,
        rss as f64 / 1024.0
    );
    if failures.is_empty() {
        println!("soak: OK");
    } else {
        for f in &failures {
            eprintln!("FAIL: {f}");
        }
        std::process::exit(1);
    }
}
