//! Tests for the keyed contract of `timerpool-pg` against a real
//! PostgreSQL: insert or replace, cancel, transactions, bad input, failures
//! and their records, retention and installation.

mod pg_common;

use pg_common::*;
use std::sync::mpsc;
use std::time::{Duration, SystemTime};
use timerpool_pg::{
    Error, NewTask, Node, Queue, State, MAX_KEY_BYTES, MAX_PAYLOAD_BYTES, SCHEMA_VERSION,
};

const LONG: Duration = Duration::from_secs(20);

fn queue(schema: &str) -> (postgres::Client, Queue) {
    let mut c = fresh_schema(schema);
    let q = Queue::new(schema, "q").unwrap();
    q.install(&mut c).unwrap();
    (c, q)
}

/// Drop `schema` while a node works in it. The node's transactions lock
/// the same tables in their own order, so the server may end the drop as
/// the loser of a deadlock; that drop is tried again, any other error
/// fails the test.
fn drop_under_a_running_node(c: &mut postgres::Client, schema: &str) {
    for _ in 0..20 {
        match c.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")) {
            Ok(()) => return,
            Err(e) if e.code() == Some(&postgres::error::SqlState::T_R_DEADLOCK_DETECTED) => {}
            Err(e) => panic!("DROP SCHEMA {schema}: {e}"),
        }
    }
    panic!("DROP SCHEMA {schema} lost 20 deadlocks in a row");
}

fn states(c: &mut postgres::Client, q: &Queue, key: &str) -> Vec<State> {
    q.history(c, key).unwrap().iter().map(|r| r.state).collect()
}

#[test]
fn schedule_says_whether_it_inserted_or_replaced() {
    let (mut c, q) = queue("t_replace");
    let hour = Duration::from_secs(3600);
    let a = q
        .schedule(&mut c, &NewTask::new("k", "h").after(hour))
        .unwrap();
    let b = q
        .schedule(&mut c, &NewTask::new("k", "h").after(hour))
        .unwrap();
    let other = q
        .schedule(&mut c, &NewTask::new("j", "h").after(hour))
        .unwrap();
    assert!(!a.replaced && b.replaced && !other.replaced);
    assert_ne!(a.id, b.id);
    let h = q.history(&mut c, "k").unwrap();
    assert_eq!(h.len(), 2);
    assert_eq!((h[0].id, h[0].state), (a.id, State::Replaced));
    assert_eq!((h[1].id, h[1].state), (b.id, State::Pending));
    assert!(h[0].finished.is_some() && h[0].attempts == 0);
}

#[test]
fn cancel_is_true_only_while_pending() {
    let (mut c, q) = queue("t_cancel");
    q.schedule(&mut c, &NewTask::new("k", "h").after(LONG))
        .unwrap();
    assert!(q.cancel(&mut c, "k").unwrap());
    assert!(!q.cancel(&mut c, "k").unwrap());
    assert!(!q.cancel(&mut c, "never-scheduled").unwrap());
    assert_eq!(states(&mut c, &q, "k"), [State::Cancelled]);
}

#[test]
fn cancel_after_claim_returns_false_and_the_task_completes() {
    let (mut c, q) = queue("t_claimed");
    let (started_tx, started) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let release_rx = std::sync::Mutex::new(release_rx);
    let node = Node::builder(config(), "q")
        .schema("t_claimed")
        .workers(1)
        .handler("h", move |_| {
            started_tx.send(()).unwrap();
            release_rx.lock().unwrap().recv().unwrap();
            Ok(())
        })
        .start()
        .unwrap();
    q.schedule(&mut c, &NewTask::new("k", "h")).unwrap();
    started.recv_timeout(LONG).expect("the task starts");
    assert!(
        !q.cancel(&mut c, "k").unwrap(),
        "a claimed task cannot be cancelled"
    );
    // A key whose task runs gets a new pending task beside it.
    let next = q
        .schedule(&mut c, &NewTask::new("k", "h").after(LONG))
        .unwrap();
    assert!(!next.replaced);
    assert_eq!(states(&mut c, &q, "k"), [State::Running, State::Pending]);
    release.send(()).unwrap();
    assert!(wait_until(LONG, || states(&mut c, &q, "k")
        == [State::Completed, State::Pending]));
    assert!(q.cancel(&mut c, "k").unwrap());
    node.shutdown();
}

