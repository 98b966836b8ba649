//! Tests for a database restarted under load. The test starts a private
//! PostgreSQL server (initdb on its own port and data directory, as the
//! `postgres` OS user when run as root), so crashing and restarting it
//! disturbs no other test or user of the shared server: nodes reconnect
//! with backoff and resume, nothing is lost and nothing runs early.

mod pg_common;

use pg_common::server::restart_under_load;
use std::time::{Duration, SystemTime};
use timerpool_pg::Node;

#[test]
fn nodes_survive_a_database_restart_under_load() {
    let start = |config, runs: pg_common::server::Runs| {
        Node::builder(config, "q")
            .workers(2)
            .lease(Duration::from_secs(2))
            .statement_timeout(Duration::from_secs(2))
            .handler("h", move |job| {
                runs.lock()
                    .unwrap()
                    .push((job.id(), job.attempt(), SystemTime::now()));
                Ok(())
            })
            .start()
            .unwrap()
    };
    restart_under_load(start, Node::stats, Node::shutdown);
}
