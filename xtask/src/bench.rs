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
//! - `gguf_smollm2_decode`, `gguf_smollm2_prefill`, `gguf_smollm2_ttft`, `gguf_gemma3_decode`,
//!   `gguf_gemma3_prefill`, `gguf_gemma3_ttft`: real quantized LLMs loaded from their GGUF files
//!   (SmolLM2-135M Q4_1, Gemma-3-270M Q4_K_M; skipped, saying why, unless fetched): decode and
//!   prefill-128 tokens/s and a warm first token's latency, vs llama.cpp's `llama-bench` on the
//!   same file in the same run (`n/a` with the reason without it); see `gguf`.
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

mod decode;
mod device;
mod gguf;
mod models;
mod onnx;
mod pretrained;

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

/// The unit of a row's number, with what converts a wall time into it.
#[derive(Clone, Copy)]
enum Unit {
    /// GFLOP/s for this many floating-point operations per run.
    Gflops(f64),
    /// GB/s for this many bytes moved per run.
    Gbs(f64),
    /// Milliseconds per run.
    Ms,
    /// Microseconds per run.
    Us,
    /// Tokens per second for this many tokens per run.
    TokensPerSec(f64),
}

impl Unit {
    fn label(self) -> &'static str {
        match self {
            Unit::Gflops(_) => "GFLOP/s",
            Unit::Gbs(_) => "GB/s",
            Unit::Ms => "ms",
            Unit::Us => "µs",
            Unit::TokensPerSec(_) => "tok/s",
        }
    }

    fn value(self, secs: f64) -> f64 {
        match self {
            Unit::Gflops(flop) => flop / secs / 1e9,
            Unit::Gbs(bytes) => bytes / secs / 1e9,
            Unit::Ms => secs * 1e3,
            Unit::Us => secs * 1e6,
            Unit::TokensPerSec(tokens) => tokens / secs,
        }
    }

    fn higher_is_better(self) -> bool {
        matches!(self, Unit::Gflops(_) | Unit::Gbs(_) | Unit::TokensPerSec(_))
    }
}

/// A reference a row is compared with.
#[derive(Clone)]
struct Reference {
    name: String,
    /// Its median wall time (s) and its number in the row's unit; `None`: not measured (`n/a`).
    measured: Option<(f64, f64)>,
    /// Why it is missing, or a failed check of our result against it.
    note: String,
}

impl Reference {
    /// A reference doing the same work as the row, so its number is in the row's unit.
    fn timed(name: &str, secs: f64, unit: Unit, ok: bool) -> Reference {
        Reference {
            name: name.into(),
            measured: Some((secs, unit.value(secs))),
            note: check(ok, &format!("vs {name}")),
        }
    }

    /// A Python reference: `n/a` with the reason when it didn't run; else timed, and our
    /// result checked against its output with `ok`.
    fn py(
        lib: Lib,
        run: Result<PyRun, String>,
        unit: Unit,
        ok: impl FnOnce(&[f32]) -> bool,
    ) -> Reference {
        match run {
            Ok(r) => Reference::timed(lib.label(), r.secs, unit, ok(&r.out)),
            Err(why) => Reference {
                name: lib.label().into(),
                measured: None,
                note: why,
            },
        }
    }

    /// [`Reference::py`] for numpy.
    fn numpy(run: Result<PyRun, String>, unit: Unit, ok: impl FnOnce(&[f32]) -> bool) -> Reference {
        Reference::py(Lib::Numpy, run, unit, ok)
    }

    /// [`Reference::py`] for PyTorch.
    fn torch(run: Result<PyRun, String>, unit: Unit, ok: impl FnOnce(&[f32]) -> bool) -> Reference {
        Reference::py(Lib::Torch, run, unit, ok)
    }
}

/// One benchmark's result: our median time and its references.
struct Row {
    name: String,
    /// Our median wall time, in seconds.
    secs: f64,
    unit: Unit,
    refs: Vec<Reference>,
    note: String,
}

impl Row {
    fn ours(&self) -> f64 {
        self.unit.value(self.secs)
    }

    /// Above 1: tinygrad-rs is ahead of the reference.
    fn ratio(&self, r: &Reference) -> Option<f64> {
        let (_, v) = r.measured?;
        Some(if self.unit.higher_is_better() {
            self.ours() / v
        } else {
            v / self.ours()
        })
    }
}

/// Median of `f`'s wall time in seconds over at least `min_runs` runs and at most `max_runs`,
/// stopping early once `budget` has been spent.
fn median_time(min_runs: usize, max_runs: usize, budget: Duration, mut f: impl FnMut()) -> f64 {
    median(sample_times(min_runs, max_runs, budget, &mut f))
}

/// The time of each of at least `min_runs` and at most `max_runs` runs of `f`, stopping after
/// `budget` once `min_runs` are done.
fn sample_times(
    min_runs: usize,
    max_runs: usize,
    budget: Duration,
    f: &mut impl FnMut(),
) -> Vec<f64> {
    let mut times = Vec::new();
    let t_all = Instant::now();
    while times.len() < min_runs.max(1) || (times.len() < max_runs && t_all.elapsed() < budget) {
        let t0 = Instant::now();
        f();
        times.push(t0.elapsed().as_secs_f64());
    }
    times
}

