//! Tests for embedding the pool: worker start and stop hooks (counted, and
//! a panicking one contained), the stack size, and the counts of workers
//! and of running tasks.

mod common;
use common::*;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;
use timerpool::{Error, Outcome, TimerPool};

#[test]
fn start_and_stop_hooks_run_once_per_worker() {
    let (started, stopped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (s, t) = (started.clone(), stopped.clone());
    let pool = TimerPool::<u64>::builder()
        .workers(3)
        .on_thread_start(move || {
            s.fetch_add(1, SeqCst);
        })
        .on_thread_stop(move || {
            t.fetch_add(1, SeqCst);
        })
        .build()
        .unwrap();
    assert_eq!(pool.workers(), 3);
    assert_eq!(
        started.load(SeqCst),
        3,
        "every start hook ran before build returned"
    );
    assert_eq!(
        done(pool.submit(Duration::ZERO, || 1).unwrap()),
        Outcome::Completed(1)
    );
    pool.shutdown();
    assert_eq!(stopped.load(SeqCst), 3);
    assert_eq!(started.load(SeqCst), 3);
}

#[test]
fn a_panicking_start_hook_fails_the_build_and_a_stop_hook_is_contained() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let refused = TimerPool::<u64>::builder()
        .workers(2)
        .on_thread_start(move || {
            if c.fetch_add(1, SeqCst) == 1 {
                panic!("no affinity for you");
            }
        })
        .build()
        .unwrap_err();
    assert_eq!(
        refused,
        Error::ThreadStart("no affinity for you".to_string())
    );
    let pool = TimerPool::<u64>::builder()
        .workers(2)
        .on_thread_stop(|| panic!("stop hook"))
        .build()
        .unwrap();
    pool.shutdown();
    assert_eq!(pool.stats().contained_panics, 2);
}

#[test]
fn a_pool_with_a_small_stack_runs_tasks() {
    let pool = TimerPool::<u64>::builder()
        .workers(1)
        .stack_size(256 * 1024)
        .build()
        .unwrap();
    assert_eq!(
        done(pool.submit(Duration::ZERO, || 5).unwrap()),
        Outcome::Completed(5)
    );
}

#[test]
fn running_counts_the_tasks_that_run_now() {
    let pool = TimerPool::<u64>::builder().workers(2).build().unwrap();
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Arc::new(Mutex::new(release_rx));
    let handles: Vec<_> = (0..2)
        .map(|k| {
            let (tx, rx) = (started_tx.clone(), release_rx.clone());
            pool.schedule(k, Duration::ZERO, move || {
                tx.send(()).unwrap();
                let _ = rx.lock().unwrap().recv_timeout(BOUND);
            })
            .unwrap()
        })
        .collect();
    started_rx.recv_timeout(BOUND).unwrap();
    started_rx.recv_timeout(BOUND).unwrap();
    assert_eq!(pool.running(), 2);
    drop(release_tx);
    for h in handles {
        assert_eq!(done(h), Outcome::Completed(()));
    }
    // A run is counted as ended just after its outcome is delivered.
    eventually("the runs to be counted as ended", || pool.running() == 0);
}

/// Precision mode's timed waits end at their deadline: on Linux its worker
/// threads' timer slack is 1 ns by the time their start hook runs; a
/// default pool leaves the kernel's slack alone, so it can fold wake-ups.
#[cfg(target_os = "linux")]
#[test]
fn precision_mode_asks_for_the_tightest_timer_slack_and_the_default_does_not() {
    let slack_of = |precise: bool| {
        let slack = Arc::new(Mutex::new(Vec::new()));
        let seen = slack.clone();
        let mut builder = TimerPool::<u64>::builder()
            .workers(2)
            .on_thread_start(move || seen.lock().unwrap().push(own_timer_slack()));
        if precise {
            builder = builder.precision(timerpool::Precision::Spin(Duration::from_micros(100)));
        }
        builder.build().unwrap().shutdown();
        let seen = slack.lock().unwrap().clone();
        seen
    };
    let own = own_timer_slack();
    assert_ne!(own, "1", "the caller's own thread is left alone");
    assert_eq!(slack_of(true), vec!["1".to_string(), "1".to_string()]);
    assert_eq!(slack_of(false), vec![own.clone(), own]);
}

/// The calling thread's timer slack in nanoseconds, as Linux reports it in
/// `/proc/<tid>/timerslack_ns` (`/proc/thread-self` links to
/// `<pid>/task/<tid>`).
#[cfg(target_os = "linux")]
fn own_timer_slack() -> String {
    let link = std::fs::read_link("/proc/thread-self").unwrap();
    let tid = link.file_name().unwrap().to_str().unwrap().to_string();
    let slack = std::fs::read_to_string(format!("/proc/{tid}/timerslack_ns")).unwrap();
    slack.trim().to_string()
}
