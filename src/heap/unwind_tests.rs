//! Tests for the heap's unwind safety: keys and values whose `Hash`, `Eq`,
//! `Clone` or `Drop` (and a `remove_where` predicate) panic at the n-th call
//! into user code, for every n a fixed operation sequence reaches, checked
//! against a map oracle after every operation.
//!
//! The rule under test (module docs of `heap.rs`): an operation that panics
//! did not happen; a panic while the caller drops what an operation returned
//! comes after the operation happened. Either way the heap stays consistent
//! and every later operation works.

use super::{Entry, IndexedHeap, Inserted};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::cell::Cell;
use std::collections::hash_map::DefaultHasher;
use std::collections::BTreeMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The user code a counted call ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Hash,
    Eq,
    Clone,
    Drop,
    Pred,
}

const CALL_KINDS: usize = 5;

thread_local! {
    /// Counted calls so far (only while armed).
    static CALLS: Cell<u64> = const { Cell::new(0) };
    /// The counted call that panics, 1-based; 0 for none.
    static TRIP: Cell<u64> = const { Cell::new(0) };
    /// Whether calls are counted (and may panic): off while the test checks.
    static ARMED: Cell<bool> = const { Cell::new(false) };
    /// Counted calls per kind, indexed by `Call as usize`.
    static BY_KIND: Cell<[u64; CALL_KINDS]> = const { Cell::new([0; CALL_KINDS]) };
}

/// Count one call into user code; panic if it is the tripped one.
fn call(what: Call) {
    if !ARMED.get() {
        return;
    }
    let n = CALLS.get() + 1;
    CALLS.set(n);
    let mut kinds = BY_KIND.get();
    kinds[what as usize] += 1;
    BY_KIND.set(kinds);
    if n == TRIP.get() {
        panic!("hostile {what:?} at call {n}");
    }
}

/// A key whose traits count their calls. `id` is its identity; `tag` names
/// the instance (not hashed, not compared), to see which instance a heap keeps.
#[derive(Debug)]
struct Key {
    id: u32,
    tag: u64,
}

impl Key {
    fn new(id: u32, tag: u64) -> Self {
        Key { id, tag }
    }
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        call(Call::Hash);
        self.id.hash(state);
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        call(Call::Eq);
        self.id == other.id
    }
}

impl Eq for Key {}

impl Clone for Key {
    fn clone(&self) -> Self {
        call(Call::Clone);
        Key::new(self.id, self.tag)
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        call(Call::Drop);
    }
}

/// A payload whose drop counts.
#[derive(Debug)]
struct Val(u64);

impl Drop for Val {
    fn drop(&mut self) {
        call(Call::Drop);
    }
}

/// A fixed hasher, so that every run makes the same calls.
type Heap = IndexedHeap<Key, Val, BuildHasherDefault<DefaultHasher>>;

/// An entry as plain data: key id, due, stamp, value, key tag.
type Plain = (u32, i64, u64, u64, u64);

fn plain(e: &Entry<Key, Val>) -> Plain {
    (e.key.id, e.due, e.seq, e.value.0, e.key.tag)
}

/// One operation of a sequence.
#[derive(Debug, Clone)]
enum Op {
    Insert {
        id: u32,
        due: i64,
    },
    TryInsert {
        id: u32,
        due: i64,
        limit: usize,
    },
    Remove {
        id: u32,
    },
    /// `remove_seq` with the key's current stamp plus `off` (0 hits).
    RemoveSeq {
        id: u32,
        off: u64,
    },
    Pop,
    PopDue {
        now: i64,
    },
    RemoveWhere {
        modulus: u64,
    },
    /// Put back the entry the last removal returned, if the test holds one.
    Restore,
    Drain,
    Get {
        id: u32,
    },
    ContainsKey {
        id: u32,
    },
}

/// What an operation returned, as plain data.
#[derive(Debug, Clone, PartialEq)]
enum Out {
    New {
        seq: u64,
    },
    /// `key_tag`: the key handed back, the one the insert was given.
    Replaced {
        seq: u64,
        old_due: i64,
        old_seq: u64,
        old: u64,
        key_tag: u64,
    },
    Refused {
        id: u32,
        val: u64,
    },
    One(Option<Plain>),
    Many(Vec<Plain>),
    Restored(Result<(), Plain>),
    Nothing,
    Get(Option<(i64, u64)>),
    Bool(bool),
}

/// The oracle: what the heap holds and the next stamp.
#[derive(Debug, Clone, PartialEq, Default)]
struct Model {
    /// id → (due, seq, value, tag).
    map: BTreeMap<u32, (i64, u64, u64, u64)>,
    next_seq: u64,
}

