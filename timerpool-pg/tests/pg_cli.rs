//! The `timerpool-pg` command line, each command run as a process against
//! the real server in a schema of its own: migrate and status, the printed
//! migration SQL, queue counts, a key's history, cancel, retry through the
//! schedule upsert (with the failed task's payload and attempt bound, or
//! the defaults for an outcome recorded before migration 4), purge,
//! `--json`, and bad arguments.

mod pg_common;

use pg_common::*;
use serde_json::Value;
use std::process::Command;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use timerpool_pg::{NewTask, Node, Queue, State, DEFAULT_MAX_ATTEMPTS};

const LONG: Duration = Duration::from_secs(20);
const HOUR: Duration = Duration::from_secs(3600);

/// What one run of the binary did.
#[derive(Debug)]
struct Run {
    code: i32,
    out: String,
    err: String,
}

impl Run {
    /// Standard output as JSON.
    fn json(&self) -> Value {
        serde_json::from_str(&self.out)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?} / {:?}", self.out, self.err))
    }
}

/// Runs the binary with `--schema schema` and `args`, against the test
/// server (`TIMERPOOL_PG_URL`).
fn cli(schema: &str, args: &[&str]) -> Run {
    let mut all = vec!["--schema", schema];
    all.extend_from_slice(args);
    cli_raw(&all)
}

