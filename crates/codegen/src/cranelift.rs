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

use std::collections::HashMap;

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    AbiParam, Block, Function, InstBuilder, MemFlagsData, Signature, Type, UserFuncName, Value,
    types,
};
use cranelift_codegen::isa::TargetFrontendConfig;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use tinygrad_dtype::{ConstValue, DType, Scalar};
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
pub const TWO_STREAM_MAX_BUFFERS: usize = 3;

/// Kernels whose output is smaller than this (bytes) run as one stream.
pub const TWO_STREAM_MIN_BYTES: usize = 4 << 20;

/// The positions of the outer `Range` and its `End` when the kernel's outer loop may run as two
/// interleaved streams: a loop over `[start, end)` whose each pass
/// runs iteration `i` of the first half and `i + half` of the second, so every buffer is read
/// (or written) at two places at once.
///
/// A core with more streams in flight keeps more DRAM requests outstanding: on the development
/// machine (AMD EPYC, Zen 2, 2 threads; paired same-process comparisons, medians of 60)
/// `relu` of 9.4M floats ran 1.00-1.14x as fast, `a + b` of 16M 0.99-1.10x and `a * b + a`
/// (3 buffers) 1.01-1.10x, but with 4 buffers (`a * b + c`) 0.98-1.00x, with 5 0.97-0.98x and
/// with 6 0.86-0.88x (too many streams per core), hence at most [`TWO_STREAM_MAX_BUFFERS`]. Only a kernel with one loop (its outer one, over
/// output elements), no accumulators or conditional blocks, and an output of at least
/// [`TWO_STREAM_MIN_BYTES`] (smaller data stays in the caches, where streams do not matter).
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

impl<'a> Ctx<'a> {
    fn i(&mut self) -> cranelift_frontend::FuncInstBuilder<'_, 'a> {
        self.b.ins()
    }

    fn val(&mut self, u: &UOp) -> Result<Value, String> {
        if let Some(v) = self.vals.get(u) {
            return Ok(*v);
        }
        if u.op() == Ops::Const {
            let v = self.constant(u)?;
            self.vals.insert(u.clone(), v);
            return Ok(v);
        }
        Err(format!("{} used before it is defined", u.op()))
    }

    fn constant(&mut self, u: &UOp) -> Result<Value, String> {
        let c = u.as_const().ok_or("const without value")?;
        if u.dtype().count() > 1 {
            let vty = clif_type(u.dtype())?;
            let lane = if u.dtype().is_bool() {
                self.b
                    .ins()
                    .iconst(types::I32, if c.as_bool() { -1 } else { 0 })
            } else {
                let sc = UOp::cnst(u.dtype().scalar(), c);
                self.constant(&sc)?
            };
            return Ok(self.b.ins().splat(vty, lane));
        }
        let ty = clif_type(u.dtype())?;
        Ok(match ty {
            types::F32 => self.b.ins().f32const(c.as_f64() as f32),
            types::F64 => self.b.ins().f64const(c.as_f64()),
            _ if u.dtype().is_float() => {
                let b = c.to_le_bytes(u.dtype().scalar());
                let bits = u16::from_le_bytes([b[0], b[1]]) as i64;
                self.b.ins().iconst(ty, bits)
            }
            _ => {
                let bits = match c {
                    ConstValue::UInt(x) => x as i64,
                    other => other.as_i64(),
                };
                let bits = if ty == types::I64 {
                    bits
                } else {
                    bits & ((1i64 << ty.bits()) - 1)
                };
                self.b.ins().iconst(ty, bits)
            }
        })
    }

