//! The loops of every ISA against each other and the dequantized values.

use super::portable::{dequantize_block, f16_at};
use super::*;

/// Every ISA this CPU runs (portable, AVX2, AVX-512).
fn isas() -> Vec<Isa> {
    let mut v = vec![Isa::Portable];
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx2") && has!("fma") {
            v.push(Isa::Avx2);
        }
        if has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("fma") && has!("f16c") {
            v.push(Isa::Avx512);
        }
    }
    v
}

/// One block's values through the dequantization loops (checked bit for bit against the
/// tensor layer's IR dequantizer, itself bit-exact with `gguf.quants`, in
/// `crates/tensor/tests/quantized.rs`).
fn dequant(ty: QuantType, b: &[u8]) -> Vec<f32> {
    let mut out = vec![0.0f32; ty.block()];
    dequantize_block(ty, b, &mut out);
    out
}

/// Every type's loops (the CPU's ISA and portable) against the reference values' product
/// computed in f64, within float32 rounding.
#[test]
fn row_products_equal_the_dequantized_products() {
    for ty in QuantType::ALL {
        let blocks = 3;
        let mut row = vec![0u8; blocks * ty.block_bytes()];
        let mut s = 12345u32;
        for byte in row.iter_mut() {
            s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
            *byte = (s >> 16) as u8;
        }
        // small, finite scales of both signs
        for b in 0..blocks {
            let at = b * ty.block_bytes();
            let scale_at: &[usize] = match ty {
                QuantType::Q4_1 | QuantType::Q5_1 | QuantType::Q4K => &[0, 2],
                QuantType::Q6K => &[208],
                _ => &[0],
            };
            for &o in scale_at {
                let v = 0.01 - 0.007 * (b + o) as f32;
                let h = half::f16::from_f32(v).to_bits();
                row[at + o..at + o + 2].copy_from_slice(&h.to_le_bytes());
            }
        }
        let k = blocks * ty.block();
        let x: Vec<f32> = (0..k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        let sums: Vec<f32> = x.chunks_exact(32).map(|c| c.iter().sum()).collect();
        let mut want = 0.0f64;
        let mut bound = 0.0f64;
        for (b, blk) in row.chunks_exact(ty.block_bytes()).enumerate() {
            for (j, v) in dequant(ty, blk).iter().enumerate() {
                let p = f64::from(*v) * f64::from(x[b * ty.block() + j]);
                want += p;
                bound += p.abs();
            }
        }
        let job = Rows {
            ty,
            w: &row,
            row_bytes: row.len(),
            x: &x,
            sums: &sums,
            k,
            m: 1,
        };
        for isa in isas() {
            let name = format!("{isa:?}");
            let mut out = [0.0f32];
            run_rows(isa, &job, 0..1, &mut [&mut out[..]]);
            assert!(
                (f64::from(out[0]) - want).abs() <= 1e-5 * bound + 1e-6,
                "{} ({name} loops): {} vs {want}",
                ty.name(),
                out[0]
            );
        }
    }
}

/// Products with several rows of x (a batch of tokens: AVX-512 dequantizes each block once
/// for up to 8 of them, two weight rows at a time) equal each x-row's product with each
/// weight row alone bit for bit, for every type, ISA and number of rows up to past a group
/// of 8.
#[test]
fn batched_rows_equal_each_row_alone() {
    for ty in QuantType::ALL {
        let (n, blocks) = (5, 4);
        let k = blocks * ty.block();
        let row_bytes = blocks * ty.block_bytes();
        let mut w = vec![0u8; n * row_bytes];
        let mut s = 7u32;
        for byte in w.iter_mut() {
            s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
            *byte = (s >> 16) as u8;
        }
        // finite scales (every block's first two bytes, and Q6_K's last two)
        for blk in w.chunks_exact_mut(ty.block_bytes()) {
            let at = if ty == QuantType::Q6K { 208 } else { 0 };
            blk[at + 1] &= 0x3B;
            if matches!(ty, QuantType::Q4_1 | QuantType::Q5_1 | QuantType::Q4K) {
                blk[3] &= 0x3B;
            }
        }
        for m in 1..=10 {
            let x: Vec<f32> = (0..m * k)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
                .collect();
            let sums: Vec<f32> = x.chunks_exact(32).map(|c| c.iter().sum()).collect();
            for isa in isas() {
                let mut out = vec![vec![0.0f32; n]; m];
                let job = Rows {
                    ty,
                    w: &w,
                    row_bytes,
                    x: &x,
                    sums: &sums,
                    k,
                    m,
                };
                let mut outs: Vec<&mut [f32]> = out.iter_mut().map(|o| &mut o[..]).collect();
                run_rows(isa, &job, 0..n, &mut outs);
                for (i, got) in out.iter().enumerate() {
                    let one = Rows {
                        x: &x[i * k..(i + 1) * k],
                        sums: &sums[i * k / 32..(i + 1) * k / 32],
                        m: 1,
                        ..job
                    };
                    // each weight row alone too (AVX-512 tiles take two at a time)
                    let mut want = vec![0.0f32; n];
                    for (r, w) in want.iter_mut().enumerate() {
                        let mut o = [0.0f32];
                        run_rows(isa, &one, r..r + 1, &mut [&mut o[..]]);
                        *w = o[0];
                    }
                    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(got),
                        bits(&want),
                        "{} ({isa:?}), row {i} of {m}",
                        ty.name()
                    );
                }
            }
        }
    }
}

