//! Quantization: `QuantizeLinear` and `DequantizeLinear` (per tensor, per axis and blocked
//! scales; integer and float8 quantized types), `DynamicQuantizeLinear`, and `MatMulInteger`
//! (8-bit products accumulated exactly in int32).

use tinygrad_tensor::{DType, Tensor};

use crate::error::Result;
use crate::narrow::{self, Narrow, RoundMode};
use crate::node::Node;
use crate::tensor_proto::dtype_of;

/// The node's outputs when `n.op` is one of this file's ops.
pub(super) fn run(n: &Node) -> Result<Option<Vec<Tensor>>> {
    match n.op {
        "DequantizeLinear" => {
            n.check_attrs(&["axis", "block_size", "output_dtype"])?;
            let x = n.input(0)?;
            let scale = n.input(1)?;
            let s = broadcast_param(n, scale, x)?;
            let v = x.cast(DType::FLOAT32);
            let v = match n.opt_input(2) {
                Some(zp) => v - broadcast_param(n, zp, x)?.cast(DType::FLOAT32),
                None => v,
            };
            let out = if n.has("output_dtype") && n.int("output_dtype", 0) != 0 {
                dtype_of(n.int("output_dtype", 1) as i32).map_err(|e| n.err(e))?
            } else {
                scale.dtype()
            };
            Ok(Some(vec![(v * s.cast(DType::FLOAT32)).cast(out)]))
        }
        "QuantizeLinear" => {
            n.check_attrs(&[
                "axis",
                "block_size",
                "output_dtype",
                "saturate",
                "precision",
            ])?;
            let x = n.input(0)?;
            let s = broadcast_param(n, n.input(1)?, x)?;
            let zp = n.opt_input(2);
            let narrow_out = n.narrow_input(2).or_else(|| {
                Narrow::of(n.int("output_dtype", 0) as i32).filter(|_| n.has("output_dtype"))
            });
            if let Some(to) = narrow_out {
                let mut v = scaled(n, x, &s, to.int_range().is_some(), DType::FLOAT32)?;
                if let Some(z) = zp {
                    v = v + broadcast_param(n, z, x)?.cast(DType::FLOAT32);
                }
                let q = match to.int_range() {
                    // round half to even, the zero point, then saturate to the type's range
                    Some((lo, hi)) => v
                        .clip(Some(lo as f64), Some(hi as f64))
                        .cast(to.container()),
                    None => narrow::cast_to(
                        &v,
                        to,
                        n.int("saturate", 1) != 0,
                        RoundMode::Up,
                        n.device(),
                    )
                    .map_err(|e| n.err(e))?,
                };
                return Ok(Some(vec![q]));
            }
            let out = match zp {
                Some(z) => z.dtype(),
                None if n.has("output_dtype") && n.int("output_dtype", 0) != 0 => {
                    dtype_of(n.int("output_dtype", 2) as i32).map_err(|e| n.err(e))?
                }
                None => DType::UINT8,
            };
            if out == DType::FP8E4M3 || out == DType::FP8E5M2 {
                let v = scaled(n, x, &s, false, DType::FLOAT32)?;
                let max = if out == DType::FP8E4M3 {
                    448.0
                } else {
                    57344.0
                };
                let v = if n.int("saturate", 1) != 0 {
                    v.clip(Some(-max), Some(max))
                } else {
                    v
                };
                return Ok(Some(vec![v.cast(out)]));
            }
            if !out.is_int() {
                return Err(n.err(format!("quantizing to {out} is not supported")));
            }
            let (lo, hi) = int_range(out)
                .ok_or_else(|| n.err(format!("quantizing to {out} is not supported")))?;
            // round half to even, then the zero point, then saturate to the type's range (in
            // f64 for 32-bit outputs, whose values f32 would round)
            let wide = if out.itemsize() >= 4 {
                DType::FLOAT64
            } else {
                DType::FLOAT32
            };
            let mut q = scaled(n, x, &s, true, wide)?;
            if let Some(z) = zp {
                q = q + broadcast_param(n, z, x)?.cast(wide);
            }
            Ok(Some(vec![q.clip(Some(lo), Some(hi)).cast(out)]))
        }
        "DynamicQuantizeLinear" => {
            n.check_attrs(&[])?;
            let x = n.input(0)?.cast(DType::FLOAT32);
            let all = tinygrad_tensor::Axis::All;
            let lo = x.min(all.clone()).minimum(0.0);
            let hi = x.max(all).maximum(0.0);
            let scale = (&hi - &lo) / 255.0;
            let zp = (lo.neg() / &scale).round().clip(Some(0.0), Some(255.0));
            let y = ((&x / &scale).round() + &zp)
                .clip(Some(0.0), Some(255.0))
                .cast(DType::UINT8);
            Ok(Some(vec![y, scale, zp.cast(DType::UINT8)]))
        }
        "MatMulInteger" => {
            n.check_attrs(&[])?;
            let (a, b) = (n.input(0)?, n.input(1)?);
            for (i, t) in [(0, a), (1, b)] {
                if t.dtype() != DType::UINT8 && t.dtype() != DType::INT8 {
                    return Err(n.err(format!(
                        "input {i} is {}: expected uint8 or int8",
                        t.dtype()
                    )));
                }
            }
            if a.ndim() == 0 || b.ndim() == 0 {
                return Err(n.err(format!(
                    "inputs of shapes {:?} and {:?}: expected at least one dim each",
                    a.shape(),
                    b.shape()
                )));
            }
            // a's zero point: a scalar or one per row; b's: a scalar or one per column
            let rows = if a.ndim() >= 2 {
                a.shape()[a.ndim() - 2]
            } else {
                1
            };
            let cols = b.shape()[b.ndim() - 1];
            let zero_point = |i: usize, t: &Tensor, per: usize, view: &[isize]| match n.opt_input(i)
            {
                None => Ok(None),
                Some(z) if z.dtype() != t.dtype() => Err(n.err(format!(
                    "zero point {i} is {}, its input {}",
                    z.dtype(),
                    t.dtype()
                ))),
                Some(z) if z.numel() == 1 && z.ndim() <= 1 => {
                    Ok(Some(z.reshape(&[] as &[isize]).cast(DType::INT32)))
                }
                Some(z) if z.ndim() == 1 && z.shape()[0] == per => {
                    Ok(Some(z.reshape(view).cast(DType::INT32)))
                }
                Some(z) => Err(n.err(format!(
                    "zero point {i} of shape {:?}: expected a scalar or {per} values",
                    z.shape()
                ))),
            };
            let mut a32 = a.cast(DType::INT32);
            if let Some(z) = zero_point(2, a, rows, &[rows as isize, 1])? {
                a32 = a32 - z;
            }
            let mut b32 = b.cast(DType::INT32);
            if let Some(z) = zero_point(3, b, cols, &[cols as isize])? {
                b32 = b32 - z;
            }
            let terms = (1 << 24) / (magnitude(n, a, 2) * magnitude(n, b, 3));
            Ok(Some(vec![integer_matmul(&a32, &b32, terms.max(1))]))
        }
        _ => Ok(None),
    }
}

