//! Tests for the async node (feature `tokio`) against a real PostgreSQL:
//! the contract scenarios of the blocking node's tests with `async fn`
//! handlers, on the node's own runtime, a runtime handed to it, and the
//! runtime it is started in; the execution timeout; lease loss and
//! fencing; an async and a blocking node on one queue; replace and cancel
//! racing claims; a restart of the database; shutdown with handlers in
//! flight.
#![cfg(feature = "tokio")]

mod pg_common;

use pg_common::*;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use timerpool_pg::{AsyncNode, Error, NewTask, Node, Queue, State};

const LONG: Duration = Duration::from_secs(30);

/// One handler run: task id, attempt, node tag, start, end.
type Run = (i64, u32, usize, SystemTime, SystemTime);
type Runs = Arc<Mutex<Vec<Run>>>;

fn states(c: &mut postgres::Client, q: &Queue, key: &str) -> Vec<State> {
    q.history(c, key).unwrap().iter().map(|r| r.state).collect()
}

/// An async handler that logs its run under `tag` after a short await.
fn logging(
    runs: &Runs,
    tag: usize,
) -> impl Fn(
    timerpool_pg::Job,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = timerpool_pg::HandlerResult> + Send>,
> + Send
       + Sync
       + 'static {
    let runs = runs.clone();
    move |job| {
        let runs = runs.clone();
        Box::pin(async move {
            let start = SystemTime::now();
            tokio::time::sleep(Duration::from_millis(1)).await;
            let end = SystemTime::now();
            let run = (job.id(), job.attempt(), tag, start, end);
            runs.lock().unwrap().push(run);
            Ok(())
        })
    }
}

/// Due times of the finished tasks, checking each was claimed no earlier.
fn due_times(c: &mut postgres::Client, schema: &str) -> HashMap<i64, SystemTime> {
    c.query(
        &format!("SELECT id, due, claimed FROM {schema}.outcomes"),
        &[],
    )
    .unwrap()
    .iter()
    .map(|r| {
        let (due, claimed): (SystemTime, SystemTime) = (r.get(1), r.get(2));
        assert!(claimed >= due, "claimed before due by the database's clock");
        (r.get(0), due)
    })
    .collect()
}

/// True once the node's leader session is idle in its wait.
fn waiting(c: &mut postgres::Client, id: &str) -> bool {
    let app = format!("timerpool node {id}");
    let n: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1
             AND state = 'idle' AND query LIKE '%min(run_at)%'",
            &[&app],
        )
        .unwrap()
        .get(0);
    n == 1
}

#[test]
fn every_task_runs_once_and_never_early_on_the_nodes_own_runtime() {
    let schema = "ta_once";
    let mut c = fresh_schema(schema);
    let runs = Runs::default();
    // Outside any runtime: the node starts its own.
    let node = AsyncNode::builder(config(), "q")
        .schema(schema)
        .slots(4)
        .handler("h", logging(&runs, 0))
        .start()
        .unwrap();
    let q = node.queue().clone();
    let tasks: Vec<NewTask> = (0..300)
        .map(|i| NewTask::new(format!("k{i}"), "h").after(Duration::from_millis(i * 5 % 1000)))
        .collect();
    q.schedule_batch(&mut c, &tasks).unwrap();
    assert!(wait_until(LONG, || outcome_counts(&mut c, schema, "q")
        .get("completed")
        == Some(&300)));
    assert_eq!(live(&mut c, schema, "q"), 0);
    let due = due_times(&mut c, schema);
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 300, "each task ran exactly once");
    let ids: HashSet<i64> = runs.iter().map(|r| r.0).collect();
    assert_eq!(ids.len(), 300);
    for (id, attempt, _, at, _) in &runs {
        assert_eq!(*attempt, 1);
        assert!(*at >= due[id], "task {id} started before its due time");
    }
    let s = node.stats();
    assert_eq!((s.started, s.reruns, s.fenced), (300, 0, 0));
    drop(node); // a synchronous program shuts down by dropping
}

