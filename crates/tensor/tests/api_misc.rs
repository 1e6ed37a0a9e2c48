//! Small API pieces that the golden suites don't reach: `*_like` creation, `empty`, `unflatten`,
//! `bitcast`, `ndim`/`numel`, `replace`, the normal-family initializers (by their statistics),
//! printing, and the operator syntax with a tensor on the left.

use tinygrad_tensor::{DType, Idx, Tensor};

#[test]
fn like_constructors_take_shape_and_dtype() {
    let t = Tensor::from_slice(&[1i32, 2, 3, 4, 5, 6], &[2, 3]);
    assert_eq!(Tensor::zeros_like(&t).to_vec::<i32>(), vec![0; 6]);
    assert_eq!(Tensor::ones_like(&t).to_vec::<i32>(), vec![1; 6]);
    assert_eq!(Tensor::full_like(&t, 7).to_vec::<i32>(), vec![7; 6]);
    let f = Tensor::from_slice(&[0.5f32; 8], &[2, 2, 2]);
    let r = Tensor::rand_like(&f);
    assert_eq!((r.shape(), r.dtype()), (vec![2, 2, 2], DType::FLOAT32));
    assert!(r.to_vec::<f32>().iter().all(|v| (0.0..1.0).contains(v)));
    let e = Tensor::empty(&[3, 0, 2], DType::INT16);
    assert_eq!(
        (e.shape(), e.dtype(), e.numel()),
        (vec![3, 0, 2], DType::INT16, 0)
    );
    assert!(e.to_vec::<i16>().is_empty());
}

#[test]
fn unflatten_ndim_numel() {
    let t = Tensor::arange(0, 24, 1).unflatten(0, &[2, -1, 4]);
    assert_eq!((t.shape(), t.ndim(), t.numel()), (vec![2, 3, 4], 3, 24));
    let u = t.unflatten(-1, &[2, 2]);
    assert_eq!(u.shape(), vec![2, 3, 2, 2]);
    assert_eq!(u.to_vec::<i32>(), (0..24).collect::<Vec<i32>>());
    assert_eq!(
        (
            Tensor::from_slice(&[3.0f32], &[]).ndim(),
            Tensor::from_slice(&[3.0f32], &[]).numel()
        ),
        (0, 1)
    );
}

#[test]
fn bitcast_reinterprets_bits() {
    let f = Tensor::from_slice(&[1.0f32, -2.0, 0.0, f32::INFINITY], &[4]);
    let bits: Vec<i32> = [1.0f32, -2.0, 0.0, f32::INFINITY]
        .iter()
        .map(|v| v.to_bits() as i32)
        .collect();
    assert_eq!(f.bitcast(DType::INT32).to_vec::<i32>(), bits);
    let back = Tensor::from_slice(&bits, &[4]).bitcast(DType::FLOAT32);
    assert_eq!(back.to_vec::<f32>(), vec![1.0, -2.0, 0.0, f32::INFINITY]);
    let u = Tensor::from_slice(&[-1i16, 256], &[2]).bitcast(DType::UINT16);
    assert_eq!(u.to_vec::<u16>(), vec![65535, 256]);
}

#[test]
fn replace_takes_over_another_graph() {
    let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]);
    let other = Tensor::from_slice(&[5i32, 6, 7], &[3]) * 2;
    t.replace(&other);
    assert_eq!((t.shape(), t.dtype()), (vec![3], DType::INT32));
    assert_eq!(t.to_vec::<i32>(), vec![10, 12, 14]);
}

/// tinygrad: `replace shape mismatch (3,) != (2,)`.
#[test]
#[should_panic(expected = "replace: shape mismatch: tensor has shape [3], value has shape [2]")]
fn replace_needs_the_same_shape() {
    let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]);
    t.replace(&Tensor::from_slice(&[1.0f32, 2.0], &[2]));
}

fn mean_std(v: &[f32]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    let var = v.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / n;
    (m, var.sqrt())
}

#[test]
fn normal_family_statistics() {
    // 40,000 samples: the sample mean is within 5 standard errors (std/200) of the mean, the
    // sample std within 2% of the std
    let n = 40_000;
    let (m, s) = mean_std(&Tensor::normal(&[n], 3.0, 0.5).to_vec::<f32>());
    assert!(
        (m - 3.0).abs() < 4.0 * 0.5 / 200.0 && (s / 0.5 - 1.0).abs() < 0.02,
        "normal: {m} {s}"
    );
    // kaiming_normal (200, 100, ...) with a = 0: std sqrt(2 / 100)
    let k = Tensor::kaiming_normal(&[400, 100], 0.0).to_vec::<f32>();
    let (m, s) = mean_std(&k);
    let want = (2.0f64 / 100.0).sqrt();
    assert!(
        m.abs() < 4.0 * want / 200.0 && (s / want - 1.0).abs() < 0.02,
        "kaiming: {m} {s}"
    );
    // scaled_uniform: uniform in [-1, 1) / sqrt(numel)
    let u = Tensor::scaled_uniform(&[100, 100]).to_vec::<f32>();
    let bound = 1.0 / 100.0;
    assert!(u.iter().all(|&x| (-bound..bound).contains(&(x as f64))));
    let (m, s) = mean_std(&u);
    let want = bound / 3f64.sqrt();
    assert!(
        m.abs() < 4.0 * want / 100.0 && (s / want - 1.0).abs() < 0.03,
        "scaled_uniform: {m} {s}"
    );
}

