//! Unit tests of the heap's data-structure behaviour (the unwind sweep is
//! in `unwind_tests.rs`).

use super::*;

#[test]
fn reschedule_moves_an_entry_and_keeps_its_payload_and_stamp() {
    let mut h = IndexedHeap::new();
    let Inserted::New { seq } = h.insert("a", 10, 'a') else {
        panic!("new key")
    };
    h.insert("b", 5, 'b');
    assert_eq!(h.reschedule(&"a", 1), Some(10));
    assert_eq!(h.get(&"a"), Some((1, seq)));
    h.check_invariants().unwrap();
    assert_eq!(h.reschedule(&"a", 50), Some(1));
    assert_eq!(h.reschedule(&"z", 1), None);
    h.check_invariants().unwrap();
    let order: Vec<_> = std::iter::from_fn(|| h.pop().map(|e| (e.key, e.value))).collect();
    assert_eq!(order, vec![("b", 'b'), ("a", 'a')]);
}

#[test]
fn equal_due_times_pop_in_insertion_order() {
    let mut h = IndexedHeap::new();
    for k in [5, 3, 9, 1] {
        h.insert(k, 7, ());
        h.check_invariants().unwrap();
    }
    let order: Vec<_> = std::iter::from_fn(|| h.pop().map(|e| e.key)).collect();
    assert_eq!(order, vec![5, 3, 9, 1]);
}

#[test]
fn replace_moves_the_single_entry() {
    let mut h = IndexedHeap::new();
    h.insert("a", 10, 1);
    h.insert("b", 5, 2);
    let r = h.insert("a", 3, 3);
    assert!(matches!(
        r,
        Inserted::Replaced {
            old: 1,
            old_due: 10,
            ..
        }
    ));
    assert_eq!(h.len(), 2);
    assert_eq!(h.peek(), Some((3, &"a")));
    h.check_invariants().unwrap();
}

#[test]
fn replace_keeps_the_stored_key_and_hands_back_the_given_one() {
    /// Equal by the number; the name tells instances apart.
    #[derive(Debug)]
    struct Named(u32, &'static str);
    impl PartialEq for Named {
        fn eq(&self, other: &Self) -> bool {
            self.0 == other.0
        }
    }
    impl Eq for Named {}
    impl Hash for Named {
        fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
            self.0.hash(state);
        }
    }
    let mut h = IndexedHeap::new();
    h.insert(Named(1, "stored"), 5, 'a');
    match h.insert(Named(1, "given"), 3, 'b') {
        Inserted::Replaced { key, old, .. } => assert_eq!((key.1, old), ("given", 'a')),
        other => panic!("expected a replace, got {other:?}"),
    }
    assert_eq!(h.peek().map(|(due, k)| (due, k.1)), Some((3, "stored")));
    h.check_invariants().unwrap();
}

#[test]
fn try_insert_refuses_new_key_at_limit_but_replaces() {
    let mut h = IndexedHeap::new();
    h.try_insert(1, 1, (), 1).unwrap();
    assert_eq!(h.try_insert(2, 1, (), 1), Err((2, ())));
    assert!(h.try_insert(1, 0, (), 1).is_ok());
    assert_eq!(h.len(), 1);
}

#[test]
fn remove_seq_ignores_a_replaced_stamp() {
    let mut h = IndexedHeap::new();
    let Inserted::New { seq } = h.insert(1, 1, 'x') else {
        panic!("new key")
    };
    h.insert(1, 2, 'y');
    assert_eq!(h.remove_seq(&1, seq), None);
    assert_eq!(h.len(), 1);
}

#[test]
fn memory_shrinks_after_mass_removal() {
    let mut h = IndexedHeap::new();
    for k in 0..100_000u64 {
        h.insert(k, (k * 7919 % 1000) as i64, k);
    }
    let peak = h.allocated_bytes();
    for k in 0..100_000u64 {
        h.remove(&k).unwrap();
    }
    h.check_invariants().unwrap();
    assert!(
        h.allocated_bytes() * 10 < peak,
        "{} vs {peak}",
        h.allocated_bytes()
    );
}

