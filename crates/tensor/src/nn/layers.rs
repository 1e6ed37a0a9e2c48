//! Layers, as tinygrad's `tinygrad.nn`, with its default initializations: Kaiming-uniform
//! weights (`a = sqrt(5)`, PyTorch's choice) and uniform biases in `±1/sqrt(fan_in)` for
//! [`Linear`] and the convolutions, ones/zeros for normalization scales/shifts, Glorot-uniform
//! embeddings, `±1/sqrt(hidden)` for [`LSTMCell`]. Random initial values come from
//! [`Tensor::rand`]: call [`Tensor::manual_seed`] first for reproducible weights.
//!
//! Each layer implements [`Module`] (except [`LSTMCell`], whose step takes a state) and
//! [`Parameters`](super::Parameters), with PyTorch's/tinygrad's state names (`weight`, `bias`,
//! `running_mean`, ...). Fields are public: the tensors are shared handles, so
//! `layer.weight.assign(..)` changes the layer.

use std::collections::BTreeMap;

use tinygrad_dtype::{DType, default_float};

use super::{Module, StateDictError, buffer};
use crate::nn_ops::{Dims, Padding};
use crate::{Tensor, impl_parameters};

/// tinygrad's `a` for Kaiming-uniform layer weights.
const KAIMING_A: f64 = 2.236_067_977_499_79; // sqrt(5)

fn isize_shape(s: &[usize]) -> Vec<isize> {
    s.iter().map(|&d| d as isize).collect()
}

/// `[1, -1, 1, ...]`: a per-channel vector laid along axis 1 of an `ndim`-dim tensor.
fn channel_shape(ndim: usize) -> Vec<isize> {
    let mut s = vec![1; ndim.max(2)];
    s[1] = -1;
    s
}

// ---------------------------------------------------------------------------------------------

/// `y = x W^T + b` (PyTorch's `nn.Linear`): `weight` is `(out, in)`.
pub struct Linear {
    /// `(out_features, in_features)`, Kaiming-uniform.
    pub weight: Tensor,
    /// `(out_features,)`, uniform in `±1/sqrt(in_features)`.
    pub bias: Option<Tensor>,
}

impl_parameters!(Linear { weight, bias });

impl Linear {
    /// A linear layer with a bias.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{Linear, Module};
    /// use tinygrad_tensor::{DType, Tensor};
    /// let l = Linear::new(3, 2);
    /// assert_eq!(l.weight.shape(), vec![2, 3]);
    /// assert_eq!(l.bias.as_ref().unwrap().shape(), vec![2]);
    /// assert_eq!(l.forward(&Tensor::ones(&[4, 3], DType::FLOAT32)).shape(), vec![4, 2]);
    /// ```
    pub fn new(in_features: usize, out_features: usize) -> Linear {
        Linear::new_with(in_features, out_features, true)
    }

    /// A linear layer, with or without a bias.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{Linear, Module};
    /// use tinygrad_tensor::Tensor;
    /// let l = Linear::new_with(2, 1, false);
    /// assert!(l.bias.is_none());
    /// l.weight.assign(&Tensor::from_slice(&[2.0f32, -1.0], &[1, 2]));
    /// let y = l.forward(&Tensor::from_slice(&[3.0f32, 1.0, 0.5, 4.0], &[2, 2]));
    /// assert_eq!(y.to_vec::<f32>(), vec![5.0, -3.0]);
    /// ```
    pub fn new_with(in_features: usize, out_features: usize, bias: bool) -> Linear {
        let weight = Tensor::kaiming_uniform(&[out_features, in_features], KAIMING_A);
        let bound = 1.0 / (in_features.max(1) as f64).sqrt();
        let bias = bias.then(|| Tensor::uniform(&[out_features], -bound, bound));
        Linear { weight, bias }
    }
}

