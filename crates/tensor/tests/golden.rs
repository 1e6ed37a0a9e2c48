//! Golden tests: every Tensor op against expected values computed independently (numpy, float64)
//! by `tests/golden/gen_golden.py` into `tests/golden/cases.json` (format: `tests/golden/README.md`).
//!
//! The whole suite runs once per device (`golden_cpu`, `golden_ref`, and `golden_dev` on the
//! device named by `DEV` when it is another one, e.g. `DEV=CUDA`). Every case runs, even after
//! failures (panics included), and all failures are reported together; the test fails if any did.
//! `golden_ptx` renders every kernel of the suite to PTX and assembles it with `ptxas`.
//!
//! Debugging helpers (environment variables):
//! - `GOLDEN_FILTER=substr[,substr...]`: run only the cases whose name contains one of them;
//! - `GOLDEN_VERBOSE=1`: print each case name before running it.

mod common;

use std::fmt::Write as _;
use std::ops::Not;
use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::Value;
use tinygrad_tensor::{Axis, DType, Tensor};

mod ptx_check;

/// tinygrad's test tolerances for float outputs.
const ATOL: f64 = 1e-6;
const RTOL: f64 = 1e-3;

/// Cases that are known to fail, with the reason. Must stay empty unless a failure cannot be
/// fixed; each entry names the case and why.
const KNOWN_FAILURES: &[(&str, &str)] = &[];

fn dtype_of(name: &str) -> DType {
    match name {
        "float32" => DType::FLOAT32,
        "int32" => DType::INT32,
        "bool" => DType::BOOL,
        "uint8" => DType::UINT8,
        other => panic!("unknown dtype {other:?} in cases.json"),
    }
}

/// A JSON number or one of the strings `"nan"`, `"inf"`, `"-inf"`, as `f64`.
fn num(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().expect("a number"),
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::String(s) => match s.as_str() {
            "nan" => f64::NAN,
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            other => panic!("bad number string {other:?}"),
        },
        other => panic!("expected a number, got {other}"),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Number(n) => n.as_i64().expect("an integer"),
        Value::Bool(b) => i64::from(*b),
        other => panic!("expected an integer, got {other}"),
    }
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected a list, got {v}"))
        .iter()
        .map(int)
        .collect()
}

fn isizes(v: &Value) -> Vec<isize> {
    ints(v).into_iter().map(|x| x as isize).collect()
}

fn usizes(v: &Value) -> Vec<usize> {
    ints(v).into_iter().map(|x| x as usize).collect()
}

fn pairs(v: &Value) -> Vec<(usize, usize)> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected a list of pairs, got {v}"))
        .iter()
        .map(|p| {
            let p = usizes(p);
            assert_eq!(p.len(), 2, "expected a pair");
            (p[0], p[1])
        })
        .collect()
}

/// A scalar argument as a tensor constant: JSON ints stay ints, floats floats, bools bools.
fn const_arg(v: &Value) -> tinygrad_tensor::ConstValue {
    use tinygrad_tensor::ConstValue;
    match v {
        Value::Bool(b) => ConstValue::Bool(*b),
        Value::Number(n) if n.is_i64() => ConstValue::Int(n.as_i64().expect("i64")),
        _ => ConstValue::Float(num(v)),
    }
}

