//! Choosing opts: tinygrad's hand-coded heuristic ([`heuristic`]) and the next steps of BEAM
//! search ([`beam_moves`]).

use std::collections::{HashMap, HashSet};

use tinygrad_dtype::DType;
use tinygrad_uop::{Ops, UOp};

use super::{
    KernelOpts, Split, VECTOR_WIDTH, affine_coeff, apply_opts, range_id, range_size, vector_io,
    vector_memory,
};

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
// erf/GELU: two chains leave the FMA pipes waiting; no number recorded (see docs/performance.md)
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
            // A transposed load: contiguous along another output axis, a cache line or more
            // apart along the vector axis (a GEMM's `C` read back in a convolution's channel-
            // major output, `x.T.contiguous()`). In the scheduled order each outer iteration
            // reads one float per cache line of the whole source, and the next one reads the
            // same lines again from far down the hierarchy. That axis is unrolled by 4 and
            // nested innermost: consecutive iterations read the rest of the lines the previous
            // ones touched while they are in L1 (a tiled transpose; ResNet-50's first
            // convolution's epilogue, 64 x 12544 floats: 1.4-1.6 -> 0.34-0.38 ms on the Xeon;
            // see docs/performance.md).
            if let Some(o) = a.out.iter().find(|o| {
                **o != r
                    && size(o) >= w
                    && a.loads.iter().any(|(idx, _)| {
                        coeff(idx, o) == Some(1)
                            && coeff(idx, &r).is_some_and(|s| s.unsigned_abs() >= TRANSPOSED_STRIDE)
                    })
            }) {
                opts.splits.push(Split {
                    axis: range_id(o),
                    lanes: vec![w],
                    vector: false,
                });
                let mut order: Vec<usize> =
                    a.out.iter().filter(|x| *x != o).map(range_id).collect();
                order.push(range_id(o));
                opts.order = Some(order);
                return opts;
            }
            // A load that depends on the vector axis and another output axis other than
            // linearly (`x[h // 2][w // 2]`: a pooled tensor broadcast back over its windows,
            // as max_pool2d's gradient is computed): that other axis unrolled by 2, so two
            // neighbouring rows share the gathered loads (beautiful_mnist's pool gradient
            // over 512x32x20x20: 4.1 -> 2.6 ms; see docs/performance.md).
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
            // 1.67 -> 1.04 ms; found by BEAM, ~2.4 ms of its step in all; see
            // docs/performance.md).
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
            // (four, else three or two: grouped-query attention's three query heads per key
            // head share each key's loads; SmolLM2-135M's 8-row decode step: 65 -> 40 us per
            // block on Zen 4)
            let reused = |r: &&UOp, f: usize| {
                size(r) >= f
                    && size(r).is_multiple_of(f)
                    && a.loads.iter().any(|(idx, _)| coeff(idx, r) == Some(0))
            };
            if let Some((i, f)) = [4, 3, 2]
                .into_iter()
                .find_map(|f| a.out.iter().rev().find(|r| reused(r, f)).map(|r| (r, f)))
            {
                opts.splits.push(Split {
                    axis: range_id(i),
                    lanes: vec![f],
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
// BatchNorm partial sums 2.9 -> 1.6 ms on Zen 2 (see docs/performance.md)
const MIN_OUTER_ON_REORDER: usize = 64;

/// A load this many elements apart or more along an elementwise kernel's vector axis, and
/// contiguous along another output axis, is a transposed read (see [`heuristic`]): 16 floats,
/// a cache line.
const TRANSPOSED_STRIDE: u64 = 16;

/// Output axes up to this size count as short: an elementwise kernel without a vector axis
/// unrolls its innermost short axes (see [`heuristic`]).
// mnist maxpool gradient 9.3 -> 4.5 ms (see docs/performance.md)
const SHORT_AXIS: usize = 4;

/// The most outputs those unrolled short axes compute per iteration.
const SHORT_AXES_UNROLL: usize = 16;

/// Contiguous reductions up to this length run as one vector accumulator (see [`heuristic`]).
// attention's q . k: 0.60 -> 0.37 ms (see docs/performance.md)
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
