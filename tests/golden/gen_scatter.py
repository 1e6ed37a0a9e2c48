#!/usr/bin/env python3
"""Golden cases for crates/tensor/src/scatter.rs (pad modes, scatter, scatter_reduce, meshgrid,
masked_select, and gradients of reflect pad and scatter-add), checked by
crates/tensor/tests/scatter.rs on CPU and REF.

References are numpy float64 (np.pad, np.meshgrid, explicit loops for scatter). Inputs are
generated deterministically here (values rounded to 4 decimals; the Rust test loads float inputs
as float32, int ones as int32). tinygrad's semantics, computed with numpy:
  - pad: one (before, after) pair per axis; negative pads shrink. Reflect/replicate pad with the
    non-negative parts first and shrink after (numpy 'reflect'/'edge' then a slice); constant
    shrinks first (same result); circular is numpy 'wrap' (pads at most the dim, no negatives).
  - scatter: index values outside 0..n (negative too) write nothing (tinygrad compares the index
    with arange(n)); with duplicate indices the last entry along dim wins (tinygrad's
    _masked_setitem fold), which is what a C-order loop writing each entry gives.
  - scatter_reduce: include_self=False reduces only the src values at the elements some index
    hits; the others keep self. "mean" is true division (int in, float out).

Case: {"name", "op", "inputs": [tensor specs], "args": {...}, "outputs": [{"data", "shape",
"dtype"}]}. Tensor spec: {"data", "shape", "dtype": "float32" | "int32"}.

Run: python3 tests/golden/gen_scatter.py  (writes tests/golden/scatter_cases.json)
"""
import itertools
import json
import os

import numpy as np

rng = np.random.default_rng(20261130)


def rand(*shape):
  return np.round(rng.standard_normal(shape), 4)


def randint(lo, hi, *shape):
  return rng.integers(lo, hi, size=shape).astype(np.int64)


def spec(a, dtype=None):
  a = np.asarray(a)
  if dtype is None:
    dtype = "float32" if a.dtype.kind == "f" else "int32"
  data = [float(v) if dtype == "float32" else int(v) for v in a.reshape(-1)]
  return {"data": data, "shape": list(a.shape), "dtype": dtype}


cases = []


def add(name, op, inputs, args, outs, out_dtypes=None):
  if out_dtypes is None:
    out_dtypes = [None] * len(outs)
  cases.append({
    "name": name, "op": op, "inputs": [spec(x) for x in inputs], "args": args,
    "outputs": [spec(o, d) for o, d in zip(outs, out_dtypes)],
  })


# ---- pad modes ----

NP_MODE = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def np_pad(x, padding, mode, value=0.0):
  pos = [(max(b, 0), max(a, 0)) for b, a in padding]
  if mode == "constant":
    y = np.pad(x, pos, mode="constant", constant_values=value)
  else:
    y = np.pad(x, pos, mode=NP_MODE[mode])
  sl = tuple(slice(-min(b, 0), y.shape[d] + min(a, 0)) for d, (b, a) in enumerate(padding))
  return y[sl]


def pad_case(name, x, padding, mode, value=0):
  out = np_pad(x, padding, mode, value)
  add(name, "pad_mode", [x], {"padding": [list(p) for p in padding], "mode": mode, "value": value}, [out])


x34 = rand(3, 4)
x234 = rand(2, 3, 4)
i34 = randint(-9, 10, 3, 4)
for mode in ["constant", "reflect", "replicate", "circular"]:
  pad_case(f"pad_{mode}_1d", rand(5), [(2, 3)], mode)
  pad_case(f"pad_{mode}_2d", x34, [(1, 2), (3, 1)], mode)
  pad_case(f"pad_{mode}_3d", x234, [(0, 1), (2, 0), (1, 3)], mode)
  pad_case(f"pad_{mode}_int", i34, [(2, 1), (0, 3)], mode)
  pad_case(f"pad_{mode}_zero", x34, [(0, 0), (0, 0)], mode)
