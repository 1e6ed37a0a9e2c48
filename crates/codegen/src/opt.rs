//! Kernel optimizations (tinygrad's `codegen/opt`): tinygrad-style opts applied to a kernel AST
//! before it is linearized.
//!
//! An opt is a [`Split`] of one loop range into an outer range and *lane* axes whose iterations
//! are laid out in registers instead of a loop:
//! - on an output range it is tinygrad's **UPCAST**: each outer iteration computes a tile of
//!   outputs, so a value loaded once (`A[i, k]`) serves every lane that needs it (register
//!   tiling: a 4x8 tile of a matmul keeps 8 vector accumulators in registers);
//! - on a reduce range it is **UNROLL**: several independent accumulators per reduction, combined
//!   after the loop, so consecutive additions do not wait for each other.
//!
//! One lane axis may be the **vector** axis: its 4 lanes become SIMD lanes (`float32.vec(4)`).
//! Loads and stores whose index moves by exactly 1 along it become vector loads and stores,
//! values that do not depend on it are broadcast, other accesses gather lane by lane. Operations
//! that the target executes on vectors ([`vector_native`]) stay vectors; everything else (index
//! arithmetic, 64-bit types, divisions, ...) is computed per lane, so every kernel can be
//! vectorized correctly, only more or less profitably. [`KernelOpts::order`] reorders the output
//! loops (the outermost one is what the launcher splits across threads).
//!
//! Sizes that are not a multiple of a split:
//! - output ranges: the last tile is shifted back to end at the last element (`min(o*P, N-P)`),
//!   overlapping the previous one. Overlapping outputs are recomputed and stored again with the
//!   same value, which is harmless because a kernel's output never aliases its inputs;
//! - reduce ranges: the remainder gets its own (tail) reduction over the last `N % P` elements,
//!   combined with the unrolled one.
//!
//! A split needs the range to have at least as many iterations as its lanes; [`heuristic`] picks
//! only valid splits, [`apply_opts`] rejects invalid ones.
//!
//! After [`apply_opts`] the AST has no lane ranges: every lane axis has been expanded into
//! explicit copies and vectors ("expand" in tinygrad). Reductions over lanes become several
//! `Reduce` nodes over the same ranges, which the linearizer runs in one loop.

use std::collections::{HashMap, HashSet};

use tinygrad_dtype::{DType, Scalar};
use tinygrad_uop::{Arg, AxisKind, Ops, UOp};

/// The SIMD width (in 32-bit lanes) the vector axis uses.
pub const VECTOR_WIDTH: usize = 4;

/// Splits one range (by its id) into an outer range and lane axes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Split {
    /// The range's id (`Arg::Range(id, _)`).
    pub axis: usize,
    /// Lane axis sizes, innermost (stride 1) first: `[4, 2]` makes a range of 8 lanes, `r =
    /// outer*8 + l1*4 + l0`.
    pub lanes: Vec<usize>,
    /// Whether the first lane axis becomes SIMD vector lanes (its size must be
    /// [`VECTOR_WIDTH`]). At most one split per kernel may set it.
    pub vector: bool,
}

/// The optimizations of one kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct KernelOpts {
    /// Splits, applied in order (at most one per reduce range).
    pub splits: Vec<Split>,
    /// The output ranges' ids from the outermost loop to the innermost; `None` keeps the
    /// scheduled order (the output's row-major order).
    pub order: Option<Vec<usize>>,
}

impl KernelOpts {
    /// Whether there is nothing to apply.
    pub fn is_empty(&self) -> bool {
        self.splits.is_empty() && self.order.is_none()
    }
}

fn range_id(r: &UOp) -> usize {
    match r.arg() {
        Arg::Range(id, _) => *id,
        _ => usize::MAX,
    }
}

fn range_kind(r: &UOp) -> AxisKind {
    match r.arg() {
        Arg::Range(_, k) => *k,
        _ => AxisKind::Loop,
    }
}

fn range_size(r: &UOp) -> Option<usize> {
    r.s(0).as_int().map(|s| s.max(0) as usize)
}

/// The coefficient of `var` in the integer expression `e` if `e` is affine in it (`Some(0)`
/// when `e` does not depend on it), `None` when it is not affine (divisions, modulo, products
/// of two variables, ...) or a coefficient overflows `i64`.
pub fn affine_coeff(e: &UOp, var: &UOp, memo: &mut HashMap<UOp, Option<i64>>) -> Option<i64> {
    if let Some(c) = memo.get(e) {
        return *c;
    }
    let c = if e == var {
        Some(1)
    } else if e.src().is_empty() {
        Some(0)
    } else {
        match e.op() {
            Ops::Add => {
                let a = affine_coeff(e.s(0), var, memo);
                let b = affine_coeff(e.s(1), var, memo);
                a.zip(b).and_then(|(a, b)| a.checked_add(b))
            }
            Ops::Sub => {
                let a = affine_coeff(e.s(0), var, memo);
                let b = affine_coeff(e.s(1), var, memo);
                a.zip(b).and_then(|(a, b)| a.checked_sub(b))
            }
            Ops::Neg => affine_coeff(e.s(0), var, memo).and_then(i64::checked_neg),
            Ops::Mul => {
                let a = affine_coeff(e.s(0), var, memo);
                let b = affine_coeff(e.s(1), var, memo);
                match (a, b, e.s(0).as_int(), e.s(1).as_int()) {
                    (_, Some(b), Some(ca), _) => ca.checked_mul(b),
                    (Some(a), _, _, Some(cb)) => a.checked_mul(cb),
                    (Some(0), Some(0), _, _) => Some(0),
                    _ => None,
                }
            }
            _ => {
                let mut all_zero = true;
                for s in e.src() {
                    if affine_coeff(s, var, memo) != Some(0) {
                        all_zero = false;
                        break;
                    }
                }
                if all_zero { Some(0) } else { None }
            }
        }
    };
    memo.insert(e.clone(), c);
    c
}

/// Whether the target runs `op` on 4-lane vectors of these dtypes natively (32-bit lanes:
/// `float32`, `int32`, `uint32`, and `bool` as a 32-bit lane mask). `scalar_shift`: a shift's
/// amount is the same for every lane.
pub fn vector_native(op: Ops, out: DType, srcs: &[DType], scalar_shift: bool) -> bool {
    let lane32 = |d: DType| {
        d.count() == 1
            && !d.is_ptr()
            && matches!(
                d.kind(),
                Scalar::Float32 | Scalar::Int32 | Scalar::UInt32 | Scalar::Bool
            )
    };
    if !lane32(out) || !srcs.iter().all(|d| lane32(*d)) {
        return false;
    }
    let s0 = srcs.first().map_or(out, |d| *d);
    let float = s0.kind() == Scalar::Float32;
    let int = matches!(s0.kind(), Scalar::Int32 | Scalar::UInt32);
    let boolean = s0.kind() == Scalar::Bool;
    match op {
        Ops::Add | Ops::Sub | Ops::Mul => float || int,
        Ops::Max => float || s0.kind() == Scalar::Int32,
        Ops::Neg | Ops::FDiv | Ops::Sqrt | Ops::Trunc | Ops::Round | Ops::Recip | Ops::MulAcc => {
            float
        }
        Ops::And | Ops::Or | Ops::Xor => int || boolean,
        Ops::CmpEq | Ops::CmpNe => true,
        Ops::CmpLt => float || s0.kind() == Scalar::Int32,
        Ops::Where => srcs.len() == 3 && srcs[0].kind() == Scalar::Bool && srcs[1] == srcs[2],
        Ops::Shl | Ops::Shr => int && scalar_shift,
        Ops::Cast => {
            (s0.kind() == Scalar::Int32 && out.kind() == Scalar::Float32)
                || (boolean && matches!(out.kind(), Scalar::Float32 | Scalar::Int32))
        }
        Ops::Bitcast => {
            (float && matches!(out.kind(), Scalar::Int32 | Scalar::UInt32))
                || (int && out.kind() == Scalar::Float32)
        }
        _ => false,
    }
}

/// Whether a value of `dt` is computed in 4-lane vectors of 32-bit lanes (a reduction's
/// accumulator).
fn vector_memory(dt: DType) -> bool {
    dt.count() == 1 && matches!(dt.kind(), Scalar::Float32 | Scalar::Int32 | Scalar::UInt32)
}

