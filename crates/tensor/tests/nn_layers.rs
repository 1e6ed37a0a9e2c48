//! nn layers (`crates/tensor/src/nn/layers/`), `Tensor::assign`, parameter discovery and state
//! dicts: outputs against plain-Rust float64 computations of the definitions, initialization
//! bounds, BatchNorm's running statistics, bounded graphs across training steps, bad input.

use std::collections::BTreeMap;

use tinygrad_tensor::nn::optim::{self, Optimizer};
use tinygrad_tensor::nn::{
    BatchNorm, Conv2d, ConvOptions, ConvTranspose2d, Embedding, GroupNorm, InstanceNorm, LSTMCell,
    LayerNorm, Linear, Module, Parameters, RMSNorm, StateDictError, get_parameters, get_state_dict,
    load_state_dict,
};
use tinygrad_tensor::{Axis, DType, Reduction, Tensor, impl_parameters};

fn close(got: &[f64], want: &[f64], atol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= atol + 1e-4 * w.abs(),
            "{what}[{i}]: got {g}, want {w}\n got {got:?}\nwant {want:?}"
        );
    }
}

/// Deterministic test data in [-1, 1).
fn data(n: usize, seed: u64) -> Vec<f32> {
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

fn tensor(shape: &[usize], seed: u64) -> (Tensor, Vec<f64>) {
    let n = shape.iter().product();
    let v = data(n, seed);
    (
        Tensor::from_slice(&v, shape),
        v.iter().map(|&x| f64::from(x)).collect(),
    )
}

fn set(t: &Tensor, seed: u64) -> Vec<f64> {
    let (v, d) = tensor(&t.shape(), seed);
    t.assign(&v);
    d
}

// ---- assign ----

#[test]
fn assign_is_lazy_and_seen_by_clones() {
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]);
    a.realize();
    let alias = a.clone();
    let before = tinygrad_tensor::compile_count();
    a.assign(&(&a * 2.0 + 1.0));
    assert_eq!(
        tinygrad_tensor::compile_count(),
        before,
        "assign ran a kernel"
    );
    assert_eq!(alias.to_vec::<f32>(), vec![3.0, 5.0, 7.0]);
    // realizing gives a buffer view again: the graph does not grow
    assert!(a.uop().toposort().len() <= 2);
}

#[test]
fn assign_broadcasts_and_handles_constants() {
    let a = Tensor::zeros(&[2, 2], DType::FLOAT32);
    a.assign(&Tensor::full_dtype(&[2], 5.0, DType::FLOAT32));
    assert_eq!(a.to_vec::<f32>(), vec![5.0; 4]);
    // two tensors assigned the same constant stay independent
    let b = Tensor::zeros(&[2], DType::FLOAT32);
    let c = Tensor::zeros(&[2], DType::FLOAT32);
    b.assign(&Tensor::ones(&[2], DType::FLOAT32));
    c.assign(&Tensor::ones(&[2], DType::FLOAT32));
    assert_ne!(
        b.uop(),
        c.uop(),
        "constants assigned to two tensors must not share identity"
    );
    b.assign(&(&b + 1.0));
    assert_eq!(b.to_vec::<f32>(), vec![2.0, 2.0]);
    assert_eq!(c.to_vec::<f32>(), vec![1.0, 1.0]);
}

#[test]
fn no_gradient_flows_through_assign() {
    let w = Tensor::from_slice(&[1.0f32, 2.0], &[2]).requires_grad(true);
    let p = Tensor::from_slice(&[0.0f32, 0.0], &[2]).requires_grad(true);
    p.assign(&(&w * 3.0));
    let loss = (&p * &w).sum(Axis::All);
    loss.backward();
    // d/dw of (p * w) with p held constant is p = 3w
    assert_eq!(w.grad().unwrap().to_vec::<f32>(), vec![3.0, 6.0]);
    assert_eq!(p.grad().unwrap().to_vec::<f32>(), vec![1.0, 2.0]);
}

#[test]
#[should_panic(
    expected = "assign: shape mismatch: tensor has shape [2, 3], value has shape [3, 2]"
)]
fn assign_shape_mismatch() {
    Tensor::zeros(&[2, 3], DType::FLOAT32).assign(&Tensor::zeros(&[3, 2], DType::FLOAT32));
}

