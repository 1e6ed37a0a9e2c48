//! Products with GGUF's quantized weights on the CPU, reading the blocks themselves:
//! `out[i, r] = sum_c x[i, c] * w[r, c]` for a weight `w` of `n` rows and `k` columns stored as
//! `n * k / block` blocks (each row a whole number of them), `x` float32 `[m, k]`, `out` float32
//! `[m, n]`. Decoding a token reads every weight once: from the blocks that is 0.56 (Q4_1) to
//! 1.06 (Q8_0) bytes per weight instead of the 4 of a dequantized float32 copy, and decode is
//! bound by those reads.
//!
//! Each element is dequantized exactly as `gguf.quants` (and the tensor layer's IR dequantizer)
//! does, in float32 with the same operations in the same order, so the products differ from
//! dequantize-then-matmul only by the order of the float32 sum (each block as `scale *
//! sum(q * x) + min * sum(x)`). The products have AVX-512 and AVX2 loops written with
//! intrinsics and a portable one; the dequantization is written over fixed-size arrays that the
//! compiler vectorizes, compiled for each; the loops are chosen at run time by the CPU's
//! features (`CPU_AVX512=0` picks AVX2 on a CPU with both, as for the GEMM path). Each thread
//! streams a contiguous run of weight rows, prefetching the row after next.
//!
//! The kernel is a schedule item like any other: its AST is [`quant_matmul_ast`] (a `Noop`
//! carrying a [`QuantMatmul`], which only the CPU device compiles), its slots the output, the
//! blocks and `x`, so the JIT captures and replays it. Rows are split over the thread pool.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use tinygrad_dtype::DType;
use tinygrad_uop::{Arg, Ops, UOp};

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
    match (ast.op(), ast.arg()) {
        (Ops::Noop, Arg::Opaque(o)) => o.as_any().downcast_ref::<QuantMatmul>().copied(),
        _ => None,
    }
}

/// Whether the native quantized products may run (`CPU_QUANT` not `0`; off, the tensor layer
/// takes the IR route on the CPU too).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("CPU_QUANT").map_or(true, |v| v != "0"))
}

/// The vector loops a CPU runs.
#[derive(Clone, Copy, Debug)]
enum Isa {
    Avx512,
    Avx2,
    Portable,
}

