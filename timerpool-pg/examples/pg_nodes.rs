//! Three nodes of one durable queue in three processes: keyed offer
//! timeouts move between nodes, and a node killed with SIGKILL loses
//! nothing (its in-flight tasks are re-run elsewhere once its lease
//! expires).
//!
//! ```text
//! cargo run --release -p timerpool-pg --example pg_nodes [-- --tasks N --seconds S]
//! cargo run --release -p timerpool-pg --features tokio --example pg_nodes -- --async
//! ```
//!
//! With `--cron EXPR --calendar NAME`, `node` mode also holds the calendar
//! schedule NAME (EXPR in UTC, handler `tick`, every missed tick
//! backfilled), registering it at start-up as every node of a crontab
//! does; its ticks are recorded in `runs` like the tasks
//! (`tests/pg_calendar.rs`).
//!
//! `demo` (the default) starts three copies of itself in `node` mode,
//! schedules keyed timeouts, replaces and cancels some, kills one node with
//! SIGKILL halfway and prints every task's outcome, the runs per node and
//! the re-runs. `node` mode (used by `tests/pg_procs.rs`) runs one node
//! until its standard input closes, then prints its counters; with
//! `--async` (built with `--features tokio`) that node is an `AsyncNode`
//! whose handler is an `async fn`. The database is `TIMERPOOL_PG_URL`
//! (default `postgres://postgres@127.0.0.1:5432/test`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use timerpool_pg::{
    tick_handler, Backfill, CalendarSchedule, HandlerResult, Job, NewTask, Node, NodeStats, Queue,
    MAX_BACKFILL,
};

/// Command-line settings of both modes.
#[derive(Debug, Clone)]
struct Args {
    mode: String,
    schema: String,
    queue: String,
    workers: usize,
    lease_ms: u64,
    work_ms: u64,
    tasks: usize,
    seconds: u64,
    /// Node mode runs an `AsyncNode`.
    async_node: bool,
    /// Node mode holds this calendar schedule (a cron expression in UTC).
    cron: Option<String>,
    /// The calendar schedule's name.
    calendar: String,
}