impl Model {
    fn entry(&self, id: u32) -> Option<Plain> {
        self.map
            .get(&id)
            .map(|&(due, seq, val, tag)| (id, due, seq, val, tag))
    }

    fn first(&self) -> Option<Plain> {
        self.map
            .iter()
            .min_by_key(|(_, (due, seq, _, _))| (*due, *seq))
            .map(|(&id, &(due, seq, val, tag))| (id, due, seq, val, tag))
    }

    fn take(&mut self, id: u32) -> Option<Plain> {
        let e = self.entry(id);
        self.map.remove(&id);
        e
    }

    fn put(&mut self, id: u32, due: i64, val: u64, tag: u64) -> Out {
        let seq = self.next_seq;
        self.next_seq += 1;
        match self.map.get_mut(&id) {
            Some(slot) => {
                let (old_due, old_seq, old, kept) = *slot;
                *slot = (due, seq, val, kept);
                Out::Replaced {
                    seq,
                    old_due,
                    old_seq,
                    old,
                    key_tag: tag,
                }
            }
            None => {
                self.map.insert(id, (due, seq, val, tag));
                Out::New { seq }
            }
        }
    }

    /// The model after `op` and what `op` returns; `val` is the value (and
    /// tag) a new entry gets, `stash` the entry the test holds.
    fn apply(&self, op: &Op, val: u64, stash: Option<Plain>) -> (Model, Out) {
        let mut m = self.clone();
        let out = match *op {
            Op::Insert { id, due } => m.put(id, due, val, val),
            Op::TryInsert { id, due, limit } => {
                if !m.map.contains_key(&id) && m.map.len() >= limit {
                    Out::Refused { id, val }
                } else {
                    m.put(id, due, val, val)
                }
            }
            Op::Remove { id } => Out::One(m.take(id)),
            Op::RemoveSeq { id, off } => match m.entry(id) {
                Some(e) if off == 0 => Out::One(m.take(e.0)),
                _ => Out::One(None),
            },
            Op::Pop => Out::One(m.first().and_then(|e| m.take(e.0))),
            Op::PopDue { now } => {
                Out::One(m.first().filter(|e| e.1 <= now).and_then(|e| m.take(e.0)))
            }
            Op::RemoveWhere { modulus } => {
                let doomed: Vec<u32> = m
                    .map
                    .iter()
                    .filter(|(_, e)| e.2 % modulus == 0)
                    .map(|(&id, _)| id)
                    .collect();
                Out::Many(doomed.into_iter().filter_map(|id| m.take(id)).collect())
            }
            Op::Restore => match stash {
                None => Out::Nothing,
                Some(e) if m.map.contains_key(&e.0) || e.2 >= m.next_seq => Out::Restored(Err(e)),
                Some((id, due, seq, val, tag)) => {
                    m.map.insert(id, (due, seq, val, tag));
                    Out::Restored(Ok(()))
                }
            },
            Op::Drain => {
                let mut all: Vec<Plain> = m.map.keys().filter_map(|&id| m.entry(id)).collect();
                all.sort_by_key(|e| (e.1, e.2));
                m.map.clear();
                Out::Many(all)
            }
            Op::Get { id } => Out::Get(m.entry(id).map(|e| (e.1, e.2))),
            Op::ContainsKey { id } => Out::Bool(m.map.contains_key(&id)),
        };
        (m, out)
    }
}

/// Run `op` on the heap. `returned` is set as soon as the heap's call
/// returned: a panic after that is the caller dropping what it returned.
fn run_op(
    heap: &mut Heap,
    stash: &mut Option<Entry<Key, Val>>,
    op: &Op,
    val: u64,
    model: &Model,
    returned: &Cell<bool>,
) -> Out {
    match *op {
        Op::Insert { id, due } => {
            let r = heap.insert(Key::new(id, val), due, Val(val));
            returned.set(true);
            inserted(&r)
        }
        Op::TryInsert { id, due, limit } => {
            let r = heap.try_insert(Key::new(id, val), due, Val(val), limit);
            returned.set(true);
            match &r {
                Ok(r) => inserted(r),
                Err((k, v)) => Out::Refused { id: k.id, val: v.0 },
            }
        }
        Op::Get { id } => {
            // Bound first: it is dropped after the call returned.
            let probe = Key::new(id, u64::MAX);
            let r = heap.get(&probe);
            returned.set(true);
            Out::Get(r)
        }
        Op::ContainsKey { id } => {
            // Bound first: it is dropped after the call returned.
            let probe = Key::new(id, u64::MAX);
            let r = heap.contains_key(&probe);
            returned.set(true);
            Out::Bool(r)
        }
        _ => run_removal(heap, stash, op, model, returned),
    }
}

