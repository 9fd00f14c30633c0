//! The allocator of guests built for `wasm32-unknown-unknown`.
//!
//! Every reconcile runs in a fresh instance that the host throws away after
//! the call, so a guest's heap lives for one call. This allocator hands out
//! memory upwards from `__heap_base`, using the linear memory the module
//! starts with (see `--initial-memory` in `.cargo/config.toml`) before it
//! grows memory, and reuses a freed block only when it is the most recent
//! one (so a growing `Vec` or `String` at the top extends in place). Rust's
//! default allocator on this target grows memory for its first allocation
//! and leaves the initial memory unused; a pooled instance slot that grows
//! costs the host an `mprotect` to grow and another to reset on every call.
//!
//! Freed blocks below the top are not reused: a call's total allocations,
//! not its peak, count against the guest's memory cap (64 MiB by default).

#![allow(unsafe_code)]

use core::alloc::{GlobalAlloc, Layout};
use core::arch::wasm32;
use core::cell::Cell;
use core::ptr::null_mut;

const PAGE: usize = 64 << 10;

unsafe extern "C" {
    /// First free byte after the data segments and the stack (wasm-ld).
    static __heap_base: u8;
}

/// A bump allocator over the instance's linear memory.
pub struct CallHeap {
    /// Next free address; 0 until the first allocation.
    next: Cell<usize>,
    /// End of the memory the heap may use without growing.
    end: Cell<usize>,
}

// SAFETY: wasm32 guests are single-threaded; no two calls run at once.
unsafe impl Sync for CallHeap {}

impl CallHeap {
    /// An allocator that starts at `__heap_base` on first use.
    pub const fn new() -> Self {
        Self {
            next: Cell::new(0),
            end: Cell::new(0),
        }
    }

    /// Makes `[.., to)` usable, growing memory if needed.
    fn reserve(&self, to: usize) -> bool {
        let end = self.end.get();
        if to <= end {
            return true;
        }
        let pages = (to - end).div_ceil(PAGE);
        if wasm32::memory_grow(0, pages) == usize::MAX {
            return false;
        }
        self.end.set(end + pages * PAGE);
        true
    }

    fn top(&self) -> usize {
        let next = self.next.get();
        if next != 0 {
            return next;
        }
        self.end.set(wasm32::memory_size(0) * PAGE);
        // SAFETY: only the symbol's address is taken, never its value.
        (&raw const __heap_base) as usize
    }
}

impl Default for CallHeap {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: blocks never overlap: each starts at or above the previous top and
// the top only moves down to the start of the block just freed.
unsafe impl GlobalAlloc for CallHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let start = (self.top() + layout.align() - 1) & !(layout.align() - 1);
        match start.checked_add(layout.size()) {
            Some(end) if self.reserve(end) => {
                self.next.set(end);
                start as *mut u8
            }
            _ => null_mut(),
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ptr as usize + layout.size() == self.next.get() {
            self.next.set(ptr as usize);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let at = ptr as usize;
        if at + layout.size() == self.next.get() {
            // The block on top grows or shrinks in place.
            return match at.checked_add(new_size) {
                Some(end) if self.reserve(end) => {
                    self.next.set(end);
                    ptr
                }
                _ => null_mut(),
            };
        }
        if new_size <= layout.size() {
            return ptr;
        }
        // SAFETY: the caller guarantees a valid layout for `new_size`.
        let new =
            unsafe { self.alloc(Layout::from_size_align_unchecked(new_size, layout.align())) };
        if !new.is_null() {
            // SAFETY: both blocks are live and do not overlap.
            unsafe { core::ptr::copy_nonoverlapping(ptr, new, layout.size()) };
        }
        new
    }
}

#[global_allocator]
static HEAP: CallHeap = CallHeap::new();