/// Whether a buffer of `dt` is loaded and stored 4 elements at a time: the 32-bit types, and
/// `bool` (4 bytes in memory, a lane mask in registers; ReLU's saved masks are bool buffers).
fn vector_io(dt: DType) -> bool {
    vector_memory(dt) || (dt.count() == 1 && dt.kind() == Scalar::Bool)
}

// ---------------------------------------------------------------------------------------------
// Heuristic

/// What the heuristic sees of a kernel.
struct Analysis {
    /// Output ranges, outermost first.
    out: Vec<UOp>,
    /// Reduce nodes.
    reduces: Vec<UOp>,
    /// Load indices (with their dtype) and the store's index and value dtype.
    loads: Vec<(UOp, DType)>,
    store: Option<(UOp, DType)>,
    /// Floating-point ALU ops per output element.
    float_alu: usize,
}

/// The floating-point ALU ops per element from which an elementwise kernel unrolls 4 vectors
/// instead of 2 (see [`heuristic`]).
const LONG_CHAIN_ALU_OPS: usize = 16;

fn analyze(ast: &UOp) -> Analysis {
    let topo = ast.toposort();
    let reduce_ranges: HashSet<UOp> = topo
        .iter()
        .filter(|n| n.op() == Ops::Reduce)
        .flat_map(|n| n.src()[1..].to_vec())
        .collect();
    let mut out: Vec<UOp> = topo
        .iter()
        .filter(|n| n.op() == Ops::Range && !reduce_ranges.contains(*n))
        .cloned()
        .collect();
    out.sort_by_key(range_id);
    let mut stores = topo.iter().filter(|n| n.op() == Ops::Store);
    let store = stores.next().map(|s| (s.s(0).s(1).clone(), s.s(1).dtype()));
    let store = if stores.next().is_some() { None } else { store };
    Analysis {
        out,
        float_alu: topo
            .iter()
            .filter(|n| n.op().alu_arity().is_some() && n.dtype().is_float())
            .count(),
        reduces: topo
            .iter()
            .filter(|n| n.op() == Ops::Reduce)
            .cloned()
            .collect(),
        loads: topo
            .iter()
            .filter(|n| n.op() == Ops::Load && n.s(0).op() == Ops::Index)
            .map(|n| (n.s(0).s(1).clone(), n.dtype()))
            .collect(),
        store,
    }
}

/// tinygrad's hand-coded optimizer, for a CPU with 4-lane 32-bit vectors:
/// - elementwise: the innermost output axis (contiguous in the output) as vector lanes, two
///   vectors per iteration; without one, the innermost short output axes unrolled;
/// - a reduction whose inner output axis is contiguous or broadcast in every input (a matmul's
///   `j`, `x.sum(0)`'s columns): that axis upcast to 2 vectors, another output axis upcast by 4
///   (a 4x8 register tile, loads reused across it), and the reduce unrolled when the tile has
///   few accumulators;
/// - a reduction along a contiguous axis (`x.sum(1)`, a full sum): unrolled into 4 vector
///   accumulators;
/// - a small window (<= 16 elements per output, pooling's): every window range unrolled and the
///   output axis as vector lanes, strided loads gathered;
/// - any other reduction: its innermost range as gathered vector lanes;
/// - anything else: left alone.
pub fn heuristic(ast: &UOp) -> KernelOpts {
    let mut opts = KernelOpts::default();
    let a = analyze(ast);
    let Some((store_idx, store_dt)) = a.store.clone() else {
        return opts;
    };
    if a.reduces.len() > 1 {
        return opts;
    }
    let w = VECTOR_WIDTH;
    let coeff = |e: &UOp, r: &UOp| affine_coeff(e, r, &mut HashMap::new());
    let size = |r: &UOp| range_size(r).unwrap_or(0);
    // The inner output axis: contiguous in the output.
    let inner = a
        .out
        .iter()
        .rev()
        .find(|r| coeff(&store_idx, r) == Some(1))
        .cloned();
    let Some(red) = a.reduces.first() else {
        // Elementwise.
        if let Some(r) = inner
            && vector_io(store_dt)
            && size(&r) >= w
        {
            // Long arithmetic chains (erf's polynomials, GELU) are latency-bound with two
            // vectors in flight: four interleaved chains fill the FMA pipelines.
            let unroll = if a.float_alu >= LONG_CHAIN_ALU_OPS && size(&r) >= 8 * w {
                4
            } else {
                2
            };
            let lanes = if size(&r) >= 4 * w {
                vec![w, unroll]
            } else if size(&r).is_multiple_of(w) && size(&r) / w >= 2 {
                // a short row of whole vectors (8 or 12 floats: an 8x8 or 12x12 map's) taken whole
                vec![w, size(&r) / w]
            } else {
                vec![w]
            };
            opts.splits.push(Split {
                axis: range_id(&r),
                lanes,
                vector: true,
            });
            // A load that depends on the vector axis and another output axis other than
            // linearly (`x[h // 2][w // 2]`: a pooled tensor broadcast back over its windows,
            // as max_pool2d's gradient is computed): that other axis unrolled by 2, so two
            // neighbouring rows share the gathered loads (beautiful_mnist's pool gradient
            // over 512x32x20x20: 4.1 -> 2.6 ms).
            if let Some(o) = a.out.iter().rev().find(|o| {
                **o != r
                    && size(o) >= 2
                    && size(o).is_multiple_of(2)
                    && a.loads
                        .iter()
                        .any(|(idx, _)| coeff(idx, &r).is_none() && coeff(idx, o).is_none())
            }) {
                opts.splits.push(Split {
                    axis: range_id(o),
                    lanes: vec![2],
                    vector: false,
                });
            }
            // Short rows (under 4 vectors: feature maps of 4x4 to 15x15) with nothing else
            // unrolled: 4 rows (or 2) per iteration, so each loop iteration has several
            // vectors to work on and loads broadcast along the rows (a channel's BatchNorm
            // statistics) are shared (beautiful_mnist's BatchNorm kernels over 512x64x8x8:
            // 1.67 -> 1.04 ms; found by BEAM, ~2.4 ms of its step in all).
            if opts.splits.len() == 1
                && size(&r) < 4 * w
                && let Some(o) = a.out.iter().rev().find(|o| **o != r)
                && let Some(f) = [4, 2]
                    .into_iter()
                    .find(|f| size(o) >= *f && size(o).is_multiple_of(*f))
            {
                opts.splits.push(Split {
                    axis: range_id(o),
                    lanes: vec![f],
                    vector: false,
                });
            }
        } else {
            // No vector axis (the contiguous output axis is shorter than a vector: a pooling
            // gradient's 2x2 window, stored in window layout): the short innermost output
            // axes unrolled, so each iteration computes a whole window instead of looping
            // twice over two elements.
            let mut unrolled = 1;
            for r in a.out.iter().rev() {
                let n = size(r);
                if !(2..=SHORT_AXIS).contains(&n) || unrolled * n > SHORT_AXES_UNROLL {
                    break;
                }
                unrolled *= n;
                opts.splits.push(Split {
                    axis: range_id(r),
                    lanes: vec![n],
                    vector: false,
                });
            }
        }
        return opts;
    };
    let red_ranges: Vec<UOp> = red.src()[1..].to_vec();
    let vec_dt_ok = vector_io(store_dt) && vector_memory(red.dtype());
    let all_vector_loads = a.loads.iter().all(|(_, dt)| vector_io(*dt));
    // A vector output axis: every load is contiguous or constant along it.
    if let Some(j) = inner.clone()
        && vec_dt_ok
        && size(&j) >= w
        && a.loads
            .iter()
            .all(|(i, _)| matches!(coeff(i, &j), Some(0 | 1)))
        && a.loads.iter().any(|(i, _)| coeff(i, &j) == Some(1))
    {
        let lanes = if size(&j) >= 2 * w {
            vec![w, 2]
        } else {
            vec![w]
        };
        let mut accs = lanes[1..].iter().product::<usize>();
        opts.splits.push(Split {
            axis: range_id(&j),
            lanes,
            vector: true,
        });
        // Register tiling: the other output axis with the most reuse (the largest).
        if let Some(i) = a
            .out
            .iter()
            .filter(|r| **r != j && size(r) >= 4)
            .max_by_key(|r| size(r))
        {
            opts.splits.push(Split {
                axis: range_id(i),
                lanes: vec![4],
                vector: false,
            });
            accs *= 4;
            // The vector axis outermost: one column panel of the contiguous input stays in
            // cache while every row tile streams past it (and threads split the panels).
            if a.out.len() == 2 && std::env::var("OPT_ORDER").map_or(true, |v| v != "0") {
                opts.order = Some(vec![range_id(&j), range_id(i)]);
            }
        }
        // Few accumulators: unroll the innermost reduce range for independent chains.
        if accs < 4
            && let Some(k) = red_ranges.iter().max_by_key(|r| range_id(r))
            && size(k) >= 4
        {
            opts.splits.push(Split {
                axis: range_id(k),
                lanes: vec![4 / accs.max(1)],
                vector: false,
            });
        }
        return opts;
    }
    // A vector reduce axis: contiguous (or constant) in every load.
    if let Some(k) = red_ranges
        .iter()
        .rev()
        .find(|k| {
            a.loads.iter().any(|(i, _)| coeff(i, k) == Some(1))
                && a.loads
                    .iter()
                    .all(|(i, _)| matches!(coeff(i, k), Some(0 | 1)))
        })
        .cloned()
        && vector_memory(red.dtype())
        && a.loads.iter().all(|(_, dt)| vector_io(*dt))
        && size(&k) >= w
    {
        if size(&k) <= SHORT_DOT {
            // A short dot product (attention's `q . k` over a head's 32-64 values): one vector
            // accumulator (four would cost more in their final horizontal sum than the
            // products), and four outputs of another axis at once when some load doesn't
            // depend on it (the query row reused across four keys: independent chains).
            opts.splits.push(Split {
                axis: range_id(&k),
                lanes: vec![w],
                vector: true,
            });
            if let Some(i) = a.out.iter().rev().find(|r| {
                size(r) >= 4
                    && size(r).is_multiple_of(4)
                    && a.loads.iter().any(|(idx, _)| coeff(idx, r) == Some(0))
            }) {
                opts.splits.push(Split {
                    axis: range_id(i),
                    lanes: vec![4],
                    vector: false,
                });
            }
            opts.order = memory_order(&a);
            return opts;
        }
        let lanes = if size(&k) >= 4 * w {
            vec![w, 4]
        } else {
            vec![w]
        };
        opts.splits.push(Split {
            axis: range_id(&k),
            lanes,
            vector: true,
        });
        opts.order = memory_order(&a);
    } else if red_ranges.iter().map(size).product::<usize>() <= SMALL_REDUCE
        && red_ranges.iter().all(|k| size(k) >= 2)
    {
        // A small window (pooling's 2x2): every reduce range unrolled (no loops of two
        // iterations), and the inner output axis as vector lanes even when the loads are
        // strided along it (gathered lane by lane; the arithmetic is SIMD).
        for k in &red_ranges {
            opts.splits.push(Split {
                axis: range_id(k),
                lanes: vec![size(k)],
                vector: false,
            });
        }
        if let Some(j) = inner
            && vec_dt_ok
            && all_vector_loads
            && size(&j) >= w
        {
            opts.splits.push(Split {
                axis: range_id(&j),
                lanes: vec![w],
                vector: true,
            });
        }
    } else if let Some(k) = red_ranges.iter().max_by_key(|r| range_id(r))
        && size(k) >= w
    {
        // No contiguous reduce axis (a load like `x // 2` of a pooling gradient): the
        // innermost reduce range still runs as vector lanes, its loads gathered lane by lane,
        // so the arithmetic (divisions included) is SIMD and the lanes are independent
        // accumulator chains.
        opts.splits.push(Split {
            axis: range_id(k),
            lanes: vec![w],
            vector: vector_memory(red.dtype()) && all_vector_loads,
        });
    }
    opts
}

