//! Indexed 4-ary min-heap: one entry per key, ordered by `(due, seq)`, with a
//! key → slot index that every move keeps true.
//!
//! # Layout
//!
//! Four tables, each touched as little as an operation allows (the churn
//! profiles in `docs/bench/churn-lab-notes.md` count the cache misses):
//!
//! - The heap array holds small copyable `Node`s (`due`, the low half of
//!   `seq`, slot number), so sifting moves 16-byte values (four children in
//!   64 bytes) and never touches keys or payloads.
//! - A dense slot table holds each entry's key and payload, in chunks of
//!   at least 64 KiB (`chunks.rs`): growing adds a chunk and a draining
//!   table gives each up as it empties, so no slot is copied when the
//!   other tables grow or shrink.
//! - Beside it, a table of 12-byte `Meta` entries, one per slot, holds the
//!   position of the entry's node, 32 bits of its key's hash and the high
//!   half of its stamp. A move
//!   costs one store into this table, far smaller than the slot table and
//!   so mostly cached, and no hashing. Removal moves the last slot (and its
//!   `Meta`) into the hole, re-pointing its node and its index bucket
//!   (found by the stored hash), so the tables never have holes and, after
//!   mass removal, the heap array and `Meta` move to smaller buffers and
//!   the slot table's emptied chunks go, with no compaction pass. (A free list of slots was
//!   measured: 5-15% cheaper per removal at 1M entries, but its compaction,
//!   run inside a removal under the owner's lock, stalled a pool for
//!   milliseconds.)
//! - The index (`index.rs`) is an open-addressing table of 8-byte buckets,
//!   each a slot number beside 32 bits of its key's hash, so a probe
//!   compares hashes without leaving the index. A lookup costs one cache
//!   miss in the index and one in the slot table (where the key is
//!   compared), and growing the index never touches a key. The
//!   default hasher is foldhash with a per-process random seed: several
//!   times cheaper than SipHash on integer keys, and keys an attacker chooses
//!   cannot be aimed at a seed they do not know. Callers who need
//!   cryptographic DoS resistance pass `std`'s `RandomState` to
//!   [`IndexedHeap::with_hasher`].
//!
//! Moves are eager. A lazy variant (a later move leaves the node's old key
//! as a lower bound, settled when it reaches the root) was measured and
//! dropped: when many deadlines move later, the lower bounds surface one by
//! one and each settles with a sift from the root, which cost more than the
//! short eager sift from the node's own position (most nodes of a 4-ary
//! heap are leaves or next to them).
//!
//! `seq` is a per-heap counter stamped on every insert and replace, so entries
//! with equal due times pop in first-in, first-out order.
//!
//! # Panics in user code
//!
//! The heap runs user code in three places only: the key's `Hash` (and the
//! hasher's, if it is the caller's), the key's `Eq`, and the predicate given
//! to a bulk removal. It
//! never clones a key, and no operation drops a key or a payload: a replace
//! keeps the key the heap holds and hands back the key it was given with
//! the old payload ([`Inserted::Replaced`]), and removals hand out their
//! entries. Each operation makes all of its calls into user code (hashing
//! the key it was given, comparing it, running the predicate) before it
//! changes anything; moving or removing an entry never hashes a key again,
//! because each slot keeps its key's hash. So:
//!
//! **An operation that panics did not happen.** After the panic the heap
//! holds what it held before the call, with the same stamps and the same
//! next stamp, its invariants hold and every later operation works. This is
//! true of every operation that takes `&mut self`, with no exception; what
//! the call was given by value (the key and payload of
//! [`insert`](IndexedHeap::insert) and [`try_insert`](IndexedHeap::try_insert),
//! an entry put back) is dropped while the panic unwinds, as `std`'s
//! collections do. A panic raised while the caller drops what an operation
//! returned (a removed entry, a replaced payload, the key handed back)
//! comes after the operation took effect. Allocation failure aborts the
//! process, as in `std`.
//!
//! A key whose `Hash` or `Eq` is inconsistent (two equal keys hashing apart,
//! or a hash that changes) cannot corrupt the tables either, since no move
//! rehashes a key; it can only make lookups by that key miss, so that it may
//! hold two entries. [`IndexedHeap::check_invariants`] reports that.
//!
//! # Files
//!
//! This file holds the tables and the keyed operations; `order.rs` how two
//! entries compare and the sifts; `chunks.rs` the slot table;
//! `shrink.rs` and `retired.rs` giving memory back; `index.rs` the key
//! index; `check.rs` the invariant checks.
//!
//! This module has no synchronisation at all; [`crate::Scheduler`] and the pool
//! wrap it in their own lock.

