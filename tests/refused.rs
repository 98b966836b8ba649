//! Tests for refused work returned: the `try_` scheduling calls hand the
//! closure back with the error, and the plain calls are unchanged.

mod common;
use common::*;

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;
use timerpool::{Error, Outcome, TimerPool};

/// A closure that counts its runs and its drops.
fn counted(runs: &Arc<AtomicU32>, drops: &Arc<AtomicU32>) -> impl FnOnce() -> u32 + Send + 'static {
    struct OnDrop(Arc<AtomicU32>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }
    let (runs, guard) = (runs.clone(), OnDrop(drops.clone()));
    move || {
        let _guard = guard;
        runs.fetch_add(1, SeqCst) + 1
    }
}

#[test]
fn a_closure_refused_at_capacity_comes_back_unrun_and_can_run_elsewhere() {
    let pool = TimerPool::<u64>::builder()
        .workers(1)
        .capacity(1)
        .build()
        .unwrap();
    let first = pool.schedule(1, Duration::from_secs(60), || 0).unwrap();
    let (runs, drops) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let refused = pool
        .try_schedule(2, Duration::from_secs(60), counted(&runs, &drops))
        .unwrap_err();
    assert_eq!(refused.error(), &Error::CapacityReached { capacity: 1 });
    assert_eq!(
        (runs.load(SeqCst), drops.load(SeqCst)),
        (0, 0),
        "unrun, undropped"
    );
    let (error, job) = refused.into_parts();
    assert_eq!(error, Error::CapacityReached { capacity: 1 });
    assert_eq!(job(), 1, "it runs where the caller re-queues it");
    assert_eq!(drops.load(SeqCst), 1);
    assert_eq!(pool.stats().refused, 1);
    assert!(pool.cancel(&1));
    assert_eq!(done(first), Outcome::Cancelled);
}

#[test]
fn every_try_form_hands_back_its_closure_after_a_shutdown() {
    let pool = TimerPool::<u64>::builder().workers(1).build().unwrap();
    pool.shutdown();
    let (runs, drops) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let back = pool
        .try_submit(Duration::ZERO, counted(&runs, &drops))
        .unwrap_err();
    assert_eq!(back.error(), &Error::ShutDown);
    assert_eq!(back.into_inner()(), 1);
    let f = counted(&runs, &drops);
    let back = pool
        .try_schedule_detached(3, Duration::ZERO, move || {
            f();
        })
        .unwrap_err();
    assert_eq!(back.error(), &Error::ShutDown);
    back.into_inner()();
    assert_eq!((runs.load(SeqCst), drops.load(SeqCst)), (2, 2));
}

#[test]
fn handle_less_closures_of_any_size_come_back_whole_at_capacity() {
    // A closure of up to two words is kept inside the task's entry, a
    // larger one in an allocation of its own: both come back the same.
    let pool = TimerPool::<u64>::builder()
        .workers(1)
        .capacity(1)
        .build()
        .unwrap();
    pool.schedule_detached(1, Duration::from_secs(60), || ())
        .unwrap();
    let sum = Arc::new(AtomicU32::new(0));
    let s = sum.clone();
    let small = pool
        .try_schedule_detached(2, Duration::ZERO, move || {
            s.fetch_add(1, SeqCst);
        })
        .unwrap_err();
    let (s, wide) = (sum.clone(), [10u32; 16]);
    let large = pool
        .try_schedule_detached(3, Duration::ZERO, move || {
            s.fetch_add(wide.iter().sum(), SeqCst);
        })
        .unwrap_err();
    assert_eq!(sum.load(SeqCst), 0, "neither ran");
    // Each comes back whole: it runs once where the caller puts it, and
    // its captures are dropped with it.
    small.into_inner()();
    large.into_inner()();
    assert_eq!(sum.load(SeqCst), 161, "each ran once, whole");
    assert_eq!(Arc::strong_count(&sum), 1, "and was dropped");
}

#[test]
fn a_due_time_out_of_range_hands_the_closure_back() {
    let (_clock, pool) = manual_pool::<u64>(1);
    let back = pool.try_schedule(1, Duration::MAX, || "kept").unwrap_err();
    assert_eq!(back.error(), &Error::TimeOutOfRange);
    assert_eq!(back.into_inner()(), "kept");
}

#[test]
fn the_plain_calls_still_drop_the_closure_and_try_converts_with_question_mark() {
    let pool = TimerPool::<u64>::builder().workers(1).build().unwrap();
    pool.shutdown();
    let (runs, drops) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let e = pool.schedule(1, Duration::ZERO, counted(&runs, &drops));
    assert_eq!(e.unwrap_err(), Error::ShutDown);
    assert_eq!(drops.load(SeqCst), 1, "the plain call drops it");
    let with_question_mark = || -> Result<(), Error> {
        pool.try_schedule(2, Duration::ZERO, || ())?;
        Ok(())
    };
    assert_eq!(with_question_mark(), Err(Error::ShutDown));
}

#[test]
fn a_successful_try_schedule_is_a_schedule() {
    let (clock, pool) = manual_pool::<u64>(1);
    let h = pool.try_schedule(1, Duration::from_secs(1), || 5).unwrap();
    let again = pool.try_schedule(1, Duration::from_secs(1), || 6).unwrap();
    assert!(again.replaced());
    clock.advance(Duration::from_secs(1));
    assert_eq!(done(h), Outcome::Replaced);
    assert_eq!(done(again), Outcome::Completed(6));
}
