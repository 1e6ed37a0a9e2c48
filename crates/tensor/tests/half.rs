//! float16 / bfloat16 on the CPU (emulated: stored as 16 bits, computed in float32) agree with
//! the REF interpreter (native half semantics through `ConstValue`), bit for bit where the
//! result is correctly rounded, and with float64 math within half precision.

use tinygrad_tensor::{DType, Tensor, bf16, f16};

fn vals() -> Vec<f32> {
    let mut v: Vec<f32> = (0..64).map(|i| (i as f32 - 32.0) * 0.37).collect();
    v.extend([
        0.0,
        -0.0,
        1e-7,
        6.1e-5,
        65504.0,
        70000.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ]);
    v
}

fn run(dt: DType, dev: &str, f: &dyn Fn(&Tensor) -> Tensor) -> Vec<f64> {
    let v = vals();
    let x = Tensor::from_slice_on(&v, &[v.len()], dev).cast(dt);
    f(&x).cast(DType::FLOAT64).to_vec::<f64>()
}

fn same(a: &[f64], b: &[f64], what: &str) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            x == y || (x.is_nan() && y.is_nan()),
            "{what}[{i}]: CPU {x} vs REF {y} (input {})",
            vals()[i]
        );
    }
}

#[test]
fn casts_round_trip_like_the_reference() {
    for dt in [DType::FLOAT16, DType::BFLOAT16] {
        let id = |x: &Tensor| x.clone();
        same(
            &run(dt, "CPU", &id),
            &run(dt, "REF", &id),
            &format!("cast {dt}"),
        );
    }
}

#[test]
fn elementwise_ops_in_half_match_the_reference() {
    type Op = Box<dyn Fn(&Tensor) -> Tensor>;
    let ops: Vec<(&str, Op)> = vec![
        ("add", Box::new(|x| x + 1.5)),
        ("mul", Box::new(|x| x * x)),
        ("div", Box::new(|x| x / 3.0)),
        ("max", Box::new(|x| x.maximum(0.25))),
        ("where", Box::new(|x| x.lt(0).where_(x, &(x * 2.0)))),
        ("sqrt", Box::new(|x| x.abs().sqrt())),
    ];
    for dt in [DType::FLOAT16, DType::BFLOAT16] {
        for (name, f) in &ops {
            same(
                &run(dt, "CPU", f.as_ref()),
                &run(dt, "REF", f.as_ref()),
                &format!("{name} {dt}"),
            );
        }
    }
}

#[test]
fn reductions_and_transcendentals_in_half_are_close() {
    for dt in [DType::FLOAT16, DType::BFLOAT16] {
        let data: Vec<f32> = (0..100).map(|i| (i as f32) * 0.01 - 0.5).collect();
        let x = Tensor::from_slice(&data, &[100]).cast(dt);
        let sum = x.sum(None).cast(DType::FLOAT64).item::<f64>();
        let exact: f64 = data.iter().map(|&v| v as f64).sum();
        assert!((sum - exact).abs() < 0.05, "{dt} sum {sum} vs {exact}");
        let e = x.exp().cast(DType::FLOAT64).to_vec::<f64>();
        let tol = if dt == DType::FLOAT16 { 1e-3 } else { 8e-3 };
        for (g, &v) in e.iter().zip(&data) {
            let want = (v as f64).exp();
            assert!(
                (g - want).abs() <= tol * want,
                "{dt} exp({v}) = {g}, want {want}"
            );
        }
        // the largest input, 0.49, rounded to the half format (by the `half` crate)
        let want = if dt == DType::FLOAT16 {
            f16::from_f32(0.49).to_f32()
        } else {
            bf16::from_f32(0.49).to_f32()
        };
        assert_eq!(x.max(None).cast(DType::FLOAT32).item::<f32>(), want);
    }
}

#[test]
fn half_element_types_read_back() {
    let h = Tensor::from_slice(&[f16::from_f32(1.5), f16::from_f32(-2.0)], &[2]);
    assert_eq!(
        (&h * 2.0).to_vec::<f16>(),
        vec![f16::from_f32(3.0), f16::from_f32(-4.0)]
    );
    let b = Tensor::from_slice(&[bf16::from_f32(1.5), bf16::from_f32(-2.0)], &[2]);
    assert_eq!(
        (&b + 1.0).to_vec::<bf16>(),
        vec![bf16::from_f32(2.5), bf16::from_f32(-1.0)]
    );
}
