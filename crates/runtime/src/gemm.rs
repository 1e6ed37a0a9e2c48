//! The CPU GEMM path: matmul-shaped kernels (see [`tinygrad_codegen::gemm`]) run as generated
//! packing kernels, an AVX2/FMA micro-kernel (6x16; AVX-512F: 12x32, 6x32 for a few rows, or
//! 12x16 for at most 16 columns, chosen at run time, see [`tile`] and [`tile_for`]; the kernels
//! are in `gemm/microkernel.rs`) with cache blocking on every core (the pool tasks and their block
//! sizes are in `gemm/jobs.rs`; what each launch does — which tile, `A` in place or packed, how
//! `B` is packed, direct output — is decided in [`launch`] as pure functions of a given tile,
//! tested for every tile on any machine), and a generated epilogue kernel (skipped for a plain matmul,
//! whose whole row panels the tasks write straight into the output: see
//! [`tinygrad_codegen::gemm::GemmPlan::direct_output`]).
//!
//! Why a micro-kernel next to Cranelift: Cranelift emits 128-bit vectors only and schedules
//! nothing, which caps its generated matmul loops far below the FMA units' peak. A register-tiled
//! 6x16 outer product (12 accumulators of 8 lanes) written with `std::arch` intrinsics runs near
//! peak, and everything shape-specific (operand index arithmetic, padding gates, fused
//! producers, bias and activation) stays in generated code.
//!
//! Blocking (Goto/BLIS): `B` is packed for a chunk of K once, `A` in chunks of rows; each task
//! owns a block of `C` (rows x columns) and walks its K blocks, reusing one `B` panel (16 KB in
//! L1 at the tile's K block of 256; 64-128 KB in L2 at the longer blocks of wide and narrow
//! GEMMs, see [`tinygrad_codegen::gemm::k_block_target`]) across the rows of its `A` block
//! (L2). Each micro-kernel call prefetches its `C` tile before multiplying.
//!
//! `CPU_GEMM=0` turns the path off (the generic Cranelift kernels run instead);
//! `CPU_GEMM_MIN_FLOPS` sets the smallest kernel that takes it (default [`DEFAULT_MIN_FLOPS`],
//! 2^16, chosen by measurement). The path
//! needs AVX2 and FMA, detected at run time; without them it is never taken.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tinygrad_codegen::gemm::{A_K_GROUP, GemmPlan, GemmTile};
use tinygrad_codegen::opt::{KernelOpts, Split, VECTOR_WIDTH};
use tinygrad_codegen::{to_program_with, to_program_with_opts};
use tinygrad_uop::UOp;

use crate::Buffer;
use crate::cpu::{CpuDevice, CpuKernel, lock_buffers};
use crate::device::{CompiledAst, Device, DeviceError, Kernel};
use crate::thread_pool::global_pool;

mod jobs;
pub mod launch;
mod microkernel;

use jobs::{
    A_BLOCK_BYTES, ALIASED_LAUNCHES, BatchTasksJob, BlockJob, DirectC, FusedRowsJob, InPlaceA,
    fused_block_panels, resize,
};
pub use jobs::{aliased_launches, repacked_a_blocks};
use launch::{ARoute, InPlaceFacts, InPlaceWalk, LaunchPlan};

/// The AVX2 micro-kernel's tile: 6 rows x 16 columns (two 8-lane vectors), K blocks of ~256
/// (longer for wide and narrow GEMMs: [`tinygrad_codegen::gemm::k_block_target`]).
pub const TILE: GemmTile = GemmTile {
    mr: 6,
    nr: 16,
    kc: 256,
};

/// The AVX-512 micro-kernel's tile: 6 rows x 32 columns (two 16-lane vectors: 12 accumulators,
/// enough independent FMAs to cover their latency on both FMA ports), the same packing layouts
/// with `nr = 32`.
// Xeon: matmul 1024 147 -> 184 GFLOP/s; K blocks of 384: 2048 175 -> 195 (see docs/performance.md)
pub const TILE_AVX512: GemmTile = GemmTile {
    mr: 6,
    nr: 32,
    kc: 384,
};

/// The AVX-512 tile of GEMMs with enough rows: 12 rows x 32 columns (24 accumulators). Per `k`
/// it loads 14 vectors (2 of `B`, 12 broadcasts of `A`) for 24 FMAs where the 6x32 tile loads
/// 8 for 12, and each `B` panel in L1 serves twice the rows per call: one core of the 2-vCPU
/// Xeon multiplies packed panels in the path's blocking order 15-17% faster with it (a
/// standalone loop: 2048^3 117-131 -> 138-151 GFLOP/s, ResNet-50's 256x196x2304 150-158 ->
/// 179-182). `A` read in place goes through its tables in 6-row halves with the 6x32 kernel.
/// [`tile_for`] takes it where its padding rows cost less than that.
// Xeon: matmul 1024 268 -> 285-313 GFLOP/s (see docs/performance.md)
pub const TILE_AVX512_TALL: GemmTile = GemmTile {
    mr: 12,
    nr: 32,
    kc: 384,
};

