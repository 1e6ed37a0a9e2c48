//! Comparisons (bool results): `lt`, `gt`, `le`, `ge`, `eq`, `ne`.

use tinygrad_uop::Ops;

use super::IntoOperand;
use crate::Tensor;

impl Tensor {
    /// `self < other`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let (a, b) = (Tensor::from_vec(vec![1i32, 2, 3]), Tensor::from_vec(vec![3i32, 2, 1]));
    /// assert_eq!(a.lt(&b).to_vec::<bool>(), vec![true, false, false]);
    /// assert_eq!(a.lt(2).to_vec::<bool>(), vec![true, false, false]);
    /// ```
    pub fn lt(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "lt");
        x.alu(Ops::CmpLt, &[&y])
    }

    /// `self > other`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let (a, b) = (Tensor::from_vec(vec![1i32, 2, 3]), Tensor::from_vec(vec![3i32, 2, 1]));
    /// assert_eq!(a.gt(&b).to_vec::<bool>(), vec![false, false, true]);
    /// assert_eq!(a.gt(1.5).to_vec::<bool>(), vec![false, true, true]);
    /// ```
    pub fn gt(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "gt");
        y.alu(Ops::CmpLt, &[&x])
    }

    /// `self <= other` (false when either is NaN).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, f32::NAN]);
    /// let b = Tensor::from_vec(vec![3.0f32, 2.0, 1.0, 1.0]);
    /// assert_eq!(a.le(&b).to_vec::<bool>(), vec![true, true, false, false]);
    /// ```
    pub fn le(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "le");
        x.alu(Ops::CmpLt, &[&y])
            .logical_or(&x.alu(Ops::CmpEq, &[&y]))
    }

    /// `self >= other` (false when either is NaN).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, f32::NAN]);
    /// let b = Tensor::from_vec(vec![3.0f32, 2.0, 1.0, 1.0]);
    /// assert_eq!(a.ge(&b).to_vec::<bool>(), vec![false, true, true, false]);
    /// ```
    pub fn ge(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "ge");
        y.alu(Ops::CmpLt, &[&x])
            .logical_or(&x.alu(Ops::CmpEq, &[&y]))
    }

    /// `self == other`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let (a, b) = (Tensor::from_vec(vec![1i32, 2, 3]), Tensor::from_vec(vec![3i32, 2, 1]));
    /// assert_eq!(a.eq(&b).to_vec::<bool>(), vec![false, true, false]);
    /// assert_eq!(a.eq(3).to_vec::<bool>(), vec![false, false, true]);
    /// ```
    pub fn eq(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "eq");
        x.alu(Ops::CmpEq, &[&y])
    }

    /// `self != other`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let (a, b) = (Tensor::from_vec(vec![1i32, 2, 3]), Tensor::from_vec(vec![3i32, 2, 1]));
    /// assert_eq!(a.ne(&b).to_vec::<bool>(), vec![true, false, true]);
    /// assert_eq!(a.ne(3).to_vec::<bool>(), vec![true, true, false]);
    /// ```
    pub fn ne(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "ne");
        x.alu(Ops::CmpNe, &[&y])
    }
}
