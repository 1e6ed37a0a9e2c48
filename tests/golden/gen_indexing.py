#!/usr/bin/env python3
"""Golden cases for crates/tensor/src/indexing.rs (getitem, gather, masked_fill, tril/triu, roll,
repeat, split, chunk, and gradients of getitem/gather), checked by crates/tensor/tests/indexing.rs.

References are numpy float64. Inputs are generated deterministically here (values rounded to 4
decimals; the Rust test loads float inputs as float32, int ones as int32). Where tinygrad's
semantics differ from numpy's, the expected value follows tinygrad, computed with numpy:
  - index tensor values out of range select nothing and give 0 (numpy raises);
  - gather index values outside 0..n (negative too) give 0;
  - integer indices are removed before tensor indices are placed, so an int between a slice and
    a tensor index does not send the tensor dims to the front (numpy counts ints as advanced);
  - split/chunk sizes follow tinygrad's formulas.

Index spec in "args.idx": {"int": i}, {"slice": [start|null, stop|null, step]}, {"newaxis": 1},
{"ellipsis": 1}, {"tensor": {"data", "shape"}} (int32), {"list": [...]}.

Run: python3 tests/golden/gen_indexing.py  (writes tests/golden/indexing_cases.json)
"""
import json
import os

import numpy as np

rng = np.random.default_rng(20261130)


def rand(*shape):
  return np.round(rng.standard_normal(shape), 4)


def arr(a):
  a = np.asarray(a)
  return {"data": [float(v) if a.dtype.kind == "f" else int(v) for v in a.reshape(-1)], "shape": list(a.shape)}


def inp(a):
  a = np.asarray(a)
  d = arr(a)
  d["dtype"] = "float32" if a.dtype.kind == "f" else "int32"
  return d


cases = []


def add(name, op, x, args, outs):
  cases.append({"name": name, "op": op, "input": inp(x), "args": args, "outputs": [arr(o) for o in outs]})


# ---- getitem ----

class T:
  """An index tensor."""
  def __init__(self, v): self.v = np.asarray(v, dtype=np.int64)


class L:
  """A list index."""
  def __init__(self, v): self.v = list(v)


def spec(i):
  if isinstance(i, bool): raise TypeError
  if isinstance(i, int): return {"int": i}
  if isinstance(i, slice): return {"slice": [i.start, i.stop, 1 if i.step is None else i.step]}
  if i is None: return {"newaxis": 1}
  if i is Ellipsis: return {"ellipsis": 1}
  if isinstance(i, T): return {"tensor": arr(i.v)}
  if isinstance(i, L): return {"list": i.v}
  raise TypeError(i)


def tiny_getitem(x, idx):
  """x[idx] with tinygrad's semantics (see the module docstring)."""
  idx = list(idx)
  # expand the ellipsis, so positions are explicit
  n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
  if Ellipsis in idx:
    e = idx.index(Ellipsis)
    idx[e:e + 1] = [slice(None)] * (x.ndim - n_real)
  else:
    idx += [slice(None)] * (x.ndim - n_real)
  # size of each indexed dim, to normalize tensor values and find invalid ones
  sizes, dim = [], 0
  for i in idx:
    sizes.append(None if i is None else x.shape[dim])
    if i is not None: dim += 1
  tens = [(k, (i.v if isinstance(i, T) else np.asarray(i.v, dtype=np.int64))) for k, i in enumerate(idx) if isinstance(i, (T, L))]
  if not tens: return x[tuple(idx)]
  valid = np.ones((), dtype=bool)
  fixed = {}
  for k, v in tens:
    n = sizes[k]
    v = np.where(v < 0, v + n, v)
    ok = (v >= 0) & (v < n)
    valid = valid & ok
    fixed[k] = np.where(ok, v, 0)
  # step 1: everything but tensor indices
  step1 = [slice(None) if k in fixed else i for k, i in enumerate(idx)]
  y = x[tuple(step1)]
  # step 2: tensor indices on what is left (ints are gone, new axes and slices are full)
  step2 = [fixed[k] if k in fixed else slice(None) for k, i in enumerate(idx) if not isinstance(i, int)]
  out = y[tuple(step2)]
  big = np.broadcast_shapes(*(v.shape for v in fixed.values()))
  tpos = [k for k, i in enumerate(step2) if isinstance(i, np.ndarray)]
  adjacent = tpos == list(range(tpos[0], tpos[0] + len(tpos)))
  pos = tpos[0] if adjacent else 0
  vshape = (1,) * pos + big + (1,) * (out.ndim - pos - len(big))
  return np.where(np.broadcast_to(valid, big).reshape(vshape), out, 0).astype(x.dtype)


