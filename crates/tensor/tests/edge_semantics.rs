//! Edge semantics as tinygrad and PyTorch define them (issue 20): special values and gradients
//! at the edges of each op's domain, 0-d tensors as tensors with one reducible axis, the newer
//! arguments (`diagonal_with`, `gelu_with`, `softmin`, `sum_with`, ...), what tinygrad rejects,
//! and error messages that name the op the user called.
//!
//! Expected values come from PyTorch 2.15 (the expression is in the comment next to each
//! literal).

use std::panic::{AssertUnwindSafe, catch_unwind};

use tinygrad_tensor::{Axis, DType, PadMode, Tensor};

/// `f(x)` and the gradient of `f(x).sum()` with respect to `x` (a 1-D float32 tensor).
fn value_and_grad(f: impl Fn(&Tensor) -> Tensor, x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let t = Tensor::from_slice(x, &[x.len()]);
    let y = f(&t);
    let g = y.sum(Axis::All).gradient(&[&t]);
    (y.to_vec::<f32>(), g[0].to_vec::<f32>())
}

/// Equal as IEEE values with NaN equal to NaN and a relative tolerance `rtol` (0: exact).
fn assert_close(what: &str, got: &[f32], want: &[f32], rtol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
        let ok = (a.is_nan() && b.is_nan())
            || a == b
            || (a.is_finite() && b.is_finite() && (a - b).abs() <= rtol * b.abs().max(1e-6));
        assert!(
            ok,
            "{what}[{i}]: got {a}, want {b} (all: {got:?} vs {want:?})"
        );
    }
}

