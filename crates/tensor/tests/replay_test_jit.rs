//! tinygrad's `test/backend/test_jit.py`, replayed on our API (see `replay/mod.rs`): tinygrad's
//! `TinyJit` is our [`Jit`]; `assert_jit_cache_len(f, n)` is `f.captured_launches() == Some(n)`;
//! the inputs tinygrad draws with `Tensor.randn`/`Tensor.rand` are drawn once by
//! `tests/golden/replay/gen_test_jit.py` and stored with the expected values it computed from them
//! with numpy, as the tinygrad test computes them.
//!
//! Departures from tinygrad, each noted at its case: a jitted function returns at least one
//! tensor (`JitError::NoOutputs` otherwise), host data uploaded inside a jitted function is
//! refused (`JitError::Unreplayable`), there is no `prune=True`, no `GlobalCounters` and no
//! `free_intermediates` (a replay holds no intermediates), and tinygrad's checks of its graph
//! batching (`captured.linear.src`) become the count of captured launches.

mod replay;

use replay::{
    Case, Ctx, assert_allclose, assert_close_to, realized, stored_array as array,
    stored_floats as floats, values_f64,
};
use serde_json::Value;
use tinygrad_tensor::{
    Axis, BoundVar, DType, Jit, JitError, SInt, Tensor, Variable, canonical_device,
    thread_run_counts,
};

const CASES: &[Case] = &[
    ("TestJit.test_simple_jit", simple_jit),
    (
        "TestJit.test_hcq_core_id_runtimevar_merge",
        hcq_core_id_runtimevar_merge,
    ),
    ("TestJit.test_jit_input_view", jit_input_view),
    ("TestJit.test_global_counters_jit", global_counters_jit),
    ("TestJit.test_jit_assign", jit_assign),
    ("TestJit.test_jit_assign_int8", jit_assign_int8),
    ("TestJit.test_jit_copyin", jit_copyin),
    ("TestJit.test_jit_batch_split", jit_batch_split),
    ("TestJit.test_jitted_clone", jitted_clone),
    ("TestJit.test_jitted_transfers", jitted_transfers),
    ("TestJit.test_jit_several_devs", jit_several_devs),
    ("TestJit.test_jitted_view", jitted_view),
    ("TestCopyInsideJit.test_copy_inside_jit", copy_inside_jit),
    (
        "TestJitPrune.test_prune_w_copy_correct",
        prune_w_copy_correct,
    ),
    (
        "TestJitPrune.test_prune_w_independent_copy_correct",
        prune_w_independent_copy_correct,
    ),
    ("TestJitFree.test_free_intermediates", free_intermediates),
    ("TestJitFree.test_updated_not_freed", updated_not_freed),
    ("TestJitGraphSplit.test_jit_split_simple", jit_split_simple),
    ("TestJitGraphSplit.test_jit_cpu_simple", jit_cpu_simple),
    ("TestJitGraphSplit.test_jit_cpu_several", jit_cpu_several),
    ("TestJitGraphSplit.test_jit_multidev", jit_multidev),
    (
        "TestJitGraphSplit.test_jit_multidev_xfer",
        jit_multidev_xfer,
    ),
    (
        "TestJitGraphSplit.test_jit_multidev_copy",
        jit_multidev_copy,
    ),
];

// ---- helpers ------------------------------------------------------------------------------

/// A stored array as a float32 tensor on `device`, realized (tinygrad's `.realize()` after
/// `Tensor.randn(..)`).
fn tensor_on(v: &Value, device: &str) -> Tensor {
    let (shape, data) = array(v);
    let data: Vec<f32> = data.iter().map(|&x| x as f32).collect();
    let t = Tensor::from_slice_on(&data, &shape, device);
    t.realize();
    t
}

/// A jitted call that must succeed.
fn call<F: tinygrad_tensor::jit::JitFn>(
    jit: &mut Jit<F>,
    inputs: &[Tensor],
    what: &str,
) -> Vec<Tensor> {
    jit.call(inputs)
        .unwrap_or_else(|e| panic!("{what}: the jitted call failed: {e}"))
}

/// tinygrad's `assert_jit_cache_len(f, n)`: the capture replays `n` launches.
fn assert_jit_cache_len<F: tinygrad_tensor::jit::JitFn>(jit: &Jit<F>, n: usize) {
    assert_eq!(jit.captured_launches(), Some(n), "assert_jit_cache_len");
}