/// `state_dict[{prefix}.{name}]` (`prefix` may be empty or end with a dot), `None` when absent.
fn sd_entry(sd: &BTreeMap<String, Tensor>, prefix: &str, name: &str) -> (String, Option<Tensor>) {
    let p = prefix.trim_end_matches('.');
    let key = if p.is_empty() {
        name.to_string()
    } else {
        format!("{p}.{name}")
    };
    let t = sd.get(&key).cloned();
    (key, t)
}

/// `state_dict[{prefix}.{name}]`, an error naming the key when absent.
fn sd_required(
    sd: &BTreeMap<String, Tensor>,
    prefix: &str,
    name: &str,
) -> Result<(String, Tensor), StateDictError> {
    match sd_entry(sd, prefix, name) {
        (key, Some(t)) => Ok((key, t)),
        (key, None) => Err(StateDictError::Mismatch {
            missing: vec![key],
            unexpected: Vec::new(),
            wrong: Vec::new(),
        }),
    }
}

/// Checks that the entry `key` has `shape`.
fn sd_check_shape(key: &str, t: &Tensor, shape: &[usize]) -> Result<(), StateDictError> {
    if t.shape() == shape {
        Ok(())
    } else {
        Err(StateDictError::Invalid {
            key: key.to_string(),
            message: format!("expected shape {shape:?}, got {:?}", t.shape()),
        })
    }
}

impl Linear {
    /// A linear layer from a state dict's `{prefix}.weight` (`(out, in)`) and, when present,
    /// `{prefix}.bias` (`(out,)`), sharing the tensors (a PyTorch checkpoint's layout).
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use tinygrad_tensor::nn::{Linear, Module};
    /// use tinygrad_tensor::Tensor;
    /// let sd = BTreeMap::from([
    ///     ("enc.q.weight".to_string(), Tensor::from_slice(&[1.0f32, 2.0], &[1, 2])),
    ///     ("enc.q.bias".to_string(), Tensor::from_slice(&[0.5f32], &[1])),
    /// ]);
    /// let q = Linear::from_state_dict(&sd, "enc.q").unwrap();
    /// assert_eq!(q.forward(&Tensor::from_slice(&[3.0f32, 4.0], &[1, 2])).to_vec::<f32>(), vec![11.5]);
    /// let e = Linear::from_state_dict(&sd, "enc.k").err().unwrap();
    /// assert!(e.to_string().contains("missing keys: [\"enc.k.weight\"]"), "{e}");
    /// ```
    ///
    /// # Errors
    /// If the weight is missing or not 2-D, or the bias is not `(out,)`.
    pub fn from_state_dict(
        sd: &BTreeMap<String, Tensor>,
        prefix: &str,
    ) -> Result<Linear, StateDictError> {
        let (key, weight) = sd_required(sd, prefix, "weight")?;
        if weight.ndim() != 2 {
            return Err(StateDictError::Invalid {
                key,
                message: format!(
                    "expected a 2-D (out, in) weight, got shape {:?}",
                    weight.shape()
                ),
            });
        }
        let out = weight.shape()[0];
        let bias = match sd_entry(sd, prefix, "bias") {
            (key, Some(b)) => {
                sd_check_shape(&key, &b, &[out])?;
                Some(b)
            }
            (_, None) => None,
        };
        Ok(Linear { weight, bias })
    }
}

impl Module for Linear {
    /// # Panics
    /// If the last dimension of `x` is not `in_features`.
    fn forward(&self, x: &Tensor) -> Tensor {
        let ws = self.weight.shape();
        let xs = x.shape();
        assert!(
            xs.last() == Some(&ws[1]),
            "Linear: input shape {xs:?} must end in in_features={} (weight shape {ws:?})",
            ws[1]
        );
        x.linear(&self.weight.t(), self.bias.as_ref())
    }
}

// ---------------------------------------------------------------------------------------------

