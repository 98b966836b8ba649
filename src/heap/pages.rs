//! Where the heap's tables live: a table of [`MAP_MIN`] bytes or more gets
//! an anonymous mapping of its own from the kernel, unmapped when the
//! table is freed; a smaller one comes from the global allocator.
//!
//! A heap that held millions of entries and then emptied must give that
//! memory back to the system, whatever the process's allocator made of the
//! pattern. glibc's `malloc` does not: it serves a block of 128 KiB or more
//! from a mapping of its own only until the first such block is freed,
//! which raises that threshold to the freed block's size (up to 32 MiB)
//! and the threshold for giving back the top of its heap to twice that.
//! From then on every table a growing heap allocates comes from the brk
//! heap, and after a mass removal most of it stays resident, wave after
//! wave (`docs/bench/lab-notes.md`, "Memory after cancel-all"). A library
//! must not change those thresholds for the whole process (`mallopt`), so
//! the heap allocates its large tables itself: each is one mapping, its
//! pages go back to the system the moment it is freed, whichever allocator
//! the process links, and a table that grows or shrinks moves with
//! `mremap`, which moves page mappings instead of copying bytes.
//!
//! A table shrinks in place ([`shrink`]): it keeps its pages up to its
//! new end and gives up the rest as a [`Tail`], which its owner unmaps
//! after releasing its lock. Nothing is copied and no fresh page is faulted
//! in while the lock is held, and no unmapping happens under it either
//! (unmapping waits until every CPU that ran the process has dropped its
//! cached translations, which on a virtual machine can take
//! milliseconds). A table too small to keep a mapping moves to a buffer of
//! the global allocator, and its old one is given up whole.
//!
//! The tables are `allocator_api2`'s `Vec` with this allocator ([`Table`]),
//! so that the heap keeps a vector's API and this module holds the only
//! `unsafe` of the heap: the allocator's contract, the split of a mapping
//! in [`shrink`], and the system calls. Elsewhere than Linux, and under
//! loom, every table comes from the global allocator.

use allocator_api2::alloc::{AllocError, Allocator, Global, Layout};
use std::ptr::NonNull;

/// A vector whose buffer comes from [`Pages`].
pub(crate) type Table<T> = allocator_api2::vec::Vec<T, Pages>;

/// An empty [`Table`].
pub(crate) const fn table<T>() -> Table<T> {
    Table::new_in(Pages)
}

/// An empty [`Table`] with room for `capacity` elements.
pub(crate) fn table_with_capacity<T>(capacity: usize) -> Table<T> {
    Table::with_capacity_in(capacity, Pages)
}

/// The fewest bytes a table must need to get a mapping of its own. At 64
/// KiB the system calls of a mapping (and the page faults every fresh
/// buffer pays anyway) are small beside the work of filling it, and the
/// slot table's chunks (`chunks.rs`, 64 KiB at least) are all mapped.
pub(crate) const MAP_MIN: usize = 64 * 1024;

/// True where large tables get mappings of their own (Linux, not under
/// loom).
#[cfg(test)]
pub(crate) const MAPPED: bool = os::MAPS;

/// The allocator of the heap's tables: mappings of their own for buffers
/// of [`MAP_MIN`] bytes or more, the global allocator for the others.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Pages;

/// True if a buffer of `layout` gets (or got) a mapping of its own. Every
/// call for one buffer sees the same size (this allocator hands out
/// exactly the size asked for, so the caller frees it with that size), so
/// a buffer is always freed the way it was allocated.
///
/// A mapped buffer of `size` bytes is a private anonymous mapping of the
/// whole pages from its address up to `size` bytes past it, which
/// [`shrink`] relies on to split one in two.
#[inline]
fn mapped(layout: Layout) -> bool {
    os::MAPS && layout.size() >= MAP_MIN && layout.align() <= os::PAGE
}

/// Pages a table gave up by shrinking in place ([`shrink`]), unmapped
/// when this is dropped: outside the owner's lock.
#[derive(Debug)]
pub(crate) struct Tail {
    /// Address of the first page (kept as a number, so that this can be
    /// sent to the thread that drops it).
    start: usize,
    /// Bytes, a whole number of pages.
    len: usize,
}

impl Tail {
    /// Bytes of the pages.
    pub(crate) fn bytes(&self) -> usize {
        self.len
    }
}

impl Drop for Tail {
    fn drop(&mut self) {
        if let Some(start) = NonNull::new(self.start as *mut u8) {
            // SAFETY: these pages were split off the end of a mapping that
            // a table owned ([`shrink`]), and nothing else refers to them:
            // the table's buffer now ends before them.
            #[allow(unsafe_code)]
            unsafe {
                os::unmap(start, self.len)
            }
        }
    }
}