/// For a reduction along a contiguous axis with several output ranges: the output ranges
/// nested in memory order (largest stride in the loads outermost) when the scheduled order is
/// not, so that consecutive outputs read neighbouring rows. BatchNorm's per-channel partial sums
/// over `(N, C, H, W)` are scheduled channel-major: each output row is a short run of `H*W`
/// floats, the next one `C*H*W` further on, and a thread walks the whole tensor in short
/// runs (measured: 2.9 -> 1.6 ms for 20 MB with 2 threads on a Zen 2). The new outermost range
/// must be at least as large as [`MIN_OUTER_ON_REORDER`] (threads split it) or the old one.
fn memory_order(a: &Analysis) -> Option<Vec<usize>> {
    if a.out.len() < 2 {
        return None;
    }
    let mut stride = Vec::with_capacity(a.out.len());
    for r in &a.out {
        let mut most = 0i64;
        for (idx, _) in &a.loads {
            most = most.max(affine_coeff(idx, r, &mut HashMap::new())?.abs());
        }
        stride.push(most);
    }
    let mut order: Vec<usize> = (0..a.out.len()).collect();
    // stable: equal strides keep the scheduled order
    order.sort_by_key(|&i| std::cmp::Reverse(stride[i]));
    let first = |i: usize| range_size(&a.out[i]).unwrap_or(0);
    if order[0] == 0 || first(order[0]) < first(0).min(MIN_OUTER_ON_REORDER) {
        return None;
    }
    Some(order.iter().map(|&i| range_id(&a.out[i])).collect())
}

/// See [`memory_order`].
const MIN_OUTER_ON_REORDER: usize = 64;

/// Output axes up to this size count as short: an elementwise kernel without a vector axis
/// unrolls its innermost short axes (see [`heuristic`]).
const SHORT_AXIS: usize = 4;

/// The most outputs those unrolled short axes compute per iteration.
const SHORT_AXES_UNROLL: usize = 16;

/// Contiguous reductions up to this length run as one vector accumulator (see [`heuristic`]).
const SHORT_DOT: usize = 64;

/// Reductions over at most this many elements per output are unrolled entirely.
const SMALL_REDUCE: usize = 16;

/// The lane counts BEAM search tries for one split (innermost first).
pub const BEAM_LANES: [&[usize]; 6] = [&[2], &[3], &[4], &[8], &[4, 2], &[4, 4]];

/// The next steps of BEAM search from `opts` (tinygrad's `get_kernel_actions`): `opts` plus one
/// more split of a range it does not split yet — [`BEAM_LANES`] lanes, and as SIMD vectors
/// when the first lane count is [`VECTOR_WIDTH`] and no split is a vector yet — or, while the
/// loop order is unset and there are several output ranges, each other output range moved
/// outermost. Only opts that [`apply_opts`] accepts are returned, without duplicates.
pub fn beam_moves(ast: &UOp, opts: &KernelOpts) -> Vec<KernelOpts> {
    let topo = ast.toposort();
    let mut ranges: Vec<UOp> = topo
        .iter()
        .filter(|n| n.op() == Ops::Range)
        .cloned()
        .collect();
    ranges.sort_by_key(range_id);
    let split: HashSet<usize> = opts.splits.iter().map(|s| s.axis).collect();
    let has_vector = opts.splits.iter().any(|s| s.vector);
    let mut out: Vec<KernelOpts> = Vec::new();
    let mut push = |o: KernelOpts| {
        if !out.contains(&o) && apply_opts(ast, &o).is_ok() {
            out.push(o);
        }
    };
    for r in &ranges {
        let (id, n) = (range_id(r), range_size(r).unwrap_or(0));
        if split.contains(&id) || n < 2 {
            continue;
        }
        for lanes in BEAM_LANES {
            if lanes.iter().product::<usize>() > n {
                continue;
            }
            let vectors: &[bool] = if !has_vector && lanes[0] == VECTOR_WIDTH {
                &[false, true]
            } else {
                &[false]
            };
            for &vector in vectors {
                let mut o = opts.clone();
                o.splits.push(Split {
                    axis: id,
                    lanes: lanes.to_vec(),
                    vector,
                });
                push(o);
            }
        }
    }
    let outs = analyze(ast).out;
    if opts.order.is_none() && outs.len() >= 2 {
        for first in outs.iter().skip(1) {
            let mut order = vec![range_id(first)];
            order.extend(outs.iter().filter(|r| *r != first).map(range_id));
            let mut o = opts.clone();
            o.order = Some(order);
            push(o);
        }
    }
    out
}

