#!/usr/bin/env python3
"""Generate tests/golden/cases.json: golden reference data for the Tensor ops.

Independent of tinygrad and of the Rust code: every expected output is computed with numpy in
float64 (int64 for integer ops) from inputs that were first rounded to their own dtype, then cast
to the output dtype. Semantics follow tinygrad's Tensor API (PyTorch where tinygrad is unclear).

Run from anywhere:  python3 tests/golden/gen_golden.py
Only numpy is needed. The output is deterministic for a given numpy version (seeded PCG64).

Each case is checked before it is written: the same reference function is re-evaluated on the raw
float32 inputs (numpy float32 arithmetic, i.e. a plausible float32 implementation) and must agree
with the float64 reference within a quarter of the Rust test's tolerance. A case whose random
inputs land too close to a discontinuity or a cancellation is redrawn with fresh inputs.
"""
from __future__ import annotations

import json
import math
import os
import sys

import numpy as np

SEED = 0x7196AD
rng = np.random.default_rng(SEED)

# Tolerance the Rust test uses for float32 outputs (ints/bools are exact).
ATOL, RTOL = 1e-6, 1e-3
# The float32 self-check must pass with this fraction of the tolerance.
SELF_CHECK_FRACTION = 0.25

NP_DT = {"float32": np.float32, "int32": np.int32, "bool": np.bool_, "uint8": np.uint8}
ABBR = {"float32": "f32", "int32": "i32", "bool": "bool", "uint8": "u8"}
INT_MIN, INT_MAX = -(2**31), 2**31 - 1

CASES: list[dict] = []
NAMES: set[str] = set()
REDRAWN: dict[str, int] = {}


# ---------------------------------------------------------------------------------------------
# input generators (all return arrays already in their final dtype)

def f32(shape, lo=-2.0, hi=2.0):
    return np.asarray(rng.uniform(lo, hi, size=shape)).astype(np.float32)


def f32_nonzero(shape, lo=-2.0, hi=2.0, minabs=0.25):
    a = np.asarray(rng.uniform(lo, hi, size=shape), dtype=np.float64).copy()
    bad = np.abs(a) < minabs
    while bad.any():
        a[bad] = rng.uniform(lo, hi, size=int(bad.sum()))
        bad = np.abs(a) < minabs
    return a.astype(np.float32)


def f32_q(shape, lo=-2.0, hi=2.0, step=0.5):
    """Floats on a grid (so ties/equalities/halves actually occur)."""
    k = rng.integers(int(round(lo / step)), int(round(hi / step)) + 1, size=shape)
    return np.asarray(k * step).astype(np.float32)


def i32(shape, lo=-10, hi=10):
    return np.asarray(rng.integers(lo, hi + 1, size=shape)).astype(np.int32)


def i32_nonzero(shape, lo=-10, hi=10):
    a = np.asarray(rng.integers(lo, hi + 1, size=shape)).copy()
    bad = a == 0
    while bad.any():
        a[bad] = rng.integers(lo, hi + 1, size=int(bad.sum()))
        bad = a == 0
    return a.astype(np.int32)


def boolean(shape, p=0.5):
    return np.asarray(rng.random(size=shape) < p)


def u8(shape, lo=0, hi=255):
    return np.asarray(rng.integers(lo, hi + 1, size=shape)).astype(np.uint8)


def dtname(a: np.ndarray) -> str:
    for k, v in NP_DT.items():
        if a.dtype == v:
            return k
    raise TypeError(a.dtype)


# ---------------------------------------------------------------------------------------------
# movement helpers shared by the movement ops and by "pre"

def np_expand(a, shape):
    shape = list(shape)
    nd = len(shape)
    src = [1] * (nd - a.ndim) + list(a.shape)
    shape = [src[i] if s == -1 else s for i, s in enumerate(shape)]
    return np.broadcast_to(a.reshape(src), shape)


def np_pad(a, pad, value):
    if a.ndim == 0:
        return a
    return np.pad(a, [tuple(p) for p in pad], mode="constant", constant_values=value)


def np_shrink(a, bounds):
    return a[tuple(slice(s, e) for s, e in bounds)]


def np_reshape(a, shape):
    return a.reshape(shape)


def apply_move(a, name, arg):
    if name == "reshape":
        return a.reshape(arg)
    if name == "permute":
        return np.transpose(a, arg)
    if name == "expand":
        return np_expand(a, arg)
    if name == "pad":
        return np_pad(a, arg, False if a.dtype == np.bool_ else 0)
    if name == "shrink":
        return np_shrink(a, arg)
    if name == "flip":
        return np.flip(a, axis=tuple(arg)) if a.ndim else a
    raise ValueError(name)


# ---------------------------------------------------------------------------------------------
# serialisation

def flat(a: np.ndarray, dt: str):
    v = np.asarray(a).reshape(-1)
    if dt == "bool":
        return [bool(x) for x in v]
    if dt in ("int32", "uint8"):
        return [int(x) for x in v]
    out = []
    for x in v:
        x = float(x)
        if math.isnan(x):
            out.append("nan")
        elif math.isinf(x):
            out.append("inf" if x > 0 else "-inf")
        else:
            out.append(x)  # repr of the exact float32 value: parses back bit-exactly
    return out


def tensor_json(a: np.ndarray, dt: str):
    return {"shape": [int(s) for s in a.shape], "dtype": dt, "data": flat(a, dt)}


# ---------------------------------------------------------------------------------------------
# the case builder

def widen(a: np.ndarray):
    if a.dtype == np.float32:
        return a.astype(np.float64)
    if a.dtype in (np.int32, np.uint8):
        return a.astype(np.int64)
    return a.copy()


def cast_out(r, dt: str, wrap=False):
    r = np.asarray(r)
    if dt == "float32":
        return r.astype(np.float32)
    if dt == "bool":
        assert r.dtype == np.bool_, r.dtype
        return r.astype(np.bool_)
    if dt == "int32":
        assert r.dtype.kind in "iub", r.dtype
        if r.size:
            assert r.min() >= INT_MIN and r.max() <= INT_MAX, "int32 overflow in reference"
        return r.astype(np.int32)
    if dt == "uint8":
        assert r.dtype.kind in "iub", r.dtype
        if r.size and not wrap:
            assert r.min() >= 0 and r.max() <= 255
        return r.astype(np.int64).astype(np.uint8)
    raise ValueError(dt)


def close_enough(emu, ref):
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
    tol = SELF_CHECK_FRACTION * (ATOL + RTOL * np.abs(ref[f]))
    return bool((np.abs(emu[f] - ref[f]) <= tol).all())


def add(name, op, args, make_inputs, fn, out_dt, *, wrap=False, check=True, tries=50):
    """make_inputs: () -> list of arrays (redrawn if the float32 self-check fails).
    fn: (*widened inputs) -> result (float64/int64/bool numpy array or scalar)."""
    name = name.replace("-", "m")
    assert name not in NAMES, f"duplicate case name {name}"
    NAMES.add(name)
    pre = args.get("pre")
    for _ in range(tries):
        inputs = make_inputs() if callable(make_inputs) else make_inputs
        wide = [widen(a) for a in inputs]
        if pre:
            for mname, marg in pre:
                wide[0] = apply_move(wide[0], mname, marg)
        with np.errstate(all="ignore"):
            ref = np.asarray(fn(*wide))
        out = cast_out(ref, out_dt, wrap=wrap)
        ok = True
        if check and out_dt == "float32" and any(a.dtype == np.float32 for a in inputs):
            raw = [a.copy() for a in inputs]
            if pre:
                for mname, marg in pre:
                    raw[0] = apply_move(raw[0], mname, marg)
            with np.errstate(all="ignore"):
                emu = np.asarray(fn(*raw)).astype(np.float32)
            ok = close_enough(emu, out)
        if ok:
            break
        REDRAWN[name] = REDRAWN.get(name, 0) + 1
        if not callable(make_inputs):
            raise RuntimeError(f"{name}: fixed inputs fail the float32 self-check")
    else:
        raise RuntimeError(f"{name}: could not draw inputs passing the float32 self-check")
    CASES.append({
        "name": name,
        "op": op,
        "args": args,
        "inputs": [tensor_json(a, dtname(a)) for a in inputs],
        "out": tensor_json(out, out_dt),
    })


def sh(shape) -> str:
    return "s" if len(shape) == 0 else "x".join(str(s) for s in shape)


def shapes_tag(*shapes) -> str:
    return "_".join(sh(s) for s in shapes)


# =============================================================================================
# unary

UNARY_SHAPES = [(), (0, 3), (1,), (3, 4), (2, 3, 4), (1, 3, 1)]


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


