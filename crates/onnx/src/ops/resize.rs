//! ONNX's `Resize`: nearest, linear and cubic interpolation (with antialiasing, excluded
//! outside taps, every coordinate transformation mode and `tf_crop_and_resize`'s extrapolation),
//! as ONNX's reference computes it — separably, one axis at a time. Each resized axis becomes a
//! host-built `(out, in)` weight matrix applied with a matmul, so any mode is one GEMM-shaped
//! kernel per axis.

use tinygrad_tensor::{DType, Tensor};

use crate::error::Result;
use crate::node::Node;

/// The node's outputs when `n.op` is `Resize`.
pub(super) fn run(n: &Node) -> Result<Option<Vec<Tensor>>> {
    if n.op != "Resize" {
        return Ok(None);
    }
    n.check_attrs(&[
        "antialias",
        "axes",
        "coordinate_transformation_mode",
        "cubic_coeff_a",
        "exclude_outside",
        "extrapolation_value",
        "keep_aspect_ratio_policy",
        "mode",
        "nearest_mode",
    ])?;
    if n.opset < 11 {
        return Err(n.err("Resize before opset 11 is not supported"));
    }
    let x = n.input(0)?;
    let shape = x.shape();
    let rank = shape.len();
    let axes: Vec<usize> = match n.ints("axes") {
        Some(a) => a.iter().map(|&a| n.axis(a, rank)).collect::<Result<_>>()?,
        None => (0..rank).collect(),
    };
    let roi = n.floats_input(1)?.filter(|r| !r.is_empty());
    let scales = n.floats_input(2)?.filter(|s| !s.is_empty());
    let sizes = n.ints_input(3)?.filter(|s| !s.is_empty());
    let (scales, outs): (Vec<f64>, Vec<usize>) = match (scales, sizes) {
        (Some(s), None) if s.len() == axes.len() => {
            let outs = axes
                .iter()
                .zip(&s)
                .map(|(&a, &f)| (shape[a] as f64 * f).floor().max(0.0) as usize)
                .collect();
            (s, outs)
        }
        (None, Some(z)) if z.len() == axes.len() => {
            let ratio: Vec<f64> = axes
                .iter()
                .zip(&z)
                .map(|(&a, &o)| o as f64 / shape[a] as f64)
                .collect();
            match n.string("keep_aspect_ratio_policy", "stretch").as_str() {
                "stretch" => (ratio, z.iter().map(|&o| o.max(0) as usize).collect()),
                p @ ("not_larger" | "not_smaller") => {
                    let s = if p == "not_larger" {
                        ratio.iter().copied().fold(f64::INFINITY, f64::min)
                    } else {
                        ratio.iter().copied().fold(0.0, f64::max)
                    };
                    let outs = axes
                        .iter()
                        .map(|&a| round_half_even(s * shape[a] as f64) as usize)
                        .collect();
                    (vec![s; axes.len()], outs)
                }
                p => return Err(n.err(format!("keep_aspect_ratio_policy {p:?} is not supported"))),
            }
        }
        _ => {
            return Err(n.err(format!(
                "exactly one of scales and sizes, with one value per axis of {axes:?}, is required"
            )));
        }
    };
    let mode = n.string("mode", "nearest");
    let ctm = n.string("coordinate_transformation_mode", "half_pixel");
    let cfg = Config {
        mode: mode.clone(),
        nearest: n.string("nearest_mode", "round_prefer_floor"),
        ctm: ctm.clone(),
        a: n.float("cubic_coeff_a", -0.75),
        exclude_outside: n.int("exclude_outside", 0) != 0,
        antialias: n.int("antialias", 0) != 0,
    };
    if !["nearest", "linear", "cubic"].contains(&mode.as_str()) {
        return Err(n.err(format!("mode {mode:?} is not supported")));
    }
    let dt = x.dtype();
    let work = if dt.is_float() {
        x.clone()
    } else {
        x.cast(DType::FLOAT32)
    };
    let mut y = work;
    let mut extrapolated: Option<Tensor> = None;
    for (i, &axis) in axes.iter().enumerate() {
        let roi_axis = roi.as_ref().map(|r| {
            let k = r.len() / 2;
            // roi lists the starts then the ends, over `axes` (or every dim)
            let j = if r.len() == 2 * axes.len() { i } else { axis };
            (
                r.get(j).copied().unwrap_or(0.0),
                r.get(j + k).copied().unwrap_or(1.0),
            )
        });
        if ctm == "tf_crop_and_resize" && roi_axis.is_none() {
            return Err(n.err("tf_crop_and_resize needs the roi input"));
        }
        let (w, flags) =
            weights(&cfg, shape[axis], outs[i], scales[i], roi_axis).map_err(|e| n.err(e))?;
        let (len_in, len_out) = (shape[axis], outs[i]);
        let bytes: Vec<u8> = w.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect();
        let wt = Tensor::from_bytes(&bytes, DType::FLOAT32, &[len_out, len_in], n.device())
            .cast(y.dtype());
        // y with `axis` last, times W^T, moved back
        let moved = y.transpose(axis as isize, -1);
        y = moved.matmul(&wt.t()).transpose(axis as isize, -1);
        if flags.iter().any(|&f| f) {
            let b: Vec<u8> = flags.iter().map(|&f| u8::from(f)).collect();
            let mut view = vec![1isize; rank];
            view[axis] = len_out as isize;
            let f = Tensor::from_bytes(&b, DType::BOOL, &[len_out], n.device()).reshape(&view);
            extrapolated = Some(match extrapolated {
                Some(e) => e.logical_or(&f),
                None => f,
            });
        }
    }
    if let Some(e) = extrapolated {
        y = e
            .where_(n.float("extrapolation_value", 0.0), &y)
            .cast(y.dtype());
    }
    Ok(Some(vec![if dt.is_float() { y } else { y.cast(dt) }]))
}

