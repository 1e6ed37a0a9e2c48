//! Indexing and selection (`crates/tensor/src/indexing.rs`): golden cases from
//! `tests/golden/indexing_cases.json` (numpy float64 references following tinygrad's semantics,
//! by `tests/golden/gen_indexing.py`) on CPU and REF — getitem, gather, masked_fill, tril/triu,
//! roll, repeat, split, chunk, and gradients of getitem/gather — plus bad-index errors.
//!
//! Tolerance: atol 1e-6, rtol 1e-3. Float inputs are loaded as float32, int ones as int32.
//!
//! Debugging: `IDX_FILTER=substr[,substr...]` runs only matching cases; `IDX_VERBOSE=1` prints
//! each.

mod common;

use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};

use common::int;
use serde_json::Value;
use tinygrad_tensor::{DType, Idx, SplitSizes, Tensor};

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

fn isizes(v: &Value) -> Vec<isize> {
    ints(v).into_iter().map(|x| x as isize).collect()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected a list, got {v}"))
        .iter()
        .map(|x| x.as_f64().expect("a number"))
        .collect()
}

fn make_input(spec: &Value, device: &str) -> Tensor {
    let shape = usizes(&spec["shape"]);
    match spec["dtype"].as_str().expect("dtype") {
        "float32" => {
            let v: Vec<f32> = floats(&spec["data"]).iter().map(|&x| x as f32).collect();
            Tensor::from_slice_on(&v, &shape, device)
        }
        "int32" => int_tensor(spec, device),
        other => panic!("unknown dtype {other}"),
    }
}

fn int_tensor(spec: &Value, device: &str) -> Tensor {
    let shape = usizes(&spec["shape"]);
    let v: Vec<i32> = ints(&spec["data"]).iter().map(|&x| x as i32).collect();
    Tensor::from_slice_on(&v, &shape, device)
}

fn opt(v: &Value) -> Option<isize> {
    if v.is_null() {
        None
    } else {
        Some(int(v) as isize)
    }
}

fn make_idx(spec: &Value, device: &str) -> Idx {
    let o = spec.as_object().expect("an index object");
    let (k, v) = o.iter().next().expect("one key");
    match k.as_str() {
        "int" => Idx::Int(int(v) as isize),
        "slice" => {
            let a = v.as_array().expect("slice triple");
            Idx::slice(opt(&a[0]), opt(&a[1]), int(&a[2]) as isize)
        }
        "newaxis" => Idx::NewAxis,
        "ellipsis" => Idx::Ellipsis,
        "tensor" => Idx::Tensor(int_tensor(v, device)),
        "list" => Idx::List(isizes(v)),
        other => panic!("unknown index kind {other}"),
    }
}