#[test]
fn display_prints_values_shape_and_dtype() {
    let t = Tensor::from_slice(&[1.5f32, -2.0, 3.25, 4.0], &[2, 2]);
    let s = format!("{t}");
    for v in ["1.5", "-2", "3.25", "4"] {
        assert!(s.contains(v), "{v} missing in {s}");
    }
    let d = format!("{t:?}");
    assert!(d.contains("[2, 2]") && d.contains("float32"), "{d}");
}

#[test]
fn operator_syntax_with_a_tensor_on_the_left() {
    let a = Tensor::from_slice(&[7i32, -9, 12, 5], &[4]);
    let b = Tensor::from_slice(&[3i32, 4, 5, 2], &[4]);
    assert_eq!((-&a).to_vec::<i32>(), vec![-7, 9, -12, -5]);
    assert_eq!((2i32 + &a).to_vec::<i32>(), vec![9, -7, 14, 7]);
    assert_eq!((2i32 * &a).to_vec::<i32>(), vec![14, -18, 24, 10]);
    // % follows Python (the sign of the divisor), like tinygrad
    assert_eq!((&a % &b).to_vec::<i32>(), vec![1, 3, 2, 1]);
    assert_eq!((&a & &b).to_vec::<i32>(), vec![3, 4, 4, 0]);
    assert_eq!((&a | &b).to_vec::<i32>(), vec![7, -9, 13, 7]);
    assert_eq!((&a ^ &b).to_vec::<i32>(), vec![4, -13, 9, 7]);
    assert_eq!((&a << &b).to_vec::<i32>(), vec![56, -144, 384, 20]);
    assert_eq!((&a >> 1).to_vec::<i32>(), vec![3, -5, 6, 2]);
    let f = Tensor::from_slice(&[1.5f32, -2.0], &[2]);
    assert_eq!((2.0f32 * &f).to_vec::<f32>(), vec![3.0, -4.0]);
    assert_eq!((2.0f32 + &f).to_vec::<f32>(), vec![3.5, 0.0]);
}

/// tinygrad computes linspace in floats and casts to the dtype at the end (it was left float).
#[test]
fn linspace_with_an_integer_dtype_casts_the_result() {
    let t = Tensor::linspace_on(0.0, 10.0, 5, DType::INT32, "CPU");
    assert_eq!(t.dtype(), DType::INT32);
    assert_eq!(t.to_vec::<i32>(), vec![0, 2, 5, 7, 10]);
    let t = Tensor::linspace_on(-1.0, 1.0, 3, DType::INT32, "REF");
    assert_eq!(t.to_vec::<i32>(), vec![-1, 0, 1]);
}

/// setitem on tensors that require gradients stays differentiable: the gradient reaches the
/// written value at the selected positions and the old value elsewhere (tinygrad's `replace`).
#[test]
fn setitem_gradients() {
    let t = Tensor::from_slice(&[1.0f32, 2., 3., 4., 5., 6.], &[2, 3]).requires_grad(true);
    let v = Tensor::from_slice(&[10.0f32, 20.], &[2]).requires_grad(true);
    let w = Tensor::from_slice(&[1.0f32, 2., 3., 4., 5., 6.], &[2, 3]);
    let x = t.mul(2.0);
    x.setitem(&[Idx::all(), Idx::Int(1)], &v);
    let loss = x.mul(&w).sum(None);
    let g = loss.gradient(&[&t, &v]);
    assert_eq!(x.to_vec::<f32>(), vec![2., 10., 6., 8., 20., 12.]);
    assert_eq!(g[0].to_vec::<f32>(), vec![2., 0., 6., 8., 0., 12.]);
    assert_eq!(g[1].to_vec::<f32>(), vec![2., 5.]);
}

/// A clone of the handle sees a setitem (like a Python reference); other tensors derived
/// before it keep the old value.
#[test]
fn setitem_is_seen_through_clones_of_the_handle() {
    let t = Tensor::zeros(&[4], DType::FLOAT32);
    let alias = t.clone();
    let before = t.add(1.0);
    t.setitem(&[Idx::range(1, 3)], 5.0);
    assert_eq!(alias.to_vec::<f32>(), vec![0., 5., 5., 0.]);
    assert_eq!(before.to_vec::<f32>(), vec![1., 1., 1., 1.]);
}

/// deep_clone (tinygrad's `clone`) is realized into a buffer of its own, with a copy of the
/// gradient; len follows Python's `len`.
#[test]
fn deep_clone_and_len() {
    let t = Tensor::from_slice(&[1.0f32, 2., 3., 4.], &[2, 2]);
    t.realize();
    let c = t.deep_clone();
    assert_ne!(
        c.uop(),
        t.uop(),
        "the copy must not be a view of the same buffer"
    );
    assert_eq!(c.to_vec::<f32>(), t.to_vec::<f32>());
    t.set_grad(Some(Tensor::from_slice(&[1.0f32; 4], &[2, 2])));
    let c = t.deep_clone();
    assert_eq!(c.grad().expect("grad copied").to_vec::<f32>(), vec![1.0; 4]);
    assert_eq!((t.len(), c.len()), (2, 2));
    assert!(Tensor::zeros(&[0, 2], DType::INT32).is_empty());
}

#[test]
#[should_panic(expected = "len() of a 0-d tensor")]
fn len_of_a_scalar() {
    let _ = Tensor::scalar(1.0f32).len();
}
