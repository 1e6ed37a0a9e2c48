//! A decode step's attention over KV cache slots as one native CPU kernel ([`SlotAttention`]):
//! for batch row `i` (in slot `i` of the caches) and query head `h`,
//! `out[i, h] = softmax_j(scale * q[i, h] . k[i, h / group, j]) @ v[i, h / group, j]` over the
//! row's own positions `j` in `lo..=pos[i]` (`lo` = 0, or with a sliding window the last
//! `window` of them), the query heads grouped over the key/value heads.
//!
//! The IR runs this as five or six kernels per block (scores, their maximum, exponentials,
//! sum, weighted values), each a launch with 128-bit vectors; here one launch does it all,
//! each (row, key/value head) a task that reads each key once for its group of query heads. The
//! arithmetic is plain Rust over 16-lane arrays in a fixed order (no fused multiply-adds, a
//! fixed tree for every sum, a polynomial exponential), compiled for AVX-512, AVX2 and the
//! baseline and chosen at run time: the same bits on every CPU, and for a row whatever the
//! other rows of its batch.
//!
//! The kernel is a schedule item like the quantized products ([`crate::quant`]): its AST is
//! [`slot_attention_ast`] (a `Noop` carrying the [`SlotAttention`]; only the CPU device compiles
//! it), its slots the output `[rows, heads, head_dim]`, the queries (same shape), the keys and
//! the values `[slots, kv_heads, context, head_dim]` (float32) and the positions `[rows]`
//! (int32), so the JIT captures and replays it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use tinygrad_dtype::DType;
use tinygrad_uop::{Arg, Ops, UOp};

use crate::buffer::Buffer;
use crate::cpu::lock_buffers;
use crate::device::{CompiledAst, DeviceError, Kernel};
use crate::thread_pool::global_pool;

/// What a slot-attention kernel computes (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SlotAttention {
    /// Batch rows (row `i` in slot `i`).
    pub rows: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (dividing `heads`).
    pub kv_heads: usize,
    /// Values per head.
    pub head_dim: usize,
    /// Slots of the caches (at least `rows`).
    pub slots: usize,
    /// Positions of each slot's cache.
    pub context: usize,
    /// The sliding window: each row sees only its last `window` positions.
    pub window: Option<usize>,
    /// The scores' scale, float32 bits.
    pub scale_bits: u32,
    id: u64,
}

impl tinygrad_uop::Opaque for SlotAttention {
    fn id(&self) -> u64 {
        self.id
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The kernel AST of a slot attention (see the module docs for its slots); equal ones get equal
/// ASTs (one compile).
///
/// # Panics
/// If a size is 0, `kv_heads` does not divide `heads`, `rows > slots`, or the window is 0.
#[allow(clippy::too_many_arguments)]
pub fn slot_attention_ast(
    rows: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    slots: usize,
    context: usize,
    window: Option<usize>,
    scale: f32,
) -> UOp {
    assert!(
        [rows, heads, kv_heads, head_dim, slots, context]
            .iter()
            .all(|&n| n > 0)
            && heads.is_multiple_of(kv_heads)
            && rows <= slots
            && window != Some(0),
        "slot_attention_ast: {rows} rows of {heads} heads over {kv_heads} key/value heads of \
         {head_dim}, {slots} slots of {context} positions, window {window:?}: sizes must be \
         positive, the key/value heads divide the heads and the rows fit the slots"
    );
    // ids with the top two bits set (the quantized products' have only the top one)
    static IDS: OnceLock<Mutex<HashMap<SlotAttention, u64>>> = OnceLock::new();
    let mut ids = IDS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    // keyed by the payload without its id (0)
    let mut payload = SlotAttention {
        rows,
        heads,
        kv_heads,
        head_dim,
        slots,
        context,
        window,
        scale_bits: scale.to_bits(),
        id: 0,
    };
    let next = (3u64 << 62) | ids.len() as u64;
    payload.id = *ids.entry(payload).or_insert(next);
    UOp::new(
        Ops::Noop,
        DType::FLOAT32,
        vec![],
        Arg::Opaque(Arc::new(payload)),
    )
}

/// The attention an AST built by [`slot_attention_ast`] describes.
pub fn slot_attention_of(ast: &UOp) -> Option<SlotAttention> {
    crate::native::payload_of(ast)
}

/// Whether the native kernel may run (`CPU_ATTENTION` not `0`; off, callers take the IR).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    crate::native::switch_on("CPU_ATTENTION", &ON)
}

/// The vector width the loops are compiled for.
#[derive(Clone, Copy, Debug)]
enum Isa {
    Avx512,
    Avx2,
    Baseline,
}

fn isa() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let avx512_off = std::env::var("CPU_AVX512").is_ok_and(|v| v == "0");
            if !avx512_off && has!("avx512f") && has!("avx512bw") && has!("avx512vl") {
                return Isa::Avx512;
            }
            if has!("avx2") {
                return Isa::Avx2;
            }
        }
        Isa::Baseline
    })
}

