#!/usr/bin/env python3
"""Golden cases for crates/tensor/src/ordering.rs (cumprod, cummax, cummin, logcumsumexp, sort,
argsort, topk, and gradients of cumprod and sort values), checked by
crates/tensor/tests/ordering.rs.

References are numpy float64. Inputs are generated deterministically here (the Rust test loads
float inputs as float32, int ones as int32). Semantics follow tinygrad's tensor.py:
  - cummax/cummin indices: the first i <= j with x[i] == values[j] (ties keep the earlier index);
  - sort/argsort/topk are stable for ties in both directions: the k-th equal element of the
    output is the k-th equal element of the input (numpy: stable argsort of x, or of -x when
    descending);
  - indices are int32; cumprod keeps the input dtype.
Ties are used on purpose (inputs drawn from a few values). No NaN inputs: tinygrad's sort and
cummax don't define them. +-inf appear in cummax/cummin and sort inputs, written as the strings "inf"/"-inf".

Gradient cases ("grad_cumprod", "grad_sort") give d/dx of sum(op(x) * w) with w in
args["weights"], computed analytically in float64:
  - cumprod: d/dx_k = sum_{j >= k} w_j * P_j / x_k (inputs are non-zero);
  - sort values: the output position j of x[i] gets w_j back (inputs have no ties).

Run: python3 tests/golden/gen_ordering.py  (writes tests/golden/ordering_cases.json)
"""
import json
import os

import numpy as np

rng = np.random.default_rng(20261130)


def rand(*shape):
  return np.round(rng.standard_normal(shape), 4)


def pos(*shape):
  return np.round(rng.uniform(0.5, 1.5, shape), 4)


def ties(*shape, vals=(-1.5, 0.0, 0.5, 2.0)):
  return np.asarray(vals)[rng.integers(0, len(vals), shape)].astype(np.float64)


def ints(*shape, lo=-5, hi=6):
  return rng.integers(lo, hi, shape).astype(np.int64)


def num(v, kind):
  if kind != "f":
    return int(v)
  v = float(v)
  return v if np.isfinite(v) else ("inf" if v > 0 else "-inf")  # JSON has no infinities


def arr(a):
  a = np.asarray(a)
  return {"data": [num(v, a.dtype.kind) for v in a.reshape(-1)], "shape": list(a.shape)}


def inp(a):
  a = np.asarray(a)
  d = arr(a)
  d["dtype"] = "float32" if a.dtype.kind == "f" else "int32"
  return d


def out(a, dtype):
  d = arr(a)
  d["dtype"] = dtype
  return d


cases = []


def add(name, op, x, args, outs):
  cases.append({"name": name, "op": op, "input": inp(x), "args": args, "outputs": outs})


def vdt(x):
  return "float32" if np.asarray(x).dtype.kind == "f" else "int32"


# ---- references ----

def cummax_ref(x, axis, minimum=False):
  x = np.asarray(x)
  xt = np.moveaxis(x, axis, -1)
  acc = np.minimum.accumulate if minimum else np.maximum.accumulate
  v = acc(xt, axis=-1)
  idx = np.zeros(v.shape, dtype=np.int64)
  n = xt.shape[-1]
  for pre in np.ndindex(*xt.shape[:-1]):
    for j in range(n):
      idx[pre + (j,)] = next(i for i in range(j + 1) if xt[pre + (i,)] == v[pre + (j,)])
  return np.moveaxis(v, -1, axis), np.moveaxis(idx, -1, axis)


def sort_ref(x, dim, descending):
  x = np.asarray(x)
  key = -x.astype(np.float64) if descending else x
  idx = np.argsort(key, axis=dim, kind="stable")
  return np.take_along_axis(x, idx, axis=dim), idx


def logcumsumexp_ref(x, axis):
  return np.logaddexp.accumulate(np.asarray(x, dtype=np.float64), axis=axis)


# ---- cumprod ----

for name, x, axis in [
    ("cumprod_1d", pos(5), 0),
    ("cumprod_2d_axis0", pos(3, 4), 0),
    ("cumprod_2d_axis_neg1", pos(3, 4), -1),
    ("cumprod_3d_axis1", pos(2, 3, 4), 1),
    ("cumprod_3d_axis_neg3", rand(2, 3, 2), -3),
    ("cumprod_len1", rand(3, 1), 1),
    ("cumprod_signed_zero", np.array([[2.0, -1.5, 0.0, 3.0], [0.5, 4.0, -2.0, 1.0]]), 1),
    ("cumprod_int", ints(3, 5, lo=-3, hi=4), 1),
    ("cumprod_long", pos(40), 0),
    ("cumprod_empty", np.zeros((0, 3)), 1),
]:
  add(name, "cumprod", x, {"axis": axis}, [out(np.cumprod(x, axis=axis), vdt(x))])

# ---- cummax / cummin ----

for op, minimum in [("cummax", False), ("cummin", True)]:
  for name, x, axis in [
      ("1d_doc", np.array([0, 1, -1, 2, -2, 3, -3]), 0),
      ("2d_axis1", rand(3, 6), 1),
      ("2d_axis0", rand(5, 3), 0),
      ("3d_axis_neg2", rand(2, 5, 3), -2),
      ("ties", ties(3, 7), 1),
      ("ties_axis0", ties(6, 2), 0),
      ("int_ties", ints(2, 9, lo=-2, hi=3), -1),
      ("len1", rand(4, 1), -1),
      ("inf", np.array([[-np.inf, 1.0, np.inf, 2.0, np.inf], [3.0, -np.inf, 3.0, -1.0, -np.inf]]), 1),
  ]:
    v, i = cummax_ref(x, axis, minimum)
    add(f"{op}_{name}", op, x, {"axis": axis}, [out(v, vdt(x)), out(i, "int32")])

