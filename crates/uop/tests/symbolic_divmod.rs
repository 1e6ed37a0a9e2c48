//! Division and modulo folding (truncating, C semantics) with bounds, including negative
//! ranges, nested div/mod, congruences and gcds.

#![allow(
    clippy::erasing_op,
    clippy::identity_op,
    clippy::neg_multiply,
    clippy::modulo_one
)]

mod common;

use common::{t, var as v, var_of};
use tinygrad_uop::{AxisKind, UOp};

fn sum(xs: &[UOp]) -> UOp {
    xs.iter().skip(1).fold(xs[0].clone(), |a, b| a + b)
}

#[test]
fn div_1_and_mod_1() {
    t(&v("a", 0, 8).idiv(1), "a [0, 8]");
    t(&(v("a", 0, 8) % 1), "0 [0, 0]");
    t(&v("a", -8, 8).idiv(-1), "(-a) [-8, 8]");
    t(&(v("a", -8, 8) % -1), "0 [0, 0]");
}

#[test]
fn div_reduction() {
    t(&v("a", 2, 3).idiv(2), "1 [1, 1]");
}

#[test]
fn div_remove() {
    t(&v("a", 0, 7).idiv(20), "0 [0, 0]");
}

#[test]
fn mod_remove() {
    t(&(v("a", 0, 6) % 100), "a [0, 6]");
    t(&(v("a", -6, 0) % 100), "a [-6, 0]");
}

#[test]
fn div_min_max() {
    t(&v("a", 2, 7).idiv(2), "(a//2) [1, 3]");
    t(&v("a", 0, 6).idiv(2), "(a//2) [0, 3]");
}

#[test]
fn div_neg_min_max() {
    t(&v("a", 1, 7).idiv(-2), "(-(a//2)) [-3, 0]");
    t(&v("a", 0, 6).idiv(-2), "(-(a//2)) [-3, 0]");
}

#[test]
fn div_by_zero_is_zero() {
    t(&v("a", 0, 7).idiv(0), "0 [0, 0]");
    t(&(v("a", 0, 7) % 0), "0 [0, 0]");
}

#[test]
fn sum_div_remove() {
    t(&sum(&[v("a", 0, 7), v("b", 0, 3)]).idiv(20), "0 [0, 0]");
}

#[test]
fn sum_div_min_max() {
    t(
        &sum(&[v("a", 0, 7), v("b", 0, 3)]).idiv(2),
        "((a+b)//2) [0, 5]",
    );
}

#[test]
fn sum_div_mod_factor() {
    let e = sum(&[v("a", 0, 7) * 4, v("b", 0, 3) * 4]);
    t(&e.idiv(2), "((a*2)+(b*2)) [0, 20]");
    t(&(&e % 2), "0 [0, 0]");
}

#[test]
fn sum_div_some_factor() {
    t(
        &sum(&[v("a", 0, 7) * 5, v("b", 0, 3) * 4]).idiv(2),
        "((b*2)+((a*5)//2)) [0, 23]",
    );
}

#[test]
fn sum_div_trim_const() {
    t(
        &(v("a", 0, 7) * 4 + v("b", 0, 3) * 4 + 7).idiv(16),
        "(((a+b)+1)//4) [0, 2]",
    );
}

#[test]
fn sum_div_some_partial_factor() {
    t(
        &sum(&[v("a", 0, 7) * 6, v("b", 0, 7) * 6]).idiv(16),
        "(((a*3)+(b*3))//8) [0, 5]",
    );
    t(
        &sum(&[UOp::index(16), v("a", 0, 7) * 6, v("b", 0, 7) * 6]).idiv(16),
        "((((a*3)+(b*3))//8)+1) [1, 6]",
    );
    t(&(v("a", 0, 7) * 30 + 20).idiv(20), "(((a*3)//2)+1) [1, 11]");
}

#[test]
fn sum_div_no_factor() {
    t(
        &sum(&[v("a", 0, 7) * 5, v("b", 0, 3) * 5]).idiv(2),
        "(((a*5)+(b*5))//2) [0, 25]",
    );
}

