//! Movement, indexing and creation ops: `Reshape`, `Transpose`, `Slice`, `Gather`, `Concat`,
//! `Split`, `Pad`, `Expand`, `Constant`, `Range`, ...

use tinygrad_tensor::{DType, PadMode, Tensor, broadcast_shape};

use crate::error::Result;
use crate::node::Node;
use crate::tensor_proto::dtype_of;

/// The node's outputs when `n.op` is one of this file's ops.
pub(super) fn run(n: &Node) -> Result<Option<Vec<Tensor>>> {
    let one = |t: Tensor| Ok(Some(vec![t]));
    match n.op {
        "Reshape" => {
            n.check_attrs(&["allowzero"])?;
            let x = n.input(0)?;
            let shape = n
                .ints_input(1)?
                .ok_or_else(|| n.err("the shape input is required"))?;
            let allowzero = n.int("allowzero", 0) != 0;
            let xs = x.shape();
            let mut out: Vec<isize> = Vec::with_capacity(shape.len());
            for (i, &d) in shape.iter().enumerate() {
                out.push(if d == 0 && !allowzero {
                    *xs.get(i).ok_or_else(|| {
                        n.err(format!("shape {shape:?}: 0 at {i} copies no dim of {xs:?}"))
                    })? as isize
                } else {
                    d as isize
                });
            }
            one(x.reshape(&out))
        }
        "Transpose" => {
            n.check_attrs(&["perm"])?;
            let x = n.input(0)?;
            let rank = x.ndim();
            let perm: Vec<isize> = match n.ints("perm") {
                Some(p) => p.iter().map(|&a| a as isize).collect(),
                None => (0..rank as isize).rev().collect(),
            };
            one(x.permute(&perm))
        }
        "Concat" => {
            n.check_attrs(&["axis"])?;
            let xs = n.present_inputs();
            let rank = xs.first().map_or(0, |x| x.ndim());
            let axis = n.axis(n.int("axis", 0), rank)?;
            // zero-size inputs contribute nothing (ONNX allows them, `cat` needs equal dims)
            let total: usize = xs
                .iter()
                .map(|x| x.shape().get(axis).copied().unwrap_or(0))
                .sum();
            let first = n.input(0)?;
            let xs: Vec<&Tensor> = xs.into_iter().filter(|x| x.numel() > 0).collect();
            match xs.as_slice() {
                // every input empty: an empty result whose axis adds up the inputs'
                [] => {
                    let mut shape = first.shape();
                    if let Some(d) = shape.get_mut(axis) {
                        *d = total;
                    }
                    one(Tensor::zeros(&shape, first.dtype()).to(n.device()))
                }
                [x] => one((*x).clone()),
                _ => one(Tensor::cat(&xs, axis as isize)),
            }
        }
        "Split" => {
            n.check_attrs(&["axis", "split", "num_outputs"])?;
            let x = n.input(0)?;
            let axis = n.axis(n.int("axis", 0), x.ndim())?;
            let dim = x.shape()[axis];
            let sizes: Vec<usize> = match n.ints_input(1)?.or_else(|| n.ints("split")) {
                Some(s) => s.iter().map(|&v| v.max(0) as usize).collect(),
                None => {
                    let parts = n.int("num_outputs", 0).max(0) as usize;
                    let parts = if parts == 0 { n.output_count() } else { parts };
                    if parts == 0 {
                        return Err(n.err("no outputs to split into"));
                    }
                    let each = dim.div_ceil(parts);
                    (0..parts)
                        .map(|i| each.min(dim.saturating_sub(i * each)))
                        .collect()
                }
            };
            if sizes.iter().sum::<usize>() != dim {
                return Err(n.err(format!(
                    "split sizes {sizes:?} don't add up to dim {dim} of {:?}",
                    x.shape()
                )));
            }
            let mut outs = Vec::new();
            let mut start = 0;
            for s in sizes {
                let mut b: Vec<(usize, usize)> = x.shape().iter().map(|&d| (0, d)).collect();
                b[axis] = (start, start + s);
                outs.push(x.shrink(&b));
                start += s;
            }
            Ok(Some(outs))
        }
        "Slice" => {
            let x = n.input(0)?;
            let (starts, ends, axes, steps) = if n.opset < 10 {
                n.check_attrs(&["starts", "ends", "axes"])?;
                (n.ints("starts"), n.ints("ends"), n.ints("axes"), None)
            } else {
                n.check_attrs(&[])?;
                (
                    n.ints_input(1)?,
                    n.ints_input(2)?,
                    n.ints_input(3)?,
                    n.ints_input(4)?,
                )
            };
            let starts = starts.ok_or_else(|| n.err("starts are required"))?;
            let ends = ends.ok_or_else(|| n.err("ends are required"))?;
            let rank = x.ndim();
            let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
            let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
            if ends.len() != starts.len()
                || axes.len() != starts.len()
                || steps.len() != starts.len()
            {
                return Err(n.err(format!("starts {starts:?}, ends {ends:?}, axes {axes:?}, steps {steps:?} differ in length")));
            }
            let mut t = x.clone();
            for i in 0..starts.len() {
                let axis = n.axis(axes[i], rank)?;
                t = slice_axis(n, &t, axis, starts[i], ends[i], steps[i])?;
            }
            one(t)
        }
        "Gather" => {
            n.check_attrs(&["axis"])?;
            let (x, idx) = (n.input(0)?, n.input(1)?);
            let axis = n.axis(n.int("axis", 0), x.ndim())?;
            one(gather(x, idx, axis))
        }
        "GatherElements" => {
            n.check_attrs(&["axis"])?;
            let (x, idx) = (n.input(0)?, n.input(1)?);
            let axis = n.axis(n.int("axis", 0), x.ndim())?;
            let dim = x.shape()[axis] as i64;
            let idx = idx.lt(0).where_(idx + dim, idx);
            one(x.gather(axis as isize, &idx))
        }
        "Squeeze" => {
            n.check_attrs(&["axes"])?;
            let x = n.input(0)?;
            let axes = axes_arg(n)?;
            let shape = x.shape();
            let keep: Vec<isize> = match axes {
                None => shape
                    .iter()
                    .filter(|&&d| d != 1)
                    .map(|&d| d as isize)
                    .collect(),
                Some(axes) => {
                    let axes: Vec<usize> = axes
                        .iter()
                        .map(|&a| n.axis(a, shape.len()))
                        .collect::<Result<_>>()?;
                    if let Some(&a) = axes.iter().find(|&&a| shape[a] != 1) {
                        return Err(n.err(format!("axis {a} of {shape:?} is not 1")));
                    }
                    shape
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| !axes.contains(i))
                        .map(|(_, &d)| d as isize)
                        .collect()
                }
            };
            one(x.reshape(&keep))
        }
        "Unsqueeze" => {
            n.check_attrs(&["axes"])?;
            let x = n.input(0)?;
            let axes = axes_arg(n)?;
            let axes = axes.ok_or_else(|| n.err("axes are required"))?;
            let rank = x.ndim() + axes.len();
            let mut axes: Vec<usize> = axes
                .iter()
                .map(|&a| n.axis(a, rank))
                .collect::<Result<_>>()?;
            axes.sort_unstable();
            axes.dedup();
            let mut shape: Vec<isize> = x.shape().iter().map(|&d| d as isize).collect();
            for a in axes {
                shape.insert(a, 1);
            }
            one(x.reshape(&shape))
        }
        "Shape" => {
            n.check_attrs(&["start", "end"])?;
            let shape: Vec<i64> = n.input(0)?.shape().iter().map(|&d| d as i64).collect();
            let r = shape.len() as i64;
            let clampi = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
            let (s, e) = (clampi(n.int("start", 0)), clampi(n.int("end", r)));
            let v: Vec<i64> = shape[s..e.max(s)].to_vec();
            one(ints_tensor(&v, n.device()))
        }
        "Size" => {
            n.check_attrs(&[])?;
            let numel = n.input(0)?.numel() as i64;
            one(Tensor::from_bytes(
                &numel.to_le_bytes(),
                DType::INT64,
                &[],
                n.device(),
            ))
        }
        "Expand" => {
            n.check_attrs(&[])?;
            let x = n.input(0)?;
            let shape: Vec<usize> = n
                .ints_input(1)?
                .ok_or_else(|| n.err("the shape input is required"))?
                .iter()
                .map(|&d| d.max(0) as usize)
                .collect();
            let out = broadcast_shape(&x.shape(), &shape).ok_or_else(|| {
                n.err(format!(
                    "shape {:?} doesn't broadcast to {shape:?}",
                    x.shape()
                ))
            })?;
            let mut padded: Vec<isize> = vec![1; out.len() - x.ndim()];
            padded.extend(x.shape().iter().map(|&d| d as isize));
            one(x.reshape(&padded).expand(&out))
        }
        "Flatten" => {
            n.check_attrs(&["axis"])?;
            let x = n.input(0)?;
            let shape = x.shape();
            // axis in [-rank, rank]: negative counts from the rank, not from rank + 1
            let r = shape.len() as i64;
            let a = n.int("axis", 1);
            let a = if a < 0 { a + r } else { a };
            if !(0..=r).contains(&a) {
                return Err(n.err(format!("axis {} for rank {r}", n.int("axis", 1))));
            }
            let axis = a as usize;
            let outer: usize = shape[..axis].iter().product();
            let inner: usize = shape[axis..].iter().product();
            one(x.reshape(&[outer, inner]))
        }
        "Tile" => {
            n.check_attrs(&[])?;
            let x = n.input(0)?;
            let reps = n
                .ints_input(1)?
                .ok_or_else(|| n.err("repeats are required"))?;
            if reps.len() != x.ndim() || reps.iter().any(|&r| r < 0) {
                return Err(n.err(format!("repeats {reps:?} for shape {:?}", x.shape())));
            }
            let reps: Vec<usize> = reps.iter().map(|&r| r as usize).collect();
            one(x.repeat(&reps))
        }
        "Constant" => {
            n.check_attrs(&[
                "value",
                "value_float",
                "value_floats",
                "value_int",
                "value_ints",
            ])?;
            if let Some(t) = n.tensor("value")? {
                return one(t);
            }
            let dev = n.device();
            if n.has("value_float") {
                let v = n.float("value_float", 0.0) as f32;
                return one(Tensor::from_bytes(
                    &v.to_le_bytes(),
                    DType::FLOAT32,
                    &[],
                    dev,
                ));
            }
            if let Some(v) = n.floats("value_floats") {
                let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                return one(Tensor::from_bytes(&b, DType::FLOAT32, &[v.len()], dev));
            }
            if n.has("value_int") {
                let v = n.int("value_int", 0);
                return one(Tensor::from_bytes(&v.to_le_bytes(), DType::INT64, &[], dev));
            }
            if let Some(v) = n.ints("value_ints") {
                return one(ints_tensor(&v, dev));
            }
            Err(n.err("no value attribute (string values are not supported)"))
        }
        "ConstantOfShape" => {
            n.check_attrs(&["value"])?;
            let shape: Vec<usize> = n
                .ints_input(0)?
                .ok_or_else(|| n.err("the shape input is required"))?
                .iter()
                .map(|&d| d.max(0) as usize)
                .collect();
            let value = match n.tensor("value")? {
                Some(v) => v.reshape(&[1isize]),
                None => Tensor::from_bytes(&0f32.to_le_bytes(), DType::FLOAT32, &[1], n.device()),
            };
            let mut ones: Vec<isize> = vec![1; shape.len()];
            if shape.is_empty() {
                return one(value.reshape(&ones).contiguous());
            }
            ones[0] = 1;
            one(value.reshape(&ones).expand(&shape).contiguous())
        }
        "Range" => {
            n.check_attrs(&[])?;
            let dtype = n.input(0)?.dtype();
            let vals: Vec<f64> = (0..3)
                .map(|i| {
                    n.floats_input(i)
                        .map(|v| v.and_then(|v| v.first().copied()).unwrap_or(0.0))
                })
                .collect::<Result<_>>()?;
            let (start, limit, delta) = (vals[0], vals[1], vals[2]);
            if delta == 0.0 {
                return Err(n.err("delta is 0"));
            }
            let count = ((limit - start) / delta).ceil().max(0.0) as usize;
            let data: Vec<f64> = (0..count).map(|i| start + i as f64 * delta).collect();
            let b: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
            one(Tensor::from_bytes(&b, DType::FLOAT64, &[count], n.device()).cast(dtype))
        }
        "Pad" => {
            n.check_attrs(&["mode", "pads", "value"])?;
            let x = n.input(0)?;
            let rank = x.ndim();
            let pads = if n.opset < 11 {
                n.ints("pads")
            } else {
                n.ints_input(1)?
            };
            let pads = pads.ok_or_else(|| n.err("pads are required"))?;
            let axes: Vec<usize> = match n.ints_input(3)? {
                Some(a) => a.iter().map(|&a| n.axis(a, rank)).collect::<Result<_>>()?,
                None => (0..rank).collect(),
            };
            if pads.len() != 2 * axes.len() {
                return Err(n.err(format!("{} pads for {} axes", pads.len(), axes.len())));
            }
            let mut pairs = vec![(0isize, 0isize); rank];
            for (i, &a) in axes.iter().enumerate() {
                pairs[a] = (pads[i] as isize, pads[i + axes.len()] as isize);
            }
            let value = if n.opset < 11 {
                n.float("value", 0.0)
            } else {
                n.floats_input(2)?
                    .and_then(|v| v.first().copied())
                    .unwrap_or(0.0)
            };
            let mode = match n.string("mode", "constant").as_str() {
                "constant" => PadMode::Constant(if x.dtype().is_float() {
                    value.into()
                } else {
                    (value as i64).into()
                }),
                "reflect" => PadMode::Reflect,
                "edge" => PadMode::Replicate,
                "wrap" => PadMode::Circular,
                m => return Err(n.err(format!("mode {m:?} is not supported"))),
            };
            one(x.pad_mode(&pairs, mode))
        }
        "Trilu" => {
            n.check_attrs(&["upper"])?;
            let x = n.input(0)?;
            let k = n
                .ints_input(1)?
                .and_then(|v| v.first().copied())
                .unwrap_or(0) as isize;
            one(if n.int("upper", 1) != 0 {
                x.triu(k)
            } else {
                x.tril(k)
            })
        }
        "DepthToSpace" | "SpaceToDepth" => {
            n.check_attrs(&["blocksize", "mode"])?;
            let x = n.input(0)?;
            let b = n.int("blocksize", 0);
            let s = x.shape();
            if s.len() != 4 || b <= 0 {
                return Err(n.err(format!(
                    "blocksize {b} for shape {s:?}: expected NCHW and blocksize > 0"
                )));
            }
            let b = b as usize;
            let (nb, c, h, w) = (s[0], s[1], s[2], s[3]);
            // DCR: blocks ordered depth-column-row; CRD: column-row-depth (SpaceToDepth has it
            // since opset 28)
            let crd = match n.string("mode", "DCR").as_str() {
                "DCR" => false,
                "CRD" => true,
                m => return Err(n.err(format!("mode {m:?}: expected DCR or CRD"))),
            };
            if n.op == "DepthToSpace" {
                if c % (b * b) != 0 {
                    return Err(n.err(format!("{c} channels are not a multiple of {}", b * b)));
                }
                let c2 = c / (b * b);
                let t = if crd {
                    x.reshape(&[nb, c2, b, b, h, w])
                        .permute(&[0, 1, 4, 2, 5, 3])
                } else {
                    x.reshape(&[nb, b, b, c2, h, w])
                        .permute(&[0, 3, 4, 1, 5, 2])
                };
                one(t.reshape(&[nb, c2, h * b, w * b]))
            } else {
                if h % b != 0 || w % b != 0 {
                    return Err(n.err(format!("{h}x{w} is not a multiple of blocksize {b}")));
                }
                let blocks = x.reshape(&[nb, c, h / b, b, w / b, b]);
                let t = if crd {
                    blocks.permute(&[0, 1, 3, 5, 2, 4])
                } else {
                    blocks.permute(&[0, 3, 5, 1, 2, 4])
                };
                one(t.reshape(&[nb, c * b * b, h / b, w / b]))
            }
        }
        "EyeLike" => {
            n.check_attrs(&["dtype", "k"])?;
            let x = n.input(0)?;
            let s = x.shape();
            if s.len() != 2 {
                return Err(n.err(format!("shape {s:?}: expected 2-D")));
            }
            let dtype = if n.has("dtype") {
                dtype_of(n.int("dtype", 1) as i32).map_err(|e| n.err(e))?
            } else {
                x.dtype()
            };
            let k = n.int("k", 0);
            let rows =
                Tensor::arange_dtype(0.0, s[0] as f64, 1.0, DType::INT64).reshape(&[s[0], 1]);
            let cols =
                Tensor::arange_dtype(0.0, s[1] as f64, 1.0, DType::INT64).reshape(&[1, s[1]]);
            one((cols - rows).eq(k).cast(dtype).to(n.device()))
        }
        "OneHot" => {
            n.check_attrs(&["axis"])?;
            let idx = n.input(0)?;
            let depth = n
                .floats_input(1)?
                .and_then(|v| v.first().copied())
                .ok_or_else(|| n.err("depth is required"))? as i64;
            let vals = n.input(2)?;
            if vals.numel() != 2 || depth <= 0 {
                return Err(n.err(format!(
                    "depth {depth} and values {:?}: expected depth > 0 and [off, on]",
                    vals.shape()
                )));
            }
            let rank = idx.ndim() + 1;
            let axis = n.axis(n.int("axis", -1), rank)?;
            let idx = idx.cast(DType::INT64);
            let idx = idx
                .lt(0)
                .where_(&idx + depth, &idx)
                .unsqueeze(axis as isize);
            let mut view = vec![1isize; rank];
            view[axis] = depth as isize;
            let classes = Tensor::arange_dtype(0.0, depth as f64, 1.0, DType::INT64)
                .to(n.device())
                .reshape(&view);
            let flat = vals.reshape(&[2isize]);
            let (off, on) = (
                flat.shrink(&[(0, 1)]).reshape(&[] as &[isize]),
                flat.shrink(&[(1, 2)]).reshape(&[] as &[isize]),
            );
            one(idx.eq(&classes).where_(&on, &off))
        }
        "ScatterElements" | "Scatter" => {
            n.check_attrs(&["axis", "reduction"])?;
            let (x, idx, upd) = (n.input(0)?, n.input(1)?, n.input(2)?);
            let axis = n.axis(n.int("axis", 0), x.ndim())?;
            let dim = x.shape()[axis] as i64;
            let idx = idx.cast(DType::INT64);
            let idx = idx.lt(0).where_(&idx + dim, &idx);
            let a = axis as isize;
            one(match n.string("reduction", "none").as_str() {
                "none" => x.scatter(a, &idx, upd),
                "add" => x.scatter_reduce(a, &idx, upd, "sum", true),
                "mul" => x.scatter_reduce(a, &idx, upd, "prod", true),
                "max" => x.scatter_reduce(a, &idx, upd, "amax", true),
                "min" => x.scatter_reduce(a, &idx, upd, "amin", true),
                r => return Err(n.err(format!("reduction {r:?} is not supported"))),
            })
        }
        "ScatterND" => {
            n.check_attrs(&["reduction"])?;
            let (x, upd) = (n.input(0)?, n.input(2)?);
            let idx_t = n.input(1)?;
            let idx = n.ints_input(1)?.unwrap_or_default();
            let (xs, is) = (x.shape(), idx_t.shape());
            let (lin, rows, k, count) = nd_rows(n, &xs, &is, &idx)?;
            let slice: usize = xs[k..].iter().product();
            let li = ints_tensor(&lin, n.device())
                .reshape(&[count, 1])
                .expand(&[count, slice]);
            let flat = x.reshape(&[rows, slice]);
            let u = upd.reshape(&[count, slice]);
            let out = match n.string("reduction", "none").as_str() {
                "none" => flat.scatter(0, &li, &u),
                "add" => flat.scatter_reduce(0, &li, &u, "sum", true),
                "mul" => flat.scatter_reduce(0, &li, &u, "prod", true),
                "max" => flat.scatter_reduce(0, &li, &u, "amax", true),
                "min" => flat.scatter_reduce(0, &li, &u, "amin", true),
                r => return Err(n.err(format!("reduction {r:?} is not supported"))),
            };
            one(out.reshape(&xs))
        }
        "Compress" => {
            n.check_attrs(&["axis"])?;
            let x = n.input(0)?;
            n.input(1)?;
            let cond: Vec<bool> = n.bools_input(1)?.unwrap_or_default();
            let (x, axis) = if n.has("axis") {
                let a = n.axis(n.int("axis", 0), x.ndim())?;
                (x.clone(), a)
            } else {
                (x.reshape(&[x.numel()]), 0)
            };
            let dim = x.shape()[axis];
            if cond.len() > dim {
                return Err(n.err(format!("condition of {} for dim {dim}", cond.len())));
            }
            let picked: Vec<i64> = cond
                .iter()
                .enumerate()
                .filter(|(_, c)| **c)
                .map(|(i, _)| i as i64)
                .collect();
            if picked.is_empty() {
                let mut s = x.shape();
                s[axis] = 0;
                return one(Tensor::zeros(&s, x.dtype()).to(n.device()));
            }
            one(gather(&x, &ints_tensor(&picked, n.device()), axis))
        }
        "CenterCropPad" => {
            n.check_attrs(&["axes"])?;
            let x = n.input(0)?;
            let target = n.ints_input(1)?.ok_or_else(|| n.err("shape is required"))?;
            let rank = x.ndim();
            let axes: Vec<usize> = match n.ints("axes") {
                Some(a) => a.iter().map(|&a| n.axis(a, rank)).collect::<Result<_>>()?,
                None => (0..rank).collect(),
            };
            if axes.len() != target.len() {
                return Err(n.err(format!("shape {target:?} for axes {axes:?}")));
            }
            let mut t = x.clone();
            for (&a, &want) in axes.iter().zip(&target) {
                let dim = t.shape()[a] as i64;
                let mut pads = vec![(0isize, 0isize); rank];
                // crop: start at (dim - want) / 2; pad: (want - dim) / 2 before
                if want < dim {
                    let s = (dim - want) / 2;
                    pads[a] = (-(s as isize), -((dim - want - s) as isize));
                } else {
                    let b = (want - dim) / 2;
                    pads[a] = (b as isize, (want - dim - b) as isize);
                }
                t = t.pad_mode(&pads, PadMode::Constant(0.into()));
            }
            one(t)
        }
        "HannWindow" | "HammingWindow" | "BlackmanWindow" => {
            n.check_attrs(&["output_datatype", "periodic"])?;
            let size = n
                .ints_input(0)?
                .and_then(|v| v.first().copied())
                .ok_or_else(|| n.err("size is required"))?;
            let size = size.max(0) as usize;
            let dtype = dtype_of(n.int("output_datatype", 1) as i32).map_err(|e| n.err(e))?;
            let denom = if n.int("periodic", 1) != 0 {
                size as f64
            } else {
                size as f64 - 1.0
            };
            let pi = std::f64::consts::PI;
            let v: Vec<f64> = (0..size)
                .map(|i| {
                    let x = i as f64;
                    match n.op {
                        "HannWindow" => (pi * x / denom).sin().powi(2),
                        "HammingWindow" => {
                            25.0 / 46.0 - (1.0 - 25.0 / 46.0) * (2.0 * pi * x / denom).cos()
                        }
                        _ => {
                            0.42 - 0.5 * (2.0 * pi * x / denom).cos()
                                + 0.08 * (4.0 * pi * x / denom).cos()
                        }
                    }
                })
                .collect();
            let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            one(Tensor::from_bytes(&b, DType::FLOAT64, &[size], n.device()).cast(dtype))
        }
        "GatherND" => {
            n.check_attrs(&["batch_dims"])?;
            if n.int("batch_dims", 0) != 0 {
                return Err(n.err("batch_dims other than 0 is not supported"));
            }
            let x = n.input(0)?;
            let idx_t = n.input(1)?;
            let idx = n.ints_input(1)?.unwrap_or_default();
            let (xs, is) = (x.shape(), idx_t.shape());
            let (lin, rows, k, _) = nd_rows(n, &xs, &is, &idx)?;
            let mut rest: Vec<usize> = xs[k..].to_vec();
            let flat = x.reshape(&[rows as isize, -1]);
            let picked = gather(&flat, &ints_tensor(&lin, n.device()), 0);
            let mut out: Vec<usize> = is[..is.len() - 1].to_vec();
            out.append(&mut rest);
            one(picked.reshape(&out))
        }
        "NonZero" => {
            n.check_attrs(&[])?;
            let x = n.input(0)?;
            let v = x
                .cast(DType::BOOL)
                .try_to_vec::<bool>()
                .map_err(|e| n.err(e.to_string()))?;
            let shape = x.shape();
            let hits: Vec<usize> = v
                .iter()
                .enumerate()
                .filter(|(_, b)| **b)
                .map(|(i, _)| i)
                .collect();
            let rank = shape.len().max(1);
            let mut out = vec![0i64; rank * hits.len()];
            for (j, &flat) in hits.iter().enumerate() {
                let mut rem = flat;
                for d in (0..shape.len()).rev() {
                    out[d * hits.len() + j] = (rem % shape[d]) as i64;
                    rem /= shape[d];
                }
            }
            let b: Vec<u8> = out.iter().flat_map(|x| x.to_le_bytes()).collect();
            one(Tensor::from_bytes(
                &b,
                DType::INT64,
                &[shape.len(), hits.len()],
                n.device(),
            ))
        }
        "Einsum" => {
            n.check_attrs(&["equation"])?;
            let eq = n.string("equation", "");
            let xs = n.present_inputs();
            one(Tensor::einsum(&eq, &xs))
        }
        _ => Ok(None),
    }
}

