//! Ordering and cumulative ops (`crates/tensor/src/ordering.rs`): golden cases from
//! `tests/golden/ordering_cases.json` (numpy float64 references following tinygrad's semantics,
//! by `tests/golden/gen_ordering.py`) on CPU and REF — cumprod, cummax, cummin, logcumsumexp,
//! sort, argsort, topk, and gradients of cumprod and sort values — plus bad-input panics.
//!
//! CPU and WEBGPU run every case but the gradients of sorts (see `compiled_skips`), REF runs
//! all; `ORD_FILTER` lifts that restriction.
//!
//! Tolerance: atol 1e-6, rtol 1e-3 (infinities must match exactly). Float inputs are loaded as
//! float32, int ones as int32; non-finite floats are the strings "inf"/"-inf" in the JSON.
//!
//! Debugging: `ORD_FILTER=substr[,substr...]` runs only matching cases; `ORD_VERBOSE=1` prints
//! each.

mod common;

use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};

use common::{int, usizes};
use serde_json::Value;
use tinygrad_tensor::{DType, Tensor};

const ATOL: f64 = 1e-6;
const RTOL: f64 = 1e-3;

fn num(v: &Value) -> f64 {
    match v.as_str() {
        Some("inf") => f64::INFINITY,
        Some("-inf") => f64::NEG_INFINITY,
        _ => v
            .as_f64()
            .unwrap_or_else(|| panic!("expected a number, got {v}")),
    }
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected a list, got {v}"))
        .iter()
        .map(num)
        .collect()
}

fn make_tensor(spec: &Value, device: &str) -> Tensor {
    let shape = usizes(&spec["shape"]);
    match spec["dtype"].as_str().unwrap_or("float32") {
        "float32" => {
            let v: Vec<f32> = floats(&spec["data"]).iter().map(|&x| x as f32).collect();
            Tensor::from_slice_on(&v, &shape, device)
        }
        "int32" => {
            let v: Vec<i32> = spec["data"]
                .as_array()
                .expect("data")
                .iter()
                .map(|x| int(x) as i32)
                .collect();
            Tensor::from_slice_on(&v, &shape, device)
        }
        other => panic!("unknown dtype {other}"),
    }
}

fn arg(a: &Value, k: &str) -> isize {
    int(&a[k]) as isize
}

fn flag(a: &Value, k: &str) -> bool {
    a[k].as_bool()
        .unwrap_or_else(|| panic!("expected a bool for {k}"))
}

fn run_op(case: &Value, device: &str) -> Vec<Tensor> {
    let x = make_tensor(&case["input"], device);
    let a = &case["args"];
    let pair = |(v, i): (Tensor, Tensor)| vec![v, i];
    match case["op"].as_str().expect("op") {
        "cumprod" => vec![x.cumprod(arg(a, "axis"))],
        "cummax" => pair(x.cummax(arg(a, "axis"))),
        "cummin" => pair(x.cummin(arg(a, "axis"))),
        "logcumsumexp" => vec![x.logcumsumexp(arg(a, "axis"))],
        "sort" => pair(x.sort(arg(a, "dim"), flag(a, "descending"))),
        "argsort" => vec![x.argsort(arg(a, "dim"), flag(a, "descending"))],
        "topk" => pair(x.topk(
            int(&a["k"]) as usize,
            arg(a, "dim"),
            flag(a, "largest"),
            true,
        )),
        "grad_cumprod" => {
            let x = x.requires_grad(true);
            let w = make_tensor(&a["weights"], device);
            let y = (x.cumprod(arg(a, "axis")) * &w).sum(None);
            y.gradient(&[&x])
        }
        "grad_sort" => {
            let x = x.requires_grad(true);
            let w = make_tensor(&a["weights"], device);
            let (v, _) = x.sort(arg(a, "dim"), flag(a, "descending"));
            let y = (v * &w).sum(None);
            y.gradient(&[&x])
        }
        other => panic!("unknown op {other}"),
    }
}

