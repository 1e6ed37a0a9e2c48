//! Losses: binary and categorical cross-entropies, `nll_loss`, and the shared reduction.

use tinygrad_dtype::DType;

use super::Reduction;
use crate::Tensor;
use crate::reduce::Axis;

impl Tensor {
    fn do_reduction(&self, reduction: Reduction) -> Tensor {
        match reduction {
            Reduction::None => self.clone(),
            Reduction::Sum => self.sum(Axis::All),
            Reduction::Mean => self.mean(Axis::All),
        }
    }

    /// Binary cross-entropy of probabilities `self` against targets `y`:
    /// `-(y log p + (1 - y) log(1 - p))`.
    ///
    /// ```
    /// use tinygrad_tensor::{Reduction, Tensor};
    /// let t = Tensor::from_slice(&[0.1f32, 0.9, 0.2], &[3]);
    /// let y = Tensor::from_slice(&[0i32, 1, 0], &[3]);
    /// let loss = t.binary_crossentropy(&y, Reduction::Mean).item::<f32>();
    /// assert!((loss - 0.1446215).abs() < 1e-6, "{loss}");
    /// ```
    pub fn binary_crossentropy(&self, y: &Tensor, reduction: Reduction) -> Tensor {
        let l = y.neg() * self.log() - y.rsub(1) * self.rsub(1).log();
        l.do_reduction(reduction)
    }

    /// Binary cross-entropy of logits `self` against targets `y` (stable, through
    /// [`Tensor::logsigmoid`]); `pos_weight` scales the positive term.
    ///
    /// ```
    /// use tinygrad_tensor::{Reduction, Tensor};
    /// let t = Tensor::from_slice(&[-1.0f32, 2.0, -3.0], &[3]);
    /// let y = Tensor::from_slice(&[0i32, 1, 0], &[3]);
    /// let loss = t.binary_crossentropy_logits(&y, Reduction::Mean, None).item::<f32>();
    /// assert!((loss - 0.1629257).abs() < 1e-6, "{loss}");
    /// ```
    pub fn binary_crossentropy_logits(
        &self,
        y: &Tensor,
        reduction: Reduction,
        pos_weight: Option<&Tensor>,
    ) -> Tensor {
        let (log_p, log_1mp) = (self.logsigmoid(), self.neg().logsigmoid());
        let pos = match pos_weight {
            Some(w) => w * y * &log_p,
            None => y * &log_p,
        };
        (pos + y.rsub(1) * log_1mp).neg().do_reduction(reduction)
    }

    /// Cross-entropy of logits `self` `(..., classes)` against integer labels `y` `(...)`, via
    /// one-hot masks (tinygrad's implementation; the class axis is the last). Labels equal to
    /// `ignore_index` don't count (`-1` is tinygrad's "none": such labels then match no class but
    /// still count in the mean). `label_smoothing` mixes in the uniform distribution.
    ///
    /// ```
    /// use tinygrad_tensor::{Reduction, Tensor};
    /// let t = Tensor::from_slice(&[-1.0f32, 2.0, -3.0, 1.0, -2.0, 3.0], &[2, 3]);
    /// let y = Tensor::from_slice(&[1i32, 2], &[2]);
    /// let loss = t.sparse_categorical_crossentropy(&y, -1, 0.0, Reduction::Mean).item::<f32>();
    /// assert!((loss - 0.0939152).abs() < 1e-6, "{loss}");
    /// ```
    ///
    /// # Panics
    /// If `label_smoothing` is not in `[0, 1]` or `y`'s shape isn't `self`'s without the last
    /// axis.
    pub fn sparse_categorical_crossentropy(
        &self,
        y: &Tensor,
        ignore_index: i64,
        label_smoothing: f64,
        reduction: Reduction,
    ) -> Tensor {
        assert!(
            (0.0..=1.0).contains(&label_smoothing),
            "sparse_categorical_crossentropy: label_smoothing must be in [0.0, 1.0], got \
             {label_smoothing}"
        );
        let xs = self.shape();
        assert!(
            !xs.is_empty() && y.shape() == xs[..xs.len() - 1],
            "sparse_categorical_crossentropy: labels shape {:?} must be the logits shape {xs:?} \
             without the class axis (the last)",
            y.shape()
        );
        let classes = xs[xs.len() - 1];
        // labels on another device are moved to the logits' (as gather/scatter/getitem move
        // their indices; tinygrad raises)
        let y = &y.to(self.device());
        let log_probs = self.log_softmax(-1);
        let loss_mask = if ignore_index != -1 {
            y.ne(ignore_index)
        } else {
            y.const_like(true, DType::BOOL)
        };
        let onehot = y
            .unsqueeze(-1)
            .one_hot_along_dim(classes, -1, "sparse_categorical_crossentropy")
            .logical_and(&loss_mask.unsqueeze(-1));
        let smoothing = log_probs.mean(-1isize) * &loss_mask * label_smoothing;
        let unreduced = (&log_probs * &onehot).sum(-1isize) * (1.0 - label_smoothing) + smoothing;
        if reduction == Reduction::Mean {
            unreduced.sum(Axis::All).neg() / loss_mask.sum(Axis::All)
        } else {
            unreduced.do_reduction(reduction).neg()
        }
    }

