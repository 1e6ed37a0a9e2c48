//! Runs an ONNX model on random inputs: prints its inputs and outputs, then times a run.
//!
//! ```text
//! cargo run --release -p tinygrad-onnx --example onnx_run -- model.onnx [--dim NAME=SIZE]... [--runs N]
//! ```
//!
//! Symbolic input dims (`batch`, `sequence`) take `--dim` values, 1 by default. Float inputs are
//! uniform in [0, 1), integer inputs 0, bools false. `DEV=` picks the device.

use std::collections::HashMap;
use std::time::Instant;

use tinygrad_onnx::{Dim, OnnxModel};
use tinygrad_tensor::{DType, Tensor};

fn main() {
    if let Err(e) = run() {
        eprintln!("onnx_run: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut path = None;
    let mut dims: HashMap<String, usize> = HashMap::new();
    let mut runs = 10usize;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--dim" => {
                let kv = args.next().ok_or("--dim needs NAME=SIZE")?;
                let (k, v) = kv.split_once('=').ok_or("--dim needs NAME=SIZE")?;
                dims.insert(k.to_string(), v.parse()?);
            }
            "--runs" => runs = args.next().ok_or("--runs needs a count")?.parse()?,
            _ if path.is_none() => path = Some(a),
            _ => return Err(format!("unexpected argument {a:?}").into()),
        }
    }
    let path = path.ok_or("usage: onnx_run MODEL.onnx [--dim NAME=SIZE]... [--runs N]")?;
    let t0 = Instant::now();
    let model = OnnxModel::load(&path)?;
    println!(
        "{path}: opset {}, loaded on {} in {:.1} ms",
        model.opset(),
        model.device(),
        t0.elapsed().as_secs_f64() * 1e3
    );
    let mut inputs = HashMap::new();
    for info in model.inputs() {
        let shape: Vec<usize> = info
            .shape
            .clone()
            .unwrap_or_default()
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => *n,
                Dim::Symbolic(s) => dims.get(s).copied().unwrap_or(1),
                Dim::Unknown => 1,
            })
            .collect();
        let dtype = info.dtype.unwrap_or(DType::FLOAT32);
        println!("  input  {} {dtype} {shape:?}", info.name);
        let t = if dtype.is_float() {
            Tensor::rand(&shape).cast(dtype)
        } else {
            Tensor::zeros(&shape, dtype)
        };
        t.realize();
        inputs.insert(info.name.clone(), t);
    }
    let mut times = Vec::new();
    let mut last = HashMap::new();
    for _ in 0..runs.max(1) + 1 {
        let t0 = Instant::now();
        let outs = model.run(&inputs)?;
        for t in outs.values() {
            t.try_realize()?;
        }
        times.push(t0.elapsed().as_secs_f64() * 1e3);
        last = outs;
    }
    for info in model.outputs() {
        let t = &last[&info.name];
        let head: Vec<f64> = t
            .cast(DType::FLOAT64)
            .try_to_vec::<f64>()?
            .into_iter()
            .take(4)
            .collect();
        println!(
            "  output {} {} {:?}: {head:?}...",
            info.name,
            t.dtype(),
            t.shape()
        );
    }
    let first = times.remove(0);
    times.sort_by(f64::total_cmp);
    println!(
        "first run (compiles kernels) {first:.2} ms; then median {:.2} ms, min {:.2} ms over {} runs",
        times[times.len() / 2],
        times[0],
        times.len()
    );
    Ok(())
}