/// Options of [`Conv2d`] and [`ConvTranspose2d`] beyond the channels and kernel size, with
/// PyTorch's defaults: stride 1, padding 0, dilation 1, groups 1, a bias, output padding 0.
///
/// `ConvOptions { padding: 2.into(), ..Default::default() }`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvOptions {
    /// Stride, one value or one per spatial dim.
    pub stride: Dims,
    /// Padding, any of tinygrad's forms ([`Padding`]).
    pub padding: Padding,
    /// Dilation, one value or one per spatial dim.
    pub dilation: Dims,
    /// Number of channel groups (divides both channel counts).
    pub groups: usize,
    /// Whether the layer has a bias.
    pub bias: bool,
    /// Extra size added to one side of the output ([`ConvTranspose2d`] only).
    pub output_padding: Dims,
}

impl Default for ConvOptions {
    fn default() -> Self {
        ConvOptions {
            stride: Dims::All(1),
            padding: Padding::All(0),
            dilation: Dims::All(1),
            groups: 1,
            bias: true,
            output_padding: Dims::All(0),
        }
    }
}

fn kernel_dims(kernel_size: Dims, op: &str) -> Vec<usize> {
    let k = match kernel_size {
        Dims::Default => panic!("{op}: a kernel size is required"),
        Dims::All(k) => vec![k; 2],
        Dims::Each(k) => k,
    };
    assert!(
        !k.is_empty() && k.iter().all(|&v| v > 0),
        "{op}: kernel_size {k:?} must be non-empty and positive"
    );
    k
}

fn check_groups(op: &str, cin: usize, cout: usize, groups: usize) {
    assert!(
        groups >= 1 && cin.is_multiple_of(groups) && cout.is_multiple_of(groups),
        "{op}: groups={groups} must divide in_channels={cin} and out_channels={cout}"
    );
}

/// Convolution over the spatial dims of `(batch, channels, *spatial)` (PyTorch's `nn.Conv2d`;
/// any number of spatial dims, from the kernel size).
pub struct Conv2d {
    /// `(out_channels, in_channels / groups, *kernel_size)`, Kaiming-uniform.
    pub weight: Tensor,
    /// `(out_channels,)`, uniform in `±1/sqrt(fan_in)`.
    pub bias: Option<Tensor>,
    /// The options the layer was built with.
    pub options: ConvOptions,
}

impl_parameters!(Conv2d { weight, bias });

impl Conv2d {
    /// A 2-D convolution with default options; `kernel_size` is one value (square) or one per
    /// spatial dim.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{Conv2d, Module};
    /// use tinygrad_tensor::{DType, Tensor};
    /// let conv = Conv2d::new(1, 4, 3);
    /// assert_eq!(conv.weight.shape(), vec![4, 1, 3, 3]);
    /// let y = conv.forward(&Tensor::ones(&[2, 1, 5, 5], DType::FLOAT32));
    /// assert_eq!(y.shape(), vec![2, 4, 3, 3]);
    /// ```
    pub fn new(in_channels: usize, out_channels: usize, kernel_size: impl Into<Dims>) -> Conv2d {
        Conv2d::new_with(
            in_channels,
            out_channels,
            kernel_size,
            ConvOptions::default(),
        )
    }

    /// A convolution with `options`. An integer `kernel_size` means a square 2-D kernel; an
    /// array gives one spatial dim per value (`[3]` is 1-D, `[3, 3, 3]` is 3-D).
    ///
    /// ```
    /// use tinygrad_tensor::nn::{Conv2d, ConvOptions, Module};
    /// use tinygrad_tensor::{DType, Tensor};
    /// let opts = ConvOptions { stride: 2.into(), padding: 1.into(), ..Default::default() };
    /// let conv = Conv2d::new_with(2, 3, 3, ConvOptions { bias: false, ..opts });
    /// assert!(conv.bias.is_none());
    /// let y = conv.forward(&Tensor::ones(&[1, 2, 8, 8], DType::FLOAT32));
    /// assert_eq!(y.shape(), vec![1, 3, 4, 4]); // (8 + 2 - 3) / 2 + 1 = 4
    /// ```
    ///
    /// # Panics
    /// If `groups` does not divide both channel counts, or the kernel size is empty or zero.
    pub fn new_with(
        in_channels: usize,
        out_channels: usize,
        kernel_size: impl Into<Dims>,
        options: ConvOptions,
    ) -> Conv2d {
        let k = kernel_dims(kernel_size.into(), "Conv2d");
        Conv2d::with_kernel(in_channels, out_channels, &k, options)
    }

