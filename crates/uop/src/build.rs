//! Constructors and arithmetic on [`UOp`]: constants, variables, ranges and ALU ops, with Rust
//! operators (`&a + &b`, `&a * 4`).
//!
//! Subtraction and negation are canonicalized the way tinygrad's symbolic layer does it:
//! `a - b` builds `a + b*-1` and `-a` builds `a*-1`, so like terms collect in one form.

use std::ops::{Add, BitAnd, BitOr, BitXor, Mul, Neg, Rem, Shl, Shr, Sub};

use tinygrad_dtype::{ConstValue, DType};

use crate::{Arg, AxisKind, Ops, UOp};

impl UOp {
    /// A constant of dtype `dt` (the value is cast to `dt` with tinygrad's truncation rules).
    pub fn cnst(dt: DType, v: impl Into<ConstValue>) -> UOp {
        UOp::new(
            Ops::Const,
            dt,
            vec![],
            Arg::Const(v.into().cast(dt.scalar())),
        )
    }

    /// An `index` constant.
    pub fn index(v: i64) -> UOp {
        UOp::cnst(DType::INDEX, v)
    }

    /// A constant with the same dtype as `self`.
    pub fn const_like(&self, v: impl Into<ConstValue>) -> UOp {
        UOp::cnst(self.dtype().base(), v)
    }

    /// A symbolic `index` variable with inclusive bounds `min..=max`.
    pub fn variable(name: &str, min: i64, max: i64) -> UOp {
        assert!(
            min <= max,
            "UOp::variable({name:?}): empty range {min}..={max}"
        );
        UOp::new(
            Ops::DefineVar,
            DType::INDEX,
            vec![],
            Arg::Var(name.into(), min, max),
        )
    }

    /// A loop variable `0..size` with kernel-unique `id`.
    pub fn range(size: impl IntoUOp, id: usize, kind: AxisKind) -> UOp {
        let size = size.into_uop(DType::INDEX);
        UOp::new(Ops::Range, DType::INDEX, vec![size], Arg::Range(id, kind))
    }

    /// This variable bound to `value` (tinygrad's `bind`): a `Bind` whose value kernels get
    /// as an argument.
    ///
    /// # Panics
    /// If this is not a variable, or `value` is outside its bounds.
    pub fn bind(&self, value: i64) -> UOp {
        let Arg::Var(name, lo, hi) = self.arg() else {
            panic!("bind: {} is not a variable", self.op())
        };
        assert!(
            (*lo..=*hi).contains(&value),
            "bind: variable {name} = {value} is outside its bounds [{lo}, {hi}]"
        );
        UOp::new(
            Ops::Bind,
            self.dtype(),
            vec![self.clone(), UOp::cnst(self.dtype(), value)],
            Arg::None,
        )
    }

    /// The constant value, if this is a `Const`.
    pub fn as_const(&self) -> Option<ConstValue> {
        if self.op() == Ops::Const {
            self.arg().as_const()
        } else {
            None
        }
    }

    /// The integer value, if this is an integer or bool `Const`.
    pub fn as_int(&self) -> Option<i64> {
        match self.as_const()? {
            ConstValue::Float(_) => None,
            c => Some(c.as_i64()),
        }
    }

    /// An ALU op with `self` as the first source. Comparisons give `bool`; everything else keeps
    /// `self`'s dtype.
    ///
    /// # Panics
    /// If `op` is not an ALU op or the number of sources is wrong.
    pub fn alu(&self, op: Ops, rest: &[UOp]) -> UOp {
        let arity = op
            .alu_arity()
            .unwrap_or_else(|| panic!("UOp::alu: {op} is not an ALU op"));
        assert_eq!(
            rest.len() + 1,
            arity,
            "UOp::alu: {op} takes {arity} sources"
        );
        let dtype = if op.is_comparison() {
            DType::BOOL.vec(self.dtype().count())
        } else if op == Ops::Where {
            rest[0].dtype()
        } else {
            self.dtype()
        };
        let mut src = Vec::with_capacity(arity);
        src.push(self.clone());
        src.extend_from_slice(rest);
        UOp::new(op, dtype, src, Arg::None)
    }

    fn bin(&self, op: Ops, other: impl IntoUOp) -> UOp {
        let o = other.into_uop(self.dtype().base());
        self.alu(op, &[o])
    }

    /// `self + other`.
    pub fn add(&self, other: impl IntoUOp) -> UOp {
        self.bin(Ops::Add, other)
    }

    /// `self * other`.
    pub fn mul(&self, other: impl IntoUOp) -> UOp {
        self.bin(Ops::Mul, other)
    }

    /// `self - other`, as `self + other * -1`.
    pub fn sub(&self, other: impl IntoUOp) -> UOp {
        let o = other.into_uop(self.dtype().base());
        self.add(o.neg())
    }

