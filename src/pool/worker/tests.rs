//! Tests of the workers' steps without threads: the test thread plays the
//! workers.

use super::*;
use crate::pool::completion::Observe;
use crate::pool::hold::HOLD_MAX;
use crate::pool::intake::Arrival;
use crate::pool::task::{Joint, SlotOf, Watched};
use crate::sync::Arc;
use crate::Outcome;

/// A pool's engine without threads: the test thread plays the workers.
fn engine() -> Shared<u64> {
    engine_of(1)
}

/// The same, configured for `workers` workers.
fn engine_of(workers: usize) -> Shared<u64> {
    let config = crate::TimerPool::<u64>::builder()
        .workers(workers)
        .validate();
    Shared::new(
        config.expect("a valid configuration"),
        None,
        Observe::default(),
    )
}

#[test]
fn a_deputy_whose_watch_runs_out_starts_the_due_task_itself() {
    let shared = engine_of(3);
    let due = shared.time.now().ns;
    let joint = Arc::new(Joint::new(|| 7, shared.time.instant_of(due), shared.faults));
    let task = Task::Watched(Watched::new(joint.clone()));
    let arrival = Arrival {
        key: TaskKey::Keyed(1),
        due,
        task,
    };
    shared
        .admit(std::iter::once(arrival), |_, _| ())
        .expect("admitted");
    // No leader runs and no message comes: the watch runs out.
    assert!(matches!(
        deputy::receive(
            &shared,
            Some(deputy::Watch {
                due,
                backup: crate::pool::wake::BACKUP
            })
        ),
        Received::Rescue
    ));
    assert_eq!(shared.handoff.deputies(), 0, "the deputy stood down");
    assert_eq!(
        run_due(&shared, 0, None, true),
        None,
        "nothing left to watch"
    );
    assert!(matches!(
        joint.slot().try_take(),
        Some(Outcome::Completed(7))
    ));
    assert_eq!(shared.counters.snapshot(Default::default(), 0).rescued, 1);
    assert_eq!(
        shared
            .counters
            .snapshot(Default::default(), 0)
            .deputy_wakeups,
        0,
        "counted by `work`"
    );
}

