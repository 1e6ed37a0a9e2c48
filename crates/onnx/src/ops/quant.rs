//! Quantization: `QuantizeLinear` and `DequantizeLinear` (per tensor, per axis and blocked
//! scales; integer and float8 quantized types), `DynamicQuantizeLinear`, and `MatMulInteger`
//! (8-bit products accumulated exactly in int32).

use indexmap::IndexMap;
use std::collections::HashMap;
use tinygrad_tensor::nn::integer::{Int8Weight, matmul_integer};
use tinygrad_tensor::{DType, Tensor};

use crate::error::OnnxError;
use crate::proto::GraphProto;

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
            let zero_point = |i: usize, t: &Tensor, per: usize| match n.opt_input(i) {
                None => Ok(()),
                Some(z) if z.dtype() != t.dtype() => Err(n.err(format!(
                    "zero point {i} is {}, its input {}",
                    z.dtype(),
                    t.dtype()
                ))),
                Some(z) if z.numel() == 1 && z.ndim() <= 1 => Ok(()),
                Some(z) if z.ndim() == 1 && z.shape()[0] == per => Ok(()),
                Some(z) => Err(n.err(format!(
                    "zero point {i} of shape {:?}: expected a scalar or {per} values",
                    z.shape()
                ))),
            };
            zero_point(2, a, rows)?;
            zero_point(3, b, cols)?;
            let y = match n.int8_weight() {
                Some(w) => w.matmul(a, n.opt_input(2)),
                None => matmul_integer(a, b, n.opt_input(2), n.opt_input(3)),
            };
            Ok(Some(vec![y]))
        }
        _ => Ok(None),
    }
}

/// The `MatMulInteger` weights of `graph` prepared once ([`Int8Weight`]: packed for the CPU's
/// integer multiply-adds), by each node's first output: those whose `b` is a 2-D 8-bit
/// initializer and whose `b` zero point is absent or an initializer that fits it. Other nodes
/// multiply as they run (and report what is wrong with their inputs there).
pub(crate) fn prepare_weights(
    graph: &GraphProto,
    initializers: &IndexMap<String, Tensor>,
    narrow: &HashMap<String, Narrow>,
) -> Result<HashMap<String, Int8Weight>> {
    let mut out = HashMap::new();
    for p in &graph.node {
        if p.op_type.as_deref() != Some("MatMulInteger")
            || p.domain
                .as_deref()
                .is_some_and(|d| !d.is_empty() && d != "ai.onnx")
        {
            continue;
        }
        let init = |i: usize| {
            p.input
                .get(i)
                .filter(|name| !name.is_empty() && !narrow.contains_key(*name))
                .and_then(|name| initializers.get(name))
        };
        let (Some(b), Some(first)) = (init(1), p.output.first()) else {
            continue;
        };
        let zp = init(3);
        let zp_given = p.input.get(3).is_some_and(|name| !name.is_empty());
        let int8 = |t: &Tensor| t.dtype() == DType::UINT8 || t.dtype() == DType::INT8;
        let fits = int8(b)
            && b.ndim() == 2
            && match zp {
                None => !zp_given,
                Some(z) => {
                    z.dtype() == b.dtype()
                        && z.ndim() <= 1
                        && (z.numel() == 1 || z.numel() == b.shape()[1])
                }
            };
        if !fits {
            continue;
        }
        let w = Int8Weight::new(b, zp).map_err(|e| OnnxError::Node {
            node: p
                .name
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| first.clone()),
            op: "MatMulInteger".into(),
            message: format!("preparing its weight: {e}"),
        })?;
        out.insert(first.clone(), w);
    }
    Ok(out)
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
