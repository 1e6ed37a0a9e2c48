//! Logic and bits: `logical_not`/`and`/`or`/`xor`, `bitwise_*`, `lshift`/`rshift`, and
//! `where_`.

use tinygrad_dtype::{DType, least_upper_dtype};
use tinygrad_uop::Ops;

use super::{IntoOperand, Operand, broadcast_shape};
use crate::Tensor;

impl Tensor {
    fn as_bool(&self, op: &str) -> Tensor {
        assert!(
            self.dtype().is_bool(),
            "{op}: needs bool operands, got {}",
            self.dtype()
        );
        self.clone()
    }

    /// Logical not (other dtypes are cast to bool first, like tinygrad).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![false, true]);
    /// assert_eq!(t.logical_not().to_vec::<bool>(), vec![true, false]);
    /// let n = Tensor::from_vec(vec![0.0f32, 2.5]);
    /// assert_eq!(n.logical_not().to_vec::<bool>(), vec![true, false]);
    /// ```
    pub fn logical_not(&self) -> Tensor {
        self.cast(DType::BOOL).ne(true)
    }

    /// Logical and (bool).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![true, true, false, false]);
    /// let b = Tensor::from_vec(vec![true, false, true, false]);
    /// assert_eq!(a.logical_and(&b).to_vec::<bool>(), vec![true, false, false, false]);
    /// ```
    pub fn logical_and(&self, other: &Tensor) -> Tensor {
        let (x, y) = self
            .as_bool("logical_and")
            .broadcasted(&other.as_bool("logical_and"), "logical_and");
        x.alu(Ops::And, &[&y])
    }

    /// Logical or (bool).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![true, true, false, false]);
    /// let b = Tensor::from_vec(vec![true, false, true, false]);
    /// assert_eq!(a.logical_or(&b).to_vec::<bool>(), vec![true, true, true, false]);
    /// ```
    pub fn logical_or(&self, other: &Tensor) -> Tensor {
        let (x, y) = self
            .as_bool("logical_or")
            .broadcasted(&other.as_bool("logical_or"), "logical_or");
        x.alu(Ops::Or, &[&y])
    }

    /// Logical xor (bool).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![true, true, false, false]);
    /// let b = Tensor::from_vec(vec![true, false, true, false]);
    /// assert_eq!(a.logical_xor(&b).to_vec::<bool>(), vec![false, true, true, false]);
    /// ```
    pub fn logical_xor(&self, other: &Tensor) -> Tensor {
        let (x, y) = self
            .as_bool("logical_xor")
            .broadcasted(&other.as_bool("logical_xor"), "logical_xor");
        x.alu(Ops::Xor, &[&y])
    }

    fn bitwise(&self, other: impl IntoOperand, op: Ops, name: &str) -> Tensor {
        let (x, y) = self.broadcasted(other, name);
        assert!(
            x.dtype().is_int() || x.dtype().is_bool(),
            "{name}: needs integer or bool operands, got {}",
            x.dtype()
        );
        x.alu(op, &[&y])
    }

    /// Bitwise and.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let (a, b) = (Tensor::from_vec(vec![2i32, 5, 255]), Tensor::from_vec(vec![3i32, 14, 16]));
    /// assert_eq!(a.bitwise_and(&b).to_vec::<i32>(), vec![2, 4, 16]);
    /// let (p, q) = (Tensor::from_vec(vec![true, true]), Tensor::from_vec(vec![true, false]));
    /// assert_eq!(p.bitwise_and(&q).to_vec::<bool>(), vec![true, false]);
    /// ```
    pub fn bitwise_and(&self, other: impl IntoOperand) -> Tensor {
        self.bitwise(other, Ops::And, "bitwise_and")
    }

    /// Bitwise or.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let (a, b) = (Tensor::from_vec(vec![2i32, 5, 255]), Tensor::from_vec(vec![3i32, 14, 16]));
    /// assert_eq!(a.bitwise_or(&b).to_vec::<i32>(), vec![3, 15, 255]);
    /// ```
    pub fn bitwise_or(&self, other: impl IntoOperand) -> Tensor {
        self.bitwise(other, Ops::Or, "bitwise_or")
    }

