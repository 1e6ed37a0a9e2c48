//! Rust operators on tensors: `&a + &b`, `a * 2.0`, `1.0 - &a`, `-a`, `a % 3`, `a & b`.

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
