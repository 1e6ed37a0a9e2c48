#!/usr/bin/env python3
"""Generate tests/golden/grads.json: reference gradients for the Tensor ops.

For each case, `loss = sum(op(inputs) * W)` with a fixed random `W` of the output's shape, and the
expected gradient of `loss` with respect to every input. Everything is computed with numpy in
float64 from float32 inputs, independently of tinygrad and of the Rust code:
- by central finite differences (step 1e-6) for smooth ops. Each case is checked against a
  second step (1e-4): inputs that land near a kink (relu at 0, abs at 0, floor at an integer, a
  tie of max) make the two disagree and are redrawn;
- analytically for the cases built on ties (`maximum`/`minimum`/`max`/`min` with equal values),
  where the derivative is a convention: tinygrad splits the gradient evenly between equal values.

Run from anywhere:  python3 tests/golden/gen_grads.py   (only numpy is needed; deterministic)
Format: see tests/golden/README.md ("grads.json").
"""
from __future__ import annotations

import json
import os

import numpy as np

from gen_nn import grouped_pads, pad_signed, tup

SEED = 0x6AD6
rng = np.random.default_rng(SEED)

H_SMALL, H_LARGE = 1e-6, 1e-4
# two finite-difference steps must agree this well, or the inputs are redrawn
AGREE_ATOL, AGREE_RTOL = 1e-5, 1e-5

CASES: list[dict] = []
NAMES: set[str] = set()
REDRAWN: dict[str, int] = {}


# ---------------------------------------------------------------------------------------------
# inputs (float32 values, returned as float64 arrays holding them exactly)

def _f32(a):
    return np.asarray(a, dtype=np.float64).astype(np.float32).astype(np.float64)


def uni(*shape, lo=-2.0, hi=2.0):
    return lambda: _f32(rng.uniform(lo, hi, size=shape))


def away(*shape, lo=-2.0, hi=2.0, kinks=(0.0,), margin=0.1):
    """Uniform, but at least `margin` from every kink."""
    def make():
        a = rng.uniform(lo, hi, size=shape)
        for _ in range(1000):
            bad = np.zeros(a.shape, dtype=bool)
            for k in kinks:
                bad |= np.abs(a - k) < margin
            if not bad.any():
                break
            a[bad] = rng.uniform(lo, hi, size=int(bad.sum()))
        return _f32(a)
    return make


def nonint(*shape, lo=-3.0, hi=3.0):
    """Away from integers and half-integers (for floor/ceil/trunc/round)."""
    return away(*shape, lo=lo, hi=hi, kinks=tuple(np.arange(-4, 4.5, 0.5)), margin=0.05)


def grid(*shape, lo=-2, hi=2):
    """Integers (as floats), so ties occur."""
    return lambda: _f32(rng.integers(lo, hi + 1, size=shape))


def cond(*shape):
    return rng.random(size=shape) < 0.5


# ---------------------------------------------------------------------------------------------
# float64 reference implementations

def unbroadcast(g, shape):
    """Sums `g` down to `shape` (the gradient of a numpy broadcast)."""
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for i, s in enumerate(shape):
        if s == 1 and g.shape[i] != 1:
            g = g.sum(axis=i, keepdims=True)
    return g


def npax(axis):
    return None if axis is None else (tuple(axis) if isinstance(axis, list) else axis)


def var(x, axis, keepdim, correction):
    ax = npax(axis)
    n = x.size if ax is None else np.prod([x.shape[a] for a in (ax if isinstance(ax, tuple) else (ax,))])
    m = x.mean(axis=ax, keepdims=True)
    return ((x - m) ** 2).sum(axis=ax, keepdims=keepdim) / max(0, n - correction)


def logsumexp(x, axis, keepdim):
    ax = npax(axis)
    m = x.max(axis=ax, keepdims=True)
    r = np.log(np.exp(x - m).sum(axis=ax, keepdims=True)) + m
    return r if keepdim else (r.reshape(()) if ax is None else np.squeeze(r, axis=ax))


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def slice_(x, ranges):
    return x[tuple(slice(s, e, st) for s, e, st in ranges)]


