//! Tests of the pending tasks: heap, lane and holds against a key map.

use super::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;

fn task() -> Task {
    Task::Once(crate::pool::task::once_job(|| ()))
}

/// The model: key -> (due, stamp), and which keys wait in which hold.
#[derive(Default)]
struct Model {
    tasks: HashMap<u64, (i64, u64)>,
    held: HashMap<u64, usize>,
}

impl std::ops::Deref for Model {
    type Target = HashMap<u64, (i64, u64)>;
    fn deref(&self) -> &Self::Target {
        &self.tasks
    }
}

impl std::ops::DerefMut for Model {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.tasks
    }
}

impl Model {
    fn new() -> Self {
        Model::default()
    }

    /// Remove `k` wherever it is (a hold included).
    fn remove(&mut self, k: &u64) -> Option<(i64, u64)> {
        self.held.remove(k);
        self.tasks.remove(k)
    }

    /// Put `k` at (due, stamp), out of any hold.
    fn insert(&mut self, k: u64, s: (i64, u64)) {
        self.held.remove(&k);
        self.tasks.insert(k, s);
    }
}

/// With two workers' holds.
fn pending() -> Pending<u64> {
    Pending::new((0..2).map(|_| Hold::new()).collect(), Faults::default())
}

fn earliest_due(model: &Model, now: i64) -> Option<(u64, (i64, u64))> {
    let free = model
        .tasks
        .iter()
        .filter(|(k, _)| !model.held.contains_key(k));
    let due = free.filter(|(_, &(d, _))| d <= now);
    due.min_by_key(|(_, &stamp)| stamp).map(|(&k, &s)| (k, s))
}

fn stamp_of(r: &Inserted<TaskKey<u64>, Task>) -> u64 {
    match r {
        Inserted::New { seq } | Inserted::Replaced { seq, .. } => *seq,
    }
}

/// One random operation on both; they must agree. Returns how many
/// tasks went into a hold.
fn step(p: &mut Pending<u64>, model: &mut Model, rng: &mut SmallRng, now: &mut i64) -> usize {
    let mut filled = 0;
    let k = rng.gen_range(0..64u64);
    let key = TaskKey::Keyed(k);
    let due = *now + rng.gen_range(-20..20);
    match rng.gen_range(0..12) {
        0..=2 => {
            *now += rng.gen_range(0..3);
            let limit = 48;
            let was = model.contains_key(&k);
            // Intake may pass a reading ahead of the clock starts use
            // (a task due within `LANE_AHEAD` of the latest reading),
            // so the lane can hold a task not yet due.
            let intake_now = *now + rng.gen_range(0..6);
            match p.try_insert(key, due, task(), limit, intake_now) {
                Ok(r) => {
                    assert_eq!(matches!(r, Inserted::Replaced { .. }), was);
                    model.insert(k, (due, stamp_of(&r)));
                }
                Err(_) => assert!(!was && model.len() >= limit),
            }
        }
        3 => {
            let r = p.insert(key, due, task());
            assert_eq!(
                matches!(r, Inserted::Replaced { .. }),
                model.contains_key(&k)
            );
            model.insert(k, (due, stamp_of(&r)));
        }
        4 => assert_eq!(p.remove(&key).map(|e| e.seq), model.remove(&k).map(|s| s.1)),
        5 => {
            let seq = model.get(&k).map_or(0, |s| s.1);
            let got = p.remove_seq(&key, seq).map(|e| e.seq);
            assert_eq!(got, model.remove(&k).filter(|s| s.1 == seq).map(|s| s.1));
        }
        6 => {
            let old = p.reschedule(&key, due);
            assert_eq!(old, model.get(&k).map(|s| s.0));
            if let Some(s) = model.get(&k).copied() {
                model.insert(k, (due, s.1));
            }
        }
        7 => {
            let want = earliest_due(model, *now);
            let got = p.pop_due(*now).map(|e| (e.key, (e.due, e.seq)));
            assert_eq!(got, want.map(|(k, s)| (TaskKey::Keyed(k), s)));
            if let Some((k, _)) = want {
                model.remove(&k);
            }
        }
        8 => assert_eq!(p.get(&key), model.get(&k).copied()),
        9 => filled = fill_a_hold(p, model, rng.gen_range(0..2), *now),
        10 => start_from_a_hold(p, model, rng.gen_range(0..2)),
        _ => take_the_earliest(p, model, rng.gen_range(0..2), *now),
    }
    assert_eq!(p.len(), model.len());
    let free = model
        .tasks
        .iter()
        .filter(|(k, _)| !model.held.contains_key(k));
    let head = free.map(|(_, s)| *s).min().map(|s| s.0);
    assert_eq!(p.peek_due(), head);
    p.check_invariants().unwrap();
    filled
}

