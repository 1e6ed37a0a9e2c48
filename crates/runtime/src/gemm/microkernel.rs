//! The GEMM path's micro-kernels: register-tiled outer products written with `std::arch`
//! intrinsics, one per tile ([`super::TILE`], [`super::TILE_AVX512`],
//! [`super::TILE_AVX512_NARROW`]) and per way of reading `A` (packed, in place through row and
//! K tables, in place with a row stride).
//!
//! Every function here is `unsafe`: the callers in `super` own the buffers and prove the bounds
//! (see each function's `# Safety`); the CPU features are checked once by `super::enabled` and
//! `super::avx512_available`.

use super::A_K_GROUP;

/// `C[0..mr][0..nr] (+)= sum_p A[p][0..mr]^T B[p][0..nr]`, packed A (groups of 4 `p` per row:
/// `A[p][i]` at `(p / 4) * 4 * mr + i * 4 + p % 4`) and B (`nr` per `p`), C with row stride
/// `ldc`; `(mr, nr)` one of the tiles: 6x16 (AVX2), 6x32, 12x32 or 12x16 (AVX-512).
///
/// # Safety
/// `a` must be valid for `mr * kc` floats, `b` for `nr * kc`, `c` for `mr` rows of `nr` floats
/// at stride `ldc`, not accessed concurrently; `kc` a multiple of 4; the CPU must have AVX2 and
/// FMA (`super::enabled`), and AVX-512F for the AVX-512 tiles.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn microkernel(
    mr: usize,
    nr: usize,
    kc: usize,
    a: usize,
    b: usize,
    c: usize,
    ldc: usize,
    accumulate: bool,
) {
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (mr, nr, kc, a, b, c, ldc, accumulate);
        unreachable!("the GEMM path is only enabled on x86_64 with AVX2 and FMA")
    }
    #[cfg(target_arch = "x86_64")]
    {
        let (a, b, c) = (a as *const f32, b as *const f32, c as *mut f32);
        match (mr, nr) {
            // SAFETY: the caller's contract, which includes AVX-512F for this tile.
            (6, 32) => unsafe { microkernel_avx512::<6, 2>(kc, a, b, c, ldc, accumulate) },
            // SAFETY: the caller's contract, which includes AVX-512F for this tile.
            (12, 32) => unsafe { microkernel_avx512::<12, 2>(kc, a, b, c, ldc, accumulate) },
            // SAFETY: forwarded from the caller's contract; AVX2+FMA checked by `enabled`.
            (6, 16) => unsafe { microkernel_avx2::<6, 2>(kc, a, b, c, ldc, accumulate) },
            // SAFETY: the caller's contract, which includes AVX-512F for this tile.
            (12, 16) => unsafe { microkernel_narrow_avx512(kc, a, b, c, ldc, accumulate) },
            _ => unreachable!("GEMM micro-kernel: no kernel for a {mr}x{nr} tile"),
        }
    }
}

