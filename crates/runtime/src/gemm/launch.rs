//! What a GEMM launch does with its operands, decided from the plan and from facts about the
//! in-place operand's index tables alone: which tile, whether `A` is read in place (and how),
//! whether each task packs its own rows, how `B` is packed and whether `C` goes straight into
//! the output. These are pure functions of a given tile, so the decisions of every tile (AVX2's
//! and AVX-512's) are tested on every machine; only the micro-kernels need the CPU feature.

use tinygrad_codegen::gemm::{GemmPlan, GemmTile, plan_gemm};
use tinygrad_uop::UOp;

use super::jobs::{ALIAS_BYTES, BATCH_TASKS_PER_THREAD, STREAMED_COL_PANELS, fused_block_panels};
use super::{TILE, TILE_AVX512, TILE_AVX512_NARROW, TILE_AVX512_TALL};

/// How much faster the [`TILE_AVX512_TALL`] micro-kernel multiplies than the 6x32 one, in
/// percent: a GEMM takes the 12-row tile when its rows padded to 12 cost less than padded to
/// 6 at this rate (64 rows: 72 against 66, tall; 30: 36 against 30, not).
// one Xeon core, packed panels in the path's blocking order: 15-17% (see docs/performance.md)
pub const TALL_TILE_GAIN_PERCENT: usize = 15;

/// The tile for a GEMM of `m` rows and `n` columns (after orientation) on a CPU whose tile is
/// `cpu`: where `cpu` is [`TILE_AVX512`], [`TILE_AVX512_NARROW`] for `n <= 16`, else
/// [`TILE_AVX512_TALL`] when `m` padded to its 12 rows costs less than padded to 6 at
/// [`TALL_TILE_GAIN_PERCENT`]; else `cpu`.
pub fn tile_for_cpu(cpu: GemmTile, m: usize, n: usize) -> GemmTile {
    if cpu != TILE_AVX512 {
        return cpu;
    }
    if n <= TILE_AVX512_NARROW.nr {
        return TILE_AVX512_NARROW;
    }
    let padded = |tile: GemmTile| m.div_ceil(tile.mr) * tile.mr;
    if 100 * padded(TILE_AVX512_TALL) < (100 + TALL_TILE_GAIN_PERCENT) * padded(TILE_AVX512) {
        TILE_AVX512_TALL
    } else {
        TILE_AVX512
    }
}

/// [`plan_gemm`] for a CPU whose tile is `cpu`: planned once to learn the orientation (which
/// does not depend on the tile), and again for the GEMM's own tile ([`tile_for_cpu`]).
pub fn plan_for_cpu(ast: &UOp, cpu: GemmTile, min_flops: f64) -> Option<GemmPlan> {
    let plan = plan_gemm(ast, cpu, min_flops)?;
    let tile = tile_for_cpu(cpu, plan.m, plan.n);
    if tile == plan.tile {
        Some(plan)
    } else {
        plan_gemm(ast, tile, min_flops)
    }
}

/// What the in-place operand's index tables say (computed from the tables by
/// [`InPlaceFacts::from_tables`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InPlaceFacts {
    /// The K table is contiguous (`ks[p + 1] == ks[p] + 1` over `0..k`): each row is a stream
    /// (a matmul's operand, not a convolution's window).
    pub k_contiguous: bool,
    /// The distance between consecutive rows when rows `0..m` are equally spaced.
    pub row_step: Option<i64>,
    /// Whether the operand's elementwise function, if it has one, is worth applying to its
    /// buffer's prefix first: the operand reads at least that many elements (else it is packed).
    pub prepare_pays: bool,
}

impl InPlaceFacts {
    /// The facts of the tables `rows` (at least `m` entries) and `ks` (at least `k`, or all
    /// of them when shorter).
    pub fn from_tables(rows: &[i64], ks: &[i64], m: usize, k: usize, prepare_pays: bool) -> Self {
        let k_contiguous = ks[..k.min(ks.len())].windows(2).all(|w| w[1] == w[0] + 1);
        let rows = &rows[..m.min(rows.len())];
        let row_step = match rows {
            [r0, r1, ..] => {
                let d = r1 - r0;
                rows.windows(2).all(|w| w[1] - w[0] == d).then_some(d)
            }
            _ => None,
        };
        InPlaceFacts {
            k_contiguous,
            row_step,
            prepare_pays,
        }
    }
}

