//! A matrix of small cases covering every dtype and op class (casts between all dtypes,
//! comparisons, reductions, padding, integer and float arithmetic, shifts, transcendentals),
//! shared by the device test binaries (`ptx.rs`, `webgpu.rs`) that compare a backend with `REF`.

#![allow(dead_code)] // each test binary uses part of this module

use half::{bf16, f16};
use tinygrad_tensor::{Axis, DType, Tensor};

/// `n` evenly spaced values from -3 in steps of 0.25.
pub fn f32s(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32 * 0.25 - 3.0).collect()
}

pub const DTYPES: [DType; 15] = [
    DType::BOOL,
    DType::INT8,
    DType::UINT8,
    DType::INT16,
    DType::UINT16,
    DType::INT32,
    DType::UINT32,
    DType::INT64,
    DType::UINT64,
    DType::FLOAT16,
    DType::BFLOAT16,
    DType::FLOAT32,
    DType::FLOAT64,
    DType::FP8E4M3,
    DType::FP8E5M2,
];

/// Source values exercising signs, zero, fractions, large magnitudes and the special floats.
pub fn source() -> Vec<f32> {
    vec![
        0.0,
        1.0,
        -1.0,
        2.5,
        -2.5,
        3.0,
        -7.0,
        100.7,
        -128.0,
        255.0,
        300.0,
        65535.0,
        1e10,
        -1e10,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        0.5,
        -0.0,
        7.0,
    ]
}

/// Tensor expressions covering every op class on every dtype, on `device`: `(label, tensor)`.
pub fn coverage_cases(device: &str) -> Vec<(String, Tensor)> {
    let src = source();
    let n = src.len();
    let base = Tensor::from_slice_on(&src, &[n], device);
    let other = Tensor::from_slice_on(&src.iter().rev().copied().collect::<Vec<_>>(), &[n], device);
    let mut out: Vec<(String, Tensor)> = Vec::new();
    for dt in DTYPES {
        let a = base.cast(dt);
        let b = other.cast(dt);
        let name = dt.to_string();
        out.push((format!("cast f32->{name}"), a.clone()));
        for to in DTYPES {
            out.push((format!("cast {name}->{to}"), a.cast(to)));
        }
        out.push((format!("{name} where"), a.ne(&b).where_(&a, &b)));
        out.push((format!("{name} cmplt"), a.lt(&b)));
        out.push((format!("{name} cmpeq"), a.eq(&b)));
        out.push((format!("{name} max"), a.maximum(&b)));
        out.push((format!("{name} sum"), a.sum(Axis::All)));
        out.push((format!("{name} max reduce"), a.max(Axis::All)));
        out.push((format!("{name} pad"), a.pad(&[(1, 2)], 0i64)));
        if dt.is_bool() {
            out.push((format!("{name} and"), a.bitwise_and(&b)));
            out.push((format!("{name} not"), a.logical_not()));
            continue;
        }
        out.push((format!("{name} add"), &a + &b));
        out.push((format!("{name} sub"), &a - &b));
        out.push((format!("{name} mul"), &a * &b));
        out.push((format!("{name} neg"), a.neg()));
        out.push((format!("{name} prod"), a.prod(Axis::All)));
        if dt.is_float() {
            out.push((format!("{name} div"), &a / &b));
            out.push((format!("{name} exp"), a.exp()));
            out.push((format!("{name} log"), a.log()));
            out.push((format!("{name} sin"), a.sin()));
            out.push((format!("{name} sqrt"), a.sqrt()));
            out.push((format!("{name} recip"), a.reciprocal()));
            out.push((format!("{name} trunc"), a.trunc()));
            out.push((format!("{name} softmax"), a.reshape(&[4, 5]).softmax(1)));
        } else {
            out.push((format!("{name} idiv"), a.idiv(&b)));
            out.push((format!("{name} mod"), a.modulo(&b)));
            out.push((format!("{name} and"), a.bitwise_and(&b)));
            out.push((format!("{name} not"), a.bitwise_not()));
            let sh = Tensor::from_slice_on(
                &(0..n as i64).map(|i| i * 5 % 70).collect::<Vec<_>>(),
                &[n],
                device,
            )
            .cast(dt);
            out.push((format!("{name} shl"), a.lshift(&sh)));
            out.push((format!("{name} shr"), a.rshift(&sh)));
        }
    }
    let m = Tensor::from_slice_on(&f32s(6 * 5), &[6, 5], device);
    let w = Tensor::from_slice_on(&f32s(5 * 7), &[5, 7], device);
    // float64 beyond float32's range: fp8 saturates it, as REF's direct conversion does
    let huge = Tensor::from_slice_on(&[1e300f64, -1e300, 1e39, f64::INFINITY, 3.0], &[5], device);
    for dt in [DType::FP8E4M3, DType::FP8E5M2] {
        out.push((format!("cast huge f64->{dt}"), huge.cast(dt)));
    }
    out.push(("matmul".into(), m.matmul(&w)));
    out.push(("argmax".into(), m.argmax(Some(1))));
    out.push((
        "f16 matmul".into(),
        m.cast(DType::FLOAT16).matmul(&w.cast(DType::FLOAT16)),
    ));
    out.push((
        "bf16 from slice".into(),
        Tensor::from_slice_on(&[bf16::from_f32(1.5), bf16::from_f32(-2.0)], &[2], device)
            + Tensor::from_slice_on(&[f16::from_f32(0.25), f16::from_f32(3.0)], &[2], device)
                .cast(DType::BFLOAT16),
    ));
    out
}

