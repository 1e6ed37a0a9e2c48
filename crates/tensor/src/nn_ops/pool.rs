//! Sliding windows and pooling: `pool` (tinygrad's `_pool`), average and max pooling,
//! `max_unpool2d`, `unfold`.

use tinygrad_dtype::{DType, least_upper_float};
use tinygrad_uop::custom_gradient;

use super::{Dims, Padding};
use crate::Tensor;

/// A pool's sliding windows (`(..., o_1, ..., o_n, k_1, ..., k_n)`) and its resolved kernel,
/// stride and dilation.
struct PoolWindows {
    view: Tensor,
    kernel: Vec<usize>,
    stride: Vec<usize>,
    dilation: Vec<usize>,
}

/// Python's `ceildiv` for a positive divisor (rounds toward +inf for negative numerators too).
fn ceildiv(a: isize, b: isize) -> isize {
    -((-a).div_euclid(b))
}

impl Tensor {
    /// tinygrad's `_pool`: the sliding windows of the last `kernel.len()` axes (an integer kernel
    /// `k` means `(k, k)`) as a view (no
    /// copies) of shape `(..., o_1, ..., o_n, k_1, ..., k_n)` with `o = ceil((i - d*(k-1)) / s)`.
    /// Built from pad/shrink/reshape/expand/permute; reduce the trailing axes to pool.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 5, 1);
    /// let w = t.pool([3], [1], [1]); // windows of 3, stride 1
    /// assert_eq!((w.shape(), w.to_vec::<i32>()), (vec![3, 3], vec![0, 1, 2, 1, 2, 3, 2, 3, 4]));
    /// let w = t.pool([3], [2], [1]); // stride 2
    /// assert_eq!((w.shape(), w.to_vec::<i32>()), (vec![2, 3], vec![0, 1, 2, 2, 3, 4]));
    /// ```
    ///
    /// # Panics
    /// If the tensor has fewer axes than the kernel, the stride/dilation don't match the kernel,
    /// or a (dilated) window is larger than the input.
    pub fn pool(
        &self,
        kernel: impl Into<Dims>,
        stride: impl Into<Dims>,
        dilation: impl Into<Dims>,
    ) -> Tensor {
        let k = kernel.into().kernel("pool");
        let n = k.len();
        let shape = self.shape();
        assert!(
            shape.len() >= n,
            "pool: can't pool shape {shape:?} with kernel {k:?}"
        );
        let s = stride.into().resolve(n, "pool", "stride", true);
        let d = dilation.into().resolve(n, "pool", "dilation", true);
        self.pool_impl(&k, &s, &d, "pool")
    }

