//! Fusion: how many kernels common expressions schedule into (tinygrad's behaviour).

use tinygrad_tensor::{DType, Tensor};

fn randn(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n)
        .map(|i| ((i * 7919 % 113) as f32) / 50.0 - 1.0)
        .collect();
    Tensor::from_slice(&data, shape)
}

fn kernels(t: &Tensor) -> usize {
    Tensor::schedule(&[t]).len()
}

#[test]
fn elementwise_chain_is_one_kernel() {
    let (a, b, c) = (randn(&[4, 4]), randn(&[4, 4]), randn(&[4, 4]));
    assert_eq!(kernels(&((&a * &b) + &c).relu().exp()), 1);
}

#[test]
fn mul_then_full_sum_is_one_kernel() {
    let (a, b) = (randn(&[8, 8]), randn(&[8, 8]));
    assert_eq!(kernels(&(&a * &b).sum(None)), 1);
}

#[test]
fn reduce_then_elementwise_is_one_kernel() {
    let (a, b) = (randn(&[4, 8]), randn(&[4]));
    assert_eq!(kernels(&(a.sum(1isize) + &b)), 1);
}

#[test]
fn matmul_then_relu_is_one_kernel() {
    let (a, b) = (randn(&[4, 8]), randn(&[8, 3]));
    assert_eq!(kernels(&a.matmul(&b).relu()), 1);
}

#[test]
fn elementwise_on_views_is_one_kernel() {
    let a = randn(&[4, 6]);
    let views = [
        a.permute(&[1, 0]),
        a.reshape(&[6, 4]),
        a.reshape(&[4, 1, 6]).expand(&[4, 3, 6]),
        a.shrink(&[(1, 3), (2, 5)]),
        a.flip(&[0, 1]),
        a.pad(&[(1, 2), (0, 3)], 0.0),
    ];
    for v in &views {
        assert_eq!(kernels(&(v * 2.0 + 1.0)), 1, "{v:?}");
    }
}

#[test]
fn contiguous_is_its_own_kernel() {
    let a = randn(&[4, 4]);
    let x = a.permute(&[1, 0]).contiguous();
    assert_eq!(kernels(&x), 1);
    assert_eq!(kernels(&(&x + 1.0)), 2);
}

#[test]
fn softmax_computes_exp_once() {
    // max, exp(x - max) (stored: the sum and the division both read it, and recomputing an exp
    // costs more than storing it), sum, division
    let a = randn(&[4, 16]);
    let sched = Tensor::schedule(&[&a.softmax(-1)]);
    assert_eq!(sched.len(), 4, "softmax took {} kernels", sched.len());
    let exps: usize = sched
        .iter()
        .map(|k| {
            k.ast
                .toposort()
                .iter()
                .filter(|u| u.op() == tinygrad_tensor::Ops::Exp2)
                .count()
        })
        .sum();
    assert_eq!(exps, 1, "softmax evaluates exp in {exps} places");
}

#[test]
fn cheap_shared_nodes_stay_fused() {
    // `x * 2 + 1` read by two kernels (a sum and an elementwise use) is recomputed in both:
    // one buffer, no transcendental
    let a = randn(&[8, 32]);
    let y = &a * 2.0 + 1.0;
    let out = &y - &y.sum_keepdim(1isize);
    assert_eq!(kernels(&out), 2);
}

#[test]
fn realized_input_is_not_recomputed() {
    let a = randn(&[4, 4]);
    let b = (&a + 1.0).cast(DType::FLOAT32);
    b.realize();
    assert_eq!(kernels(&(&b * 2.0)), 1);
}
