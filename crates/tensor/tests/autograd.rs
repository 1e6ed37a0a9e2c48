//! Autograd: gradients of every Tensor op against reference gradients computed independently
//! (numpy float64, finite differences or tinygrad's tie conventions) by
//! `tests/golden/gen_grads.py` into `tests/golden/grads.json`, on CPU and REF; plus the semantics
//! of `backward`/`gradient`/`detach`/no-grad/training, and fusion of forward and backward.
//!
//! Debugging: `GRADS_FILTER=substr[,substr...]` runs only the matching cases.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::Value;
use tinygrad_tensor::{Axis, DType, Dims, Tensor};
use tinygrad_uop::Ops;

/// tinygrad's tolerances for gradients.
const ATOL: f64 = 1e-4;
const RTOL: f64 = 1e-3;

fn f(v: &Value) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("expected a number, got {v}"))
}

fn i(v: &Value) -> isize {
    v.as_i64()
        .unwrap_or_else(|| panic!("expected an integer, got {v}")) as isize
}

fn list<T>(v: &Value, each: impl Fn(&Value) -> T) -> Vec<T> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected a list, got {v}"))
        .iter()
        .map(each)
        .collect()
}

fn shape(t: &Value) -> Vec<usize> {
    list(&t["shape"], |d| i(d) as usize)
}

fn data(t: &Value) -> Vec<f64> {
    list(&t["data"], f)
}

fn pairs(v: &Value) -> Vec<(usize, usize)> {
    list(v, |p| (i(&p[0]) as usize, i(&p[1]) as usize))
}

