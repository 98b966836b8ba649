//! Tests for several nodes of one queue in one process, each with its own
//! connections: every task runs once and never early, a new earlier task
//! preempts sleeping nodes, and replace and cancel race claims safely.

mod pg_common;

use pg_common::*;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use timerpool_pg::{NewTask, Node, State};

const LONG: Duration = Duration::from_secs(30);

/// One handler run: task id, attempt, node tag, wall-clock start.
type Run = (i64, u32, usize, SystemTime);

fn nodes(schema: &str, n: usize, runs: &Arc<Mutex<Vec<Run>>>) -> Vec<Node> {
    (0..n)
        .map(|tag| {
            let runs = runs.clone();
            Node::builder(config(), "q")
                .schema(schema)
                .workers(2)
                .handler("h", move |job| {
                    let now = SystemTime::now();
                    runs.lock()
                        .unwrap()
                        .push((job.id(), job.attempt(), tag, now));
                    Ok(())
                })
                .start()
                .unwrap()
        })
        .collect()
}

#[test]
fn three_nodes_run_every_task_once_and_never_early() {
    let schema = "t_three";
    let mut c = fresh_schema(schema);
    let runs = Arc::new(Mutex::new(Vec::new()));
    let nodes = nodes(schema, 3, &runs);
    let q = nodes[0].queue().clone();
    let tasks: Vec<NewTask> = (0..600)
        .map(|i| NewTask::new(format!("k{i}"), "h").after(Duration::from_millis(i * 5 % 1500)))
        .collect();
    for chunk in tasks.chunks(50) {
        q.schedule_batch(&mut c, chunk).unwrap();
    }
    assert!(wait_until(LONG, || outcome_counts(&mut c, schema, "q")
        .get("completed")
        == Some(&600)));
    assert_eq!(live(&mut c, schema, "q"), 0);
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 600, "each task ran exactly once");
    let ids: HashSet<i64> = runs.iter().map(|r| r.0).collect();
    assert_eq!(ids.len(), 600);
    let due: HashMap<i64, SystemTime> = c
        .query(
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
        .collect();
    for (id, attempt, _, at) in &runs {
        assert_eq!(*attempt, 1);
        assert!(*at >= due[id], "task {id} started before its due time");
    }
    let busy: HashSet<usize> = runs.iter().map(|r| r.2).collect();
    assert!(busy.len() >= 2, "the work was shared: {busy:?}");
    for n in nodes {
        assert_eq!(n.stats().reruns, 0);
        n.shutdown();
    }
}

#[test]
fn an_earlier_task_preempts_sleeping_nodes() {
    let schema = "t_preempt";
    let mut c = fresh_schema(schema);
    let runs = Arc::new(Mutex::new(Vec::new()));
    let nodes: Vec<Node> = (0..2)
        .map(|tag| {
            let runs = runs.clone();
            Node::builder(config(), "q")
                .schema(schema)
                .workers(1)
                .safety_recheck(Duration::from_secs(600))
                .handler("h", move |job| {
                    let at = SystemTime::now();
                    runs.lock()
                        .unwrap()
                        .push((job.id(), job.attempt(), tag, at));
                    Ok(())
                })
                .start()
                .unwrap()
        })
        .collect();
    let q = nodes[0].queue().clone();
    q.schedule(
        &mut c,
        &NewTask::new("far", "h").after(Duration::from_secs(3600)),
    )
    .unwrap();
    for round in 0..5 {
        // Both leaders sleep toward the hour-away task before each round.
        assert!(wait_until(LONG, || all_waiting(&mut c, &nodes)));
        let key = format!("near{round}");
        let s = q
            .schedule(
                &mut c,
                &NewTask::new(key, "h").after(Duration::from_millis(50)),
            )
            .unwrap();
        let t0 = Instant::now();
        assert!(wait_until(LONG, || runs
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.0 == s.id)));
        let late = runs.lock().unwrap().iter().find(|r| r.0 == s.id).unwrap().3;
        let late = late.duration_since(s.due).expect("never early");
        assert!(late < Duration::from_millis(500), "ran {late:?} late");
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
    for n in nodes {
        assert_eq!(n.stats().safety_wakes, 0, "woken by notifications only");
        n.shutdown();
    }
}

