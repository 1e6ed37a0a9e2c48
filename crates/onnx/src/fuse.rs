//! Graph rewrites made once at load, before any run: a `BatchNormalization` in inference mode
//! that reads a `Conv`'s output alone is folded into that convolution's weight and bias
//! (onnxruntime's `ConvBNFusion`), so a run computes neither the normalization nor its
//! per-element square roots and divisions, and the convolution's epilogue only adds a bias.
//!
//! With `s = scale / sqrt(var + epsilon)` per output channel, `BN(Conv(x, W, B))` is
//! `Conv(x, W * s, (B - mean) * s + bias)`: the same value up to float32 rounding (the
//! products are rounded in another order).

use std::collections::{HashMap, HashSet};

use indexmap::IndexMap;
use tinygrad_tensor::{DType, Tensor};

use crate::narrow::Narrow;
use crate::proto::{GraphProto, NodeProto};

/// Folds every `Conv` -> `BatchNormalization` pair of `graph` whose weight, bias and
/// normalization parameters are float32 initializers in `initializers` (not narrow types), the
/// convolution's output read by the normalization alone (no other node, subgraph or graph
/// output reads it) and the normalization in inference mode with one output. The folded
/// weight and bias become new initializers; the ones no node reads any more (and no graph
/// input names) are dropped. Returns how many pairs were folded.
pub(crate) fn fold_batchnorms(
    graph: &mut GraphProto,
    initializers: &mut IndexMap<String, Tensor>,
    narrow: &HashMap<String, Narrow>,
) -> usize {
    let mut readers: HashMap<String, usize> = HashMap::new();
    count_reads(graph, &mut readers);
    for o in &graph.output {
        *readers
            .entry(o.name.clone().unwrap_or_default())
            .or_default() += 1;
    }
    let producer: HashMap<String, usize> = graph
        .node
        .iter()
        .enumerate()
        .filter(|(_, n)| n.op_type.as_deref() == Some("Conv") && is_default_domain(n))
        .filter_map(|(i, n)| Some((n.output.first()?.clone(), i)))
        .collect();
    let mut folded_bns = HashSet::new();
    let mut count = 0;
    for bi in 0..graph.node.len() {
        let bn = &graph.node[bi];
        if bn.op_type.as_deref() != Some("BatchNormalization") || !is_default_domain(bn) {
            continue;
        }
        let Some(&ci) = bn.input.first().and_then(|x| producer.get(x)) else {
            continue;
        };
        if readers.get(&bn.input[0]).copied() != Some(1) {
            continue;
        }
        let Some(fold) = plan_fold(&graph.node[ci], bn, initializers, narrow) else {
            continue;
        };
        let name = |what: &str| {
            let base = graph.node[ci]
                .name
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| bn.output[0].clone());
            unique_name(initializers, &format!("{base}/bn_folded_{what}"))
        };
        let (w_name, b_name) = (name("weight"), name("bias"));
        let (w, b) = fold.tensors();
        initializers.insert(w_name.clone(), w);
        initializers.insert(b_name.clone(), b);
        let out = graph.node[bi].output[0].clone();
        let conv = &mut graph.node[ci];
        conv.input.truncate(2);
        conv.input[1] = w_name;
        conv.input.push(b_name);
        conv.output[0] = out;
        folded_bns.insert(bi);
        count += 1;
    }
    if count > 0 {
        let mut i = 0;
        graph.node.retain(|_| {
            i += 1;
            !folded_bns.contains(&(i - 1))
        });
        drop_unread(graph, initializers);
    }
    count
}

/// What one fold reads: the convolution's weight and bias (zeros when it has none) and the
/// normalization's parameters, all float32 tensors of matching sizes.
struct Fold {
    weight: Tensor,
    bias: Option<Tensor>,
    scale: Tensor,
    shift: Tensor,
    mean: Tensor,
    var: Tensor,
    epsilon: f32,
}

