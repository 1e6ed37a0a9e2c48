//! Convolutions: `conv2d` (any number of spatial dimensions) and `conv_transpose2d`, with the
//! input gradient computed as a convolution and transposed convolutions in row bands.

use tinygrad_uop::{Ops, UOp, custom_gradient};

use super::{Dims, Padding};
use crate::Tensor;

impl Tensor {
    /// Convolution (cross-correlation, like PyTorch) of `self` `(batch, groups*cin, *spatial)`
    /// with `weight` `(cout, cin, *kernel)`, plus `bias` `(cout,)`: any number of spatial
    /// dimensions (1-D, 2-D, 3-D, ...). `stride` and `dilation` take one value or one per spatial
    /// dim; `padding` any of tinygrad's forms ([`Padding`], asymmetric included). Built as
    /// tinygrad does: a [`Tensor::pool`] view of the padded input, broadcast against the weight
    /// and summed — one fused kernel.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::arange(0, 9, 1).reshape(&[1, 1, 3, 3]);
    /// let w = Tensor::ones(&[1, 1, 2, 2], DType::FLOAT32);
    /// let y = t.conv2d(&w, None, 1, 1, 1, 0);
    /// assert_eq!((y.shape(), y.to_vec::<f32>()), (vec![1, 1, 2, 2], vec![8.0, 12.0, 20.0, 24.0]));
    /// ```
    ///
    /// # Panics
    /// If the channel counts don't match the weight and `groups`, the dims differ, the bias has the
    /// wrong shape, or the kernel is larger than the padded input.
    pub fn conv2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        groups: usize,
        stride: impl Into<Dims>,
        dilation: impl Into<Dims>,
        padding: impl Into<Padding>,
    ) -> Tensor {
        let (xs, ws) = (self.shape(), weight.shape());
        assert!(
            xs.len() == ws.len() && xs.len() >= 3,
            "conv2d: input shape {xs:?} and weight shape {ws:?} need the same number of dims, \
             at least 3 (batch/out channels, channels, spatial...)"
        );
        assert!(groups >= 1, "conv2d: groups must be at least 1, got 0");
        let nd = ws.len() - 2;
        let (cin_, cout, cin) = (xs[1], ws[0], ws[1]);
        let hw = ws[2..].to_vec();
        assert!(
            groups * cin == cin_,
            "conv2d: input shape {xs:?} has {cin_} channels, but weight shape {ws:?} with \
             groups={groups} expects {} (groups * weight channels)",
            groups * cin
        );
        assert!(
            cout.is_multiple_of(groups),
            "conv2d: weight shape {ws:?} has {cout} output channels, not divisible by \
             groups={groups}"
        );
        if let Some(b) = bias {
            assert_eq!(
                b.shape(),
                vec![cout],
                "conv2d: bias shape {:?} doesn't match the {cout} output channels of weight shape \
                 {ws:?}, expected [{cout}]",
                b.shape()
            );
        }
        let s = stride.into().resolve(nd, "conv2d", "stride", true);
        let d = dilation.into().resolve(nd, "conv2d", "dilation", true);
        let pads = padding.into().resolve(nd, "conv2d", &xs);
        for j in 0..nd {
            let padded = xs[2 + j] as isize + pads[j].0 + pads[j].1;
            assert!(
                hw[j] > 0 && (d[j] * (hw[j] - 1) + 1) as isize <= padded,
                "conv2d: kernel {hw:?} (weight shape {ws:?}, dilation {d:?}) is larger than the \
                 padded input: input shape {xs:?}, padding {pads:?}, spatial dim {j} has {padded} \
                 elements"
            );
        }
        if let Some(y) = self.depthwise_native(weight, bias, groups, &s, &d, &pads) {
            return y;
        }
        let overlapping = (0..nd).any(|j| hw[j] > s[j] || d[j] != 1);
        if overlapping && self.dtype().is_float() && Tensor::is_grad_enabled() {
            return self.conv2d_input_gradient_as_conv(weight, bias, groups, &s, &d, &pads);
        }
        self.conv2d_view(weight, bias, groups, &s, &d, &pads)
    }

    /// [`Tensor::conv2d`] whose gradient with respect to the input is a transposed convolution
    /// of the output gradient (tinygrad derives it through the overlapping window view: a scatter
    /// that materializes one value per output position and kernel tap — 655 MB for the second
    /// conv of beautiful_mnist at batch 512 — and gathers it back in a second kernel). The
    /// forward pass and the weight and bias gradients are unchanged.
    // mnist: 2.4 s of a 4.5 s step -> 0.7 s (see docs/performance.md)
    fn conv2d_input_gradient_as_conv(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        groups: usize,
        s: &[usize],
        d: &[usize],
        pads: &[(isize, isize)],
    ) -> Tensor {
        let value = self.detach().conv2d_view(weight, bias, groups, s, d, pads);
        let xs = self.shape();
        let hw = weight.shape()[2..].to_vec();
        // the input positions after the last window's are not reached: output_padding restores them
        let out_pad: Vec<usize> = (0..hw.len())
            .map(|j| {
                let padded = xs[2 + j] as isize + pads[j].0 + pads[j].1;
                ((padded - (d[j] * (hw[j] - 1)) as isize - 1) % s[j] as isize) as usize
            })
            .collect();
        let (w, dev, x_dtype) = (weight.uop(), self.device().to_string(), self.dtype());
        let (s, d, pads) = (s.to_vec(), d.to_vec(), pads.to_vec());
        let node = custom_gradient(&value.uop(), &[self.uop()], "conv2d", move |g, _| {
            // realized first: the transposed convolution reads each element once per kernel
            // tap, which would recompute whatever produced it (pool and norm backward) each time
            let gt = Tensor::from_uop(g.clone(), &dev).contiguous();
            let w = Tensor::from_uop(w.clone(), &dev);
            if let Some(gx) = gt.conv_transpose_row_bands(&w, groups, &s, &d, &pads, &out_pad) {
                return vec![Some(g.clone()), Some(gx.cast(x_dtype).uop())];
            }
            let gx = gt.conv_transpose2d(
                &w,
                None,
                groups,
                s.clone(),
                d.clone(),
                Padding::Pairs(pads.clone()),
                out_pad.clone(),
            );
            vec![Some(g.clone()), Some(gx.cast(x_dtype).uop())]
        });
        value.with_uop(node)
    }

    /// [`Tensor::conv_transpose2d`] (no bias) of a large 2-D gradient with stride and dilation
    /// 1, computed in bands of output rows that each take only the kernel rows whose input row
    /// exists: as one correlation over the zero-padded input, the rows near the top and bottom
    /// edges multiply padding (beautiful_mnist's second convolution: 24 output rows, of which 8
    /// reach 1-4 of the 5 kernel rows; 17% of the input gradient's flops, ~35 ms of a training
    /// step). Each band is a correlation without row padding; the bands are concatenated. The
    /// same sums in the same order per output, so the values are those of the unbanded form
    /// up to the order of additions. `None` where it does not apply (other strides or
    /// dilations, not 2-D, no rows of padding, or too small to pay for the extra kernels).
    fn conv_transpose_row_bands(
        &self,
        weight: &Tensor,
        groups: usize,
        s: &[usize],
        d: &[usize],
        pads: &[(isize, isize)],
        out_pad: &[usize],
    ) -> Option<Tensor> {
        let (xs, ws) = (self.shape(), weight.shape());
        if ws.len() != 4 || xs.len() != 4 || s.iter().chain(d).any(|&v| v != 1) {
            return None;
        }
        let (kh, kw) = (ws[2], ws[3]);
        // the correlation's padding (see `conv_transpose2d`): rows (top, bottom), columns
        let (top, bottom) = (
            kh as isize - 1 - pads[0].0,
            kh as isize - 1 - pads[0].1 + out_pad[0] as isize,
        );
        let cols = (
            kw as isize - 1 - pads[1].0,
            kw as isize - 1 - pads[1].1 + out_pad[1] as isize,
        );
        let (h, width) = (xs[2] as isize, xs[3] as isize);
        let out_h = h + top + bottom - kh as isize + 1;
        let out_w = width + cols.0 + cols.1 - kw as isize + 1;
        let cout = ws[1] * groups;
        let flops = 2.0
            * (xs[0] * cout) as f64
            * (out_h * out_w) as f64
            * (xs[1] / groups) as f64
            * (kh * kw) as f64;
        if (top <= 0 && bottom <= 0) || out_h <= 0 || out_w <= 0 || flops < BAND_ROWS_FLOPS {
            return None;
        }
        // (cin, cout/g, kh, kw) -> (cout, cin/g, kh, kw), flipped: as `conv_transpose2d`
        let w = weight
            .unflatten(0, &[groups as isize, -1])
            .transpose(1, 2)
            .flip(&[3, 4])
            .flatten(0, 1);
        // columns padded once, for every band (a buffer: each band reads it in place)
        let x = self.pad_spatial(&[(0, 0), cols], 0).contiguous();
        // output row y reads input rows y - top + ky: those that exist for ky in [lo, hi)
        let taps = |y: isize| ((top - y).max(0), (h + top - y).min(kh as isize));
        let mut bands: Vec<Tensor> = Vec::new();
        let mut y0 = 0;
        while y0 < out_h {
            let (lo, hi) = taps(y0);
            let mut y1 = y0 + 1;
            while y1 < out_h && taps(y1) == (lo, hi) {
                y1 += 1;
            }
            let band = if lo >= hi {
                let shape = [xs[0], cout, (y1 - y0) as usize, out_w as usize];
                Tensor::zeros_on(&shape, self.dtype(), self.device())
            } else {
                let mut rows: Vec<(usize, usize)> = x.shape().iter().map(|&v| (0, v)).collect();
                rows[2] = ((y0 - top + lo) as usize, (y1 - 1 - top + hi) as usize);
                let mut taps_kept: Vec<(usize, usize)> = ws.iter().map(|&v| (0, v)).collect();
                taps_kept[0] = (0, cout);
                taps_kept[1] = (0, xs[1] / groups);
                taps_kept[2] = (lo as usize, hi as usize);
                x.shrink(&rows).conv2d_view(
                    &w.shrink(&taps_kept),
                    None,
                    groups,
                    &[1, 1],
                    &[1, 1],
                    &[(0, 0), (0, 0)],
                )
            };
            bands.push(band);
            y0 = y1;
        }
        // The border bands are one row each. With 3 or more on a side (kernels of 4+ rows) they
        // are concatenated among themselves first, into a small buffer: the full-size
        // concatenation, which evaluates a gated load per source for every element, then has 3
        // sources instead of 9 (beautiful_mnist's 5x5 conv2: 10.0 -> 5.8 ms with the two side
        // buffers). With 2 per side (3x3 kernels) the extra kernels cost more than they save.
        let main = bands
            .iter()
            .enumerate()
            .max_by_key(|(_, b)| b.shape()[2])
            .map_or(0, |(i, _)| i);
        let side = |part: &[Tensor]| -> Vec<Tensor> {
            // band concatenation 10.0 -> 5.8 ms (see docs/performance.md)
            if part.len() >= 3 {
                vec![Tensor::cat(&part.iter().collect::<Vec<_>>(), 2).contiguous()]
            } else {
                part.to_vec()
            }
        };
        let mut parts = side(&bands[..main]);
        parts.push(bands[main].clone());
        parts.extend(side(&bands[main + 1..]));
        let refs: Vec<&Tensor> = parts.iter().collect();
        Some(Tensor::cat(&refs, 2))
    }

    /// The convolution as tinygrad builds it (arguments already checked): a [`Tensor::pool`]
    /// view of the padded input, broadcast against the weight and summed.
    pub(super) fn conv2d_view(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        groups: usize,
        s: &[usize],
        d: &[usize],
        pads: &[(isize, isize)],
    ) -> Tensor {
        let (xs, ws) = (self.shape(), weight.shape());
        let nd = ws.len() - 2;
        let (bs, cout, cin) = (xs[0], ws[0], ws[1]);
        let hw = ws[2..].to_vec();
        // Overlapping windows read each input element once per kernel tap: a fused producer
        // (a relu, a bias add, padding's bounds checks) would be recomputed that often, so in a
        // large convolution the padded input is realized first unless it already is a view of
        // a buffer without padding. The matmul-shaped kernel then reads a plain buffer, which
        // the CPU's GEMM path multiplies in place instead of packing (beautiful_mnist's second
        // conv: pack ~110 ms per step forward, as much again for the input gradient). A small
        // convolution stays one fused kernel.
        let overlapping = (0..nd).any(|j| hw[j] > s[j] || d[j] != 1);
        let padded = pads.iter().any(|&(a, b)| a != 0 || b != 0);
        let out_spatial: usize = (0..nd)
            .map(|j| {
                let i = (xs[2 + j] as isize + pads[j].0 + pads[j].1) as usize;
                (i - d[j] * (hw[j] - 1)).div_ceil(s[j])
            })
            .product();
        let out_elems = xs[0] * ws[0] * out_spatial;
        let flops = 2.0 * out_elems as f64 * ws[1..].iter().product::<usize>() as f64;
        let computed = !is_moved_buffer(&self.uop());
        if groups == 1
            && xs[0] * out_spatial < SMALL_CONV_POSITIONS
            && flops >= SMALL_CONV_MIN_FLOPS
            && self.dtype().is_float()
        {
            return self.conv2d_windows_matmul(weight, bias, s, d, pads);
        }
        let x = if overlapping
            && ((flops >= REALIZE_CONV_INPUT_FLOPS && (padded || computed))
                || (flops >= REALIZE_COMPUTED_CONV_INPUT_FLOPS && computed && groups == 1))
        {
            match self.padded_natively(pads) {
                Some(p) => p,
                None => self.pad_spatial(pads, 0).contiguous(),
            }
        } else {
            self.pad_spatial(pads, 0)
        };
        // (bs, groups*cin, *oyx, *hw)
        let x = x.pool_impl(&hw, s, d, "conv2d");
        let rcout = cout / groups;
        let oyx = x.shape()[2..2 + nd].to_vec();
        let mut split = vec![bs, groups, cin, 1];
        split.extend(&oyx);
        split.extend(&hw);
        let mut wide = vec![bs, groups, cin, rcout];
        wide.extend(&oyx);
        wide.extend(&hw);
        let mut perm: Vec<isize> = vec![0, 1, 3];
        perm.extend((0..nd).map(|j| (4 + j) as isize));
        perm.push(2);
        perm.extend((0..nd).map(|j| (4 + nd + j) as isize));
        // broadcast to (bs, groups, rcout, *oyx, cin, *hw)
        let x = x.reshape_exact(&split).expand_exact(&wide).permute(&perm);
        let mut wshape = vec![1, groups, rcout];
        wshape.extend(std::iter::repeat_n(1, nd));
        wshape.push(cin);
        wshape.extend(&hw);
        let w = weight.reshape_exact(&wshape);
        let axes: Vec<isize> = (0..=nd as isize).map(|i| -1 - i).collect();
        let mut out = vec![bs, cout];
        out.extend(&oyx);
        let ret = (x * w).sum_keepdim(axes).reshape_exact(&out);
        match bias {
            None => ret,
            Some(b) => {
                let mut bshape = vec![1, cout];
                bshape.extend(std::iter::repeat_n(1, nd));
                ret + b.reshape_exact(&bshape)
            }
        }
    }

    /// Transposed convolution (the gradient of [`Tensor::conv2d`] with respect to its input) of
    /// `self` `(batch, cin, *spatial)` with `weight` `(cin, cout/groups, *kernel)`, any number of
    /// spatial dims. The output of spatial size `(i-1)*stride - pad_before - pad_after +
    /// dilation*(k-1) + 1 + output_padding`. Built as tinygrad does: the input is spread out by
    /// the stride (zeros between elements) and convolved with the flipped, transposed weight.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::arange(0, 9, 1).reshape(&[1, 1, 3, 3]);
    /// let w = Tensor::ones(&[1, 1, 2, 2], DType::FLOAT32);
    /// let y = t.conv_transpose2d(&w, None, 1, 1, 1, 0, 0);
    /// assert_eq!(y.shape(), vec![1, 1, 4, 4]);
    /// let want = [0, 1, 3, 2, 3, 8, 12, 7, 9, 20, 24, 13, 6, 13, 15, 8].map(|x| x as f32);
    /// assert_eq!(y.to_vec::<f32>(), want);
    /// ```
    ///
    /// # Panics
    /// On mismatched channels/groups/dims, or arguments that leave no output.
    #[allow(clippy::too_many_arguments)]
    pub fn conv_transpose2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        groups: usize,
        stride: impl Into<Dims>,
        dilation: impl Into<Dims>,
        padding: impl Into<Padding>,
        output_padding: impl Into<Dims>,
    ) -> Tensor {
        let (xs, ws) = (self.shape(), weight.shape());
        assert!(
            xs.len() == ws.len() && xs.len() >= 3,
            "conv_transpose2d: input shape {xs:?} and weight shape {ws:?} need the same number of \
             dims, at least 3 (batch/in channels, channels, spatial...)"
        );
        assert!(
            groups >= 1,
            "conv_transpose2d: groups must be at least 1, got 0"
        );
        assert!(
            ws[0] == xs[1] && ws[0].is_multiple_of(groups),
            "conv_transpose2d: input shape {xs:?} has {} channels, weight shape {ws:?} expects \
             {} (its first dim), divisible by groups={groups}",
            xs[1],
            ws[0]
        );
        let nd = ws.len() - 2;
        let hw = ws[2..].to_vec();
        let s = stride
            .into()
            .resolve(nd, "conv_transpose2d", "stride", true);
        let d = dilation
            .into()
            .resolve(nd, "conv_transpose2d", "dilation", true);
        let op = output_padding
            .into()
            .resolve(nd, "conv_transpose2d", "output_padding", false);
        let pads = padding.into().resolve(nd, "conv_transpose2d", &xs);
        if groups == 1
            && (0..nd).all(|j| s[j] == hw[j] && (d[j] == 1 || hw[j] == 1) && hw[j] > 0)
            && pads.iter().all(|&(b, a)| b >= 0 && a >= 0)
            && (0..nd).all(|j| (pads[j].0 + pads[j].1) < (xs[2 + j] * s[j]) as isize)
        {
            return self.conv_transpose_tiles(weight, bias, &pads, &op);
        }
        // (cin, cout/g, *hw) -> (g, cin/g, cout/g, *hw) -> (g, cout/g, cin/g, *hw), flipped
        let flip_axes: Vec<isize> = (3..3 + nd as isize).collect();
        let w = weight
            .unflatten(0, &[groups as isize, -1])
            .transpose(1, 2)
            .flip(&flip_axes)
            .flatten(0, 1);
        let mut x = self.clone();
        if s.iter().any(|&v| v > 1) {
            // (k) -> (k, 1) -> pad (k, s) -> (k*s) -> shrink to k*s - (s-1)
            let sp = &xs[2..];
            let mut split = xs[..2].to_vec();
            let mut pad = vec![(0, 0); 2];
            for j in 0..nd {
                split.extend([sp[j], 1]);
                pad.extend([(0, 0), (0, s[j] - 1)]);
            }
            let mut merged = xs[..2].to_vec();
            merged.extend((0..nd).map(|j| sp[j] * s[j]));
            let mut keep: Vec<(usize, usize)> = xs[..2].iter().map(|&v| (0, v)).collect();
            keep.extend((0..nd).map(|j| (0, sp[j] * s[j] - (s[j] - 1))));
            x = x
                .reshape_exact(&split)
                .pad(&pad, 0)
                .reshape_exact(&merged)
                .shrink(&keep);
        }
        let new_pads: Vec<(isize, isize)> = (0..nd)
            .map(|j| {
                let e = ((hw[j] as isize) - 1) * d[j] as isize;
                (e - pads[j].0, e - pads[j].1 + op[j] as isize)
            })
            .collect();
        let xsp = x.shape();
        for j in 0..nd {
            let size = xsp[2 + j] as isize + new_pads[j].0 + new_pads[j].1
                - (d[j] * (hw[j].max(1) - 1)) as isize;
            assert!(
                size > 0,
                "conv_transpose2d: no output for input shape {xs:?}, weight shape {ws:?}, stride \
                 {s:?}, dilation {d:?}, padding {pads:?} (spatial dim {j})"
            );
        }
        x.conv2d(&w, bias, groups, 1, d, Padding::Pairs(new_pads))
    }
}

