#![cfg(loom)]
//! Model 10, an awaited handle: the waker's registration races the outcome's
//! delivery, and the wake must never be lost.
//!
//! The main thread polls a task's handle as a future, with a waker that
//! counts its wakes, and after every `Pending` waits for one more wake; the
//! only worker runs the task and delivers its outcome meanwhile. The poll
//! checks for the outcome and registers the waker in one critical section
//! of the outcome slot, and the delivery stores the outcome and takes the
//! waker in another under the same lock: either the poll sees the outcome,
//! or the delivery sees the waker.

use loom_tests::Count;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;
use timerpool::{ManualClock, Outcome};

/// Counts the wakes the pool sends.
struct Counting(Count);

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.0.bump();
    }
}

fn awaited(fault: Option<&'static str>) {
    loom_tests::model("awaited_handle", move || {
        let clock = ManualClock::new();
        let pool = loom_tests::pool::<u32>(1, &clock, fault);
        let counting = Arc::new(Counting(Count::new()));
        let waker = Waker::from(counting.clone());
        let mut cx = Context::from_waker(&waker);
        let mut task = pin!(pool.submit(Duration::ZERO, || 3).unwrap());
        let mut wakes = 0;
        let outcome = loop {
            match task.as_mut().poll(&mut cx) {
                Poll::Ready(outcome) => break outcome,
                Poll::Pending => {
                    wakes += 1;
                    counting.0.wait_for(wakes);
                }
            }
        };
        assert_eq!(outcome, Outcome::Completed(3));
        pool.shutdown();
    });
}

#[test]
fn an_awaited_handle_is_woken_for_its_outcome() {
    awaited(None);
}

/// The poll finds no outcome, lets go of the slot's lock, then registers its
/// waker: the outcome delivered in between wakes nobody, and the main thread
/// waits for a wake that never comes.
#[test]
#[should_panic(expected = "deadlock: thread 0 (main) in loom-tests/tests/loom_waker.rs")]
fn checking_apart_from_registering_is_caught() {
    awaited(Some("waker-check-then-register"));
}
