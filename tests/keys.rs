//! Tests for questions about keys: which are running, what a cancel found,
//! and listing the pending keys while the pool keeps working.

mod common;
use common::*;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;
use timerpool::{CancelResult, Clock, Outcome, Repeat};

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn cancel_result_tells_pending_running_and_absent_apart() {
    let (_clock, pool) = manual_pool::<u64>(1);
    let (blocker, release) = block_a_worker(&pool, 1, std::time::Duration::ZERO);
    let later = pool.schedule(2, HOUR, || ()).unwrap();
    assert!(pool.is_running(&1) && !pool.is_running(&2));
    assert_eq!(pool.cancel_result(&2), CancelResult::Cancelled);
    assert_eq!(pool.cancel_result(&1), CancelResult::Running);
    assert_eq!(pool.cancel_result(&3), CancelResult::Absent);
    assert_eq!(pool.cancel_result(&2), CancelResult::Absent, "only once");
    assert_eq!(done(later), Outcome::Cancelled);
    release.send(()).unwrap();
    pool.settle(BOUND).unwrap();
    assert_eq!(pool.cancel_result(&1), CancelResult::Absent, "it finished");
    assert_eq!(done(blocker), Outcome::Completed(()));
}

#[test]
fn a_key_running_and_pending_at_once_is_cancelled_pending() {
    let (_clock, pool) = manual_pool::<u64>(1);
    let (blocker, release) = block_a_worker(&pool, 1, Duration::ZERO);
    let next = pool.schedule(1, HOUR, || ()).unwrap();
    assert!(pool.is_running(&1) && pool.is_pending(&1));
    assert_eq!(pool.cancel_result(&1), CancelResult::Cancelled);
    assert_eq!(pool.cancel_result(&1), CancelResult::Running);
    assert_eq!(done(next), Outcome::Cancelled);
    release.send(()).unwrap();
    assert_eq!(done(blocker), Outcome::Completed(()));
}

#[test]
fn a_running_periodic_task_is_running_and_its_cancel_stops_it() {
    let (clock, pool) = manual_pool::<u64>(1);
    let (started_tx, started) = std::sync::mpsc::channel();
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let tick = pool
        .schedule_repeating(5, clock.now(), Repeat::fixed_rate(HOUR), move || {
            let _ = started_tx.send(());
            let _ = wait.recv_timeout(BOUND);
        })
        .unwrap();
    started.recv_timeout(BOUND).unwrap();
    assert!(pool.is_running(&5));
    assert!(
        pool.pending_keys().is_empty(),
        "a running periodic task is not pending"
    );
    assert_eq!(pool.cancel_result(&5), CancelResult::Cancelled);
    release.send(()).unwrap();
    let Ok(outcome) = tick.wait_timeout(BOUND) else {
        panic!("no outcome within {BOUND:?}")
    };
    assert_eq!(
        outcome,
        Outcome::Cancelled,
        "the run ended, no other follows"
    );
}

#[test]
fn pending_keys_lists_every_pending_keyed_task_once_across_chunks() {
    let (_clock, pool) = manual_pool::<u64>(2);
    for k in 0..1000 {
        pool.schedule_detached(k, HOUR + Duration::from_secs(k), || ())
            .unwrap();
    }
    pool.submit_detached(HOUR, || ()).unwrap();
    for k in (0..1000).step_by(3) {
        assert!(pool.cancel(&k));
    }
    let keys = pool.pending_keys();
    let set: HashSet<u64> = keys.iter().copied().collect();
    assert_eq!(set.len(), keys.len(), "no repeats");
    let expected: HashSet<u64> = (0..1000).filter(|k| k % 3 != 0).collect();
    assert_eq!(set, expected, "keyless tasks are not listed");
}

#[test]
fn pending_keys_never_misses_a_key_pending_throughout_while_others_come_and_go() {
    let (_clock, pool) = manual_pool::<u64>(2);
    let pool = Arc::new(pool);
    let steady: HashSet<u64> = (0..3000).collect();
    for &k in &steady {
        pool.schedule_detached(k, HOUR, || ()).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let (pool, stop) = (pool.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(SeqCst) {
                let k = 1_000_000 + n % 5000;
                pool.schedule_detached(k, HOUR, || ()).unwrap();
                pool.cancel(&(1_000_000 + (n * 7) % 5000));
                n += 1;
            }
            n
        })
    };
    for _ in 0..50 {
        let keys = pool.pending_keys();
        let set: HashSet<u64> = keys.iter().copied().collect();
        assert_eq!(set.len(), keys.len(), "no repeats");
        assert!(
            steady.is_subset(&set),
            "a key pending throughout was missed"
        );
    }
    stop.store(true, SeqCst);
    assert!(churn.join().unwrap() > 0);
}

/// Tasks already due when scheduled wait in the ready lane beside the heap
/// while every worker is busy; they are pending there too: listed, queried,
/// cancelled, rescheduled and replaced like tasks in the heap.
#[test]
fn tasks_due_on_arrival_behind_a_busy_worker_are_pending_like_any_other() {
    let (_clock, pool) = manual_pool::<u64>(1);
    let (_blocker, release) = block_a_worker(&pool, 10_000, Duration::ZERO);
    for k in 0..600 {
        pool.schedule_detached(k, Duration::ZERO, || ()).unwrap();
    }
    pool.schedule_detached(5_000, HOUR, || ()).unwrap();
    let listed: HashSet<u64> = pool.pending_keys().into_iter().collect();
    let mut expected: HashSet<u64> = (0..600).collect();
    expected.insert(5_000);
    assert_eq!(listed, expected);
    assert!(pool.is_pending(&7) && pool.due_of(&7).is_some());
    assert!(pool.cancel(&7) && !pool.is_pending(&7));
    assert_eq!(pool.reschedule(&8, HOUR), Ok(true));
    let replaced = pool.schedule(9, HOUR, || 9).unwrap();
    assert!(replaced.replaced());
    assert_eq!(pool.len(), 600);
    drop(release);
    pool.settle(Duration::from_secs(10)).unwrap();
    let left: HashSet<u64> = pool.pending_keys().into_iter().collect();
    assert_eq!(left, HashSet::from([8, 9, 5_000]));
}
