//! SInt: sizes that may be symbolic.

#![allow(clippy::erasing_op, clippy::cmp_owned)]

use tinygrad_uop::{SInt, UOp, prod};

#[test]
fn const_arithmetic_stays_const() {
    let (a, b) = (SInt::from(6), SInt::from(4));
    assert_eq!(&a + &b, SInt::Const(10));
    assert_eq!(&a * &b, SInt::Const(24));
    assert_eq!(&a - &b, SInt::Const(2));
    assert_eq!(&a / &b, SInt::Const(1));
    assert_eq!(a.as_const(), Some(6));
    assert_eq!(a.to_uop(), UOp::index(6));
}

#[test]
fn symbolic_arithmetic_simplifies() {
    let n = SInt::from(UOp::variable("n", 1, 10));
    let s = &(&n * 4) / 4;
    assert_eq!(s, n);
    assert_eq!((&n * 2 + 3).to_string(), "((n*2)+3)");
    assert_eq!(&n - &n, SInt::Const(0));
    assert_eq!((&n * 0).as_const(), Some(0));
    assert_eq!((&n + 2).max_value(), 12);
}

#[test]
fn prod_of_sizes() {
    let n = SInt::from(UOp::variable("n", 1, 10));
    assert_eq!(prod(&[SInt::from(2), SInt::from(3)]), SInt::Const(6));
    assert_eq!(prod(&[]), SInt::Const(1));
    assert_eq!(
        prod(&[SInt::from(2), n.clone(), SInt::from(3)]).to_string(),
        "(n*6)"
    );
}

#[test]
fn display_and_eq_usize() {
    assert_eq!(SInt::from(7).to_string(), "7");
    assert!(SInt::from(7) == 7usize);
    let n = SInt::from(UOp::variable("n", 1, 10));
    assert!(n != 7usize);
    assert_eq!(n.as_const(), None);
}

#[test]
fn const_uop_becomes_const() {
    assert_eq!(SInt::from(UOp::index(3) + 4), SInt::Const(7));
    assert_eq!(SInt::from(UOp::variable("one", 5, 5)), SInt::Const(5));
}

#[test]
#[should_panic(expected = "is negative")]
fn const_underflow_panics() {
    let _ = SInt::from(2) - SInt::from(3);
}
