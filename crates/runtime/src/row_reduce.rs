//! The CPU's row-reduction path: kernels that reduce contiguous rows of a `float32` buffer
//! (`sum`, `max`, `mean` along a contiguous axis, and the first stage of a split full
//! reduction) or blocks of contiguous columns (`sum(axis=0)`), planned by
//! [`tinygrad_codegen::row_reduce`] and run by vector loops written here, chosen at run time:
//! AVX-512F (rows: four 16-lane accumulators), AVX2 (four 8-lane accumulators per row, 4 rows
//! read at once as separate streams: see `STREAMS`), or portable Rust elsewhere (columns: one
//! accumulator per column, the same loop compiled for each). The generic Cranelift kernels use 128-bit
//! vectors, which stream the last-level cache at about half the rate of these loops (see the
//! planner's module docs for the measurements).
//!
//! Semantics are the IR's: a sum adds in an order of the kernel's choosing starting from
//! `-0.0` (a row of `-0.0` sums to `-0.0`, as the generic kernels give); a max is NaN if any
//! element is NaN, and `+0.0` wins over `-0.0`. Every row is reduced by one thread, so results
//! do not depend on the thread count (a column block is one task, adding its rows in order). `CPU_ROW_REDUCE=0` turns the path off; `CPU_AVX512=0`
//! selects the AVX2 loops on a CPU that has both (as for the GEMM path).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use tinygrad_codegen::row_reduce::{Layout, RowOp, RowReducePlan, plan_row_reduce};
use tinygrad_dtype::DType;
use tinygrad_uop::UOp;

use crate::buffer::Buffer;
use crate::cpu::lock_buffers;
use crate::device::{CompiledAst, DeviceError, Kernel};
use crate::gemm::{avx2_available, avx512_available};
use crate::thread_pool::global_pool;

/// Rows shorter than this stay on the generic kernels (their own 4-lane loops reach the
/// short row's end before wider vectors would pay off).
// native loops: sum of 16M 14 -> 36-43 GB/s on Xeon (see docs/performance.md)
pub const MIN_ROW: usize = 64;

/// Column groups narrower than this stay on the generic kernels.
// sum(axis=0) of 4096^2: 15.2 -> 2.6 ms on Xeon (see docs/performance.md)
pub const MIN_COLS: usize = 16;

/// The most columns one task accumulates at once (4 KiB of accumulators, in L1).
const COL_BLOCK: usize = 1024;

/// Kernels reading fewer elements than this stay on the generic kernels (launch overhead).
pub const MIN_ELEMENTS: usize = 1 << 14;

/// Rows the AVX2 loops reduce at once, one from each of this many equal stretches of a task's
/// rows. A core reading several streams keeps more DRAM requests in flight than one reading a
/// single stream: on the development machine (AMD EPYC, Zen 2, 2 threads, 64 MiB in huge
/// pages) a standalone model of the loop summed 256 rows of 64 Ki floats in 2.43-2.61 ms with
/// 4 streams against 2.72-2.91 ms with one, and 4096 rows of 4 Ki in 2.42-2.52 against
/// 2.71-2.81 (medians of 15, 5 alternating rounds); L2-resident rows were no slower.
// sum of 16M 2.11-2.39 -> 1.62-1.84 ms on Zen 2 (see docs/performance.md)
const STREAMS: usize = 4;

/// Elements a launch must read before its rows are split across the thread pool.
const PARALLEL_MIN_ELEMENTS: usize = 1 << 16;

/// Whether the path may run (`CPU_ROW_REDUCE` not `0`).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("CPU_ROW_REDUCE").map_or(true, |v| v != "0"))
}

/// The vector loops a CPU runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// 512-bit vectors (AVX-512F), unless `CPU_AVX512=0`.
    Avx512,
    /// 256-bit vectors (AVX2).
    Avx2,
    /// Plain Rust (what the compiler vectorizes for the baseline target).
    Portable,
}

/// The loops this CPU runs (detected once).
pub fn isa() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        if crate::gemm::avx512_enabled() {
            Isa::Avx512
        } else if avx2_available() {
            Isa::Avx2
        } else {
            Isa::Portable
        }
    })
}

/// The loops this CPU runs, for test and bench output: `"avx512"`, `"avx2"` or `"portable"`.
pub fn isa_name() -> &'static str {
    match isa() {
        Isa::Avx512 => "avx512",
        Isa::Avx2 => "avx2",
        Isa::Portable => "portable",
    }
}