/// A schedule whose transaction commits after the queue's earlier task ran
/// still wakes the leader, which had gone back to sleep toward a later task
/// without seeing the uncommitted one.
#[test]
fn a_schedule_committed_after_an_earlier_task_ran_wakes_the_node() {
    let schema = "t_late_commit";
    let mut c = fresh_schema(schema);
    let runs = Arc::new(Mutex::new(Vec::new()));
    let r = runs.clone();
    // Neither the safety re-check nor a lease ends a wait during the test.
    let node = Node::builder(config(), "q")
        .schema(schema)
        .workers(1)
        .safety_recheck(Duration::from_secs(600))
        .lease(Duration::from_secs(600))
        .handler("h", move |job| {
            let at = SystemTime::now();
            r.lock().unwrap().push((job.id(), job.attempt(), 0, at));
            Ok(())
        })
        .start()
        .unwrap();
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
    let mut other = client();
    let mut tx = other.transaction().unwrap();
    let second = q
        .schedule(
            &mut tx,
            &NewTask::new("second", "h").after(Duration::from_secs(3)),
        )
        .unwrap();
    // The statement ran while "first" was the queue's earliest future task.
    let pending = q.history(&mut tx, "first").unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].state, State::Pending, "first still pending");
    // Hold the transaction open until "first" has run and its outcome is
    // recorded, and the leader waits again (toward "far", not "second").
    let ran_first = || {
        let h = q.history(&mut c, "first").unwrap();
        h.len() == 1 && h[0].state == State::Completed
    };
    assert!(wait_until(LONG, ran_first), "first completed");
    assert!(wait_until(LONG, || all_waiting(
        &mut c,
        std::slice::from_ref(&node)
    )));
    assert!(
        SystemTime::now() < second.due,
        "the commit comes before second is due"
    );
    tx.commit().unwrap();
    let started = |id| runs.lock().unwrap().iter().find(|r| r.0 == id).map(|r| r.3);
    assert!(wait_until(LONG, || started(second.id).is_some()));
    let at = started(second.id).unwrap();
    let late = at.duration_since(second.due).expect("never early");
    assert!(late < Duration::from_secs(1), "second ran {late:?} late");
    assert!(started(first.id).is_some());
    assert_eq!(node.stats().safety_wakes, 0, "woken by the notification");
    node.shutdown();
}

#[test]
fn replace_and_cancel_race_claims_across_nodes() {
    let schema = "t_race";
    drop(fresh_schema(schema));
    let runs = Arc::new(Mutex::new(Vec::new()));
    let nodes = nodes(schema, 3, &runs);
    let ran = || runs.lock().unwrap().iter().map(|r| r.0).collect();
    race::replace_and_cancel_race(nodes[0].queue(), schema, ran);
    for n in nodes {
        n.shutdown();
    }
}

#[test]
fn history_tells_a_keys_story_across_nodes() {
    let schema = "t_story";
    let mut c = fresh_schema(schema);
    let runs = Arc::new(Mutex::new(Vec::new()));
    let nodes = nodes(schema, 2, &runs);
    let q = nodes[1].queue().clone();
    let hour = Duration::from_secs(3600);
    q.schedule(&mut c, &NewTask::new("trip", "h").after(hour))
        .unwrap();
    q.schedule(&mut c, &NewTask::new("trip", "h").after(Duration::ZERO))
        .unwrap();
    assert!(wait_until(LONG, || q
        .history(&mut c, "trip")
        .unwrap()
        .iter()
        .map(|r| r.state)
        .eq([State::Replaced, State::Completed])));
    let done = q.history(&mut c, "trip").unwrap().pop().unwrap();
    let (claimed, started, finished) = (
        done.claimed.unwrap(),
        done.started.unwrap(),
        done.finished.unwrap(),
    );
    assert!(done.due <= claimed && claimed <= started && started <= finished);
    assert_eq!(done.attempts, 1);
    assert!(nodes.iter().any(|n| Some(n.id()) == done.owner.as_deref()));
    for n in nodes {
        n.shutdown();
    }
}