#[test]
fn mod_min_max_variable_denominator() {
    t(&(v("x", 0, 10) % v("y", 1, 10)), "(x%y) [0, 9]");
    t(&(v("x", -10, 0) % v("y", 1, 10)), "(-((-x)%y)) [-9, 0]");
    t(&(v("x", 0, 10) % v("y", -10, -1)), "(x%(-y)) [0, 9]");
    t(
        &(v("x", -10, 0) % v("y", -10, -1)),
        "(-((-x)%(-y))) [-9, 0]",
    );
    t(&(v("x", -10, 10) % v("y", -10, -1)), "(x%(-y)) [-9, 9]");
}

#[test]
fn mod_bounds_without_rewrite() {
    assert_eq!((v("x", -10, 0) % v("y", -10, -1)).bounds(), (-9, 0));
    assert_eq!((v("x", -10, 0) % v("y", 1, 10)).bounds(), (-9, 0));
    assert_eq!((v("x", 3, 5) % v("y", 7, 10)).bounds(), (3, 5));
}

#[test]
fn div_min_max_variable_denominator() {
    t(&v("x", 0, 10).idiv(v("y", 1, 10)), "(x//y) [0, 10]");
    t(&v("x", -10, 0).idiv(v("y", 1, 10)), "(-((-x)//y)) [-10, 0]");
    t(
        &v("x", 0, 10).idiv(v("y", -10, -1)),
        "(-(x//(-y))) [-10, 0]",
    );
    t(
        &v("x", -10, 0).idiv(v("y", -10, -1)),
        "((-x)//(-y)) [0, 10]",
    );
    t(&v("x", -10, 10).idiv(v("y", 1, 10)), "(x//y) [-10, 10]");
    t(
        &v("x", -10, 10).idiv(v("y", -10, -1)),
        "(-(x//(-y))) [-10, 10]",
    );
}

#[test]
fn divmod_variable_denominator_fold_to_const() {
    let (x, y) = (v("x", 20, 23), v("y", 8, 10));
    t(&x.idiv(&y), "2 [2, 2]");
    t(&(&x % &y), "(x+(y*-2)) [0, 7]");
    let (x, y) = (v("x", -10, 10), v("y", -8, 9));
    t(&x.idiv(&y), "(x//y) [-10, 10]");
    t(&(&x % &y), "(x%y) [-8, 8]");
}

#[test]
fn range_div_mod_its_symbolic_bound() {
    let a = v("a", 1, 10);
    let r = UOp::range(&a + 2, 0, AxisKind::Loop);
    assert_eq!(r.idiv(&a + 2).simplify(), UOp::index(0));
    assert_eq!((&r % (&a + 2)).simplify(), r);
    assert_eq!(r.bounds(), (0, 11));
}

#[test]
fn mod_factor() {
    t(
        &(sum(&[v("a", 0, 7) * 100, v("b", 0, 3) * 50]) % 100),
        "((b%2)*50) [0, 50]",
    );
}

#[test]
fn mod_to_sub() {
    t(&((UOp::index(1) + v("a", 1, 2)) % 2), "(a-1) [0, 1]");
}

#[test]
fn mod_congruence() {
    t(&((v("a", 0, 3) * 3 + 3) % 4), "((-a)+3) [0, 3]");
    t(&((v("a", 0, 3) * 13 + 17) % 18), "((a*-5)+17) [2, 17]");
    t(&((v("a", 0, 3) * 9 + 2) % 18), "(((a%2)*9)+2) [2, 11]");
}

#[test]
fn mod_congruence_mul_add() {
    t(&(((v("a", 0, 2) + 1) * 6) % 9), "((a*-3)+6) [0, 6]");
}

#[test]
fn mod_congruence_multiple_vars() {
    let (x, y, z) = (v("x", 0, 3), v("y", 0, 3), v("z", 0, 2));
    t(&((&x * 9 + &y * 9 + 9) % 10), "(((-x)-y)+9) [3, 9]");
    let (x2, y2) = (v("x", 0, 2), v("y", 0, 2));
    t(
        &((&x2 * 9 + &y2 * 9 + &z + 7) % 10),
        "((((-x)-y)+z)+7) [3, 9]",
    );
    let y4 = v("y", 0, 4);
    t(
        &((&x2 * 12 + (&y4 % 3) + 10) % 13),
        "(((-x)+(y%3))+10) [8, 12]",
    );
}