/// Fill worker `w`'s hold (only an empty one is filled): the earliest due
/// tasks not held go in, in order. Returns how many went in.
fn fill_a_hold(p: &mut Pending<u64>, model: &mut Model, w: usize, now: i64) -> usize {
    // Fill a hold (only an empty one is filled): the earliest
    // due tasks not held go in, in order.
    if !p.holds[w].lock().waiting.is_empty() {
        return 0;
    }
    let (n, _) = p.fill_hold(now, w, 1);
    let moved: Vec<_> = p.holds[w]
        .lock()
        .waiting
        .iter()
        .map(|(_, e)| e.seq)
        .collect();
    assert_eq!(moved.len(), n);
    for seq in moved {
        let want = earliest_due(model, now).map(|(k, s)| (k, s.1));
        let (k, want) = want.expect("a due task went into the hold");
        assert_eq!(seq, want, "the earliest due went in first");
        model.held.insert(k, w);
    }
    n
}

/// Worker `w` starts the first task of its hold.
fn start_from_a_hold(p: &mut Pending<u64>, model: &mut Model, w: usize) {
    // A worker starts the first task of its hold.
    let got = p.holds[w].lock().waiting.pop_front();
    if let Some((_, e)) = got {
        let TaskKey::Keyed(k) = e.key else { panic!() };
        assert_eq!(model.held.get(&k), Some(&w));
        assert_eq!(model.remove(&k), Some((e.due, e.seq)));
    }
}

/// Worker `w`, its hold empty, takes the earliest due task: the heap's or
/// lane's, or the front of the other's hold (and then half of that hold).
fn take_the_earliest(p: &mut Pending<u64>, model: &mut Model, w: usize, now: i64) {
    // A worker whose hold is empty takes the earliest due task:
    // the heap's or lane's, or the front of the other's hold (and
    // then half of that hold).
    if !p.holds[w].lock().waiting.is_empty() {
        return;
    }
    let other = |k: &u64| model.held.get(k) == Some(&(1 - w));
    let front = model.tasks.iter().filter(|(k, _)| other(k));
    let front = front.min_by_key(|(_, &s)| s).map(|(&k, &s)| (k, s));
    let want = match (front, earliest_due(model, now)) {
        (Some(f), Some(h)) => Some(if f.1 < h.1 { f } else { h }),
        (f, h) => f.or(h),
    };
    let got = p.next_due(now, w).map(|e| (e.key, (e.due, e.seq)));
    assert_eq!(got, want.map(|(k, s)| (TaskKey::Keyed(k), s)));
    if let Some((k, _)) = want {
        model.remove(&k);
    }
    let taken: Vec<u64> = (p.holds[w].lock().waiting.iter())
        .map(|(_, e)| match e.key {
            TaskKey::Keyed(k) => k,
            TaskKey::Anon(_) => panic!("keyed only"),
        })
        .collect();
    for k in taken {
        assert_eq!(model.held.insert(k, w), Some(1 - w), "taken over");
    }
}

