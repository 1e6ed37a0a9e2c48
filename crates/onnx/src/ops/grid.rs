//! ONNX's `GridSample` (opsets 16 and 20+): `X` (N, C, D1..Dk) sampled at the normalized
//! coordinates of `grid` (N, O1..Om, k), nearest, linear or cubic, with zeros, border or
//! reflection padding, for any number of spatial dims — as ONNX's reference (and PyTorch's
//! `grid_sample`) computes it.
//!
//! Everything is tensor ops: per spatial axis, the coordinate is denormalized, moved inside the
//! borders (border, reflection) and split into taps (an index and a weight each: 1 for nearest,
//! 2 for linear, 4 for cubic); each combination of one tap per axis is one gather from `X`
//! flattened over its spatial dims, weighted by the product of the taps' weights.

use tinygrad_tensor::{DType, Tensor};

use crate::error::Result;
use crate::node::Node;

/// How values between pixels are interpolated.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

/// What a coordinate outside the image reads.
#[derive(Clone, Copy, PartialEq)]
enum Padding {
    Zeros,
    Border,
    Reflection,
}

/// One tap along one axis: the pixel's index (int32, already inside the axis), its weight, and
/// for zeros padding whether the unclamped index was inside (outside, the tap reads 0 — not
/// the clamped pixel times a zero weight, which an `inf` pixel would make NaN).
struct Tap {
    index: Tensor,
    weight: Tensor,
    inside: Option<Tensor>,
}

/// The node's outputs when `n.op` is `GridSample`.
pub(super) fn run(n: &Node) -> Result<Option<Vec<Tensor>>> {
    if n.op != "GridSample" {
        return Ok(None);
    }
    n.check_attrs(&["align_corners", "mode", "padding_mode"])?;
    let (x, grid) = (n.input(0)?, n.input(1)?);
    let (xs, gs) = (x.shape(), grid.shape());
    let k = xs.len().saturating_sub(2);
    if xs.len() < 3 || gs.len() != xs.len() || gs[0] != xs[0] || gs[gs.len() - 1] != k {
        return Err(n.err(format!(
            "X {xs:?} must be (N, C, D1..Dk) with k >= 1 and grid {gs:?} (N, O1..Ok, k)"
        )));
    }
    if !x.dtype().is_float() || !grid.dtype().is_float() {
        return Err(n.err(format!(
            "X ({}) and grid ({}) must be floats",
            x.dtype(),
            grid.dtype()
        )));
    }
    let default_mode = if n.opset >= 20 { "linear" } else { "bilinear" };
    let mode = match n.string("mode", default_mode).as_str() {
        "nearest" => Mode::Nearest,
        "bilinear" | "linear" => Mode::Linear,
        "bicubic" | "cubic" => Mode::Cubic,
        m => return Err(n.err(format!("mode {m:?} is not supported"))),
    };
    let padding = match n.string("padding_mode", "zeros").as_str() {
        "zeros" => Padding::Zeros,
        "border" => Padding::Border,
        "reflection" => Padding::Reflection,
        p => return Err(n.err(format!("padding_mode {p:?} is not supported"))),
    };
    let align = n.int("align_corners", 0) != 0;
    let (batch, channels) = (xs[0], xs[1]);
    let spatial = &xs[2..];
    let out_spatial = &gs[1..gs.len() - 1];
    let points: usize = out_spatial.iter().product();
    let mut out_shape = vec![batch, channels];
    out_shape.extend_from_slice(out_spatial);
    if batch * channels * points == 0 {
        return Ok(Some(vec![
            Tensor::zeros(&out_shape, x.dtype()).to(n.device()),
        ]));
    }
    if spatial.contains(&0) {
        return Err(n.err(format!("X {xs:?} has no pixels to sample")));
    }
    // Coordinates in the grid's precision, at least f32 (like the reference's float32 math).
    let calc = if grid.dtype() == DType::FLOAT64 {
        DType::FLOAT64
    } else {
        DType::FLOAT32
    };
    let g = grid.reshape(&[batch, points, k]).cast(calc);
    // Per spatial axis (X's order), its taps; the grid lists coordinates innermost axis first.
    let mut per_axis: Vec<Vec<Tap>> = Vec::with_capacity(k);
    for (axis, &len) in spatial.iter().enumerate() {
        let c = k - 1 - axis;
        let coord = g
            .shrink(&[(0, batch), (0, points), (c, c + 1)])
            .reshape(&[batch, points]);
        per_axis.push(axis_taps(&coord, len, mode, padding, align));
    }
    // Every combination of one tap per axis: one gather from X flattened over its pixels.
    let pixels: usize = spatial.iter().product();
    let flat_x = x.reshape(&[batch, channels, pixels]);
    let strides: Vec<usize> = (0..k).map(|a| spatial[a + 1..].iter().product()).collect();
    let mut acc: Option<Tensor> = None;
    let mut choice = vec![0usize; k];
    loop {
        let first = &per_axis[0][choice[0]];
        let mut index = first.index.clone() * strides[0] as i64;
        let mut weight = first.weight.clone();
        let mut inside = first.inside.clone();
        for a in 1..k {
            let tap = &per_axis[a][choice[a]];
            index = index + &tap.index * strides[a] as i64;
            weight = weight * &tap.weight;
            inside = match (inside, &tap.inside) {
                (Some(m), Some(t)) => Some(m.logical_and(t)),
                (m, t) => m.or_else(|| t.clone()),
            };
        }
        let index = index
            .reshape(&[batch, 1, points])
            .expand(&[batch, channels, points]);
        let mut pixel = flat_x.gather(2, &index).cast(calc);
        if let Some(m) = inside {
            pixel = m
                .reshape(&[batch, 1, points])
                .where_(&pixel, 0.0)
                .cast(calc);
        }
        let value = pixel * weight.reshape(&[batch, 1, points]);
        acc = Some(match acc {
            Some(a) => a + value,
            None => value,
        });
        // the next combination, the last axis fastest
        let mut a = k;
        loop {
            if a == 0 {
                let out = acc.expect("at least one combination").reshape(&out_shape);
                return Ok(Some(vec![out.cast(x.dtype())]));
            }
            a -= 1;
            choice[a] += 1;
            if choice[a] < per_axis[a].len() {
                break;
            }
            choice[a] = 0;
        }
    }
}