/// The CPU kernel of a slot attention's AST (`None` for any other AST).
pub(crate) fn compile(ast: &UOp) -> Option<Result<CompiledAst, DeviceError>> {
    let spec = slot_attention_of(ast)?;
    let isa = isa();
    let name = format!(
        "attn_{}_{}_{}_{}",
        spec.rows, spec.heads, spec.kv_heads, spec.head_dim
    );
    let source = format!(
        "native slot attention ({isa:?}): {} rows x {} heads over {} key/value heads of {}, \
         {} slots of {} positions, window {:?}",
        spec.rows, spec.heads, spec.kv_heads, spec.head_dim, spec.slots, spec.context, spec.window
    );
    // (per row and head: two passes over up to the context's keys; the launch counts them all)
    let flops = 4.0 * (spec.rows * spec.heads * spec.head_dim * spec.context) as f64;
    Some(Ok((
        Arc::new(AttentionKernel { spec, isa, source }),
        name,
        flops,
    )))
}

struct AttentionKernel {
    spec: SlotAttention,
    isa: Isa,
    source: String,
}

impl Kernel for AttentionKernel {
    fn launch(&self, bufs: &[Arc<Buffer>], vars: &[i64]) {
        assert!(vars.is_empty(), "a slot attention has no variables");
        let s = self.spec;
        let qlen = s.rows * s.heads * s.head_dim;
        let cache = s.slots * s.kv_heads * s.context * s.head_dim;
        // (checks every slot's dtype and that each buffer holds its extent)
        let locked = lock_buffers(
            bufs,
            &[
                DType::FLOAT32,
                DType::FLOAT32,
                DType::FLOAT32,
                DType::FLOAT32,
                DType::INT32,
            ],
            &[qlen, qlen, cache, cache, s.rows],
        );
        let addrs: [usize; 5] = std::array::from_fn(|i| locked.addrs[i]);
        let isa = self.isa;
        global_pool().run(
            s.rows * s.kv_heads,
            Box::new(move |t| {
                let (row, kvh) = (t / s.kv_heads, t % s.kv_heads);
                let group = s.heads / s.kv_heads;
                let hd = s.head_dim;
                let at = (row * s.kv_heads + kvh) * s.context * hd;
                // SAFETY: `lock_buffers` checked the dtypes and that the output and the queries
                // hold rows * heads * head_dim floats, the keys and values slots * kv_heads *
                // context * head_dim, the positions `rows` ints, and keeps them locked until the
                // launch returns (the pool's `run` returns after every task). Task (row, kvh)
                // reads its row's query heads kvh * group.. and its slot's (row < slots) head
                // kvh, and writes only those query heads of the output: disjoint from every
                // other task's writes; nothing else writes these buffers during the launch.
                unsafe {
                    let heads_of =
                        |base: usize| (base as *mut f32).add((row * s.heads + kvh * group) * hd);
                    let out = std::slice::from_raw_parts_mut(heads_of(addrs[0]), group * hd);
                    let q = std::slice::from_raw_parts(heads_of(addrs[1]), group * hd);
                    let keys = std::slice::from_raw_parts(
                        (addrs[2] as *const f32).add(at),
                        s.context * hd,
                    );
                    let values = std::slice::from_raw_parts(
                        (addrs[3] as *const f32).add(at),
                        s.context * hd,
                    );
                    let pos = *(addrs[4] as *const i32).add(row);
                    let job = Task {
                        q,
                        keys,
                        values,
                        pos,
                        spec: &s,
                    };
                    match isa {
                        #[cfg(target_arch = "x86_64")]
                        Isa::Avx512 => task_avx512(&job, out),
                        #[cfg(target_arch = "x86_64")]
                        Isa::Avx2 => task_avx2(&job, out),
                        _ => job.run::<BASELINE>(out),
                    }
                }
            }),
        );
    }