UNARY = {
    "neg": np.negative, "reciprocal": np.reciprocal, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "exp": np.exp, "exp2": np.exp2, "log": np.log,
    "log2": np.log2, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "relu": lambda x: np.maximum(x, 0), "sigmoid": sigmoid, "tanh": np.tanh, "abs": np.abs,
    "trunc": np.trunc, "floor": np.floor, "ceil": np.ceil, "round": np.round, "sign": np.sign,
    "log10": np.log10, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "square": np.square,
}

BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
    "maximum": np.maximum, "minimum": np.minimum,
}
# binary ops whose cases are appended last (after the compositions), so earlier cases keep
# their inputs
MORE_BINARY = {"fmod": np.fmod, "copysign": np.copysign, "logaddexp": np.logaddexp}

# scalar operand on the right (`x op s`) or on the left (`s op x`: rsub, rdiv)
SCALAR = {
    "add": lambda x, s: x + s, "sub": lambda x, s: x - s, "mul": lambda x, s: x * s,
    "div": lambda x, s: x / s, "pow": lambda x, s: x ** s, "rsub": lambda x, s: s - x,
    "rdiv": lambda x, s: s / x, "maximum": np.maximum, "minimum": np.minimum,
}


def reference(op, args):
    """The op as a function of float64 arrays."""
    a = args
    if op in UNARY:
        return UNARY[op]
    if op == "scalar":
        return lambda x: SCALAR[a["fn"]](x, a["value"])
    if op in BINARY:
        return BINARY[op]
    if op in MORE_BINARY:
        return MORE_BINARY[op]
    if op == "einsum":
        return lambda *xs: np.einsum(a["formula"], *xs)
    if op == "conv2d":
        return lambda x, w, b=None: conv(x, w, b, a["groups"], a["stride"], a["dilation"], a["padding"])
    if op == "conv_transpose2d":
        return lambda x, w, b=None: conv_transpose(x, w, b, a["groups"], a["stride"], a["dilation"],
                                                   a["padding"], a["output_padding"])
    table = {
        "where": lambda x, y: np.where(np.array(a["cond"]["data"]).reshape(a["cond"]["shape"]), x, y),
        "clip": lambda x: np.clip(x, a["min"], a["max"]),
        "reshape": lambda x: x.reshape(a["shape"]),
        "permute": lambda x: x.transpose(a["order"]),
        "expand": lambda x: np.broadcast_to(x, [x.shape[i - (len(a["shape"]) - x.ndim)] if s == -1 else s
                                                for i, s in enumerate(a["shape"])]),
        "pad": lambda x: np.pad(x, a["pad"], constant_values=a["value"]),
        "shrink": lambda x: x[tuple(slice(s, e) for s, e in a["bounds"])],
        "flip": lambda x: np.flip(x, a["axis"]),
        "transpose": lambda x: np.swapaxes(x, a["dim0"], a["dim1"]),
        "flatten": lambda x: x.reshape(x.shape[:a["start_dim"]] + (-1,) + x.shape[a["end_dim"] + 1:]
                                       if a["end_dim"] != -1 else x.shape[:a["start_dim"]] + (-1,)),
        "squeeze": lambda x: np.squeeze(x, a["dim"]),
        "unsqueeze": lambda x: np.expand_dims(x, a["dim"]),
        "cat": lambda *xs: np.concatenate(xs, axis=a["dim"]),
        "stack": lambda *xs: np.stack(xs, axis=a["dim"]),
        "slice": lambda x: slice_(x, a["ranges"]),
        "sum": lambda x: x.sum(axis=npax(a["axis"]), keepdims=a["keepdim"]),
        "mean": lambda x: x.mean(axis=npax(a["axis"]), keepdims=a["keepdim"]),
        "prod": lambda x: x.prod(axis=npax(a["axis"]), keepdims=a["keepdim"]),
        "max": lambda x: x.max(axis=npax(a["axis"]), keepdims=a["keepdim"]),
        "min": lambda x: x.min(axis=npax(a["axis"]), keepdims=a["keepdim"]),
        "var": lambda x: var(x, a["axis"], a["keepdim"], a["correction"]),
        "std": lambda x: np.sqrt(var(x, a["axis"], a["keepdim"], a["correction"])),
        "logsumexp": lambda x: logsumexp(x, a["axis"], a["keepdim"]),
        "softmax": lambda x: softmax(x, a["axis"]),
        "log_softmax": lambda x: np.log(softmax(x, a["axis"])),
        "cumsum": lambda x: np.cumsum(x, axis=a["axis"]),
        "matmul": np.matmul,
        "linear": lambda x, w, b=None: x @ w + (0 if b is None else b),
        "shared": lambda x: x * np.sin(x) + np.exp(x) * x - x,
        "mlp": lambda x, w1, b1, w2: np.log(softmax(np.maximum(x @ w1 + b1, 0) @ w2, -1)),
        "reduce_broadcast": lambda x: x - x.max(axis=1, keepdims=True) + x.sum(axis=1, keepdims=True) * x,
    }
    return table[op]