impl std::fmt::Display for KernelOpts {
    /// The on-disk form (BEAM's cache): `s<axis>:<lanes, x-separated>[:v]` per split, then
    /// `o<ids, comma-separated>` for an order; `-` for no opts. [`KernelOpts::parse`] reads it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts: Vec<String> = self
            .splits
            .iter()
            .map(|s| {
                let lanes: Vec<String> = s.lanes.iter().map(usize::to_string).collect();
                format!(
                    "s{}:{}{}",
                    s.axis,
                    lanes.join("x"),
                    if s.vector { ":v" } else { "" }
                )
            })
            .collect();
        if let Some(order) = &self.order {
            let ids: Vec<String> = order.iter().map(usize::to_string).collect();
            parts.push(format!("o{}", ids.join(",")));
        }
        if parts.is_empty() {
            write!(f, "-")
        } else {
            write!(f, "{}", parts.join(" "))
        }
    }
}

impl KernelOpts {
    /// Parses the [`Display`](std::fmt::Display) form.
    ///
    /// ```
    /// use tinygrad_codegen::opt::{KernelOpts, Split};
    /// let o = KernelOpts {
    ///     splits: vec![Split { axis: 3, lanes: vec![4, 2], vector: true }],
    ///     order: Some(vec![3, 1]),
    /// };
    /// assert_eq!(o.to_string(), "s3:4x2:v o3,1");
    /// assert_eq!(KernelOpts::parse(&o.to_string()), Ok(o));
    /// assert!(KernelOpts::parse("s3:4x").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<KernelOpts, String> {
        let mut opts = KernelOpts::default();
        let text = text.trim();
        if text == "-" {
            return Ok(opts);
        }
        let num = |t: &str| {
            t.parse::<usize>()
                .map_err(|e| format!("bad number {t:?} in {text:?}: {e}"))
        };
        for part in text.split_whitespace() {
            if let Some(rest) = part.strip_prefix('s') {
                let fields: Vec<&str> = rest.split(':').collect();
                let vector = match fields.get(2) {
                    None => false,
                    Some(&"v") if fields.len() == 3 => true,
                    _ => return Err(format!("bad split {part:?} in {text:?}")),
                };
                let (Some(axis), Some(lanes)) = (fields.first(), fields.get(1)) else {
                    return Err(format!("bad split {part:?} in {text:?}"));
                };
                opts.splits.push(Split {
                    axis: num(axis)?,
                    lanes: lanes.split('x').map(num).collect::<Result<_, _>>()?,
                    vector,
                });
            } else if let Some(rest) = part.strip_prefix('o') {
                if opts.order.is_some() {
                    return Err(format!("two orders in {text:?}"));
                }
                opts.order = Some(rest.split(',').map(num).collect::<Result<_, _>>()?);
            } else {
                return Err(format!("unknown opt {part:?} in {text:?}"));
            }
        }
        Ok(opts)
    }
}

// ---------------------------------------------------------------------------------------------
// Applying opts

/// One lane axis after a split.
#[derive(Clone, Debug)]
struct LaneAxis {
    range: UOp,
    size: usize,
}

/// Applies `opts` to a kernel AST and expands the lane axes. Returns the new AST, or why the
/// opts do not fit this kernel.
pub fn apply_opts(ast: &UOp, opts: &KernelOpts) -> Result<UOp, String> {
    if opts.is_empty() {
        return Ok(ast.clone());
    }
    let mut next_id = ast
        .toposort()
        .iter()
        .filter(|n| n.op() == Ops::Range)
        .map(|r| range_id(r) + 1)
        .max()
        .unwrap_or(0);
    let mut ast = ast.clone();
    let mut lanes: Vec<LaneAxis> = Vec::new();
    let mut vector: Option<UOp> = None;
    // Reductions split with a remainder (a main part and a tail over fresh copies of the other
    // ranges): another split of them would have to split both consistently, so it is refused.
    // A split without a remainder leaves one reduction that can be split again.
    let mut split_reduces: HashSet<UOp> = HashSet::new();
    for sp in &opts.splits {
        let topo = ast.toposort();
        let r = topo
            .iter()
            .find(|n| n.op() == Ops::Range && range_id(n) == sp.axis)
            .cloned()
            .ok_or_else(|| format!("no range {} to split", sp.axis))?;
        let n = range_size(&r).ok_or("symbolic range size")?;
        let p: usize = sp.lanes.iter().product();
        if sp.lanes.is_empty() || sp.lanes.contains(&0) || p < 2 || n < p {
            return Err(format!(
                "can't split range {} of {n} into {:?}",
                sp.axis, sp.lanes
            ));
        }
        if sp.vector && (sp.lanes[0] != VECTOR_WIDTH || vector.is_some()) {
            return Err("one vector axis of the vector width".into());
        }
        let kind = range_kind(&r);
        let reduce = kind == AxisKind::Reduce;
        let lane_kind = if reduce {
            AxisKind::Unroll
        } else {
            AxisKind::Upcast
        };
        let mut lane_expr: Option<UOp> = None;
        let mut lane_ranges = Vec::new();
        let mut stride = 1usize;
        for (i, &sz) in sp.lanes.iter().enumerate() {
            let l = UOp::range(sz as i64, next_id, lane_kind);
            next_id += 1;
            if sp.vector && i == 0 {
                vector = Some(l.clone());
            } else {
                lanes.push(LaneAxis {
                    range: l.clone(),
                    size: sz,
                });
            }
            let term = if stride == 1 {
                l.clone()
            } else {
                &l * (stride as i64)
            };
            lane_expr = Some(match lane_expr {
                None => term,
                Some(e) => e + term,
            });
            lane_ranges.push(l);
            stride *= sz;
        }
        let lane_expr = lane_expr.expect("at least one lane");
        if !reduce {
            // Split entirely into lanes: no outer loop of one iteration is left (a loop in the
            // generated code, whose header every lane's values would have to live across),
            // unless a loop order names it.
            if n == p && opts.order.is_none() {
                ast = ast.substitute(&HashMap::from([(r, lane_expr)]));
                continue;
            }
            let o = UOp::range(n.div_ceil(p) as i64, sp.axis, kind);
            let base = if n % p == 0 {
                &o * (p as i64)
            } else {
                (&o * (p as i64)).minimum((n - p) as i64)
            };
            ast = ast.substitute(&HashMap::from([(r, base + lane_expr)]));
            continue;
        }
        let (m, t) = (n / p, n % p);
        let o = UOp::range(m as i64, sp.axis, kind);
        let mut map = HashMap::new();
        for red in topo
            .iter()
            .filter(|x| x.op() == Ops::Reduce && x.src()[1..].contains(&r))
        {
            if split_reduces.contains(red) {
                return Err("one split per reduction".into());
            }
            let Arg::Op(op) = red.arg() else {
                return Err("Reduce without op".into());
            };
            let val = red.s(0);
            // Split entirely into lanes (m == 1): no loop of one iteration is left.
            let whole = m == 1;
            let main_val = val.substitute(&HashMap::from([(
                r.clone(),
                if whole {
                    lane_expr.clone()
                } else {
                    &o * (p as i64) + lane_expr.clone()
                },
            )]));
            let mut src = vec![main_val];
            src.extend(red.src()[1..].iter().filter_map(|x| {
                if *x != r {
                    Some(x.clone())
                } else if whole {
                    None
                } else {
                    Some(o.clone())
                }
            }));
            src.extend(lane_ranges.iter().cloned());
            let main = UOp::new(Ops::Reduce, red.dtype(), src, red.arg().clone());
            let result = if t == 0 {
                main
            } else {
                // The remainder: the last t iterations, with fresh copies of the other ranges.
                let tr = UOp::range(t as i64, next_id, AxisKind::Reduce);
                next_id += 1;
                let mut tmap = HashMap::new();
                tmap.insert(r.clone(), UOp::index((m * p) as i64) + tr.clone());
                let mut tail_src = vec![];
                for x in &red.src()[1..] {
                    if *x == r {
                        tail_src.push(tr.clone());
                    } else {
                        let f = UOp::range(x.s(0).clone(), next_id, AxisKind::Reduce);
                        next_id += 1;
                        tmap.insert(x.clone(), f.clone());
                        tail_src.push(f);
                    }
                }
                let mut src = vec![val.substitute(&tmap)];
                src.extend(tail_src);
                let tail = UOp::new(Ops::Reduce, red.dtype(), src, red.arg().clone());
                split_reduces.insert(main.clone());
                split_reduces.insert(tail.clone());
                main.alu(*op, &[tail])
            };
            map.insert(red.clone(), result);
        }
        if map.is_empty() {
            return Err(format!("reduce range {} is in no reduction", sp.axis));
        }
        ast = ast.substitute(&map);
    }
    if let Some(order) = &opts.order {
        ast = reorder_outputs(&ast, order)?;
    }
    Ok(Expander::new(lanes, vector).run(&ast))
}