/// Runs [`coverage_cases`] on `device` and on `REF` and asserts every case matches ([`same`],
/// and the same dtype), listing every mismatch; prints the count that matched.
#[track_caller]
pub fn assert_device_matches_ref(device: &str) {
    let (on_dev, on_ref) = (coverage_cases(device), coverage_cases("REF"));
    let mut failures = Vec::new();
    for ((label, d), (_, r)) in on_dev.iter().zip(&on_ref) {
        assert_eq!(d.dtype(), r.dtype(), "{label}: dtype on {device} and REF");
        let (got, want) = (d.to_f64_vec(), r.to_f64_vec());
        if !same(&got, &want, r.dtype()) {
            failures.push(format!("{label}: {device} {got:?}\n    REF {want:?}"));
        }
    }
    eprintln!(
        "{device} vs REF: {} of {} cases match",
        on_ref.len() - failures.len(),
        on_ref.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Whether `got` matches `want` for dtype `dt`: NaN for NaN, exact for integers and infinities,
/// else within 1e-5 (1e-2 for the halves, one fp8 step for fp8: a float32 result one ulp off
/// can round to the neighbouring fp8 value) relative.
pub fn same(got: &[f64], want: &[f64], dt: DType) -> bool {
    got.len() == want.len()
        && got.iter().zip(want).all(|(g, w)| {
            if w.is_nan() {
                return g.is_nan();
            }
            if !dt.is_float() || w.is_infinite() {
                return g == w;
            }
            match dt {
                // one step: relative for normals, the denormal step below them
                DType::FP8E4M3 => (g - w).abs() <= 0.125 * w.abs() + 2f64.powi(-9),
                DType::FP8E5M2 => (g - w).abs() <= 0.25 * w.abs() + 2f64.powi(-16),
                _ => {
                    let tol = match dt {
                        DType::FLOAT16 | DType::BFLOAT16 => 1e-2,
                        _ => 1e-5,
                    };
                    (g - w).abs() <= tol * (1.0 + w.abs())
                }
            }
        })
}

/// Long reductions with few outputs — what GPU renderers group across a workgroup's
/// invocations (`grid.rs`'s `GroupPlan`): sum, max with NaN, min with -inf, prod, an integer
/// sum, mean, var (two reductions), argmax, a full reduction, a padded (gated) reduction, a
/// long-K matmul, two reductions in one kernel (the first loop grouped, the second run whole
/// by every invocation), and `any` (a bool accumulator: never grouped, see
/// [`NOT_GROUPED`]).
pub fn grouped_reduction_cases(device: &str) -> Vec<(&'static str, Tensor)> {
    let n: usize = 4099;
    let x: Vec<f32> = (0..3 * n)
        .map(|i| (((i * 7919) % 2003) as f32 - 1001.0) / 997.0)
        .collect();
    let mut with_nan = x.clone();
    with_nan[n + 17] = f32::NAN;
    let mut with_inf = x.clone();
    with_inf[2 * n + 5] = f32::NEG_INFINITY;
    let ints: Vec<i32> = (0..3 * n as i32).map(|i| (i * 31) % 1000 - 500).collect();
    let m = |v: &[f32]| Tensor::from_slice_on(v, &[3, n], device);
    vec![
        ("sum", m(&x).sum(1isize)),
        ("max", m(&x).max(1isize)),
        ("max NaN", m(&with_nan).max(1isize)),
        ("min -inf", m(&with_inf).min(1isize)),
        ("prod", (m(&x) * 0.01 + 1.0).prod(1isize)),
        (
            "int sum",
            Tensor::from_slice_on(&ints, &[3, n], device).sum(1isize),
        ),
        ("mean", m(&x).mean(1isize)),
        ("var", m(&x).var(1isize, 1)),
        ("argmax", m(&x).argmax(Some(1))),
        (
            "full sum",
            Tensor::from_slice_on(&x, &[3 * n], device).sum(Axis::All),
        ),
        (
            "padded sum",
            m(&x).pad(&[(0, 0), (300, 200)], 1.5).sum(1isize),
        ),
        (
            "long-K matmul",
            Tensor::from_slice_on(&x[..2 * n], &[2, n], device).matmul(&Tensor::from_slice_on(
                &x[..3 * n],
                &[n, 3],
                device,
            )),
        ),
        (
            "sum + max in one kernel",
            m(&x).sum(1isize) + m(&x).max(1isize),
        ),
        ("any (bool)", m(&x).gt(0.99).any(1isize)),
    ]
}

/// The cases of [`grouped_reduction_cases`] whose kernels are not grouped.
pub const NOT_GROUPED: [&str; 1] = ["any (bool)"];

/// Equal within a reassociated float sum's error (NaN matches NaN).
pub fn close_reduction(got: &[f64], want: &[f64]) -> bool {
    got.len() == want.len()
        && got.iter().zip(want).all(|(a, b)| {
            (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-4 + 1e-4 * b.abs()
        })
}
