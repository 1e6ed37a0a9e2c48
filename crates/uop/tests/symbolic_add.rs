//! Sums: like terms, constants, canonical order, negation and subtraction.

#![allow(
    clippy::erasing_op,
    clippy::identity_op,
    clippy::neg_multiply,
    clippy::modulo_one
)]

mod common;

use common::{t, var as v};
use tinygrad_uop::UOp;

#[test]
fn factorize() {
    let (a, b) = (v("a", 0, 8), v("b", 0, 8));
    t(&(&a * 2 + &a * 3), "(a*5) [0, 40]");
    t(&(&b + &a * 2 + &a * 3), "((a*5)+b) [0, 48]");
}

#[test]
fn factorize_no_mul() {
    let (a, b) = (v("a", 0, 8), v("b", 0, 8));
    t(&(&a + &a * 3), "(a*4) [0, 32]");
    t(&((&a + &b) + &a * 3), "((a*4)+b) [0, 40]");
    t(&((&a * 3 + &b) + &b * 3), "((a*3)+(b*4)) [0, 56]");
}

#[test]
fn add_self() {
    let (a, b) = (v("a", 0, 8), v("b", 0, 8));
    t(&(&a + &a), "(a*2) [0, 16]");
    t(&((&a + &b) + &b), "(a+(b*2)) [0, 24]");
    t(&((&a * 3 + &b) + &a), "((a*4)+b) [0, 40]");
    t(&((&a + &b) + &a * 3), "((a*4)+b) [0, 40]");
}

#[test]
fn sub_self() {
    let a = v("a", 0, 8);
    t(&(&a - &a), "0 [0, 0]");
    t(&(&a * 3 - &a), "(a*2) [0, 16]");
}

#[test]
fn add_zero() {
    t(&(v("a", 0, 8) + 0), "a [0, 8]");
    t(&(UOp::index(0) + v("a", 0, 8)), "a [0, 8]");
}

#[test]
fn add_one_and_sub_one() {
    t(&(v("a", 0, 8) + 1), "(a+1) [1, 9]");
    t(&(v("a", 0, 8) - 1), "(a-1) [-1, 7]");
}

#[test]
fn neg() {
    t(&(-v("a", 0, 8)), "(-a) [-8, 0]");
    t(&(-(-v("a", 0, 8))), "a [0, 8]");
}

#[test]
fn add_min_max() {
    t(&(v("a", 0, 8) * 2 + 12), "((a*2)+12) [12, 28]");
}

#[test]
fn sum_combine_num() {
    t(&(UOp::index(29) + v("a", 0, 10) + -23), "(a+6) [6, 16]");
}

#[test]
fn sum_const_terms_cancel() {
    let a = v("a", 0, 1);
    t(&((&a * -4 + 1) + &a * 4), "1 [1, 1]");
}

#[test]
fn sum_of_one() {
    t(&v("a", 0, 7), "a [0, 7]");
}

#[test]
fn constants_move_to_the_end() {
    let (a, b) = (v("a", 0, 8), v("b", 0, 8));
    t(&((&a + 3) + &b), "((a+b)+3) [3, 19]");
    t(&((UOp::index(3) + &a) + (&b + 4)), "((a+b)+7) [7, 23]");
    t(&(((&a + 1) + 2) + 3), "(a+6) [6, 14]");
}

#[test]
fn sums_are_canonical_regardless_of_order() {
    let (a, b, c) = (v("a", 0, 8), v("b", 0, 8), v("c", 0, 8));
    let x = (&a + &b + &c).simplify();
    assert_eq!((&c + &a + &b).simplify(), x);
    assert_eq!((&b + (&c + &a)).simplify(), x);
    t(&((&c + &a) + &b), "((a+b)+c) [0, 24]");
}

#[test]
fn difference_of_permuted_sums_is_zero() {
    let (a, b, c) = (v("a", -5, 8), v("b", 0, 8), v("c", -3, 3));
    t(&((&a + &b * 2 + &c) - (&c + &a + &b + &b)), "0 [0, 0]");
}

