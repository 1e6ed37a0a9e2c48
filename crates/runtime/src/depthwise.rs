//! A depthwise 2-D convolution (each channel convolved with its own kernel: `groups` = input
//! channels = output channels) as one native CPU kernel ([`DepthwiseConv`]): the mobile
//! networks' 3x3 and 5x5 convolutions, which the IR runs as a reduction over a few taps per
//! output at a few GFLOP/s.
//!
//! Each plane (a batch row's channel) is first copied into a zero-padded scratch plane, its
//! columns split by phase for the stride (stride 2: even and odd columns apart). Then for each
//! run of 16 outputs of a row the taps accumulate in one 16-lane register (two 8-lane ones with
//! AVX2) — per tap one vector load of 16 consecutive scratch floats, no border tests — and the
//! bias is added. The arithmetic is in a fixed order (multiply, then add; taps row by row) on
//! AVX-512, AVX2 and the portable loop, chosen at run time: the same bits on every CPU.
//!
//! The kernel is a lazy graph node like the integer products ([`crate::int_matmul`]): its AST
//! is [`depthwise_ast`] (a `Noop` carrying the [`DepthwiseConv`]; only the CPU device compiles
//! it), its slots the output `[planes, out_h, out_w]`, the input `[planes, h, w]`, the weight
//! `[channels, kh, kw]` (plane `p` takes channel `p % channels`) and the bias `[channels]` if any
//! (float32 each).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use tinygrad_dtype::DType;
use tinygrad_uop::{Arg, Ops, UOp};

use crate::buffer::Buffer;
use crate::cpu::lock_buffers;
use crate::device::{CompiledAst, DeviceError, Kernel};
use crate::thread_pool::global_pool;

/// What a depthwise convolution computes (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DepthwiseConv {
    /// Planes: batch rows x channels.
    pub planes: usize,
    /// Channels (the weight's first dim).
    pub channels: usize,
    /// Input height and width.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Kernel height and width.
    pub kh: usize,
    /// Kernel width.
    pub kw: usize,
    /// Strides (rows, columns).
    pub stride: (usize, usize),
    /// Dilations (rows, columns).
    pub dilation: (usize, usize),
    /// Zero padding before the first row and column (the padding after is implied by the
    /// output size).
    pub pad: (usize, usize),
    /// Output height.
    pub oh: usize,
    /// Output width.
    pub ow: usize,
    /// Whether a bias slot follows the weight.
    pub bias: bool,
    id: u64,
}

impl tinygrad_uop::Opaque for DepthwiseConv {
    fn id(&self) -> u64 {
        self.id
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn output_shape(&self) -> Option<Vec<usize>> {
        Some(vec![self.planes, self.oh, self.ow])
    }
}

impl DepthwiseConv {
    /// The convolution of `planes` planes of `h x w` (channel `p % channels` each) with `kh x
    /// kw` kernels, `stride`, `dilation` and `pad` before (and `pad_after` after) each dim.
    ///
    /// # Panics
    /// If a size, stride or dilation is 0, `channels` does not divide `planes`, or the padded
    /// input is smaller than the dilated kernel.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        planes: usize,
        channels: usize,
        (h, w): (usize, usize),
        (kh, kw): (usize, usize),
        stride: (usize, usize),
        dilation: (usize, usize),
        pad: (usize, usize),
        pad_after: (usize, usize),
        bias: bool,
    ) -> DepthwiseConv {
        let span = |k: usize, d: usize| d * (k - 1) + 1;
        assert!(
            [
                planes, channels, h, w, kh, kw, stride.0, stride.1, dilation.0, dilation.1
            ]
            .iter()
            .all(|&v| v > 0)
                && planes.is_multiple_of(channels)
                && span(kh, dilation.0) <= h + pad.0 + pad_after.0
                && span(kw, dilation.1) <= w + pad.1 + pad_after.1,
            "DepthwiseConv: {planes} planes of {h}x{w} ({channels} channels), kernel {kh}x{kw}, \
             stride {stride:?}, dilation {dilation:?}, padding {pad:?}/{pad_after:?}: sizes must \
             be positive, the channels divide the planes and the kernel fit the padded input"
        );
        let oh = (h + pad.0 + pad_after.0 - span(kh, dilation.0)) / stride.0 + 1;
        let ow = (w + pad.1 + pad_after.1 - span(kw, dilation.1)) / stride.1 + 1;
        DepthwiseConv {
            planes,
            channels,
            h,
            w,
            kh,
            kw,
            stride,
            dilation,
            pad,
            oh,
            ow,
            bias,
            id: 0,
        }
    }
}

