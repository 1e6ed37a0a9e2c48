//! Timing and checking helpers: medians of timed runs, bracketing, inputs, error measures, run
//! counts and budgets, the thread count.

use super::*;

/// Median of `f`'s wall time in seconds over at least `min_runs` runs and at most `max_runs`,
/// stopping early once `budget` has been spent.
pub(super) fn median_time(
    min_runs: usize,
    max_runs: usize,
    budget: Duration,
    mut f: impl FnMut(),
) -> f64 {
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
pub(super) fn bracketed<R>(
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

pub(super) fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Deterministic pseudo-random floats in [-1, 1).
pub(super) fn rand_vec(n: usize, seed: u64) -> Vec<f32> {
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
pub(super) fn input(data: &[f32], shape: &[usize]) -> Tensor {
    let t = Tensor::from_slice(data, shape);
    t.realize();
    t
}

/// The largest difference, relative to the largest magnitude of `b` (infinite when the lengths
/// differ).
pub(super) fn max_rel_err(a: &[f32], b: &[f32]) -> f64 {
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
pub(super) fn max_abs_err(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    a.iter()
        .zip(b)
        .map(|(x, y)| (f64::from(*x) - f64::from(*y)).abs())
        .fold(0.0, f64::max)
}

pub(super) fn check(ok: bool, what: &str) -> String {
    if ok {
        String::new()
    } else {
        format!("WRONG RESULT ({what})")
    }
}

pub(super) fn reps(quick: bool, full: usize) -> usize {
    if quick { full.div_ceil(3).max(3) } else { full }
}

pub(super) fn budget(quick: bool, secs: u64) -> Duration {
    Duration::from_secs(if quick { secs.div_ceil(3) } else { secs })
}

/// The number of threads tinygrad-rs's CPU kernels use (as `tinygrad_runtime::cpu_threads`):
/// `CPU_THREADS`, else the available parallelism.
pub(super) fn threads() -> usize {
    std::env::var("CPU_THREADS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
