"""Builds two small real architectures as ONNX files with random weights (fixed seed) and
stores onnxruntime's outputs for them, for crates/onnx/tests/models.rs:

- resnet_tiny.onnx: a ResNet stem and one basic block (Conv, BatchNormalization, Relu,
  MaxPool, a residual Add), GlobalAveragePool, Flatten and a Gemm classifier;
- bert_tiny.onnx: a BERT encoder layer as exporters write it: Gather embeddings, LayerNormalization,
  attention with heads split by Shape/Gather/Concat/Reshape, Transpose, Softmax over a padding
  mask, GELU in erf form, residuals.

    pip install onnx onnxruntime numpy
    python3 crates/onnx/tests/data/gen_models.py

Each model gets NAME.onnx, NAME_input_K.pb and NAME_output_K.pb (TensorProto) next to this file.
"""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(1234)
OPSET = 17


def w(name, *shape, scale=0.2):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def resnet():
    inits, nodes = [], []

    def conv_bn(x, cin, cout, name, relu=True):
        inits.append(w(f"{name}.w", cout, cin, 3, 3))
        inits.append(numpy_helper.from_array((1 + 0.1 * rng.standard_normal(cout)).astype(np.float32), f"{name}.g"))
        inits.append(numpy_helper.from_array((0.1 * rng.standard_normal(cout)).astype(np.float32), f"{name}.b"))
        inits.append(numpy_helper.from_array((0.1 * rng.standard_normal(cout)).astype(np.float32), f"{name}.m"))
        inits.append(numpy_helper.from_array((0.5 + rng.random(cout)).astype(np.float32), f"{name}.v"))
        nodes.append(helper.make_node("Conv", [x, f"{name}.w"], [f"{name}.c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]))
        out = f"{name}.bn"
        nodes.append(helper.make_node("BatchNormalization", [f"{name}.c", f"{name}.g", f"{name}.b", f"{name}.m", f"{name}.v"], [out], epsilon=1e-5))
        if relu:
            nodes.append(helper.make_node("Relu", [out], [f"{name}.r"]))
            out = f"{name}.r"
        return out

    h = conv_bn("x", 3, 8, "stem")
    nodes.append(helper.make_node("MaxPool", [h], ["pool"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    a = conv_bn("pool", 8, 8, "block.1")
    b = conv_bn(a, 8, 8, "block.2", relu=False)
    nodes.append(helper.make_node("Add", [b, "pool"], ["res"]))
    nodes.append(helper.make_node("Relu", ["res"], ["res.r"]))
    nodes.append(helper.make_node("GlobalAveragePool", ["res.r"], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], axis=1))
    inits.append(w("fc.w", 10, 8))
    inits.append(w("fc.b", 10))
    nodes.append(helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], transB=1))
    graph = helper.make_graph(
        nodes, "resnet_tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        inits,
    )
    inputs = [rng.standard_normal((2, 3, 16, 16)).astype(np.float32)]
    return graph, inputs


def bert():
    vocab, hidden, heads, ffn, seq = 50, 16, 2, 32, 8
    hd = hidden // heads
    inits, nodes = [], []
    c = lambda name, v, dt=np.int64: inits.append(numpy_helper.from_array(np.array(v, dtype=dt), name))
    inits += [w("word", vocab, hidden), w("pos", seq, hidden)]
    for ln in ["ln0", "ln1", "ln2"]:
        inits.append(numpy_helper.from_array((1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32), f"{ln}.g"))
        inits.append(numpy_helper.from_array((0.1 * rng.standard_normal(hidden)).astype(np.float32), f"{ln}.b"))
    for p in ["q", "k", "v", "o"]:
        inits += [w(f"{p}.w", hidden, hidden), w(f"{p}.b", hidden)]
    inits += [w("f1.w", hidden, ffn), w("f1.b", ffn), w("f2.w", ffn, hidden), w("f2.b", hidden)]
    c("zero", [0]); c("one", [1]); c("heads", [heads]); c("hd", [hd]); c("hidden", [hidden])
    c("sqrt", np.sqrt(hd), np.float32); c("half", 0.5, np.float32); c("rsqrt2", 1 / np.sqrt(2), np.float32)
    c("fone", 1.0, np.float32); c("neg", -10000.0, np.float32)
    n = lambda op, i, o, **kw: nodes.append(helper.make_node(op, i, o, **kw))
    n("Gather", ["word", "ids"], ["emb"])
    n("Add", ["emb", "pos"], ["emb.p"])
    n("LayerNormalization", ["emb.p", "ln0.g", "ln0.b"], ["x0"], axis=-1, epsilon=1e-12)
    # the batch size read from the input, as exporters do
    n("Shape", ["ids"], ["ids.shape"])
    n("Gather", ["ids.shape", "zero"], ["B"], axis=0)
    n("Gather", ["ids.shape", "one"], ["T"], axis=0)
    n("Concat", ["B", "T", "heads", "hd"], ["split.shape"], axis=0)
    n("Concat", ["B", "T", "hidden"], ["merge.shape"], axis=0)
    for p in ["q", "k", "v"]:
        n("MatMul", ["x0", f"{p}.w"], [f"{p}.mm"])
        n("Add", [f"{p}.mm", f"{p}.b"], [f"{p}.lin"])
        n("Reshape", [f"{p}.lin", "split.shape"], [f"{p}.split"])
        n("Transpose", [f"{p}.split"], [f"{p}.h"], perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3])
    n("MatMul", ["q.h", "k.h"], ["scores"])
    n("Div", ["scores", "sqrt"], ["scores.s"])
    # mask (B, T) of 1/0 -> (B, 1, 1, T) additive
    n("Unsqueeze", ["mask", "one"], ["mask.1"])
    n("Unsqueeze", ["mask.1", "one"], ["mask.2"])
    n("Cast", ["mask.2"], ["mask.f"], to=TensorProto.FLOAT)
    n("Sub", ["fone", "mask.f"], ["mask.inv"])
    n("Mul", ["mask.inv", "neg"], ["mask.add"])
    n("Add", ["scores.s", "mask.add"], ["scores.m"])
    n("Softmax", ["scores.m"], ["probs"], axis=-1)
    n("MatMul", ["probs", "v.h"], ["ctx"])
    n("Transpose", ["ctx"], ["ctx.t"], perm=[0, 2, 1, 3])
    n("Reshape", ["ctx.t", "merge.shape"], ["ctx.m"])
    n("MatMul", ["ctx.m", "o.w"], ["o.mm"])
    n("Add", ["o.mm", "o.b"], ["o.lin"])
    n("Add", ["o.lin", "x0"], ["res1"])
    n("LayerNormalization", ["res1", "ln1.g", "ln1.b"], ["x1"], axis=-1, epsilon=1e-12)
    n("MatMul", ["x1", "f1.w"], ["f1.mm"])
    n("Add", ["f1.mm", "f1.b"], ["f1.lin"])
    n("Mul", ["f1.lin", "rsqrt2"], ["g.s"])
    n("Erf", ["g.s"], ["g.e"])
    n("Add", ["g.e", "fone"], ["g.p"])
    n("Mul", ["f1.lin", "g.p"], ["g.m"])
    n("Mul", ["g.m", "half"], ["gelu"])
    n("MatMul", ["gelu", "f2.w"], ["f2.mm"])
    n("Add", ["f2.mm", "f2.b"], ["f2.lin"])
    n("Add", ["f2.lin", "x1"], ["res2"])
    n("LayerNormalization", ["res2", "ln2.g", "ln2.b"], ["hidden_states"], axis=-1, epsilon=1e-12)
    graph = helper.make_graph(
        nodes, "bert_tiny",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", seq]),
         helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", seq])],
        [helper.make_tensor_value_info("hidden_states", TensorProto.FLOAT, ["batch", seq, hidden])],
        inits,
    )
    ids = rng.integers(0, vocab, (3, seq)).astype(np.int64)
    mask = np.ones((3, seq), dtype=np.int64)
    mask[1, 5:] = 0
    mask[2, 2:] = 0
    return graph, [ids, mask]


for name, build in [("resnet_tiny", resnet), ("bert_tiny", bert)]:
    graph, inputs = build()
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    path = os.path.join(HERE, f"{name}.onnx")
    onnx.save(model, path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {i.name: v for i, v in zip(sess.get_inputs(), inputs)}
    outs = sess.run(None, feeds)
    for k, v in enumerate(inputs):
        with open(os.path.join(HERE, f"{name}_input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v).SerializeToString())
    for k, v in enumerate(outs):
        with open(os.path.join(HERE, f"{name}_output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v).SerializeToString())
    print(f"{name}: onnxruntime {ort.__version__}, outputs {[o.shape for o in outs]}")
