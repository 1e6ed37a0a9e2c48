//! The CPU against `REF` on the dtype matrix (`dtype_matrix`: casts between all dtypes,
//! comparisons, reductions, padding, arithmetic, shifts, transcendentals), fp8 included (the
//! CPU emulates it: `uint8` bits, computed in float32).

mod dtype_matrix;

use dtype_matrix::assert_device_matches_ref;

#[test]
fn cpu_matches_ref_on_every_dtype_and_op_class() {
    assert_device_matches_ref("CPU");
}

/// The CPU's emulated fp8 conversions (integer arithmetic on the bits) against
/// `tinygrad_dtype::fp8` for every fp8 bit pattern, and for float32 values around every fp8
/// value and midpoint (ties, the saturation thresholds, denormals, specials).
#[test]
fn cpu_fp8_conversions_are_exact() {
    use tinygrad_dtype::fp8::{Fp8Format, f64_to_fp8, fp8_to_f64};
    use tinygrad_tensor::{DType, Tensor};
    for (dt, fmt) in [
        (DType::FP8E4M3, Fp8Format::E4M3),
        (DType::FP8E5M2, Fp8Format::E5M2),
    ] {
        // fp8 -> float32: all 256 patterns
        let bits: Vec<u8> = (0..=255).collect();
        let got = Tensor::from_slice_on(&bits, &[256], "CPU")
            .bitcast(dt)
            .cast(DType::FLOAT32)
            .to_vec::<f32>();
        for (b, g) in bits.iter().zip(&got) {
            let want = fp8_to_f64(*b, fmt);
            let ok = (want.is_nan() && g.is_nan())
                || (*g as f64 == want && g.is_sign_negative() == want.is_sign_negative());
            assert!(ok, "{dt} {b:#04x} -> f32: got {g}, want {want}");
        }
        // float32 -> fp8: each finite fp8 value, the midpoints to its neighbours, one float32
        // ulp either side of both, beyond the largest value, and the specials
        let mut xs: Vec<f32> = vec![
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            0.0,
            -0.0,
            f32::MAX,
            f32::MIN_POSITIVE,
            1e-30,
        ];
        let finite: Vec<f64> = (0..=255u8)
            .map(|b| fp8_to_f64(b, fmt))
            .filter(|v| v.is_finite())
            .collect();
        for v in &finite {
            for w in &finite {
                if w > v && finite.iter().all(|u| !(u > v && u < w)) {
                    let mid = ((v + w) / 2.0) as f32;
                    xs.extend([mid, next(mid, 1), next(mid, -1)]);
                }
            }
            let v = *v as f32;
            xs.extend([v, next(v, 1), next(v, -1)]);
        }
        let n = xs.len();
        let got = Tensor::from_slice_on(&xs, &[n], "CPU")
            .cast(dt)
            .bitcast(DType::UINT8)
            .to_vec::<u8>();
        for (x, g) in xs.iter().zip(&got) {
            let want = f64_to_fp8(*x as f64, fmt);
            assert_eq!(
                *g,
                want,
                "{dt}: f32 {x:e} ({:#x}) -> {g:#04x}, want {want:#04x}",
                x.to_bits()
            );
        }
    }
}

/// The float32 `d` ulps away from `x` (same sign; `x` finite).
fn next(x: f32, d: i32) -> f32 {
    f32::from_bits((x.to_bits() as i64 + d as i64) as u32)
}
