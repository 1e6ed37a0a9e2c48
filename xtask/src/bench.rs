//! `cargo xtask bench`: the performance table. Every row is the median of several timed runs
//! (after a warm-up run that compiles the kernels), next to references measured in the same
//! run, so the ratio is meaningful on a noisy shared machine; the matmul, `a+b`, `sum` and model
//! rows time their references between the two halves of their own runs (`bracketed`), so
//! both sides see the same stretch of a drifting load. Inputs are realized before
//! timing; a timed run builds the lazy expression and realizes it (small results are also read
//! back, where noted).
//!
//! References: numpy, PyTorch (fp32, the same thread count) and tinygrad (its CPU device) in a
//! Python process per row (`pyref`: the first interpreter that imports each, or `--python
//! PATH`; `n/a` with the reason when none does), `matrixmultiply`, and plain Rust loops and
//! streams on the same number of threads that move the same bytes as the row.
//!
//! Rows (`key`: what selects it on the command line; `[q]`: part of `--quick`):
//! - `matmul256` `[q]`, `matmul512`, `matmul1024`, `matmul2048`: matmul N x N x N f32, GFLOP/s,
//!   vs numpy's `a @ b`, PyTorch, tinygrad and `matrixmultiply::sgemm`.
//! - `elementwise`: `(a*b+c).relu().exp()` on 16M f32: GB/s moved (3 inputs + 1 output), vs a
//!   plain Rust loop over slices writing a reused output, numpy, PyTorch and tinygrad.
//! - `add` `[q]`: `a+b` on 16M f32 (1M with `--quick`): GB/s moved (2 inputs + 1 output), vs a
//!   Rust read+read+write stream into a reused output (in huge pages, each thread's part as two
//!   interleaved halves, as our kernel runs it), PyTorch's `torch.add(a, b, out=o)` and
//!   tinygrad.
//! - `sum` `[q]`: `sum` of 16M f32 (1M with `--quick`): GB/s read, vs a Rust read stream (in
//!   huge pages, 4 interleaved streams per thread, as our row reductions read), numpy, PyTorch
//!   and tinygrad.
//! - `sum_axis1`: `sum(axis=1)` of 4096x4096 f32 (1024x1024 with `--quick`): GB/s read, vs
//!   numpy, PyTorch and tinygrad.
//! - `sum_axis0`: `sum(axis=0)`, the same sizes and references (the column reduction).
//! - `softmax`: softmax over the last axis of 4096x4096 f32 (1024x1024 with `--quick`): ms, vs
//!   numpy's `e = np.exp(x - x.max(-1, keepdims=True)); e / e.sum(-1, keepdims=True)`,
//!   `torch.softmax` and tinygrad.
//! - `conv`: the four forward convolutions of beautiful_mnist at batch 512 (x(512,1,28,28) *
//!   w(32,1,5,5), x(512,32,24,24) * w(32,32,5,5), x(512,32,10,10) * w(64,32,3,3),
//!   x(512,64,8,8) * w(64,64,3,3)), each timed alone, the row being the sum of their medians:
//!   GFLOP/s (and ms), vs PyTorch running the four in one timed call; results spot-checked in
//!   f64.
//! - `latency` `[q]`: warm realize latency of a 20-op elementwise chain on a 4x4 tensor (build +
//!   realize), µs, vs numpy, PyTorch and tinygrad running the same chain (Python loop included).
//! - `latency_cold` `[q]`: the same chain with a constant that changes every run, so every run
//!   compiles a new kernel (build + realize + read back), µs; no reference.
//! - `jit_latency` `[q]`: the same chain through a `Jit` (a replay of the captured kernel), µs,
//!   vs the chain without the `Jit` (warm realize, same run) and PyTorch eager.
//! - `mnist`, `encoder1` `[q]`, `encoder32`, `decode`: whole models, see `models` — a
//!   beautiful_mnist training step (min / median / max of 10 steps), a MiniLM-shaped encoder on
//!   1 and 32 sequences of 12 tokens, one decode step over a KV cache; each vs PyTorch.
//! - `mnist_2dev`: the beautiful_mnist training step data-parallel on two CPU devices, vs one
//!   device in the same run (see `models`).
//! - `jit_mnist`: the beautiful_mnist training step through a `Jit` (replays), vs the same step
//!   without it, measured alternately in the same run.
//! - `jit_encoder1` `[q]`, `jit_encoder32`: the MiniLM-shaped encoder through a `Jit` (replays),
//!   vs the same forward without it (alternately, same run) and PyTorch eager.
//! - `decode_loop`: a 512-step decode loop over a growing KV cache, the cache length a
//!   `Variable` and the step through a `Jit` (see `decode`): kernels compiled after step 2 and
//!   ms per step early and late, vs the loop with concrete shapes in the same run.
//! - `minilm1` `[q]`, `minilm32`: the pretrained all-MiniLM-L6-v2 through
//!   `tinygrad-models` (`SentenceEncoder`; skipped, saying why, unless `scripts/fetch_minilm.sh`
//!   fetched it), one sentence and 32, vs PyTorch on the checkpoint's weights; see `pretrained`.
//! - `llama_ttft`, `llama_prefill`, `llama_decode`: a ~124M-parameter LLaMA-shaped `Decoder`
//!   (random weights): time to the first token in a cold process (compiles included) vs warm,
//!   a 128-token prefill, and greedy decode per token (Jit + Variable KV length), the last two
//!   vs PyTorch eager on the same weights.
//! - `onnx_real_NAME` (`onnx_real` selects all 15): the real trained models of
//!   `crates/onnx/tests/real_models.rs` (OCR, detection, voice activity, wake-word, int8
//!   encoders, ...; `crates/onnx/scripts/fetch_real_models.sh` fetches them; skipped, saying
//!   why, without them): a warm (replayed) run with its first output read back, ms, vs
//!   onnxruntime on the same file and inputs; their geometric mean is printed after the table.
//! - `gguf_smollm2_decode`, `gguf_smollm2_prefill`, `gguf_smollm2_ttft`, `gguf_gemma3_decode`,
//!   `gguf_gemma3_prefill`, `gguf_gemma3_ttft`: real quantized LLMs loaded from their GGUF files
//!   (SmolLM2-135M Q4_1, Gemma-3-270M Q4_K_M; skipped, saying why, unless fetched): decode and
//!   prefill-128 tokens/s and a warm first token's latency, vs llama.cpp's `llama-bench` on the
//!   same file in the same run (`n/a` with the reason without it); see `gguf`.
//! - `gguf_smollm2_batch8`: 8 SmolLM2 sequences decoded together (`Decoder::decode_batch`,
//!   tinygrad-serve's continuous batching), aggregate tokens/s vs one sequence alone.
//! - `webgpu_add` `[q]`, `webgpu_matmul`, `webgpu_chain` `[q]`, `webgpu_chain256`,
//!   `webgpu_mnist`: the `WEBGPU` device, see `device` — `a+b` and a matmul with their inputs on
//!   the device, vs the `CPU` device; chains of 20 kernels and a beautiful_mnist training step, vs
//!   the same with
//!   `WEBGPU_HOST_BUFFERS=1` (buffers in host memory, copied around every kernel: the design
//!   before buffers lived on the device), both measured in child processes of the same run.
//!   Skipped, saying why, without an adapter.
//!
//! Without a filter, `--quick` runs only the `[q]` rows, with smaller sizes and fewer runs (a
//! smoke test of about a minute); with a filter it runs the selected rows with fewer runs.
//!
//! Each result is also checked against its references (and, where cheap, an exact f64
//! computation): a wrong fast kernel is reported as `WRONG RESULT` in the note.
//!
//! The ratio is tinygrad-rs over the reference for throughputs (GFLOP/s, GB/s) and the reference
//! over tinygrad-rs for times (ms, µs): above 1 means tinygrad-rs is ahead. A row with several
//! references takes one line per reference.
//!
//! `--json PATH` also writes the table as a JSON array, one object per line of the table (every
//! reference of every row):
//!
//! ```json
//! [{"name": "matmul 256x256x256 f32", "unit": "GFLOP/s", "unit_value": 101.2,
//!   "ours_ms": 0.33, "ref_name": "numpy", "ref_ms": 0.3, "ratio": 0.9, "note": ""}]
//! ```
//!
//! `ours_ms`/`ref_ms`: median wall time in milliseconds; `unit_value`: tinygrad-rs's number in
//! `unit`; `ref_name` is null for a row without a reference, and `ref_ms` and `ratio` are null
//! whenever no reference time was measured (no reference, or the library unavailable: the note
//! says why).
//!
//! Files: this one holds the options, the list of rows and the driver ([`run`]); `table` the
//! rows' data and the printed/JSON table, `measure` timing and checking helpers, `python` the
//! Python references, `compute` (matmul, conv), `memory` (elementwise, `a+b`, sums, softmax,
//! with the Rust stream probes) and `latency` the rows defined here; `models`, `decode`,
//! `pretrained`, `gguf`, `onnx` and `device` the model and device rows.