UNARY = {
    # op: (reference, float32 input generator, int32 input generator or None)
    "neg": (lambda x: -x, lambda s: f32(s), lambda s: i32(s)),
    "reciprocal": (lambda x: 1.0 / x, lambda s: f32_nonzero(s, -2, 2, 0.1), lambda s: i32_nonzero(s, -10, 10)),
    "sqrt": (np.sqrt, lambda s: f32(s, 0.0, 4.0), lambda s: i32(s, 0, 20)),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), lambda s: f32(s, 0.05, 4.0), lambda s: i32(s, 1, 20)),
    "exp": (np.exp, lambda s: f32(s), lambda s: i32(s, -5, 5)),
    "exp2": (np.exp2, lambda s: f32(s), lambda s: i32(s, -5, 5)),
    "log": (np.log, lambda s: f32(s, 0.05, 4.0), lambda s: i32(s, 1, 20)),
    "log2": (np.log2, lambda s: f32(s, 0.05, 4.0), lambda s: i32(s, 1, 20)),
    "sin": (np.sin, lambda s: f32(s), lambda s: i32(s, -10, 10)),
    "cos": (np.cos, lambda s: f32(s), lambda s: i32(s, -10, 10)),
    "tan": (np.tan, lambda s: f32(s, -1.4, 1.4), lambda s: i32(s, -1, 1)),
    "trunc": (np.trunc, lambda s: mixed_grid(s), None),
    "floor": (np.floor, lambda s: mixed_grid(s), None),
    "ceil": (np.ceil, lambda s: mixed_grid(s), None),
    "round": (np.round, lambda s: mixed_grid(s), None),  # numpy rounds half to even, as tinygrad
    "abs": (np.abs, lambda s: f32(s), lambda s: i32(s)),
    "sign": (lambda x: np.where(x == 0, 0, np.sign(x)).astype(x.dtype), lambda s: with_zeros(f32(s)), lambda s: i32(s, -3, 3)),
    "relu": (lambda x: np.where(x > 0, x, 0).astype(x.dtype), lambda s: with_zeros(f32(s)), lambda s: i32(s)),
    "sigmoid": (sigmoid, lambda s: f32(s, -6, 6), lambda s: i32(s, -5, 5)),
    "tanh": (np.tanh, lambda s: f32(s, -3, 3), lambda s: i32(s, -3, 3)),
}
# ops that keep an int dtype on int input (the rest promote int -> float32)
INT_PRESERVING = {"neg", "abs", "sign", "relu"}


def mixed_grid(s):
    """Half the values on a 0.5 grid (exact integers and .5 ties), half uniform, in [-4, 4]."""
    a = f32(s, -4.0, 4.0)
    g = f32_q(s, -4.0, 4.0, 0.5)
    m = boolean(s)
    return np.where(m, g, a).astype(np.float32)


def with_zeros(a):
    m = boolean(a.shape, 0.25)
    return np.where(m, np.float32(0), a).astype(a.dtype)


def gen_unary():
    for op, (fn, gf, gi) in UNARY.items():
        for s in UNARY_SHAPES:
            add(f"{op}_f32_{sh(s)}", op, {}, lambda s=s, gf=gf: [gf(s)], fn, "float32")
        if gi is not None:
            for s in [(3, 4), ()]:
                out_dt = "int32" if op in INT_PRESERVING else "float32"
                add(f"{op}_i32_{sh(s)}", op, {}, lambda s=s, gi=gi: [gi(s)], fn, out_dt)
    # wider argument ranges for the transcendental functions
    add("sin_f32_9_wide", "sin", {}, lambda: [f32((9,), -7.0, 7.0)], np.sin, "float32")
    add("cos_f32_9_wide", "cos", {}, lambda: [f32((9,), -7.0, 7.0)], np.cos, "float32")
    add("exp_f32_9_wide", "exp", {}, lambda: [f32((9,), -10.0, 10.0)], np.exp, "float32")
    add("log_f32_9_wide", "log", {}, lambda: [f32((9,), 1e-3, 1e3)], np.log, "float32")
    # exact special values
    add("sqrt_f32_4_exact", "sqrt", {}, [np.array([0, 1, 4, 9], np.float32)], np.sqrt, "float32")
    add("exp2_f32_5_exact", "exp2", {}, [np.array([-2, -1, 0, 1, 10], np.float32)], np.exp2, "float32")
    add("log2_f32_5_exact", "log2", {}, [np.array([0.25, 0.5, 1, 2, 1024], np.float32)], np.log2, "float32")
    add("round_f32_10_halves", "round", {},
        [np.array([-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997, 2.5000002], np.float32)], np.round, "float32")
    add("trunc_f32_8_halves", "trunc", {},
        [np.array([-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5], np.float32)], np.trunc, "float32")
    # bool inputs
    add("neg_bool_6", "neg", {}, lambda: [boolean((6,))], lambda x: np.logical_not(x), "bool")
    add("exp_bool_2x3", "exp", {}, lambda: [boolean((2, 3))], lambda x: np.exp(x.astype(np.float64)), "float32")
    add("sqrt_bool_4", "sqrt", {}, lambda: [boolean((4,))], lambda x: np.sqrt(x.astype(np.float64)), "float32")
    # logical_not (bool; float input is cast to bool first)
    add("logical_not_bool_3x4", "logical_not", {}, lambda: [boolean((3, 4))], np.logical_not, "bool")
    add("logical_not_f32_6", "logical_not", {}, lambda: [with_zeros(f32((6,)))], lambda x: x == 0, "bool")


# =============================================================================================
# binary

BIN_PAIRS = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (2, 3)), ((2, 0, 3), (1, 3)), ((1,), (5,)),
             ((2, 3, 4), (4,)), ((4, 1, 3), (2, 1))]
BIN_PAIRS_SHORT = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (5,)), ((2, 0, 3), (3,))]


def tag2(a, b):
    return shapes_tag(a, b)


