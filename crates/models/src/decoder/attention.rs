//! The per-row parts of the forward pass: where the tokens sit and the KV caches they write and
//! attend over ([`Place`]: the decoder's own cache at a [`Span`], or one cache and position per
//! batch row for [`Decoder::decode_batch`](super::Decoder::decode_batch)), the rows of the
//! per-position tables (rotary, learned positions), the attention and the rotary embedding.

use tinygrad_tensor::nn::attention::{slot_attention, slot_attention_runs_on};
use tinygrad_tensor::nn::{Embedding, Module};
use tinygrad_tensor::{DType, SInt, Tensor};

use crate::error::Result;
use crate::weights::as_f32;

/// Where a forward's tokens sit in the sequence.
#[derive(Clone)]
pub(super) enum Span {
    /// Positions `start..start + len`, known numbers (prefill, or decoding without the JIT).
    Concrete {
        /// The first token's position.
        start: usize,
    },
    /// One token at the position held by the tensor `pos` (`[1]`, int32); `end` (its position
    /// plus one: the attended length) is symbolic. The two must agree (`pos == end - 1`): the
    /// rotary rows and the sliding window read `pos`, the KV cache write goes to `end - 1`.
    /// `Decoder::generate` and `Decoder::decode_step` build both from one position.
    Symbolic {
        /// The position, on the device.
        pos: Tensor,
        /// The attended length, a bound variable.
        end: SInt,
    },
    /// One token per batch row, row `i` at the position `pos[i]` (`[batch]`, int32); the
    /// keys attended are `0..end` (symbolic: the longest row's length), each row masked to
    /// its own `0..=pos[i]` (a batch of [`Place::Slots`]).
    Rows {
        /// Each row's position, on the device.
        pos: Tensor,
        /// The attended length: the largest position plus one, a bound variable.
        end: SInt,
    },
}

/// Where a forward's tokens sit and the KV caches they write and attend over: per block a
/// `(keys, values)` pair of `(batch, kv_heads, context, head_dim)` float32 buffers.
pub(super) enum Place<'a> {
    /// One cache of the tokens' batch (the decoder's own, or a sequence's when prefilled),
    /// every row at the positions `span`: each block writes its keys and values there, then
    /// attends over the cache's `0..end`.
    Shared {
        /// Per block, keys and values.
        cache: &'a [(Tensor, Tensor)],
        /// The tokens' positions.
        span: Span,
    },
    /// One token per batch row, each row with a batch-1 cache of its own and its own position
    /// (a decode step of several sequences): row `i`'s token sits at `ends[i] - 1`, a bound
    /// variable of its own (several rows in one schedule: distinct names), so that every step
    /// runs the same kernels whatever the positions. Each block writes every row's keys and
    /// values to its cache (one schedule for all rows), then each row attends over its own
    /// cache's `0..ends[i]`.
    Rows {
        /// Each row's cache.
        caches: Vec<&'a [(Tensor, Tensor)]>,
        /// Each row's position (`[batch]`, int32), on the device.
        pos: Tensor,
        /// Each row's attended length (its position plus one), a bound variable.
        ends: Vec<SInt>,
    },
    /// One token per batch row, row `i` in slot `i` of one cache `(slots, kv_heads, context,
    /// head_dim)` per block (a decode step of [`Slots`](super::slots::Slots)), at its own
    /// position: row `i` writes its keys and values at `ends[i] - 1` (a bound variable of its
    /// own), then all rows attend together over the slots' `0..end` (`end` the longest row's
    /// length, a bound variable), each masked to its own positions: a few kernels per block
    /// for the whole batch instead of a few per row.
    Slots {
        /// Per block, keys and values of every slot.
        cache: &'a [(Tensor, Tensor)],
        /// Each row's position (`[batch]`, int32), on the device.
        pos: Tensor,
        /// Each row's length after the step (its position plus one), a bound variable.
        ends: Vec<SInt>,
        /// The longest row's length after the step, a bound variable.
        end: SInt,
    },
}