#[test]
fn subtract_sums() {
    let (a, b) = (v("a", 0, 8), v("b", 0, 8));
    t(&((&a + &b) - (&a - &b)), "(b*2) [0, 16]");
    t(&((&a * 3 + 7) - (&a * 2 + 5)), "(a+2) [2, 10]");
}

#[test]
fn negative_ranges_sum() {
    let (a, b) = (v("a", -10, -2), v("b", -3, 4));
    t(&(&a + &b), "(a+b) [-13, 2]");
    t(&(&a - &b), "(a-b) [-14, 1]");
    t(&(&a * -2 + &b * 3 - 1), "(((a*-2)+(b*3))-1) [-6, 31]");
}

#[test]
fn distribute_const_over_sum() {
    let (a, b) = (v("a", 0, 3), v("b", 0, 5));
    t(&((&a + &b) * 3), "((a*3)+(b*3)) [0, 24]");
    t(&((UOp::index(1) + &a) * -2 + 12), "((a*-2)+10) [4, 10]");
}

#[test]
fn sum_mul_distribute() {
    let (g, l2, l3) = (v("gidx0", 0, 7), v("lidx2", 0, 12), v("lidx3", 0, 1));
    t(
        &((&g + &l2 + &l3) * 4),
        "(((gidx0*4)+(lidx2*4))+(lidx3*4)) [0, 80]",
    );
}

#[test]
fn negate_sum() {
    let (a, b) = (v("a", 0, 3), v("b", 0, 5));
    t(&(-(&a + &b + 2)), "(((-a)-b)-2) [-10, -2]");
}

#[test]
fn nested_like_terms() {
    let (a, b) = (v("a", 0, 4), v("b", 0, 4));
    let x = &a * 2 + &b;
    t(&(&x * 3 - &b * 3), "(a*6) [0, 24]");
    t(&(&x + &x + &x), "((a*6)+(b*3)) [0, 36]");
}

#[test]
fn product_terms_combine() {
    let (a, b) = (v("a", 0, 4), v("b", 0, 4));
    t(&(&a * &b + &b * &a), "((a*b)*2) [0, 32]");
    t(&(&a * &b * 3 - &b * &a), "((a*b)*2) [0, 32]");
}

#[test]
fn div_terms_combine() {
    let a = v("a", 0, 40);
    t(&(a.idiv(4) + a.idiv(4) * 2), "((a//4)*3) [0, 30]");
    t(&(a.idiv(4) * 3 - a.idiv(4) * 3), "0 [0, 0]");
}

#[test]
fn const_folding() {
    t(&(UOp::index(3) + 4), "7 [7, 7]");
    t(&(UOp::index(3) - 10), "-7 [-7, -7]");
    t(&(UOp::index(3) * UOp::index(4) + 1), "13 [13, 13]");
}

#[test]
fn const_var_is_const() {
    t(&v("fake", 1, 1), "1 [1, 1]");
    t(&(v("fake", 3, 3) + v("a", 0, 2)), "(a+3) [3, 5]");
}

#[test]
fn sum_bounds_negative_coefficients() {
    let (a, b) = (v("a", 1, 5), v("b", -2, 7));
    t(&(&a * -3 + &b * 2 + 10), "(((a*-3)+(b*2))+10) [-9, 21]");
}

#[test]
fn large_sum_collects() {
    let a = v("a", 0, 3);
    let mut s = UOp::index(0);
    for i in 0..20 {
        s = &s + &a * (i % 3) + 1;
    }
    t(&s, "((a*19)+20) [20, 77]");
}

#[test]
fn int32_wraps_are_kept() {
    use tinygrad_uop::DType;
    let a = UOp::new(
        tinygrad_uop::Ops::DefineVar,
        DType::INT32,
        vec![],
        tinygrad_uop::Arg::Var("w".into(), 0, 10),
    );
    let c = UOp::cnst(DType::INT32, i32::MAX);
    let e = &a + &c;
    let s = e.simplify();
    // the sum may wrap: bounds are the full int32 range
    assert_eq!((s.vmin(), s.vmax()), (i32::MIN as i64, i32::MAX as i64));
    assert_eq!(
        ((&a + 5) + &c).simplify(),
        (&a + UOp::cnst(DType::INT32, i32::MIN + 4)).simplify()
    );
}
