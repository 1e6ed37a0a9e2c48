//! Reuse of freed host allocations: a fresh allocation of tens of MiB costs its page faults on
//! first touch (14-18 ms per 64 MiB on the development machine), as much as the kernel that
//! fills it. When a large [`Buffer`](crate::Buffer) is dropped its memory goes here, and the next
//! buffer of the same byte size that is about to be fully overwritten (a kernel's output, or
//! data copied in) takes it instead of asking the OS.
//!
//! Only allocations of at least [`MIN_POOLED_BYTES`] are kept (small ones are cheap to get from
//! the allocator), at most [`MAX_POOLED_BYTES`] in all; beyond that, freed memory goes back to the
//! OS. Reused memory holds stale data, so it is only handed to buffers whose every byte is
//! written before it is read; buffers read before they are written get zeroed memory.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::buffer::HostMem;

/// Allocations smaller than this (in bytes) are not pooled.
pub const MIN_POOLED_BYTES: usize = 64 * 1024;

/// At most this many bytes are kept in the pool.
pub const MAX_POOLED_BYTES: usize = 1 << 30;

#[derive(Default)]
struct Pool {
    /// Free allocations by length in `u64` words.
    free: HashMap<usize, Vec<HostMem>>,
    bytes: usize,
}

fn pool() -> &'static Mutex<Pool> {
    static POOL: OnceLock<Mutex<Pool>> = OnceLock::new();
    POOL.get_or_init(|| Mutex::new(Pool::default()))
}

static REUSED: AtomicUsize = AtomicUsize::new(0);

/// How many allocations have been served from the pool in this process (for tests and tools).
pub fn reuse_count() -> usize {
    REUSED.load(Ordering::Relaxed)
}

/// The bytes currently held by the pool.
pub fn pooled_bytes() -> usize {
    pool().lock().unwrap_or_else(|e| e.into_inner()).bytes
}

/// An allocation of `words` u64 words whose contents may be stale: the caller overwrites all of
/// it before reading. Falls back to a fresh (zeroed) allocation.
///
/// # Panics
/// If a fresh allocation fails (the message names the size, see `zeroed_words`).
pub fn alloc_uninit(words: usize, buf: &crate::Buffer) -> HostMem {
    take(words).unwrap_or_else(|| crate::buffer::zeroed_words(words, buf))
}

/// A pooled allocation of exactly `words` words (stale contents), if the pool has one.
pub(crate) fn take(words: usize) -> Option<HostMem> {
    if words * 8 < MIN_POOLED_BYTES {
        return None;
    }
    let mut p = pool().lock().unwrap_or_else(|e| e.into_inner());
    let mem = p.free.get_mut(&words).and_then(Vec::pop)?;
    p.bytes -= words * 8;
    REUSED.fetch_add(1, Ordering::Relaxed);
    Some(mem)
}

/// Gives a freed allocation back for reuse (or to the OS, when small or the pool is full).
pub fn release(mem: HostMem) {
    let bytes = mem.len() * 8;
    if bytes < MIN_POOLED_BYTES {
        return;
    }
    let mut p = pool().lock().unwrap_or_else(|e| e.into_inner());
    if p.bytes + bytes > MAX_POOLED_BYTES {
        return;
    }
    p.bytes += bytes;
    p.free.entry(mem.len()).or_default().push(mem);
}

/// Frees every pooled allocation.
pub fn clear() {
    let mut p = pool().lock().unwrap_or_else(|e| e.into_inner());
    p.free.clear();
    p.bytes = 0;
}

/// Gives memory that nothing uses back to the OS: every pooled allocation, and on glibc the free
/// pages of the allocator's heaps (`malloc_trim`). For after a phase that allocates much and
/// frees it (loading a model: the copies its weights go through; building a tokenizer): glibc
/// keeps freed small allocations in its heap, so without it the process stays as large as at
/// that phase's peak.
pub fn release_free_memory() {
    clear();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes no pointers and is thread-safe (it takes the allocator's
    // locks); it only returns pages holding no live allocation to the OS.
    unsafe {
        libc::malloc_trim(0);
    }
}
