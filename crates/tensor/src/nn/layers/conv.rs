//! Convolutions: [`Conv2d`] and [`ConvTranspose2d`] (any number of spatial dims), with
//! [`ConvOptions`].

use super::KAIMING_A;
use crate::nn::Module;
use crate::nn_ops::{Dims, Padding};
use crate::{Tensor, impl_parameters};

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

/// tinygrad's `padding='same'`: `(left, right, top, bottom, ...)` from the kernel size and
/// dilation (as tinygrad pairs them: the dilations in order with the kernel dims reversed).
fn resolve_same(op: &str, k: &[usize], options: &mut ConvOptions) {
    if options.padding != Padding::Same {
        return;
    }
    let ones = |d: &Dims| match d {
        Dims::Default => true,
        Dims::All(v) => *v == 1,
        Dims::Each(v) => v.iter().all(|&x| x == 1),
    };
    assert!(
        ones(&options.stride),
        "{op}: padding='same' is not supported for strided convolutions (stride {:?})",
        options.stride
    );
    let dilation = match &options.dilation {
        Dims::Default => vec![1; k.len()],
        Dims::All(d) => vec![*d; k.len()],
        Dims::Each(d) => d.clone(),
    };
    assert_eq!(
        dilation.len(),
        k.len(),
        "{op}: padding='same' with dilation {dilation:?} for a kernel of size {k:?} (one \
         dilation per spatial dim, or one for all)"
    );
    let flat = dilation
        .iter()
        .zip(k.iter().rev())
        .flat_map(|(&d, &k)| {
            let total = (d * (k - 1)) as isize;
            [total / 2, total - total / 2]
        })
        .collect();
    options.padding = Padding::Flat(flat);
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
    /// If `groups` does not divide both channel counts, the kernel size is empty or zero, or
    /// the padding is [`Padding::Same`] with a stride other than 1.
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

    fn with_kernel(cin: usize, cout: usize, k: &[usize], mut options: ConvOptions) -> Conv2d {
        check_groups("Conv2d", cin, cout, options.groups);
        resolve_same("Conv2d", k, &mut options);
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
    /// If `groups` does not divide both channel counts, the kernel size is empty or zero, or
    /// the padding is [`Padding::Same`] with a stride other than 1.
    pub fn new_with(
        in_channels: usize,
        out_channels: usize,
        kernel_size: impl Into<Dims>,
        mut options: ConvOptions,
    ) -> ConvTranspose2d {
        let k = kernel_dims(kernel_size.into(), "ConvTranspose2d");
        check_groups("ConvTranspose2d", in_channels, out_channels, options.groups);
        resolve_same("ConvTranspose2d", &k, &mut options);
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
