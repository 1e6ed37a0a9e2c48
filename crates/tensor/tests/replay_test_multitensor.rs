//! tinygrad's `test/backend/test_multitensor.py`, replayed on our API (see `replay/mod.rs`).
//!
//! tinygrad's `Device.DEFAULT:n` devices are `CPU:n` on the CPU run and `REF:n` on the REF run
//! (`dev(ctx, n)`). tinygrad's `UOp.allreduce(t.uop, Ops.ADD, ..)` of a tensor sharded on axis 0
//! has no public counterpart: here it is a sum over the sharded axis (`t.reshape(n, ..)` keeps
//! the split on the new axis 0, `sum(0)` reduces each shard and all-reduces the partials), whose
//! result is replicated on every device: each device's copy is compared with tinygrad's.

mod replay;

use replay::{Case, Ctx, assert_allclose, dev, devs, refs, tuple, values_f64, with_env};
use tinygrad_tensor::nn::optim::{self, Optimizer};
use tinygrad_tensor::nn::{Linear, Module, get_parameters};
use tinygrad_tensor::{Axis, DType, Idx, Jit, Ops, Reduction, Tensor};

const CASES: &[Case] = &[
    ("TestMultiTensor.test_to", to),
    ("TestMultiTensor.test_gradient", gradient),
    ("TestMultiTensor.test_shard", shard),
    ("TestMultiTensor.test_shard_same_device", shard_same_device),
    ("TestMultiTensor.test_numpy", numpy),
    ("TestMultiTensor.test_four_add", four_add),
    ("TestMultiTensor.test_elementwise_dtype", elementwise_dtype),
    (
        "TestMultiTensor.test_shrink_on_shard_axis",
        shrink_on_shard_axis,
    ),
    ("TestMultiTensor.test_simple_reduce", simple_reduce),
    ("TestMultiTensor.test_stack", stack),
    ("TestMultiTensor.test_allreduce_naive", allreduce_naive),
    ("TestMultiTensor.test_allreduce_ring", allreduce_ring),
    ("TestMultiTensor.test_allreduce_all2all", allreduce_all2all),
    ("TestMultiTensor.test_copy_jit", copy_jit),
    ("TestMultiTensor.test_fuzz_allreduce", fuzz_allreduce),
    (
        "TestMultiTensor.test_data_parallel_simple_train_step",
        data_parallel_simple_train_step,
    ),
    (
        "TestMultiTensor.test_rand_on_multiple_devices",
        rand_on_multiple_devices,
    ),
    (
        "TestMultiTensor.test_rand_on_multiple_devices_manual_seed",
        rand_on_multiple_devices_manual_seed,
    ),
    (
        "TestMultiTensor.test_const_like_shrink_on_shard_axis",
        const_like_shrink_on_shard_axis,
    ),
    ("TestHandleData.test_copied_to_device", copied_to_device),
    ("TestMultiBufferView.test_shrink_2d", mbv_shrink_2d),
    (
        "TestMultiBufferView.test_reshape_then_shrink",
        mbv_reshape_then_shrink,
    ),
    (
        "TestMultiBufferView.test_chained_shrink",
        mbv_chained_shrink,
    ),
    ("TestMultiBufferView.test_4_devices", mbv_4_devices),
];

const F32: DType = DType::FLOAT32;

/// numpy's `assert_almost_equal(got, want, decimal)`: `|want - got| < 1.5 * 10^-decimal`.
fn assert_almost_equal(got: &[f64], want: &[f64], decimal: i32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: number of elements");
    let tol = 1.5 * 10f64.powi(-decimal);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (w - g).abs() < tol,
            "{what}: element {i}: got {g}, want {w} (decimal {decimal})"
        );
    }
}

/// Items (kernels and copies) this thread launches while `f` runs.
fn items_launched(f: impl FnOnce()) -> usize {
    let before = tinygrad_tensor::thread_run_counts().1;
    f();
    tinygrad_tensor::thread_run_counts().1 - before
}

// ---------------------------------------------------------------- TestMultiTensor

