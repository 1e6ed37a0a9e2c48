#!/usr/bin/env python3
"""Generate the GGUF and PyTorch checkpoint fixtures of crates/tensor/tests/nn_formats.rs with the
reference Python packages (`gguf`, the llama.cpp project's reader/writer, and `torch`):

- tests/golden/formats/quants.gguf: a GGUF v3 file written by `gguf.GGUFWriter` (alignment 64),
  with metadata of every value type (u8..u64, i8..i64, f32, f64, bool, string, arrays of ints,
  floats, strings and nested arrays) and tensors: f32 (3-D, to check the reversed `ne` order),
  f16, bf16, f64, i8, i16, i32, i64, and one of each quantized type (Q4_0, Q4_1, Q5_0, Q5_1,
  Q8_0, Q4_K, Q6_K) made of random block bytes whose fp16 scales are finite and modest, with at
  least 2 rows and 2 blocks per row.
- tests/golden/formats/quants_ref.safetensors: each tensor of quants.gguf as
  `gguf.quants.dequantize` gives it (float32 for the quantized ones), in numpy order, same names.
- tests/golden/formats/quants_meta.json: the metadata, as `{"key": {"type": "UINT8", "value": v}}`
  (float values are written as their exact float64 decimal; arrays as `{"type": "ARRAY",
  "item_type": ..., "value": [...]}`).
- tests/golden/formats/torch_sd.pt: `torch.save` (zip format) of a nested dict with tensors of
  every common dtype, a transposed tensor, slices with storage offsets and steps, two tensors
  sharing one storage, an expanded (stride 0) tensor, a permuted 3-D tensor, a 0-d tensor, an
  `nn.Parameter`, a module's `state_dict()` (an OrderedDict with `_metadata`), overlapping
  windows (`as_strided`), tensors in a list and a tuple, non-tensor leaves.
- tests/golden/formats/torch_ref.safetensors: the same tensors, contiguous, with the dotted names
  `torch_load` flattens them to.

Run from anywhere:  pip install numpy gguf torch safetensors;  python3 tests/golden/gen_formats.py
Deterministic (fixed seeds).
"""
from __future__ import annotations

import json
import os

import gguf
import numpy as np
import torch
from gguf import GGMLQuantizationType as Q
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "formats")
rng = np.random.default_rng(0x66F)

# quantized type -> (numpy shape, byte offsets of its fp16 scale fields within a block)
QUANTS = {
    Q.Q4_0: ((3, 64), [0]),
    Q.Q4_1: ((2, 96), [0, 2]),
    Q.Q5_0: ((2, 64), [0]),
    Q.Q5_1: ((3, 64), [0, 2]),
    Q.Q8_0: ((2, 64), [0]),
    Q.Q4_K: ((2, 512), [0, 2]),
    Q.Q6_K: ((3, 512), [208]),
}


