//! The async clients (features `sqlx` and `tokio-postgres`) against the
//! real server, with a running blocking `Node`: a schedule in a rolled-back
//! transaction leaves nothing, a committed one runs once; a task committed
//! after the queue's earlier task ran starts on time; reschedule moves the
//! due time in place; every sqlx executor works; bad input is an `Error`.
#![cfg(all(feature = "sqlx", feature = "tokio-postgres"))]

mod pg_common;

use pg_common::runs::{node, started, states};
use pg_common::*;
use std::time::{Duration, SystemTime};
use timerpool_pg::sqlx::{Connection, PgConnection, PgPool};
use timerpool_pg::tokio_postgres::{self, NoTls};
use timerpool_pg::{Due, Error, NewTask, Queue, State, MAX_KEY_BYTES};
use tokio::runtime::Runtime;

const LONG: Duration = Duration::from_secs(20);
const HOUR: Duration = Duration::from_secs(3600);

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// A tokio-postgres client whose connection runs on `rt`.
fn tokio_client(rt: &Runtime) -> tokio_postgres::Client {
    rt.block_on(async {
        let (client, connection) = tokio_postgres::connect(&url(), NoTls).await.unwrap();
        tokio::spawn(connection);
        client
    })
}

/// The queue "q" of `schema`, installed.
fn installed(c: &mut postgres::Client, schema: &str) -> Queue {
    let q = Queue::new(schema, "q").unwrap();
    q.install(c).unwrap();
    q
}

#[test]
fn sqlx_rollback_leaves_nothing_and_commit_fires_once() {
    let schema = "t_async_sqlx_tx";
    let mut c = fresh_schema(schema);
    let (node, runs) = node(schema);
    let q = node.queue().clone();
    let rt = runtime();
    let pool = rt.block_on(PgPool::connect(&url())).unwrap();
    let kept = rt.block_on(async {
        let mut tx = pool.begin().await.unwrap();
        q.sqlx()
            .schedule(&mut *tx, &NewTask::new("gone", "h"))
            .await
            .unwrap();
        tx.rollback().await.unwrap();
        assert!(q.sqlx().history(&pool, "gone").await.unwrap().is_empty());
        let mut tx = pool.begin().await.unwrap();
        let s = q
            .sqlx()
            .schedule(&mut *tx, &NewTask::new("kept", "h").payload(vec![42]))
            .await
            .unwrap();
        assert!(!s.replaced);
        tx.commit().await.unwrap();
        s
    });
    assert!(wait_until(LONG, || states(&mut c, &q, "kept") == [State::Completed]));
    let ran: Vec<i64> = runs.lock().unwrap().iter().map(|r| r.0).collect();
    assert_eq!(
        ran,
        [kept.id],
        "the committed task ran once, the other never"
    );
    assert!(q.history(&mut c, "gone").unwrap().is_empty());
    node.shutdown();
}

#[test]
fn tokio_postgres_rollback_leaves_nothing_and_commit_fires_once() {
    let schema = "t_async_tokio_tx";
    let mut c = fresh_schema(schema);
    let (node, runs) = node(schema);
    let q = node.queue().clone();
    let rt = runtime();
    let mut client = tokio_client(&rt);
    let kept = rt.block_on(async {
        let tx = client.transaction().await.unwrap();
        q.tokio_postgres()
            .schedule(&tx, &NewTask::new("gone", "h"))
            .await
            .unwrap();
        tx.rollback().await.unwrap();
        let gone = q.tokio_postgres().history(&client, "gone").await.unwrap();
        assert!(gone.is_empty());
        let tx = client.transaction().await.unwrap();
        let s = q
            .tokio_postgres()
            .schedule(&tx, &NewTask::new("kept", "h"))
            .await
            .unwrap();
        tx.commit().await.unwrap();
        s
    });
    assert!(wait_until(LONG, || states(&mut c, &q, "kept") == [State::Completed]));
    let ran: Vec<i64> = runs.lock().unwrap().iter().map(|r| r.0).collect();
    assert_eq!(
        ran,
        [kept.id],
        "the committed task ran once, the other never"
    );
    assert!(q.history(&mut c, "gone").unwrap().is_empty());
    node.shutdown();
}