/// Where a launch's `A` comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ARoute {
    /// Read in place, one task per batch, each packing its own batch's `B` (`BatchTasksJob`:
    /// many batches of one K chunk each, such as a convolution's weight gradient).
    BatchTasks,
    /// Read in place by every task (`BlockJob` with an `InPlaceA`).
    InPlace,
    /// Each task packs its own block of rows and multiplies it (`FusedRowsJob`: many row
    /// panels).
    PackedPerTask,
    /// Packed in blocks of rows by the packing kernel on every core, each block then
    /// multiplied (`BlockJob`).
    Packed,
}

/// How `A` read in place is walked (see `InPlaceA` in `jobs.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InPlaceWalk {
    /// Read along its row stride by the narrow tile's micro-kernel (rows equally spaced,
    /// contiguous along K): `Some(stride)`.
    pub stride: Option<usize>,
    /// The rows alias in the caches (equally spaced a multiple of `ALIAS_BYTES` (4 KiB, in `jobs.rs`) apart):
    /// small row blocks.
    pub rows_alias: bool,
    /// Read about once from memory, each row panel's K blocks in turn (contiguous along K,
    /// at most `STREAMED_COL_PANELS` (in `jobs.rs`) column panels).
    pub streamed: bool,
    /// The K table is contiguous ([`InPlaceFacts::k_contiguous`]); otherwise the micro-kernel
    /// prefetches a later panel's rows (the hardware prefetcher does not follow a
    /// convolution window's short strided runs).
    pub k_contiguous: bool,
    /// Whether a task copies the operand's row blocks into its thread's buffer, in the packed
    /// micro-kernel's layout, before multiplying them (rather than reading them in place).
    ///
    /// For rows that alias in the caches (a multiple of 4 KiB apart) and run contiguously
    /// along K (a matmul's operand, not a convolution's window), with 6-row tiles: the
    /// in-place blocks must stay small there (`A_ALIASED_BYTES` in `jobs.rs`), so every `B`
    /// panel is reloaded every two row panels, and the in-place kernel's six row streams are
    /// slower than the packed kernel's one (a standalone 6x16 kernel over rows 8 KiB apart:
    /// 92-96 GFLOP/s against 102-106 packed, on one Zen 2 core). A copy is a block of L2 size
    /// read as six sequential rows per panel. Measured on a 2-vCPU Zen 2, alternating in one
    /// process (medians of 40 runs for matmul 1024, 12 for 2048), in four runs: matmul 1024
    /// 12.93 -> 12.35, 12.97 -> 12.36, 12.95 -> 12.48 and 11.97 -> 11.47 ms; matmul 2048
    /// 95.2 -> 94.3, 95.1 -> 95.1, 97.6 -> 96.4 and 99.3 -> 97.5 ms.
    /// Not for a row block streamed once ([`InPlaceWalk::streamed`]): a copy would be a second
    /// pass over it.
    // matmul 1024 12.93 -> 12.35 ms on Zen 2 (see docs/performance.md)
    pub repacked: bool,
}

/// Every decision of a GEMM launch (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchPlan {
    /// The micro-kernel's tile.
    pub tile: GemmTile,
    /// The K block.
    pub kb: usize,
    /// K per packing launch.
    pub k_chunk: usize,
    /// Where `A` comes from.
    pub a: ARoute,
    /// How an in-place `A` is walked (`None` when `A` is packed).
    pub in_place: Option<InPlaceWalk>,
    /// Panels of `B` its packing kernel writes per iteration of its `k` loop.
    pub b_panel_group: usize,
    /// Rows of each batch written straight into the output, when the output overlaps no
    /// input (the rest of the rows are copied from `C`); `None`: the epilogue runs.
    pub direct_rows: Option<usize>,
}

/// Panels of `B` packed per iteration of its packing kernel's loop over `k` (the panel range
/// split, the group unrolled inside), where the panel count is a multiple of it. One panel per
/// iteration reads a column strip of `B`: `nr` floats from each row, rows far apart (8 KiB in
/// matmul 2048), a cache miss per row that no prefetcher follows. Four panels read four
/// adjacent lines per row (measured packing a 2048 x 2048 `B` on one core: 4.9 -> 2.6 ms).
// packing matmul 2048's B on one core: 4.5-4.9 -> 2.6 ms (see docs/performance.md)
pub const PACK_B_PANEL_GROUP: usize = 4;

/// The shortest K chunk whose `B` packing takes [`PACK_B_PANEL_GROUP`] panels per iteration.
/// Short strips gain nothing: beautiful_mnist's first convolution (K = 25, its `B` an im2col
/// gather of nearby pixels) packed in 2.5 ms with groups of 4 against 2.0 without.
// at K = 25 grouping was slower: 2.0 -> 2.5 ms (see docs/performance.md)
pub const PACK_B_GROUP_MIN_K: usize = 256;

