//! Lookups by a borrowed form of the key, as `HashMap` takes them: a pool
//! or scheduler keyed by `String` answers `cancel("a")`, `reschedule("a",
//! ..)`, `due_of("a")` and the rest, wherever the task waits (heap, ready
//! lane, held for its busy key), and a keyless task never answers for a
//! key.

mod common;
use common::*;

use std::sync::mpsc;
use std::time::{Duration, Instant};
use timerpool::heap::IndexedHeap;
use timerpool::{CancelResult, Outcome, Scheduler, TimerPool};

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn a_string_keyed_pool_is_asked_by_str() {
    let (clock, pool) = manual_pool::<String>(1);
    let a = pool.schedule("a".to_string(), HOUR, || "a ran").unwrap();
    let b = pool.schedule("b".to_string(), HOUR, || "b ran").unwrap();
    pool.schedule_detached("c".to_string(), HOUR, || ())
        .unwrap();

    assert!(pool.is_pending("a") && !pool.is_pending("z"));
    assert_eq!(pool.due_of("a"), Some(pool.now() + HOUR));
    assert_eq!(pool.due_of("z"), None);

    assert!(pool.reschedule("a", 2 * HOUR).unwrap());
    assert!(!pool.reschedule("z", 2 * HOUR).unwrap());
    assert_eq!(pool.due_of("a"), Some(pool.now() + 2 * HOUR));

    assert!(pool.cancel("b"));
    assert!(!pool.cancel("b"), "only once");
    assert_eq!(done(b), Outcome::Cancelled);
    assert_eq!(pool.cancel_result("c"), CancelResult::Cancelled);
    assert_eq!(pool.cancel_result("c"), CancelResult::Absent);
    assert!(!pool.is_running("a"));

    // A `&String` still works, as with `HashMap`.
    assert!(pool.is_pending(&"a".to_string()));
    clock.advance(2 * HOUR);
    assert_eq!(done(a), Outcome::Completed("a ran"));
}

#[test]
fn a_running_string_key_is_found_by_str() {
    let (_clock, pool) = manual_pool::<String>(1);
    let (started_tx, started) = mpsc::channel();
    let (release, wait) = mpsc::channel::<()>();
    let running = pool
        .schedule("export".to_string(), Duration::ZERO, move || {
            started_tx.send(()).unwrap();
            let _ = wait.recv_timeout(BOUND);
        })
        .unwrap();
    started.recv_timeout(BOUND).unwrap();
    assert!(pool.is_running("export") && !pool.is_running("import"));
    assert_eq!(pool.cancel_result("export"), CancelResult::Running);
    release.send(()).unwrap();
    assert_eq!(done(running), Outcome::Completed(()));
}

#[test]
fn tasks_due_on_arrival_are_found_by_str() {
    // The one worker is busy, so tasks due at once wait in the ready lane.
    let (_clock, pool) = manual_pool::<String>(1);
    let (started_tx, started) = mpsc::channel();
    let (release, wait) = mpsc::channel::<()>();
    let blocker = pool
        .schedule("blocker".to_string(), Duration::ZERO, move || {
            started_tx.send(()).unwrap();
            let _ = wait.recv_timeout(BOUND);
        })
        .unwrap();
    started.recv_timeout(BOUND).unwrap();
    let handles: Vec<_> = (0..8)
        .map(|i| pool.schedule(format!("due-{i}"), Duration::ZERO, move || i))
        .collect::<Result<_, _>>()
        .unwrap();
    let now = pool.now();
    assert_eq!(pool.due_of("due-3"), Some(now));
    assert!(pool.cancel("due-3"));
    assert!(pool.reschedule("due-5", HOUR).unwrap());
    assert_eq!(pool.due_of("due-5"), Some(now + HOUR));
    release.send(()).unwrap();
    assert_eq!(done(blocker), Outcome::Completed(()));
    for (i, h) in handles.into_iter().enumerate() {
        let want = match i {
            3 => Outcome::Cancelled,
            5 => {
                assert!(pool.cancel("due-5"));
                Outcome::Cancelled
            }
            _ => Outcome::Completed(i),
        };
        assert_eq!(done(h), want, "due-{i}");
    }
}

