//! 8-bit integer matrix products accumulated exactly in int32 (ONNX's `MatMulInteger`,
//! onnxruntime's and llama.cpp's integer dot products): for `a` of `[m, k]` and `b` of `[k, n]`,
//! both `uint8` or `int8`, `out[i, j] = sum_p (a[i, p] - a_zp) * (b[p, j] - b_zp)` in int32
//! (wrapping, as int32 accumulation does), the zero points one per tensor, per row of `a` or per
//! column of `b`.
//!
//! Two native CPU kernels, schedule items like the quantized products ([`crate::quant`]; their
//! ASTs are `Noop`s carrying the payload, only the CPU device compiles them, so the JIT captures
//! and replays them):
//! - [`IntPack`] ([`int_pack_ast`]): `b` rearranged once into the [`Layout`] the CPU's
//!   multiply-add instruction reads, as `int8` values shifted to signed (`b - 128` for `uint8`),
//!   followed by each column's sum and its shifted zero point. A weight is packed once (the
//!   ONNX frontend does it at load).
//! - [`IntMatmul`] ([`int_matmul_ast`]): `a` times a packed `b`. `a` is shifted to unsigned
//!   (`a + 128` for `int8`), so that the sums are `sum a_u * b_s` (AVX-512 VNNI's `vpdpbusd`:
//!   four `u8 x i8` products into each int32 lane; without it AVX2's `vpmaddwd` on 16-bit values)
//!   and the zero points enter as corrections: `sum (a_u - za)(b_s - zb) = sum a_u b_s -
//!   za * colsum(b_s) - zb * rowsum(a_u) + k * za * zb`.
//!
//! Every product is exact (each `u8 x i8` product and each pair of them fits the 16/32-bit
//! intermediates; the int32 sums wrap as the definition's do), so every layout gives the same
//! bits; the tests compare each against the definition computed in `i64`.
//!
//! Files: `x86.rs` the VNNI and AVX2 tiles; `tests.rs`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use tinygrad_dtype::DType;
use tinygrad_uop::{Arg, Ops, UOp};

use crate::buffer::Buffer;
use crate::cpu::lock_buffers;
use crate::device::{CompiledAst, DeviceError, Kernel};
use crate::thread_pool::global_pool;

#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
mod tests;

/// How a packed `b` is laid out: the form the CPU's multiply-add reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Panels of 32 columns, each `[k / 4][32][4]` `int8`: four consecutive `k` of a column in
    /// one int32 lane (AVX-512 VNNI's `vpdpbusd`).
    Vnni,
    /// Panels of 16 columns, each `[k / 2][16][2]` `int16`: two consecutive `k` of a column in
    /// one int32 lane (AVX2's `vpmaddwd`).
    Avx2,
    /// `[k][n]` `int8`, unpadded (the portable loops).
    Portable,
}

impl Layout {
    /// Columns per panel.
    pub fn panel_cols(self) -> usize {
        match self {
            Layout::Vnni => 32,
            Layout::Avx2 => 16,
            Layout::Portable => 1,
        }
    }

    /// Consecutive `k` per column group (`k` is padded to a multiple with zeros).
    pub fn k_group(self) -> usize {
        match self {
            Layout::Vnni => 4,
            Layout::Avx2 => 2,
            Layout::Portable => 1,
        }
    }

    /// Bytes per value of the panels.
    fn value_bytes(self) -> usize {
        match self {
            Layout::Avx2 => 2,
            _ => 1,
        }
    }

    /// `n` rounded up to whole panels.
    pub fn padded_cols(self, n: usize) -> usize {
        n.next_multiple_of(self.panel_cols())
    }

    /// `k` rounded up to whole groups.
    pub fn padded_k(self, k: usize) -> usize {
        k.next_multiple_of(self.k_group())
    }

    /// Bytes of the panels of a packed `[k, n]`.
    pub fn panel_bytes(self, k: usize, n: usize) -> usize {
        self.padded_k(k) * self.padded_cols(n) * self.value_bytes()
    }

