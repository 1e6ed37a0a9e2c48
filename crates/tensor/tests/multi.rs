//! Multi-device tensors (`shard`): each op's result against the same op on one device, the
//! sharded axis each op leaves, the all-reduce, gathering, autograd and an optimizer step through
//! sharded weights, and the errors tinygrad raises (uneven splits, ops across the sharded axis).

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use tinygrad_tensor::nn::optim::{self, Optimizer};
use tinygrad_tensor::{DType, Tensor};

const TWO: [&str; 2] = ["CPU", "CPU:1"];
const THREE: [&str; 3] = ["CPU", "CPU:1", "CPU:2"];

/// `n` deterministic float32 values in [-1, 1).
fn data(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

fn tensor(shape: &[usize], seed: u32) -> Tensor {
    Tensor::from_slice(&data(shape.iter().product(), seed), shape)
}

fn assert_close(got: &Tensor, want: &Tensor, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (got.to_vec::<f32>(), want.to_vec::<f32>());
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 + 1e-4 * b.abs(),
            "{what}: element {i}: {a} vs {b}"
        );
    }
}

/// Every device of `devices` holds the same bits of the replicated `t`.
fn assert_replicas_equal(t: &Tensor, devices: &[&str], what: &str) {
    let per_device: Vec<Vec<f32>> = devices.iter().map(|d| t.to(d).to_vec::<f32>()).collect();
    assert!(
        per_device.windows(2).all(|w| w[0] == w[1]),
        "{what}: the replicas differ: {per_device:?}"
    );
}

fn panic_text(f: impl FnOnce()) -> String {
    common::install_quiet_hook();
    let e = catch_unwind(AssertUnwindSafe(f)).expect_err("should panic");
    common::panic_message(&*e)
}

#[test]
fn shard_splits_evenly_and_gathers_back() {
    let t = tensor(&[6, 4], 1);
    for devices in [&TWO[..], &THREE[..]] {
        for axis in [Some(0isize), Some(1), Some(-1), None] {
            if axis
                .is_some_and(|a| !t.shape()[a.rem_euclid(2) as usize].is_multiple_of(devices.len()))
            {
                continue;
            }
            let s = t.shard(devices, axis);
            assert_eq!(
                s.devices(),
                devices.iter().map(|d| d.to_string()).collect::<Vec<_>>()
            );
            assert_eq!(s.shape(), vec![6, 4]);
            assert_eq!(s.shard_axis(), axis.map(|a| a.rem_euclid(2) as usize));
            assert_eq!(
                s.to_vec::<f32>(),
                t.to_vec::<f32>(),
                "{devices:?} axis {axis:?}"
            );
            // realized, it stays the same
            s.realize();
            assert_eq!(s.to_vec::<f32>(), t.to_vec::<f32>());
            assert_eq!(s.to("REF").to_vec::<f32>(), t.to_vec::<f32>());
        }
    }
}

#[test]
fn elementwise_ops_run_per_shard() {
    let (a, b) = (tensor(&[4, 6], 2), tensor(&[4, 6], 3));
    let want = a
        .lt(0.0)
        .where_(&((&a * &b + 1.0).relu() - &a.exp()).sqrt(), &b);
    for axis in [Some(0usize), Some(1), None] {
        let (sa, sb) = (
            a.shard(&TWO, axis.map(|a| a as isize)),
            b.shard(&TWO, axis.map(|a| a as isize)),
        );
        let got = sa
            .lt(0.0)
            .where_(&((&sa * &sb + 1.0).relu() - &sa.exp()).sqrt(), &sb);
        assert_eq!(got.shard_axis(), axis);
        assert_close(&got, &want, &format!("axis {axis:?}"));
    }
    // operands split along different axes, or one replicated: resharded to the first's axis
    let mixed = &a.shard(&TWO, Some(0)) + &b.shard(&TWO, Some(1));
    assert_eq!(mixed.shard_axis(), Some(0));
    assert_close(&mixed, &(&a + &b), "axes 0 and 1");
    let mixed = &a.shard(&THREE, None) * &b.shard(&THREE, Some(1));
    assert_eq!(mixed.shard_axis(), Some(1));
    assert_close(&mixed, &(&a * &b), "replicated and axis 1");
    // casts and comparisons keep the split
    let c = a.shard(&TWO, Some(1)).gt(0.0).cast(DType::INT32);
    assert_eq!(
        c.to_vec::<i32>(),
        a.gt(0.0).cast(DType::INT32).to_vec::<i32>()
    );
}

