//! The PTX renderer: a [`Program`] becomes the text of a PTX module with one `.entry` kernel,
//! for NVIDIA GPUs (`sm_80` and newer), assembled by `ptxas` or loaded by the CUDA driver.
//!
//! Kernel ABI: one `.param .u64` per global buffer slot (slot order; slot 0 is the output), then
//! one `.param .s64` per variable (`Program::vars` order), read once by the prologue.
//!
//! Launch: the program's outer output loops — the ones perfectly nested from the top, with no
//! other loop in between — are flattened into one index space of [`LaunchDims::total`]
//! elements and mapped to the grid as a grid-stride loop: thread `g = ctaid.x * ntid.x + tid.x`
//! runs elements `g, g + nctaid.x * ntid.x, ...` below the total (the bounds check), and splits
//! each back into the loop indices. Any launch shape is therefore correct; [`launch_dims`] picks
//! one. Every other loop (reductions, and output loops nested below other loops) stays a PTX
//! loop inside the thread. A program whose structure does not fit runs in one thread.
//!
//! Grouped reductions (`grid.rs`'s `GroupPlan`, tinygrad's `GROUP`): a kernel with few outputs
//! and a long reduction runs one output per block; the block's [`BLOCK_SIZE`] threads split the
//! reduction loop (thread `t` runs iterations `t, t + 256, ...`), store their partial
//! accumulators to a `.shared` array, `bar.sync`, and every thread folds the partials in the
//! same order, so all hold the same value and store the same result.
//!
//! Semantics match the Cranelift renderer and `tinygrad_uop::exec_alu` (the `REF` device):
//! - integer division and modulo by zero give 0, `MIN / -1` wraps (guards around `div`/`rem`);
//! - float -> int casts truncate toward zero, saturate to `int64` (`uint64` for values >= 2^63
//!   cast to an unsigned type) and then wrap to the target width; NaN gives 0;
//! - shifts by the width or more give 0 (or -1 for `>>` of a negative signed value);
//! - gated loads and stores are predicated: a false gate never touches memory and a load yields
//!   0;
//! - `float` `+ - * /`, `sqrt` and reciprocal are IEEE round-to-nearest (`.rn`: never
//!   contracted by ptxas, no approximations); `a*b + c` arrives as `MulAcc` (`caps().fma`,
//!   `crate::late`) and is one `fma.rn`; `max` propagates NaN; transcendentals arrive decomposed
//!   (`caps().transcendentals == false`), so `ex2.approx`/`lg2.approx`/`sin.approx`, whose
//!   accuracy is below our tolerances, are never used;
//! - `float16`/`bfloat16` stay 16-bit in memory and registers (`.b16`) and compute in `float32`
//!   (the emulate pass), converted with `cvt.f32.f16`, `cvt.rn.f16.f32`, `cvt.rn.bf16.f32` and
//!   a 16-bit shift for `bfloat16 -> float32`.
//!
//! Registers: `bool` is a predicate; 8/16/32-bit integers live in 32-bit registers, kept
//! canonical (sign- or zero-extended from their width after every operation); 64-bit integers
//! and `index` in 64-bit registers; `float32`/`float64` in `.f32`/`.f64` registers.
//! `fp8` arrives emulated (`caps().fp8 == false`: `uint8` bits, computed in `float32`, converted
//! by integer arithmetic in `crate::emulate`, the same on every architecture). Vectors and the
//! IR's GPU-specific ops (`Special`, `Barrier`, `Wmma`) are not rendered: they give a
//! [`RenderError`].

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use tinygrad_dtype::{ConstValue, DType, Scalar};
use tinygrad_uop::{Arg, Ops, UOp};

use crate::grid::{GridPlan, GroupPlan, grid_plan, group_fold, group_plan};
use crate::{Program, RenderError, Renderer, TargetCaps};

/// The newest PTX ISA version the renderer emits (what the `ptxas` of CUDA 12.9 accepts).
pub const MAX_PTX_VERSION: (u32, u32) = (8, 8);

/// Threads per block chosen by [`launch_dims`] (and declared as the kernels' `.maxntid`).
pub const BLOCK_SIZE: u32 = 256;

/// The most blocks [`launch_dims`] asks for; larger index spaces loop (grid-stride).
pub const MAX_GRID: u32 = 1 << 20;

/// Renders programs to PTX for one GPU architecture (`sm_80` by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PtxRenderer {
    sm: u32,
    version: (u32, u32),
}

impl Default for PtxRenderer {
    fn default() -> Self {
        PtxRenderer::new(80)
    }
}

impl PtxRenderer {
    /// A renderer for `sm_<sm>` (e.g. `80`, `90`) emitting PTX ISA 8.0, or the first version
    /// that knows the target when that is newer (8.6 for `sm_100`, 8.7 for `sm_120`).
    pub fn new(sm: u32) -> Self {
        PtxRenderer {
            sm,
            version: min_ptx_version(sm).max((8, 0)),
        }
    }

    /// The same renderer emitting PTX ISA `major.minor` (at most [`MAX_PTX_VERSION`], and new
    /// enough for the target: rendering checks both).
    pub fn with_version(self, major: u32, minor: u32) -> Self {
        PtxRenderer {
            version: (major, minor),
            ..self
        }
    }

    /// The target architecture number (`80` for `sm_80`).
    pub fn sm(&self) -> u32 {
        self.sm
    }

    /// The PTX ISA version emitted.
    pub fn version(&self) -> (u32, u32) {
        self.version
    }

    /// The `.target` name (`sm_80`).
    pub fn target(&self) -> String {
        format!("sm_{}", self.sm)
    }

    fn check_target(&self) -> Result<(), String> {
        if self.sm < 80 {
            return Err(format!(
                "target sm_{} is not supported (sm_80 or newer: bfloat16 conversions)",
                self.sm
            ));
        }
        if self.version > MAX_PTX_VERSION {
            return Err(format!(
                "PTX ISA {}.{} is newer than {}.{}",
                self.version.0, self.version.1, MAX_PTX_VERSION.0, MAX_PTX_VERSION.1
            ));
        }
        let needed = min_ptx_version(self.sm);
        if self.version < needed {
            return Err(format!(
                "sm_{} needs PTX ISA {}.{} or newer, not {}.{}",
                self.sm, needed.0, needed.1, self.version.0, self.version.1
            ));
        }
        Ok(())
    }
}

/// The first PTX ISA version that knows target `sm_<sm>`.
fn min_ptx_version(sm: u32) -> (u32, u32) {
    match sm {
        0..=80 => (7, 0),
        81..=86 => (7, 1),
        87 => (7, 4),
        88..=90 => (7, 8),
        91..=100 => (8, 6),
        _ => (8, 7),
    }
}

