//! tinygrad's `test/unit/test_multitensor.py`, replayed on our API (see `replay/mod.rs`).
//!
//! tinygrad's `Device.DEFAULT:n` devices are `CPU:n` on the CPU run and `REF:n` on the REF run
//! (`dev(ctx, n)`); `Device.DEFAULT` itself is the case's device. tinygrad's `t.clone()` (a new
//! buffer) is `deep_clone()`, `t.uop.axis` is `shard_axis()`, `GlobalCounters.kernel_count` the
//! items this thread launches (`items_launched`), `Context(TRAINING=1)` is `Tensor::train(true)`
//! and `Context(RING=..)` the environment variable while the case runs (`with_env`).

mod replay;

use replay::{
    Case, Ctx, assert_allclose, assert_panics, close, devs, realized, refs, tuple, values_f64,
    with_env,
};
use tinygrad_tensor::nn::optim::{self, Optimizer};
use tinygrad_tensor::nn::{
    BatchNorm, Conv2d, ConvOptions, Embedding, Module, RMSNorm, get_parameters,
};
use tinygrad_tensor::{Axis, DType, Idx, InterpolateMode, SInt, Tensor, Variable};

const CASES: &[Case] = &[
    ("TestMultiTensor.test_arange_shrink", arange_shrink),
    ("TestMultiTensor.test_shard_like", shard_like),
    ("TestMultiTensor.test_shard_reshape", shard_reshape),
    ("TestMultiTensor.test_shard_elementwise", shard_elementwise),
    (
        "TestMultiTensor.test_alu_deviceless_const",
        alu_deviceless_const,
    ),
    (
        "TestMultiTensor.test_add_rank_expand_shard",
        add_rank_expand_shard,
    ),
    ("TestMultiTensor.test_shard_reduce", shard_reduce),
    (
        "TestMultiTensor.test_shard_not_multiple",
        shard_not_multiple,
    ),
    (
        "TestMultiTensor.test_shard_reshape_cross_boundary",
        shard_reshape_cross_boundary,
    ),
    ("TestMultiTensor.test_tensor_from_multi", tensor_from_multi),
    ("TestMultiTensor.test_sharded_arange", sharded_arange),
    (
        "TestMultiTensor.test_shard_plus_one_sum",
        shard_plus_one_sum,
    ),
    (
        "TestMultiTensor.test_shard_plus_one_sum_d0",
        shard_plus_one_sum_d0,
    ),
    ("TestMultiTensor.test_simple_add", simple_add),
    ("TestMultiTensor.test_simple_add_X", simple_add_x),
    ("TestMultiTensor.test_simple_add_W", simple_add_w),
    ("TestMultiTensor.test_simple_add_XW", simple_add_xw),
    (
        "TestMultiTensor.test_allreduce_shard_ring_sum",
        allreduce_shard_ring_sum,
    ),
    (
        "TestMultiTensor.test_allreduce_cast_half",
        allreduce_cast_half,
    ),
    (
        "TestMultiTensor.test_allreduce_cast_half_assign",
        allreduce_cast_half_assign,
    ),
    (
        "TestMultiTensor.test_multiple_to_single_device",
        multiple_to_single_device,
    ),
    (
        "TestMultiTensor.test_to_single_device_gather_memory",
        to_single_device_gather_memory,
    ),
    ("TestMultiTensor.test_matmul_shard_none", |c| {
        matmul(c, None, None, false)
    }),
    ("TestMultiTensor.test_matmul_shard_X_0", |c| {
        matmul(c, Some(0), None, false)
    }),
    ("TestMultiTensor.test_matmul_shard_X_1", |c| {
        matmul(c, Some(1), None, false)
    }),
    ("TestMultiTensor.test_matmul_shard_W_0", |c| {
        matmul(c, None, Some(0), false)
    }),
    ("TestMultiTensor.test_matmul_shard_W_1", |c| {
        matmul(c, None, Some(1), false)
    }),
    ("TestMultiTensor.test_matmul_shard_0_0", |c| {
        matmul(c, Some(0), Some(0), false)
    }),
    ("TestMultiTensor.test_matmul_shard_0_1", |c| {
        matmul(c, Some(0), Some(1), false)
    }),
    ("TestMultiTensor.test_matmul_shard_1_0", |c| {
        matmul(c, Some(1), Some(0), false)
    }),
    ("TestMultiTensor.test_matmul_shard_1_1", |c| {
        matmul(c, Some(1), Some(1), false)
    }),
    ("TestMultiTensor.test_double_matmul_shard_X_0", |c| {
        matmul(c, Some(0), None, true)
    }),
    ("TestMultiTensor.test_double_matmul_shard_X_1", |c| {
        matmul(c, Some(1), None, true)
    }),
    ("TestMultiTensor.test_double_matmul_shard_W_0", |c| {
        matmul(c, None, Some(0), true)
    }),
    ("TestMultiTensor.test_double_matmul_shard_W_1", |c| {
        matmul(c, None, Some(1), true)
    }),
    ("TestMultiTensor.test_conv_data_shard", |c| {
        conv_data_shard(c, false)
    }),
    ("TestMultiTensor.test_conv_bias_data_shard", |c| {
        conv_data_shard(c, true)
    }),
    ("TestMultiTensor.test_backprop_conv", backprop_conv),
    ("TestMultiTensor.test_backward_sum", backward_sum),
    ("TestMultiTensor.test_embedding", embedding),
    ("TestMultiTensor.test_embedding_backward", |c| {
        embedding_backward(c, None)
    }),
    (
        "TestMultiTensor.test_embedding_backward_shard_weight",
        |c| embedding_backward(c, Some(1)),
    ),
    ("TestMultiTensor.test_rmsnorm", rmsnorm),
    (
        "TestMultiTensor.test_sdpa_causal_shard_batch",
        sdpa_causal_shard_batch,
    ),
    (
        "TestMultiTensor.test_symbolic_broadcast_copy",
        symbolic_broadcast_copy,
    ),
    (
        "TestMultiTensor.test_symbolic_broadcast_consumed",
        symbolic_broadcast_consumed,
    ),
    ("TestMultiTensor.test_flip", flip),
    (
        "TestMultiTensor.test_init_rand_with_multiple_devices_fail",
        init_rand_with_multiple_devices_fail,
    ),
    ("TestMultiTensor.test_rand_like_on_shard", |c| {
        rand_like_on_shard(c, None)
    }),
    ("TestMultiTensor.test_rand_like_on_shard_axis", |c| {
        rand_like_on_shard(c, Some(0))
    }),
    (
        "TestMultiTensor.test_rand_like_from_alu",
        rand_like_from_alu,
    ),
    (
        "TestMultiTensor.test_rand_like_none_shard",
        rand_like_none_shard,
    ),
    (
        "TestMultiTensor.test_rand_like_arg_dtype",
        rand_like_arg_dtype,
    ),
    ("TestMultiTensor.test_full_like_on_shard", |c| {
        full_like_on_shard(c, None)
    }),
    ("TestMultiTensor.test_full_like_on_shard_axis", |c| {
        full_like_on_shard(c, Some(0))
    }),
    ("TestMultiTensor.test_dropout_on_shard", dropout_on_shard),
    (
        "TestMultiTensor.test_dropout_on_shard_axis",
        dropout_on_shard_axis,
    ),
    ("TestMultiTensor.test_clone", clone),
    (
        "TestShrinkMultiTensorShardedAxis.test_shrink_bad_args",
        shrink_bad_args,
    ),
    ("TestShrinkMultiTensorShardedAxis.test_ops", shrink_ops),
    (
        "TestShrinkMultiTensorShardedAxis.test_add_two_partitions",
        add_two_partitions,
    ),
    (
        "TestShrinkMultiTensorShardedAxis.test_add_different_tensors",
        add_different_tensors,
    ),
    (
        "TestBatchNorm.test_unsynced_backprop_conv_bn",
        unsynced_backprop_conv_bn,
    ),
    (
        "TestBatchNorm.test_unsynced_backprop_standalone_bn",
        unsynced_backprop_standalone_bn,
    ),
    (
        "TestBatchNorm.test_unsynced_backprop_sync_weights",
        unsynced_backprop_sync_weights,
    ),
    ("TestBatchNorm.test_batchnorm", batchnorm),
    (
        "TestBatchNorm.test_synced_vs_unsynced_bn",
        synced_vs_unsynced_bn,
    ),
    ("TestMultiFromUnrenderable.test_from_npy", from_npy),
    (
        "TestMultiAssign.test_multi_assign_realized",
        multi_assign_realized,
    ),
    (
        "TestMultiAssign.test_multi_assign_unrealized",
        multi_assign_unrealized,
    ),
    (
        "TestMultiAssign.test_multi_assign_both_unrealized",
        multi_assign_both_unrealized,
    ),
    (
        "TestMultiAssign.test_multi_assign_scalar",
        multi_assign_scalar,
    ),
    (
        "TestMultiAssign.test_multi_assign_const_like",
        multi_assign_const_like,
    ),
    (
        "TestMultiAssign.test_multi_assign_piece",
        multi_assign_piece,
    ),
    (
        "TestMultiAssign.test_multi_assign_piece_noncontig",
        multi_assign_piece_noncontig,
    ),
    (
        "TestMultiAssign.test_multi_assign_var_offset",
        multi_assign_var_offset,
    ),
    (
        "TestMultiSetitem.test_setitem_scalar_axis0",
        setitem_scalar_axis0,
    ),
    (
        "TestMultiSetitem.test_setitem_scalar_axis_none",
        setitem_scalar_axis_none,
    ),
    (
        "TestMultiSetitem.test_setitem_slice_cross_shard",
        setitem_slice_cross_shard,
    ),
    (
        "TestMultiSetitem.test_setitem_full_slice",
        setitem_full_slice,
    ),
    ("TestMultiSetitem.test_setitem_stride", setitem_stride),
    (
        "TestMultiSetitem.test_setitem_single_shard",
        setitem_single_shard,
    ),
    (
        "TestMultiSetitem.test_setitem_tensor_value_replicated",
        setitem_tensor_value_replicated,
    ),
    (
        "TestMultiSetitem.test_setitem_tensor_value_sharded_aligned",
        setitem_tensor_value_sharded_aligned,
    ),
    ("TestTensorOps.test_interpolate", interpolate),
    ("TestTensorOps.test_bitcast", bitcast),
];

