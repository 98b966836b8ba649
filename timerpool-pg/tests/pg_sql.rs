//! Tests for the SQL interface installed with the schema (`schedule`,
//! `schedule_many`, `reschedule`, `cancel`, `due_of`, `channel`), called
//! from `psql` and from plain SQL in a caller's transaction, and for the
//! versioned installation: the upgrades from a version-1 and from a
//! version-3 schema keep its pending tasks (and outcomes), and a newer
//! breaking schema is refused.

mod pg_common;

use pg_common::runs::{node, started, states};
use pg_common::*;
use std::process::Command;
use std::time::{Duration, SystemTime};
use timerpool_pg::{Due, Error, NewTask, Queue, State, SCHEMA_VERSION};

const LONG: Duration = Duration::from_secs(20);

/// Runs `sql` with the `psql` binary; its status, stdout and stderr.
fn psql(sql: &str) -> (bool, String, String) {
    let out = Command::new("psql")
        .args([
            &url(),
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            sql,
        ])
        .output()
        .expect("psql, PostgreSQL's client, is on the PATH");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn psql_schedules_in_its_transaction_rollback_leaves_nothing_commit_fires_once() {
    let schema = "t_sql_psql";
    let mut c = fresh_schema(schema);
    let (node, runs) = node(schema);
    let q = node.queue().clone();
    let (ok, _, err) = psql(&format!(
        "BEGIN;
         SELECT id FROM {schema}.schedule(queue => 'q', key => 'gone', handler => 'h');
         ROLLBACK;"
    ));
    assert!(ok, "{err}");
    assert!(q.history(&mut c, "gone").unwrap().is_empty());
    let (ok, out, err) = psql(&format!(
        "BEGIN;
         SELECT id FROM {schema}.schedule(queue => 'q', key => 'kept', handler => 'h',
                                          payload => '\\x2a');
         COMMIT;"
    ));
    assert!(ok, "{err}");
    let id: i64 = out.trim().parse().expect("the new task's id");
    let done = || states(&mut c, &q, "kept") == [State::Completed];
    assert!(wait_until(LONG, done));
    let ran: Vec<i64> = runs.lock().unwrap().iter().map(|r| r.0).collect();
    assert_eq!(
        ran,
        [id],
        "the committed task ran once, the rolled-back one never"
    );
    assert!(q.history(&mut c, "gone").unwrap().is_empty());
    node.shutdown();
}

#[test]
fn a_function_schedule_committed_after_an_earlier_task_ran_wakes_the_node() {
    let schema = "t_sql_late_commit";
    let mut c = fresh_schema(schema);
    let (node, runs) = node(schema);
    let q = node.queue().clone();
    let hour = Duration::from_secs(3600);
    q.schedule(&mut c, &NewTask::new("far", "h").after(hour))
        .unwrap();
    assert!(wait_until(LONG, || all_waiting(
        &mut c,
        std::slice::from_ref(&node)
    )));
    let first = q
        .schedule(
            &mut c,
            &NewTask::new("first", "h").after(Duration::from_millis(1500)),
        )
        .unwrap();
    // Another session, plain SQL: the function in the caller's transaction.
    let mut other = client();
    let mut tx = other.transaction().unwrap();
    let row = tx
        .query_one(
            &format!(
                "SELECT id, due FROM {schema}.schedule(queue => 'q', key => 'second',
                     handler => 'h', run_at => clock_timestamp() + interval '3 seconds')"
            ),
            &[],
        )
        .unwrap();
    let (second, due): (i64, SystemTime) = (row.get(0), row.get(1));
    // Hold the transaction open until "first" has run and the leader waits
    // again (toward "far", not "second", which it cannot see).
    let ran_first = || states(&mut c, &q, "first") == [State::Completed];
    assert!(wait_until(LONG, ran_first), "first completed");
    assert!(wait_until(LONG, || all_waiting(
        &mut c,
        std::slice::from_ref(&node)
    )));
    assert!(
        SystemTime::now() < due,
        "the commit comes before second is due"
    );
    tx.commit().unwrap();
    assert!(wait_until(LONG, || started(&runs, second).is_some()));
    let late = started(&runs, second)
        .unwrap()
        .duration_since(due)
        .expect("never early");
    assert!(late < Duration::from_secs(1), "second ran {late:?} late");
    assert!(started(&runs, first.id).is_some());
    assert_eq!(node.stats().safety_wakes, 0, "woken by the notification");
    node.shutdown();
}

