//! The AVX2 loops: as the AVX-512 ones with 8 lanes (each 16 bytes of a block widened in two
//! halves).

use std::arch::x86_64::*;

use super::QuantType;
use super::portable::{f16_at, q4k_scales};

/// The low 8 bytes of `v` as float32 lanes, unsigned (`signed`: as int8).
///
/// # Safety
/// The CPU has avx2.
#[inline(always)]
unsafe fn f8(v: __m128i, signed: bool) -> __m256 {
    // SAFETY: the caller's guarantee (avx2).
    unsafe {
        _mm256_cvtepi32_ps(if signed {
            _mm256_cvtepi8_epi32(v)
        } else {
            _mm256_cvtepu8_epi32(v)
        })
    }
}

/// The 8 floats at `p`.
///
/// # Safety
/// The CPU has avx, and `p..p + 8` are readable floats.
#[inline(always)]
unsafe fn load(p: *const f32) -> __m256 {
    // SAFETY: the caller's guarantees.
    unsafe { _mm256_loadu_ps(p) }
}

/// `sum_l v[l] * x[l]` over the 16 values of `v` (16 bytes, `signed` or not) and the 16
/// floats at `x`, as 8 lanes.
///
/// # Safety
/// The CPU has avx2 and FMA; `x..x + 16` are readable floats.
#[inline(always)]
unsafe fn dot16(v: __m128i, signed: bool, x: *const f32) -> __m256 {
    // SAFETY: the caller's guarantees.
    unsafe {
        let lo = f8(v, signed);
        let hi = f8(_mm_srli_si128(v, 8), signed);
        _mm256_fmadd_ps(hi, load(x.add(8)), _mm256_mul_ps(lo, load(x)))
    }
}

/// One weight row's product with `x` (as the portable `row_dot`).
///
/// # Safety
/// The CPU has avx2 and FMA; `row` holds `x.len() / block` whole blocks of `ty` and `sums`
/// `x.len() / 32` elements.
#[target_feature(enable = "avx2,fma")]
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
    let mut acc = _mm256_setzero_ps();
    let mut mins = 0.0f32;
    // SAFETY: the CPU features are the caller's guarantee; every load is of block `b` of
    // `nb`, inside `row` (nb * block_bytes bytes), or of its values x[b * block..] inside
    // `x` (nb * block floats, asserted above): unaligned 16- and 32-byte loads in range.
    unsafe {
        match ty {
            QuantType::Q4_0 | QuantType::Q4_1 | QuantType::Q5_0 | QuantType::Q5_1 => {
                let (bb, has_min, five) = match ty {
                    QuantType::Q4_0 => (18, false, false),
                    QuantType::Q4_1 => (20, true, false),
                    QuantType::Q5_0 => (22, false, true),
                    _ => (24, true, true),
                };
                let offset = _mm256_set1_ps(match ty {
                    QuantType::Q4_0 => 8.0,
                    QuantType::Q5_0 => 16.0,
                    _ => 0.0,
                });
                let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
                let one = _mm256_set1_epi32(1);
                for b in 0..nb {
                    let blk = &row[b * bb..(b + 1) * bb];
                    let d = _mm256_set1_ps(f16_at(blk));
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
                    let halves = [
                        _mm_and_si128(qs, nib),
                        _mm_and_si128(_mm_srli_epi16(qs, 4), nib),
                    ];
                    let mut s = _mm256_setzero_ps();
                    // element e = 16 * half + 8 * part + lane
                    for (h, v) in halves.into_iter().enumerate() {
                        for part in 0..2 {
                            let bytes = if part == 0 { v } else { _mm_srli_si128(v, 8) };
                            let mut q = _mm256_cvtepu8_epi32(bytes);
                            if five {
                                let e0 = (16 * h + 8 * part) as i32;
                                let shifts = _mm256_add_epi32(lanes, _mm256_set1_epi32(e0));
                                let bit = _mm256_and_si256(
                                    _mm256_srlv_epi32(_mm256_set1_epi32(qh as i32), shifts),
                                    one,
                                );
                                q = _mm256_add_epi32(q, _mm256_slli_epi32(bit, 4));
                            }
                            let qf = _mm256_sub_ps(_mm256_cvtepi32_ps(q), offset);
                            let xv = load(xp.add(b * 32 + 16 * h + 8 * part));
                            s = _mm256_fmadd_ps(qf, xv, s);
                        }
                    }
                    acc = _mm256_fmadd_ps(d, s, acc);
                }
            }
            QuantType::Q8_0 => {
                for b in 0..nb {
                    let blk = &row[b * 34..(b + 1) * 34];
                    let d = _mm256_set1_ps(f16_at(blk));
                    let p = blk.as_ptr().add(2) as *const __m128i;
                    let s = _mm256_add_ps(
                        dot16(_mm_loadu_si128(p), true, xp.add(b * 32)),
                        dot16(_mm_loadu_si128(p.add(1)), true, xp.add(b * 32 + 16)),
                    );
                    acc = _mm256_fmadd_ps(d, s, acc);
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
                        let (xl, xh) = (xp.add(lo_sub * 32), xp.add(hi_sub * 32));
                        let sl = _mm256_add_ps(
                            dot16(_mm_and_si128(b0, nib), false, xl),
                            dot16(_mm_and_si128(b1, nib), false, xl.add(16)),
                        );
                        let sh = _mm256_add_ps(
                            dot16(_mm_and_si128(_mm_srli_epi16(b0, 4), nib), false, xh),
                            dot16(_mm_and_si128(_mm_srli_epi16(b1, 4), nib), false, xh.add(16)),
                        );
                        acc = _mm256_fmadd_ps(_mm256_set1_ps(d * f32::from(sc[2 * c])), sl, acc);
                        acc =
                            _mm256_fmadd_ps(_mm256_set1_ps(d * f32::from(sc[2 * c + 1])), sh, acc);
                        // (Q4_K's minimums are subtracted)
                        mins -= dmin * f32::from(mn[2 * c]) * sums[lo_sub]
                            + dmin * f32::from(mn[2 * c + 1]) * sums[hi_sub];
                    }
                }
            }
            QuantType::Q6K => {
                let three = _mm_set1_epi8(3);
                let thirty_two = _mm256_set1_ps(32.0);
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
                                _mm_or_si128(low, _mm_slli_epi16(high, 4))
                            };
                            let xb = xp.add((b * 8 + h * 4 + r) * 32);
                            // values q - 32: (q * x) - 32 * x over each group of 16
                            let group = |v: __m128i, x: *const f32| {
                                let lo = _mm256_sub_ps(f8(v, false), thirty_two);
                                let hi = _mm256_sub_ps(f8(_mm_srli_si128(v, 8), false), thirty_two);
                                _mm256_fmadd_ps(hi, load(x.add(8)), _mm256_mul_ps(lo, load(x)))
                            };
                            let t0 = group(q(l0, h0), xb);
                            let t1 = group(q(l1, h1), xb.add(16));
                            let g = 192 + h * 8 + r * 2;
                            let sc0 = d * f32::from(blk[g] as i8);
                            let sc1 = d * f32::from(blk[g + 1] as i8);
                            acc = _mm256_fmadd_ps(_mm256_set1_ps(sc0), t0, acc);
                            acc = _mm256_fmadd_ps(_mm256_set1_ps(sc1), t1, acc);
                        }
                    }
                }
            }
        }
        // the 8 lanes' sum
        let quad = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        let pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
        let one_lane = _mm_add_ss(pair, _mm_shuffle_ps(pair, pair, 1));
        _mm_cvtss_f32(one_lane) + mins
    }
}