const F32: DType = DType::FLOAT32;

/// tinygrad's `devices_2`: `(d1, d2)`.
fn devices_2(ctx: &Ctx) -> Vec<String> {
    devs(ctx, &[1, 2])
}

/// tinygrad's `devices_4`: `(d1, d2, d3, d4)`.
fn devices_4(ctx: &Ctx) -> Vec<String> {
    devs(ctx, &[1, 2, 3, 4])
}

/// Items (kernels and copies) this thread launches while `f` runs.
fn items_launched(f: impl FnOnce()) -> usize {
    let before = tinygrad_tensor::thread_run_counts().1;
    f();
    tinygrad_tensor::thread_run_counts().1 - before
}

/// `self.assertEqual(t.tolist(), want)` / `np.testing.assert_equal(t.numpy(), want)`: the
/// shape and the values exactly.
fn assert_list(t: &Tensor, shape: &[usize], want: &[f64], what: &str) {
    assert_eq!(t.shape(), shape, "{what}: shape");
    assert_eq!(values_f64(t), want, "{what}: values");
}

fn f64s(v: impl IntoIterator<Item = i64>) -> Vec<f64> {
    v.into_iter().map(|x| x as f64).collect()
}

// ---------------------------------------------------------------- TestMultiTensor

fn arange_shrink(ctx: &Ctx) {
    let d2 = devices_2(ctx);
    let x = Tensor::arange(0, 4, 1);
    let a = x.shard(&refs(&d2), Some(0));
    assert_list(
        a.realize().shrink(&[(2, 4)]).realize(),
        &[2],
        &[2.0, 3.0],
        "(2, 4)",
    );
    let b = x.shard(&refs(&d2), Some(0));
    assert_list(
        b.realize().shrink(&[(0, 2)]).realize(),
        &[2],
        &[0.0, 1.0],
        "(0, 2)",
    );
}

fn shard_like(ctx: &Ctx) {
    let d2 = devices_2(ctx);
    let r = refs(&d2);
    let x = Tensor::ones(&[256], F32).shard(&r, Some(0));
    let y = Tensor::zeros(&[256], F32).shard_like(&x);
    assert_eq!(y.device(), x.device());
    assert_eq!(y.shard_axis(), Some(0));
    // also test with axis=None
    let x2 = Tensor::ones(&[256], F32).shard(&r, None);
    let y2 = Tensor::zeros(&[256], F32).shard_like(&x2);
    assert_eq!(y2.device(), x2.device());
    assert_eq!(y2.shard_axis(), None);
    // test with single device
    let x3 = Tensor::ones(&[256], F32);
    let y3 = Tensor::zeros(&[256], F32).shard_like(&x3);
    assert_eq!(y3.device(), x3.device());
    // cannot shard_like multi unless it's a no-op
    let x4 = Tensor::ones(&[256], F32).shard(&r, Some(0));
    let y4 = Tensor::ones(&[256], F32).shard(&r, Some(0)).shard_like(&x4);
    assert_eq!(y4.device(), x4.device());
    assert_eq!(y4.shard_axis(), Some(0));
    assert_panics("shard_like of a replicated tensor", &["shard_like"], || {
        Tensor::ones(&[256], F32).shard(&r, None).shard_like(&x4);
    });
}

/// `_test_shard_op`: `op` of `ones(n)` sharded over `devices_2` on axis 0.
fn shard_op(ctx: &Ctx, op: impl Fn(&Tensor) -> Tensor, shape: &[usize], out: &[f64], n: usize) {
    let t = Tensor::ones(&[n], F32).contiguous();
    t.realize();
    let t = t.shard(&refs(&devices_2(ctx)), Some(0));
    let r = op(&t);
    r.realize();
    assert_list(&r, shape, out, "r.tolist()");
}

fn shard_reshape(ctx: &Ctx) {
    shard_op(ctx, |t| t.reshape(&[2, 2]), &[2, 2], &[1.0; 4], 4);
}

fn shard_elementwise(ctx: &Ctx) {
    shard_op(ctx, |t| (t + t).reshape(&[2, 2]), &[2, 2], &[2.0; 4], 4);
}

fn alu_deviceless_const(ctx: &Ctx) {
    let s = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4])
        .shard(&refs(&devs(ctx, &[0, 1])), Some(0));
    // tinygrad's Tensor(UOp.const(1.0).cast(dtypes.float)), a constant with no device, is a
    // scalar operand here (it has no device either). Its second assertion, that constant
    // tensor reshaped to (1,) and expanded to (4,), has no counterpart: every Tensor of ours is
    // on a device, and one on a single device does not combine with a sharded one (as in
    // tinygrad, where a device's tensor does not either)
    assert_list(&(&s + 1.0f32), &[4], &[2.0, 3.0, 4.0, 5.0], "s + const");
}

fn add_rank_expand_shard(ctx: &Ctx) {
    // a sharded src keeps its own rank under implicit broadcast, its shard axis right-aligns
    let d2 = devices_2(ctx);
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4]).shard(&refs(&d2), Some(0));
    let b = Tensor::from_slice(&[10.0f32, 20.0, 30.0, 40.0], &[1, 4]).shard(&refs(&d2), None);
    assert_eq!((&a + &b).shard_axis(), Some(1));
    assert_list(&(&a + &b), &[1, 4], &[11.0, 22.0, 33.0, 44.0], "a + b");
}

fn shard_reduce(ctx: &Ctx) {
    shard_op(
        ctx,
        |t| t.reshape(&[2, 3]).sum(1isize),
        &[2],
        &[3.0, 3.0],
        6,
    );
    shard_op(
        ctx,
        |t| t.reshape(&[2, 3]).sum(0isize),
        &[3],
        &[2.0, 2.0, 2.0],
        6,
    );
}

fn shard_not_multiple(ctx: &Ctx) {
    let x = Tensor::ones(&[256], F32).contiguous();
    x.realize();
    let d3 = devs(ctx, &[1, 2, 3]);
    assert_panics("shard_ of 256 over 3 devices", &["shard", "evenly"], || {
        x.shard_(&refs(&d3), Some(0));
    });
}

fn shard_reshape_cross_boundary(ctx: &Ctx) {
    let x = Tensor::ones(&[5, 4], F32).contiguous();
    x.realize();
    let x = x.shard(&refs(&devices_2(ctx)), Some(1));
    assert_panics("reshape across the shard boundary", &["reshape"], || {
        x.reshape(&[10, 2]).shard_axis();
    });
}

