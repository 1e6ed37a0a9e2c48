//! Transparent huge pages for large host allocations.
//!
//! A kernel streaming a buffer of tens of MiB through 4 KiB pages takes a TLB miss every 4 KiB,
//! and the hardware prefetchers stop at every page boundary. Backed by 2 MiB pages the same
//! stream reads faster: a 2-thread sum of 64 MiB on the development machine (AMD EPYC, Zen,
//! AVX2; Linux with transparent huge pages in `madvise` mode, the common default) went from
//! 21.1 to 24.7 GB/s, PyTorch's rate there (PyTorch and numpy ask for huge pages the same way).
//!
//! So every fresh host allocation of at least [`MIN_BYTES`] is advised `MADV_HUGEPAGE` before
//! it is written (buffers, the GEMM path's scratch). The advice covers the 2 MiB-aligned part
//! of the allocation; it changes how the kernel backs page faults, never the contents.
//! `CPU_HUGE_PAGES=0` turns it off; on other systems it does nothing.
//!
//! Best effort: memory the allocator hands out again (glibc serves allocations below its
//! dynamic mmap threshold, up to 32 MiB, from its heap) may already be backed by small pages,
//! which the advice then only lets the kernel's background `khugepaged` merge; and the advice
//! stays on that heap range for whatever is allocated there later (more resident memory at
//! worst, never other contents).

use std::sync::OnceLock;

/// The huge page size advised for (x86_64 and aarch64 Linux).
pub const HUGE_PAGE_BYTES: usize = 2 << 20;

/// Allocations smaller than this are left alone (at least two huge pages, so that some aligned
/// huge page lies inside).
// 2-thread sum of 64 MiB 21.1 -> 24.7 GB/s on Zen 2 (see docs/performance.md)
pub const MIN_BYTES: usize = 2 * HUGE_PAGE_BYTES;

/// Whether allocations are advised (`CPU_HUGE_PAGES` not `0`, and the system is Linux).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        cfg!(target_os = "linux") && std::env::var("CPU_HUGE_PAGES").map_or(true, |v| v != "0")
    })
}

/// The 2 MiB-aligned part `[start, end)` of the `len` bytes at `addr` (empty when none).
fn aligned_part(addr: usize, len: usize) -> (usize, usize) {
    let start = addr.next_multiple_of(HUGE_PAGE_BYTES);
    let end = (addr + len) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
    (start, end.max(start))
}

/// Advises the kernel to back `mem` (memory this process owns, not yet touched for best
/// effect) with huge pages. Best effort: errors (an old kernel, THP disabled) are ignored, as
/// the advice changes nothing but speed.
pub fn advise<T>(mem: &mut [T]) {
    let bytes = std::mem::size_of_val(mem);
    if bytes < MIN_BYTES || !enabled() {
        return;
    }
    let (start, end) = aligned_part(mem.as_mut_ptr() as usize, bytes);
    if end > start {
        advise_range(start, end - start);
    }
}

#[cfg(target_os = "linux")]
fn advise_range(start: usize, len: usize) {
    // SAFETY: `[start, start + len)` is page-aligned and lies inside the slice `advise` (the
    // only caller) holds mutably for this call, memory this process owns; MADV_HUGEPAGE only
    // changes how future page faults in the range are served, never the memory's contents or
    // its mapping's permissions, so no Rust object observes any change.
    let _ = unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
}

#[cfg(not(target_os = "linux"))]
fn advise_range(_start: usize, _len: usize) {}

/// A zeroed `Vec` of `n` elements, advised for huge pages before it is written.
///
/// # Errors
/// When the memory cannot be reserved (the allocator's message).
pub fn try_zeroed<T: Copy + Default>(n: usize) -> Result<Vec<T>, String> {
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(n).map_err(|e| e.to_string())?;
    advise(&mut v.spare_capacity_mut()[..n]);
    v.resize(n, T::default());
    Ok(v)
}

/// `n` zeroed `f32` for scratch memory, advised for huge pages. Allocated zeroed by the
/// allocator: a fresh mapping from the OS is zero without being written, so there the advice
/// comes before the first touch (memory reused from the allocator's heap is zeroed by it).
///
/// When the memory cannot be allocated the process aborts, as with `vec!` (the GEMM scratch's
/// behaviour before huge pages; buffers use the fallible [`try_zeroed`]).
pub fn zeroed_f32(n: usize) -> Vec<f32> {
    let mut v = vec![0.0f32; n];
    advise(&mut v);
    v
}

#[cfg(test)]
mod tests {
    use super::{HUGE_PAGE_BYTES, aligned_part, try_zeroed};

    #[test]
    fn the_advised_part_is_aligned_and_inside_the_allocation() {
        const H: usize = HUGE_PAGE_BYTES;
        assert_eq!(aligned_part(H, 3 * H), (H, 4 * H));
        assert_eq!(aligned_part(H + 8, 3 * H), (2 * H, 4 * H));
        // nothing aligned inside: an empty range
        let (s, e) = aligned_part(H + 8, H);
        assert_eq!(s, e);
        for (addr, len) in [(4096, 5 * H + 7), (H - 1, 2 * H + 1), (7 * H + 64, 9 * H)] {
            let (s, e) = aligned_part(addr, len);
            assert!(s >= addr && e <= addr + len && s.is_multiple_of(H) && e.is_multiple_of(H));
        }
    }

    #[test]
    fn advised_allocations_are_zeroed() {
        let v: Vec<f32> = try_zeroed(3 * HUGE_PAGE_BYTES / 4 + 5).unwrap();
        assert_eq!(v.len(), 3 * HUGE_PAGE_BYTES / 4 + 5);
        assert!(v.iter().all(|&x| x == 0.0));
    }
}