/// The kernel AST of `conv` (see the module docs for its slots); equal ones share an AST.
pub fn depthwise_ast(conv: DepthwiseConv) -> UOp {
    // ids with the top four bits set (the int8 kernels' start 101, the slot attentions' 11
    // then a count far below 2^60)
    static IDS: OnceLock<Mutex<HashMap<DepthwiseConv, u64>>> = OnceLock::new();
    let key = DepthwiseConv { id: 0, ..conv };
    let id = crate::native::payload_id(&IDS, key, 0b1111u64 << 60);
    UOp::new(
        Ops::Noop,
        DType::FLOAT32,
        vec![],
        Arg::Opaque(Arc::new(DepthwiseConv { id, ..conv })),
    )
}

/// A lazy `Native` graph node running `ast` (built by [`depthwise_ast`]) on `inputs` (input,
/// weight, bias if any).
///
/// # Panics
/// If `ast` is not a depthwise convolution's, or the inputs are not three (two without bias).
pub fn depthwise_node(ast: &UOp, inputs: Vec<UOp>) -> UOp {
    let conv = depthwise_of(ast).expect("depthwise_node: the AST is not a depthwise convolution");
    assert_eq!(
        inputs.len(),
        2 + usize::from(conv.bias),
        "depthwise_node: the input, the weight and the bias if any"
    );
    UOp::new(Ops::Native, DType::FLOAT32, inputs, ast.arg().clone())
}

/// The convolution an AST built by [`depthwise_ast`] describes.
pub fn depthwise_of(ast: &UOp) -> Option<DepthwiseConv> {
    crate::native::payload_of(ast)
}

/// Whether the native kernel may run (`CPU_DEPTHWISE` not `0`; off, convolutions take the IR).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    crate::native::switch_on("CPU_DEPTHWISE", &ON)
}

/// The vector width the loops are compiled for.
#[derive(Clone, Copy, Debug)]
enum Isa {
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
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
            if !avx512_off && has!("avx512f") {
                return Isa::Avx512;
            }
            if has!("avx2") {
                return Isa::Avx2;
            }
        }
        Isa::Baseline
    })
}

/// The CPU kernel of a depthwise convolution's AST (`None` for any other AST).
pub(crate) fn compile(ast: &UOp) -> Option<Result<CompiledAst, DeviceError>> {
    let spec = depthwise_of(ast)?;
    let isa = isa();
    let name = format!(
        "dw_{}_{}_{}_{}x{}",
        spec.planes, spec.oh, spec.ow, spec.kh, spec.kw
    );
    let source = format!("native depthwise convolution ({isa:?}): {spec:?}");
    let flops = 2.0 * (spec.planes * spec.oh * spec.ow * spec.kh * spec.kw) as f64;
    Some(Ok((
        Arc::new(DepthwiseKernel { spec, isa, source }),
        name,
        flops,
    )))
}

struct DepthwiseKernel {
    spec: DepthwiseConv,
    isa: Isa,
    source: String,
}

/// Multiply-adds below which a convolution runs on the caller's thread.
const PARALLEL_MIN_MACS: usize = 1 << 15;

