//! Neural-network ops: `MatMul`, `Gemm`, `Conv`, pools, normalizations, `Softmax`, `Clip`,
//! `Dropout` (inference).

use tinygrad_tensor::{Axis, DType, Dims, Padding, Tensor};

use crate::error::Result;
use crate::node::Node;

/// The node's outputs when `n.op` is one of this file's ops.
pub(super) fn run(n: &Node) -> Result<Option<Vec<Tensor>>> {
    let one = |t: Tensor| Ok(Some(vec![t]));
    match n.op {
        "MatMul" => {
            n.check_attrs(&[])?;
            one(n.input(0)?.matmul(n.input(1)?))
        }
        "Gemm" => {
            n.check_attrs(&["alpha", "beta", "transA", "transB"])?;
            let a = n.input(0)?;
            let b = n.input(1)?;
            let a = if n.int("transA", 0) != 0 {
                a.t()
            } else {
                a.clone()
            };
            let b = if n.int("transB", 0) != 0 {
                b.t()
            } else {
                b.clone()
            };
            let (alpha, beta) = (n.float("alpha", 1.0), n.float("beta", 1.0));
            let mut y = a.matmul(&b);
            if alpha != 1.0 {
                y = y * alpha;
            }
            if let Some(c) = n.opt_input(2) {
                y = if beta == 1.0 { y + c } else { y + c * beta };
            }
            one(y.cast(a.dtype()))
        }
        "Conv" => {
            n.check_attrs(&[
                "auto_pad",
                "dilations",
                "group",
                "kernel_shape",
                "pads",
                "strides",
            ])?;
            let (x, w) = (n.input(0)?, n.input(1)?);
            let Geometry {
                kernel,
                strides,
                dilations,
                ..
            } = conv_geometry(n, x, w, "(M, C/group, ...)")?;
            let pads = pads(n, &x.shape()[2..], &kernel, &strides, &dilations)?;
            let group = n.int("group", 1).max(1) as usize;
            one(x.conv2d(
                w,
                n.opt_input(2),
                group,
                Dims::Each(strides),
                Dims::Each(dilations),
                Padding::Pairs(pads),
            ))
        }
        "MaxPool" | "AveragePool" => {
            let x = n.input(0)?;
            if n.op == "MaxPool" {
                n.check_attrs(&[
                    "auto_pad",
                    "ceil_mode",
                    "dilations",
                    "kernel_shape",
                    "pads",
                    "storage_order",
                    "strides",
                ])?;
                if n.output_count() > 1 {
                    return Err(n.err("the Indices output is not supported"));
                }
            } else {
                n.check_attrs(&[
                    "auto_pad",
                    "ceil_mode",
                    "count_include_pad",
                    "dilations",
                    "kernel_shape",
                    "pads",
                    "strides",
                ])?;
            }
            let (kernel, strides, dilations) = pool_geometry(n, x)?;
            let pads = pads(n, &x.shape()[2..], &kernel, &strides, &dilations)?;
            let ceil = n.int("ceil_mode", 0) != 0;
            let (k, s, d, p) = (
                Dims::Each(kernel),
                Dims::Each(strides),
                Dims::Each(dilations),
                Padding::Pairs(pads),
            );
            one(if n.op == "MaxPool" {
                x.max_pool2d(k, s, d, p, ceil)
            } else {
                x.avg_pool2d(k, s, d, p, ceil, n.int("count_include_pad", 0) != 0)
            })
        }
        "LpPool" => {
            n.check_attrs(&[
                "auto_pad",
                "ceil_mode",
                "dilations",
                "kernel_shape",
                "p",
                "pads",
                "strides",
            ])?;
            let x = n.input(0)?;
            let (kernel, strides, dilations) = pool_geometry(n, x)?;
            let pads = pads(n, &x.shape()[2..], &kernel, &strides, &dilations)?;
            let p = n.int("p", 2) as f64;
            let window: usize = kernel.iter().product();
            // (sum |x|^p)^(1/p): the mean over the window, padding counted as zeros, times its size
            let powed = x.abs().pow(p);
            let mean = powed.avg_pool2d(
                Dims::Each(kernel),
                Dims::Each(strides),
                Dims::Each(dilations),
                Padding::Pairs(pads),
                n.int("ceil_mode", 0) != 0,
                true,
            );
            one((mean * window as f64).pow(1.0 / p).cast(x.dtype()))
        }
        "AffineGrid" => {
            n.check_attrs(&["align_corners"])?;
            let theta = n.input(0)?;
            let size = n.ints_input(1)?.ok_or_else(|| n.err("size is required"))?;
            let spatial = size.len().saturating_sub(2);
            if !(spatial == 2 || spatial == 3)
                || theta.shape() != [size[0] as usize, spatial, spatial + 1]
            {
                return Err(n.err(format!("theta {:?} for size {size:?}", theta.shape())));
            }
            let align = n.int("align_corners", 0) != 0;
            // normalized coordinates of each output position, x fastest: (D, H, W, spatial + 1)
            let lin = |len: i64| -> Vec<f64> {
                (0..len)
                    .map(|i| {
                        if len == 1 {
                            0.0
                        } else if align {
                            -1.0 + 2.0 * i as f64 / (len - 1) as f64
                        } else {
                            (2.0 * i as f64 + 1.0) / len as f64 - 1.0
                        }
                    })
                    .collect()
            };
            let dims: Vec<i64> = size[2..].to_vec();
            let count: usize = dims.iter().map(|&d| d as usize).product();
            let mut base = Vec::with_capacity(count * (spatial + 1));
            let axes: Vec<Vec<f64>> = dims.iter().map(|&d| lin(d)).collect();
            for idx in 0..count {
                let mut rem = idx;
                let mut coord = vec![0.0; spatial];
                for (a, d) in dims.iter().enumerate().rev() {
                    coord[a] = axes[a][rem % *d as usize];
                    rem /= *d as usize;
                }
                // (x, y[, z], 1): the last spatial dim first
                for a in (0..spatial).rev() {
                    base.push(coord[a] as f32);
                }
                base.push(1.0);
            }
            let bytes: Vec<u8> = base.iter().flat_map(|v| v.to_le_bytes()).collect();
            let b = Tensor::from_bytes(&bytes, DType::FLOAT32, &[count, spatial + 1], n.device())
                .cast(theta.dtype());
            // (N, count, spatial) = base @ theta^T
            let grid = b.matmul(&theta.transpose(1, 2));
            let mut shape: Vec<usize> = vec![size[0] as usize];
            shape.extend(dims.iter().map(|&d| d as usize));
            shape.push(spatial);
            one(grid.reshape(&shape))
        }
        "GroupNormalization" => {
            n.check_attrs(&["epsilon", "num_groups", "stash_type"])?;
            let x = n.input(0)?;
            let (scale, bias) = (n.input(1)?, n.input(2)?);
            let s = x.shape();
            let g = n.int("num_groups", 0);
            if s.len() < 2 || g <= 0 || !s[1].is_multiple_of(g as usize) {
                return Err(n.err(format!("num_groups {g} for input {s:?}")));
            }
            let (g, c) = (g as usize, s[1]);
            let xf = if n.int("stash_type", 1) == 1 {
                x.cast(DType::FLOAT32)
            } else {
                x.clone()
            };
            let grouped = xf.reshape(&[s[0] as isize, g as isize, -1]);
            let mean = grouped.mean_keepdim(2isize);
            let centered = &grouped - &mean;
            let var = (&centered * &centered).mean_keepdim(2isize);
            let y = (centered * (var + n.float("epsilon", 1e-5)).rsqrt())
                .reshape(&s)
                .cast(x.dtype());
            // scale and bias per channel (opset 21), or per group before
            let per_channel = |p: &Tensor| {
                let v = if p.numel() == g && g != c {
                    p.repeat_interleave(c / g, Some(0))
                } else {
                    p.clone()
                };
                v.reshape(&channel_view(x))
            };
            one(y * per_channel(scale) + per_channel(bias))
        }
        "LRN" => {
            n.check_attrs(&["alpha", "beta", "bias", "size"])?;
            let x = n.input(0)?;
            let s = x.shape();
            let size = n.int("size", 0);
            if s.len() < 3 || size <= 0 {
                return Err(n.err(format!("size {size} for input {s:?}")));
            }
            let size = size as usize;
            let (alpha, beta, bias) = (
                n.float("alpha", 1e-4),
                n.float("beta", 0.75),
                n.float("bias", 1.0),
            );
            // the sum of squares over channels c - floor((size-1)/2) ..= c + ceil((size-1)/2)
            let (lo, hi) = ((size - 1) / 2, (size - 1).div_ceil(2));
            let sq = x * x;
            let mut pads = vec![(0isize, 0isize); s.len()];
            pads[1] = (lo as isize, hi as isize);
            let padded = sq.pad_mode(&pads, tinygrad_tensor::PadMode::Constant(0.0.into()));
            let mut sum: Option<Tensor> = None;
            for k in 0..size {
                let mut b: Vec<(usize, usize)> = padded.shape().iter().map(|&d| (0, d)).collect();
                b[1] = (k, k + s[1]);
                let part = padded.shrink(&b);
                sum = Some(match sum {
                    Some(t) => t + part,
                    None => part,
                });
            }
            let sum = sum.expect("size >= 1");
            one((x / (sum * (alpha / size as f64) + bias).pow(beta)).cast(x.dtype()))
        }
        "GlobalAveragePool" | "GlobalMaxPool" => {
            n.check_attrs(&[])?;
            let x = n.input(0)?;
            let axes: Vec<isize> = (2..x.ndim() as isize).collect();
            one(if n.op == "GlobalMaxPool" {
                x.max_keepdim(Axis::Some(axes))
            } else {
                x.mean_keepdim(Axis::Some(axes))
            })
        }
        "BatchNormalization" => {
            n.check_attrs(&["epsilon", "momentum", "training_mode", "spatial", "is_test"])?;
            // spatial=0 (opset < 9) means per-element statistics, not per channel
            if n.int("spatial", 1) != 1 {
                return Err(n.err("spatial=0 (statistics per element) is not supported"));
            }
            if n.int("training_mode", 0) != 0 || n.output_count() > 1 {
                return Err(n.err(
                    "training mode (batch statistics, running-mean outputs) is not supported",
                ));
            }
            let x = n.input(0)?;
            let (scale, bias, mean, var) = (n.input(1)?, n.input(2)?, n.input(3)?, n.input(4)?);
            let eps = n.float("epsilon", 1e-5);
            let c = channel_view(x);
            let inv = (var.reshape(&c) + eps).rsqrt();
            one((x - mean.reshape(&c)) * inv * scale.reshape(&c) + bias.reshape(&c))
        }
        "InstanceNormalization" => {
            n.check_attrs(&["epsilon"])?;
            let x = n.input(0)?;
            let (scale, bias) = (n.input(1)?, n.input(2)?);
            let axes: Vec<isize> = (2..x.ndim() as isize).collect();
            let mean = x.mean_keepdim(Axis::Some(axes.clone()));
            let centered = x - &mean;
            let var = (&centered * &centered).mean_keepdim(Axis::Some(axes));
            let c = channel_view(x);
            let y = centered * (var + n.float("epsilon", 1e-5)).rsqrt();
            one(y * scale.reshape(&c) + bias.reshape(&c))
        }
        "LayerNormalization" => {
            n.check_attrs(&["axis", "epsilon", "stash_type"])?;
            let x = n.input(0)?;
            let axis = n.axis(n.int("axis", -1), x.ndim())?;
            let axes: Vec<isize> = (axis as isize..x.ndim() as isize).collect();
            let xf = if n.int("stash_type", 1) == 1 {
                x.cast(DType::FLOAT32)
            } else {
                x.clone()
            };
            let mean = xf.mean_keepdim(Axis::Some(axes.clone()));
            let centered = &xf - &mean;
            let var = (&centered * &centered).mean_keepdim(Axis::Some(axes));
            let inv = (var + n.float("epsilon", 1e-5)).rsqrt();
            let mut y = (centered * &inv).cast(x.dtype()) * n.input(1)?;
            if let Some(b) = n.opt_input(2) {
                y = y + b;
            }
            Ok(Some(vec![y, mean, inv]))
        }
        "RMSNormalization" => {
            n.check_attrs(&["axis", "epsilon", "stash_type"])?;
            let x = n.input(0)?;
            let axis = n.axis(n.int("axis", -1), x.ndim())?;
            let axes: Vec<isize> = (axis as isize..x.ndim() as isize).collect();
            let xf = if n.int("stash_type", 1) == 1 {
                x.cast(DType::FLOAT32)
            } else {
                x.clone()
            };
            let ms = (&xf * &xf).mean_keepdim(Axis::Some(axes));
            let y = (xf * (ms + n.float("epsilon", 1e-5)).rsqrt()).cast(x.dtype());
            one(y * n.input(1)?)
        }
        "LpNormalization" => {
            n.check_attrs(&["axis", "p"])?;
            let x = n.input(0)?;
            let axis = n.axis(n.int("axis", -1), x.ndim())? as isize;
            let norm = match n.int("p", 2) {
                1 => x.abs().sum_keepdim(axis),
                2 => (x * x).sum_keepdim(axis).sqrt(),
                p => return Err(n.err(format!("p = {p}: expected 1 or 2"))),
            };
            // a zero norm gives zeros (ONNX's reference), not 0 / 0
            one(norm.eq(0.0).where_(0.0, x / &norm).cast(x.dtype()))
        }
        "ConvTranspose" => {
            n.check_attrs(&[
                "auto_pad",
                "dilations",
                "group",
                "kernel_shape",
                "output_padding",
                "output_shape",
                "pads",
                "strides",
            ])?;
            let (x, w) = (n.input(0)?, n.input(1)?);
            let Geometry {
                spatial,
                kernel,
                strides,
                dilations,
            } = conv_geometry(n, x, w, "(C, M/group, ...)")?;
            let mut out_pad: Vec<usize> = match n.ints("output_padding") {
                Some(v) if v.len() == spatial => v.iter().map(|&p| p.max(0) as usize).collect(),
                Some(v) => {
                    return Err(n.err(format!("output_padding {v:?}: expected {spatial} values")));
                }
                None => vec![0; spatial],
            };
            let input = &x.shape()[2..];
            let full = |i: usize| strides[i] * (input[i] - 1) + (kernel[i] - 1) * dilations[i] + 1;
            let auto = n.string("auto_pad", "NOTSET");
            let pads: Vec<(isize, isize)> = if let Some(os) = n.ints("output_shape") {
                if os.len() != spatial {
                    return Err(n.err(format!("output_shape {os:?}: expected {spatial} values")));
                }
                (0..spatial)
                    .map(|i| {
                        let total = (full(i) + out_pad[i]) as isize - os[i] as isize;
                        let small = total / 2;
                        if auto == "SAME_LOWER" {
                            (total - small, small)
                        } else {
                            (small, total - small)
                        }
                    })
                    .collect()
            } else if auto == "SAME_UPPER" || auto == "SAME_LOWER" {
                (0..spatial)
                    .map(|i| {
                        let total =
                            (full(i) + out_pad[i]) as isize - (input[i] * strides[i]) as isize;
                        let small = total / 2;
                        if auto == "SAME_UPPER" {
                            (small, total - small)
                        } else {
                            (total - small, small)
                        }
                    })
                    .collect()
            } else {
                match n.ints("pads") {
                    None => vec![(0, 0); spatial],
                    Some(p) if p.len() == 2 * spatial => (0..spatial)
                        .map(|i| (p[i] as isize, p[i + spatial] as isize))
                        .collect(),
                    Some(p) => {
                        return Err(n.err(format!("pads {p:?}: expected {} values", 2 * spatial)));
                    }
                }
            };
            // conv_transpose2d pads symmetrically: the smaller side's padding is passed to it,
            // the rest cropped from the result (or, for a negative end, zeros appended through
            // output_padding)
            let sym: Vec<usize> = pads
                .iter()
                .map(|&(b, e)| b.min(e).max(0) as usize)
                .collect();
            let group = n.int("group", 1).max(1) as usize;
            let (mut crop_start, mut crop_end) = (vec![0usize; spatial], vec![0usize; spatial]);
            for i in 0..spatial {
                let (b, e) = pads[i];
                if b < 0 {
                    return Err(n.err(format!("pads {pads:?}: a negative start is not supported")));
                }
                let s = sym[i] as isize;
                crop_start[i] = (b - s) as usize;
                let tail = e - s;
                if tail < 0 {
                    out_pad[i] += (-tail) as usize;
                } else {
                    // output_padding adds at the end, which the crop takes back first
                    let take = (tail as usize).min(out_pad[i]);
                    out_pad[i] -= take;
                    crop_end[i] = tail as usize - take;
                }
            }
            let y = x.conv_transpose2d(
                w,
                n.opt_input(2),
                group,
                Dims::Each(strides.clone()),
                Dims::Each(dilations.clone()),
                Padding::Pairs(sym.iter().map(|&p| (p as isize, p as isize)).collect()),
                Dims::Each(out_pad),
            );
            let ys = y.shape();
            let mut bounds: Vec<(usize, usize)> = ys.iter().map(|&d| (0, d)).collect();
            for i in 0..spatial {
                bounds[2 + i] = (
                    crop_start[i].min(ys[2 + i]),
                    ys[2 + i]
                        .saturating_sub(crop_end[i])
                        .max(crop_start[i].min(ys[2 + i])),
                );
            }
            one(y.shrink(&bounds))
        }
        "Softmax" | "LogSoftmax" | "Hardmax" => {
            n.check_attrs(&["axis"])?;
            let x = n.input(0)?;
            let shape = x.shape();
            let f = |t: &Tensor, axis: isize| match n.op {
                "Softmax" => t.softmax(axis),
                "LogSoftmax" => t.log_softmax(axis),
                _ => t
                    .argmax(Some(axis))
                    .one_hot(t.shape()[axis as usize] as isize)
                    .cast(t.dtype()),
            };
            if n.opset < 13 {
                // the input flattened to 2-D at `axis` (default 1), the op over the second dim
                let axis = n.axis(n.int("axis", 1), shape.len())?;
                let outer: usize = shape[..axis].iter().product();
                let inner: usize = shape[axis..].iter().product();
                one(f(&x.reshape(&[outer, inner]), 1).reshape(&shape))
            } else {
                let axis = n.axis(n.int("axis", -1), shape.len())?;
                if n.op == "Hardmax" {
                    let moved = x.transpose(axis as isize, -1);
                    return one(f(&moved, moved.ndim() as isize - 1).transpose(axis as isize, -1));
                }
                one(f(x, axis as isize))
            }
        }
        "Dropout" => {
            n.check_attrs(&["seed", "ratio", "is_test"])?;
            let x = n.input(0)?;
            let training = n
                .bools_input(2)?
                .and_then(|v| v.first().copied())
                .unwrap_or(false);
            let ratio = n
                .floats_input(1)?
                .and_then(|v| v.first().copied())
                .unwrap_or(n.float("ratio", 0.5));
            if training && ratio != 0.0 {
                return Err(n.err("training mode with a nonzero ratio is not supported"));
            }
            let mask = Tensor::full_on(&x.shape(), true, DType::BOOL, n.device());
            Ok(Some(vec![x.clone(), mask]))
        }
        "Clip" => {
            let x = n.input(0)?;
            let (lo, hi) = if n.opset < 11 {
                n.check_attrs(&["min", "max"])?;
                let c = |v: f64| Tensor::full_on(&[], v, x.dtype(), n.device());
                (
                    n.has("min").then(|| c(n.float("min", 0.0))),
                    n.has("max").then(|| c(n.float("max", 0.0))),
                )
            } else {
                n.check_attrs(&[])?;
                (n.opt_input(1).cloned(), n.opt_input(2).cloned())
            };
            let mut y = x.clone();
            if let Some(lo) = lo {
                y = y.maximum(&lo);
            }
            if let Some(hi) = hi {
                y = y.minimum(&hi);
            }
            one(y)
        }
        _ => Ok(None),
    }
}