def gen_binary():
    arith = {"add": np.add, "sub": np.subtract, "mul": np.multiply}
    for op, fn in arith.items():
        for a, b in BIN_PAIRS:
            add(f"{op}_f32_{tag2(a, b)}", op, {}, lambda a=a, b=b: [f32(a), f32(b)], fn, "float32")
        for a, b in [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (2, 2))]:
            add(f"{op}_i32_{tag2(a, b)}", op, {}, lambda a=a, b=b: [i32(a, -100, 100), i32(b, -100, 100)], fn, "int32")
        # promotion
        add(f"{op}_f32_i32_3x4_4", op, {}, lambda: [f32((3, 4)), i32((4,))], fn, "float32")
        add(f"{op}_i32_bool_2x3_2x3", op, {}, lambda: [i32((2, 3)), boolean((2, 3))], fn, "int32")
        add(f"{op}_u8_i32_5_5", op, {}, lambda: [u8((5,), 0, 100), i32((5,))], fn, "int32")

    # true division
    div = lambda x, y: x / y
    for a, b in BIN_PAIRS:
        add(f"div_f32_{tag2(a, b)}", "div", {}, lambda a=a, b=b: [f32(a), f32_nonzero(b)], div, "float32")
    add("div_i32_3x4_3x4", "div", {}, lambda: [i32((3, 4)), i32_nonzero((3, 4))],
        lambda x, y: x.astype(np.float64) / y, "float32")
    add("div_i32_s_4", "div", {}, lambda: [i32(()), i32_nonzero((4,))],
        lambda x, y: x.astype(np.float64) / y, "float32")
    add("div_f32_i32_2x3_3", "div", {}, lambda: [f32((2, 3)), i32_nonzero((3,))], div, "float32")
    add("div_bool_f32_4_4", "div", {}, lambda: [boolean((4,)), f32_nonzero((4,))],
        lambda x, y: x.astype(np.float64) / y, "float32")

    # rounding division
    def far_from_int_quot(a_shape, b_shape):
        def make():
            for _ in range(1000):
                x, y = f32(a_shape, -6, 6), f32_nonzero(b_shape, -2, 2, 0.25)
                q = x.astype(np.float64) / y.astype(np.float64)
                if q.size == 0 or np.min(np.abs(q - np.round(q))) > 1e-3:
                    return [x, y]
            raise RuntimeError("could not draw")
        return make

    def itrunc(x, y):
        q = np.abs(x) // np.abs(y)
        return np.where((x < 0) != (y < 0), -q, q)

    for mode, ffn, ifn in [("trunc", lambda x, y: np.trunc(x / y), itrunc),
                           ("floor", lambda x, y: np.floor(x / y), lambda x, y: np.floor_divide(x, y))]:
        for a, b in BIN_PAIRS_SHORT + [((2, 3), (2, 3))]:
            add(f"div_{mode}_f32_{tag2(a, b)}", "div", {"rounding_mode": mode}, far_from_int_quot(a, b), ffn, "float32")
        for a, b in [((4, 5), (4, 5)), ((3, 1), (1, 4)), ((), (6,))]:
            add(f"div_{mode}_i32_{tag2(a, b)}", "div", {"rounding_mode": mode},
                lambda a=a, b=b: [i32(a, -20, 20), i32_nonzero(b, -6, 6)], ifn, "int32")
    # exact sign combinations
    xs = np.array([7, -7, 7, -7, 6, -6, 0, 1, -1], np.int32)
    ys = np.array([2, 2, -2, -2, 3, 3, 5, -5, 5], np.int32)
    add("div_trunc_i32_9_signs", "div", {"rounding_mode": "trunc"}, [xs, ys], itrunc, "int32")
    add("div_floor_i32_9_signs", "div", {"rounding_mode": "floor"}, [xs, ys], np.floor_divide, "int32")

    # idiv: integer division truncating toward zero (C semantics)
    add("idiv_i32_9_signs", "idiv", {}, [xs, ys], itrunc, "int32")
    for a, b in [((4, 5), (4, 5)), ((3, 1), (1, 4)), ((), (6,)), ((2, 0), (1,)), ((2, 3, 2), (2,))]:
        add(f"idiv_i32_{tag2(a, b)}", "idiv", {}, lambda a=a, b=b: [i32(a, -20, 20), i32_nonzero(b, -6, 6)], itrunc, "int32")

    # mod: Python-style (result has the sign of the divisor)
    add("mod_i32_9_signs", "mod", {}, [xs, ys], np.mod, "int32")
    for a, b in [((4, 5), (4, 5)), ((3, 1), (1, 4)), ((), (6,)), ((2, 0), (1,))]:
        add(f"mod_i32_{tag2(a, b)}", "mod", {}, lambda a=a, b=b: [i32(a, -20, 20), i32_nonzero(b, -6, 6)], np.mod, "int32")
    fmod_ref = lambda x, y: x - np.floor(x / y) * y
    for a, b in [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (5,)), ((0, 2), (2,))]:
        add(f"mod_f32_{tag2(a, b)}", "mod", {}, far_from_int_quot(a, b), fmod_ref, "float32")
    add("mod_f32_8_signs", "mod", {},
        [np.array([5.5, -5.5, 5.5, -5.5, 0.75, -0.75, 3.25, -1.25], np.float32),
         np.array([2.0, 2.0, -2.0, -2.0, 0.5, 0.5, -1.5, 1.0], np.float32)], fmod_ref, "float32")

    # pow
    for a, b in [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (5,)), ((0, 2), (2,)), ((6,), ())]:
        add(f"pow_f32_{tag2(a, b)}", "pow", {}, lambda a=a, b=b: [f32(a, 0.1, 2.5), f32(b, -2, 2)], np.power, "float32")
    add("pow_f32_intexp_3x4_3x4", "pow", {},
        lambda: [f32_nonzero((3, 4), -2, 2, 0.1), f32_q((3, 4), -2, 3, 1.0)], np.power, "float32")
    add("pow_f32_intexp_5_s", "pow", {}, lambda: [f32((5,), -2, 2), np.array(3, np.float32)], np.power, "float32")
    add("pow_f32_zero_4_4", "pow", {},
        [np.array([0, 0, 2, -2], np.float32), np.array([0, 2, 0, 0], np.float32)], np.power, "float32")
    add("pow_f32_negbase_frac_3_3", "pow", {},
        [np.array([-2, -0.5, 2], np.float32), np.array([0.5, 1.5, 0.5], np.float32)], np.power, "float32")
    add("pow_i32_3x4_3x4", "pow", {}, lambda: [i32((3, 4), -4, 4), i32((3, 4), 0, 3)], np.power, "int32")
    add("pow_i32_5_s", "pow", {}, lambda: [i32((5,), -5, 5), np.array(2, np.int32)], np.power, "int32")

    # maximum / minimum
    for op, fn in [("maximum", np.maximum), ("minimum", np.minimum)]:
        for a, b in [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (5,)), ((2, 0, 3), (3,))]:
            add(f"{op}_f32_{tag2(a, b)}", op, {}, lambda a=a, b=b: [f32_q(a, -2, 2, 0.5), f32_q(b, -2, 2, 0.5)], fn, "float32")
        add(f"{op}_f32_uniform_2x3_2x3", op, {}, lambda: [f32((2, 3)), f32((2, 3))], fn, "float32")
        add(f"{op}_i32_3x4_3x4", op, {}, lambda: [i32((3, 4), -5, 5), i32((3, 4), -5, 5)], fn, "int32")
        add(f"{op}_i32_3x1_1x4", op, {}, lambda: [i32((3, 1), -5, 5), i32((1, 4), -5, 5)], fn, "int32")
        add(f"{op}_f32_i32_2x3_3", op, {}, lambda: [f32_q((2, 3), -4, 4, 0.5), i32((3,), -4, 4)], fn, "float32")

    # comparisons
    cmps = {"cmplt": np.less, "cmpgt": np.greater, "cmple": np.less_equal, "cmpge": np.greater_equal,
            "cmpeq": np.equal, "cmpne": np.not_equal}
    for op, fn in cmps.items():
        for a, b in [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (6,)), ((2, 0, 3), (3,))]:
            add(f"{op}_f32_{tag2(a, b)}", op, {}, lambda a=a, b=b: [f32_q(a, -1, 1, 0.5), f32_q(b, -1, 1, 0.5)], fn, "bool")
        add(f"{op}_i32_3x4_3x4", op, {}, lambda: [i32((3, 4), -2, 2), i32((3, 4), -2, 2)], fn, "bool")
        add(f"{op}_bool_2x2_2x2", op, {},
            [np.array([[False, False], [True, True]]), np.array([[False, True], [False, True]])], fn, "bool")
        add(f"{op}_i32_f32_2x3_3", op, {}, lambda: [i32((2, 3), -2, 2), f32_q((3,), -2, 2, 0.5)], fn, "bool")

    # logical ops on bool
    logic = {"logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor}
    for op, fn in logic.items():
        add(f"{op}_bool_2x2_2x2", op, {},
            [np.array([[False, False], [True, True]]), np.array([[False, True], [False, True]])], fn, "bool")
        for a, b in [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (5,)), ((0, 2), (2,))]:
            add(f"{op}_bool_{tag2(a, b)}", op, {}, lambda a=a, b=b: [boolean(a), boolean(b)], fn, "bool")

    # bitwise ops on int32 (two's complement, negative values included)
    bit = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}
    for op, fn in bit.items():
        for a, b in [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (5,)), ((0, 2), (2,))]:
            add(f"{op}_i32_{tag2(a, b)}", op, {}, lambda a=a, b=b: [i32(a, -1000, 1000), i32(b, -1000, 1000)], fn, "int32")
        add(f"{op}_bool_2x2_2x2", op, {},
            [np.array([[False, False], [True, True]]), np.array([[False, True], [False, True]])], fn, "bool")

    # shifts on int32 by 0..4 (rshift is arithmetic: floor division by 2**k)
    for op, fn in [("lshift", np.left_shift), ("rshift", np.right_shift)]:
        for a, b in [((3, 5), (3, 5)), ((3, 1), (1, 5)), ((6,), ()), ((0, 2), (2,))]:
            add(f"{op}_i32_{tag2(a, b)}", op, {}, lambda a=a, b=b: [i32(a, -100, 100), i32(b, 0, 4)], fn, "int32")
        add(f"{op}_i32_8_exact", op, {},
            [np.array([1, -1, 7, -7, 100, -100, 0, 2147483], np.int32), np.array([0, 1, 2, 2, 3, 3, 4, 4], np.int32)],
            fn, "int32")


# =============================================================================================
# ternary

def gen_ternary():
    wh = lambda c, x, y: np.where(c, x, y)
    for c, a, b in [((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), ()), ((2, 0, 3), (3,), (1,)), ((), (2, 2), (2, 2)),
                    ((4,), (2, 1), (1, 4))]:
        add(f"where_f32_{shapes_tag(c, a, b)}", "where", {}, lambda c=c, a=a, b=b: [boolean(c), f32(a), f32(b)], wh, "float32")
    add("where_i32_3x4_3x4_3x4", "where", {}, lambda: [boolean((3, 4)), i32((3, 4)), i32((3, 4))], wh, "int32")
    add("where_i32_2x3_3_s", "where", {}, lambda: [boolean((2, 3)), i32((3,)), i32(())], wh, "int32")
    add("where_f32_i32_2x3_2x3_2x3", "where", {}, lambda: [boolean((2, 3)), f32((2, 3)), i32((2, 3))], wh, "float32")
    add("where_bool_2x3_2x3_2x3", "where", {}, lambda: [boolean((2, 3)), boolean((2, 3)), boolean((2, 3))], wh, "bool")

    def clipf(lo, hi):
        def f(x):
            r = x
            if lo is not None:
                r = np.where(r < lo, lo, r)
            if hi is not None:
                r = np.where(r > hi, hi, r)
            return r.astype(x.dtype)
        return f
    for s, lo, hi in [((3, 4), -1.0, 1.0), ((), -0.5, 0.5), ((0, 3), -1.0, 1.0), ((2, 3, 4), 0.0, 1.5), ((7,), -0.25, -0.25)]:
        add(f"clip_f32_{sh(s)}_{lo}_{hi}", "clip", {"min": lo, "max": hi}, lambda s=s: [f32(s)], clipf(lo, hi), "float32")
    add("clip_f32_6_min_only", "clip", {"min": 0.0, "max": None}, lambda: [f32((6,))], clipf(0.0, None), "float32")
    add("clip_f32_6_max_only", "clip", {"min": None, "max": 0.5}, lambda: [f32((6,))], clipf(None, 0.5), "float32")
    add("clip_i32_3x4_-3_3", "clip", {"min": -3, "max": 3}, lambda: [i32((3, 4))], clipf(-3, 3), "int32")
    add("clip_i32_s_0_5", "clip", {"min": 0, "max": 5}, [np.array(-7, np.int32)], clipf(0, 5), "int32")


# =============================================================================================
# cast

