//! sqlxmq 0.6: its runner with `set_concurrency(4, 4)`, in a database of
//! its own (its objects live in `public`), created here with the
//! migrations `run.sh` points at. Its runner sleeps until the next due
//! time, as the timerpool node does.

use crate::pg_work::{cpu_now, cpu_since};
use crate::{
    late, late_us_of, micros, pool, url_of, wait_for, InTx, Late, Rate, Running, DB_PREFIX, FAR,
    JOBS, NEAR, SETTLE, SLOTS, SPREAD, TIMERS, TRIALS,
};
use sqlxmq::{job, CurrentJob, JobRegistry, JobRunnerHandle};
use std::error::Error;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};
use timerpool_pg::sqlx::PgPool;
use tokio::task::block_in_place;

/// Lateness (µs) of every job run, against its intended due time, taken
/// as the handler starts.
static RUNS: Mutex<Vec<i64>> = Mutex::new(Vec::new());
/// Jobs whose completion has been committed.
static DONE: AtomicUsize = AtomicUsize::new(0);

#[job]
async fn timer(mut job: CurrentJob) -> Result<(), Box<dyn Error + Send + Sync + 'static>> {
    let due: i64 = job.json()?.expect("due in the payload");
    RUNS.lock().unwrap().push(late_us_of(due));
    job.complete().await?;
    DONE.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

fn runs() -> usize {
    RUNS.lock().unwrap().len()
}

/// Creates `db` afresh and applies sqlxmq's migrations.
fn migrate(db: &str) {
    crate::recreate(db);
    let mut c = crate::config_of(db).connect(postgres::NoTls).unwrap();
    let dir = std::env::var("SQLXMQ_MIGRATIONS").expect("SQLXMQ_MIGRATIONS (set by run.sh)");
    let mut ups: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".up.sql"))
        .collect();
    ups.sort();
    for up in ups {
        c.batch_execute(&std::fs::read_to_string(up).unwrap())
            .unwrap();
    }
}

/// A fresh database `db` with sqlxmq's migrations applied, as a pool.
async fn fresh(db: &str) -> PgPool {
    // The synchronous client runs its own runtime: not on this one's threads.
    block_in_place(|| migrate(db));
    pool(&url_of(db), 16).await
}

async fn runner(pool: &PgPool) -> JobRunnerHandle {
    RUNS.lock().unwrap().clear();
    DONE.store(0, Ordering::Relaxed);
    JobRegistry::new(&[timer])
        .runner(pool)
        .set_concurrency(SLOTS, SLOTS)
        .run()
        .await
        .unwrap()
}

/// Spawns one job per due time from 8 concurrent tasks (sqlxmq has no
/// batch spawn).
async fn spawn_all(pool: &PgPool, dues: Vec<SystemTime>) {
    let chunks: Vec<Vec<SystemTime>> = dues
        .chunks(dues.len().div_ceil(8))
        .map(<[_]>::to_vec)
        .collect();
    let tasks: Vec<_> = chunks
        .into_iter()
        .map(|chunk| {
            let pool = pool.clone();
            tokio::spawn(async move {
                for due in chunk {
                    spawn_one(&pool, due).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

async fn spawn_one(pool: &PgPool, due: SystemTime) {
    let delay = due.duration_since(SystemTime::now()).unwrap_or_default();
    // An interval holds whole microseconds: round up, never early.
    let delay = Duration::from_micros(delay.as_nanos().div_ceil(1000) as u64);
    timer
        .builder()
        .set_json(&micros(due))
        .unwrap()
        .set_delay(delay)
        .spawn(pool)
        .await
        .unwrap();
}

fn db() -> String {
    format!("{DB_PREFIX}sqlxmq")
}

/// `TIMERS` jobs spread over `SPREAD`; CPU from after the spawns to the
/// last run.
pub async fn lateness() -> Late {
    let pool = fresh(&db()).await;
    let _runner = runner(&pool).await;
    // One job per call, slow on a loaded machine: give them time to land
    // before the first is due.
    let t0 = SystemTime::now() + Duration::from_secs(30);
    let spawn = Instant::now();
    spawn_all(&pool, crate::dues(t0)).await;
    assert!(
        SystemTime::now() < t0,
        "spawning took longer than the lead time"
    );
    eprintln!("  sqlxmq: {TIMERS} spawns took {:?}", spawn.elapsed());
    let cpu = cpu_now();
    wait_for("sqlxmq", TIMERS, SPREAD + Duration::from_secs(60), runs).await;
    let cpu = cpu_since(cpu);
    late(std::mem::take(&mut *RUNS.lock().unwrap()), cpu)
}

/// A job due in `NEAR` while one due in an hour is pending, `TRIALS` times.
pub async fn preemption() -> Late {
    let pool = fresh(&db()).await;
    let _runner = runner(&pool).await;
    spawn_one(&pool, SystemTime::now() + FAR).await;
    let cpu = cpu_now();
    for i in 0..TRIALS {
        tokio::time::sleep(SETTLE).await;
        spawn_one(&pool, SystemTime::now() + NEAR).await;
        wait_for("sqlxmq", i + 1, Duration::from_secs(30), runs).await;
    }
    let cpu = cpu_since(cpu);
    late(std::mem::take(&mut *RUNS.lock().unwrap()), cpu)
}

/// A backlog of `JOBS` due jobs, then the runner starts: from its start
/// until the last completion is committed.
pub async fn end_to_end() -> Rate {
    let pool = fresh(&db()).await;
    spawn_all(&pool, vec![SystemTime::now(); JOBS]).await;
    let (t, cpu) = (Instant::now(), cpu_now());
    let _runner = runner(&pool).await;
    wait_for("sqlxmq", JOBS, Duration::from_secs(300), || {
        DONE.load(Ordering::Relaxed)
    })
    .await;
    Rate {
        per_s: JOBS as f64 / t.elapsed().as_secs_f64(),
        cpu: cpu_since(cpu),
    }
}

/// One spawn (no key: sqlxmq has none) inside a transaction.
pub async fn schedule_in_tx() -> InTx {
    let pool = fresh(&db()).await;
    let pool1 = pool_of_one().await;
    drop(pool);
    crate::time_in_tx(|| {
        let pool1 = pool1.clone();
        async move {
            let due = micros(SystemTime::now() + FAR);
            let t0 = Instant::now();
            let mut tx = pool1.begin().await.unwrap();
            let t1 = Instant::now();
            timer
                .builder()
                .set_json(&due)
                .unwrap()
                .set_delay(FAR)
                .spawn(&mut *tx)
                .await
                .unwrap();
            let t2 = Instant::now();
            tx.commit().await.unwrap();
            (t2 - t1, t0.elapsed())
        }
    })
    .await
}

async fn pool_of_one() -> PgPool {
    pool(&url_of(&db()), 1).await
}

/// The runner idling in `db` with `pending` jobs an hour away.
pub async fn idle(db: &str, pending: usize) -> Running {
    let pool = fresh(db).await;
    spawn_all(&pool, vec![SystemTime::now() + FAR; pending]).await;
    let runner = runner(&pool).await;
    Running::new(move || {
        drop(runner);
        drop(pool);
    })
}
