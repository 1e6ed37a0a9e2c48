//! Normalizations: [`BatchNorm`], [`LayerNorm`], [`GroupNorm`], [`InstanceNorm`], [`RMSNorm`].

use std::collections::BTreeMap;

use tinygrad_dtype::{DType, default_float};

use super::{channel_shape, isize_shape, sd_check_shape, sd_entry, sd_required};
use crate::nn::{Module, StateDictError, buffer};
use crate::{Tensor, impl_parameters};

/// Batch normalization over axis 1 of `(batch, channels, ...)` (PyTorch's `BatchNorm1d/2d/3d`).
///
/// In training mode ([`Tensor::train`]) it normalizes with the batch statistics and, with
/// `track_running_stats`, updates `running_mean`/`running_var` (momentum 0.1, the unbiased
/// variance) and `num_batches_tracked` by lazy [`Tensor::assign`]s — realized with the
/// optimizer's step, which takes them as buffers. In evaluation mode it uses the running
/// statistics. Without `track_running_stats` it always uses the batch statistics (PyTorch's
/// behaviour; tinygrad would use the initial running statistics in evaluation).
pub struct BatchNorm {
    /// Scale `(channels,)`, ones (`None` without `affine`).
    pub weight: Option<Tensor>,
    /// Shift `(channels,)`, zeros (`None` without `affine`).
    pub bias: Option<Tensor>,
    /// Running mean `(channels,)`, float32, not trained.
    pub running_mean: Tensor,
    /// Running variance `(channels,)`, float32, not trained.
    pub running_var: Tensor,
    /// Number of training batches seen, int32 `(1,)`, not trained.
    pub num_batches_tracked: Tensor,
    /// Added to the variance (default 1e-5).
    pub eps: f64,
    /// Weight of the new batch in the running statistics (default 0.1).
    pub momentum: f64,
    /// Whether running statistics are kept (default true).
    pub track_running_stats: bool,
}

impl_parameters!(BatchNorm {
    weight,
    bias,
    running_mean,
    running_var,
    num_batches_tracked
});

/// [`BatchNorm`] for `(batch, channels)` or `(batch, channels, length)`.
pub type BatchNorm1d = BatchNorm;
/// [`BatchNorm`] for `(batch, channels, height, width)`.
pub type BatchNorm2d = BatchNorm;

impl BatchNorm {
    /// Batch normalization of `size` channels with the defaults (eps 1e-5, affine, running
    /// statistics, momentum 0.1).
    ///
    /// ```
    /// use tinygrad_tensor::nn::{BatchNorm, Module};
    /// use tinygrad_tensor::Tensor;
    /// let bn = BatchNorm::new(2);
    /// let x = Tensor::from_slice(&[1.0f32, 10.0, 3.0, 20.0], &[2, 2]); // channels [1 3], [10 20]
    /// let _train = Tensor::train(true); // batch statistics, running statistics updated
    /// let y = bn.forward(&x).to_vec::<f32>();
    /// assert!(y.iter().zip([-1.0, -1.0, 1.0, 1.0]).all(|(a, b)| (a - b).abs() < 1e-4));
    /// let (rm, rv) = (bn.running_mean.to_vec::<f32>(), bn.running_var.to_vec::<f32>());
    /// assert!((rm[0] - 0.2).abs() < 1e-6 && (rm[1] - 1.5).abs() < 1e-6); // 0.1 * mean
    /// assert!((rv[0] - 1.1).abs() < 1e-6 && (rv[1] - 5.9).abs() < 1e-6); // 0.9 + 0.1 * var
    /// assert_eq!(bn.num_batches_tracked.to_vec::<i32>(), vec![1]);
    /// ```
    pub fn new(size: usize) -> BatchNorm {
        BatchNorm::new_with(size, 1e-5, true, true, 0.1)
    }

    /// Batch normalization with explicit options.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{BatchNorm, Module};
    /// use tinygrad_tensor::Tensor;
    /// // no affine parameters, no running statistics: batch statistics even in evaluation
    /// let bn = BatchNorm::new_with(1, 0.0, false, false, 0.1);
    /// assert!(bn.weight.is_none() && bn.bias.is_none());
    /// let y = bn.forward(&Tensor::from_slice(&[2.0f32, 4.0, 6.0, 8.0], &[4, 1])).to_vec::<f32>();
    /// let want = [-1.3416408f32, -0.4472136, 0.4472136, 1.3416408]; // (x - 5) / sqrt(5)
    /// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-5));
    /// ```
    pub fn new_with(
        size: usize,
        eps: f64,
        affine: bool,
        track_running_stats: bool,
        momentum: f64,
    ) -> BatchNorm {
        let f32s = |v: i64| Tensor::full_dtype(&[size], v, DType::FLOAT32);
        BatchNorm {
            weight: affine.then(|| f32s(1)),
            bias: affine.then(|| f32s(0)),
            running_mean: buffer(f32s(0)),
            running_var: buffer(f32s(1)),
            num_batches_tracked: buffer(Tensor::zeros(&[1], DType::INT32)),
            eps,
            momentum,
            track_running_stats,
        }
    }
}

