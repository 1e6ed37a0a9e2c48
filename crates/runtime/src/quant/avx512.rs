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

/// One weight row's product with `x` (as the portable `row_dot`).
///
/// # Safety
/// The CPU has avx512f/bw/vl and FMA; `row` holds `x.len() / block` whole blocks of `ty`
/// and `sums` `x.len() / 32` elements.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma")]
pub(super) unsafe fn row_dot(ty: QuantType, row: &[u8], x: &[f32], sums: &[f32]) -> f32 {
    let nb = row.len() / ty.block_bytes();
    assert!(
        nb * ty.block() == x.len() && sums.len() * 32 == x.len(),
        "quantized product: {} bytes of {} blocks against {} values",
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
            QuantType::Q4_0 | QuantType::Q4_1 | QuantType::Q5_0 | QuantType::Q5_1 => {
                let (bb, has_min, five) = match ty {
                    QuantType::Q4_0 => (18, false, false),
                    QuantType::Q4_1 => (20, true, false),
                    QuantType::Q5_0 => (22, false, true),
                    _ => (24, true, true),
                };
                let offset = _mm512_set1_ps(match ty {
                    QuantType::Q4_0 => 8.0,
                    QuantType::Q5_0 => 16.0,
                    _ => 0.0,
                });
                let sixteen = _mm512_set1_epi32(16);
                for b in 0..nb {
                    let blk = &row[b * bb..(b + 1) * bb];
                    let d = _mm512_set1_ps(f16_at(blk));
                    let mut at = 2;
                    if has_min {
                        mins += f16_at(&blk[2..]) * sums[b];
                        at = 4;
                    }
                    let qh = if five {
                        let q =
                            u32::from_le_bytes([blk[at], blk[at + 1], blk[at + 2], blk[at + 3]]);
                        at += 4;
                        q
                    } else {
                        0
                    };
                    let qs = _mm_loadu_si128(blk.as_ptr().add(at) as *const __m128i);
                    let lo8 = _mm_and_si128(qs, nib);
                    let hi8 = _mm_and_si128(_mm_srli_epi16(qs, 4), nib);
                    let (mut lo, mut hi) = (_mm512_cvtepu8_epi32(lo8), _mm512_cvtepu8_epi32(hi8));
                    if five {
                        lo = _mm512_mask_add_epi32(lo, (qh & 0xFFFF) as __mmask16, lo, sixteen);
                        hi = _mm512_mask_add_epi32(hi, (qh >> 16) as __mmask16, hi, sixteen);
                    }
                    let lo = _mm512_sub_ps(_mm512_cvtepi32_ps(lo), offset);
                    let hi = _mm512_sub_ps(_mm512_cvtepi32_ps(hi), offset);
                    let x0 = load(xp.add(b * 32));
                    let x1 = load(xp.add(b * 32 + 16));
                    let s = _mm512_fmadd_ps(hi, x1, _mm512_mul_ps(lo, x0));
                    if b % 2 == 0 {
                        acc = _mm512_fmadd_ps(d, s, acc);
                    } else {
                        acc2 = _mm512_fmadd_ps(d, s, acc2);
                    }
                }
            }
            QuantType::Q8_0 => {
                for b in 0..nb {
                    let blk = &row[b * 34..(b + 1) * 34];
                    let d = _mm512_set1_ps(f16_at(blk));
                    let p = blk.as_ptr().add(2) as *const __m128i;
                    let q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p)));
                    let q1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p.add(1))));
                    let x0 = load(xp.add(b * 32));
                    let x1 = load(xp.add(b * 32 + 16));
                    let s = _mm512_fmadd_ps(q1, x1, _mm512_mul_ps(q0, x0));
                    if b % 2 == 0 {
                        acc = _mm512_fmadd_ps(d, s, acc);
                    } else {
                        acc2 = _mm512_fmadd_ps(d, s, acc2);
                    }
                }
            }
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
            QuantType::Q6K => {
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

/// Whether [`rows_dot`] takes weights of `ty` (the 32-weight block types; the K-quants are
/// multiplied row by row with [`row_dot`]).
pub(super) fn rows_dot_takes(ty: QuantType) -> bool {
    matches!(
        ty,
        QuantType::Q4_0 | QuantType::Q4_1 | QuantType::Q5_0 | QuantType::Q5_1 | QuantType::Q8_0
    )
}

/// One weight row's products with `M` rows of `x` (row `i` at `x[i * k..]`, its sums at
/// `sums[i * k / 32..]`): each block is unpacked once for all `M`, and each product is
/// computed with [`row_dot`]'s operations in its order, so each equals that row's
/// [`row_dot`] bit for bit. Decoding a batch of tokens then costs the unpacking once, not once
/// per token (on a CPU where the product is bound by it rather than by reading the weight).
///
/// # Safety
/// The CPU has avx512f/bw/vl and FMA; `ty` is one [`rows_dot_takes`]; `row` holds `k / 32`
/// whole blocks of `ty`, `x` at least `M * k` elements and `sums` `M * k / 32`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma")]
pub(super) unsafe fn rows_dot<const M: usize>(
    ty: QuantType,
    row: &[u8],
    x: &[f32],
    sums: &[f32],
    k: usize,
) -> [f32; M] {
    let nb = row.len() / ty.block_bytes();
    assert!(
        rows_dot_takes(ty) && nb * 32 == k && x.len() >= M * k && sums.len() >= M * k / 32,
        "quantized product: {} bytes of {} blocks against {M} rows of {k} values",
        row.len(),
        ty.name(),
    );
    let xp = x.as_ptr();
    let nib = _mm_set1_epi8(0x0F);
    let mut acc = [_mm512_setzero_ps(); M];
    let mut acc2 = [_mm512_setzero_ps(); M];
    let mut mins = [0.0f32; M];
    // SAFETY: the CPU features are the caller's guarantee; every load is of block `b` of
    // `nb`, inside `row` (nb * block_bytes bytes), or of row i's values x[i * k + b * 32..]
    // (32 floats) inside `x` (M * k floats, asserted above): unaligned 16- and 64-byte loads
    // in range.
    unsafe {
        // block b's 32 values as two vectors of 16 (lo, hi), and its scale d, against each
        // row of x (a macro: the loop inlined, in this function's target features)
        macro_rules! step {
            ($b:expr, $lo:expr, $hi:expr, $d:expr) => {
                for i in 0..M {
                    let xb = xp.add(i * k + $b * 32);
                    let s = _mm512_fmadd_ps($hi, load(xb.add(16)), _mm512_mul_ps($lo, load(xb)));
                    if $b % 2 == 0 {
                        acc[i] = _mm512_fmadd_ps($d, s, acc[i]);
                    } else {
                        acc2[i] = _mm512_fmadd_ps($d, s, acc2[i]);
                    }
                }
            };
        }
        if ty == QuantType::Q8_0 {
            for b in 0..nb {
                let blk = &row[b * 34..(b + 1) * 34];
                let d = _mm512_set1_ps(f16_at(blk));
                let p = blk.as_ptr().add(2) as *const __m128i;
                let q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p)));
                let q1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p.add(1))));
                step!(b, q0, q1, d);
            }
        } else {
            let (bb, has_min, five) = match ty {
                QuantType::Q4_0 => (18, false, false),
                QuantType::Q4_1 => (20, true, false),
                QuantType::Q5_0 => (22, false, true),
                _ => (24, true, true),
            };
            let offset = _mm512_set1_ps(match ty {
                QuantType::Q4_0 => 8.0,
                QuantType::Q5_0 => 16.0,
                _ => 0.0,
            });
            let sixteen = _mm512_set1_epi32(16);
            for b in 0..nb {
                let blk = &row[b * bb..(b + 1) * bb];
                let d = _mm512_set1_ps(f16_at(blk));
                let mut at = 2;
                if has_min {
                    let min = f16_at(&blk[2..]);
                    for (i, m) in mins.iter_mut().enumerate() {
                        *m += min * sums[i * nb + b];
                    }
                    at = 4;
                }
                let qh = if five {
                    let q = u32::from_le_bytes([blk[at], blk[at + 1], blk[at + 2], blk[at + 3]]);
                    at += 4;
                    q
                } else {
                    0
                };
                let qs = _mm_loadu_si128(blk.as_ptr().add(at) as *const __m128i);
                let lo8 = _mm_and_si128(qs, nib);
                let hi8 = _mm_and_si128(_mm_srli_epi16(qs, 4), nib);
                let (mut lo, mut hi) = (_mm512_cvtepu8_epi32(lo8), _mm512_cvtepu8_epi32(hi8));
                if five {
                    lo = _mm512_mask_add_epi32(lo, (qh & 0xFFFF) as __mmask16, lo, sixteen);
                    hi = _mm512_mask_add_epi32(hi, (qh >> 16) as __mmask16, hi, sixteen);
                }
                let lo = _mm512_sub_ps(_mm512_cvtepi32_ps(lo), offset);
                let hi = _mm512_sub_ps(_mm512_cvtepi32_ps(hi), offset);
                step!(b, lo, hi, d);
            }
        }
    }
    let mut out = [0.0f32; M];
    for i in 0..M {
        out[i] = _mm512_reduce_add_ps(_mm512_add_ps(acc[i], acc2[i])) + mins[i];
    }
    out
}
