//! tinygrad's `test/null/test_tensor.py` (commit a9069c17; the tensor tests tinygrad runs on
//! its NULL device), replayed on our API: one case per test method, named `Class.test_name`;
//! the excluded methods and their reasons are in `tests/golden/replay/null_test_tensor.json`
//! (`tests/golden/replay/gen_null_test_tensor.py`). tinygrad's `NULL:0`/`NULL:1` devices are
//! the suite's device and its second instance (`CPU`/`CPU:1`, `REF`/`REF:1`).

mod replay;

use replay::{Case, Ctx, realized};
use tinygrad_tensor::{Axis, DType, Idx, Reduction, Tensor};

const CASES: &[Case] = &[
    ("TestInferenceMode.test_inference", inference),
    (
        "TestInferenceMode.test_no_grad_mode_context_manager",
        no_grad_mode_context_manager,
    ),
    ("TestTensorUnique.test_empty_bufs_unique", empty_bufs_unique),
    (
        "TestTensorUnique.test_zeros_bufs_unique_sep",
        zeros_bufs_unique_sep,
    ),
    ("TestTensorUnique.test_zeros_bufs_unique", zeros_bufs_unique),
    ("TestRand.test_rand_large_tensor", rand_large_tensor),
    (
        "TestTensorConstLike.test_const_like_shape",
        const_like_shape,
    ),
    (
        "TestTensorConstLike.test_const_like_multi_device",
        const_like_multi_device,
    ),
    (
        "TestTensorDevice.test_create_from_single_device_tuple",
        create_from_single_device_tuple,
    ),
    (
        "TestTensorPad.test_pad_int_with_neg_inf",
        pad_int_with_neg_inf,
    ),
    ("TestTensorDeviceMismatch.test_gather", mismatch_gather),
    (
        "TestTensorDeviceMismatch.test_scatter_index",
        mismatch_scatter_index,
    ),
    (
        "TestTensorDeviceMismatch.test_scatter_src",
        mismatch_scatter_src,
    ),
    (
        "TestTensorDeviceMismatch.test_getitem_tensor_index",
        mismatch_getitem_tensor_index,
    ),
    (
        "TestTensorDeviceMismatch.test_sparse_categorical_crossentropy",
        mismatch_sparse_categorical_crossentropy,
    ),
];

#[test]
fn cpu() {
    replay::replay("null_test_tensor", "CPU", CASES);
}

#[test]
fn reference() {
    replay::replay("null_test_tensor", "REF", CASES);
}

#[test]
fn webgpu() {
    replay::on_webgpu("null_test_tensor on WEBGPU", |dev| {
        replay::replay("null_test_tensor", dev, CASES)
    });
}

const F32: DType = DType::FLOAT32;

/// The second instance of the suite's device (tinygrad's `NULL:1`).
fn second(ctx: &Ctx) -> String {
    format!("{}:1", ctx.device)
}

fn randn(shape: &[usize]) -> Tensor {
    Tensor::randn(shape)
}

// ---- TestInferenceMode ----

/// The forward pass of both tests, without `backward`: no tensor gets a gradient.
fn forward_leaves_no_grads(x: &Tensor, m: &Tensor, w: &Tensor) {
    let tmp = x.mul(m);
    let mm = tmp.matmul(w);
    let out = mm.relu().sum(Axis::All);
    out.realize();
    for (name, t) in [("x", x), ("m", m), ("tmp", &tmp), ("mm", &mm), ("W", w)] {
        assert!(t.grad().is_none(), "{name}.grad is set without a backward");
    }
}

fn inference(_: &Ctx) {
    forward_leaves_no_grads(&randn(&[1, 3]), &randn(&[1, 3]), &randn(&[3, 3]));
}

fn no_grad_mode_context_manager(_: &Ctx) {
    // (tinygrad's test defines a function and calls it: the same forward pass, inside a
    // function here too)
    let f = |x: &Tensor, m: &Tensor, w: &Tensor| forward_leaves_no_grads(x, m, w);
    f(&randn(&[1, 3]), &randn(&[1, 3]), &randn(&[3, 3]));
}

// ---- TestTensorUnique ----

/// Whether two realized tensors are views of one buffer (tinygrad's `a.uop.buffer is
/// b.uop.buffer`): a value written into `a`'s buffer shows in `b`.
fn same_buffer(a: &Tensor, b: &Tensor) -> bool {
    let before = b.to_f64_vec();
    a.assign(&(a * 0.0 + 7.0)).realize();
    before != b.to_f64_vec()
}

fn empty_bufs_unique(_: &Ctx) {
    let a = Tensor::empty(&[10, 10], F32).contiguous();
    let b = Tensor::empty(&[10, 10], F32).contiguous();
    Tensor::try_realize_all(&[&a, &b]).unwrap();
    // (the values of `empty` are whatever the buffers held: zero them first)
    a.assign(&(&a * 0.0)).realize();
    b.assign(&(&b * 0.0)).realize();
    assert!(!same_buffer(&a, &b));
}

fn zeros_bufs_unique_sep(_: &Ctx) {
    let a = realized(Tensor::zeros(&[10, 10], F32).contiguous());
    let b = realized(Tensor::zeros(&[10, 10], F32).contiguous());
    assert!(!same_buffer(&a, &b));
}

fn zeros_bufs_unique(_: &Ctx) {
    let a = Tensor::zeros(&[10, 10], F32).contiguous();
    let b = Tensor::zeros(&[10, 10], F32).contiguous();
    Tensor::try_realize_all(&[&a, &b]).unwrap();
    assert!(!same_buffer(&a, &b));
}