thread_local! {
    /// For the multi-device variants: split inputs along their first axis (where it divides
    /// evenly over the devices) instead of giving every device all of them.
    static SHARD_INPUTS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn make_input(spec: &Value, device: &str) -> Tensor {
    let t = make_input_unsharded(spec, device);
    let devices = t.devices();
    let shape = t.shape();
    if SHARD_INPUTS.get()
        && devices.len() > 1
        && shape
            .first()
            .is_some_and(|&d| d > 0 && d % devices.len() == 0)
    {
        let refs: Vec<&str> = devices.iter().map(String::as_str).collect();
        return t.to(&devices[0]).shard(&refs, Some(0));
    }
    t
}

fn make_input_unsharded(spec: &Value, device: &str) -> Tensor {
    let shape = usizes(&spec["shape"]);
    let dt = dtype_of(spec["dtype"].as_str().expect("dtype"));
    let data = spec["data"].as_array().expect("data");
    match dt {
        DType::FLOAT32 => {
            let v: Vec<f32> = data.iter().map(|x| num(x) as f32).collect();
            Tensor::from_slice_on(&v, &shape, device)
        }
        DType::INT32 => {
            let v: Vec<i32> = data.iter().map(|x| int(x) as i32).collect();
            Tensor::from_slice_on(&v, &shape, device)
        }
        DType::UINT8 => {
            let v: Vec<u8> = data.iter().map(|x| int(x) as u8).collect();
            Tensor::from_slice_on(&v, &shape, device)
        }
        DType::BOOL => {
            let v: Vec<bool> = data.iter().map(|x| x.as_bool().expect("bool")).collect();
            Tensor::from_slice_on(&v, &shape, device)
        }
        _ => unreachable!(),
    }
}

fn axis_arg(v: &Value) -> Axis {
    match v {
        Value::Null => Axis::All,
        Value::Array(_) => Axis::Some(isizes(v)),
        _ => Axis::Some(vec![int(v) as isize]),
    }
}

fn opt_axis(v: &Value) -> Option<isize> {
    if v.is_null() {
        None
    } else {
        Some(int(v) as isize)
    }
}

fn apply_move(t: &Tensor, name: &str, arg: &Value) -> Tensor {
    match name {
        "reshape" => t.reshape(&isizes(arg)),
        "expand" => t.expand(&isizes(arg)),
        "permute" => t.permute(&isizes(arg)),
        "flip" => t.flip(&isizes(arg)),
        "shrink" => t.shrink(&pairs(arg)),
        "pad" => t.pad(&pairs(arg), 0),
        other => panic!("unknown movement op {other:?} in pre"),
    }
}

/// Runs one case's op on `device`.
fn run_op(case: &Value, device: &str) -> Tensor {
    let op = case["op"].as_str().expect("op");
    let args = &case["args"];
    let mut xs: Vec<Tensor> = case["inputs"]
        .as_array()
        .expect("inputs")
        .iter()
        .map(|s| make_input(s, device))
        .collect();
    if let Some(pre) = args.get("pre").and_then(Value::as_array) {
        for m in pre {
            let m = m.as_array().expect("pre entry");
            xs[0] = apply_move(&xs[0], m[0].as_str().expect("pre name"), &m[1]);
        }
    }
    let x = || &xs[0];
    let y = || &xs[1];
    let keepdim = || args["keepdim"].as_bool().unwrap_or(false);
    let dt_arg = || dtype_of(args["dtype"].as_str().expect("dtype arg"));
    match op {
        // unary
        "neg" => x().neg(),
        "reciprocal" => x().reciprocal(),
        "sqrt" => x().sqrt(),
        "rsqrt" => x().rsqrt(),
        "exp" => x().exp(),
        "exp2" => x().exp2(),
        "log" => x().log(),
        "log2" => x().log2(),
        "sin" => x().sin(),
        "cos" => x().cos(),
        "tan" => x().tan(),
        "trunc" => x().trunc(),
        "floor" => x().floor(),
        "ceil" => x().ceil(),
        "round" => x().round(),
        "abs" => x().abs(),
        "sign" => x().sign(),
        "relu" => x().relu(),
        "sigmoid" => x().sigmoid(),
        "tanh" => x().tanh(),
        "logical_not" => x().logical_not(),
        // binary
        "add" => x().add(y()),
        "sub" => x().sub(y()),
        "mul" => x().mul(y()),
        "div" => x().div_mode(y(), args.get("rounding_mode").and_then(Value::as_str)),
        "idiv" => x().idiv(y()),
        "mod" => x().modulo(y()),
        "pow" => x().pow(y()),
        "maximum" => x().maximum(y()),
        "minimum" => x().minimum(y()),
        "cmplt" => x().lt(y()),
        "cmpgt" => x().gt(y()),
        "cmple" => x().le(y()),
        "cmpge" => x().ge(y()),
        "cmpeq" => x().eq(y()),
        "cmpne" => x().ne(y()),
        "logical_and" => x().logical_and(y()),
        "logical_or" => x().logical_or(y()),
        "logical_xor" => x().logical_xor(y()),
        "bitwise_and" => x().bitwise_and(y()),
        "bitwise_or" => x().bitwise_or(y()),
        "bitwise_xor" => x().bitwise_xor(y()),
        "lshift" => x().lshift(y()),
        "rshift" => x().rshift(y()),
        // ternary and friends
        "where" => x().where_(y(), &xs[2]),
        "clip" => x().clip(args["min"].as_f64(), args["max"].as_f64()),
        "cast" => x().cast(dt_arg()),
        // more math (math.rs), reductions and movement from tinygrad's mixins
        "log10" => x().log10(),
        "asin" => x().asin(),
        "acos" => x().acos(),
        "atan" => x().atan(),
        "square" => x().square(),
        "fmod" => x().fmod(y()),
        "copysign" => x().copysign(y()),
        "logaddexp" => x().logaddexp(y()),
        "isclose" => x().isclose(
            y(),
            args["rtol"].as_f64().expect("rtol"),
            args["atol"].as_f64().expect("atol"),
            args["equal_nan"].as_bool().expect("equal_nan"),
        ),
        "clamp" => x().clamp(args["min"].as_f64(), args["max"].as_f64()),
        "var_mean" | "std_mean" => {
            let c = int(&args["correction"]) as usize;
            let a = axis_arg(&args["axis"]);
            let (v, m) = if op == "var_mean" {
                x().var_mean(a, c, keepdim())
            } else {
                x().std_mean(a, c, keepdim())
            };
            Tensor::stack(&[&v, &m], 0)
        }
        "rearrange" => {
            let sizes: Vec<(&str, usize)> = args["sizes"]
                .as_object()
                .expect("sizes")
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_u64().expect("size") as usize))
                .collect();
            x().rearrange(args["formula"].as_str().expect("formula"), &sizes)
        }
        "einsum" => Tensor::einsum(
            args["formula"].as_str().expect("formula"),
            &xs.iter().collect::<Vec<_>>(),
        ),
        "nonzero" => x().nonzero(),
        "diag" => x().diag(),
        "diagonal" => x().diagonal(),
        "repeat_interleave" => {
            x().repeat_interleave(int(&args["repeats"]) as usize, opt_axis(&args["dim"]))
        }
        "pad_to" | "shrink_to" => {
            let shape: Vec<Option<usize>> = args["shape"]
                .as_array()
                .expect("shape")
                .iter()
                .map(|v| v.as_u64().map(|n| n as usize))
                .collect();
            if op == "pad_to" {
                x().pad_to(&shape)
            } else {
                x().shrink_to(&shape)
            }
        }
        // movement
        "reshape" => x().reshape(&isizes(&args["shape"])),
        "expand" => x().expand(&isizes(&args["shape"])),
        "permute" => x().permute(&isizes(&args["order"])),
        "pad" => x().pad(&pairs(&args["pad"]), const_arg(&args["value"])),
        "shrink" => x().shrink(&pairs(&args["bounds"])),
        "flip" => x().flip(&isizes(&args["axis"])),
        "transpose" => x().transpose(int(&args["dim0"]) as isize, int(&args["dim1"]) as isize),
        "flatten" => x().flatten(
            int(&args["start_dim"]) as isize,
            int(&args["end_dim"]) as isize,
        ),
        "squeeze" => x().squeeze(opt_axis(&args["dim"])),
        "unsqueeze" => x().unsqueeze(int(&args["dim"]) as isize),
        "unfold" => x().unfold(
            int(&args["dim"]) as isize,
            int(&args["size"]) as usize,
            int(&args["step"]) as usize,
        ),
        "cat" => Tensor::cat(&xs.iter().collect::<Vec<_>>(), int(&args["dim"]) as isize),
        "stack" => Tensor::stack(&xs.iter().collect::<Vec<_>>(), int(&args["dim"]) as isize),
        // reductions
        "sum" | "prod" | "max" | "min" | "mean" | "any" | "all" => {
            let a = axis_arg(&args["axis"]);
            match (op, keepdim()) {
                ("sum", false) => x().sum(a),
                ("sum", true) => x().sum_keepdim(a),
                ("prod", false) => x().prod(a),
                ("prod", true) => x().prod_keepdim(a),
                ("max", false) => x().max(a),
                ("max", true) => x().max_keepdim(a),
                ("min", false) => x().min(a),
                ("min", true) => x().min_keepdim(a),
                ("mean", false) => x().mean(a),
                ("mean", true) => x().mean_keepdim(a),
                ("any", false) => x().any(a),
                ("any", true) => x().any_keepdim(a),
                ("all", false) => x().all(a),
                ("all", true) => x().all_keepdim(a),
                _ => unreachable!(),
            }
        }
        "var" | "std" => {
            let a = axis_arg(&args["axis"]);
            let c = args.get("correction").map_or(1, int) as usize;
            match (op, keepdim()) {
                ("var", false) => x().var(a, c),
                ("var", true) => x().var_keepdim(a, c),
                ("std", false) => x().std(a, c),
                ("std", true) => x().std_keepdim(a, c),
                _ => unreachable!(),
            }
        }
        "argmax" | "argmin" => {
            let a = opt_axis(&args["axis"]);
            match (op, keepdim()) {
                ("argmax", false) => x().argmax(a),
                ("argmax", true) => x().argmax_keepdim(a),
                ("argmin", false) => x().argmin(a),
                ("argmin", true) => x().argmin_keepdim(a),
                _ => unreachable!(),
            }
        }
        "softmax" => x().softmax(int(&args["axis"]) as isize),
        "log_softmax" => x().log_softmax(int(&args["axis"]) as isize),
        "logsumexp" => {
            let a = axis_arg(&args["axis"]);
            if keepdim() {
                x().logsumexp_keepdim(a)
            } else {
                x().logsumexp(a)
            }
        }
        "matmul" => x().matmul(y()),
        "dot" => x().dot(y()),
        "linear" => x().linear(y(), xs.get(2)),
        // creation
        "arange" => Tensor::arange_on(
            num(&args["start"]),
            num(&args["stop"]),
            num(&args["step"]),
            dt_arg(),
            device,
        ),
        "linspace" => Tensor::linspace_on(
            num(&args["start"]),
            num(&args["stop"]),
            int(&args["steps"]) as usize,
            dt_arg(),
            device,
        ),
        "eye" => Tensor::eye_on(
            int(&args["n"]) as usize,
            args["m"].as_i64().map(|m| m as usize),
            dt_arg(),
            device,
        ),
        "full" => Tensor::full_on(
            &usizes(&args["shape"]),
            const_arg(&args["value"]),
            dt_arg(),
            device,
        ),
        "zeros" => Tensor::zeros_on(&usizes(&args["shape"]), dt_arg(), device),
        "ones" => Tensor::ones_on(&usizes(&args["shape"]), dt_arg(), device),
        other => panic!("op {other:?} is not mapped to the Tensor API"),
    }
}

