//! Zero padding of planes as one native CPU kernel ([`PadPlanes`]): a convolution's padded input,
//! realized before its windows are read. The IR computes a padded element as a gated load — a
//! bounds test per element, per vector lane — at 1-3 ns an element; here each row is a copy
//! between zeroed borders.
//!
//! The kernel is a lazy graph node like the depthwise convolution ([`crate::depthwise`]): its
//! AST is [`pad_ast`] (a `Noop` carrying the [`PadPlanes`]; only the CPU device compiles it),
//! its slots the output `[planes, top + h + bottom, left + w + right]` and the input
//! `[planes, h, w]`, float32.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use tinygrad_dtype::DType;
use tinygrad_uop::{Arg, Ops, UOp};

use crate::buffer::Buffer;
use crate::cpu::lock_buffers;
use crate::device::{CompiledAst, DeviceError, Kernel};
use crate::thread_pool::global_pool;

/// What a padding kernel computes (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PadPlanes {
    /// Planes (batch rows x channels).
    pub planes: usize,
    /// Input rows per plane.
    pub h: usize,
    /// Input columns per row.
    pub w: usize,
    /// Zero rows before and after, zero columns before and after.
    pub pads: [usize; 4],
    id: u64,
}

impl PadPlanes {
    /// Padding `planes` planes of `h x w` with `top`, `bottom`, `left` and `right` zeros.
    ///
    /// # Panics
    /// If a size is 0.
    pub fn new(planes: usize, h: usize, w: usize, pads: [usize; 4]) -> PadPlanes {
        assert!(
            planes > 0 && h > 0 && w > 0,
            "PadPlanes: {planes} planes of {h}x{w}: sizes must be positive"
        );
        PadPlanes {
            planes,
            h,
            w,
            pads,
            id: 0,
        }
    }

    /// Output rows per plane.
    pub fn out_h(&self) -> usize {
        self.pads[0] + self.h + self.pads[1]
    }

    /// Output columns per row.
    pub fn out_w(&self) -> usize {
        self.pads[2] + self.w + self.pads[3]
    }
}

impl tinygrad_uop::Opaque for PadPlanes {
    fn id(&self) -> u64 {
        self.id
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn output_shape(&self) -> Option<Vec<usize>> {
        Some(vec![self.planes, self.out_h(), self.out_w()])
    }
}

/// The kernel AST of `pad` (see the module docs for its slots); equal ones share an AST.
pub fn pad_ast(pad: PadPlanes) -> UOp {
    // ids with the top five bits 11101 (the depthwise convolutions' start 1111, the int8
    // kernels' 101, the slot attentions' 11 then a count far below 2^59)
    static IDS: OnceLock<Mutex<HashMap<PadPlanes, u64>>> = OnceLock::new();
    let key = PadPlanes { id: 0, ..pad };
    let id = crate::native::payload_id(&IDS, key, 0b11101u64 << 59);
    UOp::new(
        Ops::Noop,
        DType::FLOAT32,
        vec![],
        Arg::Opaque(Arc::new(PadPlanes { id, ..pad })),
    )
}

/// A lazy `Native` graph node padding `input` (`[planes, h, w]` float32) as `ast` (built by
/// [`pad_ast`]) says.
///
/// # Panics
/// If `ast` is not a padding's.
pub fn pad_node(ast: &UOp, input: UOp) -> UOp {
    assert!(
        pad_of(ast).is_some(),
        "pad_node: the AST is not a padding kernel's"
    );
    UOp::new(Ops::Native, DType::FLOAT32, vec![input], ast.arg().clone())
}

/// The padding an AST built by [`pad_ast`] describes.
pub fn pad_of(ast: &UOp) -> Option<PadPlanes> {
    crate::native::payload_of(ast)
}

/// Whether the native kernel may run (`CPU_PAD` not `0`; off, convolutions pad in the IR).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    crate::native::switch_on("CPU_PAD", &ON)
}

