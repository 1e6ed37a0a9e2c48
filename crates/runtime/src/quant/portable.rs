//! The portable loops: each block dequantized as `gguf.quants` does, and the row products
//! over fixed-size arrays (`LANES` partial sums) that the compiler vectorizes where it can.

use super::QuantType;

/// Every block's values, with `gguf.quants`' formulas and float operations (bit-exact).
#[inline(always)]
pub(super) fn dequantize_blocks(ty: QuantType, w: &[u8], out: &mut [f32]) {
    for (b, o) in w
        .chunks_exact(ty.block_bytes())
        .zip(out.chunks_exact_mut(ty.block()))
    {
        dequantize_block(ty, b, o);
    }
}

/// One block's values (`out` has the block's length).
#[inline(always)]
pub(super) fn dequantize_block(ty: QuantType, b: &[u8], out: &mut [f32]) {
    match ty {
        QuantType::Q4_0 | QuantType::Q4_1 | QuantType::Q5_0 | QuantType::Q5_1 => {
            let (min, five, qs_at, qh_at) = match ty {
                QuantType::Q4_0 => (None, false, 2, 0),
                QuantType::Q4_1 => (Some(f16_at(&b[2..])), false, 4, 0),
                QuantType::Q5_0 => (None, true, 6, 2),
                _ => (Some(f16_at(&b[2..])), true, 8, 4),
            };
            let d = f16_at(b);
            let qh = if five {
                u32::from_le_bytes([b[qh_at], b[qh_at + 1], b[qh_at + 2], b[qh_at + 3]])
            } else {
                0
            };
            let off = match ty {
                QuantType::Q4_0 => 8,
                QuantType::Q5_0 => 16,
                _ => 0,
            };
            let out: &mut [f32; 32] = out.try_into().expect("32 values");
            for j in 0..16 {
                let q = b[qs_at + j];
                let lo = i32::from(q & 0x0F) | (((qh >> j) & 1) << 4) as i32;
                let hi = i32::from(q >> 4) | (((qh >> (j + 16)) & 1) << 4) as i32;
                match min {
                    Some(m) => {
                        out[j] = d * lo as f32 + m;
                        out[j + 16] = d * hi as f32 + m;
                    }
                    None => {
                        out[j] = d * (lo - off) as f32;
                        out[j + 16] = d * (hi - off) as f32;
                    }
                }
            }
        }
        QuantType::Q8_0 => {
            let d = f16_at(b);
            for j in 0..32 {
                out[j] = f32::from(b[2 + j] as i8) * d;
            }
        }
        QuantType::Q4K => {
            let (d, dmin) = (f16_at(b), f16_at(&b[2..]));
            let (sc, mn) = q4k_scales(b);
            for c in 0..4 {
                let (dl, ml) = (d * f32::from(sc[2 * c]), dmin * f32::from(mn[2 * c]));
                let (dh, mh) = (
                    d * f32::from(sc[2 * c + 1]),
                    dmin * f32::from(mn[2 * c + 1]),
                );
                for i in 0..32 {
                    let q = b[16 + c * 32 + i];
                    out[2 * c * 32 + i] = dl * f32::from(q & 0x0F) - ml;
                    out[(2 * c + 1) * 32 + i] = dh * f32::from(q >> 4) - mh;
                }
            }
        }
        QuantType::Q6K => {
            let d = f16_at(&b[208..]);
            for h in 0..2 {
                for r in 0..4 {
                    let dd0 = d * f32::from(b[192 + h * 8 + r * 2] as i8);
                    let dd1 = d * f32::from(b[192 + h * 8 + r * 2 + 1] as i8);
                    for i in 0..32 {
                        let l = b[h * 64 + (r % 2) * 32 + i];
                        let low = if r < 2 { l & 0x0F } else { l >> 4 };
                        let high = (b[128 + h * 32 + i] >> (2 * r)) & 3;
                        let q = f32::from((low | (high << 4)) as i8 - 32);
                        out[h * 128 + r * 32 + i] = if i < 16 { dd0 } else { dd1 } * q;
                    }
                }
            }
        }
    }
}

