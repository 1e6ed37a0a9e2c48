//! The AVX-512 loops: each block's bytes widened to 16 int32 lanes at a time, converted to
//! float32 and multiplied with `x` in 512-bit registers.

use std::arch::x86_64::*;

use super::QuantType;
use super::portable::{f16_at, q4k_scales};

/// 16 bytes as float32 lanes, unsigned.
///
/// # Safety
/// The CPU has avx512f.
#[inline(always)]
unsafe fn u8x16(v: __m128i) -> __m512 {
    // SAFETY: the caller's guarantee (avx512f).
    unsafe { _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v)) }
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

/// One weight row's product with `x` (as the portable `row_dot`), for the K-quants (the
/// 32-weight types go through [`tile_dot`]).
///
/// # Safety
/// The CPU has avx512f/bw/vl and FMA; `row` holds `x.len() / block` whole blocks of `ty`
/// and `sums` `x.len() / 32` elements.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma")]
pub(super) unsafe fn row_dot(ty: QuantType, row: &[u8], x: &[f32], sums: &[f32]) -> f32 {
    let nb = row.len() / ty.block_bytes();
    assert!(
        !tile_dot_takes(ty) && nb * ty.block() == x.len() && sums.len() * 32 == x.len(),
        "quantized product (K-quant loop): {} bytes of {} blocks against {} values",
        row.len(),
        ty.name(),
        x.len()
    );
    let xp = x.as_ptr();
    let nib = _mm_set1_epi8(0x0F);
    let mut acc = _mm512_setzero_ps();
    let mut acc2 = _mm512_setzero_ps();
    let mut mins = 0.0f32;
    // SAFETY: the CPU features are the caller's guarantee; every load is of block `b` of
    // `nb`, inside `row` (nb * block_bytes bytes), or of its values x[b * block..] inside
    // `x` (nb * block floats, asserted above): unaligned 16- and 64-byte loads in range.
    unsafe {
        match ty {
            QuantType::Q4K => {
                for b in 0..nb {
                    let blk = &row[b * 144..(b + 1) * 144];
                    let (d, dmin) = (f16_at(blk), f16_at(&blk[2..]));
                    let (sc, mn) = q4k_scales(blk);
                    for c in 0..4 {
                        let p = blk.as_ptr().add(16 + c * 32) as *const __m128i;
                        let (b0, b1) = (_mm_loadu_si128(p), _mm_loadu_si128(p.add(1)));
                        let (lo_sub, hi_sub) = (b * 8 + 2 * c, b * 8 + 2 * c + 1);
                        let xl = xp.add(lo_sub * 32);
                        let xh = xp.add(hi_sub * 32);
                        let sl = _mm512_fmadd_ps(
                            u8x16(_mm_and_si128(b1, nib)),
                            load(xl.add(16)),
                            _mm512_mul_ps(u8x16(_mm_and_si128(b0, nib)), load(xl)),
                        );
                        let sh = _mm512_fmadd_ps(
                            u8x16(_mm_and_si128(_mm_srli_epi16(b1, 4), nib)),
                            load(xh.add(16)),
                            _mm512_mul_ps(
                                u8x16(_mm_and_si128(_mm_srli_epi16(b0, 4), nib)),
                                load(xh),
                            ),
                        );
                        acc = _mm512_fmadd_ps(_mm512_set1_ps(d * f32::from(sc[2 * c])), sl, acc);
                        acc2 =
                            _mm512_fmadd_ps(_mm512_set1_ps(d * f32::from(sc[2 * c + 1])), sh, acc2);
                        mins -= dmin * f32::from(mn[2 * c]) * sums[lo_sub]
                            + dmin * f32::from(mn[2 * c + 1]) * sums[hi_sub];
                    }
                }
            }
            _ => {
                let three = _mm_set1_epi8(3);
                let thirty_two = _mm512_set1_epi32(32);
                for b in 0..nb {
                    let blk = &row[b * 210..(b + 1) * 210];
                    let d = f16_at(&blk[208..]);
                    let base = blk.as_ptr();
                    for h in 0..2 {
                        let qh = base.add(128 + h * 32) as *const __m128i;
                        let (h0, h1) = (_mm_loadu_si128(qh), _mm_loadu_si128(qh.add(1)));
                        for r in 0..4 {
                            let ql = base.add(h * 64 + (r % 2) * 32) as *const __m128i;
                            let (l0, l1) = (_mm_loadu_si128(ql), _mm_loadu_si128(ql.add(1)));
                            let shift = _mm_cvtsi32_si128(2 * r as i32);
                            let q = |l: __m128i, hb: __m128i| {
                                let low = if r < 2 {
                                    _mm_and_si128(l, nib)
                                } else {
                                    _mm_and_si128(_mm_srli_epi16(l, 4), nib)
                                };
                                let high = _mm_and_si128(_mm_srl_epi16(hb, shift), three);
                                let v = _mm_or_si128(low, _mm_slli_epi16(high, 4));
                                _mm512_cvtepi32_ps(_mm512_sub_epi32(
                                    _mm512_cvtepu8_epi32(v),
                                    thirty_two,
                                ))
                            };
                            let xb = xp.add((b * 8 + h * 4 + r) * 32);
                            let t0 = _mm512_mul_ps(q(l0, h0), load(xb));
                            let t1 = _mm512_mul_ps(q(l1, h1), load(xb.add(16)));
                            let g = 192 + h * 8 + r * 2;
                            let sc0 = d * f32::from(blk[g] as i8);
                            let sc1 = d * f32::from(blk[g + 1] as i8);
                            acc = _mm512_fmadd_ps(_mm512_set1_ps(sc0), t0, acc);
                            acc2 = _mm512_fmadd_ps(_mm512_set1_ps(sc1), t1, acc2);
                        }
                    }
                }
            }
        }
    }
    _mm512_reduce_add_ps(_mm512_add_ps(acc, acc2)) + mins
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
const SCALE_CHUNK: usize = 32;

/// How far ahead of the block being read a tile asks for its weight rows' bytes: each thread
/// streams its rows in order, and a few kilobytes in flight keep the memory busy (without it
/// the products read half as fast from memory as from the cache).
const PREFETCH_BYTES: usize = 4096;

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
        let iota = _mm512_setr_ps(
            0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0,
        );
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
/// ones (each within half an ulp of `gguf.quants`'). Every product is summed in the same
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
    let bb = ty.block_bytes();
    let nb = k / 32;
    assert!(
        tile_dot_takes(ty)
            && k.is_multiple_of(32)
            && rows.iter().all(|r| r.len() == nb * bb)
            && x.len() >= M * k,
        "quantized product: {R} rows of {} blocks against {M} rows of {k} values",
        ty.name(),
    );
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
                        let mut w = [(_mm512_setzero_ps(), _mm512_setzero_ps()); R];
                        for r in 0..R {
                            let blk = &rows[r][b * bb..(b + 1) * bb];
                            _mm_prefetch::<_MM_HINT_T0>(
                                blk.as_ptr().wrapping_add(PREFETCH_BYTES) as *const i8
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
    let mut out = [[0.0f32; M]; R];
    for r in 0..R {
        for i in 0..M {
            out[r][i] = _mm512_reduce_add_ps(acc[r][i]);
        }
    }
    out
}
