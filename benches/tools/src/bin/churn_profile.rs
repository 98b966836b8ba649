//! One churn run (insert N far timers, reschedule each later, cancel all) of
//! one implementation, for profiling under cachegrind or callgrind:
//!
//! ```sh
//! cargo build --release -p timerpool-bench-tools --bin churn_profile
//! valgrind --tool=cachegrind --cache-sim=yes \
//!     target/release/churn_profile scheduler 1000000
//! ```
//!
//! Implementations: `scheduler`, `pool` (a handle per task), `pool-detached`
//! (`schedule_detached`), `pool-noalloc` (the same with a closure that
//! captures nothing, so no allocation per task), `delayqueue`, `delayqueue+map`,
//! `noop` (the harness alone, to subtract), `heap` (the bare
//! `IndexedHeap`). The second argument is N (default 1,000,000), the third
//! how many phases to run (default 3; 1 and 2 stop after insert and after
//! reschedule, so that the counts of three runs give each phase's share).

#[path = "../../../common/mod.rs"]
mod common;

use common::scramble;
use common::workloads::{
    churn_phases, Churn, ChurnDelayQueue, ChurnDelayQueueMap, ChurnPool, ChurnPoolDetached,
    ChurnScheduler,
};
use std::time::Instant;
use timerpool::heap::IndexedHeap;

/// The bare heap, single-threaded, with a `u64` payload like `DelayQueue`'s.
struct Heap(IndexedHeap<u64, u64>, Instant);

impl Churn for Heap {
    fn insert(&mut self, i: usize, key: u64, due: Instant) {
        self.0
            .insert(key, (due - self.1).as_nanos() as i64, i as u64);
    }
    fn reschedule(&mut self, i: usize, key: u64, due: Instant) {
        self.insert(i, key, due);
    }
    fn cancel(&mut self, _i: usize, key: u64) {
        assert!(self.0.remove(&key).is_some());
    }
}

/// `schedule_detached` with a closure that captures nothing: boxing it
/// allocates nothing, so this is the pool without a per-task allocation
/// (what storing small closures inline would give).
struct PoolNoAlloc(timerpool::TimerPool<u64>);

impl Churn for PoolNoAlloc {
    fn insert(&mut self, _: usize, key: u64, due: Instant) {
        self.0.schedule_detached(key, due, || {}).unwrap();
    }
    fn reschedule(&mut self, i: usize, key: u64, due: Instant) {
        self.insert(i, key, due);
    }
    fn cancel(&mut self, _: usize, key: u64) {
        assert!(self.0.cancel(&key));
    }
}

/// Does nothing: the harness's own cost, to subtract from the others.
struct Noop;

impl Churn for Noop {
    fn insert(&mut self, _: usize, key: u64, due: Instant) {
        std::hint::black_box((key, due));
    }
    fn reschedule(&mut self, _: usize, key: u64, due: Instant) {
        std::hint::black_box((key, due));
    }
    fn cancel(&mut self, _: usize, key: u64) {
        std::hint::black_box(key);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let what = args.get(1).map(String::as_str).unwrap_or("scheduler");
    let n: usize = args
        .get(2)
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    // Phases to run: 1 (insert), 2 (and reschedule) or 3 (and cancel).
    let phases: usize = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(3);
    if what == "burst" {
        // The burst workload instead, for callgrind: n zero-delay tasks.
        use common::pools::{Pool, Timerpool};
        let pool = Timerpool::start();
        let d = common::workloads::burst(&pool, n);
        pool.finish();
        println!(
            "burst n={n}: {:.2} M tasks/s",
            n as f64 / d.as_secs_f64() / 1e6
        );
        return;
    }
    let r = match what {
        "scheduler" => churn_phases(n, phases, ChurnScheduler::new),
        "pool" => churn_phases(n, phases, ChurnPool::new),
        "pool-detached" => churn_phases(n, phases, ChurnPoolDetached::new),
        "pool-noalloc" => churn_phases(n, phases, |n| PoolNoAlloc(ChurnPoolDetached::new(n).0)),
        "delayqueue" => churn_phases(n, phases, ChurnDelayQueue::new),
        "delayqueue+map" => churn_phases(n, phases, ChurnDelayQueueMap::new),
        "heap" => churn_phases(n, phases, |_| Heap(IndexedHeap::new(), Instant::now())),
        "noop" => churn_phases(n, phases, |_| Noop),
        other => panic!("unknown implementation {other}"),
    };
    let _ = scramble(0);
    println!(
        "{what} n={n}: insert {:.1} ns, reschedule {:.1} ns, cancel {:.1} ns \
         (thread CPU: {:.1} / {:.1} / {:.1} ns)",
        r.ns[0], r.ns[1], r.ns[2], r.cpu_ns[0], r.cpu_ns[1], r.cpu_ns[2]
    );
}
