use super::*;
use std::cell::Cell;
use std::collections::BTreeMap;

#[test]
fn run_due_gives_the_heaps_memory_back_as_it_drains_without_holding_more() {
    let s = Scheduler::new(10_000).unwrap();
    for k in 0..4_000u32 {
        s.schedule(k, i64::from(k), || {}).unwrap();
    }
    let bytes = || s.state.lock().heap.allocated_bytes();
    let mut seen = vec![bytes()];
    for now in 0..4_000i64 {
        assert_eq!(s.run_due(now), 1);
        seen.push(bytes());
    }
    // Tables of 4,096 shrink twice above the floor, in place: nothing
    // is allocated on the way down.
    let rises = seen.windows(2).filter(|w| w[1] > w[0]).count();
    let falls = seen.windows(2).filter(|w| w[1] < w[0]).count();
    assert_eq!(rises, 0, "{seen:?}");
    assert!(falls >= 2, "{seen:?}");
    assert!(seen[seen.len() - 1] * 2 < seen[0], "given back");
}

thread_local! {
    /// Hash calls counted so far on this thread.
    static HASHES: Cell<u64> = const { Cell::new(0) };
    /// The counted call that panics, 1-based; 0 for none.
    static TRIP: Cell<u64> = const { Cell::new(0) };
    /// Whether hash calls are counted: off while the test checks.
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

/// A key whose `Hash` panics at the `TRIP`-th counted call.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key(u32);

impl Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        if ARMED.get() {
            let n = HASHES.get() + 1;
            HASHES.set(n);
            if n == TRIP.get() {
                panic!("hash call {n}");
            }
        }
        self.0.hash(state);
    }
}

/// Schedule, cancel and run a fixed sequence with the `trip`-th hash
/// panicking, checking the heap and a model after every step; returns
/// the hash calls made and how many steps panicked.
fn steps(trip: u64) -> (u64, usize) {
    HASHES.set(0);
    TRIP.set(trip);
    let capacity = 6;
    let s = Scheduler::new(capacity).unwrap();
    let mut model: BTreeMap<u32, i64> = BTreeMap::new();
    let mut panics = 0;
    for i in 0..80u32 {
        let (key, due) = (i * 7 % 9, i64::from(i * 5 % 11));
        ARMED.set(true);
        let r = catch_unwind(AssertUnwindSafe(|| match i % 4 {
            0 | 1 => s.schedule(Key(key), due, || {}).is_ok(),
            2 => s.cancel(&Key(key)),
            _ => s.run_due(due) > 0,
        }));
        ARMED.set(false);
        match (i % 4, r) {
            // A panicking step changed nothing.
            (_, Err(_)) => panics += 1,
            (0 | 1, Ok(true)) => {
                model.insert(key, due);
            }
            (0 | 1, Ok(false)) => {
                assert!(model.len() == capacity && !model.contains_key(&key));
            }
            (2, Ok(removed)) => assert_eq!(removed, model.remove(&key).is_some()),
            (_, Ok(_)) => model.retain(|_, d| *d > due),
        }
        if let Err(e) = s.check_invariants() {
            panic!("trip {trip} step {i}: {e}");
        }
        assert_eq!(s.len(), model.len(), "trip {trip} step {i}");
        assert_eq!(
            s.next(),
            model.values().min().copied(),
            "trip {trip} step {i}"
        );
    }
    (HASHES.get(), panics)
}

#[test]
fn a_key_hash_panicking_at_any_call_changes_nothing() {
    let (calls, panics) = steps(0);
    assert_eq!(panics, 0);
    assert!(calls > 40, "{calls} hash calls");
    for trip in 1..=calls {
        assert_eq!(steps(trip).1, 1, "trip {trip}");
    }
}