/// Our median time with a reference timed in the middle of our runs: half of them before it,
/// half after. A shared machine's load drifts over seconds; bracketing puts both sides in the
/// same stretch of it, rather than ours in the first part and the reference in the next.
fn bracketed<R>(
    min_runs: usize,
    max_runs: usize,
    budget: Duration,
    mut f: impl FnMut(),
    reference: impl FnOnce() -> R,
) -> (f64, R) {
    let half = |n: usize| n.div_ceil(2).max(1);
    let (lo, hi) = (half(min_runs), half(max_runs));
    let mut times = sample_times(lo, hi, budget / 2, &mut f);
    let r = reference();
    times.extend(sample_times(lo, hi, budget / 2, &mut f));
    (median(times), r)
}

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Deterministic pseudo-random floats in [-1, 1).
fn rand_vec(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// A realized tensor holding `data`.
fn input(data: &[f32], shape: &[usize]) -> Tensor {
    let t = Tensor::from_slice(data, shape);
    t.realize();
    t
}

/// The largest difference, relative to the largest magnitude of `b` (infinite when the lengths
/// differ).
fn max_rel_err(a: &[f32], b: &[f32]) -> f64 {
    let scale = b
        .iter()
        .fold(0.0f64, |m, x| m.max(x.abs() as f64))
        .max(1e-30);
    a.iter()
        .zip(b)
        .map(|(x, y)| ((x - y).abs() as f64) / scale)
        .fold(0.0, f64::max)
        .max(if a.len() == b.len() {
            0.0
        } else {
            f64::INFINITY
        })
}

/// The largest absolute difference (infinite when the lengths differ).
fn max_abs_err(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    a.iter()
        .zip(b)
        .map(|(x, y)| (f64::from(*x) - f64::from(*y)).abs())
        .fold(0.0, f64::max)
}

fn check(ok: bool, what: &str) -> String {
    if ok {
        String::new()
    } else {
        format!("WRONG RESULT ({what})")
    }
}

fn reps(quick: bool, full: usize) -> usize {
    if quick { full.div_ceil(3).max(3) } else { full }
}

fn budget(quick: bool, secs: u64) -> Duration {
    Duration::from_secs(if quick { secs.div_ceil(3) } else { secs })
}

/// The number of threads tinygrad-rs's CPU kernels use (as `tinygrad_runtime::cpu_threads`):
/// `CPU_THREADS`, else the available parallelism.
fn threads() -> usize {
    std::env::var("CPU_THREADS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

// ---------------------------------------------------------------------------------------------
// Python references (numpy, PyTorch, tinygrad): see `pyref`

/// Times `code` (Python defining `op()`) with `lib` on `inputs`, on tinygrad-rs's thread count.
fn py(
    lib: Lib,
    code: &str,
    inputs: &[&[f32]],
    min_runs: usize,
    max_runs: usize,
    budget: Duration,
) -> Result<PyRun, String> {
    let runs = Runs {
        min_runs,
        max_runs,
        budget,
    };
    pyref::run(lib, threads(), code, inputs, runs)
}

/// The PyTorch and (when given) tinygrad references of a row: each library's code (defining
/// `op()`; tinygrad's realizes its result) on `inputs`, timed like numpy's, our result checked
/// against each one's output with `ok`.
#[allow(clippy::too_many_arguments)]
fn py_refs(
    torch_code: &str,
    tinygrad_code: Option<&str>,
    inputs: &[&[f32]],
    unit: Unit,
    min_runs: usize,
    max_runs: usize,
    budget: Duration,
    ok: &dyn Fn(&[f32]) -> bool,
) -> Vec<Reference> {
    let mut refs = vec![Reference::torch(
        torch(torch_code, inputs, min_runs, max_runs, budget),
        unit,
        ok,
    )];
    if let Some(code) = tinygrad_code {
        let run = py(Lib::Tinygrad, code, inputs, min_runs, max_runs, budget);
        refs.push(Reference::py(Lib::Tinygrad, run, unit, ok));
    }
    refs
}

/// [`py`] with numpy.
fn numpy(
    code: &str,
    inputs: &[&[f32]],
    min_runs: usize,
    max_runs: usize,
    budget: Duration,
) -> Result<PyRun, String> {
    py(Lib::Numpy, code, inputs, min_runs, max_runs, budget)
}

/// [`py`] with PyTorch.
fn torch(
    code: &str,
    inputs: &[&[f32]],
    min_runs: usize,
    max_runs: usize,
    budget: Duration,
) -> Result<PyRun, String> {
    py(Lib::Torch, code, inputs, min_runs, max_runs, budget)
}

// ---------------------------------------------------------------------------------------------
// rows

fn bench_matmul(n: usize, o: &Opts) -> Row {
    let (av, bv) = (rand_vec(n * n, 1), rand_vec(n * n, 2));
    let a = input(&av, &[n, n]);
    let b = input(&bv, &[n, n]);
    let unit = Unit::Gflops(2.0 * (n as f64).powi(3));
    let got = a.matmul(&b).to_vec::<f32>();
    let runs = reps(
        o.quick,
        match n {
            0..1024 => 15,
            1024..2048 => 7,
            _ => 3,
        },
    );
    // the references run between the two halves of our runs (see `bracketed`)
    let (ours, (np, others)) = bracketed(
        3,
        runs,
        budget(o.quick, 20),
        || {
            let c = a.matmul(&b);
            c.realize();
            black_box(&c);
        },
        || {
            let np = numpy(
                &format!(
                    "a = inp(0, {n}, {n})\nb = inp(1, {n}, {n})\ndef op():\n    return a @ b\n"
                ),
                &[&av, &bv],
                3,
                runs,
                budget(o.quick, 10),
            );
            let load = format!("a = inp(0, {n}, {n})\nb = inp(1, {n}, {n})\n");
            let others = py_refs(
                &format!("{load}def op():\n    return a @ b\n"),
                Some(&format!("{load}def op():\n    return (a @ b).realize()\n")),
                &[&av, &bv],
                unit,
                3,
                runs,
                budget(o.quick, 10),
                &|want| max_rel_err(&got, want) < 1e-4,
            );
            (np, others)
        },
    );
    let numpy_ref = Reference::numpy(np, unit, |want| max_rel_err(&got, want) < 1e-4);
    let mut cv = vec![0.0f32; n * n];
    let sgemm = |cv: &mut [f32]| {
        // SAFETY: `av`, `bv` and `cv` are row-major n x n matrices of exactly n*n elements, and
        // the strides passed (n, 1) stay within them; `cv` is uniquely borrowed.
        unsafe {
            matrixmultiply::sgemm(
                n,
                n,
                n,
                1.0,
                av.as_ptr(),
                n as isize,
                1,
                bv.as_ptr(),
                n as isize,
                1,
                0.0,
                cv.as_mut_ptr(),
                n as isize,
                1,
            );
        }
    };
    sgemm(&mut cv);
    let mm = median_time(3, runs, budget(o.quick, 10), || {
        sgemm(&mut cv);
        black_box(&cv);
    });
    let mm_ref = Reference::timed("matrixmultiply", mm, unit, max_rel_err(&got, &cv) < 1e-4);
    Row {
        name: format!("matmul {n}x{n}x{n} f32"),
        secs: ours,
        unit,
        refs: [vec![numpy_ref], others, vec![mm_ref]].concat(),
        note: String::new(),
    }
}

const BIG: usize = 1 << 24;

fn bench_elementwise(o: &Opts) -> Row {
    let (av, bv, cv) = (rand_vec(BIG, 3), rand_vec(BIG, 4), rand_vec(BIG, 5));
    let a = input(&av, &[BIG]);
    let b = input(&bv, &[BIG]);
    let c = input(&cv, &[BIG]);
    let f = || ((&a * &b) + &c).relu().exp();
    let got = f().to_vec::<f32>();
    let runs = reps(o.quick, 15);
    let ours = median_time(3, runs, budget(o.quick, 15), || {
        let r = f();
        r.realize();
        black_box(&r);
    });
    let mut out = vec![0.0f32; BIG];
    let plain = |out: &mut [f32]| {
        for (((o, x), y), z) in out.iter_mut().zip(&av).zip(&bv).zip(&cv) {
            *o = (x * y + z).max(0.0).exp();
        }
    };
    plain(&mut out);
    let reference = median_time(3, runs, budget(o.quick, 10), || {
        plain(&mut out);
        black_box(&out);
    });
    let unit = Unit::Gbs(4.0 * 4.0 * BIG as f64);
    let np = numpy(
        &format!(
            "a = inp(0, {BIG})\nb = inp(1, {BIG})\nc = inp(2, {BIG})\n\
             def op():\n    return np.exp(np.maximum(a * b + c, np.float32(0)))\n"
        ),
        &[&av, &bv, &cv],
        3,
        runs,
        budget(o.quick, 10),
    );
    let load = format!("a = inp(0, {BIG})\nb = inp(1, {BIG})\nc = inp(2, {BIG})\n");
    let others = py_refs(
        &format!("{load}def op():\n    return torch.exp(torch.relu(a * b + c))\n"),
        Some(&format!(
            "{load}def op():\n    return (a * b + c).relu().exp().realize()\n"
        )),
        &[&av, &bv, &cv],
        unit,
        3,
        runs,
        budget(o.quick, 10),
        &|want| max_rel_err(&got, want) < 1e-5,
    );
    Row {
        name: "(a*b+c).relu().exp() 16M f32".into(),
        secs: ours,
        unit,
        refs: [
            vec![
                Reference::timed("Rust loop", reference, unit, max_rel_err(&got, &out) < 1e-6),
                Reference::numpy(np, unit, |want| max_rel_err(&got, want) < 1e-5),
            ],
            others,
        ]
        .concat(),
        note: String::new(),
    }
}

/// Runs `f` on matching chunks of `out` and `ins`, one chunk per thread ([`threads`] of them).
fn split_run(out: &mut [f32], ins: &[&[f32]], f: impl Fn(&mut [f32], &[&[f32]]) + Sync) {
    let chunk = out.len().div_ceil(threads()).max(1);
    std::thread::scope(|s| {
        for (i, o) in out.chunks_mut(chunk).enumerate() {
            let parts: Vec<&[f32]> = ins
                .iter()
                .map(|x| &x[i * chunk..i * chunk + o.len()])
                .collect();
            let f = &f;
            s.spawn(move || f(o, &parts));
        }
    });
}

/// Median time (s) of the read+read+write stream `c = a + b` over `n` f32 into a reused
/// output, on [`threads`] threads: the bytes `a+b` moves, moved by a plain loop the way our
/// kernel moves them. The inputs are copied into memory advised for huge pages (as our buffers
/// are), and each thread runs its part as two interleaved halves (as our large elementwise
/// kernels do: `tinygrad_codegen::cranelift::two_stream_body`).
fn add_stream_probe(
    a: &[f32],
    b: &[f32],
    runs: (usize, usize),
    budget: Duration,
) -> (f64, Vec<f32>) {
    let huge = |x: &[f32]| {
        let mut v = tinygrad_runtime::huge_pages::try_zeroed::<f32>(x.len())
            .expect("add-stream probe: allocating its copies");
        v.copy_from_slice(x);
        v
    };
    let (a, b) = (huge(a), huge(b));
    let mut out = huge(&vec![0.0f32; a.len()]);
    let add = |o: &mut [f32], x: &[&[f32]]| {
        let half = o.len() / 2;
        let (o_lo, o_hi) = o.split_at_mut(half);
        let ((a_lo, a_hi), (b_lo, b_hi)) = (x[0].split_at(half), x[1].split_at(half));
        // 16 elements of the first half, then 16 of the second, ...
        let pieces = o_lo
            .chunks_mut(16)
            .zip(a_lo.chunks(16).zip(b_lo.chunks(16)))
            .zip(
                o_hi.chunks_mut(16)
                    .zip(a_hi.chunks(16).zip(b_hi.chunks(16))),
            );
        for ((o1, (a1, b1)), (o2, (a2, b2))) in pieces {
            for ((o, p), q) in o1.iter_mut().zip(a1).zip(b1) {
                *o = p + q;
            }
            for ((o, p), q) in o2.iter_mut().zip(a2).zip(b2) {
                *o = p + q;
            }
        }
        // what the second half has past the first's pieces (an odd part's last element)
        for i in o_lo.len().div_ceil(16) * 16..o_hi.len() {
            o_hi[i] = a_hi[i] + b_hi[i];
        }
    };
    // Warm-up: faults the output's pages in.
    split_run(&mut out, &[&a, &b], add);
    let t = median_time(runs.0, runs.1, budget, || {
        split_run(&mut out, &[&a, &b], add);
        black_box(&out);
    });
    (t, out)
}

/// Median time (s) of a read stream over `x` on [`threads`] threads, and the sum: what this
/// machine's memory gives a plain loop reading the same bytes as our kernel the same way. The
/// data is copied into memory advised for huge pages (as our buffers are), and each thread
/// sums its half as 4 interleaved streams of 16 accumulators each (as our row reductions read:
/// a core with several streams in flight reads faster than with one).
fn read_stream_probe(x: &[f32], runs: (usize, usize), budget: Duration) -> (f64, f32) {
    const STREAMS: usize = 4;
    let threads = threads();
    let mut data = tinygrad_runtime::huge_pages::try_zeroed::<f32>(x.len())
        .expect("read-stream probe: allocating its copy of the input");
    data.copy_from_slice(x);
    let x = &data[..];
    let mut partial = vec![0.0f32; threads];
    let chunk = x.len().div_ceil(threads).max(1);
    let sum_streams = |x: &[f32]| {
        let stretch = x.len() / STREAMS / 16 * 16;
        let mut acc = [[0.0f32; 16]; STREAMS];
        for i in (0..stretch).step_by(16) {
            for (s, acc) in acc.iter_mut().enumerate() {
                let at = s * stretch + i;
                for (a, v) in acc.iter_mut().zip(&x[at..at + 16]) {
                    *a += v;
                }
            }
        }
        let rest: f32 = x[STREAMS * stretch..].iter().sum();
        acc.iter().flatten().sum::<f32>() + rest
    };
    let run = |partial: &mut [f32]| {
        std::thread::scope(|s| {
            for (p, c) in partial.iter_mut().zip(x.chunks(chunk)) {
                s.spawn(move || *p = sum_streams(c));
            }
        });
        partial.iter().sum::<f32>()
    };
    let total = run(&mut partial);
    let t = median_time(runs.0, runs.1, budget, || {
        black_box(run(&mut partial));
    });
    (t, total)
}

fn bench_add(o: &Opts) -> Row {
    let n = if o.quick { 1 << 20 } else { BIG };
    let (av, bv) = (rand_vec(n, 8), rand_vec(n, 9));
    let a = input(&av, &[n]);
    let b = input(&bv, &[n]);
    let got = (&a + &b).to_vec::<f32>();
    let want: Vec<f32> = av.iter().zip(&bv).map(|(x, y)| x + y).collect();
    let runs = reps(o.quick, 21);
    let unit = Unit::Gbs(3.0 * 4.0 * n as f64);
    let (ours, ((probe, probe_out), others)) = bracketed(
        3,
        runs,
        budget(o.quick, 10),
        || {
            let r = &a + &b;
            r.realize();
            black_box(&r);
        },
        || {
            let probe = add_stream_probe(&av, &bv, (3, runs), budget(o.quick, 5));
            let load = format!("a = inp(0, {n})\nb = inp(1, {n})\n");
            let others = py_refs(
                &format!(
                    "{load}o = torch.empty({n})\ndef op():\n    return torch.add(a, b, out=o)\n"
                ),
                Some(&format!("{load}def op():\n    return (a + b).realize()\n")),
                &[&av, &bv],
                unit,
                3,
                runs,
                budget(o.quick, 5),
                &|w| max_rel_err(&got, w) == 0.0,
            );
            (probe, others)
        },
    );
    let stream = Reference::timed(
        &format!("{}-thread stream", threads()),
        probe,
        unit,
        probe_out == want,
    );
    Row {
        name: format!("a+b {}M f32", n >> 20),
        secs: ours,
        unit,
        refs: [vec![stream], others].concat(),
        note: check(max_rel_err(&got, &want) == 0.0, "vs loop"),
    }
}

fn bench_sum(o: &Opts) -> Row {
    let n = if o.quick { 1 << 20 } else { BIG };
    let av = rand_vec(n, 6);
    let a = input(&av, &[n]);
    let got = a.sum(None).item::<f32>();
    let runs = reps(o.quick, 21);
    let exact: f64 = av.iter().map(|&x| x as f64).sum();
    // Our sum is right when it is as close to the exact sum as the reference's, give or take.
    let close = |other: f32| {
        (got as f64 - exact).abs() <= 1e-3 * (n as f64).sqrt() + (other as f64 - exact).abs()
    };
    let unit = Unit::Gbs(4.0 * n as f64);
    let (ours, ((reference, want), np, others)) = bracketed(
        3,
        runs,
        budget(o.quick, 10),
        || {
            let s = a.sum(None);
            s.realize();
            black_box(&s);
        },
        || {
            let probe = read_stream_probe(&av, (3, runs), budget(o.quick, 5));
            let np = numpy(
                &format!("a = inp(0, {n})\ndef op():\n    return a.sum()\n"),
                &[&av],
                3,
                runs,
                budget(o.quick, 5),
            );
            let load = format!("a = inp(0, {n})\n");
            let others = py_refs(
                &format!("{load}def op():\n    return a.sum()\n"),
                Some(&format!("{load}def op():\n    return a.sum().realize()\n")),
                &[&av],
                unit,
                3,
                runs,
                budget(o.quick, 5),
                &|w| w.len() == 1 && close(w[0]),
            );
            (probe, np, others)
        },
    );
    Row {
        name: format!("sum {}M f32", n >> 20),
        secs: ours,
        unit,
        refs: [
            vec![
                Reference::timed(
                    &format!("{}-thread read stream", threads()),
                    reference,
                    unit,
                    close(want),
                ),
                Reference::numpy(np, unit, |w| w.len() == 1 && close(w[0])),
            ],
            others,
        ]
        .concat(),
        note: String::new(),
    }
}

/// `sum(axis)` of an `n x n` matrix, `axis` 1 (rows: contiguous runs) or 0 (columns: the
/// shape of a bias gradient).
fn bench_sum_axis(axis: usize, o: &Opts) -> Row {
    let n = if o.quick { 1024 } else { 4096 };
    let av = rand_vec(n * n, 10);
    let a = input(&av, &[n, n]);
    let ax = axis as isize;
    let got = a.sum(ax).to_vec::<f32>();
    let exact: Vec<f32> = (0..n)
        .map(|i| {
            let at = |j: usize| {
                if axis == 1 {
                    av[i * n + j]
                } else {
                    av[j * n + i]
                }
            };
            (0..n).map(|j| f64::from(at(j))).sum::<f64>() as f32
        })
        .collect();
    let runs = reps(o.quick, 15);
    // f32 sums of `n` values in [-1, 1): rounding errors stay well below this.
    let tol = 5e-3 * (n as f64 / 4096.0).sqrt();
    let unit = Unit::Gbs(4.0 * (n * n) as f64);
    let (ours, (np, others)) = bracketed(
        3,
        runs,
        budget(o.quick, 10),
        || {
            let s = a.sum(ax);
            s.realize();
            black_box(&s);
        },
        || {
            let np = numpy(
                &format!("a = inp(0, {n}, {n})\ndef op():\n    return a.sum(axis={axis})\n"),
                &[&av],
                3,
                runs,
                budget(o.quick, 5),
            );
            let load = format!("a = inp(0, {n}, {n})\n");
            let others = py_refs(
                &format!("{load}def op():\n    return a.sum({axis})\n"),
                Some(&format!(
                    "{load}def op():\n    return a.sum({axis}).realize()\n"
                )),
                &[&av],
                unit,
                3,
                runs,
                budget(o.quick, 5),
                &|w| max_abs_err(&got, w) < tol,
            );
            (np, others)
        },
    );
    Row {
        name: format!("sum(axis={axis}) {n}x{n} f32"),
        secs: ours,
        unit,
        refs: [
            vec![Reference::numpy(np, unit, |w| max_abs_err(&got, w) < tol)],
            others,
        ]
        .concat(),
        note: check(max_abs_err(&got, &exact) < tol, "vs f64 sums"),
    }
}

fn bench_softmax(o: &Opts) -> Row {
    let n = if o.quick { 1024 } else { 4096 };
    let xv = rand_vec(n * n, 11);
    let x = input(&xv, &[n, n]);
    let got = x.softmax(-1).to_vec::<f32>();
    let exact: Vec<f32> = xv
        .chunks_exact(n)
        .flat_map(|r| {
            let m = r
                .iter()
                .fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
            let e: Vec<f64> = r.iter().map(|&v| (f64::from(v) - m).exp()).collect();
            let s: f64 = e.iter().sum();
            e.into_iter().map(move |v| (v / s) as f32)
        })
        .collect();
    let runs = reps(o.quick, 11);
    let ours = median_time(3, runs, budget(o.quick, 10), || {
        let s = x.softmax(-1);
        s.realize();
        black_box(&s);
    });
    let np = numpy(
        &format!(
            "x = inp(0, {n}, {n})\ndef op():\n    e = np.exp(x - x.max(-1, keepdims=True))\n    \
             return e / e.sum(-1, keepdims=True)\n"
        ),
        &[&xv],
        3,
        runs,
        budget(o.quick, 5),
    );
    let load = format!("x = inp(0, {n}, {n})\n");
    let others = py_refs(
        &format!("{load}def op():\n    return torch.softmax(x, -1)\n"),
        Some(&format!(
            "{load}def op():\n    return x.softmax(-1).realize()\n"
        )),
        &[&xv],
        Unit::Ms,
        3,
        runs,
        budget(o.quick, 5),
        &|w| max_rel_err(&got, w) < 1e-4,
    );
    Row {
        name: format!("softmax(-1) {n}x{n} f32"),
        secs: ours,
        unit: Unit::Ms,
        refs: [
            vec![Reference::numpy(np, Unit::Ms, |w| {
                max_rel_err(&got, w) < 1e-4
            })],
            others,
        ]
        .concat(),
        note: check(max_rel_err(&got, &exact) < 1e-4, "vs f64 softmax"),
    }
}

/// Spot-checks `got`, the valid stride-1 convolution of `x` (b, cin, h, w) with `w`
/// (cout, cin, k, k), at 64 pseudo-random outputs against f64 sums.
fn conv_spot_check(
    x: &[f32],
    w: &[f32],
    got: &[f32],
    [b, cin, h, wd]: [usize; 4],
    [cout, k]: [usize; 2],
) -> bool {
    let (ho, wo) = (h - k + 1, wd - k + 1);
    if got.len() != b * cout * ho * wo {
        return false;
    }
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    (0..64).all(|_| {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let idx = (s >> 33) as usize % got.len();
        let (n, co, oy, ox) = (
            idx / (cout * ho * wo),
            idx / (ho * wo) % cout,
            idx / wo % ho,
            idx % wo,
        );
        let (mut sum, mut abs) = (0.0f64, 0.0f64);
        for ci in 0..cin {
            for ky in 0..k {
                for kx in 0..k {
                    let xv = x[((n * cin + ci) * h + oy + ky) * wd + ox + kx];
                    let wv = w[((co * cin + ci) * k + ky) * k + kx];
                    let t = f64::from(xv) * f64::from(wv);
                    sum += t;
                    abs += t.abs();
                }
            }
        }
        (f64::from(got[idx]) - sum).abs() <= 1e-4 * abs + 1e-6
    })
}

fn bench_conv(o: &Opts) -> Row {
    const B: usize = 512;
    // (cin, h (= w), cout, k): beautiful_mnist's four convolutions.
    const LAYERS: [(usize, usize, usize, usize); 4] = [
        (1, 28, 32, 5),
        (32, 24, 32, 5),
        (32, 10, 64, 3),
        (64, 8, 64, 3),
    ];
    let runs = reps(o.quick, 5);
    let (mut total, mut flop, mut per_layer, mut wrong) = (0.0, 0.0, vec![], vec![]);
    let (mut conv_inputs, mut first_outputs): (Vec<Vec<f32>>, Vec<Vec<f32>>) = (vec![], vec![]);
    for (i, &(cin, h, cout, k)) in LAYERS.iter().enumerate() {
        let xv = rand_vec(B * cin * h * h, 20 + i as u64);
        let scale = 1.0 / ((cin * k * k) as f32).sqrt();
        let wv: Vec<f32> = rand_vec(cout * cin * k * k, 30 + i as u64)
            .iter()
            .map(|v| v * scale)
            .collect();
        let x = input(&xv, &[B, cin, h, h]);
        let w = input(&wv, &[cout, cin, k, k]);
        conv_inputs.push(xv.clone());
        conv_inputs.push(wv.clone());
        let conv = || x.conv2d(&w, None, 1, 1usize, 1usize, 0usize);
        let got = conv().to_vec::<f32>();
        first_outputs.push(got[..64].to_vec());
        if !conv_spot_check(&xv, &wv, &got, [B, cin, h, h], [cout, k]) {
            wrong.push((i + 1).to_string());
        }
        let t = median_time(3, runs, budget(o.quick, 20), || {
            let y = conv();
            y.realize();
            black_box(&y);
        });
        let ho = (h - k + 1) as f64;
        flop += 2.0 * (B * cout * cin * k * k) as f64 * ho * ho;
        total += t;
        per_layer.push(format!("{:.1}", t * 1e3));
    }
    let mut note = format!("per layer ms: {}", per_layer.join(" / "));
    let torch_code = format!(
        "import torch.nn.functional as F\nL = {layers:?}\n\
         X = [inp(2 * i, {B}, c, h, h) for i, (c, h, co, k) in enumerate(L)]\n\
         W = [inp(2 * i + 1, co, c, k, k) for i, (c, h, co, k) in enumerate(L)]\n\
         def op():\n    return torch.cat([F.conv2d(x, w).reshape(-1)[:64] for x, w in zip(X, W)])\n",
        layers = LAYERS.to_vec()
    );
    let pt = torch(
        &torch_code,
        &conv_inputs.iter().map(Vec::as_slice).collect::<Vec<_>>(),
        3,
        runs,
        budget(o.quick, 20),
    );
    let pt_ref = Reference::torch(pt, Unit::Gflops(flop), |w| {
        w.len() == 4 * 64
            && w.chunks(64)
                .zip(&first_outputs)
                .all(|(a, b)| max_rel_err(a, b) < 1e-4)
    });
    if !wrong.is_empty() {
        let _ = write!(
            note,
            "; {}",
            check(false, &format!("layer {} vs f64", wrong.join(", ")))
        );
    }
    Row {
        name: "conv2d x4 (mnist layers) fwd, bs 512".into(),
        secs: total,
        unit: Unit::Gflops(flop),
        refs: vec![pt_ref],
        note,
    }
}

/// The 20-op chain: a mix of binary ops with constants and unary ops; `first` is the first
/// op's constant (1.0 for the warm chain).
fn chain_with(x: &Tensor, first: f64) -> Tensor {
    let mut y = x.clone();
    for i in 0..20 {
        y = match i % 5 {
            0 if i == 0 => &y + first,
            0 => &y + 1.0,
            1 => &y * 0.5,
            2 => y.relu(),
            3 => &y - 0.25,
            _ => y.neg(),
        };
    }
    y
}

/// [`chain_with`] on plain f32 values.
fn chain_plain(x: &[f32], first: f64) -> Vec<f32> {
    x.iter()
        .map(|&v| {
            (0..20).fold(v, |y, i| match i % 5 {
                0 if i == 0 => y + first as f32,
                0 => y + 1.0,
                1 => y * 0.5,
                2 => y.max(0.0),
                3 => y - 0.25,
                _ => -y,
            })
        })
        .collect()
}

fn bench_latency(o: &Opts) -> Row {
    let xv = rand_vec(16, 7);
    let x = input(&xv, &[4, 4]);
    let got = chain_with(&x, 1.0).to_vec::<f32>();
    let want = chain_plain(&xv, 1.0);
    let runs = reps(o.quick, 2000);
    let ours = median_time(20, runs, budget(o.quick, 3), || {
        let y = chain_with(&x, 1.0);
        y.realize();
        black_box(&y);
    });
    let np = numpy(
        "x = inp(0, 4, 4)\n\
         def op():\n    y = x\n    for i in range(20):\n        m = i % 5\n        \
         if m == 0: y = y + 1.0\n        elif m == 1: y = y * 0.5\n        \
         elif m == 2: y = np.maximum(y, np.float32(0))\n        elif m == 3: y = y - 0.25\n        \
         else: y = -y\n    return y\n",
        &[&xv],
        20,
        runs,
        budget(o.quick, 3),
    );
    let chain = |relu: &str, end: &str| {
        format!(
            "x = inp(0, 4, 4)\n\
             def op():\n    y = x\n    for i in range(20):\n        m = i % 5\n        \
             if m == 0: y = y + 1.0\n        elif m == 1: y = y * 0.5\n        \
             elif m == 2: y = {relu}\n        elif m == 3: y = y - 0.25\n        \
             else: y = -y\n    return y{end}\n"
        )
    };
    let others = py_refs(
        &chain("torch.relu(y)", ""),
        Some(&chain("y.relu()", ".realize()")),
        &[&xv],
        Unit::Us,
        20,
        runs,
        budget(o.quick, 3),
        &|w| max_rel_err(&got, w) < 1e-6,
    );
    Row {
        name: "20-op chain on 4x4, warm realize".into(),
        secs: ours,
        unit: Unit::Us,
        refs: [
            vec![Reference::numpy(np, Unit::Us, |w| {
                max_rel_err(&got, w) < 1e-6
            })],
            others,
        ]
        .concat(),
        note: check(max_rel_err(&got, &want) < 1e-6, "vs loop"),
    }
}

/// The `latency` chain through a `Jit`: replays of the captured kernel, vs the same chain
/// built and realized without it, and PyTorch eager (all in this run).
fn bench_jit_latency(o: &Opts) -> Row {
    let xv = rand_vec(16, 7);
    let x = input(&xv, &[4, 4]);
    let want = chain_plain(&xv, 1.0);
    let runs = reps(o.quick, 2000);
    let mut jit = Jit::new(|t: &[Tensor]| vec![chain_with(&t[0], 1.0)]);
    let mut got = vec![];
    for _ in 0..3 {
        got = jit
            .call(std::slice::from_ref(&x))
            .expect("the chain replays")[0]
            .to_vec::<f32>();
    }
    let replays = jit.replays();
    let ours = median_time(20, runs, budget(o.quick, 3), || {
        black_box(
            jit.call(std::slice::from_ref(&x))
                .expect("the chain replays"),
        );
    });
    let replayed = jit.replays() > replays;
    let plain = median_time(20, runs, budget(o.quick, 3), || {
        let y = chain_with(&x, 1.0);
        y.realize();
        black_box(&y);
    });
    let chain = "x = inp(0, 4, 4)\n\
         def op():\n    y = x\n    for i in range(20):\n        m = i % 5\n        \
         if m == 0: y = y + 1.0\n        elif m == 1: y = y * 0.5\n        \
         elif m == 2: y = torch.relu(y)\n        elif m == 3: y = y - 0.25\n        \
         else: y = -y\n    return y\n";
    let pt = torch(chain, &[&xv], 20, runs, budget(o.quick, 3));
    Row {
        name: "20-op chain on 4x4, Jit replay".into(),
        secs: ours,
        unit: Unit::Us,
        refs: vec![
            Reference::timed("without Jit (warm realize)", plain, Unit::Us, true),
            Reference::torch(pt, Unit::Us, |w| max_rel_err(&got, w) < 1e-6),
        ],
        note: if replayed {
            check(max_rel_err(&got, &want) < 1e-6, "vs loop")
        } else {
            check(false, "the Jit did not replay")
        },
    }
}

fn bench_latency_cold(o: &Opts) -> Row {
    // Every run gets a constant never used before in this process: a kernel never compiled.
    static RUN: AtomicU32 = AtomicU32::new(0);
    let next = || 1.0 + f64::from(RUN.fetch_add(1, Ordering::Relaxed) + 1) / 4096.0;
    let xv = rand_vec(16, 7);
    let x = input(&xv, &[4, 4]);
    // Warm-up (the compiler's own first-use costs), checked.
    let c = next();
    let got = chain_with(&x, c).to_vec::<f32>();
    let mut note = check(max_rel_err(&got, &chain_plain(&xv, c)) < 1e-6, "vs loop");
    let mut compiles = vec![];
    let runs = reps(o.quick, 50);
    let ours = median_time(5, runs, budget(o.quick, 5), || {
        let before = compile_count();
        black_box(chain_with(&x, next()).to_vec::<f32>());
        compiles.push(compile_count() - before);
    });
    let (lo, hi) = (
        compiles.iter().copied().min().unwrap_or(0),
        compiles.iter().copied().max().unwrap_or(0),
    );
    if lo == 0 {
        note = "NOT COLD: a run compiled no kernel".into();
    } else if note.is_empty() {
        note = if lo == hi {
            format!("{lo} kernel(s) compiled per run")
        } else {
            format!("{lo}..{hi} kernels compiled per run")
        };
    }
    Row {
        name: "20-op chain on 4x4, cold (new kernel)".into(),
        secs: ours,
        unit: Unit::Us,
        refs: vec![],
        note,
    }
}

// ---------------------------------------------------------------------------------------------
// output

/// One line of the table / one JSON object: a row with one of its references (or none).
struct Line<'a> {
    row: &'a Row,
    reference: Option<&'a Reference>,
}

impl Line<'_> {
    fn note(&self) -> String {
        let r = self.reference.map_or("", |r| r.note.as_str());
        match (self.row.note.is_empty(), r.is_empty()) {
            (_, true) => self.row.note.clone(),
            (true, false) => r.to_string(),
            (false, false) => format!("{}; {r}", self.row.note),
        }
    }
}

fn lines(row: &Row) -> Vec<Line<'_>> {
    if row.refs.is_empty() {
        vec![Line {
            row,
            reference: None,
        }]
    } else {
        row.refs
            .iter()
            .map(|r| Line {
                row,
                reference: Some(r),
            })
            .collect()
    }
}