/// The message of the panic `f` raises (fails the test if it does not panic).
fn panic_message(f: impl FnOnce()) -> String {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = catch_unwind(AssertUnwindSafe(f));
    std::panic::set_hook(prev);
    let e = r.expect_err("expected a panic");
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

fn assert_panics_with(f: impl FnOnce(), parts: &[&str]) {
    let msg = panic_message(f);
    for p in parts {
        assert!(msg.contains(p), "panic message {msg:?} lacks {p:?}");
    }
}

// ---- 1. special values and gradients ----

#[test]
fn copysign_zero_infinite_nan_magnitudes() {
    let signs = Tensor::from_slice(&[-1.0f32, 1.0, -1.0, 1.0, -1.0, 1.0], &[6]);
    let x = [
        0.0f32,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        2.0,
    ];
    let (y, g) = value_and_grad(|t| t.copysign(&signs), &x);
    // torch.copysign(x, signs) = [-0.0, 0.0, -inf, inf, nan, 2.0]
    assert_close(
        "copysign",
        &y,
        &[-0.0, 0.0, f32::NEG_INFINITY, f32::INFINITY, f32::NAN, 2.0],
        0.0,
    );
    assert!(y[0].is_sign_negative() && y[1].is_sign_positive(), "{y:?}");
    // x.grad after torch.copysign(x, signs).sum().backward() = [0, 0, nan, nan, nan, 1]
    assert_close(
        "copysign grad",
        &g,
        &[0.0, 0.0, f32::NAN, f32::NAN, f32::NAN, 1.0],
        0.0,
    );
}

#[test]
fn pow_negative_base_fractional_exponent_and_zero_base() {
    let x = [-2.0f32, 0.0, f32::NEG_INFINITY, 2.0];
    let (y, g) = value_and_grad(|t| t.pow(0.3), &x);
    // x ** 0.3 = [nan, 0, inf, 1.2311444]
    assert_close(
        "x**0.3",
        &y,
        &[f32::NAN, 0.0, f32::INFINITY, 1.2311444],
        1e-6,
    );
    // grad of (x ** 0.3).sum() = [nan, inf, 0, 0.18467167]
    assert_close(
        "d x**0.3",
        &g,
        &[f32::NAN, f32::INFINITY, 0.0, 0.18467167],
        1e-5,
    );
}

#[test]
fn pow_of_zero_base_with_tensor_exponent() {
    let zeros = Tensor::zeros(&[4], DType::FLOAT32);
    let (y, g) = value_and_grad(|e| zeros.pow(e), &[0.0, 0.5, 2.0, -1.0]);
    // torch.zeros(4) ** e = [1, 0, 0, inf]; e.grad = [0, 0, 0, -inf]
    assert_close("0**e", &y, &[1.0, 0.0, 0.0, f32::INFINITY], 0.0);
    assert_close("d 0**e", &g, &[0.0, 0.0, 0.0, f32::NEG_INFINITY], 0.0);
}

#[test]
fn pow_zero_exponent_is_one_with_zero_gradient() {
    // x ** 0.0 = [1, 1, 1], x.grad = [0, 0, 0] (also at x = 0)
    let (y, g) = value_and_grad(|t| t.pow(0.0), &[0.0, -2.0, 3.0]);
    assert_close("x**0", &y, &[1.0; 3], 0.0);
    assert_close("d x**0", &g, &[0.0; 3], 0.0);
    // x ** torch.zeros(3): the same, with a tensor exponent
    let e = Tensor::zeros(&[3], DType::FLOAT32);
    let (y, g) = value_and_grad(|t| t.pow(&e), &[0.0, -2.0, 3.0]);
    assert_close("x**zeros", &y, &[1.0; 3], 0.0);
    assert_close("d x**zeros", &g, &[0.0; 3], 0.0);
}

#[test]
fn integer_powers_are_exact() {
    // x ** 3.0 at [-3, 0, 5] = [-27, 0, 125] exactly; x.grad = [27, 0, 75]
    let (y, g) = value_and_grad(|t| t.pow(3.0), &[-3.0, 0.0, 5.0]);
    assert_close("x**3", &y, &[-27.0, 0.0, 125.0], 0.0);
    assert_close("d x**3", &g, &[27.0, 0.0, 75.0], 0.0);
    // x ** -2.0 at [2, -4] = [0.25, 0.0625]
    let (y, _) = value_and_grad(|t| t.pow(-2.0), &[2.0, -4.0]);
    assert_close("x**-2", &y, &[0.25, 0.0625], 0.0);
    // torch.tensor([-3, 4]) ** 2 = [9, 16] (int64 in torch; int32 here)
    let i = Tensor::from_slice(&[-3i32, 4], &[2]).pow(2);
    assert_eq!((i.dtype(), i.to_vec::<i32>()), (DType::INT32, vec![9, 16]));
}

#[test]
fn saturating_functions_have_zero_gradient_far_out() {
    let x = [-1e4f32, 1e4];
    // torch.sigmoid(x) = [0, 1], grad [0, 0]
    let (y, g) = value_and_grad(Tensor::sigmoid, &x);
    assert_close("sigmoid", &y, &[0.0, 1.0], 0.0);
    assert_close("d sigmoid", &g, &[0.0, 0.0], 0.0);
    // torch.tanh(x) = [-1, 1], grad [0, 0]
    let (y, g) = value_and_grad(Tensor::tanh, &x);
    assert_close("tanh", &y, &[-1.0, 1.0], 0.0);
    assert_close("d tanh", &g, &[0.0, 0.0], 0.0);
    // F.gelu(x, approximate='tanh') = [-0, 10000], grad [0, 1]
    let (y, g) = value_and_grad(Tensor::gelu, &x);
    assert_close("gelu", &y, &[0.0, 10000.0], 0.0);
    assert_close("d gelu", &g, &[0.0, 1.0], 0.0);
    // x * torch.sigmoid(1.702 * x) = [-0, 10000], grad [0, 1]
    let (y, g) = value_and_grad(Tensor::quick_gelu, &x);
    assert_close("quick_gelu", &y, &[0.0, 10000.0], 0.0);
    assert_close("d quick_gelu", &g, &[0.0, 1.0], 0.0);
    // sigmoid'(0) = 0.25 (the stable form must keep the gradient at the branch point)
    let (_, g) = value_and_grad(Tensor::sigmoid, &[0.0, -1.0, 2.0]);
    // torch: [0.25, 0.19661193, 0.10499358]
    assert_close("d sigmoid mid", &g, &[0.25, 0.19661193, 0.10499358], 1e-5);
}

#[test]
fn abs_gradient_at_zero_is_zero() {
    // torch.abs(x).sum().backward() at [0, -1, 2]: x.grad = [0, -1, 1]
    let (y, g) = value_and_grad(Tensor::abs, &[0.0, -1.0, 2.0]);
    assert_close("abs", &y, &[0.0, 1.0, 2.0], 0.0);
    assert_close("d abs", &g, &[0.0, -1.0, 1.0], 0.0);
    // torch.abs(-0.0) = 0.0 (positive zero)
    let z = Tensor::from_slice(&[-0.0f32], &[1]).abs().to_vec::<f32>();
    assert!(z[0] == 0.0 && z[0].is_sign_positive(), "{z:?}");
}

#[test]
fn clip_gradient_at_the_bounds() {
    // x.clip(-1, 1) at [-1, 1, 0, 2, -2]; torch 2.15 gives x.grad = [0, 0, 1, 0, 0]: the
    // gradient is 0 where x equals a bound (not the 0.5 of a tie in maximum/minimum)
    let (y, g) = value_and_grad(
        |t| t.clip(Some(-1.0), Some(1.0)),
        &[-1.0, 1.0, 0.0, 2.0, -2.0],
    );
    assert_close("clip", &y, &[-1.0, 1.0, 0.0, 1.0, -1.0], 0.0);
    assert_close("d clip", &g, &[0.0, 0.0, 1.0, 0.0, 0.0], 0.0);
    // x.clamp(min=-1): grad [0, 1, 1, 1, 0]; x.clamp(max=1): grad [1, 0, 1, 0, 1]
    let (_, g) = value_and_grad(|t| t.clip(Some(-1.0), None), &[-1.0, 1.0, 0.0, 2.0, -2.0]);
    assert_close("d clip min", &g, &[0.0, 1.0, 1.0, 1.0, 0.0], 0.0);
    let (_, g) = value_and_grad(|t| t.clip(None, Some(1.0)), &[-1.0, 1.0, 0.0, 2.0, -2.0]);
    assert_close("d clip max", &g, &[1.0, 0.0, 1.0, 0.0, 1.0], 0.0);
    // NaN passes through: torch.tensor([nan]).clip(-1, 1) = [nan]
    let n = Tensor::from_slice(&[f32::NAN], &[1]).clip(Some(-1.0), Some(1.0));
    assert!(n.to_vec::<f32>()[0].is_nan());
}

#[test]
fn prod_gradient_with_zeros() {
    // x.prod(0) at [0, 2, 3] = 0; x.grad = [6, 0, 0]
    let (y, g) = value_and_grad(|t| t.prod(0isize), &[0.0, 2.0, 3.0]);
    assert_close("prod", &y, &[0.0], 0.0);
    assert_close("d prod", &g, &[6.0, 0.0, 0.0], 0.0);
    // two zeros: [0, 2, 0] -> x.grad = [0, 0, 0]
    let (_, g) = value_and_grad(|t| t.prod(0isize), &[0.0, 2.0, 0.0]);
    assert_close("d prod two zeros", &g, &[0.0, 0.0, 0.0], 0.0);
    // no zeros: [2, 3, 4] -> [12, 8, 6]
    let (_, g) = value_and_grad(|t| t.prod(0isize), &[2.0, 3.0, 4.0]);
    assert_close("d prod", &g, &[12.0, 8.0, 6.0], 1e-6);
    // x = [[0, 2, 3], [1, 2, 3]]; x.prod(1).sum().backward(): x.grad = [[6, 0, 0], [6, 3, 2]]
    let x = Tensor::from_slice(&[0.0f32, 2.0, 3.0, 1.0, 2.0, 3.0], &[2, 3]);
    let g = x.prod(1isize).sum(Axis::All).gradient(&[&x]);
    assert_close(
        "d prod rows",
        &g[0].to_vec::<f32>(),
        &[6.0, 0.0, 0.0, 6.0, 3.0, 2.0],
        1e-6,
    );
    // and over all axes: x.prod().backward() = [[36, 0, 0], [0, 0, 0]]
    let g = x.prod(Axis::All).gradient(&[&x]);
    assert_close(
        "d prod all",
        &g[0].to_vec::<f32>(),
        &[36.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        1e-6,
    );
}

#[test]
fn var_std_with_correction_larger_than_n() {
    let x = Tensor::from_slice(&[1.0f32, 2.0], &[2]);
    // torch.tensor([1., 2.]).var(correction=3) = inf, .std(correction=3) = inf
    assert_eq!(x.var(Axis::All, 3).item::<f32>(), f32::INFINITY);
    assert_eq!(x.std(Axis::All, 3).item::<f32>(), f32::INFINITY);
    assert_eq!(x.var(0isize, 2).item::<f32>(), f32::INFINITY);
    // torch.tensor([1., 1.]).var(correction=3) = nan (0 / 0)
    let c = Tensor::from_slice(&[1.0f32, 1.0], &[2]);
    assert!(c.var(Axis::All, 3).item::<f32>().is_nan());
}

#[test]
fn interpolate_bilinear_uint8_rounds_as_torch() {
    // x = torch.tensor([(i*7 + i*i*3) % 30 for i in range(512)], dtype=torch.uint8)
    //       .reshape(1, 2, 16, 16)
    let v: Vec<u8> = (0..512u32)
        .map(|i| ((i * 7 + i * i * 3) % 30) as u8)
        .collect();
    let x = Tensor::from_slice(&v, &[1, 2, 16, 16]);
    // F.interpolate(x, size=(4, 5), mode="bilinear")
    let want45: [u8; 40] = [
        22, 10, 8, 16, 6, 9, 10, 22, 14, 18, 15, 23, 20, 13, 8, 12, 21, 9, 8, 17, 17, 10, 12, 24,
        17, 12, 15, 20, 21, 11, 14, 11, 20, 9, 8, 7, 17, 10, 13, 26,
    ];
    let y = x.interpolate(&[4, 5], tinygrad_tensor::InterpolateMode::Linear, false);
    assert_eq!(y.dtype(), DType::UINT8);
    assert_eq!(y.to_vec::<u8>(), want45);
    // F.interpolate(x, size=(10, 10), mode="bilinear")
    let want10: [u8; 200] = [
        7, 23, 17, 13, 11, 7, 13, 14, 27, 8, 23, 16, 11, 14, 7, 12, 8, 26, 3, 20, 17, 11, 10, 7,
        13, 15, 26, 9, 19, 19, 13, 13, 7, 12, 11, 26, 4, 18, 18, 18, 11, 7, 13, 11, 25, 7, 20, 18,
        17, 10, 7, 13, 14, 27, 8, 18, 18, 16, 6, 9, 12, 8, 26, 3, 20, 18, 20, 8, 9, 9, 15, 26, 9,
        19, 19, 16, 8, 10, 9, 14, 26, 4, 18, 18, 18, 6, 9, 9, 18, 22, 7, 20, 18, 17, 10, 9, 9, 14,
        22, 14, 18, 18, 16, 6, 9, 9, 15, 20, 16, 11, 18, 20, 8, 9, 9, 16, 24, 14, 11, 20, 16, 8,
        10, 9, 14, 20, 15, 12, 22, 18, 6, 9, 9, 18, 22, 16, 11, 21, 16, 7, 9, 9, 14, 22, 14, 11,
        20, 18, 7, 10, 9, 15, 20, 16, 11, 22, 17, 9, 13, 8, 16, 24, 14, 11, 20, 17, 4, 12, 6, 16,
        20, 15, 12, 22, 18, 10, 12, 8, 15, 16, 16, 11, 21, 16, 7, 13, 6, 15, 10, 25, 11, 20, 18, 7,
        10, 7, 16, 16, 24, 7,
    ];
    let y = x.interpolate(&[10, 10], tinygrad_tensor::InterpolateMode::Linear, false);
    assert_eq!(y.to_vec::<u8>(), want10);
}

/// Neighbours more than 127 apart (an edge): tinygrad's int8 difference wraps there, which
/// gave 0 for the midpoint of 0 and 255 (and values 220 off torch's in a resized image); the
/// difference is taken in int32. The 7-bit weights stay tinygrad's, so a value can be 1 off
/// torch's (whose uint8 path uses finer fixed-point weights), never more.
#[test]
fn interpolate_bilinear_uint8_with_far_apart_neighbours() {
    let within_one = |got: Vec<u8>, torch: &[u8]| {
        assert_eq!(got.len(), torch.len());
        for (g, t) in got.iter().zip(torch) {
            assert!(g.abs_diff(*t) <= 1, "{got:?} vs torch {torch:?}");
        }
    };
    // F.interpolate(torch.tensor([[[[0, 255, 0, 200]]]], dtype=torch.uint8), size=(1, 7),
    //               mode="bilinear")
    let x = Tensor::from_slice(&[0u8, 255, 0, 200], &[1, 1, 1, 4]);
    let y = x.interpolate(&[1, 7], tinygrad_tensor::InterpolateMode::Linear, false);
    within_one(y.to_vec::<u8>(), &[0, 91, 237, 128, 14, 129, 200]);
    // F.interpolate(torch.tensor([[[[0, 255], [200, 10]]]], dtype=torch.uint8), size=(3, 3),
    //               mode="bilinear")
    let x = Tensor::from_slice(&[0u8, 255, 200, 10], &[1, 1, 2, 2]);
    let y = x.interpolate(&[3, 3], tinygrad_tensor::InterpolateMode::Linear, false);
    within_one(
        y.to_vec::<u8>(),
        &[0, 128, 255, 100, 117, 133, 200, 105, 10],
    );
    // lerp itself: 0 -> 255 and 200 -> 0 halfway
    let a = Tensor::from_slice(&[0u8, 200], &[2]);
    let b = Tensor::from_slice(&[255u8, 0], &[2]);
    let w = Tensor::from_slice(&[0.5f32, 0.5], &[2]);
    assert_eq!(a.lerp(&b, w).to_vec::<u8>(), vec![128, 100]);
}

// ---- 2. 0-d tensors have one reducible axis ----

fn scalar() -> Tensor {
    Tensor::from_slice(&[2.0f32], &[])
}

fn check_0d(what: &str, t: Tensor, want: f32) {
    assert_eq!(t.shape(), Vec::<usize>::new(), "{what}: shape");
    assert_close(what, &t.to_vec::<f32>(), &[want], 1e-6);
}

#[test]
fn zero_d_reductions() {
    let s = scalar();
    // torch.tensor(2.).sum(0) = sum(-1) = prod(-1) = 2
    check_0d("sum(0)", s.sum(0isize), 2.0);
    check_0d("sum(-1)", s.sum(-1isize), 2.0);
    check_0d("sum_keepdim(-1)", s.sum_keepdim(-1isize), 2.0);
    check_0d("prod(-1)", s.prod(-1isize), 2.0);
    check_0d("prod(0)", s.prod(0isize), 2.0);
    check_0d("max(-1)", s.max(-1isize), 2.0);
    check_0d("min(0)", s.min(0isize), 2.0);
    check_0d("mean(-1)", s.mean(-1isize), 2.0);
    // .logsumexp(-1) = 2, .softmax(-1) = 1, .log_softmax(0) = 0
    check_0d("logsumexp(-1)", s.logsumexp(-1isize), 2.0);
    check_0d("softmax(-1)", s.softmax(-1), 1.0);
    check_0d("softmax(0)", s.softmax(0), 1.0);
    check_0d("log_softmax(0)", s.log_softmax(0), 0.0);
    check_0d("log_softmax(-1)", s.log_softmax(-1), 0.0);
}

#[test]
fn zero_d_cumulative_ops() {
    let s = scalar();
    // torch.tensor(2.).logcumsumexp(0) = cumsum(-1) = cumprod(0) = 2
    check_0d("logcumsumexp(0)", s.logcumsumexp(0), 2.0);
    check_0d("logcumsumexp(-1)", s.logcumsumexp(-1), 2.0);
    check_0d("cumsum(-1)", s.cumsum(-1), 2.0);
    check_0d("cumsum(0)", s.cumsum(0), 2.0);
    check_0d("cumprod(0)", s.cumprod(0), 2.0);
    check_0d("cumprod(-1)", s.cumprod(-1), 2.0);
    // .cummax(0) = (2, 0), .cummin(-1) = (2, 0)
    let (v, i) = s.cummax(0);
    check_0d("cummax(0)", v, 2.0);
    assert_eq!((i.shape(), i.to_vec::<i32>()), (vec![], vec![0]));
    let (v, i) = s.cummin(-1);
    check_0d("cummin(-1)", v, 2.0);
    assert_eq!((i.shape(), i.to_vec::<i32>()), (vec![], vec![0]));
    let (v, _) = s.cummax(-1);
    check_0d("cummax(-1)", v, 2.0);
}

#[test]
fn zero_d_stack_works_and_cat_is_an_error() {
    let s = scalar();
    // torch.stack([s, s], 0) = [2, 2]
    let st = Tensor::stack(&[&s, &s], 0);
    assert_eq!((st.shape(), st.to_vec::<f32>()), (vec![2], vec![2.0, 2.0]));
    let st = Tensor::stack(&[&s, &s], -1);
    assert_eq!(st.shape(), vec![2]);
    // torch.cat([s, s], 0): "zero-dimensional tensor (at position 0) cannot be concatenated"
    assert_panics_with(
        || {
            Tensor::cat(&[&s, &s], 0);
        },
        &["cat", "zero-dimensional tensor", "cannot be concatenated"],
    );
}

// ---- 3. new arguments ----

#[test]
fn diagonal_with_any_rank_offsets_and_dims() {
    let t = Tensor::arange(0, 24, 1).reshape(&[2, 3, 4]);
    // torch.arange(24.).reshape(2,3,4).diagonal(1, 0, 2) = [[1, 14], [5, 18], [9, 22]]
    let d = t.diagonal_with(1, 0, 2);
    assert_eq!(d.shape(), vec![3, 2]);
    assert_eq!(d.to_vec::<i32>(), vec![1, 14, 5, 18, 9, 22]);
    // .diagonal(-1, -1, -2) = [[1, 6, 11], [13, 18, 23]]
    let d = t.diagonal_with(-1, -1, -2);
    assert_eq!(d.shape(), vec![2, 3]);
    assert_eq!(d.to_vec::<i32>(), vec![1, 6, 11, 13, 18, 23]);
    // .diagonal(0, 1, 2) (non-square 3x4) = [[0, 5, 10], [12, 17, 22]]
    let d = t.diagonal_with(0, 1, 2);
    assert_eq!(d.to_vec::<i32>(), vec![0, 5, 10, 12, 17, 22]);
    // .diagonal(5, 1, 2) has shape (2, 0)
    assert_eq!(t.diagonal_with(5, 1, 2).shape(), vec![2, 0]);
    // the old diagonal() is diagonal_with(0, 0, 1)
    let sq = Tensor::arange(0, 9, 1).reshape(&[3, 3]);
    assert_eq!(
        sq.diagonal().to_vec::<i32>(),
        sq.diagonal_with(0, 0, 1).to_vec::<i32>()
    );
    assert_panics_with(
        || {
            t.diagonal_with(0, 1, -2);
        },
        &["diagonal", "same dimension", "[2, 3, 4]"],
    );
}

#[test]
fn gelu_with_erf_and_tanh() {
    let x = [-3.0f32, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0];
    // F.gelu(x, approximate='none') and its gradient
    let (y, g) = value_and_grad(|t| t.gelu_with("none"), &x);
    let want = [
        -0.0040498674,
        -0.15865529,
        -0.15426879,
        0.0,
        0.3457312,
        0.8413447,
        2.9959502,
    ];
    assert_close("gelu none", &y, &want, 1e-4);
    let want_g = [
        -0.011945605,
        -0.08331543,
        0.13250491,
        0.5,
        0.867495,
        1.0833154,
        1.0119456,
    ];
    assert_close("d gelu none", &g, &want_g, 1e-4);
    // gelu_with("tanh") is gelu()
    let t = Tensor::from_slice(&x, &[7]);
    assert_eq!(
        t.gelu_with("tanh").to_vec::<f32>(),
        t.gelu().to_vec::<f32>()
    );
    assert_panics_with(
        || {
            t.gelu_with("exact");
        },
        &["gelu", "\"exact\"", "\"tanh\"", "\"none\""],
    );
}

#[test]
fn softmin_is_softmax_of_negation() {
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 1.0, 1.0, 5.0], &[2, 3]);
    // F.softmin(x, -1)
    let want = [
        0.66524094,
        0.24472848,
        0.09003057,
        0.49546266,
        0.49546266,
        0.009074715,
    ];
    assert_close("softmin(-1)", &x.softmin(-1).to_vec::<f32>(), &want, 1e-5);
    // F.softmin(x, 0)
    let want = [0.5, 0.26894143, 0.880797, 0.5, 0.7310586, 0.11920292];
    assert_close("softmin(0)", &x.softmin(0).to_vec::<f32>(), &want, 1e-5);
}