fn to(ctx: &Ctx) {
    let x = Tensor::ones(&[256], F32).contiguous();
    x.realize();
    x.to_(&tuple(&devs(ctx, &[1, 2])));
    assert_eq!(x.shape(), vec![256]);
    let y = &x + &x;
    y.realize();
    assert_allclose(&values_f64(&y), &[2.0; 256], 0.0, 1e-7, "X + X");
}

fn gradient(ctx: &Ctx) {
    let x = Tensor::ones(&[256], F32).contiguous();
    x.realize();
    x.to_(&tuple(&devs(ctx, &[1, 2])));
    let grad = x.sum(Axis::All).gradient(&[&x])[0].clone();
    grad.realize();
    assert_allclose(&values_f64(&grad), &[1.0; 256], 0.0, 1e-7, "grad");
}

fn shard(ctx: &Ctx) {
    let x = Tensor::ones(&[256], F32).contiguous();
    x.realize();
    x.shard_(&refs(&devs(ctx, &[1, 2])), Some(0));
    // tinygrad: X.uop.src[0].shape == (128,) (each device holds half). Its other assertions
    // (the MULTI's DEVICE range source) are about tinygrad's IR, which has no such range here.
    let u = x.uop();
    assert_eq!(u.op(), Ops::Multi);
    assert_eq!(u.src()[0].shape_vec(), vec![128]);
    let y = &x + &x;
    y.realize();
    assert_allclose(&values_f64(&y), &[2.0; 256], 0.0, 1e-7, "X + X");
}

fn shard_same_device(ctx: &Ctx) {
    let x = Tensor::ones(&[256], F32).contiguous();
    x.realize();
    let d1 = dev(ctx, 1);
    let here = x.device().to_string();
    x.shard_(&[d1.as_str(), here.as_str()], Some(0));
    let y = &x + &x;
    y.realize();
    assert_allclose(&values_f64(&y), &[2.0; 256], 0.0, 1e-7, "X + X");
}

fn numpy(ctx: &Ctx) {
    let x = Tensor::ones(&[256], F32);
    x.shard_(&refs(&devs(ctx, &[1, 2])), Some(0));
    assert_allclose(&values_f64(&x), &[1.0; 256], 0.0, 1e-7, "X");
}

fn four_add(ctx: &Ctx) {
    let x = Tensor::ones(&[256, 256], F32).contiguous();
    x.realize();
    let w = Tensor::ones(&[256, 256], F32).contiguous();
    w.realize();
    let d4 = devs(ctx, &[1, 2, 3, 4]);
    x.shard_(&refs(&d4), Some(1));
    w.shard_(&refs(&d4), None);
    let o = &x + &w;
    assert_allclose(&values_f64(&o), &vec![2.0; 256 * 256], 0.0, 1e-7, "O");
}

fn elementwise_dtype(ctx: &Ctx) {
    Tensor::manual_seed(0);
    let x = Tensor::randn(&[8, 8]);
    x.realize();
    let w = Tensor::randn(&[8, 8]);
    w.realize();
    let d4 = devs(ctx, &[1, 2, 3, 4]);
    x.shard_(&refs(&d4), Some(0));
    w.shard_(&refs(&d4), Some(0));
    let o = (x.shrink(&[(0, 2), (0, 8)]) * w.shrink(&[(0, 2), (0, 8)])).lt(2.0);
    assert_eq!(o.dtype(), DType::BOOL);
    // X.numpy()[0:2]*W.numpy()[0:2] < 2, in float32 as numpy
    let (xn, wn) = (x.to_vec::<f32>(), w.to_vec::<f32>());
    let want: Vec<f64> = (0..16)
        .map(|i| f64::from(u8::from(xn[i] * wn[i] < 2.0)))
        .collect();
    assert_allclose(&values_f64(&o), &want, 0.0, 1e-7, "O");
}