    fn emit(&mut self, u: &UOp) -> Result<(), String> {
        let v = match u.op() {
            Ops::Const => self.constant(u)?,
            Ops::DefineGlobal => {
                let slot = u.arg().as_int().ok_or("DefineGlobal needs a slot")?;
                let flags = MemFlagsData::trusted();
                self.b
                    .ins()
                    .load(types::I64, flags, self.bufs, (slot * 8) as i32)
            }
            Ops::DefineVar => {
                // the launcher passes each variable's value (an i64) after the buffer addresses
                let Arg::Var(name, _, _) = u.arg() else {
                    return Err("DefineVar needs a Var argument".into());
                };
                let k = crate::program::var_index(self.vars, name)?;
                let flags = MemFlagsData::trusted();
                let word = ((self.globals + k) * 8) as i32;
                let v = self.b.ins().load(types::I64, flags, self.bufs, word);
                match clif_type(u.dtype())? {
                    types::I64 => v,
                    ty => self.b.ins().ireduce(ty, v),
                }
            }
            Ops::DefineReg => {
                let ty = clif_type(u.dtype().base())?;
                let var = self.b.declare_var(ty);
                self.regs.insert(u.clone(), (var, ty));
                return Ok(());
            }
            Ops::Range => return self.open_loop(u),
            Ops::End => return self.close_loop(),
            Ops::Index => {
                if self.regs.contains_key(u.s(0)) {
                    return Ok(()); // register access: handled by Load/Store
                }
                let base = self.val(u.s(0))?;
                let size = u.dtype().base().itemsize() as i64;
                // `x + c`: the constant part becomes the access's immediate offset.
                let (x, c) = match (u.s(1).op(), u.s(1).src().get(1).and_then(|c| c.as_int())) {
                    (Ops::Add, Some(c)) if (c * size).abs() < i32::MAX as i64 / 2 => {
                        (u.s(1).s(0), c)
                    }
                    _ => (u.s(1), 0),
                };
                let idx = self.val(x)?;
                let off = match size {
                    1 => idx,
                    s if s > 0 && (s as u64).is_power_of_two() => {
                        self.b.ins().ishl_imm_u(idx, i64::from(s.trailing_zeros()))
                    }
                    s => self.b.ins().imul_imm_s(idx, s),
                };
                if c != 0 {
                    self.offsets.insert(u.clone(), (c * size) as i32);
                }
                self.b.ins().iadd(base, off)
            }
            Ops::Load => return self.load(u),
            Ops::Store => return self.store(u),
            Ops::Cast => self.cast(u)?,
            Ops::Bitcast => {
                let x = self.val(u.s(0))?;
                let ty = clif_type(u.dtype())?;
                if ty == clif_type(u.s(0).dtype())? {
                    x // e.g. float16 <-> int16: both are 16-bit integers here
                } else {
                    self.b.ins().bitcast(ty, lane_flags(), x)
                }
            }
            op if op.is_alu() => self.alu(u)?,
            Ops::Vectorize => self.vectorize(u)?,
            Ops::Gep => {
                let x = self.val(u.s(0))?;
                let lane = u.arg().as_int().ok_or("Gep needs a lane")? as u8;
                let v = self.b.ins().extractlane(x, lane);
                if u.dtype().is_bool() {
                    // lane mask -> bool 0/1
                    self.b.ins().icmp_imm_s(IntCC::NotEqual, v, 0)
                } else {
                    v
                }
            }
            Ops::Sink | Ops::Noop => return Ok(()),
            op => return Err(format!("{op} is not supported by the Cranelift renderer")),
        };
        self.vals.insert(u.clone(), v);
        Ok(())
    }

    fn open_loop(&mut self, r: &UOp) -> Result<(), String> {
        let size = self.val(r.s(0))?;
        let (lo, hi) = if self.first_loop
            && !matches!(r.arg(), Arg::Range(_, tinygrad_uop::AxisKind::Reduce))
        {
            // The outermost output loop runs over the launcher's [start, end) slice.
            let hi = self.b.ins().smin(self.end, size);
            (self.start, hi)
        } else {
            (self.b.ins().iconst(types::I64, 0), size)
        };
        self.first_loop = false;
        let state = self.loop_header(lo, hi);
        self.vals.insert(r.clone(), state.counter);
        self.loops.push(state);
        Ok(())
    }

    /// Starts a loop whose counter runs from `lo` while below `bound`: the header block (the
    /// counter its parameter) and the exit block, leaving the builder in the (sealed) body.
    fn loop_header(&mut self, lo: Value, bound: Value) -> LoopState {
        let header = self.b.create_block();
        let body = self.b.create_block();
        let exit = self.b.create_block();
        let counter = self.b.append_block_param(header, types::I64);
        self.b.ins().jump(header, &[lo.into()]);
        self.b.switch_to_block(header);
        let go = self.b.ins().icmp(IntCC::SignedLessThan, counter, bound);
        self.b.ins().brif(go, body, &[], exit, &[]);
        self.b.switch_to_block(body);
        self.b.seal_block(body);
        LoopState {
            header,
            exit,
            counter,
        }
    }