impl Module for BatchNorm {
    /// # Panics
    /// If `x` has fewer than 2 dims or its axis 1 is not the number of channels.
    fn forward(&self, x: &Tensor) -> Tensor {
        let xs = x.shape();
        let c = self.running_mean.numel();
        assert!(
            xs.len() >= 2 && xs[1] == c,
            "BatchNorm: input shape {xs:?} must be (batch, {c}, ...) for {c} channels"
        );
        let axes: Vec<isize> = std::iter::once(0).chain(2..xs.len() as isize).collect();
        let cs = channel_shape(xs.len());
        let (mean, invstd) = if Tensor::training() || !self.track_running_stats {
            let batch_mean = x.mean(axes.clone());
            // d(var)/d(mean) = 0: the centered values don't carry the mean's gradient
            let y = x - &batch_mean.detach().reshape(&cs);
            let batch_var = (&y * &y).mean(axes);
            let invstd = (&batch_var + self.eps).rsqrt();
            if Tensor::training() && self.track_running_stats {
                let m = self.momentum;
                let n = y.numel() as f64;
                let rm = &self.running_mean;
                let rv = &self.running_var;
                rm.assign(
                    &(rm * (1.0 - m) + batch_mean.detach().cast(rm.dtype()) * m).cast(rm.dtype()),
                );
                let unbiased = m * n / (n - c as f64).max(1.0);
                rv.assign(
                    &(rv * (1.0 - m) + batch_var.detach().cast(rv.dtype()) * unbiased)
                        .cast(rv.dtype()),
                );
                let nbt = &self.num_batches_tracked;
                nbt.assign(&(nbt + 1));
            }
            (batch_mean, invstd)
        } else {
            let invstd =
                (self.running_var.reshape(&cs).expand(&isize_shape(&xs)) + self.eps).rsqrt();
            (self.running_mean.clone(), invstd)
        };
        x.batchnorm(self.weight.as_ref(), self.bias.as_ref(), &mean, &invstd)
            .cast(default_float())
    }
}

/// Layer normalization over the last dims (PyTorch's `nn.LayerNorm`).
pub struct LayerNorm {
    /// Scale of `normalized_shape`, ones (`None` without `elementwise_affine`).
    pub weight: Option<Tensor>,
    /// Shift of `normalized_shape`, zeros (`None` without `elementwise_affine`).
    pub bias: Option<Tensor>,
    /// The trailing dims normalized over.
    pub normalized_shape: Vec<usize>,
    /// Added to the variance (default 1e-5).
    pub eps: f64,
}

impl_parameters!(LayerNorm { weight, bias });

impl LayerNorm {
    /// Layer normalization over trailing dims `normalized_shape`, eps 1e-5, with affine.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{LayerNorm, Module};
    /// use tinygrad_tensor::Tensor;
    /// let ln = LayerNorm::new(&[3]);
    /// assert_eq!(ln.weight.as_ref().unwrap().to_vec::<f32>(), vec![1.0; 3]);
    /// let y = ln.forward(&Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[1, 3])).to_vec::<f32>();
    /// let want = [-1.2247357f32, 0.0, 1.2247357]; // (x - 2) / sqrt(2/3 + 1e-5)
    /// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-5));
    /// ```
    pub fn new(normalized_shape: &[usize]) -> LayerNorm {
        LayerNorm::new_with(normalized_shape, 1e-5, true)
    }

    /// Layer normalization with explicit options.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{LayerNorm, Module};
    /// use tinygrad_tensor::Tensor;
    /// let ln = LayerNorm::new_with(&[2, 2], 0.0, false); // over the last two dims
    /// assert!(ln.weight.is_none() && ln.bias.is_none());
    /// let x = Tensor::from_slice(&[0.0f32, 0.0, 2.0, 2.0], &[1, 2, 2]); // mean 1, variance 1
    /// let y = ln.forward(&x).to_vec::<f32>();
    /// assert!(y.iter().zip([-1.0, -1.0, 1.0, 1.0]).all(|(a, b)| (a - b).abs() < 1e-6));
    /// ```
    pub fn new_with(normalized_shape: &[usize], eps: f64, elementwise_affine: bool) -> LayerNorm {
        let ones = Tensor::ones(normalized_shape, default_float());
        let zeros = Tensor::zeros(normalized_shape, default_float());
        LayerNorm {
            weight: elementwise_affine.then_some(ones),
            bias: elementwise_affine.then_some(zeros),
            normalized_shape: normalized_shape.to_vec(),
            eps,
        }
    }
}

