//! timerpool's durable timers beside sqlxmq, the Rust PostgreSQL job queue
//! that also sleeps until the next due time, on the same server in the
//! same run: the blocking `Node` (scheduled with the `postgres` client),
//! the `AsyncNode` (scheduled from sqlx) and sqlxmq, each with 4 handler
//! slots. The workloads, each run once per round, in alternating order
//! (blocking, async, sqlxmq; then the reverse), three rounds:
//!
//! - lateness of 2,000 timers spread over 10 s;
//! - preemption: a job due in 100 ms while one due in an hour is pending;
//! - end-to-end throughput of 10,000 jobs already due;
//! - one keyed schedule inside a transaction: the statement and the whole
//!   transaction;
//! - the idle transaction rate with 1,000 jobs an hour away (the three
//!   side by side, each in a database of its own).
//!
//! ```text
//! cd benches/pg_peers && ./run.sh
//! ```
//!
//! sqlxmq runs in databases of its own (created here with its
//! migrations), since its objects live in `public`.

#[path = "../../pg_work/mod.rs"]
mod pg_work;

use pg_work::{Cpu, Late};
use sqlxmq::{job, CurrentJob, JobRegistry};
use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use timerpool_pg::sqlx::postgres::{PgPool, PgPoolOptions};
use timerpool_pg::{AsyncNode, NewTask, Node, Queue};
use tokio::task::block_in_place;

const TIMERS: usize = 2_000;
const SPREAD: Duration = Duration::from_secs(10);
const TRIALS: usize = 20;
const NEAR: Duration = Duration::from_millis(100);
const FAR: Duration = Duration::from_secs(3600);
const JOBS: usize = 10_000;
const SLOTS: usize = 4;
const SCHEDULES: usize = 500;
const WARM_UP: usize = 50;
const PENDING: usize = 1_000;
const IDLE_WINDOW: Duration = Duration::from_secs(30);
const ROUNDS: usize = 3;
const DB: &str = "timerpool_sqlxmq";

/// Lateness (µs) of every sqlxmq job run, against its intended due time.
static RUNS: Mutex<Vec<i64>> = Mutex::new(Vec::new());

type Sink = Arc<Mutex<Vec<i64>>>;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Imp {
    Blocking,
    Async,
    Sqlxmq,
}

impl Imp {
    fn name(self) -> &'static str {
        match self {
            Imp::Blocking => "timerpool `Node` (postgres client)",
            Imp::Async => "timerpool `AsyncNode` (sqlx client)",
            Imp::Sqlxmq => "sqlxmq 0.6 (concurrency 4..4)",
        }
    }
}

fn micros(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

/// Signed lateness of `due` now, in µs.
fn late_us(due: SystemTime) -> i64 {
    micros(SystemTime::now()) - micros(due)
}

#[job]
async fn timer(mut job: CurrentJob) -> Result<(), Box<dyn Error + Send + Sync + 'static>> {
    let due: i64 = job.json()?.expect("due in the payload");
    RUNS.lock().unwrap().push(micros(SystemTime::now()) - due);
    job.complete().await?;
    Ok(())
}