    /// Bytes of a packed `[k, n]`: the panels, then the column sums and the zero points, each
    /// `padded_cols(n)` int32.
    pub fn packed_bytes(self, k: usize, n: usize) -> usize {
        self.panel_bytes(k, n) + 2 * 4 * self.padded_cols(n)
    }

    /// Whether this CPU runs the layout's loops.
    pub fn runs_here(self) -> bool {
        match self {
            Layout::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Layout::Vnni => {
                use std::arch::is_x86_feature_detected as has;
                has!("avx512f") && has!("avx512bw") && has!("avx512vnni")
            }
            #[cfg(target_arch = "x86_64")]
            Layout::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }
}

/// The layout this CPU's products use: VNNI where it has AVX-512 VNNI (unless `CPU_AVX512=0`),
/// else AVX2 where it has AVX2, else portable.
pub fn native_layout() -> Layout {
    static LAYOUT: OnceLock<Layout> = OnceLock::new();
    *LAYOUT.get_or_init(|| {
        let avx512_off = std::env::var("CPU_AVX512").is_ok_and(|v| v == "0");
        if !avx512_off && Layout::Vnni.runs_here() {
            Layout::Vnni
        } else if Layout::Avx2.runs_here() {
            Layout::Avx2
        } else {
            Layout::Portable
        }
    })
}

/// Whether the native integer products may run (`CPU_INT8` not `0`; off, callers take the IR).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    crate::native::switch_on("CPU_INT8", &ON)
}

/// A tensor's zero point: none (0), one for all, or one per row of `a` / column of `b`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ZeroPoint {
    /// No zero point (0); no slot.
    None,
    /// One value (a slot of 1 element, the tensor's dtype).
    One,
    /// One per row of `a` (`m`) or column of `b` (`n`), a slot of that many.
    Each,
}

impl ZeroPoint {
    /// The slot's elements for a tensor with `per` rows/columns (`None` when there is no slot).
    fn slot_len(self, per: usize) -> Option<usize> {
        match self {
            ZeroPoint::None => None,
            ZeroPoint::One => Some(1),
            ZeroPoint::Each => Some(per),
        }
    }

    /// The `per` zero points read from the slot's bytes `raw` (`signed`: int8, else uint8),
    /// plus `shift` each.
    fn values(self, raw: Option<&[u8]>, per: usize, signed: bool, shift: i32) -> Vec<i32> {
        let value = |b: u8| {
            if signed {
                i32::from(b as i8)
            } else {
                i32::from(b)
            }
        };
        match (self, raw) {
            (ZeroPoint::One, Some(r)) => vec![value(r[0]).wrapping_add(shift); per],
            (ZeroPoint::Each, Some(r)) => r[..per]
                .iter()
                .map(|&b| value(b).wrapping_add(shift))
                .collect(),
            _ => vec![shift; per],
        }
    }
}

/// Packing `b` (`[k, n]`, `int8` if `b_signed` else `uint8`) and its zero point into `layout`
/// (slots: the packed `uint8` output of [`Layout::packed_bytes`], `b`, the zero point if any).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IntPack {
    /// Rows of `b`.
    pub k: usize,
    /// Columns of `b`.
    pub n: usize,
    /// Whether `b` is `int8` (else `uint8`).
    pub b_signed: bool,
    /// `b`'s zero point.
    pub b_zero: ZeroPoint,
    /// The packed layout.
    pub layout: Layout,
    id: u64,
}

/// The product of `a` (`[m, k]`, `int8` if `a_signed` else `uint8`) with a packed `b` of `n`
/// columns (slots: the `int32` `[m, n]` output, `a`, the packed `b`, `a`'s zero point if any).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IntMatmul {
    /// Rows of `a`.
    pub m: usize,
    /// Columns of `b`.
    pub n: usize,
    /// The shared dimension.
    pub k: usize,
    /// Whether `a` is `int8` (else `uint8`).
    pub a_signed: bool,
    /// `a`'s zero point.
    pub a_zero: ZeroPoint,
    /// The packed `b`'s layout.
    pub layout: Layout,
    id: u64,
}