#[test]
fn div_congruence() {
    t(&((v("a", 0, 3) * 3 + 3).idiv(4)), "a [0, 3]");
    t(&((v("a", 0, 2) * 17 + 35).idiv(18)), "(a+1) [1, 3]");
}

#[test]
fn div_congruence_multiple_vars() {
    t(
        &((v("x", 0, 3) * 19 + v("y", 0, 2) * 18 + 9).idiv(10)),
        "((x*2)+(y*2)) [0, 10]",
    );
}

#[test]
fn mod_binary_expression() {
    t(&((v("a", 0, 1) + 3) % 4), "((a*-3)+3) [0, 3]");
    t(&((v("a", 4, 5) + 3) % 4), "((a*-3)+15) [0, 3]");
    t(&((v("a", 4, 5) * 7 - 3).idiv(4)), "((a*2)-2) [6, 8]");
}

#[test]
fn sum_div_const() {
    t(&(v("a", 0, 7) * 4 + 3).idiv(4), "a [0, 7]");
}

#[test]
fn sum_div_const_big() {
    t(&(v("a", 0, 7) * 4 + 3).idiv(16), "(a//4) [0, 1]");
}

#[test]
fn mul_mod_large_and_small() {
    t(&((v("a", 0, 20) * 10) % 9), "(a%9) [0, 8]");
    t(&((v("a", 0, 5) * 10) % 9), "a [0, 5]");
}

#[test]
fn mod_mod() {
    let a = v("a", 0, 31);
    t(&((&a % 12) % 4), "(a%4) [0, 3]");
    t(&(((&a * 4) % 12) % 4), "0 [0, 0]");
    t(&(((&a * 5) % 12) % 5), "(((a*5)%12)%5) [0, 4]");
    t(&((&a % 4) % 12), "(a%4) [0, 3]");
    t(&((&a % 4) % 4), "(a%4) [0, 3]");
}

#[test]
fn mod_mod_negative_numerator() {
    let a = v("a", -31, 31);
    t(&((&a % 12) % 4), "(a%4) [-3, 3]");
    t(&((&a % 4) % 4), "(a%4) [-3, 3]");
}

#[test]
fn mod_mod_wrong_sign() {
    let (v1, v3) = (v("v1", 0, 128), v("v3", 0, 7));
    t(
        &((((&v1 % 2) * 2) + ((&v3 - 1) % 5) - 2) % 5),
        "((((v1%2)*2)+((v3-1)%5))-2) [-3, 4]",
    );
}

#[test]
fn mod_mod_wrong_sign2() {
    let (v2, v3) = (v("v2", 0, 8), v("v3", 0, 4));
    t(
        &(((((&v3 + 3) % 7) + (&v2 - 2)) % 7) % 7),
        "(((v2+((v3+3)%7))-2)%7) [-2, 6]",
    );
}

#[test]
fn div_div() {
    t(&v("a", 0, 1800).idiv(10).idiv(9), "(a//90) [0, 20]");
    t(&v("a", -1800, 1800).idiv(10).idiv(9), "(a//90) [-20, 20]");
    t(
        &v("a", -1800, 1800).idiv(-10).idiv(9),
        "((-(a//10))//9) [-20, 20]",
    );
}

#[test]
fn div_const_div() {
    let a = v("a", 0, 124);
    t(&(a.idiv(2) + 1).idiv(2), "((a+2)//4) [0, 31]");
    t(&((-&a).idiv(2) - 1).idiv(2), "(-((a+2)//4)) [-31, 0]");
    t(
        &((-&a).idiv(2) + 10).idiv(2),
        "(((-(a//2))+10)//2) [-26, 5]",
    );
}

#[test]
fn div_const_div_wrong_sign() {
    let a = v("a", 0, 124);
    t(
        &((&a - 10).idiv(2) + 10).idiv(2),
        "((((a-10)//2)+10)//2) [2, 33]",
    );
}

#[test]
fn div_const_div_wrong_sign_divisor() {
    let a = v("a", 0, 124);
    t(
        &((&a + 10).idiv(-2) + 10).idiv(-4),
        "(-(((-(a//2))+5)//4)) [-1, 14]",
    );
}

#[test]
fn neg_mod() {
    let a = v("a", 0, 124);
    t(&((-&a) % 4), "(-(a%4)) [-3, 0]");
    t(&(&a % -4), "(a%4) [0, 3]");
}