/// Panels of `B` packed per iteration: [`PACK_B_PANEL_GROUP`] where they divide the panel
/// count and K chunks are at least [`PACK_B_GROUP_MIN_K`] long, else 1.
pub fn b_panel_group(plan: &GemmPlan) -> usize {
    let panels = plan.np / plan.tile.nr;
    if panels > 1 && panels.is_multiple_of(PACK_B_PANEL_GROUP) && plan.k_chunk >= PACK_B_GROUP_MIN_K
    {
        PACK_B_PANEL_GROUP
    } else {
        1
    }
}

/// Whether `A` is read in place given its tables' facts (`None`: not separable, or in-place
/// reads turned off), and how.
///
/// With the AVX-512 kernel, an operand whose rows run contiguously along K (a matmul's, not an
/// im2col's) is faster packed: packing it is a copy, and the packed kernel's loads beat six
/// row streams (measured on a 2-vCPU Xeon: matmul 1024 184 -> 215-228 GFLOP/s, while the
/// convolutions of beautiful_mnist stay 1.5x faster in place).
// AVX-512 packs A along K: matmul 1024 184 -> 215-228 GFLOP/s on Xeon (see docs/performance.md)
pub fn in_place_walk(plan: &GemmPlan, facts: Option<InPlaceFacts>) -> Option<InPlaceWalk> {
    let f = facts.filter(|f| f.prepare_pays)?;
    if (plan.tile == TILE_AVX512 || plan.tile == TILE_AVX512_TALL) && f.k_contiguous {
        return None;
    }
    // (with fewer rows than the narrow tile's no panel is full: every one goes through the
    // tables)
    let stride = (plan.tile == TILE_AVX512_NARROW && f.k_contiguous && plan.m >= plan.tile.mr)
        .then_some(f.row_step)
        .flatten()
        .filter(|&d| d >= 0)
        .map(|d| d as usize);
    let rows_alias = plan.m >= 2
        && f.row_step
            .is_some_and(|d| d != 0 && (4 * d).unsigned_abs().is_multiple_of(ALIAS_BYTES as u64));
    let streamed = f.k_contiguous && plan.np / plan.tile.nr <= STREAMED_COL_PANELS;
    Some(InPlaceWalk {
        stride,
        rows_alias,
        streamed,
        k_contiguous: f.k_contiguous,
        repacked: rows_alias && f.k_contiguous && !streamed && plan.tile.mr == TILE.mr,
    })
}

/// Where `A` comes from: one task per batch for many in-place batches of one K chunk each (at
/// least `BATCH_TASKS_PER_THREAD` (in `jobs.rs`) per thread, on more than one thread); in place; each task
/// packing its own rows when there are at least four such row blocks per thread; else packed
/// in blocks.
pub fn a_route(plan: &GemmPlan, in_place: bool, threads: usize) -> ARoute {
    let kp = plan.kb * plan.n_kb;
    if in_place
        && plan.k_chunk >= kp
        && plan.batch >= BATCH_TASKS_PER_THREAD * threads
        && threads > 1
    {
        ARoute::BatchTasks
    } else if in_place {
        ARoute::InPlace
    } else {
        let m_panels = plan.mp / plan.tile.mr;
        let fused = fused_block_panels(plan.tile.mr, plan.k_chunk);
        if m_panels.div_ceil(fused) >= 4 * threads {
            ARoute::PackedPerTask
        } else {
            ARoute::Packed
        }
    }
}

/// Rows of each batch written straight into the output: the whole row panels, when the plan
/// allows it ([`GemmPlan::direct_output`]) and there is at least one.
// with the C prefetch: matmul 2048 0.93-0.97x -> 0.94-1.04x of numpy (see docs/performance.md)
pub fn direct_rows(plan: &GemmPlan) -> Option<usize> {
    let rows = plan.m / plan.tile.mr * plan.tile.mr;
    (plan.direct_output.is_some() && rows > 0).then_some(rows)
}

/// Every decision of a launch of `plan` on `threads` threads, `A`'s tables having `facts`.
pub fn launch_plan(plan: &GemmPlan, facts: Option<InPlaceFacts>, threads: usize) -> LaunchPlan {
    let in_place = in_place_walk(plan, facts);
    LaunchPlan {
        tile: plan.tile,
        kb: plan.kb,
        k_chunk: plan.k_chunk,
        a: a_route(plan, in_place.is_some(), threads),
        in_place,
        b_panel_group: b_panel_group(plan),
        direct_rows: direct_rows(plan),
    }
}
