//! tinygrad's `test/null/test_symbolic_tensor.py` (commit a9069c17; symbolic shapes checked on
//! its NULL device, no data read back), replayed on our API: one case per test method, named
//! `Class.test_name`; the excluded methods and their reasons are in
//! `tests/golden/replay/null_test_symbolic_tensor.json`
//! (`tests/golden/replay/gen_null_test_symbolic_tensor.py`).
//!
//! tinygrad's `Variable("i", lo, hi)` is `Variable::new`, `.bind(v)` a `BoundVar`; its `t[:vi]`
//! is `Idx::SymSlice`, `t.shrink(..)`/`reshape(..)`/`expand(..)` with `sint`s are
//! `shrink_sym`/`reshape_sym`/`expand_sym`; `t.shape` with symbols is `sym_shape()`. tinygrad's
//! `assertFalse(a != b)` on a shape's sizes resolves `a != b` symbolically (`sym_ne` below).
//!
//! Departures (each noted where it is replayed):
//! - `_broadcast_shape` (tinygrad's private shape helper of `uop/ops.py`) is not public here;
//!   the same shapes are broadcast through a binary op (`+`), whose result's `sym_shape()` is
//!   `_broadcast_shape`'s answer and whose panic is its `IndexError`.
//! - `t.uop.unbind_all()`'s variable values are `Tensor::schedule_with_vars(&[&t]).1` (by name).
//! - `shrink_sym` refuses bounds that can reach past the dimension for some value of the
//!   variable (the compiled kernels serve every value, so each must fit); tinygrad does not
//!   check. `Variable("i", 1, 5)` shrinking `(i, i+1)` of a dim of 5 and `Variable("v", 1,
//!   100)` shrinking a dim of 3 are replayed with bounds that fit (and the refusal of the
//!   original bounds is asserted).

mod replay;

use std::collections::HashMap;

use replay::{Case, Ctx, assert_panics};
use tinygrad_tensor::{BoundVar, DType, Idx, SInt, Tensor, Variable};

const CASES: &[Case] = &[
    ("TestBroadcastShape.test_symbolic", broadcast_symbolic),
    (
        "TestBroadcastShape.test_symbolic_vmin_zero",
        broadcast_symbolic_vmin_zero,
    ),
    (
        "TestSymbolic.test_cat_dim0_is_expanded",
        cat_dim0_is_expanded,
    ),
    ("TestSymbolic.test_cat_dim1_strides", cat_dim1_strides),
    ("TestSymbolicVarVals.test_shrink_unbind", shrink_unbind),
    ("TestSymbolicReshape.test_reshape", reshape),
    (
        "TestSymbolicReshape.test_two_symbol_reshape",
        two_symbol_reshape,
    ),
    (
        "TestSymbolicExpand.test_expand_into_symbols",
        expand_into_symbols,
    ),
    (
        "TestSymbolicExpand.test_plus_expands_constant",
        plus_expands_constant,
    ),
    (
        "TestSymbolicExpand.test_pad_then_expand_into_symbols",
        pad_then_expand_into_symbols,
    ),
    (
        "TestSymbolicShrink.test_shrink_symbols_simple",
        shrink_symbols_simple,
    ),
    ("TestSymbolicShrink.test_shrink_symbols", shrink_symbols),
];

#[test]
fn cpu() {
    replay::replay("null_test_symbolic_tensor", "CPU", CASES);
}

#[test]
fn reference() {
    replay::replay("null_test_symbolic_tensor", "REF", CASES);
}

#[test]
fn webgpu() {
    replay::on_webgpu("null_test_symbolic_tensor on WEBGPU", |dev| {
        replay::replay("null_test_symbolic_tensor", dev, CASES)
    });
}

const F32: DType = DType::FLOAT32;

// ---- helpers ----

/// tinygrad's `bool(a != b)` of two sizes: the `!=` resolved symbolically (a `CMPNE` that
/// simplifies to a constant); like tinygrad's `__bool__`, it panics when it cannot resolve.
fn sym_ne(a: &SInt, b: &SInt) -> bool {
    match (a, b) {
        (SInt::Const(x), SInt::Const(y)) => x != y,
        _ => {
            let ne = a.to_uop().ne(b.to_uop()).simplify();
            match ne.as_int() {
                Some(v) if ne.op() == tinygrad_tensor::Ops::Const => v != 0,
                _ => panic!("bool({a} != {b}): does not resolve to a constant ({ne})"),
            }
        }
    }
}