    fn source(&self) -> &str {
        &self.source
    }
}

/// One (row, key/value head): its group of query heads, its slot's keys and values, its
/// position.
struct Task<'a> {
    q: &'a [f32],
    keys: &'a [f32],
    values: &'a [f32],
    pos: i32,
    spec: &'a SlotAttention,
}

/// [`Task::run`] compiled for AVX-512.
///
/// # Safety
/// The CPU has avx512f/bw/vl (`isa()` detected them).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn task_avx512(job: &Task<'_>, out: &mut [f32]) {
    job.run::<AVX512>(out);
}

/// [`Task::run`] compiled for AVX2.
///
/// # Safety
/// The CPU has AVX2 (`isa()` detected it).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn task_avx2(job: &Task<'_>, out: &mut [f32]) {
    job.run::<AVX2>(out);
}

/// Lanes of the loops' arrays (what a 512-bit vector holds).
const LANES: usize = 16;

/// [`Task::run`]'s loops in plain Rust.
const BASELINE: u8 = 0;
/// [`Task::run`]'s dot products in AVX2 intrinsics.
const AVX2: u8 = 1;
/// [`Task::run`]'s dot products in AVX-512 intrinsics.
const AVX512: u8 = 2;

impl Task<'_> {
    /// Writes the group's attention outputs into `out` (`group * head_dim`). A position outside
    /// the context (a caller's bug) gives NaN, never a read outside the cache. `ISA`: the dot
    /// products in [`AVX2`] or [`AVX512`] intrinsics (the caller's target features have them),
    /// the same operations in the same order as the portable [`dot`], so the same bits.
    #[inline(always)]
    fn run<const ISA: u8>(&self, out: &mut [f32]) {
        let s = self.spec;
        let hd = s.head_dim;
        let len = self.pos as i64 + 1;
        if len < 1 || len > s.context as i64 {
            out.fill(f32::NAN);
            return;
        }
        let len = len as usize;
        let lo = s.window.map_or(0, |w| len.saturating_sub(w));
        let scale = f32::from_bits(s.scale_bits);
        let n = len - lo;
        let mut weights = vec![0.0f32; n];
        for (g, o) in out.chunks_exact_mut(hd).enumerate() {
            let q = &self.q[g * hd..(g + 1) * hd];
            for (w, j) in weights.iter_mut().zip(lo..len) {
                let k = &self.keys[j * hd..(j + 1) * hd];
                #[cfg(target_arch = "x86_64")]
                let d = match ISA {
                    // SAFETY: `AVX512` is only passed by `task_avx512`, whose caller checked
                    // avx512f; q and k hold hd values, a multiple of 16.
                    AVX512 if hd.is_multiple_of(LANES) => unsafe { dot_avx512(q, k) },
                    // SAFETY: `AVX2` is only passed by `task_avx2`, whose caller checked avx2;
                    // q and k hold hd values, a multiple of 16.
                    AVX2 if hd.is_multiple_of(LANES) => unsafe { dot_avx2(q, k) },
                    _ => dot(q, k),
                };
                #[cfg(not(target_arch = "x86_64"))]
                let d = dot(q, k);
                *w = d * scale;
            }
            let top = max_or_nan(&weights);
            for w in weights.iter_mut() {
                *w = exp_nonpositive(*w - top);
            }
            let total = sum(&weights);
            // the weighted values, 16 dimensions at a time summed over the keys in registers
            // (each output element the sum over the keys in order, from 0)
            let whole = hd / LANES * LANES;
            for (c, oc) in o[..whole].chunks_exact_mut(LANES).enumerate() {
                let mut acc = [0.0f32; LANES];
                for (&w, j) in weights.iter().zip(lo..len) {
                    let v: &[f32; LANES] = self.values[j * hd + c * LANES..][..LANES]
                        .try_into()
                        .expect("16 values");
                    acc = std::array::from_fn(|l| acc[l] + w * v[l]);
                }
                oc.copy_from_slice(&acc);
            }
            for (d, od) in o.iter_mut().enumerate().skip(whole) {
                *od = weights
                    .iter()
                    .zip(lo..len)
                    .fold(0.0, |acc, (&w, j)| acc + w * self.values[j * hd + d]);
            }
            for acc in o.iter_mut() {
                *acc /= total;
            }
        }
    }
}

