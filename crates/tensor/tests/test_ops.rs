//! tinygrad's own op tests, ported: every `helper_test_op` / `helper_test_exception` call of
//! tinygrad's `test/backend/test_ops.py` (commit a9069c17), replayed on our API and compared with
//! torch — forward and backward, with each call's own tolerances. The calls were traced and the
//! torch results computed by `tests/golden/gen_test_ops.py` into
//! `tests/golden/test_ops_cases.json`; a case is named after its test and the call's position in
//! it (`TestOps.test_gelu#2` is the second call of `test_gelu`), so a failure points at the
//! tinygrad test.
//!
//! An op case passes when our output has torch's shape and dtype and its values are within
//! `atol + rtol * |expected|` (exact for ints and bools; NaN where torch has NaN), and the same
//! for the gradient of `out.sum()` with respect to every input (`grad_atol`, `grad_rtol`). Large
//! expected values keep an evenly spaced sample of 1,024 elements plus the sum and the sum of
//! magnitudes of all of them, both checked. An exception case passes when the call tinygrad
//! rejects panics here too (not an earlier one) — at graph building or when realized.
//!
//! A call that cannot be written against the Rust signatures (a keyword the function lacks, a
//! negative `usize`) is rejected by the replay with a `rust signature:` message and counted
//! apart; every other rejection must come from the op, naming it.
//!
//! The suite runs on `CPU`, `REF` and `WEBGPU` (large cases on `CPU` only, see
//! [`too_large_to_interpret`]). Differences we keep are listed in
//! [`KNOWN_DIFFERENCES`] with their reason; a listed case that starts to pass fails the suite
//! (so the list stays true). `TEST_OPS_FILTER=substr[,substr]` runs only matching cases,
//! `TEST_OPS_VERBOSE=1` prints each case name first.

mod common;

#[path = "test_ops/dispatch.rs"]
mod dispatch;
#[path = "test_ops/reduce_nn.rs"]
mod reduce_nn;
#[path = "test_ops/values.rs"]
mod values;

use std::panic::{AssertUnwindSafe, catch_unwind};

pub use dispatch::number;
use dispatch::{Out, Trace};
use serde_json::Value;
use tinygrad_tensor::{Axis, DType, Tensor};
use values::{Mt19937, bytes_to_f64, typed_parts, typed_tensor};

/// Cases whose difference from torch we keep, with the reason (a deliberate departure written
/// in `docs/API.md`, or a bug left open). The devices it applies to: `None` for every device.
const KNOWN_DIFFERENCES: &[(&str, Option<&[&str]>, &str)] = &[
    // var/std over one element with correction 1: the value is NaN (0 * inf) everywhere, and
    // on WEBGPU the gradient is 0 instead of NaN. WGSL does not promise IEEE arithmetic on
    // infinities (the shader compiler may assume finite values), so `0 * inf` in the gradient
    // comes out 0 on the software Vulkan driver; CPU and REF give torch's NaN.
    (
        "TestOps.test_std_one_in_axis#1",
        Some(&["WEBGPU"]),
        WGSL_INF,
    ),
    (
        "TestOps.test_std_one_in_axis#2",
        Some(&["WEBGPU"]),
        WGSL_INF,
    ),
    (
        "TestOps.test_var_one_in_axis#1",
        Some(&["WEBGPU"]),
        WGSL_INF,
    ),
];

const WGSL_INF: &str = "WGSL's arithmetic on infinities is not IEEE: 0 * inf is 0 in the gradient";

/// Ops whose work grows faster than their output (a reduction or window per element).
const SUPERLINEAR_OPS: &[&str] = &[
    "matmul",
    "dot",
    "__matmul__",
    "__rmatmul__",
    "einsum",
    "conv2d",
    "conv_transpose2d",
    "scaled_dot_product_attention",
    "cumprod",
    "cumsum",
    "logcumsumexp",
    "cummax",
    "cummin",
    "sort",
    "argsort",
    "topk",
    "avg_pool2d",
    "max_pool2d",
    "max_unpool2d",
    "interpolate",
];