fn print_header() {
    println!(
        "| {:<38} | {:>11} | {:<7} | {:>10} | {:<17} | {:>10} | {:>10} | {:>6} | note",
        "benchmark", "tinygrad-rs", "unit", "ms", "reference", "ref value", "ref ms", "ratio"
    );
    println!(
        "|{:-<40}|{:->13}|{:-<9}|{:->12}|{:-<19}|{:->12}|{:->12}|{:->8}|------",
        "", "", "", "", "", "", "", ""
    );
}

fn print_line(l: &Line) {
    let r = l.row;
    let na = || "n/a".to_string();
    let (rname, rval, rms, ratio) = match l.reference {
        None => (na(), na(), na(), na()),
        Some(x) => match x.measured {
            None => (x.name.clone(), na(), na(), na()),
            Some((secs, v)) => (
                x.name.clone(),
                format!("{v:.2}"),
                format!("{:.3}", secs * 1e3),
                r.ratio(x).map_or_else(na, |q| format!("{q:.2}x")),
            ),
        },
    };
    println!(
        "| {:<38} | {:>11.2} | {:<7} | {:>10.3} | {:<17} | {:>10} | {:>10} | {:>6} | {}",
        r.name,
        r.ours(),
        r.unit.label(),
        r.secs * 1e3,
        rname,
        rval,
        rms,
        ratio,
        l.note()
    );
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_num(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v}"),
        _ => "null".into(),
    }
}

