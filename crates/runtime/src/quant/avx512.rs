//! The AVX-512 loops: each block's bytes widened to 16 int32 lanes at a time, converted to
//! float32 and multiplied with `x` in 512-bit registers.

use std::arch::x86_64::*;

use super::QuantType;
use super::portable::q4k_scales;

/// The half-precision float at `b[0..2]` as float32, by F16C's conversion (exact; the
/// portable `f16_at` scales subnormal halves through a float32 subnormal, which costs a
/// microcode assist per conversion on Intel cores: K-quant scales are often that small).
///
/// # Safety
/// The CPU has f16c.
#[inline(always)]
unsafe fn half(b: &[u8]) -> f32 {
    let h = u16::from_le_bytes([b[0], b[1]]);
    // SAFETY: the caller's guarantee (f16c); a register conversion.
    unsafe { _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(h)))) }
}

/// The 16 floats at `p`.
///
/// # Safety
/// The CPU has avx512f, and `p..p + 16` are readable floats.
#[inline(always)]
unsafe fn load(p: *const f32) -> __m512 {
    // SAFETY: the caller's guarantees.
    unsafe { _mm512_loadu_ps(p) }
}

/// 0.0, 1.0, ..., 15.0: the values a nibble takes, one per lane (the tables' arguments).
///
/// # Safety
/// The CPU has avx512f.
#[inline(always)]
unsafe fn iota16() -> __m512 {
    // SAFETY: the caller's guarantee (avx512f); a constant vector, no memory access.
    unsafe {
        _mm512_setr_ps(
            0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0,
        )
    }
}

/// Checks a tile's sizes: `rows` each `k / block` whole blocks of `ty`, `x` at least `M` rows
/// of `k`; returns the block's bytes and the blocks per row.
fn check_tile<const M: usize, const R: usize>(
    ty: QuantType,
    rows: &[&[u8]; R],
    x: &[f32],
    k: usize,
) -> (usize, usize) {
    let (bb, nb) = (ty.block_bytes(), k / ty.block());
    assert!(
        k.is_multiple_of(ty.block()) && rows.iter().all(|r| r.len() == nb * bb) && x.len() >= M * k,
        "quantized product: {R} rows of {} blocks against {M} rows of {k} values",
        ty.name(),
    );
    (bb, nb)
}

/// Each accumulator's lanes summed (`out[r][i]`, weight row `r`, x-row `i`).
///
/// # Safety
/// The CPU has avx512f.
#[inline(always)]
unsafe fn lane_sums<const M: usize, const R: usize>(acc: [[__m512; M]; R]) -> [[f32; M]; R] {
    // SAFETY: the caller's guarantee (avx512f); register reductions.
    std::array::from_fn(|r| std::array::from_fn(|i| unsafe { _mm512_reduce_add_ps(acc[r][i]) }))
}

/// Whether [`tile_dot`] takes weights of `ty` (the 32-weight block types; the K-quants are
/// multiplied row by row with [`row_dot`]).
pub(super) fn tile_dot_takes(ty: QuantType) -> bool {
    matches!(
        ty,
        QuantType::Q4_0 | QuantType::Q4_1 | QuantType::Q5_0 | QuantType::Q5_1 | QuantType::Q8_0
    )
}

/// Blocks whose scales [`block_scales`] converts at a time (a tile keeps them on the stack: 256
/// bytes per weight row).
// converted ahead: 1536x576 Q4_1 10.8 -> 19.6 G weights/s on one core (see docs/performance.md)
const SCALE_CHUNK: usize = 32;

/// How many blocks ahead of the block being read a tile asks for its weight rows' bytes (5 KiB
/// of Q4_1, 8.5 KiB of Q8_0): each thread streams its rows in order, and some kilobytes in
/// flight keep the memory busy (without it the products read half as fast from memory as from
/// the cache).
// one core, SmolLM2's products 7.2 -> 10 G weights/s from memory (see docs/performance.md)
const PREFETCH_BLOCKS: usize = 256;