/// Whether a case is too large for `REF` and `WEBGPU` (the software Vulkan driver in CI): a tensor of more than 65,536
/// elements anywhere, or one of more than 4,096 going into or out of a [`SUPERLINEAR_OPS`] op.
/// `REF` runs one element at a time (`test_big_gemm` alone takes a minute there, a large
/// attention two), so these run on `CPU` only; every other case runs on every device.
fn too_large_to_interpret(case: &Value) -> bool {
    let nodes = case["nodes"].as_array().map_or(&[][..], Vec::as_slice);
    let numel = |n: &Value| -> usize {
        n["shape"].as_array().map_or(1, |s| {
            s.iter().map(|x| x.as_u64().unwrap_or(1) as usize).product()
        })
    };
    nodes.iter().any(|n| {
        let op = n["op"].as_str().unwrap_or("");
        if numel(n) > 65_536 {
            return true;
        }
        if !SUPERLINEAR_OPS.contains(&op) {
            return false;
        }
        let operands = n["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.get("t"))
            .chain(std::iter::once(&n["self"]));
        numel(n) > 4096
            || operands
                .filter_map(Value::as_u64)
                .any(|i| numel(&nodes[i as usize]) > 4096)
    })
}

/// The case file: one JSON object per case.
fn cases() -> &'static [Value] {
    static CASES: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    CASES.get_or_init(|| common::load_cases("test_ops_cases.json"))
}

/// The inputs of a case on `device`: numpy's stream after `np.random.seed(0)`, or stored values.
fn inputs(case: &Value, device: &str) -> Result<Vec<Tensor>, String> {
    let mut rng = Mt19937::new(0);
    let mut out = Vec::new();
    for (k, desc) in case["inputs"]
        .as_array()
        .expect("inputs")
        .iter()
        .enumerate()
    {
        let t = if let Some(v) = desc.get("vals") {
            typed_tensor(v, device)
        } else {
            let lo_hi = desc["uniform"].as_array().expect("uniform");
            let shape: Vec<usize> = desc["shape"]
                .as_array()
                .expect("shape")
                .iter()
                .map(|s| s.as_u64().expect("size") as usize)
                .collect();
            let n = shape.iter().product();
            let data = rng.uniform_f32(number(&lo_hi[0]), number(&lo_hi[1]), n);
            for (i, s) in desc["sample"]
                .as_array()
                .expect("sample")
                .iter()
                .enumerate()
            {
                if data[i] != number(s) as f32 {
                    return Err(format!(
                        "input {k}: drew {} at {i}, numpy drew {s} (the MT19937 stream differs)",
                        data[i]
                    ));
                }
            }
            Tensor::from_slice_on(&data, &shape, device)
        };
        out.push(t);
    }
    Ok(out)
}

/// Replays a case's nodes, returning the result of its output node. Checks each node's shape
/// against the one tinygrad computed, so a difference is reported where it starts.
fn replay(case: &Value, inputs: &[Tensor], device: &str) -> Result<Tensor, String> {
    let nodes = case["nodes"].as_array().expect("nodes");
    let mut tr = Trace {
        nodes,
        results: vec![None; nodes.len()],
        inputs,
        device,
    };
    for (i, node) in nodes.iter().enumerate() {
        let out = tr.eval(i);
        if let (Out::T(t), Some(shape)) = (&out, node["shape"].as_array()) {
            let want: Vec<usize> = shape
                .iter()
                .map(|s| s.as_u64().unwrap_or(0) as usize)
                .collect();
            if t.shape() != want {
                return Err(format!(
                    "node {i} ({}) has shape {:?}, tinygrad's has {want:?}",
                    node["op"],
                    t.shape()
                ));
            }
        }
        tr.results[i] = Some(out);
    }
    let root = case["output"].as_u64().expect("output") as usize;
    match tr.results[root].take() {
        Some(Out::T(t)) => Ok(t),
        _ => Err("the output node is not a tensor".into()),
    }
}

