//! Products with GGUF's quantized weights on the CPU, reading the blocks themselves:
//! `out[i, r] = sum_c x[i, c] * w[r, c]` for a weight `w` of `n` rows and `k` columns stored as
//! `n * k / block` blocks (each row a whole number of them), `x` float32 `[m, k]`, `out` float32
//! `[m, n]`. Decoding a token reads every weight once: from the blocks that is 0.56 (Q4_1) to
//! 1.06 (Q8_0) bytes per weight instead of the 4 of a dequantized float32 copy, and decode is
//! bound by those reads and the arithmetic that unpacks them.
//!
//! The dequantization stores each element exactly as `gguf.quants` (and the tensor layer's IR
//! dequantizer) computes it, in float32 with the same operations in the same order. The
//! products differ from dequantize-then-matmul by the order of the float32 sum (the AVX2 and
//! portable loops take each block as `scale * sum(q * x) + min * sum(x)`) and, in the AVX-512
//! tiles, by a fused `d * q + m` (Q4_1, Q5_1, Q4_K's `d * sc * q - dmin * m`) and Q8_0's
//! `d * sum(q * x)`: within float32 rounding. The products have AVX-512 and AVX2 loops written
//! with intrinsics and a portable one; the dequantization is written over fixed-size arrays
//! that the compiler vectorizes, compiled for each (AVX-512 stores the 32-weight types from
//! registers); the loops are chosen at run time by the CPU's features (`CPU_AVX512=0` picks
//! AVX2 on a CPU with both, as for the GEMM path). Each thread streams a contiguous run of
//! weight rows, prefetching ahead. The AVX-512 loops work on tiles (`avx512::tile_dot`, and
//! `avx512::tile_dot_k` for the K-quants): up to four weight rows at a time, each block's values
//! computed once in registers for up to 8 rows of `x` (a batch of decoded tokens), each `x`
//! block loaded once for all the weight rows. A block's scales are converted first and
//! broadcast from memory; the 4- and 5-bit values are looked up from a table of the 16 (32)
//! values a block's weights take (`vpermps`), one operation a weight. Every product is summed
//! in the same order whatever the tile, so a token's product is bit for bit the same alone or
//! in a batch. The AVX-512 dequantization of the 32-weight types (the route of many rows)
//! stores `gguf.quants`' exact values.
//!
//! The kernel is a schedule item like any other: its AST is [`quant_matmul_ast`] (a `Noop`
//! carrying a [`QuantMatmul`], which only the CPU device compiles), its slots the output, the
//! blocks and `x`, so the JIT captures and replays it. Rows are split over the thread pool.
//!
//! Files: this one (the block types, the kernels' ASTs, launching and the choice of loops),
//! `portable.rs` (dequantization and the portable products: the formulas), `avx512.rs` and
//! `avx2.rs` (the products in intrinsics), `tests.rs`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use tinygrad_dtype::DType;
use tinygrad_uop::{Arg, Ops, UOp};

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod portable;
#[cfg(test)]
mod tests;

use portable::{dequantize_blocks, row_dot};

use crate::buffer::Buffer;
use crate::cpu::lock_buffers;
use crate::device::{CompiledAst, DeviceError, Kernel};
use crate::thread_pool::global_pool;

/// A GGUF block type the kernel reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantType {
    /// 32 weights: an f16 scale, 16 bytes of 4-bit values minus 8.
    Q4_0,
    /// 32 weights: f16 scale and minimum, 16 bytes of 4-bit values.
    Q4_1,
    /// 32 weights: an f16 scale, 32 high bits, 16 bytes of low nibbles; values minus 16.
    Q5_0,
    /// 32 weights: f16 scale and minimum, 32 high bits, 16 bytes of low nibbles.
    Q5_1,
    /// 32 weights: an f16 scale, 32 signed bytes.
    Q8_0,
    /// 256 weights: f16 scale and minimum, 12 bytes of 6-bit sub-scales and minimums, 128 bytes of
    /// 4-bit values.
    Q4K,
    /// 256 weights: 128 bytes of low nibbles, 64 of 2-bit highs, 16 signed sub-scales, an f16
    /// scale; values minus 32.
    Q6K,
}

impl QuantType {
    /// Every block type, in GGUF's order.
    pub const ALL: [QuantType; 7] = [
        QuantType::Q4_0,
        QuantType::Q4_1,
        QuantType::Q5_0,
        QuantType::Q5_1,
        QuantType::Q8_0,
        QuantType::Q4K,
        QuantType::Q6K,
    ];

