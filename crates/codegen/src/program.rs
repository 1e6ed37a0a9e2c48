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
    /// The size of the outermost output loop (what a launcher may split across threads), if the
    /// kernel has any output loop.
    pub outer_size: Option<usize>,
    /// The kernel optimizations applied (empty when none).
    pub opts: KernelOpts,
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
    crate::merge_ranges::merge_reduce_ranges(&ast)
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

    let mut ast = prepare(ast, caps);
    let mut opts = KernelOpts::default();
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
        .and_then(|r| r.s(0).as_int())
        .map(|s| s as usize);
    Program {
        name: kernel_name(&ast),
        ast,
        uops,
        globals,
        outer_size,
        opts,
    }
}