struct Config {
    mode: String,
    nearest: String,
    ctm: String,
    a: f64,
    exclude_outside: bool,
    antialias: bool,
}

fn round_half_even(v: f64) -> f64 {
    let r = v.round();
    if (v - v.trunc()).abs() == 0.5 && r % 2.0 != 0.0 {
        r - v.signum()
    } else {
        r
    }
}

/// The `(out, in)` interpolation matrix of one axis (row-major) and which outputs are
/// extrapolated (`tf_crop_and_resize` outside the input).
fn weights(
    c: &Config,
    len_in: usize,
    len_out: usize,
    scale: f64,
    roi: Option<(f64, f64)>,
) -> std::result::Result<(Vec<f64>, Vec<bool>), String> {
    let mut w = vec![0.0; len_out * len_in];
    let mut flags = vec![false; len_out];
    let width = scale * len_in as f64;
    let li = len_in as f64;
    for y in 0..len_out {
        let yf = y as f64;
        let x = match c.ctm.as_str() {
            "align_corners" => {
                if width == 1.0 {
                    0.0
                } else {
                    yf * (li - 1.0) / (width - 1.0)
                }
            }
            "asymmetric" => yf / scale,
            "tf_crop_and_resize" => {
                let (s, e) = roi.unwrap_or((0.0, 1.0));
                let v = if width == 1.0 {
                    (e - s) * (li - 1.0) / 2.0
                } else {
                    yf * (e - s) * (li - 1.0) / (width - 1.0)
                };
                let v = v + s * (li - 1.0);
                if v < 0.0 || v > li - 1.0 {
                    flags[y] = true;
                    continue;
                }
                v
            }
            "pytorch_half_pixel" => {
                if width == 1.0 {
                    -0.5
                } else {
                    (yf + 0.5) / scale - 0.5
                }
            }
            "half_pixel" => (yf + 0.5) / scale - 0.5,
            "half_pixel_symmetric" => {
                let adjustment = len_out as f64 / width;
                li / 2.0 * (1.0 - adjustment) + (yf + 0.5) / scale - 0.5
            }
            m => {
                return Err(format!(
                    "coordinate_transformation_mode {m:?} is not supported"
                ));
            }
        };
        let ratio = if x.fract() == 0.0 { 1.0 } else { x - x.floor() };
        let mut coeffs: Vec<f64> = match c.mode.as_str() {
            "nearest" => {
                if x.fract() == 0.0 {
                    vec![0.0, 1.0]
                } else {
                    let up = match c.nearest.as_str() {
                        "round_prefer_floor" => ratio > 0.5,
                        "round_prefer_ceil" => ratio >= 0.5,
                        "floor" => false,
                        "ceil" => true,
                        m => return Err(format!("nearest_mode {m:?} is not supported")),
                    };
                    if up { vec![0.0, 1.0] } else { vec![1.0, 0.0] }
                }
            }
            "linear" if c.antialias => {
                let s = scale.min(1.0);
                let start = (-1.0 / s).floor() as i64 + 1;
                let foot = 2 - 2 * start;
                let v: Vec<f64> = (start..start + foot)
                    .map(|i| (1.0 - ((i as f64 - ratio) * s).abs()).clamp(0.0, 1.0))
                    .collect();
                let sum: f64 = v.iter().sum();
                v.iter().map(|c| c / sum).collect()
            }
            "linear" => vec![1.0 - ratio, ratio],
            _ if c.antialias => {
                let s = scale.min(1.0);
                let a = c.a;
                let k = |x: f64| {
                    let x = x.abs();
                    if x <= 1.0 {
                        (a + 2.0) * x * x * x - (a + 3.0) * x * x + 1.0
                    } else if x < 2.0 {
                        a * x * x * x - 5.0 * a * x * x + 8.0 * a * x - 4.0 * a
                    } else {
                        0.0
                    }
                };
                let start = (-2.0 / s).floor() as i64 + 1;
                let v: Vec<f64> = (start..2 - start)
                    .map(|i| k(s * (i as f64 - ratio)))
                    .collect();
                let sum: f64 = v.iter().sum();
                v.iter().map(|c| c / sum).collect()
            }
            _ => {
                let (a, r) = (c.a, ratio);
                vec![
                    ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                    ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                    ((a + 2.0) * (1.0 - r) - (a + 3.0)) * (1.0 - r) * (1.0 - r) + 1.0,
                    ((a * (2.0 - r) - 5.0 * a) * (2.0 - r) + 8.0 * a) * (2.0 - r) - 4.0 * a,
                ]
            }
        };
        let taps = coeffs.len() as i64;
        // the `taps` integers nearest to x (ties to the smaller), in the edge-padded input
        let pad = (taps + 1) / 2;
        let lo_limit = -pad;
        let hi_limit = len_in as i64 + pad;
        let base = x.floor() as i64;
        let mut cand: Vec<i64> = (base - taps..=base + taps)
            .filter(|&i| i >= lo_limit && i < hi_limit)
            .collect();
        cand.sort_by(|&p, &q| {
            ((x - p as f64).abs(), p)
                .partial_cmp(&((x - q as f64).abs(), q))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        cand.truncate(taps as usize);
        cand.sort_unstable();
        if cand.len() != coeffs.len() {
            return Err(format!("no {taps} taps around {x} in {len_in} inputs"));
        }
        if c.exclude_outside {
            for (k, &i) in cand.iter().enumerate() {
                if i < 0 || i >= len_in as i64 {
                    coeffs[k] = 0.0;
                }
            }
            let sum: f64 = coeffs.iter().sum();
            if sum != 0.0 {
                coeffs.iter_mut().for_each(|v| *v /= sum);
            }
        }
        for (k, &i) in cand.iter().enumerate() {
            let src = i.clamp(0, len_in as i64 - 1) as usize;
            w[y * len_in + src] += coeffs[k];
        }
    }
    Ok((w, flags))
}