/// The largest of `xs` (NaN if any is NaN: it propagates to the output), in 16 lanes then a
/// fixed tree.
#[inline(always)]
fn max_or_nan(xs: &[f32]) -> f32 {
    let pick = |m: f32, x: f32| if x > m || x.is_nan() { x } else { m };
    let mut acc = [f32::NEG_INFINITY; LANES];
    let chunks = xs.chunks_exact(LANES);
    let tail = chunks
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |m, &x| pick(m, x));
    for c in chunks {
        for l in 0..LANES {
            acc[l] = pick(acc[l], c[l]);
        }
    }
    let mut width = LANES / 2;
    while width > 0 {
        for l in 0..width {
            acc[l] = pick(acc[l], acc[l + width]);
        }
        width /= 2;
    }
    pick(acc[0], tail)
}

/// [`dot`] for lengths that are a multiple of 16, in AVX2 intrinsics: lanes 0..8 and 8..16 of
/// the 16 in two registers, each 8 values multiplied then added (no fused multiply-add), the
/// lanes added as [`tree`] does, then 0.0 for the empty tail.
///
/// # Safety
/// The CPU has AVX2; `a` and `b` have the same length, a multiple of 16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    assert!(a.len() == b.len() && a.len().is_multiple_of(LANES));
    // SAFETY: the loads are of 8 floats at i and i + 8 < len, a multiple of 16, inside both
    // slices (asserted); the rest are register operations of AVX (the caller's guarantee).
    unsafe {
        let (mut lo, mut hi) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        for i in (0..a.len()).step_by(LANES) {
            let (pa, pb) = (a.as_ptr().add(i), b.as_ptr().add(i));
            lo = _mm256_add_ps(lo, _mm256_mul_ps(_mm256_loadu_ps(pa), _mm256_loadu_ps(pb)));
            hi = _mm256_add_ps(
                hi,
                _mm256_mul_ps(_mm256_loadu_ps(pa.add(8)), _mm256_loadu_ps(pb.add(8))),
            );
        }
        let s8 = _mm256_add_ps(lo, hi);
        let s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps::<1>(s8));
        let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        let s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
        _mm_cvtss_f32(s1) + 0.0
    }
}

/// [`dot`] for lengths that are a multiple of 16, in AVX-512 intrinsics: each 16 values
/// multiplied then added to the lanes (no fused multiply-add), the lanes added as
/// [`tree`] does (halves of 8, 4, 2, 1), then 0.0 for the empty tail.
///
/// # Safety
/// The CPU has avx512f; `a` and `b` have the same length, a multiple of 16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn dot_avx512(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    assert!(a.len() == b.len() && a.len().is_multiple_of(LANES));
    // SAFETY: the loads are of 16 floats at i < len, a multiple of 16, inside both slices
    // (asserted); the rest are register operations of avx512f (the caller's guarantee) and
    // SSE/AVX, which an avx512f CPU has.
    unsafe {
        let mut acc = _mm512_setzero_ps();
        for i in (0..a.len()).step_by(LANES) {
            let p = _mm512_mul_ps(
                _mm512_loadu_ps(a.as_ptr().add(i)),
                _mm512_loadu_ps(b.as_ptr().add(i)),
            );
            acc = _mm512_add_ps(acc, p);
        }
        let lo8 = _mm512_castps512_ps256(acc);
        let hi8 = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(acc)));
        let s8 = _mm256_add_ps(lo8, hi8);
        let s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps::<1>(s8));
        let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        let s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
        _mm_cvtss_f32(s1) + 0.0
    }
}