pad_case("pad_constant_value", x34, [(1, 1), (2, 0)], "constant", 2.5)
pad_case("pad_constant_int_value", i34, [(1, 1), (2, 0)], "constant", -7)
pad_case("pad_constant_negative", x34, [(-1, 2), (1, -2)], "constant", 1.5)
pad_case("pad_constant_negative_both", x34, [(-1, -1), (0, 0)], "constant")
pad_case("pad_reflect_negative", x34, [(-1, 2), (2, -3)], "reflect")
pad_case("pad_replicate_negative", x34, [(2, -2), (-3, 4)], "replicate")
pad_case("pad_reflect_max", x34, [(2, 2), (3, 3)], "reflect")
pad_case("pad_replicate_large", rand(2, 2), [(5, 4), (0, 6)], "replicate")
pad_case("pad_circular_full", x34, [(3, 3), (4, 4)], "circular")
pad_case("pad_circular_one_side", x34, [(0, 2), (1, 0)], "circular")
pad_case("pad_replicate_size1", rand(1, 3), [(2, 1), (0, 0)], "replicate")
pad_case("pad_reflect_4d", rand(1, 2, 3, 3), [(0, 0), (0, 0), (1, 1), (2, 2)], "reflect")

# ---- scatter ----


def np_scatter(self, dim, index, src, reduce=None, include_self=True):
  """tinygrad's scatter/scatter_reduce, as a C-order loop over index entries."""
  out = self.astype(np.float64).copy()
  n = self.shape[dim]
  hits = {}
  for pos in itertools.product(*[range(s) for s in index.shape]):
    i = int(index[pos])
    if not 0 <= i < n:
      continue
    tgt = list(pos)
    tgt[dim] = i
    v = float(src[pos]) if isinstance(src, np.ndarray) else float(src)
    hits.setdefault(tuple(tgt), []).append(v)
  for tgt, vals in hits.items():
    base = [float(self[tgt])] if (include_self or reduce is None) else []
    if reduce is None:
      out[tgt] = vals[-1]
    elif reduce == "sum":
      out[tgt] = sum(base + vals)
    elif reduce == "prod":
      out[tgt] = np.prod(base + vals)
    elif reduce == "mean":
      out[tgt] = sum(base + vals) / len(base + vals)
    elif reduce == "amax":
      out[tgt] = max(base + vals)
    elif reduce == "amin":
      out[tgt] = min(base + vals)
  if reduce == "mean":
    out = out.astype(np.float64)
  return out


def scatter_case(name, self, dim, index, src, reduce=None, scalar=False):
  nd = self.ndim
  out = np_scatter(self, dim % nd, index, src, {"add": "sum", "multiply": "prod", None: None}[reduce])
  args = {"dim": dim, "index": spec(index), "reduce": reduce}
  inputs = [self]
  if scalar:
    args["value"] = src
  else:
    inputs.append(src)
  add(name, "scatter", inputs, args, [out.astype(self.dtype)])


def unique_index(n, shape, dim):
  """Index values along dim that don't repeat (a permutation prefix per line)."""
  idx = np.zeros(shape, dtype=np.int64)
  for pos in itertools.product(*[range(s) for k, s in enumerate(shape) if k != dim]):
    perm = rng.permutation(n)[:shape[dim]]
    for j in range(shape[dim]):
      p = list(pos)
      p.insert(dim, j)
      idx[tuple(p)] = perm[j]
  return idx