#[test]
fn a_pop_that_leaves_the_shrink_to_its_caller_keeps_the_tables_until_asked() {
    let mut h = IndexedHeap::new();
    for k in 0..10_000u64 {
        h.insert(k, k as i64, k);
    }
    let peak = h.allocated_bytes();
    let mut now = 0;
    while !h.sparse() {
        assert_eq!(h.pop_due_unshrunk(now).map(|e| e.key), Some(now as u64));
        now += 1;
    }
    assert_eq!(h.allocated_bytes(), peak, "nothing shrunk inside the pops");
    h.check_invariants().unwrap();
    h.maybe_shrink();
    assert!(!h.sparse());
    assert!(!h.take_retired().is_empty(), "old tables retired");
    assert!(h.allocated_bytes() < peak, "shrunk when asked");
    h.check_invariants().unwrap();
    // What a caller that never asks keeps is shrunk by the next removal
    // that shrinks as usual.
    while !h.sparse() {
        h.pop_due_unshrunk(now).expect("due");
        now += 1;
    }
    let before = h.allocated_bytes();
    h.remove(&(now as u64)).expect("pending");
    drop(h.take_retired());
    assert!(h.allocated_bytes() < before);
    h.check_invariants().unwrap();
}

#[test]
fn shrinking_retires_the_old_buffers_to_the_owner() {
    let mut h = IndexedHeap::new();
    for k in 0..10_000u64 {
        h.insert(k, k as i64, ());
    }
    assert!(h.take_retired().is_empty());
    for k in 0..9_990u64 {
        h.remove(&k).unwrap();
    }
    h.check_invariants().unwrap();
    let retired = h.take_retired();
    assert!(!retired.is_empty(), "{retired:?}");
    assert!(h.take_retired().is_empty());
    assert_eq!(h.len(), 10);
}