#[test]
#[should_panic(
    expected = "assign: dtype mismatch: tensor of shape [2] has dtype float32, value has int32"
)]
fn assign_dtype_mismatch() {
    Tensor::zeros(&[2], DType::FLOAT32).assign(&Tensor::zeros(&[2], DType::INT32));
}

#[test]
#[should_panic(expected = "assign: device mismatch: tensor is on CPU, value on REF")]
fn assign_device_mismatch() {
    Tensor::zeros_on(&[2], DType::FLOAT32, "CPU").assign(&Tensor::zeros_on(
        &[2],
        DType::FLOAT32,
        "REF",
    ));
}

// ---- init ----

#[test]
fn initializers_respect_their_bounds() {
    Tensor::manual_seed(7);
    let k = Tensor::kaiming_uniform(&[64, 50], 5f64.sqrt());
    let bound = (6.0 / 6.0 / 50.0f64).sqrt();
    let v = k.to_f64_vec();
    assert!(
        v.iter().all(|x| x.abs() <= bound),
        "kaiming_uniform out of bounds"
    );
    assert!(v.iter().cloned().fold(0.0, f64::max) > 0.9 * bound);
    let g = Tensor::glorot_uniform(&[30, 20]).to_f64_vec();
    let gb = (6.0 / 50.0f64).sqrt();
    assert!(g.iter().all(|x| x.abs() <= gb));
    let u = Tensor::uniform(&[4000], 2.0, 3.0).to_f64_vec();
    assert!(u.iter().all(|&x| (2.0..3.0).contains(&x)));
    let mean = u.iter().sum::<f64>() / u.len() as f64;
    assert!((mean - 2.5).abs() < 0.02, "uniform mean {mean}");
    let n = Tensor::randn(&[20000]).to_f64_vec();
    let m = n.iter().sum::<f64>() / n.len() as f64;
    let var = n.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n.len() as f64;
    assert!(
        m.abs() < 0.03 && (var - 1.0).abs() < 0.05,
        "randn mean {m} var {var}"
    );
}

#[test]
fn layer_init_shapes_and_bounds() {
    Tensor::manual_seed(1);
    let l = Linear::new(10, 3);
    assert_eq!(l.weight.shape(), vec![3, 10]);
    let bound = 1.0 / 10f64.sqrt();
    assert!(
        l.bias
            .as_ref()
            .unwrap()
            .to_f64_vec()
            .iter()
            .all(|x| x.abs() <= bound)
    );
    let c = Conv2d::new_with(
        4,
        8,
        3,
        ConvOptions {
            groups: 2,
            ..Default::default()
        },
    );
    assert_eq!(c.weight.shape(), vec![8, 2, 3, 3]);
    let wb = (6.0 / 6.0 / 18.0f64).sqrt();
    assert!(c.weight.to_f64_vec().iter().all(|x| x.abs() <= wb));
    let ct = ConvTranspose2d::new(4, 6, [2, 3]);
    assert_eq!(ct.weight.shape(), vec![4, 6, 2, 3]);
    assert_eq!(
        Conv2d::new_1d(2, 5, 4, ConvOptions::default())
            .weight
            .shape(),
        vec![5, 2, 4]
    );
}

// ---- layer outputs ----

#[test]
fn linear_matches_definition() {
    let l = Linear::new(3, 2);
    let w = set(&l.weight, 1);
    let b = set(l.bias.as_ref().unwrap(), 2);
    let (x, xv) = tensor(&[4, 3], 3);
    let y = l.forward(&x).to_f64_vec();
    let mut want = vec![];
    for i in 0..4 {
        for o in 0..2 {
            want.push(b[o] + (0..3).map(|k| xv[i * 3 + k] * w[o * 3 + k]).sum::<f64>());
        }
    }
    close(&y, &want, 1e-6, "linear");
}

#[test]
fn conv2d_and_transpose_layers_run_the_ops() {
    let c = Conv2d::new_with(
        2,
        3,
        3,
        ConvOptions {
            padding: 1.into(),
            stride: 2.into(),
            ..Default::default()
        },
    );
    let (x, _) = tensor(&[1, 2, 5, 5], 4);
    let want = x
        .conv2d(&c.weight, c.bias.as_ref(), 1, 2, 1, 1)
        .to_f64_vec();
    let y = c.forward(&x);
    assert_eq!(y.shape(), vec![1, 3, 3, 3]);
    close(&y.to_f64_vec(), &want, 0.0, "conv2d");
    let t = ConvTranspose2d::new_with(
        3,
        2,
        3,
        ConvOptions {
            stride: 2.into(),
            output_padding: 1.into(),
            ..Default::default()
        },
    );
    assert_eq!(t.forward(&y).shape(), vec![1, 2, 8, 8]);
}

