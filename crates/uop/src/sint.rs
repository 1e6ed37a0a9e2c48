//! [`SInt`]: a size that may be symbolic (tinygrad's `sint`), e.g. a shape dimension that
//! depends on a bound variable.
//!
//! Arithmetic keeps constants constant and otherwise builds `index` UOps, simplified with
//! [`UOp::simplify`]; a symbolic result that simplifies to a constant becomes [`SInt::Const`]
//! again, so equal sizes compare equal.

use std::collections::HashMap;
use std::fmt;
use std::ops::{Add, Div, Mul, Sub};
use std::sync::Arc;

use tinygrad_dtype::DType;

use crate::{Arg, Ops, UOp};

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

    /// The size with every bound variable (`Bind`) at its value; with unbound variables left,
    /// its largest value (what a buffer for it must hold).
    pub fn bound_value(&self) -> usize {
        match self {
            SInt::Const(c) => *c,
            SInt::Sym(u) => {
                let binds: HashMap<UOp, UOp> = u
                    .toposort()
                    .into_iter()
                    .filter(|n| n.op() == Ops::Bind)
                    .map(|b| (b.clone(), b.s(1).clone()))
                    .collect();
                let v = if binds.is_empty() {
                    u.clone()
                } else {
                    u.substitute(&binds).simplify()
                };
                match v.as_int() {
                    Some(x) if v.op() == Ops::Const => x.max(0) as usize,
                    _ => v.vmax().max(0) as usize,
                }
            }
        }
    }

    /// Whether the size depends on a variable.
    pub fn is_symbolic(&self) -> bool {
        matches!(self, SInt::Sym(_))
    }

    /// The size with each bound variable replaced by the variable itself (tinygrad's
    /// `unbind`), adding `(name, value)` of each to `vals`.
    ///
    /// # Panics
    /// If a variable is bound to two values.
    pub fn unbind(&self, vals: &mut HashMap<Arc<str>, i64>) -> SInt {
        let SInt::Sym(u) = self else {
            return self.clone();
        };
        let mut map = HashMap::new();
        for b in u.toposort().into_iter().filter(|n| n.op() == Ops::Bind) {
            let (var, value) = (b.s(0).clone(), b.s(1).as_int().expect("a bound value"));
            let Arg::Var(name, _, _) = var.arg() else {
                panic!("unbind: a Bind of a non-variable")
            };
            let prev = *vals.entry(name.clone()).or_insert(value);
            assert_eq!(
                prev, value,
                "variable {name} is bound to {prev} and to {value} in one graph"
            );
            map.insert(b, var);
        }
        if map.is_empty() {
            return self.clone();
        }
        SInt::Sym(u.substitute(&map))
    }

    /// The size with each variable named in `vals` bound to its value there (the inverse of
    /// [`SInt::unbind`]).
    pub fn rebind(&self, vals: &HashMap<Arc<str>, i64>) -> SInt {
        let SInt::Sym(u) = self else {
            return self.clone();
        };
        let map: HashMap<UOp, UOp> = u
            .toposort()
            .into_iter()
            .filter(|n| n.op() == Ops::DefineVar)
            .filter_map(|v| match v.arg() {
                Arg::Var(name, _, _) => vals.get(name).map(|&x| (v.clone(), v.bind(x))),
                _ => None,
            })
            .collect();
        if map.is_empty() {
            return self.clone();
        }
        SInt::Sym(u.substitute(&map))
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
