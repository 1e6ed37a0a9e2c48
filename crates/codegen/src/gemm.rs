//! Matmul-shaped kernels split for an external GEMM micro-kernel (the CPU's AVX2/FMA path; the
//! role tinygrad gives its tensor-core `TC` opt).
//!
//! A kernel of the form `STORE(out[i], f(REDUCE_ADD(MUL(x, y), k...)))` — how tinygrad
//! expresses matmul, batched matmul, `linear`, `einsum` contractions and every convolution,
//! forward and backward — is a GEMM `C[b, m, n] = sum_k A[b, m, k] * B[b, n, k]` whose operands
//! are arbitrary fused expressions of the kernel's loop ranges. The kernel's ranges are
//! classified by which operand uses them:
//! - output ranges used by both `x` and `y`: the **batch** (`b`, e.g. conv groups);
//! - output ranges used by one operand only: **M** (rows, from `x` after orientation) and **N**;
//! - output ranges used by neither: not GEMM dimensions (the result is the same along them);
//! - the reduce ranges: **K**.
//!
//! [`plan_gemm`] returns three ordinary kernel ASTs that the target compiles with its normal
//! pipeline:
//! - `pack_a` / `pack_b`: write one operand, zero-padded, into the micro-kernel's panel layout:
//!   `B` with its `NR` rows interleaved per `k` (`[panel][k][NR]`, the micro-kernel's vector
//!   loads), `A` in groups of [`A_K_GROUP`] consecutive `k` per row (`[panel][k / 4][MR][4]`:
//!   the micro-kernel broadcasts single values, so any layout serves it, and this one lets the
//!   packing kernel load and store 4 values of a row at once — contiguous in the operand when
//!   `k` runs along its rows, as in a matmul or a weight gradient). Their outermost range is
//!   the panel index (a launcher runs any sub-range of panels); the K offset and the batch index
//!   come from a small `int64` params buffer (`[k0, b]`), clamped so every index stays in bounds.
//!   Any fused producer of the operand (casts, padding gates, im2col-style index arithmetic) is
//!   evaluated here, once per element.
//! - `epilogue`: the original kernel with the `REDUCE` replaced by a load of the GEMM result `C`
//!   (`[b][Mp][Np]`, row-major, padded): one pass over the output that applies the rest of the
//!   fused kernel (bias, activation, ...).

use std::collections::HashMap;

use tinygrad_dtype::DType;
use tinygrad_uop::{Arg, AxisKind, Ops, UOp};

use crate::gemm_in_place::{InPlaceOperand, Sides, in_place_operand};

/// Consecutive `k` values of one row stored together in packed `A` (the packing kernel's
/// vector width); K blocks are multiples of it.
// mnist weight-gradient conv 371 -> 156 ms (see docs/performance.md)
pub const A_K_GROUP: usize = 4;

/// Micro-kernel and blocking sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmTile {
    /// Rows of `A` per micro-kernel call.
    pub mr: usize,
    /// Columns of `B` per micro-kernel call (the vector direction).
    pub nr: usize,
    /// Target K block (sized for L1/L2).
    pub kc: usize,
}