#[test]
fn reductions_with_dtype() {
    // torch.tensor([100, 100, 100], dtype=torch.int8).sum(dtype=torch.int8) = 44 (wraps)
    let i8s = Tensor::from_slice(&[100i8, 100, 100], &[3]);
    let s = i8s.sum_with(Axis::All, false, Some(DType::INT8));
    assert_eq!((s.dtype(), s.item::<i8>()), (DType::INT8, 44));
    // default: accumulates in a wider int: 300
    assert_eq!(
        i8s.sum_with(Axis::All, false, None).to_vec::<i32>(),
        vec![300]
    );
    // torch.tensor([60000., 60000.], dtype=torch.float16).sum(dtype=torch.float32) = 120000
    let h = Tensor::from_slice(&[half::f16::from_f32(60000.0); 2], &[2]);
    let s = h.sum_with(0isize, true, Some(DType::FLOAT32));
    assert_eq!((s.dtype(), s.shape()), (DType::FLOAT32, vec![1]));
    assert_eq!(s.to_vec::<f32>(), vec![120000.0]);
    // u = torch.tensor([[200, 100], [3, 4]], dtype=torch.uint8)
    // u.prod(0, dtype=torch.int32) = [600, 400]
    let u = Tensor::from_slice(&[200u8, 100, 3, 4], &[2, 2]);
    let p = u.prod_with(0isize, false, Some(DType::INT32));
    assert_eq!(
        (p.dtype(), p.to_vec::<i32>()),
        (DType::INT32, vec![600, 400])
    );
    // u.prod(1, keepdim=True, dtype=torch.int64) = [[20000], [12]]
    let p = u.prod_with(1isize, true, Some(DType::INT64));
    assert_eq!(
        (p.shape(), p.to_vec::<i64>()),
        (vec![2, 1], vec![20000, 12])
    );
    // torch.tensor([1., 2., 4.], dtype=torch.float16).mean(dtype=torch.float32) = 2.3333333
    let h = Tensor::from_slice(
        &[
            half::f16::from_f32(1.0),
            half::f16::from_f32(2.0),
            half::f16::from_f32(4.0),
        ],
        &[3],
    );
    let m = h.mean_with(Axis::All, false, Some(DType::FLOAT32));
    assert_eq!(m.dtype(), DType::FLOAT32);
    assert_close("mean f32", &m.to_vec::<f32>(), &[2.3333333], 1e-7);
    // torch.tensor([[1, 2], [4, 6]]).float().mean(1, dtype=torch.float64) = [1.5, 5.0]
    let iv = Tensor::from_slice(&[1i32, 2, 4, 6], &[2, 2]);
    let m = iv.mean_with(1isize, false, Some(DType::FLOAT64));
    assert_eq!(
        (m.dtype(), m.to_vec::<f64>()),
        (DType::FLOAT64, vec![1.5, 5.0])
    );
    // torch: mean(dtype=int) is an error ("Optional dtype must be either a floating point")
    assert_panics_with(
        || {
            iv.mean_with(1isize, false, Some(DType::INT32));
        },
        &["mean", "int32", "float"],
    );
}

