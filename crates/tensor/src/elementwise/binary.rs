//! Binary math: `add`, `sub`, `mul`, `div` (and `div_mode`, `idiv`, `modulo`), `pow`,
//! `maximum`/`minimum`, `clip`.

use tinygrad_dtype::{ConstValue, least_upper_float};
use tinygrad_uop::{Ops, custom_gradient};

use super::{IntoOperand, Operand};
use crate::Tensor;

impl Tensor {
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
}