/// Renumbers the output ranges so they nest in `order` (outermost first).
fn reorder_outputs(ast: &UOp, order: &[usize]) -> Result<UOp, String> {
    let topo = ast.toposort();
    let in_reduce: HashSet<UOp> = topo
        .iter()
        .filter(|n| n.op() == Ops::Reduce)
        .flat_map(|n| n.src()[1..].to_vec())
        .collect();
    let outs: Vec<UOp> = topo
        .iter()
        .filter(|n| n.op() == Ops::Range && !in_reduce.contains(*n))
        .filter(|n| matches!(range_kind(n), AxisKind::Loop | AxisKind::Global))
        .cloned()
        .collect();
    let mut ids: Vec<usize> = outs.iter().map(range_id).collect();
    ids.sort_unstable();
    let mut want = order.to_vec();
    want.sort_unstable();
    if want != ids {
        return Err(format!("order {order:?} is not a permutation of {ids:?}"));
    }
    let map: HashMap<UOp, UOp> = outs
        .iter()
        .map(|r| {
            let pos = order
                .iter()
                .position(|&x| x == range_id(r))
                .expect("checked");
            (r.clone(), r.with_arg(Arg::Range(ids[pos], range_kind(r))))
        })
        .collect();
    Ok(ast.substitute(&map))
}

// ---------------------------------------------------------------------------------------------
// Expansion of lane axes

/// One value of an expanded node at one combination of its non-vector lanes.
#[derive(Clone, Debug)]
enum Val {
    /// The same for every vector lane.
    S(UOp),
    /// One scalar per vector lane.
    L(Vec<UOp>),
    /// A vector UOp (`dtype.vec(VECTOR_WIDTH)`).
    V(UOp),
}

/// An expanded node: its values for every combination of the (non-vector) lane axes it depends
/// on (`axes`, row-major, the last axis fastest).
#[derive(Clone, Debug)]
struct Ex {
    axes: Vec<usize>,
    vals: Vec<Val>,
}

struct Expander {
    lanes: Vec<LaneAxis>,
    vector: Option<UOp>,
    memo: HashMap<UOp, Ex>,
    coeff_memo: HashMap<UOp, Option<i64>>,
}

impl Expander {
    fn new(lanes: Vec<LaneAxis>, vector: Option<UOp>) -> Self {
        Expander {
            lanes,
            vector,
            memo: HashMap::new(),
            coeff_memo: HashMap::new(),
        }
    }

    fn w(&self) -> usize {
        VECTOR_WIDTH
    }