/// The 12x16 tile (AVX-512: one 16-lane vector per row, 12 accumulators) with `A` read in place
/// along a row stride: `A[p][i]` is `a[i * lda + p]` (an operand contiguous along K whose rows
/// are `lda` apart: a linear layer's weight). For GEMMs with at most 16 columns (a batch-1
/// transformer's projections, N = tokens), where the 6x32 tile would be half padding and
/// packing `A` (used by one column panel only) would cost as much as the multiply.
///
/// # Safety
/// `a + i * lda + p` must be a float inside one live allocation for `i < 12`, `p < kc`; `b`
/// valid for `16 * kc` floats, `c` for 12 rows of 16 floats at stride `ldc`, not accessed
/// concurrently; the CPU must have AVX-512F.
pub(super) unsafe fn microkernel_strided(
    kc: usize,
    a: usize,
    lda: usize,
    b: usize,
    c: usize,
    ldc: usize,
    accumulate: bool,
) {
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (kc, a, lda, b, c, ldc, accumulate);
        unreachable!("the GEMM path is only enabled on x86_64 with AVX2 and FMA")
    }
    #[cfg(target_arch = "x86_64")]
    {
        let (a, b, c) = (a as *const f32, b as *const f32, c as *mut f32);
        // SAFETY: forwarded from the caller's contract, which includes AVX-512F.
        unsafe { microkernel_strided_avx512(kc, a, lda, b, c, ldc, accumulate) }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn microkernel_narrow_avx512(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    use std::arch::x86_64::*;
    let mut acc = [_mm512_setzero_ps(); 12];
    for g in 0..kc / A_K_GROUP {
        for kk in 0..A_K_GROUP {
            let p = g * A_K_GROUP + kk;
            // SAFETY: the caller guarantees `a` has 12*kc and `b` 16*kc floats (p < kc, and
            // g * 48 + i * 4 + kk < 12 * kc).
            unsafe {
                let bv = _mm512_loadu_ps(b.add(p * 16));
                for (i, row) in acc.iter_mut().enumerate() {
                    let ai = _mm512_set1_ps(*a.add(g * 12 * A_K_GROUP + i * A_K_GROUP + kk));
                    *row = _mm512_fmadd_ps(ai, bv, *row);
                }
            }
        }
    }
    // SAFETY: the caller guarantees `c` has a 12 x 16 tile at stride `ldc`.
    unsafe { store_tile_narrow(&acc, c, ldc, accumulate) };
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn microkernel_strided_avx512(
    kc: usize,
    a: *const f32,
    lda: usize,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    use std::arch::x86_64::*;
    let mut acc = [_mm512_setzero_ps(); 12];
    // Four row pointers, each also reaching the next two rows at one and two strides (an
    // addressing mode's index register): twelve pointers would not fit in registers.
    let q: [*const f32; 4] = std::array::from_fn(|j| a.wrapping_add(3 * j * lda));
    let (s1, s2) = (lda, 2 * lda);
    for p in 0..kc {
        // SAFETY: the caller guarantees `b` has 16*kc floats and that `a + i*lda + p` is
        // inside the operand for i < 12, p < kc: q[j] + t*lda + p is row 3j + t.
        unsafe {
            let bv = _mm512_loadu_ps(b.add(p * 16));
            for (j, qj) in q.iter().enumerate() {
                let r = qj.add(p);
                let a0 = _mm512_set1_ps(*r);
                let a1 = _mm512_set1_ps(*r.add(s1));
                let a2 = _mm512_set1_ps(*r.add(s2));
                acc[3 * j] = _mm512_fmadd_ps(a0, bv, acc[3 * j]);
                acc[3 * j + 1] = _mm512_fmadd_ps(a1, bv, acc[3 * j + 1]);
                acc[3 * j + 2] = _mm512_fmadd_ps(a2, bv, acc[3 * j + 2]);
            }
        }
    }
    // SAFETY: the caller guarantees `c` has a 12 x 16 tile at stride `ldc`.
    unsafe { store_tile_narrow(&acc, c, ldc, accumulate) };
}

/// Writes (or adds) a 12x16 tile of accumulators into `C`.
///
/// # Safety
/// `c` must be valid for 12 rows of 16 floats at stride `ldc`, not accessed concurrently.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn store_tile_narrow(
    acc: &[std::arch::x86_64::__m512; 12],
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    use std::arch::x86_64::*;
    for (i, row) in acc.iter().enumerate() {
        // SAFETY: the caller guarantees `c` has 12 rows of 16 floats at stride `ldc` (i < 12).
        unsafe {
            let cp = c.add(i * ldc);
            let mut r = *row;
            if accumulate {
                r = _mm512_add_ps(r, _mm512_loadu_ps(cp));
            }
            _mm512_storeu_ps(cp, r);
        }
    }
}

/// The shortest K block whose micro-kernel call prefetches its `C` tile ([`prefetch_tile`]):
/// shorter multiplies end before the prefetch could arrive (a convolution over one input
/// channel: K = 25).
// with the direct output: matmul 2048 0.93-0.97x -> 0.94-1.04x of numpy (see docs/performance.md)
const PREFETCH_C_MIN_K: usize = 64;

/// Prefetches the `rows x cols` tile of `C` at `c` (row stride `ldc`) into L1: a micro-kernel
/// call ends by loading (accumulating) and storing its tile, which was last touched a whole K
/// block ago and is usually in L3 or memory by then. Issued before the multiply, the misses
/// overlap it instead of stalling the end of every call (the BLIS kernels do the same).
/// Prefetching is a hint: any address is safe.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_tile(c: *mut f32, ldc: usize, rows: usize, cols: usize) {
    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
    for i in 0..rows {
        let row = c.wrapping_add(i * ldc);
        // SAFETY: a prefetch never faults or reads memory architecturally; the addresses need
        // not be valid.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(row.cast::<i8>());
            _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(cols - 1).cast::<i8>());
        }
    }
}