fn tensor_from_multi(ctx: &Ctx) {
    let d2 = devices_2(ctx);
    let x = Tensor::from_slice(&[1i32, 2], &[2]);
    x.shard_(&refs(&d2), Some(0));
    // Tensor(X.uop): a tensor of the same graph
    let y = Tensor::from_uop(x.uop(), x.device());
    assert_eq!(y.devices(), d2);
    assert_eq!(x.to_vec::<i32>(), y.to_vec::<i32>());
    // Tensor(X.uop, dtype=dtypes.float): here the graph's tensor cast to float
    let z = Tensor::from_uop(x.uop(), x.device()).cast(F32);
    assert_eq!(z.dtype(), F32);
    assert_list(&z, &[2], &[1.0, 2.0], "Z");
}

fn sharded_arange(ctx: &Ctx) {
    let s = Tensor::arange(0, 1000, 1)
        .deep_clone()
        .shard(&refs(&devices_2(ctx)), Some(0));
    s.realize();
    assert_list(&s, &[1000], &f64s(0..1000), "sharded_arange");
}

fn shard_plus_one_sum_on(ctx: &Ctx, ns: &[usize]) {
    let x = Tensor::ones(&[256], F32).contiguous();
    x.realize();
    x.shard_(&refs(&devs(ctx, ns)), Some(0));
    let s = (&x + 1.0).sum(Axis::All);
    s.realize();
    // (not in tinygrad's test, which only realizes) the value
    assert_eq!(s.item::<f32>(), 512.0);
}

fn shard_plus_one_sum(ctx: &Ctx) {
    shard_plus_one_sum_on(ctx, &[1, 2]);
}

fn shard_plus_one_sum_d0(ctx: &Ctx) {
    shard_plus_one_sum_on(ctx, &[0, 2]);
}

fn simple_add_axis(ctx: &Ctx, shard_x: Option<isize>, shard_w: Option<isize>) {
    let x = Tensor::ones(&[256], F32).contiguous();
    x.realize();
    let w = Tensor::ones(&[256], F32).contiguous();
    w.realize();
    let d = devs(ctx, &[1, 2]);
    x.shard_(&refs(&d), shard_x);
    w.shard_(&refs(&d), shard_w);
    let o = &x + &w;
    assert_allclose(&values_f64(&o), &[2.0; 256], 0.0, 1e-7, "O");
}

fn simple_add(ctx: &Ctx) {
    simple_add_axis(ctx, None, None);
}

fn simple_add_x(ctx: &Ctx) {
    simple_add_axis(ctx, Some(0), None);
}

fn simple_add_w(ctx: &Ctx) {
    simple_add_axis(ctx, None, Some(0));
}

fn simple_add_xw(ctx: &Ctx) {
    simple_add_axis(ctx, Some(0), Some(0));
}

fn allreduce_shard_ring_sum(ctx: &Ctx) {
    // hypothesis samples (axis, use_ring); every combination runs here
    let d2 = devices_2(ctx);
    for axis in [Some(0), Some(1), None] {
        for ring in ["0", "2"] {
            let t = Tensor::from_slice(&[1i32, 2, 3, 4], &[4]).reshape(&[2, 2]);
            let got = with_env(&[("RING", ring)], || {
                t.shard(&refs(&d2), axis).sum(Axis::All).item::<i32>()
            });
            assert_eq!(got, 10, "axis {axis:?} RING={ring}");
        }
    }
}

/// tinygrad's `test_allreduce_cast_half`. Its `ALLREDUCE_CAST=1` (all-reduce a float sum in
/// half) and the kernel count that checks it are tinygrad's scheduler knobs, which this one has
/// not: the value is replayed, the kernel count is not.
fn allreduce_cast_half_with(ctx: &Ctx, assign: bool) {
    let devices = devs(ctx, &[0, 1]);
    let src = || {
        let t = Tensor::arange(0, 6, 1)
            .cast(DType::FLOAT16)
            .reshape(&[2, 3])
            .deep_clone();
        t.realize();
        t
    };
    let (a_src, b_src) = (src(), src());
    let a = a_src.shard(&refs(&devices), Some(0));
    a.realize();
    let b = b_src.shard(&refs(&devices), Some(0));
    b.realize();
    // assigning creates a copy of the output before allreduce
    let tst = if assign {
        let tst = Tensor::empty_like(&b);
        tst.assign(&(&a + &b));
        tst
    } else {
        &a + &b
    };
    let tst = tst.float().sum(0isize);
    with_env(&[("RING", "0"), ("ALL2ALL", "0")], || {
        tst.realize();
    });
    // (a_src.numpy() + b_src.numpy()).sum(0)
    let (an, bn) = (values_f64(&a_src), values_f64(&b_src));
    let want: Vec<f64> = (0..3)
        .map(|j| (an[j] + bn[j]) + (an[3 + j] + bn[3 + j]))
        .collect();
    assert_allclose(&values_f64(&tst), &want, 0.0, 1e-7, "tst");
}

fn allreduce_cast_half(ctx: &Ctx) {
    allreduce_cast_half_with(ctx, false);
}

fn allreduce_cast_half_assign(ctx: &Ctx) {
    allreduce_cast_half_with(ctx, true);
}

fn multiple_to_single_device(ctx: &Ctx) {
    let d4 = devices_4(ctx);
    let mut kernel_counts = Vec::new();
    for ring in ["0", "2"] {
        let t = with_env(&[("RING", ring)], || {
            let t = Tensor::arange(0, 32, 1)
                .deep_clone()
                .shard(&refs(&d4), Some(0))
                .to(ctx.device);
            kernel_counts.push(items_launched(|| {
                t.realize();
            }));
            t
        });
        assert_eq!(t.device(), ctx.device);
        assert_list(&t, &[32], &f64s(0..32), "t");
    }
    assert_eq!(kernel_counts[0], kernel_counts[1]);
}

/// tinygrad's `test_to_single_device_gather_memory`. Its `GlobalCounters.global_mem` (bytes the
/// kernels move) has no counterpart here: the kernel counts and values are replayed, the memory
/// bound is not.
fn to_single_device_gather_memory(ctx: &Ctx) {
    let (nrows, ncols) = (64usize, 1024usize);
    let want = f64s(0..(nrows * ncols) as i64);
    for devices in [devices_2(ctx), devices_4(ctx)] {
        let ndev = devices.len();
        for axis in [0isize, 1] {
            let sh = Tensor::arange(0, (nrows * ncols) as i32, 1)
                .reshape(&[nrows, ncols])
                .deep_clone()
                .shard(&refs(&devices), Some(axis));
            sh.realize();
            let mut kernels = Vec::new();
            for ring in ["0", "2"] {
                let t = sh.to(ctx.device);
                kernels.push(with_env(&[("RING", ring)], || {
                    items_launched(|| {
                        t.realize();
                    })
                }));
                assert_eq!(t.device(), ctx.device);
                assert_list(&t, &[nrows, ncols], &want, "t");
            }
            assert_eq!(kernels[0], kernels[1], "{ndev} devices, axis {axis}");
            assert!(
                kernels[0] < 2 * ndev,
                "{ndev} devices, axis {axis}: {kernels:?}"
            );
        }
    }
}

/// Row-major `a @ b` of `n x n` float32 matrices, in float64 on the host (numpy's `@`).
fn host_matmul(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
    let mut out = vec![0.0; n * n];
    for i in 0..n {
        for k in 0..n {
            let aik = a[i * n + k];
            for j in 0..n {
                out[i * n + j] += aik * b[k * n + j];
            }
        }
    }
    out
}

/// `_test_matmul_shard_axis` (`double`: `_test_double_matmul_shard_axis`) over `devices_2`.
fn matmul(ctx: &Ctx, shard_x: Option<isize>, shard_w: Option<isize>, double: bool) {
    // tinygrad's N = 128; on REF (an interpreter: 6 to 10 s a case at 128) 32
    let n = if ctx.device == "REF" { 32 } else { 128 };
    let d2 = devices_2(ctx);
    let r = refs(&d2);
    let init = || {
        let t = Tensor::kaiming_uniform(&[n, n], 0.01);
        t.realize();
        t
    };
    let x = init();
    let w1 = init();
    let xs = x.shard(&r, shard_x);
    let mut o = xs.matmul(&w1.shard(&r, shard_w));
    let mut want = host_matmul(&values_f64(&x), &values_f64(&w1), n);
    if double {
        let w2 = init();
        o = o.matmul(&w2.shard(&r, shard_w));
        want = host_matmul(&want, &values_f64(&w2), n);
    }
    let got = o.to(ctx.device);
    assert_eq!(got.shape(), vec![n, n]);
    assert_allclose(&values_f64(&got), &want, 1e-5, 1e-7, "O");
}

