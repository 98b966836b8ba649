//! Helpers shared by the PostgreSQL tests: the server's address, a fresh
//! schema per test, bounded waits on conditions, a private server to
//! restart (`server`), the replace and cancel race (`race`) and a node
//! that records its runs (`runs`).
#![allow(dead_code)] // each test binary uses a different subset

pub mod race;
pub mod runs;
pub mod server;

use std::time::{Duration, Instant};

/// The test server, from `TIMERPOOL_PG_URL`.
pub fn url() -> String {
    std::env::var("TIMERPOOL_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string())
}

/// Connection settings of the test server.
pub fn config() -> postgres::Config {
    url()
        .parse()
        .expect("TIMERPOOL_PG_URL is a connection string")
}

/// A plain client; panics with the address and what to do if the server
/// is unreachable.
pub fn client() -> postgres::Client {
    config().connect(postgres::NoTls).unwrap_or_else(|e| {
        panic!(
            "PostgreSQL at {} is unreachable ({e}): the timerpool-pg tests need a server; \
             start one or set TIMERPOOL_PG_URL (`cargo test --workspace --exclude \
             timerpool-pg` runs the other tests without one)",
            url()
        )
    })
}

/// Drops `schema` if it exists, so the test starts from nothing.
pub fn fresh_schema(schema: &str) -> postgres::Client {
    let mut c = client();
    c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .expect("drop schema");
    c
}

/// Installs `schema` exactly as version-3 code did: the `migrations`
/// table, then migrations 1 to 3, each in its own transaction under the
/// installer lock and recorded as one row. Panics if a statement fails.
pub fn install_version_3(c: &mut postgres::Client, schema: &str) {
    const OLD: [&str; 3] = [
        include_str!("../../src/migrations/0001.sql"),
        include_str!("../../src/migrations/0002.sql"),
        include_str!("../../src/migrations/0003.sql"),
    ];
    c.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {schema}.migrations (
             version  integer PRIMARY KEY,
             breaking boolean NOT NULL,
             applied  timestamptz NOT NULL DEFAULT clock_timestamp()
         );"
    ))
    .expect("bootstrap");
    for (i, sql) in OLD.iter().enumerate() {
        let version = i as i32 + 1;
        let mut tx = c.transaction().unwrap();
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext('timerpool.install'), hashtext($1))",
            &[&schema],
        )
        .unwrap();
        tx.batch_execute(&sql.replace("{s}", schema))
            .unwrap_or_else(|e| panic!("migration {version}: {e}"));
        tx.execute(
            &format!("INSERT INTO {schema}.migrations (version, breaking) VALUES ($1, $2)"),
            &[&version, &(version == 1)],
        )
        .unwrap();
        tx.commit().unwrap();
    }
}

/// Records a `failed` outcome of `key` in `queue` as code before
/// migration 4 did: without the task's payload or attempt bound (the
/// columns are left out, so this works on any version). Returns its id.
pub fn failed_before_version_4(
    c: &mut postgres::Client,
    schema: &str,
    queue: &str,
    key: &str,
) -> i64 {
    c.query_one(
        &format!(
            "INSERT INTO {schema}.outcomes (id, queue, key, handler, outcome, due, created,
                                            claimed, started, finished, attempts, owner, error)
             SELECT nextval('{schema}.task_ids'), $1, $2, 'h', 'failed', now(), now(),
                    now(), now(), now(), 1, 'an-old-node', 'it failed'
             RETURNING id"
        ),
        &[&queue, &key],
    )
    .expect("insert an outcome row")
    .get(0)
}

/// Polls `cond` every 5 ms until it holds or `limit` passes; true if it held.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Rows in `schema.outcomes` of `queue`, by outcome.
pub fn outcome_counts(
    c: &mut postgres::Client,
    schema: &str,
    queue: &str,
) -> std::collections::BTreeMap<String, i64> {
    c.query(
        &format!("SELECT outcome, count(*) FROM {schema}.outcomes WHERE queue = $1 GROUP BY 1"),
        &[&queue],
    )
    .expect("count outcomes")
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

/// Tasks still live (pending or running) in `queue`.
pub fn live(c: &mut postgres::Client, schema: &str, queue: &str) -> i64 {
    c.query_one(
        &format!("SELECT count(*) FROM {schema}.tasks WHERE queue = $1"),
        &[&queue],
    )
    .expect("count live")
    .get(0)
}

/// True once every node's leader session is idle in its wait.
pub fn all_waiting(c: &mut postgres::Client, nodes: &[timerpool_pg::Node]) -> bool {
    nodes.iter().all(|n| {
        let app = format!("timerpool node {}", n.id());
        let waiting: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1
                 AND state = 'idle' AND query LIKE '%min(run_at)%'",
                &[&app],
            )
            .unwrap()
            .get(0);
        waiting == 1
    })
}