/// The launch shape for a PTX kernel: `grid` blocks of `block` threads (x dimension only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchDims {
    /// Blocks in the grid (`gridDim.x`).
    pub grid: u32,
    /// Threads per block (`blockDim.x`).
    pub block: u32,
    /// Elements of the flattened outer loops mapped to the grid (1 when none is).
    pub total: u64,
}

/// The launch shape for the PTX kernel of `prog`: enough blocks of up to [`BLOCK_SIZE`] threads
/// to give each element of the grid-mapped loops one thread (at most [`MAX_GRID`] blocks; the
/// kernel loops over the rest).
pub fn launch_dims(prog: &Program) -> LaunchDims {
    let plan = grid_plan(&prog.uops);
    if group_plan(&prog.uops, &plan, ptx_shareable).is_some() {
        // one output per block of BLOCK_SIZE threads
        return LaunchDims {
            grid: plan.total.clamp(1, u64::from(MAX_GRID)) as u32,
            block: BLOCK_SIZE,
            total: plan.total,
        };
    }
    if plan.ranges.is_empty() {
        return LaunchDims {
            grid: 1,
            block: 1,
            total: 1,
        };
    }
    let total = plan.total;
    let block = if total >= u64::from(BLOCK_SIZE) {
        BLOCK_SIZE
    } else {
        (total.max(1).div_ceil(32) * 32) as u32
    };
    let grid = total
        .div_ceil(u64::from(block))
        .clamp(1, u64::from(MAX_GRID)) as u32;
    LaunchDims { grid, block, total }
}

/// Accumulator dtypes a grouped reduction exchanges through `.shared` memory (any register
/// class but predicates).
fn ptx_shareable(dt: DType) -> bool {
    !dt.is_bool() && class_of(dt).is_ok()
}

/// The `.entry` name of a program's kernel (its name, restricted to PTX identifier characters).
pub fn entry_name(prog: &Program) -> String {
    let mut s: String = prog
        .name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if !s.starts_with(|c: char| c.is_ascii_alphabetic()) {
        s.insert(0, 'k');
    }
    s
}

/// A PTX register class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Class {
    Pred,
    B16,
    B32,
    B64,
    F32,
    F64,
}

impl Class {
    const ALL: [Class; 6] = [
        Class::Pred,
        Class::B16,
        Class::B32,
        Class::B64,
        Class::F32,
        Class::F64,
    ];

    fn decl(self) -> &'static str {
        match self {
            Class::Pred => ".pred",
            Class::B16 => ".b16",
            Class::B32 => ".b32",
            Class::B64 => ".b64",
            Class::F32 => ".f32",
            Class::F64 => ".f64",
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            Class::Pred => "%p",
            Class::B16 => "%h",
            Class::B32 => "%r",
            Class::B64 => "%rd",
            Class::F32 => "%f",
            Class::F64 => "%fd",
        }
    }

    /// The type of a plain move between registers of this class.
    fn mov(self) -> &'static str {
        match self {
            Class::Pred => "pred",
            Class::B16 => "b16",
            Class::B32 | Class::F32 => "b32",
            Class::B64 | Class::F64 => "b64",
        }
    }
}

fn class_of(dt: DType) -> Result<Class, String> {
    if dt.is_ptr() {
        return Ok(Class::B64);
    }
    if dt.count() != 1 {
        return Err(format!("vector dtype {dt} is not supported yet"));
    }
    Ok(match dt.kind() {
        Scalar::Bool => Class::Pred,
        Scalar::Int8
        | Scalar::Int16
        | Scalar::Int32
        | Scalar::UInt8
        | Scalar::UInt16
        | Scalar::UInt32 => Class::B32,
        Scalar::Int64 | Scalar::UInt64 | Scalar::Index => Class::B64,
        Scalar::Float16 | Scalar::BFloat16 => Class::B16,
        Scalar::Float32 => Class::F32,
        Scalar::Float64 => Class::F64,
        other => {
            return Err(format!(
                "dtype {other:?} is not supported by the PTX renderer yet"
            ));
        }
    })
}

fn is_half(dt: DType) -> bool {
    matches!(dt.kind(), Scalar::Float16 | Scalar::BFloat16)
}

/// The arithmetic type of an integer or float dtype (`s32` for `int8`..`int32`, which live in
/// 32-bit registers).
fn arith(dt: DType) -> Result<&'static str, String> {
    Ok(match dt.kind() {
        Scalar::Int8 | Scalar::Int16 | Scalar::Int32 => "s32",
        Scalar::UInt8 | Scalar::UInt16 | Scalar::UInt32 => "u32",
        Scalar::Int64 | Scalar::Index => "s64",
        Scalar::UInt64 => "u64",
        Scalar::Float32 => "f32",
        Scalar::Float64 => "f64",
        other => return Err(format!("no PTX arithmetic for {other:?}")),
    })
}

/// The bit type of a non-bool register class (`b32`, `b64`, `b16`).
fn bits(c: Class) -> &'static str {
    c.mov()
}

/// The memory type for loads (sign/zero extension into the register) of `dt`.
fn ld_type(dt: DType) -> Result<&'static str, String> {
    Ok(match dt.kind() {
        Scalar::Bool | Scalar::UInt8 => "u8",
        Scalar::Int8 => "s8",
        Scalar::Int16 => "s16",
        Scalar::UInt16 | Scalar::Float16 | Scalar::BFloat16 => "u16",
        Scalar::Int32 | Scalar::UInt32 => "b32",
        Scalar::Int64 | Scalar::UInt64 | Scalar::Index => "b64",
        Scalar::Float32 => "f32",
        Scalar::Float64 => "f64",
        other => return Err(format!("can't load {other:?}")),
    })
}

/// The memory type for stores of `dt`.
fn st_type(dt: DType) -> Result<&'static str, String> {
    Ok(match dt.kind() {
        Scalar::Bool | Scalar::UInt8 | Scalar::Int8 => "b8",
        Scalar::Int16 | Scalar::UInt16 | Scalar::Float16 | Scalar::BFloat16 => "b16",
        Scalar::Int32 | Scalar::UInt32 => "b32",
        Scalar::Int64 | Scalar::UInt64 | Scalar::Index => "b64",
        Scalar::Float32 => "f32",
        Scalar::Float64 => "f64",
        other => return Err(format!("can't store {other:?}")),
    })
}

