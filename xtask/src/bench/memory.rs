//! The memory-bound rows: `elementwise`, `add`, `sum`, `sum_axis1`/`sum_axis0`, `softmax`, with
//! the plain Rust streams they are compared with.

use super::*;

const BIG: usize = 1 << 24;

pub(super) fn bench_elementwise(o: &Opts) -> Row {
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

pub(super) fn bench_add(o: &Opts) -> Row {
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

pub(super) fn bench_sum(o: &Opts) -> Row {
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
pub(super) fn bench_sum_axis(axis: usize, o: &Opts) -> Row {
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

pub(super) fn bench_softmax(o: &Opts) -> Row {
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
