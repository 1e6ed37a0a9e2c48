//! Neural-network ops, following tinygrad's `tensor.py`: processing (sliding-window pooling,
//! convolutions, average/max pooling), activations and other nn functionals, random numbers and
//! dropout, and losses.
//!
//! Everything here is composed from the primitive [`Tensor`] ops (movement views, elementwise ALU
//! ops, reductions), so every backend runs it without new IR ops. Convolutions and pools work for
//! any number of spatial dimensions (1-D, 2-D, 3-D, ...), like tinygrad's.
//!
//! Random numbers ([`Tensor::rand`]) come from a counter-based generator: Threefry-2x32 with 20
//! rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", the generator tinygrad
//! uses), computed inside the kernel with `uint32` adds, shifts, ors and xors, with tinygrad's
//! per-device key and 64-bit counter of words drawn (the crate's `random` module says how). The
//! call's key and counter travel in a small buffer, so repeated calls reuse the same compiled
//! kernel. Results are identical for every thread count, and reproducible after
//! [`Tensor::manual_seed`].
//!
//! Module map (each file adds its ops to [`Tensor`]):
//! - this file: the argument types ([`Dims`], [`Padding`], [`Reduction`], [`InterpolateMode`])
//!   and helpers shared by the others (`nn_ramp`, `pad_spatial`, `nn_repeat_last`).
//! - `pool`: sliding windows (`pool`), average/max pooling, `max_unpool2d`, `unfold`.
//! - `interpolate`: `interpolate` (linear and nearest resampling).
//! - `conv`: `conv2d` and `conv_transpose2d`, with their gradients and row bands.
//! - `depthwise`: depthwise `conv2d` on the CPU's native kernel, with the IR's gradient.
//! - `pad_native`: a large convolution's padded input through the CPU's native copy.
//! - `activation`: activations and other elementwise functionals (`gelu`, `erf`, `isnan`,
//!   `lerp`, ...).
//! - `norm`: `layernorm`, `batchnorm`, `normalize`.
//! - `random`: `manual_seed`, `rand`, Threefry-2x32, `dropout`.
//! - `one_hot`: `one_hot`.
//! - `attention`: `scaled_dot_product_attention`.
//! - `loss`: the losses (cross-entropies, `nll_loss`).

mod activation;
mod attention;
mod conv;
mod depthwise;
mod interpolate;
mod loss;
mod norm;
mod one_hot;
mod pad_native;
mod pool;
mod random;

use tinygrad_dtype::{ConstValue, DType};

use crate::Tensor;

// ---------------------------------------------------------------------------------------------
// argument types

/// Per-spatial-dimension sizes (kernel size, stride, dilation, output padding), like tinygrad's
/// `int|tuple` arguments: a Rust integer (`2`) gives [`Dims::All`], an array or vector (`[2, 3]`)
/// gives [`Dims::Each`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Dims {
    /// tinygrad's `None`: the default (for a pool's stride, the kernel size).
    #[default]
    Default,
    /// One value for every spatial dimension (tinygrad's `int`). As a pool's kernel size it
    /// means a 2-D `(k, k)` window, like tinygrad's `make_tuple(kernel_size, 2)`.
    All(usize),
    /// One value per spatial dimension (tinygrad's tuple).
    Each(Vec<usize>),
}

/// Padding of the spatial dimensions, in any of tinygrad's forms. Negative values remove
/// elements (as tinygrad's `pad` does).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Padding {
    /// The same padding on both sides of every spatial dimension (tinygrad's `int`).
    All(isize),
    /// tinygrad's sequence form: either one value per spatial dimension, in dimension order
    /// (`(pad_h, pad_w)`, both sides), or two per spatial dimension, *last dimension first*
    /// (`(left, right, top, bottom, ...)`, like `torch.nn.functional.pad`).
    Flat(Vec<isize>),
    /// `(before, after)` for each spatial dimension, in dimension order.
    Pairs(Vec<(isize, isize)>),
    /// tinygrad's `padding='same'` of the convolution layers: the output keeps the input's
    /// spatial size. [`Conv2d`](crate::nn::Conv2d) and
    /// [`ConvTranspose2d`](crate::nn::ConvTranspose2d) resolve it from the kernel size and
    /// dilation (stride 1 only); the functional convolutions don't take it.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{Conv2d, ConvOptions, Module};
    /// use tinygrad_tensor::{DType, Padding, Tensor};
    /// let opts = ConvOptions { padding: Padding::Same, ..Default::default() };
    /// let conv = Conv2d::new_with(1, 2, [4, 3], opts);
    /// assert_eq!(conv.options.padding, Padding::Flat(vec![1, 1, 1, 2])); // (left, right, top, bottom)
    /// let y = conv.forward(&Tensor::ones(&[1, 1, 5, 7], DType::FLOAT32));
    /// assert_eq!(y.shape(), vec![1, 2, 5, 7]);
    /// ```
    Same,
}