/// The CPU kernel of a padding's AST (`None` for any other AST).
pub(crate) fn compile(ast: &UOp) -> Option<Result<CompiledAst, DeviceError>> {
    let spec = pad_of(ast)?;
    let name = format!("pad_{}_{}_{}", spec.planes, spec.out_h(), spec.out_w());
    let source = format!("native zero padding: {spec:?}");
    Some(Ok((Arc::new(PadKernel { spec, source }), name, 0.0)))
}

struct PadKernel {
    spec: PadPlanes,
    source: String,
}

/// Output floats below which a padding runs on the caller's thread.
const PARALLEL_MIN_FLOATS: usize = 1 << 16;

impl Kernel for PadKernel {
    fn launch(&self, bufs: &[Arc<Buffer>], vars: &[i64]) {
        assert!(vars.is_empty(), "a padding kernel has no variables");
        let s = self.spec;
        let (in_plane, out_plane) = (s.h * s.w, s.out_h() * s.out_w());
        // (checks every slot's dtype and that each buffer holds its extent)
        let locked = lock_buffers(
            bufs,
            &[DType::FLOAT32, DType::FLOAT32],
            &[s.planes * out_plane, s.planes * in_plane],
        );
        let (out, x) = (locked.addrs[0], locked.addrs[1]);
        let pool = global_pool();
        let tasks = if s.planes * out_plane < PARALLEL_MIN_FLOATS {
            1
        } else {
            s.planes.min(pool.threads() * 4)
        };
        let per_task = s.planes.div_ceil(tasks);
        pool.run(
            s.planes.div_ceil(per_task),
            Box::new(move |t| {
                let planes = t * per_task..((t + 1) * per_task).min(s.planes);
                // SAFETY: `lock_buffers` checked that the output holds planes * out_plane
                // floats and the input planes * in_plane, and keeps both locked until this
                // launch returns (the pool's `run` returns after every task); each task
                // writes only its own planes' outputs and reads the input, which the output
                // does not alias (a Native node's output is a fresh buffer).
                let (o, i) = unsafe {
                    (
                        std::slice::from_raw_parts_mut(
                            (out as *mut f32).add(planes.start * out_plane),
                            planes.len() * out_plane,
                        ),
                        std::slice::from_raw_parts(
                            (x as *const f32).add(planes.start * in_plane),
                            planes.len() * in_plane,
                        ),
                    )
                };
                for (op, ip) in o.chunks_exact_mut(out_plane).zip(i.chunks_exact(in_plane)) {
                    pad_plane(&s, ip, op);
                }
            }),
        );
        drop(locked);
    }

    fn source(&self) -> &str {
        &self.source
    }
}

/// One plane: zero rows, then each row between zero columns, then zero rows.
fn pad_plane(s: &PadPlanes, x: &[f32], out: &mut [f32]) {
    let ow = s.out_w();
    let [top, _, left, right] = s.pads;
    let (head, rest) = out.split_at_mut(top * ow);
    head.fill(0.0);
    let (body, tail) = rest.split_at_mut(s.h * ow);
    tail.fill(0.0);
    for (orow, irow) in body.chunks_exact_mut(ow).zip(x.chunks_exact(s.w)) {
        orow[..left].fill(0.0);
        orow[left..left + s.w].copy_from_slice(irow);
        orow[left + s.w..left + s.w + right].fill(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planes_are_padded_with_zeros() {
        let s = PadPlanes::new(2, 2, 3, [1, 2, 0, 1]);
        let x: Vec<f32> = (1..=12).map(|v| v as f32).collect();
        let mut out = vec![f32::NAN; 2 * s.out_h() * s.out_w()];
        for (o, i) in out
            .chunks_exact_mut(s.out_h() * s.out_w())
            .zip(x.chunks_exact(6))
        {
            pad_plane(&s, i, o);
        }
        #[rustfmt::skip]
        let want = [
            0., 0., 0., 0.,  1., 2., 3., 0.,  4., 5., 6., 0.,  0., 0., 0., 0.,  0., 0., 0., 0.,
            0., 0., 0., 0.,  7., 8., 9., 0.,  10., 11., 12., 0.,  0., 0., 0., 0.,  0., 0., 0., 0.,
        ];
        assert_eq!(out, want);
    }
}