/// `f"{Device.DEFAULT}:{i}"`, as our device names it.
fn dev_index(device: &str, i: usize) -> String {
    canonical_device(&format!("{device}:{i}")).expect("a device name")
}

// ---- TestJit ------------------------------------------------------------------------------

/// `_simple_test` of tinygrad's `test/unit/test_jit.py`: 5 calls on new inputs, then the
/// capture is one kernel.
fn simple_jit(ctx: &Ctx) {
    let mut add = Jit::new(|x: &[Tensor]| vec![realized(&x[0] + &x[1])]);
    for (i, c) in ctx.value("calls").as_array().unwrap().iter().enumerate() {
        let (a, b) = (
            tensor_on(&c["a"], ctx.device),
            tensor_on(&c["b"], ctx.device),
        );
        let out = call(&mut add, &[a, b], "add");
        assert_close_to(&out[0], &c["want"], 1e-4, 1e-5, &format!("call {i}"));
    }
    assert_jit_cache_len(&add, 1);
}

/// tinygrad runs it on CPU only (`core_id` is a runtime variable of its CPU device); the
/// computation is replayed on every device (the REF run takes about a second).
fn hcq_core_id_runtimevar_merge(_: &Ctx) {
    const N: usize = 262144;
    let mut f = Jit::with_vars(|x: &[Tensor], v: &[BoundVar]| {
        let y = realized((&x[0] + 1).contiguous());
        let st = SInt::from(&v[0]);
        let z = realized(x[0].shrink_sym(&[(st.clone(), st + N)]).contiguous());
        vec![y, z]
    });
    let x = Tensor::arange(0, (2 * N) as i64, 1).deep_clone();
    let a = Variable::new("a", 0, N);
    let mut out = vec![];
    for _ in 0..3 {
        out = f
            .call_vars(std::slice::from_ref(&x), &[a.bind(0)])
            .unwrap_or_else(|e| panic!("f: {e}"));
    }
    assert_eq!(out[0].sym_shape(), vec![SInt::Const(2 * N)]);
    assert_eq!(out[1].sym_shape(), vec![SInt::Const(N)]);
}

fn jit_input_view(ctx: &Ctx) {
    let mut f = Jit::new(|x: &[Tensor]| vec![realized(x[0].shrink(&[(2, 5)]).contiguous() + 1)]);
    for (i, want) in ctx.value("want").as_array().unwrap().iter().enumerate() {
        let x = (Tensor::arange(0, 10, 1).float() + (i * 10) as f32).deep_clone();
        let out = call(&mut f, std::slice::from_ref(&x), "f");
        // tinygrad compares with `x.numpy()[2:5] + 1` (computed by the generator)
        assert_close_to(&out[0], want, 0.0, 1e-7, &format!("call {i}"));
    }
}

/// Departure: there is no `GlobalCounters` (its estimated `global_ops`/`global_mem`); what is
/// checked is the counterpart we have, that every call, replays included, counts the work it
/// launches (`thread_run_counts`).
fn global_counters_jit(ctx: &Ctx) {
    let mut f = Jit::new(|x: &[Tensor]| {
        let c = realized(&x[0] + &x[1]);
        let d = realized(&c * 2.0);
        vec![realized(&d - &x[0])]
    });
    let (a, b) = (ctx.tensor("a"), ctx.tensor("b"));
    a.realize();
    b.realize();
    for i in 0..4 {
        let before = thread_run_counts().1;
        call(&mut f, &[a.clone(), b.clone()], "f");
        let launched = thread_run_counts().1 - before;
        assert!(launched > 0, "call {i}: no work counted");
    }
}

/// Departure: tinygrad's `add` returns nothing; a jitted function here must return a tensor
/// (`JitError::NoOutputs`), so it returns the tensor it assigned.
fn jit_assign_dtype(dtype: DType) {
    let mut add = Jit::new(|x: &[Tensor]| {
        x[0].assign(&(&x[0] + 1));
        x[0].realize();
        vec![x[0].clone()]
    });
    let a = realized(Tensor::zeros(&[1], dtype).contiguous());
    for _ in 0..5 {
        call(&mut add, std::slice::from_ref(&a), "add");
    }
    assert_eq!(a.dtype(), dtype);
    assert_eq!(values_f64(&a), vec![5.0]);
}

