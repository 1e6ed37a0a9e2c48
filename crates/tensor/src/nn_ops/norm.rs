//! Normalization: `layernorm`, `batchnorm`, `normalize`.

use crate::Tensor;
use crate::reduce::Axis;

impl Tensor {
    /// Layer normalization over `axis` (no affine part): `(x - mean) / sqrt(var + eps)` with the
    /// biased variance (tinygrad's defaults: axis -1, eps 1e-5).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[1, 4]);
    /// let want = [-1.341635f32, -0.447212, 0.447212, 1.341635];
    /// for (a, b) in t.layernorm(-1, 1e-5).to_vec::<f32>().iter().zip(want) {
    ///     assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    /// }
    /// ```
    pub fn layernorm(&self, axis: impl Into<Axis>, eps: f64) -> Tensor {
        let axis = axis.into();
        // checked here so that an error names layernorm, not the mean it is built from
        self.resolve_axes(axis.clone(), "layernorm");
        let x = self.as_float();
        let y = &x - &x.mean_keepdim(axis.clone());
        let v = (&y * &y).mean_keepdim(axis);
        &y * &(v + eps).rsqrt()
    }

    /// tinygrad's functional batch normalization over channel axis 1:
    /// `(x - mean) * weight * invstd + bias`, where `weight`, `bias`, `mean` and `invstd` have
    /// one value per channel.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]); // 2 channels
    /// let mean = Tensor::from_slice(&[2.0f32, 3.0], &[2]);
    /// let invstd = Tensor::from_slice(&[1.0f32, 0.5], &[2]);
    /// let bias = Tensor::from_slice(&[10.0f32, 20.0], &[2]);
    /// let y = x.batchnorm(None, Some(&bias), &mean, &invstd);
    /// assert_eq!(y.to_vec::<f32>(), vec![9.0, 19.5, 11.0, 20.5]);
    /// ```
    pub fn batchnorm(
        &self,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        mean: &Tensor,
        invstd: &Tensor,
    ) -> Tensor {
        self.batchnorm_axes(weight, bias, mean, invstd, &[1])
    }

    /// [`Tensor::batchnorm`] with the per-channel values laid along `axes` (in order).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]); // channels on axis 0
    /// let mean = Tensor::from_slice(&[1.5f32, 3.5], &[2]);
    /// let invstd = Tensor::from_slice(&[2.0f32, 1.0], &[2]);
    /// let weight = Tensor::from_slice(&[1.0f32, 2.0], &[2]);
    /// let y = x.batchnorm_axes(Some(&weight), None, &mean, &invstd, &[0]);
    /// assert_eq!(y.to_vec::<f32>(), vec![-1.0, 1.0, -1.0, 1.0]);
    /// ```
    ///
    /// # Panics
    /// If an axis is out of range or a parameter's size doesn't match.
    pub fn batchnorm_axes(
        &self,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        mean: &Tensor,
        invstd: &Tensor,
        axes: &[isize],
    ) -> Tensor {
        let xs = self.shape();
        let ax: Vec<usize> = axes
            .iter()
            .map(|&a| crate::movement::resolve_axis(a, xs.len(), "batchnorm", &xs))
            .collect();
        let shape: Vec<isize> = xs
            .iter()
            .enumerate()
            .map(|(i, &s)| if ax.contains(&i) { s as isize } else { 1 })
            .collect();
        let fit = |t: &Tensor, what: &str| {
            let n: usize = shape.iter().product::<isize>() as usize;
            assert_eq!(
                t.numel(),
                n,
                "batchnorm: {what} shape {:?} doesn't match input shape {xs:?} on axes {axes:?}",
                t.shape()
            );
            t.reshape(&shape)
        };
        let mut x = self - fit(mean, "mean");
        if let Some(w) = weight {
            x = x.mul(fit(w, "weight"));
        }
        let ret = if invstd.ndim() == ax.len() {
            x * fit(invstd, "invstd")
        } else {
            x * invstd
        };
        match bias {
            Some(b) => ret + fit(b, "bias"),
            None => ret,
        }
    }

    /// Lp normalization along `dim`: `x / max(||x||_p, eps)` (`p = 0` divides by the count of
    /// non-zeros). tinygrad's defaults: `p = 2`, `dim = 1`, `eps = 1e-12`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[3.0f32, 4.0, 6.0, 8.0], &[2, 2]);
    /// let v = t.normalize(2.0, 1, 1e-12).to_vec::<f32>();
    /// for (a, b) in v.iter().zip([0.6f32, 0.8, 0.6, 0.8]) {
    ///     assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    /// }
    /// let v = t.normalize(1.0, 0, 1e-12).to_vec::<f32>(); // columns sum to 9 and 12
    /// for (a, b) in v.iter().zip([1.0f32 / 3.0, 1.0 / 3.0, 2.0 / 3.0, 2.0 / 3.0]) {
    ///     assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    /// }
    /// ```
    pub fn normalize(&self, p: f64, dim: isize, eps: f64) -> Tensor {
        if p == 0.0 {
            return self / self.ne(0).sum_keepdim(dim).maximum(eps);
        }
        self / self.abs().pow(p).sum_keepdim(dim).pow(1.0 / p).maximum(eps)
    }
}
