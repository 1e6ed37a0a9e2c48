//! ONNX's backend node tests (the `onnx` package's case generators, written out by
//! `gen_node_tests.py`): every case's model run on its `test_data_set_*` inputs and compared
//! with the stored outputs at ONNX's tolerances (rtol 1e-3, atol 1e-7; integers and bools
//! exact, NaN equal to NaN).
//!
//! The cases live in `ONNX_NODE_DIR` (default `target/onnx-node`); without them the test skips
//! with a printed reason, or fails when `TINYGRAD_REQUIRE_ONNX_NODE=1` (CI generates them).
//! Every case listed in `node_expected_pass.txt` must pass; the results of all cases (pass, or
//! the failure's reason) are written to `target/onnx-node-results.txt`, from which that list is
//! refreshed when more cases pass.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use prost::Message;
use tinygrad_onnx::OnnxModel;
use tinygrad_onnx::proto::{ModelProto, TensorProto};
use tinygrad_onnx::tensor_proto::to_tensor;
use tinygrad_tensor::{DType, Tensor};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read_tensor(path: &Path, device: &str) -> Result<Tensor, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let t =
        TensorProto::decode(bytes.as_slice()).map_err(|e| format!("{}: {e}", path.display()))?;
    to_tensor(&t, None, device).map_err(|e| e.to_string())
}

fn values(t: &Tensor) -> Result<Vec<f64>, String> {
    if t.dtype() == DType::BOOL {
        return Ok(t
            .try_to_vec::<bool>()
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(f64::from)
            .collect());
    }
    if t.dtype() == DType::INT64 || t.dtype() == DType::UINT64 {
        // exact: int64 values past 2^53 would round in f64
        return Ok(t
            .cast(DType::INT64)
            .try_to_vec::<i64>()
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|v| v as f64)
            .collect());
    }
    t.cast(DType::FLOAT64)
        .try_to_vec::<f64>()
        .map_err(|e| e.to_string())
}

fn close(got: &Tensor, want: &Tensor) -> Result<(), String> {
    if got.dtype() != want.dtype() {
        return Err(format!("dtype {} (expected {})", got.dtype(), want.dtype()));
    }
    if got.shape() != want.shape() {
        return Err(format!(
            "shape {:?} (expected {:?})",
            got.shape(),
            want.shape()
        ));
    }
    let exact = !want.dtype().is_float();
    let (g, w) = (values(got)?, values(want)?);
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = if exact {
            a == b
        } else {
            (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-7 + 1e-3 * b.abs()
        };
        if !ok {
            return Err(format!("element {i}: {a} (expected {b})"));
        }
    }
    Ok(())
}

/// Runs one case directory: `Ok` when every data set matches.
fn run_case(dir: &Path, device: &str) -> Result<(), String> {
    let model = OnnxModel::load_on(dir.join("model.onnx"), device).map_err(|e| e.to_string())?;
    let mut sets: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    sets.sort();
    for set in sets {
        let mut inputs = HashMap::new();
        for (j, info) in model.inputs().iter().enumerate() {
            let p = set.join(format!("input_{j}.pb"));
            if !p.exists() {
                // an optional input the case leaves out
                continue;
            }
            inputs.insert(info.name.clone(), read_tensor(&p, device)?);
        }
        let outs = model.run(&inputs).map_err(|e| e.to_string())?;
        for (j, info) in model.outputs().iter().enumerate() {
            let p = set.join(format!("output_{j}.pb"));
            if !p.exists() {
                continue;
            }
            let want = read_tensor(&p, device)?;
            close(&outs[&info.name], &want).map_err(|e| format!("output {}: {e}", info.name))?;
        }
    }
    Ok(())
}

