//! A lookup by a borrowed key allocates nothing: this binary counts every
//! allocation of the process (`stats_alloc`) around lookups by `&str` on
//! `String`-keyed structures. One test only, so that no other test's
//! thread allocates inside a measured region. The pool's own threads have
//! nothing to do then (nothing is due on its manual clock, and no lookup
//! moves the earliest due time), but one may still be on its way to its
//! first wait, which allocates the first time: so a batch of lookups is
//! measured again, a bounded number of times, until one round counts
//! nothing. Lookups that allocated would count in every round.

mod common;
use common::*;

use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::hint::black_box;
use std::time::Duration;
use timerpool::heap::IndexedHeap;
use timerpool::{CancelResult, Scheduler};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const HOUR: Duration = Duration::from_secs(3600);
const ROUNDS: u32 = 200;

/// Allocations and reallocations made while `f` runs.
fn allocations(f: impl FnOnce()) -> usize {
    let region = Region::new(GLOBAL);
    f();
    let change = region.change();
    change.allocations + change.reallocations
}

/// The fewest allocations counted over up to 50 rounds of `prepare` (not
/// counted) then `batch` (counted), stopping at the first round that
/// counts none.
fn fewest_allocations(mut prepare: impl FnMut(), mut batch: impl FnMut()) -> usize {
    let mut fewest = usize::MAX;
    for _ in 0..50 {
        prepare();
        fewest = fewest.min(allocations(&mut batch));
        if fewest == 0 {
            break;
        }
    }
    fewest
}

#[test]
fn lookups_by_str_allocate_nothing() {
    // The counter counts: the lookup the old signatures forced (a `String`
    // built for every call) shows.
    let s = Scheduler::new(64).unwrap();
    for key in ["a", "b", "c"] {
        s.schedule(key.to_string(), 10, || ()).unwrap();
    }
    let owned = allocations(|| {
        black_box(s.due_of(&"a".to_string()));
    });
    assert!(owned >= 1, "a String built for a lookup was not counted");

    let scheduler = allocations(|| {
        for i in 0..ROUNDS {
            black_box(s.due_of("a"));
            black_box(s.is_pending("z"));
            black_box(s.reschedule("c", 20 + i64::from(i)));
            black_box(s.cancel("z"));
        }
        // A cancel that finds its task drops the closure: no allocation.
        assert!(s.cancel("b"));
    });
    assert_eq!(scheduler, 0, "Scheduler lookups by &str allocated");

    let mut heap = IndexedHeap::new();
    for (due, key) in ["a", "b", "c"].into_iter().enumerate() {
        heap.insert(key.to_string(), due as i64, ());
    }
    let heap_lookups = allocations(|| {
        for i in 0..ROUNDS {
            black_box(heap.get("a"));
            black_box(heap.contains_key("z"));
            black_box(heap.reschedule("c", 100 + i64::from(i)));
        }
        assert!(heap.remove("b").is_some());
    });
    assert_eq!(heap_lookups, 0, "IndexedHeap lookups by &str allocated");

    // The pool: the head ("a") stays the head throughout, so no lookup
    // wakes its leader.
    let (_clock, pool) = manual_pool::<String>(1);
    pool.schedule_detached("a".to_string(), HOUR, || ())
        .unwrap();
    pool.schedule_detached("b".to_string(), 2 * HOUR, || ())
        .unwrap();
    pool.schedule_detached("c".to_string(), 3 * HOUR, || ())
        .unwrap();
    pool.settle(BOUND).unwrap();
    let pool_lookups = fewest_allocations(
        || {
            let again = pool.schedule_detached("b".to_string(), 2 * HOUR, || ());
            again.unwrap();
        },
        || {
            for i in 0..ROUNDS {
                black_box(pool.due_of("a"));
                black_box(pool.is_pending("z"));
                black_box(pool.is_running("a"));
                let later = 4 * HOUR + Duration::from_secs(u64::from(i));
                assert!(pool.reschedule("c", later).unwrap());
                assert!(!pool.cancel("z"));
                assert_eq!(pool.cancel_result("z"), CancelResult::Absent);
            }
            // A cancel that finds its task drops the closure, no more.
            assert!(pool.cancel("b"));
        },
    );
    assert_eq!(pool_lookups, 0, "TimerPool lookups by &str allocated");
    assert_eq!(pool.cancel_result("c"), CancelResult::Cancelled);
    assert_eq!(pool.len(), 1);
}
