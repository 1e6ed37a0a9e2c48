//! A few training steps of a small convnet on real MNIST digits (a subset of the main job's
//! committed `examples/data/mnist.gz`) lower the loss; the same training data-parallel on two
//! devices gives the same losses.

mod common;

use std::io::Read;

use tinygrad_tensor::nn::optim::{self, Optimizer};
use tinygrad_tensor::nn::{BatchNorm, Conv2d, Linear, Module, get_parameters, get_state_dict};
use tinygrad_tensor::{Dims, Jit, Reduction, Tensor, impl_parameters};

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

/// Held from seeding to the last random initializer: the generator is one per process, and the
/// tests of this file run on parallel threads.
static SEEDING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn seeding() -> std::sync::MutexGuard<'static, ()> {
    SEEDING.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn a_few_training_steps_on_real_digits_lower_the_loss() {
    let (xs, ys) = digits(8);
    let n = ys.len();
    assert_eq!(n, 80);
    let x = Tensor::from_slice(&xs, &[n, 1, 28, 28]);
    let y = Tensor::from_slice(&ys, &[n]);
    let seeded = seeding();
    Tensor::manual_seed(7);
    let net = Net {
        c1: Conv2d::new(1, 4, 3),
        l1: Linear::new(4 * 13 * 13, 10),
    };
    drop(seeded);
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

/// tinygrad's beautiful_mnist model (BatchNorm included, so batch statistics cross devices).
struct BeautifulMnist {
    c1: Conv2d,
    c2: Conv2d,
    bn1: BatchNorm,
    c3: Conv2d,
    c4: Conv2d,
    bn2: BatchNorm,
    l1: Linear,
}
impl_parameters!(BeautifulMnist {
    c1,
    c2,
    bn1,
    c3,
    c4,
    bn2,
    l1
});

impl Module for BeautifulMnist {
    fn forward(&self, x: &Tensor) -> Tensor {
        let pool = |x: Tensor| x.max_pool2d(2, Dims::default(), 1, 0, false);
        let x = self.c2.forward(&self.c1.forward(x).relu()).relu();
        let x = pool(self.bn1.forward(&x));
        let x = self.c4.forward(&self.c3.forward(&x).relu()).relu();
        let x = pool(self.bn2.forward(&x));
        self.l1.forward(&x.flatten(1, -1))
    }
}

/// Losses of `steps` Adam steps of beautiful_mnist on batches of the digits, its parameters
/// replicated and each batch split over `devices` (one device: the plain run), through a `Jit`
/// or not.
fn train_losses(devices: &[&str], steps: usize, jit: bool) -> Vec<f32> {
    let (xs, ys) = digits(6);
    let bs = 24; // splits over 2 and 3 devices
    let seeded = seeding();
    Tensor::manual_seed(3);
    let model = BeautifulMnist {
        c1: Conv2d::new(1, 32, 5),
        c2: Conv2d::new(32, 32, 5),
        bn1: BatchNorm::new(32),
        c3: Conv2d::new(32, 64, 3),
        c4: Conv2d::new(64, 64, 3),
        bn2: BatchNorm::new(64),
        l1: Linear::new(576, 10),
    };
    drop(seeded);
    let multi = devices.len() > 1;
    if multi {
        for p in get_state_dict(&model).values() {
            p.shard_(devices, None);
        }
    }
    let mut opt = optim::adam(get_parameters(&model), 1e-3);
    let mut step_fn = |io: &[Tensor]| {
        let _train = Tensor::train(true);
        opt.zero_grad();
        let loss =
            model
                .forward(&io[0])
                .sparse_categorical_crossentropy(&io[1], -1, 0.0, Reduction::Mean);
        loss.backward();
        opt.step_with(&[&loss]);
        vec![loss]
    };
    let batch = |s: usize| {
        let k = (s * bs) % (ys.len() - bs);
        let x = Tensor::from_slice(&xs[k * 784..(k + bs) * 784], &[bs, 1, 28, 28]);
        let y = Tensor::from_slice(&ys[k..k + bs], &[bs]);
        if multi {
            vec![x.shard(devices, Some(0)), y.shard(devices, Some(0))]
        } else {
            vec![x, y]
        }
    };
    if jit {
        let mut captured = Jit::new(step_fn);
        (0..steps)
            .map(|s| captured.call(&batch(s)).expect("a replayable step")[0].item::<f32>())
            .collect()
    } else {
        (0..steps)
            .map(|s| step_fn(&batch(s))[0].item::<f32>())
            .collect()
    }
}

#[test]
fn data_parallel_training_matches_one_device_step_by_step() {
    let steps = 4;
    let one = train_losses(&["CPU"], steps, false);
    let jitted = train_losses(&["CPU"], steps, true);
    for devices in [&["CPU", "CPU:1"][..], &["CPU", "CPU:1", "CPU:2"][..]] {
        let many = train_losses(devices, steps, false);
        for (s, ((a, b), c)) in many.iter().zip(&one).zip(&jitted).enumerate() {
            // The first loss comes from the same weights. After it, rounding (sums in another
            // order) is amplified by Adam: the conv biases before each BatchNorm have a gradient
            // of exactly zero in exact arithmetic, so their update is lr times the sign of
            // rounding noise — a drift of ~1e-6 here, more on other CPUs or batch sizes.
            let tol = if s == 0 { 1e-5 } else { 1e-3 };
            assert!(
                (a - b).abs() <= tol * b.abs().max(1.0) && c == b,
                "step {s} on {devices:?}: loss {a} vs {b} on one device ({c} through a Jit)\n{many:?}\n{one:?}"
            );
        }
    }
    assert!(one[steps - 1] < one[0], "the loss goes down: {one:?}");
    // a Jit refuses multi-device inputs with an error (no capture of sharded kernels yet)
    let x = Tensor::from_slice(&[1.0f32, 2.0], &[2]).shard(&["CPU", "CPU:1"], Some(0));
    let mut double = Jit::new(|io: &[Tensor]| vec![&io[0] * 2.0]);
    let err = double
        .call(&[x])
        .expect_err("multi-device inputs are refused");
    assert!(
        err.to_string().contains("several devices (CPU, CPU:1)"),
        "{err}"
    );
}

/// The same data-parallel training on two WEBGPU devices (in CI two instances of the software
/// Vulkan adapter): each batch split over `WEBGPU` and `WEBGPU:1`, the gradients all-reduced
/// through copies between them, the losses those of one CPU device.
#[test]
fn data_parallel_training_on_two_webgpu_devices() {
    common::on_webgpu("data_parallel_training_on_two_webgpu_devices", |_| {
        if let Err(e) = tinygrad_tensor::get_device("WEBGPU:1") {
            panic!("WEBGPU opens but WEBGPU:1 does not: {e}");
        }
        // (two steps: the first from the same weights, the second after an Adam update from
        // the all-reduced gradients; each step costs seconds on the software adapter)
        let steps = 2;
        let one = train_losses(&["CPU"], steps, false);
        let many = train_losses(&["WEBGPU", "WEBGPU:1"], steps, false);
        for (s, (a, b)) in many.iter().zip(&one).enumerate() {
            // (the tolerances of the CPU test above, for the same reasons)
            let tol = if s == 0 { 1e-5 } else { 1e-3 };
            assert!(
                (a - b).abs() <= tol * b.abs().max(1.0),
                "step {s}: loss {a} on WEBGPU, WEBGPU:1 vs {b} on CPU\n{many:?}\n{one:?}"
            );
        }
    });
}