#[test]
fn errors_panics_and_unknown_handlers_are_retried_then_recorded() {
    let schema = "ta_retry";
    let mut c = fresh_schema(schema);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let node = AsyncNode::builder(config(), "q")
        .schema(schema)
        .runtime(rt.handle().clone())
        .slots(2)
        .retry_backoff(Duration::from_millis(10))
        .handler("fails", |job| async move {
            tokio::task::yield_now().await;
            Err(format!("attempt {} broke", job.attempt()).into())
        })
        .handler("panics", |_| async {
            tokio::task::yield_now().await;
            panic!("deliberate panic");
        })
        .handler("h", |_| async { Ok(()) })
        .start()
        .unwrap();
    let q = node.queue().clone();
    q.schedule(&mut c, &NewTask::new("e", "fails").max_attempts(3))
        .unwrap();
    q.schedule(&mut c, &NewTask::new("p", "panics").max_attempts(1))
        .unwrap();
    q.schedule(&mut c, &NewTask::new("u", "nobody").max_attempts(1))
        .unwrap();
    for key in ["e", "p", "u"] {
        assert!(wait_until(LONG, || states(&mut c, &q, key) == [State::Failed]));
    }
    let e = &q.history(&mut c, "e").unwrap()[0];
    assert_eq!(e.attempts, 3);
    assert_eq!(e.error.as_deref(), Some("attempt 3 broke"));
    let p = &q.history(&mut c, "p").unwrap()[0];
    assert_eq!(p.error.as_deref(), Some("panicked: deliberate panic"));
    let u = &q.history(&mut c, "u").unwrap()[0];
    let msg = u.error.as_deref().unwrap();
    assert!(msg.contains("no handler named \"nobody\""), "{msg}");
    assert!(msg.contains(node.id()), "{msg}");
    let counted = |s: timerpool_pg::NodeStats| (s.retried, s.reruns, s.recorded);
    assert!(
        wait_until(LONG, || counted(node.stats()) == (2, 2, 3)),
        "{:?}",
        node.stats()
    );
    // The panic was caught: the runtime still runs handlers.
    q.schedule(&mut c, &NewTask::new("after", "h")).unwrap();
    assert!(wait_until(LONG, || states(&mut c, &q, "after") == [State::Completed]));
    rt.block_on(node.shutdown());
}

/// Counts drops of the future that owns it.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_handler_past_the_execution_timeout_is_dropped_and_its_attempt_fails_once() {
    let schema = "ta_timeout";
    let mut c = fresh_schema(schema);
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = dropped.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    // Started inside a runtime: the node takes that one.
    let node = rt
        .block_on(async {
            AsyncNode::builder(config(), "q")
                .schema(schema)
                .slots(1)
                .execution_timeout(Duration::from_millis(200))
                .retry_backoff(Duration::from_millis(10))
                .handler("hangs", move |job| {
                    let guard = DropCount(d.clone());
                    async move {
                        let _guard = guard;
                        if job.key() == "forever" || job.attempt() == 1 {
                            std::future::pending::<()>().await;
                        }
                        Ok(())
                    }
                })
                .handler("h", |_| async { Ok(()) })
                .start()
        })
        .unwrap();
    let q = node.queue().clone();
    // "once" hangs on its first attempt only; "forever" on both.
    q.schedule(&mut c, &NewTask::new("once", "hangs").max_attempts(2))
        .unwrap();
    assert!(wait_until(LONG, || states(&mut c, &q, "once") == [State::Completed]));
    q.schedule(&mut c, &NewTask::new("forever", "hangs").max_attempts(2))
        .unwrap();
    assert!(wait_until(LONG, || states(&mut c, &q, "forever") == [State::Failed]));
    let once = &q.history(&mut c, "once").unwrap()[0];
    assert_eq!(once.attempts, 2);
    let forever = &q.history(&mut c, "forever").unwrap()[0];
    assert_eq!(forever.attempts, 2);
    let msg = forever.error.as_deref().unwrap();
    assert!(msg.starts_with("timed out"), "{msg}");
    // Every future ended: three cut by the timeout, one finished.
    assert_eq!(dropped.load(Ordering::SeqCst), 4);
    // The one slot is free again.
    q.schedule(&mut c, &NewTask::new("next", "h")).unwrap();
    assert!(wait_until(LONG, || states(&mut c, &q, "next") == [State::Completed]));
    let s = node.stats();
    assert_eq!((s.retried, s.fenced), (2, 0), "{s:?}");
    rt.block_on(node.shutdown());
}