#[test]
fn mod_mul_sum() {
    t(
        &(sum(&[v("b", 0, 2), v("a", 0, 5) * 10]) % 9),
        "(a+b) [0, 7]",
    );
}

#[test]
fn big_mod() {
    t(&(v("a", -20, 20) % 10), "(a%10) [-9, 9]");
    t(&(v("a", -20, 0) % 10), "(-((-a)%10)) [-9, 0]");
    t(&(v("a", -20, 1) % 10), "(a%10) [-9, 1]");
    t(&(v("a", 0, 20) % 10), "(a%10) [0, 9]");
    t(&(v("a", -1, 20) % 10), "(a%10) [-1, 9]");
}

#[test]
fn mod_factor_negative() {
    t(
        &(sum(&[UOp::index(-29), v("a", 0, 10), v("b", 0, 10) * 28]) % 28),
        "(((a+(b*28))-29)%28) [-27, 27]",
    );
    t(
        &(sum(&[UOp::index(-29), v("a", 0, 100), v("b", 0, 10) * 28]) % 28),
        "(((a+(b*28))-29)%28) [-27, 27]",
    );
}

#[test]
fn div_cancel_mixed_sign_is_not_floor_division() {
    // floor division would give b-1; truncation must keep it
    let e = sum(&[UOp::index(-40), v("a", 0, 10) * 2, v("b", 0, 10) * 40]);
    t(&e.idiv(40), "(((a+(b*20))-20)//20) [-1, 9]");
    t(&(&e % 40), "((((a+(b*20))-20)%20)*2) [-38, 38]");
}

#[test]
fn mul_div() {
    t(&(v("a", 0, 10) * 4).idiv(4), "a [0, 10]");
    t(&(v("a", -10, 10) * 4).idiv(4), "a [-10, 10]");
}

#[test]
fn div_drop_small_terms_not_applied() {
    let (gidx0, gidx1) = (v("gidx0", 0, 10), v("gidx1", 0, 10));
    let (lidx0, lidx1) = (v("lidx0", 0, 1), v("lidx1", 0, 1));
    let (r5, r6) = (v("ridx1005", 0, 2), v("ridx1006", 0, 2));
    let e = &lidx1 + (&gidx1 * 18 + &r5 * 18 + &lidx0 * 162) + &gidx0 * 2 + &r6 * 2 - 40;
    t(
        &e.idiv(18),
        "((((((((gidx0*2)+(gidx1*18))+(lidx0*162))+lidx1)+(ridx1005*18))+(ridx1006*2))-40)//18) [-2, 20]",
    );
}

#[test]
fn add_div() {
    let a = v("a", 0, 5);
    t(&(&a - 2).idiv(4), "0 [0, 0]");
    t(&(&a - 1).idiv(4), "((a-1)//4) [0, 1]");
    t(&a.idiv(4), "(a//4) [0, 1]");
    t(&(&a + 1).idiv(4), "((a+1)//4) [0, 1]");
    t(&(&a + 2).idiv(4), "((a+2)//4) [0, 1]");
    t(&(&a + 3).idiv(4), "((a+3)//4) [0, 2]");
    t(&(&a + 4).idiv(4), "((a//4)+1) [1, 2]");
    t(&(&a + 5).idiv(4), "(((a+1)//4)+1) [1, 2]");
}

#[test]
fn div_neg_rem() {
    t(
        &(-v("a", 0, 255) + 256).idiv(2),
        "((-((a+1)//2))+128) [0, 128]",
    );
}

#[test]
fn mul_div_factor() {
    t(&(v("a", 0, 10) * 8).idiv(4), "(a*2) [0, 20]");
    t(&(v("a", 0, 10) * -8 + 16).idiv(4), "((a*-2)+4) [-16, 4]");
    t(&(v("a", 0, 10) * 4).idiv(8), "(a//2) [0, 5]");
    t(&(v("a", 0, 10) * -4 + 4).idiv(8), "(((-a)+1)//2) [-4, 0]");
}

#[test]
fn mod_gcd() {
    t(&((v("a", 0, 10) * -4 + 4) % 8), "((((-a)+1)%2)*4) [-4, 4]");
    t(&((v("a", 0, 10) * -8 + 20) % 4), "0 [0, 0]");
    t(&((v("a", 0, 10) * 6 + 4) % 8), "((((a*3)+2)%4)*2) [0, 6]");
}

