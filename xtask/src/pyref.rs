//! Python references of `cargo xtask bench`: numpy, PyTorch and tinygrad, each run in its own
//! Python process per row, on inputs passed through temporary files.
//!
//! The interpreter: `--python PATH` when given, else, for each library, the first of `python3`
//! on `PATH`, `~/.pyenv/shims/python3`, `/usr/local/bin/python3` and `/usr/bin/python3` that
//! imports it (so numpy, torch and tinygrad may come from different interpreters). A library no
//! interpreter has gives `n/a` with the reason.
//!
//! Each process gets `OPENBLAS_NUM_THREADS`, `OMP_NUM_THREADS` and `MKL_NUM_THREADS` set to
//! tinygrad-rs's thread count (PyTorch also `torch.set_num_threads`), with `OPENBLAS_CORETYPE` and
//! `OPENBLAS_L2_SIZE` removed, and `DEV=CPU` (tinygrad's device; its CPU backend picks its own
//! thread count). A row's code defines `op()`, which computes the result (for
//! tinygrad: realizes it); the timer runs it once to warm up, then times it like our side
//! ([`PY_TIMER`]) and returns the warm-up's result as f32 for the row's correctness check.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// A Python library a row is compared with.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Lib {
    /// numpy (OpenBLAS for matmuls).
    Numpy,
    /// PyTorch on the CPU, fp32.
    Torch,
    /// tinygrad on its CPU device.
    Tinygrad,
    /// onnxruntime's CPU execution provider.
    OnnxRuntime,
}

impl Lib {
    /// The name shown in the table.
    pub fn label(self) -> &'static str {
        match self {
            Lib::Numpy => "numpy",
            Lib::Torch => "PyTorch",
            Lib::Tinygrad => "tinygrad",
            Lib::OnnxRuntime => "onnxruntime",
        }
    }

    fn module(self) -> &'static str {
        match self {
            Lib::Numpy => "numpy",
            Lib::Torch => "torch",
            Lib::Tinygrad => "tinygrad",
            Lib::OnnxRuntime => "onnxruntime",
        }
    }

    fn prelude(self, threads: usize) -> String {
        let common = "\
import sys, time, os
import numpy as np
out, min_runs, max_runs, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
ins = sys.argv[5:]
def np_inp(i, *shape):
    return np.fromfile(ins[i], dtype=np.float32).reshape(shape)
";
        match self {
            Lib::Numpy => format!("{common}inp = np_inp\n"),
            Lib::Torch => format!(
                "{common}import torch\ntorch.set_num_threads({threads})\n\
                 torch.set_grad_enabled(False)\n\
                 def inp(i, *shape):\n    return torch.from_numpy(np_inp(i, *shape).copy())\n"
            ),
            Lib::Tinygrad => format!(
                "{common}from tinygrad import Tensor\n\
                 def inp(i, *shape):\n    return Tensor(np_inp(i, *shape)).realize()\n"
            ),
            Lib::OnnxRuntime => format!(
                "{common}import onnxruntime as ort\n\
                 so = ort.SessionOptions()\n\
                 so.intra_op_num_threads = {threads}\n\
                 so.inter_op_num_threads = 1\n\
                 inp = np_inp\n"
            ),
        }
    }
}

/// After a row's code (which defines `op()`): a warm-up run, then the timed runs; writes the
/// warm-up's result to the output file and prints the median seconds.
const PY_TIMER: &str = "
def _f32(r):
    kind = type(r).__module__.split('.')[0]
    if kind == 'torch':
        r = r.detach().cpu().numpy()
    elif kind == 'tinygrad':
        r = r.numpy()
    return np.asarray(r, dtype=np.float32).reshape(-1)
r = _f32(op())
times = []
t_all = time.perf_counter()
while len(times) < max(min_runs, 1) or (len(times) < max_runs and time.perf_counter() - t_all < budget):
    t0 = time.perf_counter()
    op()
    times.append(time.perf_counter() - t0)
