//! Splitting large reductions into two kernels (tinygrad's `split_reduceop`), so that a
//! reduction to few outputs (a full `sum`) still has an output loop to run on several cores.
//!
//! A reduction of `P` input elements into `Q` outputs with `P / Q >= 32768` (16384 for a sum of
//! products with at least [`OUTER_PARTIALS_OUTPUTS`] outputs: [`PRODUCT_SPLIT_THRESHOLD`]) has one reduced
//! dimension `D` cut into `(div, D / div)`, `div` the largest of 256..=8 that divides `D` (fewer
//! when the output is already large, and for a sum of products with many outputs few enough that
//! each partial sums at least [`MIN_PRODUCT_PARTIAL_K`] products). The first kernel reduces the
//! `D / div` part into `Q * div` partial results, the second reduces those `div` partials:
//! `x.sum()` over 16M elements becomes 256 contiguous sums of 65536 elements, then a sum of 256.
//! `SPLIT_REDUCEOP=0` turns this off.
//!
//! The partial results are laid out as tinygrad lays them out, `div` innermost (`[outputs,
//! div]`), except for a sum of products (a matmul, a convolution's weight gradient) with at
//! least [`OUTER_PARTIALS_OUTPUTS`] outputs: there `div` comes first (`[div, outputs]`). On the
//! CPU's GEMM path the first stage is a batch of `div` GEMMs whose result is `[div, outputs]`;
//! writing it `div`-innermost was a transposing copy: beautiful_mnist's second-convolution
//! weight gradient (128 x 800 x 32 partials) spent 14.5 of its 161 ms there. The second stage
//! then sums columns, which the row-reduction path reads as fast as rows.

use std::collections::HashMap;
use std::sync::OnceLock;

use tinygrad_uop::{Arg, Ops, UOp};

/// Reductions with at least this many input elements per output are split.
pub const SPLIT_THRESHOLD: usize = 32768;

/// A split sum of products with at least this many outputs puts its partials' `div` first
/// (see the module docs).
// mnist conv2 weight-gradient epilogue 14.5 -> 2.9 ms (see docs/performance.md)
pub const OUTER_PARTIALS_OUTPUTS: usize = 4096;

/// The least reduction length of each partial of a split sum of products with at least
/// [`OUTER_PARTIALS_OUTPUTS`] outputs: each partial is a GEMM on the CPU's path, and short ones
/// spend their time storing and summing partial results. beautiful_mnist's third-convolution
/// weight gradient (288 x 64 outputs, K = 32768) ran as 128 GEMMs with K = 256 in 14.7 ms
/// (partials and their sum), as 32 with K = 1024 in 11.0 ms; unsplit, in one GEMM, 12.2 ms.
// mnist conv3 weight gradient 14.7 -> 11.0 ms (see docs/performance.md)
pub const MIN_PRODUCT_PARTIAL_K: usize = 1024;

/// [`SPLIT_THRESHOLD`] of a sum of products with at least [`OUTER_PARTIALS_OUTPUTS`] outputs (a
/// weight gradient): its partials are a batch of GEMMs, one task per batch on the CPU's path.
/// beautiful_mnist's fourth-convolution weight gradient (576 x 64 outputs, K = 18432) ran as
/// one GEMM in 12.3 ms, as 16 partials of 1152 and their sum in 10.4 ms (2-vCPU Zen 2, medians
/// over 8 steps).
// mnist conv4 weight gradient 12.3 -> 10.4 ms on Zen 2 (see docs/performance.md)
pub const PRODUCT_SPLIT_THRESHOLD: usize = 16384;

fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("SPLIT_REDUCEOP").map_or(true, |v| v != "0"))
}

/// The graphs of `outputs` with every large reduction split in two (the same nodes when there is
/// nothing to split).
///
/// The graph is rebuilt bottom-up, each reduction split after its sources were: a split
/// reduction's input holds the split form of every reduction below it (a variance's input its
/// split mean), so a node reached through two paths stays one node and is computed once.
// bottom-up: mnist 160 -> 136 kernels, step 872 -> 826 ms (see docs/performance.md)
pub fn split_reduces(outputs: &[UOp]) -> Vec<UOp> {
    if !enabled() {
        return outputs.to_vec();
    }
    let sink = UOp::new(
        Ops::Sink,
        tinygrad_dtype::DType::VOID,
        outputs.to_vec(),
        Arg::None,
    );
    let mut new: HashMap<UOp, UOp> = HashMap::new();
    for n in sink.toposort() {
        let rebuilt = n.with_src(n.src().iter().map(|s| new[s].clone()).collect::<Vec<_>>());
        // (a reduction over a variable's range keeps its one loop)
        let done = if rebuilt.op() == Ops::ReduceAxis && !rebuilt.has_sym() {
            split_one(&rebuilt).unwrap_or(rebuilt)
        } else {
            rebuilt
        };
        new.insert(n, done);
    }
    new[&sink].src().to_vec()
}

