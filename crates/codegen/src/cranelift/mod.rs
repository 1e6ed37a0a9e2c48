//! The Cranelift renderer: a [`Program`] becomes a Cranelift IR function
//! `fn(bufs: *const *mut u8, start: i64, end: i64)` that runs the outermost output loop over
//! `start..end` (so a launcher can split it across threads) and everything else in full. `bufs`
//! holds the buffer addresses, one word per slot, then the value of each variable the kernel
//! reads (`Program::vars`, in order), one `i64` word each.
//!
//! Semantics chosen to be total (no traps, no UB) and to match constant folding
//! (`tinygrad_uop::exec_alu`): integer division/modulo by zero give 0, `MIN / -1` wraps,
//! float -> int casts truncate and saturate to `i64` before wrapping to the target width,
//! loads gated by a validity condition are not performed when it is false (they yield 0).
//!
//! Files: this one holds [`CraneliftRenderer`], the two-stream outer loop
//! ([`two_stream_body`]), the rendering state and the helpers shared by the others (types,
//! memory flags, bool masks); `emit` each linearized op (values, loops, loads, stores, vectors),
//! `alu` casts and ALU ops (division by constants through magic reciprocals).

mod alu;
mod emit;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    AbiParam, Block, Function, InstBuilder, MemFlagsData, Signature, Type, UserFuncName, Value,
    types,
};
use cranelift_codegen::isa::TargetFrontendConfig;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use tinygrad_dtype::{DType, Scalar};
use tinygrad_uop::{Arg, Ops, UOp};

use crate::{Program, RenderError, Renderer, TargetCaps};

/// Renders programs to Cranelift IR for the host CPU.
#[derive(Clone, Copy)]
pub struct CraneliftRenderer {
    /// The host's calling convention and pointer width (from the JIT's ISA).
    pub frontend: TargetFrontendConfig,
    /// Whether the ISA has fused multiply-add instructions (then float `a*b + c` is contracted;
    /// without them Cranelift's `fma` is a libm call).
    pub fma: bool,
    /// Whether large streaming kernels run their outer loop as two interleaved streams (see
    /// [`two_stream_body`]).
    pub two_streams: bool,
}

impl CraneliftRenderer {
    /// A renderer for the target described by `frontend` (from the JIT's ISA), without FMA
    /// contraction (see [`CraneliftRenderer::with_fma`]).
    pub fn new(frontend: TargetFrontendConfig) -> Self {
        CraneliftRenderer {
            frontend,
            fma: false,
            two_streams: false,
        }
    }

    /// The same renderer, contracting float `a*b + c` into `fma` when `fma` is true (the ISA
    /// must have FMA instructions).
    pub fn with_fma(self, fma: bool) -> Self {
        CraneliftRenderer { fma, ..self }
    }

    /// The same renderer, running the outer loop of large streaming kernels as two
    /// interleaved streams when `on` (see [`two_stream_body`]).
    pub fn with_two_streams(self, on: bool) -> Self {
        CraneliftRenderer {
            two_streams: on,
            ..self
        }
    }

    /// The signature of every kernel: `(bufs: i64 ptr, start: i64, end: i64)`.
    pub fn signature(&self) -> Signature {
        let mut sig = Signature::new(self.frontend.default_call_conv);
        for _ in 0..3 {
            sig.params.push(AbiParam::new(types::I64));
        }
        sig
    }
}

impl Renderer for CraneliftRenderer {
    type Output = Function;