mod check;
mod chunks;
mod index;
mod order;
mod pages;
mod remove;
mod retired;
mod shrink;
#[cfg(test)]
mod unwind_tests;

use chunks::Chunks;
use hashbrown::Equivalent;
use index::SlotIndex;
use pages::{table, Table};
pub(crate) use retired::Retired;
use std::borrow::Borrow;
use std::fmt;
use std::hash::{BuildHasher, Hash};

/// The default hasher of the index: foldhash, seeded per process and per
/// heap from a random source.
pub type DefaultState = foldhash::fast::RandomState;

/// Children per heap node. Four halves the depth of a binary heap and keeps a
/// node's children in one or two cache lines.
const ARITY: usize = 4;

/// The most entries a heap can hold: positions are stored as `u32`.
pub const MAX_LEN: usize = u32::MAX as usize;

/// `capacity` if it is a valid bound on the entries of a heap: positive and
/// at most [`MAX_LEN`]. The one check of every owner's capacity setting.
pub(crate) fn check_capacity(capacity: usize) -> Result<usize, crate::Error> {
    if capacity == 0 {
        return Err(crate::Error::ZeroCapacity);
    }
    if capacity > MAX_LEN {
        return Err(crate::Error::CapacityTooLarge {
            requested: capacity,
            max: MAX_LEN,
        });
    }
    Ok(capacity)
}

/// Tables at most this long are never shrunk.
const FLOOR: usize = 1024;

/// One heap-array element: the ordering key and where the payload lives,
/// 16 bytes. The entry's stamp is split: its low half here, its high half
/// in the entry's `Meta` (read only to order equal due times once the heap
/// has issued more than `u32::MAX` stamps).
#[derive(Clone, Copy, Debug)]
struct Node {
    /// Due time of the entry.
    due: i64,
    /// Low 32 bits of the insertion stamp, the tie-breaker for equal due
    /// times.
    seq_lo: u32,
    /// Index of the entry's slot in `slots`.
    slot: u32,
}

/// The low and high halves of a stamp.
#[inline]
fn split(seq: u64) -> (u32, u32) {
    (seq as u32, (seq >> 32) as u32)
}

/// Key and payload of one entry.
#[derive(Debug)]
struct Slot<K, V> {
    /// The entry's key.
    key: K,
    /// The caller's payload.
    value: V,
}

/// Heap position, key hash and high stamp half of one entry, in a table
/// parallel to the slot table (`meta[s]` belongs to `slots[s]`): 12 bytes
/// per entry, so the position every heap move rewrites lives in a table a
/// fraction of the slot table's size, which stays in cache far more often.
#[derive(Debug, Clone, Copy)]
struct Meta {
    /// Position of this entry's node in the heap array.
    pos: u32,
    /// The 32 bits of the key's hash the index files it under, kept so that
    /// moving or removing the entry never hashes the key again.
    hash: u32,
    /// High 32 bits of the entry's stamp (the low half is in its node).
    seq_hi: u32,
}

impl<K, V> Slot<K, V> {
    #[inline]
    fn key(&self) -> &K {
        &self.key
    }
}

/// An entry taken out of the heap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<K, V> {
    /// The entry's key.
    pub key: K,
    /// Its due time.
    pub due: i64,
    /// Its insertion stamp (increasing per heap; equal due times pop in stamp order).
    pub seq: u64,
    /// The payload.
    pub value: V,
}