/// `a . b` in 16 lanes (lane `l` takes the elements `l`, `l + 16`, ...), the lanes added as a
/// fixed tree, then the tail.
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .fold(0.0, |t, (x, y)| t + x * y);
    for (x, y) in ca.zip(cb) {
        let (x, y): (&[f32; LANES], &[f32; LANES]) = (
            x.try_into().expect("a chunk of LANES"),
            y.try_into().expect("a chunk of LANES"),
        );
        acc = std::array::from_fn(|l| acc[l] + x[l] * y[l]);
    }
    tree(acc) + tail
}

/// The sum of `xs` in 16 lanes, then a fixed tree, then the tail.
#[inline(always)]
fn sum(xs: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = xs.chunks_exact(LANES);
    let tail: f32 = chunks.remainder().iter().sum();
    for c in chunks {
        for l in 0..LANES {
            acc[l] += c[l];
        }
    }
    tree(acc) + tail
}

/// The 16 lanes summed pairwise: (0 + 8) + ..., halving.
#[inline(always)]
fn tree(mut acc: [f32; LANES]) -> f32 {
    let mut width = LANES / 2;
    while width > 0 {
        for l in 0..width {
            acc[l] += acc[l + width];
        }
        width /= 2;
    }
    acc[0]
}

/// `e^x` in float32 for `x <= 0` within 2 ulp: a range reduction by `ln 2` and Cephes'
/// polynomial in plain arithmetic, so the same bits on every machine, and a loop of them
/// vectorizes (the softmax weights here; the sampler's token weights). Below -87 (`-inf`
/// included) it is 0; NaN stays NaN.
///
/// ```
/// use tinygrad_runtime::attention::exp_nonpositive;
/// assert_eq!(exp_nonpositive(0.0), 1.0);
/// assert!((exp_nonpositive(-1.0) - (-1.0f32).exp()).abs() <= f32::EPSILON);
/// assert_eq!(exp_nonpositive(f32::NEG_INFINITY), 0.0);
/// ```
#[inline(always)]
pub fn exp_nonpositive(x: f32) -> f32 {
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // round to nearest by adding 1.5 * 2^23 (exact for |x / ln 2| < 2^22)
    const ROUND: f32 = 12_582_912.0;
    let floor = -87.0f32;
    let y = if x < floor { floor } else { x };
    let shifted = y * std::f32::consts::LOG2_E + ROUND;
    let n = shifted - ROUND;
    let r = (y - n * LN2_HI) - n * LN2_LO;
    let p = ((((1.987_569_2e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5;
    // 2^n: n sits in the low bits of `shifted` (exactly, as an integer added to 1.5 * 2^23)
    let two_n = (shifted
        .to_bits()
        .wrapping_sub(ROUND.to_bits())
        .wrapping_add(127))
        << 23;
    let e = (p * r * r + r + 1.0) * f32::from_bits(two_n);
    if x < floor { 0.0 } else { e }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The attention of one (row, head) in float64, as the module docs define it.
    fn reference(
        q: &[f32],
        keys: &[f32],
        values: &[f32],
        lo: usize,
        len: usize,
        scale: f32,
    ) -> Vec<f64> {
        let hd = q.len();
        let scores: Vec<f64> = (lo..len)
            .map(|j| {
                (0..hd)
                    .map(|d| f64::from(q[d]) * f64::from(keys[j * hd + d]))
                    .sum::<f64>()
                    * f64::from(scale)
            })
            .collect();
        let top = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
        let total: f64 = w.iter().sum();
        (0..hd)
            .map(|d| {
                (lo..len)
                    .zip(&w)
                    .map(|(j, w)| w * f64::from(values[j * hd + d]))
                    .sum::<f64>()
                    / total
            })
            .collect()
    }

    fn data(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let x = (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8;
                (x % 2000) as f32 / 500.0 - 2.0
            })
            .collect()
    }

    #[test]
    fn tasks_equal_the_float64_attention_on_every_isa() {
        for (hd, group, ctx, pos, window) in [
            (64, 3, 40, 37, None),
            (64, 1, 40, 0, None),
            (24, 2, 33, 20, Some(5)),
            (256, 4, 9, 8, Some(16)),
            (7, 1, 5, 4, None),
        ] {
            let spec = SlotAttention {
                rows: 1,
                heads: group,
                kv_heads: 1,
                head_dim: hd,
                slots: 1,
                context: ctx,
                window,
                scale_bits: 0.125f32.to_bits(),
                id: 0,
            };
            let (q, keys, values) = (data(group * hd, 1), data(ctx * hd, 2), data(ctx * hd, 3));
            let job = Task {
                q: &q,
                keys: &keys,
                values: &values,
                pos,
                spec: &spec,
            };
            let mut base = vec![0.0f32; group * hd];
            job.run::<BASELINE>(&mut base);
            let len = pos as usize + 1;
            let lo = window.map_or(0, |w| len.saturating_sub(w));
            for g in 0..group {
                let want = reference(&q[g * hd..(g + 1) * hd], &keys, &values, lo, len, 0.125);
                for (d, w) in want.iter().enumerate() {
                    let got = f64::from(base[g * hd + d]);
                    assert!(
                        (got - w).abs() <= 1e-5 * (1.0 + w.abs()),
                        "hd {hd} head {g} [{d}]: {got} vs {w}"
                    );
                }
            }
            #[cfg(target_arch = "x86_64")]
            {
                use std::arch::is_x86_feature_detected as has;
                let mut other = vec![0.0f32; group * hd];
                if has!("avx2") {
                    // SAFETY: AVX2 was just detected.
                    unsafe { task_avx2(&job, &mut other) };
                    assert_eq!(other, base, "AVX2 differs from the baseline");
                }
                if has!("avx512f") && has!("avx512bw") && has!("avx512vl") {
                    // SAFETY: avx512f/bw/vl were just detected.
                    unsafe { task_avx512(&job, &mut other) };
                    assert_eq!(other, base, "AVX-512 differs from the baseline");
                } else {
                    println!("AVX-512 loops not run: this CPU has no avx512f/bw/vl");
                }
            }
        }
    }

    #[test]
    fn a_position_outside_the_context_gives_nan() {
        let spec = SlotAttention {
            rows: 1,
            heads: 1,
            kv_heads: 1,
            head_dim: 4,
            slots: 1,
            context: 3,
            window: None,
            scale_bits: 1.0f32.to_bits(),
            id: 0,
        };
        let (q, kv) = (data(4, 1), data(12, 2));
        for pos in [-1, 3, i32::MAX] {
            let mut out = vec![0.0f32; 4];
            Task {
                q: &q,
                keys: &kv,
                values: &kv,
                pos,
                spec: &spec,
            }
            .run::<BASELINE>(&mut out);
            assert!(out.iter().all(|x| x.is_nan()), "position {pos}: {out:?}");
        }
    }

    #[test]
    fn exp_nonpositive_is_within_two_ulp_of_exp() {
        let mut worst = 0.0f64;
        for i in 0..870_000 {
            let x = -(i as f32) * 1e-4;
            let (got, want) = (f64::from(exp_nonpositive(x)), f64::from(x).exp());
            worst = worst.max(((got - want) / want).abs());
        }
        assert!(
            worst < 2.0 * f64::from(f32::EPSILON),
            "relative error {worst}"
        );
        assert_eq!(exp_nonpositive(0.0), 1.0);
        assert_eq!(exp_nonpositive(f32::NEG_INFINITY), 0.0);
        assert!(exp_nonpositive(f32::NAN).is_nan());
    }
}
