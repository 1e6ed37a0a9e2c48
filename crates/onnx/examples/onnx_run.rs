//! Runs an ONNX model: prints its inputs and outputs, then times runs (warm runs replay).
//!
//! ```text
//! cargo run --release -p tinygrad-onnx --example onnx_run -- model.onnx [--dim NAME=SIZE]...
//!     [--input NAME=FILE.npy]... [--output DIR] [--runs N] [--profile]
//! ```
//!
//! Symbolic input dims (`batch`, `sequence`) need a `--dim` value, dims with neither a size nor
//! a name an `--input` file: the model is not run without them. Inputs not given as `.npy`
//! files are random: floats uniform in [0, 1), integers 0, bools false. `--output` writes each
//! output as `DIR/NAME.npy` (floats as float32 or float64, integers as int64, bools as uint8).
//! `--profile` (or `DEBUG=2`) adds a per-op time breakdown, as onnxruntime's profiler gives:
//! one run node by node. `DEV=` picks the device.

use std::collections::{BTreeMap, HashMap};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Parser;
use npyz::WriterBuilder;
use tinygrad_onnx::{Dim, OnnxModel};
use tinygrad_tensor::{DType, Tensor, environment};

/// Runs an ONNX model: prints its inputs and outputs, then times runs (warm runs replay).
#[derive(Parser)]
#[command(after_help = environment::help())]
struct Args {
    /// The `.onnx` file.
    model: PathBuf,
    /// A symbolic input dim's size, `NAME=SIZE` (repeatable; every symbolic dim needs one).
    #[arg(long = "dim", value_name = "NAME=SIZE", value_parser = parse_dim)]
    dims: Vec<(String, usize)>,
    /// An input's values from a `.npy` file, `NAME=FILE` (repeatable; others are random).
    #[arg(long = "input", value_name = "NAME=FILE", value_parser = parse_input)]
    inputs: Vec<(String, PathBuf)>,
    /// Write each output to `DIR/NAME.npy`.
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Timed runs after the first (which compiles the kernels).
    #[arg(long, default_value_t = 10)]
    runs: usize,
    /// Time each node (one run node by node) and print the time per op type.
    #[arg(long)]
    profile: bool,
}

/// `NAME=SIZE` as a pair.
fn parse_dim(kv: &str) -> Result<(String, usize), String> {
    let (k, v) = kv.split_once('=').ok_or("expected NAME=SIZE")?;
    let size = v.parse().map_err(|e| format!("{v:?}: {e}"))?;
    Ok((k.to_string(), size))
}

/// `NAME=FILE` as a pair.
fn parse_input(kv: &str) -> Result<(String, PathBuf), String> {
    let (k, v) = kv.split_once('=').ok_or("expected NAME=FILE")?;
    Ok((k.to_string(), PathBuf::from(v)))
}

/// A `.npy` file as a tensor (little-endian or byte-sized types, C order).
fn read_npy(path: &Path) -> Result<Tensor, String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let file = std::fs::File::open(path).map_err(|e| err(&e))?;
    let npy = npyz::NpyFile::new(BufReader::new(file)).map_err(|e| err(&e))?;
    if npy.order() != npyz::Order::C {
        return Err(err(
            &"Fortran order is not supported (save it C-contiguous)",
        ));
    }
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let descr = npy.dtype().descr();
    // (the header's descr as Python writes it: '<f4')
    let t = match descr.trim_matches('\'').trim_start_matches(['<', '|', '=']) {
        "f4" => Tensor::from_slice(&npy.into_vec::<f32>().map_err(|e| err(&e))?, &shape),
        "f8" => Tensor::from_slice(&npy.into_vec::<f64>().map_err(|e| err(&e))?, &shape),
        "i8" => Tensor::from_slice(&npy.into_vec::<i64>().map_err(|e| err(&e))?, &shape),
        "i4" => Tensor::from_slice(&npy.into_vec::<i32>().map_err(|e| err(&e))?, &shape),
        "i2" => Tensor::from_slice(&npy.into_vec::<i16>().map_err(|e| err(&e))?, &shape),
        "i1" => Tensor::from_slice(&npy.into_vec::<i8>().map_err(|e| err(&e))?, &shape),
        "u8" => Tensor::from_slice(&npy.into_vec::<u64>().map_err(|e| err(&e))?, &shape),
        "u4" => Tensor::from_slice(&npy.into_vec::<u32>().map_err(|e| err(&e))?, &shape),
        "u2" => Tensor::from_slice(&npy.into_vec::<u16>().map_err(|e| err(&e))?, &shape),
        "u1" => Tensor::from_slice(&npy.into_vec::<u8>().map_err(|e| err(&e))?, &shape),
        "b1" => Tensor::from_slice(&npy.into_vec::<bool>().map_err(|e| err(&e))?, &shape),
        _ => return Err(err(&format!("element type {descr:?} is not supported"))),
    };
    Ok(t)
}

