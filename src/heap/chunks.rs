//! The slot table, in chunks of at least 64 KiB.
//!
//! Slots hold the keys and payloads, most of an entry's bytes (56 of 84
//! in the pool's heap). In one vector, every growth copied all of them
//! into a buffer twice the size, and every shrink into one half the size,
//! under the heap owner's lock: the shrink of a 32,768-entry table to
//! 16,384 spent about 75 of its 100 µs copying slots on this project's
//! guest, while the pool's due tasks waited on that lock. In chunks,
//! growing adds a chunk and a draining table gives each chunk up once it
//! and the one before it are empty: no slot moves but by a removal's swap.
//! Only the first chunk grows as a vector does (from four slots), and a
//! table that fits in it shrinks with the heap's other tables, so a small
//! heap stays small.
//!
//! A slot is found by its number's high bits (its chunk) and low bits (its
//! place): one more load than a vector's, from a table of a few thousand
//! bytes that stays in cache.

use super::pages::{self, table, table_with_capacity, Shed, Table};
use std::ops::{Index, IndexMut};

/// The fewest bytes a chunk holds. glibc's `free` consolidates and gives
/// memory back to the system only for a block of 64 KiB or more; smaller
/// chunks, freed one by one as a heap drains, piled up unreturned until
/// the next large free returned them all at once: 1.2-2 ms in one `free`
/// (with the allocator's lock held) where the tables freed before took
/// 30-90 µs, and the pool's due tasks stalled for it.
const CHUNK_BYTES: usize = 64 * 1024;

/// Bits of a slot number that pick its place in a chunk of `T`s: enough
/// for [`CHUNK_BYTES`] (at least 64 elements, at most 65,536).
const fn chunk_bits<T>() -> u32 {
    let size = if std::mem::size_of::<T>() == 0 {
        1
    } else {
        std::mem::size_of::<T>()
    };
    let want = CHUNK_BYTES.div_ceil(size).next_power_of_two();
    let bits = want.trailing_zeros();
    if bits < 6 {
        6
    } else if bits > 16 {
        16
    } else {
        bits
    }
}

/// A vector in chunks: every chunk before the last element's is full,
/// and at most one empty chunk follows that one. The length is read off
/// the chunks, so that the table is a vector's size: the heap sits in the
/// pool's state beside the fields every start and admission touches, and
/// eight more bytes there moved them across cache lines (the one-per-call
/// burst ran 2.0-2.5 against 2.8 M tasks/s, the same with eight bytes of
/// padding and a single vector).
pub(super) struct Chunks<T> {
    /// The chunks, each of capacity [`CHUNK`](Self::CHUNK) (the first
    /// one's grows to it).
    chunks: Vec<Table<T>>,
}

impl<T> Chunks<T> {
    /// Bits of a slot number that pick its place in its chunk.
    const BITS: u32 = chunk_bits::<T>();

    /// Elements a chunk holds.
    pub(super) const CHUNK: usize = 1 << Self::BITS;

    /// Mask of an element number's place in its chunk.
    const PLACE: usize = Self::CHUNK - 1;

    /// Empty, with no chunk.
    pub(super) const fn new() -> Self {
        Chunks { chunks: Vec::new() }
    }

    /// Elements held: all in the chunks before the last that holds any
    /// (full), and those in it.
    #[inline]
    pub(super) fn len(&self) -> usize {
        let n = self.chunks.len();
        let spare = n > 1 && self.chunks[n - 1].is_empty();
        let holding = n - usize::from(spare);
        match holding {
            0 => 0,
            k => (k - 1) * Self::CHUNK + self.chunks[k - 1].len(),
        }
    }

    /// Elements the chunks can hold without allocating.
    pub(super) fn capacity(&self) -> usize {
        self.chunks.iter().map(Table::capacity).sum()
    }

    /// The element at `i`, if there is one.
    #[inline]
    pub(super) fn get(&self, i: usize) -> Option<&T> {
        self.chunks.get(i >> Self::BITS)?.get(i & Self::PLACE)
    }

    /// Append `value` at `len()`, adding a chunk if the last is full.
    #[inline]
    pub(super) fn push(&mut self, value: T) {
        let c = self.len() >> Self::BITS;
        if c == self.chunks.len() {
            self.add_chunk();
        }
        let chunk = &mut self.chunks[c];
        if chunk.len() == chunk.capacity() {
            Self::grow_first(chunk);
        }
        chunk.push(value);
    }

    /// A new last chunk: the first starts empty and grows as a vector
    /// does ([`grow_first`](Self::grow_first)), the others are allocated
    /// whole.
    #[cold]
    fn add_chunk(&mut self) {
        let chunk = match self.chunks.is_empty() {
            true => table(),
            false => table_with_capacity(Self::CHUNK),
        };
        self.chunks.push(chunk);
    }

    /// Double the first chunk's capacity (the only one not allocated
    /// whole), up to a chunk's.
    #[cold]
    fn grow_first(chunk: &mut Table<T>) {
        let want = (chunk.capacity() * 2).clamp(4, Self::CHUNK);
        chunk.reserve_exact(want - chunk.len());
    }