    fn name(&self) -> &'static str {
        "cranelift"
    }

    fn caps(&self) -> TargetCaps {
        TargetCaps {
            transcendentals: false,
            half: false,
            fp8: false,
            fma: self.fma,
        }
    }

    fn render(&self, prog: &Program) -> Result<Function, RenderError> {
        let err = |m: String| RenderError {
            kernel: prog.name.clone(),
            message: m,
        };
        let mut func = Function::with_name_signature(UserFuncName::user(0, 0), self.signature());
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        b.seal_block(entry);
        let params = b.block_params(entry).to_vec();
        let mut cx = Ctx {
            b,
            vals: HashMap::new(),
            regs: HashMap::new(),
            loops: Vec::new(),
            bufs: params[0],
            start: params[1],
            end: params[2],
            first_loop: true,
            offsets: HashMap::new(),
            globals: prog.globals.len(),
            vars: &prog.vars,
        };
        match two_stream_body(prog).filter(|_| self.two_streams) {
            Some((rpos, epos)) => {
                for u in &prog.uops[..rpos] {
                    cx.emit(u).map_err(err)?;
                }
                cx.two_stream_loop(&prog.uops[rpos], &prog.uops[rpos + 1..epos])
                    .map_err(err)?;
                for u in &prog.uops[epos + 1..] {
                    cx.emit(u).map_err(err)?;
                }
            }
            None => {
                for u in &prog.uops {
                    cx.emit(u).map_err(err)?;
                }
            }
        }
        if !cx.loops.is_empty() {
            return Err(err("unclosed loop".into()));
        }
        cx.b.ins().return_(&[]);
        cx.b.finalize(self.frontend);
        Ok(func)
    }
}

/// Kernels with at most this many buffers (output included) may run as two streams.
// relu 9.4M 1.00-1.14x; 6 buffers 0.86x, on Zen 2 (see docs/performance.md)
pub const TWO_STREAM_MAX_BUFFERS: usize = 3;

/// Kernels whose output is smaller than this (bytes) run as one stream.
pub const TWO_STREAM_MIN_BYTES: usize = 4 << 20;

/// The positions of the outer `Range` and its `End` when the kernel's outer loop may run as two
/// interleaved streams: a loop over `[start, end)` whose each pass runs iteration `i` of the
/// first half and `i + half` of the second, so every buffer is read (or written) at two places
/// at once.
///
/// A core with more streams in flight keeps more DRAM requests outstanding: on the development
/// machine (AMD EPYC, Zen 2, 2 threads; paired same-process comparisons, medians of 60)
/// `relu` of 9.4M floats ran 1.00-1.14x as fast, `a + b` of 16M 0.99-1.10x and `a * b + a`
/// (3 buffers) 1.01-1.10x, but with 4 buffers (`a * b + c`) 0.98-1.00x, with 5 0.97-0.98x and
/// with 6 0.86-0.88x (too many streams per core), hence at most [`TWO_STREAM_MAX_BUFFERS`].
/// Only a kernel with one loop (its outer one, over output elements), no accumulators or
/// conditional blocks, and an output of at least [`TWO_STREAM_MIN_BYTES`] runs as two streams
/// (smaller data stays in the caches, where streams do not matter).
pub fn two_stream_body(prog: &Program) -> Option<(usize, usize)> {
    if prog.globals.len() > TWO_STREAM_MAX_BUFFERS || !prog.vars.is_empty() {
        return None;
    }
    let out_bytes = prog
        .extents
        .first()?
        .checked_mul(prog.globals.first()?.itemsize())?;
    if out_bytes < TWO_STREAM_MIN_BYTES {
        return None;
    }
    let mut ranges = (0..prog.uops.len()).filter(|&i| prog.uops[i].op() == Ops::Range);
    let (Some(rpos), None) = (ranges.next(), ranges.next()) else {
        return None;
    };
    if matches!(
        prog.uops[rpos].arg(),
        Arg::Range(_, tinygrad_uop::AxisKind::Reduce)
    ) || prog.uops.iter().any(|u| {
        matches!(
            u.op(),
            Ops::DefineReg | Ops::DefineLocal | Ops::If | Ops::EndIf | Ops::Barrier
        )
    }) {
        return None;
    }
    let epos = prog.uops.iter().position(|u| u.op() == Ops::End)?;
    (epos > rpos).then_some((rpos, epos))
}

struct LoopState {
    header: Block,
    exit: Block,
    counter: Value,
}

struct Ctx<'a> {
    b: FunctionBuilder<'a>,
    vals: HashMap<UOp, Value>,
    regs: HashMap<UOp, (Variable, Type)>,
    loops: Vec<LoopState>,
    bufs: Value,
    start: Value,
    end: Value,
    first_loop: bool,
    /// Constant byte offsets of `Index` nodes, folded into their loads and stores.
    offsets: HashMap<UOp, i32>,
    /// The number of buffer slots: variable `k`'s value is word `globals + k` of `bufs`.
    globals: usize,
    vars: &'a [(std::sync::Arc<str>, i64, i64)],
}

