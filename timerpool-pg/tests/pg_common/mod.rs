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