/// How a loss reduces its per-element values (tinygrad's `reduction`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reduction {
    /// No reduction: the per-element losses.
    None,
    /// The sum.
    Sum,
    /// The mean (the default).
    #[default]
    Mean,
}

/// How [`Tensor::interpolate`] picks and mixes input values (tinygrad's `mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InterpolateMode {
    /// Linear along each resized axis (bilinear in 2-D, trilinear in 3-D; the default).
    #[default]
    Linear,
    /// The input at `floor(i * in / out)` (PyTorch's `nearest`).
    Nearest,
    /// The input at `floor((i + 0.5) * in / out)` (PyTorch's `nearest-exact`).
    NearestExact,
}

macro_rules! dims_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Dims {
            fn from(v: $t) -> Dims {
                let u = usize::try_from(v).unwrap_or_else(|_| {
                    panic!("negative size {v} given as a kernel size, stride or dilation")
                });
                Dims::All(u)
            }
        }
        impl<const N: usize> From<[$t; N]> for Dims {
            fn from(v: [$t; N]) -> Dims {
                Dims::Each(v.iter().map(|&x| Dims::from(x).one()).collect())
            }
        }
        impl From<&[$t]> for Dims {
            fn from(v: &[$t]) -> Dims {
                Dims::Each(v.iter().map(|&x| Dims::from(x).one()).collect())
            }
        }
        impl From<Vec<$t>> for Dims {
            fn from(v: Vec<$t>) -> Dims {
                Dims::Each(v.iter().map(|&x| Dims::from(x).one()).collect())
            }
        }
        impl From<$t> for Padding {
            #[allow(clippy::cast_possible_wrap, clippy::cast_possible_truncation)]
            fn from(v: $t) -> Padding {
                Padding::All(v as isize)
            }
        }
        impl<const N: usize> From<[$t; N]> for Padding {
            #[allow(clippy::cast_possible_wrap, clippy::cast_possible_truncation)]
            fn from(v: [$t; N]) -> Padding {
                Padding::Flat(v.iter().map(|&x| x as isize).collect())
            }
        }
        impl From<&[$t]> for Padding {
            #[allow(clippy::cast_possible_wrap, clippy::cast_possible_truncation)]
            fn from(v: &[$t]) -> Padding {
                Padding::Flat(v.iter().map(|&x| x as isize).collect())
            }
        }
        impl From<Vec<$t>> for Padding {
            #[allow(clippy::cast_possible_wrap, clippy::cast_possible_truncation)]
            fn from(v: Vec<$t>) -> Padding {
                Padding::Flat(v.iter().map(|&x| x as isize).collect())
            }
        }
        impl From<Vec<($t, $t)>> for Padding {
            #[allow(clippy::cast_possible_wrap, clippy::cast_possible_truncation)]
            fn from(v: Vec<($t, $t)>) -> Padding {
                Padding::Pairs(v.iter().map(|&(a, b)| (a as isize, b as isize)).collect())
            }
        }
        impl<const N: usize> From<[($t, $t); N]> for Padding {
            #[allow(clippy::cast_possible_wrap, clippy::cast_possible_truncation)]
            fn from(v: [($t, $t); N]) -> Padding {
                Padding::Pairs(v.iter().map(|&(a, b)| (a as isize, b as isize)).collect())
            }
        }
    )*};
}
dims_from!(usize, isize, i32, u32, i64);

impl Dims {
    fn one(&self) -> usize {
        match self {
            Dims::All(v) => *v,
            _ => unreachable!("a scalar"),
        }
    }

    /// A kernel size: `All(k)` is the 2-D window `(k, k)`.
    ///
    /// # Panics
    /// On [`Dims::Default`] or a zero or empty kernel.
    fn kernel(&self, op: &str) -> Vec<usize> {
        let k = match self {
            Dims::Default => panic!("{op}: a kernel size is required"),
            Dims::All(v) => vec![*v; 2],
            Dims::Each(v) => v.clone(),
        };
        assert!(
            !k.is_empty() && k.iter().all(|&x| x > 0),
            "{op}: kernel {k:?} must be non-empty and positive"
        );
        k
    }

    /// One value per spatial dimension (`n` of them); `Default` gives `default`.
    ///
    /// # Panics
    /// If the number of values is not `n`, or a value is zero and `nonzero`.
    fn resolve_or(
        &self,
        n: usize,
        default: &[usize],
        op: &str,
        what: &str,
        nonzero: bool,
    ) -> Vec<usize> {
        let v = match self {
            Dims::Default => default.to_vec(),
            Dims::All(x) => vec![*x; n],
            Dims::Each(v) if v.len() == n => v.clone(),
            Dims::Each(v) => panic!(
                "{op}: {what} {v:?} has {} values, expected 1 or {n} (one per spatial dimension)",
                v.len()
            ),
        };
        assert!(
            !nonzero || v.iter().all(|&x| x > 0),
            "{op}: {what} {v:?} must be positive"
        );
        v
    }