#[test]
fn reschedule_moves_the_pending_task_in_place() {
    let schema = "t_sql_reschedule";
    let mut c = fresh_schema(schema);
    let q = Queue::new(schema, "q").unwrap();
    q.install(&mut c).unwrap();
    let hour = Duration::from_secs(3600);
    let s = q
        .schedule(
            &mut c,
            &NewTask::new("k", "h").after(hour).expire_after(hour),
        )
        .unwrap();
    assert_eq!(q.due_of(&mut c, "k").unwrap(), Some(s.due));
    let later = s.due + hour;
    assert!(q.reschedule(&mut c, "k", Due::At(later)).unwrap());
    assert_eq!(q.due_of(&mut c, "k").unwrap(), Some(later));
    // Through psql, in place as well.
    let (ok, out, err) = psql(&format!(
        "SELECT {schema}.reschedule('q', 'k', run_at => now() + interval '30 minutes')"
    ));
    assert!(ok && out.trim() == "t", "{out} {err}");
    let records = q.history(&mut c, "k").unwrap();
    assert_eq!(records.len(), 1, "no replaced record: {records:?}");
    assert_eq!((records[0].id, records[0].state), (s.id, State::Pending));
    let row = c
        .query_one(
            &format!(
                "SELECT (extract(epoch FROM expires - due) * 1000000)::int8
                 FROM {schema}.tasks WHERE id = $1"
            ),
            &[&s.id],
        )
        .unwrap();
    let window: i64 = row.get(0);
    assert_eq!(
        window,
        hour.as_micros() as i64,
        "the expiry window moved along"
    );
    // Nothing pending: false, and no task appears.
    assert!(!q.reschedule(&mut c, "none", Due::At(later)).unwrap());
    assert_eq!(q.due_of(&mut c, "none").unwrap(), None);
    assert!(q.history(&mut c, "none").unwrap().is_empty());
    assert!(q.cancel(&mut c, "k").unwrap());
    assert_eq!(q.due_of(&mut c, "k").unwrap(), None);
    assert!(!q.reschedule(&mut c, "k", Due::At(later)).unwrap());
}

#[test]
fn reschedule_to_an_earlier_time_wakes_a_sleeping_node() {
    let schema = "t_sql_earlier";
    let mut c = fresh_schema(schema);
    let (node, runs) = node(schema);
    let q = node.queue().clone();
    let s = q
        .schedule(
            &mut c,
            &NewTask::new("k", "h").after(Duration::from_secs(3600)),
        )
        .unwrap();
    assert!(wait_until(LONG, || all_waiting(
        &mut c,
        std::slice::from_ref(&node)
    )));
    assert!(q
        .reschedule(&mut c, "k", Due::After(Duration::from_millis(300)))
        .unwrap());
    let due = q.due_of(&mut c, "k").unwrap().expect("still pending");
    assert!(wait_until(LONG, || started(&runs, s.id).is_some()));
    let late = started(&runs, s.id)
        .unwrap()
        .duration_since(due)
        .expect("never early");
    assert!(late < Duration::from_secs(1), "ran {late:?} late");
    assert_eq!(node.stats().safety_wakes, 0, "woken by the notification");
    node.shutdown();
}

#[test]
fn bad_input_to_the_functions_is_a_clear_sql_error() {
    let schema = "t_sql_bad";
    let mut c = fresh_schema(schema);
    let q = Queue::new(schema, "q").unwrap();
    q.install(&mut c).unwrap();
    let s = schema;
    let cases = [
        (
            format!("SELECT * FROM {s}.schedule('', 'k', 'h')"),
            "invalid queue name: it is empty",
        ),
        (
            format!("SELECT * FROM {s}.schedule(repeat('q', 129), 'k', 'h')"),
            "invalid queue name: 129 bytes, the maximum is 128",
        ),
        (
            format!("SELECT * FROM {s}.schedule('q', repeat('k', 1025), 'h')"),
            "key of 1025 bytes is longer than the maximum 1024",
        ),
        (
            format!("SELECT * FROM {s}.schedule('q', NULL, 'h')"),
            "the key is NULL",
        ),
        (
            format!("SELECT * FROM {s}.schedule('q', 'k', '')"),
            "invalid handler name: it is empty",
        ),
        (
            format!("SELECT * FROM {s}.schedule('q', 'k', 'h', max_attempts => 0)"),
            "max_attempts must be at least 1, got 0",
        ),
        (
            format!("SELECT * FROM {s}.schedule('q', 'k', 'h', run_at => 'infinity')"),
            "due time infinity is not a finite timestamp",
        ),
        (
            format!(
                "SELECT * FROM {s}.schedule('q', 'k', 'h',
                     payload => convert_to(repeat('p', 1048577), 'UTF8'))"
            ),
            "payload of 1048577 bytes is larger than the maximum 1048576",
        ),
        (
            format!("SELECT * FROM {s}.schedule_many('q', ARRAY['a', 'a'], ARRAY['h', 'h'])"),
            "key 'a' appears more than once in one batch",
        ),
        (
            format!("SELECT * FROM {s}.schedule_many('q', ARRAY['a', 'b'], ARRAY['h'])"),
            "the arrays of a batch must have one element per key",
        ),
        (
            format!("SELECT {s}.reschedule('q', 'k', NULL)"),
            "due time NULL is not a finite timestamp",
        ),
        (
            format!("SELECT {s}.cancel('', 'k')"),
            "invalid queue name: it is empty",
        ),
        (
            format!("SELECT {s}.due_of('q', repeat('k', 2000))"),
            "key of 2000 bytes is longer than the maximum 1024",
        ),
    ];
    for (sql, message) in &cases {
        let (ok, _, err) = psql(sql);
        assert!(!ok, "{sql} was accepted");
        assert!(
            err.contains(&format!("timerpool: {message}")),
            "{sql}: {err}"
        );
        // The same through a driver: invalid_parameter_value (22023) or
        // null_value_not_allowed (22004), never a crash or a partial write.
        let e = c.query(sql.as_str(), &[]).unwrap_err();
        let code = e.code().expect("an SQL error").code();
        assert!(code == "22023" || code == "22004", "{sql}: {code}");
    }
    let (ok, out, _) = psql(&format!("SELECT count(*) FROM {s}.tasks"));
    assert!(ok);
    assert_eq!(out.trim(), "0", "nothing was scheduled");
}