#[test]
fn schedule_commits_or_rolls_back_with_the_callers_transaction() {
    let (mut c, q) = queue("t_tx");
    c.batch_execute("CREATE TABLE t_tx.trips (id int)").unwrap();
    let mut tx = c.transaction().unwrap();
    tx.execute("INSERT INTO t_tx.trips VALUES (1)", &[])
        .unwrap();
    q.schedule(&mut tx, &NewTask::new("trip-1", "h").after(LONG))
        .unwrap();
    tx.rollback().unwrap();
    assert!(states(&mut c, &q, "trip-1").is_empty());

    let mut tx = c.transaction().unwrap();
    tx.execute("INSERT INTO t_tx.trips VALUES (2)", &[])
        .unwrap();
    q.schedule(&mut tx, &NewTask::new("trip-2", "h").after(LONG))
        .unwrap();
    // Not visible to other sessions before commit.
    let mut other = client();
    assert!(q.history(&mut other, "trip-2").unwrap().is_empty());
    tx.commit().unwrap();
    assert_eq!(states(&mut other, &q, "trip-2"), [State::Pending]);
    let trips: i64 = c
        .query_one("SELECT count(*) FROM t_tx.trips", &[])
        .unwrap()
        .get(0);
    assert_eq!(trips, 1);
}

#[test]
fn bad_input_is_an_error_value_and_sends_nothing() {
    let (mut c, q) = queue("t_bad");
    let long_key = "k".repeat(MAX_KEY_BYTES + 1);
    let big = vec![0u8; MAX_PAYLOAD_BYTES + 1];
    let cases = [
        NewTask::new(long_key.clone(), "h"),
        NewTask::new("k", "h").payload(big),
        NewTask::new("a\0b", "h"),
        NewTask::new("k", ""),
        NewTask::new("k", "h").max_attempts(0),
        NewTask::new("k", "h").after(Duration::MAX),
    ];
    for task in &cases {
        let err = q.schedule(&mut c, task).unwrap_err();
        assert!(!err.to_string().is_empty());
        assert!(!matches!(err, Error::Db(_)), "{err} reached the database");
    }
    assert!(matches!(
        q.schedule(&mut c, &cases[0]),
        Err(Error::KeyTooLong {
            max: MAX_KEY_BYTES,
            ..
        })
    ));
    assert!(matches!(
        q.schedule(&mut c, &cases[1]),
        Err(Error::PayloadTooLarge { .. })
    ));
    assert!(matches!(
        q.cancel(&mut c, &long_key),
        Err(Error::KeyTooLong { .. })
    ));
    let dup = [NewTask::new("d", "h"), NewTask::new("d", "h")];
    assert!(matches!(
        q.schedule_batch(&mut c, &dup),
        Err(Error::DuplicateKeyInBatch(k)) if k == "d"
    ));
    assert!(Queue::new("Bad Schema", "q").is_err());
    assert!(Queue::new("ok", "").is_err());
    assert_eq!(live(&mut c, "t_bad", "q"), 0);
    // The largest accepted values are accepted.
    let max = NewTask::new("k".repeat(MAX_KEY_BYTES), "h").payload(vec![7; MAX_PAYLOAD_BYTES]);
    assert!(q.schedule(&mut c, &max.after(LONG)).is_ok());
}

#[test]
fn batch_schedule_inserts_and_replaces() {
    let (mut c, q) = queue("t_batch");
    let first: Vec<NewTask> = (0..100)
        .map(|i| NewTask::new(format!("k{i}"), "h").after(LONG))
        .collect();
    let r = q.schedule_batch(&mut c, &first).unwrap();
    assert_eq!(r.len(), 100);
    assert!(r.iter().all(|s| !s.replaced));
    let second: Vec<NewTask> = (50..150)
        .map(|i| NewTask::new(format!("k{i}"), "h").after(LONG))
        .collect();
    let r = q.schedule_batch(&mut c, &second).unwrap();
    assert_eq!(r.iter().filter(|s| s.replaced).count(), 50);
    assert_eq!(live(&mut c, "t_batch", "q"), 150);
    assert_eq!(outcome_counts(&mut c, "t_batch", "q")["replaced"], 50);
}