/// The height and width of the conv tests' images: tinygrad's 32; on REF (an interpreter: 25 to
/// 35 s a case at 32) 8.
fn image_size(ctx: &Ctx) -> usize {
    if ctx.device == "REF" { 8 } else { 32 }
}

fn conv_data_shard(ctx: &Ctx, bias: bool) {
    let d2 = devices_2(ctx);
    let conv = Conv2d::new_with(
        3,
        16,
        3,
        ConvOptions {
            bias,
            ..Default::default()
        },
    );
    let hw = image_size(ctx);
    let image = Tensor::rand(&[2, 3, hw, hw]);
    image.realize();
    // (not in tinygrad's test, which only reads the output) the single-device output
    let want = conv.forward(&image);
    want.realize();
    for p in get_parameters(&conv) {
        p.shard_(&refs(&d2), None);
    }
    let fake_image = image.shard(&refs(&d2), Some(0));
    let out = conv.forward(&fake_image);
    close(&out, &want, 1e-6, 1e-5, "out");
}

fn backprop_conv(ctx: &Ctx) {
    let d2 = devices_2(ctx);
    let _training = Tensor::train(true);
    let conv = Conv2d::new(3, 16, 3);
    for p in get_parameters(&conv) {
        p.shard_(&refs(&d2), None);
    }
    let mut opt = optim::adam(get_parameters(&conv), 0.001);
    let fake_image = Tensor::rand(&[2, 3, 32, 32]).shard(&refs(&d2), Some(0));
    let out = conv.forward(&fake_image);
    opt.zero_grad();
    out.mean(Axis::All).backward();
    opt.step();
    assert_eq!(out.to_vec::<f32>().len(), 2 * 16 * 30 * 30);
}

fn backward_sum(ctx: &Ctx) {
    let d2 = devices_2(ctx);
    let x = Tensor::from_slice(&[1.0f32, 2., 3., 4., 5., 6., 7., 8.], &[2, 4])
        .shard(&refs(&d2), Some(0));
    // tinygrad computes the gradient of every tensor not marked requires_grad=False; ours, of
    // the tensors marked requires_grad
    let w = Tensor::from_slice(&[1.0f32, 2., 3., 4.], &[4])
        .shard(&refs(&d2), None)
        .requires_grad(true);
    let out = &x * &w;
    out.mean(Axis::All).backward();
    let tst = values_f64(&w.grad().expect("w.grad"));
    assert_allclose(&tst, &[0.75, 1.0, 1.25, 1.5], 0.0, 1e-7, "w.grad");
}

/// The stored `np.random.randint(0, vocab_size, (B, T), dtype=np.int32)`.
fn stored_ints(ctx: &Ctx, key: &str) -> Tensor {
    let (shape, data) = ctx.array(key);
    let data: Vec<i32> = data.iter().map(|&v| v as i32).collect();
    Tensor::from_slice(&data, &shape)
}

/// tinygrad's `w.replace(src.shard(devices, axis)).realize()`. Our `replace` keeps the
/// tensor's device (`shard_` moves it): `w` takes `src`'s value (detached, as tinygrad's new
/// sharded tensor is a leaf of its own), then is sharded in place.
fn replace_sharded(w: &Tensor, src: &Tensor, devices: &[String], axis: Option<isize>) {
    w.replace(&src.detach());
    w.shard_(&refs(devices), axis).realize();
}

fn embedding(ctx: &Ctx) {
    let (embed_size, vocab_size) = (20, 28);
    let d2 = devices_2(ctx);
    let layer = Embedding::new(vocab_size, embed_size);
    let x = stored_ints(ctx, "x");
    let z = layer.forward(&x);

    let layer_sharded = Embedding::new(vocab_size, embed_size);
    replace_sharded(&layer_sharded.weight, &layer.weight, &d2, Some(1));
    let x_sharded = x.shard(&refs(&d2), None);
    let z_shard = layer_sharded.forward(&x_sharded);
    close(&z_shard, &z, 1e-6, 1e-6, "z");
}

fn embedding_backward(ctx: &Ctx, shard_weight_axis: Option<isize>) {
    let (embed_size, vocab_size) = (20, 28);
    let d2 = devices_2(ctx);
    let layer = Embedding::new(vocab_size, embed_size);
    // tinygrad computes the gradient of every tensor not marked requires_grad=False; ours, of
    // the tensors marked requires_grad
    layer.weight.requires_grad_();
    let x = stored_ints(ctx, "x");
    let z = layer.forward(&x);
    z.sum(Axis::All).backward();
    let grad = layer.weight.grad().expect("layer.weight.grad");
    grad.realize();

    let layer_sharded = Embedding::new(vocab_size, embed_size);
    replace_sharded(&layer_sharded.weight, &layer.weight, &d2, shard_weight_axis);
    layer_sharded.weight.requires_grad_();
    let x_sharded = x.shard(&refs(&d2), None);
    let z_shard = layer_sharded.forward(&x_sharded);
    z_shard.sum(Axis::All).backward();
    let grad_shard = layer_sharded
        .weight
        .grad()
        .expect("layer_sharded.weight.grad");
    close(&grad_shard, &grad, 1e-6, 1e-6, "grad");
}

fn rmsnorm(ctx: &Ctx) {
    let (b, t, embed_size) = (4, 10, 20);
    let d2 = devices_2(ctx);
    let norm = RMSNorm::new(embed_size);
    let x = Tensor::rand(&[b, t, embed_size]).contiguous();
    x.realize();
    let y = norm.forward(&x);

    // for norm layers, the correct way to shard weights is duplication
    let norm_sharded = RMSNorm::new(embed_size);
    norm_sharded.weight.shard_(&refs(&d2), None).realize();

    // if x is being sharded, then all-reduce is involved
    let x_sharded = x.shard(&refs(&d2), Some(2));
    x_sharded.realize();
    let y_shard = norm_sharded.forward(&x_sharded);
    y_shard.realize();
    close(&y, &y_shard, 1e-6, 1e-6, "x sharded on axis 2");

    // if x is being duplicated, then the operations remain inside each device
    let x_sharded = x.shard(&refs(&d2), None);
    x_sharded.realize();
    let y_shard = norm_sharded.forward(&x_sharded);
    y_shard.realize();
    close(&y, &y_shard, 1e-6, 1e-6, "x replicated");
}

fn sdpa_causal_shard_batch(ctx: &Ctx) {
    let d2 = devices_2(ctx);
    let shape = [4, 2, 10, 16];
    let (q, k, v) = (
        Tensor::rand(&shape),
        Tensor::rand(&shape),
        Tensor::rand(&shape),
    );
    let q_shard = q.shard(&refs(&d2), Some(0));
    let k_shard = k.shard(&refs(&d2), Some(0));
    let v_shard = v.shard(&refs(&d2), Some(0));
    for t in [&q, &k, &v, &q_shard, &k_shard, &v_shard] {
        t.realize();
    }
    let y = q.scaled_dot_product_attention(&k, &v, None, 0.0, true);
    y.realize();
    let y_shard = q_shard.scaled_dot_product_attention(&k_shard, &v_shard, None, 0.0, true);
    y_shard.realize();
    close(&y_shard, &y, 1e-6, 1e-6, "y");
}

fn symbolic_broadcast_copy(ctx: &Ctx) {
    let rows = SInt::from(Variable::new("rows", 1, 4).bind(3));
    // Tensor.ones(rows, 8): tinygrad's full, a constant reshaped and expanded
    let out = Tensor::ones(&[1, 8], F32)
        .expand_sym(&[rows.clone(), 8.into()])
        .to(&tuple(&devices_2(ctx)));
    out.realize();
    assert_eq!(out.sym_shape(), vec![rows, 8.into()]);
    let first = out.getitem(&[Idx::slice(None, Some(3), 1)]).to(ctx.device);
    assert_list(&first, &[3, 8], &[1.0; 24], "out[:3]");
}

fn symbolic_broadcast_consumed(ctx: &Ctx) {
    let rows = SInt::from(Variable::new("rows", 1, 4).bind(3));
    let out = &Tensor::ones(&[1], F32)
        .expand_sym(std::slice::from_ref(&rows))
        .to(&tuple(&devices_2(ctx)))
        + 1.0;
    out.realize();
    assert_eq!(out.sym_shape(), vec![rows]);
    let first = out.getitem(&[Idx::slice(None, Some(3), 1)]).to(ctx.device);
    assert_list(&first, &[3], &[2.0; 3], "out[:3]");
}