static LAUNCHES: AtomicU64 = AtomicU64::new(0);

/// How many row-reduction kernels have been launched in this process (lets tests check that
/// the path really ran).
pub fn launch_count() -> u64 {
    LAUNCHES.load(Ordering::Relaxed)
}

/// The CPU device's [`crate::Device::compile_ast`] for row reductions: a [`RowReduceKernel`]
/// when `ast` is one (and large enough to gain from it).
pub(crate) fn compile(ast: &UOp) -> Option<Result<CompiledAst, DeviceError>> {
    if !enabled() {
        return None;
    }
    let plan = plan_row_reduce(ast)?;
    let groups = plan.bases.len();
    let op = match plan.op {
        RowOp::Sum => "sum",
        RowOp::Max => "max",
    };
    let isa = isa();
    let (name, source, elements) = match plan.layout {
        Layout::Rows => {
            if plan.k < MIN_ROW {
                return None;
            }
            let source = format!(
                "native row reduction ({isa:?}): {groups} rows of {} contiguous float32, {op}, \
                 then {:?}",
                plan.k, plan.epilogue
            );
            let name = format!("row_{op}_{groups}_{}", plan.k);
            (name, source, groups.saturating_mul(plan.k))
        }
        Layout::Columns { cols, stride, .. } => {
            if cols < MIN_COLS {
                return None;
            }
            let source = format!(
                "native column reduction ({isa:?}): {groups} groups of {cols} columns, {} rows \
                 {stride} apart, float32, {op}, then {:?}",
                plan.k, plan.epilogue
            );
            let name = format!("col_{op}_{groups}_{cols}_{}", plan.k);
            (
                name,
                source,
                groups.saturating_mul(cols).saturating_mul(plan.k),
            )
        }
    };
    if elements < MIN_ELEMENTS {
        return None;
    }
    let flops = elements as f64;
    let kernel = RowReduceKernel {
        job: Arc::new(Job { plan, isa }),
        source,
    };
    Some(Ok((Arc::new(kernel), name, flops)))
}

struct Job {
    plan: RowReducePlan,
    isa: Isa,
}

impl Job {
    /// The units of work (a row group, or a block of one group's columns) and the columns per
    /// block, for `threads` threads.
    fn units(&self, threads: usize) -> (usize, usize) {
        let groups = self.plan.bases.len();
        match self.plan.layout {
            Layout::Rows => (groups, 1),
            Layout::Columns { cols, .. } => {
                // blocks small enough that every thread gets one, in multiples of 16 columns
                let per_group = threads.div_ceil(groups).max(cols.div_ceil(COL_BLOCK));
                let block = cols.div_ceil(per_group).next_multiple_of(16).min(COL_BLOCK);
                (groups * cols.div_ceil(block), block)
            }
        }
    }

    /// Runs units `units` (see [`Job::units`]; `block` columns each).
    ///
    /// # Safety
    /// As for [`Job::run_rows`].
    unsafe fn run_units(
        &self,
        inp: usize,
        out: usize,
        units: std::ops::Range<usize>,
        block: usize,
    ) {
        match self.plan.layout {
            // SAFETY: the caller's guarantees.
            Layout::Rows => unsafe { self.run_rows(inp, out, units) },
            Layout::Columns {
                cols,
                stride,
                out_stride,
            } => {
                let p = &self.plan;
                let blocks = cols.div_ceil(block);
                let identity = match p.op {
                    RowOp::Sum => -0.0f32,
                    RowOp::Max => f32::NEG_INFINITY,
                };
                let mut acc = [0f32; COL_BLOCK];
                for u in units {
                    let (g, b) = (u / blocks, u % blocks);
                    let c0 = b * block;
                    let len = block.min(cols - c0);
                    let acc = &mut acc[..len];
                    acc.fill(identity);
                    for i in 0..p.k {
                        let at = p.bases[g] as usize + i * stride as usize + c0;
                        // SAFETY: `at + len <= base + (k-1)*stride + cols <= extents[1]` (the
                        // planner's extent), readable per the caller; dropped before any store.
                        let xs =
                            unsafe { std::slice::from_raw_parts((inp as *const f32).add(at), len) };
                        combine(self.isa, p.op, acc, xs);
                    }
                    for (j, &a) in acc.iter().enumerate() {
                        let v = p.epilogue.iter().fold(a, |v, step| step.apply(v));
                        let dst = p.stores[g] as usize + (c0 + j) * out_stride as usize;
                        // SAFETY: `dst < extents[0]` (the planner's extent covers every element
                        // a group stores), writable per the caller; the planner checked that
                        // no two outputs of any groups coincide, so no other task writes it.
                        unsafe { *(out as *mut f32).add(dst) = v };
                    }
                }
            }
        }
    }

