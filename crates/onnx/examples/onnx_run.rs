//! Runs an ONNX model on random inputs: prints its inputs and outputs, then times a run.
//!
//! ```text
//! cargo run --release -p tinygrad-onnx --example onnx_run -- model.onnx [--dim NAME=SIZE]... [--runs N]
//! ```
//!
//! Symbolic input dims (`batch`, `sequence`) take `--dim` values, 1 by default. Float inputs are
//! uniform in [0, 1), integer inputs 0, bools false. `DEV=` picks the device.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use tinygrad_onnx::{Dim, OnnxModel};
use tinygrad_tensor::{DType, Tensor, environment};

/// Runs an ONNX model on random inputs: prints its inputs and outputs, then times runs.
#[derive(Parser)]
#[command(after_help = environment::help())]
struct Args {
    /// The `.onnx` file.
    model: PathBuf,
    /// A symbolic input dim's size, `NAME=SIZE` (repeatable; unnamed ones are 1).
    #[arg(long = "dim", value_name = "NAME=SIZE", value_parser = parse_dim)]
    dims: Vec<(String, usize)>,
    /// Timed runs after the first (which compiles the kernels).
    #[arg(long, default_value_t = 10)]
    runs: usize,
}

/// `NAME=SIZE` as a pair.
fn parse_dim(kv: &str) -> Result<(String, usize), String> {
    let (k, v) = kv.split_once('=').ok_or("expected NAME=SIZE")?;
    let size = v.parse().map_err(|e| format!("{v:?}: {e}"))?;
    Ok((k.to_string(), size))
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(args) {
        eprintln!("onnx_run: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let dims: HashMap<String, usize> = args.dims.into_iter().collect();
    let runs = args.runs;
    let path = args.model.display().to_string();
    let t0 = Instant::now();
    let model = OnnxModel::load(&args.model)?;
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
