//! The CPU row-reduction path (`tinygrad_runtime::row_reduce`): sums, maxima and means along
//! contiguous rows and down blocks of contiguous columns — plain, sliced, permuted so outputs
//! are stored out of order, full reductions split in two stages, NaN/inf/signed-zero values — on `CPU` against the same ops on `REF` (and
//! against sums in `f64`). Each case checks whether the path ran.

use std::sync::Mutex;

use proptest::prelude::*;
use tinygrad_codegen::row_reduce::{Layout, plan_row_reduce};
use tinygrad_runtime::row_reduce;
use tinygrad_tensor::{Axis, Tensor};

/// The launch counter is process-wide: the tests (which all launch reductions) run one at a
/// time, each holding this for its whole body.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn data(n: usize, seed: u64) -> Vec<f32> {
    // a fixed pseudo-random sequence in [-1, 1)
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

/// Runs `f` on `x` on CPU and on a REF copy; the results must agree (`tol` relative to the
/// magnitude, equal values when 0) and the CPU run must take the path exactly when
/// `must_use_path` (unless the path is off: `CPU_ROW_REDUCE=0`).
fn check(name: &str, x: &Tensor, f: impl Fn(&Tensor) -> Tensor, tol: f32, must_use_path: bool) {
    let before = row_reduce::launch_count();
    let got = f(x);
    let got_v = got.to_vec::<f32>();
    let ran = row_reduce::launch_count() > before;
    let want = f(&x.to("REF"));
    assert_eq!(got.shape(), want.shape(), "{name}: shapes");
    let want_v = want.to_vec::<f32>();
    for (i, (a, b)) in got_v.iter().zip(&want_v).enumerate() {
        // exact: equal values (the sign of a zero max is order-dependent in REF, numpy and
        // PyTorch alike; the path's own rule is asserted below)
        let same = if tol == 0.0 {
            a == b || (a.is_nan() && b.is_nan())
        } else {
            a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= tol * (1.0 + b.abs())
        };
        assert!(same, "{name}: element {i}: CPU {a:?} vs REF {b:?}");
    }
    if !row_reduce::enabled() {
        println!("{name}: values checked; the row-reduction path is off (CPU_ROW_REDUCE=0)");
        assert!(!ran, "{name}: the path ran while off");
        return;
    }
    assert_eq!(
        ran,
        must_use_path,
        "{name}: the row-reduction path {} ({})",
        if ran { "ran" } else { "did not run" },
        row_reduce::isa_name()
    );
}

#[test]
fn sums_maxima_and_means_of_rows_match_ref() {
    let _serial = serial();
    let (rows, k) = (300, 100);
    let x = Tensor::from_slice(&data(rows * k, 1), &[rows, k]);
    check("sum(1)", &x, |t| t.sum(1), 1e-4, true);
    check("max(1)", &x, |t| t.max(1), 0.0, true);
    check("mean(-1)", &x, |t| t.mean(-1), 1e-4, true);
    check("sum keepdim", &x, |t| t.sum_keepdim(1), 1e-4, true);
    // the row sums against f64 sums of the same data
    let v = data(rows * k, 1);
    let got = x.sum(1).to_vec::<f32>();
    for (r, g) in got.iter().enumerate() {
        let exact: f64 = v[r * k..(r + 1) * k].iter().map(|&a| f64::from(a)).sum();
        assert!(
            (f64::from(*g) - exact).abs() < 1e-4,
            "row {r}: {g} vs {exact}"
        );
    }
}

#[test]
fn rows_of_every_tail_length_match_ref() {
    let _serial = serial();
    // lengths around the 16- and 64-lane blocks, each with enough rows to take the path
    for k in [64, 65, 79, 80, 127, 128, 129, 1000, 1023] {
        let rows = 16384usize.div_ceil(k) + 3;
        let x = Tensor::from_slice(&data(rows * k, k as u64), &[rows, k]);
        check(&format!("sum of {k}"), &x, |t| t.sum(1), 1e-4, true);
        check(&format!("max of {k}"), &x, |t| t.max(1), 0.0, true);
    }
}