#[test]
fn reductions_over_the_sharded_axis_all_reduce() {
    let t = tensor(&[6, 4], 4);
    for devices in [&TWO[..], &THREE[..]] {
        let s = t.shard(devices, Some(0));
        let sum0 = s.sum(0isize);
        assert_eq!(sum0.shard_axis(), None, "replicated after the all-reduce");
        assert_close(&sum0, &t.sum(0isize), "sum axis 0");
        assert_close(&s.max(0isize), &t.max(0isize), "max axis 0");
        assert_close(&s.mean(0isize), &t.mean(0isize), "mean axis 0");
        assert_close(&s.sum(None::<isize>), &t.sum(None::<isize>), "sum of all");
        // over another axis: per shard, the split kept
        let sum1 = s.sum(1isize);
        assert_eq!(sum1.shard_axis(), Some(0));
        assert_close(&sum1, &t.sum(1isize), "sum axis 1");
        assert_close(
            &s.softmax(0isize),
            &t.softmax(0isize),
            "softmax over the sharded axis",
        );
        assert_close(
            &s.softmax(1isize),
            &t.softmax(1isize),
            "softmax along the shards",
        );
    }
    // every device holds the same bits after the all-reduce
    let s = t.shard(&THREE, Some(0)).sum(0isize).realize().clone();
    assert_replicas_equal(&s, &THREE, "sum over three devices");
}

/// Over more than two devices and more than 256,000 elements the all-reduce takes tinygrad's
/// ring (reduce-scatter, then all-gather: `collective.rs` checks the route and the bytes it
/// copies); its result is the one device's, and the same bits on every device.
#[test]
fn large_all_reduces_over_three_devices_take_the_ring() {
    // 262,147 elements per partial: odd, so chunks of 87,383, 87,382 and 87,382
    let t = tensor(&[3, 262_147], 20);
    let s = t.shard(&THREE, Some(0));
    for (got, want, what) in [
        (s.sum(0isize), t.sum(0isize), "sum"),
        (s.max(0isize), t.max(0isize), "max"),
        (
            (&s * 2.0).sum(0isize) + 1.0,
            (&t * 2.0).sum(0isize) + 1.0,
            "2x summed, plus 1",
        ),
    ] {
        let got = got.realize().clone();
        assert_eq!(got.shard_axis(), None, "{what}: replicated");
        assert_close(&got, &want, what);
        assert_replicas_equal(&got, &THREE, what);
    }
}

/// Across CUDA GPUs the all-reduce is NCCL's: sums, maxima and a gradient over a sharded batch
/// equal one device's, the replicas the same bits. Skipped, with the reason printed, without
/// two GPUs, or without the NCCL library (whose `Err` must then say so).
#[test]
fn nccl_all_reduces_across_cuda_gpus() {
    const GPUS: [&str; 2] = ["CUDA", "CUDA:1"];
    for d in GPUS {
        if let Err(e) = tinygrad_tensor::get_device(d) {
            println!("skipped: {e}");
            return;
        }
    }
    let t = tensor(&[4, 1000], 21);
    let s = t.shard(&GPUS, Some(0));
    let sum = s.sum(0isize);
    if let Err(e) = sum.try_realize() {
        // only a missing library skips; any other failure of NCCL is one
        let e = e.to_string();
        assert!(
            e.contains("the NCCL library was not found"),
            "the all-reduce through NCCL failed: {e}"
        );
        println!("skipped: {e}");
        return;
    }
    assert_close(&sum, &t.sum(0isize), "sum through NCCL");
    assert_close(&s.max(0isize), &t.max(0isize), "max through NCCL");
    assert_replicas_equal(&sum, &GPUS, "sum through NCCL");
    // a data-parallel gradient: the weight's gradient all-reduced over the split batch
    let w = tensor(&[1000, 3], 22);
    let w1 = w.contiguous();
    w1.requires_grad_();
    let ws = w.shard(&GPUS, None);
    ws.requires_grad_();
    let loss = |x: &Tensor, w: &Tensor| x.matmul(w).relu().sum(None::<isize>);
    loss(&t, &w1).backward();
    loss(&s, &ws).backward();
    let (g, gs) = (
        w1.grad().expect("a gradient"),
        ws.grad().expect("a gradient"),
    );
    assert_close(&gs, &g, "gradient through NCCL");
}