/// One matmul-shaped kernel, split into packing, GEMM and epilogue.
#[derive(Clone, Debug)]
pub struct GemmPlan {
    /// The tile the packing layouts were built for.
    pub tile: GemmTile,
    /// Batch count (product of the batch ranges).
    pub batch: usize,
    /// Rows of `C` (product of the M ranges) and the padded count (a multiple of `mr`).
    pub m: usize,
    /// Padded rows.
    pub mp: usize,
    /// Columns of `C` and the padded count (a multiple of `nr`).
    pub n: usize,
    /// Padded columns.
    pub np: usize,
    /// Reduction length (blocks of `kb`, a multiple of [`A_K_GROUP`], cover it; the last may be
    /// zero-padded).
    pub k: usize,
    /// The K block size actually used.
    pub kb: usize,
    /// K blocks (`ceil(k / kb)`); `kp = kb * n_kb`.
    pub n_kb: usize,
    /// K elements per packing launch (a multiple of `kb`).
    pub k_chunk: usize,
    /// Packs `A` (slot 0: panels, then the inputs in `a_slots` order, then params).
    pub pack_a: UOp,
    /// The id of the packing kernels' panel range (their outer loop).
    pub pack_panel_axis: usize,
    /// The id of the packing kernels' row-in-panel range (the one to unroll).
    pub pack_row_axis: usize,
    /// The id of `pack_a`'s range over the `k` values of a group (the one to vectorize).
    pub pack_a_group_axis: usize,
    /// Original buffer slot of each input slot `1..` of `pack_a`.
    pub a_slots: Vec<usize>,
    /// Packs `B`, like `pack_a`.
    pub pack_b: UOp,
    /// Original buffer slot of each input slot `1..` of `pack_b`.
    pub b_slots: Vec<usize>,
    /// The original kernel reading `C` (at slot `c_slot`) instead of reducing.
    pub epilogue: UOp,
    /// The slot of `C` in the epilogue (one past the original slots).
    pub c_slot: usize,
    /// The element dtype of each of the original kernel's slots.
    pub globals: Vec<DType>,
    /// The least size of each original slot's buffer ([`crate::program::slot_extents`] of the
    /// kernel as scheduled).
    pub extents: Vec<usize>,
    /// `A` read in place (no packing) when its index is separable (see
    /// [`crate::gemm_in_place`]); `pack_a` still describes it, for launchers that pack.
    pub a_in_place: Option<InPlaceOperand>,
    /// The output slot when the epilogue only copies `C` into a float32 output of `C`'s layout
    /// without padding rows (`(b * m + row) * n + col`, `n == np`: a plain matmul): the
    /// launcher may then write the whole row panels of `C` there and copy only the rows of the
    /// last, partial panel, instead of running the epilogue over all of `C`.
    pub direct_output: Option<usize>,
}

/// The sizes and ids of ranges.
fn size(r: &UOp) -> usize {
    r.s(0).as_int().unwrap_or(0).max(0) as usize
}

fn ranges_of(u: &UOp) -> Vec<UOp> {
    u.toposort()
        .into_iter()
        .filter(|n| n.op() == Ops::Range)
        .collect()
}

/// `x` decomposed into the mixed-radix digits of `ranges` (row-major: the last range varies
/// fastest), as a substitution map.
pub(crate) fn decompose(x: &UOp, ranges: &[UOp], map: &mut HashMap<UOp, UOp>) {
    let mut stride = 1i64;
    for r in ranges.iter().rev() {
        let n = size(r) as i64;
        let mut d = if stride == 1 {
            x.clone()
        } else {
            x.idiv(stride)
        };
        if stride * n < ranges.iter().map(|r| size(r) as i64).product::<i64>() {
            d = d.modulo(n);
        }
        map.insert(r.clone(), d);
        stride *= n;
    }
}

/// The row-major flat index of `ranges` (the inverse of [`decompose`]).
fn flatten(ranges: &[UOp]) -> UOp {
    let mut idx = UOp::index(0);
    let mut stride = 1i64;
    for r in ranges.iter().rev() {
        idx = idx.add(r.mul(stride));
        stride *= size(r) as i64;
    }
    idx
}

/// `x` clamped into `0..=hi` (`vmin`/`vmax` then know the bounds).
fn clamp(x: &UOp, hi: i64) -> UOp {
    x.maximum(0i64).minimum(hi)
}