// ---- TestRand ----

fn rand_large_tensor(_: &Ctx) {
    // more than u32::MAX numbers: scheduling (not running) must not fail in the frontend
    Tensor::manual_seed(0);
    for _ in 0..3 {
        let t = Tensor::rand(&[1 << 17, 1 << 17]);
        let items = Tensor::schedule(&[&t]);
        assert!(!items.is_empty());
    }
}

// ---- TestTensorConstLike ----

fn const_like_shape(_: &Ctx) {
    let t = Tensor::ones(&[3, 4], F32);
    let c = Tensor::full_like(&t, 0);
    assert_eq!(c.shape(), vec![3, 4]);
    assert_eq!(c.dtype(), t.dtype());
}

fn const_like_multi_device(ctx: &Ctx) {
    let (d0, d1) = (format!("{}:0", ctx.device), second(ctx));
    let t = Tensor::ones(&[8, 4], F32).shard(&[&d0, &d1], Some(0));
    let c = Tensor::full_like(&t, 5);
    assert_eq!(c.shape(), vec![8, 4]);
    // (tinygrad's constant has no device and joins the sharded tensor's; every tensor here has
    // a device: the constant is made on the tensor's devices)
    let out = &t + &c;
    assert_eq!(out.device(), t.device());
    assert_eq!(out.shard_axis(), Some(0));
    assert_eq!(out.to_vec::<f32>(), vec![6.0; 32]);
}

// ---- TestTensorDevice ----

fn create_from_single_device_tuple(ctx: &Ctx) {
    let one = format!("({},)", ctx.device);
    let t = Tensor::from_slice_on(&[1.0f32], &[1], &one);
    let out = realized(&t + &Tensor::new([2.0]));
    assert_eq!(out.to_vec::<f32>(), vec![3.0]);
}

// ---- TestTensorPad ----

fn pad_int_with_neg_inf(_: &Ctx) {
    let t = Tensor::arange(0, 9, 1).reshape(&[1, 1, 3, 3]);
    assert_eq!(t.dtype(), DType::INT32);
    // torch-style `pad((1, 2, 0, -1))`: the last axis padded by (1, 2), the one before by
    // (0, -1) — a negative pad is a shrink, written as one here
    let r = t
        .shrink(&[(0, 1), (0, 1), (0, 2), (0, 3)])
        .pad(&[(0, 0), (0, 0), (0, 0), (1, 2)], f64::NEG_INFINITY);
    // tinygrad's `weakfloat`, the default float once realized
    assert_eq!(r.dtype(), F32);
    assert_eq!(r.shape(), vec![1, 1, 2, 6]);
    let ninf = f32::NEG_INFINITY;
    assert_eq!(
        r.to_vec::<f32>(),
        vec![
            ninf, 0.0, 1.0, 2.0, ninf, ninf, ninf, 3.0, 4.0, 5.0, ninf, ninf
        ]
    );
}

// ---- TestTensorDeviceMismatch ----
//
// tinygrad raises when an index (or scatter's source, or the labels) is on another device than
// the tensor; here it is moved to the tensor's device (a copy; docs/API.md lists this
// departure). The replays check the result equals the op with everything on one device.

fn same_values(a: &Tensor, b: &Tensor) {
    assert_eq!(a.device(), b.device());
    assert_eq!(a.shape(), b.shape());
    assert_eq!(a.to_f64_vec(), b.to_f64_vec());
}

fn mismatch_gather(ctx: &Ctx) {
    let x = Tensor::randn(&[3, 4]);
    let idx = Tensor::new([[1, 0, 2, 1], [0, 0, 1, 2], [2, 1, 0, 0]]);
    let moved = x.gather(0, &idx.to(&second(ctx)));
    same_values(&moved, &x.gather(0, &idx));
}

fn mismatch_scatter_index(ctx: &Ctx) {
    let x = Tensor::zeros(&[3, 4], F32);
    let idx = Tensor::new([[1, 0, 2, 1], [0, 2, 1, 0]]);
    let src = Tensor::randn(&[2, 4]);
    let moved = x.scatter(0, &idx.to(&second(ctx)), &src);
    same_values(&moved, &x.scatter(0, &idx, &src));
}

fn mismatch_scatter_src(ctx: &Ctx) {
    let x = Tensor::zeros(&[3, 4], F32);
    let idx = Tensor::new([[1, 0, 2, 1], [0, 2, 1, 0]]);
    let src = Tensor::randn(&[2, 4]);
    let moved = x.scatter(0, &idx, &src.to(&second(ctx)));
    same_values(&moved, &x.scatter(0, &idx, &src));
}

fn mismatch_getitem_tensor_index(ctx: &Ctx) {
    let x = Tensor::randn(&[4, 5]);
    let idx = Tensor::new([0, 1]);
    let moved = x.getitem(&[Idx::Tensor(idx.to(&second(ctx)))]);
    same_values(&moved, &x.getitem(&[Idx::Tensor(idx)]));
}

fn mismatch_sparse_categorical_crossentropy(ctx: &Ctx) {
    let x = Tensor::randn(&[2, 3]);
    let y = Tensor::new([0, 1]);
    let loss = |y: &Tensor| x.sparse_categorical_crossentropy(y, -1, 0.0, Reduction::Mean);
    same_values(&loss(&y.to(&second(ctx))), &loss(&y));
}