fn split_one(r: &UOp) -> Option<UOp> {
    let Arg::Reduce(op, axes) = r.arg().clone() else {
        return None;
    };
    let x = r.s(0);
    let shape = x.shape_vec();
    if shape.contains(&0) {
        return None;
    }
    // never split: SmolLM2 Q4_1 decode 9.6 -> 21.8 tokens/s on Zen 4 (see docs/performance.md)
    if op == Ops::Add && is_one_hot(x) {
        // collapsed into a load later ([`crate::gather`]): split, it would no longer be seen
        return None;
    }
    let p: usize = shape.iter().product();
    let q: usize = r.shape_vec().iter().product();
    let wide_product = op == Ops::Add && q >= OUTER_PARTIALS_OUTPUTS && is_product(x);
    let threshold = if wide_product {
        PRODUCT_SPLIT_THRESHOLD
    } else {
        SPLIT_THRESHOLD
    };
    if p / q.max(1) < threshold {
        return None;
    }
    let mut max_div = 256.min((1usize << 22) / q.max(1));
    if op == Ops::Add && q >= OUTER_PARTIALS_OUTPUTS && is_product(x) {
        // each partial a GEMM with K of at least MIN_PRODUCT_PARTIAL_K
        max_div = max_div.min(p / q / MIN_PRODUCT_PARTIAL_K);
    }
    let (d, div) = axes.iter().find_map(|&a| {
        (8..=max_div)
            .rev()
            .find(|div| shape[a].is_multiple_of(*div))
            .map(|div| (a, div))
    })?;
    let mut split_shape = shape[..d].to_vec();
    split_shape.push(div);
    split_shape.push(shape[d] / div);
    split_shape.extend_from_slice(&shape[d + 1..]);
    let xr = UOp::new(
        Ops::Reshape,
        x.dtype(),
        vec![x.clone()],
        Arg::shape(&split_shape),
    );
    // `div` last (tinygrad's layout), the remaining dimensions keeping the original numbering;
    // or first, shifting them by one.
    let outer = op == Ops::Add && q >= OUTER_PARTIALS_OUTPUTS && is_product(x);
    let rest = (0..split_shape.len()).filter(|&i| i != d);
    let (perm, first_axes, div_axis): (Vec<usize>, Vec<usize>, usize) = if outer {
        let perm = std::iter::once(d).chain(rest).collect();
        (perm, axes.iter().map(|a| a + 1).collect(), 0)
    } else {
        (
            rest.chain(std::iter::once(d)).collect(),
            axes.to_vec(),
            shape.len(),
        )
    };
    let xp = UOp::new(Ops::Permute, x.dtype(), vec![xr], Arg::shape(&perm));
    let first = UOp::new(
        Ops::ReduceAxis,
        r.dtype(),
        vec![xp],
        Arg::Reduce(op, first_axes.into()),
    );
    let partial = UOp::new(Ops::Contiguous, r.dtype(), vec![first], Arg::None);
    let second = UOp::new(
        Ops::ReduceAxis,
        r.dtype(),
        vec![partial],
        Arg::Reduce(op, vec![div_axis].into()),
    );
    Some(UOp::new(
        Ops::Reshape,
        r.dtype(),
        vec![second],
        Arg::shape(&r.shape_vec()),
    ))
}

/// Whether every element of `x` is a product, through casts, reshapes and permutes (a matmul's
/// or a convolution's reduced value).
fn is_product(x: &UOp) -> bool {
    match x.op() {
        Ops::Mul => true,
        Ops::Cast | Ops::Reshape | Ops::Permute => is_product(x.s(0)),
        _ => false,
    }
}

/// Whether `x`, a sum's input, is a one-hot selection `where(idx == ramp, w, 0)` (through casts
/// and movement ops) whose `ramp` reads no buffer but is not a constant either (an `arange`):
/// what `Embedding`, `gather` and tensor indexing build, and what [`crate::gather`] collapses
/// into one load per output. Split first, the sum would become two reductions over partial
/// sums that no longer have that form, and every lookup would sum the whole table (a
/// 49152-token embedding: 65 ms of a 135M-parameter LLM's ~100 ms decode step).
fn is_one_hot(x: &UOp) -> bool {
    match x.op() {
        Ops::Cast | Ops::Reshape | Ops::Permute | Ops::Expand => is_one_hot(x.s(0)),
        Ops::Where => is_zero(x.s(2)) && has_ramp_equality(x.s(0)),
        _ => false,
    }
}

/// Whether `u` is a zero constant, possibly reshaped or expanded.
fn is_zero(u: &UOp) -> bool {
    match u.op() {
        Ops::Reshape | Ops::Expand => is_zero(u.s(0)),
        Ops::Const => u.as_const().is_some_and(|c| c.as_f64() == 0.0),
        _ => false,
    }
}

/// Whether the condition `c` (a conjunction, through movement ops) has a conjunct `a == b` with
/// one side reading a buffer and the other computed from constants only, and not a constant.
fn has_ramp_equality(c: &UOp) -> bool {
    match c.op() {
        Ops::And => has_ramp_equality(c.s(0)) || has_ramp_equality(c.s(1)),
        Ops::Reshape | Ops::Permute | Ops::Expand => has_ramp_equality(c.s(0)),
        Ops::CmpEq => {
            let ramp = |a: &UOp, b: &UOp| reads_buffer(a) && !reads_buffer(b) && !is_const(b);
            ramp(c.s(0), c.s(1)) || ramp(c.s(1), c.s(0))
        }
        _ => false,
    }
}

/// Whether `u` is a constant, possibly through movement ops and casts.
fn is_const(u: &UOp) -> bool {
    match u.op() {
        Ops::Reshape | Ops::Expand | Ops::Permute | Ops::Cast => is_const(u.s(0)),
        Ops::Const => true,
        _ => false,
    }
}

/// Whether any node of `u`'s graph is a buffer.
fn reads_buffer(u: &UOp) -> bool {
    u.toposort().iter().any(|n| n.op() == Ops::Buffer)
}