/// The scale and minimum (0 for the types without one) of blocks `first..first + n` of a row
/// of `ty` blocks, as float32 pairs into `out[2 * j..2 * j + 2]`: converted ahead of the blocks'
/// values so that the loop over the values broadcasts them from memory (a load) instead of
/// converting and broadcasting each in registers (four shuffle-port operations a block,
/// which made the product bound by that port).
///
/// # Safety
/// The CPU has avx512f and f16c; `ty` is one [`tile_dot_takes`], `row` holds blocks
/// `first..first + n` and `n <= SCALE_CHUNK`.
#[inline(always)]
unsafe fn block_scales(
    ty: QuantType,
    row: &[u8],
    first: usize,
    n: usize,
    out: &mut [f32; 2 * SCALE_CHUNK],
) {
    let bb = ty.block_bytes();
    assert!(n <= SCALE_CHUNK && (first + n) * bb <= row.len());
    let has_min = matches!(ty, QuantType::Q4_1 | QuantType::Q5_1);
    for j in 0..n {
        // SAFETY: block first + j lies inside `row` (asserted above); its first 4 bytes are
        // the scale and the minimum, or the scale and 2 bytes of values (every block is at
        // least 18 bytes); F16C's conversion of the two halves is exact.
        unsafe {
            let pair = std::ptr::read_unaligned(row.as_ptr().add((first + j) * bb) as *const u32);
            let f = _mm_cvtph_ps(_mm_cvtsi32_si128(pair as i32));
            let f = if has_min {
                f
            } else {
                _mm_move_ss(_mm_setzero_ps(), f)
            };
            _mm_storel_epi64(
                out.as_mut_ptr().add(2 * j) as *mut __m128i,
                _mm_castps_si128(f),
            );
        }
    }
}

/// A 32-weight block's values (`blk` its bytes, `d` and `m` its scale and minimum as
/// [`block_scales`] gives them) as two vectors of 16. `EXACT`: dequantized exactly as
/// `gguf.quants` does (the portable `dequantize_block`: `d * (q - offset)`, or `d * q + m` with
/// the multiplication and the addition rounded separately: what the dequantization kernel
/// stores); else the types with a minimum take `d * q + m` as one fused multiply-add (rounded
/// once: within half an ulp of the exact value). The 4- and 5-bit types compute the 16 (32)
/// values a block can take once, as a table, and look each weight's up (`vpermps`, the
/// weight's bits as the index): one operation a weight where converting it to float32 and
/// scaling it are two.
///
/// # Safety
/// The CPU has avx512f/bw/vl, FMA and f16c; `ty` is one [`tile_dot_takes`] and `blk` holds a
/// whole block of it.
#[inline(always)]
unsafe fn block32<const EXACT: bool>(
    ty: QuantType,
    blk: &[u8],
    d: f32,
    m: f32,
) -> (__m512, __m512) {
    assert!(blk.len() >= ty.block_bytes());
    // SAFETY: the caller's guarantees: the 16 bytes of values start at `at` and end inside
    // the block (at 2, 4, 6 or 8 of an 18, 20, 22 or 24-byte block; Q8_0's 32 at 2 of 34),
    // asserted above.
    unsafe {
        let d = _mm512_set1_ps(d);
        if ty == QuantType::Q8_0 {
            let p = blk.as_ptr().add(2) as *const __m128i;
            let q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p)));
            let q1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p.add(1))));
            return (_mm512_mul_ps(q0, d), _mm512_mul_ps(q1, d));
        }
        let (has_min, five) = match ty {
            QuantType::Q4_0 => (false, false),
            QuantType::Q4_1 => (true, false),
            QuantType::Q5_0 => (false, true),
            _ => (true, true),
        };
        let mut at = if has_min { 4 } else { 2 };
        let qh = if five {
            let q = u32::from_le_bytes([blk[at], blk[at + 1], blk[at + 2], blk[at + 3]]);
            at += 4;
            q
        } else {
            0
        };
        // the table of the values 0..16 (and 16..32) take: `d * (q - offset)`, or `d * q + m`
        let iota = iota16();
        let (q_low, q_high) = match (has_min, five) {
            (true, _) => (iota, _mm512_add_ps(iota, _mm512_set1_ps(16.0))),
            (false, false) => (_mm512_sub_ps(iota, _mm512_set1_ps(8.0)), iota),
            (false, true) => (_mm512_sub_ps(iota, _mm512_set1_ps(16.0)), iota),
        };
        let value = |q: __m512| {
            if !has_min {
                _mm512_mul_ps(d, q)
            } else if EXACT {
                _mm512_add_ps(_mm512_mul_ps(d, q), _mm512_set1_ps(m))
            } else {
                _mm512_fmadd_ps(d, q, _mm512_set1_ps(m))
            }
        };
        // each weight's byte in a 32-bit lane: the low nibble is the low 4 bits (what
        // `vpermps` reads), the high nibble those bits after a shift
        let bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(blk.as_ptr().add(at) as *const __m128i));
        let high = _mm512_srli_epi32(bytes, 4);
        if five {
            // the fifth bit selects the second table (`vpermt2ps` reads 5 bits)
            let (table_low, table_high) = (value(q_low), value(q_high));
            let sixteen = _mm512_set1_epi32(16);
            let low = _mm512_and_si512(bytes, _mm512_set1_epi32(15));
            let low = _mm512_mask_add_epi32(low, (qh & 0xFFFF) as __mmask16, low, sixteen);
            let high = _mm512_mask_add_epi32(high, (qh >> 16) as __mmask16, high, sixteen);
            (
                _mm512_permutex2var_ps(table_low, low, table_high),
                _mm512_permutex2var_ps(table_low, high, table_high),
            )
        } else {
            let table = value(q_low);
            (
                _mm512_permutexvar_ps(bytes, table),
                _mm512_permutexvar_ps(high, table),
            )
        }
    }
}