    /// Cross-entropy of logits `self` `(classes)` or `(batch, classes, ...)` against `y`: integer
    /// labels (the shape without the class axis 1) or class probabilities (the same shape).
    ///
    /// ```
    /// use tinygrad_tensor::{Reduction, Tensor};
    /// let t = Tensor::from_slice(&[-1.0f32, 2.0, -3.0, 1.0, -2.0, 3.0], &[2, 3]);
    /// let y = Tensor::from_slice(&[1i32, 2], &[2]);
    /// let loss = t.cross_entropy(&y, Reduction::Mean, 0.0).item::<f32>();
    /// assert!((loss - 0.0939152).abs() < 1e-6, "{loss}");
    /// let v = t.cross_entropy(&y, Reduction::None, 0.0).to_vec::<f32>();
    /// for (a, b) in v.iter().zip([0.0549852f32, 0.1328452]) {
    ///     assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    /// }
    /// ```
    ///
    /// # Panics
    /// If `label_smoothing` is not in `[0, 1]` or the shapes don't fit.
    pub fn cross_entropy(&self, y: &Tensor, reduction: Reduction, label_smoothing: f64) -> Tensor {
        assert!(
            (0.0..=1.0).contains(&label_smoothing),
            "cross_entropy: label_smoothing must be in [0.0, 1.0], got {label_smoothing}"
        );
        let xs = self.shape();
        assert!(
            !xs.is_empty(),
            "cross_entropy: logits must have at least 1 dim"
        );
        let cd: isize = if xs.len() == 1 { 0 } else { 1 };
        let classes = xs[cd as usize];
        let mut y = y.clone();
        if xs != y.shape() {
            let mut without = xs.clone();
            without.remove(cd as usize);
            assert_eq!(
                y.shape(),
                without,
                "cross_entropy: shape mismatch: logits shape {xs:?}, target shape {:?} (expected \
                 {xs:?} or {without:?})",
                y.shape()
            );
            y = y
                .unsqueeze(cd)
                .one_hot_along_dim(classes, cd, "cross_entropy");
        }
        let y = y * (1.0 - label_smoothing) + label_smoothing / classes as f64;
        (self.log_softmax(cd) * y)
            .sum(cd)
            .neg()
            .do_reduction(reduction)
    }

    /// Negative log-likelihood of log-probabilities `self` `(batch, classes, ...)` against integer
    /// labels `y` `(batch, ...)`, with optional per-class `weight` and `ignore_index`; the mean is
    /// weighted (divided by the sum of the weights used).
    ///
    /// ```
    /// use tinygrad_tensor::{Reduction, Tensor};
    /// let t = Tensor::from_slice(&[-1.0f32, 2.0, -3.0, 1.0, -2.0, 3.0], &[2, 3]);
    /// let (logp, y) = (t.log_softmax(-1), Tensor::from_slice(&[1i32, 2], &[2]));
    /// let loss = logp.nll_loss(&y, None, None, Reduction::Mean).item::<f32>();
    /// assert!((loss - 0.0939152).abs() < 1e-6, "{loss}");
    /// let v = logp.nll_loss(&y, None, None, Reduction::None).to_vec::<f32>();
    /// for (a, b) in v.iter().zip([0.0549852f32, 0.1328452]) {
    ///     assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    /// }
    /// ```
    ///
    /// # Panics
    /// If the shapes don't fit.
    pub fn nll_loss(
        &self,
        y: &Tensor,
        weight: Option<&Tensor>,
        ignore_index: Option<i64>,
        reduction: Reduction,
    ) -> Tensor {
        let xs = self.shape();
        assert!(
            xs.len() >= 2,
            "nll_loss: log-probabilities shape {xs:?} needs (batch, classes, ...)"
        );
        let classes = xs[1];
        let mut without = xs.clone();
        without.remove(1);
        assert_eq!(
            y.shape(),
            without,
            "nll_loss: target shape {:?} must be the input shape {xs:?} without axis 1",
            y.shape()
        );
        let w = match weight {
            None => Tensor::ones_like(y),
            Some(w) => {
                assert_eq!(
                    w.shape(),
                    vec![classes],
                    "nll_loss: weight shape {:?}, expected [{classes}]",
                    w.shape()
                );
                // weight[y]
                y.unsqueeze(-1)
                    .one_hot_along_dim(classes, -1, "nll_loss")
                    .where_(w, 0)
                    .sum(-1isize)
            }
        };
        let masked = match ignore_index {
            None => w,
            Some(ii) => w * y.ne(ii),
        };
        // gather(1, y.unsqueeze(1)).squeeze(1)
        let picked = y
            .unsqueeze(1)
            .one_hot_along_dim(classes, 1, "nll_loss")
            .where_(self, 0)
            .sum(1isize);
        let nll = picked.neg() * &masked;
        if reduction == Reduction::Mean {
            nll.sum(Axis::All) / masked.sum(Axis::All)
        } else {
            nll.do_reduction(reduction)
        }
    }
}