/// What [`shrink`] took away from a table, to free after the owner's lock.
#[derive(Debug)]
pub(crate) enum Shed<T> {
    /// Nothing: the table had no room to spare.
    Nothing,
    /// The table's old buffer, emptied (its elements moved to a new one).
    Buffer(Table<T>),
    /// The pages past the table's new end.
    Pages(Tail),
}

/// Give up `table`'s room beyond `capacity` elements (at least its
/// length), and hand it back to free later. A mapped table that stays large
/// enough for a mapping keeps its buffer where it is, its elements
/// untouched, and hands back the whole pages past its new end; any other
/// moves its elements into a buffer of `capacity` and hands back the old
/// one. A table of zero-sized elements holds no memory, and is left alone.
pub(crate) fn shrink<T>(table: &mut Table<T>, capacity: usize) -> Shed<T> {
    let capacity = capacity.max(table.len());
    let old = table.capacity();
    let size = std::mem::size_of::<T>();
    if capacity >= old || size == 0 {
        return Shed::Nothing;
    }
    let (Ok(was), Ok(now)) = (Layout::array::<T>(old), Layout::array::<T>(capacity)) else {
        return Shed::Nothing;
    };
    if !(mapped(was) && mapped(now)) {
        let mut smaller = table_with_capacity(capacity);
        smaller.append(table);
        return Shed::Buffer(std::mem::replace(table, smaller));
    }
    let page = os::page_size();
    let base = table.as_ptr() as usize;
    let keep = (base + now.size()).next_multiple_of(page);
    let end = (base + was.size()).next_multiple_of(page);
    let (ptr, len, _, alloc) = std::mem::replace(table, self::table()).into_raw_parts_with_alloc();
    // SAFETY: `ptr` is a mapped buffer of `was.size()` bytes that `Pages`
    // allocated (`mapped(was)`), that is a mapping of the pages from
    // `base` to `end`. The table keeps the pages up to `keep`: a mapping of
    // the whole pages up to `now.size()` bytes past `base`, which is what a
    // mapped buffer of `now.size()` bytes is (`mapped(now)`), so `Pages`
    // frees, grows or shrinks it as one of that size. Its `len` elements
    // lie below `now.size()` bytes (`capacity >= len`), and the alignment
    // is `T`'s as before.
    #[allow(unsafe_code)]
    let kept = unsafe { Table::from_raw_parts_in(ptr, len, capacity, alloc) };
    *table = kept;
    match end > keep {
        true => Shed::Pages(Tail {
            start: keep,
            len: end - keep,
        }),
        false => Shed::Nothing,
    }
}

// SAFETY (of the impl): a block from `allocate` is valid for reads and
// writes of `layout.size()` bytes, aligned to `layout.align()` (a mapping
// is page-aligned and `mapped` admits no larger alignment; the global
// allocator keeps its own contract), and stays valid until `deallocate`,
// `grow` or `shrink` is called on it. `Pages` has no state, so copies of
// it are interchangeable: any of them may free a block any other
// allocated, as the trait requires of clones.
#[allow(unsafe_code)]
unsafe impl Allocator for Pages {
    #[inline]
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if !mapped(layout) {
            return Global.allocate(layout);
        }
        let ptr = os::map(layout.size()).ok_or(AllocError)?;
        Ok(NonNull::slice_from_raw_parts(ptr, layout.size()))
    }

    #[inline]
    fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if !mapped(layout) {
            return Global.allocate_zeroed(layout);
        }
        // A fresh anonymous mapping reads as zeroes: writing them would
        // only fault every page in.
        self.allocate(layout)
    }

    #[inline]
    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if mapped(layout) {
            // SAFETY: the caller guarantees `ptr` is a live block of this
            // allocator freed with its size; `mapped` says it is a mapping
            // of that size, and nothing uses it after this call.
            unsafe { os::unmap(ptr, layout.size()) }
        } else {
            // SAFETY: the same block, which `Global` allocated.
            unsafe { Global.deallocate(ptr, layout) }
        }
    }

    unsafe fn grow(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: the caller's contract for `grow`, passed on.
        unsafe { self.resize(ptr, old, new) }
    }

    unsafe fn shrink(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: the caller's contract for `shrink`, passed on.
        unsafe { self.resize(ptr, old, new) }
    }
}

