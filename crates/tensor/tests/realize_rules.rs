//! Realize decisions that keep a kernel's cost independent of the depth of the graph before it:
//! an expensive node used by several kernels (or broadcast inside a reduction) becomes a buffer,
//! so later kernels load it instead of recomputing every earlier layer.

use tinygrad_tensor::nn::{Embedding, LayerNorm, Linear, Module};
use tinygrad_tensor::{Axis, Ops, Tensor};

/// A pre-norm residual MLP block, as in a transformer: `x + W2 relu(W1 LN(x))`, then a LayerNorm.
struct Block {
    ln: LayerNorm,
    up: Linear,
    down: Linear,
    out_ln: LayerNorm,
}

impl Block {
    fn new(dim: usize) -> Block {
        let b = Block {
            ln: LayerNorm::new(&[dim]),
            up: Linear::new(dim, 2 * dim),
            down: Linear::new(2 * dim, dim),
            out_ln: LayerNorm::new(&[dim]),
        };
        for t in [
            b.ln.weight.as_ref(),
            b.ln.bias.as_ref(),
            Some(&b.up.weight),
            b.up.bias.as_ref(),
            Some(&b.down.weight),
            b.down.bias.as_ref(),
            b.out_ln.weight.as_ref(),
            b.out_ln.bias.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            t.realize();
        }
        b
    }

    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self
            .down
            .forward(&self.up.forward(&self.ln.forward(x)).relu());
        self.out_ln.forward(&(x + &h))
    }
}

/// The argument count of every kernel scheduled for a `depth`-block stack on a (3, 12, 32) input.
fn schedule_args(depth: usize) -> Vec<usize> {
    Tensor::manual_seed(0);
    let blocks: Vec<Block> = (0..depth).map(|_| Block::new(32)).collect();
    let x = Tensor::randn(&[3, 12, 32]);
    x.realize();
    let mut h = x;
    for b in &blocks {
        h = b.forward(&h);
    }
    Tensor::schedule(&[&h])
        .iter()
        .map(|item| item.bufs.len())
        .collect()
}

#[test]
fn kernel_count_and_arguments_do_not_grow_with_depth() {
    let one = schedule_args(1);
    let two = schedule_args(2);
    let deep = schedule_args(24);
    let per_layer = two.len() - one.len();
    assert!(per_layer > 0, "a block adds kernels: {one:?} vs {two:?}");
    assert_eq!(
        deep.len(),
        one.len() + 23 * per_layer,
        "kernels per block change with depth: 1 block {one:?}, 2 blocks {two:?}, 24 blocks {}",
        deep.len()
    );
    // the last block's kernels read as many buffers at depth 24 as at depth 1
    assert_eq!(
        &deep[deep.len() - one.len()..],
        &one[..],
        "the last block's kernels' argument counts grow with depth"
    );
    let widest = deep.iter().max().copied().unwrap_or(0);
    let widest_one = one.iter().max().copied().unwrap_or(0);
    assert_eq!(
        widest, widest_one,
        "a kernel at depth 24 reads more buffers than any at depth 1"
    );
}

#[test]
fn deep_stack_matches_the_same_stack_with_contiguous_after_each_block() {
    // the realize rules change where values are stored, never what they are
    Tensor::manual_seed(1);
    let blocks: Vec<Block> = (0..6).map(|_| Block::new(16)).collect();
    let x = Tensor::randn(&[2, 5, 16]);
    x.realize();
    let (mut fused, mut stored) = (x.clone(), x);
    for b in &blocks {
        fused = b.forward(&fused);
        stored = b.forward(&stored).contiguous();
        stored.realize();
    }
    let (a, b) = (fused.to_vec::<f32>(), stored.to_vec::<f32>());
    for (i, (p, q)) in a.iter().zip(&b).enumerate() {
        assert!(
            (p - q).abs() <= 1e-5 + 1e-5 * q.abs(),
            "element {i}: {p} vs {q}"
        );
    }
}

/// The reductions each kernel scheduled for `ts` computes.
fn reduces_per_kernel(ts: &[&Tensor]) -> Vec<usize> {
    Tensor::schedule(ts)
        .iter()
        .map(|k| {
            k.ast
                .toposort()
                .iter()
                .filter(|u| u.op() == Ops::Reduce)
                .count()
        })
        .collect()
}