    /// `-self`, as `self * -1` (for bool: logical not, `self != true`).
    pub fn neg(&self) -> UOp {
        if self.dtype().is_bool() {
            self.ne(true)
        } else {
            self.mul(-1i64)
        }
    }

    /// Truncating integer division `self // other` (C semantics).
    pub fn idiv(&self, other: impl IntoUOp) -> UOp {
        self.bin(Ops::IDiv, other)
    }

    /// Truncating remainder `self % other` (C semantics: sign of the dividend).
    pub fn modulo(&self, other: impl IntoUOp) -> UOp {
        self.bin(Ops::Mod, other)
    }

    /// `max(self, other)`.
    pub fn maximum(&self, other: impl IntoUOp) -> UOp {
        self.bin(Ops::Max, other)
    }

    /// `min(self, other)`, as `-max(-self, -other)`.
    pub fn minimum(&self, other: impl IntoUOp) -> UOp {
        let o = other.into_uop(self.dtype().base());
        self.neg().maximum(o.neg()).neg()
    }

    /// `self < other` (bool).
    pub fn lt(&self, other: impl IntoUOp) -> UOp {
        self.bin(Ops::CmpLt, other)
    }

    /// `self >= other`, as `!(self < other)`.
    pub fn ge(&self, other: impl IntoUOp) -> UOp {
        self.lt(other).neg()
    }

    /// `self != other` (bool).
    pub fn ne(&self, other: impl IntoUOp) -> UOp {
        self.bin(Ops::CmpNe, other)
    }

    /// `self == other` (bool; the `CmpEq` op).
    pub fn eq_(&self, other: impl IntoUOp) -> UOp {
        self.bin(Ops::CmpEq, other)
    }

    /// `self ? t : f`, with `self` a bool condition.
    pub fn where_(&self, t: impl IntoUOp, f: impl IntoUOp) -> UOp {
        let t = t.into_uop(DType::INDEX);
        let f = f.into_uop(t.dtype().base());
        let t = if t.op() == Ops::Const && t.dtype() != f.dtype() {
            t.cast(f.dtype())
        } else {
            t
        };
        self.alu(Ops::Where, &[t, f])
    }

    /// `Cast` to `dt` (no-op when the dtype already matches).
    pub fn cast(&self, dt: DType) -> UOp {
        if self.dtype() == dt {
            return self.clone();
        }
        if let Some(c) = self.as_const()
            && self.dtype().count() == 1
        {
            return UOp::cnst(dt, c);
        }
        UOp::new(Ops::Cast, dt, vec![self.clone()], Arg::None)
    }

    /// Unary ALU op `op` on `self`.
    pub fn unary(&self, op: Ops) -> UOp {
        self.alu(op, &[])
    }
}

/// Things usable as an operand of UOp arithmetic: a UOp, or a Rust number (a constant of the
/// other operand's dtype).
pub trait IntoUOp {
    /// The operand as a UOp; numbers become constants of dtype `like`.
    fn into_uop(self, like: DType) -> UOp;
}

impl IntoUOp for UOp {
    fn into_uop(self, _: DType) -> UOp {
        self
    }
}

impl IntoUOp for &UOp {
    fn into_uop(self, _: DType) -> UOp {
        self.clone()
    }
}

macro_rules! num_operand {
    ($($t:ty),*) => {$(
        impl IntoUOp for $t {
            fn into_uop(self, like: DType) -> UOp { UOp::cnst(like, self) }
        }
    )*};
}
num_operand!(i32, i64, u32, u64, usize, f32, f64, bool);

macro_rules! uop_binop {
    ($($tr:ident $m:ident $f:ident),*) => {$(
        impl<T: IntoUOp> $tr<T> for &UOp {
            type Output = UOp;
            fn $m(self, rhs: T) -> UOp { UOp::$f(self, rhs) }
        }
        impl<T: IntoUOp> $tr<T> for UOp {
            type Output = UOp;
            fn $m(self, rhs: T) -> UOp { UOp::$f(&self, rhs) }
        }
    )*};
}
uop_binop!(Add add add, Mul mul mul, Sub sub sub, Rem rem modulo);

macro_rules! uop_bitop {
    ($($tr:ident $m:ident $op:ident),*) => {$(
        impl<T: IntoUOp> $tr<T> for &UOp {
            type Output = UOp;
            fn $m(self, rhs: T) -> UOp { self.bin(Ops::$op, rhs) }
        }
        impl<T: IntoUOp> $tr<T> for UOp {
            type Output = UOp;
            fn $m(self, rhs: T) -> UOp { (&self).bin(Ops::$op, rhs) }
        }
    )*};
}
uop_bitop!(BitAnd bitand And, BitOr bitor Or, BitXor bitxor Xor, Shl shl Shl, Shr shr Shr);

impl Neg for &UOp {
    type Output = UOp;
    fn neg(self) -> UOp {
        UOp::neg(self)
    }
}

impl Neg for UOp {
    type Output = UOp;
    fn neg(self) -> UOp {
        UOp::neg(&self)
    }
}
