//! timerpool's durable timers beside three Rust PostgreSQL job queues, on
//! the same server in the same run: the blocking `Node` (scheduled with the
//! `postgres` client), the `AsyncNode` (scheduled from sqlx), sqlxmq
//! (`peer_sqlxmq.rs`), apalis (`peer_apalis.rs`) and graphile_worker
//! (`peer_graphile.rs`), each with 4 handler slots. The workloads, each run
//! once per round, in alternating order (as listed, then the reverse):
//!
//! - lateness of 2,000 timers spread over 10 s;
//! - preemption: a job due in 100 ms while one due in an hour is pending;
//! - end-to-end throughput of 10,000 jobs already due;
//! - one schedule inside a transaction: the statement and the whole
//!   transaction;
//! - the idle transaction rate with 1,000 jobs an hour away (all side by
//!   side, each in a database of its own).
//!
//! ```text
//! cd benches/pg_peers && ./run.sh [--rounds N] [--only lateness,preemption,e2e,tx,idle]
//! ```
//!
//! The peers run in databases of their own, created afresh for each
//! workload, since their objects live in fixed schemas.

#[path = "../../pg_work/mod.rs"]
mod pg_work;

mod peer_apalis;
mod peer_graphile;
mod peer_sqlxmq;

use pg_work::{cpu_now, cpu_since, Cpu, Late};
use std::future::Future;
use std::pin::Pin;
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
/// Gives the node or runner time to settle into its wait for the far job.
const SETTLE: Duration = Duration::from_millis(300);
/// The start of the name of each peer's database.
const DB_PREFIX: &str = "timerpool_";

type Sink = Arc<Mutex<Vec<i64>>>;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Imp {
    Blocking,
    Async,
    Sqlxmq,
    Apalis,
    Graphile,
    GraphileDirect,
}

const IMPS: [Imp; 6] = [
    Imp::Blocking,
    Imp::Async,
    Imp::Sqlxmq,
    Imp::Apalis,
    Imp::Graphile,
    Imp::GraphileDirect,
];

