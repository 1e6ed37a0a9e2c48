//! [`SInt`]: a size that may be symbolic (tinygrad's `sint`), e.g. a shape dimension that
//! depends on a bound variable.
//!
//! Arithmetic keeps constants constant and otherwise builds `index` UOps, simplified with
//! [`UOp::simplify`]; a symbolic result that simplifies to a constant becomes [`SInt::Const`]
//! again, so equal sizes compare equal.

use std::fmt;
use std::ops::{Add, Div, Mul, Sub};

use tinygrad_dtype::DType;

use crate::{Ops, UOp};

/// A size: a constant, or a symbolic `index` expression (never a constant `UOp`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SInt {
    /// A known size.
    Const(usize),
    /// A size that depends on variables.
    Sym(UOp),
}

impl SInt {
    /// The size as an `index` UOp.
    pub fn to_uop(&self) -> UOp {
        match self {
            SInt::Const(c) => UOp::index(*c as i64),
            SInt::Sym(u) => u.clone(),
        }
    }

    /// The size if it is constant.
    pub fn as_const(&self) -> Option<usize> {
        match self {
            SInt::Const(c) => Some(*c),
            SInt::Sym(_) => None,
        }
    }

    /// The largest value the size can take (its bound for symbolic sizes; 0 if that is negative).
    pub fn max_value(&self) -> usize {
        match self {
            SInt::Const(c) => *c,
            SInt::Sym(u) => u.vmax().max(0) as usize,
        }
    }

    /// Simplifies `u` and wraps it, turning non-negative constants into [`SInt::Const`].
    pub fn from_uop(u: &UOp) -> SInt {
        let s = u.simplify();
        match s.as_int() {
            Some(v) if v >= 0 && s.op() == Ops::Const => SInt::Const(v as usize),
            _ => SInt::Sym(s),
        }
    }

    fn sym_op(&self, rhs: &SInt, f: impl Fn(&UOp, &UOp) -> UOp) -> SInt {
        SInt::from_uop(&f(
            &self.to_uop().cast(DType::INDEX),
            &rhs.to_uop().cast(DType::INDEX),
        ))
    }
}

impl From<usize> for SInt {
    fn from(v: usize) -> SInt {
        SInt::Const(v)
    }
}

impl From<UOp> for SInt {
    fn from(u: UOp) -> SInt {
        SInt::from_uop(&u)
    }
}

impl From<&UOp> for SInt {
    fn from(u: &UOp) -> SInt {
        SInt::from_uop(u)
    }
}

impl fmt::Display for SInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SInt::Const(c) => write!(f, "{c}"),
            SInt::Sym(u) => write!(f, "{u}"),
        }
    }
}

impl PartialEq<usize> for SInt {
    fn eq(&self, other: &usize) -> bool {
        self.as_const() == Some(*other)
    }
}

macro_rules! sint_op {
    ($tr:ident $m:ident, |$a:ident, $b:ident| $konst:expr, |$x:ident, $y:ident| $sym:expr) => {
        impl $tr<&SInt> for &SInt {
            type Output = SInt;
            fn $m(self, rhs: &SInt) -> SInt {
                match (self, rhs) {
                    (SInt::Const($a), SInt::Const($b)) => SInt::Const($konst),
                    _ => self.sym_op(rhs, |$x, $y| $sym),
                }
            }
        }
        impl $tr<SInt> for SInt {
            type Output = SInt;
            fn $m(self, rhs: SInt) -> SInt {
                (&self).$m(&rhs)
            }
        }
        impl $tr<usize> for &SInt {
            type Output = SInt;
            fn $m(self, rhs: usize) -> SInt {
                self.$m(&SInt::Const(rhs))
            }
        }
        impl $tr<usize> for SInt {
            type Output = SInt;
            fn $m(self, rhs: usize) -> SInt {
                (&self).$m(&SInt::Const(rhs))
            }
        }
    };
}

sint_op!(Add add, |a, b| a.checked_add(*b).unwrap_or_else(|| panic!("SInt: {a} + {b} overflows")), |x, y| x + y);
sint_op!(Mul mul, |a, b| a.checked_mul(*b).unwrap_or_else(|| panic!("SInt: {a} * {b} overflows")), |x, y| x * y);
sint_op!(Sub sub, |a, b| a.checked_sub(*b).unwrap_or_else(|| panic!("SInt: {a} - {b} is negative")), |x, y| x - y);
sint_op!(Div div, |a, b| a.checked_div(*b).unwrap_or_else(|| panic!("SInt: {a} // 0")), |x, y| x.idiv(y));

/// The product of sizes (`1` for none).
pub fn prod(sizes: &[SInt]) -> SInt {
    sizes.iter().fold(SInt::Const(1), |acc, s| &acc * s)
}