/// The PTX literal of constant `c` as a `dt` register value (canonical for narrow integers).
fn literal(c: ConstValue, dt: DType) -> Result<String, String> {
    let v = c.cast(dt);
    Ok(match class_of(dt)? {
        Class::Pred => u8::from(v.as_bool()).to_string(),
        Class::B16 => {
            let b = v.to_le_bytes(dt);
            format!("0x{:04X}", u16::from_le_bytes([b[0], b[1]]))
        }
        Class::B32 => format!("0x{:08X}", v.as_u64() as u32),
        Class::B64 => format!("0x{:016X}", v.as_u64()),
        Class::F32 => format!("0f{:08X}", (v.as_f64() as f32).to_bits()),
        Class::F64 => format!("0d{:016X}", v.as_f64().to_bits()),
    })
}

fn lit_f(dt: DType, x: f64) -> String {
    if dt.kind() == Scalar::Float64 {
        format!("0d{:016X}", x.to_bits())
    } else {
        format!("0f{:08X}", (x as f32).to_bits())
    }
}

impl Renderer for PtxRenderer {
    type Output = String;

    fn name(&self) -> &'static str {
        "ptx"
    }

    fn caps(&self) -> TargetCaps {
        TargetCaps {
            transcendentals: false,
            half: false,
            fp8: false,
            // every sm_* has fma.rn (the separate ops are rendered .rn: never contracted)
            fma: true,
        }
    }

    fn render(&self, prog: &Program) -> Result<String, RenderError> {
        let err = |m: String| RenderError {
            kernel: prog.name.clone(),
            message: m,
        };
        self.check_target().map_err(err)?;
        let name = entry_name(prog);
        let plan = grid_plan(&prog.uops);
        let group = group_plan(&prog.uops, &plan, ptx_shareable);
        let mut cx = Ctx {
            group,
            shared: Vec::new(),
            body: String::new(),
            counts: HashMap::new(),
            regs: HashMap::new(),
            accs: HashMap::new(),
            loops: Vec::new(),
            labels: 0,
            grid_at: plan.ranges.iter().map(|&(i, _)| i).collect(),
            plan,
            gid: None,
        };
        cx.prologue(prog, &name).map_err(err)?;
        for (i, u) in prog.uops.iter().enumerate() {
            cx.emit(i, u)
                .map_err(|m| err(format!("{m} (at uop {i}: {})", u.op())))?;
        }
        if !cx.loops.is_empty() {
            return Err(err("unclosed loop".into()));
        }
        let mut out = String::new();
        let _ = writeln!(
            out,
            "// tinygrad-rs PTX renderer: kernel {}\n.version {}.{}\n.target {}\n.address_size 64\n",
            prog.name,
            self.version.0,
            self.version.1,
            self.target()
        );
        let mut params: Vec<String> = (0..prog.globals.len())
            .map(|s| format!("\t.param .u64 {name}_param_{s}"))
            .collect();
        // then one .s64 per variable, in `Program::vars` order
        params.extend((0..prog.vars.len()).map(|k| format!("\t.param .s64 {name}_var_{k}")));
        let _ = writeln!(
            out,
            ".visible .entry {name}(\n{}\n)\n.maxntid {BLOCK_SIZE}, 1, 1\n{{",
            params.join(",\n")
        );
        for c in Class::ALL {
            if let Some(n) = cx.counts.get(&c) {
                let _ = writeln!(out, "\t.reg {} {}<{n}>;", c.decl(), c.prefix());
            }
        }
        for (name, bits) in &cx.shared {
            let _ = writeln!(out, "\t.shared .align 8 .b{bits} {name}[{BLOCK_SIZE}];");
        }
        out.push_str(&cx.body);
        out.push_str("\tret;\n}\n");
        Ok(out)
    }
}

/// An open loop: a PTX loop, or the grid-stride loop (only its outermost range closes it).
enum Loop {
    Plain {
        counter: String,
        label: usize,
    },
    /// The grouped reduction loop (stride [`BLOCK_SIZE`]; its partials are combined at its end).
    Grouped {
        counter: String,
        label: usize,
    },
    /// A grid-mapped range; `outer` for the first one (which owns the grid-stride loop).
    Grid {
        outer: bool,
        label: usize,
    },
}

struct Ctx {
    body: String,
    counts: HashMap<Class, usize>,
    regs: HashMap<UOp, String>,
    /// Accumulator registers of `DefineReg`s, and of `Index`es into them.
    accs: HashMap<UOp, String>,
    loops: Vec<Loop>,
    labels: usize,
    plan: GridPlan,
    grid_at: HashSet<usize>,
    /// The grid-stride loop's element index (64-bit), and its low 32 bits when the total fits.
    gid: Option<(String, Option<String>)>,
    /// The reduction split across each block, if any.
    group: Option<GroupPlan>,
    /// `.shared` arrays (name, element bits), one per grouped accumulator.
    shared: Vec<(String, u32)>,
}

impl Ctx {
    fn new_reg(&mut self, c: Class) -> String {
        let n = self.counts.entry(c).or_insert(0);
        let r = format!("{}{n}", c.prefix());
        *n += 1;
        r
    }

    fn line(&mut self, s: &str) {
        self.body.push('\t');
        self.body.push_str(s);
        self.body.push('\n');
    }

    fn label(&mut self, s: &str) {
        self.body.push_str(s);
        self.body.push_str(":\n");
    }

    /// The register holding `u`'s value.
    fn r(&self, u: &UOp) -> Result<String, String> {
        self.regs
            .get(u)
            .cloned()
            .ok_or_else(|| format!("{} used before it is defined", u.op()))
    }

    /// A fresh register for `u`'s value, recorded as its home.
    fn def(&mut self, u: &UOp) -> Result<String, String> {
        let r = self.new_reg(class_of(u.dtype())?);
        self.regs.insert(u.clone(), r.clone());
        Ok(r)
    }

