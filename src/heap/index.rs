//! Open-addressing hash index from a key's hash to a slot number, with linear
//! probing and backward-shift deletion (no tombstones).
//!
//! Each bucket is eight bytes: the 32 bits of the key's hash the index files
//! the slot under (see [`short`]) beside the slot number. A probe compares
//! hashes inside the bucket it has already read, so walking a cluster
//! touches only the index's own cache lines, and the caller reads a slot
//! (to compare the key) only on a 32-bit hash match: a lookup costs one
//! miss in the index and one in the slot table. A resize or an erase
//! re-places buckets from the hashes they carry, without touching a key or
//! the caller's tables.
//!
//! The index never sees a key: it takes those 32 bits and asks its caller
//! to compare keys, so every call into user code happens in the caller,
//! before the caller changes anything.

use super::pages::{self, table, table_with_capacity, Shed, Table};

/// A bucket: the hash bits in the high half, the slot in the low half.
type Bucket = u64;

/// An empty bucket (no slot has the number `u32::MAX`: a heap holds fewer
/// than `u32::MAX` entries).
const EMPTY: Bucket = u64::MAX;

/// Most buckets in use, as a fraction: 3/4.
const LOAD_NUM: usize = 3;
const LOAD_DEN: usize = 4;

/// The index: buckets of hash bits and slot numbers.
#[derive(Debug)]
pub(super) struct SlotIndex {
    /// Power-of-two table, or empty.
    buckets: Table<Bucket>,
    /// Buckets in use.
    len: usize,
}

/// The part of a 64-bit hash the index keeps: the high half (foldhash and
/// SipHash mix both halves well).
#[inline]
pub(super) fn short(hash: u64) -> u32 {
    (hash >> 32) as u32
}

/// The bucket of `slot` filed under `h`.
#[inline]
fn bucket(h: u32, slot: u32) -> Bucket {
    (u64::from(h) << 32) | u64::from(slot)
}

/// The hash bits a full bucket is filed under.
#[inline]
fn hash_of(b: Bucket) -> u32 {
    (b >> 32) as u32
}

/// The slot a full bucket holds.
#[inline]
fn slot_of(b: Bucket) -> u32 {
    b as u32
}

/// A table of `n` empty buckets.
fn empty_buckets(n: usize) -> Table<Bucket> {
    let mut buckets = table_with_capacity(n);
    buckets.resize(n, EMPTY);
    buckets
}

impl Default for SlotIndex {
    fn default() -> Self {
        SlotIndex {
            buckets: table(),
            len: 0,
        }
    }
}

