//! The WGSL renderer: a [`Program`] becomes a WebGPU compute shader (one `@compute` entry point
//! named [`ENTRY`]), for the `WEBGPU` device (`wgpu`), validated by `naga`.
//!
//! Bindings: global buffer slot `i` is `@group(0) @binding(i) var<storage, read_write> b<i>`;
//! a kernel with variables (`Program::vars`) reads their values from one more binding after the
//! buffers, `vars: array<i32>`.
//! A device buffer holds the host buffer's bytes verbatim, padded to a multiple of 4 bytes
//! ([`storage_bytes`]).
//!
//! Launch: like the PTX renderer, the program's outer output loops are flattened into one index
//! space (`grid.rs`) that the invocations stride over: invocation `g` of the
//! [`WORKGROUP_SIZE`]-wide workgroups runs elements `g, g + stride, ...` below the total, so any
//! number of workgroups is correct and [`launch_dims`] picks one (at most [`MAX_WORKGROUPS`]). A
//! program without such loops runs in invocation 0 alone.
//!
//! Grouped reductions (`grid.rs`'s `GroupPlan`, tinygrad's `GROUP`): when a kernel has few
//! outputs and a long reduction, each workgroup takes one output at a time and its
//! [`WORKGROUP_SIZE`] invocations split the reduction loop (invocation `l` runs iterations
//! `l, l + 64, ...`); their partial accumulators meet in a `var<workgroup>` array after a
//! `workgroupBarrier()`, and every invocation combines them in the same order, so all hold the
//! same value and write the same result.
//!
//! Dtypes WGSL lacks:
//! - `bool`, `int8`, `uint8`, `int16`, `uint16`, `float16`, `bfloat16` buffers are arrays of
//!   32-bit words holding 4 (or 2) elements each. A load extracts its element; a store clears
//!   and sets its bits with `atomicAnd`/`atomicOr` (the buffer is declared `atomic<u32>` when the
//!   kernel stores to it), since neighbouring invocations may write the same word. In registers
//!   narrow integers live in `i32`/`u32`, kept canonical (sign- or zero-extended from their
//!   width after every operation), and the halves as their 16 bits in a `u32`: they compute in
//!   `float32` (the emulate pass; `caps().half == false`), converted by bit manipulation with
//!   round-to-nearest-even, exactly (no reliance on `pack2x16float`, whose overflow behaviour
//!   WGSL leaves open).
//! - `int64`/`uint64` need the adapter feature `SHADER_INT64`, `float64` needs `SHADER_F64` and
//!   `SHADER_INT64` (its decomposed transcendentals use 64-bit integers). A renderer made
//!   without them refuses such kernels with a [`RenderError`] naming the dtype and the feature.
//! - `index` is rendered as `i32`: WebGPU buffers are far below 2^31 elements (one binding is
//!   at most 128 MiB on the software driver). An `index` constant outside `i32` is refused.
//!
//! Semantics match the Cranelift and PTX renderers and `tinygrad_uop::exec_alu` (`REF`):
//! integer division and modulo by zero give 0, float -> int casts truncate, saturate to `int64`
//! and wrap to the target width (NaN gives 0), shifts by the width or more give 0 (or -1),
//! `max` propagates NaN (NaN is tested on the bits, never with `x != x`, which a shader
//! compiler may fold away), non-finite and subnormal float constants are written as bit
//! patterns, and gated loads and stores never touch memory when the gate is off.
//! `fp8` arrives emulated (`uint8` bits, computed in float32: `crate::emulate`); `fp8` values,
//! vectors and the IR's GPU-specific ops (`Special`, `Barrier`, `Wmma`) give a [`RenderError`].

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

use tinygrad_dtype::{ConstValue, DType, Scalar};
use tinygrad_uop::{Arg, Ops, UOp};

use crate::grid::{GridPlan, GroupPlan, grid_plan, group_fold, group_plan};
use crate::{Program, RenderError, Renderer, TargetCaps};

/// The name of the shader's entry point.
pub const ENTRY: &str = "main";

/// Invocations per workgroup (`@workgroup_size`).
pub const WORKGROUP_SIZE: u32 = 64;

/// The most workgroups [`launch_dims`] asks for along x (WebGPU's default per-dimension limit);
/// larger index spaces loop.
pub const MAX_WORKGROUPS: u32 = 65535;

/// The largest grid index space mapped to invocations (a `u32` counter plus a stride must not
/// wrap); larger programs run in one invocation.
const MAX_GRID_TOTAL: u64 = 1 << 31;

/// Renders programs to WGSL for an adapter with (or without) 64-bit integer and float support.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WgslRenderer {
    int64: bool,
    float64: bool,
}

impl WgslRenderer {
    /// A renderer for an adapter with `SHADER_INT64` (`int64`) and `SHADER_F64` (`float64`;
    /// used only together with `int64`).
    pub fn new(int64: bool, float64: bool) -> Self {
        WgslRenderer { int64, float64 }
    }

    /// Whether `int64`/`uint64` kernels are rendered.
    pub fn int64(&self) -> bool {
        self.int64
    }

    /// Whether `float64` kernels are rendered.
    pub fn float64(&self) -> bool {
        self.float64 && self.int64
    }

    /// Why a kernel using `dt` can't be rendered by this renderer, if it can't.
    pub fn refuses(&self, dt: DType) -> Option<String> {
        match dt.kind() {
            Scalar::Int64 | Scalar::UInt64 if !self.int64 => Some(format!(
                "{dt} needs the WebGPU feature SHADER_INT64, which this adapter lacks"
            )),
            Scalar::Float64 if !self.float64() => Some(format!(
                "{dt} needs the WebGPU features SHADER_F64 and SHADER_INT64, which this adapter lacks"
            )),
            Scalar::Fp8E4M3 | Scalar::Fp8E5M2 => {
                Some(format!("{dt} is not supported by the WGSL renderer"))
            }
            _ => None,
        }
    }
}

/// The number of workgroups (along x) to dispatch for `prog`'s shader.
pub fn launch_dims(prog: &Program) -> u32 {
    let plan = plan_of(prog);
    if plan.ranges.is_empty() {
        return 1;
    }
    if group_plan(&prog.uops, &plan, wgsl_shareable).is_some() {
        // one output per workgroup
        return plan.total.clamp(1, u64::from(MAX_WORKGROUPS)) as u32;
    }
    plan.total
        .div_ceil(u64::from(WORKGROUP_SIZE))
        .clamp(1, u64::from(MAX_WORKGROUPS)) as u32
}

/// Accumulator dtypes a grouped reduction exchanges through workgroup memory (32-bit numbers;
/// halves compute in `float32`).
fn wgsl_shareable(dt: DType) -> bool {
    dt.count() == 1 && matches!(dt.kind(), Scalar::Float32 | Scalar::Int32 | Scalar::UInt32)
}

/// The bytes of the device buffer that holds `n` elements of `dt`: the host bytes, padded to a
/// multiple of 4 (at least 4: WebGPU has no empty bindings).
pub fn storage_bytes(dt: DType, n: usize) -> usize {
    (n * dt.itemsize()).div_ceil(4).max(1) * 4
}