impl Pages {
    /// The block `ptr` of `old` moved to one of `new`, keeping the bytes
    /// both hold: a mapping that stays one is remapped (the kernel moves
    /// its pages; nothing is copied or faulted in), any other block is
    /// copied into a new one and freed.
    ///
    /// # Safety
    ///
    /// `ptr` is a live block of this allocator of layout `old`, and `new`
    /// has the same alignment (the contract of `Allocator::grow` and
    /// `Allocator::shrink`). On success the old block is gone.
    #[allow(unsafe_code)]
    unsafe fn resize(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        if mapped(old) && mapped(new) {
            // SAFETY: `ptr` is a mapping of `old.size()` bytes (the
            // caller's contract and `mapped`), which the remap takes over
            // whole; no pointer into it is used again.
            let moved = unsafe { os::remap(ptr, old.size(), new.size()) }.ok_or(AllocError)?;
            return Ok(NonNull::slice_from_raw_parts(moved, new.size()));
        }
        let fresh = self.allocate(new)?;
        // SAFETY: both blocks are live and valid for the smaller size, and
        // distinct (the new one was just allocated while the old one is
        // still held); then the old one is freed with its own layout, as
        // the caller's contract allows.
        unsafe {
            let n = old.size().min(new.size());
            std::ptr::copy_nonoverlapping(ptr.as_ptr(), fresh.cast::<u8>().as_ptr(), n);
            self.deallocate(ptr, old);
        }
        Ok(fresh)
    }
}

/// The system calls, through `nix`.
#[cfg(all(target_os = "linux", not(loom)))]
#[allow(unsafe_code)]
mod os {
    use nix::sys::mman::{mmap_anonymous, mremap, munmap, MRemapFlags, MapFlags, ProtFlags};
    use std::num::NonZeroUsize;
    use std::ptr::NonNull;

    /// Large tables are mapped here.
    pub(super) const MAPS: bool = true;

    /// The largest alignment a mapping is known to have: the smallest page
    /// size of any Linux target.
    pub(super) const PAGE: usize = 4096;

    /// The size of a page: what mappings are made of.
    pub(super) fn page_size() -> usize {
        use nix::unistd::{sysconf, SysconfVar};
        static SIZE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        *SIZE.get_or_init(|| match sysconf(SysconfVar::PAGE_SIZE) {
            Ok(Some(n)) if n > 0 => n as usize,
            _ => PAGE,
        })
    }

    /// A fresh private read-write anonymous mapping of `len` bytes
    /// (zero-filled), or `None` if the kernel refuses one.
    pub(super) fn map(len: usize) -> Option<NonNull<u8>> {
        let len = NonZeroUsize::new(len)?;
        let prot = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
        // SAFETY: with no address given the kernel places the mapping
        // where nothing is mapped, so it aliases no memory of the program.
        let ptr = unsafe { mmap_anonymous(None, len, prot, MapFlags::MAP_PRIVATE) };
        ptr.ok().map(NonNull::cast)
    }

    /// Unmap the mapping of `len` bytes at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` came from [`map`] or [`remap`] with `len`, and nothing uses
    /// it any more.
    pub(super) unsafe fn unmap(ptr: NonNull<u8>, len: usize) {
        // SAFETY: the caller's contract. It cannot fail for a whole
        // mapping the program owns; if it did, the pages would only stay
        // mapped (a leak, not a fault).
        let _ = unsafe { munmap(ptr.cast(), len) };
    }

    /// The mapping of `old` bytes at `ptr` resized to `new` bytes, moved
    /// if it must be, or `None` (it is then unchanged) if the kernel
    /// refuses.
    ///
    /// # Safety
    ///
    /// `ptr` came from [`map`] or [`remap`] with `old`; on success no
    /// pointer into the old address is used again.
    pub(super) unsafe fn remap(ptr: NonNull<u8>, old: usize, new: usize) -> Option<NonNull<u8>> {
        // SAFETY: the caller's contract; `MREMAP_MAYMOVE` without a fixed
        // address lets the kernel move it only to where nothing is mapped.
        let moved = unsafe { mremap(ptr.cast(), old, new, MRemapFlags::MREMAP_MAYMOVE, None) };
        moved.ok().map(NonNull::cast)
    }
}

/// No mappings of its own: every table comes from the global allocator.
#[cfg(not(all(target_os = "linux", not(loom))))]
#[allow(unsafe_code)] // the same signatures as Linux's; never called
mod os {
    use std::ptr::NonNull;

    /// Large tables are not mapped here.
    pub(super) const MAPS: bool = false;

    /// Unused without mappings.
    pub(super) const PAGE: usize = 4096;

