//! More elementwise math from tinygrad's mixins, built from the primitive ops (so every device
//! and autograd get them for free): `log10`, `square`, the inverse trigonometric functions
//! (tinygrad's polynomial `asin`, Abramowitz & Stegun 4.4.46, absolute error below 2e-8 on
//! `[-1, 1]`), `fmod`, `copysign`, `logaddexp`, `clamp`, and the closeness tests `isclose` /
//! `allclose`.

use tinygrad_uop::custom_gradient;

use crate::Tensor;
use crate::elementwise::IntoOperand;

/// Coefficients of A&S 4.4.46, highest power first: `asin(x) = pi/2 - sqrt(1-x) * p(x)` on
/// `[0, 1]`.
const ASIN_COEFFS: [f64; 8] = [
    -0.0012624911,
    0.0066700901,
    -0.0170881256,
    0.0308918810,
    -0.0501743046,
    0.0889789874,
    -0.2145988016,
    1.5707963050,
];

impl Tensor {
    /// Base-10 logarithm (`log2(x) * log10(2)`; ints promote to float).
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1.0f32, 10.0, 100.0], &[3]);
    /// let got = t.log10().to_vec::<f32>();
    /// assert!((got[1] - 1.0).abs() < 1e-6 && (got[2] - 2.0).abs() < 1e-6);
    /// ```
    pub fn log10(&self) -> Tensor {
        self.log2() * std::f64::consts::LOG10_2
    }

    /// `x * x` (keeps the dtype).
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-3i32, 2], &[2]);
    /// assert_eq!(t.square().to_vec::<i32>(), vec![9, 4]);
    /// ```
    pub fn square(&self) -> Tensor {
        self * self
    }

    /// Inverse sine, tinygrad's polynomial (NaN outside `[-1, 1]`).
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-0.9f32, 0.0, 0.3], &[3]);
    /// let got = t.asin().to_vec::<f32>();
    /// assert!((got[0] + 1.1197695).abs() < 1e-6 && got[1] == 0.0);
    /// ```
    pub fn asin(&self) -> Tensor {
        let x = self.as_float();
        let a = x.abs();
        let mut p = Tensor::full_like(&a, ASIN_COEFFS[0]);
        for &c in &ASIN_COEFFS[1..] {
            p = p * &a + c;
        }
        let y = (a.rsub(1.0).sqrt() * p).rsub(std::f64::consts::FRAC_PI_2);
        x.sign() * y
    }

    /// Inverse cosine, `pi/2 - asin(x)`.
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1.0f32, 0.0], &[2]);
    /// let got = t.acos().to_vec::<f32>();
    /// assert!(got[0].abs() < 1e-6 && (got[1] - std::f32::consts::FRAC_PI_2).abs() < 1e-6);
    /// ```
    pub fn acos(&self) -> Tensor {
        self.as_float().asin().rsub(std::f64::consts::FRAC_PI_2)
    }

    /// Inverse tangent: tinygrad's `asin(x / sqrt(1 + x^2))` for `|x| <= 1`, and
    /// `sign(x) * pi/2 - atan(1/x)` beyond, so huge inputs and infinities give `±pi/2` (where
    /// tinygrad's form overflows to NaN).
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-1.0f32, 0.0, 3.0], &[3]);
    /// let got = t.atan().to_vec::<f32>();
    /// assert!((got[0] + std::f32::consts::FRAC_PI_4).abs() < 1e-6 && got[1] == 0.0);
    /// ```
    pub fn atan(&self) -> Tensor {
        let x = self.as_float();
        let big = x.abs().gt(1.0);
        // 1/x only where |x| > 1 (elsewhere 1/1), so no infinity reaches the gradient at 0.
        let z = big.where_(big.where_(&x, 1.0).reciprocal(), &x);
        let t = (&z / (&z * &z + 1.0).sqrt()).asin();
        let half_pi = std::f64::consts::FRAC_PI_2;
        // not `sign(x)`: tinygrad's sign is NaN for infinities
        let edge = x.lt(0.0).where_(-half_pi, half_pi);
        big.where_(edge - &t, &t)
    }

    /// Alias of [`Tensor::clip`].
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![-3.0f32, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0]);
    /// let r = t.clamp(Some(-1.0), Some(1.0)).to_vec::<f32>();
    /// assert_eq!(r, vec![-1.0, -1.0, -1.0, 0.0, 1.0, 1.0, 1.0]);
    /// assert_eq!(Tensor::from_vec(vec![-2i32, 5]).clamp(Some(0.0), None).to_vec::<i32>(), [0, 5]);
    /// ```
    pub fn clamp(&self, min: Option<f64>, max: Option<f64>) -> Tensor {
        self.clip(min, max)
    }

    /// The remainder of truncating division, with the sign of `self` (C's `fmod`, PyTorch's
    /// `fmod`): `x - trunc(x / y) * y` for floats; for integers the truncating remainder, with
    /// `x fmod 0 == 0` (the IR's total division).
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-3.0f32, 3.0, 5.5], &[3]);
    /// assert_eq!(t.fmod(2.0f32).to_vec::<f32>(), vec![-1.0, 1.0, 1.5]);
    /// let i = Tensor::from_slice(&[-7i32, 7], &[2]);
    /// assert_eq!(i.fmod(3i32).to_vec::<i32>(), vec![-1, 1]);
    /// ```
    pub fn fmod(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "fmod");
        if x.dtype().is_float() {
            &x - (&x / &y).trunc() * &y
        } else {
            x.alu(tinygrad_uop::Ops::Mod, &[&y])
        }
    }

    /// The magnitude of `self` with the sign of `other` (`-0.0` counts as negative), in the
    /// broadcast dtype — tinygrad's `copysign`.
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1.0f32, -2.0, 3.0], &[3]);
    /// let s = Tensor::from_slice(&[-1.0f32, 1.0, -0.0], &[3]);
    /// assert_eq!(t.copysign(&s).to_vec::<f32>(), vec![-1.0, 2.0, -3.0]);
    /// ```
    ///
    /// The gradient with respect to `self` is torch's, `result / self` with 0 where `self` is
    /// ±0 (so NaN for an infinite or NaN magnitude); `other` gets 0.
    pub fn copysign(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "copysign");
        let yf = y.detach().as_float();
        let negative = yf.lt(0.0).logical_or(&yf.reciprocal().lt(0.0));
        let xd = x.detach();
        let mag = xd.abs();
        // `+ y * 0`: `y` joins the graph (its gradient is 0). Its infinities and NaN are first
        // replaced by a 1 of their sign, so the sum stays `±mag` (torch and tinygrad:
        // copysign(1, inf) = 1, copysign(1, nan) = 1), and the zero added has y's sign (so
        // copysign(0, -inf) stays -0)
        let unit = negative.where_(-1.0, 1.0).cast(y.dtype());
        #[allow(clippy::erasing_op)]
        let carry = y.isfinite().where_(&y, &unit) * 0;
        let value = negative.where_(mag.neg(), &mag) + carry;
        if !x.dtype().is_float() || !Tensor::is_grad_enabled() {
            return value;
        }
        // d/dx: the derived gradient of the `where` above would be ±1 at ±0 and at ±inf
        let ratio = xd
            .eq(0)
            .where_(0.0, &(&value.detach() / &xd))
            .cast(x.dtype())
            .uop();
        let dev = x.device().to_string();
        let node = custom_gradient(&value.uop(), &[x.uop()], "copysign", move |g, _| {
            let gx = Tensor::from_uop(g.clone(), &dev) * Tensor::from_uop(ratio.clone(), &dev);
            vec![Some(g.clone()), Some(gx.uop())]
        });
        value.with_uop(node)
    }

    /// `log(exp(self) + exp(other))`, computed stably (a `logsumexp` over the pair).
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let a = Tensor::from_slice(&[0.0f32, 1000.0], &[2]);
    /// let b = Tensor::from_slice(&[0.0f32, 1000.0], &[2]);
    /// let got = a.logaddexp(&b).to_vec::<f32>();
    /// assert!((got[0] - 2f32.ln()).abs() < 1e-6 && (got[1] - 1000.6931).abs() < 1e-3);
    /// ```
    pub fn logaddexp(&self, other: impl IntoOperand) -> Tensor {
        let (x, y) = self.broadcasted(other, "logaddexp");
        Tensor::stack(&[&x.as_float(), &y.as_float()], 0).logsumexp(0isize)
    }

    /// Whether each element is close to `other`'s: `|x - y| <= atol + rtol * |y|` for finite
    /// values, equal infinities, and NaN with NaN only when `equal_nan` (tinygrad's and numpy's
    /// `isclose`; their defaults are `rtol = 1e-5`, `atol = 1e-8`). Bool result.
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let a = Tensor::from_slice(&[1e-7f32, 1e-8, 1e-9, f32::NAN], &[4]);
    /// let z = Tensor::from_slice(&[0.0f32, 0.0, 0.0, f32::NAN], &[4]);
    /// assert_eq!(a.isclose(&z, 1e-5, 1e-8, false).to_vec::<bool>(), vec![false, true, true, false]);
    /// assert_eq!(a.isclose(&z, 1e-5, 1e-8, true).to_vec::<bool>(), vec![false, true, true, true]);
    /// ```
    pub fn isclose(
        &self,
        other: impl IntoOperand,
        rtol: f64,
        atol: f64,
        equal_nan: bool,
    ) -> Tensor {
        let (x, y) = self.broadcasted(other, "isclose");
        let finite = x
            .isfinite()
            .logical_and(&y.isfinite())
            .logical_and(&(&x - &y).abs().le(y.abs() * rtol + atol));
        let infinite = x.isinf().logical_or(&y.isinf()).logical_and(&x.eq(&y));
        let close = finite.logical_or(&infinite);
        if equal_nan {
            close.logical_or(&x.isnan().logical_and(&y.isnan()))
        } else {
            close
        }
    }

    /// Whether every element is [`Tensor::isclose`] to `other`'s (realizes; `true` for empty
    /// tensors).
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let a = Tensor::from_slice(&[1.0f32, 2.0], &[2]);
    /// assert!(a.allclose(&(&a + 1e-7f32), 1e-5, 1e-8, false));
    /// assert!(!a.allclose(&(&a + 1e-3f32), 1e-5, 1e-8, false));
    /// ```
    pub fn allclose(&self, other: impl IntoOperand, rtol: f64, atol: f64, equal_nan: bool) -> bool {
        self.isclose(other, rtol, atol, equal_nan)
            .all(crate::Axis::All)
            .item::<bool>()
    }
}

#[cfg(test)]
mod tests {
    use tinygrad_dtype::DType;

    use crate::Tensor;

    #[test]
    fn int_inputs_promote_to_float() {
        let t = Tensor::from_slice(&[1i32, 10], &[2]);
        assert_eq!(t.log10().dtype(), DType::FLOAT32);
        assert_eq!(t.asin().dtype(), DType::FLOAT32);
        assert_eq!(t.square().dtype(), DType::INT32);
    }
}