/// The largest magnitude of `t - zero point` (input `zp` of `n`) for an 8-bit `t`: from the
/// zero point's values when they are known before the run, else the type's widest.
fn magnitude(n: &Node, t: &Tensor, zp: usize) -> usize {
    let (lo, hi) = if t.dtype() == DType::INT8 {
        (-128i64, 127i64)
    } else {
        (0, 255)
    };
    let zps: Vec<i64> = match (n.opt_input(zp), n.host_input(zp)) {
        (None, _) => vec![0],
        (Some(_), Some(h)) => h.ints.clone().unwrap_or_default(),
        (Some(_), None) => vec![lo, hi],
    };
    zps.iter()
        .map(|&z| (hi - z).abs().max((z - lo).abs()))
        .max()
        .unwrap_or(hi - lo) as usize
}

/// `a @ b` for int32 tensors of 8-bit values (zero points removed), exactly: on the float GEMM
/// path in float32, in runs of `terms` products (whose sums stay below 2^24, exact in float32),
/// the runs summed in int32 (an int32 matmul is a loop of scalar kernels).
fn integer_matmul(a: &Tensor, b: &Tensor, terms: usize) -> Tensor {
    let k = a.shape()[a.ndim() - 1];
    if a.ndim() < 2 || b.ndim() < 2 {
        return a.matmul(b);
    }
    let (af, bf) = (a.cast(DType::FLOAT32), b.cast(DType::FLOAT32));
    if k <= terms {
        return af.matmul(&bf).cast(DType::INT32);
    }
    // [.., M, K] -> [.., C, M, T] and [.., K, N] -> [.., C, T, N], K padded with zeros
    let chunks = k.div_ceil(terms);
    let terms = k.div_ceil(chunks);
    let padded = chunks * terms;
    let (ar, br) = (a.ndim(), b.ndim());
    let mut pad_a = vec![(0, 0); ar];
    pad_a[ar - 1] = (0, padded - k);
    let mut pad_b = vec![(0, 0); br];
    pad_b[br - 2] = (0, padded - k);
    let (af, bf) = (af.pad(&pad_a, 0.0), bf.pad(&pad_b, 0.0));
    let m = a.shape()[ar - 2];
    let mut shape_a: Vec<isize> = a.shape()[..ar - 2].iter().map(|&d| d as isize).collect();
    shape_a.extend([m as isize, chunks as isize, terms as isize]);
    let mut order: Vec<isize> = (0..ar as isize - 2).collect();
    order.extend([ar as isize - 1, ar as isize - 2, ar as isize]);
    let ac = af.reshape(&shape_a).permute(&order);
    let n = b.shape()[br - 1];
    let mut shape_b: Vec<isize> = b.shape()[..br - 2].iter().map(|&d| d as isize).collect();
    shape_b.extend([chunks as isize, terms as isize, n as isize]);
    let bc = bf.reshape(&shape_b);
    // [.., C, M, N]: each exact; summed over the chunks in int32
    let partial = ac.matmul(&bc).cast(DType::INT32);
    let c_axis = partial.ndim() as isize - 3;
    partial.sum(c_axis)
}

