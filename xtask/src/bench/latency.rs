//! The latency rows: `latency`, `jit_latency`, `latency_cold` (a 20-op chain on a small tensor).

use super::*;

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

pub(super) fn bench_latency(o: &Opts) -> Row {
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
pub(super) fn bench_jit_latency(o: &Opts) -> Row {
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

pub(super) fn bench_latency_cold(o: &Opts) -> Row {
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