impl Tensor {
    /// [`Tensor::conv_transpose2d`] whose stride equals its kernel (dilation 1, one group): the
    /// windows tile the output without overlap, so each input pixel times the weight is its own
    /// `kernel` block of the output: one GEMM `(bs * pixels, cin) @ (cin, cout * kernel)`,
    /// its blocks moved into place, then the padding cut (and the output padding added).
    /// The spread-out form multiplies `prod(kernel)` times as many zeros.
    // PP-OCRv4 det 30.3-31.2 -> 11.6-11.7 ms on the Xeon (see docs/performance.md)
    fn conv_transpose_tiles(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        pads: &[(isize, isize)],
        output_padding: &[usize],
    ) -> Tensor {
        let (xs, ws) = (self.shape(), weight.shape());
        let nd = xs.len() - 2;
        let (bs, cin, cout) = (xs[0], xs[1], ws[1]);
        let sp = &xs[2..];
        let k = &ws[2..];
        // (bs, cin, *sp) -> (bs, *sp, cin) -> (bs * pixels, cin)
        let mut to_last: Vec<isize> = vec![0];
        to_last.extend(2..2 + nd as isize);
        to_last.push(1);
        let pixels: usize = sp.iter().product();
        let x = self
            .permute(&to_last)
            .reshape(&[(bs * pixels) as isize, cin as isize]);
        let kn: usize = k.iter().product();
        let w = weight.reshape(&[cin as isize, (cout * kn) as isize]);
        // (bs, *sp, cout, *k) -> (bs, cout, sp0, k0, sp1, k1, ...) -> (bs, cout, sp0*k0, ...)
        let mut shape: Vec<isize> = vec![bs as isize];
        shape.extend(sp.iter().map(|&v| v as isize));
        shape.push(cout as isize);
        shape.extend(k.iter().map(|&v| v as isize));
        let mut order: Vec<isize> = vec![0, 1 + nd as isize];
        for j in 0..nd as isize {
            order.extend([1 + j, 2 + nd as isize + j]);
        }
        let mut full: Vec<isize> = vec![bs as isize, cout as isize];
        full.extend((0..nd).map(|j| (sp[j] * k[j]) as isize));
        // (the product realized in its own layout: a GEMM; the move is a copy after it)
        let y = x
            .matmul(&w)
            .contiguous()
            .reshape(&shape)
            .permute(&order)
            .reshape(&full);
        // the padding cuts the full output; the output padding takes it back at the end
        // (values there when the cut was larger, zeros past the full output)
        let end = |j: usize| sp[j] * k[j] + output_padding[j] - pads[j].1 as usize;
        let mut keep: Vec<(usize, usize)> = vec![(0, bs), (0, cout)];
        keep.extend((0..nd).map(|j| (pads[j].0 as usize, end(j).min(sp[j] * k[j]))));
        let mut y = y.shrink(&keep);
        if (0..nd).any(|j| end(j) > sp[j] * k[j]) {
            let mut extra = vec![(0, 0); 2];
            extra.extend((0..nd).map(|j| (0, end(j).saturating_sub(sp[j] * k[j]))));
            y = y.pad(&extra, 0);
        }
        match bias {
            None => y,
            Some(b) => {
                let mut bshape = vec![1, cout];
                bshape.extend(std::iter::repeat_n(1, nd));
                y + b.reshape_exact(&bshape)
            }
        }
    }
}