#[test]
fn sliced_and_permuted_rows_keep_their_places() {
    let _serial = serial();
    // a slice along the row: rows start at an offset, with a stride larger than their length
    let x = Tensor::from_slice(&data(200 * 700, 2), &[200, 700]);
    check(
        "x[:, 13:613].sum(1)",
        &x,
        |t| t.shrink(&[(0, 200), (13, 613)]).sum(1),
        1e-4,
        true,
    );
    // rows stored out of order: (a, b, k) -> (b, a, k), reduced over k
    let y = Tensor::from_slice(&data(6 * 9 * 515, 3), &[6, 9, 515]);
    check(
        "permute(1,0,2).max(2)",
        &y,
        |t| t.permute(&[1, 0, 2]).max(2),
        0.0,
        true,
    );
    check(
        "permute(1,0,2).mean(2)",
        &y,
        |t| t.permute(&[1, 0, 2]).mean(2),
        1e-4,
        true,
    );
}

#[test]
fn reductions_that_are_not_rows_stay_generic_and_correct() {
    let _serial = serial();
    let x = Tensor::from_slice(&data(300 * 100, 4), &[300, 100]);
    // a fused producer: the load is not the reduced value
    check("(x*x).sum(1)", &x, |t| (t * t).sum(1), 1e-4, false);
    // short rows
    let s = Tensor::from_slice(&data(4096 * 8, 5), &[4096, 8]);
    check("sum of 8", &s, |t| t.sum(1), 1e-4, false);
    // a flipped row (coefficient -1 along the reduction)
    check("flip(1).max(1)", &x, |t| t.flip(&[1]).max(1), 0.0, false);
}

#[test]
fn column_reductions_match_ref() {
    let _serial = serial();
    let x = Tensor::from_slice(&data(513 * 300, 8), &[513, 300]);
    // the path adds a column's rows in order from -0.0, as REF does: equal values (the
    // generic kernels, with the path off, add in another order)
    let in_order = if row_reduce::enabled() { 0.0 } else { 1e-4 };
    check("sum(0)", &x, |t| t.sum(0), in_order, true);
    check("max(0)", &x, |t| t.max(0), 0.0, true);
    check("mean(0)", &x, |t| t.mean(0), in_order, true);
    // the middle axis of a 3-D tensor: four groups of 70 columns, 80 rows each
    let y = Tensor::from_slice(&data(4 * 80 * 70, 9), &[4, 80, 70]);
    check("sum(1) of 3-D", &y, |t| t.sum(1), 1e-4, true);
    check("max(1) of 3-D", &y, |t| t.max(1), 0.0, true);
    // columns of a slice; columns whose outputs are 4 apart (the last permute)
    check(
        "x[:, 7:207].sum(0)",
        &x,
        |t| t.shrink(&[(0, 513), (7, 207)]).sum(0),
        1e-4,
        true,
    );
    check(
        "permute(0,2,1).sum(2)",
        &y,
        |t| t.permute(&[0, 2, 1]).sum(2),
        1e-4,
        true,
    );
    check(
        "permute(2,0,1).max(2)",
        &y,
        |t| t.permute(&[2, 0, 1]).max(2),
        0.0,
        true,
    );
    // the column sums against f64
    let v = data(513 * 300, 8);
    let got = x.sum(0).to_vec::<f32>();
    for (c, g) in got.iter().enumerate() {
        let exact: f64 = (0..513).map(|r| f64::from(v[r * 300 + c])).sum();
        assert!(
            (f64::from(*g) - exact).abs() < 1e-4,
            "column {c}: {g} vs {exact}"
        );
    }
    // specials down a column
    let mut w = data(200 * 100, 10);
    w[50 * 100 + 3] = f32::NAN;
    for r in 0..200 {
        w[r * 100 + 4] = -0.0;
        w[r * 100 + 5] = -0.0;
    }
    w[199 * 100 + 5] = 0.0;
    let z = Tensor::from_slice(&w, &[200, 100]);
    check("max(0) with specials", &z, |t| t.max(0), 0.0, true);
    let m = z.max(0).to_vec::<f32>();
    assert!(m[3].is_nan(), "a NaN in column 3");
    assert_eq!(m[4].to_bits(), (-0.0f32).to_bits(), "all -0.0");
    if row_reduce::enabled() {
        assert_eq!(m[5].to_bits(), 0, "-0.0 and one +0.0");
    }
}