/// The AVX-512 tile of GEMMs with at most 16 columns: 12 rows x one 16-lane vector (12
/// accumulators, as many FMAs per `B` load as the 6x32 tile). A batch-1 transformer's
/// projections have N = tokens (12-16): in the 6x32 tile half of every FMA was padding, and
/// `A` (the weight, used by one column panel) was packed for nothing; this tile reads it in
/// place along its row stride when it is contiguous along K (measured on all-MiniLM-L6-v2's
/// 384 x 16 x 384 projections, 2-vCPU Xeon: see `docs/performance.md`).
pub const TILE_AVX512_NARROW: GemmTile = GemmTile {
    mr: 12,
    nr: 16,
    kc: 384,
};

/// The tile the path plans kernels for on this CPU: [`TILE_AVX512`] when the CPU has AVX-512F
/// (detected at run time) and `CPU_AVX512` is not `0`, else [`TILE`]. (Kernels with at most 16
/// columns take [`TILE_AVX512_NARROW`] there instead, most others [`TILE_AVX512_TALL`]: see
/// [`tile_for`].)
pub fn tile() -> GemmTile {
    if avx512_enabled() { TILE_AVX512 } else { TILE }
}

/// The tile for a GEMM of `m` rows and `n` columns (after orientation): where [`tile`] is the
/// AVX-512 one, [`TILE_AVX512_NARROW`] for `n <= 16`, else [`TILE_AVX512_TALL`] unless its
/// padding rows cost more than it gains (see [`launch::tile_for_cpu`]); else [`tile`].
pub fn tile_for(m: usize, n: usize) -> GemmTile {
    launch::tile_for_cpu(tile(), m, n)
}

/// Whether kernels use the AVX-512 micro-kernel: AVX-512F detected and `CPU_AVX512` not `0`
/// (which keeps the AVX2 kernel tested on machines that have both).
pub fn avx512_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("CPU_AVX512").map_or(true, |v| v != "0") && avx512_available())
}

/// The micro-kernel the path runs on this CPU, for test and bench output: `"avx512"` or
/// `"avx2"` (`"none"` when the path is off).
pub fn microkernel_name() -> &'static str {
    match (enabled(), avx512_enabled()) {
        (false, _) => "none",
        (true, true) => "avx512",
        (true, false) => "avx2",
    }
}

/// Whether the CPU has AVX-512F (whatever `CPU_AVX512` says; shared with the row-reduction
/// path).
#[cfg(target_arch = "x86_64")]
pub(crate) fn avx512_available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn avx512_available() -> bool {
    false
}

/// Whether the CPU has AVX2 (shared with the row-reduction path).
#[cfg(target_arch = "x86_64")]
pub(crate) fn avx2_available() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn avx2_available() -> bool {
    false
}

/// Whether the GEMM path may run: AVX2 and FMA present and `CPU_GEMM` not `0`.
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("CPU_GEMM").map_or(true, |v| v != "0") && simd_available())
}

#[cfg(target_arch = "x86_64")]
fn simd_available() -> bool {
    avx2_available() && std::arch::is_x86_feature_detected!("fma")
}

#[cfg(not(target_arch = "x86_64"))]
fn simd_available() -> bool {
    false
}

static LAUNCHES: AtomicU64 = AtomicU64::new(0);

static FUSED_ROW_JOBS: AtomicU64 = AtomicU64::new(0);

/// How many K chunks ran with each task packing its own rows of `A` (`FusedRowsJob`) in this
/// process (lets tests check that they cover that path).
pub fn fused_row_jobs() -> u64 {
    FUSED_ROW_JOBS.load(Ordering::Relaxed)
}

static BATCH_TASK_LAUNCHES: AtomicU64 = AtomicU64::new(0);

/// How many batched GEMM launches ran one task per batch (`BatchTasksJob`: each task packs its
/// batch's `B` and multiplies it by `A` read in place) in this process (lets tests check that
/// they cover that path).
pub fn batch_task_launches() -> u64 {
    BATCH_TASK_LAUNCHES.load(Ordering::Relaxed)
}

/// How many GEMM-path kernels have been launched in this process (lets tests check that the
/// path really ran).
pub fn launch_count() -> u64 {
    LAUNCHES.load(Ordering::Relaxed)
}

/// The smallest matmul (flops of one matmul of a batch) that takes the path by default: 2^16.
/// Measured (`cargo run --release --example skinny_matmul` on a 2-vCPU AMD EPYC, median of 30,
/// several runs): with a smaller side of at least 8 the path is ahead of the generic kernels at
/// every shape tried — 1.3-3.1x at a 12x384x384 transformer projection, 1.2-1.5x at 64x64x64 —
/// and even at 8x64x64 (65,536 flops, 0.94-1.06x: launch overhead on both sides); the old 2^22
/// sent a batch-1 transformer's projections to the generic kernels.
// 12x384x384: 1.3-3.1x the generic kernels on Zen 2 (see docs/performance.md)
pub const DEFAULT_MIN_FLOPS: f64 = 65536.0;