/// Renumbers the `DefineGlobal`s of `u` to `1..` (in slot order); returns the new graph and
/// the original slot of each new slot.
fn renumber_inputs(u: &UOp) -> (UOp, Vec<usize>) {
    let mut globals: Vec<UOp> = u
        .toposort()
        .into_iter()
        .filter(|n| n.op() == Ops::DefineGlobal)
        .collect();
    globals.sort_by_key(slot_of);
    let mut map = HashMap::new();
    let mut slots = Vec::new();
    for (i, g) in globals.iter().enumerate() {
        slots.push(slot_of(g));
        map.insert(g.clone(), global(g.dtype(), i + 1));
    }
    (u.substitute(&map), slots)
}

fn slot_of(g: &UOp) -> usize {
    match g.arg() {
        Arg::Int(s) => *s as usize,
        _ => usize::MAX,
    }
}

pub(crate) fn global(ptr_dt: DType, slot: usize) -> UOp {
    UOp::new(Ops::DefineGlobal, ptr_dt, vec![], Arg::Int(slot as i64))
}

pub(crate) fn load(buf: &UOp, idx: UOp) -> UOp {
    let index = UOp::new(Ops::Index, buf.dtype(), vec![buf.clone(), idx], Arg::None);
    UOp::new(Ops::Load, buf.dtype().base(), vec![index], Arg::None)
}

fn store(buf: &UOp, idx: UOp, value: UOp) -> UOp {
    let index = UOp::new(Ops::Index, buf.dtype(), vec![buf.clone(), idx], Arg::None);
    UOp::new(Ops::Store, DType::VOID, vec![index, value], Arg::None)
}

/// The kernel `out[idx] = value` with `out` a global of `dtype` elements at slot 0.
pub(crate) fn store_kernel(dtype: DType, idx: UOp, value: UOp) -> UOp {
    let out = global(dtype.ptr(tinygrad_dtype::AddrSpace::Global), 0);
    UOp::new(
        Ops::Sink,
        DType::VOID,
        vec![store(&out, idx, value)],
        Arg::None,
    )
}

/// Dimensions shared by both packing kernels.
struct PackDims<'a> {
    /// The first of four range ids unused by the kernel.
    first_id: usize,
    batch: &'a [UOp],
    red: &'a [UOp],
    k: usize,
    k_chunk: usize,
    /// Whether one chunk covers all K blocks (the launcher's only chunk offset is then 0).
    one_chunk: bool,
}

