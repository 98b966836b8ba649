//! The `AsyncNode` beside the blocking `Node`, each with 2 handlers at
//! once, on their own schemas of one server:
//!
//! - `pg_drain`: 2,000 tasks due at the same instant, from that instant
//!   until the node has recorded the last outcome (as the report's end to
//!   end row, with fewer tasks so that a sample stays short);
//! - `pg_schedule_to_start`: a task due now, from the schedule call until
//!   its handler starts: the blocking node scheduled with `postgres`, the
//!   async node (handlers on the bench's runtime) scheduled from sqlx and
//!   with `postgres`, so the client's share and the node's show apart.
//!
//! Needs features `tokio` and `sqlx`:
//! `cargo bench -p timerpool-pg --features tokio,sqlx --bench pg_async_node`.
//! The report's figures come from `examples/pg_report.rs`.

#[path = "pg_work/mod.rs"]
mod pg_work;
#[path = "pg_work/tokio_kind.rs"]
mod tokio_kind;

use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use pg_work::{Sink, Spec, BLOCKING};
use std::time::{Duration, Instant, SystemTime};
use timerpool_pg::sqlx::postgres::PgPoolOptions;
use timerpool_pg::{AsyncNode, NewTask, Node};
use tokio_kind::ASYNC;

/// Tasks each drain sample runs.
const DRAIN: usize = 2_000;
/// How far ahead of their due time the drain's tasks are scheduled: time
/// for the batches to commit before the node may claim the first.
const LEAD: Duration = Duration::from_millis(300);

fn drain(c: &mut Criterion) {
    let mut g = c.benchmark_group("pg_drain");
    g.throughput(Throughput::Elements(DRAIN as u64));
    // A sample takes the lead time and the drain: one iteration each.
    g.sampling_mode(SamplingMode::Flat);
    for kind in [BLOCKING, ASYNC] {
        let schema = format!("bench_drain_{}", kind.tag);
        let (mut client, q) = pg_work::fresh(&schema);
        let sink = Sink::default();
        let node = (kind.start)(Spec {
            config: pg_work::config(),
            schema: &schema,
            workers: 2,
            prefetch: Some(512),
            sink: &sink,
        });
        let mut round = 0u64;
        g.bench_function(BenchmarkId::new(kind.tag, DRAIN), |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    round += 1;
                    let base = node.recorded();
                    let due = SystemTime::now() + LEAD;
                    let tasks: Vec<NewTask> = (0..DRAIN)
                        .map(|i| NewTask::new(format!("r{round}-{i}"), "h").at(due))
                        .collect();
                    for chunk in tasks.chunks(500) {
                        q.schedule_batch(&mut client, chunk).expect("schedule");
                    }
                    if let Ok(ahead) = due.duration_since(SystemTime::now()) {
                        std::thread::sleep(ahead);
                    }
                    // Timed from the due time, also when scheduling ran past it.
                    let past = SystemTime::now().duration_since(due).unwrap_or_default();
                    let start = Instant::now() - past;
                    while node.recorded() < base + DRAIN as u64 {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    spent += start.elapsed();
                    sink.lock().unwrap().clear();
                }
                spent
            })
        });
        node.stop();
    }
    g.finish();
}

fn schedule_to_start(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let url = std::env::var("TIMERPOOL_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string());
    let pool = rt
        .block_on(PgPoolOptions::new().max_connections(1).connect(&url))
        .expect("sqlx pool");
    let mut g = c.benchmark_group("pg_schedule_to_start");
    g.throughput(Throughput::Elements(1));
    let mut n = 0u64;
    let mut task = move || {
        n += 1;
        NewTask::new(format!("s{n}"), "h")
    };

    let schema = "bench_start_tp";
    let (mut client, q) = pg_work::fresh(schema);
    let (tx, rx) = std::sync::mpsc::channel::<Instant>();
    let node = Node::builder(pg_work::config(), "bench")
        .schema(schema)
        .workers(2)
        .handler("h", move |_job| {
            // The bench waits on the other end; gone only after the bench.
            let _ = tx.send(Instant::now());
            Ok(())
        })
        .start()
        .expect("start node");
    g.bench_function(BenchmarkId::new("node_postgres", 1), |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                let t = task();
                let start = Instant::now();
                q.schedule(&mut client, &t).expect("schedule");
                spent += rx.recv().expect("handler start") - start;
            }
            spent
        })
    });
    node.shutdown();

    let schema = "bench_start_async";
    let (mut client, q) = pg_work::fresh(schema);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let node = AsyncNode::builder(pg_work::config(), "bench")
        .schema(schema)
        .slots(2)
        .runtime(rt.handle().clone())
        .handler("h", move |_job| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(Instant::now());
                Ok(())
            }
        })
        .start()
        .expect("start async node");
    g.bench_function(BenchmarkId::new("async_node_sqlx", 1), |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    let t = task();
                    let start = Instant::now();
                    q.sqlx().schedule(&pool, &t).await.expect("schedule");
                    spent += rx.recv().await.expect("handler start") - start;
                }
                spent
            })
        })
    });
    g.bench_function(BenchmarkId::new("async_node_postgres", 1), |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                let t = task();
                let start = Instant::now();
                q.schedule(&mut client, &t).expect("schedule");
                spent += rx.blocking_recv().expect("handler start") - start;
            }
            spent
        })
    });
    rt.block_on(node.shutdown());
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    targets = drain, schedule_to_start
}
criterion_main!(benches);