fn jit_assign(_: &Ctx) {
    jit_assign_dtype(DType::FLOAT32);
}

fn jit_assign_int8(_: &Ctx) {
    jit_assign_dtype(DType::INT8);
}

/// Departure: a tensor made from host data inside the jitted function (`Tensor([1,2,3])`) is
/// refused at capture (`JitError::Unreplayable`: a replay cannot know the data is the same), so
/// the case checks that, then replays tinygrad's loop with the data passed as an input.
fn jit_copyin(ctx: &Ctx) {
    let calls = ctx.value("calls").as_array().unwrap();
    let mut inside =
        Jit::new(|x: &[Tensor]| vec![&x[0] + &Tensor::from_slice(&[1i32, 2, 3], &[3])]);
    let b = tensor_on(&calls[0]["b"], ctx.device);
    let first = call(&mut inside, std::slice::from_ref(&b), "f (first call)");
    assert_close_to(&first[0], &calls[0]["want"], 1e-4, 1e-5, "first call");
    match inside.call(std::slice::from_ref(&b)) {
        Err(JitError::Unreplayable(m)) => assert!(m.contains("upload"), "{m}"),
        other => panic!("capture of a host upload inside: expected Unreplayable, got {other:?}"),
    }

    let mut f = Jit::new(|x: &[Tensor]| vec![&x[0] + &x[1]]);
    let copied = realized(Tensor::from_slice(&[1i32, 2, 3], &[3]));
    for (i, c) in calls.iter().enumerate() {
        let b = tensor_on(&c["b"], ctx.device);
        let out = call(&mut f, &[b, copied.clone()], "f");
        assert_close_to(&out[0], &c["want"], 1e-4, 1e-5, &format!("call {i}"));
    }
}

/// tinygrad checks its 83 kernels are batched into 2 graphs (a graph is its own executor's
/// batching, which this JIT does not have): here, that the 83 kernels are captured.
fn jit_batch_split(ctx: &Ctx) {
    let f = |x: &[Tensor]| {
        let (mut a, b, c, d, e) = (x[0].clone(), &x[1], &x[2], &x[3], &x[4]);
        for _ in 0..80 {
            a = realized(&a + b);
        }
        let y = realized(&a * c);
        let z = realized(&y * d);
        let w = &z * e;
        vec![realized(w)]
    };
    let inputs: Vec<Tensor> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|k| ctx.tensor(k))
        .collect();
    for t in &inputs {
        t.realize();
    }
    let mut jf = Jit::new(f);
    let mut prev: Option<Vec<f64>> = None;
    for i in 0..5 {
        let o = values_f64(&call(&mut jf, &inputs, "jf")[0]);
        if let Some(p) = &prev {
            assert_allclose(&o, p, 1e-4, 1e-5, &format!("call {i}"));
        }
        prev = Some(o);
    }
    assert_jit_cache_len(&jf, 83);
}

/// tinygrad's `a.clone().realize()` is `deep_clone()` (Rust's `Clone` shares the tensor).
fn jitted_clone(ctx: &Ctx) {
    let mut jf = Jit::new(|x: &[Tensor]| vec![x[0].deep_clone()]);
    for (i, a) in ctx.value("a").as_array().unwrap().iter().enumerate() {
        let t = tensor_on(a, ctx.device);
        let ja = call(&mut jf, std::slice::from_ref(&t), "jf");
        assert_close_to(&ja[0], a, 1e-4, 1e-5, &format!("call {i}"));
    }
}

fn jitted_transfers(ctx: &Ctx) {
    let (d0, d1) = (dev_index(ctx.device, 0), dev_index(ctx.device, 1));
    let mut jf = Jit::new(|x: &[Tensor]| vec![realized(x[0].to(&d1)), realized(x[1].to(&d1))]);
    for (i, c) in ctx.value("calls").as_array().unwrap().iter().enumerate() {
        let (a, b) = (tensor_on(&c["a"], &d0), tensor_on(&c["b"], &d0));
        let out = call(&mut jf, &[a, b], "jf");
        assert_eq!(out[0].device(), d1);
        assert_close_to(&out[0], &c["a"], 1e-4, 1e-5, &format!("call {i}: xc"));
        assert_close_to(&out[1], &c["b"], 1e-4, 1e-5, &format!("call {i}: yc"));
    }
}