    /// The outer loop `r` (over the launcher's `[start, end)`) with body `body`, as two streams:
    /// iteration `i` of the first half and iteration `i + half` of the second run in the same
    /// pass of the loop, so each core reads and writes twice as many streams at once.
    fn two_stream_loop(&mut self, r: &UOp, body: &[UOp]) -> Result<(), String> {
        let size = self.val(r.s(0))?;
        let hi = self.b.ins().smin(self.end, size);
        let lo = self.start;
        let n = self.b.ins().isub(hi, lo);
        let n1 = self.b.ins().iadd_imm_s(n, 1);
        let half = self.b.ins().sshr_imm_s(n1, 1);
        let mid = self.b.ins().iadd(lo, half);
        self.first_loop = false;
        let state = self.loop_header(lo, mid);
        let counter = state.counter;
        let second = self.b.create_block();
        let next = self.b.create_block();
        self.vals.insert(r.clone(), counter);
        for u in body {
            self.emit(u)?;
        }
        let other = self.b.ins().iadd(counter, half);
        let has_other = self.b.ins().icmp(IntCC::SignedLessThan, other, hi);
        self.b.ins().brif(has_other, second, &[], next, &[]);
        self.b.switch_to_block(second);
        self.b.seal_block(second);
        for u in body {
            self.vals.remove(u);
            self.offsets.remove(u);
        }
        self.vals.insert(r.clone(), other);
        for u in body {
            self.emit(u)?;
        }
        self.b.ins().jump(next, &[]);
        self.b.switch_to_block(next);
        self.b.seal_block(next);
        self.loops.push(state);
        self.close_loop()
    }

    fn close_loop(&mut self) -> Result<(), String> {
        let l = self.loops.pop().ok_or("End without Range")?;
        let next = self.b.ins().iadd_imm_s(l.counter, 1);
        self.b.ins().jump(l.header, &[next.into()]);
        self.b.seal_block(l.header);
        self.b.switch_to_block(l.exit);
        self.b.seal_block(l.exit);
        Ok(())
    }

    fn load(&mut self, u: &UOp) -> Result<(), String> {
        let index = u.s(0);
        if let Some(&(var, _)) = self.regs.get(index.s(0)) {
            let v = self.b.use_var(var);
            self.vals.insert(u.clone(), v);
            return Ok(());
        }
        // A bool vector is 4 bytes in memory (0/1 each): loaded as one i32, widened to a lane
        // mask after the (possibly gated) load.
        let bool_vec = u.dtype().is_bool() && u.dtype().count() == 4;
        let ty = if bool_vec {
            types::I32
        } else {
            clif_type(u.dtype())?
        };
        let addr = self.val(index)?;
        let flags = mem_flags(u.dtype());
        let offset = self.offsets.get(index).copied().unwrap_or(0);
        let v = if index.src().len() > 2 {
            // Gated load: only touch memory when the condition holds.
            let cond = self.val(index.s(2))?;
            let do_load = self.b.create_block();
            let join = self.b.create_block();
            let res = self.b.append_block_param(join, ty);
            let zero = zero_of(&mut self.b, ty);
            self.b.ins().brif(cond, do_load, &[], join, &[zero.into()]);
            self.b.switch_to_block(do_load);
            self.b.seal_block(do_load);
            let loaded = self.b.ins().load(ty, flags, addr, offset);
            self.b.ins().jump(join, &[loaded.into()]);
            self.b.switch_to_block(join);
            self.b.seal_block(join);
            res
        } else {
            self.b.ins().load(ty, flags, addr, offset)
        };
        let v = if bool_vec {
            bool_bytes_to_mask(&mut self.b, v)
        } else {
            v
        };
        self.vals.insert(u.clone(), v);
        Ok(())
    }

    fn store(&mut self, u: &UOp) -> Result<(), String> {
        let index = u.s(0);
        let value = self.val(u.s(1))?;
        if let Some(&(var, _)) = self.regs.get(index.s(0)) {
            self.b.def_var(var, value);
            return Ok(());
        }
        let addr = self.val(index)?;
        let offset = self.offsets.get(index).copied().unwrap_or(0);
        let dt = u.s(1).dtype();
        let value = if dt.is_bool() && dt.count() == 4 {
            mask_to_bool_bytes(&mut self.b, value)
        } else {
            value
        };
        self.b.ins().store(mem_flags(dt), value, addr, offset);
        Ok(())
    }

