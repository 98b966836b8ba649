//! Session timeouts (`common::session`, the shorter `SessionSpec::SHORT`):
//! 10,000 keyed sessions with a 1 s timeout, 25 touches and closes every
//! 1 ms for 1 s, then the drain, on `timerpool` and on tokio-util's
//! `DelayQueue` (one task owning the queue in a 2-worker tokio runtime).
//!
//! Each criterion sample is one whole run and its time is the run's wall
//! time, from the first open to the last expiry: the schedule fixes most of
//! it, so it shows an implementation falling behind the events or expiring
//! late, not what the run cost. Criterion cannot measure CPU time, and the
//! question this workload answers is the CPU each implementation spends:
//! that is `bench_report --only session`, which runs each implementation in
//! a process of its own and reads the process CPU. The table printed at the
//! end gives the lateness of the expiries, medians over the runs.

mod common;

use common::pools::{timerpool_builder, WORKERS};
use common::session::{session_delayqueue, session_timerpool, SessionRun, SessionSpec};
use criterion::{BenchmarkId, Criterion, SamplingMode};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

static RUNS: Mutex<BTreeMap<&'static str, Vec<SessionRun>>> = Mutex::new(BTreeMap::new());

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn bench(c: &mut Criterion) {
    let spec = SessionSpec::SHORT;
    let mut g = c.benchmark_group("session");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_millis(1));
    type Runner = fn(SessionSpec, u64) -> SessionRun;
    let impls: [(&'static str, Runner); 3] = [
        ("timerpool", |spec, seed| {
            let builder = timerpool_builder("timerpool", WORKERS).expect("a variant in the table");
            session_timerpool(spec, seed, builder, None)
        }),
        ("timerpool-slack2ms", |spec, seed| {
            let builder =
                timerpool_builder("timerpool-slack2ms", WORKERS).expect("a variant in the table");
            session_timerpool(spec, seed, builder, None)
        }),
        ("delayqueue", |spec, seed| {
            session_delayqueue(spec, seed, WORKERS, None)
        }),
    ];
    for (name, run) in impls {
        // Both implementations get the same seeds in the same order.
        let mut seed = 0;
        g.bench_function(BenchmarkId::new(name, spec.sessions), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    seed += 1;
                    let r = run(spec, seed);
                    total += r.wall;
                    RUNS.lock().unwrap().entry(name).or_default().push(r);
                }
                total
            })
        });
    }
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    println!("\nsession expiries' lateness in µs, median over runs");
    println!(
        "{:<12} {:>4} {:>9} {:>8} {:>8} {:>9} {:>6}",
        "impl", "runs", "expired", "p50", "p99", "max", "early"
    );
    for (name, runs) in RUNS.lock().unwrap().iter() {
        let m = |f: &dyn Fn(&SessionRun) -> f64| median(runs.iter().map(f).collect());
        println!(
            "{:<12} {:>4} {:>9.0} {:>8.1} {:>8.1} {:>9.1} {:>6}",
            name,
            runs.len(),
            m(&|r| r.expired() as f64),
            m(&|r| r.hist.value_at_quantile(0.5) as f64 / 1e3),
            m(&|r| r.hist.value_at_quantile(0.99) as f64 / 1e3),
            m(&|r| r.hist.max() as f64 / 1e3),
            runs.iter().map(|r| r.early + r.unmatched).sum::<u64>(),
        );
    }
    c.final_summary();
}