def quant_blocks(qtype, shape, scale_offsets):
    block, nbytes = gguf.GGML_QUANT_SIZES[qtype]
    rows, cols = shape
    assert cols % block == 0 and cols // block >= 2 and rows >= 2
    nblocks = rows * cols // block
    raw = rng.integers(0, 256, size=(nblocks, nbytes), dtype=np.uint8)
    for off in scale_offsets:
        # finite, modest fp16 scales of both signs (some subnormal-free small values too)
        scale = (rng.uniform(-2.0, 2.0, size=nblocks) * 2.0 ** rng.integers(-6, 2, size=nblocks))
        raw[:, off:off + 2] = scale.astype(np.float16).view(np.uint8).reshape(nblocks, 2)
    return raw.reshape(rows, cols // block * nbytes)


def meta_json(v, vtype, sub=None):
    if vtype == gguf.GGUFValueType.ARRAY:
        return {"type": "ARRAY", "item_type": sub[0].name, "value": [meta_json(x, sub[0], sub[1:])["value"] if sub[0] != gguf.GGUFValueType.ARRAY else meta_json(x, sub[0], sub[1:]) for x in v]}
    if vtype in (gguf.GGUFValueType.FLOAT32, gguf.GGUFValueType.FLOAT64):
        return {"type": vtype.name, "value": float(v)}
    if vtype == gguf.GGUFValueType.BOOL:
        return {"type": vtype.name, "value": bool(v)}
    if vtype == gguf.GGUFValueType.STRING:
        return {"type": vtype.name, "value": str(v)}
    return {"type": vtype.name, "value": int(v)}


def write_gguf():
    path = os.path.join(OUT, "quants.gguf")
    w = gguf.GGUFWriter(path, "testarch")
    w.data_alignment = 64
    w.add_custom_alignment(64)
    T = gguf.GGUFValueType
    meta = {}

    def put(key, value, vtype, sub=None):
        if vtype == T.ARRAY:
            w.add_key_value(key, value, T.ARRAY, sub_type=sub[0])
        else:
            w.add_key_value(key, value, vtype)
        meta[key] = meta_json(value, vtype, sub)

    meta["general.architecture"] = {"type": "STRING", "value": "testarch"}
    meta["general.alignment"] = {"type": "UINT32", "value": 64}
    put("test.u8", 200, T.UINT8)
    put("test.i8", -100, T.INT8)
    put("test.u16", 60000, T.UINT16)
    put("test.i16", -30000, T.INT16)
    put("test.u32", 4000000000, T.UINT32)
    put("test.i32", -2000000000, T.INT32)
    put("test.u64", 18000000000000000000, T.UINT64)
    put("test.i64", -9000000000000000000, T.INT64)
    put("test.f32", float(np.float32(0.1)), T.FLOAT32)
    put("test.f64", 2.718281828459045, T.FLOAT64)
    put("test.true", True, T.BOOL)
    put("test.false", False, T.BOOL)
    put("test.string", "héllo, gguf ✓", T.STRING)
    put("test.empty_string", "", T.STRING)
    put("test.arr_i32", [1, -2, 3, 2147483647], T.ARRAY, [T.INT32])
    put("test.arr_f32", [0.5, -1.25, 3.0], T.ARRAY, [T.FLOAT32])
    put("test.arr_str", ["a", "", "tokens ✓", "<0x0A>"], T.ARRAY, [T.STRING])
    put("test.arr_nested", [[1, 2], [3]], T.ARRAY, [T.ARRAY, T.INT32])

    tensors = {}
    f32 = rng.standard_normal((2, 3, 4)).astype(np.float32)
    tensors["f32"] = (f32, None)
    tensors["f16"] = (rng.standard_normal((3, 5)).astype(np.float16), None)
    bf = torch.from_numpy(rng.standard_normal((2, 6)).astype(np.float32)).bfloat16()
    tensors["bf16"] = (bf.view(torch.int16).numpy().view(np.uint8).reshape(2, 12), Q.BF16, (2, 6), bf)
    tensors["f64"] = (rng.standard_normal((4,)).astype(np.float64), None)
    tensors["i8"] = (rng.integers(-128, 128, size=(2, 4), dtype=np.int8), None)
    tensors["i16"] = (rng.integers(-32768, 32768, size=(4,), dtype=np.int16), None)
    tensors["i32"] = (rng.integers(-2**31, 2**31, size=(2, 2), dtype=np.int32), None)
    tensors["i64"] = (rng.integers(-2**62, 2**62, size=(3,), dtype=np.int64), None)
    ref = {}
    for name, entry in tensors.items():
        if entry[1] is None:
            w.add_tensor(name, entry[0])
            ref[name] = torch.from_numpy(np.ascontiguousarray(entry[0]))
        else:
            raw, qt, shape, t = entry
            w.add_tensor(name, raw, raw_dtype=qt)
            ref[name] = t
    for qt, (shape, offs) in QUANTS.items():
        raw = quant_blocks(qt, shape, offs)
        name = qt.name.lower()
        w.add_tensor(name, raw, raw_dtype=qt)
        deq = gguf.quants.dequantize(raw, qt).astype(np.float32)
        assert deq.shape == shape and np.isfinite(deq).all(), (name, deq.shape)
        ref[name] = torch.from_numpy(np.ascontiguousarray(deq))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    # read it back with the package's reader: the file is what gguf itself understands
    r = gguf.GGUFReader(path)
    for t in r.tensors:
        assert t.name in ref, t.name
    save_file(ref, os.path.join(OUT, "quants_ref.safetensors"))
    with open(os.path.join(OUT, "quants_meta.json"), "w") as f:
        json.dump(meta, f, indent=1, ensure_ascii=False)
        f.write("\n")


def write_torch():
    g = torch.Generator().manual_seed(0x70C4)
    rn = lambda *s: torch.randn(*s, generator=g)
    shared = rn(8)
    base2d = rn(4, 6)
    lin = torch.nn.Linear(3, 2)
    with torch.no_grad():
        lin.weight.copy_(rn(2, 3))
        lin.bias.copy_(rn(2))
    sd = {
        "f32": rn(3, 4),
        "f16": rn(5).half(),
        "bf16": rn(2, 3).bfloat16(),
        "f64": rn(4).double(),
        "i64": torch.arange(-3, 3),
        "i32": torch.randint(-1000, 1000, (2, 2), generator=g, dtype=torch.int32),
        "i16": torch.randint(-30000, 30000, (3,), generator=g, dtype=torch.int16),
        "i8": torch.randint(-128, 128, (4,), generator=g, dtype=torch.int8),
        "u8": torch.randint(0, 256, (2, 3), generator=g, dtype=torch.uint8),
        "bool": torch.tensor([True, False, True, True]),
        "transposed": rn(3, 5).t(),
        "sliced": rn(10)[3:8],
        "strided": base2d[1:3, ::2],
        "shared_a": shared[:4],
        "shared_b": shared[4:].view(2, 2),
        "expanded": rn(3, 1).expand(3, 4),
        "permuted": rn(2, 3, 4).permute(2, 0, 1),
        "scalar": torch.tensor(3.5),
        "param": torch.nn.Parameter(rn(2, 2)),
        "nested": {"w": rn(2), "inner": {"b": torch.tensor([1, 2])}, "epoch": 5, "name": "x"},
        "model": lin.state_dict(),
        "step": 100,
        "windows": rn(10).as_strided((4, 3), (2, 1)),
        "list": [rn(2), (torch.tensor([7], dtype=torch.int16),)],
    }
    torch.save(sd, os.path.join(OUT, "torch_sd.pt"))

    flat = {}

    def walk(prefix, v):
        if isinstance(v, torch.Tensor):
            flat[prefix] = v.detach().contiguous().clone()
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(f"{prefix}.{k}" if prefix else str(k), x)
        elif isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                walk(f"{prefix}.{i}" if prefix else str(i), x)

    walk("", sd)
    save_file(flat, os.path.join(OUT, "torch_ref.safetensors"))


def main():
    os.makedirs(OUT, exist_ok=True)
    write_gguf()
    write_torch()
    total = 0
    for fn in sorted(os.listdir(OUT)):
        n = os.path.getsize(os.path.join(OUT, fn))
        total += n
        print(f"{fn}: {n} bytes")
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
