//! vmin/vmax range analysis on every kind of integer node, and simplification around
//! variables, ranges, special ids, casts and bool algebra.

#![allow(
    clippy::erasing_op,
    clippy::identity_op,
    clippy::neg_multiply,
    clippy::modulo_one
)]

mod common;

use common::{t, var as v};
use tinygrad_uop::{Arg, AxisKind, DType, Ops, UOp};

#[test]
fn const_and_var_bounds() {
    assert_eq!(UOp::index(7).bounds(), (7, 7));
    assert_eq!(UOp::index(-7).bounds(), (-7, -7));
    assert_eq!(v("a", -3, 9).bounds(), (-3, 9));
    assert_eq!(UOp::cnst(DType::BOOL, true).bounds(), (1, 1));
    assert_eq!(
        UOp::cnst(DType::UINT32, u32::MAX).bounds(),
        (u32::MAX as i64, u32::MAX as i64)
    );
}

#[test]
fn range_and_special_bounds() {
    let r = UOp::range(16, 0, AxisKind::Loop);
    assert_eq!(r.bounds(), (0, 15));
    let s = UOp::new(
        Ops::Special,
        DType::INDEX,
        vec![UOp::index(32)],
        Arg::str("gidx0"),
    );
    assert_eq!(s.bounds(), (0, 31));
    let n = v("n", 1, 10);
    assert_eq!(UOp::range(&n * 4, 1, AxisKind::Reduce).bounds(), (0, 39));
    t(&(&r % 16), "r0 [0, 15]");
    t(&r.idiv(16), "0 [0, 0]");
    t(&(r.clone() * 4 + 3).idiv(4), "r0 [0, 15]");
    t(&(&s + 1).lt(33), "true [1, 1]");
}

#[test]
fn unrolled_arange_bounds() {
    let g = v("gidx0", 0, 2559);
    let alu0 = &g * -1;
    assert_eq!(alu0.bounds(), (-2559, 0));
    assert_eq!((&alu0 + 2559).bounds(), (0, 2559));
    assert_eq!((&alu0 + 2559).idiv(-4).bounds(), (-639, 0));
    assert_eq!(((&alu0 + 2559).idiv(-4) * -1).bounds(), (0, 639));
}

#[test]
fn mul_bounds_with_signs() {
    assert_eq!((v("a", -3, 2) * v("b", -5, 4)).bounds(), (-12, 15));
    assert_eq!((v("a", -3, -2) * 5).bounds(), (-15, -10));
}

#[test]
fn div_bounds() {
    assert_eq!(v("a", -7, 9).idiv(2).bounds(), (-3, 4));
    assert_eq!(v("a", -7, 9).idiv(-2).bounds(), (-4, 3));
    assert_eq!(v("a", 10, 20).idiv(v("b", -2, 3)).bounds(), (-20, 20));
}

#[test]
fn mod_bounds() {
    assert_eq!((v("a", -7, 9) % 4).bounds(), (-3, 3));
    assert_eq!((v("a", 0, 9) % -4).bounds(), (0, 3));
    assert_eq!((v("a", 0, 2) % 4).bounds(), (0, 2));
}

#[test]
fn cmp_and_where_bounds() {
    let a = v("a", 0, 5);
    assert_eq!(a.lt(3).bounds(), (0, 1));
    assert_eq!(a.lt(6).bounds(), (1, 1));
    assert_eq!(a.lt(0).bounds(), (0, 0));
    assert_eq!(a.ne(9).bounds(), (1, 1));
    assert_eq!(a.eq_(9).bounds(), (0, 0));
    assert_eq!(
        a.lt(3).where_(v("b", -4, -2), v("c", 10, 12)).bounds(),
        (-4, 12)
    );
}

#[test]
fn max_bounds() {
    assert_eq!(v("a", -4, 3).maximum(v("b", 0, 1)).bounds(), (0, 3));
}

#[test]
fn bitwise_and_shift_bounds() {
    let a = v("a", 0, 12);
    assert_eq!((&a & v("b", 0, 5)).bounds(), (0, 5));
    assert_eq!((&a | v("b", 0, 5)).bounds(), (0, 15));
    assert_eq!((&a ^ UOp::index(3)).bounds(), (0, 15));
    assert_eq!((&a << UOp::index(2)).bounds(), (0, 48));
    assert_eq!((&a >> UOp::index(2)).bounds(), (0, 3));
    assert_eq!((v("n", -8, 8) >> UOp::index(1)).bounds(), (-4, 4));
    assert_eq!(
        (v("n", -8, 8) & v("m", -1, 1)).bounds(),
        (i64::MIN, i64::MAX)
    );
}

#[test]
fn cast_bounds() {
    let a = v("a", -3, 300);
    assert_eq!(a.cast(DType::INT32).bounds(), (-3, 300));
    assert_eq!(a.cast(DType::INT8).bounds(), (-128, 127));
    assert_eq!(a.cast(DType::UINT8).bounds(), (0, 255));
    assert_eq!(v("b", 1, 5).cast(DType::BOOL).bounds(), (1, 1));
    assert_eq!(v("b", 0, 5).cast(DType::BOOL).bounds(), (0, 1));
    assert_eq!(
        v("b", 0, 5).cast(DType::FLOAT32).bounds(),
        (i64::MIN, i64::MAX)
    );
}

