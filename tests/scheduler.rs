//! Tests for the keyed core: the rules of `Scheduler`, one test per rule.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use timerpool::{Error, Scheduled, Scheduler};

type Log = Arc<Mutex<Vec<String>>>;

fn log_task(log: &Log, name: &str) -> impl FnOnce() + Send + 'static {
    let log = log.clone();
    let name = name.to_string();
    move || log.lock().unwrap().push(name)
}

fn entries(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

#[test]
fn worked_example_replaces_instead_of_duplicating() {
    let s = Scheduler::new(8).unwrap();
    let log = Log::default();
    assert_eq!(
        s.schedule("a", 10, log_task(&log, "a@10")),
        Ok(Scheduled::Inserted)
    );
    assert_eq!(
        s.schedule("b", 5, log_task(&log, "b@5")),
        Ok(Scheduled::Inserted)
    );
    assert_eq!(
        s.schedule("a", 3, log_task(&log, "a@3")),
        Ok(Scheduled::Replaced)
    );
    s.check_invariants().unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s.next(), Some(3));
    assert_eq!(s.run_due(4), 1);
    assert_eq!(entries(&log), vec!["a@3"]);
    assert!(s.cancel(&"b"));
    assert_eq!(s.run_due(100), 0);
    assert!(!s.cancel(&"b"));
    // The ghost at 10 never runs: the replace moved a's single entry.
    assert_eq!(entries(&log), vec!["a@3"]);
    s.check_invariants().unwrap();
}

#[test]
fn next_is_empty_when_nothing_is_pending() {
    let s = Scheduler::<u32>::new(1).unwrap();
    assert_eq!(s.next(), None);
    assert!(s.is_empty());
    assert_eq!(s.run_due(i64::MAX), 0);
}

#[test]
fn moving_a_task_later_changes_the_next_deadline() {
    let s = Scheduler::new(8).unwrap();
    let log = Log::default();
    s.schedule("A", 10, log_task(&log, "A")).unwrap();
    s.schedule("B", 20, log_task(&log, "B")).unwrap();
    assert_eq!(s.next(), Some(10));
    s.schedule("A", 30, log_task(&log, "A")).unwrap();
    assert_eq!(s.next(), Some(20));
    s.check_invariants().unwrap();
}

#[test]
fn equal_due_times_run_in_key_order() {
    let s = Scheduler::new(8).unwrap();
    let log = Log::default();
    for key in ["d", "b", "c", "a"] {
        s.schedule(key, 7, log_task(&log, key)).unwrap();
    }
    // Cancel B, add a same-deadline B: identity order, not insertion order.
    assert!(s.cancel(&"b"));
    s.schedule("b", 7, log_task(&log, "b")).unwrap();
    assert_eq!(s.run_due(7), 4);
    assert_eq!(entries(&log), vec!["a", "b", "c", "d"]);
}

#[test]
fn snapshot_runs_in_due_then_key_order() {
    let s = Scheduler::new(16).unwrap();
    let log = Log::default();
    for (key, due) in [(3, 5), (1, 9), (2, 5), (9, 1), (4, 9)] {
        s.schedule(key, due, log_task(&log, &format!("{key}@{due}")))
            .unwrap();
    }
    assert_eq!(s.run_due(9), 5);
    assert_eq!(entries(&log), vec!["9@1", "2@5", "3@5", "1@9", "4@9"]);
}

#[test]
fn run_due_leaves_later_tasks_pending() {
    let s = Scheduler::new(8).unwrap();
    let log = Log::default();
    s.schedule(1, 5, log_task(&log, "1")).unwrap();
    s.schedule(2, 6, log_task(&log, "2")).unwrap();
    assert_eq!(s.run_due(5), 1);
    assert_eq!(s.next(), Some(6));
    assert_eq!(s.len(), 1);
}

#[test]
fn callbacks_run_outside_the_lock() {
    // A callback that reads the scheduler would deadlock if run under the lock.
    let s = Arc::new(Scheduler::new(8).unwrap());
    let seen = Arc::new(Mutex::new(None));
    let (s2, seen2) = (s.clone(), seen.clone());
    s.schedule(1, 1, move || {
        *seen2.lock().unwrap() = Some((s2.len(), s2.next()))
    })
    .unwrap();
    s.schedule(2, 50, || {}).unwrap();
    assert_eq!(s.run_due(1), 1);
    assert_eq!(*seen.lock().unwrap(), Some((1, Some(50))));
}