/// The packing kernel of one operand: `panels[p][kk][r] = operand(row p*R + r, k0 + kk)`
/// (with `k_group` g > 1: `panels[p][kk / g][r][kk % g]`), zero outside the operand. Rows and
/// K past the operand are not clamped but gated: every load
/// of the operand gets the validity condition (a gated load touches no memory when it is
/// false), so the index arithmetic stays that of the original kernel, divisions by constants of
/// bounded values included.
fn pack_kernel(
    operand: &UOp,
    rows: &[UOp],
    len: usize,
    r_size: usize,
    d: &PackDims<'_>,
    k_group: usize,
) -> (UOp, Vec<usize>) {
    let (operand, slots) = renumber_inputs(operand);
    let params = global(
        DType::INT64.ptr(tinygrad_dtype::AddrSpace::Global),
        slots.len() + 1,
    );
    let panels = len.div_ceil(r_size);
    // Fresh range ids: a range equal to one of the kernel's (same size and id) would be
    // hash-consed into the same node and substituted along with it.
    let p = UOp::range(panels as i64, d.first_id, AxisKind::Loop);
    let kq = UOp::range((d.k_chunk / k_group) as i64, d.first_id + 1, AxisKind::Loop);
    let r = UOp::range(r_size as i64, d.first_id + 2, AxisKind::Loop);
    let (kk, out_idx) = if k_group == 1 {
        (
            kq.clone(),
            p.mul((d.k_chunk * r_size) as i64)
                .add(kq.mul(r_size as i64))
                .add(&r),
        )
    } else {
        let kl = UOp::range(k_group as i64, d.first_id + 3, AxisKind::Loop);
        (
            kq.mul(k_group as i64).add(&kl),
            p.mul((d.k_chunk * r_size) as i64)
                .add(kq.mul((k_group * r_size) as i64))
                .add(r.mul(k_group as i64))
                .add(&kl),
        )
    };
    // Offsets from the launcher, clamped once so the bounds analysis knows their ranges.
    let nb: usize = d.batch.iter().map(size).product();
    // One chunk covers every K block: its offset is 0, known here, so `k < K` folds away when
    // the chunk is exactly K long (no per-element gate).
    let k0 = if d.one_chunk {
        UOp::index(0)
    } else {
        clamp(&load(&params, UOp::index(0)).cast(DType::INDEX), d.k as i64)
    };
    let bi = clamp(
        &load(&params, UOp::index(1)).cast(DType::INDEX),
        nb.max(1) as i64 - 1,
    );
    let row = p.mul(r_size as i64).add(&r);
    let k = kk.add(&k0);
    let valid = row.lt(len as i64).alu(Ops::And, &[k.lt(d.k as i64)]);
    let mut map = HashMap::new();
    decompose(&row, rows, &mut map);
    decompose(&k, d.red, &mut map);
    decompose(&bi, d.batch, &mut map);
    for idx in operand.toposort() {
        if idx.op() == Ops::Index && idx.src().len() >= 2 {
            let mut src = idx.src().to_vec();
            let gate = match src.get(2) {
                Some(g) => g.alu(Ops::And, std::slice::from_ref(&valid)),
                None => valid.clone(),
            };
            src.truncate(2);
            src.push(gate);
            // Indices are rebuilt with the substituted ranges below; gate the original node.
            map.insert(idx.clone(), idx.with_src(src).substitute(&map));
        }
    }
    let value = operand.substitute(&map);
    let value = valid.where_(value, UOp::cnst(DType::FLOAT32, 0.0f32));
    (store_kernel(DType::FLOAT32, out_idx, value), slots)
}

/// GEMMs with at least this many columns and this long a reduction take [`WIDE_B_PANEL_BYTES`]
/// K blocks (see [`k_block_target`]).
// K blocks of 512: matmul 1024/2048 161-166 -> 168-176 GFLOP/s on Zen 2 (see docs/performance.md)
pub const WIDE_MIN_N: usize = 256;
/// See [`WIDE_MIN_N`].
pub const WIDE_MIN_K: usize = 1024;
/// The packed `B` panel (`kc x nr` floats) of a wide GEMM's K block: 64 KiB, in L2 (1024
/// with 16-column panels).
pub const WIDE_B_PANEL_BYTES: usize = 64 << 10;

/// The target K block of a GEMM with `n` columns and reduction length `k` on `tile`.
///
/// A large square-ish GEMM (at least [`WIDE_MIN_N`] columns, K at least [`WIDE_MIN_K`]) on a
/// tile of 16-column panels (AVX2's) takes K blocks whose packed `B` panel fills
/// [`WIDE_B_PANEL_BYTES`]: each K block costs every `C` tile a load and a store at the end of
/// its micro-kernel call, and wide GEMMs have many. Measured on a 2-vCPU Zen 2 (AVX2),
/// alternating same-run comparisons: `kc` 256 -> 512 took matmul 1024 and 2048 from 161-166 to
/// 168-176 GFLOP/s; 512 -> 1024 gained about 5% more (matmul 2048's micro-kernel 107-132 ->
/// 102-114 ms; 2048 was not clearly better than 1024). beautiful_mnist's GEMMs (at most 64
/// columns, or K at most 1600) were mixed and 2-10% slower in its small-K weight-gradient
/// pieces with 512 at first; since each micro-kernel call prefetches its `C` tile, K blocks
/// of up to [`NARROW_K_BLOCK`] pay for GEMMs with fewer than [`WIDE_MIN_N`] columns on the AVX2
/// tile (its step, same-run alternation, medians of 10 steps: 351-358 -> 326-340 ms; its three
/// large convolution GEMMs 1.6-2.2 ms faster each; the MiniLM-shaped encoder and the conv
/// forward bench unchanged). Matmul 2048 was slower with 2048 than 1024 (104-118 against
/// 96-103 ms). The AVX-512 tiles keep theirs: not measured there.
pub fn k_block_target(tile: GemmTile, n: usize, k: usize) -> usize {
    let avx2 = tile.mr == 6 && tile.nr == 16;
    if avx2 && n >= WIDE_MIN_N && k >= WIDE_MIN_K {
        let wide = (WIDE_B_PANEL_BYTES / (4 * tile.nr)) / A_K_GROUP * A_K_GROUP;
        tile.kc.max(wide)
    } else if avx2 && n < WIDE_MIN_N {
        tile.kc.max(NARROW_K_BLOCK)
    } else {
        tile.kc
    }
}

