//! tinygrad's `test/null/test_multitensor.py` (commit a9069c17; the multi-device rules tinygrad
//! checks on its NULL device), replayed on our API: one case per test method, named
//! `Class.test_name`; the excluded methods and their reasons are in
//! `tests/golden/replay/null_test_multitensor.json`
//! (`tests/golden/replay/gen_null_test_multitensor.py`). tinygrad's `NULL:n` devices are the
//! suite's device and its other instances (`NULL:0` is `CPU`/`REF`, `NULL:1` is `CPU:1`/`REF:1`,
//! ...). tinygrad's `t.uop.axis` is `t.shard_axis()`.

mod replay;

use replay::{Case, Ctx, refs, tuple};
use tinygrad_tensor::{DType, Idx, Ops, SInt, Tensor, UOp, Variable};

const CASES: &[Case] = &[
    (
        "TestMultiScalarALU.test_multi_times_replicated_scalar",
        multi_times_replicated_scalar,
    ),
    (
        "TestMultiScalarALU.test_multi_add_replicated_scalar",
        multi_add_replicated_scalar,
    ),
    (
        "TestMultiAxis.test_reshape_shard_invalid",
        reshape_shard_invalid,
    ),
    (
        "TestMultiAxis.test_reshape_shard_valid",
        reshape_shard_valid,
    ),
    (
        "TestMultiAxis.test_uop_shard_axis_none",
        uop_shard_axis_none,
    ),
    ("TestMultiAxis.test_empty_like_sharded", empty_like_sharded),
    (
        "TestMultiAxis.test_symbolic_reshape_shard_axis",
        symbolic_reshape_shard_axis,
    ),
];

#[test]
fn cpu() {
    replay::replay("null_test_multitensor", "CPU", CASES);
}

#[test]
fn reference() {
    replay::replay("null_test_multitensor", "REF", CASES);
}

const F32: DType = DType::FLOAT32;

/// tinygrad's `NULL:n` on the suite's device: the device itself for `n = 0`, else its `n`-th
/// other instance.
fn null(ctx: &Ctx, n: usize) -> String {
    if n == 0 {
        ctx.device.to_string()
    } else {
        format!("{}:{n}", ctx.device)
    }
}

/// tinygrad's `("NULL:a", "NULL:b", ...)` for the indices `ns`.
fn nulls(ctx: &Ctx, ns: &[usize]) -> Vec<String> {
    ns.iter().map(|&n| null(ctx, n)).collect()
}

// ---- TestMultiScalarALU ----

/// tinygrad's `x = Tensor.ones(4).contiguous().shard(devices, axis=0)` and the replicated scalar
/// `s = Tensor(v).to(devices)`, on `NULL:0` and `NULL:1`.
fn sharded_and_scalar(ctx: &Ctx, v: f32) -> (Tensor, Tensor) {
    let devices = nulls(ctx, &[0, 1]);
    let x = Tensor::ones(&[4], F32)
        .contiguous()
        .shard(&refs(&devices), Some(0));
    let s = Tensor::scalar(v).to(&tuple(&devices));
    (x, s)
}

fn multi_times_replicated_scalar(ctx: &Ctx) {
    let (x, s) = sharded_and_scalar(ctx, 2.0);
    let result = &x * &s;
    assert_eq!(result.shape(), vec![4]);
    assert_eq!(result.shard_axis(), Some(0));
}

fn multi_add_replicated_scalar(ctx: &Ctx) {
    let (x, s) = sharded_and_scalar(ctx, 1.0);
    let result = &x + &s;
    assert_eq!(result.shape(), vec![4]);
    assert_eq!(result.shard_axis(), Some(0));
}

// ---- TestMultiAxis ----

fn reshape_shard_invalid(ctx: &Ctx) {
    let devices = nulls(ctx, &[0, 1]);
    let t = Tensor::ones(&[4, 3], F32).shard(&refs(&devices), Some(0));
    // tinygrad: RuntimeError "reshape cannot move items between shards" (from `.uop.axis`)
    replay::assert_panics(
        "reshape(3, 4) of a tensor sharded on axis 0",
        &["reshape"],
        || {
            let _ = t.reshape(&[3, 4]).shard_axis();
        },
    );
}

fn reshape_shard_valid(ctx: &Ctx) {
    let devices = nulls(ctx, &[0, 1]);
    let t = Tensor::ones(&[4, 8], F32).shard(&refs(&devices), Some(0));
    assert_eq!(t.reshape(&[2, 16]).shard_axis(), Some(0));
    assert_eq!(t.reshape(&[2, 2, 8]).shard_axis(), Some(0));
}

fn uop_shard_axis_none(ctx: &Ctx) {
    // tinygrad shards the realized tensor's UOp (`u.shard(devices)`); `UOp` has no `shard` here,
    // so this is the tensor's (the same MULTI graph over the same realized buffer)
    let devices = nulls(ctx, &[0, 1]);
    let u = Tensor::ones(&[8], F32).contiguous();
    u.realize();
    assert_eq!(u.shard(&refs(&devices), None).shard_axis(), None);
    assert_eq!(u.shard(&refs(&devices), Some(0)).shard_axis(), Some(0));
}

/// tinygrad's `UOp.has_buffer_identity`: a buffer, through reshapes, and here through the `Multi`
/// of per-device buffers (tinygrad's `UNSHARD` of a multi-device `BUFFER`).
fn has_buffer_identity(u: &UOp) -> bool {
    match u.op() {
        Ops::Reshape => has_buffer_identity(&u.src()[0]),
        Ops::Multi => u.src().iter().all(has_buffer_identity),
        Ops::Buffer => true,
        _ => false,
    }
}

fn empty_like_sharded(ctx: &Ctx) {
    let devices = nulls(ctx, &[0, 1]);
    let t = Tensor::ones(&[4, 8], F32).shard(&refs(&devices), Some(0));
    let e = Tensor::empty_like(&t);
    assert_eq!(e.shape(), t.shape());
    assert_eq!(e.device(), t.device());
    assert_eq!(e.shard_axis(), Some(0));
    assert!(
        has_buffer_identity(&e.uop()),
        "empty_like of a sharded tensor is not a buffer on each device: {:?}",
        e.uop().op()
    );
}

fn symbolic_reshape_shard_axis(ctx: &Ctx) {
    let rows = Variable::new("rows", 1, 4).bind(3);
    let devices = nulls(ctx, &[1, 2]);
    let x = Tensor::empty(&[4, 2], F32)
        .shard(&refs(&devices), Some(1))
        .getitem(&[Idx::SymSlice {
            start: SInt::from(0usize),
            stop: SInt::from(&rows),
        }]);
    let r = x.reshape_sym(&[SInt::from(&rows), SInt::from(1usize), SInt::from(2usize)]);
    assert_eq!(r.shard_axis(), Some(2));
}
