//! tinygrad's `test/null/test_helpers.py` (commit a9069c17; tests of `tinygrad.helpers`),
//! replayed on our API where it exposes the helper: one case per test method, named
//! `Class.test_name`; the excluded methods (Python helpers of tinygrad's internals with no
//! counterpart here) and their reasons are in `tests/golden/replay/null_test_helpers.json`
//! (`tests/golden/replay/gen_null_test_helpers.py`).
//!
//! The counterparts: `prod` of sizes is `tinygrad_uop::prod` over [`SInt`] (a symbolic size
//! renders as tinygrad's `UOp.render`); `cdiv`/`cmod` are tinygrad's `python_alu` for its
//! C-style division ops, ours `tinygrad_uop::exec_alu(Ops::IDiv / Ops::Mod)`; `get_shape` of
//! nested lists is [`Data::shape`] (an inhomogeneous list is an `Err`, tinygrad's
//! `ValueError`). `ceildiv` and `polyN` are not exposed: the test writes them as tinygrad does
//! (the UOp branch of `ceildiv`, `(num + amt - 1) // amt`; Horner's rule) over our UOp
//! arithmetic, so what is tested is how our simplifier folds and renders the result; the polyN
//! UOp is evaluated by constant folding (`UOp::simplify`) where tinygrad compiles it into a
//! program for its PYTHON device (`test.helpers.eval_uop`).

mod replay;

use replay::{Case, Ctx, assert_allclose};
use tinygrad_tensor::{ConstValue, DType, Data, Ops, SInt, UOp, Variable};

const CASES: &[Case] = &[
    ("TestProd.test_empty", prod_empty),
    ("TestProd.test_ints", prod_ints),
    ("TestProd.test_variable", prod_variable),
    ("TestProd.test_variable_order", prod_variable_order),
    ("TestCeilDiv.test_symbolic", ceildiv_symbolic),
    (
        "TestCeilDiv.test_symbolic_negative_offset",
        ceildiv_symbolic_negative_offset,
    ),
    ("TestGetShape.test_get_shape", get_shape),
    ("TestGetShape.test_inhomogeneous_shape", inhomogeneous_shape),
    ("TestPolyN.test_uop", polyn_uop),
    ("TestCStyleDivMod.test_div_pos", div_pos),
    ("TestCStyleDivMod.test_div_neg", div_neg),
    ("TestCStyleDivMod.test_mod_pos", mod_pos),
    ("TestCStyleDivMod.test_mod_neg", mod_neg),
];

#[test]
fn cpu() {
    replay::replay("null_test_helpers", "CPU", CASES);
}

#[test]
fn reference() {
    replay::replay("null_test_helpers", "REF", CASES);
}

fn prod(sizes: &[SInt]) -> SInt {
    tinygrad_uop::prod(sizes)
}

fn c(n: usize) -> SInt {
    SInt::Const(n)
}

// TestProd

fn prod_empty(_: &Ctx) {
    assert_eq!(prod(&[]), SInt::Const(1));
}

fn prod_ints(_: &Ctx) {
    assert_eq!(prod(&[c(2), c(3), c(5)]), SInt::Const(30));
}

fn prod_variable(_: &Ctx) {
    let a = Variable::new("a", 1, 5).sint();
    assert_eq!(prod(&[a, c(3), c(4)]).to_string(), "(a*12)");
}

fn prod_variable_order(_: &Ctx) {
    let a = Variable::new("a", 1, 5).sint();
    assert_eq!(prod(&[c(3), c(4), a]).to_string(), "(a*12)");
}

// TestCeilDiv

/// tinygrad's `ceildiv(num, amt)` for a UOp `num` with `num.vmin >= 0` and `amt > 0` (the
/// branch these tests take): `(num + amt - 1) // amt`; `render` simplifies first.
fn ceildiv(num: &UOp, amt: i64) -> UOp {
    assert!(
        num.vmin() >= 0 && amt > 0,
        "ceildiv: only the non-negative UOp branch is replayed"
    );
    ((num + amt) - 1).idiv(amt)
}

fn render(u: &UOp) -> String {
    u.simplify().to_string()
}

fn ceildiv_symbolic(_: &Ctx) {
    let v = UOp::variable("v", 0, 100);
    assert_eq!(render(&ceildiv(&v, 6)), "((v+5)//6)");
}

fn ceildiv_symbolic_negative_offset(_: &Ctx) {
    // (v-5+5)//6 == v//6 for v in [11, 100]
    let v = UOp::variable("v", 11, 100);
    assert_eq!(render(&ceildiv(&(&v - 5), 6)), "(v//6)");
}

// TestGetShape