times.sort()
r.tofile(out)
print(repr(times[len(times) // 2]))
";

/// The interpreter `--python` named (set once, before any reference runs).
static PYTHON_OVERRIDE: OnceLock<PathBuf> = OnceLock::new();

/// Uses `path` for every Python reference (`--python PATH`).
pub fn set_python(path: PathBuf) {
    let _ = PYTHON_OVERRIDE.set(path);
}

fn candidates() -> Vec<PathBuf> {
    if let Some(p) = PYTHON_OVERRIDE.get() {
        return vec![p.clone()];
    }
    let mut c = vec![PathBuf::from("python3")];
    if let Some(home) = std::env::var_os("HOME") {
        c.push(Path::new(&home).join(".pyenv/shims/python3"));
    }
    c.push("/usr/local/bin/python3".into());
    c.push("/usr/bin/python3".into());
    c
}

/// Command for `python` with the references' environment.
fn command(python: &Path, threads: usize) -> Command {
    let n = threads.to_string();
    let mut c = Command::new(python);
    c.env_remove("OPENBLAS_CORETYPE")
        .env_remove("OPENBLAS_L2_SIZE")
        .env("OPENBLAS_NUM_THREADS", &n)
        .env("OMP_NUM_THREADS", &n)
        .env("MKL_NUM_THREADS", &n)
        .env("DEV", "CPU")
        .stdin(Stdio::null());
    c
}

/// An interpreter that imports `lib`, and the library's version; `Err`: why there is none.
pub fn find(lib: Lib, threads: usize) -> Result<(PathBuf, String), String> {
    type Found = Result<(PathBuf, String), String>;
    static FOUND: OnceLock<Mutex<Vec<(Lib, Found)>>> = OnceLock::new();
    let cache = FOUND.get_or_init(|| Mutex::new(Vec::new()));
    if let Some((_, f)) = cache
        .lock()
        .expect("python cache")
        .iter()
        .find(|(l, _)| *l == lib)
    {
        return f.clone();
    }
    let module = lib.module();
    let probe = format!("import {module}; print(getattr({module}, '__version__', 'unknown'))");
    let mut tried = Vec::new();
    let mut found: Found = Err(String::new());
    for py in candidates() {
        let out = command(&py, threads)
            .args(["-c", &probe])
            .stderr(Stdio::null())
            .output();
        match out {
            Ok(o) if o.status.success() => {
                let v = String::from_utf8_lossy(&o.stdout).trim().to_string();
                found = Ok((py, v));
                break;
            }
            _ => tried.push(py.display().to_string()),
        }
    }
    if found.is_err() {
        found = Err(format!(
            "{} not installed (tried {})",
            module,
            tried.join(", ")
        ));
    }
    cache
        .lock()
        .expect("python cache")
        .push((lib, found.clone()));
    found
}

/// What a reference measured: its median time and its result.
pub struct PyRun {
    /// Median seconds of `op()`.
    pub secs: f64,
    /// The result, flattened, as f32.
    pub out: Vec<f32>,
}

/// How many runs and how long: at least `min_runs`, at most `max_runs`, stopping early after
/// `budget`.
#[derive(Clone, Copy)]
pub struct Runs {
    /// Runs at least this many times.
    pub min_runs: usize,
    /// Runs at most this many times.
    pub max_runs: usize,
    /// Stops after this long once `min_runs` are done.
    pub budget: Duration,
}

/// Times `code` (Python defining `op()`) with `lib` on `inputs`. `Err`: why there is no number.
pub fn run(
    lib: Lib,
    threads: usize,
    code: &str,
    inputs: &[&[f32]],
    runs: Runs,
) -> Result<PyRun, String> {
    let (python, _) = find(lib, threads)?;
    let dir = std::env::temp_dir().join(format!(
        "tinygrad-rs-bench-{}-{}",
        std::process::id(),
        lib.module()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let res = run_in(&dir, &python, lib, threads, code, inputs, runs);
    // Best effort: a leftover temporary directory is harmless.
    let _ = std::fs::remove_dir_all(&dir);
    res
}

fn run_in(
    dir: &Path,
    python: &Path,
    lib: Lib,
    threads: usize,
    code: &str,
    inputs: &[&[f32]],
    runs: Runs,
) -> Result<PyRun, String> {
    let name = lib.label();
    let io_err = |p: &Path, e: std::io::Error| format!("{name}: {}: {e}", p.display());
    let out = dir.join("out.f32");
    let mut cmd = command(python, threads);
    cmd.arg("-c")
        .arg(format!("{}{code}{PY_TIMER}", lib.prelude(threads)))
        .arg(&out)
        .arg(runs.min_runs.to_string())
        .arg(runs.max_runs.to_string())
        .arg(runs.budget.as_secs_f64().to_string());
    for (i, data) in inputs.iter().enumerate() {
        let p = dir.join(format!("in{i}.f32"));
        let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(&p, bytes).map_err(|e| io_err(&p, e))?;
        cmd.arg(&p);
    }
    let o = cmd
        .output()
        .map_err(|e| format!("{name}: {}: {e}", python.display()))?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        return Err(format!(
            "{name} failed: {}",
            err.lines().last().unwrap_or("no message")
        ));
    }
    let stdout = String::from_utf8_lossy(&o.stdout);
    let secs = stdout
        .lines()
        .last()
        .and_then(|l| l.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .ok_or_else(|| format!("{name}: unexpected output {:?}", stdout.trim()))?;
    let bytes = std::fs::read(&out).map_err(|e| io_err(&out, e))?;
    let out = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok(PyRun { secs, out })
}