/// Admit `n` tasks under keys `0..n`, due now, each counting its run
/// in `ran`.
fn admit_due(shared: &Shared<u64>, n: u64, ran: &Arc<std::sync::atomic::AtomicU64>) {
    let due = shared.time.now().ns;
    let arrivals = (0..n).map(|k| {
        let ran = ran.clone();
        let job = crate::pool::task::once_job(move || {
            ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
        Arrival {
            key: TaskKey::Keyed(k),
            due,
            task: Task::Once(job),
        }
    });
    let arrivals: Vec<_> = arrivals.collect();
    shared
        .admit(arrivals.into_iter(), |_, _| ())
        .expect("admitted");
}

/// The runs of a worker whose latest task began at `at`.
fn after(at: i64) -> Runs {
    let mut runs = Runs::default();
    runs.started(at);
    runs
}

#[test]
fn a_long_run_between_two_starts_from_the_hold_reaches_the_next_look() {
    let shared = engine_of(2);
    let long = crate::pool::wake::SHORT_RUNS_BACKUP.as_nanos() as i64;
    let now = shared.time.now().ns;
    // Two starts from the hold, the first task running long between them,
    // then a short one: the look at the heap that follows records the
    // long run, though the latest task was short.
    let mut runs = after(now - 3 * long);
    runs.started(now - long / 2);
    assert!(start_one(&shared, 0, runs).is_err());
    let st = shared.state.lock();
    assert_eq!(st.long_run, Some(now - long / 2));
    assert_eq!(shared.backup(&st), crate::pool::wake::BACKUP);
}

#[test]
fn a_look_at_the_heap_after_a_long_run_keeps_the_deputies_close() {
    let shared = engine_of(2);
    let ran = Arc::new(std::sync::atomic::AtomicU64::new(0));
    admit_due(&shared, 1, &ran);
    let long = crate::pool::wake::SHORT_RUNS_BACKUP.as_nanos() as i64;
    // The first start follows no run of this worker's: nothing ran long.
    let Ok(first) = start_one(&shared, 0, Runs::default()) else {
        panic!("a due task")
    };
    assert_eq!(shared.state.lock().long_run, None);
    // A look that follows a start just now: a short run.
    assert!(start_one(&shared, 0, after(first.at.ns)).is_err());
    assert_eq!(shared.state.lock().long_run, None);
    let relaxed = shared.backup(&shared.state.lock());
    assert!(relaxed > crate::pool::wake::BACKUP);
    // A look that follows a start longer than the short-runs backup ago:
    // a long run, and the deputies' backup is the close one.
    let long_ago = shared.time.now().ns - 2 * long;
    assert!(start_one(&shared, 0, after(long_ago)).is_err());
    let st = shared.state.lock();
    assert!(st.long_run.is_some());
    assert_eq!(shared.backup(&st), crate::pool::wake::BACKUP);
}

#[test]
fn a_start_from_a_backlog_fills_the_hold_whose_tasks_stay_pending_until_started() {
    let shared = engine_of(2);
    let ran = Arc::new(std::sync::atomic::AtomicU64::new(0));
    admit_due(&shared, 100, &ran);
    let Ok(first) = start_one(&shared, 0, Runs::default()) else {
        panic!("a due task")
    };
    let held = shared.holds[0].lock().waiting.len();
    assert_eq!(held, HOLD_MAX - 1, "a backlog fills the hold");
    assert_eq!(
        shared.state.lock().pending_count(),
        99,
        "held tasks are pending"
    );
    // Held keys 1..=15: cancel, replace, reschedule and due_of find them.
    assert!(shared.cancel(&TaskKey::Keyed(1), None), "cancel finds it");
    assert!(!shared.cancel(&TaskKey::Keyed(1), None), "once");
    let st = shared.state.lock();
    assert!(
        st.pending.get(&TaskKey::Keyed(2)).is_some(),
        "due_of finds it"
    );
    drop(st);
    admit_due_one(&shared, 3);
    assert_eq!(shared.holds[0].lock().waiting.len(), HOLD_MAX - 3);
    assert!(shared.reschedule(&TaskKey::Keyed(4), shared.time.now().ns));
    assert_eq!(shared.holds[0].lock().waiting.len(), HOLD_MAX - 4);
    // The owner starts the next task from its hold, under its lock only.
    let Ok(next) = start_next(&shared, 0, Runs::default()) else {
        panic!("from the hold")
    };
    assert_eq!(next.due, first.due);
    assert!(!shared.cancel(&TaskKey::Keyed(2), None), "started");
    let st = shared.state.lock();
    assert!(shared.any_running(&st, |k| *k == TaskKey::Keyed(2)));
    drop(st);
    // shutdown_now returns what still waits in the hold.
    let returned = shared.stop_now();
    for k in 5..HOLD_MAX as u64 {
        assert!(returned.contains(&k), "held key {k} returned");
    }
    assert!(shared.holds[0].lock().waiting.is_empty());
    assert_eq!(shared.state.lock().pending_count(), 0);
    execute(&shared, 0, first);
    execute(&shared, 0, next);
    assert_eq!(ran.load(std::sync::atomic::Ordering::Relaxed), 2);
}

/// Admit one task due now under `key`.
fn admit_due_one(shared: &Shared<u64>, key: u64) {
    let arrival = Arrival {
        key: TaskKey::Keyed(key),
        due: shared.time.now().ns + 3_600_000_000_000,
        task: Task::Once(crate::pool::task::once_job(|| ())),
    };
    let mut replaced = false;
    shared
        .admit(std::iter::once(arrival), |_, stamp| {
            replaced = stamp.replaced
        })
        .expect("admitted");
    assert!(replaced, "the held task was replaced");
}

#[test]
fn a_worker_with_nothing_else_due_takes_from_another_workers_hold() {
    let shared = engine_of(2);
    let ran = Arc::new(std::sync::atomic::AtomicU64::new(0));
    admit_due(&shared, 4 * 2 + 1, &ran);
    let Ok(first) = start_one(&shared, 0, Runs::default()) else {
        panic!("a due task")
    };
    let held = shared.holds[0].lock().waiting.len();
    assert_eq!(held, 2, "two tasks per worker behind each held one");
    // Worker 1 drains the lane, then takes worker 0's held tasks.
    let mut started = vec![first];
    while let Ok(c) = start_next(&shared, 1, Runs::default()) {
        started.push(c);
    }
    assert!(shared.holds[0].lock().waiting.is_empty(), "taken over");
    assert_eq!(started.len(), 9);
    for c in started {
        execute(&shared, 1, c);
    }
    assert_eq!(ran.load(std::sync::atomic::Ordering::Relaxed), 9);
}

#[test]
fn a_worker_draining_the_heap_shrinks_it_after_each_run_that_left_it_sparse() {
    let shared = engine();
    let ran = Arc::new(std::sync::atomic::AtomicU64::new(0));
    // Due times falling: the first joins the lane, the rest the heap.
    let now = shared.time.now().ns;
    let arrivals: Vec<_> = (0..4_000u64)
        .map(|k| {
            let ran = ran.clone();
            let job = crate::pool::task::once_job(move || {
                ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            });
            Arrival {
                key: TaskKey::Keyed(k),
                due: now - k as i64,
                task: Task::Once(job),
            }
        })
        .collect();
    shared
        .admit(arrivals.into_iter(), |_, _| ())
        .expect("admitted");
    let (mut shrinks, mut freed) = (0, 0);
    while let Ok(c) = start_next(&shared, 0, Runs::default()) {
        let shrink = c.shrink;
        execute(&shared, 0, c);
        if shrink {
            assert!(shared.state.lock().pending.heap_sparse(), "left sparse");
            shrinks += 1;
        }
        // Nothing is sent before the run.
        assert!(shared.handoff.try_recv().is_none());
        // Step 4d, as `run_due` takes it.
        if shrink {
            shrink_heap(&shared);
            assert!(!shared.state.lock().pending.heap_sparse(), "shrunk");
        }
        // A free worker would receive them; this thread plays one.
        while let Some(msg) = shared.handoff.try_recv() {
            match msg {
                Msg::Free(buffers) => {
                    freed += 1;
                    drop(buffers);
                }
                _ => panic!("only what the heap gave up"),
            }
        }
    }
    assert_eq!(ran.load(std::sync::atomic::Ordering::Relaxed), 4_000);
    // Tables of 4,096 shrink at 1,024 (into 2,048) and at 512 (into
    // 1,024, the floor), and the index shrinks (`heap/index.rs`).
    assert!(shrinks >= 2, "each shrink after its start's run: {shrinks}");
    assert_eq!(freed, shrinks, "what each shrink gave up to a free worker");
}
