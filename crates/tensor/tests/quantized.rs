//! Weights kept as GGUF blocks (`nn::quant::QuantizedTensor`): for every block type, the
//! product with float32 activations — the CPU's native loops (AVX-512, AVX2 or portable, as the
//! CPU and `CPU_AVX512` choose), and the IR route on the CPU (`CPU_QUANT=0`, or more rows than
//! `QuantizedTensor::native_rows()`), REF and WEBGPU — equals the product with the dequantized weight computed in
//! f64, within float32 rounding; the dequantized weight itself is the GGUF loader's (bit-exact
//! with `gguf.quants`, checked in `tests/gguf.rs`), and the CPU's native dequantization (the
//! route of many rows) equals it bit for bit; a `Jit` replays the native kernel.

mod common;

use tinygrad_runtime::quant::QuantType;
use tinygrad_tensor::nn::quant::{MAX_NATIVE_ROWS, NATIVE_ROWS, QuantizedTensor};
use tinygrad_tensor::{Jit, Tensor};

const TYPES: [QuantType; 7] = QuantType::ALL;

/// Pseudo-random blocks for `rows x cols` weights of `ty`, whose f16 scales (and minimums) are
/// small finite numbers of both signs.
fn blocks(ty: QuantType, rows: usize, cols: usize, seed: u32) -> Vec<u8> {
    let n = rows * cols / ty.block();
    let mut raw = vec![0u8; n * ty.block_bytes()];
    let mut s = seed;
    for b in raw.iter_mut() {
        s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
        *b = (s >> 16) as u8;
    }
    let scales: &[usize] = match ty {
        QuantType::Q4_1 | QuantType::Q5_1 | QuantType::Q4K => &[0, 2],
        QuantType::Q6K => &[208],
        _ => &[0],
    };
    for k in 0..n {
        for &o in scales {
            let v = (((k * 7 + o) % 13) as f32 - 6.0) * 0.004 + 0.001;
            let at = k * ty.block_bytes() + o;
            raw[at..at + 2].copy_from_slice(&half::f16::from_f32(v).to_bits().to_le_bytes());
        }
    }
    raw
}

fn xs(m: usize, cols: usize) -> Vec<f32> {
    (0..m * cols)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
        .collect()
}

/// `x @ w.T` in f64, and the bound of its float32 rounding (the sum of |x * w| times 4 ulps per
/// term's worth of accumulated error, generously).
fn reference(x: &[f32], w: &[f32], m: usize, rows: usize, cols: usize) -> (Vec<f64>, Vec<f64>) {
    let mut out = vec![0.0; m * rows];
    let mut bound = vec![0.0; m * rows];
    for i in 0..m {
        for r in 0..rows {
            for c in 0..cols {
                let p = f64::from(x[i * cols + c]) * f64::from(w[r * cols + c]);
                out[i * rows + r] += p;
                bound[i * rows + r] += p.abs();
            }
        }
    }
    (out, bound.iter().map(|b| b * 1e-5 + 1e-6).collect())
}

fn check(dev: &str, m: usize) {
    let (rows, cols) = (37, 512);
    for (t, ty) in TYPES.into_iter().enumerate() {
        let raw = blocks(ty, rows, cols, 7 + t as u32);
        let q = QuantizedTensor::from_blocks(&raw, ty, rows, cols, dev);
        assert_eq!(q.blocks.shape(), vec![rows, q.row_bytes()]);
        let w = q.dequantize().to_vec::<f32>();
        assert!(
            w.iter().all(|v| v.is_finite()),
            "{}: finite weights",
            ty.name()
        );
        let xv = xs(m, cols);
        let x = Tensor::from_slice(&xv, &[m, cols]).to(dev);
        let got = q.linear(&x).unwrap();
        assert_eq!(got.shape(), vec![m, rows]);
        let got = got.to_vec::<f32>();
        let (want, bound) = reference(&xv, &w, m, rows, cols);
        for (k, ((g, w), b)) in got.iter().zip(&want).zip(&bound).enumerate() {
            assert!(
                (f64::from(*g) - w).abs() <= *b,
                "{dev} {} m={m}: out[{k}] = {g} vs {w} (bound {b})",
                ty.name()
            );
        }
    }
}

#[test]
fn products_equal_the_dequantized_product_on_cpu() {
    // (between the two limits: native for the AVX-512 tiles' types, dequantized for others)
    for m in [1, 3, NATIVE_ROWS + 2, MAX_NATIVE_ROWS + 2] {
        check("CPU", m);
    }
}

#[test]
fn products_equal_the_dequantized_product_on_ref() {
    check("REF", 1);
    check("REF", 2);
}

#[test]
fn products_equal_the_dequantized_product_on_webgpu() {
    common::on_webgpu("products_equal_the_dequantized_product_on_webgpu", |dev| {
        check(dev, 1);
        check(dev, NATIVE_ROWS + 1);
    });
}

#[test]
fn the_native_dequantization_is_the_irs_bit_for_bit() {
    let (rows, cols) = (19, 512);
    for (t, ty) in TYPES.into_iter().enumerate() {
        let q = QuantizedTensor::from_blocks(
            &blocks(ty, rows, cols, 11 + t as u32),
            ty,
            rows,
            cols,
            "CPU",
        );
        let native: Vec<u32> = q
            .dequantized()
            .unwrap()
            .to_vec::<f32>()
            .iter()
            .map(|v| v.to_bits())
            .collect();
        let ir: Vec<u32> = q
            .dequantize()
            .to_vec::<f32>()
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(native, ir, "{}", ty.name());
    }
}

#[test]
fn leading_dimensions_and_row_ranges_follow_the_weight() {
    let (rows, cols) = (24, 256);
    let ty = QuantType::Q4K;
    let q = QuantizedTensor::from_blocks(&blocks(ty, rows, cols, 3), ty, rows, cols, "CPU");
    let x = Tensor::from_slice(&xs(4, cols), &[2, 2, cols]);
    let all = q.linear(&x).unwrap();
    assert_eq!(all.shape(), vec![2, 2, rows]);
    let part = q.rows_range(8, 20);
    assert_eq!(part.shape(), vec![12, cols]);
    let p = part.linear(&x).unwrap();
    assert_eq!(
        p.to_vec::<f32>(),
        all.shrink(&[(0, 2), (0, 2), (8, 20)]).to_vec::<f32>(),
        "a row range is the same rows' products"
    );
}

#[test]
fn a_jit_replays_the_native_product_on_new_inputs() {
    let (rows, cols) = (40, 256);
    let ty = QuantType::Q6K;
    let q = QuantizedTensor::from_blocks(&blocks(ty, rows, cols, 5), ty, rows, cols, "CPU");
    let mut jit = Jit::new(|io: &[Tensor]| vec![q.linear(&(&io[0] * 2.0)).unwrap() + 1.0]);
    for step in 0..6 {
        let xv: Vec<f32> = xs(1, cols).iter().map(|v| v + step as f32).collect();
        let x = Tensor::from_slice(&xv, &[1, cols]);
        let got = jit.call(std::slice::from_ref(&x)).unwrap()[0].to_vec::<f32>();
        let want = (q.linear(&(&x * 2.0)).unwrap() + 1.0).to_vec::<f32>();
        assert_eq!(got, want, "step {step}");
    }
    assert!(jit.replays() >= 3, "replayed: {}", jit.replays());
}