    /// The type of GGUF's name for it (`Q4_K`, ...), if the kernel reads it.
    pub fn from_name(name: &str) -> Option<QuantType> {
        Some(match name {
            "Q4_0" => QuantType::Q4_0,
            "Q4_1" => QuantType::Q4_1,
            "Q5_0" => QuantType::Q5_0,
            "Q5_1" => QuantType::Q5_1,
            "Q8_0" => QuantType::Q8_0,
            "Q4_K" => QuantType::Q4K,
            "Q6_K" => QuantType::Q6K,
            _ => return None,
        })
    }

    /// GGUF's name.
    pub fn name(self) -> &'static str {
        match self {
            QuantType::Q4_0 => "Q4_0",
            QuantType::Q4_1 => "Q4_1",
            QuantType::Q5_0 => "Q5_0",
            QuantType::Q5_1 => "Q5_1",
            QuantType::Q8_0 => "Q8_0",
            QuantType::Q4K => "Q4_K",
            QuantType::Q6K => "Q6_K",
        }
    }

    /// Weights per block.
    pub fn block(self) -> usize {
        match self {
            QuantType::Q4K | QuantType::Q6K => 256,
            _ => 32,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            QuantType::Q4_0 => 18,
            QuantType::Q4_1 => 20,
            QuantType::Q5_0 => 22,
            QuantType::Q5_1 => 24,
            QuantType::Q8_0 => 34,
            QuantType::Q4K => 144,
            QuantType::Q6K => 210,
        }
    }
}

/// What a quantized kernel computes: `x [m, k] @ w.T`, `w` `[n, k]` in blocks of `ty`; with
/// `m == 0`, the weight itself dequantized, `[n, k]` float32 (what a GEMM then multiplies: a
/// prompt's many rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QuantMatmul {
    /// The weight's block type.
    pub ty: QuantType,
    /// Rows of `x` (and of the output); 0: the kernel dequantizes the weight.
    pub m: usize,
    /// Rows of the weight (columns of the output).
    pub n: usize,
    /// Columns of the weight and of `x` (a multiple of the type's block).
    pub k: usize,
    id: u64,
}

