//! Unary math: `neg`, `reciprocal`, `sqrt`/`rsqrt`, `exp`/`log` (and base 2), `sin`/`cos`/`tan`,
//! rounding, `abs`, `sign`, `relu`, `sigmoid`, `tanh`.

use tinygrad_dtype::{DType, least_upper_float};
use tinygrad_uop::{Ops, custom_gradient};

use crate::Tensor;

impl Tensor {
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
        // one instruction where every backend has it (roundss, cvt.rni, WGSL round); the
        // narrower floats keep the decomposition
        if self.dtype() == DType::FLOAT32 || self.dtype() == DType::FLOAT64 {
            return self.alu(Ops::Round, &[]);
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
        // and the ReLU fuses into whatever computes `x`. (See docs/performance.md.)
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
}