#[test]
fn sum_div_partial_remove() {
    t(
        &sum(&[v("idx0", 0, 127) * 4, v("idx2", 0, 3)]).idiv(4),
        "idx0 [0, 127]",
    );
}

#[test]
fn cdiv_cmod_const_evaluation() {
    t(&(v("a", 0, 2) - 12).idiv(8), "-1 [-1, -1]");
    t(&(-v("a", 0, 2)).idiv(7), "0 [0, 0]");
    t(&((v("a", 1, 1) * -3) % 8), "-3 [-3, -3]");
    t(&((-v("a", 10, 10)) % 7), "-3 [-3, -3]");
}

#[test]
fn div_numerator_negative() {
    t(
        &(v("idx", 0, 9) * -10).idiv(11),
        "(-((idx*10)//11)) [-8, 0]",
    );
}

#[test]
fn nest_div_negative_factor() {
    let (r0, r1) = (v("ridx0", 0, 9), v("ridx1", 0, 6));
    t(
        &((&r0 * -7 + &r1 + 63).idiv(35)),
        "((-(ridx0//5))+1) [0, 1]",
    );
}

#[test]
fn div_into_mod() {
    t(&(((v("idx", 0, 16) * 4) % 8).idiv(4)), "(idx%2) [0, 1]");
}

#[test]
fn div_neg_cancel() {
    let idx = v("idx", 0, 100);
    t(&((-&idx + 199).idiv(-4) + 50), "((idx//4)+1) [1, 26]");
    t(&((-&idx + 200).idiv(-4) + 50), "((idx+3)//4) [0, 25]");
    t(&((-&idx + 201).idiv(-4) + 50), "((idx+2)//4) [0, 25]");
    t(&(-&idx).idiv(2), "(-(idx//2)) [-50, 0]");
    t(&idx.idiv(-2), "(-(idx//2)) [-50, 0]");
}

#[test]
fn sum_div_big_const() {
    let g = v("gidx0", 0, 24);
    t(&(&g + 19).idiv(20), "((gidx0+19)//20) [0, 2]");
    t(&(&g + 20).idiv(20), "((gidx0//20)+1) [1, 2]");
    t(&(&g + 21).idiv(20), "(((gidx0+1)//20)+1) [1, 2]");
}

#[test]
fn sum_div_complex1() {
    let (g0, g1, g2) = (v("gidx0", 0, 24), v("gidx1", 0, 1), v("gidx2", 0, 255));
    let (l0, l1, l2) = (v("lidx0", 0, 1), v("lidx1", 0, 15), v("lidx2", 0, 3));
    let alu0 = &g2 * 640 + &g1 * 160 + g0.idiv(5) * 2 + &l0 * 320 + &l1 * 10;
    t(
        &((alu0 + &l2 * 2 + 1).idiv(20)),
        "((((gidx1*8)+(gidx2*32))+(lidx0*16))+((lidx1+((lidx2+(gidx0//5))//5))//2)) [0, 8192]",
    );
}

#[test]
fn sum_div_complex2() {
    let (g0, l2, l3) = (v("gidx0", 0, 7), v("lidx2", 0, 1), v("lidx3", 0, 1));
    t(
        &((&g0 * 4 + &l2 * 2 + 1).idiv(10)),
        "(((gidx0*2)+lidx2)//5) [0, 3]",
    );
    t(
        &((&g0 * 4 + &l2 * 2 + &l3).idiv(10)),
        "(((gidx0*2)+lidx2)//5) [0, 3]",
    );
    t(&((&g0 * 2 + &l2).idiv(10)), "(gidx0//5) [0, 1]");
}

#[test]
fn sum_div_complex3() {
    let (g0, l2, l3) = (v("gidx0", 0, 7), v("lidx2", 0, 12), v("lidx3", 0, 1));
    t(
        &((&g0 * 4 + &l2 * 2 + &l3).idiv(12)),
        "((gidx0+(lidx2//2))//3) [0, 4]",
    );
    t(
        &((&l2 * 2 + &g0 * 4 + &l3).idiv(12)),
        "((gidx0+(lidx2//2))//3) [0, 4]",
    );
}