/// A convolution's or pool's window: spatial rank, kernel, strides, dilations.
struct Geometry {
    spatial: usize,
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
}

/// A convolution's spatial rank, kernel, strides and dilations, its input and weight checked
/// (`layout` names the weight's expected dims in the error).
fn conv_geometry(n: &Node, x: &Tensor, w: &Tensor, layout: &str) -> Result<Geometry> {
    let spatial = x.ndim().saturating_sub(2);
    if spatial == 0 || w.ndim() != x.ndim() {
        return Err(n.err(format!(
            "input {:?} and weight {:?}: expected (N, C, ...) and {layout}",
            x.shape(),
            w.shape()
        )));
    }
    let kernel: Vec<usize> = w.shape()[2..].to_vec();
    Ok(Geometry {
        spatial,
        kernel,
        strides: dims(n, "strides", spatial)?,
        dilations: dims(n, "dilations", spatial)?,
    })
}

/// A pool's `kernel_shape` (one size per spatial dim of `x`), strides and dilations.
fn pool_geometry(n: &Node, x: &Tensor) -> Result<(Vec<usize>, Vec<usize>, Vec<usize>)> {
    let spatial = x.ndim().saturating_sub(2);
    let kernel: Vec<usize> = n
        .ints("kernel_shape")
        .ok_or_else(|| n.err("kernel_shape is required"))?
        .iter()
        .map(|&k| k.max(1) as usize)
        .collect();
    if kernel.len() != spatial {
        return Err(n.err(format!("kernel_shape {kernel:?} for input {:?}", x.shape())));
    }
    Ok((
        kernel,
        dims(n, "strides", spatial)?,
        dims(n, "dilations", spatial)?,
    ))
}