/// Writes `t` to `path` as `.npy` (floats as float32 or float64, integers as int64, bools as
/// uint8).
fn write_npy(t: &Tensor, path: &Path) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let shape: Vec<u64> = t.shape().iter().map(|&d| d as u64).collect();
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).map_err(|e| err(&e))?);
    fn write<T: npyz::Serialize + npyz::AutoSerialize + Copy>(
        w: &mut impl std::io::Write,
        shape: &[u64],
        data: &[T],
    ) -> std::io::Result<()> {
        let mut out = npyz::WriteOptions::new()
            .default_dtype()
            .shape(shape)
            .writer(w)
            .begin_nd()?;
        out.extend(data.iter().copied())?;
        out.finish()
    }
    let dt = t.dtype();
    let r = if dt == DType::FLOAT64 {
        write(
            &mut file,
            &shape,
            &t.try_to_vec::<f64>().map_err(|e| err(&e))?,
        )
    } else if dt.is_float() {
        let v = t.cast(DType::FLOAT32).try_to_vec::<f32>();
        write(&mut file, &shape, &v.map_err(|e| err(&e))?)
    } else if dt == DType::BOOL {
        let v = t.cast(DType::UINT8).try_to_vec::<u8>();
        write(&mut file, &shape, &v.map_err(|e| err(&e))?)
    } else {
        let v = t.cast(DType::INT64).try_to_vec::<i64>();
        write(&mut file, &shape, &v.map_err(|e| err(&e))?)
    };
    r.map_err(|e| err(&e))
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
    let files: HashMap<String, PathBuf> = args.inputs.into_iter().collect();
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
    if let Some(name) = files
        .keys()
        .find(|n| !model.inputs().iter().any(|i| &i.name == *n))
    {
        return Err(format!(
            "--input {name}: not an input of the model (its inputs: {:?})",
            model.inputs().iter().map(|i| &i.name).collect::<Vec<_>>()
        )
        .into());
    }
    // every dim must have a size before anything runs
    let mut missing = vec![];
    for info in model
        .inputs()
        .iter()
        .filter(|i| !files.contains_key(&i.name))
    {
        for (k, d) in info.shape.clone().unwrap_or_default().iter().enumerate() {
            match d {
                Dim::Symbolic(s) if !dims.contains_key(s) => missing.push(format!(
                    "input {:?} dim {k} is {s:?}: give --dim {s}=SIZE",
                    info.name
                )),
                Dim::Unknown => missing.push(format!(
                    "input {:?} dim {k} has neither a size nor a name: give the input as a file, \
                     --input {}=FILE.npy",
                    info.name, info.name
                )),
                _ => {}
            }
        }
    }
    if !missing.is_empty() {
        return Err(format!("sizes missing:\n  {}", missing.join("\n  ")).into());
    }
    let mut inputs = HashMap::new();
    for info in model.inputs() {
        let t = match files.get(&info.name) {
            Some(file) => read_npy(file)?,
            None => {
                let shape: Vec<usize> = info
                    .shape
                    .clone()
                    .unwrap_or_default()
                    .iter()
                    .map(|d| match d {
                        Dim::Fixed(n) => *n,
                        Dim::Symbolic(s) => dims[s],
                        Dim::Unknown => unreachable!("refused above"),
                    })
                    .collect();
                let dtype = info.dtype.unwrap_or(DType::FLOAT32);
                if dtype.is_float() {
                    Tensor::rand(&shape).cast(dtype)
                } else {
                    Tensor::zeros(&shape, dtype)
                }
            }
        };
        println!("  input  {} {} {:?}", info.name, t.dtype(), t.shape());
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
        if let Some(dir) = &args.output {
            std::fs::create_dir_all(dir)?;
            // (an output name may hold '/': kept inside DIR)
            let file = dir.join(format!("{}.npy", info.name.replace(['/', '\\'], "_")));
            write_npy(t, &file)?;
            println!("         written to {}", file.display());
        }
    }
    let first = times.remove(0);
    times.sort_by(f64::total_cmp);
    println!(
        "first run (compiles kernels) {first:.2} ms; then median {:.2} ms, min {:.2} ms over {} \
         runs ({} replayed{})",
        times[times.len() / 2],
        times[0],
        times.len(),
        model.replays(),
        model
            .not_replayed()
            .first()
            .map_or(String::new(), |why| format!("; not replayed: {why}"))
    );
    if args.profile || tinygrad_tensor::debug_level() >= 2 {
        // (the second: the first compiles the node-by-node kernels)
        model.run_profiled(&inputs)?;
        let (_, nodes) = model.run_profiled(&inputs)?;
        let total: f64 = nodes.iter().map(|n| n.ms).sum();
        let mut by_op: BTreeMap<&str, (usize, f64)> = BTreeMap::new();
        for n in &nodes {
            let e = by_op.entry(n.op.as_str()).or_default();
            e.0 += 1;
            e.1 += n.ms;
        }
        let mut by_op: Vec<_> = by_op.into_iter().collect();
        by_op.sort_by(|a, b| b.1.1.total_cmp(&a.1.1));
        println!("per op, a warm run node by node (nothing fused across nodes): {total:.2} ms");
        println!("  {:<24} {:>6} {:>10} {:>6}", "op", "nodes", "ms", "%");
        for (op, (count, ms)) in by_op {
            println!(
                "  {op:<24} {count:>6} {ms:>10.3} {:>5.1}%",
                100.0 * ms / total.max(f64::MIN_POSITIVE)
            );
        }
        let mut slow = nodes.clone();
        slow.sort_by(|a, b| b.ms.total_cmp(&a.ms));
        println!("slowest nodes:");
        for n in slow.iter().take(5) {
            println!("  {:>10.3} ms  {} ({})", n.ms, n.node, n.op);
        }
    }
    Ok(())
}