/// `to_` and `shard_` move an accumulated gradient along with the tensor (tinygrad's `to_`
/// does), so a later optimizer step adds tensors of one device set.
#[test]
fn moving_in_place_moves_the_gradient() {
    let w = tensor(&[4, 2], 23).contiguous();
    w.requires_grad_();
    (&w * &w).sum(None::<isize>).backward();
    let want = w.grad().expect("a gradient").to_vec::<f32>();
    let twice: Vec<f32> = data(8, 23).iter().map(|x| 2.0 * x).collect();
    assert_eq!(want, twice, "d(sum w^2)/dw = 2w");
    w.to_("CPU:1");
    let g = w.grad().expect("still a gradient");
    assert_eq!((g.device(), g.to_vec::<f32>()), ("CPU:1", want.clone()));
    w.shard_(&THREE[..2], Some(0));
    let g = w.grad().expect("still a gradient");
    assert_eq!((g.devices(), g.shard_axis()), (w.devices(), Some(0)));
    assert_eq!(g.to_vec::<f32>(), want);
    let mut opt = optim::sgd(vec![w.clone()], 0.5);
    let _train = Tensor::train(true);
    opt.step();
    let stepped: Vec<f32> = tensor(&[4, 2], 23)
        .to_vec::<f32>()
        .iter()
        .zip(&want)
        .map(|(x, g)| x - 0.5 * g)
        .collect();
    assert_close(
        &w,
        &Tensor::from_slice(&stepped, &[4, 2]),
        "SGD step after moving",
    );
}

#[test]
fn movement_ops_keep_or_move_the_axis() {
    let t = tensor(&[4, 6], 5);
    let s = t.shard(&TWO, Some(1));
    let p = s.permute(&[1, 0]);
    assert_eq!(p.shard_axis(), Some(0));
    assert_close(&p, &t.permute(&[1, 0]), "permute");
    let r = s.reshape(&[4, 2, 3]);
    assert_eq!(r.shard_axis(), Some(1));
    assert_close(
        &r,
        &t.reshape(&[4, 2, 3]),
        "reshape splitting the sharded axis",
    );
    let r = t.shard(&TWO, Some(0)).reshape(&[24]);
    assert_eq!(r.shard_axis(), Some(0));
    assert_close(&r, &t.reshape(&[24]), "reshape flattening");
    let e = s.reshape(&[1, 4, 6]).expand(&[3, 4, 6]);
    assert_eq!(e.shard_axis(), Some(2));
    assert_close(&e, &t.reshape(&[1, 4, 6]).expand(&[3, 4, 6]), "expand");
    assert_close(
        &s.pad(&[(1, 2), (0, 0)], 0.5),
        &t.pad(&[(1, 2), (0, 0)], 0.5),
        "pad",
    );
    assert_close(
        &s.shrink(&[(1, 3), (0, 6)]),
        &t.shrink(&[(1, 3), (0, 6)]),
        "shrink",
    );
    assert_close(&s.flip(&[0]), &t.flip(&[0]), "flip");
    // shrinking to exactly one shard: that shard, on every device
    let one = s.shrink(&[(0, 4), (3, 6)]);
    assert_eq!(one.shard_axis(), None);
    assert_close(&one, &t.shrink(&[(0, 4), (3, 6)]), "one shard");
    // slicing goes through the same ops
    let slice = tinygrad_tensor::Idx::Slice {
        start: Some(1),
        stop: Some(3),
        step: 1,
    };
    assert_close(
        &s.getitem(&[slice]),
        &t.shrink(&[(1, 3), (0, 6)]),
        "getitem",
    );
}