def gen_cast():
    specs = [
        ("float32", "int32", lambda s: f32(s, -20, 20), lambda x: np.trunc(x).astype(np.int64)),
        ("float32", "bool", lambda s: with_zeros(f32(s)), lambda x: x != 0),
        ("float32", "uint8", lambda s: f32(s, 0, 255.9), lambda x: np.trunc(x).astype(np.int64)),
        ("float32", "float32", lambda s: f32(s), lambda x: x),
        ("int32", "float32", lambda s: i32(s, -1000, 1000), lambda x: x.astype(np.float64)),
        ("int32", "bool", lambda s: i32(s, -2, 2), lambda x: x != 0),
        ("int32", "uint8", lambda s: i32(s, -300, 300), lambda x: x & 0xFF),
        ("int32", "int32", lambda s: i32(s), lambda x: x),
        ("bool", "float32", lambda s: boolean(s), lambda x: x.astype(np.float64)),
        ("bool", "int32", lambda s: boolean(s), lambda x: x.astype(np.int64)),
        ("bool", "uint8", lambda s: boolean(s), lambda x: x.astype(np.int64)),
        ("uint8", "float32", lambda s: u8(s), lambda x: x.astype(np.float64)),
        ("uint8", "int32", lambda s: u8(s), lambda x: x),
        ("uint8", "bool", lambda s: u8(s, 0, 3), lambda x: x != 0),
    ]
    for src, dst, g, fn in specs:
        for s in [(3, 4), ()]:
            add(f"cast_{ABBR[src]}_to_{ABBR[dst]}_{sh(s)}", "cast", {"dtype": dst}, lambda s=s, g=g: [g(s)], fn, dst,
                wrap=(src == "int32" and dst == "uint8"))
    add("cast_f32_to_i32_0x2", "cast", {"dtype": "int32"}, lambda: [f32((0, 2))], lambda x: x.astype(np.int64), "int32")
    add("cast_f32_to_i32_8_exact", "cast", {"dtype": "int32"},
        [np.array([-2.5, -1.5, -0.5, -0.0, 0.5, 1.5, 2.9999998, -2.9999998], np.float32)],
        lambda x: np.trunc(x).astype(np.int64), "int32")
    add("cast_f32_to_bool_5_exact", "cast", {"dtype": "bool"},
        [np.array([0.0, -0.0, 1e-30, -2.0, float("nan")], np.float32)], lambda x: x != 0, "bool")


# =============================================================================================
# movement

def gen_movement():
    def mv(name, op, args, make, fn, dt="float32"):
        add(name, op, args, make, fn, dt)

    # reshape
    for src, dst in [((3, 4), (4, 3)), ((3, 4), (12,)), ((2, 3, 4), (6, -1)), ((12,), (2, -1, 3)), ((), (1, 1)),
                     ((1, 1), ()), ((2, 0, 3), (0, 6)), ((6,), (1, 6, 1)), ((2, 3), (-1,))]:
        mv(f"reshape_f32_{sh(src)}_to_{sh(dst)}", "reshape", {"shape": list(dst)}, lambda src=src: [f32(src)],
           lambda x, dst=dst: x.reshape(dst))
    mv("reshape_i32_2x3_to_3x2", "reshape", {"shape": [3, 2]}, lambda: [i32((2, 3))], lambda x: x.reshape(3, 2), "int32")

    # permute
    for src, order in [((3, 4), [1, 0]), ((2, 3, 4), [2, 0, 1]), ((2, 3, 4), [1, 2, 0]), ((2, 1, 3, 2), [3, 1, 0, 2]),
                       ((2, 0, 3), [2, 0, 1]), ((5,), [0]), ((), [])]:
        mv(f"permute_f32_{sh(src)}_{''.join(map(str, order)) or 'none'}", "permute", {"order": order},
           lambda src=src: [f32(src)], lambda x, order=order: np.transpose(x, order))
    mv("permute_bool_2x3_10", "permute", {"order": [1, 0]}, lambda: [boolean((2, 3))], lambda x: x.T, "bool")

    # expand
    for src, dst in [((3, 1), (3, 4)), ((1,), (5,)), ((3, 1), (2, 3, 4)), ((), (2, 3)), ((1, 4), (0, 4)),
                     ((2, 1, 1), (2, 3, 2)), ((3, 1), (-1, 4)), ((4,), (3, 4))]:
        mv(f"expand_f32_{sh(src)}_to_{sh(dst).replace('-1', 'm1')}", "expand", {"shape": list(dst)},
           lambda src=src: [f32(src)], lambda x, dst=dst: np_expand(x, dst))
    mv("expand_i32_1x3_to_2x3", "expand", {"shape": [2, 3]}, lambda: [i32((1, 3))], lambda x: np_expand(x, (2, 3)), "int32")

    # pad (constant)
    for src, pad, val in [((3, 4), [[1, 0], [2, 1]], 0.0), ((5,), [[2, 3]], 1.5), ((2, 3, 2), [[0, 0], [1, 1], [0, 2]], -1.0),
                          ((0, 3), [[1, 1], [0, 0]], 2.0), ((2, 2), [[0, 0], [0, 0]], 0.0), ((1, 1), [[3, 0], [0, 3]], 0.0)]:
        tag = "_".join(f"{b}{a}" for b, a in pad)
        mv(f"pad_f32_{sh(src)}_{tag}_v{val}", "pad", {"pad": pad, "value": val}, lambda src=src: [f32(src)],
           lambda x, pad=pad, val=val: np_pad(x, pad, val))
    mv("pad_i32_2x3_11_01_v7", "pad", {"pad": [[1, 1], [0, 1]], "value": 7}, lambda: [i32((2, 3))],
       lambda x: np_pad(x, [[1, 1], [0, 1]], 7), "int32")
    mv("pad_bool_3_12_vfalse", "pad", {"pad": [[1, 2]], "value": False}, lambda: [boolean((3,))],
       lambda x: np_pad(x, [[1, 2]], False), "bool")

    # shrink
    for src, bounds in [((4, 5), [[1, 3], [0, 5]]), ((6,), [[2, 5]]), ((2, 3, 4), [[0, 1], [1, 3], [1, 4]]),
                        ((4, 5), [[2, 2], [1, 4]]), ((3, 3), [[0, 3], [0, 3]]), ((5, 1), [[4, 5], [0, 1]])]:
        tag = "_".join(f"{s}{e}" for s, e in bounds)
        mv(f"shrink_f32_{sh(src)}_{tag}", "shrink", {"bounds": bounds}, lambda src=src: [f32(src)],
           lambda x, bounds=bounds: np_shrink(x, bounds))
    mv("shrink_i32_3x4_12_13", "shrink", {"bounds": [[1, 2], [1, 3]]}, lambda: [i32((3, 4))],
       lambda x: np_shrink(x, [[1, 2], [1, 3]]), "int32")

    # flip
    for src, axis in [((5,), [0]), ((3, 4), [0]), ((3, 4), [1]), ((3, 4), [0, 1]), ((2, 3, 4), [-1]), ((2, 3, 4), [0, 2]),
                      ((0, 3), [1]), ((1, 3), [0])]:
        mv(f"flip_f32_{sh(src)}_{'_'.join(str(a).replace('-', 'm') for a in axis)}", "flip", {"axis": axis},
           lambda src=src: [f32(src)], lambda x, axis=axis: np.flip(x, axis=tuple(axis)))
    mv("flip_bool_2x3_1", "flip", {"axis": [1]}, lambda: [boolean((2, 3))], lambda x: np.flip(x, 1), "bool")

    # transpose
    for src, d0, d1 in [((3, 4), 0, 1), ((2, 3, 4), 0, 2), ((2, 3, 4), -1, -2), ((2, 3), 1, 1), ((0, 2), 0, 1)]:
        mv(f"transpose_f32_{sh(src)}_{d0}_{d1}".replace("-", "m"), "transpose", {"dim0": d0, "dim1": d1},
           lambda src=src: [f32(src)], lambda x, d0=d0, d1=d1: np.swapaxes(x, d0, d1))

    # flatten
    for src, s, e in [((2, 3, 4), 0, -1), ((2, 3, 4), 1, 2), ((2, 3, 4), 0, 1), ((2, 3, 4, 2), 1, -2), ((), 0, -1),
                      ((2, 0, 3), 0, -1), ((3,), 0, 0)]:
        def ref(x, s=s, e=e):
            if x.ndim == 0:
                return x.reshape(1)
            s2, e2 = s % x.ndim, e % x.ndim
            return x.reshape(x.shape[:s2] + (int(np.prod(x.shape[s2:e2 + 1])),) + x.shape[e2 + 1:])
        mv(f"flatten_f32_{sh(src)}_{s}_{e}".replace("-", "m"), "flatten", {"start_dim": s, "end_dim": e},
           lambda src=src: [f32(src)], ref)

    # squeeze / unsqueeze
    def squeeze(x, d):
        if d is None:
            return x.reshape([s for s in x.shape if s != 1])
        if x.ndim == 0:
            return x
        d = d % x.ndim
        return x if x.shape[d] != 1 else x.reshape(x.shape[:d] + x.shape[d + 1:])
    for src, d in [((1, 3, 1), 0), ((1, 3, 1), -1), ((1, 3, 1), None), ((3, 4), 0), ((1,), 0), ((2, 1, 0), 1), ((1, 1), None)]:
        mv(f"squeeze_f32_{sh(src)}_{d}".replace("-", "m"), "squeeze", {"dim": d}, lambda src=src: [f32(src)],
           lambda x, d=d: squeeze(x, d))
    for src, d in [((3, 4), 0), ((3, 4), 1), ((3, 4), 2), ((3, 4), -1), ((), 0), ((0,), 0), ((2, 3), -3)]:
        mv(f"unsqueeze_f32_{sh(src)}_{d}".replace("-", "m"), "unsqueeze", {"dim": d}, lambda src=src: [f32(src)],
           lambda x, d=d: np.expand_dims(x, d))
    mv("unsqueeze_i32_3_0", "unsqueeze", {"dim": 0}, lambda: [i32((3,))], lambda x: x[None], "int32")

    # cat / stack
    for shapes, d in [([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1), (2, 2)], 1), ([(2, 3), (2, 3)], -1), ([(3,), (0,), (2,)], 0),
                      ([(2, 2, 2), (2, 1, 2), (2, 3, 2)], 1), ([(1, 4), (1, 4), (1, 4)], 0), ([(2, 0), (2, 3)], 1)]:
        mv(f"cat_f32_{shapes_tag(*shapes)}_d{d}".replace("-", "m"), "cat", {"dim": d},
           lambda shapes=shapes: [f32(s) for s in shapes], lambda *xs, d=d: np.concatenate(xs, axis=d))
    mv("cat_i32_2_3_d0", "cat", {"dim": 0}, lambda: [i32((2,)), i32((3,))], lambda *xs: np.concatenate(xs), "int32")
    mv("cat_bool_1x2_2x2_d0", "cat", {"dim": 0}, lambda: [boolean((1, 2)), boolean((2, 2))],
       lambda *xs: np.concatenate(xs), "bool")
    for shapes, d in [([(3,), (3,)], 0), ([(2, 3), (2, 3), (2, 3)], 1), ([(2, 3), (2, 3)], -1), ([(2, 3), (2, 3)], 2),
                      ([(), (), ()], 0), ([(0, 2), (0, 2)], 1)]:
        mv(f"stack_f32_{shapes_tag(*shapes)}_d{d}".replace("-", "m"), "stack", {"dim": d},
           lambda shapes=shapes: [f32(s) for s in shapes], lambda *xs, d=d: np.stack(xs, axis=d))
    mv("stack_i32_2_2_d1", "stack", {"dim": 1}, lambda: [i32((2,)), i32((2,))], lambda *xs: np.stack(xs, 1), "int32")