fn jit_several_devs(ctx: &Ctx) {
    let (d0, d1) = (dev_index(ctx.device, 0), "CPU");
    let mut jf = Jit::new(|x: &[Tensor]| {
        let x0 = realized(x[0].to(&d0));
        let y = realized(x[1].to(&d0));
        vec![&x0 + &y, &x0 * &y]
    });
    for (i, c) in ctx.value("calls").as_array().unwrap().iter().enumerate() {
        let (a, b) = (tensor_on(&c["a"], d1), tensor_on(&c["b"], d1));
        let out = call(&mut jf, &[a, b], "jf");
        assert_close_to(&out[0], &c["sum"], 1e-4, 1e-5, &format!("call {i}: zc"));
        assert_close_to(&out[1], &c["prod"], 1e-4, 1e-5, &format!("call {i}: wc"));
    }
}

fn jitted_view(ctx: &Ctx) {
    let (d0, d1) = (dev_index(ctx.device, 0), dev_index(ctx.device, 1));
    let mut jf = Jit::new(|x: &[Tensor]| {
        let x1 = x[0].sum(1);
        let x = (x1 + 5.0).bitcast(DType::INT32);
        vec![realized(x.to(&d1))]
    });
    for (i, c) in ctx.value("calls").as_array().unwrap().iter().enumerate() {
        let a = tensor_on(&c["a"], &d0);
        let xc = call(&mut jf, std::slice::from_ref(&a), "jf");
        assert_eq!(xc[0].dtype(), DType::INT32);
        assert_close_to(&xc[0], &c["want"], 1e-4, 5e-5, &format!("call {i}"));
    }
}

// ---- TestCopyInsideJit --------------------------------------------------------------------

fn copy_inside_jit(ctx: &Ctx) {
    let dev = ctx.device;
    let mut add = Jit::new(|x: &[Tensor]| vec![&x[0].to(dev) + &x[1]]);
    for (i, c) in ctx.value("calls").as_array().unwrap().iter().enumerate() {
        let a = tensor_on(&c["a"], "CPU");
        let b = tensor_on(&c["b"], dev);
        let out = call(&mut add, &[a, b], "add");
        // [x+y for x,y in zip(a.flatten().tolist(), b.flatten().tolist())], default tolerance
        let got = values_f64(&out[0].flatten(0, -1));
        assert_allclose(&got, &floats(&c["want"]), 0.0, 1e-7, &format!("call {i}"));
    }
}

// ---- TestJitPrune -------------------------------------------------------------------------

/// Departure (both prune cases): `TinyJit(w2, prune=True)` has no counterpart (a replay here
/// recomputes what does not depend on the inputs), so its loop runs on a second plain `Jit`.
fn prune_loops(ctx: &Ctx, w2: &dyn Fn(&Tensor) -> Tensor, input_device: &str) {
    let calls = ctx.value("calls").as_array().unwrap();
    let make = || Jit::new(|x: &[Tensor]| vec![w2(&x[0])]);
    let (mut w2_noprune, mut w2_prune) = (make(), make());
    for (i, c) in calls.iter().enumerate() {
        let a = tensor_on(&c["a"], input_device);
        let jit = if i < 3 {
            &mut w2_noprune
        } else {
            &mut w2_prune
        };
        let out = call(jit, std::slice::from_ref(&a), "w2");
        // [x*2+y for x,y in zip(weights.tolist(), a.tolist())], default tolerance
        assert_allclose(
            &values_f64(&out[0]),
            &floats(&c["want"]),
            0.0,
            1e-7,
            &format!("call {i}"),
        );
    }
}

fn prune_w_copy_correct(ctx: &Ctx) {
    let dev = ctx.device;
    let weights = tensor_on(ctx.value("weights"), dev);
    prune_loops(ctx, &|x| (&weights * 2.0).contiguous() + x.to(dev), "CPU");
}

/// Departure: tinygrad's `assert_jit_cache_len(w2_prune, 1)` checks what pruning leaves; with no
/// pruning here it is not replayed.
fn prune_w_independent_copy_correct(ctx: &Ctx) {
    let dev = ctx.device;
    let weights = tensor_on(ctx.value("weights"), "CPU");
    prune_loops(ctx, &|x| (&weights * 2.0).contiguous().to(dev) + x, dev);
}