fn flip(ctx: &Ctx) {
    let rng = Tensor::rand(&[10, 10, 10]);
    let t0 = rng.shard(&refs(&devices_2(ctx)), Some(1));
    let out = &t0.flip(&[0]) + 1.0;
    let want = &rng.flip(&[0]) + 1.0;
    assert!(want.allclose(&out.to(rng.device()), 1e-5, 1e-8, false));
}

fn init_rand_with_multiple_devices_fail(ctx: &Ctx) {
    // init rand with multi device is not allowed
    let d2 = tuple(&devices_2(ctx));
    assert_panics("rand on several devices", &["rand"], || {
        Tensor::rand_on(&[256], F32, &d2);
    });
}

fn rand_like_on_shard(ctx: &Ctx, axis: Option<isize>) {
    let t = Tensor::empty(&[16, 16], F32).shard(&refs(&devices_2(ctx)), axis);
    let t2 = Tensor::rand_like(&t);
    assert_eq!(t.shape(), t2.shape());
    assert_eq!(t.device(), t2.device());
    assert_eq!(t.dtype(), t2.dtype());
    assert_eq!(t.shard_axis(), t2.shard_axis());
    t2.realize();
}

fn rand_like_from_alu(ctx: &Ctx) {
    let d4 = devices_4(ctx);
    let a = Tensor::ones(&[4, 4], F32).shard(&refs(&d4), Some(0));
    let aa = &a + &a;
    assert_eq!(aa.devices(), d4);
    assert_eq!(aa.shard_axis(), Some(0));
    let raa = Tensor::rand_like(&aa);
    assert_eq!(raa.devices(), d4);
    assert_eq!(raa.shard_axis(), Some(0));

    let b = Tensor::empty(&[4, 4], F32).shard(&refs(&d4), None);
    let ab = &a + &b;
    assert_eq!(ab.devices(), d4);
    assert_eq!(ab.shard_axis(), Some(0));
    let rab = Tensor::rand_like(&ab);
    assert_eq!(rab.devices(), d4);
    assert_eq!(rab.shard_axis(), Some(0));
}

fn rand_like_none_shard(ctx: &Ctx) {
    let t = Tensor::empty(&[16, 16], F32).shard(&refs(&devices_2(ctx)), None);
    let t2 = Tensor::rand_like(&t);
    assert_eq!(t.shape(), t2.shape());
    assert_eq!(t.device(), t2.device());
    assert_eq!(t.dtype(), t2.dtype());
    assert_eq!(t.shard_axis(), t2.shard_axis());
}

fn rand_like_arg_dtype(ctx: &Ctx) {
    let t = Tensor::empty(&[16, 16], DType::INT32).shard(&refs(&devices_2(ctx)), Some(1));
    // Tensor.rand_like(t, dtype=dtypes.float32): our rand_like of an int tensor draws the
    // default float, float32
    let t2 = Tensor::rand_like(&t);
    assert_eq!(t.dtype(), DType::INT32);
    assert_eq!(t2.dtype(), F32);
}

fn full_like_on_shard(ctx: &Ctx, axis: Option<isize>) {
    let t = Tensor::empty(&[16, 16], F32).shard(&refs(&devices_2(ctx)), axis);
    let t2 = Tensor::full_like(&t, 1.0f32);
    assert_eq!(t.shape(), t2.shape());
    assert_eq!(t.device(), t2.device());
    assert_eq!(t.dtype(), t2.dtype());
    assert_eq!(t.shard_axis(), t2.shard_axis());
    t2.realize();
}

/// `np.unique(output, return_counts=True)`: the values (sorted) and how often each occurs.
fn unique_counts(v: &[f32]) -> (Vec<f32>, Vec<usize>) {
    let mut s = v.to_vec();
    s.sort_by(f32::total_cmp);
    let (mut vals, mut counts) = (Vec::new(), Vec::new());
    for x in s {
        if vals.last() == Some(&x) {
            *counts.last_mut().unwrap() += 1;
        } else {
            vals.push(x);
            counts.push(1);
        }
    }
    (vals, counts)
}

fn dropout_on_shard(ctx: &Ctx) {
    let _training = Tensor::train(true);
    let x = Tensor::ones(&[256], F32).to(&tuple(&devices_2(ctx)));
    let output = x.dropout(0.5).to_vec::<f32>();
    let (unique, counts) = unique_counts(&output);
    assert_eq!(unique, vec![0.0, 2.0]);
    assert!(96 < counts[0] && counts[0] < 160, "{}", counts[0]);
}

fn dropout_on_shard_axis(ctx: &Ctx) {
    let _training = Tensor::train(true);
    let x = Tensor::ones(&[512], F32).shard(&refs(&devices_2(ctx)), Some(0));
    let output = x.dropout(0.5).to_vec::<f32>();
    let (unique, counts) = unique_counts(&output);
    assert_eq!(unique, vec![0.0, 2.0]);
    assert!(192 < counts[0] && counts[0] < 320, "{}", counts[0]);
}

fn clone(ctx: &Ctx) {
    let d2 = devices_2(ctx);
    for axis in [None, Some(0)] {
        let t = Tensor::arange(0, 16, 1)
            .reshape(&[4, 4])
            .deep_clone()
            .shard(&refs(&d2), axis)
            .contiguous();
        t.realize();
        let mut t_clone = t.deep_clone();
        t_clone.realize();
        assert_eq!(t_clone.device(), t.device());
        assert_eq!(t_clone.shard_axis(), axis.map(|a| a as usize));
        assert_eq!(t_clone.to_vec::<i32>(), t.to_vec::<i32>());
        t_clone += 1;
        assert_ne!(t_clone.to_vec::<i32>(), t.to_vec::<i32>());
    }
}

// ---------------------------------------------------------------- TestShrinkMultiTensorShardedAxis

/// `Tensor.arange(64).reshape(8, 8).clone().realize()` sharded in place on axis 0 over
/// `Device.DEFAULT:0..3`.
fn arange_8x8_sharded(ctx: &Ctx) -> Tensor {
    let t = Tensor::arange(0, 64, 1).reshape(&[8, 8]).deep_clone();
    t.realize();
    t.shard_(&refs(&devs(ctx, &[0, 1, 2, 3])), Some(0));
    t
}

fn shrink_bad_args(ctx: &Ctx) {
    let t = arange_8x8_sharded(ctx);
    // sharded axis shrink on non-device boundary is not allowed
    assert_panics("shrink across shards", &["shrink"], || {
        let a = t.shrink(&[(0, 3), (0, 8)]).contiguous();
        a.realize();
    });
    let a = t.shrink(&[(0, 2), (2, 4)]);
    assert_eq!(a.shape(), vec![2, 2]);
    let reference = Tensor::arange(0, 64, 1)
        .reshape(&[8, 8])
        .shrink(&[(0, 2), (2, 4)]);
    assert_eq!(a.to_vec::<i32>(), reference.to_vec::<i32>());

    // tinygrad schedules these (schedule_linear); here they are realized
    let a = t.shrink(&[(0, 2), (0, 8)]).contiguous();
    a.realize();
    assert_eq!(a.shape(), vec![2, 8]);

    let p = a.pad(&[(0, 6), (0, 0)], 0).contiguous();
    p.realize();
    assert_eq!(p.shape(), vec![8, 8]);
}