fn plan_of(prog: &Program) -> GridPlan {
    let plan = grid_plan(&prog.uops);
    if plan.total > MAX_GRID_TOTAL {
        return GridPlan {
            ranges: Vec::new(),
            total: 1,
        };
    }
    plan
}

/// A WGSL value type (registers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    Bool,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
}

impl Ty {
    fn name(self) -> &'static str {
        match self {
            Ty::Bool => "bool",
            Ty::I32 => "i32",
            Ty::U32 => "u32",
            Ty::I64 => "i64",
            Ty::U64 => "u64",
            Ty::F32 => "f32",
            Ty::F64 => "f64",
        }
    }

    fn is_64(self) -> bool {
        matches!(self, Ty::I64 | Ty::U64 | Ty::F64)
    }

    /// The unsigned integer type of the same width (for bit operations).
    fn bits(self) -> Ty {
        if self.is_64() { Ty::U64 } else { Ty::U32 }
    }

    fn float_suffix(self) -> &'static str {
        if self == Ty::F64 { "lf" } else { "f" }
    }
}

fn is_half(dt: DType) -> bool {
    matches!(dt.kind(), Scalar::Float16 | Scalar::BFloat16)
}

/// Elements of `dt` per 32-bit word when its buffers are packed (1 when they are not).
fn per_word(dt: DType) -> u32 {
    match dt.itemsize() {
        1 => 4,
        2 => 2,
        _ => 1,
    }
}

impl Renderer for WgslRenderer {
    type Output = String;

