//! Keyed operations on PostgreSQL, one statement each on one connection:
//! timerpool's schedule (insert and replace), cancel and batched schedule,
//! beside the polling claimer's plain `INSERT` (no key, no replace, no
//! notification) as the naive baseline. The timing figures of
//! `docs/durable.md` come from `examples/pg_report.rs`.

#[path = "pg_work/mod.rs"]
mod pg_work;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::Duration;
use timerpool_pg::NewTask;

fn schedule(c: &mut Criterion) {
    let schema = "bench_criterion";
    let (mut client, q) = pg_work::fresh(schema);
    let far = Duration::from_secs(3600);
    let mut g = c.benchmark_group("pg_schedule");
    g.throughput(Throughput::Elements(1));
    let mut i = 0u64;
    g.bench_function(BenchmarkId::new("timerpool_insert", 1), |b| {
        b.iter(|| {
            i += 1;
            q.schedule(&mut client, &NewTask::new(format!("n{i}"), "h").after(far))
                .unwrap()
        })
    });
    g.bench_function(BenchmarkId::new("timerpool_replace", 1), |b| {
        b.iter(|| {
            q.schedule(&mut client, &NewTask::new("same", "h").after(far))
                .unwrap()
        })
    });
    g.bench_function(BenchmarkId::new("timerpool_schedule_cancel", 1), |b| {
        b.iter(|| {
            q.schedule(&mut client, &NewTask::new("c", "h").after(far))
                .unwrap();
            assert!(q.cancel(&mut client, "c").unwrap());
        })
    });
    let sql =
        format!("INSERT INTO {schema}.jobs (key, due) VALUES ($1, now() + interval '1 hour')");
    let st = client.prepare(&sql).unwrap();
    g.bench_function(BenchmarkId::new("polling_plain_insert", 1), |b| {
        b.iter(|| client.execute(&st, &[&"k"]).unwrap())
    });
    g.finish();
    let mut g = c.benchmark_group("pg_schedule_batch");
    g.throughput(Throughput::Elements(500));
    let mut round = 0u64;
    g.bench_function(BenchmarkId::new("timerpool", 500), |b| {
        b.iter(|| {
            round += 1;
            let batch: Vec<NewTask> = (0..500)
                .map(|k| NewTask::new(format!("b{round}-{k}"), "h").after(far))
                .collect();
            q.schedule_batch(&mut client, &batch).unwrap()
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(3));
    targets = schedule
}
criterion_main!(benches);