    pub(super) fn page_size() -> usize {
        PAGE
    }

    pub(super) fn map(_: usize) -> Option<NonNull<u8>> {
        None
    }

    pub(super) unsafe fn unmap(_: NonNull<u8>, _: usize) {}

    pub(super) unsafe fn remap(_: NonNull<u8>, _: usize, _: usize) -> Option<NonNull<u8>> {
        None
    }
}

/// Ask the process's allocator to give the memory it holds free back to
/// the system, after a heap drained a large part of what it held
/// (`shrink.rs`): the payloads it dropped were allocations of their own
/// (a handle's shared state, a large closure), and glibc keeps small freed
/// blocks in its bins, inside its heap, until a trim walks them. Other
/// allocators (musl's, jemalloc, mimalloc) return memory by their own
/// policy and have no such call; there this does nothing.
pub(crate) fn trim_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu", not(loom)))]
    #[allow(unsafe_code)]
    // SAFETY: `malloc_trim` takes no pointer and only rearranges glibc's
    // own free lists, under the locks of its arenas.
    unsafe {
        nix::libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_keeps_its_elements_across_growth_and_shrinking_through_the_threshold() {
        let mut t: Table<u64> = table();
        // From a few elements (global allocator) to a few mappings' worth
        // (grown by remapping), back below the threshold and up again.
        let big = 3 * MAP_MIN / 8;
        for i in 0..big as u64 {
            t.push(i);
        }
        assert!(t.iter().copied().eq(0..big as u64));
        t.truncate(MAP_MIN / 8 + 100);
        t.shrink_to_fit();
        assert!(t.iter().copied().eq(0..(MAP_MIN / 8 + 100) as u64));
        t.truncate(100);
        t.shrink_to_fit();
        assert_eq!(t.capacity(), 100);
        assert!(t.iter().copied().eq(0..100));
        t.resize(MAP_MIN / 4, 7);
        assert!(t[..100].iter().copied().eq(0..100));
        assert!(t[100..].iter().all(|&x| x == 7));
        let zeroed: Table<u64> = {
            let mut z = table_with_capacity(MAP_MIN);
            z.resize(MAP_MIN, 0);
            z
        };
        assert!(zeroed.iter().all(|&x| x == 0));
    }

    #[test]
    fn shrinking_keeps_the_elements_and_sheds_pages_or_the_old_buffer() {
        let n = MAP_MIN; // u32s: four mappings' worth
        let mut t: Table<u32> = table_with_capacity(n);
        t.extend(0..(n / 8) as u32);
        let at = t.as_ptr();
        // Still a mapping: kept in place, the pages past its end shed.
        match (shrink(&mut t, n / 4), MAPPED) {
            (Shed::Pages(tail), true) => {
                assert_eq!(t.as_ptr(), at, "not moved");
                assert!(tail.bytes() >= (n - n / 4) * 4 - os::page_size());
            }
            (Shed::Buffer(old), false) => assert!(old.is_empty()),
            (other, mapped) => panic!("{other:?} (mapped: {mapped})"),
        }
        assert_eq!(t.capacity(), n / 4);
        assert!(t.iter().copied().eq(0..(n / 8) as u32));
        // It grows again (remapped) and shrinks again.
        t.extend((n / 8) as u32..n as u32);
        assert!(t.iter().copied().eq(0..n as u32));
        t.truncate(100);
        // Too small for a mapping: moved to the global allocator.
        match shrink(&mut t, 200) {
            Shed::Buffer(old) => assert!(old.is_empty() && old.capacity() >= n),
            other => panic!("expected the old buffer, got {other:?}"),
        }
        assert_eq!(t.capacity(), 200);
        assert!(t.iter().copied().eq(0..100));
        assert!(matches!(shrink(&mut t, 300), Shed::Nothing));
        assert!(
            matches!(shrink(&mut t, 0), Shed::Buffer(_)),
            "to its length"
        );
        assert_eq!(t.capacity(), 100);
    }

    #[test]
    fn a_large_table_is_page_aligned_and_a_small_one_is_not_mapped() {
        let large: Table<u8> = table_with_capacity(MAP_MIN);
        let small: Table<u8> = table_with_capacity(MAP_MIN - 1);
        if os::MAPS {
            assert_eq!(large.as_ptr() as usize % os::PAGE, 0);
        }
        assert!(mapped(Layout::array::<u8>(large.capacity()).unwrap()) == os::MAPS);
        assert!(!mapped(Layout::array::<u8>(small.capacity()).unwrap()));
    }
}