impl tinygrad_uop::Opaque for QuantMatmul {
    fn id(&self) -> u64 {
        self.id
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A product's type and sizes `(m, n, k)`.
type ProductKey = (QuantType, usize, usize, usize);

/// The kernel AST of a quantized product (slots: the `[m, n]` float32 output, the weight's
/// `n * k / block * block_bytes` bytes, `x` `[m, k]` float32), for a CPU device; equal products
/// get equal ASTs (one compile).
///
/// # Panics
/// If `k` is not a multiple of the type's block, or a size is 0.
pub fn quant_matmul_ast(ty: QuantType, m: usize, n: usize, k: usize) -> UOp {
    assert!(
        m > 0,
        "quant_matmul_ast: x has no rows (quant_dequantize_ast dequantizes)"
    );
    quant_ast(ty, m, n, k)
}

/// The kernel AST that dequantizes a `[n, k]` weight of `ty` blocks into float32, exactly as
/// `gguf.quants` does (slots: the `[n, k]` float32 output, the blocks), for a CPU device.
///
/// # Panics
/// If `k` is not a multiple of the type's block, or a size is 0.
pub fn quant_dequantize_ast(ty: QuantType, n: usize, k: usize) -> UOp {
    quant_ast(ty, 0, n, k)
}

fn quant_ast(ty: QuantType, m: usize, n: usize, k: usize) -> UOp {
    assert!(
        n > 0 && k > 0 && k.is_multiple_of(ty.block()),
        "quant_matmul_ast: {} weights of {n} x {k} with {m} rows of x: the sizes must be \
         positive and k a multiple of {}",
        ty.name(),
        ty.block()
    );
    // one id per product (ids with the top bit set: no other opaque payload has one)
    static IDS: OnceLock<Mutex<HashMap<ProductKey, u64>>> = OnceLock::new();
    let mut ids = IDS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let next = (1u64 << 63) | ids.len() as u64;
    let id = *ids.entry((ty, m, n, k)).or_insert(next);
    let payload = QuantMatmul { ty, m, n, k, id };
    UOp::new(
        Ops::Noop,
        DType::FLOAT32,
        vec![],
        Arg::Opaque(Arc::new(payload)),
    )
}

/// The product an AST built by [`quant_matmul_ast`] describes.
pub fn quant_matmul_of(ast: &UOp) -> Option<QuantMatmul> {
    crate::native::payload_of(ast)
}

/// Rows of `x` up to which a product takes the native loops on a CPU (a decode step's token,
/// a batch of sequences, a short prompt); beyond, dequantizing the weight once and the GEMM
/// path is faster.
pub const NATIVE_ROWS: usize = 8;

/// [`NATIVE_ROWS`] where the AVX-512 tiles run the products (every block type; each group of
/// 8 rows streams the weight once more, still faster than dequantizing it up to here).
// SmolLM2 Q4_1 16-token first token 61.4 -> 49.7 ms on Zen 4 (see docs/performance.md)
pub const TILED_NATIVE_ROWS: usize = 16;

/// Rows of `x` up to which a product with `ty` weights takes the native loops on this CPU:
/// [`TILED_NATIVE_ROWS`] where the AVX-512 tiles take `ty` (every type), else [`NATIVE_ROWS`].
pub fn native_rows(ty: QuantType) -> usize {
    #[cfg(target_arch = "x86_64")]
    if matches!(isa(), Isa::Avx512) && (avx512::tile_dot_takes(ty) || avx512::tile_dot_k_takes(ty))
    {
        return TILED_NATIVE_ROWS;
    }
    let _ = ty;
    NATIVE_ROWS
}

/// Whether the native quantized products may run (`CPU_QUANT` not `0`; off, the tensor layer
/// takes the IR route on the CPU too).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    crate::native::switch_on("CPU_QUANT", &ON)
}

/// The vector loops a CPU runs.
#[derive(Clone, Copy, Debug)]
enum Isa {
    Avx512,
    Avx2,
    Portable,
}

/// The loops this CPU runs: AVX-512 where it has avx512f/bw/vl, FMA and F16C (unless
/// `CPU_AVX512=0`), else AVX2 where it has AVX2 and FMA, else portable.
fn isa() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let avx512_off = std::env::var("CPU_AVX512").is_ok_and(|v| v == "0");
            if !avx512_off
                && has!("avx512f")
                && has!("avx512bw")
                && has!("avx512vl")
                && has!("fma")
                && has!("f16c")
            {
                return Isa::Avx512;
            }
            if has!("avx2") && has!("fma") {
                return Isa::Avx2;
            }
        }
        Isa::Portable
    })
}

/// The CPU kernel of a quantized product's AST (`None` for any other AST).
pub(crate) fn compile(ast: &UOp) -> Option<Result<CompiledAst, DeviceError>> {
    let spec = quant_matmul_of(ast)?;
    let isa = isa();
    if spec.m == 0 {
        let name = format!("dq_{}_{}_{}", spec.ty.name(), spec.n, spec.k);
        let source = format!(
            "native dequantization ({isa:?}): {} x {} {} blocks to float32",
            spec.n,
            spec.k,
            spec.ty.name()
        );
        let flops = (spec.n * spec.k) as f64;
        return Some(Ok((
            Arc::new(QuantKernel { spec, isa, source }),
            name,
            flops,
        )));
    }
    let name = format!("q_{}_{}_{}_{}", spec.ty.name(), spec.m, spec.n, spec.k);
    let source = format!(
        "native quantized product ({isa:?}): [{}, {}] float32 @ ({} x {} in {} blocks).T",
        spec.m,
        spec.k,
        spec.n,
        spec.k,
        spec.ty.name()
    );
    let flops = 2.0 * (spec.m * spec.n * spec.k) as f64;
    Some(Ok((
        Arc::new(QuantKernel { spec, isa, source }),
        name,
        flops,
    )))
}

struct QuantKernel {
    spec: QuantMatmul,
    isa: Isa,
    source: String,
}

/// Tasks per thread: each a contiguous run of rows, so that each thread streams its part of
/// the weight in order (the hardware prefetcher's best case; 16-row tasks read 4.8 GB/s).
// contiguous row runs: 16-row tasks 4.8 -> 10-25 GB/s on Zen 4 (see docs/performance.md)
const TASKS_PER_THREAD: usize = 2;