/// The driver under test, with the transaction it holds open.
enum Open<'a> {
    Sqlx(timerpool_pg::sqlx::Transaction<'static, timerpool_pg::sqlx::Postgres>),
    Tokio(tokio_postgres::Transaction<'a>),
}

/// "far" an hour away, "first" due in 1.5 s, "second" due in 3 s scheduled
/// by `open` in a transaction that commits only after "first" ran and the
/// leader went back to sleep toward "far": "second" starts within a second
/// of its due time, woken by the notification of the commit.
fn late_commit_starts_on_time<'a>(
    schema: &str,
    open: impl FnOnce(&Queue) -> (Open<'a>, i64, SystemTime),
    rt: &Runtime,
) {
    let mut c = fresh_schema(schema);
    let (node, runs) = node(schema);
    let q = node.queue().clone();
    q.schedule(&mut c, &NewTask::new("far", "h").after(HOUR))
        .unwrap();
    let nodes = std::slice::from_ref(&node);
    assert!(wait_until(LONG, || all_waiting(&mut c, nodes)));
    let first = q
        .schedule(
            &mut c,
            &NewTask::new("first", "h").after(Duration::from_millis(1500)),
        )
        .unwrap();
    let (tx, second, due) = open(&q);
    assert!(wait_until(LONG, || states(&mut c, &q, "first") == [State::Completed]));
    assert!(wait_until(LONG, || all_waiting(&mut c, nodes)));
    assert!(
        SystemTime::now() < due,
        "the commit comes before second is due"
    );
    match tx {
        Open::Sqlx(tx) => rt.block_on(tx.commit()).unwrap(),
        Open::Tokio(tx) => rt.block_on(tx.commit()).unwrap(),
    }
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
fn sqlx_commit_after_an_earlier_task_ran_starts_on_time() {
    let rt = runtime();
    let pool = rt.block_on(PgPool::connect(&url())).unwrap();
    late_commit_starts_on_time(
        "t_async_sqlx_late",
        |q| {
            rt.block_on(async move {
                let mut tx = pool.begin().await.unwrap();
                let task = NewTask::new("second", "h").after(Duration::from_secs(3));
                let s = q.sqlx().schedule(&mut *tx, &task).await.unwrap();
                (Open::Sqlx(tx), s.id, s.due)
            })
        },
        &rt,
    );
}

#[test]
fn tokio_postgres_commit_after_an_earlier_task_ran_starts_on_time() {
    let rt = runtime();
    let mut client = tokio_client(&rt);
    let client = &mut client;
    late_commit_starts_on_time(
        "t_async_tokio_late",
        |q| {
            rt.block_on(async move {
                let tx = client.transaction().await.unwrap();
                let task = NewTask::new("second", "h").after(Duration::from_secs(3));
                let s = q.tokio_postgres().schedule(&tx, &task).await.unwrap();
                (Open::Tokio(tx), s.id, s.due)
            })
        },
        &rt,
    );
}

#[test]
fn reschedule_moves_the_due_time_in_place_from_both_clients() {
    let schema = "t_async_reschedule";
    let mut c = fresh_schema(schema);
    let q = installed(&mut c, schema);
    let rt = runtime();
    let pool = rt.block_on(PgPool::connect(&url())).unwrap();
    let client = tokio_client(&rt);
    rt.block_on(async {
        let s = q
            .sqlx()
            .schedule(&pool, &NewTask::new("k", "h").after(HOUR))
            .await
            .unwrap();
        let later = s.due + HOUR;
        assert!(q
            .sqlx()
            .reschedule(&pool, "k", Due::At(later))
            .await
            .unwrap());
        assert_eq!(q.sqlx().due_of(&pool, "k").await.unwrap(), Some(later));
        let tp = q.tokio_postgres();
        let sooner = s.due - Duration::from_secs(60);
        assert!(tp.reschedule(&client, "k", Due::At(sooner)).await.unwrap());
        assert_eq!(tp.due_of(&client, "k").await.unwrap(), Some(sooner));
        for records in [
            q.sqlx().history(&pool, "k").await.unwrap(),
            tp.history(&client, "k").await.unwrap(),
        ] {
            assert_eq!(records.len(), 1, "no replaced record: {records:?}");
            assert_eq!((records[0].id, records[0].state), (s.id, State::Pending));
            assert_eq!(records[0].due, sooner);
        }
        // Nothing pending: false, and no task appears.
        assert!(!q
            .sqlx()
            .reschedule(&pool, "none", Due::At(later))
            .await
            .unwrap());
        assert!(!tp
            .reschedule(&client, "none", Due::At(later))
            .await
            .unwrap());
        assert_eq!(tp.due_of(&client, "none").await.unwrap(), None);
        assert!(tp.cancel(&client, "k").await.unwrap());
        assert!(!q.sqlx().cancel(&pool, "k").await.unwrap());
        assert_eq!(q.sqlx().due_of(&pool, "k").await.unwrap(), None);
    });
    let states: Vec<State> = q
        .history(&mut c, "k")
        .unwrap()
        .iter()
        .map(|r| r.state)
        .collect();
    assert_eq!(states, [State::Cancelled]);
}

#[test]
fn every_sqlx_executor_schedules_and_batches_replace_by_key() {
    let schema = "t_async_executors";
    let mut c = fresh_schema(schema);
    let q = installed(&mut c, schema);
    let rt = runtime();
    rt.block_on(async {
        let pool = PgPool::connect(&url()).await.unwrap();
        let mut conn = PgConnection::connect(&url()).await.unwrap();
        let mut pooled = pool.acquire().await.unwrap();
        let task = |k: &str| NewTask::new(k, "h").after(HOUR);
        let sq = q.sqlx();
        assert!(!sq.schedule(&pool, &task("pool")).await.unwrap().replaced);
        assert!(
            !sq.schedule(&mut conn, &task("conn"))
                .await
                .unwrap()
                .replaced
        );
        assert!(
            !sq.schedule(&mut *pooled, &task("pooled"))
                .await
                .unwrap()
                .replaced
        );
        let mut tx = conn.begin().await.unwrap();
        assert!(sq.schedule(&mut *tx, &task("pool")).await.unwrap().replaced);
        tx.commit().await.unwrap();
        // A batch: two replace, one is new; the same through tokio-postgres.
        let batch = [task("pool"), task("conn"), task("new")];
        let mut done = sq.schedule_batch(&pool, &batch).await.unwrap();
        done.sort_by(|a, b| a.key.cmp(&b.key));
        let flags: Vec<(&str, bool)> = done.iter().map(|s| (s.key.as_str(), s.replaced)).collect();
        assert_eq!(flags, [("conn", true), ("new", false), ("pool", true)]);
        let client = {
            let (client, connection) = tokio_postgres::connect(&url(), NoTls).await.unwrap();
            tokio::spawn(connection);
            client
        };
        let batch = [task("pooled"), task("other")];
        let done = q
            .tokio_postgres()
            .schedule_batch(&client, &batch)
            .await
            .unwrap();
        assert_eq!(done.iter().filter(|s| s.replaced).count(), 1);
        assert!(sq.schedule_batch(&pool, &[]).await.unwrap().is_empty());
    });
    assert_eq!(live(&mut c, schema, "q"), 5);
    assert_eq!(
        outcome_counts(&mut c, schema, "q").get("replaced"),
        Some(&4)
    );
}

#[test]
fn bad_input_is_an_error_value_from_both_clients() {
    let schema = "t_async_bad";
    let mut c = fresh_schema(schema);
    let q = installed(&mut c, schema);
    let missing = Queue::new("t_async_bad_missing", "q").unwrap();
    let rt = runtime();
    let pool = rt.block_on(PgPool::connect(&url())).unwrap();
    let client = tokio_client(&rt);
    let long = "k".repeat(MAX_KEY_BYTES + 1);
    rt.block_on(async {
        let (sq, tp) = (q.sqlx(), q.tokio_postgres());
        let too_long = NewTask::new(long.as_str(), "h");
        assert!(matches!(
            sq.schedule(&pool, &too_long).await,
            Err(Error::KeyTooLong { .. })
        ));
        assert!(matches!(
            tp.schedule(&client, &too_long).await,
            Err(Error::KeyTooLong { .. })
        ));
        assert!(matches!(
            sq.cancel(&pool, &long).await,
            Err(Error::KeyTooLong { .. })
        ));
        assert!(matches!(
            tp.due_of(&client, &long).await,
            Err(Error::KeyTooLong { .. })
        ));
        let forever = Due::After(Duration::MAX);
        assert!(matches!(
            sq.reschedule(&pool, "k", forever).await,
            Err(Error::DueOutOfRange)
        ));
        assert!(matches!(
            tp.reschedule(&client, "k", forever).await,
            Err(Error::DueOutOfRange)
        ));
        let zero = NewTask::new("k", "h").max_attempts(0);
        assert!(matches!(
            sq.schedule(&pool, &zero).await,
            Err(Error::InvalidConfig(_))
        ));
        let twice = [NewTask::new("a", "h"), NewTask::new("a", "h")];
        assert!(matches!(
            tp.schedule_batch(&client, &twice).await,
            Err(Error::DuplicateKeyInBatch(k)) if k == "a"
        ));
        let nul = NewTask::new("a\0b", "h");
        assert!(matches!(
            sq.schedule(&pool, &nul).await,
            Err(Error::InvalidName { .. })
        ));
        // A schema that was never installed: the database's error, as a value.
        let e = missing
            .sqlx()
            .schedule(&pool, &NewTask::new("k", "h"))
            .await
            .unwrap_err();
        assert!(matches!(e, Error::Sqlx(_)), "{e:?}");
        let e = missing
            .tokio_postgres()
            .cancel(&client, "k")
            .await
            .unwrap_err();
        assert!(matches!(e, Error::Db(_)), "{e:?}");
        // Both connections still serve.
        assert!(!sq.cancel(&pool, "k").await.unwrap());
        assert!(!tp.cancel(&client, "k").await.unwrap());
    });
    assert_eq!(live(&mut c, schema, "q"), 0, "nothing was scheduled");
}