# =============================================================================================
# reductions

def ax_tuple(x, axis):
    if axis is None:
        return tuple(range(x.ndim))
    if isinstance(axis, int):
        axis = [axis]
    return tuple(a % x.ndim for a in axis) if x.ndim else ()


def r_sum(x, axis, keepdim):
    return np.sum(x, axis=ax_tuple(x, axis), keepdims=keepdim)


def r_prod(x, axis, keepdim):
    return np.prod(x, axis=ax_tuple(x, axis), keepdims=keepdim)


def r_max(x, axis, keepdim):
    init = -np.inf if x.dtype.kind == "f" else (False if x.dtype == np.bool_ else INT_MIN)
    return np.max(x, axis=ax_tuple(x, axis), keepdims=keepdim, initial=init)


def r_min(x, axis, keepdim):
    init = np.inf if x.dtype.kind == "f" else (True if x.dtype == np.bool_ else INT_MAX)
    return np.min(x, axis=ax_tuple(x, axis), keepdims=keepdim, initial=init)


def n_reduced(x, axis):
    return int(np.prod([x.shape[a] for a in ax_tuple(x, axis)]))


def r_mean(x, axis, keepdim):
    s = np.sum(x.astype(np.float64) if x.dtype.kind != "f" else x, axis=ax_tuple(x, axis), keepdims=keepdim)
    return s / n_reduced(x, axis)


def r_var(x, axis, keepdim, correction=1):
    xf = x.astype(np.float64) if x.dtype.kind != "f" else x
    ax = ax_tuple(x, axis)
    n = n_reduced(x, axis)
    m = np.sum(xf, axis=ax, keepdims=True) / n if n else np.full([1 if i in ax else s for i, s in enumerate(x.shape)], np.nan)
    sq = np.sum((xf - m) ** 2, axis=ax, keepdims=keepdim)
    return sq / max(0, n - correction)


def r_std(x, axis, keepdim, correction=1):
    return np.sqrt(r_var(x, axis, keepdim, correction))


def r_any(x, axis, keepdim):
    return np.any(x != 0, axis=ax_tuple(x, axis), keepdims=keepdim)


def r_all(x, axis, keepdim):
    return np.all(x != 0, axis=ax_tuple(x, axis), keepdims=keepdim)


def r_argmax(x, axis, keepdim):
    if axis is None:
        return np.asarray(np.argmax(x.reshape(-1))).astype(np.int64)
    return np.argmax(x, axis=axis % x.ndim, keepdims=keepdim).astype(np.int64)


def r_argmin(x, axis, keepdim):
    if axis is None:
        return np.asarray(np.argmin(x.reshape(-1))).astype(np.int64)
    return np.argmin(x, axis=axis % x.ndim, keepdims=keepdim).astype(np.int64)


def softmax(x, axis):
    if x.ndim == 0:
        return np.ones_like(x)
    m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax(x, axis):
    if x.ndim == 0:
        return np.zeros_like(x)
    m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    return (x - m) - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def logsumexp(x, axis, keepdim):
    ax = ax_tuple(x, axis)
    m = np.max(x, axis=ax, keepdims=True, initial=-np.inf)
    r = np.log(np.sum(np.exp(x - m), axis=ax, keepdims=True)) + m
    return r if keepdim else r.reshape([s for i, s in enumerate(x.shape) if i not in ax])


def axtag(axis):
    if axis is None:
        return "all"
    if isinstance(axis, int):
        return str(axis).replace("-", "m")
    return "".join(str(a).replace("-", "m") for a in axis)


RED_SPECS = [  # (shape, axis, keepdim)
    ((3, 4), None, False), ((3, 4), 0, False), ((3, 4), 1, True), ((3, 4), -1, False), ((2, 3, 4), [0, 2], False),
    ((2, 3, 4), [-1, 0], True), ((2, 3, 4), 1, False), ((), None, False), ((5,), 0, True), ((1, 5), 0, False),
    ((0, 3), 0, False), ((0, 3), 1, False), ((0, 3), None, True), ((2, 1, 3), 1, True),
]


