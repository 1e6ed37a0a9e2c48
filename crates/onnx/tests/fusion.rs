//! Graph rewrites made at load: a `BatchNormalization` folded into the `Conv` it reads, checked
//! against the unfolded definition computed in f64 here, and left alone where another node or
//! a graph output reads the convolution's output.

mod common;

use std::collections::HashMap;

use common::{FLOAT, floats_init, model, node, value};
use tinygrad_onnx::proto::AttributeProto;
use tinygrad_tensor::Tensor;

const C_IN: usize = 2;
const C_OUT: usize = 3;
const SIDE: usize = 5;

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as u64 * 7919 + seed * 104_729) % 2000) as f32 / 1000.0 - 1.0)
        .collect()
}

/// `BatchNormalization(Conv(x, w, b))` in f64: a 3x3 convolution with padding 1, then the
/// normalization per output channel.
fn reference(x: &[f32], w: &[f32], b: Option<&[f32]>, bn: &[Vec<f32>; 4], eps: f64) -> Vec<f64> {
    let mut out = vec![0f64; C_OUT * SIDE * SIDE];
    for o in 0..C_OUT {
        for y in 0..SIDE {
            for xx in 0..SIDE {
                let mut acc = b.map_or(0.0, |b| b[o] as f64);
                for i in 0..C_IN {
                    for ky in 0..3 {
                        for kx in 0..3 {
                            let (sy, sx) = (y as i64 + ky as i64 - 1, xx as i64 + kx as i64 - 1);
                            if sy < 0 || sx < 0 || sy >= SIDE as i64 || sx >= SIDE as i64 {
                                continue;
                            }
                            let xv = x[(i * SIDE + sy as usize) * SIDE + sx as usize] as f64;
                            acc += xv * w[((o * C_IN + i) * 3 + ky) * 3 + kx] as f64;
                        }
                    }
                }
                let [scale, shift, mean, var] = bn;
                let norm = (acc - mean[o] as f64) / (var[o] as f64 + eps).sqrt();
                out[(o * SIDE + y) * SIDE + xx] = norm * scale[o] as f64 + shift[o] as f64;
            }
        }
    }
    out
}

/// Runs a `Conv -> BatchNormalization` model (with a conv bias or not; with a second reader
/// of the convolution's output or not) node by node and returns its outputs and whether a
/// `BatchNormalization` node still ran.
fn run(bias: bool, second_reader: bool) -> (HashMap<String, Tensor>, bool) {
    let x = values(C_IN * SIDE * SIDE, 1);
    let w = values(C_OUT * C_IN * 9, 2);
    let b = values(C_OUT, 3);
    let bn = bn_params();
    let mut inits = vec![floats_init("w", &w, &[C_OUT as i64, C_IN as i64, 3, 3])];
    let mut conv_inputs = vec!["x", "w"];
    if bias {
        inits.push(floats_init("b", &b, &[C_OUT as i64]));
        conv_inputs.push("b");
    }
    for (name, v) in ["scale", "shift", "mean", "var"].iter().zip(&bn) {
        inits.push(floats_init(name, v, &[C_OUT as i64]));
    }
    let pads = AttributeProto {
        name: Some("pads".into()),
        r#type: Some(7),
        ints: vec![1, 1, 1, 1],
        ..Default::default()
    };
    let eps = AttributeProto {
        name: Some("epsilon".into()),
        r#type: Some(1),
        f: Some(1e-3),
        ..Default::default()
    };
    let mut nodes = vec![
        node("Conv", &conv_inputs, &["c"], vec![pads]),
        node(
            "BatchNormalization",
            &["c", "scale", "shift", "mean", "var"],
            &["y"],
            vec![eps],
        ),
    ];
    let dims = [1, C_OUT as i64, SIDE as i64, SIDE as i64];
    let mut outputs = vec![value("y", FLOAT, &dims)];
    if second_reader {
        nodes.push(node("Relu", &["c"], &["r"], vec![]));
        outputs.push(value("r", FLOAT, &dims));
    }
    let input = value("x", FLOAT, &[1, C_IN as i64, SIDE as i64, SIDE as i64]);
    let m = model(nodes, inits, vec![input], outputs);
    let feeds = HashMap::from([(
        "x".to_string(),
        Tensor::from_slice(&x, &[1, C_IN, SIDE, SIDE]),
    )]);
    let (outs, times) = m.run_profiled(&feeds).expect("runs");
    let bn_ran = times.iter().any(|t| t.op == "BatchNormalization");
    (outs, bn_ran)
}

fn bn_params() -> [Vec<f32>; 4] {
    let var: Vec<f32> = values(C_OUT, 7).iter().map(|v| v.abs() + 0.1).collect();
    [values(C_OUT, 4), values(C_OUT, 5), values(C_OUT, 6), var]
}

#[test]
fn batchnorm_after_conv_is_folded_into_its_weight_and_bias() {
    let (x, w, b) = (
        values(C_IN * SIDE * SIDE, 1),
        values(C_OUT * C_IN * 9, 2),
        values(C_OUT, 3),
    );
    for bias in [true, false] {
        let (outs, bn_ran) = run(bias, false);
        assert!(!bn_ran, "bias {bias}: the BatchNormalization still ran");
        let want = reference(&x, &w, bias.then_some(&b[..]), &bn_params(), 1e-3);
        let got = outs["y"].to_vec::<f32>();
        for (i, (g, e)) in got.iter().zip(&want).enumerate() {
            assert!(
                (*g as f64 - e).abs() <= 1e-5 * (1.0 + e.abs()),
                "bias {bias}: element {i}: {g} vs {e}"
            );
        }
    }
}

#[test]
fn a_conv_output_read_elsewhere_is_not_folded() {
    let (outs, bn_ran) = run(true, true);
    assert!(
        bn_ran,
        "folded although Relu reads the convolution's output"
    );
    let (x, w, b) = (
        values(C_IN * SIDE * SIDE, 1),
        values(C_OUT * C_IN * 9, 2),
        values(C_OUT, 3),
    );
    let want = reference(&x, &w, Some(&b), &bn_params(), 1e-3);
    let got = outs["y"].to_vec::<f32>();
    for (g, e) in got.iter().zip(&want) {
        assert!(
            (*g as f64 - e).abs() <= 1e-5 * (1.0 + e.abs()),
            "{g} vs {e}"
        );
    }
    // the Relu of the unnormalized convolution: its own output, unchanged by the fold
    let relu = outs["r"].to_vec::<f32>();
    assert!(relu.iter().all(|v| *v >= 0.0) && relu.iter().any(|v| *v > 0.0));
}