fn base_url() -> String {
    std::env::var("TIMERPOOL_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// The server's URL with the database `db`.
fn url_of(db: &str) -> String {
    format!("{}/{db}", base_url().rsplit_once('/').unwrap().0)
}

async fn pool(url: &str, max: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(max)
        .connect(url)
        .await
        .unwrap()
}

fn config_of(db: &str) -> postgres::Config {
    let mut cfg = pg_work::config();
    cfg.dbname(db);
    cfg
}

/// Creates the database `db` afresh (dropping any left over).
fn recreate(db: &str) {
    let mut admin = pg_work::client();
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
        .unwrap();
    admin
        .batch_execute(&format!("CREATE DATABASE {db}"))
        .unwrap();
}

/// Creates `db` afresh and applies sqlxmq's migrations.
fn migrate(db: &str) {
    recreate(db);
    let mut c = config_of(db).connect(postgres::NoTls).unwrap();
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
async fn fresh_mq(db: &str) -> PgPool {
    // The synchronous client runs its own runtime: not on this one's threads.
    block_in_place(|| migrate(db));
    pool(&url_of(db), 16).await
}

/// A fresh schema with timerpool's tables; the synchronous client used
/// to install it is dropped off the runtime's threads.
fn fresh_tp(schema: &str) -> Queue {
    block_in_place(|| pg_work::fresh(schema).1)
}

fn late(mut v: Vec<i64>, cpu: Cpu) -> Late {
    v.sort_unstable();
    let at = |p: f64| v[((v.len() - 1) as f64 * p) as usize].max(0) as u64;
    Late {
        p50_us: at(0.5),
        p99_us: at(0.99),
        max_us: at(1.0),
        early: v.iter().filter(|x| **x < 0).count(),
        cpu,
    }
}

fn len_of(sink: &Mutex<Vec<i64>>) -> usize {
    sink.lock().unwrap().len()
}

async fn wait_for(what: &str, n: usize, limit: Duration, len: impl Fn() -> usize) {
    let end = Instant::now() + limit;
    while len() < n {
        assert!(Instant::now() < end, "{what} ran {} of {n}", len());
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn wait_sink(sink: &Mutex<Vec<i64>>, n: usize, limit: Duration) {
    let end = Instant::now() + limit;
    while len_of(sink) < n {
        assert!(Instant::now() < end, "only {} of {n} ran", len_of(sink));
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A started async node on this runtime whose handler records lateness.
fn async_node(cfg: postgres::Config, schema: &str, prefetch: usize, sink: &Sink) -> AsyncNode {
    let sink = sink.clone();
    AsyncNode::builder(cfg, "bench")
        .schema(schema)
        .slots(SLOTS)
        .prefetch(prefetch)
        .handler("h", move |job| {
            let sink = sink.clone();
            async move {
                sink.lock().unwrap().push(late_us(job.due()));
                Ok(())
            }
        })
        .start()
        .expect("start async node")
}

/// Spawns one sqlxmq job per due time from 8 concurrent tasks.
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

fn dues(t0: SystemTime) -> Vec<SystemTime> {
    (0..TIMERS)
        .map(|i| t0 + SPREAD.mul_f64(i as f64 / TIMERS as f64))
        .collect()
}

fn tasks_at(dues: &[SystemTime]) -> Vec<NewTask> {
    dues.iter()
        .enumerate()
        .map(|(i, d)| NewTask::new(format!("k{i}"), "h").at(*d))
        .collect()
}

// ---- lateness -------------------------------------------------------------

async fn lateness(imp: Imp) -> Late {
    match imp {
        Imp::Blocking => block_in_place(|| pg_work::lateness_timerpool(TIMERS, SPREAD)),
        Imp::Async => {
            let schema = "bench_late_async";
            let q = fresh_tp(schema);
            let pool = pool(&base_url(), 2).await;
            let sink = Sink::default();
            let node = async_node(pg_work::config(), schema, 256, &sink);
            // As the blocking run: the first due 1 s ahead, batches of 500.
            let tasks = tasks_at(&dues(SystemTime::now() + Duration::from_secs(1)));
            let cpu = pg_work::cpu_now();
            for chunk in tasks.chunks(500) {
                q.sqlx().schedule_batch(&pool, chunk).await.unwrap();
            }
            wait_for(
                "async node",
                TIMERS,
                SPREAD + Duration::from_secs(60),
                || len_of(&sink),
            )
            .await;
            let cpu = pg_work::cpu_since(cpu);
            node.shutdown().await;
            let v = std::mem::take(&mut *sink.lock().unwrap());
            late(v, cpu)
        }
        Imp::Sqlxmq => {
            let pool = fresh_mq(DB).await;
            RUNS.lock().unwrap().clear();
            let runner = JobRegistry::new(&[timer])
                .runner(&pool)
                .set_concurrency(SLOTS, SLOTS)
                .run()
                .await
                .unwrap();
            // One job per call, slow on a loaded machine: give them time to
            // land before the first is due.
            let t0 = SystemTime::now() + Duration::from_secs(30);
            let spawn = Instant::now();
            spawn_all(&pool, dues(t0)).await;
            assert!(
                SystemTime::now() < t0,
                "spawning took longer than the lead time"
            );
            eprintln!("  sqlxmq: {TIMERS} spawns took {:?}", spawn.elapsed());
            let cpu = pg_work::cpu_now();
            wait_for("sqlxmq", TIMERS, SPREAD + Duration::from_secs(60), || {
                len_of(&RUNS)
            })
            .await;
            let cpu = pg_work::cpu_since(cpu);
            drop(runner);
            late(std::mem::take(&mut *RUNS.lock().unwrap()), cpu)
        }
    }
}

// ---- preemption -----------------------------------------------------------

/// Gives the node or runner time to settle into its wait for the far job.
const SETTLE: Duration = Duration::from_millis(300);

async fn preemption(imp: Imp) -> Late {
    match imp {
        Imp::Blocking => block_in_place(|| {
            let schema = "bench_preempt_blk";
            let (mut c, q) = pg_work::fresh(schema);
            let sink = Sink::default();
            let node = pg_work::node(schema, SLOTS, 16, &sink);
            q.schedule(&mut c, &NewTask::new("far", "h").after(FAR))
                .unwrap();
            let cpu = pg_work::cpu_now();
            for i in 0..TRIALS {
                std::thread::sleep(SETTLE);
                let t = NewTask::new(format!("near{i}"), "h").at(SystemTime::now() + NEAR);
                q.schedule(&mut c, &t).unwrap();
                wait_sink(&sink, i + 1, Duration::from_secs(30));
            }
            let cpu = pg_work::cpu_since(cpu);
            node.shutdown();
            let v = std::mem::take(&mut *sink.lock().unwrap());
            late(v, cpu)
        }),
        Imp::Async => {
            let schema = "bench_preempt_async";
            let q = fresh_tp(schema);
            let pool = pool(&base_url(), 1).await;
            let sink = Sink::default();
            let node = async_node(pg_work::config(), schema, 16, &sink);
            q.sqlx()
                .schedule(&pool, &NewTask::new("far", "h").after(FAR))
                .await
                .unwrap();
            let cpu = pg_work::cpu_now();
            for i in 0..TRIALS {
                tokio::time::sleep(SETTLE).await;
                let t = NewTask::new(format!("near{i}"), "h").at(SystemTime::now() + NEAR);
                q.sqlx().schedule(&pool, &t).await.unwrap();
                wait_for("async node", i + 1, Duration::from_secs(30), || {
                    len_of(&sink)
                })
                .await;
            }
            let cpu = pg_work::cpu_since(cpu);
            node.shutdown().await;
            let v = std::mem::take(&mut *sink.lock().unwrap());
            late(v, cpu)
        }
        Imp::Sqlxmq => {
            let pool = fresh_mq(DB).await;
            RUNS.lock().unwrap().clear();
            let runner = JobRegistry::new(&[timer])
                .runner(&pool)
                .set_concurrency(SLOTS, SLOTS)
                .run()
                .await
                .unwrap();
            spawn_one(&pool, SystemTime::now() + FAR).await;
            let cpu = pg_work::cpu_now();
            for i in 0..TRIALS {
                tokio::time::sleep(SETTLE).await;
                spawn_one(&pool, SystemTime::now() + NEAR).await;
                wait_for("sqlxmq", i + 1, Duration::from_secs(30), || len_of(&RUNS)).await;
            }
            let cpu = pg_work::cpu_since(cpu);
            drop(runner);
            late(std::mem::take(&mut *RUNS.lock().unwrap()), cpu)
        }
    }
}

// ---- end to end -----------------------------------------------------------

#[derive(Debug, Clone, Copy)]
struct Rate {
    per_s: f64,
    cpu: Cpu,
}

/// `JOBS` jobs due at once, with 4 slots: jobs per second from the due
/// time (timerpool: until the last outcome row is committed) or from the
/// runner's start on the backlog (sqlxmq: until the last handler has
/// completed its job).
async fn end_to_end(imp: Imp) -> Rate {
    let due = SystemTime::now() + Duration::from_secs(2);
    let tasks: Vec<NewTask> = (0..JOBS)
        .map(|i| NewTask::new(format!("k{i}"), "h").at(due))
        .collect();
    let until_due = || due.duration_since(SystemTime::now()).unwrap_or_default();
    match imp {
        Imp::Blocking => block_in_place(|| {
            let schema = "bench_e2e_blk";
            let (mut c, q) = pg_work::fresh(schema);
            let sink = Sink::default();
            let node = pg_work::node(schema, SLOTS, 512, &sink);
            for chunk in tasks.chunks(1000) {
                q.schedule_batch(&mut c, chunk).unwrap();
            }
            std::thread::sleep(until_due());
            let (t, cpu) = (Instant::now(), pg_work::cpu_now());
            let count = format!("SELECT count(*) FROM {schema}.outcomes");
            while c.query_one(&count, &[]).unwrap().get::<_, i64>(0) < JOBS as i64 {
                std::thread::sleep(Duration::from_millis(10));
            }
            let r = Rate {
                per_s: JOBS as f64 / t.elapsed().as_secs_f64(),
                cpu: pg_work::cpu_since(cpu),
            };
            node.shutdown();
            r
        }),
        Imp::Async => {
            let schema = "bench_e2e_async";
            let q = fresh_tp(schema);
            let pool = pool(&base_url(), 2).await;
            let sink = Sink::default();
            let node = async_node(pg_work::config(), schema, 512, &sink);
            for chunk in tasks.chunks(1000) {
                q.sqlx().schedule_batch(&pool, chunk).await.unwrap();
            }
            tokio::time::sleep(until_due()).await;
            let (t, cpu) = (Instant::now(), pg_work::cpu_now());
            let count = format!("SELECT count(*) FROM {schema}.outcomes");
            loop {
                let n: i64 = timerpool_pg::sqlx::query_scalar(&count)
                    .fetch_one(&pool)
                    .await
                    .unwrap();
                if n >= JOBS as i64 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let r = Rate {
                per_s: JOBS as f64 / t.elapsed().as_secs_f64(),
                cpu: pg_work::cpu_since(cpu),
            };
            node.shutdown().await;
            r
        }
        Imp::Sqlxmq => {
            let pool = fresh_mq(DB).await;
            RUNS.lock().unwrap().clear();
            spawn_all(&pool, vec![SystemTime::now(); JOBS]).await;
            let (t, cpu) = (Instant::now(), pg_work::cpu_now());
            let runner = JobRegistry::new(&[timer])
                .runner(&pool)
                .set_concurrency(SLOTS, SLOTS)
                .run()
                .await
                .unwrap();
            wait_for("sqlxmq", JOBS, Duration::from_secs(300), || len_of(&RUNS)).await;
            let r = Rate {
                per_s: JOBS as f64 / t.elapsed().as_secs_f64(),
                cpu: pg_work::cpu_since(cpu),
            };
            drop(runner);
            r
        }
    }
}

// ---- one schedule inside a transaction ------------------------------------

/// Percentiles (µs) of the statement alone and of the whole transaction
/// (`BEGIN`, the statement, `COMMIT`), with the CPU of the timed calls.
#[derive(Debug, Clone, Copy)]
struct InTx {
    stmt_p50: u64,
    stmt_p99: u64,
    tx_p50: u64,
    tx_p99: u64,
    cpu: Cpu,
}

fn in_tx(mut stmt: Vec<u64>, mut tx: Vec<u64>, cpu: Cpu) -> InTx {
    stmt.sort_unstable();
    tx.sort_unstable();
    let at = |v: &[u64], p: f64| v[((v.len() - 1) as f64 * p) as usize];
    InTx {
        stmt_p50: at(&stmt, 0.5),
        stmt_p99: at(&stmt, 0.99),
        tx_p50: at(&tx, 0.5),
        tx_p99: at(&tx, 0.99),
        cpu,
    }
}

/// `SCHEDULES` new keys (due in an hour), each in a transaction of its
/// own on one connection, after `WARM_UP` untimed ones.
async fn schedule_in_tx(imp: Imp) -> InTx {
    let us = |d: Duration| d.as_micros() as u64;
    let (mut stmt, mut whole) = (Vec::new(), Vec::new());
    let mut cpu = pg_work::cpu_now();
    match imp {
        Imp::Blocking => block_in_place(|| {
            let (mut c, q) = pg_work::fresh("bench_tx_blk");
            for i in 0..WARM_UP + SCHEDULES {
                if i == WARM_UP {
                    cpu = pg_work::cpu_now();
                }
                let task = NewTask::new(format!("k{i}"), "h").after(FAR);
                let t0 = Instant::now();
                let mut tx = c.transaction().unwrap();
                let t1 = Instant::now();
                q.schedule(&mut tx, &task).unwrap();
                let t2 = Instant::now();
                tx.commit().unwrap();
                if i >= WARM_UP {
                    stmt.push(us(t2 - t1));
                    whole.push(us(t0.elapsed()));
                }
            }
        }),
        Imp::Async => {
            let q = fresh_tp("bench_tx_async");
            let pool = pool(&base_url(), 1).await;
            for i in 0..WARM_UP + SCHEDULES {
                if i == WARM_UP {
                    cpu = pg_work::cpu_now();
                }
                let task = NewTask::new(format!("k{i}"), "h").after(FAR);
                let t0 = Instant::now();
                let mut tx = pool.begin().await.unwrap();
                let t1 = Instant::now();
                q.sqlx().schedule(&mut *tx, &task).await.unwrap();
                let t2 = Instant::now();
                tx.commit().await.unwrap();
                if i >= WARM_UP {
                    stmt.push(us(t2 - t1));
                    whole.push(us(t0.elapsed()));
                }
            }
        }
        Imp::Sqlxmq => {
            let pool = fresh_mq(DB).await;
            let pool1 = self::pool(&url_of(DB), 1).await;
            drop(pool);
            for i in 0..WARM_UP + SCHEDULES {
                if i == WARM_UP {
                    cpu = pg_work::cpu_now();
                }
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
                if i >= WARM_UP {
                    stmt.push(us(t2 - t1));
                    whole.push(us(t0.elapsed()));
                }
            }
        }
    }
    in_tx(stmt, whole, pg_work::cpu_since(cpu))
}

// ---- idle -----------------------------------------------------------------

/// Transactions committed per second in each implementation's own
/// database while it idles with `PENDING` jobs an hour away, all three
/// at once, over `IDLE_WINDOW` after an 11 s settle (backends flush their
/// statistics within 10 s of going idle).
async fn idle() -> [(Imp, f64); 3] {
    let (blk_db, async_db, mq_db) = (
        "timerpool_idle_blk",
        "timerpool_idle_async",
        "timerpool_sqlxmq_idle",
    );
    let tasks: Vec<NewTask> = (0..PENDING)
        .map(|i| NewTask::new(format!("k{i}"), "h").after(FAR))
        .collect();
    let blocking = block_in_place(|| {
        for db in [blk_db, async_db] {
            recreate(db);
            let mut c = config_of(db).connect(postgres::NoTls).unwrap();
            let q = Queue::new("timerpool", "bench").unwrap();
            q.install(&mut c).unwrap();
            q.schedule_batch(&mut c, &tasks).unwrap();
        }
        let sink = Sink::default();
        Node::builder(config_of(blk_db), "bench")
            .workers(SLOTS)
            .handler("h", move |job| {
                sink.lock().unwrap().push(late_us(job.due()));
                Ok(())
            })
            .start()
            .unwrap()
    });
    let sink = Sink::default();
    let asynchronous = async_node(config_of(async_db), "timerpool", 16, &sink);
    let mq = fresh_mq(mq_db).await;
    spawn_all(&mq, vec![SystemTime::now() + FAR; PENDING]).await;
    let runner = JobRegistry::new(&[timer])
        .runner(&mq)
        .set_concurrency(SLOTS, SLOTS)
        .run()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(11)).await;
    let admin = pool(&base_url(), 1).await;
    let commits = || async {
        let mut out = Vec::new();
        for db in [blk_db, async_db, mq_db] {
            let n: i64 = timerpool_pg::sqlx::query_scalar(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = $1",
            )
            .bind(db)
            .fetch_one(&admin)
            .await
            .unwrap();
            out.push(n);
        }
        out
    };
    let before = commits().await;
    tokio::time::sleep(IDLE_WINDOW).await;
    let after = commits().await;
    drop(runner);
    mq.close().await;
    asynchronous.shutdown().await;
    block_in_place(|| blocking.shutdown());
    let secs = IDLE_WINDOW.as_secs_f64();
    let rate = |i: usize| (after[i] - before[i]) as f64 / secs;
    [
        (Imp::Blocking, rate(0)),
        (Imp::Async, rate(1)),
        (Imp::Sqlxmq, rate(2)),
    ]
}

// ---- report ---------------------------------------------------------------

fn ms(us: u64) -> String {
    format!("{:.1}", us as f64 / 1e3)
}

fn cpu(c: Cpu) -> String {
    format!(
        "{:.2} s / {:.2} s",
        c.client.as_secs_f64(),
        c.server.as_secs_f64()
    )
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The median round by p99, and the early runs summed over all rounds.
fn late_row(imp: Imp, mut runs: Vec<Late>) {
    let early: usize = runs.iter().map(|l| l.early).sum();
    runs.sort_by_key(|l| l.p99_us);
    let m = runs[runs.len() / 2];
    println!(
        "| {} | {} | {} | {} | {early} | {} |",
        imp.name(),
        ms(m.p50_us),
        ms(m.p99_us),
        ms(m.max_us),
        cpu(m.cpu)
    );
}

const IMPS: [Imp; 3] = [Imp::Blocking, Imp::Async, Imp::Sqlxmq];

#[tokio::main]
async fn main() {
    println!("load average at start: {}", load());
    let mut lat: Vec<Vec<Late>> = vec![Vec::new(); 3];
    let mut pre: Vec<Vec<Late>> = vec![Vec::new(); 3];
    let mut e2e: Vec<Vec<Rate>> = vec![Vec::new(); 3];
    let mut tx: Vec<Vec<InTx>> = vec![Vec::new(); 3];
    let mut idl: Vec<Vec<f64>> = vec![Vec::new(); 3];
    for round in 0..ROUNDS {
        let mut order: Vec<(usize, Imp)> = IMPS.into_iter().enumerate().collect();
        if round % 2 == 1 {
            order.reverse();
        }
        eprintln!("round {round}, load {}", load());
        for &(i, imp) in &order {
            let l = lateness(imp).await;
            eprintln!("  lateness {imp:?}: {l:?}");
            lat[i].push(l);
        }
        for &(i, imp) in &order {
            let l = preemption(imp).await;
            eprintln!("  preemption {imp:?}: {l:?}");
            pre[i].push(l);
        }
        for &(i, imp) in &order {
            let r = end_to_end(imp).await;
            eprintln!("  end to end {imp:?}: {r:?}");
            e2e[i].push(r);
        }
        for &(i, imp) in &order {
            let t = schedule_in_tx(imp).await;
            eprintln!("  schedule in tx {imp:?}: {t:?}");
            tx[i].push(t);
        }
        for (imp, rate) in idle().await {
            eprintln!("  idle {imp:?}: {rate:.3}/s");
            idl[IMPS.iter().position(|x| *x == imp).unwrap()].push(rate);
        }
        eprintln!("round {round} done, load {}", load());
    }

    println!("\n### Lateness: {TIMERS} timers over {SPREAD:?}, 4 slots; the median of {ROUNDS} rounds by p99\n");
    println!(
        "| implementation | p50 ms | p99 ms | max ms | early (all rounds) | CPU client / server |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | --- |");
    for (i, imp) in IMPS.into_iter().enumerate() {
        late_row(imp, lat[i].clone());
    }
    println!("\n### Preemption: a job due in {NEAR:?} while one is due in an hour, {TRIALS} trials a round; the median round by p99\n");
    println!(
        "| implementation | p50 ms | p99 ms | max ms | early (all rounds) | CPU client / server |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | --- |");
    for (i, imp) in IMPS.into_iter().enumerate() {
        late_row(imp, pre[i].clone());
    }
    println!("\n### End to end: {JOBS} jobs due at once, one node / runner with 4 slots; the median of {ROUNDS} rounds\n");
    println!("| implementation | jobs/s | CPU client / server |");
    println!("| --- | ---: | --- |");
    for (i, imp) in IMPS.into_iter().enumerate() {
        let mut v = e2e[i].clone();
        v.sort_by(|a, b| a.per_s.total_cmp(&b.per_s));
        let m = v[v.len() / 2];
        println!("| {} | {:.0} | {} |", imp.name(), m.per_s, cpu(m.cpu));
    }
    println!("\n### One keyed schedule (sqlxmq: one spawn) inside a transaction, {SCHEDULES} a round on one connection; the median round by statement p50\n");
    println!(
        "| client | statement p50 µs | p99 µs | BEGIN + statement + COMMIT p50 µs | p99 µs | CPU client / server ({SCHEDULES} transactions) |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | --- |");
    for (i, imp) in IMPS.into_iter().enumerate() {
        let mut v = tx[i].clone();
        v.sort_by_key(|t| t.stmt_p50);
        let m = v[v.len() / 2];
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            imp.name(),
            m.stmt_p50,
            m.stmt_p99,
            m.tx_p50,
            m.tx_p99,
            cpu(m.cpu)
        );
    }
    println!("\n### Idle: {PENDING} jobs an hour away, transactions committed per second over {IDLE_WINDOW:?}; the median of {ROUNDS} rounds\n");
    println!("| implementation | transactions/s | all rounds |");
    println!("| --- | ---: | --- |");
    for (i, imp) in IMPS.into_iter().enumerate() {
        let mut v = idl[i].clone();
        v.sort_by(f64::total_cmp);
        let all: Vec<String> = idl[i].iter().map(|r| format!("{r:.2}")).collect();
        println!(
            "| {} | {:.2} | {} |",
            imp.name(),
            v[v.len() / 2],
            all.join(", ")
        );
    }
    println!("\nload average at end: {}", load());
}