#[test]
fn matmul_with_sharded_weights() {
    let (x, w) = (tensor(&[4, 8], 6), tensor(&[8, 6], 7));
    let want = x.matmul(&w);
    // column-parallel: weights split along their outputs
    let y = x.shard(&TWO, None).matmul(&w.shard(&TWO, Some(1)));
    assert_eq!(y.shard_axis(), Some(1));
    assert_close(&y, &want, "weights split along outputs");
    // row-parallel: the contraction split, partial products all-reduced
    let y = x.shard(&TWO, Some(1)).matmul(&w.shard(&TWO, Some(0)));
    assert_eq!(y.shard_axis(), None);
    assert_close(&y, &want, "contraction split");
    // data-parallel: the batch split, weights replicated
    let y = x.shard(&TWO, Some(0)).matmul(&w.shard(&TWO, None));
    assert_eq!(y.shard_axis(), Some(0));
    assert_close(&y, &want, "batch split");
}

#[test]
fn gradients_through_sharded_tensors() {
    let (x, w) = (tensor(&[4, 8], 8), tensor(&[8, 6], 9));
    let w1 = w.contiguous();
    w1.requires_grad_();
    let loss = x.matmul(&w1).relu().square().mean(None::<isize>);
    loss.backward();
    let want = w1.grad().expect("a gradient");
    let ws = w.shard(&TWO, Some(1));
    ws.requires_grad_();
    let loss_s = x
        .shard(&TWO, Some(0))
        .matmul(&ws)
        .relu()
        .square()
        .mean(None::<isize>);
    loss_s.backward();
    assert_close(&loss_s, &loss, "loss");
    let g = ws.grad().expect("a gradient for the sharded weight");
    assert_eq!(g.devices(), ws.devices());
    assert_close(&g, &want, "gradient");
}

#[test]
fn gradients_through_a_copy_to_one_device() {
    let (x, w) = (tensor(&[4, 6], 16), tensor(&[6, 4], 17));
    let w1 = w.contiguous();
    w1.requires_grad_();
    x.matmul(&w1).exp().sum(None::<isize>).backward();
    let want = w1.grad().expect("a gradient");
    let ws = w.shard(&TWO, Some(1));
    ws.requires_grad_();
    let loss = x
        .shard(&TWO, Some(0))
        .matmul(&ws)
        .exp()
        .to("REF")
        .sum(None::<isize>);
    loss.backward();
    let g = ws.grad().expect("a gradient for the sharded weight");
    assert_close(&g, &want, "gradient copied back to two devices");
    for d in TWO {
        assert_close(&g.to(d), &want, &format!("gradient read on {d}"));
    }
}

#[test]
fn assigning_constants_keeps_the_split() {
    let s = tensor(&[4, 2], 19).shard(&TWO, Some(0));
    s.realize();
    s.assign(&Tensor::full_like(&s, 3.0));
    assert_eq!(s.shard_axis(), Some(0));
    assert_eq!(s.to_vec::<f32>(), vec![3.0; 8]);
    // a Jit refuses a function whose output is on several devices, at the first call
    let mut make =
        tinygrad_tensor::Jit::new(|_: &[Tensor]| vec![tensor(&[2], 1).shard(&TWO, None)]);
    let err = make
        .call(&[])
        .expect_err("multi-device outputs are refused");
    assert!(
        err.to_string().contains("several devices (CPU, CPU:1)"),
        "{err}"
    );
}

#[test]
fn resharding_over_another_device_count() {
    let t = tensor(&[6, 4], 18);
    let two = (t.shard(&TWO, Some(0)) * 2.0).to("CPU");
    let three = two.shard(&THREE, Some(0));
    assert_eq!(three.shard_axis(), Some(0));
    assert_close(&three, &(&t * 2.0), "2 -> 3 devices");
    let back = three.sum(0isize).to("CPU:1").shard(&TWO, Some(0));
    assert_close(&back, &(&t * 2.0).sum(0isize), "3 -> 2 devices");
}

