#!/usr/bin/env python3
"""Generate tests/golden/nn_cases.json: golden reference data for the nn ops of the Tensor API
(crates/tensor/src/nn_ops/): convolutions, pools, activations, normalizations, one_hot,
attention and losses.

Independent of tinygrad and of the Rust code: every expected output is computed with numpy in
float64 from inputs that were first rounded to float32 (ints stay ints), then cast to the output
dtype. Convolutions, transposed convolutions and pools are computed by explicit loops over the
output (or input) positions, straight from their definitions — not by the sliding-window views the
Rust code uses. Semantics follow tinygrad's `tensor.py` (PyTorch where tinygrad follows it: pool
`ceil_mode`/`count_include_pad`, padding forms).

Run from anywhere:  python3 tests/golden/gen_nn.py
Only numpy is needed. The output is deterministic for a given numpy version (seeded PCG64).

Format: the same as cases.json (see README.md): one case per line,
  {"name", "op", "args", "inputs": [...], "out": {...}}
plus an optional "atol" (absolute tolerance for float outputs; the default is 1e-6 with rtol 1e-3).
Cases whose outputs are long float32 reductions (convolutions with many taps, average pools,
normalizations, losses) carry atol 1e-5: a float32 sum of n terms of size ~1 can be off by about
n * 6e-8 from the exact value, and outputs near zero (cancellation) have no relative slack.
"""
from __future__ import annotations

import itertools
import json
import math
import os
import sys

import numpy as np

SEED = 0x4E4E0F5
rng = np.random.default_rng(SEED)

ATOL, RTOL = 1e-6, 1e-3
ATOL_SUM = 1e-5  # long float32 reductions, see the module docstring
SELF_CHECK_FRACTION = 0.25

CASES: list[dict] = []
NAMES: set[str] = set()
REDRAWN: dict[str, int] = {}


# ---------------------------------------------------------------------------------------------
# inputs and serialisation

def f32(shape, lo=-2.0, hi=2.0):
    return np.asarray(rng.uniform(lo, hi, size=shape)).astype(np.float32)


def i32(shape, lo, hi):
    return np.asarray(rng.integers(lo, hi + 1, size=shape)).astype(np.int32)


def boolean(shape, p=0.5):
    return np.asarray(rng.random(size=shape) < p)


def dtname(a):
    return {np.dtype(np.float32): "float32", np.dtype(np.int32): "int32",
            np.dtype(np.bool_): "bool"}[a.dtype]


def flat(a, dt):
    v = np.asarray(a).reshape(-1)
    if dt == "bool":
        return [bool(x) for x in v]
    if dt == "int32":
        return [int(x) for x in v]
    out = []
    for x in v:
        x = float(x)
        if math.isnan(x):
            out.append("nan")
        elif math.isinf(x):
            out.append("inf" if x > 0 else "-inf")
        else:
            out.append(x)
    return out


def tensor_json(a, dt):
    a = np.asarray(a)
    return {"shape": [int(s) for s in a.shape], "dtype": dt, "data": flat(a, dt)}


def widen(a):
    if a.dtype == np.float32:
        return a.astype(np.float64)
    if a.dtype == np.int32:
        return a.astype(np.int64)
    return a.copy()


def cast_out(r, dt):
    r = np.asarray(r)
    if dt == "float32":
        return r.astype(np.float32)
    if dt == "bool":
        assert r.dtype == np.bool_, r.dtype
        return r
    if dt == "int32":
        assert r.dtype.kind in "iub", r.dtype
        return r.astype(np.int32)
    raise ValueError(dt)