#[test]
fn a_large_heap_shrinks_in_place_and_sheds_the_pages_past_its_new_end() {
    let mut h = IndexedHeap::new();
    for k in 0..100_000u64 {
        h.insert(k, k as i64, k);
    }
    let cap = h.nodes.capacity();
    let (nodes, meta) = (h.nodes.as_ptr(), h.meta.as_ptr());
    let mut k = 0;
    while h.nodes.capacity() == cap {
        assert_eq!(h.remove(&k).map(|e| e.value), Some(k));
        k += 1;
    }
    assert_eq!(h.nodes.capacity(), 2 * h.len(), "twice what is left");
    let retired = h.take_retired();
    let shed = retired.0.as_deref().expect("something given up");
    if pages::MAPPED {
        assert_eq!(h.nodes.as_ptr(), nodes, "the heap array did not move");
        assert_eq!(h.meta.as_ptr(), meta, "nor did the positions");
        assert!(shed.nodes.is_empty() && shed.meta.is_empty(), "{retired:?}");
        assert_eq!(shed.tails.len(), 2, "{retired:?}");
    } else {
        assert_eq!((shed.nodes.len(), shed.meta.len()), (1, 1), "{retired:?}");
    }
    h.check_invariants().unwrap();
    // Everything left is still there, in order, and the tables grow again.
    for j in 0..1_000u64 {
        h.insert(1_000_000 + j, -1, j);
    }
    h.check_invariants().unwrap();
    let order: Vec<_> = std::iter::from_fn(|| h.pop().map(|e| e.due)).collect();
    assert!(order.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(order.len(), 1_000 + 100_000 - k as usize);
}

#[test]
fn a_large_drain_asks_for_a_few_trims_and_a_small_one_for_none() {
    fn trims(n: u64) -> usize {
        let mut h = IndexedHeap::new();
        for k in 0..n {
            h.insert(k, k as i64, ());
        }
        let mut trims = 0;
        for k in 0..n {
            h.remove(&k).unwrap();
            let retired = h.take_retired();
            trims += usize::from(retired.0.as_ref().is_some_and(|b| b.trim));
        }
        h.check_invariants().unwrap();
        trims
    }
    assert_eq!(trims(shrink::TRIM_FROM as u64 / 2), 0, "too small to trim");
    // Tables of twice `TRIM_FROM` drain to `FLOOR`: a trim each time they
    // have become `TRIM_RATIO` times smaller, while they were at least
    // `TRIM_FROM` before.
    let mut expected = 0;
    let mut from = 2 * shrink::TRIM_FROM;
    while from >= shrink::TRIM_FROM && from / shrink::TRIM_RATIO >= FLOOR {
        expected += 1;
        from /= shrink::TRIM_RATIO;
    }
    assert!(expected > 0);
    assert_eq!(trims(shrink::TRIM_FROM as u64 * 2 - 1), expected);
}

#[test]
fn extreme_due_times_order_correctly() {
    let mut h = IndexedHeap::new();
    h.insert(1, i64::MAX, ());
    h.insert(2, i64::MIN, ());
    h.insert(3, 0, ());
    assert_eq!(h.pop_due(i64::MIN).map(|e| e.key), Some(2));
    assert_eq!(h.pop_due(0).map(|e| e.key), Some(3));
    assert_eq!(h.pop_due(i64::MAX - 1), None);
    assert_eq!(h.pop_due(i64::MAX).map(|e| e.key), Some(1));
}

#[test]
fn moving_every_key_later_keeps_pop_order() {
    let mut h = IndexedHeap::new();
    for k in 0..1000u64 {
        h.insert(k, (k * 7919 % 1000) as i64, k);
    }
    // Move every key later, in an order unrelated to the heap's.
    for k in 0..1000u64 {
        h.insert((k * 13) % 1000, 5000 + (k * 31 % 1000) as i64, k);
        h.check_invariants().unwrap();
    }
    let mut last = (i64::MIN, 0);
    while let Some(e) = h.pop() {
        assert!((e.due, e.seq) > last, "{:?} after {last:?}", (e.due, e.seq));
        last = (e.due, e.seq);
        h.check_invariants().unwrap();
    }
}

#[test]
fn a_later_move_with_a_tied_child_stays_ordered() {
    let mut h = IndexedHeap::new();
    h.insert("root", 1, ());
    for k in ["a", "b", "c"] {
        h.insert(k, 5, ());
    }
    h.insert("d", 5, ());
    // "a" shares due 5 with its siblings, not its children; move the
    // root later than its tied children.
    h.insert("root", 5, ());
    h.check_invariants().unwrap();
    let order: Vec<_> = std::iter::from_fn(|| h.pop().map(|e| e.key)).collect();
    assert_eq!(order, vec!["a", "b", "c", "d", "root"]);
}

#[test]
fn removals_keep_the_slot_table_dense_and_ordered() {
    let mut h = IndexedHeap::new();
    for k in 0..10_000u64 {
        h.insert(k, k as i64, ());
    }
    for k in (0..10_000u64).step_by(2) {
        h.remove(&k).unwrap();
    }
    for k in 10_000..15_000u64 {
        h.insert(k, k as i64, ());
    }
    h.check_invariants().unwrap();
    for k in (1..10_000u64).step_by(2) {
        h.remove(&k).unwrap();
        if k % 1001 == 0 {
            h.check_invariants().unwrap();
        }
    }
    h.check_invariants().unwrap();
    assert_eq!(h.len(), 5000);
    assert_eq!(h.pop().map(|e| e.key), Some(10_000));
}

#[test]
fn equal_due_times_keep_their_order_across_the_32_bit_stamp_boundary() {
    let mut h = IndexedHeap::new();
    // Stamps from 2^32 - 3 on: the low halves wrap while the entries wait.
    h.next_seq = (1 << 32) - 3;
    let mut stamps = Vec::new();
    for k in 0..8u32 {
        let Inserted::New { seq } = h.insert(k, 7, k) else {
            panic!("new key")
        };
        stamps.push(seq);
        h.insert(100 + k, i64::from(k % 3) * 7, k);
        h.check_invariants().unwrap();
    }
    assert!(stamps[0] < 1 << 32 && stamps[7] > 1 << 32);
    assert_eq!(h.get(&5), Some((7, stamps[5])));
    // Replacing moves an entry behind the others at its due time.
    h.insert(1, 7, 1);
    assert_eq!(h.remove_seq(&1, stamps[1]), None);
    h.check_invariants().unwrap();
    let order: Vec<u32> = std::iter::from_fn(|| h.pop())
        .filter(|e| e.due == 7 && e.key < 100)
        .map(|e| e.key)
        .collect();
    assert_eq!(order, vec![0, 2, 3, 4, 5, 6, 7, 1]);
}

#[test]
fn dues_through_reads_exactly_the_entries_due_by_the_bound() {
    let mut heap = IndexedHeap::new();
    // Scrambled due times, some equal, in a heap several levels deep.
    let dues: Vec<i64> = (0..500).map(|i| (i * 7_919 % 500) / 2).collect();
    for (k, &due) in dues.iter().enumerate() {
        heap.insert(k as u64, due, ());
    }
    heap.pop_due(3);
    heap.reschedule(&100, 40);
    let mut left: Vec<i64> = (0..500u64)
        .filter_map(|k| heap.get(&k).map(|(due, _)| due))
        .collect();
    left.sort_unstable();
    let mut out = [0i64; 64];
    for upto in [-1, 0, 3, 10, 25, 31] {
        let n = heap.dues_through(upto, &mut out).expect("under 64 due");
        let mut got = out[..n].to_vec();
        got.sort_unstable();
        let want: Vec<i64> = left.iter().copied().filter(|&d| d <= upto).collect();
        assert_eq!(got, want, "due by {upto}");
    }
    assert_eq!(
        heap.dues_through(200, &mut out),
        None,
        "more than 64 due by 200"
    );
    assert_eq!(
        IndexedHeap::<u64, ()>::new().dues_through(i64::MAX, &mut out),
        Some(0)
    );
}