#[test]
fn a_task_held_for_its_busy_key_is_found_by_str() {
    let pool = TimerPool::<String>::builder()
        .workers(2)
        .exclusive_keys(true)
        .build()
        .unwrap();
    let (started_tx, started) = mpsc::channel();
    let (release, wait) = mpsc::channel::<()>();
    let first = pool
        .schedule("k".to_string(), Duration::ZERO, move || {
            started_tx.send(()).unwrap();
            let _ = wait.recv_timeout(BOUND);
        })
        .unwrap();
    started.recv_timeout(BOUND).unwrap();
    // Due at once, but its key is busy: it is held back, still pending.
    let second = pool
        .schedule("k".to_string(), Duration::ZERO, || ())
        .unwrap();
    let deadline = Instant::now() + BOUND;
    while !(pool.next_due().is_none() && pool.len() == 1) {
        assert!(Instant::now() < deadline, "the second task was never held");
        std::thread::yield_now();
    }
    assert!(pool.is_pending("k") && pool.is_running("k"));
    assert!(pool.cancel("k"));
    assert_eq!(done(second), Outcome::Cancelled);
    release.send(()).unwrap();
    assert_eq!(done(first), Outcome::Completed(()));
}

#[test]
fn a_keyless_task_never_answers_for_a_key_with_its_number() {
    // Keyless tasks are numbered from 0; key 0 and keyless task 0 are two
    // tasks, whatever their hashes.
    let (_clock, pool) = manual_pool::<u64>(1);
    let keyless: Vec<_> = (0..4)
        .map(|_| pool.submit(HOUR, || "keyless").unwrap())
        .collect();
    assert!(!pool.is_pending(&0) && pool.due_of(&1).is_none());
    assert!(!pool.cancel(&0) && !pool.reschedule(&2, HOUR).unwrap());
    let keyed = pool.schedule(0, HOUR, || "keyed").unwrap();
    assert!(pool.cancel(&0));
    assert_eq!(done(keyed), Outcome::Cancelled);
    assert_eq!(pool.len(), 4, "every keyless task is still pending");
    drop(pool);
    for h in keyless {
        assert_eq!(done(h), Outcome::Shutdown);
    }
}

#[test]
fn a_string_keyed_scheduler_is_asked_by_str() {
    let s = Scheduler::new(8).unwrap();
    let (tx, ran) = mpsc::channel();
    for (key, due) in [("a", 10), ("b", 20), ("c", 30)] {
        let tx = tx.clone();
        s.schedule(key.to_string(), due, move || tx.send(key).unwrap())
            .unwrap();
    }
    assert!(s.is_pending("a") && !s.is_pending("z"));
    assert_eq!((s.due_of("b"), s.due_of("z")), (Some(20), None));
    assert!(s.reschedule("a", 40) && !s.reschedule("z", 40));
    assert_eq!((s.due_of("a"), s.next()), (Some(40), Some(20)));
    assert!(s.cancel("b") && !s.cancel("b"));
    assert_eq!(s.run_due(35), 1);
    assert_eq!(ran.try_recv(), Ok("c"));
    assert_eq!(s.run_due(40), 1);
    assert_eq!(ran.try_recv(), Ok("a"));
    assert!(s.is_empty());
}

#[test]
fn a_string_keyed_heap_is_asked_by_str() {
    let mut heap = IndexedHeap::new();
    for (key, due) in [("a", 10), ("b", 20), ("c", 30)] {
        heap.insert(key.to_string(), due, key);
    }
    assert!(heap.contains_key("b") && !heap.contains_key("z"));
    assert_eq!(heap.get("c").map(|(due, _)| due), Some(30));
    assert_eq!(heap.reschedule("c", 5), Some(30));
    assert_eq!(heap.remove("a").map(|e| e.value), Some("a"));
    assert_eq!(heap.pop().map(|e| e.value), Some("c"));
    heap.check_invariants().unwrap();
}
