//! Code generation: a kernel (UOps) becomes an optimized, target-neutral linear program, which a
//! renderer per target turns into code.
//!
//! Module map:
//! - [`gemm`]: matmul-shaped kernels split into packing kernels, a GEMM and an epilogue.
//! - [`gemm_in_place`]: GEMM operands with separable indices, read in place through tables.
//! - [`gated_loads`]: selects that repeat a gated load's gate, removed.
//! - [`emulate`]: `float16`/`bfloat16` and fp8 computed in `float32` on targets without them
//!   (fp8 as `uint8` bits with integer conversions).
//! - [`late`]: subtraction and negation as their own ops and FMA contraction, just before
//!   linearizing.
//! - [`merge_ranges`]: adjacent reduce ranges merged into one where the indexing allows.
//! - [`linearize`]: kernel AST -> flat program order with explicit loops and accumulators.
//! - [`reassociate`]: index sums ordered by loop level, so loop-invariant parts are hoisted.
//! - [`opt`]: kernel optimizations (upcast, unroll, 4-lane vectors), their heuristic and the
//!   moves BEAM search tries — in `opt/`: choosing, applying, expanding lanes.
//! - [`program`]: [`Program`] and [`to_program`], the pipeline from kernel AST to program.
//! - [`renderer`]: the [`Renderer`] trait.
//! - [`row_reduce`]: reductions along contiguous rows, planned for native vector loops.
//! - [`cranelift`]: the Cranelift renderer (CPU JIT) — in `cranelift/`: statements, casts and ALU
//!   ops.
//! - [`ptx`]: the PTX renderer (NVIDIA GPUs; CUDA device, `ptxas` checks) — in `ptx/`:
//!   registers and types, statements, ALU ops.
//! - [`wgsl`]: the WGSL renderer (WebGPU compute shaders; `WEBGPU` device, `naga` checks) — in
//!   `wgsl/`: statements, expressions, helper functions.
//! - `grid`: which loops a GPU renderer maps to its invocations.
//! - [`decomp`]: transcendentals (`exp2`, `log2`, `sin`) as graphs of simple ALU ops.

pub mod cranelift;
pub mod decomp;
pub mod emulate;
pub mod gated_loads;
pub mod gemm;
pub mod gemm_in_place;
mod grid;
pub mod late;
pub mod linearize;
pub mod merge_ranges;
pub mod opt;
pub mod program;
pub mod ptx;
pub mod reassociate;
pub mod renderer;
pub mod row_reduce;
pub mod wgsl;

pub use program::{
    Program, TargetCaps, beam_candidates, to_program, to_program_with, to_program_with_opts,
};
pub use renderer::{RenderError, Renderer};
