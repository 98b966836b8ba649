//! Tests for node processes of one queue (`examples/pg_nodes.rs` in `node`
//! mode): one is killed with SIGKILL and one is frozen with SIGSTOP past
//! its lease mid-run; every task still ends with exactly one outcome, none
//! early, none lost, and only the stricken nodes' tasks run again.

mod pg_common;

use pg_common::*;
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime};
use timerpool_pg::{NewTask, Queue};

const SCHEMA: &str = "t_procs";
const LONG: Duration = Duration::from_secs(60);

/// The example binary, built beside this test by `cargo test -p
/// timerpool-pg` (or `cargo build -p timerpool-pg --example pg_nodes`).
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let bin = dir.join("examples").join("pg_nodes");
    assert!(
        bin.exists(),
        "{} is missing: run cargo build -p timerpool-pg --example pg_nodes",
        bin.display()
    );
    bin
}

fn spawn_node() -> (Child, String) {
    let mut child = Command::new(example())
        .args(["node", "--schema", SCHEMA, "--queue", "q", "--workers", "2"])
        .args(["--lease-ms", "1000", "--work-ms", "40"])
        .env("TIMERPOOL_PG_URL", url())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let id = line.trim().strip_prefix("ready ").expect("ready <id>");
    (child, id.to_string())
}

/// Node processes, killed on drop if a test fails before it stops them, so
/// a frozen one never outlives the test.
struct Procs(Vec<(Child, String)>);

impl Drop for Procs {
    fn drop(&mut self) {
        for (child, _) in &mut self.0 {
            // SIGKILL ends a stopped process too; errors mean it is gone.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success(), "kill {sig}");
}

fn running_owned_by(c: &mut postgres::Client, node: &str) -> i64 {
    c.query_one(
        &format!("SELECT count(*) FROM {SCHEMA}.tasks WHERE owner = $1 AND state = 'running'"),
        &[&node],
    )
    .unwrap()
    .get(0)
}

#[test]
fn killed_and_frozen_nodes_lose_nothing_and_only_their_tasks_rerun() {
    let mut c = fresh_schema(SCHEMA);
    let q = Queue::new(SCHEMA, "q").unwrap();
    q.install(&mut c).unwrap();
    c.batch_execute(&format!(
        "CREATE TABLE {SCHEMA}.runs (id bigint, attempt int, node text,
                                     at timestamptz DEFAULT clock_timestamp())"
    ))
    .unwrap();
    let mut nodes = Procs((0..3).map(|_| spawn_node()).collect());
    // 400 tasks over 4 s, every fifth allowed one attempt only.
    let tasks: Vec<NewTask> = (0..400u64)
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
    let (victim, zombie) = (nodes.0[0].1.clone(), nodes.0[1].1.clone());
    // Kill the victim while it holds claimed tasks.
    assert!(wait_until(LONG, || running_owned_by(&mut c, &victim) > 0));
    nodes.0[0].0.kill().unwrap(); // SIGKILL
    nodes.0[0].0.wait().unwrap();
    // Freeze the zombie while it holds claimed tasks, until one is taken over.
    let mut frozen = false;
    for _ in 0..100 {
        signal(&nodes.0[1].0, "-STOP");
        if running_owned_by(&mut c, &zombie) > 0 {
            frozen = true;
            break;
        }
        signal(&nodes.0[1].0, "-CONT");
        std::thread::sleep(Duration::from_millis(3));
    }
    assert!(frozen, "the zombie never held a claimed task");
    // Frozen, the zombie neither finishes nor claims: its count drops only
    // as the live node takes its tasks over after the lease expires.
    assert!(wait_until(LONG, || running_owned_by(&mut c, &zombie) == 0));
    signal(&nodes.0[1].0, "-CONT");
    assert!(wait_until(LONG, || live(&mut c, SCHEMA, "q") == 0));
    let stats: Vec<String> = nodes
        .0
        .drain(1..)
        .map(|(mut child, _)| {
            drop(child.stdin.take());
            let mut out = String::new();
            child
                .stdout
                .take()
                .unwrap()
                .read_to_string(&mut out)
                .unwrap();
            assert!(child.wait().unwrap().success());
            out
        })
        .collect();
    check(&mut c, &ids, &victim, &zombie);
    let fenced: u64 = stats[0]
        .split_whitespace()
        .find_map(|f| f.strip_prefix("fenced="))
        .expect("zombie stats")
        .parse()
        .unwrap();
    assert!(
        fenced > 0,
        "the zombie's late results were fenced: {}",
        stats[0]
    );
}

/// Every task one outcome, none early, re-runs only of stricken nodes.
fn check(c: &mut postgres::Client, ids: &HashSet<i64>, victim: &str, zombie: &str) {
    let rows = c
        .query(
            &format!("SELECT id, outcome, due, claimed, owner FROM {SCHEMA}.outcomes"),
            &[],
        )
        .unwrap();
    let mut due = HashMap::new();
    let mut outcome = HashMap::new();
    for r in &rows {
        let id: i64 = r.get(0);
        let (d, claimed): (SystemTime, Option<SystemTime>) = (r.get(2), r.get(3));
        assert!(claimed.is_none_or(|t| t >= d), "task {id} claimed early");
        due.insert(id, d);
        outcome.insert(id, r.get::<_, String>(1));
    }
    assert_eq!(
        rows.len(),
        ids.len(),
        "one outcome row per task (primary key)"
    );
    assert_eq!(
        outcome.keys().copied().collect::<HashSet<_>>(),
        *ids,
        "none lost"
    );
    let mut runs: HashMap<i64, Vec<(i32, String, SystemTime)>> = HashMap::new();
    for r in c
        .query(
            &format!("SELECT id, attempt, node, at FROM {SCHEMA}.runs ORDER BY attempt"),
            &[],
        )
        .unwrap()
    {
        runs.entry(r.get(0))
            .or_default()
            .push((r.get(1), r.get(2), r.get(3)));
    }
    let stricken = |n: &str| n == victim || n == zombie;
    let mut reruns = 0;
    for (id, list) in &runs {
        for (_, _, at) in list {
            assert!(*at >= due[id], "task {id} ran before it was due");
        }
        // Every run but the last was on a stricken node.
        for (_, node, _) in &list[..list.len() - 1] {
            assert!(
                stricken(node),
                "task {id} re-run after a healthy node ran it: {list:?}"
            );
        }
        reruns += list.len() - 1;
        match outcome[id].as_str() {
            "completed" => {}
            "abandoned" => assert!(list.iter().all(|r| stricken(&r.1)), "{id}: {list:?}"),
            other => panic!("task {id} ended {other}"),
        }
    }
    let abandoned = outcome.values().filter(|o| *o == "abandoned").count();
    assert!(
        reruns + abandoned > 0,
        "the stricken nodes' tasks were taken over"
    );
}
