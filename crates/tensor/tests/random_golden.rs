//! The random ops give tinygrad's numbers for the same seed: sequences of calls recorded from
//! tinygrad 0.14.0 (`tests/golden/gen_random.py` -> `random_cases.json`), replayed on every
//! device. Floats within 1e-6 + 1e-6 relative (the transcendentals of `randn` may differ in the
//! last bit), integers exactly.

mod common;

use std::sync::Mutex;

use serde_json::Value;
use tinygrad_tensor::{DType, Tensor};

/// The generator's state is per process: one sequence at a time.
static SEQUENTIAL: Mutex<()> = Mutex::new(());

fn dtype(name: &str) -> DType {
    match name {
        "float32" => DType::FLOAT32,
        "float16" => DType::FLOAT16,
        "float64" => DType::FLOAT64,
        "bfloat16" => DType::BFLOAT16,
        "int32" => DType::INT32,
        other => panic!("unknown dtype {other}"),
    }
}

fn run_call(c: &Value, device: &str) -> Tensor {
    let shape = || common::usizes(&c["shape"]);
    let f = |k: &str| c[k].as_f64().expect("number");
    match c["op"].as_str().expect("op") {
        "rand" => Tensor::rand_on(&shape(), dtype(c["dtype"].as_str().unwrap()), device),
        "randn" => Tensor::randn_on(&shape(), dtype(c["dtype"].as_str().unwrap()), device),
        "randint" => Tensor::randint_on(
            &shape(),
            common::int(&c["low"]),
            common::int(&c["high"]),
            dtype(c["dtype"].as_str().unwrap()),
            device,
        ),
        "uniform" => Tensor::uniform_on(&shape(), f("low"), f("high"), DType::FLOAT32, device),
        "normal" => Tensor::randn_on(&shape(), DType::FLOAT32, device) * f("std") + f("mean"),
        "glorot_uniform" => {
            let s = shape();
            let bound = (6.0 / (s[0] + s[1..].iter().product::<usize>()) as f64).sqrt();
            Tensor::uniform_on(&s, -bound, bound, DType::FLOAT32, device)
        }
        "kaiming_uniform" => {
            let s = shape();
            let a = f("a");
            let fan_in = s[1..].iter().product::<usize>() as f64;
            let bound = (3.0f64).sqrt() * (2.0 / (1.0 + a * a)).sqrt() / fan_in.sqrt();
            Tensor::uniform_on(&s, -bound, bound, DType::FLOAT32, device)
        }
        "randperm" => Tensor::rand_on(&[common::int(&c["n"]) as usize], DType::FLOAT32, device)
            .argsort(-1, false),
        "dropout" => {
            let _train = Tensor::train(true);
            Tensor::ones_on(&shape(), DType::FLOAT32, device).dropout(f("p"))
        }
        other => panic!("unknown op {other}"),
    }
}

/// The default-device forms of the ops the case uses, on the default device (CPU): the same
/// numbers through `Tensor::normal`, `glorot_uniform`, `kaiming_uniform` and `randperm`.
fn run_call_default(c: &Value) -> Option<Tensor> {
    let shape = || common::usizes(&c["shape"]);
    let f = |k: &str| c[k].as_f64().expect("number");
    Some(match c["op"].as_str().expect("op") {
        "normal" => Tensor::normal(&shape(), f("mean"), f("std")),
        "glorot_uniform" => Tensor::glorot_uniform(&shape()),
        "kaiming_uniform" => Tensor::kaiming_uniform(&shape(), f("a")),
        "randperm" => Tensor::randperm(common::int(&c["n"]) as usize),
        "uniform" => Tensor::uniform(&shape(), f("low"), f("high")),
        "randint" => Tensor::randint(
            &shape(),
            common::int(&c["low"]),
            common::int(&c["high"]),
            dtype(c["dtype"].as_str().unwrap()),
        ),
        _ => return None,
    })
}

fn compare(name: &str, k: usize, got: &Tensor, want: &Value) -> Result<(), String> {
    let shape = common::usizes(&want["shape"]);
    if got.shape() != shape {
        return Err(format!(
            "{name} call {k}: shape {:?}, expected {shape:?}",
            got.shape()
        ));
    }
    let exp: Vec<f64> = want["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|v| v.as_f64().expect("number"))
        .collect();
    let vals = got.to_f64_vec();
    for (i, (g, w)) in vals.iter().zip(&exp).enumerate() {
        if (g - w).abs() > 1e-6 + 1e-6 * w.abs() {
            return Err(format!("{name} call {k}: [{i}] = {g}, tinygrad gives {w}"));
        }
    }
    Ok(())
}

fn run_suite(device: &str) {
    let _one = SEQUENTIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cases = common::load_cases("random_cases.json");
    let mut failures = Vec::new();
    let mut calls = 0;
    for case in &cases {
        let name = case["name"].as_str().expect("name");
        let seed = common::int(&case["seed"]) as u64;
        let outs = case["outputs"].as_array().expect("outputs");
        Tensor::manual_seed(seed);
        for (k, c) in case["calls"].as_array().expect("calls").iter().enumerate() {
            calls += 1;
            if let Err(e) = compare(name, k, &run_call(c, device), &outs[k]) {
                failures.push(format!("{device}: {e}"));
            }
        }
        if device == "CPU" && tinygrad_tensor::default_device() == "CPU" {
            Tensor::manual_seed(seed);
            for (k, c) in case["calls"].as_array().expect("calls").iter().enumerate() {
                let t = run_call_default(c).unwrap_or_else(|| run_call(c, device));
                if let Err(e) = compare(name, k, &t, &outs[k]) {
                    failures.push(format!("{device} (default-device API): {e}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("{device}: {calls} random calls match tinygrad");
}

#[test]
fn random_matches_tinygrad_cpu() {
    run_suite("CPU");
}

#[test]
fn random_matches_tinygrad_ref() {
    run_suite("REF");
}

#[test]
fn random_matches_tinygrad_webgpu() {
    common::on_webgpu("random_matches_tinygrad_webgpu", run_suite);
}