fn check(case: &Value, got: &[Tensor], device: &str) -> Result<(), String> {
    let outs = case["outputs"].as_array().expect("outputs");
    if outs.len() != got.len() {
        return Err(format!("{} outputs, expected {}", got.len(), outs.len()));
    }
    for (k, (out, t)) in outs.iter().zip(got).enumerate() {
        if t.device() != device {
            return Err(format!("output {k} on {}, expected {device}", t.device()));
        }
        let want_dt = match out["dtype"].as_str().expect("output dtype") {
            "int32" => DType::INT32,
            _ => DType::FLOAT32,
        };
        if t.dtype() != want_dt {
            return Err(format!(
                "output {k} dtype {}, expected {want_dt}",
                t.dtype()
            ));
        }
        let shape = usizes(&out["shape"]);
        if t.shape() != shape {
            return Err(format!(
                "output {k} shape {:?}, expected {shape:?}",
                t.shape()
            ));
        }
        let exp = floats(&out["data"]);
        let vals = t.to_f64_vec();
        if vals.len() != exp.len() {
            return Err(format!(
                "output {k}: {} values, expected {}",
                vals.len(),
                exp.len()
            ));
        }
        let bad: Vec<usize> = (0..exp.len())
            .filter(|&i| {
                if exp[i].is_infinite() {
                    vals[i] != exp[i]
                } else {
                    (vals[i] - exp[i]).abs() > ATOL + RTOL * exp[i].abs() || !vals[i].is_finite()
                }
            })
            .collect();
        if !bad.is_empty() {
            let mut err = format!("output {k}: {} of {} values differ:", bad.len(), exp.len());
            for &i in bad.iter().take(6) {
                let _ = write!(err, " [{i}] expected {} got {};", exp[i], vals[i]);
            }
            return Err(err);
        }
    }
    Ok(())
}

/// Cases the compiled devices skip (REF runs them): the gradient of a sort is one huge kernel
/// (the whole bitonic network) that Cranelift — and lavapipe's LLVM for WEBGPU — takes minutes
/// to compile — a known problem, recorded in docs/API.md; the forward sorts run everywhere.
fn compiled_skips(name: &str) -> bool {
    name.starts_with("grad_sort") || name.starts_with("grad_topk")
}

fn run_suite(device: &str) {
    common::install_quiet_hook();
    let filter: Vec<String> = std::env::var("ORD_FILTER")
        .map(|s| s.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let verbose = std::env::var("ORD_VERBOSE").is_ok_and(|v| v == "1");
    let cases = common::load_cases("ordering_cases.json");
    let mut failures = Vec::new();
    let mut ran = 0;
    for case in &cases {
        let name = case["name"].as_str().expect("name");
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        if filter.is_empty() && device != "REF" && compiled_skips(name) {
            eprintln!("{device}: skipping {name} (compiles for minutes; REF checks it)");
            continue;
        }
        if verbose {
            eprintln!("{device} {name}");
        }
        ran += 1;
        common::set_in_case(true);
        let r = catch_unwind(AssertUnwindSafe(|| {
            let got = run_op(case, device);
            check(case, &got, device)
        }));
        common::set_in_case(false);
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(format!("{name}: {e}")),
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!("{name}: panicked: {msg}"));
            }
        }
    }
    assert!(ran > 0, "no ordering cases ran");
    assert!(
        failures.is_empty(),
        "{device}: {} of {ran} ordering cases failed:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
    eprintln!("{device}: {ran} ordering cases passed");
}

#[test]
fn ordering_golden_cpu() {
    run_suite("CPU");
}

#[test]
fn ordering_golden_ref() {
    run_suite("REF");
}

/// The suite on `WEBGPU` (in CI the software Vulkan driver). Without an adapter it is skipped,
/// saying why — unless `TINYGRAD_REQUIRE_WEBGPU=1` (CI), which makes a missing adapter fail.
#[test]
fn ordering_golden_webgpu() {
    common::on_webgpu("ordering_golden_webgpu", run_suite);
}

// ---- edge cases outside the goldens ----