    pub(super) fn pool_impl(&self, k_: &[usize], s_: &[usize], d_: &[usize], op: &str) -> Tensor {
        let shape = self.shape();
        let n = k_.len();
        let nn = shape.len() - n;
        let i_ = &shape[nn..];
        for j in 0..n {
            assert!(
                d_[j] * (k_[j].max(1) - 1) < i_[j] && k_[j] > 0,
                "{op}: kernel {k_:?} with dilation {d_:?} is larger than the (padded) input \
                 {i_:?} (shape {shape:?})"
            );
        }
        let o_: Vec<usize> = (0..n)
            .map(|j| (i_[j] - d_[j] * (k_[j] - 1)).div_ceil(s_[j]))
            .collect();
        let noop = shape[..nn].to_vec();
        let spatial_first: Vec<isize> = (0..nn as isize).collect();
        if (0..n).any(|j| k_[j] > s_[j] || d_[j] != 1) {
            // input size scaling factor to make sure the shrink for the stride is possible
            let f_: Vec<usize> = (0..n)
                .map(|j| 1 + usize::from(o_[j] * s_[j] > i_[j] - d_[j] * (k_[j] - 1)))
                .collect();
            // repeats such that no padding is needed
            let reps: Vec<usize> = (0..n)
                .map(|j| (k_[j] * (i_[j] * f_[j] + d_[j])).div_ceil(i_[j]))
                .collect();
            let x = self.nn_repeat_last(&reps);
            // dilation
            let mut b = noop.iter().map(|&x| (0, x)).collect::<Vec<_>>();
            let mut r = noop.clone();
            for j in 0..n {
                let w = i_[j] * f_[j] + d_[j];
                b.push((0, k_[j] * w));
                r.extend([k_[j], w]);
            }
            let x = x.shrink(&b).reshape_exact(&r);
            // stride
            let mut b = noop.iter().map(|&x| (0, x)).collect::<Vec<_>>();
            let mut r = noop.clone();
            for j in 0..n {
                b.extend([(0, k_[j]), (0, o_[j] * s_[j])]);
                r.extend([k_[j], o_[j], s_[j]]);
            }
            let x = x.shrink(&b).reshape_exact(&r);
            let mut b = noop.iter().map(|&x| (0, x)).collect::<Vec<_>>();
            let mut r = noop.clone();
            for j in 0..n {
                b.extend([(0, k_[j]), (0, o_[j]), (0, 1)]);
                r.extend([k_[j], o_[j]]);
            }
            let x = x.shrink(&b).reshape_exact(&r);
            // move the window axes to the end
            let mut perm = spatial_first;
            perm.extend((0..n).map(|j| (nn + 2 * j + 1) as isize));
            perm.extend((0..n).map(|j| (nn + 2 * j) as isize));
            return x.permute(&perm);
        }
        // kernel <= stride, no dilation: split each axis into (o, s) and keep k of each s
        let mut p = vec![(0usize, 0usize); nn];
        let mut b = noop.iter().map(|&x| (0, x)).collect::<Vec<_>>();
        let mut r = noop.clone();
        let mut b2 = noop.iter().map(|&x| (0, x)).collect::<Vec<_>>();
        for j in 0..n {
            p.push((0, (o_[j] * s_[j]).saturating_sub(i_[j])));
            b.push((0, o_[j] * s_[j]));
            r.extend([o_[j], s_[j]]);
            b2.extend([(0, o_[j]), (0, k_[j])]);
        }
        let x = self.pad(&p, 0).shrink(&b).reshape_exact(&r).shrink(&b2);
        let mut perm = spatial_first;
        perm.extend((0..n).map(|j| (nn + 2 * j) as isize));
        perm.extend((0..n).map(|j| (nn + 2 * j + 1) as isize));
        x.permute(&perm)
    }

    /// tinygrad's `_apply_ceil_mode`: extra padding after each spatial dimension so that
    /// [`Tensor::pool`] yields `ceil` output sizes, without windows that start in the padding
    /// after the input.
    fn apply_ceil_mode(
        &self,
        pads: &[(isize, isize)],
        k_: &[usize],
        s_: &[usize],
        d_: &[usize],
    ) -> Vec<(isize, isize)> {
        let shape = self.shape();
        let i_ = &shape[shape.len() - k_.len()..];
        let mut out = pads.to_vec();
        for j in 0..k_.len() {
            let (i, s, k, d) = (
                i_[j] as isize,
                s_[j] as isize,
                k_[j] as isize,
                d_[j] as isize,
            );
            let (pb, pa) = pads[j];
            let o = ceildiv(i + pb + pa - (d * (k - 1) + 1), s) + 1;
            out[j].1 += s * (o - 1) + (d * (k - 1) + 1)
                - (i + pb + pa)
                - (s * (o - 1) - (pb + i - 1)).max(0);
        }
        out
    }