fn shrink_ops(ctx: &Ctx) {
    // hypothesis samples the dtype from these; tinygrad's test does not use it beyond checking
    // the device supports it (every one here does): the same test runs for each
    for _dtype in [F32, DType::INT32, DType::INT64, DType::INT16] {
        let t = arange_8x8_sharded(ctx);
        let tn = t.to_vec::<i32>();
        for i in 0..2usize {
            let a = t.shrink(&[(2 * i, 2 + 2 * i), (0, 8)]);
            let b = Tensor::from_slice(&tn[16 * i..16 * i + 16], &[2, 8]);
            assert!(a.shape() == b.shape() && b.shape() == [2, 8]);
            let w = |what: &str| format!("i={i}: {what}");
            let c = |x: Tensor, y: Tensor, what: &str| close(&x, &y, 1e-3, 1e-7, &w(what));
            close(&a, &b, 0.0, 1e-7, &w("a"));
            // cast
            close(&a.float(), &b.float(), 0.0, 1e-7, &w("float"));

            // elementwise
            c(a.exp(), b.exp(), "exp");
            c(a.reciprocal(), b.reciprocal(), "reciprocal");
            c(a.pow(-0.5), b.pow(-0.5), "pow(-0.5)");
            c(&a + &a, &b + &b, "a+a");
            assert_eq!(values_f64(&(&a + 1)), values_f64(&(&b + 1)), "{}", w("a+1"));
            assert_eq!(values_f64(&(1 + &a)), values_f64(&(1 + &b)), "{}", w("1+a"));
            c(
                a.bool().where_(&a + &a, &a),
                b.bool().where_(&b + &b, &b),
                "where",
            );
            c(a.bool().where_(1, 0), b.bool().where_(1, 0), "where(1, 0)");

            // reduce
            c(a.max(Axis::All), b.max(Axis::All), "max()");
            c(a.sum(Axis::All), b.sum(Axis::All), "sum()");
            c(a.mean(Axis::All), b.mean(Axis::All), "mean()");
            for ax in [0isize, 1] {
                c(a.max(ax), b.max(ax), &format!("max({ax})"));
                c(a.sum(ax), b.sum(ax), &format!("sum({ax})"));
                c(a.mean(ax), b.mean(ax), &format!("mean({ax})"));
            }

            // pad it back
            let back = [(2 * i, 2 * (4 - i - 1)), (0, 0)];
            c(a.pad(&back, 0), b.pad(&back, 0), "pad back");

            // other movement
            c(
                a.pad(&[(0, 0), (1, 1)], 0),
                b.pad(&[(0, 0), (1, 1)], 0),
                "pad",
            );
            c(
                a.shrink(&[(0, 2), (1, 3)]),
                b.shrink(&[(0, 2), (1, 3)]),
                "shrink",
            );
            c(a.permute(&[1, 0]), b.permute(&[1, 0]), "permute");
            c(a.reshape(&[2, 2, 4]), b.reshape(&[2, 2, 4]), "reshape");
            c(
                a.reshape(&[2, 1, 8]).expand(&[2, 5, 8]),
                b.reshape(&[2, 1, 8]).expand(&[2, 5, 8]),
                "expand",
            );
            c(a.flip(&[-1]), b.flip(&[-1]), "flip");
        }
    }
}

fn add_two_partitions(ctx: &Ctx) {
    let t = arange_8x8_sharded(ctx);
    let a = t.shrink(&[(2, 4), (0, 8)]);
    let b = t.shrink(&[(6, 8), (0, 8)]);
    let tn = values_f64(&t);
    let na = tn[16..32].to_vec();
    let nb = tn[48..64].to_vec();
    assert_list(&a, &[2, 8], &na, "a");
    assert_list(&b, &[2, 8], &nb, "b");
    let sum: Vec<f64> = na.iter().zip(&nb).map(|(x, y)| x + y).collect();
    assert_list(&(&a + &b), &[2, 8], &sum, "a+b");
    let c = &a.pad(&[(2, 4), (0, 0)], 0) + &b.pad(&[(6, 0), (0, 0)], 0);
    c.realize();
    let mut expected = vec![0.0; 16];
    expected.extend(&na);
    expected.extend([0.0; 16]);
    expected.extend(&nb);
    assert_list(&c, &[8, 8], &expected, "c");
}

fn add_different_tensors(ctx: &Ctx) {
    let devices = devs(ctx, &[0, 1, 2, 3]);
    let x = Tensor::arange(0, 64, 1).reshape(&[8, 8]).deep_clone();
    x.realize();
    let x = x.shard(&refs(&devices), Some(0));

    let to_add: Vec<Tensor> = (0..devices.len())
        .map(|i| (Tensor::ones(&[2, 8], F32) * i as f32).shard(&refs(&devices), None))
        .collect();

    // x.uop.bounds: each device's rows
    let per = 8 / devices.len();
    let added: Vec<Tensor> = to_add
        .iter()
        .enumerate()
        .map(|(i, a)| {
            &x.getitem(&[Idx::slice(
                Some((i * per) as isize),
                Some(((i + 1) * per) as isize),
                1,
            )]) + a
        })
        .collect();

    let output = Tensor::cat(&added.iter().collect::<Vec<_>>(), 0);
    // np.arange(64).reshape((8,8)) + np.array([[0,0,1,1,2,2,3,3] for _ in range(8)]).T
    let expected: Vec<f64> = (0..64).map(|k| (k + (k / 8) / 2) as f64).collect();
    assert_eq!(output.shape(), vec![8, 8]);
    assert_allclose(&values_f64(&output), &expected, 0.0, 1e-7, "output");
}

// ---------------------------------------------------------------- TestBatchNorm

/// `OneCycleLR(optim, max_lr=0.1, pct_start=0.1, div_factor=100, final_div_factor=0.1,
/// total_steps=10).step()` leaves the learning rate at `max_lr`, 0.1 (its step 1 ends the warm-up
/// of `10 * 0.1` steps); tinygrad's `extra.lr_scheduler` is not part of our crate, so the
/// optimizer gets that rate directly.
const ONE_CYCLE_LR_AFTER_STEP: f64 = 0.1;

fn unsynced_backprop_conv_bn(ctx: &Ctx) {
    let gpus = devices_2(ctx);
    let _training = Tensor::train(true);
    let convs = [Conv2d::new(3, 16, 3), Conv2d::new(3, 16, 3)];
    let bns = [BatchNorm::new(16), BatchNorm::new(16)];
    let mut params = Vec::new();
    for c in &convs {
        params.extend(get_parameters(c));
    }
    for b in &bns {
        params.extend(get_parameters(b));
    }
    for p in &params {
        p.shard_(&refs(&gpus), None);
    }
    let mut opt = optim::adam(params, ONE_CYCLE_LR_AFTER_STEP);

    let hw = image_size(ctx);
    let fake_image = Tensor::rand(&[8, 3, hw, hw]).shard(&refs(&gpus), Some(0));
    let f1 = fake_image.shrink(&[(0, 4), (0, 3), (0, hw), (0, hw)]);
    let f2 = fake_image.shrink(&[(4, 8), (0, 3), (0, hw), (0, hw)]);

    let out1 = bns[0].forward(&convs[0].forward(&f1));
    let out2 = bns[1].forward(&convs[1].forward(&f2));
    let out = Tensor::cat(&[&out1, &out2], 0);
    opt.zero_grad();
    out.mean(Axis::All).backward();
    opt.step();
    assert_eq!(out.to_vec::<f32>().len(), 8 * 16 * (hw - 2) * (hw - 2));
}

fn unsynced_backprop_standalone_bn(ctx: &Ctx) {
    let gpus = devices_2(ctx);
    let hw = image_size(ctx);
    // the test's BatchNorm: one BatchNorm2d per device, each on its slice of the batch
    let bns: Vec<BatchNorm> = gpus
        .iter()
        .map(|_| BatchNorm::new_with(16, 1e-12, true, false, 0.85))
        .collect();
    let bn = |x: &Tensor| {
        let each = x.shape()[0] / bns.len();
        let parts: Vec<Tensor> = bns
            .iter()
            .enumerate()
            .map(|(i, bn)| {
                bn.forward(&x.shrink(&[
                    (each * i, each * (i + 1)),
                    (0, 16),
                    (0, hw - 2),
                    (0, hw - 2),
                ]))
            })
            .collect();
        Tensor::cat(&parts.iter().collect::<Vec<_>>(), 0)
    };

    let _training = Tensor::train(true);
    let conv = Conv2d::new(3, 16, 3);
    let mut params = get_parameters(&conv);
    for b in &bns {
        params.extend(get_parameters(b));
    }
    for p in &params {
        p.shard_(&refs(&gpus), None);
    }
    let mut opt = optim::adam(params, ONE_CYCLE_LR_AFTER_STEP);

    let fake_image = Tensor::rand(&[8, 3, hw, hw]).shard(&refs(&gpus), Some(0));
    let out = bn(&conv.forward(&fake_image));
    opt.zero_grad();
    out.mean(Axis::All).backward();
    opt.step();
}

/// `examples/hlb_cifar10.py`'s `UnsyncedBatchNorm` (tinygrad's example, written out here): each
/// device normalizes its slice of the batch with statistics of its own, kept per device in
/// `running_mean`/`running_var` of shape `(num_devices, sz)`.
struct UnsyncedBatchNorm {
    weight: Tensor,
    bias: Tensor,
    running_mean: Tensor,
    running_var: Tensor,
    num_batches_tracked: Tensor,
    eps: f64,
    momentum: f64,
    num_devices: usize,
}