/// The loops this CPU runs: AVX-512 where it has avx512f/bw/vl and FMA (unless
/// `CPU_AVX512=0`), else AVX2 where it has AVX2 and FMA, else portable.
fn isa() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let avx512_off = std::env::var("CPU_AVX512").is_ok_and(|v| v == "0");
            if !avx512_off && has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("fma")
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
        // the sums of x over each run of 32 (the minimums' terms), once for every row
        let sums: Arc<Vec<f32>> = Arc::new(xs.chunks_exact(32).map(|c| c.iter().sum()).collect());
        let isa = self.isa;
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
        // SAFETY: `Isa::Avx512` is only chosen where avx512f/bw/vl and fma were detected on
        // this CPU (`isa()`, and the tests' `isas()`).
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
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma")]
unsafe fn dequantize_avx512(ty: QuantType, w: &[u8], out: &mut [f32]) {
    dequantize_blocks(ty, w, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dequantize_avx2(ty: QuantType, w: &[u8], out: &mut [f32]) {
    dequantize_blocks(ty, w, out);
}

/// Every block's values, with `gguf.quants`' formulas and float operations (bit-exact).
#[inline(always)]
fn dequantize_blocks(ty: QuantType, w: &[u8], out: &mut [f32]) {
    for (b, o) in w
        .chunks_exact(ty.block_bytes())
        .zip(out.chunks_exact_mut(ty.block()))
    {
        dequantize_block(ty, b, o);
    }
}

/// One block's values (`out` has the block's length).
#[inline(always)]
pub(crate) fn dequantize_block(ty: QuantType, b: &[u8], out: &mut [f32]) {
    match ty {
        QuantType::Q4_0 | QuantType::Q4_1 | QuantType::Q5_0 | QuantType::Q5_1 => {
            let (min, five, qs_at, qh_at) = match ty {
                QuantType::Q4_0 => (None, false, 2, 0),
                QuantType::Q4_1 => (Some(f16_at(&b[2..])), false, 4, 0),
                QuantType::Q5_0 => (None, true, 6, 2),
                _ => (Some(f16_at(&b[2..])), true, 8, 4),
            };
            let d = f16_at(b);
            let qh = if five {
                u32::from_le_bytes([b[qh_at], b[qh_at + 1], b[qh_at + 2], b[qh_at + 3]])
            } else {
                0
            };
            let off = match ty {
                QuantType::Q4_0 => 8,
                QuantType::Q5_0 => 16,
                _ => 0,
            };
            let out: &mut [f32; 32] = out.try_into().expect("32 values");
            for j in 0..16 {
                let q = b[qs_at + j];
                let lo = i32::from(q & 0x0F) | (((qh >> j) & 1) << 4) as i32;
                let hi = i32::from(q >> 4) | (((qh >> (j + 16)) & 1) << 4) as i32;
                match min {
                    Some(m) => {
                        out[j] = d * lo as f32 + m;
                        out[j + 16] = d * hi as f32 + m;
                    }
                    None => {
                        out[j] = d * (lo - off) as f32;
                        out[j + 16] = d * (hi - off) as f32;
                    }
                }
            }
        }
        QuantType::Q8_0 => {
            let d = f16_at(b);
            for j in 0..32 {
                out[j] = f32::from(b[2 + j] as i8) * d;
            }
        }
        QuantType::Q4K => {
            let (d, dmin) = (f16_at(b), f16_at(&b[2..]));
            let (s0, s1, s2) = (&b[4..8], &b[8..12], &b[12..16]);
            let mut sc = [0u8; 8];
            let mut mn = [0u8; 8];
            for j in 0..4 {
                sc[j] = s0[j] & 0x3F;
                sc[j + 4] = (s2[j] & 0x0F) | ((s0[j] >> 2) & 0x30);
                mn[j] = s1[j] & 0x3F;
                mn[j + 4] = (s2[j] >> 4) | ((s1[j] >> 2) & 0x30);
            }
            for c in 0..4 {
                let (dl, ml) = (d * f32::from(sc[2 * c]), dmin * f32::from(mn[2 * c]));
                let (dh, mh) = (
                    d * f32::from(sc[2 * c + 1]),
                    dmin * f32::from(mn[2 * c + 1]),
                );
                for i in 0..32 {
                    let q = b[16 + c * 32 + i];
                    out[2 * c * 32 + i] = dl * f32::from(q & 0x0F) - ml;
                    out[(2 * c + 1) * 32 + i] = dh * f32::from(q >> 4) - mh;
                }
            }
        }
        QuantType::Q6K => {
            let d = f16_at(&b[208..]);
            for h in 0..2 {
                for r in 0..4 {
                    let dd0 = d * f32::from(b[192 + h * 8 + r * 2] as i8);
                    let dd1 = d * f32::from(b[192 + h * 8 + r * 2 + 1] as i8);
                    for i in 0..32 {
                        let l = b[h * 64 + (r % 2) * 32 + i];
                        let low = if r < 2 { l & 0x0F } else { l >> 4 };
                        let high = (b[128 + h * 32 + i] >> (2 * r)) & 3;
                        let q = f32::from((low | (high << 4)) as i8 - 32);
                        out[h * 128 + r * 32 + i] = if i < 16 { dd0 } else { dd1 } * q;
                    }
                }
            }
        }
    }
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
        // SAFETY: `Isa::Avx512` is only chosen where avx512f/bw/vl and fma were detected on
        // this CPU (`isa()`, and the tests' `isas()`).
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
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma")]
unsafe fn rows_avx512(job: &Rows<'_>, rows: std::ops::Range<usize>, out: &mut [&mut [f32]]) {
    let (first, end) = (rows.start, rows.end);
    for r in rows {
        let row = &job.w[r * job.row_bytes..(r + 1) * job.row_bytes];
        prefetch_row(job, r + 2, end);
        for (i, o) in out.iter_mut().enumerate().take(job.m) {
            let x = &job.x[i * job.k..(i + 1) * job.k];
            let sums = &job.sums[i * job.k / 32..(i + 1) * job.k / 32];
            // SAFETY: this function's features are the caller's guarantee; `row` holds
            // k / block whole blocks (row_bytes), and x and sums their k and k / 32 elements.
            o[r - first] = unsafe { avx512::row_dot(job.ty, row, x, sums) };
        }
    }
}

/// The AVX-512 loops: each block's bytes widened to 16 int32 lanes at a time, converted to
/// float32 and multiplied with `x` in 512-bit registers.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{QuantType, f16_at};

    /// 16 bytes as float32 lanes, unsigned.
    ///
    /// # Safety
    /// The CPU has avx512f.
    #[inline(always)]
    unsafe fn u8x16(v: __m128i) -> __m512 {
        // SAFETY: the caller's guarantee (avx512f).
        unsafe { _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v)) }
    }

    /// The 16 floats at `p`.
    ///
    /// # Safety
    /// The CPU has avx512f, and `p..p + 16` are readable floats.
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m512 {
        // SAFETY: the caller's guarantees.
        unsafe { _mm512_loadu_ps(p) }
    }

    /// One weight row's product with `x` (as the portable `row_dot`).
    ///
    /// # Safety
    /// The CPU has avx512f/bw/vl and FMA; `row` holds `x.len() / block` whole blocks of `ty`
    /// and `sums` `x.len() / 32` elements.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,fma")]
    pub(super) unsafe fn row_dot(ty: QuantType, row: &[u8], x: &[f32], sums: &[f32]) -> f32 {
        let nb = row.len() / ty.block_bytes();
        assert!(
            nb * ty.block() == x.len() && sums.len() * 32 == x.len(),
            "quantized product: {} bytes of {} blocks against {} values",
            row.len(),
            ty.name(),
            x.len()
        );
        let xp = x.as_ptr();
        let nib = _mm_set1_epi8(0x0F);
        let mut acc = _mm512_setzero_ps();
        let mut acc2 = _mm512_setzero_ps();
        let mut mins = 0.0f32;
        // SAFETY: the CPU features are the caller's guarantee; every load is of block `b` of
        // `nb`, inside `row` (nb * block_bytes bytes), or of its values x[b * block..] inside
        // `x` (nb * block floats, asserted above): unaligned 16- and 64-byte loads in range.
        unsafe {
            match ty {
                QuantType::Q4_0 | QuantType::Q4_1 | QuantType::Q5_0 | QuantType::Q5_1 => {
                    let (bb, has_min, five) = match ty {
                        QuantType::Q4_0 => (18, false, false),
                        QuantType::Q4_1 => (20, true, false),
                        QuantType::Q5_0 => (22, false, true),
                        _ => (24, true, true),
                    };
                    let offset = _mm512_set1_ps(match ty {
                        QuantType::Q4_0 => 8.0,
                        QuantType::Q5_0 => 16.0,
                        _ => 0.0,
                    });
                    let sixteen = _mm512_set1_epi32(16);
                    for b in 0..nb {
                        let blk = &row[b * bb..(b + 1) * bb];
                        let d = _mm512_set1_ps(f16_at(blk));
                        let mut at = 2;
                        if has_min {
                            mins += f16_at(&blk[2..]) * sums[b];
                            at = 4;
                        }
                        let qh = if five {
                            let q = u32::from_le_bytes([
                                blk[at],
                                blk[at + 1],
                                blk[at + 2],
                                blk[at + 3],
                            ]);
                            at += 4;
                            q
                        } else {
                            0
                        };
                        let qs = _mm_loadu_si128(blk.as_ptr().add(at) as *const __m128i);
                        let lo8 = _mm_and_si128(qs, nib);
                        let hi8 = _mm_and_si128(_mm_srli_epi16(qs, 4), nib);
                        let (mut lo, mut hi) =
                            (_mm512_cvtepu8_epi32(lo8), _mm512_cvtepu8_epi32(hi8));
                        if five {
                            lo = _mm512_mask_add_epi32(lo, (qh & 0xFFFF) as __mmask16, lo, sixteen);
                            hi = _mm512_mask_add_epi32(hi, (qh >> 16) as __mmask16, hi, sixteen);
                        }
                        let lo = _mm512_sub_ps(_mm512_cvtepi32_ps(lo), offset);
                        let hi = _mm512_sub_ps(_mm512_cvtepi32_ps(hi), offset);
                        let x0 = load(xp.add(b * 32));
                        let x1 = load(xp.add(b * 32 + 16));
                        let s = _mm512_fmadd_ps(hi, x1, _mm512_mul_ps(lo, x0));
                        if b % 2 == 0 {
                            acc = _mm512_fmadd_ps(d, s, acc);
                        } else {
                            acc2 = _mm512_fmadd_ps(d, s, acc2);
                        }
                    }
                }
                QuantType::Q8_0 => {
                    for b in 0..nb {
                        let blk = &row[b * 34..(b + 1) * 34];
                        let d = _mm512_set1_ps(f16_at(blk));
                        let p = blk.as_ptr().add(2) as *const __m128i;
                        let q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p)));
                        let q1 =
                            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p.add(1))));
                        let x0 = load(xp.add(b * 32));
                        let x1 = load(xp.add(b * 32 + 16));
                        let s = _mm512_fmadd_ps(q1, x1, _mm512_mul_ps(q0, x0));
                        if b % 2 == 0 {
                            acc = _mm512_fmadd_ps(d, s, acc);
                        } else {
                            acc2 = _mm512_fmadd_ps(d, s, acc2);
                        }
                    }
                }
                QuantType::Q4K => {
                    for b in 0..nb {
                        let blk = &row[b * 144..(b + 1) * 144];
                        let (d, dmin) = (f16_at(blk), f16_at(&blk[2..]));
                        let (s0, s1, s2) = (&blk[4..8], &blk[8..12], &blk[12..16]);
                        let mut sc = [0u8; 8];
                        let mut mn = [0u8; 8];
                        for j in 0..4 {
                            sc[j] = s0[j] & 0x3F;
                            sc[j + 4] = (s2[j] & 0x0F) | ((s0[j] >> 2) & 0x30);
                            mn[j] = s1[j] & 0x3F;
                            mn[j + 4] = (s2[j] >> 4) | ((s1[j] >> 2) & 0x30);
                        }
                        for c in 0..4 {
                            let p = blk.as_ptr().add(16 + c * 32) as *const __m128i;
                            let (b0, b1) = (_mm_loadu_si128(p), _mm_loadu_si128(p.add(1)));
                            let (lo_sub, hi_sub) = (b * 8 + 2 * c, b * 8 + 2 * c + 1);
                            let xl = xp.add(lo_sub * 32);
                            let xh = xp.add(hi_sub * 32);
                            let sl = _mm512_fmadd_ps(
                                u8x16(_mm_and_si128(b1, nib)),
                                load(xl.add(16)),
                                _mm512_mul_ps(u8x16(_mm_and_si128(b0, nib)), load(xl)),
                            );
                            let sh = _mm512_fmadd_ps(
                                u8x16(_mm_and_si128(_mm_srli_epi16(b1, 4), nib)),
                                load(xh.add(16)),
                                _mm512_mul_ps(
                                    u8x16(_mm_and_si128(_mm_srli_epi16(b0, 4), nib)),
                                    load(xh),
                                ),
                            );
                            acc =
                                _mm512_fmadd_ps(_mm512_set1_ps(d * f32::from(sc[2 * c])), sl, acc);
                            acc2 = _mm512_fmadd_ps(
                                _mm512_set1_ps(d * f32::from(sc[2 * c + 1])),
                                sh,
                                acc2,
                            );
                            mins -= dmin * f32::from(mn[2 * c]) * sums[lo_sub]
                                + dmin * f32::from(mn[2 * c + 1]) * sums[hi_sub];
                        }
                    }
                }
                QuantType::Q6K => {
                    let three = _mm_set1_epi8(3);
                    let thirty_two = _mm512_set1_epi32(32);
                    for b in 0..nb {
                        let blk = &row[b * 210..(b + 1) * 210];
                        let d = f16_at(&blk[208..]);
                        let base = blk.as_ptr();
                        for h in 0..2 {
                            let qh = base.add(128 + h * 32) as *const __m128i;
                            let (h0, h1) = (_mm_loadu_si128(qh), _mm_loadu_si128(qh.add(1)));
                            for r in 0..4 {
                                let ql = base.add(h * 64 + (r % 2) * 32) as *const __m128i;
                                let (l0, l1) = (_mm_loadu_si128(ql), _mm_loadu_si128(ql.add(1)));
                                let shift = _mm_cvtsi32_si128(2 * r as i32);
                                let q = |l: __m128i, hb: __m128i| {
                                    let low = if r < 2 {
                                        _mm_and_si128(l, nib)
                                    } else {
                                        _mm_and_si128(_mm_srli_epi16(l, 4), nib)
                                    };
                                    let high = _mm_and_si128(_mm_srl_epi16(hb, shift), three);
                                    let v = _mm_or_si128(low, _mm_slli_epi16(high, 4));
                                    _mm512_cvtepi32_ps(_mm512_sub_epi32(
                                        _mm512_cvtepu8_epi32(v),
                                        thirty_two,
                                    ))
                                };
                                let xb = xp.add((b * 8 + h * 4 + r) * 32);
                                let t0 = _mm512_mul_ps(q(l0, h0), load(xb));
                                let t1 = _mm512_mul_ps(q(l1, h1), load(xb.add(16)));
                                let g = 192 + h * 8 + r * 2;
                                let sc0 = d * f32::from(blk[g] as i8);
                                let sc1 = d * f32::from(blk[g + 1] as i8);
                                acc = _mm512_fmadd_ps(_mm512_set1_ps(sc0), t0, acc);
                                acc2 = _mm512_fmadd_ps(_mm512_set1_ps(sc1), t1, acc2);
                            }
                        }
                    }
                }
            }
        }
        _mm512_reduce_add_ps(_mm512_add_ps(acc, acc2)) + mins
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