#[test]
fn sgd_steps_on_sharded_weights_match_one_device() {
    let (x, w0) = (tensor(&[6, 4], 10), tensor(&[4, 2], 11));
    let run = |w: Tensor, x: &Tensor| -> Vec<f32> {
        w.requires_grad_();
        let mut opt = optim::sgd(vec![w.clone()], 0.1).momentum(0.9);
        let _train = Tensor::train(true);
        let mut losses = Vec::new();
        for _ in 0..3 {
            opt.zero_grad();
            let loss = x.matmul(&w).tanh().sum(None::<isize>);
            loss.backward();
            opt.step();
            losses.push(loss.item::<f32>());
        }
        losses.extend(w.to_vec::<f32>());
        losses
    };
    let want = run(w0.contiguous(), &x);
    let got = run(w0.shard(&TWO, None), &x.shard(&TWO, Some(0)));
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 + 1e-4 * b.abs(),
            "value {i}: {a} vs {b}"
        );
    }
}

#[test]
fn bad_input_names_the_shapes_axes_and_devices() {
    let t = tensor(&[5, 4], 12);
    let msg = panic_text(|| drop(t.shard(&TWO, Some(0))));
    assert!(
        msg.contains("shard: axis 0 of shape [5, 4] has size 5") && msg.contains("2 devices"),
        "{msg}"
    );
    let msg = panic_text(|| drop(tensor(&[2, 4], 1).shard(&THREE, Some(0))));
    assert!(
        msg.contains("size 2, which does not split evenly over 3 devices"),
        "{msg}"
    );
    let s = tensor(&[4, 4], 13).shard(&TWO, Some(0));
    let msg = panic_text(|| drop(s.shard(&TWO, Some(1))));
    assert!(
        msg.contains("already on several devices (CPU, CPU:1)"),
        "{msg}"
    );
    let msg = panic_text(|| drop(tensor(&[2], 1).shard(&["CPU", "NOSUCH"], None)));
    assert!(msg.contains("NOSUCH"), "{msg}");
    let msg = panic_text(|| drop(tensor(&[2], 1).shard(&TWO, Some(3))));
    assert!(
        msg.contains("shard") && msg.contains("3") && msg.contains("[2]"),
        "{msg}"
    );
    // tensors on different device tuples (a shard-count mismatch) don't combine
    let other = tensor(&[4, 4], 14)
        .shard(&THREE[..2], Some(0))
        .to("(CPU:1, CPU)");
    let msg = panic_text(|| drop(&s + &other));
    assert!(
        msg.contains("different devices")
            && msg.contains("(CPU, CPU:1)")
            && msg.contains("(CPU:1, CPU)"),
        "{msg}"
    );
    let three = tensor(&[6, 4], 14).shard(&THREE, Some(0));
    let msg = panic_text(|| drop(&tensor(&[6, 4], 1).shard(&TWO, Some(0)) + &three));
    assert!(msg.contains("different devices"), "{msg}");
    // ops across the sharded axis that tinygrad refuses
    let msg = panic_text(|| drop(s.pad(&[(1, 0), (0, 0)], 0.0).to_vec::<f32>()));
    assert!(
        msg.contains("pad of a multi-device tensor") && msg.contains("axis 0"),
        "{msg}"
    );
    let msg = panic_text(|| drop(s.flip(&[0]).to_vec::<f32>()));
    assert!(
        msg.contains("flip of a multi-device tensor: axis 0"),
        "{msg}"
    );
    let msg = panic_text(|| drop(s.shrink(&[(1, 3), (0, 4)]).to_vec::<f32>()));
    assert!(
        msg.contains("shrink of a multi-device tensor") && msg.contains("[(0, 2), (2, 4)]"),
        "{msg}"
    );
    let w = tensor(&[4], 15);
    w.requires_grad_();
    let loss = w.shard(&TWO, Some(0)).sum(None::<isize>);
    let msg = panic_text(|| {
        loss.backward();
    });
    assert!(
        msg.contains("backward through shard") && msg.contains("[4]"),
        "{msg}"
    );
    let msg = panic_text(|| {
        drop(
            tensor(&[4, 6], 1)
                .shard(&TWO, Some(1))
                .reshape(&[6, 4])
                .to_vec::<f32>(),
        )
    });
    assert!(
        msg.contains("reshape of a multi-device tensor: [4, 6] -> [6, 4] moves elements"),
        "{msg}"
    );
}
