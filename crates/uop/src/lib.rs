//! The UOp IR: tinygrad's one graph representation, used for tensor graphs, kernels and linear
//! programs alike, plus the machinery that rewrites it.
//!
//! Module map:
//! - [`ops`]: the [`Ops`] enum, each op's source/argument contract, and the op groups.
//! - [`arg`]: [`Arg`], the non-UOp payload of a node.
//! - [`uop`]: the hash-consed, immutable [`UOp`] node; toposort, substitution, printing.
//! - [`build`]: constructors and arithmetic (`&a + &b`, `x.idiv(4)`, `x.lt(y)`).
//! - [`shape`]: tensor-level shapes derived from the graph.
//! - [`upat`]: patterns ([`UPat`]), rules ([`rules!`]) and the op-indexed [`PatternMatcher`].
//! - [`rewrite`]: [`graph_rewrite`], to a fixed point, memoized, iterative.
//! - [`render`]: an infix printer for expressions.
//! - [`alu`]: [`exec_alu`], the reference semantics of every ALU op on constants.
//! - [`symbolic`](mod@symbolic): bounds ([`UOp::vmin`]/[`UOp::vmax`]), the rule sets [`symbolic_simple`] ⊂
//!   [`symbolic()`] ⊂ [`sym`], and [`UOp::simplify`] — one file per topic in `symbolic/`.
//! - [`divmod`]: bounds-driven folding of integer division and modulo.
//! - [`sint`]: [`SInt`], a size that may be symbolic.
//! - [`verify`](mod@verify): per-stage checks of each node against its op's contract.
//! - [`gradient`]: reverse-mode gradients on the tensor graph: local derivative rules
//!   ([`pm_gradient`]) and [`compute_gradient`].
//!
//! This crate knows nothing about tensors or devices, and has no `unsafe`.

#![forbid(unsafe_code)]

pub mod alu;
pub mod arg;
pub mod build;
pub mod divmod;
pub mod gradient;
pub mod ops;
pub mod render;
pub mod rewrite;
pub mod shape;
pub mod sint;
pub mod symbolic;
pub mod uop;
pub mod upat;
pub mod verify;

pub use alu::exec_alu;
pub use arg::{Arg, AxisKind, Opaque};
pub use build::IntoUOp;
pub use divmod::gcd;
pub use gradient::{CustomGradient, compute_gradient, custom_gradient, pm_gradient};
pub use ops::{NUM_OPS, Ops};
pub use rewrite::{RewriteError, graph_rewrite, try_graph_rewrite, try_graph_rewrite_limit};
pub use sint::{SInt, prod};
pub use symbolic::{cmp_uop, sym, symbolic, symbolic_simple};
pub use tinygrad_dtype::{ConstValue, DType};
pub use uop::{UOp, interned_count};
pub use upat::{Captures, IntoRewrite, IntoUPat, PatternMatcher, Rule, UPat};
pub use verify::{Stage, VerifyError, verify};