    fn name(&self) -> &'static str {
        "wgsl"
    }

    fn caps(&self) -> TargetCaps {
        TargetCaps {
            transcendentals: false,
            half: false,
            fp8: false,
            fma: false,
        }
    }

    fn render(&self, prog: &Program) -> Result<String, RenderError> {
        let err = |m: String| RenderError {
            kernel: prog.name.clone(),
            message: m,
        };
        let plan = plan_of(prog);
        let group = group_plan(&prog.uops, &plan, wgsl_shareable);
        let mut cx = Ctx {
            r: *self,
            body: String::new(),
            depth: 1,
            names: HashMap::new(),
            accs: HashMap::new(),
            loops: Vec::new(),
            next: 0,
            grid_at: plan.ranges.iter().map(|&(i, _)| i).collect(),
            plan,
            group,
            shared: Vec::new(),
            helpers: BTreeSet::new(),
            atomic: HashSet::new(),
            globals: HashMap::new(),
            vars: prog.vars.clone(),
        };
        for (name, lo, hi) in &prog.vars {
            if *lo < i64::from(i32::MIN) || *hi > i64::from(i32::MAX) {
                return Err(err(format!(
                    "variable {name} has bounds [{lo}, {hi}], beyond WGSL's i32 index"
                )));
            }
        }
        // Which buffers the kernel stores to (packed ones become atomic words).
        for u in &prog.uops {
            if u.op() == Ops::Store && u.s(0).op() == Ops::Index {
                let base = u.s(0).s(0);
                if base.op() == Ops::DefineGlobal
                    && let Some(slot) = base.arg().as_int()
                {
                    cx.atomic.insert(slot as usize);
                }
            }
        }
        // fp8 arrives emulated (`TargetCaps::fp8` is false): its buffers hold the uint8 bits the
        // kernel reads and writes
        let globals: Vec<DType> = prog
            .globals
            .iter()
            .map(|d| if d.is_fp8() { DType::UINT8 } else { *d })
            .collect();
        for (slot, dt) in globals.iter().enumerate() {
            if dt.kind() == Scalar::Void {
                continue;
            }
            if let Some(why) = self.refuses(*dt) {
                return Err(err(why));
            }
            if per_word(*dt) == 1 {
                cx.atomic.remove(&slot);
            }
        }
        if cx.grid_at.is_empty() {
            cx.line(if cx.group.is_some() {
                "if (wid.x != 0u) { return; }"
            } else {
                "if (gid.x != 0u) { return; }"
            });
        }
        for (i, u) in prog.uops.iter().enumerate() {
            cx.emit(i, u)
                .map_err(|m| err(format!("{m} (at uop {i}: {})", u.op())))?;
        }
        if !cx.loops.is_empty() {
            return Err(err("unclosed loop".into()));
        }
        let mut out = String::new();
        let _ = writeln!(out, "// tinygrad-rs WGSL renderer: kernel {}", prog.name);
        for (slot, dt) in globals.iter().enumerate() {
            let elem = cx.storage_elem(slot, *dt).map_err(err)?;
            let _ = writeln!(
                out,
                "@group(0) @binding({slot}) var<storage, read_write> b{slot}: array<{elem}>;"
            );
        }
        if !prog.vars.is_empty() {
            // the launcher binds the variables' values (i32 each) after the buffers
            let _ = writeln!(
                out,
                "@group(0) @binding({}) var<storage, read_write> vars: array<i32>;",
                globals.len()
            );
        }
        for (name, ty) in &cx.shared {
            let _ = writeln!(
                out,
                "var<workgroup> {name}: array<{}, {WORKGROUP_SIZE}>;",
                ty.name()
            );
        }
        for h in &cx.helpers {
            out.push('\n');
            out.push_str(helper_source(h));
        }
        let group_ids = if cx.group.is_some() {
            ", @builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "\n@compute @workgroup_size({WORKGROUP_SIZE})\nfn {ENTRY}(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>{group_ids}) {{"
        );
        out.push_str(&cx.body);
        out.push_str("}\n");
        Ok(out)
    }
}

/// An open loop.
enum Loop {
    Plain,
    /// The grouped reduction loop (its partial accumulators are combined at its end).
    Grouped,
    /// A grid-mapped range; `outer` for the first one (which owns the grid-stride loop).
    Grid {
        outer: bool,
    },
}

/// How a global `Index` is accessed.
#[derive(Clone)]
struct Access {
    slot: usize,
    dtype: DType,
    /// The element index, as an `i32` expression.
    idx: String,
    /// The gate, when not always true.
    gate: Option<String>,
}

struct Ctx {
    r: WgslRenderer,
    body: String,
    depth: usize,
    /// The WGSL expression (a name or a literal) of each value.
    names: HashMap<UOp, String>,
    /// Accumulator variables of `DefineReg`s, and of `Index`es into them.
    accs: HashMap<UOp, String>,
    loops: Vec<Loop>,
    next: usize,
    plan: GridPlan,
    /// The reduction split across each workgroup, if any.
    group: Option<GroupPlan>,
    /// Workgroup arrays (name, element type), one per grouped accumulator.
    shared: Vec<(String, Ty)>,
    grid_at: HashSet<usize>,
    helpers: BTreeSet<&'static str>,
    /// Packed buffers the kernel stores to (declared `atomic<u32>`).
    atomic: HashSet<usize>,
    /// Global `Index`es.
    globals: HashMap<UOp, Access>,
    /// The kernel's variables (`Program::vars`): variable `k` is `vars[k]`.
    vars: Vec<(std::sync::Arc<str>, i64, i64)>,
}

impl Ctx {
    fn fresh(&mut self, prefix: &str) -> String {
        let n = self.next;
        self.next += 1;
        format!("{prefix}{n}")
    }

    fn line(&mut self, s: &str) {
        for _ in 0..self.depth {
            self.body.push_str("  ");
        }
        self.body.push_str(s);
        self.body.push('\n');
    }

    fn ty(&self, dt: DType) -> Result<Ty, String> {
        if dt.count() != 1 {
            return Err(format!(
                "vector dtype {dt} is not supported by the WGSL renderer"
            ));
        }
        if let Some(why) = self.r.refuses(dt) {
            return Err(why);
        }
        Ok(match dt.kind() {
            Scalar::Bool => Ty::Bool,
            Scalar::Int8 | Scalar::Int16 | Scalar::Int32 | Scalar::Index => Ty::I32,
            Scalar::UInt8
            | Scalar::UInt16
            | Scalar::UInt32
            | Scalar::Float16
            | Scalar::BFloat16 => Ty::U32,
            Scalar::Int64 => Ty::I64,
            Scalar::UInt64 => Ty::U64,
            Scalar::Float32 => Ty::F32,
            Scalar::Float64 => Ty::F64,
            other => {
                return Err(format!(
                    "dtype {other:?} is not supported by the WGSL renderer"
                ));
            }
        })
    }

    /// The array element type of buffer `slot`.
    fn storage_elem(&self, slot: usize, dt: DType) -> Result<String, String> {
        if dt.kind() == Scalar::Void {
            return Ok("u32".into());
        }
        if per_word(dt) > 1 {
            return Ok(if self.atomic.contains(&slot) {
                "atomic<u32>".into()
            } else {
                "u32".into()
            });
        }
        Ok(self.ty(dt)?.name().into())
    }

    /// The expression of `u`'s value.
    fn e(&self, u: &UOp) -> Result<String, String> {
        if u.op() == Ops::Const {
            let v = u.as_const().ok_or("Const without a value")?;
            return self.literal(v, u.dtype());
        }
        self.names
            .get(u)
            .cloned()
            .ok_or_else(|| format!("{} used before it is defined", u.op()))
    }

    /// Binds `expr` to a new `let` for `u`.
    fn def(&mut self, u: &UOp, expr: &str) -> Result<(), String> {
        let ty = self.ty(u.dtype())?;
        let name = self.fresh("v");
        self.line(&format!("let {name}: {} = {expr};", ty.name()));
        self.names.insert(u.clone(), name);
        Ok(())
    }

    /// The WGSL literal of constant `c` as a `dt` register value.
    fn literal(&self, c: ConstValue, dt: DType) -> Result<String, String> {
        let v = c.cast(dt);
        Ok(match self.ty(dt)? {
            Ty::Bool => v.as_bool().to_string(),
            Ty::I32 => {
                let x = v.as_i64();
                let x = i32::try_from(x)
                    .map_err(|_| format!("{dt} constant {x} does not fit in 32 bits"))?;
                int_lit(i64::from(x), "i", i64::from(i32::MIN))
            }
            Ty::U32 if is_half(dt) => {
                let b = v.to_le_bytes(dt);
                format!("0x{:04x}u", u16::from_le_bytes([b[0], b[1]]))
            }
            Ty::U32 => format!("{}u", v.as_u64() as u32),
            Ty::I64 => int_lit(v.as_i64(), "li", i64::MIN),
            Ty::U64 => format!("{}lu", v.as_u64()),
            Ty::F32 => {
                let x = v.as_f64() as f32;
                if x.is_normal() || (x == 0.0 && x.is_sign_positive()) {
                    paren_neg(format!("{x:?}f"))
                } else {
                    format!("bitcast<f32>(0x{:08x}u)", x.to_bits())
                }
            }
            Ty::F64 => {
                let x = v.as_f64();
                if x.is_normal() || (x == 0.0 && x.is_sign_positive()) {
                    paren_neg(format!("{x:?}lf"))
                } else {
                    format!("bitcast<f64>(0x{:016x}lu)", x.to_bits())
                }
            }
        })
    }

    fn emit(&mut self, i: usize, u: &UOp) -> Result<(), String> {
        match u.op() {
            Ops::Const | Ops::DefineGlobal | Ops::Sink | Ops::Noop => Ok(()),
            Ops::DefineVar => {
                let Arg::Var(name, _, _) = u.arg() else {
                    return Err("DefineVar needs a Var argument".into());
                };
                let k = crate::program::var_index(&self.vars, name)?;
                let expr = self.cast(&format!("vars[{k}]"), DType::INT32, u.dtype())?;
                self.def(u, &expr)
            }
            Ops::DefineReg => {
                let ty = self.ty(u.dtype().base())?;
                let name = self.fresh("acc");
                self.line(&format!("var {name}: {};", ty.name()));
                self.accs.insert(u.clone(), name);
                Ok(())
            }
            Ops::Range if self.grid_at.contains(&i) => self.open_grid(i, u),
            Ops::Range if self.group.as_ref().is_some_and(|g| g.range == i) => self.open_grouped(u),
            Ops::Range => self.open_loop(u),
            Ops::End => self.close_loop(),
            Ops::Index => self.index(u),
            Ops::Load => self.load(u),
            Ops::Store => self.store(u),
            Ops::Cast => {
                let a = self.e(u.s(0))?;
                let expr = self.cast(&a, u.s(0).dtype(), u.dtype())?;
                self.def(u, &expr)
            }
            Ops::Bitcast => {
                let expr = self.bitcast(u)?;
                self.def(u, &expr)
            }
            op if op.is_alu() => {
                let expr = self.alu(u)?;
                self.def(u, &expr)
            }
            op => Err(format!("{op} is not supported by the WGSL renderer yet")),
        }
    }

    fn open_loop(&mut self, r: &UOp) -> Result<(), String> {
        if self.ty(r.dtype())? != Ty::I32 {
            return Err(format!("a loop over {} is not supported", r.dtype()));
        }
        let size = self.e(r.s(0))?;
        let name = self.fresh("r");
        self.line(&format!(
            "for (var {name}: i32 = 0i; {name} < {size}; {name} = {name} + 1i) {{"
        ));
        self.depth += 1;
        self.names.insert(r.clone(), name);
        self.loops.push(Loop::Plain);
        Ok(())
    }

    /// The grouped reduction loop: invocation `lid.x` of the workgroup runs every
    /// [`WORKGROUP_SIZE`]th iteration from its own.
    fn open_grouped(&mut self, r: &UOp) -> Result<(), String> {
        if self.ty(r.dtype())? != Ty::I32 {
            return Err(format!("a loop over {} is not supported", r.dtype()));
        }
        let size = self.e(r.s(0))?;
        let name = self.fresh("r");
        self.line(&format!(
            "for (var {name}: i32 = i32(lid.x); {name} < {size}; {name} = {name} + {WORKGROUP_SIZE}i) {{"
        ));
        self.depth += 1;
        self.names.insert(r.clone(), name);
        self.loops.push(Loop::Grouped);
        Ok(())
    }

    /// After the grouped loop: each accumulator's partials go through a workgroup array, and
    /// every invocation folds them in the same order (the barrier after it keeps the next
    /// output's partials from overwriting them early).
    fn combine_group(&mut self) -> Result<(), String> {
        let accs = self
            .group
            .as_ref()
            .map(|g| g.accs.clone())
            .unwrap_or_default();
        let mut arrays = Vec::new();
        for (k, (reg, _)) in accs.iter().enumerate() {
            let ty = self.ty(reg.dtype().base())?;
            if !matches!(ty, Ty::F32 | Ty::I32 | Ty::U32) {
                return Err(format!("a grouped {} accumulator", ty.name()));
            }
            let acc = self.accs.get(reg).cloned().ok_or("unknown accumulator")?;
            let sh = format!("part{k}");
            self.line(&format!("{sh}[lid.x] = {acc};"));
            self.shared.push((sh.clone(), ty));
            arrays.push(sh);
        }
        self.line("workgroupBarrier();");
        for (k, ((reg, op), sh)) in accs.iter().zip(&arrays).enumerate() {
            let acc = self.accs[reg].clone();
            let dt = reg.dtype().base();
            let (a, b, folded) = group_fold(*op, dt, k);
            self.names.insert(a, acc.clone());
            self.names.insert(b, format!("{sh}[i]"));
            let expr = self.alu(&folded)?;
            self.line(&format!("{acc} = {sh}[0];"));
            self.line(&format!(
                "for (var i: u32 = 1u; i < {WORKGROUP_SIZE}u; i = i + 1u) {{"
            ));
            self.line(&format!("  {acc} = {expr};"));
            self.line("}");
        }
        self.line("workgroupBarrier();");
        Ok(())
    }

    /// A grid-mapped range: the first opens the grid-stride loop; each computes its index from
    /// the flat element index `g`.
    fn open_grid(&mut self, i: usize, r: &UOp) -> Result<(), String> {
        let pos = self
            .plan
            .ranges
            .iter()
            .position(|&(j, _)| j == i)
            .ok_or("grid range not in the plan")?;
        let outer = pos == 0;
        if outer {
            let total = self.plan.total;
            if self.group.is_some() {
                // one output per workgroup (uniform across it: the barriers need that)
                self.line(&format!(
                    "for (var g: u32 = wid.x; g < {total}u; g = g + nwg.x) {{"
                ));
            } else {
                self.line(&format!(
                    "for (var g: u32 = gid.x; g < {total}u; g = g + nwg.x * {WORKGROUP_SIZE}u) {{"
                ));
            }
            self.depth += 1;
        }
        let inner: u64 = self.plan.ranges[pos + 1..]
            .iter()
            .map(|&(_, s)| s)
            .product();
        let size = self.plan.ranges[pos].1;
        let mut expr = "g".to_string();
        if inner != 1 {
            expr = format!("({expr} / {inner}u)");
        }
        if !outer {
            expr = format!("({expr} % {size}u)");
        }
        let name = self.fresh("r");
        self.line(&format!("let {name}: i32 = i32({expr});"));
        self.names.insert(r.clone(), name);
        self.loops.push(Loop::Grid { outer });
        Ok(())
    }

    fn close_loop(&mut self) -> Result<(), String> {
        match self.loops.pop().ok_or("End without Range")? {
            Loop::Grid { outer: false } => {}
            Loop::Plain | Loop::Grid { outer: true } => {
                self.depth -= 1;
                self.line("}");
            }
            Loop::Grouped => {
                self.depth -= 1;
                self.line("}");
                self.combine_group()?;
            }
        }
        Ok(())
    }

    fn index(&mut self, u: &UOp) -> Result<(), String> {
        let base = u.s(0);
        if let Some(acc) = self.accs.get(base).cloned() {
            if u.s(1).as_int() != Some(0) {
                return Err("registers are indexed only at 0".into());
            }
            self.accs.insert(u.clone(), acc);
            return Ok(());
        }
        if base.op() != Ops::DefineGlobal {
            return Err(format!("Index into {} is not supported yet", base.op()));
        }
        let slot = base.arg().as_int().ok_or("DefineGlobal needs a slot")? as usize;
        let idx_u = u.s(1);
        let mut idx = self.e(idx_u)?;
        match self.ty(idx_u.dtype())? {
            Ty::I32 => {}
            Ty::U32 | Ty::I64 | Ty::U64 => idx = format!("i32({idx})"),
            t => return Err(format!("index of type {}", t.name())),
        }
        let gate = match u.src().get(2) {
            Some(g) if g.as_const().is_some_and(|c| c.as_bool()) => None,
            Some(g) => Some(self.e(g)?),
            None => None,
        };
        self.globals.insert(
            u.clone(),
            Access {
                slot,
                dtype: u.dtype().base(),
                idx,
                gate,
            },
        );
        Ok(())
    }

    /// The expression reading element `a.idx` of buffer `a.slot` (in register form).
    fn read(&mut self, a: &Access) -> Result<String, String> {
        let b = format!("b{}", a.slot);
        let n = per_word(a.dtype);
        if n == 1 {
            return Ok(format!("{b}[{}]", a.idx));
        }
        let word = format!("{b}[u32({}) >> {}u]", a.idx, n.trailing_zeros());
        let word = if self.atomic.contains(&a.slot) {
            format!("atomicLoad(&{word})")
        } else {
            word
        };
        let w = self.fresh("w");
        self.line(&format!("let {w}: u32 = {word};"));
        let bits = 32 / n;
        let sh = format!("((u32({}) & {}u) * {bits}u)", a.idx, n - 1);
        Ok(match a.dtype.kind() {
            Scalar::Bool => format!("(({w} >> {sh}) & 0xffu) != 0u"),
            Scalar::Int8 | Scalar::Int16 => {
                format!(
                    "(bitcast<i32>({w} << ({}u - {sh})) >> {}u)",
                    32 - bits,
                    32 - bits
                )
            }
            _ => format!("(({w} >> {sh}) & 0x{:x}u)", (1u64 << bits) - 1),
        })
    }

    fn load(&mut self, u: &UOp) -> Result<(), String> {
        let index = u.s(0);
        if let Some(acc) = self.accs.get(index).cloned() {
            return self.def(u, &acc);
        }
        let a = self
            .globals
            .get(index)
            .cloned()
            .ok_or("Load from an unknown index")?;
        let ty = self.ty(u.dtype())?;
        match a.gate.clone() {
            None => {
                let expr = self.read(&a)?;
                self.def(u, &expr)
            }
            Some(g) => {
                // The value when the gate is off: the alternative source, else 0.
                let alt = match u.src().get(1) {
                    Some(x) => self.e(x)?,
                    None => self.literal(ConstValue::Int(0), u.dtype())?,
                };
                let name = self.fresh("v");
                self.line(&format!("var {name}: {} = {alt};", ty.name()));
                self.line(&format!("if ({g}) {{"));
                self.depth += 1;
                let expr = self.read(&a)?;
                self.line(&format!("{name} = {expr};"));
                self.depth -= 1;
                self.line("}");
                self.names.insert(u.clone(), name);
                Ok(())
            }
        }
    }

    fn store(&mut self, u: &UOp) -> Result<(), String> {
        let index = u.s(0);
        let v = self.e(u.s(1))?;
        if let Some(acc) = self.accs.get(index).cloned() {
            self.line(&format!("{acc} = {v};"));
            return Ok(());
        }
        let a = self
            .globals
            .get(index)
            .cloned()
            .ok_or("Store to an unknown index")?;
        if let Some(g) = &a.gate {
            self.line(&format!("if ({g}) {{"));
            self.depth += 1;
        }
        let b = format!("b{}", a.slot);
        let n = per_word(a.dtype);
        if n == 1 {
            self.line(&format!("{b}[{}] = {v};", a.idx));
        } else {
            let bits = 32 / n;
            let mask = format!("0x{:x}u", (1u64 << bits) - 1);
            let val = match self.ty(a.dtype)? {
                Ty::Bool => format!("select(0u, 1u, {v})"),
                Ty::I32 => format!("(bitcast<u32>({v}) & {mask})"),
                _ => format!("({v} & {mask})"),
            };
            let (w, s) = (self.fresh("w"), self.fresh("s"));
            self.line(&format!(
                "let {w}: u32 = u32({}) >> {}u;",
                a.idx,
                n.trailing_zeros()
            ));
            self.line(&format!(
                "let {s}: u32 = (u32({}) & {}u) * {bits}u;",
                a.idx,
                n - 1
            ));
            self.line(&format!("atomicAnd(&{b}[{w}], ~({mask} << {s}));"));
            self.line(&format!("atomicOr(&{b}[{w}], {val} << {s});"));
        }
        if a.gate.is_some() {
            self.depth -= 1;
            self.line("}");
        }
        Ok(())
    }

    /// Re-canonicalizes a narrow integer held in a 32-bit register.
    fn canon(&self, e: String, dt: DType) -> String {
        match dt.kind() {
            Scalar::Int8 => format!("(({e} << 24u) >> 24u)"),
            Scalar::Int16 => format!("(({e} << 16u) >> 16u)"),
            Scalar::UInt8 => format!("({e} & 0xffu)"),
            Scalar::UInt16 => format!("({e} & 0xffffu)"),
            _ => e,
        }
    }

    fn helper(&mut self, name: &'static str) -> &'static str {
        self.helpers.insert(name);
        for dep in helper_deps(name) {
            self.helpers.insert(dep);
        }
        name
    }

    /// `cast<to>(a: from)` (see the module docs for the semantics).
    fn cast(&mut self, a: &str, from: DType, to: DType) -> Result<String, String> {
        let (ft, tt) = (self.ty(from)?, self.ty(to)?);
        if from == to {
            return Ok(a.to_string());
        }
        if to.is_bool() {
            if is_half(from) {
                let f = self.cast(a, from, DType::FLOAT32)?;
                return self.cast(&f, DType::FLOAT32, to);
            }
            let z = self.literal(ConstValue::Int(0), from)?;
            // `!(a == 0)`: naga's float `!=` is ordered (false for NaN, which is truthy).
            return Ok(format!("(!({a} == {z}))"));
        }
        if from.is_bool() {
            let one = self.literal(ConstValue::Int(1), to)?;
            let zero = self.literal(ConstValue::Int(0), to)?;
            return Ok(format!("select({zero}, {one}, {a})"));
        }
        if is_half(from) || is_half(to) {
            return Ok(match (from.kind(), to.kind()) {
                (Scalar::Float16, Scalar::Float32) => {
                    format!("{}({a})", self.helper("f16_to_f32"))
                }
                (Scalar::Float32, Scalar::Float16) => {
                    format!("{}({a})", self.helper("f32_to_f16"))
                }
                (Scalar::BFloat16, Scalar::Float32) => format!("bitcast<f32>({a} << 16u)"),
                (Scalar::Float32, Scalar::BFloat16) => {
                    format!("{}({a})", self.helper("f32_to_bf16"))
                }
                _ => {
                    let f = self.cast(a, from, DType::FLOAT32)?;
                    let f = format!("({f})");
                    self.cast(&f, DType::FLOAT32, to)?
                }
            });
        }
        Ok(match (from.is_float(), to.is_float()) {
            (true, true) => format!("{}({a})", tt.name()),
            (false, true) => format!("{}({a})", tt.name()),
            (true, false) => {
                let sfx = if ft == Ty::F64 { "f64" } else { "f32" };
                match tt {
                    Ty::I64 => {
                        let h = self.helper(if ft == Ty::F64 {
                            "ftoi64_f64"
                        } else {
                            "ftoi64_f32"
                        });
                        format!("{h}({a})")
                    }
                    Ty::U64 => {
                        let h = self.helper(if ft == Ty::F64 {
                            "ftou64_f64"
                        } else {
                            "ftou64_f32"
                        });
                        format!("{h}({a})")
                    }
                    _ => {
                        let h = self.helper(if sfx == "f64" {
                            "ftoi_lo_f64"
                        } else {
                            "ftoi_lo_f32"
                        });
                        let lo = format!("{h}({a}, {})", to.is_unsigned());
                        if tt == Ty::I32 {
                            self.canon(format!("bitcast<i32>({lo})"), to)
                        } else {
                            self.canon(lo, to)
                        }
                    }
                }
            }
            (false, false) => {
                let e = match (ft, tt) {
                    (x, y) if x == y => a.to_string(),
                    (Ty::I32, Ty::U32) => format!("bitcast<u32>({a})"),
                    (Ty::U32, Ty::I32) => format!("bitcast<i32>({a})"),
                    (Ty::I64, Ty::I32) => format!("i32({a})"),
                    (Ty::U64, Ty::U32) => format!("u32({a})"),
                    (Ty::I64, Ty::U32) => format!("bitcast<u32>(i32({a}))"),
                    (Ty::U64, Ty::I32) => format!("bitcast<i32>(u32({a}))"),
                    (Ty::I32, Ty::I64) => format!("i64({a})"),
                    (Ty::U32, Ty::U64) => format!("u64({a})"),
                    (Ty::I32, Ty::U64) => format!("bitcast<u64>(i64({a}))"),
                    (Ty::U32, Ty::I64) => format!("bitcast<i64>(u64({a}))"),
                    (Ty::I64, Ty::U64) => format!("bitcast<u64>({a})"),
                    (Ty::U64, Ty::I64) => format!("bitcast<i64>({a})"),
                    (x, y) => return Err(format!("cast {} -> {}", x.name(), y.name())),
                };
                if matches!(tt, Ty::I32 | Ty::U32) {
                    self.canon(e, to)
                } else {
                    e
                }
            }
        })
    }

    fn bitcast(&mut self, u: &UOp) -> Result<String, String> {
        let (from, to) = (u.s(0).dtype(), u.dtype());
        if from.itemsize() != to.itemsize() || from.is_bool() || to.is_bool() {
            return Err(format!("bitcast {from} -> {to}"));
        }
        let a = self.e(u.s(0))?;
        let (ft, tt) = (self.ty(from)?, self.ty(to)?);
        if ft == tt {
            // Same register type: only the canonical form may change (e.g. int16 <-> float16).
            return Ok(match (ft, from.itemsize()) {
                (Ty::I32, 2) | (Ty::I32, 1) | (Ty::U32, 2) | (Ty::U32, 1) => self.canon(a, to),
                _ => a,
            });
        }
        let e = format!("bitcast<{}>({a})", tt.name());
        Ok(match (ft, from.itemsize()) {
            // A sign-extended narrow value: keep its low bits only.
            (Ty::I32, 1) => self.canon(format!("(bitcast<u32>({a}) & 0xffu)"), to),
            (Ty::I32, 2) => {
                let low = format!("(bitcast<u32>({a}) & 0xffffu)");
                if tt == Ty::I32 {
                    self.canon(format!("bitcast<i32>({low})"), to)
                } else {
                    low
                }
            }
            (Ty::U32, 1 | 2) if tt == Ty::I32 => self.canon(e, to),
            _ => e,
        })
    }

    fn alu(&mut self, u: &UOp) -> Result<String, String> {
        let op = u.op();
        let dt = if op.is_comparison() {
            u.s(0).dtype()
        } else {
            u.dtype()
        };
        let mut s: Vec<String> = Vec::with_capacity(u.src().len());
        for x in u.src() {
            s.push(self.e(x)?);
        }
        if op == Ops::Where {
            return Ok(format!("select({}, {}, {})", s[2], s[1], s[0]));
        }
        let ty = self.ty(dt)?;
        if ty == Ty::Bool {
            return bool_alu(op, &s);
        }
        if dt.is_float() {
            if is_half(dt) {
                return Err(format!(
                    "{op} on {dt} must be computed in float32 (emulate pass)"
                ));
            }
            return self.float_alu(op, ty, &s);
        }
        self.int_alu(u, dt, ty, &s)
    }

    fn float_alu(&mut self, op: Ops, ty: Ty, s: &[String]) -> Result<String, String> {
        let (a, b) = (&s[0], s.get(1).unwrap_or(&s[0]));
        let t = ty.name();
        let one = format!("1.0{}", ty.float_suffix());
        let bits = ty.bits().name();
        Ok(match op {
            Ops::Add => format!("({a} + {b})"),
            Ops::Sub => format!("({a} - {b})"),
            Ops::Mul => format!("({a} * {b})"),
            Ops::FDiv => format!("({a} / {b})"),
            Ops::IDiv => format!("trunc({a} / {b})"),
            Ops::Neg => format!("(-{a})"),
            Ops::Recip => format!("({one} / {a})"),
            Ops::Sqrt => format!("sqrt({a})"),
            Ops::Trunc => format!("trunc({a})"),
            // WGSL's round() rounds half to even
            Ops::Round => format!("round({a})"),
            Ops::Max => {
                let nan = self.helper(if ty == Ty::F64 {
                    "isnan_f64"
                } else {
                    "isnan_f32"
                });
                format!("select(max({a}, {b}), {a} + {b}, {nan}({a}) | {nan}({b}))")
            }
            Ops::MulAcc => format!("fma({a}, {b}, {})", s[2]),
            Ops::CmpLt => format!("({a} < {b})"),
            // Not `!=`: naga emits an ordered not-equal, false for NaN.
            Ops::CmpNe => format!("(!({a} == {b}))"),
            Ops::CmpEq => format!("({a} == {b})"),
            Ops::And | Ops::Or | Ops::Xor => {
                let o = match op {
                    Ops::And => "&",
                    Ops::Or => "|",
                    _ => "^",
                };
                format!("bitcast<{t}>(bitcast<{bits}>({a}) {o} bitcast<{bits}>({b}))")
            }
            op => {
                return Err(format!(
                    "{op} on {t} must be decomposed before WGSL rendering"
                ));
            }
        })
    }

    fn int_alu(&mut self, u: &UOp, dt: DType, ty: Ty, s: &[String]) -> Result<String, String> {
        let op = u.op();
        let (a, b) = (s[0].clone(), s.get(1).unwrap_or(&s[0]).clone());
        let zero = self.literal(ConstValue::Int(0), dt)?;
        let one = self.literal(ConstValue::Int(1), dt)?;
        let signed = !dt.is_unsigned();
        let width: u32 = if ty.is_64() { 64 } else { 32 };
        let e = match op {
            Ops::Add => format!("({a} + {b})"),
            Ops::Sub => format!("({a} - {b})"),
            Ops::Mul => format!("({a} * {b})"),
            Ops::MulAcc => format!("({a} * {b} + {})", s[2]),
            Ops::Neg if signed => format!("(-{a})"),
            Ops::Neg => format!("({zero} - {a})"),
            Ops::Max => format!("max({a}, {b})"),
            Ops::And => format!("({a} & {b})"),
            Ops::Or => format!("({a} | {b})"),
            Ops::Xor => format!("({a} ^ {b})"),
            Ops::Trunc | Ops::Round => a.clone(),
            Ops::CmpLt => return Ok(format!("({a} < {b})")),
            Ops::CmpNe => return Ok(format!("({a} != {b})")),
            Ops::CmpEq => return Ok(format!("({a} == {b})")),
            Ops::IDiv | Ops::FDiv | Ops::Mod => {
                // x / 0 = x % 0 = 0; WGSL already wraps MIN / -1 and gives MIN % -1 = 0.
                let o = if op == Ops::Mod { "%" } else { "/" };
                let safe = format!("select({b}, {one}, {b} == {zero})");
                format!("select({a} {o} {safe}, {zero}, {b} == {zero})")
            }
            Ops::Recip => {
                if signed {
                    let m1 = self.literal(ConstValue::Int(-1), dt)?;
                    format!("select({zero}, {a}, ({a} == {one}) | ({a} == {m1}))")
                } else {
                    format!("select({zero}, {one}, {a} == {one})")
                }
            }
            Ops::Shl | Ops::Shr => {
                // The amount as the value's dtype, read as unsigned (exec_alu's reading).
                let amt_dt = u.s(1).dtype();
                let amt = if amt_dt == dt {
                    b.clone()
                } else {
                    self.cast(&b, amt_dt, dt)?
                };
                let (amt, lim) = match ty {
                    Ty::I32 => (format!("bitcast<u32>({amt})"), format!("{width}u")),
                    Ty::U32 => (amt, format!("{width}u")),
                    Ty::I64 => (format!("bitcast<u64>({amt})"), format!("{width}lu")),
                    _ => (amt, format!("{width}lu")),
                };
                let am = self.fresh("sh");
                self.line(&format!("let {am}: {} = {amt};", ty.bits().name()));
                let small = format!(
                    "u32(min({am}, {lim} - {}))",
                    if ty.is_64() { "1lu" } else { "1u" }
                );
                if op == Ops::Shl {
                    format!("select({zero}, {a} << {small}, {am} < {lim})")
                } else if signed {
                    format!("({a} >> {small})")
                } else {
                    format!("select({zero}, {a} >> {small}, {am} < {lim})")
                }
            }
            op => {
                return Err(format!(
                    "{op} on {dt} is not supported by the WGSL renderer"
                ));
            }
        };
        Ok(if matches!(ty, Ty::I32 | Ty::U32) {
            self.canon(e, dt)
        } else {
            e
        })
    }
}

fn bool_alu(op: Ops, s: &[String]) -> Result<String, String> {
    let (a, b) = (&s[0], s.get(1).unwrap_or(&s[0]));
    Ok(match op {
        Ops::Add | Ops::Or | Ops::Max => format!("({a} | {b})"),
        Ops::Mul | Ops::And | Ops::IDiv | Ops::FDiv => format!("({a} & {b})"),
        Ops::Sub | Ops::Xor | Ops::CmpNe => format!("({a} != {b})"),
        Ops::CmpEq => format!("({a} == {b})"),
        Ops::CmpLt => format!("(!{a} & {b})"),
        Ops::Neg => format!("(!{a})"),
        Ops::Mod => "false".into(),
        Ops::Trunc | Ops::Round => a.clone(),
        Ops::MulAcc => format!("(({a} & {b}) | {})", s[2]),
        op => return Err(format!("{op} on bool is not supported")),
    })
}

/// An integer literal; `min` (the type's most negative value, which WGSL can't write as a
/// negated literal) becomes a bit pattern.
fn int_lit(x: i64, suffix: &str, min: i64) -> String {
    if x == min {
        if suffix == "li" {
            "bitcast<i64>(0x8000000000000000lu)".into()
        } else {
            "bitcast<i32>(0x80000000u)".into()
        }
    } else if x < 0 {
        format!("({x}{suffix})")
    } else {
        format!("{x}{suffix}")
    }
}

fn paren_neg(s: String) -> String {
    if s.starts_with('-') {
        format!("({s})")
    } else {
        s
    }
}

/// The helpers a helper calls.
fn helper_deps(name: &str) -> &'static [&'static str] {
    match name {
        "ftoi_lo_f32" | "ftoi64_f32" | "ftou64_f32" | "f32_to_f16" | "f32_to_bf16" => {
            &["isnan_f32"]
        }
        "ftoi_lo_f64" | "ftoi64_f64" | "ftou64_f64" => &["isnan_f64"],
        _ => &[],
    }
}

/// The WGSL source of a helper function.
fn helper_source(name: &str) -> &'static str {
    match name {
        "isnan_f32" => {
            "fn isnan_f32(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }\n"
        }
        "isnan_f64" => {
            "fn isnan_f64(x: f64) -> bool { return (bitcast<u64>(x) & 0x7ffffffffffffffflu) > 0x7ff0000000000000lu; }\n"
        }
        "ftoi_lo_f32" => FTOI_LO_F32,
        "ftoi_lo_f64" => FTOI_LO_F64,
        "ftoi64_f32" => FTOI64_F32,
        "ftoi64_f64" => FTOI64_F64,
        "ftou64_f32" => FTOU64_F32,
        "ftou64_f64" => FTOU64_F64,
        "f16_to_f32" => F16_TO_F32,
        "f32_to_f16" => F32_TO_F16,
        "f32_to_bf16" => F32_TO_BF16,
        _ => "",
    }
}

