//! Python references (numpy, PyTorch, tinygrad): see `pyref`.

use super::*;

/// Times `code` (Python defining `op()`) with `lib` on `inputs`, on tinygrad-rs's thread count.
pub(super) fn py(
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
pub(super) fn py_refs(
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
pub(super) fn numpy(
    code: &str,
    inputs: &[&[f32]],
    min_runs: usize,
    max_runs: usize,
    budget: Duration,
) -> Result<PyRun, String> {
    py(Lib::Numpy, code, inputs, min_runs, max_runs, budget)
}

/// [`py`] with PyTorch.
pub(super) fn torch(
    code: &str,
    inputs: &[&[f32]],
    min_runs: usize,
    max_runs: usize,
    budget: Duration,
) -> Result<PyRun, String> {
    py(Lib::Torch, code, inputs, min_runs, max_runs, budget)
}
