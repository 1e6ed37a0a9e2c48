//! [`Program`]: a linearized kernel ready for a renderer, and the pipeline that produces it.

use tinygrad_dtype::DType;
use tinygrad_uop::{Arg, Ops, UOp};

use crate::linearize::{kernel_name, linearize};
use crate::opt::{KernelOpts, apply_opts, heuristic};

/// What a target can execute natively; the pipeline decomposes the rest.
#[derive(Clone, Copy, Debug)]
pub struct TargetCaps {
    /// Native `Exp2`, `Log2` and `Sin` (else they become polynomials).
    pub transcendentals: bool,
    /// Native `float16`/`bfloat16` arithmetic (else it is computed in `float32`).
    pub half: bool,
    /// Native fp8 (`fp8e4m3`, `fp8e5m2`) values (else they are `uint8` bits, computed in
    /// `float32` and converted by integer arithmetic).
    pub fp8: bool,
    /// A fused multiply-add: float `a*b + c` becomes one `MulAcc`, rounded once (as tinygrad's
    /// C backends do, compiled with contraction for the host).
    pub fma: bool,
}

/// A kernel as a flat, ordered list of UOps with explicit loops, plus what a launcher needs.
#[derive(Clone, Debug)]
pub struct Program {
    /// A readable name (`E_4_4`, `r_16_32`).
    pub name: String,
    /// The kernel AST the program was built from (its identity for caching).
    pub ast: UOp,
    /// The instructions, in execution order: `Range` opens a loop, `End` closes it.
    pub uops: Vec<UOp>,
    /// The element dtype of each global buffer slot (slot 0 is the output).
    pub globals: Vec<DType>,
    /// The least number of elements each global slot's buffer must have: what the kernel's
    /// ungated loads and stores can reach ([`slot_extents`]). Launchers check their buffers
    /// against it before running native code.
    pub extents: Vec<usize>,
    /// The size of the outermost output loop (what a launcher may split across threads), if the
    /// kernel has any output loop. For a loop over a variable's range, the largest size it can
    /// take: the kernel skips iterations at or past the bound value.
    pub outer_size: Option<usize>,
    /// The symbolic variables (`DefineVar`) the kernel reads, sorted by name: name and inclusive
    /// bounds. A launcher passes their values in this order; each must lie in its bounds (the
    /// extents assume it).
    pub vars: Vec<(std::sync::Arc<str>, i64, i64)>,
    /// The kernel optimizations applied (empty when none).
    pub opts: KernelOpts,
}

/// The position of variable `name` in a program's [`Program::vars`] (where a launcher passes
/// its value), for renderers and interpreters.
///
/// # Errors
/// If there is no such variable.
pub fn var_index(vars: &[(std::sync::Arc<str>, i64, i64)], name: &str) -> Result<usize, String> {
    vars.iter()
        .position(|(n, _, _)| &**n == name)
        .ok_or_else(|| format!("variable {name} is not among the kernel's"))
}

/// Lowers a kernel AST into a [`Program`] for a target with capabilities `caps`, without kernel
/// optimizations (see [`to_program_with`]).
pub fn to_program(ast: &UOp, caps: TargetCaps) -> Program {
    to_program_with(ast, caps, false)
}

/// Lowers a kernel AST into a [`Program`]; with `optimize`, the hand-coded heuristic's opts
/// ([`crate::opt`]: upcast, unroll, 4-lane vectors) are applied before linearizing.
pub fn to_program_with(ast: &UOp, caps: TargetCaps, optimize: bool) -> Program {
    to_program_inner(ast, caps, optimize.then_some(None))
}

/// Lowers a kernel AST into a [`Program`] with the given opts instead of the heuristic's
/// (falling back to none if they don't apply).
pub fn to_program_with_opts(ast: &UOp, caps: TargetCaps, opts: &KernelOpts) -> Program {
    to_program_inner(ast, caps, Some(Some(opts.clone())))
}

/// The next opts BEAM search tries from `from` for `ast` on a target with `caps`
/// ([`crate::opt::beam_moves`] on the AST as the pipeline simplifies it before applying opts).
pub fn beam_candidates(ast: &UOp, caps: TargetCaps, from: &KernelOpts) -> Vec<KernelOpts> {
    crate::opt::beam_moves(&prepare(ast, caps), from)
}

/// The AST as opts see it: index arithmetic simplified, half precision emulated,
/// transcendentals decomposed where the target lacks them, and adjacent reduce ranges merged
/// where the indexing allows.
fn prepare(ast: &UOp, caps: TargetCaps) -> UOp {
    // Simplify index arithmetic (reshape's div/mod, pad's bounds, constant folding) first.
    let mut ast = tinygrad_uop::graph_rewrite(ast, tinygrad_uop::sym(), &mut (), false);
    ast = tinygrad_uop::graph_rewrite(&ast, crate::gated_loads::gated_load_rules(), &mut (), false);
    if !caps.half {
        ast =
            tinygrad_uop::graph_rewrite(&ast, crate::emulate::emulate_half_rules(), &mut (), false);
    }
    if !caps.fp8 {
        ast = crate::emulate::emulate_fp8(&ast);
    }
    if !caps.transcendentals {
        ast = tinygrad_uop::graph_rewrite(&ast, crate::decomp::decomp_rules(), &mut (), false);
    }
    if ast.toposort().iter().any(|u| u.op() == Ops::DefineVar) {
        return ast; // ranges of a variable's size stay as they are
    }
    crate::merge_ranges::merge_reduce_ranges(&ast)
}