/// Two reductions side by side — a ResNet block's residual branch plus its projection shortcut,
/// `conv(x) + conv(y)` — get a kernel each (one loop nest with two reductions takes no GEMM
/// path: ResNet-50 ran 4x slower), with the same values; a one-hot gather beside a reduction is
/// a load and stays in the kernel.
#[test]
fn sibling_reductions_get_a_kernel_each() {
    Tensor::manual_seed(2);
    let (a, b) = (Tensor::randn(&[64, 32]), Tensor::randn(&[32, 48]));
    let (c, d) = (Tensor::randn(&[64, 16]), Tensor::randn(&[16, 48]));
    for t in [&a, &b, &c, &d] {
        t.realize();
    }
    let y = (a.matmul(&b) + c.matmul(&d)).relu();
    assert_eq!(reduces_per_kernel(&[&y]), vec![1, 1], "two matmuls added");
    let first = a.matmul(&b).contiguous();
    first.realize();
    let want = (&first + c.matmul(&d)).relu().to_vec::<f32>();
    let got = y.to_vec::<f32>();
    for (i, (p, q)) in got.iter().zip(&want).enumerate() {
        assert!(
            (p - q).abs() <= 1e-5 + 1e-5 * q.abs(),
            "element {i}: {p} vs {q}"
        );
    }
    // an embedding lookup (a one-hot sum that becomes a load) plus a matmul: one kernel
    let emb = Embedding::new(10, 48);
    emb.weight.realize();
    let ids = Tensor::from_slice(&[3i32, 7], &[2]);
    let (q, r) = (Tensor::randn(&[2, 5]), Tensor::randn(&[5, 48]));
    for t in [&ids, &q, &r] {
        t.realize();
    }
    let z = emb.forward(&ids) + q.matmul(&r);
    assert_eq!(reduces_per_kernel(&[&z]), vec![1], "a gather and a matmul");
}

/// A large reduction inside another large reduction (a BatchNorm's variance around its mean)
/// is split once and computed once: both split reductions read the same split mean. The
/// variance's split used to keep the unsplit mean inside it, so the mean was computed twice —
/// and everything after a training step's BatchNorm ran twice (beautiful_mnist: the last two
/// convolutions, the second BatchNorm and the classifier, ~70 ms of a ~860 ms step).
#[test]
fn nested_split_reductions_are_computed_once() {
    Tensor::manual_seed(5);
    let x = Tensor::randn(&[64, 1024]);
    x.realize();
    let mean = x.mean(Axis::All);
    let centered = &x - &mean;
    let var = (&centered * &centered).mean(Axis::All);
    // each split reduction is two kernels (partials, then their sum): 2 for the mean, 2 for the
    // variance; the mean's output is reused by the variance
    let kernels = Tensor::schedule(&[&mean, &var]);
    assert_eq!(kernels.len(), 4, "mean and variance of 65,536 elements");
    let xs: Vec<f64> = x.to_vec::<f32>().iter().map(|&v| v as f64).collect();
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    let v = xs.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / xs.len() as f64;
    Tensor::try_realize_all(&[&mean, &var]).expect("realize on the CPU");
    let (gm, gv) = (mean.item::<f32>() as f64, var.item::<f32>() as f64);
    assert!((gm - m).abs() < 1e-5, "mean {gm} vs {m}");
    assert!(
        (gv - v).abs() < 1e-5 * v.abs().max(1.0),
        "variance {gv} vs {v}"
    );
}

/// `Detach` only steers gradients: `(x - m.detach()) @ w` and `(x - m) @ w` are one computation
/// and one kernel, as in tinygrad, whose scheduler drops `DETACH` first.
#[test]
fn a_detached_and_an_attached_copy_of_a_graph_are_one_kernel() {
    Tensor::manual_seed(6);
    let (x, w) = (Tensor::randn(&[48, 32]), Tensor::randn(&[32, 40]));
    x.realize();
    w.realize();
    let m = x.mean_keepdim(0);
    let a = (&x - &m.detach()).matmul(&w);
    let b = (&x - &m).matmul(&w);
    let reduces: usize = reduces_per_kernel(&[&a, &b]).iter().sum();
    assert_eq!(reduces, 2, "the mean and one matmul");
    Tensor::try_realize_all(&[&a, &b]).expect("realize on the CPU");
    assert_eq!(a.to_vec::<f32>(), b.to_vec::<f32>());
}