/// The low 32 bits of `x` truncated and saturated to `int64` (`uint64` for values >= 2^63 when
/// `uns`); NaN gives 0.
const FTOI_LO_F32: &str = "fn ftoi_lo_f32(x: f32, uns: bool) -> u32 {
  if (isnan_f32(x)) { return 0u; }
  let t = trunc(x);
  if (abs(t) < 2147483648.0f) { return bitcast<u32>(i32(t)); }
  if (uns && t >= 18446744073709551616.0f) { return 0xffffffffu; }
  if (!uns && t >= 9223372036854775808.0f) { return 0xffffffffu; }
  if (t < -9223372036854775808.0f) { return 0u; }
  let hi = floor(t / 4294967296.0f);
  return u32(t - hi * 4294967296.0f);
}
";

const FTOI_LO_F64: &str = "fn ftoi_lo_f64(x: f64, uns: bool) -> u32 {
  if (isnan_f64(x)) { return 0u; }
  let t = trunc(x);
  if (abs(t) < 2147483648.0lf) { return bitcast<u32>(i32(t)); }
  if (uns && t >= 18446744073709551616.0lf) { return 0xffffffffu; }
  if (!uns && t >= 9223372036854775808.0lf) { return 0xffffffffu; }
  if (t < -9223372036854775808.0lf) { return 0u; }
  let hi = floor(t / 4294967296.0lf);
  return u32(t - hi * 4294967296.0lf);
}
";