    /// A 1-D convolution (tinygrad's `Conv1d`): input `(batch, channels, length)`.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{Conv2d, ConvOptions, Module};
    /// use tinygrad_tensor::{DType, Tensor};
    /// let conv = Conv2d::new_1d(2, 4, 3, ConvOptions::default());
    /// assert_eq!(conv.weight.shape(), vec![4, 2, 3]);
    /// let y = conv.forward(&Tensor::ones(&[1, 2, 10], DType::FLOAT32));
    /// assert_eq!(y.shape(), vec![1, 4, 8]);
    /// ```
    pub fn new_1d(
        in_channels: usize,
        out_channels: usize,
        kernel_size: usize,
        options: ConvOptions,
    ) -> Conv2d {
        Conv2d::with_kernel(in_channels, out_channels, &[kernel_size], options)
    }

    fn with_kernel(cin: usize, cout: usize, k: &[usize], options: ConvOptions) -> Conv2d {
        check_groups("Conv2d", cin, cout, options.groups);
        let mut shape = vec![cout, cin / options.groups];
        shape.extend(k);
        let weight = Tensor::kaiming_uniform(&shape, KAIMING_A);
        let fan_in: usize = shape[1..].iter().product();
        let bound = 1.0 / (fan_in.max(1) as f64).sqrt();
        let bias = options
            .bias
            .then(|| Tensor::uniform(&[cout], -bound, bound));
        Conv2d {
            weight,
            bias,
            options,
        }
    }
}

impl Module for Conv2d {
    fn forward(&self, x: &Tensor) -> Tensor {
        let o = &self.options;
        x.conv2d(
            &self.weight,
            self.bias.as_ref(),
            o.groups,
            o.stride.clone(),
            o.dilation.clone(),
            o.padding.clone(),
        )
    }
}

/// Transposed convolution (PyTorch's `nn.ConvTranspose2d`; any number of spatial dims).
pub struct ConvTranspose2d {
    /// `(in_channels, out_channels / groups, *kernel_size)`, Kaiming-uniform.
    pub weight: Tensor,
    /// `(out_channels,)`, uniform in `±1/sqrt(prod(weight.shape[1..]))`.
    pub bias: Option<Tensor>,
    /// The options the layer was built with.
    pub options: ConvOptions,
}

impl_parameters!(ConvTranspose2d { weight, bias });

