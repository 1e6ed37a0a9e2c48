//! Pad modes, scatter and friends (`crates/tensor/src/scatter.rs`): golden cases from
//! `tests/golden/scatter_cases.json` (numpy float64 references following tinygrad's semantics,
//! by `tests/golden/gen_scatter.py`) on CPU and REF — `pad_mode` (constant/reflect/replicate/
//! circular, negative pads), `scatter` (tensor and scalar src, `add`/`multiply`),
//! `scatter_reduce` (all five reductions, with and without self), `meshgrid`, `masked_select`,
//! and gradients of `pad_mode` and scatter-add w.r.t. src — plus bad-input panics.
//!
//! Tolerance: atol 1e-6, rtol 1e-3. Float inputs are loaded as float32, int ones as int32.
//!
//! Debugging: `SCATTER_FILTER=substr[,substr...]` runs only matching cases; `SCATTER_VERBOSE=1`
//! prints each.

mod common;

use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};

use common::int;
use serde_json::Value;
use tinygrad_tensor::{ConstValue, DType, PadMode, Tensor};

const ATOL: f64 = 1e-6;
const RTOL: f64 = 1e-3;

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected a list, got {v}"))
        .iter()
        .map(int)
        .collect()
}

fn usizes(v: &Value) -> Vec<usize> {
    ints(v).into_iter().map(|x| x as usize).collect()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected a list, got {v}"))
        .iter()
        .map(|x| x.as_f64().expect("a number"))
        .collect()
}

fn make_tensor(spec: &Value, device: &str) -> Tensor {
    let shape = usizes(&spec["shape"]);
    match spec["dtype"].as_str().expect("dtype") {
        "float32" => {
            let v: Vec<f32> = floats(&spec["data"]).iter().map(|&x| x as f32).collect();
            Tensor::from_slice_on(&v, &shape, device)
        }
        "int32" => {
            let v: Vec<i32> = ints(&spec["data"]).iter().map(|&x| x as i32).collect();
            Tensor::from_slice_on(&v, &shape, device)
        }
        other => panic!("unknown dtype {other}"),
    }
}

fn dtype_of(name: &str) -> DType {
    match name {
        "float32" => DType::FLOAT32,
        "int32" => DType::INT32,
        other => panic!("unknown dtype {other}"),
    }
}

fn scalar(v: &Value) -> ConstValue {
    if v.is_i64() {
        ConstValue::Int(int(v))
    } else {
        ConstValue::Float(v.as_f64().expect("a number"))
    }
}

fn padding(a: &Value) -> Vec<(isize, isize)> {
    a["padding"]
        .as_array()
        .expect("padding pairs")
        .iter()
        .map(|p| {
            let p = ints(p);
            (p[0] as isize, p[1] as isize)
        })
        .collect()
}

fn pad_mode(a: &Value) -> PadMode {
    match a["mode"].as_str().expect("mode") {
        "constant" => PadMode::Constant(scalar(&a["value"])),
        "reflect" => PadMode::Reflect,
        "replicate" => PadMode::Replicate,
        "circular" => PadMode::Circular,
        other => panic!("unknown pad mode {other}"),
    }
}