/// A Q8_0 block's 32 values (`blk` its bytes), unscaled, as two vectors of 16.
///
/// # Safety
/// The CPU has avx512f; `blk` holds a whole Q8_0 block.
#[inline(always)]
unsafe fn q8_values(blk: &[u8]) -> (__m512, __m512) {
    assert!(blk.len() >= QuantType::Q8_0.block_bytes());
    // SAFETY: the caller's guarantee (avx512f); the 32 values are bytes 2..34 of the block,
    // inside it (asserted above).
    unsafe {
        let p = blk.as_ptr().add(2) as *const __m128i;
        (
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p))),
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p.add(1)))),
        )
    }
}

/// Blocks `w` of a [`tile_dot_takes`] type dequantized into `out` (their 32 values each, in
/// order) with [`block32`]: the same values as the portable loop, two 64-byte stores a block.
///
/// # Safety
/// The CPU has avx512f/bw/vl and f16c; `ty` is one [`tile_dot_takes`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma,f16c")]
pub(super) unsafe fn dequantize32(ty: QuantType, w: &[u8], out: &mut [f32]) {
    let bb = ty.block_bytes();
    assert!(
        tile_dot_takes(ty) && w.len().is_multiple_of(bb) && out.len() == w.len() / bb * 32,
        "dequantization: {} bytes of {} blocks into {} values",
        w.len(),
        ty.name(),
        out.len()
    );
    let nb = w.len() / bb;
    let mut dm = [0.0f32; 2 * SCALE_CHUNK];
    macro_rules! blocks {
        ($ty:expr) => {
            for first in (0..nb).step_by(SCALE_CHUNK) {
                let n = (nb - first).min(SCALE_CHUNK);
                // SAFETY: the caller's guarantees; blocks first..first + n are inside `w`.
                unsafe { block_scales($ty, w, first, n, &mut dm) };
                for j in 0..n {
                    let b = first + j;
                    let o = &mut out[b * 32..(b + 1) * 32];
                    // SAFETY: the caller's guarantees; block `b` is one whole block of `w` and
                    // `o` holds its 32 floats (two unaligned 64-byte stores in range).
                    unsafe {
                        let (lo, hi) = block32::<true>(
                            $ty,
                            &w[b * bb..(b + 1) * bb],
                            dm[2 * j],
                            dm[2 * j + 1],
                        );
                        _mm512_storeu_ps(o.as_mut_ptr(), lo);
                        _mm512_storeu_ps(o.as_mut_ptr().add(16), hi);
                    }
                }
            }
        };
    }
    match ty {
        QuantType::Q4_0 => blocks!(QuantType::Q4_0),
        QuantType::Q4_1 => blocks!(QuantType::Q4_1),
        QuantType::Q5_0 => blocks!(QuantType::Q5_0),
        QuantType::Q5_1 => blocks!(QuantType::Q5_1),
        _ => blocks!(QuantType::Q8_0),
    }
}