    /// The entry of `ex` at the full lane assignment `at` (one value per lane axis).
    fn at<'e>(&self, ex: &'e Ex, at: &[usize]) -> &'e Val {
        let mut i = 0;
        for &a in &ex.axes {
            i = i * self.lanes[a].size + at[a];
        }
        &ex.vals[i]
    }

    /// Every assignment of the lane axes `axes` (others 0), row-major.
    fn combos(&self, axes: &[usize]) -> Vec<Vec<usize>> {
        let mut out = vec![vec![0usize; self.lanes.len()]];
        for &a in axes {
            let mut next = Vec::with_capacity(out.len() * self.lanes[a].size);
            for c in &out {
                for v in 0..self.lanes[a].size {
                    let mut c = c.clone();
                    c[a] = v;
                    next.push(c);
                }
            }
            out = next;
        }
        out
    }

    fn to_v(&self, v: &Val) -> UOp {
        match v {
            Val::V(x) => x.clone(),
            Val::S(x) => UOp::new(
                Ops::Vectorize,
                x.dtype().vec(self.w()),
                vec![x.clone(); self.w()],
                Arg::None,
            ),
            Val::L(xs) => UOp::new(
                Ops::Vectorize,
                xs[0].dtype().vec(self.w()),
                xs.clone(),
                Arg::None,
            ),
        }
    }

    fn to_l(&self, v: &Val) -> Vec<UOp> {
        match v {
            Val::S(x) => vec![x.clone(); self.w()],
            Val::L(xs) => xs.clone(),
            Val::V(x) => (0..self.w())
                .map(|k| {
                    UOp::new(
                        Ops::Gep,
                        x.dtype().scalar(),
                        vec![x.clone()],
                        Arg::Int(k as i64),
                    )
                })
                .collect(),
        }
    }

    /// Builds `op` (scalar result dtype `dt`) over expanded sources.
    fn build(&self, op: Ops, dt: DType, arg: &Arg, vals: &[Val]) -> Val {
        if vals.iter().all(|v| matches!(v, Val::S(_))) {
            let src: Vec<UOp> = vals
                .iter()
                .map(|v| match v {
                    Val::S(x) => x.clone(),
                    _ => unreachable!("all scalar"),
                })
                .collect();
            return Val::S(UOp::new(op, dt, src, arg.clone()));
        }
        let src_dts: Vec<DType> = vals
            .iter()
            .map(|v| match v {
                Val::S(x) | Val::V(x) => x.dtype().scalar(),
                Val::L(xs) => xs[0].dtype(),
            })
            .collect();
        let shift = matches!(op, Ops::Shl | Ops::Shr);
        let scalar_shift = shift && matches!(vals[1], Val::S(_));
        // Per-lane 32-bit values (computed from lane indices, e.g. a counter for a random
        // generator) are packed into a vector once, so the ops after them run as vectors too;
        // bool lanes are left alone (their vector form is a comparison's mask).
        let packable = vals.iter().any(|v| matches!(v, Val::L(_)))
            && src_dts
                .iter()
                .all(|d| matches!(d.kind(), Scalar::Float32 | Scalar::Int32 | Scalar::UInt32));
        if (vals.iter().any(|v| matches!(v, Val::V(_))) || packable)
            && vector_native(op, dt, &src_dts, scalar_shift)
        {
            let src: Vec<UOp> = vals
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Val::S(x) if shift && i == 1 => x.clone(),
                    v => self.to_v(v),
                })
                .collect();
            return Val::V(UOp::new(op, dt.vec(self.w()), src, arg.clone()));
        }
        let lanes: Vec<Vec<UOp>> = vals.iter().map(|v| self.to_l(v)).collect();
        Val::L(
            (0..self.w())
                .map(|k| {
                    let src: Vec<UOp> = lanes.iter().map(|l| l[k].clone()).collect();
                    UOp::new(op, dt, src, arg.clone())
                })
                .collect(),
        )
    }

    fn union_axes(&self, exs: &[&Ex]) -> Vec<usize> {
        let mut axes: Vec<usize> = exs.iter().flat_map(|e| e.axes.iter().copied()).collect();
        axes.sort_unstable();
        axes.dedup();
        axes
    }

    fn coeff_vec(&mut self, idx: &UOp) -> Option<i64> {
        match &self.vector {
            Some(v) => affine_coeff(idx, &v.clone(), &mut self.coeff_memo),
            None => Some(0),
        }
    }

    fn run(mut self, ast: &UOp) -> UOp {
        for (i, l) in self.lanes.iter().enumerate() {
            let ex = Ex {
                axes: vec![i],
                vals: (0..l.size).map(|v| Val::S(UOp::index(v as i64))).collect(),
            };
            self.memo.insert(l.range.clone(), ex);
        }
        if let Some(v) = &self.vector {
            let ex = Ex {
                axes: vec![],
                vals: vec![Val::L(
                    (0..self.w()).map(|k| UOp::index(k as i64)).collect(),
                )],
            };
            self.memo.insert(v.clone(), ex);
        }
        let topo = ast.toposort();
        for n in &topo {
            if self.memo.contains_key(n) {
                continue;
            }
            let ex = match n.op() {
                Ops::Load if n.s(0).op() == Ops::Index => self.load(n),
                Ops::Store => self.store(n),
                Ops::Reduce => self.reduce(n),
                Ops::Sink => {
                    let mut stores = Vec::new();
                    for s in n.src() {
                        for v in &self.memo[s].vals {
                            match v {
                                Val::S(x) | Val::V(x) => stores.push(x.clone()),
                                Val::L(xs) => stores.extend(xs.iter().cloned()),
                            }
                        }
                    }
                    Ex {
                        axes: vec![],
                        vals: vec![Val::S(n.with_src(stores))],
                    }
                }
                _ if n.src().is_empty() => Ex {
                    axes: vec![],
                    vals: vec![Val::S(n.clone())],
                },
                _ => self.generic(n),
            };
            self.memo.insert(n.clone(), ex);
        }
        match &self.memo[ast].vals[0] {
            Val::S(x) => x.clone(),
            _ => unreachable!("the sink is scalar"),
        }
    }

    fn generic(&mut self, n: &UOp) -> Ex {
        let srcs: Vec<Ex> = n.src().iter().map(|s| self.memo[s].clone()).collect();
        let axes = self.union_axes(&srcs.iter().collect::<Vec<_>>());
        let vals = self
            .combos(&axes)
            .iter()
            .map(|c| {
                let v: Vec<Val> = srcs.iter().map(|e| self.at(e, c).clone()).collect();
                self.build(n.op(), n.dtype(), n.arg(), &v)
            })
            .collect();
        Ex { axes, vals }
    }

    fn index_parts(&self, index: &UOp) -> (UOp, Ex, Option<Ex>) {
        let g = index.s(0).clone();
        let idx = self.memo[index.s(1)].clone();
        let gate = index.src().get(2).map(|v| self.memo[v].clone());
        (g, idx, gate)
    }

    fn mk_index(g: &UOp, idx: &UOp, gate: Option<&UOp>) -> UOp {
        let mut src = vec![g.clone(), idx.simplify()];
        if let Some(v) = gate {
            src.push(v.simplify());
        }
        UOp::new(Ops::Index, g.dtype(), src, Arg::None)
    }

    fn load(&mut self, n: &UOp) -> Ex {
        let index = n.s(0);
        let (g, idx, gate) = self.index_parts(index);
        let contiguous = self.coeff_vec(index.s(1)) == Some(1);
        let mut parts = vec![&idx];
        if let Some(gx) = &gate {
            parts.push(gx);
        }
        let axes = self.union_axes(&parts);
        let dt = n.dtype();
        let mk_load = |i: &UOp, gv: Option<&UOp>, dt: DType| {
            UOp::new(
                Ops::Load,
                dt,
                vec![Self::mk_index(&g, i, gv)],
                n.arg().clone(),
            )
        };
        let vals = self
            .combos(&axes)
            .iter()
            .map(|c| {
                let iv = self.at(&idx, c);
                let gv = gate.as_ref().map(|gx| self.at(gx, c));
                let gate_scalar = match gv {
                    None => Some(None),
                    Some(Val::S(x)) => Some(Some(x)),
                    _ => None,
                };
                match (iv, gate_scalar) {
                    (Val::S(i), Some(gs)) => Val::S(mk_load(i, gs, dt)),
                    (Val::L(ls), Some(gs)) if contiguous && vector_io(dt) => {
                        Val::V(mk_load(&ls[0], gs, dt.vec(self.w())))
                    }
                    _ => {
                        let il = self.to_l(iv);
                        let gl = gv.map(|g| self.to_l(g));
                        Val::L(
                            (0..self.w())
                                .map(|k| mk_load(&il[k], gl.as_ref().map(|g| &g[k]), dt))
                                .collect(),
                        )
                    }
                }
            })
            .collect();
        Ex { axes, vals }
    }

    fn store(&mut self, n: &UOp) -> Ex {
        let index = n.s(0);
        let (g, idx, gate) = self.index_parts(index);
        let value = self.memo[n.s(1)].clone();
        let contiguous = self.coeff_vec(index.s(1)) == Some(1);
        let mut parts = vec![&idx, &value];
        if let Some(gx) = &gate {
            parts.push(gx);
        }
        let axes = self.union_axes(&parts);
        let vals = self
            .combos(&axes)
            .iter()
            .map(|c| {
                let iv = self.at(&idx, c);
                let vv = self.at(&value, c);
                let gv = gate.as_ref().map(|gx| self.at(gx, c));
                let st = |i: &UOp, gv: Option<&UOp>, v: UOp| {
                    UOp::new(
                        Ops::Store,
                        DType::VOID,
                        vec![Self::mk_index(&g, i, gv), v],
                        n.arg().clone(),
                    )
                };
                match (iv, vv, gv) {
                    (Val::S(i), Val::S(v), None | Some(Val::S(_))) => {
                        let gs = gv.map(|g| self.to_l(g)[0].clone());
                        Val::S(st(i, gs.as_ref(), v.clone()))
                    }
                    (Val::L(ls), vv, None | Some(Val::S(_)))
                        if contiguous && vector_io(n.s(1).dtype()) =>
                    {
                        let gs = gv.map(|g| self.to_l(g)[0].clone());
                        Val::S(st(&ls[0], gs.as_ref(), self.to_v(vv)))
                    }
                    _ => {
                        let il = self.to_l(iv);
                        let vl = self.to_l(vv);
                        let gl = gv.map(|g| self.to_l(g));
                        Val::L(
                            (0..self.w())
                                .map(|k| st(&il[k], gl.as_ref().map(|g| &g[k]), vl[k].clone()))
                                .collect(),
                        )
                    }
                }
            })
            .collect();
        Ex { axes, vals }
    }

    /// Folds `vals` with `op` pairwise (a balanced tree).
    fn fold(&self, op: Ops, dt: DType, mut vals: Vec<Val>) -> Val {
        while vals.len() > 1 {
            let mut next = Vec::with_capacity(vals.len().div_ceil(2));
            let mut it = vals.into_iter();
            while let Some(a) = it.next() {
                match it.next() {
                    Some(b) => next.push(self.build(op, dt, &Arg::None, &[a, b])),
                    None => next.push(a),
                }
            }
            vals = next;
        }
        vals.pop().expect("at least one value")
    }

    fn reduce(&mut self, n: &UOp) -> Ex {
        let Arg::Op(op) = n.arg().clone() else {
            panic!("Reduce without op")
        };
        let dt = n.dtype();
        let value = self.memo[n.s(0)].clone();
        let lane_of: HashMap<UOp, usize> = self
            .lanes
            .iter()
            .enumerate()
            .map(|(i, l)| (l.range.clone(), i))
            .collect();
        let mut real = Vec::new();
        let mut reduced = Vec::new();
        let mut vec_reduced = false;
        for r in &n.src()[1..] {
            if let Some(&a) = lane_of.get(r) {
                reduced.push(a);
            } else if Some(r) == self.vector.as_ref() {
                vec_reduced = true;
            } else {
                real.push(r.clone());
            }
        }
        let axes: Vec<usize> = value
            .axes
            .iter()
            .copied()
            .filter(|a| !reduced.contains(a))
            .collect();
        let acc = |x: UOp| {
            if real.is_empty() {
                x
            } else {
                let mut src = vec![x.clone()];
                src.extend(real.iter().cloned());
                UOp::new(Ops::Reduce, x.dtype(), src, Arg::Op(op))
            }
        };
        let vals = self
            .combos(&axes)
            .iter()
            .map(|c| {
                let mut accs = Vec::new();
                for u in self.combos(&reduced) {
                    let mut full = c.clone();
                    for &a in &reduced {
                        full[a] = u[a];
                    }
                    let e = self.at(&value, &full).clone();
                    let e = match e {
                        Val::V(x) if !vector_native(op, dt, &[dt, dt], false) => {
                            Val::L(self.to_l(&Val::V(x)))
                        }
                        e => e,
                    };
                    let a = match e {
                        Val::S(x) => Val::S(acc(x)),
                        Val::V(x) => Val::V(acc(x)),
                        Val::L(xs) => Val::L(xs.into_iter().map(acc).collect()),
                    };
                    let a = if vec_reduced {
                        let lanes = match &a {
                            Val::S(x) => vec![x.clone(); self.w()],
                            other => self.to_l(other),
                        };
                        self.fold(op, dt, lanes.into_iter().map(Val::S).collect())
                    } else {
                        a
                    };
                    accs.push(a);
                }
                self.fold(op, dt, accs)
            })
            .collect();
        Ex { axes, vals }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affine_coefficients() {
        let r = UOp::range(8i64, 0, AxisKind::Loop);
        let s = UOp::range(4i64, 1, AxisKind::Loop);
        let m = &mut HashMap::new();
        assert_eq!(affine_coeff(&(&r * 16 + &s * 3 + 5), &s, m), Some(3));
        assert_eq!(
            affine_coeff(&(&r * 16 + &s * 3 + 5), &r, &mut HashMap::new()),
            Some(16)
        );
        assert_eq!(affine_coeff(&r.idiv(2), &r, &mut HashMap::new()), None);
        assert_eq!(affine_coeff(&(&r - &s), &s, &mut HashMap::new()), Some(-1));
        assert_eq!(affine_coeff(&(&r * &s), &s, &mut HashMap::new()), None);
    }

    fn global(slot: i64) -> UOp {
        let ptr = DType::FLOAT32.ptr(tinygrad_dtype::AddrSpace::Global);
        UOp::new(Ops::DefineGlobal, ptr, vec![], Arg::Int(slot))
    }

    fn index(buf: &UOp, idx: UOp) -> UOp {
        UOp::new(Ops::Index, buf.dtype(), vec![buf.clone(), idx], Arg::None)
    }

    /// A float32 load of `global(slot)` at `idx`.
    fn load_f32(slot: i64, idx: UOp) -> UOp {
        UOp::new(
            Ops::Load,
            DType::FLOAT32,
            vec![index(&global(slot), idx)],
            Arg::None,
        )
    }

    /// `v` reduced with `op` over `ranges`.
    fn reduce_op(v: UOp, ranges: &[&UOp], op: Ops) -> UOp {
        let mut src = vec![v];
        src.extend(ranges.iter().map(|r| (*r).clone()));
        UOp::new(Ops::Reduce, DType::FLOAT32, src, Arg::Op(op))
    }

    /// The kernel storing `v` into `global(0)` at `idx`.
    fn store_sink(idx: UOp, v: UOp) -> UOp {
        let st = UOp::new(
            Ops::Store,
            DType::VOID,
            vec![index(&global(0), idx), v],
            Arg::None,
        );
        UOp::new(Ops::Sink, DType::VOID, vec![st], Arg::None)
    }

    /// Ranges 0..4 of a 2x2 window kernel: outputs `(i, j)` of sizes `outer`, then the window
    /// `(ky, kx)` of kind `window` (reduced in pooling, output axes in a window-layout gradient).
    fn window_ranges(outer: (i64, i64), window: AxisKind) -> (UOp, UOp, UOp, UOp) {
        (
            UOp::range(outer.0, 0, AxisKind::Loop),
            UOp::range(outer.1, 1, AxisKind::Loop),
            UOp::range(2i64, 2, window),
            UOp::range(2i64, 3, window),
        )
    }

    /// `out[i][j] = op over (ry, rx) of x[2i + ry][2j + rx]`: 2x2 pooling of an 8x16 input.
    fn pooling_kernel(op: Ops) -> UOp {
        let (i, j, ry, rx) = window_ranges((4, 8), AxisKind::Reduce);
        let (out, x) = (global(0), global(1));
        let xi = (&i * 2 + &ry) * 16 + &j * 2 + &rx;
        let v = UOp::new(Ops::Load, DType::FLOAT32, vec![index(&x, xi)], Arg::None);
        let red = UOp::new(Ops::Reduce, DType::FLOAT32, vec![v, ry, rx], Arg::Op(op));
        let st = UOp::new(
            Ops::Store,
            DType::VOID,
            vec![index(&out, &i * 8 + &j), red],
            Arg::None,
        );
        UOp::new(Ops::Sink, DType::VOID, vec![st], Arg::None)
    }

    /// A pooling gradient in window layout, `out[i][j][ky][kx] = x[2i + ky][2j + kx] * g[i][j]`:
    /// the contiguous output axis (kx) is shorter than a vector, so the window axes are unrolled
    /// and no loop of two iterations is left.
    #[test]
    fn elementwise_short_inner_axes_unroll() {
        let (i, j, ky, kx) = window_ranges((5, 10), AxisKind::Loop);
        let x = UOp::new(
            Ops::Load,
            DType::FLOAT32,
            vec![index(&global(1), (&i * 2 + &ky) * 20 + &j * 2 + &kx)],
            Arg::None,
        );
        let g = UOp::new(
            Ops::Load,
            DType::FLOAT32,
            vec![index(&global(2), &i * 10 + &j)],
            Arg::None,
        );
        let out = index(&global(0), &i * 40 + &j * 4 + &ky * 2 + &kx);
        let st = UOp::new(Ops::Store, DType::VOID, vec![out, &x * &g], Arg::None);
        let ast = UOp::new(Ops::Sink, DType::VOID, vec![st], Arg::None);
        let opts = heuristic(&ast);
        let unrolled: Vec<usize> = opts.splits.iter().map(|s| s.axis).collect();
        assert_eq!(unrolled, vec![3, 2], "{opts}");
        let applied = apply_opts(&ast, &opts).expect("the heuristic's opts apply");
        let short_loops = applied
            .toposort()
            .iter()
            .filter(|n| n.op() == Ops::Range && range_size(n) == Some(2))
            .count();
        assert_eq!(short_loops, 0, "a loop of two iterations is left");
    }

    /// `out[i][j] = x[i][j] * g[i // 2][j // 2]` (a pooled tensor broadcast back over its 2x2
    /// windows): `j` as vectors and `i` unrolled by 2, so both rows share the gathered `g`;
    /// without the `// 2` loads, only the vector split.
    #[test]
    fn loads_broadcast_over_windows_unroll_the_row_axis() {
        let i = UOp::range(8i64, 0, AxisKind::Loop);
        let j = UOp::range(16i64, 1, AxisKind::Loop);
        let x = load_f32(1, &i * 16 + &j);
        let kernel = |y: UOp| store_sink(&i * 16 + &j, &x * &y);
        let pooled = kernel(load_f32(2, i.idiv(2) * 8 + j.idiv(2)));
        let opts = heuristic(&pooled);
        let splits: Vec<(usize, bool)> = opts.splits.iter().map(|s| (s.axis, s.vector)).collect();
        assert_eq!(splits, vec![(1, true), (0, false)], "{opts}");
        assert_eq!(opts.splits[1].lanes, vec![2], "{opts}");
        apply_opts(&pooled, &opts).expect("the heuristic's opts apply");
        let plain = heuristic(&kernel(load_f32(2, &i * 16 + &j)));
        let splits: Vec<(usize, bool)> = plain.splits.iter().map(|s| (s.axis, s.vector)).collect();
        assert_eq!(splits, vec![(1, true)], "{plain}");
        // rows of a symbolic count: not split (their size is unknown)
        let n = UOp::new(
            Ops::DefineVar,
            DType::INDEX,
            vec![],
            Arg::Var("n".into(), 1, 64),
        );
        let rows = UOp::range(n, 0, AxisKind::Loop);
        let x = load_f32(1, &rows * 16 + &j);
        let g = load_f32(2, rows.idiv(2) * 8 + j.idiv(2));
        let symbolic = heuristic(&store_sink(&rows * 16 + &j, &x * &g));
        let splits: Vec<(usize, bool)> =
            symbolic.splits.iter().map(|s| (s.axis, s.vector)).collect();
        assert_eq!(splits, vec![(1, true)], "{symbolic}");
    }

    #[test]
    fn short_rows_unroll_the_row_axis() {
        let kernel = |cols: i64| {
            let i = UOp::range(64i64, 0, AxisKind::Loop);
            let j = UOp::range(cols, 1, AxisKind::Loop);
            let v = &load_f32(1, &i * cols + &j) * &load_f32(2, i.clone());
            store_sink(&i * cols + &j, v)
        };
        let short = kernel(8);
        let opts = heuristic(&short);
        let splits: Vec<(usize, Vec<usize>, bool)> = opts
            .splits
            .iter()
            .map(|s| (s.axis, s.lanes.clone(), s.vector))
            .collect();
        assert_eq!(
            splits,
            vec![(1, vec![4, 2], true), (0, vec![4], false)],
            "{opts}"
        );
        apply_opts(&short, &opts).expect("the heuristic's opts apply");
        let long = heuristic(&kernel(32));
        assert_eq!(long.splits.len(), 1, "{long}");
    }

    /// `mask[i] = 0 < x[i]` (ReLU's saved mask), `y[i] = where(mask[i], x[i], 0)`: the bool
    /// store and the bool load are 4-lane vector accesses, not four scalar bytes.
    #[test]
    fn bool_buffers_are_loaded_and_stored_as_vectors() {
        let bool_global = |slot: i64| {
            let ptr = DType::BOOL.ptr(tinygrad_dtype::AddrSpace::Global);
            UOp::new(Ops::DefineGlobal, ptr, vec![], Arg::Int(slot))
        };
        let i = UOp::range(64i64, 0, AxisKind::Loop);
        let x = UOp::new(
            Ops::Load,
            DType::FLOAT32,
            vec![index(&global(1), i.clone())],
            Arg::None,
        );
        let zero = UOp::cnst(DType::FLOAT32, 0.0);
        let positive = UOp::new(
            Ops::CmpLt,
            DType::BOOL,
            vec![zero.clone(), x.clone()],
            Arg::None,
        );
        let store_mask = UOp::new(
            Ops::Store,
            DType::VOID,
            vec![index(&bool_global(0), i.clone()), positive],
            Arg::None,
        );
        let mask = UOp::new(
            Ops::Load,
            DType::BOOL,
            vec![index(&bool_global(2), i.clone())],
            Arg::None,
        );
        let selected = UOp::new(Ops::Where, DType::FLOAT32, vec![mask, x, zero], Arg::None);
        let store_selected = UOp::new(
            Ops::Store,
            DType::VOID,
            vec![index(&global(3), i.clone()), selected],
            Arg::None,
        );
        for (what, st) in [("bool store", store_mask), ("bool load", store_selected)] {
            let ast = UOp::new(Ops::Sink, DType::VOID, vec![st], Arg::None);
            let opts = heuristic(&ast);
            assert!(opts.splits.iter().any(|s| s.vector), "{what}: {opts}");
            let applied = apply_opts(&ast, &opts).expect("the heuristic's opts apply");
            let bool_vector_access = applied.toposort().iter().any(|n| match n.op() {
                Ops::Load => n.dtype() == DType::BOOL.vec(4),
                Ops::Store => n.s(1).dtype() == DType::BOOL.vec(4),
                _ => false,
            });
            assert!(bool_vector_access, "{what}: no 4-lane bool access");
        }
    }

    #[test]
    fn small_windows_unroll_and_vectorize_with_strided_loads() {
        let ast = pooling_kernel(Ops::Max);
        let opts = heuristic(&ast);
        // both window ranges unrolled, the output column (stride 2 in the load) as a vector
        let unrolled: Vec<usize> = opts
            .splits
            .iter()
            .filter(|s| !s.vector)
            .map(|s| s.axis)
            .collect();
        assert_eq!(unrolled, vec![2, 3], "{opts}");
        assert!(
            opts.splits.iter().any(|s| s.vector && s.axis == 1),
            "{opts}"
        );
        // two splits of one reduction without remainders are accepted (the heuristic's opts
        // must apply: a rejected set falls back to no opts at all)
        let applied = apply_opts(&ast, &opts).expect("the heuristic's opts apply");
        assert!(
            !applied
                .toposort()
                .iter()
                .any(|n| n.op() == Ops::Range && matches!(range_kind(n), AxisKind::Reduce)),
            "a window loop is left"
        );
    }

    /// Per-channel partial sums over an `(N, C, P)` tensor, as BatchNorm's are scheduled:
    /// `out[c][j] = sum over (i, p) of x[(2j + i) * C * P + c * P + p]`, outputs `(c, j)` with
    /// sizes `(channels, parts)`, P = `pixels` contiguous.
    fn channel_sums(channels: i64, parts: i64, pixels: i64) -> UOp {
        let c = UOp::range(channels, 0, AxisKind::Loop);
        let j = UOp::range(parts, 1, AxisKind::Loop);
        let i = UOp::range(2i64, 2, AxisKind::Reduce);
        let p = UOp::range(pixels, 3, AxisKind::Reduce);
        let xi = (&j * 2 + &i) * (channels * pixels) + &c * pixels + &p;
        let red = reduce_op(load_f32(1, xi), &[&i, &p], Ops::Add);
        store_sink(&c * parts + &j, red)
    }

    #[test]
    fn contiguous_reductions_nest_their_outputs_in_memory_order() {
        // long rows (the vector-accumulator branch) and short ones (the short-dot branch):
        // the part axis, the larger stride, goes outermost
        for pixels in [400, 16] {
            let ast = channel_sums(32, 256, pixels);
            let opts = heuristic(&ast);
            assert_eq!(opts.order, Some(vec![1, 0]), "P = {pixels}: {opts}");
            apply_opts(&ast, &opts).expect("the heuristic's opts apply");
        }
        // already in memory order: unchanged
        let c = UOp::range(32i64, 0, AxisKind::Loop);
        let j = UOp::range(256i64, 1, AxisKind::Loop);
        let p = UOp::range(400i64, 2, AxisKind::Reduce);
        let red = reduce_op(
            load_f32(1, &c * (256 * 400) + &j * 400 + &p),
            &[&p],
            Ops::Add,
        );
        let ast = store_sink(&c * 256 + &j, red);
        assert_eq!(heuristic(&ast).order, None);
        // a new outermost range too short to split across threads: unchanged
        assert_eq!(heuristic(&channel_sums(128, 8, 400)).order, None);
    }

    #[test]
    fn a_reduction_split_with_a_remainder_is_not_split_again() {
        let both_exact = KernelOpts::parse("s2:2 s3:2").expect("opts");
        assert!(apply_opts(&pooling_kernel(Ops::Add), &both_exact).is_ok());
        // sum over a 5x6 window
        let wide = {
            let i = UOp::range(4i64, 0, AxisKind::Loop);
            let (ry, rx) = (
                UOp::range(5i64, 2, AxisKind::Reduce),
                UOp::range(6i64, 3, AxisKind::Reduce),
            );
            let red = reduce_op(load_f32(1, &i * 30 + &ry * 6 + &rx), &[&ry, &rx], Ops::Add);
            store_sink(i, red)
        };
        // 5 = 2*2 + 1: a main part and a tail, which the second split would have to split alike
        let tail_then_split = KernelOpts::parse("s2:2 s3:3").expect("opts");
        assert!(apply_opts(&wide, &tail_then_split).is_err());
        let exact_then_tail = KernelOpts::parse("s3:3 s2:2").expect("opts");
        assert!(apply_opts(&wide, &exact_then_tail).is_ok());
    }

    #[test]
    fn invalid_splits_are_rejected() {
        let r = UOp::range(3i64, 0, AxisKind::Loop);
        let ast = UOp::new(Ops::Sink, DType::VOID, vec![r.clone()], Arg::None);
        let too_big = KernelOpts {
            splits: vec![Split {
                axis: 0,
                lanes: vec![4],
                vector: true,
            }],
            order: None,
        };
        assert!(apply_opts(&ast, &too_big).is_err());
        let missing = KernelOpts {
            splits: vec![Split {
                axis: 7,
                lanes: vec![2],
                vector: false,
            }],
            order: None,
        };
        assert!(apply_opts(&ast, &missing).is_err());
    }
}