/// With a nonzero `CPU_GEMM_MIN_FLOPS`, the smaller output side a kernel needs to take the path:
/// below 8 rows (or columns) most of the micro-kernel's 6x16 tile is padding, and the generic
/// kernels win (4x384x384: 151 vs 84 us; 8x384x384: 109 vs 129 us, 1.18x for the path).
// 4x384x384: 151 us on the path vs 84 us generic (see docs/performance.md)
pub const MIN_SIDE: usize = 8;

fn min_flops_cell() -> &'static AtomicU64 {
    static MIN: OnceLock<AtomicU64> = OnceLock::new();
    MIN.get_or_init(|| {
        let v = std::env::var("CPU_GEMM_MIN_FLOPS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_MIN_FLOPS);
        AtomicU64::new(v.to_bits())
    })
}

fn min_flops() -> f64 {
    f64::from_bits(min_flops_cell().load(Ordering::Relaxed))
}

/// Sets the smallest kernel (in flops) that takes the GEMM path, for kernels compiled from now
/// on (`CPU_GEMM_MIN_FLOPS` sets the initial value; `0.0` sends every eligible kernel there,
/// whatever its smaller side — what the tests of the path do).
pub fn set_min_flops(flops: f64) {
    min_flops_cell().store(flops.to_bits(), Ordering::Relaxed);
}

/// The CPU device's [`Device::compile_ast`]: a [`GemmKernel`] when `ast` is matmul-shaped.
pub(crate) fn compile(dev: &CpuDevice, ast: &UOp) -> Option<Result<CompiledAst, DeviceError>> {
    if !enabled() {
        return None;
    }
    let min = min_flops();
    let plan = launch::plan_for_cpu(ast, tile(), min)?;
    // with a threshold (not the tests' 0: every eligible kernel), a smaller side below
    // MIN_SIDE stays on the generic kernels, which are faster there (measured, see
    // DEFAULT_MIN_FLOPS) ...
    // ... and so does a batch of small matmuls (attention's per-head 12x12x32 products): the
    // threshold applies to one matmul of the batch, not the batch's total
    let one = 2.0 * (plan.m * plan.n * plan.k) as f64;
    if min > 0.0 && (plan.n.min(plan.m) < MIN_SIDE || one < min) {
        return None;
    }
    Some(GemmKernel::new(dev, plan).map(|k| {
        let name = k.name.clone();
        let flops = 2.0 * (k.plan.batch * k.plan.m * k.plan.n * k.plan.k) as f64;
        (Arc::new(k) as Arc<dyn Kernel>, name, flops)
    }))
}

/// The plan of `ast` and the decisions a launch of it takes on a CPU whose tile is `cpu`, on
/// `threads` threads, for every eligible kernel (as with [`set_min_flops`]`(0.0)`) and with
/// `A`'s tables computed on `dev` (by its generic kernels: no micro-kernel runs or needs the
/// CPU's features); `None` when `ast` is not matmul-shaped. This is what
/// `GemmKernel::new` decides, so the decisions of every tile can be tested on any machine.
pub fn launch_plan_for(
    dev: &CpuDevice,
    ast: &UOp,
    cpu: GemmTile,
    threads: usize,
) -> Result<Option<(GemmPlan, LaunchPlan)>, DeviceError> {
    let Some(plan) = launch::plan_for_cpu(ast, cpu, 0.0) else {
        return Ok(None);
    };
    let facts = InPlaceTables::build(dev, &plan)?.map(|(_, facts)| facts);
    let launch = launch::launch_plan(&plan, facts, threads);
    Ok(Some((plan, launch)))
}

/// Scratch memory reused across launches: packed `A` and `B`, `C`, and a prepared in-place
/// `A`.
#[derive(Default)]
struct Scratch {
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
    prepared: Vec<f32>,
}

/// A matmul-shaped kernel run as packing + micro-kernel + epilogue.
pub(crate) struct GemmKernel {
    plan: GemmPlan,
    name: String,
    pack_a: CpuKernel,
    pack_b: CpuKernel,
    epilogue: CpuKernel,
    source: String,
    scratch: Mutex<Scratch>,
    /// `A` read in place (when its index is separable and `CPU_GEMM_IN_PLACE` is not `0`).
    in_place: Option<InPlaceTables>,
    /// The launch's decisions with the in-place tables ([`launch::launch_plan`]).
    launch: LaunchPlan,
    /// The launch's decisions when the in-place tables do not fit the buffers bound (`A`
    /// packed).
    launch_packed: LaunchPlan,
}