fn args() -> Args {
    let mut a = Args {
        mode: "demo".into(),
        schema: "timerpool_demo".into(),
        queue: "offers".into(),
        workers: 2,
        lease_ms: 1000,
        work_ms: 20,
        tasks: 600,
        seconds: 4,
        async_node: false,
        cron: None,
        calendar: "ticks".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "node" | "demo" => a.mode = flag.clone(),
            "--schema" => a.schema = val(),
            "--queue" => a.queue = val(),
            "--workers" => a.workers = val().parse().expect("--workers N"),
            "--lease-ms" => a.lease_ms = val().parse().expect("--lease-ms N"),
            "--work-ms" => a.work_ms = val().parse().expect("--work-ms N"),
            "--tasks" => a.tasks = val().parse().expect("--tasks N"),
            "--seconds" => a.seconds = val().parse().expect("--seconds N"),
            "--async" => a.async_node = true,
            "--cron" => a.cron = Some(val()),
            "--calendar" => a.calendar = val(),
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

fn config() -> postgres::Config {
    std::env::var("TIMERPOOL_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
        .parse()
        .expect("TIMERPOOL_PG_URL is a connection string")
}

/// A running node of either kind.
enum Running {
    Blocking(Node),
    #[cfg(feature = "tokio")]
    Async(timerpool_pg::AsyncNode),
}

impl Running {
    fn id(&self) -> &str {
        match self {
            Running::Blocking(n) => n.id(),
            #[cfg(feature = "tokio")]
            Running::Async(n) => n.id(),
        }
    }

    fn stats(&self) -> NodeStats {
        match self {
            Running::Blocking(n) => n.stats(),
            #[cfg(feature = "tokio")]
            Running::Async(n) => n.stats(),
        }
    }
}

/// Writes a run's row: the blocking part of every run.
type RecordRun = Arc<dyn Fn(&Job) -> HandlerResult + Send + Sync>;

/// Node mode: every run is written to `runs` when it starts (so runs on a
/// node that is killed later are on record), then takes `work_ms`.
fn node(a: &Args) {
    let runs_sql = format!(
        "INSERT INTO {}.runs (id, attempt, node) VALUES ($1, $2, $3)",
        a.schema
    );
    let pool = std::sync::Mutex::new(Vec::<postgres::Client>::new());
    let id_cell = Arc::new(std::sync::OnceLock::<String>::new());
    let me = id_cell.clone();
    let record: RecordRun = Arc::new(move |job: &Job| {
        let popped = pool.lock().unwrap().pop();
        let mut c = match popped {
            Some(c) => c,
            None => config().connect(postgres::NoTls)?,
        };
        let node = me.get().map_or("", String::as_str);
        c.execute(&runs_sql, &[&job.id(), &(job.attempt() as i32), &node])?;
        pool.lock().unwrap().push(c);
        Ok(())
    });
    let work = Duration::from_millis(a.work_ms);
    let queue = Queue::new(&a.schema, &a.queue).expect("queue");
    let node = if a.async_node {
        if a.cron.is_some() {
            eprintln!("--cron runs on a blocking node: leave out --async");
            std::process::exit(2);
        }
        start_async(a, record, work)
    } else {
        let tick = record.clone();
        let lease = Duration::from_millis(a.lease_ms);
        // A calendar node tops its schedule up once per lease, so a lost
        // tick is replaced about as soon as a lost claim is taken over.
        let recheck = if a.cron.is_some() {
            lease
        } else {
            Duration::from_secs(30)
        };
        let n = Node::builder(config(), &a.queue)
            .schema(&a.schema)
            .workers(a.workers)
            .lease(lease)
            .safety_recheck(recheck)
            .handler("offer-timeout", move |job| {
                record(job)?;
                std::thread::sleep(work);
                Ok(())
            })
            .handler(
                "tick",
                tick_handler(config(), queue.clone(), move |job: &Job| {
                    tick(job)?;
                    std::thread::sleep(work);
                    Ok(())
                }),
            )
            .start()
            .expect("start node");
        Running::Blocking(n)
    };
    id_cell.set(node.id().to_string()).expect("set once");
    // Start-up registration; the node tops the schedule up at each safety
    // re-check beside the ticks' own top-up.
    if let Some(cron) = &a.cron {
        let mut c = config().connect(postgres::NoTls).expect("connect");
        let s = CalendarSchedule::new(&a.calendar, cron, "UTC", "tick")
            .backfill(Backfill::All(MAX_BACKFILL));
        queue.register_schedule(&mut c, &s).expect("register");
    }
    println!("ready {}", node.id());
    std::io::stdout().flush().expect("flush");
    let mut sink = Vec::new();
    // Run until the parent closes standard input.
    let _ = std::io::stdin().read_to_end(&mut sink);
    let s = node.stats();
    drop(node); // shuts down, waiting for handlers in flight
    println!(
        "stats claimed={} started={} reruns={} recorded={} fenced={} reconnects={}",
        s.claimed, s.started, s.reruns, s.recorded, s.fenced, s.reconnects
    );
}

/// An `AsyncNode` on a runtime of its own, with `--workers` handler slots:
/// the run's row is written on the runtime's blocking pool (the `postgres`
/// client is synchronous), then the handler awaits a timer.
#[cfg(feature = "tokio")]
fn start_async(a: &Args, record: RecordRun, work: Duration) -> Running {
    let n = timerpool_pg::AsyncNode::builder(config(), &a.queue)
        .schema(&a.schema)
        .slots(a.workers)
        .lease(Duration::from_millis(a.lease_ms))
        .handler("offer-timeout", move |job| {
            let record = record.clone();
            async move {
                tokio::task::spawn_blocking(move || record(&job)).await??;
                tokio::time::sleep(work).await;
                Ok(())
            }
        })
        .start()
        .expect("start async node");
    Running::Async(n)
}

#[cfg(not(feature = "tokio"))]
fn start_async(_: &Args, _: RecordRun, _: Duration) -> Running {
    eprintln!("--async needs the example built with --features tokio");
    std::process::exit(2);
}

/// Starts a node process and reads its id from its first line.
fn spawn_node(a: &Args) -> (Child, String) {
    let exe = std::env::current_exe().expect("own path");
    let mut child = Command::new(exe)
        .args(["node", "--schema", &a.schema, "--queue", &a.queue])
        .args(["--workers", &a.workers.to_string()])
        .args(["--lease-ms", &a.lease_ms.to_string()])
        .args(["--work-ms", &a.work_ms.to_string()])
        .args(a.async_node.then_some("--async"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn node");
    let mut line = String::new();
    let out = child.stdout.as_mut().expect("stdout");
    BufReader::new(out)
        .read_line(&mut line)
        .expect("ready line");
    let id = line.trim().strip_prefix("ready ").expect("ready <id>");
    (child, id.to_string())
}

/// Demo mode.
fn demo(a: &Args) {
    let mut c = config().connect(postgres::NoTls).expect("connect");
    c.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS {s} CASCADE; CREATE SCHEMA {s};
         CREATE TABLE {s}.runs (id bigint, attempt int, node text,
                                at timestamptz DEFAULT clock_timestamp());",
        s = a.schema
    ))
    .expect("reset schema");
    let q = Queue::new(&a.schema, &a.queue).expect("queue");
    q.install(&mut c).expect("install");
    let mut nodes: Vec<(Child, String)> = (0..3).map(|_| spawn_node(a)).collect();
    let span = Duration::from_secs(a.seconds);
    let t0 = Instant::now();
    let (mut replaced, mut cancelled, mut killed) = (0, 0, None);
    for i in 0..a.tasks {
        let at = span.mul_f64(i as f64 / a.tasks as f64);
        std::thread::sleep(at.saturating_sub(t0.elapsed()));
        let offer = |k: usize| NewTask::new(format!("trip-{k}"), "offer-timeout");
        q.schedule(&mut c, &offer(i).after(Duration::from_millis(300)))
            .expect("schedule");
        if i % 5 == 4 {
            // The trip moved to another driver: the same key, a new deadline.
            let s = q.schedule(&mut c, &offer(i - 1).after(Duration::from_millis(400)));
            replaced += usize::from(s.expect("replace").replaced);
        }
        if i % 7 == 6
            && q.cancel(&mut c, &format!("trip-{}", i - 2))
                .expect("cancel")
        {
            cancelled += 1; // the driver accepted
        }
        if killed.is_none() && t0.elapsed() >= span / 2 {
            nodes[0].0.kill().expect("SIGKILL"); // Child::kill sends SIGKILL
            let _ = nodes[0].0.wait();
            killed = Some(nodes[0].1.clone());
            println!("killed node {} at {:?}", nodes[0].1, t0.elapsed());
        }
    }
    let live = format!("SELECT count(*) FROM {}.tasks", a.schema);
    while c.query_one(&live, &[]).expect("count").get::<_, i64>(0) > 0 {
        std::thread::sleep(Duration::from_millis(50));
    }
    report(&mut c, a, replaced, cancelled, killed.as_deref());
    for (mut child, _) in nodes.drain(1..) {
        drop(child.stdin.take());
        let mut out = String::new();
        let _ = child
            .stdout
            .take()
            .expect("stdout")
            .read_to_string(&mut out);
        let _ = child.wait();
        print!("{out}");
    }
}

/// Prints the outcomes, runs per node, re-runs and lateness.
fn report(
    c: &mut postgres::Client,
    a: &Args,
    replaced: usize,
    cancelled: usize,
    killed: Option<&str>,
) {
    let s = &a.schema;
    let mut q = |sql: &str| -> BTreeMap<String, i64> {
        let rows = c.query(&sql.replace("{s}", s), &[]).expect("report query");
        rows.iter().map(|r| (r.get(0), r.get(1))).collect()
    };
    println!(
        "outcomes: {:?}",
        q("SELECT outcome, count(*) FROM {s}.outcomes GROUP BY 1")
    );
    println!("schedules that replaced: {replaced}, cancels that won: {cancelled}");
    println!(
        "runs per node: {:?}",
        q("SELECT node, count(*) FROM {s}.runs GROUP BY 1")
    );
    let reruns = q("SELECT node, count(*) FROM {s}.runs WHERE attempt > 1 GROUP BY 1");
    println!(
        "re-runs (attempt > 1) per node: {reruns:?}, all of tasks claimed by the killed node {}",
        killed.unwrap_or("none")
    );
    let late = q(
        "SELECT 'p' || p, (1000 * extract(epoch FROM percentile_cont(p / 100.0)
                  WITHIN GROUP (ORDER BY r.at - o.due)))::int8
                  FROM {s}.runs r JOIN {s}.outcomes o USING (id), (VALUES (50), (99)) v(p)
                  WHERE r.attempt = 1 GROUP BY p",
    );
    println!("lateness of first runs, ms (includes the run row's insert): {late:?}");
}

fn main() {
    let a = args();
    match a.mode.as_str() {
        "node" => node(&a),
        _ => demo(&a),
    }
}
