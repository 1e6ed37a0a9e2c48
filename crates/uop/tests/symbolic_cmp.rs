//! Comparisons: folding from bounds, moving constants, factoring, simplex, negation.

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
fn cmp_simple() {
    t(&v("a", 3, 8).lt(4), "(a<4) [0, 1]");
    t(&v("a", 3, 8).ge(8), "(!(a<8)) [0, 1]");
}

#[test]
fn ge() {
    let a = v("a", 3, 8);
    for (c, want) in [
        (77, "false [0, 0]"),
        (9, "false [0, 0]"),
        (3, "true [1, 1]"),
        (2, "true [1, 1]"),
    ] {
        t(&a.ge(c), want);
    }
    t(&a.ge(4), "(!(a<4)) [0, 1]");
}

#[test]
fn lt() {
    let a = v("a", 3, 8);
    for (c, want) in [
        (77, "true [1, 1]"),
        (9, "true [1, 1]"),
        (3, "false [0, 0]"),
        (2, "false [0, 0]"),
    ] {
        t(&a.lt(c), want);
    }
    t(&a.lt(8), "(a<8) [0, 1]");
}

#[test]
fn lt_variables() {
    t(&v("a", 3, 4).lt(v("b", 5, 6)), "true [1, 1]");
    t(&v("a", 3, 5).lt(v("b", 5, 6)), "(a<b) [0, 1]");
    t(&v("a", 5, 6).lt(v("b", 3, 5)), "false [0, 0]");
    t(&v("a", 3, 4).lt(v("a", 3, 4)), "false [0, 0]");
}

#[test]
fn lt_divides() {
    t(
        &(v("idx", 0, 511) * 4 + v("FLOAT4_INDEX", 0, 3)).lt(512),
        "(idx<128) [0, 1]",
    );
}

#[test]
fn lt_divides_and() {
    let f = v("FLOAT4_INDEX", 0, 3);
    let e = (v("idx1", 0, 511) * 4 + &f).lt(512) & (v("idx2", 0, 511) * 4 + &f).lt(512);
    t(&e, "((idx1<128)&(idx2<128)) [0, 1]");
}

#[test]
fn lt_factors() {
    t(
        &(v("idx1", 0, 511) * 4 + v("FLOAT4_INDEX", 0, 256)).lt(512),
        "((FLOAT4_INDEX+(idx1*4))<512) [0, 1]",
    );
}

#[test]
fn mul_lt() {
    let a = v("a", 0, 5);
    t(&(&a * 4).lt(13), "(a<4) [0, 1]");
    t(&(&a * 4).lt(16), "(a<4) [0, 1]");
    t(&(&a * -2).lt(0), "((-a)<0) [0, 1]");
    t(&(&a * 4).ge(12), "(!(a<3)) [0, 1]");
    t(&(&a * 4).ge(13), "(!(a<4)) [0, 1]");
    t(&(&a * -3).lt(-7), "((-a)<-2) [0, 1]");
}

#[test]
fn lt_remove() {
    let a = v("a", 0, 6);
    t(&a.lt(-3), "false [0, 0]");
    t(&a.lt(3), "(a<3) [0, 1]");
    t(&a.lt(8), "true [1, 1]");
    t(&a.ge(25), "false [0, 0]");
}

#[test]
fn lt_sum_remove() {
    t(&(v("a", 0, 6) + 2).lt(3), "(a<1) [0, 1]");
}

#[test]
fn lt_simple_factor() {
    t(
        &(v("a", 0, 6) * 6 + v("b", 0, 6) * 6).lt(8),
        "((a+b)<2) [0, 1]",
    );
}

#[test]
fn lt_sum_factor_rhs() {
    let (a, b, c) = (v("a", 0, 6), v("b", 0, 6), v("c", 0, 6));
    t(
        &(&a * 6 + &b * 4 + &c * 8).lt(4),
        "((((a*3)+(b*2))+(c*4))<2) [0, 1]",
    );
    t(&(&a * 6 + &b * 4 + &c * 8).lt(2), "(((a+b)+c)<1) [0, 1]");
}