    /// Reduces rows `rows` of the input at `inp` into the output at `out`.
    ///
    /// # Safety
    /// `inp` must point to at least `plan.extents[1]` readable `f32` and `out` to at least
    /// `plan.extents[0]` writable ones, valid until this returns; no other thread may write the
    /// input or the output elements of these rows meanwhile.
    unsafe fn run_rows(&self, inp: usize, out: usize, rows: std::ops::Range<usize>) {
        let p = &self.plan;
        // SAFETY: `r` is one of the caller's rows, readable per its guarantees; the output is
        // another buffer (or the input was copied), so no store below writes what a row reads.
        let row = |r: usize| unsafe { self.row(inp, r) };
        // SAFETY: `r` is one of the caller's rows, whose output element no other thread writes.
        let store = |r: usize, v: f32| unsafe { self.store(out, r, v) };
        #[cfg(target_arch = "x86_64")]
        if self.isa == Isa::Avx2 && avx2_available() {
            // STREAMS rows at once, one from each of STREAMS equal stretches of the range (so
            // each stretch is read front to back, one stream per stretch); the rows left over
            // go one at a time, through the same per-row arithmetic.
            let n = rows.len();
            let stretch = n / STREAMS;
            for i in 0..stretch {
                let at: [usize; STREAMS] = std::array::from_fn(|s| rows.start + s * stretch + i);
                let values = match p.op {
                    // SAFETY: AVX2 is checked above.
                    RowOp::Sum => unsafe { x86::sum_rows_avx2(at.map(row)) },
                    RowOp::Max => {
                        // SAFETY: as above.
                        let m = unsafe { x86::max_rows_avx2(at.map(row)) };
                        std::array::from_fn(|s| fix_zero(m[s], row(at[s])))
                    }
                };
                for (r, v) in at.into_iter().zip(values) {
                    store(r, v);
                }
            }
            for r in rows.start + STREAMS * stretch..rows.end {
                store(r, reduce(self.isa, p.op, row(r)));
            }
            return;
        }
        for r in rows {
            store(r, reduce(self.isa, p.op, row(r)));
        }
    }

    /// Row `r` of the input at `inp`.
    ///
    /// # Safety
    /// As for [`Job::run_rows`]; the slice must be dropped before any store to the input's
    /// buffer (none happens: the output is another buffer, or a copy is read).
    unsafe fn row<'a>(&self, inp: usize, r: usize) -> &'a [f32] {
        let base = self.plan.bases[r] as usize;
        // SAFETY: the plan's bases are non-negative and `base + k <= extents[1]` (its
        // construction takes the largest base), which the caller guarantees are readable.
        unsafe { std::slice::from_raw_parts((inp as *const f32).add(base), self.plan.k) }
    }

    /// Applies the epilogue to row `r`'s reduction `v` and stores it into the output at `out`.
    ///
    /// # Safety
    /// As for [`Job::run_rows`].
    unsafe fn store(&self, out: usize, r: usize, v: f32) {
        let v = self.plan.epilogue.iter().fold(v, |v, step| step.apply(v));
        // SAFETY: `stores[r] < extents[0]`, writable per the caller; rows have distinct store
        // indices (the planner refuses repeats), so no other task writes it.
        unsafe { *(out as *mut f32).add(self.plan.stores[r] as usize) = v };
    }
}

/// A kernel run as native row reductions.
pub(crate) struct RowReduceKernel {
    job: Arc<Job>,
    source: String,
}