#[test]
fn full_reductions_split_into_row_stages() {
    let _serial = serial();
    let n = 1 << 20;
    let v = data(n, 6);
    let x = Tensor::from_slice(&v, &[n]);
    check("sum()", &x, |t| t.sum(Axis::All), 1e-4, true);
    check("max()", &x, |t| t.max(Axis::All), 0.0, true);
    let exact: f64 = v.iter().map(|&a| f64::from(a)).sum();
    let got = x.sum(Axis::All).item::<f32>();
    assert!((f64::from(got) - exact).abs() < 1e-2, "{got} vs {exact}");
}

#[test]
fn columns_spread_over_several_output_axes_are_one_column_block() {
    let _serial = serial();
    // sum(axis=0) of [128, 64, 32, 3, 3]: the output's four axes continue each other in the
    // input and the output, so they are 18,432 columns (the last axis alone is 3, too narrow
    // for the path): a weight gradient's second split stage
    let x = Tensor::from_slice(&data(128 * 18432, 11), &[128, 64, 32, 3, 3]);
    // the kernel keeps four output ranges; the planner joins them
    let items = Tensor::schedule(&[&x.sum(0)]);
    assert_eq!(items.len(), 1);
    let plan = plan_row_reduce(&items[0].ast).expect("a column reduction");
    assert_eq!(
        plan.layout,
        Layout::Columns {
            cols: 18432,
            stride: 18432,
            out_stride: 1
        }
    );
    check("sum(0) of [128,64,32,3,3]", &x, |t| t.sum(0), 1e-4, true);
    // permuted outputs continue each other in the input but not in the output: they must not
    // join (whichever kernel runs, the values stay right)
    let f = |t: &Tensor| t.sum(0).permute(&[1, 0, 3, 2]).contiguous();
    let (got, want) = (f(&x).to_vec::<f32>(), f(&x.to("REF")).to_vec::<f32>());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
            "permuted: element {i}: {g} vs {w}"
        );
    }
}

#[test]
fn large_sums_of_products_split_with_their_partials_outermost() {
    let _serial = serial();
    // a weight gradient's shape: 128 x 32 outputs, each a sum of 32,768 products, split in two
    // stages with the partials [div, 128, 32]; every output against a sum in f64 (REF's
    // interpreter would take minutes over 134M products in a debug build)
    let (m, n, k) = (128, 32, 32768);
    let (av, bv) = (data(m * k, 12), data(k * n, 13));
    let a = Tensor::from_slice(&av, &[m, k]);
    let b = Tensor::from_slice(&bv, &[k, n]);
    // two stages; the second sums the partials' columns: [div, 128 x 32], div outermost (with
    // tinygrad's [128 x 32, div] it would sum rows)
    let items = Tensor::schedule(&[&a.matmul(&b)]);
    assert_eq!(items.len(), 2, "the reduction is split");
    let plan = plan_row_reduce(&items[1].ast).expect("the second stage is a column reduction");
    assert!(
        matches!(
            plan.layout,
            Layout::Columns {
                cols: 4096,
                stride: 4096,
                out_stride: 1
            }
        ),
        "{:?}",
        plan.layout
    );
    let before = row_reduce::launch_count();
    let got = a.matmul(&b).to_vec::<f32>();
    if row_reduce::enabled() {
        // the second stage sums the partials' columns on the path
        assert!(
            row_reduce::launch_count() > before,
            "the second stage ran generic"
        );
    }
    let mut exact = vec![0f64; m * n];
    for i in 0..m {
        for p in 0..k {
            let x = f64::from(av[i * k + p]);
            for j in 0..n {
                exact[i * n + j] += x * f64::from(bv[p * n + j]);
            }
        }
    }
    for (i, (g, w)) in got.iter().zip(&exact).enumerate() {
        assert!((f64::from(*g) - w).abs() < 1e-2, "element {i}: {g} vs {w}");
    }
}

