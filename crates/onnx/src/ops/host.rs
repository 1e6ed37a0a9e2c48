//! Ops whose output size depends on the values: `NonMaxSuppression`, `Unique`, and
//! `ReverseSequence`'s per-batch lengths. Their inputs are read back and the selection made on
//! the host; values are then gathered on the device, so outputs keep the input's exact values.

use std::cmp::Ordering;

use tinygrad_tensor::{DType, Tensor};

use crate::error::Result;
use crate::node::Node;

/// The node's outputs when `n.op` is one of this file's ops.
pub(super) fn run(n: &Node) -> Result<Option<Vec<Tensor>>> {
    match n.op {
        "NonMaxSuppression" => nms(n).map(|t| Some(vec![t])),
        "Unique" => unique(n).map(Some),
        "ReverseSequence" => reverse_sequence(n).map(|t| Some(vec![t])),
        _ => Ok(None),
    }
}

fn host_f64(n: &Node, t: &Tensor) -> Result<Vec<f64>> {
    t.cast(DType::FLOAT64)
        .try_to_vec::<f64>()
        .map_err(|e| n.err(e.to_string()))
}

fn ints(v: &[i64], shape: &[usize], device: &str) -> Tensor {
    let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    Tensor::from_bytes(&b, DType::INT64, shape, device)
}

/// ONNX's `NonMaxSuppression`: per batch and class, boxes by descending score (ties to the
/// lower index), each kept unless it overlaps a kept one by more than the IoU threshold.
fn nms(n: &Node) -> Result<Tensor> {
    n.check_attrs(&["center_point_box"])?;
    let (boxes, scores) = (n.input(0)?, n.input(1)?);
    let (bs, ss) = (boxes.shape(), scores.shape());
    if bs.len() != 3 || bs[2] != 4 || ss.len() != 3 || ss[0] != bs[0] || ss[2] != bs[1] {
        return Err(n.err(format!(
            "boxes {bs:?} and scores {ss:?}: expected (B, N, 4) and (B, C, N)"
        )));
    }
    let max_out = n
        .ints_input(2)?
        .and_then(|v| v.first().copied())
        .unwrap_or(0)
        .max(0) as usize;
    let iou_t = n
        .floats_input(3)?
        .and_then(|v| v.first().copied())
        .unwrap_or(0.0);
    let score_t = n.floats_input(4)?.and_then(|v| v.first().copied());
    let center = n.int("center_point_box", 0) != 0;
    let (b, s) = (host_f64(n, boxes)?, host_f64(n, scores)?);
    let (nb, nc, nbox) = (ss[0], ss[1], ss[2]);
    let bounds = |bi: usize, i: usize| {
        let v = &b[(bi * nbox + i) * 4..(bi * nbox + i) * 4 + 4];
        if center {
            let (hw, hh) = (v[2] / 2.0, v[3] / 2.0);
            (v[0] - hw, v[0] + hw, v[1] - hh, v[1] + hh)
        } else {
            (
                v[1].min(v[3]),
                v[1].max(v[3]),
                v[0].min(v[2]),
                v[0].max(v[2]),
            )
        }
    };
    let suppress = |bi: usize, i: usize, j: usize| {
        let (ax0, ax1, ay0, ay1) = bounds(bi, i);
        let (bx0, bx1, by0, by1) = bounds(bi, j);
        let (ix0, ix1, iy0, iy1) = (ax0.max(bx0), ax1.min(bx1), ay0.max(by0), ay1.min(by1));
        if ix1 <= ix0 || iy1 <= iy0 {
            return false;
        }
        let inter = (ix1 - ix0) * (iy1 - iy0);
        let (a1, a2) = ((ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0));
        let union = a1 + a2 - inter;
        if inter <= 0.0 || a1 <= 0.0 || a2 <= 0.0 || union <= 0.0 {
            return false;
        }
        inter / union > iou_t
    };
    let mut out: Vec<i64> = Vec::new();
    for bi in 0..nb {
        for c in 0..nc {
            let sc = &s[(bi * nc + c) * nbox..(bi * nc + c + 1) * nbox];
            let mut cand: Vec<usize> = (0..nbox)
                .filter(|&i| score_t.is_none_or(|t| sc[i] > t))
                .collect();
            cand.sort_by(|&p, &q| {
                sc[q]
                    .partial_cmp(&sc[p])
                    .unwrap_or(Ordering::Equal)
                    .then(p.cmp(&q))
            });
            let mut kept: Vec<usize> = Vec::new();
            for i in cand {
                if kept.len() >= max_out {
                    break;
                }
                if kept.iter().all(|&k| !suppress(bi, i, k)) {
                    kept.push(i);
                    out.extend([bi as i64, c as i64, i as i64]);
                }
            }
        }
    }
    Ok(ints(&out, &[out.len() / 3, 3], n.device()))
}