/// Compares `got` with the case's expected output; `Err` describes every difference.
fn check(case: &Value, got: &Tensor, device: &str) -> Result<(), String> {
    let out = &case["out"];
    let exp_shape = usizes(&out["shape"]);
    let exp_dt = dtype_of(out["dtype"].as_str().expect("out dtype"));
    let mut err = String::new();
    if got.shape() != exp_shape {
        let _ = write!(
            err,
            "shape: expected {exp_shape:?}, got {:?}; ",
            got.shape()
        );
    }
    if got.dtype() != exp_dt {
        let _ = write!(err, "dtype: expected {exp_dt}, got {}; ", got.dtype());
    }
    if !err.is_empty() {
        return Err(err);
    }
    if got.device() != device {
        return Err(format!("device: expected {device}, got {}", got.device()));
    }
    let vals = got.to_f64_vec();
    let exp: Vec<f64> = out["data"]
        .as_array()
        .expect("out data")
        .iter()
        .map(num)
        .collect();
    if vals.len() != exp.len() {
        return Err(format!(
            "element count: expected {}, got {}",
            exp.len(),
            vals.len()
        ));
    }
    let is_float = exp_dt.is_float();
    let bad: Vec<usize> = (0..exp.len())
        .filter(|&i| {
            let (g, e) = (vals[i], exp[i]);
            if !is_float {
                return g != e;
            }
            if e.is_nan() {
                !g.is_nan()
            } else if e.is_infinite() {
                g != e
            } else {
                // a NaN `got` must fail too, hence not `>`
                ((g - e).abs() <= ATOL + RTOL * e.abs()).not()
            }
        })
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    let _ = write!(err, "{} of {} values differ:", bad.len(), exp.len());
    for &i in bad.iter().take(6) {
        let _ = write!(
            err,
            " [{}] expected {} got {};",
            unravel(i, &exp_shape),
            exp[i],
            vals[i]
        );
    }
    if exp.len() <= 16 {
        let _ = write!(err, "\n      expected {exp:?}\n      got      {vals:?}");
    }
    Err(err)
}