impl Kernel for DepthwiseKernel {
    fn launch(&self, bufs: &[Arc<Buffer>], vars: &[i64]) {
        assert!(vars.is_empty(), "a depthwise convolution has no variables");
        let s = self.spec;
        let (in_plane, out_plane, taps) = (s.h * s.w, s.oh * s.ow, s.kh * s.kw);
        let mut extents = vec![s.planes * out_plane, s.planes * in_plane, s.channels * taps];
        if s.bias {
            extents.push(s.channels);
        }
        // (checks every slot's dtype and that each buffer holds its extent)
        let locked = lock_buffers(bufs, &[DType::FLOAT32; 4][..extents.len()], &extents);
        let addrs: Vec<usize> = locked.addrs.clone();
        let isa = self.isa;
        let pool = global_pool();
        let macs = s.planes * out_plane * taps;
        let tasks = if macs < PARALLEL_MIN_MACS {
            1
        } else {
            s.planes.min(pool.threads() * 4)
        };
        let per_task = s.planes.div_ceil(tasks);
        pool.run(
            s.planes.div_ceil(per_task),
            Box::new(move |t| {
                let planes = t * per_task..((t + 1) * per_task).min(s.planes);
                let mut xp = Padded::new(&s);
                for p in planes {
                    let c = p % s.channels;
                    // SAFETY: `lock_buffers` checked that the output holds planes * oh * ow
                    // floats, the input planes * h * w, the weight channels * kh * kw and the
                    // bias channels, and keeps them locked until this launch returns (the
                    // pool's `run` returns after every task). Plane p < planes and channel
                    // c < channels, so each slice is in bounds; each task writes only its own
                    // planes' outputs, and nothing else writes these buffers meanwhile.
                    let (out, x, w, bias) = unsafe {
                        (
                            std::slice::from_raw_parts_mut(
                                (addrs[0] as *mut f32).add(p * out_plane),
                                out_plane,
                            ),
                            std::slice::from_raw_parts(
                                (addrs[1] as *const f32).add(p * in_plane),
                                in_plane,
                            ),
                            std::slice::from_raw_parts(
                                (addrs[2] as *const f32).add(c * taps),
                                taps,
                            ),
                            if s.bias {
                                *(addrs[3] as *const f32).add(c)
                            } else {
                                0.0
                            },
                        )
                    };
                    match isa {
                        // SAFETY: `isa()` detected the feature.
                        #[cfg(target_arch = "x86_64")]
                        Isa::Avx512 => unsafe { plane_avx512(&s, &mut xp, x, w, bias, out) },
                        // SAFETY: `isa()` detected the feature.
                        #[cfg(target_arch = "x86_64")]
                        Isa::Avx2 => unsafe { plane_avx2(&s, &mut xp, x, w, bias, out) },
                        Isa::Baseline => padded_plane(&s, &mut xp, x, w, bias, out),
                    }
                }
            }),
        );
        drop(locked);
    }

    fn source(&self) -> &str {
        &self.source
    }
}

/// Outputs of a row accumulated together (one 512-bit register).
const RUN: usize = 16;

/// The zero-padded input plane a task copies each plane into, split by column phase for the
/// stride: padded column `c` at phase `c % stride`, index `c / stride`. Every tap of every run
/// of outputs then reads 16 consecutive floats of one phase row, with no border tests.
struct Padded {
    /// `rows x stride x width` floats.
    data: Vec<f32>,
    rows: usize,
    width: usize,
}

impl Padded {
    fn new(s: &DepthwiseConv) -> Padded {
        let (sx, dx) = (s.stride.1, s.dilation.1);
        // every run is whole: the last run's last lane reads index (runs * RUN - 1) + the
        // largest tap offset
        let runs = s.ow.div_ceil(RUN);
        let width = runs * RUN + ((s.kw - 1) * dx) / sx + 1;
        let rows = (s.oh - 1) * s.stride.0 + (s.kh - 1) * s.dilation.0 + 1;
        Padded {
            data: vec![0.0; rows * sx * width],
            rows,
            width,
        }
    }