#[test]
fn div_neg_all_range() {
    let (g, l) = (v("gidx", 0, 124), v("lidx", 0, 7));
    for k in [999, 1000, 1001, 1002] {
        let e = (-&g * 8 - &l + k).idiv(-4) + 250;
        let s = e.simplify();
        common::exhaustive_equal(&e, &s);
        assert!(s.toposort().len() < e.toposort().len(), "{e} -> {s}");
    }
    t(
        &((-&g * 8 - &l + 999).idiv(-4) + 250),
        "(((gidx*2)+(lidx//4))+1) [1, 250]",
    );
}

#[test]
fn div_neg_then_neg() {
    let (l0, l1) = (v("lidx0", 0, 7), v("lidx1", 0, 7));
    let alu2 = -&l0 - &l1;
    t(&((&alu2 + 14).idiv(-32) + 4), "4 [4, 4]");
    t(&(-((&alu2 + 14).idiv(-32) + 4)), "-4 [-4, -4]");
    t(
        &((&alu2 + 134).idiv(-32) + 4),
        "(((lidx0+lidx1)+25)//32) [0, 1]",
    );
    t(&((&alu2 + 142).idiv(-32) + 4), "0 [0, 0]");
    t(&((&alu2 + 158).idiv(-32) + 4), "0 [0, 0]");
}

#[test]
fn div_mod_recombine() {
    let g = v("gidx", 0, 124);
    t(&(&g % 4 + g.idiv(4) * 4), "gidx [0, 124]");
    t(&(g.idiv(4) * 4 + &g % 4), "gidx [0, 124]");
    let n = v("n", -50, 50);
    t(&(&n % 7 + n.idiv(7) * 7), "n [-50, 50]");
    t(
        &((&n % 7) * 3 + n.idiv(7) * 21 + 5),
        "((n*3)+5) [-145, 155]",
    );
}

#[test]
fn div_mod_recombine_folded_mod() {
    let a = v("a", 0, 2);
    let e = &a * 31 + 1;
    t(&((&e % 30) + e.idiv(30) * 30), "((a*31)+1) [1, 63]");
    let b = v("b", 0, 100);
    let e2 = &b * 31 + 1;
    t(
        &((&e2 % 18) + e2.idiv(18) * 18),
        "(((((b*31)+1)//18)*18)+(((b*13)+1)%18)) [0, 3113]",
    );
}

#[test]
fn div_mod_recombine_with_gcd() {
    let b = v("b", 0, 100);
    let e = &b * 16 + 2;
    t(&((&e % 18) + e.idiv(18) * 18), "((b*16)+2) [2, 1602]");
}

#[test]
fn arange_unrolled4() {
    let g = v("gidx", 0, 2559);
    let e = (&g + 2561).idiv(4) + (&g + 2562).idiv(4) + (&g + 2560).idiv(4) + (&g + 2559).idiv(4);
    t(&e, "(gidx+2559) [2559, 5118]");
}

#[test]
fn arange_unrolled4_mul() {
    let g = v("gidx", 0, 2559);
    let e = (&g + 2561).idiv(4) * 2
        + (&g + 2562).idiv(4) * 2
        + (&g + 2560).idiv(4) * 2
        + (&g + 2559).idiv(4) * 2;
    t(&e, "((gidx*2)+5118) [5118, 10236]");
}

#[test]
fn arange_unrolled4_small() {
    for hi in [3, 2, 1] {
        let g = v("gidx", 0, hi);
        let e = g.idiv(4) + (&g + 2).idiv(4) + (&g + 3).idiv(4) + (&g + 1).idiv(4);
        assert_eq!(e.simplify(), g, "hi={hi}");
    }
}

#[test]
fn arange_unrolled2() {
    let g = v("gidx", 0, 2559);
    t(
        &((&g + 2559).idiv(2) + (&g + 2560).idiv(2) + 3),
        "(gidx+2562) [2562, 5121]",
    );
}

#[test]
fn arange_unrolled2_neg() {
    let r = v("ridx", 0, 255);
    t(
        &(-((-&r + 255).idiv(2)) - (-&r + 256).idiv(2)),
        "(ridx-255) [-255, 0]",
    );
}

#[test]
fn arange_negative_numerators_not_folded() {
    let g = v("gidx", -3, 5);
    t(
        &(g.idiv(2) + (&g + 1).idiv(2)),
        "((gidx//2)+((gidx+1)//2)) [-2, 5]",
    );
}

