//! Tests for the heap and the scheduler against a plain map oracle over long
//! random operation sequences: the heap's invariants are checked after every
//! step, the scheduler's through what its methods report.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use timerpool::heap::IndexedHeap;
use timerpool::Scheduler;

/// Operations per seed (the issue asks for at least 100,000).
const OPS: usize = 100_000;
/// Fixed seeds, run every time; one random seed is added and printed.
const SEEDS: [u64; 3] = [1, 0xdead_beef, 42];

fn seeds() -> Vec<u64> {
    let mut s = SEEDS.to_vec();
    s.push(rand::random());
    s
}

/// Drive one heap and one map with the same random operations.
fn heap_against_map(seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut heap: IndexedHeap<u32, u64> = IndexedHeap::new();
    // key -> (due, seq, value): the oracle.
    let mut model: BTreeMap<u32, (i64, u64, u64)> = BTreeMap::new();
    let mut next_seq = 0u64;
    for step in 0..OPS {
        let ctx = || format!("seed {seed} step {step}");
        let key = rng.gen_range(0..512u32);
        match rng.gen_range(0..100) {
            0..=44 => {
                let due = rng.gen_range(-1000..1000i64);
                let value = rng.gen();
                let r = heap.insert(key, due, value);
                let old = model.insert(key, (due, next_seq, value));
                match (r, old) {
                    (timerpool::heap::Inserted::New { seq }, None) => {
                        assert_eq!(seq, next_seq, "{}", ctx())
                    }
                    (
                        timerpool::heap::Inserted::Replaced {
                            seq,
                            old_due,
                            old: v,
                            ..
                        },
                        Some((d, _, mv)),
                    ) => {
                        assert_eq!((seq, old_due, v), (next_seq, d, mv), "{}", ctx())
                    }
                    (r, o) => panic!("{}: heap {r:?}, model {o:?}", ctx()),
                }
                next_seq += 1;
            }
            45..=69 => {
                let got = heap.remove(&key).map(|e| (e.due, e.seq, e.value));
                assert_eq!(got, model.remove(&key), "{}", ctx());
            }
            70..=89 => {
                let now = rng.gen_range(-1000..1000i64);
                // Expected: the model's minimum by (due, seq), if due.
                let expect = model
                    .iter()
                    .min_by_key(|(_, (d, s, _))| (*d, *s))
                    .filter(|(_, (d, _, _))| *d <= now)
                    .map(|(k, v)| (*k, *v));
                let got = heap.pop_due(now).map(|e| (e.key, (e.due, e.seq, e.value)));
                assert_eq!(got, expect, "{}", ctx());
                if let Some((k, _)) = got {
                    model.remove(&k);
                }
            }
            _ => {
                let expect = model.values().map(|(d, _, _)| *d).min();
                assert_eq!(heap.peek_due(), expect, "{}", ctx());
                assert_eq!(heap.get(&key), model.get(&key).map(|(d, s, _)| (*d, *s)));
            }
        }
        assert_eq!(heap.len(), model.len(), "{}", ctx());
        if let Err(e) = heap.check_invariants() {
            panic!("{}: {e}", ctx());
        }
    }
}

#[test]
fn heap_matches_map_oracle_over_random_operations() {
    for seed in seeds() {
        heap_against_map(seed);
    }
}

/// Drive one scheduler and one map with the same random operations; each
/// callback logs its key and the due time it was scheduled for.
fn scheduler_against_map(seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let capacity = 300;
    let s: Scheduler<u16> = Scheduler::new(capacity).unwrap();
    let log: Arc<Mutex<Vec<(u16, i64)>>> = Arc::default();
    let mut model: BTreeMap<u16, i64> = BTreeMap::new();
    let mut now = 0i64;
    for step in 0..OPS {
        let ctx = || format!("seed {seed} step {step}");
        let key = rng.gen_range(0..400u16);
        match rng.gen_range(0..100) {
            0..=49 => {
                let due = now + rng.gen_range(-5..200i64);
                let l = log.clone();
                let r = s.schedule(key, due, move || l.lock().unwrap().push((key, due)));
                if model.len() >= capacity && !model.contains_key(&key) {
                    assert!(r.is_err(), "{}", ctx());
                } else {
                    let replaced = model.insert(key, due).is_some();
                    assert_eq!(
                        r,
                        Ok(if replaced {
                            timerpool::Scheduled::Replaced
                        } else {
                            timerpool::Scheduled::Inserted
                        }),
                        "{}",
                        ctx()
                    );
                }
            }
            50..=74 => {
                assert_eq!(s.cancel(&key), model.remove(&key).is_some(), "{}", ctx());
            }
            75..=89 => {
                now += rng.gen_range(0..60i64);
                let mut expect: Vec<(u16, i64)> = model
                    .iter()
                    .filter(|(_, d)| **d <= now)
                    .map(|(k, d)| (*k, *d))
                    .collect();
                expect.sort_by_key(|(k, d)| (*d, *k));
                model.retain(|_, d| *d > now);
                log.lock().unwrap().clear();
                assert_eq!(s.run_due(now), expect.len(), "{}", ctx());
                assert_eq!(*log.lock().unwrap(), expect, "{}", ctx());
            }
            _ => {
                assert_eq!(s.next(), model.values().min().copied(), "{}", ctx());
            }
        }
        assert_eq!(s.len(), model.len(), "{}", ctx());
    }
}

#[test]
fn scheduler_matches_map_oracle_over_random_operations() {
    for seed in seeds() {
        scheduler_against_map(seed);
    }
}