fn int_range(dt: DType) -> Option<(f64, f64)> {
    Some(match dt {
        d if d == DType::UINT8 => (0.0, 255.0),
        d if d == DType::INT8 => (-128.0, 127.0),
        d if d == DType::UINT16 => (0.0, 65535.0),
        d if d == DType::INT16 => (-32768.0, 32767.0),
        d if d == DType::INT32 => (-2147483648.0, 2147483647.0),
        _ => return None,
    })
}

/// `x / scale`, rounded half to even if `round`, as `wide`: the division (and the rounding) done
/// in `precision`'s float type (opset 23+), or else as the reference's numpy does — in their
/// common type when `x` and the scale share one (float16 by float16 divides in float16), float64
/// when either is or `x` is an integer, float32 otherwise.
fn scaled(n: &Node, x: &Tensor, scale: &Tensor, round: bool, wide: DType) -> Result<Tensor> {
    let calc = if n.has("precision") && n.int("precision", 0) != 0 {
        let p = dtype_of(n.int("precision", 0) as i32).map_err(|e| n.err(e))?;
        if !p.is_float() {
            return Err(n.err(format!("precision {p}: expected a float type")));
        }
        p
    } else if x.dtype() == scale.dtype() && x.dtype().is_float() {
        x.dtype()
    } else if x.dtype() == DType::FLOAT64 || scale.dtype() == DType::FLOAT64 || x.dtype().is_int() {
        DType::FLOAT64
    } else {
        DType::FLOAT32
    };
    let q = x.cast(calc) / scale.cast(calc);
    Ok(if round { q.round() } else { q }.cast(wide))
}

/// A scale or zero point shaped to broadcast over `x`: a scalar, one value per `axis` entry,
/// or blocks of `block_size` along `axis` (the parameter has `x`'s rank).
fn broadcast_param(n: &Node, p: &Tensor, x: &Tensor) -> Result<Tensor> {
    if p.numel() == 1 && p.ndim() <= 1 {
        return Ok(p.reshape(&[] as &[isize]));
    }
    let rank = x.ndim();
    let axis = n.axis(n.int("axis", 1), rank)?;
    let block = n.int("block_size", 0);
    if block > 0 {
        if p.ndim() != rank {
            return Err(n.err(format!(
                "blocked scale {:?} for input {:?}: expected the same rank",
                p.shape(),
                x.shape()
            )));
        }
        let rep = p.repeat_interleave(block as usize, Some(axis as isize));
        let mut bounds: Vec<(usize, usize)> = rep.shape().iter().map(|&d| (0, d)).collect();
        bounds[axis] = (0, x.shape()[axis].min(rep.shape()[axis]));
        return Ok(rep.shrink(&bounds));
    }
    if p.ndim() != 1 || p.shape()[0] != x.shape()[axis] {
        return Err(n.err(format!(
            "scale {:?} for input {:?} along axis {axis}",
            p.shape(),
            x.shape()
        )));
    }
    let mut view = vec![1isize; rank];
    view[axis] = p.shape()[0] as isize;
    Ok(p.reshape(&view))
}