impl LayerNorm {
    /// A layer norm from a state dict's `{prefix}.weight` and `{prefix}.bias` (or the older
    /// `gamma`/`beta`), normalizing over the weight's shape with `eps`.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use tinygrad_tensor::nn::{LayerNorm, Module};
    /// use tinygrad_tensor::Tensor;
    /// let sd = BTreeMap::from([
    ///     ("LayerNorm.weight".to_string(), Tensor::from_slice(&[2.0f32, 2.0], &[2])),
    ///     ("LayerNorm.bias".to_string(), Tensor::from_slice(&[1.0f32, 1.0], &[2])),
    /// ]);
    /// let ln = LayerNorm::from_state_dict(&sd, "LayerNorm", 0.0).unwrap();
    /// let y = ln.forward(&Tensor::from_slice(&[0.0f32, 2.0], &[1, 2])).to_vec::<f32>();
    /// assert_eq!(y, vec![-1.0, 3.0]); // (x - 1) / 1 * 2 + 1
    /// ```
    ///
    /// # Errors
    /// If an entry is missing or the two shapes differ.
    pub fn from_state_dict(
        sd: &BTreeMap<String, Tensor>,
        prefix: &str,
        eps: f64,
    ) -> Result<LayerNorm, StateDictError> {
        let (w, b) = match sd_entry(sd, prefix, "gamma") {
            (_, Some(_)) => ("gamma", "beta"),
            _ => ("weight", "bias"),
        };
        let (_, weight) = sd_required(sd, prefix, w)?;
        let (bkey, bias) = sd_required(sd, prefix, b)?;
        sd_check_shape(&bkey, &bias, &weight.shape())?;
        Ok(LayerNorm {
            normalized_shape: weight.shape(),
            weight: Some(weight),
            bias: Some(bias),
            eps,
        })
    }
}

impl Module for LayerNorm {
    /// # Panics
    /// If the last dims of `x` are not `normalized_shape`.
    fn forward(&self, x: &Tensor) -> Tensor {
        let (xs, ns) = (x.shape(), &self.normalized_shape);
        assert!(
            xs.len() >= ns.len() && xs[xs.len() - ns.len()..] == ns[..],
            "LayerNorm: last dimensions of input shape {xs:?} must match normalized_shape {ns:?}"
        );
        let axes: Vec<isize> = (0..ns.len() as isize).map(|i| -1 - i).collect();
        let y = x.layernorm(axes, self.eps);
        match (&self.weight, &self.bias) {
            (Some(w), Some(b)) => y * w + b,
            _ => y,
        }
    }
}

fn affine_channels(y: Tensor, weight: &Option<Tensor>, bias: &Option<Tensor>) -> Tensor {
    let (Some(w), Some(b)) = (weight, bias) else {
        return y;
    };
    let cs = channel_shape(y.ndim());
    y * w.reshape(&cs) + b.reshape(&cs)
}

/// Group normalization (PyTorch's `nn.GroupNorm`): the channels of each sample are split into
/// `num_groups` groups, each normalized over its channels and spatial positions.
pub struct GroupNorm {
    /// Per-channel scale, ones (`None` without `affine`).
    pub weight: Option<Tensor>,
    /// Per-channel shift, zeros (`None` without `affine`).
    pub bias: Option<Tensor>,
    /// Number of groups.
    pub num_groups: usize,
    /// Number of channels.
    pub num_channels: usize,
    /// Added to the variance (default 1e-5).
    pub eps: f64,
}

impl_parameters!(GroupNorm { weight, bias });

impl GroupNorm {
    /// Group normalization with eps 1e-5 and affine.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{GroupNorm, Module};
    /// use tinygrad_tensor::Tensor;
    /// let gn = GroupNorm::new(2, 4); // groups: channels {0, 1} and {2, 3}
    /// assert_eq!(gn.weight.as_ref().unwrap().shape(), vec![4]);
    /// let x = Tensor::from_slice(&[1.0f32, 3.0, 10.0, 20.0], &[1, 4, 1]);
    /// let y = gn.forward(&x).to_vec::<f32>();
    /// assert!(y.iter().zip([-1.0, 1.0, -1.0, 1.0]).all(|(a, b)| (a - b).abs() < 1e-4));
    /// ```
    pub fn new(num_groups: usize, num_channels: usize) -> GroupNorm {
        GroupNorm::new_with(num_groups, num_channels, 1e-5, true)
    }