/// tinygrad's `assert_tuple_equal(x, y)`: `assertFalse(a != b)` for each pair `zip` makes.
fn assert_tuple_equal(x: &[SInt], y: &[SInt], what: &str) {
    for (a, b) in x.iter().zip(y) {
        assert!(
            !sym_ne(a, b),
            "{what}: {a} != {b} (shape {} vs {})",
            show(x),
            show(y)
        );
    }
}

/// tinygrad's `t.shape == (..)`: the sizes, equal as tuples of `sint`s (the same expressions).
fn assert_shape(t: &Tensor, want: &[SInt], what: &str) {
    let got = t.sym_shape();
    assert!(
        got == want,
        "{what}: shape {} != {}",
        show(&got),
        show(want)
    );
}

fn show(s: &[SInt]) -> String {
    let v: Vec<String> = s.iter().map(ToString::to_string).collect();
    format!("({})", v.join(", "))
}

fn c(n: usize) -> SInt {
    SInt::Const(n)
}

fn s(b: &BoundVar) -> SInt {
    b.into()
}

/// `t[:v]` (along the first axis).
fn sym_to(v: &BoundVar) -> Idx {
    Idx::SymSlice {
        start: 0.into(),
        stop: v.into(),
    }
}

/// A tensor of shape `shape` whose sizes may be (unbound) variables: an empty tensor of the
/// largest sizes, shrunk to them (tinygrad's `_broadcast_shape` takes shapes, not tensors).
fn of_shape(shape: &[SInt]) -> Tensor {
    let max: Vec<usize> = shape.iter().map(SInt::max_value).collect();
    let t = Tensor::empty(&max, F32);
    if shape.iter().all(|d| !d.is_symbolic()) {
        return t;
    }
    t.shrink_sym(&shape.iter().map(|d| (c(0), d.clone())).collect::<Vec<_>>())
}

/// tinygrad's `_broadcast_shape(a, b)`, through a binary op on tensors of those shapes.
fn broadcast_shape(a: &[SInt], b: &[SInt]) -> Vec<SInt> {
    (&of_shape(a) + &of_shape(b)).sym_shape()
}

// ---- TestBroadcastShape ----

fn broadcast_symbolic(_: &Ctx) {
    let v = Variable::new("v", 1, 10).sint();
    let vs = [v.clone()];
    assert_eq!(broadcast_shape(&vs, &[c(1)]), vs, "(v,) with (1,)");
    assert_eq!(broadcast_shape(&vs, &[]), vs, "(v,) with ()");
    assert_eq!(broadcast_shape(&vs, &vs), vs, "(v,) with (v,)");
    // (here the refusal comes from v's largest value, 10, against 5: a symbolic size whose
    // value equals the other size is taken as that size, where tinygrad raises)
    assert_panics("(v,) with (5,)", &["add", "broadcast"], || {
        broadcast_shape(&vs, &[c(5)]);
    });
}

fn broadcast_symbolic_vmin_zero(_: &Ctx) {
    // a symbolic dim that may be 0 still broadcasts against 1 to itself
    let v0 = Variable::new("v0", 0, 10).sint();
    let vs = [v0.clone()];
    assert_eq!(broadcast_shape(&vs, &[c(1)]), vs, "(v0,) with (1,)");
    assert_eq!(broadcast_shape(&vs, &[]), vs, "(v0,) with ()");
    assert_eq!(
        broadcast_shape(&[c(3), v0.clone()], &[c(3), c(1)]),
        vec![c(3), v0.clone()],
        "(3, v0) with (3, 1)"
    );
    assert_panics("(v0,) with (5,)", &["add", "broadcast"], || {
        broadcast_shape(&vs, &[c(5)]);
    });
}

// ---- TestSymbolic ----