impl Place<'_> {
    /// Rows of a per-position table `(context, width)`, float32: `(1, len, width)` for a
    /// concrete span (every batch row's), `(batch, 1, width)` for a symbolic one or per-row
    /// positions (each row's).
    pub(super) fn table_rows(&self, table: &Tensor, len: usize) -> Tensor {
        let width = table.shape()[1] as isize;
        let pos = match self {
            Place::Shared {
                span: Span::Concrete { start },
                ..
            } => {
                return as_f32(table)
                    .shrink(&[(*start, start + len), (0, width as usize)])
                    .reshape(&[1, len as isize, width]);
            }
            Place::Shared {
                span: Span::Symbolic { pos, .. } | Span::Rows { pos, .. },
                ..
            }
            | Place::Rows { pos, .. }
            | Place::Slots { pos, .. } => pos,
        };
        // a one-hot selection of the row the position tensor names (the scheduler turns it
        // into a load of that row)
        Embedding {
            weight: as_f32(table),
        }
        .forward(pos)
        .reshape(&[pos.shape()[0] as isize, 1, width])
    }

    /// Block `layer`'s attention of queries `q` `(batch, heads, len, head_dim)` with its new
    /// keys and values `k`, `v` `(batch, kv_heads, len, head_dim)`: `(batch, heads, len,
    /// head_dim)`. The new keys and values are written to the caches first (only those
    /// positions, in one schedule: [`Tensor::assign_in_place_all`]). `q`, `k` and `v` are realized together first, from
    /// the same normalized input (a tensor built from a lazy one keeps computing it: left for
    /// later, the queries would compute the norm again, once per reader). `window`: the
    /// sliding window of the block; `scale` multiplies the scores; `context` is the caches'
    /// length.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attend(
        &self,
        layer: usize,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        window: Option<usize>,
        scale: f64,
        context: usize,
    ) -> Result<Tensor> {
        Tensor::try_realize_all(&[k, v, q])?;
        let len = k.shape()[2];
        // batch row `i` of a `(batch, heads, len, head_dim)` tensor
        let row = |t: &Tensor, i: usize| {
            let s = t.shape();
            t.shrink(&[(i, i + 1), (0, s[1]), (0, s[2]), (0, s[3])])
        };
        match self {
            Place::Shared { cache, span } => {
                let (at, end): (SInt, SInt) = match span {
                    Span::Concrete { start } => ((*start).into(), (start + len).into()),
                    Span::Symbolic { end, .. } | Span::Rows { end, .. } => {
                        (end.clone() - 1, end.clone())
                    }
                };
                let (ck, cv) = &cache[layer];
                Tensor::assign_in_place_all(&[
                    (&part(ck, at.clone(), end.clone()), k),
                    (&part(cv, at, end.clone()), v),
                ])?;
                // a decode step of one sequence (`generate`, `decode_step`: one token at `pos`)
                // over a cache of one: on a CPU the native kernel, as a slots' step of one row
                if let Span::Symbolic { pos, .. } = span
                    && q.shape()[0] == 1
                    && ck.shape()[0] == 1
                    && slot_attention_runs_on(q.device())
                {
                    return Ok(slot_attention(q, ck, cv, pos, window, scale)?);
                }
                let (keys, values) = (part(ck, 0.into(), end.clone()), part(cv, 0.into(), end));
                Ok(attention(q, &keys, &values, span, scale, window, context))
            }
            Place::Rows { caches, pos, ends } => {
                // every row's keys and values into its cache at its position, in one schedule
                let mut writes = Vec::with_capacity(2 * caches.len());
                for (i, (cache, end)) in caches.iter().zip(ends).enumerate() {
                    let (ck, cv) = &cache[layer];
                    writes.push((part(ck, end.clone() - 1, end.clone()), row(k, i)));
                    writes.push((part(cv, end.clone() - 1, end.clone()), row(v, i)));
                }
                let pairs: Vec<(&Tensor, &Tensor)> = writes.iter().map(|(t, v)| (t, v)).collect();
                Tensor::assign_in_place_all(&pairs)?;
                // then each row attends over its own cache's 0..end (its kernels, all realized
                // together by what reads the result)
                let mut out = Vec::with_capacity(caches.len());
                for (i, (cache, end)) in caches.iter().zip(ends).enumerate() {
                    let (ck, cv) = &cache[layer];
                    let span = Span::Symbolic {
                        pos: pos.shrink(&[(i, i + 1)]),
                        end: end.clone(),
                    };
                    out.push(attention(
                        &row(q, i),
                        &part(ck, 0.into(), end.clone()),
                        &part(cv, 0.into(), end.clone()),
                        &span,
                        scale,
                        window,
                        context,
                    ));
                }
                Ok(match out.len() {
                    1 => out.pop().expect("one row"),
                    _ => Tensor::cat(&out.iter().collect::<Vec<_>>(), 0),
                })
            }
            Place::Slots {
                cache,
                pos,
                ends,
                end,
            } => {
                let (ck, cv) = &cache[layer];
                // each row's keys and values into its slot at its position (one buffer for
                // every row: a schedule per row, as two writes into one buffer in one schedule
                // are refused; under the Jit they are a kernel each all the same)
                for (i, at) in ends.iter().enumerate() {
                    let slot = |c: &Tensor| {
                        let cs = c.shape();
                        c.shrink_sym(&[
                            (i.into(), (i + 1).into()),
                            (0.into(), cs[1].into()),
                            (at.clone() - 1, at.clone()),
                            (0.into(), cs[3].into()),
                        ])
                    };
                    Tensor::assign_in_place_all(&[
                        (&slot(ck), &row(k, i)),
                        (&slot(cv), &row(v, i)),
                    ])?;
                }
                // then every row attends over its slot's positions: on a CPU one native kernel
                // for every row and head (SmolLM2-135M, 8 rows on Zen 4: 6 IR kernels, ~75 us, -> 1)
                if slot_attention_runs_on(q.device()) {
                    return Ok(slot_attention(q, ck, cv, pos, window, scale)?);
                }
                // elsewhere over slots 0..batch, keys 0..end, each row masked to its own
                let b = q.shape()[0];
                let rows_part = |c: &Tensor| {
                    let cs = c.shape();
                    c.shrink_sym(&[
                        (0.into(), b.into()),
                        (0.into(), cs[1].into()),
                        (0.into(), end.clone()),
                        (0.into(), cs[3].into()),
                    ])
                };
                let span = Span::Rows {
                    pos: pos.clone(),
                    end: end.clone(),
                };
                Ok(attention(
                    q,
                    &rows_part(ck),
                    &rows_part(cv),
                    &span,
                    scale,
                    window,
                    context,
                ))
            }
        }
    }
}