#[test]
fn reshape_opt_keeps_none_dims() {
    let t = Tensor::arange(0, 24, 1).reshape(&[2, 3, 4]);
    // tinygrad: t.reshape(None, -1) -> (2, 12); t.reshape(None, None, 2, 2) -> (2, 3, 2, 2)
    assert_eq!(t.reshape_opt(&[None, Some(-1)]).shape(), vec![2, 12]);
    assert_eq!(
        t.reshape_opt(&[None, None, Some(2), Some(2)]).shape(),
        vec![2, 3, 2, 2]
    );
    assert_eq!(
        t.reshape_opt(&[Some(4), None, Some(-1)]).shape(),
        vec![4, 3, 2]
    );
    assert_eq!(
        t.reshape_opt(&[None, Some(12)]).to_vec::<i32>(),
        (0..24).collect::<Vec<i32>>()
    );
    assert_panics_with(
        || {
            t.reshape_opt(&[None, None, None, None]);
        },
        &["reshape", "None", "[2, 3, 4]"],
    );
}

#[test]
fn circular_pad_with_negative_pads() {
    let a = Tensor::arange(0.0, 5.0, 1.0).reshape(&[1, 1, 5]);
    // F.pad(torch.arange(5.).reshape(1,1,5), (-1, 2), mode='circular') = [1, 2, 3, 4, 1, 2]
    let p = a.pad_mode(&[(0, 0), (0, 0), (-1, 2)], PadMode::Circular);
    assert_eq!(p.to_vec::<f32>(), vec![1.0, 2.0, 3.0, 4.0, 1.0, 2.0]);
    // (2, -2) -> [1, 2, 0, 1, 2]; (-1, -1) -> [1, 2, 3]
    let p = a.pad_mode(&[(0, 0), (0, 0), (2, -2)], PadMode::Circular);
    assert_eq!(p.to_vec::<f32>(), vec![1.0, 2.0, 0.0, 1.0, 2.0]);
    let p = a.pad_mode(&[(0, 0), (0, 0), (-1, -1)], PadMode::Circular);
    assert_eq!(p.to_vec::<f32>(), vec![1.0, 2.0, 3.0]);
    // F.pad(torch.arange(12.).reshape(1,1,3,4), (-1, 1, 1, -2), mode='circular')
    //   = [[1, 2, 3, 1], [1, 2, 3, 1]]
    let g = Tensor::arange(0.0, 12.0, 1.0).reshape(&[1, 1, 3, 4]);
    let p = g.pad_mode(&[(0, 0), (0, 0), (1, -2), (-1, 1)], PadMode::Circular);
    assert_eq!(p.shape(), vec![1, 1, 2, 4]);
    assert_eq!(
        p.to_vec::<f32>(),
        vec![1.0, 2.0, 3.0, 1.0, 1.0, 2.0, 3.0, 1.0]
    );
}

