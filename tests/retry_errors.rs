//! Retries on `Err`: a task returning `Result` runs again after its backoff
//! while it returns an error its policy retries, keeps the typed error of
//! its last attempt in the outcome, stops at once on an error not worth
//! retrying, and stays keyed between attempts. On the manual clock, no
//! sleeps. No test here panics on purpose: a panic hook counts every call,
//! and each test checks that an `Err` never reached it (the pools are not
//! quiet, so a panic would also print).

mod common;
use common::*;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;
use timerpool::{Clock, ManualClock, Outcome, Retry, TimerPool};

const SEC: Duration = Duration::from_secs(1);

/// Calls of the panic hook in this process.
static HOOK_CALLS: AtomicUsize = AtomicUsize::new(0);

/// Count the panic hook's calls (then call the hook it replaced, so a
/// failing test still prints).
fn count_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            HOOK_CALLS.fetch_add(1, SeqCst);
            previous(info);
        }));
    });
}

fn assert_no_panic_reported() {
    assert_eq!(HOOK_CALLS.load(SeqCst), 0, "the panic hook was called");
}

/// What a webhook delivery fails with.
#[derive(Debug, Clone, PartialEq, Eq)]
enum DeliveryError {
    /// The receiver answered with this HTTP status.
    Status(u16),
}

impl DeliveryError {
    /// Worth another attempt: the receiver is overloaded or down.
    fn is_transient(&self) -> bool {
        matches!(self, DeliveryError::Status(500..=599))
    }
}

/// A delivery that answers `statuses` in turn (200 is success, returning
/// the attempt number), recording the time of each attempt.
#[allow(clippy::type_complexity)]
fn delivery(
    clock: &ManualClock,
    statuses: &'static [u16],
) -> (
    Arc<Mutex<Vec<Duration>>>,
    impl FnMut() -> Result<usize, DeliveryError> + Send + 'static,
) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (s, c, t0) = (seen.clone(), clock.clone(), clock.now());
    let mut n = 0;
    let send = move || {
        s.lock().unwrap().push(c.now() - t0);
        let status = statuses[n.min(statuses.len() - 1)];
        n += 1;
        match status {
            200 => Ok(n),
            status => Err(DeliveryError::Status(status)),
        }
    };
    (seen, send)
}

fn manual_str_pool() -> (ManualClock, TimerPool<&'static str>) {
    manual_pool(1)
}

#[test]
fn an_err_is_retried_with_backoff_and_the_last_typed_error_is_the_outcome() {
    count_panics();
    let (clock, pool) = manual_str_pool();
    let (seen, send) = delivery(&clock, &[503]);
    let policy = Retry::exponential(4, SEC, SEC * 60);
    let h = pool
        .schedule_retrying("hook", Duration::ZERO, policy, send)
        .unwrap();
    pool.advance(SEC * 30).unwrap();
    let secs: Vec<u64> = seen.lock().unwrap().iter().map(|d| d.as_secs()).collect();
    assert_eq!(secs, vec![0, 1, 3, 7], "backoff 1, 2, 4 seconds");
    let done = h.wait_timeout(BOUND).unwrap();
    assert_eq!(
        done.outcome,
        Outcome::Completed(Err(DeliveryError::Status(503)))
    );
    assert_eq!((done.attempts, done.last_panic), (4, None));
    assert!(pool.is_empty(), "nothing left pending");
    assert_no_panic_reported();
}

#[test]
fn an_err_then_ok_completes_with_the_value() {
    count_panics();
    let (clock, pool) = manual_str_pool();
    let (seen, send) = delivery(&clock, &[503, 502, 200]);
    let h = pool
        .schedule_retrying("hook", Duration::ZERO, Retry::fixed(5, SEC), send)
        .unwrap();
    pool.advance(SEC * 10).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![Duration::ZERO, SEC, SEC * 2]);
    let done = h.wait_timeout(BOUND).unwrap();
    assert_eq!(
        (done.outcome, done.attempts),
        (Outcome::Completed(Ok(3)), 3)
    );
    assert_no_panic_reported();
}