/// Compares `got` with a stored expected value (`what` names it in the message).
fn compare(what: &str, got: &Tensor, want: &Value, atol: f64, rtol: f64) -> Result<(), String> {
    let (dtype, shape, bytes) = typed_parts(want);
    if got.shape() != shape {
        return Err(format!(
            "{what}: shape {:?}, torch's {shape:?}",
            got.shape()
        ));
    }
    if got.dtype() != dtype {
        return Err(format!("{what}: dtype {}, torch's {dtype}", got.dtype()));
    }
    let all = got.to_f64_vec();
    let expected = bytes_to_f64(&bytes, dtype);
    let float = dtype.is_float();
    let close = |g: f64, w: f64| {
        if float {
            g == w
                || (g.is_nan() && w.is_nan())
                || (g.is_finite() && w.is_finite() && (g - w).abs() <= atol + rtol * w.abs())
        } else {
            g == w
        }
    };
    let sampled = want.get("sample_of").is_some();
    let picks: Vec<usize> = if sampled {
        let (n, k) = (all.len(), expected.len());
        (0..k)
            .map(|i| ((i as f64) * ((n - 1) as f64 / (k - 1) as f64)).round() as usize)
            .collect()
    } else {
        (0..all.len()).collect()
    };
    let mut bad = Vec::new();
    for (j, &i) in picks.iter().enumerate() {
        if !close(all[i], expected[j]) {
            bad.push(i);
        }
    }
    if !bad.is_empty() {
        let shown: Vec<String> = bad
            .iter()
            .take(6)
            .map(|&i| {
                let j = picks.iter().position(|&p| p == i).expect("picked");
                format!("[{i}] {} vs torch {}", all[i], expected[j])
            })
            .collect();
        return Err(format!(
            "{what}: {} of {} compared values differ (atol {atol}, rtol {rtol}): {}",
            bad.len(),
            picks.len(),
            shown.join(", ")
        ));
    }
    if sampled {
        // every element within atol + rtol*|x| bounds the sums' difference by n*atol + rtol*sum|x|
        let (sum, abs_sum) = (number(&want["sum"]), number(&want["abs_sum"]));
        let got_sum: f64 = all.iter().sum();
        let n = all.len() as f64;
        let ok = if float {
            (got_sum.is_nan() && sum.is_nan())
                || got_sum == sum
                || (got_sum - sum).abs() <= n * atol + rtol * abs_sum + 1e-9 * abs_sum
        } else {
            got_sum == sum
        };
        if !ok {
            return Err(format!(
                "{what}: sum of all {n} values {got_sum}, torch's {sum}"
            ));
        }
    }
    Ok(())
}

/// One op case: forward, then the gradients of `out.sum()`.
fn run_op_case(case: &Value, device: &str) -> Result<(), String> {
    let xs = inputs(case, device)?;
    let out = replay(case, &xs, device)?;
    let f = |k: &str| case[k].as_f64().expect("tolerance");
    compare("forward", &out, &case["out"], f("atol"), f("rtol"))?;
    let Some(grads) = case.get("grads").and_then(Value::as_array) else {
        return Ok(());
    };
    // a fresh forward pass, as tinygrad's helper does after realizing the first
    let xs: Vec<Tensor> = xs.iter().map(|x| x.detach().requires_grad(true)).collect();
    let out = replay(case, &xs, device)?;
    let targets: Vec<&Tensor> = xs.iter().collect();
    let got = out.sum(Axis::All).gradient(&targets);
    for (i, (g, want)) in got.iter().zip(grads).enumerate() {
        if want.is_null() {
            continue; // torch: the output does not depend on this input
        }
        compare(
            &format!("gradient {i}"),
            g,
            want,
            f("grad_atol"),
            f("grad_rtol"),
        )?;
    }
    Ok(())
}

/// How a call tinygrad rejects was rejected here.
enum Rejected {
    /// The op panicked with a message naming it.
    ByOp,
    /// The call cannot be written in Rust (a negative `usize`, a keyword the function lacks, a
    /// padding form the Rust function does not take): the replay rejects it.
    BySignature,
}