    /// Checks a pool's arguments; returns (kernel, stride, dilation, pads).
    #[allow(clippy::type_complexity)]
    fn pool_args(
        &self,
        op: &str,
        kernel: Dims,
        stride: Dims,
        dilation: Dims,
        padding: &Padding,
    ) -> (Vec<usize>, Vec<usize>, Vec<usize>, Vec<(isize, isize)>) {
        let shape = self.shape();
        let k = kernel.kernel(op);
        let n = k.len();
        assert!(
            shape.len() >= n,
            "{op}: input shape {shape:?} has fewer dims than the kernel {k:?}"
        );
        let s = stride.resolve_or(n, &k, op, "stride", true);
        let d = dilation.resolve(n, op, "dilation", true);
        let pads = padding.resolve(n, op, &shape);
        let i_ = &shape[shape.len() - n..];
        for j in 0..n {
            let padded = i_[j] as isize + pads[j].0 + pads[j].1;
            assert!(
                (d[j] * (k[j] - 1) + 1) as isize <= padded,
                "{op}: kernel {k:?} with dilation {d:?} is larger than the padded input: \
                 input shape {shape:?}, padding {pads:?}, spatial dim {j} has {padded} elements"
            );
        }
        (k, s, d, pads)
    }

    /// Average pooling over the last `kernel_size.len()` axes (any number of spatial dims, like
    /// tinygrad; an integer kernel `k` is `(k, k)`). `stride` [`Dims::Default`] means the kernel
    /// size; `padding` takes any
    /// of tinygrad's forms ([`Padding`]). With `ceil_mode` the output size rounds up (windows
    /// never start in the padding after the input); with `count_include_pad == false` the zero
    /// padding is not counted in the averages.
    ///
    /// ```
    /// use tinygrad_tensor::{Dims, Tensor};
    /// let t = Tensor::arange(0, 25, 1).reshape(&[1, 1, 5, 5]);
    /// let p = t.avg_pool2d(2, Dims::Default, 1, 0, false, true);
    /// assert_eq!((p.shape(), p.to_vec::<f32>()), (vec![1, 1, 2, 2], vec![3.0, 5.0, 13.0, 15.0]));
    /// let p = t.avg_pool2d(2, Dims::Default, 1, 0, true, true); // ceil_mode
    /// let want = vec![3.0, 5.0, 6.5, 13.0, 15.0, 16.5, 20.5, 22.5, 24.0];
    /// assert_eq!(p.to_vec::<f32>(), want);
    /// let p = t.avg_pool2d(2, Dims::Default, 1, 1, false, true); // padding=1
    /// assert_eq!(p.to_vec::<f32>(), vec![0.0, 0.75, 1.75, 3.75, 9.0, 11.0, 8.75, 19.0, 21.0]);
    /// let p = t.avg_pool2d(2, Dims::Default, 1, 1, false, false); // count_include_pad=False
    /// assert_eq!(p.to_vec::<f32>(), vec![0.0, 1.5, 3.5, 7.5, 9.0, 11.0, 17.5, 19.0, 21.0]);
    /// ```
    ///
    /// # Panics
    /// On a kernel larger than the padded input, or malformed kernel/stride/padding.
    pub fn avg_pool2d(
        &self,
        kernel_size: impl Into<Dims>,
        stride: impl Into<Dims>,
        dilation: impl Into<Dims>,
        padding: impl Into<Padding>,
        ceil_mode: bool,
        count_include_pad: bool,
    ) -> Tensor {
        let (k, s, d, reg_pads) = self.pool_args(
            "avg_pool2d",
            kernel_size.into(),
            stride.into(),
            dilation.into(),
            &padding.into(),
        );
        let n = k.len() as isize;
        let axes: Vec<isize> = (-n..0).collect();
        let pool = |x: &Tensor, pads: &[(isize, isize)]| {
            x.pad_spatial(pads, 0).pool_impl(&k, &s, &d, "avg_pool2d")
        };
        let ceil_pads = self.apply_ceil_mode(&reg_pads, &k, &s, &d);
        let x = self.cast(least_upper_float(self.dtype()));
        if !count_include_pad {
            let pads = if ceil_mode { &ceil_pads } else { &reg_pads };
            let ones = Tensor::ones_like(&x);
            return pool(&x, pads).sum(axes.clone()) / pool(&ones, pads).sum(axes);
        }
        if !ceil_mode {
            return pool(&x, &reg_pads).mean(axes);
        }
        let extra: Vec<(isize, isize)> = ceil_pads
            .iter()
            .zip(&reg_pads)
            .map(|(c, r)| (c.0 - r.0, c.1 - r.1))
            .collect();
        let ones = Tensor::ones_like(&x.pad_spatial(&reg_pads, 0));
        pool(&x, &ceil_pads).sum(axes.clone()) / pool(&ones, &extra).sum(axes)
    }