thread_local! {
    /// For the sharded variants: inputs split along their first axis over the devices where it
    /// divides evenly (else replicated).
    static SHARD_INPUTS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn tensor(t: &Value, device: &str) -> Tensor {
    let v: Vec<f32> = data(t).iter().map(|&x| x as f32).collect();
    let sh = shape(t);
    let devices = Tensor::scalar(0.0f32).to(device).devices();
    if SHARD_INPUTS.get()
        && sh
            .first()
            .is_some_and(|&d| d > 0 && d.is_multiple_of(devices.len()))
    {
        let refs: Vec<&str> = devices.iter().map(String::as_str).collect();
        return Tensor::from_slice_on(&v, &sh, &devices[0]).shard(&refs, Some(0));
    }
    Tensor::from_slice_on(&v, &sh, device)
}

fn axis(v: &Value) -> Axis {
    match v {
        Value::Null => Axis::All,
        Value::Array(_) => Axis::Some(list(v, i)),
        _ => Axis::from(i(v)),
    }
}

/// Applies a case's op to its inputs.
fn run_op(case: &Value, xs: &[Tensor], device: &str) -> Tensor {
    let a = &case["args"];
    let op = case["op"].as_str().expect("op name");
    let x = &xs[0];
    let keep = || a["keepdim"].as_bool().expect("keepdim");
    let ax = || axis(&a["axis"]);
    let corr = || i(&a["correction"]) as usize;
    let refs: Vec<&Tensor> = xs.iter().collect();
    match op {
        "neg" => x.neg(),
        "reciprocal" => x.reciprocal(),
        "sqrt" => x.sqrt(),
        "rsqrt" => x.rsqrt(),
        "exp" => x.exp(),
        "exp2" => x.exp2(),
        "log" => x.log(),
        "log2" => x.log2(),
        "sin" => x.sin(),
        "cos" => x.cos(),
        "tan" => x.tan(),
        "relu" => x.relu(),
        "sigmoid" => x.sigmoid(),
        "tanh" => x.tanh(),
        "abs" => x.abs(),
        "trunc" => x.trunc(),
        "floor" => x.floor(),
        "ceil" => x.ceil(),
        "round" => x.round(),
        "sign" => x.sign(),
        "log10" => x.log10(),
        "asin" => x.asin(),
        "acos" => x.acos(),
        "atan" => x.atan(),
        "square" => x.square(),
        "fmod" => x.fmod(&xs[1]),
        "copysign" => x.copysign(&xs[1]),
        "logaddexp" => x.logaddexp(&xs[1]),
        "einsum" => Tensor::einsum(a["formula"].as_str().expect("formula"), &refs),
        "add" => x.add(&xs[1]),
        "sub" => x.sub(&xs[1]),
        "mul" => x.mul(&xs[1]),
        "div" => x.div(&xs[1]),
        "pow" => x.pow(&xs[1]),
        "maximum" => x.maximum(&xs[1]),
        "minimum" => x.minimum(&xs[1]),
        "scalar" => {
            let v = f(&a["value"]);
            match a["fn"].as_str().expect("fn") {
                "add" => x + v,
                "sub" => x - v,
                "mul" => x * v,
                "div" => x / v,
                "pow" => x.pow(v),
                "rsub" => v - x,
                "rdiv" => v / x,
                "maximum" => x.maximum(v),
                "minimum" => x.minimum(v),
                other => panic!("unknown scalar fn {other}"),
            }
        }
        "where" => {
            let c = &a["cond"];
            let bools: Vec<bool> = list(&c["data"], |b| b.as_bool().expect("bool"));
            Tensor::from_slice_on(&bools, &shape(c), device).where_(x, &xs[1])
        }
        "clip" => x.clip(a["min"].as_f64(), a["max"].as_f64()),
        "reshape" => x.reshape(&list(&a["shape"], i)),
        "permute" => x.permute(&list(&a["order"], i)),
        "expand" => x.expand(&list(&a["shape"], i)),
        "pad" => x.pad(&pairs(&a["pad"]), f(&a["value"])),
        "shrink" => x.shrink(&pairs(&a["bounds"])),
        "flip" => x.flip(&list(&a["axis"], i)),
        "transpose" => x.transpose(i(&a["dim0"]), i(&a["dim1"])),
        "flatten" => x.flatten(i(&a["start_dim"]), i(&a["end_dim"])),
        "squeeze" => x.squeeze(Some(i(&a["dim"]))),
        "unsqueeze" => x.unsqueeze(i(&a["dim"])),
        "cat" => Tensor::cat(&refs, i(&a["dim"])),
        "stack" => Tensor::stack(&refs, i(&a["dim"])),
        "slice" => {
            let r = list(&a["ranges"], |r| (i(&r[0]), i(&r[1]), i(&r[2]) as usize));
            x.slice(&r)
        }
        "sum" if keep() => x.sum_keepdim(ax()),
        "sum" => x.sum(ax()),
        "mean" if keep() => x.mean_keepdim(ax()),
        "mean" => x.mean(ax()),
        "prod" if keep() => x.prod_keepdim(ax()),
        "prod" => x.prod(ax()),
        "max" if keep() => x.max_keepdim(ax()),
        "max" => x.max(ax()),
        "min" if keep() => x.min_keepdim(ax()),
        "min" => x.min(ax()),
        "var" if keep() => x.var_keepdim(ax(), corr()),
        "var" => x.var(ax(), corr()),
        "std" if keep() => x.std_keepdim(ax(), corr()),
        "std" => x.std(ax(), corr()),
        "logsumexp" if keep() => x.logsumexp_keepdim(ax()),
        "logsumexp" => x.logsumexp(ax()),
        "softmax" => x.softmax(i(&a["axis"])),
        "log_softmax" => x.log_softmax(i(&a["axis"])),
        "cumsum" => x.cumsum(i(&a["axis"])),
        "conv2d" => x.conv2d(
            &xs[1],
            xs.get(2),
            i(&a["groups"]) as usize,
            common::dims(&a["stride"]),
            common::dims(&a["dilation"]),
            common::padding(&a["padding"]),
        ),
        "conv_transpose2d" => x.conv_transpose2d(
            &xs[1],
            xs.get(2),
            i(&a["groups"]) as usize,
            common::dims(&a["stride"]),
            common::dims(&a["dilation"]),
            common::padding(&a["padding"]),
            common::dims(&a["output_padding"]),
        ),
        "matmul" => x.matmul(&xs[1]),
        "linear" => x.linear(&xs[1], xs.get(2)),
        "shared" => x * &x.sin() + &x.exp() * x - x,
        "reduce_broadcast" => x - &x.max_keepdim(1isize) + &x.sum_keepdim(1isize) * x,
        "mlp" => x
            .matmul(&xs[1])
            .add(&xs[2])
            .relu()
            .matmul(&xs[3])
            .log_softmax(-1),
        other => panic!("unknown op {other}"),
    }
}

fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= ATOL + RTOL * want.abs()
}

fn compare(what: &str, got: &[f64], want: &[f64]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!(
            "{what}: {} values, expected {}",
            got.len(),
            want.len()
        ));
    }
    let bad: Vec<String> = got
        .iter()
        .zip(want)
        .enumerate()
        .filter(|(_, (g, w))| !close(**g, **w))
        .take(4)
        .map(|(k, (g, w))| format!("[{k}] got {g}, want {w}"))
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!("{what}: {}", bad.join("; ")))
    }
}