/// The rows as a JSON array (see the module documentation).
fn to_json(rows: &[Row]) -> String {
    let objects: Vec<String> = rows
        .iter()
        .flat_map(lines)
        .map(|l| {
            let r = l.row;
            format!(
                "  {{\"name\": {}, \"unit\": {}, \"unit_value\": {}, \"ours_ms\": {}, \
                 \"ref_name\": {}, \"ref_ms\": {}, \"ratio\": {}, \"note\": {}}}",
                json_str(&r.name),
                json_str(r.unit.label()),
                json_num(Some(r.ours())),
                json_num(Some(r.secs * 1e3)),
                l.reference.map_or("null".into(), |x| json_str(&x.name)),
                json_num(l.reference.and_then(|x| x.measured).map(|(s, _)| s * 1e3)),
                json_num(l.reference.and_then(|x| r.ratio(x))),
                json_str(&l.note()),
            )
        })
        .collect();
    format!("[\n{}\n]\n", objects.join(",\n"))
}

/// A benchmark: its row, or `None` when it can't run here (it prints why).
type BenchFn = Box<dyn Fn(&Opts) -> Option<Row>>;

/// The benchmarks: key (selects it), part of `--quick`, function.
fn benches() -> Vec<(&'static str, bool, BenchFn)> {
    vec![
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
    ]
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
