//! timerpool's durable timers beside sqlxmq, the Rust PostgreSQL job queue
//! that also sleeps until the next due time: lateness of 10,000 timers over
//! 10 s, and end-to-end throughput of 20,000 jobs already due (timerpool:
//! due together while its node runs; sqlxmq: a backlog its runner starts
//! on), on the same server in the same run, medians of three runs.
//!
//! ```text
//! cd benches/pg_peers && cargo run --release
//! ```
//!
//! sqlxmq runs in a database of its own (`timerpool_sqlxmq`, created here
//! with its migrations), since its objects live in `public`.

#[path = "../../pg_work/mod.rs"]
mod pg_work;

use sqlxmq::{job, CurrentJob, JobRegistry};
use std::error::Error;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

const TIMERS: usize = 10_000;
const SPREAD: Duration = Duration::from_secs(10);
const JOBS: usize = 20_000;
const DB: &str = "timerpool_sqlxmq";

/// Lateness (µs) of every sqlxmq job run, against its intended due time.
static RUNS: Mutex<Vec<i64>> = Mutex::new(Vec::new());

fn micros(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

#[job]
async fn timer(mut job: CurrentJob) -> Result<(), Box<dyn Error + Send + Sync + 'static>> {
    let due: i64 = job.json()?.expect("due in the payload");
    RUNS.lock().unwrap().push(micros(SystemTime::now()) - due);
    job.complete().await?;
    Ok(())
}

/// Creates the database afresh and applies sqlxmq's migrations.
fn migrate() {
    let mut admin = pg_work::client();
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {DB} WITH (FORCE)"))
        .unwrap();
    admin
        .batch_execute(&format!("CREATE DATABASE {DB}"))
        .unwrap();
    let mut cfg = pg_work::config();
    cfg.dbname(DB);
    let mut c = cfg.connect(postgres::NoTls).unwrap();
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

/// A fresh database with sqlxmq's migrations applied, as a pool.
async fn fresh_db() -> sqlx::PgPool {
    // The synchronous client runs its own runtime: not on this one's threads.
    tokio::task::block_in_place(migrate);
    let url = std::env::var("TIMERPOOL_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let url = format!("{}/{DB}", url.rsplit_once('/').unwrap().0);
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(16)
        .connect(&url)
        .await
        .unwrap()
}

async fn wait_runs(n: usize) {
    let end = Instant::now() + Duration::from_secs(300);
    while RUNS.lock().unwrap().len() < n {
        assert!(
            Instant::now() < end,
            "sqlxmq ran {} of {n}",
            RUNS.lock().unwrap().len()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Spawns `dues.len()` sqlxmq jobs from 8 concurrent tasks.
async fn spawn_all(pool: &sqlx::PgPool, dues: Vec<SystemTime>) {
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
                    let delay = due.duration_since(SystemTime::now()).unwrap_or_default();
                    // An interval holds whole microseconds: round up, never early.
                    let delay = Duration::from_micros(delay.as_nanos().div_ceil(1000) as u64);
                    timer
                        .builder()
                        .set_json(&micros(due))
                        .unwrap()
                        .set_delay(delay)
                        .spawn(&pool)
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

async fn sqlxmq_lateness() -> (pg_work::Late, Duration) {
    let pool = fresh_db().await;
    RUNS.lock().unwrap().clear();
    let runner = JobRegistry::new(&[timer])
        .runner(&pool)
        .set_concurrency(8, 32)
        .run()
        .await
        .unwrap();
    // sqlxmq spawns one job per call (~1 ms each): give them time to land.
    let t0 = SystemTime::now() + Duration::from_secs(45);
    let dues: Vec<SystemTime> = (0..TIMERS)
        .map(|i| t0 + SPREAD.mul_f64(i as f64 / TIMERS as f64))
        .collect();
    let spawn = Instant::now();
    spawn_all(&pool, dues).await;
    let spawn = spawn.elapsed();
    assert!(
        SystemTime::now() < t0,
        "spawning took longer than the lead time"
    );
    let cpu = pg_work::cpu_now();
    wait_runs(TIMERS).await;
    let cpu = pg_work::cpu_since(cpu);
    drop(runner);
    let mut v = std::mem::take(&mut *RUNS.lock().unwrap());
    v.sort_unstable();
    (late(&v, cpu), spawn)
}

fn late(v: &[i64], cpu: pg_work::Cpu) -> pg_work::Late {
    let at = |p: f64| v[((v.len() - 1) as f64 * p) as usize].max(0) as u64;
    pg_work::Late {
        p50_us: at(0.5),
        p99_us: at(0.99),
        max_us: at(1.0),
        early: v.iter().filter(|x| **x < 0).count(),
        cpu,
    }
}

async fn sqlxmq_end_to_end() -> f64 {
    let pool = fresh_db().await;
    RUNS.lock().unwrap().clear();
    // A backlog of jobs already due, then the runner starts.
    spawn_all(&pool, vec![SystemTime::now(); JOBS]).await;
    let t = Instant::now();
    let runner = JobRegistry::new(&[timer])
        .runner(&pool)
        .set_concurrency(16, 64)
        .run()
        .await
        .unwrap();
    wait_runs(JOBS).await;
    let rate = JOBS as f64 / t.elapsed().as_secs_f64();
    drop(runner);
    rate
}

fn row(name: &str, mut runs: Vec<pg_work::Late>) {
    runs.sort_by_key(|l| l.p99_us);
    let m = runs[runs.len() / 2];
    let early: usize = runs.iter().map(|l| l.early).sum();
    println!(
        "| {name} | {:.1} | {:.1} | {:.1} | {early} | {:.2} s / {:.2} s |",
        m.p50_us as f64 / 1e3,
        m.p99_us as f64 / 1e3,
        m.max_us as f64 / 1e3,
        m.cpu.client.as_secs_f64(),
        m.cpu.server.as_secs_f64()
    );
}

#[tokio::main]
async fn main() {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at start: {}", load.trim());
    println!("\n### Lateness: {TIMERS} timers over {SPREAD:?}, median of 3 runs by p99\n");
    println!("| implementation | p50 ms | p99 ms | max ms | early | CPU client / server |");
    println!("| --- | --- | --- | --- | --- | --- |");
    let tp: Vec<_> = (0..3)
        .map(|_| tokio::task::block_in_place(|| pg_work::lateness_timerpool(TIMERS, SPREAD)))
        .collect();
    row("timerpool node", tp);
    let mut mq = Vec::new();
    for _ in 0..3 {
        let (l, spawn) = sqlxmq_lateness().await;
        eprintln!("sqlxmq: {TIMERS} spawns took {spawn:?}");
        mq.push(l);
    }
    row("sqlxmq (concurrency 8..32)", mq);
    println!("\n### End to end: {JOBS} jobs due at once, median of 3 runs\n");
    println!("| implementation | jobs/s |");
    println!("| --- | --- |");
    let mut tp: Vec<f64> = (0..3)
        .map(|_| tokio::task::block_in_place(|| pg_work::end_to_end(1, JOBS).per_s))
        .collect();
    tp.sort_by(f64::total_cmp);
    println!("| timerpool, 1 node × 2 workers | {:.0} |", tp[1]);
    let mut mq = Vec::new();
    for _ in 0..3 {
        mq.push(sqlxmq_end_to_end().await);
    }
    mq.sort_by(f64::total_cmp);
    println!("| sqlxmq, concurrency 16..64 | {:.0} |", mq[1]);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("\nload average at end: {}", load.trim());
}
