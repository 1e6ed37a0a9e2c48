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
//!
//! Module map:
//! - this file: [`WgslRenderer`] and its [`Renderer`] implementation (the shader's
//!   declarations and entry point), the launch ([`launch_dims`]), buffer sizes, register types,
//!   and the rendering state (`Ctx`).
//! - `emit`: each linearized op as WGSL statements: values, literals, loops (plain, grouped,
//!   grid-mapped), indexing, loads and stores.
//! - `alu`: expressions: casts, bitcasts and ALU ops (float, integer, bool), integer literals.
//! - `helpers`: the WGSL helper functions the shader may need (float <-> integer and half
//!   conversions).

mod alu;
mod emit;
mod helpers;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

use tinygrad_dtype::{DType, Scalar};
use tinygrad_uop::{Ops, UOp};

use crate::grid::{GridPlan, GroupPlan, grid_plan, group_plan};
use crate::{Program, RenderError, Renderer, TargetCaps};

use helpers::helper_source;

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