fn normalize_rows(v: &[f64], row: usize, eps: f64) -> Vec<f64> {
    v.chunks(row)
        .flat_map(|r| {
            let m = r.iter().sum::<f64>() / row as f64;
            let var = r.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / row as f64;
            r.iter()
                .map(move |x| (x - m) / (var + eps).sqrt())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn layernorm_matches_definition() {
    let ln = LayerNorm::new(&[2, 3]);
    let w = set(ln.weight.as_ref().unwrap(), 5);
    let b = set(ln.bias.as_ref().unwrap(), 6);
    let (x, xv) = tensor(&[4, 2, 3], 7);
    let n = normalize_rows(&xv, 6, 1e-5);
    let want: Vec<f64> = n
        .iter()
        .enumerate()
        .map(|(i, v)| v * w[i % 6] + b[i % 6])
        .collect();
    close(&ln.forward(&x).to_f64_vec(), &want, 1e-5, "layernorm");
}

#[test]
fn groupnorm_and_instancenorm_match_definitions() {
    let gn = GroupNorm::new(2, 4);
    let w = set(gn.weight.as_ref().unwrap(), 8);
    let b = set(gn.bias.as_ref().unwrap(), 9);
    let (x, xv) = tensor(&[3, 4, 2, 2], 10);
    // a group = 2 channels x 4 positions = 8 consecutive values
    let n = normalize_rows(&xv, 8, 1e-5);
    let want: Vec<f64> = n
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let c = (i / 4) % 4;
            v * w[c] + b[c]
        })
        .collect();
    close(&gn.forward(&x).to_f64_vec(), &want, 1e-5, "groupnorm");

    let inn = InstanceNorm::new(4);
    let w = set(inn.weight.as_ref().unwrap(), 11);
    let b = set(inn.bias.as_ref().unwrap(), 12);
    let n = normalize_rows(&xv, 4, 1e-5);
    let want: Vec<f64> = n
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let c = (i / 4) % 4;
            v * w[c] + b[c]
        })
        .collect();
    close(&inn.forward(&x).to_f64_vec(), &want, 1e-5, "instancenorm");
}

#[test]
fn rmsnorm_matches_definition() {
    let r = RMSNorm::new(5);
    let w = set(&r.weight, 13);
    let (x, xv) = tensor(&[3, 5], 14);
    let want: Vec<f64> = xv
        .chunks(5)
        .flat_map(|row| {
            let ms = row.iter().map(|v| v * v).sum::<f64>() / 5.0;
            row.iter()
                .enumerate()
                .map(|(i, v)| v / (ms + 1e-6).sqrt() * w[i])
                .collect::<Vec<_>>()
        })
        .collect();
    close(&r.forward(&x).to_f64_vec(), &want, 1e-5, "rmsnorm");
}

#[test]
fn embedding_looks_up_rows_and_trains_them() {
    let e = Embedding::new(5, 3);
    let w = set(&e.weight, 15);
    let idx = Tensor::from_slice(&[4i32, 0, 4, 2], &[2, 2]);
    let y = e.forward(&idx);
    assert_eq!(y.shape(), vec![2, 2, 3]);
    let want: Vec<f64> = [4, 0, 4, 2]
        .iter()
        .flat_map(|&i| w[i * 3..i * 3 + 3].to_vec())
        .collect();
    close(&y.to_f64_vec(), &want, 0.0, "embedding");
    e.weight.set_requires_grad(true);
    e.forward(&idx).sum(Axis::All).backward();
    let g = e.weight.grad().unwrap().to_f64_vec();
    let counts = [1.0, 0.0, 1.0, 0.0, 2.0];
    let want: Vec<f64> = counts.iter().flat_map(|&c| [c; 3]).collect();
    close(&g, &want, 0.0, "embedding grad");
}