    /// Group normalization with explicit options.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{GroupNorm, Module};
    /// use tinygrad_tensor::Tensor;
    /// let gn = GroupNorm::new_with(1, 2, 0.0, false); // one group: the whole sample
    /// assert!(gn.weight.is_none());
    /// let x = Tensor::from_slice(&[1.0f32, 3.0, 1.0, 3.0], &[1, 2, 2]); // mean 2, variance 1
    /// let y = gn.forward(&x).to_vec::<f32>();
    /// assert!(y.iter().zip([-1.0, 1.0, -1.0, 1.0]).all(|(a, b)| (a - b).abs() < 1e-6));
    /// ```
    ///
    /// # Panics
    /// If `num_groups` does not divide `num_channels`.
    pub fn new_with(num_groups: usize, num_channels: usize, eps: f64, affine: bool) -> GroupNorm {
        assert!(
            num_groups > 0 && num_channels.is_multiple_of(num_groups),
            "GroupNorm: num_groups={num_groups} must divide num_channels={num_channels}"
        );
        GroupNorm {
            weight: affine.then(|| Tensor::ones(&[num_channels], default_float())),
            bias: affine.then(|| Tensor::zeros(&[num_channels], default_float())),
            num_groups,
            num_channels,
            eps,
        }
    }
}

impl Module for GroupNorm {
    /// # Panics
    /// If `x` is not `(batch, num_channels, ...)`.
    fn forward(&self, x: &Tensor) -> Tensor {
        let xs = x.shape();
        assert!(
            xs.len() >= 2 && xs[1] == self.num_channels,
            "GroupNorm: input shape {xs:?} must be (batch, {}, ...)",
            self.num_channels
        );
        let y = x
            .reshape(&[xs[0] as isize, self.num_groups as isize, -1])
            .layernorm(-1isize, self.eps)
            .reshape(&isize_shape(&xs));
        affine_channels(y, &self.weight, &self.bias)
    }
}

/// Instance normalization (PyTorch's `nn.InstanceNorm*d`, here with affine parameters by
/// default, as tinygrad): each channel of each sample normalized over its spatial positions.
pub struct InstanceNorm {
    /// Per-channel scale, ones (`None` without `affine`).
    pub weight: Option<Tensor>,
    /// Per-channel shift, zeros (`None` without `affine`).
    pub bias: Option<Tensor>,
    /// Number of channels.
    pub num_features: usize,
    /// Added to the variance (default 1e-5).
    pub eps: f64,
}

impl_parameters!(InstanceNorm { weight, bias });

impl InstanceNorm {
    /// Instance normalization with eps 1e-5 and affine.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{InstanceNorm, Module};
    /// use tinygrad_tensor::Tensor;
    /// let norm = InstanceNorm::new(2);
    /// assert_eq!(norm.bias.as_ref().unwrap().to_vec::<f32>(), vec![0.0, 0.0]);
    /// let x = Tensor::from_slice(&[1.0f32, 3.0, 10.0, 20.0], &[1, 2, 2]); // per channel
    /// let y = norm.forward(&x).to_vec::<f32>();
    /// assert!(y.iter().zip([-1.0, 1.0, -1.0, 1.0]).all(|(a, b)| (a - b).abs() < 1e-4));
    /// ```
    pub fn new(num_features: usize) -> InstanceNorm {
        InstanceNorm::new_with(num_features, 1e-5, true)
    }

    /// Instance normalization with explicit options.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{InstanceNorm, Module};
    /// use tinygrad_tensor::Tensor;
    /// let norm = InstanceNorm::new_with(2, 0.0, false);
    /// assert!(norm.weight.is_none() && norm.bias.is_none());
    /// let x = Tensor::from_slice(&[0.0f32, 4.0, 5.0, 7.0], &[1, 2, 2]);
    /// let y = norm.forward(&x).to_vec::<f32>(); // channels [0, 4] and [5, 7]
    /// assert!(y.iter().zip([-1.0, 1.0, -1.0, 1.0]).all(|(a, b)| (a - b).abs() < 1e-6));
    /// ```
    pub fn new_with(num_features: usize, eps: f64, affine: bool) -> InstanceNorm {
        InstanceNorm {
            weight: affine.then(|| Tensor::ones(&[num_features], default_float())),
            bias: affine.then(|| Tensor::zeros(&[num_features], default_float())),
            num_features,
            eps,
        }
    }
}

