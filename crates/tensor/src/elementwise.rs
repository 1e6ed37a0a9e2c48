//! Elementwise ops: math, comparisons, logic, casts — each a few primitive UOps, with
//! broadcasting and tinygrad's dtype promotion (Rust literals promote like Python scalars).

use tinygrad_dtype::{ConstValue, DType, least_upper_dtype, least_upper_float, promote_with_const};
use tinygrad_uop::{Arg, Ops, UOp, custom_gradient};

use crate::Tensor;

/// The right-hand side of a binary op: a tensor or a scalar constant.
#[derive(Clone)]
pub enum Operand {
    /// A tensor.
    Tensor(Tensor),
    /// A scalar ("weak": promotes like a Python scalar in tinygrad).
    Const(ConstValue),
}

/// Things usable as an operand: tensors and Rust scalars.
pub trait IntoOperand {
    /// The operand.
    fn into_operand(self) -> Operand;
}

impl IntoOperand for Tensor {
    fn into_operand(self) -> Operand {
        Operand::Tensor(self)
    }
}

impl IntoOperand for &Tensor {
    fn into_operand(self) -> Operand {
        Operand::Tensor(self.clone())
    }
}

macro_rules! scalar_operand {
    ($($t:ty),*) => {$(
        impl IntoOperand for $t {
            fn into_operand(self) -> Operand { Operand::Const(ConstValue::from(self)) }
        }
    )*};
}
scalar_operand!(f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, usize, bool);

impl IntoOperand for Operand {
    fn into_operand(self) -> Operand {
        self
    }
}

impl IntoOperand for ConstValue {
    fn into_operand(self) -> Operand {
        Operand::Const(self)
    }
}