/// [`block32`]'s values in order, exact or fused (for the tests).
///
/// # Safety
/// As [`block32`]'s.
#[cfg(test)]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma,f16c")]
pub(super) unsafe fn block32_values(ty: QuantType, blk: &[u8], exact: bool) -> [f32; 32] {
    let mut out = [0.0f32; 32];
    let mut dm = [0.0f32; 2 * SCALE_CHUNK];
    // SAFETY: the caller's guarantees; `blk` is one whole block and `out` holds 32 floats (two
    // unaligned 64-byte stores).
    unsafe {
        block_scales(ty, blk, 0, 1, &mut dm);
        let (lo, hi) = if exact {
            block32::<true>(ty, blk, dm[0], dm[1])
        } else {
            block32::<false>(ty, blk, dm[0], dm[1])
        };
        _mm512_storeu_ps(out.as_mut_ptr(), lo);
        _mm512_storeu_ps(out.as_mut_ptr().add(16), hi);
    }
    out
}

/// The products of `R` weight rows (`rows[r]`, each `k / 32` blocks of `ty`) with `M` rows of
/// `x` (row `i` at `x[i * k..]`): `out[r][i]`. Each block of each weight row is dequantized
/// once, in registers, for all `M` rows of `x`, and each `x` block is loaded once for all `R`
/// weight rows (a register tile of `R * M` accumulators); the values are `block32`'s fused
/// ones (each within half an ulp of `gguf.quants`'), except Q8_0's, whose blocks are summed
/// unscaled and each block's sum scaled (`d * sum(q * x)`). Every product is summed in the same
/// order whatever `M` and `R` (16 lanes, each block's two halves in turn, then the lanes'
/// sum), so a row's product is the same bit for bit whether its token is decoded alone or
/// in a batch.
///
/// # Safety
/// The CPU has avx512f/bw/vl, FMA and F16C; `ty` is one [`tile_dot_takes`]; each of `rows`
/// holds `k / 32` whole blocks of `ty`, and `x` at least `M * k` elements.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma,f16c")]
pub(super) unsafe fn tile_dot<const M: usize, const R: usize>(
    ty: QuantType,
    rows: [&[u8]; R],
    x: &[f32],
    k: usize,
) -> [[f32; M]; R] {
    assert!(tile_dot_takes(ty));
    let (bb, nb) = check_tile::<M, R>(ty, &rows, x, k);
    let xp = x.as_ptr();
    let mut acc = [[_mm512_setzero_ps(); M]; R];
    let mut dm = [[0.0f32; 2 * SCALE_CHUNK]; R];
    // SAFETY: the CPU features are the caller's guarantee; every block read is block `b` of
    // `nb` of a row of nb * bb bytes (asserted above), every load of x is of row i's values
    // x[i * k + b * 32..][..32] inside `x` (M * k floats, asserted above); a prefetch is a hint
    // that never faults, whatever the address (computed without dereferencing it).
    unsafe {
        // the loop with the type a constant (a macro: one copy per type, each inlined in this
        // function's target features)
        macro_rules! tile {
            ($ty:expr) => {
                for first in (0..nb).step_by(SCALE_CHUNK) {
                    let n = (nb - first).min(SCALE_CHUNK);
                    for r in 0..R {
                        block_scales($ty, rows[r], first, n, &mut dm[r]);
                    }
                    for j in 0..n {
                        let b = first + j;
                        if $ty == QuantType::Q8_0 {
                            // each block as `d * sum(q * x)`: the 8-bit values have no table,
                            // and scaling the block's sum is one multiplication where scaling
                            // each value is two
                            let mut q = [(_mm512_setzero_ps(), _mm512_setzero_ps()); R];
                            for r in 0..R {
                                let blk = &rows[r][b * bb..(b + 1) * bb];
                                _mm_prefetch::<_MM_HINT_T0>(
                                    blk.as_ptr().wrapping_add(PREFETCH_BLOCKS * bb) as *const i8,
                                );
                                q[r] = q8_values(blk);
                            }
                            for i in 0..M {
                                let xb = xp.add(i * k + b * 32);
                                let (x0, x1) = (load(xb), load(xb.add(16)));
                                for r in 0..R {
                                    let sum =
                                        _mm512_fmadd_ps(q[r].1, x1, _mm512_mul_ps(q[r].0, x0));
                                    acc[r][i] = _mm512_fmadd_ps(
                                        _mm512_set1_ps(dm[r][2 * j]),
                                        sum,
                                        acc[r][i],
                                    );
                                }
                            }
                            continue;
                        }
                        let mut w = [(_mm512_setzero_ps(), _mm512_setzero_ps()); R];
                        for r in 0..R {
                            let blk = &rows[r][b * bb..(b + 1) * bb];
                            _mm_prefetch::<_MM_HINT_T0>(
                                blk.as_ptr().wrapping_add(PREFETCH_BLOCKS * bb) as *const i8,
                            );
                            w[r] = block32::<false>($ty, blk, dm[r][2 * j], dm[r][2 * j + 1]);
                        }
                        for i in 0..M {
                            let xb = xp.add(i * k + b * 32);
                            let (x0, x1) = (load(xb), load(xb.add(16)));
                            for r in 0..R {
                                acc[r][i] = _mm512_fmadd_ps(w[r].0, x0, acc[r][i]);
                                acc[r][i] = _mm512_fmadd_ps(w[r].1, x1, acc[r][i]);
                            }
                        }
                    }
                }
            };
        }
        match ty {
            QuantType::Q4_0 => tile!(QuantType::Q4_0),
            QuantType::Q4_1 => tile!(QuantType::Q4_1),
            QuantType::Q5_0 => tile!(QuantType::Q5_0),
            QuantType::Q5_1 => tile!(QuantType::Q5_1),
            _ => tile!(QuantType::Q8_0),
        }
    }
    // SAFETY: the CPU features are the caller's guarantee.
    unsafe { lane_sums(acc) }
}