#[test]
fn unknown_handler_is_a_recorded_failure() {
    let (mut c, q) = queue("t_unknown");
    let node = Node::builder(config(), "q")
        .schema("t_unknown")
        .workers(1)
        .handler("known", |_| Ok(()))
        .start()
        .unwrap();
    q.schedule(&mut c, &NewTask::new("k", "nobody").max_attempts(1))
        .unwrap();
    assert!(wait_until(LONG, || states(&mut c, &q, "k") == [State::Failed]));
    let rec = &q.history(&mut c, "k").unwrap()[0];
    let msg = rec.error.as_deref().unwrap();
    assert!(msg.contains("no handler named \"nobody\""), "{msg}");
    assert!(msg.contains(node.id()), "{msg}");
    node.shutdown();
}

#[test]
fn a_failing_task_is_retried_then_ends_failed_with_its_message() {
    let (mut c, q) = queue("t_retry");
    let node = Node::builder(config(), "q")
        .schema("t_retry")
        .workers(2)
        .retry_backoff(Duration::from_millis(10))
        .handler("fails", |job| {
            Err(format!("attempt {} broke", job.attempt()).into())
        })
        .handler("panics", |_| panic!("deliberate panic"))
        .start()
        .unwrap();
    q.schedule(&mut c, &NewTask::new("e", "fails").max_attempts(3))
        .unwrap();
    q.schedule(&mut c, &NewTask::new("p", "panics").max_attempts(1))
        .unwrap();
    assert!(wait_until(LONG, || states(&mut c, &q, "e") == [State::Failed]));
    assert!(wait_until(LONG, || states(&mut c, &q, "p") == [State::Failed]));
    let e = &q.history(&mut c, "e").unwrap()[0];
    assert_eq!(e.attempts, 3);
    assert_eq!(e.error.as_deref(), Some("attempt 3 broke"));
    let p = &q.history(&mut c, "p").unwrap()[0];
    assert_eq!(p.error.as_deref(), Some("panicked: deliberate panic"));
    // The counters move just after the commit the history already shows.
    let counted = |s: timerpool_pg::NodeStats| (s.retried, s.reruns, s.recorded);
    assert!(
        wait_until(LONG, || counted(node.stats()) == (2, 2, 2)),
        "{:?}",
        node.stats()
    );
    node.shutdown();
}

#[test]
fn a_task_claimed_after_its_window_expires_unrun() {
    let (mut c, q) = queue("t_expire");
    let past = SystemTime::now() - Duration::from_secs(5);
    q.schedule(
        &mut c,
        &NewTask::new("k", "h")
            .at(past)
            .expire_after(Duration::from_secs(1)),
    )
    .unwrap();
    let (ran_tx, ran) = mpsc::channel();
    let node = Node::builder(config(), "q")
        .schema("t_expire")
        .workers(1)
        .handler("h", move |_| {
            ran_tx.send(()).unwrap();
            Ok(())
        })
        .start()
        .unwrap();
    assert!(wait_until(LONG, || states(&mut c, &q, "k") == [State::Expired]));
    node.shutdown();
    assert!(ran.try_recv().is_err(), "an expired task never runs");
}

#[test]
fn records_are_removed_after_retention() {
    let (mut c, q) = queue("t_retention");
    let node = Node::builder(config(), "q")
        .schema("t_retention")
        .workers(1)
        .retention(Duration::from_millis(300))
        .handler("h", |_| Ok(()))
        .start()
        .unwrap();
    q.schedule(&mut c, &NewTask::new("k", "h")).unwrap();
    assert!(wait_until(LONG, || states(&mut c, &q, "k") == [State::Completed]));
    assert!(wait_until(LONG, || states(&mut c, &q, "k").is_empty()));
    node.shutdown();
}

#[test]
fn an_unreachable_database_is_a_clear_error_at_start() {
    let mut config = postgres::Config::new();
    config
        .host("127.0.0.1")
        .port(1)
        .user("postgres")
        .dbname("test");
    let err = Node::builder(config, "q")
        .schema("t_unreachable")
        .workers(1)
        .start()
        .unwrap_err();
    assert!(matches!(err, Error::Unreachable(_)), "{err:?}");
    assert!(err.to_string().starts_with("database unreachable"), "{err}");
}

#[test]
fn bad_settings_are_refused() {
    let b = || Node::builder(config(), "q").schema("t_settings");
    for builder in [
        b().workers(0),
        b().prefetch(0),
        b().lease(Duration::from_secs(1))
            .heartbeat(Duration::from_secs(1)),
        b().safety_recheck(Duration::ZERO),
    ] {
        assert!(matches!(builder.start(), Err(Error::InvalidConfig(_))));
    }
}