    /// Remove the element at `i` and put the last one in its place; with
    /// it, the last chunk if that and the one before it are now both
    /// empty, to be freed (one empty chunk stays, so that a table going
    /// back and forth across a chunk's edge does not allocate and free at
    /// each crossing).
    ///
    /// # Panics
    ///
    /// If `i` is out of bounds.
    #[inline]
    pub(super) fn swap_remove(&mut self, i: usize) -> (T, Option<Table<T>>) {
        let len = self.len();
        assert!(i < len, "swap_remove at {i} of {len}");
        let last = len - 1;
        let tail = self.chunks[last >> Self::BITS].pop();
        let tail = tail.expect("the last element's chunk holds it");
        let given = match self.chunks.len() > last.div_ceil(Self::CHUNK) + 1 {
            true => self.chunks.pop(),
            false => None,
        };
        if i == last {
            return (tail, given);
        }
        (std::mem::replace(&mut self[i], tail), given)
    }

    /// If every element fits in `to` and `to` is less than the first
    /// chunk's capacity, shrink the first chunk to `to` (in place, if it
    /// stays large enough for a mapping of its own: `pages::shrink`), as a
    /// vector shrinks: a small table gives memory back with the heap's
    /// other tables, where a table of many chunks gives up each as it
    /// empties ([`swap_remove`](Self::swap_remove)). The chunks given up,
    /// and what the first one shed, to be freed.
    pub(super) fn shrink_small(&mut self, to: usize) -> (Vec<Table<T>>, Shed<T>) {
        let first = self.chunks.first().map_or(0, Table::capacity);
        if self.len() > to || to >= first {
            return (Vec::new(), Shed::Nothing);
        }
        // `len <= to < first <= CHUNK`: all of them are in the first chunk.
        let given: Vec<Table<T>> = self.chunks.drain(1..).collect();
        (given, pages::shrink(&mut self.chunks[0], to))
    }

    /// The elements in order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }
}

impl<T> Index<usize> for Chunks<T> {
    type Output = T;

    #[inline]
    fn index(&self, i: usize) -> &T {
        &self.chunks[i >> Self::BITS][i & Self::PLACE]
    }
}

impl<T> IndexMut<usize> for Chunks<T> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i >> Self::BITS][i & Self::PLACE]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_behave_as_a_vector_under_pushes_and_swap_removes() {
        let mut c = Chunks::new();
        let mut v = Vec::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for step in 0..50_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Grow for the first half, shrink for the second.
            let grow = (step < 25_000) != x.is_multiple_of(4);
            if grow || v.is_empty() {
                c.push(step);
                v.push(step);
            } else {
                let i = (x >> 8) as usize % v.len();
                assert_eq!(c.swap_remove(i).0, v.swap_remove(i));
            }
            assert_eq!(c.len(), v.len());
        }
        assert!(c.iter().eq(v.iter()));
        for (i, e) in v.iter().enumerate() {
            assert_eq!(c.get(i), Some(e));
            assert_eq!(c[i], *e);
        }
        assert_eq!(c.get(v.len()), None);
    }

    #[test]
    fn chunks_hold_at_least_64_kib_in_a_power_of_two_of_elements() {
        assert_eq!(Chunks::<u32>::CHUNK, 16_384);
        assert_eq!(Chunks::<[u8; 56]>::CHUNK, 2_048);
        assert_eq!(Chunks::<[u8; 4096]>::CHUNK, 64, "at least 64");
        assert_eq!(Chunks::<()>::CHUNK, 65_536, "at most 65,536");
    }

    #[test]
    fn a_small_table_stays_small_and_empty_chunks_are_given_up_but_one() {
        const CHUNK: usize = Chunks::<u32>::CHUNK;
        let mut c = Chunks::new();
        for i in 0..3u32 {
            c.push(i);
        }
        assert!(c.capacity() < 16, "{}", c.capacity());
        for i in 3..(3 * CHUNK as u32) {
            c.push(i);
        }
        assert_eq!(c.capacity(), 3 * CHUNK);
        // Down into the first chunk: the third is given up, the second
        // (empty) stays.
        let mut released = 0;
        while c.len() > CHUNK / 2 {
            released += c.swap_remove(0).1.map_or(0, |chunk| {
                assert!(chunk.is_empty() && chunk.capacity() == CHUNK);
                1
            });
        }
        assert_eq!(released, 1);
        assert_eq!(c.capacity(), 2 * CHUNK);
        // Growing back fills the kept chunk without allocating.
        for i in 0..CHUNK as u32 {
            c.push(i);
        }
        assert_eq!(c.capacity(), 2 * CHUNK);
    }

    #[test]
    fn a_table_that_fits_its_first_chunk_shrinks_as_a_vector_and_grows_back() {
        const CHUNK: usize = Chunks::<u32>::CHUNK;
        let mut c = Chunks::new();
        for i in 0..(CHUNK + 10) as u32 {
            c.push(i);
        }
        assert!(c.shrink_small(2 * CHUNK).0.is_empty(), "not smaller");
        assert!(c.shrink_small(100).0.is_empty(), "does not fit");
        while c.len() > 100 {
            c.swap_remove(c.len() - 1);
        }
        // The second chunk, empty, is kept as the spare until the shrink.
        let (given, first) = c.shrink_small(256);
        assert_eq!(given.len(), 1);
        assert!(matches!(first, Shed::Buffer(_)), "too small to stay mapped");
        assert_eq!(c.capacity(), 256);
        assert!(c.iter().copied().eq(0..100u32));
        for i in 100..(2 * CHUNK) as u32 {
            c.push(i);
        }
        assert!(c.iter().copied().eq(0..(2 * CHUNK) as u32));
        assert_eq!(
            c.capacity(),
            2 * CHUNK,
            "the first chunk grew to a chunk's size"
        );
    }
}