/// The Cranelift type holding a value of `dt` (bool is `i8` 0/1; pointers and index are `i64`).
/// Vectors of 4 32-bit lanes are `f32x4`/`i32x4`; a `bool` vector is an `i32x4` lane mask
/// (all ones for true), what vector comparisons produce.
pub fn clif_type(dt: DType) -> Result<Type, String> {
    if dt.is_ptr() {
        return Ok(types::I64);
    }
    if dt.count() != 1 {
        return match (dt.kind(), dt.count()) {
            (Scalar::Float32, 4) => Ok(types::F32X4),
            (Scalar::Int32 | Scalar::UInt32 | Scalar::Bool, 4) => Ok(types::I32X4),
            _ => Err(format!(
                "vector dtype {dt} is not supported by the Cranelift renderer"
            )),
        };
    }
    Ok(match dt.kind() {
        Scalar::Bool | Scalar::Int8 | Scalar::UInt8 => types::I8,
        // halves are stored and moved as 16-bit integers; arithmetic happens in f32 (emulate.rs)
        Scalar::Int16 | Scalar::UInt16 | Scalar::Float16 | Scalar::BFloat16 => types::I16,
        Scalar::Int32 | Scalar::UInt32 => types::I32,
        Scalar::Int64 | Scalar::UInt64 | Scalar::Index => types::I64,
        Scalar::Float32 => types::F32,
        Scalar::Float64 => types::F64,
        other => {
            return Err(format!(
                "dtype {other:?} is not supported by the Cranelift renderer yet"
            ));
        }
    })
}

/// Four bool bytes (one `i32`, lane 0 in the low byte) as an `i32x4` lane mask: a byte that is
/// not 0 is true, as the scalar path reads it.
fn bool_bytes_to_mask(b: &mut FunctionBuilder<'_>, bytes: Value) -> Value {
    let v = b.ins().scalar_to_vector(types::I32X4, bytes);
    let v = b.ins().bitcast(types::I8X16, lane_flags(), v);
    let v = b.ins().uwiden_low(v);
    let v = b.ins().uwiden_low(v);
    let zero = b.ins().iconst(types::I32, 0);
    let zero = b.ins().splat(types::I32X4, zero);
    b.ins().icmp(IntCC::NotEqual, v, zero)
}

/// An `i32x4` lane mask (each lane 0 or -1) as four bool bytes 0/1 in one `i32` (lane 0 in the
/// low byte): saturating narrows keep -1 as 0xff, and the `and` with 1 makes it 1.
fn mask_to_bool_bytes(b: &mut FunctionBuilder<'_>, mask: Value) -> Value {
    let v = b.ins().snarrow(mask, mask);
    let v = b.ins().snarrow(v, v);
    let one = b.ins().iconst(types::I8, 1);
    let one = b.ins().splat(types::I8X16, one);
    let v = b.ins().band(v, one);
    let v = b.ins().bitcast(types::I32X4, lane_flags(), v);
    b.ins().extractlane(v, 0)
}

fn zero_of(b: &mut FunctionBuilder<'_>, ty: Type) -> Value {
    if ty.is_vector() {
        let lane = zero_of(b, ty.lane_type());
        return b.ins().splat(ty, lane);
    }
    match ty {
        types::F32 => b.ins().f32const(0.0),
        types::F64 => b.ins().f64const(0.0),
        _ => b.ins().iconst(ty, 0),
    }
}

/// Memory flags of a global load or store of `dt`: scalars are naturally aligned; vectors are
/// only element-aligned (their index can be any element).
fn mem_flags(dt: DType) -> MemFlagsData {
    if dt.count() > 1 {
        MemFlagsData::new().with_notrap()
    } else {
        MemFlagsData::trusted()
    }
}

/// Flags for bitcasts, which must name the lane order when vector lane types change.
fn lane_flags() -> MemFlagsData {
    MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little)
}