/// The AVX2 loops: as the AVX-512 ones with 8 lanes (each 16 bytes of a block widened in two
/// halves).
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{QuantType, f16_at};

    /// The low 8 bytes of `v` as float32 lanes, unsigned (`signed`: as int8).
    ///
    /// # Safety
    /// The CPU has avx2.
    #[inline(always)]
    unsafe fn f8(v: __m128i, signed: bool) -> __m256 {
        // SAFETY: the caller's guarantee (avx2).
        unsafe {
            _mm256_cvtepi32_ps(if signed {
                _mm256_cvtepi8_epi32(v)
            } else {
                _mm256_cvtepu8_epi32(v)
            })
        }
    }

    /// The 8 floats at `p`.
    ///
    /// # Safety
    /// The CPU has avx, and `p..p + 8` are readable floats.
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m256 {
        // SAFETY: the caller's guarantees.
        unsafe { _mm256_loadu_ps(p) }
    }

    /// `sum_l v[l] * x[l]` over the 16 values of `v` (16 bytes, `signed` or not) and the 16
    /// floats at `x`, as 8 lanes.
    ///
    /// # Safety
    /// The CPU has avx2 and FMA; `x..x + 16` are readable floats.
    #[inline(always)]
    unsafe fn dot16(v: __m128i, signed: bool, x: *const f32) -> __m256 {
        // SAFETY: the caller's guarantees.
        unsafe {
            let lo = f8(v, signed);
            let hi = f8(_mm_srli_si128(v, 8), signed);
            _mm256_fmadd_ps(hi, load(x.add(8)), _mm256_mul_ps(lo, load(x)))
        }
    }

    /// One weight row's product with `x` (as the portable `row_dot`).
    ///
    /// # Safety
    /// The CPU has avx2 and FMA; `row` holds `x.len() / block` whole blocks of `ty` and `sums`
    /// `x.len() / 32` elements.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn row_dot(ty: QuantType, row: &[u8], x: &[f32], sums: &[f32]) -> f32 {
        let nb = row.len() / ty.block_bytes();
        assert!(
            nb * ty.block() == x.len() && sums.len() * 32 == x.len(),
            "quantized product: {} bytes of {} blocks against {} values",
            row.len(),
            ty.name(),
            x.len()
        );
        let xp = x.as_ptr();
        let nib = _mm_set1_epi8(0x0F);
        let mut acc = _mm256_setzero_ps();
        let mut mins = 0.0f32;
        // SAFETY: the CPU features are the caller's guarantee; every load is of block `b` of
        // `nb`, inside `row` (nb * block_bytes bytes), or of its values x[b * block..] inside
        // `x` (nb * block floats, asserted above): unaligned 16- and 32-byte loads in range.
        unsafe {
            match ty {
                QuantType::Q4_0 | QuantType::Q4_1 | QuantType::Q5_0 | QuantType::Q5_1 => {
                    let (bb, has_min, five) = match ty {
                        QuantType::Q4_0 => (18, false, false),
                        QuantType::Q4_1 => (20, true, false),
                        QuantType::Q5_0 => (22, false, true),
                        _ => (24, true, true),
                    };
                    let offset = _mm256_set1_ps(match ty {
                        QuantType::Q4_0 => 8.0,
                        QuantType::Q5_0 => 16.0,
                        _ => 0.0,
                    });
                    let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
                    let one = _mm256_set1_epi32(1);
                    for b in 0..nb {
                        let blk = &row[b * bb..(b + 1) * bb];
                        let d = _mm256_set1_ps(f16_at(blk));
                        let mut at = 2;
                        if has_min {
                            mins += f16_at(&blk[2..]) * sums[b];
                            at = 4;
                        }
                        let qh = if five {
                            let q = u32::from_le_bytes([
                                blk[at],
                                blk[at + 1],
                                blk[at + 2],
                                blk[at + 3],
                            ]);
                            at += 4;
                            q
                        } else {
                            0
                        };
                        let qs = _mm_loadu_si128(blk.as_ptr().add(at) as *const __m128i);
                        let halves = [
                            _mm_and_si128(qs, nib),
                            _mm_and_si128(_mm_srli_epi16(qs, 4), nib),
                        ];
                        let mut s = _mm256_setzero_ps();
                        // element e = 16 * half + 8 * part + lane
                        for (h, v) in halves.into_iter().enumerate() {
                            for part in 0..2 {
                                let bytes = if part == 0 { v } else { _mm_srli_si128(v, 8) };
                                let mut q = _mm256_cvtepu8_epi32(bytes);
                                if five {
                                    let e0 = (16 * h + 8 * part) as i32;
                                    let shifts = _mm256_add_epi32(lanes, _mm256_set1_epi32(e0));
                                    let bit = _mm256_and_si256(
                                        _mm256_srlv_epi32(_mm256_set1_epi32(qh as i32), shifts),
                                        one,
                                    );
                                    q = _mm256_add_epi32(q, _mm256_slli_epi32(bit, 4));
                                }
                                let qf = _mm256_sub_ps(_mm256_cvtepi32_ps(q), offset);
                                let xv = load(xp.add(b * 32 + 16 * h + 8 * part));
                                s = _mm256_fmadd_ps(qf, xv, s);
                            }
                        }
                        acc = _mm256_fmadd_ps(d, s, acc);
                    }
                }
                QuantType::Q8_0 => {
                    for b in 0..nb {
                        let blk = &row[b * 34..(b + 1) * 34];
                        let d = _mm256_set1_ps(f16_at(blk));
                        let p = blk.as_ptr().add(2) as *const __m128i;
                        let s = _mm256_add_ps(
                            dot16(_mm_loadu_si128(p), true, xp.add(b * 32)),
                            dot16(_mm_loadu_si128(p.add(1)), true, xp.add(b * 32 + 16)),
                        );
                        acc = _mm256_fmadd_ps(d, s, acc);
                    }
                }
                QuantType::Q4K => {
                    for b in 0..nb {
                        let blk = &row[b * 144..(b + 1) * 144];
                        let (d, dmin) = (f16_at(blk), f16_at(&blk[2..]));
                        let (s0, s1, s2) = (&blk[4..8], &blk[8..12], &blk[12..16]);
                        let mut sc = [0u8; 8];
                        let mut mn = [0u8; 8];
                        for j in 0..4 {
                            sc[j] = s0[j] & 0x3F;
                            sc[j + 4] = (s2[j] & 0x0F) | ((s0[j] >> 2) & 0x30);
                            mn[j] = s1[j] & 0x3F;
                            mn[j + 4] = (s2[j] >> 4) | ((s1[j] >> 2) & 0x30);
                        }
                        for c in 0..4 {
                            let p = blk.as_ptr().add(16 + c * 32) as *const __m128i;
                            let (b0, b1) = (_mm_loadu_si128(p), _mm_loadu_si128(p.add(1)));
                            let (lo_sub, hi_sub) = (b * 8 + 2 * c, b * 8 + 2 * c + 1);
                            let (xl, xh) = (xp.add(lo_sub * 32), xp.add(hi_sub * 32));
                            let sl = _mm256_add_ps(
                                dot16(_mm_and_si128(b0, nib), false, xl),
                                dot16(_mm_and_si128(b1, nib), false, xl.add(16)),
                            );
                            let sh = _mm256_add_ps(
                                dot16(_mm_and_si128(_mm_srli_epi16(b0, 4), nib), false, xh),
                                dot16(_mm_and_si128(_mm_srli_epi16(b1, 4), nib), false, xh.add(16)),
                            );
                            acc =
                                _mm256_fmadd_ps(_mm256_set1_ps(d * f32::from(sc[2 * c])), sl, acc);
                            acc = _mm256_fmadd_ps(
                                _mm256_set1_ps(d * f32::from(sc[2 * c + 1])),
                                sh,
                                acc,
                            );
                            // (Q4_K's minimums are subtracted)
                            mins -= dmin * f32::from(mn[2 * c]) * sums[lo_sub]
                                + dmin * f32::from(mn[2 * c + 1]) * sums[hi_sub];
                        }
                    }
                }
                QuantType::Q6K => {
                    let three = _mm_set1_epi8(3);
                    let thirty_two = _mm256_set1_ps(32.0);
                    for b in 0..nb {
                        let blk = &row[b * 210..(b + 1) * 210];
                        let d = f16_at(&blk[208..]);
                        let base = blk.as_ptr();
                        for h in 0..2 {
                            let qh = base.add(128 + h * 32) as *const __m128i;
                            let (h0, h1) = (_mm_loadu_si128(qh), _mm_loadu_si128(qh.add(1)));
                            for r in 0..4 {
                                let ql = base.add(h * 64 + (r % 2) * 32) as *const __m128i;
                                let (l0, l1) = (_mm_loadu_si128(ql), _mm_loadu_si128(ql.add(1)));
                                let shift = _mm_cvtsi32_si128(2 * r as i32);
                                let q = |l: __m128i, hb: __m128i| {
                                    let low = if r < 2 {
                                        _mm_and_si128(l, nib)
                                    } else {
                                        _mm_and_si128(_mm_srli_epi16(l, 4), nib)
                                    };
                                    let high = _mm_and_si128(_mm_srl_epi16(hb, shift), three);
                                    _mm_or_si128(low, _mm_slli_epi16(high, 4))
                                };
                                let xb = xp.add((b * 8 + h * 4 + r) * 32);
                                // values q - 32: (q * x) - 32 * x over each group of 16
                                let group = |v: __m128i, x: *const f32| {
                                    let lo = _mm256_sub_ps(f8(v, false), thirty_two);
                                    let hi =
                                        _mm256_sub_ps(f8(_mm_srli_si128(v, 8), false), thirty_two);
                                    _mm256_fmadd_ps(hi, load(x.add(8)), _mm256_mul_ps(lo, load(x)))
                                };
                                let t0 = group(q(l0, h0), xb);
                                let t1 = group(q(l1, h1), xb.add(16));
                                let g = 192 + h * 8 + r * 2;
                                let sc0 = d * f32::from(blk[g] as i8);
                                let sc1 = d * f32::from(blk[g + 1] as i8);
                                acc = _mm256_fmadd_ps(_mm256_set1_ps(sc0), t0, acc);
                                acc = _mm256_fmadd_ps(_mm256_set1_ps(sc1), t1, acc);
                            }
                        }
                    }
                }
            }
            // the 8 lanes' sum
            let quad = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
            let pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
            let one_lane = _mm_add_ss(pair, _mm_shuffle_ps(pair, pair, 1));
            _mm_cvtss_f32(one_lane) + mins
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

/// Lanes of the partial sums (one 512-bit vector).
const LANES: usize = 16;

/// The sum of the partial sums, pairwise (the vector halves add as registers).
#[inline(always)]
fn hsum(mut acc: [f32; LANES]) -> f32 {
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            acc[l] += acc[l + width];
        }
    }
    acc[0]
}

