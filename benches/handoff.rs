//! The fair hand-off under mixed task lengths: 20,000 tasks due over 2 s,
//! every 250th sleeps 20 ms, on 2 and 4 workers, beside
//! scheduled-thread-pool. Each criterion sample is one whole run and the
//! time it reports is the short tasks' p99.9 lateness; the table printed at
//! the end has the medians of each run's percentiles, the stalls (short
//! tasks more than 1 ms late while not every worker ran a long task), early
//! starts and CPU.

mod common;

use common::pools::{Pool, Stp, Timerpool};
use common::workloads::{mixed, Mixed};
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, SamplingMode};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

const TASKS: usize = 20_000;
const SPREAD: Duration = Duration::from_secs(2);
const EVERY: usize = 250;
const LONG: Duration = Duration::from_millis(20);

static RUNS: Mutex<BTreeMap<(&'static str, usize), Vec<Mixed>>> = Mutex::new(BTreeMap::new());

fn one<P: Pool>(g: &mut BenchmarkGroup<'_, WallTime>, name: &'static str, workers: usize) {
    g.bench_function(BenchmarkId::new(name, workers), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let pool = P::start_with(workers);
                let m = mixed(&pool, TASKS, SPREAD, EVERY, LONG, workers);
                pool.finish();
                total += Duration::from_nanos(m.short.hist.value_at_quantile(0.999));
                RUNS.lock()
                    .unwrap()
                    .entry((name, workers))
                    .or_default()
                    .push(m);
            }
            total
        })
    });
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("mixed_lengths");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_millis(1));
    for workers in [2, 4] {
        one::<Timerpool>(&mut g, "timerpool", workers);
        one::<Stp>(&mut g, "scheduled-thread-pool", workers);
    }
    g.finish();
    println!("\nshort tasks' lateness in µs, median over runs; CPU = process CPU / wall");
    println!(
        "{:<22} {:>7} {:>4} {:>8} {:>8} {:>8} {:>9} {:>7} {:>6} {:>6}",
        "implementation",
        "workers",
        "runs",
        "p50",
        "p99",
        "p99.9",
        "max",
        "stalls",
        "early",
        "CPU%"
    );
    for ((name, workers), runs) in RUNS.lock().unwrap().iter() {
        let m = |f: &dyn Fn(&Mixed) -> f64| median(runs.iter().map(f).collect());
        println!(
            "{:<22} {:>7} {:>4} {:>8.1} {:>8.1} {:>8.1} {:>9.1} {:>7.0} {:>6} {:>6.1}",
            name,
            workers,
            runs.len(),
            m(&|r| r.short.us(0.5)),
            m(&|r| r.short.us(0.99)),
            m(&|r| r.short.us(0.999)),
            m(&|r| r.short.max_us()),
            m(&|r| r.stalled as f64),
            runs.iter().map(|r| r.short.early).sum::<u64>(),
            m(&|r| 100.0 * r.short.cpu.as_secs_f64() / r.short.wall.as_secs_f64()),
        );
    }
    c.final_summary();
}
