//! Tests for follow-ups during a graceful shutdown: what a running task
//! that schedules more work gets while the pool drains, by default and
//! with `Builder::drain_follow_ups`.

mod common;
use common::*;

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;
use timerpool::{Error, ManualClock, Outcome, Retry, TaskHandle, TimerPool};

const SEC: Duration = Duration::from_secs(1);

/// Schedule on `pool` a task (key 1) that waits for the returned sender,
/// then schedules a follow-up (key 2, due at once) and reports what that
/// call returned; returns once the task runs.
#[allow(clippy::type_complexity)]
fn task_with_a_follow_up(
    pool: &Arc<TimerPool<u64>>,
) -> (
    mpsc::Sender<()>,
    mpsc::Receiver<Result<TaskHandle<&'static str, u64>, Error>>,
) {
    let (go, wait) = mpsc::channel::<()>();
    let (report, reported) = mpsc::channel();
    let (started_tx, started) = mpsc::channel();
    let weak = Arc::downgrade(pool);
    pool.schedule(1, Duration::ZERO, move || {
        started_tx.send(()).unwrap();
        let _ = wait.recv_timeout(BOUND);
        let pool = weak.upgrade().unwrap();
        let _ = report.send(pool.schedule(2, Duration::ZERO, || "follow-up"));
    })
    .unwrap();
    started.recv_timeout(BOUND).unwrap();
    (go, reported)
}

#[test]
fn by_default_a_follow_up_scheduled_during_a_drain_is_refused() {
    let pool = Arc::new(TimerPool::<u64>::builder().workers(2).build().unwrap());
    let (go, reported) = task_with_a_follow_up(&pool);
    pool.begin_shutdown();
    go.send(()).unwrap();
    let refused = reported.recv_timeout(BOUND).unwrap();
    assert_eq!(refused.unwrap_err(), Error::ShutDown);
    assert!(pool.await_termination(BOUND));
}

#[test]
fn with_drain_follow_ups_a_running_tasks_follow_up_runs_before_the_workers_exit() {
    let pool = TimerPool::<u64>::builder()
        .workers(2)
        .drain_follow_ups(true)
        .build()
        .unwrap();
    let pool = Arc::new(pool);
    let (go, reported) = task_with_a_follow_up(&pool);
    pool.begin_shutdown();
    let outsider = pool.schedule(3, Duration::ZERO, || "outside");
    assert_eq!(outsider.unwrap_err(), Error::ShutDown, "only follow-ups");
    assert!(
        !pool.await_termination(Duration::from_millis(20)),
        "a task runs"
    );
    go.send(()).unwrap();
    let follow_up = reported.recv_timeout(BOUND).unwrap().unwrap();
    assert_eq!(done(follow_up), Outcome::Completed("follow-up"));
    assert!(pool.await_termination(BOUND));
    assert_eq!(
        pool.schedule(4, Duration::ZERO, || "late").unwrap_err(),
        Error::ShutDown
    );
}

#[test]
fn with_drain_follow_ups_a_retry_keeps_retrying_through_a_drain() {
    let clock = ManualClock::new();
    let pool = TimerPool::<&str>::builder()
        .workers(1)
        .clock(clock.clone())
        .quiet_panics(true)
        .drain_follow_ups(true)
        .build()
        .unwrap();
    let mut n = 0;
    let h = pool
        .schedule_retrying("job", Duration::ZERO, Retry::fixed(3, SEC), move || {
            n += 1;
            assert!(n > 1, "first attempt fails");
            Ok::<_, std::convert::Infallible>(n)
        })
        .unwrap();
    pool.settle(BOUND).unwrap();
    assert_eq!(h.attempts(), 1);
    pool.begin_shutdown();
    assert!(
        pool.is_pending(&"job"),
        "the retry survived the drain's start"
    );
    pool.advance(SEC * 2).unwrap();
    let done = h.wait_timeout(BOUND).unwrap();
    assert_eq!(
        (done.outcome, done.attempts),
        (Outcome::Completed(Ok(2)), 2)
    );
    assert!(pool.await_termination(BOUND));
}