#[test]
fn onnx_node_tests() {
    let dir = std::env::var_os("ONNX_NODE_DIR")
        .map_or_else(|| workspace().join("target/onnx-node"), PathBuf::from);
    if !dir.is_dir() {
        let msg = format!(
            "ONNX node tests: skipped, no cases in {} (python3 crates/onnx/tests/gen_node_tests.py {})",
            dir.display(),
            dir.display()
        );
        assert!(
            std::env::var_os("TINYGRAD_REQUIRE_ONNX_NODE").is_none_or(|v| v != "1"),
            "{msg}"
        );
        println!("{msg}");
        return;
    }
    let device = tinygrad_tensor::default_device();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("reads the case folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    cases.sort();
    let expected: Vec<String> = include_str!("node_expected_pass.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();
    let mut results: BTreeMap<String, Result<(), String>> = BTreeMap::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        if std::env::var_os("ONNX_NODE_VERBOSE").is_some() {
            eprintln!("{name}");
        }
        let r = std::panic::catch_unwind(|| run_case(case, &device))
            .unwrap_or_else(|_| Err("panicked".into()));
        results.insert(name, r);
    }
    let passed = results.values().filter(|r| r.is_ok()).count();
    // ONNX's own measure: cases whose nodes are all in the default domain, and per op type
    // (a case counts for each op its graph uses)
    let mut default_domain = (0usize, 0usize);
    let mut per_op: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    // ops of passing cases missing from the public list of supported ops
    let mut unlisted = std::collections::BTreeSet::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let ok = matches!(results.get(&name), Some(Ok(())));
        let Ok(bytes) = std::fs::read(case.join("model.onnx")) else {
            continue;
        };
        let Ok(m) = ModelProto::decode(bytes.as_slice()) else {
            continue;
        };
        let nodes = m.graph.map(|g| g.node).unwrap_or_default();
        if nodes
            .iter()
            .all(|n| matches!(n.domain.as_deref(), None | Some("") | Some("ai.onnx")))
        {
            default_domain.0 += 1;
            default_domain.1 += usize::from(ok);
        }
        let ops: std::collections::BTreeSet<String> =
            nodes.iter().filter_map(|n| n.op_type.clone()).collect();
        if ok {
            unlisted.extend(
                ops.iter()
                    .filter(|op| !tinygrad_onnx::ops::SUPPORTED.contains(&op.as_str()))
                    .cloned(),
            );
        }
        for op in ops {
            let e = per_op.entry(op).or_default();
            e.0 += 1;
            e.1 += usize::from(ok);
        }
    }
    assert!(
        unlisted.is_empty(),
        "ops that pass node tests but are missing from tinygrad_onnx::ops::SUPPORTED: {unlisted:?}"
    );
    let table: String = per_op
        .iter()
        .map(|(op, (all, ok))| format!("{op}\t{ok}/{all}\n"))
        .collect();
    std::fs::write(workspace().join("target/onnx-node-ops.txt"), table)
        .expect("writes the op table");
    println!(
        "ONNX node tests, default domain: {} of {} cases pass ({:.1}%); per op in target/onnx-node-ops.txt",
        default_domain.1,
        default_domain.0,
        100.0 * default_domain.1 as f64 / default_domain.0.max(1) as f64
    );
    let mut report = String::new();
    for (name, r) in &results {
        match r {
            Ok(()) => report.push_str(&format!("PASS {name}\n")),
            Err(e) => report.push_str(&format!(
                "FAIL {name}: {}\n",
                e.lines().next().unwrap_or("")
            )),
        }
    }
    let out = workspace().join("target/onnx-node-results.txt");
    std::fs::write(&out, &report).expect("writes the results");
    println!(
        "ONNX node tests: {passed} of {} cases pass ({:.1}%) on {device}; results in {}",
        results.len(),
        100.0 * passed as f64 / results.len().max(1) as f64,
        out.display()
    );
    let regressed: Vec<String> = expected
        .iter()
        .filter(|name| !matches!(results.get(*name), Some(Ok(()))))
        .map(|name| match results.get(name) {
            Some(Err(e)) => format!("{name}: {e}"),
            _ => format!("{name}: no such case"),
        })
        .collect();
    assert!(
        regressed.is_empty(),
        "{} expected passes fail:\n{}",
        regressed.len(),
        regressed.join("\n")
    );
}