def gen_reduce():
    def rcase(op, fn, dt_in, gen, out_dt, specs, extra_args=None, name_extra=""):
        for s, axis, keepdim in specs:
            args = {"axis": axis, "keepdim": keepdim}
            if extra_args:
                args.update(extra_args)
            kw = dict(extra_args or {})
            add(f"{op}_{ABBR[dt_in]}_{sh(s)}_{axtag(axis)}{'_k' if keepdim else ''}{name_extra}", op, args,
                lambda s=s: [gen(s)], lambda x, axis=axis, keepdim=keepdim, kw=kw: fn(x, axis, keepdim, **kw), out_dt)

    rcase("sum", r_sum, "float32", f32, "float32", RED_SPECS)
    rcase("sum", r_sum, "int32", lambda s: i32(s, -100, 100), "int32", [((3, 4), None, False), ((3, 4), 0, True), ((2, 3, 4), [0, 2], False), ((0, 2), 0, False)])
    rcase("sum", r_sum, "bool", boolean, "int32", [((3, 4), None, False), ((3, 4), 1, False), ((2, 0), 1, False)])
    rcase("sum", r_sum, "float32", lambda s: f32(s), "float32", [((257,), 0, False), ((16, 33), 1, False)], name_extra="_big")

    prod_specs = [((3, 4), None, False), ((3, 4), 0, False), ((3, 4), 1, True), ((2, 3, 4), [0, 2], False), ((), None, False),
                  ((0, 3), 0, False), ((0, 3), 1, False)]
    rcase("prod", r_prod, "float32", lambda s: f32(s, 0.5, 1.5) * np.where(boolean(s), 1, -1).astype(np.float32),
          "float32", prod_specs)
    rcase("prod", r_prod, "int32", lambda s: i32(s, -3, 3), "int32", [((3, 4), 1, False), ((2, 3), None, False), ((0, 2), 0, True)])

    maxmin_specs = [((3, 4), None, False), ((3, 4), 0, False), ((3, 4), 1, True), ((2, 3, 4), [0, 2], False), ((), None, False),
                    ((0, 3), 1, False), ((0, 3), 0, False), ((2, 1, 3), [1], False)]
    for op, fn in [("max", r_max), ("min", r_min)]:
        rcase(op, fn, "float32", f32, "float32", maxmin_specs)
        rcase(op, fn, "int32", lambda s: i32(s, -5, 5), "int32", [((3, 4), 1, False), ((2, 3), None, False), ((0, 2), 0, False)])
        rcase(op, fn, "bool", boolean, "bool", [((3, 4), 1, False)])

    rcase("mean", r_mean, "float32", f32, "float32",
          [((3, 4), None, False), ((3, 4), 0, False), ((3, 4), 1, True), ((2, 3, 4), [0, 2], False), ((), None, False),
           ((0, 3), 0, False), ((0, 3), 1, False), ((1, 5), 0, True)])
    rcase("mean", r_mean, "int32", lambda s: i32(s), "float32", [((3, 4), 1, False), ((2, 3), None, False)])
    rcase("mean", r_mean, "bool", boolean, "float32", [((3, 4), 0, False)])

    var_specs = [((3, 4), None, False), ((3, 4), 0, False), ((3, 4), 1, True), ((2, 3, 4), [0, 2], False), ((5,), 0, False),
                 ((1, 5), 0, False)]
    for op, fn in [("var", r_var), ("std", r_std)]:
        rcase(op, fn, "float32", f32, "float32", var_specs, {"correction": 1})
        rcase(op, fn, "float32", f32, "float32", [((3, 4), 1, False), ((1, 5), 0, False), ((), None, False)], {"correction": 0},
              name_extra="_c0")
        rcase(op, fn, "int32", lambda s: i32(s), "float32", [((3, 4), None, False)], {"correction": 1})

    anyall_specs = [((3, 4), None, False), ((3, 4), 0, False), ((3, 4), 1, True), ((2, 3, 4), [0, 2], False), ((), None, False),
                    ((0, 3), 0, False)]
    for op, fn in [("any", r_any), ("all", r_all)]:
        # biased so that both outcomes occur for both ops
        rcase(op, fn, "bool", lambda s, op=op: boolean(s, 0.25 if op == "any" else 0.75), "bool", anyall_specs)
        rcase(op, fn, "float32", lambda s: with_zeros(f32(s)), "bool", [((3, 4), 1, False)])
        rcase(op, fn, "int32", lambda s: i32(s, 0, 1), "bool", [((3, 4), 0, False)])

    arg_specs = [((3, 4), None, False), ((3, 4), 0, False), ((3, 4), 1, True), ((3, 4), -1, False), ((2, 3, 4), 1, False),
                 ((), None, False), ((1, 5), 0, False), ((0, 3), 1, False)]
    for op, fn in [("argmax", r_argmax), ("argmin", r_argmin)]:
        rcase(op, fn, "float32", lambda s: f32_q(s, -1, 1, 0.5), "int32", arg_specs)  # ties: first index wins
        rcase(op, fn, "float32", f32, "int32", [((4, 5), 0, False)], name_extra="_uniform")
        rcase(op, fn, "int32", lambda s: i32(s, -2, 2), "int32", [((3, 5), 1, False), ((6,), None, False)])

    # softmax / log_softmax: args {"axis": int}
    for op, fn in [("softmax", softmax), ("log_softmax", log_softmax)]:
        for s, axis in [((5,), -1), ((3, 4), 0), ((3, 4), 1), ((2, 3, 4), 1), ((1, 4), 0), ((0, 3), -1), ((2, 6), -1)]:
            add(f"{op}_f32_{sh(s)}_{axtag(axis)}", op, {"axis": axis}, lambda s=s: [f32(s)],
                lambda x, axis=axis: fn(x, axis), "float32")
        add(f"{op}_f32_4x5_m1_wide", op, {"axis": -1}, lambda: [f32((4, 5), -30, 30)], lambda x: fn(x, -1), "float32")

    for s, axis, keepdim in [((5,), 0, False), ((3, 4), 0, False), ((3, 4), 1, True), ((2, 3, 4), -1, False), ((3, 4), None, False),
                             ((1, 4), 0, False), ((0, 3), 1, False)]:
        add(f"logsumexp_f32_{sh(s)}_{axtag(axis)}{'_k' if keepdim else ''}", "logsumexp", {"axis": axis, "keepdim": keepdim},
            lambda s=s: [f32(s)], lambda x, axis=axis, keepdim=keepdim: logsumexp(x, axis, keepdim), "float32")
    add("logsumexp_f32_4x5_1_wide", "logsumexp", {"axis": 1, "keepdim": False}, lambda: [f32((4, 5), -50, 50)],
        lambda x: logsumexp(x, 1, False), "float32")


# =============================================================================================
# matmul / dot / linear

def gen_matmul():
    mm = lambda a, b: np.matmul(a, b)
    for a, b in [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (2, 4, 5)),
                 ((2, 1, 3, 4), (5, 4, 2)), ((3, 4), (2, 4, 5)), ((3, 0), (0, 4)), ((0, 4), (4, 2)), ((1, 1), (1, 1)),
                 ((1, 7), (7, 1)), ((16, 33), (33, 9)), ((5,), (3, 5, 2))]:
        add(f"matmul_f32_{tag2(a, b)}", "matmul", {}, lambda a=a, b=b: [f32(a), f32(b)], mm, "float32")
    add("matmul_i32_3x4_4x2", "matmul", {}, lambda: [i32((3, 4)), i32((4, 2))], mm, "int32")
    add("matmul_i32_2x2x3_3x2", "matmul", {}, lambda: [i32((2, 2, 3)), i32((3, 2))], mm, "int32")
    for a, b in [((4,), (4,)), ((3, 4), (4, 2)), ((2, 3, 4), (4, 2))]:
        add(f"dot_f32_{tag2(a, b)}", "dot", {}, lambda a=a, b=b: [f32(a), f32(b)], mm, "float32")

    lin = lambda x, w, b=None: np.matmul(x, w) + (0 if b is None else b)
    for x, w, bias in [((3, 4), (4, 5), (5,)), ((2, 3, 4), (4, 2), (2,)), ((4,), (4, 3), (3,)), ((3, 4), (4, 5), None),
                       ((0, 4), (4, 2), (2,)), ((3, 4), (4, 2), ())]:
        shapes = [x, w] + ([bias] if bias is not None else [])
        name = f"linear_f32_{shapes_tag(*shapes)}" + ("_nobias" if bias is None else "")
        add(name, "linear", {}, lambda shapes=shapes: [f32(s) for s in shapes], lin, "float32")


# =============================================================================================
# creation