const FTOI64_F32: &str = "fn ftoi64_f32(x: f32) -> i64 {
  if (isnan_f32(x)) { return 0li; }
  let t = trunc(x);
  if (t >= 9223372036854775808.0f) { return 9223372036854775807li; }
  if (t < -9223372036854775808.0f) { return bitcast<i64>(0x8000000000000000lu); }
  return i64(t);
}
";

const FTOI64_F64: &str = "fn ftoi64_f64(x: f64) -> i64 {
  if (isnan_f64(x)) { return 0li; }
  let t = trunc(x);
  if (t >= 9223372036854775808.0lf) { return 9223372036854775807li; }
  if (t < -9223372036854775808.0lf) { return bitcast<i64>(0x8000000000000000lu); }
  return i64(t);
}
";

const FTOU64_F32: &str = "fn ftou64_f32(x: f32) -> u64 {
  if (isnan_f32(x)) { return 0lu; }
  let t = trunc(x);
  if (t >= 18446744073709551616.0f) { return 18446744073709551615lu; }
  if (t >= 9223372036854775808.0f) { return u64(t); }
  if (t < -9223372036854775808.0f) { return 0x8000000000000000lu; }
  return bitcast<u64>(i64(t));
}
";

const FTOU64_F64: &str = "fn ftou64_f64(x: f64) -> u64 {
  if (isnan_f64(x)) { return 0lu; }
  let t = trunc(x);
  if (t >= 18446744073709551616.0lf) { return 18446744073709551615lu; }
  if (t >= 9223372036854775808.0lf) { return u64(t); }
  if (t < -9223372036854775808.0lf) { return 0x8000000000000000lu; }
  return bitcast<u64>(i64(t));
}
";