/// The tables of an in-place `A` (see [`tinygrad_codegen::gemm_in_place`]): element
/// `(b, m, k)` is `buf[rows[m] + ks[k] + batches[b]]`.
struct InPlaceTables {
    /// The operand's slot.
    slot: usize,
    rows: Vec<i64>,
    ks: Vec<i64>,
    batches: Vec<i64>,
    /// The least and greatest element index the tables can form (every row, k and batch
    /// combination occurs, so these are exact).
    lo: i64,
    hi: i64,
    /// How the launch walks the operand (set when the tables are kept, see
    /// [`InPlaceTables::keep`]).
    walk: Option<InPlaceWalk>,
    /// Applies the operand's elementwise function to elements `0..=hi` of its buffer, into
    /// `Scratch::prepared`, which the tables then index.
    prepare: Option<CpuKernel>,
}

/// Whether separable `A` operands are read in place (`CPU_GEMM_IN_PLACE=0`: always packed).
pub fn in_place_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("CPU_GEMM_IN_PLACE").map_or(true, |v| v != "0"))
}

static IN_PLACE_LAUNCHES: AtomicU64 = AtomicU64::new(0);

/// How many GEMM launches read `A` in place in this process (lets tests check that they cover
/// that path).
pub fn in_place_launches() -> u64 {
    IN_PLACE_LAUNCHES.load(Ordering::Relaxed)
}

static DIRECT_LAUNCHES: AtomicU64 = AtomicU64::new(0);

/// How many GEMM launches wrote their whole row panels straight into the output (no epilogue
/// copy, see [`tinygrad_codegen::gemm::GemmPlan::direct_output`]) in this process (lets tests
/// check that they cover that path and its fallbacks).
pub fn direct_launches() -> u64 {
    DIRECT_LAUNCHES.load(Ordering::Relaxed)
}

static STRIDED_LAUNCHES: AtomicU64 = AtomicU64::new(0);

/// How many GEMM launches read `A` in place along a row stride with the narrow tile
/// ([`TILE_AVX512_NARROW`]) in this process (lets tests check that they cover that path).
pub fn strided_launches() -> u64 {
    STRIDED_LAUNCHES.load(Ordering::Relaxed)
}

/// Runs a table kernel (`out[t]` for `t` in `0..len`, `int64`) and returns the table.
fn run_table(dev: &CpuDevice, ast: &UOp, len: usize) -> Result<Vec<i64>, DeviceError> {
    let prog = to_program_with(ast, dev.caps(), false);
    let kernel = dev.compile_cpu(&prog)?;
    let mut out = vec![0i64; len.max(1)];
    let addrs = [out.as_mut_ptr() as usize];
    // SAFETY: the table kernel's only slot is its output, `len` int64 values (`out` holds at
    // least that many), written at indices `0..len`.
    unsafe { kernel.run_range(&addrs, 0, kernel.outer_len()) };
    Ok(out)
}

impl InPlaceTables {
    /// The tables of `plan`'s `A` when it is separable and in-place reads are on, with what
    /// they say ([`InPlaceFacts`]); `None` when `A` is packed whatever its tables.
    fn build(
        dev: &CpuDevice,
        plan: &GemmPlan,
    ) -> Result<Option<(InPlaceTables, InPlaceFacts)>, DeviceError> {
        let Some(op) = plan.a_in_place.as_ref().filter(|_| in_place_enabled()) else {
            return Ok(None);
        };
        let rows = run_table(dev, &op.rows, plan.mp)?;
        let ks = run_table(dev, &op.ks, plan.kb * plan.n_kb)?;
        let batches = run_table(dev, &op.batches, plan.batch)?;
        let range = |v: &[i64]| {
            let lo = v.iter().copied().min().unwrap_or(0);
            let hi = v.iter().copied().max().unwrap_or(0);
            (lo, hi)
        };
        let ((rl, rh), (kl, kh), (bl, bh)) = (range(&rows), range(&ks), range(&batches));
        let hi = rh.saturating_add(kh).saturating_add(bh);
        // Preparing costs a pass over the buffer's prefix: only worth it when the operand
        // reads at least that many elements (an im2col reads each ~k_h*k_w times).
        let prepare_pays = op.prepare.is_none()
            || (hi >= 0 && (hi as f64) < (plan.batch * plan.m * plan.k) as f64);
        let facts = InPlaceFacts::from_tables(&rows, &ks, plan.m, plan.k, prepare_pays);
        let tables = InPlaceTables {
            slot: op.slot,
            lo: rl.saturating_add(kl).saturating_add(bl),
            hi,
            walk: None,
            prepare: None,
            rows,
            ks,
            batches,
        };
        Ok(Some((tables, facts)))
    }

    /// The tables of `plan`'s `A` kept for a launch that reads it in place as `walk` says,
    /// with its elementwise function compiled.
    fn keep(
        mut self,
        dev: &CpuDevice,
        plan: &GemmPlan,
        walk: InPlaceWalk,
    ) -> Result<InPlaceTables, DeviceError> {
        self.walk = Some(walk);
        if let Some(f) = plan.a_in_place.as_ref().and_then(|op| op.prepare.as_ref()) {
            let ast = f.kernel(self.hi as usize + 1);
            let prog = to_program_with(&ast, dev.caps(), dev.optimizes());
            self.prepare = Some(dev.compile_cpu(&prog)?);
        }
        Ok(self)
    }