def gen_creation():
    def const(r):
        return lambda r=r: r
    for start, stop, step in [(0, 5, 1), (2, 10, 3), (5, 0, -1), (-3, 3, 2), (3, 3, 1), (5, 0, 1), (0, 1, 1), (10, -10, -7)]:
        n = max(0, -((start - stop) // step))
        ref = np.array([start + i * step for i in range(n)], dtype=np.int64)
        add(f"arange_i32_{start}_{stop}_{step}".replace("-", "m"), "arange",
            {"start": start, "stop": stop, "step": step, "dtype": "int32"}, [], lambda r=ref: r, "int32")
    for start, stop, step in [(0.0, 2.0, 0.25), (-1.0, 1.0, 0.5), (0.0, 1.0, 0.3), (1.5, -1.0, -0.5), (0.0, 0.0, 0.5),
                              (-2.5, 2.0, 0.75)]:
        n = max(0, math.ceil((stop - start) / step))
        ref = np.array([start + i * step for i in range(n)], dtype=np.float64)
        add(f"arange_f32_{start}_{stop}_{step}".replace("-", "m"), "arange",
            {"start": start, "stop": stop, "step": step, "dtype": "float32"}, [], lambda r=ref: r, "float32")
    for start, stop, steps in [(0.0, 1.0, 5), (-2.0, 2.0, 1), (0.0, 1.0, 0), (1.0, -1.0, 7), (0.0, 10.0, 11), (-1.0, 1.0, 2)]:
        if steps == 1:
            ref = np.array([start], np.float64)
        else:
            ref = np.array([start + i * (stop - start) / (steps - 1) for i in range(steps)], np.float64)
        add(f"linspace_f32_{start}_{stop}_{steps}".replace("-", "m"), "linspace",
            {"start": start, "stop": stop, "steps": steps, "dtype": "float32"}, [], lambda r=ref: r, "float32")
    for n, m in [(3, None), (2, 4), (4, 2), (0, None), (1, None), (3, 0)]:
        ref = np.eye(n, n if m is None else m)
        add(f"eye_f32_{n}_{m}", "eye", {"n": n, "m": m, "dtype": "float32"}, [], lambda r=ref: r, "float32")
    add("eye_i32_3_3", "eye", {"n": 3, "m": 3, "dtype": "int32"}, [], lambda: np.eye(3, dtype=np.int64), "int32")
    add("eye_bool_2_3", "eye", {"n": 2, "m": 3, "dtype": "bool"}, [], lambda: np.eye(2, 3) != 0, "bool")
    for shape, value, dt in [((2, 3), 1.5, "float32"), ((), 7, "int32"), ((2, 0), 3.0, "float32"), ((3,), True, "bool"),
                             ((1, 2, 1), -0.1, "float32"), ((4,), -3, "int32"), ((2,), float("inf"), "float32")]:
        py = np.float64(value) if dt == "float32" else (np.int64(value) if dt == "int32" else np.bool_(value))
        ref = np.full(shape, py)
        args = {"shape": list(shape), "value": value if not (isinstance(value, float) and math.isinf(value)) else "inf",
                "dtype": dt}
        add(f"full_{ABBR[dt]}_{sh(shape)}_{value}".replace("-", "m"), "full", args, [], lambda r=ref: r, dt)
    for op, v in [("zeros", 0), ("ones", 1)]:
        for shape, dt in [((2, 3), "float32"), ((4,), "int32"), ((), "float32"), ((0, 2), "float32"), ((2, 2), "bool")]:
            if dt == "float32":
                ref = np.full(shape, float(v))
            elif dt == "int32":
                ref = np.full(shape, v, np.int64)
            else:
                ref = np.full(shape, bool(v))
            add(f"{op}_{ABBR[dt]}_{sh(shape)}", op, {"shape": list(shape), "dtype": dt}, [], lambda r=ref: r, dt)


# =============================================================================================
# composition on non-contiguous views: args["pre"] = movement ops applied to input 0 first

def gen_pre():
    P = lambda *ops: [list(o) for o in ops]
    cases = [
        ("add_f32_pre_permute", "add", P(("permute", [1, 0])), lambda: [f32((4, 3)), f32((3, 4))],
         lambda x, y: x + y, "float32", {}),
        ("mul_f32_pre_permute_flip", "mul", P(("permute", [1, 0]), ("flip", [0])), lambda: [f32((4, 3)), f32((3, 4))],
         lambda x, y: x * y, "float32", {}),
        ("exp_f32_pre_shrink_flip", "exp", P(("shrink", [[1, 3], [0, 4]]), ("flip", [1])), lambda: [f32((4, 4))],
         np.exp, "float32", {}),
        ("sub_f32_pre_permute_reshape", "sub", P(("permute", [1, 0]), ("reshape", [12])), lambda: [f32((3, 4)), f32((12,))],
         lambda x, y: x - y, "float32", {}),
        ("add_f32_pre_expand", "add", P(("reshape", [3, 1]), ("expand", [3, 4])), lambda: [f32((3,)), f32((3, 4))],
         lambda x, y: x + y, "float32", {}),
        ("cmplt_f32_pre_pad", "cmplt", P(("pad", [[1, 0], [0, 2]])), lambda: [f32((2, 2)), f32((3, 4))],
         lambda x, y: x < y, "bool", {}),
        ("where_f32_pre_flip_cond", "where", P(("flip", [0])), lambda: [boolean((3, 4)), f32((3, 4)), f32((4,))],
         lambda c, x, y: np.where(c, x, y), "float32", {}),
        ("cast_f32_to_i32_pre_permute", "cast", P(("permute", [2, 0, 1])), lambda: [f32((2, 3, 4), -10, 10)],
         lambda x: np.trunc(x).astype(np.int64), "int32", {"dtype": "int32"}),
        ("sum_f32_pre_permute", "sum", P(("permute", [2, 0, 1])), lambda: [f32((2, 3, 4))],
         lambda x: r_sum(x, 1, False), "float32", {"axis": 1, "keepdim": False}),
        ("sum_f32_pre_expand", "sum", P(("reshape", [3, 1, 4]), ("expand", [3, 5, 4])), lambda: [f32((3, 4))],
         lambda x: r_sum(x, 1, False), "float32", {"axis": 1, "keepdim": False}),
        ("max_f32_pre_flip_shrink", "max", P(("flip", [0, 1]), ("shrink", [[0, 2], [1, 4]])), lambda: [f32((3, 5))],
         lambda x: r_max(x, 0, True), "float32", {"axis": 0, "keepdim": True}),
        ("mean_f32_pre_pad", "mean", P(("pad", [[1, 1], [0, 0]])), lambda: [f32((2, 3))],
         lambda x: r_mean(x, 0, False), "float32", {"axis": 0, "keepdim": False}),
        ("argmax_f32_pre_flip", "argmax", P(("flip", [1])), lambda: [f32_q((3, 5), -1, 1, 0.5)],
         lambda x: r_argmax(x, 1, False), "int32", {"axis": 1, "keepdim": False}),
        ("softmax_f32_pre_permute", "softmax", P(("permute", [1, 0])), lambda: [f32((4, 3))],
         lambda x: softmax(x, -1), "float32", {"axis": -1}),
        ("matmul_f32_pre_permute", "matmul", P(("permute", [1, 0])), lambda: [f32((4, 3)), f32((4, 5))],
         lambda x, y: x @ y, "float32", {}),
        ("sum_i32_pre_permute_shrink", "sum", P(("permute", [1, 0]), ("shrink", [[1, 3], [0, 2]])), lambda: [i32((2, 4))],
         lambda x: r_sum(x, None, False), "int32", {"axis": None, "keepdim": False}),
        ("logical_and_bool_pre_expand", "logical_and", P(("reshape", [1, 3]), ("expand", [2, 3])),
         lambda: [boolean((3,)), boolean((2, 3))], np.logical_and, "bool", {}),
    ]
    for name, op, pre, make, fn, dt, args in cases:
        a = dict(args)
        a["pre"] = pre
        add(name, op, a, make, fn, dt)


# =============================================================================================
# more elementwise math, reductions and movement (tinygrad's mixin ops; appended last so the
# cases above keep their inputs)

def gen_more():
    shapes = [(), (0, 3), (3, 4), (2, 3, 4)]
    more_unary = {
        "log10": (np.log10, lambda s: f32(s, 0.05, 100.0), lambda s: i32(s, 1, 1000)),
        "asin": (np.arcsin, lambda s: f32(s, -0.999, 0.999), lambda s: i32(s, -1, 1)),
        "acos": (np.arccos, lambda s: f32(s, -0.999, 0.999), lambda s: i32(s, -1, 1)),
        "atan": (np.arctan, lambda s: f32(s, -6.0, 6.0), lambda s: i32(s, -10, 10)),
        "square": (np.square, lambda s: f32(s), lambda s: i32(s, -1000, 1000)),
    }
    for op, (fn, gf, gi) in more_unary.items():
        for s in shapes:
            add(f"{op}_f32_{sh(s)}", op, {}, lambda s=s, gf=gf: [gf(s)], fn, "float32")
        out_dt = "int32" if op == "square" else "float32"
        add(f"{op}_i32_3x4", op, {}, lambda gi=gi: [gi((3, 4))], fn, out_dt)
    # edges: exactly +-1 and 0, outside the domain (NaN), NaN and infinities
    edge = np.array([-1.0, -0.5, 0.0, 0.5, 1.0, 1.5, -2.0, np.nan], np.float32)
    add("asin_f32_edges", "asin", {}, [edge], np.arcsin, "float32")
    add("acos_f32_edges", "acos", {}, [edge], np.arccos, "float32")
    add("atan_f32_special", "atan", {}, [np.array([np.inf, -np.inf, np.nan, 0.0, 1e6, -1e-6], np.float32)],
        np.arctan, "float32")
    add("log10_f32_special", "log10", {}, [np.array([0.0, 1.0, 10.0, 1e-3, np.inf, -1.0, np.nan], np.float32)],
        np.log10, "float32")

    # binary
    for a, b in [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (5,))]:
        add(f"fmod_f32_{shapes_tag(a, b)}", "fmod", {}, lambda a=a, b=b: [f32(a, -6, 6), f32_nonzero(b, -2, 2, 0.25)],
            np.fmod, "float32")
        add(f"copysign_f32_{shapes_tag(a, b)}", "copysign", {}, lambda a=a, b=b: [f32(a), with_zeros(f32(b))],
            np.copysign, "float32")
        add(f"logaddexp_f32_{shapes_tag(a, b)}", "logaddexp", {}, lambda a=a, b=b: [f32(a, -5, 5), f32(b, -5, 5)],
            np.logaddexp, "float32")
    add("fmod_i32_3x4", "fmod", {}, lambda: [i32((3, 4), -50, 50), i32_nonzero((3, 4), -7, 7)],
        lambda x, y: np.fmod(x, y), "int32")
    add("copysign_f32_negzero", "copysign", {},
        [np.array([1.0, 2.0, -3.0, 0.0], np.float32), np.array([-0.0, 0.0, 0.0, -0.0], np.float32)],
        np.copysign, "float32")
    add("logaddexp_f32_large", "logaddexp", {},
        [np.array([1000.0, -1000.0, 0.0, -np.inf, 50.0], np.float32), np.array([1000.0, -1000.0, -np.inf, -np.inf, -50.0], np.float32)],
        np.logaddexp, "float32")
    # isclose (rtol, atol, equal_nan as args), bool out
    x = np.array([1.0, 1.0, 1e-7, 1e-9, np.nan, np.nan, np.inf, np.inf, -np.inf, 100.0, 0.0], np.float32)
    y = np.array([1.0, 1.00001, 0.0, 0.0, np.nan, 1.0, np.inf, -np.inf, -np.inf, 100.001, 1e-8], np.float32)
    for rtol, atol, en in [(1e-5, 1e-8, False), (1e-5, 1e-8, True), (1e-3, 0.0, False), (0.0, 1e-6, True)]:
        add(f"isclose_f32_r{rtol}_a{atol}_{'nan' if en else 'nonan'}", "isclose",
            {"rtol": rtol, "atol": atol, "equal_nan": en}, [x, y],
            lambda a, b, rtol=rtol, atol=atol, en=en: np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=en), "bool")
    add("isclose_f32_bcast_3x1_4", "isclose", {"rtol": 1e-5, "atol": 1e-8, "equal_nan": False},
        lambda: [f32_q((3, 1), -1, 1, 0.5), f32_q((4,), -1, 1, 0.5)],
        lambda a, b: np.isclose(a, b, rtol=1e-5, atol=1e-8), "bool")
    add("clamp_f32_3x4", "clamp", {"min": -0.5, "max": 0.5}, lambda: [f32((3, 4))], lambda x: np.clip(x, -0.5, 0.5), "float32")

    # var_mean / std_mean: the pair stacked (var or std first)
    for op, red in [("var_mean", np.var), ("std_mean", np.std)]:
        for shape, axis, corr, keep in [((3, 4), 1, 1, False), ((2, 3, 4), [0, 2], 0, True), ((5,), None, 1, False)]:
            def fn(x, axis=axis, corr=corr, keep=keep, red=red):
                ax = tuple(axis) if isinstance(axis, list) else axis
                return np.stack([red(x, axis=ax, ddof=corr, keepdims=keep), np.mean(x, axis=ax, keepdims=keep)])
            add(f"{op}_f32_{sh(shape)}_c{corr}{'_keep' if keep else ''}", op,
                {"axis": axis, "correction": corr, "keepdim": keep}, lambda shape=shape: [f32(shape)], fn, "float32")

    # einsum (the formula as an arg; numpy's einsum in float64 as the reference)
    for name, formula, shapes_ in [
        ("matmul", "ij,jk->ik", [(3, 4), (4, 5)]),
        ("dot_all", "ij,ij->", [(3, 4), (3, 4)]),
        ("trace", "ii->", [(4, 4)]),
        ("diag", "ii->i", [(3, 3)]),
        ("transpose", "ij->ji", [(2, 3)]),
        ("implicit", "ij,jk", [(2, 3), (3, 2)]),
        ("bmm", "bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),
        ("outer", "i,j->ij", [(3,), (4,)]),
        ("sum_all", "ijk->", [(2, 3, 4)]),
        ("vec_dot", "i,i->", [(5,)] * 2),
        ("three_ops", "ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
        ("ellipsis_bmm", "...ij,...jk->...ik", [(2, 2, 3, 4), (2, 4, 3)]),
        ("ellipsis_sum", "...i->...", [(2, 3, 4)]),
        ("diag_3d", "iij->ij", [(3, 3, 2)]),
        ("perm_out", "abc->cab", [(2, 3, 4)]),
        ("spaces", "i j , j -> i", [(3, 4), (4,)]),
        ("scalar_op", ",ij->ij", [(), (2, 3)]),
        ("empty", "ij,jk->ik", [(0, 3), (3, 2)]),
    ]:
        np_formula = formula.replace(" ", "")
        add(f"einsum_f32_{name}", "einsum", {"formula": formula},
            lambda shapes_=shapes_: [f32(s) for s in shapes_],
            lambda *xs, f=np_formula: np.einsum(f, *xs), "float32")
    add("einsum_i32_matmul", "einsum", {"formula": "ij,jk->ik"}, lambda: [i32((3, 4), -5, 5), i32((4, 2), -5, 5)],
        lambda a, b: np.einsum("ij,jk->ik", a, b), "int32")

    # movement
    add("diag_f32_4", "diag", {}, lambda: [f32((4,))], np.diag, "float32")
    add("diag_i32_1", "diag", {}, lambda: [i32((1,))], np.diag, "int32")
    add("diagonal_f32_3x3", "diagonal", {}, lambda: [f32((3, 3))], np.diagonal, "float32")
    add("diagonal_i32_5x5", "diagonal", {}, lambda: [i32((5, 5))], np.diagonal, "int32")
    for shape, rep, dim in [((2, 3), 2, None), ((2, 3), 3, 0), ((2, 3), 2, 1), ((2, 3, 2), 2, -1), ((4,), 1, 0)]:
        add(f"repeat_interleave_f32_{sh(shape)}_r{rep}_d{dim}", "repeat_interleave", {"repeats": rep, "dim": dim},
            lambda shape=shape: [f32(shape)], lambda x, rep=rep, dim=dim: np.repeat(x, rep, axis=dim), "float32")
    add("pad_to_f32_2x3", "pad_to", {"shape": [4, None]}, lambda: [f32((2, 3))],
        lambda x: np.pad(x, [(0, 2), (0, 0)]), "float32")
    add("pad_to_i32_3", "pad_to", {"shape": [5]}, lambda: [i32((3,))], lambda x: np.pad(x, [(0, 2)]), "int32")
    add("shrink_to_f32_4x5", "shrink_to", {"shape": [None, 2]}, lambda: [f32((4, 5))], lambda x: x[:, :2], "float32")
    add("shrink_to_f32_3x3x3", "shrink_to", {"shape": [1, 2, 3]}, lambda: [f32((3, 3, 3))], lambda x: x[:1, :2, :3], "float32")
    # nonzero: numpy's argwhere (row-major order), int32
    add("nonzero_f32_3x4", "nonzero", {}, lambda: [with_zeros(f32_q((3, 4), -2, 2, 1.0))], np.argwhere, "int32")
    add("nonzero_i32_7", "nonzero", {}, lambda: [i32((7,), -1, 1)], np.argwhere, "int32")
    add("nonzero_bool_2x2x3", "nonzero", {}, lambda: [boolean((2, 2, 3))], np.argwhere, "int32")
    add("nonzero_f32_all_zero", "nonzero", {}, [np.zeros((2, 3), np.float32)], np.argwhere, "int32")
    add("nonzero_f32_nan_inf", "nonzero", {}, [np.array([0.0, np.nan, -0.0, np.inf], np.float32)], np.argwhere, "int32")


# =============================================================================================

def gen_rearrange():
    # each reference written out by hand with numpy reshape/transpose (not by parsing the formula)
    specs = [
        ("flatten", "batch channel -> (batch channel)", {}, (2, 3), lambda x: x.reshape(6)),
        ("transpose", "b c -> c b", {}, (2, 3), lambda x: x.T),
        ("nchw_to_seq", "b c h w -> b (h w) c", {}, (2, 3, 2, 4),
         lambda x: x.transpose(0, 2, 3, 1).reshape(2, 8, 3)),
        ("split_given", "(h w) c -> h w c", {"h": 2}, (6, 3), lambda x: x.reshape(2, 3, 3)),
        ("split_both", "(a b) -> b a", {"a": 3, "b": 4}, (12,), lambda x: x.reshape(3, 4).T),
        ("patches", "b (h p1) (w p2) -> b (h w) (p1 p2)", {"p1": 2, "p2": 2}, (2, 4, 6),
         lambda x: x.reshape(2, 2, 2, 3, 2).transpose(0, 1, 3, 2, 4).reshape(2, 6, 4)),
        ("ellipsis_front", "... h w -> ... w h", {}, (2, 3, 4, 5), lambda x: x.swapaxes(-1, -2)),
        ("ellipsis_merge", "b ... -> b (...)", {}, (2, 3, 4), lambda x: x.reshape(2, 12)),
        ("ellipsis_empty", "... a b -> b a ...", {}, (3, 4), lambda x: x.T),
        ("unit_axes", "a 1 b -> b 1 a 1", {}, (2, 1, 3), lambda x: x.reshape(2, 3).T.reshape(3, 1, 2, 1)),
        ("group_reorder", "a (b c) -> (c a) b", {"c": 2}, (3, 4),
         lambda x: x.reshape(3, 2, 2).transpose(2, 0, 1).reshape(6, 2)),
    ]
    for name, formula, sizes, shape, fn in specs:
        add(f"rearrange_f32_{name}", "rearrange", {"formula": formula, "sizes": sizes},
            lambda shape=shape: [f32(shape)], fn, "float32")
    add("rearrange_i32_unicode_ellipsis", "rearrange", {"formula": "b \u2026 c -> c b \u2026", "sizes": {}},
        lambda: [i32((2, 3, 2, 4))], lambda x: x.transpose(3, 0, 1, 2), "int32")


def gen_unfold():
    # numpy's sliding_window_view puts each window on a new last axis; stepping takes every
    # `step`-th window (PyTorch's Tensor.unfold)
    def ref(x, dim, size, step):
        dim %= x.ndim
        return np.lib.stride_tricks.sliding_window_view(x, size, axis=dim).take(
            range(0, x.shape[dim] - size + 1, step), axis=dim)
    specs = [
        ("1d_k2_s1", (7,), 0, 2, 1), ("1d_k2_s2", (7,), 0, 2, 2), ("1d_k3_s2", (8,), -1, 3, 2),
        ("2d_dim0", (5, 3), 0, 2, 1), ("2d_dim1_k3_s3", (2, 7), 1, 3, 3),
        ("3d_middle", (2, 6, 3), 1, 4, 1), ("3d_neg_dim", (2, 3, 5), -2, 2, 1),
        ("full_window", (2, 4), 1, 4, 1), ("step_past_end", (9,), 0, 2, 5),
        ("size0", (2, 3), 1, 0, 1),
    ]
    for name, shape, dim, size, step in specs:
        add(f"unfold_f32_{name}", "unfold", {"dim": dim, "size": size, "step": step},
            lambda shape=shape: [f32(shape)], lambda x, d=dim, k=size, st=step: ref(x, d, k, st),
            "float32")
    add("unfold_i32_2d", "unfold", {"dim": 0, "size": 2, "step": 2},
        lambda: [i32((5, 2))], lambda x: ref(x, 0, 2, 2), "int32")


def main():
    gen_unary()
    gen_binary()
    gen_ternary()
    gen_cast()
    gen_movement()
    gen_reduce()
    gen_matmul()
    gen_creation()
    gen_pre()
    gen_more()
    gen_rearrange()
    gen_unfold()

    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "cases.json")
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
