//! The module's heap: the server's allocator, with the blocks a call frees kept
//! for the next call.
//!
//! A sweep of a thousand jobs makes and frees some ten thousand small blocks
//! (commands, replies, ids), most of them alive together. Each one from the
//! server's allocator costs its bookkeeping (`zmalloc` counts every block), and
//! on glibc's malloc, with so many alive at once, its slow path: a block is
//! split from the top of the heap, and a request of a kilobyte or more first
//! merges every small free block (`malloc_consolidate`). Here a freed block of
//! up to 64 KiB goes on a list of its size class, and the next request of that
//! class takes it back: a call after the first finds its blocks ready.
//!
//! What is kept is bounded ([`KEPT_BYTES`] a class), and every block is the
//! server's, counted in `INFO memory`; it is kept until the server exits (a
//! `MODULE UNLOAD` leaves it allocated). Lists are per thread (module commands
//! run on the server's main thread).

#![cfg_attr(test, allow(dead_code))]

use std::alloc::{GlobalAlloc, Layout};
use std::cell::UnsafeCell;

use crate::ffi;

/// The size classes: a request takes the smallest that holds it; larger
/// requests go to the server's allocator as they are.
const CLASSES: [usize; 22] =
    [16, 32, 48, 64, 80, 96, 128, 160, 192, 256, 320, 384, 512, 768, 1024, 1536, 2048, 4096, 8192, 16384, 32768, 65536];

/// At most this many bytes are kept free in a class (the list holds at least 4
/// blocks): some 2.5 MiB in all.
const KEPT_BYTES: usize = 128 << 10;

/// The server's allocator aligns to 16 bytes (jemalloc, glibc malloc on x86-64
/// and aarch64), and every class is a multiple of 16; larger alignments, which
/// emq never asks for, are refused.
const MAX_ALIGN: usize = 16;

/// The allocator (`#[global_allocator]` in `lib.rs`).
pub struct Heap;

/// One class's free blocks: a stack of pointers, itself a server block.
#[derive(Clone, Copy)]
struct List {
    blocks: *mut *mut u8,
    len: usize,
}

struct Lists(UnsafeCell<[List; CLASSES.len()]>);

thread_local! {
    static LISTS: Lists = const { Lists(UnsafeCell::new([List { blocks: std::ptr::null_mut(), len: 0 }; CLASSES.len()])) };
}

/// The class of a block of `size` bytes, if it has one.
fn class(size: usize) -> Option<usize> {
    if size > CLASSES[CLASSES.len() - 1] {
        return None;
    }
    // Classes of 16 bytes apart up to 96, then a search over the few left.
    if size <= 96 {
        return Some(size.max(1).div_ceil(16) - 1);
    }
    CLASSES.iter().position(|&c| c >= size)
}

/// How many free blocks class `c` keeps.
fn kept(c: usize) -> usize {
    (KEPT_BYTES / CLASSES[c]).max(4)
}

impl Heap {
    /// A block of class `c`: a kept one, or a new one.
    fn take(c: usize) -> *mut u8 {
        let kept = LISTS.try_with(|l| {
            // SAFETY: this thread's lists, touched by nothing else while this runs
            // (the server's allocator never calls back into it).
            let list = unsafe { &mut (*l.0.get())[c] };
            if list.len == 0 {
                return None;
            }
            list.len -= 1;
            // SAFETY: the first `len` slots hold blocks.
            Some(unsafe { *list.blocks.add(list.len) })
        });
        match kept {
            Ok(Some(p)) => p,
            _ => ffi::server_alloc(CLASSES[c]),
        }
    }

    /// Keeps a block of class `c` for a later `take`, or frees it when the list is full.
    ///
    /// # Safety
    /// `p` is a block of class `c`, not used after.
    unsafe fn keep(c: usize, p: *mut u8) {
        let kept = LISTS.try_with(|l| {
            // SAFETY: as in `take`.
            let list = unsafe { &mut (*l.0.get())[c] };
            if list.blocks.is_null() {
                list.blocks = ffi::server_alloc(kept(c) * size_of::<*mut u8>()).cast();
                if list.blocks.is_null() {
                    return false;
                }
            }
            if list.len == kept(c) {
                return false;
            }
            // SAFETY: `len` is below the list's room.
            unsafe { *list.blocks.add(list.len) = p };
            list.len += 1;
            true
        });
        if kept != Ok(true) {
            // SAFETY: as the caller promises.
            unsafe { ffi::server_free(p) };
        }
    }
}

// SAFETY: every block is the server's (aligned to MAX_ALIGN), of at least the
// size asked: a class's blocks are all of the class's size, and a block goes back
// to the list of the class its layout's size gives, which is the class it was
// taken from (`realloc` moves a block whose class changes).
unsafe impl GlobalAlloc for Heap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() > MAX_ALIGN {
            return std::ptr::null_mut();
        }
        match class(layout.size()) {
            Some(c) => Self::take(c),
            None => ffi::server_alloc(layout.size()),
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match class(layout.size()) {
            // SAFETY: a block of this class, as `alloc` or `realloc` gave it.
            Some(c) => unsafe { Self::keep(c, ptr) },
            // SAFETY: a block of the server's, as `alloc` or `realloc` gave it.
            None => unsafe { ffi::server_free(ptr) },
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() > MAX_ALIGN {
            return std::ptr::null_mut();
        }
        match (class(layout.size()), class(new_size)) {
            (Some(a), Some(b)) if a == b => ptr,
            // SAFETY: a block of the server's of no class, and a new size of none.
            (None, None) => unsafe { ffi::server_realloc(ptr, new_size) },
            _ => {
                // SAFETY: a valid layout (the size is nonzero, the alignment as before).
                let new = unsafe { self.alloc(Layout::from_size_align_unchecked(new_size, layout.align())) };
                if !new.is_null() {
                    // SAFETY: both blocks hold the smaller size; they are distinct.
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                new
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_size_has_the_smallest_class_that_holds_it() {
        for size in 1..=CLASSES[CLASSES.len() - 1] {
            let c = class(size).expect("a class");
            assert!(CLASSES[c] >= size);
            assert!(c == 0 || CLASSES[c - 1] < size, "size {size}: class {} is not the smallest", CLASSES[c]);
        }
        assert_eq!(class(CLASSES[CLASSES.len() - 1] + 1), None);
        assert!(CLASSES.iter().all(|c| c % MAX_ALIGN == 0));
        assert!((0..CLASSES.len()).all(|c| kept(c) >= 4));
    }
}