def gi(name, x, idx):
  add(name, "getitem", x, {"idx": [spec(i) for i in idx]}, [tiny_getitem(x, idx)])


x3 = rand(2, 3, 4)
x4 = rand(2, 3, 4, 5)
x1 = rand(7)
xi = np.arange(12, dtype=np.int32).reshape(3, 4) * 3 - 7

gi("int", x3, [1])
gi("int_negative", x3, [-1, -2])
gi("int_all_dims_scalar", x3, [1, 2, 3])
gi("int_last_negative", x3, [0, -3, -4])
gi("slice", x3, [slice(None), slice(1, 3)])
gi("slice_step2", x3, [slice(None, None, 2), slice(None), slice(None, None, 2)])
gi("slice_step3_offset", x1, [slice(1, None, 3)])
gi("slice_reverse", x3, [slice(None, None, -1)])
gi("slice_reverse_step2_bounds", x3, [slice(None), slice(None), slice(3, 0, -2)])
gi("slice_reverse_step3", x1, [slice(None, None, -3)])
gi("slice_reverse_bounds", x1, [slice(5, 1, -1)])
gi("slice_reverse_negative_bounds", x1, [slice(-2, -6, -2)])
gi("slice_empty_3_3", x3, [slice(None), slice(3, 3)])
gi("slice_empty_backwards", x1, [slice(4, 1)])
gi("slice_empty_reverse", x1, [slice(1, 4, -1)])
gi("slice_clamped", x3, [slice(-10, 10), slice(1, 100)])
gi("slice_negative_start", x1, [slice(-3, None)])
gi("ellipsis_newaxis_end", x3, [Ellipsis, None])
gi("newaxis_ellipsis_int", x3, [None, Ellipsis, 1])
gi("ellipsis_int", x3, [Ellipsis, 0])
gi("int_ellipsis_reverse", x3, [1, Ellipsis, slice(None, None, -1)])
gi("newaxis_middle_int", x3, [slice(None), None, 1])
gi("newaxes_many", x1, [None, slice(1, 5, 2), None, None])
gi("ellipsis_only", x3, [Ellipsis])
gi("empty_index", x3, [])
gi("tensor_single", x3, [T([1, 0, 1])])
gi("tensor_negative_values", x3, [slice(None), T([-1, 0, -3])])
gi("tensor_2d", x3, [T([[0, 1], [1, 0]])])
gi("tensor_scalar", x3, [slice(None), T(2)])
gi("tensor_two_consecutive", x3, [T([0, 1, 1]), T([2, 0, 1])])
gi("tensor_two_consecutive_last", x3, [slice(None), T([0, 2]), T([3, -1])])
gi("tensor_three_consecutive_broadcast", x3, [T([0, 1]), T([[0], [2]]), T([1])])
gi("tensor_nonadjacent_first_dim", x3, [T([[0], [1]]), slice(None), T([1, 3, 0])])
gi("tensor_nonadjacent_goes_first", x4, [slice(None), T([0, 2]), slice(None), T([1, 4])])
gi("tensor_nonadjacent_newaxis_between", x3, [slice(None), T([0, 2]), None, T([1, 3])])
gi("tensor_with_slices", x3, [T([1, 0]), slice(None, None, -1), slice(1, 4, 2)])
gi("tensor_slice_tensor_reverse", x4, [T([1, 0, 1]), slice(2, None), slice(None, None, -2), T([4, 0, 2])])
gi("tensor_after_int", x3, [slice(None), 1, T([0, 3])])
gi("int_slice_tensor_tinygrad_placement", x3, [1, slice(None), T([0, 3])])
gi("int_tensor_slice_tensor", x4, [0, T([2, 1]), slice(None), T([1, 1])])
gi("tensor_out_of_range_values", x3, [slice(None), T([4, 1, -3, -4])])
gi("tensor_pair_out_of_range", x3, [T([0, 5, 1]), T([1, 1, -7])])
gi("tensor_newaxis", x3, [None, T([1, 0])])
gi("tensor_ellipsis", x3, [Ellipsis, T([3, 0, 0])])
gi("tensor_empty", x3, [T(np.zeros((0,), dtype=np.int64))])
gi("list_index", x3, [L([1, 0, -1])])
gi("list_two", x3, [slice(None), L([2, 0]), L([1, 3])])
gi("int_input_reverse_tensor", xi, [slice(None, None, -2), T([0, 3])])
gi("int_input_slice_int", xi, [slice(1, None), -1])
gi("int_input_consecutive", xi, [T([2, 0]), T([3, 1])])