#[test]
fn lstm_cell_matches_definition() {
    let cell = LSTMCell::new(3, 2);
    let wih = set(&cell.weight_ih, 16);
    let whh = set(&cell.weight_hh, 17);
    let bih = set(cell.bias_ih.as_ref().unwrap(), 18);
    let bhh = set(cell.bias_hh.as_ref().unwrap(), 19);
    let (x, xv) = tensor(&[2, 3], 20);
    let (h, hv) = tensor(&[2, 2], 21);
    let (c, cv) = tensor(&[2, 2], 22);
    let (h2, c2) = cell.forward(&x, Some((&h, &c)));
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    let (mut wh, mut wc) = (vec![], vec![]);
    for bi in 0..2 {
        let gate = |k: usize, j: usize| {
            let r = k * 2 + j;
            bih[r]
                + bhh[r]
                + (0..3).map(|q| xv[bi * 3 + q] * wih[r * 3 + q]).sum::<f64>()
                + (0..2).map(|q| hv[bi * 2 + q] * whh[r * 2 + q]).sum::<f64>()
        };
        for j in 0..2 {
            let (i, f, g, o) = (
                sig(gate(0, j)),
                sig(gate(1, j)),
                gate(2, j).tanh(),
                sig(gate(3, j)),
            );
            let nc = f * cv[bi * 2 + j] + i * g;
            wc.push(nc);
            wh.push(o * nc.tanh());
        }
    }
    close(&h2.to_f64_vec(), &wh, 1e-5, "lstm h");
    close(&c2.to_f64_vec(), &wc, 1e-5, "lstm c");
    let (h0, _) = cell.forward(&x, None);
    assert_eq!(h0.shape(), vec![2, 2]);
}

#[test]
fn batchnorm_train_updates_running_stats_and_eval_uses_them() {
    let bn = BatchNorm::new(2);
    let (x, xv) = tensor(&[3, 2, 2, 2], 23);
    let per_channel = |c: usize| -> Vec<f64> {
        (0..3)
            .flat_map(|n| (0..4).map(move |p| (n, p)))
            .map(|(n, p)| xv[n * 8 + c * 4 + p])
            .collect()
    };
    let stats: Vec<(f64, f64)> = (0..2)
        .map(|c| {
            let v = per_channel(c);
            let m = v.iter().sum::<f64>() / 12.0;
            (m, v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / 12.0)
        })
        .collect();
    {
        let _t = Tensor::train(true);
        let y = bn.forward(&x).to_f64_vec();
        let want: Vec<f64> = xv
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let (m, var) = stats[(i / 4) % 2];
                (v - m) / (var + 1e-5).sqrt()
            })
            .collect();
        close(&y, &want, 1e-5, "batchnorm train");
    }
    let rm = bn.running_mean.to_f64_vec();
    let rv = bn.running_var.to_f64_vec();
    for c in 0..2 {
        let (m, var) = stats[c];
        close(&[rm[c]], &[0.1 * m], 1e-6, "running_mean");
        close(
            &[rv[c]],
            &[0.9 + 0.1 * var * 12.0 / 11.0],
            1e-6,
            "running_var",
        );
    }
    assert_eq!(bn.num_batches_tracked.to_vec::<i32>(), vec![1]);
    // evaluation: the running statistics
    let y = bn.forward(&x).to_f64_vec();
    let want: Vec<f64> = xv
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let c = (i / 4) % 2;
            (v - rm[c]) / (rv[c] + 1e-5).sqrt()
        })
        .collect();
    close(&y, &want, 1e-5, "batchnorm eval");
}

// ---- parameters and state dicts ----

struct Net {
    l1: Linear,
    bn: BatchNorm,
    blocks: Vec<Linear>,
    head: Option<Linear>,
}
impl_parameters!(Net {
    l1,
    bn,
    blocks,
    head
});

fn net() -> Net {
    Net {
        l1: Linear::new(4, 3),
        bn: BatchNorm::new(3),
        blocks: vec![Linear::new(3, 3), Linear::new_with(3, 3, false)],
        head: None,
    }
}

#[test]
fn state_dict_names_follow_tinygrad() {
    let n = net();
    let keys: Vec<String> = get_state_dict(&n).into_keys().collect();
    assert_eq!(
        keys,
        [
            "blocks.0.bias",
            "blocks.0.weight",
            "blocks.1.weight",
            "bn.bias",
            "bn.num_batches_tracked",
            "bn.running_mean",
            "bn.running_var",
            "bn.weight",
            "l1.bias",
            "l1.weight",
        ]
    );
    // declaration order, shared handles
    let p = get_parameters(&n);
    assert_eq!(p.len(), 10);
    assert_eq!(p[0].shape(), vec![3, 4]);
    assert_eq!(
        n.named_parameters("model.")[0].0,
        "model.l1.weight".to_string()
    );
}