/// `(1, C, 1, ...)` for broadcasting per-channel values over `x` (N, C, ...).
fn channel_view(x: &Tensor) -> Vec<isize> {
    let mut v = vec![1isize; x.ndim()];
    if x.ndim() > 1 {
        v[1] = x.shape()[1] as isize;
    }
    v
}

/// A per-spatial-dim attribute (strides, dilations), 1 when absent.
fn dims(n: &Node, name: &str, spatial: usize) -> Result<Vec<usize>> {
    match n.ints(name) {
        None => Ok(vec![1; spatial]),
        Some(v) if v.len() == spatial && v.iter().all(|&d| d >= 1) => {
            Ok(v.iter().map(|&d| d as usize).collect())
        }
        Some(v) => Err(n.err(format!("{name} {v:?}: expected {spatial} values >= 1"))),
    }
}

/// `(before, after)` padding per spatial dim from `pads` or `auto_pad`.
fn pads(
    n: &Node,
    input: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
) -> Result<Vec<(isize, isize)>> {
    let spatial = input.len();
    match n.string("auto_pad", "NOTSET").as_str() {
        "NOTSET" => match n.ints("pads") {
            None => Ok(vec![(0, 0); spatial]),
            Some(p) if p.len() == 2 * spatial => Ok((0..spatial)
                .map(|i| (p[i] as isize, p[i + spatial] as isize))
                .collect()),
            Some(p) => Err(n.err(format!("pads {p:?}: expected {} values", 2 * spatial))),
        },
        "VALID" => Ok(vec![(0, 0); spatial]),
        mode @ ("SAME_UPPER" | "SAME_LOWER") => Ok((0..spatial)
            .map(|i| {
                let out = input[i].div_ceil(strides[i]);
                let span = (kernel[i] - 1) * dilations[i] + 1;
                let total = ((out - 1) * strides[i] + span).saturating_sub(input[i]) as isize;
                let small = total / 2;
                if mode == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                }
            })
            .collect()),
        m => Err(n.err(format!("auto_pad {m:?} is not supported"))),
    }
}