s35 = rand(3, 5)
scatter_case("scatter_doc_dim0", np.zeros((3, 5), np.int64), 0, np.array([[0, 1, 2, 0]]), np.arange(1, 11).reshape(2, 5))
scatter_case("scatter_doc_dim1", np.zeros((3, 5), np.int64), 1, np.array([[0, 1, 2], [0, 1, 4]]), np.arange(1, 11).reshape(2, 5))
scatter_case("scatter_dim0", rand(4, 3), 0, unique_index(4, (3, 3), 0), rand(3, 3))
scatter_case("scatter_dim1", rand(3, 5), 1, unique_index(5, (2, 4), 1), rand(3, 4))
scatter_case("scatter_neg_dim", rand(2, 3, 4), -1, unique_index(4, (2, 2, 3), 2), rand(2, 3, 3))
scatter_case("scatter_3d_dim1", rand(2, 4, 3), 1, unique_index(4, (2, 3, 2), 1), rand(2, 3, 3))
scatter_case("scatter_int", randint(-5, 6, 3, 4), 1, unique_index(4, (3, 2), 1), randint(-50, 50, 3, 2))
scatter_case("scatter_duplicates", rand(3, 4), 0, np.array([[1, 0, 2, 2], [1, 1, 2, 0], [1, 0, 0, 2]]), rand(3, 4))
scatter_case("scatter_duplicates_dim1", rand(2, 5), 1, np.array([[4, 4, 0, 4], [1, 3, 1, 1]]), rand(2, 4))
scatter_case("scatter_out_of_range", rand(3, 4), 0, np.array([[3, -1, 2, 5], [0, -3, 4, 1]]), rand(2, 4))
scatter_case("scatter_scalar", rand(2, 4), 1, np.array([[2], [3]]), 1.23, scalar=True)
scatter_case("scatter_scalar_int", randint(0, 9, 2, 4), 1, np.array([[2, 0], [3, 3]]), 7, scalar=True)
scatter_case("scatter_doc_multiply", np.full((2, 4), 2.0), 1, np.array([[2], [3]]), 1.23, "multiply", scalar=True)
scatter_case("scatter_doc_add", np.full((2, 4), 2.0), 1, np.array([[2], [3]]), 1.23, "add", scalar=True)
scatter_case("scatter_add_duplicates", rand(3, 4), 0, np.array([[1, 0, 2, 2], [1, 1, 2, 0]]), 0.5, "add", scalar=True)
scatter_case("scatter_multiply_int", randint(1, 5, 3, 3), 1, np.array([[0, 0], [2, 1], [1, 1]]), 3, "multiply", scalar=True)
scatter_case("scatter_empty_index", rand(3, 4), 0, np.zeros((0, 4), np.int64), rand(2, 4))
scatter_case("scatter_empty_index_other", rand(3, 4), 1, np.zeros((3, 0), np.int64), rand(3, 4))


def scatter_reduce_case(name, self, dim, index, src, reduce, include_self=True):
  out = np_scatter(self, dim % self.ndim, index, src, reduce, include_self)
  dt = "float32" if (reduce == "mean" or self.dtype.kind == "f") else "int32"
  add(name, "scatter_reduce", [self, src], {"dim": dim, "index": spec(index), "reduce": reduce, "include_self": include_self},
      [out], [dt])


doc_src = np.arange(1, 11, dtype=np.float64).reshape(2, 5)
doc_idx = np.zeros((2, 5), np.int64)
for r in ["sum", "prod"]:
  scatter_reduce_case(f"scatter_reduce_doc_{r}", np.ones((1, 5)), 0, doc_idx, doc_src, r)
scatter_reduce_case("scatter_reduce_doc_mean", np.ones((1, 5)), 0, doc_idx, doc_src, "mean", False)
for r in ["amax", "amin"]:
  scatter_reduce_case(f"scatter_reduce_doc_{r}", np.array([[-10.0, 20, 0, 5, 10]]), 0, doc_idx, doc_src, r)
dup_idx = randint(0, 4, 5, 3)  # many duplicates along dim 0, into 4 rows
dup_idx[0, 0] = 7   # out of range: ignored
dup_idx[1, 1] = -1  # negative: ignored
for r in ["sum", "prod", "mean", "amax", "amin"]:
  for inc in [True, False]:
    scatter_reduce_case(f"scatter_reduce_{r}_{'self' if inc else 'noself'}", rand(4, 3), 0, dup_idx, rand(5, 3), r, inc)
    scatter_reduce_case(f"scatter_reduce_{r}_int_{'self' if inc else 'noself'}", randint(-9, 10, 3, 4), -1,
                        randint(0, 4, 3, 6), randint(-9, 10, 3, 6), r, inc)
scatter_reduce_case("scatter_reduce_sum_3d", rand(2, 3, 4), 1, randint(0, 3, 2, 5, 3), rand(2, 5, 4), "sum")
scatter_reduce_case("scatter_reduce_amax_bigger_src", rand(3, 3), 1, randint(0, 3, 2, 4), rand(4, 5), "amax", False)
scatter_reduce_case("scatter_reduce_empty_index", rand(3, 4), 0, np.zeros((0, 4), np.int64), rand(2, 4), "sum")
scatter_reduce_case("scatter_reduce_empty_index_amin", rand(3, 4), 0, np.zeros((0, 4), np.int64), rand(2, 4), "amin", False)