/// Output positions (batch x spatial) below which a convolution is a product of its realized
/// windows: the GEMM path starts at this many rows (`tinygrad_runtime::gemm::MIN_SIDE`), and
/// below it the fused form's reduction over (channels, taps) has no axis contiguous in both
/// the input and the weight, so it runs unvectorized.
// silero-vad 16k 0.15-0.17 -> 0.10 ms on the Xeon (see docs/performance.md)
const SMALL_CONV_POSITIONS: usize = 8;

/// The smallest convolution (in flops) taken as a product of its windows (below, one fused
/// kernel costs less than two).
const SMALL_CONV_MIN_FLOPS: f64 = (1u64 << 14) as f64;

impl Tensor {
    /// [`Tensor::conv2d`] (one group) with few output positions: the windows realized as
    /// `(positions, cin * kernel)` rows (small: a few positions), then a product with the
    /// weight as `(cout, cin * kernel)`, whose reduction is contiguous in both operands.
    fn conv2d_windows_matmul(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        s: &[usize],
        d: &[usize],
        pads: &[(isize, isize)],
    ) -> Tensor {
        let (xs, ws) = (self.shape(), weight.shape());
        let nd = ws.len() - 2;
        let (bs, cout, cin) = (xs[0], ws[0], ws[1]);
        let hw = &ws[2..];
        // (bs, cin, *oyx, *hw) -> (bs, *oyx, cin, *hw) -> (positions, cin * taps)
        let win = self.pad_spatial(pads, 0).pool_impl(hw, s, d, "conv2d");
        let oyx = win.shape()[2..2 + nd].to_vec();
        let mut order: Vec<isize> = vec![0];
        order.extend((2..2 + nd as isize).collect::<Vec<_>>());
        order.push(1);
        order.extend((2 + nd as isize..2 + 2 * nd as isize).collect::<Vec<_>>());
        let positions = bs * oyx.iter().product::<usize>();
        let taps: usize = hw.iter().product();
        let rows = win
            .permute(&order)
            .reshape(&[positions as isize, (cin * taps) as isize])
            .contiguous();
        let w = weight.reshape(&[cout as isize, (cin * taps) as isize]);
        // (positions, cout) -> (bs, *oyx, cout) -> (bs, cout, *oyx)
        let mut shape: Vec<isize> = vec![bs as isize];
        shape.extend(oyx.iter().map(|&v| v as isize));
        shape.push(cout as isize);
        let mut back: Vec<isize> = vec![0, 1 + nd as isize];
        back.extend(1..1 + nd as isize);
        let y = rows.matmul(&w.t()).reshape(&shape).permute(&back);
        match bias {
            None => y,
            Some(b) => {
                let mut bshape = vec![1, cout];
                bshape.extend(std::iter::repeat_n(1, nd));
                y + b.reshape_exact(&bshape)
            }
        }
    }
}