impl Kernel for RowReduceKernel {
    fn launch(&self, bufs: &[Arc<Buffer>], vars: &[i64]) {
        assert!(
            vars.is_empty(),
            "row-reduction kernel: launched with variables"
        );
        LAUNCHES.fetch_add(1, Ordering::Relaxed);
        let p = &self.job.plan;
        let locked = lock_buffers(bufs, &[DType::FLOAT32, DType::FLOAT32], &p.extents);
        let (out, mut inp) = (locked.addrs[0], locked.addrs[1]);
        // An output that is also the input: the reduction reads a copy of the input, so every
        // output is computed from the values before the launch (whatever the layout's order).
        let aliased = bufs[0].id() == bufs[1].id();
        let copy: Vec<f32> = if aliased {
            // SAFETY: `lock_buffers` checked the buffer holds at least `extents[1]` floats and
            // it stays locked; nothing writes it until the copy is made.
            unsafe { std::slice::from_raw_parts(inp as *const f32, p.extents[1]) }.to_vec()
        } else {
            Vec::new()
        };
        if aliased {
            inp = copy.as_ptr() as usize;
        }
        let threads = global_pool().threads();
        let (units, block) = self.job.units(threads);
        let elements = p.extents[1];
        let tasks = if elements < PARALLEL_MIN_ELEMENTS {
            1
        } else {
            units.min(4 * threads)
        };
        if tasks == 1 {
            // SAFETY: `locked` holds both buffers locked (so no other launch touches them) and
            // `lock_buffers` checked their sizes against the plan's extents (an aliased input
            // was copied whole: `copy` has `extents[1]` floats).
            unsafe { self.job.run_units(inp, out, 0..units, block) };
        } else {
            let job = self.job.clone();
            global_pool().run(
                tasks,
                Box::new(move |t| {
                    let part = (units * t / tasks)..(units * (t + 1) / tasks);
                    // SAFETY: as above, and `run` returns only after every task has finished,
                    // while `locked` (and `copy`) are still held; tasks run disjoint units
                    // (distinct output elements), and the input they read is not the output
                    // (an aliased input was copied).
                    unsafe { job.run_units(inp, out, part, block) };
                }),
            );
        }
        drop(copy);
        drop(locked);
    }

    fn source(&self) -> &str {
        &self.source
    }
}

/// `op` over `xs` (not empty) with the loops of `isa` (the portable ones when the CPU lacks
/// its features).
pub fn reduce(isa: Isa, op: RowOp, xs: &[f32]) -> f32 {
    match (isa, op) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512F is checked by the guard, whatever `isa` the caller passes.
        (Isa::Avx512, RowOp::Sum) if avx512_available() => unsafe { x86::sum_avx512(xs) },
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512, RowOp::Max) if avx512_available() => {
            // SAFETY: AVX-512F is checked by the guard.
            let m = unsafe { x86::max_avx512(xs) };
            fix_zero(m, xs)
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 is checked by the guard.
        (Isa::Avx2, RowOp::Sum) if avx2_available() => unsafe { x86::sum_avx2(xs) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        (Isa::Avx2, RowOp::Max) if avx2_available() => fix_zero(unsafe { x86::max_avx2(xs) }, xs),
        (_, RowOp::Sum) => sum_portable(xs),
        (_, RowOp::Max) => fix_zero(max_portable(xs), xs),
    }
}

/// Combines one row of a column block into its accumulators: `acc[j] = op(acc[j], xs[j])`
/// (the portable loop when the CPU lacks `isa`'s features).
pub fn combine(isa: Isa, op: RowOp, acc: &mut [f32], xs: &[f32]) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512F is checked by the guard.
        Isa::Avx512 if avx512_available() => unsafe { x86::combine_avx512(op, acc, xs) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 is checked by the guard.
        Isa::Avx2 if avx2_available() => unsafe { x86::combine_avx2(op, acc, xs) },
        _ => combine_portable(op, acc, xs),
    }
}

/// [`combine`] as plain loops (the callers with wider vectors compile the same loops with
/// their target features).
#[inline(always)]
fn combine_portable(op: RowOp, acc: &mut [f32], xs: &[f32]) {
    match op {
        RowOp::Sum => {
            for (a, x) in acc.iter_mut().zip(xs) {
                *a += x;
            }
        }
        RowOp::Max => {
            for (a, &x) in acc.iter_mut().zip(xs) {
                // NaN sticks (`x > NaN` is false), a NaN `x` is taken, and `+0.0` replaces
                // `-0.0` (equal values: taking `x` changes nothing else)
                if x > *a || x.is_nan() || (x == *a && a.is_sign_negative()) {
                    *a = x;
                }
            }
        }
    }
}

/// A max of zero gets its sign from the row: `+0.0` if any element is `+0.0` (the vector max
/// instructions return either zero on a tie). Rows whose max is zero are rare, so the second
/// pass costs nothing elsewhere.
fn fix_zero(m: f32, xs: &[f32]) -> f32 {
    if m != 0.0 {
        m
    } else if xs.iter().any(|x| x.to_bits() == 0) {
        0.0
    } else {
        -0.0
    }
}