#[test]
fn an_error_not_worth_retrying_ends_the_task_at_once() {
    count_panics();
    let (clock, pool) = manual_str_pool();
    let policy = Retry::fixed(5, SEC).retry_if(DeliveryError::is_transient);
    let (seen, send) = delivery(&clock, &[404]);
    let at_once = pool
        .schedule_retrying("gone", Duration::ZERO, policy, send)
        .unwrap();
    let (seen_later, send) = delivery(&clock, &[503, 404]);
    let on_second = pool
        .schedule_retrying("later", Duration::ZERO, policy, send)
        .unwrap();
    pool.settle(BOUND).unwrap();
    // Without moving the clock: the permanent error ended it.
    assert!(at_once.is_finished() && !pool.is_pending(&"gone"));
    let done = at_once.wait_timeout(BOUND).unwrap();
    assert_eq!(
        (done.outcome, done.attempts),
        (Outcome::Completed(Err(DeliveryError::Status(404))), 1)
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
    // The transient 503 was retried, the 404 after it was not.
    pool.advance(SEC * 10).unwrap();
    let done = on_second.wait_timeout(BOUND).unwrap();
    assert_eq!(
        (done.outcome, done.attempts),
        (Outcome::Completed(Err(DeliveryError::Status(404))), 2)
    );
    assert_eq!(*seen_later.lock().unwrap(), vec![Duration::ZERO, SEC]);
    assert_no_panic_reported();
}

#[test]
fn cancel_reschedule_and_replace_reach_a_task_waiting_between_attempts() {
    count_panics();
    let (clock, pool) = manual_str_pool();
    let policy = Retry::fixed(5, SEC * 10);
    let (_, send) = delivery(&clock, &[503]);
    let cancelled = pool
        .schedule_retrying("cancel", Duration::ZERO, policy, send)
        .unwrap();
    let (moved_seen, send) = delivery(&clock, &[503]);
    let moved = pool
        .schedule_retrying("move", Duration::ZERO, policy, send)
        .unwrap();
    let (_, send) = delivery(&clock, &[503]);
    let replaced = pool
        .schedule_retrying("replace", Duration::ZERO, policy, send)
        .unwrap();
    pool.settle(BOUND).unwrap();
    let next = pool.now() + SEC * 10;
    for key in ["cancel", "move", "replace"] {
        assert_eq!(pool.due_of(key), Some(next), "{key} waits to retry");
    }
    assert_eq!(
        (cancelled.attempts(), moved.attempts(), replaced.attempts()),
        (1, 1, 1)
    );

    assert!(pool.cancel("cancel"));
    let ended = cancelled.wait_timeout(BOUND).unwrap();
    assert_eq!((ended.outcome, ended.attempts), (Outcome::Cancelled, 1));

    let instead = pool.schedule("replace", SEC, || "instead").unwrap();
    let ended = replaced.wait_timeout(BOUND).unwrap();
    assert_eq!((ended.outcome, ended.attempts), (Outcome::Replaced, 1));

    // The next attempt moved from 10 s to 2 s; the one after it is due
    // 10 s after that attempt.
    assert!(pool.reschedule("move", SEC * 2).unwrap());
    pool.advance(SEC * 5).unwrap();
    assert_eq!(*moved_seen.lock().unwrap(), vec![Duration::ZERO, SEC * 2]);
    assert_eq!(moved.attempts(), 2);
    assert_eq!(
        pool.due_of("move").map(|d| d - pool.now()),
        Some(SEC * 7),
        "due 10 s after the attempt at 2 s"
    );
    assert_eq!(done(instead), Outcome::Completed("instead"));
    assert!(pool.cancel("move"));
    let ended = moved.wait_timeout(BOUND).unwrap();
    assert_eq!((ended.outcome, ended.attempts), (Outcome::Cancelled, 2));
    assert_no_panic_reported();
}