/// For each global slot of a kernel AST (as scheduled: `Index(DefineGlobal(slot), i)`, gated
/// `Index(.., i, valid)`), the least buffer size its ungated accesses need: the largest value
/// the index can take plus one, from the index's bounds ([`UOp::vmax`]); `usize::MAX` where an
/// index may be negative or its bounds are unknown (no buffer is large enough: a launcher
/// refuses). Gated accesses are skipped: renderers perform them only where the gate holds.
///
/// ```
/// use tinygrad_codegen::program::slot_extents;
/// use tinygrad_dtype::{AddrSpace, DType};
/// use tinygrad_uop::{Arg, AxisKind, Ops, UOp};
/// let g = |slot: i64| UOp::new(Ops::DefineGlobal, DType::FLOAT32.ptr(AddrSpace::Global),
///     vec![], Arg::Int(slot));
/// let r = UOp::range(8, 0, AxisKind::Loop);
/// let load = UOp::new(Ops::Load, DType::FLOAT32,
///     vec![UOp::new(Ops::Index, g(1).dtype(), vec![g(1), &r * 2i64 + 1i64], Arg::None)], Arg::None);
/// let store = UOp::new(Ops::Store, DType::VOID,
///     vec![UOp::new(Ops::Index, g(0).dtype(), vec![g(0), r.clone()], Arg::None), load], Arg::None);
/// let ast = UOp::new(Ops::Sink, DType::VOID, vec![store], Arg::None);
/// assert_eq!(slot_extents(&ast), vec![8, 16]);
/// ```
pub fn slot_extents(ast: &UOp) -> Vec<usize> {
    let mut extents: Vec<usize> = Vec::new();
    for u in ast.toposort() {
        if u.op() != Ops::Index || u.src().len() != 2 || u.s(0).op() != Ops::DefineGlobal {
            continue;
        }
        let Arg::Int(slot) = u.s(0).arg() else {
            continue;
        };
        let slot = *slot as usize;
        if extents.len() <= slot {
            extents.resize(slot + 1, 0);
        }
        let (lo, hi) = u.s(1).bounds();
        let need = if lo < 0 || hi == i64::MAX {
            usize::MAX
        } else {
            hi as usize + 1
        };
        extents[slot] = extents[slot].max(need);
    }
    extents
}

/// `opts`: `None` no opts, `Some(None)` the heuristic's, `Some(Some(o))` exactly `o`.
fn to_program_inner(
    ast: &UOp,
    caps: TargetCaps,
    opts_choice: Option<Option<KernelOpts>>,
) -> Program {
    // The buffer slots come from the kernel as scheduled: simplification may remove every load
    // of an input (all of them gated off, e.g. an empty input), but the launcher still binds it.
    let mut globals: Vec<DType> = Vec::new();
    for u in ast.toposort() {
        if u.op() == Ops::DefineGlobal
            && let Arg::Int(slot) = u.arg()
        {
            let slot = *slot as usize;
            if globals.len() <= slot {
                globals.resize(slot + 1, DType::VOID);
            }
            globals[slot] = u.dtype().base();
        }
    }

    let mut extents = slot_extents(ast);
    extents.resize(globals.len().max(extents.len()), 0);
    let vars = kernel_vars(ast);
    let mut ast = prepare(ast, caps);
    let mut opts = KernelOpts::default();
    // loops over a variable's range have no constant size to upcast or unroll by: the opts
    // split only ranges of constant size (`apply_opts` refuses the others), so a kernel over
    // a symbolic length (attention over a KV cache's valid part) still gets its constant
    // axes vectorized (the head's 64 values)
    if let Some(choice) = opts_choice {
        let o = choice.unwrap_or_else(|| heuristic(&ast));
        if let Ok(new) = apply_opts(&ast, &o) {
            ast = new;
            opts = o;
        }
    }
    let ast = crate::reassociate::reassociate_index_sums(&ast);
    let mut ast = tinygrad_uop::graph_rewrite(&ast, crate::late::late_rules(), &mut (), false);
    if caps.fma {
        ast = tinygrad_uop::graph_rewrite(&ast, crate::late::fma_rules(), &mut (), false);
    }
    let uops = linearize(&ast);
    let outer_size = uops
        .iter()
        .find(|u| u.op() == Ops::Range)
        .filter(|r| !matches!(r.arg(), Arg::Range(_, tinygrad_uop::AxisKind::Reduce)))
        .map(|r| r.s(0).as_int().unwrap_or_else(|| r.s(0).vmax()).max(0) as usize);
    Program {
        name: kernel_name(&ast),
        ast,
        uops,
        globals,
        extents,
        outer_size,
        vars,
        opts,
    }
}

/// The variables (`DefineVar`) of a kernel AST, sorted by name (one entry per name): name and
/// inclusive bounds — the order a launcher passes their values in.
///
/// # Panics
/// If two variables share a name but not their bounds.
pub fn kernel_vars(ast: &UOp) -> Vec<(std::sync::Arc<str>, i64, i64)> {
    let mut vars: Vec<(std::sync::Arc<str>, i64, i64)> = Vec::new();
    for u in ast.toposort() {
        if u.op() != Ops::DefineVar {
            continue;
        }
        let Arg::Var(name, lo, hi) = u.arg() else {
            panic!("kernel_vars: DefineVar without a Var argument: {}", u.arg())
        };
        match vars.iter().find(|(n, _, _)| n == name) {
            Some((_, l, h)) => assert!(
                (l, h) == (lo, hi),
                "kernel_vars: variable {name} has bounds [{l}, {h}] and [{lo}, {hi}]"
            ),
            None => vars.push((name.clone(), *lo, *hi)),
        }
    }
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    vars
}