/// Either payload, keyed for ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Payload {
    Pack(IntPack),
    Matmul(IntMatmul),
}

impl tinygrad_uop::Opaque for IntPack {
    fn id(&self) -> u64 {
        self.id
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn output_shape(&self) -> Option<Vec<usize>> {
        Some(vec![self.layout.packed_bytes(self.k, self.n)])
    }
}

impl tinygrad_uop::Opaque for IntMatmul {
    fn id(&self) -> u64 {
        self.id
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn output_shape(&self) -> Option<Vec<usize>> {
        Some(vec![self.m, self.n])
    }
}

/// The id of `p` (its fields without the id): equal payloads share an AST (one compile).
fn payload_id(p: Payload) -> u64 {
    // ids with the top three bits 101 (the quantized products' have 10 and then a 0 below
    // their count's bits, the slot attentions' 11)
    static IDS: OnceLock<Mutex<HashMap<Payload, u64>>> = OnceLock::new();
    crate::native::payload_id(&IDS, p, 5u64 << 61)
}

fn opaque_ast(payload: Arc<dyn tinygrad_uop::Opaque>, dtype: DType) -> UOp {
    UOp::new(Ops::Noop, dtype, vec![], Arg::Opaque(payload))
}

/// A lazy `Native` graph node running the kernel of `ast` (built by [`int_pack_ast`] or
/// [`int_matmul_ast`]) on `inputs` (its slots after the output, in order): the scheduler
/// realizes the inputs into buffers and launches the kernel within the rest of the schedule.
///
/// # Panics
/// If `ast` is not a pack's or product's.
pub fn native_node(ast: &UOp, inputs: Vec<UOp>) -> UOp {
    assert!(
        ast.op() == Ops::Noop
            && matches!(ast.arg(), Arg::Opaque(o) if o.as_any().is::<IntPack>() || o.as_any().is::<IntMatmul>()),
        "int_matmul::native_node: the AST is not an int8 packing or product"
    );
    UOp::new(Ops::Native, ast.dtype(), inputs, ast.arg().clone())
}

/// The kernel AST packing a `[k, n]` `b` into `layout` (see [`IntPack`] for the slots).
///
/// # Panics
/// If `k` or `n` is 0, or `layout` does not run on this CPU.
pub fn int_pack_ast(k: usize, n: usize, b_signed: bool, b_zero: ZeroPoint, layout: Layout) -> UOp {
    assert!(
        k > 0 && n > 0 && layout.runs_here(),
        "int_pack_ast: b of {k} x {n} in the {layout:?} layout: the sizes must be positive and \
         the layout run on this CPU"
    );
    let mut p = IntPack {
        k,
        n,
        b_signed,
        b_zero,
        layout,
        id: 0,
    };
    p.id = payload_id(Payload::Pack(p));
    opaque_ast(Arc::new(p), DType::UINT8)
}

/// The kernel AST multiplying an `[m, k]` `a` by a `[k, n]` `b` packed in `layout` (see
/// [`IntMatmul`] for the slots).
///
/// # Panics
/// If a size is 0, or `layout` does not run on this CPU.
pub fn int_matmul_ast(
    m: usize,
    n: usize,
    k: usize,
    a_signed: bool,
    a_zero: ZeroPoint,
    layout: Layout,
) -> UOp {
    assert!(
        m > 0 && n > 0 && k > 0 && layout.runs_here(),
        "int_matmul_ast: a of {m} x {k} times b of {k} x {n} in the {layout:?} layout: the sizes \
         must be positive and the layout run on this CPU"
    );
    let mut p = IntMatmul {
        m,
        n,
        k,
        a_signed,
        a_zero,
        layout,
        id: 0,
    };
    p.id = payload_id(Payload::Matmul(p));
    opaque_ast(Arc::new(p), DType::INT32)
}

/// The CPU kernel of a pack's or product's AST (`None` for any other AST).
pub(crate) fn compile(ast: &UOp) -> Option<Result<CompiledAst, DeviceError>> {
    let Arg::Opaque(o) = ast.arg() else {
        return None;
    };
    if ast.op() != Ops::Noop {
        return None;
    }
    if let Some(p) = o.as_any().downcast_ref::<IntPack>() {
        let source = format!(
            "native int8 packing ({:?}): {} x {} {}",
            p.layout,
            p.k,
            p.n,
            if p.b_signed { "int8" } else { "uint8" }
        );
        let kernel: Arc<dyn Kernel> = Arc::new(PackKernel { p: *p, source });
        return Some(Ok((
            kernel,
            format!("i8pack_{}_{}", p.k, p.n),
            (p.k * p.n) as f64,
        )));
    }
    let p = o.as_any().downcast_ref::<IntMatmul>()?;
    let source = format!(
        "native int8 product ({:?}): [{}, {}] {} @ packed [{}, {}]",
        p.layout,
        p.m,
        p.k,
        if p.a_signed { "int8" } else { "uint8" },
        p.k,
        p.n
    );
    let kernel: Arc<dyn Kernel> = Arc::new(MatmulKernel { p: *p, source });
    Some(Ok((
        kernel,
        format!("i8mm_{}_{}_{}", p.m, p.n, p.k),
        2.0 * (p.m * p.n * p.k) as f64,
    )))
}

/// The dtype of an 8-bit tensor's slot.
fn int8_dtype(signed: bool) -> DType {
    if signed { DType::INT8 } else { DType::UINT8 }
}

struct PackKernel {
    p: IntPack,
    source: String,
}

impl Kernel for PackKernel {
    fn launch(&self, bufs: &[Arc<Buffer>], vars: &[i64]) {
        assert!(vars.is_empty(), "an int8 packing has no variables");
        let p = self.p;
        let mut dtypes = vec![DType::UINT8, int8_dtype(p.b_signed)];
        let mut extents = vec![p.layout.packed_bytes(p.k, p.n), p.k * p.n];
        if let Some(len) = p.b_zero.slot_len(p.n) {
            dtypes.push(int8_dtype(p.b_signed));
            extents.push(len);
        }
        // (checks every slot's dtype and that each buffer holds its extent)
        let locked = lock_buffers(bufs, &dtypes, &extents);
        // SAFETY: `lock_buffers` checked each slot's extent in bytes (8-bit dtypes: one byte per
        // element) and keeps the buffers locked until it drops, after this function's last
        // use of the slices; the output is a buffer of its own (a pack's output is new).
        let (out, b, zp) = unsafe {
            (
                std::slice::from_raw_parts_mut(locked.addrs[0] as *mut u8, extents[0]),
                std::slice::from_raw_parts(locked.addrs[1] as *const u8, extents[1]),
                extents
                    .get(2)
                    .map(|&len| std::slice::from_raw_parts(locked.addrs[2] as *const u8, len)),
            )
        };
        pack(&p, b, zp, out);
    }