fn cat_dim0_is_expanded(_: &Ctx) {
    let i = Variable::new("i", 1, 5).bind(3);
    let j = Variable::new("j", 1, 5).bind(3);
    let k = Variable::new("k", 1, 5).bind(3);
    let rows = |v: &BoundVar, cols: usize| Tensor::rand(&[5, cols]).getitem(&[sym_to(v)]);
    let t = Tensor::cat(
        &[&Tensor::cat(&[&rows(&i, 4), &rows(&j, 4)], 0), &rows(&k, 4)],
        0,
    );
    assert_tuple_equal(&t.sym_shape(), &[s(&i) + s(&j) + s(&k), c(4)], "(i+j+k, 4)");
    let t = Tensor::cat(
        &[
            &Tensor::cat(&[&rows(&i, 3), &rows(&i, 3)], 0),
            &Tensor::rand(&[3, 3]),
        ],
        0,
    );
    assert_tuple_equal(&t.sym_shape(), &[c(2) * s(&i) + c(3), c(3)], "(2*i+3, 3)");
}

fn cat_dim1_strides(_: &Ctx) {
    let i = Variable::new("i", 1, 5).bind(4);
    let j = Variable::new("j", 1, 5).bind(4);
    let k = Variable::new("k", 1, 5).bind(4);
    let cols = |v: &BoundVar| Tensor::rand(&[3, 5]).getitem(&[Idx::all(), sym_to(v)]);
    let t = Tensor::cat(&[&Tensor::cat(&[&cols(&i), &cols(&j)], 1), &cols(&k)], 1);
    assert_tuple_equal(&t.sym_shape(), &[c(3), s(&i) + s(&j) + s(&k)], "(3, i+j+k)");
}

// ---- TestSymbolicVarVals ----

fn shrink_unbind(_: &Ctx) {
    // tinygrad's `t.uop.unbind_all()` is the variables' values a schedule of `t` binds
    // (`Tensor::schedule_with_vars`, tinygrad's `schedule_with_vars`). Departure: tinygrad's
    // Variable("v", 1, 100) can reach past the 3 rows; `shrink_sym` refuses a bound that can
    // leave the dim (asserted), so the replay bounds `v` by the rows: 1..=3 for (0, v), 1..=2
    // for (v, v+1).
    let too_wide = Variable::new("v", 1, 100).bind(2);
    assert_panics(
        "shrink(0, v) of 3 rows, v up to 100",
        &["shrink_sym"],
        || {
            Tensor::rand(&[3, 4]).shrink_sym(&[(c(0), s(&too_wide)), (c(0), c(4))]);
        },
    );
    let want = HashMap::from([("v".to_string(), 2i64)]);
    let var_vals = |t: &Tensor| -> HashMap<String, i64> {
        let (_, vals) = Tensor::schedule_with_vars(&[t]);
        vals.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    };
    let bv = Variable::new("v", 1, 3).bind(2);
    let t = Tensor::rand(&[3, 4]).shrink_sym(&[(c(0), s(&bv)), (c(0), c(4))]);
    assert_eq!(var_vals(&t), want, "shrink((0, bv), (0, 4))");
    let bv = Variable::new("v", 1, 2).bind(2);
    let t = Tensor::rand(&[3, 4]).shrink_sym(&[(s(&bv), s(&bv) + c(1)), (c(0), c(4))]);
    assert_eq!(var_vals(&t), want, "shrink((bv, bv+1), (0, 4))");
}

// ---- TestSymbolicReshape ----

fn reshape(_: &Ctx) {
    let a = Tensor::rand(&[5, 4]);
    let b = Tensor::rand(&[5, 6]);
    for i in 1..6 {
        let vi = Variable::new("i", 1, 5).bind(i);
        let ret = a.getitem(&[sym_to(&vi)]);
        let ret = ret.reshape_sym(&[s(&vi), c(4)]);
        assert_shape(
            &ret,
            &[s(&vi), c(4)],
            &format!("a[:vi].reshape(vi, 4), i={i}"),
        );
        let ret = b.getitem(&[sym_to(&vi)]);
        let ret = ret.reshape_sym(&[s(&vi), c(2), c(3)]);
        assert_shape(
            &ret,
            &[s(&vi), c(2), c(3)],
            &format!("b[:vi].reshape(vi, 2, 3), i={i}"),
        );
    }
}

