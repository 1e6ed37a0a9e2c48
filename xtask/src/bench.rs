//! `cargo xtask bench`: the performance table. Every row is the median of several timed runs
//! (after a warm-up run that compiles the kernels), next to a reference measured in the same
//! process, so the ratio is meaningful on a noisy shared machine.
//!
//! Rows:
//! - matmul N x N x N f32 (N = 256, 512, 1024): GFLOP/s, vs `matrixmultiply::sgemm` (threaded,
//!   the same number of cores as tinygrad-rs's thread pool).
//! - `(a*b+c).relu().exp()` on 16M f32: GB/s moved (3 inputs + 1 output), vs a plain Rust loop
//!   over slices writing a reused output.
//! - `sum` of 16M f32: GB/s read, vs a plain Rust loop with 16 accumulators (one core).
//! - warm realize latency of a 20-op elementwise chain on a 4x4 tensor (build + realize), µs.
//!
//! Each result is also checked against the reference (a wrong fast kernel is reported).

use std::hint::black_box;
use std::time::{Duration, Instant};

use tinygrad_tensor::Tensor;

/// Options from the command line.
pub struct Opts {
    /// Fewer repetitions (a quick look, noisier).
    pub quick: bool,
    /// Only rows whose name contains one of these (all when empty).
    pub filter: Vec<String>,
}

struct Row {
    name: String,
    ours: f64,
    unit: &'static str,
    reference: Option<(String, f64)>,
    higher_is_better: bool,
    note: String,
}