    /// A vector from lane values: a splat when all lanes are the same value. `bool` lanes
    /// (`i8` 0/1) become lane masks.
    fn vectorize(&mut self, u: &UOp) -> Result<Value, String> {
        let vty = clif_type(u.dtype())?;
        let mut lanes = Vec::with_capacity(u.src().len());
        for s in u.src() {
            let v = self.val(s)?;
            let v = if u.dtype().is_bool() {
                let wide = self.b.ins().uextend(types::I32, v);
                self.b.ins().ineg(wide)
            } else {
                v
            };
            lanes.push(v);
        }
        if u.src().iter().all(|s| s == u.s(0)) {
            return Ok(self.b.ins().splat(vty, lanes[0]));
        }
        let mut acc = self.b.ins().splat(vty, lanes[0]);
        for (i, l) in lanes.iter().enumerate().skip(1) {
            acc = self.b.ins().insertlane(acc, *l, i as u8);
        }
        Ok(acc)
    }

    fn cast(&mut self, u: &UOp) -> Result<Value, String> {
        let from = u.s(0).dtype();
        let to = u.dtype();
        let x = self.val(u.s(0))?;
        let (fty, tty) = (clif_type(from)?, clif_type(to)?);
        let half = |d: DType| matches!(d.scalar(), DType::FLOAT16 | DType::BFLOAT16);
        if half(from) || half(to) {
            return self.half_cast(from, to, x);
        }
        if from.is_bool() && from.count() > 1 {
            debug_assert!(
                matches!(to.kind(), Scalar::Float32 | Scalar::Int32),
                "vector bool casts are to float32/int32 (opt::vector_native)"
            );
            // Lane masks (0 or all ones) to 0/1: the bits of one, masked.
            let one = if to.is_float() {
                let f = self.i().f32const(1.0);
                let v = self.i().splat(types::F32X4, f);
                self.i().bitcast(types::I32X4, lane_flags(), v)
            } else {
                let i = self.i().iconst(types::I32, 1);
                self.i().splat(types::I32X4, i)
            };
            let bits = self.i().band(x, one);
            return Ok(if to.is_float() {
                self.i().bitcast(types::F32X4, lane_flags(), bits)
            } else {
                bits
            });
        }
        if to.is_bool() {
            return Ok(if from.is_float() {
                let z = zero_of(&mut self.b, fty);
                self.i().fcmp(FloatCC::NotEqual, x, z)
            } else {
                self.i().icmp_imm_s(IntCC::NotEqual, x, 0)
            });
        }
        if from.is_float() && to.is_float() {
            return Ok(match (fty.bits(), tty.bits()) {
                (a, b) if a < b => self.i().fpromote(tty, x),
                (a, b) if a > b => self.i().fdemote(tty, x),
                _ => x,
            });
        }
        if from.is_float() {
            // truncate toward zero in i64 (saturating), then wrap to the target width
            let wide = if to.kind() == Scalar::UInt64 {
                let as_s = self.i().fcvt_to_sint_sat(types::I64, x);
                let as_u = self.i().fcvt_to_uint_sat(types::I64, x);
                let lim = if fty == types::F32 {
                    self.i().f32const(9.223_372e18)
                } else {
                    self.i().f64const(9.223_372_036_854_776e18)
                };
                let big = self.i().fcmp(FloatCC::GreaterThanOrEqual, x, lim);
                self.i().select(big, as_u, as_s)
            } else {
                self.i().fcvt_to_sint_sat(types::I64, x)
            };
            return Ok(if tty == types::I64 {
                wide
            } else {
                self.i().ireduce(tty, wide)
            });
        }
        // from int/bool
        let signed = from.is_int() && !from.is_unsigned();
        if to.is_float() {
            return Ok(if signed {
                self.i().fcvt_from_sint(tty, x)
            } else {
                self.i().fcvt_from_uint(tty, x)
            });
        }
        Ok(match fty.bits().cmp(&tty.bits()) {
            std::cmp::Ordering::Less if signed => self.i().sextend(tty, x),
            std::cmp::Ordering::Less => self.i().uextend(tty, x),
            std::cmp::Ordering::Greater => self.i().ireduce(tty, x),
            std::cmp::Ordering::Equal => x,
        })
    }

