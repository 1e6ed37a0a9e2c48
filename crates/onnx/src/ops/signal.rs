//! Signal ops: `DFT` (forward, inverse, one-sided, any axis and length) and `STFT`.
//!
//! Signals are real (last dim 1) or complex (last dim 2: real, imaginary). A transform along one
//! axis is two matmuls — the real and imaginary parts by host-built cosine and sine matrices
//! (entries in f64, angles reduced exactly as `k * t mod n`) — so it takes the GEMM path and every
//! device runs it.

use std::f64::consts::PI;

use tinygrad_tensor::{DType, Tensor};

use crate::error::Result;
use crate::node::Node;

/// The node's outputs when `n.op` is `DFT` or `STFT`.
pub(super) fn run(n: &Node) -> Result<Option<Vec<Tensor>>> {
    match n.op {
        "DFT" => dft(n).map(|t| Some(vec![t])),
        "STFT" => stft(n).map(|t| Some(vec![t])),
        _ => Ok(None),
    }
}

/// The most entries of one transform matrix (64 Mi: 256 MiB in f32, a length of 8192): larger
/// transforms are an `Err` rather than an allocation that fails (the direct DFT is O(n^2)).
const MAX_MATRIX: usize = 1 << 26;

/// Which transform a matrix pair computes.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// `X[k] = sum x[t] e^{-2 pi i k t / n}`; `bins` outputs.
    Forward,
    /// `x[t] = 1/n sum X[k] e^{2 pi i k t / n}`.
    Inverse,
    /// The inverse of a one-sided spectrum (numpy's `irfft`): the missing half is the conjugate
    /// mirror; the output is real.
    InverseReal,
}

fn dft(n: &Node) -> Result<Tensor> {
    let x = n.input(0)?;
    let shape = x.shape();
    let rank = shape.len();
    let axis = if n.opset >= 20 {
        n.check_attrs(&["inverse", "onesided"])?;
        match n.ints_input(2)? {
            Some(v) if v.len() == 1 => v[0],
            None => -2,
            Some(v) => return Err(n.err(format!("axis {v:?}: expected one value"))),
        }
    } else {
        n.check_attrs(&["axis", "inverse", "onesided"])?;
        n.int("axis", 1)
    };
    if rank < 2 || !matches!(shape[rank - 1], 1 | 2) || !x.dtype().is_float() {
        return Err(n.err(format!(
            "input {shape:?} ({}) must be floats with a last dim of 1 (real) or 2 (complex)",
            x.dtype()
        )));
    }
    let axis = n.axis(axis, rank)?;
    if axis == rank - 1 {
        return Err(n.err(format!(
            "axis {axis} is the real/imaginary dim of input {shape:?}"
        )));
    }
    let (inverse, onesided) = (n.int("inverse", 0) != 0, n.int("onesided", 0) != 0);
    let length = match n.ints_input(1)? {
        Some(v) if v.len() == 1 && v[0] >= 1 => v[0] as usize,
        Some(v) => return Err(n.err(format!("dft_length {v:?}: expected one value >= 1"))),
        None if inverse && onesided => 2 * shape[axis].saturating_sub(1),
        None => shape[axis],
    };
    if length == 0 {
        return Err(n.err(format!(
            "input {shape:?}: a signal of length 0 along axis {axis}"
        )));
    }
    let kind = match (inverse, onesided) {
        (false, _) => Kind::Forward,
        (true, false) => Kind::Inverse,
        (true, true) => Kind::InverseReal,
    };
    let bins = if !inverse && onesided {
        length / 2 + 1
    } else {
        length
    };
    // numpy's fft crops or zero-pads the input to the transform's length (for the one-sided
    // inverse, its half spectrum)
    let taken = if kind == Kind::InverseReal {
        length / 2 + 1
    } else {
        length
    };
    if taken.saturating_mul(if inverse { length } else { bins }) > MAX_MATRIX {
        return Err(n.err(format!(
            "a transform of length {length}: its matrices are too large for a direct DFT"
        )));
    }
    let (re, im) = parts(x);
    let (re, im) = (
        fit(&re.transpose(axis as isize, -1), taken),
        im.map(|t| fit(&t.transpose(axis as isize, -1), taken)),
    );
    let (out_re, out_im) = transform(&re, im.as_ref(), length, bins, kind, n.device());
    let back = |t: Tensor| t.transpose(axis as isize, -1).unsqueeze(-1);
    let out = match out_im {
        Some(im) => Tensor::cat(&[&back(out_re), &back(im)], -1),
        None => back(out_re),
    };
    Ok(out.cast(x.dtype()))
}