/// The smallest convolution (in flops) whose computed or padded input is realized before the
/// windows are taken (the CPU's GEMM path starts at the same size).
// mnist step ~1,100 -> ~700 ms (see docs/performance.md)
const REALIZE_CONV_INPUT_FLOPS: f64 = (1u64 << 22) as f64;

/// The smallest ungrouped convolution (in flops) whose computed input (not a view of a buffer:
/// an activation, a reflection pad) is realized before the windows are taken, the padding
/// staying fused: below it, one fused kernel costs less than two. (Grouped and depthwise ones
/// were measured both ways: a mobile classifier 1.28x faster, another 9% slower; left fused.)
const REALIZE_COMPUTED_CONV_INPUT_FLOPS: f64 = (1u64 << 16) as f64;

/// The smallest transposed convolution (in flops) computed in row bands
/// ([`Tensor::conv_transpose_row_bands`]): below it, the saved padding taps cost less than the
/// extra kernels.
// mnist conv2 GEMMs 213 -> 182 ms (see docs/performance.md)
const BAND_ROWS_FLOPS: f64 = (1u64 << 26) as f64;

/// Whether `u` is a buffer seen through movement ops (nothing to compute before reading it):
/// a `Contiguous` node always becomes one.
fn is_moved_buffer(u: &UOp) -> bool {
    let mut u = u.clone();
    loop {
        match u.op() {
            Ops::Buffer | Ops::Contiguous => return true,
            op if op.is_movement() || matches!(op, Ops::Detach | Ops::ContiguousBackward) => {
                u = u.s(0).clone();
            }
            _ => return false,
        }
    }
}