/// `Squeeze`/`Unsqueeze`'s axes: an attribute before opset 13, the second input since.
fn axes_arg(n: &Node) -> Result<Option<Vec<i64>>> {
    if n.opset < 13 {
        Ok(n.ints("axes"))
    } else {
        n.ints_input(1)
    }
}

/// ScatterND/GatherND's index tuples (the last dim of `idx_shape`, `k` values each) as row
/// numbers of the data viewed as `(prod(data[..k]), prod(data[k..]))`, negative entries from the
/// end; `(rows, k, count)` with them. An index out of range is an error naming it.
fn nd_rows(
    n: &Node,
    xs: &[usize],
    is: &[usize],
    idx: &[i64],
) -> Result<(Vec<i64>, usize, usize, usize)> {
    let k = *is.last().ok_or_else(|| n.err("0-d indices"))?;
    if k == 0 || k > xs.len() {
        return Err(n.err(format!("indices {is:?} for data {xs:?}")));
    }
    let count: usize = is[..is.len() - 1].iter().product();
    let rows: usize = xs[..k].iter().product();
    let mut lin = Vec::with_capacity(count);
    for t in 0..count {
        let mut l = 0i64;
        for (j, &dim) in xs[..k].iter().enumerate() {
            let d = dim as i64;
            let v = idx[t * k + j];
            let v = if v < 0 { v + d } else { v };
            if !(0..d).contains(&v) {
                return Err(n.err(format!(
                    "index {} out of range for dim {j} of {xs:?}",
                    idx[t * k + j]
                )));
            }
            l = l * d + v;
        }
        lin.push(l);
    }
    Ok((lin, rows, k, count))
}