#[test]
fn a_late_result_after_lease_loss_is_fenced_and_a_blocking_node_takes_over() {
    let schema = "ta_fence";
    let mut c = fresh_schema(schema);
    let runs = Runs::default();
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let (r, gate) = (runs.clone(), release.clone());
    let zombie = AsyncNode::builder(config(), "q")
        .schema(schema)
        .slots(1)
        .lease(Duration::from_secs(3))
        .handler("h", move |job| {
            let (runs, gate) = (r.clone(), gate.clone());
            async move {
                let start = SystemTime::now();
                runs.lock()
                    .unwrap()
                    .push((job.id(), job.attempt(), 0, start, start));
                let _held = gate.acquire().await?;
                Ok(())
            }
        })
        .start()
        .unwrap();
    let q = zombie.queue().clone();
    let s = q.schedule(&mut c, &NewTask::new("k", "h")).unwrap();
    assert!(wait_until(LONG, || !runs.lock().unwrap().is_empty()));
    // A blocking node joins, with a short re-check so it sees the expiry.
    let r = runs.clone();
    let taker = Node::builder(config(), "q")
        .schema(schema)
        .workers(1)
        .safety_recheck(Duration::from_millis(20))
        .handler("h", move |job| {
            let at = SystemTime::now();
            r.lock().unwrap().push((job.id(), job.attempt(), 1, at, at));
            Ok(())
        })
        .start()
        .unwrap();
    // The zombie's lease ends now (as if it had stopped renewing); its
    // heartbeat may renew it first, so end it until the taker has it.
    let owner = |c: &mut postgres::Client| -> Option<String> {
        let sql = format!(
            "UPDATE {schema}.tasks SET run_at = clock_timestamp()
             WHERE id = $1 AND owner = $2;
             SELECT owner FROM {schema}.tasks WHERE id = $1"
        );
        let sql = sql.replace("$1", &s.id.to_string());
        let sql = sql.replace("$2", &format!("'{}'", zombie.id()));
        let out = c.simple_query(&sql).unwrap();
        out.iter().find_map(|m| match m {
            postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
            _ => None,
        })
    };
    assert!(wait_until(LONG, || {
        let o = owner(&mut c);
        o.is_none() || o.as_deref() == Some(taker.id())
    }));
    assert!(wait_until(LONG, || states(&mut c, &q, "k") == [State::Completed]));
    // The zombie's handler ends now: its result is refused.
    release.add_permits(1);
    assert!(wait_until(LONG, || zombie.stats().fenced == 1));
    let h = q.history(&mut c, "k").unwrap();
    assert_eq!(h.len(), 1, "one outcome");
    assert_eq!((h[0].state, h[0].attempts), (State::Completed, 2));
    assert_eq!(h[0].owner.as_deref(), Some(taker.id()));
    let mut seen: Vec<(u32, usize)> = runs.lock().unwrap().iter().map(|r| (r.1, r.2)).collect();
    seen.sort_unstable();
    assert_eq!(
        seen,
        [(1, 0), (2, 1)],
        "attempt 1 on the zombie, 2 on the taker"
    );
    assert_eq!(zombie.stats().recorded, 0);
    taker.shutdown();
    drop(zombie);
}

