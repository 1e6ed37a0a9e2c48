//! Resampling: `interpolate` (linear and nearest).

use tinygrad_dtype::DType;

use super::InterpolateMode;
use crate::Tensor;

impl Tensor {
    /// Resamples the last `size.len()` axes to `size` (any number of leading batch axes), as
    /// tinygrad does: one axis at a time, from the last, by gathering the source positions and
    /// (for [`InterpolateMode::Linear`]) mixing the two neighbours. Linear uses half-pixel
    /// centres clipped to the input, or with `align_corners` the corners mapped onto each other
    /// (`(in - 1) / (out - 1)`; a single output reads the first input, as in PyTorch, where
    /// tinygrad divides by zero). Integer inputs are cast back after mixing.
    ///
    /// ```
    /// # use tinygrad_tensor::{InterpolateMode, Tensor};
    /// let t = Tensor::from_slice(&[1.0f32, 2., 3., 4., 21., 22., 23., 24., 41., 42., 43., 44.], &[3, 4]);
    /// let y = t.interpolate(&[2, 3], InterpolateMode::Linear, false).to_vec::<f32>();
    /// let want = [6.1667f32, 7.5, 8.8333, 36.1667, 37.5, 38.8333];
    /// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-3));
    /// let n = t.interpolate(&[3, 2], InterpolateMode::Nearest, false).to_vec::<f32>();
    /// assert_eq!(n, vec![1., 3., 21., 23., 41., 43.]);
    /// ```
    ///
    /// # Panics
    /// If `size` is empty, longer than the shape, holds a zero, or `align_corners` is set for a
    /// mode other than linear.
    pub fn interpolate(
        &self,
        size: &[usize],
        mode: InterpolateMode,
        align_corners: bool,
    ) -> Tensor {
        let shape = self.shape();
        let nd = shape.len();
        assert!(
            !size.is_empty() && size.len() <= nd && !size.contains(&0),
            "interpolate: size {size:?} for shape {shape:?}: expected 1 to {nd} non-zero sizes \
             for the last axes"
        );
        assert!(
            !align_corners || mode == InterpolateMode::Linear,
            "interpolate: align_corners is only for InterpolateMode::Linear, got {mode:?}"
        );
        let mut x = self.clone();
        let mut expand = shape.clone();
        for k in 1..=size.len() {
            let axis = nd - k;
            let (n_in, n_out) = (shape[axis], size[size.len() - k]);
            let scale = if align_corners {
                if n_out > 1 {
                    (n_in - 1) as f64 / (n_out - 1) as f64
                } else {
                    0.0
                }
            } else {
                n_in as f64 / n_out as f64
            };
            let arr = Tensor::arange_on(0.0, n_out as f64, 1.0, DType::FLOAT32, self.device());
            let mut reshape = vec![1isize; nd];
            reshape[axis] = n_out as isize;
            expand[axis] = n_out;
            let exp: Vec<isize> = expand.iter().map(|&d| d as isize).collect();
            let view = |t: &Tensor| t.reshape(&reshape).expand(&exp);
            x = match mode {
                InterpolateMode::Linear => {
                    let index = if align_corners {
                        &arr * scale
                    } else {
                        (&arr + 0.5) * scale - 0.5
                    }
                    .clip(Some(0.0), Some((n_in - 1) as f64));
                    let low = view(&index.floor().int());
                    let high = view(&index.ceil().int());
                    let perc = view(&(&index - &index.floor()));
                    let dim = axis as isize;
                    x.gather(dim, &low).lerp(&x.gather(dim, &high), &perc)
                }
                InterpolateMode::Nearest | InterpolateMode::NearestExact => {
                    let src = if mode == InterpolateMode::NearestExact {
                        (&arr + 0.5) * scale
                    } else {
                        &arr * scale
                    };
                    x.gather(axis as isize, &view(&src.int()))
                }
            };
        }
        x.cast(self.dtype())
    }
}