/// Positions `lo..hi` (symbolic bounds) of a cache `(batch, kv_heads, context, head_dim)`.
fn part(c: &Tensor, lo: SInt, hi: SInt) -> Tensor {
    let cs = c.shape();
    c.shrink_sym(&[
        (0.into(), cs[0].into()),
        (0.into(), cs[1].into()),
        (lo, hi),
        (0.into(), cs[3].into()),
    ])
}

/// Attention of queries `(batch, heads, len, hd)` over keys and values `(batch, kv_heads, end,
/// hd)`, query `l` seeing keys up to its own position (and, with a `window`, only the last
/// `window` of them, its own included); the query heads are grouped over the key/value heads
/// (grouped-query attention) without copying the keys. `scale` multiplies the scores;
/// `cache_len` is the KV cache's length (the symbolic `end`'s bound).
pub(super) fn attention(
    q: &Tensor,
    keys: &Tensor,
    values: &Tensor,
    span: &Span,
    scale: f64,
    window: Option<usize>,
    cache_len: usize,
) -> Tensor {
    let qs = q.shape();
    let (b, heads, len, hd) = (qs[0] as isize, qs[1] as isize, qs[2], qs[3] as isize);
    let kv = keys.shape()[1] as isize;
    let group = heads / kv;
    let q5 = q.reshape(&[b, kv, group, len as isize, hd]);
    let k5 = keys.unsqueeze(2);
    let v5 = values.unsqueeze(2);
    let scores = q5.matmul(&k5.transpose(-1, -2)) * scale;
    let dev = q.device();
    let scores = match span {
        Span::Concrete { start } if len > 1 || window.is_some_and(|w| start + 1 > w) => {
            let end = start + len;
            let rows = Tensor::arange_on(*start as f64, end as f64, 1.0, DType::INT32, dev)
                .reshape(&[len as isize, 1]);
            let cols = Tensor::arange_on(0.0, end as f64, 1.0, DType::INT32, dev)
                .reshape(&[1, end as isize]);
            let mut seen = cols.le(&rows);
            if let Some(w) = window {
                seen = seen.logical_and(&cols.gt(&(&rows - w as i32)));
            }
            seen.where_(&scores, f64::NEG_INFINITY)
        }
        Span::Symbolic { pos, end } if window.is_some() => {
            // the keys 0..end (symbolic) after pos - window
            let w = window.unwrap_or(0) as i32;
            let cols = Tensor::arange_on(0.0, cache_len as f64, 1.0, DType::INT32, dev)
                .shrink_sym(&[(0.into(), end.clone())])
                .reshape_sym(&[1.into(), end.clone()]);
            let pos = pos.reshape(&[1, 1]);
            cols.gt(&(&pos - w)).where_(&scores, f64::NEG_INFINITY)
        }
        Span::Rows { pos, end } => {
            // row i sees keys 0..=pos[i] (and with a window, the last `window` of them): the
            // keys past its own length are another sequence's or stale, and weigh exactly 0
            let cols = Tensor::arange_on(0.0, cache_len as f64, 1.0, DType::INT32, dev)
                .shrink_sym(&[(0.into(), end.clone())])
                .reshape_sym(&[1.into(), 1.into(), 1.into(), 1.into(), end.clone()]);
            let pos = pos.reshape(&[b, 1, 1, 1, 1]);
            let mut seen = cols.le(&pos);
            if let Some(w) = window {
                seen = seen.logical_and(&cols.gt(&(&pos - w as i32)));
            }
            seen.where_(&scores, f64::NEG_INFINITY)
        }
        _ => scores,
    };
    let out = scores.softmax(-1).matmul(&v5);
    // a decode step's weighted sum of values is a kernel of its own in its own shape: fused
    // into the copy that lays the heads side by side for the output projection, its output
    // axis would be heads * head_dim, over which the values are not contiguous (a division
    // by head_dim picks the head), and it would run unvectorized (SmolLM2-135M, 8 rows:
    // 108 -> 19 us per block on Zen 4)
    let out = match span {
        Span::Symbolic { .. } | Span::Rows { .. } => out.contiguous(),
        Span::Concrete { .. } => out,
    };
    out.reshape(&[b, heads, len as isize, hd])
}