    /// Max pooling over the last `kernel_size.len()` axes (any number of spatial dims; an integer
    /// kernel `k` is `(k, k)`). `stride` [`Dims::Default`] means the kernel size; padding uses the dtype's minimum (`-inf`
    /// for floats); `ceil_mode` as in [`Tensor::avg_pool2d`].
    ///
    /// ```
    /// use tinygrad_tensor::{Dims, Tensor};
    /// let t = Tensor::arange(0, 25, 1).reshape(&[1, 1, 5, 5]);
    /// let p = t.max_pool2d(2, Dims::Default, 1, 0, false);
    /// assert_eq!((p.shape(), p.to_vec::<i32>()), (vec![1, 1, 2, 2], vec![6, 8, 16, 18]));
    /// let p = t.max_pool2d(2, Dims::Default, 1, 0, true); // ceil_mode
    /// assert_eq!(p.to_vec::<i32>(), vec![6, 8, 9, 16, 18, 19, 21, 23, 24]);
    /// let p = t.max_pool2d(2, Dims::Default, 1, 1, false); // padding=1
    /// assert_eq!(p.to_vec::<i32>(), vec![0, 2, 4, 10, 12, 14, 20, 22, 24]);
    /// ```
    ///
    /// # Panics
    /// On a kernel larger than the padded input, or malformed kernel/stride/padding.
    pub fn max_pool2d(
        &self,
        kernel_size: impl Into<Dims>,
        stride: impl Into<Dims>,
        dilation: impl Into<Dims>,
        padding: impl Into<Padding>,
        ceil_mode: bool,
    ) -> Tensor {
        let (kernel, stride, dilation, padding) = (
            kernel_size.into(),
            stride.into(),
            dilation.into(),
            padding.into(),
        );
        let op = "max_pool2d";
        let (windows, pads) = self.max_pool_windows(
            op,
            kernel.clone(),
            stride.clone(),
            dilation.clone(),
            &padding,
            ceil_mode,
        );
        let n = windows.kernel.len() as isize;
        let axes: Vec<isize> = (-n..0).collect();
        let shape = self.shape();
        let spatial = &shape[shape.len() - windows.kernel.len()..];
        // Windows that tile the input exactly (stride = kernel, no dilation or padding): the
        // gradient is computed in the input's own layout (see `max_pool_tiled_gradient`).
        let tiles = windows.stride == windows.kernel
            && windows.dilation.iter().all(|&d| d == 1)
            && pads.iter().all(|&p| p == (0, 0))
            && spatial.iter().zip(&windows.kernel).all(|(s, k)| s % k == 0);
        if !tiles || !self.dtype().is_float() || !Tensor::is_grad_enabled() {
            return windows.view.max(axes);
        }
        // (the windows above were built to resolve the arguments; the value's are detached,
        // so the gradient reaches `self` only through the custom rule)
        let (detached, _) = self
            .detach()
            .max_pool_windows(op, kernel, stride, dilation, &padding, ceil_mode);
        let value = detached.view.max(axes);
        self.max_pool_tiled_gradient(&value, &windows.kernel)
    }