    /// Buffer pointers, variables and every constant, once, before any loop.
    fn prologue(&mut self, prog: &Program, name: &str) -> Result<(), String> {
        for u in &prog.uops {
            if u.op() == Ops::DefineGlobal && !self.regs.contains_key(u) {
                let slot = u.arg().as_int().ok_or("DefineGlobal needs a slot")?;
                let r = self.def(u)?;
                self.line(&format!("ld.param.u64 {r}, [{name}_param_{slot}];"));
                self.line(&format!("cvta.to.global.u64 {r}, {r};"));
            }
            if u.op() == Ops::DefineVar && !self.regs.contains_key(u) {
                let Arg::Var(var, _, _) = u.arg() else {
                    return Err("DefineVar needs a Var argument".into());
                };
                if !matches!(u.dtype().kind(), Scalar::Index | Scalar::Int64) {
                    return Err(format!("variable {var} is {}, not index", u.dtype()));
                }
                let k = crate::program::var_index(&prog.vars, var)?;
                let r = self.def(u)?;
                self.line(&format!("ld.param.s64 {r}, [{name}_var_{k}];"));
            }
        }
        let mut consts: Vec<UOp> = Vec::new();
        let mut seen: HashSet<UOp> = HashSet::new();
        for u in &prog.uops {
            for s in std::iter::once(u).chain(u.src()) {
                if s.op() == Ops::Const && seen.insert(s.clone()) {
                    consts.push(s.clone());
                }
            }
        }
        for c in consts {
            let v = c.as_const().ok_or("Const without a value")?;
            let lit = literal(v, c.dtype())?;
            let r = self.def(&c)?;
            let mov = class_of(c.dtype())?.mov();
            self.line(&format!("mov.{mov} {r}, {lit};"));
        }
        Ok(())
    }

    fn emit(&mut self, i: usize, u: &UOp) -> Result<(), String> {
        match u.op() {
            // (variables are loaded by the prologue)
            Ops::Const | Ops::DefineGlobal | Ops::DefineVar | Ops::Sink | Ops::Noop => Ok(()),
            Ops::DefineReg => {
                let r = self.new_reg(class_of(u.dtype().base())?);
                self.accs.insert(u.clone(), r);
                Ok(())
            }
            Ops::Range if self.grid_at.contains(&i) => self.open_grid(i, u),
            Ops::Range if self.group.as_ref().is_some_and(|g| g.range == i) => self.open_grouped(u),
            Ops::Range => self.open_loop(u),
            Ops::End => self.close_loop(u),
            Ops::Index => self.index(u),
            Ops::Load => self.load(u),
            Ops::Store => self.store(u),
            Ops::Cast => {
                let a = self.r(u.s(0))?;
                let d = self.def(u)?;
                self.cast(&d, &a, u.s(0).dtype(), u.dtype())
            }
            Ops::Bitcast => self.bitcast(u),
            op if op.is_alu() => self.alu(u),
            op => Err(format!("{op} is not supported by the PTX renderer yet")),
        }
    }

    fn open_loop(&mut self, r: &UOp) -> Result<(), String> {
        let size = self.r(r.s(0))?;
        let counter = self.def(r)?;
        let label = self.labels;
        self.labels += 1;
        let p = self.new_reg(Class::Pred);
        self.line(&format!("mov.b64 {counter}, 0;"));
        self.label(&format!("$L{label}"));
        self.line(&format!("setp.ge.s64 {p}, {counter}, {size};"));
        self.line(&format!("@{p} bra $L{label}_end;"));
        self.loops.push(Loop::Plain { counter, label });
        Ok(())
    }

    /// The grouped reduction loop: thread `tid.x` runs every [`BLOCK_SIZE`]th iteration from
    /// its own.
    fn open_grouped(&mut self, r: &UOp) -> Result<(), String> {
        let size = self.r(r.s(0))?;
        let counter = self.def(r)?;
        let label = self.labels;
        self.labels += 1;
        let t = self.new_reg(Class::B32);
        self.line(&format!("mov.u32 {t}, %tid.x;"));
        self.line(&format!("cvt.u64.u32 {counter}, {t};"));
        self.label(&format!("$L{label}"));
        let p = self.new_reg(Class::Pred);
        self.line(&format!("setp.ge.s64 {p}, {counter}, {size};"));
        self.line(&format!("@{p} bra $L{label}_end;"));
        self.loops.push(Loop::Grouped { counter, label });
        Ok(())
    }

    /// After the grouped loop: each accumulator's partials go through a `.shared` array, and
    /// every thread folds them in the same order (the second barrier keeps the next output's
    /// partials from overwriting them early).
    fn combine_group(&mut self) -> Result<(), String> {
        let accs = self
            .group
            .as_ref()
            .map(|g| g.accs.clone())
            .unwrap_or_default();
        let t = self.new_reg(Class::B32);
        self.line(&format!("mov.u32 {t}, %tid.x;"));
        let mut bases = Vec::new();
        for (k, (reg, _)) in accs.iter().enumerate() {
            let dt = reg.dtype().base();
            let class = class_of(dt)?;
            let (ty, bytes) = match class {
                Class::B16 => ("b16", 2),
                Class::B32 => ("b32", 4),
                Class::F32 => ("f32", 4),
                Class::B64 => ("b64", 8),
                Class::F64 => ("f64", 8),
                Class::Pred => return Err("a grouped bool accumulator".into()),
            };
            let acc = self.accs.get(reg).cloned().ok_or("unknown accumulator")?;
            let name = format!("part{k}");
            self.shared.push((name.clone(), bytes * 8));
            let (base, off, addr) = (
                self.new_reg(Class::B64),
                self.new_reg(Class::B64),
                self.new_reg(Class::B64),
            );
            self.line(&format!("mov.u64 {base}, {name};"));
            self.line(&format!("mul.wide.u32 {off}, {t}, {bytes};"));
            self.line(&format!("add.s64 {addr}, {base}, {off};"));
            self.line(&format!("st.shared.{ty} [{addr}], {acc};"));
            bases.push((base, ty, bytes, class));
        }
        self.line("bar.sync 0;");
        for (k, ((reg, op), (base, ty, bytes, class))) in accs.iter().zip(bases).enumerate() {
            let acc = self.accs[reg].clone();
            let dt = reg.dtype().base();
            self.line(&format!("ld.shared.{ty} {acc}, [{base}];"));
            let label = self.labels;
            self.labels += 1;
            let (i, p, off, addr) = (
                self.new_reg(Class::B32),
                self.new_reg(Class::Pred),
                self.new_reg(Class::B64),
                self.new_reg(Class::B64),
            );
            let part = self.new_reg(class);
            self.line(&format!("mov.u32 {i}, 1;"));
            self.label(&format!("$L{label}"));
            self.line(&format!("setp.ge.u32 {p}, {i}, {BLOCK_SIZE};"));
            self.line(&format!("@{p} bra $L{label}_end;"));
            self.line(&format!("mul.wide.u32 {off}, {i}, {bytes};"));
            self.line(&format!("add.s64 {addr}, {base}, {off};"));
            self.line(&format!("ld.shared.{ty} {part}, [{addr}];"));
            let (a, b, folded) = group_fold(*op, dt, k);
            self.regs.insert(a, acc.clone());
            self.regs.insert(b, part);
            self.alu(&folded)?;
            let d = self.r(&folded)?;
            self.line(&format!("mov.{} {acc}, {d};", class.mov()));
            self.line(&format!("add.u32 {i}, {i}, 1;"));
            self.line(&format!("bra $L{label};"));
            self.label(&format!("$L{label}_end"));
        }
        self.line("bar.sync 0;");
        Ok(())
    }