/// What [`IndexedHeap::insert`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inserted<K, V> {
    /// The key was new; the entry got this stamp.
    New {
        /// Stamp of the new entry.
        seq: u64,
    },
    /// The key was present; its due time and payload were replaced in one
    /// step. The heap keeps the key it held (as `HashMap::insert` does) and
    /// gives back the one it was passed, so that the heap drops neither.
    Replaced {
        /// Stamp of the new entry.
        seq: u64,
        /// Due time of the replaced entry.
        old_due: i64,
        /// Stamp of the replaced entry.
        old_seq: u64,
        /// Payload of the replaced entry.
        old: V,
        /// The key passed to the insert, equal to the one the heap kept.
        key: K,
    },
}

/// Where a key's entry is, found by the only steps of an insert that run
/// user code (hashing the key and comparing it); valid until the heap
/// changes. See [`IndexedHeap::probe`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe {
    /// The 32 bits of the key's hash the index uses.
    hash: u32,
    /// The key's slot, if it has an entry.
    slot: Option<u32>,
    /// Length and next stamp of the heap when probed, to catch a stale probe.
    #[cfg(debug_assertions)]
    at: (usize, u64),
}

impl Probe {
    /// The 32 bits of the key's hash the index uses (a neighbour that files
    /// the same keys elsewhere may reuse it rather than hash them again).
    pub(crate) fn hash(&self) -> u32 {
        self.hash
    }

    /// True if the key has an entry.
    pub(crate) fn found(&self) -> bool {
        self.slot.is_some()
    }
}

/// An indexed min-heap keyed by `K`, ordered by due time then insertion stamp.
///
/// Insert, replace and remove-by-key are O(log n); [`peek`](Self::peek) is O(1).
///
/// A panic in a key's `Hash` or `Eq` leaves the heap as it was before the
/// operation that ran it; see the [module docs](crate::heap#panics-in-user-code).
///
/// # Examples
///
/// ```
/// use timerpool::heap::IndexedHeap;
///
/// let mut heap = IndexedHeap::new();
/// heap.insert("a", 10, 'a');
/// heap.insert("b", 5, 'b');
/// heap.insert("a", 3, 'A'); // replaces "a"
/// assert_eq!(heap.len(), 2);
/// assert_eq!(heap.peek(), Some((3, &"a")));
/// assert_eq!(heap.pop_due(4).map(|e| e.value), Some('A'));
/// assert_eq!(heap.pop_due(4), None);
/// heap.check_invariants().unwrap();
/// ```
pub struct IndexedHeap<K, V, S = DefaultState> {
    /// The heap array, in heap order.
    nodes: Table<Node>,
    /// Dense slot table, in chunks (`chunks.rs`).
    slots: Chunks<Slot<K, V>>,
    /// Position and hash of each slot's entry; `meta[nodes[p].slot].pos == p`
    /// for every `p`.
    meta: Table<Meta>,
    /// Memory given up by shrinking, not yet taken by the owner.
    retired: Retired<K, V>,
    /// The largest capacity the tables had since the last trim of the
    /// allocator asked for by a shrink (`shrink.rs`).
    drained_from: usize,
    /// Key hash → slot number.
    index: SlotIndex,
    /// Hashes keys for the index.
    hasher: S,
    /// Next insertion stamp.
    next_seq: u64,
}

impl<K, V, S> fmt::Debug for IndexedHeap<K, V, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IndexedHeap")
            .field("len", &self.nodes.len())
            .field("next_seq", &self.next_seq)
            .finish_non_exhaustive()
    }
}

impl<K, V, S> IndexedHeap<K, V, S> {
    /// Number of entries.
    #[inline]
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when the heap holds no entry.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The earliest entry's due time and key, in O(1).
    #[inline]
    pub fn peek(&self) -> Option<(i64, &K)> {
        self.nodes
            .first()
            .map(|n| (n.due, self.slots[n.slot as usize].key()))
    }