impl ConvTranspose2d {
    /// A 2-D transposed convolution with default options.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{ConvTranspose2d, Module};
    /// use tinygrad_tensor::{DType, Tensor};
    /// let conv = ConvTranspose2d::new(4, 2, 3);
    /// assert_eq!(conv.weight.shape(), vec![4, 2, 3, 3]);
    /// let y = conv.forward(&Tensor::ones(&[1, 4, 5, 5], DType::FLOAT32));
    /// assert_eq!(y.shape(), vec![1, 2, 7, 7]);
    /// ```
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel_size: impl Into<Dims>,
    ) -> ConvTranspose2d {
        ConvTranspose2d::new_with(
            in_channels,
            out_channels,
            kernel_size,
            ConvOptions::default(),
        )
    }

    /// A transposed convolution with `options` (kernel size as in [`Conv2d::new_with`]).
    ///
    /// ```
    /// use tinygrad_tensor::nn::{ConvOptions, ConvTranspose2d, Module};
    /// use tinygrad_tensor::{DType, Tensor};
    /// let opts = ConvOptions { stride: 2.into(), padding: 1.into(), ..Default::default() };
    /// let opts = ConvOptions { output_padding: 1.into(), ..opts };
    /// let conv = ConvTranspose2d::new_with(4, 2, 3, opts);
    /// let y = conv.forward(&Tensor::ones(&[1, 4, 5, 5], DType::FLOAT32));
    /// assert_eq!(y.shape(), vec![1, 2, 10, 10]); // (5 - 1) * 2 - 2 + 3 + 1 = 10
    /// ```
    ///
    /// # Panics
    /// If `groups` does not divide both channel counts, or the kernel size is empty or zero.
    pub fn new_with(
        in_channels: usize,
        out_channels: usize,
        kernel_size: impl Into<Dims>,
        options: ConvOptions,
    ) -> ConvTranspose2d {
        let k = kernel_dims(kernel_size.into(), "ConvTranspose2d");
        check_groups("ConvTranspose2d", in_channels, out_channels, options.groups);
        let mut shape = vec![in_channels, out_channels / options.groups];
        shape.extend(&k);
        let weight = Tensor::kaiming_uniform(&shape, KAIMING_A);
        let fan: usize = shape[1..].iter().product();
        let bound = 1.0 / (fan.max(1) as f64).sqrt();
        let bias = options
            .bias
            .then(|| Tensor::uniform(&[out_channels], -bound, bound));
        ConvTranspose2d {
            weight,
            bias,
            options,
        }
    }
}

impl Module for ConvTranspose2d {
    fn forward(&self, x: &Tensor) -> Tensor {
        let o = &self.options;
        x.conv_transpose2d(
            &self.weight,
            self.bias.as_ref(),
            o.groups,
            o.stride.clone(),
            o.dilation.clone(),
            o.padding.clone(),
            o.output_padding.clone(),
        )
    }
}

// ---------------------------------------------------------------------------------------------

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

/// A lookup table of `vocab_size` vectors of `embed_size` (PyTorch's `nn.Embedding`), written
/// as tinygrad does: a one-hot comparison with `arange(vocab_size)` selecting rows of the table,
/// summed — no gather op, and gradients flow to the table through the same ops. The scheduler
/// collapses the forward's sum into a load of the selected row (O(tokens x embed_size)); an
/// index outside the table selects nothing (a row of zeros), as in tinygrad.
pub struct Embedding {
    /// `(vocab_size, embed_size)`, Glorot-uniform.
    pub weight: Tensor,
}

impl_parameters!(Embedding { weight });

impl Embedding {
    /// An embedding table.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{Embedding, Module};
    /// use tinygrad_tensor::Tensor;
    /// let emb = Embedding::new(10, 4);
    /// let table = emb.weight.realize().to_vec::<f32>(); // row i: table[4 * i..4 * i + 4]
    /// let y = emb.forward(&Tensor::from_slice(&[7i32, 2, 7], &[1, 3]));
    /// assert_eq!(y.shape(), vec![1, 3, 4]);
    /// let y = y.to_vec::<f32>();
    /// assert!(y[..4] == table[28..32] && y[4..8] == table[8..12] && y[8..] == table[28..32]);
    /// ```
    pub fn new(vocab_size: usize, embed_size: usize) -> Embedding {
        Embedding {
            weight: Tensor::glorot_uniform(&[vocab_size, embed_size]),
        }
    }
}