def close_enough(emu, ref, atol):
    emu = np.asarray(emu, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if emu.shape != ref.shape:
        return False
    nan_ref, nan_emu = np.isnan(ref), np.isnan(emu)
    if (nan_ref != nan_emu).any():
        return False
    m = ~nan_ref
    inf = np.isinf(ref) & m
    if (emu[inf] != ref[inf]).any():
        return False
    f = m & ~inf
    tol = SELF_CHECK_FRACTION * (atol + RTOL * np.abs(ref[f]))
    return bool((np.abs(emu[f] - ref[f]) <= tol).all())


def add(name, op, args, make_inputs, fn, out_dt="float32", *, atol=ATOL, tries=50):
    """make_inputs: () -> list of arrays (redrawn if the float32 self-check fails).
    fn: (*widened inputs) -> result. The self-check re-evaluates fn on the raw float32 inputs
    (numpy float32 arithmetic where fn is vectorized) and needs a quarter of the tolerance."""
    assert name not in NAMES, f"duplicate case name {name}"
    NAMES.add(name)
    for _ in range(tries):
        inputs = make_inputs() if callable(make_inputs) else make_inputs
        with np.errstate(all="ignore"):
            ref = np.asarray(fn(*[widen(a) for a in inputs]))
        out = cast_out(ref, out_dt)
        ok = True
        if out_dt == "float32" and any(a.dtype == np.float32 for a in inputs):
            with np.errstate(all="ignore"):
                emu = np.asarray(fn(*[a.copy() for a in inputs])).astype(np.float32)
            ok = close_enough(emu, out, atol)
        if ok:
            break
        REDRAWN[name] = REDRAWN.get(name, 0) + 1
        if not callable(make_inputs):
            raise RuntimeError(f"{name}: fixed inputs fail the float32 self-check")
    else:
        raise RuntimeError(f"{name}: could not draw inputs passing the float32 self-check")
    case = {"name": name, "op": op, "args": args,
            "inputs": [tensor_json(a, dtname(a)) for a in inputs],
            "out": tensor_json(out, out_dt)}
    if atol != ATOL:
        case["atol"] = atol
    CASES.append(case)


def sh(shape):
    return "s" if len(shape) == 0 else "x".join(str(s) for s in shape)


# ---------------------------------------------------------------------------------------------
# padding forms (tinygrad's `_resolve_pool_pads` + `_flat_to_grouped`), from scratch

def grouped_pads(padding, n):
    """(before, after) per spatial dim in dim order, from an int, a per-dim list, or the flat
    (left, right, top, bottom, ...) list whose first pair is for the LAST dim."""
    if isinstance(padding, int):
        return [(padding, padding)] * n
    if len(padding) == n:
        return [(p, p) for p in padding]
    assert len(padding) == 2 * n
    pairs = [(padding[2 * i], padding[2 * i + 1]) for i in range(n)]  # last dim first
    return pairs[::-1]


def tup(v, n):
    return [v] * n if isinstance(v, int) else list(v)


def pad_signed(x, pads, value):
    """pads: (before, after) per trailing dim; negative values crop."""
    lead = x.ndim - len(pads)
    sl = [slice(None)] * lead
    np_pad = [(0, 0)] * lead
    for (b, a), size in zip(pads, x.shape[lead:]):
        sl.append(slice(max(0, -b), size - max(0, -a)))
        np_pad.append((max(0, b), max(0, a)))
    return np.pad(x[tuple(sl)], np_pad, constant_values=value)


# ---------------------------------------------------------------------------------------------
# reference implementations (loops over positions)

def conv_ref(x, w, b, groups, stride, dilation, padding):
    n = w.ndim - 2
    s, d = tup(stride, n), tup(dilation, n)
    xp = pad_signed(x, grouped_pads(padding, n), 0.0)
    bs, cin_all = xp.shape[:2]
    cout, cin = w.shape[:2]
    ks = w.shape[2:]
    sp = xp.shape[2:]
    outs = [(sp[j] - d[j] * (ks[j] - 1) - 1) // s[j] + 1 for j in range(n)]
    rc = cout // groups
    out = np.zeros((bs, cout, *outs))
    for nb in range(bs):
        for co in range(cout):
            g = co // rc
            for o in itertools.product(*[range(v) for v in outs]):
                acc = 0.0
                for ci in range(cin):
                    for k in itertools.product(*[range(v) for v in ks]):
                        pos = tuple(o[j] * s[j] + k[j] * d[j] for j in range(n))
                        acc += xp[(nb, g * cin + ci) + pos] * w[(co, ci) + k]
                out[(nb, co) + o] = acc + (b[co] if b is not None else 0.0)
    return out


def conv_transpose_ref(x, w, b, groups, stride, dilation, padding, output_padding):
    """Scatter form: input (i) contributes x[i]*w[k] at output position i*s + k*d - pad_before."""
    n = w.ndim - 2
    s, d, op = tup(stride, n), tup(dilation, n), tup(output_padding, n)
    pads = grouped_pads(padding, n)
    bs, cin_all = x.shape[:2]
    cin_g = cin_all // groups
    cout_g = w.shape[1]
    ks = w.shape[2:]
    sp = x.shape[2:]
    full = [(sp[j] - 1) * s[j] + d[j] * (ks[j] - 1) + 1 + op[j] for j in range(n)]
    outs = [full[j] - pads[j][0] - pads[j][1] for j in range(n)]
    acc = np.zeros((bs, groups * cout_g, *full))
    for nb in range(bs):
        for ci_all in range(cin_all):
            g = ci_all // cin_g
            for i in itertools.product(*[range(v) for v in sp]):
                xv = x[(nb, ci_all) + i]
                for co in range(cout_g):
                    for k in itertools.product(*[range(v) for v in ks]):
                        pos = tuple(i[j] * s[j] + k[j] * d[j] for j in range(n))
                        acc[(nb, g * cout_g + co) + pos] += xv * w[(ci_all, co) + k]
    sl = tuple(slice(pads[j][0], pads[j][0] + outs[j]) for j in range(n))
    out = acc[(slice(None), slice(None)) + sl]
    if b is not None:
        out = out + b.reshape(1, -1, *[1] * n)
    return out


def pool_out_sizes(sp, k, s, d, pads, ceil_mode):
    outs = []
    for j in range(len(sp)):
        span = sp[j] + pads[j][0] + pads[j][1] - d[j] * (k[j] - 1) - 1
        if ceil_mode:
            o = -(-span // s[j]) + 1
            # PyTorch: the last window must start inside the input or the padding before it
            if (o - 1) * s[j] >= sp[j] + pads[j][0]:
                o -= 1
        else:
            o = span // s[j] + 1
        outs.append(o)
    return outs


def pool_ref(x, kind, kernel, stride, dilation, padding, ceil_mode, count_include_pad=True):
    n = len(kernel)
    k = list(kernel)
    s = k if stride is None else tup(stride, n)
    d = tup(dilation, n)
    pads = grouped_pads(padding, n)
    lead = x.shape[:-n]
    sp = x.shape[-n:]
    outs = pool_out_sizes(sp, k, s, d, pads, ceil_mode)
    out = np.zeros((*lead, *outs))
    for li in itertools.product(*[range(v) for v in lead]):
        for o in itertools.product(*[range(v) for v in outs]):
            vals, count_pad = [], 0
            for kk in itertools.product(*[range(v) for v in k]):
                pos = [o[j] * s[j] + kk[j] * d[j] - pads[j][0] for j in range(n)]
                # inside the padded input (counts for count_include_pad)
                if all(-pads[j][0] <= pos[j] < sp[j] + pads[j][1] for j in range(n)):
                    count_pad += 1
                if all(0 <= pos[j] < sp[j] for j in range(n)):
                    vals.append(x[tuple(li) + tuple(pos)])
                elif kind == "avg" and all(-pads[j][0] <= pos[j] < sp[j] + pads[j][1]
                                           for j in range(n)):
                    vals.append(0.0)
            if kind == "max":
                out[tuple(li) + o] = max(vals)
            else:
                total = sum(vals)
                real = sum(1 for kk in itertools.product(*[range(v) for v in k])
                           if all(0 <= o[j] * s[j] + kk[j] * d[j] - pads[j][0] < sp[j]
                                  for j in range(n)))
                out[tuple(li) + o] = total / (count_pad if count_include_pad else real)
    return out


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softplus(x, beta=1.0):
    bx = x * beta
    return (np.maximum(bx, 0) + np.log1p(np.exp(-np.abs(bx)))) / beta


def log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def reduce_loss(l, reduction):
    return {"none": l, "sum": np.sum(l), "mean": np.mean(l)}[reduction]


ERF = np.vectorize(math.erf)


# ---------------------------------------------------------------------------------------------
# cases

def gen_conv():
    # (name, x shape, w shape, bias, groups, stride, dilation, padding)
    specs = [
        ("basic", (1, 1, 5, 5), (1, 1, 3, 3), False, 1, 1, 1, 0),
        ("bias_pad1", (2, 3, 6, 6), (4, 3, 3, 3), True, 1, 1, 1, 1),
        ("stride2", (2, 2, 7, 7), (3, 2, 3, 3), True, 1, 2, 1, 1),
        ("stride2_even", (1, 2, 8, 8), (2, 2, 3, 3), False, 1, 2, 1, 0),
        ("dilation2", (1, 2, 8, 8), (2, 2, 3, 3), False, 1, 1, 2, 0),
        ("dilation2_pad2", (1, 1, 6, 7), (2, 1, 3, 2), True, 1, 1, 2, 2),
        ("groups2", (2, 4, 5, 5), (6, 2, 3, 3), True, 2, 1, 1, 0),
        ("depthwise", (1, 3, 5, 5), (3, 1, 3, 3), False, 3, 1, 1, 1),
        ("groups2_stride2_dil2", (1, 4, 9, 9), (4, 2, 2, 2), True, 2, 2, 2, 1),
        ("pad_flat4", (1, 2, 5, 6), (2, 2, 2, 3), False, 1, 1, 1, [1, 0, 2, 1]),
        ("pad_perdim", (1, 1, 4, 5), (1, 1, 3, 3), False, 1, 1, 1, [1, 2]),
        ("stride_tuple_dil_tuple", (1, 2, 7, 8), (2, 2, 3, 2), True, 1, [2, 1], [1, 2], 1),
        ("k1x1", (2, 3, 4, 4), (5, 3, 1, 1), True, 1, 1, 1, 0),
        ("k_eq_stride", (1, 2, 6, 6), (2, 2, 2, 2), False, 1, 2, 1, 0),
        ("k_lt_stride", (1, 1, 7, 7), (2, 1, 2, 2), True, 1, 3, 1, 0),
        ("k_eq_input", (1, 1, 3, 3), (1, 1, 3, 3), False, 1, 1, 1, 0),
        ("neg_pad", (1, 1, 7, 7), (1, 1, 3, 3), False, 1, 1, 1, -1),
        ("mnist_like", (1, 1, 12, 12), (4, 1, 5, 5), True, 1, 1, 1, 0),
        ("conv1d", (2, 3, 10), (4, 3, 3), True, 1, 2, 1, 1),
        ("conv1d_dil", (1, 2, 9), (2, 2, 2), False, 1, 1, 3, [0, 2]),
        ("conv3d", (1, 2, 4, 5, 4), (3, 2, 2, 3, 2), True, 1, [1, 2, 1], 1, 1),
        # depthwise convolutions of the CPU's native kernel: rows longer than its 16-wide
        # runs, stride 2, dilation, uneven padding
        ("depthwise_5x5_s2", (2, 3, 11, 37), (3, 1, 5, 5), True, 3, 2, 1, 2),
        ("depthwise_3x3_dil2", (1, 4, 9, 21), (4, 1, 3, 3), True, 4, 1, 2, [2, 1, 0, 3]),
        ("depthwise_3x3_s1", (1, 5, 18, 18), (5, 1, 3, 3), False, 5, 1, 1, 1),
        # few output positions (a product of the realized windows)
        ("few_positions_1d", (1, 32, 6), (16, 32, 3), True, 1, 1, 1, 1),
        ("few_positions_2d_s2", (1, 8, 3, 4), (32, 8, 3, 3), True, 1, 2, 1, 1),
        ("few_positions_dil", (2, 24, 5), (20, 24, 2), False, 1, 3, 2, [0, 1]),
    ]
    for name, xs, ws, has_b, groups, stride, dil, pad in specs:
        def make(xs=xs, ws=ws, has_b=has_b):
            r = [f32(xs), f32(ws, -1, 1)]
            if has_b:
                r.append(f32((ws[0],)))
            return r

        def fn(x, w, b=None, groups=groups, stride=stride, dil=dil, pad=pad):
            return conv_ref(x, w, b, groups, stride, dil, pad)
        taps = int(np.prod(ws[1:]))
        add(f"conv2d_{name}_{sh(xs)}_{sh(ws)}", "conv2d",
            {"bias": has_b, "groups": groups, "stride": stride, "dilation": dil, "padding": pad},
            make, fn, atol=ATOL_SUM if taps > 8 else ATOL)


def gen_conv_transpose():
    # (name, x shape, w shape, bias, groups, stride, dilation, padding, output_padding)
    specs = [
        ("basic", (1, 1, 3, 3), (1, 1, 2, 2), False, 1, 1, 1, 0, 0),
        ("stride2_pad1_op1", (2, 2, 4, 4), (2, 3, 3, 3), True, 1, 2, 1, 1, 1),
        ("groups2", (1, 4, 3, 3), (4, 1, 3, 3), False, 2, 1, 1, 0, 0),
        ("dilation2", (1, 2, 3, 3), (2, 2, 2, 2), True, 1, 1, 2, 0, 0),
        ("stride_tuple", (1, 1, 3, 4), (1, 2, 3, 2), False, 1, [2, 3], 1, [1, 0], 0),
        ("pad_flat4", (1, 2, 4, 3), (2, 1, 3, 3), False, 1, 2, 1, [0, 1, 1, 0], 0),
        ("conv1d_stride3", (2, 2, 5), (2, 3, 3), True, 1, 3, 1, 0, 0),
        # stride = kernel: windows tiling the output (one GEMM and a reshuffle)
        ("stride_eq_kernel", (2, 3, 5, 6), (3, 4, 2, 2), True, 1, 2, 1, 0, 0),
        ("stride_eq_kernel_pad_op", (1, 2, 4, 3), (2, 3, 2, 3), False, 1, [2, 3], 1,
         [1, 0, 0, 2], 1),
    ]
    for name, xs, ws, has_b, groups, stride, dil, pad, op in specs:
        def make(xs=xs, ws=ws, has_b=has_b, groups=groups):
            r = [f32(xs), f32(ws, -1, 1)]
            if has_b:
                r.append(f32((ws[1] * groups,)))
            return r

        def fn(x, w, b=None, groups=groups, stride=stride, dil=dil, pad=pad, op=op):
            return conv_transpose_ref(x, w, b, groups, stride, dil, pad, op)
        add(f"conv_transpose2d_{name}_{sh(xs)}_{sh(ws)}", "conv_transpose2d",
            {"bias": has_b, "groups": groups, "stride": stride, "dilation": dil, "padding": pad,
             "output_padding": op},
            make, fn, atol=ATOL_SUM)


def gen_pool():
    # (name, x shape, kernel, stride, dilation, padding, ceil_mode)
    specs = [
        ("k2", (1, 1, 5, 5), (2, 2), None, 1, 0, False),
        ("k2_ceil", (1, 1, 5, 5), (2, 2), None, 1, 0, True),
        ("k2_pad1", (1, 1, 5, 5), (2, 2), None, 1, 1, False),
        ("k3_s2_pad1_ceil", (2, 2, 6, 7), (3, 3), 2, 1, 1, True),
        ("k3_s1", (1, 2, 5, 6), (3, 3), 1, 1, 0, False),
        ("k3_s2_ceil_edge", (1, 1, 6, 6), (3, 3), 2, 1, 0, True),
        ("k2_s1_dil2", (1, 1, 6, 6), (2, 2), 1, 2, 0, False),
        ("k3_s2_dil2_pad1_ceil", (1, 2, 9, 8), (3, 3), 2, 2, 1, True),
        ("k23_s12", (2, 1, 6, 7), (2, 3), [1, 2], 1, 0, False),
        ("pad_flat4", (1, 1, 5, 6), (2, 2), 2, 1, [1, 0, 0, 1], False),
        ("pad_perdim", (1, 1, 5, 6), (3, 3), 2, 1, [1, 0], True),
        ("k_eq_input", (1, 3, 4, 4), (4, 4), None, 1, 0, False),
        ("1d_k3_s2", (2, 3, 7), (3,), 2, 1, 1, False),
        ("1d_ceil", (1, 2, 8), (3,), 2, 1, 0, True),
        ("3d_k2", (1, 1, 4, 4, 4), (2, 2, 2), None, 1, 0, False),
        ("3d_k2_ceil_pad", (1, 1, 3, 5, 4), (2, 2, 2), 2, 1, 1, True),
    ]
    for name, xs, k, stride, dil, pad, ceil in specs:
        args = {"kernel": list(k), "stride": stride, "dilation": dil, "padding": pad,
                "ceil_mode": ceil}

        def fmax(x, k=k, stride=stride, dil=dil, pad=pad, ceil=ceil):
            return pool_ref(x, "max", k, stride, dil, pad, ceil)
        add(f"max_pool2d_{name}_{sh(xs)}", "max_pool2d", args, lambda xs=xs: [f32(xs, -3, 1)],
            fmax)
        for cip in (True, False):
            if not cip and pad == 0 and not ceil:
                continue

            def favg(x, k=k, stride=stride, dil=dil, pad=pad, ceil=ceil, cip=cip):
                return pool_ref(x, "avg", k, stride, dil, pad, ceil, cip)
            add(f"avg_pool2d_{name}{'' if cip else '_nocip'}_{sh(xs)}", "avg_pool2d",
                {**args, "count_include_pad": cip}, lambda xs=xs: [f32(xs)], favg,
                atol=ATOL_SUM)
    # an int input to max_pool2d (pads with the int32 minimum)
    add("max_pool2d_int_pad1_1x1x4x4", "max_pool2d",
        {"kernel": [2, 2], "stride": None, "dilation": 1, "padding": 1, "ceil_mode": False},
        lambda: [i32((1, 1, 4, 4), -9, -1)],
        lambda x: pool_ref(x, "max", (2, 2), None, 1, 1, False).astype(np.int64), "int32")


def gen_activations():
    def gelu(x):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))

    # (op, args, fn, lo, hi)
    acts = [
        ("relu6", {}, lambda x: np.clip(x, 0, 6), -9, 9),
        ("leaky_relu", {"neg_slope": 0.01}, lambda x: np.where(x < 0, 0.01 * x, x), -3, 3),
        ("leaky_relu", {"neg_slope": 0.2}, lambda x: np.where(x < 0, 0.2 * x, x), -3, 3),
        ("elu", {"alpha": 1.0}, lambda x: np.where(x > 0, x, np.expm1(x)), -4, 3),
        ("elu", {"alpha": 0.5}, lambda x: np.where(x > 0, x, 0.5 * np.expm1(x)), -4, 3),
        ("celu", {"alpha": 1.0},
         lambda x: np.maximum(x, 0) + np.minimum(0, np.expm1(x)), -4, 3),
        ("celu", {"alpha": 2.0},
         lambda x: np.maximum(x, 0) + np.minimum(0, 2.0 * np.expm1(x / 2.0)), -4, 3),
        ("selu", {}, lambda x: 1.0507 * np.where(x >= 0, x, 1.67326 * np.expm1(x)), -4, 3),
        ("gelu", {}, gelu, -4, 4),
        ("quick_gelu", {}, lambda x: x * sigmoid(1.702 * x), -4, 4),
        ("silu", {}, lambda x: x * sigmoid(x), -5, 5),
        ("swish", {}, lambda x: x * sigmoid(x), -5, 5),
        ("mish", {}, lambda x: x * np.tanh(softplus(x)), -5, 5),
        ("softplus", {"beta": 1.0}, softplus, -6, 6),
        ("softplus", {"beta": 2.0}, lambda x: softplus(x, 2.0), -6, 6),
        ("softplus", {"beta": 1.0}, softplus, -80, 80),
        ("logsigmoid", {}, lambda x: -softplus(-x), -30, 30),
        ("softsign", {}, lambda x: x / (1 + np.abs(x)), -5, 5),
        ("hardsigmoid", {"alpha": 1 / 6, "beta": 0.5},
         lambda x: np.clip(x / 6 + 0.5, 0, 1), -5, 5),
        ("hardsigmoid", {"alpha": 0.2, "beta": 0.4},
         lambda x: np.clip(0.2 * x + 0.4, 0, 1), -5, 5),
        ("hardswish", {}, lambda x: x * np.clip(x + 3, 0, 6) / 6, -5, 5),
        ("hardtanh", {"min_val": -1.0, "max_val": 1.0}, lambda x: np.clip(x, -1, 1), -3, 3),
        ("hardtanh", {"min_val": -0.5, "max_val": 2.0}, lambda x: np.clip(x, -0.5, 2), -3, 3),
        ("sinh", {}, np.sinh, -3, 3),
        ("cosh", {}, np.cosh, -3, 3),
        ("asinh", {}, np.arcsinh, -4, 4),
        ("acosh", {}, np.arccosh, 1.1, 5),
        ("atanh", {}, np.arctanh, -0.95, 0.95),
        ("erf", {}, ERF, -3, 3),
    ]
    seen: dict[str, int] = {}
    for op, args, fn, lo, hi in acts:
        for shape in [(3, 4), (2, 3, 5)]:
            tag = seen.get((op, shape), 0)
            seen[(op, shape)] = tag + 1
            name = f"{op}{'' if tag == 0 else f'_v{tag}'}_{sh(shape)}"
            add(name, op, args, lambda shape=shape, lo=lo, hi=hi: [f32(shape, lo, hi)],
                lambda x, fn=fn: fn(x))

    special = np.array([0.0, -1.5, np.inf, -np.inf, np.nan, 3.0, -0.0, np.nan],
                       dtype=np.float32).reshape(2, 4)
    add("isinf_2x4", "isinf", {}, [special], np.isinf, "bool")
    add("isinf_pos_2x4", "isinf_signed", {"pos": True, "neg": False}, [special],
        np.isposinf, "bool")
    add("isinf_neg_2x4", "isinf_signed", {"pos": False, "neg": True}, [special],
        np.isneginf, "bool")
    add("isnan_2x4", "isnan", {}, [special], np.isnan, "bool")
    add("isfinite_2x4", "isfinite", {}, [special], np.isfinite, "bool")
    add("lerp_tensor_3x4", "lerp", {}, lambda: [f32((3, 4)), f32((3, 4)), f32((3, 4), 0, 1)],
        lambda a, b, w: a + (b - a) * w)
    add("lerp_scalar_2x3", "lerp", {"weight": 0.25}, lambda: [f32((2, 3)), f32((2, 3))],
        lambda a, b: a + (b - a) * 0.25)
    add("lerp_bcast_3x4_4", "lerp", {}, lambda: [f32((3, 4)), f32((4,)), f32((3, 1), 0, 1)],
        lambda a, b, w: a + (b - a) * w)


def gen_norm():
    def layernorm(x, axis, eps):
        ax = tuple(axis) if isinstance(axis, list) else axis
        y = x - x.mean(axis=ax, keepdims=True)
        return y / np.sqrt((y * y).mean(axis=ax, keepdims=True) + eps)

    for shape, axis, eps in [((4, 8), -1, 1e-5), ((2, 3, 4), [1, 2], 1e-5),
                             ((2, 3, 4), 1, 1e-3), ((1, 16), -1, 1e-5)]:
        add(f"layernorm_{sh(shape)}_ax{str(axis).replace(' ', '')}", "layernorm",
            {"axis": axis, "eps": eps}, lambda shape=shape: [f32(shape, -3, 5)],
            lambda x, axis=axis, eps=eps: layernorm(x, axis, eps), atol=ATOL_SUM)

    for shape, w, b in [((2, 3, 4, 4), True, True), ((2, 3, 4, 4), False, False),
                        ((4, 5), True, False), ((1, 2, 3), False, True)]:
        c = shape[1]

        def make(shape=shape, c=c, w=w, b=b):
            r = [f32(shape)]
            if w:
                r.append(f32((c,), 0.5, 1.5))
            if b:
                r.append(f32((c,)))
            r += [f32((c,)), f32((c,), 0.5, 2)]
            return r

        def fn(x, *rest, w=w, b=b, shape=shape):
            rest = list(rest)
            bshape = [1, shape[1]] + [1] * (len(shape) - 2)
            wt = rest.pop(0).reshape(bshape) if w else 1.0
            bi = rest.pop(0).reshape(bshape) if b else 0.0
            mean, invstd = rest[0].reshape(bshape), rest[1].reshape(bshape)
            return (x - mean) * wt * invstd + bi
        add(f"batchnorm_{sh(shape)}{'_w' if w else ''}{'_b' if b else ''}", "batchnorm",
            {"weight": w, "bias": b}, make, fn)

    def normalize(x, p, dim, eps):
        if p == 0:
            return x / np.maximum((x != 0).sum(axis=dim, keepdims=True), eps)
        return x / np.maximum((np.abs(x) ** p).sum(axis=dim, keepdims=True) ** (1 / p), eps)

    for shape, p, dim in [((3, 4), 2.0, 1), ((3, 4), 1.0, 0), ((2, 3, 4), 3.0, -1),
                          ((3, 4), 0.0, 1)]:
        def make(shape=shape, p=p):
            x = f32(shape)
            if p == 0:
                x[boolean(shape, 0.3)] = 0
            return [x]
        add(f"normalize_{sh(shape)}_p{int(p)}_d{dim}", "normalize",
            {"p": p, "dim": dim, "eps": 1e-12}, make,
            lambda x, p=p, dim=dim: normalize(x, p, dim, 1e-12), atol=ATOL_SUM)
    add("normalize_zero_row_2x3", "normalize", {"p": 2.0, "dim": 1, "eps": 1e-12},
        [np.array([[0, 0, 0], [3, 4, 0]], dtype=np.float32)],
        lambda x: normalize(x, 2.0, 1, 1e-12))


def gen_one_hot():
    for shape, n in [((5,), 5), ((2, 3), 4), ((4,), -1), ((2, 2, 2), 3)]:
        hi = (n if n > 0 else 6) - 1

        def fn(y, n=n):
            k = int(y.max()) + 1 if n == -1 else n
            return (y[..., None] == np.arange(k)).astype(np.int64)
        add(f"one_hot_{sh(shape)}_n{n}".replace("-", "m"), "one_hot", {"num_classes": n},
            lambda shape=shape, hi=hi: [i32(shape, 0, hi)], fn, "int32")


def gen_attention():
    def sdpa(q, k, v, mask=None, causal=False):
        qk = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
        if causal:
            L, S = qk.shape[-2:]
            mask = np.tril(np.ones((L, S), dtype=bool))
        if mask is not None:
            qk = qk + (np.where(mask, 0.0, -np.inf) if mask.dtype == np.bool_ else mask)
        return softmax(qk, -1) @ v

    add("sdpa_2x4x8_2x5x8_2x5x3", "sdpa", {"mask": False, "causal": False},
        lambda: [f32((2, 4, 8)), f32((2, 5, 8)), f32((2, 5, 3))], sdpa, atol=ATOL_SUM)
    add("sdpa_boolmask_1x2x3x4", "sdpa", {"mask": True, "causal": False},
        lambda: [f32((1, 2, 3, 4)), f32((1, 2, 5, 4)), f32((1, 2, 5, 4)),
                 np.array([[1, 0, 1, 1, 0], [1, 1, 1, 1, 1], [0, 0, 0, 1, 0]], dtype=bool)],
        lambda q, k, v, m: sdpa(q, k, v, m), atol=ATOL_SUM)
    add("sdpa_floatmask_2x3x4", "sdpa", {"mask": True, "causal": False},
        lambda: [f32((2, 3, 4)), f32((2, 3, 4)), f32((2, 3, 2)), f32((3, 3), -1, 0)],
        lambda q, k, v, m: sdpa(q, k, v, m), atol=ATOL_SUM)
    add("sdpa_causal_2x2x4x6", "sdpa", {"mask": False, "causal": True},
        lambda: [f32((2, 2, 4, 6)), f32((2, 2, 4, 6)), f32((2, 2, 4, 6))],
        lambda q, k, v: sdpa(q, k, v, causal=True), atol=ATOL_SUM)


def gen_losses():
    red = ["mean", "sum", "none"]
    # binary cross-entropy on probabilities
    for r in red:
        add(f"binary_crossentropy_8_{r}", "binary_crossentropy", {"reduction": r},
            lambda: [f32((8,), 0.05, 0.95), boolean((8,)).astype(np.float32)],
            lambda p, y, r=r: reduce_loss(-(y * np.log(p) + (1 - y) * np.log(1 - p)), r),
            atol=ATOL_SUM)
    add("binary_crossentropy_soft_2x3_mean", "binary_crossentropy", {"reduction": "mean"},
        lambda: [f32((2, 3), 0.05, 0.95), f32((2, 3), 0, 1)],
        lambda p, y: np.mean(-(y * np.log(p) + (1 - y) * np.log(1 - p))), atol=ATOL_SUM)

    def bce_logits(x, y, r, pw=None):
        pw = 1.0 if pw is None else pw
        return reduce_loss(-(pw * y * -softplus(-x) + (1 - y) * -softplus(x)), r)
    for r in red:
        add(f"bce_logits_8_{r}", "binary_crossentropy_logits", {"reduction": r,
            "pos_weight": False},
            lambda: [f32((8,), -6, 6), boolean((8,)).astype(np.float32)],
            lambda x, y, r=r: bce_logits(x, y, r), atol=ATOL_SUM)
    add("bce_logits_posw_2x3_mean", "binary_crossentropy_logits",
        {"reduction": "mean", "pos_weight": True},
        lambda: [f32((2, 3), -30, 30), f32((2, 3), 0, 1), f32((3,), 0.5, 3)],
        lambda x, y, pw: bce_logits(x, y, "mean", pw), atol=ATOL_SUM)

    def sparse_ce(x, y, ignore_index, ls, r):
        lp = log_softmax(x, -1)
        mask = (y != ignore_index) if ignore_index != -1 else np.ones(y.shape, dtype=bool)
        onehot = (y[..., None] == np.arange(x.shape[-1])) & mask[..., None]
        unreduced = (1 - ls) * (lp * onehot).sum(-1) + ls * (lp.mean(-1) * mask)
        if r == "mean":
            return -unreduced.sum() / mask.sum()
        return -reduce_loss(unreduced, r)
    # (name, x shape, classes, ignore_index, label_smoothing, reduction)
    for name, xs, ii, ls, r in [("basic", (4, 5), -1, 0.0, "mean"),
                                 ("sum", (4, 5), -1, 0.0, "sum"),
                                 ("none", (4, 5), -1, 0.0, "none"),
                                 ("ignore2", (6, 4), 2, 0.0, "mean"),
                                 ("smooth", (4, 5), -1, 0.1, "mean"),
                                 ("ignore1_smooth_none", (5, 3), 1, 0.2, "none"),
                                 ("3d", (2, 3, 4), -1, 0.0, "mean"),
                                 ("batch1", (1, 10), -1, 0.0, "mean")]:
        c = xs[-1]
        add(f"sparse_ce_{name}_{sh(xs)}", "sparse_categorical_crossentropy",
            {"ignore_index": ii, "label_smoothing": ls, "reduction": r},
            lambda xs=xs, c=c: [f32(xs, -3, 3), i32(xs[:-1], 0, c - 1)],
            lambda x, y, ii=ii, ls=ls, r=r: sparse_ce(x, y, ii, ls, r), atol=ATOL_SUM)
    # ignore_index -1 with -1 labels present: they count in the mean but match no class
    add("sparse_ce_neg_labels_4x3", "sparse_categorical_crossentropy",
        {"ignore_index": -1, "label_smoothing": 0.0, "reduction": "mean"},
        lambda: [f32((4, 3), -3, 3), np.array([0, -1, 2, -1], dtype=np.int32)],
        lambda x, y: sparse_ce(x, y, -1, 0.0, "mean"), atol=ATOL_SUM)

    def cross_entropy(x, y, r, ls):
        cd = 0 if x.ndim == 1 else 1
        c = x.shape[cd]
        if y.shape != x.shape:
            y = (np.expand_dims(y, cd) == np.arange(c).reshape([c] + [1] * (x.ndim - cd - 1)))
        y = (1 - ls) * y + ls / c
        return reduce_loss(-(log_softmax(x, cd) * y).sum(cd), r)
    add("cross_entropy_labels_4x5_mean", "cross_entropy", {"reduction": "mean",
        "label_smoothing": 0.0}, lambda: [f32((4, 5), -3, 3), i32((4,), 0, 4)],
        lambda x, y: cross_entropy(x, y, "mean", 0.0), atol=ATOL_SUM)
    add("cross_entropy_labels_4x5_none_ls", "cross_entropy", {"reduction": "none",
        "label_smoothing": 0.2}, lambda: [f32((4, 5), -3, 3), i32((4,), 0, 4)],
        lambda x, y: cross_entropy(x, y, "none", 0.2), atol=ATOL_SUM)
    add("cross_entropy_probs_3x4_sum", "cross_entropy", {"reduction": "sum",
        "label_smoothing": 0.0},
        lambda: [f32((3, 4), -3, 3), softmax(f32((3, 4)).astype(np.float64), 1).astype(np.float32)],
        lambda x, y: cross_entropy(x, y, "sum", 0.0), atol=ATOL_SUM)
    add("cross_entropy_1d_5", "cross_entropy", {"reduction": "mean", "label_smoothing": 0.0},
        lambda: [f32((5,), -3, 3), np.array(3, dtype=np.int32)],
        lambda x, y: cross_entropy(x, y, "mean", 0.0), atol=ATOL_SUM)
    add("cross_entropy_spatial_2x3x2_mean", "cross_entropy", {"reduction": "mean",
        "label_smoothing": 0.1}, lambda: [f32((2, 3, 2), -3, 3), i32((2, 2), 0, 2)],
        lambda x, y: cross_entropy(x, y, "mean", 0.1), atol=ATOL_SUM)

    def nll(x, y, w, ii, r):
        c = x.shape[1]
        wt = np.ones(y.shape) if w is None else w[y]
        if ii is not None:
            wt = wt * (y != ii)
        onehot = np.expand_dims(y, 1) == np.arange(c).reshape([c] + [1] * (x.ndim - 2))
        picked = np.where(onehot, x, 0).sum(1)
        l = -picked * wt
        return l.sum() / wt.sum() if r == "mean" else reduce_loss(l, r)
    for name, xs, has_w, ii, r in [("basic", (4, 5), False, None, "mean"),
                                    ("sum", (4, 5), False, None, "sum"),
                                    ("none", (4, 5), False, None, "none"),
                                    ("weight", (6, 4), True, None, "mean"),
                                    ("weight_ignore", (6, 4), True, 1, "mean"),
                                    ("ignore_none", (5, 3), False, 0, "none"),
                                    ("spatial", (2, 3, 2), True, None, "mean")]:
        c = xs[1]

        def make(xs=xs, c=c, has_w=has_w):
            ys = (xs[0],) + xs[2:]
            r_ = [log_softmax(f32(xs, -3, 3).astype(np.float64), 1).astype(np.float32),
                  i32(ys, 0, c - 1)]
            if has_w:
                r_.append(f32((c,), 0.2, 2))
            return r_
        add(f"nll_loss_{name}_{sh(xs)}", "nll_loss",
            {"weight": has_w, "ignore_index": ii, "reduction": r}, make,
            lambda x, y, w=None, ii=ii, r=r: nll(x, y, w, ii, r), atol=ATOL_SUM)


def interpolate_ref(x, size, mode, align_corners):
    """Separable resampling of the last len(size) axes. Source coordinates follow tinygrad (and
    PyTorch): computed in float32 like tinygrad's `arange` tensor; linear weights and sums in
    float64. `linear`: half-pixel centres clipped to the input, or the corners aligned
    (`(in-1)/(out-1)`, 0 for a single output); `nearest`: floor(i*in/out); `nearest-exact`:
    floor((i+0.5)*in/out)."""
    out = np.asarray(x, dtype=np.float64)
    for k in range(1, len(size) + 1):
        axis, n_out = out.ndim - k, size[-k]
        n_in = x.shape[axis]
        i = np.arange(n_out, dtype=np.float32)
        if align_corners:
            scale = np.float32((n_in - 1) / (n_out - 1)) if n_out > 1 else np.float32(0)
        else:
            scale = np.float32(n_in / n_out)
        if mode == "linear":
            src = scale * i if align_corners else scale * (i + np.float32(0.5)) - np.float32(0.5)
            src = np.clip(src, 0, n_in - 1).astype(np.float32)
            lo, hi = np.floor(src).astype(np.int64), np.ceil(src).astype(np.int64)
            w = (src - np.floor(src)).astype(np.float64)
            shape = [1] * out.ndim
            shape[axis] = n_out
            a, b = np.take(out, lo, axis=axis), np.take(out, hi, axis=axis)
            out = a + (b - a) * w.reshape(shape)
        else:
            src = scale * (i + np.float32(0.5)) if mode == "nearest-exact" else scale * i
            out = np.take(out, src.astype(np.int64), axis=axis)
    if np.asarray(x).dtype.kind in "iu":
        out = np.trunc(out).astype(np.int64)  # cast back to the input's integer dtype
    return out


def gen_interpolate():
    # (name, x shape, size, mode, align_corners)
    specs = [
        ("linear_up_2d", (1, 1, 3, 4), (5, 7), "linear", False),
        ("linear_down_2d", (2, 2, 6, 5), (4, 3), "linear", False),
        ("linear_1d", (2, 3, 5), (8,), "linear", False),
        ("linear_align_2d", (1, 2, 3, 4), (5, 6), "linear", True),
        ("linear_align_to_1", (1, 1, 4, 3), (1, 5), "linear", True),
        ("trilinear", (1, 1, 3, 2, 4), (4, 3, 2), "linear", False),
        ("linear_same_size", (2, 3, 4), (3, 4), "linear", False),
        ("nearest_up", (1, 2, 3, 3), (6, 7), "nearest", False),
        ("nearest_down", (1, 1, 7, 8), (3, 5), "nearest", False),
        ("nearest_exact_up", (1, 2, 3, 3), (5, 7), "nearest-exact", False),
        ("nearest_exact_down", (2, 7, 9), (4,), "nearest-exact", False),
        ("nearest_no_batch", (4, 5), (3, 8), "nearest", False),
        ("tinygrad_doc", (3, 4), (2, 3), "linear", False),
    ]
    for name, xs, size, mode, ac in specs:
        add(f"interpolate_{name}", "interpolate", {"size": list(size), "mode": mode, "align_corners": ac},
            lambda xs=xs: [f32(xs)], lambda x, size=size, mode=mode, ac=ac: interpolate_ref(x, size, mode, ac))
    # integer input: the result is cast back (tinygrad's `x.cast(self.dtype)`)
    add("interpolate_nearest_int32", "interpolate", {"size": [5, 2], "mode": "nearest", "align_corners": False},
        [np.arange(12, dtype=np.int32).reshape(3, 4) * 3 - 7],
        lambda x: interpolate_ref(x, (5, 2), "nearest", False), out_dt="int32")


def pool_argmax_ref(x, kernel, stride, dilation, padding, ceil_mode):
    """Flat spatial index (in the input) of each window's first maximum."""
    n = len(kernel)
    k = list(kernel)
    s = k if stride is None else tup(stride, n)
    d = tup(dilation, n)
    pads = grouped_pads(padding, n)
    lead, sp = x.shape[:-n], x.shape[-n:]
    outs = pool_out_sizes(sp, k, s, d, pads, ceil_mode)
    out = np.zeros((*lead, *outs), dtype=np.int64)
    for li in itertools.product(*[range(v) for v in lead]):
        for o in itertools.product(*[range(v) for v in outs]):
            best = None
            for kk in itertools.product(*[range(v) for v in k]):
                pos = [o[j] * s[j] + kk[j] * d[j] - pads[j][0] for j in range(n)]
                if all(0 <= pos[j] < sp[j] for j in range(n)):
                    v = x[tuple(li) + tuple(pos)]
                    if best is None or v > best[0]:
                        best = (v, int(np.ravel_multi_index(pos, sp)))
            out[tuple(li) + o] = best[1]
    return out


def unpool_ref(x, kernel, stride, dilation, padding, ceil_mode, output_size):
    """max_pool2d with indices, then max_unpool2d: each window's maximum added at its index
    (tinygrad sums when overlapping windows pick the same position) in zeros of output_size
    (default: (i - 1) * s - pads + d * (k - 1) + 1); indices are flat positions in it."""
    n = len(kernel)
    vals = pool_ref(x, "max", kernel, stride, dilation, padding, ceil_mode)
    idx = pool_argmax_ref(x, kernel, stride, dilation, padding, ceil_mode)
    k = list(kernel)
    s = k if stride is None else tup(stride, n)
    d = tup(dilation, n)
    pads = grouped_pads(padding, n)
    if output_size is None:
        output_size = [(vals.shape[-n + j] - 1) * s[j] - (pads[j][0] + pads[j][1])
                       + d[j] * (k[j] - 1) + 1 for j in range(n)]
    lead = vals.shape[:-n]
    out = np.zeros((*lead, int(np.prod(output_size))))
    for li in itertools.product(*[range(v) for v in lead]):
        # an index past the output (a default output_size smaller than the input) writes nothing
        i, v = idx[li].reshape(-1), vals[li].reshape(-1)
        keep = i < out.shape[-1]
        np.add.at(out[li], i[keep], v[keep])
    return out.reshape(*lead, *output_size)


def gen_unpool():
    # (name, x shape, kernel, stride, dilation, padding, ceil_mode, output_size)
    specs = [
        ("k2", (1, 1, 4, 4), (2, 2), None, 1, 0, False, None),
        ("k2_odd_output_size", (2, 3, 5, 5), (2, 2), None, 1, 0, False, [5, 5]),
        ("k3_s2_pad1", (1, 2, 6, 7), (3, 3), 2, 1, 1, False, None),
        ("k3_s1_overlap", (1, 1, 5, 6), (3, 3), 1, 1, 0, False, None),
        ("k2_s1_dil2", (1, 1, 6, 6), (2, 2), 1, 2, 0, False, None),
        ("k3_s2_ceil", (1, 1, 6, 6), (3, 3), 2, 1, 0, True, [6, 6]),
        ("1d_k2", (2, 2, 7), (2,), None, 1, 0, False, [7]),
        ("3d_k2", (1, 1, 4, 4, 4), (2, 2, 2), None, 1, 0, False, None),
    ]
    for name, xs, k, stride, dil, pad, ceil, osz in specs:
        args = {"kernel": list(k), "stride": stride, "dilation": dil, "padding": pad,
                "ceil_mode": ceil}
        add(f"max_pool2d_indices_{name}_{sh(xs)}", "max_pool2d_indices", args,
            lambda xs=xs: [f32(xs, -3, 1)],
            lambda x, k=k, stride=stride, dil=dil, pad=pad, ceil=ceil:
                pool_argmax_ref(x, k, stride, dil, pad, ceil), "int32")
        add(f"max_unpool2d_{name}_{sh(xs)}", "max_unpool2d", {**args, "output_size": osz},
            lambda xs=xs: [f32(xs, -3, 1)],
            lambda x, k=k, stride=stride, dil=dil, pad=pad, ceil=ceil, osz=osz:
                unpool_ref(x, k, stride, dil, pad, ceil, osz))
    # ties (an int input with few values): the first position in the window wins
    add("max_pool2d_indices_int_ties_1x1x4x6", "max_pool2d_indices",
        {"kernel": [2, 3], "stride": None, "dilation": 1, "padding": 0, "ceil_mode": False},
        lambda: [i32((1, 1, 4, 6), 0, 1)],
        lambda x: pool_argmax_ref(x, (2, 3), None, 1, 0, False), "int32")
    add("max_unpool2d_int_1x2x4x4", "max_unpool2d",
        {"kernel": [2, 2], "stride": None, "dilation": 1, "padding": 0, "ceil_mode": False,
         "output_size": None},
        lambda: [i32((1, 2, 4, 4), -9, 9)],
        lambda x: unpool_ref(x, (2, 2), None, 1, 0, False, None).astype(np.int64), "int32")


def main():
    gen_conv()
    gen_conv_transpose()
    gen_pool()
    gen_activations()
    gen_norm()
    gen_one_hot()
    gen_attention()
    gen_losses()
    gen_interpolate()
    gen_unpool()

    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "nn_cases.json")
    lines = [json.dumps(c, separators=(",", ":"), allow_nan=False) for c in CASES]
    with open(path, "w") as f:
        f.write("[\n" + ",\n".join(lines) + "\n]\n")
    counts: dict[str, int] = {}
    for c in CASES:
        counts[c["op"]] = counts.get(c["op"], 0) + 1
    print(f"wrote {len(CASES)} cases, {os.path.getsize(path)} bytes -> {path}", file=sys.stderr)
    for op, n in counts.items():
        print(f"  {op}: {n}", file=sys.stderr)
    if REDRAWN:
        print(f"redrawn by the float32 self-check: {REDRAWN}", file=sys.stderr)


if __name__ == "__main__":
    main()