    /// [`Dims::resolve_or`] with tinygrad's usual default: 1 (0 for output padding).
    fn resolve(&self, n: usize, op: &str, what: &str, nonzero: bool) -> Vec<usize> {
        self.resolve_or(n, &vec![usize::from(nonzero); n], op, what, nonzero)
    }
}

impl Padding {
    /// `(before, after)` per spatial dimension (`n` of them), in dimension order — tinygrad's
    /// `_flat_to_grouped(_resolve_pool_pads(padding, n))`.
    ///
    /// # Panics
    /// If a sequence has neither `n` nor `2n` values (pairs: not `n`).
    fn resolve(&self, n: usize, op: &str, shape: &[usize]) -> Vec<(isize, isize)> {
        match self {
            Padding::All(p) => vec![(*p, *p); n],
            Padding::Flat(v) if v.len() == n => v.iter().map(|&p| (p, p)).collect(),
            // (left, right, top, bottom, ...): the last dimension first
            Padding::Flat(v) if v.len() == 2 * n => (0..n)
                .map(|j| (v[2 * (n - 1 - j)], v[2 * (n - 1 - j) + 1]))
                .collect(),
            Padding::Pairs(v) if v.len() == n => v.clone(),
            _ => panic!(
                "{op}: padding must be an int or a sequence of length {n} or {}, got {self:?} \
                 for input shape {shape:?} with {n} spatial dims",
                2 * n
            ),
        }
    }
}

impl Tensor {
    // ---- helpers ----

    /// `[0, 1, ..., n-1]` as `dtype` on `device`, without a reduction: the sum of one broadcast
    /// `[0, 2^b]` (a padded constant) per binary digit, over a `(2, 2, ..., 2)` view flattened
    /// and cut to `n`. Fuses into its consumer (no kernel of its own).
    pub(crate) fn nn_ramp(n: usize, dtype: DType, device: &str) -> Tensor {
        if n <= 1 {
            return Tensor::zeros_on(&[n], dtype, device);
        }
        let bits = (usize::BITS - (n - 1).leading_zeros()) as usize;
        let full = vec![2usize; bits];
        let mut acc: Option<Tensor> = None;
        for ax in 0..bits {
            let w = 1u64 << (bits - 1 - ax);
            let digit = Tensor::full_on(&[1], ConstValue::UInt(w), dtype, device).pad(&[(1, 0)], 0);
            let mut s = vec![1usize; bits];
            s[ax] = 2;
            let t = digit.reshape_exact(&s).expand_exact(&full);
            acc = Some(match acc {
                None => t,
                Some(a) => a.add(&t),
            });
        }
        acc.expect("at least one digit")
            .reshape_exact(&[1 << bits])
            .shrink(&[(0, n)])
    }

    /// Pads (positive) or shrinks (negative) the last `pads.len()` axes with `value`.
    fn pad_spatial(&self, pads: &[(isize, isize)], value: impl Into<ConstValue>) -> Tensor {
        let shape = self.shape();
        let off = shape.len() - pads.len();
        let mut bounds: Vec<(usize, usize)> = shape.iter().map(|&d| (0, d)).collect();
        let mut padding = vec![(0usize, 0usize); shape.len()];
        for (j, &(b, a)) in pads.iter().enumerate() {
            let d = shape[off + j] as isize;
            let (s, e) = (0.max(-b), d - 0.max(-a));
            assert!(
                s <= e,
                "pad: negative padding {:?} removes more than axis {} of shape {shape:?}",
                (b, a),
                off + j
            );
            bounds[off + j] = (s as usize, e as usize);
            padding[off + j] = (b.max(0) as usize, a.max(0) as usize);
        }
        self.shrink(&bounds).pad(&padding, value)
    }

    /// `x.repeat(...)` on the last `reps.len()` axes (a view: reshape, expand, reshape).
    fn nn_repeat_last(&self, reps: &[usize]) -> Tensor {
        let shape = self.shape();
        let off = shape.len() - reps.len();
        let mut split = shape[..off].to_vec();
        let mut expanded = shape[..off].to_vec();
        let mut out = shape[..off].to_vec();
        for (j, &r) in reps.iter().enumerate() {
            let s = shape[off + j];
            split.extend([1, s]);
            expanded.extend([r, s]);
            out.push(r * s);
        }
        self.reshape_exact(&split)
            .expand_exact(&expanded)
            .reshape_exact(&out)
    }
}