    /// A grid-mapped range: the first opens the grid-stride loop; each computes its index
    /// from the flat element index.
    fn open_grid(&mut self, i: usize, r: &UOp) -> Result<(), String> {
        let pos = self
            .plan
            .ranges
            .iter()
            .position(|&(j, _)| j == i)
            .ok_or("grid range not in the plan")?;
        let outer = pos == 0;
        let label = self.labels;
        self.labels += 1;
        if outer {
            let total = self.plan.total;
            let (a, b, c) = (
                self.new_reg(Class::B32),
                self.new_reg(Class::B32),
                self.new_reg(Class::B32),
            );
            let gid = self.new_reg(Class::B64);
            let t = self.new_reg(Class::B64);
            if self.group.is_some() {
                // one output per block (uniform across it: the barriers need that)
                self.line(&format!("mov.u32 {a}, %ctaid.x;"));
                self.line(&format!("cvt.u64.u32 {gid}, {a};"));
            } else {
                self.line(&format!("mov.u32 {a}, %ctaid.x;"));
                self.line(&format!("mov.u32 {b}, %ntid.x;"));
                self.line(&format!("mov.u32 {c}, %tid.x;"));
                self.line(&format!("mul.wide.u32 {gid}, {a}, {b};"));
                self.line(&format!("cvt.u64.u32 {t}, {c};"));
                self.line(&format!("add.s64 {gid}, {gid}, {t};"));
            }
            self.label(&format!("$L{label}"));
            let p = self.new_reg(Class::Pred);
            self.line(&format!("setp.ge.u64 {p}, {gid}, {total};"));
            self.line(&format!("@{p} bra $L{label}_end;"));
            let g32 = if total <= u64::from(u32::MAX) {
                let g = self.new_reg(Class::B32);
                self.line(&format!("cvt.u32.u64 {g}, {gid};"));
                Some(g)
            } else {
                None
            };
            self.gid = Some((gid, g32));
        }
        let (gid, g32) = self.gid.clone().ok_or("grid range before the grid loop")?;
        let inner: u64 = self.plan.ranges[pos + 1..]
            .iter()
            .map(|&(_, s)| s)
            .product();
        let size = self.plan.ranges[pos].1;
        let d = self.def(r)?;
        match g32 {
            Some(g) => {
                let t = self.new_reg(Class::B32);
                self.line(&format!("mov.b32 {t}, {g};"));
                if inner != 1 {
                    self.line(&format!("div.u32 {t}, {t}, {inner};"));
                }
                if !outer {
                    self.line(&format!("rem.u32 {t}, {t}, {size};"));
                }
                self.line(&format!("cvt.u64.u32 {d}, {t};"));
            }
            None => {
                self.line(&format!("mov.b64 {d}, {gid};"));
                if inner != 1 {
                    self.line(&format!("div.u64 {d}, {d}, {inner};"));
                }
                if !outer {
                    self.line(&format!("rem.u64 {d}, {d}, {size};"));
                }
            }
        }
        self.loops.push(Loop::Grid { outer, label });
        Ok(())
    }