#[test]
fn an_async_and_a_blocking_node_share_a_queue_and_run_each_task_once() {
    let schema = "ta_mixed";
    let mut c = fresh_schema(schema);
    let runs = Runs::default();
    let a = AsyncNode::builder(config(), "q")
        .schema(schema)
        .slots(4)
        .handler("h", logging(&runs, 0))
        .start()
        .unwrap();
    let r = runs.clone();
    let b = Node::builder(config(), "q")
        .schema(schema)
        .workers(2)
        .handler("h", move |job| {
            let start = SystemTime::now();
            std::thread::sleep(Duration::from_millis(1));
            let run = (job.id(), job.attempt(), 1, start, SystemTime::now());
            r.lock().unwrap().push(run);
            Ok(())
        })
        .start()
        .unwrap();
    let q = a.queue().clone();
    let tasks: Vec<NewTask> = (0..400)
        .map(|i| NewTask::new(format!("k{i}"), "h").after(Duration::from_millis(i * 7 % 1500)))
        .collect();
    for chunk in tasks.chunks(50) {
        q.schedule_batch(&mut c, chunk).unwrap();
    }
    assert!(wait_until(LONG, || outcome_counts(&mut c, schema, "q")
        .get("completed")
        == Some(&400)));
    let due = due_times(&mut c, schema);
    let runs = runs.lock().unwrap().clone();
    let ids: HashSet<i64> = runs.iter().map(|r| r.0).collect();
    assert_eq!((runs.len(), ids.len()), (400, 400), "each task ran once");
    for (id, _, _, at, _) in &runs {
        assert!(*at >= due[id], "task {id} started before its due time");
    }
    let busy: HashSet<usize> = runs.iter().map(|r| r.2).collect();
    assert_eq!(busy.len(), 2, "both nodes ran tasks");
    assert_eq!(a.stats().reruns + b.stats().reruns, 0);
    b.shutdown();
    drop(a);
}

#[test]
fn replace_and_cancel_race_claims_across_async_nodes() {
    let schema = "ta_race";
    drop(fresh_schema(schema));
    let runs = Runs::default();
    let nodes: Vec<AsyncNode> = (0..3)
        .map(|tag| {
            AsyncNode::builder(config(), "q")
                .schema(schema)
                .slots(2)
                .handler("h", logging(&runs, tag))
                .start()
                .unwrap()
        })
        .collect();
    let ran = || runs.lock().unwrap().iter().map(|r| r.0).collect();
    race::replace_and_cancel_race(nodes[0].queue(), schema, ran);
    let s: Vec<_> = nodes.iter().map(|n| n.stats()).collect();
    assert!(s.iter().all(|s| s.reruns + s.fenced == 0), "{s:?}");
}

#[test]
fn async_nodes_survive_a_database_restart_under_load() {
    let start = |config, runs: server::Runs| {
        AsyncNode::builder(config, "q")
            .slots(2)
            .lease(Duration::from_secs(2))
            .statement_timeout(Duration::from_secs(2))
            .handler("h", move |job| {
                let runs = runs.clone();
                async move {
                    let run = (job.id(), job.attempt(), SystemTime::now());
                    runs.lock().unwrap().push(run);
                    tokio::task::yield_now().await;
                    Ok(())
                }
            })
            .start()
            .unwrap()
    };
    // Dropping an async node outside a runtime shuts it down in place.
    server::restart_under_load(start, AsyncNode::stats, drop);
}

