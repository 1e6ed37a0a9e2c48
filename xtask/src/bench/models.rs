//! Model rows of `cargo xtask bench`: whole models written on the public API, as a user would,
//! next to the same models in PyTorch (2 threads) on the same weights and inputs.
//!
//! - `mnist`: one beautiful_mnist training step at batch 512 (the model, loss and Adam step of
//!   `crates/tensor/examples/mnist.rs`) on random images and labels; PyTorch runs the same model
//!   and optimizer (its own initial weights).
//! - `mnist_2dev`: the same step data-parallel on `CPU` and `CPU:1` (parameters replicated, the
//!   batch split, the all-reduce through copies), vs the step on one device in the same run.
//! - `encoder1`, `encoder32`: a MiniLM-shaped encoder (sentence-transformers' all-MiniLM-L6-v2:
//!   6 layers, hidden 384, 12 heads, MLP 1536, vocabulary 30,522, post-LayerNorm, exact GELU,
//!   mean pooling) on 1 and 32 sequences of 12 tokens, random weights, inference.
//! - `decode`: one decode step of the same layers used causally: one new token attends over a
//!   KV cache of 127 positions in every layer, then the logits over the vocabulary (the tied
//!   embedding as LM head: a 30,522 x 384 matrix-vector product).

use super::*;

use tinygrad_tensor::DType;
use tinygrad_tensor::nn::{Embedding, LayerNorm, get_state_dict};

/// tinygrad's beautiful_mnist model, as in `crates/tensor/examples/mnist.rs`.
pub(super) struct MnistModel {
    c1: Conv2d,
    c2: Conv2d,
    bn1: BatchNorm,
    c3: Conv2d,
    c4: Conv2d,
    bn2: BatchNorm,
    l1: Linear,
}
impl_parameters!(MnistModel {
    c1,
    c2,
    bn1,
    c3,
    c4,
    bn2,
    l1
});