# ---- gather ----

def tiny_gather(x, dim, index):
  dim = dim % x.ndim
  sl = tuple(slice(None) if d == dim else slice(0, s) for d, s in enumerate(index.shape))
  xs = x[sl]
  ok = (index >= 0) & (index < x.shape[dim])
  return np.where(ok, np.take_along_axis(xs, np.where(ok, index, 0), axis=dim), 0).astype(x.dtype)


def ga(name, x, dim, index):
  index = np.asarray(index, dtype=np.int64)
  add(name, "gather", x, {"dim": dim, "index": arr(index)}, [tiny_gather(x, dim, index)])


ga("gather_doc", np.array([[1.0, 2.0], [3.0, 4.0]]), 1, [[0, 0], [1, 0]])
ga("gather_dim0", rand(3, 4), 0, [[2, 0, 1, 1], [0, 0, 2, 1]])
ga("gather_last", x3, -1, rng.integers(0, 4, (2, 3, 2)))
ga("gather_negative_dim_smaller_index", x3, -2, rng.integers(0, 3, (1, 2, 3)))
ga("gather_dim1_larger_index", x3, 1, rng.integers(0, 3, (2, 5, 4)))
ga("gather_int_input", xi, 1, [[3, 0], [1, 1], [2, 0]])
ga("gather_out_of_range", rand(2, 3), 1, [[0, 3, -1], [2, 5, 1]])

# ---- masked_fill ----

m = rng.random((2, 1, 4)) < 0.5
add("masked_fill_broadcast", "masked_fill", x3, {"mask": arr(m.astype(np.int64)), "value": -7.5}, [np.where(m, -7.5, x3)])
m2 = np.array([True, False, True, False])
add("masked_fill_int", "masked_fill", xi, {"mask": arr(m2.astype(np.int64)), "value": 3}, [np.where(m2, 3, xi).astype(np.int32)])

# ---- tril / triu ----

x34 = rand(3, 4)
for d in (0, 1, -1, 5, -5):
  add(f"tril_{d}", "tril", x34, {"diagonal": d}, [np.tril(x34, d)])
  add(f"triu_{d}", "triu", x34, {"diagonal": d}, [np.triu(x34, d)])
xb = rand(2, 3, 3)
add("tril_batched", "tril", xb, {"diagonal": 0}, [np.tril(xb)])
xt = rand(2, 4, 2)
add("triu_batched_tall", "triu", xt, {"diagonal": -1}, [np.triu(xt, -1)])
add("triu_int", "triu", xi, {"diagonal": 1}, [np.triu(xi, 1)])

# ---- roll ----

def ro(name, x, shifts, dims):
  want = np.roll(x, shifts, axis=tuple(dims) if dims else None)
  add(name, "roll", x, {"shifts": shifts, "dims": dims}, [want])


