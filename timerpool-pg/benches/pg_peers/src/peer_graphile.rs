//! graphile_worker 0.14 (the Rust port of Graphile Worker) on sqlx 0.9, in
//! a database of its own (schema `graphile_worker`). One worker with
//! concurrency 4, its default poll interval (1 s) beside `LISTEN` (a
//! notification when jobs are added; a job due later is found by a poll),
//! and the settings its guide gives for throughput: a local queue of 100
//! and completions batched for 1 ms. Without the local queue (its
//! default, "direct" fetching) each notification or poll lets each slot
//! fetch one job, so a backlog drains at about 4 jobs per poll: that
//! setup is measured on the due-now workload (with `DIRECT_JOBS` jobs)
//! and idle only. Jobs are keyed (`job_key`, mode replace), as timerpool's tasks
//! are.

use crate::{
    late, late_us_of, micros, wait_for, InTx, Late, Rate, Running, DB_PREFIX, FAR, JOBS, NEAR,
    SETTLE, SLOTS, SPREAD, TIMERS, TRIALS,
};
use chrono::{DateTime, Utc};
use graphile_worker::{
    IntoTaskHandlerResult, JobKeyMode, JobSpec, JobSpecBuilder, LocalQueueConfig, RawJobSpec,
    TaskHandler, Worker, WorkerContext, WorkerOptions, WorkerUtils,
};
use serde::{Deserialize, Serialize};
use sqlx09::postgres::{PgPool, PgPoolOptions};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::task::block_in_place;

/// Lateness (µs) of every job run, against its intended due time.
static RUNS: Mutex<Vec<i64>> = Mutex::new(Vec::new());

/// The payload: the intended due time, µs since the epoch.
#[derive(Serialize, Deserialize)]
struct Timer {
    due: i64,
}

impl TaskHandler for Timer {
    const IDENTIFIER: &'static str = "timer";

    async fn run(self, _ctx: WorkerContext) -> impl IntoTaskHandlerResult {
        RUNS.lock().unwrap().push(late_us_of(self.due));
        Ok::<(), String>(())
    }
}

fn runs() -> usize {
    RUNS.lock().unwrap().len()
}

fn db() -> String {
    format!("{DB_PREFIX}graphile")
}

/// The backlog of the due-now workload with direct fetching.
pub const DIRECT_JOBS: usize = 200;

/// Worker settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Setup {
    /// A local queue of 100 jobs and completions batched for 1 ms.
    LocalQueue,
    /// Its defaults but for concurrency 4: direct fetching.
    Direct,
}

/// `db` afresh with graphile's schema, as a pool, and utilities on it.
async fn fresh(db: &str) -> (PgPool, WorkerUtils) {
    block_in_place(|| crate::recreate(db));
    let pool = PgPoolOptions::new()
        .max_connections(16)
        .connect(&crate::url_of(db))
        .await
        .unwrap();
    let utils = WorkerUtils::new(pool.clone(), "graphile_worker");
    utils.migrate().await.unwrap();
    (pool, utils)
}

/// An initialized worker (its migrations applied) and its running task.
async fn worker(pool: &PgPool, setup: Setup) -> (Arc<Worker>, Running) {
    RUNS.lock().unwrap().clear();
    let mut options = WorkerOptions::default()
        .pg_pool(pool.clone())
        .concurrency(SLOTS)
        .listen_os_shutdown_signals(false)
        .define_job::<Timer>();
    if setup == Setup::LocalQueue {
        options = options
            .local_queue(LocalQueueConfig::default().with_size(100))
            .complete_job_batch_delay(Duration::from_millis(1));
    }
    let worker = Arc::new(options.init().await.unwrap());
    let w = worker.clone();
    let task = tokio::spawn(async move {
        let _ = w.run().await;
    });
    (worker, Running::new(move || task.abort()))
}

fn spec(key: String, due: SystemTime) -> RawJobSpec {
    let at: DateTime<Utc> = due.into();
    RawJobSpec {
        identifier: Timer::IDENTIFIER.to_string(),
        payload: serde_json::to_value(Timer { due: micros(due) }).unwrap(),
        spec: JobSpecBuilder::new()
            .run_at(at)
            .job_key(&key)
            .job_key_mode(JobKeyMode::Replace)
            .build(),
    }
}