fn shrink_on_shard_axis(ctx: &Ctx) {
    let x = Tensor::arange(0, 16, 1).reshape(&[4, 4]).deep_clone();
    x.realize();
    let x_np = x.to_vec::<i32>();
    x.shard_(&refs(&devs(ctx, &[1, 2])), Some(0));
    for i in 0..2 {
        let xt = x.shrink(&[(i * 2, i * 2 + 2), (0, 4)]).contiguous();
        xt.realize();
        assert_eq!(xt.to_vec::<i32>(), x_np[i * 8..i * 8 + 8], "shard {i}");
    }
}

fn simple_reduce(ctx: &Ctx) {
    // hypothesis samples (devices, rop, shard_axis, reduce_axis); every combination runs here
    let cases = ctx.value("cases").as_array().expect("cases");
    for c in cases {
        let ndev = c["ndev"].as_u64().expect("ndev") as usize;
        let devices = devs(ctx, &(1..=ndev).collect::<Vec<_>>());
        let rop = c["rop"].as_str().expect("rop");
        let shard_axis = c["shard_axis"].as_i64().map(|a| a as isize);
        let reduce_axis: Axis = c["reduce_axis"]
            .as_i64()
            .map_or(Axis::All, |a| (a as isize).into());
        let get = |key: &str| -> (Vec<usize>, Vec<f64>) {
            let v = &c[key];
            let shape = v["shape"]
                .as_array()
                .expect("shape")
                .iter()
                .map(|d| d.as_u64().expect("dim") as usize)
                .collect();
            let data = v["data"]
                .as_array()
                .expect("data")
                .iter()
                .map(replay::number)
                .collect();
            (shape, data)
        };
        let (shape, data) = get("x");
        let data: Vec<f32> = data.iter().map(|&v| v as f32).collect();
        let x = Tensor::from_slice(&data, &shape);
        x.shard_(&refs(&devices), shard_axis);
        let what = format!("{rop} devices {ndev} shard {shard_axis:?} reduce {reduce_axis:?}");
        assert_eq!(x.to_vec::<f32>(), data, "{what}: X.numpy()");
        let fx = match rop {
            "ADD" => x.sum(reduce_axis),
            "MUL" => x.prod(reduce_axis),
            "MAX" => x.max(reduce_axis),
            _ => panic!("unknown rop {rop}"),
        };
        let (wshape, want) = get("want");
        assert_eq!(fx.shape(), wshape, "{what}: shape");
        assert_allclose(&values_f64(&fx), &want, 1e-6, 1e-6, &what);
    }
}

/// `np.stack(xs, axis=dim)` of row-major 4x4 arrays.
fn np_stack(xs: &[Vec<f32>], dim: usize) -> Vec<f64> {
    let mut out = Vec::new();
    match dim {
        0 => xs
            .iter()
            .for_each(|x| out.extend(x.iter().map(|&v| f64::from(v)))),
        _ => {
            for i in 0..4 {
                for x in xs {
                    out.extend(x[i * 4..i * 4 + 4].iter().map(|&v| f64::from(v)));
                }
            }
        }
    }
    out
}

fn stack(ctx: &Ctx) {
    let d2 = devs(ctx, &[1, 2]);
    let x = Tensor::rand(&[4, 4]);
    x.shard_(&refs(&d2), Some(0));
    let y = Tensor::rand(&[4, 4]);
    y.shard_(&refs(&d2), Some(0));
    let z = Tensor::rand(&[4, 4]);
    z.shard_(&refs(&d2), Some(1)); // mismatched shard axis gets resharded
    for dim in [0usize, 1] {
        let got = Tensor::stack(&[&x, &y, &z], dim as isize);
        let want = np_stack(&[x.to_vec(), y.to_vec(), z.to_vec()], dim);
        assert_allclose(&values_f64(&got), &want, 0.0, 1e-7, &format!("dim {dim}"));
    }
    let grad = Tensor::stack(&[&x, &y], 0).sum(Axis::All).gradient(&[&x])[0].clone();
    assert_allclose(&values_f64(&grad), &[1.0; 16], 0.0, 1e-7, "grad");
}

