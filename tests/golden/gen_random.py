#!/usr/bin/env python3
"""Golden values for the random ops (crates/tensor/tests/random_golden.rs), recorded from
tinygrad itself: with the same seed, Tensor.rand/randn/randint/... give tinygrad's numbers.

Needs tinygrad 0.14.0 from PyPI (its Python emulator device needs no compiler):
  python3 -m venv /tmp/tgvenv && /tmp/tgvenv/bin/pip install tinygrad==0.14.0 numpy
  DEV=PYTHON /tmp/tgvenv/bin/python tests/golden/gen_random.py   (writes random_cases.json)

Each case sets a seed and makes a sequence of calls (the per-device counter advances with
every call, so later calls check it too); float outputs are stored as float64 of the float32
(or other dtype) values, ints as ints.
"""
import json
import os

from tinygrad import Tensor, dtypes
from tinygrad.helpers import Context

DT = {"float32": dtypes.float32, "float16": dtypes.float16, "float64": dtypes.float64,
      "bfloat16": dtypes.bfloat16, "int32": dtypes.int32}


def run(call):
    op, shape = call["op"], tuple(call.get("shape", ()))
    if op == "rand":
        return Tensor.rand(*shape, dtype=DT[call["dtype"]])
    if op == "randn":
        return Tensor.randn(*shape, dtype=DT[call["dtype"]])
    if op == "randint":
        return Tensor.randint(*shape, low=call["low"], high=call["high"], dtype=DT[call["dtype"]])
    if op == "uniform":
        return Tensor.uniform(*shape, low=call["low"], high=call["high"])
    if op == "normal":
        return Tensor.normal(*shape, mean=call["mean"], std=call["std"])
    if op == "glorot_uniform":
        return Tensor.glorot_uniform(*shape)
    if op == "kaiming_uniform":
        return Tensor.kaiming_uniform(*shape, a=call["a"])
    if op == "randperm":
        return Tensor.randperm(call["n"])
    if op == "dropout":
        with Context(TRAINING=1):
            return Tensor.ones(*shape).dropout(call["p"])
    raise ValueError(op)


def out(t):
    v = t.cast(dtypes.float64).numpy() if dtypes.is_float(t.dtype) else t.numpy()
    return {"shape": list(t.shape), "dtype": str(t.dtype).replace("dtypes.", ""),
            "data": [float(x) if dtypes.is_float(t.dtype) else int(x) for x in v.reshape(-1)]}


SEQUENCES = [
    ("rand_doc_seed42", 42, [{"op": "rand", "shape": [2, 3], "dtype": "float32"},
                             {"op": "rand", "shape": [5], "dtype": "float32"},
                             {"op": "rand", "shape": [3, 1, 2], "dtype": "float32"}]),
    ("rand_seed0_odd_sizes", 0, [{"op": "rand", "shape": [7], "dtype": "float32"},
                                 {"op": "rand", "shape": [1], "dtype": "float32"},
                                 {"op": "rand", "shape": [3, 3], "dtype": "float32"}]),
    ("rand_dtypes", 1337, [{"op": "rand", "shape": [5], "dtype": "float16"},
                           {"op": "rand", "shape": [3], "dtype": "float64"},
                           {"op": "rand", "shape": [7], "dtype": "bfloat16"},
                           {"op": "rand", "shape": [4], "dtype": "float32"}]),
    ("randn", 42, [{"op": "randn", "shape": [2, 3], "dtype": "float32"},
                   {"op": "randn", "shape": [5], "dtype": "float32"}]),
    ("randint", 7, [{"op": "randint", "shape": [10], "low": -3, "high": 7, "dtype": "int32"},
                    {"op": "randint", "shape": [2, 4], "low": 0, "high": 100, "dtype": "int32"}]),
    ("uniform_normal", 3, [{"op": "uniform", "shape": [6], "low": -2.0, "high": 5.0},
                           {"op": "normal", "shape": [4], "mean": 1.5, "std": 0.5}]),
    ("inits", 11, [{"op": "glorot_uniform", "shape": [2, 3]},
                   {"op": "kaiming_uniform", "shape": [3, 4], "a": 0.01}]),
    ("randperm", 42, [{"op": "randperm", "n": 6}, {"op": "randperm", "n": 10}]),
    ("dropout", 5, [{"op": "dropout", "shape": [3, 4], "p": 0.5},
                    {"op": "dropout", "shape": [8], "p": 0.25}]),
    ("large_counter", 9, [{"op": "rand", "shape": [1000], "dtype": "float32"},
                          {"op": "rand", "shape": [6], "dtype": "float32"}]),
]

cases = []
for name, seed, calls in SEQUENCES:
    Tensor.manual_seed(seed)
    outs = [out(run(c).realize()) for c in calls]
    cases.append({"name": name, "seed": seed, "calls": calls, "outputs": outs})

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "random_cases.json")
with open(path, "w") as f:
    json.dump(cases, f, separators=(",", ":"))
    f.write("\n")
print(f"wrote {len(cases)} cases to {path}")