/// One exception case: every node before the one tinygrad rejects runs; that one panics, with
/// a message naming the op.
fn run_exception_case(case: &Value, device: &str) -> Result<Rejected, String> {
    let xs = inputs(case, device)?;
    let nodes = case["nodes"].as_array().expect("nodes");
    let last = nodes.len() - 1;
    let mut tr = Trace {
        nodes,
        results: vec![None; nodes.len()],
        inputs: &xs,
        device,
    };
    for (i, node) in nodes.iter().enumerate().take(last) {
        let out = catch_unwind(AssertUnwindSafe(|| tr.eval(i))).map_err(|e| {
            format!(
                "node {i} ({}) panicked before the rejected call: {}",
                node["op"],
                common::panic_message(&*e)
            )
        })?;
        tr.results[i] = Some(out);
    }
    let op = nodes[last]["op"].as_str().expect("op");
    let res = catch_unwind(AssertUnwindSafe(|| match tr.eval(last) {
        Out::T(t) => {
            t.realize();
        }
        Out::Many(ts) => {
            for t in ts {
                t.realize();
            }
        }
    }));
    match res {
        Err(e) => {
            let msg = common::panic_message(&*e);
            let name = op.trim_matches('_');
            if std::env::var("TEST_OPS_MESSAGES").is_ok() {
                eprintln!(
                    "MESSAGE {} [{name}] {}",
                    case["name"],
                    msg.replace('\n', " ")
                );
            }
            if msg.starts_with("rust signature:") {
                Ok(Rejected::BySignature)
            } else if msg.contains(name) {
                Ok(Rejected::ByOp)
            } else {
                Err(format!(
                    "{op} panicked as tinygrad raises, but the message does not name {name}: {msg}"
                ))
            }
        }
        Ok(()) => Err(format!(
            "{op} accepted a call tinygrad rejects with {} ({})",
            case["expected"],
            case["tinygrad_message"].as_str().unwrap_or("")
        )),
    }
}