fn unravel(mut i: usize, shape: &[usize]) -> String {
    let mut idx = vec![0usize; shape.len()];
    for d in (0..shape.len()).rev() {
        if shape[d] > 0 {
            idx[d] = i % shape[d];
            i /= shape[d];
        }
    }
    format!("{idx:?}")
}

fn describe(case: &Value) -> String {
    let ins: Vec<String> = case["inputs"]
        .as_array()
        .expect("inputs")
        .iter()
        .map(|s| format!("{}{}", s["dtype"].as_str().unwrap_or("?"), s["shape"]))
        .collect();
    format!(
        "op={} args={} inputs=[{}]",
        case["op"].as_str().unwrap_or("?"),
        case["args"],
        ins.join(", ")
    )
}

fn run_suite(device: &str) {
    run_suite_counting(device, |_| false);
}

/// The suite on `device`; a case that panics with a message `refused` accepts is counted as
/// refused (printed) rather than failed.
fn run_suite_counting(device: &str, refused: impl Fn(&str) -> bool) {
    common::install_quiet_hook();
    let cases = common::load_cases("cases.json");
    assert_eq!(
        cases.len(),
        851,
        "tests/golden/cases.json: unexpected case count"
    );
    let filter: Vec<String> = std::env::var("GOLDEN_FILTER")
        .ok()
        .filter(|f| !f.is_empty())
        .map(|f| f.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let verbose = std::env::var("GOLDEN_VERBOSE").is_ok_and(|v| v != "0");
    let (mut passed, mut failures, mut known) = (0usize, Vec::new(), Vec::new());
    let mut refusals: Vec<String> = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().expect("name");
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        if verbose {
            eprintln!("[{device}] {name}");
        }
        common::set_in_case(true);
        let res = catch_unwind(AssertUnwindSafe(|| {
            let t = run_op(case, device);
            check(case, &t, device)
        }));
        common::set_in_case(false);
        let res = res.unwrap_or_else(|e| Err(format!("panicked: {}", common::panic_message(&*e))));
        let res = match res {
            Err(e) if refused(&e) => {
                refusals.push(format!("{name}: {e}"));
                continue;
            }
            r => r,
        };
        match (res, KNOWN_FAILURES.iter().find(|(n, _)| *n == name)) {
            (Ok(()), None) => passed += 1,
            (Ok(()), Some(_)) => failures.push(format!(
                "{name}: listed in KNOWN_FAILURES but passes now; remove it"
            )),
            (Err(e), Some((_, why))) => known.push(format!("{name} ({why}): {e}")),
            (Err(e), None) => failures.push(format!("{name}: {}\n    {e}", describe(case))),
        }
    }
    let total = passed + failures.len() + known.len() + refusals.len();
    let refused_note = if refusals.is_empty() {
        String::new()
    } else {
        format!(", {} refused", refusals.len())
    };
    eprintln!(
        "golden [{device}]: {passed} passed, {} failed, {} known failures{refused_note} (of {total})",
        failures.len(),
        known.len()
    );
    if std::env::var("GOLDEN_VERBOSE").is_ok_and(|v| v != "0") {
        for r in &refusals {
            eprintln!("  refused: {r}");
        }
    }
    for k in &known {
        eprintln!("  known failure: {k}");
    }
    assert!(
        failures.is_empty(),
        "golden [{device}]: {} of {total} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn golden_cpu() {
    run_suite("CPU");
}

/// Every case with its inputs on two CPU devices, replicated: each device computes the whole
/// op, and reading the result takes the first device's copy.
#[test]
fn golden_multi_replicated() {
    run_suite("(CPU, CPU:1)");
}

/// Every case with its inputs split along the first axis over two, then three devices (where
/// it divides evenly; others replicated). A case whose op refuses the sharded axis with
/// tinygrad's rule (a pad or flip of it, a shrink cutting across shards, a reshape moving
/// elements between shards) is counted as refused; every other must match.
#[test]
fn golden_multi_sharded() {
    SHARD_INPUTS.set(true);
    common::expect_refusals("(CPU, CPU:1)", 20, "GOLDEN_FILTER", |rule| {
        run_suite_counting("(CPU, CPU:1)", rule)
    });
    common::expect_refusals("(CPU, REF, CPU:2)", 20, "GOLDEN_FILTER", |rule| {
        run_suite_counting("(CPU, REF, CPU:2)", rule)
    });
}

/// The sharded variant on two WEBGPU devices (skipped, saying why, without an adapter).
#[test]
fn golden_multi_webgpu() {
    common::on_webgpu("golden_multi_webgpu", |d| {
        SHARD_INPUTS.set(true);
        let devices = format!("({d}, {d}:1)");
        common::expect_refusals(&devices, 20, "GOLDEN_FILTER", |rule| {
            run_suite_counting(&devices, rule)
        });
    });
}

#[test]
fn golden_ref() {
    run_suite("REF");
}

/// The suite on `WEBGPU` (in CI the software Vulkan driver). Without an adapter it is skipped,
/// saying why — unless `TINYGRAD_REQUIRE_WEBGPU=1` (CI), which makes a missing adapter fail.
#[test]
fn golden_webgpu() {
    common::on_webgpu("golden_webgpu", run_suite);
}

/// The suite on the device named by `DEV` (`DEV=CUDA` in `scripts/gpu-check.sh`). Skipped, saying
/// so, when `DEV` is unset or names `CPU`/`REF` (run above); fails when that device is missing.
#[test]
fn golden_dev() {
    common::on_dev_device("golden_dev", &["CPU", "REF"], run_suite);
}

/// Every kernel of the suite rendered to PTX for `sm_80` and `sm_90` and assembled by `ptxas`
/// (found as `tests/ptx_check` says; without it only rendering is checked, and the skip is
/// printed), and run by the PTX emulator (`ptx_check::emu`): each case's result must match the
/// expected values like on a device. The cases are built on `REF` and scheduled.
#[test]
fn golden_ptx() {
    common::install_quiet_hook();
    let mut kernels = ptx_check::Kernels::default();
    let (mut failures, mut emulated) = (Vec::new(), 0usize);
    for case in &common::load_cases("cases.json") {
        let name = case["name"].as_str().expect("name");
        common::set_in_case(true);
        let res = catch_unwind(AssertUnwindSafe(|| {
            let t = run_op(case, "REF");
            kernels.add(name, &t);
            match ptx_check::emulate(&t)? {
                None => Ok(false),
                Some((vals, dt)) => {
                    let shape = t.shape();
                    let got = match dt {
                        DType::FLOAT32 => {
                            let v: Vec<f32> = vals.iter().map(|&x| x as f32).collect();
                            Tensor::from_slice_on(&v, &shape, "REF")
                        }
                        DType::INT32 => {
                            let v: Vec<i32> = vals.iter().map(|&x| x as i32).collect();
                            Tensor::from_slice_on(&v, &shape, "REF")
                        }
                        DType::UINT8 => {
                            let v: Vec<u8> = vals.iter().map(|&x| x as u8).collect();
                            Tensor::from_slice_on(&v, &shape, "REF")
                        }
                        DType::BOOL => {
                            let v: Vec<bool> = vals.iter().map(|&x| x != 0.0).collect();
                            Tensor::from_slice_on(&v, &shape, "REF")
                        }
                        other => return Err(format!("emulated output of dtype {other}")),
                    };
                    check(case, &got, "REF").map(|()| true)
                }
            }
        }));
        common::set_in_case(false);
        match res {
            Ok(Ok(ran)) => emulated += usize::from(ran),
            Ok(Err(e)) => failures.push(format!("{name} (emulated PTX): {}", truncate(&e))),
            Err(e) => failures.push(format!("{name}: panicked: {}", common::panic_message(&*e))),
        }
    }
    eprintln!(
        "ptx [golden]: emulator: {emulated} cases computed by PTX, {} failed",
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    kernels.check("golden");
}

fn truncate(s: &str) -> &str {
    match s.char_indices().nth(4000) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// The comparison itself: tolerances, NaN/infinity handling, exact ints, shape and dtype.
#[test]
fn golden_checker_rejects_mismatches() {
    let case = |shape: &str, dtype: &str, data: &str| -> Value {
        serde_json::from_str(&format!(
            r#"{{"name":"t","op":"neg","args":{{}},"inputs":[],
                "out":{{"shape":{shape},"dtype":"{dtype}","data":{data}}}}}"#
        ))
        .expect("valid json")
    };
    let f = |v: &[f32]| Tensor::from_slice_on(v, &[v.len()], "REF");
    let ok = case("[3]", "float32", r#"[1.0, "nan", "-inf"]"#);
    assert!(check(&ok, &f(&[1.0009, f32::NAN, f32::NEG_INFINITY]), "REF").is_ok());
    assert!(check(&ok, &f(&[1.0011, f32::NAN, f32::NEG_INFINITY]), "REF").is_err());
    assert!(check(&ok, &f(&[1.0, 0.0, f32::NEG_INFINITY]), "REF").is_err());
    assert!(check(&ok, &f(&[1.0, f32::NAN, -3e38]), "REF").is_err());
    assert!(check(&ok, &f(&[1.0, f32::NAN, f32::NEG_INFINITY]), "CPU").is_err());
    let small = case("[1]", "float32", "[0.0]");
    assert!(check(&small, &f(&[9e-7]), "REF").is_ok());
    assert!(check(&small, &f(&[1.1e-6]), "REF").is_err());
    assert!(check(&small, &f(&[f32::NAN]), "REF").is_err());
    let ints = case("[2]", "int32", "[1, -2]");
    let i = |v: &[i32]| Tensor::from_slice_on(v, &[v.len()], "REF");
    assert!(check(&ints, &i(&[1, -2]), "REF").is_ok());
    assert!(check(&ints, &i(&[1, -3]), "REF").is_err());
    assert!(check(&ints, &f(&[1.0, -2.0]), "REF").is_err(), "dtype");
    assert!(
        check(&ints, &i(&[1, -2]).reshape(&[1, 2]), "REF").is_err(),
        "shape"
    );
}