#[test]
fn load_state_dict_round_trips_between_models() {
    let (a, mut b) = (net(), net());
    for (i, t) in get_parameters(&a).iter().enumerate() {
        if t.dtype().is_float() {
            set(t, 100 + i as u64);
        }
    }
    load_state_dict(&mut b, &get_state_dict(&a), true).unwrap();
    for ((ka, ta), (kb, tb)) in get_state_dict(&a).iter().zip(get_state_dict(&b).iter()) {
        assert_eq!(ka, kb);
        assert_eq!(ta.to_f64_vec(), tb.to_f64_vec(), "{ka}");
    }
}

#[test]
fn load_state_dict_reports_every_problem() {
    let mut n = net();
    let mut sd = get_state_dict(&n);
    sd.remove("l1.bias");
    sd.insert("l9.weight".into(), Tensor::zeros(&[1], DType::FLOAT32));
    sd.insert("l1.weight".into(), Tensor::zeros(&[4, 3], DType::FLOAT32));
    sd.insert(
        "bn.running_mean".into(),
        Tensor::zeros(&[3], DType::FLOAT16),
    );
    let e = load_state_dict(&mut n, &sd, true).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("missing keys: [\"l1.bias\"]"), "{msg}");
    assert!(msg.contains("unexpected keys: [\"l9.weight\"]"), "{msg}");
    assert!(
        msg.contains("`l1.weight`: expected shape [3, 4] float32, got shape [4, 3] float32"),
        "{msg}"
    );
    assert!(
        msg.contains("`bn.running_mean`: expected shape [3] float32, got shape [3] float16"),
        "{msg}"
    );
    match e {
        StateDictError::Mismatch { wrong, .. } => assert_eq!(wrong.len(), 2),
        other => panic!("{other:?}"),
    }
    // non-strict: missing/unexpected are fine, mismatches are not
    let e = load_state_dict(&mut n, &sd, false).unwrap_err().to_string();
    assert!(!e.contains("missing") && e.contains("l1.weight"), "{e}");
    let mut ok: BTreeMap<String, Tensor> = BTreeMap::new();
    ok.insert("l1.bias".into(), Tensor::ones(&[3], DType::FLOAT32));
    ok.insert("unused".into(), Tensor::ones(&[3], DType::FLOAT32));
    load_state_dict(&mut n, &ok, false).unwrap();
    assert_eq!(n.l1.bias.as_ref().unwrap().to_vec::<f32>(), vec![1.0; 3]);
}

// ---- training ----

struct Mlp {
    l1: Linear,
    bn: BatchNorm,
    l2: Linear,
}
impl_parameters!(Mlp { l1, bn, l2 });
impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.l1.forward(x).reshape(&[-1, 8, 1, 1]);
        self.l2
            .forward(&self.bn.forward(&h).relu().reshape(&[-1, 8]))
    }
}

#[test]
fn training_steps_lower_the_loss_and_graphs_stay_bounded() {
    Tensor::manual_seed(3);
    let model = Mlp {
        l1: Linear::new(4, 8),
        bn: BatchNorm::new(8),
        l2: Linear::new(8, 3),
    };
    let mut opt = optim::adam(get_parameters(&model), 0.05);
    assert_eq!(
        opt.params().len(),
        6,
        "weights, biases and BatchNorm's scale/shift"
    );
    assert_eq!(
        opt.buffers().len(),
        3,
        "running mean/var and the batch count"
    );
    let (x, xv) = tensor(&[16, 4], 31);
    let labels: Vec<i32> = xv
        .chunks(4)
        .map(|r| {
            if r[0] + r[1] > 0.0 {
                1
            } else if r[2] > 0.0 {
                2
            } else {
                0
            }
        })
        .collect();
    let y = Tensor::from_slice(&labels, &[16]);
    let _train = Tensor::train(true);
    let mut losses = vec![];
    let mut sizes = vec![];
    for _ in 0..10 {
        opt.zero_grad();
        let loss = model
            .forward(&x)
            .sparse_categorical_crossentropy(&y, -1, 0.0, Reduction::Mean);
        loss.backward();
        opt.step_with(&[&loss]);
        losses.push(loss.item::<f32>());
        let state = get_parameters(&model);
        sizes.push(
            state
                .iter()
                .chain(opt.moments().0)
                .map(|t| t.uop().toposort().len())
                .max()
                .unwrap(),
        );
    }
    assert!(
        losses[9] < losses[0] * 0.7,
        "loss did not go down: {losses:?}"
    );
    assert!(
        sizes.iter().all(|&s| s <= 2),
        "parameter graphs grow across steps: {sizes:?}"
    );
    assert_eq!(model.bn.num_batches_tracked.to_vec::<i32>(), vec![10]);
}