    /// The earliest due time, in O(1).
    #[inline]
    pub fn peek_due(&self) -> Option<i64> {
        self.nodes.first().map(|n| n.due)
    }

    /// The key and payload in slot `slot` (slots are numbered `0..len`, in
    /// no order), for a walk in chunks. A removal moves only the last slot,
    /// into the removed one's number, and an insertion appends: so a walk
    /// from the last number down misses no entry present throughout.
    pub(crate) fn slot_entry(&self, slot: usize) -> Option<(&K, &V)> {
        self.slots.get(slot).map(|s| (&s.key, &s.value))
    }
}

impl<K: Hash + Eq, V> Default for IndexedHeap<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Hash + Eq, V> IndexedHeap<K, V> {
    /// An empty heap with the default hasher (foldhash, randomly seeded).
    pub fn new() -> Self {
        Self::with_hasher(DefaultState::default())
    }
}

impl<K: Hash + Eq, V, S: BuildHasher> IndexedHeap<K, V, S> {
    /// An empty heap whose index uses `hasher`.
    pub fn with_hasher(hasher: S) -> Self {
        IndexedHeap {
            nodes: table(),
            slots: Chunks::new(),
            meta: table(),
            retired: Retired::none(),
            drained_from: 0,
            index: SlotIndex::default(),
            hasher,
            next_seq: 0,
        }
    }

    /// The 32 bits of `key`'s hash the index uses. Runs user code.
    #[inline]
    fn hash_of<Q: ?Sized + Hash>(&self, key: &Q) -> u32 {
        index::short(self.hasher.hash_one(key))
    }

    /// The slot of `key`, if present. Runs user code and changes nothing.
    #[inline]
    fn find<Q: ?Sized + Equivalent<K>>(&self, hash: u32, key: &Q) -> Option<u32> {
        let slots = &self.slots;
        self.index
            .find(hash, |s| key.equivalent(slots[s as usize].key()))
    }