    /// Copies plane `x` in, zeros around it.
    #[inline(always)]
    fn fill(&mut self, s: &DepthwiseConv, x: &[f32]) {
        let sx = s.stride.1;
        self.data.fill(0.0);
        for r in 0..self.rows {
            let Some(iy) = r.checked_sub(s.pad.0).filter(|&iy| iy < s.h) else {
                continue;
            };
            let src = &x[iy * s.w..][..s.w];
            let dst = &mut self.data[r * sx * self.width..][..sx * self.width];
            if sx == 1 {
                let n = s.w.min(self.width.saturating_sub(s.pad.1));
                if n > 0 {
                    dst[s.pad.1..s.pad.1 + n].copy_from_slice(&src[..n]);
                }
                continue;
            }
            if sx == 2 {
                // even input columns go to index j / 2 + pad / 2 of phase pad % 2, odd ones to
                // j / 2 + (pad + 1) / 2 of the other phase
                let (p0, p1) = dst.split_at_mut(self.width);
                let (even, odd) = if s.pad.1.is_multiple_of(2) {
                    (p0, p1)
                } else {
                    (p1, p0)
                };
                let (eb, ob) = (s.pad.1 / 2, s.pad.1.div_ceil(2));
                let pairs = (s.w / 2)
                    .min(self.width.saturating_sub(eb))
                    .min(self.width.saturating_sub(ob));
                for (i, pair) in src.chunks_exact(2).take(pairs).enumerate() {
                    even[eb + i] = pair[0];
                    odd[ob + i] = pair[1];
                }
                if s.w % 2 == 1 && eb + s.w / 2 < self.width {
                    even[eb + s.w / 2] = src[s.w - 1];
                }
                if pairs < s.w / 2 {
                    // (a padding past the kernel's reach: columns no output reads are dropped)
                    for (j, &v) in src.iter().enumerate().skip(2 * pairs) {
                        let c = j + s.pad.1;
                        if c / 2 < self.width {
                            dst[(c % 2) * self.width + c / 2] = v;
                        }
                    }
                }
                continue;
            }
            // phase q holds padded columns q, q + sx, ...: input columns c - pad
            for (q, phase) in dst.chunks_exact_mut(self.width).enumerate() {
                let first = (q + sx - s.pad.1 % sx) % sx; // first input column of this phase
                let at = (first + s.pad.1) / sx;
                for (o, &v) in phase[at.min(self.width)..]
                    .iter_mut()
                    .zip(src.iter().skip(first).step_by(sx))
                {
                    *o = v;
                }
            }
        }
    }
}

/// One plane: `out` (`oh x ow`) from the padded input `xp`, the kernel `w` (`kh x kw`) and
/// `bias`; `run` accumulates one run of outputs over the taps.
#[inline(always)]
fn plane(
    s: &DepthwiseConv,
    xp: &Padded,
    w: &[f32],
    bias: f32,
    out: &mut [f32],
    run: impl Fn(&[f32], &[usize], &[f32], f32, &mut [f32]),
) {
    let (sy, sx) = s.stride;
    let (dy, dx) = s.dilation;
    let width = xp.width;
    // each tap's offset from a run's first input: its row, phase and index in the phase
    let taps: Vec<usize> = (0..s.kh * s.kw)
        .map(|t| {
            let (ky, kx) = (t / s.kw, t % s.kw);
            ky * dy * sx * width + (kx * dx) % sx * width + (kx * dx) / sx
        })
        .collect();
    let reach = taps.iter().max().copied().unwrap_or(0) + RUN;
    for (oy, orow) in out.chunks_exact_mut(s.ow).enumerate() {
        let row = oy * sy * sx * width;
        let mut c0 = 0;
        while c0 < s.ow {
            let n = RUN.min(s.ow - c0);
            run(
                &xp.data[row + c0..row + c0 + reach],
                &taps,
                w,
                bias,
                &mut orow[c0..c0 + n],
            );
            c0 += n;
        }
    }
}

/// One run: `out[i] = bias + sum_t x[taps[t] + i] * w[t]` for the run's lanes (`out.len() <=
/// RUN`), taps in order, each a multiply then an add (the same bits on every ISA).
#[inline(always)]
fn run_portable(x: &[f32], taps: &[usize], w: &[f32], bias: f32, out: &mut [f32]) {
    let mut acc = [0.0f32; RUN];
    for (&t, &wv) in taps.iter().zip(w) {
        for (o, &v) in acc.iter_mut().zip(&x[t..t + RUN]) {
            *o += v * wv;
        }
    }
    for (o, v) in out.iter_mut().zip(&acc) {
        *o = v + bias;
    }
}