fn run_op(case: &Value, device: &str) -> Vec<Tensor> {
    let x = make_input(&case["input"], device);
    let a = &case["args"];
    let idx = || -> Vec<Idx> {
        a["idx"]
            .as_array()
            .expect("idx list")
            .iter()
            .map(|s| make_idx(s, device))
            .collect()
    };
    match case["op"].as_str().expect("op") {
        "getitem" => vec![x.getitem(&idx())],
        "setitem" => {
            let v = &a["value"];
            if v.is_object() {
                x.setitem(&idx(), make_input(&v["tensor"], device));
            } else if v.is_i64() {
                x.setitem(&idx(), int(v) as i32);
            } else {
                x.setitem(&idx(), v.as_f64().expect("value"));
            }
            vec![x]
        }
        "gather" => vec![x.gather(int(&a["dim"]) as isize, &int_tensor(&a["index"], device))],
        "masked_fill" => {
            let mask = int_tensor(&a["mask"], device).ne(0);
            let v = &a["value"];
            vec![if v.is_i64() {
                x.masked_fill(&mask, int(v) as i32)
            } else {
                x.masked_fill(&mask, v.as_f64().expect("value"))
            }]
        }
        "tril" => vec![x.tril(int(&a["diagonal"]) as isize)],
        "triu" => vec![x.triu(int(&a["diagonal"]) as isize)],
        "roll" => vec![x.roll(&isizes(&a["shifts"]), &isizes(&a["dims"]))],
        "repeat" => vec![x.repeat(&usizes(&a["repeats"]))],
        "split" => {
            let sizes = if a["sizes"].is_array() {
                SplitSizes::Sizes(usizes(&a["sizes"]))
            } else {
                SplitSizes::Size(int(&a["sizes"]) as usize)
            };
            x.split(sizes, int(&a["dim"]) as isize)
        }
        "chunk" => x.chunk(int(&a["chunks"]) as usize, int(&a["dim"]) as isize),
        "grad_getitem" => {
            let x = x.requires_grad(true);
            let y = x.getitem(&idx()).sum(None);
            y.gradient(&[&x])
        }
        "grad_gather" => {
            let x = x.requires_grad(true);
            let i = int_tensor(&a["index"], device);
            let y = x.gather(int(&a["dim"]) as isize, &i).sum(None);
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
    let in_dt = case["input"]["dtype"].as_str().expect("dtype");
    for (k, (out, t)) in outs.iter().zip(got).enumerate() {
        if t.device() != device {
            return Err(format!("output {k} on {}, expected {device}", t.device()));
        }
        let grad = case["op"].as_str().is_some_and(|o| o.starts_with("grad"));
        let want_dt = if in_dt == "int32" {
            DType::INT32
        } else {
            DType::FLOAT32
        };
        if !grad && t.dtype() != want_dt {
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
    let filter: Vec<String> = std::env::var("IDX_FILTER")
        .map(|s| s.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let verbose = std::env::var("IDX_VERBOSE").is_ok_and(|v| v == "1");
    let cases = common::load_cases("indexing_cases.json");
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
    assert!(ran > 0, "no indexing cases ran");
    assert!(
        failures.is_empty(),
        "{device}: {} of {ran} indexing cases failed:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
    eprintln!("{device}: {ran} indexing cases passed");
}

#[test]
fn indexing_golden_cpu() {
    run_suite("CPU");
}

#[test]
fn indexing_golden_ref() {
    run_suite("REF");
}

/// The suite on `WEBGPU` (in CI the software Vulkan driver). Without an adapter it is skipped,
/// saying why — unless `TINYGRAD_REQUIRE_WEBGPU=1` (CI), which makes a missing adapter fail.
#[test]
fn indexing_golden_webgpu() {
    common::on_webgpu("indexing_golden_webgpu", run_suite);
}

// ---- API conveniences ----

fn grid() -> Tensor {
    Tensor::arange_on(0.0, 12.0, 1.0, DType::INT32, "CPU").reshape(&[3, 4])
}

#[test]
fn idx_conversions() {
    let t = grid();
    let r = t.getitem(&[(1isize..3).into(), (..).into()]);
    assert_eq!(r.to_vec::<i32>(), (4..12).collect::<Vec<i32>>());
    let r = t.getitem(&[(-1isize).into(), (2isize..).into()]);
    assert_eq!(r.to_vec::<i32>(), vec![10, 11]);
    let r = t.getitem(&[Idx::Ellipsis, (..2isize).into()]);
    assert_eq!(r.shape(), vec![3, 2]);
    let r = t.getitem(&[vec![2isize, -3].into()]);
    assert_eq!(r.to_vec::<i32>(), vec![8, 9, 10, 11, 0, 1, 2, 3]);
    let i = Tensor::from_slice_on(&[1i64, 0], &[2], "CPU");
    assert_eq!(
        t.getitem(&[(&i).into(), 0isize.into()]).to_vec::<i32>(),
        vec![4, 0]
    );
    let parts = t.chunk(2, 1);
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[1].to_vec::<i32>(), vec![2, 3, 6, 7, 10, 11]);
}

#[test]
fn basic_getitem_is_a_view() {
    let t = grid();
    let v = t.getitem(&[Idx::step(-2), Idx::Int(1), Idx::NewAxis]);
    assert_eq!(v.shape(), vec![2, 1]);
    assert_eq!(v.to_vec::<i32>(), vec![9, 1]);
    // a reversed view of a lazy tensor fuses into the kernel computing it
    assert!(Tensor::schedule(&[&grid().getitem(&[Idx::step(-1)])]).len() <= 1);
}

// ---- bad indices ----

#[test]
#[should_panic(expected = "getitem: index 3 is out of bounds for dim 0 with size 3 (shape [3, 4])")]
fn int_index_out_of_range() {
    grid().getitem(&[Idx::Int(3)]);
}

#[test]
#[should_panic(
    expected = "getitem: index -5 is out of bounds for dim 1 with size 4 (shape [3, 4])"
)]
fn negative_int_index_out_of_range() {
    grid().getitem(&[Idx::all(), Idx::Int(-5)]);
}

#[test]
#[should_panic(expected = "getitem: index 0 is out of bounds for dim 1 with size 0 (shape [2, 0])")]
fn int_index_into_empty_dim() {
    Tensor::zeros_on(&[2, 0], DType::FLOAT32, "CPU").getitem(&[Idx::Int(1), Idx::Int(0)]);
}

#[test]
fn try_getitem_errors() {
    let t = grid();
    let e = |idx: &[Idx]| t.try_getitem(idx).expect_err("an error").to_string();
    assert_eq!(
        e(&[Idx::Int(-4)]),
        "getitem: index -4 is out of bounds for dim 0 with size 3 (shape [3, 4])"
    );
    assert!(e(&[Idx::step(0)]).contains("step cannot be 0"));
    assert!(e(&[Idx::Ellipsis, Idx::Ellipsis]).contains("single ellipsis"));
    assert!(e(&[Idx::Int(0), Idx::Int(0), Idx::Int(0)]).contains("too many indices (3)"));
    let f = Tensor::from_slice_on(&[0.0f32], &[1], "CPU");
    assert!(e(&[Idx::Tensor(f)]).contains("index tensor dtype float"));
    let (a, b) = (
        Tensor::from_slice_on(&[0i32, 1], &[2], "CPU"),
        Tensor::from_slice_on(&[0i32, 1, 2], &[3], "CPU"),
    );
    assert!(e(&[a.into(), b.into()]).contains("cannot broadcast"));
    assert!(
        t.try_getitem(&[Idx::NewAxis, Idx::Int(2), Idx::Int(3)])
            .is_ok()
    );
}

#[test]
#[should_panic(
    expected = "gather: index shape [2] must have as many dims as the input shape [3, 4]"
)]
fn gather_dims_mismatch() {
    let i = Tensor::from_slice_on(&[0i32, 1], &[2], "CPU");
    grid().gather(0, &i);
}

#[test]
#[should_panic(
    expected = "split: sizes [1, 1] must add up to 3, the size of dim 0 of shape [3, 4]"
)]
fn split_sizes_mismatch() {
    grid().split([1, 1], 0);
}

#[test]
#[should_panic(expected = "tril: needs at least 2 dims, got shape [3]")]
fn tril_needs_2_dims() {
    Tensor::zeros_on(&[3], DType::FLOAT32, "CPU").tril(0);
}

#[test]
#[should_panic(expected = "repeat: 1 repeats [2] for shape [3, 4] (needs at least 2)")]
fn repeat_too_few() {
    grid().repeat(&[2]);
}