/// The target K block of a GEMM with fewer than [`WIDE_MIN_N`] columns on the AVX2 tile (see
/// [`k_block_target`]): K up to this long is one block.
// mnist step 351-358 -> 326-340 ms on Zen 2 (see docs/performance.md)
pub const NARROW_K_BLOCK: usize = 2048;

/// Splits `ast` per the module docs when it is a float32 matmul-shaped kernel with at least
/// `min_flops` multiply-adds x 2 and both sides of at least 4; `None` otherwise.
pub fn plan_gemm(ast: &UOp, tile: GemmTile, min_flops: f64) -> Option<GemmPlan> {
    debug_assert!(
        tile.kc.is_multiple_of(A_K_GROUP),
        "K blocks are whole groups of A_K_GROUP"
    );
    if ast.op() != Ops::Sink || ast.src().len() != 1 {
        return None;
    }
    // The slots as scheduled: simplification may drop every load of an input (all gated off),
    // but the launcher still binds it.
    let original_globals: Vec<UOp> = ast
        .toposort()
        .into_iter()
        .filter(|n| n.op() == Ops::DefineGlobal)
        .collect();
    let original_ast = ast;
    // Simplified first: index arithmetic of views often mentions ranges it doesn't depend on
    // (`(k*25 + r) // 800` with `k*25 + r < 800`), which would hide which operand uses them.
    let ast = &tinygrad_uop::graph_rewrite(ast, tinygrad_uop::sym(), &mut (), false);
    let st = ast.s(0);
    if st.op() != Ops::Store || st.s(1).dtype() != DType::FLOAT32 {
        return None;
    }
    let nodes = ast.toposort();
    let reduces: Vec<&UOp> = nodes.iter().filter(|n| n.op() == Ops::Reduce).collect();
    let [red] = reduces.as_slice() else {
        return None;
    };
    if !matches!(red.arg(), Arg::Op(Ops::Add)) || red.dtype() != DType::FLOAT32 {
        return None;
    }
    let mul = red.s(0);
    if mul.op() != Ops::Mul || mul.dtype() != DType::FLOAT32 {
        return None;
    }
    // Every range must be a plain output loop or one of this reduce's ranges.
    let red_ranges: Vec<UOp> = red.src()[1..].to_vec();
    let all_ranges: Vec<UOp> = nodes
        .iter()
        .filter(|n| n.op() == Ops::Range)
        .cloned()
        .collect();
    let out_ranges: Vec<UOp> = all_ranges
        .iter()
        .filter(|r| !red_ranges.contains(r))
        .cloned()
        .collect();
    if out_ranges
        .iter()
        .chain(&red_ranges)
        .any(|r| r.s(0).as_int().is_none())
        || out_ranges
            .iter()
            .any(|r| !matches!(r.arg(), Arg::Range(_, AxisKind::Loop)))
    {
        return None;
    }
    let (mut x, mut y) = (mul.s(0).clone(), mul.s(1).clone());
    let (mut rx, mut ry) = (ranges_of(&x), ranges_of(&y));
    let mut batch = Vec::new();
    let (mut mr_, mut nr_) = (Vec::new(), Vec::new());
    for r in &out_ranges {
        match (rx.contains(r), ry.contains(r)) {
            (true, true) => batch.push(r.clone()),
            (true, false) => mr_.push(r.clone()),
            (false, true) => nr_.push(r.clone()),
            (false, false) => {}
        }
    }
    let prod = |v: &[UOp]| v.iter().map(size).product::<usize>();
    // The smaller side is N (the vector direction, packed once): A is repacked per N chunk.
    // Except when the larger side holds the output's innermost range and the epilogue would pay
    // more for reading `C` transposed (a column of C per output row) than packing the larger
    // side costs: measured on BERT's 512 x 1536 x 384 MLP with GELU, the transposed epilogue
    // costs ~1.1 ns per output element more, packing ~0.6 ns per element of the packed operand,
    // so the contiguous side is N when `(larger - smaller) * K < 2 * M * N`. A batch-1
    // projection (M = 12) or a prefill's lm_head (128 x 32000 x 768) still has the small side
    // as N: packing the weight would cost far more. (A convolution's output pixels, the
    // innermost range, are the larger side in ResNet's later 1x1 convolutions: 3136 x 256 x 64
    // ran at 29 GFLOP/s with them as M.)
    let innermost = out_ranges.iter().max_by_key(|r| match r.arg() {
        Arg::Range(id, _) => *id,
        _ => 0,
    });
    let in_x = innermost.is_some_and(|r| mr_.contains(r));
    let in_y = innermost.is_some_and(|r| nr_.contains(r));
    let (m0, n0, k0) = (prod(&mr_), prod(&nr_), prod(&red_ranges));
    // BERT MLP epilogue 2.0 -> 1.1 ms; ResNet-50 ONNX 377 -> 94 ms (see docs/performance.md)
    let contiguous_pays = |larger: usize, smaller: usize| (larger - smaller) * k0 < 2 * m0 * n0;
    let swap = if n0 > m0 {
        !(in_y && contiguous_pays(n0, m0))
    } else {
        in_x && contiguous_pays(m0, n0)
    };
    if swap {
        std::mem::swap(&mut x, &mut y);
        std::mem::swap(&mut rx, &mut ry);
        std::mem::swap(&mut mr_, &mut nr_);
    }
    let (nb, m, n, k) = (prod(&batch), prod(&mr_), prod(&nr_), prod(&red_ranges));
    let flops = 2.0 * nb as f64 * m as f64 * n as f64 * k as f64;
    if m < 4 || n < 4 || k < 4 || flops < min_flops {
        return None;
    }
    // K blocks of equal size that divide K when some block count up to twice the least does
    // (1600 = 8 x 200 rather than 7 x 229): then no block runs past K, and the packing
    // kernels' `k < K` gate folds away.
    // Blocks are whole groups of A_K_GROUP.
    let least = k.div_ceil(k_block_target(tile, n, k));
    let n_kb = (least..=2 * least)
        .find(|n| k.is_multiple_of(n * A_K_GROUP))
        .unwrap_or(least);
    let kb = k.div_ceil(n_kb).next_multiple_of(A_K_GROUP);
    let mp = m.div_ceil(tile.mr) * tile.mr;
    let np = n.div_ceil(tile.nr) * tile.nr;
    // K per packing launch: the packed A and B of one chunk stay within ~32 MiB.
    let per_k = (mp.min(4096) + np) * 4;
    let blocks = ((32usize << 20) / (per_k * kb)).clamp(1, n_kb);
    let k_chunk = blocks * kb;
    let first_id = all_ranges
        .iter()
        .filter_map(|r| match r.arg() {
            Arg::Range(id, _) => Some(*id),
            _ => None,
        })
        .max()
        .map_or(0, |m| m + 1);
    let dims = PackDims {
        first_id,
        batch: &batch,
        red: &red_ranges,
        k,
        k_chunk,
        one_chunk: blocks == n_kb,
    };
    let a_in_place = in_place_operand(
        &x,
        &Sides {
            rows: &mr_,
            ks: &red_ranges,
            batch: &batch,
            m,
            mp,
            k,
            kp: kb * n_kb,
            nb,
            first_id,
        },
    );
    let (pack_a, a_slots) = pack_kernel(&x, &mr_, m, tile.mr, &dims, A_K_GROUP);
    let (pack_b, b_slots) = pack_kernel(&y, &nr_, n, tile.nr, &dims, 1);
    // The epilogue: C[b][m][n] replaces the reduce.
    let c_slot = original_globals.iter().map(slot_of).max().unwrap_or(0) + 1;
    let c = global(
        DType::FLOAT32.ptr(tinygrad_dtype::AddrSpace::Global),
        c_slot,
    );
    let cidx = flatten(&batch)
        .mul((mp * np) as i64)
        .add(flatten(&mr_).mul(np as i64))
        .add(flatten(&nr_));
    let mut globals = vec![DType::VOID; c_slot];
    for g in &original_globals {
        globals[slot_of(g)] = g.dtype().base();
    }
    let c_load = load(&c, cidx);
    let mut map = HashMap::new();
    map.insert((*red).clone(), c_load.clone());
    let epilogue = ast.substitute(&map);
    let direct_output = (n == np)
        .then(|| copies_c_contiguously(&epilogue, &c_load, &[&batch, &mr_, &nr_]))
        .flatten();
    Some(GemmPlan {
        tile,
        batch: nb,
        m,
        mp,
        n,
        np,
        k,
        kb,
        n_kb,
        k_chunk,
        pack_a,
        pack_panel_axis: first_id,
        pack_row_axis: first_id + 2,
        pack_a_group_axis: first_id + 3,
        a_slots,
        pack_b,
        b_slots,
        epilogue,
        c_slot,
        extents: {
            let mut e = crate::program::slot_extents(original_ast);
            e.resize(globals.len().max(e.len()), 0);
            e
        },
        globals,
        a_in_place,
        direct_output,
    })
}