ro("roll_1d", x1, [2], [0])
ro("roll_negative_shift", x1, [-3], [0])
ro("roll_big_shift", x3, [7], [1])
ro("roll_two_dims", x3, [1, -1], [0, 2])
ro("roll_negative_dim", x3, [2], [-1])
ro("roll_flattened", x3, [5], [])
ro("roll_same_dim_twice", x3, [1, 1], [2, 2])
ro("roll_int", xi, [1, 2], [0, 1])

# ---- repeat ----

def rp(name, x, reps):
  add(name, "repeat", x, {"repeats": reps}, [np.tile(x, reps)])


rp("repeat_1d_to_2d", np.array([1.0, 2.0, 3.0]), [4, 2])
rp("repeat_new_dims", np.array([1.0, 2.0, 3.0]), [4, 2, 1])
rp("repeat_2d", rand(2, 3), [2, 3])
rp("repeat_ones", x3, [1, 1, 1])
rp("repeat_int", xi, [2, 1])

# ---- split / chunk ----

def tiny_split_sizes(n, sizes):
  if isinstance(sizes, int): return [min(sizes, n - d) for d in range(0, max(1, n), max(1, sizes))]
  return sizes


def pieces(x, dim, sizes):
  dim = dim % x.ndim
  out, s = [], 0
  for k in sizes:
    sl = [slice(None)] * x.ndim
    sl[dim] = slice(s, s + k)
    out.append(x[tuple(sl)])
    s += k
  return out


def sp(name, x, sizes, dim):
  add(name, "split", x, {"sizes": sizes, "dim": dim}, pieces(x, dim, tiny_split_sizes(x.shape[dim % x.ndim], sizes)))