/// The real part and (for a complex signal) the imaginary part, without the last dim, in the
/// compute dtype (f64 stays, other floats become f32).
fn parts(x: &Tensor) -> (Tensor, Option<Tensor>) {
    let calc = if x.dtype() == DType::FLOAT64 {
        DType::FLOAT64
    } else {
        DType::FLOAT32
    };
    let shape = x.shape();
    let rank = shape.len();
    let part = |c: usize| {
        let mut bounds: Vec<(usize, usize)> = shape.iter().map(|&d| (0, d)).collect();
        bounds[rank - 1] = (c, c + 1);
        x.shrink(&bounds).squeeze(Some(-1)).cast(calc)
    };
    let im = (shape[rank - 1] == 2).then(|| part(1));
    (part(0), im)
}

/// `t` cropped or zero-padded to `len` along its last dim.
fn fit(t: &Tensor, len: usize) -> Tensor {
    let shape = t.shape();
    let last = shape.len() - 1;
    let have = shape[last];
    if have == len {
        return t.clone();
    }
    if have > len {
        let mut bounds: Vec<(usize, usize)> = shape.iter().map(|&d| (0, d)).collect();
        bounds[last] = (0, len);
        return t.shrink(&bounds);
    }
    let mut widths = vec![(0usize, 0usize); shape.len()];
    widths[last] = (0, len - have);
    t.pad(&widths, 0.0)
}

/// The transform of the signal `re + i im` along its last dim (already fitted to the input
/// length): the output's real part and, unless `kind` is [`Kind::InverseReal`], its imaginary
/// part, `bins` values each (`length` for the inverses).
fn transform(
    re: &Tensor,
    im: Option<&Tensor>,
    length: usize,
    bins: usize,
    kind: Kind,
    device: &str,
) -> (Tensor, Option<Tensor>) {
    let inputs = re.shape()[re.shape().len() - 1];
    let outputs = if kind == Kind::Forward { bins } else { length };
    // (inputs, outputs) matrices of cos and sin of 2 pi (input index * output index) / length
    let mut cos = Vec::with_capacity(inputs * outputs);
    let mut sin = Vec::with_capacity(inputs * outputs);
    for i in 0..inputs {
        for o in 0..outputs {
            let turn = ((i as u128 * o as u128) % length as u128) as f64 / length as f64;
            let (s, c) = (2.0 * PI * turn).sin_cos();
            // the one-sided inverse counts each bin but DC and Nyquist twice (its mirror)
            let weight = match kind {
                Kind::Forward => 1.0,
                Kind::Inverse => 1.0 / length as f64,
                Kind::InverseReal if i == 0 || 2 * i == length => 1.0 / length as f64,
                Kind::InverseReal => 2.0 / length as f64,
            };
            cos.push(c * weight);
            sin.push(s * weight);
        }
    }
    // made in the compute dtype on the host (a device may have no f64)
    let matrix = |v: Vec<f64>| {
        if re.dtype() == DType::FLOAT64 {
            Tensor::from_slice_on(&v, &[inputs, outputs], device)
        } else {
            let v: Vec<f32> = v.iter().map(|&x| x as f32).collect();
            Tensor::from_slice_on(&v, &[inputs, outputs], device)
        }
    };
    let (cos, sin) = (matrix(cos), matrix(sin));
    match kind {
        // (re + i im)(cos - i sin) = re cos + im sin + i (im cos - re sin)
        Kind::Forward => {
            let out_re = re.matmul(&cos);
            let out_im = re.matmul(&sin).neg();
            match im {
                Some(im) => (out_re + im.matmul(&sin), Some(out_im + im.matmul(&cos))),
                None => (out_re, Some(out_im)),
            }
        }
        // (re + i im)(cos + i sin) = re cos - im sin + i (re sin + im cos)
        Kind::Inverse => {
            let out_re = re.matmul(&cos);
            let out_im = re.matmul(&sin);
            match im {
                Some(im) => (out_re - im.matmul(&sin), Some(out_im + im.matmul(&cos))),
                None => (out_re, Some(out_im)),
            }
        }
        Kind::InverseReal => {
            let out = re.matmul(&cos);
            match im {
                Some(im) => (out - im.matmul(&sin), None),
                None => (out, None),
            }
        }
    }
}

