//! Workloads of the PostgreSQL benchmarks, shared by `benches/pg.rs`,
//! `benches/pg_async_node.rs` and `examples/pg_report.rs`: timerpool's
//! nodes against a polling claimer (poll every second for due jobs, claim
//! with SKIP LOCKED: the design of the existing PostgreSQL job queues), on
//! the same server in the same run. The node workloads take a [`Kind`]:
//! [`BLOCKING`] here, the `AsyncNode` in `tokio_kind.rs` (which needs
//! feature `tokio`, so this module does not name it).
#![allow(dead_code)] // each user runs a subset

use cpu_time::ProcessTime;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use timerpool_pg::{NewTask, Node, Queue};

/// The server, from `TIMERPOOL_PG_URL`.
pub fn config() -> postgres::Config {
    std::env::var("TIMERPOOL_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
        .parse()
        .expect("TIMERPOOL_PG_URL is a connection string")
}

pub fn client() -> postgres::Client {
    config().connect(postgres::NoTls).expect("connect")
}

/// A fresh schema with timerpool's tables and the polling claimer's table.
pub fn fresh(schema: &str) -> (postgres::Client, Queue) {
    let mut c = client();
    c.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema};
         CREATE TABLE {schema}.jobs (id bigserial PRIMARY KEY, key text NOT NULL,
             due timestamptz NOT NULL, payload bytea NOT NULL DEFAULT '');
         CREATE INDEX ON {schema}.jobs (due);"
    ))
    .expect("fresh schema");
    let q = Queue::new(schema, "bench").expect("queue");
    q.install(&mut c).expect("install");
    (c, q)
}

/// CPU seconds of this process and of every PostgreSQL server process.
#[derive(Debug, Clone, Copy)]
pub struct Cpu {
    pub client: Duration,
    pub server: Duration,
}

pub fn cpu_now() -> Cpu {
    Cpu {
        client: ProcessTime::now().as_duration(),
        server: server_cpu(),
    }
}

pub fn cpu_since(start: Cpu) -> Cpu {
    let now = cpu_now();
    Cpu {
        client: now.client.saturating_sub(start.client),
        server: now.server.saturating_sub(start.server),
    }
}

/// utime + stime of processes named `postgres`, from /proc (100 Hz ticks).
fn server_cpu() -> Duration {
    let mut ticks = 0u64;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((head, tail)) = stat.rsplit_once(')') else {
            continue;
        };
        if !head.ends_with("(postgres") {
            continue;
        }
        let f: Vec<&str> = tail.split_whitespace().collect();
        ticks += f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        ticks += f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    }
    Duration::from_millis(ticks * 10)
}

/// Lateness percentiles in µs, with the CPU the run took.
#[derive(Debug, Clone, Copy)]
pub struct Late {
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    pub early: usize,
    pub cpu: Cpu,
}

fn late_of(mut us: Vec<i64>, cpu: Cpu) -> Late {
    us.sort_unstable();
    let early = us.iter().filter(|v| **v < 0).count();
    let at = |p: f64| us[((us.len() - 1) as f64 * p) as usize].max(0) as u64;
    Late {
        p50_us: at(0.50),
        p99_us: at(0.99),
        max_us: at(1.0),
        early,
        cpu,
    }
}

/// Signed lateness of `due` now, in µs.
pub fn lateness_us(due: SystemTime) -> i64 {
    match SystemTime::now().duration_since(due) {
        Ok(d) => d.as_micros() as i64,
        Err(e) => -(e.duration().as_micros() as i64),
    }
}

/// Where handlers record the lateness (µs) of each run.
pub type Sink = Arc<Mutex<Vec<i64>>>;

/// What the workloads need of a running node, of either kind.
pub trait Running {
    /// The node's id, which its sessions' `application_name` carries.
    fn id(&self) -> String;
    /// Outcomes the node has recorded.
    fn recorded(&self) -> u64;
    /// Stops the node and waits for it.
    fn stop(self: Box<Self>);
}

impl Running for Node {
    fn id(&self) -> String {
        Node::id(self).to_string()
    }
    fn recorded(&self) -> u64 {
        self.stats().recorded
    }
    fn stop(self: Box<Self>) {
        self.shutdown()
    }
}

