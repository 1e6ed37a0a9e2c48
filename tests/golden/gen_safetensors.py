#!/usr/bin/env python3
"""Generate the safetensors fixtures of crates/tensor/tests/nn_state.rs with the reference Python
`safetensors` package (the library PyTorch and Hugging Face use to write these files):

- tests/golden/dtypes.safetensors: one tensor per dtype (BOOL, U8..U64, I8..I64, F16, BF16, F32,
  F64, F8_E4M3, F8_E5M2), a 0-d tensor, an empty tensor and a dotted name, with `__metadata__`.
  Written with `safetensors.numpy.save_file`, except the dtypes numpy lacks (BF16, F8_*), which go
  through the package's own serializer (`safetensors.serialize_file`) with their raw bits.
- tests/golden/mlp.safetensors: the weights of a 2-layer MLP (`l1.weight`, `l1.bias`, `l2.weight`,
  `l2.bias`, PyTorch layout: weight is (out, in)).
- tests/golden/safetensors.json: what the Rust test expects: each tensor's dtype, shape and raw
  little-endian bytes (hex), and the MLP's input and output `l2(relu(l1(x)))` computed in float64.

Run from anywhere:  pip install numpy safetensors;  python3 tests/golden/gen_safetensors.py
Deterministic (fixed values and a seeded PCG64).
"""
from __future__ import annotations

import json
import os

import numpy as np
import safetensors
from safetensors.numpy import TensorSpec, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(0x5AFE)


def bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return b.astype(np.uint16)


def main():
    np_tensors = {
        "f32": np.array([[0.5, -1.25, 3.0], [1e-3, -0.0, 65504.0]], dtype=np.float32),
        "f64": np.array([np.pi, -np.e, 1e300], dtype=np.float64),
        "f16": np.array([[1.0, -2.5], [0.0999755859375, 65504.0]], dtype=np.float16),
        "i8": np.array([-128, -1, 0, 127], dtype=np.int8),
        "u8": np.array([0, 1, 200, 255], dtype=np.uint8),
        "i16": np.array([-32768, -2, 3, 32767], dtype=np.int16),
        "u16": np.array([0, 7, 40000, 65535], dtype=np.uint16),
        "i32": np.array([[-2147483648, -5], [6, 2147483647]], dtype=np.int32),
        "u32": np.array([0, 3, 4000000000, 4294967295], dtype=np.uint32),
        "i64": np.array([-(2**63), -9, 10, 2**63 - 1], dtype=np.int64),
        "u64": np.array([0, 11, 2**40, 2**64 - 1], dtype=np.uint64),
        "bool": np.array([[True, False, True], [False, False, True]], dtype=np.bool_),
        "scalar": np.array(7.5, dtype=np.float32),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "nested.block.weight": np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32),
    }
    # dtypes numpy lacks: raw bits through the package's serializer
    raw = {
        "bf16": ("bfloat16", (2, 2), bf16_bits([1.0, -2.0, 0.15625, 3.0e38])),
        "f8_e4m3": ("float8_e4m3fn", (4,), np.array([0x38, 0xB8, 0x7E, 0x01], dtype=np.uint8)),
        "f8_e5m2": ("float8_e5m2", (4,), np.array([0x3C, 0xC0, 0x7B, 0x01], dtype=np.uint8)),
    }
    metadata = {"producer": "tests/golden/gen_safetensors.py", "format": "np"}

    path = os.path.join(HERE, "dtypes.safetensors")
    # one call writes everything: numpy arrays as save_file's _flatten does, raw ones by spec
    specs = {}
    keep = []
    for k, v in np_tensors.items():
        v = np.ascontiguousarray(v)
        keep.append(v)
        specs[k] = TensorSpec(dtype=v.dtype.name, shape=v.shape, data_ptr=v.ctypes.data, data_len=v.nbytes)
    for k, (dt, shape, bits) in raw.items():
        bits = np.ascontiguousarray(bits)
        keep.append(bits)
        specs[k] = TensorSpec(dtype=dt, shape=shape, data_ptr=bits.ctypes.data, data_len=bits.nbytes)
    safetensors.serialize_file(specs, path, metadata=metadata)

    # the shapes as written in the file's header (the package stores a 0-d array as [1])
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))

    names = {
        "float32": "F32", "float64": "F64", "float16": "F16", "int8": "I8", "uint8": "U8",
        "int16": "I16", "uint16": "U16", "int32": "I32", "uint32": "U32", "int64": "I64",
        "uint64": "U64", "bool": "BOOL",
    }
    expect = {}
    for k, v in np_tensors.items():
        expect[k] = {"dtype": names[v.dtype.name], "shape": header[k]["shape"], "hex": v.astype(v.dtype.newbyteorder("<")).tobytes().hex()}
    for k, (dt, shape, bits) in raw.items():
        code = {"bfloat16": "BF16", "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2"}[dt]
        expect[k] = {"dtype": code, "shape": list(shape), "hex": bits.astype(bits.dtype.newbyteorder("<")).tobytes().hex()}

    # a small MLP in PyTorch layout, saved with the numpy API alone
    w1 = rng.standard_normal((5, 4)).astype(np.float32)
    b1 = rng.standard_normal((5,)).astype(np.float32)
    w2 = rng.standard_normal((3, 5)).astype(np.float32)
    b2 = rng.standard_normal((3,)).astype(np.float32)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    save_file({"l1.weight": w1, "l1.bias": b1, "l2.weight": w2, "l2.bias": b2},
              os.path.join(HERE, "mlp.safetensors"))
    h = np.maximum(x.astype(np.float64) @ w1.T.astype(np.float64) + b1, 0.0)
    y = h @ w2.T.astype(np.float64) + b2

    out = {
        "metadata": metadata,
        "tensors": expect,
        "mlp": {"x": x.ravel().astype(np.float64).tolist(), "x_shape": list(x.shape),
                "y": y.ravel().tolist(), "y_shape": list(y.shape)},
    }
    with open(os.path.join(HERE, "safetensors.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {len(expect)} tensors to dtypes.safetensors, 4 to mlp.safetensors")


if __name__ == "__main__":
    main()