#[test]
fn sum_lt_fold() {
    t(&(v("a", 0, 7) * 4 + v("b", 0, 3)).lt(16), "(a<4) [0, 1]");
    t(
        &(v("a", 0, 7) * 4 + v("b", 0, 4)).lt(16),
        "(((a*4)+b)<16) [0, 1]",
    );
    t(
        &(v("uidx", 0, 3) + v("a", 0, 1529) * 12).lt(4 * 67),
        "(a<23) [0, 1]",
    );
}

#[test]
fn lt_negative_bounds() {
    let a = v("a", -10, -3);
    t(&a.lt(-3), "(a<-3) [0, 1]");
    t(&a.lt(-2), "true [1, 1]");
    t(&(&a * 2 + 1).lt(-10), "(a<-5) [0, 1]");
    t(&(&a * -2).lt(10), "((-a)<5) [0, 1]");
}

#[test]
fn idiv_lt() {
    let idx = v("idx", 0, 24);
    t(&idx.idiv(4).lt(3), "(idx<12) [0, 1]");
    t(&(&idx - 20).idiv(4).lt(-3), "(idx<5) [0, 1]");
    t(&(&idx - 10).idiv(4).lt(0), "(idx<7) [0, 1]");
    t(&idx.idiv(-4).lt(-3), "((-(idx//4))<-3) [0, 1]");
}

#[test]
fn idiv_lt_negative_numerator() {
    let x = v("x", -30, 30);
    t(&x.idiv(4).lt(-2), "(x<-11) [0, 1]");
    t(&x.idiv(4).lt(1), "(x<4) [0, 1]");
}

#[test]
fn simplex_lt() {
    let (a, b, c) = (v("a", 0, 3), v("b", 0, 3), v("c", 0, 3));
    let d = v("d", -3, 3);
    t(&a.lt(1).ne(true), "(!(a<1)) [0, 1]");
    t(&(&a + &b).lt(1).ne(true), "(!((a+b)<1)) [0, 1]");
    t(&(&a * 3 + &b * 4).lt(1).ne(true), "(!((a+b)<1)) [0, 1]");
    t(
        &(&a * -3 + &b * 4).lt(1).ne(true),
        "(!(((a*-3)+(b*4))<1)) [0, 1]",
    );
    t(
        &(&a * 3 + &d * 4).lt(1).ne(true),
        "(!(((a*3)+(d*4))<1)) [0, 1]",
    );
    t(
        &(&a + &b + &c * 2).lt(1).ne(true),
        "(!(((a+b)+c)<1)) [0, 1]",
    );
}

#[test]
fn neg_in_comp() {
    let (a, b) = (v("a", 0, 3), v("b", 0, 3));
    t(&(-&a).lt(-&b), "(b<a) [0, 1]");
}

#[test]
fn ne_and_eq() {
    let a = v("a", 0, 5);
    t(&a.ne(7), "true [1, 1]");
    t(&a.ne(3), "(a!=3) [0, 1]");
    t(&a.eq_(9), "false [0, 0]");
    t(&(&a + 2).eq_(4), "(a==2) [0, 1]");
    t(&(&a + 2).ne(4), "(a!=2) [0, 1]");
    t(&a.ne(&a), "false [0, 0]");
    t(&a.eq_(&a), "true [1, 1]");
}

#[test]
fn eq_single_value() {
    let a = v("a", 3, 3);
    t(&a.eq_(3), "true [1, 1]");
    t(&v("b", 0, 0).ne(0), "false [0, 0]");
}

#[test]
fn symbolic_div_lt() {
    let a = v("a", 1, 10);
    let den = &a * -2 + 1;
    let num = (((&a * 2 - 1) * 2) + 1) * &a;
    t(&den, "((a*-2)+1) [-19, -1]");
    t(&num, "(a*((a*4)-1)) [3, 390]");
    // (num // den) <= 0  ==  !(0 < num // den)
    t(&UOp::index(0).lt(num.idiv(&den)).ne(true), "true [1, 1]");
}

#[test]
fn lt_pair_and_or() {
    let s = v("s", 0, 10);
    t(&(s.lt(5) & s.lt(6)), "(s<5) [0, 1]");
    t(&(s.lt(5) | s.lt(6)), "(s<6) [0, 1]");
}

#[test]
fn not_not() {
    let c = v("a", 0, 5).lt(3);
    t(&c.ne(true).ne(true), "(a<3) [0, 1]");
}