/// The taps along one axis of `len` pixels for normalized coordinates `coord` (N, P).
fn axis_taps(coord: &Tensor, len: usize, mode: Mode, padding: Padding, align: bool) -> Vec<Tap> {
    let size = len as f64;
    // denormalized, in the reference's order of operations
    let mut x = if align {
        (coord + 1.0) / 2.0 * (size - 1.0)
    } else {
        ((coord + 1.0) * size - 1.0) / 2.0
    };
    if mode == Mode::Nearest {
        x = x.round(); // half to even, as PyTorch
    }
    let (lo, hi) = if align {
        (0.0, size - 1.0)
    } else {
        (-0.5, size - 0.5)
    };
    let outside = x.lt(lo).logical_or(&x.gt(hi));
    x = match padding {
        Padding::Zeros => x,
        Padding::Border => outside.where_(&x.clip(Some(0.0), Some(size - 1.0)), &x),
        Padding::Reflection => outside.where_(&reflect(&x, lo, hi), &x),
    };
    let pixel = |i: Tensor, weight: Tensor| -> Tap {
        let (index, inside) = match padding {
            Padding::Zeros => {
                let inside = i.ge(0.0).logical_and(&i.lt(size));
                (i, Some(inside))
            }
            Padding::Border => (i, None),
            Padding::Reflection => (reflect(&i, lo, hi).trunc(), None),
        };
        // inside the axis (zeros: masked out there by `inside`)
        let index = index.clip(Some(0.0), Some(size - 1.0)).cast(DType::INT32);
        Tap {
            index,
            weight,
            inside,
        }
    };
    match mode {
        Mode::Nearest => vec![pixel(x.trunc(), Tensor::ones_like(&x))],
        Mode::Linear => {
            let x0 = x.floor();
            let t = &x - &x0;
            vec![pixel(x0.clone(), t.neg() + 1.0), pixel(x0 + 1.0, t)]
        }
        Mode::Cubic => {
            let x0 = x.floor();
            let t = &x - &x0;
            let [w0, w1, w2, w3] = cubic_coeffs(&t);
            vec![
                pixel(&x0 - 1.0, w0),
                pixel(x0.clone(), w1),
                pixel(&x0 + 1.0, w2),
                pixel(x0 + 2.0, w3),
            ]
        }
    }
}

/// Keys' cubic convolution weights (a = -0.75, as PyTorch) of the four taps around a point at
/// `t` in [0, 1) past the second one.
fn cubic_coeffs(t: &Tensor) -> [Tensor; 4] {
    const A: f64 = -0.75;
    let outer = |d: Tensor| ((&d * A - 5.0 * A) * &d + 8.0 * A) * &d - 4.0 * A;
    let inner = |d: Tensor| ((&d * (A + 2.0) - (A + 3.0)) * &d) * &d + 1.0;
    let one_minus = t.neg() + 1.0;
    [
        outer(t + 1.0),
        inner(t.clone()),
        inner(one_minus.clone()),
        outer(one_minus + 1.0),
    ]
}

/// `x` reflected by the nearer border until inside `[lo, hi]` (the reference's `_gs_reflect`);
/// values inside are kept.
fn reflect(x: &Tensor, lo: f64, hi: f64) -> Tensor {
    let range = hi - lo;
    let below = x.lt(lo);
    let above = x.gt(hi);
    if range <= 0.0 {
        // a one-pixel axis with aligned corners: everything reflects onto it
        return below.logical_or(&above).where_(lo, x).cast(x.dtype());
    }
    let dist = below.where_(&(x.neg() + lo), &(x - hi));
    let folds = (&dist / range).floor();
    let rest = &dist - &(&folds * range);
    let half = &folds * 0.5;
    let even = half.eq(&half.floor());
    // below and an even number of folds, or above and an odd one, ends up measured from lo
    let from_lo = below.eq(&even);
    let reflected = from_lo.where_(&(&rest + lo), &(rest.neg() + hi));
    below.logical_or(&above).where_(&reflected, x)
}
