//! The CPU's native convolution kernels: depthwise convolutions (`groups` = channels, float32:
//! `tinygrad_runtime::depthwise`; the golden `conv2d_depthwise_*` cases in `nn_ops.rs` check
//! its values against numpy) and the zero padding of a large convolution's input
//! (`tinygrad_runtime::pad`). Here their values and gradients (the IR formulation's, and the
//! padding's adjoint) equal REF's, where the IR computes everything, and a `Jit` replays them.

use tinygrad_tensor::{Axis, Jit, Tensor};

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i + seed) * 37 % 101) as f32 - 50.0) / 40.0)
        .collect()
}

/// The forward values and the gradients of x, weight and bias on `dev`.
fn run(dev: &str) -> Vec<Vec<f32>> {
    let (bs, c, h, w) = (2, 3, 9, 20);
    let x = Tensor::from_slice(&values(bs * c * h * w, 1), &[bs, c, h, w])
        .to(dev)
        .requires_grad(true);
    let k = Tensor::from_slice(&values(c * 9, 2), &[c, 1, 3, 3])
        .to(dev)
        .requires_grad(true);
    let b = Tensor::from_slice(&values(c, 3), &[c])
        .to(dev)
        .requires_grad(true);
    let y = x.conv2d(&k, Some(&b), c, 2, 1, 1);
    let r = Tensor::from_slice(&values(y.numel(), 4), &y.shape()).to(dev);
    (&y * &r).sum(Axis::All).backward();
    vec![
        y.to_vec::<f32>(),
        x.grad().expect("x's gradient").to_vec::<f32>(),
        k.grad().expect("the weight's gradient").to_vec::<f32>(),
        b.grad().expect("the bias's gradient").to_vec::<f32>(),
    ]
}

#[test]
fn gradients_equal_the_irs() {
    let (cpu, reference) = (run("CPU"), run("REF"));
    for (what, (a, b)) in ["value", "x grad", "weight grad", "bias grad"]
        .iter()
        .zip(cpu.iter().zip(&reference))
    {
        assert_eq!(a.len(), b.len(), "{what}");
        for (i, (u, v)) in a.iter().zip(b).enumerate() {
            assert!(
                (u - v).abs() <= 1e-5 * (1.0 + v.abs()),
                "{what}[{i}]: CPU {u} vs REF {v}"
            );
        }
    }
}

/// A convolution large enough to realize its padded input (>= 2^22 flops): the native
/// padding, then the GEMM path; values and gradients as REF computes them.
#[test]
fn a_large_padded_convolution_equals_refs_with_gradients() {
    let run = |dev: &str| -> Vec<Vec<f32>> {
        let x0 = Tensor::from_slice(&values(16 * 40 * 36, 6), &[1, 16, 40, 36]).to(dev);
        let x = x0.requires_grad(true);
        let k = Tensor::from_slice(&values(16 * 16 * 9, 7), &[16, 16, 3, 3])
            .to(dev)
            .requires_grad(true);
        // a computed input (relu), padded by (1, 2) rows and (2, 1) columns
        let y = x.relu().conv2d(&k, None, 1, 1, 1, [2, 1, 1, 2]);
        let r = Tensor::from_slice(&values(y.numel(), 8), &y.shape()).to(dev);
        (&y * &r).sum(Axis::All).backward();
        vec![
            y.to_vec::<f32>(),
            x.grad().expect("x's gradient").to_vec::<f32>(),
            k.grad().expect("the weight's gradient").to_vec::<f32>(),
        ]
    };
    let (cpu, reference) = (run("CPU"), run("REF"));
    for (what, (a, b)) in ["value", "x grad", "weight grad"]
        .iter()
        .zip(cpu.iter().zip(&reference))
    {
        assert_eq!(a.len(), b.len(), "{what}");
        for (i, (u, v)) in a.iter().zip(b).enumerate() {
            assert!(
                (u - v).abs() <= 1e-4 * (1.0 + v.abs()),
                "{what}[{i}]: CPU {u} vs REF {v}"
            );
        }
    }
}

#[test]
fn a_jit_replays_the_native_kernel() {
    let k = Tensor::from_slice(&values(4 * 25, 5), &[4, 1, 5, 5]);
    let mut jit = Jit::new(|x: &[Tensor]| vec![x[0].conv2d(&k, None, 4, 1, 1, 2).relu()]);
    for seed in 0..4 {
        let xv = values(4 * 12 * 30, seed * 7);
        let x = Tensor::from_slice(&xv, &[1, 4, 12, 30]);
        let got = jit.call(std::slice::from_ref(&x)).unwrap()[0].to_vec::<f32>();
        let want = x
            .to("REF")
            .conv2d(&k.to("REF"), None, 4, 1, 1, 2)
            .relu()
            .to_vec::<f32>();
        assert_eq!(got.len(), want.len());
        for (i, (u, v)) in got.iter().zip(&want).enumerate() {
            assert!(
                (u - v).abs() <= 1e-5 * (1.0 + v.abs()),
                "call {seed} [{i}]: {u} vs {v}"
            );
        }
    }
}