/// tinygrad's `_test_allreduce`: `aa`, the four quarters of `t` added and repeated, and each
/// device's copy of the all-reduce of `t` sharded on axis 0 over four devices, side by side.
fn test_allreduce(ctx: &Ctx, t: &Tensor) -> (Tensor, Vec<f64>) {
    let cols = t.shape()[1];
    let q = |i: usize| t.shrink(&[(i * 64, i * 64 + 64), (0, cols)]);
    let aa = (q(0) + q(1) + q(2) + q(3)).repeat(&[4, 1]);
    aa.realize();
    let d4 = devs(ctx, &[1, 2, 3, 4]);
    let ts = t.shard(&refs(&d4), Some(0));
    ts.realize();
    let b = ts.reshape(&[4, 64, cols]).sum(0isize);
    b.realize();
    assert_eq!(b.shard_axis(), None, "the all-reduce is replicated");
    let b_all: Vec<f64> = d4.iter().flat_map(|d| values_f64(&b.to(d))).collect();
    (aa, b_all)
}

/// tinygrad's `Tensor.rand(256, 256)`; on REF (an interpreter: 8 s a case at this size)
/// `(256, 16)`, the same rows and quarters.
fn allreduce_input(ctx: &Ctx) -> Tensor {
    Tensor::rand(&[256, if ctx.device == "REF" { 16 } else { 256 }])
}

fn allreduce_naive(ctx: &Ctx) {
    with_env(&[("RING", "0")], || {
        let (a, b) = test_allreduce(ctx, &allreduce_input(ctx));
        assert_almost_equal(&values_f64(&a), &b, 5, "naive all-reduce");
    });
}

fn allreduce_ring(ctx: &Ctx) {
    with_env(&[("RING", "2")], || {
        let (a, b) = test_allreduce(ctx, &allreduce_input(ctx));
        assert_almost_equal(&values_f64(&a), &b, 5, "ring all-reduce");
    });
}

fn allreduce_all2all(ctx: &Ctx) {
    with_env(&[("ALL2ALL", "2")], || {
        let (a, b) = test_allreduce(ctx, &allreduce_input(ctx));
        assert_almost_equal(&values_f64(&a), &b, 5, "all-to-all all-reduce");
    });
}

fn copy_jit(ctx: &Ctx) {
    let to = dev(ctx, 1);
    let mut jit = Jit::new(move |x: &[Tensor]| vec![x[0].to(&to) + 1.0]);
    for i in 0..5 {
        let t = Tensor::rand(&[256]);
        t.realize();
        let x = jit.call(std::slice::from_ref(&t)).expect("copy_tensor")[0].clone();
        assert_eq!((&t + 1.0).to_vec::<f32>(), x.to_vec::<f32>(), "call {i}");
    }
    // (not in tinygrad's test) the last calls were replays of the capture, so the JIT was tested
    assert!(jit.replays() > 0, "the Jit never replayed");
}