impl Embedding {
    /// An embedding from a state dict's 2-D `{prefix}.weight` (`(vocab, embed)`).
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use tinygrad_tensor::nn::{Embedding, Module};
    /// use tinygrad_tensor::Tensor;
    /// let table = Tensor::from_slice(&[0.0f32, 1.0, 10.0, 11.0, 20.0, 21.0], &[3, 2]);
    /// let sd = BTreeMap::from([("wte.weight".to_string(), table)]);
    /// let emb = Embedding::from_state_dict(&sd, "wte").unwrap();
    /// let y = emb.forward(&Tensor::from_slice(&[2i32, 0], &[2])).to_vec::<f32>();
    /// assert_eq!(y, vec![20.0, 21.0, 0.0, 1.0]);
    /// ```
    ///
    /// # Errors
    /// If the weight is missing or not 2-D.
    pub fn from_state_dict(
        sd: &BTreeMap<String, Tensor>,
        prefix: &str,
    ) -> Result<Embedding, StateDictError> {
        let (key, weight) = sd_required(sd, prefix, "weight")?;
        if weight.ndim() != 2 {
            return Err(StateDictError::Invalid {
                key,
                message: format!(
                    "expected a 2-D (vocab, embed) weight, got shape {:?}",
                    weight.shape()
                ),
            });
        }
        Ok(Embedding { weight })
    }
}

impl Module for Embedding {
    /// `idx` (integers, any shape) -> `idx.shape + [embed_size]`.
    ///
    /// # Panics
    /// If `idx` is not an integer tensor.
    fn forward(&self, idx: &Tensor) -> Tensor {
        assert!(
            idx.dtype().is_int(),
            "Embedding: indices must be integers, got {} (shape {:?})",
            idx.dtype(),
            idx.shape()
        );
        let vocab = self.weight.shape()[0];
        let mut s = isize_shape(&idx.shape());
        s.extend([1, 1]);
        let arange = Tensor::arange_on(0.0, vocab as f64, 1.0, DType::INT32, idx.device())
            .reshape(&[vocab as isize, 1]);
        let hit = idx.cast(DType::INT32).reshape(&s).eq(&arange);
        // -0.0 where not selected: the sum is then exactly the selected row (signs of zero
        // included), and the scheduler collapses it into a load of that row
        hit.where_(&self.weight, -0.0).sum(-2isize)
    }
}

/// One step of a long short-term memory cell (PyTorch's `nn.LSTMCell`): gates `i, f, g, o`
/// from `x W_ih^T + b_ih + h W_hh^T + b_hh`, then `c' = f c + i g`, `h' = o tanh(c')`.
pub struct LSTMCell {
    /// `(4 * hidden, input)`, uniform in `±1/sqrt(hidden)`.
    pub weight_ih: Tensor,
    /// `(4 * hidden, hidden)`, uniform in `±1/sqrt(hidden)`.
    pub weight_hh: Tensor,
    /// `(4 * hidden,)`, zeros (`None` without bias).
    pub bias_ih: Option<Tensor>,
    /// `(4 * hidden,)`, zeros (`None` without bias).
    pub bias_hh: Option<Tensor>,
}

impl_parameters!(LSTMCell {
    weight_ih,
    weight_hh,
    bias_ih,
    bias_hh
});

impl LSTMCell {
    /// An LSTM cell with biases.
    ///
    /// ```
    /// use tinygrad_tensor::nn::LSTMCell;
    /// use tinygrad_tensor::{DType, Tensor};
    /// let cell = LSTMCell::new(3, 4);
    /// assert_eq!((cell.weight_ih.shape(), cell.weight_hh.shape()), (vec![16, 3], vec![16, 4]));
    /// assert_eq!(cell.bias_ih.as_ref().unwrap().to_vec::<f32>(), vec![0.0; 16]);
    /// let (h, c) = cell.forward(&Tensor::ones(&[2, 3], DType::FLOAT32), None);
    /// assert_eq!((h.shape(), c.shape()), (vec![2, 4], vec![2, 4]));
    /// assert!(h.to_vec::<f32>().iter().all(|v| v.abs() < 1.0)); // o * tanh(c)
    /// ```
    pub fn new(input_size: usize, hidden_size: usize) -> LSTMCell {
        LSTMCell::new_with(input_size, hidden_size, true)
    }

