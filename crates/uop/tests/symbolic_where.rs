//! `where` and `max`/`min` folding.

#![allow(
    clippy::erasing_op,
    clippy::identity_op,
    clippy::neg_multiply,
    clippy::modulo_one
)]

mod common;

use common::{t, var as v, var_of};
use tinygrad_uop::{DType, UOp};

#[test]
fn where_removal() {
    let cond = v("a", 0, 3).lt(2);
    let (one, zero) = (UOp::cnst(DType::BOOL, true), UOp::cnst(DType::BOOL, false));
    let w = cond.where_(&one, &zero);
    assert_eq!(w.simplify(), cond);
    assert_eq!(w.where_(&one, &zero).simplify(), cond);
    assert_eq!(cond.where_(&zero, &one).simplify().to_string(), "(!(a<2))");
    assert_eq!(
        cond.where_(&zero, &one).where_(&zero, &one).simplify(),
        cond
    );
}

#[test]
fn where_same_branches() {
    let (c, a) = (v("x", 0, 3).lt(2), v("a", 0, 3));
    t(&c.where_(&a, &a), "a [0, 3]");
}

#[test]
fn where_const_cond() {
    let (a, b) = (v("a", 0, 3), v("b", 0, 3));
    t(&UOp::cnst(DType::BOOL, true).where_(&a, &b), "a [0, 3]");
    t(&v("x", 0, 1).lt(5).where_(&a, &b), "a [0, 3]");
    t(&v("x", 5, 9).lt(5).where_(&a, &b), "b [0, 3]");
}

#[test]
fn where_combine() {
    let cond = v("x", 0, 3).lt(2);
    let (a, b, c) = (v("a", 0, 3), v("b", 0, 3), v("c", 0, 3));
    let aa = cond.where_(&a, 0);
    let bb = cond.where_(&b, 1);
    t(&aa, "((x<2) ? a : 0) [0, 3]");
    t(&bb, "((x<2) ? b : 1) [0, 3]");
    t(&(&aa + &bb), "((x<2) ? (a+b) : 1) [0, 6]");
    t(&aa.maximum(&bb), "((x<2) ? max(a, b) : 1) [0, 3]");
    t(
        &(&c + &aa + &bb),
        "((c+((x<2) ? a : 0))+((x<2) ? b : 1)) [0, 9]",
    );
    let cc = cond.where_(&c, &c + 1);
    t(&(&bb + &cc), "(((x<2) ? b : 1)+((x<2) ? c : (c+1))) [0, 7]");
    let ab = cond.where_(&a, &b);
    let ba = cond.where_(&b, &a);
    t(&(&ab + &ba), "(((x<2) ? a : b)+((x<2) ? b : a)) [0, 6]");
}

#[test]
fn negation_in_where() {
    let cond = v("x", 0, 3).lt(2);
    let (a, b) = (v("a", 0, 3), v("b", 0, 3));
    t(&cond.ne(true).where_(&a, &b), "((x<2) ? b : a) [0, 3]");
}

#[test]
fn where_merge_branches() {
    let s = v("s", 0, 10);
    let (a, b) = (v("a", 0, 3), v("b", 0, 3));
    t(
        &s.lt(6).where_(UOp::index(2).lt(&s).where_(&a, &b), &b),
        "(((s<6)&(2<s)) ? a : b) [0, 3]",
    );
    t(
        &s.lt(5).where_(s.lt(6).where_(&a, &b), &b),
        "((s<5) ? a : b) [0, 3]",
    );
}

#[test]
fn where_cast_pushed_into_branches() {
    let cond = v("s", 0, 3).lt(2);
    let (a, b) = (v("a", 0, 3), v("b", 0, 3));
    let e = cond.where_(&a, &b).cast(DType::FLOAT16);
    assert_eq!(
        e.simplify(),
        cond.where_(a.cast(DType::FLOAT16), b.cast(DType::FLOAT16))
    );
}

#[test]
fn gated_load_index() {
    let idx = v("idx", 0, 24);
    t(&idx.idiv(4), "(idx//4) [0, 6]");
    t(
        &idx.lt(4).where_(idx.idiv(4), -1),
        "((idx<4) ? (idx//4) : -1) [-1, 6]",
    );
}

#[test]
fn where_bounds() {
    let x = v("x", -5, 5);
    let w = x.lt(0).where_(x.clone() * -1, x.clone());
    t(&w, "((x<0) ? (-x) : x) [-5, 5]");
    t(&(w.lt(0)), "(((x<0) ? (-x) : x)<0) [0, 1]");
}