/// The whole suite on `device`: every case runs (panics included); failures not listed in
/// [`KNOWN_DIFFERENCES`], and listed ones that pass, fail the test together.
fn run_suite(device: &str) {
    common::install_quiet_hook();
    let filter: Vec<String> = std::env::var("TEST_OPS_FILTER")
        .map(|f| f.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let verbose = std::env::var("TEST_OPS_VERBOSE").is_ok_and(|v| v == "1");
    let (mut passed, mut known, mut skipped, mut by_signature) = (0usize, 0usize, 0usize, 0usize);
    let mut cpu_only = 0usize;
    let mut failures = Vec::new();
    for case in cases() {
        let name = case["name"].as_str().expect("name");
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let kind = case["kind"].as_str().expect("kind");
        if kind == "skip" {
            skipped += 1;
            continue;
        }
        if matches!(device, "REF" | "WEBGPU") && too_large_to_interpret(case) {
            cpu_only += 1;
            continue;
        }
        if verbose {
            eprintln!("{device}: {name}");
        }
        let started = std::time::Instant::now();
        common::set_in_case(true);
        let res = catch_unwind(AssertUnwindSafe(|| match kind {
            "op" => run_op_case(case, device).map(|()| false),
            _ => run_exception_case(case, device).map(|r| matches!(r, Rejected::BySignature)),
        }));
        common::set_in_case(false);
        let res = match res {
            Ok(r) => r,
            Err(e) => Err(format!("panicked: {}", common::panic_message(&*e))),
        };
        if verbose {
            eprintln!(
                "{device}: {name} took {:.3} s",
                started.elapsed().as_secs_f64()
            );
        }
        let listed = KNOWN_DIFFERENCES
            .iter()
            .find(|(n, devs, _)| *n == name && devs.is_none_or(|d| d.contains(&device)));
        match (res, listed) {
            (Ok(sig), None) => {
                passed += 1;
                by_signature += usize::from(sig);
            }
            (Ok(_), Some(_)) => failures.push(format!(
                "{name}: passes now; remove it from KNOWN_DIFFERENCES"
            )),
            (Err(_), Some(_)) => known += 1,
            (Err(e), None) => failures.push(format!("{name}: {}", truncate(&e))),
        }
    }
    eprintln!(
        "{device}: {passed} test_ops cases passed ({by_signature} of them calls tinygrad rejects that Rust's signatures cannot express), {known} known differences, {} failed, {cpu_only} large cases left to CPU, {skipped} not replayable (torch raised when generating)",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{device}: {} test_ops cases failed:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}

fn truncate(s: &str) -> String {
    s.chars().take(600).collect()
}

#[test]
fn test_ops_cpu() {
    run_suite("CPU");
}

#[test]
fn test_ops_ref() {
    run_suite("REF");
}

#[test]
fn test_ops_webgpu() {
    common::on_webgpu("test_ops_webgpu", run_suite);
}

/// The suite on the device named by `DEV` (`DEV=CUDA` in `scripts/gpu-check.sh`), every case.
/// Skipped, saying so, when `DEV` is unset or names a device run above; fails when that device
/// is missing.
#[test]
fn test_ops_dev() {
    common::on_dev_device("test_ops_dev", &["CPU", "REF", "WEBGPU"], run_suite);
}

/// The input generator is numpy's: the first draws after `np.random.seed(0)`.
#[test]
fn mt19937_matches_numpy() {
    let mut rng = Mt19937::new(0);
    // np.random.seed(0); np.random.random_sample(3)
    let want = [
        0.548_813_503_927_324_8,
        0.715_189_366_372_419_5,
        0.602_763_376_071_643_9,
    ];
    for w in want {
        assert_eq!(rng.next_f64(), w);
    }
}

/// The comparison rejects what it should (a checker that cannot fail tests nothing).
#[test]
fn compare_rejects_mismatches() {
    let typed = |dtype: &str, shape: &str, bytes: &[u8]| -> Value {
        let b64 = {
            // tiny base64 encoder for the test
            const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            let mut s = String::new();
            for c in bytes.chunks(3) {
                let n = c.len();
                let v = (u32::from(c[0]) << 16)
                    | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
                    | u32::from(*c.get(2).unwrap_or(&0));
                for i in 0..4 {
                    if i <= n {
                        s.push(T[((v >> (18 - 6 * i)) & 63) as usize] as char);
                    } else {
                        s.push('=');
                    }
                }
            }
            s
        };
        serde_json::from_str(&format!(
            r#"{{"dtype":"{dtype}","shape":{shape},"b64":"{b64}"}}"#
        ))
        .expect("json")
    };
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let want = typed("float32", "[3]", &f32s(&[1.0, f32::NAN, f32::NEG_INFINITY]));
    let t = |v: &[f32]| Tensor::from_slice_on(v, &[v.len()], "REF");
    assert!(
        compare(
            "x",
            &t(&[1.0009, f32::NAN, f32::NEG_INFINITY]),
            &want,
            1e-6,
            1e-3
        )
        .is_ok()
    );
    assert!(
        compare(
            "x",
            &t(&[1.0011, f32::NAN, f32::NEG_INFINITY]),
            &want,
            1e-6,
            1e-3
        )
        .is_err()
    );
    assert!(compare("x", &t(&[1.0, 0.0, f32::NEG_INFINITY]), &want, 1e-6, 1e-3).is_err());
    assert!(compare("x", &t(&[1.0, f32::NAN, -3e38]), &want, 1e-6, 1e-3).is_err());
    assert!(
        compare("x", &t(&[1.0, f32::NAN]), &want, 1e-6, 1e-3).is_err(),
        "shape"
    );
    let ints = typed("int32", "[2]", &[1, 0, 0, 0, 254, 255, 255, 255]);
    let i = |v: &[i32]| Tensor::from_slice_on(v, &[v.len()], "REF");
    assert!(compare("x", &i(&[1, -2]), &ints, 0.0, 0.0).is_ok());
    assert!(compare("x", &i(&[1, -3]), &ints, 0.0, 0.0).is_err());
    assert!(
        compare("x", &t(&[1.0, -2.0]), &ints, 1.0, 1.0).is_err(),
        "dtype"
    );
    // a sampled expectation: the sum catches a wrong element the sample skips
    let mut sampled = typed("float32", "[2]", &f32s(&[0.0, 3.0]));
    sampled["shape"] = serde_json::json!([4]);
    sampled["sample_of"] = serde_json::json!(4);
    sampled["sum"] = serde_json::json!(6.0);
    sampled["abs_sum"] = serde_json::json!(6.0);
    assert!(compare("x", &t(&[0.0, 1.0, 2.0, 3.0]), &sampled, 1e-6, 1e-3).is_ok());
    assert!(compare("x", &t(&[0.0, 1.0, 5.0, 3.0]), &sampled, 1e-6, 1e-3).is_err());
    let _ = DType::FLOAT32;
}