// ---- TestJitFree --------------------------------------------------------------------------

/// Departure: `captured.free_intermediates()` and `GlobalCounters.mem_used` have no counterpart
/// (a replay here writes fresh buffers and holds no intermediates between calls: there is
/// nothing to free); the values before and after, and the calls after, are replayed.
fn free_intermediates(_: &Ctx) {
    let ext_tensor = Tensor::from_slice(&[1i32, 24, 23, 45, 1], &[5]);
    let mut fxn = Jit::new(|x: &[Tensor]| {
        let t1 = realized((&x[0] * 2).contiguous());
        let t2 = realized((&t1 + &ext_tensor).contiguous());
        vec![realized(t2.sum(Axis::All).contiguous())]
    });
    for i in 0..5 {
        let inp = Tensor::from_slice(&[i, 1, 2, 3, 4], &[5]);
        let out = call(&mut fxn, &[inp], "fxn");
        assert_eq!(out[0].item::<i32>(), 114 + 2 * i, "call {i}");
    }
    for _ in 0..2 {
        let out = call(
            &mut fxn,
            &[Tensor::from_slice(&[11i32, 1, 2, 3, 4], &[5])],
            "fxn",
        );
        assert_eq!(out[0].item::<i32>(), 136);
    }
}

/// Departure: `free_intermediates()` / `mem_used` as above; the values are replayed.
fn updated_not_freed(_: &Ctx) {
    let x = realized(Tensor::from_slice(&[1i32], &[1]));
    let mut fxn = Jit::new(|y: &[Tensor]| {
        x.assign(&(&x + &y[0]));
        vec![x.clone()]
    });
    for _ in 0..5 {
        call(&mut fxn, &[Tensor::from_slice(&[1i32], &[1])], "fxn");
    }
    assert_eq!(x.item::<i32>(), 6);
    call(&mut fxn, &[Tensor::from_slice(&[2i32], &[1])], "fxn");
    assert_eq!(x.item::<i32>(), 8);
}

// ---- TestJitGraphSplit --------------------------------------------------------------------

fn compute(device: &str, inp: &Tensor) -> Tensor {
    let device = canonical_device(device).unwrap();
    assert_eq!(
        inp.device(),
        device,
        "Input device {} does not match expected {device}",
        inp.device()
    );
    realized((inp + 1.0).contiguous())
}

fn copy(device: &str, to_device: &str, inp: &Tensor) -> Tensor {
    let device = canonical_device(device).unwrap();
    assert_eq!(
        inp.device(),
        device,
        "Input device {} does not match expected {device}",
        inp.device()
    );
    realized(inp.to(to_device))
}

/// tinygrad's `expect`: 5 calls on the same inputs agree with the first; then tinygrad checks
/// how its executor batched the captured calls into graphs (its graph runners: not here); what
/// is checked instead is the number of captured launches, the operations its graphs hold.
fn expect<F: tinygrad_tensor::jit::JitFn>(f: &mut Jit<F>, args: &[Tensor], launches: usize) {
    let expected: Vec<Vec<f64>> = call(f, args, "f").iter().map(values_f64).collect();
    for i in 0..4 {
        let res: Vec<Vec<f64>> = call(f, args, "f").iter().map(values_f64).collect();
        assert_eq!(res.len(), expected.len());
        for (r, e) in res.iter().zip(&expected) {
            assert_allclose(r, e, 1e-4, 1e-5, &format!("call {}", i + 1));
        }
    }
    assert_jit_cache_len(f, launches);
}

fn jit_split_simple(ctx: &Ctx) {
    let dev = ctx.device;
    let mut f = Jit::new(|x: &[Tensor]| {
        let op0 = compute(dev, &x[0]);
        let op1 = compute(dev, &op0);
        vec![compute(dev, &op1)]
    });
    let inp = tensor_on(ctx.value("inp"), dev);
    expect(&mut f, &[inp], 3); // graph=[ji_graph(3)]
}

/// tinygrad skips it when the default device is CPU (its graph expectations assume another
/// device); the computation and the launch count hold on CPU too, so it runs on both here.
fn jit_cpu_simple(ctx: &Ctx) {
    let dev = ctx.device;
    let mut f = Jit::new(|x: &[Tensor]| {
        let op0 = compute(dev, &x[0]);
        let op1 = compute(dev, &op0);
        let op2 = compute("CPU", &x[1]);
        let op3 = compute(dev, &op1);
        vec![op2, op3]
    });
    let inp = tensor_on(ctx.value("inp"), dev);
    let inp_cpu = tensor_on(ctx.value("inp_d1"), "CPU");
    expect(&mut f, &[inp, inp_cpu], 4); // [ji_graph(2), ji_comp(), ji_comp()]
}

