//! `nn::attention::slot_attention` (one native CPU kernel for a decode step's attention over
//! KV cache slots) against the same attention written in tensor ops — scores, a mask of each
//! row's own positions (and window), softmax, weighted values — over several rows at different
//! positions, grouped query heads, a sliding window, fewer rows than slots and head sizes that
//! are and are not a multiple of 16; each row's result the same bit for bit alone or in a
//! batch; misuse panics naming the op.

mod common;

use tinygrad_tensor::nn::attention::{slot_attention, slot_attention_runs_on};
use tinygrad_tensor::{DType, Tensor};

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let x = (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 9;
            (x % 4001) as f32 / 1000.0 - 2.0
        })
        .collect()
}

/// The attention in tensor ops: `(rows, heads, 1, hd)`.
fn with_tensor_ops(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    pos: &[i32],
    window: Option<usize>,
    scale: f64,
) -> Tensor {
    let (qs, ks) = (q.shape(), k.shape());
    let (rows, heads, hd, kv, ctx) = (qs[0], qs[1], qs[3], ks[1], ks[2]);
    let group = heads / kv;
    let part = |t: &Tensor| {
        t.shrink(&[(0, rows), (0, kv), (0, ctx), (0, hd)])
            .unsqueeze(2)
    };
    let q5 = q.reshape(&[rows as isize, kv as isize, group as isize, 1, hd as isize]);
    let scores = q5.matmul(&part(k).transpose(-1, -2)) * scale;
    let cols = Tensor::arange_on(0.0, ctx as f64, 1.0, DType::INT32, q.device()).reshape(&[
        1,
        1,
        1,
        1,
        ctx as isize,
    ]);
    let p = Tensor::from_slice(pos, &[rows, 1, 1, 1, 1]);
    let mut seen = cols.le(&p);
    if let Some(w) = window {
        seen = seen.logical_and(&cols.gt(&(&p - w as i32)));
    }
    seen.where_(&scores, f64::NEG_INFINITY)
        .softmax(-1)
        .matmul(&part(v))
        .reshape(&[rows as isize, heads as isize, 1, hd as isize])
}

/// Rows, slots, heads, key/value heads, head_dim, context, window, positions.
type Case = (
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    Option<usize>,
    &'static [i32],
);

#[test]
fn slot_attention_equals_the_tensor_op_attention() {
    if !slot_attention_runs_on("CPU") {
        println!("skipped: slot_attention does not run here (CPU_ATTENTION=0)");
        return;
    }
    let cases: &[Case] = &[
        (1, 1, 9, 3, 64, 40, None, &[17]),
        (3, 4, 9, 3, 64, 40, None, &[0, 39, 12]),
        (2, 2, 4, 4, 24, 16, Some(5), &[15, 3]),
        (4, 4, 8, 2, 256, 12, Some(6), &[11, 0, 5, 6]),
        (2, 8, 2, 1, 7, 9, None, &[8, 2]),
    ];
    for &(rows, slots, heads, kv, hd, ctx, window, pos) in cases {
        let what = format!(
            "{rows} rows, {slots} slots, {heads}/{kv} heads of {hd}, context {ctx}, window {window:?}"
        );
        let q = Tensor::from_slice(&values(rows * heads * hd, 1), &[rows, heads, 1, hd]);
        let k = Tensor::from_slice(&values(slots * kv * ctx * hd, 2), &[slots, kv, ctx, hd]);
        let v = Tensor::from_slice(&values(slots * kv * ctx * hd, 3), &[slots, kv, ctx, hd]);
        let p = Tensor::from_slice(pos, &[rows]);
        let got = slot_attention(&q, &k, &v, &p, window, 0.125).unwrap();
        assert_eq!(got.shape(), vec![rows, heads, 1, hd], "{what}");
        let got = got.to_vec::<f32>();
        let want = with_tensor_ops(&q, &k, &v, pos, window, 0.125).to_vec::<f32>();
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() <= 2e-5 * (1.0 + b.abs()),
                "{what}: [{i}] {a} vs {b}"
            );
        }
        // each row alone (a batch of one, its own slot as slot 0) gives the same bits
        for (r, &at) in pos.iter().enumerate() {
            let one = |t: &Tensor| {
                let s = t.shape();
                t.shrink(&[(r, r + 1), (0, s[1]), (0, s[2]), (0, s[3])])
                    .contiguous()
            };
            let alone = slot_attention(
                &one(&q),
                &one(&k),
                &one(&v),
                &Tensor::from_slice(&[at], &[1]),
                window,
                0.125,
            )
            .unwrap()
            .to_vec::<f32>();
            let n = heads * hd;
            assert_eq!(alone, got[r * n..(r + 1) * n], "{what}: row {r} alone");
        }
    }
}

/// A call that must panic.
type Misuse = Box<dyn Fn()>;

#[test]
fn slot_attention_misuse_panics_naming_the_op() {
    if !slot_attention_runs_on("CPU") {
        println!("skipped: slot_attention does not run here (CPU_ATTENTION=0)");
        return;
    }
    common::install_quiet_hook();
    let q = Tensor::zeros(&[2, 4, 1, 8], DType::FLOAT32);
    let k = Tensor::zeros(&[2, 2, 5, 8], DType::FLOAT32);
    let p = Tensor::from_slice(&[0i32, 1], &[2]);
    let cases: Vec<(&str, Misuse)> = vec![
        ("more rows than slots", {
            let (q, k) = (Tensor::zeros(&[3, 4, 1, 8], DType::FLOAT32), k.clone());
            let p = Tensor::from_slice(&[0i32, 1, 2], &[3]);
            Box::new(move || drop(slot_attention(&q, &k, &k, &p, None, 1.0)))
        }),
        ("heads not a multiple of the key/value heads", {
            let (q, k) = (Tensor::zeros(&[2, 3, 1, 8], DType::FLOAT32), k.clone());
            let p = p.clone();
            Box::new(move || drop(slot_attention(&q, &k, &k, &p, None, 1.0)))
        }),
        ("float positions", {
            let (q, k) = (q.clone(), k.clone());
            let p = Tensor::from_slice(&[0.0f32, 1.0], &[2]);
            Box::new(move || drop(slot_attention(&q, &k, &k, &p, None, 1.0)))
        }),
        ("a window of 0", {
            let (q, k, p) = (q.clone(), k.clone(), p.clone());
            Box::new(move || drop(slot_attention(&q, &k, &k, &p, Some(0), 1.0)))
        }),
    ];
    for (what, f) in cases {
        let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err(what);
        let m = common::panic_message(e.as_ref());
        assert!(m.contains("slot_attention"), "{what}: {m}");
    }
    // a position outside the context: NaN for that row, the other row computed
    let bad = Tensor::from_slice(&[5i32, 1], &[2]);
    let out = slot_attention(&q, &k, &k, &bad, None, 1.0)
        .unwrap()
        .to_vec::<f32>();
    assert!(out[..32].iter().all(|x| x.is_nan()) && out[32..].iter().all(|x| x.is_finite()));
}