    fn source(&self) -> &str {
        &self.source
    }
}

/// Packs `b` (`[k, n]` bytes) with its zero point's bytes `zp` into `out` (see [`IntPack`]).
fn pack(p: &IntPack, b: &[u8], zp: Option<&[u8]>, out: &mut [u8]) {
    let (k, n, layout) = (p.k, p.n, p.layout);
    assert!(
        b.len() >= k * n && out.len() >= layout.packed_bytes(k, n),
        "int8 packing: {} bytes of b and {} of output for {k} x {n} in {layout:?}",
        b.len(),
        out.len()
    );
    // signed values: uint8 b shifted by -128 (the top bit flipped), zero point alike
    let flip = if p.b_signed { 0u8 } else { 0x80 };
    let signed = |v: u8| (v ^ flip) as i8;
    let (panel_cols, group) = (layout.panel_cols(), layout.k_group());
    let (kp, np) = (layout.padded_k(k), layout.padded_cols(n));
    let panels = out.len().min(layout.panel_bytes(k, n));
    let (panel_out, tail) = out.split_at_mut(panels);
    match layout {
        Layout::Portable => {
            for (o, &v) in panel_out.iter_mut().zip(&b[..k * n]) {
                *o = signed(v) as u8;
            }
        }
        Layout::Vnni | Layout::Avx2 => {
            let vb = layout.value_bytes();
            let panel_bytes = kp * panel_cols * vb;
            for (pi, panel) in panel_out.chunks_exact_mut(panel_bytes).enumerate() {
                let c0 = pi * panel_cols;
                for (g, chunk) in panel.chunks_exact_mut(panel_cols * group * vb).enumerate() {
                    for c in 0..panel_cols {
                        for j in 0..group {
                            let (row, col) = (g * group + j, c0 + c);
                            let v = if row < k && col < n {
                                signed(b[row * n + col])
                            } else {
                                0
                            };
                            let at = (c * group + j) * vb;
                            if vb == 1 {
                                chunk[at] = v as u8;
                            } else {
                                chunk[at..at + 2].copy_from_slice(&i16::from(v).to_le_bytes());
                            }
                        }
                    }
                }
            }
        }
    }
    // the column sums of the signed values and the signed zero points, np int32 each
    let mut sums = vec![0i32; np];
    for row in b[..k * n].chunks_exact(n) {
        for (s, &v) in sums.iter_mut().zip(row) {
            *s = s.wrapping_add(i32::from(signed(v)));
        }
    }
    let shift = if p.b_signed { 0 } else { -128 };
    let mut zps = p.b_zero.values(zp, n, p.b_signed, shift);
    zps.resize(np, 0);
    for (o, v) in tail.chunks_exact_mut(4).zip(sums.iter().chain(&zps)) {
        o.copy_from_slice(&v.to_le_bytes());
    }
}

struct MatmulKernel {
    p: IntMatmul,
    source: String,
}

/// Work (multiply-adds) below which a product runs on the caller's thread.
const PARALLEL_MIN_MACS: usize = 1 << 16;

/// Bytes of `a` (a block of rows) that a task keeps in the L2 cache while it runs its panels.
const A_BLOCK_BYTES: usize = 256 << 10;

impl Kernel for MatmulKernel {
    fn launch(&self, bufs: &[Arc<Buffer>], vars: &[i64]) {
        assert!(vars.is_empty(), "an int8 product has no variables");
        let p = self.p;
        let mut dtypes = vec![DType::INT32, int8_dtype(p.a_signed), DType::UINT8];
        let mut extents = vec![p.m * p.n, p.m * p.k, p.layout.packed_bytes(p.k, p.n)];
        if let Some(len) = p.a_zero.slot_len(p.m) {
            dtypes.push(int8_dtype(p.a_signed));
            extents.push(len);
        }
        // (checks every slot's dtype and that each buffer holds its extent)
        let locked = lock_buffers(bufs, &dtypes, &extents);
        // SAFETY: `lock_buffers` checked each slot's extent (a, the packed b and the zero point
        // are bytes) and keeps the buffers locked until it drops at the end of this function,
        // after the pool's `run` (which returns after every task) and the last use of these
        // slices. The output is written through `out_addr` by tasks, each its own rows x
        // columns; the inputs are only read.
        let (a, packed, zp) = unsafe {
            (
                std::slice::from_raw_parts(locked.addrs[1] as *const u8, extents[1]),
                std::slice::from_raw_parts(locked.addrs[2] as *const u8, extents[2]),
                extents
                    .get(3)
                    .map(|&len| std::slice::from_raw_parts(locked.addrs[3] as *const u8, len)),
            )
        };
        let prepared = Arc::new(Prepared::new(&p, a, packed, zp));
        let out_addr = locked.addrs[0];
        let layout = p.layout;
        let panel_cols = layout
            .panel_cols()
            .max(if layout == Layout::Portable { 64 } else { 1 });
        let col_blocks = p.n.div_ceil(panel_cols);
        let row_bytes = prepared.a_row_bytes.max(1);
        let rows_per_block = (A_BLOCK_BYTES / row_bytes).clamp(8, p.m.max(8)) / 8 * 8;
        let row_blocks = p.m.div_ceil(rows_per_block);
        let pool = global_pool();
        let want = if p.m * p.n * p.k < PARALLEL_MIN_MACS {
            1
        } else {
            pool.threads() * 4
        };
        let groups = col_blocks.min(want.div_ceil(row_blocks)).max(1);
        let per_group = col_blocks.div_ceil(groups);
        let groups = col_blocks.div_ceil(per_group);
        let packed_addr = packed.as_ptr() as usize;
        let packed_len = packed.len();
        pool.run(
            row_blocks * groups,
            Box::new(move |t| {
                let (rb, g) = (t / groups, t % groups);
                let rows = rb * rows_per_block..((rb + 1) * rows_per_block).min(p.m);
                let cols = g * per_group * panel_cols..((g + 1) * per_group * panel_cols).min(p.n);
                // SAFETY: the packed b is locked for the launch (see above) and only read;
                // `out_addr` holds m * n int32 (checked by `lock_buffers`), and this task
                // writes only out[i * n + j] for its own rows x cols, disjoint from every
                // other task's (row blocks and column groups partition the output).
                let packed =
                    unsafe { std::slice::from_raw_parts(packed_addr as *const u8, packed_len) };
                let out = OutTile {
                    addr: out_addr,
                    n: p.n,
                };
                run_task(&p, &prepared, packed, rows, cols, &out);
            }),
        );
    }

