//! How a GEMM launch's multiply is cut into pool tasks: [`BlockJob`] (each task a block of
//! `C` over a chunk's K blocks, `A` packed or read in place through [`InPlaceA`]),
//! [`FusedRowsJob`] (each task packs and multiplies its own rows) and [`BatchTasksJob`] (one
//! task per batch), with the cache-blocking sizes they use.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::microkernel::{Prefetch, microkernel, microkernel_in_place, microkernel_strided};
use super::{FUSED_ROW_JOBS, TILE_AVX512_NARROW};
use crate::thread_pool::global_pool;

/// Bytes of `A` a task multiplies by every `B` panel before its next rows (see
/// `BlockJob::task`): half of a 512 KiB L2 (the Zen cores measured; larger elsewhere), the rest
/// for `B` and `C`.
// matmul 2048 micro-kernel 244 -> 240 ms (see docs/performance.md)
pub(super) const A_L2_BYTES: usize = 256 << 10;

/// K blocks shorter than this (a convolution over one input channel: K = 25) run their tiles
/// row panel by row panel over blocks of [`B_L2_BYTES`] of `B` (see `BlockJob::task`).
// mnist conv1 micro-kernel 9.2-11.5 -> 5.4-6.9 ms (see docs/performance.md)
pub(super) const SHORT_K_BLOCK: usize = 64;

/// Bytes of packed `B` per block of column panels of a short-K task.
pub(super) const B_L2_BYTES: usize = 128 << 10;

/// An in-place `A` contiguous along K multiplied by at most this many column panels is read
/// about once from memory: see `InPlaceA::streamed`.
// MiniLM-shaped encoder 1x12: 9.1-9.3 -> 8.1-8.4 ms on Zen 2 (see docs/performance.md)
pub(super) const STREAMED_COL_PANELS: usize = 2;

/// How many panels ahead the in-place micro-kernel prefetches `A` (one row of that panel, at
/// every `k`). A convolution's input read in place misses in every cache at the first panel of
/// each image, and the hardware prefetcher does not follow its short strided runs.
// mnist single-row band GEMMs 28.0 -> 17.2 ms per step (see docs/performance.md)
pub(super) const PREFETCH_PANELS: usize = 4;

/// Bytes of `A` per block instead of [`A_L2_BYTES`] when `A` is read in place from rows a
/// multiple of [`ALIAS_BYTES`] apart. The 1 KiB slices of such rows (a K block of 256) all
/// start at the same offset within 4 KiB, so they share 1/4 of L1's sets and, at 8 KiB apart,
/// 1/8 of L2's: a 256 KiB block thrashes where a packed one would fit. 48 KiB (two 6-row
/// panels at the wide K blocks of 1024 that such matmuls take, see
/// [`tinygrad_codegen::gemm::k_block_target`]; eight at 256, five at AVX-512's 384) stays
/// resident. Measured on a 2-vCPU Zen 2 (AVX2), alternating same-run comparisons against
/// numpy: 24 KiB at K blocks of 256 took matmul 1024 from 0.77-0.88x to 0.87-0.95x and 2048
/// from 0.82-0.83x to 0.86-0.89x; at K blocks of 512, 48 KiB ran matmul 2048 at 176 GFLOP/s
/// against 171 with 24 KiB. Not measured with AVX-512. beautiful_mnist's GEMMs
/// do not alias and keep the larger block (taking 24 KiB for them too did not change its
/// step).
// matmul 1024 0.77-0.88x -> 0.87-0.95x of numpy on Zen 2 (see docs/performance.md)
pub(super) const A_ALIASED_BYTES: usize = 48 << 10;

/// The distance between rows (in bytes) at which their slices alias in the caches: L1's
/// 4 KiB way size (64 sets of 64 bytes).
pub(super) const ALIAS_BYTES: usize = 4096;

pub(super) static ALIASED_LAUNCHES: AtomicU64 = AtomicU64::new(0);

/// How many GEMM launches read `A` in place from rows a multiple of 4 KiB apart (in small row
/// blocks, which stay in cache although those rows share cache sets) in this process (lets
/// tests check that they cover that path).
pub fn aliased_launches() -> u64 {
    ALIASED_LAUNCHES.load(Ordering::Relaxed)
}

/// Row blocks of an in-place `A` whose rows alias (see [`A_ALIASED_BYTES`]) that tasks copied
/// into their thread's buffer (see `BlockJob::task_blocks`), in this process.
pub(super) static REPACKED_BLOCKS: AtomicU64 = AtomicU64::new(0);