/// `x * cos + rotate_half(x) * sin` (Hugging Face's rotary form: the head's halves rotate as
/// pairs `(i, i + d/2)`), with `cos`/`sin` `(batch or 1, len, hd)` (from [`table_rows`]).
pub(super) fn apply_rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Tensor {
    let s = x.shape();
    let (d, half) = (s[3], s[3] / 2);
    let bounds = |lo: usize, hi: usize| [(0, s[0]), (0, s[1]), (0, s[2]), (lo, hi)];
    let x1 = x.shrink(&bounds(0, half));
    let x2 = x.shrink(&bounds(half, d));
    let rotated = Tensor::cat(&[&x2.neg(), &x1], -1);
    let (cos, sin) = (cos.unsqueeze(1), sin.unsqueeze(1));
    x * cos + rotated * sin
}

/// The rotary tables `(len, head_dim)`, cos and sin of `position * inv_freq`, computed as
/// transformers does in float32: `inv_freq = 1 / theta^(2i / d)`, angles `pos * inv_freq`, the
/// halves repeated.
pub(super) fn rope_tables(len: usize, hd: usize, theta: f64, device: &str) -> (Tensor, Tensor) {
    let half = hd / 2;
    let inv: Vec<f32> = (0..half)
        .map(|i| (1.0 / theta.powf((2 * i) as f64 / hd as f64)) as f32)
        .collect();
    let mut cos = Vec::with_capacity(len * hd);
    let mut sin = Vec::with_capacity(len * hd);
    for p in 0..len {
        for j in 0..hd {
            let angle = (p as f32) * inv[j % half];
            cos.push((angle as f64).cos() as f32);
            sin.push((angle as f64).sin() as f32);
        }
    }
    let cos = Tensor::from_slice_on(&cos, &[len, hd], device);
    let sin = Tensor::from_slice_on(&sin, &[len, hd], device);
    cos.realize();
    sin.realize();
    (cos, sin)
}