#[test]
fn max_folds() {
    t(
        &v("a", 0, 20).maximum(10).maximum(11),
        "max(a, 11) [11, 20]",
    );
    t(&v("a", 0, 20).maximum(-5), "a [0, 20]");
    t(&v("a", 0, 20).maximum(20), "20 [20, 20]");
    t(&v("a", 0, 20).maximum(30), "30 [30, 30]");
}

#[test]
fn max_variables() {
    let (a, b) = (v("a", 0, 5), v("b", 5, 9));
    t(&a.maximum(&b), "b [5, 9]");
    t(&b.maximum(&a), "b [5, 9]");
    let c = v("c", 3, 7);
    t(&a.maximum(&c), "max(a, c) [3, 7]");
    t(&c.maximum(&a), "max(a, c) [3, 7]");
    t(&a.maximum(&a), "a [0, 5]");
}

#[test]
fn min_folds() {
    let (a, b) = (v("a", 0, 5), v("b", 5, 9));
    t(&a.minimum(&b), "a [0, 5]");
    t(&b.minimum(&a), "a [0, 5]");
    t(&a.minimum(3), "(-max((-a), -3)) [0, 3]");
    t(&a.minimum(-1), "-1 [-1, -1]");
    t(&v("n", -8, -2).minimum(v("m", -1, 4)), "n [-8, -2]");
}

#[test]
fn max_negative_bounds() {
    let (a, b) = (v("a", -9, -3), v("b", -5, 2));
    t(&a.maximum(&b), "max(a, b) [-5, 2]");
    t(&a.maximum(-3), "-3 [-3, -3]");
    t(&(a.maximum(&b) * -1), "(-max(a, b)) [-2, 5]");
}

#[test]
fn relu_of_index() {
    let x = v("x", -4, 4);
    t(&(&x * 2 + 1).maximum(0), "max(((x*2)+1), 0) [0, 9]");
    t(&(&x + 5).maximum(0), "(x+5) [1, 9]");
}

#[test]
fn ramp_of_padded_digits_folds_to_the_index() {
    // Tensor::nn_ramp: one `where(digit < 1, 0, 2^b)` per binary digit, summed in uint32
    let g = v("gidx", 0, 15);
    let u32t = DType::UINT32;
    let digit = |d: UOp, w: u32| d.lt(1i64).where_(UOp::cnst(u32t, 0u32), UOp::cnst(u32t, w));
    let ramp =
        digit(g.idiv(8), 8) + digit(g.idiv(4) % 2, 4) + digit(g.idiv(2) % 2, 2) + digit(&g % 2, 1);
    t(&ramp, "(uint32)gidx [0, 15]");
    // a select between constants over a two-valued operand is arithmetic
    let y = v("y", 3, 4);
    t(
        &y.lt(4i64).where_(
            UOp::cnst(DType::INT32, 7i32),
            UOp::cnst(DType::INT32, -2i32),
        ),
        "(int32)((y*-9)+34) [-2, 7]",
    );
}

#[test]
fn select_over_a_full_range_operand_stays() {
    // y - lo would wrap in int32: the sign test of a loaded value keeps its select
    let y = var_of(DType::INT32, "y", i32::MIN as i64, i32::MAX as i64);
    let s = y
        .lt(0i32)
        .where_(
            UOp::cnst(DType::INT32, -1i32),
            UOp::cnst(DType::INT32, 1i32),
        )
        .simplify();
    assert_eq!(s.op(), tinygrad_uop::Ops::Where, "{s}");
}

#[test]
fn narrow_dtype_folds_do_not_wrap() {
    use tinygrad_uop::Ops;
    // cast(x: uint8) * -1 in int32: -1 is no uint8, the product must stay in int32
    let x = var_of(DType::UINT8, "x", 0, 1);
    t(&(x.cast(DType::INT32) * -1i32), "(-(int32)x) [-1, 0]");
    // cast(x: int8) + 200 in int32: 200 is no int8
    let y = var_of(DType::INT8, "x", 0, 10);
    t(
        &(y.cast(DType::INT32) + 200i32),
        "((int32)x+200) [200, 210]",
    );
    // a select between constants whose difference overflows int32 stays a select
    let z = v("z", 0, 1);
    let s = z
        .lt(1i64)
        .where_(
            UOp::cnst(DType::INT32, 2_000_000_000i32),
            UOp::cnst(DType::INT32, -2_000_000_000i32),
        )
        .simplify();
    assert_eq!(s.op(), Ops::Where, "{s}");
}