/// Eight interleaved sums (independent chains the compiler can vectorize).
fn sum_portable(xs: &[f32]) -> f32 {
    let mut acc = [-0.0f32; 8];
    let chunks = xs.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for (a, x) in acc.iter_mut().zip(c) {
            *a += x;
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for x in tail {
        s += x;
    }
    s
}

/// The NaN-propagating max (zero's sign fixed by the caller).
fn max_portable(xs: &[f32]) -> f32 {
    let mut m = f32::NEG_INFINITY;
    for &x in xs {
        if x.is_nan() {
            return f32::NAN;
        }
        if x > m {
            m = x;
        }
    }
    m
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// How far ahead of the loads the AVX-512 loops prefetch: 4 KiB, a page. The hardware
    /// prefetchers alone left a 2-thread sum of an L3-resident 64 MiB buffer at 27-41 GB/s on
    /// a Xeon; prefetching every cache line a page ahead gave 44-50 (median of 30, same run).
    /// The AVX2 loops do not prefetch: on an AVX2-only AMD EPYC (Zen) the same prefetches cost
    /// 8% (a 2-thread sum of 64 MiB in huge pages: 22.7 GB/s with them, 24.7 without).
    // 27-41 -> 44-50 GB/s on Xeon; AVX2 loops 8% slower with it on Zen 2 (see docs/performance.md)
    const PREFETCH_FLOATS: usize = 1024;

    /// Prefetches the `lines` cache lines that start `PREFETCH_FLOATS` past element `i`.
    #[inline(always)]
    fn prefetch_ahead(p: *const f32, i: usize, lines: usize) {
        for l in 0..lines {
            // `wrapping_add`: the address may be past the row's end (a prefetch never faults
            // and reads nothing into registers, so any address is allowed).
            let at = p.wrapping_add(i + PREFETCH_FLOATS + 16 * l);
            // SAFETY: a prefetch is a hint: it does not dereference the address, and SSE (which
            // every x86_64 CPU has) provides the instruction.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(at.cast::<i8>()) };
        }
    }

    /// [`super::combine_portable`] compiled with AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) fn combine_avx512(op: super::RowOp, acc: &mut [f32], xs: &[f32]) {
        super::combine_portable(op, acc, xs)
    }

    /// [`super::combine_portable`] compiled with AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) fn combine_avx2(op: super::RowOp, acc: &mut [f32], xs: &[f32]) {
        super::combine_portable(op, acc, xs)
    }

    /// Four 16-lane sums, a masked tail.
    #[target_feature(enable = "avx512f")]
    pub(super) fn sum_avx512(xs: &[f32]) -> f32 {
        let (p, k) = (xs.as_ptr(), xs.len());
        let neg0 = _mm512_set1_ps(-0.0);
        let mut acc = [neg0; 4];
        let mut i = 0;
        while i + 64 <= k {
            prefetch_ahead(p, i, 4);
            for (j, a) in acc.iter_mut().enumerate() {
                // SAFETY: `i + 16 * j + 16 <= i + 64 <= k`: inside `xs`.
                *a = _mm512_add_ps(*a, unsafe { _mm512_loadu_ps(p.add(i + 16 * j)) });
            }
            i += 64;
        }
        while i + 16 <= k {
            // SAFETY: `i + 16 <= k`.
            acc[0] = _mm512_add_ps(acc[0], unsafe { _mm512_loadu_ps(p.add(i)) });
            i += 16;
        }
        if i < k {
            let mask: __mmask16 = ((1u32 << (k - i)) - 1) as u16;
            // SAFETY: only the `k - i` lanes inside `xs` are read (masked lanes are not
            // accessed and do not fault); the others take `-0.0`, the sum's identity.
            let v = unsafe { _mm512_mask_loadu_ps(neg0, mask, p.add(i)) };
            acc[1] = _mm512_add_ps(acc[1], v);
        }
        let s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
        _mm512_reduce_add_ps(s)
    }

    /// Four 16-lane maxima and a NaN mask, a masked tail.
    #[target_feature(enable = "avx512f")]
    pub(super) fn max_avx512(xs: &[f32]) -> f32 {
        let (p, k) = (xs.as_ptr(), xs.len());
        let ninf = _mm512_set1_ps(f32::NEG_INFINITY);
        let mut acc = [ninf; 4];
        let mut nan: __mmask16 = 0;
        let mut i = 0;
        while i + 64 <= k {
            prefetch_ahead(p, i, 4);
            for (j, a) in acc.iter_mut().enumerate() {
                // SAFETY: inside `xs`, as in `sum_avx512`.
                let v = unsafe { _mm512_loadu_ps(p.add(i + 16 * j)) };
                nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
                *a = _mm512_max_ps(*a, v);
            }
            i += 64;
        }
        while i + 16 <= k {
            // SAFETY: `i + 16 <= k`.
            let v = unsafe { _mm512_loadu_ps(p.add(i)) };
            nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
            acc[0] = _mm512_max_ps(acc[0], v);
            i += 16;
        }
        if i < k {
            let mask: __mmask16 = ((1u32 << (k - i)) - 1) as u16;
            // SAFETY: masked lanes are not accessed; they take `-inf`, the max's identity.
            let v = unsafe { _mm512_mask_loadu_ps(ninf, mask, p.add(i)) };
            nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
            acc[1] = _mm512_max_ps(acc[1], v);
        }
        if nan != 0 {
            return f32::NAN;
        }
        let m = _mm512_max_ps(_mm512_max_ps(acc[0], acc[1]), _mm512_max_ps(acc[2], acc[3]));
        _mm512_reduce_max_ps(m)
    }

    /// Four 8-lane sums, a scalar tail.
    #[target_feature(enable = "avx2")]
    pub(super) fn sum_avx2(xs: &[f32]) -> f32 {
        sum_rows_avx2([xs])[0]
    }

    /// [`sum_avx2`] of `R` rows of one length at once, their loads interleaved. Each row's
    /// arithmetic is [`sum_avx2`]'s (its own four accumulators, the same order), so a row's sum
    /// does not depend on the rows it is grouped with.
    #[target_feature(enable = "avx2")]
    pub(super) fn sum_rows_avx2<const R: usize>(rows: [&[f32]; R]) -> [f32; R] {
        let k = rows[0].len();
        assert!(rows.iter().all(|r| r.len() == k), "rows of one length");
        let p = rows.map(<[f32]>::as_ptr);
        let mut acc = [[_mm256_set1_ps(-0.0); 4]; R];
        let mut i = 0;
        while i + 32 <= k {
            for r in 0..R {
                for (j, a) in acc[r].iter_mut().enumerate() {
                    // SAFETY: `i + 8 * j + 8 <= i + 32 <= k`: inside row `r` (all have `k`).
                    *a = _mm256_add_ps(*a, unsafe { _mm256_loadu_ps(p[r].add(i + 8 * j)) });
                }
            }
            i += 32;
        }
        std::array::from_fn(|r| {
            let (acc, mut i) = (&mut acc[r], i);
            while i + 8 <= k {
                // SAFETY: `i + 8 <= k`.
                acc[0] = _mm256_add_ps(acc[0], unsafe { _mm256_loadu_ps(p[r].add(i)) });
                i += 8;
            }
            let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
            let mut lanes = [0f32; 8];
            // SAFETY: `lanes` holds 8 floats.
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), s) };
            let mut total = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5]))
                + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
            for x in &rows[r][i..] {
                total += x;
            }
            total
        })
    }

    /// Four 8-lane maxima and a NaN mask, a scalar tail.
    #[target_feature(enable = "avx2")]
    pub(super) fn max_avx2(xs: &[f32]) -> f32 {
        max_rows_avx2([xs])[0]
    }

    /// [`max_avx2`] of `R` rows of one length at once, their loads interleaved (each row's
    /// arithmetic is [`max_avx2`]'s, as in [`sum_rows_avx2`]).
    #[target_feature(enable = "avx2")]
    pub(super) fn max_rows_avx2<const R: usize>(rows: [&[f32]; R]) -> [f32; R] {
        let k = rows[0].len();
        assert!(rows.iter().all(|r| r.len() == k), "rows of one length");
        let p = rows.map(<[f32]>::as_ptr);
        let mut acc = [[_mm256_set1_ps(f32::NEG_INFINITY); 4]; R];
        let mut nan = [_mm256_setzero_ps(); R];
        let mut i = 0;
        while i + 32 <= k {
            for r in 0..R {
                for (j, a) in acc[r].iter_mut().enumerate() {
                    // SAFETY: inside row `r`, as in `sum_rows_avx2`.
                    let v = unsafe { _mm256_loadu_ps(p[r].add(i + 8 * j)) };
                    nan[r] = _mm256_or_ps(nan[r], _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
                    *a = _mm256_max_ps(*a, v);
                }
            }
            i += 32;
        }
        std::array::from_fn(|r| {
            let (acc, nan, mut i) = (&mut acc[r], &mut nan[r], i);
            while i + 8 <= k {
                // SAFETY: `i + 8 <= k`.
                let v = unsafe { _mm256_loadu_ps(p[r].add(i)) };
                *nan = _mm256_or_ps(*nan, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
                acc[0] = _mm256_max_ps(acc[0], v);
                i += 8;
            }
            if _mm256_movemask_ps(*nan) != 0 {
                return f32::NAN;
            }
            let m = _mm256_max_ps(_mm256_max_ps(acc[0], acc[1]), _mm256_max_ps(acc[2], acc[3]));
            let mut lanes = [0f32; 8];
            // SAFETY: `lanes` holds 8 floats.
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), m) };
            let mut best = f32::NEG_INFINITY;
            for &x in lanes.iter().chain(&rows[r][i..]) {
                if x.is_nan() {
                    return f32::NAN;
                }
                if x > best {
                    best = x;
                }
            }
            best
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every loop this CPU can run.
    fn isas() -> Vec<Isa> {
        let mut v = vec![Isa::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            if avx2_available() {
                v.push(Isa::Avx2);
            }
            if avx512_available() {
                v.push(Isa::Avx512);
            }
        }
        v
    }

    #[test]
    fn every_length_and_isa_sums_and_maxes_exactly_on_integers() {
        // small integers: every order of addition gives the exact sum
        for isa in isas() {
            for k in [1, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 100, 129, 1000] {
                let xs: Vec<f32> = (0..k).map(|i| ((i * 37) % 11) as f32 - 5.0).collect();
                let sum: f32 = xs.iter().sum();
                assert_eq!(reduce(isa, RowOp::Sum, &xs), sum, "{isa:?} sum of {k}");
                let max = xs.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                assert_eq!(reduce(isa, RowOp::Max, &xs), max, "{isa:?} max of {k}");
            }
        }
    }

    /// Pseudo-random floats in [-1, 1) (sums of them depend on the order of addition).
    fn noise(n: usize, seed: u32) -> Vec<f32> {
        (0..n as u32)
            .map(|i| {
                let h = (i ^ seed).wrapping_mul(2654435761).rotate_left(13) ^ seed;
                (h.wrapping_mul(2246822519) >> 8) as f32 / (1u32 << 23) as f32 - 1.0
            })
            .collect()
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn grouped_rows_reduce_bit_for_bit_as_single_rows() {
        if !avx2_available() {
            println!("skipped: this CPU has no AVX2 (the grouped loops are AVX2's)");
            return;
        }
        for k in [1, 7, 8, 31, 32, 33, 100, 1000, 4099] {
            let mut rows: Vec<Vec<f32>> = (0..STREAMS as u32).map(|r| noise(k, r)).collect();
            let grouped = |rows: &[Vec<f32>]| {
                let at: [&[f32]; STREAMS] = std::array::from_fn(|r| &rows[r][..]);
                // SAFETY: AVX2 is checked above.
                unsafe { (x86::sum_rows_avx2(at), x86::max_rows_avx2(at)) }
            };
            let (sums, maxes) = grouped(&rows);
            for (r, row) in rows.iter().enumerate() {
                let one = reduce(Isa::Avx2, RowOp::Sum, row);
                assert_eq!(sums[r].to_bits(), one.to_bits(), "sum of row {r} of {k}");
                let one = reduce(Isa::Avx2, RowOp::Max, row);
                assert_eq!(maxes[r].to_bits(), one.to_bits(), "max of row {r} of {k}");
            }
            // a NaN in one row (first, middle or last element) stays in that row
            for at in [0, k / 2, k - 1] {
                rows[1][at] = f32::NAN;
                let (sums, maxes) = grouped(&rows);
                assert!(sums[1].is_nan() && maxes[1].is_nan(), "NaN at {at} of {k}");
                assert!(!sums[0].is_nan() && !maxes[2].is_nan(), "NaN leaked, {k}");
                rows[1][at] = 0.5;
            }
        }
    }

    #[test]
    fn tasks_of_any_row_count_reduce_every_row_once_in_place() {
        // rows of 70 floats, 3 apart, stored in reverse; every task split of 0-13 rows
        let (k, gap) = (70usize, 3usize);
        for rows in 0..14usize {
            let input = noise(rows * (k + gap) + 1, rows as u32);
            for isa in isas() {
                for op in [RowOp::Sum, RowOp::Max] {
                    let plan = RowReducePlan {
                        op,
                        k,
                        layout: Layout::Rows,
                        bases: (0..rows).map(|r| (r * (k + gap)) as i64).collect(),
                        stores: (0..rows).map(|r| (rows - 1 - r) as i64).collect(),
                        epilogue: Vec::new(),
                        extents: [rows, input.len()],
                    };
                    let job = Job { plan, isa };
                    let mut out = vec![f32::NAN; rows];
                    let (inp, at) = (input.as_ptr() as usize, out.as_mut_ptr() as usize);
                    // two tasks: [0, rows / 3) and the rest
                    for part in [0..rows / 3, rows / 3..rows] {
                        // SAFETY: the plan's extents are the two vectors' lengths, which live
                        // until after the call; the input is not written.
                        unsafe { job.run_rows(inp, at, part) };
                    }
                    for r in 0..rows {
                        let row = &input[r * (k + gap)..][..k];
                        let want = reduce(isa, op, row);
                        let got = out[rows - 1 - r];
                        assert_eq!(got.to_bits(), want.to_bits(), "{isa:?} {op:?} {r}/{rows}");
                    }
                }
            }
        }
    }

    #[test]
    fn column_blocks_combine_with_the_same_rules_on_every_isa() {
        // element (row, column j): NaN in column 0 mod 4 at row 2, signed zeros in columns 1
        // and 2 mod 4 (+0 at row 3 of the latter), small integers elsewhere
        let value = |j: usize, row: usize| match (j % 4, row) {
            (0, 2) => f32::NAN,
            (1, _) => -0.0,
            (2, 3) => 0.0,
            (2, _) => -0.0,
            _ => (((j * 7 + row * 3) % 9) as f32) - 4.0,
        };
        for isa in isas() {
            for len in [1, 15, 16, 17, 100] {
                let mut sum = vec![-0.0f32; len];
                let mut max = vec![f32::NEG_INFINITY; len];
                for row in 0..5 {
                    let xs: Vec<f32> = (0..len).map(|j| value(j, row)).collect();
                    combine(isa, RowOp::Sum, &mut sum, &xs);
                    combine(isa, RowOp::Max, &mut max, &xs);
                }
                for j in 0..len {
                    let col: Vec<f32> = (0..5).map(|row| value(j, row)).collect();
                    let want_sum = col.iter().fold(-0.0f32, |a, x| a + x);
                    let (s, m) = (sum[j], max[j]);
                    match j % 4 {
                        0 => assert!(s.is_nan() && m.is_nan(), "{isa:?} column {j}: NaN sticks"),
                        1 => {
                            assert_eq!(s.to_bits(), (-0.0f32).to_bits(), "{isa:?} {j}");
                            assert_eq!(m.to_bits(), (-0.0f32).to_bits(), "{isa:?} {j}");
                        }
                        2 => assert_eq!(m.to_bits(), 0, "{isa:?} column {j}: +0.0 over -0.0"),
                        _ => {
                            assert_eq!(s, want_sum, "{isa:?} column {j}");
                            assert_eq!(m, col.iter().copied().fold(f32::MIN, f32::max));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn max_propagates_nan_from_any_position_and_zero_signs_follow_the_ir() {
        for isa in isas() {
            for k in [1, 9, 40, 70, 130] {
                for at in [0, k / 2, k - 1] {
                    let mut xs = vec![1.0f32; k];
                    xs[at] = f32::NAN;
                    assert!(reduce(isa, RowOp::Max, &xs).is_nan(), "{isa:?} {k} at {at}");
                }
                let mut zeros = vec![-0.0f32; k];
                assert_eq!(
                    reduce(isa, RowOp::Max, &zeros).to_bits(),
                    (-0.0f32).to_bits()
                );
                assert_eq!(
                    reduce(isa, RowOp::Sum, &zeros).to_bits(),
                    (-0.0f32).to_bits()
                );
                zeros[k - 1] = 0.0;
                assert_eq!(reduce(isa, RowOp::Max, &zeros).to_bits(), 0);
                let infs = vec![f32::NEG_INFINITY; k];
                assert_eq!(reduce(isa, RowOp::Max, &infs), f32::NEG_INFINITY);
            }
        }
    }
}