/// ONNX's `Unique`: the distinct values (or slices along `axis`), sorted or in order of first
/// appearance, with the first index of each, the inverse indices and the counts.
fn unique(n: &Node) -> Result<Vec<Tensor>> {
    n.check_attrs(&["axis", "sorted"])?;
    let x = n.input(0)?;
    let (x, axis) = if n.has("axis") {
        (x.clone(), n.axis(n.int("axis", 0), x.ndim())?)
    } else {
        (x.reshape(&[x.numel()]), 0)
    };
    let shape = x.shape();
    let len = shape[axis];
    // each slice along the axis as a row of values
    let moved = x.transpose(0, axis as isize).contiguous();
    let v = host_f64(n, &moved)?;
    let row = v.len().checked_div(len).unwrap_or(0);
    let slice = |i: usize| &v[i * row..(i + 1) * row];
    let cmp = |a: usize, b: usize| {
        slice(a)
            .iter()
            .zip(slice(b))
            .map(|(p, q)| p.partial_cmp(q).unwrap_or(Ordering::Equal))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
    };
    let mut firsts: Vec<usize> = Vec::new();
    let mut inverse = vec![0usize; len];
    for (i, inv) in inverse.iter_mut().enumerate() {
        match firsts.iter().position(|&f| cmp(f, i) == Ordering::Equal) {
            Some(k) => *inv = k,
            None => {
                *inv = firsts.len();
                firsts.push(i);
            }
        }
    }
    let mut order: Vec<usize> = (0..firsts.len()).collect();
    if n.int("sorted", 1) != 0 {
        order.sort_by(|&p, &q| cmp(firsts[p], firsts[q]));
    }
    // position of each first-appearance group in the output order
    let mut rank = vec![0usize; firsts.len()];
    for (pos, &g) in order.iter().enumerate() {
        rank[g] = pos;
    }
    let idx: Vec<i64> = order.iter().map(|&g| firsts[g] as i64).collect();
    let inv: Vec<i64> = inverse.iter().map(|&g| rank[g] as i64).collect();
    let mut counts = vec![0i64; firsts.len()];
    for &g in &inverse {
        counts[rank[g]] += 1;
    }
    let dev = n.device();
    let it = ints(&idx, &[idx.len()], dev);
    let mut view = vec![1isize; shape.len()];
    view[axis] = idx.len() as isize;
    let mut full = shape.clone();
    full[axis] = idx.len();
    let y = x.gather(axis as isize, &it.reshape(&view).expand(&full));
    Ok(vec![
        y,
        it,
        ints(&inv, &[inv.len()], dev),
        ints(&counts, &[counts.len()], dev),
    ])
}

/// ONNX's `ReverseSequence`: each batch entry's first `len` steps along the time axis reversed.
fn reverse_sequence(n: &Node) -> Result<Tensor> {
    n.check_attrs(&["batch_axis", "time_axis"])?;
    let x = n.input(0)?;
    let lens = n
        .ints_input(1)?
        .ok_or_else(|| n.err("sequence_lens is required"))?;
    let (ba, ta) = (
        n.axis(n.int("batch_axis", 1), x.ndim())?,
        n.axis(n.int("time_axis", 0), x.ndim())?,
    );
    let shape = x.shape();
    if ba == ta || lens.len() != shape[ba] {
        return Err(n.err(format!(
            "batch axis {ba}, time axis {ta}, {} lengths for {shape:?}",
            lens.len()
        )));
    }
    let (nb, nt) = (shape[ba], shape[ta]);
    // the source time step of each (time, batch) position
    let mut src = Vec::with_capacity(nt * nb);
    for t in 0..nt {
        for &l in &lens {
            let l = l.clamp(0, nt as i64) as usize;
            src.push(if t < l { (l - 1 - t) as i64 } else { t as i64 });
        }
    }
    let mut view = vec![1isize; shape.len()];
    view[ta] = nt as isize;
    view[ba] = nb as isize;
    let idx = ints(&src, &[nt, nb], n.device());
    let idx = if ta < ba { idx } else { idx.t() };
    Ok(x.gather(ta as isize, &idx.reshape(&view).expand(&shape)))
}