/// How many row blocks of an in-place `A` whose rows alias were copied into a task's packed
/// buffer before their multiply, in this process (lets tests check that they cover that path).
pub fn repacked_a_blocks() -> u64 {
    REPACKED_BLOCKS.load(Ordering::Relaxed)
}

/// Bytes of packed `A` per packing launch (see `GemmKernel::run`).
pub(super) const A_BLOCK_BYTES: usize = 1 << 20;

/// Bytes of packed `A` per task of a [`FusedRowsJob`]: with `B`'s panels, within one core's L2 (512 KiB here).
// conv 204800x32x800: 350 -> 272 ms (see docs/performance.md)
pub(super) const FUSED_A_BYTES: usize = 384 << 10;

/// At most this many rows of `A` per task of a [`FusedRowsJob`] (64 panels of the 6-row tiles,
/// 32 of the 12-row ones): a short K would otherwise give a task so many rows that two threads
/// get too few tasks to balance.
pub(super) const FUSED_MAX_ROWS: usize = 384;

/// Row panels per task of a [`FusedRowsJob`].
pub(super) fn fused_block_panels(mr: usize, k_chunk: usize) -> usize {
    (FUSED_A_BYTES / (4 * mr * k_chunk)).clamp(1, FUSED_MAX_ROWS / mr)
}