/// The broadcast shape of `a` and `b` (numpy rules), or `None`.
///
/// ```
/// use tinygrad_tensor::broadcast_shape;
/// assert_eq!(broadcast_shape(&[2, 1, 4], &[3, 1]), Some(vec![2, 3, 4]));
/// assert_eq!(broadcast_shape(&[2, 3], &[4]), None);
/// ```
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let pa = |i: usize| {
        if i < n - a.len() {
            1
        } else {
            a[i - (n - a.len())]
        }
    };
    let pb = |i: usize| {
        if i < n - b.len() {
            1
        } else {
            b[i - (n - b.len())]
        }
    };
    (0..n)
        .map(|i| match (pa(i), pb(i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

impl Tensor {
    /// Broadcasts to `shape` (left-padding with size-1 axes, then expanding).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1i32, 2, 3]).broadcast_to(&[2, 3]);
    /// assert_eq!(t.shape(), vec![2, 3]);
    /// assert_eq!(t.to_vec::<i32>(), vec![1, 2, 3, 1, 2, 3]);
    /// ```
    ///
    /// # Panics
    /// If the shapes are not broadcast-compatible.
    pub fn broadcast_to(&self, shape: &[usize]) -> Tensor {
        let s = self.shape();
        if s == shape {
            return self.clone();
        }
        assert!(
            s.len() <= shape.len() && broadcast_shape(&s, shape).as_deref() == Some(shape),
            "broadcast_to: cannot broadcast shape {s:?} to {shape:?}"
        );
        let mut padded = vec![1usize; shape.len() - s.len()];
        padded.extend(&s);
        self.reshape_exact(&padded).expand_exact(shape)
    }

    /// [`Tensor::broadcast_to`] a shape that may have symbolic sizes.
    pub(crate) fn broadcast_to_sym(&self, shape: &[tinygrad_uop::SInt]) -> Tensor {
        let s = self.shape();
        let mut padded = vec![1usize; shape.len() - s.len()];
        padded.extend(&s);
        let r = self.reshape_exact(&padded);
        // an axis keeps its own size unless it broadcasts (its value is 1, the target's is
        // not): an axis of 2 against a symbolic one bound to 2 is the same axis, not a broadcast
        let own = r.sym_shape();
        let to: Vec<tinygrad_uop::SInt> = own
            .iter()
            .zip(shape)
            .map(|(o, t)| {
                if o.bound_value() == t.bound_value() {
                    o.clone()
                } else {
                    t.clone()
                }
            })
            .collect();
        if own == to {
            return r;
        }
        r.expand_sym(&to)
    }

    /// Both operands broadcast to a common shape and promoted to a common dtype.
    pub(crate) fn broadcasted(&self, other: impl IntoOperand, op: &str) -> (Tensor, Tensor) {
        self.broadcasted_match(other, op, true)
    }

    fn broadcasted_match(
        &self,
        other: impl IntoOperand,
        op: &str,
        match_dtype: bool,
    ) -> (Tensor, Tensor) {
        match other.into_operand() {
            Operand::Const(c) => {
                let dt = if match_dtype {
                    promote_with_const(self.dtype(), &c)
                } else {
                    c.default_dtype()
                };
                let x = if match_dtype {
                    self.cast(dt)
                } else {
                    self.clone()
                };
                let y = x.const_like(c, dt);
                (x, y)
            }
            Operand::Tensor(t) => {
                assert_eq!(
                    self.device(),
                    t.device(),
                    "{op}: operands on different devices ({} and {})",
                    self.device(),
                    t.device()
                );
                let (sa, sb) = (self.shape(), t.shape());
                let shape = broadcast_shape(&sa, &sb).unwrap_or_else(|| {
                    panic!(
                        "{op}: cannot broadcast shapes {sa:?} and {sb:?} ({} and {})",
                        self.dtype(),
                        t.dtype()
                    )
                });
                let (mut x, mut y) = if self.uop().has_sym() || t.uop().has_sym() {
                    // symbolic sizes: each axis takes the operand's size that is not 1, so a
                    // size-1 axis broadcast to a symbolic one stays symbolic
                    let target = broadcast_sym(&self.sym_shape(), &t.sym_shape());
                    (self.broadcast_to_sym(&target), t.broadcast_to_sym(&target))
                } else {
                    (self.broadcast_to(&shape), t.broadcast_to(&shape))
                };
                if match_dtype && x.dtype() != y.dtype() {
                    let dt = least_upper_dtype(&[x.dtype(), y.dtype()]);
                    x = x.cast(dt);
                    y = y.cast(dt);
                }
                (x, y)
            }
        }
    }

    /// A raw ALU op on `self` and `rest` (tinygrad's `alu`): no broadcasting or dtype promotion
    /// — the operands must already share shape and dtype (comparisons give bool).
    ///
    /// ```
    /// use tinygrad_tensor::{Ops, Tensor};
    /// let a = Tensor::from_vec(vec![1i32, 5, 3]);
    /// let b = Tensor::from_vec(vec![4i32, 2, 3]);
    /// assert_eq!(a.alu(Ops::Max, &[&b]).to_vec::<i32>(), vec![4, 5, 3]);
    /// assert_eq!(a.alu(Ops::CmpLt, &[&b]).to_vec::<bool>(), vec![true, false, false]);
    /// ```
    ///
    /// # Panics
    /// If `op` is not an ALU op, the number of operands is wrong, their shapes differ, or their
    /// dtypes break the op's contract (e.g. `Add` of int32 and float32, a non-bool `Where`
    /// condition).
    pub fn alu(&self, op: Ops, rest: &[&Tensor]) -> Tensor {
        let describe = || {
            let all = std::iter::once(self).chain(rest.iter().copied());
            all.map(|t| format!("{:?} {}", t.shape(), t.dtype()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let arity = op.alu_arity();
        assert!(
            arity == Some(rest.len() + 1),
            "alu: {op} takes {} operands, got {} ({})",
            arity.map_or_else(|| "no".to_string(), |a| a.to_string()),
            rest.len() + 1,
            describe()
        );
        // Operands of different shapes would be indexed with the first one's indices: a read
        // past the end of the smaller buffer.
        let shape = self.uop().shape();
        for t in rest {
            assert!(
                t.uop().shape() == shape,
                "alu: {op} needs operands of one shape (no broadcasting), got {}",
                describe()
            );
            assert_eq!(
                t.device(),
                self.device(),
                "alu: {op} of tensors on different devices ({} and {})",
                self.device(),
                t.device()
            );
        }
        let src: Vec<UOp> = rest.iter().map(|t| t.uop()).collect();
        let u = self.uop().alu(op, &src);
        if let Err(e) = tinygrad_uop::verify::verify_alu(&u) {
            panic!("alu: {op} of {}: {e}", describe());
        }
        self.with_uop(u)
    }

    fn float_unary(&self, op: Ops) -> Tensor {
        let x = self.cast(least_upper_float(self.dtype()));
        x.alu(op, &[])
    }

    // ---- casts ----

    /// `cast(float32)`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_slice(&[-1i32, 2, 3], &[3]).float();
    /// assert_eq!(t.dtype(), DType::FLOAT32);
    /// assert_eq!(t.to_vec::<f32>(), vec![-1.0, 2.0, 3.0]);
    /// ```
    pub fn float(&self) -> Tensor {
        self.cast(DType::FLOAT32)
    }

    /// `cast(float16)`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor, f16};
    /// let t = Tensor::from_slice(&[-1i32, 2, 3], &[3]).half();
    /// assert_eq!(t.dtype(), DType::FLOAT16);
    /// assert_eq!(t.to_vec::<f16>(), [-1.0f32, 2.0, 3.0].map(f16::from_f32).to_vec());
    /// ```
    pub fn half(&self) -> Tensor {
        self.cast(DType::FLOAT16)
    }

    /// `cast(bfloat16)`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor, bf16};
    /// let t = Tensor::from_slice(&[-1i32, 2, 3], &[3]).bfloat16();
    /// assert_eq!(t.dtype(), DType::BFLOAT16);
    /// assert_eq!(t.to_vec::<bf16>(), [-1.0f32, 2.0, 3.0].map(bf16::from_f32).to_vec());
    /// ```
    pub fn bfloat16(&self) -> Tensor {
        self.cast(DType::BFLOAT16)
    }

    /// `cast(float64)`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_slice(&[-1i32, 2, 3], &[3]).double();
    /// assert_eq!(t.dtype(), DType::FLOAT64);
    /// assert_eq!(t.to_vec::<f64>(), vec![-1.0, 2.0, 3.0]);
    /// ```
    pub fn double(&self) -> Tensor {
        self.cast(DType::FLOAT64)
    }

    /// `cast(int32)`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_slice(&[-1.5f32, 2.7, 3.0], &[3]).int();
    /// assert_eq!(t.dtype(), DType::INT32);
    /// assert_eq!(t.to_vec::<i32>(), vec![-1, 2, 3]);
    /// ```
    pub fn int(&self) -> Tensor {
        self.cast(DType::INT32)
    }

    /// `cast(int64)`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_slice(&[-1.5f32, 2.7, 3.0], &[3]).long();
    /// assert_eq!(t.dtype(), DType::INT64);
    /// assert_eq!(t.to_vec::<i64>(), vec![-1, 2, 3]);
    /// ```
    pub fn long(&self) -> Tensor {
        self.cast(DType::INT64)
    }

    /// `cast(int16)`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_slice(&[-1.5f32, 2.7, 3.0], &[3]).short();
    /// assert_eq!(t.dtype(), DType::INT16);
    /// assert_eq!(t.to_vec::<i16>(), vec![-1, 2, 3]);
    /// ```
    pub fn short(&self) -> Tensor {
        self.cast(DType::INT16)
    }

    /// `cast(bool)` (non-zero is true).
    ///
    /// ```
    /// # use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_slice(&[0.0f32, 2.5, -1.0], &[3]);
    /// assert_eq!(t.bool().to_vec::<bool>(), vec![false, true, true]);
    /// assert_eq!(t.int().to_vec::<i32>(), vec![0, 2, -1]);
    /// assert_eq!((t.half().dtype(), t.double().dtype()), (DType::FLOAT16, DType::FLOAT64));
    /// assert_eq!((t.bfloat16().dtype(), t.float().dtype()), (DType::BFLOAT16, DType::FLOAT32));
    /// assert_eq!(t.long().to_vec::<i64>(), vec![0, 2, -1]);
    /// assert_eq!(t.short().dtype(), DType::INT16);
    /// ```
    pub fn bool(&self) -> Tensor {
        self.cast(DType::BOOL)
    }

    /// Converts to `dtype` (float -> int truncates toward zero; int casts wrap).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_slice(&[-1.0f32, 2.5, 3.0], &[3]).cast(DType::INT32);
    /// assert_eq!((t.dtype(), t.to_vec::<i32>()), (DType::INT32, vec![-1, 2, 3]));
    /// let t = t.cast(DType::UINT8);
    /// assert_eq!((t.dtype(), t.to_vec::<u8>()), (DType::UINT8, vec![255, 2, 3]));
    /// ```
    pub fn cast(&self, dtype: DType) -> Tensor {
        if self.dtype() == dtype {
            return self.clone();
        }
        self.with_uop(UOp::new(Ops::Cast, dtype, vec![self.uop()], Arg::None))
    }

    /// Reinterprets the bits as `dtype` (same item size).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_slice(&[-1i32, 2, 3], &[3]).bitcast(DType::UINT32);
    /// assert_eq!((t.dtype(), t.to_vec::<u32>()), (DType::UINT32, vec![4294967295, 2, 3]));
    /// ```
    ///
    /// # Panics
    /// If the item sizes differ.
    pub fn bitcast(&self, dtype: DType) -> Tensor {
        assert_eq!(
            self.dtype().itemsize(),
            dtype.itemsize(),
            "bitcast: {} ({} bytes) to {dtype} ({} bytes) changes the item size",
            self.dtype(),
            self.dtype().itemsize(),
            dtype.itemsize()
        );
        if self.dtype() == dtype {
            return self.clone();
        }
        self.with_uop(UOp::new(Ops::Bitcast, dtype, vec![self.uop()], Arg::None))
    }

    // ---- unary math ----

    /// `-x` (logical not for bool).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-3.0f32, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0], &[7]);
    /// assert_eq!(t.neg().to_vec::<f32>(), vec![3.0, 2.0, 1.0, 0.0, -1.0, -2.0, -3.0]);
    /// let b = Tensor::from_slice(&[true, false], &[2]);
    /// assert_eq!(b.neg().to_vec::<bool>(), vec![false, true]);
    /// ```
    pub fn neg(&self) -> Tensor {
        if self.dtype().is_bool() {
            self.logical_not()
        } else {
            self * -1
        }
    }

    /// `1/x` (in a float dtype).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let v = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4]).reciprocal().to_vec::<f32>();
    /// for (a, b) in v.iter().zip([1.0f32, 0.5, 0.33333334, 0.25]) {
    ///     assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    /// }
    /// ```
    pub fn reciprocal(&self) -> Tensor {
        self.float_unary(Ops::Recip)
    }

    /// Square root.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let v = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4]).sqrt().to_vec::<f32>();
    /// for (a, b) in v.iter().zip([1.0f32, 1.4142135, 1.7320508, 2.0]) {
    ///     assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    /// }
    /// ```
    pub fn sqrt(&self) -> Tensor {
        self.float_unary(Ops::Sqrt)
    }

    /// `1/sqrt(x)`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let v = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4]).rsqrt().to_vec::<f32>();
    /// for (a, b) in v.iter().zip([1.0f32, 0.70710677, 0.57735026, 0.5]) {
    ///     assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    /// }
    /// ```
    pub fn rsqrt(&self) -> Tensor {
        self.sqrt().reciprocal()
    }

    /// `2^x`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let v = Tensor::from_slice(&[0.0f32, 1.0, 2.0, 3.0], &[4]).exp2().to_vec::<f32>();
    /// for (a, b) in v.iter().zip([1.0f32, 2.0, 4.0, 8.0]) {
    ///     assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    /// }
    /// ```
    pub fn exp2(&self) -> Tensor {
        self.float_unary(Ops::Exp2)
    }

    /// `e^x`, as `2^(x/ln 2)`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let v = Tensor::from_slice(&[0.0f32, 1.0, 2.0, 3.0], &[4]).exp().to_vec::<f32>();
    /// for (a, b) in v.iter().zip([1.0f32, 2.7182817, 7.389056, 20.085537]) {
    ///     assert!((a - b).abs() < 1e-4, "{a} vs {b}");
    /// }
    /// ```
    pub fn exp(&self) -> Tensor {
        (self.cast(least_upper_float(self.dtype())) * std::f64::consts::LOG2_E).exp2()
    }

    /// `log2(x)`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let v = Tensor::from_slice(&[1.0f32, 2.0, 4.0, 8.0], &[4]).log2().to_vec::<f32>();
    /// for (a, b) in v.iter().zip([0.0f32, 1.0, 2.0, 3.0]) {
    ///     assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    /// }
    /// ```
    pub fn log2(&self) -> Tensor {
        self.float_unary(Ops::Log2)
    }

    /// Natural logarithm, as `log2(x) * ln 2`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let v = Tensor::from_slice(&[1.0f32, 2.0, 4.0, 8.0], &[4]).log().to_vec::<f32>();
    /// for (a, b) in v.iter().zip([0.0f32, 0.6931472, 1.3862944, 2.0794415]) {
    ///     assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    /// }
    /// ```
    pub fn log(&self) -> Tensor {
        self.log2() * std::f64::consts::LN_2
    }

    /// Sine.
    ///
    /// ```
    /// use std::f32::consts::PI;
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[0.0, PI / 2.0, PI, 3.0 * PI / 2.0, 2.0 * PI], &[5]);
    /// for (a, b) in t.sin().to_vec::<f32>().iter().zip([0.0f32, 1.0, 0.0, -1.0, 0.0]) {
    ///     assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    /// }
    /// ```
    pub fn sin(&self) -> Tensor {
        self.float_unary(Ops::Sin)
    }

    /// Cosine, as `sin(pi/2 - x)`.
    ///
    /// ```
    /// use std::f32::consts::PI;
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[0.0, PI / 2.0, PI, 3.0 * PI / 2.0, 2.0 * PI], &[5]);
    /// for (a, b) in t.cos().to_vec::<f32>().iter().zip([1.0f32, 0.0, -1.0, 0.0, 1.0]) {
    ///     assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    /// }
    /// ```
    pub fn cos(&self) -> Tensor {
        self.cast(least_upper_float(self.dtype()))
            .rsub(std::f64::consts::FRAC_PI_2)
            .sin()
    }

    /// Tangent, as `sin/cos`.
    ///
    /// ```
    /// use std::f32::consts::PI;
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[0.0, PI / 4.0, 3.0 * PI / 4.0, PI], &[4]);
    /// for (a, b) in t.tan().to_vec::<f32>().iter().zip([0.0f32, 1.0, -1.0, 0.0]) {
    ///     assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    /// }
    /// ```
    pub fn tan(&self) -> Tensor {
        self.sin() / self.cos()
    }

    /// Rounds toward zero (ints unchanged).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-3.9f32, -2.1, -1.5, 0.5, 1.5, 2.1, 3.9], &[7]);
    /// assert_eq!(t.trunc().to_vec::<f32>(), vec![-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0]);
    /// ```
    pub fn trunc(&self) -> Tensor {
        if self.dtype().is_float() {
            self.alu(Ops::Trunc, &[])
        } else {
            self.clone()
        }
    }

    /// Rounds toward -inf.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-3.9f32, -2.1, -1.5, 0.5, 1.5, 2.1, 3.9], &[7]);
    /// assert_eq!(t.floor().to_vec::<f32>(), vec![-4.0, -3.0, -2.0, 0.0, 1.0, 2.0, 3.0]);
    /// ```
    pub fn floor(&self) -> Tensor {
        if !self.dtype().is_float() {
            return self.clone();
        }
        let t = self.trunc();
        self.lt(&t).where_(&(&t - 1), &t)
    }

    /// Rounds toward +inf.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-3.9f32, -2.1, -1.5, 0.5, 1.5, 2.1, 3.9], &[7]);
    /// assert_eq!(t.ceil().to_vec::<f32>(), vec![-3.0, -2.0, -1.0, 1.0, 2.0, 3.0, 4.0]);
    /// ```
    pub fn ceil(&self) -> Tensor {
        if !self.dtype().is_float() {
            return self.clone();
        }
        let t = self.trunc();
        self.gt(&t).where_(&(&t + 1), &t)
    }

    /// Rounds half to even (like numpy and tinygrad).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-3.9f32, -2.1, -1.5, 0.5, 1.5, 2.1, 3.9], &[7]);
    /// assert_eq!(t.round().to_vec::<f32>(), vec![-4.0, -2.0, -2.0, 0.0, 2.0, 2.0, 4.0]);
    /// ```
    pub fn round(&self) -> Tensor {
        if !self.dtype().is_float() {
            return self.clone();
        }
        let t = self + 0.5;
        let f = t.floor();
        let tie = t.eq(&f);
        let half = &f * 0.5;
        let odd = half.ne(&half.floor());
        let r = tie.logical_and(&odd).where_(&(&f - 1), &f);
        // values this large are already integers (and x + 0.5 would round)
        let big = self
            .abs()
            .ge(2f64.powi(self.dtype().finfo().map_or(23, |(_, m)| m as i32)));
        big.where_(self, &r)
    }

    /// Absolute value.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-3.0f32, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0], &[7]);
    /// assert_eq!(t.abs().to_vec::<f32>(), vec![3.0, 2.0, 1.0, 0.0, 1.0, 2.0, 3.0]);
    /// ```
    pub fn abs(&self) -> Tensor {
        if self.dtype().is_unsigned() || self.dtype().is_bool() {
            return self.clone();
        }
        if self.dtype().is_float() {
            // +0 at zero (-0 too, as torch) and NaN at NaN; the gradient at 0 is 0 (torch's
            // sign(0)), not the 1 of picking x. (Not `x - x`: a Vulkan driver folds it to 0.)
            let zero_or_nan = self.ne(self).where_(self, 0.0);
            let neg_or_zero = self.lt(0).where_(&self.neg(), &zero_or_nan);
            return self.gt(0).where_(self, &neg_or_zero);
        }
        self.lt(0).where_(&self.neg(), self)
    }

    /// `-1`, `0` or `1` by sign (NaN stays NaN).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-3.0f32, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0], &[7]);
    /// assert_eq!(t.sign().to_vec::<f32>(), vec![-1.0, -1.0, -1.0, 0.0, 1.0, 1.0, 1.0]);
    /// ```
    pub fn sign(&self) -> Tensor {
        let dt = self.dtype();
        let s = self.ne(0).where_(
            &self
                .lt(0)
                .where_(&self.const_like(-1i64, dt), &self.const_like(1i64, dt)),
            &self.const_like(0i64, dt),
        );
        // `x * 0` is NaN for NaN (and inf) inputs: it carries NaN through, as tinygrad does
        #[allow(clippy::erasing_op)]
        let nan_carry = self * 0;
        if dt.is_float() { s + nan_carry } else { s }
    }

    /// `max(x, 0)`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-3.0f32, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0], &[7]);
    /// assert_eq!(t.relu().to_vec::<f32>(), vec![0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0]);
    /// ```
    pub fn relu(&self) -> Tensor {
        let relu = |x: &Tensor| x.gt(0).where_(x, &x.const_like(0i64, x.dtype()));
        if !self.dtype().is_float() || !Tensor::is_grad_enabled() {
            return relu(self);
        }
        // The gradient is tinygrad's, `(x > 0).where(g, 0)`, with the mask read from the output
        // (`relu(x) > 0` is `x > 0` for every x, NaN and -0.0 included). Derived from `x`, the
        // backward pass kept `x` alive next to the output: a layer's pre-activation (a GEMM's
        // result) was stored, then read again by a separate ReLU kernel (beautiful_mnist: four
        // such kernels, ~5 ms per training step). With the output's mask, `x` has one reader
        // and the ReLU fuses into whatever computes `x`.
        let value = relu(&self.detach());
        let (dev, out) = (self.device().to_string(), value.uop());
        let node = custom_gradient(&value.uop(), &[self.uop()], "relu", move |g, _| {
            let (g, out) = (
                Tensor::from_uop(g.clone(), &dev),
                Tensor::from_uop(out.clone(), &dev),
            );
            let zero = g.const_like(0i64, g.dtype());
            vec![None, Some(out.gt(0).where_(&g, &zero).uop())]
        });
        value.with_uop(node)
    }

    /// `1 / (1 + e^-x)`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-3.0f32, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0], &[7]);
    /// let want = [0.047425874f32, 0.11920292, 0.26894143, 0.5, 0.7310586, 0.8807971, 0.95257413];
    /// for (a, b) in t.sigmoid().to_vec::<f32>().iter().zip(want) {
    ///     assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    /// }
    /// ```
    pub fn sigmoid(&self) -> Tensor {
        let x = self.cast(least_upper_float(self.dtype()));
        // `1 / (1 + e^-x)` overflows e^-x for x << 0, and its gradient is then 0 * inf = NaN
        // (torch: 0). The stable form exponentiates -|x| only: e = e^-|x| <= 1, and sigmoid is
        // `1 / (1 + e)` for x >= 0, `e / (1 + e)` below. -|x| is a `where`, not `abs`, so that
        // the gradient at 0 is the x >= 0 branch's (abs'(0) is 0).
        let pos = x.ge(0);
        let e = (pos.where_(&x.neg(), &x) * std::f64::consts::LOG2_E).exp2();
        let r = (&e + 1).reciprocal();
        pos.where_(&r, &(&e * &r))
    }

    /// Hyperbolic tangent, as `2*sigmoid(2x) - 1`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-3.0f32, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0], &[7]);
    /// let want = [-0.9950548f32, -0.9640276, -0.7615942, 0.0, 0.7615942, 0.9640276, 0.9950548];
    /// for (a, b) in t.tanh().to_vec::<f32>().iter().zip(want) {
    ///     assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    /// }
    /// ```
    pub fn tanh(&self) -> Tensor {
        (self * 2).sigmoid() * 2 - 1
    }

    // ---- binary math ----

    /// `self + other`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-1.0f32, 0.5, 2.0, 3.25], &[4]);
    /// assert_eq!(t.add(20).to_vec::<f32>(), vec![19.0, 20.5, 22.0, 23.25]);
    /// let r = t.add(Tensor::from_slice(&[2.0f32, 3.5], &[2, 1]));
    /// assert_eq!(r.shape(), vec![2, 4]);
    /// assert_eq!(r.to_vec::<f32>(), vec![1.0, 2.5, 4.0, 5.25, 2.5, 4.0, 5.5, 6.75]);
    /// ```
    pub fn add(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "add");
        x.alu(Ops::Add, &[&y])
    }

    /// `self - other`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-1.0f32, 0.5, 2.0, 3.25], &[4]);
    /// assert_eq!(t.sub(20).to_vec::<f32>(), vec![-21.0, -19.5, -18.0, -16.75]);
    /// let r = t.sub(Tensor::from_slice(&[2.0f32, 3.5], &[2, 1]));
    /// assert_eq!(r.shape(), vec![2, 4]);
    /// assert_eq!(r.to_vec::<f32>(), vec![-3.0, -1.5, 0.0, 1.25, -4.5, -3.0, -1.5, -0.25]);
    /// ```
    pub fn sub(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "sub");
        if x.dtype().is_bool() {
            return x.alu(Ops::Xor, &[&y]);
        }
        x.with_uop(x.uop().sub(y.uop()))
    }

    /// `other - self`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-1.0f32, 0.5, 2.0, 3.25], &[4]);
    /// assert_eq!(t.rsub(1).to_vec::<f32>(), vec![2.0, 0.5, -1.0, -2.25]);
    /// ```
    pub fn rsub(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "sub");
        y.sub(&x)
    }

    /// `self * other`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-1.0f32, 0.5, 2.0, 3.25], &[4]);
    /// assert_eq!(t.mul(3).to_vec::<f32>(), vec![-3.0, 1.5, 6.0, 9.75]);
    /// let r = t.mul(Tensor::from_slice(&[-1.0f32, 2.0], &[2, 1]));
    /// assert_eq!(r.shape(), vec![2, 4]);
    /// assert_eq!(r.to_vec::<f32>(), vec![1.0, -0.5, -2.0, -3.25, -2.0, 1.0, 4.0, 6.5]);
    /// ```
    pub fn mul(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "mul");
        x.alu(Ops::Mul, &[&y])
    }

    /// True division `self / other` (in a float dtype).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_slice(&[-1.0f32, 0.5, 2.0, 3.25], &[4]);
    /// assert_eq!(t.div(4).to_vec::<f32>(), vec![-0.25, 0.125, 0.5, 0.8125]);
    /// let r = Tensor::from_vec(vec![1i32, 4, 10]).div(Tensor::from_vec(vec![2i32, 3, 4]));
    /// assert_eq!(r.dtype(), DType::FLOAT32);
    /// for (a, b) in r.to_vec::<f32>().iter().zip([0.5f32, 1.3333334, 2.5]) {
    ///     assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    /// }
    /// ```
    pub fn div(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "div");
        let dt = least_upper_float(x.dtype());
        x.cast(dt).alu(Ops::FDiv, &[&y.cast(dt)])
    }

    /// `other / self`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 4.0], &[3]);
    /// assert_eq!(t.rdiv(2).to_vec::<f32>(), vec![2.0, 1.0, 0.5]);
    /// ```
    pub fn rdiv(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "div");
        y.div(&x)
    }

    /// Division with a rounding mode: `"trunc"` or `"floor"` (ints stay ints), or true division.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let a = Tensor::from_slice(&[7i32, -7, 7, -7], &[4]);
    /// let b = Tensor::from_slice(&[2i32, 2, -2, -2], &[4]);
    /// assert_eq!(a.div_mode(&b, Some("trunc")).to_vec::<i32>(), vec![3, -3, -3, 3]);
    /// assert_eq!(a.div_mode(&b, Some("floor")).to_vec::<i32>(), vec![3, -4, -4, 3]);
    /// assert_eq!(a.div_mode(&b, None).to_vec::<f32>(), vec![3.5, -3.5, -3.5, 3.5]);
    /// ```
    ///
    /// # Panics
    /// On an unknown rounding mode.
    pub fn div_mode(&self, other: impl IntoOperand, rounding_mode: Option<&str>) -> Tensor {
        let (x, y) = self.broadcasted(other, "div");
        match rounding_mode {
            None => x.div(&y),
            Some("trunc") if x.dtype().is_int() => x.idiv(&y),
            Some("trunc") => x.div(&y).trunc(),
            Some("floor") if x.dtype().is_int() => {
                let q = x.idiv(&y);
                let r = x.alu(Ops::Mod, &[&y]);
                let adjust = r.ne(0).logical_and(&x.lt(0).ne(&y.lt(0)));
                adjust.where_(&(&q - 1), &q)
            }
            Some("floor") => x.div(&y).floor(),
            Some(m) => panic!("div: rounding_mode must be \"trunc\" or \"floor\", got {m:?}"),
        }
    }

    /// Integer division truncating toward zero (C semantics).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let a = Tensor::from_slice(&[7i32, -7, 7, -7], &[4]);
    /// let b = Tensor::from_slice(&[2i32, 2, -2, -2], &[4]);
    /// assert_eq!(a.idiv(&b).to_vec::<i32>(), vec![3, -3, -3, 3]);
    /// assert_eq!(a.idiv(3).to_vec::<i32>(), vec![2, -2, 2, -2]);
    /// ```
    ///
    /// # Panics
    /// For non-integer dtypes.
    pub fn idiv(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "idiv");
        assert!(
            x.dtype().is_int() || x.dtype().is_bool(),
            "idiv: needs integer operands, got {}",
            x.dtype()
        );
        x.alu(Ops::IDiv, &[&y])
    }

    /// Remainder with the sign of the divisor (Python's `%`, tinygrad's `mod`).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let a = Tensor::from_slice(&[-4i32, 7, 5, 4, -7, 8], &[6]);
    /// let b = Tensor::from_slice(&[2i32, -3, 8, -2, 3, 5], &[6]);
    /// assert_eq!(a.modulo(&b).to_vec::<i32>(), vec![0, -2, 5, 0, 2, 3]);
    /// ```
    pub fn modulo(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "mod");
        if x.dtype().is_float() {
            return &x - &(x.div(&y).floor() * &y);
        }
        let r = x.alu(Ops::Mod, &[&y]);
        let fix = r.ne(0).logical_and(&r.lt(0).ne(&y.lt(0)));
        fix.where_(&(&r + &y), &r)
    }

    /// `self ^ exponent`, computed as `2^(y*log2|x|)` with the sign fixed for integer exponents
    /// (so negative bases work for integer exponents, and give NaN otherwise); `x^0 = 1`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-1i32, 2, 3], &[3]);
    /// assert_eq!(t.pow(2).to_vec::<i32>(), vec![1, 4, 9]);
    /// let v = t.pow(Tensor::from_slice(&[-1.5f32, 0.5, 1.5], &[3])).to_vec::<f32>();
    /// assert!(v[0].is_nan());
    /// assert!((v[1] - 1.4142135).abs() < 1e-5 && (v[2] - 5.196152).abs() < 1e-5, "{v:?}");
    /// ```
    ///
    /// A constant integer exponent (|c| <= 1024) is computed by repeated multiplication, as
    /// tinygrad does: exact where the result is representable (`(-3.0)^3 = -27`, as torch); a
    /// negative one takes the reciprocal first (`(1e20)^-2` is the subnormal 1e-40, not 0). The gradient is torch's: `y x^(y-1)` (0 where `y = 0`, NaN for a negative base
    /// with a fractional exponent, inf at `0^0.3`) and `x^y ln x` (0 where `x = 0`, `y >= 0`).
    ///
    /// # Panics
    /// If an integer tensor is raised to a negative integer constant (as tinygrad and torch:
    /// "Integers to negative integer powers are not allowed"; a tensor exponent is allowed).
    pub fn pow(&self, exponent: impl IntoOperand) -> Tensor {
        let exponent = exponent.into_operand();
        let const_exp = match &exponent {
            Operand::Const(c) => Some(*c),
            Operand::Tensor(_) => None,
        };
        if let Some(c) = &const_exp {
            assert!(
                !((self.dtype().is_int() || self.dtype().is_bool())
                    && c.default_dtype().is_int()
                    && c.as_f64() < 0.0),
                "pow: integers to negative integer powers are not allowed: {} tensor of shape \
                 {:?} ** {}",
                self.dtype(),
                self.shape(),
                c.as_f64()
            );
        }
        let (x, y) = self.broadcasted(exponent, "pow");
        if x.dtype().is_int() {
            return x.int_pow(&y);
        }
        let dt = least_upper_float(x.dtype());
        let (xf, yf) = (x.cast(dt), y.cast(dt));
        let c = const_exp.map(|c| c.as_f64());
        let value = Tensor::pow_value(&xf.detach(), &yf.detach(), c);
        if !Tensor::is_grad_enabled() {
            return value;
        }
        // the derived gradient of the formula above is NaN or 0 where torch's is not (0^0,
        // 0^0.3, a negative base with a fractional exponent): torch's formula instead
        let (xu, yu, out) = (xf.uop(), yf.uop(), value.uop());
        let dev = self.device().to_string();
        let inputs = if c.is_some() {
            vec![xu.clone()]
        } else {
            vec![xu.clone(), yu.clone()]
        };
        let node = custom_gradient(&value.uop(), &inputs, "pow", move |g, _| {
            let (g, x, y) = (
                Tensor::from_uop(g.clone(), &dev),
                Tensor::from_uop(xu.clone(), &dev),
                Tensor::from_uop(yu.clone(), &dev),
            );
            let x_pow = match c {
                Some(c) => x.pow(c - 1.0),
                None => x.pow(&(&y - 1)),
            };
            let dx = y.eq(0).where_(0.0, &(&y * &x_pow));
            let mut grads = vec![None, Some((&g * &dx).uop())];
            if c.is_none() {
                let out = Tensor::from_uop(out.clone(), &dev);
                let no_grad = x.eq(0).logical_and(&y.ge(0));
                let dy = no_grad.where_(0.0, &(&out * &x.log()));
                grads.push(Some((&g * &dy).uop()));
            }
            grads
        });
        value.with_uop(node)
    }

    /// The value of a float `x ^ y` (operands detached, broadcast, one float dtype): for a
    /// constant integer exponent by repeated squaring (exact where the result is), else
    /// `2^(y*log2|x|)` with the sign fixed for odd integer exponents, NaN for a negative base
    /// with a fractional exponent (but `(-inf)^0.3 = inf`, as C's `pow`), and `x^0 = 1`.
    fn pow_value(x: &Tensor, y: &Tensor, c: Option<f64>) -> Tensor {
        let dt = x.dtype();
        if let Some(c) = c {
            if c == 0.0 {
                return x.const_like(1i64, dt);
            }
            if c.fract() == 0.0 && c.abs() <= 1024.0 {
                let mut n = c.abs() as u64;
                let first = if c < 0.0 { x.reciprocal() } else { x.clone() };
                let (mut acc, mut base): (Option<Tensor>, Tensor) = (None, first);
                while n > 0 {
                    if n & 1 == 1 {
                        acc = Some(match acc {
                            None => base.clone(),
                            Some(a) => &a * &base,
                        });
                    }
                    n >>= 1;
                    if n > 0 {
                        base = &base * &base;
                    }
                }
                return acc.expect("a non-zero exponent has a set bit");
            }
        }
        let mag = (x.abs().log2() * y).exp2();
        let y_int = y.eq(&y.trunc());
        let y_odd = y_int.logical_and(&(y * 0.5).ne(&(y * 0.5).trunc()));
        let neg = x.lt(0);
        let signed = neg.logical_and(&y_odd).where_(&mag.neg(), &mag);
        let nan = x.const_like(f64::NAN, dt);
        let frac_of_neg = neg
            .logical_and(&y_int.logical_not())
            .logical_and(&x.ne(f64::NEG_INFINITY));
        let res = frac_of_neg.where_(&nan, &signed);
        y.eq(0).where_(&x.const_like(1i64, dt), &res)
    }

    /// Integer `x ^ y` (both of one integer dtype), exact in the dtype's wrapping arithmetic
    /// (as torch): binary exponentiation, one squaring per bit of the exponent's dtype. A
    /// negative exponent gives `1 / x^|y|` truncated: `1` for `x = 1`, `+-1` for `x = -1`, else 0.
    fn int_pow(&self, y: &Tensor) -> Tensor {
        let dt = self.dtype();
        let one = self.const_like(1i64, dt);
        let (mut result, mut base) = (one.clone(), self.clone());
        let bits = dt.bitsize() as usize - usize::from(!dt.is_unsigned());
        for bit in 0..bits {
            let set = y
                .bitwise_and(self.const_like(ConstValue::UInt(1u64 << bit), dt))
                .ne(0);
            result = set.where_(&(&result * &base), &result);
            if bit + 1 < bits {
                base = &base * &base;
            }
        }
        if dt.is_unsigned() {
            return result;
        }
        let odd = y.bitwise_and(1).ne(0);
        let minus_one_pow = odd.where_(&self.const_like(-1i64, dt), &one);
        let negative = self.eq(1).where_(
            &one,
            &self
                .eq(-1)
                .where_(&minus_one_pow, &self.const_like(0i64, dt)),
        );
        y.lt(0).where_(&negative, &result)
    }

    /// Elementwise maximum.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-1i32, 2, 3], &[3]);
    /// assert_eq!(t.maximum(1).to_vec::<i32>(), vec![1, 2, 3]);
    /// let o = Tensor::from_slice(&[-4i32, -2, 9], &[3]);
    /// assert_eq!(t.maximum(&o).to_vec::<i32>(), vec![-1, 2, 9]);
    /// ```
    pub fn maximum(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "maximum");
        x.alu(Ops::Max, &[&y])
    }

    /// Elementwise minimum.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-1i32, 2, 3], &[3]);
    /// assert_eq!(t.minimum(1).to_vec::<i32>(), vec![-1, 1, 1]);
    /// let o = Tensor::from_slice(&[-4i32, -2, 9], &[3]);
    /// assert_eq!(t.minimum(&o).to_vec::<i32>(), vec![-4, -2, 3]);
    /// ```
    pub fn minimum(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "minimum");
        if x.dtype().is_bool() {
            return x.alu(Ops::And, &[&y]);
        }
        if x.dtype().is_float() {
            return x.neg().maximum(&y.neg()).neg();
        }
        x.lt(&y).where_(&x, &y)
    }

    /// Clamps into `[min, max]` (either bound optional).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-3.0f32, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0], &[7]);
    /// let r = t.clip(Some(-1.0), Some(1.0));
    /// assert_eq!(r.to_vec::<f32>(), vec![-1.0, -1.0, -1.0, 0.0, 1.0, 1.0, 1.0]);
    /// assert_eq!(t.clip(None, Some(0.5)).to_vec::<f32>()[4..], [0.5, 0.5, 0.5]);
    /// ```
    pub fn clip(&self, min: Option<f64>, max: Option<f64>) -> Tensor {
        assert!(
            min.is_some() || max.is_some(),
            "clip: at least one of min or max is required"
        );
        let mut r = self.clone();
        if self.dtype().is_float() {
            // `where(x <= lo, lo, x)`, not `maximum`: the gradient is 0 at a bound as in torch
            // (2.15; `maximum` splits a tie 0.5/0.5); NaN compares false and passes through
            if let Some(lo) = min {
                r = r.le(lo).where_(lo, &r);
            }
            if let Some(hi) = max {
                r = r.ge(hi).where_(hi, &r);
            }
            return r;
        }
        if let Some(lo) = min {
            r = r.maximum(lo as i64);
        }
        if let Some(hi) = max {
            r = r.minimum(hi as i64);
        }
        r
    }

    // ---- comparisons (bool results) ----

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

    // ---- logic and bits ----

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

/// The broadcast of two symbolic shapes (right-aligned): each axis the size that is not 1 (the
/// bound shapes broadcast, checked by the caller).
fn broadcast_sym(a: &[tinygrad_uop::SInt], b: &[tinygrad_uop::SInt]) -> Vec<tinygrad_uop::SInt> {
    let n = a.len().max(b.len());
    let one = tinygrad_uop::SInt::Const(1);
    (0..n)
        .map(|i| {
            let x = (i + a.len()).checked_sub(n).map_or(&one, |k| &a[k]);
            let y = (i + b.len()).checked_sub(n).map_or(&one, |k| &b[k]);
            if *x == 1 { y.clone() } else { x.clone() }
        })
        .collect()
}