/// [`run_portable`] in one 512-bit register.
///
/// # Safety
/// The CPU has avx512f.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn run_avx512(x: &[f32], taps: &[usize], w: &[f32], bias: f32, out: &mut [f32]) {
    use std::arch::x86_64::*;
    assert!(taps.iter().all(|&t| t + RUN <= x.len()) && w.len() >= taps.len() && out.len() <= RUN);
    // SAFETY: the caller's guarantee (avx512f); every load reads x[t..t + 16], in bounds by
    // the assert; the store writes out.len() <= 16 lanes of `out` (the mask).
    unsafe {
        let mut acc = _mm512_setzero_ps();
        for (&t, &wv) in taps.iter().zip(w) {
            let v = _mm512_loadu_ps(x.as_ptr().add(t));
            acc = _mm512_add_ps(acc, _mm512_mul_ps(v, _mm512_set1_ps(wv)));
        }
        let r = _mm512_add_ps(acc, _mm512_set1_ps(bias));
        let mask: __mmask16 = ((1u32 << out.len()) - 1) as u16;
        _mm512_mask_storeu_ps(out.as_mut_ptr(), mask, r);
    }
}

/// [`run_portable`] in two 256-bit registers.
///
/// # Safety
/// The CPU has avx2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn run_avx2(x: &[f32], taps: &[usize], w: &[f32], bias: f32, out: &mut [f32]) {
    use std::arch::x86_64::*;
    assert!(taps.iter().all(|&t| t + RUN <= x.len()) && w.len() >= taps.len() && out.len() <= RUN);
    // SAFETY: the caller's guarantee (avx2); every load reads x[t..t + 16], in bounds by the
    // assert; the stores go through a 16-float array, then out.len() <= 16 of them to `out`.
    unsafe {
        let (mut lo, mut hi) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        for (&t, &wv) in taps.iter().zip(w) {
            let wv = _mm256_set1_ps(wv);
            let p = x.as_ptr().add(t);
            lo = _mm256_add_ps(lo, _mm256_mul_ps(_mm256_loadu_ps(p), wv));
            hi = _mm256_add_ps(hi, _mm256_mul_ps(_mm256_loadu_ps(p.add(8)), wv));
        }
        let b = _mm256_set1_ps(bias);
        let mut tmp = [0.0f32; RUN];
        _mm256_storeu_ps(tmp.as_mut_ptr(), _mm256_add_ps(lo, b));
        _mm256_storeu_ps(tmp.as_mut_ptr().add(8), _mm256_add_ps(hi, b));
        let n = out.len();
        out.copy_from_slice(&tmp[..n]);
    }
}

/// Plane `x` copied into `xp`, then convolved into `out` (portable loops).
fn padded_plane(
    s: &DepthwiseConv,
    xp: &mut Padded,
    x: &[f32],
    w: &[f32],
    bias: f32,
    out: &mut [f32],
) {
    xp.fill(s, x);
    plane(s, xp, w, bias, out, run_portable);
}

/// [`padded_plane`] with AVX-512 runs.
///
/// # Safety
/// The CPU has avx512f.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn plane_avx512(
    s: &DepthwiseConv,
    xp: &mut Padded,
    x: &[f32],
    w: &[f32],
    bias: f32,
    out: &mut [f32],
) {
    xp.fill(s, x);
    // SAFETY: the caller's guarantee (avx512f).
    plane(s, xp, w, bias, out, |x, t, w, b, o| unsafe {
        run_avx512(x, t, w, b, o)
    });
}

