//! `qr` and `svd` against numpy (`tests/golden/linalg_cases.json`, from `gen_linalg.py`) on
//! every device: the values after normalizing signs (see the generator's docstring), and the
//! defining properties (orthogonal factors, reconstruction of the input).

mod common;

use serde_json::Value;
use tinygrad_tensor::Tensor;

const ATOL: f64 = 1e-4;
const RTOL: f64 = 1e-3;

/// Row-major matrices: `batch` of them, `rows x cols` each.
#[derive(Clone, Debug)]
struct Mats {
    data: Vec<f64>,
    batch: usize,
    rows: usize,
    cols: usize,
}

impl Mats {
    fn from_json(v: &Value) -> Mats {
        let mut shape = common::usizes(&v["shape"]);
        if shape.len() < 2 {
            shape.insert(0, 1);
        }
        let data: Vec<f64> = v["data"]
            .as_array()
            .expect("data")
            .iter()
            .map(|x| x.as_f64().expect("number"))
            .collect();
        Mats::new(data, &shape)
    }

    fn from_tensor(t: &Tensor) -> Mats {
        let mut shape = t.shape();
        if shape.len() < 2 {
            shape.insert(0, 1);
        }
        Mats::new(t.to_f64_vec(), &shape)
    }

    /// Vectors (`S`, shape `(*batch, k)`; read as matrices) as one row per batch.
    fn rows_of(mut m: Mats) -> Mats {
        m.batch *= m.rows;
        m.rows = 1;
        m
    }

    fn new(data: Vec<f64>, shape: &[usize]) -> Mats {
        let n = shape.len();
        assert!(n >= 2, "a matrix shape, got {shape:?}");
        let (rows, cols) = (shape[n - 2], shape[n - 1]);
        let batch = data.len() / (rows * cols).max(1);
        Mats {
            data,
            batch,
            rows,
            cols,
        }
    }

    fn at(&self, b: usize, i: usize, j: usize) -> f64 {
        self.data[(b * self.rows + i) * self.cols + j]
    }

    fn at_mut(&mut self, b: usize, i: usize, j: usize) -> &mut f64 {
        &mut self.data[(b * self.rows + i) * self.cols + j]
    }

    fn scale_col(&mut self, b: usize, j: usize, s: f64) {
        for i in 0..self.rows {
            *self.at_mut(b, i, j) *= s;
        }
    }

    fn scale_row(&mut self, b: usize, i: usize, s: f64) {
        for j in 0..self.cols {
            *self.at_mut(b, i, j) *= s;
        }
    }
}

fn sign(x: f64) -> f64 {
    if x < 0.0 { -1.0 } else { 1.0 }
}

/// `got` within tolerance of `want` on the entries `keep(i, j)` selects.
fn compare(
    what: &str,
    got: &Mats,
    want: &Mats,
    keep: impl Fn(usize, usize) -> bool,
) -> Result<(), String> {
    if (got.batch, got.rows, got.cols) != (want.batch, want.rows, want.cols) {
        return Err(format!(
            "{what}: shape {:?}, expected {:?}",
            (got.batch, got.rows, got.cols),
            (want.batch, want.rows, want.cols)
        ));
    }
    for b in 0..got.batch {
        for i in 0..got.rows {
            for j in 0..got.cols {
                let (g, w) = (got.at(b, i, j), want.at(b, i, j));
                // (false for NaN)
                let close = (g - w).abs() <= ATOL + RTOL * w.abs();
                if keep(i, j) && !close {
                    return Err(format!("{what}[{b}][{i}][{j}] = {g}, expected {w}"));
                }
            }
        }
    }
    Ok(())
}

/// `a @ b` per batch (`a` is `m x k` and `b` `k x n`; only the first `k` columns of `a` and
/// rows of `b` are used when `k` is given).
fn matmul(a: &Mats, b: &Mats, k: usize) -> Mats {
    let mut out = vec![0.0; a.batch * a.rows * b.cols];
    for n in 0..a.batch {
        for i in 0..a.rows {
            for j in 0..b.cols {
                out[(n * a.rows + i) * b.cols + j] =
                    (0..k).map(|t| a.at(n, i, t) * b.at(n, t, j)).sum();
            }
        }
    }
    Mats {
        data: out,
        batch: a.batch,
        rows: a.rows,
        cols: b.cols,
    }
}

fn transpose(a: &Mats) -> Mats {
    let mut data = Vec::with_capacity(a.data.len());
    for b in 0..a.batch {
        for j in 0..a.cols {
            for i in 0..a.rows {
                data.push(a.at(b, i, j));
            }
        }
    }
    Mats {
        data,
        batch: a.batch,
        rows: a.cols,
        cols: a.rows,
    }
}

/// `q` (square) is orthogonal: `q^T q` is the identity.
fn orthogonal(what: &str, q: &Mats) -> Result<(), String> {
    let qtq = matmul(&transpose(q), q, q.rows);
    for b in 0..q.batch {
        for i in 0..q.cols {
            for j in 0..q.cols {
                let want = if i == j { 1.0 } else { 0.0 };
                if (qtq.at(b, i, j) - want).abs() > ATOL {
                    return Err(format!(
                        "{what} is not orthogonal: ({what}^T {what})[{b}][{i}][{j}] = {}",
                        qtq.at(b, i, j)
                    ));
                }
            }
        }
    }
    Ok(())
}

