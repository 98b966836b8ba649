//! Tests for the manual-drive `Scheduler`: its rules, one test per rule.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
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
    assert_eq!(s.len(), 2);
    assert_eq!(s.next(), Some(3));
    assert_eq!(s.run_due(4), 1);
    assert_eq!(entries(&log), vec!["a@3"]);
    assert!(s.cancel(&"b"));
    assert_eq!(s.run_due(100), 0);
    assert!(!s.cancel(&"b"));
    // The ghost at 10 never runs: the replace moved a's single entry.
    assert_eq!(entries(&log), vec!["a@3"]);
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

/// Panics when dropped.
struct DropBomb(Arc<AtomicUsize>);
impl Drop for DropBomb {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        panic!("closure dropped");
    }
}

#[test]
fn panicking_callback_then_panicking_drop_in_the_rest_does_not_abort() {
    let s = Scheduler::new(8).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    s.schedule(1, 1, || panic!("callback 1 failed")).unwrap();
    for key in [2, 3] {
        let bomb = DropBomb(drops.clone());
        s.schedule(key, 2, move || drop(bomb)).unwrap();
    }
    let quiet = DropCount(drops.clone());
    s.schedule(4, 3, move || drop(quiet)).unwrap();
    // The rest of the snapshot is dropped while the first panic is in hand:
    // two closures panic in their drop, and the process must not abort.
    let err = catch_unwind(AssertUnwindSafe(|| s.run_due(3))).unwrap_err();
    assert_eq!(err.downcast_ref::<&str>(), Some(&"callback 1 failed"));
    assert_eq!(drops.load(Ordering::SeqCst), 3, "each closure dropped once");
    assert!(s.is_empty());
    s.schedule(5, 5, || {}).unwrap();
    assert_eq!(s.run_due(5), 1);
}

/// A key that counts its drops and panics in them if its id is 100 or more.
struct BombKey(u32, Arc<AtomicUsize>);
impl PartialEq for BombKey {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for BombKey {}
impl PartialOrd for BombKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for BombKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}
impl std::hash::Hash for BombKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}
impl Drop for BombKey {
    fn drop(&mut self) {
        self.1.fetch_add(1, Ordering::SeqCst);
        if self.0 >= 100 {
            panic!("key {} dropped", self.0);
        }
    }
}

#[test]
fn keys_that_panic_on_drop_after_a_panicking_callback_do_not_abort() {
    let s = Scheduler::new(8).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let key = |id| BombKey(id, drops.clone());
    s.schedule(key(1), 1, || panic!("callback failed")).unwrap();
    s.schedule(key(101), 2, || {}).unwrap();
    s.schedule(key(102), 3, || {}).unwrap();
    let err = catch_unwind(AssertUnwindSafe(|| s.run_due(3))).unwrap_err();
    assert_eq!(err.downcast_ref::<&str>(), Some(&"callback failed"));
    assert_eq!(drops.load(Ordering::SeqCst), 3, "each key dropped once");
    assert!(s.is_empty());
}

#[test]
fn a_key_that_panics_on_drop_after_its_callback_propagates_once_the_rest_is_dropped() {
    let s = Scheduler::new(8).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(AtomicUsize::new(0));
    let counted = |ran: &Arc<AtomicUsize>| {
        let ran = ran.clone();
        move || {
            ran.fetch_add(1, Ordering::SeqCst);
        }
    };
    s.schedule(BombKey(100, drops.clone()), 1, counted(&ran))
        .unwrap();
    s.schedule(BombKey(101, drops.clone()), 2, counted(&ran))
        .unwrap();
    let err = catch_unwind(AssertUnwindSafe(|| s.run_due(2))).unwrap_err();
    assert_eq!(
        err.downcast_ref::<String>().map(String::as_str),
        Some("key 100 dropped")
    );
    // Task 100 ran and its key's drop panicked: task 101 was dropped unrun.
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
}