fn gqa_inputs() -> (Tensor, Tensor, Tensor) {
    let q = [
        -1.1258f32, -1.1524, -0.2506, -0.4339, 0.8487, 0.692, -0.316, -2.1152, 0.4681, -0.1577,
        1.4437, 0.266, 0.1665, 0.8744, -0.1435, -0.1116, 0.9318, 1.259, 2.005, 0.0537, 0.6181,
        -0.4128, -0.8411, -2.316,
    ];
    let k = [
        -0.2159f32, -0.7425, -0.5731, -0.5554, 0.5943, 1.5419, 0.5073, -0.591, -0.5692, 0.92,
        -0.0691, -0.4949, -1.4959, -0.1938, 0.4455, 1.3253, -1.6293, -0.5497,
    ];
    let v = [
        -1.7703f32, 0.2143, -0.5382, 0.588, 1.6059, 0.4279, -0.6776, 1.0422, -1.9513, 0.4186,
        3.3214, 0.8764,
    ];
    (
        Tensor::from_slice(&q, &[1, 4, 2, 3]),
        Tensor::from_slice(&k, &[1, 2, 3, 3]),
        Tensor::from_slice(&v, &[1, 2, 3, 2]),
    )
}

#[test]
fn sdpa_with_grouped_query_attention() {
    let (q, k, v) = gqa_inputs();
    // F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    let want = [
        -0.5491623,
        0.3490137,
        -0.43531007,
        0.5116261,
        -0.38027507,
        0.35416895,
        -0.37492415,
        0.50317913,
        -0.20479375,
        0.8073349,
        -0.9968935,
        0.6452145,
        1.5967789,
        0.9256026,
        1.434777,
        0.8542547,
    ];
    let o = q.scaled_dot_product_attention_with(&k, &v, None, 0.0, false, true);
    assert_eq!(o.shape(), vec![1, 4, 2, 2]);
    assert_close("sdpa gqa", &o.to_vec::<f32>(), &want, 1e-4);
    // ... is_causal=True, enable_gqa=True
    let want = [
        -1.7703,
        0.2143,
        -0.747753,
        0.5244419,
        -1.7703,
        0.2143,
        -0.76853716,
        0.51813793,
        -0.6776,
        1.0422,
        -1.5487895,
        0.61566806,
        -0.6776,
        1.0422,
        -1.1227946,
        0.8242339,
    ];
    let o = q.scaled_dot_product_attention_with(&k, &v, None, 0.0, true, true);
    assert_close("sdpa gqa causal", &o.to_vec::<f32>(), &want, 1e-4);
    // without enable_gqa the head counts must match: an error naming the op and the shapes
    assert_panics_with(
        || {
            q.scaled_dot_product_attention_with(&k, &v, None, 0.0, false, false);
        },
        &[
            "scaled_dot_product_attention",
            "[1, 4, 2, 3]",
            "[1, 2, 3, 3]",
        ],
    );
    // 3 query heads cannot share 2 key heads
    let q3 = Tensor::ones(&[1, 3, 2, 3], DType::FLOAT32);
    assert_panics_with(
        || {
            q3.scaled_dot_product_attention_with(&k, &v, None, 0.0, false, true);
        },
        &["scaled_dot_product_attention", "enable_gqa", "3", "2"],
    );
}