impl SlotIndex {
    /// Entries held.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Bytes allocated.
    pub(super) fn allocated_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<Bucket>()
    }

    #[inline]
    fn mask(&self) -> usize {
        self.buckets.len() - 1
    }

    /// The slot filed under `h` for which `is_key` holds.
    #[inline]
    pub(super) fn find(&self, h: u32, is_key: impl FnMut(u32) -> bool) -> Option<u32> {
        self.find_bucket(h, is_key)
            .map(|i| slot_of(self.buckets[i]))
    }

    /// The bucket filed under `h` whose slot `is_key` accepts. Reads only:
    /// a panic in `is_key` leaves the index as it was.
    #[inline]
    fn find_bucket(&self, h: u32, mut is_key: impl FnMut(u32) -> bool) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let mask = self.mask();
        let mut i = h as usize & mask;
        loop {
            let b = self.buckets[i];
            if b == EMPTY {
                return None;
            }
            if hash_of(b) == h && is_key(slot_of(b)) {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// Add `slot` under the hash bits `h`; the caller guarantees its key is
    /// absent. Inlined into the heap's insert; growing, rare, is out of line.
    #[inline]
    pub(super) fn insert(&mut self, h: u32, slot: u32) {
        debug_assert!(slot != u32::MAX, "slot numbers are below u32::MAX");
        if (self.len + 1) * LOAD_DEN > self.buckets.len() * LOAD_NUM {
            self.grow();
        }
        debug_assert!(self.len < self.buckets.len(), "a full index cannot probe");
        self.place(bucket(h, slot));
        self.len += 1;
    }

    /// Resize for one more entry than it holds (the load limit reached).
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let n = ((self.len + 1) * LOAD_DEN / LOAD_NUM + 1)
            .next_power_of_two()
            .max(16);
        let _ = self.resize(n);
    }

    /// Put `b` at the first free position of its hash's probe sequence.
    #[inline]
    fn place(&mut self, b: Bucket) {
        let mask = self.mask();
        let mut i = hash_of(b) as usize & mask;
        while self.buckets[i] != EMPTY {
            i = (i + 1) & mask;
        }
        self.buckets[i] = b;
    }

    /// Remove the entry for which `is_key` holds; returns its slot. Every
    /// call of `is_key` comes before the index changes.
    #[inline]
    pub(super) fn remove(&mut self, h: u32, is_key: impl FnMut(u32) -> bool) -> Option<u32> {
        let i = self.find_bucket(h, is_key)?;
        let slot = slot_of(self.buckets[i]);
        self.erase(i);
        Some(slot)
    }

    /// Point the entry of slot `old` (filed under `h`) at slot `new`
    /// instead.
    pub(super) fn repoint(&mut self, h: u32, old: u32, new: u32) {
        let found = self.find_bucket(h, |s| s == old);
        debug_assert!(found.is_some(), "slot {old} is not indexed under its hash");
        if let Some(i) = found {
            self.buckets[i] = bucket(h, new);
        }
    }

    /// Empty bucket `i` and shift later members of its cluster back, so no
    /// probe sequence is broken and no tombstone is left.
    fn erase(&mut self, mut i: usize) {
        let mask = self.mask();
        self.len -= 1;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let b = self.buckets[j];
            if b == EMPTY {
                break;
            }
            let home = hash_of(b) as usize & mask;
            // Move `b` into the hole unless its home lies cyclically in (i, j].
            let stays = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !stays {
                self.buckets[i] = b;
                i = j;
            }
        }
        self.buckets[i] = EMPTY;
    }

    /// True when the table is a 32nd full or less (and not small): what
    /// [`shrink_if_sparse`](Self::shrink_if_sparse) waits for.
    #[inline]
    pub(super) fn is_sparse(&self) -> bool {
        let n = self.buckets.len();
        n > 64 && self.len * 32 < n
    }

    /// Shrink the table once it is a 32nd full, returning what it shed for
    /// the caller to free (outside its lock: unmapping can stall). Rarely,
    /// and only when few entries are left to re-place.
    ///
    /// The slots indexed must be exactly `0..len()` (the heap's dense slot
    /// table), `hash` giving each one's hash bits: they are re-placed by
    /// number, so the old buckets, at least 32 times as many as entries,
    /// are not read at all (scanning them would be most of a shrink's
    /// work, done under the pool's lock). They are re-placed at the front
    /// of the table itself, whose pages are already in memory, and the
    /// table then sheds the rest (`pages::shrink`): a fresh table would
    /// fault its pages in under the lock.
    pub(super) fn shrink_if_sparse(&mut self, hash: impl Fn(u32) -> u32) -> Shed<Bucket> {
        let n = self.buckets.len();
        if self.is_sparse() {
            let want = ((self.len * LOAD_DEN / LOAD_NUM + 1).next_power_of_two() * 2).max(16);
            if want < n {
                self.buckets.truncate(want);
                self.buckets.fill(EMPTY);
                let slots = u32::try_from(self.len).expect("fewer slots than u32::MAX");
                for slot in 0..slots {
                    self.place(bucket(hash(slot), slot));
                }
                return pages::shrink(&mut self.buckets, want);
            }
        }
        Shed::Nothing
    }

    /// Re-place every bucket in a table of `n` buckets; returns the old,
    /// emptied table.
    fn resize(&mut self, n: usize) -> Table<Bucket> {
        let mut old = std::mem::replace(&mut self.buckets, empty_buckets(n));
        for &b in &old {
            if b != EMPTY {
                self.place(b);
            }
        }
        old.clear();
        old
    }

    /// Every indexed slot, for invariant checks: each must pass `ok`, be
    /// filed under its hash bits (by `hash`), and be reachable from that
    /// hash's home bucket without crossing an empty bucket.
    pub(super) fn check(
        &self,
        hash: impl Fn(u32) -> u32,
        mut ok: impl FnMut(u32) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut n = 0;
        for (i, &b) in self.buckets.iter().enumerate() {
            if b == EMPTY {
                continue;
            }
            n += 1;
            let slot = slot_of(b);
            ok(slot)?;
            if hash(slot) != hash_of(b) {
                return Err(format!("slot {slot} is filed under another hash"));
            }
            let mask = self.mask();
            let mut j = hash_of(b) as usize & mask;
            while j != i {
                if self.buckets[j] == EMPTY {
                    return Err(format!("slot {slot} is cut off from its home bucket"));
                }
                j = (j + 1) & mask;
            }
        }
        if n != self.len {
            return Err(format!("index counts {} entries, holds {n}", self.len));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_find_remove_against_a_vector() {
        let mut ix = SlotIndex::default();
        // Hashes that collide on purpose: only 64 distinct values.
        let hash = |k: u32| k % 64;
        let mut live = Vec::new();
        for k in 0..5000u32 {
            ix.insert(hash(k), k);
            live.push(k);
            if k % 3 == 0 {
                let gone = live.swap_remove((k as usize * 7) % live.len());
                assert_eq!(ix.remove(hash(gone), |s| s == gone), Some(gone));
            }
        }
        ix.check(hash, |_| Ok(())).unwrap();
        for &k in &live {
            assert_eq!(ix.find(hash(k), |s| s == k), Some(k));
        }
        assert_eq!(ix.len(), live.len());
        for k in live.drain(..) {
            assert_eq!(ix.remove(hash(k), |s| s == k), Some(k));
        }
        assert_eq!(ix.len(), 0);
        assert!(!matches!(ix.shrink_if_sparse(hash), Shed::Nothing));
        assert!(ix.allocated_bytes() <= 64 * 8);
    }

    #[test]
    fn a_sparse_index_of_dense_slots_shrinks_and_still_finds_each() {
        let mut ix = SlotIndex::default();
        let hash = |k: u32| k.wrapping_mul(0x9E37_79B9) % 97;
        for k in 0..4096u32 {
            ix.insert(hash(k), k);
        }
        // Slots leave from the top, as the heap's dense table's do.
        for k in (100..4096u32).rev() {
            assert_eq!(ix.remove(hash(k), |s| s == k), Some(k));
        }
        let before = ix.allocated_bytes();
        assert!(!matches!(ix.shrink_if_sparse(hash), Shed::Nothing));
        assert!(ix.allocated_bytes() < before / 8);
        ix.check(hash, |_| Ok(())).unwrap();
        for k in 0..100u32 {
            assert_eq!(ix.find(hash(k), |s| s == k), Some(k));
        }
        assert_eq!(ix.find(hash(100), |s| s == 100), None);
    }
}
