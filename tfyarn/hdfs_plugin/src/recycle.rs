//! The plugin's global allocator: the system's, except that packet-sized
//! buffers are kept for reuse instead of being handed back at once.
//!
//! hdfs-native reads every DataNode packet into a new zeroed buffer (128 KiB
//! here). Once a process has used `tf.data.Dataset.from_generator` (as
//! `tfyarn.data` does), TensorFlow has fixed glibc's mmap threshold at 128 KiB
//! for the whole process ("Memory patch applied" in its log), so each of those
//! buffers became an mmap, 32 page faults and an munmap: 1,400 of each per
//! 200 MB pass, which went from 1.5 to 1.8 CPU-s (measured). Reusing freed
//! buffers of the same size saves those calls for all but each pass's first
//! burst (1.7 CPU-s). Only this library's allocations come here; memory passed
//! to TensorFlow is malloc'ed (ffi.rs).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};

/// Sizes worth keeping: a packet buffer is 64 KiB to a few MiB.
const MIN_SIZE: usize = 64 << 10;
const MAX_SIZE: usize = 4 << 20;
/// At most this many kept buffers (32 MiB at 128 KiB each); beyond it the
/// oldest is given back.
const SLOTS: usize = 256;
/// malloc's alignment on x86_64 and aarch64 glibc: any kept block serves any
/// request aligned to at most this.
const MALLOC_ALIGN: usize = 16;

pub struct Recycling {
    lock: AtomicBool,
    /// (size, block); size 0 is an empty slot.
    slots: UnsafeCell<[(usize, *mut u8); SLOTS]>,
    /// The slot to give back next when all are taken (round robin = oldest).
    evict: UnsafeCell<usize>,
}

// The slots are only touched with `lock` held.
unsafe impl Sync for Recycling {}

impl Recycling {
    pub const fn new() -> Self {
        Recycling {
            lock: AtomicBool::new(false),
            slots: UnsafeCell::new([(0, ptr::null_mut()); SLOTS]),
            evict: UnsafeCell::new(0),
        }
    }

    fn kept(layout: &Layout) -> bool {
        (MIN_SIZE..=MAX_SIZE).contains(&layout.size()) && layout.align() <= MALLOC_ALIGN
    }

    fn with_slots<T>(&self, f: impl FnOnce(&mut [(usize, *mut u8); SLOTS], &mut usize) -> T) -> T {
        while self.lock.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            std::hint::spin_loop();
        }
        // SAFETY: the lock is held until the store below.
        let out = unsafe { f(&mut *self.slots.get(), &mut *self.evict.get()) };
        self.lock.store(false, Ordering::Release);
        out
    }

    /// A kept block of exactly `size` bytes, if any.
    fn take(&self, size: usize) -> *mut u8 {
        self.with_slots(|slots, _| {
            for slot in slots.iter_mut() {
                if slot.0 == size {
                    let block = slot.1;
                    *slot = (0, ptr::null_mut());
                    return block;
                }
            }
            ptr::null_mut()
        })
    }

    /// Keep `block`; returns the block given back in its place (or null).
    fn keep(&self, size: usize, block: *mut u8) -> (usize, *mut u8) {
        self.with_slots(|slots, evict| {
            if let Some(slot) = slots.iter_mut().find(|s| s.0 == 0) {
                *slot = (size, block);
                return (0, ptr::null_mut());
            }
            let old = std::mem::replace(&mut slots[*evict], (size, block));
            *evict = (*evict + 1) % SLOTS;
            old
        })
    }
}

impl Default for Recycling {
    fn default() -> Self {
        Self::new()
    }
}

unsafe impl GlobalAlloc for Recycling {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if Self::kept(&layout) {
            let block = self.take(layout.size());
            if !block.is_null() {
                return block;
            }
        }
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if Self::kept(&layout) {
            let block = self.take(layout.size());
            if !block.is_null() {
                ptr::write_bytes(block, 0, layout.size());
                return block;
            }
        }
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        if !Self::kept(&layout) {
            return System.dealloc(block, layout);
        }
        let (size, old) = self.keep(layout.size(), block);
        if !old.is_null() {
            System.dealloc(old, Layout::from_size_align_unchecked(size, MALLOC_ALIGN));
        }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        if !Self::kept(&layout) && !Self::kept(&new_layout) {
            return System.realloc(block, layout, new_size);
        }
        let new = self.alloc(new_layout);
        if !new.is_null() {
            ptr::copy_nonoverlapping(block, new, layout.size().min(new_size));
            self.dealloc(block, layout);
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_packet_buffer_serves_the_next_request_of_its_size_zeroed() {
        let pool = Recycling::new();
        let layout = Layout::from_size_align(128 << 10, 1).unwrap();
        unsafe {
            let a = pool.alloc(layout);
            a.write_bytes(7, layout.size());
            pool.dealloc(a, layout);
            let b = pool.alloc_zeroed(layout);
            assert_eq!(a, b);
            assert!(std::slice::from_raw_parts(b, layout.size()).iter().all(|&x| x == 0));
            pool.dealloc(b, layout);
        }
    }

    #[test]
    fn other_sizes_and_a_full_pool_go_back_to_the_system() {
        let pool = Recycling::new();
        let small = Layout::from_size_align(4096, 8).unwrap();
        let big = Layout::from_size_align(MIN_SIZE, 8).unwrap();
        unsafe {
            let s = pool.alloc(small);
            pool.dealloc(s, small);
            assert!(pool.take(4096).is_null());
            let blocks: Vec<_> = (0..SLOTS + 3).map(|_| pool.alloc(big)).collect();
            for &b in &blocks {
                pool.dealloc(b, big);
            }
            let kept: Vec<_> = (0..SLOTS).map(|_| pool.take(MIN_SIZE)).collect();
            assert!(kept.iter().all(|p| !p.is_null()));
            assert!(pool.take(MIN_SIZE).is_null());
            for b in kept {
                System.dealloc(b, big);
            }
        }
    }
}