/// Skipped by tinygrad on a CPU default device; run on both here (see `jit_cpu_simple`).
fn jit_cpu_several(ctx: &Ctx) {
    let dev = ctx.device;
    let mut f = Jit::new(|x: &[Tensor]| {
        let op0 = compute(dev, &x[0]);
        let op1 = compute(dev, &op0);
        let op2 = compute("CPU", &x[1]);
        let op3 = compute("CPU", &op2);
        let op4 = compute(dev, &op1);
        vec![op3, op4]
    });
    let inp = tensor_on(ctx.value("inp"), dev);
    let inp_cpu = tensor_on(ctx.value("inp_d1"), "CPU");
    expect(&mut f, &[inp, inp_cpu], 5); // [ji_graph(2), ji_comp(), ji_comp(), ji_comp()]
}

/// Skipped by tinygrad on a CPU default device; run on both here (see `jit_cpu_simple`), with
/// `CPU:1` / `REF:1` as the second device.
fn jit_multidev(ctx: &Ctx) {
    let dev = ctx.device;
    let d1 = dev_index(dev, 1);
    let mut f = Jit::new(|x: &[Tensor]| {
        let op0 = compute(dev, &x[0]);
        let op1 = compute(dev, &op0);
        let op2 = compute(&d1, &x[1]);
        let op3 = compute(&d1, &op2);
        let op4 = compute(dev, &op1);
        vec![op3, op4]
    });
    let inp = tensor_on(ctx.value("inp"), dev);
    let inp_d1 = tensor_on(ctx.value("inp_d1"), &d1);
    expect(&mut f, &[inp, inp_d1], 5); // [ji_graph(2), ji_graph(2), ji_comp()] / [ji_graph(5)]
}

/// Skipped by tinygrad on a CPU default device (its copies are zero-copies there); run on both
/// here: a copy between `CPU:1` and `CPU` is a captured launch as on REF.
fn jit_multidev_xfer(ctx: &Ctx) {
    let dev = ctx.device;
    let d1 = dev_index(dev, 1);
    let mut f = Jit::new(|x: &[Tensor]| {
        let op0 = compute(dev, &x[0]);
        let op1 = compute(dev, &op0);
        let op2 = compute(&d1, &x[1]);
        let op3 = copy(&d1, dev, &op2);
        let op4 = compute(&d1, &op2);
        let op5 = compute(dev, &op3);
        vec![op1, op4, op5]
    });
    let inp = tensor_on(ctx.value("inp"), dev);
    let inp_d1 = tensor_on(ctx.value("inp_d1"), &d1);
    // [ji_graph(2), ji_comp(), ji_xfer(), ji_comp(), ji_comp()] / [ji_graph(6)]
    expect(&mut f, &[inp, inp_d1], 6);
}

/// tinygrad skips it unconditionally (it needs AMD's SDMA copy engine); replayed here. As tinygrad
/// does (`CPU/LLVM is not a valid default device for this test (zero-copies)`), it returns early on
/// a CPU default device, where the copy to CPU is no copy.
fn jit_multidev_copy(ctx: &Ctx) {
    let dev = ctx.device;
    if dev == "CPU" {
        return;
    }
    let mut f = Jit::new(|x: &[Tensor]| {
        let op0 = compute(dev, &x[0]);
        let op1 = compute(dev, &op0);
        let op2 = copy(dev, "CPU", &op1);
        vec![compute("CPU", &op2)]
    });
    let inp = tensor_on(ctx.value("inp"), dev);
    expect(&mut f, &[inp], 4); // [ji_graph(2), ji_copy(), ji_comp()]
}

#[test]
fn cpu() {
    replay::replay("test_jit", "CPU", CASES);
}

#[test]
fn reference() {
    replay::replay("test_jit", "REF", CASES);
}

#[test]
fn webgpu() {
    replay::on_webgpu("test_jit on WEBGPU", |dev| {
        replay::replay("test_jit", dev, CASES)
    });
}
