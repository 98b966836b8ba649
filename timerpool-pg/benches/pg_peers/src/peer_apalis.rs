//! apalis 1.0 with its PostgreSQL storage (`apalis-postgres` 1.0, where the
//! storage of `apalis-sql` 0.7 moved), on sqlx 0.9, in a database of its
//! own (its objects live in the schema `apalis`). One worker with a
//! concurrency limit of 4, fetching batches of `BATCH`, polling every
//! `POLL`: its notification fires only for jobs already due when
//! inserted, so a job due later is found by a poll. It stores a run time
//! in whole seconds, so every due time is rounded up to the next second
//! (never early); lateness is still measured against the time asked for.

use crate::{
    late, late_us_of, micros, wait_for, InTx, Late, Rate, Running, DB_PREFIX, FAR, JOBS, NEAR,
    SETTLE, SLOTS, SPREAD, TIMERS, TRIALS,
};
use apalis::prelude::*;
use apalis_postgres::{Config, PgTask, PostgresStorage};
use sqlx09::postgres::{PgPool, PgPoolOptions};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::task::block_in_place;

/// How often the worker polls for jobs that fell due.
pub const POLL: Duration = Duration::from_secs(1);
/// Jobs fetched per poll.
pub const BATCH: usize = 64;
const QUEUE: &str = "bench";

/// Lateness (µs) of every job run, against its intended due time.
static RUNS: Mutex<Vec<i64>> = Mutex::new(Vec::new());

async fn timer(due: i64) -> Result<(), BoxDynError> {
    RUNS.lock().unwrap().push(late_us_of(due));
    Ok(())
}

fn runs() -> usize {
    RUNS.lock().unwrap().len()
}

fn db() -> String {
    format!("{DB_PREFIX}apalis")
}

/// `db` afresh with apalis' migrations, as a pool.
async fn fresh(db: &str) -> PgPool {
    block_in_place(|| crate::recreate(db));
    let pool = PgPoolOptions::new()
        .max_connections(16)
        .connect(&crate::url_of(db))
        .await
        .unwrap();
    PostgresStorage::setup(&pool).await.unwrap();
    pool
}

/// A started worker; aborting its task stops it.
fn worker(pool: &PgPool) -> Running {
    RUNS.lock().unwrap().clear();
    let config = Config::default().queue(QUEUE).batch_size(BATCH);
    let backend = PostgresStorage::<i64>::new(pool)
        .with_config(config)
        .with_pubsub()
        .poll_with_interval(POLL);
    let worker = WorkerBuilder::new("bench")
        .backend(backend)
        .concurrency(SLOTS)
        .build(timer);
    let task = tokio::spawn(async move {
        let _ = worker.run().await;
    });
    Running::new(move || task.abort())
}

/// Whole seconds since the epoch, rounded up.
fn ceil_secs(t: SystemTime) -> u64 {
    let d = t.duration_since(UNIX_EPOCH).unwrap();
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

fn task_at(due: SystemTime) -> PgTask {
    let args = serde_json::to_vec(&micros(due)).unwrap();
    TaskBuilder::new(args)
        .run_at_timestamp(ceil_secs(due))
        .build()
}

async fn push(pool: &PgPool, dues: &[SystemTime]) {
    let mut conn = pool.acquire().await.unwrap();
    for chunk in dues.chunks(1000) {
        let tasks = chunk.iter().map(|d| task_at(*d)).collect();
        apalis_postgres::queries::push_tasks(&mut *conn, QUEUE, tasks)
            .await
            .unwrap();
    }
}

/// `TIMERS` jobs spread over `SPREAD`, the first 2 s ahead (one batch
/// insert per 1,000); CPU from the first insert to the last run.
pub async fn lateness() -> Late {
    let pool = fresh(&db()).await;
    let w = worker(&pool);
    let dues = crate::dues(SystemTime::now() + Duration::from_secs(2));
    let cpu = crate::pg_work::cpu_now();
    push(&pool, &dues).await;
    wait_for("apalis", TIMERS, SPREAD + Duration::from_secs(60), runs).await;
    let cpu = crate::pg_work::cpu_since(cpu);
    w.stop().await;
    late(std::mem::take(&mut *RUNS.lock().unwrap()), cpu)
}

/// A job due in `NEAR` while one due in an hour is pending, `TRIALS` times.
pub async fn preemption() -> Late {
    let pool = fresh(&db()).await;
    let w = worker(&pool);
    push(&pool, &[SystemTime::now() + FAR]).await;
    let cpu = crate::pg_work::cpu_now();
    for i in 0..TRIALS {
        tokio::time::sleep(SETTLE).await;
        push(&pool, &[SystemTime::now() + NEAR]).await;
        wait_for("apalis", i + 1, Duration::from_secs(30), runs).await;
    }
    let cpu = crate::pg_work::cpu_since(cpu);
    w.stop().await;
    late(std::mem::take(&mut *RUNS.lock().unwrap()), cpu)
}

/// A backlog of `JOBS` due jobs, then the worker starts: from its start
/// until the database holds every job as done.
pub async fn end_to_end() -> Rate {
    let pool = fresh(&db()).await;
    push(
        &pool,
        &vec![SystemTime::now() - Duration::from_secs(1); JOBS],
    )
    .await;
    let (t, cpu) = (Instant::now(), crate::pg_work::cpu_now());
    let w = worker(&pool);
    let end = Instant::now() + Duration::from_secs(300);
    loop {
        let n: i64 = sqlx09::query_scalar("SELECT count(*) FROM apalis.jobs WHERE status = 'Done'")
            .fetch_one(&pool)
            .await
            .unwrap();
        if n >= JOBS as i64 {
            break;
        }
        assert!(Instant::now() < end, "apalis finished {n} of {JOBS}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let r = Rate {
        per_s: JOBS as f64 / t.elapsed().as_secs_f64(),
        cpu: crate::pg_work::cpu_since(cpu),
    };
    w.stop().await;
    r
}

/// One job pushed inside a transaction (no key: apalis' idempotency key
/// refuses a second job rather than replacing the first).
pub async fn schedule_in_tx() -> InTx {
    let pool = fresh(&db()).await;
    pool.close().await;
    let pool1 = PgPoolOptions::new()
        .max_connections(1)
        .connect(&crate::url_of(&db()))
        .await
        .unwrap();
    crate::time_in_tx(|| {
        let pool1 = pool1.clone();
        async move {
            let task = task_at(SystemTime::now() + FAR);
            let t0 = Instant::now();
            let mut tx = pool1.begin().await.unwrap();
            let t1 = Instant::now();
            apalis_postgres::queries::push_tasks(&mut *tx, QUEUE, vec![task])
                .await
                .unwrap();
            let t2 = Instant::now();
            tx.commit().await.unwrap();
            (t2 - t1, t0.elapsed())
        }
    })
    .await
}

/// The worker idling in `db` with `pending` jobs an hour away.
pub async fn idle(db: &str, pending: usize) -> Running {
    let pool = fresh(db).await;
    push(&pool, &vec![SystemTime::now() + FAR; pending]).await;
    worker(&pool)
}