    /// `value`, the max pool of `self` over windows `kernel` that tile its last dims exactly
    /// (computed from `self` detached), with tinygrad's gradient of a window's `max` — `(x ==
    /// max) / count * g`, `count` the window's elements equal to its max — computed in `self`'s
    /// layout: each element compares with its window's max, `g` and `count` broadcast by
    /// reshape and expand. The derived gradient is the same formula in the windows' layout
    /// `(..., oy, ox, ky, kx)`: it was stored so (the mask, count and `g` make it several
    /// readers' input), and every reader in the input's layout (a BatchNorm's backward before
    /// the pool) then gathered from it. Same operations per element, so the same values.
    // pool gradients + readers ~26.5 -> ~21 ms per mnist step (see docs/performance.md)
    fn max_pool_tiled_gradient(&self, value: &Tensor, kernel: &[usize]) -> Tensor {
        let shape: Vec<isize> = self.shape().iter().map(|&d| d as isize).collect();
        let lead = shape.len() - kernel.len();
        let (mut split, mut ones, mut tiled) =
            (shape[..lead].to_vec(), shape[..lead].to_vec(), vec![]);
        for (j, &k) in kernel.iter().enumerate() {
            let (o, k) = (shape[lead + j] / k as isize, k as isize);
            split.extend([o, k]);
            ones.extend([o, 1]);
            tiled.push(lead + 2 * j + 1);
        }
        let (dev, dtype, out) = (self.device().to_string(), self.dtype(), value.uop());
        let (x, window_axes) = (self.uop(), tiled);
        let node = custom_gradient(&value.uop(), &[self.uop()], "max_pool2d", move |g, _| {
            let (g, x, out) = (
                Tensor::from_uop(g.clone(), &dev),
                Tensor::from_uop(x.clone(), &dev),
                Tensor::from_uop(out.clone(), &dev),
            );
            // a pooled tensor (`..., oy, ox`) broadcast over its windows, in `x`'s layout
            let up = |t: &Tensor| t.reshape(&ones).expand(&split).reshape(&shape);
            let axes: Vec<isize> = window_axes.iter().map(|&a| a as isize).collect();
            let count = x
                .reshape(&split)
                .eq(&out.reshape(&ones))
                .cast(g.dtype())
                .sum(axes);
            let mask = x.eq(&up(&out)).cast(g.dtype());
            let grad = &mask / &up(&count) * up(&g);
            debug_assert_eq!(grad.dtype(), dtype);
            vec![None, Some(grad.uop())]
        });
        value.with_uop(node)
    }

    /// The windows of a max pool (padded with the dtype's minimum) and the resolved arguments,
    /// shared by [`Tensor::max_pool2d`] and [`Tensor::max_pool2d_with_indices`].
    fn max_pool_windows(
        &self,
        op: &str,
        kernel: Dims,
        stride: Dims,
        dilation: Dims,
        padding: &Padding,
        ceil_mode: bool,
    ) -> (PoolWindows, Vec<(isize, isize)>) {
        let (k, s, d, mut pads) = self.pool_args(op, kernel, stride, dilation, padding);
        if ceil_mode {
            pads = self.apply_ceil_mode(&pads, &k, &s, &d);
        }
        let view = self
            .pad_spatial(&pads, self.dtype().min())
            .pool_impl(&k, &s, &d, op);
        (
            PoolWindows {
                view,
                kernel: k,
                stride: s,
                dilation: d,
            },
            pads,
        )
    }