def ch(name, x, chunks, dim):
  n = x.shape[dim % x.ndim]
  sizes = tiny_split_sizes(n, -(-n // chunks)) if n else [0] * chunks
  add(name, "chunk", x, {"chunks": chunks, "dim": dim}, pieces(x, dim, sizes))


x52 = rand(5, 2)
sp("split_size", x52, 2, 0)
sp("split_sizes", x52, [1, 4], 0)
sp("split_sizes_with_zero", x52, [0, 2, 3], 0)
sp("split_negative_dim", x3, 3, -1)
sp("split_size_larger_than_dim", x52, 10, 0)
sp("split_int", xi, [1, 3], 1)
ch("chunk_even", rand(11), 6, 0)
ch("chunk_fewer", rand(6), 4, 0)
ch("chunk_dim1", rand(2, 5), 2, 1)
ch("chunk_negative_dim", x3, 3, -2)
ch("chunk_empty_dim", np.zeros((0, 3)), 3, 0)

# ---- gradients: d sum(op(x)) / dx is a scatter-add of ones ----

def grad_getitem(name, x, idx):
  # tinygrad-valid indices only: every selected element gets +1 per selection
  g = np.zeros_like(x)
  n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
  full = list(idx) + ([] if Ellipsis in idx else [slice(None)] * (x.ndim - n_real))
  np_idx = tuple(i.v if isinstance(i, T) else i for i in full if i is not None)
  np.add.at(g, np_idx, 1.0)
  add(name, "grad_getitem", x, {"idx": [spec(i) for i in idx]}, [g])


def grad_gather(name, x, dim, index):
  index = np.asarray(index, dtype=np.int64)
  g = np.zeros_like(x)
  grid = list(np.indices(index.shape))
  grid[dim % x.ndim] = index
  np.add.at(g, tuple(grid), 1.0)
  add(name, "grad_gather", x, {"dim": dim, "index": arr(index)}, [g])


grad_getitem("grad_getitem_tensor_repeated", x3, [T([0, 1, 1]), slice(None, None, -1)])
grad_getitem("grad_getitem_slices_newaxis", x3, [slice(1, None), None, slice(None, None, 2)])
grad_getitem("grad_getitem_two_tensors", x3, [T([0, 1, 0]), T([2, 2, 0])])
grad_getitem("grad_getitem_int_tensor", x3, [1, slice(None), T([3, 3, 0])])
grad_getitem("grad_getitem_nonadjacent", x4, [slice(None), T([0, 2, 2]), slice(1, 3), T([1, 4, 1])])
grad_gather("grad_gather_repeated", x3, 1, [[[0, 1, 2, 0], [0, 0, 0, 0]], [[2, 2, 1, 1], [1, 0, 2, 0]]])
grad_gather("grad_gather_negative_dim", x3, -1, [[[3, 3], [0, 1], [2, 2]], [[1, 0], [0, 0], [3, 1]]])

# ---- setitem: x[idx] = value ----

def tiny_setitem(x, idx, v):
  """Basic indices: numpy's assignment. With index tensors: each selected position (tinygrad's
  selection shape, from tiny_getitem of 1-based positions; 0 = out of range) takes the value
  broadcast to that shape, in order, so the last write wins; out-of-range values write nothing."""
  y = x.copy()
  if not any(isinstance(i, (T, L)) for i in idx):
    y[tuple(idx)] = v
    return y
  pos = tiny_getitem(np.arange(1, x.size + 1).reshape(x.shape), idx)
  vb = np.broadcast_to(np.asarray(v, dtype=x.dtype), pos.shape)
  flat = y.reshape(-1)
  for p, val in zip(pos.reshape(-1), vb.reshape(-1)):
    if p > 0:
      flat[p - 1] = val
  return flat.reshape(x.shape)


def si(name, x, idx, v):
  val = {"tensor": inp(np.asarray(v, dtype=x.dtype))} if isinstance(v, np.ndarray) else v
  add(name, "setitem", x, {"idx": [spec(i) for i in idx], "value": val}, [tiny_setitem(x, idx, v)])


si("setitem_int_scalar", x3, [1], 2.5)
si("setitem_int_int_row", x3, [0, -1], rand(4))
si("setitem_slice_broadcast", x3, [slice(None), slice(1, 3)], rand(1, 4))
si("setitem_slice_step2", x3, [slice(None), slice(None), slice(None, None, 2)], rand(2, 3, 2))
si("setitem_slice_step3_offset", x1, [slice(1, None, 3)], rand(2))
si("setitem_reverse_step2", x3, [slice(None), slice(None), slice(3, 0, -2)], rand(2))
si("setitem_reverse_all", x1, [slice(None, None, -1)], np.arange(7, dtype=np.float64))
si("setitem_reverse_negative_bounds", x1, [slice(-2, -6, -2)], np.array([10.0, 20.0]))
si("setitem_ellipsis_int", x3, [Ellipsis, 0], rand(3))
si("setitem_newaxis", x3, [None, 1, slice(0, 2)], rand(1, 2, 4))
si("setitem_empty_slice", x3, [slice(None), slice(3, 3)], 7.0)
si("setitem_everything", x3, [Ellipsis], -1.0)
si("setitem_tensor_rows", x3, [T([1, 0])], rand(2, 3, 4))
si("setitem_tensor_pair", x3, [T([0, 1, 1]), T([2, 0, 1])], rand(3, 4))
si("setitem_tensor_repeated_last_wins", x1, [T([2, 4, 2])], np.array([1.0, 2.0, 3.0]))
si("setitem_tensor_negative_and_out_of_range", x1, [T([-1, 9, 0, -8])], np.array([1.0, 2.0, 3.0, 4.0]))
si("setitem_tensor_nonadjacent", x4, [slice(None), T([0, 2]), slice(None), T([1, 4])], rand(2, 2, 4))
si("setitem_int_slice_tensor", x3, [1, slice(None), T([0, 3])], 0.0)
si("setitem_list", x3, [slice(None), L([2, 0])], rand(2, 1, 4))
si("setitem_int_input", xi, [slice(None, None, -2), T([0, 3])], np.array([[100, 200]], dtype=np.int32))
si("setitem_int_input_scalar", xi, [1], 5)

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "indexing_cases.json")
with open(out, "w") as f:
  json.dump(cases, f, separators=(",", ":"))
  f.write("\n")
print(f"wrote {len(cases)} cases to {out}")