#[test]
fn variable_denominator_quotient() {
    let (i, y) = (v("i", 0, 4), v("y", 1, 10));
    let r = v("r", 0, 9);
    t(&((&i * &y + &r).idiv(&y)), "(i+(r//y)) [0, 13]");
    t(&((&i * &y + &r) % &y), "(r%y) [0, 9]");
    t(&((&y * 3).idiv(&y)), "3 [3, 3]");
}

#[test]
fn variable_denominator_may_be_zero() {
    // y can be 0: x // 0 == 0, so (y*3)//y is not 3
    let y = v("y", 0, 10);
    t(&((&y * 3).idiv(&y)), "((y*3)//y) [0, 30]");
    t(&y.idiv(&y), "(y//y) [0, 10]");
}

#[test]
fn divide_by_gcd_variable() {
    let (x, y) = (v("x", -10, 10), v("y", 1, 5));
    t(&((&x * 4).idiv(&y * 6)), "((x*2)//(y*3)) [-6, 6]");
    t(&((&x * 4) % (&y * 6)), "(((x*2)%(y*3))*2) [-28, 28]");
}

#[test]
fn resnet_half_index() {
    let (g0, g1, g2) = (v("gidx0", 0, 3), v("gidx1", 0, 127), v("gidx2", 0, 7));
    let (l3, l4, l5) = (v("lidx3", 0, 7), v("lidx4", 0, 1), v("lidx5", 0, 15));
    let idx = ((&l5 + 1) % 16) * 49
        + ((&l5 + 262145).idiv(16)) * 802816
        + &g0 * 3211264
        + &g1 * 784
        + &g2 * 8
        + &l4 * 100352
        - 13151129600i64
        + &l3;
    t(
        &idx,
        "((((((((gidx0*3211264)+(gidx1*784))+(gidx2*8))+lidx3)+(lidx4*100352))+(((lidx5+1)//16)*802816))+(((lidx5+1)%16)*49))+2207744) [2207744, 12845070]",
    );
}

#[test]
fn fuzz_failure1() {
    let (v1, v2, v3) = (v("v1", 0, 8), v("v2", 0, 2), v("v3", 0, 1));
    let zero = UOp::index(0);
    let e = (((((zero.idiv(4) % 2).idiv(8) - 2 - 4 - 3 + &v1 - 4 + &v2 - 2 + &v3 + &v2).idiv(3)
        % 7)
        * 1)
    .idiv(2)
        + &v2)
        * -1
        + 2
        + 1
        + 0
        - 3
        + &v3;
    t(&e, "((((-v2)+v3)-(((v2+((v1+v3)//2))+1)//3))+2) [-2, 3]");
}

#[test]
fn binary_digits_recombine() {
    // (x%c) + c*((x//c)%m) -> x%(c*m), repeatedly: the digits of a ramp give the index back
    let g = v("gidx", 0, 63);
    let digits = sum(&[
        &g % 2,
        (g.idiv(2) % 2) * 2,
        (g.idiv(4) % 2) * 4,
        (g.idiv(8) % 2) * 8,
        (g.idiv(16) % 2) * 16,
        g.idiv(32) * 32,
    ]);
    t(&digits, "gidx [0, 63]");
    // truncating division: also for negative values
    let n = v("n", -50, 50);
    t(
        &(&n % 2 + (n.idiv(2) % 2) * 2 + n.idiv(4) * 4),
        "n [-50, 50]",
    );
    t(&(&n % 3 + (n.idiv(3) % 5) * 3), "(n%15) [-14, 14]");
    // a digit with the wrong weight stays
    t(
        &(&g % 2 + (g.idiv(2) % 2) * 4),
        "((gidx%2)+(((gidx//2)%2)*4)) [0, 5]",
    );
}

#[test]
fn digit_recombine_in_a_narrow_dtype() {
    // int8: 3 * 100 = 300 is no int8 (a wrapped modulus would be 44); the sum stays exact
    let x = var_of(tinygrad_uop::DType::INT8, "x", -128, 127);
    t(
        &(&x % 3i64 + (x.idiv(3i64) % 100i64) * 3i64),
        "((x%3)+((x//3)*3)) [-128, 127]",
    );
}