/// Lanes of the partial sums (one 512-bit vector).
const LANES: usize = 16;

/// The sum of the partial sums, pairwise (the vector halves add as registers).
#[inline(always)]
fn hsum(mut acc: [f32; LANES]) -> f32 {
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            acc[l] += acc[l + width];
        }
    }
    acc[0]
}

/// `acc += scale * s`, lane by lane.
#[inline(always)]
fn add_scaled(acc: &mut [f32; LANES], scale: f32, s: &[f32; LANES]) {
    for l in 0..LANES {
        acc[l] += scale * s[l];
    }
}

/// A Q4_K block's 8 sub-block scales and minimums (6 bits each, packed in its bytes 4..16).
#[inline(always)]
pub(super) fn q4k_scales(b: &[u8]) -> ([u8; 8], [u8; 8]) {
    let (s0, s1, s2) = (&b[4..8], &b[8..12], &b[12..16]);
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for j in 0..4 {
        sc[j] = s0[j] & 0x3F;
        sc[j + 4] = (s2[j] & 0x0F) | ((s0[j] >> 2) & 0x30);
        mn[j] = s1[j] & 0x3F;
        mn[j + 4] = (s2[j] >> 4) | ((s1[j] >> 2) & 0x30);
    }
    (sc, mn)
}

/// The IEEE half at `b[0..2]` (little-endian) as float32, exactly (normals, subnormals, zeros,
/// infinities and NaNs): a normal's exponent rebiased and mantissa moved into float32's
/// places; a subnormal's (or zero's) mantissa times 2^-24, exact and a float32 normal. (Scaling
/// the bits moved as they are by 2^112 is exact too, but multiplies a float32 subnormal for a
/// subnormal half: a microcode assist of ~100 cycles per conversion on Intel cores, and the
/// K-quants' scales are often that small.)
#[inline(always)]
pub(super) fn f16_at(b: &[u8]) -> f32 {
    let h = u32::from(u16::from_le_bytes([b[0], b[1]]));
    let sign = (h & 0x8000) << 16;
    let em = h & 0x7FFF;
    let bits = if em >= 0x7C00 {
        0x7F80_0000 | ((em & 0x3FF) << 13)
    } else if em >= 0x0400 {
        // exponent bias 15 -> 127: 112 more, in the exponent's place
        (em + (112 << 10)) << 13
    } else {
        (em as f32 * f32::from_bits(0x3380_0000)).to_bits()
    };
    f32::from_bits(sign | bits)
}

/// `x`'s 32 elements of block `b` (of 32).
#[inline(always)]
fn x32(x: &[f32], b: usize) -> &[f32; 32] {
    x[b * 32..b * 32 + 32].try_into().expect("32 elements")
}