fn two_symbol_reshape(_: &Ctx) {
    let t = Tensor::rand(&[5, 5]);
    for i in 1..6 {
        for j in 1..6 {
            let vi = Variable::new("i", 1, 5).bind(i);
            let vj = Variable::new("j", 1, 5).bind(j);
            let what = format!("i={i}, j={j}");
            let ret = t.getitem(&[sym_to(&vi), sym_to(&vj)]);
            let ret = ret.reshape_sym(&[s(&vj), s(&vi)]);
            assert_shape(&ret, &[s(&vj), s(&vi)], &format!("reshape(vj, vi), {what}"));
            let ret = ret.reshape_sym(&[s(&vi), s(&vj)]);
            assert_shape(&ret, &[s(&vi), s(&vj)], &format!("reshape(vi, vj), {what}"));
            let ret = ret.reshape_sym(&[c(1), s(&vi) * s(&vj)]);
            assert_shape(
                &ret,
                &[c(1), s(&vi) * s(&vj)],
                &format!("reshape(1, vi*vj), {what}"),
            );
        }
    }
}

// ---- TestSymbolicExpand ----

fn expand_into_symbols(_: &Ctx) {
    let vi = Variable::new("i", 1, 5).bind(3);
    let vj = Variable::new("j", 1, 5).bind(3);
    let a = Tensor::new([[1], [2], [3]]).expand_sym(&[c(3), s(&vi)]);
    assert_shape(&a, &[c(3), s(&vi)], "expand((3, vi))");
    let a = a
        .reshape_sym(&[c(3), s(&vi), c(1)])
        .expand_sym(&[c(3), s(&vi), s(&vj)]);
    assert_shape(&a, &[c(3), s(&vi), s(&vj)], "expand((3, vi, vj))");
}

fn plus_expands_constant(_: &Ctx) {
    let a = Tensor::rand(&[3, 5]);
    for i in 1..6 {
        let vi = Variable::new("i", 1, 5).bind(i);
        let ret = a.getitem(&[Idx::all(), sym_to(&vi)]);
        let ret = &ret + 1;
        assert_shape(&ret, &[c(3), s(&vi)], &format!("a[:, :vi] + 1, i={i}"));
    }
}

fn pad_then_expand_into_symbols(_: &Ctx) {
    let vi = Variable::new("i", 1, 10).bind(3);
    let a = Tensor::new(1)
        .unsqueeze(0)
        .pad(&[(0, 24)], 0)
        .unsqueeze(0)
        .expand_sym(&[s(&vi), c(25)]);
    assert_shape(&a, &[s(&vi), c(25)], "expand((vi, 25))");
    assert_shape(
        &a.reshape_sym(&[c(25) * s(&vi)]),
        &[s(&vi) * c(25)],
        "reshape(25*vi)",
    );
    assert_shape(
        &a.reshape_sym(&[s(&vi) * c(25)]),
        &[s(&vi) * c(25)],
        "reshape(vi*25)",
    );
}

// ---- TestSymbolicShrink ----

fn shrink_symbols_simple(_: &Ctx) {
    let vi = Variable::new("i", 1, 5).sint();
    let t = Tensor::rand(&[5, 5]).shrink_sym(&[(c(0), c(5)), (c(0), vi.clone())]);
    assert_shape(&t, &[c(5), vi], "shrink((0, 5), (0, vi))");
}

fn shrink_symbols(_: &Ctx) {
    // Departure: tinygrad's Variable("i", 1, 5) makes the bound i+1 reach 6, past the dim of 5;
    // `shrink_sym` refuses it (asserted), so the replay bounds i by 1..=4.
    let too_wide = Variable::new("i", 1, 5).sint();
    assert_panics("shrink (i, i+1) of 5, i up to 5", &["shrink_sym"], || {
        Tensor::rand(&[3, 5]).shrink_sym(&[(c(0), c(2)), (too_wide.clone(), too_wide + c(1))]);
    });
    let vi = Variable::new("i", 1, 4).sint();
    let t = Tensor::rand(&[3, 5]).shrink_sym(&[(c(0), c(2)), (vi.clone(), vi + c(1))]);
    assert_shape(&t, &[c(2), c(1)], "shrink((0, 2), (vi, vi+1))");
}