    /// True when `key` has an entry. `key` may be any borrowed form of the
    /// heap's key type, as for `HashMap` (a `&str` for `String` keys).
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::heap::IndexedHeap;
    /// let mut heap = IndexedHeap::new();
    /// heap.insert(String::from("lease"), 10, ());
    /// assert!(heap.contains_key("lease"));
    /// ```
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        self.find(self.hash_of(key), key).is_some()
    }

    /// Due time and stamp of `key`'s entry; `key` as for
    /// [`contains_key`](Self::contains_key).
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::heap::IndexedHeap;
    /// let mut heap = IndexedHeap::new();
    /// heap.insert(String::from("lease"), 10, ());
    /// assert_eq!(heap.get("lease").map(|(due, _)| due), Some(10));
    /// assert_eq!(heap.get("other"), None);
    /// ```
    pub fn get<Q>(&self, key: &Q) -> Option<(i64, u64)>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        self.get_equivalent(key)
    }

    /// [`get`](Self::get) for any `Q` the index can match against a key.
    pub(crate) fn get_equivalent<Q: ?Sized + Hash + Equivalent<K>>(
        &self,
        key: &Q,
    ) -> Option<(i64, u64)> {
        let slot = self.find(self.hash_of(key), key)?;
        let node = self.nodes[self.meta[slot as usize].pos as usize];
        Some((node.due, self.seq_of(&node)))
    }

    /// Due time and payload of `key`'s entry, for any `Q` the index can
    /// match against a key. Runs user code and changes nothing.
    pub(crate) fn get_value_equivalent<Q: ?Sized + Hash + Equivalent<K>>(
        &self,
        key: &Q,
    ) -> Option<(i64, &V)> {
        let slot = self.find(self.hash_of(key), key)?;
        let node = self.nodes[self.meta[slot as usize].pos as usize];
        Some((node.due, &self.slots[slot as usize].value))
    }

    /// Move `key`'s entry to `due`, keeping its payload and its stamp (so a
    /// stamp held elsewhere still names it); the old due time, or `None` if
    /// `key` has no entry. O(log n). `key` as for
    /// [`contains_key`](Self::contains_key). A panic of the key's `Hash` or
    /// `Eq` leaves the heap as it was.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::heap::IndexedHeap;
    /// let mut heap = IndexedHeap::new();
    /// heap.insert(String::from("a"), 10, 'a');
    /// heap.insert(String::from("b"), 20, 'b');
    /// assert_eq!(heap.reschedule("b", 5), Some(20));
    /// assert_eq!(heap.peek(), Some((5, &String::from("b"))));
    /// ```
    pub fn reschedule<Q>(&mut self, key: &Q, due: i64) -> Option<i64>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        self.reschedule_equivalent(key, due)
    }

    /// [`reschedule`](Self::reschedule) for any `Q` the index can match
    /// against a key.
    pub(crate) fn reschedule_equivalent<Q: ?Sized + Hash + Equivalent<K>>(
        &mut self,
        key: &Q,
        due: i64,
    ) -> Option<i64> {
        let probe = self.probe(key);
        self.reschedule_probed(probe, due)
    }

    /// Due time of the entry `probe` found, if it found one. Runs no user
    /// code.
    pub(crate) fn due_probed(&self, probe: &Probe) -> Option<i64> {
        let slot = probe.slot?;
        Some(self.nodes[self.meta[slot as usize].pos as usize].due)
    }

    /// [`reschedule`](Self::reschedule) of the entry `probe` found in the
    /// unchanged heap, if it found one. Runs no user code.
    pub(crate) fn reschedule_probed(&mut self, probe: Probe, due: i64) -> Option<i64> {
        #[cfg(debug_assertions)]
        debug_assert_eq!(
            probe.at,
            (self.len(), self.next_seq),
            "the heap changed since the probe"
        );
        let slot = probe.slot?;
        let pos = self.meta[slot as usize].pos as usize;
        let before = self.nodes[pos];
        self.nodes[pos].due = due;
        // The same stamp: the due times alone say which way it moves.
        if due < before.due {
            self.sift_up(pos);
        } else {
            self.sift_down(pos);
        }
        Some(before.due)
    }

    /// Insert `key`, or replace its due time and payload if present (the
    /// heap then keeps its own key and hands `key` back in
    /// [`Inserted::Replaced`]).
    ///
    /// # Panics
    ///
    /// Panics if the heap already holds [`MAX_LEN`] entries and `key` is new
    /// (after dropping `key` and `value`); use
    /// [`try_insert`](Self::try_insert) to bound the size instead. A panic
    /// in the key's `Hash` or `Eq` propagates; the heap is then unchanged.
    pub fn insert(&mut self, key: K, due: i64, value: V) -> Inserted<K, V> {
        match self.try_insert(key, due, value, MAX_LEN) {
            Ok(done) => done,
            Err(refused) => {
                // Dropped before panicking, so that a panicking drop does
                // not run during the unwind.
                drop(refused);
                panic!("IndexedHeap is full ({MAX_LEN} entries)")
            }
        }
    }

    /// Like [`insert`](Self::insert), but a new key is refused (and given
    /// back with its payload) when the heap already holds `limit` entries.
    /// Replacing a present key always succeeds.
    ///
    /// # Errors
    ///
    /// `key` and `value`, given back, when `key` is new and the heap holds
    /// `limit` entries (or [`MAX_LEN`]); the heap is unchanged.
    ///
    /// # Panics
    ///
    /// A panic in the key's `Hash` or `Eq` propagates; the heap is then
    /// unchanged.
    #[inline]
    pub fn try_insert(
        &mut self,
        key: K,
        due: i64,
        value: V,
        limit: usize,
    ) -> Result<Inserted<K, V>, (K, V)> {
        let probe = self.probe(&key);
        self.try_insert_probed(probe, key, due, value, limit)
    }

    /// The user-code half of an insert: hash `key` and look it up. An owner
    /// that must not drop the key and payload while a panic unwinds through
    /// its lock probes first (inside `catch_unwind`), then calls
    /// [`try_insert_probed`](Self::try_insert_probed) before any other
    /// change to the heap.
    #[inline]
    pub(crate) fn probe<Q: ?Sized + Hash + Equivalent<K>>(&self, key: &Q) -> Probe {
        let hash = self.hash_of(key);
        Probe {
            hash,
            slot: self.find(hash, key),
            #[cfg(debug_assertions)]
            at: (self.len(), self.next_seq),
        }
    }

    /// The half of [`try_insert`](Self::try_insert) that runs no user code,
    /// for `key` as `probe` found it in the unchanged heap.
    #[inline]
    pub(crate) fn try_insert_probed(
        &mut self,
        probe: Probe,
        key: K,
        due: i64,
        value: V,
        limit: usize,
    ) -> Result<Inserted<K, V>, (K, V)> {
        #[cfg(debug_assertions)]
        debug_assert_eq!(
            probe.at,
            (self.len(), self.next_seq),
            "the heap changed since the probe"
        );
        let seq = self.next_seq;
        if let Some(slot) = probe.slot {
            self.next_seq += 1;
            let m = self.meta[slot as usize];
            debug_assert_eq!(m.hash, probe.hash, "probe of another key");
            let old = std::mem::replace(&mut self.slots[slot as usize].value, value);
            let pos = m.pos as usize;
            let before = self.nodes[pos];
            let (old_due, old_seq) = (before.due, self.seq_of(&before));
            let (lo, hi) = split(seq);
            self.nodes[pos].due = due;
            self.nodes[pos].seq_lo = lo;
            self.meta[slot as usize].seq_hi = hi;
            // The new stamp is the latest: at an equal due time the entry
            // now orders after where it was, so it can only move down.
            if due < old_due {
                self.sift_up(pos);
            } else {
                self.sift_down(pos);
            }
            return Ok(Inserted::Replaced {
                seq,
                old_due,
                old_seq,
                old,
                key,
            });
        }
        if self.nodes.len() >= limit.min(MAX_LEN) {
            return Err((key, value));
        }
        self.next_seq += 1;
        self.push(key, due, seq, value, probe.hash);
        Ok(Inserted::New { seq })
    }

    /// Add an entry for a key known to be absent, filed under `hash`.
    #[inline]
    fn push(&mut self, key: K, due: i64, seq: u64, value: V, hash: u32) {
        let pos = self.nodes.len();
        debug_assert!(pos < MAX_LEN, "positions are u32");
        debug_assert_eq!(self.slots.len(), pos);
        debug_assert_eq!(self.meta.len(), pos);
        self.slots.push(Slot { key, value });
        let (seq_lo, seq_hi) = split(seq);
        self.meta.push(Meta {
            pos: pos as u32,
            hash,
            seq_hi,
        });
        let slot = pos as u32;
        self.index.insert(hash, slot);
        self.nodes.push(Node { due, seq_lo, slot });
        self.sift_up(pos);
    }

    /// Issue the next insertion stamp without inserting, for an owner that
    /// keeps some entries beside the heap in one stamp order with it.
    pub(crate) fn take_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq - 1
    }

    /// The earliest entry's due time and stamp. Runs no user code.
    pub(crate) fn peek_stamp(&self) -> Option<(i64, u64)> {
        self.nodes.first().map(|n| (n.due, self.seq_of(n)))
    }

    /// Put back an entry taken out earlier, keeping its stamp (so its place
    /// among equal due times, and handles that name it by stamp, stay valid).
    /// Returns the entry if `key` is present now, or `seq` was never issued.
    /// A panic in the key's `Hash` or `Eq` leaves the heap unchanged and
    /// drops the entry.
    pub(crate) fn restore(&mut self, entry: Entry<K, V>) -> Result<(), Entry<K, V>> {
        if entry.seq >= self.next_seq {
            return Err(entry);
        }
        let probe = self.probe(&entry.key);
        if probe.slot.is_some() {
            return Err(entry);
        }
        self.push(entry.key, entry.due, entry.seq, entry.value, probe.hash);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