fn fuzz_allreduce(ctx: &Ctx) {
    let shapes = ctx.value("shapes").as_array().expect("shapes");
    for s in shapes {
        let (it, n) = (s["it"].as_u64().unwrap(), s["n"].as_u64().unwrap() as usize);
        let shape: Vec<usize> = s["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        let devices = devs(ctx, &(0..n).collect::<Vec<_>>());
        let t = Tensor::rand(&shape);
        t.shard_(&refs(&devices), Some(0));
        // the all-reduce of t's shards: t split on a new axis 0, one entry per device, summed
        let mut split: Vec<usize> = vec![n, shape[0] / n];
        split.extend(&shape[1..]);
        let allreduce = || t.reshape(&split).sum(0isize);
        let a = with_env(&[("RING", "0")], || allreduce().realize().clone());
        let b = with_env(&[("RING", "2")], || allreduce().realize().clone());
        let diff = &a - &b;
        let numel: usize = diff.shape().iter().product();
        let flat = diff.reshape(&[numel]).abs();
        let mean_err = flat.mean(Axis::All).item::<f32>();
        let max_err = flat.max(Axis::All).item::<f32>();
        assert!(mean_err < 1e-6, "big mean error, iteration {it}_{n}");
        assert!(max_err < 1e-6, "big max error, iteration {it}_{n}");
    }
}

fn data_parallel_simple_train_step(ctx: &Ctx) {
    let m = Linear::new(128, 128);
    let fake_image = Tensor::rand(&[128]);
    let labels = Tensor::randint(&[2], 0, 127, DType::INT32);
    // _test_model_train_step
    let opt = optim::lars(get_parameters(&m), 0.1);
    opt.zero_grad();
    // tinygrad broadcasts the (128,) logits against the (2,) labels inside the loss (its one-hot
    // is (2, 128)); ours checks the shapes, so the logits are expanded to (2, 128) first: the
    // same loss, term for term.
    let loss = |x: &Tensor, y: &Tensor| {
        m.forward(x)
            .reshape(&[1, 128])
            .expand(&[2, 128])
            .sparse_categorical_crossentropy(y, -1, 0.1, Reduction::Mean)
    };
    loss(&fake_image, &labels).backward();
    let grad = values_f64(&m.weight.grad().expect("conv1.weight.grad"));

    let d2 = devs(ctx, &[1, 2]);
    let fake_image_sharded = fake_image.shard(&refs(&d2), Some(0));
    let labels_sharded = labels.shard(&refs(&d2), Some(0));
    for p in get_parameters(&m) {
        p.shard_(&refs(&d2), None).realize();
    }
    opt.zero_grad();
    loss(&fake_image_sharded, &labels_sharded).backward();
    let shard_grad = values_f64(&m.weight.grad().expect("conv1.weight.grad"));
    assert_allclose(&shard_grad, &grad, 1e-5, 1e-5, "conv1.weight.grad");
}

fn rand_on_multiple_devices(ctx: &Ctx) {
    // different devices generate different rand
    let d0_rand = Tensor::rand_on(&[256], F32, &dev(ctx, 0));
    d0_rand.realize();
    let d1_rand = Tensor::rand_on(&[256], F32, &dev(ctx, 1));
    d1_rand.realize();
    // not np.allclose (rtol 1e-5, atol 1e-8)
    let (a, b) = (values_f64(&d0_rand), values_f64(&d1_rand));
    let allclose = a
        .iter()
        .zip(&b)
        .all(|(x, y)| (x - y).abs() <= 1e-8 + 1e-5 * y.abs());
    assert!(!allclose, "the two devices drew the same numbers");
}

fn rand_on_multiple_devices_manual_seed(ctx: &Ctx) {
    let (d0, d1) = (dev(ctx, 0), dev(ctx, 1));
    let rand2 = |d: &str| Tensor::rand_on(&[2], F32, d).to_vec::<f32>();
    Tensor::manual_seed(123);
    let d0_rand = rand2(&d0);
    let d1_rand = rand2(&d1);

    // manual_seed again gives the same values
    Tensor::manual_seed(123);
    let d0_rand2 = rand2(&d0);
    let d1_rand2 = rand2(&d1);
    assert_eq!(d0_rand, d0_rand2);
    assert_eq!(d1_rand, d1_rand2);

    // device seed is only determined by init order, so flipping init order flips rands
    Tensor::manual_seed(123);
    let d1_rand_flip = rand2(&d1);
    let d0_rand_flip = rand2(&d0);
    assert_eq!(d0_rand, d1_rand_flip);
    assert_eq!(d1_rand, d0_rand_flip);
}

fn const_like_shrink_on_shard_axis(ctx: &Ctx) {
    let t = Tensor::ones(&[16, 16], DType::INT32).shard(&refs(&devs(ctx, &[1, 2])), Some(0));
    let out = Tensor::full_like(&t, 2i32).shrink(&[(0, 16), (0, 8)]);
    // tinygrad: check_schedule(out, 0), the constant is not materialized. Our realize writes a
    // constant into a buffer (as on one device): one kernel per shard, and no copy between
    // the devices.
    let kernels = items_launched(|| {
        out.realize();
    });
    assert_eq!(kernels, 2, "kernels run");
    assert_eq!(out.shape(), vec![16, 8]);
    assert_eq!(out.to_vec::<i32>(), vec![2; 16 * 8]);
}

// ---------------------------------------------------------------- TestHandleData

fn copied_to_device(ctx: &Ctx) {
    let device = devs(ctx, &[0, 1, 2, 3]);
    let make = || {
        let t = Tensor::from_slice(&[1i32, 2, 3, 4], &[4]).shard(&refs(&device), None);
        t.realize();
        t
    };
    let t = make();
    let not_covered = t.to(&dev(ctx, 5));
    // len(not_covered.schedule_linear().src) == 1: one copy
    assert_eq!(
        items_launched(|| {
            not_covered.realize();
        }),
        1,
        "items"
    );
    let t = make();
    let not_covered = t.to(&dev(ctx, 5));
    assert_eq!(not_covered.realize().to_vec::<i32>(), vec![1, 2, 3, 4]);

    for d in &device {
        let t = make();
        let covered = t.to(d);
        assert_eq!(covered.realize().to_vec::<i32>(), vec![1, 2, 3, 4], "{d}");
    }
}

// ---------------------------------------------------------------- TestMultiBufferView

/// `_check`: the view of the sharded tensor, made contiguous, equals the view of the
/// single-device one. tinygrad also asserts that no kernel runs (a BUFFER_VIEW of each shard);
/// our scheduler has no buffer views (`contiguous()` of a view runs a copy kernel, on one
/// device too), so here: one kernel per shard, on its own device, and no copy between devices.
fn mbv_check(a_ref: &Tensor, a_multi: &Tensor, view_fn: impl Fn(&Tensor) -> Tensor) {
    let b_ref = view_fn(a_ref);
    let b_multi = view_fn(a_multi).contiguous();
    let launched = items_launched(|| {
        b_multi.realize();
    });
    assert_eq!(launched, a_multi.devices().len(), "kernels run for a view");
    assert_eq!(b_multi.to_vec::<i32>(), b_ref.to_vec::<i32>());
}

fn arange_2d(rows: usize, cols: usize) -> Tensor {
    let t = Tensor::arange(0, (rows * cols) as i32, 1)
        .reshape(&[rows, cols])
        .deep_clone();
    t.realize();
    t
}

fn sharded(t: &Tensor, devices: &[String], axis: isize) -> Tensor {
    let s = t.shard(&refs(devices), Some(axis));
    s.realize();
    s
}

fn mbv_shrink_2d(ctx: &Ctx) {
    let r = arange_2d(6, 4);
    let a = sharded(&arange_2d(6, 4), &devs(ctx, &[1, 2]), 1);
    mbv_check(&r, &a, |t| t.shrink(&[(1, 4), (0, 4)]));
}

fn mbv_reshape_then_shrink(ctx: &Ctx) {
    let r = arange_2d(8, 6);
    let a = sharded(&arange_2d(8, 6), &devs(ctx, &[1, 2]), 1);
    mbv_check(&r, &a, |t| t.reshape(&[4, 2, 6]).getitem(&[Idx::Int(1)]));
}

fn mbv_chained_shrink(ctx: &Ctx) {
    let r = arange_2d(10, 8);
    let a = sharded(&arange_2d(10, 8), &devs(ctx, &[1, 2]), 1);
    mbv_check(&r, &a, |t| {
        t.shrink(&[(2, 8), (0, 8)]).shrink(&[(1, 4), (0, 8)])
    });
}

fn mbv_4_devices(ctx: &Ctx) {
    let r = arange_2d(8, 12);
    let a = sharded(&arange_2d(8, 12), &devs(ctx, &[1, 2, 3, 4]), 1);
    let out = a.getitem(&[Idx::Int(5)]).contiguous();
    // tinygrad: no kernel (a BUFFER_VIEW per shard); here one per shard, as in `mbv_check`
    let launched = items_launched(|| {
        out.realize();
    });
    assert_eq!(launched, 4, "kernels run");
    assert_eq!(
        out.to_vec::<i32>(),
        r.getitem(&[Idx::Int(5)]).to_vec::<i32>()
    );
}

#[test]
fn cpu() {
    replay::replay("test_multitensor", "CPU", CASES);
}

#[test]
fn reference() {
    replay::replay("test_multitensor", "REF", CASES);
}