impl MnistModel {
    pub(super) fn new() -> MnistModel {
        MnistModel {
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

impl Module for MnistModel {
    fn forward(&self, x: &Tensor) -> Tensor {
        let pool = |x: Tensor| x.max_pool2d(2, Dims::default(), 1, 0, false);
        let x = self.c2.forward(&self.c1.forward(x).relu()).relu();
        let x = pool(self.bn1.forward(&x));
        let x = self.c4.forward(&self.c3.forward(&x).relu()).relu();
        let x = pool(self.bn2.forward(&x));
        self.l1.forward(&x.flatten(1, -1))
    }
}

/// The same model and step in PyTorch (images in input 0, labels as floats in input 1).
const TORCH_MNIST: &str = "\
import torch.nn as nn
import torch.nn.functional as F
torch.set_grad_enabled(True)
torch.manual_seed(42)
BS = 512
x = inp(0, BS, 1, 28, 28)
y = inp(1, BS).long()
model = nn.Sequential(
    nn.Conv2d(1, 32, 5), nn.ReLU(), nn.Conv2d(32, 32, 5), nn.ReLU(), nn.BatchNorm2d(32), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3), nn.ReLU(), nn.Conv2d(64, 64, 3), nn.ReLU(), nn.BatchNorm2d(64), nn.MaxPool2d(2),
    nn.Flatten(1), nn.Linear(576, 10))
opt = torch.optim.Adam(model.parameters(), 1e-3)
model.train()
def op():
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()
op()
";

pub(super) fn bench_mnist(o: &Opts) -> Row {
    const BS: usize = 512;
    let steps = if o.quick { 3 } else { 10 };
    // Warm-up steps: the first compiles kernels and creates the optimizer state (a different
    // graph); the second is the first of the steady-state graph, a schedule-cache miss.
    let warmup = 2;
    Tensor::manual_seed(42);
    let model = MnistModel::new();
    let mut opt = optim::adam(get_parameters(&model), 1e-3);
    let xv: Vec<f32> = rand_vec(BS * 28 * 28, 100)
        .iter()
        .map(|v| (v + 1.0) / 2.0)
        .collect();
    let yv: Vec<f32> = rand_vec(BS, 200)
        .iter()
        .map(|v| (((v + 1.0) * 5.0) as i32).clamp(0, 9) as f32)
        .collect();
    let x = input(&xv, &[BS, 1, 28, 28]);
    let y = input(&yv, &[BS]).cast(DType::INT32);
    y.realize();
    let mut step = || -> f32 {
        let _train = Tensor::train(true);
        opt.zero_grad();
        let loss = model
            .forward(&x)
            .sparse_categorical_crossentropy(&y, -1, 0.0, Reduction::Mean);
        loss.backward();
        opt.step_with(&[&loss]);
        loss.item::<f32>()
    };
    let (mut times, mut losses) = (vec![], vec![]);
    for _ in 0..steps + warmup {
        let t0 = Instant::now();
        losses.push(step());
        times.push(t0.elapsed().as_secs_f64());
    }
    let first = times[0];
    let mut timed = times[warmup..].to_vec();
    timed.sort_by(f64::total_cmp);
    let ours = median(timed.clone());
    let mut note = format!(
        "{steps} steps after {warmup} warm-up: min {:.0} / median {:.0} / max {:.0} ms (first {:.0} ms)",
        timed[0] * 1e3,
        ours * 1e3,
        timed[timed.len() - 1] * 1e3,
        first * 1e3
    );
    if losses.iter().any(|l| !l.is_finite()) {
        note = format!("{}; {note}", check(false, "loss not finite"));
    }
    let pt = torch(
        TORCH_MNIST,
        &[&xv, &yv],
        steps,
        steps,
        Duration::from_secs(60),
    );
    Row {
        name: "beautiful_mnist train step, bs 512".into(),
        secs: ours,
        unit: Unit::Ms,
        refs: vec![Reference::torch(pt, Unit::Ms, |l| {
            l.len() == 1 && l[0].is_finite()
        })],
        note,
    }
}

/// A batch of `bs` random images in [0, 1] and labels in 0..10 (the `jit_mnist` and
/// `mnist_2dev` rows' input).
fn mnist_batch(bs: usize) -> (Tensor, Tensor) {
    let xv: Vec<f32> = rand_vec(bs * 28 * 28, 100)
        .iter()
        .map(|v| (v + 1.0) / 2.0)
        .collect();
    let yv: Vec<i32> = rand_vec(bs, 200)
        .iter()
        .map(|v| (((v + 1.0) * 5.0) as i32).clamp(0, 9))
        .collect();
    (input(&xv, &[bs, 1, 28, 28]), Tensor::from_slice(&yv, &[bs]))
}

/// One training step of `model` (forward, loss, backward, optimizer step): the loss.
fn mnist_step(model: &MnistModel, opt: &mut dyn Optimizer, x: &Tensor, y: &Tensor) -> Tensor {
    let _train = Tensor::train(true);
    opt.zero_grad();
    let loss = model
        .forward(x)
        .sparse_categorical_crossentropy(y, -1, 0.0, Reduction::Mean);
    loss.backward();
    opt.step_with(&[&loss]);
    loss
}

/// The `mnist_2dev` row: [`bench_mnist`]'s step (without a Jit) data-parallel on two CPU
/// devices and on one, two models from the same seed stepped alternately on the same batch.
pub(super) fn bench_mnist_devices(o: &Opts) -> Row {
    const BS: usize = 512;
    const DEVICES: [&str; 2] = ["CPU", "CPU:1"];
    let steps = if o.quick { 2 } else { 10 };
    let (x, y) = mnist_batch(BS);
    let (xs, ys) = (x.shard(&DEVICES, Some(0)), y.shard(&DEVICES, Some(0)));
    Tensor::try_realize_all(&[&xs, &ys]).expect("the batch splits");
    let make = |multi: bool| {
        Tensor::manual_seed(42);
        let model = MnistModel::new();
        if multi {
            for p in get_state_dict(&model).values() {
                p.shard_(&DEVICES, None);
            }
        }
        let opt = optim::adam(get_parameters(&model), 1e-3);
        (model, opt)
    };
    let step = |model: &MnistModel, opt: &mut dyn Optimizer, x: &Tensor, y: &Tensor| {
        mnist_step(model, opt, x, y).item::<f32>()
    };
    let (m_one, mut o_one) = make(false);
    let (m_two, mut o_two) = make(true);
    // Rounding differs (batch statistics and gradients are summed in another order), and Adam
    // amplifies it: the conv biases before each BatchNorm have a gradient of exactly zero in
    // exact arithmetic, so their first update is lr times the sign of rounding noise. The first
    // loss, from the same weights, must agree closely; later drift is reported.
    let (mut t_two, mut t_one, mut first, mut drift) = (vec![], vec![], 0f32, 0f32);
    let warmup = 2;
    for k in 0..steps + warmup {
        let t0 = Instant::now();
        let a = step(&m_two, &mut o_two, &xs, &ys);
        let dt_two = t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let b = step(&m_one, &mut o_one, &x, &y);
        let dt_one = t0.elapsed().as_secs_f64();
        let rel = (a - b).abs() / b.abs().max(1.0);
        if k == 0 {
            first = rel;
        }
        drift = drift.max(rel);
        if k >= warmup {
            t_two.push(dt_two);
            t_one.push(dt_one);
        }
    }
    let ours = median(t_two.clone());
    t_two.sort_by(f64::total_cmp);
    let verdict = if first <= 1e-5 {
        format!(
            "first loss matches one device's ({first:.1e}; drift by step {}: {drift:.1e})",
            steps + warmup
        )
    } else {
        check(
            false,
            &format!("the first loss differs from one device's by {first:.1e}"),
        )
    };
    Row {
        name: "beautiful_mnist train step, bs 512, 2 CPU devices".into(),
        secs: ours,
        unit: Unit::Ms,
        refs: vec![Reference::timed(
            "one device (same run)",
            median(t_one),
            Unit::Ms,
            true,
        )],
        note: format!(
            "{verdict}; {steps} steps: min {:.0} / median {:.0} / max {:.0} ms; no Jit on either",
            t_two[0] * 1e3,
            ours * 1e3,
            t_two[t_two.len() - 1] * 1e3
        ),
    }
}

/// The `jit_mnist` row: [`bench_mnist`]'s step through a `Jit` (replays) and without it, on two
/// models from the same seed, stepped alternately so both see the same machine state.
pub(super) fn bench_mnist_jit(o: &Opts) -> Row {
    const BS: usize = 512;
    let steps = if o.quick { 3 } else { 10 };
    let (x, y) = mnist_batch(BS);
    let make = || {
        Tensor::manual_seed(42);
        let model = MnistModel::new();
        let opt = optim::adam(get_parameters(&model), 1e-3);
        (model, opt)
    };
    let step = mnist_step;
    let (m_plain, mut o_plain) = make();
    let (m_jit, mut o_jit) = make();
    let mut jit = Jit::new(|io: &[Tensor]| vec![step(&m_jit, &mut o_jit, &io[0], &io[1])]);
    let (mut t_jit, mut t_plain, mut same) = (vec![], vec![], true);
    let warmup = 3; // the Jit captures at the third call (Adam's moments start lazy)
    for k in 0..steps + warmup {
        let t0 = Instant::now();
        let a = jit.call(&[x.clone(), y.clone()]).expect("the step replays")[0].item::<f32>();
        let dt_jit = t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let b = step(&m_plain, &mut o_plain, &x, &y).item::<f32>();
        let dt_plain = t0.elapsed().as_secs_f64();
        same &= a.to_bits() == b.to_bits();
        if k >= warmup {
            t_jit.push(dt_jit);
            t_plain.push(dt_plain);
        }
    }
    let replayed = jit.replays() >= steps;
    let ours = median(t_jit.clone());
    let plain = median(t_plain);
    t_jit.sort_by(f64::total_cmp);
    let verdict = match (replayed, same) {
        (false, _) => check(false, "the Jit did not replay"),
        (true, false) => check(false, "losses differ from the plain step's"),
        (true, true) => "losses equal the plain step's bit for bit".to_string(),
    };
    let note = format!(
        "{verdict}; {steps} replays: min {:.0} / median {:.0} / max {:.0} ms",
        t_jit[0] * 1e3,
        ours * 1e3,
        t_jit[t_jit.len() - 1] * 1e3
    );
    Row {
        name: "beautiful_mnist train step, bs 512, Jit replay".into(),
        secs: ours,
        unit: Unit::Ms,
        refs: vec![Reference::timed(
            "without Jit (same run)",
            plain,
            Unit::Ms,
            true,
        )],
        note,
    }
}

// ---------------------------------------------------------------------------------------------
// the MiniLM-shaped encoder

const VOCAB: usize = 30522;
const HIDDEN: usize = 384;
const HEADS: usize = 12;
const MLP: usize = 1536;
const LAYERS: usize = 6;
const MAX_POS: usize = 512;
const EPS: f64 = 1e-12;

/// One named weight: its values (deterministic, small) and shape.
struct Weight {
    data: Vec<f32>,
    shape: Vec<usize>,
}

/// Every weight of the encoder, in the order the PyTorch code reads them: word, position and
/// type embeddings, the embedding LayerNorm, then per layer q, k, v, o (weight, bias), LayerNorm,
/// MLP up, MLP down, LayerNorm.
fn encoder_weights() -> Vec<Weight> {
    let mut seed = 1000;
    let mut w = |shape: &[usize], scale: f32, offset: f32| {
        seed += 1;
        let n: usize = shape.iter().product();
        Weight {
            data: rand_vec(n, seed)
                .iter()
                .map(|v| v * scale + offset)
                .collect(),
            shape: shape.to_vec(),
        }
    };
    let mut all = vec![
        w(&[VOCAB, HIDDEN], 0.05, 0.0),
        w(&[MAX_POS, HIDDEN], 0.05, 0.0),
        w(&[2, HIDDEN], 0.05, 0.0),
        w(&[HIDDEN], 0.1, 1.0),
        w(&[HIDDEN], 0.05, 0.0),
    ];
    for _ in 0..LAYERS {
        for _ in 0..4 {
            all.push(w(&[HIDDEN, HIDDEN], 0.06, 0.0));
            all.push(w(&[HIDDEN], 0.02, 0.0));
        }
        all.push(w(&[HIDDEN], 0.1, 1.0));
        all.push(w(&[HIDDEN], 0.05, 0.0));
        all.push(w(&[MLP, HIDDEN], 0.06, 0.0));
        all.push(w(&[MLP], 0.02, 0.0));
        all.push(w(&[HIDDEN, MLP], 0.03, 0.0));
        all.push(w(&[HIDDEN], 0.02, 0.0));
        all.push(w(&[HIDDEN], 0.1, 1.0));
        all.push(w(&[HIDDEN], 0.05, 0.0));
    }
    all
}

struct EncoderLayer {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    ln1: LayerNorm,
    up: Linear,
    down: Linear,
    ln2: LayerNorm,
}

/// A BERT-style encoder as a user writes it with `tinygrad_tensor::nn`.
struct Encoder {
    word: Embedding,
    pos: Embedding,
    typ: Embedding,
    ln: LayerNorm,
    layers: Vec<EncoderLayer>,
}

impl Encoder {
    fn new(weights: &[Weight]) -> Encoder {
        let mut it = weights.iter().map(|w| input(&w.data, &w.shape));
        let mut next = || it.next().expect("enough weights");
        let ln = |next: &mut dyn FnMut() -> Tensor| LayerNorm {
            weight: Some(next()),
            bias: Some(next()),
            normalized_shape: vec![HIDDEN],
            eps: EPS,
        };
        let lin = |next: &mut dyn FnMut() -> Tensor| Linear {
            weight: next(),
            bias: Some(next()),
        };
        let word = Embedding { weight: next() };
        let pos = Embedding { weight: next() };
        let typ = Embedding { weight: next() };
        let emb_ln = ln(&mut next);
        let layers = (0..LAYERS)
            .map(|_| EncoderLayer {
                q: lin(&mut next),
                k: lin(&mut next),
                v: lin(&mut next),
                o: lin(&mut next),
                ln1: ln(&mut next),
                up: lin(&mut next),
                down: lin(&mut next),
                ln2: ln(&mut next),
            })
            .collect();
        Encoder {
            word,
            pos,
            typ,
            ln: emb_ln,
            layers,
        }
    }

    /// Token embeddings plus position and type embeddings, normalized: (B, T, HIDDEN).
    fn embed(&self, ids: &Tensor, first_pos: usize) -> Tensor {
        let t = ids.shape()[1];
        let pos = Tensor::arange(first_pos as i64, (first_pos + t) as i64, 1).reshape(&[1, -1]);
        let typ = Tensor::zeros(&[1, t], DType::INT32);
        let x = self.word.forward(ids) + self.pos.forward(&pos) + self.typ.forward(&typ);
        self.ln.forward(&x)
    }

    /// One layer on `x` (B, T, HIDDEN); `cache`: keys and values of earlier positions (B, H,
    /// P, D) to attend over too (a decode step), causally.
    fn layer(&self, l: &EncoderLayer, x: &Tensor, cache: Option<(&Tensor, &Tensor)>) -> Tensor {
        let (b, t) = (x.shape()[0] as isize, x.shape()[1] as isize);
        let d = (HIDDEN / HEADS) as isize;
        let heads = |p: &Linear| {
            p.forward(x)
                .reshape(&[b, t, HEADS as isize, d])
                .transpose(1, 2)
        };
        let (mut k, mut v) = (heads(&l.k), heads(&l.v));
        if let Some((pk, pv)) = cache {
            k = Tensor::cat(&[pk, &k], 2);
            v = Tensor::cat(&[pv, &v], 2);
        }
        let a = heads(&l.q)
            .scaled_dot_product_attention(&k, &v, None, 0.0, false)
            .transpose(1, 2)
            .reshape(&[b, t, HIDDEN as isize]);
        let x = l.ln1.forward(&(x + l.o.forward(&a)));
        let h = l.down.forward(&l.up.forward(&x).gelu_with("none"));
        l.ln2.forward(&(&x + h))
    }

    /// Mean-pooled sentence embeddings of `ids` (B, T): (B, HIDDEN).
    fn forward(&self, ids: &Tensor) -> Tensor {
        let mut x = self.embed(ids, 0);
        for l in &self.layers {
            x = self.layer(l, &x, None);
        }
        x.mean(1isize)
    }

    /// Logits (1, 1, VOCAB) of one new token after the positions held in `caches` (one (keys,
    /// values) pair per layer, each (1, HEADS, past, HIDDEN / HEADS)).
    fn decode(&self, id: &Tensor, caches: &[(Tensor, Tensor)]) -> Tensor {
        let past = caches[0].0.shape()[2];
        let mut x = self.embed(id, past);
        for (l, (k, v)) in self.layers.iter().zip(caches) {
            x = self.layer(l, &x, Some((k, v)));
        }
        x.matmul(&self.word.weight.transpose(0, 1))
    }
}

/// The PyTorch encoder: inputs 0 (token ids as floats), then the weights of
/// [`encoder_weights`] (then, for a decode step, each layer's key and value caches).
fn torch_encoder(b: usize, t: usize, decode_past: Option<usize>) -> String {
    let shapes: Vec<String> = encoder_weights()
        .iter()
        .map(|w| {
            format!(
                "({},)",
                w.shape
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect();
    let hd = HIDDEN / HEADS;
    let mut code = format!(
        "\
import torch.nn.functional as F
ids = inp(0, {b}, {t}).long()
shapes = [{shapes}]
W = [inp(1 + i, *s) for i, s in enumerate(shapes)]
we, pe, te, elw, elb = W[:5]
L = [W[5 + 16 * l: 5 + 16 * (l + 1)] for l in range({LAYERS})]
def layer(x, w, cache=None):
    qw, qb, kw, kb, vw, vb, ow, ob, l1w, l1b, uw, ub, dw, db, l2w, l2b = w
    B, T = x.shape[0], x.shape[1]
    heads = lambda y: y.view(B, T, {HEADS}, {hd}).transpose(1, 2)
    q, k, v = heads(F.linear(x, qw, qb)), heads(F.linear(x, kw, kb)), heads(F.linear(x, vw, vb))
    if cache is not None:
        k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
    a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, T, {HIDDEN})
    x = F.layer_norm(x + F.linear(a, ow, ob), ({HIDDEN},), l1w, l1b, {EPS})
    h = F.linear(F.gelu(F.linear(x, uw, ub)), dw, db)
    return F.layer_norm(x + h, ({HIDDEN},), l2w, l2b, {EPS})
def embed(ids, first):
    T = ids.shape[1]
    x = we[ids] + pe[first:first + T][None] + te[0][None, None]
    return F.layer_norm(x, ({HIDDEN},), elw, elb, {EPS})
",
        shapes = shapes.join(", ")
    );
    match decode_past {
        None => code.push_str(
            "\
def op():
    x = embed(ids, 0)
    for w in L:
        x = layer(x, w)
    return x.mean(1)
",
        ),
        Some(past) => {
            let base = 1 + shapes.len();
            code.push_str(&format!(
                "\
C = [(inp({base} + 2 * l, 1, {HEADS}, {past}, {hd}), inp({base} + 2 * l + 1, 1, {HEADS}, {past}, {hd})) for l in range({LAYERS})]
def op():
    x = embed(ids, {past})
    for w, c in zip(L, C):
        x = layer(x, w, c)
    return x @ we.t()
"
            ));
        }
    }
    code
}

fn token_ids(n: usize, seed: u64) -> Vec<f32> {
    rand_vec(n, seed)
        .iter()
        .map(|v| ((((v + 1.0) / 2.0) * (VOCAB - 1) as f32) as usize).min(VOCAB - 1) as f32)
        .collect()
}

/// Tokens per sequence of the encoder rows.
const T: usize = 12;

/// The encoder rows' model, input ids of `batch` sequences and its output on them.
struct EncoderRun {
    weights: Vec<Weight>,
    enc: Encoder,
    idv: Vec<f32>,
    ids: Tensor,
    got: Vec<f32>,
}

impl EncoderRun {
    fn new(batch: usize) -> EncoderRun {
        let weights = encoder_weights();
        let enc = Encoder::new(&weights);
        let idv = token_ids(batch * T, 77 + batch as u64);
        let ids = input(&idv, &[batch, T]).cast(DType::INT32);
        ids.realize();
        let got = enc.forward(&ids).to_vec::<f32>();
        EncoderRun {
            weights,
            enc,
            idv,
            ids,
            got,
        }
    }

    /// PyTorch's inputs: the ids, then the weights.
    fn torch_inputs(&self) -> Vec<&[f32]> {
        let mut inputs: Vec<&[f32]> = vec![&self.idv];
        inputs.extend(self.weights.iter().map(|w| w.data.as_slice()));
        inputs
    }
}

pub(super) fn bench_encoder(batch: usize, o: &Opts) -> Row {
    let run = EncoderRun::new(batch);
    let (enc, ids, got) = (&run.enc, &run.ids, &run.got);
    let runs = reps(o.quick, if batch == 1 { 30 } else { 10 });
    let inputs = run.torch_inputs();
    let (ours, pt) = bracketed(
        4,
        2 * runs,
        budget(o.quick, 15),
        || {
            black_box(enc.forward(ids).to_vec::<f32>());
        },
        || {
            torch(
                &torch_encoder(batch, T, None),
                &inputs,
                3,
                runs,
                budget(o.quick, 15),
            )
        },
    );
    Row {
        name: format!("MiniLM-shaped encoder, {batch}x{T} tokens"),
        secs: ours,
        unit: Unit::Ms,
        refs: vec![Reference::torch(pt, Unit::Ms, |w| {
            max_abs_err(got, w) < 1e-3
        })],
        note: "6 layers, 384 hidden, vocab 30522, random weights; incl. read-back".into(),
    }
}

/// The encoder of [`bench_encoder`] through a `Jit` (the ids its input, the weights its state),
/// as a tinygrad user wraps inference in `TinyJit`: replays vs the same forward without the
/// `Jit` (measured alternately in the same run) and PyTorch eager.
pub(super) fn bench_encoder_jit(batch: usize, o: &Opts) -> Row {
    let run = EncoderRun::new(batch);
    let (enc, ids, got) = (&run.enc, &run.ids, &run.got);
    let mut jit = Jit::new(|x: &[Tensor]| vec![enc.forward(&x[0])]);
    let runs = reps(o.quick, if batch == 1 { 30 } else { 10 });
    let warmup = 3;
    let (mut t_jit, mut t_plain, mut same) = (vec![], vec![], true);
    for k in 0..runs + warmup {
        let t0 = Instant::now();
        let a = jit
            .call(std::slice::from_ref(ids))
            .expect("the forward replays")[0]
            .to_vec::<f32>();
        let dt_jit = t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        black_box(enc.forward(ids).to_vec::<f32>());
        let dt_plain = t0.elapsed().as_secs_f64();
        same &= a.iter().zip(got).all(|(x, y)| x.to_bits() == y.to_bits());
        if k >= warmup {
            t_jit.push(dt_jit);
            t_plain.push(dt_plain);
        }
    }
    let replayed = jit.replays() >= runs;
    let ours = median(t_jit);
    let plain = median(t_plain);
    let inputs = run.torch_inputs();
    let pt = torch(
        &torch_encoder(batch, T, None),
        &inputs,
        3,
        runs,
        budget(o.quick, 15),
    );
    let verdict = match (replayed, same) {
        (false, _) => check(false, "the Jit did not replay"),
        (true, false) => check(false, "replays differ from the plain forward"),
        (true, true) => "replays equal the plain forward bit for bit".to_string(),
    };
    Row {
        name: format!("MiniLM-shaped encoder, {batch}x{T} tokens, Jit replay"),
        secs: ours,
        unit: Unit::Ms,
        refs: vec![
            Reference::timed("without Jit (same run)", plain, Unit::Ms, true),
            Reference::torch(pt, Unit::Ms, |w| max_abs_err(got, w) < 1e-3),
        ],
        note: format!("{verdict}; incl. read-back"),
    }
}

pub(super) fn bench_decode(o: &Opts) -> Row {
    const PAST: usize = 127;
    let weights = encoder_weights();
    let enc = Encoder::new(&weights);
    let hd = HIDDEN / HEADS;
    let cache_data: Vec<Vec<f32>> = (0..2 * LAYERS)
        .map(|i| rand_vec(HEADS * PAST * hd, 500 + i as u64))
        .collect();
    let caches: Vec<(Tensor, Tensor)> = cache_data
        .chunks_exact(2)
        .map(|kv| {
            (
                input(&kv[0], &[1, HEADS, PAST, hd]),
                input(&kv[1], &[1, HEADS, PAST, hd]),
            )
        })
        .collect();
    let idv = vec![4242.0f32];
    let id = input(&idv, &[1, 1]).cast(DType::INT32);
    id.realize();
    let got = enc.decode(&id, &caches).to_vec::<f32>();
    let runs = reps(o.quick, 30);
    let mut inputs: Vec<&[f32]> = vec![&idv];
    inputs.extend(weights.iter().map(|w| w.data.as_slice()));
    inputs.extend(cache_data.iter().map(Vec::as_slice));
    let (ours, pt) = bracketed(
        4,
        2 * runs,
        budget(o.quick, 10),
        || {
            black_box(enc.decode(&id, &caches).to_vec::<f32>());
        },
        || {
            torch(
                &torch_encoder(1, 1, Some(PAST)),
                &inputs,
                3,
                runs,
                budget(o.quick, 10),
            )
        },
    );
    Row {
        name: format!("decode step, 1 token after {PAST}"),
        secs: ours,
        unit: Unit::Ms,
        refs: vec![Reference::torch(pt, Unit::Ms, |w| {
            max_rel_err(&got, w) < 1e-4
        })],
        note:
            "the encoder's layers, causal over a KV cache; logits over the vocab; incl. read-back"
                .into(),
    }
}