async fn add(utils: &WorkerUtils, first: usize, dues: &[SystemTime]) {
    let specs: Vec<RawJobSpec> = dues
        .iter()
        .enumerate()
        .map(|(i, d)| spec(format!("k{}", first + i), *d))
        .collect();
    for chunk in specs.chunks(1000) {
        utils.add_raw_jobs(chunk).await.unwrap();
    }
}

/// `TIMERS` jobs spread over `SPREAD`, the first 2 s ahead (one batch
/// insert per 1,000); CPU from the first insert to the last run.
pub async fn lateness() -> Late {
    let (pool, utils) = fresh(&db()).await;
    let (_w, running) = worker(&pool, Setup::LocalQueue).await;
    let dues = crate::dues(SystemTime::now() + Duration::from_secs(2));
    let cpu = crate::pg_work::cpu_now();
    add(&utils, 0, &dues).await;
    wait_for("graphile", TIMERS, SPREAD + Duration::from_secs(60), runs).await;
    let cpu = crate::pg_work::cpu_since(cpu);
    running.stop().await;
    late(std::mem::take(&mut *RUNS.lock().unwrap()), cpu)
}

/// A job due in `NEAR` while one due in an hour is pending, `TRIALS` times.
pub async fn preemption() -> Late {
    let (pool, utils) = fresh(&db()).await;
    let (_w, running) = worker(&pool, Setup::LocalQueue).await;
    add(&utils, 1_000_000, &[SystemTime::now() + FAR]).await;
    let cpu = crate::pg_work::cpu_now();
    for i in 0..TRIALS {
        tokio::time::sleep(SETTLE).await;
        add(&utils, i, &[SystemTime::now() + NEAR]).await;
        wait_for("graphile", i + 1, Duration::from_secs(30), runs).await;
    }
    let cpu = crate::pg_work::cpu_since(cpu);
    running.stop().await;
    late(std::mem::take(&mut *RUNS.lock().unwrap()), cpu)
}

/// A backlog of due jobs (`JOBS`, or `DIRECT_JOBS` with direct fetching)
/// added before the worker runs, then the worker starts: from its start
/// until the database holds no job (a completed job is deleted).
pub async fn end_to_end(setup: Setup) -> Rate {
    let n = match setup {
        Setup::LocalQueue => JOBS,
        Setup::Direct => DIRECT_JOBS,
    };
    let (pool, utils) = fresh(&db()).await;
    add(
        &utils,
        0,
        &vec![SystemTime::now() - Duration::from_secs(1); n],
    )
    .await;
    let (t, cpu) = (Instant::now(), crate::pg_work::cpu_now());
    let (_w, running) = worker(&pool, setup).await;
    let end = Instant::now() + Duration::from_secs(300);
    loop {
        let left: i64 = sqlx09::query_scalar("SELECT count(*) FROM graphile_worker._private_jobs")
            .fetch_one(&pool)
            .await
            .unwrap();
        if left == 0 {
            break;
        }
        assert!(Instant::now() < end, "graphile has {left} of {n} jobs left");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let r = Rate {
        per_s: n as f64 / t.elapsed().as_secs_f64(),
        cpu: crate::pg_work::cpu_since(cpu),
    };
    running.stop().await;
    r
}

/// One keyed job added inside a transaction (`add_raw_job` on the
/// caller's transaction).
pub async fn schedule_in_tx() -> InTx {
    let (pool, utils) = fresh(&db()).await;
    pool.close().await;
    let pool1 = PgPoolOptions::new()
        .max_connections(1)
        .connect(&crate::url_of(&db()))
        .await
        .unwrap();
    let mut i = 0usize;
    crate::time_in_tx(|| {
        let (pool1, utils) = (pool1.clone(), utils.clone());
        i += 1;
        let key = format!("k{i}");
        async move {
            let due = SystemTime::now() + FAR;
            let payload = Timer { due: micros(due) };
            let spec: JobSpec = JobSpecBuilder::new()
                .run_at(DateTime::<Utc>::from(due))
                .job_key(&key)
                .job_key_mode(JobKeyMode::Replace)
                .build();
            let t0 = Instant::now();
            let mut tx = pool1.begin().await.unwrap();
            let t1 = Instant::now();
            utils
                .with_executor(&mut tx)
                .add_raw_job(Timer::IDENTIFIER, payload, spec)
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
pub async fn idle(db: &str, pending: usize, setup: Setup) -> Running {
    let (pool, utils) = fresh(db).await;
    add(&utils, 0, &vec![SystemTime::now() + FAR; pending]).await;
    worker(&pool, setup).await.1
}