/// Runs the binary with exactly `args`.
fn cli_raw(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_timerpool-pg"))
        .args(args)
        .env("TIMERPOOL_PG_URL", url())
        .output()
        .expect("the binary runs");
    let run = Run {
        code: out.status.code().expect("exited, not killed by a signal"),
        out: String::from_utf8_lossy(&out.stdout).into_owned(),
        err: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(!run.err.contains("panicked"), "{run:?}");
    run
}

/// A fresh, installed schema and its queue `name`.
fn installed(schema: &str, name: &str) -> (postgres::Client, Queue) {
    let mut c = fresh_schema(schema);
    let q = Queue::new(schema, name).unwrap();
    q.install(&mut c).unwrap();
    (c, q)
}

fn states(c: &mut postgres::Client, q: &Queue, key: &str) -> Vec<State> {
    q.history(c, key).unwrap().iter().map(|r| r.state).collect()
}

/// A node of `q` whose handler "h" succeeds only for the payload "good"
/// (else it returns an error), and whose handler "blocks" waits until its
/// sender is dropped.
fn node(q: &Queue) -> (Node, mpsc::Sender<()>) {
    let (tx, rx) = mpsc::channel::<()>();
    let rx = Arc::new(Mutex::new(rx));
    let node = Node::builder(config(), q.name())
        .schema(q.schema())
        .workers(2)
        .handler("h", |job| {
            if job.payload() == b"good" {
                Ok(())
            } else {
                Err(format!("bad payload {:?}", job.payload()).into())
            }
        })
        .handler("blocks", move |_| {
            let _ = rx.lock().unwrap().recv();
            Ok(())
        })
        .start()
        .unwrap();
    (node, tx)
}

/// Makes `key` of `q` end `failed`: a node's handler returns an error on
/// the only attempt.
fn failed_task(c: &mut postgres::Client, q: &Queue, key: &str) {
    let (node, _release) = node(q);
    q.schedule(c, &NewTask::new(key, "h").max_attempts(1))
        .unwrap();
    assert!(wait_until(LONG, || states(c, q, key).last() == Some(&State::Failed)));
    node.shutdown();
}

/// (task id, payload, attempt) of every run of a recording node's handler.
type Runs = Arc<Mutex<Vec<(i64, Vec<u8>, u32)>>>;

/// A node of `q` whose handler "h" records every run and succeeds only
/// for the payload "good", retrying a failed attempt after 10 ms.
fn recording_node(q: &Queue) -> (Node, Runs) {
    let runs: Runs = Arc::default();
    let r = runs.clone();
    let node = Node::builder(config(), q.name())
        .schema(q.schema())
        .workers(1)
        .retry_backoff(Duration::from_millis(10))
        .handler("h", move |job| {
            r.lock()
                .unwrap()
                .push((job.id(), job.payload().to_vec(), job.attempt()));
            if job.payload() == b"good" {
                Ok(())
            } else {
                Err("not good".into())
            }
        })
        .start()
        .unwrap();
    (node, runs)
}

/// The (payload, attempt) of every run of task `id`, in order.
fn runs_of(runs: &Runs, id: i64) -> Vec<(Vec<u8>, u32)> {
    let runs = runs.lock().unwrap();
    runs.iter()
        .filter(|r| r.0 == id)
        .map(|r| (r.1.clone(), r.2))
        .collect()
}

/// The payload and attempt bound that task `id`'s outcome row keeps.
fn kept(c: &mut postgres::Client, schema: &str, id: i64) -> (Option<Vec<u8>>, Option<i32>) {
    let r = c
        .query_one(
            &format!("SELECT payload, max_attempts FROM {schema}.outcomes WHERE id = $1"),
            &[&id],
        )
        .unwrap();
    (r.get(0), r.get(1))
}

/// The payload and attempt bound of the pending task of `key`.
fn pending_body(c: &mut postgres::Client, schema: &str, key: &str) -> (Vec<u8>, i32) {
    let r = c
        .query_one(
            &format!(
                "SELECT payload, max_attempts FROM {schema}.tasks
                 WHERE key = $1 AND state = 'pending'"
            ),
            &[&key],
        )
        .unwrap();
    (r.get(0), r.get(1))
}

fn schema_exists(c: &mut postgres::Client, schema: &str) -> bool {
    c.query_one("SELECT to_regnamespace($1::text) IS NOT NULL", &[&schema])
        .unwrap()
        .get(0)
}

/// Runs `sql` through psql, stopping at the first error.
fn psql(sql: &str) -> (bool, String) {
    let out = Command::new("psql")
        .args([&url(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .expect("psql, PostgreSQL's client, is on the PATH");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn time(v: &Value) -> SystemTime {
    humantime::parse_rfc3339(v.as_str().expect("a time string")).expect("RFC 3339")
}

#[test]
fn migrate_installs_an_empty_schema_then_status_says_up_to_date() {
    let schema = "t_cli_migrate";
    let mut c = fresh_schema(schema);
    let before = cli(schema, &["status"]);
    assert_eq!(before.code, 3, "{before:?}");
    assert!(before.out.contains("not installed"), "{before:?}");
    let j = cli(schema, &["--json", "validate"]);
    assert_eq!(j.code, 3);
    let j = j.json();
    assert_eq!(j["installed"], false);
    assert_eq!(j["up_to_date"], false);
    // Every migration this crate knows, oldest first.
    let all: Vec<i32> = (1..=timerpool_pg::SCHEMA_VERSION).collect();
    assert_eq!(j["outstanding"], serde_json::json!(all));

    let m = cli(schema, &["--json", "migrate"]);
    assert_eq!(m.code, 0, "{m:?}");
    assert_eq!(m.json()["applied"], serde_json::json!(all));
    assert!(schema_exists(&mut c, schema));

    let after = cli(schema, &["status"]);
    assert_eq!(after.code, 0, "{after:?}");
    assert!(after.out.contains("up to date"), "{after:?}");
    let j = cli(schema, &["status", "--json"]).json();
    assert_eq!(j["up_to_date"], true);
    assert_eq!(j["version"], timerpool_pg::SCHEMA_VERSION);
    assert_eq!(j["applied"].as_array().unwrap().len(), all.len());
    assert!(j["applied"][0]["applied"].is_string());

    let again = cli(schema, &["migrate"]);
    assert_eq!(again.code, 0);
    assert!(again.out.contains("up to date"), "{again:?}");
}

#[test]
fn print_shows_the_sql_and_changes_nothing_and_psql_can_run_it() {
    let schema = "t_cli_print";
    let mut c = fresh_schema(schema);
    let p = cli(schema, &["migrate", "--print"]);
    assert_eq!(p.code, 0, "{p:?}");
    assert!(p
        .out
        .contains(&format!("CREATE TABLE IF NOT EXISTS {schema}.tasks")));
    assert!(p
        .out
        .contains(&format!("CREATE OR REPLACE FUNCTION {schema}.schedule(")));
    assert!(p.out.contains("-- migration 1") && p.out.contains("-- migration 2"));
    assert!(!schema_exists(&mut c, schema), "--print changed nothing");
    assert_eq!(cli(schema, &["status"]).code, 3);

    // The printed script is what migrate runs: psql applies it and the
    // schema is then current and usable.
    let (ok, err) = psql(&p.out);
    assert!(ok, "{err}");
    assert_eq!(cli(schema, &["status"]).code, 0);
    let q = Queue::new(schema, "q").unwrap();
    assert!(
        !q.schedule(&mut c, &NewTask::new("k", "h").after(HOUR))
            .unwrap()
            .replaced
    );
    let none = cli(schema, &["migrate", "--print", "--json"]).json();
    assert_eq!(none["sql"], "");
    assert_eq!(none["outstanding"], serde_json::json!([]));

    // The newest migration outstanding: only it is printed.
    let newest = timerpool_pg::SCHEMA_VERSION;
    c.batch_execute(&format!(
        "DELETE FROM {schema}.migrations WHERE version = {newest}"
    ))
    .unwrap();
    let st = cli(schema, &["status", "--json"]);
    assert_eq!(st.code, 3);
    assert_eq!(st.json()["outstanding"], serde_json::json!([newest]));
    let p = cli(schema, &["migrate", "--print"]);
    assert!(
        p.out.contains(&format!("-- migration {newest}"))
            && !p.out.contains(&format!("-- migration {}", newest - 1))
    );
    assert_eq!(cli(schema, &["status"]).code, 3, "--print changed nothing");
    let (ok, err) = psql(&p.out);
    assert!(ok, "{err}");
    assert_eq!(cli(schema, &["status"]).code, 0);
    assert!(q.due_of(&mut c, "k").unwrap().is_some(), "the task stayed");
}

#[test]
fn queues_lists_the_counts_and_next_due_time() {
    let schema = "t_cli_queues";
    let (mut c, alpha) = installed(schema, "alpha");
    let beta = Queue::new(schema, "beta").unwrap();
    let mut dues = Vec::new();
    for (i, key) in ["a1", "a2", "a3"].into_iter().enumerate() {
        let s = alpha
            .schedule(&mut c, &NewTask::new(key, "h").after(HOUR * (3 - i as u32)))
            .unwrap();
        dues.push(s.due);
    }
    let (node, release) = node(&beta);
    beta.schedule(&mut c, &NewTask::new("f", "h").max_attempts(1))
        .unwrap();
    beta.schedule(&mut c, &NewTask::new("ok", "h").payload(b"good".to_vec()))
        .unwrap();
    beta.schedule(&mut c, &NewTask::new("b", "blocks")).unwrap();
    assert!(wait_until(LONG, || {
        states(&mut c, &beta, "f") == [State::Failed]
            && states(&mut c, &beta, "ok") == [State::Completed]
            && states(&mut c, &beta, "b") == [State::Running]
    }));

    let j = cli(schema, &["queues", "--json"]);
    assert_eq!(j.code, 0, "{j:?}");
    let j = j.json();
    let list = j.as_array().unwrap();
    assert_eq!(list.len(), 2);
    let a = &list[0];
    assert_eq!(a["queue"], "alpha");
    assert_eq!(
        (&a["pending"], &a["running"], &a["failed"]),
        (&3.into(), &0.into(), &0.into())
    );
    assert_eq!(time(&a["next_due"]), *dues.iter().min().unwrap());
    let b = &list[1];
    assert_eq!(b["queue"], "beta");
    assert_eq!(b["pending"], 0);
    assert_eq!(b["running"], 1);
    assert_eq!(b["failed"], 1);
    assert_eq!(b["completed"], 1);
    assert!(b["next_due"].is_null());
    for field in ["retrying", "abandoned", "expired", "cancelled", "replaced"] {
        assert_eq!(b[field], 0, "{field}");
    }

    let t = cli(schema, &["queues"]);
    assert_eq!(t.code, 0);
    let lines: Vec<Vec<&str>> = t
        .out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0][..4], ["QUEUE", "PENDING", "RUNNING", "RETRYING"]);
    assert_eq!(lines[1][..8], ["alpha", "3", "0", "0", "0", "0", "0", "0"]);
    assert_eq!(lines[2][..8], ["beta", "0", "1", "0", "1", "0", "0", "1"]);
    assert!(lines[1][9] == "(in", "a relative time: {:?}", lines[1]);
    // The columns line up: every row's PENDING ends where its title does.
    let end = t.out.lines().next().unwrap().find("PENDING").unwrap() + "PENDING".len();
    for line in t.out.lines().skip(1) {
        assert_ne!(line.as_bytes()[end - 1], b' ', "{line:?}");
        assert_eq!(line.as_bytes()[end], b' ', "{line:?}");
    }

    let only = cli(schema, &["--json", "queues", "beta"]).json();
    assert_eq!(only.as_array().unwrap().len(), 1);
    let nope = cli(schema, &["queues", "nope"]);
    assert_eq!(nope.code, 1);
    assert!(nope.err.contains("no queue \"nope\""), "{nope:?}");
    drop(release);
    node.shutdown();
}

#[test]
fn history_shows_the_records_of_a_key() {
    let schema = "t_cli_history";
    let (mut c, q) = installed(schema, "q");
    q.schedule(&mut c, &NewTask::new("k", "h").after(HOUR))
        .unwrap();
    assert!(
        q.schedule(&mut c, &NewTask::new("k", "h2").after(HOUR))
            .unwrap()
            .replaced
    );
    assert!(q.cancel(&mut c, "k").unwrap());
    q.schedule(&mut c, &NewTask::new("k", "h3").after(HOUR))
        .unwrap();
    let want = q.history(&mut c, "k").unwrap();

    let j = cli(schema, &["history", "q", "k", "--json"]);
    assert_eq!(j.code, 0, "{j:?}");
    let j = j.json();
    let got = j.as_array().unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g["id"], w.id);
        assert_eq!(g["key"], "k");
        assert_eq!(g["handler"], w.handler.as_str());
        assert_eq!(g["state"], w.state.as_str());
        assert_eq!(time(&g["due"]), w.due);
        assert_eq!(g["attempts"], w.attempts);
        for field in [
            "created", "claimed", "started", "finished", "owner", "error",
        ] {
            assert!(g.get(field).is_some(), "{field}");
        }
    }

    let t = cli(schema, &["history", "q", "k"]);
    assert_eq!(t.code, 0);
    let states: Vec<&str> = t
        .out
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    assert_eq!(states, ["replaced", "cancelled", "pending"]);

    let unknown = cli(schema, &["history", "q", "nobody"]);
    assert_eq!(unknown.code, 1);
    assert!(
        unknown.err.contains("no record of key \"nobody\""),
        "{unknown:?}"
    );
    let unknown = cli(schema, &["history", "nope", "k"]);
    assert_eq!(unknown.code, 1);
    assert!(unknown.err.contains("no queue \"nope\""), "{unknown:?}");
}

#[test]
fn cancel_removes_a_pending_task_and_says_when_there_was_none() {
    let schema = "t_cli_cancel";
    let (mut c, q) = installed(schema, "q");
    q.schedule(&mut c, &NewTask::new("k", "h").after(HOUR))
        .unwrap();
    q.schedule(&mut c, &NewTask::new("j", "h").after(HOUR))
        .unwrap();

    let done = cli(schema, &["cancel", "q", "k"]);
    assert_eq!(done.code, 0, "{done:?}");
    assert!(done.out.contains("cancelled"), "{done:?}");
    assert_eq!(q.due_of(&mut c, "k").unwrap(), None);
    assert_eq!(states(&mut c, &q, "k"), [State::Cancelled]);
    assert!(q.due_of(&mut c, "j").unwrap().is_some(), "other keys stay");

    let again = cli(schema, &["cancel", "q", "k"]);
    assert_eq!(again.code, 4, "{again:?}");
    assert!(again.out.contains("no pending task"), "{again:?}");
    let j = cli(schema, &["--json", "cancel", "q", "k"]);
    assert_eq!(j.code, 4);
    let j = j.json();
    assert_eq!(j["cancelled"], false);
    assert_eq!(j["latest"]["state"], "cancelled");
    assert_eq!(
        cli(schema, &["--json", "cancel", "q", "j"]).json()["cancelled"],
        true
    );

    let unknown = cli(schema, &["cancel", "q", "nobody"]);
    assert_eq!(unknown.code, 1);
    assert!(unknown.err.contains("no record of key"), "{unknown:?}");
}

#[test]
fn retry_reschedules_a_failed_task_once_and_refuses_a_held_key() {
    let schema = "t_cli_retry";
    let (mut c, q) = installed(schema, "q");
    failed_task(&mut c, &q, "k");
    let failed = q.history(&mut c, "k").unwrap()[0].clone();

    let r = cli(
        schema,
        &[
            "--json",
            "retry",
            "q",
            "k",
            "--payload",
            "good",
            "--after",
            "1h",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let r = r.json();
    assert_eq!(r["retried"], true);
    assert_eq!(r["from"]["id"], failed.id);
    assert_eq!(r["from"]["state"], "failed");
    assert_eq!(r["scheduled"]["replaced"], false);
    let first = r["scheduled"]["id"].as_i64().unwrap();
    let due = q.due_of(&mut c, "k").unwrap().expect("a pending retry");
    assert_eq!(time(&r["scheduled"]["due"]), due);

    // Run again, it finds its own pending task holding the key: nothing changes.
    let held = cli(schema, &["retry", "q", "k", "--no-payload"]);
    assert_eq!(held.code, 4, "{held:?}");
    assert!(
        held.out.contains(&format!("pending task {first}")),
        "{held:?}"
    );
    let j = cli(schema, &["--json", "retry", "q", "k", "--no-payload"]);
    assert_eq!(j.code, 4);
    let j = j.json();
    assert_eq!(j["reason"], "key_held");
    assert_eq!(j["pending"]["id"], first);
    assert_eq!(q.due_of(&mut c, "k").unwrap(), Some(due));
    assert_eq!(states(&mut c, &q, "k"), [State::Failed, State::Pending]);

    // --replace goes through the upsert: the pending retry is replaced by
    // one due now, which a node runs with the payload given.
    let r = cli(
        schema,
        &[
            "--json",
            "retry",
            "q",
            "k",
            "--replace",
            "--payload",
            "good",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let r = r.json();
    assert_eq!(r["scheduled"]["replaced"], true);
    let second = r["scheduled"]["id"].as_i64().unwrap();
    assert_ne!(second, first);
    let (node, _release) = node(&q);
    let done = [State::Failed, State::Replaced, State::Completed];
    assert!(wait_until(LONG, || states(&mut c, &q, "k") == done));
    node.shutdown();
    let ids: Vec<i64> = q
        .history(&mut c, "k")
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids, [failed.id, first, second]);

    // The key's latest outcome completed: nothing to retry, unless the
    // failed task is named.
    let r = cli(schema, &["--json", "retry", "q", "k", "--no-payload"]);
    assert_eq!(r.code, 4, "{r:?}");
    assert_eq!(r.json()["reason"], "not_retryable");
    let id = failed.id.to_string();
    let named = cli(
        schema,
        &[
            "retry",
            "q",
            "k",
            "--id",
            &id,
            "--no-payload",
            "--after",
            "1h",
        ],
    );
    assert_eq!(named.code, 0, "{named:?}");
    assert_eq!(states(&mut c, &q, "k").last(), Some(&State::Pending));
    let h = q.history(&mut c, "k").unwrap();
    assert_eq!(h.last().unwrap().handler, failed.handler);

    let missing = cli(
        schema,
        &["retry", "q", "k", "--id", "999999", "--no-payload"],
    );
    assert_eq!(missing.code, 1);
    assert!(
        missing.err.contains("no finished task 999999"),
        "{missing:?}"
    );
    let unknown = cli(schema, &["retry", "q", "nobody", "--no-payload"]);
    assert_eq!(unknown.code, 1);
    assert!(unknown.err.contains("no finished task"), "{unknown:?}");
}

#[test]
fn retry_reruns_a_failed_task_with_its_payload_and_attempt_bound() {
    let schema = "t_cli_retry_same";
    let (mut c, q) = installed(schema, "q");
    let (node, runs) = recording_node(&q);
    let first = q
        .schedule(
            &mut c,
            &NewTask::new("k", "h")
                .payload(b"P-42".to_vec())
                .max_attempts(2),
        )
        .unwrap()
        .id;
    assert!(wait_until(LONG, || states(&mut c, &q, "k") == [State::Failed]));
    let p = b"P-42".to_vec();
    assert_eq!(runs_of(&runs, first), [(p.clone(), 1), (p.clone(), 2)]);
    assert_eq!(kept(&mut c, schema, first), (Some(p.clone()), Some(2)));

    // No flags: the new task carries the failed one's payload and bound,
    // so it runs twice with "P-42" and fails again, not five times empty.
    let r = cli(schema, &["--json", "retry", "q", "k"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = r.json();
    let s = &r["scheduled"];
    assert_eq!(s["payload_source"], "stored");
    assert_eq!(s["payload_bytes"], 4);
    assert_eq!(
        (&s["max_attempts"], &s["max_attempts_source"]),
        (&2.into(), &"stored".into())
    );
    let second = s["id"].as_i64().unwrap();
    let twice = [State::Failed, State::Failed];
    assert!(wait_until(LONG, || states(&mut c, &q, "k") == twice));
    assert_eq!(runs_of(&runs, second), [(p.clone(), 1), (p.clone(), 2)]);
    let h = q.history(&mut c, "k").unwrap();
    assert_eq!((h[1].id, h[1].attempts), (second, 2));

    // Overrides: another payload and bound, which the node runs with and
    // the new failure keeps.
    let r = cli(
        schema,
        &[
            "--json",
            "retry",
            "q",
            "k",
            "--payload",
            "other",
            "--max-attempts",
            "3",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let r = r.json();
    let s = &r["scheduled"];
    assert_eq!(
        (&s["payload_source"], &s["payload_bytes"]),
        (&"given".into(), &5.into())
    );
    assert_eq!(
        (&s["max_attempts"], &s["max_attempts_source"]),
        (&3.into(), &"given".into())
    );
    let third = s["id"].as_i64().unwrap();
    let thrice = [State::Failed, State::Failed, State::Failed];
    assert!(wait_until(LONG, || states(&mut c, &q, "k") == thrice));
    let o = b"other".to_vec();
    assert_eq!(
        runs_of(&runs, third),
        [(o.clone(), 1), (o.clone(), 2), (o.clone(), 3)]
    );
    assert_eq!(kept(&mut c, schema, third), (Some(o.clone()), Some(3)));
    node.shutdown();

    // For a person: where each came from, and no note of defaults.
    let t = cli(schema, &["retry", "q", "k", "--after", "1h"]);
    assert_eq!(t.code, 0, "{t:?}");
    assert!(
        t.out.contains(&format!(
            "payload: 5 bytes (task {third}'s); attempt bound: 3 (task {third}'s)"
        )),
        "{t:?}"
    );
    assert!(!t.out.contains("note:"), "{t:?}");
    assert_eq!(pending_body(&mut c, schema, "k"), (o.clone(), 3));
    // One override alone: the other stays the stored one.
    let t = cli(
        schema,
        &[
            "retry",
            "q",
            "k",
            "--replace",
            "--no-payload",
            "--after",
            "1h",
        ],
    );
    assert_eq!(t.code, 0, "{t:?}");
    assert!(
        t.out.contains(&format!(
            "payload: 0 bytes (given); attempt bound: 3 (task {third}'s)"
        )),
        "{t:?}"
    );
    assert_eq!(pending_body(&mut c, schema, "k"), (Vec::new(), 3));
    // The key's latest outcome is now the retry just replaced: the failed
    // task is named.
    let id = third.to_string();
    let t = cli(
        schema,
        &[
            "retry",
            "q",
            "k",
            "--id",
            &id,
            "--replace",
            "--max-attempts",
            "7",
            "--after",
            "1h",
        ],
    );
    assert_eq!(t.code, 0, "{t:?}");
    assert_eq!(pending_body(&mut c, schema, "k"), (o, 7));
}

#[test]
fn only_retryable_outcomes_keep_the_payload_and_attempt_bound() {
    let schema = "t_cli_retry_kept";
    let (mut c, q) = installed(schema, "q");
    // A task a dead node held on its last allowed attempt, its lease
    // expired: the next claim ends it `abandoned`.
    c.execute(
        &format!(
            "INSERT INTO {schema}.tasks (queue, key, handler, payload, state, due, run_at,
                                         attempt, max_attempts, owner, claimed)
             VALUES ('q', 'dead', 'h', 'abandoned-body', 'running', now(), now(), 2, 2,
                     'a-dead-node', now())"
        ),
        &[],
    )
    .unwrap();
    let ago = SystemTime::now() - HOUR;
    let ids = [
        (
            "done",
            NewTask::new("done", "h")
                .payload(b"good".to_vec())
                .max_attempts(4),
        ),
        (
            "bad",
            NewTask::new("bad", "h")
                .payload(b"failed-body".to_vec())
                .max_attempts(1),
        ),
        // Claimed an hour after its due time, past its 1 s window.
        (
            "late",
            NewTask::new("late", "h")
                .payload(b"expired-body".to_vec())
                .max_attempts(3)
                .at(ago)
                .expire_after(Duration::from_secs(1)),
        ),
        (
            "swapped",
            NewTask::new("swapped", "h")
                .payload(b"x".to_vec())
                .after(HOUR),
        ),
        (
            "dropped",
            NewTask::new("dropped", "h")
                .payload(b"y".to_vec())
                .after(HOUR),
        ),
    ]
    .map(|(key, task)| (key, q.schedule(&mut c, &task).unwrap().id));
    assert!(
        q.schedule(&mut c, &NewTask::new("swapped", "h").after(HOUR))
            .unwrap()
            .replaced
    );
    assert!(q.cancel(&mut c, "dropped").unwrap());
    let (node, _runs) = recording_node(&q);
    let ended = [
        ("done", State::Completed),
        ("bad", State::Failed),
        ("late", State::Expired),
        ("dead", State::Abandoned),
    ];
    assert!(wait_until(LONG, || ended
        .iter()
        .all(|(key, state)| states(&mut c, &q, key) == [*state])));
    node.shutdown();
    let dead = q.history(&mut c, "dead").unwrap()[0].id;
    let id = |key: &str| ids.iter().find(|(k, _)| *k == key).unwrap().1;

    // The three a retry reruns keep both; the others neither.
    assert_eq!(
        kept(&mut c, schema, id("bad")),
        (Some(b"failed-body".to_vec()), Some(1))
    );
    assert_eq!(
        kept(&mut c, schema, id("late")),
        (Some(b"expired-body".to_vec()), Some(3))
    );
    assert_eq!(
        kept(&mut c, schema, dead),
        (Some(b"abandoned-body".to_vec()), Some(2))
    );
    for key in ["done", "swapped", "dropped"] {
        assert_eq!(kept(&mut c, schema, id(key)), (None, None), "{key}");
    }

    // And each is retried as it was.
    for (key, body, bound) in [
        ("bad", &b"failed-body"[..], 1),
        ("late", b"expired-body", 3),
        ("dead", b"abandoned-body", 2),
    ] {
        let r = cli(schema, &["--json", "retry", "q", key, "--after", "1h"]);
        assert_eq!(r.code, 0, "{r:?}");
        assert_eq!(r.json()["scheduled"]["payload_source"], "stored", "{key}");
        assert_eq!(
            pending_body(&mut c, schema, key),
            (body.to_vec(), bound),
            "{key}"
        );
    }
}

#[test]
fn retry_of_an_outcome_recorded_before_version_4_uses_the_defaults_and_says_so() {
    let schema = "t_cli_retry_old";
    let mut c = fresh_schema(schema);
    install_version_3(&mut c, schema);
    let q = Queue::new(schema, "q").unwrap();
    c.batch_execute(&format!(
        "SELECT {schema}.schedule('q', 'waiting', 'h', run_at => now() + interval '1 hour',
                                  payload => '\\x0102', max_attempts => 3)"
    ))
    .unwrap();
    let old = failed_before_version_4(&mut c, schema, "q", "a");
    let older = failed_before_version_4(&mut c, schema, "q", "b");

    // Still at version 3 (the program reads what the rows hold): defaults.
    let r = cli(schema, &["--json", "retry", "q", "a", "--after", "1h"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = r.json();
    assert_eq!(r["from"]["id"], old);
    let s = &r["scheduled"];
    assert_eq!(
        (&s["payload_source"], &s["payload_bytes"]),
        (&"default".into(), &0.into())
    );
    assert_eq!(s["max_attempts"], DEFAULT_MAX_ATTEMPTS);
    assert_eq!(s["max_attempts_source"], "default");
    assert_eq!(
        pending_body(&mut c, schema, "a"),
        (Vec::new(), DEFAULT_MAX_ATTEMPTS as i32)
    );

    // Upgraded by the command line: the pending task stays as it was, the
    // old row still keeps nothing, and a person is told so.
    let m = cli(schema, &["--json", "migrate"]);
    assert_eq!(m.code, 0, "{m:?}");
    assert_eq!(m.json()["applied"], serde_json::json!([4]));
    assert_eq!(pending_body(&mut c, schema, "waiting"), (vec![1, 2], 3));
    assert_eq!(kept(&mut c, schema, older), (None, None));
    let t = cli(schema, &["retry", "q", "b", "--after", "1h"]);
    assert_eq!(t.code, 0, "{t:?}");
    assert!(
        t.out.contains(&format!(
            "payload: 0 bytes (default); attempt bound: {DEFAULT_MAX_ATTEMPTS} (default)"
        )),
        "{t:?}"
    );
    assert!(
        t.out.contains(&format!(
            "note: task {older}'s outcome was recorded without its payload and attempt bound \
             (before schema version 4), so the new task has an empty payload and the default \
             attempt bound; give --payload (or --payload-file) and --max-attempts to set them"
        )),
        "{t:?}"
    );
    assert_eq!(
        pending_body(&mut c, schema, "b"),
        (Vec::new(), DEFAULT_MAX_ATTEMPTS as i32)
    );
    // A bound given alone: the payload is still the default, and said so.
    let t = cli(
        schema,
        &[
            "retry",
            "q",
            "b",
            "--replace",
            "--max-attempts",
            "2",
            "--after",
            "1h",
        ],
    );
    assert_eq!(t.code, 0, "{t:?}");
    assert!(t.out.contains("attempt bound: 2 (given)"), "{t:?}");
    assert!(
        t.out
            .contains("has an empty payload; give --payload (or --payload-file) to set it"),
        "{t:?}"
    );
    assert_eq!(pending_body(&mut c, schema, "b"), (Vec::new(), 2));
    assert!(q.due_of(&mut c, "waiting").unwrap().is_some());
}

#[test]
fn purge_removes_old_outcome_rows_only() {
    let schema = "t_cli_purge";
    let (mut c, a) = installed(schema, "a");
    let b = Queue::new(schema, "b").unwrap();
    for key in ["k1", "k2", "k3", "k4"] {
        a.schedule(&mut c, &NewTask::new(key, "h").after(HOUR))
            .unwrap();
        assert!(a.cancel(&mut c, key).unwrap());
    }
    b.schedule(&mut c, &NewTask::new("old", "h").after(HOUR))
        .unwrap();
    assert!(b.cancel(&mut c, "old").unwrap());
    a.schedule(&mut c, &NewTask::new("live", "h").after(HOUR))
        .unwrap();
    // Two of a's outcomes and b's one finished two days ago.
    c.batch_execute(&format!(
        "UPDATE {schema}.outcomes SET finished = finished - interval '2 days'
         WHERE key IN ('k1', 'k2', 'old')"
    ))
    .unwrap();

    let p = cli(schema, &["--json", "purge", "--older-than", "1d", "a"]);
    assert_eq!(p.code, 0, "{p:?}");
    assert_eq!(p.json()["deleted"], 2);
    let left = |c: &mut postgres::Client, q: &Queue, key: &str| states(c, q, key);
    assert!(left(&mut c, &a, "k1").is_empty() && left(&mut c, &a, "k2").is_empty());
    assert_eq!(left(&mut c, &a, "k3"), [State::Cancelled]);
    assert_eq!(left(&mut c, &a, "k4"), [State::Cancelled]);
    assert_eq!(left(&mut c, &b, "old"), [State::Cancelled], "only queue a");
    assert_eq!(left(&mut c, &a, "live"), [State::Pending]);

    let all = cli(schema, &["purge", "--older-than", "1d"]);
    assert_eq!(all.code, 0, "{all:?}");
    assert!(all.out.contains("deleted 1 outcome row "), "{all:?}");
    assert!(left(&mut c, &b, "old").is_empty());
    assert_eq!(left(&mut c, &a, "k3"), [State::Cancelled]);
    assert_eq!(left(&mut c, &a, "live"), [State::Pending]);
}

#[test]
fn bad_arguments_exit_non_zero_with_a_message() {
    let schema = "t_cli_bad";
    let _ = installed(schema, "q");
    let absent = "t_cli_bad_absent";
    drop(fresh_schema(absent));
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["--url", "not a url", "status"],
            1,
            "invalid connection string",
        ),
        (
            &["--url", "postgres://postgres@127.0.0.1:1/test", "status"],
            1,
            "cannot connect to PostgreSQL at postgres@127.0.0.1:1/test",
        ),
        (
            &["--schema", "Bad-Name", "status"],
            1,
            "invalid schema name",
        ),
        (
            &["--schema", absent, "queues"],
            1,
            "holds no timerpool tables",
        ),
        (
            &["--schema", schema, "purge", "--older-than", "7x"],
            2,
            "unknown time unit",
        ),
        (&["--schema", schema, "purge"], 2, "--older-than"),
        (
            &["--schema", schema, "purge", "--older-than", "20000years"],
            1,
            "longer than the maximum",
        ),
        (&["--schema", schema, "history", "q"], 2, "<KEY>"),
        (
            &[
                "--schema",
                schema,
                "retry",
                "q",
                "k",
                "--payload",
                "x",
                "--no-payload",
            ],
            2,
            "cannot be used with",
        ),
        (
            &[
                "--schema",
                schema,
                "retry",
                "q",
                "k",
                "--no-payload",
                "--max-attempts",
                "0",
            ],
            2,
            "max-attempts",
        ),
        (
            &["--schema", schema, "frobnicate"],
            2,
            "unrecognized subcommand",
        ),
    ];
    for (args, code, message) in cases {
        let run = cli_raw(args);
        assert_eq!(run.code, *code, "{args:?}: {run:?}");
        assert!(run.err.contains(message), "{args:?}: {run:?}");
    }
    // With --json an error is also a JSON object on standard output.
    let run = cli_raw(&[
        "--json",
        "--url",
        "postgres://postgres@127.0.0.1:1/test",
        "queues",
    ]);
    assert_eq!(run.code, 1);
    let j = run.json();
    assert!(j["error"].as_str().unwrap().contains("cannot connect"));
    assert_eq!(j["exit"], 1);
}