impl UnsyncedBatchNorm {
    fn new(sz: usize, num_devices: usize) -> UnsyncedBatchNorm {
        UnsyncedBatchNorm {
            weight: Tensor::ones(&[sz], F32),
            bias: Tensor::zeros(&[sz], F32),
            running_mean: Tensor::zeros(&[num_devices, sz], F32),
            running_var: Tensor::ones(&[num_devices, sz], F32),
            num_batches_tracked: Tensor::zeros(&[1], DType::INT32),
            eps: 1e-5,
            momentum: 0.1,
            num_devices,
        }
    }

    /// `get_state_dict(bn)`: name and tensor.
    fn state_dict(&self) -> Vec<(&'static str, &Tensor)> {
        vec![
            ("weight", &self.weight),
            ("bias", &self.bias),
            ("running_mean", &self.running_mean),
            ("running_var", &self.running_var),
            ("num_batches_tracked", &self.num_batches_tracked),
        ]
    }

    fn forward(&self, x: &Tensor) -> Tensor {
        let (nd, xs) = (self.num_devices, x.shape());
        let mut shape = vec![nd, xs[0] / nd];
        shape.extend(&xs[1..]);
        let xr = x.reshape(&shape).cast(F32);
        let (batch_mean, batch_invstd) = self.calc_stats(&xr);
        let c = xs[1];
        let ret = xr.batchnorm_axes(
            Some(&self.weight.reshape(&[1, c]).expand(&[nd, c])),
            Some(&self.bias.reshape(&[1, c]).expand(&[nd, c])),
            &batch_mean,
            &batch_invstd,
            &[0, 2],
        );
        ret.reshape(&xs).cast(x.dtype())
    }

    fn calc_stats(&self, x: &Tensor) -> (Tensor, Tensor) {
        let (nd, c) = (self.num_devices, x.shape()[2]);
        if Tensor::training() {
            let batch_mean = x.mean(vec![1isize, 3, 4]);
            let y = x - &batch_mean.detach().reshape(&[nd, 1, c, 1, 1]);
            let batch_var = (&y * &y).mean(vec![1isize, 3, 4]);
            let batch_invstd = (&batch_var + self.eps).pow(-0.5);
            let m = self.momentum;
            self.running_mean
                .assign(&(&self.running_mean * (1.0 - m) + batch_mean.detach().cast(F32) * m));
            let n: usize = y.shape()[1..].iter().product();
            let adjust = n as f64 / (n - y.shape()[2]) as f64;
            self.running_var.assign(
                &(&self.running_var * (1.0 - m) + batch_var.detach().cast(F32) * (m * adjust)),
            );
            let nbt = &self.num_batches_tracked;
            nbt.assign(&(nbt + 1));
            (batch_mean, batch_invstd)
        } else {
            let batch_invstd = (self
                .running_var
                .reshape(&[nd, 1, c, 1, 1])
                .expand(&x.shape())
                + self.eps)
                .rsqrt();
            (self.running_mean.clone(), batch_invstd)
        }
    }
}

fn unsynced_backprop_sync_weights(ctx: &Ctx) {
    let gpus = devices_2(ctx);
    let hw = image_size(ctx);
    let _training = Tensor::train(true);
    let conv = Conv2d::new(3, 16, 3);
    let bn = UnsyncedBatchNorm::new(16, gpus.len());

    let mut state: Vec<(&str, &Tensor)> = vec![("weight", &conv.weight)];
    state.extend(conv.bias.as_ref().map(|b| ("bias", b)));
    state.extend(bn.state_dict());
    for (k, p) in &state {
        if k.contains("running_mean") || k.contains("running_var") {
            p.shard_(&refs(&gpus), Some(0));
        } else {
            p.to_(&tuple(&gpus));
        }
    }
    // Adam(get_parameters([conv, bn])): tinygrad's optimizer trains the tensors not marked
    // is_param_(False) and realizes the others (the running statistics) with each step
    let mut params = get_parameters(&conv);
    params.extend([bn.weight.clone(), bn.bias.clone()]);
    let mut opt = optim::adam(params, ONE_CYCLE_LR_AFTER_STEP);

    let fake_image = Tensor::rand(&[8, 3, hw, hw]).shard(&refs(&gpus), Some(0));
    let out = bn.forward(&conv.forward(&fake_image));
    opt.zero_grad();
    out.mean(Axis::All).backward();
    let buffers = [&bn.running_mean, &bn.running_var, &bn.num_batches_tracked];
    opt.step_with(&buffers);
    // (not in tinygrad's test, which only runs the step) each device kept its own statistics
    assert_eq!(bn.running_mean.shard_axis(), Some(0));
    assert_eq!(bn.num_batches_tracked.to_vec::<i32>(), vec![1]);
}

fn synced_vs_unsynced_bn(ctx: &Ctx) {
    let devices = devs(ctx, &[0, 1, 2, 3]);
    let x = Tensor::ones(&[8, 8, 8, 8], F32).contiguous();
    x.realize();
    let x = x.shard(&refs(&devices), Some(0));

    let _training = Tensor::train(true);
    let synced_bn = BatchNorm::new(8);
    let unsynced_bn = UnsyncedBatchNorm::new(8, devices.len());
    for p in get_parameters(&synced_bn) {
        p.shard_(&refs(&devices), None);
    }
    for (k, p) in unsynced_bn.state_dict() {
        if k.contains("running_mean") || k.contains("running_var") {
            p.shard_(&refs(&devices), Some(0));
        } else {
            p.to_(&tuple(&devices));
        }
    }
    // list(out.schedule_linear().src): what realizing the output runs
    let synced_out = synced_bn.forward(&x);
    let synced_si = items_launched(|| {
        synced_out.realize();
    });
    let unsynced_out = unsynced_bn.forward(&x);
    let unsynced_si = items_launched(|| {
        unsynced_out.realize();
    });
    assert!(synced_si > 0);
    assert!(unsynced_si > 0);
}

fn batchnorm(ctx: &Ctx) {
    // hypothesis samples is_training; both run here
    let devices = devs(ctx, &[0, 1, 2, 3]);
    for is_training in [false, true] {
        let x = Tensor::arange(0, 4096, 1)
            .reshape(&[8, 8, 8, 8])
            .deep_clone();
        x.realize();
        let x = x.shard(&refs(&devices), Some(0));

        let _training = Tensor::train(is_training);
        let bns: Vec<BatchNorm> = devices
            .iter()
            .map(|_| {
                let bn = BatchNorm::new(8);
                for p in get_parameters(&bn) {
                    p.shard_(&refs(&devices), None);
                }
                bn
            })
            .collect();

        let per = 8 / devices.len();
        let bn_ts: Vec<Tensor> = bns
            .iter()
            .enumerate()
            .map(|(i, bn)| {
                let xi = x.getitem(&[Idx::slice(
                    Some((i * per) as isize),
                    Some(((i + 1) * per) as isize),
                    1,
                )]);
                bn.forward(&xi)
            })
            .collect();
        let out = Tensor::cat(&bn_ts.iter().collect::<Vec<_>>(), 0);
        assert_eq!(out.to_vec::<f32>().len(), 4096, "training {is_training}");
    }
}

// ---------------------------------------------------------------- TestMultiFromUnrenderable

fn from_npy(ctx: &Ctx) {
    let data: Vec<u32> = (0..100).collect();
    let t = Tensor::from_slice(&data, &[100]);
    let ll = &t.shard(&refs(&devs(ctx, &[0, 1])), Some(0)) + 1u32;
    assert_list(&ll, &[100], &f64s(1..101), "ll");
}

// ---------------------------------------------------------------- TestMultiAssign

/// `TestMultiAssign.device`: `Device.DEFAULT:0` and `:1`.
fn assign_devices(ctx: &Ctx) -> Vec<String> {
    devs(ctx, &[0, 1])
}

fn multi_assign_realized(ctx: &Ctx) {
    let d = assign_devices(ctx);
    let out = realized(
        Tensor::zeros(&[4], F32)
            .shard(&refs(&d), Some(0))
            .contiguous(),
    );
    let ones = realized(
        Tensor::ones(&[4], F32)
            .shard(&refs(&d), Some(0))
            .contiguous(),
    );
    out.assign(&ones).realize();
    assert_list(&out, &[4], &[1.0; 4], "out");
}

fn multi_assign_unrealized(ctx: &Ctx) {
    let d = assign_devices(ctx);
    let out = realized(Tensor::zeros(&[4], F32).contiguous()).shard(&refs(&d), Some(0));
    let ones = realized(
        Tensor::ones(&[4], F32)
            .shard(&refs(&d), Some(0))
            .contiguous(),
    );
    out.assign(&ones).realize();
    assert_list(&out, &[4], &[1.0; 4], "out");
}

