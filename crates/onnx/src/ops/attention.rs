//! ONNX's `Attention` (opset 23+): scaled dot-product attention over 3-D (heads packed in the
//! hidden size) or 4-D inputs, with a key/value cache (`past_key`/`past_value` in,
//! `present_*` out), grouped-query heads, a bool or additive mask, causal and sliding-window
//! masking aligned to the cache, per-batch valid key lengths, soft-capping and the optional
//! `qk_matmul_output`. The semantics are those of ONNX's reference implementation, including
//! rows with every key masked giving zeros.

use tinygrad_tensor::{Axis, DType, Tensor};

use crate::error::Result;
use crate::node::Node;

/// The node's outputs when `n.op` is `Attention` or `RotaryEmbedding`.
pub(super) fn run(n: &Node) -> Result<Option<Vec<Tensor>>> {
    if n.op == "RotaryEmbedding" {
        return rotary(n).map(|t| Some(vec![t]));
    }
    if n.op != "Attention" {
        return Ok(None);
    }
    n.check_attrs(&[
        "is_causal",
        "kv_num_heads",
        "q_num_heads",
        "qk_matmul_output_mode",
        "scale",
        "softcap",
        "softmax_precision",
        "left_window_size",
        "right_window_size",
    ])?;
    let (q, k, v) = (n.input(0)?, n.input(1)?, n.input(2)?);
    let rank3 = q.ndim() == 3;
    if q.ndim() != k.ndim() || q.ndim() != v.ndim() || !(q.ndim() == 3 || q.ndim() == 4) {
        return Err(n.err(format!(
            "Q {:?}, K {:?}, V {:?}: expected all 3-D or all 4-D",
            q.shape(),
            k.shape(),
            v.shape()
        )));
    }
    let dt = q.dtype();
    let heads = |t: &Tensor, attr: &str| -> Result<Tensor> {
        if !rank3 {
            return Ok(t.clone());
        }
        let h = n.int(attr, 0);
        let s = t.shape();
        if h <= 0 || !s[2].is_multiple_of(h as usize) {
            return Err(n.err(format!("{attr} = {h} for a hidden size of {}", s[2])));
        }
        let h = h as usize;
        Ok(t.reshape(&[s[0], s[1], h, s[2] / h]).transpose(1, 2))
    };
    let (q, k, v) = (
        heads(q, "q_num_heads")?,
        heads(k, "kv_num_heads")?,
        heads(v, "kv_num_heads")?,
    );
    let scale = if n.has("scale") {
        n.float("scale", 1.0)
    } else {
        1.0 / (q.shape()[3] as f64).sqrt()
    };
    let root = scale.sqrt();
    let (past_k, past_v) = (n.opt_input(4), n.opt_input(5));
    if past_k.is_some() != past_v.is_some() {
        return Err(n.err("past_key and past_value must be given together"));
    }
    let (k, v) = match (past_k, past_v) {
        (Some(pk), Some(pv)) => (Tensor::cat(&[pk, &k], 2), Tensor::cat(&[pv, &v], 2)),
        _ => (k, v),
    };
    // the caches returned: the concatenations, before any head repetition
    let (present_k, present_v) = (k.clone(), v.clone());
    let nonpad = n.opt_input(6);
    let (l, s) = (q.shape()[2], k.shape()[2]);
    let dev = n.device();
    let neg_inf = f64::NEG_INFINITY;
    let as_bias = |m: &Tensor| {
        if m.dtype() == DType::BOOL {
            m.where_(0.0, neg_inf).cast(dt)
        } else {
            m.clone()
        }
    };
    // the mask, its last dim padded to the keys (with False / -inf)
    let mask = match n.opt_input(3) {
        Some(m) => {
            let ms = m.shape();
            let last = *ms.last().ok_or_else(|| n.err("a 0-d attn_mask"))?;
            if last > s {
                return Err(n.err(format!("attn_mask {ms:?} is longer than the {s} keys")));
            }
            let mut pads = vec![(0isize, 0isize); ms.len()];
            pads[ms.len() - 1] = (0, (s - last) as isize);
            let b = as_bias(m);
            Some(if last < s {
                b.pad_mode(&pads, tinygrad_tensor::PadMode::Constant(neg_inf.into()))
            } else {
                b
            })
        }
        None => None,
    };
    let rows = Tensor::arange_dtype(0.0, l as f64, 1.0, DType::INT64)
        .to(dev)
        .reshape(&[l, 1]);
    let cols = Tensor::arange_dtype(0.0, s as f64, 1.0, DType::INT64)
        .to(dev)
        .reshape(&[1, s]);
    // the query's absolute position offset: the cache length, or per batch the valid keys
    // minus the queries
    let offset: Tensor = match (past_k, nonpad) {
        (None, Some(np)) => {
            (np.cast(DType::INT64) - l as i64).reshape(&[np.numel() as isize, 1, 1, 1])
        }
        (Some(pk), _) => Tensor::full_on(&[], pk.shape()[2] as i64, DType::INT64, dev),
        _ => Tensor::full_on(&[], 0i64, DType::INT64, dev),
    };
    let pos = &rows + &offset;
    let zero = Tensor::full_on(&[l, s], 0.0, dt, dev);
    let mut bias = mask.clone().map_or_else(|| zero.clone(), |m| &zero + m);
    if n.int("is_causal", 0) != 0 {
        bias = bias + cols.le(&pos).where_(0.0, neg_inf).cast(dt);
    }
    let (left, right) = (
        n.int("left_window_size", -1),
        n.int("right_window_size", -1),
    );
    if left >= 0 || right >= 0 {
        let diff = &pos - &cols;
        let mut allowed = Tensor::full_on(&[], true, DType::BOOL, dev);
        if left >= 0 {
            allowed = allowed.logical_and(&diff.le(left));
        }
        if right >= 0 {
            allowed = allowed.logical_and(&diff.neg().le(right));
        }
        bias = bias + allowed.where_(0.0, neg_inf).cast(dt);
    }
    if let Some(np) = nonpad {
        let valid = cols.lt(&np
            .cast(DType::INT64)
            .reshape(&[np.numel() as isize, 1, 1, 1]));
        bias = bias + valid.where_(0.0, neg_inf).cast(dt);
    }
    let (hq, hk) = (q.shape()[1], k.shape()[1]);
    let (k, v) = if hq != hk && hk > 0 && hq % hk == 0 {
        (
            k.repeat_interleave(hq / hk, Some(1)),
            v.repeat_interleave(hq / hk, Some(1)),
        )
    } else {
        (k, v)
    };
    let mut qk = (&q * root).matmul(&(k.transpose(-2, -1) * root));
    let softcap = n.float("softcap", 0.0);
    if softcap > 0.0 {
        qk = (&qk / softcap).tanh() * softcap;
    }
    let with_bias = &qk + &bias;
    let mut x = with_bias.clone();
    if n.has("softmax_precision") {
        let p = crate::tensor_proto::dtype_of(n.int("softmax_precision", 1) as i32)
            .map_err(|e| n.err(e))?;
        x = x.cast(p);
    }
    let max = x.max_keepdim(-1isize);
    let safe = max.eq(neg_inf).where_(0.0, &max);
    let e = (&x - &safe).exp();
    let sum = e.sum_keepdim(-1isize);
    let sum = sum.eq(0.0).where_(1.0, &sum);
    let p = e / sum;
    let all_masked = bias.max_keepdim(Axis::Some(vec![-1])).eq(neg_inf);
    let p = all_masked.where_(0.0, &p).cast(dt);
    let qk_out = match n.int("qk_matmul_output_mode", 0) {
        0 | 1 => qk,
        2 => with_bias,
        3 => p.clone(),
        m => return Err(n.err(format!("qk_matmul_output_mode {m}: expected 0 to 3"))),
    };
    let mut y = p.matmul(&v);
    if rank3 {
        let ys = y.shape();
        y = y.transpose(1, 2).reshape(&[ys[0], ys[2], ys[1] * ys[3]]);
    }
    Ok(Some(vec![y, present_k, present_v, qk_out.cast(dt)]))
}