mod compute;
mod decode;
mod device;
mod gguf;
mod latency;
mod measure;
mod memory;
mod models;
mod onnx;
mod pretrained;
mod python;
mod table;

pub use device::child as device_child;

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::pyref::{self, Lib, PyRun, Runs};

use tinygrad_tensor::nn::optim::{self, Optimizer};
use tinygrad_tensor::nn::{BatchNorm, Conv2d, Linear, Module, get_parameters};
use tinygrad_tensor::{Dims, Jit, Reduction, Tensor, compile_count, impl_parameters};

use compute::{bench_conv, bench_matmul};
use latency::{bench_jit_latency, bench_latency, bench_latency_cold};
use measure::{
    bracketed, budget, check, input, max_abs_err, max_rel_err, median, median_time, rand_vec, reps,
    threads,
};
use memory::{bench_add, bench_elementwise, bench_softmax, bench_sum, bench_sum_axis};
use python::{numpy, py, py_refs, torch};
use table::{Reference, Row, Unit, lines, print_header, print_line, to_json};

/// Options from the command line.
pub struct Opts {
    /// A small subset (without a filter) with smaller sizes and fewer repetitions: a smoke test.
    pub quick: bool,
    /// Only rows whose key contains one of these, or equals one written `=key` (all when
    /// empty).
    pub filter: Vec<String>,
    /// Also write the rows as JSON to this file.
    pub json: Option<PathBuf>,
}