#[test]
fn an_earlier_task_preempts_a_sleeping_async_node() {
    let schema = "ta_preempt";
    let mut c = fresh_schema(schema);
    let runs = Runs::default();
    let node = AsyncNode::builder(config(), "q")
        .schema(schema)
        .slots(1)
        .safety_recheck(Duration::from_secs(600))
        .handler("h", logging(&runs, 0))
        .start()
        .unwrap();
    let q = node.queue().clone();
    q.schedule(
        &mut c,
        &NewTask::new("far", "h").after(Duration::from_secs(3600)),
    )
    .unwrap();
    for round in 0..3 {
        // The leader sleeps toward the hour-away task before each round.
        assert!(wait_until(LONG, || waiting(&mut c, node.id())));
        let s = q
            .schedule(
                &mut c,
                &NewTask::new(format!("near{round}"), "h").after(Duration::from_millis(50)),
            )
            .unwrap();
        let t0 = Instant::now();
        let started = || {
            runs.lock()
                .unwrap()
                .iter()
                .find(|r| r.0 == s.id)
                .map(|r| r.3)
        };
        assert!(wait_until(LONG, || started().is_some()));
        let late = started()
            .unwrap()
            .duration_since(s.due)
            .expect("never early");
        assert!(late < Duration::from_millis(500), "ran {late:?} late");
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
    assert_eq!(node.stats().safety_wakes, 0, "woken by notifications only");
    drop(node);
}

#[test]
fn shutdown_lets_handlers_in_flight_finish_and_records_them() {
    let schema = "ta_shutdown";
    let mut c = fresh_schema(schema);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let started = Arc::new(AtomicUsize::new(0));
    let s = started.clone();
    let node = AsyncNode::builder(config(), "q")
        .schema(schema)
        .runtime(rt.handle().clone())
        .slots(2)
        .handler("h", move |_| {
            let s = s.clone();
            async move {
                s.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok(())
            }
        })
        .start()
        .unwrap();
    let q = node.queue().clone();
    q.schedule(&mut c, &NewTask::new("a", "h")).unwrap();
    q.schedule(&mut c, &NewTask::new("b", "h")).unwrap();
    assert!(wait_until(LONG, || started.load(Ordering::SeqCst) == 2));
    assert_eq!(states(&mut c, &q, "a"), [State::Running]);
    rt.block_on(node.shutdown());
    // Recorded before shutdown returned.
    assert_eq!(states(&mut c, &q, "a"), [State::Completed]);
    assert_eq!(states(&mut c, &q, "b"), [State::Completed]);
    // A task scheduled now stays pending for other nodes.
    q.schedule(&mut c, &NewTask::new("later", "h")).unwrap();
    assert_eq!(states(&mut c, &q, "later"), [State::Pending]);
}

#[test]
fn bad_settings_are_refused() {
    let b = || AsyncNode::builder(config(), "q").schema("ta_settings");
    let no_timers = tokio::runtime::Builder::new_multi_thread().build().unwrap();
    for builder in [
        b().slots(0),
        b().execution_timeout(Duration::ZERO),
        b().lease(Duration::from_secs(1))
            .heartbeat(Duration::from_secs(1)),
        b().runtime(no_timers.handle().clone()),
    ] {
        let err = builder.start().unwrap_err();
        assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
    }
}

/// The `pg_nodes` example, built beside this test (`cargo build -p
/// timerpool-pg --features tokio --example pg_nodes`).
fn example() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let bin = dir.join("examples").join("pg_nodes");
    assert!(
        bin.exists(),
        "{} is missing: run cargo build -p timerpool-pg --features tokio --example pg_nodes",
        bin.display()
    );
    bin
}

/// Node processes, killed on drop if a test fails before it stops them.
struct Procs(Vec<(std::process::Child, String)>);