    /// How the launch walks `A` (set by [`InPlaceTables::keep`]).
    fn walk(&self) -> InPlaceWalk {
        self.walk.expect("in-place tables are kept with their walk")
    }

    /// The in-place operand of a chunk from `k0` of the batch at `base` (the operand's buffer
    /// moved by that batch's offset) of `plan`'s GEMM.
    fn chunk(&self, plan: &GemmPlan, base: usize, k0: usize) -> InPlaceA {
        let walk = self.walk();
        InPlaceA {
            base,
            rows: self.rows.as_ptr() as usize,
            ks: self.ks.as_ptr() as usize + 8 * k0,
            k_left: plan.k - k0,
            stride: walk.stride,
            m: plan.m,
            mp: plan.mp,
            rows_alias: walk.rows_alias,
            k_contiguous: walk.k_contiguous,
            streamed: walk.streamed,
            repacked: walk.repacked,
        }
    }

    /// Whether every index the tables form lies inside `buf` (in its elements): checked at
    /// each launch, so a table that disagreed with the buffer would fall back to packing
    /// rather than read out of bounds.
    fn fits(&self, buf: &Buffer) -> bool {
        let elems = buf.nbytes() / (buf.dtype.bitsize() as usize / 8).max(1);
        self.lo >= 0 && (self.hi as u64) < elems as u64
    }
}

/// Compiles a packing kernel so that its outer loop is the panel index, or the index of a
/// group of panels (the launcher runs sub-ranges of it): without opts (and without the group)
/// if the heuristic changed the outer loop.
///
/// `axis` is the row-in-panel range (`r` rows); `group_axis` the range over a group of `k`
/// values when the layout has one (`A`'s), which becomes the vector axis; `panel_group`:
/// `(the panel range's id, g)` to take `g` panels per iteration of the `k` loop (`g` divides
/// `panels`; the outer loop then runs over groups: `panels / g` iterations).
fn compile_pack(
    dev: &CpuDevice,
    ast: &UOp,
    panels: usize,
    r: usize,
    axis: usize,
    group_axis: Option<usize>,
    panel_group: Option<(usize, usize)>,
) -> Result<CpuKernel, DeviceError> {
    let outer = panels / panel_group.map_or(1, |(_, g)| g);
    // One panel: its range is folded away, and the launcher runs the whole kernel.
    let fits = |o: Option<usize>| panels == 1 || o == Some(outer);
    // The panel's rows fully unrolled (range `axis` of the packing kernel): what depends on the
    // row alone is computed once per panel, what depends on k once per k. Without a k group,
    // the rows are the vector lanes where they fill whole vectors.
    let lanes = if group_axis.is_none() && r.is_multiple_of(VECTOR_WIDTH) {
        vec![VECTOR_WIDTH, r / VECTOR_WIDTH]
    } else {
        vec![r]
    };
    let mut splits = vec![Split {
        axis,
        vector: lanes.len() == 2,
        lanes,
    }];
    if let Some(g) = group_axis {
        splits.push(Split {
            axis: g,
            lanes: vec![A_K_GROUP],
            vector: true,
        });
    }
    if let Some((panel_axis, g)) = panel_group {
        splits.push(Split {
            axis: panel_axis,
            lanes: vec![g],
            vector: false,
        });
    }
    let opts = KernelOpts {
        splits,
        order: None,
    };
    let prog = to_program_with_opts(ast, dev.caps(), &opts);
    let prog = if fits(prog.outer_size) {
        prog
    } else if panel_group.is_some() {
        // (without the panel group: one panel per iteration, as `run_panels` expects)
        return compile_pack(dev, ast, panels, r, axis, group_axis, None);
    } else {
        to_program_with(ast, dev.caps(), false)
    };
    if crate::device::debug_level() >= 7 {
        eprintln!("packing kernel AST:\n{}", ast.pretty());
    }
    if crate::device::debug_level() >= 6 {
        for (i, u) in prog.uops.iter().enumerate() {
            let srcs: Vec<usize> = u
                .src()
                .iter()
                .filter_map(|s| prog.uops.iter().position(|x| x == s))
                .collect();
            eprintln!(
                "{i:4} {:<12} {:<10} {:?} {}",
                u.op().name(),
                u.dtype().to_string(),
                srcs,
                u.arg()
            );
        }
    }
    if !fits(prog.outer_size) {
        return Err(DeviceError::Compile {
            kernel: prog.name,
            message: format!(
                "gemm packing kernel: outer loop {:?}, expected {panels} panels",
                prog.outer_size
            ),
        });
    }
    dev.compile_cpu(&prog)
}

/// [`compile_pack`] for `B`, taking [`launch::b_panel_group`] panels per iteration (with more
/// than one, the kernel's outer loop runs over groups of panels: the launcher runs it whole,
/// `0..outer_len()`).
fn compile_pack_b(dev: &CpuDevice, plan: &GemmPlan) -> Result<CpuKernel, DeviceError> {
    let panels = plan.np / plan.tile.nr;
    let group = launch::b_panel_group(plan);
    compile_pack(
        dev,
        &plan.pack_b,
        panels,
        plan.tile.nr,
        plan.pack_row_axis,
        None,
        (group > 1).then_some((plan.pack_panel_axis, group)),
    )
}