/// Runs one case on `device`: builds the loss, backpropagates, compares loss and gradients.
fn run_case(case: &Value, device: &str) -> Result<(), String> {
    let inputs = case["inputs"].as_array().expect("inputs");
    let xs: Vec<Tensor> = inputs
        .iter()
        .map(|t| tensor(t, device).requires_grad(true))
        .collect();
    let out = run_op(case, &xs, device);
    let w = tensor(&case["w"], device);
    let loss = (&out * &w).sum(None);
    loss.backward();
    let grads: Vec<Tensor> = xs
        .iter()
        .enumerate()
        .map(|(k, x)| x.grad().unwrap_or_else(|| panic!("input {k} has no grad")))
        .collect();
    let mut all: Vec<&Tensor> = vec![&loss];
    all.extend(grads.iter());
    Tensor::try_realize_all(&all).map_err(|e| format!("realize: {e}"))?;
    compare("loss", &loss.to_f64_vec(), &[f(&case["loss"])])?;
    for (k, (g, want)) in grads
        .iter()
        .zip(case["grads"].as_array().expect("grads"))
        .enumerate()
    {
        if g.shape() != shape(want) {
            return Err(format!(
                "grad {k}: shape {:?}, expected {:?}",
                g.shape(),
                shape(want)
            ));
        }
        if g.device() != device {
            return Err(format!("grad {k}: on {}, expected {device}", g.device()));
        }
        compare(&format!("grad {k}"), &g.to_f64_vec(), &data(want))?;
    }
    Ok(())
}

fn run_suite(device: &str) {
    run_suite_counting(device, |_| false);
}