#[test]
fn the_sql_channel_is_the_nodes_channel() {
    let schema = "t_sql_channel";
    let mut c = fresh_schema(schema);
    for name in ["q", "orders/eu-west", "ünïcödé", &"x".repeat(128)] {
        let q = Queue::new(schema, name).unwrap();
        q.install(&mut c).unwrap();
        let sql: String = c
            .query_one(&format!("SELECT {schema}.channel($1)"), &[&name])
            .unwrap()
            .get(0);
        assert_eq!(sql, q.channel(), "queue {name:?}");
    }
}

/// Installs the schema exactly as version-1 code did: one transaction
/// under the installer lock, a `meta` table holding the version, and the
/// first migration's statements.
fn install_version_1(c: &mut postgres::Client, schema: &str) {
    const V1: &str = include_str!("../src/migrations/0001.sql");
    let mut tx = c.transaction().unwrap();
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext('timerpool.install'), hashtext($1))",
        &[&schema],
    )
    .unwrap();
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {schema}.meta (version integer NOT NULL);"
    ))
    .unwrap();
    tx.batch_execute(&V1.replace("{s}", schema)).unwrap();
    tx.execute(&format!("DELETE FROM {schema}.meta"), &[])
        .unwrap();
    tx.execute(
        &format!("INSERT INTO {schema}.meta (version) VALUES ($1)"),
        &[&1i32],
    )
    .unwrap();
    tx.commit().unwrap();
}

#[test]
fn upgrading_a_version_1_schema_keeps_its_pending_tasks_and_they_fire() {
    let schema = "t_sql_upgrade";
    let mut c = fresh_schema(schema);
    install_version_1(&mut c, schema);
    // Tasks as version 1's schedule statement inserts them: one due now,
    // one shortly, one an hour away.
    c.batch_execute(&format!(
        "INSERT INTO {schema}.tasks (queue, key, handler, payload, due, run_at, max_attempts)
         SELECT 'q', k, 'h', '\\x'::bytea, d, d, 5 FROM (VALUES
             ('now', clock_timestamp()),
             ('soon', clock_timestamp() + interval '300 milliseconds'),
             ('later', clock_timestamp() + interval '1 hour')) v(k, d);"
    ))
    .unwrap();
    let q = Queue::new(schema, "q").unwrap();
    assert!(
        q.due_of(&mut c, "now").is_err(),
        "no functions before the upgrade"
    );
    q.install(&mut c).unwrap();
    assert_eq!(
        applied_versions(&mut c, schema),
        [(1, true), (2, false), (3, false), (4, false)]
    );
    assert_eq!(SCHEMA_VERSION, 4);
    let meta: i32 = c
        .query_one(&format!("SELECT version FROM {schema}.meta"), &[])
        .unwrap()
        .get(0);
    assert_eq!(meta, 1, "version-1 nodes still accept the schema");
    assert!(q.due_of(&mut c, "later").unwrap().is_some());
    // A second install changes nothing.
    q.install(&mut c).unwrap();
    let (node, runs) = node(schema);
    let fired = || {
        ["now", "soon"]
            .iter()
            .all(|k| states(&mut c, &q, k) == [State::Completed])
    };
    assert!(wait_until(LONG, fired));
    assert_eq!(runs.lock().unwrap().len(), 2);
    assert_eq!(states(&mut c, &q, "later"), [State::Pending]);
    // The upgraded schema serves the new calls on the old tasks.
    assert!(q
        .reschedule(&mut c, "later", Due::After(Duration::ZERO))
        .unwrap());
    let done = || states(&mut c, &q, "later") == [State::Completed];
    assert!(wait_until(LONG, done));
    node.shutdown();
}