#[test]
fn special_values_follow_the_ir() {
    let _serial = serial();
    let (rows, k) = (256, 70);
    let mut v = data(rows * k, 7);
    v[5 * k] = f32::NAN; // first element of row 5
    v[6 * k + 69] = f32::NAN; // last element of row 6
    v[7 * k + 33] = f32::INFINITY;
    for e in &mut v[8 * k..9 * k] {
        *e = f32::NEG_INFINITY;
    }
    for e in &mut v[9 * k..10 * k] {
        *e = -0.0;
    }
    for e in &mut v[10 * k..11 * k] {
        *e = -0.0;
    }
    v[10 * k + 50] = 0.0;
    let x = Tensor::from_slice(&v, &[rows, k]);
    check("max with specials", &x, |t| t.max(1), 0.0, true);
    check("sum with specials", &x, |t| t.sum(1), 1e-4, true);
    let m = x.max(1).to_vec::<f32>();
    assert!(m[5].is_nan() && m[6].is_nan(), "NaN rows: {:?}", &m[5..7]);
    assert_eq!(m[7], f32::INFINITY);
    assert_eq!(m[8], f32::NEG_INFINITY);
    assert_eq!(m[9].to_bits(), (-0.0f32).to_bits(), "all -0.0");
    // the path's rule (deterministic whatever the vector width): +0.0 wins over -0.0
    if row_reduce::enabled() {
        assert_eq!(m[10].to_bits(), 0, "-0.0 and one +0.0");
    }
    let s = x.sum(1).to_vec::<f32>();
    assert!(s[5].is_nan() && s[7] == f32::INFINITY && s[8] == f32::NEG_INFINITY);
    assert_eq!(s[9].to_bits(), (-0.0f32).to_bits(), "a sum of -0.0 is -0.0");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Random 3-D tensors, a random permutation of the outer axes and a slice of the last one,
    /// reduced along the last axis or the middle one by sum, max or mean: CPU (on the path
    /// wherever it applies) equals REF.
    #[test]
    fn random_row_reductions_match_ref(
        a in 1usize..6,
        b in 1usize..40,
        k in 64usize..700,
        start in 0usize..9,
        swap in any::<bool>(),
        along_rows in any::<bool>(),
        op in 0u8..3,
        seed in 0u64..1000,
    ) {
        let _serial = serial();
        let x = Tensor::from_slice(&data(a * b * (k + start), seed), &[a, b, k + start]);
        let f = |t: &Tensor| {
            let t = t.shrink(&[(0, a), (0, b), (start, start + k)]);
            let t = if swap { t.permute(&[1, 0, 2]) } else { t };
            // along the last axis (rows), or the middle one (columns)
            let axis = if along_rows { 2 } else { 1 };
            match op {
                0 => t.sum(axis),
                1 => t.max(axis),
                _ => t.mean(axis),
            }
        };
        let before = row_reduce::launch_count();
        let got = f(&x).to_vec::<f32>();
        let ran = row_reduce::launch_count() > before;
        let want = f(&x.to("REF")).to_vec::<f32>();
        // large enough for the path, and a real reduction (not over one element)
        let reduced = if along_rows { k } else if swap { a } else { b };
        if row_reduce::enabled() && a * b * k >= row_reduce::MIN_ELEMENTS && reduced >= 2 {
            prop_assert!(ran, "the path did not run");
        }
        prop_assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            // a max is exact; sums of up to 700 values in [-1, 1) in two summation orders
            // (REF adds in sequence, rounding each partial sum) differ by up to ~1e-4
            let tol = if op == 1 { 0.0 } else { 2e-4 + 1e-5 * w.abs() };
            prop_assert!((g - w).abs() <= tol, "[{}]: CPU {} vs REF {}", i, g, w);
        }
    }
}