/// A key whose `cmp` panics.
#[derive(Debug, PartialEq, Eq, Hash)]
struct PanickyOrd(u32);
impl PartialOrd for PanickyOrd {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for PanickyOrd {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        panic!("cmp of a key")
    }
}

#[test]
fn a_panicking_key_order_runs_the_snapshot_in_due_then_schedule_order() {
    let s = Scheduler::new(16).unwrap();
    let log = Log::default();
    for (key, due) in [(5, 2), (3, 1), (9, 2), (1, 1), (7, 3)] {
        s.schedule(
            PanickyOrd(key),
            due,
            log_task(&log, &format!("{key}@{due}")),
        )
        .unwrap();
    }
    // Nothing is dropped unrun: ties keep the order they were scheduled in.
    assert_eq!(s.run_due(3), 5);
    assert_eq!(entries(&log), vec!["3@1", "1@1", "5@2", "9@2", "7@3"]);
    assert!(s.is_empty());
}

/// A key whose `Ord` is not an order: each pair of ids gets a fixed but
/// arbitrary answer, neither antisymmetric nor transitive.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ChaoticOrd(u32);
impl PartialOrd for ChaoticOrd {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ChaoticOrd {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        use std::cmp::Ordering::{Equal, Greater, Less};
        let pair = (u64::from(self.0) << 32) | u64::from(other.0);
        [Less, Greater, Equal][(pair.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize % 3]
    }
}

#[test]
fn an_inconsistent_key_order_still_runs_every_due_task_in_due_order() {
    let s = Scheduler::new(1024).unwrap();
    let log: Arc<Mutex<Vec<(u32, i64)>>> = Arc::default();
    let n = 600u32;
    for key in 0..n {
        let due = i64::from(key * 7919 % 13);
        let log = log.clone();
        s.schedule(ChaoticOrd(key), due, move || {
            log.lock().unwrap().push((key, due))
        })
        .unwrap();
    }
    assert_eq!(s.run_due(100), n as usize);
    let ran = log.lock().unwrap().clone();
    assert!(
        ran.windows(2).all(|w| w[0].1 <= w[1].1),
        "due order broken: {ran:?}"
    );
    let mut keys: Vec<u32> = ran.iter().map(|&(k, _)| k).collect();
    keys.sort_unstable();
    assert_eq!(keys, (0..n).collect::<Vec<_>>(), "each task ran once");
}

/// Records, when dropped, whether the scheduler's lock was free: another
/// thread tries to take it, and is given a generous bound.
struct LockProbe {
    scheduler: Weak<Scheduler<ProbedKey>>,
    name: &'static str,
    seen: Arc<Mutex<Vec<(&'static str, bool)>>>,
}
impl Drop for LockProbe {
    fn drop(&mut self) {
        let Some(s) = self.scheduler.upgrade() else {
            return;
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            s.len();
            let _ = tx.send(());
        });
        let free = rx.recv_timeout(Duration::from_secs(10)).is_ok();
        self.seen.lock().unwrap().push((self.name, free));
    }
}

/// A key identified by `id` that carries a [`LockProbe`], and whose `Hash`
/// panics if `bad_hash`.
struct ProbedKey {
    id: u32,
    bad_hash: bool,
    _probe: LockProbe,
}
impl PartialEq for ProbedKey {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
impl Eq for ProbedKey {}
impl PartialOrd for ProbedKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ProbedKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.id.cmp(&other.id)
    }
}
impl std::hash::Hash for ProbedKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        if self.bad_hash {
            panic!("hash of key {}", self.id);
        }
        self.id.hash(state);
    }
}