/// The migrations applied to `schema`: version and whether it breaks older
/// nodes, in order.
fn applied_versions(c: &mut postgres::Client, schema: &str) -> Vec<(i32, bool)> {
    c.query(
        &format!("SELECT version, breaking FROM {schema}.migrations ORDER BY 1"),
        &[],
    )
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

/// Every row of `table` in `schema` as JSON text, by id, without the
/// columns named in `new` (those a migration adds).
fn rows(c: &mut postgres::Client, schema: &str, table: &str, new: &[&str]) -> Vec<String> {
    c.query(
        &format!("SELECT (to_jsonb(t) - $1::text[])::text FROM {schema}.{table} t ORDER BY id"),
        &[&new],
    )
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// The columns of `outcomes` migration 4 adds.
const V4: &[&str] = &["payload", "max_attempts"];

#[test]
fn upgrading_a_version_3_schema_keeps_its_tasks_and_outcomes() {
    let schema = "t_sql_upgrade_v3";
    let mut c = fresh_schema(schema);
    install_version_3(&mut c, schema);
    // Scheduled through version 3's own function: one due now, one an
    // hour away, with a payload and an attempt bound each; one cancelled
    // and one failed outcome, the latter as version-3 nodes recorded it.
    c.batch_execute(&format!(
        "SELECT {schema}.schedule('q', 'now', 'h', payload => '\\x01', max_attempts => 2);
         SELECT {schema}.schedule('q', 'later', 'h', run_at => now() + interval '1 hour',
                                  payload => '\\x0203', max_attempts => 3);
         SELECT {schema}.schedule('q', 'gone', 'h', run_at => now() + interval '1 hour');
         SELECT {schema}.cancel('q', 'gone');"
    ))
    .unwrap();
    let failed = failed_before_version_4(&mut c, schema, "q", "broke");
    let tasks = rows(&mut c, schema, "tasks", &[]);
    let outcomes = rows(&mut c, schema, "outcomes", V4);
    assert_eq!((tasks.len(), outcomes.len()), (2, 2));

    let q = Queue::new(schema, "q").unwrap();
    q.install(&mut c).unwrap();
    assert_eq!(
        applied_versions(&mut c, schema),
        [(1, true), (2, false), (3, false), (4, false)]
    );
    // The migration changed no row: the tasks keep their payloads and
    // bounds, and the old outcome rows keep none of the new columns.
    assert_eq!(rows(&mut c, schema, "tasks", &[]), tasks);
    assert_eq!(rows(&mut c, schema, "outcomes", V4), outcomes);
    let later: Vec<u8> = c
        .query_one(
            &format!("SELECT payload FROM {schema}.tasks WHERE key = 'later'"),
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(later, [2, 3]);
    let kept: i64 = c
        .query_one(
            &format!(
                "SELECT count(*) FROM {schema}.outcomes
                 WHERE payload IS NOT NULL OR max_attempts IS NOT NULL"
            ),
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(kept, 0);
    assert_eq!(states(&mut c, &q, "broke"), [State::Failed]);
    assert_eq!(q.history(&mut c, "broke").unwrap()[0].id, failed);
    assert_eq!(states(&mut c, &q, "gone"), [State::Cancelled]);
    q.install(&mut c).unwrap(); // a second install changes nothing
    assert_eq!(rows(&mut c, schema, "tasks", &[]), tasks);

    // The pending tasks fire on a node of this version.
    let (node, runs) = node(schema);
    assert!(wait_until(LONG, || states(&mut c, &q, "now") == [State::Completed]));
    assert!(q
        .reschedule(&mut c, "later", Due::After(Duration::ZERO))
        .unwrap());
    assert!(wait_until(LONG, || states(&mut c, &q, "later") == [State::Completed]));
    assert_eq!(runs.lock().unwrap().len(), 2);
    node.shutdown();
}

#[test]
fn a_newer_breaking_schema_is_refused_a_newer_additive_one_is_not() {
    let schema = "t_sql_newer";
    let mut c = fresh_schema(schema);
    let q = Queue::new(schema, "q").unwrap();
    q.install(&mut c).unwrap();
    let newer = SCHEMA_VERSION + 1;
    c.execute(
        &format!("INSERT INTO {schema}.migrations (version, breaking) VALUES ($1, false)"),
        &[&newer],
    )
    .unwrap();
    q.install(&mut c).unwrap();
    c.execute(
        &format!("UPDATE {schema}.migrations SET breaking = true WHERE version = $1"),
        &[&newer],
    )
    .unwrap();
    match q.install(&mut c) {
        Err(Error::SchemaTooNew { found, known }) => {
            assert_eq!((found, known), (newer, SCHEMA_VERSION));
        }
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
}