/// A split sum of products with many outputs (a weight gradient: 72 x 64 outputs, K = 32768)
/// runs as partial GEMMs of at least 1024 products each, not 128 partials of 256: short
/// partials spent their time storing and summing partial results (beautiful_mnist's third
/// convolution's weight gradient: 14.3 -> 11.0 ms).
#[test]
fn split_weight_gradients_keep_long_partials() {
    Tensor::manual_seed(7);
    let (k, m, n) = (32768usize, 72usize, 64usize);
    let (x, y) = (Tensor::randn(&[k, m]), Tensor::randn(&[k, n]));
    x.realize();
    y.realize();
    let g = x.transpose(0, 1).matmul(&y);
    let kernels = Tensor::schedule(&[&g]);
    assert_eq!(kernels.len(), 2, "partial GEMMs, then their sum");
    let partial_k: i64 = kernels[0]
        .ast
        .toposort()
        .iter()
        .filter(|u| u.op() == Ops::Reduce)
        .flat_map(|r| r.src()[1..].to_vec())
        .map(|range| range.s(0).as_int().expect("a constant range"))
        .product();
    assert!(partial_k >= 1024, "partials of {partial_k} products");
    check_xt_y(
        &x,
        &y,
        &g,
        &[(0, 0), (7, 63), (71, 5), (40, 40)],
        "K = 32768",
    );
}

/// Checks elements `points` of `g = x^T y` (`x`: `[k, m]`, `y`: `[k, n]`) against `f64` sums.
fn check_xt_y(x: &Tensor, y: &Tensor, g: &Tensor, points: &[(usize, usize)], label: &str) {
    let (k, m, n) = (x.shape()[0], x.shape()[1], y.shape()[1]);
    let (xs, ys) = (x.to_vec::<f32>(), y.to_vec::<f32>());
    let got = g.to_vec::<f32>();
    for &(i, j) in points {
        let want: f64 = (0..k)
            .map(|p| xs[p * m + i] as f64 * ys[p * n + j] as f64)
            .sum();
        let v = got[i * n + j] as f64;
        assert!(
            (v - want).abs() < 1e-3 * want.abs().max(10.0),
            "{label}, [{i}, {j}]: {v} vs {want}"
        );
    }
}

/// A sum of products with many outputs is split from K = 16384 on (not 32768, the threshold
/// of other reductions): beautiful_mnist's fourth-convolution weight gradient (576 x 64
/// outputs, K = 18432) ran as one GEMM in 12.3 ms, as 16 partials of 1152 (one task per
/// batch) and their sum in 10.4. Below it, one kernel.
#[test]
fn weight_gradients_split_from_16384_products() {
    Tensor::manual_seed(9);
    let (m, n) = (72usize, 64usize);
    for (k, kernels_want) in [(18432usize, 2usize), (8192, 1)] {
        let (x, y) = (Tensor::randn(&[k, m]), Tensor::randn(&[k, n]));
        x.realize();
        y.realize();
        let g = x.transpose(0, 1).matmul(&y);
        assert_eq!(
            Tensor::schedule(&[&g]).len(),
            kernels_want,
            "K = {k}: kernels"
        );
        check_xt_y(&x, &y, &g, &[(0, 0), (7, 63), (71, 5)], &format!("K = {k}"));
    }
}

/// `relu`'s gradient masks with its output (`relu(x) > 0` is `x > 0`), so a layer's
/// pre-activation has one reader and the ReLU fuses into the kernel that computes it. The same
/// graph with the mask derived from the pre-activation (tinygrad's formula written out) keeps
/// the pre-activation as a buffer and runs the ReLU as a kernel of its own. The gradients agree.
#[test]
fn relu_masks_with_its_output_and_fuses_into_its_producer() {
    Tensor::manual_seed(8);
    let x = Tensor::randn(&[64, 48]);
    let w = Tensor::randn(&[48, 32]).requires_grad(true);
    let w2 = Tensor::randn(&[32, 16]).requires_grad(true);
    for t in [&x, &w, &w2] {
        t.realize();
    }
    let grads = |act: &dyn Fn(&Tensor) -> Tensor| {
        let loss = act(&x.matmul(&w)).matmul(&w2).square().sum(Axis::All);
        loss.gradient(&[&w, &w2])
    };
    let with_relu = grads(&|p| p.relu());
    let written_out = grads(&|p| p.gt(0.0).where_(p, 0.0));
    let count = |g: &[Tensor]| Tensor::schedule(&g.iter().collect::<Vec<_>>()).len();
    assert!(
        count(&with_relu) < count(&written_out),
        "relu: {} kernels, written out: {}",
        count(&with_relu),
        count(&written_out)
    );
    for (a, b) in with_relu.iter().zip(&written_out) {
        for (p, q) in a.to_vec::<f32>().iter().zip(b.to_vec::<f32>()) {
            assert!((p - q).abs() <= 1e-5 * q.abs().max(1.0), "{p} vs {q}");
        }
    }
}