impl Module for InstanceNorm {
    /// # Panics
    /// If `x` is not `(batch, num_features, ...)`.
    fn forward(&self, x: &Tensor) -> Tensor {
        let xs = x.shape();
        assert!(
            xs.len() >= 2 && xs[1] == self.num_features,
            "InstanceNorm: input shape {xs:?} must be (batch, {}, ...)",
            self.num_features
        );
        let y = x
            .reshape(&[xs[0] as isize, xs[1] as isize, -1])
            .layernorm(-1isize, self.eps)
            .reshape(&isize_shape(&xs));
        affine_channels(y, &self.weight, &self.bias)
    }
}

/// Root-mean-square normalization over the last dim, then a per-feature scale:
/// `x / sqrt(mean(x^2) + eps) * weight` (computed in float32, cast back to `x`'s dtype).
pub struct RMSNorm {
    /// Scale `(dim,)`, ones.
    pub weight: Tensor,
    /// Added to the mean square (default 1e-6).
    pub eps: f64,
}

impl_parameters!(RMSNorm { weight });

impl RMSNorm {
    /// RMS normalization of `dim` features, eps 1e-6.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{Module, RMSNorm};
    /// use tinygrad_tensor::Tensor;
    /// let norm = RMSNorm::new(2);
    /// let y = norm.forward(&Tensor::from_slice(&[3.0f32, 4.0], &[1, 2])).to_vec::<f32>();
    /// let want = [0.8485281f32, 1.1313708]; // [3, 4] / sqrt(12.5)
    /// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-5));
    /// ```
    pub fn new(dim: usize) -> RMSNorm {
        RMSNorm::new_with(dim, 1e-6)
    }

    /// RMS normalization with an explicit eps.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{Module, RMSNorm};
    /// use tinygrad_tensor::{DType, Tensor};
    /// let norm = RMSNorm::new_with(4, 1.0);
    /// assert_eq!((norm.eps, norm.weight.shape()), (1.0, vec![4]));
    /// let y = norm.forward(&Tensor::ones(&[1, 4], DType::FLOAT32)).to_vec::<f32>();
    /// assert!(y.iter().all(|v| (v - 0.70710677).abs() < 1e-6)); // 1 / sqrt(1 + eps)
    /// ```
    pub fn new_with(dim: usize, eps: f64) -> RMSNorm {
        RMSNorm {
            weight: Tensor::ones(&[dim], default_float()),
            eps,
        }
    }
}

impl RMSNorm {
    /// An RMS norm from a state dict's 1-D `{prefix}.weight`, with `eps`.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use tinygrad_tensor::nn::{Module, RMSNorm};
    /// use tinygrad_tensor::Tensor;
    /// let sd = BTreeMap::from([("norm.weight".to_string(), Tensor::from_slice(&[2.0f32; 2], &[2]))]);
    /// let norm = RMSNorm::from_state_dict(&sd, "norm", 0.0).unwrap();
    /// let y = norm.forward(&Tensor::from_slice(&[3.0f32, 3.0], &[1, 2])).to_vec::<f32>();
    /// assert_eq!(y, vec![2.0, 2.0]);
    /// ```
    ///
    /// # Errors
    /// If the weight is missing or not 1-D.
    pub fn from_state_dict(
        sd: &BTreeMap<String, Tensor>,
        prefix: &str,
        eps: f64,
    ) -> Result<RMSNorm, StateDictError> {
        let (key, weight) = sd_required(sd, prefix, "weight")?;
        if weight.ndim() != 1 {
            return Err(StateDictError::Invalid {
                key,
                message: format!("expected a 1-D weight, got shape {:?}", weight.shape()),
            });
        }
        Ok(RMSNorm { weight, eps })
    }
}

impl Module for RMSNorm {
    /// # Panics
    /// If the last dim of `x` is not the layer's `dim`.
    fn forward(&self, x: &Tensor) -> Tensor {
        let (xs, d) = (x.shape(), self.weight.numel());
        assert!(
            xs.last() == Some(&d),
            "RMSNorm: input shape {xs:?} must end in dim={d}"
        );
        let xf = x.cast(DType::FLOAT32);
        let ms = (&xf * &xf).mean_keepdim(-1isize);
        (xf * (ms + self.eps).rsqrt()).cast(x.dtype()) * &self.weight
    }
}