    /// Conversions between a half type and `float32` (the only ones left after emulate.rs), as
    /// integer bit manipulation with round-to-nearest-even, like the hardware instructions.
    fn half_cast(&mut self, from: DType, to: DType, x: Value) -> Result<Value, String> {
        let (i32t, f32t) = (types::I32, types::F32);
        match (from.scalar(), to.scalar()) {
            (DType::BFLOAT16, DType::FLOAT32) => {
                let w = self.i().uextend(i32t, x);
                let w = self.i().ishl_imm_u(w, 16);
                Ok(self.i().bitcast(f32t, MemFlagsData::new(), w))
            }
            (DType::FLOAT32, DType::BFLOAT16) => {
                let u = self.i().bitcast(i32t, MemFlagsData::new(), x);
                let lsb = self.i().ushr_imm_u(u, 16);
                let lsb = self.i().band_imm_s(lsb, 1);
                let r = self.i().iadd_imm_s(u, 0x7fff);
                let r = self.i().iadd(r, lsb);
                let r = self.i().ushr_imm_u(r, 16);
                let q = self.i().ushr_imm_u(u, 16);
                let q = self.i().bor_imm_s(q, 0x40); // NaN stays a (quiet) NaN
                let is_nan = self.i().fcmp(FloatCC::Unordered, x, x);
                let r = self.i().select(is_nan, q, r);
                Ok(self.i().ireduce(types::I16, r))
            }
            (DType::FLOAT16, DType::FLOAT32) => {
                let h = self.i().uextend(i32t, x);
                let sign = self.i().band_imm_s(h, 0x8000);
                let sign = self.i().ishl_imm_u(sign, 16);
                let em = self.i().band_imm_s(h, 0x7fff);
                // normal: rebias the exponent
                let normal = self.i().ishl_imm_u(em, 13);
                let normal = self.i().iadd_imm_s(normal, (127 - 15) << 23);
                // inf / NaN: all-ones exponent, mantissa kept
                let mant = self.i().band_imm_s(em, 0x3ff);
                let mant = self.i().ishl_imm_u(mant, 13);
                let infnan = self.i().bor_imm_s(mant, 0x7f80_0000);
                // subnormal (and zero): em * 2^-24 exactly
                let fem = self.i().fcvt_from_uint(f32t, em);
                let scale = self.i().f32const(2f32.powi(-24));
                let sub = self.i().fmul(fem, scale);
                let sub = self.i().bitcast(i32t, MemFlagsData::new(), sub);
                let is_sub = self.i().icmp_imm_s(IntCC::UnsignedLessThan, em, 0x400);
                let is_inf = self
                    .i()
                    .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, em, 0x7c00);
                let r = self.i().select(is_sub, sub, normal);
                let r = self.i().select(is_inf, infnan, r);
                let r = self.i().bor(r, sign);
                Ok(self.i().bitcast(f32t, MemFlagsData::new(), r))
            }
            (DType::FLOAT32, DType::FLOAT16) => {
                let u = self.i().bitcast(i32t, MemFlagsData::new(), x);
                let sign = self.i().ushr_imm_u(u, 16);
                let sign = self.i().band_imm_s(sign, 0x8000);
                let a = self.i().band_imm_s(u, 0x7fff_ffff);
                // normal: rebias, round to nearest even on the 13 dropped bits
                let odd = self.i().ushr_imm_u(a, 13);
                let odd = self.i().band_imm_s(odd, 1);
                let n = self.i().iadd_imm_s(a, ((15 - 127) << 23) + 0xfff);
                let n = self.i().iadd(n, odd);
                let normal = self.i().ushr_imm_u(n, 13);
                // subnormal: adding 0.5 aligns the bits; the FPU rounds to nearest even
                let af = self.i().bitcast(f32t, MemFlagsData::new(), a);
                let half = self.i().f32const(0.5);
                let s = self.i().fadd(af, half);
                let s = self.i().bitcast(i32t, MemFlagsData::new(), s);
                let sub = self.i().iadd_imm_s(s, -0x3f00_0000);
                let is_sub = self.i().icmp_imm_s(IntCC::UnsignedLessThan, a, 0x3880_0000);
                let overflow =
                    self.i()
                        .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, a, 0x477f_f000);
                let is_nan = self
                    .i()
                    .icmp_imm_s(IntCC::UnsignedGreaterThan, a, 0x7f80_0000);
                let inf = self.i().iconst(i32t, 0x7c00);
                let nan = self.i().iconst(i32t, 0x7e00);
                let r = self.i().select(is_sub, sub, normal);
                let r = self.i().select(overflow, inf, r);
                let r = self.i().select(is_nan, nan, r);
                let r = self.i().bor(r, sign);
                Ok(self.i().ireduce(types::I16, r))
            }
            (f, t) => Err(format!(
                "cast {f:?} -> {t:?} must go through float32 (emulate pass)"
            )),
        }
    }

    fn alu(&mut self, u: &UOp) -> Result<Value, String> {
        let op = u.op();
        let srcs: Vec<Value> = u
            .src()
            .iter()
            .map(|s| self.val(s))
            .collect::<Result<_, _>>()?;
        let in_dt = u.s(0).dtype();
        let float = in_dt.is_float();
        let unsigned = in_dt.is_unsigned() || in_dt.is_bool();
        let ty = clif_type(in_dt)?;
        let (a, b) = (srcs[0], srcs.get(1).copied().unwrap_or(srcs[0]));
        Ok(match op {
            Ops::Add if float => self.i().fadd(a, b),
            Ops::Add => self.i().iadd(a, b),
            Ops::Sub if float => self.i().fsub(a, b),
            Ops::Sub => self.i().isub(a, b),
            Ops::Mul if float => self.i().fmul(a, b),
            Ops::Mul => self.i().imul(a, b),
            Ops::Neg if float => self.i().fneg(a),
            Ops::Neg => self.i().ineg(a),
            Ops::FDiv => self.i().fdiv(a, b),
            Ops::Recip => {
                let one = if ty.lane_type() == types::F32 {
                    self.i().f32const(1.0)
                } else {
                    self.i().f64const(1.0)
                };
                let one = if ty.is_vector() {
                    self.i().splat(ty, one)
                } else {
                    one
                };
                self.i().fdiv(one, a)
            }
            Ops::Sqrt => self.i().sqrt(a),
            Ops::Trunc if float => self.i().trunc(a),
            Ops::Round if float => self.i().nearest(a),
            Ops::Trunc | Ops::Round => a,
            Ops::Max if float => self.i().fmax(a, b),
            Ops::Max if unsigned => self.i().umax(a, b),
            Ops::Max => self.i().smax(a, b),
            Ops::IDiv | Ops::Mod if float => return Err(format!("{op} on float")),
            Ops::IDiv | Ops::Mod => match const_divisor(u) {
                Some(c) => {
                    // a u64's bounds may not fit vmax's i64: assume the worst there
                    let xmax = if unsigned && ty.bits() == 64 {
                        u64::MAX
                    } else {
                        u.s(0).vmax().max(0) as u64
                    };
                    self.divmod_const(op, a, c, xmax, ty)
                }
                None => self.divmod(op, a, b, ty, unsigned),
            },
            Ops::CmpLt if float => self.i().fcmp(FloatCC::LessThan, a, b),
            Ops::CmpLt if unsigned => self.i().icmp(IntCC::UnsignedLessThan, a, b),
            Ops::CmpLt => self.i().icmp(IntCC::SignedLessThan, a, b),
            Ops::CmpNe if float => self.i().fcmp(FloatCC::NotEqual, a, b),
            Ops::CmpNe => self.i().icmp(IntCC::NotEqual, a, b),
            Ops::CmpEq if float => self.i().fcmp(FloatCC::Equal, a, b),
            Ops::CmpEq => self.i().icmp(IntCC::Equal, a, b),
            Ops::And => self.i().band(a, b),
            Ops::Or => self.i().bor(a, b),
            Ops::Xor => self.i().bxor(a, b),
            Ops::Shl | Ops::Shr => self.shift(u, a, b, unsigned),
            Ops::Where if u.dtype().count() > 1 => {
                // lane mask select: the mask as the values' type, then a bitwise select
                let vty = clif_type(u.dtype())?;
                let mask = if vty == types::I32X4 {
                    srcs[0]
                } else {
                    self.i().bitcast(vty, lane_flags(), srcs[0])
                };
                self.i().bitselect(mask, srcs[1], srcs[2])
            }
            // A float `select` is lowered to a branch around a move on x86 (mispredicted half
            // the time on data like `relu`'s); through the integer registers it is a `cmov`.
            Ops::Where
                if matches!(self.b.func.dfg.value_type(srcs[1]), types::F32 | types::F64) =>
            {
                let fty = self.b.func.dfg.value_type(srcs[1]);
                let ity = if fty == types::F32 {
                    types::I32
                } else {
                    types::I64
                };
                let flags = MemFlagsData::new();
                let a = self.i().bitcast(ity, flags, srcs[1]);
                let b = self.i().bitcast(ity, flags, srcs[2]);
                let r = self.i().select(srcs[0], a, b);
                self.i().bitcast(fty, flags, r)
            }
            Ops::Where => self.i().select(srcs[0], srcs[1], srcs[2]),
            Ops::MulAcc if float => self.i().fma(srcs[0], srcs[1], srcs[2]),
            Ops::MulAcc => {
                let m = self.i().imul(srcs[0], srcs[1]);
                self.i().iadd(m, srcs[2])
            }
            op => {
                return Err(format!(
                    "{op} must be decomposed before Cranelift rendering"
                ));
            }
        })
    }

    /// `a << b` or `a >> b` with the IR's semantics for any amount: read as unsigned, amounts at
    /// or above the width give 0 (or -1 for `>>` of a negative signed value). Cranelift's shifts
    /// take the amount modulo the width, so a non-constant or too large amount is guarded.
    fn shift(&mut self, u: &UOp, a: Value, b: Value, unsigned: bool) -> Value {
        let ty = self.b.func.dfg.value_type(a);
        let lane = ty.lane_type();
        let bits = i64::from(ty.lane_bits());
        let shr = u.op() == Ops::Shr;
        // the amount is read in the shifted value's dtype (as `exec_alu` does): narrowed or
        // widened to its lane type
        let value_dt = u.s(0).dtype().scalar();
        let amount = u
            .s(1)
            .as_const()
            .map(|c| c.cast(value_dt).as_u64() & (u64::MAX >> (64 - bits)));
        let bty = self.b.func.dfg.value_type(b);
        let b = if bty.is_vector() {
            b
        } else if bty.bits() > lane.bits() {
            self.i().ireduce(lane, b)
        } else if bty.bits() < lane.bits() {
            self.i().uextend(lane, b)
        } else {
            b
        };
        if amount.is_some_and(|c| c < bits as u64) {
            return match (shr, unsigned) {
                (false, _) => self.i().ishl(a, b),
                (true, true) => self.i().ushr(a, b),
                (true, false) => self.i().sshr(a, b),
            };
        }
        if shr && !unsigned {
            // an arithmetic shift by min(amount, width - 1) fills with the sign
            let lim = self.i().iconst(lane, bits - 1);
            let amt = self.i().umin(b, lim);
            return self.i().sshr(a, amt);
        }
        let shifted = if shr {
            self.i().ushr(a, b)
        } else {
            self.i().ishl(a, b)
        };
        let in_range = self.i().icmp_imm_s(IntCC::UnsignedLessThan, b, bits);
        let zero = self.i().iconst(ty.lane_type(), 0);
        let zero = if ty.is_vector() {
            self.i().splat(ty, zero)
        } else {
            zero
        };
        self.i().select(in_range, shifted, zero)
    }

    /// `x // c` or `x % c` for a numerator known to be non-negative and a constant `c > 0` (see
    /// [`const_divisor`]): a shift or mask for powers of two, else a multiply by a "magic"
    /// reciprocal and a shift when that is exact for every `x <= xmax` (a hardware division
    /// costs 20-40 cycles, and index arithmetic divides in inner loops), else a plain division
    /// (no guards needed: `c` is neither 0 nor -1).
    fn divmod_const(&mut self, op: Ops, a: Value, c: u64, xmax: u64, ty: Type) -> Value {
        let bits = ty.bits();
        let is_div = op == Ops::IDiv;
        if c.is_power_of_two() {
            return if is_div {
                self.i().ushr_imm_u(a, c.trailing_zeros() as i64)
            } else {
                self.i().band_imm_s(a, (c - 1) as i64)
            };
        }
        let q = match magic_reciprocal(c, xmax, bits) {
            Some((m, s)) => {
                let m = self.i().iconst(ty, m as i64);
                let p = self.i().imul(a, m);
                self.i().ushr_imm_u(p, s as i64)
            }
            None => {
                let cv = self.i().iconst(ty, c as i64);
                if !is_div {
                    return self.i().urem(a, cv);
                }
                self.i().udiv(a, cv)
            }
        };
        if is_div {
            return q;
        }
        let qc = self.i().imul_imm_s(q, c as i64);
        self.i().isub(a, qc)
    }

    /// Total integer division/remainder: `x/0 = x%0 = 0`, `MIN/-1` wraps, never traps.
    fn divmod(&mut self, op: Ops, a: Value, b: Value, ty: Type, unsigned: bool) -> Value {
        let zero = self.i().iconst(ty, 0);
        let one = self.i().iconst(ty, 1);
        let is_zero = self.i().icmp_imm_s(IntCC::Equal, b, 0);
        if unsigned {
            let safe = self.i().select(is_zero, one, b);
            let r = if op == Ops::IDiv {
                self.i().udiv(a, safe)
            } else {
                self.i().urem(a, safe)
            };
            return self.i().select(is_zero, zero, r);
        }
        let is_m1 = self.i().icmp_imm_s(IntCC::Equal, b, -1);
        let bad = self.i().bor(is_zero, is_m1);
        let safe = self.i().select(bad, one, b);
        let r = if op == Ops::IDiv {
            self.i().sdiv(a, safe)
        } else {
            self.i().srem(a, safe)
        };
        let m1_res = if op == Ops::IDiv {
            self.i().ineg(a)
        } else {
            zero
        };
        let r = self.i().select(is_m1, m1_res, r);
        self.i().select(is_zero, zero, r)
    }
}

