//! Heap operations at 1k / 100k / 1M pending entries: insert, replace,
//! cancel, next and claim-due, for timerpool's indexed heap (u64 and String
//! keys) and its thread-safe `Scheduler`, tokio-util's `DelayQueue` (slab
//! keys held by the caller) and a plain `std` `BinaryHeap` (no keyed
//! replace or cancel). Keys are scrambled counters, due times random.
//!
//! Each measurement keeps the size steady: what a timed loop adds is removed
//! untimed afterwards, and the reverse.

mod common;

use common::scramble;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;
use std::time::{Duration, Instant};
use timerpool::heap::IndexedHeap;
use timerpool::Scheduler;

const SIZES: [usize; 3] = [1_000, 100_000, 1_000_000];
/// Due times are drawn from `0..SPAN` (nanoseconds, far in the future for
/// the `DelayQueue`).
const SPAN: u64 = 1_000_000_000_000;

fn due(i: u64) -> i64 {
    (scramble(i ^ 0xD00D) % SPAN) as i64
}

/// One structure under test.
trait Subject {
    /// Supports keyed replace and cancel.
    const KEYED: bool = true;
    /// Supports claiming the earliest entry.
    const CLAIM: bool = true;
    /// Fill with keys `0..n`.
    fn fill(n: usize) -> Self;
    /// Add fresh key `i`.
    fn insert(&mut self, i: u64, due: i64);
    /// Give present key `i` a new due time; false if unsupported.
    fn replace(&mut self, i: u64, due: i64) -> bool;
    /// Remove present key `i`; false if unsupported.
    fn cancel(&mut self, i: u64) -> bool;
    /// The earliest due time.
    fn next(&mut self) -> Option<i64>;
    /// Remove the earliest entry, returning its key; `None` if unsupported.
    fn claim(&mut self) -> Option<u64>;
}

struct HeapU64(IndexedHeap<u64, u64>);
impl Subject for HeapU64 {
    fn fill(n: usize) -> Self {
        let mut h = IndexedHeap::new();
        for i in 0..n as u64 {
            h.insert(scramble(i), due(i), i);
        }
        HeapU64(h)
    }
    fn insert(&mut self, i: u64, due: i64) {
        self.0.insert(scramble(i), due, i);
    }
    fn replace(&mut self, i: u64, due: i64) -> bool {
        self.0.insert(scramble(i), due, i);
        true
    }
    fn cancel(&mut self, i: u64) -> bool {
        black_box(self.0.remove(&scramble(i)));
        true
    }
    fn next(&mut self) -> Option<i64> {
        self.0.peek_due()
    }
    fn claim(&mut self) -> Option<u64> {
        self.0.pop().map(|e| e.value)
    }
}

struct HeapString(IndexedHeap<String, u64>, Vec<String>);
impl HeapString {
    fn key(&mut self, i: u64) -> String {
        while self.1.len() <= i as usize {
            let k = self.1.len() as u64;
            self.1.push(format!("trip-{:016x}", scramble(k)));
        }
        self.1[i as usize].clone()
    }
}
impl Subject for HeapString {
    fn fill(n: usize) -> Self {
        let mut s = HeapString(IndexedHeap::new(), Vec::new());
        for i in 0..n as u64 {
            let k = s.key(i);
            s.0.insert(k, due(i), i);
        }
        s
    }
    fn insert(&mut self, i: u64, due: i64) {
        let k = self.key(i);
        self.0.insert(k, due, i);
    }
    fn replace(&mut self, i: u64, due: i64) -> bool {
        self.insert(i, due);
        true
    }
    fn cancel(&mut self, i: u64) -> bool {
        let k = self.key(i);
        black_box(self.0.remove(&k));
        true
    }
    fn next(&mut self) -> Option<i64> {
        self.0.peek_due()
    }
    fn claim(&mut self) -> Option<u64> {
        self.0.pop().map(|e| e.value)
    }
}

struct Sched(Scheduler<u64>);
impl Subject for Sched {
    const CLAIM: bool = false;
    fn fill(n: usize) -> Self {
        let s = Scheduler::new(u32::MAX as usize).unwrap();
        for i in 0..n as u64 {
            s.schedule(scramble(i), due(i), || {}).unwrap();
        }
        Sched(s)
    }
    fn insert(&mut self, i: u64, due: i64) {
        self.0.schedule(scramble(i), due, || {}).unwrap();
    }
    fn replace(&mut self, i: u64, due: i64) -> bool {
        self.insert(i, due);
        true
    }
    fn cancel(&mut self, i: u64) -> bool {
        black_box(self.0.cancel(&scramble(i)));
        true
    }
    fn next(&mut self) -> Option<i64> {
        self.0.next()
    }
    fn claim(&mut self) -> Option<u64> {
        None
    }
}