/// [`run_op`] for the operations that take entries out (or put one back).
fn run_removal(
    heap: &mut Heap,
    stash: &mut Option<Entry<Key, Val>>,
    op: &Op,
    model: &Model,
    returned: &Cell<bool>,
) -> Out {
    let keep = |stash: &mut Option<Entry<Key, Val>>, e: Option<Entry<Key, Val>>| {
        let out = Out::One(e.as_ref().map(plain));
        if let Some(e) = e {
            // The old stash is dropped after the new one is in place.
            drop(stash.replace(e));
        }
        out
    };
    // Bound first: a probe key is dropped after the call returned.
    let probe = |id| Key::new(id, u64::MAX);
    match *op {
        Op::Remove { id } => {
            let probe = probe(id);
            let r = heap.remove(&probe);
            returned.set(true);
            keep(stash, r)
        }
        Op::RemoveSeq { id, off } => {
            let seq = model.entry(id).map_or(0, |e| e.2) + off;
            let probe = probe(id);
            let r = heap.remove_seq(&probe, seq);
            returned.set(true);
            keep(stash, r)
        }
        Op::Pop => {
            let r = heap.pop();
            returned.set(true);
            keep(stash, r)
        }
        Op::PopDue { now } => {
            let r = heap.pop_due(now);
            returned.set(true);
            keep(stash, r)
        }
        Op::RemoveWhere { modulus } => {
            let r = heap.remove_where(|v| {
                call(Call::Pred);
                v.0 % modulus == 0
            });
            returned.set(true);
            let mut out: Vec<Plain> = r.iter().map(plain).collect();
            out.sort_unstable();
            Out::Many(out)
        }
        Op::Restore => match stash.take() {
            None => {
                returned.set(true);
                Out::Nothing
            }
            Some(e) => {
                let r = heap.restore(e);
                returned.set(true);
                Out::Restored(r.as_ref().map(|_| ()).map_err(plain))
            }
        },
        Op::Drain => {
            let r = heap.drain();
            returned.set(true);
            Out::Many(r.iter().map(plain).collect())
        }
        Op::Insert { .. } | Op::TryInsert { .. } | Op::Get { .. } | Op::ContainsKey { .. } => {
            unreachable!("run_op runs these")
        }
    }
}

fn inserted(r: &Inserted<Key, Val>) -> Out {
    match r {
        Inserted::New { seq } => Out::New { seq: *seq },
        Inserted::Replaced {
            seq,
            old_due,
            old_seq,
            old,
            key,
        } => Out::Replaced {
            seq: *seq,
            old_due: *old_due,
            old_seq: *old_seq,
            old: old.0,
            key_tag: key.tag,
        },
    }
}

/// The heap holds exactly what the model holds (checked unarmed).
fn check(heap: &Heap, model: &Model, ctx: &dyn Fn() -> String) {
    if let Err(e) = heap.check_invariants() {
        panic!("{}: {e}", ctx());
    }
    assert_eq!(heap.len(), model.map.len(), "{}", ctx());
    assert_eq!(heap.next_seq, model.next_seq, "{}", ctx());
    for (&id, &(due, seq, _, _)) in &model.map {
        let got = heap.get(&Key::new(id, u64::MAX));
        assert_eq!(got, Some((due, seq)), "{}: key {id}", ctx());
    }
    let head = heap.peek().map(|(due, k)| (due, k.id));
    assert_eq!(head, model.first().map(|e| (e.1, e.0)), "{}", ctx());
}

/// What one run of a sequence saw.
struct Run {
    /// Counted calls the run made.
    calls: u64,
    /// Whether an operation panicked.
    panicked: bool,
}

/// Run `ops` with the `trip`-th counted call panicking (0: none), counting
/// calls only during the operations in `armed`. Every operation runs inside
/// `catch_unwind`; after each armed one the heap is compared to the oracle.
fn run(seed: u64, ops: &[Op], armed: Range<usize>, trip: u64) -> Run {
    CALLS.set(0);
    TRIP.set(trip);
    BY_KIND.set([0; CALL_KINDS]);
    let mut heap = Heap::with_hasher(Default::default());
    let mut model = Model::default();
    let mut stash: Option<Entry<Key, Val>> = None;
    let mut panicked = false;
    for (i, op) in ops.iter().enumerate() {
        let ctx = || format!("seed {seed} trip {trip} op {i} {op:?}");
        let val = i as u64;
        let held = stash.as_ref().map(plain);
        let (after, expect) = model.apply(op, val, held);
        let returned = Cell::new(false);
        let mut seen = None;
        ARMED.set(armed.contains(&i));
        let result = catch_unwind(AssertUnwindSafe(|| {
            seen = Some(run_op(&mut heap, &mut stash, op, val, &model, &returned));
        }));
        ARMED.set(false);
        if result.is_err() {
            assert!(!panicked, "{}: a second panic", ctx());
            panicked = true;
        }
        if returned.get() {
            // The heap's call returned: the operation happened, whatever
            // the caller's drops did after.
            if let Some(seen) = seen {
                assert_eq!(seen, expect, "{}", ctx());
            }
            model = after;
        } else {
            assert!(result.is_err(), "{}: neither returned nor panicked", ctx());
        }
        if armed.contains(&i) || i + 1 == ops.len() {
            check(&heap, &model, &ctx);
        }
    }
    let calls = CALLS.get();
    // Everything left comes out in order, with the model's payloads.
    let left: Vec<Plain> = heap.drain().iter().map(plain).collect();
    let (_, expect) = model.apply(&Op::Drain, 0, None);
    assert_eq!(
        Out::Many(left),
        expect,
        "seed {seed} trip {trip}: final drain"
    );
    Run { calls, panicked }
}