fn run_op(case: &Value, device: &str) -> Vec<Tensor> {
    let inputs: Vec<Tensor> = case["inputs"]
        .as_array()
        .expect("inputs")
        .iter()
        .map(|s| make_tensor(s, device))
        .collect();
    let a = &case["args"];
    let dim = || int(&a["dim"]) as isize;
    let index = || make_tensor(&a["index"], device);
    let reduce = || a["reduce"].as_str().expect("reduce").to_string();
    let include_self = || a["include_self"].as_bool().expect("include_self");
    let x = &inputs[0];
    match case["op"].as_str().expect("op") {
        "pad_mode" => vec![x.pad_mode(&padding(a), pad_mode(a))],
        "scatter" => {
            let r = a["reduce"].as_str();
            if a["value"].is_null() {
                vec![x.scatter_with(dim(), &index(), &inputs[1], r)]
            } else {
                vec![x.scatter_with(dim(), &index(), scalar(&a["value"]), r)]
            }
        }
        "scatter_reduce" => {
            vec![x.scatter_reduce(dim(), &index(), &inputs[1], &reduce(), include_self())]
        }
        "meshgrid" => {
            let refs: Vec<&Tensor> = inputs.iter().collect();
            Tensor::meshgrid(&refs, a["indexing"].as_str().expect("indexing"))
        }
        "masked_select" => {
            let mask = make_tensor(&a["mask"], device).ne(0);
            vec![x.masked_select(&mask)]
        }
        "grad_pad" => {
            let x = x.clone().requires_grad(true);
            let y = x
                .pad_mode(&padding(a), pad_mode(a))
                .mul(&inputs[1])
                .sum(None);
            y.gradient(&[&x])
        }
        "grad_scatter_reduce" => {
            let src = inputs[1].clone().requires_grad(true);
            let y = x
                .scatter_reduce(dim(), &index(), &src, &reduce(), include_self())
                .mul(&inputs[2])
                .sum(None);
            y.gradient(&[&src])
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
        let want_dt = dtype_of(out["dtype"].as_str().expect("dtype"));
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
            .filter(|&i| (vals[i] - exp[i]).abs() > ATOL + RTOL * exp[i].abs() || vals[i].is_nan())
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

fn run_suite(device: &str) {
    common::install_quiet_hook();
    let filter: Vec<String> = std::env::var("SCATTER_FILTER")
        .map(|s| s.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let verbose = std::env::var("SCATTER_VERBOSE").is_ok_and(|v| v == "1");
    let cases = common::load_cases("scatter_cases.json");
    let mut failures = Vec::new();
    let mut ran = 0;
    for case in &cases {
        let name = case["name"].as_str().expect("name");
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
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
    assert!(ran > 0, "no scatter cases ran");
    assert!(
        failures.is_empty(),
        "{device}: {} of {ran} scatter cases failed:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
    eprintln!("{device}: {ran} scatter cases passed");
}

#[test]
fn scatter_golden_cpu() {
    run_suite("CPU");
}

#[test]
fn scatter_golden_ref() {
    run_suite("REF");
}

/// The suite on `WEBGPU` (in CI the software Vulkan driver). Without an adapter it is skipped,
/// saying why — unless `TINYGRAD_REQUIRE_WEBGPU=1` (CI), which makes a missing adapter fail.
#[test]
fn scatter_golden_webgpu() {
    common::on_webgpu("scatter_golden_webgpu", run_suite);
}

// ---- API details ----

fn grid() -> Tensor {
    Tensor::arange_on(0.0, 12.0, 1.0, DType::FLOAT32, "CPU").reshape(&[3, 4])
}

fn idx(v: &[i32], shape: &[usize]) -> Tensor {
    Tensor::from_slice_on(v, shape, "CPU")
}

#[test]
fn pad_mode_constant_matches_pad() {
    let t = grid();
    let a = t.pad_mode(&[(1, 0), (0, 2)], PadMode::Constant(3.0.into()));
    let b = t.pad(&[(1, 0), (0, 2)], 3.0);
    assert_eq!(a.to_vec::<f32>(), b.to_vec::<f32>());
}

#[test]
fn scatter_int64_index_and_bool_dtype() {
    let t = Tensor::from_slice_on(&[false; 4], &[4], "CPU");
    let i = Tensor::from_slice_on(&[3i64, 1], &[2], "CPU");
    let r = t.scatter(0, &i, true);
    assert_eq!(r.dtype(), DType::BOOL);
    assert_eq!(r.to_vec::<bool>(), vec![false, true, false, true]);
}

// ---- bad input ----

#[test]
#[should_panic(
    expected = "pad: reflect padding (3, 0) should be less than the input size 3 for dim 0 (shape [3, 4]"
)]
fn reflect_pad_too_large() {
    grid().pad_mode(&[(3, 0), (0, 0)], PadMode::Reflect);
}

#[test]
#[should_panic(expected = "pad: circular padding [(0, 0), (0, 5)] wraps around more than once")]
fn circular_pad_wraps_twice() {
    grid().pad_mode(&[(0, 0), (0, 5)], PadMode::Circular);
}

// negative circular pads shrink first (tinygrad's `_pad_circular`; see edge_semantics.rs): the
// wrap is checked against what is left, 2 of 4 columns here
#[test]
#[should_panic(expected = "pad: circular padding [(0, 0), (-2, 3)] wraps around more than once")]
fn circular_pad_negative_then_wraps_twice() {
    grid().pad_mode(&[(0, 0), (-2, 3)], PadMode::Circular);
}

#[test]
#[should_panic(expected = "pad: padding length is improper, 1 pairs [(1, 1)] for shape [3, 4]")]
fn pad_mode_wrong_length() {
    grid().pad_mode(&[(1, 1)], PadMode::Replicate);
}

#[test]
#[should_panic(expected = "pad: negative padding (-2, -2) removes more than the size 3 of dim 0")]
fn pad_mode_negative_too_large() {
    grid().pad_mode(&[(-2, -2), (0, 0)], PadMode::Constant(0.into()));
}

#[test]
#[should_panic(expected = "scatter: self dtype float32 must equal src dtype int32")]
fn scatter_dtype_mismatch() {
    let src = Tensor::from_slice_on(&[1i32, 2], &[1, 2], "CPU");
    grid().scatter(0, &idx(&[0, 1], &[1, 2]), &src);
}

#[test]
#[should_panic(expected = "scatter: index shape [4, 1] must not exceed src shape [2, 2]")]
fn scatter_index_larger_than_src() {
    let src = Tensor::zeros_on(&[2, 2], DType::FLOAT32, "CPU");
    grid().scatter(0, &idx(&[0, 1, 2, 0], &[4, 1]), &src);
}

#[test]
#[should_panic(expected = "scatter: self, index and src must have the same number of dims")]
fn scatter_ndim_mismatch() {
    let src = Tensor::zeros_on(&[2], DType::FLOAT32, "CPU");
    grid().scatter(0, &idx(&[0, 1], &[2]), &src);
}

#[test]
#[should_panic(expected = "scatter: a tensor src is not supported with reduce Some(\"add\")")]
fn scatter_tensor_src_with_reduce() {
    let src = Tensor::zeros_on(&[1, 2], DType::FLOAT32, "CPU");
    grid().scatter_with(0, &idx(&[0, 1], &[1, 2]), &src, Some("add"));
}

#[test]
#[should_panic(expected = "scatter: reduce Some(\"max\") must be None, 'multiply' or 'add'")]
fn scatter_bad_reduce() {
    grid().scatter_with(0, &idx(&[0, 1], &[1, 2]), 1.0, Some("max"));
}

#[test]
#[should_panic(expected = "scatter_reduce: reduce \"max\" must be one of")]
fn scatter_reduce_bad_reduce() {
    let src = Tensor::zeros_on(&[1, 2], DType::FLOAT32, "CPU");
    grid().scatter_reduce(0, &idx(&[0, 1], &[1, 2]), &src, "max", true);
}

#[test]
#[should_panic(expected = "scatter_reduce: index must be an integer tensor, got float32")]
fn scatter_reduce_float_index() {
    let src = Tensor::zeros_on(&[1, 2], DType::FLOAT32, "CPU");
    let i = Tensor::zeros_on(&[1, 2], DType::FLOAT32, "CPU");
    grid().scatter_reduce(0, &i, &src, "sum", true);
}

#[test]
#[should_panic(expected = "scatter: axis 2 out of range for shape [3, 4]")]
fn scatter_dim_out_of_range() {
    grid().scatter(2, &idx(&[0, 1], &[1, 2]), 1.0);
}

#[test]
#[should_panic(expected = "meshgrid: indexing must be \"ij\" or \"xy\", got \"yx\"")]
fn meshgrid_bad_indexing() {
    let t = Tensor::from_slice_on(&[1.0f32, 2.0], &[2], "CPU");
    Tensor::meshgrid(&[&t, &t], "yx");
}

#[test]
#[should_panic(expected = "masked_select: expects a bool mask, got int32")]
fn masked_select_int_mask() {
    grid().masked_select(&idx(&[1, 0, 1, 0], &[4]));
}