/// Runs panels `lo..hi` of a packing kernel compiled by [`compile_pack`] for `panels` panels.
///
/// # Safety
/// As [`CpuKernel::run_range`] for those panels.
unsafe fn run_panels(k: &CpuKernel, addrs: &[usize], panels: usize, lo: usize, hi: usize) {
    // SAFETY: forwarded; with one panel the whole kernel is that panel.
    unsafe {
        if panels == 1 {
            k.run_range(addrs, 0, k.outer_len());
        } else {
            k.run_range(addrs, lo, hi);
        }
    }
}

impl GemmKernel {
    fn new(dev: &CpuDevice, plan: GemmPlan) -> Result<GemmKernel, DeviceError> {
        let (axis, tile) = (plan.pack_row_axis, plan.tile);
        // the micro-kernels' contract (see `microkernel`): a 32-column tile only where the CPU
        // has AVX-512
        assert!(
            tile == TILE
                || ([TILE_AVX512, TILE_AVX512_TALL, TILE_AVX512_NARROW].contains(&tile)
                    && avx512_available()),
            "GEMM kernel: tile {tile:?} has no micro-kernel on this CPU"
        );
        let group = Some(plan.pack_a_group_axis);
        let pack_a = compile_pack(
            dev,
            &plan.pack_a,
            plan.mp / tile.mr,
            tile.mr,
            axis,
            group,
            None,
        )?;
        let pack_b = compile_pack_b(dev, &plan)?;
        let eprog = to_program_with(&plan.epilogue, dev.caps(), dev.optimizes());
        let name = format!("gemm_{}_{}_{}_{}", plan.batch, plan.m, plan.n, plan.k);
        let epilogue = dev.compile_cpu(&eprog)?;
        let source = format!(
            "// {name}: pack A\n{}\n// pack B\n{}\n// epilogue ({})\n{}",
            pack_a.source(),
            pack_b.source(),
            eprog.name,
            epilogue.source()
        );
        // Reading A in place is an optimization: if its small kernels fail to build, pack.
        let threads = global_pool().threads();
        let packed = |e: DeviceError| {
            if crate::device::debug_level() >= 1 {
                eprintln!("{name}: A is packed, its in-place tables failed to build: {e}");
            }
            (None, launch::launch_plan(&plan, None, threads))
        };
        let (in_place, launch) = match InPlaceTables::build(dev, &plan) {
            Ok(Some((tables, facts))) => {
                let launch = launch::launch_plan(&plan, Some(facts), threads);
                match launch.in_place.map(|walk| tables.keep(dev, &plan, walk)) {
                    None => (None, launch),
                    Some(Ok(tables)) => (Some(tables), launch),
                    Some(Err(e)) => packed(e),
                }
            }
            Ok(None) => (None, launch::launch_plan(&plan, None, threads)),
            Err(e) => packed(e),
        };
        let launch_packed = launch::launch_plan(&plan, None, threads);
        Ok(GemmKernel {
            launch,
            launch_packed,
            plan,
            name,
            pack_a,
            pack_b,
            epilogue,
            source,
            scratch: Mutex::new(Scratch::default()),
            in_place,
        })
    }

