//! Products with GGUF's quantized weights on the CPU, reading the blocks themselves:
//! `out[i, r] = sum_c x[i, c] * w[r, c]` for a weight `w` of `n` rows and `k` columns stored as
//! `n * k / block` blocks (each row a whole number of them), `x` float32 `[m, k]`, `out` float32
//! `[m, n]`. Decoding a token reads every weight once: from the blocks that is 0.56 (Q4_1) to
//! 1.06 (Q8_0) bytes per weight instead of the 4 of a dequantized float32 copy, and decode is
//! bound by those reads.
//!
//! Each element is dequantized exactly as `gguf.quants` (and the tensor layer's IR dequantizer)
//! does, in float32 with the same operations in the same order, so the products differ from
//! dequantize-then-matmul only by the order of the float32 sum. The loops are written over
//! fixed-size arrays that the compiler vectorizes; they are compiled three times — for AVX-512,
//! for AVX2 with FMA, and portably — and chosen at run time by the CPU's features
//! (`CPU_AVX512=0` picks AVX2 on a CPU with both, as for the GEMM path).
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

/// What a quantized product computes: `x [m, k] @ w.T`, `w` `[n, k]` in blocks of `ty`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QuantMatmul {
    /// The weight's block type.
    pub ty: QuantType,
    /// Rows of `x` (and of the output).
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
        m > 0 && n > 0 && k > 0 && k.is_multiple_of(ty.block()),
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

/// Rows of the weight one task computes (a few KiB of blocks: enough to amortize the task).
const ROWS_PER_TASK: usize = 16;

impl Kernel for QuantKernel {
    fn launch(&self, bufs: &[Arc<Buffer>], vars: &[i64]) {
        assert!(vars.is_empty(), "a quantized product has no variables");
        let s = self.spec;
        let row_bytes = s.k / s.ty.block() * s.ty.block_bytes();
        let extents = [s.m * s.n, s.n * row_bytes, s.m * s.k];
        // (checks every slot's dtype and that each buffer holds its extent)
        let locked = lock_buffers(
            bufs,
            &[DType::FLOAT32, DType::UINT8, DType::FLOAT32],
            &extents,
        );
        let (out, w, x) = (locked.addrs[0], locked.addrs[1], locked.addrs[2]);
        let isa = self.isa;
        let tasks = s.n.div_ceil(ROWS_PER_TASK);
        global_pool().run(
            tasks,
            Box::new(move |t| {
                let rows = t * ROWS_PER_TASK..((t + 1) * ROWS_PER_TASK).min(s.n);
                // SAFETY: `lock_buffers` checked that the output holds m * n floats, the
                // weight n * row_bytes bytes and x m * k floats, and holds the buffers locked
                // until this launch returns (the pool's `run` returns after every task). Tasks
                // write disjoint output elements (their own rows `r`, at i * n + r), and nothing
                // else writes these buffers during the launch.
                unsafe {
                    let w = std::slice::from_raw_parts(w as *const u8, s.n * row_bytes);
                    let x = std::slice::from_raw_parts(x as *const f32, s.m * s.k);
                    let out = out as *mut f32;
                    for r in rows {
                        let row = &w[r * row_bytes..(r + 1) * row_bytes];
                        for i in 0..s.m {
                            let v = dot(isa, s.ty, row, &x[i * s.k..(i + 1) * s.k]);
                            *out.add(i * s.n + r) = v;
                        }
                    }
                }
            }),
        );
    }

    fn source(&self) -> &str {
        &self.source
    }
}