// ---- 4. rejected as tinygrad rejects ----

#[test]
fn rejected_inputs() {
    let s = scalar();
    // torch.tensor(2.).cumsum(1): "Dimension out of range (expected to be in range of [-1, 0])"
    assert_panics_with(|| drop(s.cumsum(1)), &["cumsum", "axis 1", "[]"]);
    assert_panics_with(|| drop(s.cumprod(1)), &["cumprod", "axis 1", "[]"]);
    assert_panics_with(|| drop(s.cummax(2)), &["cummax", "axis 2"]);
    assert_panics_with(|| drop(s.logcumsumexp(-2)), &["logcumsumexp", "axis -2"]);
    // tinygrad: x.flip((0, 0)), x.flip((1, -1)) raise RuntimeError
    let t = Tensor::ones(&[3, 4], DType::FLOAT32);
    assert_panics_with(|| drop(t.flip(&[0, 0])), &["flip", "repeated", "[3, 4]"]);
    assert_panics_with(|| drop(t.flip(&[1, -1])), &["flip", "repeated"]);
    // tinygrad: int tensor ** -2 raises ("Integers to negative integer powers are not allowed")
    let i = Tensor::from_slice(&[-2i32, 0, 2], &[3]);
    assert_panics_with(|| drop(i.pow(-2)), &["pow", "int32", "negative"]);
    // torch.tensor([True, False]) ** -1 raises the same
    let b = Tensor::from_slice(&[true, false], &[2]);
    assert_panics_with(|| drop(b.pow(-1)), &["pow", "bool", "negative"]);
    // torch.tensor([1e20]) ** -2 = 1e-40 (a float32 subnormal): the reciprocal comes first
    let big = Tensor::from_slice(&[1e20f32], &[1]);
    let r = big.pow(-2).item::<f32>();
    assert!((r - 1e-40).abs() <= 1e-44, "{r:e}");
    // a tensor exponent stays allowed, and a float base with -2 too
    assert_eq!(
        i.pow(&Tensor::from_slice(&[2i32, 1, 3], &[3]))
            .to_vec::<i32>(),
        vec![4, 0, 8]
    );
    // linspace with a bool dtype
    assert_panics_with(
        || drop(Tensor::linspace_on(0.0, 1.0, 3, DType::BOOL, "CPU")),
        &["linspace", "bool"],
    );
    // torch.tensor(2.).squeeze(1) / squeeze(-2): out of range; squeeze(0), squeeze(-1) are fine
    assert_panics_with(|| drop(s.squeeze(Some(1))), &["squeeze", "axis 1", "[]"]);
    assert_panics_with(|| drop(s.squeeze(Some(-2))), &["squeeze", "axis -2"]);
    assert_panics_with(|| drop(t.squeeze(Some(50))), &["squeeze", "axis 50"]);
    assert_eq!(s.squeeze(Some(0)).shape(), Vec::<usize>::new());
    assert_eq!(s.squeeze(Some(-1)).shape(), Vec::<usize>::new());
}