    fn run(&self, bufs: &[Arc<Buffer>], scratch: &mut Scratch) {
        let p = &self.plan;
        let (mr, nr, kb) = (p.tile.mr, p.tile.nr, p.kb);
        let locked = lock_buffers(bufs, &p.globals, &p.extents);
        let addrs = &locked.addrs;
        let kp = kb * p.n_kb;
        let k_chunk = p.k_chunk;
        // Rows of A packed per launch: ~1 MiB, whole panels, so the micro-kernels read the
        // packed block from L2/L3 rather than memory (measured on beautiful_mnist's second conv,
        // 204800x32x800: micro-kernel 115-160 ms with 16 MiB blocks, 80 ms with 1 MiB).
        let a_rows = ((A_BLOCK_BYTES / (4 * k_chunk)) / mr * mr).clamp(mr, p.mp);
        resize(&mut scratch.a, a_rows * k_chunk);
        resize(&mut scratch.b, p.np * k_chunk);
        resize(&mut scratch.c, p.batch * p.mp * p.np);
        let (a_buf, b_buf, c_buf) = (
            scratch.a.as_mut_ptr() as usize,
            scratch.b.as_mut_ptr() as usize,
            scratch.c.as_mut_ptr() as usize,
        );
        let profile = crate::device::debug_level() >= 3;
        let mut times = [0f64; 4];
        let mut clock = std::time::Instant::now();
        let mut lap = |i: usize| {
            if profile {
                times[i] += clock.elapsed().as_secs_f64();
                clock = std::time::Instant::now();
            }
        };
        let in_place = self.in_place.as_ref().filter(|t| t.fits(&bufs[t.slot]));
        let launch = if in_place.is_some() {
            &self.launch
        } else {
            &self.launch_packed
        };
        // The in-place operand's buffer: the original, or its prepared copy.
        let mut a_base = 0;
        if let Some(t) = in_place {
            IN_PLACE_LAUNCHES.fetch_add(1, Ordering::Relaxed);
            if t.walk().stride.is_some() {
                STRIDED_LAUNCHES.fetch_add(1, Ordering::Relaxed);
            }
            if t.walk().rows_alias {
                ALIASED_LAUNCHES.fetch_add(1, Ordering::Relaxed);
            }
            a_base = addrs[t.slot];
            if let Some(k) = &t.prepare {
                resize(&mut scratch.prepared, t.hi as usize + 1);
                let prepared = scratch.prepared.as_mut_ptr() as usize;
                // SAFETY: slot 0 is `prepared` (hi + 1 floats, the kernel's length), slot 1
                // the locked operand buffer, which holds more than `hi` elements (`fits`).
                unsafe { k.run_range(&[prepared, a_base], 0, k.outer_len()) };
                a_base = prepared;
            }
        }
        // Whole row panels of C go straight into the output when the epilogue would only copy
        // them (`GemmPlan::direct_output`) and the output overlaps no input: the epilogue reads
        // every input before writing, tiles written early must not change what later tiles read.
        let direct_rows = launch.direct_rows.unwrap_or(0);
        let direct_slot = p.direct_output.filter(|&o| {
            let (lo, hi) = (addrs[o], addrs[o] + bufs[o].nbytes());
            launch.direct_rows.is_some()
                && (0..bufs.len())
                    .filter(|&s| s != o)
                    .all(|s| addrs[s] + bufs[s].nbytes() <= lo || hi <= addrs[s])
        });
        let direct_at = |bi: usize| {
            direct_slot.map(|o| DirectC {
                out: addrs[o] + 4 * bi * p.m * p.np,
                rows: direct_rows,
            })
        };
        let mut fused_any = false;
        let mut params = [0i64; 2];
        let params_addr = params.as_mut_ptr() as usize;
        let slot_addrs = |first: usize, slots: &[usize]| -> Vec<usize> {
            let mut v = vec![first];
            v.extend(slots.iter().map(|&s| addrs[s]));
            v.push(params_addr);
            v
        };
        // Many batches with one K chunk each (a convolution's weight gradient, split along
        // its long reduction): one task per batch. Per batch, packing B and multiplying its few
        // tiles as two parallel launches cost a thread-pool round trip each, 256 of them for
        // beautiful_mnist's first convolution.
        let mut ran_per_batch = false;
        if let Some(t) = in_place.filter(|_| launch.a == ARoute::BatchTasks) {
            BATCH_TASK_LAUNCHES.fetch_add(1, Ordering::Relaxed);
            let job = BatchTasksJob {
                pack_b: self.pack_b.entry(),
                // (the whole kernel: its outer loop is over panels, groups of panels, or, with
                // one panel, not over panels at all)
                pack_b_len: self.pack_b.outer_len(),
                b_inputs: p.b_slots.iter().map(|&s| addrs[s]).collect(),
                a_base,
                batches: t.batches.as_ptr() as usize,
                c: c_buf,
                gemm: BlockJob {
                    a: 0,
                    b: 0,
                    c: 0,
                    rows: p.mp,
                    m0: 0,
                    np: p.np,
                    kb,
                    k_chunk,
                    blocks: 0..p.n_kb,
                    first_block: true,
                    // (each task moves the base to its batch)
                    in_place: Some(t.chunk(p, 0, 0)),
                    direct: None,
                },
                direct: direct_at(0),
                rows_per_batch: p.m,
            };
            // SAFETY: the inputs stay locked (`locked`) and the tables (`self.in_place`) and
            // `c` (batch * mp * np floats) live until `run` returns, after every task.
            unsafe { job.run(p.batch, mr, nr) };
            lap(2);
            ran_per_batch = true;
        }
        // (the batch loop below is for the other launches)
        let batches_left = if ran_per_batch { 0 } else { p.batch };
        for bi in 0..batches_left {
            for k0 in (0..kp).step_by(k_chunk) {
                params[0] = k0 as i64;
                params[1] = bi as i64;
                let blocks = (k0 / kb)..((k0 + k_chunk) / kb).min(p.n_kb);
                // SAFETY: slot 0 is `b` (np * k_chunk floats: every panel's k_chunk x nr), the
                // inputs are the locked buffers at their original slots, and `params` is live
                // on this frame; the packing kernel clamps every index into its operand.
                unsafe {
                    self.pack_b.run_range(
                        &slot_addrs(b_buf, &p.b_slots),
                        0,
                        self.pack_b.outer_len(),
                    )
                };
                lap(1);
                // This chunk's multiply; the A source and rows are set per variant below.
                let chunk = BlockJob {
                    a: 0,
                    b: b_buf,
                    c: c_buf + 4 * bi * p.mp * p.np,
                    rows: 0,
                    m0: 0,
                    np: p.np,
                    kb,
                    k_chunk,
                    blocks,
                    first_block: k0 == 0,
                    in_place: None,
                    direct: direct_at(bi),
                };
                if let Some(t) = in_place {
                    // `A` read where it lies: every task multiplies its rows by its B panels.
                    let job = BlockJob {
                        rows: p.mp,
                        in_place: Some(t.chunk(
                            p,
                            a_base.wrapping_add((t.batches[bi] as usize).wrapping_mul(4)),
                            k0,
                        )),
                        ..chunk
                    };
                    job.run(mr, nr);
                    lap(2);
                    continue;
                }
                let m_panels = p.mp / mr;
                if launch.a == ARoute::PackedPerTask {
                    let fused_panels = fused_block_panels(mr, k_chunk);
                    let job = FusedRowsJob {
                        pack_a: self.pack_a.entry(),
                        inputs: p.a_slots.iter().map(|&s| addrs[s]).collect(),
                        params: params_addr,
                        panels: fused_panels,
                        m_panels,
                        gemm: chunk,
                    };
                    // SAFETY: as for the packing and micro-kernel calls below: the inputs stay
                    // locked and `params`, `b` and `c` live until `run` returns, which is after
                    // every task has finished.
                    unsafe { job.run(mr, nr) };
                    fused_any = true;
                    lap(2);
                    continue;
                }
                for m0 in (0..p.mp).step_by(a_rows) {
                    let m1 = (m0 + a_rows).min(p.mp);
                    // Panels m0/mr.. are written at `(panel - m0/mr) * k_chunk * mr` of `a`:
                    // the kernel indexes from the panel number, so its base moves back.
                    let base = a_buf.wrapping_sub((m0 / mr) * k_chunk * mr * 4);
                    // SAFETY: panels `m0/mr..m1/mr` land inside `a` (a_rows * k_chunk floats)
                    // by the base adjustment above; inputs and params as for B.
                    unsafe {
                        let addrs = slot_addrs(base, &p.a_slots);
                        run_panels(&self.pack_a, &addrs, p.mp / mr, m0 / mr, m1 / mr)
                    };
                    lap(0);
                    let job = BlockJob {
                        a: a_buf,
                        rows: m1 - m0,
                        m0,
                        ..chunk.clone()
                    };
                    job.run(mr, nr);
                    lap(2);
                }
            }
        }
        if let Some(o) = direct_slot {
            DIRECT_LAUNCHES.fetch_add(1, Ordering::Relaxed);
            // The rows of each batch's last, partial panel, from the scratch C.
            let tail = (p.m - direct_rows) * p.np;
            for bi in (0..p.batch).filter(|_| tail > 0) {
                let from = c_buf + 4 * (bi * p.mp + direct_rows) * p.np;
                let to = addrs[o] + 4 * (bi * p.m + direct_rows) * p.np;
                // SAFETY: `c` holds batch * mp * np floats and rows direct_rows..m < mp of
                // batch bi lie inside it; the output (locked, overlapping no input nor the
                // scratch) holds batch * m * n floats (`extents`, checked by `lock_buffers`),
                // n == np, so rows direct_rows..m of batch bi lie inside it too.
                unsafe { std::ptr::copy_nonoverlapping(from as *const f32, to as *mut f32, tail) };
            }
        } else {
            let mut eaddrs = addrs.clone();
            eaddrs.push(c_buf);
            // SAFETY: the original buffers stay locked by `locked`; `c` holds batch * mp * np
            // floats, every index the epilogue computes (`b*mp*np + m*np + n` within the
            // unpadded sizes).
            unsafe {
                self.epilogue
                    .run_range(&eaddrs, 0, self.epilogue.outer_len())
            };
        }
        lap(3);
        if profile {
            eprintln!(
                "{}: {}pack A {:.2} ms, pack B {:.2} ms, micro-kernel{} {:.2} ms, epilogue {:.2} ms",
                self.name,
                match in_place {
                    Some(t) if t.prepare.is_some() => "A prepared and read in place, ",
                    Some(t) if t.walk().stride.is_some() =>
                        "A read in place along its row stride, ",
                    Some(_) => "A read in place, ",
                    None => "",
                },
                times[0] * 1e3,
                times[1] * 1e3,
                if fused_any { " (with packing A)" } else { "" },
                times[2] * 1e3,
                times[3] * 1e3
            );
        }
        drop(locked);
    }
}

impl Kernel for GemmKernel {
    fn launch(&self, bufs: &[Arc<Buffer>], vars: &[i64]) {
        assert!(vars.is_empty(), "GEMM kernel: launched with variables");
        LAUNCHES.fetch_add(1, Ordering::Relaxed);
        match self.scratch.try_lock() {
            Ok(mut s) => self.run(bufs, &mut s),
            Err(_) => self.run(bufs, &mut Scratch::default()),
        }
    }

    fn source(&self) -> &str {
        &self.source
    }
}