/// The dot product of one row's blocks with `x` (its length), with the loops of `isa`.
fn dot(isa: Isa, ty: QuantType, row: &[u8], x: &[f32]) -> f32 {
    match isa {
        // SAFETY: `isa()` chose AVX-512 only where it detected avx512f/bw/vl and fma on this
        // CPU.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { dot_avx512(ty, row, x) },
        // SAFETY: `isa()` chose AVX2 only where it detected avx2 and fma on this CPU.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { dot_avx2(ty, row, x) },
        _ => dot_portable(ty, row, x),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma")]
unsafe fn dot_avx512(ty: QuantType, row: &[u8], x: &[f32]) -> f32 {
    dot_portable(ty, row, x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_avx2(ty: QuantType, row: &[u8], x: &[f32]) -> f32 {
    dot_portable(ty, row, x)
}

/// Lanes of the partial sums (one 512-bit vector).
const LANES: usize = 16;

/// The dot product of a row's blocks with `x`: each block dequantized into a float32 array,
/// multiplied with `x`'s part and added into `LANES` partial sums, which are added at the end.
#[inline(always)]
fn dot_portable(ty: QuantType, row: &[u8], x: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (bs, bb) = (ty.block(), ty.block_bytes());
    let mut small = [0.0f32; 32];
    let mut large = [0.0f32; 256];
    for (b, block) in row.chunks_exact(bb).enumerate() {
        let vals: &[f32] = match ty {
            QuantType::Q4K => {
                dequant_q4k(block, &mut large);
                &large
            }
            QuantType::Q6K => {
                dequant_q6k(block, &mut large);
                &large
            }
            _ => {
                dequant_32(ty, block, &mut small);
                &small
            }
        };
        let xs = &x[b * bs..(b + 1) * bs];
        for (v, xv) in vals.chunks_exact(LANES).zip(xs.chunks_exact(LANES)) {
            for l in 0..LANES {
                acc[l] += v[l] * xv[l];
            }
        }
    }
    // pairwise, so the vector halves add as registers
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            acc[l] += acc[l + width];
        }
    }
    acc[0]
}

/// The little-endian f16 at `b[0..2]`, as float32.
#[inline(always)]
fn f16_at(b: &[u8]) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32()
}

/// A 32-weight block's values (`gguf.quants`' formulas and float operations).
#[inline(always)]
fn dequant_32(ty: QuantType, b: &[u8], out: &mut [f32; 32]) {
    match ty {
        QuantType::Q4_0 => {
            let d = f16_at(b);
            let qs = &b[2..18];
            for j in 0..16 {
                out[j] = d * ((qs[j] & 0x0F) as i32 - 8) as f32;
                out[j + 16] = d * ((qs[j] >> 4) as i32 - 8) as f32;
            }
        }
        QuantType::Q4_1 => {
            let (d, m) = (f16_at(b), f16_at(&b[2..]));
            let qs = &b[4..20];
            for j in 0..16 {
                out[j] = d * (qs[j] & 0x0F) as f32 + m;
                out[j + 16] = d * (qs[j] >> 4) as f32 + m;
            }
        }
        QuantType::Q5_0 => {
            let d = f16_at(b);
            let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
            let qs = &b[6..22];
            for j in 0..16 {
                let lo = (qs[j] & 0x0F) as u32 | ((qh >> j) & 1) << 4;
                let hi = (qs[j] >> 4) as u32 | ((qh >> (j + 16)) & 1) << 4;
                out[j] = d * (lo as i32 - 16) as f32;
                out[j + 16] = d * (hi as i32 - 16) as f32;
            }
        }
        QuantType::Q5_1 => {
            let (d, m) = (f16_at(b), f16_at(&b[2..]));
            let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
            let qs = &b[8..24];
            for j in 0..16 {
                let lo = (qs[j] & 0x0F) as u32 | ((qh >> j) & 1) << 4;
                let hi = (qs[j] >> 4) as u32 | ((qh >> (j + 16)) & 1) << 4;
                out[j] = d * lo as f32 + m;
                out[j + 16] = d * hi as f32 + m;
            }
        }
        QuantType::Q8_0 => {
            let d = f16_at(b);
            for j in 0..32 {
                out[j] = (b[2 + j] as i8) as f32 * d;
            }
        }
        QuantType::Q4K | QuantType::Q6K => unreachable!("256-weight blocks"),
    }
}

/// A Q4_K block's 256 values: 8 sub-blocks of 32, each `d * scale - dmin * min`.
#[inline(always)]
fn dequant_q4k(b: &[u8], out: &mut [f32; 256]) {
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
    let qs = &b[16..144];
    for c in 0..4 {
        let (lo_sub, hi_sub) = (2 * c, 2 * c + 1);
        let (dl, ml) = (d * sc[lo_sub] as f32, dmin * mn[lo_sub] as f32);
        let (dh, mh) = (d * sc[hi_sub] as f32, dmin * mn[hi_sub] as f32);
        for i in 0..32 {
            let q = qs[c * 32 + i];
            out[lo_sub * 32 + i] = dl * (q & 0x0F) as f32 - ml;
            out[hi_sub * 32 + i] = dh * (q >> 4) as f32 - mh;
        }
    }
}

/// A Q6_K block's 256 values: 16 groups of 16, each `d * scale * (q - 32)`.
#[inline(always)]
fn dequant_q6k(b: &[u8], out: &mut [f32; 256]) {
    let (ql, qh, scales) = (&b[0..128], &b[128..192], &b[192..208]);
    let d = f16_at(&b[208..]);
    let mut dd = [0.0f32; 16];
    for g in 0..16 {
        dd[g] = d * (scales[g] as i8) as f32;
    }
    for h in 0..2 {
        for r in 0..4 {
            for i in 0..32 {
                let l = ql[h * 64 + (r % 2) * 32 + i];
                let low = if r < 2 { l & 0x0F } else { l >> 4 };
                let high = (qh[h * 32 + i] >> (2 * r)) & 3;
                let e = h * 128 + r * 32 + i;
                let q = ((low | (high << 4)) as i8 - 32) as f32;
                out[e] = dd[e / 16] * q;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every type's portable loop against a plain dequantize-then-dot of the same blocks.
    #[test]
    fn every_isa_computes_the_same_products() {
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
            // small, finite scales
            for b in 0..blocks {
                let at = b * ty.block_bytes();
                let scale_at: &[usize] = match ty {
                    QuantType::Q4_1 | QuantType::Q5_1 | QuantType::Q4K => &[0, 2],
                    QuantType::Q6K => &[208],
                    _ => &[0],
                };
                for &o in scale_at {
                    let h = half::f16::from_f32(0.01 + 0.003 * (b + o) as f32).to_bits();
                    row[at + o..at + o + 2].copy_from_slice(&h.to_le_bytes());
                }
            }
            let x: Vec<f32> = (0..blocks * ty.block())
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
                .collect();
            let portable = dot_portable(ty, &row, &x);
            let with_isa = dot(isa(), ty, &row, &x);
            let tol = 1e-5 * x.iter().map(|v| v.abs()).sum::<f32>();
            assert!(
                (portable - with_isa).abs() <= tol,
                "{}: {portable} vs {with_isa}",
                ty.name()
            );
        }
    }
}