# ---------------------------------------------------------------------------------------------
# convolutions, vectorized over positions (one slice per kernel tap) so finite differences are
# fast; checked once against gen_nn.py's loop-per-position references in `check_convs`

def conv(x, w, b, groups, stride, dilation, padding):
    n = w.ndim - 2
    s, d = tup(stride, n), tup(dilation, n)
    xp = pad_signed(x, grouped_pads(padding, n), 0.0)
    bs = xp.shape[0]
    cout, cin = w.shape[:2]
    ks, sp = w.shape[2:], xp.shape[2:]
    outs = [(sp[j] - d[j] * (ks[j] - 1) - 1) // s[j] + 1 for j in range(n)]
    rc = cout // groups
    out = np.zeros((bs, cout, *outs))
    for g in range(groups):
        xg = xp[:, g * cin:(g + 1) * cin]
        wg = w[g * rc:(g + 1) * rc]
        for k in np.ndindex(*ks):
            win = xg[(slice(None), slice(None)) + tuple(
                slice(k[j] * d[j], k[j] * d[j] + (outs[j] - 1) * s[j] + 1, s[j]) for j in range(n))]
            # (bs, cin, *outs) x (rc, cin) -> (bs, rc, *outs)
            out[:, g * rc:(g + 1) * rc] += np.einsum("bc...,oc->bo...", win, wg[(slice(None), slice(None)) + k])
    if b is not None:
        out = out + b.reshape(1, -1, *[1] * n)
    return out


def conv_transpose(x, w, b, groups, stride, dilation, padding, output_padding):
    """Scatter form, one kernel tap at a time: x[i]*w[k] lands at i*s + k*d - pad_before."""
    n = w.ndim - 2
    s, d, op = tup(stride, n), tup(dilation, n), tup(output_padding, n)
    pads = grouped_pads(padding, n)
    bs, cin_all = x.shape[:2]
    cin_g, cout_g = cin_all // groups, w.shape[1]
    ks, sp = w.shape[2:], x.shape[2:]
    full = [(sp[j] - 1) * s[j] + d[j] * (ks[j] - 1) + 1 + op[j] for j in range(n)]
    acc = np.zeros((bs, groups * cout_g, *full))
    for g in range(groups):
        xg = x[:, g * cin_g:(g + 1) * cin_g]
        wg = w[g * cin_g:(g + 1) * cin_g]
        for k in np.ndindex(*ks):
            dst = (slice(None), slice(g * cout_g, (g + 1) * cout_g)) + tuple(
                slice(k[j] * d[j], k[j] * d[j] + (sp[j] - 1) * s[j] + 1, s[j]) for j in range(n))
            acc[dst] += np.einsum("bc...,co->bo...", xg, wg[(slice(None), slice(None)) + k])
    sl = tuple(slice(pads[j][0], full[j] - pads[j][1]) for j in range(n))
    out = acc[(slice(None), slice(None)) + sl]
    if b is not None:
        out = out + b.reshape(1, -1, *[1] * n)
    return out


def check_convs():
    """The vectorized convolutions agree with gen_nn.py's independent loop references."""
    from gen_nn import conv_ref, conv_transpose_ref
    r = np.random.default_rng(1)
    for xs, ws, groups, stride, dil, pad in [((2, 4, 7, 6), (6, 2, 3, 2), 2, [2, 1], [1, 2], [1, 0, 2, 1]),
                                             ((1, 2, 5), (3, 2, 3), 1, 2, 1, -1)]:
        x, w, b = r.normal(size=xs), r.normal(size=ws), r.normal(size=ws[0])
        assert np.allclose(conv(x, w, b, groups, stride, dil, pad), conv_ref(x, w, b, groups, stride, dil, pad))
    for xs, ws, groups, stride, dil, pad, op in [((2, 4, 3, 4), (4, 2, 3, 2), 2, [2, 3], [2, 1], [0, 1, 1, 0], [1, 2]),
                                                 ((1, 2, 5), (2, 3, 3), 1, 3, 1, 1, 0)]:
        x, w, b = r.normal(size=xs), r.normal(size=ws), r.normal(size=ws[1] * groups)
        assert np.allclose(conv_transpose(x, w, b, groups, stride, dil, pad, op),
                           conv_transpose_ref(x, w, b, groups, stride, dil, pad, op))


# ---------------------------------------------------------------------------------------------
# analytic gradients for the tie cases (tinygrad's convention: ties split evenly)

def grad_maximum(w, x, y, sign=1.0):
    xs, ys = sign * x, sign * y
    g_x = w * ((xs > ys) + 0.5 * (xs == ys))
    g_y = w * ((ys > xs) + 0.5 * (xs == ys))
    return [unbroadcast(g_x, x.shape), unbroadcast(g_y, y.shape)]


def grad_max_reduce(w, x, axis, keepdim, sign=1.0):
    ax = npax(axis)
    xs = sign * x
    m = xs.max(axis=ax, keepdims=True)
    mask = (xs == m).astype(np.float64)
    count = mask.sum(axis=ax, keepdims=True)
    wk = w if keepdim else (w.reshape(m.shape))
    return [mask / count * wk]


# ---------------------------------------------------------------------------------------------

def finite_diff(loss, xs, h):
    grads = []
    for i, x in enumerate(xs):
        g = np.zeros_like(x)
        for j in np.ndindex(x.shape):
            xp = [a.copy() for a in xs]
            xm = [a.copy() for a in xs]
            xp[i][j] += h
            xm[i][j] -= h
            g[j] = (loss(*xp) - loss(*xm)) / (2 * h)
        grads.append(g)
    return grads


def tensor_json(a):
    a = np.asarray(a, dtype=np.float64)
    return {"shape": list(a.shape), "data": [float(v) for v in a.reshape(-1)]}


def case(name, op, args, inputs, analytic=None):
    """Adds a case; `inputs` are generators of float32 arrays (redrawn if the FD is unstable)."""
    assert name not in NAMES, name
    NAMES.add(name)
    fn = reference(op, args)
    for attempt in range(50):
        xs = [make() for make in inputs]
        out = np.asarray(fn(*xs), dtype=np.float64)
        w = _f32(rng.uniform(-1, 1, size=out.shape))

        def loss(*a):
            return float(np.sum(np.asarray(fn(*a), dtype=np.float64) * w))

        if analytic is not None:
            grads = analytic(w, *xs)
        else:
            grads = finite_diff(loss, xs, H_SMALL)
            check = finite_diff(loss, xs, H_LARGE)
            if not all(np.allclose(g, c, atol=AGREE_ATOL, rtol=AGREE_RTOL) for g, c in zip(grads, check)):
                REDRAWN[name] = attempt + 1
                continue
        assert all(np.isfinite(g).all() for g in grads), name
        CASES.append({
            "name": name, "op": op, "args": args,
            "inputs": [tensor_json(x) for x in xs],
            "w": tensor_json(w), "loss": loss(*xs),
            "grads": [tensor_json(g) for g in grads],
        })
        return
    raise RuntimeError(f"{name}: no stable inputs after 50 draws")


def build():
    s = (3, 4)
    # ---- unary ----
    for op, gen in [
        ("neg", uni(*s)), ("reciprocal", away(*s, kinks=(0.0,), margin=0.4)),
        ("sqrt", uni(*s, lo=0.3, hi=3.0)), ("rsqrt", uni(*s, lo=0.3, hi=3.0)),
        ("exp", uni(*s)), ("exp2", uni(*s)), ("log", uni(*s, lo=0.3, hi=3.0)),
        ("log2", uni(*s, lo=0.3, hi=3.0)), ("sin", uni(*s, lo=-4, hi=4)),
        ("cos", uni(*s, lo=-4, hi=4)), ("tan", uni(*s, lo=-1.2, hi=1.2)),
        ("relu", away(*s)), ("sigmoid", uni(*s, lo=-4, hi=4)), ("tanh", uni(*s)),
        ("abs", away(*s)), ("trunc", nonint(*s)), ("floor", nonint(*s)), ("ceil", nonint(*s)),
        ("round", nonint(*s)), ("sign", away(*s)),
    ]:
        case(op, op, {}, [gen])
    case("relu_5d", "relu", {}, [away(2, 1, 3, 1, 2)])

    # ---- binary, with broadcasting ----
    shapes = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((4,), (2, 1, 4))]
    for op in BINARY:
        for sa, sb in shapes:
            name = f"{op}_{'x'.join(map(str, sa))}_{'x'.join(map(str, sb))}"
            a, b = uni(*sa), uni(*sb)
            if op == "div":
                b = away(*sb, kinks=(0.0,), margin=0.4)
            if op == "pow":
                a, b = uni(*sa, lo=0.3, hi=2.5), uni(*sb, lo=-2.0, hi=2.0)
            case(name, op, {}, [a, b])
    # ties: even split (analytic)
    for sa, sb in [((3, 4), (3, 4)), ((3, 1), (1, 4))]:
        suffix = f"{'x'.join(map(str, sa))}_{'x'.join(map(str, sb))}"
        case(f"maximum_ties_{suffix}", "maximum", {}, [grid(*sa, lo=-1, hi=1), grid(*sb, lo=-1, hi=1)],
             analytic=lambda w, x, y: grad_maximum(w, x, y))
        case(f"minimum_ties_{suffix}", "minimum", {}, [grid(*sa, lo=-1, hi=1), grid(*sb, lo=-1, hi=1)],
             analytic=lambda w, x, y: grad_maximum(w, x, y, sign=-1.0))
    # a scalar operand
    for fn, value, gen in [
        ("add", 1.5, uni(*s)), ("sub", 0.75, uni(*s)), ("mul", -2.5, uni(*s)), ("div", 4.0, uni(*s)),
        ("rsub", 2.0, uni(*s)), ("rdiv", 2.0, away(*s, margin=0.4)), ("pow", 3.0, away(*s, margin=0.2)),
        ("pow", 2.0, away(*s, margin=0.2)), ("pow", 0.5, uni(*s, lo=0.3, hi=3.0)),
        ("pow", -1.5, uni(*s, lo=0.3, hi=3.0)), ("maximum", 0.25, away(*s, kinks=(0.25,))),
        ("minimum", -0.5, away(*s, kinks=(-0.5,))),
    ]:
        case(f"scalar_{fn}_{value}", "scalar", {"fn": fn, "value": value}, [gen])
    for sc, sx, sy in [((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), (3, 4)), ((4,), (3, 4), (1,))]:
        c = cond(*sc)
        case(f"where_{'x'.join(map(str, sc))}_{'x'.join(map(str, sx))}_{'x'.join(map(str, sy))}", "where",
             {"cond": {"shape": list(sc), "data": [bool(v) for v in c.reshape(-1)]}}, [uni(*sx), uni(*sy)])
    case("clip", "clip", {"min": -0.5, "max": 0.75}, [away(*s, kinks=(-0.5, 0.75))])

    # ---- movement ----
    t = (2, 3, 4)
    for name, op, args, shape in [
        ("reshape", "reshape", {"shape": [4, 6]}, t),
        ("reshape_infer", "reshape", {"shape": [-1, 2]}, t),
        ("permute", "permute", {"order": [2, 0, 1]}, t),
        ("expand", "expand", {"shape": [3, 4]}, (3, 1)),
        ("expand_new_dims", "expand", {"shape": [2, 3, 4]}, (4,)),
        ("expand_both", "expand", {"shape": [2, 3, 4]}, (2, 1, 1)),
        ("pad", "pad", {"pad": [[1, 0], [0, 2], [1, 1]], "value": 0.0}, t),
        ("pad_value", "pad", {"pad": [[0, 1], [2, 0]], "value": 1.5}, (3, 4)),
        ("shrink", "shrink", {"bounds": [[0, 1], [1, 3], [1, 4]]}, t),
        ("flip", "flip", {"axis": [0, 2]}, t),
        ("transpose", "transpose", {"dim0": 0, "dim1": 2}, t),
        ("flatten", "flatten", {"start_dim": 1, "end_dim": -1}, t),
        ("squeeze", "squeeze", {"dim": 1}, (3, 1, 4)),
        ("unsqueeze", "unsqueeze", {"dim": -1}, (3, 4)),
        ("slice_step", "slice", {"ranges": [[0, 3, 2], [1, 4, 1], [0, 4, 3]]}, (3, 4, 4)),
    ]:
        case(name, op, args, [uni(*shape)])
    case("cat_dim1", "cat", {"dim": 1}, [uni(2, 3), uni(2, 1), uni(2, 4)])
    case("cat_dim0", "cat", {"dim": 0}, [uni(2, 3), uni(1, 3)])
    case("stack_dim0", "stack", {"dim": 0}, [uni(3, 4), uni(3, 4)])
    case("stack_dim_last", "stack", {"dim": -1}, [uni(3, 4), uni(3, 4), uni(3, 4)])

    # ---- reductions ----
    for axis, keepdim in [(None, False), (1, False), ([0, 2], True), (-1, True)]:
        tag = "all" if axis is None else ("_".join(map(str, axis)) if isinstance(axis, list) else str(axis))
        tag += "_keep" if keepdim else ""
        args = {"axis": axis, "keepdim": keepdim}
        case(f"sum_{tag}", "sum", args, [uni(*t)])
        case(f"mean_{tag}", "mean", args, [uni(*t)])
        case(f"max_{tag}", "max", args, [uni(*t)])
        case(f"min_{tag}", "min", args, [uni(*t)])
        case(f"prod_{tag}", "prod", args, [away(*t, lo=-1.5, hi=1.5, margin=0.3)])
        case(f"logsumexp_{tag}", "logsumexp", args, [uni(*t)])
    for axis, keepdim in [(None, False), (1, True), ([0, 2], False)]:
        tag = "all" if axis is None else ("_".join(map(str, axis)) if isinstance(axis, list) else str(axis))
        case(f"max_ties_{tag}", "max", {"axis": axis, "keepdim": keepdim}, [grid(*t, lo=-1, hi=1)],
             analytic=lambda w, x, axis=axis, keepdim=keepdim: grad_max_reduce(w, x, axis, keepdim))
        case(f"min_ties_{tag}", "min", {"axis": axis, "keepdim": keepdim}, [grid(*t, lo=-1, hi=1)],
             analytic=lambda w, x, axis=axis, keepdim=keepdim: grad_max_reduce(w, x, axis, keepdim, -1.0))
    for axis, keepdim, corr in [(None, False, 1), (1, True, 1), ([0, 2], False, 0)]:
        tag = "all" if axis is None else ("_".join(map(str, axis)) if isinstance(axis, list) else str(axis))
        args = {"axis": axis, "keepdim": keepdim, "correction": corr}
        case(f"var_{tag}_c{corr}", "var", args, [uni(*t)])
        case(f"std_{tag}_c{corr}", "std", args, [uni(*t)])
    for axis in [-1, 0]:
        case(f"softmax_{axis}", "softmax", {"axis": axis}, [uni(*t)])
        case(f"log_softmax_{axis}", "log_softmax", {"axis": axis}, [uni(*t)])
    case("cumsum_1", "cumsum", {"axis": 1}, [uni(3, 5)])
    case("cumsum_0", "cumsum", {"axis": 0}, [uni(4, 2)])

    # ---- matmul / linear ----
    for sa, sb in [((3, 4), (4, 5)), ((2, 3, 4), (4, 2)), ((4,), (4, 3)), ((3, 4), (4,)),
                   ((2, 3, 4), (2, 4, 5)), ((4,), (4,))]:
        case(f"matmul_{'x'.join(map(str, sa))}_{'x'.join(map(str, sb))}", "matmul", {}, [uni(*sa), uni(*sb)])
    case("linear_bias", "linear", {}, [uni(3, 4), uni(4, 5), uni(5)])
    case("linear", "linear", {}, [uni(2, 3, 4), uni(4, 2)])

    # ---- compositions ----
    case("shared", "shared", {}, [uni(3, 4)])
    case("reduce_broadcast", "reduce_broadcast", {}, [uni(3, 4)])
    case("mlp", "mlp", {}, [uni(4, 5), uni(5, 6, lo=-1, hi=1), uni(6, lo=-0.5, hi=0.5),
                            uni(6, 3, lo=-1, hi=1)])

    # ---- tinygrad's mixin math (math.rs) ----
    for op, gen in [
        ("log10", uni(*s, lo=0.3, hi=3.0)), ("asin", uni(*s, lo=-0.9, hi=0.9)),
        ("acos", uni(*s, lo=-0.9, hi=0.9)), ("atan", uni(*s, lo=-3, hi=3)), ("square", uni(*s)),
    ]:
        case(op, op, {}, [gen])
    for sa, sb in [((3, 4), (3, 4)), ((3, 1), (1, 4))]:
        suffix = f"{'x'.join(map(str, sa))}_{'x'.join(map(str, sb))}"
        case(f"logaddexp_{suffix}", "logaddexp", {}, [uni(*sa), uni(*sb)])
        case(f"copysign_{suffix}", "copysign", {}, [uni(*sa), away(*sb, kinks=(0.0,), margin=0.2)])
        case(f"fmod_{suffix}", "fmod", {}, [uni(*sa, lo=-4, hi=4), away(*sb, kinks=(0.0,), margin=0.4)])
    case("einsum_matmul", "einsum", {"formula": "ij,jk->ik"}, [uni(3, 4), uni(4, 2)])
    case("einsum_trace_batch", "einsum", {"formula": "bii,bj->bj"}, [uni(2, 3, 3), uni(2, 4)])
    case("einsum_ellipsis", "einsum", {"formula": "...i,i->..."}, [uni(2, 3, 4), uni(4)])