/// Which later rows of `A` the in-place micro-kernel prefetches (hints only: any value is
/// safe).
#[derive(Clone, Copy, Debug)]
pub(super) enum Prefetch {
    /// None.
    Off,
    /// At each `p`, the float at `base + 4 * (row + ks[p])`: one row of a later panel (a
    /// convolution's window: the panel's rows are a few floats apart).
    OneRow(i64),
    /// At each `p`, the float at `base + 4 * (rows[p % 6] + ks[p])`, `rows` the 6 row-table
    /// entries of a later panel: every cache line of its rows (each 16-float line holds some
    /// `p` of every residue mod 6), for rows far apart that stream from memory once each.
    AllRows([i64; 6]),
}

/// [`microkernel`]'s 6-row tiles (`nr` 16: AVX2, 32: AVX-512) with `A` read in place:
/// `A[p][i]` is the float at `base + 4 * (rows[i] + ks[p])`, prefetching later rows as
/// `prefetch` says, so that a later panel's `A` is in cache when its turn comes.
///
/// # Safety
/// `rows` must be valid for 6 `i64`, `ks` for `kc`, every `base + 4 * (rows[i] + ks[p])` a
/// float inside one live allocation; `b` and `c` as for [`microkernel`] with `mr = 6` (any
/// `kc`).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn microkernel_in_place(
    nr: usize,
    kc: usize,
    base: usize,
    rows: usize,
    prefetch: Prefetch,
    ks: usize,
    b: usize,
    c: usize,
    ldc: usize,
    accumulate: bool,
) {
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (nr, kc, base, rows, prefetch, ks, b, c, ldc, accumulate);
        unreachable!("the GEMM path is only enabled on x86_64 with AVX2 and FMA")
    }
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the caller guarantees `rows` holds 6 entries.
        let rows = unsafe { std::slice::from_raw_parts(rows as *const i64, 6) };
        let base = base as *const f32;
        let r: [*const f32; 6] = std::array::from_fn(|i| base.wrapping_offset(rows[i] as isize));
        let (ks, b, c) = (ks as *const i64, b as *const f32, c as *mut f32);
        // (the prefetched addresses are only hints: any value is safe)
        let (mode, pf_rows) = match prefetch {
            Prefetch::Off => (0, [0; 6]),
            Prefetch::OneRow(row) => (1, [row; 6]),
            Prefetch::AllRows(rows) => (2, rows),
        };
        let pf: [*const f32; 6] = pf_rows.map(|row| base.wrapping_offset(row as isize));
        match (nr, mode) {
            // SAFETY: forwarded from the caller's contract, which includes AVX-512F for nr = 32.
            (32, 0) => unsafe {
                microkernel_in_place_avx512::<0>(kc, &r, &pf, ks, b, c, ldc, accumulate)
            },
            // SAFETY: as above.
            (32, 1) => unsafe {
                microkernel_in_place_avx512::<1>(kc, &r, &pf, ks, b, c, ldc, accumulate)
            },
            // SAFETY: as above.
            (32, _) => unsafe {
                microkernel_in_place_avx512::<2>(kc, &r, &pf, ks, b, c, ldc, accumulate)
            },
            // SAFETY: forwarded from the caller's contract; AVX2+FMA checked by `enabled`.
            (16, 0) => unsafe {
                microkernel_in_place_avx2::<0>(kc, &r, &pf, ks, b, c, ldc, accumulate)
            },
            // SAFETY: as above.
            (16, 1) => unsafe {
                microkernel_in_place_avx2::<1>(kc, &r, &pf, ks, b, c, ldc, accumulate)
            },
            // SAFETY: as above.
            (16, _) => unsafe {
                microkernel_in_place_avx2::<2>(kc, &r, &pf, ks, b, c, ldc, accumulate)
            },
            _ => unreachable!("GEMM micro-kernel: no kernel for nr = {nr}"),
        }
    }
}