impl Kernel for QuantKernel {
    fn launch(&self, bufs: &[Arc<Buffer>], vars: &[i64]) {
        assert!(vars.is_empty(), "a quantized product has no variables");
        let s = self.spec;
        let row_bytes = s.k / s.ty.block() * s.ty.block_bytes();
        if s.m == 0 {
            self.dequantize(bufs, row_bytes);
            return;
        }
        let extents = [s.m * s.n, s.n * row_bytes, s.m * s.k];
        // (checks every slot's dtype and that each buffer holds its extent)
        let locked = lock_buffers(
            bufs,
            &[DType::FLOAT32, DType::UINT8, DType::FLOAT32],
            &extents,
        );
        let (out, w, x) = (locked.addrs[0], locked.addrs[1], locked.addrs[2]);
        // SAFETY: `lock_buffers` checked that x holds m * k floats and keeps it locked.
        let xs = unsafe { std::slice::from_raw_parts(x as *const f32, s.m * s.k) };
        let isa = self.isa;
        // the sums of x over each run of 32 (the minimums' terms of the AVX2 and portable
        // loops), once for every row; the AVX-512 tiles fold the minimums into the values
        let sums: Arc<Vec<f32>> = Arc::new(if matches!(isa, Isa::Avx512) {
            Vec::new()
        } else {
            xs.chunks_exact(32).map(|c| c.iter().sum()).collect()
        });
        let pool = global_pool();
        let per_task = s.n.div_ceil(pool.threads() * TASKS_PER_THREAD).max(1);
        let tasks = s.n.div_ceil(per_task);
        pool.run(
            tasks,
            Box::new(move |t| {
                let rows = t * per_task..((t + 1) * per_task).min(s.n);
                // SAFETY: `lock_buffers` checked that the output holds m * n floats, the
                // weight n * row_bytes bytes and x m * k floats, and holds the buffers locked
                // until this launch returns (the pool's `run` returns after every task). Each
                // task's output slices are its own rows of each x-row, out[i * n + rows],
                // disjoint from every other task's (rows do not overlap), and nothing else
                // writes these buffers during the launch.
                unsafe {
                    let w = std::slice::from_raw_parts(w as *const u8, s.n * row_bytes);
                    let x = std::slice::from_raw_parts(x as *const f32, s.m * s.k);
                    let mut outs: Vec<&mut [f32]> = (0..s.m)
                        .map(|i| {
                            std::slice::from_raw_parts_mut(
                                (out as *mut f32).add(i * s.n + rows.start),
                                rows.len(),
                            )
                        })
                        .collect();
                    let job = Rows {
                        ty: s.ty,
                        w,
                        row_bytes,
                        x,
                        sums: &sums,
                        k: s.k,
                        m: s.m,
                    };
                    run_rows(isa, &job, rows, &mut outs);
                }
            }),
        );
    }

    fn source(&self) -> &str {
        &self.source
    }
}

impl QuantKernel {
    /// The weight dequantized into slot 0 (`m == 0`), rows split over the thread pool.
    fn dequantize(&self, bufs: &[Arc<Buffer>], row_bytes: usize) {
        let s = self.spec;
        let locked = lock_buffers(
            bufs,
            &[DType::FLOAT32, DType::UINT8],
            &[s.n * s.k, s.n * row_bytes],
        );
        let (out, w) = (locked.addrs[0], locked.addrs[1]);
        let isa = self.isa;
        let pool = global_pool();
        let per_task = s.n.div_ceil(pool.threads() * TASKS_PER_THREAD).max(1);
        pool.run(
            s.n.div_ceil(per_task),
            Box::new(move |t| {
                let rows = t * per_task..((t + 1) * per_task).min(s.n);
                // SAFETY: `lock_buffers` checked that the output holds n * k floats and the
                // weight n * row_bytes bytes, and keeps both locked until this launch returns
                // (the pool's `run` returns after every task); tasks write disjoint rows.
                unsafe {
                    let w = std::slice::from_raw_parts(
                        (w as *const u8).add(rows.start * row_bytes),
                        rows.len() * row_bytes,
                    );
                    let out = std::slice::from_raw_parts_mut(
                        (out as *mut f32).add(rows.start * s.k),
                        rows.len() * s.k,
                    );
                    dequantize_rows(isa, s.ty, w, out);
                }
            }),
        );
    }
}

