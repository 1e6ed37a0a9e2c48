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
//!
//! Module map:
//! - this file: [`PtxRenderer`] and its [`Renderer`] implementation (the module text around the
//!   kernel), the launch ([`launch_dims`], [`entry_name`]), and the rendering state (`Ctx`).
//! - `regs`: register classes and the PTX types and literals of dtypes.
//! - `emit`: each linearized op as PTX: registers, the prologue, loops (plain, grouped,
//!   grid-stride), indexing, loads and stores.
//! - `alu`: casts, bitcasts and ALU ops (float, integer with guarded division, bool).

mod alu;
mod emit;
mod regs;

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use tinygrad_dtype::DType;
use tinygrad_uop::UOp;

use crate::grid::{GridPlan, GroupPlan, grid_plan, group_plan};
use crate::{Program, RenderError, Renderer, TargetCaps};

use regs::{Class, class_of};

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
