"""Writes a BERT encoder with all-MiniLM-L6-v2's configuration (vocab 30522, hidden 384, 6 layers,
12 heads, intermediate 1536, 512 positions, 2 token types, LayerNorm eps 1e-12) as an ONNX file
built with onnx.helper, laid out the way torch.onnx.export writes transformers' BertModel at
opset 17: Constant nodes for the small constants, position ids sliced from a constant arange by
the input's Shape, head splits and merges from Shape/Gather/Unsqueeze/Concat/Reshape, the key's
two transposes fused into one, an additive mask (1 - mask) * finfo(float32).min, GELU in erf
form (Div by sqrt 2, Erf, Add, Mul, Mul), a Gather/Gemm/Tanh pooler. Random weights with a fixed
seed, at a trained BERT's scales (std 0.02; LayerNorm gamma 1 + 0.1 N, beta 0.1 N).

    pip install onnx numpy
    python3 crates/onnx/scripts/gen_bert.py target/full/bert.onnx

Inputs input_ids, attention_mask, token_type_ids (int64, [batch, sequence]); outputs
last_hidden_state [batch, sequence, 384] and pooler_output [batch, 384].
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

VOCAB, HIDDEN, LAYERS, HEADS, FFN, MAX_POS, TYPES, EPS = 30522, 384, 6, 12, 1536, 512, 2, 1e-12
HEAD_DIM = HIDDEN // HEADS

rng = np.random.default_rng(384)
inits, nodes = [], []
counts = {}


def param(name, value):
    inits.append(numpy_helper.from_array(value, name))
    return name


def normal(name, *shape, std=0.02):
    return param(name, (rng.standard_normal(shape) * std).astype(np.float32))


def node(op, inputs, scope, out=None, **attrs):
    """One node named as the exporter names them (/scope/Op, /scope/Op_1, ...); its output."""
    base = f"{scope}/{op}"
    k = counts.get(base, 0)
    counts[base] = k + 1
    nm = base if k == 0 else f"{base}_{k}"
    out = out or f"{nm}_output_0"
    nodes.append(helper.make_node(op, inputs, [out], name=nm, **attrs))
    return out


def const(scope, value, dtype=np.int64):
    return node("Constant", [], scope, value=numpy_helper.from_array(np.array(value, dtype=dtype)))


def linear(x, module, scope, cin, cout, std=0.02):
    """nn.Linear on a 3-d input: MatMul by the transposed weight, then Add of the bias."""
    w = (rng.standard_normal((cout, cin)) * std).astype(np.float32)
    param(f"{module}.weight.T", np.ascontiguousarray(w.T))
    normal(f"{module}.bias", cout)
    mm = node("MatMul", [x, f"{module}.weight.T"], scope)
    return node("Add", [f"{module}.bias", mm], scope)


def layer_norm(x, module, scope, out=None):
    param(f"{module}.weight", (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32))
    param(f"{module}.bias", (0.1 * rng.standard_normal(HIDDEN)).astype(np.float32))
    return node("LayerNormalization", [x, f"{module}.weight", f"{module}.bias"], scope, out=out, axis=-1, epsilon=EPS)


def batch_seq(x, scope):
    """x.size(0), x.size(1) as 1-element int64 tensors, as the exporter writes them."""
    dims = []
    for axis in (0, 1):
        shape = node("Shape", [x], scope)
        d = node("Gather", [shape, const(scope, axis)], scope, axis=0)
        dims.append(node("Unsqueeze", [d, const(scope, [0])], scope))
    return dims


def split_heads(x, scope, perm):
    """transpose_for_scores: view (B, T, heads, head_dim), then permute."""
    b, t = batch_seq(x, scope)
    shape = node("Concat", [b, t, const(scope, [HEADS]), const(scope, [HEAD_DIM])], scope, axis=0)
    return node("Transpose", [node("Reshape", [x, shape], scope)], scope, perm=perm)


# embeddings
s = "/embeddings"
normal("embeddings.word_embeddings.weight", VOCAB, HIDDEN)
normal("embeddings.position_embeddings.weight", MAX_POS, HIDDEN)
normal("embeddings.token_type_embeddings.weight", TYPES, HIDDEN)
param("embeddings.position_ids", np.arange(MAX_POS, dtype=np.int64)[None])
seq = node("Gather", [node("Shape", ["input_ids"], s), const(s, 1)], s, axis=0)
ends = node("Unsqueeze", [seq, const(s, [0])], s)
position_ids = node("Slice", ["embeddings.position_ids", const(s, [0]), ends, const(s, [1]), const(s, [1])], s)
words = node("Gather", ["embeddings.word_embeddings.weight", "input_ids"], s + "/word_embeddings")
types = node("Gather", ["embeddings.token_type_embeddings.weight", "token_type_ids"], s + "/token_type_embeddings")
emb = node("Add", [words, types], s)
positions = node("Gather", ["embeddings.position_embeddings.weight", position_ids], s + "/position_embeddings")
emb = node("Add", [emb, positions], s)
h = layer_norm(emb, "embeddings.LayerNorm", s + "/LayerNorm")

# the extended attention mask: attention_mask[:, None, None, :], (1 - m) * finfo.min
m = node("Unsqueeze", ["attention_mask", const("", [1])], "")
m = node("Unsqueeze", [m, const("", [2])], "")
m = node("Cast", [m], "", to=TensorProto.FLOAT)
m = node("Sub", [const("", 1.0, np.float32), m], "")
mask = node("Mul", [m, const("", np.finfo(np.float32).min, np.float32)], "")

for i in range(LAYERS):
    p, mod = f"/encoder/layer.{i}", f"encoder.layer.{i}"
    sa, smod = p + "/attention/self", mod + ".attention.self"
    # query and key at 4x the scale: scores spread like a trained model's (peaked softmax rows)
    q = linear(h, smod + ".query", sa + "/query", HIDDEN, HIDDEN, std=0.08)
    k = split_heads(linear(h, smod + ".key", sa + "/key", HIDDEN, HIDDEN, std=0.08), sa, [0, 2, 3, 1])
    v = split_heads(linear(h, smod + ".value", sa + "/value", HIDDEN, HIDDEN), sa, [0, 2, 1, 3])
    q = split_heads(q, sa, [0, 2, 1, 3])
    scores = node("MatMul", [q, k], sa)
    scores = node("Div", [scores, const(sa, np.sqrt(HEAD_DIM), np.float32)], sa)
    scores = node("Add", [scores, mask], sa)
    probs = node("Softmax", [scores], sa, axis=-1)
    ctx = node("Transpose", [node("MatMul", [probs, v], sa)], sa, perm=[0, 2, 1, 3])
    b, t = batch_seq(ctx, sa)
    shape = node("Concat", [b, t, const(sa, [HIDDEN])], sa, axis=0)
    ctx = node("Reshape", [ctx, shape], sa)
    ao, amod = p + "/attention/output", mod + ".attention.output"
    x = linear(ctx, amod + ".dense", ao + "/dense", HIDDEN, HIDDEN)
    h = layer_norm(node("Add", [x, h], ao), amod + ".LayerNorm", ao + "/LayerNorm")
    it = p + "/intermediate"
    x = linear(h, mod + ".intermediate.dense", it + "/dense", HIDDEN, FFN)
    g = it + "/intermediate_act_fn"
    e = node("Erf", [node("Div", [x, const(g, np.sqrt(2), np.float32)], g)], g)
    e = node("Add", [e, const(g, 1.0, np.float32)], g)
    x = node("Mul", [node("Mul", [x, e], g), const(g, 0.5, np.float32)], g)
    x = linear(x, mod + ".output.dense", p + "/output/dense", FFN, HIDDEN)
    last = "last_hidden_state" if i == LAYERS - 1 else None
    h = layer_norm(node("Add", [x, h], p + "/output"), mod + ".output.LayerNorm", p + "/output/LayerNorm", out=last)

# pooler: hidden_states[:, 0], Linear (a Gemm on 2-d input), Tanh
first = node("Gather", [h, const("/pooler", 0)], "/pooler", axis=1)
normal("pooler.dense.weight", HIDDEN, HIDDEN)
normal("pooler.dense.bias", HIDDEN)
x = node("Gemm", [first, "pooler.dense.weight", "pooler.dense.bias"], "/pooler/dense", alpha=1.0, beta=1.0, transB=1)
node("Tanh", [x], "/pooler/activation", out="pooler_output")

ids = lambda n: helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
graph = helper.make_graph(
    nodes, "bert",
    [ids("input_ids"), ids("attention_mask"), ids("token_type_ids")],
    [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", HIDDEN]),
     helper.make_tensor_value_info("pooler_output", TensorProto.FLOAT, ["batch", HIDDEN])],
    inits,
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.checker.check_model(model, full_check=True)
out = sys.argv[1]
os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
onnx.save(model, out)
print(f"{out}: {sum(np.prod(t.dims) for t in inits) / 1e6:.1f}M parameters, {len(nodes)} nodes")