#[test]
fn install_is_idempotent_and_safe_concurrently() {
    drop(fresh_schema("t_install"));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(|| {
                let mut c = client();
                let q = Queue::new("t_install", "q").unwrap();
                q.install(&mut c).and_then(|()| q.install(&mut c))
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    // One row per migration, each applied once.
    let mut c = client();
    let versions: Vec<i32> = c
        .query("SELECT version FROM t_install.migrations ORDER BY 1", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, (1..=SCHEMA_VERSION).collect::<Vec<_>>());
}

#[test]
fn sessions_bound_their_statements() {
    let (mut c, q) = queue("t_timeout");
    let node = Node::builder(config(), "q")
        .schema("t_timeout")
        .workers(1)
        .statement_timeout(Duration::from_millis(300))
        .safety_recheck(Duration::from_millis(50))
        .handler("h", |_| Ok(()))
        .start()
        .unwrap();
    let app = format!("timerpool node {}", node.id());
    let n: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .unwrap()
        .get(0);
    assert_eq!(n, 2, "a leader and a recorder connection");
    // A lock the claim must wait for: without lock_timeout the leader would
    // wait as long as the lock is held; with it, its claim fails after
    // 300 ms and the leader reconnects.
    let mut locker = client();
    let mut tx = locker.transaction().unwrap();
    tx.batch_execute("LOCK TABLE t_timeout.tasks IN ACCESS EXCLUSIVE MODE")
        .unwrap();
    assert!(wait_until(LONG, || node.stats().reconnects >= 1));
    tx.rollback().unwrap();
    q.schedule(&mut c, &NewTask::new("k", "h")).unwrap();
    assert!(wait_until(LONG, || states(&mut c, &q, "k") == [State::Completed]));
    node.shutdown();
}

#[test]
fn a_backlog_due_at_once_is_recorded_without_a_statement_timing_out() {
    let (mut c, q) = queue("t_backlog");
    // Results are written in batches of up to 2,048 while the node holds
    // thousands of claimed tasks: each batch must be one statement well
    // inside the timeout (no reconnect), whichever plans the server cached
    // for the recorder's earlier batches.
    let node = Node::builder(config(), "q")
        .schema("t_backlog")
        .workers(4)
        .prefetch(512)
        .statement_timeout(Duration::from_secs(2))
        .handler("h", |_| Ok(()))
        .start()
        .unwrap();
    const N: u64 = 10_000;
    let due = SystemTime::now() + Duration::from_secs(1);
    let tasks: Vec<NewTask> = (0..N)
        .map(|i| NewTask::new(format!("k{i}"), "h").at(due))
        .collect();
    for chunk in tasks.chunks(1000) {
        q.schedule_batch(&mut c, chunk).unwrap();
    }
    assert!(
        wait_until(LONG * 3, || node.stats().recorded == N),
        "{:?}",
        node.stats()
    );
    let stats = node.stats();
    assert_eq!((stats.reconnects, stats.fenced, stats.reruns), (0, 0, 0));
    node.shutdown();
}

#[test]
fn a_statement_that_keeps_failing_backs_off_and_recovers() {
    let (mut c, q) = queue("t_dropped");
    // The leader may have claimed before the drop and be waiting: a short
    // re-check makes it meet the missing tables within 50 ms either way.
    let node = Node::builder(config(), "q")
        .schema("t_dropped")
        .workers(1)
        .safety_recheck(Duration::from_millis(50))
        .handler("h", |_| Ok(()))
        .start()
        .unwrap();
    // The tables vanish under the running node: every claim now fails.
    drop_under_a_running_node(&mut c, "t_dropped");
    q.schedule(&mut c, &NewTask::new("k", "h")).unwrap_err();
    assert!(wait_until(LONG, || node.stats().reconnects >= 2));
    // A measured window, not a wait for a race: with backoff (50 ms
    // doubling) a second holds a handful of reconnects, not hundreds.
    let before = node.stats().reconnects;
    std::thread::sleep(Duration::from_secs(1));
    let during = node.stats().reconnects - before;
    assert!(during <= 10, "{during} reconnects in one second");
    q.install(&mut c).unwrap();
    q.schedule(&mut c, &NewTask::new("k", "h")).unwrap();
    assert!(wait_until(LONG, || states(&mut c, &q, "k") == [State::Completed]));
    node.shutdown();
}