/// A benchmark: its row, or `None` when it can't run here (it prints why).
type BenchFn = Box<dyn Fn(&Opts) -> Option<Row>>;

/// The benchmarks: key (selects it), part of `--quick`, function.
fn benches() -> Vec<(&'static str, bool, BenchFn)> {
    let mut rows: Vec<(&'static str, bool, BenchFn)> = vec![
        ("matmul256", true, Box::new(|o| Some(bench_matmul(256, o)))),
        ("matmul512", false, Box::new(|o| Some(bench_matmul(512, o)))),
        (
            "matmul1024",
            false,
            Box::new(|o| Some(bench_matmul(1024, o))),
        ),
        (
            "matmul2048",
            false,
            Box::new(|o| Some(bench_matmul(2048, o))),
        ),
        (
            "elementwise",
            false,
            Box::new(|o| Some(bench_elementwise(o))),
        ),
        ("add", true, Box::new(|o| Some(bench_add(o)))),
        ("sum", true, Box::new(|o| Some(bench_sum(o)))),
        ("sum_axis1", false, Box::new(|o| Some(bench_sum_axis(1, o)))),
        ("sum_axis0", false, Box::new(|o| Some(bench_sum_axis(0, o)))),
        ("softmax", false, Box::new(|o| Some(bench_softmax(o)))),
        ("conv", false, Box::new(|o| Some(bench_conv(o)))),
        ("latency", true, Box::new(|o| Some(bench_latency(o)))),
        (
            "latency_cold",
            true,
            Box::new(|o| Some(bench_latency_cold(o))),
        ),
        (
            "jit_latency",
            true,
            Box::new(|o| Some(bench_jit_latency(o))),
        ),
        ("mnist", false, Box::new(|o| Some(models::bench_mnist(o)))),
        (
            "jit_mnist",
            false,
            Box::new(|o| Some(models::bench_mnist_jit(o))),
        ),
        (
            "mnist_2dev",
            false,
            Box::new(|o| Some(models::bench_mnist_devices(o))),
        ),
        (
            "encoder1",
            true,
            Box::new(|o| Some(models::bench_encoder(1, o))),
        ),
        (
            "encoder32",
            false,
            Box::new(|o| Some(models::bench_encoder(32, o))),
        ),
        (
            "jit_encoder1",
            true,
            Box::new(|o| Some(models::bench_encoder_jit(1, o))),
        ),
        (
            "jit_encoder32",
            false,
            Box::new(|o| Some(models::bench_encoder_jit(32, o))),
        ),
        ("decode", false, Box::new(|o| Some(models::bench_decode(o)))),
        (
            "decode_loop",
            false,
            Box::new(|o| Some(decode::bench_decode_loop(o))),
        ),
        (
            "minilm1",
            true,
            Box::new(|o| pretrained::bench_minilm(1, o)),
        ),
        (
            "minilm32",
            false,
            Box::new(|o| pretrained::bench_minilm(32, o)),
        ),
        (
            "onnx_resnet50_1",
            false,
            Box::new(|o| onnx::bench_resnet50(1, o)),
        ),
        (
            "onnx_resnet50_16",
            false,
            Box::new(|o| onnx::bench_resnet50(16, o)),
        ),
        (
            "llama_ttft",
            false,
            Box::new(|o| Some(pretrained::bench_llama_first_token(o))),
        ),
        (
            "llama_prefill",
            false,
            Box::new(|o| Some(pretrained::bench_llama_prefill(o))),
        ),
        (
            "llama_decode",
            false,
            Box::new(|o| Some(pretrained::bench_llama_decode(o))),
        ),
        (
            "gguf_smollm2_decode",
            false,
            Box::new(|o| gguf::bench(gguf::Model::SmolLm2, gguf::Phase::Decode, o)),
        ),
        (
            "gguf_smollm2_prefill",
            false,
            Box::new(|o| gguf::bench(gguf::Model::SmolLm2, gguf::Phase::Prefill, o)),
        ),
        (
            "gguf_smollm2_ttft",
            false,
            Box::new(|o| gguf::bench(gguf::Model::SmolLm2, gguf::Phase::FirstToken, o)),
        ),
        (
            "gguf_smollm2_batch8",
            false,
            Box::new(|o| gguf::bench_batch(gguf::Model::SmolLm2, o)),
        ),
        (
            "gguf_gemma3_decode",
            false,
            Box::new(|o| gguf::bench(gguf::Model::Gemma3, gguf::Phase::Decode, o)),
        ),
        (
            "gguf_gemma3_prefill",
            false,
            Box::new(|o| gguf::bench(gguf::Model::Gemma3, gguf::Phase::Prefill, o)),
        ),
        (
            "gguf_gemma3_ttft",
            false,
            Box::new(|o| gguf::bench(gguf::Model::Gemma3, gguf::Phase::FirstToken, o)),
        ),
        (
            "webgpu_add",
            true,
            Box::new(|o| device::bench_webgpu(false, o)),
        ),
        (
            "webgpu_matmul",
            false,
            Box::new(|o| device::bench_webgpu(true, o)),
        ),
        (
            "webgpu_chain",
            true,
            Box::new(|o| device::bench_resident(device::Job::Chain(64), o)),
        ),
        (
            "webgpu_chain256",
            false,
            Box::new(|o| device::bench_resident(device::Job::Chain(256), o)),
        ),
        (
            "webgpu_mnist",
            false,
            Box::new(|o| device::bench_resident(device::Job::Mnist, o)),
        ),
    ];
    let at = rows
        .iter()
        .position(|(k, _, _)| *k == "onnx_resnet50_16")
        .expect("the ResNet-50 rows")
        + 1;
    for (k, &(key, name)) in onnx::REAL_MODELS.iter().enumerate() {
        rows.insert(
            at + k,
            (key, false, Box::new(move |o| onnx::bench_real(name, o))),
        );
    }
    rows
}

