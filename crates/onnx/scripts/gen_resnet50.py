"""Writes torchvision's ResNet-50 (v1.5: the stride on the 3x3 convolution of each bottleneck) as
an ONNX file built with onnx.helper: random weights with a fixed seed, BatchNormalization kept
as nodes (as exporters write them in eval mode), a symbolic batch. For `cargo xtask bench
onnx_resnet50_1 onnx_resnet50_16` (ours against onnxruntime on the same file).

    pip install onnx numpy
    python3 crates/onnx/scripts/gen_resnet50.py target/bench/resnet50.onnx
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(50)
inits, nodes = [], []
count = [0]


def name(prefix):
    count[0] += 1
    return f"{prefix}_{count[0]}"


def conv_bn(x, cin, cout, k, stride, relu=True, gamma_scale=1.0):
    n = name("conv")
    fan = cin * k * k
    inits.append(numpy_helper.from_array((rng.standard_normal((cout, cin, k, k)) * np.sqrt(2 / fan)).astype(np.float32), n + ".w"))
    nodes.append(helper.make_node("Conv", [x, n + ".w"], [n], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4))
    for p, v in [("g", gamma_scale * (1 + 0.1 * rng.standard_normal(cout))), ("b", 0.1 * rng.standard_normal(cout)),
                 ("m", 0.1 * rng.standard_normal(cout)), ("v", 0.5 + rng.random(cout))]:
        inits.append(numpy_helper.from_array(v.astype(np.float32), f"{n}.{p}"))
    out = n + ".bn"
    nodes.append(helper.make_node("BatchNormalization", [n, n + ".g", n + ".b", n + ".m", n + ".v"], [out], epsilon=1e-5))
    if relu:
        nodes.append(helper.make_node("Relu", [out], [out + ".r"]))
        out += ".r"
    return out


def bottleneck(x, cin, width, stride):
    out = conv_bn(x, cin, width, 1, 1)
    out = conv_bn(out, width, width, 3, stride)
    # the residual branch's last BatchNormalization scaled down (like torchvision's
    # zero_init_residual, not quite zero): with fixed random statistics the BNs don't normalize,
    # and at full scale every block would double the activations' variance (logits ~1e4)
    out = conv_bn(out, width, width * 4, 1, 1, relu=False, gamma_scale=0.25)
    short = x if stride == 1 and cin == width * 4 else conv_bn(x, cin, width * 4, 1, stride, relu=False)
    s = name("add")
    nodes.append(helper.make_node("Add", [out, short], [s]))
    nodes.append(helper.make_node("Relu", [s], [s + ".r"]))
    return s + ".r"


x = conv_bn("x", 3, 64, 7, 2)
nodes.append(helper.make_node("MaxPool", [x], ["pool"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
x, cin = "pool", 64
for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
    for i in range(blocks):
        x = bottleneck(x, cin, width, stride if i == 0 else 1)
        cin = width * 4
nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"]))
nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], axis=1))
inits.append(numpy_helper.from_array((rng.standard_normal((1000, 2048)) * 0.02).astype(np.float32), "fc.w"))
inits.append(numpy_helper.from_array(np.zeros(1000, np.float32), "fc.b"))
nodes.append(helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], transB=1))
graph = helper.make_graph(
    nodes, "resnet50",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 224, 224])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1000])],
    inits,
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
out = sys.argv[1]
os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
onnx.save(model, out)
print(f"{out}: {sum(np.prod(t.dims) for t in inits) / 1e6:.1f}M parameters, {len(nodes)} nodes")
