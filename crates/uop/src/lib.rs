//! The UOp IR: tinygrad's one graph representation, used for tensor graphs, kernels and linear
//! programs alike, plus the machinery that rewrites it.
//!
//! Module map (filled in as the IR lands):
//! - `ops`: the `Ops` enum and its groups (unary, binary, ALU, movement, reduce, ...).
//! - `uop`: the hash-consed, immutable `UOp` node, toposort, substitution, printing.
//! - `upat` / `matcher`: patterns and the op-indexed `PatternMatcher`.
//! - `rewrite`: `graph_rewrite`, bottom-up or top-down, to a fixed point.
//! - `symbolic`: integer range analysis (`vmin`/`vmax`) and the simplification rules.
//! - `verify`: the per-stage spec each op's sources and argument must satisfy.
//!
//! This crate knows nothing about tensors or devices.