/// `acc += scale * s`, lane by lane.
#[inline(always)]
fn add_scaled(acc: &mut [f32; LANES], scale: f32, s: &[f32; LANES]) {
    for l in 0..LANES {
        acc[l] += scale * s[l];
    }
}

/// The IEEE half at `b[0..2]` (little-endian) as float32, exactly (normals, subnormals, zeros,
/// infinities and NaNs): the exponent and mantissa moved into float32's places, then scaled by
/// 2^112 (the difference of the biases), which is exact.
#[inline(always)]
fn f16_at(b: &[u8]) -> f32 {
    let h = u32::from(u16::from_le_bytes([b[0], b[1]]));
    let sign = (h & 0x8000) << 16;
    let em = h & 0x7FFF;
    let bits = if em >= 0x7C00 {
        0x7F80_0000 | ((em & 0x3FF) << 13)
    } else {
        (f32::from_bits(em << 13) * f32::from_bits(0x7780_0000)).to_bits()
    };
    f32::from_bits(sign | bits)
}

/// `x`'s 32 elements of block `b` (of 32).
#[inline(always)]
fn x32(x: &[f32], b: usize) -> &[f32; 32] {
    x[b * 32..b * 32 + 32].try_into().expect("32 elements")
}

/// One weight row's product with `x`. Each block's values are `scale * q (+ min)` (the
/// `gguf.quants` formulas), summed as `scale * sum(q * x) (+ min * sum(x))`: the same real
/// number, with float32 rounding in another order.
#[inline(always)]
fn row_dot(ty: QuantType, row: &[u8], x: &[f32], sums: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let mut mins = 0.0f32;
    match ty {
        QuantType::Q4_0 | QuantType::Q4_1 | QuantType::Q5_0 | QuantType::Q5_1 => {
            let (bb, has_min, five) = match ty {
                QuantType::Q4_0 => (18, false, false),
                QuantType::Q4_1 => (20, true, false),
                QuantType::Q5_0 => (22, false, true),
                _ => (24, true, true),
            };
            let offset: i32 = match ty {
                QuantType::Q4_0 => 8,
                QuantType::Q5_0 => 16,
                _ => 0,
            };
            for (b, blk) in row.chunks_exact(bb).enumerate() {
                let d = f16_at(blk);
                let mut at = 2;
                if has_min {
                    mins += f16_at(&blk[2..]) * sums[b];
                    at = 4;
                }
                let qh = if five {
                    let q = u32::from_le_bytes([blk[at], blk[at + 1], blk[at + 2], blk[at + 3]]);
                    at += 4;
                    q
                } else {
                    0
                };
                let qs: &[u8; 16] = blk[at..at + 16].try_into().expect("16 bytes");
                let xb = x32(x, b);
                let mut s = [0.0f32; LANES];
                for j in 0..16 {
                    let lo = i32::from(qs[j] & 0x0F) | (((qh >> j) & 1) << 4) as i32;
                    let hi = i32::from(qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4) as i32;
                    s[j] = (lo - offset) as f32 * xb[j] + (hi - offset) as f32 * xb[j + 16];
                }
                add_scaled(&mut acc, d, &s);
            }
        }
        QuantType::Q8_0 => {
            for (b, blk) in row.chunks_exact(34).enumerate() {
                let d = f16_at(blk);
                let qs: &[u8; 32] = blk[2..34].try_into().expect("32 bytes");
                let xb = x32(x, b);
                let mut s = [0.0f32; LANES];
                for j in 0..16 {
                    s[j] =
                        f32::from(qs[j] as i8) * xb[j] + f32::from(qs[j + 16] as i8) * xb[j + 16];
                }
                add_scaled(&mut acc, d, &s);
            }
        }
        QuantType::Q4K => {
            for (b, blk) in row.chunks_exact(144).enumerate() {
                let (d, dmin) = (f16_at(blk), f16_at(&blk[2..]));
                let (s0, s1, s2) = (&blk[4..8], &blk[8..12], &blk[12..16]);
                let mut sc = [0u8; 8];
                let mut mn = [0u8; 8];
                for j in 0..4 {
                    sc[j] = s0[j] & 0x3F;
                    sc[j + 4] = (s2[j] & 0x0F) | ((s0[j] >> 2) & 0x30);
                    mn[j] = s1[j] & 0x3F;
                    mn[j + 4] = (s2[j] >> 4) | ((s1[j] >> 2) & 0x30);
                }
                for c in 0..4 {
                    let qs: &[u8; 32] = blk[16 + c * 32..48 + c * 32].try_into().expect("32");
                    let (lo_sub, hi_sub) = (b * 8 + 2 * c, b * 8 + 2 * c + 1);
                    let (xl, xh) = (x32(x, lo_sub), x32(x, hi_sub));
                    let mut sl = [0.0f32; LANES];
                    let mut sh = [0.0f32; LANES];
                    for j in 0..16 {
                        sl[j] = f32::from(qs[j] & 0x0F) * xl[j]
                            + f32::from(qs[j + 16] & 0x0F) * xl[j + 16];
                        sh[j] =
                            f32::from(qs[j] >> 4) * xh[j] + f32::from(qs[j + 16] >> 4) * xh[j + 16];
                    }
                    add_scaled(&mut acc, d * f32::from(sc[2 * c]), &sl);
                    add_scaled(&mut acc, d * f32::from(sc[2 * c + 1]), &sh);
                    // (Q4_K's minimums are subtracted)
                    mins -= dmin * f32::from(mn[2 * c]) * sums[lo_sub]
                        + dmin * f32::from(mn[2 * c + 1]) * sums[hi_sub];
                }
            }
        }
        QuantType::Q6K => {
            for (b, blk) in row.chunks_exact(210).enumerate() {
                let (ql, qh, scales) = (&blk[0..128], &blk[128..192], &blk[192..208]);
                let d = f16_at(&blk[208..]);
                for h in 0..2 {
                    let qhh: &[u8; 32] = qh[h * 32..h * 32 + 32].try_into().expect("32");
                    for r in 0..4 {
                        let l: &[u8; 32] = ql[h * 64 + (r % 2) * 32..h * 64 + (r % 2) * 32 + 32]
                            .try_into()
                            .expect("32");
                        let xb = x32(x, b * 8 + h * 4 + r);
                        let mut s0 = [0.0f32; LANES];
                        let mut s1 = [0.0f32; LANES];
                        for j in 0..16 {
                            let q = |i: usize| {
                                let low = if r < 2 { l[i] & 0x0F } else { l[i] >> 4 };
                                let high = (qhh[i] >> (2 * r)) & 3;
                                f32::from((low | (high << 4)) as i8 - 32)
                            };
                            s0[j] = q(j) * xb[j];
                            s1[j] = q(j + 16) * xb[j + 16];
                        }
                        let g = h * 8 + r * 2;
                        add_scaled(&mut acc, d * f32::from(scales[g] as i8), &s0);
                        add_scaled(&mut acc, d * f32::from(scales[g + 1] as i8), &s1);
                    }
                }
            }
        }
    }
    hsum(acc) + mins
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every ISA this CPU runs (portable, AVX2, AVX-512).
    fn isas() -> Vec<Isa> {
        let mut v = vec![Isa::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx2") && has!("fma") {
                v.push(Isa::Avx2);
            }
            if has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("fma") {
                v.push(Isa::Avx512);
            }
        }
        v
    }

    /// One block's values through the dequantization loops (checked bit for bit against the
    /// tensor layer's IR dequantizer, itself bit-exact with `gguf.quants`, in
    /// `crates/tensor/tests/quantized.rs`).
    fn dequant(ty: QuantType, b: &[u8]) -> Vec<f32> {
        let mut out = vec![0.0f32; ty.block()];
        dequantize_block(ty, b, &mut out);
        out
    }

    /// Every type's loops (the CPU's ISA and portable) against the reference values' product
    /// computed in f64, within float32 rounding.
    #[test]
    fn row_products_equal_the_dequantized_products() {
        for ty in [
            QuantType::Q4_0,
            QuantType::Q4_1,
            QuantType::Q5_0,
            QuantType::Q5_1,
            QuantType::Q8_0,
            QuantType::Q4K,
            QuantType::Q6K,
        ] {
            let blocks = 3;
            let mut row = vec![0u8; blocks * ty.block_bytes()];
            let mut s = 12345u32;
            for byte in row.iter_mut() {
                s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
                *byte = (s >> 16) as u8;
            }
            // small, finite scales of both signs
            for b in 0..blocks {
                let at = b * ty.block_bytes();
                let scale_at: &[usize] = match ty {
                    QuantType::Q4_1 | QuantType::Q5_1 | QuantType::Q4K => &[0, 2],
                    QuantType::Q6K => &[208],
                    _ => &[0],
                };
                for &o in scale_at {
                    let v = 0.01 - 0.007 * (b + o) as f32;
                    let h = half::f16::from_f32(v).to_bits();
                    row[at + o..at + o + 2].copy_from_slice(&h.to_le_bytes());
                }
            }
            let k = blocks * ty.block();
            let x: Vec<f32> = (0..k)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
                .collect();
            let sums: Vec<f32> = x.chunks_exact(32).map(|c| c.iter().sum()).collect();
            let mut want = 0.0f64;
            let mut bound = 0.0f64;
            for (b, blk) in row.chunks_exact(ty.block_bytes()).enumerate() {
                for (j, v) in dequant(ty, blk).iter().enumerate() {
                    let p = f64::from(*v) * f64::from(x[b * ty.block() + j]);
                    want += p;
                    bound += p.abs();
                }
            }
            let job = Rows {
                ty,
                w: &row,
                row_bytes: row.len(),
                x: &x,
                sums: &sums,
                k,
                m: 1,
            };
            for isa in isas() {
                let name = format!("{isa:?}");
                let mut out = [0.0f32];
                run_rows(isa, &job, 0..1, &mut [&mut out[..]]);
                assert!(
                    (f64::from(out[0]) - want).abs() <= 1e-5 * bound + 1e-6,
                    "{} ({name} loops): {} vs {want}",
                    ty.name(),
                    out[0]
                );
            }
        }
    }

    /// The dequantization compiled for this CPU's ISA equals the portable one bit for bit, on
    /// random blocks whose scales take every kind of value (NaN and infinities included).
    #[test]
    fn every_isa_dequantizes_alike() {
        for ty in [
            QuantType::Q4_0,
            QuantType::Q4_1,
            QuantType::Q5_0,
            QuantType::Q5_1,
            QuantType::Q8_0,
            QuantType::Q4K,
            QuantType::Q6K,
        ] {
            let mut s = 99u32;
            let blocks = 64;
            let mut w = vec![0u8; blocks * ty.block_bytes()];
            for byte in w.iter_mut() {
                s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
                *byte = (s >> 16) as u8;
            }
            let run = |isa: Isa| {
                let mut out = vec![0.0f32; blocks * ty.block()];
                dequantize_rows(isa, ty, &w, &mut out);
                out.iter()
                    .map(|v| if v.is_nan() { u32::MAX } else { v.to_bits() })
                    .collect::<Vec<_>>()
            };
            for isa in isas() {
                assert_eq!(run(Isa::Portable), run(isa), "{} ({isa:?})", ty.name());
            }
        }
    }

    #[test]
    fn halves_convert_exactly() {
        for h in 0..=u16::MAX {
            let want = half::f16::from_bits(h).to_f32();
            let got = f16_at(&h.to_le_bytes());
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{h:#06x}: {got} vs {want}"
            );
        }
    }
}
