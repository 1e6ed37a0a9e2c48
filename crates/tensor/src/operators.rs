//! Rust operators on tensors: `&a + &b`, `a * 2.0`, `1.0 - &a`, `-a`, `a % 3`, `a & b`, `7i32 % &a`,
//! `1i32 << &a` (suffix integer literals on the left: several integer types qualify), and compound assignment.
//!
//! Compound assignment (`t += x`, tinygrad's `__iadd__` and friends) is `t.assign(&(&t + x))`:
//! lazy, every clone of `t` sees the new value, and no gradient flows through it (see
//! [`Tensor::assign`]). It panics as `assign` does: when the result's dtype differs from `t`'s
//! (`int += 0.5` promotes to float; cast first) or its shape doesn't broadcast to `t`'s.
//!
//! ```
//! # use tinygrad_tensor::Tensor;
//! let mut t = Tensor::from_slice(&[1i32, 2, 3], &[3]);
//! let alias = t.clone();
//! t += 10;
//! t <<= 1;
//! assert_eq!(alias.to_vec::<i32>(), vec![22, 24, 26]);
//! assert_eq!((7i32 % &alias).to_vec::<i32>(), vec![7, 7, 7]);
//! ```

use std::ops::{Add, BitAnd, BitOr, BitXor, Div, Mul, Neg, Rem, Shl, Shr, Sub};

use crate::{IntoOperand, Tensor};

macro_rules! binop {
    ($($tr:ident $m:ident $f:ident),*) => {$(
        impl<T: IntoOperand> $tr<T> for &Tensor {
            type Output = Tensor;
            fn $m(self, rhs: T) -> Tensor { Tensor::$f(self, rhs) }
        }
        impl<T: IntoOperand> $tr<T> for Tensor {
            type Output = Tensor;
            fn $m(self, rhs: T) -> Tensor { Tensor::$f(&self, rhs) }
        }
    )*};
}
binop!(Add add add, Sub sub sub, Mul mul mul, Div div div, Rem rem modulo,
    BitAnd bitand bitwise_and, BitOr bitor bitwise_or, BitXor bitxor bitwise_xor,
    Shl shl lshift, Shr shr rshift);

macro_rules! scalar_lhs {
    ($($t:ty),*) => {$(
        impl Add<&Tensor> for $t { type Output = Tensor; fn add(self, r: &Tensor) -> Tensor { r.add(self) } }
        impl Add<Tensor> for $t { type Output = Tensor; fn add(self, r: Tensor) -> Tensor { r.add(self) } }
        impl Mul<&Tensor> for $t { type Output = Tensor; fn mul(self, r: &Tensor) -> Tensor { r.mul(self) } }
        impl Mul<Tensor> for $t { type Output = Tensor; fn mul(self, r: Tensor) -> Tensor { r.mul(self) } }
        impl Sub<&Tensor> for $t { type Output = Tensor; fn sub(self, r: &Tensor) -> Tensor { r.rsub(self) } }
        impl Sub<Tensor> for $t { type Output = Tensor; fn sub(self, r: Tensor) -> Tensor { r.rsub(self) } }
        impl Div<&Tensor> for $t { type Output = Tensor; fn div(self, r: &Tensor) -> Tensor { r.rdiv(self) } }
        impl Div<Tensor> for $t { type Output = Tensor; fn div(self, r: Tensor) -> Tensor { r.rdiv(self) } }
    )*};
}
scalar_lhs!(f32, f64, i32, i64);

impl Neg for &Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        Tensor::neg(self)
    }
}

impl Neg for Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        Tensor::neg(&self)
    }
}

/// Scalar-left operators without a commutative form (tinygrad's `__rmod__`, `__rand__`,
/// `__ror__`, `__rxor__`, `__rlshift__`, `__rrshift__`): the scalar is promoted and broadcast
/// like any operand, then the op runs with it on the left.
macro_rules! scalar_lhs_reversed {
    ($tr:ident $m:ident $f:ident: $($t:ty),*) => {$(
        impl $tr<&Tensor> for $t {
            type Output = Tensor;
            fn $m(self, r: &Tensor) -> Tensor {
                let (t, s) = r.broadcasted(self, stringify!($m));
                s.$f(&t)
            }
        }
        impl $tr<Tensor> for $t {
            type Output = Tensor;
            fn $m(self, r: Tensor) -> Tensor {
                self.$m(&r)
            }
        }
    )*};
}
scalar_lhs_reversed!(Rem rem modulo: f32, f64, i32, i64);
scalar_lhs_reversed!(BitAnd bitand bitwise_and: i32, i64, bool);
scalar_lhs_reversed!(BitOr bitor bitwise_or: i32, i64, bool);
scalar_lhs_reversed!(BitXor bitxor bitwise_xor: i32, i64, bool);
scalar_lhs_reversed!(Shl shl lshift: i32, i64);
scalar_lhs_reversed!(Shr shr rshift: i32, i64);

// Compound assignment (see the module docs).
macro_rules! assign_op {
    ($($tr:ident $m:ident $f:ident),*) => {$(
        impl<T: IntoOperand> std::ops::$tr<T> for Tensor {
            fn $m(&mut self, rhs: T) {
                let v = Tensor::$f(self, rhs);
                self.assign(&v);
            }
        }
    )*};
}
assign_op!(AddAssign add_assign add, SubAssign sub_assign sub, MulAssign mul_assign mul,
    DivAssign div_assign div, RemAssign rem_assign modulo, BitAndAssign bitand_assign bitwise_and,
    BitOrAssign bitor_assign bitwise_or, BitXorAssign bitxor_assign bitwise_xor,
    ShlAssign shl_assign lshift, ShrAssign shr_assign rshift);
