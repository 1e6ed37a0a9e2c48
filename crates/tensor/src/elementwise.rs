//! Elementwise ops: math, comparisons, logic, casts — each a few primitive UOps, with
//! broadcasting and tinygrad's dtype promotion (Rust literals promote like Python scalars).

use tinygrad_dtype::{ConstValue, DType, least_upper_dtype, least_upper_float, promote_with_const};
use tinygrad_uop::{Arg, Ops, UOp};

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
                let (mut x, mut y) = (self.broadcast_to(&shape), t.broadcast_to(&shape));
                if match_dtype && x.dtype() != y.dtype() {
                    let dt = least_upper_dtype(&[x.dtype(), y.dtype()]);
                    x = x.cast(dt);
                    y = y.cast(dt);
                }
                (x, y)
            }
        }
    }

    /// A raw ALU op on tensors of one shape (comparisons give bool).
    pub(crate) fn alu(&self, op: Ops, rest: &[&Tensor]) -> Tensor {
        let src: Vec<UOp> = rest.iter().map(|t| t.uop()).collect();
        self.with_uop(self.uop().alu(op, &src))
    }

    fn float_unary(&self, op: Ops) -> Tensor {
        let x = self.cast(least_upper_float(self.dtype()));
        x.alu(op, &[])
    }

    // ---- casts ----

    /// `cast(float32)`.
    pub fn float(&self) -> Tensor {
        self.cast(DType::FLOAT32)
    }

    /// `cast(float16)`.
    pub fn half(&self) -> Tensor {
        self.cast(DType::FLOAT16)
    }

    /// `cast(bfloat16)`.
    pub fn bfloat16(&self) -> Tensor {
        self.cast(DType::BFLOAT16)
    }

    /// `cast(float64)`.
    pub fn double(&self) -> Tensor {
        self.cast(DType::FLOAT64)
    }

    /// `cast(int32)`.
    pub fn int(&self) -> Tensor {
        self.cast(DType::INT32)
    }

    /// `cast(int64)`.
    pub fn long(&self) -> Tensor {
        self.cast(DType::INT64)
    }

    /// `cast(int16)`.
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
    pub fn cast(&self, dtype: DType) -> Tensor {
        if self.dtype() == dtype {
            return self.clone();
        }
        self.with_uop(UOp::new(Ops::Cast, dtype, vec![self.uop()], Arg::None))
    }

    /// Reinterprets the bits as `dtype` (same item size).
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
    pub fn neg(&self) -> Tensor {
        if self.dtype().is_bool() {
            self.logical_not()
        } else {
            self * -1
        }
    }

    /// `1/x` (in a float dtype).
    pub fn reciprocal(&self) -> Tensor {
        self.float_unary(Ops::Recip)
    }

    /// Square root.
    pub fn sqrt(&self) -> Tensor {
        self.float_unary(Ops::Sqrt)
    }

    /// `1/sqrt(x)`.
    pub fn rsqrt(&self) -> Tensor {
        self.sqrt().reciprocal()
    }

    /// `2^x`.
    pub fn exp2(&self) -> Tensor {
        self.float_unary(Ops::Exp2)
    }

    /// `e^x`, as `2^(x/ln 2)`.
    pub fn exp(&self) -> Tensor {
        (self.cast(least_upper_float(self.dtype())) * std::f64::consts::LOG2_E).exp2()
    }

    /// `log2(x)`.
    pub fn log2(&self) -> Tensor {
        self.float_unary(Ops::Log2)
    }

    /// Natural logarithm, as `log2(x) * ln 2`.
    pub fn log(&self) -> Tensor {
        self.log2() * std::f64::consts::LN_2
    }

    /// Sine.
    pub fn sin(&self) -> Tensor {
        self.float_unary(Ops::Sin)
    }

    /// Cosine, as `sin(pi/2 - x)`.
    pub fn cos(&self) -> Tensor {
        self.cast(least_upper_float(self.dtype()))
            .rsub(std::f64::consts::FRAC_PI_2)
            .sin()
    }

    /// Tangent, as `sin/cos`.
    pub fn tan(&self) -> Tensor {
        self.sin() / self.cos()
    }

    /// Rounds toward zero (ints unchanged).
    pub fn trunc(&self) -> Tensor {
        if self.dtype().is_float() {
            self.alu(Ops::Trunc, &[])
        } else {
            self.clone()
        }
    }

    /// Rounds toward -inf.
    pub fn floor(&self) -> Tensor {
        if !self.dtype().is_float() {
            return self.clone();
        }
        let t = self.trunc();
        self.lt(&t).where_(&(&t - 1), &t)
    }

    /// Rounds toward +inf.
    pub fn ceil(&self) -> Tensor {
        if !self.dtype().is_float() {
            return self.clone();
        }
        let t = self.trunc();
        self.gt(&t).where_(&(&t + 1), &t)
    }

    /// Rounds half to even (like numpy and tinygrad).
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
    pub fn abs(&self) -> Tensor {
        if self.dtype().is_unsigned() || self.dtype().is_bool() {
            return self.clone();
        }
        self.lt(0).where_(&self.neg(), self)
    }

    /// `-1`, `0` or `1` by sign (NaN stays NaN).
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
    pub fn relu(&self) -> Tensor {
        self.gt(0)
            .where_(self, &self.const_like(0i64, self.dtype()))
    }

    /// `1 / (1 + e^-x)`.
    pub fn sigmoid(&self) -> Tensor {
        let x = self.cast(least_upper_float(self.dtype()));
        (((&x * (-std::f64::consts::LOG2_E)).exp2()) + 1).reciprocal()
    }

    /// Hyperbolic tangent, as `2*sigmoid(2x) - 1`.
    pub fn tanh(&self) -> Tensor {
        (self * 2).sigmoid() * 2 - 1
    }

    // ---- binary math ----

    /// `self + other`.
    pub fn add(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "add");
        x.alu(Ops::Add, &[&y])
    }

    /// `self - other`.
    pub fn sub(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "sub");
        if x.dtype().is_bool() {
            return x.alu(Ops::Xor, &[&y]);
        }
        x.with_uop(x.uop().sub(y.uop()))
    }

    /// `other - self`.
    pub fn rsub(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "sub");
        y.sub(&x)
    }

    /// `self * other`.
    pub fn mul(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "mul");
        x.alu(Ops::Mul, &[&y])
    }

    /// True division `self / other` (in a float dtype).
    pub fn div(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "div");
        let dt = least_upper_float(x.dtype());
        x.cast(dt).alu(Ops::FDiv, &[&y.cast(dt)])
    }

    /// `other / self`.
    pub fn rdiv(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "div");
        y.div(&x)
    }

    /// Division with a rounding mode: `"trunc"` or `"floor"` (ints stay ints), or true division.
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
    pub fn pow(&self, exponent: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(exponent, "pow");
        let int_result = x.dtype().is_int();
        let dt = least_upper_float(x.dtype());
        let (xf, yf) = (x.cast(dt), y.cast(dt));
        let mag = (xf.abs().log2() * &yf).exp2();
        let y_int = yf.eq(&yf.trunc());
        let y_odd = y_int.logical_and(&(&yf * 0.5).ne(&(&yf * 0.5).trunc()));
        let neg = xf.lt(0);
        let signed = neg.logical_and(&y_odd).where_(&mag.neg(), &mag);
        let nan = xf.const_like(f64::NAN, dt);
        let res = neg.logical_and(&y_int.logical_not()).where_(&nan, &signed);
        let res = yf.eq(0).where_(&xf.const_like(1i64, dt), &res);
        if int_result {
            res.round().cast(x.dtype())
        } else {
            res
        }
    }

    /// Elementwise maximum.
    pub fn maximum(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "maximum");
        x.alu(Ops::Max, &[&y])
    }

    /// Elementwise minimum.
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
    pub fn clip(&self, min: Option<f64>, max: Option<f64>) -> Tensor {
        assert!(
            min.is_some() || max.is_some(),
            "clip: at least one of min or max is required"
        );
        let mut r = self.clone();
        if let Some(lo) = min {
            r = if self.dtype().is_float() {
                r.maximum(lo)
            } else {
                r.maximum(lo as i64)
            };
        }
        if let Some(hi) = max {
            r = if self.dtype().is_float() {
                r.minimum(hi)
            } else {
                r.minimum(hi as i64)
            };
        }
        r
    }

    // ---- comparisons (bool results) ----

    /// `self < other`.
    pub fn lt(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "lt");
        x.alu(Ops::CmpLt, &[&y])
    }

    /// `self > other`.
    pub fn gt(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "gt");
        y.alu(Ops::CmpLt, &[&x])
    }

    /// `self <= other` (false when either is NaN).
    pub fn le(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "le");
        x.alu(Ops::CmpLt, &[&y])
            .logical_or(&x.alu(Ops::CmpEq, &[&y]))
    }

    /// `self >= other` (false when either is NaN).
    pub fn ge(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "ge");
        y.alu(Ops::CmpLt, &[&x])
            .logical_or(&x.alu(Ops::CmpEq, &[&y]))
    }

    /// `self == other`.
    pub fn eq(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "eq");
        x.alu(Ops::CmpEq, &[&y])
    }

    /// `self != other`.
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
    pub fn logical_not(&self) -> Tensor {
        self.cast(DType::BOOL).ne(true)
    }

    /// Logical and (bool).
    pub fn logical_and(&self, other: &Tensor) -> Tensor {
        let (x, y) = self
            .as_bool("logical_and")
            .broadcasted(&other.as_bool("logical_and"), "logical_and");
        x.alu(Ops::And, &[&y])
    }

    /// Logical or (bool).
    pub fn logical_or(&self, other: &Tensor) -> Tensor {
        let (x, y) = self
            .as_bool("logical_or")
            .broadcasted(&other.as_bool("logical_or"), "logical_or");
        x.alu(Ops::Or, &[&y])
    }

    /// Logical xor (bool).
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
    pub fn bitwise_and(&self, other: impl IntoOperand) -> Tensor {
        self.bitwise(other, Ops::And, "bitwise_and")
    }

    /// Bitwise or.
    pub fn bitwise_or(&self, other: impl IntoOperand) -> Tensor {
        self.bitwise(other, Ops::Or, "bitwise_or")
    }

    /// Bitwise xor.
    pub fn bitwise_xor(&self, other: impl IntoOperand) -> Tensor {
        self.bitwise(other, Ops::Xor, "bitwise_xor")
    }

    /// Bitwise not (`x ^ -1`; logical not for bool).
    pub fn bitwise_not(&self) -> Tensor {
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
    pub fn lshift(&self, other: impl IntoOperand) -> Tensor {
        self.bitwise(other, Ops::Shl, "lshift")
    }

    /// Shift right (`x >> n`, arithmetic for signed dtypes).
    pub fn rshift(&self, other: impl IntoOperand) -> Tensor {
        self.bitwise(other, Ops::Shr, "rshift")
    }

    /// `self ? x : y` with `self` a bool condition; all three broadcast.
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