/// One weight row's product with `x`. Each block's values are `scale * q (+ min)` (the
/// `gguf.quants` formulas), summed as `scale * sum(q * x) (+ min * sum(x))`: the same real
/// number, with float32 rounding in another order.
#[inline(always)]
pub(super) fn row_dot(ty: QuantType, row: &[u8], x: &[f32], sums: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let mut mins = 0.0f32;
    match ty {
        QuantType::Q4_0 | QuantType::Q4_1 | QuantType::Q5_0 | QuantType::Q5_1 => {
            let (bb, has_min, five) = match ty {
                QuantType::Q4_0 => (18, false, false),
                QuantType::Q4_1 => (20, true, false),
                QuantType::Q5_0 => (22, false, true),
                _ => (24, true, true),
            };
            let offset: i32 = match ty {
                QuantType::Q4_0 => 8,
                QuantType::Q5_0 => 16,
                _ => 0,
            };
            for (b, blk) in row.chunks_exact(bb).enumerate() {
                let d = f16_at(blk);
                let mut at = 2;
                if has_min {
                    mins += f16_at(&blk[2..]) * sums[b];
                    at = 4;
                }
                let qh = if five {
                    let q = u32::from_le_bytes([blk[at], blk[at + 1], blk[at + 2], blk[at + 3]]);
                    at += 4;
                    q
                } else {
                    0
                };
                let qs: &[u8; 16] = blk[at..at + 16].try_into().expect("16 bytes");
                let xb = x32(x, b);
                let mut s = [0.0f32; LANES];
                for j in 0..16 {
                    let lo = i32::from(qs[j] & 0x0F) | (((qh >> j) & 1) << 4) as i32;
                    let hi = i32::from(qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4) as i32;
                    s[j] = (lo - offset) as f32 * xb[j] + (hi - offset) as f32 * xb[j + 16];
                }
                add_scaled(&mut acc, d, &s);
            }
        }
        QuantType::Q8_0 => {
            for (b, blk) in row.chunks_exact(34).enumerate() {
                let d = f16_at(blk);
                let qs: &[u8; 32] = blk[2..34].try_into().expect("32 bytes");
                let xb = x32(x, b);
                let mut s = [0.0f32; LANES];
                for j in 0..16 {
                    s[j] =
                        f32::from(qs[j] as i8) * xb[j] + f32::from(qs[j + 16] as i8) * xb[j + 16];
                }
                add_scaled(&mut acc, d, &s);
            }
        }
        QuantType::Q4K => {
            for (b, blk) in row.chunks_exact(144).enumerate() {
                let (d, dmin) = (f16_at(blk), f16_at(&blk[2..]));
                let (sc, mn) = q4k_scales(blk);
                for c in 0..4 {
                    let qs: &[u8; 32] = blk[16 + c * 32..48 + c * 32].try_into().expect("32");
                    let (lo_sub, hi_sub) = (b * 8 + 2 * c, b * 8 + 2 * c + 1);
                    let (xl, xh) = (x32(x, lo_sub), x32(x, hi_sub));
                    let mut sl = [0.0f32; LANES];
                    let mut sh = [0.0f32; LANES];
                    for j in 0..16 {
                        sl[j] = f32::from(qs[j] & 0x0F) * xl[j]
                            + f32::from(qs[j + 16] & 0x0F) * xl[j + 16];
                        sh[j] =
                            f32::from(qs[j] >> 4) * xh[j] + f32::from(qs[j + 16] >> 4) * xh[j + 16];
                    }
                    add_scaled(&mut acc, d * f32::from(sc[2 * c]), &sl);
                    add_scaled(&mut acc, d * f32::from(sc[2 * c + 1]), &sh);
                    // (Q4_K's minimums are subtracted)
                    mins -= dmin * f32::from(mn[2 * c]) * sums[lo_sub]
                        + dmin * f32::from(mn[2 * c + 1]) * sums[hi_sub];
                }
            }
        }
        QuantType::Q6K => {
            for (b, blk) in row.chunks_exact(210).enumerate() {
                let (ql, qh, scales) = (&blk[0..128], &blk[128..192], &blk[192..208]);
                let d = f16_at(&blk[208..]);
                for h in 0..2 {
                    let qhh: &[u8; 32] = qh[h * 32..h * 32 + 32].try_into().expect("32");
                    for r in 0..4 {
                        let l: &[u8; 32] = ql[h * 64 + (r % 2) * 32..h * 64 + (r % 2) * 32 + 32]
                            .try_into()
                            .expect("32");
                        let xb = x32(x, b * 8 + h * 4 + r);
                        let mut s0 = [0.0f32; LANES];
                        let mut s1 = [0.0f32; LANES];
                        for j in 0..16 {
                            let q = |i: usize| {
                                let low = if r < 2 { l[i] & 0x0F } else { l[i] >> 4 };
                                let high = (qhh[i] >> (2 * r)) & 3;
                                f32::from((low | (high << 4)) as i8 - 32)
                            };
                            s0[j] = q(j) * xb[j];
                            s1[j] = q(j + 16) * xb[j + 16];
                        }
                        let g = h * 8 + r * 2;
                        add_scaled(&mut acc, d * f32::from(scales[g] as i8), &s0);
                        add_scaled(&mut acc, d * f32::from(scales[g + 1] as i8), &s1);
                    }
                }
            }
        }
    }
    hsum(acc) + mins
}