type Seen = Arc<Mutex<Vec<(&'static str, bool)>>>;

/// A scheduler of probed keys, and a maker of probes for it.
fn probed() -> (Arc<Scheduler<ProbedKey>>, Seen) {
    (Arc::new(Scheduler::new(2).unwrap()), Seen::default())
}

fn probe(s: &Arc<Scheduler<ProbedKey>>, seen: &Seen, name: &'static str) -> LockProbe {
    LockProbe {
        scheduler: Arc::downgrade(s),
        name,
        seen: seen.clone(),
    }
}

fn key(s: &Arc<Scheduler<ProbedKey>>, seen: &Seen, id: u32, name: &'static str) -> ProbedKey {
    ProbedKey {
        id,
        bad_hash: false,
        _probe: probe(s, seen, name),
    }
}

fn closure(s: &Arc<Scheduler<ProbedKey>>, seen: &Seen, name: &'static str) -> impl FnOnce() {
    let p = probe(s, seen, name);
    move || drop(p)
}

/// What was dropped since the last call, sorted by name.
fn take(seen: &Seen) -> Vec<(&'static str, bool)> {
    let mut seen = std::mem::take(&mut *seen.lock().unwrap());
    seen.sort_unstable();
    seen
}

#[test]
fn replacing_a_key_drops_the_old_closure_and_the_spare_key_after_unlocking() {
    let (s, seen) = probed();
    s.schedule(
        key(&s, &seen, 1, "first key"),
        5,
        closure(&s, &seen, "first task"),
    )
    .unwrap();
    let r = s.schedule(
        key(&s, &seen, 1, "second key"),
        6,
        closure(&s, &seen, "second task"),
    );
    assert_eq!(r, Ok(Scheduled::Replaced));
    // The scheduler keeps the key it held and lets go of the one passed in.
    assert_eq!(
        take(&seen),
        vec![("first task", true), ("second key", true)]
    );
    assert_eq!(s.run_due(6), 1);
    assert_eq!(
        take(&seen),
        vec![("first key", true), ("second task", true)]
    );
}

#[test]
fn cancelled_refused_and_run_tasks_drop_closure_and_key_after_unlocking() {
    let (s, seen) = probed();
    s.schedule(key(&s, &seen, 1, "key 1"), 5, closure(&s, &seen, "task 1"))
        .unwrap();
    s.schedule(key(&s, &seen, 2, "key 2"), 5, closure(&s, &seen, "task 2"))
        .unwrap();
    let refused = s.schedule(key(&s, &seen, 3, "key 3"), 5, closure(&s, &seen, "task 3"));
    assert_eq!(refused, Err(Error::CapacityReached { capacity: 2 }));
    assert_eq!(take(&seen), vec![("key 3", true), ("task 3", true)]);
    assert!(s.cancel(&key(&s, &seen, 1, "lookup")));
    assert_eq!(
        take(&seen),
        vec![("key 1", true), ("lookup", true), ("task 1", true)]
    );
    assert_eq!(s.run_due(5), 1);
    assert_eq!(take(&seen), vec![("key 2", true), ("task 2", true)]);
}

#[test]
fn a_panicking_key_hash_changes_nothing_and_drops_key_and_closure_after_unlocking() {
    let (s, seen) = probed();
    s.schedule(key(&s, &seen, 1, "key 1"), 5, closure(&s, &seen, "task 1"))
        .unwrap();
    let bad = ProbedKey {
        id: 1,
        bad_hash: true,
        _probe: probe(&s, &seen, "bad key"),
    };
    let err = catch_unwind(AssertUnwindSafe(|| {
        s.schedule(bad, 1, closure(&s, &seen, "bad task"))
    }))
    .unwrap_err();
    assert_eq!(
        err.downcast_ref::<String>().map(String::as_str),
        Some("hash of key 1")
    );
    assert_eq!(take(&seen), vec![("bad key", true), ("bad task", true)]);
    // Nothing changed, and the scheduler works.
    assert_eq!((s.len(), s.next()), (1, Some(5)));
    let bad = ProbedKey {
        id: 1,
        bad_hash: true,
        _probe: probe(&s, &seen, "bad lookup"),
    };
    assert!(catch_unwind(AssertUnwindSafe(|| s.cancel(&bad))).is_err());
    drop(bad);
    assert_eq!(take(&seen), vec![("bad lookup", true)]);
    assert_eq!(s.len(), 1);
    assert_eq!(s.run_due(5), 1);
    assert_eq!(take(&seen), vec![("key 1", true), ("task 1", true)]);
}