impl Imp {
    fn name(self) -> String {
        match self {
            Imp::Blocking => "timerpool `Node` (postgres client)".into(),
            Imp::Async => "timerpool `AsyncNode` (sqlx client)".into(),
            Imp::Sqlxmq => "sqlxmq 0.6 (concurrency 4..4)".into(),
            Imp::Apalis => format!(
                "apalis 1.0 + apalis-postgres (concurrency 4, batch {}, poll {:?})",
                peer_apalis::BATCH,
                peer_apalis::POLL
            ),
            Imp::Graphile => {
                "graphile_worker 0.14 (concurrency 4, local queue 100, batched completions, poll 1 s)"
                    .into()
            }
            Imp::GraphileDirect => format!(
                "graphile_worker 0.14, default direct fetching ({} jobs)",
                peer_graphile::DIRECT_JOBS
            ),
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

/// Signed lateness now of a due time given in µs since the epoch.
fn late_us_of(due_us: i64) -> i64 {
    micros(SystemTime::now()) - due_us
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

/// Something running in the background (a node, runner or worker) and how
/// to stop it.
struct Running(Pin<Box<dyn Future<Output = ()> + Send>>);

impl Running {
    fn new(stop: impl FnOnce() + Send + 'static) -> Running {
        Running(Box::pin(async move { stop() }))
    }

    fn new_async(stop: impl Future<Output = ()> + Send + 'static) -> Running {
        Running(Box::pin(stop))
    }

    async fn stop(self) {
        self.0.await
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

async fn lateness(imp: Imp) -> Option<Late> {
    Some(match imp {
        Imp::Blocking => block_in_place(|| pg_work::lateness_timerpool(TIMERS, SPREAD)),
        Imp::Async => {
            let schema = "bench_late_async";
            let q = fresh_tp(schema);
            let pool = pool(&base_url(), 2).await;
            let sink = Sink::default();
            let node = async_node(pg_work::config(), schema, 256, &sink);
            // As the blocking run: the first due 1 s ahead, batches of 500.
            let tasks = tasks_at(&dues(SystemTime::now() + Duration::from_secs(1)));
            let cpu = cpu_now();
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
            let cpu = cpu_since(cpu);
            node.shutdown().await;
            let v = std::mem::take(&mut *sink.lock().unwrap());
            late(v, cpu)
        }
        Imp::Sqlxmq => peer_sqlxmq::lateness().await,
        Imp::Apalis => peer_apalis::lateness().await,
        Imp::Graphile => peer_graphile::lateness().await,
        Imp::GraphileDirect => return None,
    })
}

// ---- preemption -----------------------------------------------------------

async fn preemption(imp: Imp) -> Option<Late> {
    Some(match imp {
        Imp::Blocking => block_in_place(|| {
            let schema = "bench_preempt_blk";
            let (mut c, q) = pg_work::fresh(schema);
            let sink = Sink::default();
            let node = pg_work::node(schema, SLOTS, 16, &sink);
            q.schedule(&mut c, &NewTask::new("far", "h").after(FAR))
                .unwrap();
            let cpu = cpu_now();
            for i in 0..TRIALS {
                std::thread::sleep(SETTLE);
                let t = NewTask::new(format!("near{i}"), "h").at(SystemTime::now() + NEAR);
                q.schedule(&mut c, &t).unwrap();
                wait_sink(&sink, i + 1, Duration::from_secs(30));
            }
            let cpu = cpu_since(cpu);
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
            let cpu = cpu_now();
            for i in 0..TRIALS {
                tokio::time::sleep(SETTLE).await;
                let t = NewTask::new(format!("near{i}"), "h").at(SystemTime::now() + NEAR);
                q.sqlx().schedule(&pool, &t).await.unwrap();
                wait_for("async node", i + 1, Duration::from_secs(30), || {
                    len_of(&sink)
                })
                .await;
            }
            let cpu = cpu_since(cpu);
            node.shutdown().await;
            let v = std::mem::take(&mut *sink.lock().unwrap());
            late(v, cpu)
        }
        Imp::Sqlxmq => peer_sqlxmq::preemption().await,
        Imp::Apalis => peer_apalis::preemption().await,
        Imp::Graphile => peer_graphile::preemption().await,
        Imp::GraphileDirect => return None,
    })
}

// ---- end to end -----------------------------------------------------------

#[derive(Debug, Clone, Copy)]
struct Rate {
    per_s: f64,
    cpu: Cpu,
}

/// Polls the outcome count of `schema` every 10 ms until `JOBS` outcomes
/// are committed.
async fn wait_outcomes(pool: &PgPool, schema: &str) {
    let count = format!("SELECT count(*) FROM {schema}.outcomes");
    let end = Instant::now() + Duration::from_secs(300);
    loop {
        let n: i64 = timerpool_pg::sqlx::query_scalar(&count)
            .fetch_one(pool)
            .await
            .unwrap();
        if n >= JOBS as i64 {
            return;
        }
        assert!(Instant::now() < end, "{n} of {JOBS} outcomes in {schema}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `JOBS` jobs due at once, with 4 slots. timerpool: the node running,
/// the tasks scheduled due 2 s ahead, jobs per second from the due time
/// until the last outcome row is committed. The peers: a backlog of due
/// jobs, then the runner starts, from its start until the last completion
/// is committed.
async fn end_to_end(imp: Imp) -> Option<Rate> {
    let due = SystemTime::now() + Duration::from_secs(2);
    let tasks: Vec<NewTask> = (0..JOBS)
        .map(|i| NewTask::new(format!("k{i}"), "h").at(due))
        .collect();
    let until_due = || due.duration_since(SystemTime::now()).unwrap_or_default();
    Some(match imp {
        Imp::Blocking => {
            let schema = "bench_e2e_blk";
            let sink = Sink::default();
            let counter = pool(&base_url(), 1).await;
            let node = block_in_place(|| {
                let (mut c, q) = pg_work::fresh(schema);
                let node = pg_work::node(schema, SLOTS, 512, &sink);
                for chunk in tasks.chunks(1000) {
                    q.schedule_batch(&mut c, chunk).unwrap();
                }
                node
            });
            tokio::time::sleep(until_due()).await;
            let (t, cpu) = (Instant::now(), cpu_now());
            wait_outcomes(&counter, schema).await;
            let r = Rate {
                per_s: JOBS as f64 / t.elapsed().as_secs_f64(),
                cpu: cpu_since(cpu),
            };
            block_in_place(|| node.shutdown());
            r
        }
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
            let (t, cpu) = (Instant::now(), cpu_now());
            wait_outcomes(&pool, schema).await;
            let r = Rate {
                per_s: JOBS as f64 / t.elapsed().as_secs_f64(),
                cpu: cpu_since(cpu),
            };
            node.shutdown().await;
            r
        }
        Imp::Sqlxmq => peer_sqlxmq::end_to_end().await,
        Imp::Apalis => peer_apalis::end_to_end().await,
        Imp::Graphile => peer_graphile::end_to_end(peer_graphile::Setup::LocalQueue).await,
        Imp::GraphileDirect => peer_graphile::end_to_end(peer_graphile::Setup::Direct).await,
    })
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

/// Runs `one` (a transaction, returning the statement's time and the
/// whole transaction's) `WARM_UP` times untimed, then `SCHEDULES` times.
async fn time_in_tx<F, Fut>(mut one: F) -> InTx
where
    F: FnMut() -> Fut,
    Fut: Future<Output = (Duration, Duration)>,
{
    let us = |d: Duration| d.as_micros() as u64;
    let (mut stmt, mut whole) = (Vec::new(), Vec::new());
    let mut cpu = cpu_now();
    for i in 0..WARM_UP + SCHEDULES {
        if i == WARM_UP {
            cpu = cpu_now();
        }
        let (s, w) = one().await;
        if i >= WARM_UP {
            stmt.push(us(s));
            whole.push(us(w));
        }
    }
    let cpu = cpu_since(cpu);
    stmt.sort_unstable();
    whole.sort_unstable();
    let at = |v: &[u64], p: f64| v[((v.len() - 1) as f64 * p) as usize];
    InTx {
        stmt_p50: at(&stmt, 0.5),
        stmt_p99: at(&stmt, 0.99),
        tx_p50: at(&whole, 0.5),
        tx_p99: at(&whole, 0.99),
        cpu,
    }
}

/// `SCHEDULES` new jobs (due in an hour), each in a transaction of its
/// own on one connection, after `WARM_UP` untimed ones.
async fn schedule_in_tx(imp: Imp) -> Option<InTx> {
    Some(match imp {
        Imp::Blocking => {
            let (mut c, q) = block_in_place(|| pg_work::fresh("bench_tx_blk"));
            let mut i = 0;
            let r = time_in_tx(|| {
                i += 1;
                let task = NewTask::new(format!("k{i}"), "h").after(FAR);
                let times = block_in_place(|| {
                    let t0 = Instant::now();
                    let mut tx = c.transaction().unwrap();
                    let t1 = Instant::now();
                    q.schedule(&mut tx, &task).unwrap();
                    let t2 = Instant::now();
                    tx.commit().unwrap();
                    (t2 - t1, t0.elapsed())
                });
                std::future::ready(times)
            })
            .await;
            // The synchronous client closes on its own runtime: not on
            // this one's threads.
            block_in_place(move || drop(c));
            r
        }
        Imp::Async => {
            let q = fresh_tp("bench_tx_async");
            let pool = pool(&base_url(), 1).await;
            let mut i = 0;
            time_in_tx(|| {
                i += 1;
                let task = NewTask::new(format!("k{i}"), "h").after(FAR);
                let (q, pool) = (q.clone(), pool.clone());
                async move {
                    let t0 = Instant::now();
                    let mut tx = pool.begin().await.unwrap();
                    let t1 = Instant::now();
                    q.sqlx().schedule(&mut *tx, &task).await.unwrap();
                    let t2 = Instant::now();
                    tx.commit().await.unwrap();
                    (t2 - t1, t0.elapsed())
                }
            })
            .await
        }
        Imp::Sqlxmq => peer_sqlxmq::schedule_in_tx().await,
        Imp::Apalis => peer_apalis::schedule_in_tx().await,
        Imp::Graphile => peer_graphile::schedule_in_tx().await,
        Imp::GraphileDirect => return None,
    })
}

// ---- idle -----------------------------------------------------------------

/// Starts `imp` idling in the database `db` (made afresh) with `PENDING`
/// jobs an hour away.
async fn idle_start(imp: Imp, db: &str) -> Option<Running> {
    let tasks: Vec<NewTask> = (0..PENDING)
        .map(|i| NewTask::new(format!("k{i}"), "h").after(FAR))
        .collect();
    let install = |db: &str| {
        block_in_place(|| {
            recreate(db);
            let mut c = config_of(db).connect(postgres::NoTls).unwrap();
            let q = Queue::new("timerpool", "bench").unwrap();
            q.install(&mut c).unwrap();
            q.schedule_batch(&mut c, &tasks).unwrap();
        })
    };
    Some(match imp {
        Imp::Blocking => {
            install(db);
            let sink = Sink::default();
            let node = block_in_place(|| {
                Node::builder(config_of(db), "bench")
                    .workers(SLOTS)
                    .handler("h", move |job| {
                        sink.lock().unwrap().push(late_us(job.due()));
                        Ok(())
                    })
                    .start()
                    .unwrap()
            });
            Running::new(move || block_in_place(|| node.shutdown()))
        }
        Imp::Async => {
            install(db);
            let node = async_node(config_of(db), "timerpool", 16, &Sink::default());
            Running::new_async(node.shutdown())
        }
        Imp::Sqlxmq => peer_sqlxmq::idle(db, PENDING).await,
        Imp::Apalis => peer_apalis::idle(db, PENDING).await,
        Imp::Graphile => peer_graphile::idle(db, PENDING, peer_graphile::Setup::LocalQueue).await,
        Imp::GraphileDirect => peer_graphile::idle(db, PENDING, peer_graphile::Setup::Direct).await,
    })
}

/// Transactions committed per second in each implementation's own
/// database while it idles with `PENDING` jobs an hour away, all at
/// once, over `IDLE_WINDOW` after an 11 s settle (backends flush their
/// statistics within 10 s of going idle).
async fn idle() -> Vec<(Imp, f64)> {
    let mut running = Vec::new();
    for imp in IMPS {
        let db = format!("{DB_PREFIX}idle_{}", format!("{imp:?}").to_lowercase());
        if let Some(r) = idle_start(imp, &db).await {
            running.push((imp, db, r));
        }
    }
    // A new database gets a visit from autovacuum, whose transactions
    // count in its commits: vacuum each now, before the window, so that
    // visit is less likely to fall inside it.
    block_in_place(|| {
        for (_, db, _) in &running {
            let mut c = config_of(db).connect(postgres::NoTls).unwrap();
            c.batch_execute("VACUUM ANALYZE").unwrap();
        }
    });
    tokio::time::sleep(Duration::from_secs(11)).await;
    let admin = pool(&base_url(), 1).await;
    let commits = |db: String| {
        let admin = admin.clone();
        async move {
            timerpool_pg::sqlx::query_scalar::<_, i64>(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = $1",
            )
            .bind(db)
            .fetch_one(&admin)
            .await
            .unwrap()
        }
    };
    let mut before = Vec::new();
    for (_, db, _) in &running {
        before.push(commits(db.clone()).await);
    }
    tokio::time::sleep(IDLE_WINDOW).await;
    let mut out = Vec::new();
    for (i, (imp, db, r)) in running.into_iter().enumerate() {
        let after = commits(db).await;
        out.push((imp, (after - before[i]) as f64 / IDLE_WINDOW.as_secs_f64()));
        r.stop().await;
    }
    out
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

/// Why a row is empty: graphile_worker's direct fetching is measured on
/// the due-now and idle workloads only.
const ONLY_E2E: &str = "— (measured on the due-now and idle workloads only)";

/// The median round by p99, and the early runs summed over all rounds.
fn late_row(imp: Imp, mut runs: Vec<Late>) {
    if runs.is_empty() {
        println!("| {} | {ONLY_E2E} | | | | |", imp.name());
        return;
    }
    let early: usize = runs.iter().map(|l| l.early).sum();
    runs.sort_by_key(|l| l.p99_us);
    let m = runs[runs.len() / 2];
    let all: Vec<String> = runs
        .iter()
        .map(|l| format!("{}/{}", ms(l.p50_us), ms(l.p99_us)))
        .collect();
    println!(
        "| {} | {} | {} | {} | {early} | {} | {} |",
        imp.name(),
        ms(m.p50_us),
        ms(m.p99_us),
        ms(m.max_us),
        cpu(m.cpu),
        all.join(", ")
    );
}

/// Command line: `--rounds N` and `--only a,b` (workloads among
/// lateness, preemption, e2e, tx, idle; all by default).
struct Args {
    rounds: usize,
    only: Option<Vec<String>>,
}

impl Args {
    fn parse() -> Args {
        let mut a = Args {
            rounds: ROUNDS,
            only: None,
        };
        let mut it = std::env::args().skip(1);
        while let Some(arg) = it.next() {
            match arg.as_str() {
                "--rounds" => {
                    a.rounds = it.next().and_then(|v| v.parse().ok()).expect("--rounds N")
                }
                "--only" => {
                    let list = it.next().expect("--only a,b");
                    a.only = Some(list.split(',').map(str::to_string).collect());
                }
                other => panic!("unknown argument {other}"),
            }
        }
        a
    }

    fn runs(&self, workload: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|o| o.iter().any(|w| w == workload))
    }
}

/// Each workload's results per implementation (in `IMPS` order).
struct Results {
    lat: Vec<Vec<Late>>,
    pre: Vec<Vec<Late>>,
    e2e: Vec<Vec<Rate>>,
    tx: Vec<Vec<InTx>>,
    idl: Vec<Vec<f64>>,
}

fn ix(imp: Imp) -> usize {
    IMPS.iter().position(|x| *x == imp).unwrap()
}

async fn round(args: &Args, round: usize, r: &mut Results) {
    let mut order: Vec<Imp> = IMPS.to_vec();
    if round % 2 == 1 {
        order.reverse();
    }
    eprintln!("round {round}, load {}", load());
    if args.runs("lateness") {
        for &imp in &order {
            if let Some(l) = lateness(imp).await {
                eprintln!("  lateness {imp:?}: {l:?}");
                r.lat[ix(imp)].push(l);
            }
        }
    }
    if args.runs("preemption") {
        for &imp in &order {
            if let Some(l) = preemption(imp).await {
                eprintln!("  preemption {imp:?}: {l:?}");
                r.pre[ix(imp)].push(l);
            }
        }
    }
    if args.runs("e2e") {
        for &imp in &order {
            if let Some(e) = end_to_end(imp).await {
                eprintln!("  end to end {imp:?}: {e:?}");
                r.e2e[ix(imp)].push(e);
            }
        }
    }
    if args.runs("tx") {
        for &imp in &order {
            if let Some(t) = schedule_in_tx(imp).await {
                eprintln!("  schedule in tx {imp:?}: {t:?}");
                r.tx[ix(imp)].push(t);
            }
        }
    }
    if args.runs("idle") {
        for (imp, rate) in idle().await {
            eprintln!("  idle {imp:?}: {rate:.3}/s");
            r.idl[ix(imp)].push(rate);
        }
    }
    eprintln!("round {round} done, load {}", load());
}

fn report(args: &Args, r: &Results) {
    let n = args.rounds;
    if args.runs("lateness") {
        println!("\n### Lateness: {TIMERS} timers over {SPREAD:?}, 4 slots; the median of {n} rounds by p99\n");
        println!("| implementation | p50 ms | p99 ms | max ms | early (all rounds) | CPU client / server | rounds p50/p99 ms |");
        println!("| --- | ---: | ---: | ---: | ---: | --- | --- |");
        for imp in IMPS {
            late_row(imp, r.lat[ix(imp)].clone());
        }
    }
    if args.runs("preemption") {
        println!("\n### Preemption: a job due in {NEAR:?} while one is due in an hour, {TRIALS} trials a round; the median round by p99\n");
        println!("| implementation | p50 ms | p99 ms | max ms | early (all rounds) | CPU client / server | rounds p50/p99 ms |");
        println!("| --- | ---: | ---: | ---: | ---: | --- | --- |");
        for imp in IMPS {
            late_row(imp, r.pre[ix(imp)].clone());
        }
    }
    if args.runs("e2e") {
        println!("\n### End to end: {JOBS} jobs due at once, one node / runner with 4 slots; the median of {n} rounds\n");
        println!("| implementation | jobs/s | CPU client / server | all rounds jobs/s |");
        println!("| --- | ---: | --- | --- |");
        for imp in IMPS {
            let mut v = r.e2e[ix(imp)].clone();
            let all: Vec<String> = v.iter().map(|e| format!("{:.0}", e.per_s)).collect();
            v.sort_by(|a, b| a.per_s.total_cmp(&b.per_s));
            let m = v[v.len() / 2];
            println!(
                "| {} | {:.0} | {} | {} |",
                imp.name(),
                m.per_s,
                cpu(m.cpu),
                all.join(", ")
            );
        }
    }
    if args.runs("tx") {
        println!("\n### One schedule inside a transaction, {SCHEDULES} a round on one connection; the median round by statement p50\n");
        println!(
            "| implementation | statement p50 µs | p99 µs | BEGIN + statement + COMMIT p50 µs | p99 µs | CPU client / server ({SCHEDULES} transactions) |"
        );
        println!("| --- | ---: | ---: | ---: | ---: | --- |");
        for imp in IMPS {
            let mut v = r.tx[ix(imp)].clone();
            if v.is_empty() {
                println!("| {} | {ONLY_E2E} | | | | |", imp.name());
                continue;
            }
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
    }
    if args.runs("idle") {
        println!("\n### Idle: {PENDING} jobs an hour away, transactions committed per second over {IDLE_WINDOW:?}; the median of {n} rounds\n");
        println!("| implementation | transactions/s | all rounds |");
        println!("| --- | ---: | --- |");
        for imp in IMPS {
            let mut v = r.idl[ix(imp)].clone();
            if v.is_empty() {
                println!("| {} | {ONLY_E2E} | |", imp.name());
                continue;
            }
            let all: Vec<String> = v.iter().map(|x| format!("{x:.2}")).collect();
            v.sort_by(f64::total_cmp);
            println!(
                "| {} | {:.2} | {} |",
                imp.name(),
                v[v.len() / 2],
                all.join(", ")
            );
        }
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    println!("load average at start: {}", load());
    fn empty<T: Clone>() -> Vec<Vec<T>> {
        vec![Vec::new(); IMPS.len()]
    }
    let mut r = Results {
        lat: empty(),
        pre: empty(),
        e2e: empty(),
        tx: empty(),
        idl: empty(),
    };
    for i in 0..args.rounds {
        round(&args, i, &mut r).await;
    }
    report(&args, &r);
    println!("\nload average at end: {}", load());
}
