//! Tests for awaiting handles: in tokio (current-thread and multi-thread)
//! and in a minimal executor, the waker woken once per outcome, and a
//! dropped future that does not cancel its task.

mod common;
use common::*;

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;
use timerpool::{Outcome, Repeat, Retry, TimerPool};

/// A waker that counts its wakes and unparks the thread that made it.
struct Counting {
    wakes: AtomicUsize,
    thread: std::thread::Thread,
}

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.wakes.fetch_add(1, SeqCst);
        self.thread.unpark();
    }
}

/// The smallest executor: poll on this thread, park until woken, with a
/// bound on the whole wait.
fn block_on<F: Future>(f: F) -> F::Output {
    let counting = Arc::new(Counting {
        wakes: AtomicUsize::new(0),
        thread: std::thread::current(),
    });
    let waker = Waker::from(counting);
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    let start = std::time::Instant::now();
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        assert!(start.elapsed() < BOUND, "no outcome within {BOUND:?}");
        std::thread::park_timeout(BOUND);
    }
}

#[test]
fn a_handle_is_awaited_in_a_minimal_executor() {
    let pool = TimerPool::<u64>::builder().workers(1).build().unwrap();
    let h = pool
        .schedule(1, Duration::from_millis(5), || "later")
        .unwrap();
    assert_eq!(block_on(h), Outcome::Completed("later"));
    let cancelled = pool.schedule(2, Duration::from_secs(60), || ()).unwrap();
    assert!(pool.cancel(&2));
    assert_eq!(block_on(cancelled), Outcome::Cancelled);
}

#[test]
fn a_handle_is_awaited_in_tokio_current_thread() {
    let pool = TimerPool::<u64>::builder().workers(2).build().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let outcome = rt.block_on(async {
        let h = pool
            .schedule(1, Duration::from_millis(2), || 21 * 2)
            .unwrap();
        tokio::time::timeout(BOUND, h)
            .await
            .expect("within the bound")
    });
    assert_eq!(outcome, Outcome::Completed(42));
}

#[test]
fn thousands_of_handles_are_awaited_concurrently_in_tokio() {
    let pool = Arc::new(TimerPool::<u64>::builder().workers(2).build().unwrap());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let total: u64 = rt.block_on(async {
        let mut tasks = Vec::new();
        for k in 0..5_000u64 {
            let pool = pool.clone();
            tasks.push(tokio::spawn(async move {
                let delay = Duration::from_micros(k % 2_000);
                let h = pool.schedule(k, delay, move || k).unwrap();
                match tokio::time::timeout(BOUND, h).await {
                    Ok(Outcome::Completed(v)) => v,
                    other => panic!("task {k}: {other:?}"),
                }
            }));
        }
        let mut sum = 0;
        for t in tasks {
            sum += t.await.unwrap();
        }
        sum
    });
    assert_eq!(total, (0..5_000u64).sum());
}

#[test]
fn the_waker_is_woken_once_per_outcome() {
    let (clock, pool) = manual_pool::<u64>(1);
    let counting = Arc::new(Counting {
        wakes: AtomicUsize::new(0),
        thread: std::thread::current(),
    });
    let waker = Waker::from(counting.clone());
    let mut cx = Context::from_waker(&waker);
    let mut h = pin!(pool.schedule(1, Duration::from_secs(1), || 5).unwrap());
    // Polled twice while pending: the waker is kept once, not woken.
    assert!(h.as_mut().poll(&mut cx).is_pending());
    assert!(h.as_mut().poll(&mut cx).is_pending());
    assert_eq!(counting.wakes.load(SeqCst), 0);
    clock.advance(Duration::from_secs(1));
    eventually("the wake", || counting.wakes.load(SeqCst) > 0);
    assert_eq!(h.as_mut().poll(&mut cx), Poll::Ready(Outcome::Completed(5)));
    assert_eq!(counting.wakes.load(SeqCst), 1);
}

#[test]
fn dropping_an_awaited_handle_does_not_cancel_its_task() {
    let pool = TimerPool::<u64>::builder().workers(1).build().unwrap();
    let (tx, rx) = mpsc::channel();
    let h = pool
        .schedule(1, Duration::from_millis(5), move || tx.send("ran").unwrap())
        .unwrap();
    let waker = Waker::noop();
    let mut cx = Context::from_waker(waker);
    let mut h = Box::pin(h);
    assert!(h.as_mut().poll(&mut cx).is_pending());
    drop(h);
    assert_eq!(rx.recv_timeout(BOUND), Ok("ran"));
}

#[test]
fn a_periodic_handle_is_awaited_for_its_final_outcome() {
    let pool = TimerPool::<u64>::builder().workers(1).build().unwrap();
    let (tx, rx) = mpsc::channel();
    let every = Repeat::fixed_rate(Duration::from_millis(1));
    let tick = pool
        .schedule_repeating(1, Duration::ZERO, every, move || {
            let _ = tx.send(());
        })
        .unwrap();
    rx.recv_timeout(BOUND).unwrap();
    assert!(pool.cancel(&1));
    assert_eq!(block_on(tick), Outcome::Cancelled);
}

#[test]
fn a_retry_handle_is_awaited_for_its_result() {
    let pool = TimerPool::<u64>::builder()
        .workers(1)
        .quiet_panics(true)
        .build()
        .unwrap();
    let tries = Arc::new(AtomicUsize::new(0));
    let t = tries.clone();
    let h = pool
        .schedule_retrying(
            1,
            Duration::ZERO,
            Retry::fixed(3, Duration::from_millis(1)),
            move || {
                if t.fetch_add(1, SeqCst) < 2 {
                    panic!("not yet");
                }
                Ok::<_, std::convert::Infallible>("third time")
            },
        )
        .unwrap();
    let done = block_on(h);
    assert_eq!(done.outcome, Outcome::Completed(Ok("third time")));
    assert_eq!(done.attempts, 3);
    assert_eq!(done.last_panic.as_deref(), Some("not yet"));
}