/// Whether [`tile_dot_k`] takes weights of `ty` (the K-quants of 256-weight blocks).
pub(super) fn tile_dot_k_takes(ty: QuantType) -> bool {
    matches!(ty, QuantType::Q4K | QuantType::Q6K)
}

/// [`tile_dot`] for the K-quants: the products of `R` weight rows (`rows[r]`, each `k / 256`
/// blocks of `ty`) with `M` rows of `x`, each block's values computed once in registers for all
/// `M` rows and each `x` load shared by the `R` weight rows. A block's sub-block scales are
/// computed first (`gguf.quants`' `d * sc` and `dmin * m` in float32); Q4_K's values are looked
/// up from a per-sub-block table of `d * sc * q - dmin * m` over the 16 values a nibble takes
/// (the multiply-add rounded once: within half an ulp of `gguf.quants`' value), Q6_K's are
/// `gguf.quants`' exactly (`d * sc` times `q - 32`). Every product is summed in one order
/// whatever `M` and `R` (16 lanes, the sub-blocks in turn, then the lanes' sum).
///
/// # Safety
/// The CPU has avx512f/bw/vl, FMA and F16C; `ty` is one [`tile_dot_k_takes`]; each of `rows`
/// holds `k / 256` whole blocks of `ty`, and `x` at least `M * k` elements.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma,f16c")]
// (the tile's loops index the accumulators by weight row and x-row, as `tile_dot`'s)
#[allow(clippy::needless_range_loop)]
pub(super) unsafe fn tile_dot_k<const M: usize, const R: usize>(
    ty: QuantType,
    rows: [&[u8]; R],
    x: &[f32],
    k: usize,
) -> [[f32; M]; R] {
    assert!(tile_dot_k_takes(ty));
    let (bb, nb) = check_tile::<M, R>(ty, &rows, x, k);
    let xp = x.as_ptr();
    let mut acc = [[_mm512_setzero_ps(); M]; R];
    // SAFETY: the CPU features are the caller's guarantee.
    let iota = unsafe { iota16() };
    let nib = _mm_set1_epi8(0x0F);
    let three = _mm_set1_epi8(3);
    let thirty_two = _mm_set1_epi8(32);
    // SAFETY: the CPU features are the caller's guarantee; every block read is block `b` of
    // `nb` of a row of nb * bb bytes (asserted above): 16-byte loads at 16 + c * 32 (+ 16) of
    // a 144-byte Q4_K block, at h * 64 + (q % 2) * 32 (+ 16) and 128 + h * 32 (+ 16) of a
    // 210-byte Q6_K block, all inside it; every load of x is of row i's values
    // x[i * k + b * 256..][..256] inside `x` (M * k floats, asserted above); a prefetch is a
    // hint that never faults, whatever the address (computed without dereferencing it).
    unsafe {
        for b in 0..nb {
            let blks: [&[u8]; R] = std::array::from_fn(|r| &rows[r][b * bb..(b + 1) * bb]);
            for blk in blks {
                for line in (0..bb).step_by(64) {
                    _mm_prefetch::<_MM_HINT_T0>(
                        blk.as_ptr().wrapping_add(PREFETCH_BLOCKS / 8 * bb + line) as *const i8,
                    );
                }
            }
            if ty == QuantType::Q4K {
                // per sub-block: `d * sc` and `-(dmin * m)`
                let mut scale = [[(0.0f32, 0.0f32); 8]; R];
                for r in 0..R {
                    let (d, dmin) = (half(blks[r]), half(&blks[r][2..]));
                    let (sc, mn) = q4k_scales(blks[r]);
                    for j in 0..8 {
                        scale[r][j] = (d * f32::from(sc[j]), -(dmin * f32::from(mn[j])));
                    }
                }
                for c in 0..4 {
                    let mut w = [[_mm512_setzero_ps(); 4]; R];
                    for r in 0..R {
                        let table = |j: usize| {
                            let (ds, dm) = scale[r][j];
                            _mm512_fmadd_ps(_mm512_set1_ps(ds), iota, _mm512_set1_ps(dm))
                        };
                        let (low, high) = (table(2 * c), table(2 * c + 1));
                        let p = blks[r].as_ptr().add(16 + c * 32) as *const __m128i;
                        let v0 = _mm512_cvtepu8_epi32(_mm_loadu_si128(p));
                        let v1 = _mm512_cvtepu8_epi32(_mm_loadu_si128(p.add(1)));
                        w[r] = [
                            _mm512_permutexvar_ps(v0, low),
                            _mm512_permutexvar_ps(v1, low),
                            _mm512_permutexvar_ps(_mm512_srli_epi32(v0, 4), high),
                            _mm512_permutexvar_ps(_mm512_srli_epi32(v1, 4), high),
                        ];
                    }
                    for i in 0..M {
                        let xb = xp.add(i * k + b * 256 + c * 64);
                        let xs = [
                            load(xb),
                            load(xb.add(16)),
                            load(xb.add(32)),
                            load(xb.add(48)),
                        ];
                        for r in 0..R {
                            for (wv, xv) in w[r].iter().zip(xs) {
                                acc[r][i] = _mm512_fmadd_ps(*wv, xv, acc[r][i]);
                            }
                        }
                    }
                }
            } else {
                // Q6_K: per sub-block of 16, `d * sc`
                let mut scale = [[0.0f32; 16]; R];
                for r in 0..R {
                    let d = half(&blks[r][208..]);
                    for j in 0..16 {
                        scale[r][j] = d * f32::from(blks[r][192 + j] as i8);
                    }
                }
                for h in 0..2 {
                    macro_rules! quarter {
                        ($q:literal) => {{
                            let mut w = [(_mm512_setzero_ps(), _mm512_setzero_ps()); R];
                            for r in 0..R {
                                let base = blks[r].as_ptr();
                                let ql = base.add(h * 64 + ($q % 2) * 32) as *const __m128i;
                                let qh = base.add(128 + h * 32) as *const __m128i;
                                let values = |l: __m128i, hb: __m128i| {
                                    let low = if $q < 2 {
                                        _mm_and_si128(l, nib)
                                    } else {
                                        _mm_and_si128(_mm_srli_epi16(l, 4), nib)
                                    };
                                    let high = _mm_and_si128(_mm_srli_epi16(hb, 2 * $q), three);
                                    let v = _mm_or_si128(low, _mm_slli_epi16(high, 4));
                                    _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_sub_epi8(
                                        v, thirty_two,
                                    )))
                                };
                                let g = h * 8 + $q * 2;
                                w[r] = (
                                    _mm512_mul_ps(
                                        _mm512_set1_ps(scale[r][g]),
                                        values(_mm_loadu_si128(ql), _mm_loadu_si128(qh)),
                                    ),
                                    _mm512_mul_ps(
                                        _mm512_set1_ps(scale[r][g + 1]),
                                        values(
                                            _mm_loadu_si128(ql.add(1)),
                                            _mm_loadu_si128(qh.add(1)),
                                        ),
                                    ),
                                );
                            }
                            for i in 0..M {
                                let xb = xp.add(i * k + b * 256 + h * 128 + $q * 32);
                                let (x0, x1) = (load(xb), load(xb.add(16)));
                                for r in 0..R {
                                    acc[r][i] = _mm512_fmadd_ps(w[r].0, x0, acc[r][i]);
                                    acc[r][i] = _mm512_fmadd_ps(w[r].1, x1, acc[r][i]);
                                }
                            }
                        }};
                    }
                    quarter!(0);
                    quarter!(1);
                    quarter!(2);
                    quarter!(3);
                }
            }
        }
    }
    // SAFETY: the CPU features are the caller's guarantee.
    unsafe { lane_sums(acc) }
}
