//! Products: identities, constants, canonical order.

#![allow(
    clippy::erasing_op,
    clippy::identity_op,
    clippy::neg_multiply,
    clippy::modulo_one
)]

mod common;

use common::{t, var as v};
use tinygrad_uop::{DType, UOp};

#[test]
fn mul_0() {
    t(&(v("a", 0, 8) * 0), "0 [0, 0]");
}

#[test]
fn mul_1() {
    t(&(v("a", 0, 8) * 1), "a [0, 8]");
}

#[test]
fn mul_2() {
    t(&(v("a", 0, 8) * 2), "(a*2) [0, 16]");
}

#[test]
fn mul_neg_1() {
    t(&(v("a", 0, 8) * -1), "(-a) [-8, 0]");
    t(&(v("a", -3, 8) * -1 * -1), "a [-3, 8]");
}

#[test]
fn mul_mul() {
    t(&((v("a", 0, 5) * 10) * 9), "(a*90) [0, 450]");
}

#[test]
fn mul_const_first() {
    t(&(UOp::index(3) * v("a", 0, 5)), "(a*3) [0, 15]");
}

#[test]
fn mul_var_var() {
    let (a, b) = (v("a", -2, 3), v("b", 1, 4));
    t(&(&a * &b), "(a*b) [-8, 12]");
    t(&(&b * &a * 2), "((a*b)*2) [-16, 24]");
    t(&((&a * 2) * (&b * 3)), "((a*b)*6) [-48, 72]");
}

#[test]
fn mul_canonical_order() {
    let (a, b, c) = (v("a", 0, 3), v("b", 0, 3), v("c", 0, 3));
    assert_eq!((&c * &a * &b).simplify(), (&a * &b * &c).simplify());
    t(&(&c * &b * &a), "((a*b)*c) [0, 27]");
}

#[test]
fn mul_negative_bounds() {
    let (a, b) = (v("a", -5, -2), v("b", -3, 4));
    t(&(&a * &b), "(a*b) [-20, 15]");
    t(&(&a * &a), "(a*a) [4, 25]");
}

#[test]
fn mul_then_sub() {
    let a = v("a", 0, 5);
    t(&(&a * 4 - &a * 4), "0 [0, 0]");
}

#[test]
fn mul_zero_bounds_var() {
    t(&(v("a", 0, 5) * v("z", 0, 0)), "0 [0, 0]");
}

#[test]
fn mul_by_sum_not_distributed_for_variables() {
    let (a, b, c) = (v("a", 0, 3), v("b", 0, 3), v("c", 1, 2));
    t(&((&a + &b) * &c), "(c*(a+b)) [0, 12]");
}

#[test]
fn bool_mul_is_and() {
    let (a, b) = (v("a", 0, 5).lt(3), v("b", 0, 5).lt(2));
    let s = (&a * &b).simplify();
    assert_eq!(s, (&a & &b).simplify());
    assert_eq!(s.to_string(), "((a<3)&(b<2))");
}

#[test]
fn bool_add_is_or() {
    let (a, b) = (v("a", 0, 5).lt(3), v("b", 0, 5).lt(2));
    assert_eq!((&a + &b).simplify().to_string(), "((a<3)|(b<2))");
    assert_eq!(a.maximum(&b).simplify().to_string(), "((a<3)|(b<2))");
}

#[test]
fn float_mul_identities() {
    let f = UOp::new(
        tinygrad_uop::Ops::Load,
        DType::FLOAT32,
        vec![],
        tinygrad_uop::Arg::None,
    );
    assert_eq!((&f * 1.0).simplify(), f);
    // x*0 is not 0 for floats (nan, inf, -0.0)
    assert_eq!((&f * 0.0).simplify(), &f * 0.0);
    // x+0 is not x for x == -0.0
    assert_eq!((&f + 0.0).simplify(), &f + 0.0);
    // x-x is not 0 for inf
    assert_ne!((&f - &f).simplify(), UOp::cnst(DType::FLOAT32, 0.0));
}

#[test]
fn float_const_fold_rounds_to_f32() {
    let e = UOp::cnst(DType::FLOAT32, 0.1) + UOp::cnst(DType::FLOAT32, 0.2);
    let s = e.simplify();
    assert_eq!(s.as_const().unwrap().as_f64(), (0.1f32 + 0.2f32) as f64);
}

#[test]
fn int8_mul_wraps() {
    let e = UOp::cnst(DType::INT8, 100) * UOp::cnst(DType::INT8, 3);
    assert_eq!(e.simplify().as_int(), Some(44));
}

/// Repeated squaring (`x^(2^40)` as 40 shared squarings) simplifies at once: flattening the
/// product would build a chain of 2^40 factors (it hung integer `pow`).
#[test]
fn repeated_squaring_does_not_flatten_exponentially() {
    let x = v("a", 0, 8);
    let mut p = x.clone();
    for _ in 0..40 {
        p = &p * &p;
    }
    let s = p.simplify();
    assert!(s.toposort().len() <= 200, "{} nodes", s.toposort().len());
    // small products are still normalized: a*a*a*a in canonical order
    let q = (&x * &x) * (&x * &x);
    assert_eq!(q.simplify(), ((&x * &x) * &x * &x).simplify());
}