fn check_qr(case: &Value, x: &Tensor) -> Result<(), String> {
    let (q, r) = x.qr();
    let outs = case["outputs"].as_array().expect("outputs");
    let (mut q, mut r) = (Mats::from_tensor(&q), Mats::from_tensor(&r));
    let (mut wq, mut wr) = (Mats::from_json(&outs[0]), Mats::from_json(&outs[1]));
    let input = Mats::from_json(&case["input"]);
    orthogonal("Q", &q)?;
    compare("Q @ R", &matmul(&q, &r, q.cols), &input, |_, _| true)?;
    compare("R below the diagonal", &r, &r.clone(), |i, j| i > j)?;
    for (i, j) in (0..r.rows).flat_map(|i| (0..i.min(r.cols)).map(move |j| (i, j))) {
        for b in 0..r.batch {
            if r.at(b, i, j).abs() > ATOL {
                return Err(format!(
                    "R[{b}][{i}][{j}] = {} is below the diagonal",
                    r.at(b, i, j)
                ));
            }
        }
    }
    let k = r.rows.min(r.cols);
    for b in 0..r.batch {
        for i in 0..k {
            let (s, ws) = (sign(r.at(b, i, i)), sign(wr.at(b, i, i)));
            r.scale_row(b, i, s);
            q.scale_col(b, i, s);
            wr.scale_row(b, i, ws);
            wq.scale_col(b, i, ws);
        }
    }
    compare("R", &r, &wr, |_, _| true)?;
    compare("Q", &q, &wq, |_, j| j < k)
}

fn check_svd(case: &Value, x: &Tensor) -> Result<(), String> {
    let full = case["full_matrices"].as_bool().expect("full_matrices");
    let (u, s, vh) = x.svd(full);
    let outs = case["outputs"].as_array().expect("outputs");
    let (mut u, s, mut vh) = (
        Mats::from_tensor(&u),
        Mats::rows_of(Mats::from_tensor(&s)),
        Mats::from_tensor(&vh),
    );
    let (mut wu, ws, mut wvh) = (
        Mats::from_json(&outs[0]),
        Mats::rows_of(Mats::from_json(&outs[1])),
        Mats::from_json(&outs[2]),
    );
    compare("S", &s, &ws, |_, _| true)?;
    let k = ws.cols;
    if full {
        orthogonal("U", &u)?;
        orthogonal("Vh^T", &transpose(&vh))?;
    }
    // U diag(S) Vh
    let mut us = u.clone();
    for b in 0..us.batch {
        for j in 0..k {
            us.scale_col(b, j, s.at(b, 0, j));
        }
    }
    let input = Mats::from_json(&case["input"]);
    compare("U diag(S) Vh", &matmul(&us, &vh, k), &input, |_, _| true)?;
    // signs: the reference's largest entry of each column of U made positive, on both sides
    for b in 0..u.batch {
        for j in 0..k {
            let p = (0..wu.rows)
                .max_by(|&a, &c| wu.at(b, a, j).abs().total_cmp(&wu.at(b, c, j).abs()))
                .expect("rows");
            let (g, w) = (sign(u.at(b, p, j)), sign(wu.at(b, p, j)));
            u.scale_col(b, j, g);
            vh.scale_row(b, j, g);
            wu.scale_col(b, j, w);
            wvh.scale_row(b, j, w);
        }
    }
    compare("U", &u, &wu, |_, j| j < k)?;
    compare("Vh", &vh, &wvh, |i, _| i < k)
}

fn run_suite(device: &str) {
    let cases = common::load_cases("linalg_cases.json");
    let cases: Vec<&Value> = cases.iter().collect();
    common::run_cases(device, "linalg", &cases, |case| {
        let input = &case["input"];
        let data: Vec<f32> = input["data"]
            .as_array()
            .expect("data")
            .iter()
            .map(|v| v.as_f64().expect("number") as f32)
            .collect();
        let x = Tensor::from_slice_on(&data, &common::usizes(&input["shape"]), device);
        match case["op"].as_str().expect("op") {
            "qr" => check_qr(case, &x),
            "svd" => check_svd(case, &x),
            other => Err(format!("unknown op {other}")),
        }
    });
}

#[test]
fn linalg_golden_cpu() {
    run_suite("CPU");
}

#[test]
fn linalg_golden_ref() {
    run_suite("REF");
}

#[test]
fn linalg_golden_webgpu() {
    common::on_webgpu("linalg_golden_webgpu", run_suite);
}

#[test]
#[should_panic(expected = "qr: expected a float tensor with two or more dims, got shape [3]")]
fn qr_needs_a_matrix() {
    let _ = Tensor::from_slice(&[1.0f32, 2., 3.], &[3]).qr();
}

#[test]
#[should_panic(
    expected = "svd: expected a float tensor with two or more dims, got shape [2, 2] int32"
)]
fn svd_needs_floats() {
    let _ = Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2]).svd(true);
}