    fn close_loop(&mut self, _end: &UOp) -> Result<(), String> {
        match self.loops.pop().ok_or("End without Range")? {
            Loop::Plain { counter, label } => {
                self.line(&format!("add.s64 {counter}, {counter}, 1;"));
                self.line(&format!("bra $L{label};"));
                self.label(&format!("$L{label}_end"));
            }
            Loop::Grouped { counter, label } => {
                self.line(&format!("add.s64 {counter}, {counter}, {BLOCK_SIZE};"));
                self.line(&format!("bra $L{label};"));
                self.label(&format!("$L{label}_end"));
                self.combine_group()?;
            }
            Loop::Grid { outer: false, .. } => {}
            Loop::Grid { outer: true, label } => {
                let (gid, _) = self.gid.clone().ok_or("grid loop without an index")?;
                let (a, b) = (self.new_reg(Class::B32), self.new_reg(Class::B32));
                let stride = self.new_reg(Class::B64);
                self.line(&format!("mov.u32 {a}, %nctaid.x;"));
                if self.group.is_some() {
                    self.line(&format!("mov.u32 {b}, 1;"));
                } else {
                    self.line(&format!("mov.u32 {b}, %ntid.x;"));
                }
                self.line(&format!("mul.wide.u32 {stride}, {a}, {b};"));
                self.line(&format!("add.s64 {gid}, {gid}, {stride};"));
                self.line(&format!("bra $L{label};"));
                self.label(&format!("$L{label}_end"));
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
        let b = self.r(base)?;
        let idx = u.s(1);
        let mut i = self.r(idx)?;
        match class_of(idx.dtype())? {
            Class::B64 => {}
            Class::B32 => {
                let w = self.new_reg(Class::B64);
                let ext = if idx.dtype().is_unsigned() { "u" } else { "s" };
                self.line(&format!("cvt.{ext}64.{ext}32 {w}, {i};"));
                i = w;
            }
            c => return Err(format!("index of register class {c:?}")),
        }
        let size = u.dtype().base().itemsize();
        let d = self.def(u)?;
        if size == 1 {
            self.line(&format!("add.s64 {d}, {b}, {i};"));
        } else {
            self.line(&format!("mad.lo.s64 {d}, {i}, {size}, {b};"));
        }
        Ok(())
    }

    /// The gate of a global `Index` (its third source), as a predicate register.
    fn gate(&self, index: &UOp) -> Result<Option<String>, String> {
        match index.src().get(2) {
            Some(g) if g.as_const().is_some_and(|c| c.as_bool()) => Ok(None),
            Some(g) => self.r(g).map(Some),
            None => Ok(None),
        }
    }

    fn load(&mut self, u: &UOp) -> Result<(), String> {
        let index = u.s(0);
        if let Some(acc) = self.accs.get(index).cloned() {
            let d = self.def(u)?;
            let mov = class_of(u.dtype())?.mov();
            self.line(&format!("mov.{mov} {d}, {acc};"));
            return Ok(());
        }
        let addr = self.r(index)?;
        let gate = self.gate(index)?;
        let dt = u.dtype();
        let ty = ld_type(dt)?;
        let d = self.def(u)?;
        let pre = gate.as_ref().map_or(String::new(), |g| format!("@{g} "));
        // The value when the gate is off: the alternative source, else 0.
        let alt = match u.src().get(1) {
            Some(a) => Some(self.r(a)?),
            None => None,
        };
        if dt.is_bool() {
            let t = self.new_reg(Class::B32);
            if gate.is_some() {
                self.line(&format!("mov.b32 {t}, 0;"));
            }
            self.line(&format!("{pre}ld.global.{ty} {t}, [{addr}];"));
            self.line(&format!("setp.ne.u32 {d}, {t}, 0;"));
            if let (Some(g), Some(a)) = (&gate, &alt) {
                self.line(&format!("@!{g} mov.pred {d}, {a};"));
            }
            return Ok(());
        }
        let c = class_of(dt)?;
        if let Some(g) = &gate {
            match &alt {
                Some(a) => self.line(&format!("@!{g} mov.{} {d}, {a};", c.mov())),
                None => {
                    let z = literal(ConstValue::Int(0), dt)?;
                    self.line(&format!("mov.{} {d}, {z};", c.mov()));
                }
            }
        }
        self.line(&format!("{pre}ld.global.{ty} {d}, [{addr}];"));
        Ok(())
    }

    fn store(&mut self, u: &UOp) -> Result<(), String> {
        let index = u.s(0);
        let v = self.r(u.s(1))?;
        if let Some(acc) = self.accs.get(index).cloned() {
            let mov = class_of(u.s(1).dtype())?.mov();
            self.line(&format!("mov.{mov} {acc}, {v};"));
            return Ok(());
        }
        let addr = self.r(index)?;
        let gate = self.gate(index)?;
        let pre = gate.as_ref().map_or(String::new(), |g| format!("@{g} "));
        let dt = u.s(1).dtype();
        let ty = st_type(dt)?;
        let v = if dt.is_bool() {
            let t = self.new_reg(Class::B32);
            self.line(&format!("selp.b32 {t}, 1, 0, {v};"));
            t
        } else {
            v
        };
        self.line(&format!("{pre}st.global.{ty} [{addr}], {v};"));
        Ok(())
    }

    /// Re-canonicalizes a narrow integer held in a 32-bit register.
    fn canon(&mut self, r: &str, dt: DType) {
        match dt.kind() {
            Scalar::Int8 => self.line(&format!("cvt.s32.s8 {r}, {r};")),
            Scalar::Int16 => self.line(&format!("cvt.s32.s16 {r}, {r};")),
            Scalar::UInt8 => self.line(&format!("and.b32 {r}, {r}, 255;")),
            Scalar::UInt16 => self.line(&format!("and.b32 {r}, {r}, 65535;")),
            _ => {}
        }
    }

    /// `d = cast<to>(a: from)` (see the module docs for the semantics).
    fn cast(&mut self, d: &str, a: &str, from: DType, to: DType) -> Result<(), String> {
        let (fc, tc) = (class_of(from)?, class_of(to)?);
        if from == to {
            self.line(&format!("mov.{} {d}, {a};", tc.mov()));
            return Ok(());
        }
        if to.is_bool() {
            if is_half(from) {
                let f = self.new_reg(Class::F32);
                self.cast(&f, a, from, DType::FLOAT32)?;
                return self.cast(d, &f, DType::FLOAT32, to);
            }
            if from.is_float() {
                let t = arith(from)?;
                let z = lit_f(from, 0.0);
                self.line(&format!("setp.neu.{t} {d}, {a}, {z};"));
            } else {
                self.line(&format!("setp.ne.{} {d}, {a}, 0;", bits(fc)));
            }
            return Ok(());
        }
        if from.is_bool() {
            let (one, zero) = (
                literal(ConstValue::Int(1), to)?,
                literal(ConstValue::Int(0), to)?,
            );
            self.line(&format!("selp.{} {d}, {one}, {zero}, {a};", tc.mov()));
            return Ok(());
        }
        // Halves convert to and from float32 only; anything else goes through float32.
        if is_half(from) || is_half(to) {
            return match (from.kind(), to.kind()) {
                (Scalar::Float16, Scalar::Float32) => {
                    self.line(&format!("cvt.f32.f16 {d}, {a};"));
                    Ok(())
                }
                (Scalar::Float32, Scalar::Float16) => {
                    self.line(&format!("cvt.rn.f16.f32 {d}, {a};"));
                    Ok(())
                }
                (Scalar::Float32, Scalar::BFloat16) => {
                    self.line(&format!("cvt.rn.bf16.f32 {d}, {a};"));
                    Ok(())
                }
                (Scalar::BFloat16, Scalar::Float32) => {
                    let t = self.new_reg(Class::B32);
                    self.line(&format!("cvt.u32.u16 {t}, {a};"));
                    self.line(&format!("shl.b32 {t}, {t}, 16;"));
                    self.line(&format!("mov.b32 {d}, {t};"));
                    Ok(())
                }
                _ => {
                    let f = self.new_reg(Class::F32);
                    self.cast(&f, a, from, DType::FLOAT32)?;
                    self.cast(d, &f, DType::FLOAT32, to)
                }
            };
        }
        let (fa, ta) = (arith(from)?, arith(to)?);
        match (from.is_float(), to.is_float()) {
            (true, true) => {
                let rnd = if fc == Class::F64 { ".rn" } else { "" };
                self.line(&format!("cvt{rnd}.{ta}.{fa} {d}, {a};"));
            }
            (false, true) => self.line(&format!("cvt.rn.{ta}.{fa} {d}, {a};")),
            (true, false) => {
                // Truncate, saturating to int64 (uint64 for values >= 2^63 cast to an unsigned
                // type), then wrap to the target width.
                let wide = if tc == Class::B64 {
                    d.to_string()
                } else {
                    self.new_reg(Class::B64)
                };
                if to.is_unsigned() {
                    let (s, u) = (self.new_reg(Class::B64), self.new_reg(Class::B64));
                    let p = self.new_reg(Class::Pred);
                    self.line(&format!("cvt.rzi.s64.{fa} {s}, {a};"));
                    self.line(&format!("cvt.rzi.u64.{fa} {u}, {a};"));
                    let lim = lit_f(from, 9_223_372_036_854_775_808.0);
                    self.line(&format!("setp.ge.{fa} {p}, {a}, {lim};"));
                    self.line(&format!("selp.b64 {wide}, {u}, {s}, {p};"));
                } else {
                    self.line(&format!("cvt.rzi.s64.{fa} {wide}, {a};"));
                }
                if tc != Class::B64 {
                    self.line(&format!("cvt.u32.u64 {d}, {wide};"));
                    self.canon(d, to);
                }
            }
            (false, false) => match (fc, tc) {
                (Class::B64, Class::B64) => self.line(&format!("mov.b64 {d}, {a};")),
                (Class::B64, _) => {
                    self.line(&format!("cvt.u32.u64 {d}, {a};"));
                    self.canon(d, to);
                }
                (_, Class::B64) => {
                    let ext = if from.is_unsigned() { "u" } else { "s" };
                    self.line(&format!("cvt.{ext}64.{ext}32 {d}, {a};"));
                }
                _ => {
                    self.line(&format!("mov.b32 {d}, {a};"));
                    self.canon(d, to);
                }
            },
        }
        Ok(())
    }

    fn bitcast(&mut self, u: &UOp) -> Result<(), String> {
        let (from, to) = (u.s(0).dtype(), u.dtype());
        if from.itemsize() != to.itemsize() || from.is_bool() || to.is_bool() {
            return Err(format!("bitcast {from} -> {to}"));
        }
        let a = self.r(u.s(0))?;
        let d = self.def(u)?;
        let (fc, tc) = (class_of(from)?, class_of(to)?);
        match (fc, tc) {
            (Class::B32, Class::B16) => self.line(&format!("cvt.u16.u32 {d}, {a};")),
            (Class::B16, Class::B32) => {
                let ext = if to.is_unsigned() { "u" } else { "s" };
                self.line(&format!("cvt.{ext}32.{ext}16 {d}, {a};"));
            }
            _ => {
                self.line(&format!("mov.{} {d}, {a};", tc.mov()));
                if tc == Class::B32 {
                    self.canon(&d, to);
                }
            }
        }
        Ok(())
    }

    fn alu(&mut self, u: &UOp) -> Result<(), String> {
        let op = u.op();
        let dt = if op.is_comparison() {
            u.s(0).dtype()
        } else {
            u.dtype()
        };
        let mut s: Vec<String> = Vec::with_capacity(u.src().len());
        for x in u.src() {
            s.push(self.r(x)?);
        }
        if op == Ops::Where {
            let d = self.def(u)?;
            let (c, t, f) = (&s[0], &s[1], &s[2]);
            if dt.is_bool() {
                self.line(&format!("@{c} mov.pred {d}, {t};"));
                self.line(&format!("@!{c} mov.pred {d}, {f};"));
            } else {
                let mov = class_of(dt)?.mov();
                self.line(&format!("selp.{mov} {d}, {t}, {f}, {c};"));
            }
            return Ok(());
        }
        if dt.is_bool() {
            return self.bool_alu(u, &s);
        }
        if dt.is_float() {
            return self.float_alu(u, dt, &s);
        }
        self.int_alu(u, dt, &s)
    }

    fn bool_alu(&mut self, u: &UOp, s: &[String]) -> Result<(), String> {
        let d = self.def(u)?;
        let (a, b) = (&s[0], s.get(1).unwrap_or(&s[0]));
        match u.op() {
            Ops::Add | Ops::Or | Ops::Max => self.line(&format!("or.pred {d}, {a}, {b};")),
            Ops::Mul | Ops::And | Ops::IDiv | Ops::FDiv => {
                self.line(&format!("and.pred {d}, {a}, {b};"));
            }
            Ops::Sub | Ops::Xor | Ops::CmpNe => self.line(&format!("xor.pred {d}, {a}, {b};")),
            Ops::CmpEq => {
                self.line(&format!("xor.pred {d}, {a}, {b};"));
                self.line(&format!("not.pred {d}, {d};"));
            }
            Ops::CmpLt => {
                self.line(&format!("not.pred {d}, {a};"));
                self.line(&format!("and.pred {d}, {d}, {b};"));
            }
            Ops::Neg => self.line(&format!("not.pred {d}, {a};")),
            Ops::Mod => self.line(&format!("mov.pred {d}, 0;")),
            Ops::Trunc | Ops::Round => self.line(&format!("mov.pred {d}, {a};")),
            Ops::MulAcc => {
                self.line(&format!("and.pred {d}, {a}, {b};"));
                self.line(&format!("or.pred {d}, {d}, {};", s[2]));
            }
            op => return Err(format!("{op} on bool is not supported")),
        }
        Ok(())
    }

    fn float_alu(&mut self, u: &UOp, dt: DType, s: &[String]) -> Result<(), String> {
        let op = u.op();
        if is_half(dt) {
            return Err(format!(
                "{op} on {dt} must be computed in float32 (emulate pass)"
            ));
        }
        let t = arith(dt)?;
        let bt = bits(class_of(dt)?);
        let d = self.def(u)?;
        let (a, b) = (&s[0], s.get(1).unwrap_or(&s[0]));
        match op {
            Ops::Add => self.line(&format!("add.rn.{t} {d}, {a}, {b};")),
            Ops::Sub => self.line(&format!("sub.rn.{t} {d}, {a}, {b};")),
            Ops::Mul => self.line(&format!("mul.rn.{t} {d}, {a}, {b};")),
            Ops::FDiv => self.line(&format!("div.rn.{t} {d}, {a}, {b};")),
            Ops::IDiv => {
                self.line(&format!("div.rn.{t} {d}, {a}, {b};"));
                self.line(&format!("cvt.rzi.{t}.{t} {d}, {d};"));
            }
            Ops::Neg => self.line(&format!("neg.{t} {d}, {a};")),
            Ops::Recip => self.line(&format!("rcp.rn.{t} {d}, {a};")),
            Ops::Sqrt => self.line(&format!("sqrt.rn.{t} {d}, {a};")),
            Ops::Trunc => self.line(&format!("cvt.rzi.{t}.{t} {d}, {a};")),
            Ops::Round => self.line(&format!("cvt.rni.{t}.{t} {d}, {a};")),
            Ops::Max => {
                // NaN propagates (PTX `max` would return the other operand).
                let p = self.new_reg(Class::Pred);
                self.line(&format!("setp.nan.{t} {p}, {a}, {b};"));
                self.line(&format!("max.{t} {d}, {a}, {b};"));
                self.line(&format!("@{p} add.rn.{t} {d}, {a}, {b};"));
            }
            Ops::MulAcc => self.line(&format!("fma.rn.{t} {d}, {a}, {b}, {};", s[2])),
            Ops::CmpLt => self.line(&format!("setp.lt.{t} {d}, {a}, {b};")),
            Ops::CmpNe => self.line(&format!("setp.neu.{t} {d}, {a}, {b};")),
            Ops::CmpEq => self.line(&format!("setp.eq.{t} {d}, {a}, {b};")),
            Ops::And => self.line(&format!("and.{bt} {d}, {a}, {b};")),
            Ops::Or => self.line(&format!("or.{bt} {d}, {a}, {b};")),
            Ops::Xor => self.line(&format!("xor.{bt} {d}, {a}, {b};")),
            op => {
                return Err(format!(
                    "{op} on {dt} must be decomposed before PTX rendering"
                ));
            }
        }
        Ok(())
    }

    fn int_alu(&mut self, u: &UOp, dt: DType, s: &[String]) -> Result<(), String> {
        let op = u.op();
        let t = arith(dt)?;
        let c = class_of(dt)?;
        let bt = bits(c);
        let w = if c == Class::B64 { "64" } else { "32" };
        let (a, b) = (s[0].clone(), s.get(1).unwrap_or(&s[0]).clone());
        if matches!(op, Ops::IDiv | Ops::FDiv | Ops::Mod) {
            let d = self.def(u)?;
            return self.divmod(op, &d, &a, &b, u.s(1), dt);
        }
        if matches!(op, Ops::Shl | Ops::Shr) {
            // The amount as the value's dtype (exec_alu's reading), then as u32 clamped: PTX
            // clamps amounts above the width, which gives exactly exec_alu's results.
            let amt_dt = u.s(1).dtype();
            let mut amt = b.clone();
            if amt_dt != dt {
                let r = self.new_reg(c);
                self.cast(&r, &b, amt_dt, dt)?;
                amt = r;
            }
            if c == Class::B64 {
                let m = self.new_reg(Class::B64);
                let r = self.new_reg(Class::B32);
                self.line(&format!("min.u64 {m}, {amt}, 64;"));
                self.line(&format!("cvt.u32.u64 {r}, {m};"));
                amt = r;
            }
            let d = self.def(u)?;
            if op == Ops::Shl {
                self.line(&format!("shl.{bt} {d}, {a}, {amt};"));
            } else {
                self.line(&format!("shr.{t} {d}, {a}, {amt};"));
            }
            self.canon(&d, dt);
            return Ok(());
        }
        let d = self.def(u)?;
        match op {
            Ops::Add => self.line(&format!("add.{t} {d}, {a}, {b};")),
            Ops::Sub => self.line(&format!("sub.{t} {d}, {a}, {b};")),
            Ops::Mul => self.line(&format!("mul.lo.{t} {d}, {a}, {b};")),
            Ops::Neg => self.line(&format!("neg.s{w} {d}, {a};")),
            Ops::MulAcc => self.line(&format!("mad.lo.{t} {d}, {a}, {b}, {};", s[2])),
            Ops::Max => self.line(&format!("max.{t} {d}, {a}, {b};")),
            Ops::And => self.line(&format!("and.{bt} {d}, {a}, {b};")),
            Ops::Or => self.line(&format!("or.{bt} {d}, {a}, {b};")),
            Ops::Xor => self.line(&format!("xor.{bt} {d}, {a}, {b};")),
            Ops::Trunc | Ops::Round => self.line(&format!("mov.{bt} {d}, {a};")),
            Ops::CmpLt => self.line(&format!("setp.lt.{t} {d}, {a}, {b};")),
            Ops::CmpNe => self.line(&format!("setp.ne.{t} {d}, {a}, {b};")),
            Ops::CmpEq => self.line(&format!("setp.eq.{t} {d}, {a}, {b};")),
            Ops::Recip => {
                // 1 // x: x for x in {-1, 0, 1} (0 // 0 is 0), else 0.
                let p = self.new_reg(Class::Pred);
                if dt.is_unsigned() {
                    self.line(&format!("setp.le.u{w} {p}, {a}, 1;"));
                } else {
                    self.line(&format!("add.s{w} {d}, {a}, 1;"));
                    self.line(&format!("setp.le.u{w} {p}, {d}, 2;"));
                }
                self.line(&format!("selp.{bt} {d}, {a}, 0, {p};"));
            }
            op => {
                return Err(format!("{op} on {dt} is not supported by the PTX renderer"));
            }
        }
        if !op.is_comparison() {
            self.canon(&d, dt);
        }
        Ok(())
    }

    /// Total integer division/remainder: `x/0 = x%0 = 0`, `MIN/-1` wraps (`-x`), never UB.
    fn divmod(
        &mut self,
        op: Ops,
        d: &str,
        a: &str,
        b: &str,
        bu: &UOp,
        dt: DType,
    ) -> Result<(), String> {
        let t = arith(dt)?;
        let c = class_of(dt)?;
        let bt = bits(c);
        let w = if c == Class::B64 { "64" } else { "32" };
        let instr = if op == Ops::Mod { "rem" } else { "div" };
        let signed = !dt.is_unsigned();
        if let Some(k) = bu.as_const() {
            let k = k.cast(dt);
            if k.is_zero() {
                self.line(&format!("mov.{bt} {d}, 0;"));
            } else if signed && k.as_i64() == -1 {
                if op == Ops::Mod {
                    self.line(&format!("mov.{bt} {d}, 0;"));
                } else {
                    self.line(&format!("neg.s{w} {d}, {a};"));
                    self.canon(d, dt);
                }
            } else {
                self.line(&format!("{instr}.{t} {d}, {a}, {b};"));
            }
            return Ok(());
        }
        let pz = self.new_reg(Class::Pred);
        let safe = self.new_reg(c);
        self.line(&format!("setp.eq.{t} {pz}, {b}, 0;"));
        if signed {
            let pm = self.new_reg(Class::Pred);
            let bad = self.new_reg(Class::Pred);
            self.line(&format!("setp.eq.{t} {pm}, {b}, -1;"));
            self.line(&format!("or.pred {bad}, {pz}, {pm};"));
            self.line(&format!("selp.{bt} {safe}, 1, {b}, {bad};"));
            self.line(&format!("{instr}.{t} {d}, {a}, {safe};"));
            if op == Ops::Mod {
                self.line(&format!("@{pm} mov.{bt} {d}, 0;"));
            } else {
                self.line(&format!("@{pm} neg.s{w} {d}, {a};"));
            }
        } else {
            self.line(&format!("selp.{bt} {safe}, 1, {b}, {pz};"));
            self.line(&format!("{instr}.{t} {d}, {a}, {safe};"));
        }
        self.line(&format!("@{pz} mov.{bt} {d}, 0;"));
        self.canon(d, dt);
        Ok(())
    }
}