fn get_shape(_: &Ctx) {
    let empty = || Data::List(vec![]);
    // get_shape(2) == ()
    assert_eq!(Data::from(2).shape(), Ok(vec![]));
    // get_shape([]) == (0,)
    assert_eq!(empty().shape(), Ok(vec![0]));
    // get_shape([[]]) == (1, 0)
    assert_eq!(Data::List(vec![empty()]).shape(), Ok(vec![1, 0]));
    // get_shape([[1, 2]]) == (1, 2)
    assert_eq!(Data::from(vec![vec![1, 2]]).shape(), Ok(vec![1, 2]));
    // get_shape([[1, 2], (3, 4)]) == (2, 2): a tuple is a list here too
    assert_eq!(Data::from([vec![1, 2], vec![3, 4]]).shape(), Ok(vec![2, 2]));
}

fn inhomogeneous_shape(_: &Ctx) {
    // get_shape([[], [1]])
    let a = Data::List(vec![Data::List(vec![]), Data::from(vec![1])]);
    // get_shape([[1, [2]], [1]])
    let b = Data::List(vec![
        Data::List(vec![Data::from(1), Data::from(vec![2])]),
        Data::from(vec![1]),
    ]);
    for (what, d) in [("[[], [1]]", a), ("[[1, [2]], [1]]", b)] {
        let err = d
            .shape()
            .expect_err(&format!("get_shape({what}) should fail"));
        assert!(
            err.contains("inhomogeneous"),
            "get_shape({what}): the error should say inhomogeneous: {err}"
        );
    }
}

// TestPolyN

/// tinygrad's `polyN(x, p)`: `functools.reduce(lambda acc, c: acc*x + c, p, 0.0)`; the first
/// step's `0.0 * x` is `x.__rmul__(0.0)`, a constant like `x` times `x`.
fn poly_n(x: &UOp, p: &[f64]) -> UOp {
    p.iter()
        .fold(None, |acc: Option<UOp>, &c| {
            let acc = acc.unwrap_or_else(|| x.const_like(0.0));
            Some(&acc * x + c)
        })
        .unwrap_or_else(|| x.const_like(0.0))
}

fn polyn_uop(_: &Ctx) {
    for (x, want) in [(1.0, 0.0), (2.0, 1.0), (3.0, 4.0), (4.0, 9.0)] {
        // UOp.const(x) is a default-float (float32) constant, then .cast(dtypes.float)
        let u = UOp::cnst(DType::FLOAT32, x).cast(DType::FLOAT32);
        let r = poly_n(&u, &[1.0, -2.0, 1.0]).simplify();
        assert_eq!(r.dtype(), DType::FLOAT32, "polyN({x}) dtype");
        let got = r
            .as_const()
            .unwrap_or_else(|| panic!("polyN({x}) did not fold to a constant: {r}"))
            .as_f64();
        // np.testing.assert_allclose defaults: rtol 1e-7, atol 0
        assert_allclose(&[got], &[want], 0.0, 1e-7, &format!("polyN({x})"));
    }
}

// TestCStyleDivMod

fn cdiv(x: i64, y: i64) -> i64 {
    tinygrad_uop::exec_alu(
        Ops::IDiv,
        DType::INT64,
        &[ConstValue::Int(x), ConstValue::Int(y)],
    )
    .as_i64()
}

fn cmod(x: i64, y: i64) -> i64 {
    tinygrad_uop::exec_alu(
        Ops::Mod,
        DType::INT64,
        &[ConstValue::Int(x), ConstValue::Int(y)],
    )
    .as_i64()
}

fn check(f: fn(i64, i64) -> i64, name: &str, cases: &[(i64, i64, i64)]) {
    for &(x, y, want) in cases {
        assert_eq!(f(x, y), want, "{name}({x}, {y})");
    }
}

fn div_pos(_: &Ctx) {
    check(
        cdiv,
        "cdiv",
        &[(-9, 5, -1), (-4, 5, 0), (0, 5, 0), (4, 5, 0), (9, 5, 1)],
    );
}

fn div_neg(_: &Ctx) {
    check(
        cdiv,
        "cdiv",
        &[
            (-9, -5, 1),
            (-4, -5, 0),
            (0, -5, 0),
            (4, -5, 0),
            (9, -5, -1),
        ],
    );
}

fn mod_pos(_: &Ctx) {
    check(
        cmod,
        "cmod",
        &[(-9, 5, -4), (-4, 5, -4), (0, 5, 0), (4, 5, 4), (9, 5, 4)],
    );
}

fn mod_neg(_: &Ctx) {
    check(
        cmod,
        "cmod",
        &[
            (-9, -5, -4),
            (-4, -5, -4),
            (0, -5, 0),
            (4, -5, 4),
            (9, -5, 4),
        ],
    );
}