/// ONNX's `STFT`: frames of the window's length every `frame_step` samples, each multiplied by
/// the window and transformed at `frame_length`; (batch, frames, bins, 2).
fn stft(n: &Node) -> Result<Tensor> {
    n.check_attrs(&["onesided"])?;
    let x = n.input(0)?;
    let shape = x.shape();
    if shape.len() != 3 || !matches!(shape[2], 1 | 2) || !x.dtype().is_float() {
        return Err(n.err(format!(
            "signal {shape:?} ({}) must be floats (batch, length, 1 or 2)",
            x.dtype()
        )));
    }
    let step = match n.ints_input(1)? {
        Some(v) if v.len() == 1 && v[0] >= 1 => v[0] as usize,
        v => return Err(n.err(format!("frame_step {v:?}: expected one value >= 1"))),
    };
    let window = n.opt_input(2);
    if let Some(w) = window
        && (w.shape().len() != 1 || w.shape()[0] == 0)
    {
        return Err(n.err(format!("window {:?}: expected 1-D, non-empty", w.shape())));
    }
    let (batch, len) = (shape[0], shape[1]);
    // the transform's length: frame_length, else the window's, else the whole signal; frames
    // are the window's length (the whole transform's without one), cropped or zero-padded to it
    let frame = match (n.ints_input(3)?, window) {
        (Some(v), _) if v.len() == 1 && v[0] >= 1 => v[0] as usize,
        (Some(v), _) => return Err(n.err(format!("frame_length {v:?}: expected one value >= 1"))),
        (None, Some(w)) => w.shape()[0],
        (None, None) => len,
    };
    let span = window.map_or(frame, |w| w.shape()[0]);
    if len < frame || frame == 0 {
        return Err(n.err(format!(
            "signal of length {len} is shorter than a frame ({frame})"
        )));
    }
    let frames = (len - frame) / step + 1;
    let onesided = n.int("onesided", 1) != 0;
    let bins = if onesided { frame / 2 + 1 } else { frame };
    if bins.saturating_mul(frame) > MAX_MATRIX {
        return Err(n.err(format!(
            "a frame of {frame}: the transform's matrices are too large for a direct DFT"
        )));
    }
    let (re, im) = parts(x);
    // (batch, frames, span): each frame a shrink of the signal (zeros past its end), stacked,
    // weighted by the window, then fitted to the transform's length
    let framed = |t: &Tensor| {
        let rows: Vec<Tensor> = (0..frames)
            .map(|f| {
                let (start, end) = (f * step, (f * step + span).min(len));
                let row = t.shrink(&[(0, batch), (start, end)]);
                if end - start < span {
                    row.pad(&[(0, 0), (0, span - (end - start))], 0.0)
                } else {
                    row
                }
            })
            .collect();
        let refs: Vec<&Tensor> = rows.iter().collect();
        let stacked = Tensor::stack(&refs, 1);
        let weighted = match window {
            Some(w) => stacked * w.cast(t.dtype()),
            None => stacked,
        };
        fit(&weighted, frame)
    };
    let (re, im) = (framed(&re), im.map(|t| framed(&t)));
    let (out_re, out_im) = transform(&re, im.as_ref(), frame, bins, Kind::Forward, n.device());
    let out_im = out_im.expect("a forward transform has an imaginary part");
    Ok(Tensor::stack(&[&out_re, &out_im], -1).cast(x.dtype()))
}