def conv_cases():
    # (name, x shape, w shape, bias, groups, stride, dilation, padding): the overlapping windows
    # (kernel > stride, dilation) take the transposed-convolution input gradient, the others the
    # derived one; strides whose last window ends before the input test the output padding
    for name, xs, ws, has_b, groups, stride, dil, pad in [
        ("3x3", (2, 2, 5, 5), (3, 2, 3, 3), True, 1, 1, 1, 0),
        ("pad1", (1, 3, 4, 5), (2, 3, 3, 3), False, 1, 1, 1, 1),
        ("stride2_rem", (1, 2, 8, 8), (2, 2, 3, 3), True, 1, 2, 1, 1),
        ("stride3_rem2", (1, 1, 9, 8), (2, 1, 2, 3), False, 1, [3, 2], 1, 0),
        ("dilation2", (1, 2, 7, 7), (2, 2, 3, 2), False, 1, 1, 2, [1, 2]),
        ("groups2", (2, 4, 5, 5), (6, 2, 3, 3), True, 2, 1, 1, 0),
        ("depthwise", (1, 3, 5, 4), (3, 1, 3, 3), False, 3, 1, 1, 1),
        ("groups2_s2_d2", (1, 4, 9, 9), (4, 2, 2, 2), True, 2, 2, 2, 1),
        ("pad_flat4", (1, 2, 5, 6), (2, 2, 2, 3), False, 1, 1, 1, [1, 0, 2, 1]),
        ("neg_pad", (1, 1, 7, 7), (2, 1, 3, 3), False, 1, 1, 1, -1),
        ("pad_gt_kernel", (1, 1, 4, 4), (1, 1, 2, 2), False, 1, 1, 1, 3),
        ("k1x1", (2, 3, 4, 4), (2, 3, 1, 1), True, 1, 1, 1, 0),
        ("k_eq_stride", (1, 2, 6, 6), (2, 2, 2, 2), False, 1, 2, 1, 0),
        ("mnist_like", (2, 1, 9, 9), (3, 1, 5, 5), True, 1, 1, 1, 0),
        ("conv1d", (2, 3, 10), (4, 3, 3), True, 1, 2, 1, 1),
        ("conv3d", (1, 2, 4, 5, 4), (2, 2, 2, 3, 2), True, 1, [1, 2, 1], 1, 1),
    ]:
        gens = [uni(*xs), uni(*ws, lo=-1, hi=1)] + ([uni(ws[0])] if has_b else [])
        args = {"bias": has_b, "groups": groups, "stride": stride, "dilation": dil, "padding": pad}
        case(f"conv2d_{name}", "conv2d", args, gens)
    for name, xs, ws, has_b, groups, stride, dil, pad, op in [
        ("stride2_pad1_op1", (1, 2, 3, 3), (2, 3, 3, 3), True, 1, 2, 1, 1, 1),
        ("groups2_dil2", (1, 4, 3, 3), (4, 1, 2, 2), False, 2, 1, 2, 0, 0),
    ]:
        gens = [uni(*xs), uni(*ws, lo=-1, hi=1)] + ([uni(ws[1] * groups)] if has_b else [])
        args = {"bias": has_b, "groups": groups, "stride": stride, "dilation": dil, "padding": pad,
                "output_padding": op}
        case(f"conv_transpose2d_{name}", "conv_transpose2d", args, gens)


def main():
    check_convs()
    build()
    conv_cases()
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grads.json")
    with open(path, "w") as f:
        f.write("[\n")
        f.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in CASES))
        f.write("\n]\n")
    ops: dict[str, int] = {}
    for c in CASES:
        ops[c["op"]] = ops.get(c["op"], 0) + 1
    print(f"{len(CASES)} cases -> {path}")
    print(", ".join(f"{k}: {v}" for k, v in sorted(ops.items())))
    if REDRAWN:
        print("redrawn:", ", ".join(f"{k} ({v}x)" for k, v in sorted(REDRAWN.items())))


if __name__ == "__main__":
    main()