/// The micro-kernels of one ISA with two `$lanes`-wide vectors per row: AVX2's 6x16 and
/// AVX-512's 6x32 and 12x32 tiles are the same code with other intrinsics. Each expansion
/// defines the packed kernel `$packed` (generic over its rows `R`: 6 or 12, 12 or 24
/// accumulators), the in-place kernel `$in_place` (6 rows, A through its row and K tables) and
/// the tile store `$store_tile`, all `unsafe` with `target_feature(enable = $feature)`; their
/// callers (`microkernel`, `microkernel_in_place`) dispatch on the tile only where that
/// feature was detected.
macro_rules! six_row_kernels {
    (
        feature: $feature:literal,
        vector: $vector:ident,
        lanes: $lanes:literal,
        zero: $zero:ident,
        load: $load:ident,
        splat: $splat:ident,
        fma: $fma:ident,
        add: $add:ident,
        store: $store:ident,
        packed: $packed:ident,
        in_place: $in_place:ident,
        store_tile: $store_tile:ident $(,)?
    ) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $feature)]
        unsafe fn $packed<const R: usize, const V: usize>(
            kc: usize,
            a: *const f32,
            b: *const f32,
            c: *mut f32,
            ldc: usize,
            accumulate: bool,
        ) {
            use std::arch::x86_64::*;
            let nr = V * $lanes;
            let mut acc = [[$zero(); V]; R];
            if kc >= PREFETCH_C_MIN_K {
                prefetch_tile(c, ldc, R, nr);
            }
            for g in 0..kc / A_K_GROUP {
                for kk in 0..A_K_GROUP {
                    let p = g * A_K_GROUP + kk;
                    // SAFETY: the caller guarantees `a` has R*kc and `b` nr*kc floats (p < kc,
                    // and g * R * 4 + i * 4 + kk < R * kc; v * lanes < nr).
                    unsafe {
                        let bv: [_; V] = std::array::from_fn(|v| $load(b.add(p * nr + v * $lanes)));
                        for (i, row) in acc.iter_mut().enumerate() {
                            let ai = $splat(*a.add(g * R * A_K_GROUP + i * A_K_GROUP + kk));
                            for (r, bj) in row.iter_mut().zip(bv) {
                                *r = $fma(ai, bj, *r);
                            }
                        }
                    }
                }
            }
            // SAFETY: the caller guarantees `c` has an R x nr tile at stride `ldc`.
            unsafe { $store_tile(&acc, c, ldc, accumulate) };
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $feature)]
        #[allow(clippy::too_many_arguments)]
        unsafe fn $in_place<const PREFETCH: u8>(
            kc: usize,
            r: &[*const f32; 6],
            pf: &[*const f32; 6],
            ks: *const i64,
            b: *const f32,
            c: *mut f32,
            ldc: usize,
            accumulate: bool,
        ) {
            use std::arch::x86_64::*;
            let nr = 2 * $lanes;
            let mut acc = [[$zero(); 2]; 6];
            if kc >= PREFETCH_C_MIN_K {
                prefetch_tile(c, ldc, 6, nr);
            }
            let [r0, r1, r2, r3, r4, r5] = *r;
            // the later panel's row prefetched at this `p` with PREFETCH = 2 (`p % 6`)
            let mut pf_row = 0;
            for p in 0..kc {
                // SAFETY: the caller guarantees `ks` has kc entries, `b` nr*kc floats and
                // every row pointer moved by a `ks` entry a float inside the operand.
                unsafe {
                    let off = *ks.add(p) as isize;
                    // a later panel's row at the same k: rows read in place from a big operand
                    // (a convolution's input) miss in every cache at a block's first panel
                    if PREFETCH == 1 {
                        _mm_prefetch::<_MM_HINT_T0>(pf[0].wrapping_offset(off).cast::<i8>());
                    }
                    // every row of a later panel in turn: rows far apart streamed from memory
                    // (a weight read once) are short streams the hardware prefetcher follows
                    // too late
                    if PREFETCH == 2 {
                        _mm_prefetch::<_MM_HINT_T0>(pf[pf_row].wrapping_offset(off).cast::<i8>());
                        pf_row = if pf_row == 5 { 0 } else { pf_row + 1 };
                    }
                    let bv: [_; 2] = std::array::from_fn(|v| $load(b.add(p * nr + v * $lanes)));
                    for (row, rp) in acc.iter_mut().zip([r0, r1, r2, r3, r4, r5]) {
                        let ai = $splat(*rp.wrapping_offset(off));
                        for (r, bj) in row.iter_mut().zip(bv) {
                            *r = $fma(ai, bj, *r);
                        }
                    }
                }
            }
            // SAFETY: the caller guarantees `c` has a 6 x nr tile at stride `ldc`.
            unsafe { $store_tile(&acc, c, ldc, accumulate) };
        }

        /// Writes (or adds) an R x (V x lanes) tile of accumulators into `C`.
        ///
        /// # Safety
        /// `c` must be valid for R rows of V x lanes floats at stride `ldc`, not accessed
        /// concurrently.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $feature)]
        unsafe fn $store_tile<const R: usize, const V: usize>(
            acc: &[[std::arch::x86_64::$vector; V]; R],
            c: *mut f32,
            ldc: usize,
            accumulate: bool,
        ) {
            use std::arch::x86_64::*;
            for (i, row) in acc.iter().enumerate() {
                for (v, &acc_v) in row.iter().enumerate() {
                    // SAFETY: the caller guarantees `c` has R rows of V x lanes floats at
                    // stride `ldc` (i < R, v < V).
                    unsafe {
                        let cp = c.add(i * ldc + v * $lanes);
                        let r = if accumulate {
                            $add(acc_v, $load(cp))
                        } else {
                            acc_v
                        };
                        $store(cp, r);
                    }
                }
            }
        }
    };
}

six_row_kernels!(
    feature: "avx2,fma",
    vector: __m256,
    lanes: 8,
    zero: _mm256_setzero_ps,
    load: _mm256_loadu_ps,
    splat: _mm256_set1_ps,
    fma: _mm256_fmadd_ps,
    add: _mm256_add_ps,
    store: _mm256_storeu_ps,
    packed: microkernel_avx2,
    in_place: microkernel_in_place_avx2,
    store_tile: store_tile,
);

six_row_kernels!(
    feature: "avx512f",
    vector: __m512,
    lanes: 16,
    zero: _mm512_setzero_ps,
    load: _mm512_loadu_ps,
    splat: _mm512_set1_ps,
    fma: _mm512_fmadd_ps,
    add: _mm512_add_ps,
    store: _mm512_storeu_ps,
    packed: microkernel_avx512,
    in_place: microkernel_in_place_avx512,
    store_tile: store_tile_avx512,
);