# ---- meshgrid ----


def meshgrid_case(name, xs, indexing):
  outs = np.meshgrid(*xs, indexing=indexing)
  add(name, "meshgrid", xs, {"indexing": indexing}, outs)


for ix in ["ij", "xy"]:
  meshgrid_case(f"meshgrid_2_{ix}", [rand(3), rand(4)], ix)
  meshgrid_case(f"meshgrid_3_{ix}", [rand(2), randint(0, 9, 3), rand(4)], ix)
  meshgrid_case(f"meshgrid_4_{ix}", [rand(2), rand(1), rand(3), rand(2)], ix)
meshgrid_case("meshgrid_1", [rand(5)], "ij")
meshgrid_case("meshgrid_flattens", [rand(2, 2), rand(3)], "ij")

# ---- masked_select ----


def masked_select_case(name, x, mask):
  out = x[np.broadcast_to(mask, x.shape)]
  add(name, "masked_select", [x], {"mask": spec(mask.astype(np.int64))}, [out])


masked_select_case("masked_select_doc", np.arange(9).reshape(3, 3), np.array([[1, 0, 1], [0, 1, 0], [0, 0, 1]], bool))
masked_select_case("masked_select_float", rand(4, 5), rng.random((4, 5)) < 0.4)
masked_select_case("masked_select_broadcast", rand(3, 4), np.array([True, False, False, True]))
masked_select_case("masked_select_all", rand(2, 3), np.ones((2, 3), bool))
masked_select_case("masked_select_none", rand(2, 3), np.zeros((2, 3), bool))

# ---- gradients ----
# d/dx sum(pad(x) * w) and d/dsrc sum(scatter_reduce(x, sum) * w): w is given.


def grad_pad_case(name, x, padding, mode):
  ids = np.arange(x.size, dtype=np.float64).reshape(x.shape)
  if mode == "constant":
    src = np_pad(ids, padding, mode, -1.0)
  else:
    src = np_pad(ids, padding, mode)
  w = rand(*src.shape)
  g = np.zeros(x.size)
  for s, wv in zip(src.reshape(-1), w.reshape(-1)):
    if s >= 0:
      g[int(s)] += wv
  add(name, "grad_pad", [x, w], {"padding": [list(p) for p in padding], "mode": mode, "value": 0}, [g.reshape(x.shape)])


grad_pad_case("grad_pad_reflect", rand(3, 4), [(2, 1), (3, 2)], "reflect")
grad_pad_case("grad_pad_reflect_negative", rand(3, 4), [(-1, 2), (1, -1)], "reflect")
grad_pad_case("grad_pad_replicate", rand(3, 4), [(2, 1), (0, 3)], "replicate")
grad_pad_case("grad_pad_circular", rand(3, 4), [(1, 2), (4, 0)], "circular")
grad_pad_case("grad_pad_constant_negative", rand(3, 4), [(1, -1), (-2, 2)], "constant")


def grad_scatter_case(name, self, dim, index, src, reduce, include_self):
  n = self.shape[dim]
  w = rand(*self.shape)
  g = np.zeros(src.shape)
  for pos in itertools.product(*[range(s) for s in index.shape]):
    i = int(index[pos])
    if 0 <= i < n:
      tgt = list(pos)
      tgt[dim] = i
      g[pos] = w[tuple(tgt)]
  add(name, "grad_scatter_reduce", [self, src, w],
      {"dim": dim, "index": spec(index), "reduce": reduce, "include_self": include_self}, [g])


gi = randint(0, 4, 5, 3)
gi[2, 1] = 9
grad_scatter_case("grad_scatter_add_dim0", rand(4, 3), 0, gi, rand(5, 3), "sum", True)
grad_scatter_case("grad_scatter_add_dim1_noself", rand(3, 4), 1, randint(0, 4, 2, 6), rand(3, 7), "sum", False)

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scatter_cases.json")
with open(out, "w") as f:
  json.dump(cases, f, indent=None, separators=(",", ":"))
  f.write("\n")
print(f"wrote {len(cases)} cases to {out}")