/// `float16` bits (low 16 bits of `h`) to `float32`, exactly (subnormals included).
const F16_TO_F32: &str = "fn f16_to_f32(h: u32) -> f32 {
  let sign = (h & 0x8000u) << 16u;
  let e = (h >> 10u) & 0x1fu;
  let m = h & 0x3ffu;
  if (e == 0x1fu) { return bitcast<f32>(sign | 0x7f800000u | (m << 13u)); }
  if (e != 0u) { return bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u)); }
  let v = f32(m) * 5.9604644775390625e-8f;
  return select(v, -v, sign != 0u);
}
";

/// `float32` to `float16` bits, rounding to nearest even (overflow gives infinity, NaN stays
/// NaN).
const F32_TO_F16: &str = "fn f32_to_f16(f: f32) -> u32 {
  let x = bitcast<u32>(f);
  let sign = (x >> 16u) & 0x8000u;
  let a = x & 0x7fffffffu;
  if (isnan_f32(f)) { return sign | 0x7e00u | ((a >> 13u) & 0x3ffu); }
  if (a >= 0x477ff000u) { return sign | 0x7c00u; }
  if (a >= 0x38800000u) {
    let r = a - 0x38000000u;
    return sign | ((r + 0xfffu + ((r >> 13u) & 1u)) >> 13u);
  }
  if (a <= 0x33000000u) { return sign; }
  let e = a >> 23u;
  let m = (a & 0x7fffffu) | 0x800000u;
  let sh = 126u - e;
  let q = m >> sh;
  let rem = m & ((1u << sh) - 1u);
  let half = 1u << (sh - 1u);
  var r = q;
  if (rem > half || (rem == half && (q & 1u) == 1u)) { r = r + 1u; }
  return sign | r;
}
";