#[test]
fn callback_may_schedule_and_cancel_without_deadlock() {
    let s = Arc::new(Scheduler::new(8).unwrap());
    let log = Log::default();
    s.schedule("victim", 50, log_task(&log, "victim")).unwrap();
    let (s2, log2) = (s.clone(), log.clone());
    s.schedule("B", 1, move || {
        assert!(s2.cancel(&"victim"));
        s2.schedule("C", 0, log_task(&log2, "C")).unwrap();
        log2.lock().unwrap().push("B".into());
    })
    .unwrap();
    assert_eq!(s.run_due(1), 1);
    assert_eq!(entries(&log), vec!["B"]);
    // C was already due when B scheduled it, yet it waits for the next drive.
    assert_eq!(s.next(), Some(0));
    assert_eq!(s.run_due(1), 1);
    assert_eq!(entries(&log), vec!["B", "C"]);
    assert!(s.is_empty());
}

#[test]
fn self_rescheduling_callback_runs_once_per_drive() {
    let s = Arc::new(Scheduler::new(4).unwrap());
    let runs = Arc::new(AtomicUsize::new(0));
    fn arm(s: &Arc<Scheduler<u8>>, runs: &Arc<AtomicUsize>) {
        let (s2, r2) = (s.clone(), runs.clone());
        s.schedule(0, 0, move || {
            r2.fetch_add(1, Ordering::SeqCst);
            arm(&s2, &r2);
        })
        .unwrap();
    }
    arm(&s, &runs);
    for i in 1..=3 {
        assert_eq!(s.run_due(0), 1);
        assert_eq!(runs.load(Ordering::SeqCst), i);
    }
}

#[test]
fn cancel_of_claimed_task_returns_false_and_cannot_stop_it() {
    let s = Arc::new(Scheduler::new(8).unwrap());
    let log = Log::default();
    let (s2, log2) = (s.clone(), log.clone());
    let cancelled = Arc::new(Mutex::new(None));
    let c2 = cancelled.clone();
    // Both due at 1: "a" runs first and tries to cancel "b", already claimed.
    s.schedule("a", 1, move || {
        *c2.lock().unwrap() = Some(s2.cancel(&"b"));
        log2.lock().unwrap().push("a".into());
    })
    .unwrap();
    s.schedule("b", 1, log_task(&log, "b")).unwrap();
    assert_eq!(s.run_due(1), 2);
    assert_eq!(*cancelled.lock().unwrap(), Some(false));
    assert_eq!(entries(&log), vec!["a", "b"]);
}

#[test]
fn rescheduling_a_claimed_key_creates_new_pending_work() {
    let s = Arc::new(Scheduler::new(8).unwrap());
    let log = Log::default();
    let (s2, log2) = (s.clone(), log.clone());
    s.schedule("k", 1, move || {
        assert_eq!(
            s2.schedule("k", 5, log_task(&log2, "k again")),
            Ok(Scheduled::Inserted)
        );
    })
    .unwrap();
    assert_eq!(s.run_due(1), 1);
    assert_eq!(s.next(), Some(5));
    assert_eq!(s.run_due(5), 1);
    assert_eq!(entries(&log), vec!["k again"]);
}

/// Counts how many times values of it are dropped.
struct DropCount(Arc<AtomicUsize>);
impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn panicking_callback_propagates_and_rest_of_snapshot_is_dropped_once() {
    let s = Scheduler::new(8).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(AtomicUsize::new(0));
    for (key, due) in [(1, 1), (2, 2), (3, 3), (4, 4)] {
        let guard = DropCount(drops.clone());
        let ran = ran.clone();
        s.schedule(key, due, move || {
            let _g = guard;
            ran.fetch_add(1, Ordering::SeqCst);
            if key == 2 {
                panic!("callback 2 failed");
            }
        })
        .unwrap();
    }
    let later = DropCount(drops.clone());
    s.schedule(9, 9, move || drop(later)).unwrap();
    let err = catch_unwind(AssertUnwindSafe(|| s.run_due(4))).unwrap_err();
    assert_eq!(err.downcast_ref::<&str>(), Some(&"callback 2 failed"));
    // 1 and 2 ran; 3 and 4 were claimed and dropped unrun; each dropped once.
    assert_eq!(ran.load(Ordering::SeqCst), 2);
    assert_eq!(drops.load(Ordering::SeqCst), 4);
    // The scheduler stays usable: the pending task at 9 is still there.
    assert_eq!(s.next(), Some(9));
    assert_eq!(s.run_due(9), 1);
    assert_eq!(drops.load(Ordering::SeqCst), 5);
    s.check_invariants().unwrap();
}

