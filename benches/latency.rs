//! Timing precision: lateness (100,000 tasks spread over 2 s), preemption (a
//! task due in 1 ms scheduled while one due in 10 s is pending), sparse
//! timers (40 due 50 ms apart, the pool idle between) and idle cost (10,000
//! far timers, 3 s of idling).
//!
//! Lateness figures come from histograms, never from criterion's means: each
//! criterion sample is one whole run, the time it reports is that run's p99
//! lateness (`lateness`, `preemption`, `sparse`) or the process CPU time spent idling
//! (`idle`), and the percentile table printed at the end is the median over
//! all runs of each run's histogram percentiles, with early starts counted.

mod common;

use common::pools::{Naive, Pool, Stp, Timerpool, TimerpoolSpin, Tokio};
use common::workloads::{idle, lateness, preemption, sparse, Idle, Lateness};
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, SamplingMode};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

const TASKS: usize = 100_000;
const SPREAD: Duration = Duration::from_secs(2);
const TRIALS: usize = 200;
const IDLE_TIMERS: usize = 10_000;
const IDLE_SPAN: Duration = Duration::from_secs(3);
const SPARSE_TIMERS: usize = 40;
const SPARSE_GAP: Duration = Duration::from_millis(50);

static LATE: Mutex<BTreeMap<(&'static str, &'static str), Vec<Lateness>>> =
    Mutex::new(BTreeMap::new());
static IDLE: Mutex<BTreeMap<&'static str, Vec<Idle>>> = Mutex::new(BTreeMap::new());

fn p99(l: &Lateness) -> Duration {
    Duration::from_nanos(l.hist.value_at_quantile(0.99))
}

fn one<P: Pool>(g: &mut BenchmarkGroup<'_, WallTime>, what: &'static str, name: &'static str) {
    g.bench_function(BenchmarkId::new(name, common::pools::WORKERS), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let pool = P::start();
                let late = match what {
                    "lateness" => Some(lateness(&pool, TASKS, SPREAD)),
                    "preemption" => Some(preemption(&pool, TRIALS)),
                    "sparse" => Some(sparse(&pool, SPARSE_TIMERS, SPARSE_GAP)),
                    _ => None,
                };
                match late {
                    Some(l) => {
                        total += p99(&l);
                        LATE.lock()
                            .unwrap()
                            .entry((what, name))
                            .or_default()
                            .push(l);
                    }
                    None => {
                        let i = idle(&pool, IDLE_TIMERS, IDLE_SPAN);
                        total += i.cpu;
                        IDLE.lock().unwrap().entry(name).or_default().push(i);
                    }
                }
                pool.finish();
            }
            total
        })
    });
}

fn group(c: &mut Criterion, what: &'static str) {
    let mut g = c.benchmark_group(what);
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_millis(1));
    one::<Timerpool>(&mut g, what, "timerpool");
    one::<TimerpoolSpin>(&mut g, what, "timerpool-spin250us");
    one::<Stp>(&mut g, what, "scheduled-thread-pool");
    one::<Tokio>(&mut g, what, "tokio");
    one::<Naive>(&mut g, what, "naive");
    g.finish();
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    group(&mut c, "lateness");
    group(&mut c, "preemption");
    group(&mut c, "sparse");
    group(&mut c, "idle");
    println!("\nlateness in µs from histograms, median over runs; CPU = process CPU / wall");
    println!(
        "{:<11} {:<22} {:>4} {:>8} {:>8} {:>8} {:>9} {:>6} {:>6}",
        "workload", "implementation", "runs", "p50", "p99", "p99.9", "max", "early", "CPU%"
    );
    for ((what, name), runs) in LATE.lock().unwrap().iter() {
        let m = |f: &dyn Fn(&Lateness) -> f64| median(runs.iter().map(f).collect());
        println!(
            "{:<11} {:<22} {:>4} {:>8.1} {:>8.1} {:>8.1} {:>9.1} {:>6} {:>6.1}",
            what,
            name,
            runs.len(),
            m(&|l| l.us(0.5)),
            m(&|l| l.us(0.99)),
            m(&|l| l.us(0.999)),
            m(&|l| l.max_us()),
            runs.iter().map(|l| l.early).sum::<u64>(),
            m(&|l| 100.0 * l.cpu.as_secs_f64() / l.wall.as_secs_f64()),
        );
    }
    println!("\nidle: {IDLE_TIMERS} far timers, {IDLE_SPAN:?} idle, median over runs");
    for (name, runs) in IDLE.lock().unwrap().iter() {
        println!(
            "{:<22} CPU {:>9.3} ms  wakeups {:>6}",
            name,
            median(runs.iter().map(|i| i.cpu.as_secs_f64() * 1e3).collect()),
            median(runs.iter().map(|i| i.wakeups as f64).collect()),
        );
    }
    c.final_summary();
}