// ---- 5. errors name the user's op ----

#[test]
fn errors_name_the_called_op() {
    let t = Tensor::ones(&[2, 3], DType::FLOAT32);
    assert_panics_with(|| drop(t.softmax(5)), &["softmax", "axis 5", "[2, 3]"]);
    assert_panics_with(
        || drop(t.log_softmax(-3)),
        &["log_softmax", "axis -3", "[2, 3]"],
    );
    assert_panics_with(|| drop(t.softmin(2)), &["softmin", "axis 2"]);
    assert_panics_with(|| drop(t.logsumexp(4isize)), &["logsumexp", "axis 4"]);
    assert_panics_with(
        || drop(t.layernorm(5isize, 1e-5)),
        &["layernorm", "axis 5", "[2, 3]"],
    );
    let msg = panic_message(|| drop(t.softmax(5)));
    assert!(!msg.starts_with("max"), "{msg}");
    let msg = panic_message(|| drop(t.layernorm(5isize, 1e-5)));
    assert!(!msg.starts_with("mean"), "{msg}");
    // batched matmul whose batch dims don't broadcast
    let a = Tensor::ones(&[2, 2, 3], DType::FLOAT32);
    let b = Tensor::ones(&[3, 3, 4], DType::FLOAT32);
    assert_panics_with(
        || drop(a.matmul(&b)),
        &["matmul", "[2, 2, 3]", "[3, 3, 4]", "batch"],
    );
    // attention with a key whose last dim differs from the query's
    let q = Tensor::ones(&[2, 4, 8], DType::FLOAT32);
    let k = Tensor::ones(&[2, 5, 7], DType::FLOAT32);
    let v = Tensor::ones(&[2, 5, 8], DType::FLOAT32);
    assert_panics_with(
        || drop(q.scaled_dot_product_attention(&k, &v, None, 0.0, false)),
        &["scaled_dot_product_attention", "[2, 4, 8]", "[2, 5, 7]"],
    );
    // a value whose length differs from the key's
    let k = Tensor::ones(&[2, 5, 8], DType::FLOAT32);
    let v = Tensor::ones(&[2, 6, 8], DType::FLOAT32);
    assert_panics_with(
        || drop(q.scaled_dot_product_attention(&k, &v, None, 0.0, false)),
        &["scaled_dot_product_attention", "[2, 5, 8]", "[2, 6, 8]"],
    );
    // cat across devices
    let c = Tensor::from_slice(&[1f32], &[1]);
    let r = Tensor::from_slice_on(&[1f32], &[1], "REF");
    assert_panics_with(|| drop(Tensor::cat(&[&c, &r], 0)), &["cat", "CPU", "REF"]);
    let msg = panic_message(|| drop(Tensor::cat(&[&c, &r], 0)));
    assert!(!msg.contains("add"), "{msg}");
    // unflatten with sizes that don't multiply to the dim
    let u = Tensor::ones(&[2, 6], DType::FLOAT32);
    assert_panics_with(
        || drop(u.unflatten(1, &[4, 2])),
        &["unflatten", "[4, 2]", "6", "[2, 6]"],
    );
    assert_panics_with(
        || drop(u.unflatten(1, &[4, -1])),
        &["unflatten", "[4, -1]", "6"],
    );
    assert_panics_with(|| drop(u.unflatten(1, &[-1, -1])), &["unflatten"]);
}