/// A random sequence over `keys` keys.
fn random_ops(seed: u64, len: usize, keys: u32) -> Vec<Op> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..len)
        .map(|_| {
            let id = rng.gen_range(0..keys);
            let due = rng.gen_range(-50..50i64);
            match rng.gen_range(0..100) {
                0..=29 => Op::Insert { id, due },
                30..=39 => Op::TryInsert {
                    id,
                    due,
                    limit: rng.gen_range(0..=keys as usize),
                },
                40..=51 => Op::Remove { id },
                52..=57 => Op::RemoveSeq {
                    id,
                    off: rng.gen_range(0..2),
                },
                58..=63 => Op::Pop,
                64..=71 => Op::PopDue { now: due },
                72..=74 => Op::RemoveWhere {
                    modulus: rng.gen_range(2..5),
                },
                75..=85 => Op::Restore,
                86 => Op::Drain,
                87..=93 => Op::Get { id },
                _ => Op::ContainsKey { id },
            }
        })
        .collect()
}

/// Run `ops` once for every counted call of the armed range, that call
/// panicking; returns the counts per kind of the run without a panic.
fn sweep(seed: u64, ops: &[Op], armed: Range<usize>) -> [u64; CALL_KINDS] {
    let dry = run(seed, ops, armed.clone(), 0);
    assert!(!dry.panicked);
    let kinds = BY_KIND.get();
    for n in 1..=dry.calls {
        let r = run(seed, ops, armed.clone(), n);
        assert!(
            r.panicked,
            "seed {seed}: call {n} of {} did not panic",
            dry.calls
        );
    }
    kinds
}

#[test]
fn every_operation_survives_a_panic_at_every_user_call() {
    let seed = 7;
    let ops = random_ops(seed, 300, 12);
    let kinds = sweep(seed, &ops, 0..ops.len());
    for kind in [Call::Hash, Call::Eq, Call::Drop, Call::Pred] {
        assert!(kinds[kind as usize] > 0, "no {kind:?} call: {kinds:?}");
    }
    assert_eq!(kinds[Call::Clone as usize], 0, "the heap cloned a key");
}

#[test]
fn shrinking_survives_a_panic_at_every_user_call_around_it() {
    // 1100 entries grow the tables past the floor; removals then shrink
    // them once fewer than a quarter are left.
    let fill = 1100u32;
    let mut ops: Vec<Op> = (0..fill)
        .map(|id| Op::Insert {
            id,
            due: i64::from(id * 7919 % 1000),
        })
        .collect();
    for id in 0..fill {
        ops.push(match id % 4 {
            0 => Op::Pop,
            1 => Op::RemoveSeq { id, off: 0 },
            2 => Op::PopDue { now: 1000 },
            _ => Op::Remove { id },
        });
    }
    // Find the removal that shrinks, in a run without panics.
    let mut heap = Heap::with_hasher(Default::default());
    let mut shrink_at = None;
    for (i, op) in ops.iter().enumerate() {
        let before = heap.allocated_bytes();
        let model = Model {
            map: BTreeMap::new(),
            next_seq: heap.next_seq,
        };
        let mut stash = None;
        match op {
            Op::RemoveSeq { id, .. } => {
                let seq = heap.get(&Key::new(*id, 0)).map_or(0, |e| e.1);
                heap.remove_seq(&Key::new(*id, 0), seq);
            }
            op => {
                run_op(
                    &mut heap,
                    &mut stash,
                    op,
                    i as u64,
                    &model,
                    &Cell::new(false),
                );
            }
        }
        drop(heap.take_retired());
        if i >= fill as usize && heap.allocated_bytes() < before {
            shrink_at = Some(i);
            break;
        }
    }
    let at = shrink_at.expect("the removals shrink the heap");
    sweep(0, &ops[..at + 4], at - 3..at + 4);
}