impl Drop for Procs {
    fn drop(&mut self) {
        for (child, _) in &mut self.0 {
            // Errors mean it is gone already.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn spawn_node(schema: &str, async_node: bool) -> (std::process::Child, String) {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let mut child = Command::new(example())
        .args(["node", "--schema", schema, "--queue", "q", "--workers", "2"])
        .args(["--lease-ms", "1000", "--work-ms", "40"])
        .args(async_node.then_some("--async"))
        .env("TIMERPOOL_PG_URL", url())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let id = line.trim().strip_prefix("ready ");
    let id =
        id.unwrap_or_else(|| panic!("ready <id>, got {line:?} (built with --features tokio?)"));
    (child, id.to_string())
}

#[test]
fn a_killed_async_node_process_loses_nothing_and_only_its_tasks_rerun() {
    let schema = "ta_procs";
    let mut c = fresh_schema(schema);
    let q = Queue::new(schema, "q").unwrap();
    q.install(&mut c).unwrap();
    c.batch_execute(&format!(
        "CREATE TABLE {schema}.runs (id bigint, attempt int, node text,
                                     at timestamptz DEFAULT clock_timestamp())"
    ))
    .unwrap();
    // The victim and a survivor are async nodes, the other survivor blocking.
    let mut nodes = Procs(vec![
        spawn_node(schema, true),
        spawn_node(schema, true),
        spawn_node(schema, false),
    ]);
    let tasks: Vec<NewTask> = (0..300u64)
        .map(|i| {
            let t = NewTask::new(format!("k{i}"), "offer-timeout")
                .after(Duration::from_millis(200 + i * 10));
            if i % 5 == 0 {
                t.max_attempts(1)
            } else {
                t
            }
        })
        .collect();
    let ids: HashSet<i64> = q
        .schedule_batch(&mut c, &tasks)
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    let victim = nodes.0[0].1.clone();
    // Killed while a handler of a task it holds has started (its run row
    // is written), so that task must run again elsewhere or be abandoned.
    let held = |c: &mut postgres::Client| -> i64 {
        let sql = format!(
            "SELECT count(*) FROM {schema}.tasks t JOIN {schema}.runs r
             ON r.id = t.id AND r.node = $1 WHERE t.owner = $1 AND t.state = 'running'"
        );
        c.query_one(&sql, &[&victim]).unwrap().get(0)
    };
    assert!(wait_until(LONG, || held(&mut c) > 0));
    nodes.0[0].0.kill().unwrap(); // SIGKILL
    nodes.0[0].0.wait().unwrap();
    assert!(wait_until(LONG, || live(&mut c, schema, "q") == 0));
    for (mut child, _) in nodes.0.drain(1..) {
        drop(child.stdin.take());
        assert!(child.wait().unwrap().success());
    }
    let rows = c
        .query(
            &format!("SELECT id, outcome, due, claimed FROM {schema}.outcomes"),
            &[],
        )
        .unwrap();
    assert_eq!(rows.len(), ids.len(), "one outcome row per task");
    let mut outcome = HashMap::new();
    let mut due = HashMap::new();
    for r in &rows {
        let (d, claimed): (SystemTime, Option<SystemTime>) = (r.get(2), r.get(3));
        assert!(claimed.is_none_or(|t| t >= d), "claimed early");
        outcome.insert(r.get::<_, i64>(0), r.get::<_, String>(1));
        due.insert(r.get::<_, i64>(0), d);
    }
    assert_eq!(
        outcome.keys().copied().collect::<HashSet<_>>(),
        ids,
        "none lost"
    );
    let mut runs: HashMap<i64, Vec<(i32, String, SystemTime)>> = HashMap::new();
    let sql = format!("SELECT id, attempt, node, at FROM {schema}.runs ORDER BY attempt");
    for r in c.query(&sql, &[]).unwrap() {
        runs.entry(r.get(0))
            .or_default()
            .push((r.get(1), r.get(2), r.get(3)));
    }
    let mut taken_over = 0;
    for (id, list) in &runs {
        assert!(list.iter().all(|r| r.2 >= due[id]), "task {id} ran early");
        // Every run but the last was on the killed node.
        for (_, node, _) in &list[..list.len() - 1] {
            assert_eq!(*node, victim, "task {id} re-run after a live node ran it");
        }
        taken_over += list.len() - 1;
        match outcome[id].as_str() {
            "completed" => {}
            "abandoned" => assert!(list.iter().all(|r| r.1 == victim), "{id}: {list:?}"),
            other => panic!("task {id} ended {other}"),
        }
    }
    let abandoned = outcome.values().filter(|o| *o == "abandoned").count();
    assert!(
        taken_over + abandoned > 0,
        "the killed node's tasks were taken over"
    );
}