// ---- bad input ----

#[test]
#[should_panic(
    expected = "Linear: input shape [2, 5] must end in in_features=4 (weight shape [3, 4])"
)]
fn linear_wrong_input() {
    let _ = Linear::new(4, 3).forward(&Tensor::zeros(&[2, 5], DType::FLOAT32));
}

#[test]
#[should_panic(
    expected = "BatchNorm: input shape [2, 3, 4] must be (batch, 5, ...) for 5 channels"
)]
fn batchnorm_wrong_channels() {
    let _ = BatchNorm::new(5).forward(&Tensor::zeros(&[2, 3, 4], DType::FLOAT32));
}

#[test]
#[should_panic(
    expected = "LayerNorm: last dimensions of input shape [2, 3] must match normalized_shape [4]"
)]
fn layernorm_wrong_shape() {
    let _ = LayerNorm::new(&[4]).forward(&Tensor::zeros(&[2, 3], DType::FLOAT32));
}

#[test]
#[should_panic(expected = "GroupNorm: num_groups=3 must divide num_channels=4")]
fn groupnorm_bad_groups() {
    let _ = GroupNorm::new(3, 4);
}

#[test]
#[should_panic(expected = "Conv2d: groups=2 must divide in_channels=3 and out_channels=4")]
fn conv_bad_groups() {
    let _ = Conv2d::new_with(
        3,
        4,
        3,
        ConvOptions {
            groups: 2,
            ..Default::default()
        },
    );
}

#[test]
#[should_panic(expected = "Embedding: indices must be integers, got float32 (shape [2])")]
fn embedding_float_indices() {
    let _ = Embedding::new(4, 2).forward(&Tensor::zeros(&[2], DType::FLOAT32));
}

#[test]
#[should_panic(expected = "LSTMCell: input shape [2, 4] must be (batch, 3)")]
fn lstm_wrong_input() {
    let _ = LSTMCell::new(3, 2).forward(&Tensor::zeros(&[2, 4], DType::FLOAT32), None);
}

/// `padding='same'` with a kernel size of zero or a dilation per dim of the wrong length is
/// refused naming the layer (a wrong-length dilation list was zipped away silently).
#[test]
fn same_padding_checks_kernel_and_dilation() {
    use tinygrad_tensor::{Dims, Padding};
    let same = || ConvOptions {
        padding: Padding::Same,
        ..ConvOptions::default()
    };
    let msg = |f: Box<dyn FnOnce() + std::panic::UnwindSafe>| {
        let e = std::panic::catch_unwind(f).expect_err("must panic");
        e.downcast_ref::<String>().cloned().unwrap_or_default()
    };
    let m = msg(Box::new(move || {
        Conv2d::new_with(1, 1, Dims::Each(vec![3, 0]), same());
    }));
    assert!(m.contains("Conv2d") && m.contains("kernel"), "{m}");
    let m = msg(Box::new(move || {
        let o = ConvOptions {
            dilation: Dims::Each(vec![1, 2, 3]),
            ..same()
        };
        Conv2d::new_with(1, 1, Dims::Each(vec![3, 3]), o);
    }));
    assert!(m.contains("Conv2d") && m.contains("dilation"), "{m}");
    // a valid one pads to keep the size
    let c = Conv2d::new_with(1, 1, Dims::Each(vec![3, 5]), same());
    assert_eq!(
        c.forward(&Tensor::ones(&[1, 1, 6, 7], DType::FLOAT32))
            .shape(),
        vec![1, 1, 6, 7]
    );
}