/// The output slot of `epilogue` when it only copies `C` (the load `c_load`) into a float32
/// output laid out as `C` without its padding rows: `out[b][m][n]` at `(b * M + m) * N + n`,
/// `ranges` being the batch, M and N ranges. Then the launcher can write `C`'s whole row panels
/// straight into the output and skip the copy (see [`GemmPlan::direct_output`]). A layout this
/// does not recognize (a transposed output, fused bias or activation) keeps the epilogue.
fn copies_c_contiguously(epilogue: &UOp, c_load: &UOp, ranges: &[&[UOp]; 3]) -> Option<usize> {
    let [store] = epilogue.src() else {
        return None;
    };
    if store.op() != Ops::Store || store.s(1) != c_load {
        return None;
    }
    // (a gated store, `src[2]`, writes only some elements: not a plain copy)
    let index = store.s(0);
    let [out, idx] = index.src() else {
        return None;
    };
    if index.op() != Ops::Index
        || out.op() != Ops::DefineGlobal
        || out.dtype().base() != DType::FLOAT32
    {
        return None;
    }
    let [batch, m, n] = *ranges;
    let size_of = |v: &[UOp]| v.iter().map(size).product::<usize>();
    let (m_len, n_len) = (size_of(m), size_of(n));
    let want = flatten(batch)
        .mul((m_len * n_len) as i64)
        .add(flatten(m).mul(n_len as i64))
        .add(flatten(n));
    let want = tinygrad_uop::graph_rewrite(&want, tinygrad_uop::sym(), &mut (), false);
    (*idx == want).then(|| slot_of(out))
}
