//! A blocking node whose handler "h" records every run, for the tests of
//! the ways a task is scheduled (SQL functions, async clients).

use super::config;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use timerpool_pg::{Node, Queue, State};

/// (task id, start time) of every run of handler "h".
pub type Runs = Arc<Mutex<Vec<(i64, SystemTime)>>>;

/// A node of queue "q" in `schema` whose handler "h" records its runs.
pub fn node(schema: &str) -> (Node, Runs) {
    let runs: Runs = Arc::default();
    let r = runs.clone();
    let node = Node::builder(config(), "q")
        .schema(schema)
        .workers(1)
        // Neither the safety re-check nor a lease ends a wait during a test:
        // only notifications wake the leader early.
        .safety_recheck(Duration::from_secs(600))
        .lease(Duration::from_secs(600))
        .handler("h", move |job| {
            r.lock().unwrap().push((job.id(), SystemTime::now()));
            Ok(())
        })
        .start()
        .unwrap();
    (node, runs)
}

/// When the task `id` started, if it ran.
pub fn started(runs: &Runs, id: i64) -> Option<SystemTime> {
    runs.lock().unwrap().iter().find(|r| r.0 == id).map(|r| r.1)
}

/// The states of `key`'s records, oldest first.
pub fn states(c: &mut postgres::Client, q: &Queue, key: &str) -> Vec<State> {
    q.history(c, key).unwrap().iter().map(|r| r.state).collect()
}