/// The divisor of a scalar integer `IDiv`/`Mod` node `u` when it is a positive constant and the
/// numerator is provably non-negative, so truncating division is plain unsigned division.
fn const_divisor(u: &UOp) -> Option<u64> {
    let dt = u.dtype();
    if dt.count() != 1 || !dt.is_int() || u.s(0).dtype() != dt {
        return None;
    }
    let c = u.s(1).as_int()?;
    (c > 0 && u.s(0).vmin() >= 0).then_some(c as u64)
}

/// A multiplier `m` and shift `s` with `x / c == (x * m) >> s` for every `0 <= x <= xmax`,
/// computed without overflowing `bits`-bit arithmetic; `None` when no such pair exists.
///
/// With `m = ceil(2^s / c)` and `e = m*c - 2^s` (`0 <= e < c`), `x*m / 2^s = x/c + x*e/(c*2^s)`;
/// the error term stays below `1/c` (so the floor is unchanged) when `x*e < 2^s`.
pub(crate) fn magic_reciprocal(c: u64, xmax: u64, bits: u32) -> Option<(u64, u32)> {
    if c < 2 || bits > 64 {
        return None;
    }
    let limit = 1u128 << bits;
    for s in 0..bits {
        let p = 1u128 << s;
        let m = p.div_ceil(c as u128);
        let e = m * c as u128 - p;
        if (xmax as u128) * e < p && (xmax as u128) * m < limit && m < limit {
            return Some((m as u64, s));
        }
    }
    None
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

#[cfg(test)]
mod tests {
    use super::magic_reciprocal;

    #[test]
    fn magic_reciprocal_is_exact_up_to_xmax() {
        for c in 2u64..300 {
            for xmax in [1u64, 255, 1000, 65_535, 1 << 20] {
                let Some((m, s)) = magic_reciprocal(c, xmax, 64) else {
                    panic!("no magic for c={c} xmax={xmax}");
                };
                let step = (xmax / 5000).max(1);
                let xs = (0..=xmax)
                    .step_by(step as usize)
                    .chain(xmax.saturating_sub(300)..=xmax);
                for x in xs {
                    assert_eq!((x * m) >> s, x / c, "c={c} x={x} m={m} s={s}");
                }
            }
        }
        // 32-bit: products must not overflow
        let (m, s) = magic_reciprocal(7, 1 << 12, 32).expect("7 below 2^12 in 32 bits");
        assert_eq!(
            magic_reciprocal(7, 1 << 20, 32),
            None,
            "2^20 * m overflows 32 bits"
        );
        assert!(((1u64 << 12) * m) < (1 << 32));
        for x in 0..=(1u64 << 12) {
            assert_eq!((x * m) >> s, x / 7);
        }
        // huge numerators have no exact 64-bit magic for 7
        assert_eq!(magic_reciprocal(7, u64::MAX, 64), None);
    }
}