    fn source(&self) -> &str {
        &self.source
    }
}

/// `a` prepared for a layout's loops: shifted to unsigned and padded to whole groups, with its
/// row sums and shifted zero points.
struct Prepared {
    /// Per row, `a_row_bytes` bytes: `padded_k` unsigned values (VNNI, portable), or `padded_k
    /// / 2` int32 words of two 16-bit values (AVX2).
    a: Vec<u8>,
    a_row_bytes: usize,
    /// Per row, the sum of its unsigned values.
    row_sums: Vec<i32>,
    /// Per row, the unsigned zero point.
    zero: Vec<i32>,
}

impl Prepared {
    fn new(p: &IntMatmul, a: &[u8], packed: &[u8], zp: Option<&[u8]>) -> Prepared {
        let layout = p.layout;
        assert!(
            a.len() >= p.m * p.k && packed.len() >= layout.packed_bytes(p.k, p.n),
            "int8 product: {} bytes of a and {} of packed b for [{}, {}] @ [{}, {}] in {layout:?}",
            a.len(),
            packed.len(),
            p.m,
            p.k,
            p.k,
            p.n
        );
        let flip = if p.a_signed { 0x80u8 } else { 0 };
        let kp = layout.padded_k(p.k);
        let a_row_bytes = kp * layout.value_bytes();
        let mut out = vec![0u8; p.m * a_row_bytes];
        let mut row_sums = Vec::with_capacity(p.m);
        for (row, dst) in a[..p.m * p.k]
            .chunks_exact(p.k)
            .zip(out.chunks_exact_mut(a_row_bytes))
        {
            let mut s = 0i32;
            for (j, &v) in row.iter().enumerate() {
                let u = v ^ flip;
                s = s.wrapping_add(i32::from(u));
                if layout == Layout::Avx2 {
                    dst[2 * j..2 * j + 2].copy_from_slice(&u16::from(u).to_le_bytes());
                } else {
                    dst[j] = u;
                }
            }
            row_sums.push(s);
        }
        let shift = if p.a_signed { 128 } else { 0 };
        Prepared {
            a: out,
            a_row_bytes,
            row_sums,
            zero: p.a_zero.values(zp, p.m, p.a_signed, shift),
        }
    }
}

/// Where a task writes: the `[m, n]` int32 output's address.
struct OutTile {
    addr: usize,
    n: usize,
}

impl OutTile {
    /// Row `i`'s columns `cols` of the output.
    ///
    /// # Safety
    /// The output holds `m * n` int32 with `i < m` and `cols.end <= n`, and no one else reads
    /// or writes these elements while the slice lives.
    #[allow(clippy::mut_from_ref)]
    unsafe fn row(&self, i: usize, cols: std::ops::Range<usize>) -> &mut [i32] {
        // SAFETY: the caller's guarantees.
        unsafe {
            std::slice::from_raw_parts_mut(
                (self.addr as *mut i32).add(i * self.n + cols.start),
                cols.len(),
            )
        }
    }
}

/// The int32 values `at..at + len` of a packed `b`'s tail.
fn tail_i32(packed: &[u8], at: usize, len: usize) -> Vec<i32> {
    packed[at..at + 4 * len]
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// One task: `rows x cols` of the output.
fn run_task(
    p: &IntMatmul,
    a: &Prepared,
    packed: &[u8],
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    out: &OutTile,
) {
    let layout = p.layout;
    let np = layout.padded_cols(p.n);
    let panel_end = layout.panel_bytes(p.k, p.n);
    let col_sums = tail_i32(packed, panel_end, np);
    let b_zero = tail_i32(packed, panel_end + 4 * np, np);
    let k = p.k as i32;
    // out = dot - za * colsum + (k * za - rowsum) * zb, per element (wrapping)
    let fix = |i: usize, j: usize, dot: i32| {
        let za = a.zero[i];
        dot.wrapping_sub(za.wrapping_mul(col_sums[j])).wrapping_add(
            k.wrapping_mul(za)
                .wrapping_sub(a.row_sums[i])
                .wrapping_mul(b_zero[j]),
        )
    };
    match layout {
        #[cfg(target_arch = "x86_64")]
        Layout::Vnni | Layout::Avx2 => {
            let panel_cols = layout.panel_cols();
            let panel_len = layout.padded_k(p.k) * panel_cols * layout.value_bytes();
            let mut dots = [[0i32; 32]; 8];
            let mut p0 = cols.start;
            while p0 < cols.end {
                let pc = panel_cols.min(cols.end - p0);
                let panel = &packed[p0 / panel_cols * panel_len..][..panel_len];
                let mut i = rows.start;
                while i < rows.end {
                    let r = (rows.end - i).min(x86::tile_rows(layout));
                    let a_rows = &a.a[i * a.a_row_bytes..(i + r) * a.a_row_bytes];
                    x86::tile(layout, a_rows, a.a_row_bytes, panel, r, &mut dots);
                    for (di, drow) in dots[..r].iter().enumerate() {
                        // SAFETY: row i + di < m and columns p0..p0 + pc <= n are this
                        // task's own (see the launch).
                        let o = unsafe { out.row(i + di, p0..p0 + pc) };
                        for (c, v) in o.iter_mut().enumerate() {
                            *v = fix(i + di, p0 + c, drow[c]);
                        }
                    }
                    i += r;
                }
                p0 += pc;
            }
        }
        _ => {
            // [k][n] signed values: each row of a against the columns, p-major
            let b = &packed[..p.k * p.n];
            let mut dots = vec![0i32; cols.len()];
            for i in rows {
                dots.iter_mut().for_each(|d| *d = 0);
                let ar = &a.a[i * a.a_row_bytes..][..p.k];
                for (pp, &av) in ar.iter().enumerate() {
                    let av = i32::from(av);
                    let brow = &b[pp * p.n + cols.start..pp * p.n + cols.end];
                    for (d, &bv) in dots.iter_mut().zip(brow) {
                        *d = d.wrapping_add(av * i32::from(bv as i8));
                    }
                }
                // SAFETY: row i < m and columns `cols` are this task's own (see the launch).
                let o = unsafe { out.row(i, cols.clone()) };
                for (c, v) in o.iter_mut().enumerate() {
                    *v = fix(i, cols.start + c, dots[c]);
                }
            }
        }
    }
}