# ---- logcumsumexp ----

for name, x, axis in [
    ("logcumsumexp_1d", rand(6), 0),
    ("logcumsumexp_2d_axis0", rand(4, 3), 0),
    ("logcumsumexp_2d_axis_neg1", rand(3, 5), -1),
    ("logcumsumexp_3d_axis1", rand(2, 4, 3), 1),
    ("logcumsumexp_large", np.array([[1000.0, 1000.0, 999.0, -1000.0], [-800.0, 50.0, 1000.0, 0.0]]), 1),
    ("logcumsumexp_small", np.array([[-1000.0, -1000.5, -999.0], [88.0, 89.0, 90.0]]), -1),
    ("logcumsumexp_len1", rand(3, 1), 1),
]:
  add(name, "logcumsumexp", x, {"axis": axis}, [out(logcumsumexp_ref(x, axis), "float32")])

# ---- sort / argsort / topk ----

sort_inputs = [
    ("1d_len5", rand(5), -1),
    ("doc", np.array([[0.1, 0.5, 1.2, 3.4, 2.1], [2.2, 1.9, 0.3, 4.5, 0.8]]), 1),
    ("len2", rand(3, 2), 1),
    ("len3", rand(3), 0),
    ("len8", rand(2, 8), -1),
    ("len9", rand(9, 2), 0),
    ("len13", rand(13), 0),
    ("len1", rand(4, 1), 1),
    ("3d_dim1", rand(2, 5, 3), 1),
    ("3d_dim0", rand(3, 2, 2), 0),
    ("3d_dim_neg1", rand(2, 3, 6), -1),
    ("ties", ties(3, 7), -1),
    ("ties_dim0", ties(6, 3), 0),
    ("all_equal", np.full((2, 5), 0.5), 1),
    ("inf", np.array([[np.inf, -1.0, -np.inf, 2.0, 0.0], [1.0, np.inf, 2.0, -np.inf, 3.0]]), 1),
    ("int", ints(3, 6), 1),
    ("int_ties", ints(2, 11, lo=-2, hi=3), -1),
    ("int_extremes", np.array([2147483647, -2147483648, 0, 2147483647, -2147483648, 5]), 0),
]
for name, x, dim in sort_inputs:
  for desc in (False, True):
    v, i = sort_ref(x, dim, desc)
    d = "desc" if desc else "asc"
    add(f"sort_{name}_{d}", "sort", x, {"dim": dim, "descending": desc}, [out(v, vdt(x)), out(i, "int32")])

for name, x, dim in [("2d", rand(3, 5), -1), ("ties", ties(2, 6), 1), ("int_doc", np.array([[2, 3, 4, 1], [1, 4, 3, 2]]), -1),
                     ("3d_dim1", ties(2, 4, 3), 1)]:
  for desc in (False, True):
    _, i = sort_ref(x, dim, desc)
    add(f"argsort_{name}_{'desc' if desc else 'asc'}", "argsort", x, {"dim": dim, "descending": desc}, [out(i, "int32")])

for name, x, k, dim, largest in [
    ("doc", np.array([[0.1, 0.5, 1.2, 3.4, 2.1], [2.2, 1.9, 0.3, 4.5, 0.8]]), 2, 1, True),
    ("smallest", rand(3, 6), 3, -1, False),
    ("k1", rand(4, 5), 1, 0, True),
    ("k_full", rand(2, 7), 7, 1, False),
    ("ties_largest", ties(3, 8), 4, -1, True),
    ("ties_smallest", ties(8, 2), 5, 0, False),
    ("int", ints(2, 9), 3, 1, True),
    ("3d", rand(2, 6, 3), 2, -2, True),
    ("k0", rand(2, 3), 0, 1, True),
]:
  v, i = sort_ref(x, dim, largest)
  sl = [slice(None)] * x.ndim
  sl[dim] = slice(0, k)
  sl = tuple(sl)
  add(f"topk_{name}", "topk", x, {"k": k, "dim": dim, "largest": largest}, [out(v[sl], vdt(x)), out(i[sl], "int32")])

# ---- gradients ----

def weights(shape):
  return np.round(rng.uniform(-1.0, 1.0, shape), 4)


for name, x, axis in [("1d", pos(5), 0), ("2d_axis0", rand(3, 4), 0), ("2d_axis_neg1", rand(3, 4), -1)]:
  assert np.all(x != 0)
  w = weights(x.shape)
  p = np.cumprod(x, axis=axis)
  # sum_{j >= k} w_j P_j, a reverse cumsum along axis
  rc = np.flip(np.cumsum(np.flip(w * p, axis=axis), axis=axis), axis=axis)
  add(f"grad_cumprod_{name}", "grad_cumprod", x, {"axis": axis, "weights": arr(w)}, [out(rc / x, "float32")])

for name, x, dim, desc in [("1d", rand(7), 0, False), ("2d_desc", rand(3, 5), 1, True), ("3d_dim0", rand(5, 2, 2), 0, False)]:
  assert all(len(np.unique(r)) == r.size for r in np.moveaxis(x, dim, -1).reshape(-1, x.shape[dim]))
  w = weights(x.shape)
  _, idx = sort_ref(x, dim, desc)
  g = np.zeros_like(x)
  np.put_along_axis(g, idx, w, axis=dim)
  add(f"grad_sort_{name}", "grad_sort", x, {"dim": dim, "descending": desc, "weights": arr(w)}, [out(g, "float32")])

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ordering_cases.json")
with open(path, "w") as f:
  json.dump(cases, f, indent=None, separators=(",", ":"))
  f.write("\n")
print(f"wrote {len(cases)} cases to {path}")