#[test]
fn overflow_gives_full_range() {
    let big = v("big", 0, i64::MAX / 2);
    assert_eq!((&big * 4).bounds(), (i64::MIN, i64::MAX));
    assert_eq!((&big + &big).bounds(), (0, i64::MAX - 1));
    assert_eq!((&big + &big + 2).bounds(), (i64::MIN, i64::MAX));
    let i8v = UOp::new(
        Ops::DefineVar,
        DType::INT8,
        vec![],
        Arg::Var("s".into(), 100, 120),
    );
    assert_eq!((&i8v + UOp::cnst(DType::INT8, 10)).bounds(), (-128, 127));
}

#[test]
fn unknown_dtypes_have_full_bounds() {
    let f = UOp::new(Ops::Load, DType::FLOAT32, vec![], Arg::None);
    assert_eq!(f.bounds(), (i64::MIN, i64::MAX));
    let u = UOp::new(Ops::Load, DType::UINT64, vec![], Arg::None);
    assert_eq!(u.bounds(), (i64::MIN, i64::MAX));
}

#[test]
fn deep_chain_bounds_do_not_overflow_the_stack() {
    let x = v("deep", 0, 1);
    let mut e = x.clone();
    for _ in 0..100_000 {
        e = UOp::new(Ops::Max, DType::INDEX, vec![e, x.clone()], Arg::None);
    }
    assert_eq!(e.bounds(), (0, 1));
}

#[test]
fn var_with_single_value_folds() {
    t(&v("one", 1, 1), "1 [1, 1]");
    t(&(v("one", 1, 1) * v("a", 0, 3)), "a [0, 3]");
}

#[test]
fn cast_of_const_and_same_dtype() {
    assert_eq!(
        UOp::new(Ops::Cast, DType::INT8, vec![UOp::index(300)], Arg::None).simplify(),
        UOp::cnst(DType::INT8, 44)
    );
    let a = v("a", 0, 3);
    assert_eq!(
        UOp::new(Ops::Cast, DType::INDEX, vec![a.clone()], Arg::None).simplify(),
        a
    );
}

#[test]
fn double_cast_folds_only_when_lossless() {
    let a = UOp::new(
        Ops::DefineVar,
        DType::INT8,
        vec![],
        Arg::Var("c8".into(), -5, 5),
    );
    assert_eq!(a.cast(DType::INT32).cast(DType::INT8).simplify(), a);
    let b = UOp::new(
        Ops::DefineVar,
        DType::INT32,
        vec![],
        Arg::Var("c32".into(), -5, 5),
    );
    let e = b.cast(DType::INT8).cast(DType::INT32);
    assert_eq!(e.simplify(), e);
}

#[test]
fn bitcast_const() {
    let c = UOp::new(
        Ops::Bitcast,
        DType::INT32,
        vec![UOp::cnst(DType::FLOAT32, 1.0)],
        Arg::None,
    );
    assert_eq!(c.simplify().as_int(), Some(0x3f80_0000));
}

#[test]
fn bool_algebra() {
    let (p, q) = (v("a", 0, 5).lt(3), v("b", 0, 5).lt(2));
    let (tr, fa) = (UOp::cnst(DType::BOOL, true), UOp::cnst(DType::BOOL, false));
    assert_eq!((&p & &tr).simplify(), p);
    assert_eq!((&p & &fa).simplify(), fa);
    assert_eq!((&p | &tr).simplify(), tr);
    assert_eq!((&p | &fa).simplify(), p);
    assert_eq!((&p & &p).simplify(), p);
    assert_eq!((&p | (&p & &q)).simplify(), p);
    assert_eq!((&q & &p).simplify(), (&p & &q).simplify());
}

#[test]
fn xor_and_trunc_identities() {
    let a = v("a", 0, 8);
    t(&(&a ^ UOp::index(0)), "a [0, 8]");
    assert_eq!(a.unary(Ops::Trunc).simplify(), a);
}

#[test]
fn substitute_then_simplify_evaluates() {
    let (a, b) = (v("a", 0, 10), v("b", 0, 10));
    let e = (&a * 3 + &b).idiv(2) % 5;
    let m =
        std::collections::HashMap::from([(a.clone(), UOp::index(7)), (b.clone(), UOp::index(4))]);
    assert_eq!(
        e.substitute(&m).simplify().as_int(),
        Some(((7 * 3 + 4) / 2) % 5)
    );
}

#[test]
fn simplify_is_idempotent() {
    let (a, b) = (v("a", -4, 9), v("b", 0, 7));
    for e in [
        (&a * 4 + &b).idiv(4),
        (&a * 6 + &b * 3 + 5) % 9,
        (&a + 3).maximum(&b) * 2 - &a,
    ] {
        let s = e.simplify();
        assert_eq!(s.simplify(), s, "{e}");
    }
}

#[test]
fn malformed_nodes_get_dtype_bounds_instead_of_panicking() {
    let add1 = UOp::new(Ops::Add, DType::INDEX, vec![UOp::index(1)], Arg::None);
    assert_eq!(add1.bounds(), (i64::MIN, i64::MAX));
    let noop = UOp::new(Ops::Noop, DType::INT8, vec![], Arg::None);
    assert_eq!(noop.bounds(), (-128, 127));
    let bind = UOp::new(Ops::Bind, DType::INDEX, vec![], Arg::None);
    assert_eq!(bind.bounds(), (i64::MIN, i64::MAX));
}