    /// [`Tensor::max_pool2d`] that also returns where each maximum came from (tinygrad's
    /// `return_indices=True`): `(values, indices)`, the indices (`int32`) flat positions in the
    /// pooled spatial dims of the input (the first position on ties), ready for
    /// [`Tensor::max_unpool2d`].
    ///
    /// ```
    /// use tinygrad_tensor::{Dims, Tensor};
    /// let t = Tensor::arange(1, 17, 1).reshape(&[1, 1, 4, 4]);
    /// let (values, indices) = t.max_pool2d_with_indices(2, Dims::Default, 1, 0, false);
    /// assert_eq!(values.to_vec::<i32>(), vec![6, 8, 14, 16]);
    /// assert_eq!(indices.to_vec::<i32>(), vec![5, 7, 13, 15]);
    /// ```
    ///
    /// # Panics
    /// As [`Tensor::max_pool2d`].
    pub fn max_pool2d_with_indices(
        &self,
        kernel_size: impl Into<Dims>,
        stride: impl Into<Dims>,
        dilation: impl Into<Dims>,
        padding: impl Into<Padding>,
        ceil_mode: bool,
    ) -> (Tensor, Tensor) {
        let op = "max_pool2d_with_indices";
        let (windows, pads) = self.max_pool_windows(
            op,
            kernel_size.into(),
            stride.into(),
            dilation.into(),
            &padding.into(),
            ceil_mode,
        );
        let PoolWindows {
            view: pooled,
            kernel: k,
            stride: s,
            dilation: d,
        } = windows;
        let n = k.len() as isize;
        let axes: Vec<isize> = (-n..0).collect();
        let shape = self.shape();
        let spatial = &shape[shape.len() - k.len()..];
        let size: usize = spatial.iter().product();
        // positions counted down from `size`, so the largest marks the first maximum
        let down = Tensor::arange_on(size as f64, 0.0, -1.0, DType::INT32, self.device())
            .reshape_exact(spatial);
        let at_max = pooled.eq(pooled.max_keepdim(axes.clone()));
        let marks = at_max.cast(DType::INT32).mul(
            down.pad_spatial(&pads, DType::INT32.min())
                .pool_impl(&k, &s, &d, op),
        );
        let indices = marks.max(axes.clone()).neg().add(size as i64);
        (pooled.max(axes), indices)
    }

    /// The partial inverse of [`Tensor::max_pool2d_with_indices`]: each value written at its
    /// index in a zero tensor of the unpooled spatial shape (tinygrad's `max_unpool2d`, any
    /// number of spatial dims). The input is `(batch, channels, *spatial)`; the output's spatial
    /// shape is `output_size` (its last entries, when longer) or, by default, the smallest input
    /// the pool could have come from: `(i - 1) * stride - pad_before - pad_after + dilation *
    /// (kernel - 1) + 1`.
    ///
    /// ```
    /// use tinygrad_tensor::{Dims, Tensor};
    /// let t = Tensor::arange(1, 17, 1).reshape(&[1, 1, 4, 4]);
    /// let (values, indices) = t.max_pool2d_with_indices(2, Dims::Default, 1, 0, false);
    /// let u = values.max_unpool2d(&indices, 2, Dims::Default, 1, 0, None);
    /// assert_eq!(u.shape(), vec![1, 1, 4, 4]);
    /// assert_eq!(
    ///     u.to_vec::<i32>(),
    ///     vec![0, 0, 0, 0, 0, 6, 0, 8, 0, 0, 0, 0, 0, 14, 0, 16]
    /// );
    /// ```
    ///
    /// # Panics
    /// If the input has fewer than 3 dims, `indices` has another shape or is not an integer
    /// tensor, or the kernel/stride/dilation/padding don't match the spatial dims.
    #[allow(clippy::too_many_arguments)]
    pub fn max_unpool2d(
        &self,
        indices: &Tensor,
        kernel_size: impl Into<Dims>,
        stride: impl Into<Dims>,
        dilation: impl Into<Dims>,
        padding: impl Into<Padding>,
        output_size: Option<&[usize]>,
    ) -> Tensor {
        let op = "max_unpool2d";
        let shape = self.shape();
        assert!(
            shape.len() >= 3,
            "{op}: input shape {shape:?}: expected (batch, channels, *spatial) with at least one \
             spatial dim"
        );
        assert!(
            indices.shape() == shape && indices.dtype().is_int(),
            "{op}: indices {:?} {} must be an integer tensor of the input's shape {shape:?}",
            indices.shape(),
            indices.dtype()
        );
        let (bs, c, spatial) = (shape[0], shape[1], &shape[2..]);
        let n = spatial.len();
        let out: Vec<usize> = match output_size {
            Some(o) => {
                assert!(
                    o.len() >= n,
                    "{op}: output_size {o:?} has fewer than {n} spatial sizes (input {shape:?})"
                );
                o[o.len() - n..].to_vec()
            }
            None => {
                let k = match kernel_size.into() {
                    Dims::Default => panic!("{op}: a kernel size is required (input {shape:?})"),
                    Dims::All(v) => vec![v; n],
                    each => each.resolve(n, op, "kernel_size", true),
                };
                let s = stride.into().resolve_or(n, &k, op, "stride", true);
                let d = dilation.into().resolve(n, op, "dilation", true);
                let p = padding.into().resolve(n, op, &shape);
                (0..n)
                    .map(|j| {
                        let o = (spatial[j] as isize - 1) * s[j] as isize - (p[j].0 + p[j].1)
                            + (d[j] * (k[j] - 1) + 1) as isize;
                        assert!(o > 0, "{op}: the unpooled size of spatial dim {j} is {o}");
                        o as usize
                    })
                    .collect()
            }
        };
        let total: usize = out.iter().product();
        let flat: usize = spatial.iter().product();
        let hot = indices
            .reshape_exact(&[bs, c, 1, flat])
            .one_hot_along_dim(total, 2, op);
        let placed = hot.where_(self.reshape_exact(&[bs, c, 1, flat]), 0);
        let mut full = vec![bs, c];
        full.extend(&out);
        placed.sum(3isize).cast(self.dtype()).reshape_exact(&full)
    }