/// ONNX's `RotaryEmbedding`: the first `rotary_embedding_dim` values of each head rotated by
/// the cached cos/sin of its position (halves, or interleaved pairs), the rest unchanged.
fn rotary(n: &Node) -> Result<Tensor> {
    n.check_attrs(&["interleaved", "num_heads", "rotary_embedding_dim"])?;
    let x = n.input(0)?;
    let (cos, sin) = (n.input(1)?, n.input(2)?);
    let orig = x.shape();
    // (batch, seq, heads, head_size)
    let t = match orig.len() {
        4 => x.transpose(1, 2),
        3 => {
            let h = n.int("num_heads", 0);
            if h <= 0 || !orig[2].is_multiple_of(h as usize) {
                return Err(n.err(format!("num_heads = {h} for a hidden size of {}", orig[2])));
            }
            let h = h as usize;
            x.reshape(&[orig[0], orig[1], h, orig[2] / h])
        }
        _ => return Err(n.err(format!("input {orig:?}: expected 3-D or 4-D"))),
    };
    let ts = t.shape();
    let head = ts[3];
    let rd = match n.int("rotary_embedding_dim", 0) {
        0 => head,
        d if d > 0 && (d as usize) <= head && d % 2 == 0 => d as usize,
        d => return Err(n.err(format!("rotary_embedding_dim {d} for heads of {head}"))),
    };
    let (cos, sin) = match n.opt_input(3) {
        Some(pos) => {
            let p = pos.cast(DType::INT64);
            let pick = |c: &Tensor| {
                let flat = p.reshape(&[p.numel()]);
                let idx = flat
                    .reshape(&[p.numel() as isize, 1])
                    .expand(&[p.numel(), c.shape()[1]]);
                c.gather(0, &idx).reshape(&[ts[0], ts[1], c.shape()[1]])
            };
            (pick(cos), pick(sin))
        }
        None => (cos.clone(), sin.clone()),
    };
    if cos.shape().last() != Some(&(rd / 2)) || sin.shape() != cos.shape() {
        return Err(n.err(format!(
            "cos {:?} and sin {:?} caches for a rotary dim of {rd}",
            cos.shape(),
            sin.shape()
        )));
    }
    let (cos, sin) = (cos.unsqueeze(2), sin.unsqueeze(2));
    let b = |t: &Tensor, lo: usize, hi: usize| {
        let mut r: Vec<(usize, usize)> = t.shape().iter().map(|&d| (0, d)).collect();
        r[3] = (lo, hi);
        t.shrink(&r)
    };
    let rot = b(&t, 0, rd);
    let interleaved = n.int("interleaved", 0) != 0;
    let (x1, x2) = if interleaved {
        let pairs = rot.reshape(&[ts[0], ts[1], ts[2], rd / 2, 2]);
        let p = |i: usize| {
            pairs
                .shrink(&[(0, ts[0]), (0, ts[1]), (0, ts[2]), (0, rd / 2), (i, i + 1)])
                .reshape(&[ts[0], ts[1], ts[2], rd / 2])
        };
        (p(0), p(1))
    } else {
        (b(&rot, 0, rd / 2), b(&rot, rd / 2, rd))
    };
    let real = &cos * &x1 - &sin * &x2;
    let imag = &sin * &x1 + &cos * &x2;
    let rotated = if interleaved {
        Tensor::stack(&[&real, &imag], -1).reshape(&[ts[0], ts[1], ts[2], rd])
    } else {
        Tensor::cat(&[&real, &imag], -1)
    };
    let out = if rd < head {
        Tensor::cat(&[&rotated, &b(&t, rd, head)], -1)
    } else {
        rotated
    };
    Ok(if orig.len() == 3 {
        out.reshape(&orig)
    } else {
        out.transpose(1, 2)
    })
}