/// How a workload starts a node: on the database `config` names, in
/// `schema`, with `workers` handlers at once, `prefetch` (`None`: the
/// default) and a handler `"h"` that pushes each run's lateness to `sink`.
pub struct Spec<'a> {
    pub config: postgres::Config,
    pub schema: &'a str,
    pub workers: usize,
    pub prefetch: Option<usize>,
    pub sink: &'a Sink,
}

/// A kind of timerpool node the workloads run.
#[derive(Clone, Copy)]
pub struct Kind {
    /// Its name in the report's rows.
    pub name: &'static str,
    /// What its handlers at once are called: threads or slots.
    pub unit: &'static str,
    /// Its part of the workloads' schema and database names.
    pub tag: &'static str,
    /// Starts one.
    pub start: fn(Spec<'_>) -> Box<dyn Running>,
}

/// The blocking `Node`, handlers on threads of its own.
pub const BLOCKING: Kind = Kind {
    name: "timerpool `Node`",
    unit: "workers",
    tag: "tp",
    start: |spec| Box::new(blocking(spec)),
};

fn blocking(spec: Spec<'_>) -> Node {
    let sink = spec.sink.clone();
    let mut b = Node::builder(spec.config, "bench")
        .schema(spec.schema)
        .workers(spec.workers)
        .handler("h", move |job| {
            sink.lock().unwrap().push(lateness_us(job.due()));
            Ok(())
        });
    if let Some(p) = spec.prefetch {
        b = b.prefetch(p);
    }
    b.start().expect("start node")
}

/// A started timerpool node whose handler records lateness.
pub fn node(schema: &str, workers: usize, prefetch: usize, sink: &Sink) -> Node {
    blocking(Spec {
        config: config(),
        schema,
        workers,
        prefetch: Some(prefetch),
        sink,
    })
}

fn wait_len(sink: &Mutex<Vec<i64>>, n: usize, limit: Duration) {
    let end = Instant::now() + limit;
    while sink.lock().unwrap().len() < n {
        assert!(
            Instant::now() < end,
            "only {} of {n} ran",
            sink.lock().unwrap().len()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `n` timers spread over `spread`, starting 1 s from now, on one
/// blocking node.
pub fn lateness_timerpool(n: usize, spread: Duration) -> Late {
    lateness(&BLOCKING, n, spread)
}

/// `n` timers spread over `spread`, starting 1 s from now, on one node of
/// `kind` with 4 handlers at once.
pub fn lateness(kind: &Kind, n: usize, spread: Duration) -> Late {
    let schema = &format!("bench_late_{}", kind.tag);
    let (mut c, q) = fresh(schema);
    let sink = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let node = (kind.start)(Spec {
        config: config(),
        schema,
        workers: 4,
        prefetch: Some(256),
        sink: &sink,
    });
    let t0 = SystemTime::now() + Duration::from_secs(1);
    let cpu = cpu_now();
    let tasks: Vec<NewTask> = (0..n)
        .map(|i| NewTask::new(format!("k{i}"), "h").at(t0 + spread.mul_f64(i as f64 / n as f64)))
        .collect();
    for chunk in tasks.chunks(500) {
        q.schedule_batch(&mut c, chunk).expect("schedule");
    }
    wait_len(&sink, n, spread + Duration::from_secs(60));
    let cpu = cpu_since(cpu);
    node.stop();
    let v = std::mem::take(&mut *sink.lock().unwrap());
    late_of(v, cpu)
}

/// The polling claimer: every `poll`, claim due jobs in batches of 500
/// with `FOR UPDATE SKIP LOCKED` and run them, until none are due.
pub struct Poller {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Poller {
    pub fn start(schema: &str, poll: Duration, sink: &Arc<Mutex<Vec<i64>>>) -> Poller {
        let stop = Arc::new(AtomicBool::new(false));
        let (s, sink) = (stop.clone(), sink.clone());
        let sql = format!(
            "WITH c AS (SELECT id FROM {schema}.jobs WHERE due <= now() ORDER BY due
                        LIMIT 500 FOR UPDATE SKIP LOCKED)
             DELETE FROM {schema}.jobs j USING c WHERE j.id = c.id RETURNING j.due"
        );
        let thread = std::thread::spawn(move || {
            let mut c = client();
            while !s.load(Ordering::Relaxed) {
                let rows = c.query(&sql, &[]).expect("poll");
                let mut out = sink.lock().unwrap();
                out.extend(rows.iter().map(|r| lateness_us(r.get(0))));
                drop(out);
                if rows.len() < 500 {
                    std::thread::sleep(poll);
                }
            }
        });
        Poller {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Inserts plain jobs for the polling claimer.
pub fn insert_jobs(c: &mut postgres::Client, schema: &str, dues: &[SystemTime]) {
    let sql = format!("INSERT INTO {schema}.jobs (key, due) SELECT 'k' || g, d FROM unnest($1::timestamptz[]) WITH ORDINALITY AS u(d, g)");
    for chunk in dues.chunks(500) {
        c.execute(&sql, &[&chunk.to_vec()]).expect("insert jobs");
    }
}

/// The same spread of timers on the polling claimer.
pub fn lateness_polling(n: usize, spread: Duration, poll: Duration) -> Late {
    let schema = "bench_late_poll";
    let (mut c, _) = fresh(schema);
    let sink = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let poller = Poller::start(schema, poll, &sink);
    let t0 = SystemTime::now() + Duration::from_secs(1);
    let cpu = cpu_now();
    let dues: Vec<SystemTime> = (0..n)
        .map(|i| t0 + spread.mul_f64(i as f64 / n as f64))
        .collect();
    insert_jobs(&mut c, schema, &dues);
    wait_len(&sink, n, spread + Duration::from_secs(60));
    let cpu = cpu_since(cpu);
    drop(poller);
    let v = std::mem::take(&mut *sink.lock().unwrap());
    late_of(v, cpu)
}

/// True once the leader of the node `id` is idle in its wait.
fn leader_waiting(c: &mut postgres::Client, id: &str) -> bool {
    let app = format!("timerpool node {id}");
    c.query_one(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1
         AND state = 'idle' AND query LIKE '%min(run_at)%'",
        &[&app],
    )
    .is_ok_and(|r| r.get::<_, i64>(0) == 1)
}

/// A blocking node sleeping toward a task an hour away gets a task due
/// in 1 ms: how late does it start? `trials` times.
pub fn preemption_timerpool(trials: usize) -> Late {
    preemption(&BLOCKING, trials)
}

/// The same with a node of `kind` (2 handlers at once).
pub fn preemption(kind: &Kind, trials: usize) -> Late {
    let schema = &format!("bench_preempt_{}", kind.tag);
    let (mut c, q) = fresh(schema);
    let sink = Arc::new(Mutex::new(Vec::new()));
    let node = (kind.start)(Spec {
        config: config(),
        schema,
        workers: 2,
        prefetch: Some(16),
        sink: &sink,
    });
    let id = node.id();
    q.schedule(
        &mut c,
        &NewTask::new("far", "h").after(Duration::from_secs(3600)),
    )
    .expect("far");
    let cpu = cpu_now();
    for i in 0..trials {
        while !leader_waiting(&mut c, &id) {
            std::thread::sleep(Duration::from_millis(2));
        }
        let t = NewTask::new(format!("near{i}"), "h").after(Duration::from_millis(1));
        q.schedule(&mut c, &t).expect("near");
        wait_len(&sink, i + 1, Duration::from_secs(30));
    }
    let cpu = cpu_since(cpu);
    node.stop();
    let v = std::mem::take(&mut *sink.lock().unwrap());
    late_of(v, cpu)
}

/// The same on the polling claimer, whose sleep a new job cannot cut short.
pub fn preemption_polling(trials: usize, poll: Duration) -> Late {
    let schema = "bench_preempt_poll";
    let (mut c, _) = fresh(schema);
    let sink = Arc::new(Mutex::new(Vec::new()));
    let poller = Poller::start(schema, poll, &sink);
    let cpu = cpu_now();
    for i in 0..trials {
        // Arrive at a point of the poll cycle that does not repeat.
        std::thread::sleep(poll.mul_f64((i as f64 * 0.37) % 1.0));
        insert_jobs(
            &mut c,
            schema,
            &[SystemTime::now() + Duration::from_millis(1)],
        );
        wait_len(&sink, i + 1, Duration::from_secs(30));
    }
    let cpu = cpu_since(cpu);
    drop(poller);
    let v = std::mem::take(&mut *sink.lock().unwrap());
    late_of(v, cpu)
}

/// Operations per second with the CPU they took.
#[derive(Debug, Clone, Copy)]
pub struct Rate {
    pub per_s: f64,
    pub cpu: Cpu,
}

fn rate(n: usize, f: impl FnOnce()) -> Rate {
    let (t, cpu) = (Instant::now(), cpu_now());
    f();
    Rate {
        per_s: n as f64 / t.elapsed().as_secs_f64(),
        cpu: cpu_since(cpu),
    }
}

/// Single-statement schedules (new keys), replaces, cancels, batched
/// schedules (batches of 500), and the polling claimer's plain inserts.
pub fn schedule_rates(n: usize) -> [(&'static str, Rate); 5] {
    let schema = "bench_sched";
    let (mut c, q) = fresh(schema);
    let far = Duration::from_secs(3600);
    let task = |i: usize| NewTask::new(format!("k{i}"), "h").after(far);
    let insert = rate(n, || {
        (0..n).for_each(|i| drop(q.schedule(&mut c, &task(i)).expect("schedule")))
    });
    let replace = rate(n, || {
        (0..n).for_each(|i| drop(q.schedule(&mut c, &task(i)).expect("replace")))
    });
    let cancel = rate(n, || {
        (0..n).for_each(|i| assert!(q.cancel(&mut c, &format!("k{i}")).expect("cancel")))
    });
    let batch: Vec<NewTask> = (0..n * 4).map(|i| task(n + i)).collect();
    let batched = rate(n * 4, || {
        batch
            .chunks(500)
            .for_each(|b| drop(q.schedule_batch(&mut c, b).expect("batch")))
    });
    let sql =
        format!("INSERT INTO {schema}.jobs (key, due) VALUES ($1, now() + interval '1 hour')");
    let st = c.prepare(&sql).expect("prepare");
    let plain = rate(n, || {
        (0..n).for_each(|i| {
            c.execute(&st, &[&format!("k{i}")]).expect("insert");
        })
    });
    [
        ("schedule (insert)", insert),
        ("schedule (replace)", replace),
        ("cancel", cancel),
        ("schedule_batch (500)", batched),
        ("polling peer: plain INSERT", plain),
    ]
}

/// `n` tasks due at once on `nodes` blocking nodes (2 workers, prefetch
/// 512 each): tasks per second from the due time until the last outcome
/// is recorded.
pub fn end_to_end(nodes: usize, n: usize) -> Rate {
    end_to_end_of(&BLOCKING, nodes, n)
}

/// The same on `nodes` nodes of `kind` (2 handlers at once each).
pub fn end_to_end_of(kind: &Kind, nodes: usize, n: usize) -> Rate {
    let schema = &format!("bench_e2e_{}", kind.tag);
    let (mut c, q) = fresh(schema);
    let sink = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let nodes: Vec<Box<dyn Running>> = (0..nodes)
        .map(|_| {
            (kind.start)(Spec {
                config: config(),
                schema,
                workers: 2,
                prefetch: Some(512),
                sink: &sink,
            })
        })
        .collect();
    let due = SystemTime::now() + Duration::from_secs(2);
    let tasks: Vec<NewTask> = (0..n)
        .map(|i| NewTask::new(format!("k{i}"), "h").at(due))
        .collect();
    for chunk in tasks.chunks(1000) {
        q.schedule_batch(&mut c, chunk).expect("schedule");
    }
    std::thread::sleep(due.duration_since(SystemTime::now()).unwrap_or_default());
    let (t, cpu) = (Instant::now(), cpu_now());
    let count = format!("SELECT count(*) FROM {schema}.outcomes");
    while c.query_one(&count, &[]).expect("count").get::<_, i64>(0) < n as i64 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let r = Rate {
        per_s: n as f64 / t.elapsed().as_secs_f64(),
        cpu: cpu_since(cpu),
    };
    nodes.into_iter().for_each(Running::stop);
    r
}

/// The polling claimer's due-now throughput with one claimer.
pub fn end_to_end_polling(n: usize) -> Rate {
    let schema = "bench_e2e_poll";
    let (mut c, _) = fresh(schema);
    let sink = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let due = SystemTime::now() + Duration::from_secs(2);
    insert_jobs(&mut c, schema, &vec![due; n]);
    std::thread::sleep(due.duration_since(SystemTime::now()).unwrap_or_default());
    rate(n, || {
        let _poller = Poller::start(schema, Duration::from_secs(1), &sink);
        wait_len(&sink, n, Duration::from_secs(120));
    })
}

/// Transactions committed per second, each in a database of its own, while
/// one node of each of `kinds` idles with `pending` tasks an hour away and
/// the polling claimer idles with as many jobs, all at once, measured over
/// `window`; the rates in the order of `kinds`, the claimer's last, and
/// the CPU of all of them together.
pub fn idle_rates(kinds: &[Kind], pending: usize, window: Duration) -> (Vec<f64>, Cpu) {
    let mut admin = client();
    let mut dbs: Vec<String> = kinds
        .iter()
        .map(|k| format!("timerpool_idle_{}", k.tag))
        .collect();
    dbs.push("timerpool_idle_poll".into());
    for db in &dbs {
        // One statement each: neither may run inside a transaction block.
        let drop_db = format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)");
        admin.batch_execute(&drop_db).expect("drop idle database");
        let create = format!("CREATE DATABASE {db}");
        admin.batch_execute(&create).expect("create idle database");
    }
    let on = |db: &str| {
        let mut cfg = config();
        cfg.dbname(db);
        cfg
    };
    let q = Queue::new("timerpool", "bench").expect("queue");
    let tasks: Vec<NewTask> = (0..pending)
        .map(|i| NewTask::new(format!("k{i}"), "h").after(Duration::from_secs(3600)))
        .collect();
    let sink = Sink::default();
    let nodes: Vec<Box<dyn Running>> = kinds
        .iter()
        .zip(&dbs)
        .map(|(kind, db)| {
            let mut c = on(db).connect(postgres::NoTls).expect("connect");
            q.install(&mut c).expect("install");
            tasks
                .chunks(1000)
                .for_each(|b| drop(q.schedule_batch(&mut c, b).expect("schedule")));
            (kind.start)(Spec {
                config: on(db),
                schema: "timerpool",
                workers: 2,
                prefetch: None,
                sink: &sink,
            })
        })
        .collect();
    let poll_db = dbs.last().expect("the claimer's database");
    let mut p = on(poll_db).connect(postgres::NoTls).expect("connect");
    p.batch_execute(&format!(
        "CREATE TABLE jobs (id bigserial PRIMARY KEY, key text, due timestamptz);
         CREATE INDEX ON jobs (due);
         INSERT INTO jobs (key, due) SELECT 'k' || g, now() + interval '1 hour'
         FROM generate_series(1, {pending}) g"
    ))
    .expect("poll jobs");
    drop(p);
    let poll_sql = "WITH c AS (SELECT id FROM jobs WHERE due <= now() ORDER BY due LIMIT 500 \
                    FOR UPDATE SKIP LOCKED) DELETE FROM jobs j USING c WHERE j.id = c.id";
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let cfg = on(poll_db);
    let poller = std::thread::spawn(move || {
        let mut c = cfg.connect(postgres::NoTls).expect("connect");
        while !s.load(Ordering::Relaxed) {
            c.execute(poll_sql, &[]).expect("poll");
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    // Backends flush their statistics within 10 s of going idle.
    std::thread::sleep(Duration::from_secs(11));
    let commits = |admin: &mut postgres::Client| -> Vec<i64> {
        dbs.iter()
            .map(|db| {
                admin
                    .query_one(
                        "SELECT xact_commit FROM pg_stat_database WHERE datname = $1",
                        &[db],
                    )
                    .expect("stats")
                    .get(0)
            })
            .collect()
    };
    let (before, cpu) = (commits(&mut admin), cpu_now());
    std::thread::sleep(window);
    let after = commits(&mut admin);
    let cpu = cpu_since(cpu);
    stop.store(true, Ordering::Relaxed);
    let _ = poller.join();
    nodes.into_iter().for_each(Running::stop);
    let secs = window.as_secs_f64();
    let rates = after
        .iter()
        .zip(&before)
        .map(|(a, b)| (a - b) as f64 / secs)
        .collect();
    (rates, cpu)
}