thread_local! {
    /// Each thread's packed `A` block for [`FusedRowsJob`] tasks (kept between launches: a
    /// fresh allocation of this size is page faults every time).
    static FUSED_A: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// One K chunk of a GEMM with many row panels: each task packs its own block of `A` rows into
/// its thread's buffer and multiplies it by every `B` panel at once, so the packed block is
/// written and read by the same core while it is in that core's L2 (packing a shared block and
/// multiplying it in separate jobs moved it between cores, and the packing kernel runs on
/// both cores either way).
pub(super) struct FusedRowsJob {
    /// The packing kernel of `A` (compiled with panels as its outer loop).
    pub(super) pack_a: crate::cpu::KernelFn,
    /// The addresses of `pack_a`'s input slots `1..`.
    pub(super) inputs: Vec<usize>,
    /// The address of the `[k0, b]` params.
    pub(super) params: usize,
    /// Row panels per task.
    pub(super) panels: usize,
    /// Row panels in all.
    pub(super) m_panels: usize,
    /// The micro-kernel loop; `a`, `rows` and `m0` are set per task.
    pub(super) gemm: BlockJob,
}

impl FusedRowsJob {
    /// # Safety
    /// The inputs, params, packed `B` and `C` must stay valid and otherwise unused until this
    /// returns; `C` must hold `mp x np` floats and `B` `np * k_chunk`.
    pub(super) unsafe fn run(self, mr: usize, nr: usize) {
        FUSED_ROW_JOBS.fetch_add(1, Ordering::Relaxed);
        let tasks = self.m_panels.div_ceil(self.panels);
        let job = Arc::new(self);
        global_pool().run(
            tasks,
            Box::new(move |t| {
                let lo = t * job.panels;
                let hi = (lo + job.panels).min(job.m_panels);
                let k_chunk = job.gemm.k_chunk;
                FUSED_A.with(|buf| {
                    let mut buf = buf.borrow_mut();
                    resize(&mut buf, job.panels * mr * k_chunk);
                    let a = buf.as_mut_ptr() as usize;
                    // The packing kernel writes panel `p` at `p * k_chunk * mr`: its base moves
                    // back by the block's first panel so panel `lo` lands at `a`.
                    let mut addrs = vec![a.wrapping_sub(lo * k_chunk * mr * 4)];
                    addrs.extend(&job.inputs);
                    addrs.push(job.params);
                    // SAFETY: panels `lo..hi` land inside this thread's buffer (panels * mr *
                    // k_chunk floats, hi - lo <= panels); the inputs and params are valid per
                    // `run`'s contract and the kernel clamps or gates every index into them.
                    unsafe { (job.pack_a)(addrs.as_ptr().cast::<*mut u8>(), lo as i64, hi as i64) };
                    let gemm = BlockJob {
                        a,
                        rows: (hi - lo) * mr,
                        m0: lo * mr,
                        ..job.gemm.clone()
                    };
                    gemm.task(mr, nr, 0..hi - lo, 0..job.gemm.np / nr);
                });
            }),
        );
    }
}

/// Batched GEMMs with at least this many batches per thread run one task per batch
/// ([`BatchTasksJob`]).
pub(super) const BATCH_TASKS_PER_THREAD: usize = 4;

thread_local! {
    /// Each thread's packed `B` for [`BatchTasksJob`] tasks (kept between launches, as
    /// [`FUSED_A`]).
    static BATCH_B: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A batched GEMM whose `A` is read in place and whose K is one chunk, run as one task per
/// batch: each task packs its batch's `B` into its thread's buffer (where it stays in that
/// core's cache) and multiplies every tile of that batch.
pub(super) struct BatchTasksJob {
    /// The packing kernel of `B` (panels as its outer loop).
    pub(super) pack_b: crate::cpu::KernelFn,
    /// The range `0..pack_b_len` of `pack_b`'s outer loop packs every panel.
    pub(super) pack_b_len: usize,
    /// The addresses of `pack_b`'s input slots `1..`.
    pub(super) b_inputs: Vec<usize>,
    /// The in-place operand's buffer (the original or its prepared copy).
    pub(super) a_base: usize,
    /// The address of the in-place batch table (`batch` int64 offsets).
    pub(super) batches: usize,
    /// The address of `C` (`batch * mp * np` floats).
    pub(super) c: usize,
    /// The micro-kernel loop of one batch (`rows`: `C`'s padded rows per batch); `b`, `c` and
    /// the in-place base are set per task.
    pub(super) gemm: BlockJob,
    /// The output of batch 0 when whole row panels are written there (moved per batch by
    /// `rows_per_batch` rows).
    pub(super) direct: Option<DirectC>,
    /// The output's rows per batch (without padding).
    pub(super) rows_per_batch: usize,
}

impl BatchTasksJob {
    /// # Safety
    /// The inputs, the in-place tables and `C` must stay valid and otherwise unused until this
    /// returns; the batch table must hold `batch` entries, and every row, K and batch table sum
    /// must lie inside the in-place operand (`InPlaceTables::fits`).
    pub(super) unsafe fn run(self, batch: usize, mr: usize, nr: usize) {
        let job = Arc::new(self);
        global_pool().run(
            batch,
            Box::new(move |bi| {
                let g = &job.gemm;
                let n_panels = g.np / nr;
                BATCH_B.with(|buf| {
                    let mut buf = buf.borrow_mut();
                    resize(&mut buf, g.np * g.k_chunk);
                    let b = buf.as_mut_ptr() as usize;
                    let params = [0i64, bi as i64];
                    let mut addrs = vec![b];
                    addrs.extend(&job.b_inputs);
                    addrs.push(params.as_ptr() as usize);
                    // SAFETY: slot 0 is this thread's buffer (np * k_chunk floats: every panel's
                    // k_chunk x nr), the inputs are valid per `run`'s contract, `params` ([k0,
                    // b]) lives on this frame; the kernel clamps or gates every index into its
                    // operands.
                    unsafe {
                        (job.pack_b)(addrs.as_ptr().cast::<*mut u8>(), 0, job.pack_b_len as i64)
                    };
                    // SAFETY: bi < batch, the table's length per `run`'s contract.
                    let offset = unsafe { *((job.batches + 8 * bi) as *const i64) };
                    let in_place = g.in_place.map(|ip| InPlaceA {
                        base: job.a_base.wrapping_add((offset as usize).wrapping_mul(4)),
                        ..ip
                    });
                    let gemm = BlockJob {
                        b,
                        c: job.c + 4 * bi * g.rows * g.np,
                        in_place,
                        direct: job.direct.map(|d| DirectC {
                            out: d.out + 4 * bi * job.rows_per_batch * g.np,
                            ..d
                        }),
                        ..g.clone()
                    };
                    gemm.task(mr, nr, 0..g.rows / mr, 0..n_panels);
                });
            }),
        );
    }
}

/// How a chunk's `m_panels x n_panels` tiles are cut into tasks: `(row blocks, column blocks)`.
///
/// Row blocks of up to 24 panels (144 rows: the A block stays in L2) and column blocks of up to
/// 32 panels (64 for wide GEMMs: [`column_block`]), cut finer until every thread has at least 4 tasks when the chunk allows; then the
/// task count is rounded up to a multiple of the threads, and [`even_part`] gives the blocks
/// sizes that differ by at most one panel. Without the rounding, BERT's 512-row GEMMs (86 row
/// panels) ran as 8 tasks of 12, 12, ..., 2 panels: one thread idled for a tenth of the kernel.
pub(super) fn task_grid(m_panels: usize, n_panels: usize, threads: usize) -> (usize, usize) {
    let (m_panels, n_panels, threads) = (m_panels.max(1), n_panels.max(1), threads.max(1));
    let target = 4 * threads;
    let cb = column_block(n_panels);
    let mut tm = m_panels.div_ceil(24);
    while tm < m_panels && tm * n_panels.div_ceil(cb) < target {
        tm = (tm * 2).min(m_panels);
    }
    let mut tn = if tm >= 2 * threads {
        n_panels.div_ceil(cb)
    } else {
        target.min(n_panels)
    };
    while !(tm * tn).is_multiple_of(threads) && (tm < m_panels || tn < n_panels) {
        if tm < m_panels {
            tm += 1;
        } else {
            tn += 1;
        }
    }
    (tm, tn)
}

/// Column panels per task block in [`task_grid`]: 32, or 64 for GEMMs of at least 128 column
/// panels (2048 columns of the AVX2 tile), where each task's rows of `A` are read once per
/// column block and `A` is large (matmul 2048: 8 MiB per K chunk, read 4 times with blocks of
/// 32). Measured on a 2-vCPU Zen 2, alternating in one process, medians of 12 runs: matmul
/// 2048 96.4 -> 94.8 and 97.5 -> 96.8 ms (two runs); matmul 1024 (64 panels) was 0.2-0.6%
/// slower with 64, so it keeps 32.
// matmul 2048 96.4 -> 94.8 ms on Zen 2 (see docs/performance.md)
fn column_block(n_panels: usize) -> usize {
    if n_panels >= 128 { 64 } else { 32 }
}

/// Part `i` of `0..n` cut into `parts` ranges whose lengths differ by at most one.
pub(super) fn even_part(n: usize, parts: usize, i: usize) -> std::ops::Range<usize> {
    (n * i / parts)..(n * (i + 1) / parts)
}

pub(super) fn resize(v: &mut Vec<f32>, n: usize) {
    if v.len() < n {
        *v = crate::huge_pages::zeroed_f32(n);
    }
}

/// The GEMM of one packed chunk: `C[m0.., ..] (+)= A_chunk x B_chunk` over K blocks `blocks`.
#[derive(Clone)]
pub(super) struct BlockJob {
    pub(super) a: usize,
    pub(super) b: usize,
    pub(super) c: usize,
    pub(super) rows: usize,
    pub(super) m0: usize,
    pub(super) np: usize,
    pub(super) kb: usize,
    pub(super) k_chunk: usize,
    pub(super) blocks: std::ops::Range<usize>,
    pub(super) first_block: bool,
    /// `A` read in place rather than from the packed `a`.
    pub(super) in_place: Option<InPlaceA>,
    /// Where the whole row panels of `C` go instead of `c`: the output itself.
    pub(super) direct: Option<DirectC>,
}

/// The output that a GEMM's whole row panels are written to (`GemmPlan::direct_output`):
/// `C`'s rows `0..rows` (all whole panels, from the batch's row 0) at `out + 4 * (row * np +
/// col)`; the last, partial panel's rows stay in the scratch `C`, and the launcher copies them.
#[derive(Clone, Copy)]
pub(super) struct DirectC {
    /// The address of the batch's output row 0.
    pub(super) out: usize,
    /// Rows written directly: a multiple of the tile's rows, at most the output's rows.
    pub(super) rows: usize,
}

/// Where an in-place `A` chunk lies: element `(m, k0 + p)` at `base + 4 * (rows[m] + ks[p])`.
#[derive(Clone, Copy)]
pub(super) struct InPlaceA {
    /// The operand buffer's address, moved by the batch's offset (may point outside it: only
    /// full sums are dereferenced).
    pub(super) base: usize,
    /// The address of the row table (`mp` int64 values).
    pub(super) rows: usize,
    /// The address of the K table at the chunk's first `k`.
    pub(super) ks: usize,
    /// `k` values left from the chunk's start (the last block stops at K: the packed `B` is
    /// zero past it, but `A` values there are real data and `inf * 0` would be NaN).
    pub(super) k_left: usize,
    /// [`InPlaceWalk::stride`](super::InPlaceWalk::stride).
    pub(super) stride: Option<usize>,
    /// Rows of `A` (without padding): a panel reaching past them is read through the tables.
    pub(super) m: usize,
    /// Entries of the row table (rows with padding).
    pub(super) mp: usize,
    /// [`InPlaceWalk::rows_alias`](super::InPlaceWalk::rows_alias).
    pub(super) rows_alias: bool,
    /// [`InPlaceWalk::k_contiguous`](super::InPlaceWalk::k_contiguous): each row is a stream
    /// the hardware prefetcher follows. A convolution's input through its window table is not,
    /// and the in-place micro-kernel prefetches a later panel's rows instead (see
    /// [`PREFETCH_PANELS`]).
    pub(super) k_contiguous: bool,
    /// Whether each panel of `A` is read by at most [`STREAMED_COL_PANELS`] column panels and
    /// runs contiguously along K: then `A` streams from memory about once, in short runs (a
    /// row of K floats) far apart, and the micro-kernel prefetches every row of the next panel
    /// ([`Prefetch::AllRows`]).
    pub(super) streamed: bool,
    /// Whether a task copies this operand's row blocks into its thread's buffer (see
    /// [`InPlaceWalk::repacked`](super::InPlaceWalk::repacked) and the measurements at
    /// `InPlaceA::task_blocks`).
    pub(super) repacked: bool,
}

thread_local! {
    /// Each thread's copy of the `A` row block it multiplies (see `BlockJob::task_blocks`; kept
    /// between launches, as [`FUSED_A`]).
    static REPACKED_A: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl InPlaceA {
    /// Copies the 6-row panel at `row0`, K `kk..kk + kc` (from the chunk's start), into `dst` in
    /// the packed micro-kernel's layout (`[k / 4][6][4]`: groups of [`A_K_GROUP`] along K),
    /// with zeros from `kc` to the next multiple of the group.
    ///
    /// # Safety
    /// As for [`InPlaceA::panel`]: `rows` must hold entries `row0..row0 + 6`, `ks` entries `kk
    /// .. kk + kc`, and every sum `rows[i] + ks[p]` from `base` must be inside the operand;
    /// the K table must be contiguous (`k_contiguous`), and `dst` valid for `6 *
    /// kc.next_multiple_of(A_K_GROUP)` floats that nothing else accesses.
    ///
    /// [`A_K_GROUP`]: tinygrad_codegen::gemm::A_K_GROUP
    unsafe fn pack_panel(&self, row0: usize, kk: usize, kc: usize, dst: *mut f32) {
        const G: usize = tinygrad_codegen::gemm::A_K_GROUP;
        debug_assert!(
            kc > 0,
            "an empty K block is never copied (K blocks here are >= 64)"
        );
        // SAFETY: the caller guarantees `ks` has entries kk..kk + kc (kc > 0) and `rows`
        // entries row0..row0 + 6.
        let (k0, rows) = unsafe {
            (
                *((self.ks + 8 * kk) as *const i64),
                std::array::from_fn::<i64, 6, _>(|i| *((self.rows + 8 * (row0 + i)) as *const i64)),
            )
        };
        // Row i's element k0 + p is rows[i] + ks[kk + p] (the K table is contiguous): inside
        // the operand for p < kc per the caller's contract.
        let starts = rows.map(|r| (self.base as *const f32).wrapping_offset((r + k0) as isize));
        let groups = kc / G;
        for g in 0..groups {
            for (i, row) in starts.iter().enumerate() {
                // SAFETY: elements g*G .. g*G + G <= kc of row i (inside the operand, above);
                // dst holds 6 * kc4 floats and g*6*G + i*G + G <= 6 * kc4.
                unsafe {
                    std::ptr::copy_nonoverlapping(row.add(g * G), dst.add(g * 6 * G + i * G), G)
                };
            }
        }
        if !kc.is_multiple_of(G) {
            for (i, row) in starts.iter().enumerate() {
                for j in 0..G {
                    let p = groups * G + j;
                    // SAFETY: element p < kc of row i, inside the operand (above); the slot is
                    // in the last group of dst's 6 * kc4 floats.
                    unsafe {
                        let v = if p < kc { *row.add(p) } else { 0.0 };
                        *dst.add(groups * 6 * G + i * G + j) = v;
                    }
                }
            }
        }
    }

    /// One panel's multiply with `A` read in place: `C[row0..row0 + mr][..nr] (+)= A[row0..][kk
    /// .. kk + kc] x B`. The 12-row narrow tile reads a panel of equally spaced rows along their
    /// stride, any other panel (the last one, with padding rows; an operand with a row table)
    /// as two 6-row halves through the tables with the AVX2 kernel (same 16-column `C` tile);
    /// the 12x32 tile every panel as two halves with the 6x32 kernel.
    ///
    /// # Safety
    /// `rows` must hold entries `row0..row0 + mr` (`row0 + mr <= mp`), `ks` entries `kk..kk +
    /// kc` (`kk + kc <= k_left`), and every sum `rows[i] + ks[p]` from `base` must be inside the
    /// operand (checked by `InPlaceTables::fits` for all combinations); `b` a packed `B` panel
    /// of `kc` x `nr` floats from `kk`; `c` an `mr x nr` tile at stride `ldc` that no other task
    /// writes; `(mr, nr)` a tile `GemmKernel::new` checked has a kernel on this CPU.
    #[allow(clippy::too_many_arguments)]
    unsafe fn panel(
        &self,
        mr: usize,
        nr: usize,
        kc: usize,
        kk: usize,
        row0: usize,
        b: usize,
        c: usize,
        ldc: usize,
        accumulate: bool,
    ) {
        let rows = self.rows + 8 * row0;
        let ks = self.ks + 8 * kk;
        // Through a K table with jumps (a convolution's input), the first row of the panel
        // PREFETCH_PANELS ahead is prefetched; rows contiguous along K (a matmul's operand) are
        // streams the hardware prefetcher follows (prefetching them cost matmul 2048 ~3%).
        // A streamed once (contiguous along K, few column panels: a transformer's weight at
        // batch 1) prefetches every row of the next 6 (with the 12-row tile, whose in-place
        // halves both get them: the first half of the next panel).
        let ahead_row = row0 + PREFETCH_PANELS * mr;
        let next = row0 + mr;
        let ahead = if self.streamed && next + 6 <= self.mp {
            // SAFETY: the row table holds mp entries from `self.rows`, and next + 6 <= mp.
            Prefetch::AllRows(std::array::from_fn(|i| unsafe {
                *((self.rows + 8 * (next + i)) as *const i64)
            }))
        } else if !self.k_contiguous && ahead_row < self.mp {
            // SAFETY: the row table holds mp entries from `self.rows`, and ahead_row < mp.
            Prefetch::OneRow(unsafe { *((self.rows + 8 * ahead_row) as *const i64) })
        } else {
            Prefetch::Off
        };
        if mr == 12 {
            let narrow = nr == TILE_AVX512_NARROW.nr;
            if let Some(stride) = self.stride.filter(|_| narrow && row0 + mr <= self.m) {
                // SAFETY: the caller guarantees `rows` has this panel's entries and `ks` kk's.
                let first = unsafe { *(rows as *const i64) + *(ks as *const i64) };
                let a = self.base.wrapping_add((first as usize).wrapping_mul(4));
                // SAFETY: rows row0..row0 + 12 are below m, where rows[row0 + i] = rows[row0]
                // + i * stride, and ks is contiguous, so a + i * stride + p is element
                // rows[row0 + i] + ks[kk + p] of the operand, inside it per the caller's
                // contract; the tile is 12 x 16 (AVX-512F checked by `GemmKernel::new`).
                unsafe { microkernel_strided(kc, a, stride, b, c, ldc, accumulate) };
                return;
            }
            for half in [0, 6] {
                // SAFETY: the two halves are rows row0..row0 + 6 and row0 + 6..row0 + 12 of the
                // caller's panel, with the same bounds; the 6x16 kernel needs AVX2 + FMA only,
                // the 6x32 one AVX-512F, which the 12x32 tile's caller checked.
                unsafe {
                    microkernel_in_place(
                        nr,
                        kc,
                        self.base,
                        rows + 8 * half,
                        ahead,
                        ks,
                        b,
                        c + 4 * half * ldc,
                        ldc,
                        accumulate,
                    )
                };
            }
            return;
        }
        // SAFETY: forwarded from the caller's contract for a 6-row tile.
        unsafe {
            microkernel_in_place(nr, kc, self.base, rows, ahead, ks, b, c, ldc, accumulate);
        }
    }
}

impl BlockJob {
    pub(super) fn run(&self, mr: usize, nr: usize) {
        let (m_panels, n_panels) = (self.rows / mr, self.np / nr);
        let (tm, tn) = task_grid(m_panels, n_panels, global_pool().threads());
        let job = self.clone();
        global_pool().run(
            tm * tn,
            Box::new(move |t| {
                let (im, jn) = (t / tn, t % tn);
                job.task(
                    mr,
                    nr,
                    even_part(m_panels, tm, im),
                    even_part(n_panels, tn, jn),
                );
            }),
        );
    }

    fn task(&self, mr: usize, nr: usize, ms: std::ops::Range<usize>, ns: std::ops::Range<usize>) {
        if self.in_place.is_some_and(|ip| ip.streamed) && self.blocks.len() > 1 {
            // A streamed from memory once: each row panel's whole K, block after block, so
            // its rows are read as long runs (by K block, a row was read in short pieces far
            // apart in time).
            for im in ms {
                for jn in ns.clone() {
                    for i in 0..self.blocks.len() {
                        self.task_blocks(mr, nr, i..i + 1, im..im + 1, jn..jn + 1);
                    }
                }
            }
            return;
        }
        self.task_blocks(mr, nr, 0..self.blocks.len(), ms, ns);
    }

    /// [`BlockJob::task`] over the chunk's K blocks `ks` (indices from the chunk's first block),
    /// each over every tile of `ms x ns`.
    fn task_blocks(
        &self,
        mr: usize,
        nr: usize,
        ks: std::ops::Range<usize>,
        ms: std::ops::Range<usize>,
        ns: std::ops::Range<usize>,
    ) {
        for i in ks {
            let kk = i * self.kb;
            let accumulate = !(self.first_block && i == 0);
            let kc = self
                .in_place
                .map_or(self.kb, |ip| self.kb.min(ip.k_left.saturating_sub(kk)));
            // Row panels in blocks whose A fits in L2 with room to spare (much smaller where
            // in-place rows alias in the caches: see A_ALIASED_BYTES), each block multiplied
            // by every B panel before the next: A comes from memory once per K block, not once
            // per B panel (Goto's mc blocking).
            let a_bytes = match self.in_place {
                Some(ip) if ip.rows_alias => A_ALIASED_BYTES,
                _ => A_L2_BYTES,
            };
            let block_panels = (a_bytes / (4 * mr * kc.max(1))).max(1);
            // The tile of C (panel im of this job, column panel jn): in the output where the
            // whole panel lies in it, else in the scratch C.
            let c_tile = |jn: usize, im: usize| {
                let row0 = self.m0 + im * mr;
                match self.direct {
                    Some(d) if row0 + mr <= d.rows => d.out + 4 * (row0 * self.np + jn * nr),
                    _ => self.c + 4 * (row0 * self.np + jn * nr),
                }
            };
            let tile = |jn: usize, im: usize| {
                let b = self.b + 4 * (jn * self.k_chunk * nr + kk * nr);
                let c = c_tile(jn, im);
                if let Some(ip) = self.in_place {
                    let row0 = self.m0 + im * mr;
                    // SAFETY: `rows` holds mp entries (row0 + mr <= mp), `ks` the chunk's
                    // K - k0 from its start (kk + kc <= k_left), every table sum is inside
                    // the operand (`InPlaceTables::fits` for all combinations); `b` is
                    // panel jn of the packed B, `c` this task's mr x nr tile of the padded
                    // C or of the output (`c_tile`: a whole panel of its rows; tasks own
                    // disjoint panel ranges); the tile is the plan's, checked by
                    // `GemmKernel::new`.
                    unsafe { ip.panel(mr, nr, kc, kk, row0, b, c, self.np, accumulate) };
                    return;
                }
                let a = self.a + 4 * (im * self.k_chunk * mr + kk * mr);
                // SAFETY: `a` and `b` point at packed panels with `kb` rows of `mr` and
                // `nr` floats inside the scratch buffers (panel `im` < rows / mr of the A
                // chunk, `jn` < np / nr, kk + kb <= k_chunk); `c` at an mr x nr tile of the
                // padded C (rows m0 + im*mr + 0..mr <= mp, columns jn*nr + 0..nr <= np) or
                // of the output (`c_tile`: rows below `DirectC::rows`) that no other task
                // writes (tasks own disjoint panel ranges); `(mr, nr)` is the plan's tile,
                // which `GemmKernel::new` checked has a kernel here.
                unsafe { microkernel(mr, nr, self.kb, a, b, c, self.np, accumulate) };
            };
            if kc < SHORT_K_BLOCK {
                // Short K: storing C dominates. Along a row panel, then the next, over a block
                // of B panels that stays in L2: each C row is written in long runs (B panels
                // first then rows wrote a tile column: mr rows per panel, far apart).
                let b_block = (B_L2_BYTES / (4 * nr * kc.max(1))).max(1);
                for jb in (ns.start..ns.end).step_by(b_block) {
                    for im in ms.clone() {
                        for jn in jb..(jb + b_block).min(ns.end) {
                            tile(jn, im);
                        }
                    }
                }
                continue;
            }
            if let Some(ip) = self.in_place.filter(|ip| ip.repacked) {
                self.repacked_blocks(
                    &ip,
                    mr,
                    nr,
                    kk,
                    kc,
                    accumulate,
                    ms.clone(),
                    ns.clone(),
                    c_tile,
                );
                continue;
            }
            for ib in (ms.start..ms.end).step_by(block_panels) {
                for jn in ns.clone() {
                    for im in ib..(ib + block_panels).min(ms.end) {
                        tile(jn, im);
                    }
                }
            }
        }
    }
}

impl BlockJob {
    /// One K block of [`BlockJob::task_blocks`] with an in-place `A` that is copied
    /// ([`InPlaceA::repacked`]): row blocks of [`A_L2_BYTES`] copied into this thread's buffer,
    /// each multiplied by every `B` panel of the task with the packed micro-kernel (over K
    /// rounded up to whole groups: the copy's padding is zero, and so is `B` past K).
    #[allow(clippy::too_many_arguments)]
    fn repacked_blocks(
        &self,
        ip: &InPlaceA,
        mr: usize,
        nr: usize,
        kk: usize,
        kc: usize,
        accumulate: bool,
        ms: std::ops::Range<usize>,
        ns: std::ops::Range<usize>,
        c_tile: impl Fn(usize, usize) -> usize,
    ) {
        debug_assert_eq!(mr, 6, "the copy is laid out for 6-row tiles (`repacked`)");
        let kc4 = kc.next_multiple_of(tinygrad_codegen::gemm::A_K_GROUP);
        let block_panels = (A_L2_BYTES / (4 * mr * kc4.max(1))).max(1);
        REPACKED_A.with(|buf| {
            let mut buf = buf.borrow_mut();
            resize(&mut buf, block_panels * mr * kc4);
            let a = buf.as_mut_ptr();
            for ib in (ms.start..ms.end).step_by(block_panels) {
                let ie = (ib + block_panels).min(ms.end);
                REPACKED_BLOCKS.fetch_add(1, Ordering::Relaxed);
                for im in ib..ie {
                    // SAFETY: panel im of this job lies in the row table (m0 + im*mr + mr <=
                    // mp), the K block in the chunk's K table (kk + kc <= k_left), every table
                    // sum is inside the operand (`InPlaceTables::fits`) and the K table is
                    // contiguous (`repacked`); the panel's slot (im - ib < block_panels) holds
                    // mr * kc4 floats of this thread's buffer.
                    unsafe {
                        ip.pack_panel(self.m0 + im * mr, kk, kc, a.add((im - ib) * mr * kc4))
                    };
                }
                for jn in ns.clone() {
                    let b = self.b + 4 * (jn * self.k_chunk * nr + kk * nr);
                    for im in ib..ie {
                        let panel = a as usize + 4 * (im - ib) * mr * kc4;
                        // SAFETY: `panel` holds mr x kc4 packed floats (copied above); `b` is
                        // panel jn of the packed B, whose rows kk..kk + kc4 lie in the chunk
                        // (kc4 <= kb: kb is a multiple of the group) and are zero past K; `c`
                        // this task's tile (`c_tile`, as for the in-place tiles); the tile is
                        // the plan's, checked by `GemmKernel::new`.
                        unsafe {
                            microkernel(mr, nr, kc4, panel, b, c_tile(jn, im), self.np, accumulate)
                        };
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::{even_part, task_grid};

    #[test]
    fn task_grid_covers_every_tile_once_in_balanced_tasks() {
        for threads in [1, 2, 3, 8] {
            for m in [1, 2, 5, 64, 86, 200] {
                // (128 and more column panels take the wider column blocks)
                for n in [1, 3, 24, 96, 128, 200, 342] {
                    let (tm, tn) = task_grid(m, n, threads);
                    assert!(
                        (1..=m).contains(&tm) && (1..=n).contains(&tn),
                        "{m}x{n}/{threads}"
                    );
                    let mut seen = vec![0u8; m * n];
                    for t in 0..tm * tn {
                        for i in even_part(m, tm, t / tn) {
                            for j in even_part(n, tn, t % tn) {
                                seen[i * n + j] += 1;
                            }
                        }
                    }
                    assert!(seen.iter().all(|&c| c == 1), "{m}x{n} on {threads} threads");
                    // a multiple of the threads unless every tile is already a task of its own
                    if tm < m || tn < n {
                        assert!(
                            (tm * tn).is_multiple_of(threads),
                            "{m}x{n}/{threads}: {tm}x{tn}"
                        );
                    }
                }
            }
        }
        // BERT's 512-row GEMMs on 2 threads: 86 row panels in blocks of 10 or 11
        let (tm, tn) = task_grid(86, 24, 2);
        assert_eq!(tm * tn % 2, 0);
        let sizes: Vec<usize> = (0..tm).map(|i| even_part(86, tm, i).len()).collect();
        assert!(
            sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1,
            "{sizes:?}"
        );
    }
}
