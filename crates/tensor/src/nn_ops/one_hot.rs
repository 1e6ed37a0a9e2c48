//! One-hot encoding: `one_hot` and the `one_hot_along_dim` helper used by pooling and the
//! losses.

use tinygrad_dtype::DType;

use crate::Tensor;
use crate::reduce::Axis;

impl Tensor {
    /// `self == arange(num_classes)` along a new axis `dim` of the result (tinygrad's
    /// `_one_hot_along_dim`; `self` has size 1 on that axis). Bool.
    pub(super) fn one_hot_along_dim(&self, num_classes: usize, dim: isize, op: &str) -> Tensor {
        let shape = self.shape();
        assert!(
            self.dtype().is_int(),
            "{op}: expects an integer index tensor, got {} (shape {shape:?})",
            self.dtype()
        );
        let d = crate::movement::resolve_axis(dim, shape.len(), op, &shape);
        let offset = shape.len() - d - 1;
        let mut rshape = vec![num_classes];
        rshape.extend(std::iter::repeat_n(1, offset));
        let ramp = Tensor::nn_ramp(num_classes, DType::INT32, self.device()).reshape_exact(&rshape);
        self.eq(&ramp)
    }

    /// One-hot encoding along a new last axis: int32 ones where the index matches, zeros
    /// elsewhere. `num_classes = -1` infers `max + 1` (reads the data).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[0i32, 1, 3, 3, 4], &[5]);
    /// let h = t.one_hot(5);
    /// assert_eq!(h.shape(), vec![5, 5]);
    /// assert_eq!(
    ///     h.to_vec::<i32>(),
    ///     vec![1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1]
    /// );
    /// assert_eq!(t.one_hot(-1).shape(), vec![5, 5]); // inferred: max + 1
    /// ```
    ///
    /// # Panics
    /// If `self` is not an integer tensor, or `num_classes < -1`.
    pub fn one_hot(&self, num_classes: isize) -> Tensor {
        assert!(
            self.dtype().is_int(),
            "one_hot: expects an integer dtype, got {} (shape {:?})",
            self.dtype(),
            self.shape()
        );
        assert!(
            num_classes >= -1,
            "one_hot: num_classes must be -1 (infer) or non-negative, got {num_classes}"
        );
        let n = if num_classes == -1 {
            self.max(Axis::All).to_f64_vec()[0] as usize + 1
        } else {
            num_classes as usize
        };
        self.unsqueeze(-1)
            .one_hot_along_dim(n, -1, "one_hot")
            .where_(1, 0)
    }
}