#[test]
fn a_lane_front_not_yet_due_waits_for_a_reading_that_finds_it_due() {
    let mut p = pending();
    // Intake passed a reading at the task's own due time (10) while
    // the clock starts read is at 5: the lane takes it.
    let put = p.try_insert(TaskKey::Keyed(1), 10, task(), 8, 10);
    assert!(matches!(put, Ok(Inserted::New { .. })));
    assert_eq!(p.lane.live, 1, "in the lane");
    assert_eq!(p.peek_due(), Some(10));
    assert!(p.pop_due(5).is_none(), "not due at 5");
    assert!(p.pop_due(9).is_none(), "not due at 9");
    let got = p.pop_due(10).map(|e| (e.key, e.due));
    assert_eq!(got, Some((TaskKey::Keyed(1), 10)));
    assert!(p.is_empty());
}

#[test]
fn heap_lane_and_holds_behave_as_one_map_ordered_by_due_and_stamp() {
    for seed in [1, 2, 3, rand::random()] {
        let mut rng = SmallRng::seed_from_u64(seed);
        let (mut p, mut model, mut now) = (pending(), Model::new(), 0);
        let mut held = 0;
        for _ in 0..20_000 {
            held += step(&mut p, &mut model, &mut rng, &mut now);
        }
        assert!(held > 20, "the holds took part: {held}");
        let drained: Vec<_> = p.drain().iter().map(|e| (e.due, e.seq)).collect();
        let mut want: Vec<_> = model.values().copied().collect();
        want.sort();
        assert_eq!(drained, want, "seed {seed}");
        assert!(p.is_empty());
        assert!(p.lane.base > 200, "the lane took part: {}", p.lane.base);
    }
}

#[test]
fn started_entries_leave_dead_index_slots_that_are_pruned_in_bulk() {
    let mut p = pending();
    let n = 1_000u64;
    for k in 0..n {
        p.try_insert(TaskKey::Keyed(k), k as i64, task(), usize::MAX, 1 << 40)
            .ok()
            .unwrap();
    }
    let mut pruned = false;
    for k in 0..900 {
        let got = p.pop_due(1 << 40).map(|e| e.key);
        assert_eq!(got, Some(TaskKey::Keyed(k)));
        pruned |= p.lane.dead == 0;
        p.check_invariants().unwrap();
    }
    assert!(pruned, "the dead were pruned while the lane stayed live");
    assert!(p.lane.index.len() < n as usize, "pruned, not only marked");
    // Started keys are gone; the rest are still found by key.
    assert_eq!(p.get(&TaskKey::Keyed(5)), None);
    let removed = p.remove(&TaskKey::Keyed(950)).map(|e| e.due);
    assert_eq!(removed, Some(950));
    p.reschedule(&TaskKey::Keyed(960), 1);
    assert_eq!(p.get(&TaskKey::Keyed(960)).map(|s| s.0), Some(1));
    p.check_invariants().unwrap();
    while p.pop_due(1 << 40).is_some() {}
    assert_eq!((p.lane.live, p.lane.dead, p.lane.index.len()), (0, 0, 0));
}

#[test]
fn a_due_arrival_in_order_joins_the_lane_and_an_emptied_lane_gives_its_buffers_up() {
    let mut p = pending();
    for k in 0..SHRINK_AT as u64 {
        p.try_insert(TaskKey::Keyed(k), k as i64, task(), usize::MAX, 1 << 40)
            .ok()
            .unwrap();
    }
    assert_eq!(p.lane.live, SHRINK_AT, "all due and in order");
    assert!(p.take_retired().is_empty(), "a live lane keeps its buffers");
    while p.pop_due(1 << 40).is_some() {}
    assert!(!p.take_retired().is_empty());
    assert_eq!(p.lane.queue.capacity(), 0);
    // Not due, or out of order: the heap.
    p.try_insert(TaskKey::Keyed(1), 50, task(), usize::MAX, 10)
        .ok()
        .unwrap();
    p.try_insert(TaskKey::Keyed(2), 5, task(), usize::MAX, 10)
        .ok()
        .unwrap();
    p.try_insert(TaskKey::Keyed(3), 4, task(), usize::MAX, 10)
        .ok()
        .unwrap();
    assert_eq!((p.lane.live, p.heap.len()), (1, 2));
    p.check_invariants().unwrap();
}
