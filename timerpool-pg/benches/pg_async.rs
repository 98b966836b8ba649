//! A keyed schedule inside the caller's transaction from each client:
//! the statement alone (between `BEGIN` and `COMMIT`, which are not
//! timed), and for sqlx the whole transaction. Beside them, the same
//! statement sent by sqlx unprepared and by tokio-postgres prepared, to
//! show what the statement cache and the typed unprepared send each cost.
//! Needs features `sqlx` and `tokio-postgres`; the figures are in
//! `docs/bench/lab-notes.md` ("Durable schedules from async clients").

#[path = "pg_work/mod.rs"]
mod pg_work;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::{Duration, Instant};
use timerpool_pg::sqlx::types::chrono::{DateTime, Utc};
use timerpool_pg::sqlx::PgPool;
use timerpool_pg::tokio_postgres::{self, NoTls};
use timerpool_pg::NewTask;

fn schedule_in_tx(c: &mut Criterion) {
    let (mut client, q) = pg_work::fresh("bench_async");
    let url = std::env::var("TIMERPOOL_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let pool = rt.block_on(
        timerpool_pg::sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect(&url),
    );
    let pool: PgPool = pool.unwrap();
    let mut tp = rt.block_on(async {
        let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
        tokio::spawn(connection);
        client
    });
    let far = Duration::from_secs(3600);
    let mut n = 0u64;
    let mut task = move || {
        n += 1;
        NewTask::new(format!("k{n}"), "h").after(far)
    };
    let mut g = c.benchmark_group("pg_schedule_in_tx");
    g.throughput(Throughput::Elements(1));
    g.bench_function(BenchmarkId::new("postgres_query_typed", 1), |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                let t = task();
                let mut tx = client.transaction().unwrap();
                let start = Instant::now();
                q.schedule(&mut tx, &t).unwrap();
                spent += start.elapsed();
                tx.commit().unwrap();
            }
            spent
        })
    });
    g.bench_function(BenchmarkId::new("sqlx_statement_cache", 1), |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    let t = task();
                    let mut tx = pool.begin().await.unwrap();
                    let start = Instant::now();
                    q.sqlx().schedule(&mut *tx, &t).await.unwrap();
                    spent += start.elapsed();
                    tx.commit().await.unwrap();
                }
                spent
            })
        })
    });
    g.bench_function(BenchmarkId::new("sqlx_whole_transaction", 1), |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let t = task();
                    let mut tx = pool.begin().await.unwrap();
                    q.sqlx().schedule(&mut *tx, &t).await.unwrap();
                    tx.commit().await.unwrap();
                }
                start.elapsed()
            })
        })
    });
    g.bench_function(BenchmarkId::new("sqlx_unprepared", 1), |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    let t = task();
                    let mut tx = pool.begin().await.unwrap();
                    let start = Instant::now();
                    timerpool_pg::sqlx::query(&q.sql().schedule)
                        .persistent(false)
                        .bind(q.name())
                        .bind(t.key())
                        .bind(t.handler())
                        .bind(None::<DateTime<Utc>>)
                        .bind(Some(far.as_micros() as i64))
                        .bind(&[] as &[u8])
                        .bind(5i32)
                        .bind(None::<i64>)
                        .fetch_one(&mut *tx)
                        .await
                        .unwrap();
                    spent += start.elapsed();
                    tx.commit().await.unwrap();
                }
                spent
            })
        })
    });
    g.bench_function(BenchmarkId::new("tokio_postgres_query_typed", 1), |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    let t = task();
                    let tx = tp.transaction().await.unwrap();
                    let start = Instant::now();
                    q.tokio_postgres().schedule(&tx, &t).await.unwrap();
                    spent += start.elapsed();
                    tx.commit().await.unwrap();
                }
                spent
            })
        })
    });
    let prepared = rt.block_on(tp.prepare(&q.sql().schedule)).unwrap();
    g.bench_function(BenchmarkId::new("tokio_postgres_prepared", 1), |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    let t = task();
                    let tx = tp.transaction().await.unwrap();
                    let start = Instant::now();
                    let delay = Some(far.as_micros() as i64);
                    let none: Option<std::time::SystemTime> = None;
                    let payload: &[u8] = &[];
                    tx.query_one(
                        &prepared,
                        &[
                            &q.name(),
                            &t.key(),
                            &t.handler(),
                            &none,
                            &delay,
                            &payload,
                            &5i32,
                            &None::<i64>,
                        ],
                    )
                    .await
                    .unwrap();
                    spent += start.elapsed();
                    tx.commit().await.unwrap();
                }
                spent
            })
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(3));
    targets = schedule_in_tx
}
criterion_main!(benches);