/// `float32` to `bfloat16` bits, rounding to nearest even (NaN stays NaN).
const F32_TO_BF16: &str = "fn f32_to_bf16(f: f32) -> u32 {
  let x = bitcast<u32>(f);
  if (isnan_f32(f)) { return (x >> 16u) | 0x40u; }
  return (x + 0x7fffu + ((x >> 16u) & 1u)) >> 16u;
}
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_is_padded_to_words() {
        assert_eq!(storage_bytes(DType::FLOAT32, 3), 12);
        assert_eq!(storage_bytes(DType::BOOL, 5), 8);
        assert_eq!(storage_bytes(DType::FLOAT16, 0), 4);
        assert_eq!(storage_bytes(DType::INT64, 1), 8);
    }

    #[test]
    fn int_literals() {
        assert_eq!(int_lit(5, "i", i64::from(i32::MIN)), "5i");
        assert_eq!(int_lit(-5, "i", i64::from(i32::MIN)), "(-5i)");
        assert_eq!(
            int_lit(i64::from(i32::MIN), "i", i64::from(i32::MIN)),
            "bitcast<i32>(0x80000000u)"
        );
    }

    #[test]
    fn refuses_64_bit_without_features() {
        let r = WgslRenderer::new(false, false);
        assert!(r.refuses(DType::INT64).unwrap().contains("SHADER_INT64"));
        assert!(r.refuses(DType::FLOAT64).unwrap().contains("SHADER_F64"));
        assert!(r.refuses(DType::FLOAT32).is_none());
        let r = WgslRenderer::new(true, true);
        assert!(r.refuses(DType::INT64).is_none() && r.refuses(DType::FLOAT64).is_none());
    }

    /// Parses and validates `src` with naga (64-bit integers and floats allowed).
    fn validate(src: &str) -> Result<(), String> {
        let module = naga::front::wgsl::parse_str(src).map_err(|e| e.emit_to_string(src))?;
        let caps = naga::valid::Capabilities::SHADER_INT64 | naga::valid::Capabilities::FLOAT64;
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
            .validate(&module)
            .map_err(|e| e.emit_to_string(src))?;
        Ok(())
    }

    #[test]
    fn helpers_and_special_literals_validate() {
        let mut src = String::new();
        for h in [
            "isnan_f32",
            "isnan_f64",
            "ftoi_lo_f32",
            "ftoi_lo_f64",
            "ftoi64_f32",
            "ftoi64_f64",
            "ftou64_f32",
            "ftou64_f64",
            "f16_to_f32",
            "f32_to_f16",
            "f32_to_bf16",
        ] {
            assert!(!helper_source(h).is_empty(), "{h}");
            src.push_str(helper_source(h));
        }
        let r = WgslRenderer::new(true, true);
        let cx = Ctx {
            r,
            body: String::new(),
            depth: 0,
            names: HashMap::new(),
            accs: HashMap::new(),
            loops: Vec::new(),
            next: 0,
            plan: GridPlan {
                ranges: Vec::new(),
                total: 1,
            },
            group: None,
            shared: Vec::new(),
            grid_at: HashSet::new(),
            helpers: BTreeSet::new(),
            atomic: HashSet::new(),
            globals: HashMap::new(),
            vars: Vec::new(),
        };
        let lit = |v: ConstValue, dt: DType| cx.literal(v, dt).unwrap();
        let cases = [
            ("f32", lit(ConstValue::Float(f64::INFINITY), DType::FLOAT32)),
            ("f32", lit(ConstValue::Float(f64::NAN), DType::FLOAT32)),
            ("f32", lit(ConstValue::Float(-0.0), DType::FLOAT32)),
            ("f32", lit(ConstValue::Float(1e-45), DType::FLOAT32)),
            ("f32", lit(ConstValue::Float(-3.5), DType::FLOAT32)),
            ("f32", lit(ConstValue::Float(3.4028235e38), DType::FLOAT32)),
            (
                "f64",
                lit(ConstValue::Float(f64::NEG_INFINITY), DType::FLOAT64),
            ),
            ("f64", lit(ConstValue::Float(0.1), DType::FLOAT64)),
            (
                "i32",
                lit(ConstValue::Int(i64::from(i32::MIN)), DType::INT32),
            ),
            ("i32", lit(ConstValue::Int(-7), DType::INT8)),
            ("i64", lit(ConstValue::Int(i64::MIN), DType::INT64)),
            ("u64", lit(ConstValue::UInt(u64::MAX), DType::UINT64)),
            ("u32", lit(ConstValue::Float(f64::INFINITY), DType::FLOAT16)),
            ("bool", lit(ConstValue::Int(1), DType::BOOL)),
        ];
        src.push_str("@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n");
        src.push_str("@compute @workgroup_size(1)\nfn main() {\n");
        for (i, (ty, e)) in cases.iter().enumerate() {
            src.push_str(
                &format!("  let c{i}: {ty} = {e};\n  let d{i}: {ty} = c{i} - c{i};\n").replace(
                    &format!("let d{i}: bool = c{i} - c{i};"),
                    &format!("let d{i}: bool = !c{i};"),
                ),
            );
        }
        src.push_str("  out[0] = f32_to_f16(f16_to_f32(1u)) + ftoi_lo_f32(-3e9f, false) + u32(ftoi64_f64(2.5lf)) + u32(ftou64_f32(1e19f)) + f32_to_bf16(1.0f) + ftoi_lo_f64(1.0lf, true) + u32(ftoi64_f32(1.0f)) + u32(ftou64_f64(1.0lf));\n}\n");
        validate(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    }
}
