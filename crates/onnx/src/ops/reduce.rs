//! The `Reduce*` family, `ArgMax`/`ArgMin`, `CumSum` and `TopK`.

use tinygrad_tensor::{Axis, DType, Tensor};

use crate::error::Result;
use crate::node::Node;

/// The node's outputs when `n.op` is one of this file's ops.
pub(super) fn run(n: &Node) -> Result<Option<Vec<Tensor>>> {
    let one = |t: Tensor| Ok(Some(vec![t]));
    match n.op {
        "ReduceSum" | "ReduceMean" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL1"
        | "ReduceL2" | "ReduceLogSum" | "ReduceLogSumExp" | "ReduceSumSquare" => {
            n.check_attrs(&["axes", "keepdims", "noop_with_empty_axes"])?;
            let x = n.input(0)?;
            // axes became an input in opset 13 for ReduceSum and in 18 for the others
            let axes_as_input = n.opset >= if n.op == "ReduceSum" { 13 } else { 18 };
            let axes = if axes_as_input {
                n.ints_input(1)?
            } else {
                n.ints("axes")
            };
            let axes = axes.unwrap_or_default();
            if axes.is_empty() && n.int("noop_with_empty_axes", 0) != 0 {
                return one(x.clone());
            }
            let rank = x.ndim();
            let axes: Vec<isize> = if axes.is_empty() {
                (0..rank as isize).collect()
            } else {
                axes.iter()
                    .map(|&a| n.axis(a, rank).map(|a| a as isize))
                    .collect::<Result<_>>()?
            };
            let keep = n.int("keepdims", 1) != 0;
            let ax = || Axis::Some(axes.clone());
            let sum = |t: &Tensor| {
                if keep {
                    t.sum_keepdim(ax())
                } else {
                    t.sum(ax())
                }
            };
            let t = match n.op {
                "ReduceSum" => sum(x),
                "ReduceMean" => {
                    if keep {
                        x.mean_keepdim(ax())
                    } else {
                        x.mean(ax())
                    }
                }
                "ReduceMax" => {
                    if keep {
                        x.max_keepdim(ax())
                    } else {
                        x.max(ax())
                    }
                }
                "ReduceMin" => {
                    if keep {
                        x.min_keepdim(ax())
                    } else {
                        x.min(ax())
                    }
                }
                "ReduceProd" => {
                    if keep {
                        x.prod_keepdim(ax())
                    } else {
                        x.prod(ax())
                    }
                }
                "ReduceL1" => sum(&x.abs()),
                "ReduceL2" => sum(&(x * x)).cast(float_of(x)).sqrt(),
                "ReduceLogSum" => sum(x).cast(float_of(x)).log(),
                "ReduceLogSumExp" => {
                    let t = x.cast(float_of(x));
                    if keep {
                        t.logsumexp_keepdim(ax())
                    } else {
                        t.logsumexp(ax())
                    }
                }
                _ => sum(&(x * x)),
            };
            one(t.cast(x.dtype()))
        }
        "ArgMax" | "ArgMin" => {
            n.check_attrs(&["axis", "keepdims", "select_last_index"])?;
            let x = n.input(0)?;
            let axis = n.axis(n.int("axis", 0), x.ndim())? as isize;
            let keep = n.int("keepdims", 1) != 0;
            let last = n.int("select_last_index", 0) != 0;
            let src = if last { x.flip(&[axis]) } else { x.clone() };
            let idx = match (n.op, keep) {
                ("ArgMax", true) => src.argmax_keepdim(Some(axis)),
                ("ArgMax", false) => src.argmax(Some(axis)),
                (_, true) => src.argmin_keepdim(Some(axis)),
                _ => src.argmin(Some(axis)),
            }
            .cast(DType::INT64);
            let dim = x.shape()[axis as usize] as i64;
            one(if last {
                (idx.neg() + (dim - 1)).cast(DType::INT64)
            } else {
                idx
            })
        }
        "CumSum" | "CumProd" => {
            n.check_attrs(&["exclusive", "reverse"])?;
            let x = n.input(0)?;
            let axis = n
                .ints_input(1)?
                .and_then(|v| v.first().copied())
                .ok_or_else(|| n.err("axis is required"))?;
            let axis = n.axis(axis, x.ndim())? as isize;
            let reverse = n.int("reverse", 0) != 0;
            let exclusive = n.int("exclusive", 0) != 0;
            let src = if reverse { x.flip(&[axis]) } else { x.clone() };
            let c = if n.op == "CumSum" {
                let c = src.cumsum(axis);
                if exclusive { c - &src } else { c }
            } else if exclusive {
                // the product of the elements before: shifted by one, a 1 first
                let mut pads = vec![(0isize, 0isize); src.ndim()];
                pads[axis as usize] = (1, -1);
                let shifted = src.pad_mode(&pads, tinygrad_tensor::PadMode::Constant(1.into()));
                shifted.cumprod(axis)
            } else {
                src.cumprod(axis)
            };
            let c = c.cast(x.dtype());
            one(if reverse { c.flip(&[axis]) } else { c })
        }
        "TopK" => {
            n.check_attrs(&["axis", "largest", "sorted"])?;
            let x = n.input(0)?;
            let k = n
                .ints_input(1)?
                .and_then(|v| v.first().copied())
                .ok_or_else(|| n.err("k is required"))?;
            let axis = n.axis(n.int("axis", -1), x.ndim())?;
            let dim = x.shape()[axis];
            if k < 0 || k as usize > dim {
                return Err(n.err(format!("k = {k} for dim {dim} of {:?}", x.shape())));
            }
            if n.int("sorted", 1) == 0 {
                return Err(n.err("sorted=0 is not supported"));
            }
            let (v, i) = x.topk(k as usize, axis as isize, n.int("largest", 1) != 0, true);
            Ok(Some(vec![v, i.cast(DType::INT64)]))
        }
        _ => Ok(None),
    }
}

/// The float dtype a formula on `x` runs in: its own, or float32 for integers.
fn float_of(x: &Tensor) -> DType {
    if x.dtype().is_float() {
        x.dtype()
    } else {
        DType::FLOAT32
    }
}
