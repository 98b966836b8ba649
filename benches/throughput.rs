//! Burst throughput: one producer submits 1,000,000 zero-delay no-op tasks
//! (scrambled u64 keys) to 2 workers; time from the first submit to the last
//! completion. Reported by criterion as tasks per second. The batch variants
//! submit through `schedule_batch_at` (a handle per task) and
//! `schedule_batch_detached_at` (no handles).

mod common;

use common::pools::{Naive, Pool, Stp, Timerpool, TimerpoolDetached, Tokio, WORKERS};
use common::workloads::{burst, burst_batch, burst_batch_detached};
use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use std::time::Duration;

/// Tasks per burst.
const N: usize = 1_000_000;
/// Tasks per `schedule_batch_at` call in the batch variant.
const CHUNK: usize = 256;

fn run<P: Pool>(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
) {
    let pool = P::start();
    c.bench_function(BenchmarkId::new(name, WORKERS), |b| {
        b.iter_custom(|iters| (0..iters).map(|_| burst(&pool, N)).sum())
    });
    pool.finish();
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("burst");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(N as u64));
    run::<Timerpool>(&mut g, "timerpool");
    run::<TimerpoolDetached>(&mut g, "timerpool-detached");
    {
        let pool = Timerpool::start();
        g.bench_function(BenchmarkId::new("timerpool-batch", WORKERS), |b| {
            b.iter_custom(|iters| (0..iters).map(|_| burst_batch(&pool.0, N, CHUNK)).sum())
        });
        pool.finish();
    }
    {
        let pool = Timerpool::start();
        g.bench_function(BenchmarkId::new("timerpool-batch-detached", WORKERS), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| burst_batch_detached(&pool.0, N, CHUNK))
                    .sum()
            })
        });
        pool.finish();
    }
    run::<Stp>(&mut g, "scheduled-thread-pool");
    run::<Tokio>(&mut g, "tokio");
    run::<Naive>(&mut g, "naive");
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