/// The dequantization compiled for this CPU's ISA equals the portable one bit for bit, on
/// random blocks whose scales take every kind of value (NaN and infinities included).
#[test]
fn every_isa_dequantizes_alike() {
    for ty in QuantType::ALL {
        let mut s = 99u32;
        let blocks = 64;
        let mut w = vec![0u8; blocks * ty.block_bytes()];
        for byte in w.iter_mut() {
            s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
            *byte = (s >> 16) as u8;
        }
        let run = |isa: Isa| {
            let mut out = vec![0.0f32; blocks * ty.block()];
            dequantize_rows(isa, ty, &w, &mut out);
            out.iter()
                .map(|v| if v.is_nan() { u32::MAX } else { v.to_bits() })
                .collect::<Vec<_>>()
        };
        for isa in isas() {
            assert_eq!(run(Isa::Portable), run(isa), "{} ({isa:?})", ty.name());
        }
    }
}

/// The AVX-512 tiles' in-register dequantization of the 32-weight types equals the portable
/// one (`gguf.quants`' formulas) bit for bit, on random blocks (NaN and infinite scales
/// included).
#[test]
fn avx512_tiles_dequantize_like_gguf() {
    #[cfg(target_arch = "x86_64")]
    {
        if !isas().iter().any(|i| matches!(i, Isa::Avx512)) {
            println!("skipped: this CPU has no AVX-512 (avx512f/bw/vl, fma, f16c)");
            return;
        }
        for ty in QuantType::ALL
            .into_iter()
            .filter(|t| avx512::tile_dot_takes(*t))
        {
            let mut s = 4242u32;
            for _ in 0..2000 {
                let mut blk = vec![0u8; ty.block_bytes()];
                for byte in blk.iter_mut() {
                    s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    *byte = (s >> 16) as u8;
                }
                // SAFETY: AVX-512 and F16C were detected above (`isas()`); `blk` is one
                // whole block of a type `tile_dot` takes.
                let got = unsafe { avx512::block32_values(ty, &blk, true) };
                let want = dequant(ty, &blk);
                let bits = |v: &[f32]| {
                    v.iter()
                        .map(|f| if f.is_nan() { u32::MAX } else { f.to_bits() })
                        .collect::<Vec<_>>()
                };
                // the products' values: `d * q + m` rounded once for the types with a minimum
                // (else the same as the exact ones)
                // SAFETY: as above.
                let fused = unsafe { avx512::block32_values(ty, &blk, false) };
                let want_fused: Vec<f32> = match ty {
                    QuantType::Q4_1 | QuantType::Q5_1 => {
                        let (d, m) = (f16_at(&blk), f16_at(&blk[2..]));
                        let qh = u32::from_le_bytes([blk[4], blk[5], blk[6], blk[7]]);
                        let qs = if ty == QuantType::Q5_1 {
                            &blk[8..24]
                        } else {
                            &blk[4..20]
                        };
                        (0..32)
                            .map(|j| {
                                let mut q = if j < 16 { qs[j] & 15 } else { qs[j - 16] >> 4 };
                                if ty == QuantType::Q5_1 && qh >> j & 1 == 1 {
                                    q += 16;
                                }
                                d.mul_add(f32::from(q), m)
                            })
                            .collect()
                    }
                    _ => want.clone(),
                };
                assert_eq!(
                    bits(&fused),
                    bits(&want_fused),
                    "{} fused, block {blk:?}",
                    ty.name()
                );
                assert_eq!(bits(&got), bits(&want), "{} block {blk:?}", ty.name());
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    println!("skipped: not an x86_64 CPU (no AVX-512 loops)");
}

#[test]
fn halves_convert_exactly() {
    for h in 0..=u16::MAX {
        let want = half::f16::from_bits(h).to_f32();
        let got = f16_at(&h.to_le_bytes());
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "{h:#06x}: {got} vs {want}"
        );
    }
}