    /// All windows of `size` elements along `dim`, `step` apart, as a new last axis (PyTorch's
    /// and tinygrad's `unfold`): `dim` becomes `(len - size) / step + 1` long. A view, no copy.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(1, 8, 1);
    /// let u = t.unfold(0, 2, 1);
    /// assert_eq!(u.shape(), vec![6, 2]);
    /// assert_eq!(u.to_vec::<i32>(), vec![1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7]);
    /// assert_eq!(t.unfold(0, 2, 2).to_vec::<i32>(), vec![1, 2, 3, 4, 5, 6]);
    /// ```
    ///
    /// # Panics
    /// If `dim` is out of range, `step` is 0, or `size` is larger than the dim.
    pub fn unfold(&self, dim: isize, size: usize, step: usize) -> Tensor {
        let shape = self.shape();
        let d = crate::movement::resolve_axis(dim, shape.len(), "unfold", &shape);
        assert!(
            step > 0,
            "unfold: step must be > 0, got {step} (shape {shape:?})"
        );
        assert!(
            size <= shape[d],
            "unfold: size {size} is larger than dim {d} of shape {shape:?}"
        );
        let nd = shape.len();
        let mut to_last: Vec<isize> = (0..nd).filter(|&i| i != d).map(|i| i as isize).collect();
        to_last.push(d as isize);
        let pooled = if size == 0 {
            // an empty window: (len / step + 1) of them, as PyTorch
            let mut s = self.permute(&to_last).shape();
            let n = s.pop().unwrap_or(0) / step + 1;
            s.extend([n, 0]);
            Tensor::zeros_on(&s, self.dtype(), self.device())
        } else {
            self.permute(&to_last)
                .pool_impl(&[size], &[step], &[1], "unfold")
        };
        // for each output axis, the pooled axis it comes from: the windows back at `dim`, the
        // window's elements last
        let from: Vec<isize> = (0..=nd)
            .map(|o| match o {
                o if o == d => nd - 1,
                o if o == nd => nd,
                o if o < d => o,
                o => o - 1,
            } as isize)
            .collect();
        pooled.permute(&from)
    }
}