/// [`padded_plane`] with AVX2 runs.
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn plane_avx2(
    s: &DepthwiseConv,
    xp: &mut Padded,
    x: &[f32],
    w: &[f32],
    bias: f32,
    out: &mut [f32],
) {
    xp.fill(s, x);
    // SAFETY: the caller's guarantee (avx2).
    plane(s, xp, w, bias, out, |x, t, w, b, o| unsafe {
        run_avx2(x, t, w, b, o)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition in f64 (zero padding), for one plane.
    fn definition(s: &DepthwiseConv, x: &[f32], w: &[f32], bias: f32) -> Vec<f64> {
        let mut out = vec![0.0; s.oh * s.ow];
        for oy in 0..s.oh {
            for ox in 0..s.ow {
                let mut acc = f64::from(bias);
                for ky in 0..s.kh {
                    for kx in 0..s.kw {
                        let iy = (oy * s.stride.0 + ky * s.dilation.0) as isize - s.pad.0 as isize;
                        let ix = (ox * s.stride.1 + kx * s.dilation.1) as isize - s.pad.1 as isize;
                        if iy >= 0 && ix >= 0 && (iy as usize) < s.h && (ix as usize) < s.w {
                            acc += f64::from(x[iy as usize * s.w + ix as usize])
                                * f64::from(w[ky * s.kw + kx]);
                        }
                    }
                }
                out[oy * s.ow + ox] = acc;
            }
        }
        out
    }

    /// Every ISA this CPU runs against the definition: strides 1, 2 and 3, dilation, uneven
    /// padding, rows shorter and longer than a run.
    #[test]
    fn planes_equal_the_definition() {
        let cases = [
            ((7, 9), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
            ((14, 40), (5, 5), (1, 1), (1, 1), (2, 2), (2, 2)),
            ((33, 37), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1)),
            ((20, 50), (5, 5), (2, 2), (1, 1), (2, 2), (1, 2)),
            ((12, 19), (3, 3), (1, 3), (2, 2), (2, 0), (2, 1)),
            ((5, 70), (1, 7), (1, 1), (1, 3), (0, 9), (0, 9)),
            ((16, 16), (3, 3), (3, 3), (1, 1), (1, 1), (1, 1)),
            ((9, 31), (3, 5), (2, 3), (2, 2), (0, 4), (3, 0)),
        ];
        for (hw, k, stride, dil, pad, pad_after) in cases {
            let s = DepthwiseConv::new(1, 1, hw, k, stride, dil, pad, pad_after, true);
            let x: Vec<f32> = (0..hw.0 * hw.1)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
                .collect();
            let w: Vec<f32> = (0..k.0 * k.1).map(|i| (i as f32 - 4.0) / 7.0).collect();
            let want = definition(&s, &x, &w, 0.5);
            let mut isas = vec![Isa::Baseline];
            #[cfg(target_arch = "x86_64")]
            {
                if std::arch::is_x86_feature_detected!("avx2") {
                    isas.push(Isa::Avx2);
                }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    isas.push(Isa::Avx512);
                }
            }
            let mut first: Option<Vec<f32>> = None;
            for isa in isas {
                let mut out = vec![f32::NAN; s.oh * s.ow];
                let mut xp = Padded::new(&s);
                match isa {
                    // SAFETY: detected above.
                    #[cfg(target_arch = "x86_64")]
                    Isa::Avx512 => unsafe { plane_avx512(&s, &mut xp, &x, &w, 0.5, &mut out) },
                    // SAFETY: detected above.
                    #[cfg(target_arch = "x86_64")]
                    Isa::Avx2 => unsafe { plane_avx2(&s, &mut xp, &x, &w, 0.5, &mut out) },
                    Isa::Baseline => padded_plane(&s, &mut xp, &x, &w, 0.5, &mut out),
                }
                for (i, (g, e)) in out.iter().zip(&want).enumerate() {
                    assert!(
                        (f64::from(*g) - e).abs() <= 1e-5 * (1.0 + e.abs()),
                        "{isa:?} {s:?}: out[{i}] = {g}, expected {e}"
                    );
                }
                // the same bits on every ISA
                match &first {
                    None => first = Some(out),
                    Some(f) => assert_eq!(
                        f.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        "{isa:?} differs from the baseline"
                    ),
                }
            }
        }
    }
}