/// Median of `f`'s wall time over at least `min_runs` runs and at most `max_runs`, stopping
/// early once `budget` has been spent.
fn median_time(min_runs: usize, max_runs: usize, budget: Duration, mut f: impl FnMut()) -> f64 {
    let mut times = Vec::new();
    let t_all = Instant::now();
    while times.len() < min_runs || (times.len() < max_runs && t_all.elapsed() < budget) {
        let t0 = Instant::now();
        f();
        times.push(t0.elapsed().as_secs_f64());
    }
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

fn bench_matmul(n: usize, o: &Opts) -> Row {
    let (av, bv) = (rand_vec(n * n, 1), rand_vec(n * n, 2));
    let a = Tensor::from_slice(&av, &[n, n]);
    let b = Tensor::from_slice(&bv, &[n, n]);
    let flop = 2.0 * (n as f64).powi(3);
    let got = a.matmul(&b).to_vec::<f32>();
    let runs = reps(o.quick, if n >= 1024 { 7 } else { 15 });
    let ours = median_time(3, runs, Duration::from_secs(20), || {
        let c = a.matmul(&b);
        c.realize();
        black_box(&c);
    });
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
    let reference = median_time(3, runs, Duration::from_secs(10), || {
        sgemm(&mut cv);
        black_box(&cv);
    });
    Row {
        name: format!("matmul {n}x{n}x{n} f32"),
        ours: flop / ours / 1e9,
        unit: "GFLOP/s",
        reference: Some(("matrixmultiply".into(), flop / reference / 1e9)),
        higher_is_better: true,
        note: check(max_rel_err(&got, &cv) < 1e-4, "vs sgemm"),
    }
}

const BIG: usize = 1 << 24;

fn bench_elementwise(o: &Opts) -> Row {
    let (av, bv, cv) = (rand_vec(BIG, 3), rand_vec(BIG, 4), rand_vec(BIG, 5));
    let a = Tensor::from_slice(&av, &[BIG]);
    let b = Tensor::from_slice(&bv, &[BIG]);
    let c = Tensor::from_slice(&cv, &[BIG]);
    let f = || ((&a * &b) + &c).relu().exp();
    let got = f().to_vec::<f32>();
    let runs = reps(o.quick, 15);
    let ours = median_time(3, runs, Duration::from_secs(15), || {
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
    let reference = median_time(3, runs, Duration::from_secs(10), || {
        plain(&mut out);
        black_box(&out);
    });
    let bytes = 4.0 * 4.0 * BIG as f64;
    Row {
        name: "(a*b+c).relu().exp() 16M f32".into(),
        ours: bytes / ours / 1e9,
        unit: "GB/s",
        reference: Some(("Rust loop".into(), bytes / reference / 1e9)),
        higher_is_better: true,
        note: check(max_rel_err(&got, &out) < 1e-6, "vs loop"),
    }
}

fn bench_sum(o: &Opts) -> Row {
    let av = rand_vec(BIG, 6);
    let a = Tensor::from_slice(&av, &[BIG]);
    let got = a.sum(None).item::<f32>();
    let runs = reps(o.quick, 21);
    let ours = median_time(3, runs, Duration::from_secs(10), || {
        let s = a.sum(None);
        s.realize();
        black_box(&s);
    });
    let plain = |x: &[f32]| {
        let mut acc = [0.0f32; 16];
        let chunks = x.chunks_exact(16);
        let rest: f32 = chunks.remainder().iter().sum();
        for ch in chunks {
            for (s, v) in acc.iter_mut().zip(ch) {
                *s += v;
            }
        }
        acc.iter().sum::<f32>() + rest
    };
    let want = plain(&av);
    let reference = median_time(3, runs, Duration::from_secs(5), || {
        black_box(plain(black_box(&av)));
    });
    let exact: f64 = av.iter().map(|&x| x as f64).sum();
    let bytes = 4.0 * BIG as f64;
    Row {
        name: "sum 16M f32".into(),
        ours: bytes / ours / 1e9,
        unit: "GB/s",
        reference: Some(("Rust loop x16 acc".into(), bytes / reference / 1e9)),
        higher_is_better: true,
        note: check(
            (got as f64 - exact).abs() <= 1e-3 * (BIG as f64).sqrt() + (want as f64 - exact).abs(),
            "vs f64 sum",
        ),
    }
}

/// The 20-op chain: a mix of binary ops with constants and unary ops.
fn chain(x: &Tensor) -> Tensor {
    let mut y = x.clone();
    for i in 0..20 {
        y = match i % 5 {
            0 => &y + 1.0,
            1 => &y * 0.5,
            2 => y.relu(),
            3 => &y - 0.25,
            _ => y.neg(),
        };
    }
    y
}

fn bench_latency(o: &Opts) -> Row {
    let x = Tensor::from_slice(&rand_vec(16, 7), &[4, 4]);
    black_box(chain(&x).to_vec::<f32>());
    let runs = reps(o.quick, 2000);
    let ours = median_time(20, runs, Duration::from_secs(3), || {
        let y = chain(&x);
        y.realize();
        black_box(&y);
    });
    Row {
        name: "20-op chain on 4x4, warm realize".into(),
        ours: ours * 1e6,
        unit: "µs",
        reference: None,
        higher_is_better: false,
        note: String::new(),
    }
}

/// Runs the benchmarks selected by `o` and prints the table.
pub fn run(o: &Opts) {
    let selected = |name: &str| o.filter.is_empty() || o.filter.iter().any(|f| name.contains(f));
    type Bench = (&'static str, Box<dyn Fn(&Opts) -> Row>);
    let benches: Vec<Bench> = vec![
        ("matmul256", Box::new(|o| bench_matmul(256, o))),
        ("matmul512", Box::new(|o| bench_matmul(512, o))),
        ("matmul1024", Box::new(|o| bench_matmul(1024, o))),
        ("elementwise", Box::new(bench_elementwise)),
        ("sum", Box::new(bench_sum)),
        ("latency", Box::new(bench_latency)),
    ];
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "tinygrad-rs bench ({threads} hardware threads; median of several runs each{})",
        if o.quick { ", --quick" } else { "" }
    );
    println!();
    println!(
        "| {:<34} | {:>12} | {:<7} | {:<18} | {:>10} | {:>6} |",
        "benchmark", "tinygrad-rs", "unit", "reference", "ref value", "ratio"
    );
    println!(
        "|{:-<36}|{:->14}|{:-<9}|{:-<20}|{:->12}|{:->8}|",
        "", "", "", "", "", ""
    );
    for (key, f) in &benches {
        if !selected(key) {
            continue;
        }
        let r = f(o);
        let (rname, rval, ratio) = match &r.reference {
            Some((n, v)) => {
                let ratio = if r.higher_is_better {
                    r.ours / v
                } else {
                    v / r.ours
                };
                (n.clone(), format!("{v:.2}"), format!("{ratio:.2}x"))
            }
            None => ("-".into(), "-".into(), "-".into()),
        };
        println!(
            "| {:<34} | {:>12.2} | {:<7} | {:<18} | {:>10} | {:>6} | {}",
            r.name, r.ours, r.unit, rname, rval, ratio, r.note
        );
    }
}