#[test]
fn zero_dim_inputs() {
    let s = Tensor::from_slice_on(&[2.5f32], &[], "CPU");
    assert_eq!(s.cumprod(0).to_vec::<f32>(), vec![2.5]);
    let (v, i) = s.cummax(0);
    assert_eq!((v.to_vec::<f32>(), i.to_vec::<i32>()), (vec![2.5], vec![0]));
    let (v, i) = s.sort(0, false);
    assert_eq!((v.to_vec::<f32>(), i.to_vec::<i32>()), (vec![2.5], vec![0]));
    assert_eq!(i.dtype(), DType::INT32);
    assert_eq!(s.logcumsumexp(0).to_vec::<f32>(), vec![2.5]);
}

#[test]
fn empty_inputs() {
    let e = Tensor::zeros_on(&[2, 0], DType::FLOAT32, "CPU");
    let (v, i) = e.sort(1, true);
    assert_eq!((v.shape(), i.shape()), (vec![2, 0], vec![2, 0]));
    let (v, i) = e.cummin(-1);
    assert_eq!(
        (v.shape(), i.shape(), i.dtype()),
        (vec![2, 0], vec![2, 0], DType::INT32)
    );
    assert_eq!(e.logcumsumexp(0).shape(), vec![2, 0]);
    let (v, _) = e.topk(0, 1, true, true);
    assert_eq!(v.shape(), vec![2, 0]);
}

#[test]
fn cumprod_keeps_int_dtype() {
    let t = Tensor::from_slice_on(&[2i32, 3, 4], &[3], "CPU");
    let r = t.cumprod(0);
    assert_eq!(r.dtype(), DType::INT32);
    assert_eq!(r.to_vec::<i32>(), vec![2, 6, 24]);
}

// ---- bad input ----

#[test]
#[should_panic(expected = "cumprod: axis 2 out of range for shape [2, 3] (ndim 2)")]
fn cumprod_bad_axis() {
    Tensor::zeros_on(&[2, 3], DType::FLOAT32, "CPU").cumprod(2);
}

#[test]
#[should_panic(expected = "cummax: axis -3 out of range for shape [2, 3] (ndim 2)")]
fn cummax_bad_axis() {
    Tensor::zeros_on(&[2, 3], DType::FLOAT32, "CPU").cummax(-3);
}

#[test]
#[should_panic(expected = "cummin: axis 5 out of range for shape [4] (ndim 1)")]
fn cummin_bad_axis() {
    Tensor::zeros_on(&[4], DType::FLOAT32, "CPU").cummin(5);
}

#[test]
#[should_panic(expected = "logcumsumexp: axis 1 out of range for shape [4] (ndim 1)")]
fn logcumsumexp_bad_axis() {
    Tensor::zeros_on(&[4], DType::FLOAT32, "CPU").logcumsumexp(1);
}

#[test]
#[should_panic(expected = "sort: axis 2 out of range for shape [2, 3] (ndim 2)")]
fn sort_bad_dim() {
    Tensor::zeros_on(&[2, 3], DType::FLOAT32, "CPU").sort(2, false);
}

#[test]
#[should_panic(expected = "argsort: axis -2 out of range for shape [3] (ndim 1)")]
fn argsort_bad_dim() {
    Tensor::zeros_on(&[3], DType::FLOAT32, "CPU").argsort(-2, true);
}

#[test]
#[should_panic(
    expected = "topk: k=4 is out of range for dim 1 of size 3 (shape [2, 3]); expected k <= 3"
)]
fn topk_k_too_large() {
    Tensor::zeros_on(&[2, 3], DType::FLOAT32, "CPU").topk(4, 1, true, true);
}

#[test]
#[should_panic(expected = "topk: axis 2 out of range for shape [2, 3] (ndim 2)")]
fn topk_bad_dim() {
    Tensor::zeros_on(&[2, 3], DType::FLOAT32, "CPU").topk(1, 2, true, true);
}

#[test]
#[should_panic(expected = "topk: sorted=false is not supported")]
fn topk_unsorted() {
    Tensor::zeros_on(&[2, 3], DType::FLOAT32, "CPU").topk(1, 1, true, false);
}