    /// An LSTM cell, with or without biases.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{LSTMCell, Parameters};
    /// let cell = LSTMCell::new_with(3, 4, false);
    /// assert!(cell.bias_ih.is_none() && cell.bias_hh.is_none());
    /// let names: Vec<String> = cell.named_parameters("").into_iter().map(|(n, _)| n).collect();
    /// assert_eq!(names, ["weight_ih", "weight_hh"]);
    /// let bound = 0.5; // 1 / sqrt(hidden_size)
    /// assert!(cell.weight_hh.to_vec::<f32>().iter().all(|v| (-bound..bound).contains(v)));
    /// ```
    pub fn new_with(input_size: usize, hidden_size: usize, bias: bool) -> LSTMCell {
        let stdv = 1.0 / (hidden_size.max(1) as f64).sqrt();
        let h4 = 4 * hidden_size;
        LSTMCell {
            weight_ih: Tensor::uniform(&[h4, input_size], -stdv, stdv),
            weight_hh: Tensor::uniform(&[h4, hidden_size], -stdv, stdv),
            bias_ih: bias.then(|| Tensor::zeros(&[h4], default_float())),
            bias_hh: bias.then(|| Tensor::zeros(&[h4], default_float())),
        }
    }

    /// One step: `x` `(batch, input)` and the state `(h, c)` (each `(batch, hidden)`; zeros
    /// when `None`) give the new `(h, c)`.
    ///
    /// ```
    /// use tinygrad_tensor::nn::LSTMCell;
    /// use tinygrad_tensor::{DType, Tensor};
    /// let cell = LSTMCell::new(2, 1);
    /// cell.weight_ih.assign(&Tensor::zeros(&[4, 2], DType::FLOAT32)); // every gate input 0:
    /// cell.weight_hh.assign(&Tensor::zeros(&[4, 1], DType::FLOAT32)); // i = f = o = 0.5, g = 0
    /// let (x, c) = (Tensor::ones(&[1, 2], DType::FLOAT32), Tensor::ones(&[1, 1], DType::FLOAT32));
    /// let (h, c) = cell.forward(&x, Some((&c, &c))); // c' = 0.5 * c, h' = 0.5 * tanh(c')
    /// assert!((c.item::<f32>() - 0.5).abs() < 1e-6);
    /// assert!((h.item::<f32>() - 0.23105858).abs() < 1e-6);
    /// ```
    ///
    /// # Panics
    /// If the shapes don't fit the cell.
    pub fn forward(&self, x: &Tensor, hc: Option<(&Tensor, &Tensor)>) -> (Tensor, Tensor) {
        let (xs, ws) = (x.shape(), self.weight_ih.shape());
        let hidden = ws[0] / 4;
        assert!(
            xs.len() == 2 && xs[1] == ws[1],
            "LSTMCell: input shape {xs:?} must be (batch, {})",
            ws[1]
        );
        let zeros;
        let (h, c) = match hc {
            Some(hc) => hc,
            None => {
                zeros = Tensor::zeros_on(&[xs[0], hidden], x.dtype(), x.device());
                (&zeros, &zeros)
            }
        };
        for (name, t) in [("h", h), ("c", c)] {
            assert_eq!(
                t.shape(),
                vec![xs[0], hidden],
                "LSTMCell: state {name} must be (batch, hidden) = {:?}",
                [xs[0], hidden]
            );
        }
        let gates = x.linear(&self.weight_ih.t(), self.bias_ih.as_ref())
            + h.linear(&self.weight_hh.t(), self.bias_hh.as_ref());
        let gate = |k: usize| gates.shrink(&[(0, xs[0]), (k * hidden, (k + 1) * hidden)]);
        let (i, f, g, o) = (
            gate(0).sigmoid(),
            gate(1).sigmoid(),
            gate(2).tanh(),
            gate(3).sigmoid(),
        );
        let new_c = f * c + i * g;
        let new_h = o * new_c.tanh();
        (new_h.contiguous(), new_c.contiguous())
    }
}