#[test]
fn replaced_and_cancelled_callbacks_are_dropped_unrun() {
    let s = Scheduler::new(8).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(AtomicUsize::new(0));
    let make = |drops: &Arc<AtomicUsize>, ran: &Arc<AtomicUsize>| {
        let guard = DropCount(drops.clone());
        let ran = ran.clone();
        move || {
            let _g = guard;
            ran.fetch_add(1, Ordering::SeqCst);
        }
    };
    s.schedule(1, 1, make(&drops, &ran)).unwrap();
    s.schedule(1, 2, make(&drops, &ran)).unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert!(s.cancel(&1));
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    assert_eq!(s.run_due(10), 0);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

#[test]
fn new_key_at_capacity_is_an_error_and_changes_nothing() {
    let s = Scheduler::new(2).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    s.schedule(1, 1, || {}).unwrap();
    s.schedule(2, 2, || {}).unwrap();
    let refused = DropCount(drops.clone());
    assert_eq!(
        s.schedule(3, 0, move || drop(refused)),
        Err(Error::CapacityReached { capacity: 2 })
    );
    assert_eq!(drops.load(Ordering::SeqCst), 1, "refused closure dropped");
    assert_eq!(s.next(), Some(1));
    // Replacing a pending key at capacity is allowed.
    assert_eq!(s.schedule(2, 0, || {}), Ok(Scheduled::Replaced));
    assert_eq!(s.next(), Some(0));
    assert_eq!(s.len(), 2);
}

#[test]
fn zero_capacity_is_an_error() {
    assert_eq!(Scheduler::<u8>::new(0).unwrap_err(), Error::ZeroCapacity);
    assert!(matches!(
        Scheduler::<u8>::new(usize::MAX),
        Err(Error::CapacityTooLarge { .. })
    ));
}

#[test]
fn extreme_due_times_are_accepted() {
    let s = Scheduler::new(4).unwrap();
    let log = Log::default();
    s.schedule("max", i64::MAX, log_task(&log, "max")).unwrap();
    s.schedule("min", i64::MIN, log_task(&log, "min")).unwrap();
    assert_eq!(s.next(), Some(i64::MIN));
    assert_eq!(s.run_due(i64::MIN), 1);
    assert_eq!(s.run_due(i64::MAX - 1), 0);
    assert_eq!(s.run_due(i64::MAX), 1);
    assert_eq!(entries(&log), vec!["min", "max"]);
    assert!(!s.cancel(&"unknown"));
}

#[test]
fn run_with_zero_unit_is_an_error() {
    let s = Scheduler::<u8>::new(1).unwrap();
    assert_eq!(s.run(|| 0, Duration::ZERO), Err(Error::ZeroTimeUnit));
}

#[test]
fn stop_before_run_makes_run_return_at_once() {
    let s = Scheduler::<u8>::new(1).unwrap();
    s.stop();
    s.run(|| 0, Duration::from_secs(3600)).unwrap();
}

#[test]
fn run_loop_wakes_for_a_new_earlier_head() {
    // The driver sleeps toward a task an hour away; an earlier task must wake it.
    let s = Arc::new(Scheduler::<u32>::new(8).unwrap());
    let start = Instant::now();
    let ms = move || start.elapsed().as_millis() as i64;
    s.schedule(1, 3_600_000, || {}).unwrap();
    let driver = {
        let s = s.clone();
        std::thread::spawn(move || s.run(ms, Duration::from_millis(1)))
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let stopper = s.clone();
    s.schedule(2, ms() + 1, move || {
        tx.send(()).unwrap();
        stopper.stop();
    })
    .unwrap();
    rx.recv_timeout(Duration::from_secs(20))
        .expect("earlier task ran while the driver waited for the hour");
    driver.join().unwrap().unwrap();
    assert_eq!(s.len(), 1);
}

#[test]
fn run_loop_with_a_counter_clock_re_reads_it() {
    // A test clock that is a counter: run() must re-read it after each wait.
    let s = Arc::new(Scheduler::<u32>::new(8).unwrap());
    let now = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let (tx, rx) = std::sync::mpsc::channel();
    let stopper = s.clone();
    s.schedule(1, 5, move || {
        tx.send(()).unwrap();
        stopper.stop();
    })
    .unwrap();
    let driver = {
        let (s, now) = (s.clone(), now.clone());
        std::thread::spawn(move || {
            s.run(move || now.load(Ordering::SeqCst), Duration::from_millis(1))
        })
    };
    assert!(rx.try_recv().is_err());
    now.store(5, Ordering::SeqCst);
    rx.recv_timeout(Duration::from_secs(20))
        .expect("ran once the clock read 5");
    driver.join().unwrap().unwrap();
}