    /// Bitwise xor.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let (a, b) = (Tensor::from_vec(vec![-1i32, -2, 3]), Tensor::from_vec(vec![1i32, 0, 3]));
    /// assert_eq!(a.bitwise_xor(&b).to_vec::<i32>(), vec![-2, -2, 0]);
    /// ```
    pub fn bitwise_xor(&self, other: impl IntoOperand) -> Tensor {
        self.bitwise(other, Ops::Xor, "bitwise_xor")
    }

    /// Bitwise not (`x ^ -1`; logical not for bool).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![0u8, 2, 5, 255]);
    /// assert_eq!(t.bitwise_not().to_vec::<u8>(), vec![255, 253, 250, 0]);
    /// assert_eq!(Tensor::from_vec(vec![3i32, -1]).bitwise_not().to_vec::<i32>(), vec![-4, 0]);
    /// let b = Tensor::from_vec(vec![true, false]);
    /// assert_eq!(b.bitwise_not().to_vec::<bool>(), vec![false, true]);
    /// ```
    ///
    /// # Panics
    /// On a float tensor (tinygrad: `RuntimeError`, torch: "not implemented for 'Float'").
    pub fn bitwise_not(&self) -> Tensor {
        assert!(
            !self.dtype().is_float(),
            "bitwise_not: needs an integer or bool tensor, got {} of shape {:?}",
            self.dtype(),
            self.shape()
        );
        if self.dtype().is_bool() {
            return self.logical_not();
        }
        let all = self.const_like(self.dtype().max(), self.dtype());
        let all = if self.dtype().is_unsigned() {
            all
        } else {
            self.const_like(-1i64, self.dtype())
        };
        self.alu(Ops::Xor, &[&all])
    }

    /// Shift left (`x << n`).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1u8, 3, 31]);
    /// assert_eq!(t.lshift(2).to_vec::<u8>(), vec![4, 12, 124]);
    /// ```
    pub fn lshift(&self, other: impl IntoOperand) -> Tensor {
        self.bitwise(other, Ops::Shl, "lshift")
    }

    /// Shift right (`x >> n`, arithmetic for signed dtypes).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![4u8, 13, 125]);
    /// assert_eq!(t.rshift(2).to_vec::<u8>(), vec![1, 3, 31]);
    /// assert_eq!(Tensor::from_vec(vec![-8i32, 9]).rshift(1).to_vec::<i32>(), vec![-4, 4]);
    /// ```
    pub fn rshift(&self, other: impl IntoOperand) -> Tensor {
        self.bitwise(other, Ops::Shr, "rshift")
    }

    /// `self ? x : y` with `self` a bool condition; all three broadcast.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let cond = Tensor::from_slice(&[true, true, false, true, false, false], &[2, 3]);
    /// assert_eq!(cond.where_(1, 3).to_vec::<i32>(), vec![1, 1, 3, 1, 3, 3]);
    /// let t = Tensor::from_slice(&[-1.5f32, 0.5, 2.0, 0.0, -0.25, 3.0], &[2, 3]);
    /// let r = t.gt(0).where_(&t, f32::NEG_INFINITY).to_vec::<f32>();
    /// assert_eq!(r, vec![f32::NEG_INFINITY, 0.5, 2.0, f32::NEG_INFINITY, f32::NEG_INFINITY, 3.0]);
    /// ```
    ///
    /// # Panics
    /// If `self` is not bool or the shapes don't broadcast.
    pub fn where_(&self, x: impl IntoOperand, y: impl IntoOperand) -> Tensor {
        assert!(
            self.dtype().is_bool(),
            "where: condition must be bool, got {}",
            self.dtype()
        );
        let (x, y) = match (x.into_operand(), y.into_operand()) {
            (Operand::Tensor(a), b) => a.broadcasted(b, "where"),
            (Operand::Const(a), Operand::Tensor(b)) => {
                let (b2, a2) = b.broadcasted(a, "where");
                (a2, b2)
            }
            (Operand::Const(a), Operand::Const(b)) => {
                let dt = least_upper_dtype(&[a.default_dtype(), b.default_dtype()]);
                (self.const_like(a, dt), self.const_like(b, dt))
            }
        };
        let shape = broadcast_shape(&self.shape(), &x.shape()).unwrap_or_else(|| {
            panic!(
                "where: cannot broadcast condition {:?} with values {:?}",
                self.shape(),
                x.shape()
            )
        });
        let (c, x, y) = (
            self.broadcast_to(&shape),
            x.broadcast_to(&shape),
            y.broadcast_to(&shape),
        );
        c.alu(Ops::Where, &[&x, &y])
    }
}