/// The suite on `device`; a case whose panic `refused` accepts is counted as refused.
fn run_suite_counting(device: &str, refused: impl Fn(&str) -> bool) {
    common::install_quiet_hook();
    let filter: Vec<String> = std::env::var("GRADS_FILTER")
        .map(|f| f.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let cases = common::load_cases("grads.json");
    let mut failures = Vec::new();
    let mut refusals = 0;
    let mut ran = 0;
    for case in &cases {
        let name = case["name"].as_str().expect("name");
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        ran += 1;
        common::set_in_case(true);
        let r = catch_unwind(AssertUnwindSafe(|| run_case(case, device)));
        common::set_in_case(false);
        let r = r.unwrap_or_else(|e| Err(format!("panicked: {}", common::panic_message(&*e))));
        match r {
            Err(msg) if refused(&msg) => refusals += 1,
            Err(msg) => failures.push(format!("  {name}: {msg}")),
            Ok(()) => {}
        }
    }
    let refused_note = if refusals > 0 {
        format!(", {refusals} refused")
    } else {
        String::new()
    };
    eprintln!(
        "grads [{device}]: {} passed, {} failed{refused_note} (of {ran})",
        ran - failures.len() - refusals,
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "grads [{device}]: {} of {ran} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn grads_cpu() {
    run_suite("CPU");
}

/// Every case with its inputs (the parameters) on two CPU devices, replicated.
#[test]
fn grads_multi_replicated() {
    run_suite("(CPU, CPU:1)");
}

/// Every case with its inputs split along the first axis over two, then three devices (where it
/// divides evenly): the gradients come back split the same way. Cases whose op (or its
/// gradient) works across the sharded axis in a way tinygrad refuses are counted as refused.
#[test]
fn grads_multi_sharded() {
    SHARD_INPUTS.set(true);
    common::expect_refusals("(CPU, CPU:1)", 6, "GRADS_FILTER", |rule| {
        run_suite_counting("(CPU, CPU:1)", rule)
    });
    common::expect_refusals("(CPU, REF, CPU:2)", 6, "GRADS_FILTER", |rule| {
        run_suite_counting("(CPU, REF, CPU:2)", rule)
    });
}

/// The sharded variant on two WEBGPU devices (skipped, saying why, without an adapter).
#[test]
fn grads_multi_webgpu() {
    common::on_webgpu("grads_multi_webgpu", |d| {
        SHARD_INPUTS.set(true);
        let devices = format!("({d}, {d}:1)");
        common::expect_refusals(&devices, 6, "GRADS_FILTER", |rule| {
            run_suite_counting(&devices, rule)
        });
    });
}

#[test]
fn grads_ref() {
    run_suite("REF");
}

/// The gradients on `WEBGPU` (in CI the software Vulkan driver). Without an adapter it is
/// skipped, saying why — unless `TINYGRAD_REQUIRE_WEBGPU=1` (CI) makes that a failure.
#[test]
fn grads_webgpu() {
    common::on_webgpu("grads_webgpu", run_suite);
}

// ---- semantics ----

fn t(data: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(data, shape)
}

fn param(data: &[f32], shape: &[usize]) -> Tensor {
    t(data, shape).requires_grad(true)
}

fn assert_close(got: &Tensor, want: &[f64]) {
    let g = got.to_f64_vec();
    assert_eq!(g.len(), want.len(), "got {g:?}, want {want:?}");
    for (a, b) in g.iter().zip(want) {
        assert!(close(*a, *b), "got {g:?}, want {want:?}");
    }
}

#[test]
fn backward_twice_accumulates() {
    let x = param(&[1.0, -2.0, 3.0], &[3]);
    (&x * &x).sum(None).backward();
    let first = x.grad().expect("grad after backward");
    assert_close(&first, &[2.0, -4.0, 6.0]);
    (&x * 3.0).sum(None).backward();
    // like tinygrad's assign: a handle taken before the second call sees the sum
    assert_close(&first, &[5.0, -1.0, 9.0]);
    assert_close(&x.grad().expect("grad"), &[5.0, -1.0, 9.0]);
    x.set_grad(None);
    assert!(x.grad().is_none());
}

#[test]
fn shared_subgraph_gradients_are_summed() {
    let x = param(&[0.5, -1.0], &[2]);
    let y = x.exp();
    let z = (&y * &y + &y).sum(None);
    let [g] = z.gradient(&[&x]).try_into().expect("one gradient");
    let want: Vec<f64> = [0.5f64, -1.0]
        .iter()
        .map(|v| 2.0 * (2.0 * v).exp() + v.exp())
        .collect();
    assert_close(&g, &want);
}

#[test]
fn detach_blocks_gradient() {
    let x = param(&[1.0, 2.0], &[2]);
    let y = param(&[3.0, 4.0], &[2]);
    let d = x.detach();
    assert!(!d.is_requires_grad());
    (&d * &y + &x.detach() * 2.0).sum(None).backward();
    assert_close(&y.grad().expect("y.grad"), &[1.0, 2.0]);
    // x is in the graph only behind detach: zeros, as tinygrad
    assert_close(&x.grad().expect("x.grad"), &[0.0, 0.0]);
}

#[test]
#[should_panic(expected = "no gradient flows")]
fn backward_through_detach_only_panics() {
    let x = param(&[1.0, 2.0], &[2]);
    x.detach().sum(None).backward();
}

#[test]
fn no_grad_scope_detaches_results() {
    let x = param(&[1.0, 2.0], &[2]);
    let y = param(&[3.0, 4.0], &[2]);
    assert!(Tensor::is_grad_enabled());
    let z = Tensor::no_grad(|| {
        assert!(!Tensor::is_grad_enabled());
        &x * 2.0
    });
    assert!(Tensor::is_grad_enabled());
    assert!(!z.is_requires_grad());
    assert!((&x * 2.0).is_requires_grad());
    (&z * &y).sum(None).backward();
    assert_close(&z, &[2.0, 4.0]);
    assert_close(&y.grad().expect("y.grad"), &[2.0, 4.0]);
    assert_close(&x.grad().expect("x.grad"), &[0.0, 0.0]);
    {
        let _g = Tensor::no_grad_guard();
        assert!(!Tensor::is_grad_enabled());
    }
    assert!(Tensor::is_grad_enabled());
}

#[test]
fn gradient_of_non_scalar_with_explicit_targets() {
    // targets need not require grad; y = x * w, seeded with s: dx = s * w, dw = s * x
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    let w = t(&[4.0, 5.0, 6.0], &[3]);
    let unrelated = t(&[7.0, 8.0], &[2]);
    let y = &x * &w;
    let s = t(&[1.0, 0.5, -1.0], &[3]);
    let g = y.gradient_with(&[&x, &w, &unrelated], &s);
    assert_close(&g[0], &[4.0, 2.5, -6.0]);
    assert_close(&g[1], &[1.0, 1.0, -3.0]);
    assert_close(&g[2], &[0.0, 0.0]);
    assert!(x.grad().is_none(), "gradient() does not touch .grad");
    // the vector-Jacobian product through a matmul
    let a = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let b = t(&[1.0, 0.0, 0.0, 1.0], &[2, 2]);
    let seed = t(&[1.0, 1.0, 0.0, 0.0], &[2, 2]);
    let g = a.matmul(&b).gradient_with(&[&a], &seed);
    assert_close(&g[0], &[1.0, 1.0, 0.0, 0.0]);
}

#[test]
fn tinygrad_gradient_doc_example() {
    // tinygrad's Tensor.gradient docstring: z = (y @ eye(3)).sum(); dz/dx, dz/dy
    let x = Tensor::eye(3, None, DType::FLOAT32);
    let y = t(&[2.0, 0.0, -2.0], &[1, 3]);
    let g = y.matmul(&x).sum(None).gradient(&[&x, &y]);
    assert_close(&g[0], &[2.0, 2.0, 2.0, 0.0, 0.0, 0.0, -2.0, -2.0, -2.0]);
    assert_close(&g[1], &[1.0, 1.0, 1.0]);
}

#[test]
fn requires_grad_on_a_constant_makes_it_unique() {
    let a = Tensor::ones(&[3], DType::FLOAT32).requires_grad(true);
    let b = Tensor::ones(&[3], DType::FLOAT32);
    (&a * 2.0 + &b * 3.0).sum(None).backward();
    assert_close(&a.grad().expect("a.grad"), &[2.0, 2.0, 2.0]);
    assert!(b.grad().is_none());
}

#[test]
fn requires_grad_flags() {
    let x = t(&[1.0], &[1]);
    assert!(!x.is_requires_grad());
    x.requires_grad_();
    assert!(x.is_requires_grad());
    let y = &x * 2.0;
    assert!(y.is_requires_grad());
    x.set_requires_grad(false);
    assert!(!x.is_requires_grad());
    assert!(!y.is_requires_grad());
}

#[test]
fn contiguous_backward_realizes_the_gradient() {
    let x = param(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let y = x.permute(&[1, 0]).contiguous_backward();
    let [g] = (&y * &y).sum(None).gradient(&[&x]).try_into().expect("one");
    let has_contiguous = g.uop().toposort().iter().any(|n| n.op() == Ops::Contiguous);
    assert!(has_contiguous, "{:#?}", g.uop());
    assert_close(&g, &[2.0, 4.0, 6.0, 8.0]);
}

#[test]
fn training_flag_and_guard() {
    assert!(!Tensor::training());
    {
        let _train = Tensor::train(true);
        assert!(Tensor::training());
        {
            let _eval = Tensor::train(false);
            assert!(!Tensor::training());
        }
        assert!(Tensor::training());
    }
    assert!(!Tensor::training());
    Tensor::set_training(true);
    assert!(Tensor::training());
    Tensor::set_training(false);
}

#[test]
fn mlp_forward_and_backward_fuse() {
    let x = t(
        &(0..12).map(|v| v as f32 / 6.0 - 1.0).collect::<Vec<_>>(),
        &[3, 4],
    );
    let w1 = param(
        &(0..20)
            .map(|v| (v % 7) as f32 / 7.0 - 0.4)
            .collect::<Vec<_>>(),
        &[4, 5],
    );
    let b1 = param(&[0.1, -0.2, 0.3, 0.0, 0.05], &[5]);
    let w2 = param(
        &(0..10)
            .map(|v| (v % 5) as f32 / 5.0 - 0.5)
            .collect::<Vec<_>>(),
        &[5, 2],
    );
    let loss = x
        .matmul(&w1)
        .add(&b1)
        .relu()
        .matmul(&w2)
        .log_softmax(-1)
        .mean(None);
    loss.backward();
    let grads: Vec<Tensor> = [&w1, &b1, &w2]
        .iter()
        .map(|p| p.grad().expect("grad"))
        .collect();
    let mut outs = vec![&loss];
    outs.extend(grads.iter());
    let kernels = Tensor::schedule(&outs).len();
    let sink: Vec<tinygrad_uop::UOp> = outs.iter().map(|t| t.uop()).collect();
    let mut seen = std::collections::HashSet::new();
    let ops = sink
        .iter()
        .flat_map(|u| u.toposort())
        .filter(|n| {
            seen.insert(n.clone())
                && (n.op().is_alu() || n.op().is_movement() || n.op() == Ops::ReduceAxis)
        })
        .count();
    eprintln!("mlp forward+backward: {kernels} kernels for {ops} ops");
    assert!(
        kernels < ops,
        "{kernels} kernels for {ops} ops: forward and backward should fuse"
    );
    assert!(kernels >= 3, "{kernels} kernels: one per gradient at least");
    // (the values of an MLP's gradients are checked by the `mlp` case of grads.json)
    Tensor::try_realize_all(&outs).expect("realize");
    assert!(loss.item::<f32>().is_finite());
}

// ---- bad input ----

#[test]
#[should_panic(expected = "backward: MUL of shape [3] (float32) is not a scalar")]
fn backward_on_non_scalar_panics() {
    let x = param(&[1.0, 2.0, 3.0], &[3]);
    (&x * 2.0).backward();
}

#[test]
#[should_panic(expected = "depends on no tensor that requires grad")]
fn backward_without_requires_grad_panics() {
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    (&x * 2.0).sum(None).backward();
}

#[test]
#[should_panic(expected = "only float tensors have gradients")]
fn gradient_of_int_panics() {
    let x = Tensor::from_slice(&[1i32, 2], &[2]);
    x.sum(None).gradient(&[&x]);
}

#[test]
#[should_panic(expected = "gradient of shape [2] for")]
fn seed_with_wrong_shape_panics() {
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    (&x * 2.0).gradient_with(&[&x], &t(&[1.0, 1.0], &[2]));
}

#[test]
fn conv_input_gradient_is_a_transposed_convolution() {
    // Derived through the overlapping window view, the input gradient of a 5x5 convolution
    // materializes one value per output position and kernel tap (2*4*8*8*25 = 12800 floats
    // here; 655 MB for beautiful_mnist's second conv at batch 512). As a transposed convolution
    // nothing larger than the input (2*4*12*12) or the output gradient is stored.
    let xv: Vec<f32> = (0..2 * 4 * 12 * 12)
        .map(|i| (i % 7) as f32 * 0.25)
        .collect();
    let wv: Vec<f32> = (0..4 * 4 * 5 * 5)
        .map(|i| (i % 5) as f32 * 0.1 - 0.2)
        .collect();
    let x = Tensor::from_slice(&xv, &[2, 4, 12, 12]).requires_grad(true);
    let w = Tensor::from_slice(&wv, &[4, 4, 5, 5]).requires_grad(true);
    let y = x.conv2d(&w, None, 1, 1, 1, 0);
    let grads = (&y * &y).sum(Axis::All).gradient(&[&x, &w]);
    let items = Tensor::schedule(&[&grads[0]]);
    let largest = items
        .iter()
        .flat_map(|it| it.bufs.iter())
        .filter_map(|b| match b.arg() {
            tinygrad_uop::Arg::Buffer(n, _) => Some(*n),
            _ => None,
        })
        .max()
        .expect("buffers");
    assert!(
        largest <= 2 * 4 * 12 * 12,
        "input gradient stores a buffer of {largest} elements"
    );
    // its values: the conv2d cases of tests/golden/grads.json (numpy finite differences)
}

/// A large convolution's input gradient is computed in bands of rows, each taking only the
/// kernel rows whose input row exists (the rows near the edges skip the zero padding). Checked
/// against sums in f64 over every (output, tap) pair, with groups, a non-square kernel, uneven
/// padding on both axes and a non-square image; and it ran banded (several matmul kernels).
#[test]
fn large_conv_input_gradient_in_row_bands_matches_direct_sums() {
    let (b, c, g, h, w, kh, kw) = (8usize, 32usize, 2usize, 30usize, 26usize, 5usize, 3usize);
    let (pt, pb, pl, pr) = (1usize, 3usize, 2usize, 0usize);
    let cg = c / g;
    let xv: Vec<f32> = (0..b * c * h * w)
        .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
        .collect();
    let wv: Vec<f32> = (0..c * cg * kh * kw)
        .map(|i| ((i * 53) % 89) as f32 / 44.0 - 1.0)
        .collect();
    let (oh, ow) = (h + pt + pb - kh + 1, w + pl + pr - kw + 1);
    let rv: Vec<f32> = (0..b * c * oh * ow)
        .map(|i| ((i * 29) % 97) as f32 / 48.0 - 1.0)
        .collect();
    let x = Tensor::from_slice(&xv, &[b, c, h, w]).requires_grad(true);
    let wt = Tensor::from_slice(&wv, &[c, cg, kh, kw]).requires_grad(true);
    let bias = Tensor::from_slice(&vec![0.25f32; c], &[c]).requires_grad(true);
    let r = Tensor::from_slice(&rv, &[b, c, oh, ow]);
    let pads = tinygrad_tensor::Padding::Pairs(vec![
        (pt as isize, pb as isize),
        (pl as isize, pr as isize),
    ]);
    let y = x.conv2d(&wt, Some(&bias), g, 1, 1, pads);
    assert_eq!(y.shape(), vec![b, c, oh, ow]);
    // the output gradient is computed (r * 2), as a training step's is
    let mut grads = (&y * &r * 2.0)
        .sum(Axis::All)
        .gradient(&[&x, &wt, &bias])
        .into_iter();
    let (gx, gw, gb) = (
        grads.next().unwrap(),
        grads.next().unwrap(),
        grads.next().unwrap(),
    );
    let matmuls = Tensor::schedule(&[&gx])
        .iter()
        .filter(|k| k.ast.toposort().iter().any(|u| u.op() == Ops::Reduce))
        .count();
    assert!(
        matmuls >= 3,
        "{matmuls} reduce kernels: expected a band per edge row group"
    );
    // the 3 single-row bands above the middle are concatenated first: the full-size
    // concatenation reads 3 buffers (top group, middle band, bottom band), not 5
    let widest = Tensor::schedule(&[&gx])
        .iter()
        .filter(|k| k.ast.toposort().iter().all(|u| u.op() != Ops::Reduce))
        .map(|k| {
            k.ast
                .toposort()
                .iter()
                .filter(|u| u.op() == Ops::DefineGlobal)
                .count()
        })
        .max()
        .unwrap_or(0);
    assert_eq!(
        widest, 4,
        "the widest elementwise kernel has {widest} buffers: output and 3 sources expected"
    );
    let got = gx.to_vec::<f32>();
    // d/dx[n, ci, iy, ix] = sum over the outputs reading it of 2r * w; the weight and bias
    // gradients (which read the output gradient from the bands' padded buffer) likewise
    let mut want = vec![0f64; b * c * h * w];
    let mut want_w = vec![0f64; c * cg * kh * kw];
    let mut want_b = vec![0f64; c];
    for n in 0..b {
        for co in 0..c {
            let grp = co / cg;
            for oy in 0..oh {
                for ox in 0..ow {
                    let rr = 2.0 * rv[((n * c + co) * oh + oy) * ow + ox] as f64;
                    want_b[co] += rr;
                    for cl in 0..cg {
                        let ci = grp * cg + cl;
                        for ky in 0..kh {
                            let iy = oy as isize - pt as isize + ky as isize;
                            if iy < 0 || iy >= h as isize {
                                continue;
                            }
                            for kx in 0..kw {
                                let ix = ox as isize - pl as isize + kx as isize;
                                if ix < 0 || ix >= w as isize {
                                    continue;
                                }
                                let wi = ((co * cg + cl) * kh + ky) * kw + kx;
                                let xi = ((n * c + ci) * h + iy as usize) * w + ix as usize;
                                want[xi] += rr * wv[wi] as f64;
                                want_w[wi] += rr * xv[xi] as f64;
                            }
                        }
                    }
                }
            }
        }
    }
    for (i, (p, q)) in got.iter().zip(&want).enumerate() {
        assert!(
            (*p as f64 - q).abs() <= 1e-4 + 1e-4 * q.abs(),
            "element {i}: {p} vs {q}"
        );
    }
    for (what, got, want) in [("weight", gw, want_w), ("bias", gb, want_b)] {
        for (i, (p, q)) in got.to_vec::<f32>().iter().zip(&want).enumerate() {
            assert!(
                (*p as f64 - q).abs() <= 1e-3 + 1e-4 * q.abs(),
                "{what} gradient element {i}: {p} vs {q}"
            );
        }
    }
}

/// `relu`'s gradient is tinygrad's `(x > 0).where(g, 0)` at every edge value: 0 at -0.0, 0.0,
/// negative numbers, -inf and NaN; `g` at positive numbers and inf (the mask is read from the
/// output, which is positive exactly where `x` is).
#[test]
fn relu_gradient_at_edge_values() {
    let xs = [
        -1.5f32,
        -0.0,
        0.0,
        2.0,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e-30,
    ];
    let x = Tensor::from_slice(&xs, &[xs.len()]).requires_grad(true);
    let g = Tensor::from_slice(&[3.0f32; 8], &[8]);
    let gx = (&x.relu() * &g).sum(Axis::All).gradient(&[&x]).remove(0);
    assert_eq!(
        gx.to_vec::<f32>(),
        vec![0.0, 0.0, 0.0, 3.0, 0.0, 3.0, 0.0, 3.0]
    );
    // tinygrad's relu is `(x > 0).where(x, 0)`: NaN gives 0
    assert_eq!(
        x.relu().to_vec::<f32>(),
        vec![0.0, 0.0, 0.0, 2.0, 0.0, f32::INFINITY, 0.0, 1e-30]
    );
}

/// A max pool whose windows tile the input (stride = kernel, no padding) has its gradient
/// computed in the input's layout (`max_pool_tiled_gradient`); it equals, bit for bit, the
/// derived gradient of the same `max` over a reshaped view (`(x == max) / count * g`): ties
/// split evenly, a window with NaN gives NaN (no element equals its max), infinities compare
/// equal. 2-d and 1-d kernels, the gradient through a later consumer, on CPU and REF.
#[test]
fn tiled_max_pool_gradient_matches_the_derived_one() {
    let xs: Vec<f32> = (0..2 * 3 * 4 * 6)
        .map(|i| match i % 23 {
            5 => f32::NAN,
            7 => f32::INFINITY,
            9 => f32::NEG_INFINITY,
            _ => ((i * 7) % 5) as f32 - 2.0,
        })
        .collect();
    for dev in ["CPU", "REF"] {
        let x = Tensor::from_slice(&xs, &[2, 3, 4, 6])
            .to(dev)
            .requires_grad(true);
        let r = Tensor::from_slice(
            &(0..2 * 3 * 2 * 3)
                .map(|i| 0.5 + i as f32)
                .collect::<Vec<_>>(),
            &[2, 3, 2, 3],
        )
        .to(dev);
        let pooled = x.max_pool2d(2, Dims::Default, 1, 0, false);
        let derived = x.reshape(&[2, 3, 2, 2, 3, 2]).max(vec![3isize, 5]);
        let bits = |t: &Tensor| {
            t.to_vec::<f32>()
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>()
        };
        assert_eq!(bits(&pooled), bits(&derived), "{dev}: values");
        let g_pool = (&pooled.exp() * &r)
            .sum(Axis::All)
            .gradient(&[&x])
            .remove(0);
        let g_derived = (&derived.exp() * &r)
            .sum(Axis::All)
            .gradient(&[&x])
            .remove(0);
        assert_eq!(bits(&g_pool), bits(&g_derived), "{dev}: 2-d gradients");
        // a 1-d kernel over the last dim
        let p1 = x.max_pool2d(vec![3], Dims::Default, 1, 0, false);
        let d1 = x.reshape(&[2, 3, 4, 2, 3]).max(vec![4isize]);
        let g1 = (&p1 * 2.0).sum(Axis::All).gradient(&[&x]).remove(0);
        let gd1 = (&d1 * 2.0).sum(Axis::All).gradient(&[&x]).remove(0);
        assert_eq!(bits(&g1), bits(&gd1), "{dev}: 1-d gradients");
        // ties split evenly: window (0, 0, 0, 0) of a constant input
        let ones = Tensor::ones(&[1, 1, 2, 2], DType::FLOAT32)
            .to(dev)
            .requires_grad(true);
        let g = ones
            .max_pool2d(2, Dims::Default, 1, 0, false)
            .sum(Axis::All)
            .gradient(&[&ones])
            .remove(0);
        assert_eq!(g.to_vec::<f32>(), vec![0.25; 4], "{dev}: ties");
    }
}

/// Two `Tensor::train` guards dropped out of order (the outer one first): the mode is the
/// live guard's until it goes, then the mode from before both (guards that each restored the
/// mode saved when they were made left training on after both were dropped).
#[test]
fn train_guards_dropped_out_of_order_keep_the_live_guards_mode() {
    assert!(!Tensor::training());
    let outer = Tensor::train(true);
    let inner = Tensor::train(false);
    drop(outer);
    assert!(
        !Tensor::training(),
        "the inner guard's mode must hold while it lives"
    );
    drop(inner);
    assert!(
        !Tensor::training(),
        "training stayed on after both guards were dropped"
    );
    // and the other way round
    let outer = Tensor::train(false);
    let inner = Tensor::train(true);
    drop(outer);
    assert!(
        Tensor::training(),
        "the inner guard's mode must hold while it lives"
    );
    drop(inner);
    assert!(!Tensor::training());
    // nested in order, as before
    {
        let _a = Tensor::train(true);
        {
            let _b = Tensor::train(false);
            assert!(!Tensor::training());
        }
        assert!(Tensor::training());
    }
    assert!(!Tensor::training());
}

/// Two `no_grad_guard`s dropped out of order (the outer one first): gradients stay off while
/// either guard lives and come back when both are gone (guards that restored a saved mode left
/// them on inside the inner guard and off after both).
#[test]
fn no_grad_guards_dropped_out_of_order_keep_gradients_off_until_both_are_gone() {
    assert!(Tensor::is_grad_enabled());
    let outer = Tensor::no_grad_guard();
    let inner = Tensor::no_grad_guard();
    drop(outer);
    assert!(
        !Tensor::is_grad_enabled(),
        "gradients came back while the inner guard lives"
    );
    let x = Tensor::from_vec(vec![1.0f32, 2.0]).requires_grad(true);
    assert!(!(&x * 2.0).is_requires_grad());
    drop(inner);
    assert!(
        Tensor::is_grad_enabled(),
        "gradients stayed off after both guards were dropped"
    );
    assert!((&x * 2.0).is_requires_grad());
    // nested in order, as before
    {
        let _a = Tensor::no_grad_guard();
        {
            let _b = Tensor::no_grad_guard();
            assert!(!Tensor::is_grad_enabled());
        }
        assert!(!Tensor::is_grad_enabled());
    }
    assert!(Tensor::is_grad_enabled());
}