/// Blocks `w` of `ty` dequantized into `out` (their values, in order), with the loops of `isa`.
fn dequantize_rows(isa: Isa, ty: QuantType, w: &[u8], out: &mut [f32]) {
    match isa {
        // SAFETY: `Isa::Avx512` is only chosen where avx512f/bw/vl, fma and f16c were
        // detected on this CPU (`isa()`, and the tests' `isas()`).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { dequantize_avx512(ty, w, out) },
        // SAFETY: `Isa::Avx2` is only chosen where avx2 and fma were detected on this CPU
        // (`isa()`, and the tests' `isas()`).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { dequantize_avx2(ty, w, out) },
        _ => dequantize_blocks(ty, w, out),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma,f16c")]
unsafe fn dequantize_avx512(ty: QuantType, w: &[u8], out: &mut [f32]) {
    if avx512::tile_dot_takes(ty) {
        // SAFETY: this function's features are the caller's guarantee; the type is one
        // `dequantize32` takes.
        unsafe { avx512::dequantize32(ty, w, out) }
    } else {
        dequantize_blocks(ty, w, out);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dequantize_avx2(ty: QuantType, w: &[u8], out: &mut [f32]) {
    dequantize_blocks(ty, w, out);
}

/// What a task reads: the weight's blocks, `x` and its sums over runs of 32.
struct Rows<'a> {
    ty: QuantType,
    w: &'a [u8],
    row_bytes: usize,
    x: &'a [f32],
    sums: &'a [f32],
    k: usize,
    m: usize,
}

/// Rows `rows` of the product into `out` (one slice per x-row: `out[i][r - rows.start]` is
/// x-row `i`'s product with weight row `r`), with the loops of `isa`.
fn run_rows(isa: Isa, job: &Rows<'_>, rows: std::ops::Range<usize>, out: &mut [&mut [f32]]) {
    match isa {
        // SAFETY: `Isa::Avx512` is only chosen where avx512f/bw/vl, fma and f16c were
        // detected on this CPU (`isa()`, and the tests' `isas()`).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { rows_avx512(job, rows, out) },
        // SAFETY: `Isa::Avx2` is only chosen where avx2 and fma were detected on this CPU
        // (`isa()`, and the tests' `isas()`).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { rows_avx2(job, rows, out) },
        _ => rows_portable(job, rows, out),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma,f16c")]
unsafe fn rows_avx512(job: &Rows<'_>, rows: std::ops::Range<usize>, out: &mut [&mut [f32]]) {
    let (first, end) = (rows.start, rows.end);
    // four weight rows at a time against up to 4 rows of x (a decode step's token: each x
    // block loaded once for four rows), else two against up to 8 (the K-quants: always two),
    // each block dequantized once in registers (`avx512::tile_dot`, `avx512::tile_dot_k`)
    let width = if job.m <= 4 && avx512::tile_dot_takes(job.ty) {
        4
    } else {
        2
    };
    let mut r = first;
    while r < end {
        let take = if end - r >= width {
            width
        } else if end - r >= 2 {
            2
        } else {
            1
        };
        let mut i = 0;
        while i < job.m {
            let n = (job.m - i).min(8);
            // SAFETY: this function's features are the caller's guarantee; rows r..r + take
            // are before `end`, and x holds rows i..i + n; with four weight rows, n <= 4 (width
            // 4 only where m <= 4).
            unsafe {
                match take {
                    4 => tile_avx512::<4>(job, r, i, n, out, r - first),
                    2 => tile_avx512::<2>(job, r, i, n, out, r - first),
                    _ => tile_avx512::<1>(job, r, i, n, out, r - first),
                }
            }
            i += n;
        }
        r += take;
    }
}

/// Weight rows `r..r + R` against x-rows `i..i + n` (`1 <= n <= 8`) with
/// [`avx512::tile_dot`], into `out[i..i + n]` at columns `col..col + R`.
///
/// # Safety
/// The CPU has avx512f/bw/vl, FMA and F16C; `job.ty` is one `avx512::tile_dot_takes`; rows
/// `r..r + R` are rows of the weight and `i + n <= job.m`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma,f16c")]
unsafe fn tile_avx512<const R: usize>(
    job: &Rows<'_>,
    r: usize,
    i: usize,
    n: usize,
    out: &mut [&mut [f32]],
    col: usize,
) {
    let rb = job.row_bytes;
    let rows: [&[u8]; R] = std::array::from_fn(|j| &job.w[(r + j) * rb..(r + j + 1) * rb]);
    let x = &job.x[i * job.k..];
    let k_quant = avx512::tile_dot_k_takes(job.ty);
    macro_rules! tile {
        ($($m:literal)*) => {
            match n {
                // SAFETY: the caller's guarantees; x holds rows i..i + n from where it starts.
                $($m => put(out, i, col, unsafe {
                    if k_quant {
                        avx512::tile_dot_k::<$m, R>(job.ty, rows, x, job.k)
                    } else {
                        avx512::tile_dot::<$m, R>(job.ty, rows, x, job.k)
                    }
                }),)*
                _ => panic!("quantized product: a tile of {n} rows of x (1 to 8)"),
            }
        };
    }
    // four weight rows take at most 4 rows of x (their accumulators and values fill the 32
    // vector registers)
    if R > 2 {
        match n {
            // SAFETY: the caller's guarantees; x holds rows i..i + n from where it starts.
            1 => put(out, i, col, unsafe {
                avx512::tile_dot::<1, R>(job.ty, rows, x, job.k)
            }),
            // SAFETY: as above.
            2 => put(out, i, col, unsafe {
                avx512::tile_dot::<2, R>(job.ty, rows, x, job.k)
            }),
            // SAFETY: as above.
            3 => put(out, i, col, unsafe {
                avx512::tile_dot::<3, R>(job.ty, rows, x, job.k)
            }),
            // SAFETY: as above.
            4 => put(out, i, col, unsafe {
                avx512::tile_dot::<4, R>(job.ty, rows, x, job.k)
            }),
            _ => panic!("quantized product: a tile of {R} weight rows with {n} rows of x (1 to 4)"),
        }
        return;
    }
    tile!(1 2 3 4 5 6 7 8);
}

/// A tile's products `vals[r][m]` (weight row `col + r`, x-row `i + m`) into `out`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn put<const M: usize, const R: usize>(
    out: &mut [&mut [f32]],
    i: usize,
    col: usize,
    vals: [[f32; M]; R],
) {
    for (r, row) in vals.iter().enumerate() {
        for (m, v) in row.iter().enumerate() {
            out[i + m][col + r] = *v;
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_avx2(job: &Rows<'_>, rows: std::ops::Range<usize>, out: &mut [&mut [f32]]) {
    let (first, end) = (rows.start, rows.end);
    for r in rows {
        let row = &job.w[r * job.row_bytes..(r + 1) * job.row_bytes];
        prefetch_row(job, r + 2, end);
        for (i, o) in out.iter_mut().enumerate().take(job.m) {
            let x = &job.x[i * job.k..(i + 1) * job.k];
            let sums = &job.sums[i * job.k / 32..(i + 1) * job.k / 32];
            // SAFETY: this function's features are the caller's guarantee; `row` holds
            // k / block whole blocks (row_bytes), and x and sums their k and k / 32 elements.
            o[r - first] = unsafe { avx2::row_dot(job.ty, row, x, sums) };
        }
    }
}

/// Asks for weight row `r` (if before `end`) to be brought into the cache: the row after
/// next, on its way from memory while these two are computed (each thread then keeps its
/// stream's requests in flight: without it the products read 4.8 GB/s, with it 10-25).
#[inline(always)]
fn prefetch_row(job: &Rows<'_>, r: usize, end: usize) {
    #[cfg(target_arch = "x86_64")]
    if r < end {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let ahead = &job.w[r * job.row_bytes..(r + 1) * job.row_bytes];
        for line in ahead.chunks(64) {
            // SAFETY: a prefetch is a hint that never faults (SSE, part of x86_64), of an
            // address inside `ahead`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr() as *const i8) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (job, r, end);
}

/// The loops, compiled for each ISA by being inlined into its function.
#[inline(always)]
fn rows_portable(job: &Rows<'_>, rows: std::ops::Range<usize>, out: &mut [&mut [f32]]) {
    let (first, end) = (rows.start, rows.end);
    for r in rows {
        prefetch_row(job, r + 2, end);
        let row = &job.w[r * job.row_bytes..(r + 1) * job.row_bytes];
        for (i, o) in out.iter_mut().enumerate().take(job.m) {
            let x = &job.x[i * job.k..(i + 1) * job.k];
            let sums = &job.sums[i * job.k / 32..(i + 1) * job.k / 32];
            o[r - first] = row_dot(job.ty, row, x, sums);
        }
    }
}