fn multi_assign_both_unrealized(ctx: &Ctx) {
    let d = assign_devices(ctx);
    let out = realized(Tensor::zeros(&[4], F32).contiguous()).shard(&refs(&d), Some(0));
    let ones = realized(Tensor::ones(&[4], F32).contiguous()).shard(&refs(&d), Some(0));
    out.assign(&ones).realize();
    assert_list(&out, &[4], &[1.0; 4], "out");
}

fn multi_assign_scalar(ctx: &Ctx) {
    let d = assign_devices(ctx);
    let out = realized(
        Tensor::ones(&[4], F32)
            .shard(&refs(&d), Some(0))
            .contiguous(),
    );
    // out.assign(0): our assign takes a tensor; the scalar becomes a constant like `out`
    out.assign(&Tensor::full_like(&out, 0.0f32)).realize();
    assert_list(&out, &[4], &[0.0; 4], "out");
}

fn multi_assign_const_like(ctx: &Ctx) {
    let d = assign_devices(ctx);
    let out = realized(
        Tensor::ones(&[4], F32)
            .shard(&refs(&d), Some(0))
            .contiguous(),
    );
    // out.const_like(7) is full_like
    out.assign(&Tensor::full_like(&out, 7.0f32)).realize();
    assert_list(&out, &[4], &[7.0; 4], "out");
}

const PIECE: [f64; 16] = [
    0., 0., 1., 0., 0., 0., 1., 0., 0., 0., 1., 0., 0., 0., 1., 0.,
];

fn multi_assign_piece(ctx: &Ctx) {
    let d = assign_devices(ctx);
    let out = realized(
        Tensor::zeros(&[4, 4], F32)
            .shard(&refs(&d), Some(0))
            .contiguous(),
    );
    let ones = realized(
        Tensor::ones(&[4, 1], F32)
            .shard(&refs(&d), Some(0))
            .contiguous(),
    );
    out.getitem(&[Idx::all(), Idx::slice(Some(2), Some(3), 1)])
        .assign(&ones)
        .realize();
    assert_list(&out, &[4, 4], &PIECE, "out");
}

fn multi_assign_piece_noncontig(ctx: &Ctx) {
    let d = assign_devices(ctx);
    let out =
        realized(realized(Tensor::zeros(&[4, 4], F32).contiguous()).shard(&refs(&d), Some(0)));
    let ones = realized(
        Tensor::ones(&[4, 1], F32)
            .shard(&refs(&d), Some(0))
            .contiguous(),
    );
    out.getitem(&[Idx::all(), Idx::slice(Some(2), Some(3), 1)])
        .assign(&ones)
        .realize();
    assert_list(&out, &[4, 4], &PIECE, "out");
}

fn multi_assign_var_offset(ctx: &Ctx) {
    let d = assign_devices(ctx);
    let out =
        realized(realized(Tensor::zeros(&[4, 4], F32).contiguous()).shard(&refs(&d), Some(0)));
    let ones = realized(
        Tensor::ones(&[4, 1], F32)
            .shard(&refs(&d), Some(0))
            .contiguous(),
    );
    let vi = SInt::from(Variable::new("i", 0, 3).bind(2));
    out.getitem(&[
        Idx::all(),
        Idx::SymSlice {
            start: vi.clone(),
            stop: &vi + 1,
        },
    ])
    .assign(&ones)
    .realize();
    assert_list(&out, &[4, 4], &PIECE, "out");
}

// ---------------------------------------------------------------- TestMultiSetitem

/// `_t(axis)`: `Tensor.arange(16).clone().realize()` sharded over `Device.DEFAULT:0..3`.
fn setitem_t(ctx: &Ctx, axis: Option<isize>) -> Tensor {
    let t = realized(Tensor::arange(0, 16, 1).deep_clone());
    t.shard(&refs(&devs(ctx, &[0, 1, 2, 3])), axis)
}

fn with_values(pairs: &[(usize, i64)]) -> Vec<f64> {
    let mut v = f64s(0..16);
    for &(i, x) in pairs {
        v[i] = x as f64;
    }
    v
}

fn setitem_scalar_axis0(ctx: &Ctx) {
    let t = setitem_t(ctx, Some(0));
    t.setitem(&[Idx::Int(1)], 99);
    assert_list(&t, &[16], &with_values(&[(1, 99)]), "t");
}

fn setitem_scalar_axis_none(ctx: &Ctx) {
    let t = setitem_t(ctx, None);
    t.setitem(&[Idx::Int(1)], 99);
    assert_list(&t, &[16], &with_values(&[(1, 99)]), "t");
}

fn setitem_slice_cross_shard(ctx: &Ctx) {
    let t = setitem_t(ctx, Some(0));
    t.setitem(&[Idx::slice(Some(2), Some(6), 1)], 99);
    let want = with_values(&[(2, 99), (3, 99), (4, 99), (5, 99)]);
    assert_list(&t, &[16], &want, "t");
}

fn setitem_full_slice(ctx: &Ctx) {
    let t = setitem_t(ctx, Some(0));
    t.setitem(&[Idx::all()], 42);
    assert_list(&t, &[16], &[42.0; 16], "t");
}

fn setitem_stride(ctx: &Ctx) {
    let t = setitem_t(ctx, Some(0));
    t.setitem(&[Idx::slice(None, None, 4)], 0);
    let want = with_values(&[(0, 0), (4, 0), (8, 0), (12, 0)]);
    assert_list(&t, &[16], &want, "t");
}

fn setitem_single_shard(ctx: &Ctx) {
    let t = setitem_t(ctx, Some(0));
    t.setitem(&[Idx::Int(13)], 99);
    assert_list(&t, &[16], &with_values(&[(13, 99)]), "t");
}

fn setitem_tensor_value_replicated(ctx: &Ctx) {
    let t = setitem_t(ctx, Some(0));
    let v = Tensor::from_slice(&[90i32, 91, 92, 93], &[4])
        .shard(&refs(&devs(ctx, &[0, 1, 2, 3])), None);
    t.setitem(&[Idx::slice(Some(2), Some(6), 1)], &v);
    let want = with_values(&[(2, 90), (3, 91), (4, 92), (5, 93)]);
    assert_list(&t, &[16], &want, "t");
}

fn setitem_tensor_value_sharded_aligned(ctx: &Ctx) {
    let t = setitem_t(ctx, Some(0));
    let v = Tensor::from_slice(&[90i32, 91, 92, 93], &[4])
        .shard(&refs(&devs(ctx, &[0, 1, 2, 3])), Some(0));
    t.setitem(&[Idx::slice(None, None, 4)], &v);
    let want = with_values(&[(0, 90), (4, 91), (8, 92), (12, 93)]);
    assert_list(&t, &[16], &want, "t");
}

// ---------------------------------------------------------------- TestTensorOps

/// `helper_test_shard_op`: `fxn` of a `randn` input on one device and sharded over
/// `devices_2` on axis 0 agree in shape, dtype and values.
fn helper_test_shard_op(ctx: &Ctx, shps: &[&[usize]], fxn: impl Fn(&Tensor) -> Tensor) {
    let (atol, rtol) = (1e-6, 1e-3);
    for shp in shps {
        let single_in = Tensor::randn(shp);
        let multi_in = single_in.shard(&refs(&devices_2(ctx)), Some(0));
        let single_out = fxn(&single_in);
        let multi_out = fxn(&multi_in);
        assert_eq!(
            single_out.shape(),
            multi_out.shape(),
            "shape mismatch {shp:?}"
        );
        assert_eq!(
            single_out.dtype(),
            multi_out.dtype(),
            "dtype mismatch {shp:?}"
        );
        close(
            &multi_out,
            &single_out,
            atol,
            rtol,
            &format!("shape {shp:?}"),
        );
    }
}

fn interpolate(ctx: &Ctx) {
    helper_test_shard_op(ctx, &[&[4, 16, 16], &[4, 24, 24]], |x| {
        x.interpolate(&[19, 19], InterpolateMode::Linear, false)
    });
}

fn bitcast(ctx: &Ctx) {
    helper_test_shard_op(ctx, &[&[256], &[256]], |x| x.bitcast(DType::INT32));
}

#[test]
fn cpu() {
    replay::replay("unit_test_multitensor", "CPU", CASES);
}

#[test]
fn reference() {
    replay::replay("unit_test_multitensor", "REF", CASES);
}
