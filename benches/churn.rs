//! Churn at 1,000,000 pending far timers: insert all, reschedule each once
//! (to a later time), cancel all. One criterion group per phase
//! (`churn_insert`, `churn_reschedule`, `churn_cancel`); every sample is one
//! real run of the whole sequence, and each group reports its own phase's
//! time (a run's other two phase times are kept for the next groups, so each
//! sequence is run once, not three times). Live heap bytes after each phase
//! are printed at the end, from a counting allocator.

mod common;

use common::workloads::{
    churn, Churn, ChurnDelayQueue, ChurnDelayQueueMap, ChurnNaive, ChurnPool, ChurnPoolDetached,
    ChurnResult, ChurnScheduler, ChurnStp,
};
use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use stats_alloc::StatsAlloc;
use std::alloc::System;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

#[global_allocator]
static A: &StatsAlloc<System> = common::COUNTING;

/// Pending timers.
const N: usize = 1_000_000;
const PHASES: [&str; 3] = ["churn_insert", "churn_reschedule", "churn_cancel"];

type Runner = fn() -> ChurnResult;

fn impls() -> Vec<(&'static str, Runner)> {
    fn r<C: Churn>(make: fn(usize) -> C) -> ChurnResult {
        churn(N, make)
    }
    vec![
        ("timerpool-scheduler", || r(ChurnScheduler::new)),
        ("timerpool-pool-detached", || r(ChurnPoolDetached::new)),
        ("timerpool-pool", || r(ChurnPool::new)),
        ("delayqueue", || r(ChurnDelayQueue::new)),
        ("delayqueue+map", || r(ChurnDelayQueueMap::new)),
        ("scheduled-thread-pool", || r(ChurnStp::new)),
        ("naive", || r(ChurnNaive::new)),
    ]
}

/// Unused phase times of earlier runs, and every run, of one implementation.
type Runs = ([VecDeque<Duration>; 3], Vec<ChurnResult>);

/// Per implementation: its runs so far.
static STASH: Mutex<BTreeMap<&'static str, Runs>> = Mutex::new(BTreeMap::new());

fn phase_time(name: &'static str, run: Runner, phase: usize) -> Duration {
    let mut stash = STASH.lock().unwrap();
    let entry = stash.entry(name).or_default();
    if let Some(d) = entry.0[phase].pop_front() {
        return d;
    }
    let r = run();
    entry.1.push(r);
    for (p, q) in entry.0.iter_mut().enumerate() {
        if p != phase {
            q.push_back(Duration::from_nanos((r.ns[p] * N as f64) as u64));
        }
    }
    Duration::from_nanos((r.ns[phase] * N as f64) as u64)
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    for (phase, group) in PHASES.iter().enumerate() {
        let mut g = c.benchmark_group(*group);
        g.sample_size(10)
            .sampling_mode(SamplingMode::Flat)
            .warm_up_time(Duration::from_millis(1))
            .measurement_time(Duration::from_secs(1))
            .throughput(Throughput::Elements(N as u64));
        for (name, run) in impls() {
            g.bench_function(BenchmarkId::new(name, N), |b| {
                b.iter_custom(|iters| (0..iters).map(|_| phase_time(name, run, phase)).sum())
            });
        }
        g.finish();
    }
    println!("\nchurn at {N} pending: live heap bytes per entry after each phase (median of runs)");
    println!(
        "{:<24} {:>8} {:>12} {:>12} {:>12}",
        "implementation", "runs", "insert", "reschedule", "cancel-all"
    );
    for (name, (_, runs)) in STASH.lock().unwrap().iter() {
        if runs.is_empty() {
            continue;
        }
        let med = |p: usize| {
            let mut v: Vec<i64> = runs.iter().map(|r| r.bytes[p]).collect();
            v.sort_unstable();
            v[v.len() / 2] as f64 / N as f64
        };
        println!(
            "{:<24} {:>8} {:>12.1} {:>12.1} {:>12.1}",
            name,
            runs.len(),
            med(0),
            med(1),
            med(2)
        );
    }
    c.final_summary();
}