/// The keys of all rows, in order (for the help text).
pub fn keys() -> Vec<&'static str> {
    benches().into_iter().map(|(k, _, _)| k).collect()
}

/// Whether the row `key` (in the quick subset when `quick_row`) runs under `o`: without a
/// filter, every row (the quick subset with `--quick`); with one, the rows whose key contains
/// a filter, or equals one written `=key`.
fn selected(o: &Opts, key: &str, quick_row: bool) -> bool {
    if o.filter.is_empty() {
        quick_row || !o.quick
    } else {
        o.filter.iter().any(|f| match f.strip_prefix('=') {
            Some(exact) => key == exact,
            None => key.contains(f.as_str()),
        })
    }
}

/// Runs the benchmarks selected by `o`, prints the table, and writes the JSON file if asked.
///
/// # Errors
/// A filter that selects nothing, or the JSON file can't be written.
pub fn run(o: &Opts) -> Result<(), String> {
    let benches: Vec<_> = benches()
        .into_iter()
        .filter(|(k, q, _)| selected(o, k, *q))
        .collect();
    if benches.is_empty() {
        return Err(format!(
            "no benchmark matches {:?}; the keys are: {}",
            o.filter,
            keys().join(" ")
        ));
    }
    let threads = threads();
    println!(
        "tinygrad-rs bench ({threads} threads; median of several runs each{})",
        if o.quick { ", --quick" } else { "" }
    );
    for lib in [Lib::Numpy, Lib::Torch, Lib::Tinygrad, Lib::OnnxRuntime] {
        match pyref::find(lib, threads) {
            Ok((py, v)) => println!("  {} {v} ({})", lib.label(), py.display()),
            Err(why) => println!("  {}: n/a: {why}", lib.label()),
        }
    }
    println!(
        "ratio: tinygrad-rs / reference for GFLOP/s and GB/s, reference / tinygrad-rs for times \
         (above 1: tinygrad-rs is ahead)"
    );
    println!();
    print_header();
    let mut rows = vec![];
    for (_, _, f) in &benches {
        let Some(row) = f(o) else { continue };
        for l in lines(&row) {
            print_line(&l);
        }
        rows.push(row);
    }
    if let Some(geo) = onnx::real_geomean(&rows) {
        println!();
        println!("{geo}");
    }
    if let Some(path) = &o.json {
        std::fs::write(path, to_json(&rows)).map_err(|e| format!("{}: {e}", path.display()))?;
        println!();
        println!("wrote {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Opts, selected};

    fn opts(quick: bool, filter: &[&str]) -> Opts {
        Opts {
            quick,
            filter: filter.iter().map(|f| f.to_string()).collect(),
            json: None,
        }
    }

    #[test]
    fn rows_are_selected_by_substring_or_exact_key() {
        let by_part = opts(false, &["mnist"]);
        assert!(selected(&by_part, "mnist", false));
        assert!(selected(&by_part, "jit_mnist", false));
        assert!(!selected(&by_part, "matmul1024", true));
        let exact = opts(false, &["=mnist"]);
        assert!(selected(&exact, "mnist", false));
        assert!(!selected(&exact, "jit_mnist", false));
        assert!(!selected(&exact, "webgpu_mnist", true));
        let none = opts(true, &[]);
        assert!(selected(&none, "matmul256", true));
        assert!(!selected(&none, "mnist", false));
        assert!(selected(&opts(false, &[]), "mnist", false));
    }
}