impl Fold {
    /// The folded weight and bias, realized.
    fn tensors(&self) -> (Tensor, Tensor) {
        let channels = self.weight.shape()[0];
        let s = (&self.var + self.epsilon).rsqrt() * &self.scale;
        let mut per_channel = vec![1isize; self.weight.ndim()];
        per_channel[0] = channels as isize;
        let weight = &self.weight * s.reshape(&per_channel);
        let bias = match &self.bias {
            Some(b) => (b - &self.mean) * &s + &self.shift,
            None => -&self.mean * &s + &self.shift,
        };
        weight.realize();
        bias.realize();
        (weight, bias)
    }
}

/// The fold of `conv` -> `bn`, when every value it needs is a float32 initializer of the
/// right size and `bn` is in inference mode.
fn plan_fold(
    conv: &NodeProto,
    bn: &NodeProto,
    initializers: &IndexMap<String, Tensor>,
    narrow: &HashMap<String, Narrow>,
) -> Option<Fold> {
    let int_attr = |n: &NodeProto, name: &str| {
        n.attribute
            .iter()
            .find(|a| a.name.as_deref() == Some(name))
            .and_then(|a| a.i)
    };
    let live_outputs = bn.output.iter().filter(|o| !o.is_empty()).count();
    if int_attr(bn, "training_mode").unwrap_or(0) != 0
        || int_attr(bn, "spatial").unwrap_or(1) != 1
        || live_outputs != 1
        || bn.output[0].is_empty()
        || bn.input.len() != 5
    {
        return None;
    }
    let float32 = |name: &str| {
        let t = initializers.get(name)?;
        (t.dtype() == DType::FLOAT32 && !narrow.contains_key(name)).then(|| t.clone())
    };
    let weight = float32(conv.input.get(1)?)?;
    if weight.ndim() < 3 {
        return None;
    }
    let channels = weight.shape()[0];
    let vector = |name: &str| float32(name).filter(|t| t.shape() == [channels]);
    let bias = match conv.input.get(2).filter(|b| !b.is_empty()) {
        Some(b) => Some(vector(b)?),
        None => None,
    };
    let epsilon = bn
        .attribute
        .iter()
        .find(|a| a.name.as_deref() == Some("epsilon"))
        .and_then(|a| a.f)
        .unwrap_or(1e-5);
    Some(Fold {
        weight,
        bias,
        scale: vector(&bn.input[1])?,
        shift: vector(&bn.input[2])?,
        mean: vector(&bn.input[3])?,
        var: vector(&bn.input[4])?,
        epsilon,
    })
}

fn is_default_domain(n: &NodeProto) -> bool {
    matches!(n.domain.as_deref(), None | Some("") | Some("ai.onnx"))
}

/// Adds 1 to `readers[name]` for every input of every node of `graph` and of the subgraphs in
/// its nodes' attributes (a subgraph may read an outer value by name).
fn count_reads(graph: &GraphProto, readers: &mut HashMap<String, usize>) {
    for n in &graph.node {
        for i in n.input.iter().filter(|i| !i.is_empty()) {
            *readers.entry(i.clone()).or_default() += 1;
        }
        for a in &n.attribute {
            for g in a.g.iter().chain(&a.graphs) {
                count_reads(g, readers);
            }
        }
    }
}

/// `want`, or `want` with a number appended, whichever names no initializer yet.
fn unique_name(initializers: &IndexMap<String, Tensor>, want: &str) -> String {
    let mut name = want.to_string();
    let mut k = 1;
    while initializers.contains_key(&name) {
        name = format!("{want}_{k}");
        k += 1;
    }
    name
}

/// Drops the initializers that no node (or subgraph) reads and no graph input or output
/// names: the weights and parameters a fold replaced.
fn drop_unread(graph: &GraphProto, initializers: &mut IndexMap<String, Tensor>) {
    let mut readers = HashMap::new();
    count_reads(graph, &mut readers);
    let named: HashSet<&str> = graph
        .input
        .iter()
        .chain(&graph.output)
        .filter_map(|v| v.name.as_deref())
        .collect();
    initializers.retain(|name, _| readers.contains_key(name) || named.contains(name.as_str()));
}
