//! A few training steps of a small convnet on real MNIST digits (a subset of the main job's
//! committed `examples/data/mnist.gz`) lower the loss.

use std::io::Read;

use tinygrad_tensor::nn::optim::{self, Optimizer};
use tinygrad_tensor::nn::{Conv2d, Linear, Module, get_parameters};
use tinygrad_tensor::{Dims, Reduction, Tensor, impl_parameters};

struct Net {
    c1: Conv2d,
    l1: Linear,
}
impl_parameters!(Net { c1, l1 });

impl Module for Net {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self
            .c1
            .forward(x)
            .relu()
            .max_pool2d(2, Dims::default(), 1, 0, false);
        self.l1.forward(&h.flatten(1, -1))
    }
}

/// The first `per_class` digits of each class: images `(n, 1, 28, 28)` in [0, 1] and labels.
fn digits(per_class: usize) -> (Vec<f32>, Vec<i32>) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/data/mnist.gz");
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).expect("the committed mnist.gz"))
        .read_to_end(&mut bytes)
        .expect("a valid gzip file");
    assert_eq!(
        bytes.len(),
        10_000 * 785,
        "10,000 records of label + 784 pixels"
    );
    let (mut x, mut y) = (vec![], vec![]);
    let mut taken = [0usize; 10];
    for rec in bytes.chunks(785) {
        let d = rec[0] as usize;
        if taken[d] < per_class {
            taken[d] += 1;
            x.extend(rec[1..].iter().map(|&k| f32::from(k) / 255.0));
            y.push(d as i32);
        }
    }
    (x, y)
}

#[test]
fn a_few_training_steps_on_real_digits_lower_the_loss() {
    let (xs, ys) = digits(8);
    let n = ys.len();
    assert_eq!(n, 80);
    let x = Tensor::from_slice(&xs, &[n, 1, 28, 28]);
    let y = Tensor::from_slice(&ys, &[n]);
    Tensor::manual_seed(7);
    let net = Net {
        c1: Conv2d::new(1, 4, 3),
        l1: Linear::new(4 * 13 * 13, 10),
    };
    let mut opt = optim::adam(get_parameters(&net), 0.01);
    let _train = Tensor::train(true);
    let mut losses = vec![];
    for _ in 0..6 {
        opt.zero_grad();
        let loss = net
            .forward(&x)
            .sparse_categorical_crossentropy(&y, -1, 0.0, Reduction::Mean);
        loss.backward();
        opt.step_with(&[&loss]);
        losses.push(loss.item::<f32>());
    }
    assert!(
        losses[0] > 2.0 && losses[5] < losses[0] * 0.6,
        "loss did not go down: {losses:?}"
    );
}