struct Dq {
    q: tokio_util::time::DelayQueue<u64>,
    keys: Vec<Option<tokio_util::time::delay_queue::Key>>,
    base: Instant,
    rt: tokio::runtime::Runtime,
}
impl Dq {
    fn at(&self, due: i64) -> tokio::time::Instant {
        (self.base + Duration::from_nanos(due as u64)).into()
    }
}
impl Subject for Dq {
    const CLAIM: bool = false;
    fn fill(n: usize) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let q = {
            let _g = rt.enter();
            tokio_util::time::DelayQueue::new()
        };
        let mut d = Dq {
            q,
            keys: Vec::new(),
            base: Instant::now(),
            rt,
        };
        for i in 0..n as u64 {
            d.insert(i, due(i));
        }
        d
    }
    fn insert(&mut self, i: u64, due: i64) {
        let at = self.at(due);
        let _g = self.rt.enter();
        let k = self.q.insert_at(i, at);
        if self.keys.len() <= i as usize {
            self.keys.resize(i as usize + 1, None);
        }
        self.keys[i as usize] = Some(k);
    }
    fn replace(&mut self, i: u64, due: i64) -> bool {
        let at = self.at(due);
        let _g = self.rt.enter();
        self.q.reset_at(self.keys[i as usize].as_ref().unwrap(), at);
        true
    }
    fn cancel(&mut self, i: u64) -> bool {
        let k = self.keys[i as usize].take().unwrap();
        black_box(self.q.remove(&k));
        true
    }
    fn next(&mut self) -> Option<i64> {
        self.q.peek().map(|_| 0)
    }
    fn claim(&mut self) -> Option<u64> {
        None
    }
}

struct Bh(BinaryHeap<Reverse<(i64, u64)>>);
impl Subject for Bh {
    const KEYED: bool = false;
    fn fill(n: usize) -> Self {
        Bh((0..n as u64).map(|i| Reverse((due(i), i))).collect())
    }
    fn insert(&mut self, i: u64, due: i64) {
        self.0.push(Reverse((due, i)));
    }
    fn replace(&mut self, _: u64, _: i64) -> bool {
        false
    }
    fn cancel(&mut self, _: u64) -> bool {
        false
    }
    fn next(&mut self) -> Option<i64> {
        self.0.peek().map(|r| r.0 .0)
    }
    fn claim(&mut self) -> Option<u64> {
        self.0.pop().map(|r| r.0 .1)
    }
}

fn ops<S: Subject>(c: &mut Criterion, name: &str) {
    for &n in &SIZES {
        let mut s = S::fill(n);
        let mut fresh = n as u64;
        let mut round = 0u64;
        let chunk = (n / 2).max(1) as u64;

        c.benchmark_group("insert")
            .bench_function(BenchmarkId::new(name, n), |b| {
                b.iter_custom(|iters| {
                    let mut t = Duration::ZERO;
                    let mut left = iters;
                    while left > 0 {
                        let k = left.min(chunk);
                        let from = fresh;
                        fresh += k;
                        let t0 = Instant::now();
                        for i in from..from + k {
                            s.insert(i, due(i));
                        }
                        t += t0.elapsed();
                        for i in from..from + k {
                            if !s.cancel(i) {
                                s.claim();
                            }
                        }
                        left -= k;
                    }
                    t
                })
            });
        // Keys present from here on: those the last fills/reinserts left.
        let present = |j: u64, n: usize| scramble(j ^ 0xABCD) % n as u64;
        if S::KEYED {
            c.benchmark_group("replace")
                .bench_function(BenchmarkId::new(name, n), |b| {
                    b.iter_custom(|iters| {
                        round += 1;
                        let t0 = Instant::now();
                        for j in 0..iters {
                            let i = present(j ^ (round << 40), n);
                            s.replace(i, due(i ^ round));
                        }
                        t0.elapsed()
                    })
                });
            c.benchmark_group("cancel")
                .bench_function(BenchmarkId::new(name, n), |b| {
                    b.iter_custom(|iters| {
                        let mut t = Duration::ZERO;
                        let mut left = iters;
                        while left > 0 {
                            let k = left.min(chunk);
                            round += 1;
                            // A run of distinct present keys.
                            let start = present(round, n);
                            let keys: Vec<u64> = (0..k).map(|j| (start + j) % n as u64).collect();
                            let t0 = Instant::now();
                            for &i in &keys {
                                s.cancel(i);
                            }
                            t += t0.elapsed();
                            for &i in &keys {
                                s.insert(i, due(i ^ round));
                            }
                            left -= k;
                        }
                        t
                    })
                });
        }
        c.benchmark_group("next")
            .bench_function(BenchmarkId::new(name, n), |b| {
                b.iter(|| black_box(s.next()))
            });
        if S::CLAIM {
            c.benchmark_group("claim_due")
                .bench_function(BenchmarkId::new(name, n), |b| {
                    b.iter_custom(|iters| {
                        let mut t = Duration::ZERO;
                        let mut left = iters;
                        let mut got = Vec::with_capacity(chunk as usize);
                        while left > 0 {
                            let k = left.min(chunk);
                            round += 1;
                            got.clear();
                            let t0 = Instant::now();
                            for _ in 0..k {
                                got.push(s.claim().unwrap());
                            }
                            t += t0.elapsed();
                            for &i in &got {
                                s.insert(i, due(i ^ round) + SPAN as i64);
                            }
                            left -= k;
                        }
                        t
                    })
                });
        }
    }
}

fn bench(c: &mut Criterion) {
    ops::<HeapU64>(c, "timerpool-heap-u64");
    ops::<HeapString>(c, "timerpool-heap-string");
    ops::<Sched>(c, "timerpool-scheduler-u64");
    ops::<Dq>(c, "delayqueue-u64");
    ops::<Bh>(c, "binaryheap-u64");
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
