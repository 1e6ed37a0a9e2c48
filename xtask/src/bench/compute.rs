//! The compute-bound rows: `matmul*` and `conv`.

use super::*;

pub(super) fn bench_matmul(n: usize, o: &Opts) -> Row {
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

pub(super) fn bench_conv(o: &Opts) -> Row {
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