/// An int64 tensor of `v` (a shape, indices).
fn ints_tensor(v: &[i64], device: &str) -> Tensor {
    let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    Tensor::from_bytes(&b, DType::INT64, &[v.len()], device)
}

/// numpy's `x[start:end:step]` along `axis`, out-of-range bounds clamped as Python does.
fn slice_axis(
    n: &Node,
    x: &Tensor,
    axis: usize,
    start: i64,
    end: i64,
    step: i64,
) -> Result<Tensor> {
    if step == 0 {
        return Err(n.err("a step of 0"));
    }
    let dim = x.shape()[axis] as i64;
    let norm = |v: i64, lo: i64, hi: i64| {
        let v = if v < 0 { v.saturating_add(dim) } else { v };
        v.clamp(lo, hi)
    };
    let mut ranges: Vec<(isize, isize, usize)> =
        x.shape().iter().map(|&d| (0, d as isize, 1)).collect();
    if step > 0 {
        let (s, e) = (norm(start, 0, dim), norm(end, 0, dim));
        ranges[axis] = (s as isize, e.max(s) as isize, step as usize);
        return Ok(x.slice(&ranges));
    }
    // a negative step: the same elements of the flipped axis, with a positive step
    let (s, e) = (norm(start, -1, dim - 1), norm(end, -1, dim - 1));
    let (fs, fe) = (dim - 1 - s, dim - 1 - e);
    ranges[axis] = (fs as isize, fe.max(fs) as isize, (-step) as usize);
    Ok(x.flip(&[axis as isize]).slice(&ranges))
}

/// ONNX's `Gather`: `x.shape[:axis] + idx.shape + x.shape[axis+1:]`, negative indices from the
/// end.
fn gather(x: &Tensor, idx: &Tensor, axis: usize) -> Tensor {
    let xs = x.shape();
    let dim = xs[axis] as i64;
    let idx = idx.cast(DType::INT64);
    let idx = idx.lt(0).where_(&idx + dim, &idx);
    let is = idx.shape();
    let count: usize = is.iter().product();
    let mut view: Vec<isize> = vec![1; xs.len()];
    view[axis] = count as isize;
    let mut full: Vec<usize> = xs.clone();
    full[axis] = count;
    let picked = x.gather(axis as isize, &idx.reshape(&view).expand(&full));
    let mut out: Vec<usize> = xs[..axis].to_vec();
    out.extend(&is);
    out.extend(&xs[axis + 1..]);
    picked.reshape(&out)
}
